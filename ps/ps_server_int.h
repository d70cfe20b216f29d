/* ps_server_int.h: the parameter server's private state, shared by ps_server.c (lifecycle, dispatch,
 * small helpers), ps_server_live.c (liveness, handshakes), ps_server_apply.c (replies, rounds, applying pushes and pulls) and
 * ps_server_fold.c (allreduce pushes read from the worker's memory chunk by chunk). Not
 * for use outside ps_server*.c. */
#ifndef SB_PS_SERVER_INT_H
#define SB_PS_SERVER_INT_H
#include "ps/ps_server.h"
#include "ps/ps_proto.h"
#include "ps/ps_van.h"
#include "ps/ps_hb_srv.h"
#include "ps/ps_lane.h"
#include "ps/ps.h"
#include "core/auth.h"
#include "core/cma.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/optim.h"
#include "core/timer.h"
#include "core/trace.h"
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct {
    int w;
    uint64_t clock;
    int stale;
} pend_t;

/* An allreduce push by descriptor is read from the worker in chunks of this many bytes, each folded
 * (added into the sum or the reply buffer) before the next is read: 256 KiB stays in the L2 cache of
 * the cores this runs on (and well inside any L3), so the add reads back from cache what the kernel
 * just wrote, instead of the whole partition (4 MiB by default) through DRAM; larger chunks spill, much
 * smaller ones pay process_vm_readv's per-call cost (page-table walks, pinning) more often. */
#define PSS_FOLD_CHUNK ((size_t)256 << 10)

/* A reference-counted buffer: replies go out zero-copy holding a reference, so a buffer that a slot
 * drops (allreduce size change, destroy) lives until ZeroMQ has sent the last reply made from it. */
typedef struct {
    _Atomic long refs;
    max_align_t data[];
} rbuf_t;

static inline void *s_rbuf_new(size_t bytes)
{
    rbuf_t *b = calloc(1, sizeof(rbuf_t) + (bytes ? bytes : 1));
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    return b->data;
}
static inline rbuf_t *s_rbuf_of(void *data) { return (rbuf_t *)((char *)data - offsetof(rbuf_t, data)); }
static inline void s_rbuf_unref(void *data, void *hint)
{
    (void)hint;
    if (!data) return;
    rbuf_t *b = s_rbuf_of(data);
    if (atomic_fetch_sub(&b->refs, 1) == 1) free(b);
}

typedef struct {
    int ar;                   /* allreduce key space */
    uint64_t key;
    size_t start, len;        /* elements */
    size_t total;             /* elements of the whole tensor */
    dtype_t dt;               /* params: gradient dtype; AR: payload dtype */
    float *params;            /* params: master values (an rbuf) */
    float *agg;               /* f32 sums of the round in progress (async: conversion scratch) */
    void *out;                /* AR: the result of the last round, in dt (an rbuf) */
    void *old_out;            /* AR: the out of a size that was replaced, kept (an rbuf) until the next
                               * round completes: workers may still be reading it by descriptor */
    optim_t *opt;
    int inited;
    uint64_t version;         /* rounds completed */
    uint64_t applied;         /* optimizer steps applied (Adam's t) */
    uint64_t step0;           /* a resume: the steps applied before it (async Adam's t continues from there) */
    uint8_t *committed;       /* per worker, this round */
    size_t *got;              /* per worker: elements pushed this round */
    uint64_t *wclock;         /* async/ssp: commits per worker */
    int ncommit, overflow, avg, touched, last_skipped;
    int fresh;                /* agg holds no push of this round yet (not cleared: the first push copies) */
    int out_done;             /* AR: the last push already wrote this round's result into out */
    int move;                 /* AR: this round only moves bytes (PS_F_MOVE): no sum, out keeps its values */
    int broken;               /* AR: 1 + the worker whose push was cut short after part of it was summed:
                               * the round's sum is lost, its pushes and commits are refused */
    ps_meta_t meta;
    pend_t *pend;
    size_t npend, cappend;
    size_t mem;
} slot_t;

/* One connection's HELLO handshake (ps_hb_srv.h): a challenge answered (nonces); its proof accepted. */
typedef ps_hello_t pss_hello_t;

typedef struct {
    uint64_t last_ns;         /* its last message on its data connection */
    int seen, bye, dead;
    int npend;                /* pulls of this worker pending here */
    pss_hello_t hello;        /* its data connection's handshake */
    pss_hello_t hb_hello;     /* its heartbeat connection's (ps_hb.h) */
    uint64_t hb_ns;           /* its last heartbeat */
    int hb_seen, hb_ival_ms;  /* heard beating; the interval its beats announce */
    uint64_t need_ns;         /* never heard beating: since when others wait on it (0: they do not) */
    int cma;                  /* it asked for replies by descriptor (PS_F_CMA): it reads our memory */
    uint64_t cma_pid;         /* the process its descriptors name (fixed by the first one) */
    ps_lane_t *lane;          /* its shared-memory lane (ps_lane.h), or NULL */
    uint64_t zgot, ztx;       /* ZeroMQ messages received from / sent to it since its lane is up */
} wk_t;

