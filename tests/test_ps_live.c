/* test_ps_live.c: the parameter server's liveness from heartbeats (ps/ps_hb.h, ps/ps_server_live.c):
 * the heartbeat thread beats while its owner is busy; a worker busy for longer than the deadline and
 * than half the timeout (which once was the rule) is not declared dead; a stopped (SIGSTOP) worker is
 * named within the heartbeat deadline, well before half the timeout; a heartbeat connection carries
 * nothing but its hello and beats. With a job secret, so the heartbeat hello runs too. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <zmq.h>
#include "core/comm.h"
#include "core/err.h"
#include "core/timer.h"
#include "ps/ps.h"
#include "ps/ps_hb.h"
#include "ps/ps_proto.h"
#include "ps/ps_van.h"
#include "ps/wire.h"
#include "tests/lib/ranks.h"
#include "tests/lib/ps_ranks.h"

#define SECRET_HEX "5a0e3c1b7d9f2e4a6c8e0d1f3b5a7c9e2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c"
#define LIVE_N 500

/* ---------- the thread alone ---------- */

/* A ROUTER plays the server: while this thread sleeps (busy) for 600 ms, the heartbeat thread's beats
 * arrive every 50 ms from the heartbeat routing id, announcing their interval; stopping is prompt. */
Test(ps_live, heartbeat_thread_beats_while_its_owner_is_busy, .timeout = 20)
{
    void *ctx = zmq_ctx_new();
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    cr_assert_eq(zmq_bind(r, "tcp://127.0.0.1:*"), 0);
    char ep[128];
    size_t l = sizeof ep;
    zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &l);
    const char *eps[1] = {ep};
    auth_t none = {0};
    ps_hb_cfg_t c = {.zctx = ctx, .auth = &none, .job = 0x1234, .vid = 3, .rank = 3, .nservers = 1, .eps = eps,
                     .ival_ms = 50, .max_frame = 4096};
    ps_hb_t *hb = NULL;
    cr_assert_eq(ps_hb_start(&hb, &c), 0, "%s", err_detail());
    usleep(600000); /* the owner computes */
    unsigned char want[PS_ID_LEN];
    ps_hb_routing_id(0x1234, 3, want);
    int beats = 0, bad = 0;
    ps_vmsg_t m;
    while (ps_van_recv(r, &m, 0) == 0) {
        wire_hdr_t h;
        int ok = m.n == 2 && ps_van_size(&m, 0) == PS_ID_LEN && !memcmp(ps_van_data(&m, 0), want, PS_ID_LEN) &&
                 wire_decode(ps_van_data(&m, 1), ps_van_size(&m, 1), &h) == 0 && h.type == WIRE_HELLO &&
                 h.aux == PS_HELLO_HEARTBEAT && h.sender == 3 && h.job == 0x1234 && h.count == 50 && h.nframes == 0;
        beats += ok;
        bad += !ok;
        ps_van_close_msg(&m);
    }
    uint64_t t0 = now_ns();
    ps_hb_stop(&hb);
    double stop_ms = (double)(now_ns() - t0) / 1e6;
    cr_expect_eq(bad, 0, "%d messages that are not heartbeats", bad);
    /* 600 ms / 50 ms = 12 beats (the first at once); a descheduled thread on this busy host may lose a few */
    cr_expect(beats >= 6 && beats <= 14, "%d beats in 600 ms at 50 ms", beats);
    cr_expect_lt(stop_ms, 500, "stopping took %.0f ms", stop_ms);
    zmq_close(r);
    zmq_ctx_term(ctx);
}

/* ---------- whole jobs: 3 workers and a dedicated server ---------- */

typedef struct {
    int timeout_ms, busy_ms, stop;
    pid_t victim;
    uint64_t stop_ns;
} live_t;

static live_t *s_shared(void)
{
    live_t *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(l != MAP_FAILED);
    memset(l, 0, sizeof *l);
    return l;
}

