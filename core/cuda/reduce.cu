/* reduce.cu: the reduction kernels behind reduce.h and their bandwidth probe.
 * Design: one grid-stride kernel per dtype sums up to GPU_REDUCE_MAX_SRCS inputs into an output with
 * an optional scale. When every pointer is 16-byte aligned each thread moves uint4 vectors (4 f32 or
 * 8 f16/bf16), four vectors per iteration so several loads are in flight per thread; half types are
 * widened to f32, summed in source order and rounded once (round to nearest even), like dt_sum_n on
 * the host. The count % vector tail, and misaligned buffers, take a scalar path. The grid is sized
 * to the SM count (a few resident blocks per SM), not to the data. */
#include "core/cuda/reduce.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "core/err.h"
}

namespace {

struct Srcs {
    const void *p[GPU_REDUCE_MAX_SRCS];
    int n;
};

template <int DT> struct Elt;
template <> struct Elt<DT_F32> {
    typedef float T;
    static constexpr int V = 4;
    __device__ static float load(const void *p, size_t i) { return static_cast<const float *>(p)[i]; }
    __device__ static void store(void *p, size_t i, float v) { static_cast<float *>(p)[i] = v; }
    __device__ static void unpack(const uint4 &u, float *f)
    {
        f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y);
        f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
    }
    __device__ static uint4 pack(const float *f)
    {
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                          __float_as_uint(f[3]));
    }
};
/* f16 and bf16 share the 8-per-uint4 packing; C gives the two conversions (h2f widens a 16-bit
 * pattern to f32, f2h rounds to nearest even). */
template <class C> struct Half16 {
    static constexpr int V = 8;
    __device__ static float load(const void *p, size_t i) { return C::h2f(static_cast<const unsigned short *>(p)[i]); }
    __device__ static void store(void *p, size_t i, float v) { static_cast<unsigned short *>(p)[i] = C::f2h(v); }
    __device__ static void unpack(const uint4 &u, float *f)
    {
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            f[2 * k] = C::h2f((unsigned short)(w[k] & 0xffffu));
            f[2 * k + 1] = C::h2f((unsigned short)(w[k] >> 16));
        }
    }
    __device__ static uint4 pack(const float *f)
    {
        unsigned w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) w[k] = (unsigned)C::f2h(f[2 * k]) | ((unsigned)C::f2h(f[2 * k + 1]) << 16);
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
};
struct F16Conv {
    __device__ static float h2f(unsigned short h) { return __half2float(__ushort_as_half(h)); }
    __device__ static unsigned short f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
};
struct BF16Conv {
    __device__ static float h2f(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
    __device__ static unsigned short f2h(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};
template <> struct Elt<DT_F16> : Half16<F16Conv> {};
template <> struct Elt<DT_BF16> : Half16<BF16Conv> {};

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

/* Vector kernel: nvec uint4 vectors, then the tail elements [nvec * V, count) by the first threads. */
template <int DT>
__global__ void __launch_bounds__(kThreads) k_reduce_vec(void *dst, Srcs s, size_t nvec, size_t count, float scale)
{
    typedef Elt<DT> E;
    constexpr int V = E::V;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t base = tid; base < nvec; base += kUnroll * stride) {
        float acc[kUnroll][V];
        uint4 u[kUnroll];
#pragma unroll
        for (int j = 0; j < kUnroll; j++) {
            size_t i = base + j * stride;
            if (i < nvec) u[j] = static_cast<const uint4 *>(s.p[0])[i];
        }
#pragma unroll
        for (int j = 0; j < kUnroll; j++)
            if (base + j * stride < nvec) E::unpack(u[j], acc[j]);
        for (int k = 1; k < s.n; k++) {
#pragma unroll
            for (int j = 0; j < kUnroll; j++) {
                size_t i = base + j * stride;
                if (i < nvec) u[j] = static_cast<const uint4 *>(s.p[k])[i];
            }
#pragma unroll
            for (int j = 0; j < kUnroll; j++) {
                if (base + j * stride < nvec) {
                    float f[V];
                    E::unpack(u[j], f);
#pragma unroll
                    for (int e = 0; e < V; e++) acc[j][e] += f[e];
                }
            }
        }
#pragma unroll
        for (int j = 0; j < kUnroll; j++) {
            size_t i = base + j * stride;
            if (i < nvec) {
#pragma unroll
                for (int e = 0; e < V; e++) acc[j][e] *= scale;
                static_cast<uint4 *>(dst)[i] = E::pack(acc[j]);
            }
        }
    }
    size_t t = nvec * V + tid;
    if (t < count) {
        float a = E::load(s.p[0], t);
        for (int k = 1; k < s.n; k++) a += E::load(s.p[k], t);
        E::store(dst, t, a * scale);
    }
}

/* Scalar kernel for buffers without a common 16-byte alignment. */
template <int DT>
__global__ void __launch_bounds__(kThreads) k_reduce_scalar(void *dst, Srcs s, size_t count, float scale)
{
    typedef Elt<DT> E;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        float a = E::load(s.p[0], i);
        for (int k = 1; k < s.n; k++) a += E::load(s.p[k], i);
        E::store(dst, i, a * scale);
    }
}

