/* timeline.c: `--timeline FILE`: per-rank event recording (core/trace.h) merged into one Chrome trace
 * JSON file by rank 0.
 *
 * Clock: rank 0 broadcasts its CLOCK_MONOTONIC reading at the start and every rank writes times
 * relative to it. CLOCK_MONOTONIC is one clock for all processes of a host, so ranks on one host line
 * up exactly; across hosts each host's monotonic clock has its own origin, so their offsets are per
 * host (not aligned). Exchange: each rank > 0 puts [u64 events, u64 dropped, JSON fragment] under a
 * store key; rank 0 fetches them in rank order, appends them to a temp file next to FILE, deletes the
 * keys, then renames the temp file over FILE. */
#include "harness/record/timeline.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/err.h"
#include "core/log.h"
#include "core/trace.h"

static int s_on;            /* h_timeline_begin started recording */
static uint64_t s_base;     /* rank 0's clock at the start */

static int s_tmo(const h_timeline_cfg_t *o) { return o->timeout_s > 0 ? o->timeout_s * 1000 : 60000; }

void h_timeline_path(const char *file, const char *tag, char *out, size_t len)
{
    size_t n = strlen(file);
    if (!tag || !*tag) {
        snprintf(out, len, "%s", file);
    } else if (n > 5 && !strcmp(file + n - 5, ".json")) {
        snprintf(out, len, "%.*s.%s.json", (int)(n - 5), file, tag);
    } else {
        snprintf(out, len, "%s.%s", file, tag);
    }
}

static void s_name_main(const h_timeline_cfg_t *o, const comm_t *comm);

int h_timeline_begin(const h_timeline_cfg_t *o, comm_t *comm)
{
    s_on = 0;
    if (!o->path || !*o->path) return 0;
    if (strcmp(o->mode, "train") && strcmp(o->mode, "bench")) return 0;
    uint64_t base = comm->rank == 0 ? now_ns() : 0;
    CHECK(comm_bcast_small(comm, &base, sizeof base, 0, s_tmo(o)));
    size_t cap = 0;
    const char *e = getenv("SYNCBENCH_TIMELINE_EVENTS"); /* per rank; default TRACE_DEFAULT_CAPACITY */
    if (e && atol(e) > 0) cap = (size_t)atol(e);
    CHECK(trace_enable(cap));
    s_base = base;
    s_on = 1;
    s_name_main(o, comm);
    return 0;
}

/* This rank's role for the process name: a dedicated PS server or a worker (of the first engine). */
static const char *s_role(const h_timeline_cfg_t *o, const comm_t *comm)
{
    if (!o->engine) return "worker";
    engine_cfg_t cfg;
    h_engine_cfg(&o->es, comm, o->engine, &cfg);
    return h_is_server(comm, &cfg) ? "server" : "worker";
}

/* Name the main thread after what it does; a dedicated PS server's loop names itself ("ps server"). */
static void s_name_main(const h_timeline_cfg_t *o, const comm_t *comm)
{
    if (!strcmp(s_role(o, comm), "server")) return;
    trace_thread_name(strcmp(o->mode, "bench") ? "trainer" : "bench");
}

typedef struct {
    uint64_t events, dropped;
} s_hdr_t;

static int s_write(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -1; }

