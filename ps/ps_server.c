/* ps_server.c: the parameter server: owns partitions (params + optimizer state + an f32 aggregation
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
 * Liveness: the last message time per worker. A worker that others wait on (pending pulls here) and
 * that stays silent for timeout/2 is dead: in sync mode (and for allreduce) the server fails with an
 * error naming its rank, tells every worker (WIRE_ERROR) and then waits for their BYEs; in async/ssp
 * mode it is dropped and logged. A WIRE_BYE marks a clean exit. */
#include "ps/ps_server.h"
#include "ps/ps_proto.h"
#include "ps/ps_van.h"
#include "ps/ps.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/optim.h"
#include "core/timer.h"
#include "core/trace.h"
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int w;
    uint64_t clock;
    int stale;
} pend_t;

/* A reference-counted buffer: replies go out zero-copy holding a reference, so a buffer that a slot
 * drops (allreduce size change, destroy) lives until ZeroMQ has sent the last reply made from it. */
typedef struct {
    _Atomic long refs;
    max_align_t data[];
} rbuf_t;

static void *s_rbuf_new(size_t bytes)
{
    rbuf_t *b = calloc(1, sizeof(rbuf_t) + (bytes ? bytes : 1));
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    return b->data;
}
static rbuf_t *s_rbuf_of(void *data) { return (rbuf_t *)((char *)data - offsetof(rbuf_t, data)); }
static void s_rbuf_unref(void *data, void *hint)
{
    (void)hint;
    if (!data) return;
    rbuf_t *b = s_rbuf_of(data);
    if (atomic_fetch_sub(&b->refs, 1) == 1) free(b);
}

typedef struct {
    int ar;                   /* allreduce key space */
    uint64_t key;
    size_t start, len;        /* elements */
    size_t total;             /* elements of the whole tensor */
    dtype_t dt;               /* params: gradient dtype; AR: payload dtype */
    float *params;            /* params: master values (an rbuf) */
    float *agg;               /* f32 sums of the round in progress (async: conversion scratch) */
    void *out;                /* AR: the result of the last round, in dt (an rbuf) */
    optim_t *opt;
    int inited;
    uint64_t version;         /* rounds completed */
    uint64_t applied;         /* optimizer steps applied (Adam's t) */
    uint8_t *committed;       /* per worker, this round */
    size_t *got;              /* per worker: elements pushed this round */
    uint64_t *wclock;         /* async/ssp: commits per worker */
    int ncommit, overflow, avg, touched, last_skipped;
    ps_meta_t meta;
    pend_t *pend;
    size_t npend, cappend;
    size_t mem;
} slot_t;

typedef struct {
    uint64_t last_ns;
    int seen, bye, dead;
    int npend;                /* pulls of this worker pending here */
} wk_t;

struct ps_server {
    ps_server_cfg_t cfg;
    uint64_t job;
    int rank;
    void *router;
    char endpoint[256];
    char inproc[64];
    unsigned char (*ids)[PS_ID_LEN];
    wk_t *wk;
    /* params */
    int lay_set;
    ps_layout_t lay;
    dtype_t grad_dt;
    slot_t *pslots;           /* owned partitions: key = index + j * nservers */
    size_t npslots;
    /* allreduce */
    slot_t **arslots;
    size_t nar, capar;
    size_t npend_total;
    /* failure */
    int failed;
    char fail_text[256];
    uint64_t fail_ns, start_ns, last_check_ns;
    /* actor */
    pthread_t thread;
    int thread_on;
    void *pipe_owner, *pipe_thread;
    int run_rc;
    /* stats */
    _Atomic uint64_t sent, received, rejected, skipped, early;
    pthread_mutex_t mu;
    mem_counter_t mem;
};

/* ---------- small helpers ---------- */

static void s_mem(ps_server_t *self, long long delta)
{
    pthread_mutex_lock(&self->mu);
    mem_track(&self->mem, delta);
    pthread_mutex_unlock(&self->mu);
}

