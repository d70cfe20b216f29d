/* sim_plan.c: the replay's plan (sim_int.h), without SimGrid: each bucket's declared schedule as every
 * rank's entries, and the faithful reduction for long schedules. Of a schedule of more steps than
 * max_groups, runs of up to K = nsteps / max_groups consecutive ring-like steps of the same shape (every
 * rank sends one transfer and receives one, the same pairs each step) become one group: a pair's
 * transfers in it go as one communication, and the group's sends wait, beside the receives of the group
 * before, the latencies of its steps after the first (a step's latency: the longest route of its
 * transfers, 2 hops inside a machine, 4 across). Such a chain is bound by its slowest link whether it
 * goes step by step or K steps at once; any other step (a tree's, whose lock-step max over several
 * flows a merge would turn into a max of sums) is replayed as its own. results/sim-reduction measures
 * the merged replay against the full one. Also, SimGrid-free so tests reach them: the plan's actors, and the
 * words for a replay that ended without a result (h_sim_fail_words). */
#include "harness/simulate/sim_int.h"
#include "core/err.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>

int h_sim_machine(const h_sim_platform_t *pl, int workers, int r)
{
    if (r < workers) return r / pl->gpus_per_node;
    int j = r - workers;
    if (pl->server_nodes <= 0) return j % pl->nodes;
    return pl->nodes + (pl->pool > 1 ? j % pl->server_nodes / pl->pool : j % pl->server_nodes);
}

static int s_cmp(const void *a, const void *b)
{
    const h_sim_entry_t *x = a, *y = b;
    if (x->grp != y->grp) return x->grp - y->grp;
    if (x->send != y->send) return y->send - x->send;   /* sends first */
    return x->peer - y->peer;
}

/* The latency of a transfer's route: a GPU's link up and down inside a machine, and the two NICs' hops
 * across machines. */
static double s_route_lat(const h_sim_platform_t *pl, int workers, int a, int b)
{
    int ma = h_sim_machine(pl, workers, a), mb = h_sim_machine(pl, workers, b);
    if (ma == mb) return 2 * pl->lat_s;
    return (h_sim_rack(pl, ma) == h_sim_rack(pl, mb) ? 4 : 6) * pl->lat_s + 2 * pl->nic_lat_s; /* a fat tree's spine: 2 more */
}

int h_sim_fabric_parse(const char *spec, h_sim_platform_t *pl)
{
    pl->rack = 0, pl->oversub = 1;
    if (!spec || !strcmp(spec, "star")) return 0;
    int R = 0, n = 0;
    double O = 0;
    if (sscanf(spec, "fattree:%d:%lf%n", &R, &O, &n) != 2 || spec[n] || R < 1 || R > 4096 || !(O >= 1) || O > 1024)
        return err_set(ERR_INVAL, "--fabric '%s': star, or fattree:R:O (racks of R >= 1 machines under a leaf switch whose "
                                  "uplink to the spine is R x NIC / O, O >= 1; O = 1 is non-blocking)", spec);
    pl->rack = R, pl->oversub = O;
    return 0;
}

void h_sim_fabric_name(const h_sim_platform_t *pl, char *out, size_t len)
{
    if (pl->rack > 0) snprintf(out, len, "fattree:%d:%g", pl->rack, pl->oversub);
    else snprintf(out, len, "star");
}

void h_sim_platform_line(const h_sim_platform_t *pl, char *fab, size_t flen, char *line, size_t llen)
{
    h_sim_fabric_name(pl, fab, flen);
    char cpu[96];
    if (pl->server_Bps > 0)
        snprintf(cpu, sizeof cpu, "PS servers %.4g MB/s a core x %d (pushes across machines)", pl->server_Bps / 1e6,
                 pl->server_cores > 0 ? pl->server_cores : 1);
    else snprintf(cpu, sizeof cpu, "PS servers with no CPU time");
    if (pl->rack > 0)
        snprintf(line, llen, "fat tree (%s): racks of %d machines, each leaf's uplink %d x NIC / %g, 2 hops more across "
                             "racks; %s", fab, pl->rack, pl->rack, pl->oversub, cpu);
    else snprintf(line, llen, "non-blocking star switch; %s", cpu);
}

/* A step's shape for merging: a hash of its (source, destination) pairs when every rank sends at most one
 * transfer and receives at most one (a ring's step), else 0 (never merged). */
