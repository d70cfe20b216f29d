/* cluster_check.c: the emulated cluster's model (cluster.c) against the measured emulated training
 * runs of the files: each configuration's median step beside its prediction, the errors, and the
 * launches one by one. Nothing here is fitted: the model's inputs come from the benches (cluster.c). */
#include "harness/model/cluster_int.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One emulated configuration of the check: every launch of the same run (same model, device, machines,
 * layout, link, batch, buckets, shrink and dilation) in the files, compared by their median. Host-bound
 * launches (hb) are a configuration of their own: predicted and listed, never counted. So are dilated
 * runs (dil, --dilate > 1): dilation relieves the host, and leaves the ring's step alone
 * (emulation-invariance), but not a PS's across machines (byteps-n8-host: its flows' TCP runs at a
 * 1/dilate rate on the same microsecond links), which the model, of the cluster in real time, has not. */
typedef struct {
    char   key[512];
    h_mc_conf_t conf;
    int    layout, P, N, G, K, hb, overlap, local_batch;
    char   model[32], device[32];
    double predicted, bps, shrink, dilate;
    double *ms;
    int    n;
} s_check_pt_t;

static s_check_pt_t *s_check_find(s_check_pt_t **pts, int *npts, int *cap, const char *key)
{
    for (int k = 0; k < *npts; k++)
        if (!strcmp((*pts)[k].key, key)) return &(*pts)[k];
    if (*npts == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        s_check_pt_t *np = realloc(*pts, (size_t)nc * sizeof *np);
        if (!np) return NULL;
        *pts = np, *cap = nc;
    }
    s_check_pt_t *c = &(*pts)[(*npts)++];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    c->layout = -1;
    return c;
}

/* One line of an error distribution: |err| median and p90, the worst (signed), the count; with lines, its
 * "kind":"error" line too. err (percent, signed) is reordered. */
void h_mc_err_line(const char *sample, const char *group, const double *err, int n, h_lines_t *lines)
{
    if (n <= 0) return;
    double *a = malloc((size_t)n * sizeof *a), worst = 0;
    if (!a) return;
    for (int i = 0; i < n; i++) {
        a[i] = fabs(err[i]);
        if (fabs(err[i]) > fabs(worst)) worst = err[i];
    }
    double med = h_median(a, (size_t)n), p90 = h_pct(a, (size_t)n, 90);
    int within = 0;
    for (int i = 0; i < n; i++) within += a[i] <= 10;
    free(a);
    printf("#   %-13s %-14s %6d %8.1f %8.1f %+8.1f %8d\n", sample, group, n, med, p90, worst, within);
    if (lines)
        h_lines_add(lines, json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:f, s:i}", "kind", "error", "sample", sample,
                                     "group", group, "count", n, "median_abs_err_pct", med, "p90_abs_err_pct", p90,
                                     "worst_err_pct", worst, "within_10pct", within));
}

void h_mc_err_head(void)
{
    printf("#   %-13s %-14s %6s %8s %8s %8s %8s\n", "sample", "group", "count", "median", "p90", "worst", "<=10%");
}

/* The distribution over all and per group: groups[i] names err[i]'s group. */
void h_mc_err_table(const char *sample, const char *const *groups, const double *err, int n, h_lines_t *lines)
{
    double *e = malloc((size_t)(n > 0 ? n : 1) * sizeof *e);
    if (!e) return;
    memcpy(e, err, (size_t)n * sizeof *e);
    h_mc_err_line(sample, "all", e, n, lines);
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) first &= strcmp(groups[j], groups[i]) != 0;
        if (!first) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!strcmp(groups[j], groups[i])) e[m++] = err[j];
        h_mc_err_line(sample, groups[i], e, m, lines);
    }
    free(e);
}

/* Prints the check; with --json appends one line per configuration ("kind":"check": its layout, the
 * median of its launches, the prediction) and the error lines in one write, whole or not at all. */
