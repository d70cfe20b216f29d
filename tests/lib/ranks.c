/* ranks.c: fork P ranks for multi-process tests; no child outlives the call. */
#include "tests/lib/ranks.h"
#include "core/port.h"
#include "core/tp.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int harness_path(char *out, size_t len)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    int w = snprintf(out, len, "%s/../harness", self);
    struct stat st;
    if (w < 0 || (size_t)w >= len || stat(out, &st) != 0 || !S_ISREG(st.st_mode) || access(out, X_OK) != 0) return -1;
    return 0;
}

void set_rank_env(int rank, int world, int port, const char *job)
{
    char b[32];
    snprintf(b, sizeof b, "%d", rank); setenv("RANK", b, 1); setenv("LOCAL_RANK", b, 1);
    snprintf(b, sizeof b, "%d", world); setenv("WORLD_SIZE", b, 1); setenv("LOCAL_WORLD_SIZE", b, 1);
    snprintf(b, sizeof b, "%d", port); setenv("MASTER_PORT", b, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("SYNCBENCH_JOB", job, 1);
}

int run_ranks(int world, rank_fn fn, void *arg, int timeout_ms)
{
    int port = port_free_loopback();
    char job[64];
    static int counter;
    snprintf(job, sizeof job, "t%d-%d-%ld", (int)getpid(), ++counter, (long)time(NULL));
    pid_t *pids = calloc((size_t)world, sizeof *pids);
    int failed = 0;
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            set_rank_env(r, world, port, job);
            int rc = fn(r, world, arg);
            fflush(NULL);
            _exit(rc == 0 ? 0 : 1);
        }
        pids[r] = p;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int left = world;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < world; r++)
                if (pids[r] == p) {
                    pids[r] = 0;
                    left--;
                    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                        failed++;
                        fprintf(stderr, "run_ranks: rank %d failed (%s %d)\n", r,
                                WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                    }
                }
            continue;
        }
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms > timeout_ms) {
            for (int r = 0; r < world; r++)
                if (pids[r] > 0) {
                    fprintf(stderr, "run_ranks: rank %d timed out after %d ms\n", r, timeout_ms);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    failed++;
                }
            break;
        }
        usleep(2000);
    }
    free(pids);
    tp_cleanup_job(job); /* channels a killed or failed rank left behind */
    return failed;
}

int run_cmd_timed(const char *cmd, char *out, size_t len, double *secs)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t o = 0, r;
    while (o + 1 < len && (r = fread(out + o, 1, len - 1 - o, p)) > 0) o += r;
    out[o] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {}
    int st = pclose(p);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (secs) *secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int run_cmd(const char *cmd, char *out, size_t len) { return run_cmd_timed(cmd, out, len, NULL); }

long rss_kb(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

int count_in(const char *hay, const char *needle)
{
    int n = 0;
    size_t k = strlen(needle);
    for (const char *p = hay; k && (p = strstr(p, needle)); p += k) n++;
    return n;
}

int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) >= 0)
        if (!needle || strstr(line, needle)) n++;
    free(line);
    fclose(f);
    return n;
}
