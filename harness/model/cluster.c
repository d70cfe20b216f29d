/* cluster.c (harness/model): `harness model` for emulated real models (harness/model/cluster.h).
 *
 * What the model knows: the device's step time split over layers by FLOPs (the emulator's own
 * schedule, wl_schedule), the buckets (wl_buckets: DDP's rule with the run's cap), the device's
 * optimizer update (wl_update_s) where the engine leaves it to the worker, and the NIC: beta = the
 * wire time of a payload byte, 1/(rate x eff) x 1514/1448 (a 1500-byte MTU frame as the shaper counts
 * it carries 1448 bytes of TCP payload), alpha = 0 (latency on these links is microseconds against
 * steps of hundreds of milliseconds). Nothing is fitted to the runs it is checked against (the check is
 * cluster_check.c). */
#include "harness/model/cluster_int.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void h_mc_point_free(s_point_t *p)
{
    workload_destroy(&p->wl);
    free(p->ready);
    free(p->bytes);
    memset(p, 0, sizeof *p);
}

/* The buckets and ready times of the model at one device and batch (unshrunk bytes, undilated). */
int h_mc_point(s_point_t *p, const char *model, const char *device, size_t local_batch, double bucket_mb, int no_overlap)
{
    memset(p, 0, sizeof *p);
    CHECK(workload_load(&p->wl, model));
    CHECK(wl_device_resolve(device ? device : "v100", p->wl, &p->dev));
    p->local_batch = local_batch;
    p->bucket_mb = bucket_mb > 0 ? bucket_mb : 25;
    p->no_overlap = no_overlap;
    size_t n = p->wl->ntensors, *ends = calloc(n, sizeof *ends);
    double *tr = calloc(n, sizeof *tr);
    p->ready = calloc(n, sizeof *p->ready);
    p->bytes = calloc(n, sizeof *p->bytes);
    if (!ends || !tr || !p->ready || !p->bytes) { free(ends); free(tr); return err_set(ERR_NOMEM, "model"); }
    size_t cap = (size_t)(p->bucket_mb * 1048576.0), first = cap < (1u << 20) ? cap : (1u << 20);
    p->nb = wl_buckets(p->wl, 1, first, cap, ends);
    double fwd, total;
    wl_schedule(p->wl, &p->dev, local_batch, 1, &fwd, tr, &total);
    size_t begin = 0;
    for (int b = 0; b < p->nb; b++) {
        double sz = 0;
        for (size_t i = begin; i < ends[b]; i++) sz += (double)p->wl->t[i].numel * 4;
        p->bytes[b] = sz;
        p->ready[b] = no_overlap ? total : tr[ends[b] - 1];
        begin = ends[b];
    }
    free(ends);
    free(tr);
    optim_cfg_t oc;
    optim_cfg_default(&oc, OPT_SGD);
    oc.momentum = 0.9f;
    p->update_s = wl_update_s(&p->dev, p->wl->params, 20, 1);
    return 0;
}

const s_layout_t h_mc_layouts[] = {
    {"ring", {.kind = H_PATTERN_RING}, 1},
    {"tree", {.kind = H_PATTERN_TREE}, 1},
    {"ps-1server", {.kind = H_PATTERN_PS, .servers = 1, .server_nodes = 1}, 0},
    {"ps-per-node", {.kind = H_PATTERN_PS}, 0},              /* one server on every GPU machine (TensorFlow) */
    {"ps-K=N", {.kind = H_PATTERN_PS, .server_nodes = -1}, 0}, /* N CPU-only server machines (BytePS) */
    {"ps-colocated", {.kind = H_PATTERN_PS, .colocate = 1}, 0},
    /* K CPU-only server machines, one server each, 1 < K < N (the BytePS sweep): checked against the runs
     * that have them, not extrapolated (K is the run's) */
    {"ps-K<N", {.kind = H_PATTERN_PS, .server_nodes = -2}, 0},
};
_Static_assert(sizeof h_mc_layouts / sizeof h_mc_layouts[0] == H_MC_NLAYOUTS, "H_MC_NLAYOUTS counts the layouts");

