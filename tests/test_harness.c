/* test_harness.c: the harness program end to end over its launcher: bench (JSON lines, exact results, in place), train,
 * save and resume, model check, emulated links, and the clear failures users meet: bad flags, unknown
 * engines, a full disk (ranks started by hand: test_harness_hand.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"

static char g_harness[512];

static void s_find(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
}

Test(harness, bench_ring_json, .timeout = 90)
{
    s_find();
    char json[] = "/tmp/sb-test-XXXXXX", cmd[2048], out[1 << 16];
    int fd = mkstemp(json);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 3 --sizes 4K:64K --iters 5 --warmup 1 --json %s",
             g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "harness bench failed:\n%s", out);
    cr_expect(strstr(out, "busbw") != NULL, "no table header:\n%s", out);
    cr_expect_eq(count_lines(json, NULL), 5, "one JSON line per size");
    cr_expect_eq(count_lines(json, "\"mode\":\"bench\""), 5);
    cr_expect_eq(count_lines(json, "\"wrong\":0,"), 5);
    cr_expect_eq(count_lines(json, "\"world\":3,"), 5);
    cr_expect_eq(count_lines(json, "\"busbw_gbs\":"), 5);
    cr_expect_eq(count_lines(json, "\"git_sha\":"), 5);
    /* loop_us: the slowest rank's loop / iterations, beside time_us (per iteration the slowest, median) */
    cr_expect_eq(count_lines(json, "\"loop_us\":"), 5);
    FILE *f = fopen(json, "r");
    cr_assert(f);
    char line[1 << 14];
    while (fgets(line, sizeof line, f)) {
        const char *t = strstr(line, "\"time_us\":"), *m = strstr(line, "\"loop_us\":");
        cr_assert(t && m, "%s", line);
        double per = atof(t + strlen("\"time_us\":")), loop = atof(m + strlen("\"loop_us\":"));
        /* the slowest rank's loop averages its iterations (a descheduled one on this busy host can lift the
         * mean well above the median): never far under the median of the slowest */
        cr_expect(loop > 0 && per > 0 && loop > 0.5 * per, "loop %.1f us a collective, per iteration %.1f us", loop, per);
    }
    fclose(f);
    unlink(json);
}

/* harness bench ARGS --json JSON (a new temporary file) on 3 ranks, its output into out; asserts it succeeded */
static void s_bench_json(const char *args, char json[20], char *out, size_t len)
{
    s_find();
    char cmd[2048];
    snprintf(json, 20, "/tmp/sb-test-XXXXXX");
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s bench --engine ring,tree,ps --procs 3 %s --json %s", g_harness, args, json);
    int rc = run_cmd(cmd, out, len);
    cr_assert_eq(rc, 0, "%s", out);
}

Test(harness, bench_every_engine_exact, .timeout = 120)
{
    char json[20], out[1 << 16];
    s_bench_json("--servers 2 --sizes 4K:256K --factor 8 --iters 3 --warmup 1 --dtype f16", json, out, sizeof out);
    cr_expect_eq(count_lines(json, NULL), 9, "3 engines x 3 sizes");
    cr_expect_eq(count_lines(json, "\"wrong\":0,"), 9, "every element exact");
    cr_expect_eq(count_lines(json, "\"engine\":\"ps\""), 3);
    cr_expect_eq(count_lines(json, "\"servers\":2,"), 3, "ps with two dedicated servers");
    /* the PS's lines say its partition (the default 4 MiB here), the allreduce engines' do not */
    cr_expect_eq(count_lines(json, "\"ps_partition_bytes\":4194304"), 3);
    cr_expect_eq(count_lines(json, "\"ps_partition_bytes\""), 3);
    unlink(json);
}

/* --in-place: one buffer, as the public API's sb_allreduce (what syncbench.torch's allreduce is compared with):
 * every engine exact on a known input after the timed zeros, the header and the JSON line say so, and a fit
 * never reads such a line as the out-of-place collective's */
