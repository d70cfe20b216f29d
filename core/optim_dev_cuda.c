/* optim_dev_cuda.c: core/optim_dev.h on the CUDA runtime: state in dev_malloc'ed buffers, updates by
 * core/cuda/optim.cu's kernels on the legacy default stream, each call waiting (bounded) for its work.
 * The host snapshot of the state (checkpoints) is pinned memory; a dirty snapshot is uploaded before
 * the next step. */
#include "core/optim_dev.h"
#include "core/cuda/optim.h"
#include "core/dev.h"
#include "core/err.h"
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct optim_dev {
    optim_cfg_t cfg;
    size_t count;
    int nbuf;
    float *buf[OPTIM_MAX_BUFS];    /* device: SGD momentum; Adam m, v */
    float *host[OPTIM_MAX_BUFS];   /* pinned snapshot for checkpoints (NULL until asked) */
    int host_dirty;                /* the snapshot was handed out: upload before the next step */
};

static int s_timeout(int timeout_ms) { return timeout_ms > 0 ? timeout_ms : 60000; }

int optim_dev_new(optim_dev_t **self_p, const optim_cfg_t *cfg, size_t count)
{
    if (!self_p || !cfg) return err_set(ERR_INVAL, "optim_dev_new: NULL argument");
    *self_p = NULL;
    /* the host constructor validates the configuration with the same messages */
    optim_t *probe = NULL;
    CHECK(optim_new(&probe, cfg, 0));
    optim_destroy(&probe);
    optim_dev_t *self = calloc(1, sizeof *self);
    if (!self) return err_set(ERR_NOMEM, "optim_dev_new");
    self->cfg = *cfg;
    self->count = count;
    self->nbuf = cfg->kind == OPT_ADAM ? 2 : (cfg->momentum != 0.0f ? 1 : 0);
    for (int i = 0; i < self->nbuf; i++) {
        int rc = dev_malloc((void **)&self->buf[i], (count ? count : 1) * sizeof(float));
        if (rc == 0) rc = dev_memset(self->buf[i], 0, (count ? count : 1) * sizeof(float));
        if (rc < 0) {
            optim_dev_destroy(&self);
            err_note(rc, __FILE__, __LINE__, "device optimizer state");
            return rc;
        }
    }
    *self_p = self;
    return 0;
}

void optim_dev_destroy(optim_dev_t **self_p)
{
    if (!self_p || !*self_p) return;
    optim_dev_t *self = *self_p;
    for (int i = 0; i < OPTIM_MAX_BUFS; i++) {
        dev_free((void **)&self->buf[i]);
        dev_host_free((void **)&self->host[i]);
    }
    free(self);
    *self_p = NULL;
}

static int s_upload(optim_dev_t *self)
{
    if (!self->host_dirty) return 0;
    for (int i = 0; i < self->nbuf; i++) CHECK(dev_memcpy(self->buf[i], self->host[i], self->count * sizeof(float)));
    self->host_dirty = 0;
    return 0;
}

int optim_dev_step(optim_dev_t *self, float *params, const float *grad, size_t offset, size_t count, float grad_scale,
                   float lr, uint64_t step, int timeout_ms)
{
    if (!self) return err_set(ERR_INVAL, "optim_dev_step: NULL optimizer");
    if (offset > self->count || count > self->count - offset)
        return err_set(ERR_RANGE, "optim_dev_step: range [%zu, %zu+%zu) outside the %zu parameters", offset, offset,
                       count, self->count);
    if (!count) return 0;
    if (!params || !grad) return err_set(ERR_INVAL, "optim_dev_step: NULL params or grad");
    if (!isfinite(lr) || lr < 0.0f) return err_set(ERR_INVAL, "optim_dev_step: bad lr %g", (double)lr);
    CHECK(s_upload(self));
    const optim_cfg_t *c = &self->cfg;
    if (c->kind == OPT_SGD) {
        CHECK(gpu_sgd(params, grad, self->nbuf ? self->buf[0] + offset : NULL, count, grad_scale, c->weight_decay,
                      c->momentum, lr, NULL));
    } else {
        if (step == 0) return err_set(ERR_INVAL, "optim_dev_step: Adam steps are 1-based (got step 0)");
        /* the bias corrections exactly as core/optim.c computes them */
        double bc1 = 1.0 - pow((double)c->beta1, (double)step);
        double bc2 = 1.0 - pow((double)c->beta2, (double)step);
        float step_size = (float)((double)lr / bc1);
        float bc2_sqrt = (float)sqrt(bc2);
        CHECK(gpu_adam(params, grad, self->buf[0] + offset, self->buf[1] + offset, count, grad_scale, c->weight_decay,
                       c->beta1, c->beta2, c->eps, step_size, bc2_sqrt, NULL));
    }
    CHECK(dev_stream_wait(NULL, s_timeout(timeout_ms)));
    return 0;
}

