/* optim_dev_nocuda.c: core/optim_dev.h in a host-only build (make CUDA=0): every call is ERR_UNSUP
 * "built without CUDA". */
#include "core/optim_dev.h"
#include "core/err.h"

static int s_unsup(const char *what)
{
    return err_set(ERR_UNSUP, "%s: built without CUDA (make CUDA=0 or no nvcc/NCCL found)", what);
}

int optim_dev_new(optim_dev_t **self_p, const optim_cfg_t *cfg, size_t count)
{
    (void)cfg; (void)count;
    if (self_p) *self_p = NULL;
    return s_unsup("device optimizer");
}

void optim_dev_destroy(optim_dev_t **self_p)
{
    if (self_p) *self_p = NULL;
}

int optim_dev_step(optim_dev_t *self, float *params, const float *grad, size_t offset, size_t count, float grad_scale,
                   float lr, uint64_t step, int timeout_ms)
{
    (void)self; (void)params; (void)grad; (void)offset; (void)count; (void)grad_scale; (void)lr; (void)step;
    (void)timeout_ms;
    return s_unsup("device optimizer");
}

size_t optim_dev_state_bytes(const optim_dev_t *self)
{
    (void)self;
    return 0;
}

int optim_dev_state(optim_dev_t *self, float **bufs, int *nbuf, size_t *count)
{
    (void)self; (void)bufs;
    if (nbuf) *nbuf = 0;
    if (count) *count = 0;
    return s_unsup("device optimizer state");
}

int optim_dev_nonfinite(const void *x, size_t n, dtype_t dt, int *bad, int timeout_ms)
{
    (void)x; (void)n; (void)dt; (void)timeout_ms;
    if (bad) *bad = 0;
    return s_unsup("device non-finite check");
}

int optim_dev_convert(void *dst, dtype_t ddt, const void *src, dtype_t sdt, size_t n, int timeout_ms)
{
    (void)dst; (void)ddt; (void)src; (void)sdt; (void)n; (void)timeout_ms;
    return s_unsup("device dtype conversion");
}

int optim_dev_use(int device)
{
    (void)device;
    return s_unsup("selecting a device");
}
