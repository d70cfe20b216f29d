/* store_zmq.c: the tcp:// and env:// rendezvous store: a ZeroMQ server thread on rank 0 holding the
 * key-value map, and the client every rank (rank 0 included) talks to it through.
 *
 * Rank 0 binds a ROUTER on host:port and serves it from a thread; every rank talks to it through one
 * DEALER. One request is in flight per client:
 *   request  frames: [op: 1 byte] [seq: u64 LE] [key: 0..STORE_KEY_MAX bytes] [value]
 *   reply    frames: [status: i32 LE, 0 or an err.h code] [seq: u64 LE] [value; error detail text]
 * Ops: 'C' challenge (value = the client's 32-byte nonce; answer: the server's nonce and its MAC),
 * 'H' hello (key = job, value = i32 rank, i32 world [, MAC over both nonces, job, rank, world]), 'J' wait until every rank said hello
 * (value = i32 wait ms), 'S' set, 'G' get (value = i32 wait ms; the server holds the reply until the
 * key exists or the wait ends), 'A' add (value = i64 delta; counters are decimal text, so get works on
 * them), 'D' delete, 'L' leave. The client drops replies whose seq is not the request's (a late answer
 * to a request it already gave up on). The server validates every frame (s_handle), then dispatches
 * the request to one handler per op (s_handlers); it answers ERR_PROTO to anything malformed and never
 * asserts on input.
 *
 * Authentication (core/auth.h): with a job secret, a client first sends 'C' with a fresh nonce; the
 * server answers with its own fresh nonce and a MAC proving it knows the secret (the client refuses a
 * server that cannot), remembers the pair for that connection, and accepts the 'H' of that connection
 * only with the client's MAC over both nonces, the job and the (rank, world) claimed. Each challenge is
 * good for one HELLO, so a replayed transcript fails. A client that cannot prove the secret is turned
 * away with ERR_AUTH before anything about the job is checked, and can register no rank; every other op
 * needs a registered rank. Without a secret (a warning, see auth_require) 'H' works as before. Limits:
 * ZMQ_MAXMSGSIZE and finite high-water marks on both sockets, so a peer cannot size our allocations.
 * The server (map, handlers, thread) is in core/store_zmq_srv.c; this file is the client. */
#include "core/store_zmq.h"
#include "core/store.h"
#include "core/auth.h"
#include "core/zsec.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLY_GRACE_MS 500          /* how long a client waits past the server's own deadline */

/* ---------------- the client ---------------- */

typedef struct {
    const boot_cfg_t *cfg;
    void *ctx, *dealer;
    server_t *srv;           /* rank 0 only */
    zsec_watch_t *watch;     /* the dealer's handshakes, until the hello */
    uint64_t seq;
} zstore_t;

/* Send one request and wait for its reply until deadline. 0: *status and a malloc'd NUL-terminated copy
 * of the reply value in *out; ERR_TIMEOUT: no reply. */
