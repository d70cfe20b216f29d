/* test_ring_small.c: the ring engine's small-message path (ring/ring_small.c over core/board.c): the
 * one-shot allreduce's results at P = 2, 3, 4, 8 (odd counts, several pieces, every dtype, sum and avg,
 * identical on every rank), the algorithm the engine says it ran (auto, forced ring, forced oneshot),
 * bit-equality with the ring at P = 2, the fallback to the ring over tcp, option parsing, and a dead
 * rank giving an error instead of a hang. */
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
    const char *transport;
    int algo;                 /* RING_ALGO_* */
    int oneshot_kb;           /* 0: default */
} small_case_t;

static float s_val(int r, size_t i) { return (float)((int)((i * 5 + (size_t)r * 3) % 7) - 3); }

static int s_setup(comm_t **comm, const char *transport)
{
    boot_cfg_t bc;
    char b[512];
    comm_opts_t co = {.transport = transport};
    int rc = boot_cfg_init(&bc, "env://", -1, -1, TO);
    if (rc == 0) rc = comm_new(comm, &bc, &co);
    if (rc < 0) fprintf(stderr, "setup: %s\n", err_trace(rc, b, sizeof b));
    return rc;
}

static int s_engine(engine_t **e, comm_t *comm, int algo, int kb)
{
    ring_opts_t o;
    ring_opts_init(&o);
    o.algo = algo;
    if (kb) o.oneshot_max = (size_t)kb << 10, o.oneshot_set = 1;
    engine_cfg_t cfg = {.device = -1, .timeout_ms = TO, .opts = &o};
    return ring_engine.create(e, comm, &cfg);
}

/* Every rank holds the same len bytes: 0, or 1 after printing which rank differs. */
static int s_same_everywhere(comm_t *comm, const void *buf, size_t len)
{
    uint64_t h = hash_fnv1a64(buf, len, HASH_FNV1A64_INIT), *all = calloc((size_t)comm->world, sizeof *all);
    int bad = comm_allgather(comm, &h, sizeof h, all, TO) < 0;
    for (int r = 1; r < comm->world && !bad; r++)
        if (all[r] != all[0]) {
            fprintf(stderr, "rank %d's result differs from rank 0's (%zu bytes)\n", r, len);
            bad = 1;
        }
    free(all);
    return bad;
}

/* One allreduce through the engine: the right values, the same bytes everywhere, the algorithm said. */
static int s_one(comm_t *comm, engine_t *e, size_t count, dtype_t dt, redop_t op, int inplace, const char *want_algo)
{
    size_t esz = dt_size(dt);
    float *f = malloc(count * sizeof(float));
    void *in = malloc(count * esz), *out = malloc(count * esz);
    for (size_t i = 0; i < count; i++) f[i] = s_val(comm->rank, i);
    dt_convert(in, dt, f, DT_F32, count);
    memset(out, 0x7f, count * esz);
    void *res = inplace ? in : out;
    int rc = ring_engine.allreduce(e, in, res, count, dt, op, TO), bad = 0;
    if (rc < 0) {
        char b[512];
        fprintf(stderr, "rank %d: allreduce failed: %s\n", comm->rank, err_trace(rc, b, sizeof b));
        bad = 1;
    }
    engine_stats_t st;
    ring_engine.stats(e, &st);
    if (!bad && (!st.algo || strcmp(st.algo, want_algo))) {
        fprintf(stderr, "P=%d count=%zu: algo %s, want %s\n", comm->world, count, st.algo ? st.algo : "(none)", want_algo);
        bad = 1;
    }
    if (!bad) dt_convert(f, DT_F32, res, dt, count);
    for (size_t i = 0; i < count && !bad; i++) {
        float want = 0;
        for (int r = 0; r < comm->world; r++) want += s_val(r, i);
        if (op == OP_AVG) want /= (float)comm->world;
        float tol = op == OP_SUM ? 0 : (dt == DT_F32 ? 1e-6f : dt == DT_F16 ? 1e-3f : 8e-3f);
        if (!(fabsf(f[i] - want) <= tol * fmaxf(1.0f, fabsf(want)))) {
            fprintf(stderr, "rank %d: P=%d count=%zu %s %s: [%zu] = %g, want %g\n", comm->rank, comm->world, count,
                    dt_name(dt), op_name(op), i, f[i], want);
            bad = 1;
        }
    }
    if (s_same_everywhere(comm, res, count * esz)) bad = 1;
    free(f); free(in); free(out);
    return bad;
}

