/* costmodel.c: the alpha-beta-gamma formulas of costmodel.h and the least-squares fits.
 *
 * Derivations (n bytes per rank, P ranks, one full-duplex link per rank):
 *  - ring: each of the 2(P-1) steps moves one chunk n/P over every link at once and starts with one
 *    message latency; the P-1 reduce-scatter steps each add one chunk.
 *  - tree: both halves (n/2) travel their own tree concurrently, in segments of the engine's own size
 *    (tree_seg_default); the schedule is lock-step (tree.c: up-op of segment s at depth d in step
 *    s + D_t - d, down-op in step s + D_t + d). h_cm_tree replays that schedule: for every step it adds
 *    the bytes each rank puts on its link and takes off it (full duplex: the busier direction counts)
 *    and the bytes it reduces, and charges the step alpha + (busiest link) beta + (most reduced) gamma.
 *    So the pipeline's fill and drain cost what they carry (at P = 2 a link carries one segment in the
 *    first and last step, two in between), not k segments each. In the steady state an interior rank
 *    (P >= 4) moves 4 segments a step: about 2 n beta, against the ring's 2 (P-1)/P n beta.
 *  - ps: see costmodel.h. */
#include "harness/costmodel.h"
#include "allreduce-tree/tree.h"
#include <math.h>
#include <stdlib.h>

double h_cm_ring(const h_cm_t *m, int P, double n)
{
    if (P <= 1 || n <= 0) return 0;
    double f = (double)(P - 1) / P;
    return 2.0 * (P - 1) * m->alpha + 2.0 * f * n * m->beta + f * n * m->gamma;
}

void h_cm_tree_shape(int P, int *depth, int *k, int *c)
{
    *depth = 0, *k = 0, *c = 0;
    if (P <= 1) return;
    int *dep = malloc((size_t)P * sizeof *dep);
    if (!dep) return;
    for (int t = 0; t < 2; t++) {
        /* depth of every rank: walk up to the root (D <= ceil(log2 P), so this is cheap) */
        for (int r = 0; r < P; r++) {
            int d = 0, x = r, parent, ch[2];
            for (;;) {
                tree_shape(P, t, x, &parent, ch);
                if (parent < 0 || d > P) break;
                x = parent;
                d++;
            }
            dep[r] = d;
            if (d > *depth) *depth = d;
        }
    }
    for (int r = 0; r < P; r++) {
        int sends = 0, reduces = 0;
        for (int t = 0; t < 2; t++) {
            int parent, ch[2];
            tree_shape(P, t, r, &parent, ch);
            int nc = (ch[0] >= 0) + (ch[1] >= 0);
            sends += (parent >= 0) + nc;
            reduces += nc;
        }
        if (sends > *k) *k = sends;
        if (reduces > *c) *c = reduces;
    }
    free(dep);
}

double h_cm_tree_seg(int P, double n)
{
    if (P <= 1 || n <= 0) return 0;
    double sb = (double)tree_seg_default(P, (size_t)n);
    if (sb >= 128) sb = floor(sb / 64) * 64;     /* tree.c: segments are whole multiples of 64 B */
    return sb;
}

