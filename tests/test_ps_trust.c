/* test_ps_trust.c: the parameter server against peers it must not trust, on forked ranks: with a job
 * secret, an intruder that claims a worker's routing id but cannot run the HELLO challenge-response
 * can neither INIT, push nor pull (each rejected with ERR_AUTH and counted) and the real worker then
 * trains unharmed; a 1 GiB frame announced to a server is refused (ZMQ_MAXMSGSIZE) without its memory
 * growing, and the server then serves a real worker. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>
#include "core/auth.h"
#include "core/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "core/optim.h"
#include "ps/wire.h"
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "tests/lib/ranks.h"
#include "tests/lib/ps_ranks.h"

#define SECRET_HEX "3f1e9a0c5b7d2e4f6a8c0e1d3b5f7a9c2e4d6f8a0b1c3e5d7f9a2b4c6e8d0f1a"
#define NINTR 5 /* messages the intruder sends that the server must reject */

static int s_send(void *sock, const wire_hdr_t *h, const void *const *fr, const size_t *len, int nfr)
{
    unsigned char buf[WIRE_HDR_MAX];
    int hl = wire_encode(h, buf, sizeof buf);
    if (hl < 0) return hl;
    if (zmq_send(sock, buf, (size_t)hl, nfr ? ZMQ_SNDMORE : 0) < 0) return ERR_IO;
    for (int i = 0; i < nfr; i++)
        if (zmq_send(sock, fr[i], len[i], i + 1 < nfr ? ZMQ_SNDMORE : 0) < 0) return ERR_IO;
    return 0;
}

/* One reply: its header in h, its first payload frame (up to cap bytes) in out; the type or -1. */
static int s_recv(void *sock, wire_hdr_t *h, void *out, size_t cap)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 5000) <= 0) return -1;
    int type = -1, part = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) return -1;
        if (part == 0 && wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), h) == 0) type = (int)h->type;
        if (part == 1 && out) memcpy(out, zmq_msg_data(&m), zmq_msg_size(&m) < cap ? zmq_msg_size(&m) : cap);
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        part++;
    }
    return type;
}

/* The intruder: worker 0's routing id and the job id (both predictable), no secret. 0 when every
 * attempt was answered ERR_AUTH. */
static int s_intrude(comm_t *comm, const char *ep)
{
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, fail = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    uint64_t job = ps_job_id(comm->job, 1);
    unsigned char id[PS_ID_LEN];
    ps_routing_id(job, 0, id);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, id, PS_ID_LEN);
    zmq_connect(s, ep);
    enum { N = 10 };
    float bad[N];
    for (int i = 0; i < N; i++) bad[i] = 1000.0f;
    ps_meta_t meta = {.total = N, .step = 1, .lr = 0.5f, .inv_scale = 1.0f};
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_SGD);
    const void *fr[3] = {&meta, &oc, bad};
    size_t fl[3] = {sizeof meta, sizeof oc, sizeof bad};
    wire_hdr_t r;
