/* test_core_misc.c: sanity of the small core modules: memory accounting (RSS, peak, reset, tracked
 * counters), the hwloc topology (summary, CPU model, core count, binding) and run directories (the sweep). */
#include "core/err.h"
#include "core/mem.h"
#include "core/topo.h"
#include "core/rundir.h"
#include "tests/lib/tmpdir.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1024u * 1024u)

Test(mem, rss_follows_touched_memory)
{
    size_t before = mem_current_rss();
    cr_assert_gt(before, 0);
    cr_assert_geq(mem_peak_rss(), before);
    size_t sz = 64 * MiB;
    char *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    memset(p, 1, sz);
    size_t during = mem_current_rss();
    cr_assert_geq(during, before + 56 * MiB, "rss %zu -> %zu", before, during);
    /* the kernel's RSS counters are batched per CPU: allow a little slack between readings */
    cr_assert_geq(mem_peak_rss() + 2 * MiB, during);
    munmap(p, sz);
    size_t after = mem_current_rss();
    cr_assert_leq(after, during - 56 * MiB, "rss did not drop: %zu -> %zu", during, after);
    size_t peak = mem_peak_rss();
    cr_assert_geq(peak + 2 * MiB, during, "peak %zu < %zu", peak, during);
    /* reset: the peak falls back to about the current RSS */
    cr_assert_eq(mem_reset_peak(), 0, "%s", err_detail());
    size_t peak2 = mem_peak_rss();
    cr_assert_lt(peak2, peak - 32 * MiB, "peak %zu -> %zu after reset", peak, peak2);
    cr_assert_geq(peak2 + 2 * MiB, mem_current_rss());
}

Test(mem, tracked_counter_keeps_peak)
{
    mem_counter_t c = {0, 0};
    mem_track(&c, 100);
    mem_track(&c, 50);
    mem_track(&c, -120);
    cr_assert_eq(c.cur, 30);
    cr_assert_eq(c.peak, 150);
    mem_track(&c, 200);
    cr_assert_eq(c.peak, 230);
}

Test(topo, summary_model_cores)
{
    int n = topo_ncores();
    cr_assert_geq(n, 1);
    cr_assert_leq(n, sysconf(_SC_NPROCESSORS_ONLN));
    char s[256];
    cr_assert_eq(topo_summary(s, sizeof s), 0, "%s", err_detail());
    cr_assert(strstr(s, "package") && strstr(s, "core") && strstr(s, "PU") && strstr(s, "NUMA"), "%s", s);
    char want[32];
    snprintf(want, sizeof want, "%d core", n);
    cr_assert(strstr(s, want), "'%s' lacks '%s'", s, want);
    char m[128];
    cr_assert_eq(topo_cpu_model(m, sizeof m), 0);
    cr_assert_gt(strlen(m), 0);
    /* where /proc/cpuinfo names the model, we know it too */
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    int has = 0;
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "model name", 10)) { has = 1; break; }
    if (f) fclose(f);
    if (has) cr_assert_str_neq(m, "unknown");
    char tiny[8];
    cr_assert_eq(topo_summary(tiny, sizeof tiny), 0);    /* truncated, terminated */
    cr_assert_eq(strlen(tiny), 7);
}

static int affinity(cpu_set_t *set)
{
    CPU_ZERO(set);
    cr_assert_eq(sched_getaffinity(0, sizeof *set, set), 0);
    return CPU_COUNT(set);
}

Test(topo, bind_policies)
{
    cpu_set_t before, s1, s2;
    int nb = affinity(&before);
    char desc[128];
    cr_assert_eq(topo_bind("none", 0, 1, desc, sizeof desc), 0);
    cr_assert_str_eq(desc, "none");
    cr_assert_eq(affinity(&s1), nb);
    cr_assert_eq(topo_bind(NULL, 0, 1, desc, sizeof desc), 0);

    cr_assert_eq(topo_bind("bogus", 0, 1, desc, sizeof desc), ERR_INVAL);
    cr_assert(strstr(err_detail(), "bogus"), "%s", err_detail());
    cr_assert_eq(topo_bind("core", -1, 2, desc, sizeof desc), ERR_INVAL);
    cr_assert_eq(topo_bind("core", 2, 2, desc, sizeof desc), ERR_INVAL);

    int n = topo_ncores();
    int r = n > 1 ? 1 : 0;
    cr_assert_eq(topo_bind("core", r, 0, desc, sizeof desc), 0, "%s", err_detail());
    cr_assert(strstr(desc, "core") || strstr(desc, "PU"), "%s", desc);
    int c1 = affinity(&s1);
    cr_assert_geq(c1, 1);
    cr_assert(c1 < nb || n == 1, "binding to one core left %d of %d CPUs", c1, nb);
    /* local rank n + r wraps around onto the same core */
    cr_assert_eq(topo_bind("core", n + r, 0, desc, sizeof desc), 0);
    affinity(&s2);
    cr_assert(CPU_EQUAL(&s1, &s2));
    if (n > 1) {                                          /* another rank, a disjoint core */
        cr_assert_eq(topo_bind("core", 0, n, desc, sizeof desc), 0);
        affinity(&s2);
        cpu_set_t both;
        CPU_AND(&both, &s1, &s2);
        cr_assert_eq(CPU_COUNT(&both), 0);
    }
    cr_assert_eq(topo_bind("numa", 0, 1, desc, sizeof desc), 0, "%s", err_detail());
    cr_assert(strstr(desc, "NUMA"), "%s", desc);
    cr_assert_geq(affinity(&s2), c1);
}

/* Run directories: named with the pid; the sweep removes a dead process's (with the socket file in it) and
 * keeps a live one's, a name that is not ours and a directory holding a folder. */
Test(rundir, sweep_removes_only_dead_processes_dirs)
{
    char *base = tmpdir_make();
    setenv("TMPDIR", base, 1);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/sb-ps-%d-abcdef", base, (int)dead);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/sb-ps-%d-abcdef/s0", base, (int)dead);
    int fd = open(p, O_CREAT | O_WRONLY, 0600);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(p, sizeof p, "%s/sb-ps-%d-nested", base, (int)dead); /* holds a folder: not a run directory's shape */
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/sb-ps-%d-nested/sub", base, (int)dead);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/sb-ps-x%d-abcdef", base, (int)dead); /* not sb-WHAT-PID-XXXXXX */
    cr_assert_eq(mkdir(p, 0700), 0);
    char mine[512];
    cr_assert_eq(rundir_make("ps", mine, sizeof mine), 0, "%s", err_detail());
    char want[64];
    snprintf(want, sizeof want, "/sb-ps-%d-", (int)getpid());
    cr_expect(strstr(mine, want) != NULL, "%s", mine);
    /* rundir_make swept already: the dead process's directory is gone, the rest stays */
    snprintf(p, sizeof p, "%s/sb-ps-%d-abcdef", base, (int)dead);
    cr_expect(access(p, F_OK) != 0, "a dead process's run directory was left: %s", p);
    cr_expect_eq(rundir_sweep(), 0);
    cr_expect(access(mine, F_OK) == 0, "a live process's run directory was removed");
    cr_expect_eq(tmpdir_entries_with(base, "sb-"), 3);
    cr_expect_eq(rundir_make("P/S", mine, sizeof mine), ERR_INVAL);
    unsetenv("TMPDIR");
    tmpdir_remove(base);
}
