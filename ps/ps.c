/* ps.c: the parameter-server engine (ps_engine): roles, worker push/pull with tickets, attach, steps,
 * allreduce as push + pull, stats. The push/pull pipeline (submit, wait, allreduce) is in ps_step.c, the servers in
 * ps_server.c + ps_server_apply.c, the ZeroMQ plumbing in ps_van.c, the options in ps_opts.c.
 *
 * Design. Ranks [0, nworkers) are workers. Servers are either the dedicated ranks >= nworkers (the
 * harness calls create, then serve) or, with the ps-colocate option, an actor thread inside every worker (server
 * i in worker i; its own worker reaches it over inproc, so local traffic is not network traffic).
 * Every server publishes its endpoints in the store (tcp, and ipc in a private directory); every worker
 * connects one DEALER per server, over ipc when the server is on its host (same host identity, network
 * namespace included) unless the ps-van option forces one, with a routing id the servers check against
 * the header's sender. With cross-memory reads (descriptors instead of values), a worker also sets up
 * a shared-memory lane per such server (ps_lane.h, --ps-lane) that carries the data messages, ZeroMQ
 * the rest. The van in use is the engine's stats transport ("shm-lane+cma", "zmq-ipc+cma", "zmq-ipc",
 * "zmq-tcp", "zmq-mixed").
 * The f32 parameter arena is cut into partitions (ps_proto.h layout: the partition size, balanced by
 * bytes over the servers). A step: submit() pushes each bucket at once, cut at partition boundaries,
 * zero-copy from the trainer's gradient buffer (which must stay valid until wait returns; a counter of
 * frames ZeroMQ still holds is drained before wait returns): a push ticket is done when its frame is
 * released. Pulls are pipelined behind the pushes (ps-lite/BytePS style): the committing PULL of a
 * partition goes on the same DEALER right behind the partition's last pushed segment (FIFO), so the
 * server can answer it while later partitions are still on the wire towards it, and its reply
 * (server->worker) overlaps the pushes (worker->server) of the rest: every link is full duplex.
 *   async / ssp: a partition's commit-pull leaves in submit() as soon as all its elements are pushed.
 *   sync with f32 gradients and no loss scaling: as async, a partition's commit leaves with its last
 *     push; the server updates the partition once every worker committed it (a sum that is not finite
 *     is skipped, as the ring skips), so updates and replies overlap the step's remaining pushes.
 *   sync with loss scaling (AMP): the commit carries the whole step's overflow flag (PS_F_OVERFLOW:
 *     some local gradient was non-finite, the servers then skip the step on every partition), and the
 *     server applies the optimizer only when every worker committed, so no updated parameter can
 *     exist before every worker's last gradient is known. The commits therefore leave from the
 *     submit() that completes the step's gradients (the earliest point the flag is known).
 *   allreduce (no optimizer, no flag): push k carrying its commit, push k+1, ...: the server answers
 *     partition k as soon as all N workers' pushes of k are in (server stat early_replies counts
 *     replies sent before that worker's pushes of another partition of the round arrived).
 * wait() commits whatever submit() did not (partitions not wholly submitted) and blocks on the pull
 * tickets until every partition's PARAMS arrived (copied into the arena only there: backward may still
 * read the parameters while early replies queue in the socket), or an ERROR, or the timeout. In flight
 * at once: every pushed segment of the step and the pulls behind them.
 * attach: worker 0 INITs every partition with its values and optimizer (a resume: with the saved state,
 * ps_ckpt.c); all workers pull version 0. Checkpoints: every server writes its shard (ps_ckpt.c).
 * allreduce (bench): push every partition of the buffer (AR key space), pull them back.
 * Device buffers (cfg.device >= 0): the PS moves host memory, so workers stage through pinned buffers
 * (dev_host_alloc): submit copies each bucket's gradients device -> pinned and pushes from there (the
 * push of bucket k is on the wire while backward produces bucket k+1); replies land in a pinned copy of
 * the parameters and each partition is copied on to the device asynchronously as soon as it arrives
 * (overlapping the partitions still outstanding); wait/attach return after the last copy. allreduce
 * stages the same way per partition (copy partition k, push it, copy k+1 while k travels). */