static int s_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world;
    small_case_t *c = arg;
    comm_t *comm = NULL;
    engine_t *e = NULL;
    if (s_setup(&comm, c->transport) < 0) return 1;
    char b[512];
    int rc = s_engine(&e, comm, c->algo, c->oneshot_kb);
    if (rc < 0) { fprintf(stderr, "create: %s\n", err_trace(rc, b, sizeof b)); return 1; }
    size_t max = c->oneshot_kb ? (size_t)c->oneshot_kb << 10 : (size_t)(comm->world >= 8 ? 32 : 16) << 10;
    int shm = strcmp(c->transport, "tcp") != 0;
    size_t counts[] = {1, 3, 1000, 4099, 16411, 100003};
    int bad = 0;
    for (int ci = 0; ci < 6; ci++)
        for (int dt = 0; dt < DT_COUNT; dt++)
            for (int op = 0; op < 2; op++) {
                size_t bytes = counts[ci] * dt_size((dtype_t)dt);
                const char *want = c->algo == RING_ALGO_RING || !shm ? "ring"
                                   : c->algo == RING_ALGO_ONESHOT || bytes <= max ? "oneshot" : "ring";
                bad += s_one(comm, e, counts[ci], (dtype_t)dt, (redop_t)op, (ci + dt + op) % 2, want);
            }
    /* the one-shot's bytes show in the traffic matrix: every peer read ours, not only the ring's neighbours */
    for (int r = 0; r < comm->world && shm && c->algo != RING_ALGO_RING; r++) {
        uint64_t sent = 0, recv = 0;
        tp_peer_counters(comm->tp, r, &sent, &recv);
        if (r != comm->rank && (!sent || !recv)) {
            fprintf(stderr, "rank %d: no one-shot traffic noted towards rank %d\n", comm->rank, r);
            bad++;
        }
    }
    ring_engine.destroy(&e);
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

