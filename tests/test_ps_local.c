/* test_ps_local.c: the PS's machine-local aggregation (--ps-local-agg) on forked ranks that pretend to
 * live on several machines (SYNCBENCH_FAKE_HOST): on each machine shape the same training run with the
 * plain PS and with local aggregation, against the local optimizer reference (bit-exact on one machine,
 * where the leader's rank-order sum is the reference's), every worker holding the same bits, the same
 * skipped AMP step, allreduce sums and averages; each machine's bytes to the servers cut by its worker
 * count (members push nothing, a leader as much as one plain worker); --ps-window 1; a member that dies named
 * by its leader; async refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "core/optim.h"
#include "ps/ps.h"
#include "tests/lib/ranks.h"
#include "tests/lib/ps_ranks.h"

typedef struct {
    const char *hosts;        /* a letter a worker: the machine it lives on ("abab": 0, 2 on a; 1, 3 on b) */
    int nservers;             /* dedicated servers, each on a host of its own; 0: colocated */
    dtype_t gdt;
    optim_kind_t opt;
    float inv_scale;
    int overflow_step;        /* worker 1 submits an Inf at this step (-1: never) */
    int exact;                /* bit-exact with the reference (one machine, one server, f32) */
    int window;               /* --ps-window (0: none) */
} shape_t;

enum { S_STEPS = 12, S_N = 3001, S_PART = 700 };

typedef struct {
    int server;
    int member;
    uint64_t hash, sent_plain, sent_lagg, local_sent, lagg_counter, machine_workers;
} info_t;

static void s_grad(float *g, const float *p, size_t n, int w, int t)
{
    for (size_t i = 0; i < n; i++) {
        float a = 0.5f + (float)(i % 5) * 0.25f;
        float c = (float)((int)(i % 11) - 5) * 0.1f + (float)w * 0.01f;
        g[i] = a * (p[i] - c) + 0.001f * (float)(((int)i + t * 3 + w) % 7 - 3);
    }
}

static float s_lr(const shape_t *sh) { return sh->opt == OPT_ADAM ? 0.01f : 0.1f; }

static ps_topo_t s_topo(const shape_t *sh, int lagg)
{
    ps_topo_t t = {.nworkers = (int)strlen(sh->hosts), .colocate = sh->nservers == 0, .mode = PS_SYNC,
                   .part_bytes = S_PART, .local_agg = lagg, .window = sh->window};
    return t;
}

/* The local reference: every worker's gradient (rounded to the gradient dtype), summed in rank order,
 * averaged, rounded again, the optimizer; the overflow step skipped. */
static void s_reference(float *p, const shape_t *sh, int W)
{
    size_t n = S_N, esz = dt_size(sh->gdt);
    optim_cfg_t oc;
    optim_cfg_default(&oc, sh->opt);
    optim_t *o = NULL;
    optim_new(&o, &oc, n);
    float *g = malloc(n * sizeof(float)), *acc = malloc(n * sizeof(float));
    void *gh = malloc(n * esz);
    uint64_t applied = 0;
    for (int t = 0; t < S_STEPS; t++) {
        memset(acc, 0, n * sizeof(float));
        for (int w = 0; w < W; w++) {
            s_grad(g, p, n, w, t);
            for (size_t i = 0; i < n; i++) g[i] /= sh->inv_scale;
            dt_convert(gh, sh->gdt, g, DT_F32, n);
            dt_convert(g, DT_F32, gh, sh->gdt, n);
            for (size_t i = 0; i < n; i++) acc[i] += g[i];
        }
        if (t == sh->overflow_step) continue;
        dt_scale(acc, n, DT_F32, 1.0f / (float)W);
        dt_convert(gh, sh->gdt, acc, DT_F32, n);
        dt_convert(acc, DT_F32, gh, sh->gdt, n);
        optim_step(o, p, acc, 0, n, sh->inv_scale, s_lr(sh), ++applied);
    }
    optim_destroy(&o);
    free(g); free(acc); free(gh);
}

