/* tree_sched.c: the double binary tree's schedule as data (core/sched.h): the buffer's two halves, one
 * per tree (tree_split); in step tau a rank at depth d of tree t sends its partial sum of that half up
 * when tau = D - d and the complete half down to its children when tau = D + d (D: the tree's depth),
 * so 2 D + 1 steps; the engine pipelines segments through these same steps. */
#include "allreduce-tree/tree.h"
#include "core/sched.h"
#include <stdio.h>
#include <stdlib.h>

int tree_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *s)
{
    (void)opts;
    int P = env->workers;
    sched_init(s, P, P, count, esz, "tree");
    size_t c0 = tree_split(count), cnt[2] = {c0, count - c0};
    int D[2] = {0, 0}, piece[2] = {-1, -1};
    int *depth = calloc((size_t)P * 2, sizeof *depth), *parent = calloc((size_t)P * 2, sizeof *parent);
    int(*child)[2] = calloc((size_t)P * 2, sizeof *child);
    if (!depth || !parent || !child) {
        free(depth), free(parent), free(child);
        sched_free(s);
        sched_init(s, P, P, count, esz, "tree");
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
        char name[16];
        snprintf(name, sizeof name, "h%d", t);
        if (cnt[t]) piece[t] = sched_piece(s, t ? c0 : 0, cnt[t], name);
        for (int r = 0; r < P && o + 24 < sizeof s->about; r++) {
            if (parent[t * P + r] < 0) o += (size_t)snprintf(s->about + o, sizeof s->about - o, " %d(root)", r);
            else o += (size_t)snprintf(s->about + o, sizeof s->about - o, " %d->%d", r, parent[t * P + r]);
        }
        if (o + 24 < sizeof s->about)
            o += (size_t)snprintf(s->about + o, sizeof s->about - o, " (tree %d, child->parent, depth %d)%s", t, D[t], t ? "" : ";");
    }
    int steps = 2 * (D[0] > D[1] ? D[0] : D[1]) + 1;
    for (int tau = 0; tau < steps; tau++) {
        sched_step(s, "%s", "");
        char note[160] = "";
        size_t n = 0;
        for (int t = 0; t < 2; t++) {
            if (piece[t] < 0) continue;
            for (int r = 0; r < P; r++) {
                int d = depth[t * P + r], up = parent[t * P + r];
                if (tau == D[t] - d) {   /* up: own + children's sums (received last step) */
                    if (up >= 0) sched_xfer(s, r, up, piece[t], SCHED_REDUCE);
                    else n += (size_t)snprintf(note + n, sizeof note - n, "%stree %d's root, rank %d, holds the complete h%d",
                                               n ? "; " : "", t, r, t);
                }
                if (tau == D[t] + d)     /* down: the complete half, on to the children */
                    for (int k = 0; k < 2; k++)
                        if (child[t * P + r][k] >= 0) sched_xfer(s, r, child[t * P + r][k], piece[t], SCHED_STORE);
            }
        }
        if (n) sched_note(s, "%s", note);
    }
    free(depth), free(parent), free(child);
    return sched_done(s);
}
