/* test_costmodel.c: the cost model of `harness model` (harness/costmodel.c) on known inputs: ring,
 * double binary tree (shape numbers from allreduce-tree's tree_shape), parameter server (dedicated and
 * colocated), and the least-squares fits; the cluster model's PS incast slowdown (harness/clustermodel.c;
 * its traffic and steps are in tests/test_cluster.c). (tests/test_model.c is the trainer's MLP.) */
#include <criterion/criterion.h>
#include "tests/lib/mconf.h"
#include <math.h>

#include "allreduce-tree/tree.h"
#include "harness/model/host_cost.h"
#include "harness/model/cluster_cost.h"

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-9 * fmax(1e-12, fabs((double)(b))))

static const h_cm_t M = {.alpha = 1e-6, .beta = 1e-9, .gamma = 0.5e-9};

Test(costmodel, ring)
{
    /* 2*3*1us + 2*3/4*1e6*1ns + 3/4*1e6*0.5ns = 6us + 1.5ms + 0.375ms */
    cr_assert(NEAR(h_cm_ring(&M, 4, 1e6), 1.881e-3), "%.9g", h_cm_ring(&M, 4, 1e6));
    cr_assert(NEAR(h_cm_ring(&M, 2, 1e6), 2e-6 + 1e-3 + 0.25e-3));
    cr_assert_eq(h_cm_ring(&M, 1, 1e6), 0);
    cr_assert_eq(h_cm_ring(&M, 8, 0), 0);
    /* bandwidth term tends to 2 n beta: P = 1024 with alpha 0 */
    h_cm_t m = {.beta = 1e-9};
    cr_assert(NEAR(h_cm_ring(&m, 1024, 1e6), 2.0 * 1023 / 1024 * 1e-3));
}

Test(costmodel, tree_shape)
{
    int D, k, c;
    h_cm_tree_shape(1, &D, &k, &c);
    cr_assert(D == 0 && k == 0 && c == 0);
    h_cm_tree_shape(2, &D, &k, &c);          /* 0 -> 1 in tree 0, 1 -> 0 in tree 1 */
    cr_assert(D == 1 && k == 2 && c == 1, "P=2: D %d k %d c %d", D, k, c);
    h_cm_tree_shape(4, &D, &k, &c);          /* 0 -> 2 -> {1,3}; mirror 3 -> 1 -> {2,0} */
    cr_assert(D == 2 && k == 4 && c == 2, "P=4: D %d k %d c %d", D, k, c);
    for (int P = 3; P <= 1024; P = P * 2 + 1) {
        h_cm_tree_shape(P, &D, &k, &c);
        int lg = 0;
        while ((1 << lg) < P) lg++;
        cr_assert(D >= 1 && D <= lg, "P=%d: depth %d > ceil(log2 P) %d", P, D, lg);
        cr_assert(k >= 2 && k <= 4 && c >= 1 && c <= 2, "P=%d: k %d c %d", P, k, c);
    }
}

