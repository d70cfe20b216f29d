/* engines.h: the engine registry (registry/engines.c, the only list of engines the harness knows):
 * lookup by name, labels, whether an engine has servers, the peer engines, the engines' own options, and each engine's
 * configuration in a world. */
#ifndef SB_HARNESS_ENGINES_H
#define SB_HARNESS_ENGINES_H
#include <stddef.h>
#include "core/comm.h"
#include "core/engine.h"

#define H_MAX_ENGINES 8

/* engine table (engines.c, the only list of engines; the first is the default) */
int h_engine_count(void);
const engine_ops_t *h_engine_at(int i);
const engine_ops_t *h_engine_find(const char *name);
/* The one name of an engine configuration, in every table, JSON line ("engine_label"), report, plot and
 * paper: the engine; "/impl" unless the default host path; a descriptive impl that starts with
 * "<engine>-" (ps-sync-servers1, ps-sync-colocated) is the label itself; a PS without one gets
 * "-colocated" or "-serversN". */
void h_engine_label(char *out, size_t len, const char *engine, const char *impl, int servers, int coloc);
/* What a table's header adds after the label: the implementation when the label does not already say
 * it and it is not the default host path ("" otherwise). */
const char *h_engine_impl_note(const char *label, const char *impl);
/* 1 when the engine can run server ranks (engine_ops_t.serve: a PS's servers, dedicated or colocated),
 * whose placement a label and the emulated cluster say; 0 for unknown names. What an engine's traffic is
 * comes from its declared schedule (h_engine_schedule), never from its name. */
int h_engine_has_servers(const char *name);
/* The engine whose collective-alone benches measure the host transport itself (a flat ring: every step one
 * send and one receive a rank over one link), whose bench lines the simulator's check fits its latency and
 * shared-memory constants from (harness/simulate/sim_check.c). */
const char *h_engine_transport_probe(void);
const char *h_engine_names(void);     /* "ring, tree, ps": the table's names for help and errors */
/* The engines' own options: one blob per engine of the table, by index (NULL where an engine has none).
 * _init gives every engine its defaults (0 or ERR_NOMEM), _free frees them; option k over all engines'
 * tables in order (NULL past the end; *engine = its table index); set option k from a flag's value (0 or
 * ERR_INVAL); the engines' whole-set checks (err_set detail). */
int  h_engine_opts_init(void *eopts[H_MAX_ENGINES]);
void h_engine_opts_free(void *eopts[H_MAX_ENGINES]);
const engine_opt_t *h_engine_opt(int k, int *engine);
#define H_MAX_ENGOPTS 64 /* the most engine options over all engines' tables (k < H_MAX_ENGOPTS) */
int  h_engine_opt_set(void *const eopts[H_MAX_ENGINES], int k, const char *value);
int  h_engine_opts_check(void *const eopts[H_MAX_ENGINES]);

/* What every engine configuration is made from: the engines' option blobs (by table index, not owned)
 * and the settings the harness gives every engine. Built from the options by cli/ (h_engset_of). */
typedef struct {
    void *eopts[H_MAX_ENGINES];
    const char *impl;                 /* --impl: engine implementation (NULL: the engine's default) */
    int timeout_s;                    /* --timeout */
    size_t seg_bytes;                 /* --seg-kb */
    int gpus, device;                 /* --gpus (0: host buffers) and this rank's CUDA device */
    double shrink;                    /* emulated runs: tensors shrunk by this factor (> 1) */
} h_engset_t;
const void *h_engine_opts(const h_engset_t *es, const char *engine);
/* Extra (non-training) ranks engine needs beside world training ranks; 1 if it trains in sync. */
int  h_engine_extra_ranks(const h_engset_t *es, const char *engine, int world);
int  h_engine_in_sync(const h_engset_t *es, const char *engine);
/* The engine configuration for `engine` in this world: nworkers is the world minus the engine's extra
 * ranks (from its options, at most world - 1); device from gpus (es->device). */
void h_engine_cfg(const h_engset_t *es, const comm_t *comm, const char *engine, engine_cfg_t *cfg);
/* The engine's declared schedule for one allreduce (engine_ops_t.schedule, core/sched.h) with its
 * options from es: 0, or ERR_INVAL naming an unknown engine or one that declares none; out freed with
 * sched_free on success. */
int  h_engine_schedule(const h_engset_t *es, const char *engine, const sched_env_t *env, size_t count, size_t esz,
                       sched_t *out);
/* 1 if this rank is one of the engine's extra ranks for cfg (rank >= nworkers), e.g. a PS server. */
static inline int h_is_server(const comm_t *comm, const engine_cfg_t *cfg) { return comm->rank >= cfg->nworkers; }

/* The peer engines this build has (found by h_engine_find, not among h_engine_at) */
int h_peer_engine_count(void);
const engine_ops_t *h_peer_engine_at(int i);
/* 1 for a peer's results: a peer engine of the table, or a result engine name of a peer
 * ("mpi", "torch-*", "openmpi-*") whether or not this build has it */
int h_engine_is_peer(const char *name);
/* 1 when the engine's ranks must be MPI processes (the driver starts them through mpirun) */
int h_engine_via_mpirun(const char *name);
/* Why a known engine is not in this build ("this build has no MPI (...)"), or NULL. */
const char *h_engine_unbuilt(const char *name);

#endif
