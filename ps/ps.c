/* ps.c: the parameter-server engine (ps_engine): roles, worker push/pull with tickets, attach, steps,
 * allreduce as push + pull, stats. The servers live in ps_server.c, the ZeroMQ plumbing in ps_van.c.
 *
 * Design. Ranks [0, nworkers) are workers. Servers are either the dedicated ranks >= nworkers (the
 * harness calls create, then serve) or, with the ps-colocate option, an actor thread inside every worker (server
 * i in worker i; its own worker reaches it over inproc, so local traffic is not network traffic).
 * Every server publishes its tcp endpoint in the store; every worker connects one DEALER per server,
 * with a routing id the servers check against the header's sender.
 * The f32 parameter arena is cut into partitions (ps_proto.h layout: the partition size, balanced by
 * bytes over the servers). A step: submit() pushes each bucket at once, cut at partition boundaries,
 * zero-copy from the trainer's gradient buffer (which must stay valid until wait returns; a counter of
 * frames ZeroMQ still holds is drained before wait returns): a push ticket is done when its frame is
 * released. Pulls are pipelined behind the pushes (ps-lite/BytePS style): the committing PULL of a
 * partition goes on the same DEALER right behind the partition's last pushed segment (FIFO), so the
 * server can answer it while later partitions are still on the wire towards it, and its reply
 * (server->worker) overlaps the pushes (worker->server) of the rest: every link is full duplex.
 *   async / ssp: a partition's commit-pull leaves in submit() as soon as all its elements are pushed.
 *   sync: the commit carries the whole step's overflow flag (PS_F_OVERFLOW: some local gradient was
 *     non-finite, the servers then skip the step on every partition), and the server applies the
 *     optimizer only when every worker committed, so no updated parameter can exist before every
 *     worker's last gradient is known. The commits therefore leave from the submit() that completes
 *     the step's gradients (the earliest point the flag is known), not from wait().
 *   allreduce (no optimizer, no flag): push k, commit-pull k, push k+1, ...: the server answers
 *     partition k as soon as all N workers' pushes of k are in (server stat early_replies counts
 *     replies sent before that worker's pushes of another partition of the round arrived).
 * wait() commits whatever submit() did not (partitions not wholly submitted) and blocks on the pull
 * tickets until every partition's PARAMS arrived (copied into the arena only there: backward may still
 * read the parameters while early replies queue in the socket), or an ERROR, or the timeout. In flight
 * at once: every pushed segment of the step and the pulls behind them.
 * attach: worker 0 INITs every partition with its values and optimizer; all workers pull version 0.
 * allreduce (bench): push every partition of the buffer (AR key space), pull them back.
 * Device buffers (cfg.device >= 0): the PS moves host memory, so workers stage through pinned buffers
 * (dev_host_alloc): submit copies each bucket's gradients device -> pinned and pushes from there (the
 * push of bucket k is on the wire while backward produces bucket k+1); replies land in a pinned copy of
 * the parameters and each partition is copied on to the device asynchronously as soon as it arrives
 * (overlapping the partitions still outstanding); wait/attach return after the last copy. allreduce
 * stages the same way per partition (copy partition k, push it, copy k+1 while k travels). */
#include "ps/ps.h"
#include "ps/ps_proto.h"
#include "ps/ps_server.h"
#include "ps/ps_van.h"
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
} conn_t;

struct engine {
    comm_t *comm;
    engine_cfg_t cfg;
    ps_opts_t opt;                   /* cfg.opts, copied (colocate as resolved) */
    int colocate_asked;              /* the ps-colocate option as given (stats counter "colocate") */
    int is_server;            /* dedicated server rank */
    int nworkers, nservers;
    unsigned gen;
    uint64_t job;
    unsigned char id[PS_ID_LEN];
    void *zctx;
    ps_server_t *server;      /* dedicated, or the colocated actor */
    conn_t *conns;            /* one per server (workers) */
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
    /* device buffers: pinned staging (see the design comment) */
    int on_dev;
    float *h_params;          /* host copy of the parameters: pulls land here, then go to the device */
    void *h_grad;             /* gradients staged for push, count elements of grad_dtype */
    void *ar_send, *ar_recv;  /* allreduce staging */
    size_t ar_bytes;
    void *stream;             /* host -> device copies of pulled partitions */
};

static _Atomic unsigned s_gen_counter;

static int s_server_rank(const engine_t *self, int s) { return self->opt.colocate ? s : self->nworkers + s; }

static void s_zc_free(void *data, void *hint)
{
    (void)data;
    atomic_fetch_sub((_Atomic long *)hint, 1);
}

