/* test_explain.c: the measured traffic matrices (bench's "traffic_bytes": a 4-rank ring moves bytes
 * exactly between ring neighbours, a PS exactly on its server's row and column) and `harness explain`:
 * its schedule's bytes per link equal what a real run of the engine counts (the hierarchical ring's on
 * emulated machines too), its SVG and PNG diagrams, and the link ratios (h_traffic_stats). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"
#include "harness/record/jsonl.h"
#include "harness/record/traffic.h"
#include "harness/launch/netem.h"

static char g_harness[512];

/* The traffic matrix of the first JSON line of path: world x world into mat; returns the world. */
static int s_matrix(const char *path, double *mat, int maxw)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "no %s", path);
    char line[65536];
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    h_jobj_t o = {0};
    char err[256];
    cr_assert_eq(h_jparse(line, strlen(line), &o, err, sizeof err), 0, "%s", err);
    const h_jfield_t *t = h_jget(&o, "traffic_bytes");
    cr_assert(t && t->type == HJ_ARR, "no traffic_bytes array");
    int w = (int)h_jnum(&o, "world", 0) + (int)h_jnum(&o, "servers", 0);
    cr_assert(w > 0 && w <= maxw && t->n == (size_t)w * (size_t)w, "world %d, %zu entries", w, t->n);
    memcpy(mat, t->arr, t->n * sizeof *mat);
    h_jfree(&o);
    return w;
}

/* bench one size with `args`, its matrix into mat: the world; report (may be NULL): `harness report`'s
 * text of that run */
static int s_bench_report(const char *args, size_t bytes, double *mat, int maxw, char *report, size_t rlen)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char json[600], cmd[2048], out[16384];
    char *dir = tmpdir_make();
    snprintf(json, sizeof json, "%s/b.jsonl", dir);
    snprintf(cmd, sizeof cmd, "%s bench %s --sizes %zu --iters 2 --warmup 1 --quiet --timeout 30 --json %s", g_harness,
             args, bytes, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s\n%s", cmd, out);
    int w = s_matrix(json, mat, maxw);
    if (report) {
        snprintf(cmd, sizeof cmd, "%s report %s --plots %s/plots", g_harness, json, dir);
        cr_assert_eq(run_cmd(cmd, report, rlen), 0, "%s\n%s", cmd, report);
    }
    tmpdir_remove(dir);
    return w;
}

static int s_bench(const char *args, size_t bytes, double *mat, int maxw) { return s_bench_report(args, bytes, mat, maxw, NULL, 0); }

Test(traffic, ring_neighbours_only, .timeout = 120)
{
    double m[64];
    static char rep[1 << 16];
    int w = s_bench_report("--procs 4 --engine ring --ring-algo ring", 65536, m, 8, rep, sizeof rep); /* 64 KiB: auto runs the one-shot */
    cr_assert_eq(w, 4);
    /* the report per step (3 allreduces): 2 (P-1)/P x 64K = 96K on each of the 4 links, 192K per NIC */
    cr_expect(strstr(rep, "  bench  ring               4     4      64K      4        96K        96K     1.00       192K     1.00"),
              "%s", rep);
    for (int i = 0; i < w; i++)
        for (int j = 0; j < w; j++) {
            int nb = j == (i + 1) % w;
            cr_expect(nb ? m[i * w + j] > 0 : m[i * w + j] == 0, "link %d->%d: %.0f bytes", i, j, m[i * w + j]);
        }
    /* 3 allreduces of 64 KiB, each 2 (P-1)/P of the buffer per link */
    cr_expect_eq(m[1], 3.0 * 2 * 3 / 4 * 65536);
}

Test(traffic, ps_server_row_and_column, .timeout = 120)
{
    double m[64];
    int w = s_bench("--procs 3 --servers 1 --engine ps", 65536, m, 8);
    cr_assert_eq(w, 4);
    for (int i = 0; i < w; i++)
        for (int j = 0; j < w; j++) {
            int hub = i != j && (i == 3 || j == 3);
            cr_expect(hub ? m[i * w + j] >= 3.0 * 65536 : m[i * w + j] == 0, "link %d->%d: %.0f bytes", i, j,
                      m[i * w + j]);
        }
}

