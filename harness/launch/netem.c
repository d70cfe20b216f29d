/* netem.c: the emulated network of --net (see netem.h): namespaces, a bridge in its own namespace,
 * veth pairs, addresses, tc tbf on both ends of every veth, lat='s iptables NFQUEUE rule and its delay helper
 * (netdelay.c), and their removal. Commands run as
 * `ip` / `tc` child processes (argv, no shell); their stderr becomes the error message. */
#include "harness/launch/netem.h"
#include "harness/launch/netdelay.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


struct h_netem {
    h_netem_spec_t spec;
    int nranks, nns;
    char prefix[48];          /* "sb-<pid>-<seq>" */
    char brns[64];            /* "<prefix>-br" */
    char (*ns)[64];           /* per namespace */
    char (*addr)[20];         /* per namespace */
    int *fd;                  /* per namespace: /var/run/netns/<ns>, O_CLOEXEC */
    int *group;               /* per rank: its namespace */
    int *map;                 /* h_netem_map's placement (per rank), or NULL: contiguous groups */
    int created_br, ncreated; /* what exists (for the clean-up) */
    char cc[16];              /* the TCP congestion control the namespaces run */
    pid_t delay_pid;          /* lat=: the delay helper, or -1 */
};


/* Run a command given as one printf-formatted line of space-separated words; its stderr (first
 * line) goes into err on failure. Returns 0 or -1. */
static int s_cmd(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int s_cmd(char *err, size_t errlen, const char *fmt, ...)
{
    char line[512], *argv[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char copy[512];
    snprintf(copy, sizeof copy, "%s", line);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t && n < 31; t = strtok_r(NULL, " ", &save)) argv[n++] = t;
    argv[n] = NULL;
    int p[2];
    if (n == 0 || pipe2(p, O_CLOEXEC) < 0) { snprintf(err, errlen, "%.200s: %s", line, strerror(errno)); return -1; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "%.200s: fork: %s", line, strerror(errno));
        close(p[0]); close(p[1]);
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(p[1], 2) < 0) _exit(127);
        execvp(argv[0], argv);
        dprintf(2, "cannot run %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    char out[512];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(p[0], out + got, sizeof out - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got == sizeof out - 1) {
            char sink[256];   /* drain the rest so the child never blocks */
            while (read(p[0], sink, sizeof sink) > 0) {}
            break;
        }
    }
    close(p[0]);
    out[got] = '\0';
    out[strcspn(out, "\n")] = '\0';
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) break;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    snprintf(err, errlen, "`%.200s` failed: %.150s", line, out[0] ? out : "(no message)");
    return -1;
}

/* Remove namespaces "sb-<pid>-..." whose harness process is gone (a SIGKILLed driver's leftovers). */
static void s_reap_stale(void)
{
    DIR *d = opendir(H_NETNS_DIR);
    if (!d) return;
    struct dirent *e;
    char err[256];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "sb-", 3)) continue;
        char *end;
        long pid = strtol(e->d_name + 3, &end, 10);
        if (end == e->d_name + 3 || *end != '-' || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        (void)s_cmd(err, sizeof err, "ip netns delete %s", e->d_name);
    }
    closedir(d);
}

int h_netem_have(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *t = strtok_r(buf, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", t, prog);
        if (access(p, X_OK) == 0) return 1;
    }
    return 0;
}

void h_netem_destroy(h_netem_t **self_p)
{
    h_netem_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    char err[512];
    h_netdelay_stop(self->delay_pid);
    for (int i = 0; i < self->nns; i++)
        if (self->fd && self->fd[i] >= 0) close(self->fd[i]);
    /* deleting a namespace deletes its end of the veth, which deletes the peer, and the qdiscs */
    for (int i = 0; i < self->ncreated; i++)
        if (s_cmd(err, sizeof err, "ip netns delete %s", self->ns[i]) < 0) fprintf(stderr, "harness: --net clean-up: %s\n", err);
    if (self->created_br && s_cmd(err, sizeof err, "ip netns delete %s", self->brns) < 0)
        fprintf(stderr, "harness: --net clean-up: %s\n", err);
    free(self->ns);
    free(self->addr);
    free(self->fd);
    free(self->group);
    free(self->map);
    free(self);
    *self_p = NULL;
}


