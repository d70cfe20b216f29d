/* test_report.c: `harness report`'s strict JSON-lines reader (values, escapes, every kind of malformed
 * line) and the report itself from the fixed tests/data/report_sample.jsonl: text tables, scaling
 * efficiency, malformed lines named by file:line, figures with gnuplot, a clear note without it; the
 * same rows as JSON, Markdown and CSV; repeated runs of one point giving their median; lines of kinds with no
 * table counted in one line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/resource.h>

/* the harness is a program, not a library: compile the files under test into this test */
#include "core/err.h"
#include "harness/record/jsonl.h"
#include "harness/record/result.h"
#include "harness/report/plot.h"
#include "harness/report/report.h"
#include "harness/registry/engines.h"
#include "harness/record/stats.h"
#include "harness/record/traffic.h"
#include "tests/lib/ranks.h"

static int s_parse(const char *line, h_jobj_t *o, char *err, size_t errlen)
{
    return h_jparse(line, strlen(line), o, err, errlen);
}

/* One reading of a flag for every reader (report, both models): true/false, or a number as older lines
 * wrote them; anything else, or no field, is the caller's default. */
Test(jsonl, flags)
{
    h_jobj_t o = {0};
    char err[256];
    const char *line = "{\"t\": true, \"f\": false, \"one\": 1, \"zero\": 0, \"s\": \"yes\", \"n\": null}";
    cr_assert_eq(h_jparse(line, strlen(line), &o, err, sizeof err), 0, "%s", err);
    cr_assert(h_jis_flag(&o, "t") && h_jis_flag(&o, "f") && h_jis_flag(&o, "one") && h_jis_flag(&o, "zero"));
    cr_assert(!h_jis_flag(&o, "s") && !h_jis_flag(&o, "n") && !h_jis_flag(&o, "absent"));
    cr_assert_eq(h_jflag(&o, "t", 0), 1);
    cr_assert_eq(h_jflag(&o, "f", 1), 0);
    cr_assert_eq(h_jflag(&o, "one", 0), 1);
    cr_assert_eq(h_jflag(&o, "zero", 1), 0);
    cr_assert_eq(h_jflag(&o, "s", 1), 1);
    cr_assert_eq(h_jflag(&o, "s", 0), 0);
    cr_assert_eq(h_jflag(&o, "n", 1), 1);
    cr_assert_eq(h_jflag(&o, "absent", 0), 0);
    h_jfree(&o);
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

/* 40k keys: all read, and a duplicate at the end is still found (jansson keeps the keys in a hash
 * table; its cost is its own, no wall time is measured here). */
Test(jsonl, many_keys)
{
    size_t nk = 40000, cap = nk * 24 + 64, o = 0;
    char *line = malloc(cap);
    line[o++] = '{';
    for (size_t i = 0; i < nk; i++) o += (size_t)snprintf(line + o, cap - o, "%s\"k%zu\":%zu", i ? "," : "", i, i);
    line[o++] = '}';
    h_jobj_t obj = {0};
    char err[256];
    cr_assert_eq(h_jparse(line, o, &obj, err, sizeof err), 0, "%s", err);
    cr_assert_eq(obj.n, nk);
    cr_expect_eq(h_jnum(&obj, "k39999", -1), 39999);
    cr_expect_str_eq(obj.f[nk - 1].key, "k39999"); /* in the line's order */
    h_jfree(&obj);
    o--; /* a duplicate of the first key, last */
    o += (size_t)snprintf(line + o, cap - o, ",\"k0\":1}");
    cr_assert_eq(h_jparse(line, o, &obj, err, sizeof err), ERR_CORRUPT);
    cr_expect(strstr(err, "duplicate key \"k0\""), "%s", err);
    free(line);
}

/* Two processes appending 2000 lines each at once leave 4000 whole lines. */
Test(jsonl, concurrent_appends_keep_every_line, .timeout = 60)
{
    char path[] = "/tmp/sb-append-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        cr_assert_geq(kids[k], 0);
        if (kids[k] == 0) {
            char l[600], pad[400];
            memset(pad, 'x', sizeof pad - 1);
            pad[sizeof pad - 1] = '\0';
            for (int i = 0; i < 2000; i++) {
                int n = snprintf(l, sizeof l, "{\"mode\":\"bench\",\"writer\":%d,\"i\":%d,\"pad\":\"%s\"}\n", k, i, pad);
                if (h_jappend_line(path, l, (size_t)n) != 0) _exit(1);
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    h_jobj_t *objs = NULL;
    size_t n = 0, bad = 0;
    char *files[] = {path};
    cr_assert_eq(h_jread_files(1, files, &objs, &n, &bad, stderr), 0);
    cr_expect_eq(n, 4000);
    cr_expect_eq(bad, 0);
    int seen[2] = {0, 0};
    for (size_t i = 0; i < n; i++) seen[(int)h_jnum(&objs[i], "writer", 0) & 1]++;
    cr_expect(seen[0] == 2000 && seen[1] == 2000, "%d + %d", seen[0], seen[1]);
    h_jfree_all(&objs, &n);
    unlink(path);
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
        cr_assert_eq(s_parse(bad[i], &o, err, sizeof err), ERR_CORRUPT, "accepted: %s", bad[i]);
        /* where: a column, or (a value of the wrong kind, found after parsing) its key */
        cr_assert(strstr(err, "column ") || strstr(err, "key \"a\""), "no position for '%s': %s", bad[i], err);
        cr_assert_eq(o.n, 0);
        cr_assert_null(o.f);
    }
}

/* Run h_report in format fmt with stdout/stderr captured into files; returns its result. */
static int s_report_fmt(int n, char **files, const char *outdir, const char *fmt, char *out, size_t olen, char *err, size_t elen)
{
    char op[] = "/tmp/sb-report-out-XXXXXX", ep[] = "/tmp/sb-report-err-XXXXXX";
    int ofd = mkstemp(op), efd = mkstemp(ep);
    cr_assert(ofd >= 0 && efd >= 0);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(ofd, 1);
    dup2(efd, 2);
    int rc = h_report(n, files, outdir, fmt);
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

static int s_report_capture(int n, char **files, const char *outdir, char *out, size_t olen, char *err, size_t elen)
{
    return s_report_fmt(n, files, outdir, "text", out, olen, err, elen);
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
    /* the malformed lines counted in one line naming each (the blank line 6 is none), nothing else complained about */
    char want[600];
    snprintf(want, sizeof want, "%s: 5 malformed result lines skipped: lines 7, 8, 12, 14, 18; the first (line 7): ", path);
    cr_assert(!strncmp(err, want, strlen(want)), "want '%s' in stderr:\n%s", want, err);
    cr_assert(strchr(err, '\n') && strchr(err, '\n')[1] == '\0', "more than one line:\n%s", err);
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
    if (!h_plot_gnuplot()) cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox)");
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

/* A results path holding a quote and a gnuplot system() payload: refused, and nothing runs. */
Test(report, quoted_path_runs_nothing, .timeout = 60)
{
    if (!h_plot_gnuplot()) cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox)");
    char src[512], top[] = "/tmp/sb-report-q-XXXXXX", dir[1024], path[1200], mark[1100], cmd[3000];
    s_sample(src, sizeof src);
    cr_assert(mkdtemp(top));
    snprintf(mark, sizeof mark, "%s/PWNED", top);
    snprintf(dir, sizeof dir, "%s/r'; system('touch PWNED'); x='", top);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' \"%s\"", src, path);
    cr_assert_eq(system(cmd), 0);
    char cwd[1024];
    cr_assert(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(top), 0); /* gnuplot would touch PWNED here */
    static char out[65536], err[65536];
    char *files[] = {path};
    int rc = s_report_capture(1, files, NULL, out, sizeof out, err, sizeof err);
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", err_detail());
    cr_assert_eq(chdir(cwd), 0);
    struct stat st;
    cr_expect_neq(stat(mark, &st), 0, "the payload ran");
    cr_expect_neq(rc, 0, "a path gnuplot cannot carry must fail the figures");
    cr_expect(strstr(detail, "gnuplot script cannot carry"), "%s", detail);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    cr_expect_eq(system(cmd), 0);
}

Test(report, usage_and_unreadable)
{
    static char out[4096], err[4096];
    cr_assert_eq(s_report_capture(0, NULL, NULL, out, sizeof out, err, sizeof err), ERR_INVAL);
    cr_assert(strstr(err_detail(), "at least one results file"), "%s", err_detail());
    char *files[] = {"/nonexistent/results.jsonl"};
    cr_assert_eq(s_report_capture(1, files, "/tmp", out, sizeof out, err, sizeof err), ERR_IO);
    cr_assert(strstr(err, "cannot read /nonexistent/results.jsonl"), "%s", err);
    cr_assert(strstr(out, "nothing to report"), "%s", out);
    char path[512];
    s_sample(path, sizeof path);
    files[0] = path;
    cr_assert_eq(s_report_fmt(1, files, NULL, "xml", out, sizeof out, err, sizeof err), ERR_INVAL);
    cr_assert(strstr(err_detail(), "xml"), "%s", err_detail());
    cr_assert_eq(out[0], '\0', "%s", out);
}

/* A file with no result line (empty, or not JSON: a README given by mistake) is an error naming it, not
 * "nothing to report" with exit 0; its malformed lines are said in one line, however many (each had its own). */
Test(report, a_file_without_results_is_an_error_naming_it)
{
    static char out[65536], err[65536];
    char empty[] = "/tmp/sb-report-empty-XXXXXX", prose[] = "/tmp/sb-report-prose-XXXXXX";
    int fe = mkstemp(empty), fp = mkstemp(prose);
    cr_assert(fe >= 0 && fp >= 0);
    for (int i = 0; i < 300; i++) dprintf(fp, "# a heading %d\n\nsome prose, not a result\n", i);
    close(fe);
    close(fp);
    char *files[] = {empty};
    cr_assert_eq(s_report_capture(1, files, NULL, out, sizeof out, err, sizeof err), ERR_INVAL, "stdout:\n%s", out);
    cr_assert(strstr(err_detail(), empty) && strstr(err_detail(), "no result line"), "%s", err_detail());
    files[0] = prose;
    cr_assert_eq(s_report_capture(1, files, NULL, out, sizeof out, err, sizeof err), ERR_INVAL, "stdout:\n%s", out);
    cr_assert(strstr(err_detail(), prose) && strstr(err_detail(), "no result line"), "%s", err_detail());
    char want[600];
    snprintf(want, sizeof want, "%s: 600 malformed result lines skipped: lines 1, 3, 4, 6, 7, 9, 10, 12, 13, 15, ...; "
             "the first (line 1): ", prose);
    cr_assert(!strncmp(err, want, strlen(want)), "want '%s' in stderr:\n%s", want, err);
    cr_assert(strchr(err, '\n')[1] == '\0', "more than one line:\n%s", err);
    /* beside a results file: its tables, and still the error naming the empty one */
    char path[512];
    s_sample(path, sizeof path);
    char *two[] = {path, empty};
    char dir[] = "/tmp/sb-report-XXXXXX";
    cr_assert(mkdtemp(dir));
    setenv("SYNCBENCH_GNUPLOT", "", 1); /* tables only */
    cr_assert_eq(s_report_capture(2, two, dir, out, sizeof out, err, sizeof err), ERR_INVAL);
    unsetenv("SYNCBENCH_GNUPLOT");
    cr_assert(strstr(out, "ring@4") && strstr(err_detail(), empty) && !strstr(err_detail(), path), "%s\n%s", out, err_detail());
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_assert_eq(system(rm), 0);
    unlink(empty);
    unlink(prose);
}

/* Host-bound runs are marked, not medianed unmarked, and an emulated run's efficiency is the one train printed
 * (speedup over one emulated device / GPUs: 0.919 here), not sps(P) / (P sps(1)) (0.823); report dropped both. */
Test(report, host_bound_marked_and_the_emulated_efficiency_carried)
{
    char path[] = "/tmp/sb-report-hb-XXXXXX", dir[] = "/tmp/sb-report-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0 && mkdtemp(dir));
    const char *emu = "\"mode\":\"train\",\"engine\":\"ring\",\"impl\":\"host\",\"emulated\":true,\"model\":\"resnet50\","
                      "\"device\":\"v100\",\"net\":\"none\"";
    dprintf(fd, "{%s,\"world\":1,\"samples_per_s\":364.6,\"speedup\":0.994,\"scaling_efficiency\":0.994,\"host_bound\":false}\n", emu);
    dprintf(fd, "{%s,\"world\":4,\"samples_per_s\":1200,\"speedup\":3.676,\"scaling_efficiency\":0.919,\"host_bound\":true}\n", emu);
    const char *b = "\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"world\":2,\"net\":\"bw=1gbit\"";
    dprintf(fd, "{%s,\"bytes\":1048576,\"time_us\":700,\"algbw_gbs\":1.5,\"busbw_gbs\":1.5,\"host_bound\":true}\n", b);
    dprintf(fd, "{%s,\"bytes\":2097152,\"time_us\":1048,\"algbw_gbs\":2,\"busbw_gbs\":2,\"host_bound\":false}\n", b);
    close(fd);
    static char out[65536], err[65536];
    char *files[] = {path};
    setenv("SYNCBENCH_GNUPLOT", "", 1);
    int rc = s_report_capture(1, files, dir, out, sizeof out, err, sizeof err);
    unsetenv("SYNCBENCH_GNUPLOT");
    cr_assert_eq(rc, 0, "%s\n%s", out, err);
    cr_assert(strstr(out, "0.919") && !strstr(out, "0.823"), "the emulated efficiency:\n%s", out);
    cr_assert(strstr(out, " 1200.0! ") && strstr(out, " 364.6  "), "the host-bound run marked, the other not:\n%s", out);
    cr_assert(strstr(out, "1.500!") && strstr(out, "2.000") && !strstr(out, "2.000!"), "bench marks:\n%s", out);
    cr_assert(strstr(out, "# ! host-bound"), "the mark explained:\n%s", out);
    rc = s_report_fmt(1, files, NULL, "csv", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0);
    cr_assert(strstr(out, ",host_bound_runs,engine_label,") && strstr(out, ",0.919,") && strstr(out, ",3.676,1200,1200,1,"), "%s", out);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_assert_eq(system(rm), 0);
    unlink(path);
}

/* Lines of a kind report has no table for (`harness model --model`'s cluster, check and error lines, a simulate
 * line) are counted in one line, kind by kind, not given a "skipped" line each (results/emulated-model.jsonl
 * printed 263 of them). */
Test(report, lines_of_other_kinds_counted_in_one_line)
{
    char path[] = "/tmp/sb-report-other-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    for (int i = 0; i < 3; i++) dprintf(fd, "{\"mode\":\"model\",\"kind\":\"cluster\",\"gpus\":%d,\"step_ms\":175}\n", 1 << i);
    for (int i = 0; i < 5; i++) dprintf(fd, "{\"mode\":\"model\",\"kind\":\"check\",\"gpus\":%d,\"err_pct\":-0.4}\n", 1 << i);
    dprintf(fd, "{\"mode\":\"model\",\"kind\":\"error\",\"sample\":\"out\",\"median\":3.9}\n");
    dprintf(fd, "{\"mode\":\"simulate\",\"kind\":\"train\",\"engine\":\"ring\"}\n");
    dprintf(fd, "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"world\":2,\"bytes\":1024,\"time_us\":10,"
                "\"busbw_gbs\":0.1}\n");
    close(fd);
    static char out[65536], err[65536];
    char *files[] = {path};
    int rc = s_report_fmt(1, files, NULL, "text", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "%s\n%s", out, err);
    cr_assert_eq(err[0], '\0', "nothing on stderr:\n%s", err);
    cr_assert(strstr(out, "\n# 10 lines of a kind report has no table for skipped: model/check 5, model/cluster 3, model/error 1, "
                          "simulate/train 1\n"), "%s", out);
    cr_assert_eq(count_in(out, "skipped"), 1, "%s", out);
    cr_assert(strstr(out, "ring@2"), "the bench line still reported:\n%s", out);
    /* other formats: the count on stderr, once; stdout only the table */
    rc = s_report_fmt(1, files, NULL, "csv", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "%s\n%s", out, err);
    cr_assert_eq(count_in(err, "skipped"), 1, "%s", err);
    cr_assert(strstr(err, "model/check 5") && !strstr(out, "skipped"), "%s\n%s", out, err);
    unlink(path);
}

/* The sample in format fmt, without figures (no outdir): stdout holds only the tables. */
static void s_sample_fmt(const char *fmt, char *out, size_t olen)
{
    static char err[65536];
    char path[512];
    s_sample(path, sizeof path);
    char *files[] = {path};
    int rc = s_report_fmt(1, files, NULL, fmt, out, olen, err, sizeof err);
    cr_assert_eq(rc, 0, "rc %d\nstdout:\n%s\nstderr:\n%s", rc, out, err);
    cr_assert(strstr(err, "malformed result line"), "%s", err);
    cr_assert_null(strstr(out, "# syncbench report"), "%s", out);
    cr_assert_null(strstr(out, "gnuplot"), "%s", out);
}

Test(report, json)
{
    static char out[65536];
    s_sample_fmt("json", out, sizeof out);
    cr_assert_eq(out[0], '{', "%s", out);
    int depth = 0, arr = 0;
    for (const char *p = out; *p; p++) {
        depth += (*p == '{') - (*p == '}');
        arr += (*p == '[') - (*p == ']');
        cr_assert(depth >= 0 && arr >= 0, "%s", out);
    }
    cr_assert(depth == 0 && arr == 0, "unbalanced:\n%s", out);
    cr_assert(strstr(out, "\"results\":12,\"malformed\":5"), "%s", out);
    /* ring@4, 1 MiB: busbw 1.048576, algbw 0.699051, time 1500 us */
    cr_assert(strstr(out, "{\"label\":\"ring\",\"world\":4,\"servers\":0,\"bytes\":1048576,\"time_us\":1500,"
                          "\"busbw_gbs\":1.048576,\"algbw_gbs\":0.699051,\"runs\":1,\"wrong\":0,\"net\":\"\",\"host_bound_runs\":0,"
                          "\"engine_label\":\"ring\",\"run\":\"\",\"model\":\"\",\"emulated\":0,\"device\":\"\",\"nodes\":null,"
                          "\"gpus_per_node\":null,\"dtype\":\"f32\",\"op\":\"sum\",\"transport\":\"shm\"}"), "%s", out);
    cr_assert(strstr(out, "{\"label\":\"ps-sync-servers1\",\"world\":4,\"servers\":1,"), "%s", out);
    /* train ring@2: 1800 samples/s, efficiency 1800 / (2 * 1000) = 0.9 against world 1, from line 10 */
    cr_assert(strstr(out, "{\"label\":\"ring\",\"world\":2,\"servers\":0,\"samples_per_s\":1800,"
                          "\"step_ms_p50\":142.22222222222223,"), "%s", out);
    cr_assert(strstr(out, "\"scaling_eff\":0.9,\"eff_base_world\":1,\"runs\":1,\"src\":\""), "%s", out);
    cr_assert(strstr(out, "report_sample.jsonl:10\",\"speedup\":null,\"samples_per_s_min\":1800,\"samples_per_s_max\":1800,"
                          "\"host_bound_runs\":0,\"engine_label\":\"ring\",\"run\":\"\",\"model\":\"\",\"emulated\":0,\"device\":\"\","
                          "\"nodes\":null,\"gpus_per_node\":null,\"batch\":256,\"net\":\"\"}"),
              "%s", out);
    cr_assert(strstr(out, "\"mem_imbalance\":2,\"mem_engine_imbalance\":null,"), "%s", out);
    /* model: the measured point and the extrapolation without measurement */
    cr_assert(strstr(out, "{\"what\":\"bench\",\"label\":\"ring\",\"world\":4,\"bytes\":1048576,\"pred_us\":1380,"
                          "\"meas_us\":1500,\"err_pct\":-8}"), "%s", out);
    cr_assert(strstr(out, "\"world\":1024,\"bytes\":1048576,\"pred_us\":2500,\"meas_us\":null,\"err_pct\":null}"), "%s", out);
}

Test(report, markdown)
{
    static char out[65536];
    s_sample_fmt("md", out, sizeof out);
    cr_assert(strstr(out, "## bench\n\n| label | world | servers | bytes | time_us | busbw_gbs | algbw_gbs | runs | wrong | net | host_bound_runs | engine_label | run | model | emulated | device | nodes | gpus_per_node | dtype | op | transport |\n"
                          "| --- | ---: |"), "%s", out);
    cr_assert(strstr(out, "\n| ring | 4 | 0 | 1048576 | 1500.000 | 1.049 | 0.699 | 1 | 0 | - | 0 | ring | - | - | 0 | - | - | - | f32 | sum | shm |\n"), "%s", out);
    cr_assert(strstr(out, "\n| tree | 4 | 0 | 1048576 | 1250.000 | 1.258 | 0.839 | 1 | 0 | - | 0 | tree | - | - | 0 | - | - | - | f32 | sum | shm |\n"), "%s", out);
    cr_assert(strstr(out, "## train\n"), "%s", out);
    cr_assert(strstr(out, "\n| ring | 4 | 0 | 3000.0 | 85.33 | 100.00 | 0.50 | 0.25 | 1.000 | - | 0.750 | 1 | 1 | "), "%s", out);
    cr_assert(strstr(out, "\n| ps-servers1 | 2 | 1 | 1500.0 | 170.67 | 200.00 | 0.50 | 0.25 | 2.000 | - | 1.000 | 2 | 1 | "), "%s", out);
    cr_assert(strstr(out, "## model\n"), "%s", out);
    cr_assert(strstr(out, "\n| bench | ring | 4 | 1048576 | 1380.0 | 1500.0 | -8.0 |\n"), "%s", out);
    cr_assert(strstr(out, "\n| bench | ring | 1024 | 1048576 | 2500.0 | - | - |\n"), "%s", out);
}

Test(report, csv)
{
    static char out[65536];
    s_sample_fmt("csv", out, sizeof out);
    const char *head = "section,label,world,servers,bytes,time_us,busbw_gbs,algbw_gbs,runs,wrong,net,host_bound_runs,engine_label,run,"
                       "model,emulated,device,nodes,gpus_per_node,dtype,op,transport\n";
    cr_assert(!strncmp(out, head, strlen(head)), "%s", out);
    cr_assert(strstr(out, "\nbench,ring,4,0,1048576,1500,1.048576,0.699051,1,0,,0,ring,,,0,,,,f32,sum,shm\n"), "%s", out);
    cr_assert(strstr(out, "\nbench,ring,2,0,1024,10,0.1024,0.1024,1,0,,0,ring,,,0,,,,f32,sum,shm\n"), "%s", out);
    cr_assert(strstr(out, "\n\nsection,label,world,servers,samples_per_s,step_ms_p50,step_ms_p99,comm_ms_p50,wait_ms_p50,"
                          "mem_imbalance,mem_engine_imbalance,scaling_eff,eff_base_world,runs,src,speedup,samples_per_s_min,"
                          "samples_per_s_max,host_bound_runs,engine_label,run,model,emulated,device,nodes,gpus_per_node,batch,net\n"),
              "%s", out);
    cr_assert(strstr(out, "\ntrain,ring,2,0,1800,142.22222222222223,166.66666666666666,0.5,0.25,1,,0.9,1,1,"), "%s", out);
    cr_assert(strstr(out, "\n\nsection,what,label,world,bytes,pred_us,meas_us,err_pct\n"), "%s", out);
    cr_assert(strstr(out, "\nmodel,bench,ring,4,1048576,1380,1500,-8\n"), "%s", out);
    cr_assert(strstr(out, "\nmodel,bench,ring,1024,1048576,2500,,\n"), "%s", out);
}

/* Repeated runs of one bench point: the row holds the medians, the text table the median busbw. */
Test(report, repeated_runs_median)
{
    char path[] = "/tmp/sb-report-rep-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    static const char *tb[] = {"10,\"busbw_gbs\":0.4", "40,\"busbw_gbs\":0.1", "20,\"busbw_gbs\":0.2", "30,\"busbw_gbs\":0.3"};
    for (int i = 0; i < 4; i++)
        dprintf(fd, "{\"mode\":\"bench\",\"engine\":\"ring\",\"world\":2,\"bytes\":4096,\"time_us\":%s,\"wrong\":%d}\n",
                tb[i], i == 3);
    close(fd);
    static char out[16384], err[16384];
    char *files[] = {path};
    cr_assert_eq(s_report_fmt(1, files, NULL, "json", out, sizeof out, err, sizeof err), 0, "%s", err);
    /* median of 10, 20, 30, 40 us: 25; of the busbw 0.1 .. 0.4: 0.25; no algbw in the lines: null */
    cr_assert(strstr(out, "\"time_us\":25,\"busbw_gbs\":0.25,\"algbw_gbs\":null,"), "%s", out);
    cr_assert(strstr(out, "\"runs\":4,\"wrong\":1,"), "%s", out);
    setenv("SYNCBENCH_GNUPLOT", "", 1);
    cr_assert_eq(s_report_fmt(1, files, "/tmp/sb-report-rep-plots", "text", out, sizeof out, err, sizeof err), 0, "%s", err);
    unsetenv("SYNCBENCH_GNUPLOT");
    cr_assert(strstr(out, "ring@2") && strstr(out, "4K"), "%s", out);
    cr_assert(strstr(out, "          4K        0.250\n"), "%s", out);
    unlink(path);
}

Test(stats, median_and_percentile)
{
    double a[] = {5, 1, 4, 2, 3};
    cr_assert_eq(h_median(a, 5), 3.0);
    cr_assert_eq(a[0], 1.0, "sorted in place");
    double b[] = {4, 1, 3, 2};
    cr_assert_eq(h_median(b, 4), 2.5);
    cr_assert_eq(h_median(b, 1), 1.0);
    cr_assert_eq(h_median(NULL, 0), 0.0);
    double c[] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    cr_assert_eq(h_pct(c, 10, 50), 5.0);
    cr_assert_eq(h_pct(c, 10, 99), 10.0);
    cr_assert_eq(h_pct(c, 10, 0), 1.0);
    cr_assert_eq(h_pct(c, 10, 100), 10.0);
    cr_assert_eq(h_pct(c, 0, 50), 0.0);
}

/* Result lines have no length limit: a 300-rank array and a 5000-character command line round-trip. */
Test(jsonl_write, per_rank_arrays_and_command_line_have_no_cap)
{
    enum { R = 300 };
    uint64_t mem[R];
    double sps[R];
    for (int r = 0; r < R; r++) {
        mem[r] = 1000000000ull + (uint64_t)r * 7919u;
        sps[r] = 1234.5 + r * 0.25;
    }
    char *argv[3], arg[5000];
    memset(arg, 'x', sizeof arg - 1);
    arg[sizeof arg - 1] = '\0';
    arg[10] = '"';
    argv[0] = "harness";
    argv[1] = "--json";
    argv[2] = arg;
    h_meta_t m;
    memset(&m, 0, sizeof m);
    m.argc = 3;
    m.argv = argv;
    char *a = h_json_u64_list(mem, R), *b = h_json_f64_list(sps, R, 3), *c = h_meta_cmdline_json(&m), *line = NULL;
    cr_assert(a && b && c);
    int n = asprintf(&line, "{\"mem_peak_bytes\": %s, \"samples_per_s_rank\": %s, \"cmdline\": %s}", a, b, c);
    cr_assert(n > 0);
    h_jobj_t obj;
    memset(&obj, 0, sizeof obj);
    char err[256];
    cr_assert_eq(h_jparse(line, (size_t)n, &obj, err, sizeof err), 0, "%s", err);
    const h_jfield_t *f = h_jget(&obj, "mem_peak_bytes"), *g = h_jget(&obj, "samples_per_s_rank");
    cr_assert(f && f->type == HJ_ARR && f->n == R, "mem_peak_bytes has %zu values", f ? f->n : 0);
    cr_assert(g && g->type == HJ_ARR && g->n == R);
    for (int r = 0; r < R; r++) {
        cr_expect_eq((uint64_t)f->arr[r], mem[r]);
        cr_expect_eq(g->arr[r], sps[r]);
    }
    const char *cmd = h_jstr(&obj, "cmdline", "");
    cr_expect_eq(strlen(cmd), strlen("harness --json ") + strlen(arg), "command line cut to %zu", strlen(cmd));
    h_jfree(&obj);
    free(a); free(b); free(c); free(line);
}

/* Traffic matrices: the text section (max / mean link and rank) and a heat map per engine; the memory
 * figure draws engine memory beside RSS with the server rank marked. */
Test(report, traffic_and_memory, .timeout = 120)
{
    char dir[] = "/tmp/sb-report-XXXXXX", path[600];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    /* a PS of 3 workers and one server (rank 3): hub and spokes; a ring of 4: neighbours */
    fprintf(f, "{\"mode\":\"train\",\"engine\":\"ps\",\"world\":3,\"servers\":1,\"samples_per_s\":10,\"step_ms_p50\":1,\"step_ms_p99\":1,"
               "\"mem_peak_bytes\":[100,100,100,200],\"mem_engine_bytes\":[0,0,0,300],"
               "\"traffic_bytes\":[0,0,0,10, 0,0,0,10, 0,0,0,10, 10,10,10,0]}\n");
    fprintf(f, "{\"mode\":\"train\",\"engine\":\"ring\",\"world\":4,\"samples_per_s\":20,\"step_ms_p50\":1,\"step_ms_p99\":1,"
               "\"mem_peak_bytes\":[100,100,100,100],\"mem_engine_bytes\":[50,50,50,50],"
               "\"traffic_bytes\":[0,15,0,0, 0,0,15,0, 0,0,0,15, 15,0,0,0]}\n");
    fclose(f);
    static char out[65536], err[65536];
    char *files[] = {path};
    int rc = s_report_capture(1, files, h_plot_gnuplot() ? dir : NULL, out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "rc %d\n%s\n%s", rc, out, err);
    cr_assert(strstr(out, "# traffic:"), "%s", out);
    /* the server carries 3 x 20 bytes of 4 ranks' 120: max rank / mean rank = 60 / 30 = 2 */
    cr_assert(strstr(out, "2.00"), "%s", out);
    if (h_plot_gnuplot()) {
        cr_assert(s_nonempty(dir, "traffic_0.png") && s_nonempty(dir, "traffic_1.svg"), "%s", out);
        char mem[700], buf[4096];
        snprintf(mem, sizeof mem, "%s/train_memory.dat", dir);
        FILE *m = fopen(mem, "r");
        cr_assert(m);
        size_t n = fread(buf, 1, sizeof buf - 1, m);
        buf[n] = 0;
        fclose(m);
        cr_assert(strstr(buf, "r3 S\""), "%s", buf);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* the ceiling table pairs each allreduce with its op-move twin of the same configuration, world and
 * size (never another transport's), and prints ceiling time / time */
Test(report, ceilings_pair_op_move_twins)
{
    char path[] = "/tmp/sb-report-ceil-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    static const char *rows[] = {"\"transport\":\"shm\",\"op\":\"sum\",\"time_us\":40", "\"transport\":\"shm\",\"op\":\"move\",\"time_us\":30",
                                 "\"transport\":\"tcp\",\"op\":\"sum\",\"time_us\":100", "\"transport\":\"tcp\",\"op\":\"sum\",\"time_us\":120"};
    for (int i = 0; i < 4; i++)
        dprintf(fd, "{\"mode\":\"bench\",\"engine\":\"ring\",\"world\":2,\"bytes\":4096,%s,\"busbw_gbs\":0.1,\"wrong\":0}\n", rows[i]);
    close(fd);
    static char out[16384], err[16384];
    char *files[] = {path};
    setenv("SYNCBENCH_GNUPLOT", "", 1);
    cr_assert_eq(s_report_fmt(1, files, "/tmp/sb-report-ceil-plots", "text", out, sizeof out, err, sizeof err), 0, "%s", err);
    unsetenv("SYNCBENCH_GNUPLOT");
    const char *t = strstr(out, "# ceilings:");
    cr_assert(t, "%s", out);
    cr_assert(strstr(t, "shm") && strstr(t, "40.0") && strstr(t, "30.0") && strstr(t, "0.75\n"), "%s", t);
    cr_assert(!strstr(t, "tcp"), "a configuration without a twin has no ceiling row:\n%s", t);
    unlink(path);
}

/* Issue 33 section 5: a device is no results file (report /dev/zero once said "nothing to report", exit 0) */
Test(report, a_device_is_refused_not_read_as_empty)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, bad = 0;
    char *files[] = {"/dev/zero"};
    cr_expect_eq(h_jread_files(1, files, &objs, &n, &bad, NULL), ERR_INVAL);
    cr_expect(strstr(err_detail(), "not a results file"), "%s", err_detail());
    cr_expect_eq(n, 0);
    h_jfree_all(&objs, &n);
}

/* Issue 33: a process whose descriptors were exhausted during the run (a flood of connections) still
 * writes its results to a file opened ahead (h_jreserve); a file not opened ahead cannot be opened then. */
Test(jsonl, a_reserved_results_file_is_written_with_no_descriptor_left)
{
    char held[] = "/tmp/sb-jres-XXXXXX", other[] = "/tmp/sb-jres-XXXXXX";
    close(mkstemp(held));
    close(mkstemp(other));
    cr_assert_eq(h_jreserve(held), 0, "%s", err_detail());
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    low = old;
    low.rlim_cur = 256; /* a few hundred descriptors to exhaust, whatever this machine's limit */
    setrlimit(RLIMIT_NOFILE, &low);
    static int fds[65536];
    int n = 0;
    while (n < 65536 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) n++;
    cr_assert(n < 65536, "could not exhaust the descriptors");
    int rc_held = h_jappend_line(held, "{\"a\": 1}\n", 9);
    int rc_other = h_jappend_line(other, "{\"a\": 1}\n", 9);
    while (n > 0) close(fds[--n]);
    setrlimit(RLIMIT_NOFILE, &old);
    cr_expect_eq(rc_held, 0, "the held file was not written: %s", err_detail());
    cr_expect_neq(rc_other, 0, "a file opened only at the end was written with no descriptor left");
    struct stat st;
    cr_expect(stat(held, &st) == 0 && st.st_size == 9, "the held file has %lld bytes", (long long)st.st_size);
    unlink(held);
    unlink(other);
}
