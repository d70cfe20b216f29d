/* emu.h: the emulated model of a real workload (trainer/workload.h): a parameter arena and gradient
 * buffers of the profile's real sizes (divided by --shrink), laid out in backward order, the
 * DDP-style buckets over it, and the device's step schedule (when each bucket's gradients are ready,
 * dilated by --dilate). The trainer waits out the compute against the clock instead of burning CPU,
 * so the host's cores stay free for the engines moving the real bytes. */
#ifndef SB_EMU_H
#define SB_EMU_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/engine.h"
#include "core/optim.h"
#include "trainer/workload.h"

typedef struct emu emu_t;

typedef struct {
    const char *model;          /* workload name or .tsv path */
    const char *device;         /* device spec (workload.h); NULL: WL_DEVICE_DEFAULT */
    size_t local_batch;
    double shrink;              /* >= 1: tensors and link rates divided by it */
    double dilate;              /* >= 1: compute times multiplied by it (link rates divided by it) */
    dtype_t grad_dtype;
    double bucket_mb;           /* bucket cap in MiB of f32 gradients before shrink; <= 0: 25 */
    size_t first_bucket_bytes;  /* DDP's small first bucket (before shrink); 0: 1 MiB */
    int rank;
    uint64_t seed;
} emu_cfg_t;

int  emu_new(emu_t **self_p, const emu_cfg_t *cfg);
void emu_destroy(emu_t **self_p);

const workload_t *emu_workload(const emu_t *self);
const wl_device_t *emu_device(const emu_t *self);
float  *emu_params(emu_t *self);           /* count f32, backward order */
size_t  emu_count(const emu_t *self);
/* This rank's gradients in grad_dtype: a fixed rank-dependent pattern of small dyadic values, so their sum
 * over ranks is exact in f32 and every rank's update can be checked. */
const void *emu_grads(const emu_t *self);
int     emu_nbuckets(const emu_t *self);
/* Bucket b: element range [*offset, *offset + *count) and when its last gradient is ready (seconds
 * from the start of the step, dilated). */
void    emu_bucket(const emu_t *self, int b, size_t *offset, size_t *count, double *ready_s);
double  emu_forward_s(const emu_t *self);  /* dilated */
double  emu_compute_s(const emu_t *self);  /* forward + backward, dilated */

/* The device's optimizer update over the whole (unshrunk) model, dilated: memory-bound bytes per
 * parameter for the optimizer (SGD 12, with momentum 20, Adam 28) over the device's bandwidth. */
double  emu_update_s(const emu_t *self, const optim_cfg_t *optim);

/* Sleep until now_ns()-clock time t_ns (absolute, CLOCK_MONOTONIC); returns at once if passed. */
void emu_sleep_until(uint64_t t_ns);

/* One emulated step. With an engine: step_begin, then each bucket is submitted once the clock reaches
 * its ready time (all at the end of backward with no_overlap), then wait (the engine reduces the real
 * bytes and applies the optimizer). Without one (world 1): the compute is waited out and the local
 * optimizer applied. Compute is slept, never burned. */
typedef struct {
    const engine_ops_t *ops;   /* NULL: local mode */
    engine_t *engine;
    optim_t  *optim;           /* local mode */
    uint64_t  step;            /* optimizer steps applied so far + 1 */
    float     lr;
    int       timeout_ms;
    double    straggler_ms;    /* extra compute this step (--straggler on this rank) */
    int       no_overlap;
    double    update_s;        /* the device's optimizer update, waited out when the engine leaves it to the
                                * worker (reduce_only honoured); dilated */
} emu_step_in_t;

typedef struct {
    double step_ms, compute_ms, comm_ms, wait_ms, sync_ms;
    double cpu_ms;             /* CPU time this process used during the step (all threads) */
    double update_ms;          /* the modelled device update (0 where the engine updated for real) */
    int    skipped;
} emu_step_out_t;

int emu_step(emu_t *self, const emu_step_in_t *in, emu_step_out_t *out);

#endif