/* Rank 3 serves. Workers take two steps, wait for each other, then rank 2 is busy for busy_ms (its main
 * thread nowhere near the engine) or stops itself (stop); then every other worker takes steps 2 and 3. */
static int s_live_rank(int rank, int world, void *arg)
{
    live_t *L = arg;
    ps_topo_t t = {.nworkers = 3, .mode = PS_SYNC, .timeout_ms = L->timeout_ms, .part_bytes = 512};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, t.timeout_ms) < 0) return 1;
    int fail = 0;
    if (rank == 3) {
        ps_opts_t po;
        engine_cfg_t cfg = ps_test_cfg(&t, world, &po);
        engine_t *e = NULL;
        int rc = ps_engine.create(&e, comm, &cfg);
        if (rc == 0) rc = ps_engine.serve(e);
        double ms = L->stop_ns ? (double)(now_ns() - L->stop_ns) / 1e6 : 0;
        if (L->stop) {
            /* named within the deadline (10 s at this timeout: its last beat up to an interval before the stop),
             * not at half the timeout (15 s) */
            const char *d = err_detail();
            if (rc != ERR_PEER || !strstr(d, "worker rank 2 is gone: no heartbeat for")) {
                fprintf(stderr, "server: %d (%s), expected rank 2 named for its missed heartbeats\n", rc, d);
                fail = 1;
            }
            if (ms < 8500 || ms > 14000) {
                fprintf(stderr, "server named the stopped worker %.0f ms after it stopped (deadline 10000 ms)\n", ms);
                fail = 1;
            }
            fprintf(stderr, "server: the stopped worker named %.0f ms after it stopped\n", ms);
            if (L->victim > 0) kill(L->victim, SIGCONT);
        } else if (rc < 0) {
            ps_test_report("serve", rc);
            fail = 1;
        }
        err_clear();
        ps_engine.destroy(&e);
        comm_destroy(&comm);
        return fail;
    }
    float p[LIVE_N], g[LIVE_N];
    param_set_t ps = ps_test_sgd_params(p, LIVE_N);
    engine_t *e = NULL;
    int rc = ps_test_worker(&e, comm, &t, world, &ps);
    for (uint64_t s = 0; s < 2 && rc == 0; s++) rc = ps_test_plain_step(e, g, LIVE_N, s, rank);
    int one = 1, all[3];
    if (rc == 0) rc = comm_allgather_group(comm, &one, sizeof one, all, 3, t.timeout_ms);
    if (rc < 0) {
        ps_test_report("first steps", rc);
        ps_engine.destroy(&e);
        return 1;
    }
    if (rank == 2 && L->stop) {
        L->victim = getpid();
        L->stop_ns = now_ns();
        raise(SIGSTOP); /* the server sends SIGCONT once it named us; by then we are out of the job */
        ps_engine.destroy(&e);
        comm_destroy(&comm);
        return 0;
    }
    if (rank == 2) usleep((useconds_t)L->busy_ms * 1000);
    for (uint64_t s = 2; s < 4 && rc == 0; s++) rc = ps_test_plain_step(e, g, LIVE_N, s, rank);
    if (L->stop) {
        /* the server's error reaches the waiting workers, naming the stopped one */
        fail = !(rc < 0 && strstr(ps_test_last_detail, "worker rank 2"));
        if (fail) fprintf(stderr, "worker %d: rc %d (%s), expected a failure naming rank 2\n", rank, rc, ps_test_last_detail);
    } else {
        fail = rc < 0;
    }
    ps_engine.destroy(&e);
    comm_destroy(&comm);
    return fail;
}

/* Timeout 6 s: deadline 3 s (half the timeout), beats every 600 ms. Rank 2 computes for 4.5 s, longer than
 * the deadline and than the old rule's half timeout (which declared it dead at 3 s), shorter than the
 * others' timeout: its heartbeats keep it alive and the job completes. */
