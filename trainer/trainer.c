/* trainer.c: the training loop behind the engine contract.
 *
 * Buckets: built once, as DDP does: walk the parameter tensors in reverse order (b_{L-1}, W_{L-1},
 * b_{L-2}, ...), closing a bucket once it holds >= cap bytes of f32 gradients (the first bucket's cap
 * is min(1 MiB, bucket_mb)); since the arena is laid out in forward order, each bucket is one
 * contiguous, descending range. A bucket is ready when its lowest layer's backward is done (that
 * layer's input gradient included, so the engine may update those weights at once); the backward
 * callback submits every ready bucket in order. f16/bf16: the bucket is cast into a wire arena with
 * the same layout right before submit. In flight during a step: every submitted bucket until wait. */
#include "trainer/trainer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/err.h"
#include "core/log.h"
#include "core/dev.h"
#include "core/optim_dev.h"
#include "core/timer.h"
#include "core/trace.h"
#include "trainer/amp.h"
#include "trainer/ckpt.h"
#include "trainer/data.h"
#include "trainer/emu.h"
#include "trainer/model_gpu.h"
#include "trainer/rng.h"
#include "trainer/sampler.h"
#include "trainer/trainer_impl.h"


void trainer_cfg_default(trainer_cfg_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->world = 1;
    optim_cfg_default(&cfg->optim, OPT_SGD);
    cfg->grad_dtype = DT_F32;
    cfg->bucket_mb = TRAINER_DEFAULT_BUCKET_MB;
    cfg->seed = 1;
    cfg->straggler_rank = -1;
    cfg->device = -1;
}

static int s_plan_buckets(trainer_t *t)
{
    const mlp_shape_t *s = mlp_shape(t->mlp);
    double mb = t->cfg.bucket_mb > 0 ? t->cfg.bucket_mb : TRAINER_DEFAULT_BUCKET_MB;
    size_t cap = (size_t)(mb * 1024.0 * 1024.0);
    if (cap < sizeof(float)) cap = sizeof(float);
    size_t first = cap < TRAINER_FIRST_BUCKET_BYTES ? cap : TRAINER_FIRST_BUCKET_BYTES;
    t->buckets = calloc((size_t)s->nlayers * 2, sizeof *t->buckets);
    if (!t->buckets) return ERR_NOMEM;
    int nb = 0;
    for (int l = s->nlayers - 1; l >= 0; l--) {
        /* tensors b_l then W_l; the open bucket spans [tensor start, previous bucket's lo) */
        size_t lo_t[2] = {s->b_off[l], s->w_off[l]};
        for (int k = 0; k < 2; k++) {
            size_t top = nb ? t->buckets[nb - 1].lo : s->count;
            if ((top - lo_t[k]) * sizeof(float) >= (nb == 0 ? first : cap)) {
                t->buckets[nb].lo = lo_t[k];
                t->buckets[nb].hi = top;
                t->buckets[nb].ready_layer = l;
                nb++;
            }
        }
    }
    size_t top = nb ? t->buckets[nb - 1].lo : s->count;
    if (top > 0) {
        t->buckets[nb].lo = 0;
        t->buckets[nb].hi = top;
        t->buckets[nb].ready_layer = 0;
        nb++;
    }
    t->nbuckets = nb;
    return 0;
}

static int s_new_emulated(trainer_t *t)
{
    if (t->cfg.device >= 0) return err_set(ERR_UNSUP, "model %s is emulated: it runs without --gpus", t->cfg.model);
    if (t->cfg.data && *t->cfg.data && strcmp(t->cfg.data, "synthetic"))
        return err_set(ERR_INVAL, "model %s is emulated: it takes no --data", t->cfg.model);
    emu_cfg_t ec = {.model = t->cfg.model, .device = t->cfg.emu_device, .local_batch = t->local_batch,
                    .shrink = t->cfg.shrink >= 1 ? t->cfg.shrink : 1, .dilate = t->cfg.dilate >= 1 ? t->cfg.dilate : 1,
                    .grad_dtype = t->cfg.grad_dtype, .bucket_mb = t->cfg.bucket_mb, .rank = t->cfg.rank,
                    .seed = t->cfg.seed};
    CHECK(emu_new(&t->emu, &ec));
    t->nbuckets = emu_nbuckets(t->emu);
    amp_init(&t->amp, DT_F32); /* the pattern never overflows: no loss scaling */
    return 0;
}

