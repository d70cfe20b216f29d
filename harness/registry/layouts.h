/* layouts.h: the engine configurations the harness compares side by side (`simulate --engine all`): each
 * an engine of the table with some of its own options set and a placement of its extra ranks (PS servers),
 * under the one label results use. The only list of them, beside the engine table (engines.c). */
#ifndef SB_HARNESS_LAYOUTS_H
#define SB_HARNESS_LAYOUTS_H
#include "harness/registry/engines.h"

/* server_nodes: where an engine's extra ranks live on N GPU machines */
#define H_LAYOUT_OWN_N (-1)       /* N CPU-only machines of their own */
typedef struct {
    const char *label;            /* "ps-K=N": the name in every table and result line */
    const char *engine;           /* an engine of the table */
    const char *options;          /* its options, space separated "name" or "name=value"; value N: the GPU machines */
    int server_nodes;             /* H_LAYOUT_OWN_N, 0 (on the GPU machines) or K machines of their own */
    const char *about;            /* one line for help and headers */
} h_layout_t;

int h_layout_count(void);
const h_layout_t *h_layout_at(int i);
/* the layout of that label, or NULL */
const h_layout_t *h_layout_find(const char *label);
/* "ring, tree, ps-1server, ..." with each one's about, one a line, for help */
void h_layouts_help(char *out, size_t len);
/* The engine set of layout L on N GPU machines: base's settings and option blobs, copied into store (freed
 * with h_layout_free) and L's options set on the copy. 0, ERR_NOMEM or ERR_INVAL (an option the engine
 * lacks: err_set). */
int  h_layout_engset(const h_layout_t *L, int N, const h_engset_t *base, h_engset_t *out, void *store[H_MAX_ENGINES]);
void h_layout_free(void *store[H_MAX_ENGINES]);
/* The engine set a recorded run ran with: base's, with the run's server count (servers > 0), colocation and
 * local aggregation (its label's "-colocated", "-localagg") set on the engine's own options (an engine
 * without them refuses: ERR_INVAL). Freed with h_layout_free. */
int  h_layout_engset_of_run(const char *engine, const char *label, int servers, const h_engset_t *base, h_engset_t *out,
                            void *store[H_MAX_ENGINES]);
/* The same for a recorded bench line of a serving engine, with its partition (its "ps_partition_bytes";
 * 0: the engine's default) set as well. */
int  h_layout_engset_of_bench(const char *engine, const char *label, int servers, size_t partition_bytes,
                              const h_engset_t *base, h_engset_t *out, void *store[H_MAX_ENGINES]);
/* 1 when a result label names a colocated configuration (h_engine_label's "-colocated") */
int  h_engine_label_colocated(const char *label);
/* server machines of layout L on N GPU machines */
int  h_layout_server_nodes(const h_layout_t *L, int N);

/* The answer a comparison ends with, one line for one cluster: the best allreduce (ps 0) against the best PS
 * layout (ps 1) of the n configurations compared, by speedup over one device; nothing when either kind is
 * missing. who: whose figures ("the cost model's, within its limits above", "simulated"); net: the network in
 * words ("25 Gbit/s", "25 Gbit/s, 5 us a hop"). */
typedef struct {
    const char *label;
    int ps;                       /* 1: a configuration with servers */
    double speedup;
} h_verdict_row_t;
void h_verdict_print(const char *who, const char *model, int N, int G, const char *net, const h_verdict_row_t *rows, int n);

#endif