static int s_is_local(ps_server_t *self, int w) { return w >= 0 && w == self->cfg.local_worker; }

static void s_send(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h,
                   const ps_frame_t *fr, int nfr)
{
    uint64_t b = 0;
    int rc = ps_van_send(self->router, ident, idlen, h, fr, nfr, &b);
    if (!s_is_local(self, w)) atomic_fetch_add_explicit(&self->sent, b, memory_order_relaxed);
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
    s_send(self, w, ident, idlen, &h, &f, 1);
}

/* Reject a message: count it, log it, answer the requester with WIRE_ERROR. Returns 0 (handled). */
__attribute__((format(printf, 7, 8)))
static int s_reject(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *req, int code,
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

static void s_slot_free(ps_server_t *self, slot_t *s)
{
    if (!s) return;
    if (s->mem) s_mem(self, -(long long)s->mem);
    s->mem = 0;
    optim_destroy(&s->opt);
    s_rbuf_unref(s->params, NULL);
    s_rbuf_unref(s->out, NULL);
    free(s->agg);
    free(s->committed); free(s->got); free(s->wclock); free(s->pend);
    memset(s, 0, sizeof *s);
}

static int s_slot_alloc(ps_server_t *self, slot_t *s, int ar, uint64_t key, size_t start, size_t len, size_t total,
                        dtype_t dt)
{
    int W = self->cfg.nworkers;
    s->ar = ar; s->key = key; s->start = start; s->len = len; s->total = total; s->dt = dt;
    s->agg = calloc(len ? len : 1, sizeof(float));
    s->committed = calloc((size_t)W, 1);
    s->got = calloc((size_t)W, sizeof(size_t));
    s->wclock = calloc((size_t)W, sizeof(uint64_t));
    if (ar) s->out = s_rbuf_new(len * dt_size(dt));
    else s->params = s_rbuf_new(len * sizeof(float));
    if (!s->agg || !s->committed || !s->got || !s->wclock || (ar ? !s->out : !s->params)) {
        s_slot_free(self, s);
        return err_set(ERR_NOMEM, "ps server: cannot allocate a partition of %zu elements", len);
    }
    s->mem = len * sizeof(float) + (ar ? len * dt_size(dt) : len * sizeof(float));
    s_mem(self, (long long)s->mem);
    return 0;
}

static void s_round_reset(slot_t *s, int W)
{
    memset(s->agg, 0, s->len * sizeof(float));
    memset(s->committed, 0, (size_t)W);
    memset(s->got, 0, (size_t)W * sizeof(size_t));
    s->ncommit = 0;
    s->overflow = 0;
    s->avg = 0;
    s->touched = 0;
}

/* agg[0..n) += src (n elements of dt). src points into a received frame, which ZeroMQ may place at
 * any byte offset: misaligned input is read through memcpy. */
static void s_accumulate(float *agg, const void *src, size_t n, dtype_t dt)
{
    if (dt == DT_F32) {
        if (((uintptr_t)src & (sizeof(float) - 1)) == 0) {
            dt_add(agg, agg, src, n, DT_F32);
            return;
        }
        float tmp[1024];
        for (size_t i = 0; i < n; i += 1024) {
            size_t m = n - i < 1024 ? n - i : 1024;
            memcpy(tmp, (const char *)src + i * sizeof(float), m * sizeof(float));
            dt_add(agg + i, agg + i, tmp, m, DT_F32);
        }
        return;
    }
    const unsigned char *p = src;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        agg[i] += dt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
}

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
    ps_frame_t f = {buf, s->len * (s->ar ? dt_size(s->dt) : sizeof(float)), zc, zc ? s_rbuf_unref : NULL, NULL};
    if (zc) atomic_fetch_add(&s_rbuf_of(buf)->refs, 1);
    s_send(self, p->w, self->ids[p->w], PS_ID_LEN, &h, &f, 1);
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

static void s_serve_all(ps_server_t *self)
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
        if (s->avg) dt_scale(s->agg, s->len, DT_F32, 1.0f / (float)W);
        dt_convert(s->out, s->dt, s->agg, DT_F32, s->len);
    } else if (s->overflow) {
        s->last_skipped = 1;
        atomic_fetch_add(&self->skipped, 1);
    } else {
        s->last_skipped = 0;
        /* the ring's arithmetic: sum, times 1/N, rounded to the gradient dtype, then the optimizer */
        dt_scale(s->agg, s->len, DT_F32, 1.0f / (float)W);
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
    s_round_reset(s, W);
    s_serve_pending(self, s);
}

