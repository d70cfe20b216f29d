/* report.c: `harness report FILE...`: reads JSON-lines results (bench, train and model lines) into
 * rows (bench: the median of repeated runs of one point; train: the latest line of one configuration;
 * model: every prediction) and prints them side by side: as text (bench: busbw per size per engine
 * and world; train: samples/s, step times, memory balance and scaling efficiency; model: predicted
 * against measured), or as JSON, Markdown or CSV tables of the same rows. Figures: plot.c. Malformed
 * lines are reported with file:line and skipped; without gnuplot the tables are still printed. */
#include "harness/report/report.h"
#include "harness/report/report_int.h"
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/record/jsonl.h"
#include "harness/report/plot.h"
#include "harness/record/stats.h"
#include "harness/record/traffic.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_cmp_bench(const void *a, const void *b)
{
    const h_rbench_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    if (c) return c;
    if (x->world != y->world) return x->world < y->world ? -1 : 1;
    if (x->bytes != y->bytes) return (x->bytes > y->bytes) - (x->bytes < y->bytes);
    return strcmp(x->cfg, y->cfg);
}

static int s_cmp_train(const void *a, const void *b)
{
    const h_rtrain_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    if (c) return c;
    if (x->world != y->world) return (x->world > y->world) - (x->world < y->world);
    return strcmp(x->cfg, y->cfg);
}

static int s_cmp_model(const void *a, const void *b)
{
    const h_rmodel_t *x = a, *y = b;
    int c = strcmp(x->what, y->what);
    if (c) return c;
    c = strcmp(x->label, y->label);
    if (c) return c;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return (x->world > y->world) - (x->world < y->world);
}

/* Median of the kept runs of one point; NAN when one of them has no value. */
static double s_rep_median(const double *rep, size_t nrep)
{
    size_t nr = nrep < H_REPS ? nrep : H_REPS;
    double v[H_REPS];
    for (size_t i = 0; i < nr; i++) {
        if (isnan(rep[i])) return NAN;
        v[i] = rep[i];
    }
    return h_median(v, nr);
}

/* A bench line joins its point (label, world, bytes): the point's values are the medians of its runs
 * (this VM's run-to-run spread is wide). */
static void s_add_bench(h_rdata_t *d, const h_jobj_t *o, const char *label, int world, char *cfg, FILE *diag)
{
    double bytes = h_jnum(o, "bytes", NAN), busbw = h_jnum(o, "busbw_gbs", NAN);
    if (world < 1 || !(bytes >= 0) || !(busbw >= 0)) {
        fprintf(diag, "%s: bench line without world, bytes or busbw_gbs: skipped\n", o->src);
        free(cfg);
        return;
    }
    size_t k = 0;
    while (k < d->nb && !(d->b[k].bytes == bytes && !strcmp(d->b[k].cfg, cfg))) k++;
    if (k == d->nb) d->nb++;
    h_rbench_t *b = &d->b[k];
    if (b->cfg) free(cfg);
    else b->cfg = cfg;
    b->obj = o;
    snprintf(b->label, sizeof b->label, "%s", label);
    snprintf(b->net, sizeof b->net, "%s", h_jstr(o, "net", ""));
    if (!strcmp(b->net, "none")) b->net[0] = '\0';
    b->world = world;
    b->bytes = bytes;
    b->servers = (int)h_jnum(o, "servers", 0);
    b->wrong += h_jnum(o, "wrong", 0);
    size_t slot = b->nrep % H_REPS;      /* beyond H_REPS the latest H_REPS count */
    b->rep_t[slot] = h_jnum(o, "time_us", NAN);
    b->rep_bw[slot] = busbw;
    b->rep_ag[slot] = h_jnum(o, "algbw_gbs", NAN);
    b->nhb += h_jflag(o, "host_bound", 0) == 1;
    b->nrep++;
    b->time_us = s_rep_median(b->rep_t, b->nrep);
    b->busbw = s_rep_median(b->rep_bw, b->nrep);
    b->algbw = s_rep_median(b->rep_ag, b->nrep);
    const h_jfield_t *tr = h_jget(o, "traffic_bytes");
    b->traffic = tr && tr->type == HJ_ARR && tr->n ? tr->arr : NULL;
    b->ntraffic = b->traffic ? tr->n : 0;
    b->steps = h_jnum(o, "iters", 0) + h_jnum(o, "warmup", 0);
}

