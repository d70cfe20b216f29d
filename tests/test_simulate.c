/* test_simulate.c: the SimGrid replay of declared schedules (harness/simulate/sim.h) against the closed
 * forms that hold where no link is shared unevenly: the ring on a non-blocking star pays, every one of its
 * 2 (P - 1) steps, one chunk at the bottleneck rate plus the route's latencies; a PS server on a machine
 * of its own takes P buffers through its NIC each way. And `harness simulate` itself: its refusals and
 * its result lines. Skipped, saying why, in a build without SimGrid. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness/simulate/sim.h"
#include "core/err.h"
#include "core/sched.h"
#include "ring/ring.h"
#include "ps/ps.h"
#include "allreduce-tree/tree.h"
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"

static void s_need_simgrid(void)
{
    const char *why;
    if (!h_sim_available(&why)) cr_skip_test("%s", why);
}

static double s_sim(const h_sim_platform_t *pl, const sched_t *s)
{
    h_sim_result_t r;
    cr_assert_eq(h_sim_collective(pl, s, &r), 0, "%s", err_detail());
    cr_assert(r.time_s > 0);
    return r.time_s;
}

/* 4 machines of 1 GPU, then 1 machine of 4: each ring step is a chunk through the slowest link of its
 * route plus the route's hop latencies (4 hops across machines, 2 inside one) */
Test(simulate, ring_matches_the_closed_form)
{
    s_need_simgrid();
    ring_opts_t o;
    ring_opts_init(&o);
    const int P = 4;
    const size_t count = 1 << 20;   /* 4 MiB of f32 */
    sched_env_t env = {.workers = P, .one_host_shm = 0, .device = -1};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, count, 4, &s), 0);
    double chunk = (double)count * 4 / P, lat = 5e-6;
    h_sim_platform_t pl = {.nodes = P, .gpus_per_node = 1, .inter_bps = 10e9, .intra_bps = 100e9, .lat_s = lat,
                           .framing = H_SIM_TCP_FRAMING, .timeout_s = 60};
    double want = 2 * (P - 1) * (4 * lat + chunk / (pl.inter_bps * pl.framing / 8));
    double got = s_sim(&pl, &s);
    cr_expect(fabs(got - want) / want < 0.005, "across machines: simulated %.1f us, closed form %.1f us", got * 1e6,
              want * 1e6);
    pl.nodes = 1;
    pl.gpus_per_node = P;
    want = 2 * (P - 1) * (2 * lat + chunk / (pl.intra_bps * pl.framing / 8));
    got = s_sim(&pl, &s);
    cr_expect(fabs(got - want) / want < 0.005, "inside one machine: simulated %.1f us, closed form %.1f us", got * 1e6,
              want * 1e6);
    sched_free(&s);
}

/* one dedicated server on a machine of its own: its NIC takes every worker's buffer in, then sends it
 * back to each: 2 P n at the NIC's rate, plus a push's and a pull's latencies */
Test(simulate, ps_server_machine_is_the_bottleneck)
{
    s_need_simgrid();
    const int P = 4;
    const size_t count = 1 << 18;
    ps_opts_t po = {.servers = 1, .partition_bytes = (size_t)count * 4};   /* one partition */
    sched_env_t env = {.workers = P, .one_host_shm = 0, .device = -1};
    sched_t s;
    cr_assert_eq(ps_sched(&po, &env, count, 4, &s), 0);
    cr_assert_eq(s.world, P + 1);
    double lat = 10e-6, n = (double)count * 4;
    h_sim_platform_t pl = {.nodes = P, .gpus_per_node = 1, .server_nodes = 1, .inter_bps = 25e9, .intra_bps = 1e12,
                           .lat_s = lat, .framing = 1, .timeout_s = 60};
    double want = 2 * (P * n / (pl.inter_bps / 8) + 4 * lat);
    double got = s_sim(&pl, &s);
    cr_expect(fabs(got - want) / want < 0.005, "simulated %.1f us, closed form %.1f us", got * 1e6, want * 1e6);
    h_sim_result_t r;
    cr_assert_eq(h_sim_collective(&pl, &s, &r), 0);
    cr_expect_eq(r.nic_max_bytes, (uint64_t)(P * n), "the server machine's NIC carries P buffers each way");
    cr_expect_eq(r.machines, P + 1);
    sched_free(&s);
}

