/* conf.h (harness/model): the engine configurations the cluster cost model predicts (the registry's layouts,
 * harness/registry/layouts.h, and a recorded run's own placement), which layout a result line ran, and what the
 * cost rules read of a configuration on N machines of G: all of it from the engine's declared schedule
 * (core/sched.h) placed as the launcher places ranks. The model has no engine kinds of its own. */
#ifndef SB_HARNESS_MODEL_CONF_H
#define SB_HARNESS_MODEL_CONF_H
#include "harness/registry/layouts.h"
#include "harness/record/jsonl.h"
#include "harness/model/cluster_cost.h"

/* h_mc_conf_t.row of a run's own configuration (checked, never extrapolated) */
#define H_MC_OWN_ROW 1000
typedef struct {
    char label[40];         /* its row in tables: the registry layout's label; a run's own: "<engine>-K=<K>" */
    char group[40];         /* its error group: the label; a run's own K: "<engine>-K<N" */
    int  row;               /* the registry layout's index (h_layout_at), or H_MC_OWN_ROW + K */
    const h_layout_t *layout; /* the registry layout; NULL: a run's own (engine, run_label, servers, server_nodes) */
    char engine[16], run_label[48];
    int  servers, server_nodes;
} h_mc_conf_t;

/* The registry's layout i (of that label) as a configuration: 0, or -1 past the end (none of that label). */
int h_mc_conf_at(int i, h_mc_conf_t *c);
int h_mc_conf_find(const char *label, h_mc_conf_t *c);
/* The configuration a result line ran on N GPU machines with its extra ranks on K machines of their own (K 0: on
 * the GPU machines): a registry layout whose engine, options and placement are the line's (its engine_label,
 * servers, colocation and local aggregation), or, an engine with servers on 1 < K < N machines of their own
 * with one server each, the run's own. 0, or -1: none of the model's (a peer, another placement). */
int h_mc_conf_of_run(const h_jobj_t *r, int N, int K, h_mc_conf_t *c);
/* Server machines of the configuration on N GPU machines (0: on the GPU machines). */
int h_mc_conf_server_nodes(const h_mc_conf_t *c, int N);
/* 1 when the configuration is an engine at its defaults (a registry layout without options). */
int h_mc_conf_plain(const h_mc_conf_t *c);

/* What the cost rules read of configuration c on N machines of G (h_cl_engine_t's schedule fields; the
 * calibration's are left 0), from its declared schedule: an allreduce at P f32 elements a worker (every
 * piece whole; the bytes scale with the count); owners at one partition a server (every server alike, the
 * byte balance the engine's partitions keep over a step), and the partition from the schedule of a buffer
 * larger than any. algo (may be NULL, 16 bytes) gets the schedule's algorithm at that size across machines.
 * Cached per configuration and machines. 0 or a code (err_set). */
int h_mc_traffic(const h_mc_conf_t *c, int N, int G, h_cl_engine_t *e, char *algo);

#endif
