/* ps.h: the parameter-server engine over ZeroMQ: sharded servers own partitions of the parameters and
 * their optimizer state; workers push gradients and pull parameters (sync, async, bounded staleness). */
#ifndef SB_PS_H
#define SB_PS_H
#include "core/engine.h"

extern const engine_ops_t ps_engine;

enum { PS_SYNC = 0, PS_ASYNC = 1, PS_SSP = 2 };
/* How workers reach a server. auto: on the same host (host identity includes the network namespace, so
 * emulated machines still talk over their shaped links) ZeroMQ over ipc (Unix-domain sockets) for the
 * messages, with the bulk values read across processes in one copy (core/cma.h) when the kernel allows
 * it (cma), else through the socket (ipc); tcp across hosts. Or one of them forced. */
enum { PS_VAN_AUTO = 0, PS_VAN_TCP = 1, PS_VAN_IPC = 2, PS_VAN_CMA = 3 };
/* The shared-memory lane (ps_lane.h) for the data messages to a server on this host with cma: auto (when
 * possible), on (required wherever a server is on this host), off (ZeroMQ only). */
enum { PS_LANE_AUTO = 0, PS_LANE_ON = 1, PS_LANE_OFF = 2 };

/* The PS engine's options (engine_cfg_t.opts; the harness flags --servers, --ps-colocate, --ps-mode,
 * --ps-partition-kb fill them through ps_engine.opt_set). All zero = the defaults. */
typedef struct {
    int    servers;           /* dedicated server processes; 0 = default (1, or none when colocated) */
    int    colocate;          /* one server thread inside each worker */
    int    mode;              /* PS_SYNC, PS_ASYNC, PS_SSP */
    int    ssp_k;             /* staleness bound for PS_SSP */
    size_t partition_bytes;   /* partition size; 0 = default (4 MiB) */
    int    van;               /* PS_VAN_AUTO, PS_VAN_TCP, PS_VAN_IPC, PS_VAN_CMA */
    int    lane;              /* PS_LANE_AUTO, PS_LANE_ON, PS_LANE_OFF */
    int    window;            /* --ps-window W: a worker keeps at most W partitions a server pushed and not yet
                               * answered (sync, f32 gradients, host memory); 0 = no limit */
    int    local_agg;         /* --ps-local-agg: the workers of a machine (comm_t.node_of) reduce at the machine's
                               * leader (its lowest rank), which alone pushes and pulls, then hands the result to
                               * them (ps_local.c); sync only; colocated: one server a machine, in its leader */
} ps_opts_t;

/* ps_opts.c: the option table and hooks ps_engine exports */
extern const engine_opt_t ps_options[];
void ps_opts_init(void *opts);
int  ps_opt_set(void *opts, const char *name, const char *value);
int  ps_opts_check(const void *opts);
int  ps_extra_ranks(const void *opts, int world);
int  ps_in_sync(const void *opts);

/* PS-only counters of the server in this process (a dedicated server rank, or the colocated thread):
 * early_replies = pull replies the server sent to a worker before that worker's pushes of another
 * partition of the same round (step or allreduce) had arrived: pulls overlapping pushes. ERR_STATE
 * when this process runs no server. */
int ps_server_counters(engine_t *self, uint64_t *early_replies);

/* ps_sched.c: the engine's schedule entry (engine_ops_t.schedule): push, then pull (async and SSP: sched_t.stale). */
int ps_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *out);

#endif
