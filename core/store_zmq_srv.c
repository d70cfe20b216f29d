/* store_zmq_srv.c: the tcp:// / env:// store's server on rank 0 (see core/store_zmq.c for the
 * protocol): the key-value map, the waiters, one handler per op, the authentication of HELLOs, and the
 * thread that serves the ROUTER; plus the message helpers the client shares (core/store_zmq.h). */
#include "core/store_zmq.h"
#include "core/store_zmq_int.h"
#include "core/store.h"
#include "core/auth.h"
#include "core/zsec.h"
#include "core/store_conn.h"
#include "core/hash.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAL_MAX 64                 /* challenges outstanding at once (oldest reused first) */

/* ---------------- message helpers (shared with the client) ---------------- */

/* Receive one whole multipart message (frames past MP_MAX are counted in extra and dropped). */
int szmq_mp_recv(void *sock, mp_t *mp, int flags)
{
    mp->n = 0;
    mp->extra = 0;
    for (;;) {
        zmq_msg_t *m = mp->n < MP_MAX ? &mp->m[mp->n] : NULL, scratch;
        if (!m) m = &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, sock, mp->n || mp->extra ? 0 : flags) < 0) {
            zmq_msg_close(m);
            return mp->n ? 0 : -1;
        }
        int more = zmq_msg_more(m);
        if (m == &scratch) { zmq_msg_close(m); mp->extra++; }
        else mp->n++;
        if (!more) return 0;
    }
}

void szmq_mp_close(mp_t *mp)
{
    for (int i = 0; i < mp->n; i++) zmq_msg_close(&mp->m[i]);
    mp->n = 0;
}

int szmq_poll_in(void *sock, int ms)
{
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    for (;;) {
        int rc = zmq_poll(&it, 1, ms);
        if (rc >= 0) return rc > 0 && (it.revents & ZMQ_POLLIN);
        if (zmq_errno() != EINTR) return -1;
    }
}


/* ---------------- the server's map: chained hash, FNV-1a buckets, grows 4x ---------------- */

typedef struct ent { struct ent *next; char *key; void *val; size_t len; } ent_t;
typedef struct { ent_t **b; size_t nb, n; } map_t;

static ent_t **s_map_slot(map_t *m, const char *key)
{
    ent_t **e = &m->b[hash_str(key) & (m->nb - 1)];
    while (*e && strcmp((*e)->key, key)) e = &(*e)->next;
    return e;
}

static int s_map_put(map_t *m, const char *key, const void *val, size_t len)
{
    if (!m->b) {
        m->nb = 64;
        if (!(m->b = calloc(m->nb, sizeof *m->b))) return ERR_NOMEM;
    }
    if (m->n >= m->nb * 2) { /* grow */
        size_t nb = m->nb * 4;
        ent_t **b = calloc(nb, sizeof *b);
        if (b) {
            for (size_t i = 0; i < m->nb; i++)
                for (ent_t *e = m->b[i], *nx; e; e = nx) {
                    nx = e->next;
                    size_t h = hash_str(e->key) & (nb - 1);
                    e->next = b[h];
                    b[h] = e;
                }
            free(m->b);
            m->b = b;
            m->nb = nb;
        }
    }
    void *copy = malloc(len ? len : 1);
    if (!copy) return ERR_NOMEM;
    if (len) memcpy(copy, val, len);
    ent_t **slot = s_map_slot(m, key);
    if (*slot) {
        free((*slot)->val);
        (*slot)->val = copy;
        (*slot)->len = len;
        return 0;
    }
    ent_t *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) { free(e); free(copy); return ERR_NOMEM; }
    e->val = copy;
    e->len = len;
    *slot = e;
    m->n++;
    return 0;
}

static void s_map_del(map_t *m, const char *key)
{
    if (!m->b) return;
    ent_t **slot = s_map_slot(m, key), *e = *slot;
    if (!e) return;
    *slot = e->next;
    free(e->key); free(e->val); free(e);
    m->n--;
}

static ent_t *s_map_get(map_t *m, const char *key) { return m->b ? *s_map_slot(m, key) : NULL; }

