/* test_ps_failure.c: the parameter-server engine when things go wrong, on forked ranks: malformed and
 * foreign messages sent raw to a server's ROUTER (rejected, counted, answered, server survives), bad
 * push descriptors (cross-memory reads) among them; allreduce pushes by descriptor whose read fails
 * midway (as a round's first, middle and last push; the exact sum after good ones); a malformed
 * shared-memory lane (rejected, then the worker failed by name); a dead worker in sync mode named in
 * the error (dedicated and colocated servers); in async mode the servers drop a dead worker and carry
 * on with the others. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <zmq.h>
#include "core/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "core/timer.h"
#include "core/optim.h"
#include "ps/wire.h"
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "ps/ps_lane.h"
#include "core/cma.h"
#include "tests/lib/ranks.h"
#include "tests/lib/ps_ranks.h"

#define TO PS_TEST_TO

/* ---------- malformed and foreign messages ---------- */

#define NFUZZ 100
#define NBAD (16 + NFUZZ)

static int s_raw_rank(int rank, int world, void *arg)
{
    (void)arg;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    if (rank == 1) return ps_test_server_rank(&comm, &t, NBAD);
    (void)world;
    /* rank 0 plays the worker by hand */
    void *val = NULL;
    size_t len = 0;
    if (ps_test_server_ep(comm, &val, &len) < 0) return 1;
    void *ctx = zmq_ctx_new();
    void *good = zmq_socket(ctx, ZMQ_DEALER), *foreign = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(good, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(foreign, ZMQ_LINGER, &zero, sizeof zero);
    uint64_t job = ps_job_id(comm->job, 1);
    unsigned char id[PS_ID_LEN];
    ps_routing_id(job, 0, id);
    zmq_setsockopt(good, ZMQ_ROUTING_ID, id, PS_ID_LEN);
    zmq_connect(good, (char *)val);
    zmq_connect(foreign, (char *)val);
    free(val);
    int fail = 0, nerr = 0;
    wire_hdr_t r;
    const size_t N = 10;
    float vals[10], got[10], grad[10];
    for (size_t i = 0; i < N; i++) { vals[i] = (float)i; grad[i] = 1.0f; }
    ps_meta_t meta = {.total = N, .step = 1, .lr = 0.5f, .inv_scale = 1.0f};
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_SGD);
    oc.momentum = 0;
    const void *fr[3];
    size_t fl[3];
#define EXPECT_ERR(sock)                                                                    \
    do {                                                                                    \
        int ty = ps_test_raw_recv(sock, &r, NULL, 0);                                       \
        if (ty != WIRE_ERROR) { fprintf(stderr, "line %d: no ERROR reply (%d)\n", __LINE__, ty); fail = 1; } \
        else nerr++;                                                                        \
    } while (0)
    /* 1: garbage instead of a header */
    zmq_send(foreign, "garbage!", 8, 0);
    EXPECT_ERR(foreign);
    /* random multi-frame junk, deterministic: every message rejected and answered, none crashes */
    unsigned seed = 12345;
    for (int i = 0; i < NFUZZ && !fail; i++) {
        int nf = 1 + (int)(rand_r(&seed) % 4);
        for (int f = 0; f < nf; f++) {
            unsigned char junk[300];
            size_t jl = rand_r(&seed) % sizeof junk;
            for (size_t j = 0; j < jl; j++) junk[j] = (unsigned char)rand_r(&seed);
            if (jl && (i & 1)) junk[0] = 0x8a;   /* looks like a msgpack map of 10 */
            zmq_send(i % 3 ? foreign : good, junk, jl, f + 1 < nf ? ZMQ_SNDMORE : 0);
        }
        EXPECT_ERR(i % 3 ? foreign : good);
    }
    /* 2: a well-formed header from an unknown sender (no worker routing id) */
    wire_hdr_t h = {.type = WIRE_PUSH, .sender = 0, .job = job, .key = 0, .clock = 0, .count = N, .dtype = DT_F32,
                    .aux = PS_F_AR, .nframes = 2};
    fr[0] = &meta; fl[0] = sizeof meta; fr[1] = grad; fl[1] = sizeof grad;
    ps_test_raw_send(foreign, &h, fr, fl, 2);
    EXPECT_ERR(foreign);
    /* 3: foreign job id */
    h.job = job + 99;
    ps_test_raw_send(good, &h, fr, fl, 2);
    EXPECT_ERR(good);
    h.job = job;
    /* 4: wrong key */
    h.key = 5;
    ps_test_raw_send(good, &h, fr, fl, 2);
    EXPECT_ERR(good);
    h.key = 0;
    /* 5: wrong size (header says 10 elements, 9 sent) */
    fl[1] = 9 * sizeof(float);
    ps_test_raw_send(good, &h, fr, fl, 2);
    EXPECT_ERR(good);
    fl[1] = sizeof grad;
    /* 6: clock from the future */
    h.clock = 7;
    ps_test_raw_send(good, &h, fr, fl, 2);
    EXPECT_ERR(good);
    h.clock = 0;
    /* 7: header announces 2 frames, 1 follows */
    ps_test_raw_send(good, &h, fr, fl, 1);
    EXPECT_ERR(good);
    /* 8: a sender rank that does not exist */
    h.sender = 5;
    ps_test_raw_send(good, &h, fr, fl, 2);
    EXPECT_ERR(good);
    h.sender = 0;
    /* a correct allreduce round still works: push + commit */
    ps_test_raw_send(good, &h, fr, fl, 2);
    wire_hdr_t pl = {.type = WIRE_PULL, .sender = 0, .job = job, .key = 0, .clock = 1, .dtype = DT_F32,
                     .aux = PS_F_AR | PS_F_COMMIT, .nframes = 1};
    ps_test_raw_send(good, &pl, fr, fl, 1);
    memset(got, 0, sizeof got);
    if (ps_test_raw_recv(good, &r, got, sizeof got) != WIRE_PARAMS || r.clock != 1 || got[3] != 1.0f) {
        fprintf(stderr, "valid allreduce after bad input failed\n");
        fail = 1;
    }
    /* 13-16: pushes by descriptor (PS_F_CMA) that the server must refuse before or while reading */
    {
        wire_hdr_t hc = h;
        hc.clock = 1;
        hc.aux = PS_F_AR | PS_F_COMMIT | PS_F_CMA;
        cma_desc_t d = cma_desc(grad, sizeof grad);
        fr[0] = &meta; fl[0] = sizeof meta; fr[1] = &d; fl[1] = sizeof d - 1;  /* 13: short descriptor */
        ps_test_raw_send(good, &hc, fr, fl, 2);
        EXPECT_ERR(good);
        fl[1] = sizeof d;
        d.magic ^= 1;                                                      /* 14: not a descriptor */
        ps_test_raw_send(good, &hc, fr, fl, 2);
        EXPECT_ERR(good);
        d = cma_desc(grad, sizeof grad + 4);                               /* 15: size != count */
        ps_test_raw_send(good, &hc, fr, fl, 2);
        EXPECT_ERR(good);
        d = cma_desc((void *)(uintptr_t)64, sizeof grad);                  /* 16: an address not mapped */
        ps_test_raw_send(good, &hc, fr, fl, 2);
        EXPECT_ERR(good);
        fr[1] = grad; fl[1] = sizeof grad;
    }
    /* parameters: INIT, pull version 0 */
    wire_hdr_t in = {.type = WIRE_INIT, .sender = 0, .job = job, .key = 0, .clock = 0, .offset = 0, .count = N,
                     .dtype = DT_F32, .aux = DT_F32, .nframes = 3};
    fr[0] = &meta; fl[0] = sizeof meta; fr[1] = &oc; fl[1] = sizeof oc; fr[2] = vals; fl[2] = sizeof vals;
    ps_test_raw_send(good, &in, fr, fl, 3);
    /* 9: INIT twice */
    ps_test_raw_send(good, &in, fr, fl, 3);
    EXPECT_ERR(good);
    pl.aux = 0;
    pl.clock = 0;
    ps_test_raw_send(good, &pl, fr, fl, 1);
    if (ps_test_raw_recv(good, &r, got, sizeof got) != WIRE_PARAMS || memcmp(got, vals, sizeof vals)) {
        fprintf(stderr, "pull of version 0 failed\n");
        fail = 1;
    }
    /* 10: push with the wrong dtype (f16 into f32 gradients) */
    uint16_t half[10] = {0};
    wire_hdr_t pu = {.type = WIRE_PUSH, .sender = 0, .job = job, .key = 0, .clock = 0, .count = N, .dtype = DT_F16,
                     .nframes = 2};
    fr[1] = half; fl[1] = sizeof half;
    ps_test_raw_send(good, &pu, fr, fl, 2);
    EXPECT_ERR(good);
    /* 11: commit for a future clock */
    pl.aux = PS_F_COMMIT;
    pl.clock = 5;
    ps_test_raw_send(good, &pl, fr, fl, 1);
    EXPECT_ERR(good);
    /* 12: a push past the partition's end */
    pu.dtype = DT_F32;
    pu.offset = 5;
    fr[1] = grad; fl[1] = sizeof grad;
    ps_test_raw_send(good, &pu, fr, fl, 2);
    EXPECT_ERR(good);
    /* a correct step: p - lr * g with lr 0.5, g = 1 */
    pu.offset = 0;
    ps_test_raw_send(good, &pu, fr, fl, 2);
    pl.clock = 1;
    ps_test_raw_send(good, &pl, fr, fl, 1);
    if (ps_test_raw_recv(good, &r, got, sizeof got) != WIRE_PARAMS || r.clock != 1) {
        fprintf(stderr, "valid step after bad input failed\n");
        fail = 1;
    } else {
        for (size_t i = 0; i < N; i++)
            if (got[i] != vals[i] - 0.5f) { fprintf(stderr, "param %zu = %g\n", i, got[i]); fail = 1; break; }
    }
    if (nerr != NBAD) { fprintf(stderr, "%d ERROR replies, expected %d\n", nerr, NBAD); fail = 1; }
    wire_hdr_t bye = {.type = WIRE_BYE, .sender = 0, .job = job, .dtype = DT_F32};
    ps_test_raw_send(good, &bye, NULL, NULL, 0);
    usleep(100000);
    zmq_close(good);
    zmq_close(foreign);
    zmq_ctx_term(ctx);
    comm_destroy(&comm);
    return fail;
}

