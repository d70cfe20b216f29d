/* ps_server.c: the parameter server (lifecycle, dispatch, liveness; requests in ps_server_apply.c): owns partitions (params + optimizer state + an f32 aggregation
 * buffer each) and applies the consistency mode.
 *
 * Design. One thread, one ROUTER socket; every message is validated completely (header, job, sender
 * identity, type, frame count, key against the layout, dtype, size, clock) before it touches any
 * state; a rejected message is counted and answered with WIRE_ERROR, never applied.
 *   sync (BSP): pushes of clock t are summed (f32) into the partition's aggregation buffer as they
 *     arrive (map on workers, reduce here, overlapping backward); a worker's PULL with PS_F_COMMIT
 *     for t+1 says its pushes are all sent (same DEALER, so FIFO) and carries its whole-step overflow
 *     flag. When all N workers committed: skip if any flag is set (the same decision on every
 *     partition and server, since every worker sends its flag to every partition), else average,
 *     round to the gradient dtype (as the ring does), optim_step; version t+1; answer pulls.
 *   async: each pushed segment is applied on arrival (scaled by 1/N); pulls get the latest values.
 *   ssp:K: as async, but a committing pull for clock c waits until every live worker committed c-K;
 *     a pull that had to wait is flagged PS_F_STALE in its reply.
 *   allreduce keys (PS_F_AR): sum (f32) of all N pushes, optional 1/N, no optimizer, in every mode.
 * Liveness (ps_server_live.c): every worker beats from a heartbeat thread of its own (ps_hb.h); one
 * that others wait on (pending pulls here) and that misses its beats for the deadline is gone: in sync
 * mode (and for allreduce) the server fails with an error naming its rank, tells every worker
 * (WIRE_ERROR) and then waits for their BYEs; in async/ssp mode it is dropped and logged. A WIRE_BYE
 * marks a clean exit.
 * Authentication: with a job secret, a worker's messages are accepted only once its connection ran the
 * HELLO challenge-response (ps_proto.h, pss_on_auth); anything else from it is rejected (ERR_AUTH,
 * counted) and touches no state, its liveness included. Its heartbeat connection runs one of its own.
 * Lanes (ps_lane.h): a worker on this host may name a shared-memory lane (HELLO PS_HELLO_LANE); its
 * data messages then come through the lane's ring, built into the same message form and handled by
 * the same s_on_message; before a ZeroMQ message of that worker, its lane messages sent earlier are
 * handled (zseq), and replies to it go back through the lane (pss_send). */
#include "ps/ps_server_int.h"
#include "core/zsec.h"
#include "core/rundir.h"
#include <errno.h>
#include <unistd.h>

#define PS_FAIL_LINGER_NS 500000000ull /* after a failure: how long the error replies get to leave */

/* ---------- small helpers ---------- */

void pss_mem(ps_server_t *self, long long delta)
{
    pthread_mutex_lock(&self->mu);
    mem_track(&self->mem, delta);
    pthread_mutex_unlock(&self->mu);
}

static int s_is_local(ps_server_t *self, int w) { return w >= 0 && w == self->cfg.local_worker; }

void pss_send(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h,
                   const ps_frame_t *fr, int nfr)
{
    uint64_t b = 0;
    int rc = 0, wake = 0;
    wk_t *k = w >= 0 && w < self->cfg.nworkers ? &self->wk[w] : NULL;
    if (k && k->lane && ps_lane_send(k->lane, h, fr, nfr, k->ztx, &b, &wake)) {
        if (wake) { /* it sleeps in zmq_poll: a keep-alive wakes it (ps_lane.h) */
            wire_hdr_t ka = {.type = WIRE_HELLO, .sender = (uint32_t)self->rank, .job = self->job, .dtype = DT_F32,
                             .aux = PS_HELLO_KEEPALIVE};
            rc = ps_van_send(self->router, ident, idlen, &ka, NULL, 0, NULL); /* not data: not counted */
            k->ztx++;
        }
    } else {
        rc = ps_van_send(self->router, ident, idlen, h, fr, nfr, &b);
        if (k && k->lane) k->ztx++;
    }
    if (!s_is_local(self, w)) {
        atomic_fetch_add_explicit(&self->sent, b, memory_order_relaxed);
        if (w >= 0) tp_note_traffic(self->cfg.comm->tp, w, b, 0); /* the traffic matrix: worker w is rank w */
    }
    if (rc < 0) LOG_D("ps server %d: reply to %s%d failed: %s", self->cfg.index, w >= 0 ? "worker " : "peer ", w,
                      err_str(rc));
}