static void s_map_free(map_t *m)
{
    for (size_t i = 0; i < m->nb; i++)
        for (ent_t *e = m->b[i], *nx; e; e = nx) { nx = e->next; free(e->key); free(e->val); free(e); }
    free(m->b);
    memset(m, 0, sizeof *m);
}

/* ---------------- the server's state, replies and waiters ---------------- */

/* A 'G' or 'J' request held until it can be answered. */
typedef struct {
    unsigned char rid[256]; size_t rlen;
    uint64_t seq, deadline;
    char op;                 /* 'G' or 'J' */
    char key[STORE_KEY_MAX + 1];
} waiter_t;

/* A challenge the server answered, waiting for that connection's HELLO. */
typedef struct {
    unsigned char rid[256]; size_t rlen;
    unsigned char nc[AUTH_NONCE_BYTES], ns[AUTH_NONCE_BYTES];
    int live;
} chal_t;

struct server {
    void *router;
    zsec_t *zap;                 /* the ZAP handler of the store's context (NULL without a secret) */
    auth_t auth;
    chal_t chal[CHAL_MAX];
    int chal_next;
    int world;
    char job[64];
    int timeout_ms;
    unsigned char (*rid)[256];   /* routing id of each joined rank */
    size_t *rlen;
    unsigned char *joined, *left;
    int njoined, nleft;
    map_t map;
    waiter_t *w;
    size_t nw, capw;
    char rejected[256];          /* the last HELLO the server turned away, for timeout details */
    void *mon;                   /* the router's monitor (a ZMQ_PAIR): connections accepted and gone, handshakes failed */
    sconn_t *conns;              /* the bounds on connections (core/store_conn.h) */
    uint64_t hs_failed, hs_failed_at, hs_said, hs_said_at; /* failures seen, the latest's now_ns, those said, when */
    int hs_pending;              /* 1: the latest failure's connection's end (and so its peer) is not read yet */
    char hs_addr[80];            /* the latest refused peer whose address was read ("ADDR:PORT"), or ""; hs_why: why */
    const char *hs_why;
    atomic_int stop, abort_now;
    pthread_t thr;
};

static void s_reply(server_t *s, const void *rid, size_t rlen, int status, uint64_t seq, const void *val, size_t len)
{
    unsigned char st[4], sq[8];
    szmq_put32(st, (uint32_t)status);
    szmq_put64(sq, seq);
    if (zmq_send(s->router, rid, rlen, ZMQ_SNDMORE) < 0) return;
    zmq_send(s->router, st, 4, ZMQ_SNDMORE);
    zmq_send(s->router, sq, 8, ZMQ_SNDMORE);
    zmq_send(s->router, val, len, 0);
}

static int s_rank_of(server_t *s, const void *rid, size_t rlen)
{
    for (int r = 0; r < s->world; r++)
        if (s->joined[r] && s->rlen[r] == rlen && !memcmp(s->rid[r], rid, rlen)) return r;
    return -1;
}

static int s_add_waiter(server_t *s, const void *rid, size_t rlen, uint64_t seq, char op, const char *key, int wait_ms)
{
    if (s->nw == s->capw) {
        size_t cap = s->capw ? s->capw * 2 : 16;
        waiter_t *w = realloc(s->w, cap * sizeof *w);
        if (!w) return ERR_NOMEM;
        s->w = w;
        s->capw = cap;
    }
    waiter_t *w = &s->w[s->nw++];
    memcpy(w->rid, rid, rlen);
    w->rlen = rlen;
    w->seq = seq;
    w->op = op;
    snprintf(w->key, sizeof w->key, "%s", key);
    w->deadline = deadline_in(wait_ms < 0 ? 0 : wait_ms);
    return 0;
}

/* A peer that fails the CURVE handshake (a rank with another job secret, or none) is turned away before it can
 * say which rank it is: nothing it sends can be told from an outsider's, so a failure never ends the join (it once
 * did, 2 s after: anyone who could reach the port could stop a job while its ranks arrived). Rank 0 says it at
 * once (once an interval: how many, from where, why, who is missing); a join that times out names it too. */
