/* test_boot.c: boot_cfg_init (torchrun, Slurm, OpenMPI environments and every bad value), boot_local_addr,
 * and the rendezvous store over tcp/env and file:// with 1, 2 and 4 ranks, plus its failure modes
 * (world mismatch, duplicate rank, unreachable master, port in use, join timeout, malformed requests,
 * stale files). Network traffic goes to 127.0.0.1 only. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
#include <zmq.h>

#include "core/boot.h"
#include "core/err.h"
#include "core/timer.h"
#include "tests/lib/ranks.h"
#include "core/port.h"

static const char *const ENV_VARS[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SYNCBENCH_JOB",
    "SYNCBENCH_SOCKET_IFNAME", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL};

static void clean_env(void)
{
    for (int i = 0; ENV_VARS[i]; i++) unsetenv(ENV_VARS[i]);
    err_clear();
}

/* Expect boot_cfg_init to fail with code and a detail containing want. */
static void expect_fail(const char *method, int rank, int world, int code, const char *want)
{
    boot_cfg_t cfg;
    int rc = boot_cfg_init(&cfg, method, rank, world, 1000);
    cr_expect_eq(rc, code, "rc %d (%s), expected %d; detail: %s", rc, err_str(rc), code, err_detail());
    cr_expect(strstr(err_detail(), want) != NULL, "detail '%s' lacks '%s'", err_detail(), want);
}

/* ------------------------------------------------------------------------------------------------ */
/* configuration                                                                                    */

TestSuite(boot_cfg, .init = clean_env);

Test(boot_cfg, torchrun_env)
{
    setenv("RANK", "1", 1); setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "1", 1); setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1); setenv("MASTER_PORT", "29500", 1);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "env://", -1, -1, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.rank, 1); cr_expect_eq(cfg.world, 4);
    cr_expect_eq(cfg.local_rank, 1); cr_expect_eq(cfg.local_world, 2);
    cr_expect_str_eq(cfg.method, "env"); cr_expect_str_eq(cfg.host, "127.0.0.1");
    cr_expect_eq(cfg.port, 29500); cr_expect_eq(cfg.timeout_ms, 5000);
    cr_expect_str_eq(cfg.source, "torchrun");
    cr_expect(!strncmp(cfg.job, "env-", 4), "derived job '%s'", cfg.job);
    /* NULL method means env://; the derived job id is stable */
    boot_cfg_t c2;
    cr_assert_eq(boot_cfg_init(&c2, NULL, -1, -1, 0), 0);
    cr_expect_str_eq(c2.job, cfg.job);
    cr_expect_gt(c2.timeout_ms, 0);
    setenv("SYNCBENCH_JOB", "exp-1.a_b", 1);
    cr_assert_eq(boot_cfg_init(&c2, NULL, -1, -1, 0), 0);
    cr_expect_str_eq(c2.job, "exp-1.a_b");
}

Test(boot_cfg, args_override_env)
{
    setenv("RANK", "1", 1); setenv("WORLD_SIZE", "4", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1); setenv("MASTER_PORT", "29500", 1);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "env://", 2, 3, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.rank, 2); cr_expect_eq(cfg.world, 3);
    cr_expect_str_eq(cfg.source, "args");
    clean_env();
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://10.1.2.3:1234", 0, 1, 5000), 0, "%s", err_detail());
    cr_expect_str_eq(cfg.method, "tcp"); cr_expect_str_eq(cfg.host, "10.1.2.3"); cr_expect_eq(cfg.port, 1234);
    cr_expect_eq(cfg.local_rank, 0); cr_expect_eq(cfg.local_world, 1);
    cr_expect(!strncmp(cfg.job, "tcp-", 4));
    boot_cfg_t other;
    cr_assert_eq(boot_cfg_init(&other, "tcp://10.1.2.3:1235", 0, 1, 5000), 0);
    cr_expect_str_neq(cfg.job, other.job, "different ports must give different job ids");
}

