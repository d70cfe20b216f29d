/* engine.h: the one contract between the trainer/bench and the synchronization engines
 * (every engine directory). The trainer attaches its parameters once, then every step submits gradient buckets as
 * backward produces them (non-blocking) and waits at the end; when wait returns, parameters are
 * updated (every worker holds the same values in sync modes). `allreduce` is the raw collective for
 * `harness bench`. Each engine exports one const engine_ops_t; optional entries may be NULL. */
#ifndef SB_ENGINE_H
#define SB_ENGINE_H
#include <stddef.h>
#include <stdint.h>
#include "core/comm.h"
#include "core/dtype.h"
#include "core/optim.h"
#include "core/sched.h"

typedef struct engine engine_t;

typedef struct {
    int    device;            /* -1: host buffers; >= 0: CUDA device of this rank's buffers */
    const char *impl;         /* engine-specific implementation choice ("host", "nccl", "gpu", ...); NULL = default */
    int    timeout_ms;        /* every blocking call inside gives up after this */
    size_t seg_bytes;         /* pipelining segment; 0 = engine default */
    int    nworkers;          /* ranks [0, nworkers) train; ranks >= nworkers are the engine's extra ranks */
    const void *opts;         /* the engine's own options (its opts_size bytes, see engine_opt_t); NULL = defaults */
    double size_scale;        /* > 1: the tensors are an emulation's, shrunk by this factor: size constants the
                               * engine tunes for real tensors (the PS's default partition) shrink with them, so
                               * the pipelining granularity relative to the model stays the real system's; 0 = 1 */
} engine_cfg_t;

/* One engine-specific command-line option: the harness offers "--NAME [VALUE]" for every entry of an
 * engine's table, prints the help text from it and hands the value to the engine's opt_set. */
typedef struct {
    const char *name;         /* long flag without "--" */
    int         has_value;    /* 1: takes a value; 0: a switch (opt_set gets value NULL) */
    const char *metavar;      /* value placeholder in the help text ("S", "M", ...) */
    const char *help;         /* one help line */
    const char *want;         /* what a valid value is, for error messages */
} engine_opt_t;

/* A named counter an engine reports beside the common statistics (e.g. messages rejected). */
#define ENGINE_MAX_COUNTERS 8
typedef struct {
    const char *name;
    uint64_t    value;
} engine_counter_t;

/* A resume's state for an engine that holds state of its own (state_save below): flat over the arena, as
 * the parameters; worker 0's copy is the one used (the others may pass NULL). */
#define ENGINE_MAX_OPT 4
typedef struct {
    const float *params;      /* the engine's own copy of the parameters (a PS's servers': in async modes they
                               * differ from the workers'); NULL: param_set_t.params */
    int          nopt;        /* optimizer buffers, count floats each, in optim_state's order (momentum; Adam's
                               * first and second moments); 0: none */
    const float *opt[ENGINE_MAX_OPT];
    uint64_t     applied;     /* optimizer steps applied so far */
    const char  *layout;      /* the saved layout (engine_saved_t.layout), for the engine to say it re-shards */
} engine_restore_t;

/* What the trainer hands over once: the flat f32 master parameters (contiguous arena) and how to
 * update them. Engines run the optimizer locally or on their own extra ranks, with optim.h. */
typedef struct {
    float  *params;           /* count f32 master weights (device pointer when cfg.device >= 0) */
    size_t  count;
    dtype_t grad_dtype;       /* dtype of submitted gradient buckets */
    optim_cfg_t optim;
    const engine_restore_t *restore; /* a resume: start from this state (engines with state_save; NULL: fresh) */
} param_set_t;

/* The files state_save wrote (each whole or not at all) and the layout they were written in. */
typedef struct {
    char     path[1024];
    uint64_t bytes, hash;     /* its size and the hash stored at its end (core/afile.h) */
} engine_file_t;
typedef struct {
    char     layout[256];     /* e.g. "ps servers=2 dedicated partitions=7 part_elems=1048576 local_agg=0 mode=sync" */
    int      nfiles;
    engine_file_t *files;     /* malloc'd: the caller frees it */
} engine_saved_t;

/* A view of a contiguous gradient range [offset, offset+count) of the parameter arena. */
typedef struct {
    const void *grad;         /* count elements of grad_dtype */
    size_t offset;            /* element offset in the parameter arena */
    size_t count;
    int    index;             /* bucket number within the step (0 = first submitted) */
} bucket_t;

/* Per-step input: loss-scale inverse (AMP; 1 otherwise) and the learning rate for this step. */
typedef struct {
    uint64_t step;            /* optimizer steps applied so far + 1 (Adam's t); 0: the engine counts */
    float    inv_scale;
    float    lr;
    int      reduce_only;     /* 1: an engine that updates on the worker may only average the gradients and
                               * leave the parameters (an emulated device's update is modelled instead) */
} step_ctx_t;

