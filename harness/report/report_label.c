/* report_label.c: the rows' names in `harness report`: a result line's label (its engine configuration, its
 * run's --label, an emulated cluster's model, device and link), its configuration key (every field that can
 * change the measurement), and the label suffixes that keep apart rows whose configurations differ. */
#include "harness/report/report.h"
#include "harness/report/report_int.h"
#include "harness/registry/engines.h"
#include "harness/record/jsonl.h"
#include "core/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Label of a result line: h_engine_label, after its run's name ("label": harness --label) when it has
 * one; kept safe inside gnuplot strings and file names. */
void h_report_row_label(const h_jobj_t *o, char *out, size_t len)
{
    const char *lab = h_jstr(o, "label", NULL);
    int coloc = h_jflag(o, "colocate", 0);
    /* peers (another project's collective: MPI, torch/gloo) are rows of the same tables, marked */
    const char *engine = h_jstr(o, "engine", "?");
    int peer = h_jflag(o, "peer", 0) || h_engine_is_peer(engine);
    /* a named run (--label NAME): "NAME:engine" */
    size_t k0 = lab ? (size_t)snprintf(out, len, "%s:", lab) : 0;
    if (k0 >= len) k0 = len - 1;
    if (peer) snprintf(out + k0, len - k0, "%s", engine); /* its library and version are in impl */
    else h_engine_label(out + k0, len - k0, engine, h_jstr(o, "impl", ""), (int)h_jnum(o, "servers", 0), coloc);
    const h_jfield_t *emu = h_jget(o, "emulated");
    if (emu && emu->num != 0) {
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

/* Fields that are not part of a configuration: what was measured, and the run's metadata. Every other
 * field (engine, impl, servers, transport, dtype, op, world, net, model, device, nodes, shrink, the
 * run's label, fields added later...) is, so runs that differ in any of them never share a median. */
static const char *const s_not_config[] = { /* bytes: the point within a bench configuration */
    "schema", "mode", "engine_label", "host", "git_sha", "timestamp", "cmdline", "topology", "topo", "cpu", "versions",
    "bytes", "time_us", "loop_us", "algbw_gbs", "busbw_gbs", "wrong", "count", "samples_per_s", "compute_samples_per_s", "step_ms_p50",
    "step_ms_p99", "compute_ms_p50", "comm_ms_p50", "wait_ms_p50", "data_ms_p50", "sync_ms_p50", "loss_first",
    "loss_last", "acc_last", "skipped_steps", "bytes_sent", "mem_imbalance", "mem_dev_imbalance", "compute_tflops",
    "mem_engine_imbalance", "nbuckets", "params", "emu_samples_per_s", "speedup", "scaling_efficiency", "emu_step_ms",
    "emu_compute_ms", "exposed_comm_ms", "host_busy", "host_cpu_max", "system_busy", "host_wait", "host_bound",
    "device_samples_per_s",
    "algo", /* the algorithm an engine chose for a size (the ring's one-shot below its threshold): an outcome */
    NULL};

static int s_is_config(const h_jfield_t *f)
{
    if (f->type == HJ_ARR) return 0; /* per-rank figures and traffic matrices: measured */
    for (int i = 0; s_not_config[i]; i++)
        if (!strcmp(f->key, s_not_config[i])) return 0;
    return 1;
}

/* "k=v" of a configuration field into buf ("net" of "none" and "" are the same) */
static void s_kv(const h_jfield_t *f, char *buf, size_t len)
{
    if (f->type == HJ_STR) snprintf(buf, len, "%s=%s", f->key, !strcmp(f->key, "net") && !strcmp(f->str, "none") ? "" : f->str);
    else if (f->type == HJ_NUM || f->type == HJ_BOOL) snprintf(buf, len, "%s=%.17g", f->key, f->num);
    else snprintf(buf, len, "%s=null", f->key);
}

static int s_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The configuration key of a line: its configuration fields "k=v", sorted, joined by '\n' (malloc'd). */
char *h_report_cfg_key(const h_jobj_t *o)
{
    char **kv = calloc(o->n + 1, sizeof *kv);
    size_t n = 0, total = 1;
    for (size_t i = 0; kv && i < o->n; i++) {
        if (!s_is_config(&o->f[i])) continue;
        char buf[600];
        s_kv(&o->f[i], buf, sizeof buf);
        if (!(kv[n] = strdup(buf))) break;
        total += strlen(kv[n++]) + 1;
    }
    char *key = kv ? malloc(total) : NULL;
    if (key) {
        qsort(kv, n, sizeof *kv, s_cmp_str);
        size_t off = 0;
        for (size_t i = 0; i < n; i++) off += (size_t)sprintf(key + off, "%s\n", kv[i]);
        key[off] = '\0';
    }
    for (size_t i = 0; kv && i < n; i++) free(kv[i]);
    free(kv);
    return key;
}

/* 1 if the configuration key cfg holds the line "k=v" p (l bytes) */
static int s_cfg_has(const char *cfg, const char *p, size_t l)
{
    while (*cfg) {
        size_t m = strcspn(cfg, "\n");
        if (m == l && !memcmp(cfg, p, l)) return 1;
        cfg += m + (cfg[m] ? 1 : 0);
    }
    return 0;
}

/* Adds to set ("k1\nk2\n...") the keys of the lines of a that b lacks. */
static void s_diff_keys(const char *a, const char *b, char *set, size_t len)
{
    while (*a) {
        size_t l = strcspn(a, "\n"), kl = strcspn(a, "=");
        if (kl > l) kl = l;
        char key[128];
        snprintf(key, sizeof key, "%.*s\n", (int)kl, a);
        int have = !strncmp(set, key, strlen(key));
        for (const char *q = strchr(set, '\n'); q && !have; q = strchr(q + 1, '\n')) have = !strncmp(q + 1, key, strlen(key));
        if (!s_cfg_has(b, a, l) && !have && strlen(set) + strlen(key) < len) strcat(set, key);
        a += l + (a[l] ? 1 : 0);
    }
}

/* Rows of one base label whose configurations differ at the same world would read alike: every row of
 * that label (at every world, so a series stays one series) gets "+k=v" for each key that told two of
 * them apart ("ring+transport=shm", "ring+transport=tcp"). */
int h_report_unique_labels(h_rdata_t *d)
{
    size_t n = d->nb > d->nt ? d->nb : d->nt;
    char (*sets)[512] = calloc(n + 1, sizeof *sets);
    if (!sets) return err_set(ERR_NOMEM, "report: out of memory");
    for (int kind = 0; kind < 2; kind++) {
        size_t m = kind ? d->nt : d->nb;
#define S_LAB(i) (kind ? d->t[i].label : d->b[i].label)
#define S_CFG(i) (kind ? d->t[i].cfg : d->b[i].cfg)
#define S_WORLD(i) (kind ? d->t[i].world : d->b[i].world)
        memset(sets, 0, (n + 1) * sizeof *sets);
        for (size_t i = 0; i < m; i++) {
            size_t g = 0; /* the label's group: its first row */
            while (strcmp(S_LAB(g), S_LAB(i))) g++;
            for (size_t j = i + 1; j < m; j++)
                if (S_WORLD(j) == S_WORLD(i) && !strcmp(S_LAB(j), S_LAB(i)) && strcmp(S_CFG(j), S_CFG(i))) {
                    s_diff_keys(S_CFG(i), S_CFG(j), sets[g], sizeof sets[g]);
                    s_diff_keys(S_CFG(j), S_CFG(i), sets[g], sizeof sets[g]);
                }
        }
        /* the new labels apart, then copied: the group lookups need the old ones */
        char (*ext)[H_LABEL] = calloc(m + 1, sizeof *ext);
        if (!ext) { free(sets); return err_set(ERR_NOMEM, "report: out of memory"); }
        for (size_t i = 0; i < m; i++) {
            size_t g = 0;
            while (strcmp(S_LAB(g), S_LAB(i))) g++;
            snprintf(ext[i], H_LABEL, "%s", S_LAB(i));
            for (const char *k = sets[g]; *k;) {
                size_t kl = strcspn(k, "\n"), at = strlen(ext[i]);
                const char *v = S_CFG(i);
                while (*v && !(strncmp(v, k, kl) == 0 && v[kl] == '=')) v += strcspn(v, "\n") + (v[strcspn(v, "\n")] ? 1 : 0);
                if (*v) snprintf(ext[i] + at, H_LABEL - at, "+%.*s", (int)strcspn(v, "\n"), v);
                else snprintf(ext[i] + at, H_LABEL - at, "+%.*s=-", (int)kl, k);
                k += kl + (k[kl] ? 1 : 0);
            }
            for (char *c = ext[i] + strlen(S_LAB(i)); *c; c++) /* the added part (the label is safe already) */
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("-_./=+:", *c)))
                    *c = '_';
        }
        for (size_t i = 0; i < m; i++) snprintf(S_LAB(i), H_LABEL, "%s", ext[i]);
        free(ext);
#undef S_LAB
#undef S_CFG
#undef S_WORLD
    }
    free(sets);
    return 0;
}