static void s_refusal_add(const server_t *s, char *d, size_t len) /* appends "N connections ... refused (why)" */
{
    char from[112];
    if (s->hs_addr[0]) snprintf(from, sizeof from, s->hs_failed > 1 ? " (latest from %s)" : " from %s", s->hs_addr);
    else snprintf(from, sizeof from, " (peer gone before its address was read)");
    size_t n = strlen(d);
    snprintf(d + n, len - n, "%llu connection%s%s refused (%s: do all ranks share SYNCBENCH_JOB_SECRET or "
             "SYNCBENCH_JOB_SECRET_FILE?)", (unsigned long long)s->hs_failed, s->hs_failed > 1 ? "s" : "", from, s->hs_why);
}

static void s_refusal_say(server_t *s)
{
    uint64_t now = now_ns(); /* said once its peer is read (or 200 ms after), then once an interval */
    if (s->hs_failed == s->hs_said || (s->hs_pending > 0 && now - s->hs_failed_at < 200000000u) ||
        (s->hs_said && now - s->hs_said_at < (uint64_t)ZSEC_REPORT_MS * 1000000u)) return;
    char d[400] = "", miss[200] = "";
    s_refusal_add(s, d, sizeof d);
    if (s->njoined < s->world) store_missing_ranks(s->joined, s->world, miss, sizeof miss);
    LOG_W("store: %s%s%s%s", d, miss[0] ? "; still waiting for rank(s) " : "", miss, miss[0] ? " until the join's timeout" : "");
    s->hs_said = s->hs_failed;
    s->hs_said_at = now;
}

/* Why a handshake failed (a monitor event and its value), for rank 0's error line. */
static const char *s_refusal_why(const server_t *s, unsigned ev, int32_t val)
{
    if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) return "its client key is not this job's: ZAP refused it";
    if (val == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        return s->auth.set ? "it has no job secret" : "it has a job secret and rank 0 has none";
    if (val == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC || val == ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE) return "wrong job secret";
    return "its CURVE handshake broke the protocol";
}

/* Read the router monitor: accepted and ended connections go to the bounds (sconn_event); a protocol or ZAP
 * handshake failure (a peer with another secret, or none) is counted with its time, reason and peer: libzmq reports
 * it without a descriptor, then (same I/O thread, so next) that connection's end with it, whose peer the bounds
 * recorded at its accept. A handshake merely dropped (the peer left, or the bounds closed it) is not counted. */
