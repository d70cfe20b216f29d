/* tree.c: the tree allreduce engine: the double binary tree shape, the pipelined host collective over
 * the transport (core/tp.h), and the engine vtable (the step machinery is core/arstep.h's).
 *
 * Design.
 * Shape (NCCL's double binary tree, made strict for odd P). btree(n): rank 0 is the root and has one
 * child, the largest power of two below n; below it an in-order tree on 1..n-1 where a rank's level is
 * its lowest set bit: odd ranks are leaves, every even rank >= 2 has a child r - lowbit (always in
 * range) and maybe r + lowbit' (the largest power of two <= lowbit that stays < n). So with n even the
 * interior ranks of btree(n) are exactly the even ones. Tree 0 = btree(P), tree 1 = its mirror
 * (r -> P-1-r), whose interior ranks are exactly the odd ones: every rank is interior in exactly one
 * tree. Odd P: both trees are built on the first P-1 ranks (even) and rank P-1 hangs as a leaf under
 * both roots (0 and P-2), which have a free child slot; it is a leaf in both trees. Depth (edges from
 * the root) <= ceil(log2 P). (NCCL shifts the tree by one for odd P, which makes rank 0 interior in
 * both trees; we avoid that.)
 *
 * Data: elements [0, c0) go up and down tree 0, [c0, count) tree 1 (c0 about count/2, rounded to 16
 * elements so both halves start aligned). Each half is cut into segments of `seg` elements (seg_bytes;
 * by default sqrt(half * alpha/beta / 2D) clamped to 16..256 KiB, which balances pipeline fill against
 * per-segment hand-offs; never more than a transport slot).
 *
 * Schedule: global steps tau = 0, 1, ... In tree t with maximum depth D, the rank at depth d
 *   - up-op for segment s at tau = s + (D - d): acquire the segment from each child, acquire the send
 *     slot towards the parent, reduce (own input + children, dt_sum_n: f32 accumulation) straight into
 *     that slot, commit, release the children's slots. The root (d = 0) reduces into the output
 *     instead and applies the 1/P scale for OP_AVG (the only rounding of the scale, on one rank, so
 *     every rank ends with bit-identical results).
 *   - down-op for segment s at tau = s + D + d: take the segment from the parent (the root: from its
 *     output), copy it into the output and into the send slot towards each child, commit, release.
 * Within a step a rank runs: tree 0 up, tree 0 down, tree 1 up, tree 1 down. Scheduling by depth (not
 * height) means every segment is received exactly one step after it was sent, whatever the tree
 * looks like (a shallow leaf just starts later).
 *
 * Why both sides agree on the order, per ordered pair (a -> b): in one tree a -> b is either an up edge
 * or a down edge or unused, so each tree puts at most one segment per step on it; a commits in step
 * tau in the order tree 0, tree 1 and b acquires them all in step tau + 1 in the same order. FIFO holds.
 *
 * Why no cyclic wait (with S >= 2 slots per channel; tp requires >= 2, default 4): order every action
 * by (step, op index). An acquire of a received segment waits for a send in the previous step. A send
 * acquire of the m-th segment on a channel waits for the release of segment m-S, which happens one
 * step after it was sent. With at most two segments per step on a channel, m-S was sent at least
 * ceil((S+1)/2) - 1 steps before m: with S >= 4 the release happens in an earlier step than the
 * waiting send. With S = 2 or 3 it is at most in the same step as the waiting send; when it is,
 * the ordering per step (tree 0 messages before tree 1) makes segments m and m-S come from the same
 * tree op (so the wait follows tree edges in one direction: towards the root for up-ops, away from it
 * for down-ops, which ends) or the release sits in an earlier op of the step. Every wait thus points to
 * an earlier action or along an acyclic chain, so the whole run cannot deadlock. A rank holds at most
 * one acquired segment per peer and direction at a time (the transport's contract).
 *
 * In flight: per tree at most one segment per edge per step, plus whatever the channel's slots buffer
 * (S segments) when a receiver lags; steps = nseg + 2D per tree, both trees in the same loop so every
 * link carries data in both directions. */
#include "allreduce-tree/tree.h"
#include "allreduce-tree/tree_gpu.h"
#include "core/arstep.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TREE_SEG_DEFAULT (256u << 10)
#define TREE_SEG_MIN     (16u << 10)
#define TREE_ALPHA_OVER_BETA (32u << 10)
#define TREE_SPLIT_ALIGN 16

/* ---------- shape ---------- */

