/* test_trace.c: the timeline recorder (core/trace.h): order and nesting of events, threads, capacity
 * overflow counted (not crashed), nothing recorded while off, valid JSON; and `harness train
 * --timeline` end to end: one merged Chrome trace file with both ranks' events, written atomically. */
#include <criterion/criterion.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/trace.h"

/* A small JSON sanity check: brackets and braces balance outside strings, strings close, no empty
 * element around a comma (",]", ",}", "[,", ",,"), exactly one top-level value. Returns NULL when
 * fine, else what is wrong. */
static const char *s_json_check(const char *s)
{
    int depth = 0, in_str = 0, esc = 0, tops = 0;
    char stack[256], last = 0; /* last non-space character outside strings */
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
            else if ((unsigned char)c < 0x20) return "control character inside a string";
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
        if (depth == 0 && (c == '{' || c == '[')) tops++;
        if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (depth >= (int)sizeof stack) return "nested too deep";
            stack[depth++] = c;
        } else if (c == '}' || c == ']') {
            if (!depth) return "closing bracket without an opening one";
            if (stack[depth - 1] != (c == '}' ? '{' : '[')) return "mismatched brackets";
            if (last == ',') return "comma before a closing bracket";
            depth--;
        } else if (c == ',') {
            if (last == ',' || last == '[' || last == '{') return "empty element";
        }
        last = c;
    }
    if (in_str) return "unterminated string";
    if (depth) return "unbalanced brackets";
    if (tops != 1) return "not exactly one top-level value";
    return NULL;
}

Test(trace, json_checker_self_test)
{
    cr_assert_null(s_json_check("{\"a\":[1,2,{\"b\":\"x}]\\\"\"}]}"));
    cr_assert_not_null(s_json_check("{\"a\":[1,2,]}"));
    cr_assert_not_null(s_json_check("{\"a\":[1,2}"));
    cr_assert_not_null(s_json_check("{\"a\":\"open}"));
    cr_assert_not_null(s_json_check("{}{}"));
}

Test(trace, off_records_nothing)
{
    cr_assert_eq(trace_on(), 0);
    cr_assert_eq(trace_t0(), 0, "a span start while off is 0, so its end is one branch");
    for (int i = 0; i < 1000; i++) {
        trace_begin("x");
        trace_end("x");
        trace_instant("i", "k", i, NULL, 0);
        trace_counter("c", "v", i);
        trace_x1("y", trace_t0(), "k", i);
        trace_thread_name("t");
    }
    cr_assert_eq(trace_count(), 0);
    cr_assert_eq(trace_dropped(), 0);
    trace_ev_t e;
    cr_assert_lt(trace_get(0, &e), 0);
    /* on, then off again: what was recorded stays, nothing more is added */
    cr_assert_eq(trace_enable(16), 0);
    trace_begin("a");
    trace_end("a");
    trace_disable();
    trace_begin("b");
    trace_x("c", trace_t0());
    cr_assert_eq(trace_count(), 2);
    cr_assert_eq(trace_get(1, &e), 0);
    cr_assert_str_eq(e.name, "a");
    trace_reset();
    trace_reset(); /* safe twice */
    cr_assert_eq(trace_count(), 0);
}

