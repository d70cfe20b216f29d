/* ps_server_apply.c: the parameter server's request side: which pulls are ready and the replies to
 * them, completing a round (sync aggregation + optimizer, allreduce sums), and applying PUSH / PULL /
 * INIT messages to partitions and allreduce keys (see ps_server.c for the design); a worker's lane setup. */
#include "ps/ps_server_int.h"
#include "ps/ps_ckpt.h"

/* ---------- replies ---------- */

static uint64_t s_min_wclock(ps_server_t *self, const slot_t *s)
{
    uint64_t m = UINT64_MAX;
    for (int w = 0; w < self->cfg.nworkers; w++) {
        if (self->wk[w].dead || self->wk[w].bye) continue;
        if (s->wclock[w] < m) m = s->wclock[w];
    }
    return m;
}

static int s_pull_ready(ps_server_t *self, const slot_t *s, const pend_t *p)
{
    if (!s->ar && !s->inited) return 0;
    if (s->ar || self->cfg.mode == PS_SYNC) return s->version >= p->clock;
    if (self->cfg.mode == PS_SSP) {
        uint64_t need = p->clock > (uint64_t)self->cfg.ssp_k ? p->clock - (uint64_t)self->cfg.ssp_k : 0;
        return s_min_wclock(self, s) >= need;
    }
    return 1;
}

/* Pipelining evidence: does worker p->w still owe this server pushes of another partition of the round
 * this reply answers (same key space and tensor, that partition's round still open for w and fewer of
 * its elements in than the partition has)? Such a reply went out before that worker's last push of the
 * round arrived. */
static int s_reply_is_early(ps_server_t *self, const slot_t *s, const pend_t *p)
{
    int w = p->w;
    if (p->clock == 0) return 0;                      /* attach: no pushes */
    size_t n = s->ar ? self->nar : self->npslots;
    for (size_t i = 0; i < n; i++) {
        const slot_t *o = s->ar ? self->arslots[i] : &self->pslots[i];
        if (o == s || o->total != s->total || o->dt != s->dt) continue;
        if (s->ar || self->cfg.mode == PS_SYNC) {
            if (o->version + 1 == p->clock && !o->committed[w] && o->got[w] < o->len) return 1;
        } else if (o->wclock[w] + 1 == p->clock && o->got[w] < o->len) {
            return 1;
        }
    }
    return 0;
}

static void s_reply_params(ps_server_t *self, slot_t *s, const pend_t *p)
{
    if (s_reply_is_early(self, s, p)) atomic_fetch_add_explicit(&self->early, 1, memory_order_relaxed);
    wire_hdr_t h = {.type = WIRE_PARAMS, .sender = (uint32_t)self->rank, .job = self->job, .key = s->key,
                    .clock = s->ar || self->cfg.mode == PS_SYNC ? s->version : s->wclock[p->w],
                    .offset = 0, .count = s->len, .dtype = s->ar ? s->dt : DT_F32, .nframes = 1};
    int flags = s->ar ? PS_F_AR : 0;
    if (p->stale) flags |= PS_F_STALE;
    if (!s->ar && self->cfg.mode == PS_SYNC && s->last_skipped) flags |= PS_F_SKIPPED;
    h.aux = flags;
    /* sync and allreduce: the buffer cannot change before every worker has received this reply and
     * committed the next round, so it goes zero-copy; async values change under us: copy. */
    int zc = s->ar || self->cfg.mode == PS_SYNC;
    void *buf = s->ar ? s->out : (void *)s->params;
    size_t bytes = s->len * (s->ar ? dt_size(s->dt) : sizeof(float));
    if (zc && self->wk[p->w].cma) {
        /* the worker reads the values from our memory (one copy) by the same argument: they stay until it
         * committed the next round, after reading these */
        cma_desc_t d = cma_desc(buf, bytes);
        h.aux |= PS_F_CMA;
        ps_frame_t f = {&d, sizeof d, 0, NULL, NULL};
        pss_send(self, p->w, self->ids[p->w], PS_ID_LEN, &h, &f, 1);
        if (p->w != self->cfg.local_worker) {
            atomic_fetch_add_explicit(&self->sent, bytes, memory_order_relaxed);
            tp_note_traffic(self->cfg.comm->tp, p->w, bytes, 0);
        }
        return;
    }
    ps_frame_t f = {buf, bytes, zc, zc ? s_rbuf_unref : NULL, NULL};
    if (zc) atomic_fetch_add(&s_rbuf_of(buf)->refs, 1);
    pss_send(self, p->w, self->ids[p->w], PS_ID_LEN, &h, &f, 1);
}