int trainer_new(trainer_t **self_p, const trainer_cfg_t *cfg_in)
{
    if (!self_p || !cfg_in) return err_set(ERR_INVAL, "trainer_new: no config");
    *self_p = NULL;
    trainer_cfg_t cfg = *cfg_in;
    if (!cfg.model) cfg.model = TRAINER_DEFAULT_MODEL;
    if (!cfg.global_batch) cfg.global_batch = TRAINER_DEFAULT_BATCH;
    if (!cfg.synth_samples) cfg.synth_samples = TRAINER_DEFAULT_SYNTH_SAMPLES;
    if (cfg.timeout_ms <= 0) cfg.timeout_ms = 60000;
    if (cfg.world < 1 || cfg.rank < 0 || cfg.rank >= cfg.world)
        return err_set(ERR_INVAL, "trainer: worker rank %d outside world %d", cfg.rank, cfg.world);
    if (cfg.global_batch % (size_t)cfg.world)
        return err_set(ERR_INVAL, "trainer: global batch %zu is not a multiple of the %d workers "
                       "(each worker takes batch / workers samples)", cfg.global_batch, cfg.world);
    if (dt_size(cfg.grad_dtype) == 0) return err_set(ERR_INVAL, "trainer: bad gradient dtype");
    trainer_t *t = calloc(1, sizeof *t);
    if (!t) return ERR_NOMEM;
    t->cfg = cfg;
    snprintf(t->model_spec, sizeof t->model_spec, "%s", cfg.model);
    t->cfg.model = t->model_spec;
    t->cfg.data = NULL; /* not kept: the caller's string */
    t->local_batch = cfg.global_batch / (size_t)cfg.world;
    int rc;
    if (workload_is_known(cfg.model)) {
        CHECK_GOTO(rc, s_new_emulated(t), fail);
        *self_p = t;
        return 0;
    }
    mlp_shape_t shape;
    CHECK_GOTO(rc, mlp_parse(cfg.model, &shape), fail);
    if (!cfg.data || !*cfg.data || !strcmp(cfg.data, "synthetic"))
        CHECK_GOTO(rc, dataset_synthetic(&t->data, cfg.synth_samples, shape.dims[0], shape.dims[shape.nlayers], cfg.seed), fail);
    else
        CHECK_GOTO(rc, dataset_open(&t->data, cfg.data), fail);
    if (dataset_dim(t->data) != shape.dims[0] || dataset_classes(t->data) > shape.dims[shape.nlayers]) {
        rc = err_set(ERR_INVAL, "model %s takes %zu inputs and %zu classes but the %s data has %zu features and %zu classes "
                     "(e.g. --model mlp:%zu-1024-1024-%zu)", cfg.model, shape.dims[0], shape.dims[shape.nlayers],
                     dataset_name(t->data), dataset_dim(t->data), dataset_classes(t->data), dataset_dim(t->data),
                     dataset_classes(t->data));
        goto fail;
    }
    CHECK_GOTO(rc, mlp_new(&t->mlp, &shape, t->local_batch), fail);
    rng_seed(&t->rng, cfg.seed, 0x747261696e /* "train" */);
    mlp_init(t->mlp, rng_next(&t->rng));
    sampler_cfg_t sc = {.n = dataset_size(t->data), .world = cfg.world, .rank = cfg.rank, .seed = cfg.seed,
                        .shuffle = 1, .drop_last = cfg.drop_last};
    CHECK_GOTO(rc, sampler_new(&t->sampler, &sc), fail);
    if (cfg.drop_last && t->local_batch > sampler_num_samples(t->sampler)) {
        rc = err_set(ERR_INVAL, "trainer: --drop-last with a per-worker batch of %zu but only %zu samples per worker",
                     t->local_batch, sampler_num_samples(t->sampler));
        goto fail;
    }
    if (!(t->labels = malloc(t->local_batch * sizeof(int32_t)))) {
        rc = ERR_NOMEM;
        goto fail;
    }
    if (cfg.device >= 0) {
        /* the GPU model starts from the host model's values (same RNG, same init as a CPU run) */
        CHECK_GOTO(rc, optim_dev_use(cfg.device), fail);
        CHECK_GOTO(rc, mlp_gpu_new(&t->gpu, &shape, t->local_batch, cfg.tf32, cfg.timeout_ms), fail);
        CHECK_GOTO(rc, mlp_gpu_set_params(t->gpu, mlp_params(t->mlp)), fail);
        if (cfg.grad_dtype != DT_F32)
            CHECK_GOTO(rc, dev_malloc(&t->wire, shape.count * dt_size(cfg.grad_dtype)), fail);
    } else if (cfg.grad_dtype != DT_F32 && !(t->wire = malloc(shape.count * dt_size(cfg.grad_dtype)))) {
        rc = err_set(ERR_NOMEM, "trainer: wire gradients");
        goto fail;
    }
    CHECK_GOTO(rc, s_plan_buckets(t), fail);
    amp_init(&t->amp, cfg.grad_dtype);
    *self_p = t;
    return 0;
fail:
    trainer_destroy(&t);
    return rc;
}

