/* ring_sched.c: the ring engine's schedule as data (core/sched.h) for one host allreduce: the one-shot
 * over the shared-memory board where the engine would take it (ring.c's s_host_fn decides the same
 * way), else the ring's 2 (P - 1) steps from ring_schedule. */
#include "ring/ring.h"
#include "core/sched.h"
#include <stdio.h>
#include <string.h>

/* Whether the engine runs the one-shot for this allreduce: the board exists (every rank on this host
 * over shared memory, --ring-algo not ring) and the size is within auto's limit, or the one-shot is forced. */
static int s_oneshot(const ring_opts_t *o, const sched_env_t *env, size_t bytes)
{
    if (env->device >= 0 || !env->one_host_shm || env->workers < 2 || !bytes || o->algo == RING_ALGO_RING) return 0;
    return o->algo == RING_ALGO_ONESHOT || bytes <= ring_oneshot_auto_max(o, env->workers);
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
             "rank sending one chunk to rank + 1 per step%s", P, P - 1, P - 1,
             env->one_host_shm && env->device < 0 && o->algo == RING_ALGO_AUTO && P > 1
                 ? " (a message within auto's one-shot limit would take the one-shot)" : "");
    /* segmented: every chunk in segments of seg elements as ring_allreduce_host cuts them (a multiple of 16
     * from 64 on), segment-major: segment k through all 2 (P - 1) steps, then segment k + 1 */
    size_t seg = ring_chunk_len(count, P, 0), nseg = 1;
    if (env->segmented) {
        double sc = env->size_scale > 1 ? env->size_scale : 1; /* an emulation's segments, at full size */
        seg = (size_t)((double)(env->seg_bytes ? env->seg_bytes : RING_DEFAULT_SEG_BYTES) * sc) / esz;
        if (seg >= 64) seg &= ~(size_t)15;
        if (seg == 0) seg = 1;
        nseg = (ring_chunk_len(count, P, 0) + seg - 1) / seg;
        if (!nseg) nseg = 1;
    }
    for (size_t k = 0; k < nseg; k++)
        for (int c = 0; c < P; c++) {
            size_t len = ring_chunk_len(count, P, c), o = k * seg, n = o >= len ? 0 : (len - o < seg ? len - o : seg);
            if (nseg > 1) snprintf(name, sizeof name, "c%d.%u", c % 100000, (unsigned)(k % 100000u));
            else snprintf(name, sizeof name, "c%d", c);
            sched_piece(s, ring_chunk_start(count, P, c) + (o < len ? o : len), n, name);
        }
    for (size_t k = 0; k < nseg; k++)
        for (int step = 0; step < 2 * (P - 1); step++) {
            int ag = step >= P - 1, j = ag ? step - (P - 1) : step;
            if (nseg > 1)
                sched_step(s, "segment %zu of %zu, %s %d of %d", k + 1, nseg, ag ? "allgather" : "reduce-scatter", j + 1, P - 1);
            else sched_step(s, "%s %d of %d", ag ? "allgather" : "reduce-scatter", j + 1, P - 1);
            for (int r = 0; r < P; r++) {
                ring_step_t st;
                ring_schedule(P, r, step, &st);
                int pc = (int)(k * (size_t)P) + st.send_chunk;
                /* an empty segment of a short chunk is no transfer (the engine sends an empty slot) */
                if (nseg == 1 || (pc < s->npieces && s->pieces[pc].count))
                    sched_xfer(s, r, st.to, pc, ag ? SCHED_STORE : SCHED_REDUCE);
            }
        }
    return sched_done(s);
}
