/* model_gpu_cuda.c: the MLP on a GPU through cuBLAS, the same algorithm as trainer/model.c.
 *
 * cuBLAS is column-major; a row-major [r x c] matrix is its column-major transpose, so with W_l
 * row-major [out x in], a batch H row-major [n x in] and Z row-major [n x out]:
 *   forward   Z^T = W H^T          sgemm(T, N, out, n, in,  W (ld in),  H (ld in),   Z (ld out))
 *   dW        dW^T = H^T dZ        sgemm(N, T, in, out, n,  H (ld in),  dZ (ld out), dW (ld in))
 *   dH        dH^T = W^T dZ^T      sgemm(N, N, in, n, out,  W (ld in),  dZ (ld out), dH (ld in))
 * then bias + ReLU, bias-gradient column sums, ReLU backward and softmax cross-entropy as small
 * kernels (trainer/mlp_kernels.h), everything on one non-blocking stream of the model; the layer
 * loops are trainer/mlp_pass.c's, shared with the CPU model. A layer is reported done only after its
 * dH is computed and the stream has drained (an engine may update W_l then). In flight: at most one
 * layer's work while backward runs; forward waits for the loss. */
#include "trainer/model_gpu.h"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/dev.h"
#include "core/err.h"
#include "core/timer.h"
#include "trainer/mlp_kernels.h"
#include "trainer/mlp_pass.h"

struct mlp_gpu {
    mlp_bufs_t b;                       /* device arenas, input, activations and dz */
    int tf32, timeout_ms;
    cublasHandle_t blas;
    void *stream;
    int32_t *labels_d, *correct_d;
    float *loss_d;
    float *x_h;                         /* pinned staging */
    int32_t *labels_h, *correct_h;
    float *loss_h;
};

static int s_blas(cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return err_set(ERR_CUDA, "%s: cuBLAS status %d (%s)", what, (int)st, cublasGetStatusString(st));
}

static int s_check_dims(const mlp_shape_t *s, size_t b)
{
    for (int l = 0; l <= s->nlayers; l++)
        if (s->dims[l] > 0x7fffffffu) return err_set(ERR_RANGE, "GPU model: width %zu too large for cuBLAS", s->dims[l]);
    if (b > 0x7fffffffu) return err_set(ERR_RANGE, "GPU model: batch %zu too large for cuBLAS", b);
    return 0;
}

