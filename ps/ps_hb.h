/* ps_hb.h: a PS worker's heartbeat thread: one small HELLO a server every interval, sent from a thread
 * that never waits on compute, so a server tells a busy worker (alive, beating) from a stopped, hung
 * or dead one (no beat for the deadline, ps_hb_times in ps_proto.h).
 *
 * The thread owns one DEALER a server of its own (ZeroMQ sockets are not thread-safe), made and
 * connected by ps_hb_start on the caller's thread and never touched by it afterwards: a CURVE client
 * of the job's "ps" domain like the data sockets (core/zsec.h), with the heartbeat routing id
 * (ps_hb_routing_id). With a job secret it first runs the PS hello on each of them (roles
 * "ps-hb-client" / "ps-hb-server", ps_proto.h) and beats to a server only once its proof is sent.
 * Every call in the thread is bounded: sends never wait (a full queue drops the beat), polls wait at
 * most until the next beat. An inproc PAIR stops it. */
#ifndef SB_PS_HB_H
#define SB_PS_HB_H
#include <stdint.h>
#include "core/auth.h"

typedef struct ps_hb ps_hb_t;

typedef struct {
    void *zctx;                 /* the engine's ZeroMQ context */
    const auth_t *auth;         /* the job secret (copied); none: no hello */
    uint64_t job;               /* the PS job id of every header */
    int vid;                    /* the worker's id at the servers (its rank; a machine with --ps-local-agg) */
    int rank;                   /* for messages */
    int nservers;
    const char *const *eps;     /* the endpoint the worker reaches server s at (copied) */
    int ival_ms;                /* beat interval */
    int64_t max_frame;          /* ZMQ_MAXMSGSIZE of its sockets */
} ps_hb_cfg_t;

/* Make and connect the sockets, start the thread. */
int  ps_hb_start(ps_hb_t **out, const ps_hb_cfg_t *cfg);
/* Stop the thread (it closes its sockets) and free; NULL-safe. */
void ps_hb_stop(ps_hb_t **hb);

#endif