static uint64_t s_shape(const sched_t *s, int k, int *seen_s, int *seen_r, int mark)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = s->steps[k].first; i < s->steps[k].first + s->steps[k].n; i++) {
        const sched_xfer_t *x = &s->x[i];
        if (x->src == x->dst) continue;
        if (seen_s[x->src] == mark || seen_r[x->dst] == mark) return 0;
        seen_s[x->src] = seen_r[x->dst] = mark;
        h += ((uint64_t)x->src * 1000003u + (uint64_t)x->dst) * 0x9e3779b97f4a7c15ull; /* order-free */
    }
    return h ? h : 1;
}

/* A dataflow schedule's transfers, by connection (source, destination, op) and then in schedule order. */
static const sched_t *s_sort_s;
static int s_conn_cmp(const void *a, const void *b)
{
    const sched_xfer_t *x = &s_sort_s->x[*(const size_t *)a], *y = &s_sort_s->x[*(const size_t *)b];
    if (x->src != y->src) return x->src - y->src;
    if (x->dst != y->dst) return x->dst - y->dst;
    if (x->op != y->op) return (int)x->op - (int)y->op;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* A cross-machine transfer of one step, for the fan-out reduction: its index, its round (its source's how-many-th
 * transfer to its destination in the step) and its group's ends: the source rank itself if it is a worker (its
 * pieces are ready at its own straggling times), else its machine (dedicated ranks, whose pieces come in bundles
 * that credit them together); the destination's machine. */
typedef struct {
    size_t i;
    int t, sg, dg, op;
} s_fan_t;

static const sched_t *s_fan_s;
static int s_fan_cmp(const void *a, const void *b)
{
    const s_fan_t *x = a, *y = b;
    if (x->sg != y->sg) return x->sg - y->sg;
    if (x->dg != y->dg) return x->dg - y->dg;
    if (x->op != y->op) return x->op - y->op;
    if (x->t != y->t) return x->t - y->t;
    const sched_xfer_t *u = &s_fan_s->x[x->i], *v = &s_fan_s->x[y->i];
    if (u->src != v->src) return u->src - v->src;
    if (u->dst != v->dst) return u->dst - v->dst;
    return x->i < y->i ? -1 : 1;
}

/* by source, then destination, then schedule order */
static int s_src_cmp(const void *a, const void *b)
{
    const sched_xfer_t *x = &s_sort_s->x[*(const size_t *)a], *y = &s_sort_s->x[*(const size_t *)b];
    if (x->src != y->src) return x->src - y->src;
    if (x->dst != y->dst) return x->dst - y->dst;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* The fan-out reduction (h_sim_work_t.fan_bundle; pl->pool: dedicated server machines merged, h_sim_machine): in
 * each step, one round of a machine pair's transfers of one op (from one worker, or from any dedicated ranks of
 * the source machine; to any ranks of the destination machine) goes as one communication, on one of its
 * transfers' connection (taking turns over the pair's bundles), at that transfer's place in both ranks' orders;
 * it goes once the first piece it carries is held at its sender (cut-through) and credits every receiver when it
 * is in and every piece it carries is held at its source (the others'
 * receive entries become npc -1, their send entries go). A pair's transfers share its route but for the hops
 * inside the two machines, so on the flow model they share alike what they would have shared apart. bund marks
 * the transfers a bundle carries (the stream reduction leaves them). 0 or ERR_NOMEM. */
/* the end of the group of f's transfers that starts at u: the same source group, destination machine, op and round */
static size_t s_group_end(const s_fan_t *f, size_t n, size_t u)
{
    size_t v = u + 1;
    while (v < n && f[v].sg == f[u].sg && f[v].dg == f[u].dg && f[v].op == f[u].op && f[v].t == f[u].t) v++;
    return v;
}