/* `harness explain`'s bytes per link for one allreduce (its "traffic_bytes:" line) into m: the world */
static int s_explain(const char *args, size_t bytes, double *m, int maxw)
{
    char cmd[2048];
    static char out[1 << 18];
    snprintf(cmd, sizeof cmd, "%s explain %s --sizes %zu", g_harness, args, bytes);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s\n%s", cmd, out);
    char *p = strstr(out, "\ntraffic_bytes:");
    cr_assert(p, "%s", out);
    p += strlen("\ntraffic_bytes:");
    int n = 0;
    while (n < maxw * maxw) {
        char *e;
        double v = strtod(p, &e);
        if (e == p) break;
        m[n++] = v;
        p = e;
    }
    int w = 0;
    while (w * w < n) w++;
    cr_assert(w * w == n, "%d entries", n);
    return w;
}

/* The schedule explain prints (from the engines' own schedule code) moves exactly the bytes a real run
 * counts per link: a bench of 1 warm-up + 2 timed allreduces is 3 times the schedule (the PS adds a
 * header per message, so its links carry at least the schedule and at most 1% more). */
static void s_same_as(const char *engine_args, const char *explain_args, size_t bytes, int exact)
{
    double meas[256], sched[256];
    int w = s_bench(engine_args, bytes, meas, 16);
    cr_assert_eq(s_explain(explain_args, bytes, sched, 16), w, "%s: worlds differ", engine_args);
    for (int i = 0; i < w * w; i++) {
        double want = 3 * sched[i];
        if (exact) cr_expect_eq(meas[i], want, "%s link %d->%d: measured %.0f, schedule x3 %.0f", engine_args, i / w,
                                i % w, meas[i], want);
        else cr_expect(meas[i] >= want && meas[i] <= want * 1.01 + 4096, "%s link %d->%d: measured %.0f, schedule x3 %.0f",
                       engine_args, i / w, i % w, meas[i], want);
    }
}

static void s_same(const char *engine_args, size_t bytes, int exact) { s_same_as(engine_args, engine_args, bytes, exact); }

Test(explain, ring_schedule_matches_run, .timeout = 120) { s_same("--procs 4 --engine ring", 100000, 1); }
Test(explain, tree_schedule_matches_run, .timeout = 120) { s_same("--procs 5 --engine tree", 100000, 1); }
Test(explain, ps_schedule_matches_run, .timeout = 120) { s_same("--procs 3 --servers 2 --engine ps --ps-partition-kb 16", 100000, 0); }
/* a small message: the engine takes the one-shot, and explain shows the one-shot, whose reads a run counts */
Test(explain, ring_oneshot_schedule_matches_run, .timeout = 120) { s_same("--procs 4 --engine ring", 4096, 1); }
/* the hierarchical ring on 2 emulated machines of 3 (network namespaces this test's harness makes, root):
 * what a run counts per link is explain's schedule on machines of 3 */
Test(explain, ring_hier_schedule_matches_run, .timeout = 120)
{
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, veth, tc)");
    if (!h_netem_have("ip") || !h_netem_have("tc")) cr_skip_test("ip / tc (iproute2) not installed");
    s_same_as("--engine ring --ring-hier --nodes 2 --gpus-per-node 3 --net inter=1gbit",
              "--engine ring --ring-hier --procs 6 --gpus-per-node 3", 100000, 1);
}


/* h_traffic_stats: a 4-rank ring's links and NICs are uniform; one PS server's NIC carries every
 * worker's push and pull, (P + 1)/2 times the mean; steps divide the bytes. */
