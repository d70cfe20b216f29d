/* ckpt.h: training checkpoints: one file holding the parameters, the optimizer state, the step
 * counters, the RNG, sampler and loss-scaler state, and a checksum over all of it. Written atomically
 * (temporary file in the same directory, fsync, rename, fsync of the directory): a crash leaves
 * either the old checkpoint or the new one, never half of one. */
#ifndef SB_TRAINER_CKPT_H
#define SB_TRAINER_CKPT_H
#include <stddef.h>
#include <stdint.h>

struct engine;
struct engine_ops;

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
    float    lr;                 /* the learning rate it was trained at (--optim lr=) */
    int      has_lr;             /* read: the file records lr (version 2; version 1 did not) */
    /* payload */
    size_t   count;              /* parameters */
    float   *params;
    int      nopt;               /* optimizer buffers, each count floats */
    float   *opt[CKPT_MAX_OPT];
    /* read from a manifest (ckpt_load): the engine's own state, gathered from its shards */
    float   *srv_params;         /* the engine's copy of the parameters (count floats); NULL: none saved */
    uint64_t srv_applied;        /* the shards' optimizer step count */
    char     layout[256];        /* the engine's layout when saved ("" for a single file) */
    char     engine[32];         /* the engine that wrote the shards ("" for a single file) */
    uint64_t file_hash;          /* read: the hash stored at the end of the (workers') file */
} ckpt_t;

/* Writes c (params and opt[] are read); _hash also gives the hash stored at the file's end. */
int  ckpt_write(const char *path, const ckpt_t *c);
int  ckpt_write_hash(const char *path, const ckpt_t *c, uint64_t *hash);

/* ckpt_set.c: a checkpoint with engine-held state (a PS's servers). PATH is then a manifest, written
 * last and atomically, naming the workers' file (PATH.<tag>.w: c as ckpt_write writes it) and the
 * engine's files (its state_save: PATH.<tag>.s<i>, one shard per server), each with its size and hash,
 * and the engine's layout. <tag> is new for every save, so until the new manifest is renamed over PATH
 * the old one and every file it names are intact (a crash or a full disk leaves the previous checkpoint
 * usable); once it is, the old checkpoint's files are removed. Worker 0 only, between steps. */
int  ckpt_save_set(const char *path, const ckpt_t *c, const struct engine_ops *ops, struct engine *engine);
/* Reads the checkpoint at path, a single file (ckpt_read) or a manifest: then the workers' file and every
 * shard it names are read and verified (a missing or corrupt one is refused naming the file) and gathered
 * into flat vectors: c->srv_params, c->opt[0..nopt) (the servers' optimizer state), c->srv_applied. */
int  ckpt_load(const char *path, ckpt_t *c);
/* 0 when nopt optimizer buffers are what optimizer cfg (a core/optim.h optim_cfg_t) keeps, else ERR_MISMATCH
 * naming engine: a resume must not hand another optimizer's state to an engine. */
int  ckpt_check_nopt(const void *cfg, int nopt, const char *engine);
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
