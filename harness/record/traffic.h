/* traffic.h: measured traffic matrices: bytes per ordered pair of ranks (row = sender, column =
 * receiver) from the transport's per-peer counters (core/tp.h tp_peer_counters, which the PS's ZeroMQ
 * bytes are noted in too), gathered onto every rank and written as the JSON field "traffic_bytes" (flat, row-major). */
#ifndef SB_H_TRAFFIC_H
#define SB_H_TRAFFIC_H
#include <stddef.h>
#include <stdint.h>
#include "core/comm.h"

/* This rank's counters now: sent[r] / recv[r] = bytes to / from rank r (world entries each). */
void h_traffic_snap(comm_t *comm, uint64_t *sent, uint64_t *recv);

/* Every rank contributes the bytes it sent since sent0 (h_traffic_snap); mat (world x world) gets
 * the matrix on every rank. A collective of all ranks. */
int h_traffic_gather_all(comm_t *comm, const uint64_t *sent0, uint64_t *mat, int timeout_ms);

/* The same among the workers [0, nworkers) only (dedicated servers are serving): each worker gives
 * what it sent and received since sent0/recv0, and a link i -> j is counted by its receiver j when j
 * is a worker (so the matrix is complete when the collective returns), else by its sender i. */
int h_traffic_gather_workers(comm_t *comm, int nworkers, const uint64_t *sent0, const uint64_t *recv0,
                             uint64_t *mat, int timeout_ms);

/* The matrix as JSON: one flat array of world x world numbers, row by row (row = sender); malloc'd,
 * NULL when out of memory. */
char *h_traffic_json(const uint64_t *mat, int world);

/* How evenly a matrix spreads its bytes, per step (the matrix divided by the steps it covers: a
 * bench's warm-up + timed allreduces, a run's training steps, 1 for one schedule step). Two views:
 * a link is one ordered pair of ranks (the links that carried bytes count), and a rank's link is its
 * NIC, the bytes it sends plus the bytes it receives (every rank counts). The ring's are uniform
 * (max/mean 1); one PS server's NIC carries every worker's push and pull (max/mean (P + 1)/2). */
typedef struct {
    int ranks;                  /* n of the n x n matrix */
    size_t links;               /* ordered pairs that carried bytes */
    double link_max, link_mean; /* bytes per step on the busiest pair, mean over the pairs that carried */
    double nic_max, nic_mean;   /* bytes in + out per step of the busiest rank, mean over all ranks */
    int nic_busiest;            /* that rank */
} h_traffic_stats_t;

/* Stats of m (nm = n x n bytes, row = sender, diagonal ignored) over steps > 0 steps. 0, or ERR_INVAL
 * when nm is not a square or steps <= 0. */
int h_traffic_stats(const double *m, size_t nm, double steps, h_traffic_stats_t *st);

/* max / mean, 0 when the mean is 0 */
double h_traffic_ratio(double max, double mean);

#endif
