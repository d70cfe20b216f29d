/* ps_hb.c: the PS worker's heartbeat thread (ps_hb.h): sockets of its own, a hello of its own, one beat a
 * server every interval, whatever the worker's main thread is doing. */
#include "ps/ps_hb.h"
#include "ps/ps_proto.h"
#include "ps/ps_van.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include "core/zsec.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HB_HELLO, HB_BEAT, HB_OFF }; /* per server: its hello answer awaited, beating, given up */

struct ps_hb {
    ps_hb_cfg_t cfg;
    auth_t auth;
    void **socks;
    int *state;
    unsigned char (*nc)[AUTH_NONCE_BYTES];
    void *pipe_owner, *pipe_thread;
    pthread_t thread;
    int thread_on;
};

static wire_hdr_t s_hdr(const ps_hb_t *hb, int aux, uint64_t seq, uint32_t nframes)
{
    wire_hdr_t h = {.type = WIRE_HELLO, .sender = (uint32_t)hb->cfg.vid, .job = hb->cfg.job, .clock = seq,
                    .count = (uint64_t)hb->cfg.ival_ms, .dtype = DT_F32, .aux = aux, .nframes = nframes};
    return h;
}

/* Server s answered: its half of the hello (then our proof, and beats from now on), or an error. */
static void s_on_reply(ps_hb_t *hb, int s, ps_vmsg_t *m)
{
    wire_hdr_t r;
    if (m->n < 1 || wire_decode(ps_van_data(m, 0), ps_van_size(m, 0), &r) < 0 || r.job != hb->cfg.job) return;
    if (r.type == WIRE_ERROR) {
        LOG_D("ps worker %d: heartbeats to server %d: %.*s", hb->cfg.rank, s, m->n >= 2 ? (int)ps_van_size(m, 1) : 0,
              m->n >= 2 ? (const char *)ps_van_data(m, 1) : "");
        return;
    }
    if (r.type != WIRE_HELLO || r.aux != PS_HELLO_CHAL || hb->state[s] != HB_HELLO) return;
    unsigned char ctx[PS_AUTH_CTX_LEN], mac[AUTH_MAC_BYTES];
    ps_auth_ctx(hb->cfg.job, hb->cfg.vid, ctx);
    int ok = m->n == 2 && ps_van_size(m, 1) == AUTH_NONCE_BYTES + AUTH_MAC_BYTES;
    const unsigned char *p = ok ? ps_van_data(m, 1) : NULL;
    ok = ok && auth_verify(&hb->auth, "ps-hb-server", hb->nc[s], p, ctx, sizeof ctx, p + AUTH_NONCE_BYTES) == 0;
    if (!ok) {
        /* the data connection's own hello names the cause; beating to it would only be refused */
        LOG_W("ps worker %d: server %d's heartbeat hello did not verify: no heartbeats to it", hb->cfg.rank, s);
        hb->state[s] = HB_OFF;
        return;
    }
    auth_respond(&hb->auth, "ps-hb-client", hb->nc[s], p, ctx, sizeof ctx, mac);
    wire_hdr_t h = s_hdr(hb, PS_HELLO_PROOF, 0, 1);
    ps_frame_t f = {mac, sizeof mac, 0, NULL, NULL};
    hb->state[s] = ps_van_send(hb->socks[s], NULL, 0, &h, &f, 1, NULL) == 0 ? HB_BEAT : HB_OFF;
    if (hb->state[s] == HB_OFF) {
        LOG_W("ps worker %d: cannot send server %d its heartbeat proof", hb->cfg.rank, s);
        return;
    }
    /* the first beat at once, not an interval later: a worker stopped early is still heard beating once */
    h = s_hdr(hb, PS_HELLO_HEARTBEAT, 0, 0);
    (void)ps_van_send(hb->socks[s], NULL, 0, &h, NULL, 0, NULL);
}

static void *s_run(void *arg)
{
    ps_hb_t *hb = arg;
    int S = hb->cfg.nservers;
    zmq_pollitem_t *it = calloc((size_t)S + 1, sizeof *it);
    if (!it) LOG_E("ps worker %d: no memory for its heartbeat thread: no heartbeats", hb->cfg.rank);
    uint64_t ival = (uint64_t)hb->cfg.ival_ms * 1000000ull, next = now_ns(), seq = 0;
    for (int s = 0; s < S; s++) {
        if (hb->state[s] != HB_HELLO) continue;
        auth_challenge(hb->nc[s]);
        wire_hdr_t h = s_hdr(hb, PS_HELLO_CHAL, 0, 1);
        ps_frame_t f = {hb->nc[s], AUTH_NONCE_BYTES, 0, NULL, NULL};
        if (ps_van_send(hb->socks[s], NULL, 0, &h, &f, 1, NULL) < 0) hb->state[s] = HB_OFF;
    }
    while (it) {
        uint64_t now = now_ns();
        if (now >= next) {
            seq++;
            wire_hdr_t h = s_hdr(hb, PS_HELLO_HEARTBEAT, seq, 0);
            for (int s = 0; s < S; s++)
                if (hb->state[s] == HB_BEAT && ps_van_send(hb->socks[s], NULL, 0, &h, NULL, 0, NULL) < 0)
                    LOG_D("ps worker %d: a heartbeat to server %d was not sent: %s", hb->cfg.rank, s, err_detail());
            next += ival;
            if (next <= now) next = now + ival; /* late (descheduled): the next one an interval from now */
        }
        it[0] = (zmq_pollitem_t){hb->pipe_thread, 0, ZMQ_POLLIN, 0};
        for (int s = 0; s < S; s++) it[1 + s] = (zmq_pollitem_t){hb->socks[s], 0, ZMQ_POLLIN, 0};
        now = now_ns();
        uint64_t left = next > now ? next - now : 0;
        long ms = (long)((left < ival ? left : ival) / 1000000ull) + 1;
        int rc = zmq_poll(it, S + 1, ms);
        if (rc < 0 && zmq_errno() != EINTR) break;
        if (rc <= 0) continue;
        if (it[0].revents & ZMQ_POLLIN) break; /* told to stop */
        for (int s = 0; s < S; s++) {
            if (!(it[1 + s].revents & ZMQ_POLLIN)) continue;
            ps_vmsg_t m;
            for (int i = 0; i < 64 && ps_van_recv(hb->socks[s], &m, 0) == 0; i++) {
                s_on_reply(hb, s, &m);
                ps_van_close_msg(&m);
            }
        }
    }
    free(it);
    for (int s = 0; s < S; s++) zmq_close(hb->socks[s]);
    return NULL;
}

