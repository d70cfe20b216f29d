/* test_tp.c: the point-to-point transport itself: byte-exact exchanges over each backend (shm, tcp,
 * zmq) forced through tp_opts_t, backend choice across (fake) hosts, argument and state errors, a
 * dead peer failing fast, and tp_cleanup_job removing leftover shared-memory names. Trust: an intruder
 * without the job secret cannot feed a tcp or zmq channel, a 1 GiB frame or segment header is refused
 * before anything is allocated (RSS), a planted shared-memory name is refused and a /dev/shm too small
 * says how much it needs. All traffic on 127.0.0.1. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <time.h>
#include <zmq.h>
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
#include "tests/lib/flood.h"
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
    char job[64], job2[64], tag[24], tag2[24], mine[96], other[96];
    snprintf(job, sizeof job, "tpclean-%d/x y", (int)getpid()); /* names carry a hash of the id, never the id */
    snprintf(job2, sizeof job2, "tpclean-%d/x yz", (int)getpid());
    auth_job_tag(job, tag, sizeof tag);
    auth_job_tag(job2, tag2, sizeof tag2);
    cr_assert(strlen(tag) == 16 && strcmp(tag, tag2) && !strstr(tag, "tpclean"));
    snprintf(mine, sizeof mine, "/sb.%s.1f.0.1", tag);
    snprintf(other, sizeof other, "/sb.%s.1f.0.1", tag2);
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

/* ------------------------------------------------------------------------------------------------ */
/* trust: intruders without the job secret, peers that announce huge segments, planted shm names    */

#define SECRET_HEX "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* The address rank peer published for backend kind ("tcp": "ADDR:PORT", "zmq": "tcp://ADDR:PORT"). */
static int s_published(comm_t *comm, tp_t *tp, const char *kind, int peer, char *out, size_t len)
{
    char key[200];
    snprintf(key, sizeof key, !strcmp(kind, "tcp") ? "tp/%s/sock/%d" : "tp/%s/%d", tp_name(tp), peer);
    void *v = NULL;
    size_t n = 0;
    CHECK(store_get(comm->store, key, &v, &n, 10000));
    snprintf(out, len, "%.*s", (int)n, (char *)v);
    free(v);
    return 0;
}

static int s_tcp_connect(const char *hostport)
{
    char h[128];
    snprintf(h, sizeof h, "%s", hostport);
    char *colon = strrchr(h, ':');
    if (!colon) return -1;
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, h, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) { if (fd >= 0) close(fd); return -1; }
    return fd;
}

/* The intruder's forged TCP hello: right magic, run nonce and ranks, a made-up MAC. */
static void s_forged_tcp_hello(tp_t *tp, int from, int to, unsigned char out[84], int zero_mac)
{
    uint64_t nonce = 0;
    for (const char *c = tp_name(tp); *c; c++) nonce = nonce * 131 + (unsigned char)*c;
    uint32_t magic = 0x53424b44u, f = (uint32_t)from, t = (uint32_t)to;
    memcpy(out, &magic, 4);
    memcpy(out + 4, &nonce, 8);
    memcpy(out + 12, &f, 4);
    memcpy(out + 16, &t, 4);
    memset(out + 20, 0x5a, 32);
    memset(out + 52, zero_mac ? 0 : 0xa5, 32);
}

static void s_sleep_ms(int ms) { struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L}; nanosleep(&ts, NULL); }

/* Rank 0 plays intruder first (a hello without the secret claiming to be rank 0, then segments full of
 * 1000.0f), then sends the real data; rank 1 must receive the real data only. */