Test(ps_server, rejects_malformed_and_foreign, .timeout = 40)
{
    cr_assert_eq(run_ranks(2, s_raw_rank, NULL, 30000), 0);
}

/* ---------- keep-alives are not traffic ---------- */

/* A hand-played worker w: a DEALER connected to the server with worker w's routing id, in *ctx (made
 * when NULL), the PS job id in *job; NULL if the server's endpoint is not published. */
static void *s_raw_worker_w(comm_t *comm, void **ctx, uint64_t *job, int w)
{
    void *val = NULL;
    size_t len = 0;
    if (ps_test_server_ep(comm, &val, &len) < 0) return NULL;
    if (!*ctx) *ctx = zmq_ctx_new();
    void *sock = zmq_socket(*ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    *job = ps_job_id(comm->job, 1);
    unsigned char id[PS_ID_LEN];
    ps_routing_id(*job, w, id);
    zmq_setsockopt(sock, ZMQ_ROUTING_ID, id, PS_ID_LEN);
    zmq_connect(sock, (char *)val);
    free(val);
    return sock;
}

static void *s_raw_worker(comm_t *comm, void **ctx, uint64_t *job) { return s_raw_worker_w(comm, ctx, job, 0); }

/* A dedicated server of topology t: create it and serve until its workers are done (*e for its stats). */
static int s_serve_one(comm_t *comm, const ps_topo_t *t, engine_t **e)
{
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(t, comm->world, &po);
    int rc = ps_engine.create(e, comm, &cfg);
    return rc == 0 ? ps_engine.serve(*e) : rc;
}

/* Serve as s_serve_one and expect it to end with code and an error naming text: 0, else 1 (said). */
static int s_serve_expect(comm_t *comm, const ps_topo_t *t, int code, const char *text, engine_t **e)
{
    int rc = s_serve_one(comm, t, e);
    const char *d = err_detail();
    int fail = rc != code || !strstr(d, text);
    if (fail) fprintf(stderr, "server: %d (%s), expected %d naming \"%s\"\n", rc, d, code, text);
    err_clear();
    return fail;
}

/* Rank 0 plays a waiting worker by hand: 50 keep-alives, then BYE. The server counts none of the
 * keep-alives as received bytes (the worker does not count them as sent): only the BYE's header. */
static int s_keepalive_rank(int rank, int world, void *arg)
{
    (void)arg;
    (void)world;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank == 1) {
        engine_t *e = NULL;
        int rc = s_serve_one(comm, &t, &e);
        if (rc < 0) { ps_test_report("serve", rc); fail = 1; }
        if (e) {
            engine_stats_t st;
            ps_engine.stats(e, &st);
            if (st.bytes_received == 0 || st.bytes_received > WIRE_HDR_MAX) {
                fprintf(stderr, "server counted %llu bytes received, expected one BYE's header (<= %d)\n",
                        (unsigned long long)st.bytes_received, WIRE_HDR_MAX);
                fail = 1;
            }
            ps_engine.destroy(&e);
        }
        comm_destroy(&comm);
        return fail;
    }
    void *ctx = NULL;
    uint64_t job = 0;
    void *good = s_raw_worker(comm, &ctx, &job);
    if (!good) return 1;
    wire_hdr_t ka = {.type = WIRE_HELLO, .sender = 0, .job = job, .dtype = DT_F32, .aux = PS_HELLO_KEEPALIVE};
    for (int i = 0; i < 50 && !fail; i++) fail |= ps_test_raw_send(good, &ka, NULL, NULL, 0) < 0;
    wire_hdr_t bye = {.type = WIRE_BYE, .sender = 0, .job = job, .dtype = DT_F32};
    fail |= ps_test_raw_send(good, &bye, NULL, NULL, 0) < 0;
    usleep(200000);
    zmq_close(good);
    zmq_ctx_term(ctx);
    comm_destroy(&comm);
    return fail;
}

