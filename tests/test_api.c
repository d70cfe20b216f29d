/* test_api.c: the public C API (include/syncbench.h) through libsyncbench.so alone: version, spec and
 * argument errors, and on forked ranks every engine's allreduce (sum/avg on f32/f16/bf16, exact small
 * integers), async requests, bit-exact broadcast, barrier, the "check" mismatch, a timeout and a dead
 * peer named. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "include/syncbench.h"
#include "tests/lib/ranks.h"

#define N_ELEMS 300007          /* odd, several PS partitions at 4 KiB... and ring segments */
#define TMO 20000

/* fp32 -> bf16 / f16 of small integers (exact in both) */
static uint16_t s_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static float s_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t s_f16(float f) /* small non-negative integers < 2048 only */
{
    if (f == 0) return 0;
    int e;
    float m = frexpf(f, &e); /* f = m 2^e, m in [0.5, 1) */
    uint32_t mant = (uint32_t)((m * 2 - 1) * 1024);
    return (uint16_t)(((uint32_t)(e - 1 + 15) << 10) | mant);
}
static float s_from_f16(uint16_t h)
{
    int e = (h >> 10) & 31;
    uint32_t mant = h & 1023;
    if (!e) return ldexpf((float)mant, -24);
    return ldexpf(1.0f + (float)mant / 1024.0f, e - 15);
}

typedef struct {
    const char *spec;
    int servers;               /* extra ranks the spec needs */
} spec_arg_t;

static int s_join_t(sb_comm_t **c, sb_engine_t **e, const char *spec, int tmo)
{
    setenv("SYNCBENCH_JOB_SECRET", "5b1e0c7a9d3f2468ace13579bdf02468a1b2c3d4e5f60718293a4b5c6d7e8f90", 1);
    sb_comm_cfg_t cfg = {.rank = -1, .world = -1, .timeout_ms = tmo};
    int rc = sb_comm_new(c, &cfg);
    if (rc < 0) { fprintf(stderr, "comm: %s\n", sb_last_error()); return rc; }
    rc = sb_engine_new(e, *c, spec, tmo);
    if (rc < 0) fprintf(stderr, "engine %s: %s\n", spec, sb_last_error());
    return rc;
}
static int s_join(sb_comm_t **c, sb_engine_t **e, const char *spec) { return s_join_t(c, e, spec, TMO); }

#define FAILIF(cond, ...) do { if (cond) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } } while (0)

/* Every worker: sums of rank + 1 + i % 7 in f32, f16 and bf16; an avg; three async allreduces queued
 * behind one another and a broadcast; a barrier. */
