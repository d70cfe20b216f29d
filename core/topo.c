/* topo.c: the machine's topology through hwloc (loaded once per process): a one-line summary for result
 * metadata, the CPU model, the core count, and binding a rank to a core or NUMA node (`--bind`). */
#include "core/topo.h"
#include "core/err.h"
#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t s_topo;
static int s_topo_rc;

static void s_load(void)
{
    if (hwloc_topology_init(&s_topo) < 0) { s_topo_rc = ERR_SYS; return; }
    if (hwloc_topology_load(s_topo) < 0) {
        hwloc_topology_destroy(s_topo);
        s_topo = NULL;
        s_topo_rc = ERR_SYS;
    }
}

static int s_get(hwloc_topology_t *out)
{
    pthread_once(&s_once, s_load);
    if (s_topo_rc < 0) return err_set(ERR_SYS, "hwloc: could not load the topology");
    *out = s_topo;
    return 0;
}

static int s_count(hwloc_topology_t t, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(t, type);
    return n < 0 ? 0 : n;                      /* -1: objects at several depths (not for these types) */
}

int topo_ncores(void)
{
    hwloc_topology_t t = NULL;
    CHECK(s_get(&t));
    int n = s_count(t, HWLOC_OBJ_CORE);
    if (n <= 0) n = s_count(t, HWLOC_OBJ_PU);  /* no core level reported: count PUs */
    return n > 0 ? n : 1;
}

int topo_cpu_model(char *buf, size_t len)
{
    if (!buf || !len) return err_set(ERR_INVAL, "topo_cpu_model: no buffer");
    const char *model = NULL;
    hwloc_topology_t t = NULL;
    if (s_get(&t) == 0) {
        hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
        if (pkg) model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
        if (!model) model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "CPUModel");
    }
    if (model && *model) {
        snprintf(buf, len, "%s", model);
        return 0;
    }
    FILE *f = fopen("/proc/cpuinfo", "re");    /* fallback: the first "model name" line */
    char line[512];
    snprintf(buf, len, "unknown");
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = '\0';
        if (*v) snprintf(buf, len, "%s", v);
        break;
    }
    fclose(f);
    return 0;
}

static const char *s_plural(int n, const char *one, const char *many) { return n == 1 ? one : many; }

int topo_summary(char *buf, size_t len)
{
    if (!buf || !len) return err_set(ERR_INVAL, "topo_summary: no buffer");
    hwloc_topology_t t = NULL;
    CHECK(s_get(&t));
    int pk = s_count(t, HWLOC_OBJ_PACKAGE), co = topo_ncores(), pu = s_count(t, HWLOC_OBJ_PU);
    int nu = s_count(t, HWLOC_OBJ_NUMANODE);
    char model[128];
    topo_cpu_model(model, sizeof model);
    snprintf(buf, len, "%d %s, %d %s, %d %s, %d %s (%s)", pk, s_plural(pk, "package", "packages"), co,
             s_plural(co, "core", "cores"), pu, s_plural(pu, "PU", "PUs"), nu,
             s_plural(nu, "NUMA node", "NUMA nodes"), model);
    return 0;
}

int topo_bind(const char *policy, int local_rank, int local_world, char *desc, size_t len)
{
    char dummy[8];
    if (!desc || !len) { desc = dummy; len = sizeof dummy; }
    desc[0] = '\0';
    if (!policy || !strcmp(policy, "none") || !*policy) {
        snprintf(desc, len, "none");
        return 0;
    }
    int block = !strcmp(policy, "block");
    int core = !strcmp(policy, "core") || block, numa = !strcmp(policy, "numa");
    if (!core && !numa)
        return err_set(ERR_INVAL, "unknown bind policy '%s' (expected core, block, numa or none)", policy);
    if (local_rank < 0 || (local_world > 0 && local_rank >= local_world))
        return err_set(ERR_INVAL, "topo_bind: local rank %d outside local world %d", local_rank, local_world);
    hwloc_topology_t t = NULL;
    CHECK(s_get(&t));
    hwloc_obj_type_t type = core ? HWLOC_OBJ_CORE : HWLOC_OBJ_NUMANODE;
    int n = s_count(t, type);
    if (core && n <= 0) { type = HWLOC_OBJ_PU; n = s_count(t, type); }
    if (n <= 0) return err_set(ERR_UNSUP, "topo_bind: no %s objects in the topology", policy);
    /* core: round-robin (rank i on core i mod n); block: consecutive ranks share a core (rank i on
     * core i * n / local_world), so ring neighbours mostly hand over on the same core */
    int idx = block && local_world > 0 ? (int)((long)local_rank * n / local_world) : local_rank % n;
    hwloc_obj_t obj = hwloc_get_obj_by_type(t, type, (unsigned)idx);
    if (!obj || !obj->cpuset) return err_set(ERR_SYS, "topo_bind: %s %d has no cpuset", policy, idx);
    if (hwloc_set_cpubind(t, obj->cpuset, HWLOC_CPUBIND_PROCESS) < 0)
        return err_set(ERR_SYS, "topo_bind: binding to %s %d failed: %s", policy, idx, strerror(errno));
    char pus[128];
    hwloc_bitmap_list_snprintf(pus, sizeof pus, obj->cpuset);
    snprintf(desc, len, "%s %d (PUs %s)", type == HWLOC_OBJ_NUMANODE ? "NUMA node"
                                          : type == HWLOC_OBJ_CORE ? "core" : "PU", idx, pus);
    return 0;
}
