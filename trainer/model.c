/* model.c: the MLP's forward and backward through cblas_sgemm.
 *
 * Layout: row-major batches; W_l is [out x in] (PyTorch). The layer loops are trainer/mlp_pass.c's;
 * the CPU's pieces, per layer l with input H (n x in):
 *   forward   Z = H W^T (sgemm N,T) then one fused pass adds b and applies ReLU (not on the last layer)
 *   backward  dW = dZ^T H (sgemm T,N, written straight into the gradient arena, beta = 0)
 *             db = column sums of dZ (one pass)
 *             dH = dZ W     (sgemm N,N; skipped for layer 0) then dZ_prev = dH * (H > 0) in place
 * and the softmax cross-entropy after forward. No per-element function calls in the loops. */
#include "trainer/model.h"
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "trainer/mlp_pass.h"
#include "trainer/rng.h"

struct mlp {
    mlp_bufs_t b;               /* host buffers */
};

static void *s_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    memset(p, 0, bytes);
    return p;
}

int mlp_parse(const char *spec, mlp_shape_t *shape)
{
    if (!spec || !shape) return err_set(ERR_INVAL, "model: no spec");
    memset(shape, 0, sizeof *shape);
    const char *p = spec;
    if (!strncmp(p, "mlp:", 4)) p += 4;
    int nd = 0;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno || v < 1 || v > (1u << 20) || (*end && *end != '-'))
            return err_set(ERR_INVAL, "model '%s': expected mlp:W0-W1-...-Wn with widths in [1, 1048576]", spec);
        if (nd > MLP_MAX_LAYERS)
            return err_set(ERR_INVAL, "model '%s': at most %d layers", spec, MLP_MAX_LAYERS);
        shape->dims[nd++] = (size_t)v;
        p = *end ? end + 1 : end;
        if (*end == '-' && !*p) return err_set(ERR_INVAL, "model '%s': trailing '-'", spec);
    }
    if (nd < 2) return err_set(ERR_INVAL, "model '%s': need at least an input and an output width", spec);
    if (shape->dims[nd - 1] < 2) return err_set(ERR_INVAL, "model '%s': need at least 2 classes", spec);
    shape->nlayers = nd - 1;
    size_t off = 0;
    for (int l = 0; l < shape->nlayers; l++) {
        shape->w_off[l] = off;
        off += shape->dims[l] * shape->dims[l + 1];
        shape->b_off[l] = off;
        off += shape->dims[l + 1];
    }
    shape->count = off;
    return 0;
}

void mlp_format(const mlp_shape_t *s, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "mlp:");
    for (int i = 0; i <= s->nlayers && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? "-%zu" : "%zu", s->dims[i]);
}

double mlp_flops_per_sample(const mlp_shape_t *s)
{
    double f = 0;
    for (int l = 0; l < s->nlayers; l++) {
        double mn = (double)s->dims[l] * (double)s->dims[l + 1];
        f += 2 * mn * (l > 0 ? 3 : 2);
    }
    return f;
}

int mlp_new(mlp_t **self_p, const mlp_shape_t *shape, size_t max_batch)
{
    if (!self_p || !shape || shape->nlayers < 1 || max_batch == 0) return err_set(ERR_INVAL, "mlp_new: bad arguments");
    mlp_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    mlp_bufs_t *m = &self->b;
    m->s = *shape;
    m->max_batch = max_batch;
    size_t wmax = 0;
    for (int l = 0; l <= shape->nlayers; l++) wmax = shape->dims[l] > wmax ? shape->dims[l] : wmax;
    int ok = (m->params = s_alloc(shape->count * sizeof(float))) && (m->grads = s_alloc(shape->count * sizeof(float))) &&
             (m->x = s_alloc(max_batch * shape->dims[0] * sizeof(float))) &&
             (m->dz[0] = s_alloc(max_batch * wmax * sizeof(float))) && (m->dz[1] = s_alloc(max_batch * wmax * sizeof(float)));
    for (int l = 0; ok && l < shape->nlayers; l++)
        ok = (m->act[l] = s_alloc(max_batch * shape->dims[l + 1] * sizeof(float))) != NULL;
    *self_p = self;
    if (!ok) {
        mlp_destroy(self_p);
        return err_set(ERR_NOMEM, "model: cannot allocate %zu parameters for batch %zu", shape->count, max_batch);
    }
    return 0;
}

void mlp_destroy(mlp_t **self_p)
{
    if (!self_p || !*self_p) return;
    mlp_bufs_t *m = &(*self_p)->b;
    free(m->params); free(m->grads); free(m->x); free(m->dz[0]); free(m->dz[1]);
    for (int l = 0; l < m->s.nlayers; l++) free(m->act[l]);
    free(*self_p);
    *self_p = NULL;
}

void mlp_init(mlp_t *self, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed, 0x6d6c70 /* "mlp" */);
    const mlp_shape_t *s = &self->b.s;
    for (int l = 0; l < s->nlayers; l++) {
        float bound = 1.0f / sqrtf((float)s->dims[l]);
        size_t nw = s->dims[l] * s->dims[l + 1];
        float *w = self->b.params + s->w_off[l], *b = self->b.params + s->b_off[l];
        for (size_t i = 0; i < nw; i++) w[i] = (2.0f * rng_uniform(&r) - 1.0f) * bound;
        for (size_t i = 0; i < s->dims[l + 1]; i++) b[i] = (2.0f * rng_uniform(&r) - 1.0f) * bound;
    }
}

