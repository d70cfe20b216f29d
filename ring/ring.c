/* ring.c: the ring allreduce engine; the host ring algorithm is below, NCCL on GPUs.
 *
 * Host ring design: reduce-scatter then allgather over the transport (core/tp.h). The buffer is cut
 * into P chunks (chunk c = elements [c*q + min(c, r), ...) with q = count/P, r = count%P), and every
 * chunk into nseg segments of at most seg elements (segment k of every chunk covers the same offsets
 * within its chunk; a short or empty chunk sends short or empty segments so every link carries the
 * same sequence). Work is segment-major: for segment k, rank i
 *   RS step 0      copies its own chunk i, segment k, into the send slot towards i+1;
 *   RS step s      receives chunk i-s-1 from i-1 and reduces it with its own data straight into the
 *                  next send slot (no intermediate buffer);
 *   RS last step   reduces (and scales, for avg) into the output: chunk i+1 is final here, and the
 *                  same values are written into the send slot as allgather step 0;
 *   AG steps       receive chunk i-s from i-1, copy it to the output and forward it (except the last).
 * Every link's sends and receives follow the same order (RS 0..P-2 then AG 0..P-2 per segment), so
 * the FIFO channels match up. A rank never has more than one segment more sent than received, so a
 * channel of >= 2 slots can't deadlock; while rank i reduces segment k, its previous segment is in
 * flight to i+1 and i-1 is producing the next one. The ring may run over a subset of the ranks in any
 * order (ring_allreduce_ranks; i above is then a place on it), as the hierarchical allreduce's machine
 * leaders run it (ring_hier.c). */
#include "ring/ring.h"
#include "core/ncclw.h"
#include "core/arstep.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define RING_DEFAULT_SEG RING_DEFAULT_SEG_BYTES

size_t ring_chunk_start(size_t count, int P, int c)
{
    size_t q = count / (size_t)P, r = count % (size_t)P;
    return (size_t)c * q + ((size_t)c < r ? (size_t)c : r);
}
size_t ring_chunk_len(size_t count, int P, int c)
{
    return count / (size_t)P + ((size_t)c < count % (size_t)P ? 1 : 0);
}

void ring_schedule(int P, int me, int step, ring_step_t *out)
{
    out->allgather = step >= P - 1;
    out->to = (me + 1) % P;
    out->from = (me + P - 1) % P;
    int s = out->allgather ? step - (P - 1) : step;
    /* reduce-scatter step s: send chunk me-s (own at s = 0, else the partial sum just made), receive
     * me-s-1; allgather step s: send the complete chunk me+1-s, receive me-s */
    out->send_chunk = ((out->allgather ? me + 1 - s : me - s) % P + P) % P;
    out->recv_chunk = ((out->allgather ? me - s : me - s - 1) % P + P) % P;
}

size_t ring_seg_elems(comm_t *comm, int peer, size_t seg_bytes, size_t esz)
{
    size_t slot = tp_slot_bytes(comm->tp, peer);
    size_t sb = seg_bytes ? seg_bytes : RING_DEFAULT_SEG;
    if (sb > slot) sb = slot;
    size_t seg = sb / esz;
    if (seg >= 64) seg &= ~(size_t)15; /* keep segments a multiple of 16 elements (vector width) */
    return seg ? seg : 1;
}

int ring_allreduce_host(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                        redop_t op, size_t seg_bytes, int timeout_ms)
{
    return ring_allreduce_ranks(comm, NULL, comm->world, sendbuf, recvbuf, count, dt, op, 0, seg_bytes,
                                deadline_in(timeout_ms));
}