#define EXPECT_AUTH(what)                                                                              \
    do {                                                                                               \
        int ty = s_recv(s, &r, NULL, 0);                                                               \
        if (ty != WIRE_ERROR || r.aux != ERR_AUTH) {                                                   \
            fprintf(stderr, "intruder: %s was not turned away (reply %d, code %d)\n", what, ty, r.aux); \
            fail = 1;                                                                                  \
        }                                                                                              \
    } while (0)
    wire_hdr_t in = {.type = WIRE_INIT, .sender = 0, .job = job, .count = N, .dtype = DT_F32, .aux = DT_F32, .nframes = 3};
    s_send(s, &in, fr, fl, 3);
    EXPECT_AUTH("INIT");
    wire_hdr_t pu = {.type = WIRE_PUSH, .sender = 0, .job = job, .count = N, .dtype = DT_F32, .aux = PS_F_AR, .nframes = 2};
    fr[1] = bad; fl[1] = sizeof bad;
    s_send(s, &pu, fr, fl, 2);
    EXPECT_AUTH("PUSH");
    wire_hdr_t pl = {.type = WIRE_PULL, .sender = 0, .job = job, .dtype = DT_F32, .nframes = 1};
    s_send(s, &pl, fr, fl, 1);
    EXPECT_AUTH("PULL");
    /* the handshake with a made-up proof */
    unsigned char nc[AUTH_NONCE_BYTES], reply[AUTH_NONCE_BYTES + AUTH_MAC_BYTES], mac[AUTH_MAC_BYTES];
    memset(nc, 7, sizeof nc);
    memset(mac, 0, sizeof mac);
    wire_hdr_t he = {.type = WIRE_HELLO, .sender = 0, .job = job, .dtype = DT_F32, .aux = PS_HELLO_CHAL, .nframes = 1};
    const void *hf[1] = {nc};
    size_t hl[1] = {sizeof nc};
    s_send(s, &he, hf, hl, 1);
    if (s_recv(s, &r, reply, sizeof reply) != WIRE_HELLO) { fprintf(stderr, "intruder: no challenge answer\n"); fail = 1; }
    he.aux = PS_HELLO_PROOF;
    hf[0] = mac;
    hl[0] = sizeof mac;
    s_send(s, &he, hf, hl, 1);
    EXPECT_AUTH("a forged proof");
    s_send(s, &pu, fr, fl, 2);
    EXPECT_AUTH("PUSH after a forged proof");
    zmq_close(s);
    zmq_ctx_term(ctx);
    return fail;
}

static int s_intruder_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    if (rank == 1) {
        int f = ps_test_serve(comm, &t, NINTR);
        comm_destroy(&comm);
        return f;
    }
    void *val = NULL;
    size_t len = 0;
    if (ps_test_server_ep(comm, &val, &len) < 0) return 1;
    int fail = s_intrude(comm, val);
    free(val);
    usleep(300000); /* the server forgets the intruder's connection, so the real worker gets its id */
    /* the real worker: its parameters are its own, not the intruder's 1000.0 */
    size_t n = 10;
    float p[10], p0[10], g[10];
    ps_test_init_params(p, n);
    memcpy(p0, p, sizeof p);
    param_set_t ps = {.params = p, .count = n, .grad_dtype = DT_F32};
    optim_cfg_default(&ps.optim, OPT_SGD);
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(&t, 2, &po);
    engine_t *e = NULL;
    int rc = ps_engine.create(&e, comm, &cfg);
    if (rc == 0) rc = ps_engine.attach(e, &ps);
    if (rc < 0) ps_test_report("worker", rc);
    if (rc == 0 && memcmp(p, p0, sizeof p)) { fprintf(stderr, "worker: attach pulled foreign values\n"); fail = 1; }
    if (rc == 0) rc = ps_test_plain_step(e, g, n, 0, rank);
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    return fail || rc < 0;
}

Test(ps_trust, intruder_without_the_secret_cannot_push, .timeout = 40)
{
    setenv("SYNCBENCH_JOB_SECRET", SECRET_HEX, 1);
    int bad = run_ranks(2, s_intruder_rank, NULL, 30000);
    unsetenv("SYNCBENCH_JOB_SECRET");
    cr_assert_eq(bad, 0);
}

/* ---------- a 1 GiB frame ---------- */

