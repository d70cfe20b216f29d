/* test_calib.c: the cost model's calibration (harness/model/calib.c) and `harness model fit` / `check`:
 * every bench line of a group counts (no fixed array cuts them), the files' order changes nothing,
 * only bench lines fit and only training lines check, each constant's fit against values built to give
 * it, the nearest partition's constant, the document's round trip, and bad input refused. */
#include <criterion/criterion.h>
#include "tests/lib/mconf.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness/model/calib.h"
#include "harness/model/cluster_cost.h"
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"
#include "tests/lib/tmpdir.h"

#define S_WIREF (1514.0 / 1448.0)

static char g_h[512];
static char *g_dir;

static void s_setup(void)
{
    cr_assert(harness_path(g_h, sizeof g_h) == 0, "build the harness first (make)");
    g_dir = tmpdir_make();
}

static void s_path(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", g_dir, name); }

/* One `harness bench --engine ps` line with K server machines of their own (K = 0: colocated) on N x G. */
static void s_ps_line(FILE *f, int N, int G, int K, const char *net, double bytes, double part, double us)
{
    fprintf(f, "{\"mode\":\"bench\",\"engine\":\"ps\",\"impl\":\"%s%d\",\"servers\":%d,\"server_nodes\":%d,\"nodes\":%d,"
               "\"gpus_per_node\":%d,\"world\":%d,\"net\":\"%s\",\"bytes\":%.0f,\"ps_partition_bytes\":%.0f,\"wrong\":0,"
               "\"loop_us\":%.6f,\"time_us\":%.6f,\"host_bound\":false}\n", "ps-sync-servers", K, K, K, N, G, N * G, net,
            bytes, part, us, us);
}

/* The model's time of one PS collective with K server machines on N x G at beta, no slowdown (s). */
static double s_ps_ideal(int N, int G, int K, double beta, double bytes, double part)
{
    h_cl_net_t net = {.nodes = N, .gpus_per_node = G, .beta = beta};
    h_cl_engine_t e = t_servers(K, N, G);
    e.pipelined = 1, e.part_bytes = part;
    double ready = 0;
    return h_cl_step(&net, &e, 1, &ready, &bytes, 0, NULL);
}

static const h_cal_const_t *s_const(const h_cal_t *cal, h_cal_kind_t kind, int N, int G)
{
    for (int k = 0; k < cal->n; k++)
        if (cal->c[k].kind == kind && (kind == H_CAL_ALPHA || kind == H_CAL_INCAST || (cal->c[k].nodes == N && cal->c[k].gpn == G)))
            return &cal->c[k];
    return NULL;
}

#define S_FAST "inter=781250kbit"
#define S_BETA_FAST (S_WIREF * 8.0 / 781250e3)

/* 46 lines of one server machine on 4 x 4 (the old fixed arrays kept 16 or 32 of them), slower line by line:
 * the slowdown is the median of all 46 ratios, whichever file holds which and in whatever order. */
static void s_write_group(const char *a, const char *b, const char *c)
{
    FILE *fa = fopen(a, "w"), *fb = fopen(b, "w"), *fc = fopen(c, "w");
    cr_assert(fa && fb && fc);
    double bytes = 16777216, part = 131072, ideal = s_ps_ideal(4, 4, 1, S_BETA_FAST, bytes, part);
    for (int i = 0; i < 46; i++)
        s_ps_line(i < 20 ? fa : i < 35 ? fb : fc, 4, 4, 1, S_FAST, bytes, part, ideal * (1.0 + 0.01 * (i + 1)) * 1e6);
    /* a training line in a fit file: not a bench line, never fitted from */
    fprintf(fb, "{\"mode\":\"train\",\"emulated\":true,\"engine\":\"ps\",\"impl\":\"ps-sync-servers1\",\"servers\":1,"
                "\"server_nodes\":1,\"nodes\":4,\"gpus_per_node\":4,\"world\":16,\"net\":\"%s\",\"bytes\":%.0f,"
                "\"loop_us\":1e9,\"wrong\":0,\"host_bound\":false}\n", S_FAST, bytes);
    /* the incast law: one server fed by 2, 4 and 8 ranks on links of their own, 1 + 0.05 (P - 1) slower */
    double beta1 = S_WIREF * 8.0 / 1e9;
    for (int P = 2; P <= 8; P *= 2)
        fprintf(fc, "{\"mode\":\"bench\",\"engine\":\"ps\",\"impl\":\"ps-sync-servers1\",\"servers\":1,\"world\":%d,"
                    "\"net\":\"bw=1gbit\",\"bytes\":16777216,\"ps_partition_bytes\":131072,\"wrong\":0,\"loop_us\":%.6f}\n",
                P, s_ps_ideal(P, 1, 1, beta1, 16777216, 131072) * (1 + 0.05 * (P - 1)) * 1e6);
    /* the ring on 2 and 4 links of their own, 5% faster than its bytes (as the tbf burst lets small messages
     * through: net-bench): alpha fits below 0 and is held at 0 */
    for (int P = 2; P <= 4; P *= 2)
        for (double n = 65536; n <= 4194304; n *= 8)
            fprintf(fa, "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"algo\":\"ring\",\"world\":%d,"
                        "\"net\":\"bw=1gbit\",\"bytes\":%.0f,\"wrong\":0,\"loop_us\":%.6f}\n",
                    P, n, 2.0 * (P - 1) / P * n * beta1 * 0.95 * 1e6);
    fclose(fa);
    fclose(fb);
    fclose(fc);
}

Test(calib, every_line_counts_in_any_order, .init = s_setup)
{
    char a[600], b[600], c[600];
    s_path(a, sizeof a, "a.jsonl"), s_path(b, sizeof b, "b.jsonl"), s_path(c, sizeof c, "c.jsonl");
    s_write_group(a, b, c);
    char *abc[] = {a, b, c}, *cab[] = {c, a, b};
    h_cal_t x, y;
    cr_assert_eq(h_cal_fit(&x, 3, abc, "bbr"), 0);
    cr_assert_eq(h_cal_fit(&y, 3, cab, "bbr"), 0);
    const h_cal_const_t *s = s_const(&x, H_CAL_SERVERS, 4, 4);
    cr_assert(s, "no constant for one server machine on 4 x 4");
    cr_expect_eq(s->lines, 46, "%d of the 46 lines were used", s->lines);
    /* the median of 1.01 .. 1.46 over all 46: 1.235 (the first 16: 1.085; the first 32: 1.165) */
    cr_expect_float_eq(s->value, 1.235, 1e-9, "slowdown %.6f", s->value);
    cr_expect_float_eq(s_const(&x, H_CAL_INCAST, 0, 0)->value, 0.05, 1e-9);
    int fmax = 0;
    h_cal_incast(&x, 131072 * S_WIREF * 8.0 / 1e9, &fmax);
    cr_expect_eq(fmax, 8, "the law is held at the most workers measured, 8, not %d", fmax);
    cr_expect_eq(s_const(&x, H_CAL_ALPHA, 0, 0)->value, 0);
    cr_expect_lt(s_const(&x, H_CAL_ALPHA, 0, 0)->raw, 0);
    cr_expect_eq(x.files[1].lines, 16, "b.jsonl's lines, the training one too");
    cr_expect_eq(x.files[1].bench, 15);
    cr_expect_eq(x.files[1].used, 15, "the training line calibrated something");
    /* the same constants, bit for bit, from the other order */
    cr_assert_eq(x.n, y.n);
    for (int k = 0; k < x.n; k++) {
        cr_expect_eq(x.c[k].kind, y.c[k].kind);
        cr_expect(x.c[k].value == y.c[k].value && x.c[k].slope == y.c[k].slope && x.c[k].lines == y.c[k].lines &&
                  x.c[k].part_wire == y.c[k].part_wire, "constant %d: %.17g against %.17g", k, x.c[k].value, y.c[k].value);
    }
    h_cal_free(&x);
    h_cal_free(&y);
    tmpdir_remove(g_dir);
}

/* `harness model fit` in two orders, then `check` of the same training runs with each: the same check. */
Test(calib, fit_and_check_do_not_depend_on_the_files_order, .init = s_setup, .timeout = 60)
{
    char a[600], b[600], c[600], t[600], c1[600], c2[600];
    s_path(a, sizeof a, "a.jsonl"), s_path(b, sizeof b, "b.jsonl"), s_path(c, sizeof c, "c.jsonl");
    s_path(t, sizeof t, "t.jsonl"), s_path(c1, sizeof c1, "cal1.json"), s_path(c2, sizeof c2, "cal2.json");
    s_write_group(a, b, c);
    FILE *f = fopen(t, "w");
    cr_assert(f);
    const char *common = "\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"vgg16\",\"device\":\"throughput=100000\","
                         "\"nodes\":4,\"gpus_per_node\":4,\"world\":16,\"net\":\"inter=25gbit\",\"local_batch\":64,"
                         "\"shrink\":32,\"dilate\":1,\"grad_dtype\":\"f32\",\"host_bound\":false";
    fprintf(f, "{%s,\"engine\":\"ps\",\"impl\":\"ps-sync-servers1\",\"servers\":1,\"server_nodes\":1,\"emu_step_ms\":3000}\n", common);
    fprintf(f, "{%s,\"engine\":\"ring\",\"impl\":\"host\",\"servers\":0,\"emu_step_ms\":700}\n", common);
    /* machine-local aggregation (--ps-local-agg) is no layout of the model's: not a point either */
    fprintf(f, "{%s,\"engine\":\"ps\",\"impl\":\"ps-sync-servers1-localagg\",\"servers\":1,\"server_nodes\":1,"
               "\"emu_step_ms\":900}\n", common);
    /* a bench line among the runs: never a point of the check */
    s_ps_line(f, 4, 4, 1, S_FAST, 16777216, 131072, 1e6);
    fclose(f);
    char cmd[4096];
    static char o1[1 << 16], o2[1 << 16];
    snprintf(cmd, sizeof cmd, "%s model fit %s %s %s > %s", g_h, a, b, c, c1);
    cr_assert_eq(run_cmd(cmd, o1, sizeof o1), 0, "%s", o1);
    snprintf(cmd, sizeof cmd, "%s model fit %s %s %s > %s", g_h, c, b, a, c2);
    cr_assert_eq(run_cmd(cmd, o1, sizeof o1), 0, "%s", o1);
    snprintf(cmd, sizeof cmd, "%s model check %s %s | tail -n +2", g_h, c1, t);
    cr_assert_eq(run_cmd(cmd, o1, sizeof o1), 0, "%s", o1);
    snprintf(cmd, sizeof cmd, "%s model check %s %s | tail -n +2", g_h, c2, t);
    cr_assert_eq(run_cmd(cmd, o2, sizeof o2), 0, "%s", o2);
    cr_expect_str_eq(o1, o2, "the check moved with the files' order");
    cr_expect(strstr(o1, "# in sample") && strstr(o1, "# out of sample"), "%s", o1);
    cr_expect(strstr(o1, "counted: 2 configurations (2 launches)"), "the bench or local-aggregation line was checked:\n%s", o1);
    cr_expect(strstr(o1, "fit only on collective-alone bench lines"), "the split is not stated:\n%s", o1);
    /* the calibration names its files and their lines */
    f = fopen(c1, "r");
    cr_assert(f);
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    cr_expect(strstr(doc, "\"split\"") && strstr(doc, "a.jsonl") && strstr(doc, "\"lines\": 16"), "%s", doc);
    /* a calibration file that changed since the fit is refused */
    f = fopen(a, "a");
    cr_assert(f);
    s_ps_line(f, 4, 4, 1, S_FAST, 16777216, 131072, 1e6);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s model check %s %s", g_h, c1, t);
    cr_expect_eq(run_cmd(cmd, o1, sizeof o1), 1, "%s", o1);
    cr_expect(strstr(o1, "fit again"), "%s", o1);
    tmpdir_remove(g_dir);
}

/* Servers on K machines of their own: a + c (K - 1) through the medians at each K, K held in the measured
 * range; a layout's constant at the partition nearest the prediction's, whichever is first. */
Test(calib, server_machines_and_the_nearest_partition, .init = s_setup)
{
    char a[600];
    s_path(a, sizeof a, "k.jsonl");
    FILE *f = fopen(a, "w");
    cr_assert(f);
    double bytes = 33554432, part = 131072;
    const double r[4] = {1.2, 1.3, 1.4, 1.5}; /* K = 1: median 1.25; K = 3: median 1.45 */
    for (int i = 0; i < 2; i++) s_ps_line(f, 4, 1, 1, S_FAST, bytes, part, s_ps_ideal(4, 1, 1, S_BETA_FAST, bytes, part) * r[i] * 1e6);
    for (int i = 2; i < 4; i++) s_ps_line(f, 4, 1, 3, S_FAST, bytes, part, s_ps_ideal(4, 1, 3, S_BETA_FAST, bytes, part) * r[i] * 1e6);
    /* the same machines at a 4 MiB partition, slower: another constant */
    s_ps_line(f, 4, 1, 1, S_FAST, bytes, 4194304, s_ps_ideal(4, 1, 1, S_BETA_FAST, bytes, 4194304) * 3.0 * 1e6);
    /* a host-bound line and one of another congestion control calibrate nothing */
    fprintf(f, "{\"mode\":\"bench\",\"engine\":\"ps\",\"impl\":\"ps-sync-servers1\",\"servers\":1,\"server_nodes\":1,"
               "\"nodes\":4,\"gpus_per_node\":1,\"world\":4,\"net\":\"%s\",\"bytes\":%.0f,\"ps_partition_bytes\":131072,"
               "\"wrong\":0,\"loop_us\":1e9,\"host_bound\":true}\n", S_FAST, bytes);
    fprintf(f, "{\"mode\":\"bench\",\"engine\":\"ps\",\"impl\":\"ps-sync-servers1\",\"servers\":1,\"server_nodes\":1,"
               "\"nodes\":4,\"gpus_per_node\":1,\"world\":4,\"net\":\"%s\",\"bytes\":%.0f,\"ps_partition_bytes\":131072,"
               "\"wrong\":0,\"loop_us\":1e9,\"versions\":\"tcp cubic\"}\n", S_FAST, bytes);
    fclose(f);
    char *files[] = {a};
    h_cal_t cal;
    cr_assert_eq(h_cal_fit(&cal, 1, files, "bbr"), 0);
    double pw = 131072 * S_BETA_FAST, pw4 = 4194304 * S_BETA_FAST;
    cr_expect_float_eq(h_cal_servers_slow(&cal, 4, 1, 1, pw), 1.25, 1e-9);
    cr_expect_float_eq(h_cal_servers_slow(&cal, 4, 1, 2, pw), 1.35, 1e-9);
    cr_expect_float_eq(h_cal_servers_slow(&cal, 4, 1, 3, pw), 1.45, 1e-9);
    cr_expect_float_eq(h_cal_servers_slow(&cal, 4, 1, 6, pw), 1.45, 1e-9, "K beyond the measured is held at 3");
    cr_expect_float_eq(h_cal_servers_slow(&cal, 4, 1, 1, pw * 1.9), 1.25, 1e-9, "nearer 128 KiB's than 4 MiB's");
    cr_expect_float_eq(h_cal_servers_slow(&cal, 4, 1, 1, pw4 / 2), 3.0, 1e-9, "nearer 4 MiB's");
    cr_expect_eq(h_cal_servers_slow(&cal, 8, 1, 1, pw), 0, "machines not measured: the law");
    cr_expect_eq(h_cal_incast(&cal, pw, NULL), 0, "no incast lines: c is 0, not a typed-in value");
    /* the document and back: the same lookups */
    char p[600];
    s_path(p, sizeof p, "cal.json");
    json_t *doc = h_cal_json(&cal);
    cr_assert(doc && json_dump_file(doc, p, JSON_REAL_PRECISION(17)) == 0);
    json_decref(doc);
    h_cal_t back;
    cr_assert_eq(h_cal_load(&back, p), 0);
    cr_expect_eq(back.n, cal.n);
    cr_expect(h_cal_servers_slow(&back, 4, 1, 2, pw) == h_cal_servers_slow(&cal, 4, 1, 2, pw));
    cr_expect_float_eq(h_cal_servers_slow(&back, 4, 1, 1, pw4), 3.0, 1e-9);
    h_cal_free(&back);
    h_cal_free(&cal);
    tmpdir_remove(g_dir);
}

/* alpha: the ring's lines 30 us a message slower than their bytes give 30 us; and the PS's slowdown is
 * measured over the model with it (a ring-only file: no PS constant). */
Test(calib, alpha_from_the_ring_lines, .init = s_setup)
{
    char a[600];
    s_path(a, sizeof a, "ring.jsonl");
    FILE *f = fopen(a, "w");
    cr_assert(f);
    double beta1 = S_WIREF * 8.0 / 1e9;
    for (int P = 2; P <= 8; P *= 2)
        for (double n = 65536; n <= 4194304; n *= 8)
            fprintf(f, "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"algo\":\"ring\",\"world\":%d,"
                       "\"net\":\"bw=1gbit\",\"bytes\":%.0f,\"wrong\":0,\"loop_us\":%.6f}\n",
                    P, n, (2.0 * (P - 1) / P * n * beta1 + 2.0 * (P - 1) * 30e-6) * 1e6);
    /* the one-shot path is another algorithm: not a point of the ring's */
    fprintf(f, "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"algo\":\"oneshot\",\"world\":4,"
               "\"net\":\"bw=1gbit\",\"bytes\":4096,\"wrong\":0,\"loop_us\":1e6}\n");
    fclose(f);
    char *files[] = {a};
    h_cal_t cal;
    cr_assert_eq(h_cal_fit(&cal, 1, files, "bbr"), 0);
    cr_expect_eq(cal.n, 1);
    cr_expect_float_eq(h_cal_alpha(&cal), 30e-6, 1e-12, "alpha %g", h_cal_alpha(&cal));
    cr_expect_eq(s_const(&cal, H_CAL_ALPHA, 0, 0)->lines, 9);
    h_cal_free(&cal);
    tmpdir_remove(g_dir);
}

/* The slowest GPU's compute: a training run with a straggler (RANK:MS, waited out before its backward by
 * trainer/emu.c) is predicted that much later, on one machine (no link) exactly; a straggler rank the run
 * does not have adds nothing. */
Test(calib, the_slowest_gpu_paces_the_step, .init = s_setup, .timeout = 60)
{
    char b[600], t[600], cal[600], cmd[4096];
    static char out[1 << 16];
    s_path(b, sizeof b, "b.jsonl"), s_path(t, sizeof t, "t.jsonl"), s_path(cal, sizeof cal, "cal.json");
    FILE *f = fopen(b, "w");
    cr_assert(f);
    s_ps_line(f, 4, 4, 1, S_FAST, 16777216, 131072, 1e6);
    fclose(f);
    f = fopen(t, "w");
    cr_assert(f);
    const char *common = "\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"resnet50\",\"device\":\"v100\","
                         "\"nodes\":1,\"gpus_per_node\":2,\"world\":2,\"net\":\"inter=25gbit\",\"local_batch\":64,"
                         "\"shrink\":32,\"dilate\":1,\"grad_dtype\":\"f32\",\"host_bound\":false,\"engine\":\"ring\","
                         "\"impl\":\"host\",\"servers\":0";
    fprintf(f, "{%s,\"emu_step_ms\":100}\n{%s,\"straggler\":\"1:100\",\"emu_step_ms\":200}\n"
               "{%s,\"straggler\":\"5:100\",\"emu_step_ms\":300}\n", common, common, common);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s model fit %s > %s && %s model check %s %s", g_h, b, cal, g_h, cal, t);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    /* rows: the run without a straggler with the rank-5 one (the same configuration: 2 launches), then the
     * straggler's */
    double pred[2] = {0};
    int launches[2] = {0};
    const char *at = strstr(out, "# out of sample");
    cr_assert(at, "%s", out);
    for (int i = 0; i < 2; i++) {
        const char *l = strstr(at, "\n  ring ");
        cr_assert(l, "%s", out);
        double meas;
        cr_assert_eq(sscanf(l, " ring %*s %*s %*d %d %lf %lf", &launches[i], &meas, &pred[i]), 3, "%.200s", l);
        at = l + 1;
    }
    cr_expect_eq(launches[0], 2, "rank 5 of 2 workers made a configuration of its own:\n%s", out);
    cr_expect_float_eq(pred[1] - pred[0], 100.0, 0.051, "the straggler's 100 ms: %.2f against %.2f", pred[1], pred[0]);
    tmpdir_remove(g_dir);
}

Test(calib, bad_input_is_refused, .init = s_setup, .timeout = 30)
{
    char a[600], bad[600], cmd[2048];
    static char out[1 << 14];
    s_path(a, sizeof a, "bad.jsonl");
    FILE *f = fopen(a, "w");
    cr_assert(f);
    fputs("{\"mode\":\"bench\",\"engine\":\"ps\",\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s model fit %s", g_h, a);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "malformed"), "%s", out);
    s_path(bad, sizeof bad, "notcal.json");
    f = fopen(bad, "w");
    cr_assert(f);
    fputs("{\"kind\": \"something else\"}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s model check %s %s", g_h, bad, a);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "not a calibration"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s model check", g_h);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "needs a calibration"), "%s", out);
    tmpdir_remove(g_dir);
}

