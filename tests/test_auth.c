/* test_auth.c: the job secret (core/auth.h): generation and hex round trip, MACs that fail on a tampered
 * byte, a replayed transcript or a reflected role, loading from SYNCBENCH_JOB_SECRET and a secret file
 * (mode 0644 refused), require_auth without a secret refused, and the ZeroMQ store under CURVE: an intruder that
 * knows the job id and port but not the secret gets no request through (NULL mechanism, or an unknown client key refused by ZAP), nor does store_new, while
 * the real rank still joins (the intruders' probe bounded even when their DEALER has no pipe left), and a rank
 * refuses a master without the secret. Traffic on 127.0.0.1 only. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "core/auth.h"
#include "core/boot.h"
#include "core/err.h"
#include "core/port.h"
#include "core/zsec.h"
#include <sodium.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include "tests/lib/flood.h"
#include "tests/lib/ranks.h"

#define HEX_A "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HEX_B "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static void s_clean(void)
{
    static const char *const vars[] = {"SYNCBENCH_JOB_SECRET", "SYNCBENCH_JOB_SECRET_FILE", "SYNCBENCH_REQUIRE_AUTH",
        "SYNCBENCH_JOB", "LOCAL_RANK", "LOCAL_WORLD_SIZE", NULL};
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
    err_clear();
}

TestSuite(auth, .init = s_clean);

Test(auth, generate_hex_round_trip)
{
    auth_t a = {0}, b = {0}, c = {0};
    char hex[AUTH_HEX_LEN];
    cr_assert_eq(auth_hex(&a, hex, sizeof hex), ERR_STATE);
    cr_assert_eq(auth_secret_generate(&a), 0);
    cr_assert_eq(auth_secret_generate(&c), 0);
    cr_assert(a.set && memcmp(a.key, c.key, AUTH_SECRET_BYTES), "two secrets differ");
    cr_assert_eq(auth_hex(&a, hex, sizeof hex), 0);
    cr_assert_eq(strlen(hex), 64);
    cr_assert_eq(auth_from_hex(&b, hex, "x"), 0);
    cr_assert(!memcmp(a.key, b.key, AUTH_SECRET_BYTES));
    cr_assert_eq(auth_from_hex(&b, "abc", "SYNCBENCH_JOB_SECRET"), ERR_INVAL);
    cr_assert(strstr(err_detail(), "SYNCBENCH_JOB_SECRET") && !strstr(err_detail(), "abc"), "%s", err_detail());
    cr_assert_eq(auth_from_hex(&b, "zz112233445566778899aabbccddeeff", "x"), ERR_INVAL);
}

Test(auth, mac_verifies_and_replay_fails)
{
    auth_t a = {0}, other = {0};
    auth_from_hex(&a, HEX_A, "a");
    auth_from_hex(&other, HEX_B, "b");
    unsigned char na[AUTH_NONCE_BYTES], nb[AUTH_NONCE_BYTES], nb2[AUTH_NONCE_BYTES], mac[AUTH_MAC_BYTES];
    auth_challenge(na);
    auth_challenge(nb);
    auth_challenge(nb2);
    cr_assert(memcmp(nb, nb2, sizeof nb), "fresh nonces differ");
    auth_respond(&a, "client", na, nb, "job\0r1", 6, mac);
    cr_expect_eq(auth_verify(&a, "client", na, nb, "job\0r1", 6, mac), 0);
    cr_expect_eq(auth_verify(&other, "client", na, nb, "job\0r1", 6, mac), ERR_AUTH, "another secret");
    cr_expect_eq(auth_verify(&a, "server", na, nb, "job\0r1", 6, mac), ERR_AUTH, "reflected to the other role");
    cr_expect_eq(auth_verify(&a, "client", na, nb2, "job\0r1", 6, mac), ERR_AUTH, "replayed against a new challenge");
    cr_expect_eq(auth_verify(&a, "client", na, nb, "job\0r2", 6, mac), ERR_AUTH, "another rank");
    mac[7] ^= 1;
    cr_expect_eq(auth_verify(&a, "client", na, nb, "job\0r1", 6, mac), ERR_AUTH, "a flipped bit");
    auth_t none = {0};
    cr_expect_eq(auth_verify(&none, "client", na, nb, "", 0, mac), 0, "no secret: unauthenticated");
}

Test(auth, load_from_env_and_file)
{
    auth_t a;
    cr_assert_eq(auth_secret_load(&a, 0), 0);
    cr_assert(!a.set && !a.require);
    cr_assert_eq(auth_require(&a, "test"), 0, "no secret, not required: a warning only");
    cr_assert_eq(auth_secret_load(&a, 1), 0);
    cr_assert_eq(auth_require(&a, "test"), ERR_AUTH, "required but absent");
    cr_assert(strstr(err_detail(), "SYNCBENCH_JOB_SECRET"), "%s", err_detail());
    setenv("SYNCBENCH_REQUIRE_AUTH", "1", 1);
    cr_assert_eq(auth_secret_load(&a, 0), 0);
    cr_assert(a.require);
    unsetenv("SYNCBENCH_REQUIRE_AUTH");

    setenv("SYNCBENCH_JOB_SECRET", HEX_A, 1);
    cr_assert_eq(auth_secret_load(&a, 1), 0);
    cr_assert(a.set && a.key[1] == 0x11);
    cr_assert_eq(auth_require(&a, "test"), 0);
    unsetenv("SYNCBENCH_JOB_SECRET");

    char path[] = "/tmp/sb-secret-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, HEX_B "\n", 65), 65);
    close(fd);
    setenv("SYNCBENCH_JOB_SECRET_FILE", path, 1);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(auth_secret_load(&a, 0), 0, "%s", err_detail());
    cr_assert(a.set && a.key[0] == 0xff);
    cr_assert_eq(chmod(path, 0644), 0);
    cr_assert_eq(auth_secret_load(&a, 0), ERR_AUTH, "a secret file others can read is refused");
    cr_assert(strstr(err_detail(), "0644") && strstr(err_detail(), "chmod 600"), "%s", err_detail());
    /* boot_cfg_init refuses it too */
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:29500", 0, 1, 1000), ERR_AUTH);
    unlink(path);
}

