/* ps_server_live.c: the parameter server's view of its workers: who it waits on, who is alive (heartbeats,
 * ps_hb.h), who is gone, and the HELLO handshakes that admit a worker's data and heartbeat connections.
 *
 * Liveness. A worker's heartbeat thread beats every interval from its own connection (routing id
 * ps_hb_routing_id), whatever its main thread computes; any message of its data connection counts as
 * a beat too. A worker that others wait on (a pending pull here needs its push, commit, INIT or clock)
 * and that has not beaten for the deadline (ps_hb_times: 10 s, at most half the timeout, at least
 * PS_HB_MIN_BEATS of its intervals) is gone: stopped, hung or dead. In sync mode (and for allreduce)
 * the server fails naming it, tells every worker (WIRE_ERROR) and then waits for their BYEs; in
 * async/ssp mode it is dropped and logged. A worker never heard beating (its engine failed before its
 * heartbeats began) keeps the rule it had before heartbeats, silent for half the timeout, counted from
 * when others began to wait on it (not from the server's start: 64 workers starting on 2 cores take
 * longer than that to reach their first step, and worker 0 was once declared dead so). Beats still
 * queued behind other messages are not missed beats: a worker is judged only right after the socket
 * was drained (or when it has not been for a whole deadline). */
#include "ps/ps_server_int.h"

int pss_ar_pending(ps_server_t *self)
{
    for (size_t i = 0; i < self->nar; i++)
        if (self->arslots[i]->npend) return 1;
    return 0;
}

/* Does a pending pull here wait on worker w (its commit, its INIT, or its clock under SSP)? */
int pss_needs(ps_server_t *self, int w)
{
    for (size_t i = 0; i < self->npslots + self->nar; i++) {
        slot_t *s = i < self->npslots ? &self->pslots[i] : self->arslots[i - self->npslots];
        if (!s->npend) continue;
        if (!s->ar && !s->inited) {
            if (w == 0) return 1;
            continue;
        }
        if (s->ar || self->cfg.mode == PS_SYNC) {
            if (!s->committed[w]) return 1;
        } else if (self->cfg.mode == PS_SSP) {
            for (size_t j = 0; j < s->npend; j++) {
                uint64_t c = s->pend[j].clock, k = (uint64_t)self->cfg.ssp_k;
                if (c > k && s->wclock[w] < c - k) return 1;
            }
        }
    }
    return 0;
}

/* The last sign of life of worker k: its last message or beat (the server's start before either). */
static uint64_t s_life(const ps_server_t *self, const wk_t *k)
{
    uint64_t t = k->seen ? k->last_ns : self->start_ns;
    return k->hb_seen && k->hb_ns > t ? k->hb_ns : t;
}

/* How long worker k may go without a beat: the server's deadline, stretched to PS_HB_MIN_BEATS of the
 * worker's own interval (a worker started with a longer timeout beats less often). */
static uint64_t s_deadline_ns(const ps_server_t *self, const wk_t *k)
{
    uint64_t d = (uint64_t)self->hb_dead_ms, w = (uint64_t)PS_HB_MIN_BEATS * (uint64_t)k->hb_ival_ms;
    return (d > w ? d : w) * 1000000ull;
}

void pss_check_liveness(ps_server_t *self, int drained)
{
    uint64_t now = now_ns();
    if (drained) self->drained_ns = now;
    if (now - self->last_check_ns < 20000000ull) return;
    self->last_check_ns = now;
    int to = self->cfg.timeout_ms > 0 ? self->cfg.timeout_ms : 60000;
    uint64_t silent_ns = (uint64_t)(to / 2 > 50 ? to / 2 : 50) * 1000000ull;
    int judge = drained || now - self->drained_ns > (uint64_t)self->hb_dead_ms * 1000000ull;
    int anybye = 0;
    for (int w = 0; w < self->cfg.nworkers; w++) anybye |= self->wk[w].bye;
    for (int w = 0; w < self->cfg.nworkers; w++) {
        wk_t *k = &self->wk[w];
        if (k->dead || k->bye) continue;
        uint64_t life = s_life(self, k);
        if (!k->hb_seen) {
            /* never heard beating: silent since others began to wait on it, not since we started (the
             * others may still have been starting up) */
            int need = pss_needs(self, w);
            if (need && !k->need_ns) k->need_ns = now;
            if (!need) k->need_ns = 0;
            if (k->need_ns > life) life = k->need_ns;
        }
        uint64_t quiet = now > life ? now - life : 0;
        uint64_t limit = k->hb_seen ? s_deadline_ns(self, k) : silent_ns;
        unsigned long long ms = (unsigned long long)(quiet / 1000000ull), lim = (unsigned long long)(limit / 1000000ull);
        if (!self->failed && judge && quiet > limit && (k->hb_seen ? pss_needs(self, w) : k->need_ns != 0)) {
            k->dead = 1;
            char why[160];
            if (k->hb_seen)
                snprintf(why, sizeof why, "no heartbeat for %llu ms (deadline %llu ms): stopped, hung or dead", ms, lim);
            else snprintf(why, sizeof why, "silent for %llu ms while waited on, and never heard beating", ms);
            if (self->cfg.mode == PS_SYNC || pss_ar_pending(self)) {
                pss_fail(self, ERR_PEER, "worker rank %d is gone: %s, while the others wait on it (no BYE)",
                         pss_wrank(self, w), why);
            } else {
                LOG_W("ps server %d: worker rank %d is gone: %s (no BYE): dropped, carrying on with the others",
                      self->cfg.index, pss_wrank(self, w), why);
                pss_serve_all(self);
            }
        } else if ((anybye || self->failed) && quiet > (uint64_t)to * 1000000ull) {
            k->dead = 1;
            LOG_W("ps server %d: worker rank %d never said BYE (silent for %llu ms)", self->cfg.index, pss_wrank(self, w), ms);
            pss_serve_all(self);
        }
    }
    /* nobody waits on anybody, nobody said BYE, and no worker has said anything for two timeouts (every
     * worker failed before its first message, or lost its BYE): stop waiting for them */
    uint64_t newest = self->start_ns;
    int open = 0;
    for (int w = 0; w < self->cfg.nworkers; w++) {
        wk_t *k = &self->wk[w];
        if (k->dead || k->bye) continue;
        open = 1;
        uint64_t life = s_life(self, k);
        if (life > newest) newest = life;
    }
    if (!self->failed && open && !anybye && now > newest && now - newest > 2 * (uint64_t)to * 1000000ull)
        pss_fail(self, ERR_TIMEOUT, "no worker has been heard from for %llu ms (none said BYE): giving up",
                 (unsigned long long)((now - newest) / 1000000ull));
}

