/* tp.c: the point-to-point transport: per ordered pair of ranks a FIFO channel of segments.
 *
 * shm (same host): one shared mapping per (src, dst) holding `slots` slots of `slot_bytes` each and a
 * header with a 32-bit head (segments committed by the producer) and tail (segments released by the
 * consumer). The producer writes straight into slot head % slots (so an algorithm can reduce into it),
 * then publishes with a release store; the consumer reads the slot in place and releases it. Waiting
 * spins briefly (only when ranks do not outnumber cores) and then sleeps on a futex in the shared page;
 * the other side wakes it only when a waiter flag is set. Sleeps are sliced so the deadline and the
 * peer's liveness (its pid) are checked: a dead peer gives ERR_PEER, a slow one ERR_TIMEOUT.
 *
 * tcp (other hosts, or --transport tcp): plain TCP connections, one per pair, with a progress engine
 * and no helper threads (core/tp_sock.c); the lowest latency across hosts.
 *
 * zmq (--transport zmq): every rank binds one ZeroMQ ROUTER and reaches each peer
 * through a DEALER whose routing id is its rank; sends are zero-copy (the slot buffer is handed to
 * ZeroMQ with a free callback that returns it to a pool); received messages are queued per peer so
 * receives can target one peer while others' segments wait. Frames are validated (routing id length,
 * rank range, frame count); anything else is dropped and counted. */
#include "core/tp.h"
#include "core/boot.h"
#include "core/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include "core/trace.h"
#include "core/tp_sock.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zmq.h>

#define TP_MAX_SLOTS 64
#define TP_DEFAULT_SLOT (1u << 20)
#define TP_DEFAULT_SLOTS 4
#define TP_SLICE_MS 100

enum { K_SELF = 0, K_SHM = 1, K_ZMQ = 2, K_SOCK = 3 };

typedef struct {
    _Atomic uint32_t head;
    char pad0[60];
    _Atomic uint32_t tail;
    char pad1[60];
    _Atomic uint32_t cons_wait;
    _Atomic uint32_t prod_wait;
    _Atomic uint32_t opened;
    uint32_t slots;
    uint64_t slot_bytes;
    _Atomic int32_t prod_pid;
    _Atomic int32_t cons_pid;
    char pad2[24];
    uint64_t len[TP_MAX_SLOTS];
} shm_hdr_t;

#define SHM_HDR_BYTES 4096

typedef struct {
    shm_hdr_t *h;
    char *data;
    size_t map_len;
    uint32_t pos;       /* producer: next head; consumer: next tail */
    int acquired;
} shm_chan_t;

typedef struct qmsg {
    zmq_msg_t msg;
    struct qmsg *next;
} qmsg_t;

typedef struct {
    void *dealer;
    void *pending;      /* acquired send buffer */
    qmsg_t *qhead, *qtail;
    qmsg_t *cur;        /* acquired receive */
    void *bounce;       /* aligned copy of a misaligned payload */
} tcp_peer_t;

struct tp {
    comm_t *comm;
    int rank, world;
    size_t slot_bytes;
    int slots;
    int spin;           /* microseconds to spin before sleeping on the futex */
    int yield_us;       /* then microseconds to yield the core before sleeping */
    char prefix[96];
    int *kind;
    shm_chan_t **tx, **rx;
    tp_sock_t *sock;
    /* zmq */
    void *zctx, *router;
    tcp_peer_t *tcp;
    pthread_mutex_t pool_mu;
    void **pool;
    int npool, pool_cap;
    uint64_t rejected;
    _Atomic uint64_t sent, received;
};

/* ---------- futex wait / wake ---------- */

static long s_futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static inline void s_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int s_peer_dead(_Atomic int32_t *pid)
{
    int32_t p = atomic_load(pid);
    return p > 0 && kill(p, 0) < 0 && errno == ESRCH;
}