static int s_intruder_rank(int rank, int world, void *arg)
{
    (void)world;
    const char *kind = arg;
    comm_t *comm = NULL;
    tp_t *tp = NULL;
    int rc = s_setup(&comm, &tp, &(tp_opts_t){.kind = kind, .slot_bytes = SLOT}, 20000);
    if (rc < 0) return s_fail(rank, "setup", rc);
    size_t n = 3 * SLOT / 2;
    unsigned char *buf = malloc(n);
    float fake[256];
    for (int i = 0; i < 256; i++) fake[i] = 1000.0f;
    if (rank == 0) {
        char ep[256];
        if ((rc = s_published(comm, tp, kind, 1, ep, sizeof ep)) < 0) return s_fail(rank, "endpoint", rc);
        int fd = -1;
        void *zctx = NULL, *d = NULL;
        if (!strcmp(kind, "tcp")) {
            unsigned char hello[84];
            s_forged_tcp_hello(tp, 0, 1, hello, 0);
            uint64_t hdr = sizeof fake;
            if ((fd = s_tcp_connect(ep)) < 0) return s_fail(rank, "intruder connect", ERR_PEER);
            /* MSG_NOSIGNAL: the real rank may already have thrown the intruder out (no SIGPIPE) */
            if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello || send(fd, &hdr, 8, MSG_NOSIGNAL) != 8 ||
                send(fd, fake, sizeof fake, MSG_NOSIGNAL) != (ssize_t)sizeof fake)
                fprintf(stderr, "rank 0: intruder writes cut short (fine: it was thrown out)\n");
        } else {
            zctx = zmq_ctx_new();
            d = zmq_socket(zctx, ZMQ_DEALER);
            int zero = 0, sndto = 1000; /* its messages never leave under CURVE: closing must not wait for them */
            zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
            /* nor may sending: once the refusal drops its only pipe, a DEALER's zmq_send blocks for ever */
            zmq_setsockopt(d, ZMQ_SNDTIMEO, &sndto, sizeof sndto);
            int32_t id = 0;
            zmq_setsockopt(d, ZMQ_ROUTING_ID, &id, sizeof id);
            zmq_connect(d, ep);
            unsigned char hello[76];
            uint32_t f = 0, t = 1;
            memcpy(hello, "SBZH", 4);
            memcpy(hello + 4, &f, 4);
            memcpy(hello + 8, &t, 4);
            memset(hello + 12, 0x5a, 64);
            zmq_send(d, hello, sizeof hello, 0);
            for (int i = 0; i < 4; i++) zmq_send(d, fake, sizeof fake, 0);
        }
        s_sleep_ms(300); /* rank 1 sees the intruder first */
        s_fill(buf, 0, 1, n);
        rc = tp_send(tp, 1, buf, n, 10000);
        if (rc == 0) rc = tp_recv(tp, 1, buf, 1, 10000); /* rank 1's verdict */
        if (rc == 0 && buf[0] != 1) rc = ERR_WRONG;
        if (fd >= 0) close(fd);
        if (d) zmq_close(d);
        if (zctx) zmq_ctx_term(zctx);
    } else {
        memset(buf, 0, n);
        rc = tp_recv(tp, 0, buf, n, 10000);
        if (rc == 0) {
            unsigned char ok = (unsigned char)s_same(buf, 0, 1, n, rank);
            rc = tp_send(tp, 0, &ok, 1, 10000);
            if (rc == 0 && !ok) rc = ERR_WRONG;
        }
    }
    free(buf);
    if (rc < 0) return s_fail(rank, "exchange past the intruder", rc);
    if ((rc = comm_barrier(comm, 10000)) < 0) return s_fail(rank, "barrier", rc); /* zmq sends are queued */
    tp_destroy(&tp);
    comm_destroy(&comm);
    return 0;
}

Test(tp_trust, tcp_intruder_without_secret_is_refused, .timeout = 60)
{
    setenv("SYNCBENCH_JOB_SECRET", SECRET_HEX, 1);
    cr_assert_eq(run_ranks(2, s_intruder_rank, "tcp", 50000), 0);
}