int ring_allreduce_ranks(comm_t *comm, const int *ranks, int P, const void *sendbuf, void *recvbuf, size_t count,
                         dtype_t dt, redop_t op, int avg_of, size_t seg_bytes, uint64_t dl)
{
    const size_t esz = dt_size(dt);
    if (!esz) return err_set(ERR_INVAL, "ring: bad dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG && op != OP_MOVE) return err_set(ERR_INVAL, "ring: bad op %d", (int)op);
    if (P < 1 || P > comm->world) return err_set(ERR_INVAL, "ring: a ring of %d ranks in a world of %d", P, comm->world);
    int me = -1; /* this rank's place on the ring */
    for (int i = 0; i < P && me < 0; i++)
        if ((ranks ? ranks[i] : i) == comm->rank) me = i;
    if (me < 0) return err_set(ERR_INVAL, "ring: rank %d is not on the ring of %d ranks it was asked to join", comm->rank, P);
    const float scale = op == OP_AVG ? 1.0f / (float)(avg_of > 0 ? avg_of : P) : 1.0f;
    const int move = op == OP_MOVE; /* the ceiling: the same segments travel, copied instead of reduced */
    if (P == 1 || count == 0) {
        if (count && sendbuf != recvbuf) memcpy(recvbuf, sendbuf, count * esz);
        if (count && scale != 1.0f) dt_scale(recvbuf, count, dt, scale);
        return 0;
    }
    tp_t *tp = comm->tp;
    const int right = ranks ? ranks[(me + 1) % P] : (me + 1) % P, left = ranks ? ranks[(me + P - 1) % P] : (me + P - 1) % P;
    const size_t seg = ring_seg_elems(comm, right, seg_bytes, esz);
    const size_t maxchunk = ring_chunk_len(count, P, 0);
    const size_t nseg = (maxchunk + seg - 1) / seg;
    const char *src = sendbuf;
    char *dst = recvbuf;

    for (size_t k = 0; k < nseg; k++) {
        /* segment k of chunk c: [start(c) + k*seg, + n) */
#define SEG_OFF(c) (ring_chunk_start(count, P, (c)) + k * seg)
#define SEG_LEN(c) (k * seg >= ring_chunk_len(count, P, (c)) ? 0 : \
                    (ring_chunk_len(count, P, (c)) - k * seg < seg ? ring_chunk_len(count, P, (c)) - k * seg : seg))
        void *out;
        const void *in;
        size_t inlen;
        ring_step_t st;
        /* RS step 0: my own chunk */
        ring_schedule(P, me, 0, &st);
        int c = st.send_chunk;
        size_t n = SEG_LEN(c);
        CHECK(tp_send_acquire(tp, right, &out, deadline_left_ms(dl)));
        if (n) memcpy(out, src + SEG_OFF(c) * esz, n * esz);
        CHECK(tp_send_commit(tp, right, n * esz));
        /* RS steps 1..P-1: receive chunk me-s-1, reduce, pass on (or finish) */
        for (int s = 0; s < P - 1; s++) {
            ring_schedule(P, me, s, &st);
            c = st.recv_chunk;
            n = SEG_LEN(c);
            size_t off = SEG_OFF(c);
            CHECK(tp_recv_acquire(tp, left, &in, &inlen, deadline_left_ms(dl)));
            if (inlen != n * esz) {
                tp_recv_release(tp, left);
                return err_set(ERR_PROTO, "ring: rank %d sent %zu bytes for a %zu-byte segment", left, inlen, n * esz);
            }
            CHECK(tp_send_acquire(tp, right, &out, deadline_left_ms(dl)));
            if (s < P - 2) {
                if (n && move) memcpy(out, in, n * esz);
                else if (n) dt_add(out, src + off * esz, in, n, dt);
            } else {
                /* chunk me+1 is complete: scale into the output and start the allgather with it */
                if (n) {
                    if (move) memcpy(dst + off * esz, in, n * esz);
                    else if (scale != 1.0f) dt_add_scale(dst + off * esz, src + off * esz, in, n, dt, scale);
                    else dt_add(dst + off * esz, src + off * esz, in, n, dt);
                    memcpy(out, dst + off * esz, n * esz);
                }
            }
            CHECK(tp_recv_release(tp, left));
            CHECK(tp_send_commit(tp, right, n * esz));
        }
        /* AG steps: receive chunk me-s, store, forward except the last */
        for (int s = 0; s < P - 1; s++) {
            ring_schedule(P, me, P - 1 + s, &st);
            c = st.recv_chunk;
            n = SEG_LEN(c);
            size_t off = SEG_OFF(c);
            CHECK(tp_recv_acquire(tp, left, &in, &inlen, deadline_left_ms(dl)));
            if (inlen != n * esz) {
                tp_recv_release(tp, left);
                return err_set(ERR_PROTO, "ring: rank %d sent %zu bytes for a %zu-byte segment", left, inlen, n * esz);
            }
            if (s < P - 2) {
                CHECK(tp_send_acquire(tp, right, &out, deadline_left_ms(dl)));
                if (n) {
                    memcpy(out, in, n * esz);
                    memcpy(dst + off * esz, out, n * esz);
                }
                CHECK(tp_recv_release(tp, left));
                CHECK(tp_send_commit(tp, right, n * esz));
            } else {
                if (n) memcpy(dst + off * esz, in, n * esz);
                CHECK(tp_recv_release(tp, left));
            }
        }
#undef SEG_OFF
#undef SEG_LEN
    }
    return 0;
}

/* ---------- the engine ---------- */

struct engine {
    comm_t *comm;
    engine_cfg_t cfg;
    ring_opts_t opts;
    arstep_t *step;
    ncclw_t *nccl;       /* GPU buffers: NCCL with NCCL_ALGO=Ring */
    board_t *board;      /* host buffers on one host: the one-shot path (ring_small.c) */
    _Atomic(const char *) algo; /* the algorithm of the latest collective */
    _Atomic uint64_t board_bytes;  /* bytes each way through the board (count * size * (P - 1) per call) */
};

