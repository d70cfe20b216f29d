/* simulate_train.c: `harness simulate --model M` (simulate.h): training steps of a real model's profile
 * on the simulated cluster, for each engine or layout and each machine count: every GPU's forward and
 * backward from the profile and device (wl_schedule), its gradients in DDP's buckets (wl_buckets), each
 * bucket's allreduce the engine's own declared schedule replayed on SimGrid (sim.h) while the backward
 * goes on, the optimizer where the engine runs it; a per-GPU compute spread for stragglers. Printed like
 * train (step, samples/s, speedup and efficiency over one device) and written as "mode":"simulate" lines. */
#include "harness/simulate/simulate.h"
#include "harness/simulate/sim.h"
#include "harness/registry/layouts.h"
#include "core/err.h"
#include "core/sched.h"
#include "trainer/rng.h"
#include "trainer/workload.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --spread DIST: each GPU's compute time is multiplied by a factor fixed for the run. Default from
 * Sinha et al., "Not All GPUs Are Created Equal: Characterizing Variability in Large-Scale,
 * Accelerator-Rich Systems" (SC'22): same-SKU GPUs of Summit, Vortex, Frontera, Longhorn and Corona
 * differ by 8% on average in performance (up to 22%); read here as a factor uniform in [1, 1.08]. */
#define S_SPREAD_DEFAULT "uniform:0.08"

static int s_spread_parse(const char *spec, char *kind, size_t klen, double *param)
{
    const char *s = spec && *spec ? spec : S_SPREAD_DEFAULT;
    if (!strcmp(s, "none")) {
        snprintf(kind, klen, "none");
        *param = 0;
        return 0;
    }
    const char *c = strchr(s, ':');
    char *end;
    double v = c ? strtod(c + 1, &end) : -1;
    if (!c || end == c + 1 || *end || !(v >= 0) || v > 1 ||
        (strncmp(s, "uniform:", 8) && strncmp(s, "normal:", 7)))
        return err_set(ERR_INVAL, "--spread '%s': none, uniform:R (a factor in [1, 1 + R]) or normal:S (mean 1, "
                                  "standard deviation S, at least 0.5), R and S in [0, 1]", s);
    snprintf(kind, klen, "%.*s", (int)(c - s), s);
    *param = v;
    return 0;
}

static void s_factors(const char *kind, double param, uint64_t seed, int P, double *f)
{
    rng_t r;
    rng_seed(&r, seed, 0x5eed5);
    for (int i = 0; i < P; i++) {
        double u = (double)(rng_next(&r) >> 11) * (1.0 / 9007199254740992.0);
        if (!strcmp(kind, "uniform")) f[i] = 1 + param * u;
        else if (!strcmp(kind, "normal")) {
            double u2 = (double)(rng_next(&r) >> 11) * (1.0 / 9007199254740992.0);
            double z = sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * u2);
            f[i] = 1 + param * z;
            if (f[i] < 0.5) f[i] = 0.5;
        } else f[i] = 1;
    }
}

/* One engine configuration to run: an engine named on the command line, or a layout. */
typedef struct {
    char label[48];
    const char *engine;
    const h_layout_t *layout;     /* NULL: the engine with the command line's options */
} s_conf_t;

