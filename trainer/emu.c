/* emu.c: the emulated model: allocates the (shrunk) parameter arena and gradient pattern of a real
 * workload, cuts DDP buckets and computes each bucket's ready time from the emulated device. */
#include "trainer/emu.h"
#include "core/err.h"
#include "core/timer.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct emu {
    emu_cfg_t cfg;
    workload_t *wl;
    wl_device_t dev;
    size_t count;
    float *params;
    void *grads;
    int nbuckets;
    size_t *boff, *bcount;
    double *bready;
    double fwd_s, total_s;
};

static int s_layout(emu_t *e)
{
    const workload_t *wl = e->wl;
    size_t *ends = calloc(wl->ntensors, sizeof *ends);
    double *ready = calloc(wl->ntensors, sizeof *ready);
    size_t *toff = calloc(wl->ntensors + 1, sizeof *toff);
    int rc = 0;
    if (!ends || !ready || !toff) { rc = err_set(ERR_NOMEM, "emulated %s: layout", wl->name); goto out; }
    for (size_t i = 0; i < wl->ntensors; i++) toff[i + 1] = toff[i] + wl_shrunk_numel(wl, i, e->cfg.shrink);
    e->count = toff[wl->ntensors];
    double mb = e->cfg.bucket_mb > 0 ? e->cfg.bucket_mb : 25.0;
    size_t cap = (size_t)(mb * 1048576.0 / e->cfg.shrink), first = e->cfg.first_bucket_bytes;
    if (!first) first = 1u << 20;
    first = (size_t)((double)first / e->cfg.shrink);
    if (first > cap) first = cap; /* DDP: the first bucket's cap is min(1 MiB, bucket_cap) */
    if (cap < 4) cap = 4;
    if (first < 4) first = 4;
    int nb = wl_buckets(wl, e->cfg.shrink, first, cap, ends);
    if (nb < 0) { rc = nb; goto out; }
    wl_schedule(wl, &e->dev, e->cfg.local_batch, e->cfg.dilate, &e->fwd_s, ready, &e->total_s);
    e->boff = calloc((size_t)nb, sizeof *e->boff);
    e->bcount = calloc((size_t)nb, sizeof *e->bcount);
    e->bready = calloc((size_t)nb, sizeof *e->bready);
    if (!e->boff || !e->bcount || !e->bready) { rc = err_set(ERR_NOMEM, "emulated %s: buckets", wl->name); goto out; }
    size_t begin = 0;
    for (int b = 0; b < nb; b++) {
        e->boff[b] = toff[begin];
        e->bcount[b] = toff[ends[b]] - toff[begin];
        e->bready[b] = ready[ends[b] - 1];
        begin = ends[b];
    }
    e->nbuckets = nb;
out:
    free(ends);
    free(ready);
    free(toff);
    return rc;
}

static int s_fill(emu_t *e)
{
    size_t esz = dt_size(e->cfg.grad_dtype);
    if (!esz) return err_set(ERR_INVAL, "emulated model: gradient dtype");
    e->params = malloc(e->count * sizeof(float));
    float *g32 = malloc(e->count * sizeof(float));
    e->grads = e->cfg.grad_dtype == DT_F32 ? (void *)g32 : malloc(e->count * esz);
    if (!e->params || !g32 || !e->grads) {
        if (e->grads != g32) free(g32);
        return err_set(ERR_NOMEM, "emulated %s: %zu parameters (try a larger --shrink)", e->wl->name, e->count);
    }
    /* parameters: a seed-dependent pattern (rank 0's reach every worker at attach); gradients: multiples
     * of 2^-12 below 2^-6, different per rank, exact under any sum of a few thousand ranks */
    uint64_t x = e->cfg.seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < e->count; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        e->params[i] = (float)((int)(x % 2001) - 1000) * (1.0f / 4096.0f);
        g32[i] = (float)((int)((i * 7 + (size_t)e->cfg.rank * 13) % 64) - 32) * (1.0f / 4096.0f);
    }
    if (e->grads != g32) {
        dt_convert(e->grads, e->cfg.grad_dtype, g32, DT_F32, e->count);
        free(g32);
    }
    return 0;
}

int emu_new(emu_t **self_p, const emu_cfg_t *cfg)
{
    *self_p = NULL;
    if (!(cfg->shrink >= 1) || !(cfg->dilate >= 1))
        return err_set(ERR_INVAL, "emulated model: --shrink and --dilate must be >= 1");
    if (!cfg->local_batch) return err_set(ERR_INVAL, "emulated model: local batch 0");
    emu_t *e = calloc(1, sizeof *e);
    if (!e) return err_set(ERR_NOMEM, "emulated model");
    e->cfg = *cfg;
    int rc = workload_load(&e->wl, cfg->model);
    if (rc == 0) rc = wl_device_resolve(cfg->device ? cfg->device : WL_DEVICE_DEFAULT, e->wl, &e->dev);
    if (rc == 0) rc = s_layout(e);
    if (rc == 0) rc = s_fill(e);
    if (rc < 0) {
        emu_destroy(&e);
        return rc;
    }
    *self_p = e;
    return 0;
}