/* ---------- failure and liveness ---------- */

static void s_fail(ps_server_t *self, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void s_fail(ps_server_t *self, int code, const char *fmt, ...)
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

static int s_any_ar_pending(ps_server_t *self)
{
    for (size_t i = 0; i < self->nar; i++)
        if (self->arslots[i]->npend) return 1;
    return 0;
}

/* Does a pending pull here wait on worker w (its commit, its INIT, or its clock under SSP)? */
static int s_needs(ps_server_t *self, int w)
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

static void s_check_liveness(ps_server_t *self)
{
    uint64_t now = now_ns();
    if (now - self->last_check_ns < 20000000ull) return;
    self->last_check_ns = now;
    int to = self->cfg.timeout_ms > 0 ? self->cfg.timeout_ms : 60000;
    uint64_t dead_ns = (uint64_t)(to / 2 > 50 ? to / 2 : 50) * 1000000ull;
    int anybye = 0;
    for (int w = 0; w < self->cfg.nworkers; w++) anybye |= self->wk[w].bye;
    for (int w = 0; w < self->cfg.nworkers; w++) {
        wk_t *k = &self->wk[w];
        if (k->dead || k->bye) continue;
        uint64_t last = k->seen ? k->last_ns : self->start_ns;
        uint64_t silent = now > last ? now - last : 0;
        if (!self->failed && silent > dead_ns && s_needs(self, w)) {
            k->dead = 1;
            if (self->cfg.mode == PS_SYNC || s_any_ar_pending(self)) {
                s_fail(self, ERR_PEER, "worker rank %d died: silent for %llu ms while the others wait on it "
                       "(no BYE)", w, (unsigned long long)(silent / 1000000ull));
            } else {
                LOG_W("ps server %d: worker rank %d silent for %llu ms (no BYE): dropped, carrying on with the "
                      "others", self->cfg.index, w, (unsigned long long)(silent / 1000000ull));
                s_serve_all(self);
            }
        } else if ((anybye || self->failed) && silent > (uint64_t)to * 1000000ull) {
            k->dead = 1;
            LOG_W("ps server %d: worker rank %d never said BYE (silent for %llu ms)", self->cfg.index, w,
                  (unsigned long long)(silent / 1000000ull));
            s_serve_all(self);
        }
    }
}

static int s_all_gone(ps_server_t *self)
{
    for (int w = 0; w < self->cfg.nworkers; w++)
        if (!self->wk[w].dead && !self->wk[w].bye) return 0;
    return 1;
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
        if (s_slot_alloc(self, &self->pslots[j], 0, k, ps_part_start(&self->lay, k), ps_part_len(&self->lay, k),
                         (size_t)total, gdt) < 0) {
            for (size_t i = 0; i < j; i++) s_slot_free(self, &self->pslots[i]);
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

#define REJ(code, ...) return s_reject(self, w, ident, idlen, h, code, __VA_ARGS__)

static int s_check_meta(ps_vmsg_t *m, ps_meta_t *meta)
{
    if (m->n < 3 || ps_van_size(m, 2) != sizeof(ps_meta_t)) return -1;
    memcpy(meta, ps_van_data(m, 2), sizeof *meta);
    if (!isfinite(meta->lr) || !isfinite(meta->inv_scale)) return -1;
    return 0;
}

static int s_on_ar(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m,
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
            s_slot_free(self, s);
            if (s_slot_alloc(self, s, 1, h->key, start, len, (size_t)meta->total, dt) < 0) {
                /* keep the table consistent: drop the empty slot */
                for (size_t i = 0; i < self->nar; i++)
                    if (self->arslots[i] == s) { self->arslots[i] = self->arslots[--self->nar]; break; }
                free(s);
                REJ(ERR_NOMEM, "out of memory for an allreduce partition");
            }
            s->version = v;
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
            if (!s || s_slot_alloc(self, s, 1, h->key, start, len, (size_t)meta->total, dt) < 0) {
                free(s);
                REJ(ERR_NOMEM, "out of memory for an allreduce partition");
            }
            self->arslots[self->nar++] = s;
        }
        if (h->clock != s->version)
            REJ(ERR_PROTO, "allreduce key %llu: clock %llu, expected %llu (%s)", (unsigned long long)h->key,
                (unsigned long long)h->clock, (unsigned long long)s->version, h->clock > s->version ? "from the future" : "stale");
        if (s->committed[w]) REJ(ERR_PROTO, "allreduce key %llu: push after commit", (unsigned long long)h->key);
        size_t pb = ps_van_size(m, 3);
        if (h->offset > len || wire_check_payload(h, pb, len - (size_t)h->offset) < 0 ||
            s->got[w] + (size_t)h->count > len)
            REJ(ERR_PROTO, "allreduce key %llu: wrong size (offset %llu count %llu, %zu bytes; partition has %zu)",
                (unsigned long long)h->key, (unsigned long long)h->offset, (unsigned long long)h->count, pb, len);
        s_accumulate(s->agg + h->offset, ps_van_data(m, 3), (size_t)h->count, dt);
        s->got[w] += (size_t)h->count;
        s->touched = 1;
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
        if (s->committed[w]) REJ(ERR_PROTO, "allreduce key %llu: second commit", (unsigned long long)h->key);
        int avg = (h->aux & PS_F_AVG) ? 1 : 0;
        if (s->ncommit && avg != s->avg) REJ(ERR_MISMATCH, "allreduce key %llu: workers disagree on sum/avg",
                                             (unsigned long long)h->key);
        s->avg = avg;
        s->committed[w] = 1;
        s->ncommit++;
        s->touched = 1;
        CHECK(s_add_pend(self, s, w, h->clock));
        if (s->ncommit == self->cfg.nworkers) s_complete_round(self, s);
        return 0;
    }
    if (h->clock > s->version + 1) REJ(ERR_PROTO, "allreduce pull from the future");
    return s_add_pend(self, s, w, h->clock);
}

static int s_on_params(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m,
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
        if (w != 0) REJ(ERR_PROTO, "INIT from worker %d (only worker 0 initialises)", w);
        if (m->n != 5) REJ(ERR_PROTO, "INIT needs meta, optimizer and values frames");
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
        s_mem(self, (long long)ob);
        memcpy(s->params, ps_van_data(m, 4), s->len * sizeof(float));
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
            s_accumulate(s->agg + off, src, n, self->grad_dt);
            s->got[w] += n;
            s->touched = 1;
            return 0;
        }
        /* async / ssp: apply now */
        if (h->clock != s->wclock[w])
            REJ(ERR_PROTO, "key %llu: push for clock %llu, worker %d is at %llu (%s)", (unsigned long long)h->key,
                (unsigned long long)h->clock, w, (unsigned long long)s->wclock[w],
                h->clock > s->wclock[w] ? "clock from the future" : "stale clock");
        s->got[w] += n;                       /* (pipelining stat only; reset at w's commit) */
        memset(s->agg + off, 0, n * sizeof(float));
        s_accumulate(s->agg + off, src, n, self->grad_dt);
        if (dt_has_nonfinite(s->agg + off, n, DT_F32)) {
            atomic_fetch_add(&self->skipped, 1);
            return 0;
        }
        int rc = optim_step(s->opt, s->params + off, s->agg + off, off, n, meta->inv_scale / (float)W, meta->lr,
                            h->clock + 1);
        if (rc < 0) REJ(rc, "optimizer failed: %s", err_str(rc));
        s->applied++;
        return 0;
    }
    case WIRE_PULL: {
        if (m->n != 3) REJ(ERR_PROTO, "pull needs exactly a meta frame");
        if (h->aux & ~(PS_F_COMMIT | PS_F_OVERFLOW)) REJ(ERR_PROTO, "pull: bad flags 0x%x", h->aux);
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
                    (unsigned long long)h->clock, w, (unsigned long long)s->wclock[w],
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
    if (!local) atomic_fetch_add_explicit(&self->received, (uint64_t)m->bytes, memory_order_relaxed);
    if (m->n < 2) REJ(ERR_PROTO, "message without a header frame");
    wire_hdr_t hd;
    if (wire_decode(ps_van_data(m, 1), ps_van_size(m, 1), &hd) < 0)
        REJ(ERR_PROTO, "malformed header: %s", err_detail());
    h = &hd;
    if (hd.job != self->job) REJ(ERR_PROTO, "foreign job id %016llx", (unsigned long long)hd.job);
    if (hd.sender >= (uint32_t)self->cfg.nworkers || idlen != PS_ID_LEN ||
        memcmp(ident, self->ids[hd.sender], PS_ID_LEN) != 0)
        REJ(ERR_PROTO, "unknown sender (claims rank %u)", hd.sender);
    int claimed = (int)hd.sender;
    if (m->truncated || (uint32_t)(m->n - 2) != hd.nframes) {
        w = claimed;
        REJ(ERR_PROTO, "frame count %d does not match the header's %u", m->n - 2, hd.nframes);
    }
    w = claimed;
    wk_t *k = &self->wk[w];
    if (k->dead || k->bye) REJ(ERR_STATE, "worker %d already %s", w, k->dead ? "declared dead" : "said BYE");
    k->seen = 1;
    k->last_ns = now_ns();
    if (hd.type == WIRE_BYE) {
        int needed = !self->failed && s_needs(self, w) && (self->cfg.mode == PS_SYNC || s_any_ar_pending(self));
        k->bye = 1;
        if (needed) s_fail(self, ERR_PEER, "worker rank %d left (BYE) while the others wait on it", w);
        s_serve_all(self);
        return 0;
    }
    if (self->failed) {
        s_error_to(self, w, ident, idlen, h, self->failed, self->fail_text);
        return 0;
    }
    if (hd.type == WIRE_HELLO) {
        /* a waiting worker's keep-alive: it only refreshes last_ns (above) */
        if (hd.nframes != 0) REJ(ERR_PROTO, "keep-alive with %u payload frames", hd.nframes);
        return 0;
    }
    if (hd.type != WIRE_PUSH && hd.type != WIRE_PULL && hd.type != WIRE_INIT)
        REJ(ERR_PROTO, "unexpected message type %s", wire_type_name(hd.type));
    ps_meta_t meta;
    if (s_check_meta(m, &meta) < 0) REJ(ERR_PROTO, "missing or malformed meta frame");
    if (hd.aux & PS_F_AR) {
        if (hd.type == WIRE_INIT) REJ(ERR_PROTO, "INIT in the allreduce key space");
        if (hd.aux & ~(PS_F_AR | PS_F_COMMIT | PS_F_AVG)) REJ(ERR_PROTO, "bad flags 0x%x", hd.aux);
        return s_on_ar(self, w, ident, idlen, h, m, &meta);
    }
    return s_on_params(self, w, ident, idlen, h, m, &meta);
}

