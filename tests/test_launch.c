/* test_launch.c: the launcher end to end: runs the built harness (../harness next to this test binary)
 * in `selftest` mode with --procs, and checks exit codes, the output relay, the failure line, the
 * stop on a failing / hanging / stopped (SIGSTOP) rank, on SIGINT / SIGTERM / a killed launcher, and
 * that no process of the job (found by SYNCBENCH_JOB in /proc/PID/environ) is ever left behind. */
#include "harness/launch/launch.h"
#include "tests/lib/ranks.h"
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;


typedef struct {
    pid_t pid;
    char  job[64];
    char  out_path[64], err_path[64];
    long long t0;
    int   status;
} s_run_t;

static long long s_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void s_harness_path(char *out, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0, "readlink /proc/self/exe");
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    cr_assert(slash);
    *slash = '\0';
    int w = snprintf(out, len, "%.*s/../harness", (int)(sizeof self - 16), self);
    cr_assert(w > 0 && (size_t)w < len, "path too long");
    struct stat st;
    cr_assert(stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0,
              "the harness program %s is missing or not a program: build it first (make)", out);
}

/* Count processes whose environment holds SYNCBENCH_JOB=job (and, if need, need too), skipping skip. */
static int s_count_job(const char *job, const char *need, pid_t skip, pid_t *found, int nfound)
{
    char want[128];
    int wl = snprintf(want, sizeof want, "SYNCBENCH_JOB=%s", job);
    DIR *d = opendir("/proc");
    cr_assert(d);
    int count = 0;
    struct dirent *e;
    static char buf[1 << 17];
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == skip) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = '\0';
        int has_job = 0, has_need = need == NULL;
        for (ssize_t off = 0; off < n; off += (ssize_t)strlen(buf + off) + 1) {
            if (!strcmp(buf + off, want) && wl > 0) has_job = 1;
            if (need && !strcmp(buf + off, need)) has_need = 1;
        }
        if (has_job && has_need) {
            if (count < nfound) found[count] = (pid_t)pid;
            count++;
        }
    }
    closedir(d);
    return count;
}

static void s_kill_job(const char *job)
{
    pid_t pids[64];
    int n = s_count_job(job, NULL, 0, pids, 64);
    for (int i = 0; i < n && i < 64; i++) kill(pids[i], SIGKILL);
}

/* Start `harness selftest --procs N [extra args]` with SYNCBENCH_SELFTEST_* (and SYNCBENCH_JOB) set. */
static void s_start(s_run_t *run, const char *const *env_add, const char *const *args)
{
    static int counter;
    char harness[PATH_MAX];
    s_harness_path(harness, sizeof harness);
    snprintf(run->job, sizeof run->job, "tl-%d-%d-%lld", (int)getpid(), ++counter, s_now_ms());
    snprintf(run->out_path, sizeof run->out_path, "/tmp/sb-launch-out-XXXXXX");
    snprintf(run->err_path, sizeof run->err_path, "/tmp/sb-launch-err-XXXXXX");
    int ofd = mkstemp(run->out_path), efd = mkstemp(run->err_path);
    cr_assert(ofd >= 0 && efd >= 0);

    size_t ne = 0;
    for (char **e = environ; *e; e++) ne++;
    char **envp = calloc(ne + 16, sizeof *envp);
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "SYNCBENCH_", 10) && strncmp(*e, "RANK=", 5) && strncmp(*e, "WORLD_SIZE=", 11) &&
            strncmp(*e, "LOCAL_RANK=", 11) && strncmp(*e, "LOCAL_WORLD_SIZE=", 17))
            envp[k++] = *e;
    static char jobkv[96];
    snprintf(jobkv, sizeof jobkv, "SYNCBENCH_JOB=%s", run->job);
    envp[k++] = jobkv;
    for (int i = 0; env_add && env_add[i]; i++) envp[k++] = (char *)env_add[i];
    envp[k] = NULL;

    const char *argv[32];
    int a = 0;
    argv[a++] = harness;
    for (int i = 0; args[i] && a < 31; i++) argv[a++] = args[i];
    argv[a] = NULL;

    fflush(NULL);
    run->t0 = s_now_ms();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(ofd, 1);
        dup2(efd, 2);
        execve(harness, (char **)argv, envp);
        _exit(127);
    }
    close(ofd);
    close(efd);
    free(envp);
    run->pid = pid;
}