static int s_send(engine_t *self, int s, const wire_hdr_t *h, const ps_frame_t *fr, int nfr)
{
    uint64_t b = 0;
    int rc = ps_van_send(self->conns[s].sock, NULL, 0, h, fr, nfr, &b);
    if (!self->conns[s].local) self->sent += b;
    if (rc < 0) return err_set(rc, "ps worker %d: send to server %d (rank %d) failed: %s", self->comm->rank, s,
                               s_server_rank(self, s), err_detail());
    return 0;
}

static wire_hdr_t s_hdr(engine_t *self, uint32_t type, uint64_t key, uint64_t clock, uint64_t offset,
                        uint64_t count, dtype_t dt, int aux, uint32_t nframes)
{
    wire_hdr_t h = {.type = type, .sender = (uint32_t)self->comm->rank, .job = self->job, .key = key,
                    .clock = clock, .offset = offset, .count = count, .dtype = (uint32_t)dt, .aux = aux,
                    .nframes = nframes};
    return h;
}

/* Push count elements of dt (zero-copy) into partition key at offset. */
static int s_push(engine_t *self, int s, int flags, uint64_t key, uint64_t clock, size_t offset, size_t count,
                  dtype_t dt, const ps_meta_t *meta, const void *data)
{
    wire_hdr_t h = s_hdr(self, WIRE_PUSH, key, clock, offset, count, dt, flags, 2);
    trace_instant("push", "server", s, "bytes", (int64_t)(count * dt_size(dt)));
    atomic_fetch_add(&self->zc_inflight, 1);
    ps_frame_t fr[2] = {{meta, sizeof *meta, 0, NULL, NULL},
                        {data, count * dt_size(dt), 1, s_zc_free, (void *)&self->zc_inflight}};
    return s_send(self, s, &h, fr, 2);
}

static int s_pull(engine_t *self, int s, int flags, uint64_t key, uint64_t clock, dtype_t dt, const ps_meta_t *meta)
{
    wire_hdr_t h = s_hdr(self, WIRE_PULL, key, clock, 0, 0, dt, flags, 1);
    ps_frame_t fr = {meta, sizeof *meta, 0, NULL, NULL};
    return s_send(self, s, &h, &fr, 1);
}

