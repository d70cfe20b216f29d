/* host_cost.c: the alpha-beta-gamma formulas of host_cost.h and the least-squares fits.
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
 *  - ps: see host_cost.h.
 *
 * The token bucket (--net's tc tbf: rate r, burst b; h_cm_t.burst is b in payload bytes, beta the
 * fitted time per payload byte, which includes the headers). A bucket holds at most b tokens and
 * gains one per beta seconds, busy or idle; a byte leaves only with a token. So a step whose link
 * finds tok tokens after the step's latency (alpha, during which the bucket refills too) needs
 * max(0, B - tok) beta to move B bytes, and afterwards holds tok + (step time)/beta - B. Two things
 * follow that the plain alpha-beta sum misses: a link idle for a while (the other direction of a
 * PS server, the fill and drain steps of the tree, every step's latency) gets up to b bytes through
 * for free, and nothing more: in a back-to-back loop the buckets never fill, so a link cannot beat
 * B beta per allreduce on average. The engines' step schedules are therefore run back to back from
 * full buckets (two warm-up allreduces, then the mean of three), as `harness bench` times them.
 * The time bytes take while tokens last (the unshaped path) is not modelled: tokens are free.
 * Each rank's in and out directions have their own bucket (tbf on both ends of its veth).
 *
 * The CPU floor. The probe runs 2 ranks on their own cores, so alpha, beta and gamma include each
 * rank's own CPU work, overlapped with its waits. When procs (and their server threads) outnumber
 * the cores, the cores are a shared resource with its own bound: an allreduce cannot finish before
 * the cores have done all procs' work: W / cores, W = kappa (bytes sent + received, the probe's
 * CPU time per transported byte: syscalls, copies, TCP) + gamma (bytes reduced) + mu (one copy of n
 * per rank: the result). The prediction is max(network time, W / cores): the CPU work overlaps the
 * network's waits as long as it fits in them. */
#include "harness/model/host_cost.h"
#include "allreduce-tree/tree.h"
#include <math.h>
#include <stdlib.h>

double h_cm_step(const h_cm_t *m, int nl, const double *bytes, double *tok, double red)
{
    double b = m->burst > 0 ? m->burst : 0, need = 0, ref = m->beta > 0 ? m->alpha / m->beta : 0;
    for (int l = 0; l < nl; l++) {
        double t = fmin(b, tok[l] + ref);
        need = fmax(need, fmax(0, bytes[l] - t) * m->beta);
    }
    double step = m->alpha + need + red * m->gamma;
    double gain = m->beta > 0 ? step / m->beta : 0;
    for (int l = 0; l < nl; l++) tok[l] = fmax(0, fmin(b, tok[l] + gain - bytes[l]));
    return step;
}

double h_cm_cpu(const h_cm_t *m, int procs, double work)
{
    return m->cores > 0 && procs > m->cores ? work / m->cores : 0;
}

/* Run a schedule of ns steps over nl links (bytes[s * nl + l], red[s], alpha only where lat[s]):
 * once without a shaper; shaped, back to back from full buckets: 2 warm-up runs, then the mean of
 * 3. Returns < 0 when out of memory. */
static double s_run(const h_cm_t *m, long ns, int nl, const double *bytes, const double *red, const char *lat)
{
    double *tok = malloc((size_t)nl * sizeof *tok);
    if (!tok) return -1;
    for (int l = 0; l < nl; l++) tok[l] = m->burst > 0 ? m->burst : 0;
    h_cm_t m0 = *m;
    m0.alpha = 0;
    int warm = m->burst > 0 ? 2 : 0, runs = m->burst > 0 ? 3 : 1;
    double sum = 0;
    for (int it = 0; it < warm + runs; it++) {
        double t = 0;
        for (long s = 0; s < ns; s++) t += h_cm_step(lat && !lat[s] ? &m0 : m, nl, bytes + s * nl, tok, red[s]);
        if (it >= warm) sum += t;
    }
    free(tok);
    return sum / runs;
}

