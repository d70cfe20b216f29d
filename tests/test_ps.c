/* test_ps.c: the parameter-server engine on forked ranks: the partition layout; allreduce (push +
 * pull) with S = 1, 2, 3 dedicated servers and partition sizes that do not divide the buffers
 * (f32/f16/bf16, sum/avg, in and out of place); pushes by descriptor folded in chunks (3 workers,
 * partitions of several chunks); colocated servers; sync PS against the local
 * optimizer reference and against the ring engine over 50 steps (bit-exact for 2 workers, f32 and
 * f16 with loss scaling and a skipped overflow step); async convergence; ssp:K blocking exactly when
 * a worker is more than K clocks ahead; pipelining (a pull answered before the worker's last push of
 * the round, allreduce and async); waiting by polling and yielding (and when that is the default).
 * Malformed messages and dead workers: test_ps_failure.c. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>
#include "core/boot.h"
#include "core/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "core/optim.h"
#include "ps/wire.h"
#include "ps/ps.h"
#include "core/cma.h"
#include <signal.h>
#include <sys/wait.h>
#include "ps/ps_proto.h"
#include "ps/ps_server.h"
#include "ring/ring.h"
#include "tests/lib/ranks.h"
#include "tests/lib/ps_ranks.h"

#define TO PS_TEST_TO

/* ---------- layout ---------- */

Test(ps_layout, balanced_and_covering)
{
    size_t totals[] = {1, 2, 7, 250, 251, 1000, 1000003};
    for (int S = 1; S <= 4; S++)
        for (size_t i = 0; i < sizeof totals / sizeof *totals; i++) {
            ps_layout_t l;
            ps_layout_init(&l, totals[i], 4, 1000, S);
            size_t next = 0, bytes[4] = {0};
            for (size_t k = 0; k < l.nparts; k++) {
                cr_assert_eq(ps_part_start(&l, k), next);
                size_t n = ps_part_len(&l, k);
                cr_assert(n > 0 && n <= l.part_elems);
                next += n;
                int o = ps_part_owner(&l, k);
                cr_assert(o >= 0 && o < S);
                bytes[o] += n * 4;
            }
            cr_assert_eq(next, totals[i], "S=%d total=%zu: partitions cover %zu", S, totals[i], next);
            size_t mx = 0, mn = SIZE_MAX;
            for (int s = 0; s < S; s++) {
                if (bytes[s] > mx) mx = bytes[s];
                if (bytes[s] < mn) mn = bytes[s];
            }
            /* bytes balanced to within one partition, and small tensors still spread over servers */
            cr_assert(mx - mn <= l.part_elems * 4, "S=%d total=%zu: imbalance %zu", S, totals[i], mx - mn);
            if (totals[i] >= (size_t)S) cr_assert(mn > 0, "S=%d total=%zu: an idle server", S, totals[i]);
        }
    ps_layout_t l;
    ps_layout_init(&l, 1000, 4, 1000, 2);
    size_t k0, k1;
    ps_part_range(&l, 240, 20, &k0, &k1);
    cr_assert(k0 == 0 && k1 == 2);
}

/* ---------- allreduce ---------- */

static float s_val(int rank, size_t i) { return (float)((int)((i * 7 + (size_t)rank * 3) % 17) - 8) * (float)(rank + 1); }

static int s_ar_check(engine_t *e, int W, size_t count, dtype_t dt, redop_t op, int inplace)
{
    size_t esz = dt_size(dt);
    float *ref = malloc(count * sizeof(float)), *tmp = malloc(count * sizeof(float));
    void *send = malloc(count * esz), *recv = malloc(count * esz);
    int rank = atoi(getenv("RANK")), bad = 0;
    for (size_t i = 0; i < count; i++) {
        tmp[i] = s_val(rank, i);
        float s = 0;
        for (int w = 0; w < W; w++) s += s_val(w, i);
        ref[i] = op == OP_AVG ? s / (float)W : s;
    }
    dt_convert(send, dt, tmp, DT_F32, count);
    memset(recv, 0xff, count * esz);
    int rc = ps_engine.allreduce(e, send, inplace ? send : recv, count, dt, op, PS_TEST_TO);
    if (rc < 0) {
        ps_test_report("allreduce", rc);
        bad = 1;
    } else {
        dt_convert(tmp, DT_F32, inplace ? send : recv, dt, count);
        for (size_t i = 0; i < count && !bad; i++) {
            float tol = op == OP_AVG ? (dt == DT_BF16 ? 0.07f : 0.02f) : 0.0f;
            if (fabsf(tmp[i] - ref[i]) > tol) {
                fprintf(stderr, "allreduce %s %s n=%zu: [%zu] = %g, expected %g\n", dt_name(dt), op_name(op), count, i,
                        tmp[i], ref[i]);
                bad = 1;
            }
        }
    }
    free(ref); free(tmp); free(send); free(recv);
    return bad;
}

/* A rank of an allreduce test: serve, or check allreduces of each of counts (every dtype, sum and avg),
 * the traffic, the van and op move. */