static void s_error_to(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *req, int code,
                       const char *text)
{
    wire_hdr_t h = {.type = WIRE_ERROR, .sender = (uint32_t)self->rank, .job = self->job,
                    .key = req ? req->key : 0, .clock = req ? req->clock : 0, .dtype = DT_F32,
                    .aux = code, .nframes = 1};
    ps_frame_t f = {text, strlen(text), 0, NULL, NULL};
    pss_send(self, w, ident, idlen, &h, &f, 1);
}

/* Reject a message: count it, log it, answer the requester with WIRE_ERROR. Returns 0 (handled). */
int pss_reject(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *req, int code,
                    const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    uint64_t n = atomic_fetch_add(&self->rejected, 1) + 1;
    if (n <= 20) LOG_W("ps server %d: rejected a message: %s", self->cfg.index, text);
    else LOG_D("ps server %d: rejected a message: %s", self->cfg.index, text);
    if (ident && idlen) s_error_to(self, w, ident, idlen, req, code, text);
    return 0;
}

void pss_slot_free(ps_server_t *self, slot_t *s)
{
    if (!s) return;
    if (s->mem) pss_mem(self, -(long long)s->mem);
    s->mem = 0;
    optim_destroy(&s->opt);
    s_rbuf_unref(s->params, NULL);
    s_rbuf_unref(s->out, NULL);
    s_rbuf_unref(s->old_out, NULL);
    free(s->agg);
    free(s->committed); free(s->got); free(s->wclock); free(s->pend);
    memset(s, 0, sizeof *s);
}

int pss_slot_alloc(ps_server_t *self, slot_t *s, int ar, uint64_t key, size_t start, size_t len, size_t total,
                        dtype_t dt)
{
    int W = self->cfg.nworkers;
    s->ar = ar; s->key = key; s->start = start; s->len = len; s->total = total; s->dt = dt;
    s->fresh = 1;
    s->agg = calloc(len ? len : 1, sizeof(float));
    s->committed = calloc((size_t)W, 1);
    s->got = calloc((size_t)W, sizeof(size_t));
    s->wclock = calloc((size_t)W, sizeof(uint64_t));
    if (ar) s->out = s_rbuf_new(len * dt_size(dt));
    else s->params = s_rbuf_new(len * sizeof(float));
    if (!s->agg || !s->committed || !s->got || !s->wclock || (ar ? !s->out : !s->params)) {
        pss_slot_free(self, s);
        return err_set(ERR_NOMEM, "ps server: cannot allocate a partition of %zu elements", len);
    }
    s->mem = len * sizeof(float) + (ar ? len * dt_size(dt) : len * sizeof(float));
    pss_mem(self, (long long)s->mem);
    return 0;
}

void pss_round_reset(slot_t *s, int W)
{
    s->fresh = 1; /* agg is cleared (or overwritten) by the round's first push, not here */
    s->out_done = 0;
    s->move = 0;
    memset(s->committed, 0, (size_t)W);
    memset(s->got, 0, (size_t)W * sizeof(size_t));
    s->ncommit = 0;
    s->overflow = 0;
    s->avg = 0;
    s->touched = 0;
}

/* ---------- failure and liveness ---------- */