void trainer_destroy(trainer_t **self_p)
{
    if (!self_p || !*self_p) return;
    trainer_t *t = *self_p;
    mlp_destroy(&t->mlp);
    dataset_destroy(&t->data);
    sampler_destroy(&t->sampler);
    optim_destroy(&t->optim);
    for (int k = 0; k < CKPT_MAX_OPT; k++) free(t->pending_opt[k]);
    free(t->pending_srv);
    free(t->labels);
    if (t->gpu) dev_free(&t->wire);
    else free(t->wire);
    mlp_gpu_destroy(&t->gpu);
    optim_dev_destroy(&t->dopt);
    free(t->buckets);
    emu_destroy(&t->emu);
    free(t);
    *self_p = NULL;
}

const mlp_shape_t *trainer_shape(const trainer_t *self) { return self->emu ? NULL : mlp_shape(self->mlp); }
const struct emu *trainer_emu(const trainer_t *self) { return self->emu; }
size_t trainer_param_count(const trainer_t *self) { return self->emu ? emu_count(self->emu) : mlp_shape(self->mlp)->count; }
int trainer_sync_host(const trainer_t *self)
{
    return self->gpu ? mlp_gpu_get_params(self->gpu, mlp_params(self->mlp)) : 0;
}

float *trainer_params(trainer_t *self)
{
    if (self->emu) return emu_params(self->emu);
    if (trainer_sync_host(self) < 0) LOG_W("trainer_params: %s", err_detail());
    return mlp_params(self->mlp);
}
size_t trainer_local_batch(const trainer_t *self) { return self->local_batch; }
int trainer_nbuckets(const trainer_t *self) { return self->nbuckets; }
size_t trainer_data_bytes(const trainer_t *self) { return self->emu ? 0 : dataset_bytes(self->data); }
const char *trainer_data_name(const trainer_t *self) { return self->emu ? "none (emulated model)" : dataset_name(self->data); }
uint64_t trainer_steps_done(const trainer_t *self) { return self->step; }
float trainer_loss_scale(const trainer_t *self) { return self->amp.scale; }

static int s_restore_opt(trainer_t *t)
{
    if (!t->pending_nopt) return 0;
    float *bufs[CKPT_MAX_OPT] = {0};
    int nbuf = CKPT_MAX_OPT;
    size_t count = 0;
    CHECK(optim_state(t->optim, bufs, &nbuf, &count));
    if (nbuf != t->pending_nopt || count != mlp_shape(t->mlp)->count)
        return err_set(ERR_MISMATCH, "resume: the checkpoint holds %d optimizer buffers, this optimizer has %d "
                       "(same --optim as when it was saved?)", t->pending_nopt, nbuf);
    for (int k = 0; k < nbuf; k++) memcpy(bufs[k], t->pending_opt[k], count * sizeof(float));
    return 0;
}

/* Local mode on the GPU: the device optimizer (core/optim_dev.h), with a resume's state restored through
 * its host snapshot (uploaded before the first step). */
static int s_attach_dev_local(trainer_t *t)
{
    size_t count = mlp_shape(t->mlp)->count;
    CHECK(optim_dev_new(&t->dopt, &t->cfg.optim, count));
    if (!t->pending_nopt) return 0;
    float *bufs[CKPT_MAX_OPT] = {0};
    int nbuf = CKPT_MAX_OPT;
    size_t n = 0;
    CHECK(optim_dev_state(t->dopt, bufs, &nbuf, &n));
    if (nbuf != t->pending_nopt || n != count)
        return err_set(ERR_MISMATCH, "resume: the checkpoint holds %d optimizer buffers, this optimizer has %d "
                       "(same --optim as when it was saved?)", t->pending_nopt, nbuf);
    for (int k = 0; k < nbuf; k++) memcpy(bufs[k], t->pending_opt[k], count * sizeof(float));
    return 0;
}

