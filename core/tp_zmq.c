/* tp_zmq.c: ZeroMQ backend of the transport (--transport zmq), kept to compare against plain TCP.
 *
 * Every rank binds one ROUTER (endpoint published under tp/<prefix>/<rank>) and reaches each peer
 * through a DEALER, connected lazily on the first send. The DEALER's first message is a hello ("SBZH",
 * its rank, the peer's, a fresh random nonce and MAC("zmq-hello", nonce, run name, ranks) under the job
 * secret); the ROUTER gives every connection its own routing id (peers cannot pick one) and takes
 * segments only from the connection whose hello proved the secret for that rank, once per rank: a
 * replay fails (another run: another name, which carries a random nonce; this run: the rank is taken).
 * ZMQ_MAXMSGSIZE (the slot size) and finite high-water marks bound what a peer can make us hold; a
 * commit that meets a full queue waits (receiving meanwhile) until the timeout. A slot is a
 * pooled 64-byte aligned buffer: the commit hands it to ZeroMQ zero-copy, with a free callback (run on
 * ZeroMQ's I/O thread) that returns it to the pool. Received messages are pulled off the ROUTER and
 * queued per sender, so a receive can target one peer while others' segments wait; a payload ZeroMQ
 * delivers misaligned is copied once into an aligned bounce buffer. Frames are validated (routing id
 * length, rank range, frame count, size); anything else is dropped and counted. ZeroMQ's own
 * heartbeats would close a silent peer's connection unseen by a ROUTER, so liveness comes from
 * core/tp_hb.c as for tcp: authenticated UDP beats from a helper thread (keys tp/<prefix>/hb-zmq/<rank>);
 * a wait fails with ERR_PEER once the peer it waits on has sent none for half the timeout (1 to 10 s). */
#include "core/proc.h"
#include "core/tp_backend.h"
#include "core/zsec.h"
#include "core/tp_hb.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct qmsg {
    zmq_msg_t msg;
    struct qmsg *next;
} qmsg_t;

#define HELLO_TAG "SBZH"
#define HELLO_BYTES (12 + AUTH_NONCE_BYTES + AUTH_MAC_BYTES)   /* tag, from, to, nonce, MAC */

typedef struct {
    void *dealer;
    unsigned char rid[256];  /* the ROUTER's routing id of this peer's authenticated connection */
    size_t rlen;             /* 0 until its hello arrived */
    void *pending;      /* acquired send buffer */
    qmsg_t *qhead, *qtail;
    qmsg_t *cur;        /* acquired receive */
    void *bounce;       /* aligned copy of a misaligned payload */
} zpeer_t;

typedef struct {
    int rank, world;
    size_t slot_bytes;
    int hwm;
    char prefix[96];
    auth_t auth;
    store_t *store;
    void *zctx, *router;
    zsec_t *zap;                 /* the ZAP handler of zctx (NULL without a secret) */
    zpeer_t *p;
    pthread_mutex_t pool_mu;
    void **pool;
    int npool, pool_cap;
    uint64_t rejected;
    tp_hb_t *hb;                 /* heartbeats */
} zmq_be_t;

static void s_pool_free(void *data, void *hint)
{
    zmq_be_t *self = hint;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool < self->pool_cap) self->pool[self->npool++] = data;
    else free(data);
    pthread_mutex_unlock(&self->pool_mu);
}

static void *s_pool_get(zmq_be_t *self)
{
    void *p = NULL;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool > 0) p = self->pool[--self->npool];
    pthread_mutex_unlock(&self->pool_mu);
    return p ? p : aligned_alloc(64, (self->slot_bytes + 63) & ~(size_t)63);
}

static void s_destroy(void **be_p)
{
    zmq_be_t *self = be_p ? *be_p : NULL;
    if (!self) return;
    tp_hb_close(&self->hb);
    for (int r = 0; self->p && r < self->world; r++) {
        zpeer_t *zp = &self->p[r];
        if (zp->dealer) zmq_close(zp->dealer);
        free(zp->pending);
        free(zp->bounce);
        if (zp->cur) { zmq_msg_close(&zp->cur->msg); free(zp->cur); }
        while (zp->qhead) {
            qmsg_t *q = zp->qhead;
            zp->qhead = q->next;
            zmq_msg_close(&q->msg);
            free(q);
        }
    }
    if (self->router) zmq_close(self->router);
    zsec_close(&self->zap);
    if (self->zctx) zmq_ctx_term(self->zctx); /* waits for zero-copy sends to release their buffers */
    for (int i = 0; i < self->npool; i++) free(self->pool[i]);
    free(self->pool);
    pthread_mutex_destroy(&self->pool_mu);
    auth_wipe(&self->auth);
    free(self->p);
    free(self);
    *be_p = NULL;
}

