/* boot_cfg.c: the rendezvous configuration: the init method (tcp://, env://, file://), rank / world /
 * local rank from the launcher's environment (torchrun, OpenMPI, Slurm), the job id, and the address
 * and interface (SYNCBENCH_SOCKET_IFNAME) this rank listens on. No network traffic, no store. */
#include "core/boot.h"
#include "core/hash.h"
#include "core/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* The init method: tcp://HOST:PORT, env:// (MASTER_ADDR / MASTER_PORT) or file:///path. */
static int s_parse_method(boot_cfg_t *cfg, const char *m)
{
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
    return 0;
}

/* rank and world: args > torchrun vars > OpenMPI > Slurm (mpirun inside an sbatch script inherits the
 * batch step's SLURM_PROCID=0, so OpenMPI's own variables must win over Slurm's). *wname_out: the name
 * the world size came from, for later details. */
static int s_rank_world(boot_cfg_t *cfg, int rank, int world, const char **wname_out)
{
    long er = -1, ew = -1;
    const char *src = NULL, *rname = "", *wname = "";
    int hr = 0, hw = 0;
    if (getenv("RANK") || getenv("WORLD_SIZE")) {
        src = "torchrun"; rname = "RANK"; wname = "WORLD_SIZE";
    } else if (getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE")) {
        src = "openmpi"; rname = "OMPI_COMM_WORLD_RANK"; wname = "OMPI_COMM_WORLD_SIZE";
    } else if (getenv("SLURM_PROCID") || getenv("SLURM_NTASKS")) {
        src = "slurm"; rname = "SLURM_PROCID"; wname = "SLURM_NTASKS";
    }
    if (src) {
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
    *wname_out = wname;
    return 0;
}

/* local rank / local world: same precedence, independent of where rank/world came from */
static int s_local(boot_cfg_t *cfg, const char *wname)
{
    long elr = -1, elw = 0, ew = cfg->world;
    const char *lrn = NULL, *lwn = NULL;
    int hlr = 0, hlw = 0;
    if (getenv("LOCAL_RANK") || getenv("LOCAL_WORLD_SIZE")) {
        lrn = "LOCAL_RANK"; lwn = "LOCAL_WORLD_SIZE";
    } else if (getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
        lrn = "OMPI_COMM_WORLD_LOCAL_RANK"; lwn = "OMPI_COMM_WORLD_LOCAL_SIZE";
    } else if (getenv("SLURM_LOCALID")) {
        lrn = "SLURM_LOCALID"; lwn = "SLURM_NTASKS_PER_NODE";
    }
    if (lrn) {
        CHECK(s_env_long(lrn, &elr, &hlr));
        CHECK(s_env_long(lwn, &elw, &hlw));
    }
    const char *tpn = getenv("SLURM_TASKS_PER_NODE");
    if (lrn && !strcmp(lrn, "SLURM_LOCALID") && !hlw && tpn) {
        long node = -1;
        int hn = 0;
        CHECK(s_env_long("SLURM_NODEID", &node, &hn));
        lwn = "SLURM_TASKS_PER_NODE";
        elw = s_slurm_tasks_per_node(tpn, hn ? node : -1);
        hlw = elw > 0;
        if (!hlw && !hn && tpn[0] && s_slurm_tasks_per_node(tpn, 0) == 0)
            return err_set(ERR_INVAL, "SLURM_TASKS_PER_NODE=%s is not a Slurm task list like '4' or '2(x3),1'", tpn);
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
    return 0;
}

/* job id: SYNCBENCH_JOB, else "<method>-<FNV-1a of method and host:port or path>" */
static int s_job(boot_cfg_t *cfg)
{
    const char *job = getenv("SYNCBENCH_JOB");
    if (job) {
        if (strlen(job) >= sizeof cfg->job)
            return err_set(ERR_RANGE, "SYNCBENCH_JOB is longer than %zu characters", sizeof cfg->job - 1);
        if (!s_job_ok(job))
            return err_set(ERR_INVAL, "SYNCBENCH_JOB='%s' may only contain letters, digits, '.', '_' and '-' "
                           "(it is part of file names)", job);
        strcpy(cfg->job, job);
        return 0;
    }
    uint64_t h = hash_fnv1a64(cfg->method, strlen(cfg->method), HASH_FNV1A64_INIT);
    if (!strcmp(cfg->method, "file")) h = hash_fnv1a64(cfg->path, strlen(cfg->path), h);
    else {
        char hp[300];
        snprintf(hp, sizeof hp, "%s:%d", cfg->host, cfg->port);
        h = hash_fnv1a64(hp, strlen(hp), h);
    }
    snprintf(cfg->job, sizeof cfg->job, "%s-%016llx", cfg->method, (unsigned long long)h);
    return 0;
}

int boot_cfg_init(boot_cfg_t *cfg, const char *init_method, int rank, int world, int timeout_ms)
{
    if (!cfg) return err_set(ERR_INVAL, "boot_cfg_init: cfg is NULL");
    memset(cfg, 0, sizeof *cfg);
    cfg->timeout_ms = timeout_ms > 0 ? timeout_ms : BOOT_DEFAULT_TIMEOUT_MS;
    const char *wname = "";
    CHECK(s_parse_method(cfg, init_method && *init_method ? init_method : "env://"));
    CHECK(s_rank_world(cfg, rank, world, &wname));
    CHECK(s_local(cfg, wname));
    CHECK(s_job(cfg));
    CHECK(auth_secret_load(&cfg->auth, 0));
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

int boot_resolve_ipv4(const char *host, char *ip, size_t len, int *is_local)
{
    if (!host || !ip || len < INET_ADDRSTRLEN) return err_set(ERR_INVAL, "boot_resolve_ipv4: bad arguments");
    struct in_addr a;
    CHECK(s_resolve4(host, &a));
    inet_ntop(AF_INET, &a, ip, (socklen_t)len);
    if (is_local) *is_local = s_is_local(a);
    return 0;
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