/* btree(n): see the design comment. */
static void s_btree(int n, int r, int *up, int ch[2])
{
    *up = -1;
    ch[0] = ch[1] = -1;
    if (n <= 1) return;
    int bit = 1;
    while (bit < n && !(r & bit)) bit <<= 1;
    if (r == 0) {                    /* bit is the smallest power of two >= n */
        ch[0] = bit >> 1;
        return;
    }
    int u = (r ^ bit) | (bit << 1);
    if (u >= n) u = r ^ bit;
    *up = u;
    int low = bit >> 1;
    if (low == 0) return;
    ch[0] = r - low;
    while (low > 0 && r + low >= n) low >>= 1;
    if (low > 0) ch[1] = r + low;
}

void tree_shape(int world, int t, int rank, int *parent, int child[2])
{
    *parent = -1;
    child[0] = child[1] = -1;
    if (world <= 1 || rank < 0 || rank >= world || (t != 0 && t != 1)) return;
    int n = world, extra = -1;
    if (world % 2) {                 /* odd: trees on ranks 0..world-2, world-1 a leaf of both roots */
        n = world - 1;
        extra = world - 1;
    }
    int root = t == 0 ? 0 : n - 1;
    if (rank == extra) {
        *parent = root;
        return;
    }
    if (t == 0) {
        s_btree(n, rank, parent, child);
    } else {
        int u, c[2];
        s_btree(n, n - 1 - rank, &u, c);
        *parent = u < 0 ? -1 : n - 1 - u;
        child[0] = c[0] < 0 ? -1 : n - 1 - c[0];
        child[1] = c[1] < 0 ? -1 : n - 1 - c[1];
    }
    if (rank == root && extra >= 0) child[1] = extra;   /* btree roots have one child, in slot 0 */
}

/* ---------- host collective ---------- */

typedef struct {
    int parent, child[2], nchild;
    int depth, maxdepth;
    size_t off, cnt, nseg;           /* element range of this tree, segments */
} s_tree_t;

typedef struct {
    tp_t *tp;
    const char *src;
    char *dst;
    dtype_t dt;
    size_t esz, seg;
    float scale;
    int move;                 /* OP_MOVE: the same segments travel, copied instead of reduced */
    uint64_t dl;
    void *scratch[2];                /* aligned copies of misaligned received segments (tcp) */
} s_run_t;

int tree_depth(int world, int t, int rank)
{
    int d = 0, p, c[2];
    for (;;) {
        tree_shape(world, t, rank, &p, c);
        if (p < 0) return d;
        rank = p;
        if (++d > world) return -1;  /* a cycle: a bug in tree_shape */
    }
}

static int s_tree_init(s_tree_t *tr, int world, int t, int rank)
{
    tree_shape(world, t, rank, &tr->parent, tr->child);
    tr->nchild = 0;
    if (tr->child[0] >= 0) tr->child[tr->nchild++] = tr->child[0];
    if (tr->child[1] >= 0) tr->child[tr->nchild++] = tr->child[1];
    tr->depth = tree_depth(world, t, rank);
    tr->maxdepth = 0;
    for (int r = 0; r < world; r++) {
        int d = tree_depth(world, t, r);
        if (d < 0 || tr->depth < 0) return err_set(ERR_STATE, "tree: shape %d for %d ranks has a cycle", t, world);
        if (d > tr->maxdepth) tr->maxdepth = d;
    }
    return 0;
}

static inline int s_left(const s_run_t *run)
{
    return deadline_left_ms(run->dl);
}

/* Range of segment s of tree tr: first element and element count. */
static inline void s_seg(const s_run_t *run, const s_tree_t *tr, size_t s, size_t *e0, size_t *n)
{
    *e0 = tr->off + s * run->seg;
    size_t end = tr->off + tr->cnt;
    *n = end - *e0 < run->seg ? end - *e0 : run->seg;
}

/* ZeroMQ may hand a received segment at any byte address; the reduction kernels read typed
 * elements, so a misaligned segment is first copied to an aligned scratch buffer. */
static int s_aligned(s_run_t *run, int k, const void **buf, size_t bytes)
{
    if ((uintptr_t)*buf % run->esz == 0) return 0;
    if (!run->scratch[k]) {
        size_t cap = (run->seg * run->esz + 63) & ~(size_t)63;
        if (!(run->scratch[k] = aligned_alloc(64, cap))) return ERR_NOMEM;
    }
    memcpy(run->scratch[k], *buf, bytes);
    *buf = run->scratch[k];
    return 0;
}