void pss_fail(ps_server_t *self, int code, const char *fmt, ...)
{
    if (self->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->fail_text, sizeof self->fail_text, fmt, ap);
    va_end(ap);
    self->failed = code;
    self->fail_ns = now_ns();
    LOG_E("ps server %d: %s", self->cfg.index, self->fail_text);
    /* answer every pending pull, and tell every live worker */
    for (size_t i = 0; i < self->npslots + self->nar; i++) {
        slot_t *s = i < self->npslots ? &self->pslots[i] : self->arslots[i - self->npslots];
        s->npend = 0;
    }
    self->npend_total = 0;
    for (int w = 0; w < self->cfg.nworkers; w++) {
        self->wk[w].npend = 0;
        if (self->wk[w].dead || self->wk[w].bye || !self->wk[w].seen) continue;
        s_error_to(self, w, self->ids[w], PS_ID_LEN, NULL, code, self->fail_text);
    }
}


static int s_on_message(ps_server_t *self, ps_vmsg_t *m);

/* s_on_message with a timeline span per message: a push or pull names its sender's rank and key (a
 * partition's arrivals from each worker), anything else is a "server message" */
static int s_handle(ps_server_t *self, ps_vmsg_t *m)
{
    uint64_t tr = trace_t0();
    wire_hdr_t h;
    /* decoded before handling: a handler may consume the frames */
    int hok = tr && m->n >= 2 && wire_decode(ps_van_data(m, 1), ps_van_size(m, 1), &h) == 0;
    int rc = s_on_message(self, m);
    if (hok && h.type == WIRE_PUSH) trace_x2("server push", tr, "from", (int64_t)h.sender, "key", (int64_t)h.key);
    else if (hok && h.type == WIRE_PULL) trace_x2("server pull", tr, "from", (int64_t)h.sender, "key", (int64_t)h.key);
    else trace_x("server message", tr);
    return rc;
}

/* Handle worker w's lane messages sent before its next ZeroMQ message (ps_lane.h's ordering rule). A
 * malformed slot is rejected like a malformed ZeroMQ message; a corrupt ring ends the lane and the
 * worker, which the others may be waiting on. */
static void s_take_lane(ps_server_t *self, int w)
{
    wk_t *k = &self->wk[w];
    for (int i = 0; i < 2 * PS_LANE_SLOTS && k->lane; i++) {
        ps_vmsg_t m;
        int r = ps_lane_recv(k->lane, &m, self->ids[w], PS_ID_LEN, k->zgot);
        if (r == 0) return;
        if (r < 0) {
            int broken = !ps_lane_ok(k->lane);
            pss_reject(self, w, self->ids[w], PS_ID_LEN, NULL, ERR_PROTO, "worker %d: %s", pss_wrank(self, w), err_detail());
            if (broken && !k->dead && !k->bye) {
                k->dead = 1;
                if (self->cfg.mode == PS_SYNC || pss_ar_pending(self))
                    pss_fail(self, ERR_PROTO, "worker rank %d's shared-memory lane is corrupt: dropped", pss_wrank(self, w));
                pss_serve_all(self);
            }
            if (broken) return;
            continue;
        }
        int hrc = s_handle(self, &m);
        ps_van_close_msg(&m);
        if (hrc < 0) LOG_E("ps server %d: %s", self->cfg.index, err_str(hrc));
    }
}

/* A push whose payload frame is a descriptor: check it (size, the worker's process). An allreduce push,
 * and a sync training push, is only noted (self->defer): the handler reads it once the round's checks
 * passed (pss_fold_cma, pss_fold_push); an async push is read whole into the scratch buffer, which then
 * stands in for the frame (it is applied only if all of it is finite). */