static int s_ar_run(int rank, int world, const ps_topo_t *t, const size_t *counts, size_t ncounts)
{
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank >= t->nworkers) {
        fail = ps_test_serve(comm, t, 0);
    } else {
        ps_opts_t po;
        engine_cfg_t cfg = ps_test_cfg(t, world, &po);
        engine_t *e = NULL;
        int rc = ps_engine.create(&e, comm, &cfg);
        if (rc < 0) { ps_test_report("create", rc); comm_destroy(&comm); return 1; }
        for (size_t c = 0; c < ncounts && !fail; c++)
            for (int dt = 0; dt < DT_COUNT && !fail; dt++)
                for (int op = 0; op < 2 && !fail; op++)
                    fail |= s_ar_check(e, t->nworkers, counts[c], (dtype_t)dt, (redop_t)op, (int)(c + dt + op) % 2);
        engine_stats_t st;
        ps_engine.stats(e, &st);
        if (st.bytes_sent == 0 || st.bytes_received == 0 || !st.impl) { fprintf(stderr, "no traffic counted\n"); fail = 1; }
        /* the van the worker says it used is the one asked for */
        const char *want = t->van == PS_VAN_TCP ? "zmq-tcp" : t->van == PS_VAN_IPC ? "zmq-ipc"
                           : t->van == PS_VAN_CMA ? (t->lane == PS_LANE_OFF ? "zmq-ipc+cma" : "shm-lane+cma") : NULL;
        if (!t->colocate && want && (!st.transport || strcmp(st.transport, want))) {
            fprintf(stderr, "transport %s, expected %s\n", st.transport ? st.transport : "(none)", want);
            fail = 1;
        }
        /* op move (the ceiling) moves the bytes a sum moves, through the same van */
        if (!fail && !t->colocate) {
            size_t n = 5000;
            float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
            engine_stats_t s0, s1, s2;
            ps_engine.stats(e, &s0);
            int rc1 = ps_engine.allreduce(e, a, b, n, DT_F32, OP_SUM, PS_TEST_TO);
            ps_engine.stats(e, &s1);
            int rc2 = ps_engine.allreduce(e, a, b, n, DT_F32, OP_MOVE, PS_TEST_TO);
            ps_engine.stats(e, &s2);
            uint64_t dsum = s1.bytes_received - s0.bytes_received, dmove = s2.bytes_received - s1.bytes_received;
            if (rc1 < 0 || rc2 < 0 || dsum < n * sizeof(float) || dmove != dsum) {
                fprintf(stderr, "op move: rc %d/%d, received %llu bytes against a sum's %llu\n", rc1, rc2,
                        (unsigned long long)dmove, (unsigned long long)dsum);
                fail = 1;
            }
            free(a);
            free(b);
        }
        if (engine_counter(&st, "ps_rejected")) { fprintf(stderr, "worker rejected %llu replies\n", (unsigned long long)engine_counter(&st, "ps_rejected")); fail = 1; }
        /* a server rank refuses worker calls, a worker refuses serve */
        if (ps_engine.serve(e) != ERR_STATE) fail = 1;
        ps_engine.destroy(&e);
        ps_engine.destroy(&e);
    }
    comm_destroy(&comm);
    return fail;
}

static int s_ar_rank(int rank, int world, void *arg)
{
    static const size_t counts[] = {1, 7, 1000, 4099, 100003, 1000};
    return s_ar_run(rank, world, arg, counts, sizeof counts / sizeof *counts);
}

Test(ps_allreduce, one_server, .timeout = 60)
{
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1000};
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
}

/* the same over each van: tcp (loopback), ipc (Unix socket), ipc + cross-memory reads */
Test(ps_allreduce, one_server_tcp, .timeout = 60)
{
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1000, .van = PS_VAN_TCP};
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
}

Test(ps_allreduce, one_server_ipc, .timeout = 60)
{
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1000, .van = PS_VAN_IPC};
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
}

/* Can one process read a sibling's memory here (as a worker reads its server)? Yama's ptrace_scope 1
 * or a container's seccomp policy forbid it. */
static int s_cma_between_siblings(const char **why)
{
    uint64_t addr = cma_cookie_addr(), val = cma_cookie_value(); /* the same in both children (fork) */
    pid_t a = fork();
    if (a == 0) { pause(); _exit(0); }
    pid_t b = fork();
    if (b == 0) {
        const char *w = "";
        usleep(20000);
        _exit(cma_probe(a, addr, val, &w) ? 0 : 1);
    }
    int st = 1;
    waitpid(b, &st, 0);
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    *why = "process_vm_readv between sibling processes is not permitted here (Yama ptrace_scope or seccomp)";
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

Test(ps_allreduce, one_server_cma, .timeout = 60)
{
    const char *why = "";
    if (!s_cma_between_siblings(&why)) cr_skip_test("%s", why);
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1000, .van = PS_VAN_CMA};
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
}