static int s_collectives_rank(int rank, int world, void *arg)
{
    (void)world;
    const spec_arg_t *a = arg;
    sb_comm_t *c = NULL;
    sb_engine_t *e = NULL;
    if (s_join(&c, &e, a->spec) < 0) return 1;
    int rc = 0;
    if (sb_engine_is_server(e)) {
        rc = sb_engine_serve(e);
        if (rc < 0) fprintf(stderr, "serve: %s\n", sb_last_error());
        sb_engine_free(&e);
        sb_comm_free(&c);
        return rc < 0;
    }
    int P = sb_engine_size(e);
    FAILIF(P != world - a->servers, "%s: %d workers in a world of %d", a->spec, P, world);
    FAILIF(sb_engine_rank(e) != rank, "worker rank %d != %d", sb_engine_rank(e), rank);
    float *x = malloc(N_ELEMS * sizeof *x);
    uint16_t *h = malloc(N_ELEMS * sizeof *h), *b = malloc(N_ELEMS * sizeof *b);
    long base = (long)P * (P + 1) / 2;
    for (size_t i = 0; i < N_ELEMS; i++) {
        x[i] = (float)(rank + 1 + i % 7);
        h[i] = s_f16((float)(rank + 1 + i % 7));
        b[i] = s_bf16((float)(rank + 1 + i % 7));
    }
    FAILIF(sb_allreduce(e, x, N_ELEMS, SB_F32, SB_SUM, TMO) < 0, "f32: %s", sb_last_error());
    FAILIF(sb_allreduce(e, h, N_ELEMS, SB_F16, SB_SUM, TMO) < 0, "f16: %s", sb_last_error());
    FAILIF(sb_allreduce(e, b, N_ELEMS, SB_BF16, SB_SUM, TMO) < 0, "bf16: %s", sb_last_error());
    for (size_t i = 0; i < N_ELEMS; i++) {
        float want = (float)(base + (long)P * (long)(i % 7));
        FAILIF(x[i] != want, "%s f32 [%zu] = %g, want %g", a->spec, i, (double)x[i], (double)want);
        FAILIF(s_from_f16(h[i]) != want, "%s f16 [%zu] = %g, want %g", a->spec, i, (double)s_from_f16(h[i]), (double)want);
        FAILIF(s_from_bf16(b[i]) != want, "%s bf16 [%zu] = %g, want %g", a->spec, i, (double)s_from_bf16(b[i]),
               (double)want);
    }
    /* avg of 2 (rank + 1) P^-1... : every rank holds P * (rank + 1) * 2: the mean is P (P + 1) */
    for (size_t i = 0; i < 1000; i++) x[i] = (float)(2 * P * (rank + 1));
    FAILIF(sb_allreduce(e, x, 1000, SB_F32, SB_AVG, TMO) < 0, "avg: %s", sb_last_error());
    for (size_t i = 0; i < 1000; i++)
        FAILIF(fabsf(x[i] - (float)(P * (P + 1))) > 1e-5f * (float)(P * (P + 1)), "avg [%zu] = %g, want %d", i,
               (double)x[i], P * (P + 1));
    /* async: three allreduces in flight, a blocking broadcast behind them, then the waits */
    enum { NA = 3, NB = 70001 };
    float *y[NA];
    sb_req_t *req[NA];
    for (int k = 0; k < NA; k++) {
        y[k] = malloc(NB * sizeof(float));
        for (int i = 0; i < NB; i++) y[k][i] = (float)(k + rank);
        FAILIF(sb_allreduce_async(e, y[k], NB, SB_F32, SB_SUM, TMO, &req[k]) < 0, "async: %s", sb_last_error());
    }
    unsigned char bytes[1001]; /* odd length; root's bytes include NaN and -0 patterns */
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = rank == P - 1 ? (unsigned char)(i * 37 + 0xff) : 0x5a;
    FAILIF(sb_broadcast(e, bytes, sizeof bytes, P - 1, TMO) < 0, "broadcast: %s", sb_last_error());
    for (int k = 0; k < NA; k++) {
        FAILIF(!sb_test(req[k]), "request %d not done after the broadcast queued behind it", k);
        FAILIF(sb_wait(req[k], TMO) < 0, "wait %d: %s", k, sb_last_error());
        FAILIF(sb_wait(req[k], 1) < 0 || !sb_test(req[k]), "a done request waits again: %s", sb_last_error());
        sb_req_free(&req[k]);
        for (int i = 0; i < NB; i++)
            FAILIF(y[k][i] != (float)(P * k + P * (P - 1) / 2), "async %d [%d] = %g", k, i, (double)y[k][i]);
        free(y[k]);
    }
    for (size_t i = 0; i < sizeof bytes; i++)
        FAILIF(bytes[i] != (unsigned char)(i * 37 + 0xff), "broadcast byte %zu = %d", i, bytes[i]);
    FAILIF(sb_allreduce(e, x, 0, SB_F32, SB_SUM, TMO) < 0, "count 0: %s", sb_last_error());
    FAILIF(sb_barrier(e, TMO) < 0, "barrier: %s", sb_last_error());
    /* bad arguments come back at once, without breaking the engine */
    FAILIF(sb_allreduce(e, x, 10, (sb_dtype_t)7, SB_SUM, TMO) != SB_ERR_INVAL || !strstr(sb_last_error(), "dtype 7"),
           "bad dtype: %s", sb_last_error());
    FAILIF(sb_allreduce(e, NULL, 10, SB_F32, SB_SUM, TMO) != SB_ERR_INVAL, "NULL buffer accepted");
    FAILIF(sb_broadcast(e, bytes, 4, P, TMO) != SB_ERR_RANGE, "root %d accepted", P);
    x[0] = 1;
    FAILIF(sb_allreduce(e, x, 1, SB_F32, SB_SUM, TMO) < 0 || x[0] != (float)P, "after bad arguments: %s",
           sb_last_error());
    free(x);
    free(h);
    free(b);
    sb_engine_free(&e);
    sb_comm_free(&c);
    return 0;
}

