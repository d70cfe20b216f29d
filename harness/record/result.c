/* result.c: result metadata (host, the git sha baked in at build time, time, command line, topology,
 * versions) and whole-line, all-or-nothing appends to JSON-lines results files. */
#include "harness/record/result.h"
#include "core/err.h"
#include "core/topo.h"
#include "harness/record/jsonl.h"
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "sb_version.h" /* SB_GIT_SHA: generated at build time (scripts/gen-version) */

const char *h_git_sha(void)
{
    return SB_GIT_SHA;
}

void h_meta_fill(h_meta_t *m, int argc, char **argv)
{
    memset(m, 0, sizeof *m);
    gethostname(m->host, sizeof m->host - 1);
    snprintf(m->git_sha, sizeof m->git_sha, "%s", h_git_sha());
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(m->timestamp, sizeof m->timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    size_t off = 0;
    m->argc = argc;
    m->argv = argv;
    for (int i = 0; i < argc && off < sizeof m->cmdline - 1; i++)
        off += (size_t)snprintf(m->cmdline + off, sizeof m->cmdline - off, "%s%s", i ? " " : "", argv[i]);
    if (topo_summary(m->topo, sizeof m->topo) < 0) snprintf(m->topo, sizeof m->topo, "unknown");
    if (topo_cpu_model(m->cpu, sizeof m->cpu) < 0) snprintf(m->cpu, sizeof m->cpu, "unknown");
    int zmaj, zmin, zpat;
    zmq_version(&zmaj, &zmin, &zpat);
    /* TCP's congestion control: new network namespaces (the emulated machines) inherit it, and it sets how
     * flows share a shaped NIC */
    char cc[32] = "unknown";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    if (f) {
        if (fgets(cc, sizeof cc, f)) cc[strcspn(cc, "\n")] = '\0';
        fclose(f);
    }
    snprintf(m->versions, sizeof m->versions, "zeromq %d.%d.%d, msgpack-c %s, hwloc %u.%u.%u, tcp %s", zmaj, zmin,
             zpat, msgpack_version(), HWLOC_API_VERSION >> 16, (HWLOC_API_VERSION >> 8) & 0xff,
             HWLOC_API_VERSION & 0xff, cc);
}

void h_json_str(char *buf, size_t len, const char *s)
{
    size_t o = 0;
    if (len < 3) { if (len) buf[0] = '\0'; return; }
    buf[o++] = '"';
    for (; s && *s && o + 8 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { buf[o++] = '\\'; buf[o++] = (char)c; }
        else if (c == '\n') { buf[o++] = '\\'; buf[o++] = 'n'; }
        else if (c == '\t') { buf[o++] = '\\'; buf[o++] = 't'; }
        else if (c < 0x20) o += (size_t)snprintf(buf + o, len - o, "\\u%04x", c);
        else buf[o++] = (char)c;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

int h_json_append(const char *path, const char *lines, size_t len)
{
    if (!path) return 0;
    if (!strcmp(path, "-")) {
        size_t w = fwrite(lines, 1, len, stdout);
        fflush(stdout);
        return w == len ? 0 : err_set(ERR_IO, "writing results to stdout failed");
    }
    return h_jappend_line(path, lines, len);
}

/* ---- result lines (jansson) ---- */

int h_jmerge(json_t *dst, json_t *part)
{
    int rc = dst && part && json_is_object(part) ? json_object_update(dst, part) : -1;
    json_decref(part);
    return rc;
}

/* The whole command line as one string (no length limit); NULL when out of memory. */
static char *s_cmdline(const h_meta_t *m)
{
    size_t n = 1;
    for (int i = 0; i < m->argc; i++) n += strlen(m->argv[i]) + 1;
    char *s = malloc(n), *p = s;
    if (!s) return NULL;
    *p = '\0';
    for (int i = 0; i < m->argc; i++) p += sprintf(p, "%s%s", i ? " " : "", m->argv[i]);
    return s;
}

char *h_result_line(const h_out_t *out, const h_meta_t *m, const char *mode, json_t *body, size_t *len)
{
    if (!body) { err_set(ERR_NOMEM, "%s result line: out of memory", mode); return NULL; }
    char *cmd = s_cmdline(m);
    json_t *line = json_pack("{s:i, s:s, s:s?}", "schema", H_RESULT_SCHEMA, "mode", mode, "label", out->label);
    if (line && !out->label) json_object_del(line, "label");
    int bad = h_jmerge(line, body) != 0 || !cmd; /* body is stolen either way */
    bad = bad || h_jmerge(line, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "host", m->host, "git_sha", m->git_sha,
                                          "timestamp", m->timestamp, "cmdline", cmd, "topology", m->topo, "cpu", m->cpu,
                                          "versions", m->versions, "net", out->net ? out->net : "")) != 0;
    free(cmd);
    /* train lines keep the spacing they always had ("key": value), bench and the rest are compact */
    char *text = bad ? NULL : h_jdump_line(line, !strcmp(mode, "train"), len);
    json_decref(line);
    if (!text) err_set(ERR_NOMEM, "%s result line: out of memory (nothing written)", mode);
    return text;
}

int h_result_write(const h_out_t *out, const h_meta_t *m, const char *mode, json_t *body)
{
    size_t len = 0;
    char *text = h_result_line(out, m, mode, body, &len);
    if (!text) return ERR_NOMEM;
    int rc = h_json_append(out->json, text, len);
    free(text);
    return rc;
}

void h_lines_open(h_lines_t *L, const h_out_t *out, const char *mode)
{
    memset(L, 0, sizeof *L);
    L->out = out;
    L->mode = mode;
    if (out->json) h_meta_fill(&L->meta, out->argc, out->argv);
}

void h_lines_add(h_lines_t *L, json_t *body)
{
    if (!L->out->json || L->bad) { json_decref(body); return; }
    size_t n = 0;
    char *line = h_result_line(L->out, &L->meta, L->mode, body, &n);
    if (line && L->len + n > L->cap) {
        size_t cap = (L->cap + n) * 2;
        char *b = realloc(L->buf, cap);
        if (b) L->buf = b, L->cap = cap;
    }
    if (!line || L->len + n > L->cap) L->bad = 1;
    else memcpy(L->buf + L->len, line, n), L->len += n;
    free(line);
}

int h_lines_close(h_lines_t *L, const char *what)
{
    int rc = 0;
    if (L->out->json && L->bad)
        rc = err_set(ERR_NOMEM, "%s: out of memory making %s (nothing of them written to %s)", L->mode, what, L->out->json);
    else if (L->out->json && L->len) rc = h_json_append(L->out->json, L->buf, L->len);
    free(L->buf);
    L->buf = NULL;
    L->len = L->cap = 0;
    return rc;
}

json_t *h_jarr_u64(const uint64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer((json_int_t)v[i])) != 0) { json_decref(a); a = NULL; }
    return a;
}

