/* test_results.c: results written and read with jansson (schema 2, one "topology" field, the whole
 * command line, whole lines or an error), old results (schema 1, "topo") still read, the one engine
 * label, and `harness report` never taking a median across runs that differ in what they measured:
 * shm against tcp, f32 against f16, named runs (--label) apart and selectable; --size; the mpi
 * engine's ranks get the job secret; a read that runs out of memory mid-file is an error, not its end. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "tests/lib/ranks.h"

/* the harness is a program, not a library: compile the files under test into this test */
#include "core/err.h"
#include "harness/record/jsonl.h"
#include "harness/record/result.h"
#include "harness/report/plot.h"
#include "harness/report/report.h"
#include "harness/registry/engines.h"
#include "harness/record/stats.h"
#include "harness/record/traffic.h"

Test(results, engine_label_one_name)
{
    char l[128];
    h_engine_label(l, sizeof l, "ps", "ps-sync-servers1", 1, 0);
    cr_expect_str_eq(l, "ps-sync-servers1");
    h_engine_label(l, sizeof l, "ps", "default", 2, 0);
    cr_expect_str_eq(l, "ps-servers2");
    h_engine_label(l, sizeof l, "ps", "host", 0, 1);
    cr_expect_str_eq(l, "ps-colocated");
    h_engine_label(l, sizeof l, "ring", "host", 0, 0);
    cr_expect_str_eq(l, "ring");
    h_engine_label(l, sizeof l, "ring", "nccl", 0, 0);
    cr_expect_str_eq(l, "ring/nccl");
    h_engine_label(l, sizeof l, "mpi", "Open MPI v4.1.4", 0, 0);
    cr_expect_str_eq(l, "mpi");
    /* GPU impls that describe themselves in words: the label is one token, the words are the note */
    h_engine_label(l, sizeof l, "ring", "nccl Ring, world 1: a local copy (no Ring or Tree runs)", 0, 0);
    cr_expect_str_eq(l, "ring/nccl");
    h_engine_label(l, sizeof l, "tree", "gpu-ipc tree, 3 ranks on 1 GPU, seg 4096 KiB x 4", 0, 0);
    cr_expect_str_eq(l, "tree/gpu-ipc");
    cr_expect_str_eq(h_engine_impl_note("tree/gpu-ipc", "gpu-ipc tree, 3 ranks on 1 GPU"), "gpu-ipc tree, 3 ranks on 1 GPU");
    cr_expect_str_eq(h_engine_impl_note("ring", "host"), "");
    cr_expect_str_eq(h_engine_impl_note("ps-sync-servers1", "ps-sync-servers1"), "");
    cr_expect_str_eq(h_engine_impl_note("ring/nccl", "nccl"), "");
    cr_expect_str_eq(h_engine_impl_note("mpi", "Open MPI v4.1.4"), "Open MPI v4.1.4");
}

