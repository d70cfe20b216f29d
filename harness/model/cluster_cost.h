/* cluster_cost.h: the cost model of a data-parallel step on the emulated GPU cluster (pure functions,
 * no I/O): each bucket's collective time from the bytes the busiest NIC carries for each engine's
 * declared schedule (machines of G GPUs sharing one full-duplex NIC; traffic within a machine is free),
 * and the step from the buckets' ready times (overlap with backward, one collective at a time, as DDP
 * and Horovod run them). `harness model --model M --nodes N ...` predicts with it from a calibration
 * (model/calib.h); every engine's bytes and messages come from its declared schedule. */
#ifndef SB_HARNESS_MODEL_CLUSTER_COST_H
#define SB_HARNESS_MODEL_CLUSTER_COST_H
#include <stddef.h>

typedef struct {
    int    nodes, gpus_per_node;
    double beta;            /* s per payload byte on one NIC direction (headers included) */
    double alpha;           /* s per message (latency and per-message overhead) */
} h_cl_net_t;

/* What the cost rules read of one engine configuration on N machines of G, all of it from the engine's
 * declared schedule (core/sched.h, read through the registry by model/cluster.c: h_mc_traffic) and the
 * layout's placement of its extra ranks; bytes per byte allreduced. */
typedef struct {
    int owners;             /* the schedule's pieces are summed at owners that answer them (sched_t.owners: a PS's
                             * servers): the owners' rules; 0: an allreduce's (one collective at a time) */
    double msgs;            /* the schedule's steps that move something between ranks: messages in series */
    double nic_per_byte;    /* the busiest NIC direction's bytes over all steps (the allreduce rule) */
    /* owners: the busiest NIC direction's bytes of the pushes (SCHED_REDUCE transfers), of the replies
     * (SCHED_STORE) and of both on one direction; [0] over machines that host no owner, [1] over those
     * that do (the directions a slowdown stretches) */
    double push[2], reply[2], both[2];
    int fan_in, fan_machines; /* owners: the remote ranks whose pushes reach the busiest owners' machine, and
                             * their machines (the incast law's f and machines) */
    int own_machines;       /* owners on machines of their own (the layout's server machines, K > 0) */
    double part_bytes;      /* owners: the piece (partition) a reply can follow its pushes in (0: a bucket) */
    /* set by the caller from the calibration and the run (not from the schedule): */
    int pipelined;          /* owners: a bucket's replies follow its own pushes (sync with f32 gradients and no
                             * loss scaling: each partition commits with its last push), not the step's last */
    double incast;          /* pipelined: c of the shared-NIC slowdown 1 + c (f - 1) (h_cl_incast_factor; 0: none) */
    double slow;            /* pipelined: the owners' machines' NIC slowdown measured by the collective alone on
                             * the same machines (servers of their own: `harness bench --nodes N ... --server-nodes
                             * K`; on the GPU machines: the layout's own), used instead of the law; 0: the law */
    int incast_fmax;        /* pipelined: the most pushing workers the incast law was measured with (the
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

/* Bytes the busiest NIC direction carries in one allreduce of n bytes per worker (owners: one phase, the
 * pushes; pipelined, the owners' machines' directions slowed), and the messages in series (for alpha). */
void h_cl_traffic(const h_cl_net_t *net, const h_cl_engine_t *e, double n, double *nic_bytes, double *messages);
/* Owners: the replies' busiest direction (as h_cl_traffic's pushes), and the busiest direction when a
 * bucket's pushes and replies are on the wire at once (pipelined): a direction carrying pushes and replies
 * the same way adds them. Equals the larger phase's bytes when the phases use opposite directions. */
double h_cl_reply_bytes(const h_cl_net_t *net, const h_cl_engine_t *e, double n);
double h_cl_ps_duplex_bytes(const h_cl_net_t *net, const h_cl_engine_t *e, double n);
/* One collective of n bytes: messages alpha + nic_bytes beta (no transfer at one machine). */
double h_cl_collective(const h_cl_net_t *net, const h_cl_engine_t *e, double n);
/* A step: bucket b (bytes[b]) is ready at ready[b] (s from the step's start, non-decreasing); buckets
 * are reduced one at a time in order; the step ends when backward (compute_s) and the last collective
 * are done; with owners (a PS, sync) the replies of the whole model follow the last push, or,
 * pipelined, each bucket's replies follow its pushes (see cluster_cost.c). *exposed (may be NULL) gets step - compute_s. */
double h_cl_step(const h_cl_net_t *net, const h_cl_engine_t *e, int nb, const double *ready, const double *bytes,
                 double compute_s, double *exposed);

#endif