/* scripts/slowdown-by-size prints, per size a worker pushed, the slowdown `harness model fit` takes from that
 * size's bench lines alone: two sizes on 4 machines of one, the smaller one slower. */
Test(calib, slowdown_by_size_reads_the_fit, .init = s_setup, .timeout = 60)
{
    if (system("command -v python3 >/dev/null") != 0) cr_skip_test("python3 not installed");
    char script[PATH_MAX + 32];
    cr_assert(test_script(g_h, "slowdown-by-size", script, sizeof script) == 0, "no scripts/slowdown-by-size (%s)", script);
    char path[600];
    s_path(path, sizeof path, "sizes.jsonl");
    FILE *f = fopen(path, "w");
    cr_assert(f);
    s_ps_line(f, 4, 1, 1, S_FAST, 2097152, 131072, s_ps_ideal(4, 1, 1, S_BETA_FAST, 2097152, 131072) * 2.0 * 1e6);
    s_ps_line(f, 4, 1, 1, S_FAST, 16777216, 131072, s_ps_ideal(4, 1, 1, S_BETA_FAST, 16777216, 131072) * 1.25 * 1e6);
    fclose(f);
    char cmd[PATH_MAX * 2 + 256];
    static char out[1 << 14];
    snprintf(cmd, sizeof cmd, "HARNESS=%s %s %s", g_h, script, path);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "4x1"), "%s", out);
    double r2 = 0, r16 = 0;
    const char *x = strstr(out, "\n    2 "), *y = strstr(out, "\n   16 ");
    cr_assert(x && y, "%s", out);
    cr_assert(sscanf(x, " 2 %lf", &r2) == 1 && sscanf(y, " 16 %lf", &r16) == 1, "%s", out);
    cr_expect_float_eq(r2, 2.0, 0.006, "%s", out);
    cr_expect_float_eq(r16, 1.25, 0.006, "%s", out);
    tmpdir_remove(g_dir);
}