static int s_bundles(const h_sim_platform_t *pl, const sched_t *s, h_sim_bplan_t *bp, const size_t *sidx,
                     const size_t *ridx, char *bund, int *most)
{
    size_t nx = s->nx ? s->nx : 1, nbm = 0, nf = 0;
    int nm = 1;
    for (size_t i = 0; i < s->nx; i++) {
        int a = h_sim_machine(pl, s->workers, s->x[i].src), b = h_sim_machine(pl, s->workers, s->x[i].dst);
        if (a >= nm) nm = a + 1;
        if (b >= nm) nm = b + 1;
    }
    size_t *ord = malloc(nx * sizeof *ord), *from = malloc(((size_t)s->nsteps + 1) * sizeof *from);
    s_fan_t *fan = malloc(nx * sizeof *fan);
    size_t *tot = calloc((size_t)nm * 2, sizeof *tot), *top = calloc((size_t)nm * 2, sizeof *top);
    int *hi = calloc((size_t)nm * 2, sizeof *hi);
    bp->bm = malloc(nx * sizeof *bp->bm);
    if (!ord || !from || !fan || !tot || !top || !hi || !bp->bm) {
        free(ord), free(from), free(fan), free(tot), free(top), free(hi);
        return err_set(ERR_NOMEM, "simulate: out of memory");
    }
    s_sort_s = s_fan_s = s;
    /* every step's cross-machine transfers in their groups; each NIC's (2 m: machine m's way out, 2 m + 1: in)
     * transfers and largest group */
    for (int k = 0; k < s->nsteps; k++) {
        size_t n = 0;
        from[k] = nf;
        for (size_t i = s->steps[k].first; i < s->steps[k].first + s->steps[k].n; i++)
            if (h_sim_machine(pl, s->workers, s->x[i].src) != h_sim_machine(pl, s->workers, s->x[i].dst)) ord[n++] = i;
        qsort(ord, n, sizeof *ord, s_src_cmp);
        s_fan_t *f = fan + nf;
        for (size_t a = 0; a < n; a++) {
            const sched_xfer_t *x = &s->x[ord[a]];
            int same = a && x->src == s->x[ord[a - 1]].src && x->dst == s->x[ord[a - 1]].dst;
            f[a] = (s_fan_t){.i = ord[a], .t = same ? f[a - 1].t + 1 : 0, .op = (int)x->op,
                             .sg = x->src < s->workers ? x->src : -1 - h_sim_machine(pl, s->workers, x->src),
                             .dg = h_sim_machine(pl, s->workers, x->dst)};
        }
        qsort(f, n, sizeof *f, s_fan_cmp);
        for (size_t u = 0, v; u < n; u = v) {
            v = s_group_end(f, n, u);
            int q = (int)(v - u), nic[2] = {2 * h_sim_machine(pl, s->workers, s->x[f[u].i].src), 2 * f[u].dg + 1};
            for (int j = 0; j < 2; j++) {
                tot[nic[j]] += v - u;
                if (q > hi[nic[j]]) hi[nic[j]] = q;
            }
        }
        nf += n;
    }
    from[s->nsteps] = nf;
    for (size_t u = 0, v; u < nf; u = v) { /* the transfers in each NIC's largest groups (steps never share a group) */
        v = s_group_end(fan, nf, u);
        int q = (int)(v - u), os = 2 * h_sim_machine(pl, s->workers, s->x[fan[u].i].src), od = 2 * fan[u].dg + 1;
        if (q == hi[os]) top[os] += v - u;
        if (q == hi[od]) top[od] += v - u;
    }
    /* a group goes as one communication only where both its NICs carry nearly all their transfers in groups of one
     * size (at least 15 in 16 in their largest groups; a schedule's short last rounds aside): the flow model shares
     * a link fairly by communication, so a bundle of q gets the share of its q transfers only against other bundles
     * of q (a PS whose servers answer in bundles of 4 while single pushes come in beside them would see its answers
     * slowed 4 to 1) */
    for (int k = 0; k < s->nsteps; k++) {
        s_fan_t *f = fan + from[k];
        size_t n = from[k + 1] - from[k];
        for (size_t u = 0, v; u < n; u = v) {
            v = s_group_end(f, n, u);
            int os = 2 * h_sim_machine(pl, s->workers, s->x[f[u].i].src), od = 2 * f[u].dg + 1;
            if (v - u < 2 || 16 * top[os] < 15 * tot[os] || 16 * top[od] < 15 * tot[od]) continue;
            /* the connection it goes on: the same member's in every round of the group, so that its rounds follow
             * one another as each of its transfers' connections carries them; groups take turns over the members */
            size_t rep = u + (size_t)((f[u].sg < 0 ? -f[u].sg : f[u].sg) + f[u].dg) % (v - u);
            uint64_t bytes = 0;
            for (size_t j = u; j < v; j++) {
                size_t i = f[j].i;
                bytes += bp->e[sidx[i]].bytes;
                bp->bm[nbm + (j - u)] = (h_sim_member_t){.src = s->x[i].src, .rank = s->x[i].dst, .piece = s->x[i].piece,
                                                         .req = bp->e[sidx[i]].req};
                bund[i] = 1;
                if (j != rep) bp->e[sidx[i]].npc = 0, bp->e[ridx[i]].npc = -1; /* carried; credited */
            }
            h_sim_entry_t *es = &bp->e[sidx[f[rep].i]], *er = &bp->e[ridx[f[rep].i]];
            es->bytes = er->bytes = bytes;
            es->nbm = er->nbm = (int)(v - u);
            es->bm0 = er->bm0 = (uint32_t)nbm;
            nbm += v - u;
            if ((int)(v - u) > *most) *most = (int)(v - u);
        }
    }
    free(ord), free(from), free(fan), free(tot), free(top), free(hi);
    return 0;
}