#define SMALL_TEST(name, P, tr, algo, kb)                                            \
    Test(ring_small, name, .timeout = 120) {                                         \
        small_case_t c = {tr, algo, kb};                                             \
        cr_assert_eq(run_ranks(P, s_rank, &c, 110000), 0, #name " at P=%d", P);      \
    }
SMALL_TEST(auto_p2, 2, "auto", RING_ALGO_AUTO, 0)
SMALL_TEST(auto_p3, 3, "auto", RING_ALGO_AUTO, 0)
SMALL_TEST(auto_p4, 4, "auto", RING_ALGO_AUTO, 0)
SMALL_TEST(auto_p8, 8, "auto", RING_ALGO_AUTO, 0)
/* forced one-shot through 4 KiB buffers: larger messages take many rounds (and buffer reuse) */
SMALL_TEST(oneshot_pieces_p3, 3, "auto", RING_ALGO_ONESHOT, 4)
SMALL_TEST(oneshot_pieces_p8, 8, "auto", RING_ALGO_ONESHOT, 4)
SMALL_TEST(forced_ring_p4, 4, "auto", RING_ALGO_RING, 0)
/* across hosts (tcp here) auto keeps the ring */
SMALL_TEST(auto_over_tcp_is_ring, 3, "tcp", RING_ALGO_AUTO, 0)

/* At P = 2 the one-shot is the ring's sum bit for bit (a + b; (a + b) / 2 for avg), in every dtype,
 * with values whose sums round. */
static int s_vs_ring(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    engine_t *one = NULL, *ring = NULL;
    if (s_setup(&comm, "auto") < 0) return 1;
    if (s_engine(&one, comm, RING_ALGO_ONESHOT, 0) < 0 || s_engine(&ring, comm, RING_ALGO_RING, 0) < 0) return 1;
    size_t n = 5003;
    int bad = 0;
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = sinf((float)(i * 7 + (size_t)rank * 131)) * 1000.0f / (float)(i + 1);
    for (int dt = 0; dt < DT_COUNT && !bad; dt++)
        for (int op = 0; op < 2 && !bad; op++) {
            size_t esz = dt_size((dtype_t)dt);
            char *in = malloc(n * esz), *a = malloc(n * esz), *b = malloc(n * esz);
            dt_convert(in, (dtype_t)dt, f, DT_F32, n);
            if (ring_engine.allreduce(one, in, a, n, (dtype_t)dt, (redop_t)op, TO) < 0 ||
                ring_engine.allreduce(ring, in, b, n, (dtype_t)dt, (redop_t)op, TO) < 0 || memcmp(a, b, n * esz)) {
                fprintf(stderr, "rank %d: one-shot and ring differ (%s %s)\n", rank, dt_name((dtype_t)dt),
                        op_name((redop_t)op));
                bad = 1;
            }
            free(in); free(a); free(b);
        }
    free(f);
    ring_engine.destroy(&one);
    ring_engine.destroy(&ring);
    comm_destroy(&comm);
    return bad;
}

Test(ring_small, p2_equals_ring_bitwise, .timeout = 60)
{
    cr_assert_eq(run_ranks(2, s_vs_ring, NULL, 50000), 0);
}

/* Forcing the one-shot where there is no shared memory is a clear error at create, on every rank. */
static int s_forced_tcp(int rank, int world, void *arg)
{
    (void)rank; (void)world; (void)arg;
    comm_t *comm = NULL;
    engine_t *e = NULL;
    if (s_setup(&comm, "tcp") < 0) return 1;
    int rc = s_engine(&e, comm, RING_ALGO_ONESHOT, 0);
    int ok = rc == ERR_INVAL && strstr(err_detail(), "--ring-algo oneshot") != NULL;
    if (!ok) fprintf(stderr, "forced oneshot over tcp: rc %d (%s)\n", rc, err_detail());
    if (e) ring_engine.destroy(&e);
    comm_destroy(&comm);
    return ok ? 0 : 1;
}

Test(ring_small, forced_oneshot_over_tcp_is_an_error, .timeout = 60)
{
    cr_assert_eq(run_ranks(2, s_forced_tcp, NULL, 50000), 0);
}

Test(ring_small, options)
{
    ring_opts_t o;
    ring_opts_init(&o);
    cr_expect_eq(o.algo, RING_ALGO_AUTO);
    cr_expect_eq(o.oneshot_max, (size_t)RING_ONESHOT_KB_DEFAULT << 10);
    cr_expect_eq(ring_opt_set(&o, "ring-algo", "oneshot"), 0);
    cr_expect_eq(o.algo, RING_ALGO_ONESHOT);
    cr_expect_eq(ring_opt_set(&o, "ring-algo", "ring"), 0);
    cr_expect_eq(o.algo, RING_ALGO_RING);
    cr_expect_eq(ring_opt_set(&o, "ring-algo", "tree"), ERR_INVAL);
    cr_expect_eq(ring_opt_set(&o, "ring-algo", NULL), ERR_INVAL);
    /* auto's hand-over without the option: 16 KiB up to 4 ranks, 32 KiB from 8 */
    cr_expect_eq(ring_oneshot_auto_max(&o, 2), (size_t)16 << 10);
    cr_expect_eq(ring_oneshot_auto_max(&o, 4), (size_t)16 << 10);
    cr_expect_eq(ring_oneshot_auto_max(&o, 8), (size_t)32 << 10);
    cr_expect_eq(ring_opt_set(&o, "ring-oneshot-kb", "256"), 0);
    cr_expect_eq(o.oneshot_max, (size_t)256 << 10);
    cr_expect_eq(ring_oneshot_auto_max(&o, 2), (size_t)256 << 10, "the option moves it");
    cr_expect_eq(ring_opt_set(&o, "ring-oneshot-kb", "8"), 0);
    cr_expect_eq(ring_oneshot_auto_max(&o, 8), (size_t)8 << 10);
    cr_expect_eq(ring_opt_set(&o, "ring-oneshot-kb", "0"), ERR_INVAL);
    cr_expect_eq(ring_opt_set(&o, "ring-oneshot-kb", "12x"), ERR_INVAL);
    cr_expect_eq(ring_opt_set(&o, "ring-oneshot-kb", "65537"), ERR_INVAL);
    cr_expect_eq(ring_opt_set(&o, "ring-nope", "1"), ERR_INVAL);
    cr_expect_eq(o.algo, RING_ALGO_RING, "a failed option leaves the others alone");
}

/* A rank that dies after the board is set up: the others fail (dead peer or timeout), quickly. */
static int s_dead(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    engine_t *e = NULL;
    if (s_setup(&comm, "auto") < 0 || s_engine(&e, comm, RING_ALGO_AUTO, 0) < 0) return 1;
    float buf[1024] = {0};
    if (rank == 2) _exit(0); /* vanish without a word */
    uint64_t t0 = now_ns();
    int rc = ring_engine.allreduce(e, buf, buf, 1024, DT_F32, OP_SUM, 5000);
    double s = (double)(now_ns() - t0) / 1e9;
    if (rc == ERR_PEER || rc == ERR_TIMEOUT) return s < 8 ? 0 : 1;
    fprintf(stderr, "rank %d: expected a failure, got %d\n", rank, rc);
    return 1;
}

Test(ring_small, dead_rank_fails_fast, .timeout = 60)
{
    cr_assert_eq(run_ranks(4, s_dead, NULL, 50000), 0);
}