/* A train line replaces an earlier one of the same (label, world). */
static void s_add_train(h_rdata_t *d, const h_jobj_t *o, const char *label, int world, char *cfg, FILE *diag)
{
    double sps = h_jnum(o, "samples_per_s", NAN);
    if (world < 1 || !(sps >= 0)) {
        fprintf(diag, "%s: train line without world or samples_per_s: skipped\n", o->src);
        free(cfg);
        return;
    }
    size_t k = 0;
    while (k < d->nt && strcmp(d->t[k].cfg, cfg)) k++;
    if (k == d->nt) d->nt++;
    h_rtrain_t *t = &d->t[k];
    if (t->cfg) free(cfg);
    else t->cfg = cfg;
    t->obj = o;
    snprintf(t->label, sizeof t->label, "%s", label);
    snprintf(t->src, sizeof t->src, "%s", o->src);
    t->world = world;
    t->servers = (int)h_jnum(o, "servers", 0);
    t->rep_sps[t->nrep % H_REPS] = sps;   /* beyond H_REPS the latest H_REPS count */
    size_t nr = t->nrep + 1 < H_REPS ? t->nrep + 1 : H_REPS;
    t->sps = s_rep_median(t->rep_sps, t->nrep + 1);
    t->sps_min = t->sps_max = t->rep_sps[0];
    for (size_t r = 1; r < nr; r++) {
        t->sps_min = fmin(t->sps_min, t->rep_sps[r]);
        t->sps_max = fmax(t->sps_max, t->rep_sps[r]);
    }
    t->step50 = h_jnum(o, "step_ms_p50", NAN);
    t->step99 = h_jnum(o, "step_ms_p99", NAN);
    t->comm50 = h_jnum(o, "comm_ms_p50", NAN);
    t->wait50 = h_jnum(o, "wait_ms_p50", NAN);
    t->imb = h_jnum(o, "mem_imbalance", NAN);
    t->eimb = h_jnum(o, "mem_engine_imbalance", NAN);
    t->speedup = h_jnum(o, "speedup", NAN);
    t->eff_emu = h_jflag(o, "emulated", 0) ? h_jnum(o, "scaling_efficiency", NAN) : NAN;
    t->nhb += h_jflag(o, "host_bound", 0) == 1;
    const h_jfield_t *m = h_jget(o, "mem_peak_bytes");
    t->mem = m && m->type == HJ_ARR ? m->arr : NULL;
    t->nmem = m && m->type == HJ_ARR ? m->n : 0;
    const h_jfield_t *em = h_jget(o, "mem_engine_bytes"), *tr = h_jget(o, "traffic_bytes");
    t->emem = em && em->type == HJ_ARR && em->n ? em->arr : NULL;
    t->nemem = t->emem ? em->n : 0;
    t->traffic = tr && tr->type == HJ_ARR && tr->n ? tr->arr : NULL;
    t->ntraffic = t->traffic ? tr->n : 0;
    /* every step run: files with timed_steps count the warm-up in steps; older ones did not */
    t->steps = h_jget(o, "timed_steps") ? h_jnum(o, "steps", 0) : h_jnum(o, "steps", 0) + h_jnum(o, "warmup_steps", 0);
    t->nrep++;
}

/* A line of a kind with no table here joins its kind's count ("mode/kind"; past H_OTHER - 1 kinds, "other"). */
static void s_add_other(h_rdata_t *d, const h_jobj_t *o)
{
    char kind[48];
    const char *mode = h_jstr(o, "mode", ""), *k = h_jstr(o, "kind", "");
    snprintf(kind, sizeof kind, "%s%s%s", mode, k[0] ? "/" : "", k);
    for (int pass = 0; pass < 2; pass++) {
        size_t i = 0;
        while (i < d->nother && strcmp(d->other[i].kind, kind)) i++;
        if (i == d->nother && d->nother >= H_OTHER - 1 && !pass) {
            snprintf(kind, sizeof kind, "other");
            continue;
        }
        if (i == d->nother) snprintf(d->other[d->nother++].kind, sizeof d->other[0].kind, "%s", kind);
        d->other[i].n++;
        d->nother_lines++;
        return;
    }
}