Test(auth, job_tag_hides_the_id)
{
    char t1[24], t2[24];
    auth_job_tag("env-0123456789abcdef", t1, sizeof t1);
    auth_job_tag("env-0123456789abcdee", t2, sizeof t2);
    cr_assert(strlen(t1) == 16 && strcmp(t1, t2) && !strstr(t1, "env"));
}

/* ---------------- the store ---------------- */

typedef struct { boot_cfg_t cfg; int rc; char detail[512]; } rank_t;

static void *s_join(void *arg)
{
    rank_t *r = arg;
    store_t *st = NULL;
    r->rc = store_new(&st, &r->cfg);
    snprintf(r->detail, sizeof r->detail, "%s", err_detail());
    if (r->rc == 0) {
        r->rc = store_set(st, "hi", "x", 1);
        void *v = NULL;
        size_t l = 0;
        if (r->rc == 0) r->rc = store_get(st, "hi", &v, &l, 5000);
        free(v);
        store_destroy(&st);
    }
    return NULL;
}

static void s_cfg(rank_t *r, const char *m, int rank, const char *hex)
{
    cr_assert_eq(boot_cfg_init(&r->cfg, m, rank, 2, 8000), 0, "%s", err_detail());
    if (hex) cr_assert_eq(auth_from_hex(&r->cfg.auth, hex, "test"), 0);
    r->rc = 1;
}

/* A raw DEALER: one request, one reply's status and detail; -1 when it cannot be sent or no reply comes within
 * wait_ms. The send is bounded too: a DEALER whose handshake the server refused (the intruders below) loses its
 * only pipe once its session sees the refusal, and zmq_send on a DEALER without a pipe blocks for ever. Whether
 * that happened before the send was a race: it hung this test past its 30 s in CI (issue 33). */
