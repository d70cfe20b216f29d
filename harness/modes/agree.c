/* agree.c: the options every rank must share, compared at rendezvous through the store (agree.h). */
#include "harness/modes/agree.h"
#include "core/err.h"
#include "core/store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void h_agree_add(h_agree_t *a, const char *name, const char *fmt, ...)
{
    if (a->n >= H_AGREE_MAX) return;
    snprintf(a->name[a->n], sizeof a->name[a->n], "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->val[a->n], sizeof a->val[a->n], fmt, ap);
    va_end(ap);
    for (char *p = a->val[a->n]; *p; p++)
        if (*p == '\n') *p = ' ';
    a->n++;
}

static size_t s_encode(const h_agree_t *a, char *out, size_t len)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < a->n && off < len; i++)
        off += (size_t)snprintf(out + off, len - off, "%s=%s\n", a->name[i], a->val[i]);
    return off < len ? off : len - 1;
}

/* The value of name in an encoded list, into v ("(none)" when absent). */
static void s_value(const char *enc, const char *name, char *v, size_t len)
{
    size_t nl = strlen(name);
    for (const char *p = enc; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            const char *e = strchr(p + nl + 1, '\n');
            size_t l = e ? (size_t)(e - (p + nl + 1)) : strlen(p + nl + 1);
            snprintf(v, len, "%.*s", (int)l, p + nl + 1);
            return;
        }
    }
    snprintf(v, len, "(none)");
}

int h_agree(comm_t *comm, const char *what, const h_agree_t *a, int timeout_ms)
{
    char enc[H_AGREE_MAX * 190], key[96], v[160];
    size_t el = s_encode(a, enc, sizeof enc);
    snprintf(key, sizeof key, "agree/%s/%d", what, comm->rank);
    CHECK(store_set(comm->store, key, enc, el + 1));
    int lo = comm->rank == 0 ? 1 : 0, hi = comm->rank == 0 ? comm->world : 1;
    /* per option: the ranks that differ from this one (up to 8 named) and the first of them's value */
    static __thread struct { char ranks[48]; int n; char other[160]; } d[H_AGREE_MAX];
    memset(d, 0, sizeof d);
    int ndiff = 0;
    for (int r = lo; r < hi; r++) {
        void *val = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "agree/%s/%d", what, r);
        int rc = store_get(comm->store, key, &val, &len, timeout_ms);
        if (rc < 0) return err_set(rc, "%s: rank %d did not post its options within %.1f s", what, r, timeout_ms / 1000.0);
        if (!len || ((char *)val)[len - 1]) { free(val); return err_set(ERR_PROTO, "%s: rank %d posted malformed options", what, r); }
        for (int i = 0; i < a->n; i++) {
            s_value(val, a->name[i], v, sizeof v);
            if (!strcmp(v, a->val[i])) continue;
            if (!d[i].n++) { snprintf(d[i].other, sizeof d[i].other, "%s", v); ndiff++; }
            size_t l = strlen(d[i].ranks);
            if (d[i].n <= 8) snprintf(d[i].ranks + l, sizeof d[i].ranks - l, "%s%d", d[i].n > 1 ? "," : "", r);
            else if (d[i].n == 9) snprintf(d[i].ranks + l, sizeof d[i].ranks - l, ",...");
        }
        free(val);
    }
    if (!ndiff) return 0;
    /* every option that differs, each with this rank's value and the others' */
    char msg[1536];
    size_t off = 0;
    for (int i = 0; i < a->n && off < sizeof msg; i++) {
        if (!d[i].n) continue;
        if (comm->rank == 0)
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s (rank 0: %s; rank%s %s: %s)", off ? ", " : "",
                                    a->name[i], a->val[i], d[i].n > 1 ? "s" : "", d[i].ranks, d[i].other);
        else
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s (rank %d: %s; rank 0: %s)", off ? ", " : "",
                                    a->name[i], comm->rank, a->val[i], d[i].other);
    }
    return err_set(ERR_MISMATCH, "%s: the ranks disagree on %d option%s: %s; every rank must be started with the same "
                   "options", what, ndiff, ndiff > 1 ? "s" : "", msg);
}
