/* test_tp_live.c: the transport's liveness rules: a peer stopped (SIGSTOP) while a rank waits on it is
 * named within half the timeout (1 to 10 s) instead of the wait's whole timeout, over shared memory
 * (its /proc state) and over tcp and zmq (it stops sending heartbeats), and a peer busy computing for
 * longer than that limit is not declared dead (its heartbeat thread keeps beating). Two forked ranks on
 * fake hosts for tcp and zmq (with a job secret, so beats are authenticated); all on 127.0.0.1. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/comm.h"
#include "core/err.h"
#include "core/timer.h"
#include "core/tp.h"
#include "tests/lib/ranks.h"

#define TIMEOUT_MS 4000   /* the ranks' timeout: the limit is half of it, 2 s */

typedef struct {
    const char *kind;    /* the backend: "shm" (one host), "tcp" (two fake hosts) or "zmq" (forced) */
    const char *says;    /* what the error names for a stopped peer */
    double min_s, max_s; /* the stopped peer must be named between these (after its last beat: up to a
                          * fifth of the limit before the wait starts) */
    int busy;            /* rank 1 computes for 3 x the limit instead of stopping */
    int deaf;            /* rank 0 drops every beat (SYNCBENCH_TP_HB_DROP: UDP blocked between hosts) */
} live_case_t;

static int s_bcast(void *ctx, void *buf, size_t len, int root, int timeout_ms)
{
    return comm_bcast_small(ctx, buf, len, root, timeout_ms);
}

static int s_fail(int rank, const char *what, int rc)
{
    char b[512];
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, err_trace(rc, b, sizeof b));
    return 1;
}

/* Rank 1 sends its pid, runs 1 s (a peer is judged by its beats once they have come through), says it
 * is about to stop, waits for rank 0's answer (a zmq send leaves on ZeroMQ's thread: this makes sure it
 * left) and stops itself (or computes 6 s and sends one byte); rank 0 waits for that byte with a 30 s
 * receive, and resumes rank 1 afterwards. Ranks not started by harness's launcher. */
static int s_live_rank(int rank, int world, void *arg)
{
    (void)world;
    const live_case_t *c = arg;
    unsetenv("SYNCBENCH_LAUNCHED");
    if (c->deaf && rank == 0) setenv("SYNCBENCH_TP_HB_DROP", "1", 1); /* the launcher's ranks leave the shared-memory rule to it */
    if (strcmp(c->kind, "shm")) {
        setenv("SYNCBENCH_FAKE_HOST", rank ? "b" : "a", 1);
        /* with a job secret, so the beats' MACs are made and checked */
        setenv("SYNCBENCH_JOB_SECRET", "5eed0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab", 1);
    }
    boot_cfg_t bc;
    comm_t *comm = NULL;
    int rc = boot_cfg_init(&bc, "env://", -1, -1, TIMEOUT_MS);
    if (rc == 0) rc = comm_new(&comm, &bc, NULL);
    if (rc < 0) return s_fail(rank, "setup", rc);
    tp_t *tp = comm->tp, *own = NULL;
    if (!strcmp(c->kind, "zmq")) {
        tp_env_t env = {.rank = comm->rank, .world = comm->world, .local_world = comm->local_world,
                        .node_of = comm->node_of, .timeout_ms = comm->timeout_ms, .job = comm->job,
                        .boot = &comm->boot, .store = comm->store, .bcast = s_bcast, .bcast_ctx = comm};
        if ((rc = tp_new(&own, &env, &(tp_opts_t){.kind = "zmq"})) < 0) return s_fail(rank, "zmq transport", rc);
        tp = own;
    }
    if (strcmp(tp_kind(tp, 1 - rank), c->kind)) {
        fprintf(stderr, "rank %d: backend %s, want %s\n", rank, tp_kind(tp, 1 - rank), c->kind);
        return 1;
    }
    int32_t pid = (int32_t)getpid();
    char one = 1, b[512];
    if (rank == 1) {
        if ((rc = tp_send(tp, 0, &pid, sizeof pid, 10000)) < 0) return s_fail(rank, "send", rc);
        usleep(1000000);
        if ((rc = tp_send(tp, 0, &one, 1, 10000)) < 0 || (rc = tp_recv(tp, 0, &one, 1, 10000)) < 0)
            return s_fail(rank, "say it stops", rc);
        if (!c->busy) {
            kill(getpid(), SIGSTOP);
            _exit(0);
        }
        /* a long compute step: this thread never enters the transport for 3 x the limit */
        volatile uint64_t x = 0;
        for (uint64_t end = now_ns() + 3ull * TIMEOUT_MS / 2 * 1000000u; now_ns() < end;) x += 1;
        if ((rc = tp_send(tp, 0, &one, 1, 10000)) < 0) return s_fail(rank, "send after the compute", rc);
        if ((rc = comm_barrier(comm, 10000)) < 0) return s_fail(rank, "barrier", rc);  /* sent before we go */
        tp_destroy(&own);
        comm_destroy(&comm);
        return 0;
    }
    if ((rc = tp_recv(tp, 1, &pid, sizeof pid, 10000)) < 0 || (rc = tp_recv(tp, 1, &one, 1, 10000)) < 0 ||
        (rc = tp_send(tp, 1, &one, 1, 10000)) < 0)
        return s_fail(rank, "recv", rc);
    uint64_t t0 = now_ns();
    rc = tp_recv(tp, 1, &one, 1, 30000);
    double s = (double)(now_ns() - t0) / 1e9;
    if (c->busy) {
        if (rc < 0) {
            fprintf(stderr, "rank 0: a busy (not stopped) peer failed the wait after %.1f s\n", s);
            return s_fail(rank, "recv from a busy peer", rc);
        }
        if ((rc = comm_barrier(comm, 10000)) < 0) return s_fail(rank, "barrier", rc);
        tp_destroy(&own);
        comm_destroy(&comm);
        fprintf(stderr, "rank 0: the busy peer answered after %.1f s\n", s);
        return s < 5 ? (fprintf(stderr, "rank 0: the busy peer answered after %.1f s, want 6\n", s), 1) : 0;
    }
    kill(pid, SIGCONT);
    err_trace(rc, b, sizeof b);
    if (rc != ERR_PEER || !strstr(b, "rank 1") || !strstr(b, c->says) || s < c->min_s || s > c->max_s) {
        fprintf(stderr, "rank 0: a stopped peer gave %d after %.1f s: %s\n", rc, s, b);
        return 1;
    }
    fprintf(stderr, "rank 0: the stopped peer (%s) was named after %.1f s\n", c->kind, s);
    return 0; /* no destroy: the peer is gone */
}

