/* host.c: `harness model`: fits the host cost model (host_cost.h) on the current setup and puts its
 * predictions beside measured results.
 *
 * Probe: ranks 0 and 1 ping-pong over the transport the engines use (core/tp.h: shm, tcp, or tcp
 * through --net's shaped links) for sizes 8 B .. 4 MiB; one-way time = median round trip / 2; alpha
 * and beta from a least-squares fit weighted for relative error. gamma: rank 0 times dt_add (f32) on
 * 4 MiB buffers, mu a memcpy of 4 MiB; kappa: rank 0's CPU time (getrusage, user + sys) per byte it
 * sent and received in the 4 MiB ping-pongs. With --net, the tbf burst netem gives every link
 * (h_netem_burst, wire bytes) becomes payload bytes: burst / (beta * rate in B/s), since beta is the
 * rate's time per payload byte, headers included. cores: this machine's online CPUs for predictions
 * of measured lines (their ranks ran here); the extrapolation to P = 1024 assumes a core per rank. Then rank 0 predicts every measured bench line (allreduce time) and train line (step
 * time = measured compute p50 + predicted allreduce of the gradients, no overlap) from the files,
 * prints predicted, measured and the error, extrapolates each engine to P = 1024, and with --json
 * appends "mode":"model" lines that `harness report` plots. */
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "core/dtype.h"
#include "harness/model/host.h"
#include "harness/model/host_cost.h"
#include "harness/record/jsonl.h"
#include "harness/emulate/netspec.h"
#include "harness/report/report.h"
#include "harness/record/stats.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define S_NSIZES 8
static const size_t s_sizes[S_NSIZES] = {8, 64, 512, 4096, 32768, 262144, 1048576, 4194304};

static double s_cpu_s(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) < 0) return 0;
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* Ping-pong between ranks 0 and 1; rank 0 gets the one-way times (s) in t[] and its CPU time per
 * byte sent or received at the largest size in *kappa. */
static int s_pingpong(comm_t *comm, int tmo, double *t, double *kappa)
{
    int me = comm->rank, peer = 1 - me;
    char *buf = malloc(s_sizes[S_NSIZES - 1]);
    if (!buf) return ERR_NOMEM;
    memset(buf, 0x5a, s_sizes[S_NSIZES - 1]);
    int rc = 0;
    double rtt[64];
    for (int si = 0; si < S_NSIZES; si++) {
        size_t n = s_sizes[si];
        int iters = n <= 32768 ? 41 : n <= 1048576 ? 15 : 7, warm = 3;
        double c0 = 0;
        for (int it = 0; it < warm + iters; it++) {
            if (it == warm) c0 = s_cpu_s();
            double t0 = now_us();
            if (me == 0) {
                CHECK_GOTO(rc, tp_send(comm->tp, peer, buf, n, tmo), out);
                CHECK_GOTO(rc, tp_recv(comm->tp, peer, buf, n, tmo), out);
            } else {
                CHECK_GOTO(rc, tp_recv(comm->tp, peer, buf, n, tmo), out);
                CHECK_GOTO(rc, tp_send(comm->tp, peer, buf, n, tmo), out);
            }
            if (it >= warm) rtt[it - warm] = now_us() - t0;
        }
        if (me == 0) t[si] = h_median(rtt, (size_t)iters) / 2 * 1e-6;
        if (si == S_NSIZES - 1) *kappa = (s_cpu_s() - c0) / (2.0 * (double)n * iters);
    }
out:
    free(buf);
    return rc;
}

static double s_gamma(void)
{
    size_t count = 1u << 20;           /* 4 MiB of f32 */
    float *a = aligned_alloc(64, count * 4), *b = aligned_alloc(64, count * 4);
    if (!a || !b) { free(a); free(b); return 0; }
    for (size_t i = 0; i < count; i++) a[i] = (float)(i % 7), b[i] = (float)(i % 5);
    double t[9];
    dt_add(a, a, b, count, DT_F32); /* warm */
    for (int i = 0; i < 9; i++) {
        double t0 = now_us();
        dt_add(a, a, b, count, DT_F32);
        t[i] = now_us() - t0;
    }
    free(a);
    free(b);
    return h_median(t, 9) * 1e-6 / (double)(count * 4);
}