/* The slowdown of a server machine fed by the workers of N machines of G GPUs, where measured: the
 * one-server layout's bench on those machines (s_measured), for every layout with server machines of
 * their own; the median of its lines whose worker's bytes take wire (s, a worker's step's) within 2x,
 * else of all (the slowdown falls with size where a step's last flows leave a fixed tail: ps-sizes).
 * Each of K server machines takes the same P pushes from the same N machines as one does, K times fewer
 * bytes; what K > 1 adds is the fan-out term (s_fan). The K = N layout's own bench (8 MiB a server, two
 * partitions) is listed, not used: it measured 1.54 to 2.10, and using it made the K = N training checks
 * 20-25% pessimistic. Servers on the GPU machines (one per machine, colocated) take their own layout's
 * bench, only its lines at training's partition (ps-sizes-table: on 4 machines of 4 the colocated
 * collective alone takes 1.30 to 1.51 of its modelled time at 2 to 8 MiB a worker and 1.09 to 1.13 from
 * 16 MiB, where the law says 1.18 at every size). 0: none measured (the law). */
static double s_slow(const struct s_meas *t, int l, int N, int G, double wire)
{
    int own = h_mc_layouts[l].e.server_nodes == 0; /* servers on the GPU machines (per machine, colocated) */
    if (!t || h_mc_layouts[l].e.kind != H_PATTERN_PS) return 0;
    for (int k = 0; k < t->n; k++) {
        if (t->e[k].nodes != N || t->e[k].gpn != G) continue;
        if (own ? t->e[k].layout != l || !t->e[k].cntm : h_mc_layouts[t->e[k].layout].e.server_nodes != 1) continue;
        double near[32];
        int m = 0;
        for (int i = 0; i < t->e[k].cntm; i++)
            if (wire > 0 && fabs(log(t->e[k].wm[i] / wire)) <= log(2.0)) near[m++] = t->e[k].rm[i];
        return m ? h_median(near, (size_t)m) : t->e[k].slow;
    }
    return 0;
}

/* The fan-out term for K server machines fed by N machines of G: c (K - 1), K held at the largest K
 * measured; 0 where none was measured for (N, G) or K < 2. */
static double s_fan(const struct s_meas *t, int N, int G, int K)
{
    if (!t || K < 2) return 0;
    for (int k = 0; k < t->nf; k++)
        if (t->f[k].nodes == N && t->f[k].gpn == G) return t->f[k].c * ((K < t->f[k].kmax ? K : t->f[k].kmax) - 1);
    return 0;
}

/* Predicted step (s) of a layout on N machines of G GPUs; t: the slowdowns measured per layout (NULL:
 * the law everywhere). */
double h_mc_step(const s_point_t *p, const struct s_meas *t, int l, int N, int G, int K, double bps,
                     double *exposed)
{
    const s_layout_t *L = &h_mc_layouts[l];
    h_cl_net_t net = {.nodes = N, .gpus_per_node = G, .beta = S_WIRE * 8.0 / bps, .alpha = 0};
    h_cl_engine_t e = L->e;
    e.pipelined = p->ps_pipelined;
    e.part_bytes = S_PART; /* in unshrunk bytes */
    e.incast = p->incast;
    double wire = 0;
    for (int b = 0; b < p->nb; b++) wire += p->bytes[b] * net.beta;
    e.slow = s_slow(t, l, N, G, wire);
    if (e.kind == H_PATTERN_PS && !e.colocate && e.server_nodes == 0 && e.servers == 0) e.servers = N; /* one per machine */
    if (e.kind == H_PATTERN_PS && e.server_nodes == -1) e.server_nodes = e.servers = N;                /* K = N */
    if (e.kind == H_PATTERN_PS && e.server_nodes == -2) e.server_nodes = e.servers = K;                /* K < N */
    if (e.kind == H_PATTERN_PS) e.fanout = s_fan(t, N, G, e.server_nodes);
    double total = (double)p->local_batch / p->dev.samples_per_s;
    double step = N * G > 1 ? h_cl_step(&net, &e, p->nb, p->ready, p->bytes, total, exposed) : total;
    if (L->update_on_worker || N * G == 1) step += p->update_s;
    return step;
}


/* The TCP congestion control the model's NIC runs: --net's cc=, else the emulation's default. */
const char *h_mc_model_cc(const h_model_cluster_cfg_t *o, char *buf, size_t len)
{
    h_netem_spec_t spec;
    char err[256];
    snprintf(buf, len, "%s", o->net && h_netem_parse(o->net, &spec, err, sizeof err) == 0 ? h_netem_spec_cc(&spec)
                                                                                         : H_NETEM_CC_DEFAULT);
    return buf;
}