/* Wait (bounded) until ZeroMQ released every zero-copy frame we handed it. */
static int s_drain_zc(engine_t *self, uint64_t dl)
{
    while (atomic_load(&self->zc_inflight) > 0) {
        if (deadline_passed(dl))
            return err_set(ERR_TIMEOUT, "ps worker %d: %ld zero-copy sends not completed in time", self->comm->rank,
                           (long)atomic_load(&self->zc_inflight));
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

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
} collect_t;

static int s_on_reply(engine_t *self, int s, ps_vmsg_t *m, collect_t *c, size_t *left)
{
    wire_hdr_t h;
    if (m->n < 1 || wire_decode(ps_van_data(m, 0), ps_van_size(m, 0), &h) < 0 || h.job != self->job ||
        h.sender != (uint32_t)s_server_rank(self, s) || m->truncated || (uint32_t)(m->n - 1) != h.nframes) {
        self->rejected++;
        LOG_W("ps worker %d: dropped a malformed reply from server %d", self->comm->rank, s);
        return 0;
    }
    if (h.type == WIRE_ERROR) {
        char text[300] = "";
        if (m->n >= 2) {
            size_t n = ps_van_size(m, 1);
            if (n > sizeof text - 1) n = sizeof text - 1;
            memcpy(text, ps_van_data(m, 1), n);
            text[n] = 0;
        }
        int code = h.aux < 0 && h.aux > -100 ? h.aux : ERR_PROTO;
        return err_set(code, "ps server %d (rank %d) reports: %s", s, s_server_rank(self, s), text);
    }
    int ar = (h.aux & PS_F_AR) ? 1 : 0;
    size_t k = (size_t)h.key;
    if (h.type != WIRE_PARAMS || ar != c->ar || k >= c->lay->nparts || !self->want[k] ||
        ps_part_owner(c->lay, k) != s || h.dtype != (uint32_t)c->dt || h.offset != 0 ||
        wire_check_payload(&h, m->n >= 2 ? ps_van_size(m, 1) : 0, ps_part_len(c->lay, k)) < 0 ||
        h.count != ps_part_len(c->lay, k)) {
        self->rejected++;
        LOG_W("ps worker %d: dropped an unexpected %s from server %d (key %llu)", self->comm->rank,
              wire_type_name(h.type), s, (unsigned long long)h.key);
        return 0;
    }
    uint64_t want_clock = c->clock ? c->clock[k] : c->clock_all;
    if (c->exact && h.clock != want_clock)
        return err_set(ERR_PROTO, "ps server %d: key %zu has version %llu, expected %llu", s, k,
                       (unsigned long long)h.clock, (unsigned long long)want_clock);
    size_t esz = dt_size(c->dt);
    memcpy((char *)c->dst + ps_part_start(c->lay, k) * esz, ps_van_data(m, 1), (size_t)h.count * esz);
    if (c->dev_dst) {
        size_t off = ps_part_start(c->lay, k) * esz;
        CHECK(dev_memcpy_async((char *)c->dev_dst + off, (char *)c->dst + off, (size_t)h.count * esz, c->stream));
    }
    c->flags_or |= h.aux;
    self->want[k] = 0;
    (*left)--;
    return 0;
}

/* Block on the pull tickets (want[k] for k < lay->nparts) until all are answered. */
static int s_collect(engine_t *self, collect_t *c, size_t left, int timeout_ms)
{
    uint64_t dl = deadline_in(timeout_ms);
    int S = self->nservers;
    zmq_pollitem_t items[S];
    /* while we wait, tell every server we are alive: a worker blocked on one (dead) server must not
     * look silent, and so dead, to the others */
    int to = self->cfg.timeout_ms > 0 ? self->cfg.timeout_ms : 60000;
    uint64_t ka_ns = (uint64_t)(to / 6 > 50 ? to / 6 : 50) * 1000000ull, next_ka = now_ns() + ka_ns;
    while (left > 0) {
        if (now_ns() >= next_ka) {
            wire_hdr_t h = s_hdr(self, WIRE_HELLO, 0, self->clock, 0, 0, DT_F32, 0, 0);
            for (int s = 0; s < S; s++) CHECK(s_send(self, s, &h, NULL, 0));
            next_ka = now_ns() + ka_ns;
        }
        for (int s = 0; s < S; s++) items[s] = (zmq_pollitem_t){self->conns[s].sock, 0, ZMQ_POLLIN, 0};
        int ms = deadline_left_ms(dl);
        if (ms == 0) {
            size_t k = 0;
            while (k < c->lay->nparts && !self->want[k]) k++;
            int s = ps_part_owner(c->lay, k);
            return err_set(ERR_TIMEOUT, "ps worker %d: no reply from server %d (rank %d) for partition %zu within %d ms "
                           "(%zu partitions outstanding)", self->comm->rank, s, s_server_rank(self, s), k, timeout_ms, left);
        }
        int pr = zmq_poll(items, S, ms < 0 || ms > 100 ? 100 : ms);
        if (pr < 0) continue;
        for (int s = 0; s < S && left > 0; s++) {
            if (!(items[s].revents & ZMQ_POLLIN)) continue;
            for (;;) {
                ps_vmsg_t m;
                if (ps_van_recv(self->conns[s].sock, &m, 0) < 0) break;
                if (!self->conns[s].local) self->received += m.bytes;
                int rc = s_on_reply(self, s, &m, c, &left);
                ps_van_close_msg(&m);
                if (rc < 0) return rc;
                if (left == 0) break;
            }
        }
    }
    return 0;
}

static int s_want(engine_t *self, size_t n)
{
    if (n > self->nwant) {
        uint8_t *nw = realloc(self->want, n);
        if (!nw) return ERR_NOMEM;
        mem_track(&self->mem, (long long)(n - self->nwant));
        self->want = nw;
        self->nwant = n;
    }
    memset(self->want, 0, self->nwant);
    return 0;
}

/* Start a step: no partition pushed or committed, no pull ticket open. */
static void s_step_reset(engine_t *self)
{
    if (self->pushed) memset(self->pushed, 0, self->lay.nparts * sizeof *self->pushed);
    if (self->committed) memset(self->committed, 0, self->lay.nparts);
    if (self->want) memset(self->want, 0, self->nwant);
    self->ncomplete = 0;
}

/* ---------- engine ops ---------- */

static void ps_destroy(engine_t **self_p);

static int ps_create(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg)
{
    if (!self_p || !comm || !cfg) return err_set(ERR_INVAL, "ps: create needs a communicator and a config");
    ps_opts_t po;
    if (cfg->opts) po = *(const ps_opts_t *)cfg->opts;
    else ps_opts_init(&po);
    if (po.mode != PS_SYNC && po.mode != PS_ASYNC && po.mode != PS_SSP)
        return err_set(ERR_INVAL, "ps: unknown mode %d", po.mode);
    if (po.mode == PS_SSP && po.ssp_k < 0) return err_set(ERR_INVAL, "ps: ssp bound must be >= 0");
    /* servers asked for, at most the world minus one worker (as the harness counts them) */
    int want = po.servers > 0 ? (po.servers >= comm->world ? comm->world - 1 : po.servers) : 0;
    int W = cfg->nworkers > 0 ? cfg->nworkers : (po.colocate ? comm->world : comm->world - want);
    /* no dedicated server rank and none asked for (e.g. a single rank): run colocated */
    int colocate = po.colocate || (W == comm->world && want <= 0);
    if (colocate && !po.colocate && comm->rank == 0)
        LOG_I("ps: no dedicated server ranks: running one server thread inside every worker (colocated)");
    int S;
    if (colocate) {
        if (W != comm->world)
            return err_set(ERR_INVAL, "ps: colocated mode runs a server in every worker (nworkers %d, world %d)", W,
                           comm->world);
        S = W;
    } else {
        S = comm->world - W;
        if (S < 1) return err_set(ERR_INVAL, "ps: no server ranks (world %d, nworkers %d; use --servers or --ps-colocate)",
                                  comm->world, W);
        if (want > 0 && want != S)
            return err_set(ERR_INVAL, "ps: %d servers configured but world %d - %d workers = %d", want,
                           comm->world, W, S);
    }
    if (W < 1) return err_set(ERR_INVAL, "ps: no workers");
    engine_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->cfg = *cfg;
    self->cfg.opts = NULL;           /* the caller's blob may not outlive us: copied into opt */
    self->opt = po;
    self->colocate_asked = po.colocate;
    self->opt.colocate = colocate;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = comm->timeout_ms > 0 ? comm->timeout_ms : 60000;
    if (!self->opt.partition_bytes) self->opt.partition_bytes = PS_DEFAULT_PART_BYTES;
    self->nworkers = W;
    self->nservers = S;
    self->gen = atomic_fetch_add(&s_gen_counter, 1) + 1;
    self->job = ps_job_id(comm->job, self->gen);
    self->is_server = comm->rank >= W;
    ps_routing_id(self->job, comm->rank, self->id);
    char mode[32];
    if (po.mode == PS_SSP) snprintf(mode, sizeof mode, "ssp:%d", po.ssp_k);
    else snprintf(mode, sizeof mode, "%s", po.mode == PS_SYNC ? "sync" : "async");
    /* colocated: one server per worker, so the count is the world and not part of the name */
    if (colocate) snprintf(self->impl, sizeof self->impl, "ps-%s-colocated", mode);
    else snprintf(self->impl, sizeof self->impl, "ps-%s-servers%d", mode, S);
    int rc = 0;
    self->zctx = zmq_ctx_new();
    if (!self->zctx) {
        free(self);
        return err_set(ERR_IO, "ps: no ZeroMQ context");
    }
    ps_server_cfg_t sc = {.zctx = self->zctx, .comm = comm, .nservers = S, .nworkers = W, .mode = po.mode,
                          .ssp_k = po.ssp_k, .timeout_ms = self->cfg.timeout_ms,
                          .part_bytes = self->opt.partition_bytes, .job = self->job, .gen = self->gen,
                          .local_worker = -1};
    if (self->is_server) {
        sc.index = comm->rank - W;
        CHECK_GOTO(rc, ps_server_new(&self->server, &sc), fail);
        *self_p = self;
        return 0;
    }
    if (colocate) {
        sc.index = comm->rank;
        sc.local_worker = comm->rank;
        CHECK_GOTO(rc, ps_server_new(&self->server, &sc), fail);
        CHECK_GOTO(rc, ps_server_start(self->server), fail);
    }
    self->conns = calloc((size_t)S, sizeof *self->conns);
    if (!self->conns) { rc = ERR_NOMEM; goto fail; }
    for (int s = 0; s < S; s++) {
        conn_t *c = &self->conns[s];
        c->sock = ps_van_socket(self->zctx, ZMQ_DEALER, self->cfg.timeout_ms);
        if (!c->sock) { rc = err_set(ERR_IO, "ps: cannot create a socket"); goto fail; }
        zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, self->id, PS_ID_LEN);
        char ep[300];
        if (colocate && s == comm->rank) {
            c->local = 1;
            snprintf(ep, sizeof ep, "%s", ps_server_inproc(self->server));
        } else {
            char key[64];
            void *val = NULL;
            size_t len = 0;
            snprintf(key, sizeof key, "ps/%u/srv/%d", self->gen, s);
            CHECK_GOTO(rc, store_get(comm->store, key, &val, &len, self->cfg.timeout_ms), fail);
            if (len == 0 || len >= sizeof ep || ((char *)val)[len - 1] != 0) {
                free(val);
                rc = err_set(ERR_PROTO, "ps: bad endpoint for server %d in the store", s);
                goto fail;
            }
            memcpy(ep, val, len);
            free(val);
        }
        if (zmq_connect(c->sock, ep) != 0) {
            rc = err_set(ERR_IO, "ps: cannot connect to server %d at %s", s, ep);
            goto fail;
        }
    }
    mem_track(&self->mem, (long long)(S * sizeof(conn_t)));
    *self_p = self;
    return 0;
fail:
    ps_destroy(&self);
    return rc;
}