static double s_mu(void)
{
    size_t bytes = 4u << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double t[9];
    for (int i = 0; i < 9; i++) {
        double t0 = now_us();
        memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
        t[i] = now_us() - t0;
    }
    volatile char sink = a[bytes / 2] + b[bytes / 3];
    (void)sink;
    free(a);
    free(b);
    return h_median(t, 9) * 1e-6 / (double)bytes;
}

/* One engine configuration as results describe it. */
typedef struct {
    char engine[16], impl[32];
    int servers, colocate;
    int has_coloc;   /* the source line had a "colocate" field (keep labels equal to the report's) */
} s_eng_t;

/* Which of the host model's cost rules fits an engine, from its declared schedule at its defaults (4 workers on
 * machines of their own): 'o' owners answer the pieces (h_cm_ps), 'd' a dataflow allreduce (h_cm_tree, whose
 * segments travel a tree), 'l' a lock-step allreduce (h_cm_ring); 0: no schedule (a peer), not modelled. */
static char s_rule(const char *engine)
{
    h_engset_t es;
    memset(&es, 0, sizeof es);
    sched_t s;
    memset(&s, 0, sizeof s);
    sched_env_t env = {.workers = 4, .device = -1};
    char r = 0;
    if (h_engine_opts_init(es.eopts) == 0 && h_engine_schedule(&es, engine, &env, 4 * 2048, 4, &s) == 0)
        r = s.owners ? 'o' : s.dataflow ? 'd' : 'l';
    err_clear();
    h_engine_opts_free(es.eopts);
    sched_free(&s);
    return r;
}

static void s_eng_of(const h_jobj_t *o, s_eng_t *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->engine, sizeof e->engine, "%s", h_jstr(o, "engine", "?"));
    snprintf(e->impl, sizeof e->impl, "%s", h_jstr(o, "impl", "default"));
    e->servers = (int)h_jnum(o, "servers", 0);
    e->has_coloc = h_jis_flag(o, "colocate");
    e->colocate = e->has_coloc ? h_jflag(o, "colocate", 0) : (h_engine_has_servers(e->engine) && e->servers == 0);
}

static int s_eng_same(const s_eng_t *a, const s_eng_t *b)
{
    return !strcmp(a->engine, b->engine) && !strcmp(a->impl, b->impl) && a->servers == b->servers && a->colocate == b->colocate;
}

static void s_eng_label(const s_eng_t *e, char *out, size_t len)
{
    h_engine_label(out, len, e->engine, e->impl, e->servers, e->colocate);
}

/* Predicted allreduce time (s) of engine e with P workers on n bytes; < 0: not modelled. */
static double s_predict(const h_cm_t *m, const s_eng_t *e, int P, double n)
{
    /* host paths only: "default", "host", or a descriptive "<engine>-..." (ps-sync-servers1); GPU
     * implementations (nccl, gpu) are not modelled */
    size_t el = strlen(e->engine);
    int host = !strcmp(e->impl, "default") || !strcmp(e->impl, "host") || (!strncmp(e->impl, e->engine, el) && e->impl[el] == '-');
    if (!host) return -1;
    switch (s_rule(e->engine)) {
    case 'l': return h_cm_ring(m, P, n);
    case 'd': return h_cm_tree(m, P, n, 0);
    case 'o': return h_cm_ps(m, P, e->colocate ? P : (e->servers ? e->servers : 1), e->colocate, n, 0);
    default: return -1;
    }
}


/* What rank 0 prints and appends: the fit, its model lines, the engines seen in bench results. */
typedef struct {
    const char *probe;
    const h_model_cfg_t *o;
    h_lines_t lines;           /* "mode":"model" lines for --json, appended in one write */
    s_eng_t engs[32];
    double big[32];            /* each engine's largest measured size */
    int neng;
} s_ctx_t;

