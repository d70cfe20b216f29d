/* mem.c: this process's resident-set size from /proc/self/status (VmRSS, and the VmHWM peak), and
 * resetting the peak mark through /proc/self/clear_refs. */
#include "core/mem.h"
#include "core/err.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The value of a "Key:   123 kB" line in /proc/self/status, in bytes; 0 if unavailable. */
static size_t s_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[256];
    size_t klen = strlen(key), out = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) || line[klen] != ':') continue;
        unsigned long long kb;
        if (sscanf(line + klen + 1, "%llu", &kb) == 1) out = (size_t)kb * 1024;
        break;
    }
    fclose(f);
    return out;
}

size_t mem_peak_rss(void) { return s_status_kb("VmHWM"); }
size_t mem_current_rss(void) { return s_status_kb("VmRSS"); }

size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}

int mem_reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_SYS, "mem_reset_peak: open /proc/self/clear_refs: %s", strerror(errno));
    ssize_t n = write(fd, "5", 1);
    int e = errno;
    close(fd);
    if (n != 1) return err_set(ERR_SYS, "mem_reset_peak: write /proc/self/clear_refs: %s", strerror(e));
    return 0;
}
