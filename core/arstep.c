/* arstep.c: the step machinery of allreduce engines. A communication thread owns the engine's
 * collective: the trainer's submit() queues a bucket and returns; the thread allreduces (averages)
 * each bucket into a gradient buffer as soon as it arrives, overlapping the rest of backward. wait()
 * blocks until every bucket is done, then, once per step, checks the averaged gradients for Inf/NaN
 * (AMP overflow: the step is skipped on every rank alike, since all ranks hold the same sums) and runs
 * the shared optimizer (core/optim.h) over the whole arena. */
#include "core/arstep.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/optim_dev.h"
#include "core/timer.h"
#include "core/trace.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

typedef struct {
    const void *send;
    void *recv;
    size_t count;
    dtype_t dt;
    redop_t op;
    int bucket;               /* bucket index for the timeline; -1 for a raw allreduce */
} job_t;

#define QMAX 4096

struct arstep {
    comm_t *comm;
    engine_cfg_t cfg;
    arstep_allreduce_fn fn;
    void *ctx;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    job_t q[QMAX];
    size_t qhead, qtail;      /* jobs [qhead, qtail) pending */
    size_t done;              /* jobs finished (total) */
    int err;                  /* first error from the thread */
    char err_text[512];
    int stop;
    int busy_direct;          /* a collective runs on the caller's thread */
    double comm_ms_step, comm_ms_total;
    /* attached parameters */
    param_set_t ps;
    int attached;
    int on_dev;               /* cfg.device >= 0: gacc, gbuf and the optimizer state live on the device */
    optim_dev_t *dopt;
    float *gacc;              /* averaged gradients, f32 */
    void *gbuf;               /* averaged gradients in grad dtype (== gacc for f32) */
    optim_t *opt;
    step_ctx_t sctx;
    uint64_t applied;         /* optimizer steps applied (Adam's t) */
    size_t submitted_step, base_done;
    size_t mem_bytes, mem_peak;
};

static void *s_thread(void *arg)
{
    arstep_t *self = arg;
    trace_thread_name("comm");
    /* a new thread starts on device 0: staged copies and peer kernels of this thread belong on ours */
    if (self->cfg.device >= 0 && optim_dev_use(self->cfg.device) < 0) LOG_W("arstep: %s", err_detail());
    pthread_mutex_lock(&self->mu);
    for (;;) {
        while (!self->stop && (self->qhead == self->qtail || self->busy_direct))
            pthread_cond_wait(&self->cv_work, &self->mu);
        if (self->stop) break;
        job_t j = self->q[self->qhead % QMAX];
        pthread_mutex_unlock(&self->mu);
        int rc = 0;
        double t0 = now_ms();
        uint64_t tr = trace_t0();
        if (!self->err) rc = self->fn(self->ctx, j.send, j.recv, j.count, j.dt, j.op, self->cfg.timeout_ms);
        trace_x2("allreduce", tr, "bucket", j.bucket, "bytes", (int64_t)(j.count * dt_size(j.dt)));
        double dt = now_ms() - t0;
        char text[512] = "";
        if (rc < 0) err_trace(rc, text, sizeof text);
        pthread_mutex_lock(&self->mu);
        if (rc < 0 && !self->err) {
            self->err = rc;
            memcpy(self->err_text, text, sizeof text);
        }
        self->comm_ms_step += dt;
        self->comm_ms_total += dt;
        self->qhead++;
        self->done++;
        pthread_cond_broadcast(&self->cv_done);
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

int arstep_new(arstep_t **self_p, comm_t *comm, const engine_cfg_t *cfg, arstep_allreduce_fn fn, void *ctx)
{
    arstep_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->cfg = *cfg;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = comm->timeout_ms;
    self->fn = fn;
    self->ctx = ctx;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv_work, NULL);
    pthread_cond_init(&self->cv_done, NULL);
    if (pthread_create(&self->thread, NULL, s_thread, self) != 0) {
        free(self);
        return err_set(ERR_SYS, "arstep: cannot start the communication thread");
    }
    self->started = 1;
    *self_p = self;
    return 0;
}

void arstep_destroy(arstep_t **self_p)
{
    arstep_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    if (self->started) {
        pthread_mutex_lock(&self->mu);
        self->stop = 1;
        pthread_cond_broadcast(&self->cv_work);
        pthread_mutex_unlock(&self->mu);
        pthread_join(self->thread, NULL);
    }
    optim_destroy(&self->opt);
    optim_dev_destroy(&self->dopt);
    if (self->on_dev) {
        if (self->gbuf != (void *)self->gacc) dev_free(&self->gbuf);
        dev_free((void **)&self->gacc);
    } else {
        if (self->gbuf != (void *)self->gacc) free(self->gbuf);
        free(self->gacc);
    }
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->cv_work);
    pthread_cond_destroy(&self->cv_done);
    free(self);
    *self_p = NULL;
}

