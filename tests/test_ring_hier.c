/* test_ring_hier.c: the ring engine's hierarchical allreduce (ring/ring_hier.c, --ring-hier) on ranks that
 * pretend to live on several machines (SYNCBENCH_FAKE_HOST per rank): the right sums and averages for several
 * world sizes and machine shapes (even, uneven, interleaved ranks, a machine of one), uneven counts, every
 * dtype, in and out of place, tiny segments; the same bits on every rank; the flat ring's result up to
 * reassociation; the flat ring where there is one machine or one rank a machine; the engine's submit/wait
 * path (what the trainer uses) and the algorithm and impl it reports; a dead rank giving an error, not a hang. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/comm.h"
#include "core/err.h"
#include "core/hash.h"
#include "core/timer.h"
#include "ring/ring.h"
#include "tests/lib/ranks.h"

#define TO 20000

typedef struct {
    const char *hosts;     /* one letter a rank: the machine it pretends to live on ("aabb") */
    size_t slot_bytes;     /* transport slot (0: default) */
    size_t seg_bytes;      /* pipelining segment (0: default) */
    int big;               /* also the 1000003-element count */
} hier_case_t;

static float s_val(int r, size_t i) { return (float)((int)((i * 5 + (size_t)r * 3) % 7) - 3); }

/* A value with a fraction, so that the order of the sum shows in the last bits. */
static float s_frac(int r, size_t i) { return (float)((i * 2654435761u + (size_t)r * 40503u) % 100003u) / 7919.0f - 6.0f; }

static int s_setup(comm_t **comm, const hier_case_t *c, int rank)
{
    char host[2] = {c->hosts[rank], 0};
    setenv("SYNCBENCH_FAKE_HOST", host, 1);
    boot_cfg_t bc;
    char b[512];
    comm_opts_t co = {.transport = "auto", .shm_slot_bytes = c->slot_bytes};
    int rc = boot_cfg_init(&bc, "env://", -1, -1, TO);
    if (rc == 0) rc = comm_new(comm, &bc, &co);
    if (rc < 0) fprintf(stderr, "rank %d: setup: %s\n", rank, err_trace(rc, b, sizeof b));
    return rc;
}

/* Every rank holds the same len bytes: 0, or 1 after saying which rank differs. */
static int s_same_everywhere(comm_t *comm, const void *buf, size_t len, const char *what)
{
    uint64_t h = hash_fnv1a64(buf, len, HASH_FNV1A64_INIT), *all = calloc((size_t)comm->world, sizeof *all);
    int bad = !all || comm_allgather(comm, &h, sizeof h, all, TO) < 0;
    for (int r = 1; r < comm->world && !bad; r++)
        if (all[r] != all[0]) {
            fprintf(stderr, "%s: rank %d's result differs from rank 0's (%zu bytes)\n", what, r, len);
            bad = 1;
        }
    free(all);
    return bad;
}

static int s_fail(comm_t *comm, const char *what, int rc)
{
    char b[512];
    fprintf(stderr, "rank %d: %s failed: %s\n", comm->rank, what, err_trace(rc, b, sizeof b));
    return 1;
}

/* One hierarchical allreduce of small integers: exact sums (averages within rounding), the same bits on
 * every rank, and the flat ring's bits (integer sums do not depend on the order). */