static int s_raw(void *d, char op, const char *key, const void *val, size_t vlen, int *status, char *detail, size_t dlen,
                 int wait_ms)
{
    unsigned char seq[8] = {9};
    zmq_setsockopt(d, ZMQ_SNDTIMEO, &wait_ms, sizeof wait_ms);
    if (zmq_send(d, &op, 1, ZMQ_SNDMORE) < 0 || zmq_send(d, seq, 8, ZMQ_SNDMORE) < 0 ||
        zmq_send(d, key, strlen(key), ZMQ_SNDMORE) < 0 || zmq_send(d, val, vlen, 0) < 0)
        return -1;
    zmq_pollitem_t it = {.socket = d, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, wait_ms) != 1) return -1;
    unsigned char st[4] = {0}, sq[8];
    zmq_recv(d, st, 4, 0);
    zmq_recv(d, sq, 8, 0);
    int n = zmq_recv(d, detail, dlen - 1, 0);
    detail[n < 0 ? 0 : (size_t)n < dlen ? n : (int)dlen - 1] = '\0';
    *status = (int)((uint32_t)st[0] | (uint32_t)st[1] << 8 | (uint32_t)st[2] << 16 | (uint32_t)st[3] << 24);
    return 0;
}

Test(auth_store, intruder_cannot_register_a_rank, .timeout = 30)
{
    s_clean();
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    rank_t r0, r1, bad_none, bad_other;
    s_cfg(&r0, m, 0, HEX_A);
    s_cfg(&r1, m, 1, HEX_A);
    s_cfg(&bad_none, m, 1, NULL);
    s_cfg(&bad_other, m, 1, HEX_B);
    pthread_t t0;
    pthread_create(&t0, NULL, s_join, &r0);

    /* a raw intruder without CURVE (NULL mechanism): knows the job id and the port, says HELLO as rank 1
     * with a made-up MAC; the handshake fails on the mechanism, so no request reaches the store. The probes wait
     * 300 ms for a reply (none comes). */
    unsigned char hv[8 + AUTH_MAC_BYTES] = {1, 0, 0, 0, 2, 0, 0, 0};
    memset(hv + 8, 0x77, AUTH_MAC_BYTES);
    int st = 0;
    char det[512], why[128] = "";
    void *ctx = zmq_ctx_new(), *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    zsec_watch_t *w = NULL;
    cr_assert_eq(zsec_watch(&w, ctx, d), 0);
    zmq_connect(d, m);
    cr_expect_eq(zsec_wait_handshake(w, 5000, why, sizeof why), ERR_AUTH, "NULL mechanism: %s", why);
    cr_expect_eq(s_raw(d, 'H', r0.cfg.job, hv, sizeof hv, &st, det, sizeof det, 300), -1, "no reply to a NULL peer");
    zsec_unwatch(&w);
    zmq_close(d);
    /* one that knows the server's public key (it is public) but not a client key of the job: ZAP refuses */
    d = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    unsigned char spk[32], ssk[32], cpk[32], csk[32];
    zsec_keypair(&r0.cfg.auth, "store", "server", spk, ssk);
    crypto_box_keypair(cpk, csk);
    zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, spk, 32);
    zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, cpk, 32);
    zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, csk, 32);
    cr_assert_eq(zsec_watch(&w, ctx, d), 0);
    zmq_connect(d, m);
    cr_expect_eq(zsec_wait_handshake(w, 5000, why, sizeof why), ERR_AUTH, "unknown client key: %s", why);
    cr_expect(strstr(why, "ZAP"), "%s", why);
    cr_expect_eq(s_raw(d, 'H', r0.cfg.job, hv, sizeof hv, &st, det, sizeof det, 300), -1, "no reply to an unknown key");
    zsec_unwatch(&w);
    zmq_close(d);
    zmq_ctx_term(ctx);

    /* store_new without the secret, or with another one: turned away */
    s_join(&bad_none);
    cr_expect_eq(bad_none.rc, ERR_AUTH, "%d %s", bad_none.rc, bad_none.detail);
    s_join(&bad_other);
    cr_expect_eq(bad_other.rc, ERR_AUTH, "%d %s", bad_other.rc, bad_other.detail);
    cr_expect(strstr(bad_other.detail, "could not prove it knows the job secret"), "%s", bad_other.detail);

    /* the real rank 1 still joins */
    s_join(&r1);
    cr_expect_eq(r1.rc, 0, "%s", r1.detail);
    pthread_join(t0, NULL);
    cr_expect_eq(r0.rc, 0, "%s", r0.detail);
}