/* Wait until *word != old. */
static int s_wait_change(tp_t *self, _Atomic uint32_t *word, uint32_t old, _Atomic uint32_t *flag,
                         _Atomic int32_t *peer_pid, uint64_t dl, int peer)
{
    if (self->spin > 0) {
        /* spin for at most spin microseconds: cheap hand-offs when every rank has a core, bounded
         * waste when something else holds the peer's core */
        uint64_t until = now_ns() + (uint64_t)self->spin * 1000u;
        do {
            for (int i = 0; i < 64; i++) {
                if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
                s_pause();
            }
        } while (now_ns() < until);
    }
    if (self->yield_us > 0) {
        /* ranks outnumber cores: hand the core to another rank (likely the one we wait for) rather
         * than sleep, since a futex wake-up in a VM costs tens of microseconds */
        uint64_t until = now_ns() + (uint64_t)self->yield_us * 1000u;
        do {
            if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
            sched_yield();
        } while (now_ns() < until);
    }
    for (;;) {
        atomic_store(flag, 1);
        if (atomic_load(word) != old) {
            atomic_store(flag, 0);
            return 0;
        }
        int left = deadline_left_ms(dl);
        if (left == 0) {
            atomic_store(flag, 0);
            return err_set(ERR_TIMEOUT, "transport: rank %d waited too long for rank %d (shm)", self->rank, peer);
        }
        int slice = (left < 0 || left > TP_SLICE_MS) ? TP_SLICE_MS : left;
        struct timespec ts = {.tv_sec = slice / 1000, .tv_nsec = (long)(slice % 1000) * 1000000L};
        s_futex(word, FUTEX_WAIT, old, &ts);
        atomic_store(flag, 0);
        if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
        if (s_peer_dead(peer_pid))
            return err_set(ERR_PEER, "transport: rank %d (pid %d) died", peer, (int)atomic_load(peer_pid));
    }
}

static inline void s_wake(_Atomic uint32_t *word, _Atomic uint32_t *flag)
{
    if (atomic_load(flag)) s_futex(word, FUTEX_WAKE, 1, NULL);
}

/* ---------- shm channels ---------- */

static void s_chan_name(tp_t *self, int src, int dst, char *out, size_t len)
{
    snprintf(out, len, "/%s.%d.%d", self->prefix, src, dst);
}

static int s_shm_open(tp_t *self, int src, int dst, shm_chan_t **out)
{
    char name[160];
    s_chan_name(self, src, dst, name, sizeof name);
    size_t len = SHM_HDR_BYTES + (size_t)self->slots * self->slot_bytes;
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) return err_set(ERR_SYS, "shm_open %s: %s", name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || ((size_t)st.st_size != len && ftruncate(fd, (off_t)len) < 0)) {
        int e = errno;
        close(fd);
        shm_unlink(name);
        return err_set(e == ENOSPC ? ERR_NOSPC : ERR_SYS, "shm channel %s (%zu bytes): %s", name, len, strerror(e));
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return err_set(ERR_SYS, "mmap %s: %s", name, strerror(errno));
    shm_chan_t *c = calloc(1, sizeof *c);
    if (!c) { munmap(p, len); return ERR_NOMEM; }
    c->h = p;
    c->data = (char *)p + SHM_HDR_BYTES;
    c->map_len = len;
    if (src == self->rank) atomic_store(&c->h->prod_pid, (int32_t)getpid());
    else atomic_store(&c->h->cons_pid, (int32_t)getpid());
    /* the second side to open removes the name: the mapping lives on, nothing is left behind */
    if (atomic_fetch_add(&c->h->opened, 1) == 1) shm_unlink(name);
    *out = c;
    return 0;
}

static void s_shm_close(shm_chan_t **cp)
{
    if (!*cp) return;
    munmap((*cp)->h, (*cp)->map_len);
    free(*cp);
    *cp = NULL;
}

/* ---------- tcp ---------- */

static void s_pool_free(void *data, void *hint)
{
    tp_t *self = hint;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool < self->pool_cap) self->pool[self->npool++] = data;
    else free(data);
    pthread_mutex_unlock(&self->pool_mu);
}

static void *s_pool_get(tp_t *self)
{
    void *p = NULL;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool > 0) p = self->pool[--self->npool];
    pthread_mutex_unlock(&self->pool_mu);
    return p ? p : aligned_alloc(64, (self->slot_bytes + 63) & ~(size_t)63);
}

