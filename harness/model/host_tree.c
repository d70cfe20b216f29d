/* host_tree.c (harness/model): the host cost model's double binary tree (host_cost.h) from the tree
 * engine's declared schedule through the registry, not from the engine's own functions: its shape
 * (depth, sends and reduces a rank) from the whole-halves schedule, its segment from the segmented one,
 * and h_cm_tree's lock-step replay from the segmented schedule's steps. */
#include "harness/model/host_cost.h"
#include "harness/registry/engines.h"
#include "core/sched.h"
#include "core/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The engine this file replays: the registry's first whose declared schedule (at its defaults, 4 workers) is a
 * dataflow allreduce, pieces forwarded as held and no owners (the double binary tree); NULL: none. */
static const char *s_engine(const h_engset_t *es)
{
    static const char *name;
    for (int i = 0; !name && i < h_engine_count(); i++) {
        sched_t s;
        memset(&s, 0, sizeof s);
        sched_env_t env = {.workers = 4, .device = -1};
        if (h_engine_schedule(es, h_engine_at(i)->name, &env, 4 * 2048, 4, &s) == 0 && s.dataflow && !s.owners)
            name = h_engine_at(i)->name;
        sched_free(&s);
    }
    return name;
}

/* The tree's schedule of count elements of esz bytes on P ranks (segmented, seg_bytes 0: the engine's
 * own segment): 0 or a code. */
static int s_sched(int P, size_t count, size_t esz, int segmented, size_t seg_bytes, sched_t *s)
{
    h_engset_t es;
    memset(&es, 0, sizeof es);
    memset(s, 0, sizeof *s);
    int rc = h_engine_opts_init(es.eopts);
    sched_env_t env = {.workers = P, .device = -1, .segmented = segmented, .seg_bytes = seg_bytes};
    const char *eng = rc == 0 ? s_engine(&es) : NULL;
    err_clear();
    if (rc == 0) rc = eng ? h_engine_schedule(&es, eng, &env, count, esz, s)
                          : err_set(ERR_INVAL, "model: no engine declares a dataflow allreduce schedule");
    h_engine_opts_free(es.eopts);
    return rc;
}

void h_cm_tree_shape(int P, int *depth, int *k, int *c)
{
    *depth = 0, *k = 0, *c = 0;
    if (P <= 1) return;
    sched_t s;
    int *sends = calloc((size_t)P, sizeof *sends), *reduces = calloc((size_t)P, sizeof *reduces);
    if (!sends || !reduces || s_sched(P, (size_t)P * 65536, 4, 0, 0, &s) < 0) {
        free(sends);
        free(reduces);
        return;
    }
    /* whole halves (of a count both trees get a half of): a step with a reduce is one level up the deeper
     * tree */
    for (int st = 0; st < s.nsteps; st++) {
        int up = 0;
        for (size_t i = s.steps[st].first; i < s.steps[st].first + s.steps[st].n; i++) {
            const sched_xfer_t *x = &s.x[i];
            if (x->src == x->dst) continue;
            sends[x->src]++;
            if (x->op == SCHED_REDUCE) reduces[x->dst]++, up = 1;
        }
        *depth += up;
    }
    for (int r = 0; r < P; r++) {
        if (sends[r] > *k) *k = sends[r];
        if (reduces[r] > *c) *c = reduces[r];
    }
    free(sends);
    free(reduces);
    sched_free(&s);
}

double h_cm_tree_seg(int P, double n)
{
    if (P <= 1 || n <= 0) return 0;
    sched_t s;
    if (s_sched(P, (size_t)n, 1, 1, 0, &s) < 0) return 0;
    /* the first piece: a whole segment, or the half when a half is shorter than one (h_cm_tree takes the
     * half then too) */
    double seg = s.npieces ? (double)s.pieces[0].count : 0;
    sched_free(&s);
    return seg;
}

double h_cm_tree(const h_cm_t *m, int P, double n, double seg)
{
    if (P <= 1 || n <= 0) return 0;
    if (seg <= 0) seg = h_cm_tree_seg(P, n);
    sched_t s;
    if (s_sched(P, (size_t)n, 1, 1, (size_t)seg, &s) < 0) return -1;
    long T = s.nsteps + 1;
    /* bytes each rank puts on its link (out), takes off it (in) and reduces, per lock-step step; a rank
     * reduces what it received in the step before, as it sends it on */
    double *out = calloc((size_t)(3 * T) * (size_t)P, sizeof *out);
    if (!out) { sched_free(&s); return -1; }
    double *in = out + T * P, *red = in + T * P;
    for (long tau = 0; tau < s.nsteps; tau++)
        for (size_t i = s.steps[tau].first; i < s.steps[tau].first + s.steps[tau].n; i++) {
            const sched_xfer_t *x = &s.x[i];
            if (x->src == x->dst) continue;
            double len = (double)sched_xfer_bytes(&s, x);
            out[tau * P + x->src] += len, in[tau * P + x->dst] += len;
            if (x->op == SCHED_REDUCE) red[(tau + 1) * P + x->dst] += len;
        }
    sched_free(&s);
    /* the schedule as links: rank r's out direction is link 2r, its in direction 2r+1; steps that
     * move and reduce nothing (a depth difference between the trees) are dropped */
    double *lk = malloc((size_t)T * (2 * (size_t)P + 1) * sizeof *lk);
    if (!lk) { free(out); return -1; }
    double *rd = lk + (size_t)T * 2 * (size_t)P, work = 0;
    long ns = 0;
    for (long tau = 0; tau < T; tau++) {
        double any = 0, mr = 0;
        for (int r = 0; r < P; r++) {
            double o = out[tau * P + r], i = in[tau * P + r], d = red[tau * P + r];
            lk[ns * 2 * P + 2 * r] = o, lk[ns * 2 * P + 2 * r + 1] = i;
            any += o + i + d, mr = fmax(mr, d);
            work += (o + i) * m->kappa + d * m->gamma;
        }
        if (any > 0) rd[ns++] = mr;
    }
    double time = h_cm_run(m, ns, 2 * P, lk, rd, NULL);
    free(lk);
    free(out);
    return time < 0 ? time : fmax(time, h_cm_cpu(m, P, work + P * n * m->mu));
}