Test(tp_trust, zmq_intruder_without_secret_is_refused, .timeout = 60)
{
    setenv("SYNCBENCH_JOB_SECRET", SECRET_HEX, 1);
    cr_assert_eq(run_ranks(2, s_intruder_rank, "zmq", 50000), 0);
}

typedef struct { char ep[256]; unsigned char hello[84]; int zmtp; size_t sent; } flood_t;

/* Announce a 1 GiB frame (a raw ZMTP 3.0 peer, or a TCP segment header after a hello without a MAC) and
 * stream up to 64 MiB of it. */
static void *s_flood(void *arg)
{
    flood_t *f = arg;
    const char *hp = f->ep;
    if (!strncmp(hp, "tcp://", 6)) hp += 6;
    int fd = s_tcp_connect(hp);
    if (fd < 0) return NULL;
    unsigned char pre[256];
    size_t n = 0;
    if (f->zmtp) {
        n = flood_zmtp_preamble(pre);
    } else {
        memcpy(pre, f->hello, 84);
        n = 84;
        uint64_t hdr = 1ull << 30;
        memcpy(pre + n, &hdr, 8);
        n += 8;
    }
    if (send(fd, pre, n, MSG_NOSIGNAL) != (ssize_t)n) { close(fd); return NULL; }
    f->sent += flood_junk(fd, 64);
    close(fd);
    return NULL;
}

/* Rank 1 (no secret: the hello is accepted) is flooded by a 1 GiB frame announced on its zmq ROUTER, then
 * by a 1 GiB segment header on its TCP listener: both are refused before anything is allocated. */
static int s_flood_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    tp_t *tz = NULL, *tt = NULL;
    int rc = s_setup(&comm, &tz, &(tp_opts_t){.kind = "zmq", .slot_bytes = SLOT}, 20000);
    if (rc == 0) {
        tp_env_t env = s_env(comm);
        rc = tp_new(&tt, &env, &(tp_opts_t){.kind = "tcp", .slot_bytes = SLOT});
    }
    if (rc < 0) return s_fail(rank, "setup", rc);
    int bad = 0;
    if (rank == 1) {
        flood_t f = {.zmtp = 1};
        if ((rc = s_published(comm, tz, "zmq", 1, f.ep, sizeof f.ep)) < 0) return s_fail(rank, "endpoint", rc);
        long before = rss_kb();
        pthread_t th;
        pthread_create(&th, NULL, s_flood, &f);
        pthread_join(th, NULL);
        s_sleep_ms(200);
        long grew = rss_kb() - before;
        fprintf(stderr, "rank 1: zmq flood: %zu bytes sent, RSS grew %ld KiB\n", f.sent, grew);
        if (grew > 16 * 1024) bad++;

        flood_t g = {.zmtp = 0};
        if ((rc = s_published(comm, tt, "tcp", 1, g.ep, sizeof g.ep)) < 0) return s_fail(rank, "endpoint", rc);
        s_forged_tcp_hello(tt, 0, 1, g.hello, 1);
        before = rss_kb();
        pthread_create(&th, NULL, s_flood, &g);
        unsigned char b[16];
        rc = tp_recv(tt, 0, b, sizeof b, 5000);
        pthread_join(th, NULL);
        grew = rss_kb() - before;
        fprintf(stderr, "rank 1: tcp flood: %zu bytes sent, recv gave %d (%s), RSS grew %ld KiB\n", g.sent, rc,
                err_detail(), grew);
        if (rc != ERR_PROTO || grew > 16 * 1024) bad++;
    }
    int64_t v = 0;
    store_add(comm->store, "flood-done", 1, &v);
    void *x = NULL;
    size_t xl = 0;
    while (v < 2 && store_get(comm->store, "flood-done", &x, &xl, 100) == 0) { v = atol(x); free(x); x = NULL; s_sleep_ms(50); }
    free(x);
    tp_destroy(&tz);
    tp_destroy(&tt);
    comm_destroy(&comm);
    return bad;
}

