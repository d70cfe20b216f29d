/* sim_check.c: `harness simulate --emulated FILE...` (simulate.h): the simulator against the emulated
 * cluster's training runs. The split is declared before looking: the constants the simulator needs
 * beyond a run's own options (the emulated network's per-hop latency, the emulated machines' shared
 * memory path) are fitted from the files' collective-alone bench lines only; every emulated training
 * line that is not host-bound is a check point. Each configuration (every launch of the same run) is
 * simulated once, without stragglers (the emulated GPUs have none), and compared by its launches'
 * median step; the error distribution is printed and written, whatever it is. A run with --net ...,lat=US
 * is simulated with its own latency on top of the fitted one: lat=US holds a packet 4 x US on the sending
 * NIC (netspec.h), so each of the two machine-switch hops of a transfer across machines gets 2 x US more,
 * the hops inside a machine none; its errors are summarised apart as well. */
#include "harness/simulate/simulate.h"
#include "harness/simulate/sim.h"
#include "harness/registry/layouts.h"
#include "harness/record/jsonl.h"
#include "harness/record/stats.h"
#include "harness/emulate/netspec.h"
#include "core/err.h"
#include "trainer/workload.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the median of n values (sorted in place): record/stats.h's */
static double s_median(double *v, int n) { return n > 0 ? h_median(v, (size_t)n) : 0; }

/* 1 when a line ran under the default congestion control (its "versions" names it) */
static int s_default_cc(const h_jobj_t *r)
{
    const char *v = h_jstr(r, "versions", ""), *t = strstr(v, "tcp ");
    if (!t) return 1;
    t += 4;
    size_t n = strcspn(t, ", ");
    return n == strlen(H_NETEM_CC_DEFAULT) && !strncmp(t, H_NETEM_CC_DEFAULT, n);
}

/* The fitted constants: the per-hop latency from the host ring's benches across emulated machines (one
 * rank a namespace over TCP: a least-squares line through time against bytes, per world; its intercept is
 * 2 (P - 1) steps of 4 hops), and a GPU's link inside an emulated machine from the host ring's benches
 * over shared memory (its bus bandwidth at the largest size: the median of that size's lines, so that the
 * files' order never picks one, then the median over worlds). */
typedef struct {
    double lat_s, shm_bps;
    int nlat, nshm;
    double srv_Bps;               /* a server core's rate on this host (s_fit_server), bytes a second */
    int nsrv;                     /* the bench points it was fitted from */
    double srv_q1, srv_q3;        /* the points' own rates: quartiles */
} s_fit_t;

#define S_FIT_MAX 256 /* a world's shared-memory lines at its largest size */
static int s_xy_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] != y[1] ? (x[1] < y[1] ? -1 : 1) : 0;
}

static void s_fit(const h_jobj_t *objs, size_t n, s_fit_t *f)
{
    double lat[16], shm[16];
    int nl = 0, nm = 0;
    double (*xy)[2] = malloc((n ? n : 1) * sizeof *xy); /* a world's TCP points, summed in sorted order: no file order */
    for (int P = 2; P <= 64 && xy; P++) {
        double sx = 0, sy = 0, sxx = 0, sxy = 0, big = 0, bw = 0, at[S_FIT_MAX];
        int nb = 0;
        int k = 0;
        for (size_t i = 0; i < n; i++) {
            const h_jobj_t *r = &objs[i];
            if (strcmp(h_jstr(r, "mode", ""), "bench") || strcmp(h_jstr(r, "engine_label", ""), h_engine_transport_probe()) ||
                h_jget(r, "in_place") ||
                (int)h_jnum(r, "world", 0) != P || h_jnum(r, "wrong", 0) != 0)
                continue;
            double x = h_jnum(r, "bytes", 0), y = h_jnum(r, "time_us", 0) * 1e-6;
            if (!(x > 0) || !(y > 0)) continue;
            const char *tp = h_jstr(r, "transport", ""), *net = h_jstr(r, "net", "");
            h_netem_spec_t bs;
            char berr[256];
            if (*net && (h_netem_parse(net, &bs, berr, sizeof berr) < 0 || bs.lat_us > 0)) continue; /* fit without lat= */
            if (!strcmp(tp, "tcp") && *net && !h_jget(r, "nodes")) {
                xy[k][0] = x, xy[k][1] = y, k++;
            } else if (!strcmp(tp, "shm") && !*net && x >= big) {
                if (x > big) nb = 0;
                big = x;
                if (nb < S_FIT_MAX) at[nb++] = x * 2.0 * (P - 1) / P / y * 8; /* bits/s on each rank's link */
            }
        }
        qsort(xy, (size_t)k, sizeof *xy, s_xy_cmp);
        for (int i = 0; i < k; i++) sx += xy[i][0], sy += xy[i][1], sxx += xy[i][0] * xy[i][0], sxy += xy[i][0] * xy[i][1];
        if (k >= 2 && nl < 16) {
            double b = (k * sxy - sx * sy) / (k * sxx - sx * sx), a = (sy - b * sx) / k;
            lat[nl++] = (a > 0 ? a : 0) / (2.0 * (P - 1)) / 4;
        }
        bw = s_median(at, nb);
        if (bw > 0 && nm < 16) shm[nm++] = bw;
    }
    free(xy);
    f->nlat = nl, f->nshm = nm;
    f->lat_s = s_median(lat, nl);
    f->shm_bps = s_median(shm, nm);
}