static void s_free(ps_hb_t *hb)
{
    for (int s = 0; hb->socks && s < hb->cfg.nservers && !hb->thread_on; s++)
        if (hb->socks[s]) zmq_close(hb->socks[s]);
    if (hb->pipe_owner) zmq_close(hb->pipe_owner);
    if (hb->pipe_thread) zmq_close(hb->pipe_thread);
    free(hb->socks);
    free(hb->state);
    free(hb->nc);
    auth_wipe(&hb->auth);
    free(hb);
}

int ps_hb_start(ps_hb_t **out, const ps_hb_cfg_t *cfg)
{
    *out = NULL;
    if (!cfg || !cfg->zctx || cfg->nservers < 1 || !cfg->eps || cfg->ival_ms < 1)
        return err_set(ERR_INVAL, "ps heartbeats: bad arguments");
    ps_hb_t *hb = calloc(1, sizeof *hb);
    if (!hb) return ERR_NOMEM;
    hb->cfg = *cfg;
    hb->cfg.eps = NULL; /* the caller's: used only here */
    if (cfg->auth) hb->auth = *cfg->auth;
    int S = cfg->nservers, rc = 0;
    hb->socks = calloc((size_t)S, sizeof *hb->socks);
    hb->state = calloc((size_t)S, sizeof *hb->state);
    hb->nc = calloc((size_t)S, sizeof *hb->nc);
    if (!hb->socks || !hb->state || !hb->nc) {
        s_free(hb);
        return ERR_NOMEM;
    }
    unsigned char id[PS_ID_LEN];
    ps_hb_routing_id(cfg->job, cfg->vid, id);
    /* a beat never waits: a full queue (a stopped server) drops it; a few beats queued are plenty */
    int zero = 0, hwm = 16;
    for (int s = 0; s < S && !rc; s++) {
        void *k = hb->socks[s] = ps_van_socket(cfg->zctx, ZMQ_DEALER, 0, cfg->max_frame);
        if (!k) {
            rc = err_set(ERR_IO, "ps worker %d: no heartbeat socket", cfg->rank);
            break;
        }
        zmq_setsockopt(k, ZMQ_SNDTIMEO, &zero, sizeof zero);
        zmq_setsockopt(k, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(k, ZMQ_ROUTING_ID, id, PS_ID_LEN);
        rc = zsec_client(&hb->auth, k, "ps");
        if (!rc && zmq_connect(k, cfg->eps[s]) != 0)
            rc = err_set(ERR_IO, "ps worker %d: cannot connect heartbeats to server %d at %s", cfg->rank, s, cfg->eps[s]);
        hb->state[s] = hb->auth.set ? HB_HELLO : HB_BEAT;
    }
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://ps-hb-%p", (void *)hb);
    if (!rc) {
        hb->pipe_owner = zmq_socket(cfg->zctx, ZMQ_PAIR);
        hb->pipe_thread = zmq_socket(cfg->zctx, ZMQ_PAIR);
        if (!hb->pipe_owner || !hb->pipe_thread) rc = err_set(ERR_IO, "ps heartbeats: no pipe");
    }
    if (!rc) {
        zmq_setsockopt(hb->pipe_owner, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(hb->pipe_thread, ZMQ_LINGER, &zero, sizeof zero);
        if (zmq_bind(hb->pipe_owner, ep) != 0 || zmq_connect(hb->pipe_thread, ep) != 0)
            rc = err_set(ERR_IO, "ps heartbeats: cannot connect the pipe");
    }
    /* from here the sockets are the thread's (pthread_create is the memory barrier ZeroMQ asks for) */
    if (!rc && pthread_create(&hb->thread, NULL, s_run, hb) != 0) rc = err_set(ERR_SYS, "ps heartbeats: no thread");
    if (rc) {
        s_free(hb);
        return rc;
    }
    hb->thread_on = 1;
    *out = hb;
    return 0;
}

void ps_hb_stop(ps_hb_t **hbp)
{
    ps_hb_t *hb = hbp ? *hbp : NULL;
    if (!hb) return;
    if (hb->thread_on) {
        /* the PAIR's queue is empty (one message ever): this send does not wait */
        zmq_send(hb->pipe_owner, "$STOP", 5, ZMQ_DONTWAIT);
        pthread_join(hb->thread, NULL);
    }
    s_free(hb);
    *hbp = NULL;
}
