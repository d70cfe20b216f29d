/* sim.h: replaying an engine's declared schedule (core/sched.h) on a simulated cluster with SimGrid
 * (Debian's libsimgrid-dev): N machines of G GPUs, each GPU linked to its machine's switch, one NIC per
 * machine to a non-blocking star switch or to a leaf of a two-level fat tree, a latency per hop; dedicated PS servers on machines of their
 * own or on the GPU machines. Every transfer is a SimGrid communication, so link sharing, incast and
 * latency are simulated, not formulas. Built without SimGrid, h_sim_available says so. */
#ifndef SB_HARNESS_SIM_H
#define SB_HARNESS_SIM_H
#include <stddef.h>
#include <stdint.h>
#include "core/sched.h"

/* PCIe 3.0 x16, each direction: 8 GT/s x 16 lanes x 128/130 (the PCI-SIG specification) */
#define H_SIM_INTRA_PCIE3_BPS (8e9 * 16 * 128.0 / 130.0)
/* TCP/IPv4 payload per Ethernet frame as a shaper or a switch port counts it: 1448 B (MSS with the
 * timestamp option) in 1514 B (1500 B MTU + 14 B header) */
#define H_SIM_TCP_FRAMING (1448.0 / 1514.0)

/* A PS server core's rate when none is given (--server-rate) to `simulate --model`: 0, no CPU time (no measured
 * default exists yet; `simulate --emulated` fits the rate from the PS benches' lines, sim_check.c) */
#define H_SIM_SERVER_BPS 0.0

typedef struct h_sim_platform {
    int    nodes, gpus_per_node;  /* GPU machines and GPUs a machine: workers w on machine w / G */
    int    server_nodes;          /* dedicated servers (ranks >= workers): K > 0 machines of their own, server
                                   * s on machine s mod K; 0: on the GPU machines, server s on machine s mod N */
    double inter_bps;             /* a machine's NIC, bits/s each way */
    double intra_bps;             /* a GPU's link to its machine's switch, bits/s each way */
    double lat_s;                 /* latency of one hop: a GPU to its machine, a machine to the switch */
    double nic_lat_s;             /* added to each machine-switch hop only (a transfer across machines pays it
                                   * twice, one inside a machine never): the emulated cluster's lat=, which
                                   * delays the NICs and not shared memory; 0 elsewhere */
    double framing;               /* payload share of the line rate (H_SIM_TCP_FRAMING; 1: none) */
    double server_Bps;            /* a server's CPU, per core: bytes of pushed gradient it takes in (the message handled,
                                   * summed into the partition's aggregate) a second; each reduction a serving engine's
                                   * schedule declares (SCHED_REDUCE, h_sim_work_t.cpu_reduce) is a SimGrid execution of
                                   * its bytes on the receiving rank's host, in arrival order; 0: infinite (no CPU time) */
    int    server_cores;          /* cores a rank's host gives that work (the PS server runs it on one thread); 0: 1 */
    int    rack;                  /* the fabric: 0: every machine's NIC on one non-blocking star switch; R > 0: a
                                   * two-level fat tree, machines (GPU machines, then server machines) in racks of R
                                   * consecutive ones under a leaf switch, each leaf one uplink to the spine, each way,
                                   * of R x NIC / oversub; a transfer across racks pays 2 hops more */
    double oversub;               /* the uplinks' oversubscription (>= 1; 1: non-blocking) */
    int    timeout_s;             /* the whole simulation gives up after this */
    int    pool;                  /* set by the replay's fan-out reduction only (h_sim_work_t.fan_bundle): dedicated server
                                   * machines merged this many to one, whose NIC is theirs together and whose servers'
                                   * links as many times a GPU's; 0 or 1: none */
} h_sim_platform_t;

/* A run to replay: nb collectives a step in submission order (a training step's gradient buckets, or one
 * allreduce alone), each with its declared schedule; a worker starts bucket b's collective once its
 * gradient is ready and the bucket before has finished on this worker (one collective at a time, as DDP's
 * and Horovod's buckets go through one communication stream), while its backward goes on. */