static int s_tcp_dealer(tp_t *self, int peer, uint64_t dl)
{
    tcp_peer_t *tp = &self->tcp[peer];
    if (tp->dealer) return 0;
    char key[160];
    snprintf(key, sizeof key, "tp/%s/%d", self->prefix, peer);
    void *val = NULL;
    size_t len = 0;
    int rc = store_get(self->comm->store, key, &val, &len, deadline_left_ms(dl));
    if (rc < 0) { free(val); return err_set(rc, "transport: no endpoint from rank %d", peer); }
    char ep[256];
    snprintf(ep, sizeof ep, "%.*s", (int)(len < 255 ? len : 255), (char *)val);
    free(val);
    void *s = zmq_socket(self->zctx, ZMQ_DEALER);
    if (!s) return err_set(ERR_SYS, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int32_t id = self->rank, zero = 0, hwm = 0;
    zmq_setsockopt(s, ZMQ_ROUTING_ID, &id, sizeof id);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (zmq_connect(s, ep) != 0) {
        zmq_close(s);
        return err_set(ERR_SYS, "connect to rank %d at %s: %s", peer, ep, zmq_strerror(zmq_errno()));
    }
    tp->dealer = s;
    return 0;
}

/* Pull one message off the ROUTER into its sender's queue. */
static int s_tcp_pump(tp_t *self, int timeout_ms)
{
    zmq_pollitem_t it = {.socket = self->router, .events = ZMQ_POLLIN};
    int n = zmq_poll(&it, 1, timeout_ms);
    if (n < 0) return zmq_errno() == EINTR ? 0 : err_set(ERR_SYS, "zmq_poll: %s", zmq_strerror(zmq_errno()));
    if (n == 0) return 0;
    zmq_msg_t idm;
    zmq_msg_init(&idm);
    if (zmq_msg_recv(&idm, self->router, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&idm); return 0; }
    int more = zmq_msg_more(&idm);
    int32_t from = -1;
    if (zmq_msg_size(&idm) == 4) memcpy(&from, zmq_msg_data(&idm), 4);
    zmq_msg_close(&idm);
    qmsg_t *q = calloc(1, sizeof *q);
    if (!q) return ERR_NOMEM;
    zmq_msg_init(&q->msg);
    int ok = more && zmq_msg_recv(&q->msg, self->router, 0) >= 0;
    /* drain any extra frames: a well-formed segment has exactly two */
    int extra = 0;
    while (ok && zmq_msg_more(&q->msg)) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        zmq_msg_recv(&x, self->router, 0);
        int m = zmq_msg_more(&x);
        zmq_msg_close(&x);
        extra = 1;
        if (!m) break;
    }
    if (!ok || extra || from < 0 || from >= self->world || from == self->rank ||
        zmq_msg_size(&q->msg) > self->slot_bytes) {
        self->rejected++;
        LOG_W("transport: dropped a malformed segment (sender id %d)", (int)from);
        zmq_msg_close(&q->msg);
        free(q);
        return 0;
    }
    tcp_peer_t *tp = &self->tcp[from];
    if (tp->qtail) tp->qtail->next = q;
    else tp->qhead = q;
    tp->qtail = q;
    return 0;
}

/* The job id as it appears in channel names: at most 47 characters of [A-Za-z0-9-], others '_'. */
static void s_job_name(const char *job, char *out, size_t len)
{
    snprintf(out, len, "%.47s", job);
    for (char *c = out; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
            *c = '_';
}

void tp_cleanup_job(const char *job)
{
    if (!job || !*job) return;
    char name[48], pre[64];
    s_job_name(job, name, sizeof name);
    int pl = snprintf(pre, sizeof pre, "sb.%s.", name);
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, pre, (size_t)pl)) continue;
        char path[300];
        snprintf(path, sizeof path, "/%s", e->d_name);
        shm_unlink(path);
    }
    closedir(d);
}

/* ---------- public ---------- */

