/* plot.c: the figures of `harness report` (see plot.h). Each figure writes its data file (gnuplot
 * blocks, one per engine) and appends its commands to report.gp, which draws PNG and SVG; gnuplot then
 * runs once on the whole script. Labels reach gnuplot strings already restricted to safe characters; the
 * output directory is written into single-quoted gnuplot strings too, so a directory whose name holds a
 * character gnuplot could act on (quotes, backquote, backslash, $, @, control characters) is refused
 * before anything is written: a results path must never become gnuplot commands. */
#include "harness/report/plot.h"
#include "core/err.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_MAXLABELS 64

/* A growing string buffer (the plot command of one figure). */
typedef struct { char *s; size_t n, cap; } s_buf_t;

/* One report.gp being written. */
typedef struct {
    FILE *gp;
    const char *dir, *pngterm;
    s_buf_t body;
    int nfig;
    FILE *note;                       /* where a figure left out says why */
} s_fig_t;

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

const char *h_plot_gnuplot(void)
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

/* Start a figure's plot command. */
static void s_fig_begin(s_fig_t *f)
{
    f->body.n = 0;
    s_bprintf(&f->body, "plot ");
}

/* Write one figure name.{png,svg}: the head, the settings, then the plot command in f->body. */
static void s_fig_end(s_fig_t *f, const char *name, const char *title, const char *xl, const char *yl, const char *settings)
{
    FILE *gp = f->gp;
    fprintf(gp, "reset\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset grid\nset key outside right top\n", title, xl, yl);
    fprintf(gp, "%s", settings);
    fprintf(gp, "set terminal %s size 1000,600\nset output '%s/%s.png'\n%s\n", f->pngterm, f->dir, name, f->body.s);
    fprintf(gp, "set terminal svg size 1000,600 dynamic\nset output '%s/%s.svg'\n%s\nset output\n", f->dir, name, f->body.s);
    f->nfig++;
}

static FILE *s_dat_open(const s_fig_t *f, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    return fopen(path, "w");
}

/* 1. busbw against size, one line (data block) per engine@world */
static void s_fig_bench(s_fig_t *f, const h_rdata_t *d)
{
    FILE *dat = s_dat_open(f, "bench_busbw.dat");
    if (!dat) return;
    s_fig_begin(f);
    size_t c = 0;
    for (size_t i = 0; i < d->nb; i++) {
        const h_rbench_t *b = &d->b[i];
        int first = !i || b->world != d->b[i - 1].world || strcmp(b->label, d->b[i - 1].label);
        if (first) {
            if (i) fprintf(dat, "\n\n");
            fprintf(dat, "# %s@%d: bytes busbw_gbs time_us\n", b->label, b->world);
            s_bprintf(&f->body, "%s'%s/bench_busbw.dat' index %zu using 1:2 with linespoints title '%s P=%d'", c ? ", " : "",
                      f->dir, c, b->label, b->world);
            c++;
        }
        fprintf(dat, "%.0f %.6f %.3f\n", b->bytes, b->busbw, b->time_us);
    }
    fprintf(dat, "\n\n");
    fclose(dat);
    s_fig_end(f, "bench_busbw", "allreduce bus bandwidth", "message size (bytes)", "busbw (GB/s)",
              "set logscale x 2\nset format x '%.0b%BB'\n");
}

/* 2-3. training step time and scaling efficiency against P, one block per engine */
static void s_fig_train(s_fig_t *f, const h_rdata_t *d, char (*labels)[H_LABEL], size_t nl)
{
    int w0 = d->t[0].world, several = 0;
    for (size_t i = 1; i < d->nt; i++) several |= d->t[i].world != w0;
    if (!several) { /* one point per line is no scaling curve */
        fprintf(f->note, "# plots: every train run has %d worker%s: no step-time or scaling figure against P (give "
                         "--scaling 1,2,4 for one)\n", w0, w0 == 1 ? "" : "s");
        return;
    }
    FILE *dat = s_dat_open(f, "train.dat");
    if (!dat) return;
    for (size_t l = 0; l < nl; l++) {
        fprintf(dat, "# %s: world step_ms_p50 step_ms_p99 samples_per_s scaling_eff\n", labels[l]);
        for (size_t i = 0; i < d->nt; i++) {
            if (strcmp(d->t[i].label, labels[l])) continue;
            int base;
            double e = h_report_efficiency(d, i, &base);
            fprintf(dat, "%d %.4f %.4f %.3f ", d->t[i].world, d->t[i].step50, d->t[i].step99, d->t[i].sps);
            if (isnan(e)) fprintf(dat, "NaN\n");
            else fprintf(dat, "%.4f\n", e);
        }
        fprintf(dat, "\n\n");
    }
    fclose(dat);
    s_fig_begin(f);
    for (size_t l = 0; l < nl; l++)
        s_bprintf(&f->body, "%s'%s/train.dat' index %zu using 1:2 with linespoints title '%s'", l ? ", " : "", f->dir, l, labels[l]);
    s_fig_end(f, "train_step", "training step time (p50) against workers", "workers P", "step time p50 (ms)",
              "set logscale x 2\nset xtics 2\nset yrange [0:*]\n");
    s_fig_begin(f);
    for (size_t l = 0; l < nl; l++)
        s_bprintf(&f->body, "%s'%s/train.dat' index %zu using 1:5 with linespoints title '%s'", l ? ", " : "", f->dir, l, labels[l]);
    s_bprintf(&f->body, ", 1 with lines dashtype 2 lc rgb 'gray' title 'ideal'");
    s_fig_end(f, "train_scaling", "scaling efficiency against workers P", "workers P", "efficiency sps(P) / (P sps(base))",
              "set logscale x 2\nset xtics 2\nset yrange [0:1.2]\n");
}