static int s_open(void **be_p, const tp_backend_cfg_t *cfg)
{
    int rc = 0;
    zmq_be_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    void *be = self;
    self->rank = cfg->env->rank;
    self->world = cfg->env->world;
    self->slot_bytes = cfg->slot_bytes;
    self->hwm = 4 * cfg->slots + 8;
    if (cfg->env->boot) self->auth = cfg->env->boot->auth;
    self->store = cfg->env->store;
    snprintf(self->prefix, sizeof self->prefix, "%s", cfg->prefix);
    pthread_mutex_init(&self->pool_mu, NULL);
    self->pool_cap = 2 * cfg->slots + 4;
    self->pool = calloc((size_t)self->pool_cap, sizeof(void *));
    self->p = calloc((size_t)self->world, sizeof(zpeer_t));
    if (!self->pool || !self->p) { rc = ERR_NOMEM; goto fail; }
    self->zctx = zmq_ctx_new();
    if (self->zctx) CHECK_GOTO(rc, zsec_open(&self->zap, self->zctx, &self->auth, "transport"), fail);
    self->router = self->zctx ? zmq_socket(self->zctx, ZMQ_ROUTER) : NULL;
    if (!self->router) { rc = err_set(ERR_SYS, "zmq: %s", zmq_strerror(zmq_errno())); goto fail; }
    CHECK_GOTO(rc, zsec_server(&self->auth, self->router, "tp"), fail);
    int zero = 0, hwm = self->hwm;
    int64_t maxmsg = (int64_t)(self->slot_bytes > HELLO_BYTES ? self->slot_bytes : HELLO_BYTES) + ZSEC_OVERHEAD;
    zmq_setsockopt(self->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(self->router, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(self->router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(self->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    char addr[128], ep[256];
    CHECK_GOTO(rc, boot_local_addr(cfg->env->boot, addr, sizeof addr), fail);
    snprintf(ep, sizeof ep, "tcp://%s:*", addr);
    if (zmq_bind(self->router, ep) != 0) {
        rc = err_set(ERR_SYS, "transport: bind %s: %s", ep, zmq_strerror(zmq_errno()));
        goto fail;
    }
    size_t len = sizeof ep;
    zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, ep, &len);
    char key[160], hep[160];
    /* the beat address goes first: a peer that finds our ROUTER finds it too */
    tp_hb_cfg_t hc = {.rank = self->rank, .world = self->world, .addr = addr, .prefix = self->prefix,
                      .role = "zmq-beat", .auth = &self->auth, .limit_ms = proc_stop_limit_ms(cfg->env->timeout_ms)};
    CHECK_GOTO(rc, tp_hb_open(&self->hb, &hc, hep, sizeof hep), fail);
    snprintf(key, sizeof key, "tp/%s/hb-zmq/%d", self->prefix, self->rank);
    CHECK_GOTO(rc, store_set(self->store, key, hep, strlen(hep)), fail);
    snprintf(key, sizeof key, "tp/%s/%d", self->prefix, self->rank);
    CHECK_GOTO(rc, store_set(self->store, key, ep, strlen(ep)), fail);
    *be_p = self;
    return 0;
fail:
    s_destroy(&be);
    return rc;
}

/* What a hello's MAC covers besides the nonce: this run's name and the ranks (from sends to to). */
/* The rank whose authenticated connection has this routing id, or -1. */
static int s_rank_of(const zmq_be_t *self, const void *rid, size_t rlen)
{
    for (int r = 0; r < self->world; r++)
        if (self->p[r].rlen == rlen && !memcmp(self->p[r].rid, rid, rlen)) return r;
    return -1;
}

/* A connection's first message: a hello for this rank with a valid MAC binds its routing id to the
 * rank it claims (once). Returns 1 when accepted. */
static int s_hello(zmq_be_t *self, const void *rid, size_t rlen, zmq_msg_t *m)
{
    const unsigned char *h = zmq_msg_data(m);
    if (zmq_msg_size(m) != HELLO_BYTES || memcmp(h, HELLO_TAG, 4)) return 0;
    uint32_t from, to;
    memcpy(&from, h + 4, 4);
    memcpy(&to, h + 8, 4);
    if (from >= (uint32_t)self->world || (int)from == self->rank || to != (uint32_t)self->rank ||
        self->p[from].rlen || rlen == 0 || rlen > sizeof self->p[from].rid)
        return 0;
    unsigned char ctx[128];
    size_t cl = tp_auth_ctx(self->prefix, (int)from, self->rank, ctx);
    if (auth_verify(&self->auth, "zmq-hello", h + 12, NULL, ctx, cl, h + 12 + AUTH_NONCE_BYTES) < 0) {
        LOG_W("transport: rejected a connection claiming to be rank %u: it could not prove it knows the job secret",
              (unsigned)from);
        return 0;
    }
    memcpy(self->p[from].rid, rid, rlen);
    self->p[from].rlen = rlen;
    tp_hb_watch(self->hb, (int)from);
    return 1;
}

/* Connect the DEALER towards peer once its endpoint is in the store. */
static int s_dealer(zmq_be_t *self, int peer, uint64_t dl)
{
    zpeer_t *zp = &self->p[peer];
    if (zp->dealer) return 0;
    char key[160];
    snprintf(key, sizeof key, "tp/%s/%d", self->prefix, peer);
    void *val = NULL;
    size_t len = 0;
    int rc = store_get(self->store, key, &val, &len, deadline_left_ms(dl));
    if (rc < 0) { free(val); return err_set(rc, "transport: no endpoint from rank %d", peer); }
    char ep[256];
    snprintf(ep, sizeof ep, "%.*s", (int)(len < 255 ? len : 255), (char *)val);
    free(val);
    snprintf(key, sizeof key, "tp/%s/hb-zmq/%d", self->prefix, peer);
    if ((rc = store_get(self->store, key, &val, &len, deadline_left_ms(dl))) < 0) {
        free(val);
        return err_set(rc, "transport: no heartbeat address from rank %d", peer);
    }
    char hep[160];
    snprintf(hep, sizeof hep, "%.*s", (int)(len < 159 ? len : 159), (char *)val);
    free(val);
    CHECK(tp_hb_peer(self->hb, peer, hep));
    void *s = zmq_socket(self->zctx, ZMQ_DEALER);
    if (!s) return err_set(ERR_SYS, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int zrc = zsec_client(&self->auth, s, "tp");
    if (zrc < 0) { zmq_close(s); return zrc; }
    int zero = 0, one = 1, hwm = self->hwm;
    int64_t maxmsg = 4096; /* the peer's ROUTER never sends to us: room for CURVE's WELCOME and READY only */
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zmq_connect(s, ep) != 0) {
        zmq_close(s);
        return err_set(ERR_SYS, "connect to rank %d at %s: %s", peer, ep, zmq_strerror(zmq_errno()));
    }
    unsigned char hello[HELLO_BYTES], ctx[128];
    uint32_t from = (uint32_t)self->rank, to = (uint32_t)peer;
    memcpy(hello, HELLO_TAG, 4);
    memcpy(hello + 4, &from, 4);
    memcpy(hello + 8, &to, 4);
    auth_challenge(hello + 12);
    auth_respond(&self->auth, "zmq-hello", hello + 12, NULL, ctx, tp_auth_ctx(self->prefix, self->rank, peer, ctx),
                 hello + 12 + AUTH_NONCE_BYTES);
    if (zmq_send(s, hello, sizeof hello, ZMQ_DONTWAIT) != (int)sizeof hello) {
        zmq_close(s);
        return err_set(ERR_SYS, "hello to rank %d at %s: %s", peer, ep, zmq_strerror(zmq_errno()));
    }
    zp->dealer = s;
    tp_hb_watch(self->hb, peer);
    return 0;
}

/* Pull one message off the ROUTER into its sender's queue. */
static int s_pump(zmq_be_t *self, int timeout_ms)
{
    zmq_pollitem_t it = {.socket = self->router, .events = ZMQ_POLLIN};
    int n = zmq_poll(&it, 1, timeout_ms);
    if (n < 0) return zmq_errno() == EINTR ? 0 : err_set(ERR_SYS, "zmq_poll: %s", zmq_strerror(zmq_errno()));
    if (n == 0) return 0;
    zmq_msg_t idm;
    zmq_msg_init(&idm);
    if (zmq_msg_recv(&idm, self->router, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&idm); return 0; }
    int more = zmq_msg_more(&idm);
    int from = s_rank_of(self, zmq_msg_data(&idm), zmq_msg_size(&idm));
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
    if (ok && !extra && from < 0 && s_hello(self, zmq_msg_data(&idm), zmq_msg_size(&idm), &q->msg)) {
        zmq_msg_close(&idm);
        zmq_msg_close(&q->msg);
        free(q);
        return 0;
    }
    zmq_msg_close(&idm);
    if (!ok || extra || from < 0 || from >= self->world || from == self->rank ||
        zmq_msg_size(&q->msg) > self->slot_bytes) {
        if (self->rejected++ < 10)
            LOG_W("transport: dropped a malformed or unauthenticated segment (sender %d)", from);
        zmq_msg_close(&q->msg);
        free(q);
        return 0;
    }
    zpeer_t *zp = &self->p[from];
    if (zp->qtail) zp->qtail->next = q;
    else zp->qhead = q;
    zp->qtail = q;
    return 0;
}

static int s_send_acquire(void *be, int peer, void **buf, int timeout_ms)
{
    zmq_be_t *self = be;
    zpeer_t *zp = &self->p[peer];
    CHECK(s_dealer(self, peer, deadline_in(timeout_ms)));
    if (!zp->pending) zp->pending = s_pool_get(self);
    if (!zp->pending) return ERR_NOMEM;
    *buf = zp->pending;
    return 0;
}

static int s_send_commit(void *be, int peer, size_t len, int timeout_ms)
{
    zmq_be_t *self = be;
    zpeer_t *zp = &self->p[peer];
    if (!zp->pending) return err_set(ERR_STATE, "transport: commit without acquire");
    zmq_msg_t m;
    zmq_msg_init_data(&m, zp->pending, len, s_pool_free, self);
    zp->pending = NULL;
    uint64_t dl = deadline_in(timeout_ms);
    while (zmq_msg_send(&m, zp->dealer, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno(), left = deadline_left_ms(dl), rc = 0;
        if (e != EAGAIN && e != EINTR) rc = err_set(ERR_PEER, "transport: send to rank %d: %s", peer, zmq_strerror(e));
        else if (left == 0) rc = err_set(ERR_TIMEOUT, "transport: rank %d stopped reading from rank %d (zmq)", peer, self->rank);
        else if ((rc = tp_hb_check(self->hb, peer)) == 0) rc = s_pump(self, 1); /* the queue towards peer is full: keep receiving meanwhile */
        if (rc < 0) {
            zmq_msg_close(&m);
            return rc;
        }
    }
    return 0;
}

static int s_recv_acquire(void *be, int peer, const void **buf, size_t *len, int timeout_ms)
{
    zmq_be_t *self = be;
    zpeer_t *zp = &self->p[peer];
    if (!zp->cur) {
        uint64_t dl = deadline_in(timeout_ms);
        while (!zp->qhead) {
            int left = deadline_left_ms(dl);
            if (left == 0) return err_set(ERR_TIMEOUT, "transport: rank %d waited too long for rank %d (zmq)", self->rank, peer);
            CHECK(tp_hb_check(self->hb, peer));
            CHECK(s_pump(self, left < 0 || left > TP_SLICE_MS ? TP_SLICE_MS : left));
        }
        zp->cur = zp->qhead;
        zp->qhead = zp->cur->next;
        if (!zp->qhead) zp->qtail = NULL;
    }
    *buf = zmq_msg_data(&zp->cur->msg);
    *len = zmq_msg_size(&zp->cur->msg);
    if (((uintptr_t)*buf & 63) && *len) {
        /* ZeroMQ may hand a payload at any address: reductions want aligned elements */
        if (!zp->bounce) zp->bounce = aligned_alloc(64, (self->slot_bytes + 63) & ~(size_t)63);
        if (!zp->bounce) return ERR_NOMEM;
        memcpy(zp->bounce, *buf, *len);
        *buf = zp->bounce;
    }
    return 0;
}

static int s_recv_release(void *be, int peer, size_t *len)
{
    zmq_be_t *self = be;
    zpeer_t *zp = &self->p[peer];
    if (!zp->cur) return err_set(ERR_STATE, "transport: release without acquire");
    *len = zmq_msg_size(&zp->cur->msg);
    zmq_msg_close(&zp->cur->msg);
    free(zp->cur);
    zp->cur = NULL;
    return 0;
}

const tp_backend_t tp_backend_zmq = {
    .name = "zmq",
    .open = s_open,
    .destroy = s_destroy,
    .send_acquire = s_send_acquire,
    .send_commit = s_send_commit,
    .recv_acquire = s_recv_acquire,
    .recv_release = s_recv_release,
};
