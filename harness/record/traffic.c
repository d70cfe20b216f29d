/* traffic.c: measured traffic matrices (harness/traffic.h): per-peer counters gathered over the
 * communicator into a world x world matrix of bytes, row = sender, and its JSON form. */
#include "harness/record/traffic.h"
#include "core/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void h_traffic_snap(comm_t *comm, uint64_t *sent, uint64_t *recv)
{
    for (int r = 0; r < comm->world; r++)
        tp_peer_counters(comm->tp, r, sent ? &sent[r] : NULL, recv ? &recv[r] : NULL);
}

int h_traffic_gather_all(comm_t *comm, const uint64_t *sent0, uint64_t *mat, int timeout_ms)
{
    size_t W = (size_t)comm->world;
    uint64_t *row = calloc(W, sizeof *row);
    if (!row) return ERR_NOMEM;
    h_traffic_snap(comm, row, NULL);
    for (size_t r = 0; r < W; r++) row[r] -= sent0 ? sent0[r] : 0;
    int rc = comm_allgather(comm, row, W * sizeof *row, mat, timeout_ms);
    free(row);
    return rc;
}

int h_traffic_gather_workers(comm_t *comm, int nworkers, const uint64_t *sent0, const uint64_t *recv0,
                             uint64_t *mat, int timeout_ms)
{
    size_t W = (size_t)comm->world, P = (size_t)nworkers;
    uint64_t *mine = calloc(2 * W, sizeof *mine), *all = calloc(2 * W * P, sizeof *all);
    int rc = mine && all ? 0 : ERR_NOMEM;
    if (rc == 0) {
        h_traffic_snap(comm, mine, mine + W);
        for (size_t r = 0; r < W; r++) {
            mine[r] -= sent0 ? sent0[r] : 0;
            mine[W + r] -= recv0 ? recv0[r] : 0;
        }
        rc = comm_allgather_group(comm, mine, 2 * W * sizeof *mine, all, nworkers, timeout_ms);
    }
    if (rc == 0) {
        for (size_t i = 0; i < W; i++)
            for (size_t j = 0; j < W; j++) {
                uint64_t v = 0;
                if (j < P) v = all[j * 2 * W + W + i];   /* j received from i */
                else if (i < P) v = all[i * 2 * W + j];  /* i sent to server j */
                mat[i * W + j] = i == j ? 0 : v;
            }
    }
    free(mine);
    free(all);
    return rc;
}

char *h_traffic_json(const uint64_t *mat, int world)
{
    size_t W = (size_t)world, cap = 8 + W * W * 22, off = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[off++] = '[';
    for (size_t i = 0; i < W * W; i++)
        off += (size_t)snprintf(s + off, cap - off, "%s%llu", i ? ", " : "", (unsigned long long)mat[i]);
    s[off++] = ']';
    s[off] = 0;
    return s;
}

int h_traffic_stats(const double *m, size_t nm, double steps, h_traffic_stats_t *st)
{
    size_t n = 0;
    while ((n + 1) * (n + 1) <= nm) n++;
    memset(st, 0, sizeof *st);
    if (!n || n * n != nm || !(steps > 0))
        return err_set(ERR_INVAL, "traffic: %zu entries are not a square matrix, or %g steps", nm, steps);
    double lsum = 0, nsum = 0;
    for (size_t i = 0; i < n; i++) {
        double nic = 0;
        for (size_t j = 0; j < n; j++) {
            if (i == j) continue;
            double v = m[i * n + j] / steps;
            if (v > 0) {
                st->links++;
                lsum += v;
                if (v > st->link_max) st->link_max = v;
            }
            nic += v + m[j * n + i] / steps;
        }
        nsum += nic;
        if (nic > st->nic_max) {
            st->nic_max = nic;
            st->nic_busiest = (int)i;
        }
    }
    st->ranks = (int)n;
    st->link_mean = st->links ? lsum / (double)st->links : 0;
    st->nic_mean = nsum / (double)n;
    return 0;
}

double h_traffic_ratio(double max, double mean) { return mean > 0 ? max / mean : 0; }