Test(boot_cfg, slurm)
{
    setenv("SLURM_PROCID", "5", 1); setenv("SLURM_NTASKS", "8", 1); setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_TASKS_PER_NODE", "4(x2)", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1); setenv("MASTER_PORT", "29501", 1);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "env://", -1, -1, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.rank, 5); cr_expect_eq(cfg.world, 8);
    cr_expect_eq(cfg.local_rank, 1); cr_expect_eq(cfg.local_world, 4);
    cr_expect_str_eq(cfg.source, "slurm");
    /* heterogeneous nodes: the entry of this node */
    setenv("SLURM_TASKS_PER_NODE", "3,2(x2)", 1); setenv("SLURM_NODEID", "2", 1);
    cr_assert_eq(boot_cfg_init(&cfg, "env://", -1, -1, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.local_world, 2);
    /* SLURM_NTASKS_PER_NODE wins when set */
    setenv("SLURM_NTASKS_PER_NODE", "3", 1);
    cr_assert_eq(boot_cfg_init(&cfg, "env://", -1, -1, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.local_world, 3);
    /* tcp:// under srun takes rank/world from Slurm too */
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:4000", -1, -1, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.rank, 5);
}

Test(boot_cfg, slurm_without_master)
{
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "2", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "MASTER_ADDR");
    cr_expect(strstr(err_detail(), "Slurm") && strstr(err_detail(), "MASTER_PORT"), "%s", err_detail());
    setenv("MASTER_ADDR", "node1", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "MASTER_PORT is unset");
}

Test(boot_cfg, openmpi)
{
    setenv("OMPI_COMM_WORLD_RANK", "3", 1); setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1); setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
    /* mpirun inside an sbatch script: the batch step's Slurm variables must not win */
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "1", 1); setenv("SLURM_LOCALID", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1); setenv("MASTER_PORT", "29502", 1);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "env://", -1, -1, 5000), 0, "%s", err_detail());
    cr_expect_eq(cfg.rank, 3); cr_expect_eq(cfg.world, 6);
    cr_expect_eq(cfg.local_rank, 0); cr_expect_eq(cfg.local_world, 3);
    cr_expect_str_eq(cfg.source, "openmpi");
}

Test(boot_cfg, bad_values)
{
    setenv("MASTER_ADDR", "127.0.0.1", 1); setenv("MASTER_PORT", "29500", 1);
    setenv("RANK", "4", 1); setenv("WORLD_SIZE", "4", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "RANK=4 but WORLD_SIZE=4: rank must be < world size");
    setenv("RANK", "abc", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "RANK=abc is not an integer");
    setenv("RANK", "1x", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "RANK=1x is not an integer");
    setenv("RANK", "", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "RANK is set but empty");
    setenv("RANK", "-1", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "rank must be >= 0");
    setenv("RANK", "99999999999", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "out of range");
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "0", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "WORLD_SIZE=0: world size must be >= 1");
    unsetenv("WORLD_SIZE");
    expect_fail("env://", -1, -1, ERR_INVAL, "set WORLD_SIZE too");
    setenv("WORLD_SIZE", "4", 1); unsetenv("RANK");
    expect_fail("env://", -1, -1, ERR_INVAL, "set RANK too");
    setenv("RANK", "1", 1);
    setenv("MASTER_PORT", "99999", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "MASTER_PORT=99999 is not a port");
    setenv("MASTER_PORT", "0", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "MASTER_PORT=0 is not a port");
    setenv("MASTER_PORT", "http", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "MASTER_PORT=http is not a port");
    setenv("MASTER_PORT", "29500", 1);
    unsetenv("MASTER_ADDR");
    expect_fail("env://", -1, -1, ERR_INVAL, "MASTER_ADDR is unset");
    setenv("MASTER_ADDR", "::1", 1);
    expect_fail("env://", -1, -1, ERR_UNSUP, "IPv6");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("LOCAL_RANK", "2", 1); setenv("LOCAL_WORLD_SIZE", "2", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2");
    setenv("LOCAL_RANK", "0", 1); setenv("LOCAL_WORLD_SIZE", "8", 1);
    expect_fail("env://", -1, -1, ERR_RANGE, "local world size must be <= world size");
    unsetenv("LOCAL_RANK"); unsetenv("LOCAL_WORLD_SIZE");
    setenv("SYNCBENCH_JOB", "a/b", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "SYNCBENCH_JOB='a/b'");
    unsetenv("SYNCBENCH_JOB");
    setenv("SLURM_PROCID", "0", 1);
    unsetenv("RANK"); unsetenv("WORLD_SIZE");
    expect_fail("env://", -1, -1, ERR_INVAL, "set SLURM_NTASKS too");
    setenv("SLURM_NTASKS", "2", 1); setenv("SLURM_LOCALID", "0", 1); setenv("SLURM_TASKS_PER_NODE", "two", 1);
    expect_fail("env://", -1, -1, ERR_INVAL, "SLURM_TASKS_PER_NODE=two");
    clean_env();
    setenv("OMPI_COMM_WORLD_RANK", "2", 1); setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    expect_fail("tcp://127.0.0.1:5", -1, -1, ERR_RANGE, "OMPI_COMM_WORLD_RANK=2 but OMPI_COMM_WORLD_SIZE=2");
}