/* Local mode on the GPU: what an engine would do with the step's gradients (wire rounding, the Inf/NaN
 * check, the optimizer), on the device. */
static int s_local_step_dev(trainer_t *t, float inv, int *overflow)
{
    size_t count = mlp_shape(t->mlp)->count;
    float *g = mlp_gpu_grads(t->gpu);
    int to = t->cfg.timeout_ms;
    if (t->wire) {
        CHECK(optim_dev_convert(t->wire, t->cfg.grad_dtype, g, DT_F32, count, to));
        CHECK(optim_dev_nonfinite(t->wire, count, t->cfg.grad_dtype, overflow, to));
        if (!*overflow) CHECK(optim_dev_convert(g, DT_F32, t->wire, t->cfg.grad_dtype, count, to));
    } else {
        CHECK(optim_dev_nonfinite(g, count, DT_F32, overflow, to));
    }
    if (!*overflow)
        CHECK(optim_dev_step(t->dopt, mlp_gpu_params(t->gpu), g, 0, count, inv, t->cfg.optim.lr, t->applied + 1, to));
    return 0;
}

static int s_attach_emulated(trainer_t *t, const engine_ops_t *ops, engine_t *engine)
{
    size_t count = emu_count(t->emu);
    if (!ops) { /* world 1: the device's update is modelled (emu_step), as on allreduce workers */
        if (t->cfg.world != 1)
            return err_set(ERR_INVAL, "trainer: no engine with %d workers (local mode is world 1 only)", t->cfg.world);
    } else {
        if (!engine || !ops->attach || !ops->submit || !ops->wait)
            return err_set(ERR_INVAL, "trainer: engine '%s' lacks attach/submit/wait", ops->name ? ops->name : "?");
        param_set_t ps = {.params = emu_params(t->emu), .count = count, .grad_dtype = t->cfg.grad_dtype,
                          .optim = t->cfg.optim};
        CHECK(ops->attach(engine, &ps));
    }
    t->ops = ops;
    t->engine = engine;
    t->attached = 1;
    return 0;
}

int trainer_attach(trainer_t *self, const engine_ops_t *ops, engine_t *engine)
{
    if (self->attached) return err_set(ERR_STATE, "trainer: attach called twice");
    if (self->emu) return s_attach_emulated(self, ops, engine);
    const mlp_shape_t *s = mlp_shape(self->mlp);
    if (!ops) {
        if (self->cfg.world != 1)
            return err_set(ERR_INVAL, "trainer: no engine with %d workers (local mode is world 1 only)", self->cfg.world);
        if (self->gpu) {
            CHECK(mlp_gpu_set_params(self->gpu, mlp_params(self->mlp))); /* a resume changed the host copy */
            CHECK(s_attach_dev_local(self));
        } else {
            CHECK(optim_new(&self->optim, &self->cfg.optim, s->count));
            CHECK(s_restore_opt(self));
        }
    } else {
        if (!engine || !ops->attach || !ops->submit || !ops->wait)
            return err_set(ERR_INVAL, "trainer: engine '%s' lacks attach/submit/wait", ops->name ? ops->name : "?");
        if (self->pending_nopt && !ops->optim_state && !ops->state_save)
            return err_set(ERR_UNSUP, "resume: the checkpoint holds optimizer state (momentum/Adam) but engine '%s' keeps "
                           "its optimizer state where this rank cannot restore it; resume with ring or tree, in world 1 "
                           "local mode, or use an optimizer without state (sgd, momentum=0)", ops->name);
        if (self->gpu) CHECK(mlp_gpu_set_params(self->gpu, mlp_params(self->mlp))); /* a resume changed the host copy */
        param_set_t ps = {.params = self->gpu ? mlp_gpu_params(self->gpu) : mlp_params(self->mlp), .count = s->count, .grad_dtype = self->cfg.grad_dtype,
                          .optim = self->cfg.optim};
        /* an engine with state of its own (state_save) takes a resume's state at attach */
        engine_restore_t rs = {.params = self->pending_srv, .nopt = self->pending_nopt, .applied = self->applied,
                               .layout = self->pending_layout};
        int rc = 0;
        for (int k = 0; k < self->pending_nopt && k < ENGINE_MAX_OPT; k++) rs.opt[k] = self->pending_opt[k];
        if (ops->state_save && (self->pending_nopt || self->pending_srv) && !(rc = ckpt_check_nopt(&self->cfg.optim, self->pending_nopt, ops->name))) ps.restore = &rs;
        CHECK(rc);
        CHECK(ops->attach(engine, &ps));
        if (self->pending_nopt && !ps.restore) {
            /* the engine's optimizer exists now: put the checkpoint's state into it */
            float *bufs[CKPT_MAX_OPT] = {0};
            int nbuf = CKPT_MAX_OPT;
            size_t count = 0;
            CHECK(ops->optim_state(engine, bufs, &nbuf, &count));
            if (nbuf != self->pending_nopt || count != s->count)
                return err_set(ERR_MISMATCH, "resume: the checkpoint holds %d optimizer buffers, engine '%s' has %d "
                               "(same --optim as when it was saved?)", self->pending_nopt, ops->name, nbuf);
            for (int k = 0; k < nbuf; k++) memcpy(bufs[k], self->pending_opt[k], count * sizeof(float));
        }
    }
    self->ops = ops;
    self->engine = engine;
    self->attached = 1;
    return 0;
}

