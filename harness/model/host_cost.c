/* host_cost.c: the alpha-beta-gamma formulas of host_cost.h and the least-squares fits.
 *
 * Derivations (n bytes per rank, P ranks, one full-duplex link per rank):
 *  - ring: each of the 2(P-1) steps moves one chunk n/P over every link at once and starts with one
 *    message latency; the P-1 reduce-scatter steps each add one chunk.
 *  - tree (host_tree.c, from the engine's declared segmented schedule): both halves (n/2) travel their
 *    own tree concurrently, in segments of the engine's own size; the schedule is lock-step (up-op of
 *    segment s at depth d in step s + D_t - d, down-op in step s + D_t + d). h_cm_tree replays it: for every step it adds
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

double h_cm_run(const h_cm_t *m, long ns, int nl, const double *bytes, const double *red, const char *lat)
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
        net = h_cm_run(m, ns, 1, b, red, NULL);
        free(b);
    }
    double work = P * (4 * f * n * m->kappa + f * n * m->gamma + n * m->mu);
    return fmax(net, h_cm_cpu(m, P, work));
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
        double net = h_cm_run(m, 2, 1, b, red, NULL);
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
    double net = h_cm_run(m, ns, 4, b, red, lat);
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