static void s_run_spec(const char *spec, int servers, int workers)
{
    spec_arg_t a = {spec, servers};
    cr_assert_eq(run_ranks(workers + servers, s_collectives_rank, &a, 90000), 0, "%s with %d workers: ranks failed",
                 spec, workers);
}

Test(api, ring_2_and_3) { s_run_spec("ring", 0, 2); s_run_spec("ring:algo=ring", 0, 3); }
Test(api, tree_2_and_3) { s_run_spec("tree", 0, 2); s_run_spec("tree", 0, 3); }
Test(api, ps_dedicated_servers) { s_run_spec("ps", 1, 2); s_run_spec("ps:servers=2,partition-kb=64", 2, 3); }
Test(api, ps_colocated) { s_run_spec("ps:colocate", 0, 2); s_run_spec("ps:colocate", 0, 3); }
Test(api, ring_checked) { s_run_spec("ring:check", 0, 3); }

Test(api, version_and_errors)
{
    cr_assert_eq(syncbench_version(), SYNCBENCH_VERSION);
    cr_assert(strstr(syncbench_version_string(), "0.1.0"), "%s", syncbench_version_string());
    cr_assert_str_eq(sb_strerror(SB_ERR_TIMEOUT), "timed out");
    sb_comm_t *c = NULL;
    sb_comm_cfg_t bad = {.rank = 3, .world = 2};
    cr_assert_eq(sb_comm_new(&c, &bad), SB_ERR_RANGE);
    cr_assert(strstr(sb_last_error(), "rank 3"), "%s", sb_last_error());
    /* a world of one needs nobody else */
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", 20000 + (int)(getpid() % 20000));
    sb_comm_cfg_t one = {.rank = 0, .world = 1, .init_method = m, .timeout_ms = 5000};
    cr_assert_eq(sb_comm_new(&c, &one), 0, "%s", sb_last_error());
    sb_engine_t *e = NULL;
    cr_assert_eq(sb_engine_new(&e, c, "rong", 0), SB_ERR_INVAL);
    cr_assert(strstr(sb_last_error(), "ring, tree, ps"), "%s", sb_last_error());
    cr_assert_eq(sb_engine_new(&e, c, "ps:colocat", 0), SB_ERR_INVAL);
    cr_assert(strstr(sb_last_error(), "colocate"), "the options are named: %s", sb_last_error());
    cr_assert_eq(sb_engine_new(&e, c, "ps:servers", 0), SB_ERR_INVAL);
    cr_assert(strstr(sb_last_error(), "needs a value"), "%s", sb_last_error());
    cr_assert_eq(sb_engine_new(&e, c, "ps:servers=1", 0), SB_ERR_INVAL, "1 server in a world of 1");
    cr_assert(strstr(sb_last_error(), "server rank"), "%s", sb_last_error());
    cr_assert_eq(sb_engine_new(&e, c, "ring", 0), 0, "%s", sb_last_error());
    float v[3] = {1, 2, 3};
    cr_assert_eq(sb_allreduce(e, v, 3, SB_F32, SB_AVG, 0), 0, "%s", sb_last_error());
    cr_assert(v[0] == 1 && v[2] == 3);
    cr_assert_eq(sb_engine_serve(e), SB_ERR_STATE);
    sb_engine_free(&e);
    sb_comm_free(&c);
    cr_assert_null(c);
}

/* "check": ranks that disagree on the count get SB_ERR_MISMATCH naming both, and the engine goes on */
static int s_mismatch_rank(int rank, int world, void *arg)
{
    (void)arg;
    (void)world;
    sb_comm_t *c = NULL;
    sb_engine_t *e = NULL;
    if (s_join(&c, &e, "tree:check") < 0) return 1;
    float x[16] = {0};
    int rc = sb_allreduce(e, x, rank == 1 ? 11 : 10, SB_F32, SB_SUM, 5000);
    FAILIF(rc != SB_ERR_MISMATCH, "rank %d: mismatch gave %d (%s)", rank, rc, sb_last_error());
    FAILIF(!strstr(sb_last_error(), "11") || !strstr(sb_last_error(), "rank 1"), "rank %d: %s", rank, sb_last_error());
    for (int i = 0; i < 16; i++) x[i] = 1;
    FAILIF(sb_allreduce(e, x, 16, SB_F32, SB_SUM, 5000) < 0 || x[15] != (float)world, "after: %s", sb_last_error());
    sb_engine_free(&e);
    sb_comm_free(&c);
    return 0;
}
Test(api, check_names_a_mismatch) { cr_assert_eq(run_ranks(3, s_mismatch_rank, NULL, 60000), 0); }

