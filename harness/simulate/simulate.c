/* simulate.c: `harness simulate` (simulate.h): for each engine and size, the engine's declared schedule
 * (through the registry) replayed on the simulated cluster (sim.h), printed as a table like bench's and
 * written as "mode":"simulate" result lines. */
#include "harness/simulate/simulate.h"
#include "harness/simulate/sim.h"
#include "harness/registry/layouts.h"
#include "harness/emulate/netspec.h"
#include "core/err.h"
#include "core/sched.h"
#include <stdio.h>
#include <string.h>

int h_simulate(const h_simulate_cfg_t *o)
{
    const char *why = NULL;
    if (!h_sim_available(&why)) return err_set(ERR_NODEV, "simulate: %s", why);
    if (o->emulated) return h_simulate_check(o);
    h_netem_spec_t spec;
    char err[256];
    if (!o->net) return err_set(ERR_INVAL, "simulate: give the machines' NICs: --net inter=RATE (e.g. inter=25gbit)");
    if (h_netem_parse(o->net, &spec, err, sizeof err) < 0) return err_set(ERR_INVAL, "simulate: %s", err);
    if (o->lat_us < 0)
        return err_set(ERR_INVAL, "simulate: give the latency of one hop, --lat US (a GPU to its machine, a machine to "
                                  "the switch; there is no default: it is the network's own)");
    int N = o->nodes > 0 ? o->nodes : 1, G = o->gpus_per_node > 0 ? o->gpus_per_node : 1, P = N * G;
    if (P < 2 && !o->model) return err_set(ERR_INVAL, "simulate: at least 2 GPUs (--nodes N --gpus-per-node G)");
    h_sim_platform_t pl = {.nodes = N, .gpus_per_node = G, .server_nodes = o->server_nodes,
                           .inter_bps = spec.bits_per_s, .intra_bps = o->intra_bps > 0 ? o->intra_bps : H_SIM_INTRA_PCIE3_BPS,
                           .lat_s = o->lat_us * 1e-6, .framing = H_SIM_TCP_FRAMING, .timeout_s = o->timeout_s,
                           .server_Bps = o->server_rate >= 0 ? o->server_rate : H_SIM_SERVER_BPS,
                           .server_cores = o->server_cores > 0 ? o->server_cores : 1};
    CHECK(h_sim_fabric_parse(o->fabric, &pl));
    char fab[64], plat[256];
    h_sim_platform_line(&pl, fab, sizeof fab, plat, sizeof plat);
    if (o->model) {
        printf("# syncbench simulate: machines of %d GPUs, NIC %.4g Gbit/s, GPU link %.4g Gbit/s each way, %g us a hop, "
               "%s; payload %.4f of the line rate (TCP over Ethernet frames); SimGrid flow model, "
               "latency and bandwidth factors 1, no cross-traffic\n", G, pl.inter_bps / 1e9, pl.intra_bps / 1e9, o->lat_us,
               plat, pl.framing);
        return h_simulate_train(o, &pl);
    }
    if (o->engine_all) return err_set(ERR_INVAL, "simulate: --engine all is for training steps (--model M)");
    size_t esz = o->esz ? o->esz : 4;
    printf("# syncbench simulate: %d GPUs (%d machines x %d), NIC %.4g Gbit/s, GPU link %.4g Gbit/s each way, %g us a hop, "
           "%s; payload %.4f of the line rate (TCP over Ethernet frames); SimGrid flow model, latency "
           "and bandwidth factors 1, no cross-traffic\n",
           P, N, G, pl.inter_bps / 1e9, pl.intra_bps / 1e9, o->lat_us, plat, pl.framing);
    printf("# the collective alone, each engine's declared schedule in the segments it pipelines (--seg-kb; a rank sends a "
           "step once its receives of the step before are in); training steps (compute, buckets, overlap, stragglers) "
           "are not simulated yet\n");
    h_lines_t lines;
    h_lines_open(&lines, &o->out, "simulate");
    int rc = 0;
    for (int i = 0; i < o->nengines && rc == 0; i++) {
        const char *eng = o->engines[i];
        printf("# engine %s\n#      size(B)  algo       time(us)    algbw    busbw   NIC max(B)     comms   sim(s)\n"
               "#                                        (GB/s)   (GB/s)\n", eng);
        for (double sz = (double)o->size_min; sz <= (double)o->size_max * 1.0000001 && rc == 0; sz *= o->factor) {
            size_t count = (size_t)sz / esz;
            if (!count) continue;
            sched_env_t env = {.workers = P, .one_host_shm = 0, .device = -1, .segmented = 1, .seg_bytes = o->es.seg_bytes,
                               .gpus_per_node = G};
            sched_t s;
            const h_layout_t *L = h_engine_find(eng) ? NULL : h_layout_find(eng); /* a layout's label */
            h_engset_t es = o->es;
            void *store[H_MAX_ENGINES] = {0};
            h_sim_platform_t lp = pl;
            if (L) {
                rc = h_layout_engset(L, N, &o->es, &es, store);
                lp.server_nodes = h_layout_server_nodes(L, N);
            }
            if (rc == 0) rc = h_engine_schedule(&es, L ? L->engine : eng, &env, count, esz, &s);
            h_layout_free(store);
            if (rc < 0) break;
            h_sim_result_t r;
            const engine_ops_t *ops = h_engine_find(L ? L->engine : eng);
            h_sim_work_t w = {.nb = 1, .sched = &s, .steps = 1, .cpu_reduce = ops && ops->serve, .min_stream = o->min_stream,
                              .fan_bundle = o->fan_bundle, .join = o->join};
            rc = h_sim_run(&lp, &w, &r);
            if (rc == 0) {
                double bytes = (double)(count * esz), algbw = bytes / r.time_s / 1e9, busbw = algbw * 2.0 * (P - 1) / P;
                printf("  %12zu  %-8s %10.1f %8.3f %8.3f %12llu %9llu %8.2f\n", count * esz, s.algo, r.time_s * 1e6, algbw,
                       busbw, (unsigned long long)r.nic_max_bytes, (unsigned long long)r.comms, r.wall_s);
                fflush(stdout);
                if (o->out.json)
                    h_lines_add(&lines, json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:s, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:I, "
                                                  "s:f, s:f, s:f, s:f, s:i, s:s, s:i, s:f, s:f, s:i}",
                                                  "engine", eng, "engine_label", eng, "gpus", P, "nodes", N,
                                                  "gpus_per_node", G, "server_nodes", o->server_nodes,
                                                  "bytes", (json_int_t)(count * esz), "algo", s.algo, "time_us", r.time_s * 1e6,
                                                  "algbw_gbs", algbw, "busbw_gbs", busbw,
                                                  "nic_max_bytes", (json_int_t)r.nic_max_bytes, "comms", (json_int_t)r.comms,
                                                  "sim_wall_s", r.wall_s, "sim_rss_mb", r.rss_mb, "actors", (json_int_t)r.actors, "inter_bps", pl.inter_bps, "intra_bps", pl.intra_bps,
                                                  "lat_us", o->lat_us, "framing", pl.framing, "world", s.world,
                                                  "fabric", fab, "rack", pl.rack, "oversub", pl.oversub,
                                                  "server_Bps", pl.server_Bps, "server_cores", pl.server_cores));
            }
            sched_free(&s);
        }
    }
    int wrc = h_lines_close(&lines, "the simulate lines");
    return rc < 0 ? rc : wrc;
}
