/* ring_nccl.h: the ring engine's GPU path: a NCCL communicator with NCCL_ALGO=Ring (unless the user set
 * NCCL_ALGO), built from our bootstrap; used by ring.c when cfg->device >= 0. A thin layer over
 * core/ncclw.h (shared with the tree engine's "nccl" impl): non-blocking communicator, dedicated
 * stream, deadline polling, ncclCommAbort on timeout, NCCL errors as ERR_NCCL with NCCL's text.
 * Without CUDA/NCCL ring_nccl_new returns ERR_UNSUP "built without CUDA/NCCL". */
#ifndef SB_RING_NCCL_H
#define SB_RING_NCCL_H
#include "core/ncclw.h"

typedef ncclw_t ring_nccl_t;

/* Collective over comm; device is this rank's CUDA device (cfg->device). */
int  ring_nccl_new(ring_nccl_t **self_p, comm_t *comm, int device, int timeout_ms);
/* Blocking allreduce of device buffers (send == recv for in place). */
int  ring_nccl_allreduce(ring_nccl_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                         int timeout_ms);
/* "nccl Ring", or what the user's NCCL_ALGO made it (for engine_stats_t.impl). */
const char *ring_nccl_impl(ring_nccl_t *self);
void ring_nccl_destroy(ring_nccl_t **self_p);

#endif