int mlp_gpu_new(mlp_gpu_t **self_p, const mlp_shape_t *shape, size_t max_batch, int tf32, int timeout_ms)
{
    if (!self_p || !shape || shape->nlayers < 1 || max_batch == 0) return err_set(ERR_INVAL, "mlp_gpu_new: bad arguments");
    *self_p = NULL;
    CHECK(s_check_dims(shape, max_batch));
    mlp_gpu_t *m = calloc(1, sizeof *m);
    if (!m) return ERR_NOMEM;
    m->b.s = *shape;
    m->b.max_batch = max_batch;
    m->tf32 = tf32;
    m->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
    int rc;
    CHECK_GOTO(rc, s_blas(cublasCreate(&m->blas), "cublasCreate"), fail);
    CHECK_GOTO(rc, dev_stream_new(&m->stream), fail);
    CHECK_GOTO(rc, s_blas(cublasSetStream(m->blas, (cudaStream_t)m->stream), "cublasSetStream"), fail);
    CHECK_GOTO(rc, s_blas(cublasSetMathMode(m->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                          "cublasSetMathMode"), fail);
    size_t wmax = 0;
    for (int l = 0; l <= shape->nlayers; l++) wmax = shape->dims[l] > wmax ? shape->dims[l] : wmax;
    size_t cnt = shape->count, B = max_batch;
    CHECK_GOTO(rc, dev_malloc((void **)&m->b.params, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->b.grads, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_memset(m->b.params, 0, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_memset(m->b.grads, 0, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->b.x, B * shape->dims[0] * sizeof(float)), fail);
    for (int k = 0; k < 2; k++) CHECK_GOTO(rc, dev_malloc((void **)&m->b.dz[k], B * wmax * sizeof(float)), fail);
    for (int l = 0; l < shape->nlayers; l++)
        CHECK_GOTO(rc, dev_malloc((void **)&m->b.act[l], B * shape->dims[l + 1] * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->labels_d, B * sizeof(int32_t)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->correct_d, B * sizeof(int32_t)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->loss_d, B * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_host_alloc((void **)&m->x_h, B * shape->dims[0] * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_host_alloc((void **)&m->labels_h, B * sizeof(int32_t)), fail);
    CHECK_GOTO(rc, dev_host_alloc((void **)&m->correct_h, B * sizeof(int32_t)), fail);
    CHECK_GOTO(rc, dev_host_alloc((void **)&m->loss_h, B * sizeof(float)), fail);
    memset(m->x_h, 0, B * shape->dims[0] * sizeof(float));
    *self_p = m;
    return 0;
fail:
    mlp_gpu_destroy(&m);
    return rc;
}

void mlp_gpu_destroy(mlp_gpu_t **self_p)
{
    if (!self_p || !*self_p) return;
    mlp_gpu_t *m = *self_p;
    if (m->stream) (void)dev_stream_wait(m->stream, m->timeout_ms);
    dev_free((void **)&m->b.params);
    dev_free((void **)&m->b.grads);
    dev_free((void **)&m->b.x);
    for (int k = 0; k < 2; k++) dev_free((void **)&m->b.dz[k]);
    for (int l = 0; l < MLP_MAX_LAYERS; l++) dev_free((void **)&m->b.act[l]);
    dev_free((void **)&m->labels_d);
    dev_free((void **)&m->correct_d);
    dev_free((void **)&m->loss_d);
    dev_host_free((void **)&m->x_h);
    dev_host_free((void **)&m->labels_h);
    dev_host_free((void **)&m->correct_h);
    dev_host_free((void **)&m->loss_h);
    if (m->blas) cublasDestroy(m->blas);
    dev_stream_destroy(&m->stream);
    free(m);
    *self_p = NULL;
}

const mlp_shape_t *mlp_gpu_shape(const mlp_gpu_t *self) { return &self->b.s; }
float *mlp_gpu_params(mlp_gpu_t *self) { return self->b.params; }
float *mlp_gpu_grads(mlp_gpu_t *self) { return self->b.grads; }
float *mlp_gpu_input(mlp_gpu_t *self) { return self->x_h; }
const char *mlp_gpu_desc(const mlp_gpu_t *self) { return self->tf32 ? "cuBLAS TF32" : "cuBLAS f32"; }

int mlp_gpu_set_params(mlp_gpu_t *self, const float *host)
{
    /* the model's stream is idle before, and dev_memcpy is complete after (dev.h): the next forward's
     * first GEMM on that stream reads the uploaded parameters */
    CHECK(dev_stream_wait(self->stream, self->timeout_ms));
    return dev_memcpy(self->b.params, host, self->b.s.count * sizeof(float));
}

int mlp_gpu_get_params(mlp_gpu_t *self, float *host)
{
    CHECK(dev_stream_wait(self->stream, self->timeout_ms));
    return dev_memcpy(host, self->b.params, self->b.s.count * sizeof(float));
}

int mlp_gpu_get_grads(mlp_gpu_t *self, float *host)
{
    CHECK(dev_stream_wait(self->stream, self->timeout_ms));
    return dev_memcpy(host, self->b.grads, self->b.s.count * sizeof(float));
}

/* Row-major C[r x c] = op(A) op(B) in the three shapes above, as one column-major sgemm. */
static int s_gemm(mlp_gpu_t *m, cublasOperation_t ta, cublasOperation_t tb, size_t M, size_t N, size_t K,
                  const float *A, size_t lda, const float *B, size_t ldb, float *C, size_t ldc)
{
    const float one = 1.0f, zero = 0.0f;
    return s_blas(cublasSgemm(m->blas, ta, tb, (int)M, (int)N, (int)K, &one, A, (int)lda, B, (int)ldb, &zero, C,
                              (int)ldc), "cublasSgemm");
}

/* The pieces behind trainer/mlp_pass.h: the GEMMs in the three shapes above, the small kernels, all
 * on the model's stream; sync drains it. */
static int s_gemm_fwd(void *ctx, size_t n, size_t in, size_t out, const float *h, const float *w, float *z)
{
    return s_gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, h, in, z, out);
}
static int s_bias_act(void *ctx, float *y, const float *b, size_t n, size_t d, int relu)
{
    return mlpk_bias_act(y, b, n, d, relu, ((mlp_gpu_t *)ctx)->stream);
}
static int s_gemm_wgrad(void *ctx, size_t n, size_t in, size_t out, const float *dz, const float *h, float *gw)
{
    return s_gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, h, in, dz, out, gw, in);
}
static int s_bias_grad(void *ctx, float *gb, const float *dz, size_t n, size_t out)
{
    return mlpk_bias_grad(gb, dz, n, out, ((mlp_gpu_t *)ctx)->stream);
}
static int s_gemm_dgrad(void *ctx, size_t n, size_t in, size_t out, const float *dz, const float *w, float *dh)
{
    return s_gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dz, out, dh, in);
}
static int s_relu_bwd(void *ctx, float *dh, const float *a, size_t count)
{
    return mlpk_relu_bwd(dh, a, count, ((mlp_gpu_t *)ctx)->stream);
}
static int s_sync(void *ctx)
{
    mlp_gpu_t *m = ctx;
    return dev_stream_wait(m->stream, m->timeout_ms);
}

static const mlp_kernels_t s_gpu = {
    .gemm_fwd = s_gemm_fwd, .bias_act = s_bias_act, .gemm_wgrad = s_gemm_wgrad, .bias_grad = s_bias_grad,
    .gemm_dgrad = s_gemm_dgrad, .relu_bwd = s_relu_bwd, .sync = s_sync,
};

int mlp_gpu_forward(mlp_gpu_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss, size_t *correct)
{
    int rc = mlp_pass_check_batch(&self->b, n);
    if (rc) return rc;
    const mlp_shape_t *s = &self->b.s;
    int L = s->nlayers;
    size_t C = s->dims[L];
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || (size_t)labels[i] >= C)
            return err_set(ERR_INVAL, "forward: label %d outside [0, %zu)", (int)labels[i], C);
    self->b.n = n;
    void *st = self->stream;
    if (labels != self->labels_h) memcpy(self->labels_h, labels, n * sizeof(int32_t));
    CHECK(dev_memcpy_async(self->b.x, self->x_h, n * s->dims[0] * sizeof(float), st));
    CHECK(dev_memcpy_async(self->labels_d, self->labels_h, n * sizeof(int32_t), st));
    CHECK(mlp_pass_forward(&self->b, &s_gpu, self));
    self->b.dz_cur = 0;
    CHECK(mlpk_softmax_xent(self->b.act[L - 1], self->labels_d, self->b.dz[0], self->loss_d, self->correct_d, n, C,
                            loss_scale / (float)n, st));
    CHECK(dev_memcpy_async(self->loss_h, self->loss_d, n * sizeof(float), st));
    CHECK(dev_memcpy_async(self->correct_h, self->correct_d, n * sizeof(int32_t), st));
    CHECK(dev_stream_wait(st, self->timeout_ms));
    double sum = 0;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        sum += (double)self->loss_h[i];
        ok += self->correct_h[i] != 0;
    }
    if (loss) *loss = sum / (double)n;
    if (correct) *correct = ok;
    return 0;
}