Test(ps_server, keepalives_are_not_traffic, .timeout = 40)
{
    cr_assert_eq(run_ranks(2, s_keepalive_rank, NULL, 30000), 0);
}

/* ---------- allreduce pushes by descriptor cut short midway ---------- */

#define FOLD_N ((size_t)1 << 20) /* f32 elements: one partition of 4 MiB (the default), 16 read chunks */
#define FOLD_BAD 5               /* messages the server must refuse */

/* May a process read its parent's memory here (the right a server needs to read its workers')? */
static int s_cma_allowed(void)
{
    uint64_t addr = cma_cookie_addr(), val = cma_cookie_value(); /* set before the fork: the child has it too */
    pid_t c = fork();
    if (c == 0) {
        const char *why = "";
        _exit(cma_probe(getppid(), addr, val, &why) ? 0 : 1);
    }
    int st = 1;
    waitpid(c, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* An allreduce push of the whole partition by descriptor: data .. data + FOLD_N floats. */
static void s_fold_push(void *sock, uint64_t job, int w, uint64_t clock, int commit, const float *data)
{
    wire_hdr_t h = {.type = WIRE_PUSH, .sender = (uint32_t)w, .job = job, .key = 0, .clock = clock, .offset = 0,
                    .count = FOLD_N, .dtype = DT_F32, .aux = PS_F_AR | PS_F_CMA | (commit ? PS_F_COMMIT : 0),
                    .nframes = 2};
    ps_meta_t meta = {.total = FOLD_N, .lr = 0, .inv_scale = 1};
    cma_desc_t d = cma_desc(data, FOLD_N * sizeof(float));
    const void *fr[2] = {&meta, &d};
    size_t fl[2] = {sizeof meta, sizeof d};
    ps_test_raw_send(sock, &h, fr, fl, 2);
}

/* The next reply on sock is an ERROR whose text holds both strings: 0, else 1 (said on stderr). */
static int s_fold_err(void *sock, const char *a, const char *b, int line)
{
    char text[300] = "";
    wire_hdr_t r;
    int ty = ps_test_raw_recv(sock, &r, text, sizeof text - 1);
    if (ty == WIRE_ERROR && strstr(text, a) && strstr(text, b)) return 0;
    fprintf(stderr, "line %d: expected an ERROR with \"%s\" and \"%s\", got type %d: %s\n", line, a, b, ty, text);
    return 1;
}

/* The next reply on sock is PARAMS of clock by descriptor: read it into out. 0, else 1. */
static int s_fold_params(void *sock, uint64_t clock, float *out, int line)
{
    wire_hdr_t r;
    cma_desc_t d;
    memset(&d, 0, sizeof d);
    int ty = ps_test_raw_recv(sock, &r, &d, sizeof d);
    if (ty != WIRE_PARAMS || r.clock != clock || !(r.aux & PS_F_CMA) || d.len != FOLD_N * sizeof(float) ||
        cma_read((pid_t)d.pid, out, d.addr, (size_t)d.len) < 0) {
        fprintf(stderr, "line %d: expected PARAMS of clock %llu by descriptor, got type %d clock %llu (%s)\n", line,
                (unsigned long long)clock, ty, (unsigned long long)r.clock, err_detail());
        return 1;
    }
    return 0;
}

/* A non-committing pull of clock: answered at once, so every earlier message on sock was handled. */
static int s_fold_sync(void *sock, uint64_t job, int w, uint64_t clock, float *tmp, int line)
{
    wire_hdr_t pl = {.type = WIRE_PULL, .sender = (uint32_t)w, .job = job, .key = 0, .clock = clock,
                     .dtype = DT_F32, .aux = PS_F_AR, .nframes = 1};
    ps_meta_t meta = {.total = FOLD_N, .inv_scale = 1};
    const void *fr[1] = {&meta};
    size_t fl[1] = {sizeof meta};
    ps_test_raw_send(sock, &pl, fr, fl, 1);
    return s_fold_params(sock, clock, tmp, line);
}

/* Rank 0 plays three workers by hand (one DEALER each) against a dedicated server (rank 3), pushing by
 * descriptor a partition of several read chunks. A descriptor whose second half is unreadable makes the
 * read fail midway: as the round's first push (read straight into the sum), as its last one (added
 * chunk by chunk into the reply buffer), both refused naming the worker and leaving the round intact
 * (good pushes then give the exact sum: first, middle and last push kinds, in a known order); and as a
 * middle push, whose first half is already summed: the round of that key is refused from then on,
 * naming that worker, and the server carries on to a clean exit. */
static int s_fold_rank(int rank, int world, void *arg)
{
    (void)arg;
    (void)world;
    ps_topo_t t = {.nworkers = 3, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    if (rank > 0) { /* rank 3 serves; ranks 1 and 2 are the workers rank 0 plays */
        int f = rank == 3 ? ps_test_serve(comm, &t, FOLD_BAD) : 0;
        comm_destroy(&comm);
        return f;
    }
    void *val = NULL;
    size_t len = 0;
    if (ps_test_server_ep(comm, &val, &len) < 0) return 1;
    void *ctx = zmq_ctx_new(), *sk[3];
    uint64_t job = ps_job_id(comm->job, 1);
    int zero = 0, fail = 0;
    for (int w = 0; w < 3; w++) {
        unsigned char id[PS_ID_LEN];
        ps_routing_id(job, w, id);
        sk[w] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(sk[w], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(sk[w], ZMQ_ROUTING_ID, id, PS_ID_LEN);
        zmq_connect(sk[w], (char *)val);
    }
    free(val);
    size_t bytes = FOLD_N * sizeof(float);
    float *x[3], *want = malloc(bytes), *got = malloc(bytes);
    /* the bad buffer: readable for its first half only */
    float *bad = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bad == MAP_FAILED || !want || !got || mprotect((char *)bad + bytes / 2, bytes / 2, PROT_NONE) != 0) return 1;
    unsigned seed = 777;
    for (int w = 0; w < 3; w++) {
        x[w] = malloc(bytes);
        if (!x[w]) return 1;
        /* both signs, magnitudes from 1e6 down to 2^-31: the order of the additions shows in the bits */
        for (size_t i = 0; i < FOLD_N; i++)
            x[w][i] = (float)((int)(rand_r(&seed) % 2000001) - 1000000) / (float)(1u << (rand_r(&seed) % 32));
    }
    for (size_t i = 0; i < FOLD_N; i++) {
        volatile float ab = x[0][i] + x[1][i];
        want[i] = ab + x[2][i];
    }
    for (size_t i = 0; i < FOLD_N / 2; i++) bad[i] = 1.0f;
    /* round 0: worker 0's first push cut short (read into the sum), then its good one */
    s_fold_push(sk[0], job, 0, 0, 1, bad);
    fail |= s_fold_err(sk[0], "cannot read worker 0's push", "", __LINE__);
    s_fold_push(sk[0], job, 0, 0, 1, x[0]);
    fail |= s_fold_sync(sk[0], job, 0, 0, got, __LINE__);
    s_fold_push(sk[1], job, 1, 0, 1, x[1]); /* the middle push: accumulated chunk by chunk */
    fail |= s_fold_sync(sk[1], job, 1, 0, got, __LINE__);
    /* worker 2's last push cut short (its first half already added into the reply buffer), then its good one */
    s_fold_push(sk[2], job, 2, 0, 1, bad);
    fail |= s_fold_err(sk[2], "cannot read worker 2's push", "", __LINE__);
    s_fold_push(sk[2], job, 2, 0, 1, x[2]);
    for (int w = 0; w < 3 && !fail; w++) {
        memset(got, 0, bytes);
        fail |= s_fold_params(sk[w], 1, got, __LINE__);
        size_t i = 0;
        while (i < FOLD_N && !fail && memcmp(&got[i], &want[i], sizeof(float)) == 0) i++;
        if (!fail && i < FOLD_N) {
            fprintf(stderr, "worker %d: sum[%zu] = %a, expected %a\n", w, i, got[i], want[i]);
            fail = 1;
        }
    }
    /* round 1: worker 1's middle push cut short after half of it was summed: that round is lost */
    s_fold_push(sk[0], job, 0, 1, 0, x[0]);
    fail |= s_fold_sync(sk[0], job, 0, 1, got, __LINE__);
    s_fold_push(sk[1], job, 1, 1, 0, bad);
    fail |= s_fold_err(sk[1], "cannot read worker 1's push", "cut short midway", __LINE__);
    s_fold_push(sk[1], job, 1, 1, 1, x[1]);
    fail |= s_fold_err(sk[1], "round is lost", "worker 1's push", __LINE__);
    s_fold_push(sk[2], job, 2, 1, 1, x[2]);
    fail |= s_fold_err(sk[2], "round is lost", "worker 1's push", __LINE__);
    for (int w = 0; w < 3; w++) {
        wire_hdr_t bye = {.type = WIRE_BYE, .sender = (uint32_t)w, .job = job, .dtype = DT_F32};
        ps_test_raw_send(sk[w], &bye, NULL, NULL, 0);
    }
    usleep(100000);
    for (int w = 0; w < 3; w++) {
        zmq_close(sk[w]);
        free(x[w]);
    }
    zmq_ctx_term(ctx);
    munmap(bad, bytes);
    free(want);
    free(got);
    comm_destroy(&comm);
    return fail;
}

Test(ps_server, push_read_cut_short_midway, .timeout = 60)
{
    if (!s_cma_allowed()) cr_skip_test("process_vm_readv of another process is not permitted here");
    cr_assert_eq(run_ranks(4, s_fold_rank, NULL, 40000), 0);
}

/* ---------- sync training pushes by descriptor cut short ---------- */

/* A training push (not allreduce) of the whole key-0 partition by descriptor, for clock 0. */
static void s_train_push(void *sock, uint64_t job, int w, const float *data)
{
    wire_hdr_t h = {.type = WIRE_PUSH, .sender = (uint32_t)w, .job = job, .key = 0, .clock = 0, .offset = 0,
                    .count = FOLD_N, .dtype = DT_F32, .aux = PS_F_CMA, .nframes = 2};
    ps_meta_t meta = {.total = FOLD_N, .lr = 0.1f, .inv_scale = 1};
    cma_desc_t d = cma_desc(data, FOLD_N * sizeof(float));
    const void *fr[2] = {&meta, &d};
    size_t fl[2] = {sizeof meta, sizeof d};
    ps_test_raw_send(sock, &h, fr, fl, 2);
}

/* Rank 0 plays two training workers against a dedicated sync server (rank 2) and pushes key 0 by
 * descriptor in 256 KiB reads: worker 0's good push opens the round; worker 1's push from memory it
 * cannot read at all is refused, naming it, and the round goes on; its push whose second half is
 * unreadable is cut short after part of it was summed: the server fails the job naming worker 1. */
static int s_train_fold_rank(int rank, int world, void *arg)
{
    (void)arg;
    (void)world;
    ps_topo_t t = {.nworkers = 2, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank == 2) {
        engine_t *e = NULL;
        fail = s_serve_expect(comm, &t, ERR_PEER, "cannot read worker rank 1's push midway", &e);
        ps_engine.destroy(&e);
        comm_destroy(&comm);
        return fail;
    }
    if (rank == 1) { /* played by rank 0 */
        comm_destroy(&comm);
        return 0;
    }
    void *ctx = NULL;
    uint64_t job = 0;
    void *sk[2];
    sk[0] = s_raw_worker_w(comm, &ctx, &job, 0);
    sk[1] = sk[0] ? s_raw_worker_w(comm, &ctx, &job, 1) : NULL;
    if (!sk[1]) return 1;
    size_t bytes = FOLD_N * sizeof(float);
    float *good = calloc(FOLD_N, sizeof(float));
    float *bad = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!good || bad == MAP_FAILED) return 1;
    float *half = bad, *none = bad + FOLD_N; /* half: its second half unreadable; none: nothing readable */
    for (size_t i = 0; i < FOLD_N / 2; i++) half[i] = 1.0f;
    if (mprotect((char *)half + bytes / 2, bytes + bytes / 2, PROT_NONE) != 0) return 1;
    /* worker 0 initialises key 0 (one partition) and pushes */
    wire_hdr_t in = {.type = WIRE_INIT, .sender = 0, .job = job, .key = 0, .clock = 0, .offset = 0, .count = FOLD_N,
                     .dtype = DT_F32, .aux = DT_F32, .nframes = 3};
    ps_meta_t meta = {.total = FOLD_N, .lr = 0.1f, .inv_scale = 1};
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_SGD);
    const void *fr[3] = {&meta, &oc, good};
    size_t fl[3] = {sizeof meta, sizeof oc, bytes};
    ps_test_raw_send(sk[0], &in, fr, fl, 3);
    s_train_push(sk[0], job, 0, good);
    /* a pull of version 0 without commit is answered at once: both are handled before worker 1 pushes */
    wire_hdr_t pl = {.type = WIRE_PULL, .sender = 0, .job = job, .key = 0, .clock = 0, .dtype = DT_F32, .nframes = 1};
    ps_test_raw_send(sk[0], &pl, fr, fl, 1);
    wire_hdr_t r;
    int ty = ps_test_raw_recv(sk[0], &r, NULL, 0);
    if (ty != WIRE_PARAMS) {
        fprintf(stderr, "line %d: expected PARAMS of version 0, got type %d\n", __LINE__, ty);
        fail = 1;
    }
    s_train_push(sk[1], job, 1, none);
    fail |= s_fold_err(sk[1], "cannot read worker 1's push", "", __LINE__);
    s_train_push(sk[1], job, 1, half);
    fail |= s_fold_err(sk[1], "cannot read worker rank 1's push midway", "", __LINE__);
    for (int w = 0; w < 2; w++) {
        wire_hdr_t bye = {.type = WIRE_BYE, .sender = (uint32_t)w, .job = job, .dtype = DT_F32};
        ps_test_raw_send(sk[w], &bye, NULL, NULL, 0);
        zmq_close(sk[w]);
    }
    zmq_ctx_term(ctx);
    munmap(bad, 2 * bytes);
    free(good);
    comm_destroy(&comm);
    return fail;
}

Test(ps_server, train_push_read_cut_short, .timeout = 60)
{
    if (!s_cma_allowed()) cr_skip_test("process_vm_readv of another process is not permitted here");
    cr_assert_eq(run_ranks(3, s_train_fold_rank, NULL, 40000), 0);
}

/* ---------- a malformed shared-memory lane ---------- */

/* Rank 0 sets up a lane (ps_lane.h) by hand and writes into it what a broken or hostile worker could: a
 * slot whose lengths run past it (rejected and answered over the lane, the server carries on), then a
 * ring head that jumps (the lane is dropped, the worker failed by name, nothing crashes). */
static int s_lane_rank(int rank, int world, void *arg)
{
    (void)arg;
    (void)world;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank == 1) {
        engine_t *e = NULL;
        fail = s_serve_expect(comm, &t, ERR_PROTO, "worker rank 0's shared-memory lane is corrupt", &e);
        engine_stats_t st;
        ps_engine.stats(e, &st);
        if (engine_counter(&st, "ps_rejected") != 3) { /* the two malformed slots and the jumping counter */
            fprintf(stderr, "server rejected %llu messages, expected 3\n", (unsigned long long)engine_counter(&st, "ps_rejected"));
            fail = 1;
        }
        ps_engine.destroy(&e);
        comm_destroy(&comm);
        return fail;
    }
    void *ctx = NULL;
    uint64_t job = 0;
    void *good = s_raw_worker(comm, &ctx, &job);
    if (!good) return 1;
    ps_lane_t *lane = NULL;
    char name[PS_LANE_NAME_MAX], path[128], text[300] = "";
    wire_hdr_t r;
    if (ps_lane_create(&lane, name) < 0) { ps_test_report("lane", ERR_SYS); return 1; }
    snprintf(path, sizeof path, "/dev/shm%s", name);
    wire_hdr_t h = {.type = WIRE_HELLO, .sender = 0, .job = job, .dtype = DT_F32, .aux = PS_HELLO_LANE, .nframes = 1};
    const void *fr[1] = {name};
    size_t fl[1] = {strlen(name)};
    ps_test_raw_send(good, &h, fr, fl, 1);
    if (ps_test_raw_recv(good, &r, NULL, 0) != WIRE_HELLO || r.aux != PS_HELLO_LANE) { fprintf(stderr, "lane not accepted\n"); fail = 1; }
    if (access(path, F_OK) == 0) { fprintf(stderr, "%s still there after the server mapped it\n", path); fail = 1; }
    /* a slot whose one frame claims 5000 bytes; one whose frame count wraps the checks around (the
     * server adds its routing id's frame: 0xffffffff + 1 and 4 x 0xffffffff overflow 32 bits) */
    uint32_t bad[6] = {24, 1, 0, 0, 5000, 0}, wraps[6] = {23, 0xffffffffu, 0, 0, 3, 0};
    const uint32_t *slots[2] = {bad, wraps};
    for (int k = 0; k < 2 && !fail; k++) {
        ps_lane_send_raw(lane, slots[k], sizeof bad, 1);
        ps_vmsg_t m;
        int got = 0;
        for (int i = 0; i < 5000 && !got && !fail; i++) {
            got = ps_lane_recv(lane, &m, NULL, 0, 0);
            if (!got) usleep(1000);
        }
        if (got == 1 && m.n == 2 && wire_decode(zmq_msg_data(&m.f[0]), zmq_msg_size(&m.f[0]), &r) == 0 && r.type == WIRE_ERROR) {
            snprintf(text, sizeof text, "%.*s", (int)zmq_msg_size(&m.f[1]), (const char *)zmq_msg_data(&m.f[1]));
            if (!strstr(text, "malformed shared-memory lane message")) { fprintf(stderr, "error text: %s\n", text); fail = 1; }
        } else {
            fprintf(stderr, "no ERROR over the lane for malformed slot %d (%d)\n", k, got);
            fail = 1;
        }
        if (got == 1) ps_van_close_msg(&m);
    }
    /* the head jumps past the ring's capacity: the answer comes over ZeroMQ (the lane is gone) */
    ps_lane_send_raw(lane, bad, sizeof bad, 1000);
    text[0] = 0;
    if (ps_test_raw_recv(good, &r, text, sizeof text - 1) != WIRE_ERROR || !strstr(text, "counter jumped")) {
        fprintf(stderr, "no ERROR over ZeroMQ for a jumping counter (%s)\n", text);
        fail = 1;
    }
    ps_lane_destroy(&lane);
    zmq_close(good);
    zmq_ctx_term(ctx);
    comm_destroy(&comm);
    return fail;
}

