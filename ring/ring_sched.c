/* ring_sched.c: the ring engine's schedule as data (core/sched.h) for one host allreduce: the one-shot
 * over the shared-memory board where the engine would take it (ring.c's s_host_fn decides the same
 * way), the hierarchical allreduce with --ring-hier across machines (ring_hier.c), else the ring's
 * 2 (P - 1) steps from ring_schedule. */
#include "ring/ring.h"
#include "core/sched.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the engine runs the one-shot for this allreduce: the board exists (every rank on this host
 * over shared memory, --ring-algo not ring) and the size is within auto's limit, or the one-shot is forced. */
static int s_oneshot(const ring_opts_t *o, const sched_env_t *env, size_t bytes)
{
    if (env->device >= 0 || !env->one_host_shm || env->workers < 2 || !bytes || o->algo == RING_ALGO_RING) return 0;
    return o->algo == RING_ALGO_ONESHOT || bytes <= ring_oneshot_auto_max(o, env->workers);
}

/* The pipelining segment in elements, as ring_seg_elems cuts it (the slot aside). */
static size_t s_seg(const sched_env_t *env, size_t esz, size_t count)
{
    if (!env->segmented) return count ? count : 1;
    double sc = env->size_scale > 1 ? env->size_scale : 1; /* an emulation's segments, at full size */
    size_t seg = (size_t)((double)(env->seg_bytes ? env->seg_bytes : RING_DEFAULT_SEG_BYTES) * sc) / esz;
    if (seg >= 64) seg &= ~(size_t)15;
    return seg ? seg : 1;
}

/* The ring's pieces over n chunks: every chunk in segments of seg elements when segmented (else one piece a
 * chunk), piece base + k * n + c = segment k of chunk c; returns the number of segments a chunk. */
static size_t s_ring_pieces(sched_t *s, int n, size_t count, size_t *seg, int segmented)
{
    char name[16];
    size_t nseg = 1;
    if (segmented) {
        nseg = (ring_chunk_len(count, n, 0) + *seg - 1) / *seg;
        if (!nseg) nseg = 1;
    } else {
        *seg = ring_chunk_len(count, n, 0);
    }
    for (size_t k = 0; k < nseg; k++)
        for (int c = 0; c < n; c++) {
            size_t len = ring_chunk_len(count, n, c), o = k * *seg, m = o >= len ? 0 : (len - o < *seg ? len - o : *seg);
            if (nseg > 1) snprintf(name, sizeof name, "c%d.%u", c % 100000, (unsigned)(k % 100000u));
            else snprintf(name, sizeof name, "c%d", c);
            sched_piece(s, ring_chunk_start(count, n, c) + (o < len ? o : len), m, name);
        }
    return nseg;
}

/* The ring's steps over ranks[0 .. n-1] (NULL: 0 .. n-1) on the pieces from base (s_ring_pieces), segment-major:
 * segment k through all 2 (n - 1) steps, then segment k + 1, as ring_allreduce_ranks runs it. what: a prefix
 * of the step titles. */
static void s_ring_steps(sched_t *s, const int *ranks, int n, int base, size_t nseg, const char *what)
{
    for (size_t k = 0; k < nseg; k++)
        for (int step = 0; step < 2 * (n - 1); step++) {
            int ag = step >= n - 1, j = ag ? step - (n - 1) : step;
            if (nseg > 1)
                sched_step(s, "%ssegment %zu of %zu, %s %d of %d", what, k + 1, nseg, ag ? "allgather" : "reduce-scatter",
                           j + 1, n - 1);
            else sched_step(s, "%s%s %d of %d", what, ag ? "allgather" : "reduce-scatter", j + 1, n - 1);
            for (int r = 0; r < n; r++) {
                ring_step_t st;
                ring_schedule(n, r, step, &st);
                int pc = base + (int)(k * (size_t)n) + st.send_chunk;
                /* an empty segment of a short chunk is no transfer (the engine sends an empty slot) */
                if (nseg == 1 || (pc < s->npieces && s->pieces[pc].count))
                    sched_xfer(s, ranks ? ranks[r] : r, ranks ? ranks[st.to] : st.to, pc, ag ? SCHED_STORE : SCHED_REDUCE);
            }
        }
}

/* The flat ring over ranks 0 .. n-1. */
static void s_ring(sched_t *s, int n, size_t count, size_t seg, int segmented)
{
    int base = s->npieces;
    size_t nseg = s_ring_pieces(s, n, count, &seg, segmented);
    s_ring_steps(s, NULL, n, base, nseg, "");
}

/* One chain of the hierarchy: at step t, place j of a machine of L (its ranks first .. first + L - 1) sends
 * batch t - d(j) to place j - 1 (reduce: d = L - 1 - j) or j + 1 (broadcast: d = j). A batch is one piece
 * when segmented (the chain pipelines them), else all of them (each hop moves the whole buffer); empty
 * pieces are no transfer (the engine skips them). */