Test(traffic, stats_ring_uniform_ps_hub)
{
    double ring[16] = {0}, ps[25] = {0};
    for (int i = 0; i < 4; i++) ring[i * 4 + (i + 1) % 4] = 30;
    h_traffic_stats_t st;
    cr_assert_eq(h_traffic_stats(ring, 16, 10, &st), 0);
    cr_expect_eq(st.ranks, 4);
    cr_expect_eq(st.links, 4);
    cr_expect_float_eq(st.link_max, 3, 1e-12);
    cr_expect_float_eq(h_traffic_ratio(st.link_max, st.link_mean), 1, 1e-12);
    cr_expect_float_eq(st.nic_max, 6, 1e-12);
    cr_expect_float_eq(h_traffic_ratio(st.nic_max, st.nic_mean), 1, 1e-12);
    for (int w = 0; w < 4; w++) ps[w * 5 + 4] = ps[4 * 5 + w] = 8;   /* 4 workers, server = rank 4 */
    cr_assert_eq(h_traffic_stats(ps, 25, 1, &st), 0);
    cr_expect_eq(st.nic_busiest, 4);
    cr_expect_float_eq(st.nic_max, 64, 1e-12);
    cr_expect_float_eq(h_traffic_ratio(st.nic_max, st.nic_mean), 2.5, 1e-12);
    cr_expect_float_eq(h_traffic_ratio(st.link_max, st.link_mean), 1, 1e-12);
    cr_expect_lt(h_traffic_stats(ps, 24, 1, &st), 0, "24 entries are not a square");
    cr_expect_lt(h_traffic_stats(ps, 25, 0, &st), 0, "0 steps");
}

/* the whole file at path into a malloc'd buffer; *len its size */
static char *s_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    cr_assert(buf);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

static int s_count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* explain `args` --plots: steps diagrams, each an SVG (XML head, <svg> .. </svg>, one circle per rank
 * of world, an arrow at least in all but the last step (the tree's leaves then only store), a holdings
 * row per rank) and, when png, a PNG of the same picture
 * (signature, IHDR 1000 pixels wide); one file more of either kind is not there. env: set before. */
static void s_plots(const char *env, const char *args, int steps, int world, int png, const char *want_out)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char *dir = tmpdir_make(), cmd[2048], path[700];
    static char out[1 << 17];
    snprintf(cmd, sizeof cmd, "%s %s explain %s --sizes 1M --plots %s/d", env, g_harness, args, dir);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s\n%s", cmd, out);
    if (want_out) cr_expect(strstr(out, want_out), "%s: no '%s' in\n%s", cmd, want_out, out);
    for (int k = 1; k <= steps + 1; k++) {
        size_t n = 0;
        snprintf(path, sizeof path, "%s/d/step_%d.svg", dir, k);
        char *svg = s_slurp(path, &n);
        cr_expect_eq(svg != NULL, k <= steps, "%s: %s", args, path);
        if (svg && k <= steps) {
            cr_expect(!strncmp(svg, "<?xml", 5) && strstr(svg, "<svg ") && strstr(svg, "</svg>\n"), "%s: not an SVG", path);
            cr_expect_eq(s_count(svg, "<circle class='rank'"), world, "%s: ranks drawn", path);
            cr_expect_eq(s_count(svg, "<text class='hold'"), world, "%s: holdings rows", path);
            if (k < steps) cr_expect_geq(s_count(svg, "<line class='msg'"), 1, "%s: no message", path);
            cr_expect_eq(s_count(svg, "<text"), s_count(svg, "</text>"), "%s: unbalanced <text>", path);
        }
        free(svg);
        snprintf(path, sizeof path, "%s/d/step_%d.png", dir, k);
        char *p = s_slurp(path, &n);
        cr_expect_eq(p != NULL, png && k <= steps, "%s: %s", args, path);
        if (p && k <= steps) {
            cr_expect(n > 24 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8) && !memcmp(p + 12, "IHDR", 4), "%s: not a PNG", path);
            unsigned w = (unsigned)(unsigned char)p[16] << 24 | (unsigned)(unsigned char)p[17] << 16 |
                         (unsigned)(unsigned char)p[18] << 8 | (unsigned char)p[19];
            cr_expect_eq(w, 1000, "%s: %u pixels wide", path, w);
        }
        free(p);
    }
    tmpdir_remove(dir);
}

/* PNGs need rsvg-convert (librsvg2-bin): without it these tests are skipped, said so */
static void s_need_rsvg(void)
{
    if (system("command -v rsvg-convert >/dev/null 2>&1") != 0)
        cr_skip_test("rsvg-convert (Debian package librsvg2-bin) is not installed: explain writes SVG only");
}