/* 3b. emulated cluster runs: speedup over one device against GPUs, one line per engine/model/device/link */
static void s_fig_speedup(s_fig_t *f, const h_rdata_t *d, char (*labels)[H_LABEL], size_t nl)
{
    FILE *dat = s_dat_open(f, "train_speedup.dat");
    if (!dat) return;
    s_fig_begin(f);
    size_t k = 0;
    for (size_t l = 0; l < nl; l++) {
        size_t n = 0;
        for (size_t i = 0; i < d->nt; i++)
            if (!strcmp(d->t[i].label, labels[l]) && !isnan(d->t[i].speedup)) {
                if (!n++) fprintf(dat, "# %s: gpus speedup\n", labels[l]);
                fprintf(dat, "%d %.4f\n", d->t[i].world, d->t[i].speedup);
            }
        if (!n) continue;
        fprintf(dat, "\n\n");
        s_bprintf(&f->body, "%s'%s/train_speedup.dat' index %zu using 1:2 with linespoints title '%s'", k ? ", " : "", f->dir, k,
                  labels[l]);
        k++;
    }
    fclose(dat);
    if (!k) return;
    s_bprintf(&f->body, ", x with lines dashtype 2 lc rgb 'gray' title 'ideal'");
    s_fig_end(f, "train_speedup", "emulated cluster: speedup over one device", "GPUs", "speedup",
              "set logscale xy 2\nset xtics 2\nset ytics 2\nset key outside right top font ',8'\n");
}

/* 4. memory per rank, the largest world of each engine: engine memory (what the engine holds: buffers,
 * shards, optimizer state) as bars, peak RSS beside it; dedicated server ranks marked "S" */
static void s_fig_memory(s_fig_t *f, const h_rdata_t *d, char (*labels)[H_LABEL], size_t nl)
{
    FILE *dat = s_dat_open(f, "train_memory.dat");
    if (!dat) return;
    s_fig_begin(f);
    size_t k = 0, x = 0;
    fprintf(dat, "# x engine_MiB rss_MiB label (a blank x between engines)\n");
    for (size_t l = 0; l < nl; l++) {
        const h_rtrain_t *best = NULL;
        for (size_t i = 0; i < d->nt; i++)
            if (!strcmp(d->t[i].label, labels[l]) && d->t[i].nmem && (!best || d->t[i].world > best->world)) best = &d->t[i];
        if (!best) continue;
        for (size_t r = 0; r < best->nmem; r++, x++)
            fprintf(dat, "%zu %.4f %.4f \"%s r%zu%s\"\n", x, r < best->nemem ? best->emem[r] / 1048576.0 : 0.0,
                    best->mem[r] / 1048576.0, best->label, r, (int)r >= best->world ? " S" : "");
        x++;
        k++;
    }
    fclose(dat);
    s_bprintf(&f->body, "'%s/train_memory.dat' using ($1-0.2):2:(0.4):xtic(4) with boxes fill solid 0.8 title 'engine memory', "
              "'%s/train_memory.dat' using ($1+0.2):3:(0.4) with boxes fill pattern 4 title 'peak RSS'", f->dir, f->dir);
    if (k) s_fig_end(f, "train_memory", "memory per rank: engine memory (bars) and peak RSS (S = server rank)", "engine, rank",
                     "MiB", "set xtics rotate by -45 font ',8'\nset yrange [0:*]\nset boxwidth 0.4\n");
}

/* 5. traffic matrices as heat maps: bytes from the sender (row) to the receiver (column), one figure
 * per engine: each train run's largest world, else each bench engine's largest world and size */
