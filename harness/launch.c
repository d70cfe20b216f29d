/* launch.c: the harness launcher: fork + exec /proc/self/exe once per local rank with the rank
 * environment, relay output through pipes, stop all ranks on the first failure or on a signal, reap
 * everything. See launch.h for the contract.
 *
 * Design: one single-threaded poll() loop over a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP, blocked
 * for the whole launch so no signal can kill the launcher between fork and cleanup) and two
 * non-blocking pipes per rank. Exits are observed with waitid(WNOWAIT), so every rank stays a zombie
 * (its pid and its process group id cannot be reused) until the very end: signals always reach the
 * right processes. Ranks share one process group led by local rank 0; the final SIGKILL goes to that
 * group, which also catches anything the ranks forked. States: RUN -> (failure | signal) STOP: SIGTERM
 * sent, SIGKILL at the grace deadline -> all exited -> reap, report. */
#include "harness/launch.h"
#include "core/hash.h"
#include "core/port.h"
#include "core/tp.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define S_LINE_MAX   4096          /* longer lines are split */
#define S_LAST_LINES 8             /* stderr lines kept per rank */
#define S_LAST_LEN   512
#define S_GRACE_MS   2000
#define S_DRAIN_MS   1000          /* after all ranks exited, wait this long at most for pipes to close */
#define S_MAX_LOCAL  4096

enum { S_OUT = 0, S_ERR = 1 };
enum { S_CAUSE_NONE = 0, S_CAUSE_RANK, S_CAUSE_SIGNAL, S_CAUSE_STDOUT };

typedef struct {
    char   data[S_LINE_MAX];
    size_t len;
} s_linebuf_t;

typedef struct {
    int    rank;                     /* global rank */
    pid_t  pid;                      /* 0: not started */
    int    exited;                   /* exit observed (still a zombie until s_reap_all) */
    int    code;                     /* CLD_EXITED: exit code */
    int    sig;                      /* CLD_KILLED/DUMPED: signal */
    int    fd[2];                    /* read ends of stdout / stderr; -1 when closed */
    s_linebuf_t lb[2];
    char   last[S_LAST_LINES][S_LAST_LEN];
    int    nlast;                    /* lines stored so far (ring index = nlast % S_LAST_LINES) */
    char **envp;
} s_rank_t;

typedef struct {
    s_rank_t *r;
    int    n;
    pid_t  pgid;                     /* ranks' process group (local rank 0's pid); 0 if none */
    int    sfd;                      /* signalfd */
    int    cause, cause_rank, cause_sig;
    int    stopping, killed;
    long long kill_at_ms;            /* SIGKILL deadline once stopping */
    int    grace_ms;
    int    stdout_ok;
    int  (*child_setup)(void *, int); /* cfg->child_setup, run between fork and exec */
    void  *child_arg;
} s_launch_t;

static long long s_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Write all of buf; returns 0 or -1 (EPIPE and other errors). Handles EINTR and non-blocking fds. */
static int s_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                (void)poll(&p, 1, 100);
                continue;
            }
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

int h_is_launched(void)
{
    const char *e = getenv("SYNCBENCH_LAUNCHED");
    return e && !strcmp(e, "1");
}

/* ---- configuration ---------------------------------------------------------------------------- */

/* "HOST:PORT" or "[V6]:PORT" -> host (brackets removed), port. Returns 0 or -1. */
static int s_parse_master(const char *m, char *host, size_t hlen, int *port)
{
    const char *colon, *hs = m, *he;
    if (m[0] == '[') {
        const char *rb = strchr(m, ']');
        if (!rb || rb[1] != ':') return -1;
        hs = m + 1;
        he = rb;
        colon = rb + 1;
    } else {
        colon = strrchr(m, ':');
        if (!colon) return -1;
        he = colon;
    }
    size_t n = (size_t)(he - hs);
    if (n == 0 || n >= hlen) return -1;
    memcpy(host, hs, n);
    host[n] = '\0';
    const char *p = colon + 1;
    if (!*p) return -1;
    long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > 65535) return -1;
    }
    if (v < 1) return -1;
    *port = (int)v;
    return 0;
}

