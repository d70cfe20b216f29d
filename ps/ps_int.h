/* ps_int.h: the PS engine's private worker-side state, shared by ps.c (roles, create, attach, serve,
 * stats, destroy) and ps_step.c (the push/pull pipeline: tickets, replies, submit, wait, allreduce).
 * Not for use outside ps.c / ps_step.c. */
#ifndef SB_PS_INT_H
#define SB_PS_INT_H
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "ps/ps_server.h"
#include "ps/ps_van.h"
#include "ps/ps_lane.h"
#include "ps/ps_hb.h"
#include "core/auth.h"
#include "core/cma.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/timer.h"
#include "core/trace.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    void *sock;
    int local;                /* the colocated server of this process (inproc) */
    int cma;                  /* payloads both ways by descriptor: the server reads ours, we read its */
    int pid;                  /* the server's process (its replies' descriptors must name it) */
    ps_lane_t *lane;          /* the shared-memory lane to this server (ps_lane.h), or NULL */
    uint64_t ztx, zrx;        /* ZeroMQ messages sent to / received from it since the lane is up */
} conn_t;

typedef struct {
    int ar;                   /* expecting allreduce replies */
    const ps_layout_t *lay;
    void *dst;                /* the whole tensor: reply k lands at start(k) */
    dtype_t dt;               /* dtype of dst / the replies */
    const uint64_t *clock;    /* expected clock per key (NULL: any, async) */
    uint64_t clock_all;       /* expected clock for every key when clock == NULL and exact != 0 */
    int exact;
    int flags_or;             /* OR of the replies' flags */
    void *dev_dst;            /* non-NULL: also copy each reply on to the device tensor (async on stream) */
    void *stream;
    int fwd;                  /* --ps-local-agg leader: hand each reply on to the machine's workers (psl_forward) */
    engine_saved_t *save;     /* expecting the servers' SAVE answers (ps_ckpt.c), out->files[s] per server */
    uint8_t *saved;           /* per server: answered */
} collect_t;

struct engine {
    comm_t *comm;
    engine_cfg_t cfg;
    ps_opts_t opt;                   /* cfg.opts, copied (colocate as resolved) */
    int yield_us;                    /* ps_yield_us: poll-and-yield before blocking for replies */
    int colocate_asked;              /* the ps-colocate option as given (stats counter "colocate") */
    int is_server;            /* dedicated server rank */
    int nworkers, nservers;
    unsigned gen;
    uint64_t job;
    unsigned char id[PS_ID_LEN];
    void *zctx;
    struct zsec *zap;              /* the ZAP handler of zctx (NULL without a secret) */
    ps_server_t *server;      /* dedicated, or the colocated actor */
    conn_t *conns;            /* one per server (workers) */
    ps_hb_t *hb;              /* the heartbeat thread (workers that talk to servers, ps_hb.h) */
    /* attached parameters */
    int attached;
    param_set_t ps;
    ps_layout_t lay;
    uint64_t clock;           /* steps completed */
    step_ctx_t sctx;
    int overflow;
    /* pull tickets: per partition, waiting for its reply */
    uint8_t *want;
    size_t nwant;
    /* this step: elements pushed per partition, partitions whose commit-pull went, partitions complete */
    size_t *pushed;
    uint8_t *committed;
    size_t ncomplete;
    /* allreduce: rounds completed per key */
    uint64_t *ar_ver;
    size_t nar_ver;
    _Atomic long zc_inflight;
    uint64_t sent, received, rejected, stale_waits;
    double comm_ms_total;
    mem_counter_t mem;
    char impl[96];
    int nvan_ipc, nvan_tcp, nvan_cma, nvan_lane; /* servers this worker reaches over ipc / tcp / ipc + cross-memory */
    /* device buffers: pinned staging (see the design comment) */
    int on_dev;
    float *h_params;          /* host copy of the parameters: pulls land here, then go to the device */
    void *h_grad;             /* gradients staged for push, count elements of grad_dtype */
    void *ar_send, *ar_recv;  /* allreduce staging */
    size_t ar_bytes;
    void *stream;             /* host -> device copies of pulled partitions */
    /* --ps-window (ps_step.c): this step's window (0: none); per server the partitions opened (a piece or
     * its commit sent) and not answered, and its held pieces' list (head, tail: indices into win_q, one
     * allocation with win_open); per partition 0 / 1 open / 2 answered; this step's pieces (win_n of them,
     * win_held not sent yet) and replies (taken while submitting too) */
    int win;
    size_t *win_open, *win_head, *win_tail;
    uint8_t *win_opened;
    struct psw_piece *win_q;
    size_t win_n, win_cap, win_got, win_held;
    collect_t win_c;
    ps_meta_t win_meta;
    /* --ps-local-agg (ps_local.c): this worker's id at the servers (its rank, or its machine's index), its
     * machine's leader (lowest rank), whether it is a member (not the leader: it talks to its leader only,
     * over the communicator's transport), the machine's other workers ascending (a leader's members), every
     * machine's leader by index; a leader's machine sums (this step's, in the gradient dtype, and an
     * allreduce's), pushed from there; a member's per-partition count of result elements in */
    int lagg, vid, leader, member, nm, nmachines;
    int *mranks, *leaders;
    const void **lsrcs;
    void *lsum, *lar;
    size_t lsum_bytes, lar_bytes, nlgot;
    size_t *lgot;
    uint64_t local_sent, local_received;
};


