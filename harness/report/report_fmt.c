/* report_fmt.c: `harness report --format json|md|csv`: the rows report.c collected (h_rdata_t) as one
 * JSON document, Markdown tables or CSV, one table of cells per kind of row (bench, train, model); the
 * same cells in every format, numbers exact except in Markdown. */
#include "harness/report/report.h"
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/record/jsonl.h"
#include "core/afile.h"
#include "core/err.h"
#include <errno.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- json, md, csv: one table of cells per kind of row ------------------------------------------- */

/* A cell: a string (str), or a number (NAN: none) shown with fmt in Markdown and exactly elsewhere. */
typedef struct { const char *key, *fmt, *str; double num; } s_cell_t;

#define S_NUM(k, f, v) ((s_cell_t){.key = (k), .fmt = (f), .num = (v)})
#define S_STR(k, s)    ((s_cell_t){.key = (k), .str = (s)})
#define S_MAXCELLS 32

/* The tidy columns of a row, each one thing, from its latest line (the label joins them): the engine
 * configuration, the run's --label, the model, an emulated cluster's device and layout (whether it is one). */
static size_t s_tidy(const void *obj, char *engine, size_t elen, s_cell_t *c)
{
    const h_jobj_t *o = obj;
    int emu = o && h_jflag(o, "emulated", 0) == 1;
    size_t k = 0;
    engine[0] = '\0'; /* the line's engine_label, or the label train and bench would have given it */
    if (o && h_jstr(o, "engine_label", NULL)) snprintf(engine, elen, "%s", h_jstr(o, "engine_label", ""));
    else if (o) h_engine_label(engine, elen, h_jstr(o, "engine", "?"), h_jstr(o, "impl", ""), (int)h_jnum(o, "servers", 0),
                               h_jflag(o, "colocate", 0) == 1);
    c[k++] = S_STR("engine_label", engine);
    c[k++] = S_STR("run", o ? h_jstr(o, "label", "") : "");
    c[k++] = S_STR("model", o ? h_jstr(o, "model", "") : "");
    c[k++] = S_NUM("emulated", "%.0f", o ? emu : NAN);
    c[k++] = S_STR("device", emu ? h_jstr(o, "device", "") : "");
    c[k++] = S_NUM("nodes", "%.0f", o ? h_jnum(o, "nodes", NAN) : NAN);
    c[k++] = S_NUM("gpus_per_node", "%.0f", o ? h_jnum(o, "gpus_per_node", NAN) : NAN);
    return k;
}

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
    c[k++] = S_NUM("host_bound_runs", "%.0f", (double)b->nhb); /* of runs: this machine's CPUs were the limit */
    static char engine[H_LABEL];
    k += s_tidy(b->obj, engine, sizeof engine, c + k);
    const h_jobj_t *o = b->obj;
    c[k++] = S_STR("dtype", o ? h_jstr(o, "dtype", "") : "");
    c[k++] = S_STR("op", o ? h_jstr(o, "op", "") : "");
    c[k++] = S_STR("transport", o ? h_jstr(o, "transport", "") : "");
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
    c[k++] = S_NUM("samples_per_s", "%.1f", t->sps);  /* the median of its runs */
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
    c[k++] = S_NUM("samples_per_s_min", "%.1f", t->sps_min);
    c[k++] = S_NUM("samples_per_s_max", "%.1f", t->sps_max);
    c[k++] = S_NUM("host_bound_runs", "%.0f", (double)t->nhb);
    static char engine[H_LABEL];
    k += s_tidy(t->obj, engine, sizeof engine, c + k);
    c[k++] = S_NUM("batch", "%.0f", t->obj ? h_jnum(t->obj, "batch", NAN) : NAN);
    c[k++] = S_STR("net", t->obj ? h_jstr(t->obj, "net", "") : ""); /* the emulated network (--net) */
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
void h_report_json(FILE *out, const h_rdata_t *d, int nfiles, char **files, size_t nres, size_t nbad)
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
void h_report_md(FILE *out, const h_rdata_t *d)
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

/* One kind's rows as CSV: a header line (with "section" first when section), then a line a row. */
static void s_csv_kind(FILE *out, const h_rdata_t *d, size_t s, int section)
{
    s_cell_t c[S_MAXCELLS];
    size_t nc = s_sections[s].cells(d, 0, c);
    if (section) fputs("section,", out);
    for (size_t k = 0; k < nc; k++) fprintf(out, "%s%s", k ? "," : "", c[k].key);
    fprintf(out, "\n");
    for (size_t i = 0; i < s_rows(d, s); i++) {
        s_sections[s].cells(d, i, c);
        if (section) fprintf(out, "%s,", s_sections[s].name);
        for (size_t k = 0; k < nc; k++) {
            char buf[64] = "";
            if (k) fputc(',', out);
            if (!c[k].str && !isnan(c[k].num)) s_fmt_exact(c[k].num, buf, sizeof buf);
            s_csv_str(out, c[k].str ? c[k].str : buf);
        }
        fprintf(out, "\n");
    }
}

/* CSV: per kind that has rows, a header line "section,key,..." and its rows "kind,value,..."; a
 * blank line between kinds; no value: an empty field. */
void h_report_csv(FILE *out, const h_rdata_t *d)
{
    int first = 1, kinds = 0;
    for (size_t s = 0; s < 3; s++) {
        if (!s_rows(d, s)) continue;
        if (!first) fputc('\n', out);
        first = 0;
        kinds++;
        s_csv_kind(out, d, s, 1);
    }
    if (kinds > 1)
        fprintf(stderr, "report: --format csv: %d tables with different headers in one stream (the section column); "
                        "--csv DIR writes one file per table, --table bench|train|model one table alone\n", kinds);
}

int h_report_kind(const char *name)
{
    for (int s = 0; s < 3; s++)
        if (name && !strcmp(name, s_sections[s].name)) return s;
    return -1;
}

void h_report_csv_table(FILE *out, const h_rdata_t *d, int kind)
{
    if (kind >= 0 && kind < 3 && s_rows(d, (size_t)kind)) s_csv_kind(out, d, (size_t)kind, 0);
}

int h_report_csv_dir(const h_rdata_t *d, const char *dir, int kind, FILE *note)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return err_set(ERR_IO, "report: --csv %s: %s", dir, strerror(errno));
    int wrote = 0;
    for (size_t s = 0; s < 3; s++) {
        if ((kind >= 0 && (size_t)kind != s) || !s_rows(d, s)) continue;
        char *buf = NULL, path[4096];
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m) return err_set(ERR_NOMEM, "report: out of memory");
        s_csv_kind(m, d, s, 0);
        fclose(m);
        snprintf(path, sizeof path, "%s/%s.csv", dir, s_sections[s].name);
        afile_part_t part = {buf, len};
        int rc = afile_write(path, "CSV table", &part, 1, 0, NULL); /* whole or not at all */
        free(buf);
        CHECK(rc);
        fprintf(note, "# report: %s: %zu row%s\n", path, s_rows(d, s), s_rows(d, s) == 1 ? "" : "s");
        wrote++;
    }
    if (!wrote) fprintf(note, "# report: no %s rows: no CSV written\n", kind >= 0 ? s_sections[kind].name : "result");
    return 0;
}
