/* test_explain.c: the measured traffic matrices (bench's "traffic_bytes": a 4-rank ring moves bytes
 * exactly between ring neighbours, a PS exactly on its server's row and column) and `harness explain`:
 * its schedule's bytes per link equal what a real run of the engine counts, and its SVG diagrams. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"
#include "harness/jsonl.c"

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

/* bench one size with `args`, its matrix into mat: the world */
static int s_bench(const char *args, size_t bytes, double *mat, int maxw)
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
    tmpdir_remove(dir);
    return w;
}

Test(traffic, ring_neighbours_only, .timeout = 120)
{
    double m[64];
    int w = s_bench("--procs 4 --engine ring --ring-algo ring", 65536, m, 8); /* 64 KiB: auto runs the one-shot */
    cr_assert_eq(w, 4);
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
static void s_same(const char *engine_args, size_t bytes, int exact)
{
    double meas[256], sched[256];
    int w = s_bench(engine_args, bytes, meas, 16);
    cr_assert_eq(s_explain(engine_args, bytes, sched, 16), w, "%s: worlds differ", engine_args);
    for (int i = 0; i < w * w; i++) {
        double want = 3 * sched[i];
        if (exact) cr_expect_eq(meas[i], want, "%s link %d->%d: measured %.0f, schedule x3 %.0f", engine_args, i / w,
                                i % w, meas[i], want);
        else cr_expect(meas[i] >= want && meas[i] <= want * 1.01 + 4096, "%s link %d->%d: measured %.0f, schedule x3 %.0f",
                       engine_args, i / w, i % w, meas[i], want);
    }
}

Test(explain, ring_schedule_matches_run, .timeout = 120) { s_same("--procs 4 --engine ring", 100000, 1); }
Test(explain, tree_schedule_matches_run, .timeout = 120) { s_same("--procs 5 --engine tree", 100000, 1); }
Test(explain, ps_schedule_matches_run, .timeout = 120) { s_same("--procs 3 --servers 2 --engine ps --ps-partition-kb 16", 100000, 0); }

/* --plots DIR: one SVG diagram per step of the schedule (a ring of 4: 2 (P-1) = 6 steps). */
Test(explain, svg_per_step, .timeout = 60)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char *dir = tmpdir_make(), cmd[2048], path[700];
    static char out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 4 --sizes 4096 --plots %s/d", g_harness, dir);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    for (int k = 1; k <= 7; k++) {
        snprintf(path, sizeof path, "%s/d/step_%d.svg", dir, k);
        cr_expect_eq(access(path, R_OK) == 0, k <= 6, "%s", path);
    }
    tmpdir_remove(dir);
}