#define H_SIM_MAX_STEPS 16
#define H_SIM_EXACT_COMMS 4000000
#define H_SIM_AUTO_GROUPS 64
#define H_SIM_EXACT_FLOW 200000
#define H_SIM_AUTO_STREAM 4
typedef struct {
    int nb;
    const sched_t *sched;         /* nb schedules, the same world and workers */
    const double *ready_s;        /* nb: when bucket b is ready on a nominal GPU, seconds from the step's start
                                   * (forward included); NULL: all at 0 (the collective alone) */
    double total_s;               /* forward + backward of a nominal GPU (0: no compute) */
    double update_s;              /* a worker's optimizer update after its last bucket (0: none, or the servers') */
    int steps;                    /* 1 .. H_SIM_MAX_STEPS */
    const double *factor;         /* per worker: its compute time multiplier, fixed for the run (stragglers);
                                   * NULL: every GPU nominal */
    int cpu_reduce;               /* 1: the schedules' reductions cost the receiving rank's CPU (server_Bps): an engine
                                   * with servers (engine_ops_t.serve) sums on the host; the allreduce engines' sums are
                                   * left in the links' fitted rates (sim_check.c) */
    int max_groups;               /* the reduction: a collective's ring-like steps merged into at most this many
                                   * groups (sends of a pair summed; the merged steps' latencies kept as a delay);
                                   * 0: every step replayed as its own; < 0 (auto): every step while the run stays
                                   * under H_SIM_EXACT_COMMS communications, else H_SIM_AUTO_GROUPS groups */
    int min_stream;               /* the other reduction, for dataflow schedules (a tree's, a PS's): a connection's run
                                   * of at least this many consecutive transfers of one wait goes as one communication,
                                   * once its first piece is held (cut-through, as the engines pipeline); each piece
                                   * is held as the flow carries it (sim_simgrid.c s_stream); 0: never; < 0 (auto):
                                   * never while the run stays under H_SIM_EXACT_FLOW communications, else runs of
                                   * H_SIM_AUTO_STREAM */
    int join;                     /* with the streams: when a connection starts a stream, the streams after it on the
                                   * connection in the step whose buckets are released by then go in the same
                                   * communication (1, experimental: it failed its declared check,
                                   * results/sim-reduction-join); 0: never */
    int fan_bundle;               /* the third, for dataflow steps with many connections across machines (a PS's pushes
                                   * and pulls): one round of a machine pair's transfers of one op (each rank's first,
                                   * second, ... transfer to each in the step; from one worker, or from any dedicated
                                   * ranks of the machine) goes as one communication, once its first piece is
                                   * held (cut-through), that credits every receiver once every piece it carries is; 1:
                                   * so; Q >= 2: so, with dedicated server machines merged Q to one (pl->pool: their
                                   * loads are alike, every worker sending each the same; experimental); 0: never; < 0
                                   * (auto): 1 once a run passes H_SIM_EXACT_FLOW communications. Only where both NICs
                                   * carry nearly all their transfers in groups of one size (sim_plan.c s_bundles); never
                                   * into a rank whose sums cost CPU time, nor for owners answering ahead (async, SSP) */
} h_sim_work_t;

typedef struct {
    double   time_s;              /* the mean simulated step (the collective alone: its time); workers that do not wait
                                   * for each other (a PS's async and SSP modes): workers / the sum of each one's steps
                                   * a second, the step of the rate they train at together */
    double   step_s[H_SIM_MAX_STEPS]; /* each step: the last worker's end, from the step before's */
    int      steps;
    double   wall_s;              /* how long simulating took */
    uint64_t comms;               /* SimGrid communications replayed in all (a group's transfers between a pair: one) */
    uint64_t actors;              /* SimGrid actors: one a rank, and a dataflow replay's one a connection and direction */
    double   rss_mb;              /* the replay's peak resident memory (MiB, the child's getrusage) */
    uint64_t nic_max_bytes;       /* the busiest machine NIC, one direction, payload, a step */
    double   link_util;           /* the busiest link's (a NIC, a GPU's, a leaf's uplink) payload a step over its capacity */
    int      link_is_nic;         /* that link: 1 a machine's NIC, 2 a leaf switch's uplink, 0 a GPU's link to its machine */
    int      merge;               /* the most steps merged into one group (1: none) */
    int      stream;              /* the most pieces in one stream (1: none) */
    int      bundle;              /* the most transfers in one fan-out bundle (1: none) */
    uint64_t joined;              /* streams that went in the communication of one before them (h_sim_work_t.join) */
    int      pool;                /* server machines merged this many to one (0: none) */
    int      pool_unequal;        /* > 0: merging was asked for but refused, bucket pool_unequal - 1's servers holding
                                   * unequal shares (sim_plan.c s_unequal_shares) */
    int      machines;            /* GPU machines plus server machines */
} h_sim_result_t;

/* --fabric SPEC: "star" (or NULL) or "fattree:R:O" into pl->rack and pl->oversub; 0 or ERR_INVAL (err_set).
 * h_sim_fabric_name: the spelling back ("star", "fattree:4:2"). */
int  h_sim_fabric_parse(const char *spec, h_sim_platform_t *pl);
void h_sim_fabric_name(const h_sim_platform_t *pl, char *out, size_t len);
/* The fabric's name into fab, and the platform's switch and servers' CPU in words into line (for headers). */
void h_sim_platform_line(const h_sim_platform_t *pl, char *fab, size_t flen, char *line, size_t llen);
/* 1 when this build has SimGrid; else 0 and why (a static string). */
int h_sim_available(const char **why);
/* Simulate w on platform pl (in a child process: SimGrid runs one simulation a process). 0, ERR_INVAL
 * (a platform that cannot hold the schedules' ranks, bad work), ERR_TIMEOUT, ERR_NODEV (no SimGrid), or
 * another code with the child's reason (err_set). */
int h_sim_run(const h_sim_platform_t *pl, const h_sim_work_t *w, h_sim_result_t *out);
/* The allreduce of schedule s alone, every step replayed (h_sim_run of one bucket, one step; a dataflow schedule
 * of more than H_SIM_EXACT_FLOW transfers in streams, h_sim_work_t.min_stream). */
int h_sim_collective(const h_sim_platform_t *pl, const sched_t *s, h_sim_result_t *out);

#endif