/* Whether a result line's emulated machines ran congestion control cc: its versions say "tcp NAME" (the
 * rank's namespace's); a line that does not say is taken to have run the default. TCP's congestion
 * control sets how flows share a NIC (emulation-cc), so lines of another are not the model's points. */
int h_mc_line_cc_is(const h_jobj_t *r, const char *cc)
{
    const char *v = h_jstr(r, "versions", ""), *t = strstr(v, "tcp ");
    if (!t) return !strcmp(cc, H_NETEM_CC_DEFAULT);
    t += 4;
    size_t n = strcspn(t, ", ");
    return n == strlen(cc) && !strncmp(t, cc, n);
}

/* A bench line's steady time per collective: loop_us, the slowest worker's loop / iterations, what a training
 * step compares with (0: from before bench wrote it). time_us adds the workers' finish spread of a PS. */
#define S_LOOP_US(r) h_jnum((r), "loop_us", 0)

/* Whether a bench line says the host bound it (its "host_bound", written on emulated links since the
 * bench measures the machine's CPU): such a line measured this machine, not the links, and calibrates
 * nothing. Lines without the field (older benches) are taken as they are. */
static int s_bench_host_bound(const h_jobj_t *r)
{
    return h_jflag(r, "host_bound", 0);
}

static int s_link(const h_model_cluster_cfg_t *o, double *bps, double *eff)
{
    *bps = 25e9;
    *eff = 1;
    if (!o->net) return 0;
    h_netem_spec_t spec;
    char err[256];
    if (h_netem_parse(o->net, &spec, err, sizeof err) < 0) return err_set(ERR_INVAL, "%s", err);
    *bps = spec.bits_per_s * spec.eff;
    *eff = spec.eff;
    return 0;
}

/* The answer for the cluster asked (--nodes N --gpus-per-node G): the best allreduce against the best
 * PS layout at N x G GPUs, the layouts named once. The cost model's answer, with its limits above. */
static void s_verdict(const h_model_cluster_cfg_t *o, const s_point_t *p, const struct s_meas *t, int G, double bps)
{
    int N = o->nodes > 0 ? o->nodes : 1, P = N * G, best[2] = {-1, -1};
    double sp[H_MC_NLAYOUTS] = {0};
    for (int l = 0; l < H_MC_NLAYOUTS; l++) {
        if (h_mc_layouts[l].e.server_nodes == -2) continue;
        double step = h_mc_step(p, t, l, N, G, 0, bps, NULL);
        sp[l] = step > 0 ? (double)P * (double)p->local_batch / step / p->dev.samples_per_s : 0;
        int ps = h_mc_layouts[l].e.kind == H_PATTERN_PS;
        if (best[ps] < 0 || sp[l] > sp[best[ps]]) best[ps] = l;
    }
    if (best[0] < 0 || best[1] < 0) return;
    int ar = best[0], ps = best[1], win = sp[ar] >= sp[ps] ? ar : ps;
    printf("# PS layouts: ps-1server one CPU server machine; ps-per-node a server on every GPU machine; ps-K=N as many\n"
           "# CPU server machines as GPU machines (BytePS); ps-colocated a server inside every worker\n");
    printf("# verdict (the cost model's, within its limits above): %s, %d GPUs (%d x %d), %.4g Gbit/s: %s %.2fx %s best PS "
           "layout (%s) %.2fx: use %s\n", p->wl->name, P, N, G, bps / 1e9, h_mc_layouts[ar].label, sp[ar],
           sp[ar] >= sp[ps] ? ">=" : "<", h_mc_layouts[ps].label, sp[ps], win == ar ? h_mc_layouts[ar].label : "the PS layout");
}

