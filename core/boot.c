/* boot.c: rendezvous: rank/world/local rank from the init method and the launcher's environment, the
 * address to listen on, and the bootstrap key-value store (tcp/env: a ZeroMQ server thread on rank 0;
 * file: plain files in a shared directory).
 *
 * Design of the tcp/env store. Rank 0 binds a ROUTER on host:port and serves it from a thread; every
 * rank (rank 0 included) talks to it through one DEALER. One request is in flight per client:
 *   request  frames: [op: 1 byte] [seq: u64 LE] [key: 0..STORE_KEY_MAX bytes] [value]
 *   reply    frames: [status: i32 LE, 0 or an err.h code] [seq: u64 LE] [value; error detail text]
 * Ops: 'H' hello (key = job, value = i32 rank, i32 world), 'J' wait until every rank said hello
 * (value = i32 wait ms), 'S' set, 'G' get (value = i32 wait ms; the server holds the reply until the
 * key exists or the wait ends), 'A' add (value = i64 delta; counters are decimal text, so get works on
 * them), 'D' delete, 'L' leave. The client drops replies whose seq is not the request's (a late answer
 * to a request it already gave up on). The server validates every frame and answers ERR_PROTO to
 * anything malformed; it never asserts on input.
 *
 * Design of the file store (file:///dir). Every name starts with "<job>@", so runs with different job
 * ids share a directory safely:
 *   <job>@world      world size, published once with link() (atomic create-if-absent)
 *   <job>@rank.N     created with O_CREAT|O_EXCL by rank N (an existing one: ERR_DUP)
 *   <job>@k.<key>    a key's value, written to <job>@tmp.* and rename()d into place
 *   <job>@lock       flock()ed around add and leave
 *   <job>@left       how many ranks have left; the last one removes every <job>@ file.
 * A clean run leaves nothing behind. A crashed run leaves its files: a new run with the same job id
 * then fails with ERR_DUP (or ERR_MISMATCH) and a detail telling the user to remove them, use a fresh
 * directory or set another SYNCBENCH_JOB. */
#include "core/boot.h"
#include "core/hash.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define BOOT_DEFAULT_TIMEOUT_MS 300000
#define REPLY_GRACE_MS 500          /* how long a client waits past the server's own deadline */
#define MISSING_SHOWN 16            /* ranks listed in a "missing:" detail */

/* ------------------------------------------------------------------------------------------------ */
/* configuration                                                                                    */

/* Parse env var `name` as a decimal integer. Returns 0 and sets *present = 0 when unset. */
static int s_env_long(const char *name, long *out, int *present)
{
    const char *s = getenv(name);
    *present = 0;
    if (!s) return 0;
    if (!*s) return err_set(ERR_INVAL, "%s is set but empty", name);
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end) return err_set(ERR_INVAL, "%s=%s is not an integer", name, s);
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX) return err_set(ERR_RANGE, "%s=%s is out of range", name, s);
    *out = v;
    *present = 1;
    return 0;
}

/* Slurm's "2(x3),1" list of tasks per node: the entry for node `node` (or the common value when
 * node < 0 and all agree). 0 when it cannot tell. */
static int s_slurm_tasks_per_node(const char *s, long node)
{
    long idx = 0, common = -1;
    while (*s) {
        char *end;
        long n = strtol(s, &end, 10), rep = 1;
        if (end == s || n <= 0) return 0;
        s = end;
        if (*s == '(') {
            if (s[1] != 'x') return 0;
            rep = strtol(s + 2, &end, 10);
            if (end == s + 2 || *end != ')' || rep <= 0) return 0;
            s = end + 1;
        }
        if (node >= 0 && node >= idx && node < idx + rep) return (int)n;
        if (common < 0) common = n;
        else if (common != n) common = 0;
        idx += rep;
        if (*s == ',') s++;
        else if (*s) return 0;
    }
    return node < 0 && common > 0 ? (int)common : 0;
}

static int s_job_ok(const char *j)
{
    if (!*j) return 0;
    for (; *j; j++)
        if (!((*j >= 'a' && *j <= 'z') || (*j >= 'A' && *j <= 'Z') || (*j >= '0' && *j <= '9') || *j == '-' ||
              *j == '_' || *j == '.'))
            return 0;
    return 1;
}


static int s_parse_port(const char *what, const char *s, int *port)
{
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || end == s || *end || errno || v < 1 || v > 65535)
        return err_set(ERR_RANGE, "%s=%s is not a port (1..65535)", what, s);
    *port = (int)v;
    return 0;
}

static int s_set_host(boot_cfg_t *cfg, const char *what, const char *h, size_t n)
{
    if (n == 0) return err_set(ERR_INVAL, "%s is empty: give the address of rank 0's host", what);
    if (h[0] == '[' || memchr(h, ':', n))
        return err_set(ERR_UNSUP, "%s=%.*s: IPv6 master addresses are not supported; use an IPv4 address or a host name",
                       what, (int)n, h);
    if (n >= sizeof cfg->host) return err_set(ERR_RANGE, "%s is longer than %zu characters", what, sizeof cfg->host - 1);
    memcpy(cfg->host, h, n);
    cfg->host[n] = '\0';
    return 0;
}