static int s_up(s_run_t *run, const s_tree_t *tr, size_t s)
{
    size_t e0, n;
    s_seg(run, tr, s, &e0, &n);
    size_t bytes = n * run->esz;
    const void *in[3] = {run->src + e0 * run->esz, NULL, NULL};
    for (int k = 0; k < tr->nchild; k++) {
        size_t len = 0;
        CHECK(tp_recv_acquire(run->tp, tr->child[k], &in[k + 1], &len, s_left(run)));
        if (len != bytes)
            return err_set(ERR_PROTO, "tree: rank %d sent a %zu-byte segment, expected %zu", tr->child[k], len, bytes);
        CHECK(s_aligned(run, k, &in[k + 1], bytes));
    }
    void *out;
    float scale = 1.0f;
    if (tr->parent >= 0) {
        CHECK(tp_send_acquire(run->tp, tr->parent, &out, s_left(run)));
    } else {
        out = run->dst + e0 * run->esz;
        scale = run->scale;
    }
    /* dt_sum_n: one pass, f32 accumulation; dst may alias the first input (in-place root) */
    if (run->move) dt_move_n(out, in, 1 + tr->nchild, n, run->dt);
    else dt_sum_n(out, in, 1 + tr->nchild, n, run->dt, scale);
    if (tr->parent >= 0) CHECK(tp_send_commit(run->tp, tr->parent, bytes));
    for (int k = 0; k < tr->nchild; k++) CHECK(tp_recv_release(run->tp, tr->child[k]));
    return 0;
}

static int s_down(const s_run_t *run, const s_tree_t *tr, size_t s)
{
    size_t e0, n;
    s_seg(run, tr, s, &e0, &n);
    size_t bytes = n * run->esz;
    char *out = run->dst + e0 * run->esz;
    const void *from = out;
    if (tr->parent >= 0) {
        size_t len = 0;
        CHECK(tp_recv_acquire(run->tp, tr->parent, &from, &len, s_left(run)));
        if (len != bytes)
            return err_set(ERR_PROTO, "tree: rank %d sent a %zu-byte segment, expected %zu", tr->parent, len, bytes);
        memcpy(out, from, bytes);
    }
    for (int k = 0; k < tr->nchild; k++) {
        void *slot;
        CHECK(tp_send_acquire(run->tp, tr->child[k], &slot, s_left(run)));
        memcpy(slot, from, bytes);
        CHECK(tp_send_commit(run->tp, tr->child[k], bytes));
    }
    if (tr->parent >= 0) CHECK(tp_recv_release(run->tp, tr->parent));
    return 0;
}

/* Default segment: a half of h bytes in segments of g bytes takes about (h/g + 2D) steps of
 * (alpha + g beta), minimal at g = sqrt(h alpha / (2 D beta)); alpha/beta ~ 32 KiB here (a hand-off of
 * some microseconds against a few GB/s of copying); clamped to [16 KiB, 256 KiB]. */
static size_t s_seg_auto(size_t half_bytes, int depth)
{
    double g = sqrt((double)half_bytes * (double)TREE_ALPHA_OVER_BETA / (2.0 * (depth > 0 ? depth : 1)));
    return g > TREE_SEG_DEFAULT ? TREE_SEG_DEFAULT : g < TREE_SEG_MIN ? TREE_SEG_MIN : (size_t)g;
}

size_t tree_seg_default(int world, size_t bytes)
{
    int depth = 1;
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < world; r++) {
            int d = tree_depth(world, t, r);
            if (d > depth) depth = d;
        }
    return s_seg_auto((bytes + 1) / 2, depth);
}

size_t tree_split(size_t count)
{
    size_t c0 = (count + 1) / 2;
    c0 = (c0 + TREE_SPLIT_ALIGN - 1) / TREE_SPLIT_ALIGN * TREE_SPLIT_ALIGN;
    return c0 > count ? count : c0;
}