Test(boot_cfg, bad_methods_and_args)
{
    expect_fail("env://", -1, -1, ERR_INVAL, "MASTER_ADDR");
    expect_fail("tcp://127.0.0.1:1", -1, -1, ERR_INVAL, "rank and world size unknown");
    expect_fail("tcp://127.0.0.1:1", 4, 4, ERR_RANGE, "rank=4 but world=4: rank must be < world size");
    expect_fail("tcp://127.0.0.1:1", 0, 0, ERR_RANGE, "world size must be >= 1");
    expect_fail("tcp://127.0.0.1:1", 3, -1, ERR_INVAL, "world size");
    expect_fail("tcp://127.0.0.1", 0, 1, ERR_INVAL, "has no port");
    expect_fail("tcp://:80", 0, 1, ERR_INVAL, "is empty");
    expect_fail("tcp://h:70000", 0, 1, ERR_RANGE, "tcp:// port=70000 is not a port");
    expect_fail("udp://h:1", 0, 1, ERR_INVAL, "unknown init method 'udp://h:1'");
    expect_fail("file://relative/dir", 0, 1, ERR_INVAL, "absolute path");
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "file:///tmp/x/", 0, 2, 100), 0, "%s", err_detail());
    cr_expect_str_eq(cfg.path, "/tmp/x");
    cr_expect(!strncmp(cfg.job, "file-", 5));
    cr_expect_eq(boot_cfg_init(NULL, "env://", 0, 1, 1), ERR_INVAL);
}

Test(boot_cfg, ifname_and_local_addr)
{
    setenv("SYNCBENCH_SOCKET_IFNAME", "lo", 1);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:29500", 0, 1, 1000), 0);
    cr_expect_str_eq(cfg.ifname, "lo");
    char a[64];
    cr_assert_eq(boot_local_addr(&cfg, a, sizeof a), 0, "%s", err_detail());
    cr_expect_str_eq(a, "127.0.0.1");
    /* the caller's choice after init wins over the environment */
    snprintf(cfg.ifname, sizeof cfg.ifname, "nosuchif9");
    cr_expect_eq(boot_local_addr(&cfg, a, sizeof a), ERR_NODEV);
    cr_expect(strstr(err_detail(), "nosuchif9") && strstr(err_detail(), "lo"), "%s", err_detail());
    cfg.ifname[0] = '\0';
    cr_assert_eq(boot_local_addr(&cfg, a, sizeof a), 0);
    cr_expect_str_eq(a, "127.0.0.1", "loopback master gives loopback");
    snprintf(cfg.host, sizeof cfg.host, "127.8.9.10");
    cr_assert_eq(boot_local_addr(&cfg, a, sizeof a), 0);
    cr_expect_str_eq(a, "127.0.0.1");
    cr_expect_eq(boot_local_addr(&cfg, a, 4), ERR_INVAL);
    char big[80];
    memset(big, 'x', sizeof big - 1); big[sizeof big - 1] = '\0';
    setenv("SYNCBENCH_SOCKET_IFNAME", big, 1);
    expect_fail("tcp://127.0.0.1:1", 0, 1, ERR_RANGE, "SYNCBENCH_SOCKET_IFNAME");
}

/* ------------------------------------------------------------------------------------------------ */
/* store: the same workload over env:// and file://                                                 */

#define RCK(expr)                                                                                     \
    do {                                                                                              \
        int rc_ = (expr);                                                                             \
        if (rc_ < 0) {                                                                                \
            char b_[600];                                                                             \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #expr,              \
                    err_trace(rc_, b_, sizeof b_));                                                   \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)
