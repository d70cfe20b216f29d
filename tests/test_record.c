/* test_record.c: scripts/record-results reads its experiments from scripts/experiments.manifest: --list
 * names every one, --dry-run prints the very command lines the old 780-line script ran (written out below
 * from `git show d81db6b:scripts/record-results`, run with stub binaries), the roles say which files
 * calibrate the cost model and which check it as that script's MODEL_* variables did, an unknown name exits
 * 2, and a malformed manifest is refused naming its line. Nothing here runs an experiment. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"

static char g_script[PATH_MAX + 32];
static char g_out[1 << 17];

/* the runner, with none of the environment it reads left over from the caller */
static int s_rr(const char *env, const char *args)
{
    if (!g_script[0])
        cr_assert(test_script(NULL, "record-results", g_script, sizeof g_script) == 0, "no scripts/record-results (%s)",
                  g_script);
    char cmd[sizeof g_script + 4096];
    snprintf(cmd, sizeof cmd,
             "env -u REPS -u PEER_REPS -u EMU_STEPS -u HARNESS -u MPI_BENCH -u RECORD_MANIFEST -u ALLOW_DIRTY %s %s %s",
             env, g_script, args);
    return run_cmd(cmd, g_out, sizeof g_out);
}

/* the dry run of args is exactly these lines */
static void s_dry(const char *env, const char *args, const char *const *want, size_t n)
{
    cr_assert_eq(s_rr(env, args), 0, "%s", g_out);
    static char exp[1 << 17];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)snprintf(exp + o, sizeof exp - o, "%s\n", want[i]);
    cr_expect_str_eq(g_out, exp);
}

#define N(a) (sizeof(a) / sizeof(a)[0])

/* ring_vs_mpi's first half with REPS=1 and both binaries moved: the ring bench, then the bare MPI_Allreduce
 * under mpirun (not echoed into the .txt: the old script wrote a short form there), at 2, 4, 8 ranks */
Test(record, dry_run_ring_vs_openmpi_overrides)
{
    static const char *const want[] = {
        "== ring-vs-openmpi-shm",
        "$ /tmp/rr/bin/harness bench --engine ring --procs 2 --sizes 4K:64M --iters 20 --warmup 5 --json results/ring-vs-openmpi-shm.jsonl",
        "$ mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader --bind-to none /tmp/rr/bin/mpi_allreduce --sizes 4K:64M --iters 20 --warmup 5 --label openmpi-vader --json results/ring-vs-openmpi-shm.jsonl",
        "$ /tmp/rr/bin/harness bench --engine ring --procs 4 --sizes 4K:64M --iters 20 --warmup 5 --json results/ring-vs-openmpi-shm.jsonl",
        "$ mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl self,vader --bind-to none /tmp/rr/bin/mpi_allreduce --sizes 4K:64M --iters 20 --warmup 5 --label openmpi-vader --json results/ring-vs-openmpi-shm.jsonl",
        "$ /tmp/rr/bin/harness bench --engine ring --procs 8 --sizes 4K:64M --iters 20 --warmup 5 --json results/ring-vs-openmpi-shm.jsonl",
        "$ mpirun --allow-run-as-root --oversubscribe -np 8 --mca btl self,vader --bind-to none /tmp/rr/bin/mpi_allreduce --sizes 4K:64M --iters 20 --warmup 5 --label openmpi-vader --json results/ring-vs-openmpi-shm.jsonl",
    };
    s_dry("REPS=1 HARNESS=/tmp/rr/bin/harness MPI_BENCH=/tmp/rr/bin/mpi_allreduce", "--dry-run ring-vs-openmpi-shm", want,
          N(want));
}

