/* ps_local.c: the PS's machine-local aggregation (--ps-local-agg, as BytePS and MXNet's distributed
 * kvstore do): the workers of a machine (same comm_t.node_of: host identity, network namespace included)
 * send their gradient pieces to the machine's leader (its lowest rank) over the communicator's transport
 * (shared memory on one host); the leader sums them with its own in rank order, so every machine's sum is
 * the same bits whatever the timing, and is the machine's only worker at the servers: one push and one
 * pull per partition per machine. It hands each answered partition to its members as it arrives, while
 * later ones are still on the way (ps_step.c's s_on_reply calls psl_forward), so a partition's local
 * reduce, push, pull and local broadcast overlap the other partitions'.
 *
 * Every transfer is a segment of one slot: a psl_seg_t header, then the elements. A member's segments
 * follow its submitted buckets cut at partition boundaries, exactly as the leader cuts its own, so the
 * leader takes one segment from each member per piece of its own and checks that they describe the same
 * elements (a worker whose buckets differ is named). */
#include "ps/ps_int.h"

#define PSL_MAGIC 0x4c474150u /* "PAGL" */
enum { PSL_GRAD = 1, PSL_RESULT = 2 };

typedef struct {
    uint32_t magic, kind;
    uint64_t key, off, count;  /* partition, elements from its start, elements in this segment */
    uint64_t clock;            /* results: the version the server answered with */
    int32_t flags;             /* results: the server's reply flags (skipped, stale) */
    uint32_t pad;
} psl_seg_t;

/* Elements of dt one segment to peer carries. */
static size_t s_seg_elems(engine_t *self, int peer, dtype_t dt)
{
    size_t slot = tp_slot_bytes(self->comm->tp, peer);
    size_t n = slot > sizeof(psl_seg_t) ? (slot - sizeof(psl_seg_t)) / dt_size(dt) : 0;
    return n ? n : 1;
}

static int s_left(uint64_t dl)
{
    int ms = deadline_left_ms(dl);
    return ms > 0 ? ms : 1;
}

/* err_set(rc, "WHAT: DETAIL") with the detail of the error being passed on (copied first: err_set writes
 * the buffer err_detail reads). */
static int s_fail(int rc, const char *what)
{
    char why[256];
    snprintf(why, sizeof why, "%s", err_detail());
    return err_set(rc, "%s: %s", what, why[0] ? why : err_str(rc));
}

/* The leader: the next segment from member peer, by the deadline. Waiting on a slow member it does not look
 * dead to the servers that wait on it: its heartbeat thread (ps_hb.h) beats meanwhile. */
static int s_recv(engine_t *self, int peer, const void **buf, size_t *len, uint64_t dl)
{
    int left = deadline_left_ms(dl);
    int to = self->cfg.timeout_ms > 0 ? self->cfg.timeout_ms : 60000;
    return tp_recv_acquire(self->comm->tp, peer, buf, len, left >= 0 ? left : to);
}

/* The machines of workers [0, W): machine of rank r = its node; a machine's leader is its lowest worker;
 * machines are numbered in the order of their leaders. */
int psl_setup(engine_t *self, int W)
{
    comm_t *c = self->comm;
    if (!c->node_of) return err_set(ERR_STATE, "ps: --ps-local-agg needs the communicator's node map");
    if (!c->tp) return err_set(ERR_STATE, "ps: --ps-local-agg needs the communicator's transport");
    self->lagg = 1;
    self->leaders = calloc((size_t)W, sizeof *self->leaders);
    self->mranks = calloc((size_t)W, sizeof *self->mranks);
    self->lsrcs = calloc((size_t)W + 1, sizeof *self->lsrcs);
    if (!self->leaders || !self->mranks || !self->lsrcs) return err_set(ERR_NOMEM, "ps: no memory for the machines");
    int me = c->rank < W ? c->rank : -1;
    self->leader = -1;
    for (int r = 0; r < W; r++) {
        int first = 1;
        for (int q = 0; q < r && first; q++) first = c->node_of[q] != c->node_of[r];
        if (first) {
            if (me >= 0 && c->node_of[me] == c->node_of[r]) {
                self->leader = r;
                self->vid = self->nmachines;
            }
            self->leaders[self->nmachines++] = r;
        }
    }
    if (me < 0) return 0; /* a dedicated server: it only needs the leaders */
    self->member = self->leader != me;
    /* a leader's members, or a member's machine-mates but itself (for the counters) */
    for (int r = 0; r < W; r++)
        if (r != me && r != self->leader && c->node_of[r] == c->node_of[me]) self->mranks[self->nm++] = r;
    if (!self->member) return 0;
    self->vid = -1; /* a member is nobody at the servers */
    return 0;
}