/* Prints the table; with --json appends its lines ("kind":"cluster") in one write, whole or not at all. */
static int s_extrapolate(const h_model_cluster_cfg_t *o, const s_point_t *p, const struct s_meas *t, int G, double bps)
{
    h_lines_t lines;
    h_lines_open(&lines, &o->out, "model");
    printf("# predicted speedup over one device (GPUs = machines x %d)\n# %-14s", G, "engine");
    for (int P = 1; P <= 1024; P *= 2) printf(" %7d", P);
    printf("\n");
    for (int l = 0; l < H_MC_NLAYOUTS; l++) {
        if (h_mc_layouts[l].e.server_nodes == -2) continue; /* K is a run's: checked, not extrapolated */
        printf("  %-14s", h_mc_layouts[l].label);
        for (int P = 1; P <= 1024; P *= 2) {
            int g = P < G ? P : G, N = (P + g - 1) / g;
            double step = h_mc_step(p, t, l, N, g, 0, bps, NULL);
            double sp = (double)P * (double)p->local_batch / step / p->dev.samples_per_s;
            printf(" %7.2f", sp);
            if (o->out.json)
                h_lines_add(&lines, json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:f, s:f}", "kind",
                                                 "cluster", "model", p->wl->name, "device", p->dev.name, "engine",
                                                 h_mc_layouts[l].label, "gpus", P, "nodes", N, "gpus_per_node", g,
                                                 "net_bps", (json_int_t)llround(bps), "local_batch",
                                                 (json_int_t)p->local_batch, "step_ms", step * 1e3, "speedup", sp));
        }
        printf("\n");
    }
    s_verdict(o, p, t, G, bps);
    return h_lines_close(&lines, "the result lines");
}

/* The layout a measured line ran: engine, impl, servers and server machines. */
int h_mc_layout_of(const h_jobj_t *r, int N)
{
    const char *eng = h_jstr(r, "engine", ""), *impl = h_jstr(r, "impl", "");
    if (!strcmp(eng, "ring")) return 0;
    if (!strcmp(eng, "tree")) return 1;
    if (h_engine_pattern(eng) != H_PATTERN_PS) return -1;
    if (strstr(impl, "colocated")) return 5;
    int S = (int)h_jnum(r, "servers", 0), K = (int)h_jnum(r, "server_nodes", 0);
    if (K > 0) return S == 1 && K == 1 ? 2 : (K == N && S == N ? 4 : (S == K && K > 1 && K < N ? 6 : -1));
    return S == N ? 3 : (S == 1 && N == 1 ? 3 : -1);
}

/* Whether a bench's partition (bytes; beta: s a byte on its NIC) takes training's partition time within 2x:
 * the default 4 MiB on the modelled NIC (128 KiB at 781 Mbit/s for 4 MiB at 25 Gbit/s, shrink 32). */
static int s_train_part(const h_model_cluster_cfg_t *o, double part, double beta)
{
    double bps, eff, want = s_link(o, &bps, &eff) < 0 ? 0 : S_PART * S_WIRE * 8.0 / bps;
    return part > 0 && beta > 0 && want > 0 && fabs(log(part * beta / want)) <= log(2.0);
}

/* c of the incast slowdown: fitted to the shaped PS bench lines in the files (`harness bench --net bw=RATE
 * --engine ps --servers 1 --ps-partition-kb P`, one namespace per rank, at training's partition wire time,
 * two or more partitions) against the pipelined model without it; else H_CL_INCAST_DEFAULT. *from: which. */
static double s_incast(const h_model_cluster_cfg_t *o, char *from, size_t len)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    h_jread_files(o->nfiles, o->files, &objs, &n, &nbad, NULL);
    int *f = n ? calloc(n, sizeof *f) : NULL, k = 0;
    double *ratio = n ? calloc(n, sizeof *ratio) : NULL;
    char cc[16];
    h_mc_model_cc(o, cc, sizeof cc);
    for (size_t i = 0; f && ratio && i < n; i++) {
        const h_jobj_t *r = &objs[i];
        const char *net = h_jstr(r, "net", "");
        int P = (int)h_jnum(r, "world", 0);
        double bytes = h_jnum(r, "bytes", 0), us = S_LOOP_US(r);
        double part = S_LINE_PART(r);
        h_netem_spec_t spec;
        char err[256];
        if (strcmp(h_jstr(r, "mode", ""), "bench") || strcmp(h_jstr(r, "impl", ""), "ps-sync-servers1") ||
            strncmp(net, "bw=", 3) || h_netem_parse(net, &spec, err, sizeof err) < 0 || spec.per_node || P < 2 ||
            spec.queue_ms != H_NETEM_QUEUE_MS || !h_mc_line_cc_is(r, cc) ||
            bytes < 2 * part || us <= 0 || h_jnum(r, "wrong", 0) != 0 || s_bench_host_bound(r) ||
            !s_train_part(o, part, S_WIRE * 8.0 / (spec.bits_per_s * spec.eff)))
            continue;
        /* one machine per rank, the server on a machine of its own */
        h_cl_net_t cn = {.nodes = P, .gpus_per_node = 1, .beta = S_WIRE * 8.0 / (spec.bits_per_s * spec.eff), .alpha = 0};
        h_cl_engine_t e = {.kind = H_PATTERN_PS, .servers = 1, .server_nodes = 1, .pipelined = 1, .part_bytes = part};
        double ready = 0, ideal = h_cl_step(&cn, &e, 1, &ready, &bytes, 0, NULL);
        f[k] = P;
        ratio[k++] = us * 1e-6 / ideal;
    }
    double c = k ? h_cl_incast_fit(k, f, ratio) : NAN;
    if (isfinite(c) && c >= 0) snprintf(from, len, "fitted to %d shaped PS bench lines in the files", k);
    else {
        c = H_CL_INCAST_DEFAULT;
        snprintf(from, len, "the fit to results/ps-incast.jsonl");
    }
    free(f);
    free(ratio);
    h_jfree_all(&objs, &n);
    return c;
}