/* Pushes by descriptor folded chunk by chunk (ps/ps_server_fold.c): partitions of 1 MiB (four 256 KiB
 * read chunks; f16/bf16 ones too) and a tail partition shorter than a chunk. With 3 workers every round
 * has a first push (read into the sum), a middle one (accumulated per chunk) and a last one (added into
 * the reply per chunk); integer inputs make the sums exact in any arrival order. */
static int s_fold_rank(int rank, int world, void *arg)
{
    static const size_t counts[] = {600017, 262144 + 65536};
    return s_ar_run(rank, world, arg, counts, sizeof counts / sizeof *counts);
}

Test(ps_allreduce, three_workers_cma_chunked_fold, .timeout = 90)
{
    const char *why = "";
    if (!s_cma_between_siblings(&why)) cr_skip_test("%s", why);
    ps_topo_t t = {.nworkers = 3, .part_bytes = 1 << 20, .van = PS_VAN_CMA};
    cr_assert_eq(run_ranks(4, s_fold_rank, &t, 80000), 0);
}

/* Lane names (/dev/shm/sb-psl-*) present now. */
static int s_lane_names(void)
{
    int n = 0;
    DIR *d = opendir("/dev/shm");
    struct dirent *de;
    while (d && (de = readdir(d))) n += strncmp(de->d_name, "sb-psl-", 7) == 0;
    if (d) closedir(d);
    return n;
}

/* The shared-memory lane (ps_lane.h): the same sums with it forced on (many partitions, so the 128-slot
 * rings fill and messages fall back to ZeroMQ in between, ordered by the lane's rule) and forced off;
 * no name is left behind. */
Test(ps_allreduce, one_server_lane_on_and_off, .timeout = 90)
{
    const char *why = "";
    if (!s_cma_between_siblings(&why)) cr_skip_test("%s", why);
    int before = s_lane_names();
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1000, .van = PS_VAN_CMA, .lane = PS_LANE_ON};
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
    t.lane = PS_LANE_OFF;
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
    cr_expect_eq(s_lane_names(), before, "lane names left in /dev/shm");
}

Test(ps_allreduce, three_workers_two_servers_lane, .timeout = 90)
{
    const char *why = "";
    if (!s_cma_between_siblings(&why)) cr_skip_test("%s", why);
    int before = s_lane_names();
    setenv("SYNCBENCH_PS_YIELD_US", "0", 1); /* the spinning waits and the sleeping-flag wake-ups */
    ps_topo_t t = {.nworkers = 3, .part_bytes = 4096, .van = PS_VAN_CMA, .lane = PS_LANE_ON};
    int rc = run_ranks(5, s_ar_rank, &t, 50000);
    unsetenv("SYNCBENCH_PS_YIELD_US");
    cr_assert_eq(rc, 0);
    cr_expect_eq(s_lane_names(), before, "lane names left in /dev/shm");
}

/* --ps-lane on where the lane cannot be (no cross-memory reads: --ps-van ipc): create refuses, clearly */
static int s_lane_refused_rank(int rank, int world, void *arg)
{
    (void)rank;
    ps_topo_t *t = arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    {
        ps_opts_t po;
        engine_cfg_t cfg = ps_test_cfg(t, world, &po);
        engine_t *e = NULL;
        int rc = ps_engine.create(&e, comm, &cfg);
        const char *d = err_detail();
        if (rc != ERR_UNSUP || e || !strstr(d, "--ps-lane on")) {
            fprintf(stderr, "create: %d (%s), expected ERR_UNSUP naming --ps-lane on\n", rc, d);
            fail = 1;
        }
        err_clear();
        ps_engine.destroy(&e);
    }
    comm_destroy(&comm);
    return fail;
}

Test(ps_allreduce, lane_on_without_cma_refused, .timeout = 60)
{
    /* colocated: a server that never hears from a worker that failed at once stops after the timeout */
    ps_topo_t t = {.nworkers = 2, .colocate = 1, .part_bytes = 1000, .van = PS_VAN_IPC, .lane = PS_LANE_ON,
                   .timeout_ms = 2000};
    cr_assert_eq(run_ranks(2, s_lane_refused_rank, &t, 50000), 0);
}

/* waiting by polling and yielding the core (an oversubscribed host's default) gives the same sums */
Test(ps_allreduce, two_servers_yielding, .timeout = 60)
{
    setenv("SYNCBENCH_PS_YIELD_US", "500", 1);
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1000};
    int rc = run_ranks(4, s_ar_rank, &t, 50000);
    unsetenv("SYNCBENCH_PS_YIELD_US");
    cr_assert_eq(rc, 0);
}

