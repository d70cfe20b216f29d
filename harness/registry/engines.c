/* engines.c: the table of engines the harness can pick by name (the only list of them): lookup, the
 * names for help and errors, the engines' own options, and each engine's configuration in a world. */
#include "harness/registry/engines.h"
#include "allreduce-tree/tree.h"
#include "core/err.h"
#include "ps/ps.h"
#include "ring/ring.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef SB_MPI
#include "mpi/mpi.h"
#endif

/* the first one is the default engine */
static const engine_ops_t *const s_engines[] = {&ring_engine, &tree_engine, &ps_engine};
#define S_NENGINES ((int)(sizeof s_engines / sizeof s_engines[0]))
/* Peer engines: other projects' collectives behind our contract, the references our engines are
 * measured against. Found by name (--engine mpi), started through mpirun, marked as peers in reports,
 * left out of `harness run` unless --peers; an engine this build lacks says why. */
#ifdef SB_MPI
static const engine_ops_t *const s_peers[] = {&mpi_engine};
#define S_NPEERS 1
#else
static const engine_ops_t *const s_peers[1] = {NULL};
#define S_NPEERS 0
#endif
_Static_assert(S_NENGINES <= H_MAX_ENGINES, "H_MAX_ENGINES too small for the engine table");

/* declared in engines.h: the one label of an engine configuration */
void h_engine_label(char *out, size_t len, const char *engine, const char *impl, int servers, int coloc)
{
    if (!impl) impl = "";
    if (h_engine_is_peer(engine)) { /* another project's collective: its library and version are in impl */
        snprintf(out, len, "%s", engine);
        return;
    }
    size_t el = strlen(engine);
    if (!strncmp(impl, engine, el) && impl[el] == '-') {
        /* a descriptive impl ("ps-sync-servers1") already names the layout */
        snprintf(out, len, "%s", impl);
        return;
    }
    size_t k = (size_t)snprintf(out, len, "%s", engine);
    /* A GPU impl describes itself in words ("nccl Ring, world 1: ...", "gpu-ipc tree, 3 ranks on 1 GPU,
     * ..."): the label keeps its first word, so that a table's first column stays one token; the
     * description is the impl note beside it (h_engine_impl_note) and the result line's "impl". */
    int ilen = (int)strcspn(impl, " ,(");
    if (ilen > 0 && strcmp(impl, "default") && strcmp(impl, "host") && k < len)
        k += (size_t)snprintf(out + k, len - k, "/%.*s", ilen, impl);
    if (h_engine_has_servers(engine) && k < len) {
        if (coloc) snprintf(out + k, len - k, "-colocated");
        else if (servers > 0) snprintf(out + k, len - k, "-servers%d", servers);
    }
}

const char *h_engine_impl_note(const char *label, const char *impl)
{
    if (!impl || !*impl || !strcmp(impl, "default") || !strcmp(impl, "host") || strstr(label, impl)) return "";
    return impl;
}

int h_engine_count(void) { return S_NENGINES; }

const engine_ops_t *h_engine_at(int i) { return i >= 0 && i < S_NENGINES ? s_engines[i] : NULL; }

static int s_index(const char *name)
{
    for (int i = 0; i < S_NENGINES; i++)
        if (name && !strcmp(s_engines[i]->name, name)) return i;
    return -1;
}

static int s_peer_index(const char *name)
{
    for (int i = 0; i < S_NPEERS; i++)
        if (name && !strcmp(s_peers[i]->name, name)) return i;
    return -1;
}

const engine_ops_t *h_engine_find(const char *name)
{
    int p = s_peer_index(name);
    return p >= 0 ? s_peers[p] : h_engine_at(s_index(name));
}

const char *h_engine_transport_probe(void) { return ring_engine.name; }

int h_engine_has_servers(const char *name)
{
    const engine_ops_t *e = h_engine_find(name);
    return e && e->serve;
}

int h_peer_engine_count(void) { return S_NPEERS; }

const engine_ops_t *h_peer_engine_at(int i) { return i >= 0 && i < S_NPEERS ? s_peers[i] : NULL; }

int h_engine_is_peer(const char *name)
{
    return s_peer_index(name) >= 0 || (name && (!strcmp(name, "mpi") || !strncmp(name, "torch", 5) ||
                                                 !strncmp(name, "openmpi", 7)));
}