static int s_submit(trainer_t *t, int idx)
{
    const trainer_bucket_t *b = &t->buckets[idx];
    if (!t->ops) return 0;
    size_t n = b->hi - b->lo;
    const float *g = (t->gpu ? mlp_gpu_grads(t->gpu) : mlp_grads(t->mlp)) + b->lo;
    const void *gv = g;
    if (t->wire) {
        size_t es = dt_size(t->cfg.grad_dtype);
        void *w = (char *)t->wire + b->lo * es;
        if (t->gpu) CHECK(optim_dev_convert(w, t->cfg.grad_dtype, g, DT_F32, n, t->cfg.timeout_ms));
        else dt_convert(w, t->cfg.grad_dtype, g, DT_F32, n);
        gv = w;
    }
    bucket_t bk = {.grad = gv, .offset = b->lo, .count = n, .index = idx};
    uint64_t tr = trace_t0();
    int rc = t->ops->submit(t->engine, &bk);
    trace_x2("submit", tr, "bucket", idx, "bytes", (int64_t)(n * dt_size(t->cfg.grad_dtype)));
    return rc;
}

static int s_layer_submit(trainer_t *t, int layer);
/* backward callback: timeline span of this layer's backward (since the previous callback), then submits */
static int s_layer_done(void *ctx, int layer)
{
    trainer_t *t = ctx;
    trace_x1("backward layer", t->tr_layer, "layer", layer);
    int rc = s_layer_submit(t, layer);
    t->tr_layer = trace_t0();
    return rc;
}

static int s_layer_submit(trainer_t *t, int layer)
{
    if (t->cfg.no_overlap) return 0;
    while (t->next_bucket < t->nbuckets && t->buckets[t->next_bucket].ready_layer >= layer) {
        CHECK(s_submit(t, t->next_bucket));
        t->next_bucket++;
    }
    return 0;
}

