/* report.c: `harness report FILE...`: reads JSON-lines results (bench, train and model lines), prints
 * the engines side by side (bench: busbw per size per engine and world; train: samples/s, step times,
 * memory balance and scaling efficiency; model: predicted against measured) and writes PNG and SVG
 * plots with gnuplot into outdir (default: plots/ next to the first file). Malformed lines are
 * reported with file:line and skipped; without gnuplot the tables are still printed. */
#include "harness/harness.h"
#include "harness/jsonl.h"
#include "harness/report.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_LABEL 64

#define S_REPS 16
typedef struct {
    char label[S_LABEL];
    int world;
    double bytes, busbw, time_us;
    double rep_t[S_REPS], rep_bw[S_REPS];   /* repeated runs of the same point */
    int nrep;
} s_bench_t;

typedef struct {
    char label[S_LABEL];
    int world;
    double sps, step50, step99, comm50, wait50, imb, eimb;
    double *mem;          /* peak bytes per rank (borrowed from the object) */
    size_t nmem;
} s_train_t;

typedef struct {
    char label[S_LABEL];
    char what[16];        /* "bench" (allreduce) or "train" (step) */
    int world;
    double bytes, pred_us, meas_us;   /* meas_us < 0: none (extrapolation) */
} s_model_t;

typedef struct {
    s_bench_t *b; size_t nb;
    s_train_t *t; size_t nt;
    s_model_t *m; size_t nm;
} s_data_t;

/* Engine label of a result: engine, then impl when not the default host path, then the PS layout. */
static void s_label(const h_jobj_t *o, char *out, size_t len)
{
    const char *eng = h_jstr(o, "engine", "?");
    const char *impl = h_jstr(o, "impl", "");
    const char *lab = h_jstr(o, "label", NULL);
    if (lab) { snprintf(out, len, "%s", lab); goto clean; }
    size_t el = strlen(eng);
    if (!strncmp(impl, eng, el) && impl[el] == '-') {
        /* a descriptive impl ("ps-sync-servers1") already names the layout */
        snprintf(out, len, "%s", impl);
        goto clean;
    }
    size_t k = (size_t)snprintf(out, len, "%s", eng);
    if (*impl && strcmp(impl, "default") && strcmp(impl, "host") && k < len)
        k += (size_t)snprintf(out + k, len - k, "/%s", impl);
    if (!strcmp(eng, "ps") && k < len) {
        const h_jfield_t *c = h_jget(o, "colocate");
        int coloc = c && (c->type == HJ_NUM || c->type == HJ_BOOL) && c->num != 0;
        int srv = (int)h_jnum(o, "servers", 0);
        if (coloc) snprintf(out + k, len - k, "-coloc");
        else if (srv > 0) snprintf(out + k, len - k, "-s%d", srv);
    }
clean:
    /* keep labels safe inside gnuplot strings and file names */
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_./=+:", *p)))
            *p = '_';
}

