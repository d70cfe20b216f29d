/* test_tp.c: the point-to-point transport itself: byte-exact exchanges over each backend (shm, tcp,
 * zmq) forced through tp_opts_t, backend choice across (fake) hosts, argument and state errors, a
 * dead peer failing fast, and tp_cleanup_job removing leftover shared-memory names. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/comm.h"
#include "core/err.h"
#include "core/timer.h"
#include "core/tp.h"
#include "tests/lib/ranks.h"

#define SLOT ((size_t)64 << 10)
#define BIG (10 * SLOT + 12345) /* more segments than a channel holds in flight */

typedef struct {
    const char *kind;    /* forced backend */
    int die;             /* rank 1 vanishes after the first exchange */
} tp_case_t;

static unsigned char s_byte(int src, int msg, size_t i)
{
    return (unsigned char)((i * 131 + (size_t)src * 7 + (size_t)msg * 31) >> 3);
}

static void s_fill(unsigned char *b, int src, int msg, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = s_byte(src, msg, i);
}

static int s_same(const unsigned char *b, int src, int msg, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != s_byte(src, msg, i)) {
            fprintf(stderr, "rank %d: message %d from %d: byte %zu of %zu is %u, want %u\n", rank, msg, src, i, n,
                    b[i], s_byte(src, msg, i));
            return 0;
        }
    return 1;
}

static int s_fail(int rank, const char *what, int rc)
{
    char b[512];
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, err_trace(rc, b, sizeof b));
    return 1;
}

static int s_bcast(void *ctx, void *buf, size_t len, int root, int timeout_ms)
{
    return comm_bcast_small(ctx, buf, len, root, timeout_ms);
}

static tp_env_t s_env(comm_t *c)
{
    return (tp_env_t){.rank = c->rank, .world = c->world, .local_world = c->local_world, .node_of = c->node_of,
                      .timeout_ms = c->timeout_ms, .job = c->job, .boot = &c->boot, .store = c->store,
                      .bcast = s_bcast, .bcast_ctx = c};
}

/* A communicator, plus (when tp) a second transport over it with opts forced. */
static int s_setup(comm_t **comm, tp_t **tp, const tp_opts_t *opts, int timeout_ms)
{
    boot_cfg_t bc;
    int rc = boot_cfg_init(&bc, "env://", -1, -1, timeout_ms);
    if (rc == 0) rc = comm_new(comm, &bc, NULL);
    if (rc == 0 && tp) {
        tp_env_t env = s_env(*comm);
        rc = tp_new(tp, &env, opts);
    }
    return rc;
}

/* Rank 0 sends message m, rank 1 checks it and answers with its own; rank 0 checks the answer. */
static int s_ping(tp_t *tp, int rank, int m, size_t n, unsigned char *buf, int timeout_ms)
{
    int peer = 1 - rank, rc;
    if (rank == 0) {
        s_fill(buf, 0, m, n);
        if ((rc = tp_send(tp, peer, buf, n, timeout_ms)) < 0) return rc;
        memset(buf, 0, n);
        if ((rc = tp_recv(tp, peer, buf, n, timeout_ms)) < 0) return rc;
        return s_same(buf, 1, m, n, rank) ? 0 : ERR_MISMATCH;
    }
    memset(buf, 0, n);
    if ((rc = tp_recv(tp, peer, buf, n, timeout_ms)) < 0) return rc;
    if (!s_same(buf, 0, m, n, rank)) return ERR_MISMATCH;
    s_fill(buf, 1, m, n);
    return tp_send(tp, peer, buf, n, timeout_ms);
}

/* In place: each side commits three segments before receiving the other's three. */
static int s_in_place(tp_t *tp, int rank, uint64_t *bytes)
{
    int peer = 1 - rank;
    size_t lens[3] = {SLOT, 100, 0};
    for (int i = 0; i < 3; i++) {
        void *slot;
        CHECK(tp_send_acquire(tp, peer, &slot, 10000));
        s_fill(slot, rank, 100 + i, lens[i]);
        CHECK(tp_send_commit(tp, peer, lens[i]));
        *bytes += lens[i];
    }
    for (int i = 0; i < 3; i++) {
        const void *seg;
        size_t n;
        CHECK(tp_recv_acquire(tp, peer, &seg, &n, 10000));
        if (n != lens[i] || !s_same(seg, peer, 100 + i, n, rank) || (n && ((uintptr_t)seg & 63)))
            return err_set(ERR_MISMATCH, "segment %d: %zu bytes at %p, want %zu aligned", i, n, seg, lens[i]);
        CHECK(tp_recv_release(tp, peer));
    }
    return 0;
}

