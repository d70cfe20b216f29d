/* calib.c (harness/model): the cost model's calibration (calib.h): which bench lines calibrate which
 * constant, the fits, and the calibration document.
 *
 * The rules, fixed before any check was looked at (issue 35, section 4), one per constant:
 *  - a bench line calibrates when it ran on shaped links (--net), under the model's TCP congestion control
 *    and the default shaper queue (emulation-cc and emulation-queue measure both changing how flows share a
 *    NIC), every element right, not host-bound (it then measured this machine's CPU), with loop_us (the
 *    slowest worker's steady time a collective, what a training step compares with);
 *  - every line's configuration is the registry layout it ran (model/conf.c); its rules are its schedule's;
 *  - alpha (s a message in series) from the lines of the allreduce engines at their defaults (a schedule without
 *    owners, a layout without options: ring and tree; the hierarchical ring's lines calibrate nothing, as before
 *    the model read schedules) across two or more machines, running the algorithm their schedule declares there
 *    (not the one-shot of small sizes): least squares
 *    of the relative residual of the byte-only model, held at 0 when negative (the tbf burst lets a small
 *    message through faster than its rate: net-bench's 64 KiB ring lines take 0.95 of their wire time);
 *  - the incast law's c from one sync server fed by P ranks on links of their own (`bench --net bw=RATE`):
 *    least squares of measured / modelled - 1 against P - 1 (h_cl_incast_fit);
 *  - a layout with servers on the GPU machines (one per machine, colocated): the median of its lines'
 *    measured / modelled time on those machines;
 *  - servers on K machines of their own (one server a machine, K = 1 .. N, every worker pushing: not with
 *    machine-local aggregation, whose leaders alone push): on the same N x G, the median
 *    at each K, and a + c (K - 1) through them by least squares (c = 0 with one K measured); K is held in
 *    the measured range.
 * Every ratio constant is kept per partition wire time (a partition's bytes on its lines' link): ps-incast
 * measures 128 KiB and 4 MiB partitions on the same links, and their slowdowns differ. A prediction takes
 * the constant whose wire time is nearest its own partition's, with no threshold. Samples are sorted
 * before any sum, so the files' order changes nothing. */
#include "harness/model/calib.h"
#include "harness/model/cluster_int.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_kind_names[H_CAL_NKINDS] = {"alpha", "incast", "layout", "servers"};

/* A bench line's steady time a collective: loop_us (0: from before bench wrote it). */
#define S_LOOP_US(r) h_jnum((r), "loop_us", 0)

static int s_cmp_sample(const void *a, const void *b)
{
    const h_cal_sample_t *x = a, *y = b;
#define S_CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
    S_CMP(kind); S_CMP(glayout);
    /* the group first (incast: its partition's wire time; per machines: N, G and that), then the rest */
    int gm = x->kind == H_CAL_LAYOUT || x->kind == H_CAL_SERVERS;
    if (gm) { S_CMP(N); S_CMP(G); }
    S_CMP(part_wire); S_CMP(K); S_CMP(N); S_CMP(G); S_CMP(P); S_CMP(layout);
    S_CMP(bytes); S_CMP(beta); S_CMP(part); S_CMP(measured);
#undef S_CMP
    return 0;
}

/* The model's time of one collective alone (one bucket of n bytes ready at once, no compute) with
 * slowdowns and alpha as given: the bench's prediction. */
static double s_bench_time(const h_cal_sample_t *s, double alpha, double incast, int fmax, double slow)
{
    h_cl_net_t cn = {.nodes = s->N, .gpus_per_node = s->G, .beta = s->beta, .alpha = alpha};
    double ready = 0, bytes = s->bytes;
    h_cl_engine_t e;
    if (h_mc_traffic(&s->conf, s->N, s->G, &e, NULL) < 0) return NAN;
    if (s->kind == H_CAL_ALPHA) return h_cl_collective(&cn, &e, s->bytes);
    e.pipelined = 1;
    e.part_bytes = s->part;
    e.incast = incast;
    e.incast_fmax = fmax;
    e.slow = slow;
    return h_cl_step(&cn, &e, 1, &ready, &bytes, 0, NULL);
}