/* A line with a 5000-character command line, quotes, a line break and UTF-8 reads back exactly. */
Test(results, round_trip_no_length_limit)
{
    char path[] = "/tmp/sb-results-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    static char big[5001];
    memset(big, 'x', 5000);
    char *argv[] = {"harness", "bench", "--json", big, "say \"hi\"\n\xc3\xa9", NULL};
    h_meta_t m;
    h_meta_fill(&m, 5, argv);
    h_out_t o = {.json = path, .label = "run \"1\""};
    json_t *body = json_pack("{s:s, s:i, s:f, s:o}", "engine", "ring", "world", 2, "busbw_gbs", 0.1,
                             "traffic_bytes", h_jarr_u64((uint64_t[]){1, 2, 3, 18446744073709551ull}, 4));
    cr_assert_eq(h_result_write(&o, &m, "bench", body), 0, "%s", err_detail());
    h_jobj_t *objs = NULL;
    size_t n = 0, bad = 0;
    char *files[] = {path};
    cr_assert_eq(h_jread_files(1, files, &objs, &n, &bad, stderr), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(bad, 0);
    cr_expect_eq(h_jnum(&objs[0], "schema", 0), H_RESULT_SCHEMA);
    cr_expect_str_eq(h_jstr(&objs[0], "mode", ""), "bench");
    cr_expect_str_eq(h_jstr(&objs[0], "label", ""), "run \"1\"");
    cr_expect_eq(h_jnum(&objs[0], "busbw_gbs", 0), 0.1);
    const char *cmd = h_jstr(&objs[0], "cmdline", "");
    cr_expect_eq(strlen(cmd), strlen("harness bench --json ") + 5000 + 1 + strlen("say \"hi\"\n\xc3\xa9"), "%zu", strlen(cmd));
    cr_expect(strstr(cmd, "say \"hi\"\n\xc3\xa9"));
    cr_expect(h_jstr(&objs[0], "topology", NULL) != NULL);
    cr_expect(h_jget(&objs[0], "topo") == NULL);
    const h_jfield_t *t = h_jget(&objs[0], "traffic_bytes");
    cr_assert(t && t->type == HJ_ARR && t->n == 4 && t->arr[2] == 3);
    h_jfree_all(&objs, &n);
    unlink(path);
}

Test(results, unwritable_results_fail_whole)
{
    h_meta_t m;
    char *argv[] = {"harness", NULL};
    h_meta_fill(&m, 1, argv);
    h_out_t o = {.json = "/nonexistent-dir/r.jsonl"};
    cr_expect_eq(h_result_write(&o, &m, "bench", json_pack("{s:i}", "world", 2)), ERR_IO);
    cr_expect(strstr(err_detail(), "/nonexistent-dir/r.jsonl"), "%s", err_detail());
    cr_expect_eq(h_result_write(&o, &m, "bench", NULL), ERR_NOMEM); /* a body that could not be built */
}

/* The address space this process maps now (VmSize), in bytes; 0 if unknown. */
static unsigned long long s_vm_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char l[256];
    unsigned long long kb = 0;
    while (f && fgets(l, sizeof l, f))
        if (!strncmp(l, "VmSize:", 7)) kb = strtoull(l + 7, NULL, 10);
    if (f) fclose(f);
    return kb * 1024;
}

/* Issue 33 section 5: a read that stops before the end of a results file is an error, never its end
 * (`harness report` once showed 3 of 11 results and exited 0 when getline ran out of memory). Three result
 * lines, a 64 MiB line (a hole: NUL bytes, no disk) and eight more; with 24 MiB of address space to spare,
 * getline cannot grow its buffer past 32 MiB. */