Test(ps_live, busy_worker_is_not_declared_dead, .timeout = 60)
{
    setenv("SYNCBENCH_JOB_SECRET", SECRET_HEX, 1);
    live_t *L = s_shared();
    L->timeout_ms = 6000;
    L->busy_ms = 4500;
    cr_expect_eq(run_ranks(4, s_live_rank, L, 45000), 0);
    munmap(L, sizeof *L);
    unsetenv("SYNCBENCH_JOB_SECRET");
}

/* Timeout 30 s: deadline 10 s. A worker stopped with SIGSTOP (alive, but its heartbeat thread stopped
 * with it) is named by the server within the deadline, not after half the timeout. */
Test(ps_live, stopped_worker_is_named_within_the_deadline, .timeout = 90)
{
    setenv("SYNCBENCH_JOB_SECRET", SECRET_HEX, 1);
    live_t *L = s_shared();
    L->timeout_ms = 30000;
    L->stop = 1;
    cr_expect_eq(run_ranks(4, s_live_rank, L, 70000), 0);
    if (L->victim > 0) kill(L->victim, SIGCONT); /* never leave it stopped */
    munmap(L, sizeof *L);
    unsetenv("SYNCBENCH_JOB_SECRET");
}

/* ---------- the heartbeat connection carries nothing else ---------- */

/* Rank 0 plays worker 0 by hand without a secret: on its heartbeat connection a PUSH is refused (answered
 * with ERROR, counted: the one rejection the server expects), a beat is taken without an answer or a
 * rejection; then a BYE on its data connection ends the server. */
static int s_hbconn_rank(int rank, int world, void *arg)
{
    (void)arg;
    (void)world;
    ps_topo_t t = {.nworkers = 1, .mode = PS_SYNC};
    comm_t *comm = NULL;
    if (ps_test_open(&comm, PS_TEST_TO) < 0) return 1;
    if (rank == 1) return ps_test_server_rank(&comm, &t, 1);
    void *val = NULL;
    size_t len = 0;
    if (ps_test_server_ep(comm, &val, &len) < 0) return 1;
    void *ctx = zmq_ctx_new(), *data = zmq_socket(ctx, ZMQ_DEALER), *hb = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, fail = 0;
    zmq_setsockopt(data, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(hb, ZMQ_LINGER, &zero, sizeof zero);
    uint64_t job = ps_job_id(comm->job, 1);
    unsigned char id[PS_ID_LEN], hid[PS_ID_LEN];
    ps_routing_id(job, 0, id);
    ps_hb_routing_id(job, 0, hid);
    zmq_setsockopt(data, ZMQ_ROUTING_ID, id, PS_ID_LEN);
    zmq_setsockopt(hb, ZMQ_ROUTING_ID, hid, PS_ID_LEN);
    zmq_connect(data, (char *)val);
    zmq_connect(hb, (char *)val);
    free(val);
    wire_hdr_t push = {.type = WIRE_PUSH, .sender = 0, .job = job, .dtype = DT_F32, .count = 1, .nframes = 0};
    wire_hdr_t r;
    char text[300] = "";
    fail |= ps_test_raw_send(hb, &push, NULL, NULL, 0) < 0;
    if (ps_test_raw_recv(hb, &r, text, sizeof text - 1) != WIRE_ERROR || !strstr(text, "heartbeat connection")) {
        fprintf(stderr, "a PUSH on the heartbeat connection was not refused (%s)\n", text);
        fail = 1;
    }
    wire_hdr_t beat = {.type = WIRE_HELLO, .sender = 0, .job = job, .dtype = DT_F32, .aux = PS_HELLO_HEARTBEAT,
                       .count = 1000};
    fail |= ps_test_raw_send(hb, &beat, NULL, NULL, 0) < 0;
    zmq_pollitem_t it = {hb, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 300) > 0) {
        fprintf(stderr, "a heartbeat was answered\n");
        fail = 1;
    }
    wire_hdr_t bye = {.type = WIRE_BYE, .sender = 0, .job = job, .dtype = DT_F32};
    fail |= ps_test_raw_send(data, &bye, NULL, NULL, 0) < 0;
    usleep(200000);
    zmq_close(data);
    zmq_close(hb);
    zmq_ctx_term(ctx);
    comm_destroy(&comm);
    return fail;
}

