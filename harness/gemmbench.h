/* gemmbench.h: `harness gemm`: the bare-BLAS reference for `harness train`.
 */
#ifndef SB_HARNESS_GEMMBENCH_H
#define SB_HARNESS_GEMMBENCH_H
#include "harness/harness.h"

/* Times exactly the cblas_sgemm calls one training step of --model makes on a per-worker batch of
 * --batch / --procs (forward N,T; weight gradient T,N; input gradient N,N except layer 0), --warmup
 * then --iters times, in --procs concurrent processes (each with the BLAS threads train would use),
 * and prints per-process and summed samples/s and GFLOP/s; with --json appends a "gemm" line.
 * Runs in the calling process (no launcher, no communicator). Returns 0 or a negative code. */
int h_gemm_bench(const h_opts_t *o);

#endif