/* ---------- lifecycle ---------- */

int ps_server_new(ps_server_t **self_p, const ps_server_cfg_t *cfg)
{
    ps_server_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->cfg = *cfg;
    if (!self->cfg.part_bytes) self->cfg.part_bytes = PS_DEFAULT_PART_BYTES;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = cfg->comm->timeout_ms > 0 ? cfg->comm->timeout_ms : 60000;
    self->job = cfg->job;
    self->rank = cfg->comm->rank;
    pthread_mutex_init(&self->mu, NULL);
    self->ids = calloc((size_t)cfg->nworkers, sizeof *self->ids);
    self->wk = calloc((size_t)cfg->nworkers, sizeof *self->wk);
    if (!self->ids || !self->wk) {
        ps_server_destroy(&self);
        return ERR_NOMEM;
    }
    for (int w = 0; w < cfg->nworkers; w++) ps_routing_id(self->job, w, self->ids[w]);
    self->router = ps_van_socket(cfg->zctx, ZMQ_ROUTER, self->cfg.timeout_ms);
    char addr[128], ep[256];
    int rc = boot_local_addr(&cfg->comm->boot, addr, sizeof addr);
    if (rc < 0) {
        ps_server_destroy(&self);
        return rc;
    }
    snprintf(ep, sizeof ep, "tcp://%s:*", addr);
    if (!self->router || zmq_bind(self->router, ep) != 0) {
        rc = err_set(ERR_IO, "ps server %d: cannot bind %s: %s", cfg->index, ep, zmq_strerror(zmq_errno()));
        ps_server_destroy(&self);
        return rc;
    }
    size_t l = sizeof self->endpoint;
    zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, self->endpoint, &l);
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
    self->start_ns = now_ns();
    LOG_D("ps server %d on %s", cfg->index, self->endpoint);
    *self_p = self;
    return 0;
}