static int s_worker_only(engine_t *self, const char *what)
{
    if (!self) return err_set(ERR_INVAL, "ps: %s on a NULL engine", what);
    if (self->is_server) return err_set(ERR_STATE, "ps: %s on a server rank (rank %d: call serve)", what, self->comm->rank);
    return 0;
}

static ps_meta_t s_meta(engine_t *self, size_t total)
{
    ps_meta_t m = {.total = total, .step = self->sctx.step, .lr = self->sctx.lr, .inv_scale = self->sctx.inv_scale};
    return m;
}

static int ps_attach(engine_t *self, const param_set_t *params)
{
    CHECK(s_worker_only(self, "attach"));
    if (self->attached) return err_set(ERR_STATE, "ps: already attached");
    if (!params || (!params->params && params->count) || params->count == 0)
        return err_set(ERR_INVAL, "ps: attach needs parameters");
    if (dt_size(params->grad_dtype) == 0) return err_set(ERR_INVAL, "ps: bad gradient dtype");
    self->ps = *params;
    float *host = params->params;
    if (self->cfg.device >= 0) {
        size_t pb = params->count * sizeof(float), gb = params->count * dt_size(params->grad_dtype);
        CHECK(dev_stream_new(&self->stream));
        CHECK(dev_host_alloc((void **)&self->h_params, pb));
        CHECK(dev_host_alloc(&self->h_grad, gb));
        mem_track(&self->mem, (long long)(pb + gb));
        self->on_dev = 1;
        host = self->h_params;
        if (self->comm->rank == 0) CHECK(dev_memcpy(host, params->params, pb));
    }
    ps_layout_init(&self->lay, params->count, sizeof(float), self->opt.partition_bytes, self->nservers);
    CHECK(s_want(self, self->lay.nparts));
    self->pushed = calloc(self->lay.nparts, sizeof *self->pushed);
    self->committed = calloc(self->lay.nparts, 1);
    if (!self->pushed || !self->committed) return err_set(ERR_NOMEM, "ps: no memory for %zu partitions", self->lay.nparts);
    mem_track(&self->mem, (long long)(self->lay.nparts * (sizeof *self->pushed + 1)));
    self->sctx = (step_ctx_t){.step = 0, .inv_scale = 1.0f, .lr = params->optim.lr};
    ps_meta_t meta = s_meta(self, params->count);
    uint64_t dl = deadline_in(self->cfg.timeout_ms);
    if (self->comm->rank == 0) {
        for (size_t k = 0; k < self->lay.nparts; k++) {
            int s = ps_part_owner(&self->lay, k);
            size_t st = ps_part_start(&self->lay, k), n = ps_part_len(&self->lay, k);
            wire_hdr_t h = s_hdr(self, WIRE_INIT, k, 0, st, n, DT_F32, (int)params->grad_dtype, 3);
            atomic_fetch_add(&self->zc_inflight, 1);
            ps_frame_t fr[3] = {{&meta, sizeof meta, 0, NULL, NULL},
                                {&params->optim, sizeof params->optim, 0, NULL, NULL},
                                {host + st, n * sizeof(float), 1, s_zc_free, (void *)&self->zc_inflight}};
            CHECK(s_send(self, s, &h, fr, 3));
        }
    }
    for (size_t k = 0; k < self->lay.nparts; k++) {
        self->want[k] = 1;
        CHECK(s_pull(self, ps_part_owner(&self->lay, k), 0, k, 0, params->grad_dtype, &meta));
    }
    collect_t c = {.ar = 0, .lay = &self->lay, .dst = host, .dt = DT_F32, .clock_all = 0,
                   .exact = self->opt.mode == PS_SYNC, .dev_dst = self->on_dev ? params->params : NULL,
                   .stream = self->stream};
    CHECK(s_collect(self, &c, self->lay.nparts, self->cfg.timeout_ms));
    if (self->on_dev) CHECK(dev_stream_wait(self->stream, self->cfg.timeout_ms));
    CHECK(s_drain_zc(self, dl));
    s_step_reset(self);
    self->clock = 0;
    self->attached = 1;
    return 0;
}