static void s_add_model(h_rdata_t *d, const h_jobj_t *o, const char *label, int world, FILE *diag)
{
    if (!strcmp(h_jstr(o, "what", ""), "fit")) return;   /* the probe's parameters: no point */
    if (h_jget(o, "kind")) {   /* `harness model --model`'s extrapolation, check and errors: the paper and gen-docs
                                * read them (paper/emulated.py); no table row here */
        s_add_other(d, o);
        return;
    }
    double pred = h_jnum(o, "pred_us", NAN);
    if (world < 1 || !(pred >= 0)) {
        fprintf(diag, "%s: model line without world or pred_us: skipped\n", o->src);
        return;
    }
    h_rmodel_t *m = &d->m[d->nm++];
    snprintf(m->label, sizeof m->label, "%s", label);
    snprintf(m->what, sizeof m->what, "%s", h_jstr(o, "what", "bench"));
    m->world = world;
    m->bytes = h_jnum(o, "bytes", 0);
    m->pred_us = pred;
    m->meas_us = h_jnum(o, "meas_us", -1);
}

/* Every line into its kind's rows, then each kind sorted. Other modes (simulate, future ones) are counted. */
static int s_collect(h_jobj_t *objs, size_t n, h_rdata_t *d, const char *run_label, FILE *diag)
{
    d->b = calloc(n ? n : 1, sizeof *d->b);
    d->t = calloc(n ? n : 1, sizeof *d->t);
    d->m = calloc(n ? n : 1, sizeof *d->m);
    if (!d->b || !d->t || !d->m) return err_set(ERR_NOMEM, "report: out of memory for %zu results", n);
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *o = &objs[i];
        const char *mode = h_jstr(o, "mode", "");
        if (run_label && strcmp(h_jstr(o, "label", ""), run_label)) continue;
        char label[H_LABEL];
        h_report_row_label(o, label, sizeof label);
        int world = (int)h_jnum(o, "world", 0);
        int bench = !strcmp(mode, "bench"), train = !strcmp(mode, "train");
        char *cfg = bench || train ? h_report_cfg_key(o) : NULL;
        if ((bench || train) && !cfg) return err_set(ERR_NOMEM, "report: out of memory");
        if (bench) s_add_bench(d, o, label, world, cfg, diag);
        else if (train) s_add_train(d, o, label, world, cfg, diag);
        else if (!strcmp(mode, "model")) s_add_model(d, o, label, world, diag);
        else s_add_other(d, o);
    }
    CHECK(h_report_unique_labels(d));
    qsort(d->b, d->nb, sizeof *d->b, s_cmp_bench);
    qsort(d->t, d->nt, sizeof *d->t, s_cmp_train);
    qsort(d->m, d->nm, sizeof *d->m, s_cmp_model);
    return 0;
}

double h_report_efficiency(const h_rdata_t *d, size_t i, int *base)
{
    const h_rtrain_t *t = &d->t[i];
    const h_rtrain_t *ref = NULL;
    if (!isnan(t->eff_emu)) {
        *base = 1;
        return t->eff_emu;
    }
    for (size_t k = 0; k < d->nt; k++)
        if (!strcmp(d->t[k].label, t->label) && (!ref || d->t[k].world < ref->world)) ref = &d->t[k];
    *base = ref ? ref->world : 0;
    if (!ref || ref == t || ref->sps <= 0) return ref == t ? 1.0 : NAN;
    return (t->sps / t->world) / (ref->sps / ref->world);
}

/* ---- text ---------------------------------------------------------------------------------------- */

