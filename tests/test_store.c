/* test_store.c: the rendezvous store's calls (set, get with wait, add, del) over tcp/env and file://
 * with 1, 2 and 4 ranks, and the ZeroMQ store's wire protocol driven by a raw DEALER: every request type,
 * malformed requests, requests before HELLO, server-side timeouts. Joining (store_new's checks):
 * tests/test_boot.c. Network traffic goes to 127.0.0.1 only. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>
#include <zmq.h>

#include "core/boot.h"
#include "core/err.h"
#include "core/timer.h"
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"
#include "core/port.h"

/* The raw-protocol tests name rank and world themselves; a launcher's local rank / size must not leak in. */
static void clean_env(void)
{
    static const char *const vars[] = {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "SYNCBENCH_JOB", "SYNCBENCH_SOCKET_IFNAME",
        "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID",
        "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL};
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
    err_clear();
}

/* ------------------------------------------------------------------------------------------------ */
/* the same workload over env:// and file://                                                       */

#define RCK(expr)                                                                                     \
    do {                                                                                              \
        int rc_ = (expr);                                                                             \
        if (rc_ < 0) {                                                                                \
            char b_[600];                                                                             \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #expr,              \
                    err_trace(rc_, b_, sizeof b_));                                                   \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)
#define RTRUE(c)                                                                                      \
    do {                                                                                              \
        if (!(c)) {                                                                                   \
            fprintf(stderr, "rank %d: %s:%d: failed: %s (detail: %s)\n", rank, __FILE__, __LINE__, #c,  \
                    err_detail());                                                                    \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)

static int s_barrier(store_t *st, int rank, int world, int round)
{
    char k[64], go[64];
    snprintf(k, sizeof k, "bar.%d", round);
    snprintf(go, sizeof go, "bar.%d.go", round);
    int64_t n = 0;
    RCK(store_add(st, k, 1, &n));
    RTRUE(n >= 1 && n <= world);
    if (n == world) RCK(store_set(st, go, "1", 1));
    void *v = NULL;
    size_t len = 0;
    RCK(store_get(st, go, &v, &len, 10000));
    free(v);
    return 0;
}

static int s_workload(int rank, int world, void *arg)
{
    const char *method = arg;
    boot_cfg_t cfg;
    store_t *st = NULL;
    RCK(boot_cfg_init(&cfg, method, -1, -1, 10000));
    RTRUE(cfg.rank == rank && cfg.world == world);
    RCK(store_new(&st, &cfg));

    /* everyone publishes, everyone reads everyone (get waits for keys not yet set) */
    char k[32], want[64];
    snprintf(k, sizeof k, "addr/%d", rank);
    snprintf(want, sizeof want, "rank %d says hi", rank);
    RCK(store_set(st, k, want, strlen(want)));
    for (int r = 0; r < world; r++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(k, sizeof k, "addr/%d", (rank + r) % world);
        snprintf(want, sizeof want, "rank %d says hi", (rank + r) % world);
        RCK(store_get(st, k, &v, &len, 10000));
        RTRUE(len == strlen(want) && !memcmp(v, want, len) && ((char *)v)[len] == '\0');
        free(v);
    }
    /* counters: add returns distinct values 1..world*3; get reads it as decimal text */
    int64_t got = 0;
    for (int i = 0; i < 3; i++) {
        RCK(store_add(st, "ctr", 1, &got));
        RTRUE(got >= 1 && got <= 3 * world);
    }
    RTRUE(s_barrier(st, rank, world, 1) == 0);
    void *v = NULL;
    size_t len = 0;
    RCK(store_get(st, "ctr", &v, &len, 1000));
    RTRUE(strtoll(v, NULL, 10) == 3 * world);
    free(v);
    RCK(store_add(st, "ctr", 0, &got));
    RTRUE(got == 3 * world);
    RTRUE(s_barrier(st, rank, world, 2) == 0);

    /* binary value with NULs, 1 MiB, through the owner */
    if (rank == world - 1) {
        size_t n = 1 << 20;
        unsigned char *b = malloc(n);
        for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7);
        RCK(store_set(st, "blob", b, n));
        RCK(store_set(st, "empty", "", 0));
        free(b);
    }
    RCK(store_get(st, "blob", &v, &len, 10000));
    RTRUE(len == (size_t)1 << 20);
    for (size_t i = 0; i < len; i++) RTRUE(((unsigned char *)v)[i] == (unsigned char)(i * 7));
    free(v);
    RCK(store_get(st, "empty", &v, &len, 10000));
    RTRUE(len == 0);
    free(v);

    /* a key nobody sets: ERR_TIMEOUT after about the wait */
    uint64_t t0 = now_ns();
    int rc = store_get(st, "never", &v, &len, 300);
    double ms = (double)(now_ns() - t0) / 1e6;
    RTRUE(rc == ERR_TIMEOUT && ms >= 250 && ms < 2000 && strstr(err_detail(), "never"));
    RTRUE(v == NULL);
    /* add on a non-counter value, bad keys */
    RTRUE(store_add(st, "addr/0", 1, &got) == ERR_INVAL);
    RTRUE(store_set(st, "", "x", 1) == ERR_INVAL);
    char longkey[STORE_KEY_MAX + 2];
    memset(longkey, 'k', sizeof longkey - 1); longkey[sizeof longkey - 1] = '\0';
    RTRUE(store_set(st, longkey, "x", 1) == ERR_RANGE);
    longkey[STORE_KEY_MAX] = '\0';
    snprintf(k, sizeof k, "odd key/%d:?*", rank);
    RCK(store_set(st, k, "o", 1));
    RCK(store_get(st, k, &v, &len, 1000));
    free(v);
    if (rank == 0) {
        RCK(store_set(st, longkey, "L", 1));
        RCK(store_set(st, "gone", "g", 1));
        RCK(store_del(st, "gone"));
        RTRUE(store_get(st, "gone", &v, &len, 100) == ERR_TIMEOUT);
        RCK(store_del(st, "never-set"));
        /* a counter at INT64_MAX: add overflows and leaves it as it was */
        RCK(store_set(st, "max", "9223372036854775807", 19));
        RTRUE(store_add(st, "max", 1, &got) == ERR_RANGE && strstr(err_detail(), "overflow"));
        RCK(store_add(st, "max", -7, &got));
        RTRUE(got == INT64_MAX - 7);
        RTRUE(store_add(st, "empty", 1, &got) == ERR_INVAL);
    }
    RTRUE(s_barrier(st, rank, world, 3) == 0);
    RCK(store_get(st, longkey, &v, &len, 1000));
    RTRUE(len == 1 && ((char *)v)[0] == 'L');
    free(v);
    RTRUE(s_barrier(st, rank, world, 4) == 0);
    store_destroy(&st);
    RTRUE(st == NULL);
    store_destroy(&st); /* safe twice */
    return 0;
}

Test(store_tcp, one_rank, .timeout = 30) { cr_expect_eq(run_ranks(1, s_workload, "env://", 25000), 0); }
Test(store_tcp, two_ranks, .timeout = 30) { cr_expect_eq(run_ranks(2, s_workload, "env://", 25000), 0); }
Test(store_tcp, four_ranks, .timeout = 40) { cr_expect_eq(run_ranks(4, s_workload, "env://", 35000), 0); }

static void s_file_ranks(int world)
{
    char *dir = tmpdir_make(), m[128];
    snprintf(m, sizeof m, "file://%s/sub", dir); /* created on demand */
    cr_expect_eq(run_ranks(world, s_workload, m, 35000), 0);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    cr_expect_eq(tmpdir_entries(sub), 0, "the last rank to leave removes the job's files");
    tmpdir_remove(dir);
}

Test(store_file, one_rank, .timeout = 30) { s_file_ranks(1); }
Test(store_file, two_ranks, .timeout = 30) { s_file_ranks(2); }
Test(store_file, four_ranks, .timeout = 40) { s_file_ranks(4); }

/* ------------------------------------------------------------------------------------------------ */
/* the ZeroMQ store's wire protocol                                                                 */

TestSuite(store_proto, .init = clean_env);

/* A raw DEALER sends garbage to a one-rank store: every message gets an error reply, nothing breaks. */
static int s_raw_val(void *d, const char *const *frames, const size_t *lens, int n, int *status, char *detail,
                     size_t *vlen);
static int s_raw(void *d, const char *const *frames, const size_t *lens, int n, int *status, char *detail)
{
    size_t vlen;
    return s_raw_val(d, frames, lens, n, status, detail, &vlen);
}

/* A raw DEALER connected to endpoint m. */
static void *s_dealer(void *ctx, const char *m)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, sndto = 2000; /* a send never blocks for ever (a DEALER whose pipe went) */
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(d, ZMQ_SNDTIMEO, &sndto, sizeof sndto);
    cr_assert_eq(zmq_connect(d, m), 0);
    return d;
}