#define RTRUE(c)                                                                                      \
    do {                                                                                              \
        if (!(c)) {                                                                                   \
            fprintf(stderr, "rank %d: %s:%d: failed: %s (detail: %s)\n", rank, __FILE__, __LINE__, #c,  \
                    err_detail());                                                                    \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)

static int s_barrier(store_t *st, int rank, int world, int round)
{
    char k[64], go[64];
    snprintf(k, sizeof k, "bar.%d", round);
    snprintf(go, sizeof go, "bar.%d.go", round);
    int64_t n = 0;
    RCK(store_add(st, k, 1, &n));
    RTRUE(n >= 1 && n <= world);
    if (n == world) RCK(store_set(st, go, "1", 1));
    void *v = NULL;
    size_t len = 0;
    RCK(store_get(st, go, &v, &len, 10000));
    free(v);
    return 0;
}

static int s_workload(int rank, int world, void *arg)
{
    const char *method = arg;
    boot_cfg_t cfg;
    store_t *st = NULL;
    RCK(boot_cfg_init(&cfg, method, -1, -1, 10000));
    RTRUE(cfg.rank == rank && cfg.world == world);
    RCK(store_new(&st, &cfg));

    /* everyone publishes, everyone reads everyone (get waits for keys not yet set) */
    char k[32], want[64];
    snprintf(k, sizeof k, "addr/%d", rank);
    snprintf(want, sizeof want, "rank %d says hi", rank);
    RCK(store_set(st, k, want, strlen(want)));
    for (int r = 0; r < world; r++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(k, sizeof k, "addr/%d", (rank + r) % world);
        snprintf(want, sizeof want, "rank %d says hi", (rank + r) % world);
        RCK(store_get(st, k, &v, &len, 10000));
        RTRUE(len == strlen(want) && !memcmp(v, want, len) && ((char *)v)[len] == '\0');
        free(v);
    }
    /* counters: add returns distinct values 1..world*3; get reads it as decimal text */
    int64_t got = 0;
    for (int i = 0; i < 3; i++) {
        RCK(store_add(st, "ctr", 1, &got));
        RTRUE(got >= 1 && got <= 3 * world);
    }
    RTRUE(s_barrier(st, rank, world, 1) == 0);
    void *v = NULL;
    size_t len = 0;
    RCK(store_get(st, "ctr", &v, &len, 1000));
    RTRUE(strtoll(v, NULL, 10) == 3 * world);
    free(v);
    RCK(store_add(st, "ctr", 0, &got));
    RTRUE(got == 3 * world);
    RTRUE(s_barrier(st, rank, world, 2) == 0);

    /* binary value with NULs, 1 MiB, through the owner */
    if (rank == world - 1) {
        size_t n = 1 << 20;
        unsigned char *b = malloc(n);
        for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7);
        RCK(store_set(st, "blob", b, n));
        RCK(store_set(st, "empty", "", 0));
        free(b);
    }
    RCK(store_get(st, "blob", &v, &len, 10000));
    RTRUE(len == (size_t)1 << 20);
    for (size_t i = 0; i < len; i++) RTRUE(((unsigned char *)v)[i] == (unsigned char)(i * 7));
    free(v);
    RCK(store_get(st, "empty", &v, &len, 10000));
    RTRUE(len == 0);
    free(v);

    /* a key nobody sets: ERR_TIMEOUT after about the wait */
    uint64_t t0 = now_ns();
    int rc = store_get(st, "never", &v, &len, 300);
    double ms = (double)(now_ns() - t0) / 1e6;
    RTRUE(rc == ERR_TIMEOUT && ms >= 250 && ms < 2000 && strstr(err_detail(), "never"));
    RTRUE(v == NULL);
    /* add on a non-counter value, bad keys */
    RTRUE(store_add(st, "addr/0", 1, &got) == ERR_INVAL);
    RTRUE(store_set(st, "", "x", 1) == ERR_INVAL);
    char longkey[STORE_KEY_MAX + 2];
    memset(longkey, 'k', sizeof longkey - 1); longkey[sizeof longkey - 1] = '\0';
    RTRUE(store_set(st, longkey, "x", 1) == ERR_RANGE);
    longkey[STORE_KEY_MAX] = '\0';
    snprintf(k, sizeof k, "odd key/%d:?*", rank);
    RCK(store_set(st, k, "o", 1));
    RCK(store_get(st, k, &v, &len, 1000));
    free(v);
    if (rank == 0) {
        RCK(store_set(st, longkey, "L", 1));
        RCK(store_set(st, "gone", "g", 1));
        RCK(store_del(st, "gone"));
        RTRUE(store_get(st, "gone", &v, &len, 100) == ERR_TIMEOUT);
    }
    RTRUE(s_barrier(st, rank, world, 3) == 0);
    RCK(store_get(st, longkey, &v, &len, 1000));
    RTRUE(len == 1 && ((char *)v)[0] == 'L');
    free(v);
    RTRUE(s_barrier(st, rank, world, 4) == 0);
    store_destroy(&st);
    RTRUE(st == NULL);
    store_destroy(&st); /* safe twice */
    return 0;
}