int h_engine_via_mpirun(const char *name) { return s_peer_index(name) >= 0 && !strcmp(name, "mpi"); }

const char *h_engine_unbuilt(const char *name)
{
    if (name && !strcmp(name, "mpi") && s_peer_index(name) < 0)
        return "this build has no MPI (install libopenmpi-dev and rebuild)";
    return NULL;
}

const char *h_engine_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t off = 0;
        for (int i = 0; i < S_NENGINES && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", s_engines[i]->name);
        for (int i = 0; i < S_NPEERS && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, ", %s (peer)", s_peers[i]->name);
    }
    return names;
}

int h_engine_opts_init(void *eopts[H_MAX_ENGINES])
{
    for (int i = 0; i < S_NENGINES; i++) {
        const engine_ops_t *e = s_engines[i];
        if (!e->opts_size) continue;
        eopts[i] = calloc(1, e->opts_size);
        if (!eopts[i]) return ERR_NOMEM;
        if (e->opts_init) e->opts_init(eopts[i]);
    }
    return 0;
}

void h_engine_opts_free(void *eopts[H_MAX_ENGINES])
{
    for (int i = 0; i < H_MAX_ENGINES; i++) {
        free(eopts[i]);
        eopts[i] = NULL;
    }
}

const engine_opt_t *h_engine_opt(int k, int *engine)
{
    for (int i = 0; i < S_NENGINES; i++)
        for (const engine_opt_t *p = s_engines[i]->options; p && p->name; p++)
            if (k-- == 0) {
                if (engine) *engine = i;
                return p;
            }
    return NULL;
}

int h_engine_opt_set(void *const eopts[H_MAX_ENGINES], int k, const char *value)
{
    int i;
    const engine_opt_t *p = h_engine_opt(k, &i);
    if (!p || !s_engines[i]->opt_set || !eopts[i]) return err_set(ERR_INVAL, "no engine option %d", k);
    return s_engines[i]->opt_set(eopts[i], p->name, p->has_value ? value : NULL);
}

int h_engine_opts_check(void *const eopts[H_MAX_ENGINES])
{
    for (int i = 0; i < S_NENGINES; i++)
        if (s_engines[i]->opts_check) CHECK(s_engines[i]->opts_check(eopts[i]));
    return 0;
}

const void *h_engine_opts(const h_engset_t *es, const char *engine)
{
    int i = s_index(engine);
    return i >= 0 ? es->eopts[i] : NULL;
}

int h_engine_extra_ranks(const h_engset_t *es, const char *engine, int world)
{
    const engine_ops_t *e = h_engine_find(engine);
    return e && e->extra_ranks ? e->extra_ranks(h_engine_opts(es, engine), world) : 0;
}

int h_engine_in_sync(const h_engset_t *es, const char *engine)
{
    const engine_ops_t *e = h_engine_find(engine);
    return !e || !e->in_sync || e->in_sync(h_engine_opts(es, engine));
}

void h_engine_cfg(const h_engset_t *es, const comm_t *comm, const char *engine, engine_cfg_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device = es->gpus ? es->device : -1;
    cfg->impl = es->impl;
    cfg->timeout_ms = es->timeout_s * 1000;
    cfg->seg_bytes = es->seg_bytes;
    int extra = h_engine_extra_ranks(es, engine, comm->world);
    if (extra >= comm->world) extra = comm->world - 1;
    cfg->nworkers = comm->world - extra;
    cfg->opts = h_engine_opts(es, engine);
    cfg->size_scale = es->shrink > 1 ? es->shrink : 1; /* emulated runs: tensors shrunk (docs/emulation.md) */
}

int h_engine_schedule(const h_engset_t *es, const char *engine, const sched_env_t *env, size_t count, size_t esz,
                      sched_t *out)
{
    const engine_ops_t *e = h_engine_find(engine);
    if (!e) return err_set(ERR_INVAL, "no engine %s (engines: %s)", engine ? engine : "(none)", h_engine_names());
    if (!e->schedule) return err_set(ERR_INVAL, "engine %s declares no schedule", engine);
    return e->schedule(h_engine_opts(es, engine), env, count, esz, out);
}
