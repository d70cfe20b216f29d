/* tree_gpu_nocuda.c: the GPU-direct tree of a host-only build: the constructor says it was built
 * without CUDA. */
#include "allreduce-tree/tree_gpu.h"
#include "core/err.h"

int tree_gpu_new(tree_gpu_t **self_p, comm_t *comm, int device, size_t seg_bytes, int timeout_ms)
{
    (void)comm; (void)device; (void)seg_bytes; (void)timeout_ms;
    if (self_p) *self_p = NULL;
    return err_set(ERR_UNSUP, "built without CUDA/NCCL");
}

int tree_gpu_allreduce(tree_gpu_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                       int timeout_ms)
{
    (void)self; (void)send; (void)recv; (void)count; (void)dt; (void)op; (void)timeout_ms;
    return err_set(ERR_UNSUP, "built without CUDA/NCCL");
}

const char *tree_gpu_impl(tree_gpu_t *self) { (void)self; return "none (built without CUDA/NCCL)"; }
size_t tree_gpu_bytes(tree_gpu_t *self) { (void)self; return 0; }
size_t tree_gpu_mem_bytes(tree_gpu_t *self) { (void)self; return 0; }
void tree_gpu_destroy(tree_gpu_t **self_p) { if (self_p) *self_p = NULL; }