typedef struct {
    char key[512], label[48], engine[16], model[32], device[32];
    int P, N, G, servers, server_nodes, coloc, lb, overlap, esz;
    double bps, shrink, dilate, bucket_mb, lat_us, sim_ms, *ms;
    double part, bytes;           /* a bench point (s_fit_server): its partition and bytes a worker */
    int n, cap;
} s_pt_t;

static s_pt_t *s_find(s_pt_t **pts, int *npts, int *cap, const char *key)
{
    for (int k = 0; k < *npts; k++)
        if (!strcmp((*pts)[k].key, key)) return &(*pts)[k];
    if (*npts == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        s_pt_t *np = realloc(*pts, (size_t)nc * sizeof *np);
        if (!np) return NULL;
        *pts = np, *cap = nc;
    }
    s_pt_t *c = &(*pts)[(*npts)++];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    return c;
}

static int s_add(s_pt_t *c, double ms)
{
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 4;
        double *p = realloc(c->ms, (size_t)nc * sizeof *p);
        if (!p) return -1;
        c->ms = p, c->cap = nc;
    }
    c->ms[c->n++] = ms;
    return 0;
}

/* The server's rate, fitted from the files' collective-alone bench lines of a serving engine in sync mode
 * (engine_ops_t.serve; the PS's ps-sizes, ps-fanout, ps-layouts, ...), never from a training line: each
 * bench point (one configuration and size, the median of its lines) is simulated as it ran (its machines,
 * servers, partition and NIC, the latency and shared memory fitted above) with a server core of rate x, and
 * x is bisected (in log space, 1 MB/s to 100 GB/s) until the simulated collective takes the measured time;
 * the rate is the median of the points' own rates. A point the simulator already finds slower with no CPU
 * time at all counts at the upper bound; one still too fast at the lower bound, at that bound. The rate is
 * this host's: real bytes a second of its 2 cores shared by every emulated rank, as the emulated runs ran. */
#define S_SRV_LO 1e6
#define S_SRV_HI 1e11
#define S_SRV_ITERS 10

static int s_bench_sim(const h_simulate_cfg_t *o, const s_fit_t *f, const s_pt_t *c, double rate, double *us)
{
    h_engset_t es;
    void *store[H_MAX_ENGINES] = {0};
    CHECK(h_layout_engset_of_bench(c->engine, c->label, c->servers, (size_t)c->part, &o->es, &es, store));
    sched_env_t env = {.workers = c->P, .device = -1, .segmented = 1, .seg_bytes = es.seg_bytes, .gpus_per_node = c->G};
    sched_t s;
    int rc = h_engine_schedule(&es, c->engine, &env, (size_t)c->bytes / 4, 4, &s);
    h_layout_free(store);
    if (rc < 0) return rc;
    h_sim_platform_t pl = {.nodes = c->N, .gpus_per_node = c->G, .server_nodes = c->server_nodes, .inter_bps = c->bps,
                           .intra_bps = f->shm_bps, .lat_s = f->lat_s, .framing = H_SIM_TCP_FRAMING,
                           .server_Bps = rate, .server_cores = 1, .timeout_s = o->timeout_s};
    h_sim_work_t w = {.nb = 1, .sched = &s, .steps = 1, .cpu_reduce = 1};
    h_sim_result_t r;
    rc = h_sim_run(&pl, &w, &r);
    sched_free(&s);
    if (rc == 0) *us = r.time_s * 1e6;
    return rc;
}