static int s_cma_payload(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m)
{
    wk_t *k = &self->wk[w];
    cma_desc_t d;
    if (m->n != 4 || ps_van_size(m, 3) != sizeof d) REJ(ERR_PROTO, "push by descriptor without a descriptor frame");
    memcpy(&d, ps_van_data(m, 3), sizeof d);
    size_t esz = dt_size((dtype_t)h->dtype), max = self->cfg.part_bytes * 4 + 64;
    if (d.magic != CMA_DESC_MAGIC || !esz || d.len != h->count * esz || d.len > max || d.pid == 0 || d.pid > INT32_MAX)
        REJ(ERR_PROTO, "bad push descriptor (%llu bytes for %llu elements)", (unsigned long long)d.len,
            (unsigned long long)h->count);
    if (k->cma_pid && d.pid != k->cma_pid)
        REJ(ERR_PROTO, "push descriptor names process %llu, worker %d is process %llu", (unsigned long long)d.pid, pss_wrank(self, w),
            (unsigned long long)k->cma_pid);
    if ((h->aux & PS_F_AR) || self->cfg.mode == PS_SYNC) {
        self->defer = d;
        self->deferred = 1;
        m->ext_frame = 3;
        m->ext = NULL; /* no bytes here: the handler folds them from the worker */
        m->ext_len = (size_t)d.len;
        return 0;
    }
    if (pss_scratch(self, (size_t)d.len) < 0) REJ(ERR_NOMEM, "%s", err_detail());
    int rc = cma_read((pid_t)d.pid, self->scratch, d.addr, (size_t)d.len);
    if (rc < 0) REJ(rc, "cannot read worker %d's push: %s", pss_wrank(self, w), err_detail());
    k->cma_pid = d.pid;
    m->ext_frame = 3;
    m->ext = self->scratch;
    m->ext_len = (size_t)d.len;
    atomic_fetch_add_explicit(&self->received, d.len, memory_order_relaxed);
    tp_note_traffic(self->cfg.comm->tp, w, 0, d.len);
    return 0;
}