Test(harness, bench_in_place_every_engine_exact, .timeout = 120)
{
    char json[20], out[1 << 16];
    s_bench_json("--sizes 4K:1M --factor 16 --iters 3 --warmup 1 --op avg --in-place", json, out, sizeof out);
    cr_expect_eq(count_lines(json, NULL), 9, "3 engines x 3 sizes");
    cr_expect_eq(count_lines(json, "\"wrong\":0,"), 9, "every element exact");
    cr_expect_eq(count_lines(json, "\"in_place\":true"), 9);
    cr_expect(strstr(out, "op avg, transport") && strstr(out, ", in place") && !strstr(out, "out-of-place"), "%s", out);
    unlink(json);
}

Test(harness, train_json_fields, .timeout = 120)
{
    s_find();
    char json[] = "/tmp/sb-test-XXXXXX", cmd[2048], out[1 << 16];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s train --engine tree,ps --procs 2 --steps 4 --warmup-steps 1 --quiet --json %s",
             g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect_eq(count_lines(json, "\"mode\": \"train\""), 2);
    const char *fields[] = {"\"samples_per_s\":", "\"step_ms_p50\":", "\"step_ms_p99\":", "\"comm_ms_p50\":",
                            "\"loss_first\":", "\"loss_last\":", "\"mem_peak_bytes\": [", "\"mem_imbalance\":",
                            "\"mem_engine_bytes\": [", "\"git_sha\":", "\"timestamp\":", "\"host\":"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cr_expect_eq(count_lines(json, fields[i]), 2, "field %s in both lines", fields[i]);
    unlink(json);
}

Test(harness, bench_tcp_transport_and_half_types, .timeout = 90)
{
    s_find();
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --transport tcp --sizes 1M --dtype bf16 --iters 3",
             g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "transport tcp") != NULL, "%s", out);
    cr_expect(strstr(out, "bf16") != NULL, "%s", out);
}

Test(harness, bad_flags_are_named, .timeout = 30)
{
    s_find();
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd, "%s bench --procs zero", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--procs") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --engine rung --procs 2", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "unknown engine 'rung'") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --sizes 64M:4K", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--sizes") != NULL, "%s", out);
    const char *never_ending[] = {"0", "0:4K", "inf", "nan:1M", "1e400"}; /* looped forever before */
    for (int i = 0; i < 5; i++) {
        snprintf(cmd, sizeof cmd, "timeout 10 %s bench --engine ring --sizes %s --iters 1", g_harness, never_ending[i]);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "--sizes %s: %s", never_ending[i], out);
        cr_expect(strstr(out, "--sizes") != NULL, "%s", out);
    }
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --sizes 1001 --iters 1", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "rounded") != NULL, "a size that is not whole elements is rounded silently:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s frobnicate", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "unknown mode") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --procs 2 --json /nonexistent-dir/r.jsonl", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "an unwritable results file fails before any work");
    cr_expect(strstr(out, "cannot write there") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --bogus", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--bogus") != NULL, "%s", out);
    /* bench on emulated machines: with --net, and instead of --procs */
    snprintf(cmd, sizeof cmd, "%s bench --engine ps --nodes 2 --gpus-per-node 2", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--nodes") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --engine ps --nodes 2 --procs 4 --net inter=1gbit", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "not with --procs") != NULL, "%s", out);
}

Test(harness, full_disk_loses_nothing, .timeout = 60)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --sizes 4K --iters 2 --json /dev/full", g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect_neq(rc, 0, "a results file that cannot be written must fail the run:\n%s", out);
    cr_expect(strstr(out, "no space") != NULL || strstr(out, "No space") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --steps 1 --warmup-steps 0 --json /dev/full", g_harness);
    rc = run_cmd(cmd, out, sizeof out);
    cr_expect_neq(rc, 0, "train: a results file that cannot be written must fail the run:\n%s", out);
    cr_expect(strstr(out, "No space") != NULL, "%s", out);
}

/* The "parameters after step N: checksum X" line of rank 0's output for step `step`, or "". */
static void s_checksum_of(const char *out, unsigned long long step, char *sum, size_t len)
{
    char want[64];
    snprintf(want, sizeof want, "parameters after step %llu: checksum ", step);
    const char *p = strstr(out, want);
    sum[0] = '\0';
    if (p) snprintf(sum, len, "%.16s", p + strlen(want));
}

/* For every engine: --steps 20 (its 5 warm-up steps included) + --save, then --resume --steps 20, equals
 * --steps 40 bit for bit: --steps counts every optimizer step, so runs compose; momentum included (the PS's
 * servers write it into their shards, tests/test_ps_ckpt.c); and the PS with Adam on colocated servers. */
