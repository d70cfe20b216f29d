/* tp.c: the point-to-point transport: per ordered pair of ranks a FIFO channel of segments. This file
 * holds the public API (core/tp.h): it picks a backend per peer (core/tp_backend.h: shm within a host,
 * plain tcp across hosts, or whatever --transport forces), opens one instance of each backend in use,
 * and dispatches every acquire/commit/release through the peer's backend table. The backends
 * themselves are core/tp_shm.c, core/tp_tcp.c and core/tp_zmq.c. */
#include "core/tp.h"
#include "core/tp_backend.h"
#include "core/auth.h"
#include "core/err.h"
#include "core/timer.h"
#include "core/trace.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TP_DEFAULT_SLOT (1u << 20)
#define TP_DEFAULT_SLOTS 4

/* Every backend, in the order they open. */
static const tp_backend_t *const s_backends[] = {&tp_backend_shm, &tp_backend_tcp, &tp_backend_zmq};
enum { B_SHM, B_TCP, B_ZMQ, B_COUNT };

typedef struct {
    const tp_backend_t *ops;   /* NULL for this rank itself */
    void *be;                  /* that backend's instance */
} tp_peer_t;

struct tp {
    int rank, world;
    int timeout_ms;
    size_t slot_bytes;
    int slots;
    char prefix[96];
    tp_peer_t *peer;
    void *inst[B_COUNT];
    _Atomic uint64_t sent, received;
    /* per peer: bytes through this transport, then bytes other carriers noted (tp_note_traffic) */
    _Atomic uint64_t *peer_sent, *peer_received, *note_sent, *note_received;
    _Atomic int wait_peer;     /* the peer an acquire waits on now, or -1 (tp_waiting) */
    _Atomic int wait_send;
    _Atomic uint64_t wait_since;
};

void tp_wait_mark(tp_t *self, int peer, int sending)
{
    if (!self) return;
    if (peer >= 0) {
        atomic_store_explicit(&self->wait_since, now_ns(), memory_order_relaxed);
        atomic_store_explicit(&self->wait_send, sending, memory_order_relaxed);
    }
    atomic_store_explicit(&self->wait_peer, peer, memory_order_release);
}

int tp_waiting(tp_t *self, int *peer, int *sending, int *ms)
{
    int p = self ? atomic_load_explicit(&self->wait_peer, memory_order_acquire) : -1;
    if (p < 0) return 0;
    uint64_t since = atomic_load_explicit(&self->wait_since, memory_order_relaxed), now = now_ns();
    *peer = p;
    *sending = atomic_load_explicit(&self->wait_send, memory_order_relaxed);
    *ms = now > since ? (int)((now - since) / 1000000u) : 0;
    return 1;
}

void tp_job_name(const char *job, char *out, size_t len) { auth_job_tag(job, out, len); }

const char *tp_name(tp_t *self) { return self ? self->prefix : ""; }

void tp_cleanup_job(const char *job)
{
    if (!job || !*job) return;
    for (int b = 0; b < B_COUNT; b++)
        if (s_backends[b]->cleanup_job) s_backends[b]->cleanup_job(job);
}

/* Which backend carries traffic towards rank r: -1 for this rank, else B_*. */
static int s_pick(const tp_env_t *env, const char *kind, int r)
{
    if (r == env->rank) return -1;
    if (!strcmp(kind, "zmq")) return B_ZMQ;
    if (!strcmp(kind, "tcp") || env->node_of[r] != env->node_of[env->rank]) return B_TCP;
    return B_SHM;
}

