/* test_sim_bundles.c: the replay's fan-out reduction for a PS (harness/simulate/sim.h h_sim_work_t.fan_bundle): a
 * round of a machine pair's transfers as one communication, server machines merged only where their servers hold
 * equal shares, and a bundle going at its first piece (cut-through), each against every transfer replayed. Skipped,
 * saying why, in a build without SimGrid. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include "harness/simulate/sim.h"
#include "core/err.h"
#include "core/sched.h"
#include "ps/ps.h"
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"

static void s_need_simgrid(void)
{
    const char *why;
    if (!h_sim_available(&why)) cr_skip_test("%s", why);
}

/* The first two tests' cluster: 16 workers on 4 machines of 4 GPUs, 25 Gbit/s, 5 us a hop, an 8% compute spread
 * (skipped without SimGrid) */
typedef struct {
    sched_env_t env;
    h_sim_platform_t pl;
    double f[16];
} s_cluster_t;

static void s_cluster(s_cluster_t *k)
{
    s_need_simgrid();
    *k = (s_cluster_t){.env = {.workers = 16, .device = -1, .segmented = 1, .gpus_per_node = 4},
                       .pl = {.nodes = 4, .gpus_per_node = 4, .inter_bps = 25e9, .intra_bps = H_SIM_INTRA_PCIE3_BPS,
                              .lat_s = 5e-6, .framing = H_SIM_TCP_FRAMING, .timeout_s = 60}};
    for (int i = 0; i < 16; i++) k->f[i] = 1 + 0.08 * ((i * 7) % 16) / 16.0;
}

/* two buckets' schedules s, ready at 4 and 6 ms, replayed for two steps of 8 ms of compute on k's GPUs */
static const double s_ready[2] = {0.004, 0.006};
static h_sim_work_t s_work(const sched_t *s, const s_cluster_t *k)
{
    return (h_sim_work_t){.nb = 2, .sched = s, .ready_s = s_ready, .total_s = 0.008, .steps = 2, .factor = k->f};
}

/* The fan-out bundles (h_sim_work_t.fan_bundle): a round of a PS's pushes and answers between two machines goes
 * as one communication crediting all its receivers (1), with the dedicated server machines merged two to one (2);
 * on a star, with stragglers, dedicated or colocated, the step keeps its time within 1% (the bound for a
 * reduction), in far fewer communications; owners answering ahead (SSP) are never bundled, nor are a server a GPU
 * machine's answers, which would share each NIC with single pushes (the flow model shares by communication). */
Test(simulate, fan_out_bundles_keep_a_ps_step, .timeout = 120)
{
    s_cluster_t k;
    s_cluster(&k);
    ps_opts_t dedicated = {.servers = 8}, coloc = {.colocate = 1}, ssp = {.servers = 8, .mode = PS_SSP, .ssp_k = 1},
              node = {.servers = 4};
    const ps_opts_t *cases[] = {&dedicated, &dedicated, &dedicated, &coloc, &ssp, &node};
    int fan[] = {1, 2, 1, 1, 2, 1};
    for (int c = 0; c < 6; c++) {
        sched_t s[2];
        /* case 2, unequal shares: the second bucket's 10 partitions of 4 MiB put two on servers 0 and 1, whose
         * bundles come in a round after the others' (a worker's step ends only once every bundle into it is in) */
        for (int b = 0; b < 2; b++) cr_assert_eq(ps_sched(cases[c], &k.env, c == 2 && b ? 10 << 20 : 1 << 20, 4, &s[b]), 0);
        k.pl.server_nodes = cases[c]->colocate || c == 5 ? 0 : 8;
        h_sim_work_t all = s_work(s, &k), bu = all;
        bu.fan_bundle = fan[c];
        h_sim_result_t a, m;
        cr_assert_eq(h_sim_run(&k.pl, &all, &a), 0, "%s", err_detail());
        cr_assert_eq(h_sim_run(&k.pl, &bu, &m), 0, "%s", err_detail());
        cr_expect_eq(a.bundle, 1);
        cr_expect_eq(m.machines, a.machines, "merged server machines are counted apart");
        if (c >= 4) { /* a server a GPU machine: its answers would go in fours beside single pushes on each NIC */
            cr_expect_eq(m.bundle, 1, "case %d: answers ahead, or bundles beside single transfers, are never bundled", c);
            cr_expect_eq(m.comms, a.comms);
        } else {
            cr_expect_geq(m.bundle, 2, "case %d: bundles", c);
            cr_expect_lt(m.comms, a.comms * 3 / 4, "case %d: bundled %llu communications, all %llu", c,
                         (unsigned long long)m.comms, (unsigned long long)a.comms);
        }
        cr_expect(fabs(m.time_s - a.time_s) / a.time_s < 0.01, "case %d: bundled %.1f us, every transfer %.1f us", c,
                  m.time_s * 1e6, a.time_s * 1e6);
        for (int b = 0; b < 2; b++) sched_free(&s[b]);
    }
}