Test(harness, save_resume_equals_one_run_for_every_engine, .timeout = 240)
{
    s_find();
    const char *engines[] = {"ring", "tree", "ps"};
    char ck[] = "/tmp/sb-ckpt-XXXXXX", cmd[2048], out[1 << 16], a[32], b[32];
    close(mkstemp(ck));
    const char *common = "--procs 2 --model mlp:784-32-10 --batch 32 --warmup-steps 5 --seed 7";
    for (int i = 0; i < 3; i++) {
        const char *optim = "sgd:lr=0.05,momentum=0.9";
        snprintf(cmd, sizeof cmd, "%s train --engine %s %s --optim %s --steps 20 --save %s", g_harness, engines[i],
                 common, optim, ck);
        int rc = run_cmd(cmd, out, sizeof out);
        cr_assert_eq(rc, 0, "%s --save: exit %d\n%s", engines[i], rc, out);
        snprintf(cmd, sizeof cmd, "%s train --engine %s %s --optim %s --steps 20 --resume %s", g_harness, engines[i],
                 common, optim, ck);
        rc = run_cmd(cmd, out, sizeof out);
        cr_assert_eq(rc, 0, "%s --resume: exit %d\n%s", engines[i], rc, out);
        s_checksum_of(out, 40, a, sizeof a);
        snprintf(cmd, sizeof cmd, "%s train --engine %s %s --optim %s --steps 40", g_harness, engines[i], common, optim);
        rc = run_cmd(cmd, out, sizeof out);
        cr_assert_eq(rc, 0, "%s 40 steps: exit %d\n%s", engines[i], rc, out);
        s_checksum_of(out, 40, b, sizeof b);
        cr_expect(a[0] && !strcmp(a, b), "%s: 20 + 20 steps give %s, 40 steps give %s", engines[i], a, b);
    }
    const char *ps = "--engine ps --ps-colocate --optim adam:lr=1e-3";
    snprintf(cmd, sizeof cmd, "%s train %s %s --steps 20 --save %s && %s train %s %s --steps 20 --resume %s", g_harness, ps,
             common, ck, g_harness, ps, common, ck);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "ps adam colocated save + resume: exit %d\n%s", rc, out);
    s_checksum_of(out, 40, a, sizeof a);
    snprintf(cmd, sizeof cmd, "%s train %s %s --steps 40", g_harness, ps, common);
    rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "ps adam 40 steps: exit %d\n%s", rc, out);
    s_checksum_of(out, 40, b, sizeof b);
    cr_expect(a[0] && !strcmp(a, b), "ps adam colocated: 20 + 20 steps give %s, 40 steps give %s", a, b);
    /* the manifest and the files it names are the checkpoint: remove them all */
    snprintf(cmd, sizeof cmd, "rm -f %s %s.*", ck, ck);
    run_cmd(cmd, out, sizeof out);
}

/* --steps counts the warm-up: a warm-up given that leaves no timed step is refused before any rank starts, the
 * default one shortens to leave one, and the JSON line says how many steps were timed. */
Test(harness, steps_count_the_warmup, .timeout = 60)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --steps 5 --warmup-steps 5", g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect(rc != 0 && strstr(out, "--warmup-steps 5 leaves no timed step of --steps 5"), "(%d)\n%s", rc, out);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --model mlp:784-32-10 --batch 32 --steps 3 --json -", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "\"steps\": 3,") && strstr(out, "\"warmup_steps\": 2,") && strstr(out, "\"timed_steps\": 1"),
              "--steps 3 with the default warm-up: 2 untimed, 1 timed:\n%s", out);
    cr_expect(strstr(out, "parameters after step 3:") != NULL, "3 optimizer steps in all:\n%s", out);
}

/* A PS server killed with SIGKILL cannot remove its ipc socket's run directory: the launcher does, once its
 * ranks are reaped (core/rundir.h), so an abnormal end leaves nothing in $TMPDIR. */