/* A peer that never calls: the collective times out within its timeout, naming whom it waited for. */
static int s_timeout_rank(int rank, int world, void *arg)
{
    (void)world;
    sb_comm_t *c = NULL;
    sb_engine_t *e = NULL;
    if (s_join_t(&c, &e, arg, 5000) < 0) return 1;
    float x[1000] = {0};
    if (rank == 1) {
        sleep(4);
    } else {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = sb_allreduce(e, x, 1000, SB_F32, SB_SUM, 1000);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        FAILIF(rc != SB_ERR_TIMEOUT, "%s: gave %d (%s)", (char *)arg, rc, sb_last_error());
        FAILIF(s > 3.0, "%s: 1 s timeout took %.1f s", (char *)arg, s);
        FAILIF(!strstr(sb_last_error(), "rank 1"), "%s: does not name rank 1: %s", (char *)arg, sb_last_error());
        FAILIF(sb_allreduce(e, x, 10, SB_F32, SB_SUM, 1000) != SB_ERR_STATE || !strstr(sb_last_error(), "earlier"),
               "a broken engine goes on: %s", sb_last_error());
    }
    sb_engine_free(&e);
    sb_comm_free(&c);
    return 0;
}
Test(api, timeout_names_the_late_rank)
{
    cr_assert_eq(run_ranks(2, s_timeout_rank, "ring", 60000), 0);
    cr_assert_eq(run_ranks(2, s_timeout_rank, "tree", 60000), 0);
}

/* A peer that dies: every survivor fails (no hang) and one of them names the dead rank. */
static int s_dead_rank(int rank, int world, void *arg)
{
    sb_comm_t *c = NULL;
    sb_engine_t *e = NULL;
    if (s_join_t(&c, &e, arg, 5000) < 0) return 1;
    static float x[100000];
    int rc = sb_allreduce(e, x, 100000, SB_F32, SB_SUM, 4000);
    FAILIF(rc < 0, "%s rank %d: the first allreduce: %s", (char *)arg, rank, sb_last_error());
    FAILIF(sb_barrier(e, 4000) < 0, "barrier: %s", sb_last_error()); /* every rank is done reading the first */
    if (rank == world - 1) _exit(0); /* gone without a word */
    for (int k = 0; k < 3 && rc == 0; k++) rc = sb_allreduce(e, x, 100000, SB_F32, SB_SUM, 4000);
    FAILIF(rc != SB_ERR_PEER && rc != SB_ERR_TIMEOUT, "%s rank %d: gave %d (%s)", (char *)arg, rank, rc, sb_last_error());
    char want[32];
    snprintf(want, sizeof want, "rank %d", world - 1);
    fprintf(stderr, "dead peer, %s rank %d: %s\n", (char *)arg, rank, sb_last_error());
    sb_engine_free(&e);
    sb_comm_free(&c);
    return strstr(sb_last_error(), want) ? 0 : 2; /* 2: failed cleanly without naming it */
}
Test(api, dead_peer_named)
{
    static const char *const specs[] = {"ring", "tree", "ps:colocate"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        int failed = run_ranks(3, s_dead_rank, (void *)specs[i], 60000);
        /* the dead rank exits 0; of the two survivors at most one may name someone else (its own
         * neighbour, which gave up first) */
        cr_assert_leq(failed, 1, "%s: %d survivors did not name the dead rank or hung", specs[i], failed);
    }
}

/* A world of one: every engine's collectives are done when they return (an async allreduce's request is done
 * at birth: nothing to send, no hand-off to the communication thread) and leave the buffer bit for bit as it
 * was (sum and average of one), for f32, f16 and bf16, NaN payloads and -0 included. */