static int s_call(zstore_t *z, char op, const char *key, const void *val, size_t len, uint64_t deadline,
                  int *status, void **out, size_t *outlen)
{
    uint64_t seq = ++z->seq;
    unsigned char sq[8];
    szmq_put64(sq, seq);
    if (zmq_send(z->dealer, &op, 1, ZMQ_SNDMORE) < 0 || zmq_send(z->dealer, sq, 8, ZMQ_SNDMORE) < 0 ||
        zmq_send(z->dealer, key, strlen(key), ZMQ_SNDMORE) < 0 || zmq_send(z->dealer, val, len, 0) < 0) {
        if (zmq_errno() == EAGAIN) return ERR_TIMEOUT;
        return err_set(ERR_SYS, "store send: %s", zmq_strerror(zmq_errno()));
    }
    for (;;) {
        int left = deadline_left_ms(deadline);
        if (left == 0) return ERR_TIMEOUT;
        int rc = szmq_poll_in(z->dealer, left);
        if (rc < 0) return err_set(ERR_SYS, "store poll: %s", zmq_strerror(zmq_errno()));
        if (rc == 0) continue;
        mp_t mp;
        if (szmq_mp_recv(z->dealer, &mp, ZMQ_DONTWAIT) < 0) continue;
        if (mp.n != 3 || mp.extra || zmq_msg_size(&mp.m[0]) != 4 || zmq_msg_size(&mp.m[1]) != 8) {
            szmq_mp_close(&mp);
            LOG_W("store: dropped a malformed reply");
            continue;
        }
        if (szmq_get64(zmq_msg_data(&mp.m[1])) != seq) { szmq_mp_close(&mp); continue; } /* stale */
        *status = (int)szmq_get32(zmq_msg_data(&mp.m[0]));
        size_t n = zmq_msg_size(&mp.m[2]);
        if (*status > 0 || *status < -1000) {
            szmq_mp_close(&mp);
            return err_set(ERR_PROTO, "store reply has an invalid status %d", *status);
        }
        char *c = malloc(n + 1);
        if (!c) { szmq_mp_close(&mp); return err_set(ERR_NOMEM, "store reply of %zu bytes", n); }
        memcpy(c, zmq_msg_data(&mp.m[2]), n);
        c[n] = '\0';
        *out = c;
        *outlen = n;
        szmq_mp_close(&mp);
        return 0;
    }
}

/* One request, its outcome as a return code: 0 with the reply value in *out (malloc'd; out NULL: freed),
 * else the server's status with its detail, or ERR_TIMEOUT naming what and key. wait_ms: the wait the
 * caller asked for (the server's own timeout answer to a get), client_ms: how long to wait for a reply. */
static int s_request(zstore_t *z, char op, const char *what, const char *key, const void *val, size_t len,
                     int wait_ms, int client_ms, void **out, size_t *outlen)
{
    int st = 0;
    void *d = NULL;
    size_t dl = 0;
    int rc = s_call(z, op, key, val, len, deadline_in(client_ms), &st, &d, &dl);
    if (rc == ERR_TIMEOUT)
        return err_set(ERR_TIMEOUT, "store %s '%s': no answer from master %s:%d within %.1f s (did rank 0 exit?)",
                       what, key, z->cfg->host, z->cfg->port, wait_ms / 1000.0);
    if (rc < 0) return rc;
    if (st < 0) {
        if (st == ERR_TIMEOUT) err_set(st, "store get '%s': key not set within %.1f s", key, wait_ms / 1000.0);
        else err_set(st, "%s", (char *)d);
        free(d);
        return st;
    }
    if (out) { *out = d; *outlen = dl; }
    else free(d);
    return 0;
}

