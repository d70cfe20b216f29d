/* ring_nccl.c: the ring engine's NCCL path (NCCL_ALGO=Ring) over core/ncclw; built with and without
 * CUDA (without, ncclw_new says "built without CUDA/NCCL"). */
#include "ring/ring_nccl.h"
#include "core/err.h"

int ring_nccl_new(ring_nccl_t **self_p, comm_t *comm, int device, int timeout_ms)
{
    CHECK(ncclw_new(self_p, comm, device, "Ring", timeout_ms));
    return 0;
}

int ring_nccl_allreduce(ring_nccl_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                        int timeout_ms)
{
    CHECK(ncclw_allreduce(self, send, recv, count, dt, op, timeout_ms));
    return 0;
}

const char *ring_nccl_impl(ring_nccl_t *self) { return ncclw_algo(self); }

void ring_nccl_destroy(ring_nccl_t **self_p) { ncclw_destroy(self_p); }
