/* trace.c: the event recorder behind trace.h: one preallocated array, slots claimed with an atomic
 * fetch-add (lock-free for the few threads of a rank), overflow counted; JSON in the Chrome trace
 * event format for timelines. */
#include "core/trace.h"
#include "core/err.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

atomic_int trace_active_;

static _Atomic(trace_ev_t *) s_buf;
static size_t s_cap;
static atomic_size_t s_next;       /* slots claimed (may run past s_cap: those are dropped) */
static atomic_uint_fast64_t s_dropped;
static atomic_uint s_ntid;
static _Thread_local uint32_t s_tid;

int trace_enable(size_t capacity)
{
    trace_reset();
    if (!capacity) capacity = TRACE_DEFAULT_CAPACITY;
    /* calloc: untouched pages cost no memory until events land there */
    trace_ev_t *b = calloc(capacity, sizeof *b);
    if (!b) return err_set(ERR_NOMEM, "trace: no room for %zu events", capacity);
    s_cap = capacity;
    atomic_store(&s_next, 0);
    atomic_store(&s_dropped, 0);
    atomic_store_explicit(&s_buf, b, memory_order_release);
    atomic_store_explicit(&trace_active_, 1, memory_order_release);
    return 0;
}

void trace_disable(void) { atomic_store_explicit(&trace_active_, 0, memory_order_release); }

void trace_reset(void)
{
    trace_disable();
    trace_ev_t *b = atomic_exchange(&s_buf, NULL);
    free(b);
    s_cap = 0;
    atomic_store(&s_next, 0);
    atomic_store(&s_dropped, 0);
}

void trace_record_(char ph, const char *name, uint64_t ts_ns, uint64_t dur_ns, const char *k0, int64_t v0,
                   const char *k1, int64_t v1)
{
    trace_ev_t *b = atomic_load_explicit(&s_buf, memory_order_acquire);
    if (!b) return;
    uint64_t now = now_ns();
    if (ph == 'X') {
        dur_ns = now > ts_ns ? now - ts_ns : 0;
    } else if (!ts_ns) {
        ts_ns = now;
    }
    if (!s_tid) s_tid = atomic_fetch_add(&s_ntid, 1) + 1;
    size_t i = atomic_fetch_add_explicit(&s_next, 1, memory_order_relaxed);
    if (i >= s_cap) {
        atomic_fetch_add_explicit(&s_dropped, 1, memory_order_relaxed);
        return;
    }
    trace_ev_t *e = &b[i];
    e->k0 = k0;
    e->k1 = k1;
    e->v0 = v0;
    e->v1 = v1;
    e->ts_ns = ts_ns;
    e->dur_ns = dur_ns;
    e->tid = s_tid;
    e->ph = ph;
    atomic_thread_fence(memory_order_release);
    e->name = name; /* last: a slot with a NULL name is claimed but not written yet */
}

size_t trace_count(void)
{
    size_t n = atomic_load(&s_next);
    return n < s_cap ? n : s_cap;
}

uint64_t trace_dropped(void) { return atomic_load(&s_dropped); }

int trace_get(size_t i, trace_ev_t *out)
{
    trace_ev_t *b = atomic_load_explicit(&s_buf, memory_order_acquire);
    if (!b || i >= trace_count()) return err_set(ERR_RANGE, "trace: no event %zu", i);
    atomic_thread_fence(memory_order_acquire);
    *out = b[i];
    return 0;
}

/* a growing text buffer */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} s_buf_t;

static void s_put(s_buf_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(s_buf_t *s, const char *fmt, ...)
{
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { s->oom = 1; return; }
        if ((size_t)n < room) { s->len += (size_t)n; return; }
        size_t cap = s->cap ? s->cap * 2 : 1 << 16;
        while (cap - s->len <= (size_t)n) cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) { s->oom = 1; return; }
        s->p = p;
        s->cap = cap;
    }
}

/* a JSON string body: names are static identifiers, but escape what JSON requires anyway */
static void s_put_str(s_buf_t *s, const char *str)
{
    s_put(s, "\"");
    for (const unsigned char *c = (const unsigned char *)(str ? str : "?"); *c; c++) {
        if (*c == '"' || *c == '\\') s_put(s, "\\%c", *c);
        else if (*c < 0x20) s_put(s, "\\u%04x", *c);
        else s_put(s, "%c", *c);
    }
    s_put(s, "\"");
}

/* microseconds since base, signed (another host's clock may read before it), ns precision */
static void s_put_us(s_buf_t *s, uint64_t ts, uint64_t base)
{
    int neg = ts < base;
    uint64_t d = neg ? base - ts : ts - base;
    s_put(s, "%s%" PRIu64 ".%03u", neg ? "-" : "", d / 1000, (unsigned)(d % 1000));
}

static void s_put_args(s_buf_t *s, const trace_ev_t *e)
{
    if (!e->k0 && !e->k1) return;
    s_put(s, ",\"args\":{");
    if (e->k0) {
        s_put_str(s, e->k0);
        s_put(s, ":%" PRId64, e->v0);
    }
    if (e->k1) {
        s_put(s, "%s", e->k0 ? "," : "");
        s_put_str(s, e->k1);
        s_put(s, ":%" PRId64, e->v1);
    }
    s_put(s, "}");
}

int trace_json(char **out, size_t *len, int pid, const char *process_name, uint64_t base_ns)
{
    *out = NULL;
    *len = 0;
    s_buf_t s = {0};
    s_put(&s, "%s", ""); /* an empty fragment is still a valid string */
    const char *sep = "";
    if (process_name) {
        s_put(&s, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
        s_put_str(&s, process_name);
        s_put(&s, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", pid,
              pid);
        sep = ",\n";
    }
    size_t n = trace_count();
    uint64_t last = base_ns;
    trace_ev_t e = {0};
    for (size_t i = 0; i < n; i++) {
        if (trace_get(i, &e) < 0 || !e.name) continue;
        s_put(&s, "%s", sep);
        sep = ",\n";
        if (e.ph == 'M') {
            s_put(&s, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":", pid, e.tid);
            s_put_str(&s, e.name);
            s_put(&s, "}}");
            continue;
        }
        s_put(&s, "{\"name\":");
        s_put_str(&s, e.name);
        s_put(&s, ",\"ph\":\"%c\",\"pid\":%d,\"tid\":%u,\"ts\":", e.ph, pid, e.tid);
        s_put_us(&s, e.ts_ns, base_ns);
        if (e.ph == 'X') {
            s_put(&s, ",\"dur\":");
            s_put_us(&s, e.dur_ns, 0);
        }
        if (e.ph == 'i') s_put(&s, ",\"s\":\"t\"");
        s_put_args(&s, &e);
        s_put(&s, "}");
        uint64_t end = e.ts_ns + (e.ph == 'X' ? e.dur_ns : 0);
        if (end > last) last = end;
    }
    uint64_t dropped = trace_dropped();
    if (dropped) {
        s_put(&s, "%s{\"name\":\"trace buffer full\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":0,\"ts\":", sep, pid);
        s_put_us(&s, last, base_ns);
        s_put(&s, ",\"args\":{\"dropped\":%" PRIu64 ",\"capacity\":%zu}}", dropped, s_cap);
    }
    if (s.oom) {
        free(s.p);
        return err_set(ERR_NOMEM, "trace: no memory for the JSON of %zu events", n);
    }
    *out = s.p;
    *len = s.len;
    return 0;
}