size_t optim_dev_state_bytes(const optim_dev_t *self)
{
    return self ? (size_t)self->nbuf * self->count * sizeof(float) : 0;
}

int optim_dev_state(optim_dev_t *self, float **bufs, int *nbuf, size_t *count)
{
    if (!self || !nbuf) return err_set(ERR_INVAL, "optim_dev_state: NULL argument");
    CHECK(s_upload(self)); /* a previous snapshot may hold the caller's writes */
    for (int i = 0; i < self->nbuf; i++) {
        if (!self->host[i]) CHECK(dev_host_alloc((void **)&self->host[i], (self->count ? self->count : 1) * sizeof(float)));
        CHECK(dev_memcpy(self->host[i], self->buf[i], self->count * sizeof(float)));
    }
    *nbuf = self->nbuf;
    if (count) *count = self->count;
    if (bufs)
        for (int i = 0; i < self->nbuf; i++) bufs[i] = self->host[i];
    self->host_dirty = self->nbuf > 0;
    return 0;
}

/* One flag word per thread and device, for the non-finite check. */
static _Thread_local int *s_flag;
static _Thread_local int s_flag_dev = -1;

int optim_dev_nonfinite(const void *x, size_t n, dtype_t dt, int *bad, int timeout_ms)
{
    if (!bad) return err_set(ERR_INVAL, "optim_dev_nonfinite: NULL result");
    *bad = 0;
    if (!n) return 0;
    int dev = -1;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return err_set(ERR_CUDA, "cudaGetDevice: %s", cudaGetErrorString(e));
    if (!s_flag || s_flag_dev != dev) {
        e = cudaMalloc((void **)&s_flag, sizeof(int)); /* a few bytes per thread, kept: not tracked */
        if (e != cudaSuccess) return err_set(ERR_CUDA, "cudaMalloc (flag): %s", cudaGetErrorString(e));
        s_flag_dev = dev;
    }
    int h = 0;
    e = cudaMemsetAsync(s_flag, 0, sizeof(int), NULL);
    if (e != cudaSuccess) return err_set(ERR_CUDA, "cudaMemsetAsync: %s", cudaGetErrorString(e));
    CHECK(gpu_nonfinite(x, n, dt, s_flag, NULL));
    CHECK(dev_memcpy_async(&h, s_flag, sizeof h, NULL));
    CHECK(dev_stream_wait(NULL, s_timeout(timeout_ms)));
    *bad = h != 0;
    return 0;
}

int optim_dev_convert(void *dst, dtype_t ddt, const void *src, dtype_t sdt, size_t n, int timeout_ms)
{
    if (!n) return 0;
    if (!dst || !src) return err_set(ERR_INVAL, "optim_dev_convert: NULL buffer");
    if (ddt == sdt) {
        CHECK(dev_memcpy_async(dst, src, n * dt_size(ddt), NULL));
    } else {
        CHECK(gpu_convert(dst, ddt, src, sdt, n, NULL));
    }
    CHECK(dev_stream_wait(NULL, s_timeout(timeout_ms)));
    return 0;
}

int optim_dev_use(int device)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) return err_set(ERR_CUDA, "cudaSetDevice(%d): %s", device, cudaGetErrorString(e));
    return 0;
}