/* Wait for the launcher up to timeout_ms; returns its elapsed ms, or -1 on timeout (then it and every
 * process of the job are SIGKILLed). */
static long long s_wait(s_run_t *run, int timeout_ms)
{
    for (;;) {
        pid_t p = waitpid(run->pid, &run->status, WNOHANG);
        if (p == run->pid) return s_now_ms() - run->t0;
        if (s_now_ms() - run->t0 > timeout_ms) {
            kill(run->pid, SIGKILL);
            waitpid(run->pid, &run->status, 0);
            s_kill_job(run->job);
            return -1;
        }
        usleep(10000);
    }
}

/* Processes of the job still alive, polled for up to 500 ms (a leftover would still be there). */
static int s_leftovers(const s_run_t *run)
{
    int n = 0;
    for (int i = 0; i < 50; i++) {
        n = s_count_job(run->job, NULL, 0, NULL, 0);
        if (n == 0) return 0;
        usleep(10000);
    }
    s_kill_job(run->job);
    return n;
}

static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

static void s_done(s_run_t *run)
{
    unlink(run->out_path);
    unlink(run->err_path);
}

/* Wait until the launcher has started n ranks (exec'd: SYNCBENCH_LAUNCHED=1 in their environment). */
static int s_wait_ranks(const s_run_t *run, int n, int timeout_ms, pid_t *pids)
{
    long long t = s_now_ms();
    while (s_now_ms() - t < timeout_ms) {
        if (s_count_job(run->job, "SYNCBENCH_LAUNCHED=1", run->pid, pids, n) >= n) return 1;
        usleep(10000);
    }
    return 0;
}

Test(launch, four_ranks_succeed, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_SLEEP_MS=100", NULL};
    const char *args[] = {"selftest", "--procs", "4", NULL};
    s_start(&run, env, args);
    long long ms = s_wait(&run, 15000);
    cr_assert(ms >= 0, "launcher did not finish");
    char *out = s_slurp(run.out_path), *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0, "status %d, stderr:\n%s", run.status, err);
    /* rank 0's stdout unchanged, nothing else on stdout */
    char want[256];
    snprintf(want, sizeof want, "selftest: rank 0/4 started (local 0/4, node 0, master 127.0.0.1:");
    cr_assert(!strncmp(out, want, strlen(want)), "stdout:\n%s", out);
    cr_assert(strstr(out, "selftest: rank 0 done\n"), "stdout:\n%s", out);
    cr_assert(!strstr(out, "[rank"), "stdout has prefixed lines:\n%s", out);
    /* other ranks prefixed on stderr, with their environment */
    for (int r = 1; r < 4; r++) {
        snprintf(want, sizeof want, "[rank %d] selftest: rank %d/4 started (local %d/4, node 0, master 127.0.0.1:", r, r, r);
        cr_assert(strstr(err, want), "missing '%s' in stderr:\n%s", want, err);
        snprintf(want, sizeof want, "[rank %d] selftest: rank %d done\n", r, r);
        cr_assert(strstr(err, want), "missing '%s' in stderr:\n%s", want, err);
    }
    snprintf(want, sizeof want, "job %s)", run.job);
    cr_assert(strstr(out, want), "the rank did not get SYNCBENCH_JOB=%s:\n%s", run.job, out);
    cr_assert_eq(s_leftovers(&run), 0);
    free(out); free(err);
    s_done(&run);
}

Test(launch, rank_fails_stops_all_fast, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_FAIL=2", NULL};   /* the others sleep 30 s */
    const char *args[] = {"selftest", "--procs", "4", NULL};
    s_start(&run, env, args);
    long long ms = s_wait(&run, 10000);
    cr_assert(ms >= 0, "launcher still running after 10 s: the failure did not stop the job");
    char *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1, "status %d", run.status);
    cr_assert_lt(ms, 5000, "took %lld ms", ms);
    cr_assert(strstr(err, "ranks: rank 2 failed (exit 1): selftest: rank 2 failing on purpose\n"),
              "stderr:\n%s", err);
    cr_assert_eq(count_in(err, "failing on purpose"), 1, "the rank's error is said once, in the failure line:\n%s", err);
    cr_assert_eq(s_leftovers(&run), 0, "processes of the job left behind");
    free(err);
    s_done(&run);
}

