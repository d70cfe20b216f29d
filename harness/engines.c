/* engines.c: the table of engines the harness can pick by name (the only place that names them). */
#include "harness/harness.h"
#include "allreduce-tree/tree.h"
#include "ps/ps.h"
#include "ring/ring.h"
#include <stdlib.h>
#include <string.h>

static const engine_ops_t *const s_engines[] = {&ring_engine, &tree_engine, &ps_engine};

const engine_ops_t *h_engine_find(const char *name)
{
    for (size_t i = 0; i < sizeof s_engines / sizeof s_engines[0]; i++)
        if (name && !strcmp(s_engines[i]->name, name)) return s_engines[i];
    return NULL;
}

const char *h_engine_names(void) { return "ring, tree, ps"; }

void h_engine_cfg(const h_opts_t *o, const comm_t *comm, const char *engine, engine_cfg_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const char *dev = getenv("SYNCBENCH_DEVICE"); /* set by the rank after dev_select_of */
    cfg->device = o->gpus && dev ? atoi(dev) : -1;
    cfg->impl = o->impl;
    cfg->timeout_ms = o->timeout_s * 1000;
    cfg->seg_bytes = o->seg_bytes;
    int servers = 0;
    if (!strcmp(engine, "ps") && !o->ps_colocate) {
        const char *e = getenv("SYNCBENCH_SERVERS");
        servers = e ? atoi(e) : o->ps_servers;
        if (!e && servers == 0) servers = 1;
    }
    if (servers >= comm->world) servers = comm->world - 1;
    cfg->nworkers = comm->world - servers;
    cfg->ps_servers = servers;
    cfg->ps_colocate = o->ps_colocate;
    cfg->ps_mode = o->ps_mode;
    cfg->ps_ssp_k = o->ps_ssp_k;
    cfg->ps_partition_bytes = o->ps_partition_bytes;
}