static void s_fmt_bytes(double b, char *out, size_t len)
{
    if (b >= 1073741824.0 && fmod(b, 1073741824.0) == 0) snprintf(out, len, "%.0fG", b / 1073741824.0);
    else if (b >= 1048576.0 && fmod(b, 1048576.0) == 0) snprintf(out, len, "%.0fM", b / 1048576.0);
    else if (b >= 1024.0 && fmod(b, 1024.0) == 0) snprintf(out, len, "%.0fK", b / 1024.0);
    else snprintf(out, len, "%.0f", b);
}

static const h_rbench_t *s_bench_find(const h_rdata_t *d, const char *label, int world, double bytes)
{
    for (size_t i = 0; i < d->nb; i++)
        if (d->b[i].world == world && d->b[i].bytes == bytes && !strcmp(d->b[i].label, label)) return &d->b[i];
    return NULL;
}

/* The distinct sizes of the bench rows, ascending, into sizes[] (room for nb); returns how many. */
static size_t s_bench_sizes(const h_rdata_t *d, double *sizes)
{
    for (size_t i = 0; i < d->nb; i++) sizes[i] = d->b[i].bytes;
    qsort(sizes, d->nb, sizeof *sizes, h_cmp_double);
    size_t u = 0;
    for (size_t i = 0; i < d->nb; i++)
        if (!u || sizes[u - 1] != sizes[i]) sizes[u++] = sizes[i];
    return u;
}

/* The text tables' label column: as wide as the widest row label (at least 14), set by s_text. */
static int s_lwid = 14;

static int s_lw(const h_rdata_t *d)
{
    size_t w = 14;
    for (size_t i = 0; i < d->nb; i++) w = strlen(d->b[i].label) > w ? strlen(d->b[i].label) : w;
    for (size_t i = 0; i < d->nt; i++) w = strlen(d->t[i].label) > w ? strlen(d->t[i].label) : w;
    for (size_t i = 0; i < d->nm; i++) w = strlen(d->m[i].label) > w ? strlen(d->m[i].label) : w;
    return (int)w;
}

/* busbw by size, one column per distinct (label, world) of the sorted rows */
static int s_text_bench(FILE *out, const h_rdata_t *d)
{
    const h_rbench_t **cols = calloc(d->nb, sizeof *cols);
    double *sizes = calloc(d->nb, sizeof *sizes);
    if (!cols || !sizes) {
        free(cols);
        free(sizes);
        return err_set(ERR_NOMEM, "report: out of memory");
    }
    size_t nc = 0, ns = s_bench_sizes(d, sizes);
    int hb = 0;
    for (size_t i = 0; i < d->nb; i++)
        if (!nc || cols[nc - 1]->world != d->b[i].world || strcmp(cols[nc - 1]->label, d->b[i].label)) cols[nc++] = &d->b[i];
    int cw = 12; /* every column as wide as the widest engine@world */
    for (size_t c = 0; c < nc; c++) {
        int l = (int)strlen(cols[c]->label) + snprintf(NULL, 0, "@%d", cols[c]->world);
        cw = l > cw ? l : cw;
    }
    fprintf(out, "#\n# bench: busbw (GB/s) by message size; one column per engine@world\n# %10s", "size");
    for (size_t c = 0; c < nc; c++) {
        char h[H_LABEL + 16];
        snprintf(h, sizeof h, "%s@%d", cols[c]->label, cols[c]->world);
        fprintf(out, " %*s", cw, h);
    }
    fprintf(out, "\n");
    for (size_t s = 0; s < ns; s++) {
        char sz[32];
        s_fmt_bytes(sizes[s], sz, sizeof sz);
        fprintf(out, "  %10s", sz);
        for (size_t c = 0; c < nc; c++) {
            const h_rbench_t *b = s_bench_find(d, cols[c]->label, cols[c]->world, sizes[s]);
            if (b) fprintf(out, " %*.3f%s", b->nhb ? cw - 1 : cw, b->busbw, b->nhb ? "!" : "");
            else fprintf(out, " %*s", cw, "-");
            hb |= b && b->nhb;
        }
        fprintf(out, "\n");
    }
    if (hb) fprintf(out, "# ! host-bound: in some of its runs this machine's CPUs were the limit (the figure measures the host, not the engine)\n");
    free(cols);
    free(sizes);
    return 0;
}