static int s_exchange_rank(int rank, int world, void *arg)
{
    (void)world;
    tp_case_t *c = arg;
    comm_t *comm = NULL;
    tp_t *tp = NULL;
    tp_opts_t o = {.kind = c->kind, .slot_bytes = SLOT, .slots = 4};
    int rc = s_setup(&comm, &tp, &o, c->die ? 6000 : 20000), peer = 1 - rank;
    if (rc < 0) return s_fail(rank, "setup", rc);
    if (strcmp(tp_kind(tp, peer), c->kind) || strcmp(tp_kind(tp, rank), "self") || tp_slot_bytes(tp, peer) != SLOT) {
        fprintf(stderr, "rank %d: backend %s (self %s), slot %zu\n", rank, tp_kind(tp, peer), tp_kind(tp, rank),
                tp_slot_bytes(tp, peer));
        return 1;
    }
    unsigned char *buf = malloc(BIG);
    size_t sizes[] = {0, 1, SLOT - 1, SLOT, SLOT + 1, 3 * SLOT, BIG};
    uint64_t bytes = 0;
    for (int m = 0; m < (int)(sizeof sizes / sizeof sizes[0]); m++) {
        if ((rc = s_ping(tp, rank, m, sizes[m], buf, 10000)) < 0) { free(buf); return s_fail(rank, "exchange", rc); }
        bytes += sizes[m];
        if (c->die) {
            /* meet first: a zmq send may still be queued in this process */
            if ((rc = comm_barrier(comm, 10000)) < 0) { free(buf); return s_fail(rank, "barrier", rc); }
            if (rank == 1) _exit(0); /* vanish without a word, channels open */
            break;
        }
    }
    free(buf);
    if (c->die) {
        /* rank 0: the next receive must fail with an error naming the peer, well before the test's end */
        char one;
        uint64_t t0 = now_ns();
        rc = tp_recv(tp, peer, &one, 1, 2000);
        double s = (double)(now_ns() - t0) / 1e9;
        tp_destroy(&tp);
        if ((rc != ERR_PEER && rc != ERR_TIMEOUT) || s > 4) {
            fprintf(stderr, "rank 0: receive from a dead peer gave %d after %.1f s\n", rc, s);
            return 1;
        }
        return 0; /* no comm_destroy: its barrier would wait for the dead rank */
    }
    if ((rc = s_in_place(tp, rank, &bytes)) < 0) return s_fail(rank, "in place", rc);
    uint64_t sent, received;
    tp_counters(tp, &sent, &received);
    if (sent != bytes || received != bytes) {
        fprintf(stderr, "rank %d: counters %llu sent, %llu received, want %llu\n", rank, (unsigned long long)sent,
                (unsigned long long)received, (unsigned long long)bytes);
        return 1;
    }
    /* channels open lazily: a rank must not drop its side before the peer has drained it (what
     * comm_destroy does for its own transport) */
    if ((rc = comm_barrier(comm, 10000)) < 0) return s_fail(rank, "barrier", rc);
    tp_destroy(&tp);
    tp_destroy(&tp); /* safe twice */
    comm_destroy(&comm);
    return 0;
}