static int s_on_message(ps_server_t *self, ps_vmsg_t *m)
{
    int w = -1;
    const void *ident = NULL;
    size_t idlen = 0;
    const wire_hdr_t *h = NULL;
    if (m->n < 1) return 0;
    ident = ps_van_data(m, 0);
    idlen = ps_van_size(m, 0);
    /* count the bytes unless it is our own worker's inproc traffic */
    int local = self->cfg.local_worker >= 0 && idlen == PS_ID_LEN &&
                memcmp(ident, self->ids[self->cfg.local_worker], PS_ID_LEN) == 0;
    wire_hdr_t hd;
    int hok = m->n >= 2 && wire_decode(ps_van_data(m, 1), ps_van_size(m, 1), &hd) == 0;
    /* a keep-alive (a lane's wake-up) is not traffic: workers do not count it either; nor are heartbeats */
    int ka = hok && m->n == 2 && hd.type == WIRE_HELLO && hd.aux == PS_HELLO_KEEPALIVE && hd.nframes == 0;
    int hbw = hok ? ps_hb_of(self->job, self->cfg.nworkers, ident, idlen, &hd) : -1, hb = hbw >= 0;
    if (!local && !ka && !hb) atomic_fetch_add_explicit(&self->received, (uint64_t)m->bytes, memory_order_relaxed);
    if (m->n < 2) REJ(ERR_PROTO, "message without a header frame");
    if (!hok) REJ(ERR_PROTO, "malformed header: %s", err_detail());
    h = &hd;
    if (hd.job != self->job) REJ(ERR_PROTO, "foreign job id %016llx", (unsigned long long)hd.job);
    if (hb) return pss_on_hb(self, hbw, ident, idlen, h, m);
    if (hd.sender >= (uint32_t)self->cfg.nworkers || idlen != PS_ID_LEN ||
        memcmp(ident, self->ids[hd.sender], PS_ID_LEN) != 0)
        REJ(ERR_PROTO, "unknown sender (claims rank %u)", hd.sender);
    int claimed = (int)hd.sender;
    if (m->truncated || (uint32_t)(m->n - 2) != hd.nframes) {
        w = claimed;
        REJ(ERR_PROTO, "frame count %d does not match the header's %u", m->n - 2, hd.nframes);
    }
    w = claimed;
    if (!local && !ka) tp_note_traffic(self->cfg.comm->tp, w, 0, (uint64_t)m->bytes); /* the traffic matrix */
    wk_t *k = &self->wk[w];
    /* a lane's wake-up may trail the BYE it woke us for: nothing to reject */
    if (k->bye && !k->dead && hd.type == WIRE_HELLO && hd.aux == PS_HELLO_KEEPALIVE && hd.nframes == 0) return 0;
    if (k->dead || k->bye) REJ(ERR_STATE, "worker %d already %s", pss_wrank(self, w), k->dead ? "declared dead" : "said BYE");
    if (hd.type == WIRE_HELLO && hd.aux != PS_HELLO_KEEPALIVE && hd.aux != PS_HELLO_LANE)
        return pss_on_auth(self, w, ident, idlen, h, m);
    if (self->auth.set && !k->hello.authed)
        REJ(ERR_AUTH, "a %s claiming worker rank %d, which has not proven it knows the job secret: turned away",
            wire_type_name(hd.type), pss_wrank(self, w));
    if (hd.type == WIRE_HELLO && hd.aux == PS_HELLO_LANE) return pss_on_lane(self, w, ident, idlen, h, m);
    k->seen = 1;
    k->last_ns = now_ns();
    if (hd.type == WIRE_BYE) {
        int needed = !self->failed && pss_needs(self, w) && (self->cfg.mode == PS_SYNC || pss_ar_pending(self));
        k->bye = 1;
        if (needed) pss_fail(self, ERR_PEER, "worker rank %d left (BYE) while the others wait on it", pss_wrank(self, w));
        pss_serve_all(self);
        return 0;
    }
    if (self->failed) {
        s_error_to(self, w, ident, idlen, h, self->failed, self->fail_text);
        return 0;
    }
    if (hd.type == WIRE_HELLO) {
        /* a keep-alive: it only refreshes last_ns (above) */
        if (hd.nframes != 0) REJ(ERR_PROTO, "keep-alive with %u payload frames", hd.nframes);
        return 0;
    }
    if (hd.type == WIRE_SAVE) return pss_on_save(self, w, ident, idlen, h, m);
    if (hd.type != WIRE_PUSH && hd.type != WIRE_PULL && hd.type != WIRE_INIT)
        REJ(ERR_PROTO, "unexpected message type %s", wire_type_name(hd.type));
    ps_meta_t meta;
    if (pss_check_meta(m, &meta) < 0) REJ(ERR_PROTO, "missing or malformed meta frame");
    self->deferred = 0;
    if (hd.aux & PS_F_CMA) {
        if (hd.type == WIRE_INIT) REJ(ERR_PROTO, "INIT by descriptor");
        if (hd.type == WIRE_PUSH) {
            int rc = s_cma_payload(self, w, ident, idlen, h, m);
            if (rc < 0 || m->ext_frame != 3) return rc; /* refused (and answered) */
        }
        if (!self->deferred) k->cma = 1; /* it reads our replies itself from now on (a deferred push: once read) */
    }
    if (hd.aux & PS_F_AR) {
        if (hd.type == WIRE_INIT) REJ(ERR_PROTO, "INIT in the allreduce key space");
        if (hd.aux & ~(PS_F_AR | PS_F_COMMIT | PS_F_AVG | PS_F_MOVE | PS_F_CMA)) REJ(ERR_PROTO, "bad flags 0x%x", hd.aux);
        if ((hd.aux & PS_F_MOVE) && hd.type != WIRE_PUSH) REJ(ERR_PROTO, "move-only flag on a %s",
                                                               wire_type_name(hd.type));
        return pss_on_ar(self, w, ident, idlen, h, m, &meta);
    }
    return pss_on_params(self, w, ident, idlen, h, m, &meta);
}

/* ---------- lifecycle ---------- */