/* the policy: yield only with every rank on this host and more ranks than cores; the variable wins */
Test(ps_yield, policy)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_gt(ncpu, 0);
    unsetenv("SYNCBENCH_PS_YIELD_US");
    comm_t c = {.world = (int)ncpu + 1, .local_world = (int)ncpu + 1, .nnodes = 1};
    cr_expect_eq(ps_yield_us(&c), 200, "oversubscribed host");
    c.local_world = (int)ncpu;
    c.world = (int)ncpu;
    cr_expect_eq(ps_yield_us(&c), 0, "a core per rank");
    c.local_world = (int)ncpu + 1;
    c.world = 2 * ((int)ncpu + 1);
    c.nnodes = 2;
    cr_expect_eq(ps_yield_us(&c), 0, "ranks on other machines");
    setenv("SYNCBENCH_PS_YIELD_US", "50", 1);
    cr_expect_eq(ps_yield_us(&c), 50);
    setenv("SYNCBENCH_PS_YIELD_US", "-3", 1);
    cr_expect_eq(ps_yield_us(&c), 0);
    unsetenv("SYNCBENCH_PS_YIELD_US");
}

Test(ps_allreduce, two_servers, .timeout = 60)
{
    ps_topo_t t = {.nworkers = 3, .part_bytes = 1000};
    cr_assert_eq(run_ranks(5, s_ar_rank, &t, 50000), 0);
}

Test(ps_allreduce, three_servers_odd_partitions, .timeout = 60)
{
    ps_topo_t t = {.nworkers = 2, .part_bytes = 1234};
    cr_assert_eq(run_ranks(5, s_ar_rank, &t, 50000), 0);
}

Test(ps_allreduce, colocated, .timeout = 60)
{
    ps_topo_t t = {.nworkers = 3, .colocate = 1, .part_bytes = 3000};
    cr_assert_eq(run_ranks(3, s_ar_rank, &t, 50000), 0);
}

/* Pipelining: a pull is answered before the worker's last push of the round was sent. Two workers,
 * one dedicated server, many partitions; worker 1 starts late, so every message of worker 0 is already
 * at the server and the server meets worker 1's messages one by one, in the order it sent them. With
 * a pull right behind each partition's push, partition 0 completes (and both workers get its reply)
 * while worker 1's pushes of partitions 1.. are still to come: worker 1 gets >= nparts-1 replies
 * early. (Pulls sent only after all pushes, the old scheme, give 0.) allreduce = the bench path;
 * async training = submit() sends a partition's commit-pull as soon as its pushes are out. */
typedef struct {
    ps_topo_t t;
    int train;               /* 0: allreduce; 1: async submit/wait with one bucket per partition */
} pipe_t;

#define PIPE_N 16384         /* elements; part_bytes 4096: 16 partitions of 1024 f32 */

static int s_pipe_rank(int rank, int world, void *arg)
{
    pipe_t *a = arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(&a->t, world, &po);
    engine_t *e = NULL;
    int fail = 0, rc = ps_engine.create(&e, comm, &cfg);
    if (rc < 0) { ps_test_report("create", rc); comm_destroy(&comm); return 1; }
    size_t n = PIPE_N, nparts = n * 4 / a->t.part_bytes;
    if (rank >= a->t.nworkers) {
        rc = ps_engine.serve(e);
        if (rc < 0) { ps_test_report("serve", rc); fail = 1; }
        uint64_t early = 0;
        rc = ps_server_counters(e, &early);
        if (rc < 0 || early < nparts - 1) {
            fprintf(stderr, "server: %llu replies before the worker's last push, expected >= %zu\n",
                    (unsigned long long)early, nparts - 1);
            fail = 1;
        }
        engine_stats_t st;
        ps_engine.stats(e, &st);
        if (engine_counter(&st, "ps_rejected")) { fprintf(stderr, "server rejected %llu\n", (unsigned long long)engine_counter(&st, "ps_rejected")); fail = 1; }
    } else {
        uint64_t early = 0;
        if (ps_server_counters(e, &early) != ERR_STATE) { fprintf(stderr, "a worker has server counters\n"); fail = 1; }
        float *p = calloc(n, sizeof(float)), *g = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) g[i] = s_val(rank, i);
        param_set_t ps = {.params = p, .count = n, .grad_dtype = DT_F32};
        optim_cfg_default(&ps.optim, OPT_SGD);
        ps.optim.momentum = 0;
        ps.optim.lr = 1.0f;
        if (a->train && (rc = ps_engine.attach(e, &ps)) < 0) { ps_test_report("attach", rc); fail = 1; }
        if (!fail && rank == 1) usleep(300000);   /* worker 0's whole round is at the server first */
        if (!fail && !a->train) {
            rc = ps_engine.allreduce(e, g, r, n, DT_F32, OP_SUM, PS_TEST_TO);
            if (rc < 0) { ps_test_report("allreduce", rc); fail = 1; }
            for (size_t i = 0; i < n && !fail; i++)
                if (r[i] != s_val(0, i) + s_val(1, i)) { fprintf(stderr, "allreduce [%zu] = %g\n", i, r[i]); fail = 1; }
        } else if (!fail) {
            step_ctx_t sc = {.step = 1, .inv_scale = 1.0f, .lr = 1.0f};
            rc = ps_engine.step_begin(e, &sc);
            size_t per = a->t.part_bytes / 4;
            for (size_t k = nparts; k-- > 0 && rc == 0;) {   /* last layer first, one partition per bucket */
                bucket_t b = {.grad = g + k * per, .offset = k * per, .count = per};
                rc = ps_engine.submit(e, &b);
            }
            step_out_t so;
            if (rc == 0) rc = ps_engine.wait(e, &so, PS_TEST_TO);
            if (rc < 0) { ps_test_report("step", rc); fail = 1; }
            /* async: each push applied alone, -lr/N * g; the pull saw at least this worker's own update;
             * sync: exactly the average of both */
            for (size_t i = 0; i < n && !fail; i++) {
                float own = -g[i] / 2, both = own - s_val(1 - rank, i) / 2;
                int sync = a->t.mode == PS_SYNC;
                if ((sync || p[i] != own) && p[i] != both && (sync || fabsf(p[i] - both) > 1e-5f)) {
                    fprintf(stderr, "rank %d: param [%zu] = %g (own %g, both %g)\n", rank, i, p[i], own, both);
                    fail = 1;
                }
            }
        }
        free(p); free(g); free(r);
    }
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    return fail;
}

