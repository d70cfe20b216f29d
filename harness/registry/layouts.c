/* layouts.c: the engine configurations compared side by side (layouts.h): the engines with their
 * defaults, then the parameter server's placements: the layouts of TensorFlow's PS, of BytePS and of a
 * single server, with and without machine-local aggregation, each with the engine options that make it. */
#include "harness/registry/layouts.h"
#include "core/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const h_layout_t s_layouts[] = {
    {"ring", "ring", "", 0, "the ring allreduce (reduce-scatter, allgather; the one-shot for small messages)"},
    {"ring-hier", "ring", "ring-hier", 0,
     "the hierarchical allreduce (Horovod, NCCL): reduce to each machine's first GPU, ring among them, broadcast"},
    {"tree", "tree", "", 0, "the double binary tree allreduce (reduce up two trees, broadcast down)"},
    {"ps-1server", "ps", "servers=1", 1, "one dedicated PS server on a CPU machine of its own"},
    {"ps-per-node", "ps", "servers=N", 0, "one PS server on every GPU machine (TensorFlow's layout)"},
    {"ps-K=N", "ps", "servers=N", H_LAYOUT_OWN_N, "N PS servers on N CPU-only machines of their own (BytePS)"},
    {"ps-colocated", "ps", "ps-colocate", 0, "a PS server thread inside every worker, each owning a share"},
    {"ps-K=N-localagg", "ps", "servers=N ps-local-agg", H_LAYOUT_OWN_N,
     "ps-K=N with machine-local aggregation: a machine's GPUs sum first, its first pushes and pulls (BytePS)"},
    {"ps-colocated-localagg", "ps", "ps-colocate ps-local-agg", 0,
     "one PS server on every GPU machine, inside its first worker, with machine-local aggregation"},
};
#define S_N ((int)(sizeof s_layouts / sizeof s_layouts[0]))

int h_layout_count(void) { return S_N; }

const h_layout_t *h_layout_find(const char *label)
{
    for (int i = 0; label && i < S_N; i++)
        if (!strcmp(s_layouts[i].label, label)) return &s_layouts[i];
    return NULL;
}
const h_layout_t *h_layout_at(int i) { return i >= 0 && i < S_N ? &s_layouts[i] : NULL; }

void h_layouts_help(char *out, size_t len)
{
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < S_N && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "    %-13s %s\n", s_layouts[i].label, s_layouts[i].about);
}

int h_layout_server_nodes(const h_layout_t *L, int N) { return L->server_nodes == H_LAYOUT_OWN_N ? N : L->server_nodes; }

void h_layout_free(void *store[H_MAX_ENGINES])
{
    for (int i = 0; i < H_MAX_ENGINES; i++) free(store[i]), store[i] = NULL;
}

/* option k of the whole table named name, of engine index e; -1: none */
static int s_opt_index(int e, const char *name)
{
    int ei;
    for (int k = 0; h_engine_opt(k, &ei); k++)
        if (ei == e && !strcmp(h_engine_opt(k, NULL)->name, name)) return k;
    return -1;
}

static int s_apply(const char *label, const char *engine, const char *options, int N, const h_engset_t *base,
                   h_engset_t *out, void *store[H_MAX_ENGINES]);

int h_layout_engset(const h_layout_t *L, int N, const h_engset_t *base, h_engset_t *out, void *store[H_MAX_ENGINES])
{
    return s_apply(L->label, L->engine, L->options, N, base, out, store);
}

int h_engine_label_colocated(const char *label) { return strstr(label, "-colocated") != NULL; }

int h_layout_engset_of_run(const char *engine, const char *label, int servers, const h_engset_t *base, h_engset_t *out,
                           void *store[H_MAX_ENGINES])
{
    char opts[96] = "";
    if (h_engine_label_colocated(label)) snprintf(opts, sizeof opts, "ps-colocate");
    else if (servers > 0) snprintf(opts, sizeof opts, "servers=%d", servers);
    if (strstr(label, "-localagg")) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " ps-local-agg");
    return s_apply(engine, engine, opts, 0, base, out, store);
}

int h_layout_engset_of_bench(const char *engine, const char *label, int servers, size_t partition_bytes,
                             const h_engset_t *base, h_engset_t *out, void *store[H_MAX_ENGINES])
{
    char opts[128] = "";
    if (h_engine_label_colocated(label)) snprintf(opts, sizeof opts, "ps-colocate");
    else if (servers > 0) snprintf(opts, sizeof opts, "servers=%d", servers);
    if (strstr(label, "-localagg")) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " ps-local-agg");
    if (partition_bytes >= 1024)
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " ps-partition-kb=%zu", partition_bytes / 1024);
    return s_apply(engine, engine, opts, 0, base, out, store);
}

static int s_apply(const char *label, const char *engine, const char *options, int N, const h_engset_t *base,
                   h_engset_t *out, void *store[H_MAX_ENGINES])
{
    *out = *base;
    memset(store, 0, H_MAX_ENGINES * sizeof *store);
    int e = -1;
    for (int i = 0; i < h_engine_count(); i++) {
        const engine_ops_t *ops = h_engine_at(i);
        if (!strcmp(ops->name, engine)) e = i;
        if (!ops->opts_size) continue;
        store[i] = malloc(ops->opts_size);
        if (!store[i]) {
            h_layout_free(store);
            return err_set(ERR_NOMEM, "layout %s: out of memory", label);
        }
        if (base->eopts[i]) memcpy(store[i], base->eopts[i], ops->opts_size);
        else if (ops->opts_init) ops->opts_init(store[i]);
        else memset(store[i], 0, ops->opts_size);
        out->eopts[i] = store[i];
    }
    if (e < 0) {
        h_layout_free(store);
        return err_set(ERR_INVAL, "layout %s: no engine %s in this build", label, engine);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", options);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(t, '='), val[32];
        if (eq) *eq = '\0';
        const char *v = eq ? eq + 1 : NULL;
        if (v && !strcmp(v, "N")) snprintf(val, sizeof val, "%d", N), v = val;
        int k = s_opt_index(e, t);
        if (k < 0 || h_engine_opt_set(out->eopts, k, v) < 0) {
            h_layout_free(store);
            return err_set(ERR_INVAL, "layout %s: engine %s has no option --%s%s%s", label, engine, t, v ? " " : "",
                           v ? v : "");
        }
    }
    return 0;
}

void h_verdict_print(const char *who, const char *model, int N, int G, const char *net, const h_verdict_row_t *rows, int n)
{
    int best[2] = {-1, -1};
    for (int i = 0; i < n; i++) {
        int k = rows[i].ps != 0;
        if (best[k] < 0 || rows[i].speedup > rows[best[k]].speedup) best[k] = i;
    }
    if (best[0] < 0 || best[1] < 0) return;
    const h_verdict_row_t *a = &rows[best[0]], *p = &rows[best[1]];
    int ring = a->speedup >= p->speedup;
    printf("# verdict (%s): %s, %d GPUs (%d x %d), %s: %s %.2fx %s best PS layout (%s) %.2fx: use %s\n", who, model,
           N * G, N, G, net, a->label, a->speedup, ring ? ">=" : "<", p->label, p->speedup, ring ? a->label : p->label);
}