int pss_all_gone(ps_server_t *self)
{
    for (int w = 0; w < self->cfg.nworkers; w++)
        if (!self->wk[w].dead && !self->wk[w].bye) return 0;
    return 1;
}

static ps_hb_srv_t s_hbc(const ps_server_t *self)
{
    ps_hb_srv_t c = {.auth = &self->auth, .job = self->job, .timeout_ms = self->cfg.timeout_ms};
    return c;
}

/* The first payload frame of m (NULL, 0 without one). */
static const void *s_pl(ps_vmsg_t *m, size_t *len)
{
    *len = m->n > 2 ? ps_van_size(m, 2) : 0;
    return m->n > 2 ? ps_van_data(m, 2) : NULL;
}

static void s_answer(ps_server_t *self, int sendw, int wi, const void *ident, size_t idlen, const ps_hbv_t *v)
{
    wire_hdr_t r = {.type = WIRE_HELLO, .sender = (uint32_t)self->rank, .job = self->job, .dtype = DT_F32,
                    .aux = PS_HELLO_CHAL, .nframes = 1};
    ps_frame_t f = {v->out, sizeof v->out, 0, NULL, NULL};
    if (sendw >= 0) pss_send(self, sendw, ident, idlen, &r, &f, 1);
    else if (ps_van_send(self->router, ident, idlen, &r, &f, 1, NULL) < 0)
        LOG_D("ps server %d: hello answer to worker rank %d's heartbeats failed: %s", self->cfg.index,
              pss_wrank(self, wi), err_detail());
}

/* The HELLO handshake (ps_hb_srv.h) of worker w's data connection: a challenge is answered through
 * pss_send (its data connection, maybe its lane); a proof over its last challenge authenticates it. */
int pss_on_auth(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m)
{
    ps_hb_srv_t c = s_hbc(self);
    ps_hbv_t v;
    size_t plen;
    const void *pl = s_pl(m, &plen);
    ps_hello_step(&c, w, pss_wrank(self, w), 0, &self->wk[w].hello, h, m->n - 2, pl, plen, &v);
    if (v.act == PS_HBV_REFUSE) REJ(v.code, "%s", v.why);
    if (v.act == PS_HBV_ANSWER) s_answer(self, w, w, ident, idlen, &v);
    return 0;
}

/* A message on worker wi's heartbeat connection: its hello, then beats; nothing else is accepted there.
 * Beats are not traffic (no byte counted), and a beat trailing the worker's BYE, or of a worker given
 * up on, is dropped without an answer. Answers and refusals go straight back to the heartbeat
 * connection, never through the worker's lane. */
int pss_on_hb(ps_server_t *self, int wi, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m)
{
    int w = -1; /* REJ answers the heartbeat connection */
    wk_t *k = &self->wk[wi];
    ps_hb_srv_t c = s_hbc(self);
    ps_hbv_t v;
    size_t plen;
    const void *pl = s_pl(m, &plen);
    ps_hb_step(&c, wi, pss_wrank(self, wi), &k->hb_hello, k->dead || k->bye, h, m->n - 2, m->truncated, pl, plen, &v);
    if (v.act == PS_HBV_REFUSE) REJ(v.code, "%s", v.why);
    if (v.act == PS_HBV_ANSWER) s_answer(self, -1, wi, ident, idlen, &v);
    if (v.act != PS_HBV_BEAT) return 0;
    k->hb_ival_ms = v.ival_ms;
    uint64_t now = now_ns();
    if (k->hb_seen && now - k->hb_ns > self->hb_gap_ns) {
        self->hb_gap_ns = now - k->hb_ns;
        self->hb_gap_w = wi;
    }
    k->hb_ns = now;
    k->hb_seen = 1;
    return 0;
}

void pss_hb_report(ps_server_t *self)
{
    int n = 0;
    for (int w = 0; w < self->cfg.nworkers; w++) n += self->wk[w].hb_seen;
    LOG_I("ps server %d: heartbeats from %d of %d workers, longest gap %.0f ms (worker rank %d), deadline %d ms",
          self->cfg.index, n, self->cfg.nworkers, (double)self->hb_gap_ns / 1e6, pss_wrank(self, self->hb_gap_w),
          self->hb_dead_ms);
}
