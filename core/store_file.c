/* store_file.c: the file:// rendezvous store: plain files in a directory every rank can see (a shared
 * file system), no server.
 *
 * Every name starts with "<tag>@" (<tag>: auth_job_tag of the job id, 16 hex digits, so the id itself
 * appears in no file name), and runs with different job ids share a directory safely:
 *   <tag>@world      world size, published once with link() (atomic create-if-absent)
 *   <tag>@rank.N     created with O_CREAT|O_EXCL by rank N (an existing one: ERR_DUP)
 *   <tag>@k.<key>    a key's value, written to <tag>@tmp.* and rename()d into place (keys whose
 *                    %-encoding is long: <tag>@h.<two hashes>)
 *   <tag>@lock       flock()ed around add and leave
 *   <tag>@left       how many ranks have left; the last one removes every <tag>@ file.
 * Waiting (get, every rank joined) polls with a growing nap. A clean run leaves nothing behind. A
 * crashed run leaves its files: a new run with the same job id then fails with ERR_DUP (or
 * ERR_MISMATCH) and a detail telling the user to remove them, use a fresh directory or set another
 * SYNCBENCH_JOB.
 *
 * Trust: this store does not use the job secret. It relies on file permissions instead, because
 * anyone who can write the directory could delete or rewrite whatever a MAC protects anyway: every file
 * is created 0600 and every directory it creates 0700, so only the job's user can read or join; a file
 * that belongs to another user (planted in a shared directory such as /tmp) is refused with ERR_AUTH
 * when read. Use a directory only you can write for anything you do not trust. */
#include "core/boot.h"
#include "core/store.h"
#include "core/auth.h"
#include "core/hash.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define STALE_HINT "remove its files, use a fresh directory, or set another SYNCBENCH_JOB"

typedef struct {
    const boot_cfg_t *cfg;
    char dir[1024];
    char tag[24];            /* auth_job_tag(job): the names' prefix */
    int made_rank_file;      /* this rank's <tag>@rank.N is ours to remove if the join fails */
    unsigned long tmpn;
} fstore_t;

static void s_fkey(fstore_t *self, const char *key, char *out, size_t len)
{
    char enc[3 * STORE_KEY_MAX + 1];
    size_t o = 0;
    for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
        if ((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '-' || *k == '_')
            enc[o++] = (char)*k;
        else o += (size_t)sprintf(enc + o, "%%%02X", *k);
    }
    enc[o] = '\0';
    if (o > 160)
        snprintf(out, len, "%s/%s@h.%016llx.%016llx", self->dir, self->tag,
                 (unsigned long long)hash_str(key), (unsigned long long)hash_fnv1a64(key, strlen(key), 0x9e3779b97f4a7c15ull));
    else snprintf(out, len, "%s/%s@k.%s", self->dir, self->tag, enc);
}

static void s_fname(fstore_t *self, const char *what, char *out, size_t len)
{
    snprintf(out, len, "%s/%s@%s", self->dir, self->tag, what);
}

static int s_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Write val into a fresh temp file; its name in tmp. */
static int s_write_tmp(fstore_t *self, const void *val, size_t len, char *tmp, size_t tlen)
{
    char what[96];
    snprintf(what, sizeof what, "tmp.%d.%ld.%lu", self->cfg->rank, (long)getpid(), ++self->tmpn);
    s_fname(self, what, tmp, tlen);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(errno == ENOSPC ? ERR_NOSPC : ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    if (s_write_all(fd, val, len) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return err_set(e == ENOSPC ? ERR_NOSPC : ERR_IO, "cannot write %s: %s", tmp, strerror(e));
    }
    close(fd);
    return 0;
}

/* Read a whole file into a malloc'd NUL-terminated buffer: 0, or 1 if it does not exist. */
static int s_read_file(const char *path, void **out, size_t *outlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 1 : err_set(ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        unsigned uid = (unsigned)st.st_uid;
        close(fd);
        return err_set(ERR_AUTH, "%s belongs to uid %u, not to you (uid %u): another user's file in the store "
                       "directory, refused (use a directory only you can write)", path, uid, (unsigned)geteuid());
    }
    size_t cap = 256, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (!b) { close(fd); return err_set(ERR_NOMEM, "reading %s", path); }
        ssize_t k = read(fd, b + n, cap - n);
        if (k < 0) { if (errno == EINTR) continue; free(b); close(fd); return err_set(ERR_IO, "cannot read %s: %s", path, strerror(errno)); }
        if (k == 0) break;
        n += (size_t)k;
        if (n == cap) {
            if (cap > STORE_VAL_MAX) { free(b); close(fd); return err_set(ERR_CORRUPT, "%s is larger than a store value can be", path); }
            cap *= 2;
            char *nb = realloc(b, cap + 1);
            if (!nb) free(b);
            b = nb;
        }
    }
    close(fd);
    b[n] = '\0';
    *out = b;
    *outlen = n;
    return 0;
}