/* The stream reduction (h_sim_work_t.min_stream): on each connection, a run of at least M consecutive
 * transfers whose sends wait for the same count of receives (of any sizes: a tree half's last segment is
 * shorter) goes as one communication of all their bytes, its pieces listed in bp->mp and their bytes in
 * bp->mpb; the replay holds each piece at the receiver once the flow has carried it (and its latencies
 * before it have passed). A run into a rank whose sums cost CPU time (cpu: a push across machines to a
 * server, sim.h server_Bps) keeps its pieces, each summed as it comes. The merged entries after a stream's
 * first are marked dead (npc 0) for the compaction. sidx/ridx: each transfer's send and receive entry.
 * 0 or ERR_NOMEM. */
static double s_route_lat(const h_sim_platform_t *pl, int workers, int a, int b);
static int s_streams(const h_sim_platform_t *pl, const sched_t *s, int M, int cpu, h_sim_bplan_t *bp,
                     const size_t *sidx, const size_t *ridx, const char *bund, int *longest)
{
    size_t nx = 0, nmp = 0;
    size_t *ord = malloc((s->nx ? s->nx : 1) * sizeof *ord);
    bp->mp = malloc((s->nx ? s->nx : 1) * sizeof *bp->mp);
    bp->mpb = malloc((s->nx ? s->nx : 1) * sizeof *bp->mpb);
    if (!ord || !bp->mp || !bp->mpb) {
        free(ord);
        return err_set(ERR_NOMEM, "simulate: out of memory");
    }
    for (size_t i = 0; i < s->nx; i++)
        if (s->x[i].src != s->x[i].dst && !(bund && bund[i])) ord[nx++] = i;
    s_sort_s = s;
    qsort(ord, nx, sizeof *ord, s_conn_cmp);
    for (size_t a = 0; a < nx;) {
        const sched_xfer_t *x0 = &s->x[ord[a]];
        const h_sim_entry_t *e0 = &bp->e[sidx[ord[a]]];
        size_t b = a + 1;
        while (b < nx) {
            const sched_xfer_t *y = &s->x[ord[b]];
            if (y->src != x0->src || y->dst != x0->dst || y->op != x0->op || bp->e[sidx[ord[b]]].req != e0->req) break;
            b++;
        }
        /* pushes summed at a CPU's rate, or counted one by one by an owner that answers ahead (sched_t.stale) */
        int summed = x0->op == SCHED_REDUCE &&
                     ((cpu && h_sim_machine(pl, s->workers, x0->src) != h_sim_machine(pl, s->workers, x0->dst)) || s->stale);
        if (b - a >= (size_t)M && M >= 3 && !summed) { /* a .. b - 1 become one communication */
            h_sim_entry_t *hs = &bp->e[sidx[ord[a]]], *hr = &bp->e[ridx[ord[a]]];
            hs->mp0 = hr->mp0 = (uint32_t)nmp;
            hs->npc = hr->npc = (int)(b - a);
            if (hs->npc > *longest) *longest = hs->npc;
            for (size_t k = a; k < b; k++) {
                bp->mpb[nmp] = bp->e[sidx[ord[k]]].bytes;
                bp->mp[nmp++] = s->x[ord[k]].piece;
                if (k == a) continue;
                hs->bytes += bp->e[sidx[ord[k]]].bytes, hr->bytes += bp->e[ridx[ord[k]]].bytes;
                bp->e[sidx[ord[k]]].npc = bp->e[ridx[ord[k]]].npc = 0;
            }
            hs->hop_s = hr->hop_s = s_route_lat(pl, s->workers, x0->src, x0->dst);
            hs->lat_s = hr->lat_s = (hs->npc - 1) * hs->hop_s;
        }
        a = b;
    }
    bp->nmp = (uint32_t)nmp;
    free(ord);
    return 0;
}