Test(harness, killed_ps_server_leaves_no_run_directory, .timeout = 60)
{
    s_find();
    char cmd[4096], out[1 << 14];
    snprintf(cmd, sizeof cmd,
             "d=$(mktemp -d /tmp/sb-rd-XXXXXX) || exit 1; export TMPDIR=$d; "
             "%s train --engine ps --servers 1 --procs 2 --steps 1000000 --model mlp:784-32-10 --batch 32 --quiet "
             ">$d.out 2>&1 & L=$!; for i in $(seq 100); do ls $d | grep -q '^sb-ps-' && break; sleep 0.1; done; "
             "echo before=$(ls $d | grep -c '^sb-ps-'); sleep 0.5; pkill -KILL -P $L; wait $L; echo rc=$?; "
             "echo after=$(ls $d | grep -c '^sb-ps-'); rm -rf $d $d.out", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "before=1") != NULL, "the server made no run directory to leave behind:\n%s", out);
    cr_expect(strstr(out, "rc=0") == NULL, "killed ranks, yet the launcher exited 0:\n%s", out);
    cr_expect(strstr(out, "after=0") != NULL, "a killed server's run directory was left behind:\n%s", out);
}

/* Output paths are checked before any work: a --timeline in a missing folder and --plots under a file fail at
 * once, naming the flag, instead of after the run. */
Test(harness, output_paths_checked_before_the_run, .timeout = 30)
{
    s_find();
    char cmd[2048], out[1 << 14];
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --steps 100000 --timeline /nonexistent-sb/t.json", g_harness);
    double secs;
    int rc = run_cmd_timed(cmd, out, sizeof out, &secs);
    cr_expect(rc != 0 && strstr(out, "--timeline /nonexistent-sb/t.json: no folder /nonexistent-sb"), "(%d)\n%s", rc, out);
    cr_expect(secs < 5, "the check came after %.1f s", secs);
    snprintf(cmd, sizeof cmd, "%s report --plots /etc/hostname/plots results/tmp/none.jsonl", g_harness);
    rc = run_cmd(cmd, out, sizeof out);
    cr_expect(rc != 0 && strstr(out, "--plots /etc/hostname/plots: /etc/hostname is not a folder"), "(%d)\n%s", rc, out);
}

/* A bench size the host cannot hold is refused before any buffer, with the figures, not met by the OOM
 * killer (issue 33 §5: --sizes 8G on 2 ranks on 24 GB). 1024 GiB exceeds any host this runs on. */
Test(harness, bench_size_beyond_memory_is_refused_first, .timeout = 30)
{
    s_find();
    char cmd[2048], out[1 << 14];
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --sizes 1024G --iters 1", g_harness);
    double secs;
    int rc = run_cmd_timed(cmd, out, sizeof out, &secs);
    cr_expect(rc != 0 && strstr(out, "the 2 rank(s) on this host need at least 4.1e+03 GiB"), "(%d)\n%s", rc, out);
    cr_expect(secs < 10, "refused after %.1f s", secs);
}

/* The small ones users met: bench --quiet still prints its table; busbw is 0 at P = 1; --straggler names a
 * rank that is not there; warm-up overflow skips count in skipped_steps; the header's bucket wording;
 * progress lines say whose loss they show. */
Test(harness, user_visible_details, .timeout = 120)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 1 --sizes 4K --iters 2 --quiet --json -", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "algbw") && strstr(out, "          4096 "), "bench --quiet printed no table:\n%s", out);
    cr_expect(strstr(out, "\"busbw_gbs\":0.0,") != NULL, "busbw at P = 1 must be 0:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --steps 1 --straggler 5:10", g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect(rc != 0 && strstr(out, "--straggler") != NULL, "a straggler rank >= world was accepted (%d):\n%s", rc, out);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --grad-dtype f16 --model mlp:784-32-10 --batch 32 "
             "--optim sgd:lr=1e8 --warmup-steps 5 --steps 6 --json -", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    const char *sk = strstr(out, "\"skipped_steps\": ");
    cr_expect(sk && atoi(sk + 17) >= 4, "warm-up overflow skips not counted:\n%s", sk ? sk : out);
    cr_expect(strstr(out, "closed at >= 25 MiB") && !strstr(out, "of <= "), "bucket wording:\n%s", out);
    cr_expect(strstr(out, "rank 0 loss") != NULL, "progress lines do not say whose loss:\n%s", out);
}

/* Other tools' habits (issue 17): torchrun's and nccl-tests' spellings, mpirun's -np, getopt's ambiguous and
 * unknown options named precisely, `harness MODE --help` with defaults, --version with the baked-in sha. */