/* Bind the router: tcp on the job's address (workers on other hosts), and an ipc endpoint in a private
 * directory (workers on this host) unless the van is forced; endpoint = "TCP\nIPC" for the store. */
static int s_bind(ps_server_t *self)
{
    const ps_server_cfg_t *cfg = &self->cfg;
    char tcp[256] = "", ipc[256] = "";
    if (cfg->van != PS_VAN_IPC) {
        char addr[128], ep[192];
        CHECK(boot_local_addr(&cfg->comm->boot, addr, sizeof addr));
        snprintf(ep, sizeof ep, "tcp://%s:*", addr);
        if (zmq_bind(self->router, ep) != 0)
            return err_set(ERR_IO, "ps server %d: cannot bind %s: %s", cfg->index, ep, zmq_strerror(zmq_errno()));
        size_t l = sizeof tcp;
        zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, tcp, &l);
    }
    if (cfg->van != PS_VAN_TCP) {
        /* a directory only we can enter holds the socket: other users cannot reach it at all; named with our
         * pid, so that if we are killed the launcher (or the next server) removes it (core/rundir.h) */
        if (rundir_make("ps", self->ipc_dir, sizeof self->ipc_dir) < 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", err_detail());
            self->ipc_dir[0] = 0;
            if (cfg->van == PS_VAN_IPC)
                return err_set(ERR_IO, "ps server %d: no directory for its ipc socket: %s", cfg->index, why);
            LOG_W("ps server %d: no ipc endpoint (%s); workers use tcp", cfg->index, why);
        } else {
            snprintf(self->ipc_path, sizeof self->ipc_path, "%s/s%d", self->ipc_dir, cfg->index);
            snprintf(ipc, sizeof ipc, "ipc://%s", self->ipc_path);
            if (zmq_bind(self->router, ipc) != 0)
                return err_set(ERR_IO, "ps server %d: cannot bind %s: %s", cfg->index, ipc, zmq_strerror(zmq_errno()));
        }
    }
    /* third line: our pid and probe cookie, so a worker on this host can test cross-memory reads */
    snprintf(self->endpoint, sizeof self->endpoint, "%s\n%s\n%d %llu %llu", tcp, ipc, (int)getpid(),
             (unsigned long long)cma_cookie_addr(), (unsigned long long)cma_cookie_value());
    return 0;
}

int ps_server_new(ps_server_t **self_p, const ps_server_cfg_t *cfg)
{
    ps_server_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->cfg = *cfg;
    if (!self->cfg.part_bytes) self->cfg.part_bytes = PS_DEFAULT_PART_BYTES;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = cfg->comm->timeout_ms > 0 ? cfg->comm->timeout_ms : 60000;
    self->job = cfg->job;
    self->rank = cfg->comm->rank;
    self->auth = cfg->comm->boot.auth;
    pthread_mutex_init(&self->mu, NULL);
    self->ids = calloc((size_t)cfg->nworkers, sizeof *self->ids);
    self->wk = calloc((size_t)cfg->nworkers, sizeof *self->wk);
    self->lanes = calloc((size_t)cfg->nworkers, sizeof *self->lanes);
    if (!self->ids || !self->wk || !self->lanes) {
        ps_server_destroy(&self);
        return ERR_NOMEM;
    }
    for (int w = 0; w < cfg->nworkers; w++) ps_routing_id(self->job, w, self->ids[w]);
    self->router = ps_van_socket(cfg->zctx, ZMQ_ROUTER, self->cfg.timeout_ms, ps_max_frame(self->cfg.part_bytes));
    int rc = self->router ? zsec_server(&self->auth, self->router, "ps") : err_set(ERR_IO, "ps server: no socket");
    if (rc == 0) rc = s_bind(self);
    if (rc < 0) {
        ps_server_destroy(&self);
        return rc;
    }
    snprintf(self->inproc, sizeof self->inproc, "inproc://ps-srv-%p", (void *)self);
    if (zmq_bind(self->router, self->inproc) != 0) {
        rc = err_set(ERR_IO, "ps server %d: cannot bind %s", cfg->index, self->inproc);
        ps_server_destroy(&self);
        return rc;
    }
    char key[64];
    snprintf(key, sizeof key, "ps/%u/srv/%d", cfg->gen, cfg->index);
    rc = store_set(cfg->comm->store, key, self->endpoint, strlen(self->endpoint) + 1);
    if (rc < 0) {
        ps_server_destroy(&self);
        return rc;
    }
    self->start_ns = self->drained_ns = now_ns();
    int ival;
    ps_hb_times(self->cfg.timeout_ms, &ival, &self->hb_dead_ms);
    LOG_D("ps server %d on %s", cfg->index, self->endpoint);
    *self_p = self;
    return 0;
}