static void s_fig_traffic_one(s_fig_t *f, const char *label, int world, const double *m, size_t nm, size_t *k)
{
    size_t n = 0;
    while ((n + 1) * (n + 1) <= nm) n++;
    if (!n || n * n != nm) return;
    char name[64], title[H_LABEL + 96];
    snprintf(name, sizeof name, "traffic_%zu.dat", *k);
    FILE *dat = s_dat_open(f, name);
    if (!dat) return;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) fprintf(dat, "%.6g%s", m[i * n + j] / 1048576.0, j + 1 < n ? " " : "\n");
    fclose(dat);
    s_fig_begin(f);
    s_bprintf(&f->body, "'%s/%s' matrix with image notitle", f->dir, name);
    snprintf(title, sizeof title, "traffic matrix %s P=%d: MiB from sender (row) to receiver (column)", label, world);
    snprintf(name, sizeof name, "traffic_%zu", *k);
    char settings[256];
    snprintf(settings, sizeof settings, "set xrange [-0.5:%zu.5]\nset yrange [%zu.5:-0.5]\nset xtics 1\nset ytics 1\n"
             "set palette defined (0 'white', 1 'orange', 2 'dark-red')\nunset grid\n", n - 1, n - 1);
    s_fig_end(f, name, title, "receiver rank", "sender rank", settings);
    (*k)++;
}

static void s_fig_traffic(s_fig_t *f, const h_rdata_t *d, char (*labels)[H_LABEL], size_t nl)
{
    size_t k = 0;
    for (size_t l = 0; l < nl; l++) {
        const h_rtrain_t *best = NULL;
        for (size_t i = 0; i < d->nt; i++)
            if (!strcmp(d->t[i].label, labels[l]) && d->t[i].traffic && (!best || d->t[i].world > best->world)) best = &d->t[i];
        if (best) s_fig_traffic_one(f, best->label, best->world, best->traffic, best->ntraffic, &k);
    }
    if (nl) return;
    for (size_t i = 0; i < d->nb; i++) {
        const h_rbench_t *b = &d->b[i];
        int last = i + 1 == d->nb || strcmp(d->b[i + 1].label, b->label);
        if (last && b->traffic) s_fig_traffic_one(f, b->label, b->world, b->traffic, b->ntraffic, &k);
    }
}

/* model.dat blocks 0..nl-1: measured points per engine; returns how many */
static size_t s_model_measured(FILE *dat, const h_rdata_t *d, char (*labels)[H_LABEL], size_t nl)
{
    size_t nmeas = 0;
    for (size_t l = 0; l < nl; l++) {
        fprintf(dat, "# %s measured: meas_us pred_us world bytes\n", labels[l]);
        for (size_t i = 0; i < d->nm; i++)
            if (!strcmp(d->m[i].label, labels[l]) && d->m[i].meas_us > 0) {
                fprintf(dat, "%.3f %.3f %d %.0f\n", d->m[i].meas_us, d->m[i].pred_us, d->m[i].world, d->m[i].bytes);
                nmeas++;
            }
        fprintf(dat, "\n\n");
    }
    return nmeas;
}

/* model.dat blocks nl..2nl-1: predictions of each engine's largest size against P; returns how many */
static size_t s_model_extrapolated(FILE *dat, const h_rdata_t *d, char (*labels)[H_LABEL], size_t nl)
{
    size_t nextra = 0;
    for (size_t l = 0; l < nl; l++) {
        double big = -1;
        for (size_t i = 0; i < d->nm; i++)
            if (!strcmp(d->m[i].label, labels[l]) && !strcmp(d->m[i].what, "bench") && d->m[i].bytes > big) big = d->m[i].bytes;
        fprintf(dat, "# %s predicted allreduce of %.0f bytes: world pred_us\n", labels[l], big);
        for (size_t i = 0; i < d->nm; i++)
            if (!strcmp(d->m[i].label, labels[l]) && !strcmp(d->m[i].what, "bench") && d->m[i].bytes == big) {
                fprintf(dat, "%d %.3f\n", d->m[i].world, d->m[i].pred_us);
                nextra++;
            }
        fprintf(dat, "\n\n");
    }
    return nextra;
}

