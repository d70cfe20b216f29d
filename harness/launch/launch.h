/* launch.h: the harness launcher (torchrun-like, local ranks + multi-node): re-executes this program
 * once per local rank with the rank environment, relays the ranks' output, stops every rank when one
 * fails or on Ctrl-C, and never leaves a process behind; plus the `selftest` mode that exercises it.
 *
 * Environment given to each rank: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (node
 * rank), MASTER_ADDR, MASTER_PORT, SYNCBENCH_JOB, SYNCBENCH_LAUNCHED=1, SYNCBENCH_TIMEOUT (when
 * timeout_s > 0), SYNCBENCH_GPUS (when gpus > 0), SYNCBENCH_JOB_SECRET (see below). Ranks get stdin
 * from /dev/null.
 * The job secret (core/auth.h) travels only in the ranks' environment (never argv or a file name):
 *   - single node: a fresh one per launch (auth_secret_generate);
 *   - multi-node: the one in the launcher's environment (SYNCBENCH_JOB_SECRET or
 *     SYNCBENCH_JOB_SECRET_FILE), which must be the same on every node; without one the ranks run
 *     unauthenticated (with a warning), and require_auth refuses the launch.
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
 *   rank 2 failed (exit 1): <that rank's error, as h_say_error said it>
 *   rank 2 failed (killed by signal 9)          (no error said: its relayed lines above are all there is)
 * is the detail (err_detail) of the ERR_PEER h_launch returns; the caller prints it as "harness: ...".
 * A rank's error is said once: the ranks get SYNCBENCH_RELAY_ERRORS=1 and h_say_error tags its lines
 * (H_ERROR_TAG) instead of printing them; the launcher keeps tagged lines out of the relay, puts the failed
 * rank's in the failure line, and prints the other ranks' errors just before it as "[rank R] harness: ...",
 * each distinct one once (a leading "rank R: " dropped: the prefix says it).
 * A rank found stopped (SIGSTOP or a debugger: state T in /proc) for half of timeout_s (60 s when 0), at most
 * 10 s and at least 1 s, stops the job the same way: "rank 1 was stopped (SIGSTOP or a debugger) for N ms, ...".
 * SIGINT / SIGTERM to the launcher: the same stop, returns ERR_INTERRUPT with h_interrupt_signal()
 * SIGINT / SIGTERM (main exits 130 / 143; a second signal skips the grace period). Ranks run in their own process group, have PR_SET_PDEATHSIG(SIGKILL)
 * so a killed launcher leaves nothing, and the final SIGKILL goes to the whole group. */
#ifndef SB_HARNESS_LAUNCH_H
#define SB_HARNESS_LAUNCH_H
#include <stddef.h>

typedef struct {
    int nlocal;            /* ranks to start on this node (>= 1) */
    int nnodes, node_rank; /* multi-node: world = nnodes * nlocal; this node's ranks are node_rank*nlocal + i.
                              nnodes 0 is taken as 1 */
    const char *master;    /* "HOST:PORT" (or "[v6]:PORT") for multi-node; NULL for a single node:
                              127.0.0.1 and a free port */
    int timeout_s;         /* also passed to ranks (SYNCBENCH_TIMEOUT); caps the grace period when stopping */
    int gpus;              /* > 0: exported as SYNCBENCH_GPUS=n; ranks pick a device from LOCAL_RANK */
    int quiet;             /* no launch banner (the failure line is always printed) */
    int require_auth;      /* --require-auth: refuse a multi-node launch without a job secret */
    /* Optional: runs in each rank's process between fork and exec, after its output is redirected
     * (async-signal-safe calls only: e.g. setns into the rank's network namespace for --net).
     * Non-zero: that rank exits 126 with a message on its stderr, which stops the launch. */
    int (*child_setup)(void *arg, int local_rank);
    void *child_arg;
} h_launch_cfg_t;

/* 1 inside a rank started by h_launch (SYNCBENCH_LAUNCHED=1), else 0. */
int h_is_launched(void);

/* A process's final error (err_detail, one or more lines), said once on stderr: "harness: MSG", or,
 * inside a rank whose stderr h_launch relays (SYNCBENCH_RELAY_ERRORS=1), each line of MSG behind
 * H_ERROR_TAG, for the launcher's failure line (above). */
#define H_ERROR_TAG "@syncbench-error@ "
void h_say_error(const char *msg);

/* Start cfg->nlocal ranks running /proc/self/exe with argv (argc entries), wait for them all, relay
 * their output. Returns 0 when every rank exited 0; ERR_PEER when one failed; ERR_INTERRUPT when a
 * signal stopped the launch (SIGINT, SIGTERM, SIGHUP; SIGPIPE when our stdout was closed), the signal
 * in h_interrupt_signal(); ERR_INVAL / ERR_NOMEM / ERR_SYS when the launch itself failed (bad cfg,
 * fork error). err_detail() says why, without the "harness: " prefix, except for ERR_INTERRUPT. */
int h_launch(const h_launch_cfg_t *cfg, int argc, char **argv);

/* Interruption: h_interrupt(sig) records sig and returns ERR_INTERRUPT; main exits 128 + the signal
 * h_interrupt_signal() returns. */
int h_interrupt(int sig);
int h_interrupt_signal(void);

/* The `harness selftest` mode, run in each launched rank; needs no network. Prints
 * "selftest: rank R/W started (...)" to stdout, then according to the environment:
 *   SYNCBENCH_SELFTEST_FAIL=<rank>[:code]  that rank prints "selftest: rank R failing on purpose" to
 *                                          stderr after ~200 ms and exits with code (default 1);
 *   SYNCBENCH_SELFTEST_HANG=<rank>         that rank hangs forever, ignoring SIGTERM/SIGINT (only
 *                                          SIGKILL ends it: exercises the launcher's escalation);
 *   SYNCBENCH_SELFTEST_SLEEP_MS=<ms>       every other rank sleeps that long (default 30000), prints
 *                                          "selftest: rank R done" and returns 0.
 * Returns 0 on success; ERR_INVAL when rank/world disagree with the environment or a variable is
 * malformed (said on stderr as "selftest: ...", unprefixed, the fixture's own output). */
int h_selftest(int rank, int world);

/* ---- the launcher's pieces (launch_cfg.c, used by launch.c) ---- */
/* Check cfg and argv; the world size and the rendezvous HOST and PORT (a free loopback port for one
 * node). 0 or ERR_INVAL / ERR_SYS with err_detail "launcher: ...". */
int h_launch_check_cfg(const h_launch_cfg_t *cfg, int argc, char **argv, int *world, char *host, size_t hlen,
                       int *port);
/* This launch's SYNCBENCH_JOB (see above): 0 or ERR_INVAL. */
int h_launch_job_id(const h_launch_cfg_t *cfg, char *job, size_t len);
/* This launch's job secret as hex into hex (len >= AUTH_HEX_LEN; "" for none, see above): 0, or ERR_AUTH
 * (require_auth and no secret on a multi-node launch) / the secret file's error. */
int h_launch_secret(const h_launch_cfg_t *cfg, char *hex, size_t len);
/* A rank's environment: the inherited one minus ours, plus ours (secret: hex, NULL or "" for none); NULL
 * when out of memory. Freed by h_launch_env_free (only the strings it made). */
char **h_launch_env(const h_launch_cfg_t *cfg, int rank, int world, int local, int node, const char *host, int port,
                    const char *job, const char *secret);
void h_launch_env_free(char ***envp);

#endif
