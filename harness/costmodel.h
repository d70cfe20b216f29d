/* costmodel.h: the alpha-beta-gamma cost model of the three engines' allreduce (pure functions, no
 * I/O): alpha = latency per message (s), beta = transfer time per byte on one link (s/B), gamma =
 * reduction time per byte (s/B, one add of two buffers). Links are full duplex; every rank has its own
 * link (what --net gives: one shaped veth per rank). See costmodel.c for each formula's derivation. */
#ifndef SB_HARNESS_COSTMODEL_H
#define SB_HARNESS_COSTMODEL_H
#include <stddef.h>

typedef struct {
    double alpha, beta, gamma;
} h_cm_t;

/* Ring (reduce-scatter + allgather): 2(P-1) alpha + 2(P-1)/P n beta + (P-1)/P n gamma. */
double h_cm_ring(const h_cm_t *m, int P, double n);

/* The host double binary tree as allreduce-tree/tree.c runs it: each half of the buffer goes up and
 * down one tree in segments of seg bytes (0: the engine's own tree_seg_default). The lock-step schedule
 * is replayed: each step costs alpha + (most bytes on one rank's link, either direction) beta + (most
 * bytes one rank reduces) gamma. Returns < 0 when out of memory. */
double h_cm_tree(const h_cm_t *m, int P, double n, double seg);
/* The pieces of the tree's steady state (exposed for tests): depth D, k (most segments a rank sends
 * in one step), c (most child segments it reduces) of the double binary tree of P. */
void   h_cm_tree_shape(int P, int *depth, int *k, int *c);
/* The tree engine's segment size for an n-byte allreduce over P ranks (tree_seg_default, rounded down
 * to 64 B as tree.c does; the transport's slot cap is not applied). */
double h_cm_tree_seg(int P, double n);

/* Parameter server, N workers, S dedicated servers (colocate = 0) or one server inside every worker
 * (colocate = 1, S = N; a worker's traffic to its own server is free). Pushes and pulls are
 * pipelined over partitions of part bytes (0: 4 MiB), so a link carries its in and out traffic at the
 * same time:
 *   dedicated: a server's link moves N n / S each way, a worker's n: time 2 alpha + max(n, N n/S) beta
 *              + N min(part, n/S) beta (the last partition's round trip) + (N-1) n/S gamma;
 *   colocated: every rank sends (N-1)/N n as a worker and (N-1)/N n as a server:
 *              2 alpha + 2 (N-1)/N n beta + (N-1)/N n gamma. */
double h_cm_ps(const h_cm_t *m, int N, int S, int colocate, double n, double part);

/* Weighted least squares y = a + b x with weights w (NULL: 1). Returns 0, or -1 when degenerate. */
int h_cm_linfit(const double *x, const double *y, const double *w, size_t k, double *a, double *b);

/* Fit alpha and beta from one-way times t[i] (s) of messages of n[i] bytes: beta is the least-squares
 * slope over messages >= 256 KiB, alpha the mean excess of messages <= 512 B over beta n (a shaper's
 * burst makes mid sizes look faster than the link: they decide neither). Without enough points in
 * those ranges: one fit weighted for relative error. alpha is clamped at >= 0. */
int h_cm_fit_ab(const double *n, const double *t, size_t k, double *alpha, double *beta);

#endif