/* Whether r is a PS layout bench that can calibrate the model: `harness bench --engine ps --nodes N
 * --gpus-per-node G ... --net inter=RATE` on machines of the modelled congestion control and the default
 * queue, every element right, not host-bound. Sets *N, *G, *l (its h_mc_layouts row, >= 2) and *beta (s a
 * payload byte on one NIC direction). */
static int s_layout_bench(const h_jobj_t *r, const char *cc, int *N, int *G, int *l, double *beta)
{
    int P = (int)h_jnum(r, "world", 0);
    *N = (int)h_jnum(r, "nodes", 0);
    if (strcmp(h_jstr(r, "mode", ""), "bench") || *N < 1 || P < 1 || P % *N || S_LOOP_US(r) <= 0 ||
        h_jnum(r, "wrong", 0) != 0 || h_jget(r, "emulated") || s_bench_host_bound(r))
        return 0;
    *G = P / *N;
    *l = h_mc_layout_of(r, *N);
    h_netem_spec_t spec;
    char err[256];
    if (*l < 2 || (int)h_jnum(r, "gpus_per_node", 0) != *G || h_netem_parse(h_jstr(r, "net", ""), &spec, err, sizeof err) < 0 ||
        !spec.per_node || spec.bits_per_s <= 0 || spec.queue_ms != H_NETEM_QUEUE_MS || !h_mc_line_cc_is(r, cc))
        return 0;
    *beta = S_WIRE * 8.0 / (spec.bits_per_s * spec.eff);
    return 1;
}

/* The slowdowns measured per PS layout: `harness bench --engine ps --nodes N --gpus-per-node G
 * [--server-nodes K] --servers S --net inter=RATE [--ps-partition-kb P]` lines among the files where every
 * server takes two or more partitions from each worker (its replies overlap its pushes, as in training),
 * each measured / modelled at its partition without a slowdown; the median per (layout, N, G) of the lines
 * whose partition takes as long on their link as training's (the default 4 MiB on the modelled NIC) within
 * 2x (as in training, both directions stay busy), else of the 4 MiB lines. *nlines: the bench lines used;
 * *nold: PS lines on emulated machines without loop_us, left out. */