double h_cm_tree(const h_cm_t *m, int P, double n, double seg)
{
    if (P <= 1 || n <= 0) return 0;
    if (seg <= 0) seg = h_cm_tree_seg(P, n);
    double half = ceil(n / 2);
    if (seg > half) seg = half;
    long nseg = (long)ceil(half / seg);
    int *dep = malloc(2 * (size_t)P * sizeof *dep), D[2] = {0, 0};
    if (!dep) return -1;
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < P; r++) {
            int d = 0, x = r, parent, ch[2];
            for (;;) {
                tree_shape(P, t, x, &parent, ch);
                if (parent < 0 || d > P) break;
                x = parent;
                d++;
            }
            dep[t * P + r] = d;
            if (d > D[t]) D[t] = d;
        }
    long T = nseg + 2L * (D[0] > D[1] ? D[0] : D[1]) + 1;
    /* bytes each rank puts on its link (out), takes off it (in) and reduces, per lock-step step */
    double *out = calloc((size_t)(3 * T) * (size_t)P, sizeof *out);
    if (!out) { free(dep); return -1; }
    double *in = out + T * P, *red = in + T * P;
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < P; r++) {
            int parent, ch[2], d = dep[t * P + r];
            tree_shape(P, t, r, &parent, ch);
            for (long sg = 0; sg < nseg; sg++) {
                double len = fmin(seg, half - (double)sg * seg);
                long up = sg + D[t] - d, dn = sg + D[t] + d;
                if (parent >= 0) out[up * P + r] += len, in[up * P + parent] += len;
                for (int c = 0; c < 2; c++) {
                    if (ch[c] < 0) continue;
                    red[up * P + r] += len;
                    out[dn * P + r] += len, in[dn * P + ch[c]] += len;
                }
            }
        }
    double time = 0;
    for (long tau = 0; tau < T; tau++) {
        double link = 0, rd = 0;
        for (int r = 0; r < P; r++) {
            link = fmax(link, fmax(out[tau * P + r], in[tau * P + r]));
            rd = fmax(rd, red[tau * P + r]);
        }
        if (link > 0 || rd > 0) time += m->alpha + link * m->beta + rd * m->gamma;
    }
    free(out);
    free(dep);
    return time;
}

double h_cm_ps(const h_cm_t *m, int N, int S, int colocate, double n, double part)
{
    if (N < 1 || n <= 0) return 0;
    if (part <= 0) part = 4.0 * 1024 * 1024;
    if (colocate) {
        if (N == 1) return 2 * m->alpha;   /* the worker's own server over inproc */
        double f = (double)(N - 1) / N;
        return 2 * m->alpha + 2 * f * n * m->beta + f * n * m->gamma;
    }
    if (S < 1) S = 1;
    double per = n / S;                       /* bytes each server owns */
    double link = fmax(n, (double)N * per);
    double last = (double)N * fmin(part, per);
    return 2 * m->alpha + link * m->beta + last * m->beta + (N - 1) * per * m->gamma;
}

int h_cm_linfit(const double *x, const double *y, const double *w, size_t k, double *a, double *b)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < k; i++) {
        double wi = w ? w[i] : 1.0;
        sw += wi, sx += wi * x[i], sy += wi * y[i], sxx += wi * x[i] * x[i], sxy += wi * x[i] * y[i];
    }
    double den = sw * sxx - sx * sx;
    if (k < 2 || !(fabs(den) > 1e-300 * (sw * sxx + 1e-300))) return -1;
    *b = (sw * sxy - sx * sy) / den;
    *a = (sy - *b * sx) / sw;
    return 0;
}

int h_cm_fit_ab(const double *n, const double *t, size_t k, double *alpha, double *beta)
{
    /* beta: the slope over the large messages (>= 256 KiB), where per-message costs and a shaper's
     * burst allowance are amortized; alpha: what the small messages (<= 512 B) take beyond beta n.
     * Too few points in either set: one fit over all points, weighted for relative error. */
    double xs[64], ys[64], a, b;
    size_t nl = 0, ns = 0;
    double small = 0;
    for (size_t i = 0; i < k && nl < 64; i++)
        if (n[i] >= 262144) xs[nl] = n[i], ys[nl] = t[i], nl++;
    if (nl >= 2 && h_cm_linfit(xs, ys, NULL, nl, &a, &b) == 0 && b > 0) {
        for (size_t i = 0; i < k; i++)
            if (n[i] <= 512) small += t[i] - b * n[i], ns++;
        if (ns) {
            *beta = b;
            *alpha = small / (double)ns > 0 ? small / (double)ns : 0;
            return 0;
        }
    }
    double *w = malloc((k ? k : 1) * sizeof *w);
    if (!w) return -1;
    for (size_t i = 0; i < k; i++) w[i] = t[i] > 0 ? 1.0 / (t[i] * t[i]) : 0;
    int rc = h_cm_linfit(n, t, w, k, alpha, beta);
    if (rc == 0 && *alpha < 0) {
        /* a negative intercept: refit the slope through the origin */
        double sxy = 0, sxx = 0;
        for (size_t i = 0; i < k; i++) sxy += w[i] * n[i] * t[i], sxx += w[i] * n[i] * n[i];
        *alpha = 0;
        *beta = sxx > 0 ? sxy / sxx : 0;
    }
    free(w);
    return rc;
}