/* Send partition k's committing pull for clock+1 (the pull ticket want[k] opens here). */
static int s_commit(engine_t *self, size_t k, const ps_meta_t *meta)
{
    int flags = PS_F_COMMIT | (self->overflow ? PS_F_OVERFLOW : 0);
    self->want[k] = 1;
    self->committed[k] = 1;
    return s_pull(self, ps_part_owner(&self->lay, k), flags, k, self->clock + 1, self->ps.grad_dtype, meta);
}

static ps_meta_t s_meta(engine_t *self, size_t total);

/* Commit every partition not committed yet this step. */
static int s_commit_rest(engine_t *self)
{
    ps_meta_t meta = s_meta(self, self->ps.count);
    for (size_t k = 0; k < self->lay.nparts; k++)
        if (!self->committed[k]) CHECK(s_commit(self, k, &meta));
    return 0;
}

static int ps_step_begin(engine_t *self, const step_ctx_t *ctx)
{
    CHECK(s_worker_only(self, "step_begin"));
    if (!self->attached) return err_set(ERR_STATE, "ps: step_begin before attach");
    for (size_t k = 0; k < self->lay.nparts; k++)
        if (self->pushed[k] || self->committed[k])
            return err_set(ERR_STATE, "ps: step_begin inside a step (partition %zu already pushed)", k);
    self->sctx = *ctx;
    self->overflow = 0;
    return 0;
}