static void s_text_train(FILE *out, const h_rdata_t *d)
{
    int several = 0, approx = 0, hb = 0, emu = 0;
    for (size_t i = 1; i < d->nt; i++) several |= !strcmp(d->t[i].label, d->t[0].label) || d->t[i].world != d->t[0].world;
    for (size_t i = 0; i < d->nt; i++) emu |= !isnan(d->t[i].eff_emu);
    fprintf(out, "#\n# train: throughput, step time, memory balance%s%s\n", several ? ", scaling efficiency sps(P)/(P*sps(base))" : "",
            emu ? (several ? " (emulated runs: speedup over one device / GPUs, as train printed it)"
                           : ", scaling efficiency (emulated runs: speedup over one device / GPUs, as train printed it)") : "");
    fprintf(out, "# %-*s %5s %11s %19s %9s %9s %9s %9s %8s %8s %10s %8s\n", s_lwid, "engine", "world", "samples/s", "runs: min - max", "step p50", "step p99",
            "comm p50", "wait p50", "rss imb", "eng imb", "scaling", "speedup");
    fprintf(out, "# %-*s %5s %11s %19s %9s %9s %9s %9s %8s %8s %10s %8s\n", s_lwid, "", "", "(median)", "", "(ms)", "(ms)", "(ms)", "(ms)", "max/mean",
            "max/mean", "eff", "(emul.)");
    for (size_t i = 0; i < d->nt; i++) {
        const h_rtrain_t *t = &d->t[i];
        int base;
        double eff = h_report_efficiency(d, i, &base);
        char effs[32], eimb[16];
        if (isnan(eff)) snprintf(effs, sizeof effs, "-");
        else snprintf(effs, sizeof effs, "%.3f%s", eff, base > 1 ? "*" : "");
        approx |= !isnan(eff) && base > 1;
        if (isnan(t->eimb)) snprintf(eimb, sizeof eimb, "-");
        else snprintf(eimb, sizeof eimb, "%.3f", t->eimb);
        char sp[16] = "-", range[48] = "1";
        if (!isnan(t->speedup)) snprintf(sp, sizeof sp, "%.2f", t->speedup);
        if (t->nrep > 1) snprintf(range, sizeof range, "%zu: %.0f - %.0f", t->nrep, t->sps_min, t->sps_max);
        hb |= t->nhb > 0;
        fprintf(out, "  %-*s %5d %10.1f%c %19s %9.2f %9.2f %9.2f %9.2f %8.3f %8s %10s %8s\n", s_lwid, t->label, t->world, t->sps, t->nhb ? '!' : ' ', range, t->step50,
                t->step99, t->comm50, t->wait50, t->imb, eimb, effs, sp);
    }
    if (approx) fprintf(out, "# * no world-1 run for that engine: efficiency relative to its smallest world\n");
    if (hb)
        fprintf(out, "# ! host-bound: in some of its runs (runs: host-bound in the CSV and JSON) this machine's CPUs were the "
                     "limit: the figure measures the host, not the engine\n");
}

static int s_model_same(const h_rmodel_t *a, const h_rmodel_t *b)
{
    return !strcmp(a->label, b->label) && !strcmp(a->what, b->what) && a->bytes == b->bytes;
}

