/* zsec.c: CURVE keys derived from the job secret and the ZAP handler that refuses unknown clients
 * (core/zsec.h). */
#include "core/zsec.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <zmq.h>

#define KDF_LABEL "syncbench-curve-v1"
#define ZAP_EP "inproc://zeromq.zap.01"

struct zsec {
    void *rep;
    pthread_t thr;
    atomic_int stop;
    atomic_uint_fast64_t refused;
    uint64_t unreported, last_report_ns;
    char last_addr[64];
    char what[64];
    auth_t auth;
};

void zsec_keypair(const auth_t *a, const char *domain, const char *role, unsigned char pk[32], unsigned char sk[32])
{
    unsigned char seed[crypto_box_SEEDBYTES];
    crypto_generichash_state st;
    crypto_generichash_init(&st, a->key, AUTH_SECRET_BYTES, sizeof seed);
    crypto_generichash_update(&st, (const unsigned char *)KDF_LABEL, sizeof KDF_LABEL);
    crypto_generichash_update(&st, (const unsigned char *)domain, strlen(domain) + 1);
    crypto_generichash_update(&st, (const unsigned char *)role, strlen(role) + 1);
    crypto_generichash_final(&st, seed, sizeof seed);
    crypto_box_seed_keypair(pk, sk, seed);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(&st, sizeof st);
}

static int s_set(void *sock, int opt, const void *v, size_t len, const char *what)
{
    if (zmq_setsockopt(sock, opt, v, len) != 0)
        return err_set(ERR_SYS, "zmq CURVE: cannot set %s: %s (is libzmq built with CURVE?)", what,
                       zmq_strerror(zmq_errno()));
    return 0;
}

int zsec_server(const auth_t *a, void *sock, const char *domain)
{
    if (!a || !a->set) return 0;
    if (!zmq_has("curve")) return err_set(ERR_UNSUP, "this libzmq has no CURVE security: the job secret cannot protect its sockets");
    unsigned char pk[32], sk[32];
    zsec_keypair(a, domain, "server", pk, sk);
    int one = 1, hs = ZSEC_HANDSHAKE_MS, rc = 0;
    if (!rc) rc = s_set(sock, ZMQ_CURVE_SERVER, &one, sizeof one, "CURVE_SERVER");
    if (!rc) rc = s_set(sock, ZMQ_CURVE_SECRETKEY, sk, 32, "CURVE_SECRETKEY");
    if (!rc) rc = s_set(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain), "ZAP_DOMAIN");
    if (!rc) rc = s_set(sock, ZMQ_HANDSHAKE_IVL, &hs, sizeof hs, "HANDSHAKE_IVL");
#ifdef ZMQ_ZAP_ENFORCE_DOMAIN
    if (!rc) rc = s_set(sock, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one, "ZAP_ENFORCE_DOMAIN");
#endif
    sodium_memzero(sk, sizeof sk);
    return rc;
}

int zsec_client(const auth_t *a, void *sock, const char *domain)
{
    if (!a || !a->set) return 0;
    if (!zmq_has("curve")) return err_set(ERR_UNSUP, "this libzmq has no CURVE security: the job secret cannot protect its sockets");
    unsigned char spk[32], ssk[32], pk[32], sk[32];
    zsec_keypair(a, domain, "server", spk, ssk);
    zsec_keypair(a, domain, "client", pk, sk);
    sodium_memzero(ssk, sizeof ssk);
    int hs = ZSEC_HANDSHAKE_MS, rc = 0;
    if (!rc) rc = s_set(sock, ZMQ_CURVE_SERVERKEY, spk, 32, "CURVE_SERVERKEY");
    if (!rc) rc = s_set(sock, ZMQ_CURVE_PUBLICKEY, pk, 32, "CURVE_PUBLICKEY");
    if (!rc) rc = s_set(sock, ZMQ_CURVE_SECRETKEY, sk, 32, "CURVE_SECRETKEY");
    if (!rc) rc = s_set(sock, ZMQ_HANDSHAKE_IVL, &hs, sizeof hs, "HANDSHAKE_IVL");
    sodium_memzero(sk, sizeof sk);
    return rc;
}

