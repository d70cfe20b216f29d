/* test_harness_hand.c: the harness's ranks started by hand, as srun, mpirun and torchrun users start them: the
 * init methods (tcp://, file://, env://), ranks that disagree on options or world size, an unreachable master,
 * --require-auth without a secret, and a rank holding another job secret. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "core/port.h"

static char g_harness[512];

static void s_find(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
}

/* Two ranks started by hand with an init method, as srun/mpirun/torchrun users do; args[r]: rank r's
 * mode and options (NULL: a short ring bench). */
static int s_two_ranks_args(const char *method, const char *w0, const char *w1, char *out0, char *out1, size_t len,
                            double *secs, int timeout_s, const char *const args[2])
{
    char cmd[2][2048];
    const char *w[2] = {w0, w1};
    int port = port_free_loopback();
    for (int r = 0; r < 2; r++) {
        char m[512];
        if (!strcmp(method, "tcp")) snprintf(m, sizeof m, "--init-method tcp://127.0.0.1:%d", port);
        else if (!strcmp(method, "file")) snprintf(m, sizeof m, "--init-method file:///tmp/sb-file-%d", port);
        else snprintf(m, sizeof m, " ");
        snprintf(cmd[r], sizeof cmd[r],
                 "env -u SYNCBENCH_JOB -u SYNCBENCH_LAUNCHED RANK=%d WORLD_SIZE=%s MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
                 "%s %s --timeout %d %s", r, w[r], port, g_harness,
                 args && args[r] ? args[r] : "bench --engine ring --sizes 64K --iters 2", timeout_s, m);
    }
    char script[5000];
    char f0[] = "/tmp/sb-o0-XXXXXX", f1[] = "/tmp/sb-o1-XXXXXX";
    close(mkstemp(f0));
    close(mkstemp(f1));
    snprintf(script, sizeof script, "(%s) >%s 2>&1 & p=$!; (%s) >%s 2>&1; b=$?; wait $p; a=$?; exit $((a*16+b))",
             cmd[0], f0, cmd[1], f1);
    char dummy[256];
    int rc = run_cmd_timed(script, dummy, sizeof dummy, secs);
    FILE *f = fopen(f0, "r");
    size_t n = f ? fread(out0, 1, len - 1, f) : 0;
    out0[n] = '\0';
    if (f) fclose(f);
    f = fopen(f1, "r");
    n = f ? fread(out1, 1, len - 1, f) : 0;
    out1[n] = '\0';
    if (f) fclose(f);
    unlink(f0);
    unlink(f1);
    return rc;
}

static int s_two_ranks(const char *method, const char *w0, const char *w1, char *out0, char *out1, size_t len,
                       double *secs, int timeout_s)
{
    return s_two_ranks_args(method, w0, w1, out0, out1, len, secs, timeout_s, NULL);
}

/* Issue 33 section 3: two env-started PS ranks that differ in the learning rate, then in --steps, then in
 * --steps and an engine's own option, fail both, at once, naming every option that differs and the ranks
 * (before: exit 0 with different results, and a 15 s allgather timeout) */
Test(harness, ranks_that_disagree_on_options_fail_together, .timeout = 120)
{
    s_find();
    static char o0[1 << 15], o1[1 << 15];
    const char *lr[2] = {"train --engine ps --steps 10 --optim sgd:lr=0.1", "train --engine ps --steps 10 --optim sgd:lr=0.2"};
    const char *st[2] = {"train --engine ps --steps 10", "train --engine ps --steps 30"};
    const char *eo[2] = {"train --engine ps --steps 10 --ps-partition-kb 64", "train --engine ps --steps 20 --ps-partition-kb 128"};
    const char *const *cases[3] = {lr, st, eo};
    const char *want[3][2] = {{"disagree on 1 option: --optim (rank 0: sgd:lr=0.1; rank 1: sgd:lr=0.2)",
                               "disagree on 1 option: --optim (rank 1: sgd:lr=0.2; rank 0: sgd:lr=0.1)"},
                              {"disagree on 1 option: --steps (rank 0: 10; rank 1: 30)",
                               "disagree on 1 option: --steps (rank 1: 30; rank 0: 10)"},
                              {"disagree on 2 options: --steps (rank 0: 10; rank 1: 20), --ps-partition-kb (rank 0: 64; rank 1: 128)",
                               "disagree on 2 options: --steps (rank 1: 20; rank 0: 10), --ps-partition-kb (rank 1: 128; rank 0: 64)"}};
    for (int c = 0; c < 3; c++) {
        double secs = 0;
        int rc = s_two_ranks_args("env", "2", "2", o0, o1, sizeof o0, &secs, 30, cases[c]);
        cr_expect_eq(rc, 1 * 16 + 1, "both ranks fail (case %d):\nrank 0:\n%s\nrank 1:\n%s", c, o0, o1);
        cr_expect(strstr(o0, want[c][0]), "rank 0 (case %d):\n%s", c, o0);
        cr_expect(strstr(o1, want[c][1]), "rank 1 (case %d):\n%s", c, o1);
        cr_expect_lt(secs, 15, "case %d took %.1f s", c, secs);
    }
}