/* The loop. pipe: the actor's end of the owner pipe (NULL for a dedicated server). */
static int s_loop(ps_server_t *self, void *pipe)
{
    int stopping = 0;
    uint64_t stop_ns = 0;
    self->start_ns = self->drained_ns = now_ns();
    trace_thread_name("ps server");
    for (;;) {
        zmq_pollitem_t it[2] = {{self->router, 0, ZMQ_POLLIN, 0}, {pipe, 0, ZMQ_POLLIN, 0}};
        int W = self->cfg.nworkers;
        int rc = ps_lane_poll(self->nlanes ? self->lanes : NULL, self->nlanes ? W : 0, it, pipe ? 2 : 1, 20,
                              self->cfg.yield_us);
        if (rc < 0 && zmq_errno() != EINTR) return err_set(ERR_IO, "ps server: poll failed");
        if (pipe && (it[1].revents & ZMQ_POLLIN)) {
            char buf[16];
            zmq_recv(pipe, buf, sizeof buf, ZMQ_DONTWAIT);
            stopping = 1;
            stop_ns = now_ns();
        }
        for (int w = 0; w < W && self->nlanes; w++) s_take_lane(self, w);
        int more = (it[0].revents & ZMQ_POLLIN) != 0;
        for (int i = 0; i < 256 && more; i++) {
            ps_vmsg_t m;
            if (ps_van_recv(self->router, &m, 0) < 0) {
                more = 0;
                break;
            }
            if (self->nlanes && m.n >= 1 && ps_van_size(&m, 0) == PS_ID_LEN) {
                /* from a worker with a lane: what it sent there before this message goes first */
                const unsigned char *id = ps_van_data(&m, 0);
                uint32_t w;
                memcpy(&w, id + 4, 4); /* the rank in its routing id (ps_routing_id) */
                if (w < (uint32_t)W && self->wk[w].lane && memcmp(id, self->ids[w], PS_ID_LEN) == 0) {
                    s_take_lane(self, w);
                    self->wk[w].zgot++;
                }
            }
            int hrc = s_handle(self, &m);
            ps_van_close_msg(&m);
            if (hrc < 0) LOG_E("ps server %d: %s", self->cfg.index, err_str(hrc));
        }
        pss_check_liveness(self, !more);
        uint64_t to_ns = (uint64_t)self->cfg.timeout_ms * 1000000ull;
        /* after a failure the error replies only need a moment to leave: wait for BYEs no longer */
        uint64_t fail_to_ns = to_ns < PS_FAIL_LINGER_NS ? to_ns : PS_FAIL_LINGER_NS;
        if (pipe) {
            /* actor: leave once told to and every worker is gone (their replies delivered) */
            if (stopping && (pss_all_gone(self) || now_ns() - stop_ns > (self->failed ? fail_to_ns : to_ns))) break;
        } else {
            if (pss_all_gone(self)) break;
            if (self->failed && now_ns() - self->fail_ns > fail_to_ns) break;
        }
    }
    pss_hb_report(self);
    if (self->failed) return err_set(self->failed, "ps server %d (rank %d): %s", self->cfg.index, self->rank,
                                     self->fail_text);
    return 0;
}

