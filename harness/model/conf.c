/* conf.c (harness/model): the cost model's engine configurations (conf.h): the registry's layouts, the
 * layout a result line ran, and each configuration's traffic on N machines of G read from its declared
 * schedule (the per-NIC-direction bytes of its pushes and replies, the messages in series, the fan-in of
 * the owners' machines, the partition), as the launcher places its ranks (h_cluster_machine_of). */
#include "harness/model/conf.h"
#include "harness/emulate/cluster.h"
#include "core/err.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int h_mc_conf_at(int i, h_mc_conf_t *c)
{
    const h_layout_t *L = h_layout_at(i);
    memset(c, 0, sizeof *c);
    if (!L) return -1;
    snprintf(c->label, sizeof c->label, "%s", L->label);
    snprintf(c->group, sizeof c->group, "%s", L->label);
    snprintf(c->engine, sizeof c->engine, "%s", L->engine);
    c->row = i;
    c->layout = L;
    return 0;
}

int h_mc_conf_find(const char *label, h_mc_conf_t *c)
{
    const h_layout_t *L = h_layout_find(label);
    if (!L) {
        memset(c, 0, sizeof *c);
        return -1;
    }
    return h_mc_conf_at((int)(L - h_layout_at(0)), c);
}

int h_mc_conf_server_nodes(const h_mc_conf_t *c, int N)
{
    return c->layout ? h_layout_server_nodes(c->layout, N) : c->server_nodes;
}

int h_mc_conf_plain(const h_mc_conf_t *c) { return c->layout && !*c->layout->options; }

/* The engine set of c on N GPU machines: the engines' defaults with c's options (freed with s_engset_free). */
static int s_engset(const h_mc_conf_t *c, int N, h_engset_t *es, void *store[H_MAX_ENGINES], void *base[H_MAX_ENGINES])
{
    h_engset_t b;
    memset(&b, 0, sizeof b);
    memset(base, 0, H_MAX_ENGINES * sizeof *base);
    memset(store, 0, H_MAX_ENGINES * sizeof *store);
    if (h_engine_opts_init(b.eopts) < 0) {
        h_engine_opts_free(b.eopts);
        return err_set(ERR_NOMEM, "model");
    }
    memcpy(base, b.eopts, H_MAX_ENGINES * sizeof *base);
    int rc = c->layout ? h_layout_engset(c->layout, N, &b, es, store)
                       : h_layout_engset_of_run(c->engine, c->run_label, c->servers, &b, es, store);
    if (rc < 0) h_engine_opts_free(base);
    return rc;
}

static void s_engset_free(void *store[H_MAX_ENGINES], void *base[H_MAX_ENGINES])
{
    h_layout_free(store);
    h_engine_opts_free(base);
}

/* 1 when a and b set the same options of engine */
static int s_same_opts(const h_engset_t *a, const h_engset_t *b, const char *engine)
{
    const void *x = h_engine_opts(a, engine), *y = h_engine_opts(b, engine);
    const engine_ops_t *ops = h_engine_find(engine);
    if (!x || !y || !ops) return x == y;
    return !memcmp(x, y, ops->opts_size);
}