int h_mc_check(const h_cal_t *cal, int nfiles, char **files, const h_out_t *out, h_lines_t *into)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, nbad = 0;
    h_jread_files(nfiles, files, &objs, &n, &nbad, stderr);
    s_check_pt_t *pts = NULL;
    int npts = 0, cap = 0;
    const char *cc = cal->cc;
    for (size_t i = 0; i < n; i++) {
        const h_jobj_t *r = &objs[i];
        if (!h_jget(r, "emulated") || strcmp(h_jstr(r, "mode", ""), "train") || h_jget(r, "host_bound") == NULL) continue;
        int hb = h_jflag(r, "host_bound", 0); /* a host-bound run measured this machine */
        int P = (int)h_jnum(r, "world", 0), N = (int)h_jnum(r, "nodes", 1), G = (int)h_jnum(r, "gpus_per_node", 1);
        h_mc_conf_t conf;
        double meas = h_jnum(r, "emu_step_ms", 0);
        if (h_mc_conf_of_run(r, N, (int)h_jnum(r, "server_nodes", 0), &conf) < 0 || P < 1 || !(meas > 0)) continue;
        int l = conf.row;
        /* the model's NIC has the default queue and its congestion control: runs with another
         * (emulation-queue, emulation-cc) are not its points; launches are grouped by the rate they ran at,
         * however the line spelled it */
        const char *net = h_jstr(r, "net", "");
        h_netem_spec_t ns;
        char nerr[256];
        if (!*net || h_netem_parse(net, &ns, nerr, sizeof nerr) < 0 || ns.queue_ms != H_NETEM_QUEUE_MS ||
            !h_mc_line_cc_is(r, cc))
            continue;
        double bps = ns.bits_per_s * ns.eff, eff = ns.eff;
        int no_overlap = !h_jflag(r, "overlap", 1);
        /* sync PS rounds commit per partition with f32 gradients since results schema 2 (the same release);
         * older lines, and half-precision gradients, waited for the step's last push */
        int pipelined = !strcmp(h_jstr(r, "grad_dtype", "f32"), "f32") && h_jnum(r, "schema", 1) >= 2;
        int srank;
        double lag;
        if (h_mc_straggler(h_jstr(r, "straggler", ""), &srank, &lag) < 0) continue; /* one the model cannot read */
        if (srank >= P) srank = -1, lag = 0;
        char key[512];
        snprintf(key, sizeof key, "%g|%d|%s|%s %g|%.6g|%.6g|%d|%d|%d|%d|%g|%g|%d|%d|%g|%g|%d", lag, hb, h_jstr(r, "model", ""),
                 h_jstr(r, "device", ""), h_jnum(r, "device_samples_per_s", 0), bps, eff, P, N, G, l, h_jnum(r, "servers", 0), h_jnum(r, "server_nodes", 0),
                 (int)h_jnum(r, "local_batch", 64), no_overlap, h_jnum(r, "bucket_mb", 25), h_jnum(r, "shrink", 1) *
                 1000 + h_jnum(r, "dilate", 1), pipelined);
        s_check_pt_t *c = s_check_find(&pts, &npts, &cap, key);
        if (!c) break;
        if (c->layout < 0) {
            s_point_t p;
            if (h_mc_point(&p, h_jstr(r, "model", ""), h_jstr(r, "device", NULL), h_jnum(r, "device_samples_per_s", 0),
                           (size_t)h_jnum(r, "local_batch", 64),
                        h_jnum(r, "bucket_mb", 25), no_overlap) < 0) {
                h_mc_point_free(&p);
                npts--;
                continue;
            }
            p.ps_pipelined = pipelined;
            p.straggler_rank = srank, p.straggler_s = lag;
            c->K = (int)h_jnum(r, "server_nodes", 0);
            c->conf = conf;
            c->predicted = h_mc_step(&p, cal, &conf, N, G, bps, NULL) * 1e3;
            c->layout = l, c->P = P, c->N = N, c->G = G, c->bps = bps, c->hb = hb, c->overlap = !no_overlap;
            c->local_batch = (int)h_jnum(r, "local_batch", 64);
            c->shrink = h_jnum(r, "shrink", 1), c->dilate = h_jnum(r, "dilate", 1);
            snprintf(c->model, sizeof c->model, "%s", p.wl->name);
            snprintf(c->device, sizeof c->device, "%s", p.dev.name);
            h_mc_point_free(&p);
        }
        double *nm = realloc(c->ms, (size_t)(c->n + 1) * sizeof *nm);
        if (!nm) break;
        c->ms = nm;
        c->ms[c->n++] = meas;
    }
    printf("#\n# out of sample: predicted from the calibration against the emulated training runs (%s): step\n"
           "# time (ms, emulated); a configuration launched more than once (in one file or across them) is compared\n"
           "# by its launches' median; host-bound launches (hb) and dilated runs (dil: --dilate > 1) are listed and\n"
           "# never counted\n"
           "# %-12s %-10s %-12s %5s %8s %9s %9s %7s\n", H_CAL_SPLIT, "engine", "model", "device", "GPUs", "launches",
           "measured", "predicted", "err%");
    int counted = 0, launches = 0;
    for (int k = 0; k < npts; k++) launches += pts[k].n;
    double *err = calloc((size_t)npts + 1, sizeof *err), *lerr = calloc((size_t)launches + 1, sizeof *lerr);
    const char **grp = calloc((size_t)npts + 1, sizeof *grp), **lgrp = calloc((size_t)launches + 1, sizeof *lgrp);
    char (*labels)[40] = calloc((size_t)npts + 1, sizeof *labels);
    int nl = 0, rc = 0;
    h_lines_t own, *L = into ? into : &own;
    if (!into) h_lines_open(&own, out, "model");
    if (!err || !lerr || !grp || !lgrp || !labels) rc = err_set(ERR_NOMEM, "model check");
    for (int k = 0; rc == 0 && k < npts; k++) {
        s_check_pt_t *c = &pts[k];
        double med = h_median(c->ms, (size_t)c->n);
        double e = (c->predicted - med) / med * 100;
        char *label = labels[k];
        snprintf(label, sizeof labels[k], "%s", c->conf.label);
        printf("  %-12s %-10s %-12s %5d %8d %9.1f %9.1f %+7.1f%s\n", label, c->model, c->device, c->P, c->n, med,
               c->predicted, e, c->hb ? " hb" : c->dilate != 1 ? " dil" : "");
        if (out->json)
            h_lines_add(L, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:i, s:b, s:f, s:f, s:i, s:f, s:f, s:f, s:b, s:b}",
                                             "kind", "check", "sample", "out", "model", c->model, "device", c->device,
                                             "engine", label, "gpus", c->P, "nodes", c->N, "gpus_per_node", c->G,
                                             "server_nodes", c->K, "net_bps", (json_int_t)llround(c->bps), "local_batch",
                                             c->local_batch, "overlap", c->overlap, "shrink", c->shrink, "dilate",
                                             c->dilate, "launches", c->n, "measured_ms", med, "step_ms", c->predicted,
                                             "err_pct", e, "host_bound", c->hb, "counted", !c->hb && c->dilate == 1));
        if (!c->hb && c->dilate == 1) {
            /* a run's own K (1 < K < N) is grouped as one layout, whatever its K */
            grp[counted] = c->conf.group;
            err[counted++] = e;
            for (int v = 0; v < c->n; v++) {
                lgrp[nl] = c->conf.group;
                lerr[nl++] = (c->predicted - c->ms[v]) / c->ms[v] * 100;
            }
        }
    }
    if (rc == 0 && counted) {
        int lw = 0;
        for (int v = 0; v < nl; v++) lw += fabs(lerr[v]) <= 10;
        printf("# counted: %d configurations (%d launches); launches one by one: %d of %d within 10%%\n", counted, nl, lw, nl);
        printf("# out-of-sample error (%%, predicted against measured), configurations by their launches' median, then\n"
               "# every launch one by one:\n");
        h_mc_err_head();
        h_mc_err_table("out", grp, err, counted, out->json ? L : NULL);
        h_mc_err_table("out-launches", lgrp, lerr, nl, out->json ? L : NULL);
    } else if (rc == 0)
        printf("# no emulated train runs (that were not host-bound or dilated) in the files\n");
    for (int k = 0; k < npts; k++) free(pts[k].ms);
    free(pts);
    free(err);
    free(lerr);
    free(grp);
    free(lgrp);
    free(labels);
    h_jfree_all(&objs, &n);
    int wrc = into ? 0 : h_lines_close(&own, "the check's lines");
    return rc < 0 ? rc : wrc;
}
