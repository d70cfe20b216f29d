/* sim_nosimgrid.c: sim.h in a build without SimGrid: simulate says why and how to get it. */
#include "harness/simulate/sim.h"
#include "core/err.h"
#include <string.h>

#define S_WHY "this build has no SimGrid (Debian package libsimgrid-dev; scripts/install-deps installs it, then make)"

int h_sim_available(const char **why)
{
    if (why) *why = S_WHY;
    return 0;
}

int h_sim_collective(const h_sim_platform_t *pl, const sched_t *s, h_sim_result_t *out)
{
    (void)pl;
    (void)s;
    memset(out, 0, sizeof *out);
    return err_set(ERR_NODEV, "simulate: " S_WHY);
}

int h_sim_run(const h_sim_platform_t *pl, const h_sim_work_t *w, h_sim_result_t *out)
{
    (void)pl;
    (void)w;
    memset(out, 0, sizeof *out);
    return err_set(ERR_NODEV, "simulate: " S_WHY);
}
