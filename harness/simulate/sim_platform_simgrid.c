/* sim_platform_simgrid.c: the simulated cluster as SimGrid's platform XML (sim_int.h h_sim_xml), which the replay
 * (sim_simgrid.c) loads: one host a rank, a router a machine, the switch or a fat tree's leaves and spine, and
 * split-direction links with their rates and latencies. */
#include "harness/simulate/sim_int.h"
#include <stdio.h>

/* The platform as SimGrid XML into f: hosts r0..; routers m0.. (machines) and sw; links u/d (a host to
 * its machine and back), nu/nd (a machine to the switch and back). A fat tree (pl->rack > 0) puts routers
 * l0.. (the leaf switches) between the machines and sw (the spine): nu/nd then join machine m to leaf
 * m / R, and lu/ld (a leaf to the spine and back) carry R x NIC / O. */
void h_sim_xml(FILE *f, const h_sim_platform_t *pl, const h_sim_plan_t *p)
{
    double intra = h_sim_gpu_Bps(pl), inter = h_sim_nic_Bps(pl);
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n<zone id=\"world\" routing=\"DijkstraCache\">\n");
    /* a rank's host: its cores at the server rate (bytes a second; 1 byte = 1 flop), for its reductions */
    double speed = pl->server_Bps > 0 ? pl->server_Bps : 1e9;
    int cores = pl->server_cores > 0 ? pl->server_cores : 1;
    for (int r = 0; r < p->world; r++) fprintf(f, "<host id=\"r%d\" speed=\"%.17gf\" core=\"%d\"/>\n", r, speed, cores);
    for (int m = 0; m < p->machines; m++) fprintf(f, "<router id=\"m%d\"/>\n", m);
    fprintf(f, "<router id=\"sw\"/>\n");
    /* a fat tree's leaf switches and their uplinks to the spine (sw), each way R x NIC / O */
    int racks = pl->rack > 0 ? (p->machines + pl->rack - 1) / pl->rack : 0;
    double up = h_sim_up_Bps(pl);
    for (int k = 0; k < racks; k++)
        fprintf(f, "<router id=\"l%d\"/>\n", k);
    for (int k = 0; k < racks; k++)
        fprintf(f, "<link id=\"lu%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n"
                   "<link id=\"ld%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", k, up, pl->lat_s, k, up, pl->lat_s);
    /* server machines merged (pl->pool, the fan-out reduction): their NICs together, their servers' links as many */
    int pool = pl->pool > 1 && pl->server_nodes > 0 ? pl->pool : 1;
    for (int r = 0; r < p->world; r++) {
        double l = r >= p->workers ? intra * pool : intra;
        fprintf(f, "<link id=\"u%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n"
                   "<link id=\"d%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", r, l, pl->lat_s, r, l, pl->lat_s);
    }
    for (int m = 0; m < p->machines; m++) {
        int k = m - pl->nodes, n = m < pl->nodes || pool == 1 ? 1 : pl->server_nodes - k * pool < pool ? pl->server_nodes - k * pool : pool;
        fprintf(f, "<link id=\"nu%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n"
                   "<link id=\"nd%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", m, inter * n, pl->lat_s + pl->nic_lat_s, m,
                inter * n, pl->lat_s + pl->nic_lat_s);
    }
    for (int r = 0; r < p->world; r++) {
        int m = h_sim_machine(pl, p->workers, r);
        fprintf(f, "<route src=\"r%d\" dst=\"m%d\" symmetrical=\"NO\"><link_ctn id=\"u%d\"/></route>\n"
                   "<route src=\"m%d\" dst=\"r%d\" symmetrical=\"NO\"><link_ctn id=\"d%d\"/></route>\n", r, m, r, m, r, r);
    }
    for (int k = 0; k < racks; k++)
        fprintf(f, "<route src=\"l%d\" dst=\"sw\" symmetrical=\"NO\"><link_ctn id=\"lu%d\"/></route>\n"
                   "<route src=\"sw\" dst=\"l%d\" symmetrical=\"NO\"><link_ctn id=\"ld%d\"/></route>\n", k, k, k, k);
    for (int m = 0; m < p->machines; m++) {
        char sw[16];
        if (racks) snprintf(sw, sizeof sw, "l%d", h_sim_rack(pl, m));
        else snprintf(sw, sizeof sw, "sw");
        fprintf(f, "<route src=\"m%d\" dst=\"%s\" symmetrical=\"NO\"><link_ctn id=\"nu%d\"/></route>\n"
                   "<route src=\"%s\" dst=\"m%d\" symmetrical=\"NO\"><link_ctn id=\"nd%d\"/></route>\n", m, sw, m, sw, m, m);
    }
    fprintf(f, "</zone>\n</platform>\n");
}