void psl_free(engine_t *self)
{
    free(self->leaders);
    free(self->mranks);
    free(self->lsrcs);
    free(self->lsum);
    free(self->lar);
    free(self->lgot);
}

/* A leader's buffer of machine sums, at least bytes (grown; kept across calls). */
int psl_sums(engine_t *self, void **buf, size_t *have, size_t bytes)
{
    if (bytes <= *have) return 0;
    free(*buf);
    mem_track(&self->mem, -(long long)*have);
    *have = 0;
    if (!(*buf = malloc(bytes))) return err_set(ERR_NOMEM, "ps: no memory for %zu bytes of machine sums", bytes);
    *have = bytes;
    mem_track(&self->mem, (long long)bytes);
    return 0;
}

/* A member: count elements of partition key from off, in segments to the leader. */
int psl_send(engine_t *self, uint64_t key, size_t off, size_t count, dtype_t dt, const void *data, uint64_t dl)
{
    size_t esz = dt_size(dt), per = s_seg_elems(self, self->leader, dt);
    for (size_t done = 0; done < count;) {
        size_t n = count - done < per ? count - done : per;
        void *buf;
        int rc = tp_send_acquire(self->comm->tp, self->leader, &buf, s_left(dl));
        if (rc < 0) {
            char what[160];
            snprintf(what, sizeof what, "ps worker %d: cannot hand partition %llu to its machine's leader (rank %d)",
                     self->comm->rank, (unsigned long long)key, self->leader);
            return s_fail(rc, what);
        }
        psl_seg_t h = {.magic = PSL_MAGIC, .kind = PSL_GRAD, .key = key, .off = off + done, .count = n};
        memcpy(buf, &h, sizeof h);
        memcpy((char *)buf + sizeof h, (const char *)data + done * esz, n * esz);
        CHECK(tp_send_commit(self->comm->tp, self->leader, sizeof h + n * esz));
        self->local_sent += sizeof h + n * esz;
        done += n;
    }
    return 0;
}

/* A leader: dst = own + each member's same elements, in rank order (one pass, f32 accumulation for the
 * half types: dt_sum_n), segment by segment as the members' arrive; move: the bytes are moved, not
 * summed (the ceiling). */
int psl_reduce(engine_t *self, uint64_t key, size_t off, size_t count, dtype_t dt, int move, const void *own,
               void *dst, uint64_t dl)
{
    size_t esz = dt_size(dt);
    tp_t *tp = self->comm->tp;
    for (size_t done = 0; done < count;) {
        size_t n = count - done;
        for (int i = 0; i < self->nm; i++) {
            size_t per = s_seg_elems(self, self->mranks[i], dt);
            if (per < n) n = per;
        }
        self->lsrcs[0] = (const char *)own + done * esz;
        int got = 0, rc = 0;
        for (int i = 0; i < self->nm && rc == 0; i++) {
            int r = self->mranks[i];
            const void *buf;
            size_t len;
            rc = s_recv(self, r, &buf, &len, dl);
            if (rc < 0) {
                char what[160];
                snprintf(what, sizeof what, "ps leader %d: no gradients of partition %llu from worker %d of its machine",
                         self->comm->rank, (unsigned long long)key, r);
                rc = s_fail(rc, what);
                break;
            }
            got++;
            psl_seg_t h;
            if (len >= sizeof h) memcpy(&h, buf, sizeof h);
            if (len < sizeof h || h.magic != PSL_MAGIC || h.kind != PSL_GRAD || h.key != key || h.off != off + done ||
                h.count != n || len != sizeof h + n * esz)
                rc = err_set(ERR_PROTO, "ps leader %d: worker %d of its machine sent other gradients (partition %llu "
                             "elements %llu+%llu) than the leader's (partition %llu elements %zu+%zu): are its buckets "
                             "the same?", self->comm->rank, r, len >= sizeof h ? (unsigned long long)h.key : 0ull,
                             len >= sizeof h ? (unsigned long long)h.off : 0ull,
                             len >= sizeof h ? (unsigned long long)h.count : 0ull, (unsigned long long)key, off + done, n);
            self->lsrcs[i + 1] = (const char *)buf + sizeof h;
            self->local_received += len;
        }
        if (rc == 0) {
            char *d = (char *)dst + done * esz;
            if (move) dt_move_n(d, self->lsrcs, self->nm + 1, n, dt);
            else dt_sum_n(d, self->lsrcs, self->nm + 1, n, dt, 1.0f);
        }
        for (int i = 0; i < got; i++) {
            int rr = tp_recv_release(tp, self->mranks[i]);
            if (rc == 0 && rr < 0) rc = rr;
        }
        if (rc < 0) return rc;
        done += n;
    }
    return 0;
}