static void s_make_job(char *job, size_t len)
{
    unsigned long long rnd = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &rnd, sizeof rnd) != (ssize_t)sizeof rnd) rnd = 0;
        close(fd);
    }
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    rnd ^= (unsigned long long)t.tv_nsec * 0x9e3779b97f4a7c15ULL;
    snprintf(job, len, "sb-%ld-%d-%08llx", (long)t.tv_sec, (int)getpid(), rnd & 0xffffffffULL);
}

static int s_is_ours(const char *kv)
{
    static const char *names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                  "MASTER_ADDR", "MASTER_PORT", "SYNCBENCH_JOB", "SYNCBENCH_LAUNCHED",
                                  "SYNCBENCH_TIMEOUT", "SYNCBENCH_GPUS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t l = strlen(names[i]);
        if (!strncmp(kv, names[i], l) && kv[l] == '=') return 1;
    }
    return 0;
}

static char *s_kv(const char *k, const char *v)
{
    size_t n = strlen(k) + strlen(v) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s=%s", k, v);
    return s;
}

static char *s_kvi(const char *k, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    return s_kv(k, b);
}

/* envp = inherited environment (pointers, not copies) minus our names, plus ours (malloc'd). */
static char **s_build_env(const h_launch_cfg_t *cfg, int rank, int world, int local, int node,
                          const char *host, int port, const char *job)
{
    size_t ninh = 0;
    for (char **e = environ; *e; e++) ninh++;
    char **envp = calloc(ninh + 16, sizeof *envp);
    if (!envp) return NULL;
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (!s_is_ours(*e)) envp[k++] = *e;
    char *own[12] = {0};
    int no = 0;
    own[no++] = s_kvi("RANK", rank);
    own[no++] = s_kvi("WORLD_SIZE", world);
    own[no++] = s_kvi("LOCAL_RANK", local);
    own[no++] = s_kvi("LOCAL_WORLD_SIZE", cfg->nlocal);
    own[no++] = s_kvi("GROUP_RANK", node);
    own[no++] = s_kv("MASTER_ADDR", host);
    own[no++] = s_kvi("MASTER_PORT", port);
    own[no++] = s_kv("SYNCBENCH_JOB", job);
    own[no++] = s_kv("SYNCBENCH_LAUNCHED", "1");
    if (cfg->timeout_s > 0) own[no++] = s_kvi("SYNCBENCH_TIMEOUT", cfg->timeout_s);
    if (cfg->gpus > 0) own[no++] = s_kvi("SYNCBENCH_GPUS", cfg->gpus);
    int bad = 0;
    for (int i = 0; i < no; i++) {
        if (!own[i]) bad = 1;
        envp[k++] = own[i];
    }
    envp[k] = NULL;
    if (bad) {
        for (int i = 0; i < no; i++) free(own[i]);
        free(envp);
        return NULL;
    }
    return envp;
}

/* Free the strings we own in envp: the entries that s_is_ours() (inherited ones never are). */
static void s_env_destroy(char ***envp_p)
{
    char **envp = *envp_p;
    if (!envp) return;
    for (char **e = envp; *e; e++)
        if (s_is_ours(*e)) free(*e);
    free(envp);
    *envp_p = NULL;
}

/* ---- output relay ----------------------------------------------------------------------------- */

static void s_keep_line(s_rank_t *r, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    if (len == 0) return;
    if (len >= S_LAST_LEN) len = S_LAST_LEN - 1;
    char *d = r->last[r->nlast % S_LAST_LINES];
    memcpy(d, line, len);
    d[len] = '\0';
    r->nlast++;
}

/* One whole line (without its '\n') of rank r's stream: keep it (stderr) and write it prefixed. */
static void s_line(s_launch_t *L, s_rank_t *r, int stream, const char *line, size_t len)
{
    (void)L;
    if (stream == S_ERR) s_keep_line(r, line, len);
    char out[S_LINE_MAX + 64];
    char pre[32];
    int pl = snprintf(pre, sizeof pre, "[rank %d] ", r->rank);
    size_t off = 0;
    if (!(len >= (size_t)pl && !memcmp(line, pre, (size_t)pl))) {   /* not already prefixed (core/log) */
        memcpy(out, pre, (size_t)pl);
        off = (size_t)pl;
    }
    memcpy(out + off, line, len);
    off += len;
    out[off++] = '\n';
    (void)s_write_all(STDERR_FILENO, out, off);
}