/* horovod_2017: the old emu function's arithmetic (16 GPUs at 4 a machine: 4 nodes, batch 64 x 16) */
Test(record, dry_run_horovod_2017)
{
    static const char *const want[] = {
        "== horovod-2017",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model inception3 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ring",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model inception3 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ring --no-overlap",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model inception3 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ps --servers 4",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model inception3 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ps --servers 4 --server-nodes 4",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model resnet101 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ring",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model resnet101 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ring --no-overlap",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model resnet101 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ps --servers 4",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model resnet101 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ps --servers 4 --server-nodes 4",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model vgg16 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ring",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model vgg16 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ring --no-overlap",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model vgg16 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ps --servers 4",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model vgg16 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 --json results/horovod-2017.jsonl --engine ps --servers 4 --server-nodes 4",
        "$ python3 scripts/horovod-table results/horovod-2017.jsonl",
    };
    s_dry("", "--dry-run horovod_2017", want, N(want));
}

/* model_cubic: the old script's `[ "$N" -gt 1 ] && [ "$G" -gt 1 ] && run ...` conditions over six layouts */
Test(record, dry_run_model_cubic)
{
    static const char *const want[] = {
        "== model-cubic",
        "$ build/harness bench --net bw=1gbit,cc=cubic --engine ps --servers 1 --scaling 2,4,8,16 --sizes 4M:16M --factor 4 --iters 5 --warmup 2 --ps-partition-kb 128 --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 1 --gpus-per-node 2 --server-nodes 1 --servers 1 --ps-partition-kb 128 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --ps-colocate --nodes 1 --gpus-per-node 2 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 1 --gpus-per-node 4 --server-nodes 1 --servers 1 --ps-partition-kb 128 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --ps-colocate --nodes 1 --gpus-per-node 4 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 2 --gpus-per-node 4 --server-nodes 1 --servers 1 --ps-partition-kb 128 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 2 --gpus-per-node 4 --servers 2 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --ps-colocate --nodes 2 --gpus-per-node 4 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 4 --gpus-per-node 1 --server-nodes 1 --servers 1 --ps-partition-kb 128 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 4 --gpus-per-node 4 --server-nodes 1 --servers 1 --ps-partition-kb 128 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 4 --gpus-per-node 4 --servers 4 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --ps-colocate --nodes 4 --gpus-per-node 4 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness bench --engine ps --nodes 8 --gpus-per-node 1 --server-nodes 1 --servers 1 --ps-partition-kb 128 --sizes 16M --iters 3 --warmup 1 --net inter=800mbit,cc=cubic --json results/model-cubic.jsonl",
        "$ build/harness model --model vgg16 --device pascal --nodes 4 --gpus-per-node 4 --net inter=25gbit,cc=cubic --batch 1024 results/emulation-cc.jsonl results/model-cubic.jsonl",
    };
    s_dry("", "--dry-run model_cubic", want, N(want));
}

/* ps_buckets: the model step's file list from mfiles and the MODEL_FANOUT global */
Test(record, dry_run_ps_buckets)
{
    static const char *const want[] = {
        "== ps-buckets",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model bert-large --device v100-amp --nodes 4 --gpus-per-node 4 --net inter=10gbit --batch 1024 --json results/ps-buckets.jsonl --engine ps --servers 1 --server-nodes 1 --bucket-mb 25",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model bert-large --device v100-amp --nodes 4 --gpus-per-node 4 --net inter=10gbit --batch 1024 --json results/ps-buckets.jsonl --engine ps --servers 1 --server-nodes 1 --bucket-mb 4096",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model bert-large --device v100-amp --nodes 4 --gpus-per-node 4 --net inter=10gbit --batch 1024 --json results/ps-buckets.jsonl --engine ps --servers 1 --server-nodes 1 --bucket-mb 25",
        "$ build/harness train --quiet --steps 4 --warmup-steps 1 --model bert-large --device v100-amp --nodes 4 --gpus-per-node 4 --net inter=10gbit --batch 1024 --json results/ps-buckets.jsonl --engine ps --servers 1 --server-nodes 1 --bucket-mb 4096",
        "$ build/harness model --model bert-large --device v100-amp --nodes 4 --gpus-per-node 4 --net inter=25gbit --batch 1024 results/ps-buckets.jsonl results/ps-incast-8x1.jsonl results/net-bench.jsonl results/ps-incast.jsonl results/ps-layouts.jsonl results/ps-sizes.jsonl results/ps-fanout.jsonl results/ps-fanout-repeat.jsonl results/ps-fanout-half.jsonl results/ps-fanout-half-repeat.jsonl",
    };
    s_dry("", "--dry-run ps_buckets", want, N(want));
}