typedef struct {
    int    skipped;           /* 1: non-finite gradients, step skipped (AMP overflow) */
    double comm_ms;           /* time spent moving/reducing data this step */
    double wait_ms;           /* time wait() blocked */
    int    update_left;       /* 1: reduce_only was honoured, the parameters were not updated */
} step_out_t;

typedef struct {
    uint64_t bytes_sent, bytes_received;
    size_t   mem_engine_bytes;      /* bytes the engine holds (buffers, shards, optimizer state) */
    size_t   mem_engine_peak_bytes;
    double   comm_ms_total;
    const char *impl;               /* implementation actually running */
    const char *transport;          /* what carries the engine's bytes ("shm", "tcp", "zmq-ipc", "nccl",
                                     * "mpi"...); NULL: the communicator's transport (tp_kind) */
    const char *algo;               /* algorithm of the latest collective, when the engine picks one per call
                                     * (NCCL-style: e.g. the ring's "ring" or "oneshot"); NULL: not stated */
    engine_counter_t counters[ENGINE_MAX_COUNTERS]; /* engine-specific counters, ncounters of them */
    int      ncounters;
} engine_stats_t;

/* The value of the counter called name in st (0 when the engine reports none by that name). */
uint64_t engine_counter(const engine_stats_t *st, const char *name);
/* Append a counter to st (ignored beyond ENGINE_MAX_COUNTERS). */
void engine_counter_add(engine_stats_t *st, const char *name, uint64_t value);

typedef struct engine_ops {
    const char *name;
    const char *impls;        /* the engine_cfg_t.impl choices for help ("host|nccl"); NULL: none */
    /* Options: a table ended by a NULL name (NULL: none); the options live in a blob of opts_size
     * bytes that opts_init fills with defaults, opt_set sets one option in (value NULL for a switch;
     * 0 or ERR_INVAL) and opts_check validates as a whole (0 or ERR_INVAL with err_set detail). */
    const engine_opt_t *options;
    size_t opts_size;
    void (*opts_init)(void *opts);
    int  (*opt_set)(void *opts, const char *name, const char *value);
    int  (*opts_check)(const void *opts);
    /* Extra (non-training) ranks the engine needs beside a world of that many ranks (NULL: none). */
    int  (*extra_ranks)(const void *opts, int world);
    /* 1 when every worker holds the same parameters after wait() (NULL: always). */
    int  (*in_sync)(const void *opts);
    int  (*create)(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg);
    /* Collective: on return every worker holds rank 0's initial parameters. */
    int  (*attach)(engine_t *self, const param_set_t *params);
    int  (*step_begin)(engine_t *self, const step_ctx_t *ctx);
    int  (*submit)(engine_t *self, const bucket_t *bucket);            /* non-blocking */
    int  (*wait)(engine_t *self, step_out_t *out, int timeout_ms);     /* step done: params updated */
    int  (*allreduce)(engine_t *self, const void *sendbuf, void *recvbuf, size_t count,
                      dtype_t dt, redop_t op, int timeout_ms);         /* out-of-place allowed */
    /* Dedicated server ranks (rank >= nworkers) call this instead of training; returns when the
     * workers are done or failed. NULL for engines without servers. */
    int  (*serve)(engine_t *self);
    void (*stats)(engine_t *self, engine_stats_t *out);
    /* The optimizer state over the whole arena (checkpoints): nbuf buffers of count floats, writable
     * so a resumed run can restore them after attach. NULL where the state lives elsewhere (e.g. on
     * server ranks). */
    int  (*optim_state)(engine_t *self, float **bufs, int *nbuf, size_t *count);
    /* State the engine holds where this rank cannot read it (a PS's servers: their shards' parameters,
     * optimizer state and step counts), for checkpoints. Called on worker 0 only, after wait, while the
     * other ranks still hold the engine: every holder writes its part to a file named base + a suffix of
     * its own, whole or not at all (core/afile.h), and out gets the files and the layout. An engine with
     * this entry restores param_set_t.restore at attach. NULL: the engine holds no such state. */
    int  (*state_save)(engine_t *self, const char *base, engine_saved_t *out);
    void (*destroy)(engine_t **self_p);
    /* The engine's communication schedule for one allreduce of count elements of esz bytes among
     * env->workers workers, as this engine would run it at that size and placement (core/sched.h):
     * what `harness explain` prints and the traffic it predicts. opts: the engine's options (NULL:
     * defaults). Needs no communicator. 0, or ERR_NOMEM / ERR_INVAL (err_set). NULL: not declared. */
    int  (*schedule)(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *out);
} engine_ops_t;

#endif