static void s_serve_pending(ps_server_t *self, slot_t *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->npend; i++) {
        pend_t *p = &s->pend[i];
        if (!self->wk[p->w].dead && s_pull_ready(self, s, p)) {
            s_reply_params(self, s, p);
            self->wk[p->w].npend--;
            self->npend_total--;
        } else if (self->wk[p->w].dead) {
            self->wk[p->w].npend--;
            self->npend_total--;
        } else {
            s->pend[j++] = *p;
        }
    }
    s->npend = j;
}

void pss_serve_all(ps_server_t *self)
{
    for (size_t i = 0; i < self->npslots; i++) s_serve_pending(self, &self->pslots[i]);
    for (size_t i = 0; i < self->nar; i++) s_serve_pending(self, self->arslots[i]);
}

static int s_add_pend(ps_server_t *self, slot_t *s, int w, uint64_t clock)
{
    if (s->npend == s->cappend) {
        size_t nc = s->cappend ? s->cappend * 2 : 8;
        pend_t *np = realloc(s->pend, nc * sizeof *np);
        if (!np) return ERR_NOMEM;
        s->pend = np;
        s->cappend = nc;
    }
    pend_t p = {w, clock, 0};
    if (!s_pull_ready(self, s, &p) && self->cfg.mode == PS_SSP && !s->ar && s->inited) p.stale = 1;
    s->pend[s->npend++] = p;
    self->wk[w].npend++;
    self->npend_total++;
    s_serve_pending(self, s);
    return 0;
}

/* ---------- rounds ---------- */

static void s_complete_round(ps_server_t *self, slot_t *s)
{
    int W = self->cfg.nworkers;
    if (s->ar) {
        /* out already holds the result when the last push wrote it there, or keeps its bytes when the
         * round only moved them */
        if (!s->out_done && !s->move) {
            if (s->fresh) memset(s->agg, 0, s->len * sizeof(float)); /* nothing pushed: the sum is 0 */
            if (s->avg) dt_scale(s->agg, s->len, DT_F32, pss_inv_div(self));
            dt_convert(s->out, s->dt, s->agg, DT_F32, s->len);
        }
    } else if (s->overflow || (!s->fresh && dt_has_nonfinite(s->agg, s->len, DT_F32))) {
        /* a worker's flag (AMP), or a sum that is not finite (as the ring checks its sums) */
        s->last_skipped = 1;
        atomic_fetch_add(&self->skipped, 1);
    } else {
        s->last_skipped = 0;
        if (s->fresh) memset(s->agg, 0, s->len * sizeof(float)); /* nothing pushed: the sum is 0 */
        /* the ring's arithmetic: sum, times 1/N, rounded to the gradient dtype, then the optimizer */
        dt_scale(s->agg, s->len, DT_F32, pss_inv_div(self));
        if (s->dt == DT_F16) for (size_t i = 0; i < s->len; i++) s->agg[i] = f16_to_f32(f32_to_f16(s->agg[i]));
        else if (s->dt == DT_BF16) for (size_t i = 0; i < s->len; i++) s->agg[i] = bf16_to_f32(f32_to_bf16(s->agg[i]));
        /* Adam's t: the trainer's count when it sends one (a resumed run continues it), else ours */
        s->applied = s->meta.step ? s->meta.step : s->applied + 1;
        uint64_t tr = trace_t0();
        int rc = optim_step(s->opt, s->params, s->agg, 0, s->len, s->meta.inv_scale, s->meta.lr, s->applied);
        trace_x1("server optimizer", tr, "key", (int64_t)s->key);
        if (rc < 0) LOG_E("ps server %d: optimizer step failed on key %llu: %s", self->cfg.index,
                          (unsigned long long)s->key, err_str(rc));
    }
    s->version++;
    if (s->old_out) { /* every worker committed this round, so none still reads the replaced result */
        s_rbuf_unref(s->old_out, NULL);
        s->old_out = NULL;
    }
    pss_round_reset(s, W);
    s_serve_pending(self, s);
}

/* ---------- message handling ---------- */