/* ps.c */
int psw_server_rank(const engine_t *self, int s);

/* ps_local.c: machine-local aggregation (--ps-local-agg) */
int psl_setup(engine_t *self, int W);
void psl_free(engine_t *self);
int psl_sums(engine_t *self, void **buf, size_t *have, size_t bytes);
int psl_send(engine_t *self, uint64_t key, size_t off, size_t count, dtype_t dt, const void *data, uint64_t dl);
int psl_reduce(engine_t *self, uint64_t key, size_t off, size_t count, dtype_t dt, int move, const void *own,
               void *dst, uint64_t dl);
int psl_forward(engine_t *self, uint64_t key, const void *src, size_t count, dtype_t dt, int flags, uint64_t clock);
int psl_recv_all(engine_t *self, collect_t *c, int timeout_ms);


/* ps_ckpt.c: checkpoints of the servers' state */
int psw_state_save(engine_t *self, const char *base, engine_saved_t *out);
int psw_on_saved(engine_t *self, int s, const wire_hdr_t *h, ps_vmsg_t *m, collect_t *c, size_t *left);
int psw_init_state(engine_t *self, size_t k, const ps_meta_t *meta, const float *values);
void psw_layout_text(const engine_t *self, char *buf, size_t len);

/* ps_step.c */
int psw_lane_up(engine_t *self, int s);
void psw_zc_free(void *data, void *hint);
int psw_send(engine_t *self, int s, const wire_hdr_t *h, const ps_frame_t *fr, int nfr);
wire_hdr_t psw_hdr(engine_t *self, uint32_t type, uint64_t key, uint64_t clock, uint64_t offset,
                        uint64_t count, dtype_t dt, int aux, uint32_t nframes);
int psw_pull(engine_t *self, int s, int flags, uint64_t key, uint64_t clock, dtype_t dt, const ps_meta_t *meta);
int psw_drain_zc(engine_t *self, uint64_t dl);
int psw_collect(engine_t *self, collect_t *c, size_t left, int timeout_ms);
int psw_want(engine_t *self, size_t n);
void psw_step_reset(engine_t *self);
int psw_worker_only(engine_t *self, const char *what);
ps_meta_t psw_meta(engine_t *self, size_t total);
int psw_step_begin(engine_t *self, const step_ctx_t *ctx);
int psw_submit(engine_t *self, const bucket_t *b);
int psw_wait(engine_t *self, step_out_t *out, int timeout_ms);
int psw_allreduce(engine_t *self, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                        int timeout_ms);

#endif