static void s_chain(sched_t *s, int P, int G, int base, int npieces, int segmented, int bcast)
{
    const int nb = segmented ? npieces : 1, T = nb + G - 2;
    for (int t = 0; t < T; t++) {
        sched_step(s, "local %s %d of %d", bcast ? "broadcast" : "reduce", t + 1, T);
        for (int first = 0; first < P; first += G) {
            int L = P - first < G ? P - first : G;
            for (int j = 0; j < L; j++) {
                int to = bcast ? j + 1 : j - 1, b = t - (bcast ? j : L - 1 - j);
                if (to < 0 || to >= L || b < 0 || b >= nb) continue;
                for (int p = segmented ? b : 0; p < (segmented ? b + 1 : npieces); p++)
                    if (s->pieces[base + p].count)
                        sched_xfer(s, first + j, first + to, base + p, bcast ? SCHED_STORE : SCHED_REDUCE);
            }
        }
    }
}

/* --ring-hier on machines of G workers (worker w on machine w / G, its leader the lowest, M machines): a
 * chain reduce within each machine (the highest rank first), the ring among the leaders, a chain broadcast
 * within each machine, one after another and all on the leaders' ring's pieces, as ring_hier.c runs them. */
static int s_hier(const sched_env_t *env, size_t count, size_t esz, sched_t *s)
{
    const int P = env->workers, G = env->gpus_per_node, M = (P + G - 1) / G;
    sched_init(s, P, P, count, esz, "hier");
    snprintf(s->about, sizeof s->about,
             "hierarchical (--ring-hier): %d machines of %d workers; a chain reduces each machine's inputs to its lowest "
             "rank, the %d leaders run the ring (%d chunks), a chain broadcasts within each machine; only leaders send "
             "across machines, 2 (M - 1) / M of the buffer each", M, G, M, M);
    int *leaders = malloc((size_t)M * sizeof *leaders);
    if (!leaders) {
        s->bad = 1;   /* sched_done reports it */
        return sched_done(s);
    }
    for (int m = 0; m < M; m++) leaders[m] = m * G;
    size_t seg = s_seg(env, esz, count);
    int base = s->npieces;
    size_t nseg = s_ring_pieces(s, M, count, &seg, env->segmented);
    int np = s->npieces - base;
    s_chain(s, P, G, base, np, env->segmented, 0);
    s_ring_steps(s, leaders, M, base, nseg, "leaders' ring, ");
    s_chain(s, P, G, base, np, env->segmented, 1);
    free(leaders);
    return sched_done(s);
}

int ring_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *s)
{
    ring_opts_t dflt;
    if (!opts) {
        ring_opts_init(&dflt);
        opts = &dflt;
    }
    const ring_opts_t *o = opts;
    int P = env->workers;
    size_t bytes = count * esz;
    char name[16];
    if (o->hier && env->device < 0 && env->gpus_per_node > 1 && P > env->gpus_per_node) return s_hier(env, count, esz, s);
    if (s_oneshot(o, env, bytes)) {
        size_t lim = ring_oneshot_auto_max(o, P), piece = o->oneshot_max / esz;
        sched_init(s, P, P, count, esz, "oneshot");
        snprintf(s->about, sizeof s->about,
                 "one-shot: %zu B is %s, every rank on this host over shared memory: each rank posts its input on the "
                 "board, waits once for all %d, and sums all of them itself in rank order (--ring-algo ring for the ring)",
                 bytes, o->algo == RING_ALGO_ONESHOT ? "forced one-shot (--ring-algo oneshot)" : "within auto's one-shot limit",
                 P);
        if (o->algo != RING_ALGO_ONESHOT)
            snprintf(s->about + strlen(s->about), sizeof s->about - strlen(s->about), " [limit %zu KiB at %d ranks]",
                     lim >> 10, P);
        size_t nrounds = piece ? (count + piece - 1) / piece : 1;
        for (size_t r = 0, off = 0; off < count; r++, off += piece) {
            size_t n = count - off < piece ? count - off : piece;
            if (nrounds > 1) snprintf(name, sizeof name, "b%u", (unsigned)(r % 100000000u));
            else snprintf(name, sizeof name, "all");
            int pc = sched_piece(s, off, n, name);
            sched_step(s, "one-shot round %zu of %zu", r + 1, nrounds);
            sched_note(s, "every rank copies its input to its board buffer and posts the round; each then reads the other %d", P - 1);
            for (int dst = 0; dst < P; dst++)
                for (int src = 0; src < P; src++)
                    if (src != dst) sched_xfer(s, src, dst, pc, SCHED_REDUCE);
        }
        return sched_done(s);
    }
    sched_init(s, P, P, count, esz, "ring");
    snprintf(s->about, sizeof s->about,
             "ring: the buffer is cut into %d chunks, one per rank; %d reduce-scatter steps then %d allgather steps, each "
             "rank sending one chunk to rank + 1 per step%s%s", P, P - 1, P - 1,
             env->one_host_shm && env->device < 0 && o->algo == RING_ALGO_AUTO && P > 1
                 ? " (a message within auto's one-shot limit would take the one-shot)" : "",
             o->hier && env->device < 0 ? "; --ring-hier: one machine, or one rank a machine, is the flat ring" : "");
    s_ring(s, P, count, s_seg(env, esz, count), env->segmented);
    return sched_done(s);
}