static void s_report(zsec_t *z, int force)
{
    uint64_t now = now_ns();
    if (!z->unreported || (!force && now - z->last_report_ns < (uint64_t)ZSEC_REPORT_MS * 1000000u)) return;
    LOG_W("%s: refused %llu connection(s) that did not hold this job's key (latest from %s)", z->what,
          (unsigned long long)z->unreported, z->last_addr[0] ? z->last_addr : "?");
    z->unreported = 0;
    z->last_report_ns = now;
}

/* One ZAP request (RFC 27): version, request id, domain, address, routing id, mechanism, credentials. */
static void s_serve_one(zsec_t *z)
{
    enum { NF = 8 };
    zmq_msg_t f[NF];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t tmp, *dst = n < NF ? &f[n] : &tmp;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, z->rep, 0) < 0) { zmq_msg_close(dst); break; }
        more = zmq_msg_more(dst);
        if (dst == &tmp) zmq_msg_close(&tmp);
        else n++;
    }
    /* a REP socket must answer every request, or it can serve no other: a malformed one is refused too */
    char domain[32] = "", addr[64] = "";
    size_t dl = n > 2 ? zmq_msg_size(&f[2]) : 0;
    int domain_ok = dl > 0 && dl < sizeof domain && !memchr(zmq_msg_data(&f[2]), '\0', dl);
    if (domain_ok) memcpy(domain, zmq_msg_data(&f[2]), dl);
    if (n > 3) snprintf(addr, sizeof addr, "%.*s", (int)zmq_msg_size(&f[3]), (char *)zmq_msg_data(&f[3]));
    int ok = 0;
    if (n == 7 && domain_ok && zmq_msg_size(&f[0]) == 3 && !memcmp(zmq_msg_data(&f[0]), "1.0", 3) &&
        zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) && zmq_msg_size(&f[6]) == 32) {
        unsigned char pk[32], sk[32];
        zsec_keypair(&z->auth, domain, "client", pk, sk);
        sodium_memzero(sk, sizeof sk);
        ok = sodium_memcmp(pk, zmq_msg_data(&f[6]), 32) == 0;
    }

    const char *code = ok ? "200" : "400", *text = ok ? "OK" : "not a key of this job";
    zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(z->rep, n > 1 ? zmq_msg_data(&f[1]) : "", n > 1 ? zmq_msg_size(&f[1]) : 0, ZMQ_SNDMORE);
    zmq_send(z->rep, code, 3, ZMQ_SNDMORE);
    zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(z->rep, ok ? domain : "", ok ? strlen(domain) : 0, ZMQ_SNDMORE);
    zmq_send(z->rep, "", 0, 0);
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
    if (!ok) {
        atomic_fetch_add(&z->refused, 1);
        z->unreported++;
        snprintf(z->last_addr, sizeof z->last_addr, "%s", addr);
        s_report(z, 0);
    }
}

static void *s_main(void *arg)
{
    zsec_t *z = arg;
    while (!atomic_load(&z->stop)) {
        zmq_pollitem_t it = {z->rep, 0, ZMQ_POLLIN, 0};
        int pr = zmq_poll(&it, 1, 100);
        if (pr > 0) s_serve_one(z);
        else if (pr < 0 && zmq_errno() != EINTR) break;
        s_report(z, 0);
    }
    return NULL;
}

int zsec_open(zsec_t **out, void *ctx, const auth_t *a, const char *what)
{
    *out = NULL;
    if (!a || !a->set) return 0;
    zsec_t *z = calloc(1, sizeof *z);
    if (!z) return err_set(ERR_NOMEM, "zap handler");
    z->auth = *a;
    snprintf(z->what, sizeof z->what, "%s", what ? what : "zmq");
    z->rep = zmq_socket(ctx, ZMQ_REP);
    int zero = 0, to = 1000;
    if (z->rep) {
        zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(z->rep, ZMQ_SNDTIMEO, &to, sizeof to);
    }
    if (!z->rep || zmq_bind(z->rep, ZAP_EP) != 0) {
        int e = zmq_errno();
        if (z->rep) zmq_close(z->rep);
        auth_wipe(&z->auth);
        free(z);
        return err_set(ERR_SYS, "%s: cannot start the ZAP handler: %s", what, zmq_strerror(e));
    }
    int rc = pthread_create(&z->thr, NULL, s_main, z);
    if (rc) {
        zmq_close(z->rep);
        auth_wipe(&z->auth);
        free(z);
        return err_set(ERR_SYS, "pthread_create: %s", strerror(rc));
    }
    *out = z;
    return 0;
}