#include "ps/ps_int.h"
#include "core/zsec.h"

static _Atomic unsigned s_gen_counter;

/* The rank of server s: a dedicated one after the workers; colocated, inside worker s, or with
 * --ps-local-agg inside machine s's leader. */
int psw_server_rank(const engine_t *self, int s)
{
    if (!self->opt.colocate) return self->nworkers + s;
    return self->lagg && self->leaders ? self->leaders[s] : s;
}

/* ---------- engine ops ---------- */

/* With a job secret: check that server s knows it and prove that we do (ps_proto.h HELLO), before any
 * push or pull goes to it. */
static int s_hello(engine_t *self, int s)
{
    const auth_t *a = &self->comm->boot.auth;
    void *sock = self->conns[s].sock;
    unsigned char nc[AUTH_NONCE_BYTES], ctx[PS_AUTH_CTX_LEN], mac[AUTH_MAC_BYTES];
    auth_challenge(nc);
    ps_auth_ctx(self->job, (uint64_t)self->vid, ctx);
    wire_hdr_t h = psw_hdr(self, WIRE_HELLO, 0, 0, 0, 0, DT_F32, PS_HELLO_CHAL, 1);
    ps_frame_t f = {nc, sizeof nc, 0, NULL, NULL};
    CHECK(ps_van_send(sock, NULL, 0, &h, &f, 1, &self->sent));
    ps_vmsg_t m;
    int rc = ps_van_recv(sock, &m, self->cfg.timeout_ms);
    if (rc == ERR_TIMEOUT) return err_set(rc, "ps: server %d did not answer the hello within %d ms", s, self->cfg.timeout_ms);
    CHECK(rc);
    wire_hdr_t r;
    int ok = m.n == 2 && wire_decode(ps_van_data(&m, 0), ps_van_size(&m, 0), &r) == 0 && r.type == WIRE_HELLO &&
             r.aux == PS_HELLO_CHAL && ps_van_size(&m, 1) == AUTH_NONCE_BYTES + AUTH_MAC_BYTES;
    if (ok) {
        const unsigned char *p = ps_van_data(&m, 1);
        ok = auth_verify(a, "ps-server", nc, p, ctx, sizeof ctx, p + AUTH_NONCE_BYTES) == 0;
        if (ok) auth_respond(a, "ps-client", nc, p, ctx, sizeof ctx, mac);
    }
    ps_van_close_msg(&m);
    if (!ok)
        return err_set(ERR_AUTH, "ps: server %d could not prove it knows the job secret: not talking to it (it has "
                       "another SYNCBENCH_JOB_SECRET or none, or something else listens there)", s);
    h = psw_hdr(self, WIRE_HELLO, 0, 0, 0, 0, DT_F32, PS_HELLO_PROOF, 1);
    f.data = mac;
    f.len = sizeof mac;
    return ps_van_send(sock, NULL, 0, &h, &f, 1, &self->sent);
}

static void ps_destroy(engine_t **self_p);

/* The endpoint worker `self` uses for server s from its published "TCP\nIPC": ipc when the server's
 * rank is on this host (auto) or forced, else tcp; the choice is counted for the stats transport. */
