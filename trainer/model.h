/* model.h: the trainer's MLP (Linear + ReLU layers, softmax cross-entropy on the last) with forward
 * and backward on the CPU through cblas_sgemm. Parameters and gradients each live in one contiguous
 * f32 arena laid out in forward order (W0, b0, W1, b1, ...; W as PyTorch's [out x in]), so a layer's
 * parameters are one contiguous range and gradient buckets are plain views of the gradient arena. */
#ifndef SB_TRAINER_MODEL_H
#define SB_TRAINER_MODEL_H
#include <stddef.h>
#include <stdint.h>

#define MLP_MAX_LAYERS 16

typedef struct {
    int    nlayers;                     /* Linear layers */
    size_t dims[MLP_MAX_LAYERS + 1];    /* dims[0] inputs ... dims[nlayers] classes */
    size_t w_off[MLP_MAX_LAYERS];       /* element offset of W_l in the arena */
    size_t b_off[MLP_MAX_LAYERS];       /* element offset of b_l */
    size_t count;                       /* parameters in all */
} mlp_shape_t;

/* "mlp:784-1024-1024-10" (the "mlp:" prefix is optional): at least two widths, each in [1, 1<<20]. */
int mlp_parse(const char *spec, mlp_shape_t *shape);
/* Writes "mlp:784-1024-1024-10" into buf. */
void mlp_format(const mlp_shape_t *shape, char *buf, size_t len);
/* Range [lo, hi) of layer l's parameters in the arena. */
static inline size_t mlp_layer_lo(const mlp_shape_t *s, int l) { return s->w_off[l]; }
static inline size_t mlp_layer_hi(const mlp_shape_t *s, int l) { return s->b_off[l] + s->dims[l + 1]; }
/* Multiply-adds of one sample's forward + backward (input-gradient of layer 0 not computed). */
double mlp_flops_per_sample(const mlp_shape_t *s);

typedef struct mlp mlp_t;

/* Allocates the parameter and gradient arenas (64-byte aligned) and activations for up to max_batch
 * samples. Parameters start at zero: call mlp_init. */
int  mlp_new(mlp_t **self_p, const mlp_shape_t *shape, size_t max_batch);
void mlp_destroy(mlp_t **self_p);
/* PyTorch nn.Linear's default init (W, b ~ U(-1/sqrt(in), 1/sqrt(in))) from a 64-bit seed. */
void mlp_init(mlp_t *self, uint64_t seed);

const mlp_shape_t *mlp_shape(const mlp_t *self);
float *mlp_params(mlp_t *self);
float *mlp_grads(mlp_t *self);
/* Where the caller writes a batch: max_batch x dims[0] floats, row-major. */
float *mlp_input(mlp_t *self);

/* Forward on the first n rows of mlp_input with integer labels; returns the mean cross-entropy over
 * the n samples in *loss (unscaled) and the number of correct argmax predictions in *correct (may be
 * NULL). Keeps d(loss * loss_scale)/d(logits) for backward. Labels outside [0, classes) -> ERR_INVAL. */
int  mlp_forward(mlp_t *self, size_t n, const int32_t *labels, float loss_scale, double *loss,
                 size_t *correct);

/* Called during backward as soon as layer l's gradients are final and its weights are no longer read
 * (so an engine may update them); layers arrive in reverse order. Nonzero return aborts backward. */
typedef int (*mlp_layer_done_fn)(void *ctx, int layer);
/* Backward for the last forward: writes every gradient (overwrites, no accumulation). */
int  mlp_backward(mlp_t *self, mlp_layer_done_fn done, void *ctx);

#endif
