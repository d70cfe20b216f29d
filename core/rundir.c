/* rundir.c: per-process run directories named with the pid, and the sweep of dead processes' ones (rundir.h). */
#include "core/rundir.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "core/err.h"

const char *rundir_base(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || strlen(tmp) > 64 || strchr(tmp, '\n')) tmp = "/tmp";
    return tmp;
}

/* "sb-WHAT-PID-XXXXXX": the pid, or -1 when the name is not one of ours. */
static long s_pid_of(const char *name)
{
    if (strncmp(name, "sb-", 3)) return -1;
    const char *w = name + 3, *p = w;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')) p++;
    if (p == w || *p != '-') return -1;
    char *end;
    errno = 0;
    long pid = strtol(p + 1, &end, 10);
    if (errno || end == p + 1 || *end != '-' || strlen(end + 1) != 6 || pid <= 0) return -1;
    return pid;
}

/* Remove dir (a descriptor on it, dfd) if it holds only non-directories: 0 when removed. */
static int s_remove(int parent, const char *name)
{
    int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return -1;
    DIR *d = fdopendir(dfd);
    if (!d) { close(dfd); return -1; }
    struct dirent *e;
    int bad = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode) ||
            unlinkat(dfd, e->d_name, 0) != 0)
            bad = 1;
    }
    closedir(d);
    return bad ? -1 : unlinkat(parent, name, AT_REMOVEDIR);
}

int rundir_sweep(void)
{
    int pfd = open(rundir_base(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) return 0;
    DIR *d = fdopendir(pfd);
    if (!d) { close(pfd); return 0; }
    int n = 0;
    struct dirent *e;
    uid_t me = geteuid();
    while ((e = readdir(d))) {
        long pid = s_pid_of(e->d_name);
        if (pid < 0) continue;
        struct stat st;
        if (fstatat(pfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to ask): kept */
        if (s_remove(pfd, e->d_name) == 0) n++;
    }
    closedir(d);
    return n;
}

int rundir_make(const char *what, char *out, size_t len)
{
    if (!what || !*what || strspn(what, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(what))
        return err_set(ERR_INVAL, "rundir: bad name '%s'", what ? what : "");
    (void)rundir_sweep();
    const char *base = rundir_base();
    int k = snprintf(out, len, "%s/sb-%s-%ld-XXXXXX", base, what, (long)getpid());
    if (k < 0 || (size_t)k >= len) return err_set(ERR_INVAL, "rundir: %s/sb-%s-...: path too long", base, what);
    if (!mkdtemp(out)) {
        int e = errno;
        out[0] = '\0';
        return err_set(ERR_IO, "cannot create a directory in %s: %s", base, strerror(e));
    }
    return 0;
}