/* meas_s <= 0: predicted only ("meas_us" and "err_pct" null) */
static void s_model_line(s_ctx_t *x, const s_eng_t *e, const char *what, int P, double n, double pred_s, double meas_s,
                         const h_cm_t *m)
{
    json_t *b = json_pack("{s:s, s:s, s:s, s:i, s:i}", "what", what, "engine", e->engine, "impl", e->impl, "world", P,
                          "servers", e->servers);
    if (b && e->has_coloc && json_object_set_new(b, "colocate", json_integer(e->colocate)) != 0) json_decref(b), b = NULL;
    json_t *meas = meas_s > 0 ? json_real(meas_s * 1e6) : json_null();
    json_t *err = meas_s > 0 ? json_real(100.0 * (pred_s - meas_s) / meas_s) : json_null();
    if (h_jmerge(b, json_pack("{s:I, s:f, s:o, s:o, s:f, s:f, s:f, s:s}", "bytes", (json_int_t)llround(n), "pred_us", pred_s * 1e6, "meas_us",
                              meas, "err_pct", err, "alpha_us", m->alpha * 1e6, "beta_ns_per_byte", m->beta * 1e9,
                              "gamma_ns_per_byte", m->gamma * 1e9, "probe", x->probe)) != 0)
        json_decref(b), b = NULL;
    h_lines_add(&x->lines, b);
}

static void s_fmt_bytes(double b, char *out, size_t len)
{
    if (b >= 1048576.0 && fmod(b, 1048576.0) == 0) snprintf(out, len, "%.0fM", b / 1048576.0);
    else if (b >= 1024.0 && fmod(b, 1024.0) == 0) snprintf(out, len, "%.0fK", b / 1024.0);
    else snprintf(out, len, "%.0f", b);
}

/* The fitted parameters, the probe's one-way times against the fit, and the "what":"fit" line. */
static void s_print_fit(s_ctx_t *x, const h_cm_t *m, const double *t)
{
    printf("# syncbench model: probe between ranks 0 and 1 over %s (%d sizes, 8 B .. 4 MiB)\n", x->probe, S_NSIZES);
    printf("#   alpha %.2f us   beta %.4f ns/B (%.3f GB/s)   gamma %.4f ns/B (%.2f GB/s reduction)\n", m->alpha * 1e6,
           m->beta * 1e9, m->beta > 0 ? 1e-9 / m->beta : 0, m->gamma * 1e9, m->gamma > 0 ? 1e-9 / m->gamma : 0);
    printf("#   burst %.0f B (token bucket, payload bytes)   kappa %.4f ns/B (CPU per byte sent or received)   mu %.4f ns/B (memcpy)   cores %d\n",
           m->burst, m->kappa * 1e9, m->mu * 1e9, m->cores);
    printf("# %10s %12s %12s %8s\n", "size", "one-way(us)", "fit(us)", "err%");
    for (int i = 0; i < S_NSIZES; i++) {
        char sz[32];
        s_fmt_bytes((double)s_sizes[i], sz, sizeof sz);
        double f = m->alpha + m->beta * (double)s_sizes[i];
        printf("  %10s %12.2f %12.2f %+8.1f\n", sz, t[i] * 1e6, f * 1e6, 100 * (f - t[i]) / t[i]);
    }
    h_lines_add(&x->lines, json_pack("{s:s, s:i, s:s, s:f, s:f, s:f, s:I, s:f, s:f, s:i}", "what", "fit", "world", 2, "probe", x->probe,
                        "alpha_us", m->alpha * 1e6, "beta_ns_per_byte", m->beta * 1e9, "gamma_ns_per_byte", m->gamma * 1e9,
                        "burst_bytes", (json_int_t)llround(m->burst), "kappa_ns_per_byte", m->kappa * 1e9, "mu_ns_per_byte", m->mu * 1e9,
                        "cores", m->cores));
}

/* Prediction for one result line: what, bytes, measured and predicted time (s); 0, or -1 when the
 * line is not one the model predicts. */
