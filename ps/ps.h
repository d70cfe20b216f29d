/* ps.h: the parameter-server engine over ZeroMQ: sharded servers own partitions of the parameters and
 * their optimizer state; workers push gradients and pull parameters (sync, async, bounded staleness). */
#ifndef SB_PS_H
#define SB_PS_H
#include "core/engine.h"

extern const engine_ops_t ps_engine;

/* PS-only counters of the server in this process (a dedicated server rank, or the colocated thread):
 * early_replies = pull replies the server sent to a worker before that worker's pushes of another
 * partition of the same round (step or allreduce) had arrived: pulls overlapping pushes. ERR_STATE
 * when this process runs no server. */
int ps_server_counters(engine_t *self, uint64_t *early_replies);

#endif
