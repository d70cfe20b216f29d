/* test_report.c: `harness report`'s strict JSON-lines reader (values, escapes, every kind of malformed
 * line) and the report itself from the fixed tests/data/report_sample.jsonl: tables, scaling
 * efficiency, malformed lines named by file:line, figures with gnuplot, a clear note without it. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the harness is a program, not a library: compile the two files under test into this test */
#include "harness/jsonl.c"
#include "harness/report.c"

static int s_parse(const char *line, h_jobj_t *o, char *err, size_t errlen)
{
    return h_jparse(line, strlen(line), o, err, errlen);
}

Test(jsonl, values)
{
    h_jobj_t o = {0};
    char err[256];
    const char *l = "{\"mode\":\"bench\", \"n\": -1.5e3, \"z\":0, \"a\":[1, 2.5,-3], \"e\":[], \"t\":true, \"f\":false,"
                    " \"x\":null, \"s\":\"q\\\"\\\\\\/\\n\\u00e9\\ud83d\\ude00\"}  ";
    cr_assert_eq(s_parse(l, &o, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(h_jstr(&o, "mode", NULL), "bench");
    cr_assert_eq(h_jnum(&o, "n", 0), -1500.0);
    cr_assert_eq(h_jnum(&o, "z", 7), 0.0);
    const h_jfield_t *a = h_jget(&o, "a");
    cr_assert(a && a->type == HJ_ARR && a->n == 3 && a->arr[1] == 2.5 && a->arr[2] == -3);
    cr_assert(h_jget(&o, "e")->type == HJ_ARR && h_jget(&o, "e")->n == 0);
    cr_assert(h_jget(&o, "t")->type == HJ_BOOL && h_jget(&o, "t")->num == 1);
    cr_assert(h_jget(&o, "f")->type == HJ_BOOL && h_jget(&o, "f")->num == 0);
    cr_assert(h_jget(&o, "x")->type == HJ_NULL);
    cr_assert_eq(h_jnum(&o, "x", 42), 42);      /* null is not a number */
    cr_assert_str_eq(h_jstr(&o, "s", NULL), "q\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
    cr_assert_null(h_jget(&o, "missing"));
    h_jfree(&o);
    cr_assert_eq(s_parse("{}", &o, err, sizeof err), 0);
    cr_assert_eq(o.n, 0);
    h_jfree(&o);
}

Test(jsonl, malformed)
{
    static const char *bad[] = {
        "", "   ", "[]", "{", "{\"a\":1", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":1} x", "{\"a\":01}",
        "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":-}", "{\"a\":+1}", "{\"a\":\"x}", "{\"a\":\"\\q\"}",
        "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"\\u12\"}", "{\"a\":{\"b\":1}}", "{\"a\":[\"s\"]}",
        "{\"a\":[1,]}", "{\"a\":[1 2]}", "{\"a\":tru}", "{\"a\":1,\"a\":2}", "{\"a\":NaN}", "{\"a\":1e999}",
        "{\"a\":\"tab\there\"}", "{\"a\":\"\\u0000\"}", NULL};
    for (int i = 0; bad[i]; i++) {
        h_jobj_t o = {0};
        char err[256] = "";
        cr_assert_eq(s_parse(bad[i], &o, err, sizeof err), -1, "accepted: %s", bad[i]);
        cr_assert(strstr(err, "column "), "no position for '%s': %s", bad[i], err);
        cr_assert_eq(o.n, 0);
        cr_assert_null(o.f);
    }
}

/* Run h_report with stdout/stderr captured into files; returns its exit code. */
static int s_report_capture(int n, char **files, const char *outdir, char *out, size_t olen, char *err, size_t elen)
{
    char op[] = "/tmp/sb-report-out-XXXXXX", ep[] = "/tmp/sb-report-err-XXXXXX";
    int ofd = mkstemp(op), efd = mkstemp(ep);
    cr_assert(ofd >= 0 && efd >= 0);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(ofd, 1);
    dup2(efd, 2);
    int rc = h_report(n, files, outdir, "text");
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    ssize_t k = pread(ofd, out, olen - 1, 0);
    out[k > 0 ? k : 0] = '\0';
    k = pread(efd, err, elen - 1, 0);
    err[k > 0 ? k : 0] = '\0';
    close(ofd);
    close(efd);
    unlink(op);
    unlink(ep);
    return rc;
}

static void s_sample(char *path, size_t len)
{
    /* __FILE__ is tests/test_report.c as the Makefile compiles it (from the repository root) */
    const char *f = __FILE__;
    const char *slash = strrchr(f, '/');
    snprintf(path, len, "%.*s/data/report_sample.jsonl", slash ? (int)(slash - f) : 1, slash ? f : ".");
}

static int s_nonempty(const char *dir, const char *name)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 && st.st_size > 100;
}

Test(report, tables_and_malformed_lines, .timeout = 60)
{
    char path[512], dir[] = "/tmp/sb-report-XXXXXX";
    s_sample(path, sizeof path);
    cr_assert(mkdtemp(dir));
    setenv("SYNCBENCH_GNUPLOT", "", 1);            /* tables only here */
    static char out[65536], err[65536];
    char *files[] = {path};
    int rc = s_report_capture(1, files, dir, out, sizeof out, err, sizeof err);
    unsetenv("SYNCBENCH_GNUPLOT");
    cr_assert_eq(rc, 0, "rc %d\nstdout:\n%s\nstderr:\n%s", rc, out, err);
    /* every malformed line named by file:line, nothing else complained about */
    static const int badlines[] = {7, 8, 12, 14, 18};
    for (size_t i = 0; i < sizeof badlines / sizeof badlines[0]; i++) {
        char want[600];
        snprintf(want, sizeof want, "%s:%d: malformed result line", path, badlines[i]);
        cr_assert(strstr(err, want), "missing '%s' in stderr:\n%s", want, err);
    }
    cr_assert_null(strstr(err, ":6:"), "blank line reported:\n%s", err);
    cr_assert(strstr(out, "5 malformed lines skipped"), "%s", out);
    cr_assert(strstr(out, "bench 5, train 4, model 2"), "%s", out);
    /* bench table: columns per engine@world, ps labelled by its layout */
    cr_assert(strstr(out, "ring@2") && strstr(out, "ring@4") && strstr(out, "tree@4") && strstr(out, "ps-sync-servers1@4"), "%s", out);
    /* 1M busbw of ring@4: 1 MiB / 1500 us * 1.5 = 1.049 GB/s */
    cr_assert(strstr(out, "1.049"), "%s", out);
    /* scaling efficiency: 1800 / (2 * 1000) = 0.900, 3000 / (4 * 1000) = 0.750; ps has no world 1 */
    cr_assert(strstr(out, "0.900") && strstr(out, "0.750"), "%s", out);
    cr_assert(strstr(out, "1.000"), "%s", out);
    /* memory imbalance of the ps line: max 4 MiB / mean 2 MiB = 2.000 */
    cr_assert(strstr(out, "2.000"), "%s", out);
    /* model: predicted vs measured with the error, the extrapolation row */
    cr_assert(strstr(out, "-8.0"), "%s", out);
    cr_assert(strstr(out, "1024") && strstr(out, "2.50"), "%s", out);
    cr_assert(strstr(out, "gnuplot was not found"), "%s", out);
    cr_assert(s_nonempty(dir, "report.gp"), "the script is written even without gnuplot");
    cr_assert(!s_nonempty(dir, "bench_busbw.png"));
}

Test(report, figures, .timeout = 120)
{
    if (!s_gnuplot()) cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox)");
    char path[512], dir[] = "/tmp/sb-report-XXXXXX";
    s_sample(path, sizeof path);
    cr_assert(mkdtemp(dir));
    static char out[65536], err[65536];
    char *files[] = {path};
    int rc = s_report_capture(1, files, dir, out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "rc %d\nstdout:\n%s\nstderr:\n%s", rc, out, err);
    static const char *figs[] = {"bench_busbw", "train_step", "train_scaling", "train_memory", "model_pred",
                                 "model_extrapolation", NULL};
    for (int i = 0; figs[i]; i++) {
        char png[64], svg[64];
        snprintf(png, sizeof png, "%s.png", figs[i]);
        snprintf(svg, sizeof svg, "%s.svg", figs[i]);
        cr_assert(s_nonempty(dir, png) && s_nonempty(dir, svg), "%s missing in %s\n%s", figs[i], dir, out);
    }
    cr_assert(strstr(out, "6 figures"), "%s", out);
}

Test(report, usage_and_unreadable)
{
    static char out[4096], err[4096];
    cr_assert_eq(s_report_capture(0, NULL, NULL, out, sizeof out, err, sizeof err), 2);
    char *files[] = {"/nonexistent/results.jsonl"};
    cr_assert_eq(s_report_capture(1, files, "/tmp", out, sizeof out, err, sizeof err), 1);
    cr_assert(strstr(err, "cannot read /nonexistent/results.jsonl"), "%s", err);
}