/* An old function name that wrote two files runs both, in order; so does emulated_scaling (and the model after). */
Test(record, old_names_run_their_experiments)
{
    cr_assert_eq(s_rr("", "--dry-run ring_vs_mpi net_bench emulated_scaling | grep '^=='"), 0, "%s", g_out);
    cr_expect_str_eq(g_out, "== ring-vs-openmpi-shm\n== ring-vs-openmpi-tcp\n== net-bench\n== net-model\n"
                            "== emulated-scaling\n== emulated-model\n");
}

/* --list: one row under the header for every `experiment NAME` line of the manifest, counted here */
Test(record, list_names_every_experiment)
{
    cr_assert_eq(s_rr("", "--list"), 0, "%s", g_out);
    char path[sizeof g_script + 32];
    snprintf(path, sizeof path, "%.*s/experiments.manifest", (int)(strrchr(g_script, '/') - g_script), g_script);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    char line[4096], name[256];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, " experiment %255s", name) != 1) continue;
        n++;
        char row[300];
        snprintf(row, sizeof row, "\n%s ", name);
        cr_expect(strstr(g_out, row), "--list has no row for %s", name);
    }
    fclose(f);
    cr_expect_geq(n, 54, "%s has %d experiments", path, n);
    int rows = -1;  /* the header */
    for (const char *p = g_out; (p = strchr(p, '\n')); p++) rows++;
    cr_expect_eq(rows, n, "--list printed %d rows for %d experiments:\n%s", rows, n, g_out);
    cr_expect(strncmp(g_out, "NAME ", 5) == 0, "%.200s", g_out);
    cr_expect(strstr(g_out, "\nps-incast-8x1            calibrates,checks "), "%s", g_out);
}

/* the .jsonl files of a role, sorted, as the old script's variables named them */
static void s_role_files(const char *role, const char *want)
{
    char args[128];
    snprintf(args, sizeof args, "--files --role %s | grep 'jsonl$' | sort | tr '\\n' ' '", role);
    cr_assert_eq(s_rr("", args), 0, "%s", g_out);
    cr_expect_str_eq(g_out, want, "role %s", role);
}

/* Which files calibrate the model and which it is checked against: MODEL_RUNS (checked) and the other files
 * emulated_model passed (ps-incast-8x1 net-bench ps-incast ps-layouts $MODEL_SIZES $MODEL_FANOUT: calibrate);
 * ps-incast-8x1's trainings are checked too. */
Test(record, roles_say_what_calibrates_and_checks)
{
    s_role_files("checks",
                 "results/byteps-crossover-repeat.jsonl results/byteps-crossover.jsonl results/byteps-n8-host.jsonl "
                 "results/emulated-scaling-large.jsonl results/emulated-scaling-repeat.jsonl "
                 "results/emulated-scaling-repeat2.jsonl results/emulated-scaling-repeat3.jsonl "
                 "results/emulated-scaling.jsonl results/emulation-queue.jsonl results/emulation-repeat.jsonl "
                 "results/horovod-2017.jsonl results/ps-incast-8x1.jsonl results/ps-on-gpu-machines.jsonl ");
    s_role_files("calibrates",
                 "results/net-bench.jsonl results/ps-fanout-half-repeat.jsonl results/ps-fanout-half.jsonl "
                 "results/ps-fanout-repeat.jsonl results/ps-fanout.jsonl results/ps-incast-8x1.jsonl "
                 "results/ps-incast.jsonl results/ps-layouts.jsonl results/ps-sizes-4x4.jsonl "
                 "results/ps-sizes-colocated-4x4.jsonl results/ps-sizes-colocated.jsonl results/ps-sizes.jsonl ");
    cr_expect_eq(s_rr("", "--files --role nosuch"), 2, "%s", g_out);
    cr_expect(strstr(g_out, "unknown role 'nosuch'"), "%s", g_out);
}