/* Take the job's lock file (polling flock, bounded by deadline); returns the fd. */
static int s_lock(fstore_t *self, uint64_t deadline, int *fd_out)
{
    char p[1200];
    s_fname(self, "lock", p, sizeof p);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(ERR_IO, "cannot open lock file %s: %s", p, strerror(errno));
    int nap = 1;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int e = errno;
            close(fd);
            return err_set(ERR_IO, "flock %s: %s", p, strerror(e));
        }
        if (deadline_passed(deadline)) { close(fd); return err_set(ERR_TIMEOUT, "could not lock %s within %.1f s", p, self->cfg->timeout_ms / 1000.0); }
        store_sleep_ms(nap);
        if (nap < 20) nap *= 2;
    }
    *fd_out = fd;
    return 0;
}

static void s_unlock(int fd) { flock(fd, LOCK_UN); close(fd); }

/* Under the lock: counter at path += delta. */
static int s_file_add_locked(fstore_t *self, const char *path, const char *key, int64_t delta, int64_t *out)
{
    void *cur = NULL;
    size_t n = 0;
    int64_t v = 0;
    int rc = s_read_file(path, &cur, &n);
    if (rc < 0) return rc;
    char num[32], tmp[1200];
    int k = store_counter_add(key, rc == 0 ? cur : NULL, n, delta, &v, num);
    free(cur);
    CHECK(k);
    CHECK(s_write_tmp(self, num, (size_t)k, tmp, sizeof tmp));
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return err_set(ERR_IO, "rename to %s: %s", path, strerror(e));
    }
    *out = v;
    return 0;
}

static int s_mkdirs(const char *path)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST) return err_set(ERR_IO, "cannot create directory %s: %s", p, strerror(errno));
            *s = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set(ERR_IO, "file:// path %s is not a directory", path);
    return 0;
}

/* ---------------- the store interface ---------------- */

static int s_file_open(void **impl_p, const boot_cfg_t *cfg, uint64_t deadline)
{
    (void)deadline;
    fstore_t *self = calloc(1, sizeof *self);
    if (!(*impl_p = self)) return err_set(ERR_NOMEM, "file store");
    self->cfg = cfg;
    snprintf(self->dir, sizeof self->dir, "%s", cfg->path);
    auth_job_tag(cfg->job, self->tag, sizeof self->tag);
    return s_mkdirs(self->dir);
}

/* The world: the first rank publishes it atomically with link(), the others compare. Then this rank's
 * file, created with O_EXCL (one that exists: a second process with this rank, or a crashed run). */
static int s_file_hello(void *impl, uint64_t deadline)
{
    (void)deadline;
    fstore_t *self = impl;
    const boot_cfg_t *cfg = self->cfg;
    char wpath[1200], tmp[1200], num[32];
    s_fname(self, "world", wpath, sizeof wpath);
    int k = snprintf(num, sizeof num, "%d\n", cfg->world);
    CHECK(s_write_tmp(self, num, (size_t)k, tmp, sizeof tmp));
    int lrc = link(tmp, wpath), le = errno;
    unlink(tmp);
    if (lrc != 0 && le != EEXIST) return err_set(ERR_IO, "cannot create %s: %s", wpath, strerror(le));
    if (lrc != 0) {
        void *b = NULL;
        size_t n;
        int rc = s_read_file(wpath, &b, &n);
        if (rc < 0) return rc;
        if (rc > 0) return err_set(ERR_IO, "%s vanished while joining (another run cleaning up?)", wpath);
        char *end;
        long w = strtol(b, &end, 10);
        int bad = end == (char *)b || (*end && *end != '\n');
        free(b);
        if (bad) return err_set(ERR_CORRUPT, "%s does not hold a world size: %s", wpath, STALE_HINT);
        if (w != cfg->world)
            return err_set(ERR_MISMATCH, "this rank has world size %d but %s says %ld (set by the first rank of job '%s', "
                           "or left by an earlier run: %s)", cfg->world, wpath, w, cfg->job, STALE_HINT);
    }

    char rpath[1200], what[32], info[400], hostn[256] = "?";
    snprintf(what, sizeof what, "rank.%d", cfg->rank);
    s_fname(self, what, rpath, sizeof rpath);
    int fd = open(rpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        void *b = NULL;
        size_t n;
        int rc = s_read_file(rpath, &b, &n);
        if (rc == 0) { while (n && ((char *)b)[n - 1] == '\n') ((char *)b)[--n] = '\0'; }
        err_set(ERR_DUP, "%s already exists (%s%s%s): another process has rank %d in job '%s', or an earlier run "
                "crashed and left it behind: %s", rpath, rc == 0 ? "written by pid/host/time " : "",
                rc == 0 ? (char *)b : "", rc == 0 ? "" : "unreadable", cfg->rank, cfg->job, STALE_HINT);
        free(b);
        return ERR_DUP;
    }
    if (fd < 0) return err_set(ERR_IO, "cannot create %s: %s", rpath, strerror(errno));
    self->made_rank_file = 1;
    gethostname(hostn, sizeof hostn - 1);
    k = snprintf(info, sizeof info, "%ld %s %lld\n", (long)getpid(), hostn, (long long)time(NULL));
    s_write_all(fd, info, (size_t)k);
    close(fd);
    return 0;
}