Test(costmodel, tree)
{
    /* the segment is the engine's own (tree_seg_default, whole 64 B) */
    cr_assert_eq(h_cm_tree_seg(4, 4.0 * 1048576), floor((double)tree_seg_default(4, 4 << 20) / 64) * 64);
    cr_assert_eq(h_cm_tree_seg(2, 65536), floor((double)tree_seg_default(2, 65536) / 64) * 64);
    cr_assert_eq(h_cm_tree_seg(1, 65536), 0);
    /* P = 2, n = 64 KiB, segments of 16 KiB: 2 per half. Rank 0 is the leaf of tree 1 (up-ops at
     * steps 0, 1) and the root of tree 0 (down-ops at steps 1, 2); rank 1 the mirror. Its link carries
     * 1, 2, 1 segments in steps 0, 1, 2 (not 2 per step plus fill and drain): 3 alpha + 4 seg beta,
     * and the roots reduce one child segment in steps 0 and 1 */
    double seg = 16384;
    double want = 3 * 1e-6 + 4 * seg * 1e-9 + 2 * seg * 0.5e-9;
    cr_assert(NEAR(h_cm_tree(&M, 2, 65536, seg), want), "%.9g vs %.9g", h_cm_tree(&M, 2, 65536, seg), want);
    /* a last segment shorter than the others: 40 KiB halves of 16 + 16 + 8 KiB: steps carry 16, 32, 24, 8 KiB */
    double want2 = 4 * 1e-6 + (16 + 32 + 24 + 8) * 1024 * 1e-9 + (16 + 16 + 8) * 1024 * 0.5e-9;
    cr_assert(NEAR(h_cm_tree(&M, 2, 81920, seg), want2), "%.9g vs %.9g", h_cm_tree(&M, 2, 81920, seg), want2);
    /* P = 4 (D = 2 in both trees), many segments: the steady state moves k = 4 segments a step over the
     * busiest link, so the bandwidth term tends to nseg * 4 seg beta = 2 n beta (plus fill and drain) */
    h_cm_t b = {.beta = 1e-9};
    double n = 64.0 * 1048576, t4 = h_cm_tree(&b, 4, n, 262144);
    cr_assert(t4 >= 2 * n * 1e-9 && t4 < 2 * n * 1e-9 * 1.05, "P=4 64 MiB: %.6g s vs 2 n beta %.6g", t4, 2 * n * 1e-9);
    /* never below the busiest link's total volume, never above the old lock-step bound */
    for (int P = 3; P <= 64; P = P * 2 + 1) {
        double t = h_cm_tree(&M, P, 1e6, 0), s2 = h_cm_tree_seg(P, 1e6);
        int D, k, c;
        h_cm_tree_shape(P, &D, &k, &c);
        double ns = ceil(ceil(1e6 / 2) / s2);
        double old = ns * (1e-6 + k * s2 * 1e-9 + c * s2 * 0.5e-9) + 2 * D * (1e-6 + k * s2 * 1e-9);
        cr_assert(t > 1e6 * 1e-9 && t <= old, "P=%d: %.6g s (old bound %.6g)", P, t, old);
    }
    cr_assert_eq(h_cm_tree(&M, 1, 8192, 0), 0);
}

Test(costmodel, ps)
{
    /* N = 4 workers, one server, 1 MB in one partition: the server link carries 4 MB in and out, the
     * last (only) partition's reply cannot start before its pushes: 2us + (4e6 + 4e6) ns + 3e6 * 0.5ns */
    cr_assert(NEAR(h_cm_ps(&M, 4, 1, 0, 1e6, 0), 2e-6 + 8e-3 + 1.5e-3), "%.9g", h_cm_ps(&M, 4, 1, 0, 1e6, 0));
    /* many partitions: the server's in and out overlap; only one partition's round adds up */
    double n = 64.0 * 1048576, part = 4.0 * 1048576;
    cr_assert(NEAR(h_cm_ps(&M, 4, 1, 0, n, part), 2e-6 + 4 * n * 1e-9 + 4 * part * 1e-9 + 3 * n * 0.5e-9));
    /* as many servers as workers: the worker link (n) bounds */
    cr_assert(NEAR(h_cm_ps(&M, 4, 4, 0, 1e6, 0), 2e-6 + 1e6 * 1e-9 + 4 * 0.25e6 * 1e-9 + 3 * 0.25e6 * 0.5e-9));
    /* colocated: 2 (N-1)/N n each way, like the ring's volume */
    cr_assert(NEAR(h_cm_ps(&M, 4, 4, 1, 1e6, 0), 2e-6 + 1.5e6 * 1e-9 + 0.75e6 * 0.5e-9));
    cr_assert(NEAR(h_cm_ps(&M, 1, 1, 1, 1e6, 0), 2e-6));
    /* the classic result: one server's time grows with N, the ring's does not */
    h_cm_t m = {.beta = 1e-9};
    cr_assert(h_cm_ps(&m, 8, 1, 0, n, 0) > 3.5 * h_cm_ring(&m, 8, n));
    cr_assert(h_cm_ps(&m, 64, 1, 0, n, 0) / h_cm_ps(&m, 8, 1, 0, n, 0) > 7.5);
}