/* segments: the host ring runs segment-major (segment k through all 2 (P - 1) steps, each step waiting for
 * the receive before it), so every segment pays the route's latency at every step: nseg 2 (P - 1)
 * (latencies + segment / rate), more than the unsegmented schedule's 2 (P - 1) latencies; and the tree's
 * lock-step pipeline on 64 machines beats its unsegmented schedule (whole halves a step) */
Test(simulate, segments_pipeline)
{
    s_need_simgrid();
    ring_opts_t o;
    ring_opts_init(&o);
    const int P = 4;
    const size_t count = 1 << 20;
    sched_env_t env = {.workers = P, .device = -1, .segmented = 1, .seg_bytes = 64 << 10};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, count, 4, &s), 0);
    h_sim_platform_t pl = {.nodes = P, .gpus_per_node = 1, .inter_bps = 10e9, .intra_bps = 1e12, .lat_s = 5e-6,
                           .framing = 1, .timeout_s = 60};
    double bw = pl.inter_bps / 8, seg = 64 << 10, nseg = (double)count * 4 / P / seg;
    double want = nseg * 2 * (P - 1) * (4 * pl.lat_s + seg / bw), got = s_sim(&pl, &s);
    cr_expect(fabs(got - want) / want < 0.005, "segmented ring %.1f us, closed form %.1f us", got * 1e6, want * 1e6);
    sched_free(&s);
    sched_env_t e1 = {.workers = 64, .device = -1}, e2 = e1;
    e2.segmented = 1;
    sched_t a, b;
    cr_assert_eq(tree_sched(NULL, &e1, 1 << 22, 4, &a), 0);
    cr_assert_eq(tree_sched(NULL, &e2, 1 << 22, 4, &b), 0);
    pl.nodes = 64;
    double ta = s_sim(&pl, &a), tb = s_sim(&pl, &b);
    cr_expect_lt(tb, ta * 0.5, "segmented tree %.1f us, whole halves %.1f us", tb * 1e6, ta * 1e6);
    sched_free(&a);
    sched_free(&b);
}

Test(simulate, platform_too_small_is_refused)
{
    s_need_simgrid();
    ring_opts_t o;
    ring_opts_init(&o);
    sched_env_t env = {.workers = 8, .one_host_shm = 0, .device = -1};
    sched_t s;
    cr_assert_eq(ring_sched(&o, &env, 1024, 4, &s), 0);
    h_sim_platform_t pl = {.nodes = 1, .gpus_per_node = 4, .inter_bps = 1e9, .intra_bps = 1e9, .framing = 1, .timeout_s = 10};
    h_sim_result_t r;
    cr_expect_eq(h_sim_collective(&pl, &s, &r), ERR_INVAL);
    cr_expect(strstr(err_detail(), "do not fit"), "%s", err_detail());
    sched_free(&s);
}

Test(simulate, the_mode, .timeout = 120)
{
    s_need_simgrid();
    char h[512], cmd[2048];
    static char out[1 << 16];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    snprintf(cmd, sizeof cmd, "%s simulate --engine ring --nodes 4 --net inter=25gbit --sizes 1M", h);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "no --lat: %s", out);
    cr_expect(strstr(out, "--lat US"), "%s", out);
    char *dir = tmpdir_make(), path[600];
    snprintf(path, sizeof path, "%s/s.jsonl", dir);
    snprintf(cmd, sizeof cmd,
             "%s simulate --engine ring,tree,ps --nodes 4 --gpus-per-node 2 --net inter=25gbit --lat 5 --sizes 1M:4M --factor 4 "
             "--json %s", h, path);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(count_lines(path, "\"mode\":\"simulate\""), 6, "3 engines x 2 sizes: %s", out);
    cr_expect_eq(count_lines(path, "\"lat_us\":5"), 6);
    tmpdir_remove(dir);
}
