/* reduce.h: the project's CUDA reduction kernels (f32, f16, bf16; half types accumulate in f32 and
 * round once), callable from C, and a bandwidth probe that compares them with a device-to-device
 * copy. Pointers are device pointers (or peers' buffers opened through CUDA IPC); streams are
 * cudaStream_t passed as void * (NULL = the legacy default stream). Built only with CUDA. */
#ifndef SB_CUDA_REDUCE_H
#define SB_CUDA_REDUCE_H
#include <stddef.h>
#include "core/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_REDUCE_MAX_SRCS 8

/* dst[i] = (a[i] + b[i]) * scale (scale 1: plain sum). dst may alias a or b. Vector path (16-byte
 * loads) when dst, a and b share 16-byte alignment; a scalar path otherwise. 0 or ERR_CUDA/ERR_INVAL. */
int gpu_reduce(void *dst, const void *a, const void *b, size_t count, dtype_t dt, float scale, void *stream);
/* dst[i] = (sum over k < nsrc of srcs[k][i]) * scale, one pass, f32 accumulation; 1 <= nsrc <=
 * GPU_REDUCE_MAX_SRCS (nsrc 1 is a scaled copy). dst may alias one source. */
int gpu_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count, dtype_t dt, float scale,
                 void *stream);
/* dst[i] *= scale. */
int gpu_scale(void *dst, size_t count, dtype_t dt, float scale, void *stream);

typedef struct {
    double reduce_gbps;     /* gpu_reduce f32: (2 reads + 1 write) * bytes / time, GB/s (1e9) */
    double copy_gbps;       /* cudaMemcpyDeviceToDevice: (1 read + 1 write) * bytes / time */
    double ratio;           /* reduce_gbps / copy_gbps (memory traffic rate; target >= 0.8) */
    double reduce_ms, copy_ms;   /* mean time per call */
    size_t bytes;
} gpu_bw_t;
/* On the current device: allocate three buffers of bytes, time iters calls of each (after a
 * warm-up), check one reduce result, free. ERR_WRONG if the kernel's result is wrong. */
int gpu_reduce_bw_probe(size_t bytes, int iters, gpu_bw_t *out);

#ifdef __cplusplus
}
#endif
#endif
