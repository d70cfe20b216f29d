/* cluster.h: the emulated GPU cluster of `--nodes N --gpus-per-node G [--server-nodes K]
 * --net inter=RATE`: which emulated machine each rank sits on, the rate the shaped links get after
 * --shrink and --dilate, the automatic choice of the shrink factor, and the host-bound verdict. The
 * namespaces and shaping themselves are launch/netem.c's. */
#ifndef SB_HARNESS_CLUSTER_H
#define SB_HARNESS_CLUSTER_H
#include <stddef.h>

typedef struct {
    int    nodes;           /* --nodes: GPU machines */
    int    gpus_per_node;   /* --gpus-per-node: emulated GPUs (ranks) per machine */
    int    server_nodes;    /* --server-nodes: CPU-only machines for dedicated PS servers (0: servers sit on GPU machines) */
    double inter_bps;       /* emulated NIC rate of every machine, each way (bits/s) */
    double shrink, dilate;  /* >= 1 */
} h_cluster_t;

/* The emulated machine of rank r in a world of nworkers workers followed by dedicated servers:
 * workers fill GPU machines in order (gpus_per_node each); server s goes to CPU machine s mod K when
 * server_nodes = K > 0, else to GPU machine s mod nodes (TensorFlow's placement, one per machine). */
int h_cluster_machine_of(const h_cluster_t *c, int rank, int nworkers);
/* Machines (network namespaces) the cluster needs when it has dedicated servers. */
int h_cluster_machines(const h_cluster_t *c, int have_servers);
/* The rate a shaped link gets on this host: inter_bps / (shrink x dilate). */
double h_cluster_shaped_bps(const h_cluster_t *c);

/* What --shrink auto keeps within this host's reach (h_cluster_auto_shrink). */
typedef struct {
    size_t model_bytes;       /* one worker's gradients (f32), before shrink */
    int    nranks;            /* ranks of the largest launch, servers included */
    double mem_budget;        /* bytes the ranks' buffers may take */
    double max_link_bps;      /* the fastest a shaped link may run */
    double compute_host_ms;   /* one step's compute on the host (dilated), smallest local batch; 0: unknown */
    double max_bytes_per_ms;  /* gradient bytes a rank may move per host millisecond of compute */
} h_shrink_need_t;

/* Above this shrink the PS's default partition (4 MiB / shrink) would hit its 16 KiB floor, and the
 * host-work rule stops there. */
#define H_SHRINK_HOST_MAX 256
/* Below this much compute a step (a device that makes compute negligible) the host-work rule is off:
 * there is no compute for host work to hide behind or to inflate. */
#define H_SHRINK_MIN_COMPUTE_MS 10.0

/* The smallest power-of-two shrink that keeps this host within what it can carry: the ranks' buffers
 * (about 5 copies of the model's gradients per worker: parameters, gradients, optimizer state and
 * engine buffers) under mem_budget bytes, every shaped link at most max_link_bps, and (the host-work
 * rule) each rank's gradients at most max_bytes_per_ms per millisecond of the step's compute, so that
 * the copies and sums the host does for them (shared memory within a machine, the TCP stack, the PS's
 * sums) stay small beside the emulated compute; that rule goes no further than H_SHRINK_HOST_MAX and is
 * off below H_SHRINK_MIN_COMPUTE_MS. */
double h_cluster_auto_shrink(const h_cluster_t *c, const h_shrink_need_t *need);

/* This machine's CPU time counters from /proc/stat (jiffies, all CPUs): busy (everything but idle and
 * iowait) and total. 0, or -1 when unreadable. The busy share between two samples is the load of
 * every process, ours and others' (a build running beside an emulation shows here). */
int h_host_cpu_sample(unsigned long long *busy, unsigned long long *total);

/* The host-bound verdict: busy = CPU seconds all ranks used / (wall seconds x cores). The host, not the
 * emulated links and devices, bounds the run when busy >= 0.75 or one rank was on a CPU >= 90% of the
 * time, or when the whole machine (system_busy: every process's share from /proc/stat, < 0 unknown)
 * was >= 0.75 busy. Returns 1 if bound. */
int h_cluster_host_bound(double cpu_s_sum, double cpu_s_max_rank, double wall_s, int cores, double system_busy,
                         double *busy);

#endif