int h_mc_conf_of_run(const h_jobj_t *r, int N, int K, h_mc_conf_t *c)
{
    memset(c, 0, sizeof *c);
    const char *eng = h_jstr(r, "engine", ""), *label = h_jstr(r, "engine_label", h_jstr(r, "impl", ""));
    if (!h_engine_find(eng) || h_engine_is_peer(eng)) return -1;
    int S = (int)h_jnum(r, "servers", 0);
    /* a label the registry has (ring, ring-hier, tree) */
    const h_layout_t *L = h_layout_find(label);
    if (L && !strcmp(L->engine, eng) && h_layout_server_nodes(L, N) == K) return h_mc_conf_at((int)(L - h_layout_at(0)), c);
    /* else the line's own options, compared with every registry layout's on the same machines */
    h_mc_conf_t own = {.row = H_MC_OWN_ROW + K, .servers = S, .server_nodes = K};
    snprintf(own.engine, sizeof own.engine, "%s", eng);
    snprintf(own.run_label, sizeof own.run_label, "%s", label);
    h_engset_t es;
    void *store[H_MAX_ENGINES], *base[H_MAX_ENGINES];
    if (s_engset(&own, N, &es, store, base) < 0) {
        err_clear();
        return -1;
    }
    int found = -1;
    for (int i = 0; found < 0 && i < h_layout_count(); i++) {
        h_mc_conf_t lc;
        h_mc_conf_at(i, &lc);
        if (strcmp(lc.engine, eng) || h_layout_server_nodes(lc.layout, N) != K) continue;
        h_engset_t les;
        void *ls[H_MAX_ENGINES], *lb[H_MAX_ENGINES];
        if (s_engset(&lc, N, &les, ls, lb) < 0) {
            err_clear();
            continue;
        }
        if (s_same_opts(&es, &les, eng)) found = i;
        s_engset_free(ls, lb);
    }
    s_engset_free(store, base);
    if (found >= 0) return h_mc_conf_at(found, c);
    /* one server on each of 1 < K < N machines of their own (the BytePS sweep): the run's own K */
    if (!h_engine_has_servers(eng) || h_engine_label_colocated(label) || S != K || K < 2 || K >= N) return -1;
    const char *agg = strstr(label, "-localagg") ? "-localagg" : "";
    snprintf(own.label, sizeof own.label, "%s-K=%d%s", eng, K, agg);
    snprintf(own.group, sizeof own.group, "%s-K<N%s", eng, agg);
    *c = own;
    return 0;
}

/* ---- traffic from the schedule ---- */