Test(ps_server, rejects_malformed_lane, .timeout = 40)
{
    cr_assert_eq(run_ranks(2, s_lane_rank, NULL, 30000), 0);
}

/* ---------- a dead worker ---------- */

#define DEAD_N 500 /* parameters of the dead-worker tests */

/* A worker of t: its engine in *e, attached to p (DEAD_N parameters) and two good steps taken with g;
 * 0 or the error. */
static int s_dead_worker(comm_t *comm, const ps_topo_t *t, int world, int rank, float *p, float *g, engine_t **e)
{
    param_set_t ps = ps_test_sgd_params(p, DEAD_N);
    int rc = ps_test_worker(e, comm, t, world, &ps);
    for (uint64_t s = 0; s < 2 && rc == 0; s++) rc = ps_test_plain_step(*e, g, DEAD_N, s, rank);
    return rc;
}

static int s_dead_rank(int rank, int world, void *arg)
{
    ps_topo_t *t = arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, t->timeout_ms) < 0) return 1;
    if (rank >= t->nworkers) {
        engine_t *e = NULL;
        int rc = s_serve_one(comm, t, &e);
        int ok = rc == ERR_PEER && strstr(err_detail(), "worker rank 2");
        if (!ok) fprintf(stderr, "server: rc %d (%s), expected a failure naming rank 2\n", rc, err_detail());
        ps_engine.destroy(&e);
        comm_destroy(&comm);
        return ok ? 0 : 1;
    }
    size_t n = DEAD_N;
    float p[DEAD_N], g[DEAD_N];
    engine_t *e = NULL;
    int rc = s_dead_worker(comm, t, world, rank, p, g, &e);
    if (rc < 0) return 1;
    /* colocated, rank 2 also serves: it must not die before every worker has its replies of step 1
     * (a barrier of the workers only: dedicated servers are serving meanwhile) */
    int one = 1, all[16];
    if (t->nworkers > 16 || comm_allgather_group(comm, &one, sizeof one, all, t->nworkers, t->timeout_ms * 3) < 0) return 1;
    if (rank == 2) _exit(0);   /* dies: no BYE, no destroy */
    rc = ps_test_plain_step(e, g, n, 2, rank);
    /* a colocated rank 2 is a worker and a server: whichever role is noticed first is named */
    int ok = rc < 0 && (strstr(ps_test_last_detail, "worker rank 2") || strstr(ps_test_last_detail, "(rank 2)"));
    if (!ok) fprintf(stderr, "worker %d: rc %d (%s), expected a failure naming rank 2\n", rank, rc, ps_test_last_detail);
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    return ok ? 0 : 1;
}

