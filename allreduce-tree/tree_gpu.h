/* tree_gpu.h: the tree engine's GPU paths, for tree.c when cfg->device >= 0:
 *  - impl "gpu": a GPU-direct binary tree within one node: ranks share device workspaces and IPC
 *    events through CUDA IPC and reduce straight out of each other's memory with the project's kernels
 *    (core/cuda/reduce.h), several segments in flight, no host staging; several ranks may share one GPU;
 *  - impl "nccl": NCCL with NCCL_ALGO=Tree (unless the user set NCCL_ALGO), through core/ncclw.h.
 * Both are collective over comm (every rank calls new / allreduce / destroy, same counts, same order).
 * Without CUDA (make CUDA=0) the constructors return ERR_UNSUP "built without CUDA/NCCL". */
#ifndef SB_TREE_GPU_H
#define SB_TREE_GPU_H
#include <stddef.h>
#include "core/comm.h"
#include "core/dtype.h"
#include "core/ncclw.h"

typedef struct tree_gpu tree_gpu_t;

/* device: this rank's CUDA device (made current). seg_bytes: pipeline segment (0 = 4 MiB; rounded to
 * 256 bytes); each rank holds a workspace of TREE_GPU_SLOTS segments (its allocation rounded up to
 * 2 MiB). Every rank must be on one node (ERR_UNSUP otherwise: use impl host or nccl across nodes)
 * and GPUs must reach each other by P2P (ERR_UNSUP otherwise). Failures on any rank fail every rank's call. */
#define TREE_GPU_SLOTS 4
int  tree_gpu_new(tree_gpu_t **self_p, comm_t *comm, int device, size_t seg_bytes, int timeout_ms);
/* Blocking allreduce of device buffers on the selected device (send == recv for in place); sum or
 * avg; f32/f16/bf16 (partial sums are stored in dt between tree levels, accumulated in f32 inside
 * each kernel). Returns when recv holds the result. After a timeout the object is broken (ERR_STATE
 * on later calls); destroy it. */
int  tree_gpu_allreduce(tree_gpu_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                        int timeout_ms);
/* e.g. "gpu-ipc tree, 3 ranks on 1 GPU, seg 4 MiB x 4" */
const char *tree_gpu_impl(tree_gpu_t *self);
/* Bytes this rank's kernels and copies read from peers (for stats). */
size_t tree_gpu_bytes(tree_gpu_t *self);
/* Device bytes this rank holds for the tree (its workspace: TREE_GPU_SLOTS x seg_bytes, rounded up to
 * 2 MiB so that CUDA IPC exposes no other allocation of this process). */
size_t tree_gpu_mem_bytes(tree_gpu_t *self);
/* Collective (waits for peers to stop reading this rank's workspace, bounded by the timeout). */
void tree_gpu_destroy(tree_gpu_t **self_p);

/* impl "nccl": core/ncclw.h directly, ncclw_new(..., "Tree", ...). */

#endif
