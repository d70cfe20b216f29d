/* log.c: rank-prefixed log lines on stderr, one write per line so ranks sharing a pipe don't interleave. */
#include "core/log.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank = -1;
static int g_level = -1;

void log_set_rank(int rank) { g_rank = rank; }
void log_set_level(int level) { g_level = level; }

int log_level(void)
{
    if (g_level < 0) {
        const char *e = getenv("SYNCBENCH_LOG");
        g_level = LOG_WARN;
        if (e) {
            if (!strcmp(e, "error")) g_level = LOG_ERROR;
            else if (!strcmp(e, "info")) g_level = LOG_INFO;
            else if (!strcmp(e, "debug")) g_level = LOG_DEBUG;
        }
    }
    return g_level;
}

void log_msg(int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (level > log_level()) return;
    char line[2048];
    int off = 0;
    if (g_rank >= 0) off = snprintf(line, sizeof line, "[rank %d] ", g_rank);
    off += snprintf(line + off, sizeof line - (size_t)off, "%s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    off += n;
    if (off > (int)sizeof line - 2) off = (int)sizeof line - 2;
    line[off++] = '\n';
    ssize_t w = write(2, line, (size_t)off);
    (void)w;
}