void emu_destroy(emu_t **self_p)
{
    if (!self_p || !*self_p) return;
    emu_t *e = *self_p;
    if (e->grads != (void *)e->params) free(e->grads);
    free(e->params);
    free(e->boff);
    free(e->bcount);
    free(e->bready);
    workload_destroy(&e->wl);
    free(e);
    *self_p = NULL;
}

const workload_t *emu_workload(const emu_t *self) { return self->wl; }
const wl_device_t *emu_device(const emu_t *self) { return &self->dev; }
float *emu_params(emu_t *self) { return self->params; }
size_t emu_count(const emu_t *self) { return self->count; }
const void *emu_grads(const emu_t *self) { return self->grads; }
int emu_nbuckets(const emu_t *self) { return self->nbuckets; }
double emu_forward_s(const emu_t *self) { return self->fwd_s; }
double emu_compute_s(const emu_t *self) { return self->total_s; }

void emu_bucket(const emu_t *self, int b, size_t *offset, size_t *count, double *ready_s)
{
    if (offset) *offset = self->boff[b];
    if (count) *count = self->bcount[b];
    if (ready_s) *ready_s = self->bready[b];
}

double emu_update_s(const emu_t *self, const optim_cfg_t *optim)
{
    double bpp = optim->kind == OPT_ADAM ? 28 : optim->momentum != 0.0f ? 20 : 12;
    return wl_update_s(&self->dev, self->wl->params, bpp, self->cfg.dilate);
}

void emu_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000ull), .tv_nsec = (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* CPU time of this process, all threads (the scheduler's ns accounting, not tick samples) */
static double s_cpu_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int emu_step(emu_t *self, const emu_step_in_t *in, emu_step_out_t *out)
{
    memset(out, 0, sizeof *out);
    double cpu0 = s_cpu_ms();
    uint64_t t0 = now_ns();
    uint64_t delay = (uint64_t)((in->straggler_ms > 0 ? in->straggler_ms : 0) * 1e6);
    uint64_t t_end = t0 + delay + (uint64_t)(self->total_s * 1e9);
    if (!in->ops) {
        /* world 1: no engine; the device's update is modelled as on every worker of an allreduce */
        emu_sleep_until(t_end + (uint64_t)(in->update_s * 1e9));
        uint64_t t1 = now_ns();
        out->update_ms = in->update_s * 1e3;
        out->compute_ms = (double)(now_ns() - t0) / 1e6;
        out->step_ms = out->compute_ms;
        out->sync_ms = (double)(now_ns() - t1) / 1e6;
        out->cpu_ms = s_cpu_ms() - cpu0;
        return 0;
    }
    step_ctx_t ctx = {.step = in->step, .inv_scale = 1.0f, .lr = in->lr, .reduce_only = 1};
    if (in->ops->step_begin) CHECK(in->ops->step_begin(in->engine, &ctx));
    size_t esz = dt_size(self->cfg.grad_dtype);
    for (int b = 0; b < self->nbuckets; b++) {
        double r = in->no_overlap ? self->total_s : self->bready[b];
        emu_sleep_until(t0 + delay + (uint64_t)(r * 1e9));
        bucket_t bk = {.grad = (const char *)self->grads + self->boff[b] * esz, .offset = self->boff[b],
                       .count = self->bcount[b], .index = b};
        CHECK(in->ops->submit(in->engine, &bk));
    }
    emu_sleep_until(t_end); /* the last bucket is ready at the end of backward: a no-op but for rounding */
    uint64_t t2 = now_ns();
    step_out_t so;
    memset(&so, 0, sizeof so);
    CHECK(in->ops->wait(in->engine, &so, in->timeout_ms));
    if (so.update_left && in->update_s > 0) { /* the device's update, as the worker's GPU would run it */
        emu_sleep_until(now_ns() + (uint64_t)(in->update_s * 1e9));
        out->update_ms = in->update_s * 1e3;
    }
    uint64_t t3 = now_ns();
    out->compute_ms = (double)(t2 - t0) / 1e6;
    out->sync_ms = (double)(t3 - t2) / 1e6;
    out->comm_ms = so.comm_ms;
    out->wait_ms = so.wait_ms;
    out->skipped = so.skipped;
    out->step_ms = (double)(t3 - t0) / 1e6;
    out->cpu_ms = s_cpu_ms() - cpu0;
    return 0;
}