Test(launch, exit_code_reported, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_FAIL=1:7", NULL};
    const char *args[] = {"selftest", "--procs", "3", NULL};
    s_start(&run, env, args);
    cr_assert(s_wait(&run, 10000) >= 0);
    char *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1, "status %d", run.status);
    cr_assert(strstr(err, "ranks: rank 1 failed (exit 7): selftest: rank 1 failing on purpose\n"), "stderr:\n%s", err);
    cr_assert_eq(s_leftovers(&run), 0);
    free(err);
    s_done(&run);
}

Test(launch, hanging_and_failing_rank_cleaned_up, .timeout = 20)
{
    s_run_t run;
    /* rank 1 ignores SIGTERM: only the SIGKILL after the grace period ends it */
    const char *env[] = {"SYNCBENCH_SELFTEST_FAIL=3", "SYNCBENCH_SELFTEST_HANG=1", NULL};
    const char *args[] = {"selftest", "--procs", "4", NULL};
    s_start(&run, env, args);
    long long ms = s_wait(&run, 12000);
    cr_assert(ms >= 0, "launcher still running after 12 s");
    char *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1, "status %d", run.status);
    cr_assert(strstr(err, "ranks: rank 3 failed (exit 1): selftest: rank 3 failing on purpose\n"), "stderr:\n%s", err);
    cr_assert_geq(ms, 1900, "finished in %lld ms: the grace period was skipped", ms);
    cr_assert_lt(ms, 8000, "took %lld ms", ms);
    cr_assert_eq(s_leftovers(&run), 0, "processes of the job left behind");
    free(err);
    s_done(&run);
}

Test(launch, rank_killed_by_signal, .timeout = 20)
{
    s_run_t run;
    const char *args[] = {"selftest", "--procs", "3", NULL};
    s_start(&run, NULL, args);
    pid_t pids[3];
    cr_assert(s_wait_ranks(&run, 3, 5000, pids), "ranks did not start");
    /* find rank 1 and kill it */
    pid_t r1[1];
    cr_assert_eq(s_count_job(run.job, "RANK=1", run.pid, r1, 1), 1);
    kill(r1[0], SIGKILL);
    long long ms = s_wait(&run, 10000);
    cr_assert(ms >= 0 && ms < 8000, "launcher took %lld ms", ms);
    char *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1, "status %d", run.status);
    cr_assert(strstr(err, "harness: selftest with engine ring at 3 ranks: rank 1 failed (killed by signal 9)"), "stderr:\n%s",
              err);
    cr_assert_eq(s_leftovers(&run), 0);
    free(err);
    s_done(&run);
}

Test(launch, sigint_stops_all, .timeout = 20)
{
    s_run_t run;
    const char *args[] = {"selftest", "--procs", "4", NULL};
    s_start(&run, NULL, args);
    pid_t pids[4];
    cr_assert(s_wait_ranks(&run, 4, 5000, pids), "ranks did not start");
    kill(run.pid, SIGINT);
    long long t = s_now_ms();
    cr_assert(s_wait(&run, 10000) >= 0);
    cr_assert_lt(s_now_ms() - t, 5000);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 130, "status %d", run.status);
    char *err = s_slurp(run.err_path); /* Ctrl-C is an interruption, said once, not a failure */
    cr_expect(strstr(err, "harness: selftest with engine ring at 4 ranks interrupted (Interrupt)\n") && !strstr(err, "failed"),
              "stderr:\n%s", err);
    free(err);
    cr_assert_eq(s_leftovers(&run), 0, "processes of the job left behind");
    for (int i = 0; i < 4; i++) cr_assert(kill(pids[i], 0) < 0 && errno == ESRCH, "rank pid %d alive", (int)pids[i]);
    s_done(&run);
}

Test(launch, sigterm_with_hanging_rank, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_HANG=0", NULL};
    const char *args[] = {"selftest", "--procs", "2", NULL};
    s_start(&run, env, args);
    pid_t pids[2];
    cr_assert(s_wait_ranks(&run, 2, 5000, pids), "ranks did not start");
    usleep(100000);                                    /* let rank 0 reach its SIGTERM-ignoring hang */
    kill(run.pid, SIGTERM);
    cr_assert(s_wait(&run, 10000) >= 0);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 143, "status %d", run.status);
    cr_assert_eq(s_leftovers(&run), 0, "processes of the job left behind");
    s_done(&run);
}

