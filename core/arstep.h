/* arstep.h: the step machinery shared by every allreduce engine (ring, tree, mpi): buckets submitted
 * during backward are queued to a communication thread that allreduces each one (average) as soon
 * as it arrives and applies the shared optimizer to its range, so communication overlaps backward;
 * wait() blocks until every bucket of the step is done. Engines supply only the collective. */
#ifndef SB_ARSTEP_H
#define SB_ARSTEP_H
#include "core/engine.h"

/* The engine's collective, called on the communication thread only (so the engine's transport is
 * used by one thread); out-of-place (sendbuf != recvbuf) or in-place. */
typedef int (*arstep_allreduce_fn)(void *ctx, const void *sendbuf, void *recvbuf, size_t count,
                                   dtype_t dt, redop_t op, int timeout_ms);

typedef struct arstep arstep_t;

int  arstep_new(arstep_t **self_p, comm_t *comm, const engine_cfg_t *cfg, arstep_allreduce_fn fn, void *ctx);
void arstep_destroy(arstep_t **self_p);
/* attach: broadcasts rank 0's parameters (through fn: ranks other than 0 contribute zeros, sum), and
 * creates the optimizer state. */
int  arstep_attach(arstep_t *self, const param_set_t *params);
int  arstep_step_begin(arstep_t *self, const step_ctx_t *ctx);
int  arstep_submit(arstep_t *self, const bucket_t *b);
int  arstep_wait(arstep_t *self, step_out_t *out, int timeout_ms);
/* Run one collective on the communication thread and wait for it (bench, tests). */
int  arstep_allreduce(arstep_t *self, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                      redop_t op, int timeout_ms);
void arstep_stats(arstep_t *self, engine_stats_t *out);
int  arstep_optim_state(arstep_t *self, float **bufs, int *nbuf, size_t *count);

/* The entries every arstep-based engine forwards unchanged, for a `struct engine` holding its arstep in
 * member `m`: defines static s_attach, s_step_begin, s_submit, s_wait and s_optim_state. */
#define ARSTEP_FORWARDERS(m)                                                                          \
    static int s_attach(engine_t *self, const param_set_t *p) { return arstep_attach(self->m, p); }   \
    static int s_step_begin(engine_t *self, const step_ctx_t *c) { return arstep_step_begin(self->m, c); } \
    static int s_submit(engine_t *self, const bucket_t *b) { return arstep_submit(self->m, b); }     \
    static int s_wait(engine_t *self, step_out_t *o, int t) { return arstep_wait(self->m, o, t); }   \
    static int s_optim_state(engine_t *self, float **bufs, int *nbuf, size_t *count)                \
    {                                                                                                 \
        return arstep_optim_state(self->m, bufs, nbuf, count);                                        \
    }
/* The allreduce entry for an engine that passes the caller's timeout through unchanged: static s_allreduce. */
#define ARSTEP_FORWARD_ALLREDUCE(m)                                                                   \
    static int s_allreduce(engine_t *self, const void *s, void *r, size_t n, dtype_t dt, redop_t op, int t) \
    {                                                                                                 \
        return arstep_allreduce(self->m, s, r, n, dt, op, t);                                         \
    }
/* The vtable entries of an arstep-based engine (engine_ops_t designated initializers), naming the
 * forwarders above and the engine's own s_create, s_allreduce, s_stats and s_destroy. */
#define ARSTEP_ENGINE_OPS                                                                             \
    .create = s_create, .attach = s_attach, .step_begin = s_step_begin, .submit = s_submit,          \
    .wait = s_wait, .allreduce = s_allreduce, .serve = NULL, .stats = s_stats,                        \
    .optim_state = s_optim_state, .destroy = s_destroy

#endif