static int s_bucket(const h_sim_platform_t *pl, const sched_t *s, int max_groups, int min_stream, int fan, int cpu,
                    h_sim_bplan_t *bp, int *merge, int *stream, int *bundle)
{
    size_t W = (size_t)s->world, n = 0;
    int K = max_groups > 0 && s->nsteps > max_groups ? (s->nsteps + max_groups - 1) / max_groups : 1;
    int *grp_of = calloc((size_t)(s->nsteps ? s->nsteps : 1), sizeof *grp_of);
    int *seen = calloc(2 * W + 1, sizeof *seen);
    if (!grp_of || !seen) {
        free(grp_of), free(seen);
        return err_set(ERR_NOMEM, "simulate: out of memory");
    }
    /* groups: runs of at most K consecutive steps of one ring-like shape; any other step is its own */
    uint64_t prev = 0;
    int g = -1, in = 0;
    bp->dataflow = s->dataflow, bp->npieces = s->npieces;
    for (int k = 0; k < s->nsteps; k++) {
        uint64_t sh = s->dataflow ? 0 : s_shape(s, k, seen, seen + W, k + 1);
        if (!sh || sh != prev || in == K) g++, in = 0;
        grp_of[k] = g, in++, prev = sh;
        if (in > *merge) *merge = in;
    }
    free(seen);
    bp->ngroups = g + 1;
    for (size_t i = 0; i < s->nx; i++) n += s->x[i].src != s->x[i].dst ? 2 : 0;
    bp->e = malloc((n ? n : 1) * sizeof *bp->e);
    bp->first = calloc(W + 1, sizeof *bp->first);
    int merged = 0;
    for (int k = 1; k < s->nsteps; k++) merged |= grp_of[k] == grp_of[k - 1];
    bp->delay = merged ? calloc((size_t)bp->ngroups * W, sizeof *bp->delay) : NULL;
    int *from = merged ? malloc((size_t)(K > 1 ? K : 1) * W * sizeof *from) : NULL;
    size_t *at = calloc(W + 1, sizeof *at);
    int streams = s->dataflow && min_stream >= 3, bundles = s->dataflow && fan > 0 && !cpu && !s->stale;
    size_t *sidx = streams || bundles ? malloc((s->nx ? s->nx : 1) * 2 * sizeof *sidx) : NULL, *ridx = sidx ? sidx + s->nx : NULL;
    char *bund = bundles ? calloc(s->nx ? s->nx : 1, 1) : NULL;
    if (!bp->e || !bp->first || (merged && (!bp->delay || !from)) || !at || ((streams || bundles) && !sidx) || (bundles && !bund)) {
        free(from), free(sidx), free(bund);
        free(at), free(grp_of);
        return err_set(ERR_NOMEM, "simulate: out of memory for %zu transfers", n);
    }
    for (size_t i = 0; i < s->nx; i++)
        if (s->x[i].src != s->x[i].dst) at[s->x[i].src]++, at[s->x[i].dst]++;
    for (size_t r = 0; r < W; r++) bp->first[r + 1] = bp->first[r] + at[r], at[r] = bp->first[r];
    for (int k = 0; k < s->nsteps; k++) {
        int grp = grp_of[k];
        for (size_t i = s->steps[k].first; i < s->steps[k].first + s->steps[k].n; i++) {
            const sched_xfer_t *x = &s->x[i];
            if (x->src == x->dst) continue;
            uint64_t b = sched_xfer_bytes(s, x);
            int conn = s->dataflow ? (int)x->op : 0;
            if (sidx) sidx[i] = at[x->src], ridx[i] = at[x->dst];
            bp->e[at[x->src]++] = (h_sim_entry_t){.grp = grp, .peer = x->dst, .send = 1, .piece = x->piece, .conn = conn,
                                                  .npc = 1, .bytes = b};
            bp->e[at[x->dst]++] = (h_sim_entry_t){.grp = grp, .peer = x->src, .send = 0, .piece = x->piece, .conn = conn,
                                                  .npc = 1, .bytes = b};
        }
    }
    /* a dataflow send waits for the receives of its piece that come before it in its rank's entries */
    int *held = s->dataflow ? calloc((size_t)s->npieces + 1, sizeof *held) : NULL;
    int rc = s->dataflow && !held ? err_set(ERR_NOMEM, "simulate: out of memory") : 0;
    for (size_t r = 0; rc == 0 && held && r < W; r++) {
        for (size_t i = bp->first[r]; i < bp->first[r + 1]; i++)
            if (bp->e[i].send) bp->e[i].req = held[bp->e[i].piece];
            else held[bp->e[i].piece]++;
        for (size_t i = bp->first[r]; i < bp->first[r + 1]; i++) held[bp->e[i].piece] = 0;
    }
    free(held);
    if (rc == 0 && bundles) rc = s_bundles(pl, s, bp, sidx, ridx, bund, bundle);
    if (rc == 0 && streams) rc = s_streams(pl, s, min_stream, cpu, bp, sidx, ridx, bund, stream);
    free(sidx), free(bund);
    if (rc) {
        free(from), free(at), free(grp_of);
        return rc;
    }
    /* a merged group's delays: step by step, rank r's send in the group's last step waits for the chain of
     * receives behind it, one a step, back to the group's first step (a ring's: the links before r) */
    for (int k0 = 0; merged && k0 < s->nsteps;) {
        int k1 = k0, grp = grp_of[k0];
        while (k1 + 1 < s->nsteps && grp_of[k1 + 1] == grp) k1++;
        int n = k1 - k0 + 1;
        for (int j = 0; j < n; j++) {
            int *fr = from + (size_t)j * W;
            for (size_t r = 0; r < W; r++) fr[r] = -1;
            const sched_step_t *st = &s->steps[k0 + j];
            for (size_t i = st->first; i < st->first + st->n; i++)
                if (s->x[i].src != s->x[i].dst) fr[s->x[i].dst] = s->x[i].src;
        }
        for (size_t r = 0; n > 1 && r < W; r++) {
            double d = 0;
            int q = (int)r;
            for (int j = n - 2; j >= 0 && q >= 0; j--) { /* the receive of step k0 + j feeds the send of k0 + j + 1 */
                int src = from[(size_t)j * W + (size_t)q];
                if (src < 0) break;
                d += s_route_lat(pl, s->workers, src, q);
                q = src;
            }
            bp->delay[(size_t)grp * W + r] = d;
        }
        k0 = k1 + 1;
    }
    free(from);
    free(grp_of);
    /* sort each rank's entries, merge the same (group, direction, peer), compact */
    size_t w = 0;
    for (size_t r = 0; r < W; r++) {
        h_sim_entry_t *a = bp->e + bp->first[r];
        size_t m = bp->first[r + 1] - bp->first[r], o = 0;
        for (size_t i = 0; i < m && s->dataflow; i++)    /* a dataflow rank's order stays; a stream is one */
            if (a[i].npc != 0) a[o++] = a[i];
        if (!s->dataflow) qsort(a, m, sizeof *a, s_cmp);
        for (size_t i = 0; i < m && !s->dataflow; i++) {
            if (o && a[o - 1].grp == a[i].grp && a[o - 1].send == a[i].send && a[o - 1].peer == a[i].peer)
                a[o - 1].bytes += a[i].bytes;
            else a[o++] = a[i];
        }
        memmove(bp->e + w, a, o * sizeof *a);
        bp->first[r] = w;
        w += o;
    }
    bp->first[W] = w;
    free(at);
    return 0;
}

