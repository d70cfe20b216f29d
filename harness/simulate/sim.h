/* sim.h: replaying an engine's declared schedule (core/sched.h) on a simulated cluster with SimGrid
 * (Debian's libsimgrid-dev): N machines of G GPUs, each GPU linked to its machine's switch, one NIC per
 * machine to a non-blocking star switch, a latency per hop; dedicated PS servers on machines of their
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

typedef struct {
    int    nodes, gpus_per_node;  /* GPU machines and GPUs a machine: workers w on machine w / G */
    int    server_nodes;          /* dedicated servers (ranks >= workers): K > 0 machines of their own, server
                                   * s on machine s mod K; 0: on the GPU machines, server s on machine s mod N */
    double inter_bps;             /* a machine's NIC, bits/s each way */
    double intra_bps;             /* a GPU's link to its machine's switch, bits/s each way */
    double lat_s;                 /* latency of one hop: a GPU to its machine, a machine to the switch */
    double framing;               /* payload share of the line rate (H_SIM_TCP_FRAMING; 1: none) */
    int    timeout_s;             /* the whole simulation gives up after this */
} h_sim_platform_t;

typedef struct {
    double   time_s;              /* simulated: the last rank's end of the allreduce */
    double   wall_s;              /* how long simulating took */
    uint64_t comms;               /* SimGrid communications replayed (a step's transfers between a pair: one) */
    uint64_t nic_max_bytes;       /* the busiest machine NIC, one direction, payload */
    int      machines;            /* GPU machines plus server machines */
} h_sim_result_t;

/* 1 when this build has SimGrid; else 0 and why (a static string). */
int h_sim_available(const char **why);
/* Simulate the allreduce of schedule s on platform pl (in a child process: SimGrid runs one simulation
 * a process). 0, ERR_INVAL (a platform that cannot hold the schedule's ranks), ERR_TIMEOUT, ERR_NODEV
 * (no SimGrid), or another code with the child's reason (err_set). */
int h_sim_collective(const h_sim_platform_t *pl, const sched_t *s, h_sim_result_t *out);

#endif
