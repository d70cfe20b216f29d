/* topo.h: hwloc topology: a one-line summary (packages, cores, PUs, NUMA nodes, CPU model) for result
 * metadata, and binding a rank to a core (`--bind`): local rank i gets core i mod cores. */
#ifndef SB_TOPO_H
#define SB_TOPO_H
#include <stddef.h>

int topo_summary(char *buf, size_t len);       /* e.g. "1 package, 2 cores, 2 PUs, 1 NUMA node" */
int topo_cpu_model(char *buf, size_t len);
int topo_ncores(void);
/* Bind the calling process to core (local_rank % cores), or spread "numa" style; "none" does nothing.
 * policy: "core", "numa" (NUMA node local_rank % nodes), "none" (or NULL/""). Unknown policy: ERR_INVAL.
 * Binds the whole process (every thread). Writes what was done into desc. */
int topo_bind(const char *policy, int local_rank, int local_world, char *desc, size_t len);

#endif
