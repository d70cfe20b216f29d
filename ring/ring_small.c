/* ring_small.c: the ring engine's small-message path and its options. Below a size threshold a
 * bandwidth-optimal ring is latency-bound: 2(P-1) sequential hand-offs per segment, each a wake-up of
 * the next rank (and, when ranks outnumber cores, a trip through the scheduler). The one-shot
 * allreduce needs one: every rank copies its input into its buffer on a shared-memory board
 * (core/board.h), posts it, waits until every rank posted, and sums all P buffers itself in rank order
 * 0..P-1 (dt_sum_n: one pass, f32 accumulation for half types, then the average's scale), so every rank
 * computes bit for bit the same result; at P = 2 it is the ring's own (a + b, or (a + b) * 1/2).
 * Like NCCL, the engine says which algorithm ran (engine_stats_t.algo: "ring" or "oneshot"); the
 * choice can be forced (--ring-algo) and the threshold moved (--ring-oneshot-kb). The board needs every
 * rank on this host over shared memory; elsewhere (tcp, zmq) auto keeps the ring. */
#include "ring/ring.h"
#include "core/err.h"
#include "core/timer.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const engine_opt_t ring_options[] = {
    {"ring-algo", 1, "A",
     "ring: auto | ring | oneshot (auto: one-shot through shared memory up to --ring-oneshot-kb, else the ring)",
     "auto, ring or oneshot"},
    {"ring-oneshot-kb", 1, "KB",
     "ring: largest message auto sends one-shot (default 16 up to 4 ranks, 32 from 8) and each piece of a forced one-shot (default " RING_ONESHOT_KB_DEFAULT_S ")",
     "KiB, 1 to 65536"},
    {"ring-hier", 0, NULL,
     "ring: hierarchical allreduce on host buffers across machines: reduce within each machine to its lowest rank, "
     "a ring among those leaders, broadcast within (one machine, or one rank a machine: the flat ring)", NULL},
    {NULL, 0, NULL, NULL, NULL}};

void ring_opts_init(void *opts)
{
    ring_opts_t *o = opts;
    memset(o, 0, sizeof *o);
    o->algo = RING_ALGO_AUTO;
    o->oneshot_max = (size_t)RING_ONESHOT_KB_DEFAULT << 10;
}

int ring_opt_set(void *opts, const char *name, const char *v)
{
    ring_opts_t *o = opts;
    if (!o || !name) return err_set(ERR_INVAL, "ring: no option");
    if (!strcmp(name, "ring-algo")) {
        int a = ring_algo_parse(v);
        if (a < 0) return err_set(ERR_INVAL, "ring: --ring-algo '%s': want auto, ring or oneshot", v ? v : "");
        o->algo = a;
    } else if (!strcmp(name, "ring-hier")) {
        o->hier = 1;
    } else if (!strcmp(name, "ring-oneshot-kb")) {
        char *end;
        errno = 0;
        long kb = v ? strtol(v, &end, 10) : 0;
        if (!v || errno || end == v || *end || kb < 1 || kb > 65536)
            return err_set(ERR_INVAL, "ring: --ring-oneshot-kb '%s': want KiB, 1 to 65536", v ? v : "");
        o->oneshot_max = (size_t)kb << 10;
        o->oneshot_set = 1;
    } else {
        return err_set(ERR_INVAL, "ring: unknown option '%s'", name);
    }
    return 0;
}

size_t ring_oneshot_auto_max(const ring_opts_t *o, int world)
{
    if (o->oneshot_set) return o->oneshot_max;
    size_t m = (size_t)(world >= 8 ? 32 : 16) << 10;
    return m < o->oneshot_max ? m : o->oneshot_max;
}

int ring_algo_parse(const char *s)
{
    if (!s) return -1;
    if (!strcmp(s, "auto")) return RING_ALGO_AUTO;
    if (!strcmp(s, "ring")) return RING_ALGO_RING;
    if (!strcmp(s, "oneshot")) return RING_ALGO_ONESHOT;
    return -1;
}

const char *ring_algo_name(int algo)
{
    return algo == RING_ALGO_ONESHOT ? "oneshot" : algo == RING_ALGO_RING ? "ring" : "auto";
}

int ring_oneshot_allreduce(board_t *board, comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                           dtype_t dt, redop_t op, int timeout_ms)
{
    const int P = comm->world, me = comm->rank;
    tp_t *tp = comm->tp;
    const size_t esz = dt_size(dt);
    if (!esz) return err_set(ERR_INVAL, "ring: bad dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG && op != OP_MOVE) return err_set(ERR_INVAL, "ring: bad op %d", (int)op);
    if (!board) return err_set(ERR_STATE, "ring: one-shot without a shared board");
    const float scale = op == OP_AVG ? 1.0f / (float)P : 1.0f;
    const size_t piece = board_bytes(board) / esz; /* elements per round: a larger message takes several */
    const char *src = sendbuf;
    char *dst = recvbuf;
    uint64_t dl = deadline_in(timeout_ms);
    for (size_t off = 0; off < count; off += piece) {
        size_t n = count - off < piece ? count - off : piece;
        const void *const *all;
        memcpy(board_mine(board), src + off * esz, n * esz);
        CHECK(board_exchange(board, &all, deadline_left_ms(dl)));
        /* every peer reads these bytes of ours and we read theirs: the traffic matrix's entries */
        for (int r = 0; r < P; r++)
            if (r != me) tp_note_traffic(tp, r, n * esz, n * esz);
        /* the same order on every rank: 0, 1, ..., P-1 (dst may be this rank's input: it was copied) */
        if (op == OP_MOVE) dt_move_n(dst + off * esz, (const void *const *)all, P, n, dt);
        else dt_sum_n(dst + off * esz, (const void *const *)all, P, n, dt, scale);
    }
    return 0;
}