Test(ps_pipeline, allreduce_pull_answered_before_last_push, .timeout = 60)
{
    pipe_t a = {.t = {.nworkers = 2, .mode = PS_SYNC, .part_bytes = 4096}, .train = 0};
    cr_assert_eq(run_ranks(3, s_pipe_rank, &a, 50000), 0);
}

/* sync with f32 gradients and no loss scaling: each partition commits with its last push, so its update
 * and reply overlap the step's other pushes as in async mode (the result is still the sync average) */
Test(ps_pipeline, sync_f32_pull_answered_before_last_push, .timeout = 60)
{
    pipe_t a = {.t = {.nworkers = 2, .mode = PS_SYNC, .part_bytes = 4096}, .train = 1};
    cr_assert_eq(run_ranks(3, s_pipe_rank, &a, 50000), 0);
}

Test(ps_pipeline, async_pull_answered_before_last_push, .timeout = 60)
{
    pipe_t a = {.t = {.nworkers = 2, .mode = PS_ASYNC, .part_bytes = 4096}, .train = 1};
    cr_assert_eq(run_ranks(3, s_pipe_rank, &a, 50000), 0);
}

Test(ps_allreduce, bad_config)
{
    comm_t fake = {.rank = 0, .world = 2, .timeout_ms = 1000};
    engine_t *e = NULL;
    ps_opts_t po = {.servers = 1, .mode = PS_SYNC};
    engine_cfg_t c = {.device = -1, .nworkers = 2, .opts = &po};
    cr_assert_lt(ps_engine.create(&e, &fake, &c), 0, "servers asked for but no server ranks: refused");
    c.nworkers = 3;
    cr_assert_lt(ps_engine.create(&e, &fake, &c), 0, "more workers than ranks: refused");
    c.nworkers = 2;
    po.servers = 0;
    po.mode = PS_SSP;
    po.ssp_k = -1;
    cr_assert_lt(ps_engine.create(&e, &fake, &c), 0, "negative staleness bound: refused");
    po.mode = 7;
    cr_assert_lt(ps_engine.create(&e, &fake, &c), 0);
    cr_assert_null(e);
}

/* ---------- training: a fixed quadratic ---------- */

/* Gradient of worker w at step t for parameters p: a_i (p_i - c_{w,i}) + a small step-dependent term. */
static void s_grad(float *g, const float *p, size_t n, int w, int t)
{
    for (size_t i = 0; i < n; i++) {
        float a = 0.5f + (float)(i % 5) * 0.25f;
        float c = (float)((int)(i % 11) - 5) * 0.1f + (float)w * 0.01f;
        g[i] = a * (p[i] - c) + 0.001f * (float)(((int)i + t * 3 + w) % 7 - 3);
    }
}


typedef struct {
    ps_topo_t t;
    size_t n;
    int steps;
    dtype_t gdt;
    optim_kind_t opt;
    int overflow_step;        /* step at which worker 1 submits an Inf (-1: none) */
    float inv_scale;
    int vs_ring;              /* also run the ring engine and compare bitwise */
} train_t;