static void s_monitor(server_t *s)
{
    for (int i = 0; s->mon && i < 4096; i++) {
        zmq_msg_t a, b;
        zmq_msg_init(&a);
        zmq_msg_init(&b);
        if (zmq_msg_recv(&a, s->mon, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&a); zmq_msg_close(&b); return; }
        if (zmq_msg_more(&a)) zmq_msg_recv(&b, s->mon, ZMQ_DONTWAIT);
        if (zmq_msg_size(&a) >= 6) {
            uint16_t ev;
            int32_t val;
            memcpy(&ev, zmq_msg_data(&a), 2);
            memcpy(&val, (const char *)zmq_msg_data(&a) + 2, 4);
            if (ev & (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED)) {
                if (ev == ZMQ_EVENT_DISCONNECTED && s->hs_pending > 0) {
                    s->hs_pending--;
                    sconn_peer(s->conns, val, s->hs_addr, sizeof s->hs_addr);
                }
                sconn_event(s->conns, ev, val);
            } else if (ev & (ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
                s->hs_failed++;
                s->hs_pending = 1; /* its end comes next; an earlier failure's end never came: it has no peer */
                s->hs_failed_at = now_ns();
                s->hs_why = s_refusal_why(s, ev, val);
            }
        }
        zmq_msg_close(&a);
        zmq_msg_close(&b);
    }
}

/* Answer waiters that can be answered now (key present, everyone joined) or whose time is up. A 'J'
 * that times out is answered "K W missing-ranks[; turned away: ...][; N connections ... refused (why)]". */
static void s_wake(server_t *s)
{
    for (size_t i = 0; i < s->nw;) {
        waiter_t *w = &s->w[i];
        int done = 1;
        if (w->op == 'G') {
            ent_t *e = s_map_get(&s->map, w->key);
            if (e) s_reply(s, w->rid, w->rlen, 0, w->seq, e->val, e->len);
            else if (deadline_passed(w->deadline)) s_reply(s, w->rid, w->rlen, ERR_TIMEOUT, w->seq, "", 0);
            else done = 0;
        } else {
            if (s->njoined == s->world) s_reply(s, w->rid, w->rlen, 0, w->seq, "", 0);
            else if (deadline_passed(w->deadline)) {
                char miss[200], d[512];
                store_missing_ranks(s->joined, s->world, miss, sizeof miss);
                int n = snprintf(d, sizeof d, "%d %d %s", s->njoined, s->world, miss);
                if (s->rejected[0] && n > 0 && (size_t)n < sizeof d)
                    snprintf(d + n, sizeof d - (size_t)n, "; turned away: %s", s->rejected);
                if (s->hs_failed && strlen(d) + 2 < sizeof d) s_refusal_add(s, strcat(d, "; "), sizeof d);
                s_reply(s, w->rid, w->rlen, ERR_TIMEOUT, w->seq, d, strlen(d));
            } else done = 0;
        }
        if (done) s->w[i] = s->w[--s->nw];
        else i++;
    }
}

static int s_next_wait_ms(server_t *s)
{
    int ms = 100;
    for (size_t i = 0; i < s->nw; i++) {
        int l = deadline_left_ms(s->w[i].deadline);
        if (l >= 0 && l < ms) ms = l;
    }
    return ms;
}

/* ---------------- request handlers: one per op ---------------- */

/* A well-formed request (frame sizes checked, key NUL-free and NUL-terminated here). */
typedef struct {
    const void *rid; size_t rlen;
    uint64_t seq;
    char op;
    const char *key; size_t klen;
    const unsigned char *val; size_t vlen;
    int rank;                /* the sender's rank; -1 before its HELLO */
} req_t;

static void s_ok(server_t *s, const req_t *q, const void *val, size_t len) { s_reply(s, q->rid, q->rlen, 0, q->seq, val, len); }

static void s_fail(server_t *s, const req_t *q, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void s_fail(server_t *s, const req_t *q, int code, const char *fmt, ...)
{
    char d[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    s_reply(s, q->rid, q->rlen, code, q->seq, d, strlen(d));
}

/* 'H': key = job, value = i32 rank, i32 world. Checks job, world and rank; a repeated hello from the
 * same connection is answered 0. */
static chal_t *s_chal_of(server_t *s, const void *rid, size_t rlen)
{
    for (int i = 0; i < CHAL_MAX; i++)
        if (s->chal[i].live && s->chal[i].rlen == rlen && !memcmp(s->chal[i].rid, rid, rlen)) return &s->chal[i];
    return NULL;
}

/* 'C': value = the client's nonce; answers the server's nonce and MAC("store-server", nc, ns, job). */
static void s_on_challenge(server_t *s, const req_t *q)
{
    if (q->vlen != AUTH_NONCE_BYTES) { s_fail(s, q, ERR_PROTO, "challenge value must be %d bytes", AUTH_NONCE_BYTES); return; }
    chal_t *c = s_chal_of(s, q->rid, q->rlen);
    if (!c) {
        c = &s->chal[s->chal_next];
        s->chal_next = (s->chal_next + 1) % CHAL_MAX;
    }
    memcpy(c->rid, q->rid, q->rlen);
    c->rlen = q->rlen;
    memcpy(c->nc, q->val, AUTH_NONCE_BYTES);
    auth_challenge(c->ns);
    c->live = 1;
    unsigned char out[AUTH_NONCE_BYTES + AUTH_MAC_BYTES];
    memcpy(out, c->ns, AUTH_NONCE_BYTES);
    auth_respond(&s->auth, "store-server", c->nc, c->ns, s->job, strlen(s->job), out + AUTH_NONCE_BYTES);
    s_ok(s, q, out, sizeof out);
}

/* With a secret: the HELLO must carry MAC("store-client", nc, ns, job \0 rank world) for this
 * connection's challenge (used up either way). 0 or ERR_AUTH (answered). */
static int s_hello_auth(server_t *s, const req_t *q)
{
    int r = q->vlen >= 4 ? (int)szmq_get32(q->val) : -1;
    chal_t *c = s_chal_of(s, q->rid, q->rlen);
    int ok = 0;
    if (c && q->vlen == 8 + AUTH_MAC_BYTES) {
        unsigned char ctx[64 + 8];
        size_t jl = strlen(s->job);
        memcpy(ctx, s->job, jl + 1);
        memcpy(ctx + jl + 1, q->val, 8);
        ok = auth_verify(&s->auth, "store-client", c->nc, c->ns, ctx, jl + 9, q->val + 8) == 0;
    }
    if (c) c->live = 0;
    if (ok) return 0;
    snprintf(s->rejected, sizeof s->rejected, "a rank %d without the job secret", r);
    s_fail(s, q, ERR_AUTH, "rank %d could not prove it knows the job secret: turned away (%s)", r,
           q->vlen == 8 ? "it has none: set SYNCBENCH_JOB_SECRET the same on every rank"
                        : "a different SYNCBENCH_JOB_SECRET, or a replayed hello");
    return ERR_AUTH;
}

static void s_on_hello(server_t *s, const req_t *q)
{
    if (s->auth.set && s_hello_auth(s, q) < 0) return;
    if (q->vlen != 8 && q->vlen != 8 + AUTH_MAC_BYTES) { s_fail(s, q, ERR_PROTO, "HELLO value must be 8 bytes (40 with a MAC)"); return; }
    int r = (int)szmq_get32(q->val), w = (int)szmq_get32(q->val + 4);
    if (strcmp(q->key, s->job)) {
        snprintf(s->rejected, sizeof s->rejected, "a rank %d of job '%.64s'", r, q->key);
        s_fail(s, q, ERR_MISMATCH, "the store at this address serves job '%s', not job '%s' "
               "(SYNCBENCH_JOB differs between ranks, or another run uses this port)", s->job, q->key);
        return;
    }
    if (w != s->world) {
        snprintf(s->rejected, sizeof s->rejected, "a rank %d with world size %d", r, w);
        s_fail(s, q, ERR_MISMATCH, "rank %d has world size %d but rank 0 started this job "
               "with world size %d: every rank must use the same WORLD_SIZE", r, w, s->world);
        return;
    }
    if (r < 0 || r >= s->world) { s_fail(s, q, ERR_RANGE, "rank %d is outside 0..%d", r, s->world - 1); return; }
    if (s->joined[r]) {
        if (s->rlen[r] == q->rlen && !memcmp(s->rid[r], q->rid, q->rlen)) { s_ok(s, q, "", 0); return; }
        snprintf(s->rejected, sizeof s->rejected, "a second rank %d", r);
        s_fail(s, q, ERR_DUP, "rank %d has already joined job '%s': two processes have the same rank", r, s->job);
        return;
    }
    int mine = s_rank_of(s, q->rid, q->rlen);
    if (mine >= 0) { s_fail(s, q, ERR_STATE, "this connection already joined as rank %d", mine); return; }
    s->joined[r] = 1;
    memcpy(s->rid[r], q->rid, q->rlen);
    s->rlen[r] = q->rlen;
    s->njoined++;
    LOG_D("store: rank %d joined (%d of %d)", r, s->njoined, s->world);
    s_ok(s, q, "", 0);
}

/* 'J' (everyone joined) and 'G' (key set): value = i32 wait ms; answered later by s_wake. */
static void s_on_wait(server_t *s, const req_t *q)
{
    if (q->vlen != 4) s_fail(s, q, ERR_PROTO, "wait value must be 4 bytes");
    else if (q->op == 'G' && !q->klen) s_fail(s, q, ERR_PROTO, "empty key");
    else if (s_add_waiter(s, q->rid, q->rlen, q->seq, q->op, q->key, (int)szmq_get32(q->val)) < 0)
        s_fail(s, q, ERR_NOMEM, "store server out of memory");
}

static void s_on_set(server_t *s, const req_t *q)
{
    if (!q->klen) { s_fail(s, q, ERR_PROTO, "empty key"); return; }
    if (s_map_put(&s->map, q->key, q->val, q->vlen) < 0) { s_fail(s, q, ERR_NOMEM, "store server out of memory"); return; }
    s_ok(s, q, "", 0);
}

static void s_on_del(server_t *s, const req_t *q) { s_map_del(&s->map, q->key); s_ok(s, q, "", 0); }

/* 'A': value = i64 delta; answers the new value as i64. */
static void s_on_add(server_t *s, const req_t *q)
{
    if (q->vlen != 8 || !q->klen) { s_fail(s, q, ERR_PROTO, "add needs a key and an 8-byte delta"); return; }
    ent_t *e = s_map_get(&s->map, q->key);
    int64_t v = 0;
    char num[32];
    int n = store_counter_add(q->key, e ? e->val : NULL, e ? e->len : 0, (int64_t)szmq_get64(q->val), &v, num);
    if (n < 0) { s_fail(s, q, n, "%s", err_detail()); return; }
    if (s_map_put(&s->map, q->key, num, (size_t)n) < 0) { s_fail(s, q, ERR_NOMEM, "store server out of memory"); return; }
    unsigned char out[8];
    szmq_put64(out, (uint64_t)v);
    s_ok(s, q, out, 8);
}

/* 'L': the rank is done; the server stops once every joined rank has left. */
static void s_on_leave(server_t *s, const req_t *q)
{
    if (!s->left[q->rank]) { s->left[q->rank] = 1; s->nleft++; }
    s_ok(s, q, "", 0);
}

static const struct {
    char op;
    int  needs_hello;        /* only from a connection that has joined */
    void (*fn)(server_t *s, const req_t *q);
} s_handlers[] = {
    {'C', 0, s_on_challenge}, {'H', 0, s_on_hello}, {'J', 1, s_on_wait}, {'G', 1, s_on_wait}, {'S', 1, s_on_set},
    {'A', 1, s_on_add},   {'D', 1, s_on_del},  {'L', 1, s_on_leave},
};

/* Validate one request's frames, then dispatch it. Anything malformed is answered ERR_PROTO; a request
 * before HELLO (unknown ops included) ERR_STATE; an unknown op from a joined rank ERR_PROTO. */
static void s_handle(server_t *s, mp_t *mp)
{
    if (mp->n < 1) return;
    req_t q = {.rid = zmq_msg_data(&mp->m[0]), .rlen = zmq_msg_size(&mp->m[0]), .rank = -1};
    if (q.rlen == 0 || q.rlen > 255) return; /* not a ROUTER identity we can answer */
    if (mp->n >= 3 && zmq_msg_size(&mp->m[2]) == 8) q.seq = szmq_get64(zmq_msg_data(&mp->m[2]));
    if (mp->n != 5 || mp->extra) {
        s_fail(s, &q, ERR_PROTO, "store request has %d frames, expected 4 (op, seq, key, value)", mp->n + mp->extra - 1);
        return;
    }
    if (zmq_msg_size(&mp->m[1]) != 1 || zmq_msg_size(&mp->m[2]) != 8) {
        s_fail(s, &q, ERR_PROTO, "store request: op frame must be 1 byte and seq frame 8 bytes");
        return;
    }
    q.op = *(const char *)zmq_msg_data(&mp->m[1]);
    q.klen = zmq_msg_size(&mp->m[3]);
    q.vlen = zmq_msg_size(&mp->m[4]);
    q.val = zmq_msg_data(&mp->m[4]);
    char key[STORE_KEY_MAX + 1];
    if (q.klen > STORE_KEY_MAX || memchr(zmq_msg_data(&mp->m[3]), '\0', q.klen)) {
        s_fail(s, &q, ERR_PROTO, "store key must be at most %d bytes without NUL", STORE_KEY_MAX);
        return;
    }
    memcpy(key, zmq_msg_data(&mp->m[3]), q.klen);
    key[q.klen] = '\0';
    q.key = key;
    if (q.vlen > STORE_VAL_MAX) {
        s_fail(s, &q, ERR_PROTO, "store value of %zu bytes is over the limit", q.vlen);
        return;
    }
    size_t nh = sizeof s_handlers / sizeof s_handlers[0], i = 0;
    while (i < nh && s_handlers[i].op != q.op) i++;
    if (i == nh || s_handlers[i].needs_hello) {
        q.rank = s_rank_of(s, q.rid, q.rlen);
        if (q.rank < 0) {
            s_fail(s, &q, ERR_STATE, "store request '%c' before HELLO", q.op >= 32 && q.op < 127 ? q.op : '?');
            return;
        }
    }
    if (i == nh) { s_fail(s, &q, ERR_PROTO, "unknown store op 0x%02x", (unsigned char)q.op); return; }
    s_handlers[i].fn(s, &q);
    /* a joined rank's connection (its HELLO just accepted, or any later request) is never closed as idle */
    if (s->conns && s_rank_of(s, q.rid, q.rlen) >= 0) sconn_authed(s->conns, zmq_msg_get(&mp->m[1], ZMQ_SRCFD));
}

/* ---------------- the server thread ---------------- */

static void *s_server_main(void *arg)
{
    server_t *s = arg;
    uint64_t stop_deadline = 0;
    for (;;) {
        if (atomic_load(&s->abort_now)) break;
        if (atomic_load(&s->stop)) {
            if (!stop_deadline) stop_deadline = deadline_in(s->timeout_ms);
            if (s->nleft >= s->njoined) break;
            if (deadline_passed(stop_deadline)) {
                LOG_W("store: stopping with %d of %d ranks not having left", s->njoined - s->nleft, s->njoined);
                break;
            }
        }
        int rc;
        if (s->mon) {
            zmq_pollitem_t it[2] = {{.socket = s->router, .events = ZMQ_POLLIN}, {.socket = s->mon, .events = ZMQ_POLLIN}};
            while ((rc = zmq_poll(it, 2, s_next_wait_ms(s))) < 0 && zmq_errno() == EINTR) {}
            if (rc > 0 && (it[1].revents & ZMQ_POLLIN)) s_monitor(s);
            s_refusal_say(s);
            if (rc > 0) rc = (it[0].revents & ZMQ_POLLIN) ? 1 : 0;
        } else {
            rc = szmq_poll_in(s->router, s_next_wait_ms(s));
        }
        if (rc < 0) { LOG_E("store: zmq_poll: %s", zmq_strerror(zmq_errno())); break; }
        for (int i = 0; rc > 0 && i < 256; i++) {
            mp_t mp;
            if (szmq_mp_recv(s->router, &mp, ZMQ_DONTWAIT) < 0) break;
            s_handle(s, &mp);
            szmq_mp_close(&mp);
        }
        sconn_tick(s->conns);
        s_wake(s);
    }
    return NULL;
}

static void s_server_free(server_t *s)
{
    if (!s) return;
    if (s->mon) zmq_close(s->mon);
    if (s->router) zmq_close(s->router);
    sconn_free(&s->conns);
    zsec_close(&s->zap);
    s_map_free(&s->map);
    auth_wipe(&s->auth);
    free(s->rid); free(s->rlen); free(s->joined); free(s->left); free(s->w);
    free(s);
}

int szmq_server_start(server_t **out, void *ctx, const boot_cfg_t *cfg)
{
    char ip[64], ep[300];
    int local = 0;
    CHECK(boot_resolve_ipv4(cfg->host, ip, sizeof ip, &local));
    if (!local)
        LOG_W("store: master address %s (%s) is not an address of this host; rank 0 listens on all interfaces",
              cfg->host, ip);
    snprintf(ep, sizeof ep, "tcp://%s:%d", local ? ip : "0.0.0.0", cfg->port);
    server_t *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "store server");
    s->world = cfg->world;
    s->auth = cfg->auth;
    s->timeout_ms = cfg->timeout_ms;
    snprintf(s->job, sizeof s->job, "%s", cfg->job);
    s->rid = calloc((size_t)cfg->world, sizeof *s->rid);
    s->rlen = calloc((size_t)cfg->world, sizeof *s->rlen);
    s->joined = calloc((size_t)cfg->world, 1);
    s->left = calloc((size_t)cfg->world, 1);
    if (!s->rid || !s->rlen || !s->joined || !s->left) { s_server_free(s); return err_set(ERR_NOMEM, "store server"); }
    int zrc = zsec_open(&s->zap, ctx, &cfg->auth, "store");
    if (zrc < 0) { s_server_free(s); return zrc; }
    s->router = zmq_socket(ctx, ZMQ_ROUTER);
    if (!s->router) { s_server_free(s); return err_set(ERR_SYS, "zmq_socket: %s", zmq_strerror(zmq_errno())); }
    if ((zrc = zsec_server(&cfg->auth, s->router, "store")) < 0) { s_server_free(s); return zrc; }
    /* the monitor: accepted connections for their bounds, handshake failures said (unbounded: none unseen) */
    int per_src, total, zero = 0;
    sconn_limits(cfg->world, &per_src, &total);
    sconn_cfg_t cc = {.per_src = per_src, .total = total, .unauth_ms = STORE_UNAUTH_MS, .port = cfg->port};
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sb-store-mon-%p", (void *)s);
    int evs = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (sconn_new(&s->conns, &cc) < 0 || zmq_socket_monitor(s->router, mon, evs) != 0 ||
        !(s->mon = zmq_socket(ctx, ZMQ_PAIR)) || zmq_setsockopt(s->mon, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(s->mon, ZMQ_RCVHWM, &zero, sizeof zero) != 0 || zmq_connect(s->mon, mon) != 0) {
        s_server_free(s);
        return err_set(ERR_SYS, "store: cannot watch its connections: %s", zmq_strerror(zmq_errno()));
    }
    int sndto = 1000, rcvhwm = STORE_RCVHWM, sndhwm = STORE_SNDHWM;
    int64_t maxmsg = STORE_MAXMSG;
    zmq_setsockopt(s->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_SNDTIMEO, &sndto, sizeof sndto);
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(s->router, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt(s->router, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    if (zmq_bind(s->router, ep) != 0) {
        int e = zmq_errno();
        s_server_free(s);
        if (e == EADDRINUSE)
            return err_set(ERR_ADDRINUSE, "rank 0 cannot listen on %s:%d: port %d is already in use (another job, a "
                           "second rank 0, or a stale process): choose another MASTER_PORT", ip, cfg->port, cfg->port);
        return err_set(ERR_SYS, "rank 0 cannot listen on %s: %s", ep, zmq_strerror(e));
    }
    int rc = pthread_create(&s->thr, NULL, s_server_main, s);
    if (rc) { s_server_free(s); return err_set(ERR_SYS, "pthread_create: %s", strerror(rc)); }
    *out = s;
    return 0;
}

void szmq_server_stop(server_t **sp, int abort)
{
    server_t *s = *sp;
    if (!s) return;
    if (abort) atomic_store(&s->abort_now, 1);
    atomic_store(&s->stop, 1);
    pthread_join(s->thr, NULL);
    s_server_free(s);
    *sp = NULL;
}

/* ---------------- fuzzing entry points (core/store_zmq_int.h; fuzz/fuzz_store.c) ---------------- */

int store_zmq_srv_new(struct server **out, int world, const char *job, const auth_t *auth)
{
    if (!out || world < 1 || !job) return err_set(ERR_INVAL, "store_zmq_srv_new: bad arguments");
    server_t *s = calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->world = world;
    if (auth) s->auth = *auth;
    s->timeout_ms = 1000;
    snprintf(s->job, sizeof s->job, "%s", job);
    s->rid = calloc((size_t)world, sizeof *s->rid);
    s->rlen = calloc((size_t)world, sizeof *s->rlen);
    s->joined = calloc((size_t)world, 1);
    s->left = calloc((size_t)world, 1);
    if (!s->rid || !s->rlen || !s->joined || !s->left) { s_server_free(s); return ERR_NOMEM; }
    *out = s;                                /* router NULL: zmq_send fails (ENOTSOCK), replies are dropped */
    return 0;
}

void store_zmq_srv_feed(struct server *s, const void *const *frames, const size_t *lens, int nframes)
{
    mp_t mp = {.n = 0, .extra = 0};
    for (int i = 0; i < nframes; i++) {
        if (mp.n == MP_MAX) { mp.extra++; continue; }
        if (zmq_msg_init_size(&mp.m[mp.n], lens[i]) != 0) break;
        if (lens[i]) memcpy(zmq_msg_data(&mp.m[mp.n]), frames[i], lens[i]);
        mp.n++;
    }
    s_handle(s, &mp);
    szmq_mp_close(&mp);
    s_wake(s);
}

int store_zmq_srv_joined(const struct server *s) { return s->njoined; }
size_t store_zmq_srv_keys(const struct server *s) { return s->map.n; }

void store_zmq_srv_destroy(struct server **s)
{
    if (!s || !*s) return;
    s_server_free(*s);
    *s = NULL;
}
