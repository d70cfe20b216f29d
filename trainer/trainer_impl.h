/* trainer_impl.h: the trainer's own state, shared by trainer.c (the loop) and trainer_state.c (checks, checkpoints). */
#ifndef SB_TRAINER_IMPL_H
#define SB_TRAINER_IMPL_H
/* Not part of the trainer's interface (trainer.h): only trainer/trainer*.c include this. */
#include "core/optim.h"
#include "core/optim_dev.h"
#include "trainer/amp.h"
#include "trainer/ckpt.h"
#include "trainer/data.h"
#include "trainer/emu.h"
#include "trainer/model_gpu.h"
#include "trainer/rng.h"
#include "trainer/sampler.h"
#include "trainer/trainer.h"

typedef struct {
    size_t lo, hi;      /* element range [lo, hi) */
    int    ready_layer; /* ready once backward of this layer is done */
} trainer_bucket_t;

struct trainer {
    trainer_cfg_t cfg;
    char          model_spec[128];
    mlp_t        *mlp;
    dataset_t    *data;
    sampler_t    *sampler;
    size_t        local_batch;
    int32_t      *labels;
    amp_t         amp;
    rng_t         rng;
    trainer_bucket_t   *buckets;
    int           nbuckets;
    int           next_bucket;     /* next to submit this step */
    void         *wire;            /* f16/bf16 gradients, count elements (NULL for f32) */
    const engine_ops_t *ops;
    engine_t     *engine;
    int           attached;
    optim_t      *optim;           /* local mode only */
    float        *pending_opt[CKPT_MAX_OPT]; /* optimizer state from a resume, applied at attach */
    int           pending_nopt;
    float        *pending_srv;     /* a resume's engine-held parameters (a PS's servers'), for attach */
    char          pending_layout[256];
    uint64_t      step, applied, nchecks;
    mlp_gpu_t    *gpu;             /* cfg.device >= 0: the model on the GPU (mlp keeps a host copy) */
    optim_dev_t  *dopt;            /* local mode on the GPU */
    uint64_t      tr_layer;        /* timeline: start of the current layer's backward (0 when off) */
    emu_t        *emu;             /* an emulated real model (then no mlp, data, sampler) */
};

/* GPU: bring the host copy of the parameters up to date (checksums, checkpoints, trainer_params). 0 or an error. */
int trainer_sync_host(const trainer_t *self);

#endif
