/* proc.h: what the launcher and the transports read of another process on this host: whether it is stopped,
 * and how long a stopped or silent peer may stay so before a wait on it fails; and what a process reads of
 * itself: how long its threads waited for a CPU. */
#ifndef SB_PROC_H
#define SB_PROC_H

#define PROC_STOP_MAX_MS 10000

/* 1 when process pid is stopped (SIGSTOP, a debugger): state 'T' or 't' in /proc/PID/stat; 0 otherwise
 * (running, sleeping, gone, or unreadable). */
int proc_stopped(int pid);

/* How long a peer may stay stopped (or send no heartbeat) before a wait on it fails: half the timeout, 1 to
 * 10 s, so that a loaded host never crosses it while the peer runs. */
int proc_stop_limit_ms(long long timeout_ms);

/* Seconds this process's threads have spent runnable but waiting for a CPU, summed over its threads now
 * alive (the second field of /proc/self/task/TID/schedstat, the scheduler's run delay); -1 when the kernel
 * does not say. A difference over an interval tells how much of it the process's threads queued. */
double proc_run_delay_s(void);
#endif