static void s_measured(const h_model_cluster_cfg_t *o, struct s_meas *t, int *nlines, int *nold)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    memset(t, 0, sizeof *t);
    *nlines = *nold = 0;
    h_jread_files(o->nfiles, o->files, &objs, &n, &nbad, NULL);
    char cc[16];
    h_mc_model_cc(o, cc, sizeof cc);
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *r = &objs[i];
        int N, G, l;
        double beta, bytes = h_jnum(r, "bytes", 0), us = S_LOOP_US(r);
        double part = S_LINE_PART(r);
        if (!strcmp(h_jstr(r, "mode", ""), "bench") && !strcmp(h_jstr(r, "engine", ""), "ps") && h_jnum(r, "nodes", 0) > 0 &&
            S_LOOP_US(r) <= 0)
            (*nold)++;
        if (!s_layout_bench(r, cc, &N, &G, &l, &beta) || part <= 0 || bytes < 2 * part) continue;
        int matched = s_train_part(o, part, beta);
        if (!matched && part != S_PART) continue;
        int P = N * G;
        h_cl_net_t cn = {.nodes = N, .gpus_per_node = G, .beta = beta, .alpha = 0};
        h_cl_engine_t e = h_mc_layouts[l].e;
        e.pipelined = 1;
        e.part_bytes = part;
        if (!e.colocate && e.server_nodes == 0 && e.servers == 0) e.servers = N;
        if (e.server_nodes == -1) e.server_nodes = e.servers = N;
        if (e.server_nodes == -2) e.server_nodes = e.servers = (int)h_jnum(r, "server_nodes", 0);
        if (bytes / (e.colocate ? P : e.servers > 0 ? e.servers : 1) < 2 * part) continue; /* pushes, then replies */
        if (l == 6) continue; /* 1 < K < N server machines: the fan-out sweep's (s_fanout) */
        double ready = 0, ideal = h_cl_step(&cn, &e, 1, &ready, &bytes, 0, NULL);
        if (!(ideal > 0)) continue;
        int k = 0;
        while (k < t->n && !(t->e[k].layout == l && t->e[k].nodes == N && t->e[k].gpn == G)) k++;
        if (k == t->n) {
            if (t->n == (int)(sizeof t->e / sizeof t->e[0])) continue;
            t->e[t->n].layout = l, t->e[t->n].nodes = N, t->e[t->n].gpn = G;
            t->n++;
        }
        if (matched && t->e[k].cntm < 32) {
            t->e[k].wm[t->e[k].cntm] = bytes * beta;
            t->e[k].rm[t->e[k].cntm++] = us * 1e-6 / ideal;
        }
        else if (!matched && t->e[k].cnt < 16) t->e[k].r[t->e[k].cnt++] = us * 1e-6 / ideal;
        (*nlines)++;
    }
    for (int k = 0; k < t->n; k++) {
        double all[32]; /* h_median sorts: rm stays paired with wm */
        memcpy(all, t->e[k].rm, sizeof all);
        t->e[k].slow = t->e[k].cntm ? h_median(all, (size_t)t->e[k].cntm) : h_median(t->e[k].r, (size_t)t->e[k].cnt);
    }
    h_jfree_all(&objs, &n);
}

/* The fan-out term, from `harness bench --engine ps --nodes N --gpus-per-node G --server-nodes K --servers K
 * --ps-partition-kb P --net inter=RATE` lines at K = 1 and K > 1 on the same N, G at training's partition: each measured / modelled at its partition, the
 * median per K, and c fitted (least squares through 0) to r(K) - r(1) against K - 1: what K server
 * machines cost beyond one fed by the same workers. A negative fit is held at 0. *nlines: lines used. */