int tp_new(tp_t **self_p, const tp_env_t *env, const tp_opts_t *opts)
{
    int rc = 0;
    tp_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->rank = env->rank;
    self->world = env->world;
    self->timeout_ms = env->timeout_ms;
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
    atomic_init(&self->wait_peer, -1);
    self->peer = calloc((size_t)self->world, sizeof(tp_peer_t));
    self->peer_sent = calloc((size_t)self->world * 4, sizeof(_Atomic uint64_t));
    if (!self->peer || !self->peer_sent) { rc = ERR_NOMEM; goto fail; }
    self->peer_received = self->peer_sent + self->world;
    self->note_sent = self->peer_received + self->world;
    self->note_received = self->note_sent + self->world;

    const char *kind = opts && opts->kind ? opts->kind : "auto";
    if (strcmp(kind, "auto") && strcmp(kind, "shm") && strcmp(kind, "tcp") && strcmp(kind, "zmq")) {
        rc = err_set(ERR_INVAL, "unknown transport '%s' (auto, shm, tcp, zmq)", kind);
        goto fail;
    }
    int used[B_COUNT] = {0};
    for (int r = 0; r < self->world; r++) {
        if (!strcmp(kind, "shm") && env->node_of[r] != env->node_of[env->rank]) {
            rc = err_set(ERR_INVAL, "--transport shm but rank %d is on another host", r);
            goto fail;
        }
        int k = s_pick(env, kind, r);
        if (k >= 0) used[k] = 1;
    }
    /* a per-run prefix: the job's tag (a hash of its id) plus a random nonce from rank 0, so stale names
     * never collide and every transport hello is bound to this run */
    if (self->world > 1 || (env->boot && env->boot->auth.require))
        CHECK_GOTO(rc, auth_require(env->boot ? &env->boot->auth : NULL, "transport"), fail);
    uint64_t nonce = 0;
    if (self->rank == 0) {
        unsigned char r[AUTH_NONCE_BYTES];
        auth_challenge(r);
        memcpy(&nonce, r, sizeof nonce);
    }
    CHECK_GOTO(rc, env->bcast(env->bcast_ctx, &nonce, sizeof nonce, 0, env->timeout_ms), fail);
    char job[48];
    tp_job_name(env->job, job, sizeof job);
    snprintf(self->prefix, sizeof self->prefix, "sb.%s.%llx", job, (unsigned long long)nonce);

    tp_backend_cfg_t bc = {.env = env, .prefix = self->prefix, .slot_bytes = self->slot_bytes, .slots = self->slots,
                           .no_yield = opts ? opts->no_yield : 0};
    for (int b = 0; b < B_COUNT; b++)
        if (used[b]) CHECK_GOTO(rc, s_backends[b]->open(&self->inst[b], &bc), fail);
    for (int r = 0; r < self->world; r++) {
        int k = s_pick(env, kind, r);
        if (k >= 0) self->peer[r] = (tp_peer_t){.ops = s_backends[k], .be = self->inst[k]};
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
    for (int b = 0; b < B_COUNT; b++) s_backends[b]->destroy(&self->inst[b]);
    free(self->peer);
    free((void *)self->peer_sent);
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
    return self->peer[peer].ops ? self->peer[peer].ops->name : "self";
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
    tp_peer_t *p = &self->peer[peer];
    tp_wait_mark(self, peer, 1);
    int rc = p->ops->send_acquire(p->be, peer, buf, timeout_ms);
    if (rc == 0) tp_wait_mark(self, -1, 0); /* a failed wait stays marked: the step's timeout names its peer */
    return rc;
}

int tp_send_commit(tp_t *self, int peer, size_t len)
{
    trace_instant("send", "peer", peer, "bytes", (int64_t)len); /* timeline: one branch when off */
    CHECK(s_check_peer(self, peer));
    if (len > self->slot_bytes) return err_set(ERR_RANGE, "transport: segment of %zu bytes > slot %zu", len, self->slot_bytes);
    tp_peer_t *p = &self->peer[peer];
    CHECK(p->ops->send_commit(p->be, peer, len, self->timeout_ms));
    atomic_fetch_add(&self->sent, len);
    atomic_fetch_add_explicit(&self->peer_sent[peer], len, memory_order_relaxed);
    return 0;
}

int tp_recv_acquire(tp_t *self, int peer, const void **buf, size_t *len, int timeout_ms)
{
    uint64_t tr = trace_t0(); /* timeline: the wait for each received segment */
    int rc = s_check_peer(self, peer);
    if (rc == 0) {
        tp_peer_t *p = &self->peer[peer];
        tp_wait_mark(self, peer, 0);
        rc = p->ops->recv_acquire(p->be, peer, buf, len, timeout_ms);
        if (rc == 0) tp_wait_mark(self, -1, 0);
    }
    trace_x2("recv", tr, "peer", peer, "bytes", rc == 0 ? (int64_t)*len : -1);
    return rc;
}

int tp_recv_release(tp_t *self, int peer)
{
    CHECK(s_check_peer(self, peer));
    tp_peer_t *p = &self->peer[peer];
    size_t len = 0;
    CHECK(p->ops->recv_release(p->be, peer, &len));
    atomic_fetch_add(&self->received, len);
    atomic_fetch_add_explicit(&self->peer_received[peer], len, memory_order_relaxed);
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

size_t tp_auth_ctx(const char *prefix, int from, int to, unsigned char out[128])
{
    size_t n = strlen(prefix);
    if (n > 128 - 9) n = 128 - 9;
    memcpy(out, prefix, n);
    out[n] = '\0';
    uint32_t f = (uint32_t)from, t = (uint32_t)to;
    memcpy(out + n + 1, &f, 4);
    memcpy(out + n + 5, &t, 4);
    return n + 9;
}

void tp_note_traffic(tp_t *self, int peer, uint64_t sent, uint64_t received)
{
    if (!self || peer < 0 || peer >= self->world) return;
    if (sent) atomic_fetch_add_explicit(&self->note_sent[peer], sent, memory_order_relaxed);
    if (received) atomic_fetch_add_explicit(&self->note_received[peer], received, memory_order_relaxed);
}

void tp_peer_counters(tp_t *self, int peer, uint64_t *sent, uint64_t *received)
{
    uint64_t s = 0, r = 0;
    if (self && peer >= 0 && peer < self->world) {
        s = atomic_load(&self->peer_sent[peer]) + atomic_load(&self->note_sent[peer]);
        r = atomic_load(&self->peer_received[peer]) + atomic_load(&self->note_received[peer]);
    }
    if (sent) *sent = s;
    if (received) *received = r;
}