/* async: the servers drop a dead worker and carry on with the others */
static int s_dead_async_rank(int rank, int world, void *arg)
{
    ps_topo_t *t = arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, t->timeout_ms) < 0) return 1;
    if (rank >= t->nworkers) return ps_test_server_rank(&comm, t, 0);
    size_t n = DEAD_N;
    float p[DEAD_N], g[DEAD_N];
    engine_t *e = NULL;
    int rc = s_dead_worker(comm, t, world, rank, p, g, &e);
    if (rc < 0) return 1;
    if (rank == 2) _exit(0);
    for (uint64_t s = 2; s < 8 && rc == 0; s++) {
        usleep(100000);
        rc = ps_test_plain_step(e, g, n, s, rank);
    }
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    return rc < 0;
}

/* A worker that joins the job but never says anything to the server (its engine failed before its first
 * message): nobody waits on it and nobody said BYE, yet the dedicated server stops after two timeouts,
 * saying why, instead of serving forever. */
static int s_silent_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank == 1) {
        ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC, .timeout_ms = 400};
        engine_t *e = NULL;
        uint64_t t0 = now_ns();
        int rc = s_serve_one(comm, &t, &e);
        double ms = (double)(now_ns() - t0) / 1e6;
        const char *d = err_detail();
        if (rc != ERR_TIMEOUT || !strstr(d, "no worker has been heard from")) {
            fprintf(stderr, "server: %d (%s), expected it to give up on its silent worker\n", rc, d);
            fail = 1;
        }
        if (ms > 5000) { fprintf(stderr, "server took %.0f ms to give up (timeout 400 ms)\n", ms); fail = 1; }
        err_clear();
        ps_engine.destroy(&e);
        comm_barrier(comm, PS_TEST_TO);
    } else {
        comm_barrier(comm, PS_TEST_TO); /* alive, but silent to the server until it gave up */
    }
    comm_destroy(&comm);
    return fail;
}

Test(ps_failure, server_gives_up_on_silent_workers, .timeout = 40)
{
    cr_assert_eq(run_ranks(2, s_silent_rank, NULL, 30000), 0);
}

Test(ps_failure, dead_worker_async_carries_on, .timeout = 40)
{
    ps_topo_t t = {.nworkers = 3, .mode = PS_ASYNC, .timeout_ms = 2000, .part_bytes = 512};
    cr_assert_eq(run_ranks(5, s_dead_async_rank, &t, 30000), 0);
}

Test(ps_failure, dead_worker_sync_dedicated, .timeout = 40)
{
    ps_topo_t t = {.nworkers = 3, .mode = PS_SYNC, .timeout_ms = 3000, .part_bytes = 512};
    cr_assert_eq(run_ranks(4, s_dead_rank, &t, 30000), 0);
}

Test(ps_failure, dead_worker_sync_colocated, .timeout = 40)
{
    ps_topo_t t = {.nworkers = 3, .colocate = 1, .mode = PS_SYNC, .timeout_ms = 3000, .part_bytes = 512};
    cr_assert_eq(run_ranks(3, s_dead_rank, &t, 30000), 0);
}