/* Run `steps` steps of engine ops on params; buckets of uneven sizes, last layer first. */
static int s_train(const engine_ops_t *ops, engine_t *e, float *params, const train_t *a, int rank, float *loss_out)
{
    size_t n = a->n, esz = dt_size(a->gdt);
    float *g = malloc(n * sizeof(float));
    void *gh = malloc(n * esz);
    int fail = 0;
    uint64_t applied = 0; /* as the trainer does: Adam's t counts the steps actually applied */
    for (int t = 0; t < a->steps && !fail; t++) {
        step_ctx_t ctx = {.step = applied + 1, .inv_scale = a->inv_scale, .lr = a->opt == OPT_ADAM ? 0.01f : 0.1f};
        s_grad(g, params, n, rank, t);
        /* AMP: the trainer's gradients are loss-scaled */
        for (size_t i = 0; i < n; i++) g[i] /= a->inv_scale;
        if (t == a->overflow_step && rank == 1) g[n / 2] = INFINITY;
        dt_convert(gh, a->gdt, g, DT_F32, n);
        int rc = ops->step_begin(e, &ctx);
        size_t cuts[] = {n, n * 2 / 3, n / 3 + 1, n / 7, 0};
        for (int b = 0; b < 4 && rc == 0; b++) {
            bucket_t bk = {.grad = (char *)gh + cuts[b + 1] * esz, .offset = cuts[b + 1], .count = cuts[b] - cuts[b + 1],
                           .index = b};
            rc = ops->submit(e, &bk);
        }
        step_out_t out = {0};
        float before = params[0];
        if (rc == 0) rc = ops->wait(e, &out, PS_TEST_TO);
        if (rc < 0) { ps_test_report("train step", rc); fail = 1; break; }
        if ((t == a->overflow_step) != (out.skipped != 0)) {
            fprintf(stderr, "step %d: skipped=%d\n", t, out.skipped);
            fail = 1;
        }
        if (out.skipped && params[0] != before) { fprintf(stderr, "skipped step changed params\n"); fail = 1; }
        if (!out.skipped) applied++;
    }
    if (loss_out) {
        s_grad(g, params, n, 0, 0);
        double l = 0;
        for (size_t i = 0; i < n; i++) l += (double)g[i] * g[i];
        *loss_out = (float)l;
    }
    free(g); free(gh);
    return fail;
}

/* Local reference: the average of every worker's gradient, the shared optimizer, the same skips. */
static void s_reference(float *p, const train_t *a, int W)
{
    size_t n = a->n, esz = dt_size(a->gdt);
    optim_cfg_t oc;
    optim_cfg_default(&oc, a->opt);
    optim_t *o = NULL;
    optim_new(&o, &oc, n);
    float *g = malloc(n * sizeof(float)), *acc = malloc(n * sizeof(float));
    void *gh = malloc(n * esz);
    uint64_t applied = 0;
    for (int t = 0; t < a->steps; t++) {
        memset(acc, 0, n * sizeof(float));
        for (int w = 0; w < W; w++) {
            s_grad(g, p, n, w, t);
            for (size_t i = 0; i < n; i++) g[i] /= a->inv_scale;
            dt_convert(gh, a->gdt, g, DT_F32, n);
            dt_convert(g, DT_F32, gh, a->gdt, n);
            for (size_t i = 0; i < n; i++) acc[i] += g[i];
        }
        if (t == a->overflow_step) continue;
        dt_scale(acc, n, DT_F32, 1.0f / (float)W);
        dt_convert(gh, a->gdt, acc, DT_F32, n);
        dt_convert(acc, DT_F32, gh, a->gdt, n);
        optim_step(o, p, acc, 0, n, a->inv_scale, a->opt == OPT_ADAM ? 0.01f : 0.1f, ++applied);
    }
    optim_destroy(&o);
    free(g); free(acc); free(gh);
}

static int s_train_rank(int rank, int world, void *arg)
{
    train_t *a = arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank >= a->t.nworkers) return ps_test_server_rank(&comm, &a->t, 0);
    size_t n = a->n;
    float *p = malloc(n * sizeof(float)), *pr = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
    ps_test_init_params(ref, n);
    /* only rank 0's initial values count: the others start from garbage */
    if (rank == 0) ps_test_init_params(p, n);
    else for (size_t i = 0; i < n; i++) p[i] = 1234.5f;
    memcpy(pr, p, n * sizeof(float));
    param_set_t ps = {.params = p, .count = n, .grad_dtype = a->gdt};
    optim_cfg_default(&ps.optim, a->opt);
    engine_t *e = NULL;
    int rc = ps_test_worker(&e, comm, &a->t, world, &ps);
    if (rc < 0) { ps_test_report("create/attach", rc); fail = 1; }
    for (size_t i = 0; i < n && !fail; i++)
        if (p[i] != ref[i]) { fprintf(stderr, "attach: rank 0's values did not arrive\n"); fail = 1; }
    float loss = 0;
    if (!fail) fail = s_train(&ps_engine, e, p, a, rank, &loss);
    engine_stats_t st;
    ps_engine.stats(e, &st);
    if (!fail && a->t.colocate && st.mem_engine_bytes < n * sizeof(float) / (size_t)world) {
        fprintf(stderr, "colocated server memory not reported (%zu)\n", st.mem_engine_bytes);
        fail = 1;
    }
    ps_engine.destroy(&e);
    if (!fail) {
        s_reference(ref, a, a->t.nworkers);
        double maxd = 0;
        int exact = a->t.nworkers == 2;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)p[i] - ref[i]);
            if (d > maxd) maxd = d;
            if (exact && p[i] != ref[i]) {
                fprintf(stderr, "rank %d: PS param %zu = %.9g, reference %.9g (not bit-exact)\n", rank, i, p[i], ref[i]);
                fail = 1;
                break;
            }
        }
        if (maxd > 1e-4) { fprintf(stderr, "rank %d: PS differs from the reference by %g\n", rank, maxd); fail = 1; }
    }
    if (!fail && a->vs_ring) {
        /* the ring engine on the same ranks from the same start: identical parameters (2 workers) */
        engine_t *r = NULL;
        engine_cfg_t rc_cfg = {.device = -1, .timeout_ms = TO};
        param_set_t rps = ps;
        rps.params = pr;
        rc = ring_engine.create(&r, comm, &rc_cfg);
        if (rc == 0) rc = ring_engine.attach(r, &rps);
        if (rc < 0) { ps_test_report("ring", rc); fail = 1; }
        if (!fail) fail = s_train(&ring_engine, r, pr, a, rank, NULL);
        if (r) ring_engine.destroy(&r);
        for (size_t i = 0; i < n && !fail; i++)
            if (pr[i] != p[i] && (a->t.nworkers == 2 || fabsf(pr[i] - p[i]) > 1e-4f)) {
                fprintf(stderr, "rank %d: ring param %zu = %.9g, PS %.9g\n", rank, i, pr[i], p[i]);
                fail = 1;
            }
    }
    free(p); free(pr); free(ref);
    comm_destroy(&comm);
    return fail;
}