static int s_cmp_bench(const void *a, const void *b)
{
    const s_bench_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    if (c) return c;
    if (x->world != y->world) return x->world < y->world ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static int s_cmp_train(const void *a, const void *b)
{
    const s_train_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    if (c) return c;
    return (x->world > y->world) - (x->world < y->world);
}

static int s_cmp_model(const void *a, const void *b)
{
    const s_model_t *x = a, *y = b;
    int c = strcmp(x->what, y->what);
    if (c) return c;
    c = strcmp(x->label, y->label);
    if (c) return c;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return (x->world > y->world) - (x->world < y->world);
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Collect the results. Bench: repeated runs of the same (label, world, bytes) give the median of
 * their times (this VM's run-to-run spread is wide); train: a later line for the same (label, world)
 * replaces an earlier one. */
static int s_collect(h_jobj_t *objs, size_t n, s_data_t *d, FILE *diag)
{
    d->b = calloc(n ? n : 1, sizeof *d->b);
    d->t = calloc(n ? n : 1, sizeof *d->t);
    d->m = calloc(n ? n : 1, sizeof *d->m);
    if (!d->b || !d->t || !d->m) return -1;
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *o = &objs[i];
        const char *mode = h_jstr(o, "mode", "");
        char label[S_LABEL];
        s_label(o, label, sizeof label);
        int world = (int)h_jnum(o, "world", 0);
        if (!strcmp(mode, "bench")) {
            double bytes = h_jnum(o, "bytes", NAN), busbw = h_jnum(o, "busbw_gbs", NAN);
            if (world < 1 || !(bytes >= 0) || !(busbw >= 0)) {
                fprintf(diag, "%s: bench line without world, bytes or busbw_gbs: skipped\n", o->src);
                continue;
            }
            size_t k = 0;
            while (k < d->nb && !(d->b[k].world == world && d->b[k].bytes == bytes && !strcmp(d->b[k].label, label))) k++;
            if (k == d->nb) d->nb++;
            s_bench_t *b = &d->b[k];
            snprintf(b->label, sizeof b->label, "%s", label);
            b->world = world;
            b->bytes = bytes;
            int slot = b->nrep % S_REPS;      /* beyond S_REPS repeats the latest S_REPS count */
            b->rep_t[slot] = h_jnum(o, "time_us", NAN);
            b->rep_bw[slot] = busbw;
            b->nrep++;
            int nr = b->nrep < S_REPS ? b->nrep : S_REPS;
            double tv[S_REPS], bv[S_REPS];
            memcpy(tv, b->rep_t, sizeof tv);
            memcpy(bv, b->rep_bw, sizeof bv);
            b->time_us = s_median(tv, nr);
            b->busbw = s_median(bv, nr);
        } else if (!strcmp(mode, "train")) {
            double sps = h_jnum(o, "samples_per_s", NAN);
            if (world < 1 || !(sps >= 0)) {
                fprintf(diag, "%s: train line without world or samples_per_s: skipped\n", o->src);
                continue;
            }
            size_t k = 0;
            while (k < d->nt && !(d->t[k].world == world && !strcmp(d->t[k].label, label))) k++;
            if (k == d->nt) d->nt++;
            s_train_t *t = &d->t[k];
            snprintf(t->label, sizeof t->label, "%s", label);
            t->world = world;
            t->sps = sps;
            t->step50 = h_jnum(o, "step_ms_p50", NAN);
            t->step99 = h_jnum(o, "step_ms_p99", NAN);
            t->comm50 = h_jnum(o, "comm_ms_p50", NAN);
            t->wait50 = h_jnum(o, "wait_ms_p50", NAN);
            t->imb = h_jnum(o, "mem_imbalance", NAN);
            t->eimb = h_jnum(o, "mem_engine_imbalance", NAN);
            const h_jfield_t *m = h_jget(o, "mem_peak_bytes");
            t->mem = m && m->type == HJ_ARR ? m->arr : NULL;
            t->nmem = m && m->type == HJ_ARR ? m->n : 0;
        } else if (!strcmp(mode, "model")) {
            if (!strcmp(h_jstr(o, "what", ""), "fit")) continue;   /* the probe's parameters: no point */
            double pred = h_jnum(o, "pred_us", NAN);
            if (world < 1 || !(pred >= 0)) {
                fprintf(diag, "%s: model line without world or pred_us: skipped\n", o->src);
                continue;
            }
            s_model_t *m = &d->m[d->nm++];
            snprintf(m->label, sizeof m->label, "%s", label);
            snprintf(m->what, sizeof m->what, "%s", h_jstr(o, "what", "bench"));
            m->world = world;
            m->bytes = h_jnum(o, "bytes", 0);
            m->pred_us = pred;
            m->meas_us = h_jnum(o, "meas_us", -1);
        }
        /* other modes (future ones) are not an error: ignored */
    }
    qsort(d->b, d->nb, sizeof *d->b, s_cmp_bench);
    qsort(d->t, d->nt, sizeof *d->t, s_cmp_train);
    qsort(d->m, d->nm, sizeof *d->m, s_cmp_model);
    return 0;
}

/* distinct (label, world) columns of the bench results, in sorted order */
typedef struct { const char *label; int world; } s_col_t;

static size_t s_bench_cols(const s_data_t *d, s_col_t *cols)
{
    size_t nc = 0;
    for (size_t i = 0; i < d->nb; i++)
        if (!nc || cols[nc - 1].world != d->b[i].world || strcmp(cols[nc - 1].label, d->b[i].label))
            cols[nc++] = (s_col_t){d->b[i].label, d->b[i].world};
    return nc;
}

static size_t s_bench_sizes(const s_data_t *d, double *sizes)
{
    size_t ns = 0;
    for (size_t i = 0; i < d->nb; i++) sizes[ns++] = d->b[i].bytes;
    qsort(sizes, ns, sizeof *sizes, s_cmp_double);
    size_t u = 0;
    for (size_t i = 0; i < ns; i++)
        if (!u || sizes[u - 1] != sizes[i]) sizes[u++] = sizes[i];
    return u;
}

static const s_bench_t *s_bench_find(const s_data_t *d, const char *label, int world, double bytes)
{
    for (size_t i = 0; i < d->nb; i++)
        if (d->b[i].world == world && d->b[i].bytes == bytes && !strcmp(d->b[i].label, label)) return &d->b[i];
    return NULL;
}

static void s_fmt_bytes(double b, char *out, size_t len)
{
    if (b >= 1073741824.0 && fmod(b, 1073741824.0) == 0) snprintf(out, len, "%.0fG", b / 1073741824.0);
    else if (b >= 1048576.0 && fmod(b, 1048576.0) == 0) snprintf(out, len, "%.0fM", b / 1048576.0);
    else if (b >= 1024.0 && fmod(b, 1024.0) == 0) snprintf(out, len, "%.0fK", b / 1024.0);
    else snprintf(out, len, "%.0f", b);
}

static void s_print_bench(FILE *out, const s_data_t *d, s_col_t *cols, size_t nc, double *sizes, size_t ns)
{
    fprintf(out, "#\n# bench: busbw (GB/s) by message size; one column per engine@world\n# %10s", "size");
    for (size_t c = 0; c < nc; c++) {
        char h[S_LABEL + 16];
        snprintf(h, sizeof h, "%s@%d", cols[c].label, cols[c].world);
        fprintf(out, " %12s", h);
    }
    fprintf(out, "\n");
    for (size_t s = 0; s < ns; s++) {
        char sz[32];
        s_fmt_bytes(sizes[s], sz, sizeof sz);
        fprintf(out, "  %10s", sz);
        for (size_t c = 0; c < nc; c++) {
            const s_bench_t *b = s_bench_find(d, cols[c].label, cols[c].world, sizes[s]);
            if (b) fprintf(out, " %12.3f", b->busbw);
            else fprintf(out, " %12s", "-");
        }
        fprintf(out, "\n");
    }
}

/* Scaling efficiency of row i: sps(n) / (n * sps(1)), against the smallest world of the same label
 * when there is no world 1 (then marked approximate by *base > 1). NAN when alone. */
static double s_efficiency(const s_data_t *d, size_t i, int *base)
{
    const s_train_t *t = &d->t[i];
    const s_train_t *ref = NULL;
    for (size_t k = 0; k < d->nt; k++)
        if (!strcmp(d->t[k].label, t->label) && (!ref || d->t[k].world < ref->world)) ref = &d->t[k];
    *base = ref ? ref->world : 0;
    if (!ref || ref == t || ref->sps <= 0) return ref == t ? 1.0 : NAN;
    return (t->sps / t->world) / (ref->sps / ref->world);
}

static void s_print_train(FILE *out, const s_data_t *d)
{
    int several = 0;
    for (size_t i = 1; i < d->nt; i++) several |= !strcmp(d->t[i].label, d->t[0].label) || d->t[i].world != d->t[0].world;
    fprintf(out, "#\n# train: throughput, step time, memory balance%s\n", several ? ", scaling efficiency sps(P)/(P*sps(base))" : "");
    fprintf(out, "# %-14s %5s %11s %9s %9s %9s %9s %8s %8s %10s\n", "engine", "world", "samples/s", "step p50", "step p99",
            "comm p50", "wait p50", "rss imb", "eng imb", "scaling");
    fprintf(out, "# %-14s %5s %11s %9s %9s %9s %9s %8s %8s %10s\n", "", "", "", "(ms)", "(ms)", "(ms)", "(ms)", "max/mean",
            "max/mean", "eff");
    for (size_t i = 0; i < d->nt; i++) {
        const s_train_t *t = &d->t[i];
        int base;
        double eff = s_efficiency(d, i, &base);
        char effs[32];
        if (isnan(eff)) snprintf(effs, sizeof effs, "-");
        else snprintf(effs, sizeof effs, "%.3f%s", eff, base > 1 ? "*" : "");
        char eimb[16];
        if (isnan(t->eimb)) snprintf(eimb, sizeof eimb, "-");
        else snprintf(eimb, sizeof eimb, "%.3f", t->eimb);
        fprintf(out, "  %-14s %5d %11.1f %9.2f %9.2f %9.2f %9.2f %8.3f %8s %10s\n", t->label, t->world, t->sps, t->step50,
                t->step99, t->comm50, t->wait50, t->imb, eimb, effs);
    }
    int approx = 0;
    for (size_t i = 0; i < d->nt; i++) {
        int base;
        double e = s_efficiency(d, i, &base);
        if (!isnan(e) && base > 1) approx = 1;
    }
    if (approx) fprintf(out, "# * no world-1 run for that engine: efficiency relative to its smallest world\n");
}

static void s_print_model(FILE *out, const s_data_t *d)
{
    fprintf(out, "#\n# model: predicted against measured (time in us; err = (pred - meas) / meas)\n");
    fprintf(out, "# %-6s %-14s %5s %10s %12s %12s %8s\n", "what", "engine", "world", "size", "pred(us)", "meas(us)", "err%");
    double sum = 0;
    int n = 0, nextra = 0;
    for (size_t i = 0; i < d->nm; i++) {
        const s_model_t *m = &d->m[i];
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
    if (!nextra) return;
    /* predictions without a measurement: the extrapolation in P, one row per engine and size */
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
        const s_model_t *m = &d->m[i];
        if (m->meas_us > 0) continue;
        int first = 1;
        for (size_t j = 0; j < i; j++)
            if (d->m[j].meas_us <= 0 && !strcmp(d->m[j].label, m->label) && !strcmp(d->m[j].what, m->what) && d->m[j].bytes == m->bytes) first = 0;
        if (!first) continue;
        char sz[32];
        s_fmt_bytes(m->bytes, sz, sizeof sz);
        fprintf(out, "  %-14s %10s", m->label, sz);
        for (int k = 0; k < nw; k++) {
            double v = -1;
            for (size_t j = i; j < d->nm; j++)
                if (d->m[j].meas_us <= 0 && d->m[j].world == worlds[k] && !strcmp(d->m[j].label, m->label) &&
                    !strcmp(d->m[j].what, m->what) && d->m[j].bytes == m->bytes) v = d->m[j].pred_us;
            if (v >= 0) fprintf(out, " %8.2f", v / 1e3);
            else fprintf(out, " %8s", "-");
        }
        fprintf(out, "\n");
    }
}

/* ---- plots -------------------------------------------------------------------------------------- */

static int s_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
    return 0;
}

/* Run argv (no shell) with stdin from /dev/null, stdout to /dev/null and stderr to errpath; returns
 * its exit code, or -1 when it could not run. */
static int s_run(char **argv, const char *errpath)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY), out = open("/dev/null", O_WRONLY);
        int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *s_gnuplot(void)
{
    const char *e = getenv("SYNCBENCH_GNUPLOT");
    if (e) return *e ? e : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    static char found[4096];
    const char *p = path;
    while (*p) {
        const char *c = strchr(p, ':');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        snprintf(found, sizeof found, "%.*s/gnuplot", (int)n, p);
        if (n && access(found, X_OK) == 0) return found;
        p += n + (c ? 1 : 0);
    }
    return NULL;
}