static int s_pick_endpoint(engine_t *self, int s, const char *val, size_t len, char *ep, size_t eplen)
{
    if (len == 0 || len > 1024 || val[len - 1] != 0)
        return err_set(ERR_PROTO, "ps: bad endpoint for server %d in the store", s);
    const char *nl1 = strchr(val, '\n'), *nl2 = nl1 ? strchr(nl1 + 1, '\n') : NULL;
    int spid = 0;
    unsigned long long caddr = 0, cval = 0;
    if (!nl2 || sscanf(nl2 + 1, "%d %llu %llu", &spid, &caddr, &cval) != 3)
        return err_set(ERR_PROTO, "ps: bad endpoint for server %d in the store", s);
    const char *ipc = nl1 + 1;
    size_t tcplen = (size_t)(nl1 - val), ipclen = (size_t)(nl2 - ipc);
    int srank = psw_server_rank(self, s), van = self->opt.van;
    int same = self->comm->node_of && self->comm->node_of[srank] == self->comm->node_of[self->comm->rank];
    int use_ipc = van == PS_VAN_IPC || van == PS_VAN_CMA || (van == PS_VAN_AUTO && same && ipclen);
    if (use_ipc && !same)
        return err_set(ERR_INVAL, "ps: --ps-van %s, but server %d (rank %d) is on another host than worker %d: "
                       "use --ps-van auto or tcp", van == PS_VAN_CMA ? "cma" : "ipc", s, srank, self->comm->rank);
    if (use_ipc ? !ipclen : tcplen == 0)
        return err_set(ERR_PROTO, "ps: server %d published no %s endpoint", s, use_ipc ? "ipc" : "tcp");
    const char *e = use_ipc ? ipc : val;
    size_t n = use_ipc ? ipclen : tcplen;
    if (n >= eplen) return err_set(ERR_PROTO, "ps: endpoint of server %d too long", s);
    memcpy(ep, e, n);
    ep[n] = 0;
    conn_t *c = &self->conns[s];
    c->pid = spid;
    if (use_ipc && (van == PS_VAN_AUTO || van == PS_VAN_CMA)) {
        /* cross-memory reads both ways need the kernel's leave (ptrace rights): try one */
        const char *why = "";
        c->cma = cma_probe((pid_t)spid, caddr, cval, &why);
        if (!c->cma && van == PS_VAN_CMA)
            return err_set(ERR_UNSUP, "ps: --ps-van cma: worker %d cannot read server %d's memory (%s); use --ps-van "
                           "ipc or auto", self->comm->rank, s, why);
        if (!c->cma) LOG_I("ps: worker %d reads server %d through its socket (cross-memory reads: %s)",
                           self->comm->rank, s, why);
    }
    if (c->cma) self->nvan_cma++;
    else if (use_ipc) self->nvan_ipc++;
    else self->nvan_tcp++;
    return 0;
}

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
    if (po.local_agg && po.mode != PS_SYNC) return ps_opts_check(&po);
    engine_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->vid = comm->rank;
    int rc = 0;
    if (po.local_agg) {
        CHECK_GOTO(rc, psl_setup(self, W), fail);
        if (colocate) S = self->nmachines; /* one server a machine, in its leader (BytePS's colocation) */
    }
    self->cfg = *cfg;
    self->cfg.opts = NULL;           /* the caller's blob may not outlive us: copied into opt */
    self->opt = po;
    self->colocate_asked = po.colocate;
    self->opt.colocate = colocate;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = comm->timeout_ms > 0 ? comm->timeout_ms : 60000;
    if (!self->opt.partition_bytes) {
        /* shrunk tensors (emulation) get partitions shrunk alike, not below 16 KiB */
        double sc = cfg->size_scale > 1 ? cfg->size_scale : 1;
        size_t pb = (size_t)((double)PS_DEFAULT_PART_BYTES / sc);
        self->opt.partition_bytes = pb < ((size_t)16 << 10) ? (size_t)16 << 10 : pb & ~(size_t)63;
    }
    self->nworkers = W;
    self->nservers = S;
    self->gen = atomic_fetch_add(&s_gen_counter, 1) + 1;
    self->job = ps_job_id(comm->job, self->gen);
    self->is_server = comm->rank >= W;
    ps_routing_id(self->job, (uint64_t)(self->vid >= 0 ? self->vid : 0), self->id);
    char mode[32];
    if (po.mode == PS_SSP) snprintf(mode, sizeof mode, "ssp:%d", po.ssp_k);
    else snprintf(mode, sizeof mode, "%s", po.mode == PS_SYNC ? "sync" : "async");
    /* colocated: one server per worker, so the count is the world and not part of the name */
    if (colocate) snprintf(self->impl, sizeof self->impl, "ps-%s-colocated", mode);
    else snprintf(self->impl, sizeof self->impl, "ps-%s-servers%d", mode, S);
    /* the label of a run with local aggregation says so (h_engine_label keeps a descriptive impl) */
    if (self->lagg) strncat(self->impl, "-localagg", sizeof self->impl - strlen(self->impl) - 1);
    self->zctx = zmq_ctx_new();
    if (!self->zctx) {
        rc = err_set(ERR_IO, "ps: no ZeroMQ context");
        goto fail;
    }
    if (self->is_server || colocate) CHECK_GOTO(rc, zsec_open(&self->zap, self->zctx, &comm->boot.auth, "ps server"), fail);
    /* with local aggregation a server's workers are the machines' leaders; its averages still over W */
    ps_server_cfg_t sc = {.zctx = self->zctx, .comm = comm, .nservers = S, .nworkers = self->lagg ? self->nmachines : W,
                          .wrank = self->lagg ? self->leaders : NULL, .ndiv = W, .mode = po.mode,
                          .ssp_k = po.ssp_k, .timeout_ms = self->cfg.timeout_ms,
                          .part_bytes = self->opt.partition_bytes, .job = self->job, .gen = self->gen,
                          .local_worker = -1, .van = po.van, .yield_us = ps_yield_us(comm)};
    self->yield_us = sc.yield_us;
    if (self->is_server) {
        sc.index = comm->rank - W;
        CHECK_GOTO(rc, ps_server_new(&self->server, &sc), fail);
        *self_p = self;
        return 0;
    }
    if (colocate && !self->member) {
        sc.index = self->vid;
        sc.local_worker = self->vid;
        CHECK_GOTO(rc, ps_server_new(&self->server, &sc), fail);
        CHECK_GOTO(rc, ps_server_start(self->server), fail);
    }
    if (self->member) { /* it talks to its machine's leader only */
        *self_p = self;
        return 0;
    }
    self->conns = calloc((size_t)S, sizeof *self->conns);
    char (*eps)[300] = calloc((size_t)S, sizeof *eps);
    const char **epp = calloc((size_t)S, sizeof *epp);
    if (!self->conns || !eps || !epp) { rc = ERR_NOMEM; goto fail_eps; }
    for (int s = 0; s < S; s++) {
        conn_t *c = &self->conns[s];
        c->sock = ps_van_socket(self->zctx, ZMQ_DEALER, self->cfg.timeout_ms, ps_max_frame(self->opt.partition_bytes));
        if (!c->sock) { rc = err_set(ERR_IO, "ps: cannot create a socket"); goto fail_eps; }
        CHECK_GOTO(rc, zsec_client(&comm->boot.auth, c->sock, "ps"), fail_eps);
        zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, self->id, PS_ID_LEN);
        char *ep = eps[s];
        epp[s] = ep;
        if (colocate && psw_server_rank(self, s) == comm->rank) {
            c->local = 1;
            snprintf(ep, sizeof *eps, "%s", ps_server_inproc(self->server));
        } else {
            char key[64];
            void *val = NULL;
            size_t len = 0;
            snprintf(key, sizeof key, "ps/%u/srv/%d", self->gen, s);
            CHECK_GOTO(rc, store_get(comm->store, key, &val, &len, self->cfg.timeout_ms), fail_eps);
            if (len == 0 || len >= sizeof *eps || ((char *)val)[len - 1] != 0) {
                free(val);
                rc = err_set(ERR_PROTO, "ps: bad endpoint for server %d in the store", s);
                goto fail_eps;
            }
            rc = s_pick_endpoint(self, s, val, len, ep, sizeof *eps);
            free(val);
            if (rc < 0) goto fail_eps;
        }
        if (zmq_connect(c->sock, ep) != 0) {
            rc = err_set(ERR_IO, "ps: cannot connect to server %d at %s", s, ep);
            goto fail_eps;
        }
    }
    /* liveness: heartbeats from a thread of their own from now on, whatever this thread computes (ps_hb.h) */
    ps_hb_cfg_t hc = {.zctx = self->zctx, .auth = &comm->boot.auth, .job = self->job, .vid = self->vid,
                      .rank = comm->rank, .nservers = S, .eps = epp, .max_frame = 4096};
    int dead_ms;
    ps_hb_times(self->cfg.timeout_ms, &hc.ival_ms, &dead_ms);
    rc = ps_hb_start(&self->hb, &hc);
    free(epp);
    free(eps);
    if (rc < 0) goto fail;
    for (int s = 0; s < S && comm->boot.auth.set; s++) CHECK_GOTO(rc, s_hello(self, s), fail);
    /* the lane only beside descriptors: the messages are then a few hundred bytes and fit its slots */
    for (int s = 0; s < S && po.lane != PS_LANE_OFF; s++) {
        if (self->conns[s].cma) CHECK_GOTO(rc, psw_lane_up(self, s), fail);
        else if (po.lane == PS_LANE_ON && !self->conns[s].local) {
            rc = err_set(ERR_UNSUP, "ps: --ps-lane on, but worker %d reaches server %d without cross-memory reads (%s)",
                         comm->rank, s, self->nvan_tcp ? "another host or --ps-van tcp" : "--ps-van ipc or not permitted");
            goto fail;
        }
    }
    mem_track(&self->mem, (long long)(S * sizeof(conn_t)));
    *self_p = self;
    return 0;