Test(ps_sync, equals_reference_and_ring_sgd, .timeout = 90)
{
    train_t a = {.t = {.nworkers = 2, .colocate = 1, .mode = PS_SYNC, .part_bytes = 700}, .n = 3001, .steps = 50,
                 .gdt = DT_F32, .opt = OPT_SGD, .overflow_step = -1, .inv_scale = 1.0f, .vs_ring = 1};
    cr_assert_eq(run_ranks(2, s_train_rank, &a, 80000), 0);
}

Test(ps_sync, equals_reference_and_ring_adam_f16_amp_overflow, .timeout = 90)
{
    train_t a = {.t = {.nworkers = 2, .colocate = 1, .mode = PS_SYNC, .part_bytes = 1000}, .n = 2000, .steps = 50,
                 .gdt = DT_F16, .opt = OPT_ADAM, .overflow_step = 7, .inv_scale = 1.0f / 256.0f, .vs_ring = 1};
    cr_assert_eq(run_ranks(2, s_train_rank, &a, 80000), 0);
}

/* --ps-window: pieces held until their server's window has room, replies taken while submitting. A
 * window of 1 is the tightest (every partition waits for the one before it on its server); the
 * parameters are the reference's and the ring's, bit for bit. */
Test(ps_sync, window_of_one_equals_reference_and_ring, .timeout = 90)
{
    train_t a = {.t = {.nworkers = 2, .colocate = 1, .mode = PS_SYNC, .part_bytes = 700, .window = 1}, .n = 3001,
                 .steps = 30, .gdt = DT_F32, .opt = OPT_SGD, .overflow_step = -1, .inv_scale = 1.0f, .vs_ring = 1};
    cr_assert_eq(run_ranks(2, s_train_rank, &a, 80000), 0);
}

/* the same with dedicated servers, three workers (each partition split across buckets) */
Test(ps_sync, window_three_workers_two_servers, .timeout = 90)
{
    train_t a = {.t = {.nworkers = 3, .mode = PS_SYNC, .part_bytes = 999, .window = 2}, .n = 2500, .steps = 30,
                 .gdt = DT_F32, .opt = OPT_SGD, .overflow_step = -1, .inv_scale = 1.0f};
    cr_assert_eq(run_ranks(5, s_train_rank, &a, 80000), 0);
}

Test(ps_sync, three_workers_two_servers_bf16, .timeout = 90)
{
    train_t a = {.t = {.nworkers = 3, .mode = PS_SYNC, .part_bytes = 999}, .n = 2500, .steps = 50,
                 .gdt = DT_BF16, .opt = OPT_SGD, .overflow_step = 3, .inv_scale = 0.5f};
    cr_assert_eq(run_ranks(5, s_train_rank, &a, 80000), 0);
}

/* dedicated servers, pushes and pulls by descriptor (cross-memory), then over plain ipc: the reference */
Test(ps_sync, dedicated_servers_cma_and_ipc, .timeout = 90)
{
    const char *why = "";
    if (!s_cma_between_siblings(&why)) cr_skip_test("%s", why);
    train_t a = {.t = {.nworkers = 2, .mode = PS_SYNC, .part_bytes = 800, .van = PS_VAN_CMA}, .n = 3001, .steps = 30,
                 .gdt = DT_F32, .opt = OPT_ADAM, .overflow_step = -1, .inv_scale = 1.0f};
    cr_assert_eq(run_ranks(4, s_train_rank, &a, 80000), 0);
    a.t.van = PS_VAN_IPC;
    cr_assert_eq(run_ranks(4, s_train_rank, &a, 80000), 0);
}

/* ---------- async ---------- */

