/* ps_ranks.c: helpers shared by the parameter-server tests (test_ps.c, test_ps_failure.c,
 * test_ps_trust.c): joining the job, the engine configuration of a test topology, a dedicated server
 * rank, one plain step, raw wire messages. */
#include "tests/lib/ps_ranks.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include "core/boot.h"
#include "core/err.h"

char ps_test_last_detail[512];

void ps_test_report(const char *what, int rc)
{
    char b[768];
    fprintf(stderr, "[rank %s] %s: %s\n", getenv("RANK"), what, err_trace(rc, b, sizeof b));
}

int ps_test_open(comm_t **comm, int timeout_ms)
{
    boot_cfg_t cfg;
    int rc = boot_cfg_init(&cfg, "env://", -1, -1, timeout_ms);
    if (rc == 0) rc = comm_new(comm, &cfg, NULL);
    if (rc < 0) ps_test_report("comm", rc);
    return rc;
}

/* the engine config of t; its PS options live in *po (which must outlive the config) */
engine_cfg_t ps_test_cfg(const ps_topo_t *t, int world, ps_opts_t *po)
{
    *po = (ps_opts_t){.servers = t->colocate ? 0 : world - t->nworkers, .colocate = t->colocate, .mode = t->mode,
                      .ssp_k = t->ssp_k, .partition_bytes = t->part_bytes, .van = t->van,
                      .lane = t->lane, .window = t->window, .local_agg = t->local_agg};
    engine_cfg_t c = {.device = -1, .timeout_ms = t->timeout_ms ? t->timeout_ms : PS_TEST_TO, .nworkers = t->nworkers,
                      .opts = po};
    return c;
}

/* Dedicated server rank: create, serve, destroy. */
int ps_test_serve(comm_t *comm, const ps_topo_t *t, uint64_t expect_rejected)
{
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(t, comm->world, &po);
    engine_t *e = NULL;
    int rc = ps_engine.create(&e, comm, &cfg);
    if (rc < 0) { ps_test_report("create(server)", rc); return 1; }
    rc = ps_engine.serve(e);
    if (rc < 0) ps_test_report("serve", rc);
    engine_stats_t st;
    ps_engine.stats(e, &st);
    ps_engine.destroy(&e);
    ps_engine.destroy(&e);
    if (rc < 0) return 1;
    if (engine_counter(&st, "ps_rejected") != expect_rejected) {
        fprintf(stderr, "server: %llu messages rejected, expected %llu\n", (unsigned long long)engine_counter(&st, "ps_rejected"),
                (unsigned long long)expect_rejected);
        return 1;
    }
    return 0;
}

int ps_test_server_rank(comm_t **comm, const ps_topo_t *t, uint64_t expect_rejected)
{
    int f = ps_test_serve(*comm, t, expect_rejected);
    comm_destroy(comm);
    return f;
}

void ps_test_init_params(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)((int)(i % 13) - 6) * 0.3f;
}

param_set_t ps_test_sgd_params(float *p, size_t n)
{
    ps_test_init_params(p, n);
    param_set_t ps = {.params = p, .count = n, .grad_dtype = DT_F32};
    optim_cfg_default(&ps.optim, OPT_SGD);
    return ps;
}

int ps_test_worker(engine_t **e, comm_t *comm, const ps_topo_t *t, int world, const param_set_t *ps)
{
    ps_opts_t po;
    engine_cfg_t cfg = ps_test_cfg(t, world, &po);
    int rc = ps_engine.create(e, comm, &cfg);
    if (rc == 0) rc = ps_engine.attach(*e, ps);
    return rc;
}

int ps_test_plain_step(engine_t *e, float *g, size_t n, uint64_t t, int rank)
{
    step_ctx_t ctx = {.step = t + 1, .inv_scale = 1, .lr = 0.01f};
    for (size_t i = 0; i < n; i++) g[i] = 0.01f * (float)(rank + 1);
    bucket_t b = {.grad = g, .offset = 0, .count = n};
    int rc = ps_engine.step_begin(e, &ctx);
    if (rc == 0) rc = ps_engine.submit(e, &b);
    step_out_t out;
    if (rc == 0) rc = ps_engine.wait(e, &out, PS_TEST_TO);
    if (rc < 0) {
        snprintf(ps_test_last_detail, sizeof ps_test_last_detail, "%s", err_detail());
        ps_test_report("step", rc);
    }
    return rc;
}

int ps_test_server_ep(comm_t *comm, void **val, size_t *len)
{
    int rc = store_get(comm->store, "ps/1/srv/0", val, len, PS_TEST_TO);
    if (rc < 0) return rc;
    char *nl = *len ? memchr(*val, '\n', *len) : NULL;
    if (nl) *nl = 0;
    return 0;
}

int ps_test_raw_send(void *sock, const wire_hdr_t *h, const void *const *fr, const size_t *len, int nfr)
{
    unsigned char buf[WIRE_HDR_MAX];
    int hl = wire_encode(h, buf, sizeof buf);
    if (hl < 0) return hl;
    /* a bounded send: a DEALER whose only peer refused its handshake (an intruder's socket) has no pipe
     * left, and zmq_send would then block for ever */
    int to = 2000;
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &to, sizeof to);
    if (zmq_send(sock, buf, (size_t)hl, nfr ? ZMQ_SNDMORE : 0) < 0) return ERR_IO;
    for (int i = 0; i < nfr; i++)
        if (zmq_send(sock, fr[i], len[i], i + 1 < nfr ? ZMQ_SNDMORE : 0) < 0) return ERR_IO;
    return 0;
}

int ps_test_raw_recv(void *sock, wire_hdr_t *h, void *out, size_t cap)
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
