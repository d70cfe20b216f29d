/* trainer.h: the shared trainer: one training loop that every engine runs under the same model, data,
 * sampler, optimizer configuration and loss scaling. Per step: gather the local batch, forward,
 * backward producing gradient buckets (--bucket-mb, DDP's layout: reverse layer order, a small first
 * bucket) that are handed to the engine with submit as each fills (so communication overlaps backward;
 * --no-overlap submits them all after backward), then wait for the engine to finish the step (it
 * averages the gradients and applies the optimizer). Every check_every steps the workers compare a
 * parameter checksum and fail loudly naming the ranks that differ. Without an engine (world 1 only)
 * the trainer runs core/optim.h itself: the reference the engines are checked against. */
#ifndef SB_TRAINER_H
#define SB_TRAINER_H
#include <stddef.h>
#include <stdint.h>
#include "core/comm.h"
#include "core/engine.h"
#include "trainer/model.h"

#define TRAINER_DEFAULT_MODEL "mlp:784-1024-1024-10"
#define TRAINER_DEFAULT_BATCH 256
#define TRAINER_DEFAULT_SYNTH_SAMPLES 16384
#define TRAINER_DEFAULT_BUCKET_MB 25.0
#define TRAINER_FIRST_BUCKET_BYTES (1024 * 1024)  /* torch.distributed._DEFAULT_FIRST_BUCKET_BYTES */

typedef struct trainer trainer_t;

typedef struct {
    const char *model;          /* NULL: TRAINER_DEFAULT_MODEL */
    const char *data;           /* NULL or "synthetic": the teacher task; else a path (data.h) */
    size_t   synth_samples;     /* 0: TRAINER_DEFAULT_SYNTH_SAMPLES */
    size_t   global_batch;      /* 0: TRAINER_DEFAULT_BATCH; split evenly across the workers */
    int      world, rank;       /* workers (the sampler's world) and this worker's index */
    optim_cfg_t optim;
    dtype_t  grad_dtype;        /* wire dtype of gradient buckets; f16/bf16 turn on loss scaling */
    double   bucket_mb;         /* <= 0: 25 (MiB, of f32 gradients, as DDP's bucket_cap_mb) */
    int      no_overlap;
    int      check_every;       /* 0: never */
    int      drop_last;
    uint64_t seed;
    int      timeout_ms;        /* engine waits and checksum exchanges; <= 0: 60000 */
    int      straggler_rank;    /* this worker sleeps straggler_ms per step when rank matches; -1 none */
    double   straggler_ms;
    comm_t  *comm;              /* for checksum exchanges (NULL: no checks) */
    int      device;            /* -1 (trainer_cfg_default): CPU model; >= 0: the model on this CUDA device
                                 * (trainer/model_gpu.h); the engine then gets device parameters */
    int      tf32;              /* GPU: let cuBLAS use TF32 tensor cores */
    /* An emulated real model (model names a workload, trainer/workload.h): no data and no arithmetic;
     * the device's compute is waited out against the clock and real gradient bytes reach the engine. */
    const char *emu_device;     /* device spec; NULL: WL_DEVICE_DEFAULT (workload.h) */
    double   shrink, dilate;    /* >= 1 (0 means 1): tensors / shrink, compute times x dilate */
} trainer_cfg_t;

void trainer_cfg_default(trainer_cfg_t *cfg);

typedef struct {
    uint64_t step;              /* 1-based number of the step just run */
    size_t   samples;           /* local batch this step */
    double   loss;              /* mean over the local batch */
    size_t   correct;
    int      skipped;           /* overflow: no update, loss scale lowered */
    float    loss_scale;        /* scale used for this step */
    double   step_ms, data_ms, compute_ms, comm_ms, wait_ms;
    double   sync_ms;           /* the whole engine wait() call: blocking + the optimizer update */
    double   cpu_ms;            /* emulated models: CPU time this process used during the step */
    int      nbuckets;
} trainer_step_t;

int  trainer_new(trainer_t **self_p, const trainer_cfg_t *cfg);
void trainer_destroy(trainer_t **self_p);
/* Hand the parameters to an engine (collective: every worker ends with rank 0's parameters). ops NULL:
 * local mode, the trainer runs the optimizer itself (world must be 1). Call once, after any resume. */
int  trainer_attach(trainer_t *self, const engine_ops_t *ops, engine_t *engine);
int  trainer_step(trainer_t *self, trainer_step_t *out);
/* Compare the parameter checksum across the workers now (collective over the workers). */
int  trainer_check(trainer_t *self);
uint64_t trainer_checksum(const trainer_t *self);
/* Checkpoints (ckpt.h). save: any rank may write (rank 0 in the harness). resume: before attach. */
int  trainer_save(trainer_t *self, const char *path);
/* 0 if trainer_save can write a complete checkpoint in this setup; else why not (ERR_UNSUP). */
int  trainer_can_save(const trainer_t *self);
int  trainer_resume(trainer_t *self, const char *path);

/* NULL for an emulated model. */
const mlp_shape_t *trainer_shape(const trainer_t *self);
/* The emulated model, or NULL when the trainer runs a real MLP. */
const struct emu *trainer_emu(const trainer_t *self);
size_t  trainer_param_count(const trainer_t *self);
/* Host parameters (on a GPU: a copy downloaded by this call; writes to it do not reach the device). */
float  *trainer_params(trainer_t *self);
size_t  trainer_local_batch(const trainer_t *self);
int     trainer_nbuckets(const trainer_t *self);
size_t  trainer_data_bytes(const trainer_t *self);
const char *trainer_data_name(const trainer_t *self);
uint64_t trainer_steps_done(const trainer_t *self);
float   trainer_loss_scale(const trainer_t *self);

#endif