Test(results, a_read_out_of_memory_is_an_error_not_the_end)
{
    char path[] = "/tmp/sb-results-oom-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *res = "{\"mode\": \"bench\", \"engine\": \"ring\", \"world\": 2}\n";
    for (int i = 0; i < 3; i++) cr_assert_eq(write(fd, res, strlen(res)), (ssize_t)strlen(res));
    cr_assert_geq(lseek(fd, 64 << 20, SEEK_CUR), 0);
    cr_assert_eq(write(fd, "\n", 1), 1);
    for (int i = 0; i < 8; i++) cr_assert_eq(write(fd, res, strlen(res)), (ssize_t)strlen(res));
    close(fd);
    unsigned long long vm = s_vm_bytes();
    cr_assert_gt(vm, 0);
    struct rlimit old, low;
    getrlimit(RLIMIT_AS, &old);
    low = old;
    low.rlim_cur = vm + (24ull << 20);
    cr_assert_eq(setrlimit(RLIMIT_AS, &low), 0);
    h_jobj_t *objs = NULL;
    size_t n = 0, bad = 0;
    char *files[] = {path};
    int rc = h_jread_files(1, files, &objs, &n, &bad, NULL);
    setrlimit(RLIMIT_AS, &old);
    unlink(path);
    cr_expect_eq(rc, ERR_NOMEM, "read %zu result(s), returned %d (%s)", n, rc, err_detail());
    cr_expect(strstr(err_detail(), "after line 3"), "%s", err_detail());
    h_jfree_all(&objs, &n);
}

/* report --format json of path into out (keeping only run label when not NULL) */
static void s_report_json(const char *path, const char *label, char *out, size_t len)
{
    char op[] = "/tmp/sb-results-out-XXXXXX";
    int ofd = mkstemp(op);
    cr_assert_geq(ofd, 0);
    fflush(stdout);
    int so = dup(1);
    dup2(ofd, 1);
    char *files[] = {(char *)path};
    int rc = h_report_run(1, files, NULL, "json", label);
    fflush(stdout);
    dup2(so, 1);
    close(so);
    ssize_t k = pread(ofd, out, len - 1, 0);
    out[k > 0 ? k : 0] = '\0';
    close(ofd);
    unlink(op);
    cr_assert_eq(rc, 0, "%s", err_detail());
}

static void s_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

/* Lines that differ only in transport or dtype are rows apart, named by what differs; a schema-1 line
 * ("topo", no schema) and a schema-2 line of the same configuration are one point of two runs. */
Test(results, rows_keyed_by_configuration)
{
    char path[] = "/tmp/sb-results-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    s_write(path,
        "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"world\":2,\"transport\":\"shm\",\"dtype\":\"f32\","
        "\"op\":\"sum\",\"bytes\":65536,\"busbw_gbs\":7.45,\"time_us\":8,\"topo\":\"old\",\"host\":\"a\"}\n"
        "{\"schema\":2,\"mode\":\"bench\",\"engine\":\"ring\",\"engine_label\":\"ring\",\"impl\":\"host\",\"world\":2,"
        "\"transport\":\"shm\",\"dtype\":\"f32\",\"op\":\"sum\",\"bytes\":65536,\"busbw_gbs\":7.25,\"time_us\":9,"
        "\"topology\":\"new\",\"host\":\"b\"}\n"
        "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"world\":2,\"transport\":\"tcp\",\"dtype\":\"f32\","
        "\"op\":\"sum\",\"bytes\":65536,\"busbw_gbs\":1.58,\"time_us\":40}\n"
        "{\"mode\":\"bench\",\"engine\":\"ring\",\"impl\":\"host\",\"world\":2,\"transport\":\"shm\",\"dtype\":\"f16\","
        "\"op\":\"sum\",\"bytes\":65536,\"busbw_gbs\":4.27,\"time_us\":15}\n"
        "{\"mode\":\"bench\",\"engine\":\"tree\",\"impl\":\"host\",\"world\":2,\"transport\":\"shm\",\"dtype\":\"f32\","
        "\"op\":\"sum\",\"bytes\":65536,\"busbw_gbs\":5,\"time_us\":12}\n");
    static char out[65536];
    s_report_json(path, NULL, out, sizeof out);
    /* three ring rows, none a median of another; tree alone keeps its plain label */
    cr_expect(strstr(out, "{\"label\":\"ring+transport=shm+dtype=f32\",\"world\":2,\"servers\":0,\"bytes\":65536,\"time_us\":8.5,"
                          "\"busbw_gbs\":7.35,"), "%s", out);
    cr_expect(strstr(out, "\"label\":\"ring+transport=tcp+dtype=f32\",\"world\":2,\"servers\":0,\"bytes\":65536,\"time_us\":40,"
                          "\"busbw_gbs\":1.58,"), "%s", out);
    cr_expect(strstr(out, "\"label\":\"ring+transport=shm+dtype=f16\",\"world\":2,\"servers\":0,\"bytes\":65536,\"time_us\":15,"
                          "\"busbw_gbs\":4.27,"), "%s", out);
    cr_expect(strstr(out, "{\"label\":\"tree\","), "%s", out);
    cr_expect(!strstr(out, "\"busbw_gbs\":4.272"), "%s", out);
    unlink(path);
}

/* Two bench runs (shm, tcp) and a named run in one results file: two rows and a third, not a median;
 * report --label keeps the named run only. Then --size writes exactly one size. */