Test(costmodel, fits)
{
    double x[] = {1, 2, 3, 4, 5}, y[5], a, b;
    for (int i = 0; i < 5; i++) y[i] = 3 + 2 * x[i];
    cr_assert_eq(h_cm_linfit(x, y, NULL, 5, &a, &b), 0);
    cr_assert(NEAR(a, 3) && NEAR(b, 2));
    cr_assert_eq(h_cm_linfit(x, y, NULL, 1, &a, &b), -1);
    double same[] = {2, 2, 2};
    cr_assert_eq(h_cm_linfit(same, y, NULL, 3, &a, &b), -1);
    /* alpha 5 us, beta 1 ns/B recovered from exact one-way times over 8 B .. 4 MiB */
    double n[8], t[8], al, be;
    for (int i = 0; i < 8; i++) n[i] = 8.0 * pow(8, i), t[i] = 5e-6 + n[i] * 1e-9;
    cr_assert_eq(h_cm_fit_ab(n, t, 8, &al, &be), 0);
    cr_assert(fabs(al - 5e-6) < 1e-12 && fabs(be - 1e-9) < 1e-15, "alpha %g beta %g", al, be);
    /* a shaper with a burst allowance: mid sizes faster than the link; alpha and beta still come from
     * the small and the large messages */
    for (int i = 0; i < 8; i++) t[i] = 20e-6 + n[i] * 8e-9;
    t[4] *= 0.5, t[5] *= 0.6;     /* 32 KiB and 256 KiB... only 256 KiB is in the slope set */
    n[5] = 200000;                /* ...so move it out of it: the slope uses 2 MiB and 16 MiB */
    cr_assert_eq(h_cm_fit_ab(n, t, 8, &al, &be), 0);
    cr_assert(fabs(al - 20e-6) < 1e-12 && fabs(be - 8e-9) < 1e-15, "alpha %g beta %g", al, be);
    /* noise that would give a negative intercept: alpha clamps to 0, beta through the origin */
    double n2[] = {1000, 2000, 4000}, t2[] = {0.5e-6, 1.9e-6, 4.1e-6};
    cr_assert_eq(h_cm_fit_ab(n2, t2, 3, &al, &be), 0);
    double num = 0, den = 0;   /* weights 1/t^2 through the origin: sum(n/t) / sum((n/t)^2) */
    for (int i = 0; i < 3; i++) num += n2[i] / t2[i], den += (n2[i] / t2[i]) * (n2[i] / t2[i]);
    cr_assert(al == 0 && NEAR(be, num / den), "alpha %g beta %g", al, be);
}

Test(costmodel, token_step)
{
    /* burst 10000 B, alpha 1 us, beta 1 ns/B. Link 0 holds 10000 tokens (full: the latency's 1000
     * are lost to the cap) and moves 15000 B: 5000 wait for tokens, 5 us; link 1 holds none, gains
     * 1000 during the latency and moves 500 for free. Step 1 + 5 = 6 us; afterwards link 0 holds
     * 10000 + 6000 - 15000 = 1000, link 1 0 + 6000 - 500 = 5500 */
    h_cm_t m = {.alpha = 1e-6, .beta = 1e-9, .burst = 10000};
    double b[2] = {15000, 500}, tok[2] = {10000, 0};
    cr_assert(NEAR(h_cm_step(&m, 2, b, tok, 0), 6e-6), "%.9g", h_cm_step(&m, 2, b, (double[2]){10000, 0}, 0));
    cr_assert(NEAR(tok[0], 1000) && NEAR(tok[1], 5500), "tokens %g %g", tok[0], tok[1]);
    /* no shaper: alpha + busiest link beta + reduced gamma, and no tokens */
    double t0[2] = {0, 0};
    cr_assert(NEAR(h_cm_step(&M, 2, b, t0, 1000), 1e-6 + 15000e-9 + 1000 * 0.5e-9));
    cr_assert(t0[0] == 0 && t0[1] == 0);
}