int s_max_blocks(void)
{
    static int cache[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 1024;
    if (dev >= 0 && dev < 64 && cache[dev]) return cache[dev];
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) sms = 80;
    int blocks = sms * 4;
    if (dev >= 0 && dev < 64) cache[dev] = blocks;
    return blocks;
}

template <int DT>
void s_launch(void *dst, const Srcs &s, size_t count, float scale, cudaStream_t st)
{
    constexpr int V = Elt<DT>::V;
    uintptr_t bits = (uintptr_t)dst;
    for (int k = 0; k < s.n; k++) bits |= (uintptr_t)s.p[k];
    size_t maxb = (size_t)s_max_blocks();
    if ((bits & 15u) == 0) {
        size_t nvec = count / V;
        size_t work = nvec > count - nvec * V ? nvec : count - nvec * V;
        size_t blocks = (work + kThreads * kUnroll - 1) / (kThreads * kUnroll);
        if (blocks < 1) blocks = 1;
        if (blocks > maxb) blocks = maxb;
        /* the tail needs count % V < V <= kThreads threads: always there */
        k_reduce_vec<DT><<<(unsigned)blocks, kThreads, 0, st>>>(dst, s, nvec, count, scale);
    } else {
        size_t blocks = (count + kThreads - 1) / kThreads;
        if (blocks > maxb) blocks = maxb;
        k_reduce_scalar<DT><<<(unsigned)blocks, kThreads, 0, st>>>(dst, s, count, scale);
    }
}

int s_cuda_err(cudaError_t e, const char *what)
{
    return err_set(ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

__global__ void k_fill_f32(float *p, size_t n, float v)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

} // namespace

extern "C" int gpu_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count, dtype_t dt, float scale,
                            void *stream)
{
    if (nsrc < 1 || nsrc > GPU_REDUCE_MAX_SRCS)
        return err_set(ERR_INVAL, "gpu_reduce_n: %d sources (1..%d)", nsrc, GPU_REDUCE_MAX_SRCS);
    if (count == 0) return 0;
    Srcs s;
    s.n = nsrc;
    for (int k = 0; k < GPU_REDUCE_MAX_SRCS; k++) s.p[k] = k < nsrc ? srcs[k] : nullptr;
    cudaStream_t st = (cudaStream_t)stream;
    switch (dt) {
    case DT_F32: s_launch<DT_F32>(dst, s, count, scale, st); break;
    case DT_F16: s_launch<DT_F16>(dst, s, count, scale, st); break;
    case DT_BF16: s_launch<DT_BF16>(dst, s, count, scale, st); break;
    default: return err_set(ERR_INVAL, "gpu_reduce_n: dtype %d", (int)dt);
    }
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : s_cuda_err(e, "launching the reduce kernel");
}