Test(harness, other_tools_spellings, .timeout = 90)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s bench -np 2 --engine ring -b 4K -e 8K -f 2 -n 2 -w 1 -c 1 -d half -o avg --json -",
             g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "\"world\":2,") && strstr(out, "\"bytes\":4096,") && strstr(out, "\"bytes\":8192,") &&
              !strstr(out, "\"bytes\":16384,") && strstr(out, "\"dtype\":\"f16\"") && strstr(out, "\"op\":\"avg\"") &&
              strstr(out, "\"iters\":2,\"warmup\":1,"), "nccl-tests' flags not taken:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --warm 3", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--warm is ambiguous: --warmup, --warmup-steps") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench -np 4 -x", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "unknown option '-x'") && !strstr(out, g_harness), "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench -b 64M -e 4K", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "smallest size") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --master-port 29501", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--master-port needs --master-addr") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --nproc_per_node 2 --master-addr 127.0.0.1 --node_rank 3 --nnodes 2", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--node-rank 3 must be < --nnodes 2") != NULL, "torchrun's spellings:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --help", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0);
    cr_expect(strstr(out, "usage: harness bench") && strstr(out, "--sizes 4K:64M") && strstr(out, "--iters 20") &&
              !strstr(out, "--steps"), "bench --help:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s -h", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0);
    cr_expect(strstr(out, "Modes:") && strstr(out, "--nproc-per-node"), "-h:\n%s", out);
    /* the sha of the binary's sources, from any directory */
    snprintf(cmd, sizeof cmd, "cd / && %s --version", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0);
    char sha[64] = "";
    FILE *p = popen("git rev-parse --short=12 HEAD 2>/dev/null", "r");
    if (p && fgets(sha, sizeof sha, p)) sha[strcspn(sha, "\n")] = '\0';
    if (p) pclose(p);
    cr_expect(strstr(out, "harness (syncbench) ") && !strstr(out, "unknown"), "%s", out);
    if (sha[0]) cr_expect(strstr(out, sha) != NULL, "--version %s is not this tree's %s", out, sha);
}

/* A flag a mode does not use is an error or a warning, never silence (issue 17): run honours --engine, --scaling
 * with --procs is refused, bench-only flags in report are named, a bare bench warns about its one rank. */
Test(harness, ignored_flags_are_said, .timeout = 90)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s run --engine ring --procs 2 --sizes 4K --iters 1 --steps 2 --warmup-steps 0 "
             "--model mlp:784-32-10 --json - --quiet", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "engines ring;") && strstr(out, "\"engine\":\"ring\"") && !strstr(out, "\"engine\":\"tree\"") &&
              !strstr(out, "\"engine\": \"ps\""), "run --engine ring ran other engines:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --scaling 1,2 --procs 4", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2);
    cr_expect(strstr(out, "--procs would be ignored") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s report --sizes 4K /dev/null", g_harness);
    run_cmd(cmd, out, sizeof out);
    cr_expect(strstr(out, "warning: --sizes does nothing in report mode") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --sizes 4K --iters 1", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "bench on one rank measures no communication") != NULL, "%s", out);
}

/* The man page and bash completion `make install` puts in place are generated from --help (issue 17). */
Test(harness, man_page_and_completion, .timeout = 30)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "scripts/gen-man %s", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, ".TH HARNESS 1") && strstr(out, ".SH \"MODES\"") && strstr(out, "\\-\\-procs"), "%.2000s", out);
    snprintf(cmd, sizeof cmd, "f=/tmp/sb-compl.$$; scripts/gen-completion %s > $f && bash -c '. \"$1\"; "
             "COMP_WORDS=(syncbench --nproc); COMP_CWORD=1; _harness; echo \"${COMPREPLY[@]}\"' _ $f; rc=$?; rm -f $f; exit $rc",
             g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "--nproc-per-node") != NULL, "%s", out);
}

/* `harness model` against emulated runs (issue 13): launches of the same configuration are one point,
 * compared by their median; a host-bound launch is left out; another layout is its own point. */