Test(costmodel, token_ring_and_ps)
{
    /* ring, P = 2, 64 KiB, burst 1e5: back to back the bucket empties in the second allreduce; from
     * the third on each step of 32768 B finds the 1000 tokens its 1 us latency refilled and waits
     * 31.768 us for the rest: 2 x 32.768 us = n beta, where the unshaped sum is 2 alpha + n beta */
    h_cm_t m = {.alpha = 1e-6, .beta = 1e-9, .burst = 1e5};
    cr_assert(NEAR(h_cm_ring(&m, 2, 65536), 65536e-9), "%.9g", h_cm_ring(&m, 2, 65536));
    /* one PS server, 2 workers, 64 KiB (one partition), alpha 0: the server takes 131072 B in, then
     * sends 131072 B out. Each direction refills while the other works: steady state (from the second
     * allreduce) push 131072 - 31072 tokens = 100 us, pull 131072 - 100000 = 31.072 us: 131.072 us =
     * N n beta, half the unshaped 2 N n beta */
    h_cm_t p = {.beta = 1e-9, .burst = 1e5};
    cr_assert(NEAR(h_cm_ps(&p, 2, 1, 0, 65536, 0), 131072e-9), "%.9g", h_cm_ps(&p, 2, 1, 0, 65536, 0));
    p.burst = 0;
    cr_assert(NEAR(h_cm_ps(&p, 2, 1, 0, 65536, 0), 2 * 131072e-9));
    /* colocated, N = 2: a push and a pull step of 32768 B on every link, like the ring: n beta */
    p.burst = 1e5;
    cr_assert(NEAR(h_cm_ps(&p, 2, 2, 1, 65536, 0), 65536e-9), "%.9g", h_cm_ps(&p, 2, 2, 1, 65536, 0));
    /* tree, P = 2, 64 KiB in 16 KiB segments, alpha 0: links carry 16, 32, 16 KiB per allreduce step
     * (64 KiB per allreduce each way): back to back the buckets cannot beat n beta on average */
    h_cm_t t = {.beta = 1e-9, .burst = 1e5};
    cr_assert(NEAR(h_cm_tree(&t, 2, 65536, 16384), 65536e-9), "%.9g", h_cm_tree(&t, 2, 65536, 16384));
    /* a burst larger than all an allreduce moves, and latencies that refill it: only alpha is left */
    h_cm_t big = {.alpha = 1e-3, .beta = 1e-9, .burst = 1e6};
    cr_assert(NEAR(h_cm_ring(&big, 4, 65536), 6e-3), "%.9g", h_cm_ring(&big, 4, 65536));
}

Test(costmodel, cpu_floor)
{
    h_cm_t m = {.beta = 1e-9, .kappa = 1e-9, .cores = 2};
    cr_assert(NEAR(h_cm_cpu(&m, 4, 8), 4) && h_cm_cpu(&m, 2, 8) == 0);
    m.cores = 0;
    cr_assert(h_cm_cpu(&m, 64, 8) == 0);
    m.cores = 2;
    /* ring P = 4, 1 MB: network 2 (3/4) 1e6 ns = 1.5 ms; CPU 4 ranks x 4 (3/4) 1e6 B x 1 ns = 12 ms
     * on 2 cores = 6 ms binds. At P = 2 (a core per rank) the network time stands */
    cr_assert(NEAR(h_cm_ring(&m, 4, 1e6), 6e-3), "%.9g", h_cm_ring(&m, 4, 1e6));
    cr_assert(NEAR(h_cm_ring(&m, 2, 1e6), 1e-3));
    /* one PS server, 4 workers, 1 MB: 5 procs. Workers 2 MB each, the server 8 MB: 16 ms of kappa, +
     * 3 MB x gamma 1 ns, + 4 MB x mu 1 ns = 23 ms on 2 cores = 11.5 ms > the network's 8 ms */
    m.gamma = 1e-9, m.mu = 1e-9;
    cr_assert(NEAR(h_cm_ps(&m, 4, 1, 0, 1e6, 0), 11.5e-3), "%.9g", h_cm_ps(&m, 4, 1, 0, 1e6, 0));
    /* colocated, 4 ranks: each 4 (3/4) 1 MB kappa + 0.75 MB gamma + 1 MB mu = 4.75 ms; x4 / 2 = 9.5 ms */
    cr_assert(NEAR(h_cm_ps(&m, 4, 4, 1, 1e6, 0), 9.5e-3), "%.9g", h_cm_ps(&m, 4, 4, 1, 1e6, 0));
}

/* The pipelined PS's incast slowdown (clustermodel.h): 1 + c (f - 1) on a NIC taking f workers' pushes
 * from two or more machines while it replies; nothing for one machine, one worker, or without overlap. */
