/* sim_run_simgrid.c: sim.h's entry points with SimGrid: the plan cut in this process, the replay run in a child
 * (h_sim_child, sim_simgrid.c: a SimGrid engine runs once a process), under the run's timeout, its result read
 * back through a pipe. */
#include "harness/simulate/sim_int.h"
#include "core/err.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int h_sim_available(const char **why)
{
    if (why) *why = NULL;
    return 1;
}

int h_sim_run(const h_sim_platform_t *pl, const h_sim_work_t *w, h_sim_result_t *out)
{
    memset(out, 0, sizeof *out);
    h_sim_plan_t p;
    CHECK(h_sim_plan(pl, w, &p));
    h_sim_platform_t pp = *pl; /* with the plan's merged server machines */
    pp.pool = p.pool;
    pl = &pp;
    out->machines = p.machines_apart;
    out->nic_max_bytes = p.nic_max_bytes;
    out->comms = p.comms_step * (uint64_t)w->steps;
    out->merge = p.merge;
    out->stream = p.streams;
    out->bundle = p.bundle;
    out->pool = p.pool;
    out->pool_unequal = p.pool_unequal;
    out->link_is_nic = p.busy_is_nic;
    int fds[2];
    if (pipe(fds) < 0) {
        int e = errno;
        h_sim_plan_free(&p);
        return err_set(ERR_IO, "simulate: pipe: %s", strerror(e));
    }
    double avail_mb = 0;                            /* for a kill's words: the memory there was to take */
    FILE *mi = fopen("/proc/meminfo", "r");
    for (char line[128]; mi && fgets(line, sizeof line, mi);)
        if (sscanf(line, "MemAvailable: %lf kB", &avail_mb) == 1) {
            avail_mb /= 1024;
            break;
        }
    if (mi) fclose(mi);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        h_sim_child(fds[1], pl, &p, w, out);
    }
    close(fds[1]);
    int rc = 0;
    if (pid < 0) rc = err_set(ERR_IO, "simulate: fork: %s", strerror(errno));
    char buf[1 + sizeof *out + 512];
    size_t got = 0;
    int tmo_ms = (pl->timeout_s > 0 ? pl->timeout_s : 600) * 1000;
    while (rc == 0) {
        struct pollfd pf = {.fd = fds[0], .events = POLLIN};
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int left = tmo_ms - (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        int pr = left > 0 ? poll(&pf, 1, left) : 0;
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            kill(pid, SIGKILL);
            rc = err_set(ERR_TIMEOUT, "simulate: gave up after %d s (--timeout); the simulation was stopped", tmo_ms / 1000);
            break;
        }
        ssize_t n = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid > 0) wait4(pid, &st, 0, &ru);
    out->rss_mb = (double)ru.ru_maxrss / 1024;          /* KiB */
    out->actors = p.actors;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double busy = p.busy_max_s;
    h_sim_plan_free(&p);
    if (rc < 0) return rc;
    buf[got] = '\0';
    if (got && buf[0] == '!') return err_set(ERR_IO, "simulate: %s", buf + 1);
    if (got != 1 + sizeof *out || buf[0] != 'R' || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char why[512];
        h_sim_fail_words(why, sizeof why, st, out->rss_mb, out->actors, avail_mb);
        return err_set(ERR_IO, "simulate: %s", why);
    }
    h_sim_result_t child;
    memcpy(&child, buf + 1, sizeof child);
    out->time_s = child.time_s;
    out->steps = child.steps;
    out->joined = child.joined;
    out->comms -= child.joined < out->comms ? child.joined : 0;
    memcpy(out->step_s, child.step_s, sizeof out->step_s);
    out->link_util = out->time_s > 0 ? busy / out->time_s : 0;
    out->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return 0;
}

int h_sim_collective(const h_sim_platform_t *pl, const sched_t *s, h_sim_result_t *out)
{
    h_sim_work_t w = {.nb = 1, .sched = s, .steps = 1, .min_stream = -1};
    return h_sim_run(pl, &w, out);
}