int ps_server_run(ps_server_t *self) { return s_loop(self, NULL); }

int ps_yield_us(const comm_t *comm)
{
    const char *e = getenv("SYNCBENCH_PS_YIELD_US");
    if (e && *e) {
        int v = atoi(e);
        return v < 0 ? 0 : v > 100000 ? 100000 : v;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* ranks outnumber cores: a message's wake-up goes through the scheduler (ZeroMQ's I/O thread
     * signals ours through an eventfd); polling while yielding the core hands it to the thread we wait
     * for and catches the message without a sleep and a wake-up (results/ps-vs-pslite.txt) */
    /* only with every rank on this host: across machines (or emulated ones) waits are link-bound */
    return comm && comm->nnodes == 1 && ncpu > 0 && comm->local_world > ncpu ? 200 : 0;
}

static void *s_actor(void *arg)
{
    ps_server_t *self = arg;
    self->run_rc = s_loop(self, self->pipe_thread);
    return NULL;
}

int ps_server_start(ps_server_t *self)
{
    char ep[96];
    snprintf(ep, sizeof ep, "inproc://ps-pipe-%p", (void *)self);
    self->pipe_owner = zmq_socket(self->cfg.zctx, ZMQ_PAIR);
    self->pipe_thread = zmq_socket(self->cfg.zctx, ZMQ_PAIR);
    int zero = 0;
    if (!self->pipe_owner || !self->pipe_thread) return err_set(ERR_IO, "ps server: cannot create the pipe");
    zmq_setsockopt(self->pipe_owner, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(self->pipe_thread, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(self->pipe_owner, ep) != 0 || zmq_connect(self->pipe_thread, ep) != 0)
        return err_set(ERR_IO, "ps server: cannot connect the pipe");
    if (pthread_create(&self->thread, NULL, s_actor, self) != 0) return err_set(ERR_SYS, "ps server: no thread");
    self->thread_on = 1;
    return 0;
}

const char *ps_server_inproc(const ps_server_t *self) { return self->inproc; }

void ps_server_stats(ps_server_t *self, ps_server_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->bytes_sent = atomic_load(&self->sent);
    out->bytes_received = atomic_load(&self->received);
    out->rejected = atomic_load(&self->rejected);
    out->skipped = atomic_load(&self->skipped);
    out->early_replies = atomic_load(&self->early);
    pthread_mutex_lock(&self->mu);
    out->mem_bytes = self->mem.cur;
    out->mem_peak_bytes = self->mem.peak;
    pthread_mutex_unlock(&self->mu);
}

void ps_server_destroy(ps_server_t **self_p)
{
    ps_server_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    if (self->thread_on) {
        zmq_send(self->pipe_owner, "$TERM", 5, ZMQ_DONTWAIT);
        pthread_join(self->thread, NULL);
        self->thread_on = 0;
    }
    if (self->pipe_owner) zmq_close(self->pipe_owner);
    if (self->pipe_thread) zmq_close(self->pipe_thread);
    if (self->router) zmq_close(self->router);
    if (self->ipc_dir[0]) {
        if (self->ipc_path[0]) unlink(self->ipc_path);
        rmdir(self->ipc_dir);
    }
    for (int w = 0; self->wk && w < self->cfg.nworkers; w++) ps_lane_destroy(&self->wk[w].lane);
    free(self->lanes);
    for (size_t i = 0; i < self->npslots; i++) pss_slot_free(self, &self->pslots[i]);
    free(self->pslots);
    for (size_t i = 0; i < self->nar; i++) {
        pss_slot_free(self, self->arslots[i]);
        free(self->arslots[i]);
    }
    free(self->arslots);
    free(self->scratch);
    free(self->ids);
    free(self->wk);
    auth_wipe(&self->auth);
    pthread_mutex_destroy(&self->mu);
    free(self);
    *self_p = NULL;
}