Test(record, unknown_name_exits_2_naming_it)
{
    cr_expect_eq(s_rr("", "--dry-run bench-tree-ring no-such-thing"), 2, "%s", g_out);
    cr_expect(strstr(g_out, "unknown experiment 'no-such-thing'"), "%s", g_out);
    cr_expect(strstr(g_out, "bench-tree-ring") && strstr(g_out, "emulated-model"), "the names are listed:\n%s", g_out);
    cr_expect(!strstr(g_out, "$ build/harness"), "nothing ran before the error:\n%s", g_out);
}

/* RECORD_MANIFEST=text in a temporary file; returns the runner's status, its output in g_out */
static int s_manifest(const char *text, const char *args)
{
    char path[] = "/tmp/sb-manifest-XXXXXX", env[64];
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    snprintf(env, sizeof env, "RECORD_MANIFEST=%s", path);
    int rc = s_rr(env, args);
    unlink(path);
    return rc;
}

#define HEAD "roledef quoted q\nexperiment a\n  title A\n  role quoted\n  files a.txt\n"

Test(record, malformed_manifest_refused_naming_the_line)
{
    static const struct { const char *text, *want; } bad[] = {
        {HEAD "  titel B\n", ":6: unknown key 'titel'"},
        {"roledef quoted q\n\nexperiment a\n  title A\n  role quoted\n", ":3: experiment a has no files"},
        {"roledef quoted q\nexperiment a\n  title A\n  files a.txt\n  run true\n", ":2: experiment a has no role"},
        {HEAD "experiment b\n  title B\n  role quoted\n  files b.txt\nexperiment a\n  title A\n",
         ":10: experiment a twice (first at line 2)"},
        {HEAD "  role quoted\n", ":6: role twice in experiment a"},
        {"roledef quoted q\nexperiment a\n  title A\n  role quoted quotd\n  files a.txt\n", ":4: unknown role 'quotd'"},
        {HEAD "  each P in 2 4\n    run echo $P\n", ":6: 'each' without 'end'"},
        {HEAD "  end\n", ":6: 'end' without 'each' or 'if'"},
        {HEAD "  use nosuch\n", ":6: no template 'nosuch'"},
        {"  run true\n" HEAD, ":1: 'run' outside an experiment or template"},
    };
    for (size_t i = 0; i < N(bad); i++) {
        cr_expect_eq(s_manifest(bad[i].text, "--list"), 2, "case %zu:\n%s", i, g_out);
        cr_expect(strstr(g_out, bad[i].want), "case %zu: want '%s':\n%s", i, bad[i].want, g_out);
        cr_expect(strstr(g_out, "/tmp/sb-manifest-"), "case %zu names the file:\n%s", i, g_out);
    }
}

/* The manifest's own language: tuple loops, if/else, let, templates, continued lines, globals, emu's arithmetic */
Test(record, manifest_steps)
{
    const char *text =
        "roledef quoted q\n"
        "global G=${G:-\"g1 g2\"}\n"
        "template t\n"
        "  run echo t $v \\\n"
        "      more\n"
        HEAD
        "  each v:w in 1:x 2:y\n"
        "    if [ $v = 1 ]\n"
        "      run echo one $w\n"
        "    else\n"
        "      quiet echo other $v $w\n"
        "    end\n"
        "    use t\n"
        "  end\n"
        "  let q=\"$G $n\"\n"
        "  note never shown\n"
        "  run echo $q\n"
        "  emu 2 4 m d l 64 --x\n"
        "  emu steps=--s 16 4 m d l 8\n";
    cr_assert_eq(s_manifest(text, "--dry-run"), 0, "%s", g_out);
    cr_expect_str_eq(g_out, "== a\n$ echo one x\n$ echo t 1 more\n$ echo other 2 y\n$ echo t 2 more\n$ echo g1 g2 a\n"
                            "$ build/harness train --quiet --model m --device d --nodes 1 --gpus-per-node 2 --net l "
                            "--batch 128 --json results/a.jsonl --x\n"
                            "$ build/harness train --quiet --s --model m --device d --nodes 4 --gpus-per-node 4 --net l "
                            "--batch 128 --json results/a.jsonl\n");
}