static int s_enqueue(arstep_t *self, const job_t *j)
{
    pthread_mutex_lock(&self->mu);
    if (self->qtail - self->qhead >= QMAX) {
        pthread_mutex_unlock(&self->mu);
        return err_set(ERR_RANGE, "arstep: more than %d buckets in flight", QMAX);
    }
    self->q[self->qtail % QMAX] = *j;
    self->qtail++;
    pthread_cond_signal(&self->cv_work);
    pthread_mutex_unlock(&self->mu);
    return 0;
}

/* Wait until `target` jobs have finished in total. */
static int s_wait_done(arstep_t *self, size_t target, int timeout_ms)
{
    uint64_t dl = deadline_in(timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&self->mu);
    while (self->done < target && !self->err) {
        int left = deadline_left_ms(dl);
        if (left == 0) { rc = ERR_TIMEOUT; break; }
        if (left < 0) {
            pthread_cond_wait(&self->cv_done, &self->mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(left > 100 ? 100 : left) * 1000000ull;
            ts.tv_sec += (time_t)(ns / 1000000000ull);
            ts.tv_nsec = (long)(ns % 1000000000ull);
            pthread_cond_timedwait(&self->cv_done, &self->mu, &ts);
        }
    }
    if (self->err) {
        rc = self->err;
        err_set(rc, "%s", self->err_text);
    }
    pthread_mutex_unlock(&self->mu);
    int peer, sending, ms;
    if (rc == ERR_TIMEOUT && self->comm && tp_waiting(self->comm->tp, &peer, &sending, &ms))
        return err_set(rc, "step did not finish within %d ms: waiting on rank %d for %d ms (%s): it is hung, or slower "
                       "than --timeout", timeout_ms, peer, ms, sending ? "for room towards it" : "for its data");
    if (rc == ERR_TIMEOUT) return err_set(rc, "step did not finish within %d ms", timeout_ms);
    return rc;
}

int arstep_allreduce(arstep_t *self, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                     redop_t op, int timeout_ms)
{
    job_t j = {sendbuf, recvbuf, count, dt, op, -1};
    size_t target;
    pthread_mutex_lock(&self->mu);
    if (self->qhead == self->qtail && !self->busy_direct) {
        /* nothing in flight: run on the caller's thread and save two thread hand-offs (bench latency);
         * the communication thread stays idle since only this caller could queue work */
        self->busy_direct = 1;
        pthread_mutex_unlock(&self->mu);
        uint64_t tr = trace_t0();
        int rc = self->fn(self->ctx, sendbuf, recvbuf, count, dt, op, timeout_ms);
        trace_x1("allreduce", tr, "bytes", (int64_t)(count * dt_size(dt)));
        pthread_mutex_lock(&self->mu);
        self->busy_direct = 0;
        /* only work queued meanwhile (another thread's submit) needs the thread: waking it for nothing
         * costs a futex wake-up and two context switches per collective (the bench's small-message time) */
        if (self->qhead != self->qtail) pthread_cond_signal(&self->cv_work);
        pthread_mutex_unlock(&self->mu);
        return rc;
    }
    target = self->done + (self->qtail - self->qhead) + 1;
    pthread_mutex_unlock(&self->mu);
    CHECK(s_enqueue(self, &j));
    return s_wait_done(self, target, timeout_ms);
}

/* Device parameters (cfg.device >= 0, the caller's thread on that device): the averaged gradients
 * (gacc, and gbuf in the wire dtype) and the optimizer state are device buffers (dev_malloc, so they
 * count in dev_mem_stats); the engine's fn reduces device buffers (nccl, gpu, staged impls); the
 * Inf/NaN check, the f16/bf16 -> f32 conversion and the optimizer run as device kernels
 * (core/optim_dev.h) on the caller's thread in wait(). */
static int s_attach_dev(arstep_t *self, const param_set_t *params)
{
    if (!params->params && params->count) return err_set(ERR_INVAL, "attach: no parameters");
    if (dt_size(params->grad_dtype) == 0) return err_set(ERR_INVAL, "attach: bad gradient dtype");
    self->ps = *params;
    self->on_dev = 1;
    size_t n = params->count, esz = dt_size(params->grad_dtype);
    CHECK(dev_malloc((void **)&self->gacc, (n ? n : 1) * sizeof(float)));
    CHECK(dev_memset(self->gacc, 0, (n ? n : 1) * sizeof(float)));
    if (params->grad_dtype == DT_F32) self->gbuf = self->gacc;
    else CHECK(dev_malloc(&self->gbuf, (n ? n : 1) * esz));
    CHECK(optim_dev_new(&self->dopt, &params->optim, n));
    self->mem_bytes = n * sizeof(float) + (params->grad_dtype == DT_F32 ? 0 : n * esz) + optim_dev_state_bytes(self->dopt);
    self->mem_peak = self->mem_bytes;
    /* rank 0's values reach everyone, as on the host path (others add zeros: exact). dev_memset is
     * complete on return (dev.h), so the allreduce on the engine's own stream reads the zeros. */
    if (self->comm->rank != 0) CHECK(dev_memset(params->params, 0, n * sizeof(float)));
    CHECK(arstep_allreduce(self, params->params, params->params, n, DT_F32, OP_SUM, self->cfg.timeout_ms));
    self->attached = 1;
    self->sctx.inv_scale = 1.0f;
    self->sctx.lr = params->optim.lr;
    return 0;
}

static int s_wait_dev(arstep_t *self, step_out_t *out, double waited, int timeout_ms)
{
    size_t n = self->ps.count;
    int to = timeout_ms > 0 ? timeout_ms : self->cfg.timeout_ms;
    if (self->ps.grad_dtype != DT_F32)
        CHECK(optim_dev_convert(self->gacc, DT_F32, self->gbuf, self->ps.grad_dtype, n, to));
    int skip = 0;
    CHECK(optim_dev_nonfinite(self->gacc, n, DT_F32, &skip, to));
    if (!skip) {
        self->applied = self->sctx.step ? self->sctx.step : self->applied + 1;
        CHECK(optim_dev_step(self->dopt, self->ps.params, self->gacc, 0, n, self->sctx.inv_scale, self->sctx.lr,
                             self->applied, to));
    }
    if (out) {
        out->skipped = skip;
        pthread_mutex_lock(&self->mu);
        out->comm_ms = self->comm_ms_step;
        pthread_mutex_unlock(&self->mu);
        out->wait_ms = waited;
    }
    return 0;
}

int arstep_attach(arstep_t *self, const param_set_t *params)
{
    if (self->attached) return err_set(ERR_STATE, "engine already attached");
    if (self->cfg.device >= 0) return s_attach_dev(self, params);
    if (!params->params && params->count) return err_set(ERR_INVAL, "attach: no parameters");
    if (dt_size(params->grad_dtype) == 0) return err_set(ERR_INVAL, "attach: bad gradient dtype");
    self->ps = *params;
    size_t n = params->count;
    self->gacc = calloc(n ? n : 1, sizeof(float));
    if (!self->gacc) return ERR_NOMEM;
    if (params->grad_dtype == DT_F32) self->gbuf = self->gacc;
    else if (!(self->gbuf = calloc(n ? n : 1, dt_size(params->grad_dtype)))) return ERR_NOMEM;
    CHECK(optim_new(&self->opt, &params->optim, n));
    self->mem_bytes = n * sizeof(float) + (params->grad_dtype == DT_F32 ? 0 : n * dt_size(params->grad_dtype)) +
                      optim_state_bytes(self->opt);
    self->mem_peak = self->mem_bytes;
    /* Horovod's broadcast_parameters: rank 0's values reach everyone (others add zeros: exact). */
    if (self->comm->rank != 0) memset(params->params, 0, n * sizeof(float));
    CHECK(arstep_allreduce(self, params->params, params->params, n, DT_F32, OP_SUM, self->cfg.timeout_ms));
    self->attached = 1;
    self->sctx.inv_scale = 1.0f;
    self->sctx.lr = params->optim.lr;
    return 0;
}

int arstep_step_begin(arstep_t *self, const step_ctx_t *ctx)
{
    self->sctx = *ctx;
    pthread_mutex_lock(&self->mu);
    self->base_done = self->done + (self->qtail - self->qhead);
    self->comm_ms_step = 0;
    pthread_mutex_unlock(&self->mu);
    self->submitted_step = 0;
    return 0;
}

int arstep_submit(arstep_t *self, const bucket_t *b)
{
    if (!self->attached) return err_set(ERR_STATE, "submit before attach");
    if (b->offset > self->ps.count || b->count > self->ps.count - b->offset)
        return err_set(ERR_RANGE, "bucket [%zu, +%zu) outside the %zu parameters", b->offset, b->count, self->ps.count);
    size_t esz = dt_size(self->ps.grad_dtype);
    job_t j = {b->grad, (char *)self->gbuf + b->offset * esz, b->count, self->ps.grad_dtype, OP_AVG, b->index};
    CHECK(s_enqueue(self, &j));
    self->submitted_step++;
    return 0;
}

int arstep_wait(arstep_t *self, step_out_t *out, int timeout_ms)
{
    double t0 = now_ms();
    uint64_t tr = trace_t0();
    CHECK(s_wait_done(self, self->base_done + self->submitted_step, timeout_ms));
    trace_x("wait buckets", tr);
    double waited = now_ms() - t0;
    if (self->sctx.reduce_only) { /* averaged gradients stay in gacc; the caller models the update */
        if (out) {
            memset(out, 0, sizeof *out);
            pthread_mutex_lock(&self->mu);
            out->comm_ms = self->comm_ms_step;
            pthread_mutex_unlock(&self->mu);
            out->wait_ms = waited;
            out->update_left = 1;
        }
        return 0;
    }
    if (self->on_dev) return s_wait_dev(self, out, waited, timeout_ms);
    size_t n = self->ps.count;
    if (self->ps.grad_dtype != DT_F32) dt_convert(self->gacc, DT_F32, self->gbuf, self->ps.grad_dtype, n);
    int skip = dt_has_nonfinite(self->gacc, n, DT_F32);
    if (!skip) {
        /* Adam's t: the trainer's count when it gives one (a resumed run continues it), else ours */
        self->applied = self->sctx.step ? self->sctx.step : self->applied + 1;
        tr = trace_t0();
        CHECK(optim_step(self->opt, self->ps.params, self->gacc, 0, n, self->sctx.inv_scale, self->sctx.lr,
                         self->applied));
        trace_x("optimizer", tr);
    }
    if (out) {
        out->skipped = skip;
        pthread_mutex_lock(&self->mu);
        out->comm_ms = self->comm_ms_step;
        pthread_mutex_unlock(&self->mu);
        out->wait_ms = waited;
    }
    return 0;
}

void arstep_stats(arstep_t *self, engine_stats_t *out)
{
    memset(out, 0, sizeof *out);
    tp_counters(self->comm->tp, &out->bytes_sent, &out->bytes_received);
    out->mem_engine_bytes = self->mem_bytes;
    out->mem_engine_peak_bytes = self->mem_peak;
    pthread_mutex_lock(&self->mu);
    out->comm_ms_total = self->comm_ms_total;
    pthread_mutex_unlock(&self->mu);
}

int arstep_optim_state(arstep_t *self, float **bufs, int *nbuf, size_t *count)
{
    if (self->dopt) return optim_dev_state(self->dopt, bufs, nbuf, count); /* host snapshot (core/optim_dev.h) */
    if (!self->opt) return err_set(ERR_STATE, "optimizer state before attach");
    return optim_state(self->opt, bufs, nbuf, count);
}