static void s_relay(s_launch_t *L, s_rank_t *r, int stream, const char *data, size_t n)
{
    if (stream == S_OUT && r->rank == 0) {             /* the result table: unchanged */
        if (L->stdout_ok && s_write_all(STDOUT_FILENO, data, n) < 0 && errno == EPIPE) {
            L->stdout_ok = 0;
            if (L->cause == S_CAUSE_NONE) L->cause = S_CAUSE_STDOUT;
        }
        return;
    }
    s_linebuf_t *b = &r->lb[stream];
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        size_t room = S_LINE_MAX - b->len;
        if (take > room) {                              /* too long: emit what fits as a line */
            memcpy(b->data + b->len, data, room);
            b->len += room;
            s_line(L, r, stream, b->data, b->len);
            b->len = 0;
            data += room;
            n -= room;
            continue;
        }
        memcpy(b->data + b->len, data, take);
        b->len += take;
        if (!nl) return;
        s_line(L, r, stream, b->data, b->len);
        b->len = 0;
        data += take + 1;
        n -= take + 1;
    }
}

static void s_close_stream(s_launch_t *L, s_rank_t *r, int stream)
{
    if (r->fd[stream] < 0) return;
    close(r->fd[stream]);
    r->fd[stream] = -1;
    if (r->lb[stream].len > 0) {                        /* last line without '\n' */
        s_line(L, r, stream, r->lb[stream].data, r->lb[stream].len);
        r->lb[stream].len = 0;
    }
}

/* Read what is there (non-blocking); EOF closes the stream. */
static void s_drain(s_launch_t *L, s_rank_t *r, int stream)
{
    char buf[65536];
    for (int i = 0; i < 4 && r->fd[stream] >= 0; i++) {
        ssize_t n = read(r->fd[stream], buf, sizeof buf);
        if (n > 0) {
            s_relay(L, r, stream, buf, (size_t)n);
            if ((size_t)n < sizeof buf) return;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        s_close_stream(L, r, stream);                   /* EOF or error */
    }
}

/* ---- process control -------------------------------------------------------------------------- */

static void s_signal_all(s_launch_t *L, int sig)
{
    if (L->pgid > 0) (void)kill(-L->pgid, sig);
    for (int i = 0; i < L->n; i++)                      /* unreaped, so the pids are still ours */
        if (L->r[i].pid > 0 && !L->r[i].exited) (void)kill(L->r[i].pid, sig);
}

static void s_stop(s_launch_t *L, int now_kill)
{
    if (!L->stopping) {
        L->stopping = 1;
        L->kill_at_ms = s_now_ms() + L->grace_ms;
        s_signal_all(L, SIGTERM);
    }
    if (now_kill && !L->killed) {
        L->killed = 1;
        s_signal_all(L, SIGKILL);
    }
}

static void s_check_exits(s_launch_t *L)
{
    for (int i = 0; i < L->n; i++) {
        s_rank_t *r = &L->r[i];
        if (r->pid <= 0 || r->exited) continue;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
            if (errno == EINTR) { i--; continue; }
            r->exited = 1;                              /* ECHILD: someone else reaped it */
            r->code = 255;
        } else if (si.si_pid == 0) {
            continue;
        } else {
            r->exited = 1;
            if (si.si_code == CLD_EXITED) r->code = si.si_status;
            else r->sig = si.si_status;
        }
        if ((r->code != 0 || r->sig != 0) && L->cause == S_CAUSE_NONE) {
            L->cause = S_CAUSE_RANK;
            L->cause_rank = i;
        }
    }
}

static int s_all_exited(const s_launch_t *L)
{
    for (int i = 0; i < L->n; i++)
        if (L->r[i].pid > 0 && !L->r[i].exited) return 0;
    return 1;
}

static int s_pipes_open(const s_launch_t *L)
{
    for (int i = 0; i < L->n; i++)
        if (L->r[i].fd[0] >= 0 || L->r[i].fd[1] >= 0) return 1;
    return 0;
}