static int s_solo_rank(int rank, int world, void *arg)
{
    (void)rank;
    (void)world;
    sb_comm_t *c = NULL;
    sb_engine_t *e = NULL;
    if (s_join(&c, &e, arg) < 0) return 1;
    enum { N = 4099, K = 200 };
    uint32_t *x = malloc(N * sizeof *x), *x0 = malloc(N * sizeof *x0);
    for (size_t i = 0; i < N; i++) x[i] = x0[i] = (uint32_t)(i * 2654435761u); /* every pattern: NaNs, -0, denormals */
    x[0] = x0[0] = 0x80000000u;
    x[1] = x0[1] = 0x7fc01234u;
    int late = 0;
    for (int k = 0; k < K; k++) {
        sb_dtype_t dt = (sb_dtype_t)(k % 3);
        size_t n = dt == SB_F32 ? N : 2 * N;
        sb_req_t *r = NULL;
        FAILIF(sb_allreduce_async(e, x, n, dt, k % 2 ? SB_AVG : SB_SUM, TMO, &r) < 0, "%s async: %s", (char *)arg,
               sb_last_error());
        late += !sb_test(r);
        FAILIF(sb_wait(r, TMO) < 0, "%s wait: %s", (char *)arg, sb_last_error());
        sb_req_free(&r);
        FAILIF(sb_allreduce(e, x, n, dt, k % 2 ? SB_SUM : SB_AVG, TMO) < 0, "%s: %s", (char *)arg, sb_last_error());
    }
    FAILIF(late, "%s: %d of %d async allreduces in a world of one were not done when submitted", (char *)arg, late, K);
    FAILIF(memcmp(x, x0, N * sizeof *x), "%s: the buffer changed in a world of one", (char *)arg);
    FAILIF(sb_broadcast(e, x, N * sizeof *x, 0, TMO) < 0 || memcmp(x, x0, N * sizeof *x), "%s broadcast: %s",
           (char *)arg, sb_last_error());
    FAILIF(sb_barrier(e, TMO) < 0, "%s barrier: %s", (char *)arg, sb_last_error());
    FAILIF(sb_allreduce(e, x, 10, (sb_dtype_t)7, SB_SUM, TMO) != SB_ERR_INVAL, "%s: bad dtype accepted", (char *)arg);
    FAILIF(sb_broadcast(e, x, 4, 1, TMO) != SB_ERR_RANGE, "%s: root 1 accepted in a world of one", (char *)arg);
    free(x);
    free(x0);
    sb_engine_free(&e);
    sb_comm_free(&c);
    return 0;
}
Test(api, world_of_one_returns_at_once)
{
    static const char *const specs[] = {"ring", "tree", "ps:colocate", "ring:check"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        cr_assert_eq(run_ranks(1, s_solo_rank, (void *)specs[i], 60000), 0, "%s in a world of one", specs[i]);
}

/* Ranks outnumbering cores: a worker that waits for a late peer sleeps (woken when its data comes) rather than
 * yielding its core for 2 ms a wait, which, beside a training's compute threads, delays every hand-off to the
 * end of the compute thread's slice. Rank 0's CPU time over allreduces that each wait ~10 ms for the others. */
static int s_idle_wait_rank(int rank, int world, void *arg)
{
    (void)world;
    (void)arg;
    sb_comm_t *c = NULL;
    sb_engine_t *e = NULL;
    if (s_join(&c, &e, "ring:algo=ring") < 0) return 1;
    enum { K = 30 };
    static float x[1 << 16];
    FAILIF(sb_allreduce(e, x, 1 << 16, SB_F32, SB_SUM, TMO) < 0, "warm-up: %s", sb_last_error());
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (int k = 0; k < K; k++) {
        if (rank) usleep(10000);
        FAILIF(sb_allreduce(e, x, 1 << 16, SB_F32, SB_SUM, TMO) < 0, "allreduce %d: %s", k, sb_last_error());
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    double ms = ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) / K;
    fprintf(stderr, "rank %d: %.2f ms of CPU an allreduce that waits ~10 ms\n", rank, ms);
    FAILIF(rank == 0 && ms > 0.8, "rank 0 spent %.2f ms of CPU an allreduce waiting for late peers (yielding, not "
           "sleeping)", ms);
    sb_engine_free(&e);
    sb_comm_free(&c);
    return 0;
}
Test(api, oversubscribed_waits_sleep, .timeout = 120)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu + 1 > 8) cr_skip_test("needs more ranks than cores: %ld cores here", ncpu);
    cr_assert_eq(run_ranks((int)ncpu + 1, s_idle_wait_rank, NULL, 90000), 0);
}