static int s_one(const h_simulate_cfg_t *o, const s_conf_t *c, const h_sim_platform_t *base, const workload_t *wl,
                 const wl_device_t *dev, size_t lb, int nb, const size_t *counts, const double *ready, double total,
                 double update, double one_sps, h_lines_t *lines, double *speedup_out, int *ps_out)
{
    h_sim_platform_t pl = *base;
    int N = pl.nodes, G = pl.gpus_per_node, P = N * G;
    h_engset_t es = o->es;
    void *store[H_MAX_ENGINES] = {0};
    if (c->layout) {
        CHECK(h_layout_engset(c->layout, N, &o->es, &es, store));
        pl.server_nodes = h_layout_server_nodes(c->layout, N);
    }
    const engine_ops_t *ops = h_engine_find(c->engine);
    int servers_update = ops && ops->serve; /* an engine with servers updates there, not on the GPUs */
    *ps_out = servers_update, *speedup_out = -1;
    sched_t *s = calloc((size_t)nb, sizeof *s);
    double *f = calloc((size_t)P, sizeof *f);
    int rc = s && f ? 0 : err_set(ERR_NOMEM, "simulate: out of memory");
    int built = 0;
    sched_env_t env = {.workers = P, .device = -1, .segmented = 1, .seg_bytes = es.seg_bytes, .gpus_per_node = G};
    for (int b = 0; rc == 0 && b < nb; b++, built++) rc = h_engine_schedule(&es, c->engine, &env, counts[b], 4, &s[b]);
    char kind[16];
    double param = 0;
    if (rc == 0) rc = s_spread_parse(o->spread, kind, sizeof kind, &param);
    if (rc == 0) s_factors(kind, param, o->seed, P, f);
    char label[112];
    snprintf(label, sizeof label, "%.47s", c->label);
    /* an engine whose options change its algorithm (the ring's --ring-hier) says so, as its runs' labels do */
    if (rc == 0 && !c->layout && strcmp(s[nb - 1].algo, c->engine) && strcmp(s[nb - 1].algo, "oneshot"))
        snprintf(label, sizeof label, "%.40s-%.15s", c->engine, s[nb - 1].algo);
    /* answers ahead of the pushes (the PS's async and SSP modes) say so */
    if (rc == 0 && s[0].stale < 0) snprintf(label + strlen(label), sizeof label - strlen(label), "-async");
    else if (rc == 0 && s[0].stale > 0) snprintf(label + strlen(label), sizeof label - strlen(label), "-ssp%d", s[0].stale);
    h_sim_result_t r;
    if (rc == 0) {
        h_sim_work_t w = {.nb = nb, .sched = s, .ready_s = ready, .total_s = total,
                          .update_s = servers_update && P > 1 ? 0 : update, .steps = o->steps, .factor = f,
                          .max_groups = o->max_groups, .min_stream = o->min_stream, .fan_bundle = o->fan_bundle,
                          .join = o->join, .cpu_reduce = servers_update};
        rc = h_sim_run(&pl, &w, &r);
    }
    char fab[64];
    h_sim_fabric_name(&pl, fab, sizeof fab);
    if (rc == 0) {
        const char *busy = r.link_is_nic == 2 ? "up" : r.link_is_nic ? "nic" : "gpu";
        double sps = (double)P * (double)lb / r.time_s, speedup = sps / one_sps;
        *speedup_out = speedup;
        printf("  %-15s %6d %4dx%-4d %9.2f %11.1f %8.2f %6.1f%% %9.1f %5.0f%% %-4s %10llu %3d %3d %7.1f\n", label, P, N, G,
               r.time_s * 1e3, sps, speedup, 100 * speedup / P, (double)r.nic_max_bytes / 1048576.0, 100 * r.link_util,
               busy, (unsigned long long)r.comms, r.merge > 1 ? r.merge : r.stream, r.bundle, r.wall_s);
        if (r.pool_unequal > 0)
            printf("  # %s: server machines not merged (--sim-bundles %d): in bucket %d its servers hold unequal shares, "
                   "which a merged replay would not share as they run (results/sim-reduction-pools)\n", label,
                   o->fan_bundle, r.pool_unequal - 1);
        fflush(stdout);
        if (o->out.json) {
            json_t *each = json_array();
            for (int k = 0; k < r.steps; k++) json_array_append_new(each, json_real(r.step_s[k] * 1e3));
            h_lines_add(lines, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, "
                                         "s:o, s:f, s:f, s:f, s:I, s:f, s:s, s:I, s:i, s:i, s:f, s:f, s:I, s:f, s:f, s:f, s:f, "
                                         "s:s, s:f, s:I, s:s, s:i, s:f, s:f, s:i, s:i, s:i, s:i, s:i, s:I}",
                                         "kind", "train", "engine", c->engine, "engine_label", label, "model", wl->name,
                                         "device", dev->name, "gpus", P, "world", s[0].world, "nodes", N,
                                         "gpus_per_node", G, "server_nodes", pl.server_nodes, "batch_per_gpu", (int)lb,
                                         "bucket_mb", o->bucket_mb, "step_ms", r.time_s * 1e3, "samples_per_s", sps,
                                         "speedup", speedup, "step_ms_each", each, "efficiency", speedup / P,
                                         "compute_ms", total * 1e3, "update_ms", update * 1e3,
                                         "nic_max_bytes", (json_int_t)r.nic_max_bytes, "link_util", r.link_util,
                                         "busiest_link", busy, "comms", (json_int_t)r.comms,
                                         "steps", r.steps, "merge", r.merge, "sim_wall_s", r.wall_s, "sim_rss_mb", r.rss_mb, "actors", (json_int_t)r.actors,
                                         "inter_bps", pl.inter_bps, "intra_bps", pl.intra_bps, "lat_us", pl.lat_s * 1e6,
                                         "framing", pl.framing, "spread", kind, "spread_param", param,
                                         "seed", (json_int_t)o->seed, "fabric", fab, "rack", pl.rack,
                                         "oversub", pl.oversub, "server_Bps", pl.server_Bps, "server_cores", pl.server_cores, "stream", r.stream,
                                         "bundle", r.bundle, "pool", r.pool, "join", o->join > 0 && r.stream > 1,
                                         "joined", (json_int_t)r.joined));
        }
    }
    for (int b = 0; b < built; b++) sched_free(&s[b]);
    free(s);
    free(f);
    h_layout_free(store);
    return rc;
}