Test(tp_trust, huge_frames_are_refused_before_allocation, .timeout = 60)
{
    unsetenv("SYNCBENCH_JOB_SECRET");
    cr_assert_eq(run_ranks(2, s_flood_rank, NULL, 50000), 0);
}

/* A name planted where this run's channel 0 -> 1 will be (ours, but mode 0644) is refused, named. */
static int s_planted_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    tp_t *tp = NULL;
    int rc = s_setup(&comm, &tp, &(tp_opts_t){.kind = "shm", .slot_bytes = SLOT}, 20000);
    if (rc < 0) return s_fail(rank, "setup", rc);
    char name[200];
    snprintf(name, sizeof name, "/%s.0.1", tp_name(tp));
    int bad = 0;
    if (rank == 1) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || fchmod(fd, 0644) < 0 || ftruncate(fd, 4096) < 0) bad++;
        if (fd >= 0) close(fd);
        store_set(comm->store, "planted", "1", 1);
    } else {
        void *v = NULL;
        size_t l = 0;
        store_get(comm->store, "planted", &v, &l, 10000);
        free(v);
        unsigned char b[8] = {0};
        rc = tp_send(tp, 1, b, sizeof b, 2000);
        fprintf(stderr, "rank 0: send over the planted name: %d (%s)\n", rc, err_detail());
        if (rc != ERR_AUTH || !strstr(err_detail(), name) || !strstr(err_detail(), "0644")) bad++;
        shm_unlink(name);
        store_set(comm->store, "checked", "1", 1);
    }
    if (rank == 1) {
        void *v = NULL;
        size_t l = 0;
        store_get(comm->store, "checked", &v, &l, 10000);
        free(v);
    }
    tp_destroy(&tp);
    comm_destroy(&comm);
    return bad;
}

Test(tp_trust, planted_shm_name_is_refused, .timeout = 60)
{
    cr_assert_eq(run_ranks(2, s_planted_rank, NULL, 50000), 0);
}

/* /dev/shm smaller than a channel: "need N bytes in /dev/shm", no SIGBUS (a 1 MiB tmpfs on /dev/shm in a
 * private mount namespace; needs root). */
static int s_small_shm_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    tp_t *tp = NULL;
    boot_cfg_t bc;
    int rc = boot_cfg_init(&bc, "env://", -1, -1, 20000);
    if (rc == 0) rc = comm_new(&comm, &bc, &(comm_opts_t){.transport = "tcp"});
    if (rc == 0) {
        tp_env_t env = s_env(comm);
        rc = tp_new(&tp, &env, &(tp_opts_t){.kind = "shm", .slot_bytes = 1 << 20, .slots = 4});
    }
    if (rc < 0) return s_fail(rank, "setup", rc);
    int bad = 0;
    if (rank == 0) {
        unsigned char b[8] = {0};
        rc = tp_send(tp, 1, b, sizeof b, 2000);
        fprintf(stderr, "rank 0: send over a full /dev/shm: %d (%s)\n", rc, err_detail());
        if (rc != ERR_NOSPC || !strstr(err_detail(), "need 4198400 bytes in /dev/shm (have")) bad++;
    }
    int64_t v = 0;
    store_add(comm->store, "done", 1, &v);
    tp_destroy(&tp);
    comm_destroy(&comm);
    return bad;
}

Test(tp_trust, small_dev_shm_says_how_much_it_needs, .timeout = 60)
{
    if (geteuid() != 0) cr_skip_test("needs root for a private tmpfs on /dev/shm");
    if (unshare(CLONE_NEWNS) != 0) cr_skip_test("unshare(CLONE_NEWNS): %s", strerror(errno));
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0)
        cr_skip_test("cannot mount a small tmpfs on /dev/shm: %s", strerror(errno));
    cr_assert_eq(run_ranks(2, s_small_shm_rank, NULL, 50000), 0);
}