static int s_one(comm_t *comm, size_t count, dtype_t dt, redop_t op, int inplace, size_t seg)
{
    size_t esz = dt_size(dt), cap = count ? count : 1;
    float *f = malloc(cap * sizeof(float));
    void *in = malloc(cap * esz), *out = malloc(cap * esz), *flat = malloc(cap * esz), *in2 = malloc(cap * esz);
    for (size_t i = 0; i < count; i++) f[i] = s_val(comm->rank, i);
    dt_convert(in, dt, f, DT_F32, count);
    memcpy(in2, in, count * esz);
    memset(out, 0x7f, cap * esz);
    void *res = inplace ? in : out;
    int bad = 0, rc = ring_hier_allreduce(comm, in, res, count, dt, op, seg, TO);
    if (rc < 0) bad = s_fail(comm, "hier allreduce", rc);
    if (!bad && (rc = ring_allreduce_host(comm, in2, flat, count, dt, op, seg, TO)) < 0) bad = s_fail(comm, "flat ring", rc);
    if (!bad) {
        dt_convert(f, DT_F32, res, dt, count);
        for (size_t i = 0; i < count && bad < 5; i++) {
            float want = 0;
            for (int r = 0; r < comm->world; r++) want += s_val(r, i);
            if (op == OP_AVG) want /= (float)comm->world;
            float tol = op == OP_SUM ? 0 : (dt == DT_F32 ? 1e-6f : dt == DT_F16 ? 1e-3f : 8e-3f);
            if (!(fabsf(f[i] - want) <= tol * fmaxf(1.0f, fabsf(want)))) {
                fprintf(stderr, "rank %d: P=%d count=%zu %s %s %s: [%zu] = %g, want %g\n", comm->rank, comm->world, count,
                        dt_name(dt), op_name(op), inplace ? "in-place" : "out-of-place", i, f[i], want);
                bad++;
            }
        }
        if (memcmp(res, flat, count * esz)) {
            fprintf(stderr, "rank %d: P=%d count=%zu %s %s: hier differs from the flat ring on integers\n", comm->rank,
                    comm->world, count, dt_name(dt), op_name(op));
            bad++;
        }
    }
    /* every rank takes part in the check, even one that failed above (a fixed number of store rounds) */
    bad += s_same_everywhere(comm, res, count * esz, "hier");
    free(f); free(in); free(out); free(flat); free(in2);
    return bad;
}

/* Fractions: the same bits on every rank, and the flat ring's sum within reassociation. */
static int s_frac_one(comm_t *comm, size_t count, redop_t op, size_t seg)
{
    float *in = malloc(count * sizeof(float)), *out = malloc(count * sizeof(float)), *flat = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) in[i] = s_frac(comm->rank, i);
    int bad = 0, rc = ring_hier_allreduce(comm, in, out, count, DT_F32, op, seg, TO);
    if (rc < 0) bad = s_fail(comm, "hier allreduce", rc);
    if (!bad && (rc = ring_allreduce_host(comm, in, flat, count, DT_F32, op, seg, TO)) < 0) bad = s_fail(comm, "flat ring", rc);
    for (size_t i = 0; i < count && !bad; i++) {
        float mag = 0;
        for (int r = 0; r < comm->world; r++) mag += fabsf(s_frac(r, i));
        if (op == OP_AVG) mag /= (float)comm->world;
        if (!(fabsf(out[i] - flat[i]) <= 4e-7f * (float)comm->world * fmaxf(1.0f, mag))) {
            fprintf(stderr, "rank %d: fractions [%zu]: hier %.9g, flat %.9g\n", comm->rank, i, out[i], flat[i]);
            bad = 1;
        }
    }
    bad += s_same_everywhere(comm, out, count * sizeof(float), "hier fractions");
    free(in); free(out); free(flat);
    return bad;
}

static int s_machines(const char *hosts, int P)
{
    int n = 0;
    for (int r = 0; r < P; r++)
        if (!memchr(hosts, hosts[r], (size_t)r)) n++;
    return n;
}

