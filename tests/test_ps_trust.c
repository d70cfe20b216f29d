/* test_ps_trust.c: the parameter server against peers it must not trust, on forked ranks: with a job
 * secret, an intruder that claims a worker's routing id fails the CURVE handshake (without security, or
 * with a client key of its own that ZAP refuses), so none of its INIT, push or pull reaches the server,
 * and the real worker then trains unharmed; a 1 GiB frame announced to a server is refused (ZMQ_MAXMSGSIZE) without its memory
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
#include "tests/lib/flood.h"
#include "core/zsec.h"
#include <sodium.h>
#include "tests/lib/ranks.h"
#include "tests/lib/ps_ranks.h"

#define SECRET_HEX "3f1e9a0c5b7d2e4f6a8c0e1d3b5f7a9c2e4d6f8a0b1c3e5d7f9a2b4c6e8d0f1a"
#define NINTR 0 /* none of the intruder's messages reaches the server's protocol under CURVE */

/* The intruder: worker 0's routing id and the job id (both predictable), no secret. Under CURVE its
 * handshake fails, first without security (NULL), then with the server's public key but a client key
 * of its own (ZAP refuses it): none of its INIT, PUSH or PULL reaches the server, which answers none.
 * 0 when both were refused and nothing came back. */
static int s_intrude(comm_t *comm, const char *ep)
{
    void *ctx = zmq_ctx_new();
    int zero = 0, fail = 0;
    uint64_t job = ps_job_id(comm->job, 1);
    unsigned char id[PS_ID_LEN];
    ps_routing_id(job, 0, id);
    enum { N = 10 };
    float bad[N];
    for (int i = 0; i < N; i++) bad[i] = 1000.0f;
    ps_meta_t meta = {.total = N, .step = 1, .lr = 0.5f, .inv_scale = 1.0f};
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_SGD);
    for (int curve = 0; curve < 2; curve++) {
        void *s = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(s, ZMQ_ROUTING_ID, id, PS_ID_LEN);
        if (curve) {
            unsigned char spk[32], ssk[32], cpk[32], csk[32];
            zsec_keypair(&comm->boot.auth, "ps", "server", spk, ssk);
            crypto_box_keypair(cpk, csk);
            zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spk, 32);
            zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, cpk, 32);
            zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, csk, 32);
        }
        zsec_watch_t *w = NULL;
        char why[128] = "";
        zsec_watch(&w, ctx, s);
        zmq_connect(s, ep);
        if (zsec_wait_handshake(w, 5000, why, sizeof why) != ERR_AUTH) {
            fprintf(stderr, "intruder (%s): its handshake was not refused (%s)\n", curve ? "CURVE" : "NULL", why);
            fail = 1;
        }
        zsec_unwatch(&w);
        const void *fr[3] = {&meta, &oc, bad};
        size_t fl[3] = {sizeof meta, sizeof oc, sizeof bad};
        wire_hdr_t in = {.type = WIRE_INIT, .sender = 0, .job = job, .count = N, .dtype = DT_F32, .aux = DT_F32, .nframes = 3};
        ps_test_raw_send(s, &in, fr, fl, 3);
        wire_hdr_t pu = {.type = WIRE_PUSH, .sender = 0, .job = job, .count = N, .dtype = DT_F32, .aux = PS_F_AR, .nframes = 2};
        fr[1] = bad; fl[1] = sizeof bad;
        ps_test_raw_send(s, &pu, fr, fl, 2);
        wire_hdr_t pl = {.type = WIRE_PULL, .sender = 0, .job = job, .dtype = DT_F32, .nframes = 1};
        ps_test_raw_send(s, &pl, fr, fl, 1);
        wire_hdr_t r;
        if (ps_test_raw_recv(s, &r, NULL, 0) != -1) {
            fprintf(stderr, "intruder (%s): the server answered (type %d)\n", curve ? "CURVE" : "NULL", (int)r.type);
            fail = 1;
        }
        zmq_close(s);
    }
    zmq_ctx_term(ctx);
    return fail;
}

static int s_intruder_rank(int rank, int world, void *arg)
{
    (void)world; (void)arg;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    if (rank == 1) return ps_test_server_rank(&comm, &t, NINTR);
    void *val = NULL;
    size_t len = 0;
    if (ps_test_server_ep(comm, &val, &len) < 0) return 1;
    int fail = s_intrude(comm, val);
    free(val);
    usleep(300000); /* the server forgets the intruder's connection, so the real worker gets its id */
    /* the real worker: its parameters are its own, not the intruder's 1000.0 */
    size_t n = 10;
    float p[10], p0[10], g[10];
    param_set_t ps = ps_test_sgd_params(p, n);
    memcpy(p0, p, sizeof p);
    engine_t *e = NULL;
    int rc = ps_test_worker(&e, comm, &t, 2, &ps);
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
    long before = rss_kb();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        unsigned char pre[256];
        size_t n = flood_zmtp_preamble(pre);
        if (send(fd, pre, n, MSG_NOSIGNAL) == (ssize_t)n) f->sent += flood_junk(fd, 64);
    }
    usleep(200000);
    f->grew_kb = rss_kb() - before; /* measured with the connection still open: its buffer still held */
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
    param_set_t ps = ps_test_sgd_params(p, n);
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