/* The loop. pipe: the actor's end of the owner pipe (NULL for a dedicated server). */
static int s_loop(ps_server_t *self, void *pipe)
{
    int stopping = 0;
    uint64_t stop_ns = 0;
    self->start_ns = now_ns();
    trace_thread_name("ps server");
    for (;;) {
        zmq_pollitem_t it[2] = {{self->router, 0, ZMQ_POLLIN, 0}, {pipe, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(it, pipe ? 2 : 1, 20);
        if (rc < 0 && zmq_errno() != EINTR) return err_set(ERR_IO, "ps server: poll failed");
        if (pipe && (it[1].revents & ZMQ_POLLIN)) {
            char buf[16];
            zmq_recv(pipe, buf, sizeof buf, ZMQ_DONTWAIT);
            stopping = 1;
            stop_ns = now_ns();
        }
        for (int i = 0; i < 256 && (it[0].revents & ZMQ_POLLIN); i++) {
            ps_vmsg_t m;
            if (ps_van_recv(self->router, &m, 0) < 0) break;
            uint64_t tr = trace_t0(); /* timeline: one span per message handled */
            int hrc = s_on_message(self, &m);
            trace_x("server message", tr);
            ps_van_close_msg(&m);
            if (hrc < 0) LOG_E("ps server %d: %s", self->cfg.index, err_str(hrc));
        }
        s_check_liveness(self);
        uint64_t to_ns = (uint64_t)self->cfg.timeout_ms * 1000000ull;
        if (pipe) {
            /* actor: leave once told to and every worker is gone (their replies delivered) */
            if (stopping && (s_all_gone(self) || now_ns() - stop_ns > to_ns)) break;
        } else {
            if (s_all_gone(self)) break;
            if (self->failed && now_ns() - self->fail_ns > to_ns) break;
        }
    }
    if (self->failed) return err_set(self->failed, "ps server %d (rank %d): %s", self->cfg.index, self->rank,
                                     self->fail_text);
    return 0;
}

int ps_server_run(ps_server_t *self) { return s_loop(self, NULL); }

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
    for (size_t i = 0; i < self->npslots; i++) s_slot_free(self, &self->pslots[i]);
    free(self->pslots);
    for (size_t i = 0; i < self->nar; i++) {
        s_slot_free(self, self->arslots[i]);
        free(self->arslots[i]);
    }
    free(self->arslots);
    free(self->ids);
    free(self->wk);
    pthread_mutex_destroy(&self->mu);
    free(self);
    *self_p = NULL;
}
