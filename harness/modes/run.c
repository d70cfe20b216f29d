/* run.c: `harness run`'s honesty about its own comparison: a warning when this machine is loaded or the
 * ranks outnumber its cores (the figures then measure the scheduler), and after the rounds (or after
 * `harness train` of several engines) a summary per engine configuration of the train samples/s
 * (median, min - max over the rounds) ending in a verdict that says who leads and when the ranges
 * overlap, so that one noisy run is not read as a ranking. */
#include "harness/modes/modes.h"
#include "harness/record/jsonl.h"
#include "harness/record/stats.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int h_oversub_warn(int ranks, FILE *out, const char *prefix)
{
    static int said;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1 || ranks <= cores) return 0;
    if (said++) return 1;
    fprintf(out, "%swarning: %d ranks on %ld cores: ranks wait for a CPU, so the timings are the host's scheduling as much "
                 "as the algorithm's (fewer --procs, or a machine with more cores)\n", prefix, ranks, cores);
    fflush(out);
    return 1;
}

int h_run_load_check(const h_run_cfg_t *o, FILE *out)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double load[1] = {0};
    int warned = 0;
    if (cores < 1) return 0;
    int ranks = o->procs;
    for (int i = 0; i < o->nengines; i++) {
        int r = o->procs + h_engine_extra_ranks(&o->es, o->engines[i], o->procs);
        ranks = r > ranks ? r : ranks;
    }
    if (getloadavg(load, 1) == 1 && load[0] > (double)cores) {
        fprintf(out, "# warning: this machine is loaded (load average %.2f over %ld cores): the engines share the CPUs "
                     "with other work and their ranking may flip between runs\n", load[0], cores);
        warned = 1;
    }
    return h_oversub_warn(ranks, out, "# ") || warned;
}

/* One engine configuration's train samples/s (an emulated run's: the emulated cluster's) over the rounds, at
 * one world size. */
typedef struct { char label[160]; int world; double v[64]; size_t n, nhb; } s_eng_t;

int h_run_summary(const char *json, const char *who, FILE *out)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, bad = 0;
    char *files[1] = {(char *)json};
    if (h_jread_files(1, files, &objs, &n, &bad, NULL) < 0) return -1;
    s_eng_t e[H_MAX_ENGINES * 2];
    size_t ne = 0;
    int top = 0, worlds = 0; /* the largest world, and whether there are several */
    for (size_t i = 0; i < n; i++) {
        if (strcmp(h_jstr(&objs[i], "mode", ""), "train")) continue;
        const char *lab = h_jstr(&objs[i], "engine_label", h_jstr(&objs[i], "engine", "?"));
        int w = (int)h_jnum(&objs[i], "world", 0);
        worlds |= top && w != top;
        top = w > top ? w : top;
        size_t k = 0;
        while (k < ne && (strcmp(e[k].label, lab) || e[k].world != w)) k++;
        if (k == ne) {
            if (ne == sizeof e / sizeof e[0]) continue;
            snprintf(e[ne].label, sizeof e[ne].label, "%s", lab);
            e[ne].world = w;
            e[ne].nhb = 0;
            e[ne++].n = 0;
        }
        double sps = h_jflag(&objs[i], "emulated", 0) == 1 ? h_jnum(&objs[i], "emu_samples_per_s", 0)
                                                           : h_jnum(&objs[i], "samples_per_s", 0);
        if (e[k].n < sizeof e[k].v / sizeof e[k].v[0]) e[k].v[e[k].n++] = sps;
        e[k].nhb += h_jflag(&objs[i], "host_bound", 0) == 1;
    }
    h_jfree_all(&objs, &n);
    if (!ne) return 0;
    double med[H_MAX_ENGINES * 2], lo[H_MAX_ENGINES * 2], hi[H_MAX_ENGINES * 2];
    size_t best = ne, second = ne, rounds = 0;
    int run = !strcmp(who, "run");
    for (size_t k = 0; k < ne; k++) rounds = e[k].n > rounds ? e[k].n : rounds;
    fprintf(out, "\n# syncbench %s: train samples/s per engine%s over %zu round%s%s: median, min - max\n", who,
            worlds ? "@world" : "", rounds, rounds == 1 ? "" : "s", run ? " (engines alternating)" : "");
    for (size_t k = 0; k < ne; k++) {
        med[k] = h_median(e[k].v, e[k].n); /* sorts v: v[0] min, v[n-1] max */
        lo[k] = e[k].v[0];
        hi[k] = e[k].v[e[k].n - 1];
        if (e[k].world == top && (best == ne || med[k] > med[best])) best = k;
        char name[200];
        snprintf(name, sizeof name, worlds ? "%s@%d" : "%s", e[k].label, e[k].world);
        fprintf(out, "  %-20s %10.1f   %10.1f - %.1f\n", name, med[k], lo[k], hi[k]);
    }
    /* the verdict among the engines of the largest world */
    int overlap = 0;
    size_t hb = 0;
    for (size_t k = 0; k < ne; k++) hb += e[k].world == top ? e[k].nhb : 0;
    for (size_t k = 0; k < ne; k++) {
        if (k == best || e[k].world != top) continue;
        if (hi[k] >= lo[best]) overlap = 1;
        if (second == ne || med[k] > med[second]) second = k;
    }
    char at[32] = "";
    if (worlds) snprintf(at, sizeof at, " at %d workers", top);
    if (second == ne)
        fprintf(out, "# verdict: one engine%s only: nothing to rank\n", at);
    else if (e[best].n < 2)
        fprintf(out, "# verdict: %s leads%s (%.1f samples/s, %.2fx %s's %.1f) in one round: no spread to judge the ranking "
                     "by (harness run --rounds 3 repeats it)\n", e[best].label, at, med[best],
                med[second] > 0 ? med[best] / med[second] : 0, e[second].label, med[second]);
    else if (overlap)
        fprintf(out, "# verdict: the ranges overlap%s: the ranking is within this machine's run-to-run spread, not a result\n", at);
    else
        fprintf(out, "# verdict: %s is ahead%s in every round (its slowest round beats every other engine's fastest)\n",
                e[best].label, at);
    if (hb)
        fprintf(out, "# (%zu of these runs host-bound: this machine's CPUs were the limit, so the verdict measures the host as "
                     "much as the engines)\n", hb);
    return 0;
}