/* One bench line as a sample of its constant (0: it calibrates none). */
static int s_sample_of(const h_jobj_t *r, const char *cc, h_cal_sample_t *s)
{
    memset(s, 0, sizeof *s);
    const char *net = h_jstr(r, "net", ""), *eng = h_jstr(r, "engine", ""), *impl = h_jstr(r, "impl", "");
    h_netem_spec_t spec;
    char err[256];
    if (strcmp(h_jstr(r, "mode", ""), "bench") || h_jget(r, "emulated") || h_jget(r, "in_place") || !*net || S_LOOP_US(r) <= 0 ||
        h_jnum(r, "wrong", 0) != 0 || h_jflag(r, "host_bound", 0) || h_netem_parse(net, &spec, err, sizeof err) < 0 ||
        spec.bits_per_s <= 0 || spec.queue_ms != H_NETEM_QUEUE_MS || !h_mc_line_cc_is(r, cc))
        return 0;
    int P = (int)h_jnum(r, "world", 0), inter = !strncmp(net, "inter=", 6);
    if (P < 1) return 0;
    if (inter) {
        s->N = (int)h_jnum(r, "nodes", 0);
        if (s->N < 1 || P % s->N || (int)h_jnum(r, "gpus_per_node", 0) != P / s->N) return 0;
        s->G = P / s->N;
    } else if (!spec.per_node) {
        s->N = P, s->G = 1; /* bw=: a link of its own per rank */
    } else
        return 0;
    s->P = P;
    s->beta = S_WIRE * 8.0 / (spec.bits_per_s * spec.eff);
    s->bytes = h_jnum(r, "bytes", 0);
    s->measured = S_LOOP_US(r) * 1e-6;
    s->glayout = -1;
    if (!(s->bytes > 0)) return 0;
    /* the configuration the line ran; bw= (a link each): a server is a machine of its own */
    int S = (int)h_jnum(r, "servers", 0);
    int K = inter ? (int)h_jnum(r, "server_nodes", 0) : h_engine_has_servers(eng) ? 1 : 0;
    if (h_mc_conf_of_run(r, s->N, K, &s->conf) < 0) return 0;
    s->layout = s->conf.row;
    h_cl_engine_t e;
    char algo[16];
    if (h_mc_traffic(&s->conf, s->N, s->G, &e, algo) < 0) {
        err_clear();
        return 0;
    }
    char sync[24];
    snprintf(sync, sizeof sync, "%s-sync", eng); /* the descriptive impl of a synchronous configuration */
    if (!e.owners) {
        /* alpha: the engines at their defaults across two or more machines, running the algorithm their schedule
         * declares there (a bench's small sizes may run another: the ring's one-shot) */
        if (s->N < 2 || !h_mc_conf_plain(&s->conf) || strcmp(h_jstr(r, "algo", algo), algo)) return 0;
        s->kind = H_CAL_ALPHA;
    } else if (!strncmp(impl, sync, strlen(sync))) {
        s->part = S_LINE_PART(r, e.part_bytes);
        if (!(s->part > 0)) return 0;
        s->part_wire = s->part * s->beta;
        if (!inter) {
            if (S != 1 || h_engine_label_colocated(impl)) return 0;
            s->kind = H_CAL_INCAST;
            s->K = 1;
        } else if (e.own_machines) { /* server machines of their own, every worker pushing (as the lookup) */
            s->kind = H_CAL_SERVERS;
            s->K = K;
            if (K < 1 || S != K || e.fan_in != P) return 0;
        } else {
            s->kind = H_CAL_LAYOUT;
            s->glayout = s->layout;
        }
    } else
        return 0;
    /* the model without any slowdown, split into its bytes' time and its messages in series */
    s->t_beta = s_bench_time(s, 0, 0, 0, 0);
    h_cal_sample_t one = *s;
    one.beta = 0;
    s->msgs = s_bench_time(&one, 1, 0, 0, 0);
    return s->t_beta > 0 && isfinite(s->msgs);
}