Test(harness, model_check_takes_the_median_of_launches, .timeout = 60)
{
    s_find();
    char path[] = "/tmp/sb-modelcheck-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f);
    const char *common = "\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"resnet50\",\"device\":\"v100\","
                         "\"nodes\":2,\"gpus_per_node\":4,\"world\":8,\"net\":\"inter=25gbit\",\"local_batch\":64,"
                         "\"shrink\":32,\"dilate\":1,\"grad_dtype\":\"f32\"";
    const double ms[] = {300, 100, 200}; /* the median is 200 */
    for (int i = 0; i < 3; i++)
        fprintf(f, "{%s,\"engine\":\"ring\",\"impl\":\"host\",\"servers\":0,\"host_bound\":false,\"emu_step_ms\":%g}\n",
                common, ms[i]);
    fprintf(f, "{%s,\"engine\":\"ring\",\"impl\":\"host\",\"servers\":0,\"host_bound\":true,\"emu_step_ms\":900}\n", common);
    fprintf(f, "{%s,\"engine\":\"tree\",\"impl\":\"host\",\"servers\":0,\"host_bound\":false,\"emu_step_ms\":250}\n", common);
    /* the default queue spelled out is the same configuration (a fourth ring launch: the median of 100, 200,
     * 300, 400 is 250); another queue is not a point of the model's (left out) */
    const char *q100 = "\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"resnet50\",\"device\":\"v100\","
                       "\"nodes\":2,\"gpus_per_node\":4,\"world\":8,\"net\":\"inter=25gbit,queue=100ms\",\"local_batch\":64,"
                       "\"shrink\":32,\"dilate\":1,\"grad_dtype\":\"f32\"";
    fprintf(f, "{%s,\"engine\":\"ring\",\"impl\":\"host\",\"servers\":0,\"host_bound\":false,\"emu_step_ms\":400}\n", q100);
    fprintf(f, "{\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"resnet50\",\"device\":\"v100\",\"nodes\":2,"
               "\"gpus_per_node\":4,\"world\":8,\"net\":\"inter=25gbit,queue=2ms\",\"local_batch\":64,\"shrink\":32,"
               "\"dilate\":1,\"grad_dtype\":\"f32\",\"engine\":\"ring\",\"impl\":\"host\",\"servers\":0,"
               "\"host_bound\":false,\"emu_step_ms\":5000}\n");
    /* a run whose emulated machines ran another TCP congestion control (its versions say which) is not a
     * point of the model's default NIC, but the only one of a model that names it */
    fprintf(f, "{%s,\"engine\":\"ring\",\"impl\":\"host\",\"servers\":0,\"host_bound\":false,\"emu_step_ms\":7000,"
               "\"versions\":\"zeromq 4.3.4, msgpack-c 4.0.0, hwloc 2.8.0, tcp cubic\"}\n", common);
    fclose(f);
    char cmd[1024], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s model --model resnet50 --device v100 --nodes 2 --gpus-per-node 4 --net inter=25gbit %s",
             g_harness, path);
    int rc = run_cmd(cmd, out, sizeof out);
    char cmd2[1024], out2[1 << 16];
    snprintf(cmd2, sizeof cmd2, "%s model --model resnet50 --device v100 --nodes 2 --gpus-per-node 4 --net "
             "inter=25gbit,cc=cubic %s", g_harness, path);
    int rc2 = run_cmd(cmd2, out2, sizeof out2);
    unlink(path);
    cr_assert_eq(rc2, 0, "%s", out2);
    cr_expect(strstr(out2, "TCP cubic") != NULL, "the model does not say which TCP it models:\n%s", out2);
    cr_expect(strstr(out2, "counted: 1 configurations (1 launches)") != NULL, "%s", out2);
    cr_expect(strstr(out2, "7000.0") != NULL, "%s", out2);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "counted: 2 configurations (5 launches)") != NULL, "%s", out);
    const char *check = strstr(out, "# out of sample: predicted");
    cr_assert(check, "%s", out);
    const char *ring = strstr(check, "\n  ring ");
    cr_assert(ring, "%s", out);
    int launches = 0;
    double measured = 0;
    cr_expect_eq(sscanf(ring, " ring %*s %*s %*d %d %lf", &launches, &measured), 2, "%.200s", ring);
    cr_expect_eq(launches, 4);
    cr_expect_float_eq(measured, 250.0, 1e-9,
                       "the median of 100, 200, 300, 400 (host-bound 900, queue=2ms and TCP cubic left out)");
}