static int s_zmq_open(void **impl_p, const boot_cfg_t *cfg, uint64_t deadline)
{
    (void)deadline;
    zstore_t *z = calloc(1, sizeof *z);
    if (!(*impl_p = z)) return err_set(ERR_NOMEM, "store client");
    z->cfg = cfg;
    if (!(z->ctx = zmq_ctx_new())) return err_set(ERR_SYS, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (cfg->rank == 0) CHECK(szmq_server_start(&z->srv, z->ctx, cfg));
    if (!(z->dealer = zmq_socket(z->ctx, ZMQ_DEALER))) return err_set(ERR_SYS, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    CHECK(zsec_client(&cfg->auth, z->dealer, "store"));
    CHECK(zsec_watch(&z->watch, z->ctx, z->dealer));
    int zero = 0, sndto = cfg->timeout_ms, rcvhwm = STORE_RCVHWM, sndhwm = STORE_SNDHWM;
    int64_t maxmsg = STORE_MAXMSG;
    zmq_setsockopt(z->dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(z->dealer, ZMQ_SNDTIMEO, &sndto, sizeof sndto);
    zmq_setsockopt(z->dealer, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(z->dealer, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt(z->dealer, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s:%d", cfg->host, cfg->port);
    if (zmq_connect(z->dealer, ep) != 0)
        return err_set(ERR_INVAL, "cannot connect to master %s: %s", ep, zmq_strerror(zmq_errno()));
    return 0;
}

/* With a secret: 'C' with a fresh nonce, check the server's MAC, then MAC the HELLO (hv: 8 + MAC bytes). */
static int s_zmq_challenge(zstore_t *z, uint64_t deadline, unsigned char hv[8 + AUTH_MAC_BYTES])
{
    const boot_cfg_t *cfg = z->cfg;
    unsigned char nc[AUTH_NONCE_BYTES];
    auth_challenge(nc);
    int st;
    size_t dl = 0;
    void *d = NULL;
    CHECK(s_call(z, 'C', cfg->job, nc, sizeof nc, deadline, &st, &d, &dl));
    if (st < 0) { err_set(st, "%s", (char *)d); free(d); return st; }
    int ok = dl == AUTH_NONCE_BYTES + AUTH_MAC_BYTES &&
             auth_verify(&cfg->auth, "store-server", nc, d, cfg->job, strlen(cfg->job),
                         (unsigned char *)d + AUTH_NONCE_BYTES) == 0;
    if (ok) {
        unsigned char ctx[64 + 8];
        size_t jl = strlen(cfg->job);
        memcpy(ctx, cfg->job, jl + 1);
        memcpy(ctx + jl + 1, hv, 8);
        auth_respond(&cfg->auth, "store-client", nc, d, ctx, jl + 9, hv + 8);
    }
    free(d);
    if (!ok)
        return err_set(ERR_AUTH, "the store at %s:%d could not prove it knows the job secret: not joining it (rank 0 "
                       "has another SYNCBENCH_JOB_SECRET or none, or something else listens on that port)",
                       cfg->host, cfg->port);
    return 0;
}

static int s_zmq_hello(void *impl, uint64_t deadline)
{
    zstore_t *z = impl;
    const boot_cfg_t *cfg = z->cfg;
    unsigned char hv[8 + AUTH_MAC_BYTES];
    szmq_put32(hv, (uint32_t)cfg->rank);
    szmq_put32(hv + 4, (uint32_t)cfg->world);
    int st;
    size_t dl;
    void *detail = NULL;
    char why[128] = "";
    int rc = zsec_wait_handshake(z->watch, deadline_left_ms(deadline), why, sizeof why);
    zsec_unwatch(&z->watch);
    if (rc == ERR_AUTH && !cfg->auth.set)
        return err_set(ERR_AUTH, "the store at %s:%d requires a job secret and this rank has none (its handshake: %s): set "
                       "SYNCBENCH_JOB_SECRET or SYNCBENCH_JOB_SECRET_FILE as rank 0's", cfg->host, cfg->port, why);
    if (rc == ERR_AUTH)
        return err_set(ERR_AUTH, "the store at %s:%d could not prove it knows the job secret (its CURVE handshake %s): "
                       "not joining it (rank 0 has another SYNCBENCH_JOB_SECRET or none, or something else listens on "
                       "that port)", cfg->host, cfg->port, why);
    if (rc == 0 && cfg->auth.set) rc = s_zmq_challenge(z, deadline, hv);
    if (rc == 0) rc = s_call(z, 'H', cfg->job, hv, cfg->auth.set ? sizeof hv : 8, deadline, &st, &detail, &dl);
    if (rc == ERR_TIMEOUT)
        return err_set(ERR_TIMEOUT, "could not reach master %s:%d within %.1f s (is rank 0 running there? check "
                       "MASTER_ADDR/MASTER_PORT, the network and firewalls)", cfg->host, cfg->port, cfg->timeout_ms / 1000.0);
    CHECK(rc);
    if (st < 0) err_set(st, "%s", (char *)detail);
    free(detail);
    return st < 0 ? st : 0;
}

/* The server answers when all joined, or at our deadline with "K W missing-ranks[; turned away: ...]". */
static int s_zmq_wait_all(void *impl, uint64_t deadline, store_wait_t *w)
{
    zstore_t *z = impl;
    unsigned char wv[4];
    int left = deadline_left_ms(deadline), st;
    szmq_put32(wv, (uint32_t)left);
    void *detail = NULL;
    size_t dl;
    int rc = s_call(z, 'J', "", wv, 4, deadline_in(left > INT_MAX - REPLY_GRACE_MS ? INT_MAX : left + REPLY_GRACE_MS),
                    &st, &detail, &dl);
    if (rc == ERR_TIMEOUT)
        return err_set(ERR_TIMEOUT, "joined master %s:%d but it stopped answering within %.1f s", z->cfg->host,
                       z->cfg->port, z->cfg->timeout_ms / 1000.0);
    CHECK(rc);
    if (st == ERR_TIMEOUT) {
        int k = 0, n = 0, off = 0;
        if (sscanf(detail, "%d %d %n", &k, &n, &off) < 2) off = 0;
        w->joined = k;
        snprintf(w->missing, sizeof w->missing, "%s", (char *)detail + off);
    } else if (st < 0) err_set(st, "%s", (char *)detail);
    free(detail);
    return st < 0 ? st : 0;
}

static int s_zmq_set(void *impl, const char *key, const void *val, size_t len)
{
    zstore_t *z = impl;
    return s_request(z, 'S', "set", key, val, len, z->cfg->timeout_ms, z->cfg->timeout_ms, NULL, NULL);
}

static int s_zmq_get(void *impl, const char *key, void **val, size_t *len, int timeout_ms)
{
    unsigned char wv[4];
    szmq_put32(wv, (uint32_t)timeout_ms);
    int wait = timeout_ms > INT_MAX - REPLY_GRACE_MS ? INT_MAX : timeout_ms + REPLY_GRACE_MS;
    return s_request(impl, 'G', "get", key, wv, 4, timeout_ms, wait, val, len);
}

static int s_zmq_add(void *impl, const char *key, int64_t delta, int64_t *out)
{
    zstore_t *z = impl;
    unsigned char dv[8];
    szmq_put64(dv, (uint64_t)delta);
    void *d = NULL;
    size_t dl = 0;
    CHECK(s_request(z, 'A', "add", key, dv, 8, z->cfg->timeout_ms, z->cfg->timeout_ms, &d, &dl));
    int rc = 0;
    if (dl == 8) *out = (int64_t)szmq_get64(d);
    else rc = err_set(ERR_PROTO, "store add reply has %zu bytes, expected 8", dl);
    free(d);
    return rc;
}

static int s_zmq_del(void *impl, const char *key)
{
    zstore_t *z = impl;
    return s_request(z, 'D', "delete", key, "", 0, z->cfg->timeout_ms, z->cfg->timeout_ms, NULL, NULL);
}

/* leave 1: say 'L' (bounded by 5 s), then rank 0's server waits for the others to leave; 2 (after a
 * failure): 'L' bounded by STORE_ABANDON_MS, and rank 0's server stops at once */
static void s_zmq_destroy(void *impl, int leave)
{
    zstore_t *z = impl;
    if (!z) return;
    if (leave && z->dealer) {
        int st, wait = z->cfg->timeout_ms < 5000 ? z->cfg->timeout_ms : 5000;
        if (leave == 2 && wait > STORE_ABANDON_MS) wait = STORE_ABANDON_MS;
        size_t dl;
        void *d = NULL;
        if (s_call(z, 'L', "", "", 0, deadline_in(wait), &st, &d, &dl) == 0) free(d);
    }
    szmq_server_stop(&z->srv, leave != 1);
    zsec_unwatch(&z->watch);
    if (z->dealer) zmq_close(z->dealer);
    if (z->ctx) zmq_ctx_term(z->ctx);
    free(z);
}

const store_ops_t store_zmq_ops = {
    .name = "zmq", .open = s_zmq_open, .hello = s_zmq_hello, .wait_all = s_zmq_wait_all, .set = s_zmq_set,
    .get = s_zmq_get, .add = s_zmq_add, .del = s_zmq_del, .destroy = s_zmq_destroy,
};
