/* test_device_check.c: scripts/device-check --dry-run --quick on CPU ranks, so the GPU check's argument
 * sets (worlds, batch, options) are proven here before device time is spent on them: every row passes,
 * the results come back as plain-named files (the table and one archive), the batch of 256 that three
 * workers cannot split is caught, and a spent time budget stops the check instead of running unbounded. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The build folder (parent of this test's folder) and the checkout holding scripts/device-check. */
static void s_paths(char *build, char *root, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0, "readlink /proc/self/exe");
    self[n] = '\0';
    for (int up = 0; up < 2; up++) {      /* BUILD/tests/test_device_check -> BUILD */
        char *slash = strrchr(self, '/');
        cr_assert(slash);
        *slash = '\0';
    }
    cr_assert(strlen(self) < len);
    snprintf(build, len, "%s", self);
    char *slash = strrchr(self, '/');      /* BUILD is a folder of the checkout (build, build-nocuda) */
    cr_assert(slash);
    *slash = '\0';
    snprintf(root, len, "%s", self);
    char script[PATH_MAX + 32];
    snprintf(script, sizeof script, "%s/scripts/device-check", root);
    if (access(script, X_OK) != 0 && getcwd(root, len)) /* a build folder elsewhere: run from the checkout */
        snprintf(script, sizeof script, "%s/scripts/device-check", root);
    cr_assert(access(script, X_OK) == 0, "no scripts/device-check next to %s", build);
}

/* Run the dry run with extra environment (e.g. "DC_BATCH=256"); returns its exit status, fills the
 * output folder and the captured table. */
static int s_dry_run(const char *env, char *out, size_t outlen, char *table, size_t tlen)
{
    char build[PATH_MAX], root[PATH_MAX];
    s_paths(build, root, sizeof build);
    snprintf(out, outlen, "/tmp/sb-dc-XXXXXX");
    cr_assert_not_null(mkdtemp(out));
    char cmd[3 * PATH_MAX + 256];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s DC_OUT='%s/out' timeout -k 5 100 scripts/device-check --dry-run --quick '%s' >'%s/stdout' 2>'%s/stderr'",
             root, env ? env : "", out, build, out, out);
    int st = system(cmd);
    cr_assert(st != -1);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/stdout", out);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t got = fread(table, 1, tlen - 1, f);
    table[got] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void s_cleanup(const char *dir)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Whether the table's row for step name has result want (PASS, FAIL, NOTRUN). */
static int s_row_is(const char *table, const char *name, const char *want)
{
    const char *line = strstr(table, name);
    if (!line) return 0;
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
    char w[32];
    snprintf(w, sizeof w, " %s ", want);
    return strstr(buf + strlen(name), w) != NULL;
}

static int s_plain(const char *name)
{
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '_' || *c == '-'))
            return 0;
    return *name != '\0';
}

Test(device_check, dry_run_rows_pass_and_results_are_plain_files, .timeout = 150)
{
    char dir[64], table[16384];
    int rc = s_dry_run(NULL, dir, sizeof dir, table, sizeof table);
    cr_assert_eq(rc, 0, "dry run failed (exit %d):\n%s", rc, table);
    cr_assert(strstr(table, "failures: 0"), "%s", table);
    cr_assert(s_row_is(table, "train tree gpu (3 on 1 GPU)", "PASS") && strstr(table, "dry: --procs 3"), "%s", table);
    cr_assert(strstr(table, "local copy"), "world-1 NCCL rows are labelled local copies:\n%s", table);
    cr_assert_null(strstr(table, " FAIL "), "%s", table);
    /* what the device tool brings back: at most 8 plain-named files, the table and one archive */
    char out[128];
    snprintf(out, sizeof out, "%s/out", dir);
    DIR *d = opendir(out);
    cr_assert_not_null(d);
    int n = 0, archive = 0, txt = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        cr_assert(s_plain(e->d_name), "name %s is not plain", e->d_name);
        archive |= !strcmp(e->d_name, "gpu-logs.tar.gz");
        txt |= !strcmp(e->d_name, "device-check.txt");
    }
    closedir(d);
    cr_assert(archive && txt && n == 2, "want device-check.txt and gpu-logs.tar.gz, found %d files", n);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tar -tzf '%s/gpu-logs.tar.gz' | grep -q 'train_tree_gpu_3_on_1_GPU.log'", out);
    cr_assert_eq(system(cmd), 0, "the archive holds each step's log under a plain name");
    s_cleanup(dir);
}

Test(device_check, dry_run_catches_a_batch_three_workers_cannot_split, .timeout = 150)
{
    char dir[64], table[16384];
    int rc = s_dry_run("DC_BATCH=256", dir, sizeof dir, table, sizeof table);
    cr_assert_neq(rc, 0, "a batch of 256 with 3 workers must fail the dry run:\n%s", table);
    cr_assert(s_row_is(table, "train tree gpu (3 on 1 GPU)", "FAIL"), "%s", table);
    cr_assert(s_row_is(table, "train ring nccl (1 GPU)", "PASS"), "one worker divides any batch:\n%s", table);
    cr_assert(s_row_is(table, "train ps (2w+1s on 1 GPU)", "PASS"), "two workers divide 256:\n%s", table);
    s_cleanup(dir);
}

Test(device_check, spent_budget_stops_instead_of_running_unbounded, .timeout = 60)
{
    char dir[64], table[16384];
    int rc = s_dry_run("DC_BUDGET_S=5", dir, sizeof dir, table, sizeof table);
    cr_assert_neq(rc, 0, "%s", table);
    cr_assert(strstr(table, "NOTRUN"), "steps after the budget are reported, not run:\n%s", table);
    cr_assert(s_row_is(table, "gemm cuBLAS (1 GPU)", "NOTRUN"), "%s", table);
    s_cleanup(dir);
}