/* gnuplot quoting: labels are already restricted to safe characters */
static void s_plot_head(FILE *gp, const char *title, const char *xl, const char *yl)
{
    fprintf(gp, "reset\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset grid\nset key outside right top\n", title, xl, yl);
}

/* Write one figure name.{png,svg}: body is the plot command(s) after the settings. */
static void s_figure(FILE *gp, const char *dir, const char *name, const char *pngterm, const char *settings, const char *body)
{
    fprintf(gp, "%s", settings);
    fprintf(gp, "set terminal %s size 1000,600\nset output '%s/%s.png'\n%s\n", pngterm, dir, name, body);
    fprintf(gp, "set terminal svg size 1000,600 dynamic\nset output '%s/%s.svg'\n%s\nset output\n", dir, name, body);
}

/* Appends to a growing string buffer. */
typedef struct { char *s; size_t n, cap; } s_buf_t;
static void s_bprintf(s_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_bprintf(s_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->s && b->n + (size_t)n < b->cap) { b->n += (size_t)n; return; }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) return;
        b->s = s;
        b->cap = cap;
    }
}

static int s_plots(FILE *out, const s_data_t *d, s_col_t *cols, size_t nc, const char *dir, int *nfig)
{
    *nfig = 0;
    if (s_mkdirs(dir) < 0) {
        fprintf(stderr, "harness: report: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/report.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "harness: report: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    const char *gnuplot = s_gnuplot();
    const char *pngterm = "pngcairo";
    if (gnuplot) {
        char *av[] = {(char *)gnuplot, "-e", "set terminal pngcairo", NULL};
        if (s_run(av, "/dev/null") != 0) pngterm = "png";
    }
    fprintf(gp, "# report.gp: written by harness report; run `gnuplot report.gp` in any folder\n");
    s_buf_t body = {0};
    char set[1024];

    /* 1. busbw against size, one line per engine@world */
    if (nc) {
        snprintf(path, sizeof path, "%s/bench_busbw.dat", dir);
        FILE *f = fopen(path, "w");
        if (f) {
            body.n = 0;
            s_bprintf(&body, "plot ");
            for (size_t c = 0; c < nc; c++) {
                fprintf(f, "# %s@%d: bytes busbw_gbs time_us\n", cols[c].label, cols[c].world);
                for (size_t i = 0; i < d->nb; i++)
                    if (d->b[i].world == cols[c].world && !strcmp(d->b[i].label, cols[c].label))
                        fprintf(f, "%.0f %.6f %.3f\n", d->b[i].bytes, d->b[i].busbw, d->b[i].time_us);
                fprintf(f, "\n\n");
                s_bprintf(&body, "%s'%s/bench_busbw.dat' index %zu using 1:2 with linespoints title '%s P=%d'", c ? ", " : "",
                          dir, c, cols[c].label, cols[c].world);
            }
            fclose(f);
            s_plot_head(gp, "allreduce bus bandwidth", "message size (bytes)", "busbw (GB/s)");
            snprintf(set, sizeof set, "set logscale x 2\nset format x '%%.0b%%BB'\n");
            s_figure(gp, dir, "bench_busbw", pngterm, set, body.s);
            (*nfig)++;
        }
    }
    /* 2-4. train: step time and scaling efficiency against P; memory per rank */
    if (d->nt) {
        snprintf(path, sizeof path, "%s/train.dat", dir);
        FILE *f = fopen(path, "w");
        char labels[64][S_LABEL];
        size_t nl = 0;
        for (size_t i = 0; i < d->nt && nl < 64; i++)
            if (!nl || strcmp(labels[nl - 1], d->t[i].label)) snprintf(labels[nl++], S_LABEL, "%s", d->t[i].label);
        if (f) {
            for (size_t l = 0; l < nl; l++) {
                fprintf(f, "# %s: world step_ms_p50 step_ms_p99 samples_per_s scaling_eff\n", labels[l]);
                for (size_t i = 0; i < d->nt; i++) {
                    if (strcmp(d->t[i].label, labels[l])) continue;
                    int base;
                    double e = s_efficiency(d, i, &base);
                    fprintf(f, "%d %.4f %.4f %.3f ", d->t[i].world, d->t[i].step50, d->t[i].step99, d->t[i].sps);
                    if (isnan(e)) fprintf(f, "NaN\n");
                    else fprintf(f, "%.4f\n", e);
                }
                fprintf(f, "\n\n");
            }
            fclose(f);
            body.n = 0;
            s_bprintf(&body, "plot ");
            for (size_t l = 0; l < nl; l++)
                s_bprintf(&body, "%s'%s/train.dat' index %zu using 1:2 with linespoints title '%s'", l ? ", " : "", dir, l, labels[l]);
            s_plot_head(gp, "training step time (p50) against workers", "workers P", "step time p50 (ms)");
            snprintf(set, sizeof set, "set logscale x 2\nset xtics 2\nset yrange [0:*]\n");
            s_figure(gp, dir, "train_step", pngterm, set, body.s);
            (*nfig)++;
            body.n = 0;
            s_bprintf(&body, "plot ");
            for (size_t l = 0; l < nl; l++)
                s_bprintf(&body, "%s'%s/train.dat' index %zu using 1:5 with linespoints title '%s'", l ? ", " : "", dir, l, labels[l]);
            s_bprintf(&body, ", 1 with lines dashtype 2 lc rgb 'gray' title 'ideal'");
            s_plot_head(gp, "scaling efficiency  sps(P) / (P sps(1))", "workers P", "efficiency");
            snprintf(set, sizeof set, "set logscale x 2\nset xtics 2\nset yrange [0:1.2]\n");
            s_figure(gp, dir, "train_scaling", pngterm, set, body.s);
            (*nfig)++;
        }
        /* memory per rank: the largest world of each engine */
        snprintf(path, sizeof path, "%s/train_memory.dat", dir);
        f = fopen(path, "w");
        if (f) {
            body.n = 0;
            s_bprintf(&body, "plot ");
            size_t k = 0;
            for (size_t l = 0; l < nl; l++) {
                const s_train_t *best = NULL;
                for (size_t i = 0; i < d->nt; i++)
                    if (!strcmp(d->t[i].label, labels[l]) && d->t[i].nmem && (!best || d->t[i].world > best->world)) best = &d->t[i];
                if (!best) continue;
                fprintf(f, "# %s@%d: rank peak_MiB\n", best->label, best->world);
                for (size_t r = 0; r < best->nmem; r++) fprintf(f, "%zu %.3f\n", r, best->mem[r] / 1048576.0);
                fprintf(f, "\n\n");
                s_bprintf(&body, "%s'%s/train_memory.dat' index %zu using 1:2 with linespoints title '%s P=%d (imb %.2f)'",
                          k ? ", " : "", dir, k, best->label, best->world, best->imb);
                k++;
            }
            fclose(f);
            if (k) {
                s_plot_head(gp, "peak memory per rank (balance)", "rank", "peak memory (MiB)");
                snprintf(set, sizeof set, "set xtics 1\nset yrange [0:*]\n");
                s_figure(gp, dir, "train_memory", pngterm, set, body.s);
                (*nfig)++;
            }
        }
    }
    /* 5. predicted against measured, and the extrapolation */
    if (d->nm) {
        snprintf(path, sizeof path, "%s/model.dat", dir);
        FILE *f = fopen(path, "w");
        char labels[64][S_LABEL];
        size_t nl = 0;
        for (size_t i = 0; i < d->nm && nl < 64; i++) {
            size_t k = 0;
            while (k < nl && strcmp(labels[k], d->m[i].label)) k++;
            if (k == nl) snprintf(labels[nl++], S_LABEL, "%s", d->m[i].label);
        }
        if (f) {
            size_t nmeas = 0, nextra = 0;
            /* blocks 0..nl-1: measured points per engine; nl..2nl-1: predictions of the largest size
             * (extrapolation) per engine against P */
            for (size_t l = 0; l < nl; l++) {
                fprintf(f, "# %s measured: meas_us pred_us world bytes\n", labels[l]);
                for (size_t i = 0; i < d->nm; i++)
                    if (!strcmp(d->m[i].label, labels[l]) && d->m[i].meas_us > 0) {
                        fprintf(f, "%.3f %.3f %d %.0f\n", d->m[i].meas_us, d->m[i].pred_us, d->m[i].world, d->m[i].bytes);
                        nmeas++;
                    }
                fprintf(f, "\n\n");
            }
            for (size_t l = 0; l < nl; l++) {
                double big = -1;
                for (size_t i = 0; i < d->nm; i++)
                    if (!strcmp(d->m[i].label, labels[l]) && !strcmp(d->m[i].what, "bench") && d->m[i].bytes > big) big = d->m[i].bytes;
                fprintf(f, "# %s predicted allreduce of %.0f bytes: world pred_us\n", labels[l], big);
                for (size_t i = 0; i < d->nm; i++)
                    if (!strcmp(d->m[i].label, labels[l]) && !strcmp(d->m[i].what, "bench") && d->m[i].bytes == big) {
                        fprintf(f, "%d %.3f\n", d->m[i].world, d->m[i].pred_us);
                        nextra++;
                    }
                fprintf(f, "\n\n");
            }
            fclose(f);
            if (nmeas) {
                body.n = 0;
                s_bprintf(&body, "plot ");
                for (size_t l = 0; l < nl; l++)
                    s_bprintf(&body, "'%s/model.dat' index %zu using 1:2 with points pt 7 title '%s', ", dir, l, labels[l]);
                s_bprintf(&body, "x with lines dashtype 2 lc rgb 'gray' title 'exact', 1.15*x with lines dashtype 3 lc rgb 'gray' title '+15%%', 0.85*x with lines dashtype 3 lc rgb 'gray' title '-15%%'");
                s_plot_head(gp, "cost model: predicted against measured", "measured (us)", "predicted (us)");
                snprintf(set, sizeof set, "set logscale xy 10\n");
                s_figure(gp, dir, "model_pred", pngterm, set, body.s);
                (*nfig)++;
            }
            if (nextra) {
                body.n = 0;
                s_bprintf(&body, "plot ");
                for (size_t l = 0; l < nl; l++)
                    s_bprintf(&body, "%s'%s/model.dat' index %zu using 1:($2/1000) with linespoints title '%s'", l ? ", " : "", dir, nl + l, labels[l]);
                s_plot_head(gp, "cost model: allreduce time extrapolated in P (largest size)", "workers P", "predicted time (ms)");
                snprintf(set, sizeof set, "set logscale xy 2\n");
                s_figure(gp, dir, "model_extrapolation", pngterm, set, body.s);
                (*nfig)++;
            }
        }
    }
    free(body.s);
    fclose(gp);
    if (!*nfig) return 0;
    if (!gnuplot) {
        fprintf(out, "# note: gnuplot was not found (install gnuplot-nox): no figures drawn; data and script are in %s "
                     "(report.gp)\n", dir);
        *nfig = 0;
        return 0;
    }
    char script[4200], log[4200];
    snprintf(script, sizeof script, "%s/report.gp", dir);
    snprintf(log, sizeof log, "%s/report.gp.log", dir);
    char *av[] = {(char *)gnuplot, script, NULL};
    int rc = s_run(av, log);
    if (rc != 0) {
        fprintf(out, "# note: gnuplot failed (exit %d); see %s; the tables above are complete\n", rc, log);
        *nfig = 0;
        return -1;
    }
    unlink(log);
    return 0;
}

int h_report(int nfiles, char **files, const char *outdir, const char *format)
{
    if (strcmp(format, "text")) {
        fprintf(stderr, "harness: report --format %s is not built yet (text only)\n", format);
        return 2;
    }
    if (nfiles < 1) {
        fprintf(stderr, "harness: report needs at least one results file (JSON lines, e.g. results/run-latest.jsonl)\n");
        return 2;
    }
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    int rrc = h_jread_files(nfiles, files, &objs, &n, &nbad, stderr);
    s_data_t d = {0};
    int status = 0;
    if (s_collect(objs, n, &d, stderr) < 0) {
        fprintf(stderr, "harness: report: out of memory\n");
        status = 1;
        goto out;
    }
    printf("# syncbench report: %d file%s, %zu results (bench %zu, train %zu, model %zu)", nfiles, nfiles == 1 ? "" : "s",
           n, d.nb, d.nt, d.nm);
    if (nbad) printf(", %zu malformed line%s skipped (listed on stderr)", nbad, nbad == 1 ? "" : "s");
    printf("\n");
    if (!d.nb && !d.nt && !d.nm) {
        printf("# nothing to report\n");
        status = rrc < 0 ? 1 : 0;
        goto out;
    }
    s_col_t *cols = calloc(d.nb ? d.nb : 1, sizeof *cols);
    double *sizes = calloc(d.nb ? d.nb : 1, sizeof *sizes);
    if (!cols || !sizes) {
        free(cols);
        free(sizes);
        status = 1;
        goto out;
    }
    size_t nc = s_bench_cols(&d, cols), ns = s_bench_sizes(&d, sizes);
    if (d.nb) s_print_bench(stdout, &d, cols, nc, sizes, ns);
    if (d.nt) s_print_train(stdout, &d);
    if (d.nm) s_print_model(stdout, &d);
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
    if (s_plots(stdout, &d, cols, nc, dir, &nfig) < 0) status = 1;
    if (nfig) printf("# plots: %d figure%s (PNG + SVG) in %s/\n", nfig, nfig == 1 ? "" : "s", dir);
    free(cols);
    free(sizes);
    if (rrc < 0) status = 1;
out:
    fflush(stdout);
    free(d.b);
    free(d.t);
    free(d.m);
    h_jfree_all(&objs, &n);
    return status;
}
