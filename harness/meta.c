/* meta.c: result metadata (host, git sha, time, command line, topology, versions) and whole-line,
 * all-or-nothing appends to JSON-lines results files. */
#include "harness/harness.h"
#include "core/err.h"
#include "core/topo.h"
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static void s_git_sha(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    const char *e = getenv("SYNCBENCH_GIT_SHA");
    if (e) { snprintf(out, len, "%s", e); return; }
    FILE *p = popen("git rev-parse --short=12 HEAD 2>/dev/null && git status --porcelain --untracked-files=no 2>/dev/null | head -1", "r");
    if (!p) return;
    char line[64], sha[64] = "";
    int dirty = 0, n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (n++ == 0) memcpy(sha, line, sizeof sha);
        else if (line[0]) dirty = 1;
    }
    pclose(p);
    if (sha[0]) snprintf(out, len, "%s%s", sha, dirty ? "-dirty" : "");
}

void h_meta_fill(h_meta_t *m, int argc, char **argv)
{
    memset(m, 0, sizeof *m);
    gethostname(m->host, sizeof m->host - 1);
    s_git_sha(m->git_sha, sizeof m->git_sha);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(m->timestamp, sizeof m->timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    size_t off = 0;
    for (int i = 0; i < argc && off < sizeof m->cmdline - 1; i++)
        off += (size_t)snprintf(m->cmdline + off, sizeof m->cmdline - off, "%s%s", i ? " " : "", argv[i]);
    if (topo_summary(m->topo, sizeof m->topo) < 0) snprintf(m->topo, sizeof m->topo, "unknown");
    if (topo_cpu_model(m->cpu, sizeof m->cpu) < 0) snprintf(m->cpu, sizeof m->cpu, "unknown");
    int zmaj, zmin, zpat;
    zmq_version(&zmaj, &zmin, &zpat);
    snprintf(m->versions, sizeof m->versions, "zeromq %d.%d.%d, msgpack-c %s, hwloc %u.%u.%u", zmaj, zmin, zpat,
             msgpack_version(), HWLOC_API_VERSION >> 16, (HWLOC_API_VERSION >> 8) & 0xff, HWLOC_API_VERSION & 0xff);
}

void h_json_str(char *buf, size_t len, const char *s)
{
    size_t o = 0;
    if (len < 3) { if (len) buf[0] = '\0'; return; }
    buf[o++] = '"';
    for (; s && *s && o + 8 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { buf[o++] = '\\'; buf[o++] = (char)c; }
        else if (c == '\n') { buf[o++] = '\\'; buf[o++] = 'n'; }
        else if (c == '\t') { buf[o++] = '\\'; buf[o++] = 't'; }
        else if (c < 0x20) o += (size_t)snprintf(buf + o, len - o, "\\u%04x", c);
        else buf[o++] = (char)c;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

int h_json_append(const char *path, const char *lines, size_t len)
{
    if (!path) return 0;
    if (!strcmp(path, "-")) {
        size_t w = fwrite(lines, 1, len, stdout);
        fflush(stdout);
        return w == len ? 0 : err_set(ERR_IO, "writing results to stdout failed");
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_IO, "cannot open results file %s: %s", path, strerror(errno));
    struct stat st;
    off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
    ssize_t w = write(fd, lines, len);
    int e = errno;
    if (w != (ssize_t)len) {
        /* never leave half a line: cut the file back to where it was */
        if (w > 0 && before >= 0 && ftruncate(fd, before) != 0) { /* nothing more we can do */ }
        close(fd);
        return err_set(e == ENOSPC ? ERR_NOSPC : ERR_IO, "results not written to %s: %s (file left as it was)",
                       path, w < 0 ? strerror(e) : "short write");
    }
    if (fsync(fd) != 0 && errno != EINVAL) {
        e = errno;
        close(fd);
        return err_set(ERR_IO, "fsync %s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}