/* The intruders' probe above is bounded when the refusal has left their DEALER without a pipe: the state that
 * hung that test past its 30 s in CI (issue 33) when the session dropped the pipe before the probe's send (seen
 * with gdb: the main thread in zmq_send from s_raw, rank 0's store long gone). Whether libzmq drops it is a race
 * (after a refusal, a DEALER here still had one 22 times of 24); ZMQ_IMMEDIATE makes it certain, as a DEALER
 * then has a pipe only to a peer whose handshake completed. A ROUTER under the store's CURVE keys and ZAP
 * stands in for the store; an unbounded send blocks until Criterion's timeout fails this test. */
Test(auth_store, refused_intruder_probe_is_bounded, .timeout = 20)
{
    s_clean();
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    auth_t a = {0};
    cr_assert_eq(auth_from_hex(&a, HEX_A, "test"), 0);
    void *ctx = zmq_ctx_new();
    zsec_t *zap = NULL;
    cr_assert_eq(zsec_open(&zap, ctx, &a, "store"), 0, "%s", err_detail());
    void *srv = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0, one = 1;
    zmq_setsockopt(srv, ZMQ_LINGER, &zero, sizeof zero);
    cr_assert_eq(zsec_server(&a, srv, "store"), 0);
    cr_assert_eq(zmq_bind(srv, m), 0, "%s", zmq_strerror(zmq_errno()));
    for (int kind = 0; kind < 2; kind++) { /* 0: the NULL mechanism; 1: CURVE with a client key ZAP refuses */
        void *d = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(d, ZMQ_IMMEDIATE, &one, sizeof one);
        if (kind == 1) {
            unsigned char spk[32], ssk[32], cpk[32], csk[32];
            zsec_keypair(&a, "store", "server", spk, ssk);
            crypto_box_keypair(cpk, csk);
            zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, spk, 32);
            zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, cpk, 32);
            zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, csk, 32);
        }
        zsec_watch_t *w = NULL;
        char why[128] = "", det[64];
        cr_assert_eq(zsec_watch(&w, ctx, d), 0);
        zmq_connect(d, m);
        cr_assert_eq(zsec_wait_handshake(w, 5000, why, sizeof why), ERR_AUTH, "kind %d: %s", kind, why);
        int ev = 0;
        size_t el = sizeof ev;
        zmq_getsockopt(d, ZMQ_EVENTS, &ev, &el);
        cr_assert(!(ev & ZMQ_POLLOUT), "kind %d: the DEALER has a pipe, so this test cannot tell", kind);
        unsigned char hv[8] = {1, 0, 0, 0, 2, 0, 0, 0};
        int st = 0;
        struct timeval t0, t1;
        gettimeofday(&t0, NULL);
        cr_expect_eq(s_raw(d, 'H', "job", hv, sizeof hv, &st, det, sizeof det, 300), -1, "kind %d: no reply", kind);
        gettimeofday(&t1, NULL);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_usec - t0.tv_usec) / 1e3;
        cr_expect_lt(ms, 2000.0, "kind %d: the probe took %.0f ms (bound: 300 ms to send, 300 ms to a reply)", kind, ms);
        zsec_unwatch(&w);
        zmq_close(d);
    }
    zmq_close(srv);
    zsec_close(&zap);
    zmq_ctx_term(ctx);
}