static int s_async_rank(int rank, int world, void *arg)
{
    train_t *a = arg;
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank >= a->t.nworkers) return ps_test_server_rank(&comm, &a->t, 0);
    size_t n = a->n;
    float *p = malloc(n * sizeof(float));
    ps_test_init_params(p, n);
    param_set_t ps = {.params = p, .count = n, .grad_dtype = a->gdt};
    optim_cfg_default(&ps.optim, OPT_SGD);
    ps.optim.momentum = 0;
    engine_t *e = NULL;
    int rc = ps_test_worker(&e, comm, &a->t, world, &ps);
    if (rc < 0) { ps_test_report("create/attach", rc); fail = 1; }
    float *g = malloc(n * sizeof(float));
    s_grad(g, p, n, 0, 0);
    double l0 = 0, l1 = 0;
    for (size_t i = 0; i < n; i++) l0 += (double)g[i] * g[i];
    float loss = 0;
    if (!fail) fail = s_train(&ps_engine, e, p, a, rank, &loss);
    l1 = loss;
    if (!fail && !(l1 < l0 * 1e-2)) {
        fprintf(stderr, "rank %d: async did not converge: |g|^2 %g -> %g\n", rank, l0, l1);
        fail = 1;
    }
    ps_engine.destroy(&e);
    free(p); free(g);
    comm_destroy(&comm);
    return fail;
}

Test(ps_async, converges, .timeout = 60)
{
    train_t a = {.t = {.nworkers = 3, .mode = PS_ASYNC, .part_bytes = 400}, .n = 1000, .steps = 60, .gdt = DT_F32,
                 .opt = OPT_SGD, .overflow_step = -1, .inv_scale = 1.0f};
    cr_assert_eq(run_ranks(4, s_async_rank, &a, 50000), 0);
}

Test(ps_async, converges_colocated, .timeout = 60)
{
    train_t a = {.t = {.nworkers = 2, .colocate = 1, .mode = PS_ASYNC, .part_bytes = 400}, .n = 1000, .steps = 60,
                 .gdt = DT_F32, .opt = OPT_SGD, .overflow_step = -1, .inv_scale = 1.0f};
    cr_assert_eq(run_ranks(2, s_async_rank, &a, 50000), 0);
}

/* ---------- ssp ---------- */

typedef struct {
    int k;
    int fds[2];
} ssp_t;


static int s_ssp_rank(int rank, int world, void *arg)
{
    ssp_t *a = arg;
    ps_topo_t t = {.nworkers = 2, .mode = PS_SSP, .ssp_k = a->k, .part_bytes = 256};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    int fail = 0;
    if (rank == 2) return ps_test_server_rank(&comm, &t, 0);
    size_t n = 300;
    float p[300], g[300];
    param_set_t ps = ps_test_sgd_params(p, n);
    engine_t *e = NULL;
    int rc = ps_test_worker(&e, comm, &t, world, &ps);
    if (rc < 0) { ps_test_report("create/attach", rc); return 1; }
    engine_stats_t st;
    int total = a->k + 3;
    if (rank == 0) {
        /* fast worker: K steps ahead of a worker still at clock 0 is allowed... */
        for (int s = 0; s < a->k && !fail; s++) fail |= ps_test_plain_step(e, g, n, (uint64_t)s, rank) < 0;
        ps_engine.stats(e, &st);
        if (engine_counter(&st, "ps_stale_waits") != 0) {
            fprintf(stderr, "fast worker blocked %llu times within K=%d clocks\n", (unsigned long long)engine_counter(&st, "ps_stale_waits"), a->k);
            fail = 1;
        }
        if (write(a->fds[1], "go", 2) != 2) fail = 1;
        /* ...K+1 is not: this step blocks until the slow worker finishes its first step */
        if (!fail) fail |= ps_test_plain_step(e, g, n, (uint64_t)a->k, rank) < 0;
        ps_engine.stats(e, &st);
        if (engine_counter(&st, "ps_stale_waits") != 1) {
            fprintf(stderr, "fast worker at K+1 clocks ahead: %llu stale waits, expected 1\n",
                    (unsigned long long)engine_counter(&st, "ps_stale_waits"));
            fail = 1;
        }
        for (int s = a->k + 1; s < total && !fail; s++) fail |= ps_test_plain_step(e, g, n, (uint64_t)s, rank) < 0;
    } else {
        char b[2];
        if (read(a->fds[0], b, 2) != 2) fail = 1;
        usleep(400000);   /* slow on purpose */
        for (int s = 0; s < total && !fail; s++) {
            if (s) usleep(50000);   /* and stays slow: never ahead of the fast one */
            fail |= ps_test_plain_step(e, g, n, (uint64_t)s, rank) < 0;
        }
        ps_engine.stats(e, &st);
        if (engine_counter(&st, "ps_stale_waits") != 0) {
            fprintf(stderr, "slow worker blocked %llu times\n", (unsigned long long)engine_counter(&st, "ps_stale_waits"));
            fail = 1;
        }
    }
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    return fail;
}

Test(ps_ssp, blocks_exactly_beyond_k, .timeout = 60)
{
    for (int k = 0; k <= 2; k += 2) {
        ssp_t a = {.k = k};
        cr_assert_eq(pipe(a.fds), 0);
        cr_assert_eq(run_ranks(3, s_ssp_rank, &a, 40000), 0, "K=%d", k);
        close(a.fds[0]);
        close(a.fds[1]);
    }
}
