/* ps_step.c: the PS engine's worker pipeline: headers, pushes and pulls on the servers' DEALERs,
 * zero-copy frame accounting, collecting replies against tickets, and the per-step ops (step_begin,
 * submit, wait) and allreduce (see ps.c for the design). */
#include "ps/ps_int.h"

#define s_server_rank psw_server_rank

void psw_zc_free(void *data, void *hint)
{
    (void)data;
    atomic_fetch_sub((_Atomic long *)hint, 1);
}

/* Every message to server s leaves here: through its lane when there is one and the message fits (a
 * keep-alive after it when the server sleeps), else over ZeroMQ, counted (ztx) for the lane's ordering
 * rule (ps_lane.h). */
int psw_send(engine_t *self, int s, const wire_hdr_t *h, const ps_frame_t *fr, int nfr)
{
    uint64_t b = 0;
    conn_t *c = &self->conns[s];
    int wake = 0, rc = 0;
    if (c->lane && ps_lane_send(c->lane, h, fr, nfr, c->ztx, &b, &wake)) {
        if (wake) {
            wire_hdr_t k = psw_hdr(self, WIRE_HELLO, 0, self->clock, 0, 0, DT_F32, PS_HELLO_KEEPALIVE, 0);
            rc = ps_van_send(c->sock, NULL, 0, &k, NULL, 0, NULL); /* not data: not counted as traffic */
            c->ztx++;
        }
    } else {
        rc = ps_van_send(c->sock, NULL, 0, h, fr, nfr, &b);
        c->ztx++;
    }
    /* keep-alives are not traffic (the server does not count them either) */
    if (h->type == WIRE_HELLO && h->aux == PS_HELLO_KEEPALIVE && nfr == 0) b = 0;
    if (!self->conns[s].local && b) {
        self->sent += b;
        tp_note_traffic(self->comm->tp, s_server_rank(self, s), b, 0); /* the traffic matrix */
    }
    if (rc < 0) return err_set(rc, "ps worker %d: send to server %d (rank %d) failed: %s", self->comm->rank, s,
                               s_server_rank(self, s), err_detail());
    return 0;
}

wire_hdr_t psw_hdr(engine_t *self, uint32_t type, uint64_t key, uint64_t clock, uint64_t offset,
                        uint64_t count, dtype_t dt, int aux, uint32_t nframes)
{
    wire_hdr_t h = {.type = type, .sender = (uint32_t)self->vid, .job = self->job, .key = key,
                    .clock = clock, .offset = offset, .count = count, .dtype = (uint32_t)dt, .aux = aux,
                    .nframes = nframes};
    return h;
}

/* Push count elements of dt (zero-copy) into partition key at offset. */
static int s_push(engine_t *self, int s, int flags, uint64_t key, uint64_t clock, size_t offset, size_t count,
                  dtype_t dt, const ps_meta_t *meta, const void *data)
{
    trace_instant("push", "server", s, "bytes", (int64_t)(count * dt_size(dt)));
    if (self->conns[s].cma) {
        /* the server reads the values from our memory: they stay put until its reply (wait / collect) */
        size_t bytes = count * dt_size(dt);
        cma_desc_t d = cma_desc(data, bytes);
        wire_hdr_t h = psw_hdr(self, WIRE_PUSH, key, clock, offset, count, dt, flags | PS_F_CMA, 2);
        ps_frame_t fr[2] = {{meta, sizeof *meta, 0, NULL, NULL}, {&d, sizeof d, 0, NULL, NULL}};
        CHECK(psw_send(self, s, &h, fr, 2));
        self->sent += bytes;
        tp_note_traffic(self->comm->tp, s_server_rank(self, s), bytes, 0);
        return 0;
    }
    wire_hdr_t h = psw_hdr(self, WIRE_PUSH, key, clock, offset, count, dt, flags, 2);
    atomic_fetch_add(&self->zc_inflight, 1);
    ps_frame_t fr[2] = {{meta, sizeof *meta, 0, NULL, NULL},
                        {data, count * dt_size(dt), 1, psw_zc_free, (void *)&self->zc_inflight}};
    return psw_send(self, s, &h, fr, 2);
}