/* Same host: rank 0 reads the stopped peer's state in /proc. 2.0 s instead of 30 s. */
Test(tp_live, shm_stopped_peer_is_named, .timeout = 60)
{
    live_case_t c = {"shm", "has been stopped", 1.5, 8, 0, 0};
    cr_assert_eq(run_ranks(2, s_live_rank, &c, 50000), 0);
}

/* Another host: the connection stays open (the kernel answers for the stopped process), only its
 * heartbeats stop. Named within the limit + 2 s (it waited the whole 30 s before heartbeats). */
Test(tp_live, tcp_stopped_peer_is_named, .timeout = 60)
{
    live_case_t c = {"tcp", "has sent no heartbeat for", 1.2, 4, 0, 0};
    cr_assert_eq(run_ranks(2, s_live_rank, &c, 50000), 0);
}

/* A peer whose main thread computes for 6 s (3 x the limit) between two sends is alive, not dead. */
Test(tp_live, tcp_busy_peer_is_not_dead, .timeout = 60)
{
    live_case_t c = {"tcp", NULL, 0, 0, 1, 0};
    cr_assert_eq(run_ranks(2, s_live_rank, &c, 50000), 0);
}

/* The same over zmq (forced), whose connections a stopped peer's kernel keeps open as well. */
Test(tp_live, zmq_stopped_peer_is_named, .timeout = 60)
{
    live_case_t c = {"zmq", "has sent no heartbeat for", 1.2, 4, 0, 0};
    cr_assert_eq(run_ranks(2, s_live_rank, &c, 50000), 0);
}

Test(tp_live, zmq_busy_peer_is_not_dead, .timeout = 60)
{
    live_case_t c = {"zmq", NULL, 0, 0, 1, 0};
    cr_assert_eq(run_ranks(2, s_live_rank, &c, 50000), 0);
}

/* Beats that never come through (a firewall drops UDP between the hosts) never make a live peer dead:
 * the peer, busy 6 s, answers; a stopped one would be left to the wait's timeout. */
Test(tp_live, tcp_peer_never_heard_is_not_dead, .timeout = 60)
{
    live_case_t c = {"tcp", NULL, 0, 0, 1, 1};
    cr_assert_eq(run_ranks(2, s_live_rank, &c, 50000), 0);
}