int h_cal_samples(int nfiles, char **files, const char *cc, h_cal_sample_t **out, size_t *nout, h_cal_file_t *finfo)
{
    *out = NULL;
    *nout = 0;
    size_t cap = 0;
    for (int fi = 0; fi < nfiles; fi++) {
        h_jobj_t *objs = NULL;
        size_t n = 0, nbad = 0;
        int rc = h_jread_files(1, &files[fi], &objs, &n, &nbad, NULL);
        if (rc == 0 && nbad) rc = err_set(ERR_CORRUPT, "%s: %zu malformed result lines (harness report %s names them)",
                                          files[fi], nbad, files[fi]);
        if (rc < 0) {
            h_jfree_all(&objs, &n);
            free(*out);
            *out = NULL;
            *nout = 0;
            return rc;
        }
        if (finfo) finfo[fi].lines = (long)n, finfo[fi].bench = finfo[fi].used = 0;
        for (size_t i = 0; i < n; i++) {
            if (finfo && !strcmp(h_jstr(&objs[i], "mode", ""), "bench")) finfo[fi].bench++;
            h_cal_sample_t s;
            if (!s_sample_of(&objs[i], cc, &s)) continue;
            s.file = fi;
            if (*nout == cap) {
                size_t nc = cap ? cap * 2 : 256;
                h_cal_sample_t *np = realloc(*out, nc * sizeof *np);
                if (!np) {
                    h_jfree_all(&objs, &n);
                    free(*out);
                    *out = NULL;
                    *nout = 0;
                    return err_set(ERR_NOMEM, "model fit");
                }
                *out = np, cap = nc;
            }
            (*out)[(*nout)++] = s;
        }
        h_jfree_all(&objs, &n);
    }
    if (*nout) qsort(*out, *nout, sizeof **out, s_cmp_sample);
    return 0;
}

static h_cal_const_t *s_add(h_cal_t *cal, const h_cal_sample_t *s)
{
    h_cal_const_t *nc = realloc(cal->c, (size_t)(cal->n + 1) * sizeof *nc);
    if (!nc) return NULL;
    cal->c = nc;
    h_cal_const_t *c = &cal->c[cal->n++];
    memset(c, 0, sizeof *c);
    c->kind = s->kind;
    c->nodes = s->N, c->gpn = s->G, c->part_wire = s->part_wire;
    if (s->kind == H_CAL_LAYOUT) snprintf(c->layout, sizeof c->layout, "%s", s->conf.label);
    return c;
}

static int s_same_group(const h_cal_sample_t *a, const h_cal_sample_t *b)
{
    if (a->kind != b->kind) return 0;
    if (a->kind == H_CAL_ALPHA) return 1;
    if (a->kind == H_CAL_INCAST) return a->part_wire == b->part_wire;
    return a->glayout == b->glayout && a->N == b->N && a->G == b->G && a->part_wire == b->part_wire;
}

double h_cal_sample_ratio(const h_cal_sample_t *s, double alpha)
{
    return (s->measured - alpha * s->msgs) / s->t_beta;
}

