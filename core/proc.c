/* proc.c: another process's state from /proc (proc.h), the limit a stopped or silent peer gets, and this process's run delay. */
#include "core/proc.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int proc_stopped(int pid)
{
    if (pid <= 0) return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return rp && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't');
}

int proc_stop_limit_ms(long long timeout_ms)
{
    long long half = timeout_ms / 2;
    return half > PROC_STOP_MAX_MS ? PROC_STOP_MAX_MS : half < 1000 ? 1000 : (int)half;
}

double proc_run_delay_s(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    double sum = 0;
    int seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* a thread that ended meanwhile */
        unsigned long long run = 0, delay = 0;
        if (fscanf(f, "%llu %llu", &run, &delay) == 2) sum += (double)delay / 1e9, seen++;
        fclose(f);
    }
    closedir(d);
    return seen ? sum : -1;
}