struct ps_server {
    ps_server_cfg_t cfg;
    uint64_t job;
    int rank;
    auth_t auth;              /* the job secret (none: every worker counts as authenticated) */
    void *router;
    char endpoint[512];       /* published: "TCP_EP\nIPC_EP" (either may be empty) */
    char ipc_dir[160];        /* private (0700) directory of the ipc socket; "" when none */
    char ipc_path[200];
    char inproc[64];
    unsigned char (*ids)[PS_ID_LEN];
    wk_t *wk;
    ps_lane_t **lanes;        /* wk[w].lane for every w (for the poll); nlanes of them set */
    int nlanes;
    /* params */
    int lay_set;
    ps_layout_t lay;
    dtype_t grad_dt;
    int optim_kind;           /* optim_kind_t of the INITs (checkpoint shards record it) */
    slot_t *pslots;           /* owned partitions: key = index + j * nservers */
    size_t npslots;
    /* allreduce */
    slot_t **arslots;
    size_t nar, capar;
    size_t npend_total;
    /* failure */
    int failed;
    char fail_text[256];
    uint64_t fail_ns, start_ns, last_check_ns;
    /* liveness (ps_server_live.c): the heartbeat deadline (ps_hb_times), when the socket was last drained */
    int hb_dead_ms;
    uint64_t drained_ns;
    uint64_t hb_gap_ns;       /* the longest time between two beats of one worker seen so far, and whose */
    int hb_gap_w;
    /* actor */
    pthread_t thread;
    int thread_on;
    void *pipe_owner, *pipe_thread;
    int run_rc;
    void *scratch;            /* cross-memory reads of pushes land here (allreduce: one chunk at a time) */
    size_t scratch_len;
    cma_desc_t defer;         /* the push being handled (allreduce, sync training): its checked descriptor, bytes not read */
    int deferred;             /* defer is set for this message (pss_fold_cma reads it) */
    /* stats */
    _Atomic uint64_t sent, received, rejected, skipped, early;
    pthread_mutex_t mu;
    mem_counter_t mem;
};

/* The rank of the server's worker w (its index at the server), for messages. */
static inline int pss_wrank(const ps_server_t *self, int w) { return self->cfg.wrank && w >= 0 ? self->cfg.wrank[w] : w; }
/* What a sum is averaged over: every worker behind the pushes. */
static inline float pss_inv_div(const ps_server_t *self)
{
    return 1.0f / (float)(self->cfg.ndiv > 0 ? self->cfg.ndiv : self->cfg.nworkers);
}

/* In a message handler (self, w, ident, idlen, h in scope): reject the message and return. */
#define REJ(code, ...) return pss_reject(self, w, ident, idlen, h, code, __VA_ARGS__)

/* ps_server.c */
void pss_mem(ps_server_t *self, long long delta);
void pss_send(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h,
                   const ps_frame_t *fr, int nfr);
int pss_reject(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *req, int code,
                    const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void pss_slot_free(ps_server_t *self, slot_t *s);
int pss_slot_alloc(ps_server_t *self, slot_t *s, int ar, uint64_t key, size_t start, size_t len, size_t total,
                        dtype_t dt);
void pss_round_reset(slot_t *s, int W);

/* ps_server_live.c: liveness and the handshakes */
int pss_ar_pending(ps_server_t *self);
int pss_needs(ps_server_t *self, int w);
/* drained: this loop's receive emptied the socket (beats still queued are not missed ones) */
void pss_check_liveness(ps_server_t *self, int drained);
int pss_all_gone(ps_server_t *self);
/* A CHAL or PROOF on worker w's data connection (ps_hello_step): answered through pss_send, or refused. */
int pss_on_auth(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m);
/* A message on worker wi's heartbeat connection (ps_hb_step): answered straight back to ident. */
int pss_on_hb(ps_server_t *self, int wi, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m);
/* One info line: workers heard beating, the longest gap between two beats of one, the deadline. */
void pss_hb_report(ps_server_t *self);

/* ps_server_apply.c */
void pss_serve_all(ps_server_t *self);
int pss_check_meta(ps_vmsg_t *m, ps_meta_t *meta);
int pss_on_ar(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m,
                   const ps_meta_t *meta);
int pss_on_lane(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m);
int pss_on_params(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m,
                       const ps_meta_t *meta);

/* ps_server_ckpt.c: worker 0's SAVE: write this server's checkpoint shard, answer with its size and hash */
int pss_on_save(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m);

/* ps_server_fold.c */
void pss_accumulate(float *agg, const void *src, size_t n, dtype_t dt);
void pss_agg_push(slot_t *s, size_t off, const void *src, size_t n, dtype_t dt);
int pss_scratch(ps_server_t *self, size_t bytes);
/* 0: read and folded; 1: refused (answered and counted), nothing of the push counted. */
/* A sync training push by descriptor (self->defer) of h->count elements at h->offset into slot s, once
 * checked: the round's first whole f32 push is read into the sum itself, any other in PSS_FOLD_CHUNK
 * pieces through the scratch, each added before the next is read. 0: folded; 1: refused and answered
 * (nothing of it added); a read cut short midway fails the job, naming the worker (part of the push is
 * in the sum and the round cannot complete). */
int pss_fold_push(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, slot_t *s);
/* Fail the job (once): every pending pull and every live worker is told; the text names the cause. */
void pss_fail(ps_server_t *self, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int pss_fold_cma(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, slot_t *s,
                 int last);

#endif
