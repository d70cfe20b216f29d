/* ring.h: the ring allreduce engine: a chunked, pipelined host ring (reduce-scatter + allgather over
 * the transport) and, on GPUs, NCCL. */
#ifndef SB_RING_H
#define SB_RING_H
#include "core/engine.h"

extern const engine_ops_t ring_engine;

/* The host ring collective itself (reused by tests and the bench): out-of-place allowed (sendbuf may
 * equal recvbuf); seg_bytes 0 = default. */
int ring_allreduce_host(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                        redop_t op, size_t seg_bytes, int timeout_ms);

#endif
