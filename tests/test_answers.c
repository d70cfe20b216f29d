/* test_answers.c: the answers a user acts on: --batch (global) and --batch-per-gpu (each worker's, as
 * torchrun and Horovod scripts count; the emulated cluster's model takes 64 a GPU when neither is given,
 * whatever the cluster's size; a per-worker batch trains any number of workers; the two together are
 * refused), and `harness model`'s verdict line for the cluster asked. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"

static char g_h[512];
static char g_out[1 << 16];

static int s_run(const char *args)
{
    cr_assert(harness_path(g_h, sizeof g_h) == 0, "build the harness first (make)");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", g_h, args);
    return run_cmd(cmd, g_out, sizeof g_out);
}

#define S_MODEL "model --model vgg16 --device pascal --nodes 16 --gpus-per-node 4 --net inter=25gbit --no-check"

Test(answers, model_takes_64_a_gpu_unless_told, .timeout = 60)
{
    cr_assert_eq(s_run(S_MODEL), 0, "%s", g_out);
    cr_expect(strstr(g_out, "batch 64/GPU"), "16 x 4 GPUs without --batch: %s", g_out);
    cr_assert_eq(s_run(S_MODEL " --batch 1024"), 0, "%s", g_out);
    cr_expect(strstr(g_out, "batch 16/GPU"), "--batch is global: %s", g_out);
    cr_assert_eq(s_run(S_MODEL " --batch-per-gpu 32"), 0, "%s", g_out);
    cr_expect(strstr(g_out, "batch 32/GPU"), "%s", g_out);
    cr_expect_eq(s_run(S_MODEL " --batch 8"), 2, "fewer samples than GPUs: %s", g_out);
}

Test(answers, both_refused, .timeout = 30)
{
    cr_expect_eq(s_run("train --procs 2 --batch 64 --batch-per-gpu 32"), 2, "%s", g_out);
    cr_expect(strstr(g_out, "give one"), "%s", g_out);
}

/* 256 is not a multiple of 3 workers: --batch-per-gpu trains them */
Test(answers, per_worker_batch_trains_any_world, .timeout = 120)
{
    char *dir = tmpdir_make(), args[1024], path[600];
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    snprintf(args, sizeof args, "train --procs 3 --batch-per-gpu 8 --steps 3 --warmup-steps 1 --quiet --json %s", path);
    cr_assert_eq(s_run(args), 0, "%s", g_out);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no results file");
    char line[1 << 14];
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    cr_expect(strstr(line, "\"batch\": 24"), "global 3 x 8: %s", line);
    cr_expect(strstr(line, "\"local_batch\": 8"), "%s", line);
    tmpdir_remove(dir);
}

/* the last line answers the question for the cluster asked, from the table's own figures */
Test(answers, model_ends_with_a_verdict, .timeout = 60)
{
    cr_assert_eq(s_run(S_MODEL), 0, "%s", g_out);
    const char *v = strstr(g_out, "# verdict");
    cr_assert(v, "%s", g_out);
    const char *at = strstr(v, "vgg16, 64 GPUs (16 x 4), 25 Gbit/s: ");
    cr_assert(at, "%s", v);
    cr_expect(strstr(v, "best PS layout (ps-"), "%s", v);
    cr_expect(strstr(v, ": use "), "%s", v);
    /* the verdict's best allreduce and its figure are the table's row of that layout at 64 GPUs */
    char label[48];
    double sp;
    cr_assert_eq(sscanf(at + strlen("vgg16, 64 GPUs (16 x 4), 25 Gbit/s: "), "%47s %lfx", label, &sp), 2, "%s", v);
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", label);
    const char *row = strstr(g_out, key);
    cr_assert(row, "no row %s in %s", label, g_out);
    double x[8];
    cr_assert_eq(sscanf(row + strlen(key), "%lf %lf %lf %lf %lf %lf %lf", &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]), 7);
    char want[80];
    snprintf(want, sizeof want, "%s %.2fx", label, x[6]);
    cr_expect(strstr(v, want), "%s not in %s", want, v);
    /* the layouts it weighs are the registry's: machine-local aggregation among them */
    cr_expect(strstr(g_out, "\n  ps-K=N-localagg "), "%s", g_out);
}