static char *s_tmpdir(void)
{
    char *d = strdup("/tmp/sb-boot-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

/* Entries of dir whose name starts with prefix ("" = all). */
static int s_dir_entries_with(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !strncmp(e->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}
static int s_dir_entries(const char *dir) { return s_dir_entries_with(dir, ""); }

static void s_rmdir(char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    free(dir);
}

Test(store_tcp, one_rank, .timeout = 30) { cr_expect_eq(run_ranks(1, s_workload, "env://", 25000), 0); }
Test(store_tcp, two_ranks, .timeout = 30) { cr_expect_eq(run_ranks(2, s_workload, "env://", 25000), 0); }
Test(store_tcp, four_ranks, .timeout = 40) { cr_expect_eq(run_ranks(4, s_workload, "env://", 35000), 0); }

static void s_file_ranks(int world)
{
    char *dir = s_tmpdir(), m[128];
    snprintf(m, sizeof m, "file://%s/sub", dir); /* created on demand */
    cr_expect_eq(run_ranks(world, s_workload, m, 35000), 0);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    cr_expect_eq(s_dir_entries(sub), 0, "the last rank to leave removes the job's files");
    s_rmdir(dir);
}

Test(store_file, one_rank, .timeout = 30) { s_file_ranks(1); }
Test(store_file, two_ranks, .timeout = 30) { s_file_ranks(2); }
Test(store_file, four_ranks, .timeout = 40) { s_file_ranks(4); }

/* ------------------------------------------------------------------------------------------------ */
/* failure modes                                                                                    */

/* results shared between forked ranks */
typedef struct { const char *method; int rc[8]; char detail[8][512]; double ms[8]; volatile int done[8]; } shared_t;

static shared_t *s_shared(const char *method)
{
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    sh->method = method;
    return sh;
}

static void s_record(shared_t *sh, int rank, int rc, uint64_t t0)
{
    sh->rc[rank] = rc;
    sh->ms[rank] = (double)(now_ns() - t0) / 1e6;
    snprintf(sh->detail[rank], sizeof sh->detail[rank], "%s", err_detail());
    __atomic_store_n(&sh->done[rank], 1, __ATOMIC_RELEASE);
}

/* rank 1 believes the world has 3 ranks, rank 0 that it has 2 */
static int s_mismatch(int rank, int world, void *arg)
{
    (void)world;
    shared_t *sh = arg;
    boot_cfg_t cfg;
    store_t *st = NULL;
    RCK(boot_cfg_init(&cfg, sh->method, rank, rank == 1 ? 3 : 2, 2000));
    uint64_t t0 = now_ns();
    int rc = store_new(&st, &cfg);
    s_record(sh, rank, rc, t0);
    store_destroy(&st);
    return 0;
}

static void s_check_mismatch(shared_t *sh)
{
    int mism = 0, tmo = 0;
    for (int r = 0; r < 2; r++) {
        if (sh->rc[r] == ERR_MISMATCH) {
            mism++;
            cr_expect(strstr(sh->detail[r], "3") && strstr(sh->detail[r], "2"), "detail names both: %s", sh->detail[r]);
        } else if (sh->rc[r] == ERR_TIMEOUT) {
            tmo++;
            cr_expect(strstr(sh->detail[r], "missing:"), "%s", sh->detail[r]);
        }
    }
    cr_expect_eq(mism, 1, "rc %d (%s) / %d (%s)", sh->rc[0], sh->detail[0], sh->rc[1], sh->detail[1]);
    cr_expect_eq(tmo, 1);
}

Test(store_tcp, world_mismatch, .timeout = 30)
{
    shared_t *sh = s_shared("env://");
    cr_expect_eq(run_ranks(2, s_mismatch, sh, 20000), 0);
    cr_expect_eq(sh->rc[1], ERR_MISMATCH);
    cr_expect(strstr(sh->detail[1], "world size 3") && strstr(sh->detail[1], "world size 2"), "%s", sh->detail[1]);
    cr_expect_eq(sh->rc[0], ERR_TIMEOUT);
    cr_expect(strstr(sh->detail[0], "only 1 of 2 ranks joined within 2.0 s (missing: 1"), "%s", sh->detail[0]);
    cr_expect(strstr(sh->detail[0], "world size 3"), "names the rank turned away: %s", sh->detail[0]);
    s_check_mismatch(sh);
}

Test(store_file, world_mismatch, .timeout = 30)
{
    char *dir = s_tmpdir(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    shared_t *sh = s_shared(m);
    cr_expect_eq(run_ranks(2, s_mismatch, sh, 20000), 0);
    s_check_mismatch(sh);
    s_rmdir(dir);
}

/* ranks 0, 1 and a second 1 in a world of 2 */
static int s_dup(int rank, int world, void *arg)
{
    (void)world;
    shared_t *sh = arg;
    boot_cfg_t cfg;
    store_t *st = NULL;
    unsetenv("LOCAL_RANK");
    unsetenv("LOCAL_WORLD_SIZE");
    RCK(boot_cfg_init(&cfg, sh->method, rank ? 1 : 0, 2, 5000));
    if (rank == 2) usleep(200000); /* usually the first rank 1 wins; either order is checked */
    uint64_t t0 = now_ns();
    int rc = store_new(&st, &cfg);
    s_record(sh, rank, rc, t0);
    /* stay joined (the server up) until both claimants of rank 1 have their answer */
    uint64_t until = deadline_in(8000);
    while (rc == 0 && !deadline_passed(until) &&
           !(__atomic_load_n(&sh->done[1], __ATOMIC_ACQUIRE) && __atomic_load_n(&sh->done[2], __ATOMIC_ACQUIRE)))
        usleep(10000);
    store_destroy(&st);
    return 0;
}

static void s_check_dup(shared_t *sh)
{
    cr_expect_eq(sh->rc[0], 0, "%s", sh->detail[0]);
    int dup = sh->rc[1] == ERR_DUP ? 1 : 2, won = 3 - dup;
    cr_expect_eq(sh->rc[won], 0, "rc %d: %s", sh->rc[won], sh->detail[won]);
    cr_expect_eq(sh->rc[dup], ERR_DUP, "rc %d: %s", sh->rc[dup], sh->detail[dup]);
    cr_expect(strstr(sh->detail[dup], "rank 1"), "%s", sh->detail[dup]);
    cr_expect_lt(sh->ms[dup], 3000);
}

Test(store_tcp, duplicate_rank, .timeout = 30)
{
    shared_t *sh = s_shared("env://");
    cr_expect_eq(run_ranks(3, s_dup, sh, 20000), 0);
    s_check_dup(sh);
}

Test(store_file, duplicate_rank, .timeout = 30)
{
    char *dir = s_tmpdir(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    shared_t *sh = s_shared(m);
    cr_expect_eq(run_ranks(3, s_dup, sh, 20000), 0);
    s_check_dup(sh);
    s_rmdir(dir);
}

TestSuite(store_err, .init = clean_env);

Test(store_err, rank_out_of_range)
{
    boot_cfg_t cfg;
    cr_expect_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:1", 5, 4, 1000), ERR_RANGE);
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:1", 1, 4, 1000), 0);
    cfg.rank = 4; /* a caller that edits the cfg by hand */
    store_t *st = NULL;
    cr_expect_eq(store_new(&st, &cfg), ERR_RANGE);
    cr_expect_null(st);
    cr_expect(strstr(err_detail(), "rank 4"), "%s", err_detail());
}

Test(store_err, unreachable_master, .timeout = 20)
{
    int port = port_free_loopback();
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 1, 2, 1500), 0);
    store_t *st = NULL;
    uint64_t t0 = now_ns();
    int rc = store_new(&st, &cfg);
    double ms = (double)(now_ns() - t0) / 1e6;
    cr_expect_eq(rc, ERR_TIMEOUT, "rc %d: %s", rc, err_detail());
    cr_expect_null(st);
    cr_expect(ms >= 1400 && ms < 2500, "took %.0f ms", ms);
    char want[96];
    snprintf(want, sizeof want, "could not reach master 127.0.0.1:%d within 1.5 s", port);
    cr_expect(strstr(err_detail(), want), "%s", err_detail());
}

Test(store_err, port_in_use, .timeout = 20)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 1), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    int port = ntohs(a.sin_port);
    char m[64], want[32];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 2, 1500), 0);
    store_t *st = NULL;
    int rc = store_new(&st, &cfg);
    cr_expect_eq(rc, ERR_ADDRINUSE, "rc %d: %s", rc, err_detail());
    snprintf(want, sizeof want, "port %d", port);
    cr_expect(strstr(err_detail(), want), "%s", err_detail());
    cr_expect_null(st);
    close(fd);
}