/* Allreduces of the engine against the sums and averages over W workers (values exact in f32 and f16). */
static int s_allreduces(engine_t *e, int rank, int W)
{
    static const size_t counts[] = {1, 1000, 100003};
    int bad = 0;
    for (size_t c = 0; c < 3 && !bad; c++)
        for (int d = 0; d < 2 && !bad; d++)
            for (int op = 0; op < 2 && !bad; op++) {
                dtype_t dt = d ? DT_F16 : DT_F32;
                size_t n = counts[c], esz = dt_size(dt);
                float *v = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
                void *snd = malloc(n * esz), *rcv = malloc(n * esz);
                for (size_t i = 0; i < n; i++) {
                    float s = 0;
                    for (int w = 0; w < W; w++) s += (float)((int)((i * 7 + (size_t)w * 3) % 17) - 8);
                    v[i] = (float)((int)((i * 7 + (size_t)rank * 3) % 17) - 8);
                    ref[i] = op ? s / (float)W : s;
                }
                dt_convert(snd, dt, v, DT_F32, n);
                int inplace = (int)(c + (size_t)d + (size_t)op) % 2;
                int rc = ps_engine.allreduce(e, snd, inplace ? snd : rcv, n, dt, op ? OP_AVG : OP_SUM, PS_TEST_TO);
                if (rc < 0) {
                    ps_test_report("allreduce", rc);
                    bad = 1;
                } else {
                    dt_convert(v, DT_F32, inplace ? snd : rcv, dt, n);
                    for (size_t i = 0; i < n && !bad; i++)
                        if (fabsf(v[i] - ref[i]) > (op ? 0.01f : 0.0f)) {
                            fprintf(stderr, "rank %d: allreduce %s %s n=%zu [%zu] = %g, expected %g\n", rank, dt_name(dt),
                                    op ? "avg" : "sum", n, i, v[i], ref[i]);
                            bad = 1;
                        }
                }
                free(v); free(ref); free(snd); free(rcv);
            }
    return bad;
}

/* One training run of S_STEPS (buckets of uneven sizes, last layer first) with the plain PS (lagg 0) or
 * local aggregation, from rank 0's parameters into p; the skipped steps into skipped[], its stats in *st
 * (bytes_sent: the steps' only); then, with local aggregation, allreduces. */
static int s_run(comm_t *comm, const shape_t *sh, int lagg, float *p, int rank, engine_stats_t *st, int *skipped)
{
    size_t n = S_N, esz = dt_size(sh->gdt);
    ps_topo_t t = s_topo(sh, lagg);
    if (rank == 0) ps_test_init_params(p, n);
    else for (size_t i = 0; i < n; i++) p[i] = 1234.5f;
    param_set_t ps = {.params = p, .count = n, .grad_dtype = sh->gdt};
    optim_cfg_default(&ps.optim, sh->opt);
    engine_t *e = NULL;
    int rc = ps_test_worker(&e, comm, &t, comm->world, &ps), fail = 0;
    if (rc < 0) { ps_test_report("create/attach", rc); ps_engine.destroy(&e); return 1; }
    float *g = malloc(n * sizeof(float));
    void *gh = malloc(n * esz);
    uint64_t applied = 0;
    engine_stats_t st0; /* after attach (rank 0 also sent the INITs) */
    ps_engine.stats(e, &st0);
    for (int s = 0; s < S_STEPS && !fail; s++) {
        step_ctx_t ctx = {.step = applied + 1, .inv_scale = sh->inv_scale, .lr = s_lr(sh)};
        s_grad(g, p, n, rank, s);
        for (size_t i = 0; i < n; i++) g[i] /= sh->inv_scale;
        if (s == sh->overflow_step && rank == 1) g[n / 2] = INFINITY;
        dt_convert(gh, sh->gdt, g, DT_F32, n);
        rc = ps_engine.step_begin(e, &ctx);
        size_t cuts[] = {n, n * 2 / 3, n / 3 + 1, n / 7, 0};
        for (int b = 0; b < 4 && rc == 0; b++) {
            bucket_t bk = {.grad = (char *)gh + cuts[b + 1] * esz, .offset = cuts[b + 1], .count = cuts[b] - cuts[b + 1],
                           .index = b};
            rc = ps_engine.submit(e, &bk);
        }
        step_out_t out = {0};
        if (rc == 0) rc = ps_engine.wait(e, &out, PS_TEST_TO);
        if (rc < 0) { ps_test_report(lagg ? "local-agg step" : "plain step", rc); fail = 1; break; }
        skipped[s] = out.skipped;
        if (!out.skipped) applied++;
    }
    ps_engine.stats(e, st); /* the training's bytes */
    st->bytes_sent -= st0.bytes_sent;
    if (!fail && lagg) fail = s_allreduces(e, rank, (int)strlen(sh->hosts));
    ps_engine.destroy(&e);
    free(g); free(gh);
    return fail;
}

