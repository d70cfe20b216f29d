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
#include "harness/launch/launch.h"
#include "core/proc.h"
#include "core/auth.h"
#include "core/err.h"
#include "core/rundir.h"
#include "core/tp.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_LINE_MAX   4096          /* longer lines are split */
#define S_ERROR_LEN  1024          /* a rank's error (H_ERROR_TAG lines) kept for the failure line */
#define S_GRACE_MS   2000
#define S_DRAIN_MS   1000          /* after all ranks exited, wait this long at most for pipes to close */

enum { S_OUT = 0, S_ERR = 1 };
enum { S_CAUSE_NONE = 0, S_CAUSE_RANK, S_CAUSE_SIGNAL, S_CAUSE_STDOUT, S_CAUSE_STOPPED };
/* A rank stopped (SIGSTOP, a debugger) this long ends the job, naming it: half the timeout, at most 10 s
 * (the PS's heartbeat deadline), at least 1 s. Its peers would only time out, at the whole timeout: the state
 * is read from /proc, so a loaded host (ranks running or waiting, never stopped) cannot cross it. */
#define S_STOP_CHECK_MS 200        /* how often the ranks' states are read */

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
    char   error[S_ERROR_LEN];       /* its H_ERROR_TAG lines, joined by '\n' ("" if none) */
    char **envp;
    long long stopped_at;            /* when it was first seen stopped (state T), 0 while it runs */
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
    char   fail[256];                /* why the launch itself failed (fork, poll), for err_set */
    char   stalled[160];             /* ranks found stopped (SIGSTOP, state T) when a rank failed */
    int    stop_limit_ms;            /* a rank stopped this long ends the job (PROC_STOP_MAX_MS) */
    long long stop_checked_ms, stopped_ms; /* the last check of states; how long the cause rank was stopped */
    struct pollfd *pfd;              /* poll set: the signalfd, then the open rank pipes */
    int   *pmap;                     /* pfd[k] (k >= 1) is rank pmap[k] / 2, stream pmap[k] % 2 */
    sigset_t set, oldmask;           /* the signals read from sfd; the mask before the launch */
    struct sigaction old_chld, old_pipe;
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

/* ---- output relay ----------------------------------------------------------------------------- */

/* A line of r's error (H_ERROR_TAG removed): appended, a leading "rank R: " of its own dropped. */
static void s_keep_error(s_rank_t *r, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    char own[32];
    int ol = snprintf(own, sizeof own, "rank %d: ", r->rank);
    if (!r->error[0] && len > (size_t)ol && !memcmp(line, own, (size_t)ol)) line += ol, len -= (size_t)ol;
    size_t at = strlen(r->error);
    if (at > 0 && at < sizeof r->error - 1) r->error[at++] = '\n';
    if (len > sizeof r->error - 1 - at) len = sizeof r->error - 1 - at;
    memcpy(r->error + at, line, len);
    r->error[at + len] = '\0';
}

/* One whole line (without its '\n') of rank r's stream: written prefixed, or kept when it is the rank's error. */
static void s_line(s_launch_t *L, s_rank_t *r, int stream, const char *line, size_t len)
{
    (void)L;
    size_t tl = sizeof H_ERROR_TAG - 1;
    if (stream == S_ERR && len >= tl && !memcmp(line, H_ERROR_TAG, tl)) {
        s_keep_error(r, line + tl, len - tl);
        return;
    }
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
        s_signal_all(L, SIGCONT); /* a stopped rank can only act on its SIGTERM once it runs */
    }
    if (now_kill && !L->killed) {
        L->killed = 1;
        s_signal_all(L, SIGKILL);
    }
}

/* When a rank failed: the others that are stopped are the likely stalled peers (its timeout says which
 * peer it waited on only as a rank number; this says why). */
static void s_note_stalled(s_launch_t *L)
{
    size_t off = 0;
    for (int i = 0; i < L->n && off < sizeof L->stalled; i++) {
        const s_rank_t *r = &L->r[i];
        if (r->pid <= 0 || r->exited || !proc_stopped((int)r->pid)) continue;
        off += (size_t)snprintf(L->stalled + off, sizeof L->stalled - off, "%s%d", off ? ", " : "", r->rank);
    }
}