/* predictions without a measurement: the extrapolation in P, one row per engine and size */
static void s_text_extrapolation(FILE *out, const h_rdata_t *d)
{
    fprintf(out, "#\n# model: extrapolated allreduce time (ms) against P\n# %-*s %10s", s_lwid, "engine", "size");
    int worlds[32], nw = 0;
    for (size_t i = 0; i < d->nm; i++) {
        if (d->m[i].meas_us > 0) continue;
        int k = 0;
        while (k < nw && worlds[k] != d->m[i].world) k++;
        if (k == nw && nw < 32) worlds[nw++] = d->m[i].world;
    }
    for (int a = 1; a < nw; a++)
        for (int b = a; b > 0 && worlds[b - 1] > worlds[b]; b--) { int t = worlds[b]; worlds[b] = worlds[b - 1]; worlds[b - 1] = t; }
    for (int k = 0; k < nw; k++) fprintf(out, " %8d", worlds[k]);
    fprintf(out, "\n");
    for (size_t i = 0; i < d->nm; i++) {
        const h_rmodel_t *m = &d->m[i];
        int first = m->meas_us <= 0;
        for (size_t j = 0; j < i && first; j++) first = !(d->m[j].meas_us <= 0 && s_model_same(&d->m[j], m));
        if (!first) continue;
        char sz[32];
        s_fmt_bytes(m->bytes, sz, sizeof sz);
        fprintf(out, "  %-*s %10s", s_lwid, m->label, sz);
        for (int k = 0; k < nw; k++) {
            double v = -1;
            for (size_t j = i; j < d->nm; j++)
                if (d->m[j].meas_us <= 0 && d->m[j].world == worlds[k] && s_model_same(&d->m[j], m)) v = d->m[j].pred_us;
            if (v >= 0) fprintf(out, " %8.2f", v / 1e3);
            else fprintf(out, " %8s", "-");
        }
        fprintf(out, "\n");
    }
}

static void s_text_model(FILE *out, const h_rdata_t *d)
{
    fprintf(out, "#\n# model: predicted against measured (time in us; err = (pred - meas) / meas)\n");
    fprintf(out, "# %-6s %-*s %5s %10s %12s %12s %8s\n", "what", s_lwid, "engine", "world", "size", "pred(us)", "meas(us)", "err%");
    double sum = 0;
    int n = 0, nextra = 0;
    for (size_t i = 0; i < d->nm; i++) {
        const h_rmodel_t *m = &d->m[i];
        char sz[32];
        s_fmt_bytes(m->bytes, sz, sizeof sz);
        if (m->meas_us > 0) {
            double e = 100.0 * (m->pred_us - m->meas_us) / m->meas_us;
            sum += fabs(e);
            n++;
            fprintf(out, "  %-6s %-*s %5d %10s %12.1f %12.1f %+8.1f\n", m->what, s_lwid, m->label, m->world, sz, m->pred_us, m->meas_us, e);
        } else {
            nextra++;
        }
    }
    if (n) fprintf(out, "# mean |err| over %d measured points: %.1f%%\n", n, sum / n);
    if (nextra) s_text_extrapolation(out, d);
}

/* One traffic row, per step (traffic.c: the busiest and mean link, and rank = its NIC, bytes in + out). */
static void s_traffic_row(FILE *out, const char *what, const char *label, int world, double bytes, const double *m,
                          size_t nm, double steps)
{
    h_traffic_stats_t st;
    if (h_traffic_stats(m, nm, steps >= 1 ? steps : 1, &st) < 0) return;
    char sz[32] = "-", lm[32], la[32], rm[32];
    if (bytes > 0) s_fmt_bytes(bytes, sz, sizeof sz);
    s_fmt_bytes(st.link_max, lm, sizeof lm);
    s_fmt_bytes(st.link_mean, la, sizeof la);
    s_fmt_bytes(st.nic_max, rm, sizeof rm);
    fprintf(out, "  %-6s %-*s %5d %5d %8s %6zu %10s %10s %8.2f %10s %8.2f\n", what, s_lwid, label, world, st.ranks, sz, st.links, lm, la,
            h_traffic_ratio(st.link_max, st.link_mean), rm, h_traffic_ratio(st.nic_max, st.nic_mean));
}

/* Traffic matrices: per train run, and per bench engine@world its largest size. */
static void s_text_traffic(FILE *out, const h_rdata_t *d)
{
    int any = 0;
    for (size_t i = 0; i < d->nb && !any; i++) any = d->b[i].traffic != NULL;
    for (size_t i = 0; i < d->nt && !any; i++) any = d->t[i].traffic != NULL;
    if (!any) return;
    fprintf(out, "#\n# traffic: per step (run / its allreduces or steps, warm-up included): link = one direction of a pair of "
                 "ranks; rank = its NIC, bytes in + out\n");
    fprintf(out, "# %-6s %-*s %5s %5s %8s %6s %10s %10s %8s %10s %8s\n", "mode", s_lwid, "engine", "world", "ranks", "size", "links",
            "max link", "mean link", "max/mean", "max rank", "max/mean");
    for (size_t i = 0; i < d->nb; i++) {
        const h_rbench_t *b = &d->b[i];
        int last = i + 1 == d->nb || strcmp(d->b[i + 1].label, b->label) || d->b[i + 1].world != b->world;
        if (last && b->traffic) s_traffic_row(out, "bench", b->label, b->world, b->bytes, b->traffic, b->ntraffic, b->steps);
    }
    for (size_t i = 0; i < d->nt; i++)
        if (d->t[i].traffic) s_traffic_row(out, "train", d->t[i].label, d->t[i].world, 0, d->t[i].traffic, d->t[i].ntraffic, d->t[i].steps);
}