#define TP_BACKEND_TEST(K)                                                              \
    Test(tp_backend, K##_exchange, .timeout = 60) {                                     \
        tp_case_t c = {#K, 0};                                                          \
        cr_assert_eq(run_ranks(2, s_exchange_rank, &c, 50000), 0, "backend %s", #K);   \
    }                                                                                   \
    Test(tp_backend, K##_dead_peer_fails_fast, .timeout = 60) {                         \
        tp_case_t c = {#K, 1};                                                          \
        cr_assert_eq(run_ranks(2, s_exchange_rank, &c, 50000), 0, "backend %s", #K);   \
    }
TP_BACKEND_TEST(shm)
TP_BACKEND_TEST(tcp)
TP_BACKEND_TEST(zmq)

/* Ranks on different (fake) hosts: "auto" picks tcp, and forcing shm is refused. */
static int s_hosts_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    setenv("SYNCBENCH_FAKE_HOST", rank ? "b" : "a", 1);
    comm_t *comm = NULL;
    tp_t *tp = NULL;
    int rc = s_setup(&comm, NULL, NULL, 20000), peer = 1 - rank;
    if (rc < 0) return s_fail(rank, "setup", rc);
    if (comm->nnodes != 2 || strcmp(tp_kind(comm->tp, peer), "tcp")) {
        fprintf(stderr, "rank %d: %d nodes, backend %s\n", rank, comm->nnodes, tp_kind(comm->tp, peer));
        return 1;
    }
    tp_env_t env = s_env(comm);
    rc = tp_new(&tp, &env, &(tp_opts_t){.kind = "shm"});
    if (rc != ERR_INVAL || tp) return s_fail(rank, "shm across hosts should be refused", rc);
    unsigned char *buf = malloc(3 * SLOT);
    rc = s_ping(comm->tp, rank, 7, 3 * SLOT / 2 + 3, buf, 10000);
    free(buf);
    if (rc < 0) return s_fail(rank, "exchange", rc);
    comm_destroy(&comm);
    return 0;
}

Test(tp_select, fake_hosts_use_tcp, .timeout = 60)
{
    cr_assert_eq(run_ranks(2, s_hosts_rank, NULL, 50000), 0);
}

#define EXPECT(expr, code)                                                                 \
    do {                                                                                   \
        int e_ = (expr);                                                                   \
        if (e_ != (code)) {                                                                \
            fprintf(stderr, "rank %d: %s gave %d, want %d\n", rank, #expr, e_, (int)(code)); \
            bad++;                                                                         \
        }                                                                                  \
    } while (0)

/* Bad options, bad peers, calls out of order and messages of the wrong size fail with the right code. */
static int s_errors_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    tp_t *tp = NULL, *no = NULL;
    int rc = s_setup(&comm, &tp, &(tp_opts_t){.kind = "shm", .slot_bytes = SLOT}, 20000), peer = 1 - rank, bad = 0;
    if (rc < 0) return s_fail(rank, "setup", rc);
    tp_env_t env = s_env(comm);
    EXPECT(tp_new(&no, &env, &(tp_opts_t){.kind = "bogus"}), ERR_INVAL);
    EXPECT(tp_new(&no, &env, &(tp_opts_t){.slots = 1}), ERR_INVAL);
    EXPECT(tp_new(&no, &env, &(tp_opts_t){.slots = 65}), ERR_INVAL);
    EXPECT(tp_new(&no, &env, &(tp_opts_t){.slot_bytes = 4096 + 1}), ERR_INVAL);
    if (no || strcmp(tp_kind(tp, 2), "none") || strcmp(tp_kind(tp, -1), "none")) bad++;
    void *slot;
    const void *seg;
    size_t n;
    EXPECT(tp_send_acquire(tp, rank, &slot, 100), ERR_INVAL);
    EXPECT(tp_send_acquire(tp, 2, &slot, 100), ERR_INVAL);
    EXPECT(tp_recv_acquire(tp, -1, &seg, &n, 100), ERR_INVAL);
    EXPECT(tp_send_commit(tp, peer, 10), ERR_STATE);
    EXPECT(tp_recv_release(tp, peer), ERR_STATE);
    EXPECT(tp_send_acquire(tp, peer, &slot, 1000), 0);
    EXPECT(tp_send_commit(tp, peer, SLOT + 1), ERR_RANGE);
    EXPECT(tp_send_commit(tp, peer, 0), 0);
    EXPECT(tp_recv_acquire(tp, peer, &seg, &n, 10000), 0);
    EXPECT(tp_recv_release(tp, peer), 0);
    /* rank 0 sends 100 bytes twice; rank 1 expects 50 (too many arrive) and then 200 (too few) */
    char buf[200] = {0};
    if (rank == 0) {
        EXPECT(tp_send(tp, peer, buf, 100, 10000), 0);
        EXPECT(tp_send(tp, peer, buf, 100, 10000), 0);
    } else {
        EXPECT(tp_recv(tp, peer, buf, 50, 10000), ERR_PROTO);
        EXPECT(tp_recv(tp, peer, buf, 200, 10000), ERR_PROTO);
        EXPECT(tp_recv_acquire(tp, peer, &seg, &n, 100), ERR_TIMEOUT);
    }
    EXPECT(comm_barrier(comm, 10000), 0); /* before dropping channels the peer may not have drained */
    tp_destroy(&tp);
    comm_destroy(&comm);
    return bad;
}

Test(tp_errors, codes, .timeout = 60)
{
    cr_assert_eq(run_ranks(2, s_errors_rank, NULL, 50000), 0);
}

/* Names a killed job left in /dev/shm go; another job's stay. */
Test(tp_cleanup, removes_only_that_jobs_names)
{
    char job[64], mine[96], other[96];
    snprintf(job, sizeof job, "tpclean-%d/x y", (int)getpid()); /* '/' and ' ' become '_' in names */
    snprintf(mine, sizeof mine, "/sb.tpclean-%d_x_y.1f.0.1", (int)getpid());
    snprintf(other, sizeof other, "/sb.tpclean-%d_x_yz.1f.0.1", (int)getpid());
    for (int i = 0; i < 2; i++) {
        int fd = shm_open(i ? other : mine, O_RDWR | O_CREAT, 0600);
        cr_assert_geq(fd, 0);
        close(fd);
    }
    tp_cleanup_job(job);
    tp_cleanup_job(NULL);
    tp_cleanup_job("");
    int fd = shm_open(mine, O_RDWR, 0);
    cr_expect_lt(fd, 0, "%s should be gone", mine);
    if (fd >= 0) close(fd);
    fd = shm_open(other, O_RDWR, 0);
    cr_expect_geq(fd, 0, "%s should stay", other);
    if (fd >= 0) close(fd);
    shm_unlink(mine);
    shm_unlink(other);
}