static long s_rss_kb(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef struct { comm_t *comm; char ep[200]; size_t sent; long grew_kb; } flood_t;

/* A raw ZMTP 3.0 DEALER announces one 1 GiB frame to the server and streams up to 64 MiB of it. */
static void *s_flood(void *arg)
{
    flood_t *f = arg;
    char h[256];
    snprintf(h, sizeof h, "%s", f->ep + (strncmp(f->ep, "tcp://", 6) ? 0 : 6));
    char *colon = strrchr(h, ':');
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (colon) { *colon = '\0'; sa.sin_port = htons((uint16_t)atoi(colon + 1)); }
    inet_pton(AF_INET, h, &sa.sin_addr);
    long before = s_rss_kb();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        unsigned char pre[256];
        memset(pre, 0, 64);
        pre[0] = 0xff; pre[9] = 0x7f; pre[10] = 3; pre[11] = 0;
        memcpy(pre + 12, "NULL", 4);
        size_t n = 64;
        static const unsigned char ready[] = {0x04, 28, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-',
                                              'T', 'y', 'p', 'e', 0, 0, 0, 6, 'D', 'E', 'A', 'L', 'E', 'R'};
        memcpy(pre + n, ready, sizeof ready);
        n += sizeof ready;
        pre[n++] = 0x02; /* a long frame, no more */
        for (int i = 7; i >= 0; i--) pre[n++] = (unsigned char)((1ull << 30) >> (8 * i));
        if (send(fd, pre, n, MSG_NOSIGNAL) == (ssize_t)n) {
            size_t chunk = 1 << 20;
            char *junk = calloc(1, chunk);
            for (int i = 0; junk && i < 64; i++) {
                ssize_t w = send(fd, junk, chunk, MSG_NOSIGNAL);
                if (w <= 0) break;
                f->sent += (size_t)w;
            }
            free(junk);
        }
    }
    usleep(200000);
    f->grew_kb = s_rss_kb() - before; /* measured with the connection still open: its buffer still held */
    if (fd >= 0) close(fd);
    store_set(f->comm->store, "flood-done", "1", 1);
    return NULL;
}

static int s_flood_rank(int rank, int world, void *arg)
{
    (void)arg;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC, .part_bytes = 4096};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(&t, world, &po);
    engine_t *e = NULL;
    int rc = ps_engine.create(&e, comm, &cfg), fail = 0;
    if (rank == 1) {
        flood_t f = {.comm = comm};
        void *val = NULL;
        size_t len = 0;
        pthread_t th;
        if (rc == 0) rc = ps_test_server_ep(comm, &val, &len);
        if (rc == 0) {
            snprintf(f.ep, sizeof f.ep, "%s", (char *)val);
            free(val);
            pthread_create(&th, NULL, s_flood, &f);
            rc = ps_engine.serve(e); /* the flood arrives while it serves, then the worker's steps */
            pthread_join(th, NULL);
            fprintf(stderr, "server: 1 GiB frame: %zu bytes sent, RSS grew %ld KiB\n", f.sent, f.grew_kb);
            if (f.grew_kb > 16 * 1024) fail = 1;
        }
        if (rc < 0) ps_test_report("server", rc);
        ps_engine.destroy(&e);
        comm_destroy(&comm);
        return fail || rc < 0;
    }
    void *x = NULL;
    size_t xl = 0;
    if (rc == 0) rc = store_get(comm->store, "flood-done", &x, &xl, PS_TEST_TO);
    free(x);
    size_t n = 3000;
    float *p = calloc(n, sizeof *p), *g = calloc(n, sizeof *g);
    ps_test_init_params(p, n);
    param_set_t ps = {.params = p, .count = n, .grad_dtype = DT_F32};
    optim_cfg_default(&ps.optim, OPT_SGD);
    if (rc == 0) rc = ps_engine.attach(e, &ps);
    for (uint64_t s = 0; s < 3 && rc == 0; s++) rc = ps_test_plain_step(e, g, n, s, rank);
    if (rc < 0) ps_test_report("worker", rc);
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    free(p);
    free(g);
    return rc < 0;
}

Test(ps_trust, huge_frame_is_refused_without_memory_growth, .timeout = 60)
{
    unsetenv("SYNCBENCH_JOB_SECRET");
    cr_assert_eq(run_ranks(2, s_flood_rank, NULL, 50000), 0);
}
