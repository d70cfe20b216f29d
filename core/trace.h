/* trace.h: a per-process, low-overhead event recorder for timelines (Chrome trace events: duration
 * "B"/"E", complete "X", instant "i", counter "C"), serialized to JSON for chrome://tracing and
 * Perfetto. Events carry a static name and up to two small integer args with static names (bucket,
 * bytes, peer); timestamps come from CLOCK_MONOTONIC (shared by the processes of one host).
 *
 * Recording: one preallocated array, a slot claimed with one atomic fetch-add (lock-free, any number
 * of threads); once full, events are counted as dropped, never written. Each thread gets a small
 * number (tid, 1, 2, ...) at its first event. While tracing is off every call below costs one load
 * and one predictable branch, and nothing is recorded. Reading (trace_count, trace_get, trace_json)
 * is for when the recording threads are done (after engines are destroyed / threads joined). */
#ifndef SB_TRACE_H
#define SB_TRACE_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "core/timer.h"

#define TRACE_DEFAULT_CAPACITY ((size_t)1 << 19) /* events; 64 bytes each, pages touched as used */

typedef struct {
    const char *name;         /* static string */
    const char *k0, *k1;      /* static arg names, NULL = no arg */
    int64_t     v0, v1;
    uint64_t    ts_ns;        /* CLOCK_MONOTONIC */
    uint64_t    dur_ns;       /* "X" only */
    uint32_t    tid;          /* per-process thread number, 1.. */
    char        ph;           /* 'B', 'E', 'X', 'i', 'C', 'M' (thread name: name is the thread's name) */
} trace_ev_t;

extern atomic_int trace_active_;  /* read through trace_on() */

static inline int trace_on(void)
{
    return __builtin_expect(atomic_load_explicit(&trace_active_, memory_order_relaxed), 0);
}

/* Start recording into a fresh array of capacity events (0 = TRACE_DEFAULT_CAPACITY); events of an
 * earlier enable are discarded. ERR_NOMEM if the array cannot be allocated. */
int  trace_enable(size_t capacity);
/* Stop recording; recorded events stay readable. */
void trace_disable(void);
/* Stop and free everything (events, counts). Safe to call twice. */
void trace_reset(void);

size_t   trace_count(void);        /* events recorded (<= capacity) */
uint64_t trace_dropped(void);      /* events that did not fit */
/* Copy event i (0 <= i < trace_count(), in the order slots were claimed) into *out; ERR_RANGE otherwise. */
int trace_get(size_t i, trace_ev_t *out);

/* The recorded events as JSON objects of the Chrome trace format, separated by ",\n" (no brackets, so
 * several processes' fragments concatenate), pid = pid, ts/dur in microseconds since base_ns (the
 * caller's common origin, e.g. rank 0's clock at start). Starts with this process's process_name
 * metadata when process_name is not NULL; when events were dropped, ends with an instant
 * "trace buffer full" carrying the count. *out is malloc'd (caller frees), *len its strlen. */
int trace_json(char **out, size_t *len, int pid, const char *process_name, uint64_t base_ns);

/* the slow path: record one event (ts_ns 0 = now) */
void trace_record_(char ph, const char *name, uint64_t ts_ns, uint64_t dur_ns, const char *k0, int64_t v0,
                   const char *k1, int64_t v1);

/* Duration events; a begin and its end must be on the same thread, properly nested. */
static inline void trace_begin(const char *name)
{
    if (trace_on()) trace_record_('B', name, 0, 0, NULL, 0, NULL, 0);
}
static inline void trace_begin1(const char *name, const char *k0, int64_t v0)
{
    if (trace_on()) trace_record_('B', name, 0, 0, k0, v0, NULL, 0);
}
static inline void trace_end(const char *name)
{
    if (trace_on()) trace_record_('E', name, 0, 0, NULL, 0, NULL, 0);
}

/* Complete events: t0 = trace_t0() before the work (0 while off), trace_x*(name, t0, ...) after it
 * records one "X" event spanning [t0, now]. */
static inline uint64_t trace_t0(void) { return trace_on() ? now_ns() : 0; }
static inline void trace_x(const char *name, uint64_t t0)
{
    if (t0) trace_record_('X', name, t0, 0, NULL, 0, NULL, 0);
}
static inline void trace_x1(const char *name, uint64_t t0, const char *k0, int64_t v0)
{
    if (t0) trace_record_('X', name, t0, 0, k0, v0, NULL, 0);
}
static inline void trace_x2(const char *name, uint64_t t0, const char *k0, int64_t v0, const char *k1, int64_t v1)
{
    if (t0) trace_record_('X', name, t0, 0, k0, v0, k1, v1);
}

/* Instant events (thread scope) and counters (one series per name, value under the arg name k). */
static inline void trace_instant(const char *name, const char *k0, int64_t v0, const char *k1, int64_t v1)
{
    if (trace_on()) trace_record_('i', name, 0, 0, k0, v0, k1, v1);
}
static inline void trace_counter(const char *name, const char *k, int64_t v)
{
    if (trace_on()) trace_record_('C', name, 0, 0, k, v, NULL, 0);
}
/* Name the calling thread in the timeline ("trainer", "comm", ...). */
static inline void trace_thread_name(const char *name)
{
    if (trace_on()) trace_record_('M', name, 0, 0, NULL, 0, NULL, 0);
}

#endif
