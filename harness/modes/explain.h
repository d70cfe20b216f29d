/* explain.h: `harness explain --engine ring|tree|ps [--procs N] [--servers S] [--sizes BYTES] [--gpus-per-node G]`: an
 * engine's allreduce schedule for a small world, step by step, from the schedule code the engines run
 * (ring_schedule, tree_shape/tree_depth/tree_split, ps_layout_init), ending with the bytes per link;
 * with --plots DIR also one diagram per step (DIR/step_K.svg and .png, explain_draw.h). Each step and the
 * whole allreduce end with their link bytes: busiest and mean link and NIC (h_traffic_stats). */
#ifndef SB_H_EXPLAIN_H
#define SB_H_EXPLAIN_H
#include <stdint.h>
#include <stdio.h>
#include "core/dtype.h"
#include "harness/registry/engines.h"

/* What explain draws: one engine (engine_name; the registry's default engine when NULL) for procs workers (0: 4) at the
 * largest size (bytes of dtype); the engines' options (servers, colocation, partition) from es. */
typedef struct {
    const char *engine;
    int procs;
    size_t bytes;
    dtype_t dtype;
    const char *plots_dir;            /* --plots DIR: also one diagram per step (NULL: none) */
    int gpus_per_node;                /* --gpus-per-node G: the workers on machines of G (worker w on machine w / G);
                                       * 0: all on one host over shared memory */
    h_engset_t es;
} h_explain_cfg_t;

/* Print the schedule of o->engine for o->procs workers (default 4) and o->bytes
 * (of o->dtype) to out. links (may be NULL): world x world bytes per link of one allreduce, row =
 * sender (world = workers + dedicated servers, at most H_EXPLAIN_MAX ranks). 0 or ERR_INVAL. */
#define H_EXPLAIN_MAX 16
int h_explain(const h_explain_cfg_t *o, FILE *out, uint64_t *links, int *world);

#endif
