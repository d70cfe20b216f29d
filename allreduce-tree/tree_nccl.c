/* tree_nccl.c: the tree engine's "nccl" impl: NCCL with NCCL_ALGO=Tree over core/ncclw (built with and
 * without CUDA; without, ncclw_new says "built without CUDA/NCCL"). */
#include "allreduce-tree/tree_gpu.h"
#include "core/err.h"

int tree_nccl_new(tree_nccl_t **self_p, comm_t *comm, int device, int timeout_ms)
{
    CHECK(ncclw_new(self_p, comm, device, "Tree", timeout_ms));
    return 0;
}

int tree_nccl_allreduce(tree_nccl_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                        int timeout_ms)
{
    CHECK(ncclw_allreduce(self, send, recv, count, dt, op, timeout_ms));
    return 0;
}

const char *tree_nccl_impl(tree_nccl_t *self) { return ncclw_algo(self); }

void tree_nccl_destroy(tree_nccl_t **self_p) { ncclw_destroy(self_p); }