int h_sim_point(h_sim_point_t *p, const char *model, const char *device, size_t lb, double bucket_mb, int no_overlap)
{
    memset(p, 0, sizeof *p);
    CHECK(workload_load(&p->wl, model));
    int rc = wl_device_resolve(device ? device : "v100", p->wl, &p->dev);
    size_t n = p->wl->ntensors, *ends = calloc(n, sizeof *ends);
    double *tr = calloc(n, sizeof *tr);
    p->counts = calloc(n, sizeof *p->counts);
    p->ready = calloc(n, sizeof *p->ready);
    if (rc == 0 && (!ends || !tr || !p->counts || !p->ready)) rc = err_set(ERR_NOMEM, "simulate: out of memory");
    size_t cap = (size_t)((bucket_mb > 0 ? bucket_mb : 25) * 1048576.0), first = cap < (1u << 20) ? cap : (1u << 20);
    p->nb = rc == 0 ? wl_buckets(p->wl, 1, first, cap, ends) : 0;
    if (rc == 0 && p->nb < 0) rc = p->nb;
    if (rc == 0) {
        wl_schedule(p->wl, &p->dev, lb, 1, &p->fwd_s, tr, &p->total_s);
        size_t begin = 0;
        for (int b = 0; b < p->nb; b++) {
            for (size_t i = begin; i < ends[b]; i++) p->counts[b] += p->wl->t[i].numel;
            p->ready[b] = no_overlap ? p->total_s : tr[ends[b] - 1];
            begin = ends[b];
        }
        p->update_s = wl_update_s(&p->dev, p->wl->params, 20, 1);
    }
    free(ends), free(tr);
    if (rc < 0) h_sim_point_free(p);
    return rc;
}

void h_sim_point_free(h_sim_point_t *p)
{
    free(p->counts), free(p->ready);
    workload_destroy(&p->wl);
    memset(p, 0, sizeof *p);
}

/* A reduction's setting in words for the header: v < 0 auto (every UNIT while a run stays under EXACT
 * communications, else AUTO, written with FMT), 0 every UNIT, else v written with FMT. */
static void s_reduction_words(char *out, size_t len, int v, const char *unit, long exact, int autov, const char *fmt)
{
    char n[32];
    snprintf(n, sizeof n, fmt, v < 0 ? autov : v);
    if (v < 0)
        snprintf(out, len, "every %s up to %ld %s communications a run, else %s", unit,
                 exact >= 1000000 ? exact / 1000000 : exact / 1000, exact >= 1000000 ? "M" : "k", n);
    else if (v == 0) snprintf(out, len, "every %s", unit);
    else snprintf(out, len, "%s", n);
}

/* The answer the table ends with where it compares allreduces with PS layouts: the PS layouts named once, then
 * a verdict a cluster size (h_verdict_print). */
static void s_verdicts(const s_conf_t *confs, int nc, const int *ps, double (*sp)[H_SIM_MAX_SCALE], const int *scal,
                       int ns, const char *model, const h_sim_platform_t *base)
{
    int nps = 0;
    for (int c = 0; c < nc; c++) nps += ps[c] != 0;
    if (!nps || nps == nc) return;
    printf("# PS layouts:");
    for (int c = 0; c < nc; c++)
        if (ps[c]) printf("\n#   %-22s %s", confs[c].label, confs[c].layout ? confs[c].layout->about : "the engine with the command line's options");
    printf("\n");
    char net[160], fab[64];
    h_sim_fabric_name(base, fab, sizeof fab);
    snprintf(net, sizeof net, "%.4g Gbit/s, %.3g us a hop%s%s", base->inter_bps / 1e9, base->lat_s * 1e6,
             strcmp(fab, "star") ? ", " : "", strcmp(fab, "star") ? fab : "");
    for (int k = 0; k < ns; k++) {
        h_verdict_row_t rows[16];
        int n = 0;
        for (int c = 0; c < nc; c++)
            if (sp[c][k] > 0) rows[n++] = (h_verdict_row_t){.label = confs[c].label, .ps = ps[c], .speedup = sp[c][k]};
        h_verdict_print("simulated", model, scal[k], base->gpus_per_node, net, rows, n);
    }
}