Test(launch, killed_launcher_leaves_nothing, .timeout = 20)
{
    s_run_t run;
    const char *args[] = {"selftest", "--procs", "3", NULL};
    s_start(&run, NULL, args);
    pid_t pids[3];
    cr_assert(s_wait_ranks(&run, 3, 5000, pids), "ranks did not start");
    kill(run.pid, SIGKILL);                            /* no cleanup possible: PDEATHSIG must do it */
    waitpid(run.pid, &run.status, 0);
    cr_assert_eq(s_leftovers(&run), 0, "ranks outlived a SIGKILLed launcher");
    s_done(&run);
}

Test(launch, multi_node_ranks, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_SLEEP_MS=50", NULL};
    const char *args[] = {"selftest", "--procs", "2", "--nnodes", "2", "--node-rank", "1",
                          "--master", "127.0.0.1:29999", NULL};
    s_start(&run, env, args);
    cr_assert(s_wait(&run, 10000) >= 0);
    char *out = s_slurp(run.out_path), *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0, "status %d, stderr:\n%s", run.status, err);
    cr_assert_str_empty(out, "global rank 0 is not on this node, yet stdout has:\n%s", out);
    cr_assert(strstr(err, "[rank 2] selftest: rank 2/4 started (local 0/2, node 1, master 127.0.0.1:29999,"), "stderr:\n%s", err);
    cr_assert(strstr(err, "[rank 3] selftest: rank 3/4 started (local 1/2, node 1, master 127.0.0.1:29999,"), "stderr:\n%s", err);
    cr_assert(!strstr(err, "[rank 0]") && !strstr(err, "[rank 1]"), "stderr:\n%s", err);
    free(out); free(err);
    s_done(&run);
}

/* The NUL-separated file /proc/PID/NAME into buf (NULs kept); its length, or -1. */
static ssize_t s_proc_file(pid_t pid, const char *name, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n >= 0) buf[n] = '\0';
    return n;
}

/* The value of SYNCBENCH_JOB_SECRET in pid's environment into out ("" when absent). */
static void s_secret_of(pid_t pid, char *out, size_t len)
{
    static char buf[1 << 17];
    ssize_t n = s_proc_file(pid, "environ", buf, sizeof buf);
    out[0] = '\0';
    for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(buf + off) + 1)
        if (!strncmp(buf + off, "SYNCBENCH_JOB_SECRET=", 21)) snprintf(out, len, "%s", buf + off + 21);
}

/* memmem over a NUL-separated buffer */
static int s_has(const char *buf, ssize_t n, const char *needle)
{
    size_t l = strlen(needle);
    for (ssize_t i = 0; n > 0 && i + (ssize_t)l <= n; i++)
        if (!memcmp(buf + i, needle, l)) return 1;
    return 0;
}

Test(launch, ranks_get_a_secret_in_their_environment_only, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_SLEEP_MS=1500", NULL};
    const char *args[] = {"selftest", "--procs", "2", NULL};
    s_start(&run, env, args);
    pid_t pids[2];
    cr_assert(s_wait_ranks(&run, 2, 5000, pids), "ranks did not start");
    char s0[200], s1[200], mine[200];
    s_secret_of(pids[0], s0, sizeof s0);
    s_secret_of(pids[1], s1, sizeof s1);
    s_secret_of(run.pid, mine, sizeof mine);
    cr_expect_eq(strlen(s0), 64, "rank environment has no 256-bit SYNCBENCH_JOB_SECRET: '%s'", s0);
    cr_expect_str_eq(s0, s1, "the ranks of one job have different secrets");
    cr_expect_str_empty(mine, "the launcher's own environment holds the secret");
    static char buf[1 << 16];
    pid_t who[3] = {pids[0], pids[1], run.pid};
    for (int i = 0; i < 3 && s0[0]; i++) {
        ssize_t n = s_proc_file(who[i], "cmdline", buf, sizeof buf);
        cr_expect(n > 0 && !s_has(buf, n, s0), "the secret is on the command line of pid %d", (int)who[i]);
    }
    cr_assert(s_wait(&run, 15000) >= 0);
    cr_expect(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0);
    /* a second launch gets another secret */
    s_run_t again;
    s_start(&again, env, args);
    cr_assert(s_wait_ranks(&again, 2, 5000, pids), "ranks did not start");
    s_secret_of(pids[0], s1, sizeof s1);
    cr_expect(strlen(s1) == 64 && strcmp(s0, s1), "two launches share a secret");
    cr_assert(s_wait(&again, 15000) >= 0);
    s_done(&run);
    s_done(&again);
}