int tree_allreduce_host(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                        redop_t op, size_t seg_bytes, int timeout_ms)
{
    size_t esz = dt_size(dt);
    if (!comm || !esz || (op != OP_SUM && op != OP_AVG && op != OP_MOVE))
        return err_set(ERR_INVAL, "tree allreduce: bad communicator, dtype %d or op %d", (int)dt, (int)op);
    if (count && (!sendbuf || !recvbuf)) return err_set(ERR_INVAL, "tree allreduce: NULL buffer");
    if (count > SIZE_MAX / esz) return err_set(ERR_RANGE, "tree allreduce: %zu elements overflow", count);
    if (count == 0) return 0;
    int world = comm->world, rank = comm->rank;
    if (world == 1) {
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, count * esz);
        return 0;                    /* the average of one rank is its value */
    }
    if (timeout_ms <= 0) timeout_ms = comm->timeout_ms;

    /* Split between the trees and segment size: functions of (count, dtype, seg_bytes, slot size) only,
     * so every rank computes the same. */
    size_t c0 = tree_split(count);
    size_t slot = SIZE_MAX;
    for (int r = 0; r < world; r++)
        if (r != rank && tp_slot_bytes(comm->tp, r) < slot) slot = tp_slot_bytes(comm->tp, r);
    s_tree_t tr[2];
    int depth = 1;
    for (int t = 0; t < 2; t++) {
        CHECK(s_tree_init(&tr[t], world, t, rank));
        if (tr[t].maxdepth > depth) depth = tr[t].maxdepth;
    }
    size_t sb = seg_bytes ? seg_bytes : s_seg_auto(c0 * esz, depth);
    if (sb > slot) sb = slot;
    if (sb >= 128) sb &= ~(size_t)63;
    size_t seg = sb / esz;
    if (seg == 0) seg = 1;
    for (int t = 0; t < 2; t++) {
        tr[t].off = t == 0 ? 0 : c0;
        tr[t].cnt = t == 0 ? c0 : count - c0;
        tr[t].nseg = (tr[t].cnt + seg - 1) / seg;
    }
    s_run_t run = {.tp = comm->tp, .src = sendbuf, .dst = recvbuf, .dt = dt, .esz = esz, .seg = seg,
                   .scale = op == OP_AVG ? 1.0f / (float)world : 1.0f, .move = op == OP_MOVE,
                   .dl = deadline_in(timeout_ms)};

    /* last step: the deepest down-op of the last segment, s = nseg - 1 at tau = s + 2D */
    size_t steps = 0;
    for (int t = 0; t < 2; t++)
        if (tr[t].nseg && tr[t].nseg + 2 * (size_t)tr[t].maxdepth > steps)
            steps = tr[t].nseg + 2 * (size_t)tr[t].maxdepth;
    int rc = 0;
    for (size_t tau = 0; tau < steps && rc == 0; tau++) {
        for (int t = 0; t < 2 && rc == 0; t++) {
            const s_tree_t *x = &tr[t];
            if (!x->nseg) continue;
            size_t lag = (size_t)(x->maxdepth - x->depth);
            if (tau >= lag && tau - lag < x->nseg) CHECK_GOTO(rc, s_up(&run, x, tau - lag), done);
            lag = (size_t)(x->maxdepth + x->depth);
            if (tau >= lag && tau - lag < x->nseg) CHECK_GOTO(rc, s_down(&run, x, tau - lag), done);
        }
    }
done:
    free(run.scratch[0]);
    free(run.scratch[1]);
    return rc;
}

/* ---------- engine ---------- */

/* impl: "host" (host buffers: the double binary tree above; with device buffers: staged through pinned
 * host memory), "gpu" (tree_gpu: CUDA IPC within a node; the default with device buffers), "nccl"
 * (NCCL with NCCL_ALGO=Tree). Every impl runs under core/arstep (overlap, optimizer). */
struct engine {
    comm_t *comm;
    engine_cfg_t cfg;
    const char *impl;
    char impl_desc[128];
    arstep_t *step;
    tree_gpu_t *gpu;
    ncclw_t *nccl;
    void *stage;                     /* impl host on device buffers: pinned staging buffer */
    size_t stage_bytes;
};

static int s_host_fn(void *ctx, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                     int timeout_ms)
{
    engine_t *self = ctx;
    return tree_allreduce_host(self->comm, sendbuf, recvbuf, count, dt, op, self->cfg.seg_bytes, timeout_ms);
}

static int s_staged_fn(void *ctx, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                       int timeout_ms)
{
    engine_t *self = ctx;
    size_t bytes = count * dt_size(dt);
    if (!bytes) return tree_allreduce_host(self->comm, NULL, NULL, 0, dt, op, self->cfg.seg_bytes, timeout_ms);
    if (bytes > self->stage_bytes) {
        dev_host_free(&self->stage);
        self->stage_bytes = 0;
        CHECK(dev_host_alloc(&self->stage, bytes));
        self->stage_bytes = bytes;
    }
    CHECK(dev_memcpy(self->stage, sendbuf, bytes));
    CHECK(tree_allreduce_host(self->comm, self->stage, self->stage, count, dt, op, self->cfg.seg_bytes, timeout_ms));
    CHECK(dev_memcpy(recvbuf, self->stage, bytes));
    return 0;
}