Test(ps_live, heartbeat_connection_takes_only_hellos_and_beats, .timeout = 40)
{
    cr_assert_eq(run_ranks(2, s_hbconn_rank, NULL, 30000), 0);
}

/* ---------- 64 workers on a few cores ---------- */

/* MemAvailable from /proc/meminfo in MiB; -1 when unknown. */
static long s_mem_avail_mib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

/* Issue 33 §4: `train --engine ps --procs 64` under the default --timeout (60 s) on a host of 2 cores failed
 * 2 of 2 tries (the server declared worker 0, still building its data, dead: "silent for 39596 ms"). It
 * completes now: the server hears every worker beating throughout, and no gap between two beats of one
 * worker comes near the deadline. The smallest model and steps the PS tests use; the figures are
 * printed. */
Test(ps_live, ps_with_64_workers_on_few_cores_completes, .timeout = 600)
{
    char harness[512];
    cr_assert(harness_path(harness, sizeof harness) == 0, "build the harness first (make)");
    long avail = s_mem_avail_mib();
    /* measured: 64 workers and their server took about 8.6 GiB on top of what was in use */
    if (avail >= 0 && avail < 12288)
        cr_skip_test("64 PS workers need about 9 GiB and this host has %ld MiB available (12 GiB wanted): not "
                     "started", avail);
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd,
             "(SYNCBENCH_LOG=info %s train --engine ps --procs 64 --model mlp:784-32-10 --batch 128 --steps 4 "
             "--warmup-steps 1 --quiet; echo \"exit=$?\") 2>&1 | grep -E 'exit=|heartbeats from|parameters after|error|attached in' | "
             "awk '/attached in/ { n++; for (i = 1; i < NF; i++) if ($i == \"in\" && $(i + 1) + 0 > max) max = $(i + 1) + 0; next } { print } END { print \"attach: \" n \" workers, "
             "slowest \" max \" ms\" }'",
             harness);
    double secs = 0;
    run_cmd_timed(cmd, out, sizeof out, &secs);
    fprintf(stderr, "ps_with_64_workers_on_few_cores_completes: %.1f s, %ld CPUs online:\n%s", secs,
            sysconf(_SC_NPROCESSORS_ONLN), out);
    cr_expect(strstr(out, "exit=0") != NULL, "the run failed (%.1f s):\n%s", secs, out);
    cr_expect(strstr(out, "parameters after step 4") != NULL, "no 4th step:\n%s", out);
    const char *h = strstr(out, "heartbeats from ");
    int heard = 0, of = 0, deadline = 0;
    double gap = -1;
    cr_assert(h && sscanf(h, "heartbeats from %d of %d workers, longest gap %lf ms (worker rank %*d), deadline %d ms",
                          &heard, &of, &gap, &deadline) == 4, "no heartbeat figures from the server:\n%s", out);
    cr_expect_eq(heard, 64, "the server heard %d of %d workers beating", heard, of);
    /* a beat every second: a loaded host delays some, never by half the deadline */
    cr_expect(gap >= 0 && gap < deadline / 2.0, "a worker's beats %.0f ms apart (deadline %d ms)", gap, deadline);
    /* the workers' own wait for version 0 (worker 0's INIT) is bounded by the timeout: it must have room */
    const char *a = strstr(out, "attach: ");
    int n = 0;
    double slow = -1;
    cr_expect(a && sscanf(a, "attach: %d workers, slowest %lf ms", &n, &slow) == 2 && n == 64 && slow < 60000,
              "attach times:\n%s", out);
}