static void s_sleep_ms(double ms)
{
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int s_step_emulated(trainer_t *t, trainer_step_t *out)
{
    emu_step_in_t in = {.ops = t->ops, .engine = t->engine, .optim = t->optim, .step = t->applied + 1,
                        .lr = t->cfg.optim.lr, .timeout_ms = t->cfg.timeout_ms, .no_overlap = t->cfg.no_overlap,
                        .straggler_ms = t->cfg.straggler_rank == t->cfg.rank ? t->cfg.straggler_ms : 0,
                        .update_s = emu_update_s(t->emu, &t->cfg.optim)};
    emu_step_out_t eo;
    uint64_t tr = trace_t0();
    CHECK(emu_step(t->emu, &in, &eo));
    trace_x1("emulated step", tr, "step", (int64_t)(t->step + 1));
    t->step++;
    if (!eo.skipped) t->applied++;
    trainer_step_t o;
    memset(&o, 0, sizeof o);
    o.step = t->step;
    o.samples = t->local_batch;
    o.skipped = eo.skipped;
    o.loss_scale = 1;
    o.nbuckets = t->nbuckets;
    o.compute_ms = eo.compute_ms;
    o.comm_ms = eo.comm_ms;
    o.wait_ms = eo.wait_ms;
    o.sync_ms = t->ops ? eo.sync_ms : 0;
    o.cpu_ms = eo.cpu_ms;
    uint64_t t0 = now_ns();
    if (t->cfg.check_every > 0 && t->step % (uint64_t)t->cfg.check_every == 0) CHECK(trainer_check(t));
    o.step_ms = eo.step_ms + (double)(now_ns() - t0) / 1e6;
    if (out) *out = o;
    return 0;
}

int trainer_step(trainer_t *self, trainer_step_t *out)
{
    if (!self->attached) return err_set(ERR_STATE, "trainer_step before trainer_attach");
    if (self->emu) return s_step_emulated(self, out);
    trainer_step_t o;
    memset(&o, 0, sizeof o);
    uint64_t t0 = now_ns();
    uint64_t tr_step = trace_t0(), tr = tr_step; /* timeline (core/trace.h): 0 when off */
    const size_t *idx;
    size_t n;
    CHECK(sampler_next(self->sampler, self->local_batch, &idx, &n));
    dataset_gather(self->data, idx, n, self->gpu ? mlp_gpu_input(self->gpu) : mlp_input(self->mlp), self->labels);
    trace_x1("data", tr, "samples", (int64_t)n);
    tr = trace_t0();
    uint64_t t1 = now_ns();
    if (self->cfg.straggler_rank == self->cfg.rank) s_sleep_ms(self->cfg.straggler_ms);
    if (self->cfg.straggler_rank == self->cfg.rank) trace_x("straggler sleep", tr);
    float scale = self->amp.scale, inv = amp_inv_scale(&self->amp);
    step_ctx_t ctx = {.step = self->applied + 1, .inv_scale = inv, .lr = self->cfg.optim.lr};
    if (self->ops && self->ops->step_begin) CHECK(self->ops->step_begin(self->engine, &ctx));
    tr = trace_t0();
    if (self->gpu) CHECK(mlp_gpu_forward(self->gpu, n, self->labels, scale, &o.loss, &o.correct));
    else CHECK(mlp_forward(self->mlp, n, self->labels, scale, &o.loss, &o.correct));
    trace_x("forward", tr);
    self->next_bucket = 0;
    self->tr_layer = tr = trace_t0();
    if (self->gpu) CHECK(mlp_gpu_backward(self->gpu, s_layer_done, self));
    else CHECK(mlp_backward(self->mlp, s_layer_done, self));
    for (; self->next_bucket < self->nbuckets; self->next_bucket++) CHECK(s_submit(self, self->next_bucket));
    trace_x("backward", tr);
    tr = trace_t0();
    uint64_t t2 = now_ns();
    int overflow = 0;
    if (self->ops) {
        step_out_t so;
        memset(&so, 0, sizeof so);
        CHECK(self->ops->wait(self->engine, &so, self->cfg.timeout_ms));
        trace_x("sync", tr); /* the engine's wait: buckets done, optimizer applied */
        overflow = so.skipped;
        o.comm_ms = so.comm_ms;
        o.wait_ms = so.wait_ms;
    } else if (self->gpu) {
        CHECK(s_local_step_dev(self, inv, &overflow));
        trace_x("optimizer", tr);
    } else {
        size_t count = mlp_shape(self->mlp)->count;
        float *g = mlp_grads(self->mlp);
        if (self->wire) {
            /* what an engine would see: the gradients rounded to the wire dtype */
            overflow = amp_to_wire(self->wire, self->cfg.grad_dtype, g, count);
            if (!overflow) dt_convert(g, DT_F32, self->wire, self->cfg.grad_dtype, count);
        } else {
            overflow = dt_has_nonfinite(g, count, DT_F32); /* as the engines do: never apply Inf/NaN */
        }
        if (!overflow)
            CHECK(optim_step(self->optim, mlp_params(self->mlp), g, 0, count, inv, self->cfg.optim.lr, self->applied + 1));
        trace_x("optimizer", tr);
    }
    uint64_t t3 = now_ns();
    if (!self->ops) o.wait_ms = 0;
    amp_update(&self->amp, overflow);
    if (!overflow) self->applied++;
    self->step++;
    o.step = self->step;
    o.samples = n;
    o.skipped = overflow;
    o.loss_scale = scale;
    o.nbuckets = self->nbuckets;
    o.data_ms = (double)(t1 - t0) / 1e6;
    o.compute_ms = (double)(t2 - t1) / 1e6;
    if (!self->ops) o.compute_ms += (double)(t3 - t2) / 1e6; /* the local optimizer is compute */
    else o.sync_ms = (double)(t3 - t2) / 1e6;
    if (self->cfg.check_every > 0 && self->step % (uint64_t)self->cfg.check_every == 0) CHECK(trainer_check(self));
    o.step_ms = (double)(now_ns() - t0) / 1e6;
    trace_x1("step", tr_step, "step", (int64_t)self->step);
    if (out) *out = o;
    return 0;
}
