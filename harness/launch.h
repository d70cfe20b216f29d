/* launch.h: the harness launcher (torchrun-like, local ranks + multi-node): re-executes this program
 * once per local rank with the rank environment, relays the ranks' output, stops every rank when one
 * fails or on Ctrl-C, and never leaves a process behind; plus the `selftest` mode that exercises it.
 *
 * Environment given to each rank: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (node
 * rank), MASTER_ADDR, MASTER_PORT, SYNCBENCH_JOB, SYNCBENCH_LAUNCHED=1, SYNCBENCH_TIMEOUT (when
 * timeout_s > 0), SYNCBENCH_GPUS (when gpus > 0). Ranks get stdin from /dev/null.
 * SYNCBENCH_JOB must be equal on every node (the rendezvous rejects ranks of another job) and differ
 * between the launches of one process (the driver launches once per world size and engine):
 *   - SYNCBENCH_JOB set in the launcher's environment: that id for the first launch, "<id>-N" for the
 *     N-th launch of this process;
 *   - else multi-node: "mn-<hash of --master>-N";
 *   - else (single node): a fresh random "sb-<time>-<pid>-<hex>".
 *
 * Output: global rank 0's stdout goes to the launcher's stdout unchanged (the result table). Every
 * other line (all stderr, other ranks' stdout) goes to the launcher's stderr, whole lines, prefixed
 * "[rank R] " (not doubled when the line already starts with that prefix, as core/log does).
 *
 * Stopping: when a rank exits non-zero or by a signal, the others get SIGTERM, then SIGKILL after a
 * grace period (2 s, or timeout_s when smaller), all are reaped, and one line is printed:
 *   harness: rank 2 failed (exit 1): <that rank's last stderr line>
 *   harness: rank 2 failed (killed by signal 9): <...>
 * and h_launch returns 1. SIGINT / SIGTERM to the launcher: the same stop, returns 130 / 143 (a second
 * signal skips the grace period). Ranks run in their own process group, have PR_SET_PDEATHSIG(SIGKILL)
 * so a killed launcher leaves nothing, and the final SIGKILL goes to the whole group. */
#ifndef SB_HARNESS_LAUNCH_H
#define SB_HARNESS_LAUNCH_H

typedef struct {
    int nlocal;            /* ranks to start on this node (>= 1) */
    int nnodes, node_rank; /* multi-node: world = nnodes * nlocal; this node's ranks are node_rank*nlocal + i.
                              nnodes 0 is taken as 1 */
    const char *master;    /* "HOST:PORT" (or "[v6]:PORT") for multi-node; NULL for a single node:
                              127.0.0.1 and a free port */
    int timeout_s;         /* also passed to ranks (SYNCBENCH_TIMEOUT); caps the grace period when stopping */
    int gpus;              /* > 0: exported as SYNCBENCH_GPUS=n; ranks pick a device from LOCAL_RANK */
    int quiet;             /* no launch banner (the failure line is always printed) */
    /* Optional: runs in each rank's process between fork and exec, after its output is redirected
     * (async-signal-safe calls only: e.g. setns into the rank's network namespace for --net).
     * Non-zero: that rank exits 126 with a message on its stderr, which stops the launch. */
    int (*child_setup)(void *arg, int local_rank);
    void *child_arg;
} h_launch_cfg_t;

/* 1 inside a rank started by h_launch (SYNCBENCH_LAUNCHED=1), else 0. */
int h_is_launched(void);

/* Start cfg->nlocal ranks running /proc/self/exe with argv (argc entries), wait for them all, relay
 * their output. Returns the process exit code: 0 when every rank exited 0, 1 when one failed (or the
 * launch itself failed: bad cfg, fork error; explained on stderr), 130/143 on SIGINT/SIGTERM. */
int h_launch(const h_launch_cfg_t *cfg, int argc, char **argv);

/* The `harness selftest` mode, run in each launched rank; needs no network. Prints
 * "selftest: rank R/W started (...)" to stdout, then according to the environment:
 *   SYNCBENCH_SELFTEST_FAIL=<rank>[:code]  that rank prints "selftest: rank R failing on purpose" to
 *                                          stderr after ~200 ms and exits with code (default 1);
 *   SYNCBENCH_SELFTEST_HANG=<rank>         that rank hangs forever, ignoring SIGTERM/SIGINT (only
 *                                          SIGKILL ends it: exercises the launcher's escalation);
 *   SYNCBENCH_SELFTEST_SLEEP_MS=<ms>       every other rank sleeps that long (default 30000), prints
 *                                          "selftest: rank R done" and returns 0.
 * Returns 0 on success, 1 when rank/world disagree with the environment or a variable is malformed. */
int h_selftest(int rank, int world);

#endif