/* --plots DIR, each engine: a diagram per step (ring of 4: 2 (P-1) = 6; tree of 4: depth 2, 5 steps;
 * PS: push and pull) as SVG and PNG. */
Test(explain, plots_ring, .timeout = 60) { s_need_rsvg(); s_plots("", "--engine ring --procs 4", 6, 4, 1, "step_1.png"); }
Test(explain, plots_tree, .timeout = 60) { s_need_rsvg(); s_plots("", "--engine tree --procs 4", 5, 4, 1, "step_1.png"); }
Test(explain, plots_ps_1_server, .timeout = 60)
{
    s_need_rsvg();
    s_plots("", "--engine ps --procs 4 --servers 1", 2, 5, 1, "busiest NIC rank 4 8 MiB in+out, mean 3.20 MiB (max/mean 2.50)");
}
Test(explain, plots_ps_2_servers, .timeout = 60) { s_need_rsvg(); s_plots("", "--engine ps --procs 4 --servers 2", 2, 6, 1, NULL); }
Test(explain, plots_ps_colocated, .timeout = 60) { s_need_rsvg(); s_plots("", "--engine ps --procs 3 --ps-colocate", 2, 3, 1, NULL); }

/* without rsvg-convert (SYNCBENCH_RSVG empty), or with one that fails, SVGs only, said once, exit 0 */
Test(explain, plots_svg_only_without_rsvg, .timeout = 60)
{
    s_plots("SYNCBENCH_RSVG=", "--engine ring --procs 3", 4, 3, 0, "rsvg-convert was not found (Debian/Ubuntu package librsvg2-bin");
    s_plots("SYNCBENCH_RSVG=/bin/false", "--engine ring --procs 3", 4, 3, 0, "/bin/false failed on");
}

/* the text ends each step and the allreduce with its link bytes: the ring's links are uniform */
Test(explain, link_ratios_in_text, .timeout = 60)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char cmd[1024];
    static char out[1 << 17];
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 4 --sizes 1M", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(s_count(out, "  links this step: busiest link 256 KiB, mean 256 KiB over 4 links (max/mean 1.00)"), 6, "%s", out);
    cr_expect(strstr(out, "# links, one allreduce: busiest link 1536 KiB, mean 1536 KiB over 4 links (max/mean 1.00); "
                          "busiest NIC rank 0 3 MiB in+out, mean 3 MiB (max/mean 1.00)"), "%s", out);
}

/* explain shows what the engine runs at that size: the one-shot for 64 B on one host, the ring's
 * 2 (P - 1) steps with --ring-algo ring; an engine that declares no schedule is a usage error */
Test(explain, shows_the_engines_choice, .timeout = 60)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char cmd[1024];
    static char out[1 << 17];
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 8 --sizes 64", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "the engine runs oneshot here"), "%s", out);
    cr_expect_eq(s_count(out, "\nstep "), 1, "%s", out);
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 8 --sizes 64 --ring-algo ring", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "the engine runs ring here"), "%s", out);
    cr_expect_eq(s_count(out, "\nstep "), 14, "%s", out);
    /* machines of 3: the hierarchy with --ring-hier (2 local reduce, 2 ring, 2 local broadcast steps), the
     * ring without; --nodes is not explain's */
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --ring-hier --procs 6 --gpus-per-node 3 --sizes 96", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "6 workers on 2 machines of 3; the engine runs hier here"), "%s", out);
    cr_expect_eq(s_count(out, "\nstep "), 6, "%s", out);
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 6 --gpus-per-node 3 --sizes 96", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "the engine runs ring here"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 6 --nodes 2 --sizes 96", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "--gpus-per-node G (not --nodes"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s explain --engine nonesuch --procs 4", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "unknown engine 'nonesuch'"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s explain --engine mpi --procs 2", g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    if (!strstr(out, "this build has no MPI")) /* a build without OpenMPI refuses mpi for that reason */
        cr_expect(rc == 2 && strstr(out, "engine mpi declares no schedule"), "rc %d: %s", rc, out);
}