static int s_gpu_fn(void *ctx, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                    int timeout_ms)
{
    engine_t *self = ctx;
    return tree_gpu_allreduce(self->gpu, sendbuf, recvbuf, count, dt, op, timeout_ms);
}

static int s_nccl_fn(void *ctx, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                     int timeout_ms)
{
    engine_t *self = ctx;
    return ncclw_allreduce(self->nccl, sendbuf, recvbuf, count, dt, op, timeout_ms);
}

static void s_destroy(engine_t **self_p)
{
    engine_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    arstep_destroy(&self->step);     /* first: its thread may still call into the impls */
    tree_gpu_destroy(&self->gpu);
    ncclw_destroy(&self->nccl);
    dev_host_free(&self->stage);
    free(self);
    *self_p = NULL;
}

static int s_create(engine_t **self_p, comm_t *comm, const engine_cfg_t *cfg)
{
    if (!self_p || !comm || !cfg) return err_set(ERR_INVAL, "tree: create needs a communicator and a config");
    *self_p = NULL;
    const char *impl = cfg->impl && *cfg->impl ? cfg->impl : (cfg->device < 0 ? "host" : "gpu");
    arstep_allreduce_fn fn;
    if (!strcmp(impl, "host")) fn = cfg->device < 0 ? s_host_fn : s_staged_fn;
    else if (!strcmp(impl, "gpu")) fn = s_gpu_fn;
    else if (!strcmp(impl, "nccl")) fn = s_nccl_fn;
    else return err_set(ERR_INVAL, "tree: unknown implementation '%s' (host, gpu, nccl)", impl);
    if (cfg->device < 0 && fn != s_host_fn)
        return err_set(ERR_INVAL, "tree: implementation '%s' needs GPU buffers (--gpus); host buffers use 'host'", impl);
    engine_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->cfg = *cfg;
    self->cfg.impl = NULL;           /* the caller's string may not outlive us */
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = comm->timeout_ms;
    int rc;
    if (fn == s_gpu_fn) {
        CHECK_GOTO(rc, tree_gpu_new(&self->gpu, comm, cfg->device, cfg->seg_bytes, self->cfg.timeout_ms), fail);
        snprintf(self->impl_desc, sizeof self->impl_desc, "%s", tree_gpu_impl(self->gpu));
    } else if (fn == s_nccl_fn) {
        CHECK_GOTO(rc, ncclw_new(&self->nccl, comm, cfg->device, "Tree", self->cfg.timeout_ms), fail);
        snprintf(self->impl_desc, sizeof self->impl_desc, "%s", ncclw_algo(self->nccl));
    } else {
        snprintf(self->impl_desc, sizeof self->impl_desc, "%s",
                 fn == s_host_fn ? "host" : "host (staged from device buffers)");
    }
    self->impl = self->impl_desc;
    CHECK_GOTO(rc, arstep_new(&self->step, comm, &self->cfg, fn, self), fail);
    *self_p = self;
    return 0;
fail:
    s_destroy(&self);
    return rc;
}

ARSTEP_FORWARDERS(step)

/* not ARSTEP_FORWARD_ALLREDUCE: a timeout <= 0 here means the engine's own */
static int s_allreduce(engine_t *self, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                       redop_t op, int timeout_ms)
{
    return arstep_allreduce(self->step, sendbuf, recvbuf, count, dt, op,
                            timeout_ms > 0 ? timeout_ms : self->cfg.timeout_ms);
}

static void s_stats(engine_t *self, engine_stats_t *out)
{
    arstep_stats(self->step, out);
    out->impl = self->impl;
    if (self->gpu) {                 /* data moves by peer reads, not through the transport */
        out->bytes_received += tree_gpu_bytes(self->gpu);
        out->mem_engine_bytes += tree_gpu_mem_bytes(self->gpu);
        out->mem_engine_peak_bytes += tree_gpu_mem_bytes(self->gpu);
    }
    if (self->nccl) out->bytes_sent += ncclw_bytes(self->nccl);
    out->mem_engine_bytes += self->stage_bytes;
    out->mem_engine_peak_bytes += self->stage_bytes;
}

const engine_ops_t tree_engine = {
    .name = "tree",
    .impls = "host|gpu|nccl",
    .schedule = tree_sched,
    ARSTEP_ENGINE_OPS,
};