int h_cal_fit(h_cal_t *cal, int nfiles, char **files, const char *cc)
{
    memset(cal, 0, sizeof *cal);
    snprintf(cal->cc, sizeof cal->cc, "%s", cc);
    if (nfiles > 64) return err_set(ERR_INVAL, "model fit: at most 64 files (%d given)", nfiles);
    cal->files = calloc((size_t)(nfiles > 0 ? nfiles : 1), sizeof *cal->files);
    if (!cal->files) return err_set(ERR_NOMEM, "model fit");
    cal->nfiles = nfiles;
    for (int i = 0; i < nfiles; i++)
        if (!(cal->files[i].path = strdup(files[i]))) return err_set(ERR_NOMEM, "model fit");
    h_cal_sample_t *s;
    size_t n;
    CHECK(h_cal_samples(nfiles, files, cc, &s, &n, cal->files));
    int rc = 0;
    /* alpha first: the ratio constants are measured over the model with it */
    double alpha = 0;
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a; b < n && s_same_group(&s[a], &s[b]); b++) {}
        h_cal_const_t *c = s_add(cal, &s[a]);
        if (!c) { rc = err_set(ERR_NOMEM, "model fit"); break; }
        c->lines = (int)(b - a);
        for (size_t i = a; i < b; i++) {
            c->files |= 1ull << s[i].file;
            cal->files[s[i].file].used++;
        }
        if (s[a].kind == H_CAL_ALPHA) {
            double sxy = 0, sxx = 0;
            for (size_t i = a; i < b; i++) {
                double x = s[i].msgs / s[i].measured, y = (s[i].measured - s[i].t_beta) / s[i].measured;
                sxy += x * y, sxx += x * x;
            }
            c->raw = sxx > 0 ? sxy / sxx : 0;
            c->value = alpha = fmax(0, c->raw);
        } else if (s[a].kind == H_CAL_INCAST) {
            int *f = calloc(b - a, sizeof *f);
            double *r = calloc(b - a, sizeof *r);
            if (!f || !r) { free(f); free(r); rc = err_set(ERR_NOMEM, "model fit"); break; }
            c->kmin = c->kmax = s[a].P;
            for (size_t i = a; i < b; i++) {
                f[i - a] = s[i].P, r[i - a] = h_cal_sample_ratio(&s[i], alpha);
                if (s[i].P > c->kmax) c->kmax = s[i].P;
                if (s[i].P < c->kmin) c->kmin = s[i].P;
            }
            c->value = h_cl_incast_fit((int)(b - a), f, r);
            if (!isfinite(c->value)) c->value = 0; /* only single workers: nothing to slow */
            free(f);
            free(r);
        } else {
            double *r = calloc(b - a, sizeof *r), *kx = calloc(b - a, sizeof *kx), *ky = calloc(b - a, sizeof *ky);
            if (!r || !kx || !ky) { free(r); free(kx); free(ky); rc = err_set(ERR_NOMEM, "model fit"); break; }
            /* per K (sorted by K inside the group): the median, then a + c (K - 1) through the medians */
            int nk = 0;
            c->kmin = s[a].K, c->kmax = s[a].K;
            for (size_t i = a, j; i < b; i = j) {
                int m = 0;
                for (j = i; j < b && s[j].K == s[i].K; j++) r[m++] = h_cal_sample_ratio(&s[j], alpha);
                kx[nk] = s[i].K - 1, ky[nk++] = h_median(r, (size_t)m);
                if (s[i].K > c->kmax) c->kmax = s[i].K;
                if (s[i].K < c->kmin) c->kmin = s[i].K;
            }
            if (nk == 1) c->value = ky[0];
            else {
                double mx = 0, my = 0, sxy = 0, sxx = 0;
                for (int k = 0; k < nk; k++) mx += kx[k] / nk, my += ky[k] / nk;
                for (int k = 0; k < nk; k++) sxy += (kx[k] - mx) * (ky[k] - my), sxx += (kx[k] - mx) * (kx[k] - mx);
                c->slope = sxy / sxx;
                c->value = my - c->slope * mx;
            }
            free(r);
            free(kx);
            free(ky);
        }
    }
    free(s);
    return rc;
}

void h_cal_free(h_cal_t *cal)
{
    for (int i = 0; cal->files && i < cal->nfiles; i++) free(cal->files[i].path);
    free(cal->files);
    free(cal->c);
    memset(cal, 0, sizeof *cal);
}

json_t *h_cal_json(const h_cal_t *cal)
{
    json_t *doc = json_object(), *files = json_array(), *consts = json_array();
    json_object_set_new(doc, "kind", json_string("calibration"));
    json_object_set_new(doc, "model", json_string("emulated cluster cost model (harness/model/cluster_cost.c)"));
    json_object_set_new(doc, "split", json_string(H_CAL_SPLIT));
    json_object_set_new(doc, "cc", json_string(cal->cc));
    json_object_set_new(doc, "given", json_pack("{s:f, s:s}", "wire_per_payload_byte", S_WIRE, "beta",
                                                "1 / (rate x eff) x 1514/1448 from each line's --net (not fitted)"));
    for (int i = 0; i < cal->nfiles; i++)
        json_array_append_new(files, json_pack("{s:s, s:I, s:I, s:I}", "path", cal->files[i].path, "lines",
                                               (json_int_t)cal->files[i].lines, "bench_lines",
                                               (json_int_t)cal->files[i].bench, "used", (json_int_t)cal->files[i].used));
    json_object_set_new(doc, "files", files);
    for (int k = 0; k < cal->n; k++) {
        const h_cal_const_t *c = &cal->c[k];
        json_t *j = json_pack("{s:s, s:f, s:i}", "kind", s_kind_names[c->kind], "value", c->value, "lines", c->lines);
        if (c->kind == H_CAL_ALPHA) json_object_set_new(j, "fitted", json_real(c->raw));
        if (c->kind != H_CAL_ALPHA) json_object_set_new(j, "part_wire_s", json_real(c->part_wire));
        if (c->kind == H_CAL_LAYOUT) json_object_set_new(j, "layout", json_string(c->layout));
        if (c->kind == H_CAL_LAYOUT || c->kind == H_CAL_SERVERS) {
            json_object_set_new(j, "nodes", json_integer(c->nodes));
            json_object_set_new(j, "gpus_per_node", json_integer(c->gpn));
        }
        if (c->kind == H_CAL_INCAST) {
            json_object_set_new(j, "fmin", json_integer(c->kmin));
            json_object_set_new(j, "fmax", json_integer(c->kmax));
        }
        if (c->kind == H_CAL_SERVERS) {
            json_object_set_new(j, "slope", json_real(c->slope));
            json_object_set_new(j, "kmin", json_integer(c->kmin));
            json_object_set_new(j, "kmax", json_integer(c->kmax));
        }
        json_t *from = json_array();
        for (int i = 0; i < cal->nfiles; i++)
            if (c->files >> i & 1) json_array_append_new(from, json_string(cal->files[i].path));
        json_object_set_new(j, "files", from);
        json_array_append_new(consts, j);
    }
    json_object_set_new(doc, "constants", consts);
    return doc;
}