const mlp_shape_t *mlp_shape(const mlp_t *self) { return &self->b.s; }
float *mlp_params(mlp_t *self) { return self->b.params; }
float *mlp_grads(mlp_t *self) { return self->b.grads; }
float *mlp_input(mlp_t *self) { return self->b.x; }

/* Row-major C[M x N] = op(A) op(B) (beta = 0: overwrites C). */
static void s_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                   const float *B, size_t ldb, float *C, size_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}

/* Z = H W^T: sgemm N,T. */
static int s_gemm_fwd(void *ctx, size_t n, size_t in, size_t out, const float *h, const float *w, float *z)
{
    (void)ctx;
    s_gemm(CblasNoTrans, CblasTrans, n, out, in, h, in, w, in, z, out);
    return 0;
}

/* y[i][j] = max(0, y[i][j] + b[j]) (relu) or y[i][j] + b[j]. */
static int s_bias_act(void *ctx, float *restrict y, const float *restrict b, size_t n, size_t d, int relu)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        float *restrict row = y + i * d;
        if (relu)
            for (size_t j = 0; j < d; j++) {
                float v = row[j] + b[j];
                row[j] = v > 0.0f ? v : 0.0f;
            }
        else
            for (size_t j = 0; j < d; j++) row[j] += b[j];
    }
    return 0;
}

/* dW = dZ^T H: sgemm T,N. */
static int s_gemm_wgrad(void *ctx, size_t n, size_t in, size_t out, const float *dz, const float *h, float *gw)
{
    (void)ctx;
    s_gemm(CblasTrans, CblasNoTrans, out, in, n, dz, out, h, in, gw, in);
    return 0;
}

/* db = column sums of dZ, rows in order. */
static int s_bias_grad(void *ctx, float *gb, const float *dz, size_t n, size_t out)
{
    (void)ctx;
    memcpy(gb, dz, out * sizeof(float));
    for (size_t i = 1; i < n; i++) {
        const float *restrict row = dz + i * out;
        float *restrict acc = gb;
        for (size_t j = 0; j < out; j++) acc[j] += row[j];
    }
    return 0;
}

/* dH = dZ W: sgemm N,N. */
static int s_gemm_dgrad(void *ctx, size_t n, size_t in, size_t out, const float *dz, const float *w, float *dh)
{
    (void)ctx;
    s_gemm(CblasNoTrans, CblasNoTrans, n, in, out, dz, out, w, in, dh, in);
    return 0;
}

static int s_relu_bwd(void *ctx, float *dh, const float *restrict a, size_t count)
{
    (void)ctx;
    for (size_t i = 0; i < count; i++) dh[i] = a[i] > 0.0f ? dh[i] : 0.0f;
    return 0;
}

static const mlp_kernels_t s_cpu = {
    .gemm_fwd = s_gemm_fwd, .bias_act = s_bias_act, .gemm_wgrad = s_gemm_wgrad, .bias_grad = s_bias_grad,
    .gemm_dgrad = s_gemm_dgrad, .relu_bwd = s_relu_bwd, .sync = NULL,
};

int mlp_forward(mlp_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss, size_t *correct)
{
    int rc = mlp_pass_check_batch(&self->b, n);
    if (rc) return rc;
    const mlp_shape_t *s = &self->b.s;
    int L = s->nlayers;
    self->b.n = n;
    CHECK(mlp_pass_forward(&self->b, &s_cpu, self));
    /* softmax cross-entropy, mean over n; dlogits = (p - onehot) * loss_scale / n */
    size_t C = s->dims[L];
    const float *logits = self->b.act[L - 1];
    float *dz = self->b.dz[0];
    self->b.dz_cur = 0;
    double sum = 0;
    size_t ok = 0;
    float g = loss_scale / (float)n;
    for (size_t i = 0; i < n; i++) {
        const float *z = logits + i * C;
        float *d = dz + i * C;
        int32_t y = labels[i];
        if (y < 0 || (size_t)y >= C) return err_set(ERR_INVAL, "forward: label %d outside [0, %zu)", (int)y, C);
        float mx = z[0];
        size_t am = 0;
        for (size_t j = 1; j < C; j++)
            if (z[j] > mx) { mx = z[j]; am = j; }
        float se = 0;
        for (size_t j = 0; j < C; j++) {
            d[j] = expf(z[j] - mx);
            se += d[j];
        }
        float inv = 1.0f / se;
        for (size_t j = 0; j < C; j++) d[j] *= inv * g;
        d[y] -= g;
        sum += (double)(logf(se) - (z[y] - mx));
        ok += am == (size_t)y;
    }
    if (loss) *loss = sum / (double)n;
    if (correct) *correct = ok;
    return 0;
}

int mlp_backward(mlp_t *self, mlp_layer_done_fn done, void *ctx)
{
    return mlp_pass_backward(&self->b, &s_cpu, self, done, ctx);
}