int h_simulate_train(const h_simulate_cfg_t *o, const h_sim_platform_t *base)
{
    size_t lb = o->batch_per_gpu > 0 ? (size_t)o->batch_per_gpu : 64;
    double bmb = o->bucket_mb > 0 ? o->bucket_mb : 25;
    h_sim_point_t pt;
    CHECK(h_sim_point(&pt, o->model, o->device, lb, bmb, o->no_overlap));
    int rc = 0, nb = pt.nb;
    workload_t *wl = pt.wl;
    const wl_device_t dev = pt.dev;
    const size_t *counts = pt.counts;
    const double *ready = pt.ready;
    double fwd = pt.fwd_s, total = pt.total_s, update = pt.update_s, one_sps = (double)lb / (total + update);
    s_conf_t confs[16];
    int nc = 0;
    if (o->engine_all)
        for (int i = 0; i < h_layout_count() && nc < 16; i++, nc++) {
            const h_layout_t *L = h_layout_at(i);
            confs[nc] = (s_conf_t){.engine = L->engine, .layout = L};
            snprintf(confs[nc].label, sizeof confs[nc].label, "%s", L->label);
        }
    for (int i = 0; i < o->nengines && nc < 16; i++, nc++) { /* an engine with the command line's options, or a layout */
        const h_layout_t *L = h_engine_find(o->engines[i]) ? NULL : h_layout_find(o->engines[i]);
        confs[nc] = (s_conf_t){.engine = L ? L->engine : o->engines[i], .layout = L};
        snprintf(confs[nc].label, sizeof confs[nc].label, "%s", o->engines[i]);
    }
    char kind[16];
    double param;
    if (rc == 0) rc = s_spread_parse(o->spread, kind, sizeof kind, &param);
    if (rc == 0 && !nc) rc = err_set(ERR_INVAL, "simulate: no engine (--engine E[,E...] or --engine all)");
    if (rc == 0) {
        printf("# %s (%zu parameters in %d buckets of %.3g MiB, DDP's rule), %s at %.1f samples/s (%s), batch %zu a GPU: "
               "forward %.2f ms, backward %.2f ms, update %.2f ms on the GPU (allreduce engines; a PS's servers update)\n",
               wl->name, wl->params, nb, bmb, dev.name, dev.samples_per_s, dev.basis, lb, fwd * 1e3, (total - fwd) * 1e3,
               update * 1e3);
        char grp[128], str[128];
        s_reduction_words(grp, sizeof grp, o->max_groups, "step", H_SIM_EXACT_COMMS, H_SIM_AUTO_GROUPS, "at most %d groups");
        s_reduction_words(str, sizeof str, o->min_stream, "piece", H_SIM_EXACT_FLOW, H_SIM_AUTO_STREAM, "runs of %d");
        char fan[96];
        if (o->fan_bundle < 0) snprintf(fan, sizeof fan, "each transfer up to %d k communications a run, else a round a machine pair",
                                        H_SIM_EXACT_FLOW / 1000);
        else if (o->fan_bundle == 0) snprintf(fan, sizeof fan, "each transfer");
        else if (o->fan_bundle == 1) snprintf(fan, sizeof fan, "a round a machine pair");
        else snprintf(fan, sizeof fan, "a round a machine pair, server machines merged %d to one", o->fan_bundle);
        printf("# one GPU alone: %.1f samples/s; %d steps a run; stragglers: --spread %s (seed %llu); a ring's steps: %s "
               "(--sim-groups; K: the most steps in a group); a tree's or a PS's pieces: %s (--sim-streams; K: the most "
               "pieces in a stream); a PS's fan-outs to other machines: %s (--sim-bundles; Q: the most transfers in a "
               "bundle)\n",
               one_sps, o->steps, o->spread ? o->spread : S_SPREAD_DEFAULT, (unsigned long long)o->seed, grp, str, fan);
        printf("#  engine            GPUs  NxG     step(ms)   samples/s  speedup   eff.  NIC MiB/step busiest    comms   "
               "K   Q   sim(s)\n");
    }
    h_lines_t lines;
    h_lines_open(&lines, &o->out, "simulate");
    int scal[H_SIM_MAX_SCALE], ns = o->nscaling;
    if (ns) memcpy(scal, o->scaling, sizeof scal);
    else scal[0] = base->nodes, ns = 1;
    double sp[16][H_SIM_MAX_SCALE];
    int ps[16];
    for (int c = 0; rc == 0 && c < nc; c++)
        for (int k = 0; rc == 0 && k < ns; k++) {
            h_sim_platform_t pl = *base;
            pl.nodes = scal[k];
            rc = s_one(o, &confs[c], &pl, wl, &dev, lb, nb, counts, ready, total, update, one_sps, &lines, &sp[c][k], &ps[c]);
        }
    if (rc == 0) s_verdicts(confs, nc, ps, sp, scal, ns, wl->name, base);
    int wrc = h_lines_close(&lines, "the simulate lines");
    h_sim_point_free(&pt);
    return rc < 0 ? rc : wrc;
}
