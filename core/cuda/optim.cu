/* optim.cu (core/cuda): the device optimizers, non-finite check and dtype conversion behind
 * core/cuda/optim.h.
 * Design: grid-stride element kernels, grid sized to the SM count (a few blocks per SM). Each element
 * follows core/optim.c's expression with __fmul_rn/__fadd_rn/__fdiv_rn/__fsqrt_rn, which nvcc never
 * contracts into FMAs, so results match the host build (x86-64-v2, no FMA) bit for bit. The
 * non-finite check reads each element once and sets a flag word (racy writes of the same value). */
#include "core/cuda/optim.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "core/err.h"
}

namespace {

int s_grid(size_t n)
{
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
            sms = 32;
    }
    size_t want = (n + 255) / 256;
    size_t cap = (size_t)sms * 8;
    if (want < 1) want = 1;
    return (int)(want < cap ? want : cap);
}

int s_last(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return err_set(ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
}

__global__ void k_sgd_mom(float *p, const float *g, float *buf, size_t n, float gs, float wd, float mom, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = p[i];
        float d = __fadd_rn(__fmul_rn(g[i], gs), __fmul_rn(wd, pi));
        float b = __fadd_rn(__fmul_rn(mom, buf[i]), d);
        buf[i] = b;
        p[i] = __fsub_rn(pi, __fmul_rn(lr, b));
    }
}

__global__ void k_sgd(float *p, const float *g, size_t n, float gs, float wd, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = p[i];
        float d = __fadd_rn(__fmul_rn(g[i], gs), __fmul_rn(wd, pi));
        p[i] = __fsub_rn(pi, __fmul_rn(lr, d));
    }
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, size_t n, float gs, float wd, float b1, float b2,
                       float eps, float step_size, float bc2_sqrt)
{
    const float c1 = __fsub_rn(1.0f, b1), c2 = __fsub_rn(1.0f, b2);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = p[i];
        float d = __fadd_rn(__fmul_rn(g[i], gs), __fmul_rn(wd, pi));
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(c1, d));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(c2, d), d));
        m[i] = mi;
        v[i] = vi;
        float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(step_size, mi), den));
    }
}

template <typename T> __device__ float s_tof(T x);
template <> __device__ float s_tof<float>(float x) { return x; }
template <> __device__ float s_tof<__half>(__half x) { return __half2float(x); }
template <> __device__ float s_tof<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T s_fromf(float x);
template <> __device__ float s_fromf<float>(float x) { return x; }
template <> __device__ __half s_fromf<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __nv_bfloat16 s_fromf<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T> __global__ void k_nonfinite(const T *x, size_t n, int *flag)
{
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        bad |= !isfinite(s_tof<T>(x[i]));
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

template <typename D, typename S> __global__ void k_convert(D *dst, const S *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = s_fromf<D>(s_tof<S>(src[i]));
}

template <typename D> int s_convert_from(D *dst, const void *src, dtype_t sdt, size_t n, int grid, cudaStream_t st)
{
    switch (sdt) {
    case DT_F32: k_convert<D, float><<<grid, 256, 0, st>>>(dst, (const float *)src, n); break;
    case DT_F16: k_convert<D, __half><<<grid, 256, 0, st>>>(dst, (const __half *)src, n); break;
    case DT_BF16: k_convert<D, __nv_bfloat16><<<grid, 256, 0, st>>>(dst, (const __nv_bfloat16 *)src, n); break;
    default: return err_set(ERR_INVAL, "gpu_convert: source dtype %d", (int)sdt);
    }
    return 0;
}

} // namespace

extern "C" int gpu_sgd(float *p, const float *g, float *buf, size_t n, float gs, float wd, float mom, float lr,
                       void *stream)
{
    if (!n) return 0;
    if (!p || !g) return err_set(ERR_INVAL, "gpu_sgd: NULL params or grad");
    cudaStream_t st = (cudaStream_t)stream;
    if (buf) k_sgd_mom<<<s_grid(n), 256, 0, st>>>(p, g, buf, n, gs, wd, mom, lr);
    else k_sgd<<<s_grid(n), 256, 0, st>>>(p, g, n, gs, wd, lr);
    return s_last("gpu_sgd");
}

extern "C" int gpu_adam(float *p, const float *g, float *m, float *v, size_t n, float gs, float wd, float b1,
                        float b2, float eps, float step_size, float bc2_sqrt, void *stream)
{
    if (!n) return 0;
    if (!p || !g || !m || !v) return err_set(ERR_INVAL, "gpu_adam: NULL buffer");
    k_adam<<<s_grid(n), 256, 0, (cudaStream_t)stream>>>(p, g, m, v, n, gs, wd, b1, b2, eps, step_size, bc2_sqrt);
    return s_last("gpu_adam");
}

extern "C" int gpu_nonfinite(const void *x, size_t n, dtype_t dt, int *flag_dev, void *stream)
{
    if (!n) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    int grid = s_grid(n);
    switch (dt) {
    case DT_F32: k_nonfinite<float><<<grid, 256, 0, st>>>((const float *)x, n, flag_dev); break;
    case DT_F16: k_nonfinite<__half><<<grid, 256, 0, st>>>((const __half *)x, n, flag_dev); break;
    case DT_BF16: k_nonfinite<__nv_bfloat16><<<grid, 256, 0, st>>>((const __nv_bfloat16 *)x, n, flag_dev); break;
    default: return err_set(ERR_INVAL, "gpu_nonfinite: dtype %d", (int)dt);
    }
    return s_last("gpu_nonfinite");
}

extern "C" int gpu_convert(void *dst, dtype_t ddt, const void *src, dtype_t sdt, size_t n, void *stream)
{
    if (!n) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    int grid = s_grid(n), rc;
    switch (ddt) {
    case DT_F32: rc = s_convert_from<float>((float *)dst, src, sdt, n, grid, st); break;
    case DT_F16: rc = s_convert_from<__half>((__half *)dst, src, sdt, n, grid, st); break;
    case DT_BF16: rc = s_convert_from<__nv_bfloat16>((__nv_bfloat16 *)dst, src, sdt, n, grid, st); break;
    default: return err_set(ERR_INVAL, "gpu_convert: destination dtype %d", (int)ddt);
    }
    if (rc < 0) return rc;
    return s_last("gpu_convert");
}