static int s_predict_line(const h_cm_t *m, const h_jobj_t *r, const s_eng_t *e, int P, const char **what, double *bytes,
                          double *meas, double *pred)
{
    const char *mode = h_jstr(r, "mode", "");
    if (!strcmp(mode, "bench")) {
        *what = "bench";
        *bytes = h_jnum(r, "bytes", -1);
        *meas = h_jnum(r, "time_us", -1) * 1e-6;
        if (*bytes <= 0 || *meas <= 0) return -1;
        *pred = s_predict(m, e, P, *bytes);
    } else if (!strcmp(mode, "train")) {
        *what = "train";
        double params = h_jnum(r, "params", -1);
        const char *gd = h_jstr(r, "grad_dtype", "f32");
        *bytes = params * (strcmp(gd, "f32") ? 2 : 4);
        *meas = h_jnum(r, "step_ms_p50", -1) * 1e-3;
        double comp = h_jnum(r, "compute_ms_p50", -1) * 1e-3;
        if (params <= 0 || *meas <= 0 || comp < 0) return -1;
        *pred = s_predict(m, e, P, *bytes);
        if (*pred >= 0) *pred += comp;
    } else {
        return -1;
    }
    return *pred < 0 ? -1 : 0;
}

/* Remember each bench engine and its largest size, for the extrapolation. */
static void s_note_engine(s_ctx_t *x, const s_eng_t *e, double bytes)
{
    int j = 0;
    while (j < x->neng && !s_eng_same(&x->engs[j], e)) j++;
    if (j == x->neng && x->neng < 32) { x->engs[x->neng] = *e; x->big[x->neng] = bytes; x->neng++; }
    else if (j < x->neng && bytes > x->big[j]) x->big[j] = bytes;
}

/* Predicted against measured for every result line the model covers. */
static void s_print_measured(s_ctx_t *x, const h_cm_t *m, const h_jobj_t *objs, size_t n, int nfiles, size_t nbad)
{
    double sum_err = 0, sum_err248 = 0;
    int nerr = 0, nerr248 = 0, within248 = 0;
    if (n) {
        printf("#\n# predicted against measured (%zu result line%s from %d file%s%s)\n", n, n == 1 ? "" : "s", nfiles,
               nfiles == 1 ? "" : "s", nbad ? "; malformed lines skipped" : "");
        printf("# %-6s %-18s %5s %8s %12s %12s %8s\n", "what", "engine", "world", "size", "pred(us)", "meas(us)", "err%");
    }
    for (size_t i = 0; i < n; i++) {
        int P = (int)h_jnum(&objs[i], "world", 0);
        if (P < 1) continue;
        s_eng_t e;
        s_eng_of(&objs[i], &e);
        double bytes, meas, pred;
        const char *what;
        if (s_predict_line(m, &objs[i], &e, P, &what, &bytes, &meas, &pred) < 0) continue;
        char label[64], sz[32];
        s_eng_label(&e, label, sizeof label);
        s_fmt_bytes(bytes, sz, sizeof sz);
        double err = 100.0 * (pred - meas) / meas;
        printf("  %-6s %-18s %5d %8s %12.1f %12.1f %+8.1f\n", what, label, P, sz, pred * 1e6, meas * 1e6, err);
        sum_err += fabs(err), nerr++;
        if (P == 2 || P == 4 || P == 8) {
            sum_err248 += fabs(err), nerr248++;
            within248 += fabs(err) <= 15.0;
        }
        s_model_line(x, &e, what, P, bytes, pred, meas, m);
        if (!strcmp(what, "bench")) s_note_engine(x, &e, bytes);
    }
    if (nerr)
        printf("# mean |err| %.1f%% over %d points; P in {2,4,8}: mean |err| %.1f%%, %d of %d within 15%%\n", sum_err / nerr,
               nerr, nerr248 ? sum_err248 / nerr248 : 0.0, within248, nerr248);
}

/* Without measured bench lines: every modelled engine of the registry at 64 MiB (a parameter server
 * twice: one dedicated server, and colocated). */