Test(costmodel, ps_incast_slowdown)
{
    cr_expect_float_eq(h_cl_incast_factor(0.05, 9, 3, 16), 1.4, 1e-12);
    cr_expect_float_eq(h_cl_incast_factor(0.05, 9, 1, 16), 1.0, 1e-12);   /* one machine paces its own flows */
    cr_expect_float_eq(h_cl_incast_factor(0.05, 1, 4, 16), 1.0, 1e-12);
    cr_expect_float_eq(h_cl_incast_factor(0.05, 100, 4, 16), 1 + 0.05 * 15, 1e-12); /* held at the measured 16 */
    cr_expect_float_eq(h_cl_incast_factor(0.05, 100, 4, 0), 1 + 0.05 * 99, 1e-12);
    int f[3] = {2, 4, 8};
    double r[3] = {1.03, 1.09, 1.21};
    cr_expect_float_eq(h_cl_incast_fit(3, f, r), 0.03, 1e-12);
    cr_expect(isnan(h_cl_incast_fit(0, f, r)));

    /* one server on a machine of its own, 4 machines of one worker, one partition: pushes 4 x 10 B at
     * 1 ms/B, then the replies; with c = 0.1 the server's NIC takes 1.3 x as long */
    h_cl_net_t net = {.nodes = 4, .gpus_per_node = 1, .beta = 1e-3, .alpha = 0};
    h_cl_engine_t ded = t_layout("ps-1server", 4, 1);
    ded.pipelined = 1;
    double ready = 0, bytes = 10;
    cr_expect_float_eq(h_cl_step(&net, &ded, 1, &ready, &bytes, 0, NULL), 0.080, 1e-12);
    ded.incast = 0.1;
    cr_expect_float_eq(h_cl_step(&net, &ded, 1, &ready, &bytes, 0, NULL), 0.104, 1e-12);
    /* a slowdown measured on this layout replaces the law */
    ded.slow = 1.5;
    cr_expect_float_eq(h_cl_step(&net, &ded, 1, &ready, &bytes, 0, NULL), 0.120, 1e-12);
    ded.slow = 0;
    /* without overlap (the replies after the last push) there is no slowdown */
    ded.pipelined = 0;
    cr_expect_float_eq(h_cl_step(&net, &ded, 1, &ready, &bytes, 0, NULL), 0.080, 1e-12);

    /* a server on each of 3 machines of one worker: each takes 2 remote workers' pushes on 2 machines;
     * a direction carries 2/3 n of pushes and 2/3 n of replies, x 1.1 as a whole (the law stretches the
     * direction's bytes as a measured slowdown does) */
    h_cl_net_t three = {.nodes = 3, .gpus_per_node = 1, .beta = 1e-3, .alpha = 0};
    h_cl_engine_t per = t_layout("ps-per-node", 3, 1);
    per.pipelined = 1, per.incast = 0.1;
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&three, &per, 30), (20 + 20) * 1.1, 1e-9);
    /* a slowdown measured by this layout's collective alone replaces the law and stretches the whole
     * direction (its time holds pushes and replies alike) */
    per.slow = 2;
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&three, &per, 30), (20 + 20) * 2, 1e-9);
    /* colocated on the same 3 machines: 1/3 n to each of the 2 remote servers out, and as many replies */
    h_cl_engine_t col = t_layout("ps-colocated", 3, 1);
    col.pipelined = 1, col.incast = 0.1;
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&three, &col, 30), (20 + 20) * 1.1, 1e-9);
    col.slow = 1.5;
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&three, &col, 30), (20 + 20) * 1.5, 1e-9);
    /* two machines: the one remote machine's egress paces its flows, no slowdown */
    h_cl_net_t two = {.nodes = 2, .gpus_per_node = 2, .beta = 1e-3, .alpha = 0};
    h_cl_engine_t per2 = t_layout("ps-per-node", 2, 2);
    per2.pipelined = 1;
    double plain = h_cl_ps_duplex_bytes(&two, &per2, 30);
    per2.incast = 0.1;
    cr_expect_float_eq(h_cl_ps_duplex_bytes(&two, &per2, 30), plain, 1e-12);
}