Test(harness, init_methods_by_hand, .timeout = 120)
{
    s_find();
    static char o0[1 << 15], o1[1 << 15];
    const char *methods[] = {"tcp", "env", "file"};
    for (int i = 0; i < 3; i++) {
        int rc = s_two_ranks(methods[i], "2", "2", o0, o1, sizeof o0, NULL, 30);
        cr_expect_eq(rc, 0, "init method %s:\nrank 0:\n%s\nrank 1:\n%s", methods[i], o0, o1);
        cr_expect(strstr(o0, "65536") != NULL, "rank 0 printed no result row (%s):\n%s", methods[i], o0);
    }
}

Test(harness, world_sizes_that_disagree, .timeout = 60)
{
    s_find();
    static char o0[1 << 15], o1[1 << 15];
    double secs;
    int rc = s_two_ranks("tcp", "2", "3", o0, o1, sizeof o0, &secs, 5);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(o1, "world") != NULL || strstr(o1, "WORLD") != NULL, "rank 1 should say the world sizes disagree:\n%s", o1);
    cr_expect(secs < 20, "took %.1f s", secs);
}

Test(harness, unreachable_master_times_out, .timeout = 60)
{
    s_find();
    char cmd[2048], out[1 << 14];
    int port = port_free_loopback();
    snprintf(cmd, sizeof cmd,
             "env -u SYNCBENCH_JOB -u SYNCBENCH_LAUNCHED RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
             "%s bench --sizes 4K --timeout 2", port, g_harness);
    double secs;
    int rc = run_cmd_timed(cmd, out, sizeof out, &secs);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(out, "could not reach") != NULL, "%s", out);
    cr_expect(secs < 8, "took %.1f s for a 2 s timeout", secs);
}

Test(harness, require_auth_without_a_secret_fails_clearly, .timeout = 30)
{
    s_find();
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd, "env -u SYNCBENCH_JOB_SECRET -u SYNCBENCH_JOB_SECRET_FILE %s bench --engine ring "
             "--sizes 4K --iters 1 --require-auth", g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect_eq(rc, 1, "%s", out);
    cr_expect(strstr(out, "no secret and authentication is required") != NULL, "%s", out);
    /* the launcher makes one for a single node: the same command over --procs runs */
    snprintf(cmd, sizeof cmd, "env -u SYNCBENCH_JOB_SECRET -u SYNCBENCH_JOB_SECRET_FILE %s bench --engine ps --procs 2 "
             "--sizes 4K --iters 1 --require-auth", g_harness);
    rc = run_cmd(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "no secret") == NULL, "%s", out);
    /* a job of one rank has nobody to let in: no warning without --require-auth */
    snprintf(cmd, sizeof cmd, "env -u SYNCBENCH_JOB_SECRET -u SYNCBENCH_JOB_SECRET_FILE -u SYNCBENCH_REQUIRE_AUTH %s "
             "bench --engine ring --sizes 4K --iters 1", g_harness);
    rc = run_cmd(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "no secret") == NULL, "one rank warned:\n%s", out);
}

/* Two env-started ranks of one job on loopback (MASTER_PORT %d), as the two tests below start them; A and B two
 * job secrets. */
#define S_TWO_RANKS_ENV                                                                                                 \
    "E='env -u SYNCBENCH_JOB -u SYNCBENCH_LAUNCHED -u SYNCBENCH_JOB_SECRET_FILE WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "     \
    "MASTER_PORT=%d'; "
static const char *const s_secret_a = "1111111111111111111111111111111111111111111111111111111111111111",
                         *const s_secret_b = "2222222222222222222222222222222222222222222222222222222222222222";

/* Issue 33 §4: two env-started ranks with different job secrets. The joining rank is refused at once; rank 0 says
 * so at once, in one line naming the refused connections, their peer, why and the missing rank, and its join's
 * timeout (5 s here) says it again instead of only "missing: 1". The refusal does not end the join: nothing a peer
 * without the secret sends tells a misconfigured rank from an outsider (tests a_rank_restarted_... below). */
