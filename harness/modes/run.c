/* run.c: `harness run`'s honesty about its own comparison: a warning when this machine is loaded or the
 * ranks outnumber its cores (the figures then measure the scheduler), and after the rounds a summary
 * per engine configuration of the train samples/s (median, min - max over the rounds) that says when
 * the ranges overlap, so that one noisy run is not read as a ranking. */
#include "harness/modes/modes.h"
#include "harness/record/jsonl.h"
#include "harness/record/stats.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (ranks > cores) {
        fprintf(out, "# warning: %d ranks on %ld cores: ranks wait for a CPU, so the figures measure the scheduler as "
                     "much as the engines (fewer --procs, or a machine with more cores)\n", ranks, cores);
        warned = 1;
    }
    return warned;
}

/* One engine configuration's train samples/s over the rounds. */
typedef struct { char label[160]; double v[64]; size_t n; } s_eng_t;

int h_run_summary(const char *json, FILE *out)
{
    h_jobj_t *objs = NULL;
    size_t n = 0, bad = 0;
    char *files[1] = {(char *)json};
    if (h_jread_files(1, files, &objs, &n, &bad, NULL) < 0) return -1;
    s_eng_t e[H_MAX_ENGINES * 2];
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(h_jstr(&objs[i], "mode", ""), "train")) continue;
        const char *lab = h_jstr(&objs[i], "engine_label", h_jstr(&objs[i], "engine", "?"));
        size_t k = 0;
        while (k < ne && strcmp(e[k].label, lab)) k++;
        if (k == ne) {
            if (ne == sizeof e / sizeof e[0]) continue;
            snprintf(e[ne].label, sizeof e[ne].label, "%s", lab);
            e[ne++].n = 0;
        }
        if (e[k].n < sizeof e[k].v / sizeof e[k].v[0]) e[k].v[e[k].n++] = h_jnum(&objs[i], "samples_per_s", 0);
    }
    h_jfree_all(&objs, &n);
    if (!ne) return 0;
    double med[H_MAX_ENGINES * 2], lo[H_MAX_ENGINES * 2], hi[H_MAX_ENGINES * 2];
    size_t best = 0;
    fprintf(out, "\n# syncbench run: train samples/s per engine over %zu round%s (engines alternating): median, min - max\n",
            e[0].n, e[0].n == 1 ? "" : "s");
    for (size_t k = 0; k < ne; k++) {
        med[k] = h_median(e[k].v, e[k].n); /* sorts v: v[0] min, v[n-1] max */
        lo[k] = e[k].v[0];
        hi[k] = e[k].v[e[k].n - 1];
        if (med[k] > med[best]) best = k;
        fprintf(out, "  %-20s %10.1f   %10.1f - %.1f\n", e[k].label, med[k], lo[k], hi[k]);
    }
    int overlap = 0;
    for (size_t k = 0; k < ne; k++)
        if (k != best && hi[k] >= lo[best]) overlap = 1;
    if (e[best].n < 2)
        fprintf(out, "# one round only: no spread to judge the ranking by (harness run --rounds 3)\n");
    else if (overlap)
        fprintf(out, "# the ranges overlap: the ranking is within this machine's run-to-run spread, not a result\n");
    else
        fprintf(out, "# %s is ahead in every round (its slowest round beats every other engine's fastest)\n", e[best].label);
    return 0;
}