static int s_nccl_fn(void *ctx, const void *send, void *recv, size_t count, dtype_t dt, redop_t op, int timeout_ms)
{
    engine_t *self = ctx;
    return ncclw_allreduce(self->nccl, send, recv, count, dt, op, timeout_ms);
}

static int s_host_fn(void *ctx, const void *send, void *recv, size_t count, dtype_t dt, redop_t op, int timeout_ms)
{
    engine_t *self = ctx;
    size_t bytes = count * dt_size(dt);
    if (self->opts.hier && ring_hier_applies(self->comm)) {
        atomic_store(&self->algo, "hier");
        return ring_hier_allreduce(self->comm, send, recv, count, dt, op, self->cfg.seg_bytes, timeout_ms);
    }
    if (self->board && self->comm->world > 1 && count &&
        (self->opts.algo == RING_ALGO_ONESHOT || bytes <= ring_oneshot_auto_max(&self->opts, self->comm->world))) {
        atomic_store(&self->algo, "oneshot");
        atomic_fetch_add(&self->board_bytes, (uint64_t)bytes * (uint64_t)(self->comm->world - 1));
        return ring_oneshot_allreduce(self->board, self->comm, send, recv, count, dt, op, timeout_ms);
    }
    atomic_store(&self->algo, "ring");
    return ring_allreduce_host(self->comm, send, recv, count, dt, op, self->cfg.seg_bytes, timeout_ms);
}

static int s_create(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg)
{
    const char *impl = cfg->impl ? cfg->impl : (cfg->device >= 0 ? "nccl" : "host");
    if (strcmp(impl, "host") && strcmp(impl, "nccl"))
        return err_set(ERR_INVAL, "ring: unknown implementation '%s' (host, nccl)", impl);
    if (!strcmp(impl, "nccl") && cfg->device < 0)
        return err_set(ERR_INVAL, "ring: --impl nccl needs GPU buffers (--gpus N)");
    if (!strcmp(impl, "host") && cfg->device >= 0)
        return err_set(ERR_INVAL, "ring: the host ring works on host buffers; with --gpus use --impl nccl");
    if (cfg->opts && ((const ring_opts_t *)cfg->opts)->hier && cfg->device >= 0)
        return err_set(ERR_INVAL, "ring: --ring-hier runs on host buffers; on GPUs NCCL builds its own rings across "
                       "machines (drop --ring-hier or --gpus)");
    engine_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->cfg = *cfg;
    if (cfg->opts) self->opts = *(const ring_opts_t *)cfg->opts;
    else ring_opts_init(&self->opts);
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = comm->timeout_ms;
    atomic_store(&self->algo, cfg->device >= 0 ? NULL : self->opts.hier && ring_hier_applies(comm) ? "hier" : "ring");
    int rc = 0;
    if (cfg->device >= 0) rc = ncclw_new(&self->nccl, comm, cfg->device, "Ring", self->cfg.timeout_ms);
    else if (self->opts.algo == RING_ALGO_ONESHOT && comm->world > 1 && !board_possible(comm))
        rc = err_set(ERR_INVAL, "ring: --ring-algo oneshot needs every rank on this host over shared memory "
                     "(transport %s here): use --ring-algo auto or ring", tp_kind(comm->tp, (comm->rank + 1) % comm->world));
    else if (self->opts.algo != RING_ALGO_RING && board_possible(comm))
        rc = board_new(&self->board, comm, self->opts.oneshot_max, self->cfg.timeout_ms);
    if (rc == 0) rc = arstep_new(&self->step, comm, &self->cfg, self->nccl ? s_nccl_fn : s_host_fn, self);
    if (rc < 0) {
        board_destroy(&self->board);
        ncclw_destroy(&self->nccl);
        free(self);
        return rc;
    }
    *self_p = self;
    return 0;
}

ARSTEP_FORWARDERS(step)
ARSTEP_FORWARD_ALLREDUCE(step)
static void s_stats(engine_t *self, engine_stats_t *out)
{
    arstep_stats(self->step, out);
    /* a descriptive impl, as the PS's: the configuration's label is then "ring-hier" in every table and report */
    out->impl = self->nccl ? ncclw_algo(self->nccl) : self->opts.hier && ring_hier_applies(self->comm) ? "ring-hier" : "host";
    out->algo = atomic_load(&self->algo);
    out->bytes_sent += atomic_load(&self->board_bytes);
    out->bytes_received += atomic_load(&self->board_bytes);
}
static void s_destroy(engine_t **self_p)
{
    engine_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    arstep_destroy(&self->step);
    board_destroy(&self->board);
    ncclw_destroy(&self->nccl);
    free(self);
    *self_p = NULL;
}

const engine_ops_t ring_engine = {
    .name = "ring",
    .impls = "host|nccl",
    .options = ring_options,
    .opts_size = sizeof(ring_opts_t),
    .opts_init = ring_opts_init,
    .opt_set = ring_opt_set,
    .schedule = ring_sched,
    ARSTEP_ENGINE_OPS,
};