/* A rank stopped for stop_limit_ms ends the job (S_CAUSE_STOPPED, naming it); a rank that runs again before
 * that starts its count afresh. */
static void s_check_stopped(s_launch_t *L, long long now)
{
    if (now - L->stop_checked_ms < S_STOP_CHECK_MS) return;
    L->stop_checked_ms = now;
    for (int i = 0; i < L->n; i++) {
        s_rank_t *r = &L->r[i];
        if (r->pid <= 0 || r->exited || !proc_stopped((int)r->pid)) { r->stopped_at = 0; continue; }
        if (!r->stopped_at) r->stopped_at = now;
        if (now - r->stopped_at >= L->stop_limit_ms && L->cause == S_CAUSE_NONE) {
            L->cause = S_CAUSE_STOPPED;
            L->cause_rank = i;
            L->stopped_ms = now - r->stopped_at;
            s_note_stalled(L);
        }
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
            s_note_stalled(L);
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

/* Before the failure line: the errors of the ranks other than cause, each distinct one once, prefixed as
 * the relay prefixes (the cause's own error is in the failure line). */
static void s_other_errors(const s_launch_t *L, int cause)
{
    const char *said = cause >= 0 ? L->r[cause].error : "";
    for (int i = 0; i < L->n; i++) {
        const char *e = L->r[i].error;
        if (i == cause || !e[0] || !strcmp(e, said)) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = j != cause && !strcmp(L->r[j].error, e);
        if (seen) continue;
        fprintf(stderr, "[rank %d] harness: ", L->r[i].rank);
        for (const char *p = e; *p; p++) {
            fputc(*p, stderr);
            if (*p == '\n') fprintf(stderr, "[rank %d] ", L->r[i].rank);
        }
        fputc('\n', stderr);
    }
}

/* ---- the launcher ----------------------------------------------------------------------------- */

static volatile int s_isig;

int h_interrupt(int sig)
{
    s_isig = sig;
    return ERR_INTERRUPT;
}

int h_interrupt_signal(void) { return s_isig; }

/* The ranks' table and environments and the poll set: 0 or ERR_NOMEM (s_free undoes a partial one). */
static int s_alloc(s_launch_t *L, const h_launch_cfg_t *cfg, int world, const char *host, int port, const char *job,
                   const char *secret)
{
    L->r = calloc((size_t)cfg->nlocal, sizeof *L->r);
    L->pfd = calloc(1 + 2 * (size_t)cfg->nlocal, sizeof *L->pfd);
    L->pmap = calloc(1 + 2 * (size_t)cfg->nlocal, sizeof *L->pmap);
    if (!L->r || !L->pfd || !L->pmap) return err_set(ERR_NOMEM, "launcher: out of memory");
    if (cfg->timeout_s > 0 && cfg->timeout_s * 1000LL < L->grace_ms) L->grace_ms = cfg->timeout_s * 1000;
    L->stop_limit_ms = proc_stop_limit_ms((cfg->timeout_s > 0 ? cfg->timeout_s : 60) * 1000LL); /* ranks' default: 60 s */
    for (int i = 0; i < L->n; i++) {
        s_rank_t *r = &L->r[i];
        r->rank = cfg->node_rank * cfg->nlocal + i;
        r->fd[0] = r->fd[1] = -1;
        r->envp = h_launch_env(cfg, r->rank, world, i, cfg->node_rank, host, port, job, secret);
        if (!r->envp) return err_set(ERR_NOMEM, "launcher: out of memory");
    }
    return 0;
}

static void s_free(s_launch_t *L)
{
    for (int i = 0; L->r && i < L->n; i++) h_launch_env_free(&L->r[i].envp);
    free(L->r);
    free(L->pfd);
    free(L->pmap);
}

/* Signals: blocked for the whole launch, read from a signalfd. 0 or ERR_SYS (s_signals_end undoes). */
static int s_signals_begin(s_launch_t *L)
{
    sigemptyset(&L->set);
    sigaddset(&L->set, SIGCHLD);
    sigaddset(&L->set, SIGINT);
    sigaddset(&L->set, SIGTERM);
    sigaddset(&L->set, SIGHUP);
    struct sigaction sa_dfl = {.sa_handler = SIG_DFL}, sa_ign = {.sa_handler = SIG_IGN};
    sigaction(SIGCHLD, &sa_dfl, &L->old_chld);          /* SIG_IGN would auto-reap the ranks */
    sigaction(SIGPIPE, &sa_ign, &L->old_pipe);          /* a closed stdout is an error, not death */
    sigprocmask(SIG_BLOCK, &L->set, &L->oldmask);
    L->sfd = signalfd(-1, &L->set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (L->sfd < 0) return err_set(ERR_SYS, "launcher: signalfd: %s", strerror(errno));
    return 0;
}

static void s_signals_end(s_launch_t *L)
{
    if (L->sfd >= 0) close(L->sfd);
    L->sfd = -1;
    /* drop signals that arrived after the last read, so unblocking cannot kill us now */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&L->set, NULL, &zero) > 0) {}
    sigprocmask(SIG_SETMASK, &L->oldmask, NULL);
    sigaction(SIGPIPE, &L->old_pipe, NULL);
    sigaction(SIGCHLD, &L->old_chld, NULL);
}

static void s_start_all(s_launch_t *L, char **argv)
{
    pid_t self = getpid();
    for (int i = 0; i < L->n; i++) {
        if (s_start(L, i, self, &L->oldmask, argv) < 0) {
            snprintf(L->fail, sizeof L->fail, "launcher: cannot start rank %d: %s", L->r[i].rank, strerror(errno));
            L->cause = S_CAUSE_RANK;
            L->cause_rank = -1;
            s_stop(L, 0);
            break;
        }
    }
}

/* One poll over the signalfd and the open pipes (at most 100 ms), relaying what arrived. */
static void s_poll_once(s_launch_t *L, long long now)
{
    int np = 0;
    L->pfd[np] = (struct pollfd){.fd = L->sfd, .events = POLLIN};
    L->pmap[np++] = -1;
    for (int i = 0; i < L->n; i++)
        for (int s = 0; s < 2; s++)
            if (L->r[i].fd[s] >= 0) {
                L->pfd[np] = (struct pollfd){.fd = L->r[i].fd[s], .events = POLLIN};
                L->pmap[np++] = i * 2 + s;
            }
    int tmo = 100;                                       /* also a safety tick for missed SIGCHLDs */
    if (L->stopping && !L->killed && L->kill_at_ms - now < tmo) tmo = (int)(L->kill_at_ms - now);
    if (tmo < 0) tmo = 0;
    int pr = poll(L->pfd, (nfds_t)np, tmo);
    if (pr < 0 && errno != EINTR) {
        if (!L->fail[0]) snprintf(L->fail, sizeof L->fail, "launcher: poll: %s", strerror(errno));
        if (L->cause == S_CAUSE_NONE) { L->cause = S_CAUSE_RANK; L->cause_rank = -1; }
        s_stop(L, 1);
        usleep(10000);
        return;
    }
    for (int k = 1; pr > 0 && k < np; k++)
        if (L->pfd[k].revents) s_drain(L, &L->r[L->pmap[k] / 2], L->pmap[k] % 2);
}

/* Until every rank exited and its pipes closed (or S_DRAIN_MS after the exits): signals, exits, output. */
static void s_run(s_launch_t *L)
{
    long long all_exited_at = -1;
    for (;;) {
        s_handle_signals(L);
        s_check_exits(L);
        long long now = s_now_ms();
        if (L->cause == S_CAUSE_NONE) s_check_stopped(L, now);
        if (L->cause != S_CAUSE_NONE) s_stop(L, 0);
        if (L->stopping && !L->killed && now >= L->kill_at_ms) s_stop(L, 1);
        if (s_all_exited(L)) {
            if (all_exited_at < 0) {
                all_exited_at = now;
                /* pipes still open after every rank exited: strays the ranks forked hold them */
                if (s_pipes_open(L) && L->pgid > 0) (void)kill(-L->pgid, SIGKILL);
            }
            if (!s_pipes_open(L) || now - all_exited_at >= S_DRAIN_MS) break;
        }
        s_poll_once(L, now);
    }
}

/* Kill strays, relay the last output, reap every rank. */
static void s_reap_all(s_launch_t *L)
{
    /* The group leader is still a zombie, so the group id is ours: kill strays the ranks forked. */
    if (L->pgid > 0) (void)kill(-L->pgid, SIGKILL);
    for (int i = 0; i < L->n; i++) {
        s_rank_t *r = &L->r[i];
        for (int s = 0; s < 2; s++) {
            if (r->fd[s] >= 0) s_drain(L, r, s);
            s_close_stream(L, r, s);
        }
        if (r->pid > 0) {
            while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {}
        }
    }
    /* what killed ranks (and their strays) left in their run directories: sockets of a PS server */
    (void)rundir_sweep();
}

/* The launch's outcome as h_launch returns it. */
static int s_outcome(const s_launch_t *L, const h_launch_cfg_t *cfg)
{
    if (L->cause == S_CAUSE_SIGNAL && !cfg->quiet)
        fprintf(stderr, "harness: stopped all ranks on %s\n", strsignal(L->cause_sig));
    switch (L->cause) {
    case S_CAUSE_NONE: return 0;
    case S_CAUSE_SIGNAL: return h_interrupt(L->cause_sig);
    case S_CAUSE_STDOUT: return h_interrupt(SIGPIPE);
    case S_CAUSE_STOPPED:
        s_other_errors(L, -1);
        return err_set(ERR_PEER, "rank %d was stopped (SIGSTOP or a debugger) for %lld ms, past the launcher's limit of "
                       "%d ms (half of --timeout, at most %d s): the job was ended (stopped ranks: %s)",
                       L->r[L->cause_rank].rank, L->stopped_ms, L->stop_limit_ms, PROC_STOP_MAX_MS / 1000, L->stalled);
    default:
        if (L->cause_rank < 0) return err_set(ERR_SYS, "%s", L->fail);
        const s_rank_t *r = &L->r[L->cause_rank];
        char what[48];
        if (r->sig) snprintf(what, sizeof what, "killed by signal %d", r->sig);
        else snprintf(what, sizeof what, "exit %d", r->code);
        const char *why = r->error;
        s_other_errors(L, L->cause_rank);
        if (L->stalled[0])
            return err_set(ERR_PEER, "rank %d failed (%s)%s%s\nharness: rank %s was stopped (SIGSTOP or a debugger): the "
                           "stalled peer", r->rank, what, why[0] ? ": " : "", why, L->stalled);
        return err_set(ERR_PEER, "rank %d failed (%s)%s%s", r->rank, what, why[0] ? ": " : "", why);
    }
}

int h_launch(const h_launch_cfg_t *cfg, int argc, char **argv)
{
    int world = 0, port = 0;
    char host[256], job[64], secret[AUTH_HEX_LEN];
    CHECK(h_launch_check_cfg(cfg, argc, argv, &world, host, sizeof host, &port));
    CHECK(h_launch_job_id(cfg, job, sizeof job));
    CHECK(h_launch_secret(cfg, secret, sizeof secret));
    char **av = calloc((size_t)argc + 1, sizeof *av); /* argv copy, NULL-terminated */
    s_launch_t L = {.n = cfg->nlocal, .sfd = -1, .grace_ms = S_GRACE_MS, .stdout_ok = 1,
                    .child_setup = cfg->child_setup, .child_arg = cfg->child_arg};
    int rc = av ? s_alloc(&L, cfg, world, host, port, job, secret) : err_set(ERR_NOMEM, "launcher: out of memory");
    memset(secret, 0, sizeof secret);
    if (rc < 0) goto out;
    for (int i = 0; i < argc; i++) av[i] = argv[i];
    rc = s_signals_begin(&L);
    if (rc == 0) {
        if (!cfg->quiet)
            fprintf(stderr, "harness: job %s: starting ranks %d..%d of %d (node %d of %d, master %s:%d)\n", job,
                    L.r[0].rank, L.r[L.n - 1].rank, world, cfg->node_rank, cfg->nnodes > 0 ? cfg->nnodes : 1, host, port);
        s_start_all(&L, av);
        s_run(&L);
        s_reap_all(&L);
        /* every rank of this node is gone: remove shared-memory channels a killed rank left behind */
        tp_cleanup_job(job);
        rc = s_outcome(&L, cfg);
    }
    s_signals_end(&L);
out:
    s_free(&L);
    free(av);
    fflush(stderr);
    return rc;
}