/* K server machines with 1 < K < N (the BytePS sweep) are points of the check; a host-bound run is
 * predicted and listed but not counted; --json gets one "check" line per configuration. */
Test(harness, model_check_lists_k_servers_and_host_bound, .timeout = 60)
{
    s_find();
    char path[] = "/tmp/sb-modelcheck-XXXXXX", js[] = "/tmp/sb-modelcheck-json-XXXXXX";
    int fd = mkstemp(path), jfd = mkstemp(js);
    cr_assert(fd >= 0 && jfd >= 0);
    close(jfd);
    unlink(js); /* --json creates it */
    FILE *f = fdopen(fd, "w");
    cr_assert(f);
    const char *common = "\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"vgg16\",\"device\":\"throughput=100000\","
                         "\"nodes\":4,\"gpus_per_node\":1,\"world\":4,\"net\":\"inter=25gbit\",\"local_batch\":64,"
                         "\"shrink\":32,\"dilate\":1,\"grad_dtype\":\"f32\",\"engine\":\"ps\"";
    fprintf(f, "{%s,\"impl\":\"ps-sync-servers2\",\"servers\":2,\"server_nodes\":2,\"host_bound\":false,"
               "\"emu_step_ms\":450}\n", common);
    fprintf(f, "{%s,\"impl\":\"ps-sync-servers3\",\"servers\":3,\"server_nodes\":3,\"host_bound\":true,"
               "\"emu_step_ms\":900}\n", common);
    /* the same K = 2 run dilated: a configuration of its own, listed (dil), never counted */
    fprintf(f, "{\"emulated\":1,\"mode\":\"train\",\"schema\":2,\"model\":\"vgg16\",\"device\":\"throughput=100000\","
               "\"nodes\":4,\"gpus_per_node\":1,\"world\":4,\"net\":\"inter=25gbit\",\"local_batch\":64,\"shrink\":32,"
               "\"dilate\":3,\"grad_dtype\":\"f32\",\"engine\":\"ps\",\"impl\":\"ps-sync-servers2\",\"servers\":2,"
               "\"server_nodes\":2,\"host_bound\":false,\"emu_step_ms\":2000}\n");
    fclose(f);
    char cmd[1024], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s model --model vgg16 --device throughput=100000 --nodes 4 --gpus-per-node 1 --net "
             "inter=25gbit --json %s %s", g_harness, js, path);
    int rc = run_cmd(cmd, out, sizeof out);
    /* --no-check: the files still calibrate, but no check is printed */
    char cmd2[1024], out2[1 << 16];
    snprintf(cmd2, sizeof cmd2, "%s model --model vgg16 --device throughput=100000 --nodes 4 --gpus-per-node 1 --net "
             "inter=25gbit --no-check %s", g_harness, path);
    cr_expect_eq(run_cmd(cmd2, out2, sizeof out2), 0, "%s", out2);
    cr_expect(strstr(out2, "# predicted speedup") && !strstr(out2, "# out of sample"), "%s", out2);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", out);
    const char *check = strstr(out, "# out of sample: predicted");
    cr_assert(check, "%s", out);
    const char *k2 = strstr(check, "\n  ps-K=2 "), *k3 = strstr(check, "\n  ps-K=3 ");
    cr_assert(k2 && k3, "%s", check);
    double meas = 0, pred = 0;
    cr_expect_eq(sscanf(k2, " ps-K=2 %*s %*s %*d %*d %lf %lf", &meas, &pred), 2, "%.200s", k2);
    /* 4 workers' VGG-16 bytes over 2 server machines: each server NIC takes twice a worker's bytes */
    cr_expect(meas == 450 && pred > 300 && pred < 600, "%.200s", k2);
    cr_expect(strstr(k3, " hb\n") != NULL, "the host-bound run is not marked: %.200s", k3);
    cr_expect(strstr(check, " 2000.0 ") && strstr(strstr(check, " 2000.0 "), " dil\n"), "the dilated run is not marked: %s",
              check);
    cr_expect(strstr(out, "counted: 1 configurations (1 launches)") != NULL, "a host-bound run was counted:\n%s", out);
    char *lines = NULL;
    size_t cap = 0;
    int nchk = 0, hb = 0, counted = 0;
    FILE *jf = fopen(js, "r");
    cr_assert(jf, "no --json file");
    while (getline(&lines, &cap, jf) > 0) {
        if (!strstr(lines, "\"kind\":\"check\"")) continue;
        nchk++;
        hb += strstr(lines, "\"host_bound\":true") != NULL;
        counted += strstr(lines, "\"counted\":true") != NULL;
        if (strstr(lines, "\"engine\":\"ps-K=2\"") && strstr(lines, "\"counted\":true"))
            cr_expect(strstr(lines, "\"server_nodes\":2") && strstr(lines, "\"measured_ms\":450"), "%s", lines);
    }
    free(lines);
    fclose(jf);
    unlink(js);
    cr_expect_eq(nchk, 3);
    cr_expect_eq(hb, 1);
    cr_expect_eq(counted, 1);
}