static int ps_submit(engine_t *self, const bucket_t *b)
{
    CHECK(s_worker_only(self, "submit"));
    if (!self->attached) return err_set(ERR_STATE, "ps: submit before attach");
    if (b->offset > self->ps.count || b->count > self->ps.count - b->offset)
        return err_set(ERR_RANGE, "ps: bucket [%zu, +%zu) outside the %zu parameters", b->offset, b->count,
                       self->ps.count);
    if (b->count == 0) return 0;
    dtype_t dt = self->ps.grad_dtype;
    size_t esz = dt_size(dt);
    bucket_t hb = *b;
    if (self->on_dev) {
        /* stage: device -> pinned (the pinned copy stays put until wait drained the zero-copy pushes) */
        void *h = (char *)self->h_grad + b->offset * esz;
        CHECK(dev_memcpy(h, b->grad, b->count * esz));
        hb.grad = h;
        b = &hb;
    }
    if (self->opt.mode == PS_SYNC && !self->overflow && dt_has_nonfinite(b->grad, b->count, dt)) self->overflow = 1;
    ps_meta_t meta = s_meta(self, self->ps.count);
    size_t k0, k1;
    ps_part_range(&self->lay, b->offset, b->count, &k0, &k1);
    for (size_t k = k0; k < k1; k++) {
        size_t ps = ps_part_start(&self->lay, k), pe = ps + ps_part_len(&self->lay, k);
        size_t lo = b->offset > ps ? b->offset : ps, hi = b->offset + b->count < pe ? b->offset + b->count : pe;
        if (hi <= lo) continue;
        if (self->committed[k] || self->pushed[k] + (hi - lo) > pe - ps)
            return err_set(ERR_RANGE, "ps: bucket [%zu, +%zu) pushes partition %zu twice in one step", b->offset,
                           b->count, k);
        CHECK(s_push(self, ps_part_owner(&self->lay, k), 0, k, self->clock, lo - ps, hi - lo, dt, &meta,
                     (const char *)b->grad + (lo - b->offset) * esz));
        self->pushed[k] += hi - lo;
        if (self->pushed[k] < pe - ps) continue;
        self->ncomplete++;
        /* async / ssp: this partition's pull follows its pushes at once (pipelined) */
        if (self->opt.mode != PS_SYNC) CHECK(s_commit(self, k, &meta));
    }
    /* sync: the step's overflow flag is known once every gradient is pushed: commit everything now */
    if (self->opt.mode == PS_SYNC && self->ncomplete == self->lay.nparts) CHECK(s_commit_rest(self));
    return 0;
}