int boot_cfg_init(boot_cfg_t *cfg, const char *init_method, int rank, int world, int timeout_ms)
{
    if (!cfg) return err_set(ERR_INVAL, "boot_cfg_init: cfg is NULL");
    memset(cfg, 0, sizeof *cfg);
    cfg->timeout_ms = timeout_ms > 0 ? timeout_ms : BOOT_DEFAULT_TIMEOUT_MS;
    const char *m = init_method && *init_method ? init_method : "env://";

    /* the init method */
    if (!strncmp(m, "tcp://", 6)) {
        strcpy(cfg->method, "tcp");
        const char *hp = m + 6, *colon = strrchr(hp, ':');
        if (!colon) return err_set(ERR_INVAL, "init method '%s' has no port: use tcp://HOST:PORT", m);
        CHECK(s_set_host(cfg, "tcp:// host", hp, (size_t)(colon - hp)));
        CHECK(s_parse_port("tcp:// port", colon + 1, &cfg->port));
    } else if (!strcmp(m, "env://")) {
        strcpy(cfg->method, "env");
        const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
        const char *launcher = getenv("SLURM_PROCID") ? "Slurm (srun)"
                             : getenv("OMPI_COMM_WORLD_RANK") ? "OpenMPI (mpirun)" : NULL;
        if (!a || !*a || !p || !*p) {
            if (launcher)
                return err_set(ERR_INVAL, "env:// under %s needs MASTER_ADDR and MASTER_PORT (%s unset): set them to "
                               "the address of the node running rank 0 and a free port, e.g. "
                               "MASTER_ADDR=$(hostname) MASTER_PORT=29500 before launching",
                               launcher, !a || !*a ? "MASTER_ADDR is" : "MASTER_PORT is");
            return err_set(ERR_INVAL, "env:// needs MASTER_ADDR and MASTER_PORT (%s unset): set them to the address "
                           "of rank 0's host and a free port, or use tcp://HOST:PORT",
                           !a || !*a ? "MASTER_ADDR is" : "MASTER_PORT is");
        }
        CHECK(s_set_host(cfg, "MASTER_ADDR", a, strlen(a)));
        CHECK(s_parse_port("MASTER_PORT", p, &cfg->port));
    } else if (!strncmp(m, "file://", 7)) {
        strcpy(cfg->method, "file");
        const char *p = m + 7;
        if (p[0] != '/') return err_set(ERR_INVAL, "init method '%s' needs an absolute path: file:///shared/dir", m);
        if (strlen(p) >= sizeof cfg->path - 64)
            return err_set(ERR_RANGE, "file:// path is longer than %zu characters", sizeof cfg->path - 65);
        strcpy(cfg->path, p);
        size_t n = strlen(cfg->path);
        while (n > 1 && cfg->path[n - 1] == '/') cfg->path[--n] = '\0';
    } else {
        return err_set(ERR_INVAL, "unknown init method '%s': use tcp://HOST:PORT, env:// or file:///path", m);
    }

    /* rank and world: args > torchrun vars > OpenMPI > Slurm (mpirun inside an sbatch script inherits
     * the batch step's SLURM_PROCID=0, so OpenMPI's own variables must win over Slurm's) */
    long er = -1, ew = -1, elr = -1, elw = 0;
    const char *src = NULL, *rname = "", *wname = "";
    int hr = 0, hw = 0;
    if (getenv("RANK") || getenv("WORLD_SIZE")) {
        src = "torchrun"; rname = "RANK"; wname = "WORLD_SIZE";
        CHECK(s_env_long("RANK", &er, &hr));
        CHECK(s_env_long("WORLD_SIZE", &ew, &hw));
    } else if (getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE")) {
        src = "openmpi"; rname = "OMPI_COMM_WORLD_RANK"; wname = "OMPI_COMM_WORLD_SIZE";
        CHECK(s_env_long(rname, &er, &hr));
        CHECK(s_env_long(wname, &ew, &hw));
    } else if (getenv("SLURM_PROCID") || getenv("SLURM_NTASKS")) {
        src = "slurm"; rname = "SLURM_PROCID"; wname = "SLURM_NTASKS";
        CHECK(s_env_long(rname, &er, &hr));
        CHECK(s_env_long(wname, &ew, &hw));
    }
    if (rank >= 0) { er = rank; hr = 1; rname = "rank"; }
    if (world >= 0) { ew = world; hw = 1; wname = "world"; }
    if (rank >= 0 && world >= 0) src = "args";
    else if (!src) src = "args";
    if (!hr && !hw)
        return err_set(ERR_INVAL, "rank and world size unknown: pass them explicitly, set RANK and WORLD_SIZE "
                       "(torchrun style), or start the ranks with srun or mpirun");
    if (!hr) return err_set(ERR_INVAL, "%s=%ld is set but the rank is not: set %s too", wname, ew,
                            !strcmp(src, "torchrun") ? "RANK" : !strcmp(src, "openmpi") ? "OMPI_COMM_WORLD_RANK"
                            : !strcmp(src, "slurm") ? "SLURM_PROCID" : "the rank");
    if (!hw) return err_set(ERR_INVAL, "%s=%ld is set but the world size is not: set %s too", rname, er,
                            !strcmp(src, "torchrun") ? "WORLD_SIZE" : !strcmp(src, "openmpi") ? "OMPI_COMM_WORLD_SIZE"
                            : !strcmp(src, "slurm") ? "SLURM_NTASKS" : "the world size");
    if (ew < 1) return err_set(ERR_RANGE, "%s=%ld: world size must be >= 1", wname, ew);
    if (er < 0) return err_set(ERR_RANGE, "%s=%ld: rank must be >= 0", rname, er);
    if (er >= ew) return err_set(ERR_RANGE, "%s=%ld but %s=%ld: rank must be < world size", rname, er, wname, ew);
    cfg->rank = (int)er;
    cfg->world = (int)ew;
    cfg->source = src;

    /* local rank / local world: same precedence, independent of where rank/world came from */
    const char *lrn = NULL, *lwn = NULL;
    int hlr = 0, hlw = 0;
    if (getenv("LOCAL_RANK") || getenv("LOCAL_WORLD_SIZE")) {
        lrn = "LOCAL_RANK"; lwn = "LOCAL_WORLD_SIZE";
        CHECK(s_env_long(lrn, &elr, &hlr));
        CHECK(s_env_long(lwn, &elw, &hlw));
    } else if (getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
        lrn = "OMPI_COMM_WORLD_LOCAL_RANK"; lwn = "OMPI_COMM_WORLD_LOCAL_SIZE";
        CHECK(s_env_long(lrn, &elr, &hlr));
        CHECK(s_env_long(lwn, &elw, &hlw));
    } else if (getenv("SLURM_LOCALID")) {
        lrn = "SLURM_LOCALID"; lwn = "SLURM_NTASKS_PER_NODE";
        CHECK(s_env_long(lrn, &elr, &hlr));
        CHECK(s_env_long(lwn, &elw, &hlw));
        if (!hlw && getenv("SLURM_TASKS_PER_NODE")) {
            long node = -1;
            int hn = 0;
            CHECK(s_env_long("SLURM_NODEID", &node, &hn));
            lwn = "SLURM_TASKS_PER_NODE";
            elw = s_slurm_tasks_per_node(getenv("SLURM_TASKS_PER_NODE"), hn ? node : -1);
            hlw = elw > 0;
            if (!hlw && !hn && getenv("SLURM_TASKS_PER_NODE")[0] && s_slurm_tasks_per_node(getenv("SLURM_TASKS_PER_NODE"), 0) == 0)
                return err_set(ERR_INVAL, "SLURM_TASKS_PER_NODE=%s is not a Slurm task list like '4' or '2(x3),1'",
                               getenv("SLURM_TASKS_PER_NODE"));
        }
    }
    if (hlw && elw < 1) return err_set(ERR_RANGE, "%s=%ld: local world size must be >= 1", lwn, elw);
    if (hlw && elw > ew) return err_set(ERR_RANGE, "%s=%ld but %s=%ld: local world size must be <= world size",
                                        lwn, elw, wname, ew);
    if (hlr && elr < 0) return err_set(ERR_RANGE, "%s=%ld: local rank must be >= 0", lrn, elr);
    if (hlr && hlw && elr >= elw)
        return err_set(ERR_RANGE, "%s=%ld but %s=%ld: local rank must be < local world size", lrn, elr, lwn, elw);
    if (hlr && elr >= ew) return err_set(ERR_RANGE, "%s=%ld but %s=%ld: local rank must be < world size", lrn, elr, wname, ew);
    cfg->local_rank = hlr ? (int)elr : (ew == 1 ? 0 : -1);
    cfg->local_world = hlw ? (int)elw : (ew == 1 ? 1 : 0);

    /* job id */
    const char *job = getenv("SYNCBENCH_JOB");
    if (job) {
        if (strlen(job) >= sizeof cfg->job)
            return err_set(ERR_RANGE, "SYNCBENCH_JOB is longer than %zu characters", sizeof cfg->job - 1);
        if (!s_job_ok(job))
            return err_set(ERR_INVAL, "SYNCBENCH_JOB='%s' may only contain letters, digits, '.', '_' and '-' "
                           "(it is part of file names)", job);
        strcpy(cfg->job, job);
    } else {
        uint64_t h = hash_fnv1a64(cfg->method, strlen(cfg->method), HASH_FNV1A64_INIT);
        if (!strcmp(cfg->method, "file")) h = hash_fnv1a64(cfg->path, strlen(cfg->path), h);
        else {
            char hp[300];
            snprintf(hp, sizeof hp, "%s:%d", cfg->host, cfg->port);
            h = hash_fnv1a64(hp, strlen(hp), h);
        }
        snprintf(cfg->job, sizeof cfg->job, "%s-%016llx", cfg->method, (unsigned long long)h);
    }

    /* interface: the environment here; a caller that sets cfg->ifname after this call wins */
    const char *ifn = getenv("SYNCBENCH_SOCKET_IFNAME");
    if (ifn && *ifn) {
        if (strlen(ifn) >= sizeof cfg->ifname)
            return err_set(ERR_RANGE, "SYNCBENCH_SOCKET_IFNAME is longer than %zu characters", sizeof cfg->ifname - 1);
        strcpy(cfg->ifname, ifn);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* addresses                                                                                        */

static int s_resolve4(const char *host, struct in_addr *out)
{
    if (inet_pton(AF_INET, host, out) == 1) return 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return err_set(ERR_INVAL, "cannot resolve master address '%s': %s", host, gai_strerror(rc));
    *out = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

static int s_is_loopback(struct in_addr a) { return (ntohl(a.s_addr) >> 24) == 127; }

/* Is a one of this host's IPv4 addresses? */
static int s_is_local(struct in_addr a)
{
    if (s_is_loopback(a)) return 1;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return 0;
    int found = 0;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr)
            found = 1;
    freeifaddrs(ifs);
    return found;
}

int boot_local_addr(const boot_cfg_t *cfg, char *out, size_t len)
{
    if (!cfg || !out || len < INET_ADDRSTRLEN) return err_set(ERR_INVAL, "boot_local_addr: bad arguments");
    if (cfg->ifname[0]) {
        /* exact name first, then the first interface whose name starts with ifname (NCCL style "eth") */
        struct ifaddrs *ifs = NULL;
        if (getifaddrs(&ifs) != 0) return err_set(ERR_SYS, "getifaddrs: %s", strerror(errno));
        const struct sockaddr_in *hit = NULL;
        for (int pass = 0; pass < 2 && !hit; pass++)
            for (struct ifaddrs *i = ifs; i && !hit; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                    (pass == 0 ? !strcmp(i->ifa_name, cfg->ifname)
                               : !strncmp(i->ifa_name, cfg->ifname, strlen(cfg->ifname))))
                    hit = (const struct sockaddr_in *)i->ifa_addr;
        if (hit) inet_ntop(AF_INET, &hit->sin_addr, out, (socklen_t)len);
        char names[256] = "";
        if (!hit)
            for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strlen(names) + strlen(i->ifa_name) + 3 < sizeof names) {
                    if (names[0]) strcat(names, ", ");
                    strcat(names, i->ifa_name);
                }
        freeifaddrs(ifs);
        if (!hit)
            return err_set(ERR_NODEV, "interface '%s' (SYNCBENCH_SOCKET_IFNAME / --ifname) has no IPv4 address here "
                           "(interfaces with one: %s)", cfg->ifname, names[0] ? names : "none");
        return 0;
    }
    if (!strcmp(cfg->method, "file")) {
        /* no master to route towards: the first up, non-loopback IPv4 interface, else loopback */
        struct ifaddrs *ifs = NULL;
        snprintf(out, len, "127.0.0.1");
        if (getifaddrs(&ifs) != 0) return 0;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK)) {
                inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)len);
                break;
            }
        freeifaddrs(ifs);
        return 0;
    }
    struct in_addr m;
    CHECK(s_resolve4(cfg->host, &m));
    if (s_is_loopback(m)) {
        snprintf(out, len, "127.0.0.1");
        return 0;
    }
    /* the source address the kernel picks towards the master (a UDP connect sends nothing) */
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return err_set(ERR_SYS, "socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port), .sin_addr = m};
    socklen_t sl = sizeof sa;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_SYS, "no route to master %s:%d: %s (set SYNCBENCH_SOCKET_IFNAME?)", cfg->host, cfg->port,
                       strerror(e));
    }
    close(fd);
    inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)len);
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* wire helpers                                                                                     */

