/* cluster.c: rank placement, shaped rates, automatic shrink and the host-bound verdict of the
 * emulated GPU cluster (cluster.h). */
#include "harness/cluster.h"

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

double h_cluster_auto_shrink(const h_cluster_t *c, size_t model_bytes, int nworkers, double mem_budget,
                             double max_link_bps)
{
    double k = c->dilate >= 1 ? c->dilate : 1;
    double s = 1;
    while (s < 65536 && ((double)model_bytes * 5 * nworkers / s > mem_budget || c->inter_bps / (s * k) > max_link_bps))
        s *= 2;
    return s;
}

int h_cluster_host_bound(double cpu_s_sum, double cpu_s_max_rank, double wall_s, int cores, double *busy)
{
    double b = wall_s > 0 && cores > 0 ? cpu_s_sum / (wall_s * cores) : 0;
    if (busy) *busy = b;
    return b >= 0.75 || (wall_s > 0 && cpu_s_max_rank / wall_s >= 0.9);
}