static int s_bad(const char *path, const char *what) { return err_set(ERR_CORRUPT, "%s: not a calibration: %s", path, what); }

int h_cal_load(h_cal_t *cal, const char *path)
{
    memset(cal, 0, sizeof *cal);
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!doc && je.line < 1) return err_set(ERR_IO, "%s", je.text);
    if (!doc) return err_set(ERR_CORRUPT, "%s: line %d: %s", path, je.line, je.text);
    int rc = 0;
    json_t *files = json_object_get(doc, "files"), *consts = json_object_get(doc, "constants");
    const char *kind = json_string_value(json_object_get(doc, "kind")), *cc = json_string_value(json_object_get(doc, "cc"));
    if (!kind || strcmp(kind, "calibration") || !cc || !json_is_array(files) || !json_is_array(consts) ||
        json_array_size(files) > 64) {
        json_decref(doc);
        return s_bad(path, "it needs \"kind\": \"calibration\", \"cc\", \"files\" (at most 64) and \"constants\"");
    }
    snprintf(cal->cc, sizeof cal->cc, "%s", cc);
    cal->nfiles = (int)json_array_size(files);
    cal->files = calloc((size_t)cal->nfiles + 1, sizeof *cal->files);
    cal->c = calloc(json_array_size(consts) + 1, sizeof *cal->c);
    if (!cal->files || !cal->c) rc = err_set(ERR_NOMEM, "model check");
    for (int i = 0; rc == 0 && i < cal->nfiles; i++) {
        json_t *f = json_array_get(files, (size_t)i);
        const char *p = json_string_value(json_object_get(f, "path"));
        if (!p || !json_is_integer(json_object_get(f, "lines"))) { rc = s_bad(path, "a file without \"path\" and \"lines\""); break; }
        if (!(cal->files[i].path = strdup(p))) { rc = err_set(ERR_NOMEM, "model check"); break; }
        cal->files[i].lines = (long)json_integer_value(json_object_get(f, "lines"));
        cal->files[i].bench = (long)json_integer_value(json_object_get(f, "bench_lines"));
        cal->files[i].used = (long)json_integer_value(json_object_get(f, "used"));
    }
    for (size_t k = 0; rc == 0 && k < json_array_size(consts); k++) {
        json_t *j = json_array_get(consts, k);
        const char *kn = json_string_value(json_object_get(j, "kind"));
        h_cal_const_t *c = &cal->c[cal->n];
        int kk = -1;
        for (int i = 0; kn && i < H_CAL_NKINDS; i++)
            if (!strcmp(kn, s_kind_names[i])) kk = i;
        if (kk < 0 || !json_is_number(json_object_get(j, "value"))) { rc = s_bad(path, "a constant of no known kind or without a value"); break; }
        c->kind = (h_cal_kind_t)kk;
        c->value = json_number_value(json_object_get(j, "value"));
        c->raw = json_number_value(json_object_get(j, "fitted"));
        c->slope = json_number_value(json_object_get(j, "slope"));
        c->part_wire = json_number_value(json_object_get(j, "part_wire_s"));
        c->lines = (int)json_integer_value(json_object_get(j, "lines"));
        c->nodes = (int)json_integer_value(json_object_get(j, "nodes"));
        c->gpn = (int)json_integer_value(json_object_get(j, "gpus_per_node"));
        c->kmin = (int)json_integer_value(json_object_get(j, c->kind == H_CAL_INCAST ? "fmin" : "kmin"));
        c->kmax = (int)json_integer_value(json_object_get(j, c->kind == H_CAL_INCAST ? "fmax" : "kmax"));
        const char *l = json_string_value(json_object_get(j, "layout"));
        if (c->kind == H_CAL_LAYOUT && !l) { rc = s_bad(path, "a layout constant without its layout"); break; }
        if ((c->kind == H_CAL_LAYOUT || c->kind == H_CAL_SERVERS) && (c->nodes < 1 || c->gpn < 1)) {
            rc = s_bad(path, "a layout constant without its machines");
            break;
        }
        if (c->kind != H_CAL_ALPHA && !(c->part_wire > 0)) { rc = s_bad(path, "a constant without its partition's wire time"); break; }
        if (l) snprintf(c->layout, sizeof c->layout, "%s", l);
        json_t *from = json_object_get(j, "files");
        for (size_t i = 0; json_is_array(from) && i < json_array_size(from); i++)
            for (int f = 0; f < cal->nfiles; f++)
                if (json_string_value(json_array_get(from, i)) && !strcmp(json_string_value(json_array_get(from, i)), cal->files[f].path))
                    c->files |= 1ull << f;
        cal->n++;
    }
    json_decref(doc);
    if (rc < 0) h_cal_free(cal);
    return rc;
}