static void s_fanout(const h_model_cluster_cfg_t *o, struct s_meas *t, int *nlines)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    struct { int N, G, K, cnt; double w, r[16]; } g[128]; /* w: wire time (s) of a worker's bytes */
    int ng = 0;
    t->nf = 0;
    *nlines = 0;
    h_jread_files(o->nfiles, o->files, &objs, &n, &nbad, NULL);
    char cc[16];
    h_mc_model_cc(o, cc, sizeof cc);
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *r = &objs[i];
        int N, G, l, K = (int)h_jnum(r, "server_nodes", 0);
        double beta, bytes = h_jnum(r, "bytes", 0), us = S_LOOP_US(r), part = S_LINE_PART(r);
        /* one server on each of K machines of its own (the one-server, K = N and K < N layouts) */
        if (!s_layout_bench(r, cc, &N, &G, &l, &beta) || N < 2 || K < 1 || part <= 0 || (l != 2 && l != 4 && l != 6) ||
            (int)h_jnum(r, "servers", 0) != K || bytes / K < 2 * part || !s_train_part(o, part, beta))
            continue;
        h_cl_net_t cn = {.nodes = N, .gpus_per_node = G, .beta = beta, .alpha = 0};
        h_cl_engine_t e = {.kind = H_PATTERN_PS, .servers = K, .server_nodes = K, .pipelined = 1, .part_bytes = part};
        double ready = 0, ideal = h_cl_step(&cn, &e, 1, &ready, &bytes, 0, NULL);
        if (!(ideal > 0)) continue;
        int k = 0;
        while (k < ng && !(g[k].N == N && g[k].G == G && g[k].K == K && fabs(log(bytes * beta / g[k].w)) <= log(1.05))) k++;
        if (k == ng) {
            if (ng == (int)(sizeof g / sizeof g[0])) continue;
            g[ng].N = N, g[ng].G = G, g[ng].K = K, g[ng].cnt = 0, g[ng].w = bytes * beta;
            ng++;
        }
        if (g[k].cnt < 16) g[k].r[g[k].cnt++] = us * 1e-6 / ideal;
        (*nlines)++;
    }
    double med[128];
    for (int k = 0; k < ng; k++) med[k] = h_median(g[k].r, (size_t)g[k].cnt);
    /* per (N, G): each K > 1 median against the K = 1 median at the same bytes (wire time within 5%) */
    for (int a = 0; a < ng; a++) {
        int first = 1;
        for (int k = 0; k < t->nf; k++) first &= !(t->f[k].nodes == g[a].N && t->f[k].gpn == g[a].G);
        if (g[a].K != 1 || !first || t->nf == (int)(sizeof t->f / sizeof t->f[0])) continue;
        double sxy = 0, sxx = 0, *r = t->f[t->nf].r;
        int kmax = 1;
        memset(t->f[t->nf].r, 0, sizeof t->f[t->nf].r);
        for (int one = a; one < ng; one++) {
            if (g[one].N != g[a].N || g[one].G != g[a].G || g[one].K != 1) continue;
            for (int b = 0; b < ng; b++) {
                if (g[b].N != g[a].N || g[b].G != g[a].G || g[b].K < 2 || fabs(log(g[b].w / g[one].w)) > log(1.05)) continue;
                sxy += (g[b].K - 1) * (med[b] - med[one]);
                sxx += (double)(g[b].K - 1) * (g[b].K - 1);
                if (g[b].K > kmax) kmax = g[b].K;
                r[0] = med[one];
                if (g[b].K <= 16) r[g[b].K - 1] = med[b];
            }
        }
        if (!(sxx > 0)) continue;
        t->f[t->nf].nodes = g[a].N, t->f[t->nf].gpn = g[a].G, t->f[t->nf].kmax = kmax;
        t->f[t->nf++].c = fmax(0, sxy / sxx);
    }
    h_jfree_all(&objs, &n);
}

