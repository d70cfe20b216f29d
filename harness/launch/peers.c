/* peers.c: running the peers from the harness: the ranks of a peer engine through mpirun, and
 * PyTorch DDP / gloo through peers/torch_ddp.py (see peers.h). Both are child processes the driver
 * waits for: mpirun stops every rank when one fails, the script stops its own. */
#include "harness/launch/peers.h"
#include "core/auth.h"
#include "core/err.h"
#include "core/tp.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The first executable called name in $PATH into out; 0 or -1. */
static int s_which(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/%s", d, name);
        if (access(out, X_OK) == 0) return 0;
    }
    return -1;
}

/* Run argv (argv[0] a path) with env changes done in the child (set: "NAME=VALUE" pairs; unset: names),
 * wait for it; stdin from /dev/null. Returns the exit code (>= 0), 128 + signal, or -1 (fork failed). */
static int s_run_child(char **argv, char *const *set, const char *const *unset)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* the driver dying takes the child with it (mpirun then stops its ranks) */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent) _exit(126);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, STDIN_FILENO);
        for (int i = 0; unset && unset[i]; i++) unsetenv(unset[i]);
        for (int i = 0; set && set[i]; i++) putenv(set[i]);
        signal(SIGPIPE, SIG_DFL);
        execv(argv[0], argv);
        fprintf(stderr, "harness: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int h_launch_mpirun(const h_launch_cfg_t *cfg, int argc, char **argv)
{
    char mpirun[PATH_MAX], exe[PATH_MAX];
    const char *want = getenv("SYNCBENCH_MPIRUN") ? getenv("SYNCBENCH_MPIRUN") : "mpirun";
    if (s_which(want, mpirun, sizeof mpirun) < 0)
        return err_set(ERR_NODEV, "--engine mpi starts its ranks with mpirun, which is not on PATH (%s): install "
                       "openmpi-bin, or set SYNCBENCH_MPIRUN", want);
    if (cfg->nnodes > 1 || cfg->master)
        return err_set(ERR_INVAL, "--engine mpi across nodes: start the ranks with your own mpirun and a hostfile "
                       "(each rank reads OMPI_COMM_WORLD_*; set MASTER_ADDR and MASTER_PORT)");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return err_set(ERR_SYS, "cannot find this program (/proc/self/exe)");
    exe[n] = '\0';
    int world = 0, port = 0;
    char host[256], job[64];
    CHECK(h_launch_check_cfg(cfg, argc, argv, &world, host, sizeof host, &port));
    CHECK(h_launch_job_id(cfg, job, sizeof job));
    char np[16];
    snprintf(np, sizeof np, "%d", cfg->nlocal);
    char **av = calloc((size_t)argc + 32, sizeof *av);
    if (!av) return err_set(ERR_NOMEM, "out of memory");
    int k = 0;
    av[k++] = mpirun;
    av[k++] = "-np", av[k++] = np, av[k++] = "--oversubscribe", av[k++] = "--bind-to", av[k++] = "none";
    if (geteuid() == 0) av[k++] = "--allow-run-as-root"; /* our ranks drop nothing: as root as the launcher */
    /* -x NAME forwards a variable by name: the job secret travels in the environment, never in argv */
    static const char *const fwd[] = {"MASTER_ADDR", "MASTER_PORT", "SYNCBENCH_JOB", "SYNCBENCH_LAUNCHED",
                                      "SYNCBENCH_TIMEOUT", "SYNCBENCH_JOB_SECRET", NULL};
    for (int i = 0; fwd[i]; i++) av[k++] = "-x", av[k++] = (char *)fwd[i];
    av[k++] = exe;
    for (int i = 1; i < argc; i++) av[k++] = argv[i];
    av[k] = NULL;
    char e_addr[300], e_port[32], e_job[96], e_to[48], secret[AUTH_HEX_LEN], e_sec[AUTH_HEX_LEN + 32];
    int src = h_launch_secret(cfg, secret, sizeof secret); /* the same job secret the other launches make */
    if (src < 0) {
        free(av);
        return src;
    }
    snprintf(e_sec, sizeof e_sec, "SYNCBENCH_JOB_SECRET=%s", secret);
    memset(secret, 0, sizeof secret);
    snprintf(e_addr, sizeof e_addr, "MASTER_ADDR=%s", host);
    snprintf(e_port, sizeof e_port, "MASTER_PORT=%d", port);
    snprintf(e_job, sizeof e_job, "SYNCBENCH_JOB=%s", job);
    snprintf(e_to, sizeof e_to, "SYNCBENCH_TIMEOUT=%d", cfg->timeout_s > 0 ? cfg->timeout_s : 60);
    char *set[] = {e_addr, e_port, e_job, "SYNCBENCH_LAUNCHED=1", e_to, e_sec, NULL};
    /* rank identity comes from mpirun's OMPI_COMM_WORLD_*: torchrun's variables would win over them */
    static const char *const unset[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL};
    if (!cfg->quiet) fprintf(stderr, "harness: job %s: %s -np %d ... (master %s:%d)\n", job, mpirun, cfg->nlocal, host, port);
    int code = s_run_child(av, set, unset);
    memset(e_sec, 0, sizeof e_sec);
    free(av);
    tp_cleanup_job(job); /* shared-memory channels a killed rank left behind */
    if (code < 0) return err_set(ERR_SYS, "cannot start mpirun: %s", strerror(errno));
    if (code == 0) return 0;
    if (code == 128 + SIGINT || code == 128 + SIGTERM) return h_interrupt(code - 128);
    return err_set(ERR_PEER, "mpirun exited %d (a rank failed: its message is above)", code);
}

int h_repo_root(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    snprintf(out, len, "%s", dirname(dirname(exe)));
    return 0;
}

int h_torch_peer_find(char *python, size_t plen, char *script, size_t slen)
{
    char root[PATH_MAX] = ".";
    if (h_repo_root(root, sizeof root) < 0) snprintf(root, sizeof root, ".");
    const char *s = getenv("SYNCBENCH_TORCH_SCRIPT");
    if (s) snprintf(script, slen, "%s", s);
    else snprintf(script, slen, "%s/peers/torch_ddp.py", root);
    if (access(script, R_OK) < 0) return err_set(ERR_NODEV, "the torch peer script %s is missing", script);
    const char *p = getenv("SYNCBENCH_TORCH_PYTHON");
    char venv[PATH_MAX + 32];
    snprintf(venv, sizeof venv, "%s/peers/.venv/bin/python", root);
    if (p) snprintf(python, plen, "%s", p);
    else if (access(venv, X_OK) == 0) snprintf(python, plen, "%s", venv);
    else if (s_which("python3", python, plen) < 0) return err_set(ERR_NODEV, "no python3 for the torch peer");
    char *av[] = {python, "-c", "import torch, torch.distributed as d; assert d.is_gloo_available()", NULL};
    int fd = open("/dev/null", O_WRONLY), saved = dup(STDERR_FILENO);
    if (fd >= 0) dup2(fd, STDERR_FILENO);
    int code = s_run_child(av, NULL, NULL);
    if (saved >= 0) dup2(saved, STDERR_FILENO), close(saved);
    if (fd >= 0) close(fd);
    if (code != 0)
        return err_set(ERR_NODEV, "%s cannot import torch with gloo (`make peers` installs it into peers/.venv)", python);
    return 0;
}

int h_torch_peer_run(const h_opts_t *o, const char *mode, int world)
{
    static int s_missing; /* said once */
    char python[PATH_MAX], script[PATH_MAX];
    if (s_missing) return ERR_NODEV;
    if (h_torch_peer_find(python, sizeof python, script, sizeof script) < 0) {
        s_missing = 1;
        fprintf(stderr, "harness: --peers: no torch rows: %s\n", err_detail());
        err_clear();
        return ERR_NODEV;
    }
    int run = o->argc > 1 && !strcmp(o->argv[1], "run");
    size_t hi = o->size_max;
    int iters = o->iters;
    if (run && hi > (16u << 20)) hi = 16u << 20; /* `harness run` keeps bench short, as its ranks do */
    if (run && iters > 10) iters = 10;
    char s_world[16], s_sizes[64], s_factor[32], s_iters[16], s_warm[16], s_batch[16], s_steps[16], s_wsteps[16],
        s_bucket[32], s_seed[32], s_timeout[16];
    snprintf(s_world, sizeof s_world, "%d", world);
    snprintf(s_sizes, sizeof s_sizes, "%zu:%zu", o->size_min, hi);
    snprintf(s_factor, sizeof s_factor, "%g", o->factor);
    snprintf(s_iters, sizeof s_iters, "%d", iters);
    snprintf(s_warm, sizeof s_warm, "%d", o->warmup);
    snprintf(s_batch, sizeof s_batch, "%d", o->batch);
    snprintf(s_steps, sizeof s_steps, "%d", o->steps);
    snprintf(s_wsteps, sizeof s_wsteps, "%d", o->warmup_steps);
    snprintf(s_bucket, sizeof s_bucket, "%g", o->bucket_mb);
    snprintf(s_seed, sizeof s_seed, "%llu", o->seed);
    snprintf(s_timeout, sizeof s_timeout, "%d", o->timeout_s);
    char *av[48];
    int k = 0;
    av[k++] = python, av[k++] = script, av[k++] = (char *)mode, av[k++] = "--procs", av[k++] = s_world;
    av[k++] = "--timeout", av[k++] = s_timeout;
    if (!strcmp(mode, "bench")) {
        av[k++] = "--sizes", av[k++] = s_sizes, av[k++] = "--factor", av[k++] = s_factor;
        av[k++] = "--iters", av[k++] = s_iters, av[k++] = "--warmup", av[k++] = s_warm;
        av[k++] = "--dtype", av[k++] = (char *)dt_name(o->dtype), av[k++] = "--op", av[k++] = (char *)op_name(o->op);
    } else {
        av[k++] = "--model", av[k++] = (char *)o->model, av[k++] = "--batch", av[k++] = s_batch;
        av[k++] = "--steps", av[k++] = s_steps, av[k++] = "--warmup-steps", av[k++] = s_wsteps;
        av[k++] = "--optim", av[k++] = (char *)o->optim, av[k++] = "--bucket-mb", av[k++] = s_bucket;
        av[k++] = "--seed", av[k++] = s_seed;
        if (o->no_overlap) av[k++] = "--no-overlap";
    }
    if (o->json) av[k++] = "--json", av[k++] = (char *)o->json;
    av[k] = NULL;
    int code = s_run_child(av, NULL, NULL);
    if (code == 0) return 0;
    if (code == 128 + SIGINT || code == 128 + SIGTERM) return h_interrupt(code - 128);
    fprintf(stderr, "harness: the torch peer (%s %s at %d ranks) failed (exit %d)\n", script, mode, world, code);
    return ERR_PEER;
}
