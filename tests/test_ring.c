/* test_ring.c: host ring allreduce correctness (P x counts x dtypes x ops, in- and out-of-place, shm
 * and tcp transports, tiny segments) and the transport's failure paths. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/comm.h"
#include "core/err.h"
#include "core/timer.h"
#include "ring/ring.h"
#include "tests/lib/ranks.h"

typedef struct {
    const char *transport;
    size_t slot_bytes;
    size_t seg_bytes;
    int big;           /* include the 1000003-element count */
} ring_case_t;

static float s_val(int r, size_t i) { return (float)((int)((i * 5 + (size_t)r * 3) % 7) - 3); }

static int s_one(comm_t *comm, size_t count, dtype_t dt, redop_t op, int inplace, size_t seg)
{
    size_t esz = dt_size(dt);
    float *f = malloc((count ? count : 1) * sizeof(float));
    void *in = malloc((count ? count : 1) * esz), *out = malloc((count ? count : 1) * esz);
    for (size_t i = 0; i < count; i++) f[i] = s_val(comm->rank, i);
    dt_convert(in, dt, f, DT_F32, count);
    memset(out, 0x7f, (count ? count : 1) * esz);
    int rc = ring_allreduce_host(comm, in, inplace ? in : out, count, dt, op, seg, 20000);
    if (rc < 0) {
        char b[512];
        fprintf(stderr, "rank %d: ring failed: %s\n", comm->rank, err_trace(rc, b, sizeof b));
        return 1;
    }
    dt_convert(f, DT_F32, inplace ? in : out, dt, count);
    int bad = 0;
    for (size_t i = 0; i < count && bad < 5; i++) {
        float want = 0;
        for (int r = 0; r < comm->world; r++) want += s_val(r, i);
        if (op == OP_AVG) want /= (float)comm->world;
        float tol = op == OP_SUM ? 0 : (dt == DT_F32 ? 1e-6f : dt == DT_F16 ? 1e-3f : 8e-3f);
        if (!(fabsf(f[i] - want) <= tol * fmaxf(1.0f, fabsf(want)))) {
            fprintf(stderr, "rank %d: P=%d count=%zu %s %s %s: [%zu] = %g, want %g\n", comm->rank, comm->world,
                    count, dt_name(dt), op_name(op), inplace ? "in-place" : "out-of-place", i, f[i], want);
            bad++;
        }
    }
    free(f); free(in); free(out);
    return bad;
}

static int s_ring_rank(int rank, int world, void *arg)
{
    (void)rank; (void)world;
    ring_case_t *c = arg;
    boot_cfg_t bc;
    comm_t *comm = NULL;
    char b[512];
    int rc = boot_cfg_init(&bc, "env://", -1, -1, 20000);
    comm_opts_t co = {.transport = c->transport, .shm_slot_bytes = c->slot_bytes};
    if (rc == 0) rc = comm_new(&comm, &bc, &co);
    if (rc < 0) { fprintf(stderr, "setup: %s\n", err_trace(rc, b, sizeof b)); return 1; }
    int P = comm->world, bad = 0;
    size_t counts[] = {0, 1, (size_t)(P > 1 ? P - 1 : 0), 4099, 1000003};
    int ncounts = c->big ? 5 : 4;
    for (int ci = 0; ci < ncounts; ci++)
        for (int dt = 0; dt < DT_COUNT; dt++)
            for (int op = 0; op < 2; op++) {
                if (counts[ci] == 1000003 && op == OP_AVG && dt != DT_F32) continue; /* keep it short */
                bad += s_one(comm, counts[ci], (dtype_t)dt, (redop_t)op, (ci + dt + op) % 2, c->seg_bytes);
            }
    comm_destroy(&comm);
    return bad ? 1 : 0;
}

#define RING_TEST(P)                                                              \
    Test(ring, correctness_p##P, .timeout = 120) {                                \
        ring_case_t c = {"auto", 0, 0, 1};                                        \
        cr_assert_eq(run_ranks(P, s_ring_rank, &c, 110000), 0, "ring P=%d", P);  \
    }
RING_TEST(1)
RING_TEST(2)
RING_TEST(3)
RING_TEST(4)
RING_TEST(7)
RING_TEST(8)

Test(ring, tcp_transport, .timeout = 120)
{
    ring_case_t c = {"tcp", 64 << 10, 0, 1};
    cr_assert_eq(run_ranks(3, s_ring_rank, &c, 110000), 0);
}

Test(ring, zmq_transport, .timeout = 120)
{
    ring_case_t c = {"zmq", 64 << 10, 0, 0};
    cr_assert_eq(run_ranks(3, s_ring_rank, &c, 110000), 0);
}

Test(ring, tcp_transport_oversubscribed, .timeout = 120)
{
    ring_case_t c = {"tcp", 16 << 10, 0, 0};
    cr_assert_eq(run_ranks(5, s_ring_rank, &c, 110000), 0);
}

Test(ring, tiny_segments_many_in_flight, .timeout = 120)
{
    /* 4 KiB slots and 1 KiB segments: thousands of segments through every channel */
    ring_case_t c = {"shm", 4096, 1024, 0};
    cr_assert_eq(run_ranks(4, s_ring_rank, &c, 110000), 0);
}

/* A rank that dies mid-collective: the others must fail with an error, not hang. */
static int s_dead_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    boot_cfg_t bc;
    comm_t *comm = NULL;
    if (boot_cfg_init(&bc, "env://", -1, -1, 20000) < 0 || comm_new(&comm, &bc, NULL) < 0) return 1;
    size_t n = 1 << 20;
    float *buf = calloc(n, sizeof(float));
    if (rank == 2) _exit(0); /* vanish without a word */
    uint64_t t0 = now_ns();
    int rc = ring_allreduce_host(comm, buf, buf, n, DT_F32, OP_SUM, 0, 5000);
    double s = (double)(now_ns() - t0) / 1e9;
    free(buf);
    /* expected: an error (peer died or timed out), well within the timeout */
    if (rc == ERR_PEER || rc == ERR_TIMEOUT) return s < 8 ? 0 : 1;
    fprintf(stderr, "rank %d: expected a failure, got %d\n", rank, rc);
    return 1;
}

Test(ring, dead_rank_fails_fast, .timeout = 60)
{
    cr_assert_eq(run_ranks(4, s_dead_rank, NULL, 50000), 0);
}
