/* optim.h: the optimizers (SGD with momentum and weight decay, Adam) that allreduce workers and
 * parameter servers both call, on any contiguous range of the parameters. It lives in core/ because
 * engines (below the trainer) run it: PS servers on their shards, ring/tree on the whole arena. */
#ifndef SB_OPTIM_H
#define SB_OPTIM_H
#include <stddef.h>
#include <stdint.h>

typedef enum { OPT_SGD = 0, OPT_ADAM = 1 } optim_kind_t;

typedef struct {
    optim_kind_t kind;
    float lr;
    float momentum;       /* SGD */
    float weight_decay;   /* both (Adam: L2 added to the gradient, as torch.optim.Adam) */
    float beta1, beta2, eps; /* Adam */
} optim_cfg_t;

typedef struct optim optim_t;

/* State for `count` parameters (momentum buffer / Adam moments), zero-initialised. */
int    optim_new(optim_t **self_p, const optim_cfg_t *cfg, size_t count);
void   optim_destroy(optim_t **self_p);
/* Update params[0..count) (which are elements [offset, offset+count) of this optimizer's range) with
 * grad (f32) * grad_scale, at learning rate lr, as step number step (1-based, for Adam's bias
 * correction). */
int    optim_step(optim_t *self, float *params, const float *grad, size_t offset, size_t count,
                  float grad_scale, float lr, uint64_t step);
size_t optim_state_bytes(const optim_t *self);
/* Raw state for checkpoints: nbuf buffers of count floats each (SGD with momentum: 1, SGD without: 0,
 * Adam: 2 = first and second moments). bufs (may be NULL) needs room for OPTIM_MAX_BUFS pointers. */
#define OPTIM_MAX_BUFS 2
int    optim_state(optim_t *self, float **bufs, int *nbuf, size_t *count);
void   optim_cfg_default(optim_cfg_t *cfg, optim_kind_t kind);
int    optim_parse(const char *s, optim_cfg_t *cfg);   /* "sgd", "sgd:lr=0.1,momentum=0.9", "adam:lr=1e-3" */

#endif