Test(store_err, join_timeout_names_missing, .timeout = 20)
{
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 6, 1500), 0);
    store_t *st = NULL;
    uint64_t t0 = now_ns();
    int rc = store_new(&st, &cfg);
    double ms = (double)(now_ns() - t0) / 1e6;
    cr_expect_eq(rc, ERR_TIMEOUT);
    cr_expect(strstr(err_detail(), "only 1 of 6 ranks joined within 1.5 s (missing: 1, 2, 3, 4, 5)"), "%s", err_detail());
    cr_expect(ms >= 1400 && ms < 2500, "took %.0f ms", ms);
    /* the port is free again: the server stopped */
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 1500), 0);
    cr_expect_eq(store_new(&st, &cfg), 0, "%s", err_detail());
    store_destroy(&st);
}

Test(store_err, file_join_timeout, .timeout = 20)
{
    char *dir = s_tmpdir(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 2, 3, 1500), 0);
    store_t *st = NULL;
    uint64_t t0 = now_ns();
    cr_expect_eq(store_new(&st, &cfg), ERR_TIMEOUT);
    double ms = (double)(now_ns() - t0) / 1e6;
    cr_expect(strstr(err_detail(), "only 1 of 3 ranks joined within 1.5 s (missing: 0, 1)"), "%s", err_detail());
    cr_expect(ms >= 1400 && ms < 2500, "took %.0f ms", ms);
    s_rmdir(dir);
}