Test(trace, off_is_cheap)
{
    /* 20M disabled calls: a load and a branch each; even a loaded 2-core machine does this well
     * under a second, while a call that took a lock or read the clock would not */
    uint64_t t0 = now_ns();
    for (int i = 0; i < 20000000; i++) {
        trace_x2("iteration", trace_t0(), "bytes", i, "iter", i);
        trace_instant("send", "peer", i, "bytes", i);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    cr_assert_lt(s, 1.0, "20M disabled trace calls took %.3f s", s);
    cr_assert_eq(trace_count(), 0);
}

Test(trace, order_and_nesting)
{
    cr_assert_eq(trace_enable(0), 0);
    trace_thread_name("main");
    trace_begin1("outer", "step", 7);
    uint64_t t = trace_t0();
    cr_assert_neq(t, 0);
    trace_begin("inner");
    trace_instant("mark", "peer", 3, "bytes", 4096);
    trace_end("inner");
    trace_counter("bytes in flight", "bytes", 123);
    trace_x2("span", t, "bucket", 2, "bytes", 1 << 20);
    trace_end("outer");
    trace_disable();
    static const struct { char ph; const char *name; } want[] = {
        {'M', "main"}, {'B', "outer"}, {'B', "inner"}, {'i', "mark"}, {'E', "inner"},
        {'C', "bytes in flight"}, {'X', "span"}, {'E', "outer"}};
    size_t n = sizeof want / sizeof want[0];
    cr_assert_eq(trace_count(), n);
    uint64_t prev = 0;
    trace_ev_t ev[8];
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(trace_get(i, &ev[i]), 0);
        cr_expect_eq(ev[i].ph, want[i].ph, "event %zu: ph %c, want %c", i, ev[i].ph, want[i].ph);
        cr_expect_str_eq(ev[i].name, want[i].name);
        cr_expect_eq(ev[i].tid, ev[0].tid, "one thread, one tid");
        if (ev[i].ph != 'X') {
            cr_expect_geq(ev[i].ts_ns, prev, "timestamps of one thread never go back");
            prev = ev[i].ts_ns;
        }
    }
    cr_expect_eq(ev[1].v0, 7);
    cr_expect_str_eq(ev[1].k0, "step");
    cr_expect_eq(ev[3].v1, 4096);
    /* the X span started before "inner" began and ended after it ended: it nests around it */
    cr_expect_leq(ev[6].ts_ns, ev[2].ts_ns);
    cr_expect_geq(ev[6].ts_ns + ev[6].dur_ns, ev[4].ts_ns);
    cr_expect_leq(ev[6].ts_ns + ev[6].dur_ns, ev[7].ts_ns);
    cr_expect_eq(ev[6].v1, 1 << 20);

    char *js = NULL;
    size_t len = 0;
    cr_assert_eq(trace_json(&js, &len, 5, "rank 5 worker", ev[1].ts_ns), 0);
    cr_assert_eq(strlen(js), len);
    char *doc = malloc(len + 64);
    snprintf(doc, len + 64, "{\"traceEvents\":[\n%s\n]}", js);
    const char *bad = s_json_check(doc);
    cr_assert_null(bad, "%s in:\n%s", bad, doc);
    cr_expect(strstr(js, "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":5") != NULL, "%s", js);
    cr_expect(strstr(js, "\"rank 5 worker\"") != NULL);
    cr_expect(strstr(js, "\"thread_name\"") != NULL);
    cr_expect(strstr(js, "\"name\":\"outer\",\"ph\":\"B\",\"pid\":5") != NULL, "%s", js);
    cr_expect(strstr(js, "\"ts\":0.000,\"args\":{\"step\":7}") != NULL, "ts relative to base: %s", js);
    cr_expect(strstr(js, "\"dur\":") != NULL);
    cr_expect(strstr(js, "\"args\":{\"bucket\":2,\"bytes\":1048576}") != NULL, "%s", js);
    cr_expect(strstr(js, "\"s\":\"t\"") != NULL, "instants are thread-scoped");
    cr_expect(strstr(js, "trace buffer full") == NULL);
    free(doc);
    free(js);
    trace_reset();
}

Test(trace, overflow_counted_not_crashed)
{
    cr_assert_eq(trace_enable(8), 0);
    for (int i = 0; i < 100; i++) trace_instant("e", "i", i, NULL, 0);
    cr_assert_eq(trace_count(), 8);
    cr_assert_eq(trace_dropped(), 92);
    trace_ev_t e;
    cr_assert_eq(trace_get(7, &e), 0);
    cr_expect_eq(e.v0, 7, "the first events are kept");
    cr_assert_lt(trace_get(8, &e), 0);
    char *js = NULL;
    size_t len = 0;
    cr_assert_eq(trace_json(&js, &len, 0, NULL, 0), 0);
    cr_expect(strstr(js, "\"name\":\"trace buffer full\"") != NULL, "%s", js);
    cr_expect(strstr(js, "\"dropped\":92") != NULL, "%s", js);
    char doc[8192];
    snprintf(doc, sizeof doc, "[%s]", js);
    cr_expect_null(s_json_check(doc), "%s", doc);
    free(js);
    /* a fresh enable starts over */
    cr_assert_eq(trace_enable(4), 0);
    cr_expect_eq(trace_count(), 0);
    cr_expect_eq(trace_dropped(), 0);
    trace_reset();
}

#define NTHR 4
#define PER 5000

static void *s_worker(void *arg)
{
    (void)arg;
    trace_thread_name("worker");
    for (int i = 0; i < PER; i++) trace_x1("job", trace_t0(), "i", i);
    return NULL;
}

Test(trace, threads_lock_free)
{
    cr_assert_eq(trace_enable((size_t)NTHR * (PER + 1) - 10), 0); /* 10 too few: overflow under contention */
    pthread_t th[NTHR];
    for (int t = 0; t < NTHR; t++) cr_assert_eq(pthread_create(&th[t], NULL, s_worker, NULL), 0);
    for (int t = 0; t < NTHR; t++) pthread_join(th[t], NULL);
    trace_disable();
    size_t n = trace_count();
    cr_assert_eq(n, (size_t)NTHR * (PER + 1) - 10);
    cr_assert_eq(trace_dropped(), 10);
    /* per thread: its events appear in its own order */
    int last[64];
    for (int k = 0; k < 64; k++) last[k] = -1;
    int names = 0;
    for (size_t i = 0; i < n; i++) {
        trace_ev_t e;
        cr_assert_eq(trace_get(i, &e), 0);
        cr_assert_not_null(e.name, "slot %zu claimed but never written", i);
        cr_assert(e.tid >= 1 && e.tid < 64);
        if (e.ph == 'M') {
            names++;
            continue;
        }
        cr_assert_gt(e.v0, last[e.tid], "thread %u: event %lld after %d", e.tid, (long long)e.v0, last[e.tid]);
        last[e.tid] = (int)e.v0;
    }
    cr_expect_eq(names, NTHR);
    trace_reset();
}

/* ---------- end to end through the harness ---------- */

static char g_harness[512];

static void s_find(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
}

static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

Test(trace, harness_train_timeline, .timeout = 120)
{
    s_find();
    char dir[] = "/tmp/sb-trace-XXXXXX", path[256], cmd[2048], out[1 << 16];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --steps 4 --warmup-steps 1 --timeline %s", g_harness, path);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "harness train --timeline failed:\n%s", out);
    cr_expect(strstr(out, "# timeline:") != NULL, "no note of the file:\n%s", out);
    char *js = s_slurp(path);
    cr_assert_not_null(js, "no timeline file %s:\n%s", path, out);
    const char *bad = s_json_check(js);
    cr_assert_null(bad, "timeline is not valid JSON: %s", bad);
    cr_expect(strncmp(js, "{", 1) == 0);
    cr_expect(strstr(js, "\"traceEvents\":[") != NULL);
    cr_expect(strstr(js, "\"displayTimeUnit\":\"ms\"") != NULL);
    cr_expect(strstr(js, "\"rank 0 worker\"") != NULL && strstr(js, "\"rank 1 worker\"") != NULL);
    cr_expect_gt(count_in(js, "\"pid\":0,"), 10, "rank 0's events");
    cr_expect_gt(count_in(js, "\"pid\":1,"), 10, "rank 1's events");
    /* every rank, every step (1 warm-up + 3): forward, backward, sync; buckets allreduced on the comm thread */
    cr_expect_eq(count_in(js, "{\"name\":\"forward\",\"ph\":\"X\""), 2 * 4);
    cr_expect_eq(count_in(js, "{\"name\":\"step\",\"ph\":\"X\""), 2 * 4);
    cr_expect_geq(count_in(js, "{\"name\":\"allreduce\",\"ph\":\"X\""), 2 * 4);
    cr_expect_geq(count_in(js, "{\"name\":\"submit\",\"ph\":\"X\""), 2 * 4);
    cr_expect_gt(count_in(js, "{\"name\":\"recv\",\"ph\":\"X\""), 0, "segment receives");
    cr_expect_gt(count_in(js, "{\"name\":\"send\",\"ph\":\"i\""), 0, "segment sends");
    cr_expect(strstr(js, "\"args\":{\"name\":\"comm\"}") != NULL, "the comm thread is named");
    cr_expect(strstr(js, "trace buffer full") == NULL);
    free(js);
    /* nothing left beside it: no temp file, no per-rank pieces */
    snprintf(cmd, sizeof cmd, "ls -A %s", dir);
    run_cmd(cmd, out, sizeof out);
    cr_expect_str_eq(out, "t.json\n", "left in %s: %s", dir, out);
    unlink(path);
    rmdir(dir);
}

Test(trace, harness_timeline_unwritable, .timeout = 120)
{
    s_find();
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --sizes 4K:4K --iters 2 --warmup 1 --timeline "
             "/nonexistent-sb-dir/t.json", g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect_neq(rc, 0, "an unwritable timeline must fail the run:\n%s", out);
    cr_expect(strstr(out, "--timeline /nonexistent-sb-dir/t.json") != NULL, "no clear message:\n%s", out);
    /* checked before the run (harness/main.c), not found missing after it */
    cr_expect(strstr(out, "no folder /nonexistent-sb-dir") != NULL && strstr(out, "iters") == NULL, "%s", out);
    cr_expect_neq(access("/nonexistent-sb-dir/t.json", F_OK), 0);
}

/* The PS servers' timeline names each push and pull with its sender and key: a partition's arrivals
 * from every worker, the input for finding which worker's flow a server waited on. */
Test(trace, harness_ps_timeline_names_senders, .timeout = 120)
{
    s_find();
    char dir[] = "/tmp/sb-trace-XXXXXX", path[256], cmd[PATH_MAX + 512], out[1 << 16];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(cmd, sizeof cmd, "%s train --engine ps --servers 1 --procs 2 --steps 5 --warmup-steps 1 --timeline %s",
             g_harness, path);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "harness train --engine ps --timeline failed:\n%s", out);
    char *js = s_slurp(path);
    cr_assert_not_null(js, "no timeline file %s:\n%s", path, out);
    cr_assert_null(s_json_check(js), "timeline is not valid JSON");
    cr_expect_gt(count_in(js, "{\"name\":\"server push\",\"ph\":\"X\""), 0, "no server push spans");
    cr_expect_gt(count_in(js, "{\"name\":\"server pull\",\"ph\":\"X\""), 0, "no server pull spans");
    cr_expect(strstr(js, "\"args\":{\"from\":0,\"key\":") != NULL, "no push or pull from rank 0");
    cr_expect(strstr(js, "\"args\":{\"from\":1,\"key\":") != NULL, "no push or pull from rank 1");
    free(js);
    /* scripts/ps-flows reads them: both workers, the steps after the first two */
    char script[PATH_MAX + 32];
    if (test_script(g_harness, "ps-flows", script, sizeof script) == 0 && system("command -v python3 >/dev/null") == 0) {
        snprintf(cmd, sizeof cmd, "%s %s two", script, path);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
        cr_expect(strstr(out, "# ps-flows two: 2 workers, 3 steps") != NULL, "%s", out);
        cr_expect(strstr(out, "\n  two ") != NULL, "%s", out);
    } else {
        cr_expect(0, "no scripts/ps-flows or python3 (%s)", script);
    }
    unlink(path);
    rmdir(dir);
}