int h_model_cluster(const h_model_cluster_cfg_t *o)
{
    double bps, eff;
    CHECK(s_link(o, &bps, &eff));
    int G = o->gpus_per_node > 0 ? o->gpus_per_node : 4, N = o->nodes > 0 ? o->nodes : 1;
    size_t lb = o->batch_per_gpu > 0 ? (size_t)o->batch_per_gpu
              : o->batch > 0 ? (size_t)o->batch / (size_t)(N * G) : (size_t)H_EMU_BATCH_PER_GPU;
    if (!lb) return err_set(ERR_INVAL, "--batch %d is less than one sample a GPU on %d GPUs", o->batch, N * G);
    if (!lb) lb = 1;
    s_point_t p;
    int rc = h_mc_point(&p, o->model, o->emu_device, lb, o->bucket_mb, o->no_overlap);
    p.ps_pipelined = o->grad_dtype == DT_F32; /* as the engine decides (ps/ps_step.c; loss scaling implies half gradients) */
    if (rc < 0) {
        h_mc_point_free(&p);
        return rc;
    }
    char from[96];
    p.incast = s_incast(o, from, sizeof from);
    static struct s_meas meas;
    int nmeas = 0, nfan = 0, nold = 0;
    s_measured(o, &meas, &nmeas, &nold);
    s_fanout(o, &meas, &nfan);
    char cc[16];
    printf("# syncbench model (emulated cluster): %s on %s (%.1f samples/s: %s), batch %zu/GPU, NIC %.4g Gbit/s "
           "(eff %g, TCP %s), %d buckets of <= %g MiB%s; device update %.2f ms where the worker updates\n",
           p.wl->name, p.dev.name, p.dev.samples_per_s, p.dev.basis, lb, bps / eff / 1e9, eff, h_mc_model_cc(o, cc, sizeof cc),
           p.nb, p.bucket_mb, p.no_overlap ? " (after backward)" : " (overlapping backward)", p.update_s * 1e3);
    printf("# the pipelined PS's incast slowdown: a NIC taking the pushes of f workers from >= 2 other machines while\n"
           "# it replies delays its replies by 1 + c (f - 1), c = %.4f (%s); on a direction that also carries\n"
           "# pushes (servers on the GPU machines) only the replies' bytes are slowed\n", p.incast, from);
    printf("# the model's limits: one collective at a time, links paced by the busiest NIC, no latency, no CPU or PCIe\n"
           "# limits, servers' CPU work free (measured: their processes under 20%% of a core here), TCP's share of a\n"
           "# shared NIC only through the incast slowdown (measured on this host's tc tbf, not on a switch, under\n"
           "# TCP %s; on a server machine's NIC, plus the fan-out term where a bench measured it on the same\n"
           "# machines); the emulated runs share them, a real cluster may not\n",
           cc);
    if (meas.n) {
        /* one server machine's: there the bench's pattern is training's (pushes in, replies out, a
         * partition's replies after its pushes) and the two agree; it is used for K > 1 server machines too,
         * with the fan-out term (s_slow). Where servers share the GPU machines only the lines at training's
         * partition count: the 16 MiB bench at 4 MiB gives every server one partition (pushes, then
         * replies), and calibrating with it made the checks worse (26 of 51 and 26 of 48 within 10%, per
         * machine and colocated) */
        printf("# the PS alone on these layouts (%d `harness bench --nodes N --gpus-per-node G --net` lines, two or more\n"
               "# partitions a server), measured / modelled time without a slowdown, beside the law's slowdown (*: at a\n"
               "# partition of training's wire time, %.2f ms; else at 4 MiB); one server machine's (ps-1server) is used\n"
               "# for every layout with server machines on those machines, a layout with servers on the GPU machines\n"
               "# takes its own (*-lines only); at a step, the lines within 2x of its wire time:",
               nmeas, S_PART * S_WIRE * 8.0 / bps * 1e3);
        for (int k = 0; k < meas.n; k++) {
            const s_layout_t *L = &h_mc_layouts[meas.e[k].layout];
            int N = meas.e[k].nodes, Gk = meas.e[k].gpn, P = N * Gk;
            /* servers on the GPU machines: the law slows the replies, half a direction's bytes */
            double law = L->e.colocate || L->e.server_nodes == 0 ? (1 + h_cl_incast_factor(p.incast, P - Gk, N - 1)) / 2
                                                                  : h_cl_incast_factor(p.incast, P, N);
            printf("%s %s %dx%d %.2f%s (law %.2f)", k % 3 ? "," : "\n#  ", L->label, N, Gk, meas.e[k].slow,
                   meas.e[k].cntm ? "*" : "", law);
        }
        printf("\n");
    }
    if (nold)
        printf("# %d PS bench lines on emulated machines left out: recorded before bench wrote loop_us (the steady\n"
               "# time a collective that training's step compares with); re-record them\n", nold);
    if (!meas.n)
        printf("# no `harness bench --nodes N --gpus-per-node G --net` PS lines among the files: the law for every PS layout\n");
    if (!meas.nf)
        printf("# no `harness bench --server-nodes K --ps-partition-kb P` PS lines at K = 1 and more among the files: no\n"
               "# fan-out term for K > 1 server machines\n");
    if (meas.nf) {
        printf("# a worker NIC feeding K > 1 server machines (%d `harness bench ... --server-nodes K --ps-partition-kb P`\n"
               "# lines, K = 1 and more on the same machines): the servers' slowdown grows by c (K - 1), K held at the\n"
               "# largest measured; each from the collective alone's measured / modelled time at K = 1, 2, ...:", nfan);
        for (int k = 0; k < meas.nf; k++) {
            printf("\n#   %dx%d c = %.4f (K <= %d) from", meas.f[k].nodes, meas.f[k].gpn, meas.f[k].c, meas.f[k].kmax);
            for (int K = 1; K <= meas.f[k].kmax; K++)
                if (meas.f[k].r[K - 1] > 0) printf(" %d: %.2f", K, meas.f[k].r[K - 1]);
        }
        printf("\n");
    }
    rc = s_extrapolate(o, &p, &meas, G, bps);
    if (rc == 0 && o->nfiles && !o->no_check) rc = h_mc_check(o, &p, &meas);
    h_mc_point_free(&p);
    return rc;
}