Test(store_err, file_stale_files, .timeout = 20)
{
    char *dir = s_tmpdir(), m[128], p[256];
    snprintf(m, sizeof m, "file://%s", dir);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 1500), 0);
    /* an earlier run that crashed left rank 0's file */
    snprintf(p, sizeof p, "%s/%s@rank.0", dir, cfg.job);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "123 oldhost 1\n", 14), 14);
    close(fd);
    store_t *st = NULL;
    cr_expect_eq(store_new(&st, &cfg), ERR_DUP);
    cr_expect(strstr(err_detail(), "earlier run") && strstr(err_detail(), "SYNCBENCH_JOB") &&
              strstr(err_detail(), "oldhost"), "%s", err_detail());
    /* another job id in the same directory is unaffected */
    setenv("SYNCBENCH_JOB", "fresh-job", 1);
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 1500), 0);
    cr_expect_eq(store_new(&st, &cfg), 0, "%s", err_detail());
    store_destroy(&st);
    cr_expect_eq(s_dir_entries_with(dir, "fresh-job@"), 0, "the clean run left nothing");
    cr_expect_geq(s_dir_entries(dir), 1, "the stale file is still there");
    s_rmdir(dir);
}

/* A raw DEALER sends garbage to a one-rank store: every message gets an error reply, nothing breaks. */
static int s_raw(void *d, const char *const *frames, const size_t *lens, int n, int *status, char *detail)
{
    for (int i = 0; i < n; i++) zmq_send(d, frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0);
    zmq_pollitem_t it = {.socket = d, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 2000) != 1) return -1;
    zmq_msg_t m[3];
    int k = 0, more = 1;
    while (more) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        zmq_msg_recv(&x, d, 0);
        more = zmq_msg_more(&x);
        if (k < 3) { zmq_msg_init(&m[k]); zmq_msg_move(&m[k], &x); k++; }
        zmq_msg_close(&x);
    }
    if (k != 3 || zmq_msg_size(&m[0]) != 4) return -1;
    const unsigned char *s = zmq_msg_data(&m[0]);
    *status = (int)((uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24);
    snprintf(detail, 256, "%.*s", (int)zmq_msg_size(&m[2]), (char *)zmq_msg_data(&m[2]));
    for (int i = 0; i < k; i++) zmq_msg_close(&m[i]);
    return 0;
}

