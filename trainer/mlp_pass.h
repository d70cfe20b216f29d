/* mlp_pass.h: the MLP's forward and backward skeleton, shared by the CPU model (trainer/model.c) and
 * the GPU model (trainer/model_gpu_cuda.c): the buffers both keep, the layer order, which buffer each
 * step reads and writes (activations per layer, d(loss)/dZ ping-ponging between two scratch buffers)
 * and the layer-done protocol of backward. The device supplies the GEMMs and the small kernels
 * (mlp_kernels_t); every matrix is row-major, on that device, W_l is [out x in] (PyTorch). */
#ifndef SB_TRAINER_MLP_PASS_H
#define SB_TRAINER_MLP_PASS_H
#include <stddef.h>
#include "trainer/model.h"

typedef struct {
    mlp_shape_t s;
    size_t max_batch;
    size_t n;                   /* rows of the last forward */
    float *params, *grads;      /* arenas */
    float *x;                   /* input, max_batch x dims[0] */
    float *act[MLP_MAX_LAYERS]; /* act[l]: output of layer l (post-ReLU; logits for the last) */
    float *dz[2];               /* max_batch x max width */
    int    dz_cur;              /* which dz holds d(loss)/d(logits) after forward */
} mlp_bufs_t;

/* The device's pieces; ctx is the model. A negative return (an error code) ends the pass. */
typedef struct {
    /* Z[n x out] = H[n x in] W^T */
    int (*gemm_fwd)(void *ctx, size_t n, size_t in, size_t out, const float *h, const float *w, float *z);
    /* y[i][j] = relu ? max(0, y[i][j] + b[j]) : y[i][j] + b[j]; y is n x d */
    int (*bias_act)(void *ctx, float *y, const float *b, size_t n, size_t d, int relu);
    /* dW[out x in] = dZ[n x out]^T H[n x in] (overwrites) */
    int (*gemm_wgrad)(void *ctx, size_t n, size_t in, size_t out, const float *dz, const float *h, float *gw);
    /* gb[j] = sum over rows i < n of dz[i][j], in row order (overwrites) */
    int (*bias_grad)(void *ctx, float *gb, const float *dz, size_t n, size_t out);
    /* dH[n x in] = dZ[n x out] W */
    int (*gemm_dgrad)(void *ctx, size_t n, size_t in, size_t out, const float *dz, const float *w, float *dh);
    /* dh[i] = a[i] > 0 ? dh[i] : 0 for i < count */
    int (*relu_bwd)(void *ctx, float *dh, const float *a, size_t count);
    /* waits until the pieces queued so far are complete; NULL where they are complete on return */
    int (*sync)(void *ctx);
} mlp_kernels_t;

/* ERR_INVAL unless n is in [1, max_batch]. */
int mlp_pass_check_batch(const mlp_bufs_t *b, size_t n);
/* Every layer's Linear (+ ReLU but on the last) on the first b->n rows of x, into act[]; the loss is
 * the caller's (from act[nlayers - 1] into dz[dz_cur]). */
int mlp_pass_forward(mlp_bufs_t *b, const mlp_kernels_t *k, void *ctx);
/* Backward from dz[dz_cur]: writes every gradient; layers in reverse order, done(dctx, l) once layer
 * l's dH is computed (and, with k->sync, complete), since an engine may update W_l then. Nonzero from
 * done aborts (a positive value becomes ERR_INTERRUPT). */
int mlp_pass_backward(mlp_bufs_t *b, const mlp_kernels_t *k, void *ctx, mlp_layer_done_fn done, void *dctx);

#endif