int h_timeline_end(const h_timeline_cfg_t *o, comm_t *comm)
{
    if (!s_on) return 0;
    s_on = 0;
    trace_disable();
    char pname[64];
    snprintf(pname, sizeof pname, "rank %d %s", comm->rank, s_role(o, comm));
    s_hdr_t h = {trace_count(), trace_dropped()};
    char *frag = NULL;
    size_t flen = 0;
    int rc = trace_json(&frag, &flen, comm->rank, pname, s_base);
    trace_reset();
    if (rc < 0) {
        /* still hand over an empty fragment so rank 0 does not wait for this rank */
        frag = NULL;
        flen = 0;
    }
    unsigned long seq = ++comm->seq; /* every rank calls this: the round counter stays in step */
    char key[64];
    if (comm->rank != 0) {
        char *blob = malloc(sizeof h + flen);
        int src = blob ? 0 : ERR_NOMEM;
        if (blob) {
            memcpy(blob, &h, sizeof h);
            if (flen) memcpy(blob + sizeof h, frag, flen);
            snprintf(key, sizeof key, "timeline/%lu/%d", seq, comm->rank);
            src = store_set(comm->store, key, blob, sizeof h + flen);
        }
        free(blob);
        free(frag);
        return rc < 0 ? rc : src;
    }
    /* rank 0: gather in rank order into a temp file next to the output */
    char path[4096], tmp[4200], why[1024] = "";
    h_timeline_path(o->path, o->tag, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) snprintf(why, sizeof why, "cannot create %.400s: %s", tmp, strerror(errno));
    uint64_t events = h.events, dropped = h.dropped;
    if (f) {
        char head[512];
        snprintf(head, sizeof head,
                 "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"mode\":\"%s\",\"engine\":\"%s\",\"ranks\":%d,"
                 "\"clock\":\"CLOCK_MONOTONIC, microseconds since rank 0's start; hosts other than rank 0's have "
                 "their own offset\"},\n\"traceEvents\":[\n",
                 o->mode, o->engine ? o->engine : "", comm->world);
        if (s_write(f, head, strlen(head)) || s_write(f, frag, flen))
            snprintf(why, sizeof why, "writing %.400s: %s", tmp, strerror(errno));
    }
    free(frag);
    int grc = 0;
    for (int r = 1; r < comm->world; r++) {
        void *val = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "timeline/%lu/%d", seq, r);
        int g = store_get(comm->store, key, &val, &len, s_tmo(o));
        if (g < 0 || len < sizeof(s_hdr_t)) {
            free(val);
            if (!grc) grc = g < 0 ? g : ERR_PROTO;
            if (!why[0]) snprintf(why, sizeof why, "no events from rank %d (%s)", r, g < 0 ? err_str(g) : "short blob");
            continue;
        }
        s_hdr_t rh;
        memcpy(&rh, val, sizeof rh);
        events += rh.events;
        dropped += rh.dropped;
        const char *txt = (const char *)val + sizeof rh;
        size_t tlen = len - sizeof rh;
        if (f && !why[0] && tlen && (s_write(f, ",\n", 2) || s_write(f, txt, tlen)))
            snprintf(why, sizeof why, "writing %.400s: %s", tmp, strerror(errno));
        free(val);
        (void)store_del(comm->store, key);
    }
    if (f) {
        if (!why[0] && s_write(f, "\n]}\n", 4)) snprintf(why, sizeof why, "writing %.400s: %s", tmp, strerror(errno));
        if (!why[0] && (fflush(f) != 0 || fsync(fileno(f)) != 0))
            snprintf(why, sizeof why, "writing %.400s: %s", tmp, strerror(errno));
        if (fclose(f) != 0 && !why[0]) snprintf(why, sizeof why, "closing %.400s: %s", tmp, strerror(errno));
        if (!why[0] && rename(tmp, path) != 0)
            snprintf(why, sizeof why, "renaming %.200s to %.200s: %s", tmp, path, strerror(errno));
        if (why[0]) unlink(tmp);
    }
    if (why[0]) {
        fprintf(stderr, "harness: --timeline %s: %s; no timeline written\n", path, why);
        return err_set(grc < 0 ? grc : ERR_IO, "timeline not written: %s", why);
    }
    if (!o->quiet) {
        printf("# timeline: %" PRIu64 " events from %d rank%s written to %s (open in chrome://tracing or ui.perfetto.dev)\n",
               events, comm->world, comm->world > 1 ? "s" : "", path);
        if (dropped)
            printf("# timeline: %" PRIu64 " events did not fit and were dropped (raise SYNCBENCH_TIMELINE_EVENTS, "
                   "per rank, default %zu)\n", dropped, TRACE_DEFAULT_CAPACITY);
        fflush(stdout);
    }
    return rc;
}
