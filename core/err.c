/* err.c: error text table, a thread-local trace of where an error travelled, and a detail message. */
#include "core/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TRACE_MAX 8
static _Thread_local struct { const char *file; int line; } t_trace[TRACE_MAX];
static _Thread_local int t_ntrace;
static _Thread_local char t_detail[512];

const char *err_str(int code)
{
    if (code >= 0) return "ok";
    switch (code) {
#define SB_ERR_CASE(name, c, text) case c: return text;
        SB_ERRORS(SB_ERR_CASE)
#undef SB_ERR_CASE
    }
    return "unknown error";
}

void err_note(int code, const char *file, int line, const char *expr)
{
    (void)code; (void)expr;
    if (t_ntrace < TRACE_MAX) {
        t_trace[t_ntrace].file = file;
        t_trace[t_ntrace].line = line;
        t_ntrace++;
    }
}

int err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_detail, sizeof t_detail, fmt, ap);
    va_end(ap);
    t_ntrace = 0;
    return code;
}

const char *err_detail(void) { return t_detail; }

void err_clear(void)
{
    t_ntrace = 0;
    t_detail[0] = '\0';
}

static int s_locations = 1; /* set once, before any thread starts */
void err_show_locations(int on) { s_locations = on; }

const char *err_trace(int code, char *buf, unsigned long len)
{
    size_t off = 0;
    int n = snprintf(buf, len, "%s", err_str(code));
    if (n > 0) off = (size_t)n < len ? (size_t)n : len - 1;
    if (t_detail[0] && off < len)
        off += (size_t)snprintf(buf + off, len - off, ": %s", t_detail);
    for (int i = 0; i < t_ntrace && s_locations && off < len; i++) {
        const char *f = strrchr(t_trace[i].file, '/');
        f = f ? f + 1 : t_trace[i].file;
        int m = snprintf(buf + off, len - off, "%s%s:%d", i ? " <- " : " (at ", f, t_trace[i].line);
        if (m > 0) off += (size_t)m;
    }
    if (t_ntrace && s_locations && off + 1 < len) snprintf(buf + off, len - off, ")");
    err_clear();
    return buf;
}