double h_cm_ring(const h_cm_t *m, int P, double n)
{
    if (P <= 1 || n <= 0) return 0;
    double f = (double)(P - 1) / P;
    double net = 2.0 * (P - 1) * m->alpha + 2.0 * f * n * m->beta + f * n * m->gamma;
    if (m->burst > 0) {
        /* every link the same: one bucket; 2(P-1) steps of n/P, the first P-1 reduce one */
        long ns = 2L * (P - 1);
        double *b = malloc(2 * (size_t)ns * sizeof *b);
        if (!b) return -1;
        double *red = b + ns;
        for (long s = 0; s < ns; s++) b[s] = n / P, red[s] = s < P - 1 ? n / P : 0;
        net = s_run(m, ns, 1, b, red, NULL);
        free(b);
    }
    double work = P * (4 * f * n * m->kappa + f * n * m->gamma + n * m->mu);
    return fmax(net, h_cm_cpu(m, P, work));
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

/* Depth of every rank in both trees of P (dep[t * P + r]) and each tree's depth D[t]. */
static void s_tree_depths(int P, int *dep, int *D)
{
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
    s_tree_depths(P, dep, D);
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
    /* the schedule as links: rank r's out direction is link 2r, its in direction 2r+1; steps that
     * move and reduce nothing (a depth difference between the trees) are dropped */
    double *lk = malloc((size_t)T * (2 * (size_t)P + 1) * sizeof *lk);
    if (!lk) { free(out); free(dep); return -1; }
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
    double time = s_run(m, ns, 2 * P, lk, rd, NULL);
    free(lk);
    free(out);
    free(dep);
    return time < 0 ? time : fmax(time, h_cm_cpu(m, P, work + P * n * m->mu));
}

double h_cm_ps(const h_cm_t *m, int N, int S, int colocate, double n, double part)
{
    if (N < 1 || n <= 0) return 0;
    if (part <= 0) part = 4.0 * 1024 * 1024;
    if (colocate) {
        if (N == 1) return 2 * m->alpha;   /* the worker's own server over inproc */
        double f = (double)(N - 1) / N;
        /* push then pull: every rank's out and in carry f n in both (one bucket: they are alike) */
        double b[2] = {f * n, f * n}, red[2] = {f * n, 0};
        double net = s_run(m, 2, 1, b, red, NULL);
        return fmax(net, h_cm_cpu(m, N, N * (4 * f * n * m->kappa + f * n * m->gamma + n * m->mu)));
    }
    if (S < 1) S = 1;
    double per = n / S;                       /* bytes each server owns */
    /* partition rounds: in round j every server takes one partition (<= part) from each worker and
     * sends the replies of round j-1; links: 0 server in, 1 server out, 2 worker out, 3 worker in */
    long np = (long)ceil(per / part), ns = np + 1;
    double *b = malloc((size_t)ns * 5 * sizeof *b);
    char *lat = malloc((size_t)ns);
    if (!b || !lat) { free(b); free(lat); return -1; }
    double *red = b + 4 * ns;
    for (long j = 0; j < ns; j++) {
        double pin = j < np ? fmin(part, per - (double)j * part) : 0;
        double pout = j > 0 ? fmin(part, per - (double)(j - 1) * part) : 0;
        b[4 * j] = N * pin, b[4 * j + 1] = N * pout, b[4 * j + 2] = S * pin, b[4 * j + 3] = S * pout;
        red[j] = (N - 1) * pin;
        lat[j] = j == 0 || j == np;            /* the pipeline hides the latencies in between */
    }
    double net = s_run(m, ns, 4, b, red, lat);
    free(b);
    free(lat);
    double work = N * (2 * n * m->kappa + n * m->mu) + S * (2 * N * per * m->kappa + (N - 1) * per * m->gamma);
    return net < 0 ? net : fmax(net, h_cm_cpu(m, N + S, work));
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