fail_eps:
    free(epp);
    free(eps);
fail:
    ps_destroy(&self);
    return rc;
}

static int ps_attach(engine_t *self, const param_set_t *params)
{
    CHECK(psw_worker_only(self, "attach"));
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
    CHECK(psw_want(self, self->lay.nparts));
    self->pushed = calloc(self->lay.nparts, sizeof *self->pushed);
    self->committed = calloc(self->lay.nparts, 1);
    if (!self->pushed || !self->committed) return err_set(ERR_NOMEM, "ps: no memory for %zu partitions", self->lay.nparts);
    mem_track(&self->mem, (long long)(self->lay.nparts * (sizeof *self->pushed + 1)));
    self->sctx = (step_ctx_t){.step = 0, .inv_scale = 1.0f, .lr = params->optim.lr};
    ps_meta_t meta = psw_meta(self, params->count);
    uint64_t t0 = now_ns(), dl = deadline_in(self->cfg.timeout_ms);
    if (self->comm->rank == 0 && params->restore) {
        /* a resume: the saved values (the servers' own where saved), step count and optimizer state */
        const float *vals = params->restore->params ? params->restore->params : host;
        char now[256];
        psw_layout_text(self, now, sizeof now);
        if (params->restore->layout && strcmp(params->restore->layout, now))
            LOG_I("ps: resuming servers saved as '%s' in '%s': re-sharded", params->restore->layout, now);
        for (size_t k = 0; k < self->lay.nparts; k++) CHECK(psw_init_state(self, k, &meta, vals));
    } else if (self->comm->rank == 0) {
        for (size_t k = 0; k < self->lay.nparts; k++) {
            int s = ps_part_owner(&self->lay, k);
            size_t st = ps_part_start(&self->lay, k), n = ps_part_len(&self->lay, k);
            wire_hdr_t h = psw_hdr(self, WIRE_INIT, k, 0, st, n, DT_F32, (int)params->grad_dtype, 3);
            atomic_fetch_add(&self->zc_inflight, 1);
            ps_frame_t fr[3] = {{&meta, sizeof meta, 0, NULL, NULL},
                                {&params->optim, sizeof params->optim, 0, NULL, NULL},
                                {host + st, n * sizeof(float), 1, psw_zc_free, (void *)&self->zc_inflight}};
            CHECK(psw_send(self, s, &h, fr, 3));
        }
    }
    for (size_t k = 0; k < self->lay.nparts && !self->member; k++) {
        self->want[k] = 1;
        CHECK(psw_pull(self, ps_part_owner(&self->lay, k), 0, k, 0, params->grad_dtype, &meta));
    }
    collect_t c = {.ar = 0, .lay = &self->lay, .dst = host, .dt = DT_F32, .clock_all = 0,
                   .exact = self->opt.mode == PS_SYNC, .dev_dst = self->on_dev ? params->params : NULL,
                   .stream = self->stream, .fwd = self->lagg};
    /* local aggregation: a member gets version 0 from its leader, which hands on what it pulls */
    if (self->member) CHECK(psl_recv_all(self, &c, self->cfg.timeout_ms));
    else CHECK(psw_collect(self, &c, self->lay.nparts, self->cfg.timeout_ms));
    if (self->on_dev) CHECK(dev_stream_wait(self->stream, self->cfg.timeout_ms));
    CHECK(psw_drain_zc(self, dl));
    /* how long version 0 took (the others wait here for worker 0's INIT), against the timeout */
    LOG_I("ps worker %d: attached in %.0f ms (timeout %d ms)", self->comm->rank, (double)(now_ns() - t0) / 1e6,
          self->cfg.timeout_ms);
    psw_step_reset(self);
    self->ps.restore = NULL; /* the caller's, used only here */
    self->clock = 0;
    self->attached = 1;
    return 0;
}