static int ps_wait(engine_t *self, step_out_t *out, int timeout_ms)
{
    CHECK(s_worker_only(self, "wait"));
    if (!self->attached) return err_set(ERR_STATE, "ps: wait before attach");
    if (timeout_ms <= 0) timeout_ms = self->cfg.timeout_ms;
    double t0 = now_ms();
    uint64_t dl = deadline_in(timeout_ms);
    /* partitions that submit() did not commit (not wholly submitted, or sync before the last bucket) */
    CHECK(s_commit_rest(self));
    collect_t c = {.ar = 0, .lay = &self->lay, .dst = self->on_dev ? self->h_params : self->ps.params, .dt = DT_F32,
                   .clock_all = self->clock + 1, .exact = self->opt.mode == PS_SYNC,
                   .dev_dst = self->on_dev ? self->ps.params : NULL, .stream = self->stream};
    uint64_t tr = trace_t0(); /* timeline: waiting for the servers' parameters */
    CHECK(s_collect(self, &c, self->lay.nparts, timeout_ms));
    trace_x1("pull wait", tr, "parts", (int64_t)self->lay.nparts);
    if (self->on_dev) CHECK(dev_stream_wait(self->stream, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1));
    CHECK(s_drain_zc(self, dl));
    s_step_reset(self);
    self->clock++;
    self->overflow = 0;
    if (c.flags_or & PS_F_STALE) self->stale_waits++;
    double dt = now_ms() - t0;
    self->comm_ms_total += dt;
    if (out) {
        out->skipped = (c.flags_or & PS_F_SKIPPED) ? 1 : 0;
        out->comm_ms = dt;
        out->wait_ms = dt;
    }
    return 0;
}

static int ps_allreduce(engine_t *self, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                        int timeout_ms)
{
    CHECK(s_worker_only(self, "allreduce"));
    size_t esz = dt_size(dt);
    if (!esz) return err_set(ERR_INVAL, "ps: bad dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG) return err_set(ERR_INVAL, "ps: bad op %d", (int)op);
    if (count == 0) return 0;
    if (!sendbuf || !recvbuf) return err_set(ERR_INVAL, "ps: allreduce needs buffers");
    if (timeout_ms <= 0) timeout_ms = self->cfg.timeout_ms;
    const void *src = sendbuf;
    void *dst = recvbuf;
    if (self->cfg.device >= 0) {
        if (count * esz > self->ar_bytes) {
            dev_host_free(&self->ar_send);
            dev_host_free(&self->ar_recv);
            mem_track(&self->mem, -(long long)(2 * self->ar_bytes));
            self->ar_bytes = 0;
            CHECK(dev_host_alloc(&self->ar_send, count * esz));
            CHECK(dev_host_alloc(&self->ar_recv, count * esz));
            self->ar_bytes = count * esz;
            mem_track(&self->mem, (long long)(2 * self->ar_bytes));
        }
        if (!self->stream) CHECK(dev_stream_new(&self->stream));
        src = self->ar_send;
        dst = self->ar_recv;
    }
    double t0 = now_ms();
    uint64_t dl = deadline_in(timeout_ms);
    ps_layout_t l;
    ps_layout_init(&l, count, esz, self->opt.partition_bytes, self->nservers);
    if (l.nparts > self->nar_ver) {
        uint64_t *nv = realloc(self->ar_ver, l.nparts * sizeof *nv);
        if (!nv) return ERR_NOMEM;
        memset(nv + self->nar_ver, 0, (l.nparts - self->nar_ver) * sizeof *nv);
        mem_track(&self->mem, (long long)((l.nparts - self->nar_ver) * sizeof *nv));
        self->ar_ver = nv;
        self->nar_ver = l.nparts;
    }
    CHECK(s_want(self, l.nparts));
    ps_meta_t meta = {.total = count, .step = 0, .lr = 0, .inv_scale = 1.0f};
    int flags = PS_F_AR | PS_F_COMMIT | (op == OP_AVG ? PS_F_AVG : 0);
    for (size_t k = 0; k < l.nparts; k++) {
        size_t off = ps_part_start(&l, k) * esz;
        if (src != sendbuf) /* device: stage this partition, push it, stage the next while it travels */
            CHECK(dev_memcpy((char *)self->ar_send + off, (const char *)sendbuf + off, ps_part_len(&l, k) * esz));
        CHECK(s_push(self, ps_part_owner(&l, k), PS_F_AR, k, self->ar_ver[k], 0, ps_part_len(&l, k), dt, &meta,
                     (const char *)src + off));
        /* the pull right behind its push (same DEALER, FIFO): the server answers k while k+1.. travel */
        self->want[k] = 1;
        CHECK(s_pull(self, ps_part_owner(&l, k), flags, k, self->ar_ver[k] + 1, dt, &meta));
    }
    for (size_t k = 0; k < l.nparts; k++) self->ar_ver[k]++;
    collect_t c = {.ar = 1, .lay = &l, .dst = dst, .dt = dt, .clock = self->ar_ver, .exact = 1,
                   .dev_dst = dst != recvbuf ? recvbuf : NULL, .stream = self->stream};
    CHECK(s_collect(self, &c, l.nparts, timeout_ms));
    if (dst != recvbuf) CHECK(dev_stream_wait(self->stream, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1));
    CHECK(s_drain_zc(self, dl));
    self->comm_ms_total += now_ms() - t0;
    return 0;
}

static int ps_serve(engine_t *self)
{
    if (!self) return err_set(ERR_INVAL, "ps: serve on a NULL engine");
    if (!self->is_server) return err_set(ERR_STATE, "ps: serve on worker rank %d", self->comm->rank);
    return ps_server_run(self->server);
}

static void ps_stats(engine_t *self, engine_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!self) return;
    out->impl = self->impl;
    out->bytes_sent = self->sent;
    out->bytes_received = self->received;
    out->mem_engine_bytes = self->mem.cur;
    out->mem_engine_peak_bytes = self->mem.peak;
    out->comm_ms_total = self->comm_ms_total;
    uint64_t rejected = self->rejected;
    if (self->server) {
        ps_server_stats_t ss;
        ps_server_stats(self->server, &ss);
        out->bytes_sent += ss.bytes_sent;
        out->bytes_received += ss.bytes_received;
        out->mem_engine_bytes += ss.mem_bytes;
        out->mem_engine_peak_bytes += ss.mem_peak_bytes;
        rejected += ss.rejected;
    }
    engine_counter_add(out, "ps_rejected", rejected);         /* malformed or foreign messages rejected */
    engine_counter_add(out, "ps_stale_waits", self->stale_waits); /* SSP: blocked on the staleness bound */
    engine_counter_add(out, "colocate", (uint64_t)self->colocate_asked);
}

