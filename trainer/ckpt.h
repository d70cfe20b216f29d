/* ckpt.h: training checkpoints: one file holding the parameters, the optimizer state, the step
 * counters, the RNG, sampler and loss-scaler state, and a checksum over all of it. Written atomically
 * (temporary file in the same directory, fsync, rename, fsync of the directory): a crash leaves
 * either the old checkpoint or the new one, never half of one. */
#ifndef SB_TRAINER_CKPT_H
#define SB_TRAINER_CKPT_H
#include <stddef.h>
#include <stdint.h>

#define CKPT_MAX_OPT 4

typedef struct {
    char     model[128];         /* "mlp:784-1024-1024-10" */
    char     data[64];           /* dataset name */
    uint64_t step;               /* steps run */
    uint64_t applied;            /* optimizer steps applied (step minus skipped) */
    uint64_t epoch, offset;      /* sampler position */
    uint64_t seed;
    uint32_t world, drop_last;   /* sampler shape it was written with */
    uint64_t global_batch;
    uint64_t rng[4];             /* trainer generator */
    float    amp_scale;
    uint32_t amp_good;
    uint64_t amp_overflows;
    uint32_t optim_kind;
    uint32_t grad_dtype;
    /* payload */
    size_t   count;              /* parameters */
    float   *params;
    int      nopt;               /* optimizer buffers, each count floats */
    float   *opt[CKPT_MAX_OPT];
} ckpt_t;

/* Writes c (params and opt[] are read). */
int  ckpt_write(const char *path, const ckpt_t *c);
/* Reads and verifies (magic, version, sizes, checksum); params and opt[] are malloc'd: free with
 * ckpt_free. A missing, truncated or corrupted file gives ERR_IO / ERR_CORRUPT with the reason. */
int  ckpt_read(const char *path, ckpt_t *c);
/* Before training: 0 when a checkpoint can be written at path (its directory exists and is writable,
 * and path, if it exists, is a regular file), else ERR_IO / ERR_INVAL saying why, so a run never
 * trains only to lose its steps to a late check. */
int  ckpt_check_path(const char *path);
void ckpt_free(ckpt_t *c);

/* Fast 64-bit hash of a byte range (4 independent multiply-xor lanes; not cryptographic). */
uint64_t ckpt_hash(const void *buf, size_t len, uint64_t seed);

#endif