/* 5-6. predicted against measured, and the extrapolation */
static void s_fig_model(s_fig_t *f, const h_rdata_t *d)
{
    char labels[S_MAXLABELS][H_LABEL];
    size_t nl = 0;
    for (size_t i = 0; i < d->nm && nl < S_MAXLABELS; i++) {
        size_t k = 0;
        while (k < nl && strcmp(labels[k], d->m[i].label)) k++;
        if (k == nl) snprintf(labels[nl++], H_LABEL, "%s", d->m[i].label);
    }
    FILE *dat = s_dat_open(f, "model.dat");
    if (!dat) return;
    size_t nmeas = s_model_measured(dat, d, labels, nl), nextra = s_model_extrapolated(dat, d, labels, nl);
    fclose(dat);
    if (nmeas) {
        s_fig_begin(f);
        for (size_t l = 0; l < nl; l++)
            s_bprintf(&f->body, "'%s/model.dat' index %zu using 1:2 with points pt 7 title '%s', ", f->dir, l, labels[l]);
        s_bprintf(&f->body, "x with lines dashtype 2 lc rgb 'gray' title 'exact', 1.15*x with lines dashtype 3 lc rgb 'gray' "
                            "title '+15%%', 0.85*x with lines dashtype 3 lc rgb 'gray' title '-15%%'");
        s_fig_end(f, "model_pred", "cost model: predicted against measured", "measured (us)", "predicted (us)", "set logscale xy 10\n");
    }
    if (nextra) {
        s_fig_begin(f);
        for (size_t l = 0; l < nl; l++)
            s_bprintf(&f->body, "%s'%s/model.dat' index %zu using 1:($2/1000) with linespoints title '%s'", l ? ", " : "", f->dir,
                      nl + l, labels[l]);
        s_fig_end(f, "model_extrapolation", "cost model: allreduce time extrapolated in P (largest size)", "workers P",
                  "predicted time (ms)", "set logscale xy 2\n");
    }
}

/* Every figure's data and commands into f->gp. */
static void s_fig_all(s_fig_t *f, const h_rdata_t *d)
{
    fprintf(f->gp, "# report.gp: written by harness report; run `gnuplot report.gp` in any folder\n");
    if (d->nb) s_fig_bench(f, d);
    char labels[S_MAXLABELS][H_LABEL];
    size_t nl = 0;
    if (d->nt) {
        for (size_t i = 0; i < d->nt && nl < S_MAXLABELS; i++)
            if (!nl || strcmp(labels[nl - 1], d->t[i].label)) snprintf(labels[nl++], H_LABEL, "%s", d->t[i].label);
        s_fig_train(f, d, labels, nl);
        s_fig_speedup(f, d, labels, nl);
        s_fig_memory(f, d, labels, nl);
    }
    s_fig_traffic(f, d, labels, nl);
    if (d->nm) s_fig_model(f, d);
}

/* Run gnuplot on dir/report.gp; its stderr goes to report.gp.log, removed when it succeeds. */
static int s_gnuplot_run(const char *gnuplot, const char *dir, FILE *note)
{
    char script[4200], log[4200];
    snprintf(script, sizeof script, "%s/report.gp", dir);
    snprintf(log, sizeof log, "%s/report.gp.log", dir);
    char *av[] = {(char *)gnuplot, script, NULL};
    int rc = s_run(av, log);
    if (rc != 0) {
        fprintf(note, "# note: gnuplot failed (exit %d); see %s; the tables above are complete\n", rc, log);
        return err_set(ERR_IO, "report: gnuplot failed (exit %d); see %s", rc, log);
    }
    unlink(log);
    return 0;
}

/* 0 when dir can sit inside a single-quoted gnuplot string as is. */
static int s_dir_safe(const char *dir)
{
    for (const unsigned char *c = (const unsigned char *)dir; *c; c++)
        if (*c < 0x20 || *c == 0x7f || strchr("'\"`\\$@", *c))
            return err_set(ERR_INVAL, "report: the plot directory '%s' holds a character (%s) that a gnuplot script cannot "
                           "carry safely: rename it or choose another output directory", dir,
                           *c < 0x20 || *c == 0x7f ? "a control character" : *c == '\'' ? "a quote" : "one of \" ` \\ $ @");
    return 0;
}

int h_plot_report(const h_rdata_t *d, const char *dir, FILE *note, int *nfig)
{
    *nfig = 0;
    CHECK(s_dir_safe(dir));
    if (s_mkdirs(dir) < 0) return err_set(ERR_IO, "report: cannot create %s: %s", dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/report.gp", dir);
    s_fig_t f = {.dir = dir, .pngterm = "pngcairo", .note = note};
    f.gp = fopen(path, "w");
    if (!f.gp) return err_set(ERR_IO, "report: cannot write %s: %s", path, strerror(errno));
    const char *gnuplot = h_plot_gnuplot();
    if (gnuplot) {
        char *av[] = {(char *)gnuplot, "-e", "set terminal pngcairo", NULL};
        if (s_run(av, "/dev/null") != 0) f.pngterm = "png";
    }
    s_fig_all(&f, d);
    free(f.body.s);
    fclose(f.gp);
    if (!f.nfig) return 0;
    if (!gnuplot) {
        fprintf(note, "# note: gnuplot was not found (install gnuplot-nox): no figures drawn; data and script are in %s "
                      "(report.gp)\n", dir);
        return 0;
    }
    int rc = s_gnuplot_run(gnuplot, dir, note);
    if (rc == 0) *nfig = f.nfig;
    return rc;
}
