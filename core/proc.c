/* proc.c: another process's state from /proc (proc.h), and the limit a stopped or silent peer gets. */
#include "core/proc.h"
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