int tp_new(tp_t **self_p, comm_t *comm, const tp_opts_t *opts)
{
    int rc = 0;
    tp_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->rank = comm->rank;
    self->world = comm->world;
    self->slot_bytes = opts && opts->slot_bytes ? opts->slot_bytes : TP_DEFAULT_SLOT;
    self->slots = opts && opts->slots ? opts->slots : TP_DEFAULT_SLOTS;
    const char *e = getenv("SYNCBENCH_SHM_SLOT_KB");
    if (e && atol(e) > 0) self->slot_bytes = (size_t)atol(e) * 1024;
    e = getenv("SYNCBENCH_SHM_SLOTS");
    if (e && atoi(e) > 0) self->slots = atoi(e);
    if (self->slots < 2 || self->slots > TP_MAX_SLOTS || self->slot_bytes < 4096 || self->slot_bytes % 64) {
        free(self);
        return err_set(ERR_INVAL, "transport: slots must be 2..%d and slot size a multiple of 64 >= 4096",
                       TP_MAX_SLOTS);
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int oversub = comm->local_world > ncpu;
    self->spin = oversub ? 0 : 50; /* microseconds */
    self->yield_us = oversub ? 2000 : 0;
    e = getenv("SYNCBENCH_SHM_SPIN_US");
    if (e) self->spin = atoi(e);
    e = getenv("SYNCBENCH_SHM_YIELD_US");
    if (e) self->yield_us = atoi(e);
    pthread_mutex_init(&self->pool_mu, NULL);
    self->pool_cap = 2 * self->slots + 4;
    self->pool = calloc((size_t)self->pool_cap, sizeof(void *));
    self->kind = calloc((size_t)self->world, sizeof(int));
    self->tx = calloc((size_t)self->world, sizeof(shm_chan_t *));
    self->rx = calloc((size_t)self->world, sizeof(shm_chan_t *));
    self->tcp = calloc((size_t)self->world, sizeof(tcp_peer_t));
    if (!self->pool || !self->kind || !self->tx || !self->rx || !self->tcp) { rc = ERR_NOMEM; goto fail; }

    const char *kind = opts && opts->kind ? opts->kind : "auto";
    if (strcmp(kind, "auto") && strcmp(kind, "shm") && strcmp(kind, "tcp") && strcmp(kind, "zmq")) {
        rc = err_set(ERR_INVAL, "unknown transport '%s' (auto, shm, tcp, zmq)", kind);
        goto fail;
    }
    int any_tcp = 0, any_sock = 0;
    for (int r = 0; r < self->world; r++) {
        int same = comm->node_of[r] == comm->node;
        if (r == self->rank) self->kind[r] = K_SELF;
        else if (!strcmp(kind, "zmq")) self->kind[r] = K_ZMQ;
        else if (!strcmp(kind, "tcp") || !same) self->kind[r] = K_SOCK;
        else self->kind[r] = K_SHM;
        any_sock |= self->kind[r] == K_SOCK;
        if (!strcmp(kind, "shm") && !same) {
            rc = err_set(ERR_INVAL, "--transport shm but rank %d is on another host", r);
            goto fail;
        }
        any_tcp |= self->kind[r] == K_ZMQ;
    }
    /* a per-run prefix: job id (sanitised) plus a nonce from rank 0, so stale names never collide */
    uint64_t nonce = 0;
    if (self->rank == 0) nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)now_ns();
    CHECK_GOTO(rc, comm_bcast_small(comm, &nonce, sizeof nonce, 0, comm->timeout_ms), fail);
    char job[48];
    s_job_name(comm->job, job, sizeof job);
    snprintf(self->prefix, sizeof self->prefix, "sb.%s.%llx", job, (unsigned long long)nonce);

    if (any_sock) CHECK_GOTO(rc, tp_sock_new(&self->sock, comm, self->prefix, self->slot_bytes), fail);
    if (any_tcp) {
        self->zctx = zmq_ctx_new();
        self->router = self->zctx ? zmq_socket(self->zctx, ZMQ_ROUTER) : NULL;
        if (!self->router) { rc = err_set(ERR_SYS, "zmq: %s", zmq_strerror(zmq_errno())); goto fail; }
        int zero = 0, hwm = 0;
        zmq_setsockopt(self->router, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(self->router, ZMQ_RCVHWM, &hwm, sizeof hwm);
        char addr[128], ep[256];
        CHECK_GOTO(rc, boot_local_addr(&comm->boot, addr, sizeof addr), fail);
        snprintf(ep, sizeof ep, "tcp://%s:*", addr);
        if (zmq_bind(self->router, ep) != 0) {
            rc = err_set(ERR_SYS, "transport: bind %s: %s", ep, zmq_strerror(zmq_errno()));
            goto fail;
        }
        size_t len = sizeof ep;
        zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, ep, &len);
        char key[160];
        snprintf(key, sizeof key, "tp/%s/%d", self->prefix, self->rank);
        CHECK_GOTO(rc, store_set(comm->store, key, ep, strlen(ep)), fail);
    }
    *self_p = self;
    return 0;
fail:
    tp_destroy(&self);
    return rc;
}

