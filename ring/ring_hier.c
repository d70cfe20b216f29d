/* ring_hier.c: the ring engine's hierarchical allreduce on host buffers (--ring-hier; the Horovod / NCCL
 * design): reduce within each machine to its leader, a ring among the leaders, broadcast within.
 *
 * The machines are comm->node_of's nodes (the host identity includes the network namespace, so the
 * emulated cluster's machines are machines); a machine's ranks in ascending order m_0 < m_1 < ... < m_{L-1},
 * its leader m_0. The three phases run one after another, each pipelined in the segments the leaders' ring
 * cuts (ring_seg_elems, the same on every rank since every transport slot has one size: segment k of each of
 * the M chunks, for k, then the chunk; the local phases move the ring's pieces):
 *   local reduce   a chain m_{L-1} -> m_{L-2} -> ... -> m_0: for each segment, m_{L-1} sends its own values,
 *                  m_j (0 < j < L-1) adds its own to what m_{j+1} sent straight into the send slot towards
 *                  m_{j-1}, and m_0 adds its own into the output; so the leader holds
 *                  x_0 + (x_1 + (... + x_{L-1})), a fixed order;
 *   leaders' ring  ring_allreduce_ranks over the leaders in node order, in place on the output (for avg it
 *                  divides by the world once, where the ring completes a chunk);
 *   local bcast    a chain m_0 -> m_1 -> ... -> m_{L-1}: every rank copies the segment to its output and
 *                  forwards it; every rank then holds the leader's bits, and every leader the same.
 * Each pair's channel carries one phase only (m_j -> m_{j-1} the reduce, m_{j-1} -> m_j the broadcast,
 * leader -> next leader the ring), and the chains are acyclic, so nothing can deadlock. */
#include "ring/ring.h"
#include "core/err.h"
#include "core/timer.h"
#include <stdlib.h>
#include <string.h>

int ring_hier_applies(const comm_t *comm)
{
    return comm->nnodes > 1 && comm->nnodes < comm->world;
}

/* The units the local phases move, in order: segment k of the leaders' ring's chunk c, for k, then c (the
 * pieces the ring moves, so that the three phases cut the buffer alike); an empty one is skipped on both sides. */
typedef struct {
    size_t count, seg, nseg;
    int M;
} s_units_t;

static s_units_t s_units(size_t count, int M, size_t seg)
{
    s_units_t u = {.count = count, .seg = seg, .M = M};
    u.nseg = (ring_chunk_len(count, M, 0) + seg - 1) / seg;
    return u;
}

/* Unit i (0 .. nseg * M - 1): its offset and length (0: empty). */
static size_t s_unit(const s_units_t *u, size_t i, size_t *off)
{
    size_t k = i / (size_t)u->M, len = ring_chunk_len(u->count, u->M, (int)(i % (size_t)u->M)), o = k * u->seg;
    *off = ring_chunk_start(u->count, u->M, (int)(i % (size_t)u->M)) + o;
    return o >= len ? 0 : (len - o < u->seg ? len - o : u->seg);
}

static int s_recv_n(tp_t *tp, int peer, size_t want, const void **in, uint64_t dl, const char *what)
{
    size_t len = 0;
    CHECK(tp_recv_acquire(tp, peer, in, &len, deadline_left_ms(dl)));
    if (len != want) {
        tp_recv_release(tp, peer);
        return err_set(ERR_PROTO, "ring hier: rank %d sent %zu bytes for a %zu-byte segment of the %s", peer, len, want,
                       what);
    }
    return 0;
}

/* The chain reduce of this rank's machine (mine[0 .. L-1], this rank at place j) into dst on the leader. */
static int s_local_reduce(tp_t *tp, const int *mine, int L, int j, const char *src, char *dst, const s_units_t *u,
                          size_t esz, dtype_t dt, int move, uint64_t dl)
{
    if (L == 1) {
        if (u->count && src != dst) memcpy(dst, src, u->count * esz);
        return 0;
    }
    for (size_t i = 0; i < u->nseg * (size_t)u->M; i++) {
        size_t off, n = s_unit(u, i, &off);
        if (!n) continue;
        const void *in = NULL;
        void *out = NULL;
        if (j == L - 1) {   /* the chain's start: its own values */
            CHECK(tp_send_acquire(tp, mine[j - 1], &out, deadline_left_ms(dl)));
            memcpy(out, src + off * esz, n * esz);
            CHECK(tp_send_commit(tp, mine[j - 1], n * esz));
            continue;
        }
        CHECK(s_recv_n(tp, mine[j + 1], n * esz, &in, dl, "local reduce"));
        if (j == 0) {       /* the leader: its own plus the rest of its machine, into the output */
            if (move) memcpy(dst + off * esz, in, n * esz);
            else dt_add(dst + off * esz, src + off * esz, in, n, dt);
            CHECK(tp_recv_release(tp, mine[j + 1]));
            continue;
        }
        int rc = tp_send_acquire(tp, mine[j - 1], &out, deadline_left_ms(dl));
        if (rc < 0) {
            tp_recv_release(tp, mine[j + 1]);
            return rc;
        }
        if (move) memcpy(out, in, n * esz);
        else dt_add(out, src + off * esz, in, n, dt);
        CHECK(tp_recv_release(tp, mine[j + 1]));
        CHECK(tp_send_commit(tp, mine[j - 1], n * esz));
    }
    return 0;
}