static int s_text(FILE *out, const h_rdata_t *d)
{
    s_lwid = s_lw(d);
    if (d->nb) CHECK(s_text_bench(out, d));
    if (d->nt) s_text_train(out, d);
    s_text_traffic(out, d);
    h_report_ceilings(out, d, s_lwid);
    if (d->nm) s_text_model(out, d);
    return 0;
}

/* ---- h_report ------------------------------------------------------------------------------------ */

/* The one line that says which lines had no table here: their kinds, most first, and how many. */
static void s_other_line(FILE *out, const h_rdata_t *d)
{
    if (!d->nother_lines) return;
    size_t ord[H_OTHER];
    for (size_t i = 0; i < d->nother; i++) ord[i] = i;
    for (size_t a = 1; a < d->nother; a++)
        for (size_t b = a; b > 0 && d->other[ord[b - 1]].n < d->other[ord[b]].n; b--) {
            size_t t = ord[b];
            ord[b] = ord[b - 1];
            ord[b - 1] = t;
        }
    fprintf(out, "# %zu line%s of a kind report has no table for skipped:", d->nother_lines, d->nother_lines == 1 ? "" : "s");
    for (size_t i = 0; i < d->nother; i++) fprintf(out, "%s %s %zu", i ? "," : "", d->other[ord[i]].kind, d->other[ord[i]].n);
    fprintf(out, "\n");
}

/* Figures into outdir (NULL: plots/ next to the first file); their notes on `note`. */
static int s_figures(const h_rdata_t *d, char **files, const char *outdir, FILE *note)
{
    char dir[4096];
    if (outdir) {
        snprintf(dir, sizeof dir, "%s", outdir);
    } else {
        const char *slash = strrchr(files[0], '/');
        if (slash) snprintf(dir, sizeof dir, "%.*s/plots", (int)(slash - files[0]), files[0]);
        else snprintf(dir, sizeof dir, "plots");
    }
    int nfig = 0;
    fflush(stdout);
    int rc = h_plot_report(d, dir, note, &nfig);
    if (nfig) fprintf(note, "# plots: %d figure%s (PNG + SVG) in %s/\n", nfig, nfig == 1 ? "" : "s", dir);
    return rc;
}

/* The tables in format fmt on stdout (only table kind >= 0's), or one CSV file per table into c->csv_dir, then the
 * figures (text: always, unless no_fig; others: when outdir is given). */
static int s_output(const h_rdata_t *all, const char *fmt, int kind, const h_report_cfg_t *c, int nfiles, char **files,
                    size_t n, size_t nbad, int no_fig)
{
    h_rdata_t v = *all, *d = &v; /* --table: the other kinds' rows left out, in every format and figure */
    if (kind >= 0) {
        v.nb = kind == 0 ? v.nb : 0;
        v.nt = kind == 1 ? v.nt : 0;
        v.nm = kind == 2 ? v.nm : 0;
    }
    int text = !strcmp(fmt, "text") && !c->csv_dir, any = d->nb || d->nt || d->nm;
    if (kind >= 0 && !any && n)
        return err_set(ERR_INVAL, "--table %s: the files hold no %s rows (bench %zu, train %zu, model %zu)", c->table,
                       c->table, all->nb, all->nt, all->nm);
    if (!text) s_other_line(stderr, all); /* stdout is the table's */
    if (c->csv_dir) {
        CHECK(h_report_csv_dir(d, c->csv_dir, kind, stdout));
    } else if (text) {
        printf("# syncbench report: %d file%s, %zu results (bench %zu, train %zu, model %zu)", nfiles, nfiles == 1 ? "" : "s",
               n, all->nb, all->nt, all->nm);
        if (nbad) printf(", %zu malformed line%s skipped (counted on stderr)", nbad, nbad == 1 ? "" : "s");
        printf("\n");
        s_other_line(stdout, all);
        if (!any) printf("# nothing to report\n");
        else CHECK(s_text(stdout, d));
    } else if (!strcmp(fmt, "json")) {
        h_report_json(stdout, d, nfiles, files, n, nbad);
    } else if (!strcmp(fmt, "md")) {
        h_report_md(stdout, d);
    } else if (kind >= 0) {
        h_report_csv_table(stdout, d, kind);
    } else {
        h_report_csv(stdout, d);
    }
    if (!any || no_fig || (!text && !c->outdir)) return 0;
    return s_figures(d, files, c->outdir, text ? stdout : stderr);
}