static int s_fit_server(const h_simulate_cfg_t *o, const h_jobj_t *objs, size_t n, s_fit_t *f)
{
    s_pt_t *pts = NULL;
    int npts = 0, cap = 0, rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const h_jobj_t *r = &objs[i];
        const char *eng = h_jstr(r, "engine", ""), *label = h_jstr(r, "engine_label", ""), *net = h_jstr(r, "net", "");
        const engine_ops_t *ops = h_engine_find(eng);
        if (strcmp(h_jstr(r, "mode", ""), "bench") || !ops || !ops->serve || !strstr(label, "-sync") || h_jget(r, "in_place") ||
            h_jnum(r, "wrong", 0) != 0 || strcmp(h_jstr(r, "dtype", "f32"), "f32") || !h_jget(r, "nodes") || !*net ||
            h_jnum(r, "shrink", 1) != 1 || h_jnum(r, "dilate", 1) != 1 || !s_default_cc(r))
            continue;
        h_netem_spec_t ns;
        char nerr[256];
        if (h_netem_parse(net, &ns, nerr, sizeof nerr) < 0 || ns.lat_us > 0 || ns.queue_ms != H_NETEM_QUEUE_MS ||
            ns.gso_off)
            continue;
        double us = h_jnum(r, "time_us", 0), bytes = h_jnum(r, "bytes", 0);
        int P = (int)h_jnum(r, "world", 0), N = (int)h_jnum(r, "nodes", 1), G = (int)h_jnum(r, "gpus_per_node", 1);
        if (!(us > 0) || !(bytes >= 4) || P < 2 || N < 1 || G < 1 || N * G < P) continue;
        char key[512];
        snprintf(key, sizeof key, "%s|%d|%d|%d|%g|%g|%.6g|%g|%g", label, P, N, G, h_jnum(r, "servers", 0),
                 h_jnum(r, "server_nodes", 0), ns.bits_per_s * ns.eff, h_jnum(r, "ps_partition_bytes", 0), bytes);
        s_pt_t *c = s_find(&pts, &npts, &cap, key);
        if (!c) { rc = err_set(ERR_NOMEM, "simulate: out of memory"); break; }
        if (!c->n) {
            snprintf(c->label, sizeof c->label, "%s", label);
            snprintf(c->engine, sizeof c->engine, "%s", eng);
            c->P = P, c->N = N, c->G = G;
            c->servers = (int)h_jnum(r, "servers", 0), c->server_nodes = (int)h_jnum(r, "server_nodes", 0);
            c->bps = ns.bits_per_s * ns.eff, c->part = h_jnum(r, "ps_partition_bytes", 0), c->bytes = bytes;
        }
        if (s_add(c, us) < 0) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    }
    double *rates = calloc((size_t)(npts ? npts : 1), sizeof *rates);
    if (rc == 0 && !rates) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    int nr = 0;
    for (int k = 0; k < npts && rc == 0; k++) {
        s_pt_t *c = &pts[k];
        double meas = s_median(c->ms, c->n), t;
        if ((rc = s_bench_sim(o, f, c, S_SRV_HI, &t)) < 0) break;
        double lo = log(S_SRV_LO), hi = log(S_SRV_HI), x = S_SRV_HI, thi = t;
        if (t < meas) {
            if ((rc = s_bench_sim(o, f, c, S_SRV_LO, &t)) < 0) break;
            if (t <= thi * (1 + 1e-9)) continue; /* no push the rate applies to (all inside a machine): no information */
            x = S_SRV_LO;                       /* still too fast at the lower bound: that bound */
            for (int it = 0; t >= meas && it < S_SRV_ITERS; it++) { /* invariant: sim(lo) >= meas > sim(hi) */
                double mid = (lo + hi) / 2, tm;
                if ((rc = s_bench_sim(o, f, c, exp(mid), &tm)) < 0) break;
                if (tm >= meas) lo = mid;
                else hi = mid;
                x = exp((lo + hi) / 2);
            }
            if (rc < 0) break;
        }
        rates[nr++] = x;
    }
    f->nsrv = nr;
    if (nr) {
        f->srv_Bps = s_median(rates, nr); /* sorted: the quartiles */
        f->srv_q1 = rates[(nr - 1) / 4], f->srv_q3 = rates[(3 * (nr - 1)) / 4];
    }
    for (int k = 0; k < npts; k++) free(pts[k].ms);
    free(pts), free(rates);
    return rc;
}

/* The |error| distribution of n configurations (what: which ones, "" for all), printed and, with json, a
 * check-summary line; err is sorted in place. */