static int s_layout(ps_server_t *self, uint64_t total, dtype_t gdt, const char **why)
{
    if (self->lay_set) {
        if (total != self->lay.total) { *why = "size mismatch (tensor total differs from the attached one)"; return -1; }
        if (gdt != self->grad_dt) { *why = "wrong dtype"; return -1; }
        return 0;
    }
    if (total == 0 || total > ((uint64_t)1 << 40) || dt_size(gdt) == 0) { *why = "bad tensor size or dtype"; return -1; }
    ps_layout_init(&self->lay, (size_t)total, sizeof(float), self->cfg.part_bytes, self->cfg.nservers);
    size_t n = 0;
    for (size_t k = (size_t)self->cfg.index; k < self->lay.nparts; k += (size_t)self->cfg.nservers) n++;
    self->pslots = calloc(n ? n : 1, sizeof(slot_t));
    if (!self->pslots) { *why = "out of memory"; return -1; }
    size_t j = 0;
    for (size_t k = (size_t)self->cfg.index; k < self->lay.nparts; k += (size_t)self->cfg.nservers, j++) {
        if (pss_slot_alloc(self, &self->pslots[j], 0, k, ps_part_start(&self->lay, k), ps_part_len(&self->lay, k),
                         (size_t)total, gdt) < 0) {
            for (size_t i = 0; i < j; i++) pss_slot_free(self, &self->pslots[i]);
            free(self->pslots);
            self->pslots = NULL;
            *why = "out of memory";
            return -1;
        }
    }
    self->npslots = n;
    self->grad_dt = gdt;
    self->lay_set = 1;
    return 0;
}

static slot_t *s_pslot(ps_server_t *self, uint64_t key)
{
    if (!self->lay_set || key >= self->lay.nparts || ps_part_owner(&self->lay, (size_t)key) != self->cfg.index)
        return NULL;
    return &self->pslots[(size_t)key / (size_t)self->cfg.nservers];
}

static slot_t *s_arslot_find(ps_server_t *self, uint64_t key)
{
    for (size_t i = 0; i < self->nar; i++)
        if (self->arslots[i]->key == key) return self->arslots[i];
    return NULL;
}


int pss_check_meta(ps_vmsg_t *m, ps_meta_t *meta)
{
    if (m->n < 3 || ps_van_size(m, 2) != sizeof(ps_meta_t)) return -1;
    memcpy(meta, ps_van_data(m, 2), sizeof *meta);
    if (!isfinite(meta->lr) || !isfinite(meta->inv_scale)) return -1;
    return 0;
}

/* A commit (a commit-PULL, or a push carrying PS_F_COMMIT) must be this worker's first of the round and
 * agree with the others on sum or average. 0: it may commit; 1: refused (answered): nothing applies. */
static int s_ar_commit_check(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, slot_t *s)
{
    if (s->committed[w])
        return 1 + pss_reject(self, w, ident, idlen, h, ERR_PROTO, "allreduce key %llu: second commit",
                              (unsigned long long)h->key);
    int avg = (h->aux & PS_F_AVG) ? 1 : 0;
    if (s->ncommit && avg != s->avg)
        return 1 + pss_reject(self, w, ident, idlen, h, ERR_MISMATCH, "allreduce key %llu: workers disagree on "
                              "sum/avg", (unsigned long long)h->key);
    s->avg = avg;
    return 0;
}

/* Is worker w's committing push the last contribution of the round (every other worker committed)? */
static int s_ar_last(ps_server_t *self, const slot_t *s, int w)
{
    return s->ncommit == self->cfg.nworkers - 1 && !s->committed[w];
}

static int s_ar_commit(ps_server_t *self, slot_t *s, int w, uint64_t clock)
{
    s->committed[w] = 1;
    s->ncommit++;
    s->touched = 1;
    CHECK(s_add_pend(self, s, w, clock));
    if (s->ncommit == self->cfg.nworkers) s_complete_round(self, s);
    return 0;
}

/* A round whose sum took part of a push that could not be read whole (pss_fold_cma): refused. */
#define S_BROKEN(s) REJ(ERR_STATE, "allreduce key %llu: this round is lost (worker %d's push was cut short " \
                        "midway)", (unsigned long long)h->key, pss_wrank(self, (s)->broken - 1))