/* The calibration's rules (which bench line calibrates which constant, the fits, the files' order) are
 * tests/test_calib.c's. */

/* A bench on emulated links says whether the host kept up: each line carries the whole machine's CPU
 * share over its size (system_busy) and the verdict train uses (host_bound: >= 0.75) (root). */
Test(harness, bench_on_emulated_links_says_host_bound, .timeout = 90)
{
    s_find();
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, tc)");
    if (system("command -v tc >/dev/null && command -v ip >/dev/null") != 0) cr_skip_test("ip / tc (iproute2) not installed");
    char json[] = "/tmp/sb-test-XXXXXX", cmd[1024], out[1 << 15];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --sizes 256K:1M --factor 4 --iters 3 --warmup 1 "
             "--net bw=200mbit --json %s", g_harness, json);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    FILE *f = fopen(json, "r");
    cr_assert(f);
    char line[1 << 14];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        const char *b = strstr(line, "\"system_busy\":"), *h = strstr(line, "\"host_bound\":");
        cr_assert(b && h, "%s", line);
        double busy = atof(b + strlen("\"system_busy\":"));
        int bound = !strncmp(h + strlen("\"host_bound\":"), "true", 4);
        cr_expect(busy >= 0 && busy <= 1, "%s", line);
        cr_expect_eq(bound, busy >= 0.75, "%s", line);
        n++;
    }
    fclose(f);
    unlink(json);
    cr_expect_eq(n, 2);
}

/* scripts/nic-use reads the shapers' counters of a --net run in a window of it: a ring of two ranks at
 * 100 Mbit/s keeps both NICs busy most of the window, both ways (root: network namespaces). */
Test(harness, nic_use_reads_the_shapers, .timeout = 90)
{
    s_find();
    if (geteuid() != 0) cr_skip_test("needs root (network namespaces, tc)");
    if (system("command -v tc >/dev/null && command -v ip >/dev/null") != 0) cr_skip_test("ip / tc (iproute2) not installed");
    char script[PATH_MAX + 32];
    cr_assert(test_script(g_harness, "nic-use", script, sizeof script) == 0, "no scripts/nic-use (%s)", script);
    char cmd[PATH_MAX + 4608], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s 1 1 %s bench --engine ring --procs 2 --sizes 4M --iters 12 --warmup 1 --net bw=100mbit",
             script, g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    const char *t = strstr(out, "# nic-use: ");
    cr_assert(t, "%s", out);
    cr_expect(strstr(t, "shaped 100 Mbit/s"), "%s", t);
    int m0 = -1, m1 = -1, n = 0;
    double o0, i0, o1, i1;
    const char *l0 = strstr(t, "machine  0"), *l1 = strstr(t, "machine  1");
    cr_assert(l0 && l1, "%s", t);
    n += sscanf(l0, "machine %d out %lf (%*d%%) drops %*d in %lf", &m0, &o0, &i0) == 3;
    n += sscanf(l1, "machine %d out %lf (%*d%%) drops %*d in %lf", &m1, &o1, &i1) == 3;
    cr_assert_eq(n, 2, "%s", t);
    /* the ring keeps each 100 Mbit/s link busy most of the window; well above the rate
     * would be a bad count (the counters are read a few ms apart from the window's clock) */
    cr_expect(o0 > 50 && o0 < 110 && i0 > 50 && i0 < 110 && o1 > 50 && o1 < 110 && i1 > 50 && i1 < 110, "%s", t);
}