static void s_summary(const char *what, double *err, int n, h_lines_t *lines, int json, const s_fit_t *fit)
{
    if (n < 1) {
        if (*what) printf("# %s: no configurations\n", what);
        return;
    }
    double md = s_median(err, n), p90 = err[(int)floor(0.9 * (n - 1))];
    int w10 = 0;
    for (int k = 0; k < n; k++) w10 += err[k] <= 0.10;
    printf("# %s%s%d configurations: |error| median %.1f%%, 90th percentile %.1f%%, worst %.1f%%; within 10%%: %d\n", what,
           *what ? ": " : "", n, 100 * md, 100 * p90, 100 * err[n - 1], w10);
    if (json) {
        json_t *b = json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:i, s:f, s:f}", "kind", "check-summary", "subset",
                              *what ? what : "all", "configs", n, "error_median", md, "error_p90", p90, "error_worst",
                              err[n - 1], "within_10pct", w10, "lat_us_fitted", fit->lat_s * 1e6, "shm_bps_fitted", fit->shm_bps);
        h_jmerge(b, json_pack("{s:f, s:i, s:f, s:f}", "server_Bps_fitted", fit->srv_Bps, "server_points", fit->nsrv,
                              "server_Bps_q1", fit->srv_q1, "server_Bps_q3", fit->srv_q3));
        h_lines_add(lines, b);
    }
}

/* the configuration's simulated step (ms); 0 or a code */
static int s_sim_point(const h_simulate_cfg_t *o, const s_fit_t *fit, s_pt_t *c)
{
    h_sim_point_t pt;
    CHECK(h_sim_point(&pt, c->model, c->device, (size_t)c->lb, c->bucket_mb, !c->overlap));
    int rc = 0, nb = pt.nb;
    const size_t *counts = pt.counts;
    const double *ready = pt.ready;
    double total = pt.total_s;
    h_engset_t es;
    void *store[H_MAX_ENGINES] = {0};
    if (rc == 0) rc = h_layout_engset_of_run(c->engine, c->label, c->servers, &o->es, &es, store);
    sched_t *s = rc == 0 ? calloc((size_t)nb, sizeof *s) : NULL;
    if (rc == 0 && !s) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    int built = 0;
    /* the emulated engines cut their shrunk tensors into their segments: at full size, shrink times larger */
    sched_env_t env = {.workers = c->P, .device = -1, .segmented = 1, .seg_bytes = es.seg_bytes, .gpus_per_node = c->G,
                       .size_scale = c->shrink};
    for (int b = 0; rc == 0 && b < nb; b++, built++)
        rc = h_engine_schedule(&es, c->engine, &env, counts[b], (size_t)c->esz, &s[b]);
    const engine_ops_t *ops = h_engine_find(c->engine);
    if (rc == 0) {
        /* the emulated cluster in real time: its shared memory is shrink x dilate times faster than the
         * shrunk, dilated links it sits beside; its TCP latency is reported divided by the dilation */
        h_sim_platform_t pl = {.nodes = c->N, .gpus_per_node = c->G, .server_nodes = c->server_nodes,
                               .inter_bps = c->bps, .intra_bps = fit->shm_bps * c->shrink * c->dilate,
                               .lat_s = fit->lat_s / c->dilate, .nic_lat_s = c->lat_us * 1e-6 * H_NETEM_LAT_HOPS / 2,
                               .framing = H_SIM_TCP_FRAMING, .timeout_s = o->timeout_s,
                               /* the host's server rate on shrunk tensors, time dilated: shrink x dilate faster */
                               .server_Bps = fit->srv_Bps * c->shrink * c->dilate, .server_cores = 1};
        double update = pt.update_s;
        h_sim_work_t w = {.nb = nb, .sched = s, .ready_s = ready, .total_s = total,
                          .update_s = ops && ops->serve && c->P > 1 ? 0 : update, .steps = 2, .max_groups = o->max_groups,
                          .min_stream = o->min_stream < 0 ? 0 : o->min_stream, /* the check replays every piece */
                          .fan_bundle = o->fan_bundle < 0 ? 0 : o->fan_bundle,
                          .cpu_reduce = ops && ops->serve};
        h_sim_result_t r;
        rc = h_sim_run(&pl, &w, &r);
        if (rc == 0) c->sim_ms = r.time_s * 1e3;
    }
    for (int b = 0; b < built; b++) sched_free(&s[b]);
    free(s);
    h_layout_free(store);
    h_sim_point_free(&pt);
    return rc;
}

