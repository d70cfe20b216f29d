/* fitcheck.c (harness/model): `harness model fit BENCH... > calibration.json` (every constant of the
 * emulated cluster's cost model fitted from collective-alone bench lines, with the files and line counts
 * it came from) and `harness model check calibration.json RUN...` (every emulated training run predicted
 * from the calibration alone; the error distribution in sample, on the fit's own bench lines re-read
 * from its files, and out of sample, on the training runs). */
#include "harness/model/cluster_int.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fit's own bench lines predicted from the calibration: errors (percent) and their groups (static
 * names in the same block as the pointers), n of them; the caller frees both. */
static int s_in_sample(const h_cal_t *cal, double **err, const char ***grp, int *n)
{
    *err = NULL, *grp = NULL, *n = 0;
    char **paths = calloc((size_t)cal->nfiles + 1, sizeof *paths);
    h_cal_file_t *fi = calloc((size_t)cal->nfiles + 1, sizeof *fi);
    if (!paths || !fi) { free(paths); free(fi); return err_set(ERR_NOMEM, "model check"); }
    for (int i = 0; i < cal->nfiles; i++) paths[i] = cal->files[i].path;
    h_cal_sample_t *s = NULL;
    size_t ns = 0;
    int rc = h_cal_samples(cal->nfiles, paths, cal->cc, &s, &ns, fi);
    for (int i = 0; rc == 0 && i < cal->nfiles; i++)
        if (fi[i].lines != cal->files[i].lines)
            rc = err_set(ERR_CORRUPT, "%s has %ld lines, the calibration was fitted on %ld: fit again", paths[i],
                         fi[i].lines, cal->files[i].lines);
    if (rc == 0 && ns) {
        *err = calloc(ns, sizeof **err);
        *grp = calloc(ns, sizeof **grp + 40); /* the pointers, then their names */
        if (!*err || !*grp) rc = err_set(ERR_NOMEM, "model check");
    }
    char (*names)[40] = rc == 0 && ns ? (char (*)[40])(void *)(*grp + ns) : NULL;
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        double pred = h_cal_bench_predict(cal, &s[i]);
        (*err)[i] = (pred - s[i].measured) / s[i].measured * 100;
        char *g = names[i];
        if (s[i].kind == H_CAL_ALPHA || s[i].kind == H_CAL_LAYOUT) snprintf(g, sizeof names[i], "%s", s[i].conf.label);
        else snprintf(g, sizeof names[i], "%s-%s", s[i].conf.engine, s[i].kind == H_CAL_SERVERS ? "servers-K" : "incast");
        (*grp)[i] = g;
    }
    *n = (int)ns;
    free(s);
    free(paths);
    free(fi);
    if (rc < 0) {
        free(*err);
        free(*grp);
        *err = NULL, *grp = NULL, *n = 0;
    }
    return rc;
}

static int s_fit(const h_model_fc_cfg_t *o)
{
    char cc[16];
    h_netem_spec_t spec;
    char err[256];
    if (o->net && h_netem_parse(o->net, &spec, err, sizeof err) < 0) return err_set(ERR_INVAL, "%s", err);
    snprintf(cc, sizeof cc, "%s", o->net ? h_netem_spec_cc(&spec) : H_NETEM_CC_DEFAULT);
    if (!o->nfiles) return err_set(ERR_INVAL, "model fit needs bench results files (harness model fit BENCH.jsonl...)");
    h_cal_t cal;
    int rc = h_cal_fit(&cal, o->nfiles, o->files, cc);
    if (rc == 0 && !cal.n) rc = err_set(ERR_INVAL, "model fit: no bench line in the files calibrates the model (shaped "
                                        "links, TCP %s, the default queue, loop_us, not host-bound)", cc);
    double *e = NULL;
    const char **g = NULL;
    int n = 0;
    if (rc == 0) rc = s_in_sample(&cal, &e, &g, &n);
    json_t *doc = rc == 0 ? h_cal_json(&cal) : NULL;
    if (doc) {
        /* the in-sample distribution: every constant's own lines predicted back */
        double *a = calloc((size_t)n + 1, sizeof *a), worst = 0;
        for (int i = 0; a && i < n; i++) {
            a[i] = fabs(e[i]);
            if (fabs(e[i]) > fabs(worst)) worst = e[i];
        }
        if (a) {
            double med = h_median(a, (size_t)n), p90 = h_pct(a, (size_t)n, 90);
            json_object_set_new(doc, "in_sample", json_pack("{s:i, s:f, s:f, s:f}", "count", n, "median_abs_err_pct",
                                                            med, "p90_abs_err_pct", p90, "worst_err_pct", worst));
        }
        free(a);
        char *text = json_dumps(doc, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
        json_decref(doc);
        if (!text) rc = err_set(ERR_NOMEM, "model fit");
        else {
            size_t len = strlen(text);
            /* one write of the whole document and its newline */
            char *all = malloc(len + 2);
            if (!all) rc = err_set(ERR_NOMEM, "model fit");
            else {
                memcpy(all, text, len);
                all[len] = '\n', all[len + 1] = '\0';
                if (fwrite(all, 1, len + 1, stdout) != len + 1 || fflush(stdout) != 0)
                    rc = err_set(ERR_IO, "model fit: cannot write the calibration");
                free(all);
            }
            free(text);
        }
    } else if (rc == 0)
        rc = err_set(ERR_NOMEM, "model fit");
    free(e);
    free(g);
    h_cal_free(&cal);
    return rc;
}

static int s_check(const h_model_fc_cfg_t *o)
{
    if (!o->calibration)
        return err_set(ERR_INVAL, "model check needs a calibration and training results files "
                       "(harness model check calibration.json RUN.jsonl...)");
    h_cal_t cal;
    CHECK(h_cal_load(&cal, o->calibration));
    double *e = NULL;
    const char **g = NULL;
    int n = 0;
    int rc = s_in_sample(&cal, &e, &g, &n);
    h_lines_t lines;
    h_lines_open(&lines, &o->out, "model");
    if (rc == 0) {
        printf("# syncbench model check: the emulated cluster's cost model from %s alone\n", o->calibration);
        h_mc_print_cal(&cal);
        printf("# in sample: the calibration's own bench lines (the collective alone) predicted back, error (%%):\n");
        h_mc_err_head();
        h_mc_err_table("in", g, e, n, o->out.json ? &lines : NULL);
    }
    free(e);
    free(g);
    if (rc == 0) {
        if (!o->nfiles) printf("# no training results files given: no out-of-sample check\n");
        else rc = h_mc_check(&cal, o->nfiles, o->files, &o->out, &lines);
    }
    /* the in-sample and out-of-sample lines in one write, or none when the check failed */
    if (rc == 0) rc = h_lines_close(&lines, "the check's lines");
    else free(lines.buf); /* nothing of them written */
    h_cal_free(&cal);
    return rc;
}

int h_model_fitcheck(const h_model_fc_cfg_t *o)
{
    if (o->action && !strcmp(o->action, "fit")) return s_fit(o);
    if (o->action && !strcmp(o->action, "check")) return s_check(o);
    return err_set(ERR_INVAL, "model: no action %s (fit, check)", o->action ? o->action : "(none)");
}
