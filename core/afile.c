/* afile.c: atomic whole-file writes (temporary file, fsync, rename, directory fsync), the chained 64-bit
 * hash files carry, and opening a file for reading that refuses FIFOs, devices and directories. */
#include "core/afile.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/err.h"

int (*afile_fault_hook)(const char *path);

static inline uint64_t s_mix(uint64_t h, uint64_t w) { return (h ^ w) * 0x100000001b3ull ^ ((h ^ w) >> 29); }

uint64_t afile_hash(const void *buf, size_t len, uint64_t seed)
{
    const unsigned char *p = buf;
    uint64_t h[4] = {seed ^ 0xcbf29ce484222325ull, seed + 0x9e3779b97f4a7c15ull, ~seed, seed * 3 + 1};
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        for (int k = 0; k < 4; k++) h[k] = s_mix(h[k], w[k]);
    }
    for (; i < len; i++) h[0] = s_mix(h[0], p[i]);
    uint64_t r = len;
    for (int k = 0; k < 4; k++) r = s_mix(r, h[k]) * 0x9e3779b97f4a7c15ull;
    return r ^ (r >> 32);
}

static int s_write_all(int fd, const void *buf, size_t len, const char *what, const char *path)
{
    const char *p = buf;
    if (afile_fault_hook && afile_fault_hook(path))
        return err_set(ERR_NOSPC, "%s '%s': write: %s (injected)", what, path, strerror(ENOSPC));
    while (len) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            return err_set(e == ENOSPC ? ERR_NOSPC : ERR_IO, "%s '%s': write: %s", what, path, strerror(e));
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int afile_write(const char *path, const char *what, const afile_part_t *parts, int nparts, int append_hash,
                uint64_t *hash_out)
{
    if (!what) what = "file";
    if (!path || !*path || nparts < 0 || (nparts && !parts)) return err_set(ERR_INVAL, "%s: bad arguments", what);
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
        return err_set(ERR_INVAL, "%s: path too long", what);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return err_set(e == ENOSPC ? ERR_NOSPC : ERR_IO, "%s '%s': cannot create '%s': %s", what, path, tmp, strerror(e));
    }
    uint64_t hash = 0;
    int rc = 0;
    for (int i = 0; !rc && i < nparts; i++) {
        if (parts[i].len && !parts[i].data) {
            rc = err_set(ERR_INVAL, "%s '%s': part %d has no data", what, path, i);
            break;
        }
        hash = afile_hash(parts[i].data, parts[i].len, hash);
        rc = s_write_all(fd, parts[i].data, parts[i].len, what, path);
    }
    if (!rc && append_hash) rc = s_write_all(fd, &hash, sizeof hash, what, path);
    if (!rc && fsync(fd) != 0) {
        int e = errno;
        rc = err_set(e == ENOSPC ? ERR_NOSPC : ERR_IO, "%s '%s': fsync: %s", what, path, strerror(e));
    }
    if (close(fd) != 0 && !rc) rc = err_set(ERR_IO, "%s '%s': close: %s", what, path, strerror(errno));
    if (!rc && rename(tmp, path) != 0) rc = err_set(ERR_IO, "%s '%s': rename: %s", what, path, strerror(errno));
    if (rc) {
        unlink(tmp);
        return rc;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* best effort: some filesystems refuse fsync on directories */
        close(dfd);
    }
    if (hash_out) *hash_out = hash;
    return 0;
}

int afile_open(const char *path, const char *what, FILE **f, off_t *size)
{
    if (!what) what = "file";
    *f = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; anything but a regular file is refused */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_IO, "%s '%s': %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_IO, "%s '%s': %s", what, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(ERR_INVAL, "%s '%s' is not a regular file (a FIFO, device or directory): refusing to read it",
                       what, path);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *f = fdopen(fd, "rb");
    if (!*f) {
        int e = errno;
        close(fd);
        return err_set(ERR_IO, "%s '%s': %s", what, path, strerror(e));
    }
    if (size) *size = st.st_size;
    return 0;
}

int afile_check_dest(const char *flag, const char *path)
{
    if (!path || !*path) return err_set(ERR_INVAL, "%s: no path", flag);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return err_set(ERR_INVAL, "%s %s: it exists and is not a regular file", flag, path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    const char *d = dirname(dir);
    if (stat(d, &st) != 0) return err_set(ERR_IO, "%s %s: no folder %s: %s", flag, path, d, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return err_set(ERR_IO, "%s %s: %s is not a folder", flag, path, d);
    if (access(d, W_OK | X_OK) != 0) return err_set(ERR_IO, "%s %s: cannot write in %s: %s", flag, path, d, strerror(errno));
    return 0;
}
