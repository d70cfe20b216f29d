/* ps.h: the parameter-server engine over ZeroMQ: sharded servers own partitions of the parameters and
 * their optimizer state; workers push gradients and pull parameters (sync, async, bounded staleness). */
#ifndef SB_PS_H
#define SB_PS_H
#include "core/engine.h"

extern const engine_ops_t ps_engine;

#endif