/* A dedicated server's role: serve until every worker said BYE. */
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
    int cma_only = self->nvan_cma - self->nvan_lane;
    int kinds = (self->nvan_lane > 0) + (cma_only > 0) + (self->nvan_ipc > 0) + (self->nvan_tcp > 0);
    out->transport = kinds > 1 ? "zmq-mixed" : self->nvan_lane ? "shm-lane+cma" : cma_only ? "zmq-ipc+cma"
                     : self->nvan_ipc ? "zmq-ipc"
                     : self->nvan_tcp ? "zmq-tcp" : self->server && !self->conns ? "zmq" : "zmq-inproc";
    if (self->member) out->transport = tp_kind(self->comm->tp, self->leader); /* all it uses: to its leader */
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
    engine_counter_add(out, "partition_bytes", (uint64_t)self->opt.partition_bytes); /* the unit a reply follows */
    /* --ps-local-agg: on or off (results without the counter ran without it), this worker's machine's workers,
     * and the bytes it moved inside the machine (to / from its leader or members, not through the NIC) */
    engine_counter_add(out, "ps_local_agg", (uint64_t)self->lagg);
    if (self->lagg && !self->is_server) {
        engine_counter_add(out, "ps_machine_workers", (uint64_t)self->nm + (self->member ? 2 : 1));
        engine_counter_add(out, "ps_local_bytes_sent", self->local_sent);
        engine_counter_add(out, "ps_local_bytes_received", self->local_received);
    }
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
    ps_hb_stop(&self->hb); /* no beat after the BYE (one already on its way is ignored) */
    if (self->conns) {
        /* a clean exit: BYE to every server (bounded by the send timeout) */
        for (int s = 0; s < self->nservers; s++) {
            if (!self->conns[s].sock) continue;
            wire_hdr_t h = psw_hdr(self, WIRE_BYE, 0, self->clock, 0, 0, DT_F32, 0, 0);
            int to = 1000;
            zmq_setsockopt(self->conns[s].sock, ZMQ_SNDTIMEO, &to, sizeof to);
            (void)psw_send(self, s, &h, NULL, 0); /* after every message sent before it (ps_lane.h) */
        }
    }
    /* the colocated server waits (bounded) for every worker's BYE before it stops */
    ps_server_destroy(&self->server);
    if (self->conns) {
        for (int s = 0; s < self->nservers; s++) {
            if (self->conns[s].sock) zmq_close(self->conns[s].sock);
            ps_lane_destroy(&self->conns[s].lane);
        }
        free(self->conns);
    }
    zsec_close(&self->zap);
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
    free(self->win_q);
    free(self->win_opened);
    free(self->win_open);
    free(self->ar_ver);
    psl_free(self);
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
    .step_begin = psw_step_begin,
    .submit = psw_submit,
    .wait = psw_wait,
    .allreduce = psw_allreduce,
    .serve = ps_serve,
    .stats = ps_stats,
    .state_save = psw_state_save,
    .destroy = ps_destroy,
    .schedule = ps_sched,
};
