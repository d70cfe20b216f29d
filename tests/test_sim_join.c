/* test_sim_join.c: the replay's joined streams (harness/simulate/sim.h h_sim_work_t.join, --sim-join 1, experimental):
 * a connection's stream takes in the streams after it whose buckets are released by the time it starts, as one
 * communication; off by default, and then the streams go apart. Skipped, saying why, in a build without SimGrid. */
#include <criterion/criterion.h>
#include <math.h>
#include "harness/simulate/sim.h"
#include "core/err.h"
#include "core/sched.h"
#include "allreduce-tree/tree.h"

/* A tree's two buckets, both ready at 4 ms, on 16 GPUs in machines of 4 at 5 us a hop: each connection's stream of
 * the first bucket finds the second released when it starts, so with join the second goes in its communication
 * (fewer communications, every rank's step still ends, the step near the streams apart); without, none joins. */
Test(simulate, joined_streams_go_as_one_communication, .timeout = 120)
{
    const char *why;
    if (!h_sim_available(&why)) cr_skip_test("%s", why);
    sched_env_t env = {.workers = 16, .device = -1, .segmented = 1, .gpus_per_node = 4};
    sched_t t[2];
    for (int b = 0; b < 2; b++) cr_assert_eq(tree_sched(NULL, &env, 1 << 22, 4, &t[b]), 0);
    h_sim_platform_t pl = {.nodes = 4, .gpus_per_node = 4, .inter_bps = 25e9, .intra_bps = H_SIM_INTRA_PCIE3_BPS,
                           .lat_s = 5e-6, .framing = H_SIM_TCP_FRAMING, .timeout_s = 60};
    static const double ready[2] = {0.004, 0.004};
    h_sim_work_t apart = {.nb = 2, .sched = t, .ready_s = ready, .total_s = 0.008, .steps = 2, .min_stream = 4},
                 joined = apart;
    joined.join = 1;
    h_sim_result_t a, j;
    cr_assert_eq(h_sim_run(&pl, &apart, &a), 0, "%s", err_detail());
    cr_assert_eq(h_sim_run(&pl, &joined, &j), 0, "%s", err_detail());
    cr_expect_eq(a.joined, 0, "off: %llu streams joined", (unsigned long long)a.joined);
    cr_expect_gt(a.stream, 2, "the buckets' segments go in streams");
    cr_expect_gt(j.joined, 0, "on: no stream joined the one before it");
    cr_expect_eq(j.comms + j.joined, a.comms, "%llu communications + %llu joined, against %llu apart",
                 (unsigned long long)j.comms, (unsigned long long)j.joined, (unsigned long long)a.comms);
    cr_expect_eq(j.steps, 2);
    cr_expect(fabs(j.time_s - a.time_s) / a.time_s < 0.05, "joined %.1f us a step, apart %.1f us", j.time_s * 1e6,
              a.time_s * 1e6);
    for (int b = 0; b < 2; b++) sched_free(&t[b]);
}