int ps_server_counters(engine_t *self, uint64_t *early_replies)
{
    if (!self || !self->server) return err_set(ERR_STATE, "ps: no server in this process");
    ps_server_stats_t ss;
    ps_server_stats(self->server, &ss);
    if (early_replies) *early_replies = ss.early_replies;
    return 0;
}

static void ps_destroy(engine_t **self_p)
{
    engine_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    if (self->conns) {
        /* a clean exit: BYE to every server (bounded by the send timeout) */
        for (int s = 0; s < self->nservers; s++) {
            if (!self->conns[s].sock) continue;
            wire_hdr_t h = s_hdr(self, WIRE_BYE, 0, self->clock, 0, 0, DT_F32, 0, 0);
            int to = 1000;
            zmq_setsockopt(self->conns[s].sock, ZMQ_SNDTIMEO, &to, sizeof to);
            ps_van_send(self->conns[s].sock, NULL, 0, &h, NULL, 0, &self->sent);
        }
    }
    /* the colocated server waits (bounded) for every worker's BYE before it stops */
    ps_server_destroy(&self->server);
    if (self->conns) {
        for (int s = 0; s < self->nservers; s++)
            if (self->conns[s].sock) zmq_close(self->conns[s].sock);
        free(self->conns);
    }
    if (self->zctx) zmq_ctx_term(self->zctx);
    /* after the context: ZeroMQ no longer holds zero-copy frames of the staging buffers */
    if (self->stream) (void)dev_stream_wait(self->stream, 1000);
    dev_stream_destroy(&self->stream);
    dev_host_free((void **)&self->h_params);
    dev_host_free(&self->h_grad);
    dev_host_free(&self->ar_send);
    dev_host_free(&self->ar_recv);
    free(self->want);
    free(self->pushed);
    free(self->committed);
    free(self->ar_ver);
    free(self);
    *self_p = NULL;
}

const engine_ops_t ps_engine = {
    .name = "ps",
    .options = ps_options,
    .opts_size = sizeof(ps_opts_t),
    .opts_init = ps_opts_init,
    .opt_set = ps_opt_set,
    .opts_check = ps_opts_check,
    .extra_ranks = ps_extra_ranks,
    .in_sync = ps_in_sync,
    .create = ps_create,
    .attach = ps_attach,
    .step_begin = ps_step_begin,
    .submit = ps_submit,
    .wait = ps_wait,
    .allreduce = ps_allreduce,
    .serve = ps_serve,
    .stats = ps_stats,
    .destroy = ps_destroy,
};