int pss_on_ar(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m,
                   const ps_meta_t *meta)
{
    dtype_t dt = (dtype_t)h->dtype;
    size_t esz = dt_size(dt);
    if (!esz) REJ(ERR_PROTO, "wrong dtype %u", h->dtype);
    if (meta->total == 0 || meta->total > ((uint64_t)1 << 40)) REJ(ERR_PROTO, "bad allreduce size %llu",
                                                                     (unsigned long long)meta->total);
    ps_layout_t l;
    ps_layout_init(&l, (size_t)meta->total, esz, self->cfg.part_bytes, self->cfg.nservers);
    if (h->key >= l.nparts || ps_part_owner(&l, (size_t)h->key) != self->cfg.index)
        REJ(ERR_PROTO, "wrong key %llu for an allreduce of %llu elements (not owned by server %d)",
            (unsigned long long)h->key, (unsigned long long)meta->total, self->cfg.index);
    size_t len = ps_part_len(&l, (size_t)h->key), start = ps_part_start(&l, (size_t)h->key);
    slot_t *s = s_arslot_find(self, h->key);
    if (h->type == WIRE_PUSH) {
        if (m->n != 4) REJ(ERR_PROTO, "allreduce push needs a meta and a payload frame");
        if (s && (s->total != meta->total || s->dt != dt)) {
            if (s->touched || s->npend) REJ(ERR_MISMATCH, "allreduce of key %llu: size/dtype differs within a round",
                                            (unsigned long long)h->key);
            uint64_t v = s->version;
            /* workers may still be reading the last result by descriptor: keep it one more round */
            void *keep = s->out;
            atomic_fetch_add(&s_rbuf_of(keep)->refs, 1);
            pss_slot_free(self, s);
            if (pss_slot_alloc(self, s, 1, h->key, start, len, (size_t)meta->total, dt) < 0) {
                /* keep the table consistent: drop the empty slot */
                for (size_t i = 0; i < self->nar; i++)
                    if (self->arslots[i] == s) { self->arslots[i] = self->arslots[--self->nar]; break; }
                free(s);
                REJ(ERR_NOMEM, "out of memory for an allreduce partition");
            }
            s->version = v;
            s->old_out = keep;
        }
        if (!s) {
            if (self->nar == self->capar) {
                size_t nc = self->capar ? self->capar * 2 : 16;
                slot_t **na = realloc(self->arslots, nc * sizeof *na);
                if (!na) REJ(ERR_NOMEM, "out of memory");
                self->arslots = na;
                self->capar = nc;
            }
            s = calloc(1, sizeof *s);
            if (!s || pss_slot_alloc(self, s, 1, h->key, start, len, (size_t)meta->total, dt) < 0) {
                free(s);
                REJ(ERR_NOMEM, "out of memory for an allreduce partition");
            }
            self->arslots[self->nar++] = s;
        }
        if (h->clock != s->version)
            REJ(ERR_PROTO, "allreduce key %llu: clock %llu, expected %llu (%s)", (unsigned long long)h->key,
                (unsigned long long)h->clock, (unsigned long long)s->version, h->clock > s->version ? "from the future" : "stale");
        if (s->committed[w]) REJ(ERR_PROTO, "allreduce key %llu: push after commit", (unsigned long long)h->key);
        if (s->broken) S_BROKEN(s);
        size_t pb = ps_van_size(m, 3);
        if (h->offset > len || wire_check_payload(h, pb, len - (size_t)h->offset) < 0 ||
            s->got[w] + (size_t)h->count > len)
            REJ(ERR_PROTO, "allreduce key %llu: wrong size (offset %llu count %llu, %zu bytes; partition has %zu)",
                (unsigned long long)h->key, (unsigned long long)h->offset, (unsigned long long)h->count, pb, len);
        int move = (h->aux & PS_F_MOVE) ? 1 : 0;
        if (s->touched && move != s->move)
            REJ(ERR_MISMATCH, "allreduce key %llu: workers disagree on moving or reducing", (unsigned long long)h->key);
        s->move = move;
        int commit = (h->aux & PS_F_COMMIT) ? 1 : 0;
        const void *src = ps_van_data(m, 3);
        size_t n = (size_t)h->count, off = (size_t)h->offset;
        if (commit && (s->got[w] + n != len))
            REJ(ERR_PROTO, "allreduce key %llu: committing push leaves the partition incomplete", (unsigned long long)h->key);
        if (commit && s_ar_commit_check(self, w, ident, idlen, h, s)) return 0;
        if (self->deferred) {
            /* by descriptor: read now that every check passed, folded chunk by chunk (ps_server_fold.c) */
            if (pss_fold_cma(self, w, ident, idlen, h, s, commit && s_ar_last(self, s, w))) return 0;
        } else if (move) {
            /* the ceiling: the bytes arrived; nothing is summed */
        } else if (commit && s_ar_last(self, s, w) && off == 0 && n == len && dt == DT_F32 && !s->fresh &&
                   ((uintptr_t)src & (sizeof(float) - 1)) == 0) {
            /* the round's last push: sum (and average) straight into the reply buffer, one pass */
            if (s->avg) dt_add_scale(s->out, s->agg, src, n, DT_F32, pss_inv_div(self));
            else dt_add(s->out, s->agg, src, n, DT_F32);
            s->out_done = 1;
        } else {
            pss_agg_push(s, off, src, n, dt);
        }
        s->got[w] += n;
        s->touched = 1;
        if (commit) return s_ar_commit(self, s, w, h->clock + 1);
        return 0;
    }
    /* PULL */
    if (m->n != 3) REJ(ERR_PROTO, "pull needs exactly a meta frame");
    if (!s || s->total != meta->total || s->dt != dt)
        REJ(ERR_PROTO, "allreduce pull of key %llu that was never pushed with this size/dtype", (unsigned long long)h->key);
    if (h->aux & PS_F_COMMIT) {
        if (h->clock != s->version + 1)
            REJ(ERR_PROTO, "allreduce key %llu: commit for clock %llu, expected %llu", (unsigned long long)h->key,
                (unsigned long long)h->clock, (unsigned long long)(s->version + 1));
        if (s->broken) S_BROKEN(s);
        if (s_ar_commit_check(self, w, ident, idlen, h, s)) return 0;
        return s_ar_commit(self, s, w, h->clock);
    }
    if (h->clock > s->version + 1) REJ(ERR_PROTO, "allreduce pull from the future");
    return s_add_pend(self, s, w, h->clock);
}

