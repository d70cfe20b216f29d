/* optim.h (core/cuda): the device side of core/optim.h (SGD with momentum and weight decay, Adam) and
 * the per-step helpers of allreduce engines on device buffers: a non-finite check and dtype
 * conversion. Pointers are device pointers of the current device; streams are cudaStream_t as void *
 * (NULL = the legacy default stream). Every element operation is an explicitly rounded IEEE f32
 * operation in core/optim.c's order (no fused multiply-add), so a device update is bit-identical to
 * the host one on the same inputs. Built only with CUDA; C callers use core/optim_dev.h. */
#ifndef SB_CUDA_OPTIM_H
#define SB_CUDA_OPTIM_H
#include <stddef.h>
#include "core/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.SGD (dampening 0): d = gs*g + wd*p; buf = mom*buf + d (buf NULL: no momentum);
 * p -= lr*(buf or d). */
int gpu_sgd(float *p, const float *g, float *buf, size_t n, float gs, float wd, float mom, float lr, void *stream);
/* torch.optim.Adam: d = gs*g + wd*p; m = b1*m + (1-b1)*d; v = b2*v + (1-b2)*d*d;
 * p -= step_size*m / (sqrt(v)/bc2_sqrt + eps), with step_size = lr/(1-b1^t), bc2_sqrt = sqrt(1-b2^t)
 * computed by the caller (in double, as core/optim.c). */
int gpu_adam(float *p, const float *g, float *m, float *v, size_t n, float gs, float wd, float b1, float b2,
             float eps, float step_size, float bc2_sqrt, void *stream);
/* *flag_dev (a device int) becomes 1 if any of x[0..n) (dtype dt) is Inf or NaN; it is not cleared
 * here (the caller zeroes it first). */
int gpu_nonfinite(const void *x, size_t n, dtype_t dt, int *flag_dev, void *stream);
/* dst[i] = src[i] converted (f32 <-> f16/bf16, round to nearest even, as dt_convert). */
int gpu_convert(void *dst, dtype_t ddt, const void *src, dtype_t sdt, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