/* Server machines merged q to one are replayed as they run only where, in every bucket, every server of a merged
 * group sends and receives as many transfers across machines as the others of its group in each step: then every
 * bundle of a round carries q transfers, shared by the flow model as q would be (results/sim-reduction-pools: the
 * K = N PS's step to the digit with equal shares, off by up to a quarter without). The first bucket where two
 * servers of a group differ, -1 where none do, -2 out of memory. */
static int s_unequal_shares(const h_sim_platform_t *pl, const h_sim_work_t *w, int q)
{
    const sched_t *s0 = &w->sched[0];
    int S = s0->world - s0->workers;
    uint32_t *cnt = calloc((size_t)(S > 0 ? S : 1) * 2, sizeof *cnt);
    int *first = malloc((size_t)(S > 0 ? S : 1) * sizeof *first); /* a group's first server */
    if (!cnt || !first) {
        free(cnt), free(first);
        return -2;
    }
    int bad = -1;
    for (int b = 0; b < w->nb && bad < 0; b++) {
        const sched_t *s = &w->sched[b];
        for (int k = 0; k < s->nsteps && bad < 0; k++) {
            memset(cnt, 0, (size_t)S * 2 * sizeof *cnt);
            for (size_t i = s->steps[k].first; i < s->steps[k].first + s->steps[k].n; i++) {
                const sched_xfer_t *x = &s->x[i];
                if (h_sim_machine(pl, s->workers, x->src) == h_sim_machine(pl, s->workers, x->dst)) continue;
                if (x->src >= s->workers) cnt[2 * (x->src - s->workers)]++;
                if (x->dst >= s->workers) cnt[2 * (x->dst - s->workers) + 1]++;
            }
            /* server j is on server machine j mod K, merged with the others of (j mod K) / q: each against its
             * group's first */
            for (int g = 0; g < S; g++) first[g] = -1;
            for (int j = 0; j < S && bad < 0; j++) {
                int g = (j % pl->server_nodes) / q, i = first[g];
                if (i < 0) first[g] = j;
                else if (cnt[2 * i] != cnt[2 * j] || cnt[2 * i + 1] != cnt[2 * j + 1]) bad = b;
            }
        }
    }
    free(cnt), free(first);
    return bad;
}

