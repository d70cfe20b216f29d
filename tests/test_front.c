/* test_front.c: what the harness's outputs say to a newcomer (issue 32, sections 2 to 4): train of several
 * engines ends side by side with a verdict, oversubscription warned once and long runs show progress,
 * emulated progress lines carry no made-up loss, a global batch the workers cannot share is caught before
 * launch. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/lib/ranks.h"

static char g_harness[512];

static void s_find(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
}

/* how many times needle occurs in hay */
static int s_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* `train --engine ring,ps` printed one table per engine and stopped: it ends with the engines side by side
 * (report's table) and run's verdict line naming the leader, from this run's lines only (a --json file's
 * earlier runs stay out of it), emulated or not. */
Test(front, train_of_engines_ends_side_by_side_with_a_verdict, .timeout = 180)
{
    s_find();
    char dir[] = "/tmp/sb-front-XXXXXX", cmd[2048], out[1 << 16], json[600];
    cr_assert(mkdtemp(dir));
    snprintf(json, sizeof json, "%s/r.jsonl", dir);
    /* an earlier run in the file: a tree train line */
    snprintf(cmd, sizeof cmd, "%s train --engine tree --procs 2 --steps 2 --warmup-steps 0 --model mlp:784-32-10 --quiet "
             "--json %s", g_harness, json);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(s_count(out, "side by side"), 0, "one engine: no side-by-side:\n%s", out);
    static const char *const how[] = {"--procs 2 --model mlp:784-32-10", "--procs 2 --model mlp:784-32-10 --json FILE",
                                      "--nodes 2 --gpus-per-node 1 --model resnet50 --shrink 100"};
    for (int i = 0; i < 3; i++) {
        char args[700];
        snprintf(args, sizeof args, "%s", how[i]);
        char *f = strstr(args, "FILE");
        if (f) snprintf(f, sizeof args - (size_t)(f - args), "%s", json);
        snprintf(cmd, sizeof cmd, "%s train --engine ring,ps %s --steps 2 --warmup-steps 0 --quiet", g_harness, args);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s\n%s", args, out);
        const char *side = strstr(out, "# syncbench train: the engines side by side");
        cr_assert(side, "%s: no side-by-side table:\n%s", args, out);
        cr_expect_eq(s_count(out, "the engines side by side"), 1, "%s", out);
        /* the table after it has both engines, and only this run's (no tree from the file's earlier run) */
        cr_expect(strstr(side, "\n  ring") && strstr(side, "\n  ps-sync-servers1"), "%s:\n%s", args, side);
        cr_expect(!strstr(side, "tree"), "%s: an earlier run in the side-by-side:\n%s", args, side);
        const char *v = strstr(side, "\n# verdict: ");
        cr_assert(v, "%s: no verdict:\n%s", args, side);
        cr_expect(!strncmp(v, "\n# verdict: ring leads", 22) || !strncmp(v, "\n# verdict: ps-sync-servers1 leads", 34),
                  "%s: the verdict names the leader:\n%s", args, v);
        cr_expect(strstr(v, "one round: no spread"), "%s: one run is said to be one:\n%s", args, v);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