/* A resume's INIT (frames 5...: psc_state_t, then its nopt optimizer buffers of the partition): put the
 * saved optimizer state into the partition's fresh optimizer. 0, or -1 with *why. */
static int s_init_state(ps_server_t *self, slot_t *s, ps_vmsg_t *m, const char **why)
{
    (void)self;
    psc_state_t st;
    float *bufs[OPTIM_MAX_BUFS] = {0};
    int nb = OPTIM_MAX_BUFS;
    size_t cnt = 0;
    if (ps_van_size(m, 5) != sizeof st) { *why = "bad resume state frame"; return -1; }
    memcpy(&st, ps_van_data(m, 5), sizeof st);
    if (optim_state(s->opt, bufs, &nb, &cnt) < 0 || cnt != s->len) { *why = "no optimizer state"; return -1; }
    if ((int)st.nopt != nb || m->n != 6 + nb) {
        *why = "the checkpoint's optimizer buffers do not match this optimizer's (another --optim?)";
        return -1;
    }
    for (int k = 0; k < nb; k++)
        if (ps_van_size(m, 6 + k) != s->len * sizeof(float)) { *why = "resume optimizer frame of the wrong size"; return -1; }
    for (int k = 0; k < nb; k++) memcpy(bufs[k], ps_van_data(m, 6 + k), s->len * sizeof(float));
    s->applied = s->step0 = st.applied;
    return 0;
}

