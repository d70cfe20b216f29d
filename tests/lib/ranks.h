/* ranks.h: test helper: run a function on P forked ranks of a fresh job (env:// on loopback with a
 * free port and a unique job id), wait with a timeout, kill every child on failure or timeout; and
 * the end-to-end tests' helpers around the built harness (find it, run a command, count JSON lines). */
#ifndef SB_TEST_RANKS_H
#define SB_TEST_RANKS_H
#include <stddef.h>

/* fn returns 0 for success; anything else (or a crash) counts as that rank failing. */
typedef int (*rank_fn)(int rank, int world, void *arg);

/* Returns the number of ranks that failed (0 = all passed); a timeout kills all and counts them. */
int run_ranks(int world, rank_fn fn, void *arg, int timeout_ms);
/* The built harness program next to the test binaries (BUILD/tests/../harness) into out: 0, or -1
 * when it is missing or not executable. */
int harness_path(char *out, size_t len);
/* Run a shell command line with stderr joined to stdout, keep at most len - 1 bytes of it in out (the
 * rest is drained); returns the exit status (128 + signal when killed), -1 when it cannot start. */
int run_cmd(const char *cmd, char *out, size_t len);
/* run_cmd that also says how long the command ran, in seconds, in *secs (may be NULL). */
int run_cmd_timed(const char *cmd, char *out, size_t len, double *secs);
/* Lines of the file at path holding needle (every line when needle is NULL); -1 when it cannot be read. */
int count_lines(const char *path, const char *needle);
/* How many times needle occurs in hay, occurrences not overlapping. */
int count_in(const char *hay, const char *needle);
/* This process's resident memory (/proc/self/statm) in KiB; 0 when it cannot be read. */
long rss_kb(void);
/* Set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, SYNCBENCH_JOB. */
void set_rank_env(int rank, int world, int port, const char *job);

#endif