const char *h_netem_cc(const h_netem_t *self) { return self ? self->cc : NULL; }

/* Set (set != NULL) or read into got TCP's congestion control inside the namespace of fd: the calling
 * thread enters it for the one /proc access (sysctls under /proc/sys/net are the caller's namespace's)
 * and returns to its own. 0, or -1 with the reason in err. */
static int s_ns_cc(int fd, const char *set, char *got, size_t gotlen, char *err, size_t errlen)
{
    const char *path = "/proc/sys/net/ipv4/tcp_congestion_control";
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) {
        snprintf(err, errlen, "open /proc/thread-self/ns/net: %s", strerror(errno));
        return -1;
    }
    if (setns(fd, CLONE_NEWNET) < 0) {
        snprintf(err, errlen, "setns into an emulated machine: %s", strerror(errno));
        close(home);
        return -1;
    }
    int rc = -1, f = open(path, (set ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (f >= 0 && set) {
        rc = write(f, set, strlen(set)) == (ssize_t)strlen(set) ? 0 : -1;
    } else if (f >= 0) {
        ssize_t n = read(f, got, gotlen - 1);
        if (n > 0) {
            got[n] = '\0';
            got[strcspn(got, "\n")] = '\0';
            rc = 0;
        }
    }
    if (rc < 0 && set && errno == ENOENT) snprintf(err, errlen, "this kernel has no TCP congestion control '%s'", set);
    else if (rc < 0) snprintf(err, errlen, "%s %s: %s", set ? "write" : "read", path, strerror(errno));
    if (f >= 0) close(f);
    if (setns(home, CLONE_NEWNET) < 0) {
        /* every later socket of this thread would be in the emulated machine: nothing sane is left to do */
        fprintf(stderr, "harness: --net: cannot return to this process's network namespace: %s\n", strerror(errno));
        abort();
    }
    close(home);
    return rc;
}

/* What this kernel offers (tcp_available_congestion_control), for an error message. */
static void s_cc_available(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r");
    if (!f) return;
    if (!fgets(buf, (int)len, f)) snprintf(buf, len, "unknown");
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

int h_netem_new(h_netem_t **self_p, const h_netem_spec_t *spec, int nranks, char *err, size_t errlen)
{
    *self_p = NULL;
    if (geteuid() != 0) {
        snprintf(err, errlen, "--net needs root (it creates network namespaces, veth pairs and tc qdiscs); run the "
                 "harness as root, or leave --net out");
        return -1;
    }
    if (!h_netem_have("ip") || !h_netem_have("tc")) {
        snprintf(err, errlen, "--net needs the ip and tc programs (Debian: apt-get install iproute2)");
        return -1;
    }
    if (spec->lat_us > 0 && !h_netem_have("iptables")) {
        snprintf(err, errlen, "--net lat= needs the iptables program (this kernel has neither sch_netem nor nftables' "
                 "queue: the delay is an iptables NFQUEUE rule; Debian: apt-get install iptables)");
        return -1;
    }
    if (nranks < 1 || nranks > 60000) {
        snprintf(err, errlen, "--net: %d ranks is outside 1..60000", nranks);
        return -1;
    }
    s_reap_stale();
    h_netem_t *self = calloc(1, sizeof *self);
    if (!self) { snprintf(err, errlen, "out of memory"); return -1; }
    self->spec = *spec;
    self->nranks = nranks;
    self->nns = spec->per_node ? (spec->nodes < nranks ? spec->nodes : nranks) : nranks;
    static int seq;
    snprintf(self->prefix, sizeof self->prefix, "sb-%d-%d", (int)getpid(), ++seq);
    snprintf(self->brns, sizeof self->brns, "%s-br", self->prefix);
    self->ns = calloc((size_t)self->nns, sizeof *self->ns);
    self->addr = calloc((size_t)self->nns, sizeof *self->addr);
    self->fd = malloc((size_t)self->nns * sizeof *self->fd);
    self->group = calloc((size_t)nranks, sizeof *self->group);
    if (!self->ns || !self->addr || !self->fd || !self->group) {
        snprintf(err, errlen, "out of memory");
        h_netem_destroy(&self);
        return -1;
    }
    for (int i = 0; i < self->nns; i++) self->fd[i] = -1;
    self->delay_pid = -1;
    snprintf(self->cc, sizeof self->cc, "%s", h_netem_spec_cc(spec));
    for (int r = 0; r < nranks; r++)
        self->group[r] = (int)((long long)r * self->nns / nranks);
    double burst = h_netem_burst(spec);
    char e[400];
    if (s_cmd(e, sizeof e, "ip netns add %s", self->brns) < 0) goto fail;
    self->created_br = 1;
    if (s_cmd(e, sizeof e, "ip -n %s link add br0 type bridge", self->brns) < 0 ||
        s_cmd(e, sizeof e, "ip -n %s link set br0 up", self->brns) < 0)
        goto fail;
    for (int i = 0; i < self->nns; i++) {
        snprintf(self->ns[i], sizeof self->ns[i], "%s-%d", self->prefix, i);
        snprintf(self->addr[i], sizeof self->addr[i], "10.231.%d.%d", i / 254, i % 254 + 1);
        if (s_cmd(e, sizeof e, "ip netns add %s", self->ns[i]) < 0) goto fail;
        self->ncreated = i + 1;
        if (s_cmd(e, sizeof e, "ip -n %s link add v%d type veth peer name eth0 netns %s", self->brns, i, self->ns[i]) < 0 ||
            s_cmd(e, sizeof e, "ip -n %s link set v%d master br0", self->brns, i) < 0 ||
            s_cmd(e, sizeof e, "ip -n %s link set v%d up", self->brns, i) < 0 ||
            s_cmd(e, sizeof e, "ip -n %s addr add %s/16 dev eth0", self->ns[i], self->addr[i]) < 0 ||
            s_cmd(e, sizeof e, "ip -n %s link set eth0 up", self->ns[i]) < 0 ||
            s_cmd(e, sizeof e, "ip -n %s link set lo up", self->ns[i]) < 0 ||
            (spec->gso_off && (s_cmd(e, sizeof e, "ip -n %s link set dev eth0 gso_max_segs 1", self->ns[i]) < 0 ||
                               s_cmd(e, sizeof e, "ip -n %s link set dev v%d gso_max_segs 1", self->brns, i) < 0)) ||
            s_cmd(e, sizeof e, "tc -n %s qdisc add dev eth0 root tbf rate %s burst %.0f latency %.6gms", self->ns[i], spec->rate, burst, spec->queue_ms) < 0 ||
            s_cmd(e, sizeof e, "tc -n %s qdisc add dev v%d root tbf rate %s burst %.0f latency %.6gms", self->brns, i, spec->rate, burst, spec->queue_ms) < 0)
            goto fail;
        char p[256];
        snprintf(p, sizeof p, H_NETNS_DIR "/%s", self->ns[i]);
        self->fd[i] = open(p, O_RDONLY | O_CLOEXEC);
        if (self->fd[i] < 0) {
            snprintf(e, sizeof e, "open %s: %s", p, strerror(errno));
            goto fail;
        }
        char why[300];
        if (s_ns_cc(self->fd[i], self->cc, NULL, 0, why, sizeof why) < 0) {
            char avail[128], host[16] = "unknown";
            s_cc_available(avail, sizeof avail);
            if (spec->cc[0]) {
                snprintf(e, sizeof e, "cc=%s: %.150s (it offers: %.100s; another may load with modprobe tcp_NAME)", self->cc, why, avail);
                goto fail;
            }
            /* the default is missing (no tcp_bbr module): run with what the namespace inherited, and say so */
            (void)s_ns_cc(self->fd[i], NULL, host, sizeof host, e, sizeof e);
            fprintf(stderr, "harness: --net: TCP congestion control %s (the default, which results/ was recorded with) "
                    "is not available here (%s; this kernel offers: %s): the emulated machines run %s, so "
                    "parameter-server figures are not comparable with results/; pass cc=NAME to choose\n",
                    self->cc, why, avail, host);
            snprintf(self->cc, sizeof self->cc, "%s", host);
        }
    }
    if (spec->lat_us > 0) {
        /* the helper binds every queue before a rule sends packets to it (a queue without a listener drops) */
        if (h_netdelay_start(&self->delay_pid, self->nns, self->fd, H_NETEM_LAT_HOPS * spec->lat_us, e, sizeof e) < 0) goto fail;
        for (int i = 0; i < self->nns; i++)
            if (s_cmd(e, sizeof e, "ip netns exec %s iptables -w -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0", self->ns[i]) < 0)
                goto fail;
    }
    *self_p = self;
    return 0;
fail:
    snprintf(err, errlen, "--net: %s", e);
    h_netem_destroy(&self);
    return -1;
}


const char *h_netem_addr(const h_netem_t *self, int rank)
{
    return self && rank >= 0 && rank < self->nranks ? self->addr[self->group[rank]] : NULL;
}

const char *h_netem_ns(const h_netem_t *self, int rank)
{
    return self && rank >= 0 && rank < self->nranks ? self->ns[self->group[rank]] : NULL;
}

int h_netem_enter(void *arg, int local_rank)
{
    const h_netem_t *self = arg;
    if (!self || local_rank < 0 || local_rank >= self->nranks) return -1;
    return setns(self->fd[self->group[local_rank]], CLONE_NEWNET) == 0 ? 0 : -1;
}

int h_netem_map(h_netem_t *self, const int *ns_of_rank, int nranks)
{
    if (!self || nranks < 1 || nranks > self->nranks) return -1;
    for (int r = 0; r < nranks; r++)
        if (ns_of_rank[r] < 0 || ns_of_rank[r] >= self->nns) return -1;
    int *m = calloc((size_t)self->nranks, sizeof *m);
    if (!m) return -1;
    memcpy(m, ns_of_rank, (size_t)nranks * sizeof *m);
    free(self->map);
    self->map = m;
    return 0;
}

int h_netem_namespaces(const h_netem_t *self) { return self ? self->nns : 0; }

void h_netem_launch_cfg(h_netem_t *self, h_launch_cfg_t *lc, int nlocal, char *master_buf, size_t len)
{
    if (nlocal > self->nranks) nlocal = self->nranks;
    int nns = self->nns < nlocal ? self->nns : nlocal;
    for (int r = 0; r < nlocal; r++) self->group[r] = self->map ? self->map[r] : (int)((long long)r * nns / nlocal);
    snprintf(master_buf, len, "%s:29500", self->addr[self->group[0]]);
    lc->master = master_buf;
    lc->child_setup = h_netem_enter;
    lc->child_arg = self;
}

char **h_netem_argv(int argc, char **argv, int *ac)
{
    char **av = calloc((size_t)argc + 3, sizeof *av);
    if (!av) return NULL;
    for (int i = 0; i < argc; i++) av[i] = argv[i];
    av[argc] = "--transport";
    av[argc + 1] = "tcp";
    *ac = argc + 2;
    return av;
}

const char *h_netem_bridge_ns(const h_netem_t *self) { return self->brns; }