extern "C" int gpu_reduce(void *dst, const void *a, const void *b, size_t count, dtype_t dt, float scale,
                          void *stream)
{
    const void *srcs[2] = {a, b};
    return gpu_reduce_n(dst, srcs, 2, count, dt, scale, stream);
}

extern "C" int gpu_scale(void *dst, size_t count, dtype_t dt, float scale, void *stream)
{
    const void *srcs[1] = {dst};
    return gpu_reduce_n(dst, srcs, 1, count, dt, scale, stream);
}

extern "C" int gpu_reduce_bw_probe(size_t bytes, int iters, gpu_bw_t *out)
{
    *out = gpu_bw_t();
    bytes &= ~(size_t)15;
    if (bytes == 0 || iters < 1) return err_set(ERR_INVAL, "gpu_reduce_bw_probe: %zu bytes, %d iters", bytes, iters);
    size_t n = bytes / 4;
    float *a = nullptr, *b = nullptr, *c = nullptr;
    cudaStream_t st = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    int rc = 0;
    cudaError_t e;
    float ms = 0, got[3] = {0, 0, 0};
    if ((e = cudaMalloc(&a, bytes)) != cudaSuccess || (e = cudaMalloc(&b, bytes)) != cudaSuccess ||
        (e = cudaMalloc(&c, bytes)) != cudaSuccess || (e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&e0)) != cudaSuccess || (e = cudaEventCreate(&e1)) != cudaSuccess) {
        rc = s_cuda_err(e, "bandwidth probe setup");
        goto done;
    }
    k_fill_f32<<<256, 256, 0, st>>>(a, n, 1.0f);
    k_fill_f32<<<256, 256, 0, st>>>(b, n, 2.0f);
    for (int i = 0; i < 3; i++) {          /* warm-up */
        if ((rc = gpu_reduce(c, a, b, n, DT_F32, 1.0f, st)) < 0) goto done;
        if ((e = cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, st)) != cudaSuccess) { rc = s_cuda_err(e, "probe copy"); goto done; }
    }
    cudaEventRecord(e0, st);
    for (int i = 0; i < iters; i++)
        if ((rc = gpu_reduce(c, a, b, n, DT_F32, 1.0f, st)) < 0) goto done;
    cudaEventRecord(e1, st);
    if ((e = cudaEventSynchronize(e1)) != cudaSuccess) { rc = s_cuda_err(e, "probe reduce"); goto done; }
    cudaEventElapsedTime(&ms, e0, e1);
    out->reduce_ms = ms / iters;
    cudaMemcpy(&got[0], c, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&got[1], c + n / 2, 4, cudaMemcpyDeviceToHost);
    if ((e = cudaMemcpy(&got[2], c + n - 1, 4, cudaMemcpyDeviceToHost)) != cudaSuccess) { rc = s_cuda_err(e, "probe check"); goto done; }
    if (got[0] != 3.0f || got[1] != 3.0f || got[2] != 3.0f) {
        rc = err_set(ERR_WRONG, "reduce kernel: 1 + 2 gave %g, %g, %g", got[0], got[1], got[2]);
        goto done;
    }
    cudaEventRecord(e0, st);
    for (int i = 0; i < iters; i++)
        if ((e = cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, st)) != cudaSuccess) { rc = s_cuda_err(e, "probe copy"); goto done; }
    cudaEventRecord(e1, st);
    if ((e = cudaEventSynchronize(e1)) != cudaSuccess) { rc = s_cuda_err(e, "probe copy"); goto done; }
    cudaEventElapsedTime(&ms, e0, e1);
    out->copy_ms = ms / iters;
    out->bytes = bytes;
    out->reduce_gbps = out->reduce_ms > 0 ? 3.0 * (double)bytes / (out->reduce_ms * 1e6) : 0;
    out->copy_gbps = out->copy_ms > 0 ? 2.0 * (double)bytes / (out->copy_ms * 1e6) : 0;
    out->ratio = out->copy_gbps > 0 ? out->reduce_gbps / out->copy_gbps : 0;
done:
    if (st) cudaStreamSynchronize(st);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return rc;
}