int mlp_gpu_backward(mlp_gpu_t *self, mlp_layer_done_fn done, void *ctx)
{
    return mlp_pass_backward(&self->b, &s_gpu, self, done, ctx);
}

static int s_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int mlp_gpu_gemm_bench(const mlp_shape_t *shape, size_t b, int tf32, int warmup, int iters, double *ms_p50,
                       double *ms_min, double layer_ms[MLP_MAX_LAYERS][3])
{
    if (!shape || b == 0 || iters < 1) return err_set(ERR_INVAL, "gemm: bad arguments");
    mlp_gpu_t *m = NULL;
    CHECK(mlp_gpu_new(&m, shape, b, tf32, 60000));
    const mlp_shape_t *s = &m->b.s;
    int L = s->nlayers, rc = 0;
    double *t = calloc((size_t)iters, sizeof(double));
    cudaEvent_t ev[MLP_MAX_LAYERS * 3 + 2];
    int nev = 0;
    if (!t) { rc = ERR_NOMEM; goto out; }
    for (; nev < L * 3 + 2; nev++)
        if (cudaEventCreate(&ev[nev]) != cudaSuccess) { rc = err_set(ERR_CUDA, "cudaEventCreate"); goto out; }
    if (layer_ms) memset(layer_ms, 0, sizeof(double) * MLP_MAX_LAYERS * 3);
    /* inputs: small values so nothing overflows (the numbers do not matter for timing) */
    CHECK_GOTO(rc, dev_memset(m->b.params, 0, s->count * sizeof(float)), out);
    CHECK_GOTO(rc, dev_memset(m->b.x, 0, b * s->dims[0] * sizeof(float)), out);
    for (int it = -warmup; it < iters; it++) {
        cudaStream_t st = (cudaStream_t)m->stream;
        int e = 0;
        cudaEventRecord(ev[e++], st);
        const float *h = m->b.x;
        for (int l = 0; l < L; l++) {
            size_t in = s->dims[l], out = s->dims[l + 1];
            CHECK_GOTO(rc, s_gemm(m, CUBLAS_OP_T, CUBLAS_OP_N, out, b, in, m->b.params + s->w_off[l], in, h, in, m->b.act[l], out), out);
            cudaEventRecord(ev[e++], st);
            h = m->b.act[l];
        }
        for (int l = L - 1; l >= 0; l--) {
            size_t in = s->dims[l], out = s->dims[l + 1];
            const float *hh = l > 0 ? m->b.act[l - 1] : m->b.x;
            CHECK_GOTO(rc, s_gemm(m, CUBLAS_OP_N, CUBLAS_OP_T, in, out, b, hh, in, m->b.dz[0], out, m->b.grads + s->w_off[l], in), out);
            cudaEventRecord(ev[e++], st);
            if (l > 0)
                CHECK_GOTO(rc, s_gemm(m, CUBLAS_OP_N, CUBLAS_OP_N, in, b, out, m->b.params + s->w_off[l], in, m->b.dz[0], out,
                                      m->b.dz[1], in), out);
            cudaEventRecord(ev[e++], st);
        }
        CHECK_GOTO(rc, dev_stream_wait(m->stream, 60000), out);
        if (it < 0) continue;
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[0], ev[e - 1]);
        t[it] = ms;
        if (layer_ms) {
            for (int l = 0; l < L; l++) {
                cudaEventElapsedTime(&ms, ev[l], ev[l + 1]);
                layer_ms[l][0] += ms / iters;
            }
            for (int k = 0, l = L - 1; l >= 0; l--, k++) {
                int e0 = L + 2 * k;
                cudaEventElapsedTime(&ms, ev[e0], ev[e0 + 1]);
                layer_ms[l][1] += ms / iters;
                cudaEventElapsedTime(&ms, ev[e0 + 1], ev[e0 + 2]);
                layer_ms[l][2] += ms / iters;
            }
        }
    }
    qsort(t, (size_t)iters, sizeof *t, s_cmp_d);
    if (ms_p50) *ms_p50 = t[iters / 2];
    if (ms_min) *ms_min = t[0];
out:
    for (int k = 0; k < nev; k++) cudaEventDestroy(ev[k]);
    free(t);
    mlp_gpu_destroy(&m);
    return rc;
}
