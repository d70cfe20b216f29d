/* test_torch_peer.c: PyTorch as a peer (peers/torch_ddp.py) through `harness --peers`: torch's gloo
 * all_reduce gives exact sums in the bench, DDP over gloo trains the same workload with its ranks in
 * sync, both written as peer rows with our field names. Runs only where torch is importable (by
 * peers/.venv's python, which `make peers` makes, else python3); skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/ranks.h"

static char g_harness[512];

/* The harness, and torch importable by the python the harness would use; or skip saying why. */
static void s_need_torch(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char h[PATH_MAX], py[PATH_MAX + 64], cmd[PATH_MAX + 256], out[4096];
    if (!realpath(g_harness, h)) snprintf(h, sizeof h, "%s", g_harness);
    char *root = dirname(dirname(h));
    snprintf(py, sizeof py, "%s/peers/.venv/bin/python", root);
    if (getenv("SYNCBENCH_TORCH_PYTHON")) snprintf(py, sizeof py, "%s", getenv("SYNCBENCH_TORCH_PYTHON"));
    else if (access(py, X_OK) != 0) snprintf(py, sizeof py, "python3");
    snprintf(cmd, sizeof cmd, "%s -c 'import torch, torch.distributed as d; assert d.is_gloo_available()'", py);
    if (run_cmd(cmd, out, sizeof out) != 0)
        cr_skip_test("torch (with gloo) is not importable by %s: `make peers` installs it into peers/.venv", py);
}

Test(torch_peer, bench_exact_peer_rows, .timeout = 240)
{
    s_need_torch();
    char json[] = "/tmp/sb-torch-XXXXXX", cmd[2048], out[1 << 16];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --peers --procs 2 --sizes 4K:64K --factor 16 --iters 3 --warmup 1 "
             "--json %s", g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "harness bench --peers failed:\n%s", out);
    cr_expect_eq(count_lines(json, "\"engine\": \"torch-gloo\""), 2, "one torch line per size");
    cr_expect_eq(count_lines(json, "\"peer\": true"), 2);
    cr_expect_eq(count_lines(json, "\"wrong\": 0,"), 2, "torch's sums exact");
    cr_expect_eq(count_lines(json, "\"engine\":\"ring\""), 2, "our engine in the same run");
    unlink(json);
}

Test(torch_peer, train_ddp_in_sync, .timeout = 240)
{
    s_need_torch();
    char json[] = "/tmp/sb-torch-XXXXXX", cmd[2048], out[1 << 16];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s train --engine ring --peers --procs 2 --steps 5 --warmup-steps 1 --batch 64 "
             "--bucket-mb 1 --json %s", g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "harness train --peers failed:\n%s", out);
    cr_expect_eq(count_lines(json, "\"engine\": \"torch-ddp-gloo\""), 1, "%s", out);
    cr_expect_eq(count_lines(json, "\"in_sync\": true"), 1, "DDP keeps its ranks identical");
    cr_expect(count_lines(json, "\"local_batch\": 32,") >= 2, "the global batch split over 2 ranks (ring, torch)");
    cr_expect(count_lines(json, "\"bucket_mb\": 1") >= 2, "bucket_cap_mb from --bucket-mb");
    unlink(json);
}