Test(launch, multi_node_require_auth_needs_a_secret, .timeout = 20)
{
    s_run_t run;
    const char *env[] = {"SYNCBENCH_SELFTEST_SLEEP_MS=50", NULL};
    const char *args[] = {"selftest", "--procs", "1", "--nnodes", "2", "--node-rank", "1",
                          "--master", "127.0.0.1:29999", "--require-auth", NULL};
    s_start(&run, env, args);
    cr_assert(s_wait(&run, 10000) >= 0);
    char *err = s_slurp(run.err_path);
    cr_expect(WIFEXITED(run.status) && WEXITSTATUS(run.status) != 0, "launched without a secret:\n%s", err);
    cr_expect(strstr(err, "SYNCBENCH_JOB_SECRET") && !strstr(err, "selftest: rank"), "stderr:\n%s", err);
    free(err);
    s_done(&run);
    /* with one in the environment, every node's ranks get that one */
    static const char hex[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    const char *env2[] = {"SYNCBENCH_SELFTEST_SLEEP_MS=1500", "SYNCBENCH_JOB_SECRET=" "00112233445566778899aabbccddeeff"
                          "00112233445566778899aabbccddeeff", NULL};
    s_start(&run, env2, args);
    pid_t pid;
    cr_assert(s_wait_ranks(&run, 1, 5000, &pid), "ranks did not start");
    char s[200];
    s_secret_of(pid, s, sizeof s);
    cr_expect_str_eq(s, hex);
    cr_assert(s_wait(&run, 10000) >= 0);
    cr_expect(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0);
    s_done(&run);
}

/* The RANK in pid's environment, or -1. */
static int s_rank_of(pid_t pid)
{
    static char buf[1 << 17];
    ssize_t n = s_proc_file(pid, "environ", buf, sizeof buf);
    for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(buf + off) + 1)
        if (!strncmp(buf + off, "RANK=", 5)) return atoi(buf + off + 5);
    return -1;
}

/* A rank stopped with SIGSTOP: its peer gives up after --timeout and leaves at once (no final barrier,
 * no waiting for the stopped rank to leave the store), and the launcher names the stopped rank. */
Test(launch, stopped_rank_is_named_and_the_survivor_leaves_fast, .timeout = 40)
{
    s_run_t run;
    /* 1 MiB a round: a million rounds outlast the test on any machine (4 KiB ones, one-shot, could all be
     * done within the 1.5 s below on a fast one, and the job was gone before its rank could be stopped) */
    const char *args[] = {"bench", "--engine", "ring", "--procs", "2", "--sizes", "1M", "--iters", "1000000",
                          "--timeout", "3", NULL};
    s_start(&run, NULL, args);
    pid_t pids[2];
    cr_assert(s_wait_ranks(&run, 2, 5000, pids), "ranks did not start");
    usleep(1500000); /* joined and running */
    pid_t victim = s_rank_of(pids[0]) == 1 ? pids[0] : pids[1];
    cr_assert_eq(s_rank_of(victim), 1);
    long long t0 = s_now_ms();
    kill(victim, SIGSTOP);
    cr_assert(s_wait(&run, 30000) >= 0, "launcher did not finish");
    long long ms = s_now_ms() - t0;
    char *err = s_slurp(run.err_path);
    cr_expect(WIFEXITED(run.status) && WEXITSTATUS(run.status) != 0, "status %d:\n%s", run.status, err);
    cr_expect(strstr(err, "rank 1 was stopped") != NULL, "the stopped rank is not named:\n%s", err);
    /* the launcher's limit at --timeout 3 (1.5 s) + its 2 s grace; before it watched states: the 3 s timeout + leaving
     * at once + the grace; before that: + 5 s barrier + 3 s store wait */
    cr_expect(ms < 7500, "the job took %lld ms to end after its peer stopped:\n%s", ms, err);
    cr_expect_eq(s_leftovers(&run), 0);
    free(err);
    s_done(&run);
}

/* A rank stopped under a long timeout: the launcher, reading its state, ends the job at 10 s (half of --timeout,
 * at most 10 s), naming it, instead of the peer's timeout (40 s here). Ring and tree alike. */