/* Issue 33 section 1: 100 idle TCP connections to rank 1's listener (more than its 64 places for
 * connections without a hello) before rank 0 connects: rank 0 still gets its place and the exchange is
 * exact (before: "too many half-open connections" turned rank 0 away and the job failed). Rank 1's drops
 * (at least the 36 over the 64 places) are said in at most 2 lines that count every one (one line a drop
 * once; then drops within 10 s of the first report went unsaid when the transport closed). */
static int s_drops_said(const char *log, int rank)
{
    FILE *f = fopen(log, "r");
    char l[1024];
    int lines = 0, said = 0;
    while (f && fgets(l, sizeof l, f)) {
        fputs(l, stderr);
        const char *d = strstr(l, " dropped ");
        if (d && strstr(l, "did not authenticate")) lines++, said += atoi(d + 9);
    }
    if (f) fclose(f);
    if (lines < 1 || lines > 2 || said < 36)
        return fprintf(stderr, "rank %d: %d drop(s) said in %d line(s); want >= 36 in 1-2\n", rank, said, lines), 1;
    return 0;
}

static int s_idle_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    comm_t *comm = NULL;
    tp_t *tp = NULL;
    char log[] = "/tmp/sb-tpdrop-XXXXXX";
    int lf = rank == 1 ? mkstemp(log) : -1, err2 = lf >= 0 ? dup(2) : -1;
    if (lf >= 0) dup2(lf, 2); /* rank 1's warnings, counted below */
    int rc = s_setup(&comm, &tp, &(tp_opts_t){.kind = "tcp", .slot_bytes = SLOT}, 20000);
    if (rc < 0) return s_fail(rank, "setup", rc);
    size_t n = 3 * SLOT / 2;
    unsigned char *buf = malloc(n);
    enum { IDLE = 100 };
    int fds[IDLE];
    for (int i = 0; i < IDLE; i++) fds[i] = -1;
    if (rank == 0) {
        char ep[256];
        if ((rc = s_published(comm, tp, "tcp", 1, ep, sizeof ep)) < 0) return s_fail(rank, "endpoint", rc);
        int opened = 0;
        for (int i = 0; i < IDLE; i++) opened += (fds[i] = s_tcp_connect(ep)) >= 0;
        if (opened < IDLE) fprintf(stderr, "rank 0: only %d of %d idle connections opened\n", opened, IDLE);
        s_fill(buf, 0, 1, n);
        rc = tp_send(tp, 1, buf, n, 10000);
        if (rc == 0) rc = tp_recv(tp, 1, buf, 1, 10000);
        if (rc == 0 && buf[0] != 1) rc = ERR_WRONG;
    } else {
        s_sleep_ms(500); /* the idle connections are queued on the listener before rank 0's */
        memset(buf, 0, n);
        rc = tp_recv(tp, 0, buf, n, 10000);
        if (rc == 0) {
            unsigned char ok = (unsigned char)s_same(buf, 0, 1, n, rank);
            rc = tp_send(tp, 0, &ok, 1, 10000);
            if (rc == 0 && !ok) rc = ERR_WRONG;
        }
    }
    free(buf);
    if (rc < 0) return s_fail(rank, "exchange past 100 idle connections", rc);
    if ((rc = comm_barrier(comm, 10000)) < 0) return s_fail(rank, "barrier", rc);
    for (int i = 0; i < IDLE; i++) if (fds[i] >= 0) close(fds[i]);
    tp_destroy(&tp);
    comm_destroy(&comm);
    if (lf < 0) return 0;
    fflush(stderr);
    dup2(err2, 2);
    int bad = s_drops_said(log, rank);
    unlink(log);
    return bad;
}

Test(tp_trust, idle_tcp_connections_never_take_a_peers_place, .timeout = 60)
{
    setenv("SYNCBENCH_JOB_SECRET", SECRET_HEX, 1);
    cr_assert_eq(run_ranks(2, s_idle_rank, NULL, 50000), 0);
}