/* A leader: the answered partition key (count elements of dt at src) to every member, segment by segment
 * to each in turn, so that they copy it in parallel. */
int psl_forward(engine_t *self, uint64_t key, const void *src, size_t count, dtype_t dt, int flags, uint64_t clock)
{
    size_t esz = dt_size(dt);
    uint64_t dl = deadline_in(self->cfg.timeout_ms);
    tp_t *tp = self->comm->tp;
    for (size_t done = 0; done < count;) {
        size_t n = count - done;
        for (int i = 0; i < self->nm; i++) {
            size_t per = s_seg_elems(self, self->mranks[i], dt);
            if (per < n) n = per;
        }
        psl_seg_t h = {.magic = PSL_MAGIC, .kind = PSL_RESULT, .key = key, .off = done, .count = n, .clock = clock,
                       .flags = flags};
        for (int i = 0; i < self->nm; i++) {
            int r = self->mranks[i];
            void *buf;
            int rc = tp_send_acquire(tp, r, &buf, s_left(dl));
            if (rc < 0) {
                char what[160];
                snprintf(what, sizeof what, "ps leader %d: cannot hand partition %llu to worker %d of its machine",
                         self->comm->rank, (unsigned long long)key, r);
                return s_fail(rc, what);
            }
            memcpy(buf, &h, sizeof h);
            memcpy((char *)buf + sizeof h, (const char *)src + done * esz, n * esz);
            CHECK(tp_send_commit(tp, r, sizeof h + n * esz));
            self->local_sent += sizeof h + n * esz;
        }
        done += n;
    }
    return 0;
}

/* A member: every partition of c->lay from the leader, into c->dst (and on to c->dev_dst), checked
 * against c's expected versions; the replies' flags ORed into c->flags_or. */
int psl_recv_all(engine_t *self, collect_t *c, int timeout_ms)
{
    size_t np = c->lay->nparts, esz = dt_size(c->dt), left = np;
    uint64_t dl = deadline_in(timeout_ms);
    if (np > self->nlgot) {
        size_t *g = realloc(self->lgot, np * sizeof *g);
        if (!g) return err_set(ERR_NOMEM, "ps: no memory for %zu partitions", np);
        mem_track(&self->mem, (long long)((np - self->nlgot) * sizeof *g));
        self->lgot = g;
        self->nlgot = np;
    }
    memset(self->lgot, 0, np * sizeof *self->lgot);
    tp_t *tp = self->comm->tp;
    while (left > 0) {
        const void *buf;
        size_t len;
        int rc = tp_recv_acquire(tp, self->leader, &buf, &len, s_left(dl));
        if (rc < 0) {
            char what[200];
            snprintf(what, sizeof what, "ps worker %d: no parameters from its machine's leader (rank %d) within %d ms "
                     "(%zu of %zu partitions outstanding)", self->comm->rank, self->leader, timeout_ms, left, np);
            return s_fail(rc, what);
        }
        psl_seg_t h;
        int ok = len >= sizeof h;
        if (ok) memcpy(&h, buf, sizeof h);
        size_t k = ok ? (size_t)h.key : 0, plen = ok && h.key < np ? ps_part_len(c->lay, k) : 0;
        ok = ok && h.magic == PSL_MAGIC && h.kind == PSL_RESULT && h.key < np && h.off <= plen &&
             h.count <= plen - h.off && len == sizeof h + h.count * esz && self->lgot[k] + h.count <= plen &&
             h.count > 0;
        uint64_t want = ok ? (c->clock ? c->clock[k] : c->clock_all) : 0;
        if (ok && c->exact && h.clock != want) {
            tp_recv_release(tp, self->leader);
            return err_set(ERR_PROTO, "ps worker %d: its leader (rank %d) handed partition %zu at version %llu, "
                           "expected %llu", self->comm->rank, self->leader, k, (unsigned long long)h.clock,
                           (unsigned long long)want);
        }
        if (!ok) {
            tp_recv_release(tp, self->leader);
            return err_set(ERR_PROTO, "ps worker %d: a malformed segment (%zu bytes) from its machine's leader (rank %d)",
                           self->comm->rank, len, self->leader);
        }
        size_t at = (ps_part_start(c->lay, k) + (size_t)h.off) * esz, bytes = (size_t)h.count * esz;
        memcpy((char *)c->dst + at, (const char *)buf + sizeof h, bytes);
        self->local_received += len;
        CHECK(tp_recv_release(tp, self->leader));
        if (c->dev_dst && bytes) CHECK(dev_memcpy_async((char *)c->dev_dst + at, (char *)c->dst + at, bytes, c->stream));
        c->flags_or |= h.flags;
        self->lgot[k] += (size_t)h.count;
        if (self->lgot[k] == plen) left--;
    }
    return 0;
}
