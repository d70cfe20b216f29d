/* fuzz_jsonl.c: libFuzzer target for the JSON-lines results reader (harness/jsonl.c): h_jparse on the
 * input as one line (from an exactly sized buffer, so a read past its end is caught), then
 * h_jread_files on the input as a whole file; what is accepted must hold the invariants of h_jobj_t. */
#include "fuzz/fuzz.h"
#include "harness/record/jsonl.h"
#include "core/err.h"
#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    fuzz_init();
    return 0;
}

static void s_check(const h_jobj_t *o)
{
    for (size_t i = 0; i < o->n; i++) {
        const h_jfield_t *f = &o->f[i];
        FUZZ_ASSERT(f->key);
        FUZZ_ASSERT(h_jget(o, f->key) == f);              /* keys are unique */
        switch (f->type) {
        case HJ_NUM: FUZZ_ASSERT(isfinite(f->num)); break;
        case HJ_STR: FUZZ_ASSERT(f->str && strlen(f->str) < 1u << 30); break;
        case HJ_ARR:
            FUZZ_ASSERT(f->n == 0 || f->arr);
            for (size_t k = 0; k < f->n; k++) FUZZ_ASSERT(isfinite(f->arr[k]));
            break;
        case HJ_BOOL: FUZZ_ASSERT(f->num == 0 || f->num == 1); break;
        case HJ_NULL: break;
        default: FUZZ_ASSERT(!"unknown field type");
        }
    }
    (void)h_jnum(o, "step", 0);
    (void)h_jstr(o, "mode", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    h_jobj_t o = {0};
    char err[256];
    int rc = h_jparse((const char *)data, size, &o, err, sizeof err);
    if (rc == 0) {
        s_check(&o);
    } else {
        FUZZ_ASSERT(rc == ERR_CORRUPT && o.n == 0 && o.f == NULL);
        /* the reader says where: a column, or the key whose value it cannot take */
        FUZZ_ASSERT(!strncmp(err, "column ", 7) || !strncmp(err, "key \"", 5));
    }
    h_jfree(&o);

    char *files[1] = {(char *)fuzz_memfile(0, data, size)};
    h_jobj_t *objs = NULL;
    size_t nobjs = 0, nbad = 0;
    rc = h_jread_files(1, files, &objs, &nobjs, &nbad, NULL);
    FUZZ_ASSERT(rc == 0);
    for (size_t i = 0; i < nobjs; i++) {
        s_check(&objs[i]);
        FUZZ_ASSERT(h_jstr(&objs[i], "mode", NULL));
    }
    h_jfree_all(&objs, &nobjs);
    return 0;
}
