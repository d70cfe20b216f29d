/* rundir.h: a process's private run directory under $TMPDIR (sockets, scratch), named with its pid so that
 * what a killed process leaves behind is found and removed: by its launcher once it has exited, or by the
 * next process that makes one. */
#ifndef SB_RUNDIR_H
#define SB_RUNDIR_H
#include <stddef.h>

/* The folder run directories go in: $TMPDIR when it is set, absolute, short and has no newline, else /tmp. */
const char *rundir_base(void);
/* Make $TMPDIR/sb-WHAT-PID-XXXXXX (mode 0700, only we can enter it) into out: 0, ERR_INVAL (what not
 * [a-z0-9]+, out too short) or ERR_IO (err_set: mkdtemp's reason). Sweeps first (rundir_sweep). */
int rundir_make(const char *what, char *out, size_t len);
/* Remove every sb-WHAT-PID-XXXXXX directory of this user in rundir_base() whose PID is no longer running,
 * with the files (sockets) directly inside it; a directory holding anything else (a subfolder) is left.
 * Returns how many were removed. */
int rundir_sweep(void);

#endif
