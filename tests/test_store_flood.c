/* test_store_flood.c: rank 0's store under a descriptor flood from loopback (issue 33 §1, core/store_conn.h). */
/* A flooder (a child process) keeps up to 3000 TCP connections to rank 0's store port from 8 loopback source
 * addresses (127.0.0.2-9), starting at most 1,000 connects a second without blocking and reopening each one the
 * store ends, while two env-started ranks train with --json; rank 0 runs with 1024 descriptors (ulimit -n), so a
 * store that kept every connection would run out of them. The run must finish, rank 1 joining during the flood, its
 * results written, rank 0's descriptors stay under 250, the flooder must see the store end more than 500 of its
 * established connections in the flood's first 1.5 s (before rank 1 starts, so not by rank 0 exiting, and before
 * any 5 s deadline: the bounds' work alone), and the store must report what it closed (once an interval, not a line
 * each). Without a secret and with one (CURVE). Traffic only to loopback. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/port.h"
#include "tests/lib/ranks.h"

#define NFLOOD 3000
#define NSRC 8

static double s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* A non-blocking connect from 127.0.0.(2 + src % NSRC) to the store's port: the descriptor (its connect under way
 * or done), or -1. */
static int s_open(int port, int src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in me = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    char a[32];
    snprintf(a, sizeof a, "127.0.0.%d", 2 + src % NSRC);
    inet_pton(AF_INET, a, &me.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 ||
        (connect(fd, (struct sockaddr *)&to, sizeof to) != 0 && errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

static volatile sig_atomic_t s_stop;
static void s_on_term(int sig) { (void)sig; s_stop = 1; }

enum { FL_NONE, FL_CONNECTING, FL_OPEN };
#define FL_CONNECT_S 2.0 /* a connect not done by then (the store's backlog full) is given up and retried */
#define FL_RATE 1000.0   /* connects started a second, at most (a flood, not a benchmark of the kernel's accept path) */

/* The flooder: until SIGTERM or for secs seconds keep NFLOOD connections open, reopening each one that ends. Nothing
 * blocks: connects are non-blocking and one poll(2) of at most 50 ms a pass watches every descriptor, so a connection
 * the store closes (its end of file or reset) is seen within a pass of it. Writes "opened N closed M early E" to out:
 * M connections were established and then ended by the store (the flooder ends none), E of them within the first
 * window seconds, while rank 0 still waits for rank 1: those the store ended on purpose, not by exiting. */
static void s_flooder(int port, double secs, double window, const char *out)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl); }
    signal(SIGTERM, s_on_term);
    static int fd[NFLOOD], st[NFLOOD];
    static double t0[NFLOOD];
    static struct pollfd pf[NFLOOD];
    static int slot[NFLOOD];
    for (int i = 0; i < NFLOOD; i++) fd[i] = -1, st[i] = FL_NONE;
    long opened = 0, closed = 0, early = 0;
    double start = s_now(), end = start + secs, last = start, budget = 0;
    while (!s_stop && s_now() < end) {
        int np = 0;
        double now = s_now();
        budget += (now - last) * FL_RATE, last = now;
        if (budget > FL_RATE / 10) budget = FL_RATE / 10;
        for (int i = 0; i < NFLOOD; i++) {
            if (st[i] == FL_CONNECTING && now - t0[i] > FL_CONNECT_S) { close(fd[i]); fd[i] = -1; st[i] = FL_NONE; }
            if (st[i] == FL_NONE && budget >= 1 && (fd[i] = s_open(port, i)) >= 0)
                st[i] = FL_CONNECTING, t0[i] = now, budget--;
            if (st[i] == FL_NONE) continue;
            pf[np] = (struct pollfd){.fd = fd[i], .events = st[i] == FL_CONNECTING ? POLLOUT : POLLIN};
            slot[np++] = i;
        }
        if (poll(pf, (nfds_t)np, 50) <= 0) continue;
        for (int k = 0; k < np; k++) {
            int i = slot[k];
            if (!pf[k].revents) continue;
            if (st[i] == FL_CONNECTING) {
                int e = 0;
                socklen_t el = sizeof e;
                if (getsockopt(fd[i], SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) { st[i] = FL_OPEN; opened++; continue; }
                close(fd[i]); fd[i] = -1; st[i] = FL_NONE; /* refused or failed: never open, not the store's closing */
                continue;
            }
            char b[512];
            ssize_t n;
            while ((n = recv(fd[i], b, sizeof b, MSG_DONTWAIT)) > 0) {} /* a greeting ZeroMQ sent: not an end */
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(fd[i]);
                fd[i] = -1;
                st[i] = FL_NONE;
                closed++;
                early += s_now() - start <= window;
            }
        }
    }
    FILE *f = fopen(out, "w");
    if (f) { fprintf(f, "opened %ld closed %ld early %ld\n", opened, closed, early); fclose(f); }
    _exit(0);
}