int h_simulate_check(const h_simulate_cfg_t *o)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    if (o->nfiles < 1) return err_set(ERR_INVAL, "simulate --emulated: give the results files (FILE...)");
    CHECK(h_jread_files(o->nfiles, o->files, &objs, &n, &nbad, stderr));
    s_fit_t fit = {0};
    s_fit(objs, n, &fit);
    int frc = fit.nlat && fit.nshm ? s_fit_server(o, objs, n, &fit) : 0;
    if (frc < 0) {
        h_jfree_all(&objs, &n);
        return frc;
    }
    if (!fit.nlat || !fit.nshm) {
        h_jfree_all(&objs, &n);
        return err_set(ERR_INVAL, "simulate --emulated: the files need the host ring's benches across emulated machines "
                                  "(bench --net bw=RATE, e.g. results/net-bench.jsonl) and over shared memory "
                                  "(e.g. results/bench-tree-ring.jsonl) to fit the latency and the shared-memory path");
    }
    /* the check points: every file's runs, or --check-from's alone (the constants above come from every file) */
    h_jobj_t *cobj = objs;
    size_t cn = n, cbad = 0;
    if (o->check_from) {
        char *cf[1] = {(char *)o->check_from};
        cobj = NULL, cn = 0;
        if (h_jread_files(1, cf, &cobj, &cn, &cbad, stderr) < 0) {
            h_jfree_all(&objs, &n);
            return -1;
        }
    }
    s_pt_t *pts = NULL;
    int npts = 0, cap = 0, rc = 0;
    for (size_t i = 0; i < cn && rc == 0; i++) {
        const h_jobj_t *r = &cobj[i];
        if (!h_jflag(r, "emulated", 0) || strcmp(h_jstr(r, "mode", ""), "train") || h_jflag(r, "host_bound", 1) ||
            *h_jstr(r, "straggler", "") || !s_default_cc(r))
            continue;
        const char *net = h_jstr(r, "net", "");
        h_netem_spec_t ns;
        char nerr[256];
        if (!*net || h_netem_parse(net, &ns, nerr, sizeof nerr) < 0 || ns.queue_ms != H_NETEM_QUEUE_MS) continue;
        double ms = h_jnum(r, "emu_step_ms", 0);
        const char *model = h_jstr(r, "model", ""), *label = h_jstr(r, "engine_label", ""), *eng = h_jstr(r, "engine", "");
        if (!(ms > 0) || !workload_is_known(model) || !h_engine_find(eng)) continue;
        const char *gd = h_jstr(r, "grad_dtype", "f32");
        char key[512];
        snprintf(key, sizeof key, "%s|%s|%s|%g|%g|%g|%g|%g|%.6g|%g|%d|%g|%g|%g|%s|%g", label, model, h_jstr(r, "device", "v100"),
                 h_jnum(r, "world", 0), h_jnum(r, "nodes", 1), h_jnum(r, "gpus_per_node", 1), h_jnum(r, "servers", 0),
                 h_jnum(r, "server_nodes", 0), ns.bits_per_s * ns.eff, h_jnum(r, "local_batch", 64), h_jflag(r, "overlap", 1),
                 h_jnum(r, "bucket_mb", 25), h_jnum(r, "shrink", 1), h_jnum(r, "dilate", 1), gd, ns.lat_us);
        s_pt_t *c = s_find(&pts, &npts, &cap, key);
        if (!c) { rc = err_set(ERR_NOMEM, "simulate: out of memory"); break; }
        if (!c->n) {
            snprintf(c->label, sizeof c->label, "%s", label);
            snprintf(c->engine, sizeof c->engine, "%s", eng);
            snprintf(c->model, sizeof c->model, "%s", model);
            snprintf(c->device, sizeof c->device, "%s", h_jstr(r, "device", "v100"));
            c->N = (int)h_jnum(r, "nodes", 1), c->G = (int)h_jnum(r, "gpus_per_node", 1);
            c->P = (int)h_jnum(r, "world", 0); /* the workers; "ranks" adds the servers */
            c->servers = (int)h_jnum(r, "servers", 0), c->server_nodes = (int)h_jnum(r, "server_nodes", 0);
            c->coloc = h_engine_label_colocated(label);
            c->lb = (int)h_jnum(r, "local_batch", 64), c->overlap = h_jflag(r, "overlap", 1);
            c->bucket_mb = h_jnum(r, "bucket_mb", 25), c->shrink = h_jnum(r, "shrink", 1), c->dilate = h_jnum(r, "dilate", 1);
            c->lat_us = ns.lat_us;
            c->bps = ns.bits_per_s * ns.eff, c->esz = strcmp(gd, "f32") ? 2 : 4;
        }
        if (s_add(c, ms) < 0) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    }
    h_jfree_all(&objs, &n);
    if (o->check_from) h_jfree_all(&cobj, &cn);
    if (rc == 0 && o->check_from && npts == 0)
        rc = err_set(ERR_INVAL, "simulate --emulated --check-from %s: no emulated training run there to check (not host-bound, "
                                "default queue and congestion control, no --straggler)", o->check_from);
    if (rc) {
        for (int k = 0; k < npts; k++) free(pts[k].ms);
        free(pts);
        return rc;
    }
    printf("# syncbench simulate --emulated: %d emulated configurations (not host-bound, default queue and congestion "
           "control, no --straggler), each simulated without stragglers against the median of its launches\n", npts);
    printf("# fitted from the bench lines only: %.2f us a hop (the host ring over TCP between namespaces, %d worlds), a GPU's "
           "link inside a machine %.3g Gbit/s before shrink and dilation (the host ring over shared memory, %d worlds)\n",
           fit.lat_s * 1e6, fit.nlat, fit.shm_bps / 1e9, fit.nshm);
    if (fit.nsrv)
        printf("# fitted from the bench lines only: a PS server core %.1f MB/s of pushed bytes on this host (median of %d "
               "collective-alone points' own rates, quartiles %.1f to %.1f; before shrink and dilation)\n",
               fit.srv_Bps / 1e6, fit.nsrv, fit.srv_q1 / 1e6, fit.srv_q3 / 1e6);
    else printf("# no PS bench lines to fit a server rate from: servers simulated with no CPU time\n");
    printf("#  engine               model        GPUs  NxG    K  lat  launches  emulated(ms)  simulated(ms)   error\n");
    h_lines_t lines;
    h_lines_open(&lines, &o->out, "simulate");
    double *err = calloc((size_t)(npts ? npts : 1), sizeof *err), *errn = calloc((size_t)(npts ? npts : 1), sizeof *errn),
           *errl = calloc((size_t)(npts ? npts : 1), sizeof *errl);
    if (!err || !errn || !errl) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    int ne = 0, nn = 0, nl = 0;
    for (int k = 0; k < npts && rc == 0; k++) {
        s_pt_t *c = &pts[k];
        if (c->P < 1 || c->N * c->G < c->P) continue;
        rc = s_sim_point(o, &fit, c);
        if (rc < 0) break;
        double meas = s_median(c->ms, c->n), e = (c->sim_ms - meas) / meas;
        err[ne++] = fabs(e);
        if (c->lat_us > 0) errl[nl++] = fabs(e);
        else errn[nn++] = fabs(e);
        printf("  %-20s %-12s %5d %3dx%-3d %2d %4g %6d %13.1f %14.1f %+7.1f%%\n", c->label, c->model, c->P, c->N, c->G,
               c->server_nodes, c->lat_us, c->n, meas, c->sim_ms, 100 * e);
        fflush(stdout);
        if (o->out.json)
            h_lines_add(&lines, json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:i, "
                                          "s:f, s:f, s:f}",
                                          "kind", "check", "engine", c->engine, "engine_label", c->label, "model", c->model,
                                          "gpus", c->P, "nodes", c->N, "gpus_per_node", c->G, "server_nodes", c->server_nodes,
                                          "launches", c->n, "emulated_ms", meas, "simulated_ms", c->sim_ms, "error", e,
                                          "inter_bps", c->bps, "shrink", c->shrink, "dilate", c->dilate, "local_batch", c->lb,
                                          "lat_us", c->lat_us, "lat_us_fitted", fit.lat_s * 1e6, "shm_bps_fitted", fit.shm_bps));
    }
    if (rc == 0) {
        s_summary("", err, ne, &lines, o->out.json != NULL, &fit);
        s_summary("without lat=", errn, nn, &lines, o->out.json != NULL, &fit);
        s_summary("with lat=", errl, nl, &lines, o->out.json != NULL, &fit);
    }
    int wrc = h_lines_close(&lines, "the simulate lines");
    for (int k = 0; k < npts; k++) free(pts[k].ms);
    free(pts), free(err), free(errn), free(errl);
    return rc < 0 ? rc : wrc;
}
