/* gemm.h: `harness gemm`: the bare-BLAS reference for `harness train`.
 */
#ifndef SB_HARNESS_GEMM_H
#define SB_HARNESS_GEMM_H
#include "harness/record/result.h"

typedef struct {
    const char *model;                /* --model (NULL: the trainer's default MLP) */
    int batch;                        /* --batch, global (0: the trainer's default) */
    int procs, gpus;                  /* --procs concurrent processes, or --gpus */
    int iters, warmup;                /* --iters, --warmup */
    h_out_t out;
} h_gemm_cfg_t;

/* Times exactly the cblas_sgemm calls one training step of --model makes on a per-worker batch of
 * --batch / --procs (forward N,T; weight gradient T,N; input gradient N,N except layer 0), --warmup
 * then --iters times, in --procs concurrent processes (each with the BLAS threads train would use),
 * and prints per-process and summed samples/s and GFLOP/s; with --json appends a "gemm" line.
 * Runs in the calling process (no launcher, no communicator). Returns 0 or a negative code. */
int h_gemm_bench(const h_gemm_cfg_t *o);

#endif