Test(results, harness_bench_runs_apart, .timeout = 240)
{
    char h[4096], dir[] = "/tmp/sb-results-XXXXXX", cmd[16384];
    static char out[65536];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    cr_assert(mkdtemp(dir));
    static const char *const runs[] = {"--transport shm", "--transport tcp", "--transport shm --label fast", NULL};
    for (int i = 0; runs[i]; i++) {
        snprintf(cmd, sizeof cmd, "%s bench --procs 2 --size 4K --iters 2 --warmup 1 --quiet --json %s/r.jsonl %s", h, dir,
                 runs[i]);
        int rc = run_cmd(cmd, out, sizeof out);
        cr_assert_eq(rc, 0, "%s\n%s", cmd, out);
    }
    snprintf(cmd, sizeof cmd, "%s/r.jsonl", dir);
    FILE *f = fopen(cmd, "r");
    cr_assert(f);
    char line[8192];
    int nl = 0;
    while (fgets(line, sizeof line, f)) {
        nl++;
        cr_expect(strstr(line, "\"schema\":2,\"mode\":\"bench\"") && strstr(line, "\"topology\":") &&
                  strstr(line, "\"bytes\":4096,") && strstr(line, "\"engine_label\":\"ring\""), "%s", line);
    }
    fclose(f);
    cr_expect_eq(nl, 3, "--size 4K: one line per run");
    s_report_json(cmd, NULL, out, sizeof out);
    cr_expect(strstr(out, "\"label\":\"ring+transport=shm\",\"world\":2") && strstr(out, "\"label\":\"ring+transport=tcp\",\"world\":2")
              && strstr(out, "\"label\":\"fast:ring\",\"world\":2"), "%s", out);
    s_report_json(cmd, "fast", out, sizeof out);
    cr_expect(strstr(out, "\"label\":\"fast:ring\"") && !strstr(out, "transport=tcp") && strstr(out, "\"results\":3,"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

Test(results, mpi_ranks_have_the_job_secret, .timeout = 240)
{
    char h[4096], cmd[8192];
    static char out[65536];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    if (system("command -v mpirun >/dev/null 2>&1") != 0) cr_skip_test("mpirun is not installed");
    snprintf(cmd, sizeof cmd, "%s bench --engine mpi --procs 2 --size 4K --iters 2 --warmup 1", h);
    int rc = run_cmd(cmd, out, sizeof out);
    if (rc != 0 && strstr(out, "not built")) cr_skip_test("this build has no mpi engine");
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(!strstr(out, "no secret"), "%s", out);
}

/* Every line of path through the jansson reader into *objs (none may be malformed); the count. */
static size_t s_read(const char *path, h_jobj_t **objs)
{
    size_t n = 0, bad = 0;
    char *files[] = {(char *)path};
    cr_assert_eq(h_jread_files(1, files, objs, &n, &bad, stderr), 0, "%s", err_detail());
    cr_assert_eq(bad, 0, "malformed lines in %s", path);
    return n;
}

/* harness gemm and both harness model kinds (the probe's fit and predictions, the emulated cluster's
 * speedups) write schema-2 lines with the metadata, whole, that the reader and `harness report` load
 * back, beside old (schema 1, snprintf-written) gemm and model lines. */
Test(results, gemm_and_model_lines_schema2, .timeout = 240)
{
    char h[4096], dir[] = "/tmp/sb-results-XXXXXX", path[4200], cmd[16384];
    static char out[65536];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/r.jsonl", dir);
    s_write(path,
        "{\"mode\": \"gemm\", \"model\": \"mlp:784-1024-1024-10\", \"procs\": 1, \"blas_threads\": 2, \"batch\": 256, "
        "\"local_batch\": 256, \"iters\": 40, \"step_ms_p50\": 11.3237, \"samples_per_s\": 22607.356, \"gflops\": 216.220, "
        "\"host\": \"vm\", \"git_sha\": \"ba0d2b51fa66\", \"timestamp\": \"2026-11-29T18:48:34Z\", \"cmdline\": \"x\", \"cpu\": \"c\"}\n"
        "{\"mode\":\"model\",\"what\":\"bench\",\"engine\":\"tree\",\"impl\":\"host\",\"world\":2,\"servers\":0,\"bytes\":65536,"
        "\"pred_us\":548.907,\"meas_us\":550.622,\"err_pct\":-0.31,\"alpha_us\":22.5572,\"beta_ns_per_byte\":8.375654,"
        "\"gamma_ns_per_byte\":0.015150,\"probe\":\"tcp\",\"git_sha\":\"8860f4b9ad51\",\"timestamp\":\"t\",\"cmdline\":\"y\"}\n");
    static const char *const runs[] = {"gemm --procs 1 --model mlp:16-8-4 --batch 8 --iters 2 --warmup 1",
                                       "model --procs 2", "model --model resnet50 --nodes 2", NULL};
    for (int i = 0; runs[i]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --json %s --label \"new \\\"%d\\\"\"", h, runs[i], path, i);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s\n%s", cmd, out);
    }
    h_jobj_t *o = NULL;
    size_t n = s_read(path, &o);
    int gemm = 0, fit = 0, pred = 0, extra = 0, cluster = 0;
    for (size_t i = 2; i < n; i++) {
        cr_expect_eq(h_jnum(&o[i], "schema", 0), 2, "%s", o[i].src);
        cr_expect(h_jstr(&o[i], "topology", NULL) && h_jstr(&o[i], "host", NULL) && h_jstr(&o[i], "git_sha", NULL) &&
                  h_jstr(&o[i], "timestamp", NULL) && h_jstr(&o[i], "cpu", NULL), "%s: metadata", o[i].src);
        const char *mode = h_jstr(&o[i], "mode", ""), *cmdl = h_jstr(&o[i], "cmdline", ""), *label = h_jstr(&o[i], "label", "");
        cr_expect(strstr(cmdl, "--label new \"") && !strncmp(label, "new \"", 5), "%s: %s / %s", o[i].src, cmdl, label);
        if (!strcmp(mode, "gemm")) {
            gemm++;
            cr_expect_str_eq(h_jstr(&o[i], "model", ""), "mlp:16-8-4");
            cr_expect(h_jnum(&o[i], "procs", 0) == 1 && h_jnum(&o[i], "batch", 0) == 8 && h_jnum(&o[i], "local_batch", 0) == 8 &&
                      h_jnum(&o[i], "iters", 0) == 2 && h_jnum(&o[i], "blas_threads", 0) >= 1 &&
                      h_jnum(&o[i], "step_ms_p50", 0) > 0 && h_jnum(&o[i], "samples_per_s", 0) > 0 &&
                      h_jnum(&o[i], "gflops", 0) > 0, "%s", o[i].src);
        } else if (!strcmp(mode, "model") && !strcmp(h_jstr(&o[i], "kind", ""), "cluster")) {
            cluster++;
            cr_expect(!strcmp(h_jstr(&o[i], "model", ""), "resnet50") && h_jstr(&o[i], "engine", NULL) &&
                      h_jnum(&o[i], "gpus", 0) >= 1 && h_jnum(&o[i], "net_bps", 0) > 0 && h_jnum(&o[i], "step_ms", 0) > 0 &&
                      h_jnum(&o[i], "speedup", 0) > 0, "%s", o[i].src);
        } else if (!strcmp(mode, "model") && !strcmp(h_jstr(&o[i], "what", ""), "fit")) {
            fit++;
            cr_expect(h_jnum(&o[i], "world", 0) == 2 && h_jnum(&o[i], "alpha_us", -1) >= 0 &&
                      h_jnum(&o[i], "beta_ns_per_byte", -1) > 0 && h_jstr(&o[i], "probe", NULL), "%s", o[i].src);
        } else if (!strcmp(mode, "model")) {
            /* with no bench lines to compare: predictions only, "meas_us" and "err_pct" null */
            const h_jfield_t *m = h_jget(&o[i], "meas_us"), *e = h_jget(&o[i], "err_pct");
            if (m && m->type == HJ_NULL && e && e->type == HJ_NULL) extra++;
            else pred++;
            cr_expect(h_jnum(&o[i], "pred_us", -1) > 0 && h_jnum(&o[i], "bytes", 0) > 0 && h_jstr(&o[i], "engine", NULL),
                      "%s", o[i].src);
        }
    }
    cr_expect_eq(gemm, 1);
    cr_expect_eq(fit, 1);
    cr_expect_eq(pred, 0);
    cr_expect_gt(extra, 0);
    cr_expect_gt(cluster, 0);
    cr_expect_eq(h_jnum(&o[0], "schema", 1), 1); /* the old lines read as they were */
    cr_expect(h_jnum(&o[0], "gflops", 0) == 216.22 && h_jnum(&o[1], "pred_us", 0) == 548.907);
    h_jfree_all(&o, &n);
    /* harness report loads the file (old and new model lines both rows of the model table) */
    s_report_json(path, NULL, out, sizeof out);
    cr_expect(strstr(out, "548.9") && strstr(out, "\"pred_us\":"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

/* --rounds is run's: bench and explain say they ignore it, run takes it; explain takes --size. */
Test(results, rounds_warns_outside_run, .timeout = 120)
{
    char h[4096], cmd[8192];
    static char out[65536];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    snprintf(cmd, sizeof cmd, "%s bench --procs 1 --size 4K --iters 1 --warmup 0 --rounds 2", h);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "warning: --rounds does nothing in bench mode (ignored)"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 4 --size 1M --rounds 2", h);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "warning: --rounds does nothing in explain mode (ignored)"), "%s", out);
    cr_expect(strstr(out, "ring allreduce of 1 MiB (262144 f32 elements), 4 workers"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --help", h);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(!strstr(out, "--rounds N"), "bench --help lists --rounds:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s run --help", h);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "--rounds N"), "run --help:\n%s", out);
}