/* Server machines are merged (--sim-bundles Q >= 2) only where every server of a merged group holds the same
 * share in every bucket: 10 partitions of 4 MiB over 8 servers put two on servers 0 and 1, one on the others, so
 * merging 4 to one is refused, naming the bucket; where every bucket falls evenly (8 partitions, one a server)
 * it goes and keeps the step within 1% of every transfer replayed. */
Test(simulate, servers_merged_only_with_equal_shares, .timeout = 120)
{
    s_cluster_t k;
    s_cluster(&k);
    k.pl.server_nodes = 8;
    ps_opts_t o = {.servers = 8};
    for (int c = 0; c < 2; c++) {
        sched_t s[2];
        cr_assert_eq(ps_sched(&o, &k.env, 1 << 20, 4, &s[0]), 0);                  /* 8 partitions: one a server */
        cr_assert_eq(ps_sched(&o, &k.env, c == 0 ? 10 << 20 : 2 << 20, 4, &s[1]), 0); /* 10: servers 0 and 1 hold two */
        h_sim_work_t w = s_work(s, &k);
        h_sim_result_t all, four;
        cr_assert_eq(h_sim_run(&k.pl, &w, &all), 0, "%s", err_detail());
        w.fan_bundle = 4;
        cr_assert_eq(h_sim_run(&k.pl, &w, &four), 0, "%s", err_detail());
        if (c == 0) {
            cr_expect_eq(four.pool, 0, "merged 4 to one with unequal shares");
            cr_expect_eq(four.pool_unequal, 2, "the bucket named: %d", four.pool_unequal);
        } else {
            cr_expect_eq(four.pool, 4);
            cr_expect_eq(four.pool_unequal, 0);
            cr_expect(fabs(four.time_s - all.time_s) / all.time_s < 0.01, "merged 4 to one %.1f us, every transfer %.1f us",
                      four.time_s * 1e6, all.time_s * 1e6);
        }
        for (int b = 0; b < 2; b++) sched_free(&s[b]);
    }
}

/* A bundle goes once the first piece it carries is held (cut-through, as the engine pushes each partition once it is
 * summed): the K = N PS with machine-local aggregation, VGG-16 on 128 GPUs, partitions that fall evenly over the 32
 * servers (results/sim-reduction-pools), merged 16 to one keeps the full replay's step within 1%; a bundle that
 * waited for its last piece left each leader's NIC idle while its machine summed the rest (7% slower). */
Test(simulate, merged_bundles_go_cut_through, .timeout = 240)
{
    s_need_simgrid();
    char h[512], cmd[2048], path[600];
    static char out[1 << 16];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    char *dir = tmpdir_make();
    snprintf(path, sizeof path, "%s/b.jsonl", dir);
    for (int q = 0; q <= 16; q += 16) {
        snprintf(cmd, sizeof cmd,
                 "%s simulate --engine ps-K=N-localagg --model vgg16 --device v100 --gpus-per-node 4 --scaling 32 "
                 "--net inter=25gbit --lat 5 --steps 2 --ps-partition-kb 12845 --sim-bundles %d --json %s", h, q, path);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    }
    double ms[2] = {0, 0};
    int pool[2] = {-1, -1}, n = 0;
    FILE *f = fopen(path, "r");
    cr_assert(f);
    for (char line[16384]; n < 2 && fgets(line, sizeof line, f);) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) continue;
        ms[n] = json_number_value(json_object_get(j, "step_ms"));
        pool[n++] = (int)json_integer_value(json_object_get(j, "pool"));
        json_decref(j);
    }
    fclose(f);
    cr_assert_eq(n, 2, "two runs' lines");
    cr_expect_eq(pool[1], 16, "merged 16 to one (the shares are equal)");
    cr_expect(ms[0] > 0 && fabs(ms[1] - ms[0]) / ms[0] < 0.01, "merged 16 to one %.2f ms, every transfer %.2f ms", ms[1], ms[0]);
    tmpdir_remove(dir);
}