int h_sim_plan(const h_sim_platform_t *pl, const h_sim_work_t *w, h_sim_plan_t *p)
{
    memset(p, 0, sizeof *p);
    if (!w || w->nb < 1 || !w->sched) return err_set(ERR_INVAL, "simulate: nothing to replay");
    if (w->steps < 1 || w->steps > H_SIM_MAX_STEPS) return err_set(ERR_INVAL, "simulate: 1 to %d steps", H_SIM_MAX_STEPS);
    const sched_t *s0 = &w->sched[0];
    if (pl->nodes < 1 || pl->gpus_per_node < 1 || s0->workers > pl->nodes * pl->gpus_per_node)
        return err_set(ERR_INVAL, "simulate: %d workers do not fit %d machines of %d GPUs", s0->workers, pl->nodes,
                       pl->gpus_per_node);
    if (!(pl->inter_bps > 0) || !(pl->intra_bps > 0) || pl->lat_s < 0 || pl->nic_lat_s < 0 || !(pl->framing > 0))
        return err_set(ERR_INVAL, "simulate: link rates must be > 0 and the latency >= 0");
    if (pl->rack < 0 || (pl->rack > 0 && !(pl->oversub >= 1)))
        return err_set(ERR_INVAL, "simulate: a fat tree's racks must hold >= 1 machine and its oversubscription be >= 1");
    if (!(pl->server_Bps >= 0) || !isfinite(pl->server_Bps) || pl->server_cores < 0)
        return err_set(ERR_INVAL, "simulate: the server rate must be >= 0 (0: infinite) and its cores >= 0");
    for (int b = 1; b < w->nb; b++)
        if (w->sched[b].world != s0->world || w->sched[b].workers != s0->workers || w->sched[b].dataflow != s0->dataflow ||
            w->sched[b].stale != s0->stale)
            return err_set(ERR_INVAL, "simulate: bucket %d's schedule has another world", b);
    if (s0->stale && (!s0->owners || !s0->dataflow || s0->world == s0->workers))
        return err_set(ERR_INVAL, "simulate: answers ahead of the pushes (async, SSP) are simulated for dedicated owners (a "
                                  "PS's server ranks) only: colocated, a worker's push to its own server is no transfer");
    p->world = s0->world, p->workers = s0->workers, p->nb = w->nb, p->merge = 1, p->dataflow = s0->dataflow;
    p->stale = s0->stale;
    p->machines = p->machines_apart = pl->nodes + (s0->world > s0->workers && pl->server_nodes > 0 ? pl->server_nodes : 0);
    p->b = calloc((size_t)w->nb, sizeof *p->b);
    int racks = pl->rack > 0 ? (p->machines + pl->rack - 1) / pl->rack : 1;
    uint64_t *nic = calloc((size_t)p->machines * 2, sizeof *nic), *gl = calloc((size_t)p->world * 2, sizeof *gl),
             *up = calloc((size_t)racks * 2, sizeof *up);
    if (!p->b || !nic || !gl || !up) {
        free(nic), free(gl), free(up);
        h_sim_plan_free(p);
        return err_set(ERR_NOMEM, "simulate: out of memory");
    }
    int rc = 0, groups = w->max_groups, stream = w->min_stream, fan = w->fan_bundle;
    uint64_t nx = 0;
    for (int b = 0; b < w->nb; b++) nx += w->sched[b].nx;
    if (groups < 0) /* auto: every step when affordable (a transfer a communication at most) */
        groups = nx * (uint64_t)w->steps <= H_SIM_EXACT_COMMS ? 0 : H_SIM_AUTO_GROUPS;
    if (stream < 0) stream = nx * (uint64_t)w->steps <= H_SIM_EXACT_FLOW ? 0 : H_SIM_AUTO_STREAM;
    p->streams = p->bundle = 1;
    /* the fan-out reduction, where asked for (1: machine pairs; Q >= 2: and dedicated server machines merged Q to
     * one, experimental); < 0 (auto): machine pairs once a run passes H_SIM_EXACT_FLOW communications, as the
     * streams. Never for reductions that cost CPU time nor for owners answering ahead; machines merged only on a
     * star. */
    h_sim_platform_t pp = *pl;
    pp.pool = 0;
    int cpu = w->cpu_reduce && pl->server_Bps > 0, pooled = pl->server_nodes > 1 && pl->rack == 0 && s0->world > s0->workers;
    if (fan < 0) fan = nx * (uint64_t)w->steps > H_SIM_EXACT_FLOW;
    if (fan != 0 && (!s0->dataflow || s0->stale || cpu)) fan = 0;
    if (fan > 1) {
        int bad = pooled ? s_unequal_shares(pl, w, fan) : -1;
        if (bad == -2) {
            h_sim_plan_free(p);
            free(nic), free(gl), free(up);
            return err_set(ERR_NOMEM, "simulate: out of memory");
        }
        pp.pool = pooled && bad < 0 ? fan : 0, fan = 1;
        p->pool_unequal = bad >= 0 ? bad + 1 : 0;
    }
    p->pool = pp.pool > 1 ? pp.pool : 0;
    if (p->pool) p->machines = pl->nodes + (pl->server_nodes + p->pool - 1) / p->pool;
    for (int b = 0; b < w->nb && rc == 0; b++) {
        const sched_t *s = &w->sched[b];
        rc = s_bucket(&pp, s, groups, stream, fan, cpu, &p->b[b], &p->merge, &p->streams, &p->bundle);
        for (size_t i = 0; rc == 0 && i < p->b[b].first[p->world]; i++) p->comms_step += p->b[b].e[i].send;
        for (size_t i = 0; rc == 0 && i < s->nx; i++) {
            const sched_xfer_t *x = &s->x[i];
            if (x->src == x->dst) continue;
            uint64_t bytes = sched_xfer_bytes(s, x);
            gl[2 * x->src] += bytes, gl[2 * x->dst + 1] += bytes;
            int ma = h_sim_machine(pl, s->workers, x->src), mb = h_sim_machine(pl, s->workers, x->dst);
            if (ma != mb) nic[2 * ma] += bytes, nic[2 * mb + 1] += bytes;
            int ra = h_sim_rack(pl, ma), rb = h_sim_rack(pl, mb);
            if (ra != rb) up[2 * ra] += bytes, up[2 * rb + 1] += bytes;
        }
    }
    double nic_Bps = h_sim_nic_Bps(pl), gpu_Bps = h_sim_gpu_Bps(pl);
    for (int m = 0; rc == 0 && m < 2 * p->machines_apart; m++) {
        if (nic[m] > p->nic_max_bytes) p->nic_max_bytes = nic[m];
        if (nic[m] / nic_Bps > p->busy_max_s) p->busy_max_s = nic[m] / nic_Bps, p->busy_is_nic = 1;
    }
    for (int r = 0; rc == 0 && r < 2 * p->world; r++)
        if (gl[r] / gpu_Bps > p->busy_max_s) p->busy_max_s = gl[r] / gpu_Bps, p->busy_is_nic = 0;
    double up_Bps = h_sim_up_Bps(pl);
    for (int k = 0; rc == 0 && up_Bps > 0 && k < 2 * racks; k++)
        if (up[k] / up_Bps > p->busy_max_s) p->busy_max_s = up[k] / up_Bps, p->busy_is_nic = 2;
    free(nic), free(gl), free(up);
    p->actors = (uint64_t)p->world;                       /* and a dataflow rank's connections, each an actor */
    int *seen = rc == 0 && p->dataflow ? calloc((size_t)p->world * H_SIM_FLOW_CONNS * 2, sizeof *seen) : NULL;
    if (rc == 0 && p->dataflow && !seen) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    for (int r = 0; seen && r < p->world; r++)
        for (int b = 0; b < p->nb; b++)
            for (size_t i = p->b[b].first[r]; i < p->b[b].first[r + 1]; i++) {
                const h_sim_entry_t *e = &p->b[b].e[i];
                size_t key = h_sim_conn_key(e);
                if (e->npc >= 0 && seen[key] != r + 1) seen[key] = r + 1, p->actors++;
            }
    free(seen);
    if (rc) h_sim_plan_free(p);
    return rc;
}

