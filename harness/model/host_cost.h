/* host_cost.h: the alpha-beta-gamma cost model of the three engines' allreduce (pure functions, no
 * I/O): alpha = latency per message (s), beta = transfer time per byte on one link (s/B), gamma =
 * reduction time per byte (s/B, one add of two buffers). Links are full duplex; every rank has its own
 * link (what --net gives: one shaped veth per rank). See host_cost.c for each formula's derivation. */
#ifndef SB_HARNESS_COSTMODEL_H
#define SB_HARNESS_COSTMODEL_H
#include <stddef.h>

/* burst: a token-bucket shaper's allowance (tc tbf burst, in payload bytes; 0: no shaper). Every
 * link direction holds up to burst tokens, refilled at 1/beta bytes per second whether busy or idle;
 * a message of B bytes finding tok tokens takes alpha + max(0, B - tok) beta (see host_cost.c).
 * kappa: CPU time per byte a rank puts on or takes off the transport (s/B, send and receive each);
 * mu: CPU time per byte of a memcpy (s/B); cores: cores the ranks share (0: every rank has its own,
 * no CPU term). With procs > cores an allreduce takes at least (CPU work of all procs) / cores. */
typedef struct {
    double alpha, beta, gamma;
    double burst, kappa, mu;
    int cores;
} h_cm_t;

/* One lock-step step over nl link directions with token buckets tok[] (in/out: tokens before and
 * after, payload bytes): alpha (the buckets refill meanwhile, capped at burst) + the slowest link's
 * max(0, bytes[l] - tokens) beta + red gamma; each bucket then gains step/beta and loses bytes[l]
 * (kept within 0..burst). Returns the step's time. With burst 0: alpha + max bytes beta + red gamma. */
double h_cm_step(const h_cm_t *m, int nl, const double *bytes, double *tok, double red);
/* The CPU floor: work (s of CPU over all procs) shared by cores when procs > cores, else 0. */
double h_cm_cpu(const h_cm_t *m, int procs, double work);

/* Ring (reduce-scatter + allgather): 2(P-1) alpha + 2(P-1)/P n beta + (P-1)/P n gamma without a
 * shaper; with one, the 2(P-1) steps of n/P run through h_cm_step in back-to-back allreduces (the
 * steady state a benchmark loop sees). At least h_cm_cpu of P ranks' work: 4(P-1)/P n kappa (send
 * and receive 2(P-1)/P n) + (P-1)/P n gamma + n mu (the result copy) each. */
double h_cm_ring(const h_cm_t *m, int P, double n);

/* Run a schedule of ns steps over nl links (bytes[s * nl + l], red[s], alpha only where lat[s], lat NULL:
 * every step): once without a shaper; shaped, back to back from full buckets: 2 warm-up runs, then the
 * mean of 3. Returns < 0 when out of memory. */
double h_cm_run(const h_cm_t *m, long ns, int nl, const double *bytes, const double *red, const char *lat);

/* host_tree.c, from the tree engine's declared schedule (through the registry).
 * The host double binary tree as allreduce-tree/tree.c runs it: each half of the buffer goes up and
 * down one tree in segments of seg bytes (0: the engine's own tree_seg_default). The lock-step schedule
 * is replayed: each step costs alpha + (most bytes on one rank's link, either direction) beta + (most
 * bytes one rank reduces) gamma (h_cm_step, every rank's in and out link its own bucket; back-to-back
 * allreduces when shaped). CPU floor as the ring's with each rank's own bytes. Returns < 0 when out
 * of memory. */
double h_cm_tree(const h_cm_t *m, int P, double n, double seg);
/* The pieces of the tree's steady state (exposed for tests): depth D, k (most segments a rank sends
 * in one step), c (most child segments it reduces) of the double binary tree of P. */
void   h_cm_tree_shape(int P, int *depth, int *k, int *c);
/* The tree engine's segment size for an n-byte allreduce over P ranks (its segmented schedule's pieces:
 * tree_seg_default, rounded down to 64 B as tree.c does, at most a half; the transport's slot cap is not
 * applied). */
double h_cm_tree_seg(int P, double n);

/* Parameter server, N workers, S dedicated servers (colocate = 0) or one server inside every worker
 * (colocate = 1, S = N; a worker's traffic to its own server is free). Pushes and pulls are
 * pipelined over partitions of part bytes (0: 4 MiB), so a link carries its in and out traffic at the
 * same time:
 *   dedicated: a server's link moves N n / S each way, a worker's n: time 2 alpha + max(n, N n/S) beta
 *              + N min(part, n/S) beta (the last partition's round trip) + (N-1) n/S gamma;
 *   colocated: every rank sends (N-1)/N n as a worker and (N-1)/N n as a server:
 *              2 alpha + 2 (N-1)/N n beta + (N-1)/N n gamma.
 * Shaped: the same rounds (dedicated: partition round j carries N part into a server and the
 * replies of round j-1 out; alpha on the first and last only; colocated: a push and a pull step)
 * through h_cm_step, back to back. CPU floor over N + S procs (colocated: N) of kappa per byte sent
 * or received, gamma per byte reduced, n mu per worker. */
double h_cm_ps(const h_cm_t *m, int N, int S, int colocate, double n, double part);

/* Weighted least squares y = a + b x with weights w (NULL: 1). Returns 0, or -1 when degenerate. */
int h_cm_linfit(const double *x, const double *y, const double *w, size_t k, double *a, double *b);

/* Fit alpha and beta from one-way times t[i] (s) of messages of n[i] bytes: beta is the least-squares
 * slope over messages >= 256 KiB, alpha the mean excess of messages <= 512 B over beta n (a shaper's
 * burst makes mid sizes look faster than the link: they decide neither). Without enough points in
 * those ranges: one fit weighted for relative error. alpha is clamped at >= 0. */
int h_cm_fit_ab(const double *n, const double *t, size_t k, double *alpha, double *beta);

#endif
