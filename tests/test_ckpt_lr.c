/* test_ckpt_lr.c: a checkpoint records its learning rate (issue 33 §2, "a different learning rate resumes
 * silently: say so"): the file keeps it (version 2) and still reads version 1 files, which have none; a
 * --resume with another --optim lr prints one warning line naming both rates and trains at the given one,
 * for ring and the PS; the same rate prints nothing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trainer/ckpt.h"
#include "core/err.h"
#include "tests/lib/ranks.h"

#define HDR_BYTES 336 /* the on-disk header (trainer/ckpt.c s_hdr_t) */

/* A file of count parameters and no optimizer state: rewrite its version and last header word (the learning
 * rate in version 2, padding in version 1) and the checksum that covers them, as ckpt_write chains it. */
static void s_patch(const char *path, size_t count, uint32_t version, uint32_t last)
{
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    size_t n = HDR_BYTES + count * 4 + 8;
    unsigned char *b = malloc(n);
    cr_assert(b && fread(b, 1, n, f) == n);
    memcpy(b + 8, &version, 4);
    memcpy(b + HDR_BYTES - 4, &last, 4);
    uint64_t h = ckpt_hash(b + HDR_BYTES, count * 4, ckpt_hash(b, HDR_BYTES, 0));
    memcpy(b + n - 8, &h, 8);
    rewind(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
}

Test(ckpt_lr, the_file_records_the_rate_and_reads_version_1)
{
    char path[] = "/tmp/sb-cklr-XXXXXX";
    close(mkstemp(path));
    float p[4] = {1, 2, 3, 4};
    ckpt_t w;
    memset(&w, 0, sizeof w);
    snprintf(w.model, sizeof w.model, "mlp:2-2");
    w.count = 4;
    w.params = p;
    w.lr = 0.125f;
    cr_assert_eq(ckpt_write(path, &w), 0, "%s", err_detail());
    ckpt_t r;
    cr_assert_eq(ckpt_read(path, &r), 0, "%s", err_detail());
    cr_expect(r.has_lr && r.lr == 0.125f, "has_lr %d, lr %g", r.has_lr, (double)r.lr);
    ckpt_free(&r);
    /* the same file as version 1 wrote it: padding where the rate is; read, with no rate */
    s_patch(path, 4, 1, 0);
    cr_assert_eq(ckpt_read(path, &r), 0, "a version 1 file is refused: %s", err_detail());
    cr_expect(!r.has_lr && r.lr == 0.0f && r.params[3] == 4.0f, "has_lr %d, lr %g", r.has_lr, (double)r.lr);
    ckpt_free(&r);
    /* a version this build does not know yet is refused, saying which it reads */
    s_patch(path, 4, 3, 0);
    cr_expect_neq(ckpt_read(path, &r), 0);
    cr_expect(strstr(err_detail(), "reads versions 1 to 2") != NULL, "%s", err_detail());
    err_clear();
    unlink(path);
}

/* Occurrences of needle in s. */
static int s_count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The checksum after step 12 in a run's output, or "". */
static void s_sum(const char *out, char *sum, size_t len)
{
    const char *p = strstr(out, "parameters after step 12: checksum ");
    sum[0] = 0;
    if (p) snprintf(sum, len, "%.16s", p + strlen("parameters after step 12: checksum "));
}

static void s_case(const char *engine)
{
    char harness[512], ck[] = "/tmp/sb-cklr-XXXXXX", cmd[2048], out[1 << 16], same[32], other[32];
    cr_assert(harness_path(harness, sizeof harness) == 0, "build the harness first (make)");
    close(mkstemp(ck));
    const char *common = "--procs 2 --model mlp:784-32-10 --batch 32 --warmup-steps 1 --seed 3";
    snprintf(cmd, sizeof cmd, "%s train --engine %s %s --optim sgd:lr=0.05 --steps 6 --save %s", harness, engine, common, ck);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s --save:\n%s", engine, out);
    /* the same rate: no word about it */
    snprintf(cmd, sizeof cmd, "%s train --engine %s %s --optim sgd:lr=0.05 --steps 6 --resume %s", harness, engine, common, ck);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s --resume:\n%s", engine, out);
    cr_expect(strstr(out, "learning rate") == NULL, "%s: a warning for the same rate:\n%s", engine, out);
    s_sum(out, same, sizeof same);
    /* another: one line (rank 0's), naming both, and the run goes on at the new one */
    snprintf(cmd, sizeof cmd, "%s train --engine %s %s --optim sgd:lr=0.2 --steps 6 --resume %s", harness, engine, common, ck);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s --resume at another rate is refused:\n%s", engine, out);
    cr_expect_eq(s_count(out, "saved at learning rate 0.05, this run's --optim gives 0.2: training continues at 0.2"), 1,
                 "%s: not one warning naming both rates:\n%s", engine, out);
    s_sum(out, other, sizeof other);
    cr_expect(same[0] && other[0] && strcmp(same, other), "%s: resumed at 0.05 and at 0.2, the same parameters (%s, %s)",
              engine, same, other);
    snprintf(cmd, sizeof cmd, "rm -f %s %s.*", ck, ck);
    run_cmd(cmd, out, sizeof out);
}

Test(ckpt_lr, resume_at_another_rate_warns_ring, .timeout = 120) { s_case("ring"); }
Test(ckpt_lr, resume_at_another_rate_warns_ps, .timeout = 120) { s_case("ps"); }
