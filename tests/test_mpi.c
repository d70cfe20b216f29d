/* test_mpi.c: the MPI engine (mpi/) through the harness under mpirun: exact bench results (f32 sum,
 * f16 average), training that keeps ranks identical and matches the host ring step for step at 2
 * ranks, ranks started by the user's own mpirun, peers marked in the report, and the clear error when
 * mpirun is missing. Skipped, with the reason, where mpirun or an MPI build is missing or mpirun
 * cannot run here (as root OpenMPI needs --allow-run-as-root, which the harness passes). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "core/port.h"

static char g_harness[512];

/* The harness with an MPI engine and a working mpirun, or skip saying which is missing. */
static void s_need_mpi(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
    char cmd[1024], out[1 << 14];
    if (run_cmd("command -v mpirun", out, sizeof out) != 0) cr_skip_test("mpirun is not installed (openmpi-bin)");
    snprintf(cmd, sizeof cmd, "%s --help", g_harness);
    run_cmd(cmd, out, sizeof out);
    if (!strstr(out, "mpi (peer)")) cr_skip_test("this build has no MPI engine (mpicc was not found at build time)");
    if (run_cmd(geteuid() == 0 ? "mpirun --allow-run-as-root --oversubscribe -np 2 true"
                             : "mpirun --oversubscribe -np 2 true", out, sizeof out) != 0)
        cr_skip_test("mpirun cannot start processes here: %.300s", out);
}

/* The value text of "key": in the n-th line of path holding `needle`, into out. */
static int s_field(const char *path, const char *needle, int nth, const char *key, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char line[16384];
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, needle) || nth-- > 0) continue;
        char k[128];
        snprintf(k, sizeof k, "\"%s\": ", key);
        char *p = strstr(line, k);
        if (!p) break;
        p += strlen(k);
        size_t n = strcspn(p, ",}");
        snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

Test(mpi, bench_exact_and_marked_as_peer, .timeout = 120)
{
    s_need_mpi();
    char json[] = "/tmp/sb-mpi-XXXXXX", cmd[2048], out[1 << 16];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s bench --engine mpi --procs 2 --sizes 4K:256K --factor 8 --iters 3 --warmup 1 --json %s",
             g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "harness bench --engine mpi failed:\n%s", out);
    cr_expect(strstr(out, "engine mpi (Open MPI") != NULL, "the table names the MPI library:\n%s", out);
    cr_expect_eq(count_lines(json, "\"engine\":\"mpi\""), 3, "one line per size");
    cr_expect_eq(count_lines(json, "\"wrong\":0,"), 3, "exact sums");
    cr_expect_eq(count_lines(json, "\"world\":2,"), 3);
    cr_expect_eq(count_lines(json, "\"impl\":\"Open MPI v"), 3, "the MPI library and version in impl");
    snprintf(cmd, sizeof cmd, "%s report %s --plots /tmp/sb-mpi-plots-%d", g_harness, json, (int)getpid());
    rc = run_cmd(cmd, out, sizeof out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "mpi(peer)") != NULL, "the report marks the peer:\n%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/sb-mpi-plots-%d", (int)getpid());
    run_cmd(cmd, out, sizeof out);
    unlink(json);
}

Test(mpi, bench_f16_avg_exact, .timeout = 120)
{
    s_need_mpi();
    char json[] = "/tmp/sb-mpi-XXXXXX", cmd[2048], out[1 << 16];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s bench --engine mpi --procs 2 --dtype f16 --op avg --sizes 4K:64K --factor 4 "
             "--iters 2 --warmup 1 --json %s", g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "f16 average failed:\n%s", out);
    cr_expect_eq(count_lines(json, "\"dtype\":\"f16\",\"op\":\"avg\""), 3);
    cr_expect_eq(count_lines(json, "\"wrong\":0,"), 3);
    unlink(json);
}

/* Training keeps ranks identical (--check-every compares checksums every 2 steps) and, at 2 ranks
 * where a sum has one order, gives the ring's loss trajectory bit for bit. */
Test(mpi, train_in_sync_like_ring, .timeout = 180)
{
    s_need_mpi();
    char json[] = "/tmp/sb-mpi-XXXXXX", cmd[2048], out[1 << 16];
    close(mkstemp(json));
    snprintf(cmd, sizeof cmd, "%s train --engine mpi,ring --procs 2 --steps 7 --warmup-steps 1 --batch 64 "
             "--bucket-mb 1 --check-every 2 --json %s", g_harness, json);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "train --engine mpi,ring failed:\n%s", out);
    char lm[64] = "", lr[64] = "", fm[64] = "", fr[64] = "";
    cr_assert_eq(s_field(json, "\"engine\": \"mpi\"", 0, "loss_last", lm, sizeof lm), 0, "no mpi train line");
    cr_assert_eq(s_field(json, "\"engine\": \"ring\"", 0, "loss_last", lr, sizeof lr), 0, "no ring train line");
    s_field(json, "\"engine\": \"mpi\"", 0, "loss_first", fm, sizeof fm);
    s_field(json, "\"engine\": \"ring\"", 0, "loss_first", fr, sizeof fr);
    cr_expect_str_eq(fm, fr, "first loss: mpi %s, ring %s", fm, fr);
    cr_expect_str_eq(lm, lr, "last loss: mpi %s, ring %s", lm, lr);
    char nb[32] = "";
    s_field(json, "\"engine\": \"mpi\"", 0, "nbuckets", nb, sizeof nb);
    cr_expect(atoi(nb) > 1, "several buckets reduced as they arrive (nbuckets %s)", nb);
    unlink(json);
}

/* Ranks started by the user's own mpirun (boot reads OMPI_COMM_WORLD_*; the rendezvous from env://). */
Test(mpi, under_users_mpirun, .timeout = 120)
{
    s_need_mpi();
    char cmd[2048], out[1 << 16];
    int port = port_free_loopback();
    cr_assert(port > 0);
    snprintf(cmd, sizeof cmd, "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d mpirun %s --oversubscribe -np 2 %s bench "
             "--engine mpi --sizes 64K --iters 2 --warmup 1", port, geteuid() == 0 ? "--allow-run-as-root" : "",
             g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "2 ranks") != NULL, "%s", out);
}

Test(mpi, missing_mpirun_is_a_clear_error, .timeout = 60)
{
    s_need_mpi();
    char cmd[2048], out[1 << 14];
    snprintf(cmd, sizeof cmd, "SYNCBENCH_MPIRUN=/nonexistent/mpirun %s bench --engine mpi --procs 2 --sizes 4K",
             g_harness);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(out, "mpirun, which is not on PATH") != NULL, "%s", out);
}
