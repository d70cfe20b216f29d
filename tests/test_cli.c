/* test_cli.c: the harness command line as its users meet it (issue 32, section 4): a misspelt flag's
 * "did you mean", a torchrun-style environment that is half set, each mode's --help, nccl-tests' spellings. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* A misspelt long flag names the option it most likely meant, once, in the one error line; a word near
 * nothing gets no guess. */
Test(cli, misspelt_flag_says_did_you_mean, .timeout = 30)
{
    s_find();
    static const struct { const char *typed, *meant; } cases[] = {
        {"--procss 2", "--procs"},          /* one letter too many */
        {"--warmpu 3", "--warmup"},         /* two letters swapped */
        {"--sizez 4K", "--sizes"},          /* one letter wrong */
        {"--Procs 2", "--procs"},           /* case */
        {"--stpes=3", "--steps"},           /* with =VALUE */
        {"--ring-algp ring", "--ring-algo"}, /* an engine's own option */
    };
    char cmd[2048], out[8192], want[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s bench %s", g_harness, cases[i].typed);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", cases[i].typed, out);
        snprintf(want, sizeof want, "did you mean %s?", cases[i].meant);
        cr_expect_eq(s_count(out, want), 1, "%s: want '%s' once:\n%s", cases[i].typed, want, out);
        cr_expect_eq(s_count(out, "unknown option"), 1, "%s: the error is printed once:\n%s", cases[i].typed, out);
    }
    snprintf(cmd, sizeof cmd, "%s bench --bogus", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "unknown option '--bogus'") && !strstr(out, "did you mean"), "%s", out);
    /* the driver's own options (set on a rank's command line) are never suggested */
    snprintf(cmd, sizeof cmd, "%s bench --as-rnk", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(!strstr(out, "--as-rank"), "%s", out);
}
