/* cluster.c: rank placement, shaped rates, automatic shrink and the host-bound verdict of the
 * emulated GPU cluster (cluster.h). */
#include "harness/emulate/cluster.h"
#include <stdio.h>

int h_cluster_machine_of(const h_cluster_t *c, int rank, int nworkers)
{
    int g = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    int n = c->nodes > 0 ? c->nodes : 1;
    if (rank < nworkers) return rank / g < n ? rank / g : n - 1;
    int s = rank - nworkers;
    return c->server_nodes > 0 ? n + s % c->server_nodes : s % n;
}

int h_cluster_machines(const h_cluster_t *c, int have_servers)
{
    int n = c->nodes > 0 ? c->nodes : 1;
    return n + (have_servers && c->server_nodes > 0 ? c->server_nodes : 0);
}

double h_cluster_shaped_bps(const h_cluster_t *c)
{
    double s = c->shrink >= 1 ? c->shrink : 1, k = c->dilate >= 1 ? c->dilate : 1;
    return c->inter_bps / (s * k);
}

double h_cluster_auto_shrink(const h_cluster_t *c, const h_shrink_need_t *n)
{
    double k = c->dilate >= 1 ? c->dilate : 1;
    double s = 1, bytes = (double)n->model_bytes;
    while (s < 65536 && (bytes * 5 * n->nranks / s > n->mem_budget || c->inter_bps / (s * k) > n->max_link_bps))
        s *= 2;
    if (n->compute_host_ms >= H_SHRINK_MIN_COMPUTE_MS && n->max_bytes_per_ms > 0)
        while (s < H_SHRINK_HOST_MAX && bytes / s > n->max_bytes_per_ms * n->compute_host_ms) s *= 2;
    return s;
}

int h_cluster_host_bound(double cpu_s_sum, double cpu_s_max_rank, double wall_s, int cores, double system_busy,
                         double *busy)
{
    double b = wall_s > 0 && cores > 0 ? cpu_s_sum / (wall_s * cores) : 0;
    if (busy) *busy = b;
    return b >= 0.75 || (wall_s > 0 && cpu_s_max_rank / wall_s >= 0.9) || system_busy >= 0.75;
}

int h_host_cpu_sample(unsigned long long *busy, unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 5) return -1;
    unsigned long long t = 0;
    for (int i = 0; i < 8 && i < n; i++) t += v[i]; /* guest time is already in user */
    *total = t;
    *busy = t - v[3] - v[4];
    return 0;
}