static int s_hier_rank(int rank, int world, void *arg)
{
    hier_case_t *c = arg;
    comm_t *comm = NULL;
    if (s_setup(&comm, c, rank) < 0) return 1;
    int M = s_machines(c->hosts, world), bad = 0;
    if (comm->nnodes != M || ring_hier_applies(comm) != (M > 1 && M < world)) {
        fprintf(stderr, "rank %d: %d nodes (want %d), hierarchical %d\n", rank, comm->nnodes, M, ring_hier_applies(comm));
        bad = 1;
    }
    size_t counts[] = {0, 1, (size_t)(world - 1), 4099, 1000003};
    int ncounts = c->big ? 5 : 4;
    for (int ci = 0; ci < ncounts; ci++)
        for (int dt = 0; dt < DT_COUNT; dt++)
            for (int op = 0; op < 2; op++) {
                if (counts[ci] == 1000003 && dt != DT_F32) continue; /* keep it short */
                bad += s_one(comm, counts[ci], (dtype_t)dt, (redop_t)op, (ci + dt + op) % 2, c->seg_bytes);
            }
    bad += s_frac_one(comm, 7777, OP_SUM, c->seg_bytes);
    bad += s_frac_one(comm, 7777, OP_AVG, c->seg_bytes);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

#define HIER_TEST(name, H, BIG)                                                                    \
    Test(ring_hier, name, .timeout = 150) {                                                        \
        hier_case_t c = {H, 0, 0, BIG};                                                            \
        cr_assert_eq(run_ranks((int)strlen(H), s_hier_rank, &c, 140000), 0, "machines %s", H);    \
    }
HIER_TEST(two_machines_of_two, "aabb", 1)
HIER_TEST(two_machines_of_three, "aaabbb", 0)
HIER_TEST(uneven_machines, "aaabb", 1)
HIER_TEST(interleaved_ranks, "abaab", 0)
HIER_TEST(a_machine_of_one, "aabcc", 0)
HIER_TEST(four_machines_of_two, "aabbccdd", 0)
HIER_TEST(one_machine_is_the_flat_ring, "aaa", 0)
HIER_TEST(one_rank_a_machine_is_the_flat_ring, "abc", 0)

Test(ring_hier, tiny_segments_many_in_flight, .timeout = 150)
{
    /* 4 KiB slots and 1 KiB segments: hundreds of segments through every chain and the leaders' ring */
    hier_case_t c = {"aaabbc", 4096, 1024, 0};
    cr_assert_eq(run_ranks(6, s_hier_rank, &c, 140000), 0);
}

/* The engine with --ring-hier: the trainer's path (attach broadcasts rank 0's parameters, buckets
 * submitted last layer first, wait applies SGD on the averaged gradient), the same parameters on every
 * rank, and the algorithm it says it ran. */
#define ENG_N 50021

static int s_engine_rank(int rank, int world, void *arg)
{
    hier_case_t *c = arg;
    comm_t *comm = NULL;
    if (s_setup(&comm, c, rank) < 0) return 1;
    ring_opts_t o;
    ring_opts_init(&o);
    if (ring_opt_set(&o, "ring-hier", NULL) < 0 || !o.hier) return s_fail(comm, "--ring-hier", ERR_INVAL);
    engine_cfg_t cfg = {.device = -1, .timeout_ms = TO, .seg_bytes = c->seg_bytes, .nworkers = world, .opts = &o};
    engine_t *e = NULL;
    int rc = ring_engine.create(&e, comm, &cfg), bad = 0;
    if (rc < 0) return s_fail(comm, "create", rc);
    float *p = malloc(ENG_N * sizeof(float)), *g = malloc(ENG_N * sizeof(float)), *want = malloc(ENG_N * sizeof(float));
    for (size_t i = 0; i < ENG_N; i++) p[i] = rank == 0 ? (float)(i % 11) : 100.0f + (float)rank; /* rank 0's win */
    param_set_t ps = {.params = p, .count = ENG_N, .grad_dtype = DT_F32};
    optim_cfg_default(&ps.optim, OPT_SGD);
    ps.optim.momentum = 0;
    ps.optim.weight_decay = 0;
    ps.optim.lr = 1.0f;
    if ((rc = ring_engine.attach(e, &ps)) < 0) bad = s_fail(comm, "attach", rc);
    for (size_t i = 0; i < ENG_N && !bad; i++)
        if (p[i] != (float)(i % 11)) {
            fprintf(stderr, "rank %d: after attach [%zu] = %g, want rank 0's %g\n", rank, i, p[i], (float)(i % 11));
            bad = 1;
        }
    for (size_t i = 0; i < ENG_N; i++) {
        float sum = 0;
        for (int r = 0; r < world; r++) sum += s_val(r, i);
        want[i] = (float)(i % 11);
        g[i] = s_val(rank, i);
        want[i] -= sum / (float)world;
    }
    const size_t per = ENG_N / 3 + 1;
    for (int step = 1; step <= 2 && !bad; step++) {
        step_ctx_t sc = {.step = (uint64_t)step, .inv_scale = 1.0f, .lr = 1.0f};
        rc = ring_engine.step_begin(e, &sc);
        for (int k = 2, idx = 0; k >= 0 && rc == 0; k--, idx++) {
            size_t off = (size_t)k * per, n = off + per > ENG_N ? ENG_N - off : per;
            bucket_t b = {.grad = g + off, .offset = off, .count = n, .index = idx};
            rc = ring_engine.submit(e, &b);
        }
        step_out_t so;
        if (rc == 0) rc = ring_engine.wait(e, &so, TO);
        if (rc < 0) bad = s_fail(comm, "step", rc);
        for (size_t i = 0; i < ENG_N && !bad; i++) {
            float w = step == 1 ? want[i] : want[i] - ((float)(i % 11) - want[i]);
            if (!(fabsf(p[i] - w) <= 1e-5f * fmaxf(1.0f, fabsf(w)))) {
                fprintf(stderr, "rank %d step %d: param [%zu] = %g, want %g\n", rank, step, i, p[i], w);
                bad = 1;
            }
        }
    }
    bad += s_same_everywhere(comm, p, ENG_N * sizeof(float), "engine parameters");
    engine_stats_t st;
    ring_engine.stats(e, &st);
    const char *algo = ring_hier_applies(comm) ? "hier" : "ring", *impl = ring_hier_applies(comm) ? "ring-hier" : "host";
    if (!st.algo || strcmp(st.algo, algo) || !st.impl || strcmp(st.impl, impl)) {
        fprintf(stderr, "rank %d: the engine says it ran %s (impl %s), want %s (%s)\n", rank, st.algo ? st.algo : "(none)",
                st.impl ? st.impl : "(none)", algo, impl);
        bad = 1;
    }
    ring_engine.destroy(&e);
    free(p); free(g); free(want);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

Test(ring_hier, engine_trains_through_it, .timeout = 120)
{
    hier_case_t c = {"aaabb", 0, 16 << 10, 0};
    cr_assert_eq(run_ranks(5, s_engine_rank, &c, 110000), 0);
}

Test(ring_hier, engine_one_machine_runs_the_ring, .timeout = 120)
{
    hier_case_t c = {"aaa", 0, 0, 0};
    cr_assert_eq(run_ranks(3, s_engine_rank, &c, 110000), 0);
}

Test(ring_hier, refused_on_gpu_buffers)
{
    comm_t fake = {.rank = 0, .world = 2, .timeout_ms = 1000};
    ring_opts_t o;
    ring_opts_init(&o);
    cr_assert_eq(ring_opt_set(&o, "ring-hier", NULL), 0);
    engine_cfg_t cfg = {.device = 0, .impl = "nccl", .opts = &o};
    engine_t *e = NULL;
    cr_expect_eq(ring_engine.create(&e, &fake, &cfg), ERR_INVAL);
    cr_expect(strstr(err_detail(), "--ring-hier"), "%s", err_detail());
    cr_expect_null(e);
}

/* A rank that dies mid-collective (a non-leader, so its leader waits on its machine's chain): every other
 * rank fails with an error well within the timeout. */
static int s_dead_rank(int rank, int world, void *arg)
{
    (void)world;
    hier_case_t *c = arg;
    comm_t *comm = NULL;
    if (s_setup(&comm, c, rank) < 0) return 1;
    size_t n = 1 << 20;
    float *buf = calloc(n, sizeof(float));
    if (rank == 3) _exit(0); /* vanish without a word */
    uint64_t t0 = now_ns();
    int rc = ring_hier_allreduce(comm, buf, buf, n, DT_F32, OP_SUM, 0, 5000);
    double s = (double)(now_ns() - t0) / 1e9;
    free(buf);
    if (rc == ERR_PEER || rc == ERR_TIMEOUT) return s < 8 ? 0 : 1;
    fprintf(stderr, "rank %d: expected a failure, got %d\n", rank, rc);
    return 1;
}

Test(ring_hier, dead_rank_fails_fast, .timeout = 60)
{
    hier_case_t c = {"aabb", 0, 0, 0};
    cr_assert_eq(run_ranks(4, s_dead_rank, &c, 50000), 0);
}