Test(store_err, malformed_requests, .timeout = 20)
{
    int port = port_free_loopback();
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 3000), 0);
    store_t *st = NULL;
    cr_assert_eq(store_new(&st, &cfg), 0, "%s", err_detail());

    void *ctx = zmq_ctx_new(), *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    cr_assert_eq(zmq_connect(d, m), 0);
    const char seq[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    char bigkey[STORE_KEY_MAX + 10];
    memset(bigkey, 'k', sizeof bigkey);
    struct { const char *f[6]; size_t l[6]; int n; int want; const char *say; } cases[] = {
        {{"S"}, {1}, 1, ERR_PROTO, "frames"},
        {{"S", seq, "k"}, {1, 8, 1}, 3, ERR_PROTO, "frames"},
        {{"S", seq, "k", "v", "extra", "more"}, {1, 8, 1, 1, 5, 4}, 6, ERR_PROTO, "frames"},
        {{"SS", seq, "k", "v"}, {2, 8, 1, 1}, 4, ERR_PROTO, "op frame"},
        {{"S", seq, "k", "v"}, {1, 3, 1, 1}, 4, ERR_PROTO, "seq frame"},
        {{"S", seq, "k", "v"}, {1, 8, 1, 1}, 4, ERR_STATE, "before HELLO"},
        {{"H", seq, "nope", "12345678"}, {1, 8, 4, 8}, 4, ERR_MISMATCH, "serves job"},
        {{"H", seq, cfg.job, "1234"}, {1, 8, strlen(cfg.job), 4}, 4, ERR_PROTO, "8 bytes"},
        {{"H", seq, cfg.job, "\0\0\0\0\1\0\0\0"}, {1, 8, strlen(cfg.job), 8}, 4, ERR_DUP, "rank 0"},
        {{"H", seq, cfg.job, "\7\0\0\0\1\0\0\0"}, {1, 8, strlen(cfg.job), 8}, 4, ERR_RANGE, "rank 7"},
        {{"H", seq, cfg.job, "\0\0\0\0\2\0\0\0"}, {1, 8, strlen(cfg.job), 8}, 4, ERR_MISMATCH, "world size 2"},
        {{"S", seq, bigkey, "v"}, {1, 8, sizeof bigkey, 1}, 4, ERR_PROTO, "key"},
        {{"S", seq, "a\0b", "v"}, {1, 8, 3, 1}, 4, ERR_PROTO, "key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 0;
        char detail[256] = "";
        cr_assert_eq(s_raw(d, cases[i].f, cases[i].l, cases[i].n, &status, detail), 0, "case %zu: no reply", i);
        cr_expect_eq(status, cases[i].want, "case %zu: status %d (%s)", i, status, detail);
        cr_expect(strstr(detail, cases[i].say), "case %zu: detail '%s' lacks '%s'", i, detail, cases[i].say);
    }
    zmq_close(d);
    zmq_ctx_term(ctx);
    /* the store still works */
    int64_t v = 0;
    cr_expect_eq(store_add(st, "c", 5, &v), 0, "%s", err_detail());
    cr_expect_eq(v, 5);
    void *val = NULL;
    size_t len = 0;
    cr_expect_eq(store_get(st, "c", &val, &len, 100), 0);
    cr_expect(len == 1 && !memcmp(val, "5", 1));
    free(val);
    store_destroy(&st);
    store_destroy(&st);
}

/* rank 0 in a thread; the test joins as rank 1 over a raw DEALER and sends bad requests after HELLO */
typedef struct { boot_cfg_t cfg; int rc; double destroy_ms; char detail[512]; } r0_t;

static void *s_rank0(void *arg)
{
    r0_t *a = arg;
    store_t *st = NULL;
    a->rc = store_new(&st, &a->cfg);
    snprintf(a->detail, sizeof a->detail, "%s", err_detail());
    if (a->rc == 0) {
        void *v = NULL;
        size_t len = 0;
        a->rc = store_get(st, "from1", &v, &len, 5000); /* set by the raw client */
        if (a->rc == 0 && (len != 2 || memcmp(v, "hi", 2))) a->rc = -100;
        free(v);
        uint64_t t0 = now_ns();
        store_destroy(&st); /* returns once the raw client left */
        a->destroy_ms = (double)(now_ns() - t0) / 1e6;
    }
    return NULL;
}

Test(store_err, malformed_after_join, .timeout = 20)
{
    char m[64];
    snprintf(m, sizeof m, "tcp://127.0.0.1:%d", port_free_loopback());
    r0_t a = {.rc = 1};
    cr_assert_eq(boot_cfg_init(&a.cfg, m, 0, 2, 8000), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, s_rank0, &a), 0);

    void *ctx = zmq_ctx_new(), *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    cr_assert_eq(zmq_connect(d, m), 0);
    const char seq[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    const char *job = a.cfg.job;
    struct { const char *f[4]; size_t l[4]; int want; const char *say; } cases[] = {
        {{"H", seq, job, "\1\0\0\0\2\0\0\0"}, {1, 8, strlen(job), 8}, 0, ""},
        {{"H", seq, job, "\1\0\0\0\2\0\0\0"}, {1, 8, strlen(job), 8}, 0, ""}, /* a repeated hello is harmless */
        {{"J", seq, "", "\x10\x27\0\0"}, {1, 8, 0, 4}, 0, ""},
        {{"Z", seq, "k", "v"}, {1, 8, 1, 1}, ERR_PROTO, "unknown store op"},
        {{"A", seq, "k", "1234"}, {1, 8, 1, 4}, ERR_PROTO, "8-byte delta"},
        {{"G", seq, "", "\0\0\0\0"}, {1, 8, 0, 4}, ERR_PROTO, "empty key"},
        {{"G", seq, "k", "\0\0"}, {1, 8, 1, 2}, ERR_PROTO, "4 bytes"},
        {{"S", seq, "", "v"}, {1, 8, 0, 1}, ERR_PROTO, "empty key"},
        {{"G", seq, "nokey", "\x32\0\0\0"}, {1, 8, 5, 4}, ERR_TIMEOUT, ""},
        {{"S", seq, "from1", "hi"}, {1, 8, 5, 2}, 0, ""},
        {{"L", seq, "", ""}, {1, 8, 0, 0}, 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 1;
        char detail[256] = "";
        cr_assert_eq(s_raw(d, cases[i].f, cases[i].l, 4, &status, detail), 0, "case %zu: no reply", i);
        cr_expect_eq(status, cases[i].want, "case %zu: status %d (%s)", i, status, detail);
        cr_expect(strstr(detail, cases[i].say), "case %zu: detail '%s' lacks '%s'", i, detail, cases[i].say);
    }
    pthread_join(th, NULL);
    zmq_close(d);
    zmq_ctx_term(ctx);
    cr_expect_eq(a.rc, 0, "rank 0: %d %s", a.rc, a.detail);
    cr_expect_lt(a.destroy_ms, 2000, "rank 0 waited %.0f ms after everyone left", a.destroy_ms);
}