static void s_run(int secure)
{
    char harness[512], cmd[4096], out[1 << 15], json[128], fstat[128];
    cr_assert(harness_path(harness, sizeof harness) == 0, "build the harness first (make)");
    int port = port_free_loopback();
    snprintf(json, sizeof json, "/tmp/sb-flood-%d-%d.jsonl", (int)getpid(), secure);
    snprintf(fstat, sizeof fstat, "/tmp/sb-flood-%d-%d.stat", (int)getpid(), secure);
    unlink(json);
    unlink(fstat);
    pid_t fl = fork();
    cr_assert(fl >= 0);
    if (fl == 0) {
        usleep(500000); /* rank 0 listening */
        s_flooder(port, 20.0, 1.5, fstat); /* its window ends 2 s after the fork: rank 1 starts at 2.5 s */
    }
    /* rank 0 now, rank 1 two seconds into the flood; rank 0's descriptors sampled every 100 ms */
    snprintf(cmd, sizeof cmd,
             "E='env -u SYNCBENCH_JOB -u SYNCBENCH_LAUNCHED -u SYNCBENCH_JOB_SECRET_FILE -u SYNCBENCH_JOB_SECRET WORLD_SIZE=2 "
             "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s'; T='train --engine ring --model mlp:784-32-10 --batch 32 --steps 6 "
             "--warmup-steps 1 --timeout 60 --quiet'; "
             "(ulimit -n 1024; exec $E RANK=0 %s $T --json %s) > /tmp/sb-fl0.$$ 2>&1 & P0=$!; "
             "(while kill -0 $P0 2>/dev/null; do ls /proc/$P0/fd 2>/dev/null | wc -l; sleep 0.1; done | sort -n | tail -1 | "
             "sed 's/^/peak_fds=/') & S=$!; sleep 2.5; $E RANK=1 %s $T > /tmp/sb-fl1.$$ 2>&1; echo rc1=$?; wait $P0; "
             "echo rc0=$?; wait $S; echo '--- rank 0'; cat /tmp/sb-fl0.$$; echo '--- rank 1'; tail -5 /tmp/sb-fl1.$$; "
             "rm -f /tmp/sb-fl0.$$ /tmp/sb-fl1.$$",
             port, secure ? "SYNCBENCH_JOB_SECRET=5a0e3c1b7d9f2e4a6c8e0d1f3b5a7c9e2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c" : "",
             harness, json, harness);
    double secs = 0;
    run_cmd_timed(cmd, out, sizeof out, &secs);
    kill(fl, SIGTERM);
    waitpid(fl, NULL, 0);
    long opened = -1, closed = -1, early = -1;
    FILE *f = fopen(fstat, "r");
    if (f) {
        if (fscanf(f, "opened %ld closed %ld early %ld", &opened, &closed, &early) != 3) opened = closed = early = -1;
        fclose(f);
    }
    int peak = -1;
    const char *p = strstr(out, "peak_fds=");
    if (p) peak = atoi(p + 9);
    int lines = count_lines(json, NULL);
    fprintf(stderr, "store flood (%s): %.1f s, flooder opened %ld connections, the store closed %ld (%ld in the first "
            "1.5 s); rank 0's peak descriptors %d of 1024; results file %d line(s)\n%s",
            secure ? "with a secret" : "no secret", secs, opened, closed, early, peak, lines, out);
    cr_expect(strstr(out, "rc0=0") && strstr(out, "rc1=0"), "the run failed under the flood:\n%s", out);
    cr_expect_gt(lines, 0, "the results file %s was not written:\n%s", json, out);
    /* the bounds: 68 connections in all for a world of 2; a store that kept them would hold base + opened */
    cr_expect_gt(opened, 300, "the flooder opened only %ld connections (too few to tell)", opened);
    cr_expect(peak > 0 && peak < 250, "rank 0 held %d descriptors with %ld flood connections opened", peak, opened);
    long shut = -1;
    for (const char *q = strstr(out, "store: closed "); q; q = strstr(q + 1, "store: closed ")) {
        const char *t = strstr(q, "; ");
        if (t) shut = atol(t + 2);
    }
    cr_expect_gt(shut, 100, "rank 0 reported closing %ld connections:\n%s", shut, out);
    /* and the flooder saw them closed: in the first 1.5 s it starts about 1,500 connections, over the bounds (68) all
     * but a few; the store's 5 s deadlines (unjoined, CURVE handshake) end none of them that early, and rank 0 cannot
     * exit then (it waits for rank 1), so these are the bounds' closings alone (none without core/store_conn.c's) */
    cr_expect_gt(early, 500, "in the flood's first 1.5 s the store ended only %ld connections (%ld opened in all)",
                 early, opened);
    unlink(json);
    unlink(fstat);
}

Test(store_flood, descriptor_flood_without_secret, .timeout = 120) { s_run(0); }
Test(store_flood, descriptor_flood_with_secret, .timeout = 120) { s_run(1); }