json_t *h_jarr_f64(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(v[i])) != 0) { json_decref(a); a = NULL; }
    return a;
}

json_t *h_jarr_text(const char *text)
{
    if (!text) return NULL;
    json_error_t e;
    return json_loads(text, JSON_DECODE_ANY, &e);
}

/* ---- growable JSON pieces ---- */

typedef struct { char *p; size_t len, cap; int oom; } s_jb_t;

static void s_jb_put(s_jb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_jb_put(s_jb_t *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = 1; return; }
        if (b->p && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
}

static char *s_jb_done(s_jb_t *b)
{
    if (b->oom || !b->p) { free(b->p); return NULL; }
    return b->p;
}

static void s_jb_str(s_jb_t *b, const char *s)
{
    s_jb_put(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') s_jb_put(b, "\\%c", c);
        else if (c == '\n') s_jb_put(b, "\\n");
        else if (c == '\t') s_jb_put(b, "\\t");
        else if (c < 0x20) s_jb_put(b, "\\u%04x", c);
        else s_jb_put(b, "%c", c);
    }
    s_jb_put(b, "\"");
}

char *h_json_strdup(const char *s)
{
    s_jb_t b = {0};
    s_jb_str(&b, s);
    return s_jb_done(&b);
}

char *h_meta_cmdline_json(const h_meta_t *m)
{
    s_jb_t b = {0};
    s_jb_put(&b, "%s", ""); /* build the text, then escape it as one string */
    for (int i = 0; i < m->argc; i++) s_jb_put(&b, "%s%s", i ? " " : "", m->argv[i]);
    char *text = s_jb_done(&b);
    if (!text) return NULL;
    char *j = h_json_strdup(text);
    free(text);
    return j;
}

char *h_json_u64_list(const uint64_t *v, size_t n)
{
    s_jb_t b = {0};
    s_jb_put(&b, "[");
    for (size_t i = 0; i < n; i++) s_jb_put(&b, "%s%llu", i ? ", " : "", (unsigned long long)v[i]);
    s_jb_put(&b, "]");
    return s_jb_done(&b);
}

char *h_json_f64_list(const double *v, size_t n, int decimals)
{
    s_jb_t b = {0};
    s_jb_put(&b, "[");
    for (size_t i = 0; i < n; i++) s_jb_put(&b, "%s%.*f", i ? ", " : "", decimals, v[i]);
    s_jb_put(&b, "]");
    return s_jb_done(&b);
}