static uint64_t s_hash(const float *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int s_rank(int rank, int world, void *arg)
{
    const shape_t *sh = arg;
    int W = (int)strlen(sh->hosts), fail = 0;
    char host[16];
    if (rank < W) snprintf(host, sizeof host, "m%c", sh->hosts[rank]);
    else snprintf(host, sizeof host, "srv%d", rank - W);
    setenv("SYNCBENCH_FAKE_HOST", host, 1);
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    info_t me = {0}, *all = calloc((size_t)world, sizeof *all);
    size_t n = S_N;
    float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
    int ska[S_STEPS] = {0}, skb[S_STEPS] = {0};
    if (rank >= W) {
        me.server = 1;
        for (int lagg = 0; lagg < 2 && !fail; lagg++) {
            ps_topo_t t = s_topo(sh, lagg);
            fail = ps_test_serve(comm, &t, 0);
        }
    } else {
        engine_stats_t sa, sb;
        fail = s_run(comm, sh, 0, pa, rank, &sa, ska);
        if (!fail) fail = s_run(comm, sh, 1, pb, rank, &sb, skb);
        if (!fail) {
            me.hash = s_hash(pb, n);
            me.sent_plain = sa.bytes_sent;
            me.sent_lagg = sb.bytes_sent;
            me.local_sent = engine_counter(&sb, "ps_local_bytes_sent");
            me.lagg_counter = engine_counter(&sb, "ps_local_agg");
            me.machine_workers = engine_counter(&sb, "ps_machine_workers");
            me.member = strchr(sh->hosts, sh->hosts[rank]) != sh->hosts + rank;
            if (engine_counter(&sa, "ps_local_agg") != 0 || me.lagg_counter != 1 || !strstr(sb.impl, "-localagg")) {
                fprintf(stderr, "rank %d: counters/impl do not say local aggregation (%s)\n", rank, sb.impl);
                fail = 1;
            }
            ps_test_init_params(ref, n);
            s_reference(ref, sh, W);
            float tol = sh->gdt == DT_F32 ? 1e-4f : 2e-3f;
            for (size_t i = 0; i < n && !fail; i++) {
                float da = fabsf(pa[i] - ref[i]), db = fabsf(pb[i] - ref[i]);
                if (da > tol || db > tol || (sh->exact && pb[i] != ref[i])) {
                    fprintf(stderr, "rank %d: param %zu: plain %.9g, local-agg %.9g, reference %.9g\n", rank, i, pa[i],
                            pb[i], ref[i]);
                    fail = 1;
                }
            }
            for (int s = 0; s < S_STEPS && !fail; s++)
                if (ska[s] != (s == sh->overflow_step) || skb[s] != ska[s]) {
                    fprintf(stderr, "rank %d: step %d skipped: plain %d, local-agg %d\n", rank, s, ska[s], skb[s]);
                    fail = 1;
                }
        }
    }
    /* every rank's figures to every rank (the servers too: the collective is the world's) */
    int rc = comm_allgather(comm, &me, sizeof me, all, PS_TEST_TO);
    if (rc < 0) { ps_test_report("allgather", rc); fail = 1; }
    for (int r = 0; r < W && !fail && rank == 0; r++) {
        int G = 0, lead = -1;
        for (int q = 0; q < W; q++)
            if (sh->hosts[q] == sh->hosts[r]) { G++; if (lead < 0) lead = q; }
        if (all[r].hash != all[0].hash) { fprintf(stderr, "worker %d holds other parameters than worker 0\n", r); fail = 1; }
        if (all[r].machine_workers != (uint64_t)G) {
            fprintf(stderr, "worker %d: %llu workers on its machine, expected %d\n", r,
                    (unsigned long long)all[r].machine_workers, G);
            fail = 1;
        }
        if (all[r].member && (all[r].sent_lagg != 0 || all[r].local_sent == 0)) {
            fprintf(stderr, "member %d: %llu bytes to the servers, %llu to its leader\n", r,
                    (unsigned long long)all[r].sent_lagg, (unsigned long long)all[r].local_sent);
            fail = 1;
        }
        if (!all[r].member && sh->nservers > 0) {
            /* the machine's bytes to the servers: G plain workers' against its leader's */
            uint64_t plain = 0;
            for (int q = 0; q < W; q++)
                if (sh->hosts[q] == sh->hosts[r]) plain += all[q].sent_plain;
            double ratio = (double)plain / (double)all[r].sent_lagg, one = (double)all[r].sent_plain / (double)all[r].sent_lagg;
            printf("machine %c: %d workers, plain %llu bytes to the servers, local-agg %llu (%.3fx)\n", sh->hosts[r], G,
                   (unsigned long long)plain, (unsigned long long)all[r].sent_lagg, ratio);
            if (fabs(ratio - G) > 0.02 * G || fabs(one - 1) > 0.02) {
                fprintf(stderr, "machine %c: plain/local-agg bytes %.3f, expected %d (its leader: %.3f of a plain worker)\n",
                        sh->hosts[r], ratio, G, one);
                fail = 1;
            }
        }
    }
    free(all); free(pa); free(pb); free(ref);
    comm_destroy(&comm);
    return fail;
}

static int s_world(const shape_t *sh) { return (int)strlen(sh->hosts) + sh->nservers; }

Test(ps_local, interleaved_machines_two_servers, .timeout = 120)
{
    shape_t sh = {.hosts = "abab", .nservers = 2, .gdt = DT_F32, .opt = OPT_SGD, .inv_scale = 1.0f, .overflow_step = -1};
    cr_assert_eq(run_ranks(s_world(&sh), s_rank, &sh, 110000), 0);
}

/* --ps-window 1: replies taken while submitting are handed on when the leader waits */
Test(ps_local, window_of_one, .timeout = 120)
{
    shape_t sh = {.hosts = "aabb", .nservers = 2, .gdt = DT_F32, .opt = OPT_SGD, .inv_scale = 1.0f, .overflow_step = -1,
                  .window = 1};
    cr_assert_eq(run_ranks(s_world(&sh), s_rank, &sh, 110000), 0);
}

Test(ps_local, uneven_machines_one_server_adam, .timeout = 120)
{
    shape_t sh = {.hosts = "abbbc", .nservers = 1, .gdt = DT_F32, .opt = OPT_ADAM, .inv_scale = 1.0f, .overflow_step = -1};
    cr_assert_eq(run_ranks(s_world(&sh), s_rank, &sh, 110000), 0);
}

Test(ps_local, colocated_f16_amp_overflow_from_a_member, .timeout = 120)
{
    shape_t sh = {.hosts = "aabbb", .nservers = 0, .gdt = DT_F16, .opt = OPT_ADAM, .inv_scale = 1.0f / 128,
                  .overflow_step = 3};
    cr_assert_eq(run_ranks(s_world(&sh), s_rank, &sh, 110000), 0);
}

Test(ps_local, one_machine_bit_exact_rank_order, .timeout = 120)
{
    shape_t sh = {.hosts = "aaa", .nservers = 1, .gdt = DT_F32, .opt = OPT_SGD, .inv_scale = 1.0f, .overflow_step = -1,
                  .exact = 1};
    cr_assert_eq(run_ranks(s_world(&sh), s_rank, &sh, 110000), 0);
}

Test(ps_local, async_and_ssp_refused)
{
    ps_opts_t o;
    ps_opts_init(&o);
    cr_assert_eq(ps_opt_set(&o, "ps-local-agg", NULL), 0);
    cr_assert_eq(ps_opts_check(&o), 0);
    cr_assert_eq(ps_opt_set(&o, "ps-mode", "async"), 0);
    cr_assert_eq(ps_opts_check(&o), ERR_INVAL);
    cr_assert(strstr(err_detail(), "--ps-local-agg needs --ps-mode sync"), "%s", err_detail());
    cr_assert_eq(ps_opt_set(&o, "ps-mode", "ssp:2"), 0);
    cr_assert_eq(ps_opts_check(&o), ERR_INVAL);
}

/* A member that leaves before its first step: its leader's submit fails naming it, and the other machine's
 * member, whose leader's step cannot complete, times out naming its leader. The server fails the job (a
 * leader leaves while the others wait on it): expected here, so its result is not checked. */
static int s_dead_member_rank(int rank, int world, void *arg)
{
    (void)arg;
    setenv("SYNCBENCH_FAKE_HOST", rank < 2 ? "ma" : rank < 4 ? "mb" : "srv", 1);
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    ps_topo_t t = {.nworkers = 4, .mode = PS_SYNC, .part_bytes = S_PART, .local_agg = 1, .timeout_ms = 3000};
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(&t, world, &po);
    engine_t *e = NULL;
    int fail = 0;
    if (rank >= 4) {
        if (ps_engine.create(&e, comm, &cfg) == 0) (void)ps_engine.serve(e);
        ps_engine.destroy(&e);
        err_clear();
        comm_destroy(&comm);
        return 0;
    }
    size_t n = S_N;
    float *p = malloc(n * sizeof(float)), *g = calloc(n, sizeof(float));
    param_set_t ps = ps_test_sgd_params(p, n);
    int rc = ps_test_worker(&e, comm, &t, world, &ps);
    if (rc < 0) { ps_test_report("create/attach", rc); fail = 1; }
    if (!fail && rank == 1) _exit(0); /* gone without a word: no step, no destroy */
    if (!fail) {
        step_ctx_t ctx = {.step = 1, .inv_scale = 1, .lr = 0.01f};
        bucket_t b = {.grad = g, .offset = 0, .count = n};
        step_out_t out;
        rc = ps_engine.step_begin(e, &ctx);
        if (rc == 0) rc = ps_engine.submit(e, &b);
        if (rc == 0) rc = ps_engine.wait(e, &out, 3000);
        char why[512];
        snprintf(why, sizeof why, "%s", err_detail());
        const char *want = rank == 0 ? "no gradients of partition 0 from worker 1 of its machine"
                           : rank == 3 ? "from its machine's leader (rank 2)" : NULL;
        if (want && (rc >= 0 || !strstr(why, want))) {
            fprintf(stderr, "rank %d: rc %d, \"%s\", expected \"%s\"\n", rank, rc, why, want);
            fail = 1;
        }
    }
    ps_engine.destroy(&e);
    free(p);
    free(g);
    comm_destroy(&comm);
    return fail;
}

Test(ps_local, dead_member_named_by_its_leader, .timeout = 60)
{
    cr_assert_eq(run_ranks(5, s_dead_member_rank, NULL, 50000), 0);
}
