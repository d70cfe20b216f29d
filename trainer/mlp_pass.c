/* mlp_pass.c: the MLP's forward and backward skeleton (trainer/mlp_pass.h) over the device's GEMMs
 * and kernels. Per layer l with input H (n x in):
 *   forward   Z = H W^T, then bias (+ ReLU but on the last layer) in place: act[l]
 *   backward  dW = dZ^T H and db = column sums of dZ, straight into the gradient arena;
 *             dH = dZ W (skipped for layer 0), then dZ_prev = dH * (H > 0) in the other dz buffer
 * A layer is reported done only after its dH is computed (and complete on the device), because an
 * engine may update W_l as soon as its gradient bucket is submitted. */
#include "trainer/mlp_pass.h"
#include "core/err.h"

int mlp_pass_check_batch(const mlp_bufs_t *b, size_t n)
{
    if (n == 0 || n > b->max_batch) return err_set(ERR_INVAL, "forward: batch %zu outside [1, %zu]", n, b->max_batch);
    return 0;
}

int mlp_pass_forward(mlp_bufs_t *b, const mlp_kernels_t *k, void *ctx)
{
    const mlp_shape_t *s = &b->s;
    int L = s->nlayers;
    size_t n = b->n;
    const float *h = b->x;
    for (int l = 0; l < L; l++) {
        size_t in = s->dims[l], out = s->dims[l + 1];
        CHECK(k->gemm_fwd(ctx, n, in, out, h, b->params + s->w_off[l], b->act[l]));
        CHECK(k->bias_act(ctx, b->act[l], b->params + s->b_off[l], n, out, l < L - 1));
        h = b->act[l];
    }
    return 0;
}

int mlp_pass_backward(mlp_bufs_t *b, const mlp_kernels_t *k, void *ctx, mlp_layer_done_fn done, void *dctx)
{
    const mlp_shape_t *s = &b->s;
    size_t n = b->n;
    if (n == 0) return err_set(ERR_STATE, "backward before forward");
    int cur = b->dz_cur;
    for (int l = s->nlayers - 1; l >= 0; l--) {
        size_t in = s->dims[l], out = s->dims[l + 1];
        const float *dz = b->dz[cur];
        const float *h = l > 0 ? b->act[l - 1] : b->x;
        float *gw = b->grads + s->w_off[l], *gb = b->grads + s->b_off[l];
        CHECK(k->gemm_wgrad(ctx, n, in, out, dz, h, gw));
        CHECK(k->bias_grad(ctx, gb, dz, n, out));
        if (l > 0) {
            float *dh = b->dz[cur ^ 1];
            CHECK(k->gemm_dgrad(ctx, n, in, out, dz, b->params + s->w_off[l], dh));
            CHECK(k->relu_bwd(ctx, dh, b->act[l - 1], n * in));
            cur ^= 1;
        }
        if (done) {
            if (k->sync) CHECK(k->sync(ctx));
            int rc = done(dctx, l);
            if (rc) return rc < 0 ? rc : ERR_INTERRUPT;
        }
    }
    return k->sync ? k->sync(ctx) : 0;
}
