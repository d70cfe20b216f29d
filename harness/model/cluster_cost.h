/* cluster_cost.h: the cost model of a data-parallel step on the emulated GPU cluster (pure functions,
 * no I/O): each bucket's collective time from the bytes the busiest NIC carries for each engine's
 * pattern (machines of G GPUs sharing one full-duplex NIC; traffic within a machine is free), and the
 * step from the buckets' ready times (overlap with backward, one collective at a time, as DDP and
 * Horovod run them). `harness model --model M --nodes N ...` predicts with it from a calibration
 * (model/calib.h); the allreduce engines' bytes and messages come from their declared schedules. */
#ifndef SB_HARNESS_MODEL_CLUSTER_COST_H
#define SB_HARNESS_MODEL_CLUSTER_COST_H
#include <stddef.h>
#include "harness/registry/engines.h"

typedef struct {
    int    nodes, gpus_per_node;
    double beta;            /* s per payload byte on one NIC direction (headers included) */
    double alpha;           /* s per message (latency and per-message overhead) */
} h_cl_net_t;

/* kind: the engine's communication pattern, the registry's h_pattern_t (ring, tree, ps) */

typedef struct {
    h_pattern_t kind;
    /* allreduce engines (ring, tree): from the engine's declared schedule (h_mc_sched_traffic, through the
     * registry) when from_sched is set: the busiest NIC direction's bytes per byte allreduced, and the
     * messages in series (its steps). Without it the ring takes its closed form, 2(P-1)/P n and 2(P-1)
     * messages; the tree has none here (NAN) */
    int from_sched;
    double nic_per_byte, msgs;
    int servers;            /* ps: dedicated servers (0 with colocate) */
    int server_nodes;       /* ps: servers on CPU machines of their own (K); 0: server s on GPU machine s mod N */
    int colocate;           /* ps: one server inside every worker */
    int pipelined;          /* ps: a bucket's replies follow its own pushes (sync with f32 gradients and no
                             * loss scaling: each partition commits with its last push), not the step's last */
    double part_bytes;      /* ps pipelined: the partition, the unit a reply can follow its pushes in (0: a bucket) */
    double incast;          /* ps pipelined: c of the shared-NIC slowdown 1 + c (f - 1) (h_cl_incast_factor; 0: none) */
    double slow;            /* ps pipelined, servers on machines of their own: a server machine's NIC slowdown
                             * measured by the collective alone with one server machine on the same machines
                             * (`harness bench --nodes N ... --server-nodes 1`), used instead of the law; servers on
                             * the GPU machines (per machine, colocated): a NIC direction's (pushes and replies
                             * together) measured by the layout's collective alone on the same machines; 0: the law */
    int incast_fmax;        /* ps pipelined: the most pushing workers the incast law was measured with (the
                             * calibration's lines); f is held there beyond (0: not held) */
} h_cl_engine_t;

/* The pipelined PS's incast slowdown, measured on this host's emulated NICs (`harness model fit` fits c from
 * `harness bench --net bw=RATE --engine ps --servers 1 --ps-partition-kb P` lines, their loop_us; see
 * docs/emulation.md): a NIC direction that receives the pushes of f workers from two or more other machines
 * while its other direction carries replies delivers its bytes 1 + c (f - 1) times slower than the line rate
 * (tc tbf queues filling behind a remote bottleneck; TCP flows losing their share unevenly and the sync server
 * waiting, per partition, for the slowest worker). 1 + c (min(f, fmax) - 1) for f pushing workers on
 * `machines` remote machines (1 below two machines or two workers; fmax <= 0: f not held). */
double h_cl_incast_factor(double c, int f, int machines, int fmax);
/* c fitted (least squares through 1 at f = 1) to n measured / predicted ratios of f[i] pushing workers;
 * NAN with no point above one worker. */
double h_cl_incast_fit(int n, const int *f, const double *ratio);

/* Bytes the busiest NIC direction carries in one allreduce of n bytes per worker, and the messages
 * in series on the critical path (for alpha). */
void h_cl_traffic(const h_cl_net_t *net, const h_cl_engine_t *e, double n, double *nic_bytes, double *messages);
/* The PS with both phases on the wire at once (pipelined): the busiest NIC direction's bytes when a
 * bucket's pushes and replies share the links (a direction carrying pushes one way and replies the
 * same way adds them; a slowdown, measured or the incast law, stretches the direction's bytes as a
 * whole). Equals h_cl_traffic's bytes when pushes and replies use opposite directions. */
double h_cl_ps_duplex_bytes(const h_cl_net_t *net, const h_cl_engine_t *e, double n);
/* One collective of n bytes: messages alpha + nic_bytes beta (no transfer at one machine). */
double h_cl_collective(const h_cl_net_t *net, const h_cl_engine_t *e, double n);
/* A step: bucket b (bytes[b]) is ready at ready[b] (s from the step's start, non-decreasing); buckets
 * are reduced one at a time in order; the step ends when backward (compute_s) and the last collective
 * are done; for the parameter server (sync) the pulls of the whole model follow the last push, or,
 * pipelined, each bucket's replies follow its pushes (see cluster_cost.c). *exposed (may be NULL) gets step - compute_s. */
double h_cl_step(const h_cl_net_t *net, const h_cl_engine_t *e, int nb, const double *ready, const double *bytes,
                 double compute_s, double *exposed);

#endif
