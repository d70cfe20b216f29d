/* mlp_kernels.cu: the GPU trainer's elementwise and row kernels behind trainer/mlp_kernels.h.
 * Design: bias+ReLU and ReLU backward are grid-stride elementwise kernels; softmax cross-entropy is
 * one 256-thread block per row (block reductions for the max with its first index, then the sum of
 * exponentials), mirroring trainer/model.c's order of operations (max shift, expf, one multiply by
 * inv*g, then subtract g at the label); the bias gradient is one thread per column summing the rows
 * in order (coalesced across columns), as the host loop does. */
#include "trainer/mlp_kernels.h"
#include <cuda_runtime.h>
#include <float.h>

extern "C" {
#include "core/err.h"
}

namespace {

int s_last(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return err_set(ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
}

int s_grid(size_t n)
{
    size_t g = (n + 255) / 256;
    if (g < 1) g = 1;
    if (g > 4096) g = 4096;
    return (int)g;
}

__global__ void k_bias_act(float *y, const float *b, size_t n, size_t d, int relu)
{
    size_t tot = n * d;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        float v = __fadd_rn(y[i], b[i % d]);
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

__global__ void k_relu_bwd(float *dh, const float *a, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dh[i] = a[i] > 0.0f ? dh[i] : 0.0f;
}

__global__ void k_softmax_xent(const float *logits, const int32_t *labels, float *dz, float *loss_i,
                               int32_t *correct_i, size_t C, float g)
{
    __shared__ float sv[256];
    __shared__ size_t si[256];
    size_t row = blockIdx.x;
    const float *z = logits + row * C;
    float *d = dz + row * C;
    int t = threadIdx.x;
    /* max and its first index */
    float mx = -FLT_MAX;
    size_t am = (size_t)-1;
    for (size_t j = t; j < C; j += blockDim.x)
        if (am == (size_t)-1 || z[j] > mx) { mx = z[j]; am = j; }
    sv[t] = mx;
    si[t] = am;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            float ov = sv[t + s];
            size_t oi = si[t + s];
            if (oi != (size_t)-1 && (si[t] == (size_t)-1 || ov > sv[t] || (ov == sv[t] && oi < si[t]))) {
                sv[t] = ov;
                si[t] = oi;
            }
        }
        __syncthreads();
    }
    mx = sv[0];
    am = si[0];
    __syncthreads();
    /* exponentials and their sum */
    float se = 0.0f;
    for (size_t j = t; j < C; j += blockDim.x) {
        float e = expf(__fsub_rn(z[j], mx));
        d[j] = e;
        se = __fadd_rn(se, e);
    }
    sv[t] = se;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sv[t] = __fadd_rn(sv[t], sv[t + s]);
        __syncthreads();
    }
    se = sv[0];
    int32_t y = labels[row];
    float ig = __fmul_rn(__fdiv_rn(1.0f, se), g);
    for (size_t j = t; j < C; j += blockDim.x) {
        float v = __fmul_rn(d[j], ig);
        if (j == (size_t)y) v = __fsub_rn(v, g);
        d[j] = v;
    }
    if (t == 0) {
        loss_i[row] = __fsub_rn(logf(se), __fsub_rn(z[y], mx));
        correct_i[row] = am == (size_t)y;
    }
}

__global__ void k_bias_grad(float *gb, const float *dz, size_t n, size_t out)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < out; j += (size_t)gridDim.x * blockDim.x) {
        float acc = dz[j];
        for (size_t i = 1; i < n; i++) acc = __fadd_rn(acc, dz[i * out + j]);
        gb[j] = acc;
    }
}

} // namespace

extern "C" int mlpk_bias_act(float *y, const float *b, size_t n, size_t d, int relu, void *stream)
{
    if (!n || !d) return 0;
    k_bias_act<<<s_grid(n * d), 256, 0, (cudaStream_t)stream>>>(y, b, n, d, relu);
    return s_last("bias+relu kernel");
}

extern "C" int mlpk_relu_bwd(float *dh, const float *a, size_t count, void *stream)
{
    if (!count) return 0;
    k_relu_bwd<<<s_grid(count), 256, 0, (cudaStream_t)stream>>>(dh, a, count);
    return s_last("relu backward kernel");
}

extern "C" int mlpk_softmax_xent(const float *logits, const int32_t *labels, float *dz, float *loss_i,
                                 int32_t *correct_i, size_t n, size_t C, float g, void *stream)
{
    if (!n) return 0;
    if (n > 0x7fffffffu) return err_set(ERR_RANGE, "softmax kernel: %zu rows", n);
    k_softmax_xent<<<(unsigned)n, 256, 0, (cudaStream_t)stream>>>(logits, labels, dz, loss_i, correct_i, C, g);
    return s_last("softmax cross-entropy kernel");
}

extern "C" int mlpk_bias_grad(float *gb, const float *dz, size_t n, size_t out, void *stream)
{
    if (!n || !out) return 0;
    k_bias_grad<<<s_grid(out), 256, 0, (cudaStream_t)stream>>>(gb, dz, n, out);
    return s_last("bias gradient kernel");
}