void zsec_close(zsec_t **zp)
{
    zsec_t *z = zp ? *zp : NULL;
    if (!z) return;
    atomic_store(&z->stop, 1);
    pthread_join(z->thr, NULL);
    s_report(z, 1);
    zmq_close(z->rep);
    auth_wipe(&z->auth);
    free(z);
    *zp = NULL;
}

uint64_t zsec_refused(const zsec_t *z) { return z ? atomic_load(&z->refused) : 0; }

/* ---------------- handshake watch ---------------- */

struct zsec_watch {
    void *pair, *sock;
    int ok, fails;
};

int zsec_watch(zsec_watch_t **out, void *ctx, void *sock)
{
    *out = NULL;
    zsec_watch_t *w = calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "handshake watch");
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://zsec-watch-%p", (void *)w);
    int ev = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(sock, ep, ev) != 0 || !(w->pair = zmq_socket(ctx, ZMQ_PAIR)) || zmq_connect(w->pair, ep) != 0) {
        int e = zmq_errno();
        if (w->pair) zmq_close(w->pair);
        free(w);
        return err_set(ERR_SYS, "zmq socket monitor: %s", zmq_strerror(e));
    }
    int zero = 0;
    zmq_setsockopt(w->pair, ZMQ_LINGER, &zero, sizeof zero);
    w->sock = sock;
    *out = w;
    return 0;
}

int zsec_wait_handshake(zsec_watch_t *w, int timeout_ms, char *why, size_t whylen)
{
    if (!w) return 0;
    uint64_t end = now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    while (!w->ok) {
        uint64_t now = now_ns();
        if (now >= end) return ERR_TIMEOUT;
        zmq_pollitem_t it = {w->pair, 0, ZMQ_POLLIN, 0};
        int pr = zmq_poll(&it, 1, (long)((end - now) / 1000000u) + 1);
        if (pr < 0 && zmq_errno() != EINTR) return err_set(ERR_SYS, "zmq poll: %s", zmq_strerror(zmq_errno()));
        if (pr <= 0) continue;
        zmq_msg_t a, b;
        zmq_msg_init(&a);
        zmq_msg_init(&b);
        if (zmq_msg_recv(&a, w->pair, 0) < 0 || !zmq_msg_more(&a) || zmq_msg_recv(&b, w->pair, 0) < 0 ||
            zmq_msg_size(&a) < 6) {
            zmq_msg_close(&a);
            zmq_msg_close(&b);
            continue;
        }
        uint16_t ev;
        uint32_t val;
        memcpy(&ev, zmq_msg_data(&a), 2);
        memcpy(&val, (char *)zmq_msg_data(&a) + 2, 4);
        zmq_msg_close(&a);
        zmq_msg_close(&b);
        if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) { w->ok = 1; break; }
        w->fails++;
        const char *what = ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? "refused this job's key (ZAP status)"
                         : ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "speaks another security mechanism or keys"
                         : "dropped the handshake";
        if (why && whylen) snprintf(why, whylen, "%s, %d time(s)", what, w->fails);
        if (ev != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || w->fails >= ZSEC_FAILS_FATAL) return ERR_AUTH;
        (void)val;
    }
    return 0;
}

void zsec_unwatch(zsec_watch_t **wp)
{
    zsec_watch_t *w = wp ? *wp : NULL;
    if (!w) return;
    zmq_socket_monitor(w->sock, NULL, 0);
    if (w->pair) zmq_close(w->pair);
    free(w);
    *wp = NULL;
}