void tp_destroy(tp_t **self_p)
{
    tp_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    for (int r = 0; self->kind && r < self->world; r++) {
        if (self->tx && self->tx[r]) {
            char name[160];
            s_chan_name(self, self->rank, r, name, sizeof name);
            shm_unlink(name); /* in case the peer never opened it */
            s_shm_close(&self->tx[r]);
        }
        if (self->rx && self->rx[r]) {
            char name[160];
            s_chan_name(self, r, self->rank, name, sizeof name);
            shm_unlink(name);
            s_shm_close(&self->rx[r]);
        }
        if (self->tcp) {
            tcp_peer_t *tp = &self->tcp[r];
            if (tp->dealer) zmq_close(tp->dealer);
            free(tp->pending);
            free(tp->bounce);
            if (tp->cur) { zmq_msg_close(&tp->cur->msg); free(tp->cur); }
            while (tp->qhead) {
                qmsg_t *q = tp->qhead;
                tp->qhead = q->next;
                zmq_msg_close(&q->msg);
                free(q);
            }
        }
    }
    tp_sock_destroy(&self->sock);
    if (self->router) zmq_close(self->router);
    if (self->zctx) zmq_ctx_term(self->zctx);
    for (int i = 0; i < self->npool; i++) free(self->pool[i]);
    free(self->pool);
    pthread_mutex_destroy(&self->pool_mu);
    free(self->kind);
    free(self->tx);
    free(self->rx);
    free(self->tcp);
    free(self);
    *self_p = NULL;
}

size_t tp_slot_bytes(tp_t *self, int peer)
{
    (void)peer;
    return self->slot_bytes;
}

const char *tp_kind(tp_t *self, int peer)
{
    if (peer < 0 || peer >= self->world) return "none";
    switch (self->kind[peer]) {
    case K_SHM: return "shm";
    case K_ZMQ: return "zmq";
    case K_SOCK: return "tcp";
    default: return "self";
    }
}

static int s_check_peer(tp_t *self, int peer)
{
    if (peer < 0 || peer >= self->world || peer == self->rank)
        return err_set(ERR_INVAL, "transport: bad peer %d (rank %d of %d)", peer, self->rank, self->world);
    return 0;
}

int tp_send_acquire(tp_t *self, int peer, void **buf, int timeout_ms)
{
    CHECK(s_check_peer(self, peer));
    if (self->kind[peer] == K_SOCK) return tp_sock_send_acquire(self->sock, peer, buf, timeout_ms);
    if (self->kind[peer] == K_ZMQ) {
        tcp_peer_t *tp = &self->tcp[peer];
        CHECK(s_tcp_dealer(self, peer, deadline_in(timeout_ms)));
        if (!tp->pending) tp->pending = s_pool_get(self);
        if (!tp->pending) return ERR_NOMEM;
        *buf = tp->pending;
        return 0;
    }
    if (!self->tx[peer]) CHECK(s_shm_open(self, self->rank, peer, &self->tx[peer]));
    shm_chan_t *c = self->tx[peer];
    if (!c->acquired) {
        uint32_t tail = atomic_load_explicit(&c->h->tail, memory_order_acquire);
        uint64_t dl = UINT64_MAX;
        int first = 1;
        while (c->pos - tail >= (uint32_t)self->slots) {
            if (first) { dl = deadline_in(timeout_ms); first = 0; }
            CHECK(s_wait_change(self, &c->h->tail, tail, &c->h->prod_wait, &c->h->cons_pid, dl, peer));
            tail = atomic_load_explicit(&c->h->tail, memory_order_acquire);
        }
        c->acquired = 1;
    }
    *buf = c->data + (size_t)(c->pos % (uint32_t)self->slots) * self->slot_bytes;
    return 0;
}