/* Poll until every rank file exists. */
static int s_file_wait_all(void *impl, uint64_t deadline, store_wait_t *w)
{
    fstore_t *self = impl;
    int world = self->cfg->world;
    unsigned char *seen = calloc((size_t)world, 1);
    if (!seen) return err_set(ERR_NOMEM, "file store");
    int nseen = 0, nap = 2, rc = 0;
    for (;;) {
        for (int r = 0; r < world; r++) {
            if (seen[r]) continue;
            char p[1200], what[32];
            snprintf(what, sizeof what, "rank.%d", r);
            s_fname(self, what, p, sizeof p);
            if (access(p, F_OK) == 0) { seen[r] = 1; nseen++; }
        }
        if (nseen == world) break;
        if (deadline_passed(deadline)) {
            w->joined = nseen;
            store_missing_ranks(seen, world, w->missing, 200);
            snprintf(w->where, sizeof w->where, " in %s", self->dir);
            rc = ERR_TIMEOUT;
            break;
        }
        store_sleep_ms(nap);
        if (nap < 50) nap *= 2;
    }
    free(seen);
    return rc;
}

static int s_file_set(void *impl, const char *key, const void *val, size_t len)
{
    fstore_t *self = impl;
    char tmp[1200], p[1200];
    s_fkey(self, key, p, sizeof p);
    CHECK(s_write_tmp(self, val, len, tmp, sizeof tmp));
    if (rename(tmp, p) != 0) {
        int rc = err_set(ERR_IO, "rename to %s: %s", p, strerror(errno));
        unlink(tmp);
        return rc;
    }
    return 0;
}

static int s_file_get(void *impl, const char *key, void **val, size_t *len, int timeout_ms)
{
    char p[1200];
    s_fkey(impl, key, p, sizeof p);
    uint64_t deadline = deadline_in(timeout_ms);
    int nap = 1;
    for (;;) {
        int rc = s_read_file(p, val, len);
        if (rc <= 0) return rc;
        if (deadline_passed(deadline))
            return err_set(ERR_TIMEOUT, "store get '%s': key not set within %.1f s", key, timeout_ms / 1000.0);
        store_sleep_ms(nap);
        if (nap < 20) nap *= 2;
    }
}

static int s_file_add(void *impl, const char *key, int64_t delta, int64_t *out)
{
    fstore_t *self = impl;
    int fd;
    CHECK(s_lock(self, deadline_in(self->cfg->timeout_ms), &fd));
    char p[1200];
    s_fkey(self, key, p, sizeof p);
    int rc = s_file_add_locked(self, p, key, delta, out);
    s_unlock(fd);
    return rc;
}

static int s_file_del(void *impl, const char *key)
{
    char p[1200];
    s_fkey(impl, key, p, sizeof p);
    return unlink(p) == 0 || errno == ENOENT ? 0 : err_set(ERR_IO, "cannot remove %s: %s", p, strerror(errno));
}

/* Remove every <tag>@ file of the directory. */
static void s_file_cleanup(fstore_t *self)
{
    DIR *d = opendir(self->dir);
    if (!d) return;
    char pre[80];
    snprintf(pre, sizeof pre, "%s@", self->tag);
    size_t pl = strlen(pre);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, pre, pl)) continue;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", self->dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

/* leave: count this rank out; the last one removes the job's files. A failed join removes the rank
 * file it made, so that a retry does not see itself as a duplicate. */
static void s_file_destroy(void *impl, int leave)
{
    fstore_t *self = impl;
    if (!self) return;
    if (leave) {
        int fd;
        if (s_lock(self, deadline_in(self->cfg->timeout_ms), &fd) < 0) {
            LOG_W("store: %s", err_detail());
        } else {
            char p[1200];
            int64_t left = 0;
            s_fname(self, "left", p, sizeof p);
            int rc = s_file_add_locked(self, p, "left", 1, &left);
            if (rc == 0 && left >= self->cfg->world) s_file_cleanup(self);
            s_unlock(fd);
        }
    } else if (self->made_rank_file) {
        char p[1200], what[32];
        snprintf(what, sizeof what, "rank.%d", self->cfg->rank);
        s_fname(self, what, p, sizeof p);
        unlink(p);
    }
    free(self);
}

const store_ops_t store_file_ops = {
    .name = "file", .open = s_file_open, .hello = s_file_hello, .wait_all = s_file_wait_all, .set = s_file_set,
    .get = s_file_get, .add = s_file_add, .del = s_file_del, .destroy = s_file_destroy,
};