int psw_pull(engine_t *self, int s, int flags, uint64_t key, uint64_t clock, dtype_t dt, const ps_meta_t *meta)
{
    if (self->conns[s].cma) flags |= PS_F_CMA; /* answer with a descriptor: we read the values ourselves */
    wire_hdr_t h = psw_hdr(self, WIRE_PULL, key, clock, 0, 0, dt, flags, 1);
    ps_frame_t fr = {meta, sizeof *meta, 0, NULL, NULL};
    return psw_send(self, s, &h, &fr, 1);
}

/* Wait (bounded) until ZeroMQ released every zero-copy frame we handed it. */
int psw_drain_zc(engine_t *self, uint64_t dl)
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


static int s_pump(engine_t *self, int s);

static int s_on_reply(engine_t *self, int s, ps_vmsg_t *m, collect_t *c, size_t *left)
{
    wire_hdr_t h;
    if (m->n < 1 || wire_decode(ps_van_data(m, 0), ps_van_size(m, 0), &h) < 0 || h.job != self->job ||
        h.sender != (uint32_t)s_server_rank(self, s) || m->truncated || (uint32_t)(m->n - 1) != h.nframes) {
        self->rejected++;
        LOG_W("ps worker %d: dropped a malformed reply from server %d", self->comm->rank, s);
        return 0;
    }
    if (h.type == WIRE_HELLO && h.aux == PS_HELLO_KEEPALIVE && h.nframes == 0) return 0; /* a lane wake-up */
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
    if (c->save) return psw_on_saved(self, s, &h, m, c, left);
    int ar = (h.aux & PS_F_AR) ? 1 : 0;
    size_t k = (size_t)h.key;
    int by_desc = (h.aux & PS_F_CMA) ? 1 : 0;
    cma_desc_t d = {0, 0, 0, 0};
    if (by_desc && m->n >= 2 && ps_van_size(m, 1) == sizeof d) memcpy(&d, ps_van_data(m, 1), sizeof d);
    size_t esz = dt_size(c->dt);
    int payload_ok = by_desc ? self->conns[s].cma && d.magic == CMA_DESC_MAGIC && d.pid == (uint64_t)self->conns[s].pid &&
                                   d.len == (uint64_t)ps_part_len(c->lay, k) * esz
                             : wire_check_payload(&h, m->n >= 2 ? ps_van_size(m, 1) : 0, ps_part_len(c->lay, k)) == 0;
    if (h.type != WIRE_PARAMS || ar != c->ar || k >= c->lay->nparts || !self->want[k] ||
        ps_part_owner(c->lay, k) != s || h.dtype != (uint32_t)c->dt || h.offset != 0 || !payload_ok ||
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
    char *to = (char *)c->dst + ps_part_start(c->lay, k) * esz;
    if (by_desc) {
        /* one copy, straight from the server's memory into the tensor */
        int rc = cma_read((pid_t)d.pid, to, d.addr, (size_t)d.len);
        if (rc < 0) return err_set(rc, "ps worker %d: cannot read server %d's reply for partition %zu: %s",
                                   self->comm->rank, s, k, err_detail());
        self->received += d.len;
        tp_note_traffic(self->comm->tp, s_server_rank(self, s), 0, d.len);
    } else {
        memcpy(to, ps_van_data(m, 1), (size_t)h.count * esz);
    }
    if (c->dev_dst) {
        size_t off = ps_part_start(c->lay, k) * esz;
        CHECK(dev_memcpy_async((char *)c->dev_dst + off, (char *)c->dst + off, (size_t)h.count * esz, c->stream));
    }
    /* --ps-local-agg: the machine's workers get the partition now, while later ones are on the way */
    if (c->fwd && self->nm) CHECK(psl_forward(self, k, to, (size_t)h.count, c->dt, h.aux, h.clock));
    c->flags_or |= h.aux;
    self->want[k] = 0;
    (*left)--;
    if (self->win && !c->ar) {
        /* --ps-window: the partition is answered, its server's window has room again */
        self->win_got++;
        if (self->win_opened[k] == 1) {
            self->win_opened[k] = 2;
            self->win_open[s]--;
        }
        CHECK(s_pump(self, s));
    }
    return 0;
}

/* A server's lane wake-up (a keep-alive HELLO over ZeroMQ): not data, not counted as traffic. */
static int s_is_wake(engine_t *self, ps_vmsg_t *m)
{
    wire_hdr_t h;
    return self->nvan_lane && m->n == 1 && wire_decode(ps_van_data(m, 0), ps_van_size(m, 0), &h) == 0 &&
           h.type == WIRE_HELLO && h.aux == PS_HELLO_KEEPALIVE;
}

/* Take server s's lane messages that were sent before its next ZeroMQ message (ps_lane.h's rule). */
static int s_take_lane(engine_t *self, int s, collect_t *c, size_t *left)
{
    conn_t *cn = &self->conns[s];
    while (cn->lane && *left > 0) {
        ps_vmsg_t m;
        int r = ps_lane_recv(cn->lane, &m, NULL, 0, cn->zrx);
        if (r == 0) return 0;
        if (r < 0) {
            self->rejected++;
            LOG_W("ps worker %d: dropped a reply from server %d: %s", self->comm->rank, s, err_detail());
            if (!ps_lane_ok(cn->lane))
                return err_set(ERR_PROTO, "ps worker %d: server %d's shared-memory lane is corrupt", self->comm->rank, s);
            continue;
        }
        self->received += m.bytes;
        int rc = s_on_reply(self, s, &m, c, left);
        ps_van_close_msg(&m);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Block on the pull tickets (want[k] for k < lay->nparts) until *left are answered; once: take only what
 * has arrived, without waiting. */
static int s_collect(engine_t *self, collect_t *c, size_t *leftp, int timeout_ms, int once)
{
    size_t left = *leftp;
    uint64_t dl = deadline_in(timeout_ms);
    int S = self->nservers;
    zmq_pollitem_t items[S];
    ps_lane_t *lanes[S];
    int nlanes = 0;
    for (int s = 0; s < S; s++) nlanes += (lanes[s] = self->conns[s].lane) != NULL;
    /* that we are alive while we wait (blocked on one dead server, say) the servers hear from our heartbeat
     * thread (ps_hb.h), not from here */
    while (left > 0) {
        for (int s = 0; s < S; s++) items[s] = (zmq_pollitem_t){self->conns[s].sock, 0, ZMQ_POLLIN, 0};
        int ms = deadline_left_ms(dl);
        if (ms == 0 && !once && c->save) {
            int s = 0;
            while (s < S - 1 && c->saved[s]) s++;
            return err_set(ERR_TIMEOUT, "ps worker %d: server %d (rank %d) did not answer the checkpoint request within %d ms",
                           self->comm->rank, s, s_server_rank(self, s), timeout_ms);
        }
        if (ms == 0 && !once) {
            size_t k = 0;
            while (k < c->lay->nparts && !self->want[k]) k++;
            int s = ps_part_owner(c->lay, k);
            return err_set(ERR_TIMEOUT, "ps worker %d: no reply from server %d (rank %d) for partition %zu within %d ms "
                           "(%zu partitions outstanding)", self->comm->rank, s, s_server_rank(self, s), k, timeout_ms, left);
        }
        int wait = once ? 0 : ms < 0 || ms > 100 ? 100 : ms;
        int pr = ps_lane_poll(nlanes ? lanes : NULL, nlanes ? S : 0, items, S, wait, once ? 0 : self->yield_us);
        if (pr < 0 && !once) continue;
        for (int s = 0; s < S && left > 0 && nlanes; s++) {
            int rc = s_take_lane(self, s, c, &left);
            *leftp = left;
            if (rc < 0) return rc;
        }
        for (int s = 0; s < S && left > 0; s++) {
            if (!(items[s].revents & ZMQ_POLLIN)) continue;
            for (;;) {
                ps_vmsg_t m;
                if (ps_van_recv(self->conns[s].sock, &m, 0) < 0) break;
                if (self->conns[s].lane) {
                    /* lane messages sent before this one first, then count it */
                    int rc = s_take_lane(self, s, c, &left);
                    if (rc < 0) {
                        ps_van_close_msg(&m);
                        return rc;
                    }
                    self->conns[s].zrx++;
                }
                if (!self->conns[s].local && !s_is_wake(self, &m)) {
                    self->received += m.bytes;
                    tp_note_traffic(self->comm->tp, s_server_rank(self, s), 0, m.bytes);
                }
                int rc = s_on_reply(self, s, &m, c, &left);
                ps_van_close_msg(&m);
                *leftp = left;
                if (rc < 0) return rc;
                if (left == 0) break;
            }
        }
        if (once) break;
    }
    *leftp = left;
    return 0;
}

int psw_collect(engine_t *self, collect_t *c, size_t left, int timeout_ms)
{
    return s_collect(self, c, &left, timeout_ms, 0);
}

/* Set up a lane to server s (ps_lane.h): create the mapping, name it to the server over our
 * (authenticated) connection, and use it once the server mapped it. The name is gone either way when
 * this returns. Without it (refused, no /dev/shm) the messages go over ZeroMQ, unless --ps-lane on. */
int psw_lane_up(engine_t *self, int s)
{
    conn_t *c = &self->conns[s];
    int forced = self->opt.lane == PS_LANE_ON, me = self->comm->rank;
    char name[PS_LANE_NAME_MAX], text[200] = "";
    ps_lane_t *lane = NULL;
    int rc = ps_lane_create(&lane, name);
    if (rc < 0) {
        if (forced) return err_set(rc, "ps: --ps-lane on, but worker %d cannot create a lane: %s", me, err_detail());
        LOG_I("ps: worker %d talks to server %d over ZeroMQ only (no lane: %s)", me, s, err_detail());
        return 0;
    }
    wire_hdr_t h = psw_hdr(self, WIRE_HELLO, 0, 0, 0, 0, DT_F32, PS_HELLO_LANE, 1);
    ps_frame_t f = {name, strlen(name), 0, NULL, NULL};
    ps_vmsg_t m;
    m.n = 0;
    rc = ps_van_send(c->sock, NULL, 0, &h, &f, 1, &self->sent);
    if (rc == 0) rc = ps_van_recv(c->sock, &m, self->cfg.timeout_ms);
    ps_lane_unlink(lane); /* the server unlinked it when it mapped it; if it never did, the name goes now */
    if (rc < 0) {
        ps_lane_destroy(&lane);
        return err_set(rc, "ps worker %d: server %d did not answer the lane setup within %d ms", me, s,
                       self->cfg.timeout_ms);
    }
    wire_hdr_t r;
    int ok = m.n >= 1 && wire_decode(ps_van_data(&m, 0), ps_van_size(&m, 0), &r) == 0 && r.job == self->job;
    if (ok && r.type == WIRE_ERROR && m.n == 2) {
        size_t n = ps_van_size(&m, 1) < sizeof text - 1 ? ps_van_size(&m, 1) : sizeof text - 1;
        memcpy(text, ps_van_data(&m, 1), n);
        text[n] = 0;
    }
    ok = ok && r.type == WIRE_HELLO && r.aux == PS_HELLO_LANE && r.nframes == 0 && m.n == 1;
    ps_van_close_msg(&m);
    if (!ok) {
        ps_lane_destroy(&lane);
        if (forced) return err_set(ERR_UNSUP, "ps: --ps-lane on, but server %d refused worker %d's lane: %s", s, me,
                                   text[0] ? text : "bad answer");
        LOG_I("ps: worker %d talks to server %d over ZeroMQ only (lane refused: %s)", me, s, text[0] ? text : "bad answer");
        return 0;
    }
    c->lane = lane;
    c->ztx = c->zrx = 0;
    self->nvan_lane++;
    return 0;
}

int psw_want(engine_t *self, size_t n)
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
void psw_step_reset(engine_t *self)
{
    self->win = 0;
    self->win_n = self->win_got = self->win_held = 0;
    if (self->pushed) memset(self->pushed, 0, self->lay.nparts * sizeof *self->pushed);
    if (self->committed) memset(self->committed, 0, self->lay.nparts);
    if (self->want) memset(self->want, 0, self->nwant);
    self->ncomplete = 0;
}

int psw_worker_only(engine_t *self, const char *what)
{
    if (!self) return err_set(ERR_INVAL, "ps: %s on a NULL engine", what);
    if (self->is_server) return err_set(ERR_STATE, "ps: %s on a server rank (rank %d: call serve)", what, self->comm->rank);
    return 0;
}

ps_meta_t psw_meta(engine_t *self, size_t total)
{
    ps_meta_t m = {.total = total, .step = self->sctx.step, .lr = self->sctx.lr, .inv_scale = self->sctx.inv_scale};
    return m;
}

/* Send partition k's commit: the pull that is its ticket. */
static int s_commit_now(engine_t *self, size_t k, const ps_meta_t *meta)
{
    int flags = PS_F_COMMIT | (self->overflow ? PS_F_OVERFLOW : 0);
    self->want[k] = 1;
    return psw_pull(self, ps_part_owner(&self->lay, k), flags, k, self->clock + 1, self->ps.grad_dtype, meta);
}

/* --ps-window: a push piece or a commit held until its server's window lets it go. Every worker sends a
 * server's partitions in the same order, so the oldest open partition of every window is pushed by all
 * and answered: no worker's flow to a server runs more than W partitions ahead of the slowest's. */
#define S_NONE ((size_t)-1)
struct psw_piece {
    int s, commit;
    size_t k, off, count;
    size_t next;              /* the next held piece of the same server (S_NONE: the last) */
    const void *data;
};

/* Send what server s's window lets go: a piece (or the commit) of an open partition always, since a
 * partition split across buckets completes only with its later pieces; a partition opens, in order, while
 * fewer than W are open, and once one may not, no later one does. Sent pieces leave the server's list, so
 * a pump walks only what that server still holds. */
static int s_pump(engine_t *self, int s)
{
    int full = 0;
    for (size_t i = self->win_head[s], prev = S_NONE; i != S_NONE;) {
        struct psw_piece *p = &self->win_q[i];
        size_t next = p->next;
        if (!self->win_opened[p->k]) {
            if (full || self->win_open[s] >= (size_t)self->win) {
                full = 1;
                prev = i, i = next;
                continue;
            }
            self->win_opened[p->k] = 1;
            self->win_open[s]++;
        }
        if (prev == S_NONE) self->win_head[s] = next;
        else self->win_q[prev].next = next;
        if (self->win_tail[s] == i) self->win_tail[s] = prev;
        self->win_held--;
        if (p->commit) CHECK(s_commit_now(self, p->k, &self->win_meta));
        else CHECK(s_push(self, s, 0, p->k, self->clock, p->off, p->count, self->ps.grad_dtype, &self->win_meta, p->data));
        i = next;
    }
    return 0;
}

static int s_hold(engine_t *self, int commit, size_t k, size_t off, size_t count, const void *data)
{
    if (self->win_n == self->win_cap) {
        size_t nc = self->win_cap ? 2 * self->win_cap : 2 * self->lay.nparts + 16;
        struct psw_piece *nq = realloc(self->win_q, nc * sizeof *nq);
        if (!nq) return err_set(ERR_NOMEM, "ps: no memory for the window's %zu held pieces", nc);
        mem_track(&self->mem, (long long)((nc - self->win_cap) * sizeof *nq));
        self->win_q = nq;
        self->win_cap = nc;
    }
    int s = ps_part_owner(&self->lay, k);
    size_t i = self->win_n++;
    self->win_q[i] = (struct psw_piece){.s = s, .commit = commit, .k = k, .off = off, .count = count, .next = S_NONE,
                                        .data = data};
    if (self->win_tail[s] == S_NONE) self->win_head[s] = i;
    else self->win_q[self->win_tail[s]].next = i;
    self->win_tail[s] = i;
    self->win_held++;
    return s_pump(self, s);
}

static int s_commit(engine_t *self, size_t k, const ps_meta_t *meta)
{
    self->committed[k] = 1;
    return self->win ? s_hold(self, 1, k, 0, 0, NULL) : s_commit_now(self, k, meta);
}


/* Commit every partition not committed yet this step. */
static int s_commit_rest(engine_t *self)
{
    ps_meta_t meta = psw_meta(self, self->ps.count);
    for (size_t k = 0; k < self->lay.nparts; k++)
        if (!self->committed[k]) CHECK(s_commit(self, k, &meta));
    return 0;
}

int psw_step_begin(engine_t *self, const step_ctx_t *ctx)
{
    CHECK(psw_worker_only(self, "step_begin"));
    if (!self->attached) return err_set(ERR_STATE, "ps: step_begin before attach");
    for (size_t k = 0; k < self->lay.nparts; k++)
        if (self->pushed[k] || self->committed[k])
            return err_set(ERR_STATE, "ps: step_begin inside a step (partition %zu already pushed)", k);
    self->sctx = *ctx;
    self->overflow = 0;
    /* --ps-window: sync rounds that commit per partition (f32, no loss scaling), host memory */
    self->win = self->opt.window > 0 && self->opt.mode == PS_SYNC && !self->on_dev && self->ps.grad_dtype == DT_F32 && !self->member &&
                        ctx->inv_scale == 1.0f ? self->opt.window : 0;
    if (self->win) {
        size_t S = (size_t)self->nservers;
        if (!self->win_opened) {
            /* per server: open partitions, then the held list's head and tail */
            self->win_opened = calloc(self->lay.nparts, 1);
            self->win_open = calloc(3 * S, sizeof *self->win_open);
            if (!self->win_opened || !self->win_open) return err_set(ERR_NOMEM, "ps: no memory for the window");
            mem_track(&self->mem, (long long)(self->lay.nparts + 3 * S * sizeof *self->win_open));
            self->win_head = self->win_open + S;
            self->win_tail = self->win_open + 2 * S;
        }
        memset(self->win_opened, 0, self->lay.nparts);
        memset(self->win_open, 0, S * sizeof *self->win_open);
        for (size_t s = 0; s < S; s++) self->win_head[s] = self->win_tail[s] = S_NONE;
        self->win_n = self->win_got = self->win_held = 0;
        self->win_meta = psw_meta(self, self->ps.count);
        self->win_c = (collect_t){.ar = 0, .lay = &self->lay, .dst = self->ps.params, .dt = DT_F32,
                                  .clock_all = self->clock + 1, .exact = 1};
    }
    return 0;
}

int psw_submit(engine_t *self, const bucket_t *b)
{
    CHECK(psw_worker_only(self, "submit"));
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
    /* sync with f32 gradients and no loss scaling: nothing waits for a step-wide overflow flag, so each
     * partition commits with its last push (the servers skip a partition whose sum is not finite) and its
     * update and reply overlap the rest of the step's pushes, as in async mode and BytePS */
    int early = self->opt.mode != PS_SYNC || (dt == DT_F32 && self->sctx.inv_scale == 1.0f);
    if (!early && !self->overflow && dt_has_nonfinite(b->grad, b->count, dt)) self->overflow = 1;
    ps_meta_t meta = psw_meta(self, self->ps.count);
    uint64_t dl = deadline_in(self->cfg.timeout_ms);
    if (self->lagg && !self->member) CHECK(psl_sums(self, &self->lsum, &self->lsum_bytes, self->ps.count * esz));
    size_t k0, k1;
    ps_part_range(&self->lay, b->offset, b->count, &k0, &k1);
    for (size_t k = k0; k < k1; k++) {
        size_t ps = ps_part_start(&self->lay, k), pe = ps + ps_part_len(&self->lay, k);
        size_t lo = b->offset > ps ? b->offset : ps, hi = b->offset + b->count < pe ? b->offset + b->count : pe;
        if (hi <= lo) continue;
        if (self->committed[k] || self->pushed[k] + (hi - lo) > pe - ps)
            return err_set(ERR_RANGE, "ps: bucket [%zu, +%zu) pushes partition %zu twice in one step", b->offset,
                           b->count, k);
        const char *data = (const char *)b->grad + (lo - b->offset) * esz;
        if (self->member) { /* --ps-local-agg: the piece goes to the machine's leader, nothing to commit */
            CHECK(psl_send(self, k, lo - ps, hi - lo, dt, data, dl));
            self->pushed[k] += hi - lo;
            continue;
        }
        if (self->lagg) { /* the leader pushes its machine's sum of the piece */
            char *sum = (char *)self->lsum + lo * esz;
            CHECK(psl_reduce(self, k, lo - ps, hi - lo, dt, 0, data, sum, dl));
            if (!early && !self->overflow && dt_has_nonfinite(sum, hi - lo, dt)) self->overflow = 1;
            data = sum;
        }
        CHECK(self->win ? s_hold(self, 0, k, lo - ps, hi - lo, data)
                        : s_push(self, ps_part_owner(&self->lay, k), 0, k, self->clock, lo - ps, hi - lo, dt, &meta, data));
        self->pushed[k] += hi - lo;
        if (self->pushed[k] < pe - ps) continue;
        self->ncomplete++;
        /* async / ssp / early sync: this partition's pull follows its pushes at once (pipelined) */
        if (early) CHECK(s_commit(self, k, &meta));
    }
    /* sync (AMP): the step's overflow flag is known once every gradient is pushed: commit everything now */
    if (!early && !self->member && self->ncomplete == self->lay.nparts) CHECK(s_commit_rest(self));
    if (self->win) {
        /* take the replies in so far: each frees room in its server's window for held pieces */
        size_t left = self->lay.nparts - self->win_got;
        CHECK(s_collect(self, &self->win_c, &left, 1, 1));
    }
    return 0;
}

/* The step is over: reset its state, count it, say whether the servers skipped it. */
static int s_step_done(engine_t *self, step_out_t *out, int flags_or, double t0)
{
    psw_step_reset(self);
    self->clock++;
    self->overflow = 0;
    if (flags_or & PS_F_STALE) self->stale_waits++;
    double dt = now_ms() - t0;
    self->comm_ms_total += dt;
    if (out) {
        out->skipped = (flags_or & PS_F_SKIPPED) ? 1 : 0;
        out->comm_ms = dt;
        out->wait_ms = dt;
    }
    return 0;
}

int psw_wait(engine_t *self, step_out_t *out, int timeout_ms)
{
    CHECK(psw_worker_only(self, "wait"));
    if (!self->attached) return err_set(ERR_STATE, "ps: wait before attach");
    if (timeout_ms <= 0) timeout_ms = self->cfg.timeout_ms;
    double t0 = now_ms();
    uint64_t dl = deadline_in(timeout_ms);
    collect_t c0 = {.ar = 0, .lay = &self->lay, .dst = self->on_dev ? self->h_params : self->ps.params, .dt = DT_F32,
                    .clock_all = self->clock + 1, .exact = self->opt.mode == PS_SYNC,
                    .dev_dst = self->on_dev ? self->ps.params : NULL, .stream = self->stream, .fwd = self->lagg};
    for (size_t k = 0; k < self->lay.nparts && self->lagg; k++)
        if (self->pushed[k] != ps_part_len(&self->lay, k))
            return err_set(ERR_STATE, "ps worker %d: wait with partition %zu not wholly submitted (--ps-local-agg "
                           "needs every gradient each step)", self->comm->rank, k);
    if (self->member) { /* --ps-local-agg: every partition comes from the machine's leader */
        CHECK(psl_recv_all(self, &c0, timeout_ms));
        if (self->on_dev) CHECK(dev_stream_wait(self->stream, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1));
        return s_step_done(self, out, c0.flags_or, t0);
    }
    /* partitions that submit() did not commit (not wholly submitted, or sync before the last bucket) */
    CHECK(s_commit_rest(self));
    if (self->win && self->lagg) { /* the replies taken while submitting go to the machine's workers now */
        for (size_t k = 0; k < self->lay.nparts; k++)
            if (self->win_opened[k] == 2)
                CHECK(psl_forward(self, k, (char *)self->ps.params + ps_part_start(&self->lay, k) * sizeof(float),
                                  ps_part_len(&self->lay, k), DT_F32, self->win_c.flags_or, self->clock + 1));
        self->win_c.fwd = 1;
    }
    /* with a window some replies came in while submitting, into the step's own collector */
    collect_t *cp = self->win ? &self->win_c : &c0;
    size_t left = self->win ? self->lay.nparts - self->win_got : self->lay.nparts;
    uint64_t tr = trace_t0(); /* timeline: waiting for the servers' parameters */
    CHECK(s_collect(self, cp, &left, timeout_ms, 0));
    if (self->win_held)
        return err_set(ERR_STATE, "ps worker %d: %zu pieces still held by the window after every reply",
                       self->comm->rank, self->win_held);
    collect_t c = *cp;
    trace_x1("pull wait", tr, "parts", (int64_t)self->lay.nparts);
    if (self->on_dev) CHECK(dev_stream_wait(self->stream, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1));
    CHECK(psw_drain_zc(self, dl));
    return s_step_done(self, out, c.flags_or, t0);
}

int psw_allreduce(engine_t *self, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                        int timeout_ms)
{
    CHECK(psw_worker_only(self, "allreduce"));
    size_t esz = dt_size(dt);
    if (!esz) return err_set(ERR_INVAL, "ps: bad dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG && op != OP_MOVE) return err_set(ERR_INVAL, "ps: bad op %d", (int)op);
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
    CHECK(psw_want(self, l.nparts));
    ps_meta_t meta = {.total = count, .step = 0, .lr = 0, .inv_scale = 1.0f};
    /* each push commits this worker's round of its partition (the pull rides on it): the server answers
     * partition k while k+1.. travel */
    int flags = PS_F_AR | PS_F_COMMIT | (op == OP_AVG ? PS_F_AVG : 0) | (op == OP_MOVE ? PS_F_MOVE : 0);
    /* --ps-local-agg: a member hands each partition to its leader; the leader pushes its machine's sum */
    if (self->lagg && !self->member) CHECK(psl_sums(self, &self->lar, &self->lar_bytes, count * esz));
    for (size_t k = 0; k < l.nparts; k++) {
        size_t off = ps_part_start(&l, k) * esz, n = ps_part_len(&l, k);
        if (src != sendbuf) /* device: stage this partition, push it, stage the next while it travels */
            CHECK(dev_memcpy((char *)self->ar_send + off, (const char *)sendbuf + off, n * esz));
        const char *data = (const char *)src + off;
        if (self->member) {
            CHECK(psl_send(self, k, 0, n, dt, data, dl));
            continue;
        }
        if (self->lagg) {
            CHECK(psl_reduce(self, k, 0, n, dt, op == OP_MOVE, data, (char *)self->lar + off, dl));
            data = (const char *)self->lar + off;
        }
        self->want[k] = 1;
        CHECK(s_push(self, ps_part_owner(&l, k), flags, k, self->ar_ver[k], 0, n, dt, &meta, data));
    }
    for (size_t k = 0; k < l.nparts; k++) self->ar_ver[k]++;
    collect_t c = {.ar = 1, .lay = &l, .dst = dst, .dt = dt, .clock = self->ar_ver, .exact = 1,
                   .dev_dst = dst != recvbuf ? recvbuf : NULL, .stream = self->stream, .fwd = self->lagg};
    if (self->member) CHECK(psl_recv_all(self, &c, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1));
    else CHECK(psw_collect(self, &c, l.nparts, timeout_ms));
    if (dst != recvbuf) CHECK(dev_stream_wait(self->stream, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1));
    CHECK(psw_drain_zc(self, dl));
    self->comm_ms_total += now_ms() - t0;
    return 0;
}