Test(harness, rank_zero_says_a_peer_failed_the_handshake, .timeout = 90)
{
    s_find();
    char cmd[4096], out[1 << 15];
    int port = port_free_loopback();
    const char *A = s_secret_a, *B = s_secret_b;
    snprintf(cmd, sizeof cmd,
             S_TWO_RANKS_ENV "$E SYNCBENCH_JOB_SECRET=%s RANK=0 %s bench --sizes 4K --iters 1 --timeout 5 > /tmp/sb-hs0.$$ 2>&1 & "
             "P0=$!; sleep 0.5; $E SYNCBENCH_JOB_SECRET=%s RANK=1 %s bench --sizes 4K --iters 1 --timeout 60 > /tmp/sb-hs1.$$ 2>&1; "
             "echo rc1=$?; sleep 1; echo '--- rank 0 after 1 s'; cat /tmp/sb-hs0.$$; echo '--- end'; wait $P0; echo rc0=$?; "
             "echo '--- rank 0'; cat /tmp/sb-hs0.$$; echo '--- rank 1'; cat /tmp/sb-hs1.$$; rm -f /tmp/sb-hs0.$$ /tmp/sb-hs1.$$",
             port, A, g_harness, B, g_harness);
    double secs;
    cr_assert_eq(run_cmd_timed(cmd, out, sizeof out, &secs), 0, "%s", out);
    cr_expect(strstr(out, "rc1=0") == NULL && strstr(out, "rc0=0") == NULL, "a rank with another secret ran:\n%s", out);
    const char *e0 = strstr(out, "--- rank 0 after 1 s"), *e1 = strstr(out, "--- end");
    const char *r0 = strstr(out, "--- rank 0\n"), *r1 = strstr(out, "--- rank 1");
    cr_assert(e0 && e1 && r0 && r1);
    char early[1 << 13], zero[1 << 14];
    snprintf(early, sizeof early, "%.*s", (int)(e1 - e0), e0);
    snprintf(zero, sizeof zero, "%.*s", (int)(r1 - r0), r0);
    cr_expect(strstr(early, "refused (wrong job secret: do all ranks share SYNCBENCH_JOB_SECRET") &&
              strstr(early, "from 127.0.0.1:") && strstr(early, "still waiting for rank(s) 1 until"),
              "within 1 s of the refusal rank 0 did not name it, its peer and the missing rank:\n%s", out);
    cr_expect(strstr(zero, "only 1 of 2 ranks joined within 5.0 s (missing: 1; ") &&
              strstr(zero, "refused (wrong job secret"), "rank 0's timeout does not name the refusal:\n%s", out);
    char own[64];
    snprintf(own, sizeof own, "127.0.0.1:%d", port);
    cr_expect(strstr(zero, own) == NULL, "rank 0 named its own endpoint as the peer:\n%s", out);
    cr_expect_eq(count_in(zero, "refused ("), 2, "the warning and the timeout, once each:\n%s", out);
    cr_expect_lt(secs, 12, "rank 0 took %.1f s (its --timeout is 5 s)", secs);
}

/* A refusal never ends the join (it once did, 2 s after, with no rank joining: anyone reaching the port could stop a
 * job while its ranks arrived): a rank refused for another secret, started again 3 s later with the right one, joins
 * and the job runs. */
Test(harness, a_rank_restarted_with_the_right_secret_joins, .timeout = 90)
{
    s_find();
    char cmd[4096], out[1 << 15];
    int port = port_free_loopback();
    const char *A = s_secret_a, *B = s_secret_b;
    snprintf(cmd, sizeof cmd,
             S_TWO_RANKS_ENV "$E SYNCBENCH_JOB_SECRET=%s RANK=0 %s bench --sizes 4K --iters 1 --timeout 60 > /tmp/sb-hr0.$$ 2>&1 & "
             "P0=$!; sleep 0.5; $E SYNCBENCH_JOB_SECRET=%s RANK=1 %s bench --sizes 4K --iters 1 --timeout 60 > /dev/null 2>&1; "
             "echo rc1=$?; sleep 3; $E SYNCBENCH_JOB_SECRET=%s RANK=1 %s bench --sizes 4K --iters 1 --timeout 60 > /tmp/sb-hr1.$$ 2>&1; "
             "echo rc1b=$?; wait $P0; echo rc0=$?; echo '--- rank 0'; cat /tmp/sb-hr0.$$; echo '--- rank 1'; cat /tmp/sb-hr1.$$; "
             "rm -f /tmp/sb-hr0.$$ /tmp/sb-hr1.$$", port, A, g_harness, B, g_harness, A, g_harness);
    double secs;
    cr_assert_eq(run_cmd_timed(cmd, out, sizeof out, &secs), 0, "%s", out);
    cr_expect(strstr(out, "rc1=1") && strstr(out, "rc1b=0") && strstr(out, "rc0=0"), "%s", out);
}