/* The chain broadcast of the leader's dst within its machine. */
static int s_local_bcast(tp_t *tp, const int *mine, int L, int j, char *dst, const s_units_t *u, size_t esz,
                         uint64_t dl)
{
    if (L == 1) return 0;
    for (size_t i = 0; i < u->nseg * (size_t)u->M; i++) {
        size_t off, n = s_unit(u, i, &off);
        if (!n) continue;
        const void *in = NULL;
        void *out = NULL;
        if (j == 0) {
            CHECK(tp_send_acquire(tp, mine[1], &out, deadline_left_ms(dl)));
            memcpy(out, dst + off * esz, n * esz);
            CHECK(tp_send_commit(tp, mine[1], n * esz));
            continue;
        }
        CHECK(s_recv_n(tp, mine[j - 1], n * esz, &in, dl, "local broadcast"));
        memcpy(dst + off * esz, in, n * esz);
        if (j < L - 1) {
            int rc = tp_send_acquire(tp, mine[j + 1], &out, deadline_left_ms(dl));
            if (rc < 0) {
                tp_recv_release(tp, mine[j - 1]);
                return rc;
            }
            memcpy(out, dst + off * esz, n * esz);
            CHECK(tp_recv_release(tp, mine[j - 1]));
            CHECK(tp_send_commit(tp, mine[j + 1], n * esz));
        } else {
            CHECK(tp_recv_release(tp, mine[j - 1]));
        }
    }
    return 0;
}

int ring_hier_allreduce(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                        size_t seg_bytes, int timeout_ms)
{
    if (!ring_hier_applies(comm)) return ring_allreduce_host(comm, sendbuf, recvbuf, count, dt, op, seg_bytes, timeout_ms);
    const int P = comm->world, M = comm->nnodes;
    const size_t esz = dt_size(dt);
    if (!esz) return err_set(ERR_INVAL, "ring hier: bad dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG && op != OP_MOVE) return err_set(ERR_INVAL, "ring hier: bad op %d", (int)op);
    if (count == 0) return 0;
    int *leaders = malloc((size_t)M * sizeof(int)), *mine = malloc((size_t)P * sizeof(int));
    if (!leaders || !mine) {
        free(leaders);
        free(mine);
        return err_set(ERR_NOMEM, "ring hier: out of memory for a world of %d", P);
    }
    for (int m = 0; m < M; m++) leaders[m] = -1;
    int L = 0, j = -1;
    for (int r = 0; r < P; r++) {
        int nd = comm->node_of[r];
        if (nd >= 0 && nd < M && leaders[nd] < 0) leaders[nd] = r;
        if (nd == comm->node) {
            if (r == comm->rank) j = L;
            mine[L++] = r;
        }
    }
    int rc = 0;
    for (int m = 0; m < M && rc == 0; m++)
        if (leaders[m] < 0) rc = err_set(ERR_STATE, "ring hier: node %d of %d has no rank", m, M);
    if (rc == 0 && j < 0) rc = err_set(ERR_STATE, "ring hier: rank %d is not on its own node %d", comm->rank, comm->node);
    uint64_t dl = deadline_in(timeout_ms);
    /* one segment size for all three phases: every rank computes the same (one slot size per transport) */
    size_t seg = rc == 0 ? ring_seg_elems(comm, L > 1 ? mine[j ? j - 1 : 1] : leaders[(comm->node + 1) % M], seg_bytes, esz) : 1;
    s_units_t u = s_units(count, M, seg);
    if (rc == 0) rc = s_local_reduce(comm->tp, mine, L, j, sendbuf, recvbuf, &u, esz, dt, op == OP_MOVE, dl);
    if (rc == 0 && j == 0)
        rc = ring_allreduce_ranks(comm, leaders, M, recvbuf, recvbuf, count, dt, op, P, seg * esz, dl);
    if (rc == 0) rc = s_local_bcast(comm->tp, mine, L, j, recvbuf, &u, esz, dl);
    free(leaders);
    free(mine);
    return rc;
}
