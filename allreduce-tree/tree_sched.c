/* tree_sched.c: the double binary tree's schedule as data (core/sched.h): the buffer's two halves, one
 * per tree (tree_split); in step tau a rank at depth d of tree t sends its partial sum of that half up
 * when tau = D - d and the complete half down to its children when tau = D + d (D: the tree's depth),
 * so 2 D + 1 steps; the engine pipelines segments through these same steps. A dataflow schedule
 * (sched_t.dataflow): each of tree.c's ops waits for its own segment from its child or parent, not for
 * every receive of the step before. */
#include "allreduce-tree/tree.h"
#include "core/sched.h"
#include <stdio.h>
#include <stdlib.h>

int tree_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *s)
{
    (void)opts;
    int P = env->workers;
    sched_init(s, P, P, count, esz, "tree");
    s->dataflow = 1;
    size_t c0 = tree_split(count), cnt[2] = {c0, count - c0};
    int D[2] = {0, 0};
    int *depth = calloc((size_t)P * 2, sizeof *depth), *parent = calloc((size_t)P * 2, sizeof *parent);
    int(*child)[2] = calloc((size_t)P * 2, sizeof *child);
    if (!depth || !parent || !child) {
        free(depth), free(parent), free(child);
        sched_free(s);
        sched_init(s, P, P, count, esz, "tree");
    s->dataflow = 1;
        s->bad = 1;
        return sched_done(s);
    }
    size_t o = (size_t)snprintf(s->about, sizeof s->about, "double binary tree: half h0 goes up and down tree 0, h1 tree 1;");
    for (int t = 0; t < 2; t++) {
        for (int r = 0; r < P; r++) {
            tree_shape(P, t, r, &parent[t * P + r], child[t * P + r]);
            depth[t * P + r] = tree_depth(P, t, r);
            if (depth[t * P + r] > D[t]) D[t] = depth[t * P + r];
        }
        for (int r = 0; r < P && o + 24 < sizeof s->about; r++) {
            if (parent[t * P + r] < 0) o += (size_t)snprintf(s->about + o, sizeof s->about - o, " %d(root)", r);
            else o += (size_t)snprintf(s->about + o, sizeof s->about - o, " %d->%d", r, parent[t * P + r]);
        }
        if (o + 24 < sizeof s->about)
            o += (size_t)snprintf(s->about + o, sizeof s->about - o, " (tree %d, child->parent, depth %d)%s", t, D[t], t ? "" : ";");
    }
    /* segmented: each half in segments as tree.c cuts them (tree_seg_default, a multiple of 64 bytes from
     * 128 on), lock-step: segment j's up-op at depth d in step j + D - d, its down-op in step j + D + d */
    size_t seg = cnt[0] > cnt[1] ? cnt[0] : cnt[1], nseg[2] = {cnt[0] ? 1 : 0, cnt[1] ? 1 : 0};
    if (env->segmented && count) {
        double sc = env->size_scale > 1 ? env->size_scale : 1; /* an emulation cut its shrunk buffer */
        size_t sb = env->seg_bytes ? env->seg_bytes : tree_seg_default(P, (size_t)((double)(count * esz) / sc));
        if (sb >= 128) sb &= ~(size_t)63;
        sb = (size_t)((double)sb * sc);
        seg = sb / esz ? sb / esz : 1;
        for (int t = 0; t < 2; t++) nseg[t] = (cnt[t] + seg - 1) / seg;
    }
    int base[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        base[t] = s->npieces;
        for (size_t j = 0; j < nseg[t]; j++) {
            char name[16];
            if (nseg[t] > 1) snprintf(name, sizeof name, "h%d.%u", t, (unsigned)(j % 1000000u));
            else snprintf(name, sizeof name, "h%d", t);
            size_t off = (t ? c0 : 0) + j * seg, n = cnt[t] - j * seg < seg ? cnt[t] - j * seg : seg;
            sched_piece(s, off, n, name);
        }
    }
    size_t steps = 0;
    for (int t = 0; t < 2; t++)
        if (nseg[t] && nseg[t] + 2 * (size_t)D[t] > steps) steps = nseg[t] + 2 * (size_t)D[t];
    for (size_t tau = 0; tau < steps; tau++) {
        sched_step(s, "%s", "");
        char note[160] = "";
        size_t n = 0;
        for (int t = 0; t < 2; t++) {
            for (int r = 0; r < P; r++) {
                size_t d = (size_t)depth[t * P + r], Dt = (size_t)D[t];
                int up = parent[t * P + r];
                if (tau >= Dt - d && tau - (Dt - d) < nseg[t]) {   /* up: own + children's sums (received last step) */
                    int pc = base[t] + (int)(tau - (Dt - d));
                    if (up >= 0) sched_xfer(s, r, up, pc, SCHED_REDUCE);
                    else if (nseg[t] == 1)
                        n += (size_t)snprintf(note + n, sizeof note - n, "%stree %d's root, rank %d, holds the complete h%d",
                                              n ? "; " : "", t, r, t);
                }
                if (tau >= Dt + d && tau - (Dt + d) < nseg[t])     /* down: the complete segment, on to the children */
                    for (int k = 0; k < 2; k++)
                        if (child[t * P + r][k] >= 0)
                            sched_xfer(s, r, child[t * P + r][k], base[t] + (int)(tau - (Dt + d)), SCHED_STORE);
            }
        }
        if (n) sched_note(s, "%s", note);
    }
    free(depth), free(parent), free(child);
    return sched_done(s);
}