int tp_send_commit(tp_t *self, int peer, size_t len)
{
    trace_instant("send", "peer", peer, "bytes", (int64_t)len); /* timeline: one branch when off */
    CHECK(s_check_peer(self, peer));
    if (len > self->slot_bytes) return err_set(ERR_RANGE, "transport: segment of %zu bytes > slot %zu", len, self->slot_bytes);
    if (self->kind[peer] == K_SOCK) {
        CHECK(tp_sock_send_commit(self->sock, peer, len, self->comm->timeout_ms));
        atomic_fetch_add(&self->sent, len);
        return 0;
    }
    if (self->kind[peer] == K_ZMQ) {
        tcp_peer_t *tp = &self->tcp[peer];
        if (!tp->pending) return err_set(ERR_STATE, "transport: commit without acquire");
        zmq_msg_t m;
        zmq_msg_init_data(&m, tp->pending, len, s_pool_free, self);
        tp->pending = NULL;
        if (zmq_msg_send(&m, tp->dealer, 0) < 0) {
            zmq_msg_close(&m);
            return err_set(ERR_PEER, "transport: send to rank %d: %s", peer, zmq_strerror(zmq_errno()));
        }
        atomic_fetch_add(&self->sent, len);
        return 0;
    }
    shm_chan_t *c = self->tx[peer];
    if (!c || !c->acquired) return err_set(ERR_STATE, "transport: commit without acquire");
    c->h->len[c->pos % (uint32_t)self->slots] = len;
    c->pos++;
    c->acquired = 0;
    atomic_store(&c->h->head, c->pos);
    s_wake(&c->h->head, &c->h->cons_wait);
    atomic_fetch_add(&self->sent, len);
    return 0;
}

static int s_recv_acquire(tp_t *self, int peer, const void **buf, size_t *len, int timeout_ms)
{
    CHECK(s_check_peer(self, peer));
    if (self->kind[peer] == K_SOCK) {
        CHECK(tp_sock_recv_acquire(self->sock, peer, buf, len, timeout_ms));
        atomic_fetch_add(&self->received, *len);
        return 0;
    }
    if (self->kind[peer] == K_ZMQ) {
        tcp_peer_t *tp = &self->tcp[peer];
        if (!tp->cur) {
            uint64_t dl = deadline_in(timeout_ms);
            while (!tp->qhead) {
                int left = deadline_left_ms(dl);
                if (left == 0) return err_set(ERR_TIMEOUT, "transport: rank %d waited too long for rank %d (tcp)", self->rank, peer);
                CHECK(s_tcp_pump(self, left < 0 || left > TP_SLICE_MS ? TP_SLICE_MS : left));
            }
            tp->cur = tp->qhead;
            tp->qhead = tp->cur->next;
            if (!tp->qhead) tp->qtail = NULL;
        }
        *buf = zmq_msg_data(&tp->cur->msg);
        *len = zmq_msg_size(&tp->cur->msg);
        if (((uintptr_t)*buf & 63) && *len) {
            /* ZeroMQ may hand a payload at any address: reductions want aligned elements */
            if (!tp->bounce) tp->bounce = aligned_alloc(64, (self->slot_bytes + 63) & ~(size_t)63);
            if (!tp->bounce) return ERR_NOMEM;
            memcpy(tp->bounce, *buf, *len);
            *buf = tp->bounce;
        }
        return 0;
    }
    if (!self->rx[peer]) CHECK(s_shm_open(self, peer, self->rank, &self->rx[peer]));
    shm_chan_t *c = self->rx[peer];
    uint32_t head = atomic_load_explicit(&c->h->head, memory_order_acquire);
    if (head == c->pos) {
        uint64_t dl = deadline_in(timeout_ms);
        while (head == c->pos) {
            CHECK(s_wait_change(self, &c->h->head, head, &c->h->cons_wait, &c->h->prod_pid, dl, peer));
            head = atomic_load_explicit(&c->h->head, memory_order_acquire);
        }
    }
    uint32_t slot = c->pos % (uint32_t)self->slots;
    uint64_t l = c->h->len[slot];
    if (l > self->slot_bytes) return err_set(ERR_PROTO, "transport: corrupt segment length %llu from rank %d", (unsigned long long)l, peer);
    c->acquired = 1;
    *buf = c->data + (size_t)slot * self->slot_bytes;
    *len = (size_t)l;
    return 0;
}

