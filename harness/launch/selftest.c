/* selftest.c: the `harness selftest` mode: each launched rank reports its environment, then fails,
 * hangs or sleeps as SYNCBENCH_SELFTEST_* asks, so the launcher's stop and cleanup paths can be
 * tested without any network or engine. */
#include "harness/launch/launch.h"
#include "core/err.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Parse a whole non-negative decimal number; -1 when malformed or too large. */
static long s_num(const char *s, const char *end)
{
    if (s == end) return -1;
    long v = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
        if (v > 1000000000L) return -1;
    }
    return v;
}

static void s_sleep_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) < 0 && errno == EINTR) {}
}

static const char *s_env(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "?";
}

int h_selftest(int rank, int world)
{
    const char *er = getenv("RANK"), *ew = getenv("WORLD_SIZE");
    if ((er && s_num(er, er + strlen(er)) != rank) || (ew && s_num(ew, ew + strlen(ew)) != world) ||
        rank < 0 || rank >= world) {
        fprintf(stderr, "selftest: rank %d of %d disagrees with RANK=%s WORLD_SIZE=%s\n", rank, world,
                er ? er : "(unset)", ew ? ew : "(unset)");
        return ERR_INVAL;
    }
    long fail_rank = -1, fail_code = 1, hang_rank = -1, sleep_ms = 30000;
    const char *f = getenv("SYNCBENCH_SELFTEST_FAIL");
    if (f && *f) {
        const char *colon = strchr(f, ':');
        fail_rank = s_num(f, colon ? colon : f + strlen(f));
        if (colon) fail_code = s_num(colon + 1, colon + 1 + strlen(colon + 1));
        if (fail_rank < 0 || fail_code < 0 || fail_code > 255) {
            fprintf(stderr, "selftest: SYNCBENCH_SELFTEST_FAIL='%s' is not RANK[:CODE] (code 0..255)\n", f);
            return ERR_INVAL;
        }
    }
    const char *h = getenv("SYNCBENCH_SELFTEST_HANG");
    if (h && *h && (hang_rank = s_num(h, h + strlen(h))) < 0) {
        fprintf(stderr, "selftest: SYNCBENCH_SELFTEST_HANG='%s' is not a rank\n", h);
        return ERR_INVAL;
    }
    const char *sl = getenv("SYNCBENCH_SELFTEST_SLEEP_MS");
    if (sl && *sl && (sleep_ms = s_num(sl, sl + strlen(sl))) < 0) {
        fprintf(stderr, "selftest: SYNCBENCH_SELFTEST_SLEEP_MS='%s' is not a number of ms\n", sl);
        return ERR_INVAL;
    }

    printf("selftest: rank %d/%d started (local %s/%s, node %s, master %s:%s, job %s)\n", rank, world,
           s_env("LOCAL_RANK"), s_env("LOCAL_WORLD_SIZE"), s_env("GROUP_RANK"), s_env("MASTER_ADDR"),
           s_env("MASTER_PORT"), s_env("SYNCBENCH_JOB"));
    fflush(stdout);

    if (rank == fail_rank) {
        s_sleep_ms(200);
        char why[64];
        snprintf(why, sizeof why, "selftest: rank %d failing on purpose", rank);
        fflush(stdout);
        h_say_error(why); /* as a rank's error is said (main.c), so the launcher tests see it said once */
        exit((int)fail_code);
    }
    if (rank == hang_rank) {                  /* a stuck rank: only SIGKILL ends it */
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        for (;;) pause();
    }
    s_sleep_ms(sleep_ms);
    printf("selftest: rank %d done\n", rank);
    fflush(stdout);
    return 0;
}