int pss_on_params(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m,
                       const ps_meta_t *meta)
{
    const char *why = NULL;
    dtype_t gdt = (dtype_t)(h->type == WIRE_INIT ? (uint32_t)h->aux : h->dtype);
    if (h->type == WIRE_INIT && (h->aux < 0 || h->aux >= DT_COUNT)) REJ(ERR_PROTO, "INIT: bad gradient dtype");
    if (s_layout(self, meta->total, gdt, &why) < 0) REJ(ERR_PROTO, "%s", why);
    slot_t *s = s_pslot(self, h->key);
    if (!s) REJ(ERR_PROTO, "wrong key %llu (server %d owns %zu of %zu partitions)", (unsigned long long)h->key,
                self->cfg.index, self->npslots, self->lay.nparts);
    int W = self->cfg.nworkers;
    switch (h->type) {
    case WIRE_INIT: {
        if (w != 0) REJ(ERR_PROTO, "INIT from worker %d (only worker 0 initialises)", pss_wrank(self, w));
        /* a resume's INIT: a psc_state_t frame and the optimizer buffers follow the values (ps_ckpt.h) */
        if (m->n != 5 && m->n < 6) REJ(ERR_PROTO, "INIT needs meta, optimizer and values frames");
        if (s->inited) REJ(ERR_STATE, "INIT of key %llu twice", (unsigned long long)h->key);
        if (h->dtype != DT_F32 || h->offset != s->start || h->count != s->len ||
            wire_check_payload(h, ps_van_size(m, 4), s->len) < 0)
            REJ(ERR_PROTO, "INIT of key %llu: wrong offset/size/dtype", (unsigned long long)h->key);
        optim_cfg_t oc;
        if (ps_van_size(m, 3) != sizeof oc) REJ(ERR_PROTO, "INIT: bad optimizer frame");
        memcpy(&oc, ps_van_data(m, 3), sizeof oc);
        if ((oc.kind != OPT_SGD && oc.kind != OPT_ADAM) || !isfinite(oc.lr) || !isfinite(oc.momentum) ||
            !isfinite(oc.weight_decay) || !isfinite(oc.beta1) || !isfinite(oc.beta2) || !isfinite(oc.eps))
            REJ(ERR_PROTO, "INIT: bad optimizer config");
        int rc = optim_new(&s->opt, &oc, s->len);
        if (rc < 0) REJ(rc, "INIT: optimizer: %s", err_str(rc));
        size_t ob = optim_state_bytes(s->opt);
        s->mem += ob;
        pss_mem(self, (long long)ob);
        if (m->n >= 6 && s_init_state(self, s, m, &why) < 0) {
            optim_destroy(&s->opt);
            s->mem -= ob;
            pss_mem(self, -(long long)ob);
            REJ(ERR_MISMATCH, "INIT of key %llu: %s", (unsigned long long)h->key, why);
        }
        memcpy(s->params, ps_van_data(m, 4), s->len * sizeof(float));
        self->optim_kind = (int)oc.kind;
        s->inited = 1;
        s->meta = *meta;
        s_serve_pending(self, s);
        return 0;
    }
    case WIRE_PUSH: {
        if (m->n != 4) REJ(ERR_PROTO, "push needs a meta and a payload frame");
        if (!s->inited) REJ(ERR_STATE, "push to key %llu before INIT", (unsigned long long)h->key);
        if (h->dtype != (uint32_t)self->grad_dt) REJ(ERR_PROTO, "wrong dtype %s (expected %s)", dt_name((dtype_t)h->dtype),
                                                    dt_name(self->grad_dt));
        size_t pb = ps_van_size(m, 3);
        if (h->offset > s->len || wire_check_payload(h, pb, s->len - (size_t)h->offset) < 0)
            REJ(ERR_PROTO, "key %llu: wrong size (offset %llu count %llu, %zu bytes; partition has %zu)",
                (unsigned long long)h->key, (unsigned long long)h->offset, (unsigned long long)h->count, pb, s->len);
        const void *src = ps_van_data(m, 3);
        size_t n = (size_t)h->count, off = (size_t)h->offset;
        if (self->cfg.mode == PS_SYNC) {
            if (h->clock != s->version)
                REJ(ERR_PROTO, "key %llu: push for clock %llu, server is at %llu (%s)", (unsigned long long)h->key,
                    (unsigned long long)h->clock, (unsigned long long)s->version,
                    h->clock > s->version ? "clock from the future" : "stale clock");
            if (s->committed[w]) REJ(ERR_PROTO, "key %llu: push after commit", (unsigned long long)h->key);
            if (s->got[w] + n > s->len) REJ(ERR_PROTO, "key %llu: more elements pushed than the partition has",
                                            (unsigned long long)h->key);
            if (self->deferred) {
                if (pss_fold_push(self, w, ident, idlen, h, s)) return 0; /* refused and answered, or failed */
            } else {
                pss_agg_push(s, off, src, n, self->grad_dt);
            }
            s->got[w] += n;
            s->touched = 1;
            return 0;
        }
        /* async / ssp: apply now */
        if (h->clock != s->wclock[w])
            REJ(ERR_PROTO, "key %llu: push for clock %llu, worker %d is at %llu (%s)", (unsigned long long)h->key,
                (unsigned long long)h->clock, pss_wrank(self, w), (unsigned long long)s->wclock[w],
                h->clock > s->wclock[w] ? "clock from the future" : "stale clock");
        s->got[w] += n;                       /* (pipelining stat only; reset at w's commit) */
        memset(s->agg + off, 0, n * sizeof(float));
        pss_accumulate(s->agg + off, src, n, self->grad_dt);
        if (dt_has_nonfinite(s->agg + off, n, DT_F32)) {
            atomic_fetch_add(&self->skipped, 1);
            return 0;
        }
        int rc = optim_step(s->opt, s->params + off, s->agg + off, off, n, meta->inv_scale / (float)W, meta->lr,
                            s->step0 + h->clock + 1);
        if (rc < 0) REJ(rc, "optimizer failed: %s", err_str(rc));
        s->applied++;
        return 0;
    }
    case WIRE_PULL: {
        if (m->n != 3) REJ(ERR_PROTO, "pull needs exactly a meta frame");
        if (h->aux & ~(PS_F_COMMIT | PS_F_OVERFLOW | PS_F_CMA)) REJ(ERR_PROTO, "pull: bad flags 0x%x", h->aux);
        if (h->aux & PS_F_COMMIT) {
            if (!s->inited) REJ(ERR_STATE, "commit on key %llu before INIT", (unsigned long long)h->key);
            if (self->cfg.mode == PS_SYNC) {
                if (h->clock != s->version + 1)
                    REJ(ERR_PROTO, "key %llu: commit for clock %llu, server expects %llu (%s)", (unsigned long long)h->key,
                        (unsigned long long)h->clock, (unsigned long long)(s->version + 1),
                        h->clock > s->version + 1 ? "clock from the future" : "stale clock");
                if (s->committed[w]) REJ(ERR_PROTO, "key %llu: second commit", (unsigned long long)h->key);
                if (s->ncommit == 0) s->meta = *meta;
                s->committed[w] = 1;
                s->ncommit++;
                s->touched = 1;
                if (h->aux & PS_F_OVERFLOW) s->overflow = 1;
                CHECK(s_add_pend(self, s, w, h->clock));
                if (s->ncommit == W) s_complete_round(self, s);
                return 0;
            }
            if (h->clock != s->wclock[w] + 1)
                REJ(ERR_PROTO, "key %llu: commit for clock %llu, worker %d is at %llu (%s)", (unsigned long long)h->key,
                    (unsigned long long)h->clock, pss_wrank(self, w), (unsigned long long)s->wclock[w],
                    h->clock > s->wclock[w] + 1 ? "clock from the future" : "stale clock");
            s->wclock[w]++;
            s->got[w] = 0;
            /* another worker's waiting pull may now be inside the bound */
            s_serve_pending(self, s);
            return s_add_pend(self, s, w, h->clock);
        }
        uint64_t cur = self->cfg.mode == PS_SYNC ? s->version : s->wclock[w];
        if (h->clock > cur + 1) REJ(ERR_PROTO, "key %llu: pull of version %llu from the future (at %llu)",
                                    (unsigned long long)h->key, (unsigned long long)h->clock, (unsigned long long)cur);
        return s_add_pend(self, s, w, self->cfg.mode == PS_SYNC ? h->clock : 0);
    }
    }
    REJ(ERR_PROTO, "unexpected message type");
}

/* PS_HELLO_LANE: map the worker's lane (ps_lane.h checks the name, owner, mode and size, and unlinks it),
 * acknowledge over ZeroMQ, and only then count it: the acknowledgement is the last ZeroMQ message
 * before the lane's ordering counters start. */
int pss_on_lane(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m)
{
    wk_t *k = &self->wk[w];
    if (h->nframes != 1) REJ(ERR_PROTO, "lane setup without a name");
    if (k->lane) REJ(ERR_STATE, "worker %d already has a lane", pss_wrank(self, w));
    ps_lane_t *lane = NULL;
    int rc = ps_lane_open(&lane, ps_van_data(m, 2), ps_van_size(m, 2));
    if (rc < 0) REJ(rc, "cannot use worker %d's shared-memory lane: %s", pss_wrank(self, w), err_detail());
    wire_hdr_t r = {.type = WIRE_HELLO, .sender = (uint32_t)self->rank, .job = self->job, .dtype = DT_F32,
                    .aux = PS_HELLO_LANE};
    pss_send(self, w, ident, idlen, &r, NULL, 0);
    k->lane = self->lanes[w] = lane;
    k->zgot = k->ztx = 0;
    self->nlanes++;
    return 0;
}