static void s_put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void s_put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t s_get32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t s_get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

#define MP_MAX 6
typedef struct { zmq_msg_t m[MP_MAX]; int n, extra; } mp_t;

/* Receive one whole multipart message (frames past MP_MAX are counted in extra and dropped). */
static int s_mp_recv(void *sock, mp_t *mp, int flags)
{
    mp->n = 0;
    mp->extra = 0;
    for (;;) {
        zmq_msg_t *m = mp->n < MP_MAX ? &mp->m[mp->n] : NULL, scratch;
        if (!m) m = &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, sock, mp->n || mp->extra ? 0 : flags) < 0) {
            zmq_msg_close(m);
            return mp->n ? 0 : -1;
        }
        int more = zmq_msg_more(m);
        if (m == &scratch) { zmq_msg_close(m); mp->extra++; }
        else mp->n++;
        if (!more) return 0;
    }
}

static void s_mp_close(mp_t *mp)
{
    for (int i = 0; i < mp->n; i++) zmq_msg_close(&mp->m[i]);
    mp->n = 0;
}

static int s_poll_in(void *sock, int ms)
{
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    for (;;) {
        int rc = zmq_poll(&it, 1, ms);
        if (rc >= 0) return rc > 0 && (it.revents & ZMQ_POLLIN);
        if (zmq_errno() != EINTR) return -1;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* server (rank 0, its own thread)                                                                  */

typedef struct ent { struct ent *next; char *key; void *val; size_t len; } ent_t;
typedef struct { ent_t **b; size_t nb, n; } map_t;

static ent_t **s_map_slot(map_t *m, const char *key)
{
    ent_t **e = &m->b[hash_fnv1a64(key, strlen(key), HASH_FNV1A64_INIT) & (m->nb - 1)];
    while (*e && strcmp((*e)->key, key)) e = &(*e)->next;
    return e;
}

static int s_map_put(map_t *m, const char *key, const void *val, size_t len)
{
    if (!m->b) {
        m->nb = 64;
        if (!(m->b = calloc(m->nb, sizeof *m->b))) return ERR_NOMEM;
    }
    if (m->n >= m->nb * 2) { /* grow */
        size_t nb = m->nb * 4;
        ent_t **b = calloc(nb, sizeof *b);
        if (b) {
            for (size_t i = 0; i < m->nb; i++)
                for (ent_t *e = m->b[i], *nx; e; e = nx) {
                    nx = e->next;
                    size_t h = hash_fnv1a64(e->key, strlen(e->key), HASH_FNV1A64_INIT) & (nb - 1);
                    e->next = b[h];
                    b[h] = e;
                }
            free(m->b);
            m->b = b;
            m->nb = nb;
        }
    }
    void *copy = malloc(len ? len : 1);
    if (!copy) return ERR_NOMEM;
    if (len) memcpy(copy, val, len);
    ent_t **slot = s_map_slot(m, key);
    if (*slot) {
        free((*slot)->val);
        (*slot)->val = copy;
        (*slot)->len = len;
        return 0;
    }
    ent_t *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) { free(e); free(copy); return ERR_NOMEM; }
    e->val = copy;
    e->len = len;
    *slot = e;
    m->n++;
    return 0;
}

static void s_map_del(map_t *m, const char *key)
{
    if (!m->b) return;
    ent_t **slot = s_map_slot(m, key), *e = *slot;
    if (!e) return;
    *slot = e->next;
    free(e->key); free(e->val); free(e);
    m->n--;
}

static ent_t *s_map_get(map_t *m, const char *key) { return m->b ? *s_map_slot(m, key) : NULL; }

static void s_map_free(map_t *m)
{
    for (size_t i = 0; i < m->nb; i++)
        for (ent_t *e = m->b[i], *nx; e; e = nx) { nx = e->next; free(e->key); free(e->val); free(e); }
    free(m->b);
    memset(m, 0, sizeof *m);
}

typedef struct {
    unsigned char rid[256]; size_t rlen;
    uint64_t seq, deadline;
    char op;                 /* 'G' or 'J' */
    char key[STORE_KEY_MAX + 1];
} waiter_t;

typedef struct server {
    void *router;
    int world;
    char job[64];
    int timeout_ms;
    unsigned char (*rid)[256];   /* routing id of each joined rank */
    size_t *rlen;
    unsigned char *joined, *left;
    int njoined, nleft;
    map_t map;
    waiter_t *w;
    size_t nw, capw;
    char rejected[256];          /* the last HELLO the server turned away, for timeout details */
    atomic_int stop, abort_now;
    pthread_t thr;
} server_t;

static void s_reply(server_t *s, const void *rid, size_t rlen, int status, uint64_t seq, const void *val, size_t len)
{
    unsigned char st[4], sq[8];
    s_put32(st, (uint32_t)status);
    s_put64(sq, seq);
    if (zmq_send(s->router, rid, rlen, ZMQ_SNDMORE) < 0) return;
    zmq_send(s->router, st, 4, ZMQ_SNDMORE);
    zmq_send(s->router, sq, 8, ZMQ_SNDMORE);
    zmq_send(s->router, val, len, 0);
}

static void s_reply_err(server_t *s, const void *rid, size_t rlen, int code, uint64_t seq, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void s_reply_err(server_t *s, const void *rid, size_t rlen, int code, uint64_t seq, const char *fmt, ...)
{
    char d[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    s_reply(s, rid, rlen, code, seq, d, strlen(d));
}

static int s_rank_of(server_t *s, const void *rid, size_t rlen)
{
    for (int r = 0; r < s->world; r++)
        if (s->joined[r] && s->rlen[r] == rlen && !memcmp(s->rid[r], rid, rlen)) return r;
    return -1;
}

static void s_missing(server_t *s, char *buf, size_t len)
{
    size_t off = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 0; r < s->world && off < len; r++)
        if (!s->joined[r]) {
            if (shown == MISSING_SHOWN) { snprintf(buf + off, len - off, ", ..."); break; }
            int k = snprintf(buf + off, len - off, "%s%d", shown ? ", " : "", r);
            if (k > 0) off += (size_t)k;
            shown++;
        }
}

static int s_add_waiter(server_t *s, const void *rid, size_t rlen, uint64_t seq, char op, const char *key, int wait_ms)
{
    if (s->nw == s->capw) {
        size_t cap = s->capw ? s->capw * 2 : 16;
        waiter_t *w = realloc(s->w, cap * sizeof *w);
        if (!w) return ERR_NOMEM;
        s->w = w;
        s->capw = cap;
    }
    waiter_t *w = &s->w[s->nw++];
    memcpy(w->rid, rid, rlen);
    w->rlen = rlen;
    w->seq = seq;
    w->op = op;
    snprintf(w->key, sizeof w->key, "%s", key);
    w->deadline = deadline_in(wait_ms < 0 ? 0 : wait_ms);
    return 0;
}

/* Answer waiters that can be answered now (key present, everyone joined) or whose time is up. */
static void s_wake(server_t *s)
{
    for (size_t i = 0; i < s->nw;) {
        waiter_t *w = &s->w[i];
        int done = 1;
        if (w->op == 'G') {
            ent_t *e = s_map_get(&s->map, w->key);
            if (e) s_reply(s, w->rid, w->rlen, 0, w->seq, e->val, e->len);
            else if (deadline_passed(w->deadline)) s_reply(s, w->rid, w->rlen, ERR_TIMEOUT, w->seq, "", 0);
            else done = 0;
        } else {
            if (s->njoined == s->world) s_reply(s, w->rid, w->rlen, 0, w->seq, "", 0);
            else if (deadline_passed(w->deadline)) {
                char miss[200], d[512];
                s_missing(s, miss, sizeof miss);
                int n = snprintf(d, sizeof d, "%d %d %s", s->njoined, s->world, miss);
                if (s->rejected[0] && n > 0 && (size_t)n < sizeof d)
                    snprintf(d + n, sizeof d - (size_t)n, "; turned away: %s", s->rejected);
                s_reply(s, w->rid, w->rlen, ERR_TIMEOUT, w->seq, d, strlen(d));
            } else done = 0;
        }
        if (done) s->w[i] = s->w[--s->nw];
        else i++;
    }
}

static int s_next_wait_ms(server_t *s)
{
    int ms = 100;
    for (size_t i = 0; i < s->nw; i++) {
        int l = deadline_left_ms(s->w[i].deadline);
        if (l >= 0 && l < ms) ms = l;
    }
    return ms;
}

static void s_handle(server_t *s, mp_t *mp)
{
    if (mp->n < 1) return;
    const void *rid = zmq_msg_data(&mp->m[0]);
    size_t rlen = zmq_msg_size(&mp->m[0]);
    if (rlen == 0 || rlen > 255) return; /* not a ROUTER identity we can answer */
    uint64_t seq = 0;
    if (mp->n >= 3 && zmq_msg_size(&mp->m[2]) == 8) seq = s_get64(zmq_msg_data(&mp->m[2]));
    if (mp->n != 5 || mp->extra) {
        s_reply_err(s, rid, rlen, ERR_PROTO, seq, "store request has %d frames, expected 4 (op, seq, key, value)",
                    mp->n + mp->extra - 1);
        return;
    }
    if (zmq_msg_size(&mp->m[1]) != 1 || zmq_msg_size(&mp->m[2]) != 8) {
        s_reply_err(s, rid, rlen, ERR_PROTO, seq, "store request: op frame must be 1 byte and seq frame 8 bytes");
        return;
    }
    char op = *(const char *)zmq_msg_data(&mp->m[1]);
    size_t klen = zmq_msg_size(&mp->m[3]), vlen = zmq_msg_size(&mp->m[4]);
    const unsigned char *val = zmq_msg_data(&mp->m[4]);
    char key[STORE_KEY_MAX + 1];
    if (klen > STORE_KEY_MAX || memchr(zmq_msg_data(&mp->m[3]), '\0', klen)) {
        s_reply_err(s, rid, rlen, ERR_PROTO, seq, "store key must be at most %d bytes without NUL", STORE_KEY_MAX);
        return;
    }
    memcpy(key, zmq_msg_data(&mp->m[3]), klen);
    key[klen] = '\0';
    if (vlen > STORE_VAL_MAX) {
        s_reply_err(s, rid, rlen, ERR_PROTO, seq, "store value of %zu bytes is over the limit", vlen);
        return;
    }

    if (op == 'H') {
        if (vlen != 8) { s_reply_err(s, rid, rlen, ERR_PROTO, seq, "HELLO value must be 8 bytes"); return; }
        int r = (int)s_get32(val), w = (int)s_get32(val + 4);
        if (strcmp(key, s->job)) {
            snprintf(s->rejected, sizeof s->rejected, "a rank %d of job '%.64s'", r, key);
            s_reply_err(s, rid, rlen, ERR_MISMATCH, seq, "the store at this address serves job '%s', not job '%s' "
                        "(SYNCBENCH_JOB differs between ranks, or another run uses this port)", s->job, key);
            return;
        }
        if (w != s->world) {
            snprintf(s->rejected, sizeof s->rejected, "a rank %d with world size %d", r, w);
            s_reply_err(s, rid, rlen, ERR_MISMATCH, seq, "rank %d has world size %d but rank 0 started this job "
                        "with world size %d: every rank must use the same WORLD_SIZE", r, w, s->world);
            return;
        }
        if (r < 0 || r >= s->world) {
            s_reply_err(s, rid, rlen, ERR_RANGE, seq, "rank %d is outside 0..%d", r, s->world - 1);
            return;
        }
        if (s->joined[r]) {
            if (s->rlen[r] == rlen && !memcmp(s->rid[r], rid, rlen)) { s_reply(s, rid, rlen, 0, seq, "", 0); return; }
            snprintf(s->rejected, sizeof s->rejected, "a second rank %d", r);
            s_reply_err(s, rid, rlen, ERR_DUP, seq, "rank %d has already joined job '%s': two processes have the "
                        "same rank", r, s->job);
            return;
        }
        if (s_rank_of(s, rid, rlen) >= 0) {
            s_reply_err(s, rid, rlen, ERR_STATE, seq, "this connection already joined as rank %d", s_rank_of(s, rid, rlen));
            return;
        }
        s->joined[r] = 1;
        memcpy(s->rid[r], rid, rlen);
        s->rlen[r] = rlen;
        s->njoined++;
        LOG_D("store: rank %d joined (%d of %d)", r, s->njoined, s->world);
        s_reply(s, rid, rlen, 0, seq, "", 0);
        return;
    }
    int r = s_rank_of(s, rid, rlen);
    if (r < 0) {
        s_reply_err(s, rid, rlen, ERR_STATE, seq, "store request '%c' before HELLO", op >= 32 && op < 127 ? op : '?');
        return;
    }
    switch (op) {
    case 'J':
    case 'G':
        if (vlen != 4) { s_reply_err(s, rid, rlen, ERR_PROTO, seq, "wait value must be 4 bytes"); return; }
        if (op == 'G' && !klen) { s_reply_err(s, rid, rlen, ERR_PROTO, seq, "empty key"); return; }
        if (s_add_waiter(s, rid, rlen, seq, op, key, (int)s_get32(val)) < 0)
            s_reply_err(s, rid, rlen, ERR_NOMEM, seq, "store server out of memory");
        return;
    case 'S':
        if (!klen) { s_reply_err(s, rid, rlen, ERR_PROTO, seq, "empty key"); return; }
        if (s_map_put(&s->map, key, val, vlen) < 0) { s_reply_err(s, rid, rlen, ERR_NOMEM, seq, "store server out of memory"); return; }
        s_reply(s, rid, rlen, 0, seq, "", 0);
        return;
    case 'D':
        s_map_del(&s->map, key);
        s_reply(s, rid, rlen, 0, seq, "", 0);
        return;
    case 'A': {
        if (vlen != 8 || !klen) { s_reply_err(s, rid, rlen, ERR_PROTO, seq, "add needs a key and an 8-byte delta"); return; }
        int64_t d = (int64_t)s_get64(val), cur = 0;
        ent_t *e = s_map_get(&s->map, key);
        if (e) {
            char num[32];
            char *end;
            if (e->len == 0 || e->len >= sizeof num) goto notnum;
            memcpy(num, e->val, e->len);
            num[e->len] = '\0';
            errno = 0;
            cur = strtoll(num, &end, 10);
            if (*end || errno) goto notnum;
        }
        if ((d > 0 && cur > INT64_MAX - d) || (d < 0 && cur < INT64_MIN - d)) {
            s_reply_err(s, rid, rlen, ERR_RANGE, seq, "counter '%s' would overflow", key);
            return;
        }
        cur += d;
        char num[32];
        int n = snprintf(num, sizeof num, "%lld", (long long)cur);
        if (s_map_put(&s->map, key, num, (size_t)n) < 0) { s_reply_err(s, rid, rlen, ERR_NOMEM, seq, "store server out of memory"); return; }
        unsigned char out[8];
        s_put64(out, (uint64_t)cur);
        s_reply(s, rid, rlen, 0, seq, out, 8);
        return;
    notnum:
        s_reply_err(s, rid, rlen, ERR_INVAL, seq, "key '%s' holds a value that is not a counter", key);
        return;
    }
    case 'L':
        if (!s->left[r]) { s->left[r] = 1; s->nleft++; }
        s_reply(s, rid, rlen, 0, seq, "", 0);
        return;
    default:
        s_reply_err(s, rid, rlen, ERR_PROTO, seq, "unknown store op 0x%02x", (unsigned char)op);
    }
}

static void *s_server_main(void *arg)
{
    server_t *s = arg;
    uint64_t stop_deadline = 0;
    for (;;) {
        if (atomic_load(&s->abort_now)) break;
        if (atomic_load(&s->stop)) {
            if (!stop_deadline) stop_deadline = deadline_in(s->timeout_ms);
            if (s->nleft >= s->njoined) break;
            if (deadline_passed(stop_deadline)) {
                LOG_W("store: stopping with %d of %d ranks not having left", s->njoined - s->nleft, s->njoined);
                break;
            }
        }
        int rc = s_poll_in(s->router, s_next_wait_ms(s));
        if (rc < 0) { LOG_E("store: zmq_poll: %s", zmq_strerror(zmq_errno())); break; }
        for (int i = 0; rc > 0 && i < 256; i++) {
            mp_t mp;
            if (s_mp_recv(s->router, &mp, ZMQ_DONTWAIT) < 0) break;
            s_handle(s, &mp);
            s_mp_close(&mp);
        }
        s_wake(s);
    }
    return NULL;
}

static void s_server_free(server_t *s)
{
    if (!s) return;
    if (s->router) zmq_close(s->router);
    s_map_free(&s->map);
    free(s->rid); free(s->rlen); free(s->joined); free(s->left); free(s->w);
    free(s);
}

static int s_server_start(server_t **out, void *ctx, const boot_cfg_t *cfg)
{
    struct in_addr a;
    CHECK(s_resolve4(cfg->host, &a));
    char ip[INET_ADDRSTRLEN], ep[300];
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    int local = s_is_local(a);
    if (!local)
        LOG_W("store: master address %s (%s) is not an address of this host; rank 0 listens on all interfaces",
              cfg->host, ip);
    snprintf(ep, sizeof ep, "tcp://%s:%d", local ? ip : "0.0.0.0", cfg->port);

    server_t *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "store server");
    s->world = cfg->world;
    s->timeout_ms = cfg->timeout_ms;
    snprintf(s->job, sizeof s->job, "%s", cfg->job);
    s->rid = calloc((size_t)cfg->world, sizeof *s->rid);
    s->rlen = calloc((size_t)cfg->world, sizeof *s->rlen);
    s->joined = calloc((size_t)cfg->world, 1);
    s->left = calloc((size_t)cfg->world, 1);
    if (!s->rid || !s->rlen || !s->joined || !s->left) { s_server_free(s); return err_set(ERR_NOMEM, "store server"); }
    s->router = zmq_socket(ctx, ZMQ_ROUTER);
    if (!s->router) { s_server_free(s); return err_set(ERR_SYS, "zmq_socket: %s", zmq_strerror(zmq_errno())); }
    int zero = 0, sndto = 1000;
    int64_t maxmsg = STORE_VAL_MAX + 4096;
    zmq_setsockopt(s->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->router, ZMQ_SNDTIMEO, &sndto, sizeof sndto);
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zmq_bind(s->router, ep) != 0) {
        int e = zmq_errno();
        s_server_free(s);
        if (e == EADDRINUSE)
            return err_set(ERR_ADDRINUSE, "rank 0 cannot listen on %s:%d: port %d is already in use (another job, a "
                           "second rank 0, or a stale process): choose another MASTER_PORT", ip, cfg->port, cfg->port);
        return err_set(ERR_SYS, "rank 0 cannot listen on %s: %s", ep, zmq_strerror(e));
    }
    int rc = pthread_create(&s->thr, NULL, s_server_main, s);
    if (rc) { s_server_free(s); return err_set(ERR_SYS, "pthread_create: %s", strerror(rc)); }
    *out = s;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* client                                                                                           */

struct store {
    boot_cfg_t cfg;
    pthread_mutex_t mu;
    int joined;
    /* tcp / env */
    void *ctx, *dealer;
    server_t *srv;
    uint64_t seq;
    /* file */
    char dir[1024];
    int made_rank_file;
    unsigned long tmpn;
};

/* Send one request and wait for its reply until deadline. 0: *status and a malloc'd NUL-terminated copy
 * of the reply value in *out (when out != NULL); ERR_TIMEOUT: no reply. */
static int s_call(store_t *self, char op, const char *key, const void *val, size_t len, uint64_t deadline,
                  int *status, void **out, size_t *outlen)
{
    uint64_t seq = ++self->seq;
    unsigned char sq[8];
    s_put64(sq, seq);
    if (zmq_send(self->dealer, &op, 1, ZMQ_SNDMORE) < 0 || zmq_send(self->dealer, sq, 8, ZMQ_SNDMORE) < 0 ||
        zmq_send(self->dealer, key, strlen(key), ZMQ_SNDMORE) < 0 || zmq_send(self->dealer, val, len, 0) < 0) {
        if (zmq_errno() == EAGAIN) return ERR_TIMEOUT;
        return err_set(ERR_SYS, "store send: %s", zmq_strerror(zmq_errno()));
    }
    for (;;) {
        int left = deadline_left_ms(deadline);
        if (left == 0) return ERR_TIMEOUT;
        int rc = s_poll_in(self->dealer, left);
        if (rc < 0) return err_set(ERR_SYS, "store poll: %s", zmq_strerror(zmq_errno()));
        if (rc == 0) continue;
        mp_t mp;
        if (s_mp_recv(self->dealer, &mp, ZMQ_DONTWAIT) < 0) continue;
        if (mp.n != 3 || mp.extra || zmq_msg_size(&mp.m[0]) != 4 || zmq_msg_size(&mp.m[1]) != 8) {
            s_mp_close(&mp);
            LOG_W("store: dropped a malformed reply");
            continue;
        }
        if (s_get64(zmq_msg_data(&mp.m[1])) != seq) { s_mp_close(&mp); continue; } /* stale */
        *status = (int)s_get32(zmq_msg_data(&mp.m[0]));
        size_t n = zmq_msg_size(&mp.m[2]);
        if (*status > 0 || *status < -1000) {
            s_mp_close(&mp);
            return err_set(ERR_PROTO, "store reply has an invalid status %d", *status);
        }
        if (out) {
            char *c = malloc(n + 1);
            if (!c) { s_mp_close(&mp); return err_set(ERR_NOMEM, "store reply of %zu bytes", n); }
            memcpy(c, zmq_msg_data(&mp.m[2]), n);
            c[n] = '\0';
            *out = c;
            *outlen = n;
        }
        s_mp_close(&mp);
        return 0;
    }
}

static double s_secs(int ms) { return ms / 1000.0; }

static int s_check_key(const char *key)
{
    if (!key || !*key) return err_set(ERR_INVAL, "store key is empty");
    if (strlen(key) > STORE_KEY_MAX) return err_set(ERR_RANGE, "store key '%.40s...' is longer than %d bytes", key, STORE_KEY_MAX);
    return 0;
}

/* ---------------- tcp/env ---------------- */

static int s_tcp_new(store_t *self)
{
    const boot_cfg_t *cfg = &self->cfg;
    uint64_t deadline = deadline_in(cfg->timeout_ms);
    if (!(self->ctx = zmq_ctx_new())) return err_set(ERR_SYS, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (cfg->rank == 0) CHECK(s_server_start(&self->srv, self->ctx, cfg));
    if (!(self->dealer = zmq_socket(self->ctx, ZMQ_DEALER))) return err_set(ERR_SYS, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int zero = 0, sndto = cfg->timeout_ms;
    zmq_setsockopt(self->dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(self->dealer, ZMQ_SNDTIMEO, &sndto, sizeof sndto);
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s:%d", cfg->host, cfg->port);
    if (zmq_connect(self->dealer, ep) != 0)
        return err_set(ERR_INVAL, "cannot connect to master %s: %s", ep, zmq_strerror(zmq_errno()));

    unsigned char hv[8];
    s_put32(hv, (uint32_t)cfg->rank);
    s_put32(hv + 4, (uint32_t)cfg->world);
    int st;
    void *detail = NULL;
    size_t dl;
    int rc = s_call(self, 'H', cfg->job, hv, 8, deadline, &st, &detail, &dl);
    if (rc == ERR_TIMEOUT)
        return err_set(ERR_TIMEOUT, "could not reach master %s:%d within %.1f s (is rank 0 running there? check "
                       "MASTER_ADDR/MASTER_PORT, the network and firewalls)", cfg->host, cfg->port, s_secs(cfg->timeout_ms));
    CHECK(rc);
    if (st < 0) {
        err_set(st, "%s", (char *)detail);
        free(detail);
        return st;
    }
    free(detail);
    self->joined = 1;

    /* wait for everyone: the server answers when all joined or at our deadline with who is missing */
    unsigned char wv[4];
    int left = deadline_left_ms(deadline);
    s_put32(wv, (uint32_t)left);
    detail = NULL;
    rc = s_call(self, 'J', "", wv, 4, deadline_in(left > INT_MAX - REPLY_GRACE_MS ? INT_MAX : left + REPLY_GRACE_MS),
                &st, &detail, &dl);
    if (rc == ERR_TIMEOUT)
        return err_set(ERR_TIMEOUT, "joined master %s:%d but it stopped answering within %.1f s", cfg->host, cfg->port,
                       s_secs(cfg->timeout_ms));
    CHECK(rc);
    if (st == ERR_TIMEOUT) {
        int k = 0, w = 0, off = 0;
        if (sscanf(detail, "%d %d %n", &k, &w, &off) < 2) off = 0;
        err_set(ERR_TIMEOUT, "only %d of %d ranks joined within %.1f s (missing: %s)", k, w, s_secs(cfg->timeout_ms),
                (char *)detail + off);
        free(detail);
        return ERR_TIMEOUT;
    }
    if (st < 0) { err_set(st, "%s", (char *)detail); free(detail); return st; }
    free(detail);
    return 0;
}

static int s_tcp_result(store_t *self, int rc, int st, void *detail, const char *what, const char *key, int wait_ms)
{
    if (rc == ERR_TIMEOUT) {
        free(detail);
        if (wait_ms >= 0)
            return err_set(ERR_TIMEOUT, "store %s '%s': no answer from master %s:%d within %.1f s (did rank 0 exit?)",
                           what, key, self->cfg.host, self->cfg.port, s_secs(wait_ms));
    }
    if (rc < 0) { free(detail); return rc; }
    if (st < 0) {
        if (st == ERR_TIMEOUT) err_set(st, "store get '%s': key not set within %.1f s", key, s_secs(wait_ms));
        else err_set(st, "%s", detail ? (char *)detail : "");
        free(detail);
        return st;
    }
    return 0;
}

/* ---------------- file ---------------- */

static void s_fkey(store_t *self, const char *key, char *out, size_t len)
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
        snprintf(out, len, "%s/%s@h.%016llx.%016llx", self->dir, self->cfg.job,
                 (unsigned long long)hash_fnv1a64(key, strlen(key), HASH_FNV1A64_INIT), (unsigned long long)hash_fnv1a64(key, strlen(key), 0x9e3779b97f4a7c15ull));
    else snprintf(out, len, "%s/%s@k.%s", self->dir, self->cfg.job, enc);
}

static void s_fname(store_t *self, const char *what, char *out, size_t len)
{
    snprintf(out, len, "%s/%s@%s", self->dir, self->cfg.job, what);
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
static int s_write_tmp(store_t *self, const void *val, size_t len, char *tmp, size_t tlen)
{
    char what[96];
    snprintf(what, sizeof what, "tmp.%d.%ld.%lu", self->cfg.rank, (long)getpid(), ++self->tmpn);
    s_fname(self, what, tmp, tlen);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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

/* Read a whole file into a malloc'd NUL-terminated buffer; ERR_IO with errno ENOENT if absent. */
static int s_read_file(const char *path, void **out, size_t *outlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 1 : err_set(ERR_IO, "cannot open %s: %s", path, strerror(errno));
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

static void s_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Take the job's lock file (polling flock, bounded by deadline); returns the fd. */
static int s_lock(store_t *self, uint64_t deadline, int *fd_out)
{
    char p[1200];
    s_fname(self, "lock", p, sizeof p);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_IO, "cannot open lock file %s: %s", p, strerror(errno));
    int nap = 1;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int e = errno;
            close(fd);
            return err_set(ERR_IO, "flock %s: %s", p, strerror(e));
        }
        if (deadline_passed(deadline)) { close(fd); return err_set(ERR_TIMEOUT, "could not lock %s within %.1f s", p, s_secs(self->cfg.timeout_ms)); }
        s_sleep_ms(nap);
        if (nap < 20) nap *= 2;
    }
    *fd_out = fd;
    return 0;
}

static void s_unlock(int fd) { flock(fd, LOCK_UN); close(fd); }

/* Under the lock: counter at path += delta. */
static int s_file_add_locked(store_t *self, const char *path, const char *key, int64_t delta, int64_t *out)
{
    void *cur = NULL;
    size_t n = 0;
    int64_t v = 0;
    int rc = s_read_file(path, &cur, &n);
    if (rc < 0) return rc;
    if (rc == 0) {
        char *end;
        errno = 0;
        v = strtoll(cur, &end, 10);
        int bad = n == 0 || *end || errno;
        free(cur);
        if (bad) return err_set(ERR_INVAL, "key '%s' holds a value that is not a counter", key);
    }
    if ((delta > 0 && v > INT64_MAX - delta) || (delta < 0 && v < INT64_MIN - delta))
        return err_set(ERR_RANGE, "counter '%s' would overflow", key);
    v += delta;
    char num[32], tmp[1200];
    int k = snprintf(num, sizeof num, "%lld", (long long)v);
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
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return err_set(ERR_IO, "cannot create directory %s: %s", p, strerror(errno));
            *s = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set(ERR_IO, "file:// path %s is not a directory", path);
    return 0;
}

static int s_file_new(store_t *self)
{
    const boot_cfg_t *cfg = &self->cfg;
    uint64_t deadline = deadline_in(cfg->timeout_ms);
    snprintf(self->dir, sizeof self->dir, "%s", cfg->path);
    CHECK(s_mkdirs(self->dir));
    const char *stale = "remove its files, use a fresh directory, or set another SYNCBENCH_JOB";

    /* world: first rank publishes it atomically with link(); the others compare */
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
        if (bad) return err_set(ERR_CORRUPT, "%s does not hold a world size: %s", wpath, stale);
        if (w != cfg->world)
            return err_set(ERR_MISMATCH, "this rank has world size %d but %s says %ld (set by the first rank of job '%s', "
                           "or left by an earlier run: %s)", cfg->world, wpath, w, cfg->job, stale);
    }

    /* register this rank */
    char rpath[1200], what[32], info[400], hostn[256] = "?";
    snprintf(what, sizeof what, "rank.%d", cfg->rank);
    s_fname(self, what, rpath, sizeof rpath);
    int fd = open(rpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        void *b = NULL;
        size_t n;
        int rc = s_read_file(rpath, &b, &n);
        if (rc == 0) { while (n && ((char *)b)[n - 1] == '\n') ((char *)b)[--n] = '\0'; }
        err_set(ERR_DUP, "%s already exists (%s%s%s): another process has rank %d in job '%s', or an earlier run "
                "crashed and left it behind: %s", rpath, rc == 0 ? "written by pid/host/time " : "",
                rc == 0 ? (char *)b : "", rc == 0 ? "" : "unreadable", cfg->rank, cfg->job, stale);
        free(b);
        return ERR_DUP;
    }
    if (fd < 0) return err_set(ERR_IO, "cannot create %s: %s", rpath, strerror(errno));
    self->made_rank_file = 1;
    gethostname(hostn, sizeof hostn - 1);
    k = snprintf(info, sizeof info, "%ld %s %lld\n", (long)getpid(), hostn, (long long)time(NULL));
    s_write_all(fd, info, (size_t)k);
    close(fd);

    /* wait until every rank file exists */
    unsigned char *seen = calloc((size_t)cfg->world, 1);
    if (!seen) return err_set(ERR_NOMEM, "file store");
    int nseen = 0, nap = 2;
    for (;;) {
        for (int r = 0; r < cfg->world; r++) {
            if (seen[r]) continue;
            char p[1200];
            snprintf(what, sizeof what, "rank.%d", r);
            s_fname(self, what, p, sizeof p);
            if (access(p, F_OK) == 0) { seen[r] = 1; nseen++; }
        }
        if (nseen == cfg->world) break;
        if (deadline_passed(deadline)) {
            char miss[200];
            size_t off = 0;
            int shown = 0;
            miss[0] = '\0';
            for (int r = 0; r < cfg->world && off < sizeof miss; r++)
                if (!seen[r]) {
                    if (shown == MISSING_SHOWN) { snprintf(miss + off, sizeof miss - off, ", ..."); break; }
                    int m = snprintf(miss + off, sizeof miss - off, "%s%d", shown++ ? ", " : "", r);
                    if (m > 0) off += (size_t)m;
                }
            free(seen);
            return err_set(ERR_TIMEOUT, "only %d of %d ranks joined within %.1f s (missing: %s) in %s", nseen, cfg->world,
                           s_secs(cfg->timeout_ms), miss, self->dir);
        }
        s_sleep_ms(nap);
        if (nap < 50) nap *= 2;
    }
    free(seen);
    self->joined = 1;
    return 0;
}

static void s_file_cleanup(store_t *self)
{
    DIR *d = opendir(self->dir);
    if (!d) return;
    char pre[80];
    snprintf(pre, sizeof pre, "%s@", self->cfg.job);
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

static void s_file_leave(store_t *self)
{
    int fd;
    uint64_t deadline = deadline_in(self->cfg.timeout_ms);
    if (s_lock(self, deadline, &fd) < 0) {
        LOG_W("store: %s", err_detail());
        return;
    }
    char p[1200];
    int64_t left = 0;
    s_fname(self, "left", p, sizeof p);
    int rc = s_file_add_locked(self, p, "left", 1, &left);
    if (rc == 0 && left >= self->cfg.world) s_file_cleanup(self); /* last one out removes the job's files */
    s_unlock(fd);
}

/* ---------------- public ---------------- */

int store_new(store_t **self_p, const boot_cfg_t *cfg)
{
    if (!self_p || !cfg) return err_set(ERR_INVAL, "store_new: NULL argument");
    *self_p = NULL;
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
        return err_set(ERR_RANGE, "store_new: rank %d / world %d is not valid (use boot_cfg_init)", cfg->rank, cfg->world);
    store_t *self = calloc(1, sizeof *self);
    if (!self) return err_set(ERR_NOMEM, "store_new");
    self->cfg = *cfg;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = BOOT_DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&self->mu, NULL);
    int rc;
    if (!strcmp(cfg->method, "file")) rc = s_file_new(self);
    else if (!strcmp(cfg->method, "tcp") || !strcmp(cfg->method, "env")) rc = s_tcp_new(self);
    else rc = err_set(ERR_INVAL, "store_new: unknown method '%s'", cfg->method);
    if (rc < 0) {
        err_note(rc, __FILE__, __LINE__, "store_new");
        /* keep the detail: destroy must not overwrite it */
        char d[512];
        snprintf(d, sizeof d, "%s", err_detail());
        if (self->made_rank_file && !self->joined) {
            char p[1200], what[32];
            snprintf(what, sizeof what, "rank.%d", cfg->rank);
            s_fname(self, what, p, sizeof p);
            unlink(p);
        }
        self->joined = 0; /* no leave: the job never formed */
        if (self->srv) atomic_store(&self->srv->abort_now, 1);
        store_destroy(&self);
        err_set(rc, "%s", d);
        return rc;
    }
    LOG_D("store: rank %d of %d joined job %s via %s", cfg->rank, cfg->world, cfg->job, cfg->method);
    *self_p = self;
    return 0;
}

int store_set(store_t *self, const char *key, const void *val, size_t len)
{
    if (!self) return err_set(ERR_INVAL, "store_set: NULL store");
    CHECK(s_check_key(key));
    if (len > STORE_VAL_MAX) return err_set(ERR_RANGE, "store value of %zu bytes is over the %d-byte limit", len, STORE_VAL_MAX);
    if (len && !val) return err_set(ERR_INVAL, "store_set: NULL value");
    int rc, st = 0;
    void *d = NULL;
    size_t dl;
    pthread_mutex_lock(&self->mu);
    if (self->dir[0]) {
        char tmp[1200], p[1200];
        s_fkey(self, key, p, sizeof p);
        rc = s_write_tmp(self, val, len, tmp, sizeof tmp);
        if (rc == 0 && rename(tmp, p) != 0) {
            rc = err_set(ERR_IO, "rename to %s: %s", p, strerror(errno));
            unlink(tmp);
        }
    } else {
        rc = s_call(self, 'S', key, len ? val : "", len, deadline_in(self->cfg.timeout_ms), &st, &d, &dl);
        rc = s_tcp_result(self, rc, st, d, "set", key, self->cfg.timeout_ms);
        if (rc == 0) free(d);
    }
    pthread_mutex_unlock(&self->mu);
    return rc;
}

int store_get(store_t *self, const char *key, void **val, size_t *len, int timeout_ms)
{
    if (!self || !val || !len) return err_set(ERR_INVAL, "store_get: NULL argument");
    CHECK(s_check_key(key));
    if (timeout_ms < 0) timeout_ms = self->cfg.timeout_ms;
    *val = NULL;
    *len = 0;
    int rc, st = 0;
    pthread_mutex_lock(&self->mu);
    if (self->dir[0]) {
        char p[1200];
        s_fkey(self, key, p, sizeof p);
        uint64_t deadline = deadline_in(timeout_ms);
        int nap = 1;
        for (;;) {
            rc = s_read_file(p, val, len);
            if (rc <= 0) break;
            if (deadline_passed(deadline)) {
                rc = err_set(ERR_TIMEOUT, "store get '%s': key not set within %.1f s", key, s_secs(timeout_ms));
                break;
            }
            s_sleep_ms(nap);
            if (nap < 20) nap *= 2;
        }
    } else {
        unsigned char wv[4];
        s_put32(wv, (uint32_t)timeout_ms);
        void *d = NULL;
        size_t dl = 0;
        int wait = timeout_ms > INT_MAX - REPLY_GRACE_MS ? INT_MAX : timeout_ms + REPLY_GRACE_MS;
        rc = s_call(self, 'G', key, wv, 4, deadline_in(wait), &st, &d, &dl);
        rc = s_tcp_result(self, rc, st, d, "get", key, timeout_ms);
        if (rc == 0) { *val = d; *len = dl; }
    }
    pthread_mutex_unlock(&self->mu);
    return rc;
}

int store_add(store_t *self, const char *key, int64_t delta, int64_t *out)
{
    if (!self) return err_set(ERR_INVAL, "store_add: NULL store");
    CHECK(s_check_key(key));
    int64_t v = 0;
    int rc, st = 0;
    pthread_mutex_lock(&self->mu);
    if (self->dir[0]) {
        int fd;
        rc = s_lock(self, deadline_in(self->cfg.timeout_ms), &fd);
        if (rc == 0) {
            char p[1200];
            s_fkey(self, key, p, sizeof p);
            rc = s_file_add_locked(self, p, key, delta, &v);
            s_unlock(fd);
        }
    } else {
        unsigned char dv[8];
        s_put64(dv, (uint64_t)delta);
        void *d = NULL;
        size_t dl = 0;
        rc = s_call(self, 'A', key, dv, 8, deadline_in(self->cfg.timeout_ms), &st, &d, &dl);
        rc = s_tcp_result(self, rc, st, d, "add", key, self->cfg.timeout_ms);
        if (rc == 0) {
            if (dl == 8) v = (int64_t)s_get64(d);
            else rc = err_set(ERR_PROTO, "store add reply has %zu bytes, expected 8", dl);
            free(d);
        }
    }
    pthread_mutex_unlock(&self->mu);
    if (rc == 0 && out) *out = v;
    return rc;
}

int store_del(store_t *self, const char *key)
{
    if (!self) return err_set(ERR_INVAL, "store_del: NULL store");
    CHECK(s_check_key(key));
    int rc, st = 0;
    pthread_mutex_lock(&self->mu);
    if (self->dir[0]) {
        char p[1200];
        s_fkey(self, key, p, sizeof p);
        rc = unlink(p) == 0 || errno == ENOENT ? 0 : err_set(ERR_IO, "cannot remove %s: %s", p, strerror(errno));
    } else {
        void *d = NULL;
        size_t dl;
        rc = s_call(self, 'D', key, "", 0, deadline_in(self->cfg.timeout_ms), &st, &d, &dl);
        rc = s_tcp_result(self, rc, st, d, "delete", key, self->cfg.timeout_ms);
        if (rc == 0) free(d);
    }
    pthread_mutex_unlock(&self->mu);
    return rc;
}

void store_destroy(store_t **self_p)
{
    if (!self_p || !*self_p) return;
    store_t *self = *self_p;
    *self_p = NULL;
    if (self->dir[0]) {
        if (self->joined) s_file_leave(self);
    } else {
        if (self->dealer && self->joined) {
            int st;
            int wait = self->cfg.timeout_ms < 5000 ? self->cfg.timeout_ms : 5000;
            void *d = NULL;
            size_t dl;
            if (s_call(self, 'L', "", "", 0, deadline_in(wait), &st, &d, &dl) == 0) free(d);
        }
        if (self->srv) {
            atomic_store(&self->srv->stop, 1);
            pthread_join(self->srv->thr, NULL);
            s_server_free(self->srv);
            self->srv = NULL;
        }
        if (self->dealer) zmq_close(self->dealer);
        if (self->ctx) zmq_ctx_term(self->ctx);
    }
    pthread_mutex_destroy(&self->mu);
    free(self);
}
