/* report.c: `harness report FILE...`: reads JSON-lines results (bench, train and model lines) into
 * rows (bench: the median of repeated runs of one point; train: the latest line of one configuration;
 * model: every prediction) and prints them side by side: as text (bench: busbw per size per engine
 * and world; train: samples/s, step times, memory balance and scaling efficiency; model: predicted
 * against measured), or as JSON, Markdown or CSV tables of the same rows. Figures: plot.c. Malformed
 * lines are reported with file:line and skipped; without gnuplot the tables are still printed. */
#include "harness/report.h"
#include "harness/harness.h"
#include "harness/jsonl.h"
#include "harness/peers.h"
#include "harness/plot.h"
#include "harness/stats.h"
#include "harness/traffic.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void h_engine_label(char *out, size_t len, const char *engine, const char *impl, int servers, int coloc)
{
    size_t el = strlen(engine);
    if (!strncmp(impl, engine, el) && impl[el] == '-') {
        /* a descriptive impl ("ps-sync-servers1") already names the layout */
        snprintf(out, len, "%s", impl);
        return;
    }
    size_t k = (size_t)snprintf(out, len, "%s", engine);
    if (*impl && strcmp(impl, "default") && strcmp(impl, "host") && k < len)
        k += (size_t)snprintf(out + k, len - k, "/%s", impl);
    if (h_engine_pattern(engine) == H_PATTERN_PS && k < len) {
        if (coloc) snprintf(out + k, len - k, "-coloc");
        else if (servers > 0) snprintf(out + k, len - k, "-s%d", servers);
    }
}

/* Label of a result line: its "label" field, else h_engine_label; kept safe inside gnuplot strings
 * and file names. */
static void s_label(const h_jobj_t *o, char *out, size_t len)
{
    const char *lab = h_jstr(o, "label", NULL);
    const h_jfield_t *c = h_jget(o, "colocate");
    int coloc = c && (c->type == HJ_NUM || c->type == HJ_BOOL) && c->num != 0;
    /* peers (another project's collective: MPI, torch/gloo) are rows of the same tables, marked */
    const h_jfield_t *pf = h_jget(o, "peer");
    const char *engine = h_jstr(o, "engine", "?");
    int peer = (pf && (pf->type == HJ_NUM || pf->type == HJ_BOOL) && pf->num != 0) || h_engine_is_peer(engine);
    if (lab) snprintf(out, len, "%s", lab);
    else if (peer) snprintf(out, len, "%s", engine); /* its library and version are in impl */
    else h_engine_label(out, len, engine, h_jstr(o, "impl", ""), (int)h_jnum(o, "servers", 0), coloc);
    const h_jfield_t *emu = h_jget(o, "emulated");
    if (!lab && emu && emu->num != 0) {
        /* an emulated cluster's run: the model, the device and the link decide it as much as the engine */
        size_t k = strlen(out);
        const char *net = h_jstr(o, "net", ""), *rate = strstr(net, "inter=");
        int K = (int)h_jnum(o, "server_nodes", 0);
        char knodes[24] = "";
        if (K > 0) snprintf(knodes, sizeof knodes, "-K%d", K);
        snprintf(out + k, len - k, "%s/%s/%s/%.*s", knodes, h_jstr(o, "model", "?"), h_jstr(o, "device", "?"),
                 rate ? (int)strcspn(rate + 6, ",") : 4, rate ? rate + 6 : "none");
    }
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_./=+:", *p)))
            *p = '_';
    size_t n = strlen(out);
    if (peer && n + 7 < len) snprintf(out + n, len - n, "(peer)");
}