static void s_handle_signals(s_launch_t *L)
{
    struct signalfd_siginfo si;
    for (;;) {
        ssize_t n = read(L->sfd, &si, sizeof si);
        if (n != (ssize_t)sizeof si) return;            /* EAGAIN: none left */
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) continue;                   /* exits are checked every loop */
        if (L->cause == S_CAUSE_NONE) {
            L->cause = S_CAUSE_SIGNAL;
            L->cause_sig = sig;
        } else if (L->stopping) {
            s_stop(L, 1);                               /* second signal: no more grace */
        }
    }
}

/* Child side of fork: never returns. Only async-signal-safe calls. */
static void s_child(const s_launch_t *L, int i, int out_w, int err_w, pid_t pgid, pid_t parent,
                    const sigset_t *oldmask, char **argv)
{
    const s_rank_t *r = &L->r[i];
    (void)setpgid(0, pgid);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) _exit(126);
    int nul = open("/dev/null", O_RDONLY);
    if (nul < 0 || dup2(nul, STDIN_FILENO) < 0 || dup2(out_w, STDOUT_FILENO) < 0 ||
        dup2(err_w, STDERR_FILENO) < 0)
        _exit(126);
    if (nul > 2) close(nul);
    if (L->child_setup && L->child_setup(L->child_arg, i) != 0) {
        static const char smsg[] = "harness: launcher: rank set-up (child_setup) failed\n";
        ssize_t w = write(STDERR_FILENO, smsg, sizeof smsg - 1);
        (void)w;
        _exit(126);
    }
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    execve("/proc/self/exe", argv, r->envp);
    static const char msg[] = "harness: launcher: exec /proc/self/exe failed\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
}

/* Start rank i; returns 0 or -1 (errno set). */
static int s_start(s_launch_t *L, int i, pid_t parent, const sigset_t *oldmask, char **argv)
{
    s_rank_t *r = &L->r[i];
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0) return -1;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        close(po[0]); close(po[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) s_child(L, i, po[1], pe[1], L->pgid, parent, oldmask, argv);
    /* also set here (the child does too) so the group exists before the next fork; if both fail the
     * rank stays in our group and is still signalled by pid */
    (void)setpgid(pid, L->pgid > 0 ? L->pgid : pid);
    if (L->pgid == 0) L->pgid = pid;
    r->pid = pid;
    close(po[1]);
    close(pe[1]);
    r->fd[S_OUT] = po[0];
    r->fd[S_ERR] = pe[0];
    fcntl(po[0], F_SETFL, fcntl(po[0], F_GETFL) | O_NONBLOCK);
    fcntl(pe[0], F_SETFL, fcntl(pe[0], F_GETFL) | O_NONBLOCK);
    return 0;
}

static const char *s_last_line(const s_rank_t *r)
{
    if (r->nlast == 0) return NULL;
    return r->last[(r->nlast - 1) % S_LAST_LINES];
}

/* ---- the launcher ----------------------------------------------------------------------------- */

