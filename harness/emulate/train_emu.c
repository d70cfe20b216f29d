/* train_emu.c: the emulated-cluster figures of `harness train` (train_emu.h). Times measured on the
 * host are divided by --dilate to give emulated times; --shrink changes no time (the links are slowed
 * by the same factor as the tensors shrink). */
#include "harness/emulate/train_emu.h"
#include "harness/record/result.h"
#include "harness/emulate/cluster.h"
#include "trainer/emu.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void h_emu_summarize(const struct emu *e, const h_emu_cfg_t *o, int P, double sps, double step50, double system_busy,
                     const void *all, int R, size_t stride, size_t off_cpu, size_t off_wall, size_t off_wait,
                     h_emu_sum_t *E)
{
    memset(E, 0, sizeof *E);
    const workload_t *wl = emu_workload(e);
    const wl_device_t *d = emu_device(e);
    E->on = 1;
    snprintf(E->model, sizeof E->model, "%s", wl->name);
    snprintf(E->device, sizeof E->device, "%s", d->name);
    snprintf(E->basis, sizeof E->basis, "%s", d->basis);
    E->derived = d->derived;
    E->nodes = o->nodes ? o->nodes : 1;
    E->gpus_per_node = o->nodes ? o->gpus_per_node : P;
    E->shrink = o->shrink >= 1 ? o->shrink : 1;
    E->dilate = o->dilate >= 1 ? o->dilate : 1;
    E->params_full = wl->params;
    E->params = emu_count(e);
    E->emu_sps = sps * E->dilate;
    E->dev_sps = d->samples_per_s;
    E->speedup = E->dev_sps > 0 ? E->emu_sps / E->dev_sps : 0;
    E->efficiency = P > 0 ? E->speedup / P : 0;
    E->step_ms = step50 / E->dilate;
    E->compute_ms = emu_compute_s(e) / E->dilate * 1e3;
    E->exposed_ms = fmax(0, E->step_ms - E->compute_ms);
    double sum = 0, mx = 0, wsum = 0;
    int wn = 0;
    for (int r = 0; r < R; r++) {
        const char *rec = (const char *)all + (size_t)r * stride;
        double cpu, wall, wait;
        memcpy(&cpu, rec + off_cpu, sizeof cpu);
        memcpy(&wall, rec + off_wall, sizeof wall);
        memcpy(&wait, rec + off_wait, sizeof wait);
        double f = wall > 0 ? cpu / wall : 0;
        sum += f;
        mx = fmax(mx, f);
        if (wait >= 0 && wall > 0) wsum += wait / wall, wn++;
    }
    E->host_wait = wn ? wsum / wn : -1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* the verdict over the whole run: sum of fractions = CPU seconds per wall second */
    E->host_bound = h_cluster_host_bound(sum, mx, 1.0, cores > 0 ? (int)cores : 1, system_busy, &E->busy);
    E->cpu_max = mx;
    E->system_busy = system_busy;
}

void h_emu_print(const h_emu_cfg_t *o, const char *name, const char *impl, int P, int has_servers, int nbuckets,
                 const h_emu_sum_t *E)
{
    (void)impl; /* the label names the configuration (h_engine_label) */
    printf("#\n# syncbench train (emulated): engine %s, %d GPU%s on %d machine%s x %d%s, model %s (%.1fM params, "
           "%.2fM moved after shrink %g, %d bucket%s), device %s%s, net %s, dilate %g, batch %zu/GPU\n",
           name, P, P > 1 ? "s" : "", E->nodes, E->nodes > 1 ? "s" : "", E->gpus_per_node,
           has_servers ? " + dedicated servers" : "", E->model, (double)E->params_full / 1e6, (double)E->params / 1e6,
           E->shrink, nbuckets, nbuckets > 1 ? "s" : "", E->device, E->derived ? " (derived)" : "",
           o->net ? o->net : "none (shared memory only)", E->dilate, E->local_batch);
    printf("# device: %s\n", E->basis);
    printf("# %-18s %5s %12s %12s %8s %6s %10s %10s %10s %6s\n", "engine", "GPUs", "samples/s", "1 device", "speedup", "eff",
           "step (ms)", "compute", "exposed", "host");
    printf("  %-18s %5d %12.1f %12.1f %8.2f %6.3f %10.2f %10.2f %10.2f %5.0f%%\n", name, P, E->emu_sps, E->dev_sps, E->speedup,
           E->efficiency, E->step_ms, E->compute_ms, E->exposed_ms, E->busy * 100);
    if (E->host_bound)
        printf("# host-bound: the ranks kept %.0f%% of this machine's CPUs busy (busiest rank %.0f%%; the whole machine "
               "%.0f%% with every other process): the figures measure the host, not the emulated links and devices; "
               "rerun on a quiet machine, or with a larger --shrink (now %g) or --dilate (now %g)\n",
               E->busy * 100, E->cpu_max * 100, E->system_busy * 100, E->shrink, E->dilate);
    if (E->host_wait >= 0.1)
        printf("# host queue: the ranks' threads waited for a CPU %.0f%% of the time (their run delay over wall time, mean "
               "over the ranks): the timings include this host's scheduling%s\n", E->host_wait * 100,
               E->host_bound ? "" : " (not counted in the host-bound verdict)");
    fflush(stdout);
}

json_t *h_emu_json(const h_emu_cfg_t *o, const h_emu_sum_t *E)
{
    json_t *j = json_pack("{s:b, s:s, s:f, s:b, s:i, s:i, s:i, s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                          "emulated", 1, "device", E->device, "device_samples_per_s", E->dev_sps, "device_derived", E->derived,
                          "nodes", E->nodes, "gpus_per_node", E->gpus_per_node, "server_nodes", o->server_nodes,
                          "shrink", E->shrink, "dilate", E->dilate, "params_full", (json_int_t)E->params_full,
                          "emu_samples_per_s", E->emu_sps, "speedup", E->speedup, "scaling_efficiency", E->efficiency,
                          "emu_step_ms", E->step_ms, "emu_compute_ms", E->compute_ms, "exposed_comm_ms", E->exposed_ms,
                          "host_busy", E->busy, "host_cpu_max", E->cpu_max);
    if (h_jmerge(j, json_pack("{s:f, s:f, s:b}", "system_busy", E->system_busy, "host_wait", E->host_wait, "host_bound",
                              E->host_bound)) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}