static int s_cmp_bench(const void *a, const void *b)
{
    const h_rbench_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    if (c) return c;
    if (x->world != y->world) return x->world < y->world ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static int s_cmp_train(const void *a, const void *b)
{
    const h_rtrain_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    if (c) return c;
    return (x->world > y->world) - (x->world < y->world);
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
static void s_add_bench(h_rdata_t *d, const h_jobj_t *o, const char *label, int world, FILE *diag)
{
    double bytes = h_jnum(o, "bytes", NAN), busbw = h_jnum(o, "busbw_gbs", NAN);
    if (world < 1 || !(bytes >= 0) || !(busbw >= 0)) {
        fprintf(diag, "%s: bench line without world, bytes or busbw_gbs: skipped\n", o->src);
        return;
    }
    size_t k = 0;
    while (k < d->nb && !(d->b[k].world == world && d->b[k].bytes == bytes && !strcmp(d->b[k].label, label))) k++;
    if (k == d->nb) d->nb++;
    h_rbench_t *b = &d->b[k];
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
static void s_add_train(h_rdata_t *d, const h_jobj_t *o, const char *label, int world, FILE *diag)
{
    double sps = h_jnum(o, "samples_per_s", NAN);
    if (world < 1 || !(sps >= 0)) {
        fprintf(diag, "%s: train line without world or samples_per_s: skipped\n", o->src);
        return;
    }
    size_t k = 0;
    while (k < d->nt && !(d->t[k].world == world && !strcmp(d->t[k].label, label))) k++;
    if (k == d->nt) d->nt++;
    h_rtrain_t *t = &d->t[k];
    snprintf(t->label, sizeof t->label, "%s", label);
    snprintf(t->src, sizeof t->src, "%s", o->src);
    t->world = world;
    t->servers = (int)h_jnum(o, "servers", 0);
    t->sps = sps;
    t->step50 = h_jnum(o, "step_ms_p50", NAN);
    t->step99 = h_jnum(o, "step_ms_p99", NAN);
    t->comm50 = h_jnum(o, "comm_ms_p50", NAN);
    t->wait50 = h_jnum(o, "wait_ms_p50", NAN);
    t->imb = h_jnum(o, "mem_imbalance", NAN);
    t->eimb = h_jnum(o, "mem_engine_imbalance", NAN);
    t->speedup = h_jnum(o, "speedup", NAN);
    const h_jfield_t *m = h_jget(o, "mem_peak_bytes");
    t->mem = m && m->type == HJ_ARR ? m->arr : NULL;
    t->nmem = m && m->type == HJ_ARR ? m->n : 0;
    const h_jfield_t *em = h_jget(o, "mem_engine_bytes"), *tr = h_jget(o, "traffic_bytes");
    t->emem = em && em->type == HJ_ARR && em->n ? em->arr : NULL;
    t->nemem = t->emem ? em->n : 0;
    t->traffic = tr && tr->type == HJ_ARR && tr->n ? tr->arr : NULL;
    t->ntraffic = t->traffic ? tr->n : 0;
    t->steps = h_jnum(o, "steps", 0) + h_jnum(o, "warmup_steps", 0);
    t->nrep++;
}

static void s_add_model(h_rdata_t *d, const h_jobj_t *o, const char *label, int world, FILE *diag)
{
    if (!strcmp(h_jstr(o, "what", ""), "fit")) return;   /* the probe's parameters: no point */
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

/* Every line into its kind's rows, then each kind sorted. Other modes (future ones) are ignored. */
static int s_collect(h_jobj_t *objs, size_t n, h_rdata_t *d, FILE *diag)
{
    d->b = calloc(n ? n : 1, sizeof *d->b);
    d->t = calloc(n ? n : 1, sizeof *d->t);
    d->m = calloc(n ? n : 1, sizeof *d->m);
    if (!d->b || !d->t || !d->m) return err_set(ERR_NOMEM, "report: out of memory for %zu results", n);
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *o = &objs[i];
        const char *mode = h_jstr(o, "mode", "");
        char label[H_LABEL];
        s_label(o, label, sizeof label);
        int world = (int)h_jnum(o, "world", 0);
        if (!strcmp(mode, "bench")) s_add_bench(d, o, label, world, diag);
        else if (!strcmp(mode, "train")) s_add_train(d, o, label, world, diag);
        else if (!strcmp(mode, "model")) s_add_model(d, o, label, world, diag);
    }
    qsort(d->b, d->nb, sizeof *d->b, s_cmp_bench);
    qsort(d->t, d->nt, sizeof *d->t, s_cmp_train);
    qsort(d->m, d->nm, sizeof *d->m, s_cmp_model);
    return 0;
}

double h_report_efficiency(const h_rdata_t *d, size_t i, int *base)
{
    const h_rtrain_t *t = &d->t[i];
    const h_rtrain_t *ref = NULL;
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
    for (size_t i = 0; i < d->nb; i++)
        if (!nc || cols[nc - 1]->world != d->b[i].world || strcmp(cols[nc - 1]->label, d->b[i].label)) cols[nc++] = &d->b[i];
    fprintf(out, "#\n# bench: busbw (GB/s) by message size; one column per engine@world\n# %10s", "size");
    for (size_t c = 0; c < nc; c++) {
        char h[H_LABEL + 16];
        snprintf(h, sizeof h, "%s@%d", cols[c]->label, cols[c]->world);
        fprintf(out, " %12s", h);
    }
    fprintf(out, "\n");
    for (size_t s = 0; s < ns; s++) {
        char sz[32];
        s_fmt_bytes(sizes[s], sz, sizeof sz);
        fprintf(out, "  %10s", sz);
        for (size_t c = 0; c < nc; c++) {
            const h_rbench_t *b = s_bench_find(d, cols[c]->label, cols[c]->world, sizes[s]);
            if (b) fprintf(out, " %12.3f", b->busbw);
            else fprintf(out, " %12s", "-");
        }
        fprintf(out, "\n");
    }
    free(cols);
    free(sizes);
    return 0;
}

static void s_text_train(FILE *out, const h_rdata_t *d)
{
    int several = 0, approx = 0;
    for (size_t i = 1; i < d->nt; i++) several |= !strcmp(d->t[i].label, d->t[0].label) || d->t[i].world != d->t[0].world;
    fprintf(out, "#\n# train: throughput, step time, memory balance%s\n", several ? ", scaling efficiency sps(P)/(P*sps(base))" : "");
    fprintf(out, "# %-14s %5s %11s %9s %9s %9s %9s %8s %8s %10s %8s\n", "engine", "world", "samples/s", "step p50", "step p99",
            "comm p50", "wait p50", "rss imb", "eng imb", "scaling", "speedup");
    fprintf(out, "# %-14s %5s %11s %9s %9s %9s %9s %8s %8s %10s %8s\n", "", "", "", "(ms)", "(ms)", "(ms)", "(ms)", "max/mean",
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
        char sp[16] = "-";
        if (!isnan(t->speedup)) snprintf(sp, sizeof sp, "%.2f", t->speedup);
        fprintf(out, "  %-14s %5d %11.1f %9.2f %9.2f %9.2f %9.2f %8.3f %8s %10s %8s\n", t->label, t->world, t->sps, t->step50,
                t->step99, t->comm50, t->wait50, t->imb, eimb, effs, sp);
    }
    if (approx) fprintf(out, "# * no world-1 run for that engine: efficiency relative to its smallest world\n");
}

static int s_model_same(const h_rmodel_t *a, const h_rmodel_t *b)
{
    return !strcmp(a->label, b->label) && !strcmp(a->what, b->what) && a->bytes == b->bytes;
}

/* predictions without a measurement: the extrapolation in P, one row per engine and size */
static void s_text_extrapolation(FILE *out, const h_rdata_t *d)
{
    fprintf(out, "#\n# model: extrapolated allreduce time (ms) against P\n# %-14s %10s", "engine", "size");
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
        fprintf(out, "  %-14s %10s", m->label, sz);
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
    fprintf(out, "# %-6s %-14s %5s %10s %12s %12s %8s\n", "what", "engine", "world", "size", "pred(us)", "meas(us)", "err%");
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
            fprintf(out, "  %-6s %-14s %5d %10s %12.1f %12.1f %+8.1f\n", m->what, m->label, m->world, sz, m->pred_us, m->meas_us, e);
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
    fprintf(out, "  %-6s %-14s %5d %5d %8s %6zu %10s %10s %8.2f %10s %8.2f\n", what, label, world, st.ranks, sz, st.links, lm, la,
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
    fprintf(out, "# %-6s %-14s %5s %5s %8s %6s %10s %10s %8s %10s %8s\n", "mode", "engine", "world", "ranks", "size", "links",
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
    if (d->nb) CHECK(s_text_bench(out, d));
    if (d->nt) s_text_train(out, d);
    s_text_traffic(out, d);
    if (d->nm) s_text_model(out, d);
    return 0;
}

/* ---- json, md, csv: one table of cells per kind of row ------------------------------------------- */

/* A cell: a string (str), or a number (NAN: none) shown with fmt in Markdown and exactly elsewhere. */
typedef struct { const char *key, *fmt, *str; double num; } s_cell_t;

#define S_NUM(k, f, v) ((s_cell_t){.key = (k), .fmt = (f), .num = (v)})
#define S_STR(k, s)    ((s_cell_t){.key = (k), .str = (s)})
#define S_MAXCELLS 16

static size_t s_cells_bench(const h_rdata_t *d, size_t i, s_cell_t *c)
{
    const h_rbench_t *b = &d->b[i];
    size_t k = 0;
    c[k++] = S_STR("label", b->label);
    c[k++] = S_NUM("world", "%.0f", b->world);
    c[k++] = S_NUM("servers", "%.0f", b->servers);
    c[k++] = S_NUM("bytes", "%.0f", b->bytes);
    c[k++] = S_NUM("time_us", "%.3f", b->time_us);
    c[k++] = S_NUM("busbw_gbs", "%.3f", b->busbw);
    c[k++] = S_NUM("algbw_gbs", "%.3f", b->algbw);
    c[k++] = S_NUM("runs", "%.0f", (double)b->nrep);
    c[k++] = S_NUM("wrong", "%.0f", b->wrong);
    c[k++] = S_STR("net", b->net);
    return k;
}

static size_t s_cells_train(const h_rdata_t *d, size_t i, s_cell_t *c)
{
    const h_rtrain_t *t = &d->t[i];
    int base;
    double eff = h_report_efficiency(d, i, &base);
    size_t k = 0;
    c[k++] = S_STR("label", t->label);
    c[k++] = S_NUM("world", "%.0f", t->world);
    c[k++] = S_NUM("servers", "%.0f", t->servers);
    c[k++] = S_NUM("samples_per_s", "%.1f", t->sps);
    c[k++] = S_NUM("step_ms_p50", "%.2f", t->step50);
    c[k++] = S_NUM("step_ms_p99", "%.2f", t->step99);
    c[k++] = S_NUM("comm_ms_p50", "%.2f", t->comm50);
    c[k++] = S_NUM("wait_ms_p50", "%.2f", t->wait50);
    c[k++] = S_NUM("mem_imbalance", "%.3f", t->imb);
    c[k++] = S_NUM("mem_engine_imbalance", "%.3f", t->eimb);
    c[k++] = S_NUM("scaling_eff", "%.3f", eff);
    c[k++] = S_NUM("eff_base_world", "%.0f", isnan(eff) ? NAN : base);
    c[k++] = S_NUM("runs", "%.0f", (double)t->nrep);
    c[k++] = S_STR("src", t->src);
    c[k++] = S_NUM("speedup", "%.3f", t->speedup); /* emulated cluster runs: over one emulated device */
    return k;
}

static size_t s_cells_model(const h_rdata_t *d, size_t i, s_cell_t *c)
{
    const h_rmodel_t *m = &d->m[i];
    double meas = m->meas_us > 0 ? m->meas_us : NAN;
    size_t k = 0;
    c[k++] = S_STR("what", m->what);
    c[k++] = S_STR("label", m->label);
    c[k++] = S_NUM("world", "%.0f", m->world);
    c[k++] = S_NUM("bytes", "%.0f", m->bytes);
    c[k++] = S_NUM("pred_us", "%.1f", m->pred_us);
    c[k++] = S_NUM("meas_us", "%.1f", meas);
    c[k++] = S_NUM("err_pct", "%+.1f", 100.0 * (m->pred_us - meas) / meas);
    return k;
}

typedef struct {
    const char *name;
    size_t (*cells)(const h_rdata_t *d, size_t i, s_cell_t *c);
} s_section_t;

static const s_section_t s_sections[3] = {{"bench", s_cells_bench}, {"train", s_cells_train}, {"model", s_cells_model}};

static size_t s_rows(const h_rdata_t *d, size_t section)
{
    return section == 0 ? d->nb : section == 1 ? d->nt : d->nm;
}

/* A number that reads back as the same double (NAN: none). */
static void s_fmt_exact(double v, char *buf, size_t len)
{
    snprintf(buf, len, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, len, "%.17g", v);
}

static void s_json_cell(FILE *out, const s_cell_t *c)
{
    char buf[600];
    h_json_str(buf, sizeof buf, c->key);
    fprintf(out, "%s:", buf);
    if (c->str) h_json_str(buf, sizeof buf, c->str);
    else if (isnan(c->num) || isinf(c->num)) snprintf(buf, sizeof buf, "null");
    else s_fmt_exact(c->num, buf, sizeof buf);
    fputs(buf, out);
}

/* One JSON document: {"files":[...],"results":N,"malformed":K,"bench":[rows],"train":[...],"model":[...]} */
static void s_json(FILE *out, const h_rdata_t *d, int nfiles, char **files, size_t nres, size_t nbad)
{
    char buf[8400];
    fprintf(out, "{\"files\":[");
    for (int i = 0; i < nfiles; i++) {
        h_json_str(buf, sizeof buf, files[i]);
        fprintf(out, "%s%s", i ? "," : "", buf);
    }
    fprintf(out, "],\"results\":%zu,\"malformed\":%zu", nres, nbad);
    for (size_t s = 0; s < 3; s++) {
        fprintf(out, ",\n\"%s\":[", s_sections[s].name);
        for (size_t i = 0; i < s_rows(d, s); i++) {
            s_cell_t c[S_MAXCELLS];
            size_t nc = s_sections[s].cells(d, i, c);
            fprintf(out, "%s\n {", i ? "," : "");
            for (size_t k = 0; k < nc; k++) {
                if (k) fputc(',', out);
                s_json_cell(out, &c[k]);
            }
            fputc('}', out);
        }
        fprintf(out, "]");
    }
    fprintf(out, "}\n");
}

/* Markdown: a "## kind" heading and a table per kind that has rows; numbers right-aligned. */
static void s_md(FILE *out, const h_rdata_t *d)
{
    for (size_t s = 0; s < 3; s++) {
        size_t n = s_rows(d, s);
        if (!n) continue;
        s_cell_t c[S_MAXCELLS];
        size_t nc = s_sections[s].cells(d, 0, c);
        fprintf(out, "## %s\n\n|", s_sections[s].name);
        for (size_t k = 0; k < nc; k++) fprintf(out, " %s |", c[k].key);
        fprintf(out, "\n|");
        for (size_t k = 0; k < nc; k++) fprintf(out, " %s |", c[k].str ? "---" : "---:");
        fprintf(out, "\n");
        for (size_t i = 0; i < n; i++) {
            s_sections[s].cells(d, i, c);
            fprintf(out, "|");
            for (size_t k = 0; k < nc; k++) {
                char buf[300] = "-";
                if (c[k].str && *c[k].str) snprintf(buf, sizeof buf, "%s", c[k].str);
                else if (!c[k].str && !isnan(c[k].num)) snprintf(buf, sizeof buf, c[k].fmt, c[k].num);
                fprintf(out, " %s |", buf);
            }
            fprintf(out, "\n");
        }
        fprintf(out, "\n");
    }
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void s_csv_str(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) { fputs(s, out); return; }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* CSV: per kind that has rows, a header line "section,key,..." and its rows "kind,value,..."; a
 * blank line between kinds; no value: an empty field. */
static void s_csv(FILE *out, const h_rdata_t *d)
{
    int first = 1;
    for (size_t s = 0; s < 3; s++) {
        size_t n = s_rows(d, s);
        if (!n) continue;
        s_cell_t c[S_MAXCELLS];
        size_t nc = s_sections[s].cells(d, 0, c);
        fprintf(out, "%ssection", first ? "" : "\n");
        first = 0;
        for (size_t k = 0; k < nc; k++) fprintf(out, ",%s", c[k].key);
        fprintf(out, "\n");
        for (size_t i = 0; i < n; i++) {
            s_sections[s].cells(d, i, c);
            fputs(s_sections[s].name, out);
            for (size_t k = 0; k < nc; k++) {
                char buf[64] = "";
                fputc(',', out);
                if (!c[k].str && !isnan(c[k].num)) s_fmt_exact(c[k].num, buf, sizeof buf);
                s_csv_str(out, c[k].str ? c[k].str : buf);
            }
            fprintf(out, "\n");
        }
    }
}

/* ---- h_report ------------------------------------------------------------------------------------ */

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

/* The tables in format fmt on stdout, then the figures (text: always; others: when outdir is given). */
static int s_output(const h_rdata_t *d, const char *fmt, int nfiles, char **files, const char *outdir, size_t n, size_t nbad)
{
    int text = !strcmp(fmt, "text"), any = d->nb || d->nt || d->nm;
    if (text) {
        printf("# syncbench report: %d file%s, %zu results (bench %zu, train %zu, model %zu)", nfiles, nfiles == 1 ? "" : "s",
               n, d->nb, d->nt, d->nm);
        if (nbad) printf(", %zu malformed line%s skipped (listed on stderr)", nbad, nbad == 1 ? "" : "s");
        printf("\n");
        if (!any) printf("# nothing to report\n");
        else CHECK(s_text(stdout, d));
    } else if (!strcmp(fmt, "json")) {
        s_json(stdout, d, nfiles, files, n, nbad);
    } else if (!strcmp(fmt, "md")) {
        s_md(stdout, d);
    } else {
        s_csv(stdout, d);
    }
    if (!any || (!text && !outdir)) return 0;
    return s_figures(d, files, outdir, text ? stdout : stderr);
}

int h_report(int nfiles, char **files, const char *outdir, const char *format)
{
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "md") && strcmp(format, "csv"))
        return err_set(ERR_INVAL, "report: unknown --format %s (text, json, md or csv)", format);
    if (nfiles < 1)
        return err_set(ERR_INVAL, "report needs at least one results file (JSON lines, e.g. results/run-latest.jsonl)");
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    int rrc = h_jread_files(nfiles, files, &objs, &n, &nbad, stderr);
    h_rdata_t d = {0};
    int rc = s_collect(objs, n, &d, stderr);
    if (rc == 0) rc = s_output(&d, format, nfiles, files, outdir, n, nbad);
    fflush(stdout);
    if (rc == 0 && rrc < 0) rc = err_set(ERR_IO, "report: a results file could not be read (see above)");
    free(d.b);
    free(d.t);
    free(d.m);
    h_jfree_all(&objs, &n);
    return rc;
}