static void s_stopped_under_long_timeout(const char *engine)
{
    s_run_t run;
    const char *args[] = {"bench", "--engine", engine, "--procs", "2", "--sizes", "1M", "--iters", "1000000",
                          "--timeout", "40", NULL};
    s_start(&run, NULL, args);
    pid_t pids[2];
    cr_assert(s_wait_ranks(&run, 2, 5000, pids), "ranks did not start");
    usleep(1500000);
    pid_t victim = s_rank_of(pids[0]) == 1 ? pids[0] : pids[1];
    cr_assert_eq(s_rank_of(victim), 1);
    long long t0 = s_now_ms();
    kill(victim, SIGSTOP);
    cr_assert(s_wait(&run, 25000) >= 0, "launcher did not finish within 25 s (the peer's timeout is 40 s)");
    long long ms = s_now_ms() - t0;
    char *err = s_slurp(run.err_path);
    cr_expect(WIFEXITED(run.status) && WEXITSTATUS(run.status) != 0, "status %d:\n%s", run.status, err);
    cr_expect(strstr(err, "rank 1 was stopped") && strstr(err, "limit of 10000 ms"), "not named:\n%s", err);
    /* the limit, then SIGTERM with SIGCONT and the 2 s grace */
    cr_expect(ms >= 9800 && ms < 14000, "the job ended %lld ms after its rank stopped (limit 10000 ms):\n%s", ms, err);
    cr_expect_eq(s_leftovers(&run), 0);
    free(err);
    s_done(&run);
}

Test(launch, stopped_ring_rank_is_named_before_the_timeout, .timeout = 40) { s_stopped_under_long_timeout("ring"); }
Test(launch, stopped_tree_rank_is_named_before_the_timeout, .timeout = 40) { s_stopped_under_long_timeout("tree"); }

/* A rank's error found mid-run is said once, in the launcher's failure line, not also relayed as "[rank R] ...":
 * rank 1 sleeps 4 s a step (alive, its threads running, its main thread stuck: what heartbeats cannot tell from a
 * long step), so rank 0 times out (--timeout 2) waiting for it, and names it (it said only "step did not finish"). */
Test(launch, a_rank_error_mid_run_is_said_once, .timeout = 40)
{
    s_run_t run;
    const char *args[] = {"train", "--procs", "2", "--steps", "20", "--straggler", "1:4000", "--timeout", "2", NULL};
    s_start(&run, NULL, args);
    cr_assert(s_wait(&run, 30000) >= 0, "launcher still running after 30 s");
    char *err = s_slurp(run.err_path);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1, "status %d, stderr:\n%s", run.status, err);
    cr_assert(strstr(err, "harness: train with engine ring at 2 ranks: rank 0 failed (exit 1): train failed: timed out"),
              "stderr:\n%s", err);
    cr_assert(strstr(err, ": waiting on rank 1 for "), "the rank waited on is not named:\n%s", err);
    cr_assert_eq(count_in(err, "did not finish within"), 1, "said more than once:\n%s", err);
    cr_assert(!strstr(err, H_ERROR_TAG), "the launcher's tag leaked:\n%s", err);
    cr_assert_eq(s_leftovers(&run), 0);
    free(err);
    s_done(&run);
}

/* The same error on every rank (a data file that is not one) is said once. */
Test(launch, the_same_error_on_every_rank_is_said_once, .timeout = 40)
{
    char data[] = "/tmp/sb-launch-data-XXXXXX";
    int fd = mkstemp(data);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "not a data set\n", 15), 15);
    close(fd);
    s_run_t run;
    const char *args[] = {"train", "--procs", "3", "--batch", "24", "--steps", "3", "--data", data, NULL};
    s_start(&run, NULL, args);
    cr_assert(s_wait(&run, 30000) >= 0, "launcher still running after 30 s");
    char *err = s_slurp(run.err_path);
    unlink(data);
    cr_assert(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1, "status %d, stderr:\n%s", run.status, err);
    cr_assert(strstr(err, "ranks: rank ") && strstr(err, "failed (exit 1): train failed: "), "stderr:\n%s", err);
    cr_assert_eq(count_in(err, data), 1, "said more than once:\n%s", err);
    cr_assert(!strstr(err, H_ERROR_TAG), "the launcher's tag leaked:\n%s", err);
    cr_assert_eq(s_leftovers(&run), 0);
    free(err);
    s_done(&run);
}