void h_sim_fail_words(char *out, size_t len, int status, double rss_mb, uint64_t actors, double avail_mb)
{
    if (!WIFSIGNALED(status)) {
        snprintf(out, len, "the simulation failed (exit %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return;
    }
    int sig = WTERMSIG(status);
    if (sig != SIGKILL) {
        snprintf(out, len, "the simulation failed (signal %d, %s)", sig, strsignal(sig));
        return;
    }
    char got[64] = "", av[64] = "";
    if (rss_mb > 0) snprintf(got, sizeof got, " after reaching %.1f GiB", rss_mb / 1024);
    if (avail_mb > 0) snprintf(av, sizeof av, " (%.1f GiB were available when it started)", avail_mb / 1024);
    snprintf(out, len, "the simulation was killed (signal 9)%s, most likely by the kernel's out-of-memory killer%s: its "
                       "memory grows with its %llu actors (a rank's, and one a connection); fewer GPUs, or a layout whose "
                       "server machines merge (--sim-bundles K)", got, av, (unsigned long long)actors);
}

void h_sim_plan_free(h_sim_plan_t *p)
{
    for (int b = 0; p->b && b < p->nb; b++)
        free(p->b[b].e), free(p->b[b].first), free(p->b[b].delay), free(p->b[b].mp), free(p->b[b].mpb), free(p->b[b].bm);
    free(p->b);
    memset(p, 0, sizeof *p);
}
