/* model.c: the MLP's forward and backward through cblas_sgemm.
 *
 * Layout: row-major batches; W_l is [out x in] (PyTorch). Per layer l with input H (n x in):
 *   forward   Z = H W^T (sgemm N,T) then one fused pass adds b and applies ReLU (not on the last layer)
 *   backward  dW = dZ^T H (sgemm T,N, written straight into the gradient arena, beta = 0)
 *             db = column sums of dZ (one pass)
 *             dH = dZ W     (sgemm N,N; skipped for layer 0) then dZ_prev = dH * (H > 0) in place
 * A layer is reported done only after dH is computed, because an engine may update W_l as soon as its
 * gradient bucket is submitted. Activations (post-ReLU) are kept per layer; dZ ping-pongs between two
 * scratch buffers. No per-element function calls in the loops. */
#include "trainer/model.h"
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "trainer/rng.h"

struct mlp {
    mlp_shape_t s;
    size_t max_batch;
    size_t n;                   /* rows of the last forward */
    float *params, *grads;
    float *x;                   /* input, max_batch x dims[0] */
    float *act[MLP_MAX_LAYERS]; /* act[l]: output of layer l (post-ReLU; logits for the last) */
    float *dz[2];               /* max_batch x max width */
    int    dz_cur;              /* which dz holds d(loss)/d(logits) after forward */
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
    mlp_t *m = calloc(1, sizeof *m);
    if (!m) return ERR_NOMEM;
    m->s = *shape;
    m->max_batch = max_batch;
    size_t wmax = 0;
    for (int l = 0; l <= shape->nlayers; l++) wmax = shape->dims[l] > wmax ? shape->dims[l] : wmax;
    int ok = (m->params = s_alloc(shape->count * sizeof(float))) && (m->grads = s_alloc(shape->count * sizeof(float))) &&
             (m->x = s_alloc(max_batch * shape->dims[0] * sizeof(float))) &&
             (m->dz[0] = s_alloc(max_batch * wmax * sizeof(float))) && (m->dz[1] = s_alloc(max_batch * wmax * sizeof(float)));
    for (int l = 0; ok && l < shape->nlayers; l++)
        ok = (m->act[l] = s_alloc(max_batch * shape->dims[l + 1] * sizeof(float))) != NULL;
    *self_p = m;
    if (!ok) {
        mlp_destroy(self_p);
        return err_set(ERR_NOMEM, "model: cannot allocate %zu parameters for batch %zu", shape->count, max_batch);
    }
    return 0;
}

void mlp_destroy(mlp_t **self_p)
{
    if (!self_p || !*self_p) return;
    mlp_t *m = *self_p;
    free(m->params); free(m->grads); free(m->x); free(m->dz[0]); free(m->dz[1]);
    for (int l = 0; l < m->s.nlayers; l++) free(m->act[l]);
    free(m);
    *self_p = NULL;
}

void mlp_init(mlp_t *self, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed, 0x6d6c70 /* "mlp" */);
    for (int l = 0; l < self->s.nlayers; l++) {
        float bound = 1.0f / sqrtf((float)self->s.dims[l]);
        size_t nw = self->s.dims[l] * self->s.dims[l + 1];
        float *w = self->params + self->s.w_off[l], *b = self->params + self->s.b_off[l];
        for (size_t i = 0; i < nw; i++) w[i] = (2.0f * rng_uniform(&r) - 1.0f) * bound;
        for (size_t i = 0; i < self->s.dims[l + 1]; i++) b[i] = (2.0f * rng_uniform(&r) - 1.0f) * bound;
    }
}

const mlp_shape_t *mlp_shape(const mlp_t *self) { return &self->s; }
float *mlp_params(mlp_t *self) { return self->params; }
float *mlp_grads(mlp_t *self) { return self->grads; }
float *mlp_input(mlp_t *self) { return self->x; }

/* y[i][j] = max(0, y[i][j] + b[j]) (relu) or y[i][j] + b[j]. */
static void s_bias_act(float *restrict y, const float *restrict b, size_t n, size_t d, int relu)
{
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
}

int mlp_forward(mlp_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss, size_t *correct)
{
    if (n == 0 || n > self->max_batch) return err_set(ERR_INVAL, "forward: batch %zu outside [1, %zu]", n, self->max_batch);
    const mlp_shape_t *s = &self->s;
    int L = s->nlayers;
    self->n = n;
    const float *h = self->x;
    for (int l = 0; l < L; l++) {
        size_t in = s->dims[l], out = s->dims[l + 1];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)in, 1.0f, h, (int)in,
                    self->params + s->w_off[l], (int)in, 0.0f, self->act[l], (int)out);
        s_bias_act(self->act[l], self->params + s->b_off[l], n, out, l < L - 1);
        h = self->act[l];
    }
    /* softmax cross-entropy, mean over n; dlogits = (p - onehot) * loss_scale / n */
    size_t C = s->dims[L];
    const float *logits = self->act[L - 1];
    float *dz = self->dz[0];
    self->dz_cur = 0;
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
    const mlp_shape_t *s = &self->s;
    size_t n = self->n;
    if (n == 0) return err_set(ERR_STATE, "backward before forward");
    int cur = self->dz_cur;
    for (int l = s->nlayers - 1; l >= 0; l--) {
        size_t in = s->dims[l], out = s->dims[l + 1];
        const float *dz = self->dz[cur];
        const float *h = l > 0 ? self->act[l - 1] : self->x;
        float *gw = self->grads + s->w_off[l], *gb = self->grads + s->b_off[l];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)n, 1.0f, dz, (int)out, h,
                    (int)in, 0.0f, gw, (int)in);
        memcpy(gb, dz, out * sizeof(float));
        for (size_t i = 1; i < n; i++) {
            const float *restrict row = dz + i * out;
            float *restrict acc = gb;
            for (size_t j = 0; j < out; j++) acc[j] += row[j];
        }
        if (l > 0) {
            float *dh = self->dz[cur ^ 1];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)in, (int)out, 1.0f, dz, (int)out,
                        self->params + s->w_off[l], (int)in, 0.0f, dh, (int)in);
            size_t tot = n * in;
            const float *restrict a = self->act[l - 1];
            for (size_t i = 0; i < tot; i++) dh[i] = a[i] > 0.0f ? dh[i] : 0.0f;
            cur ^= 1;
        }
        if (done) {
            int rc = done(ctx, l);
            if (rc) return rc < 0 ? rc : ERR_INTERRUPT;
        }
    }
    return 0;
}