int h_launch(const h_launch_cfg_t *cfg, int argc, char **argv)
{
    int nnodes = cfg->nnodes > 0 ? cfg->nnodes : 1;
    if (cfg->nlocal < 1 || cfg->nlocal > S_MAX_LOCAL) {
        fprintf(stderr, "harness: launcher: ranks per node must be 1..%d (got %d)\n", S_MAX_LOCAL, cfg->nlocal);
        return 1;
    }
    if (cfg->node_rank < 0 || cfg->node_rank >= nnodes || nnodes > 65536) {
        fprintf(stderr, "harness: launcher: --node-rank %d is outside 0..%d\n", cfg->node_rank, nnodes - 1);
        return 1;
    }
    if (nnodes > 1 && !cfg->master) {
        fprintf(stderr, "harness: launcher: --nnodes %d needs --master HOST:PORT\n", nnodes);
        return 1;
    }
    long long world_ll = (long long)nnodes * cfg->nlocal;
    if (world_ll > 1000000) {
        fprintf(stderr, "harness: launcher: world of %lld ranks is too large\n", world_ll);
        return 1;
    }
    int world = (int)world_ll;
    if (argc < 1 || !argv || !argv[0]) {
        fprintf(stderr, "harness: launcher: empty command line\n");
        return 1;
    }
    char host[256];
    int port;
    if (cfg->master) {
        if (s_parse_master(cfg->master, host, sizeof host, &port) < 0) {
            fprintf(stderr, "harness: launcher: --master '%s' is not HOST:PORT (port 1..65535)\n", cfg->master);
            return 1;
        }
    } else {
        snprintf(host, sizeof host, "127.0.0.1");
        port = port_free_loopback();
        if (port < 0) {
            fprintf(stderr, "harness: launcher: no free port on 127.0.0.1: %s\n", strerror(errno));
            return 1;
        }
    }
    /* The job id must be the same on every node (the rendezvous rejects a rank of another job) and
     * differ between the launches one process makes (the driver runs one per world size and engine). */
    static int launches;
    int seq = ++launches;
    char job[64];
    const char *ej = getenv("SYNCBENCH_JOB");
    int jl;
    if (ej && *ej) {
        jl = seq == 1 ? snprintf(job, sizeof job, "%s", ej) : snprintf(job, sizeof job, "%s-%d", ej, seq);
    } else if (nnodes > 1) {
        jl = snprintf(job, sizeof job, "mn-%016llx-%d", (unsigned long long)hash_str(cfg->master), seq);
    } else {
        s_make_job(job, sizeof job);
        jl = (int)strlen(job);
    }
    if (jl < 0 || jl >= (int)sizeof job) {
        fprintf(stderr, "harness: launcher: SYNCBENCH_JOB is longer than %zu characters\n", sizeof job - 8);
        return 1;
    }

    /* argv copy, NULL-terminated */
    char **av = calloc((size_t)argc + 1, sizeof *av);
    s_launch_t L = {.n = cfg->nlocal, .sfd = -1, .grace_ms = S_GRACE_MS, .stdout_ok = 1,
                    .child_setup = cfg->child_setup, .child_arg = cfg->child_arg};
    L.r = calloc((size_t)cfg->nlocal, sizeof *L.r);
    struct pollfd *pfd = calloc(1 + 2 * (size_t)cfg->nlocal, sizeof *pfd);
    int *pmap = calloc(1 + 2 * (size_t)cfg->nlocal, sizeof *pmap);
    int rc = 1;
    if (!av || !L.r || !pfd || !pmap) {
        fprintf(stderr, "harness: launcher: out of memory\n");
        free(av); free(L.r); free(pfd); free(pmap);
        return 1;
    }
    for (int i = 0; i < argc; i++) av[i] = argv[i];
    if (cfg->timeout_s > 0 && cfg->timeout_s * 1000LL < L.grace_ms) L.grace_ms = cfg->timeout_s * 1000;

    for (int i = 0; i < L.n; i++) {
        s_rank_t *r = &L.r[i];
        r->rank = cfg->node_rank * cfg->nlocal + i;
        r->fd[0] = r->fd[1] = -1;
        r->envp = s_build_env(cfg, r->rank, world, i, cfg->node_rank, host, port, job);
        if (!r->envp) {
            fprintf(stderr, "harness: launcher: out of memory\n");
            goto out_env;
        }
    }

    /* signals: block for the whole launch, read them from a signalfd */
    sigset_t set, oldmask;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    struct sigaction sa_dfl = {.sa_handler = SIG_DFL}, sa_ign = {.sa_handler = SIG_IGN}, old_chld, old_pipe;
    sigaction(SIGCHLD, &sa_dfl, &old_chld);             /* SIG_IGN would auto-reap the ranks */
    sigaction(SIGPIPE, &sa_ign, &old_pipe);             /* a closed stdout is an error, not death */
    sigprocmask(SIG_BLOCK, &set, &oldmask);
    L.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (L.sfd < 0) {
        fprintf(stderr, "harness: launcher: signalfd: %s\n", strerror(errno));
        goto out_sig;
    }

    if (!cfg->quiet)
        fprintf(stderr, "harness: job %s: starting ranks %d..%d of %d (node %d of %d, master %s:%d)\n", job,
                L.r[0].rank, L.r[L.n - 1].rank, world, cfg->node_rank, nnodes, host, port);
    pid_t self = getpid();
    for (int i = 0; i < L.n; i++) {
        if (s_start(&L, i, self, &oldmask, av) < 0) {
            fprintf(stderr, "harness: launcher: cannot start rank %d: %s\n", L.r[i].rank, strerror(errno));
            L.cause = S_CAUSE_RANK;
            L.cause_rank = -1;
            s_stop(&L, 0);
            break;
        }
    }

    long long all_exited_at = -1;
    for (;;) {
        s_handle_signals(&L);
        s_check_exits(&L);
        if (L.cause != S_CAUSE_NONE) s_stop(&L, 0);
        long long now = s_now_ms();
        if (L.stopping && !L.killed && now >= L.kill_at_ms) s_stop(&L, 1);
        if (s_all_exited(&L)) {
            if (all_exited_at < 0) {
                all_exited_at = now;
                /* pipes still open after every rank exited: strays the ranks forked hold them */
                if (s_pipes_open(&L) && L.pgid > 0) (void)kill(-L.pgid, SIGKILL);
            }
            if (!s_pipes_open(&L) || now - all_exited_at >= S_DRAIN_MS) break;
        }
        int np = 0;
        pfd[np] = (struct pollfd){.fd = L.sfd, .events = POLLIN};
        pmap[np++] = -1;
        for (int i = 0; i < L.n; i++)
            for (int s = 0; s < 2; s++)
                if (L.r[i].fd[s] >= 0) {
                    pfd[np] = (struct pollfd){.fd = L.r[i].fd[s], .events = POLLIN};
                    pmap[np++] = i * 2 + s;
                }
        int tmo = 100;                                   /* also a safety tick for missed SIGCHLDs */
        if (L.stopping && !L.killed && L.kill_at_ms - now < tmo) tmo = (int)(L.kill_at_ms - now);
        if (tmo < 0) tmo = 0;
        int pr = poll(pfd, (nfds_t)np, tmo);
        if (pr < 0 && errno != EINTR) {
            fprintf(stderr, "harness: launcher: poll: %s\n", strerror(errno));
            if (L.cause == S_CAUSE_NONE) { L.cause = S_CAUSE_RANK; L.cause_rank = -1; }
            s_stop(&L, 1);
            usleep(10000);
            continue;
        }
        for (int k = 1; pr > 0 && k < np; k++)
            if (pfd[k].revents) s_drain(&L, &L.r[pmap[k] / 2], pmap[k] % 2);
    }

    /* The group leader is still a zombie, so the group id is ours: kill strays the ranks forked. */
    if (L.pgid > 0) (void)kill(-L.pgid, SIGKILL);
    for (int i = 0; i < L.n; i++) {
        s_rank_t *r = &L.r[i];
        for (int s = 0; s < 2; s++) {
            if (r->fd[s] >= 0) s_drain(&L, r, s);
            s_close_stream(&L, r, s);
        }
        if (r->pid > 0) {
            while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {}
        }
    }

    /* every rank of this node is gone: remove shared-memory channels a killed rank left behind */
    tp_cleanup_job(job);

    switch (L.cause) {
    case S_CAUSE_NONE: rc = 0; break;
    case S_CAUSE_SIGNAL: rc = 128 + L.cause_sig; break;
    case S_CAUSE_STDOUT: rc = 128 + SIGPIPE; break;
    default:
        rc = 1;
        if (L.cause_rank >= 0) {
            const s_rank_t *r = &L.r[L.cause_rank];
            char what[48];
            if (r->sig) snprintf(what, sizeof what, "killed by signal %d", r->sig);
            else snprintf(what, sizeof what, "exit %d", r->code);
            const char *last = s_last_line(r);
            fprintf(stderr, "harness: rank %d failed (%s)%s%s\n", r->rank, what, last ? ": " : "", last ? last : "");
        }
        break;
    }
    if (L.cause == S_CAUSE_SIGNAL && !cfg->quiet)
        fprintf(stderr, "harness: stopped all ranks on %s\n", strsignal(L.cause_sig));

    close(L.sfd);
    L.sfd = -1;
out_sig:
    {   /* drop signals that arrived after the last read, so unblocking cannot kill us now */
        struct timespec zero = {0, 0};
        while (sigtimedwait(&set, NULL, &zero) > 0) {}
    }
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
out_env:
    for (int i = 0; i < L.n; i++) s_env_destroy(&L.r[i].envp);
    free(L.r);
    free(pfd);
    free(pmap);
    free(av);
    fflush(stderr);
    return rc;
}