static int s_report(int nfiles, char **files, const h_report_cfg_t *c, int no_fig)
{
    const char *format = c->format ? c->format : "text";
    int kind = h_report_kind(c->table);
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "md") && strcmp(format, "csv"))
        return err_set(ERR_INVAL, "report: unknown --format %s (text, json, md or csv)", format);
    if (c->table && kind < 0) return err_set(ERR_INVAL, "report: unknown --table %s (bench, train or model)", c->table);
    if (c->csv_dir && c->format && strcmp(c->format, "csv"))
        return err_set(ERR_INVAL, "report: --csv %s writes CSV files and --format %s prints tables: give one of them",
                       c->csv_dir, c->format);
    if (nfiles < 1)
        return err_set(ERR_INVAL, "report needs at least one results file (JSON lines, e.g. results/run-latest.jsonl)");
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    int rrc = 0;
    char empty[512] = ""; /* the files that hold no result line: a mistaken argument, never "nothing to report" */
    for (int fi = 0; fi < nfiles && rrc != ERR_NOMEM; fi++) {
        size_t before = n;
        int frc = h_jread_files(1, &files[fi], &objs, &n, &nbad, stderr);
        if (frc < 0) rrc = frc;
        else if (n == before && strlen(empty) < sizeof empty - 16)
            snprintf(empty + strlen(empty), sizeof empty - strlen(empty), "%s%s", empty[0] ? ", " : "", files[fi]);
    }
    h_rdata_t d = {0};
    int rc = s_collect(objs, n, &d, c->run_label, stderr);
    if (rc == 0) rc = s_output(&d, format, kind, c, nfiles, files, n, nbad, no_fig);
    fflush(stdout);
    if (rc == 0 && rrc < 0) rc = err_set(rrc == ERR_NOMEM ? ERR_NOMEM : ERR_IO, "report: a results file could not be read (see above)");
    if (rc == 0 && empty[0])
        rc = err_set(ERR_INVAL, "%s: no result line (a JSON object with a \"mode\" a line, as --json writes): not a "
                     "results file", empty);
    for (size_t i = 0; d.b && i < d.nb; i++) free(d.b[i].cfg);
    for (size_t i = 0; d.t && i < d.nt; i++) free(d.t[i].cfg);
    free(d.b);
    free(d.t);
    free(d.m);
    h_jfree_all(&objs, &n);
    return rc;
}

int h_report(int nfiles, char **files, const char *outdir, const char *format)
{
    h_report_cfg_t c = {.outdir = outdir, .format = format};
    return s_report(nfiles, files, &c, 0);
}

int h_report_run(int nfiles, char **files, const char *outdir, const char *format, const char *run_label)
{
    h_report_cfg_t c = {.outdir = outdir, .format = format, .run_label = run_label};
    return s_report(nfiles, files, &c, 0);
}

int h_report_tables(int nfiles, char **files)
{
    h_report_cfg_t c = {0};
    return s_report(nfiles, files, &c, 1);
}

int h_report_with(int nfiles, char **files, const h_report_cfg_t *c)
{
    return s_report(nfiles, files, c, 0);
}