static void s_default_engines(s_ctx_t *x)
{
    int j = 0;
    for (int i = 0; i < h_engine_count() && j + 2 <= 32; i++) {
        const char *name = h_engine_at(i)->name;
        char rule = s_rule(name);
        int srv = rule == 'o'; /* owners: a dedicated server, then colocated */
        if (!rule) continue;
        for (int v = 0; v < (srv ? 2 : 1); v++, j++) {
            memset(&x->engs[j], 0, sizeof x->engs[j]);
            snprintf(x->engs[j].engine, sizeof x->engs[j].engine, "%s", name);
            snprintf(x->engs[j].impl, sizeof x->engs[j].impl, "default");
            x->engs[j].has_coloc = 1;
            x->engs[j].colocate = srv && v == 1;
            x->engs[j].servers = srv && v == 0 ? 1 : 0;
            x->big[j] = 64.0 * 1024 * 1024;
        }
    }
    x->neng = j;
}

/* Each engine at its largest measured size, P = 2 .. 1024, a core per rank. */
static void s_print_extrapolation(s_ctx_t *x, const h_cm_t *fit)
{
    h_cm_t mx = *fit;
    mx.cores = 0;
    printf("#\n# extrapolation: predicted allreduce time (ms) of each engine's largest measured size\n# %-18s %8s", "engine", "size");
    for (int P = 2; P <= 1024; P *= 2) printf(" %8d", P);
    printf("\n");
    for (int j = 0; j < x->neng; j++) {
        char label[64], sz[32];
        s_eng_label(&x->engs[j], label, sizeof label);
        s_fmt_bytes(x->big[j], sz, sizeof sz);
        printf("  %-18s %8s", label, sz);
        for (int P = 2; P <= 1024; P *= 2) {
            double p = s_predict(&mx, &x->engs[j], P, x->big[j]);
            printf(" %8.2f", p * 1e3);
            s_model_line(x, &x->engs[j], "bench", P, x->big[j], p, -1, &mx);
        }
        printf("\n");
    }
}

static int s_report(const h_model_cfg_t *o, const comm_t *comm, const h_cm_t *m, const double *t, int nfiles, char **files)
{
    static s_ctx_t ctx;        /* rank 0 only, once per process; too big for a thread's stack */
    s_ctx_t *x = &ctx;
    memset(x, 0, sizeof *x);
    x->probe = tp_kind(comm->tp, 1);
    x->o = o;
    h_lines_open(&x->lines, &o->out, "model");
    s_print_fit(x, m, t);
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    if (nfiles) h_jread_files(nfiles, files, &objs, &n, &nbad, stderr);
    s_print_measured(x, m, objs, n, nfiles, nbad);
    if (!x->neng) s_default_engines(x);
    s_print_extrapolation(x, m);
    fflush(stdout);
    int rc = h_lines_close(&x->lines, "the result lines");
    h_jfree_all(&objs, &n);
    return rc;
}

int h_model(const h_model_cfg_t *o, comm_t *comm)
{
    int nfiles = o->nfiles;
    char **files = o->files;
    if (comm->world < 2)
        return err_set(ERR_INVAL, "model: the probe needs 2 ranks (harness model --procs 2, the default)");
    int tmo = o->timeout_s * 1000;
    double t[S_NSIZES] = {0};
    int rc = 0;
    double kappa = 0;
    if (comm->rank <= 1) rc = s_pingpong(comm, tmo, t, &kappa);
    if (rc < 0) return rc;
    if (comm->rank == 0) {
        h_cm_t m = {0};
        double x[S_NSIZES];
        for (int i = 0; i < S_NSIZES; i++) x[i] = (double)s_sizes[i];
        if (h_cm_fit_ab(x, t, S_NSIZES, &m.alpha, &m.beta) < 0) return err_set(ERR_STATE, "model: the alpha-beta fit failed");
        m.gamma = s_gamma();
        m.mu = s_mu();
        m.kappa = kappa;
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        m.cores = nc > 0 ? (int)nc : 0;
        h_netem_spec_t spec;
        char e[256];
        if (o->net && h_netem_parse(o->net, &spec, e, sizeof e) == 0 && m.beta > 0)
            m.burst = h_netem_burst(&spec) / (m.beta * spec.bits_per_s / 8);
        rc = s_report(o, comm, &m, t, nfiles, files);
    }
    int b = comm_barrier(comm, tmo);
    return rc < 0 ? rc : b;
}