/* s_raw, and the reply value's length in *vlen (its first 255 bytes in detail, NUL-terminated). */
static int s_raw_val(void *d, const char *const *frames, const size_t *lens, int n, int *status, char *detail,
                     size_t *vlen)
{
    for (int i = 0; i < n; i++) zmq_send(d, frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0);
    zmq_pollitem_t it = {.socket = d, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 2000) != 1) return -1;
    zmq_msg_t m[3];
    int k = 0, more = 1;
    while (more) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        zmq_msg_recv(&x, d, 0);
        more = zmq_msg_more(&x);
        if (k < 3) { zmq_msg_init(&m[k]); zmq_msg_move(&m[k], &x); k++; }
        zmq_msg_close(&x);
    }
    if (k != 3 || zmq_msg_size(&m[0]) != 4) return -1;
    const unsigned char *s = zmq_msg_data(&m[0]);
    *status = (int)((uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24);
    *vlen = zmq_msg_size(&m[2]);
    memcpy(detail, zmq_msg_data(&m[2]), *vlen < 255 ? *vlen : 255);
    detail[*vlen < 255 ? *vlen : 255] = '\0';
    for (int i = 0; i < k; i++) zmq_msg_close(&m[i]);
    return 0;
}

Test(store_proto, malformed_requests, .timeout = 20)
{
    int port = port_free_loopback();
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 3000), 0);
    store_t *st = NULL;
    cr_assert_eq(store_new(&st, &cfg), 0, "%s", err_detail());

    void *ctx = zmq_ctx_new(), *d = s_dealer(ctx, m);
    const char seq[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    char bigkey[STORE_KEY_MAX + 10];
    memset(bigkey, 'k', sizeof bigkey);
    struct { const char *f[6]; size_t l[6]; int n; int want; const char *say; } cases[] = {
        {{"S"}, {1}, 1, ERR_PROTO, "frames"},
        {{"S", seq, "k"}, {1, 8, 1}, 3, ERR_PROTO, "frames"},
        {{"S", seq, "k", "v", "extra", "more"}, {1, 8, 1, 1, 5, 4}, 6, ERR_PROTO, "frames"},
        {{"SS", seq, "k", "v"}, {2, 8, 1, 1}, 4, ERR_PROTO, "op frame"},
        {{"S", seq, "k", "v"}, {1, 3, 1, 1}, 4, ERR_PROTO, "seq frame"},
        {{"S", seq, "k", "v"}, {1, 8, 1, 1}, 4, ERR_STATE, "before HELLO"},
        {{"H", seq, "nope", "12345678"}, {1, 8, 4, 8}, 4, ERR_MISMATCH, "serves job"},
        {{"H", seq, cfg.job, "1234"}, {1, 8, strlen(cfg.job), 4}, 4, ERR_PROTO, "8 bytes"},
        {{"H", seq, cfg.job, "\0\0\0\0\1\0\0\0"}, {1, 8, strlen(cfg.job), 8}, 4, ERR_DUP, "rank 0"},
        {{"H", seq, cfg.job, "\7\0\0\0\1\0\0\0"}, {1, 8, strlen(cfg.job), 8}, 4, ERR_RANGE, "rank 7"},
        {{"H", seq, cfg.job, "\0\0\0\0\2\0\0\0"}, {1, 8, strlen(cfg.job), 8}, 4, ERR_MISMATCH, "world size 2"},
        {{"S", seq, bigkey, "v"}, {1, 8, sizeof bigkey, 1}, 4, ERR_PROTO, "key"},
        {{"S", seq, "a\0b", "v"}, {1, 8, 3, 1}, 4, ERR_PROTO, "key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 0;
        char detail[256] = "";
        cr_assert_eq(s_raw(d, cases[i].f, cases[i].l, cases[i].n, &status, detail), 0, "case %zu: no reply", i);
        cr_expect_eq(status, cases[i].want, "case %zu: status %d (%s)", i, status, detail);
        cr_expect(strstr(detail, cases[i].say), "case %zu: detail '%s' lacks '%s'", i, detail, cases[i].say);
    }
    zmq_close(d);
    zmq_ctx_term(ctx);
    /* the store still works */
    int64_t v = 0;
    cr_expect_eq(store_add(st, "c", 5, &v), 0, "%s", err_detail());
    cr_expect_eq(v, 5);
    void *val = NULL;
    size_t len = 0;
    cr_expect_eq(store_get(st, "c", &val, &len, 100), 0);
    cr_expect(len == 1 && !memcmp(val, "5", 1));
    free(val);
    store_destroy(&st);
    store_destroy(&st);
}

/* rank 0 in a thread; the test joins as rank 1 over a raw DEALER and sends bad requests after HELLO */
typedef struct { boot_cfg_t cfg; int rc; double destroy_ms; char detail[512]; } r0_t;

static void *s_rank0(void *arg)
{
    r0_t *a = arg;
    store_t *st = NULL;
    a->rc = store_new(&st, &a->cfg);
    snprintf(a->detail, sizeof a->detail, "%s", err_detail());
    if (a->rc == 0) {
        void *v = NULL;
        size_t len = 0;
        a->rc = store_get(st, "from1", &v, &len, 5000); /* set by the raw client */
        if (a->rc == 0 && (len != 2 || memcmp(v, "hi", 2))) a->rc = -100;
        free(v);
        uint64_t t0 = now_ns();
        store_destroy(&st); /* returns once the raw client left */
        a->destroy_ms = (double)(now_ns() - t0) / 1e6;
    }
    return NULL;
}

Test(store_proto, malformed_after_join, .timeout = 20)
{
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    r0_t a = {.rc = 1};
    cr_assert_eq(boot_cfg_init(&a.cfg, m, 0, 2, 8000), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, s_rank0, &a), 0);

    void *ctx = zmq_ctx_new(), *d = s_dealer(ctx, m);
    const char seq[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    const char *job = a.cfg.job;
    struct { const char *f[4]; size_t l[4]; int want; const char *say; } cases[] = {
        {{"H", seq, job, "\1\0\0\0\2\0\0\0"}, {1, 8, strlen(job), 8}, 0, ""},
        {{"H", seq, job, "\1\0\0\0\2\0\0\0"}, {1, 8, strlen(job), 8}, 0, ""}, /* a repeated hello is harmless */
        {{"J", seq, "", "\x10\x27\0\0"}, {1, 8, 0, 4}, 0, ""},
        {{"Z", seq, "k", "v"}, {1, 8, 1, 1}, ERR_PROTO, "unknown store op"},
        {{"A", seq, "k", "1234"}, {1, 8, 1, 4}, ERR_PROTO, "8-byte delta"},
        {{"G", seq, "", "\0\0\0\0"}, {1, 8, 0, 4}, ERR_PROTO, "empty key"},
        {{"G", seq, "k", "\0\0"}, {1, 8, 1, 2}, ERR_PROTO, "4 bytes"},
        {{"S", seq, "", "v"}, {1, 8, 0, 1}, ERR_PROTO, "empty key"},
        {{"G", seq, "nokey", "\x32\0\0\0"}, {1, 8, 5, 4}, ERR_TIMEOUT, ""},
        {{"S", seq, "from1", "hi"}, {1, 8, 5, 2}, 0, ""},
        {{"L", seq, "", ""}, {1, 8, 0, 0}, 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 1;
        char detail[256] = "";
        cr_assert_eq(s_raw(d, cases[i].f, cases[i].l, 4, &status, detail), 0, "case %zu: no reply", i);
        cr_expect_eq(status, cases[i].want, "case %zu: status %d (%s)", i, status, detail);
        cr_expect(strstr(detail, cases[i].say), "case %zu: detail '%s' lacks '%s'", i, detail, cases[i].say);
    }
    pthread_join(th, NULL);
    zmq_close(d);
    zmq_ctx_term(ctx);
    cr_expect_eq(a.rc, 0, "rank 0: %d %s", a.rc, a.detail);
    cr_expect_lt(a.destroy_ms, 2000, "rank 0 waited %.0f ms after everyone left", a.destroy_ms);
}


/* Every request type from two raw clients joined as ranks 1 and 2 of a 3-rank store (rank 0 in a thread):
 * hello (accepted, taken, a second rank on one connection), join wait, set, get, add (value, counter
 * text, not a counter, overflow), delete, leave. */
Test(store_proto, every_request_type, .timeout = 20)
{
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    r0_t a = {.rc = 1};
    cr_assert_eq(boot_cfg_init(&a.cfg, m, 0, 3, 8000), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, s_rank0, &a), 0);
    void *ctx = zmq_ctx_new(), *d[2] = {s_dealer(ctx, m), s_dealer(ctx, m)};
    const char seq[8] = {3, 0, 0, 0, 0, 0, 0, 0}, *job = a.cfg.job;
    const char five[8] = {5, 0, 0, 0, 0, 0, 0, 0}, minus2[8] = {(char)0xfe, -1, -1, -1, -1, -1, -1, -1};
    size_t jl = strlen(job);
    struct { int who; const char *f[4]; size_t l[4]; int want; const char *say; size_t vlen; } cases[] = {
        {0, {"H", seq, job, "\1\0\0\0\3\0\0\0"}, {1, 8, jl, 8}, 0, "", 0},
        {0, {"H", seq, job, "\2\0\0\0\3\0\0\0"}, {1, 8, jl, 8}, ERR_STATE, "already joined as rank 1", 0},
        {1, {"H", seq, job, "\1\0\0\0\3\0\0\0"}, {1, 8, jl, 8}, ERR_DUP, "rank 1 has already joined", 0},
        {1, {"H", seq, job, "\2\0\0\0\3\0\0\0"}, {1, 8, jl, 8}, 0, "", 0},
        {0, {"J", seq, "", "\x10\x27\0\0"}, {1, 8, 0, 4}, 0, "", 0},
        {0, {"S", seq, "k", "v1"}, {1, 8, 1, 2}, 0, "", 0},
        {1, {"G", seq, "k", "\x64\0\0\0"}, {1, 8, 1, 4}, 0, "v1", 2},
        {1, {"A", seq, "n", five}, {1, 8, 1, 8}, 0, "\5", 8},
        {0, {"A", seq, "n", minus2}, {1, 8, 1, 8}, 0, "\3", 8},
        {1, {"G", seq, "n", "\x64\0\0\0"}, {1, 8, 1, 4}, 0, "3", 1},
        {0, {"A", seq, "k", five}, {1, 8, 1, 8}, ERR_INVAL, "not a counter", 0},
        {0, {"S", seq, "big", "9223372036854775807"}, {1, 8, 3, 19}, 0, "", 0},
        {0, {"A", seq, "big", five}, {1, 8, 3, 8}, ERR_RANGE, "would overflow", 0},
        {1, {"D", seq, "k", ""}, {1, 8, 1, 0}, 0, "", 0},
        {1, {"D", seq, "k", ""}, {1, 8, 1, 0}, 0, "", 0},
        {0, {"G", seq, "k", "\x32\0\0\0"}, {1, 8, 1, 4}, ERR_TIMEOUT, "", 0},
        {0, {"S", seq, "from1", "hi"}, {1, 8, 5, 2}, 0, "", 0},
        {0, {"L", seq, "", ""}, {1, 8, 0, 0}, 0, "", 0},
        {1, {"L", seq, "", ""}, {1, 8, 0, 0}, 0, "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 1;
        char detail[256] = "";
        size_t vlen = 0;
        cr_assert_eq(s_raw_val(d[cases[i].who], cases[i].f, cases[i].l, 4, &status, detail, &vlen), 0,
                     "case %zu: no reply", i);
        cr_expect_eq(status, cases[i].want, "case %zu: status %d (%s)", i, status, detail);
        cr_expect(strstr(detail, cases[i].say), "case %zu: reply '%s' lacks '%s'", i, detail, cases[i].say);
        if (status == 0) cr_expect_eq(vlen, cases[i].vlen, "case %zu: reply of %zu bytes", i, vlen);
    }
    pthread_join(th, NULL);
    for (int i = 0; i < 2; i++) zmq_close(d[i]);
    zmq_ctx_term(ctx);
    cr_expect_eq(a.rc, 0, "rank 0: %d %s", a.rc, a.detail);
    cr_expect_lt(a.destroy_ms, 2000, "rank 0 waited %.0f ms after everyone left", a.destroy_ms);
}

/* file://: a key too long to be a file name is stored under a hashed name, and removed at the end too. */
Test(store_proto, file_long_key, .timeout = 20)
{
    char *dir = tmpdir_make(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 3000), 0);
    store_t *st = NULL;
    cr_assert_eq(store_new(&st, &cfg), 0, "%s", err_detail());
    char key[STORE_KEY_MAX + 1];
    memset(key, '/', STORE_KEY_MAX);
    key[STORE_KEY_MAX] = '\0';
    cr_expect_eq(store_set(st, key, "long", 4), 0, "%s", err_detail());
    char tag[24];
    auth_job_tag(cfg.job, tag, sizeof tag);
    cr_expect_eq(tmpdir_entries_with(dir, tag), 3, "world, rank.0 and the hashed key");
    cr_expect_eq(tmpdir_entries_with(dir, cfg.job), 0, "the job id appears in no file name");
    void *v = NULL;
    size_t len = 0;
    cr_expect_eq(store_get(st, key, &v, &len, 100), 0, "%s", err_detail());
    cr_expect(len == 4 && !memcmp(v, "long", 4));
    free(v);
    key[0] = 'x'; /* another long key: another name */
    cr_expect_eq(store_get(st, key, &v, &len, 50), ERR_TIMEOUT);
    store_destroy(&st);
    cr_expect_eq(tmpdir_entries(dir), 0);
    tmpdir_remove(dir);
}