/* The constant of kind (and machines / layout where they apply) nearest in partition wire time. */
static const h_cal_const_t *s_find(const h_cal_t *cal, h_cal_kind_t kind, const char *layout, int N, int G, double pw)
{
    const h_cal_const_t *best = NULL;
    double bd = INFINITY;
    for (int k = 0; cal && k < cal->n; k++) {
        const h_cal_const_t *c = &cal->c[k];
        if (c->kind != kind) continue;
        if ((kind == H_CAL_LAYOUT || kind == H_CAL_SERVERS) && (c->nodes != N || c->gpn != G)) continue;
        if (kind == H_CAL_LAYOUT && strcmp(c->layout, layout)) continue;
        double d = kind == H_CAL_ALPHA ? 0 : fabs(log(c->part_wire / pw));
        if (d < bd || (d == bd && best && c->part_wire < best->part_wire)) bd = d, best = c;
    }
    return best;
}

double h_cal_alpha(const h_cal_t *cal)
{
    const h_cal_const_t *c = s_find(cal, H_CAL_ALPHA, NULL, 0, 0, 1);
    return c ? c->value : 0;
}

double h_cal_incast(const h_cal_t *cal, double part_wire, int *fmax)
{
    const h_cal_const_t *c = s_find(cal, H_CAL_INCAST, NULL, 0, 0, part_wire);
    if (fmax) *fmax = c ? c->kmax : 0;
    return c ? c->value : 0;
}

double h_cal_layout_slow(const h_cal_t *cal, const char *layout, int N, int G, double part_wire)
{
    const h_cal_const_t *c = s_find(cal, H_CAL_LAYOUT, layout, N, G, part_wire);
    return c ? c->value : 0;
}

double h_cal_servers_slow(const h_cal_t *cal, int N, int G, int K, double part_wire)
{
    const h_cal_const_t *c = s_find(cal, H_CAL_SERVERS, NULL, N, G, part_wire);
    if (!c) return 0;
    int k = K < c->kmin ? c->kmin : K > c->kmax ? c->kmax : K;
    return c->value + c->slope * (k - 1);
}

double h_cal_bench_predict(const h_cal_t *cal, const h_cal_sample_t *s)
{
    int fmax;
    double alpha = h_cal_alpha(cal), slow = 0, incast = h_cal_incast(cal, s->part_wire, &fmax);
    if (s->kind == H_CAL_LAYOUT) slow = h_cal_layout_slow(cal, s->conf.label, s->N, s->G, s->part_wire);
    if (s->kind == H_CAL_SERVERS) slow = h_cal_servers_slow(cal, s->N, s->G, s->K, s->part_wire);
    return s_bench_time(s, alpha, incast, fmax, slow);
}

const char *h_cal_kind_name(h_cal_kind_t k) { return k >= 0 && k < H_CAL_NKINDS ? s_kind_names[k] : "?"; }