Test(auth_store, rank_refuses_a_master_without_the_secret, .timeout = 30)
{
    s_clean();
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    boot_cfg_t c0;
    cr_assert_eq(boot_cfg_init(&c0, m, 0, 1, 3000), 0);
    store_t *st = NULL;
    cr_assert_eq(store_new(&st, &c0), 0, "%s", err_detail()); /* a master with no secret (world 1) */
    rank_t r = {0};
    cr_assert_eq(boot_cfg_init(&r.cfg, m, 0, 1, 3000), 0);
    auth_from_hex(&r.cfg.auth, HEX_A, "t");
    /* a client with the secret must refuse a master that cannot prove it */
    r.cfg.world = 2;
    r.cfg.rank = 1;
    s_join(&r);
    cr_expect_eq(r.rc, ERR_AUTH, "%d %s", r.rc, r.detail);
    cr_expect(strstr(r.detail, "store at 127.0.0.1"), "%s", r.detail);
    store_destroy(&st);
}

/* A raw peer floods the store's port: a ZMTP greeting (mech), then up to 256 MiB of 1 MiB frames flagged
 * "more". Returns the RSS growth in KiB with the connection still open; *sent the bytes that went out. */
static long s_flood_store(int port, const char *mech, size_t *sent)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    long before = rss_kb();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    *sent = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        unsigned char pre[128];
        size_t n = flood_zmtp_greeting(pre, mech);
        if (send(fd, pre, n, MSG_NOSIGNAL) == (ssize_t)n) *sent = n + flood_more_frames(fd, 256);
    }
    usleep(300000);
    long grew = rss_kb() - before;
    close(fd);
    return grew;
}

/* Issue 33 section 1: an unfinished multi-frame message from a peer without the secret is never buffered.
 * The same measurement without a secret (no CURVE) sees the store buffer the flood, so its bound detects
 * buffering; with the secret the connection is dropped at the greeting and RSS stays within 32 MiB. */
Test(auth_store, more_frames_flood_is_not_buffered, .timeout = 60)
{
    s_clean();
    for (int secure = 0; secure < 2; secure++) {
        for (int mech = 0; mech < (secure ? 2 : 1); mech++) {
            int port = port_free_loopback();
            char m[64];
            snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port);
            rank_t r0, r1;
            s_cfg(&r0, m, 0, secure ? HEX_A : NULL);
            s_cfg(&r1, m, 1, secure ? HEX_A : NULL);
            pthread_t t0;
            pthread_create(&t0, NULL, s_join, &r0);
            usleep(200000);
            size_t sent = 0;
            const char *mn = mech ? "CURVE" : "NULL";
            long grew = s_flood_store(port, mn, &sent);
            fprintf(stderr, "store %s, a %s greeting then 1 MiB more-frames: %.1f MiB sent, RSS grew %.1f MiB\n",
                    secure ? "with a secret (CURVE)" : "without a secret", mn, sent / 1048576.0, grew / 1024.0);
            if (secure) {
                cr_expect_lt(grew, 32 * 1024, "RSS grew %ld KiB", grew);
                cr_expect_lt(sent, (size_t)128 << 20, "the flood was refused (%zu bytes went out)", sent);
            } else {
                cr_expect_gt(grew, 128 * 1024, "without CURVE the store buffers the flood (the bound detects it): %ld KiB", grew);
            }
            s_join(&r1); /* the store still serves a real rank */
            cr_expect_eq(r1.rc, 0, "%s", r1.detail);
            pthread_join(t0, NULL);
            cr_expect_eq(r0.rc, 0, "%s", r0.detail);
        }
    }
}

Test(auth_store, require_auth_without_secret_is_refused, .timeout = 10)
{
    s_clean();
    setenv("SYNCBENCH_REQUIRE_AUTH", "1", 1);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:1", 0, 1, 1000), 0);
    store_t *st = NULL;
    cr_expect_eq(store_new(&st, &cfg), ERR_AUTH);
    cr_expect(strstr(err_detail(), "authentication is required"), "%s", err_detail());
    cr_expect(strstr(err_detail(), "--procs") && !strstr(err_detail(), "harness launch"), "a fix that exists: %s", err_detail());
    cr_expect_null(st);
}
