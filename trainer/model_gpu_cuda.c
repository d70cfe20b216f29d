/* model_gpu_cuda.c: the MLP on a GPU through cuBLAS, the same algorithm as trainer/model.c.
 *
 * cuBLAS is column-major; a row-major [r x c] matrix is its column-major transpose, so with W_l
 * row-major [out x in], a batch H row-major [n x in] and Z row-major [n x out]:
 *   forward   Z^T = W H^T          sgemm(T, N, out, n, in,  W (ld in),  H (ld in),   Z (ld out))
 *   dW        dW^T = H^T dZ        sgemm(N, T, in, out, n,  H (ld in),  dZ (ld out), dW (ld in))
 *   dH        dH^T = W^T dZ^T      sgemm(N, N, in, n, out,  W (ld in),  dZ (ld out), dH (ld in))
 * then bias + ReLU, bias-gradient column sums, ReLU backward and softmax cross-entropy as small
 * kernels (trainer/mlp_kernels.h), everything on one non-blocking stream of the model. A layer is
 * reported done only after its dH is computed and the stream has drained (an engine may update W_l
 * then). In flight: at most one layer's work while backward runs; forward waits for the loss. */
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

struct mlp_gpu {
    mlp_shape_t s;
    size_t max_batch, n;
    int tf32, timeout_ms;
    cublasHandle_t blas;
    void *stream;
    float *params, *grads;              /* device arenas */
    float *x;                           /* device input, max_batch x dims[0] */
    float *act[MLP_MAX_LAYERS];         /* device activations (post-ReLU; logits last) */
    float *dz[2];                       /* device, max_batch x max width */
    int dz_cur;
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
    m->s = *shape;
    m->max_batch = max_batch;
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
    CHECK_GOTO(rc, dev_malloc((void **)&m->params, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->grads, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_memset(m->params, 0, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_memset(m->grads, 0, cnt * sizeof(float)), fail);
    CHECK_GOTO(rc, dev_malloc((void **)&m->x, B * shape->dims[0] * sizeof(float)), fail);
    for (int k = 0; k < 2; k++) CHECK_GOTO(rc, dev_malloc((void **)&m->dz[k], B * wmax * sizeof(float)), fail);
    for (int l = 0; l < shape->nlayers; l++)
        CHECK_GOTO(rc, dev_malloc((void **)&m->act[l], B * shape->dims[l + 1] * sizeof(float)), fail);
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
    dev_free((void **)&m->params);
    dev_free((void **)&m->grads);
    dev_free((void **)&m->x);
    for (int k = 0; k < 2; k++) dev_free((void **)&m->dz[k]);
    for (int l = 0; l < MLP_MAX_LAYERS; l++) dev_free((void **)&m->act[l]);
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

const mlp_shape_t *mlp_gpu_shape(const mlp_gpu_t *self) { return &self->s; }
float *mlp_gpu_params(mlp_gpu_t *self) { return self->params; }
float *mlp_gpu_grads(mlp_gpu_t *self) { return self->grads; }
float *mlp_gpu_input(mlp_gpu_t *self) { return self->x_h; }
const char *mlp_gpu_desc(const mlp_gpu_t *self) { return self->tf32 ? "cuBLAS TF32" : "cuBLAS f32"; }

int mlp_gpu_set_params(mlp_gpu_t *self, const float *host)
{
    /* the model's stream is idle before, and dev_memcpy is complete after (dev.h): the next forward's
     * first GEMM on that stream reads the uploaded parameters */
    CHECK(dev_stream_wait(self->stream, self->timeout_ms));
    return dev_memcpy(self->params, host, self->s.count * sizeof(float));
}

int mlp_gpu_get_params(mlp_gpu_t *self, float *host)
{
    CHECK(dev_stream_wait(self->stream, self->timeout_ms));
    return dev_memcpy(host, self->params, self->s.count * sizeof(float));
}

int mlp_gpu_get_grads(mlp_gpu_t *self, float *host)
{
    CHECK(dev_stream_wait(self->stream, self->timeout_ms));
    return dev_memcpy(host, self->grads, self->s.count * sizeof(float));
}

/* Row-major C[r x c] = op(A) op(B) in the three shapes above, as one column-major sgemm. */
static int s_gemm(mlp_gpu_t *m, cublasOperation_t ta, cublasOperation_t tb, size_t M, size_t N, size_t K,
                  const float *A, size_t lda, const float *B, size_t ldb, float *C, size_t ldc)
{
    const float one = 1.0f, zero = 0.0f;
    return s_blas(cublasSgemm(m->blas, ta, tb, (int)M, (int)N, (int)K, &one, A, (int)lda, B, (int)ldb, &zero, C,
                              (int)ldc), "cublasSgemm");
}

int mlp_gpu_forward(mlp_gpu_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss, size_t *correct)
{
    if (n == 0 || n > self->max_batch) return err_set(ERR_INVAL, "forward: batch %zu outside [1, %zu]", n, self->max_batch);
    const mlp_shape_t *s = &self->s;
    int L = s->nlayers;
    size_t C = s->dims[L];
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || (size_t)labels[i] >= C)
            return err_set(ERR_INVAL, "forward: label %d outside [0, %zu)", (int)labels[i], C);
    self->n = n;
    void *st = self->stream;
    if (labels != self->labels_h) memcpy(self->labels_h, labels, n * sizeof(int32_t));
    CHECK(dev_memcpy_async(self->x, self->x_h, n * s->dims[0] * sizeof(float), st));
    CHECK(dev_memcpy_async(self->labels_d, self->labels_h, n * sizeof(int32_t), st));
    const float *h = self->x;
    for (int l = 0; l < L; l++) {
        size_t in = s->dims[l], out = s->dims[l + 1];
        CHECK(s_gemm(self, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, self->params + s->w_off[l], in, h, in, self->act[l], out));
        CHECK(mlpk_bias_act(self->act[l], self->params + s->b_off[l], n, out, l < L - 1, st));
        h = self->act[l];
    }
    self->dz_cur = 0;
    CHECK(mlpk_softmax_xent(self->act[L - 1], self->labels_d, self->dz[0], self->loss_d, self->correct_d, n, C,
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
    const mlp_shape_t *s = &self->s;
    size_t n = self->n;
    if (n == 0) return err_set(ERR_STATE, "backward before forward");
    void *st = self->stream;
    int cur = self->dz_cur;
    for (int l = s->nlayers - 1; l >= 0; l--) {
        size_t in = s->dims[l], out = s->dims[l + 1];
        const float *dz = self->dz[cur];
        const float *h = l > 0 ? self->act[l - 1] : self->x;
        float *gw = self->grads + s->w_off[l], *gb = self->grads + s->b_off[l];
        CHECK(s_gemm(self, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, h, in, dz, out, gw, in));
        CHECK(mlpk_bias_grad(gb, dz, n, out, st));
        if (l > 0) {
            float *dh = self->dz[cur ^ 1];
            CHECK(s_gemm(self, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, self->params + s->w_off[l], in, dz, out, dh, in));
            CHECK(mlpk_relu_bwd(dh, self->act[l - 1], n * in, st));
            cur ^= 1;
        }
        if (done) {
            CHECK(dev_stream_wait(st, self->timeout_ms));
            int rc = done(ctx, l);
            if (rc) return rc < 0 ? rc : ERR_INTERRUPT;
        }
    }
    return dev_stream_wait(st, self->timeout_ms);
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
    const mlp_shape_t *s = &m->s;
    int L = s->nlayers, rc = 0;
    double *t = calloc((size_t)iters, sizeof(double));
    cudaEvent_t ev[MLP_MAX_LAYERS * 3 + 2];
    int nev = 0;
    if (!t) { rc = ERR_NOMEM; goto out; }
    for (; nev < L * 3 + 2; nev++)
        if (cudaEventCreate(&ev[nev]) != cudaSuccess) { rc = err_set(ERR_CUDA, "cudaEventCreate"); goto out; }
    if (layer_ms) memset(layer_ms, 0, sizeof(double) * MLP_MAX_LAYERS * 3);
    /* inputs: small values so nothing overflows (the numbers do not matter for timing) */
    CHECK_GOTO(rc, dev_memset(m->params, 0, s->count * sizeof(float)), out);
    CHECK_GOTO(rc, dev_memset(m->x, 0, b * s->dims[0] * sizeof(float)), out);
    for (int it = -warmup; it < iters; it++) {
        cudaStream_t st = (cudaStream_t)m->stream;
        int e = 0;
        cudaEventRecord(ev[e++], st);
        const float *h = m->x;
        for (int l = 0; l < L; l++) {
            size_t in = s->dims[l], out = s->dims[l + 1];
            CHECK_GOTO(rc, s_gemm(m, CUBLAS_OP_T, CUBLAS_OP_N, out, b, in, m->params + s->w_off[l], in, h, in, m->act[l], out), out);
            cudaEventRecord(ev[e++], st);
            h = m->act[l];
        }
        for (int l = L - 1; l >= 0; l--) {
            size_t in = s->dims[l], out = s->dims[l + 1];
            const float *hh = l > 0 ? m->act[l - 1] : m->x;
            CHECK_GOTO(rc, s_gemm(m, CUBLAS_OP_N, CUBLAS_OP_T, in, out, b, hh, in, m->dz[0], out, m->grads + s->w_off[l], in), out);
            cudaEventRecord(ev[e++], st);
            if (l > 0)
                CHECK_GOTO(rc, s_gemm(m, CUBLAS_OP_N, CUBLAS_OP_N, in, b, out, m->params + s->w_off[l], in, m->dz[0], out,
                                      m->dz[1], in), out);
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