typedef struct {
    char label[40];
    int N, G;
    h_cl_engine_t e;
    char algo[16];
} s_cached_t;
#define S_NCACHE 128
static s_cached_t s_cache[S_NCACHE];
static int s_ncache, s_next;

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The schedule's traffic placed on the machines: e's schedule fields (bytes per byte of s's buffer). */
static int s_place(const sched_t *s, int N, int G, int K, h_cl_engine_t *e)
{
    int P = s->workers, M = N + (K > 0 ? K : 0);
    h_cluster_t cl = {.nodes = N, .gpus_per_node = G, .server_nodes = K};
    double *v = calloc((size_t)M * 4, sizeof *v); /* per machine: push out, push in, reply out, reply in */
    char *hosts = calloc((size_t)M, 1);
    uint64_t *pairs = malloc((s->nx ? s->nx : 1) * sizeof *pairs);
    int *stamp = calloc((size_t)M, sizeof *stamp);
    if (!v || !hosts || !pairs || !stamp) {
        free(v), free(hosts), free(pairs), free(stamp);
        return err_set(ERR_NOMEM, "model");
    }
    size_t np = 0;
    for (size_t i = 0; i < s->nx; i++) {
        const sched_xfer_t *x = &s->x[i];
        if (x->src == x->dst) continue; /* a hand-over inside one process */
        int ms = h_cluster_machine_of(&cl, x->src, P), md = h_cluster_machine_of(&cl, x->dst, P);
        if (ms == md) continue; /* within a machine: no NIC */
        double b = (double)sched_xfer_bytes(s, x);
        int reply = x->op == SCHED_STORE;
        v[4 * ms + 2 * reply] += b, v[4 * md + 2 * reply + 1] += b;
        if (!reply) {
            hosts[md] = 1; /* pushes from other machines arrive: an owner's machine */
            pairs[np++] = (uint64_t)md * (uint64_t)s->world + (uint64_t)x->src;
        }
    }
    double all = (double)s->count * (double)s->esz, worst = 0;
    for (int m = 0; m < M; m++) {
        const double *q = &v[4 * m];
        worst = fmax(worst, fmax(q[0] + q[2], q[1] + q[3]));
        int k = hosts[m];
        e->push[k] = fmax(e->push[k], fmax(q[0], q[1]) / all);
        e->reply[k] = fmax(e->reply[k], fmax(q[2], q[3]) / all);
        e->both[k] = fmax(e->both[k], fmax(q[0] + q[2], q[1] + q[3]) / all);
    }
    e->nic_per_byte = worst / all;
    /* the fan-in: distinct remote ranks pushing into each owners' machine, and their machines */
    qsort(pairs, np, sizeof *pairs, s_cmp_u64);
    for (size_t a = 0, b; a < np; a = b) {
        int md = (int)(pairs[a] / (uint64_t)s->world), f = 0, fm = 0;
        for (b = a; b < np && (int)(pairs[b] / (uint64_t)s->world) == md; b++) {
            if (b > a && pairs[b] == pairs[b - 1]) continue;
            f++;
            int ms = h_cluster_machine_of(&cl, (int)(pairs[b] % (uint64_t)s->world), P);
            if (stamp[ms] != md + 1) stamp[ms] = md + 1, fm++;
        }
        if (f > e->fan_in) e->fan_in = f, e->fan_machines = fm;
    }
    e->msgs = 0;
    for (int k = 0; k < s->nsteps; k++) { /* a step that moves nothing between ranks is no message */
        int moves = 0;
        for (size_t i = s->steps[k].first; !moves && i < s->steps[k].first + s->steps[k].n; i++) moves = s->x[i].src != s->x[i].dst;
        e->msgs += moves;
    }
    free(v), free(hosts), free(pairs), free(stamp);
    return 0;
}

int h_mc_traffic(const h_mc_conf_t *c, int N, int G, h_cl_engine_t *e, char *algo)
{
    if (N < 1) N = 1;
    if (G < 1) G = 1;
    for (int i = 0; i < s_ncache; i++)
        if (s_cache[i].N == N && s_cache[i].G == G && !strcmp(s_cache[i].label, c->label)) {
            *e = s_cache[i].e;
            if (algo) snprintf(algo, 16, "%s", s_cache[i].algo);
            return 0;
        }
    memset(e, 0, sizeof *e);
    int P = N * G, K = h_mc_conf_server_nodes(c, N);
    h_engset_t es;
    void *store[H_MAX_ENGINES], *base[H_MAX_ENGINES];
    CHECK(s_engset(c, N, &es, store, base));
    /* machines of their own: no one-shot path (it needs every rank on one host over shared memory) */
    sched_env_t env = {.workers = P, .one_host_shm = 0, .device = -1, .segmented = 0, .gpus_per_node = G};
    sched_t s;
    memset(&s, 0, sizeof s);
    size_t count = (size_t)P * 2048;
    int rc = h_engine_schedule(&es, c->engine, &env, count, sizeof(float), &s);
    if (rc == 0 && s.owners) {
        /* one partition a server: dedicated servers, or (colocated) every worker or machine leader */
        size_t S = s.world > s.workers ? (size_t)(s.world - s.workers) : (size_t)s.workers;
        sched_free(&s);
        rc = h_engine_schedule(&es, c->engine, &env, S * 2048, sizeof(float), &s);
    }
    if (rc == 0) {
        e->owners = s.owners;
        e->own_machines = K > 0;
        rc = s_place(&s, N, G, K, e);
    }
    char al[16];
    snprintf(al, sizeof al, "%s", rc == 0 ? s.algo : "");
    sched_free(&s);
    if (rc == 0 && e->owners) {
        /* the partition: the first piece of a buffer larger than any partition, on one worker */
        sched_env_t one = {.workers = 1, .device = -1};
        rc = h_engine_schedule(&es, c->engine, &one, (size_t)1 << 34, 1, &s);
        if (rc == 0 && s.npieces > 0) e->part_bytes = (double)s.pieces[0].count;
        sched_free(&s);
    }
    s_engset_free(store, base);
    if (rc < 0) return rc;
    if (algo) snprintf(algo, 16, "%s", al);
    s_cached_t *k = &s_cache[s_ncache < S_NCACHE ? s_ncache++ : (s_next++ % S_NCACHE)];
    snprintf(k->label, sizeof k->label, "%s", c->label);
    k->N = N, k->G = G, k->e = *e;
    snprintf(k->algo, sizeof k->algo, "%s", al);
    return 0;
}
