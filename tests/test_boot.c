/* test_boot.c: boot_cfg_init (torchrun, Slurm, OpenMPI environments and every bad value), boot_local_addr,
 * and joining the rendezvous (store_new) over tcp/env and file://: world mismatch, duplicate rank,
 * unreachable master, port in use, join timeout, stale files, bad arguments. The store's own calls and
 * its wire protocol: tests/test_store.c. Network traffic goes to 127.0.0.1 only. */
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
#include <fcntl.h>
#include <unistd.h>

#include "core/boot.h"
#include "core/err.h"
#include "core/timer.h"
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"
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
/* joining: two ranks that disagree, a rank taken twice, no master, no room, stale files            */

#define RCK(expr)                                                                                     \
    do {                                                                                              \
        if ((expr) < 0) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #expr, err_detail());  \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)

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

Test(join_tcp, world_mismatch, .timeout = 30)
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

Test(join_file, world_mismatch, .timeout = 30)
{
    char *dir = tmpdir_make(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    shared_t *sh = s_shared(m);
    cr_expect_eq(run_ranks(2, s_mismatch, sh, 20000), 0);
    s_check_mismatch(sh);
    tmpdir_remove(dir);
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

Test(join_tcp, duplicate_rank, .timeout = 30)
{
    shared_t *sh = s_shared("env://");
    cr_expect_eq(run_ranks(3, s_dup, sh, 20000), 0);
    s_check_dup(sh);
}

Test(join_file, duplicate_rank, .timeout = 30)
{
    char *dir = tmpdir_make(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    shared_t *sh = s_shared(m);
    cr_expect_eq(run_ranks(3, s_dup, sh, 20000), 0);
    s_check_dup(sh);
    tmpdir_remove(dir);
}

TestSuite(join_err, .init = clean_env);

Test(join_err, rank_out_of_range)
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

Test(join_err, unknown_method)
{
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, "tcp://127.0.0.1:1", 0, 1, 1000), 0);
    snprintf(cfg.method, sizeof cfg.method, "udp");
    store_t *st = NULL;
    cr_expect_eq(store_new(&st, &cfg), ERR_INVAL);
    cr_expect(strstr(err_detail(), "unknown method 'udp'"), "%s", err_detail());
    cr_expect_null(st);
    cr_expect_eq(store_new(NULL, &cfg), ERR_INVAL);
}

Test(join_err, unreachable_master, .timeout = 20)
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

Test(join_err, port_in_use, .timeout = 20)
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

Test(join_err, join_timeout_names_missing, .timeout = 20)
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

Test(join_err, file_join_timeout, .timeout = 20)
{
    char *dir = tmpdir_make(), m[128];
    snprintf(m, sizeof m, "file://%s", dir);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 2, 3, 1500), 0);
    store_t *st = NULL;
    uint64_t t0 = now_ns();
    cr_expect_eq(store_new(&st, &cfg), ERR_TIMEOUT);
    double ms = (double)(now_ns() - t0) / 1e6;
    cr_expect(strstr(err_detail(), "only 1 of 3 ranks joined within 1.5 s (missing: 0, 1)"), "%s", err_detail());
    cr_expect(ms >= 1400 && ms < 2500, "took %.0f ms", ms);
    tmpdir_remove(dir);
}

Test(join_err, file_stale_files, .timeout = 20)
{
    char *dir = tmpdir_make(), m[128], p[256];
    snprintf(m, sizeof m, "file://%s", dir);
    boot_cfg_t cfg;
    cr_assert_eq(boot_cfg_init(&cfg, m, 0, 1, 1500), 0);
    /* an earlier run that crashed left rank 0's file */
    char tag[24];
    auth_job_tag(cfg.job, tag, sizeof tag);
    snprintf(p, sizeof p, "%s/%s@rank.0", dir, tag);
    int fd = open(p, O_WRONLY | O_CREAT, 0600);
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
    auth_job_tag("fresh-job", tag, sizeof tag);
    cr_expect_eq(tmpdir_entries_with(dir, tag), 0, "the clean run left nothing");
    cr_expect_geq(tmpdir_entries(dir), 1, "the stale file is still there");
    tmpdir_remove(dir);
}