int tp_recv_acquire(tp_t *self, int peer, const void **buf, size_t *len, int timeout_ms)
{
    uint64_t tr = trace_t0(); /* timeline: the wait for each received segment */
    int rc = s_recv_acquire(self, peer, buf, len, timeout_ms);
    trace_x2("recv", tr, "peer", peer, "bytes", rc == 0 ? (int64_t)*len : -1);
    return rc;
}

int tp_recv_release(tp_t *self, int peer)
{
    CHECK(s_check_peer(self, peer));
    if (self->kind[peer] == K_SOCK) return tp_sock_recv_release(self->sock, peer);
    if (self->kind[peer] == K_ZMQ) {
        tcp_peer_t *tp = &self->tcp[peer];
        if (!tp->cur) return err_set(ERR_STATE, "transport: release without acquire");
        atomic_fetch_add(&self->received, zmq_msg_size(&tp->cur->msg));
        zmq_msg_close(&tp->cur->msg);
        free(tp->cur);
        tp->cur = NULL;
        return 0;
    }
    shm_chan_t *c = self->rx[peer];
    if (!c || !c->acquired) return err_set(ERR_STATE, "transport: release without acquire");
    atomic_fetch_add(&self->received, c->h->len[c->pos % (uint32_t)self->slots]);
    c->pos++;
    c->acquired = 0;
    atomic_store(&c->h->tail, c->pos);
    s_wake(&c->h->tail, &c->h->prod_wait);
    return 0;
}

int tp_send(tp_t *self, int peer, const void *buf, size_t len, int timeout_ms)
{
    uint64_t dl = deadline_in(timeout_ms);
    size_t off = 0;
    do {
        size_t n = len - off < self->slot_bytes ? len - off : self->slot_bytes;
        void *slot;
        CHECK(tp_send_acquire(self, peer, &slot, deadline_left_ms(dl)));
        if (n) memcpy(slot, (const char *)buf + off, n);
        CHECK(tp_send_commit(self, peer, n));
        off += n;
    } while (off < len);
    return 0;
}

int tp_recv(tp_t *self, int peer, void *buf, size_t len, int timeout_ms)
{
    uint64_t dl = deadline_in(timeout_ms);
    size_t off = 0;
    do {
        const void *seg;
        size_t n;
        CHECK(tp_recv_acquire(self, peer, &seg, &n, deadline_left_ms(dl)));
        if (n > len - off) {
            tp_recv_release(self, peer);
            return err_set(ERR_PROTO, "transport: rank %d sent %zu bytes more than expected", peer, n - (len - off));
        }
        if (n) memcpy((char *)buf + off, seg, n);
        CHECK(tp_recv_release(self, peer));
        off += n;
        if (n < self->slot_bytes && off < len)
            return err_set(ERR_PROTO, "transport: short message from rank %d (%zu of %zu bytes)", peer, off, len);
    } while (off < len);
    return 0;
}

void tp_counters(tp_t *self, uint64_t *sent, uint64_t *received)
{
    if (sent) *sent = atomic_load(&self->sent);
    if (received) *received = atomic_load(&self->received);
}
