/* launch_cfg.c: the launcher's configuration: whether we run inside a launched rank, the checks of a
 * launch's configuration, the rendezvous address, the job id, and each rank's environment. */
#include "harness/launch/launch.h"
#include "core/auth.h"
#include "core/err.h"
#include "core/hash.h"
#include "core/port.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define S_MAX_LOCAL  4096

int h_is_launched(void)
{
    const char *e = getenv("SYNCBENCH_LAUNCHED");
    return e && !strcmp(e, "1");
}

void h_say_error(const char *msg)
{
    const char *e = getenv("SYNCBENCH_RELAY_ERRORS");
    if (!e || strcmp(e, "1")) {
        fprintf(stderr, "harness: %s\n", msg);
        return;
    }
    char buf[4096];
    size_t off = 0;
    for (const char *p = msg; *p && off < sizeof buf - 1;) { /* one write: lines of two ranks never interleave */
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        off += (size_t)snprintf(buf + off, sizeof buf - off, H_ERROR_TAG "%.*s\n", (int)n, p);
        if (off >= sizeof buf) off = sizeof buf - 1;
        p += n + (nl != NULL);
    }
    if (off > 0) fputs(buf, stderr);
    fflush(stderr);
}

/* ---- configuration ---------------------------------------------------------------------------- */

/* "HOST:PORT" or "[V6]:PORT" -> host (brackets removed), port. Returns 0 or -1. */
static int s_parse_master(const char *m, char *host, size_t hlen, int *port)
{
    const char *colon, *hs = m, *he;
    if (m[0] == '[') {
        const char *rb = strchr(m, ']');
        if (!rb || rb[1] != ':') return -1;
        hs = m + 1;
        he = rb;
        colon = rb + 1;
    } else {
        colon = strrchr(m, ':');
        if (!colon) return -1;
        he = colon;
    }
    size_t n = (size_t)(he - hs);
    if (n == 0 || n >= hlen) return -1;
    memcpy(host, hs, n);
    host[n] = '\0';
    const char *p = colon + 1;
    if (!*p) return -1;
    long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > 65535) return -1;
    }
    if (v < 1) return -1;
    *port = (int)v;
    return 0;
}

static void s_make_job(char *job, size_t len)
{
    unsigned long long rnd = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &rnd, sizeof rnd) != (ssize_t)sizeof rnd) rnd = 0;
        close(fd);
    }
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    rnd ^= (unsigned long long)t.tv_nsec * 0x9e3779b97f4a7c15ULL;
    snprintf(job, len, "sb-%ld-%d-%08llx", (long)t.tv_sec, (int)getpid(), rnd & 0xffffffffULL);
}

static int s_is_ours(const char *kv)
{
    static const char *names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                  "MASTER_ADDR", "MASTER_PORT", "SYNCBENCH_JOB", "SYNCBENCH_LAUNCHED",
                                  "SYNCBENCH_RELAY_ERRORS", "SYNCBENCH_TIMEOUT", "SYNCBENCH_GPUS", "SYNCBENCH_JOB_SECRET",
                                  "SYNCBENCH_JOB_SECRET_FILE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t l = strlen(names[i]);
        if (!strncmp(kv, names[i], l) && kv[l] == '=') return 1;
    }
    return 0;
}

static char *s_kv(const char *k, const char *v)
{
    size_t n = strlen(k) + strlen(v) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s=%s", k, v);
    return s;
}

static char *s_kvi(const char *k, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    return s_kv(k, b);
}

/* envp = inherited environment (pointers, not copies) minus our names, plus ours (malloc'd). */
char **h_launch_env(const h_launch_cfg_t *cfg, int rank, int world, int local, int node,
                          const char *host, int port, const char *job, const char *secret)
{
    size_t ninh = 0;
    for (char **e = environ; *e; e++) ninh++;
    char **envp = calloc(ninh + 16, sizeof *envp);
    if (!envp) return NULL;
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (!s_is_ours(*e)) envp[k++] = *e;
    char *own[16] = {0};
    int no = 0;
    own[no++] = s_kvi("RANK", rank);
    own[no++] = s_kvi("WORLD_SIZE", world);
    own[no++] = s_kvi("LOCAL_RANK", local);
    own[no++] = s_kvi("LOCAL_WORLD_SIZE", cfg->nlocal);
    own[no++] = s_kvi("GROUP_RANK", node);
    own[no++] = s_kv("MASTER_ADDR", host);
    own[no++] = s_kvi("MASTER_PORT", port);
    own[no++] = s_kv("SYNCBENCH_JOB", job);
    own[no++] = s_kv("SYNCBENCH_LAUNCHED", "1");
    own[no++] = s_kv("SYNCBENCH_RELAY_ERRORS", "1");
    if (cfg->timeout_s > 0) own[no++] = s_kvi("SYNCBENCH_TIMEOUT", cfg->timeout_s);
    if (cfg->gpus > 0) own[no++] = s_kvi("SYNCBENCH_GPUS", cfg->gpus);
    if (secret && *secret) own[no++] = s_kv("SYNCBENCH_JOB_SECRET", secret);
    int bad = 0;
    for (int i = 0; i < no; i++) {
        if (!own[i]) bad = 1;
        envp[k++] = own[i];
    }
    envp[k] = NULL;
    if (bad) {
        for (int i = 0; i < no; i++) free(own[i]);
        free(envp);
        return NULL;
    }
    return envp;
}

/* Free the strings we own in envp: the entries that s_is_ours() (inherited ones never are). */
void h_launch_env_free(char ***envp_p)
{
    char **envp = *envp_p;
    if (!envp) return;
    for (char **e = envp; *e; e++)
        if (s_is_ours(*e)) free(*e);
    free(envp);
    *envp_p = NULL;
}

/* The node's place in the world and the rendezvous address: 0 or ERR_INVAL / ERR_SYS (err_set). */
int h_launch_check_cfg(const h_launch_cfg_t *cfg, int argc, char **argv, int *world, char *host, size_t hlen,
                        int *port)
{
    int nnodes = cfg->nnodes > 0 ? cfg->nnodes : 1;
    if (cfg->nlocal < 1 || cfg->nlocal > S_MAX_LOCAL)
        return err_set(ERR_INVAL, "launcher: ranks per node must be 1..%d (got %d)", S_MAX_LOCAL, cfg->nlocal);
    if (cfg->node_rank < 0 || cfg->node_rank >= nnodes || nnodes > 65536)
        return err_set(ERR_INVAL, "launcher: --node-rank %d is outside 0..%d", cfg->node_rank, nnodes - 1);
    if (nnodes > 1 && !cfg->master) return err_set(ERR_INVAL, "launcher: --nnodes %d needs --master HOST:PORT", nnodes);
    long long world_ll = (long long)nnodes * cfg->nlocal;
    if (world_ll > 1000000) return err_set(ERR_INVAL, "launcher: world of %lld ranks is too large", world_ll);
    *world = (int)world_ll;
    if (argc < 1 || !argv || !argv[0]) return err_set(ERR_INVAL, "launcher: empty command line");
    if (cfg->master) {
        if (s_parse_master(cfg->master, host, hlen, port) < 0)
            return err_set(ERR_INVAL, "launcher: --master '%s' is not HOST:PORT (port 1..65535)", cfg->master);
    } else {
        snprintf(host, hlen, "127.0.0.1");
        *port = port_free_loopback();
        if (*port < 0) return err_set(ERR_SYS, "launcher: no free port on 127.0.0.1: %s", strerror(errno));
    }
    return 0;
}

int h_launch_secret(const h_launch_cfg_t *cfg, char *hex, size_t len)
{
    auth_t a;
    memset(&a, 0, sizeof a);
    hex[0] = '\0';
    if (cfg->nnodes > 1) {
        CHECK(auth_secret_load(&a, cfg->require_auth));
        if (!a.set) {
            if (cfg->require_auth)
                return err_set(ERR_AUTH, "launcher: --nnodes %d with --require-auth needs the same job secret on every "
                               "node: set SYNCBENCH_JOB_SECRET (e.g. from `openssl rand -hex 32`) or "
                               "SYNCBENCH_JOB_SECRET_FILE (a file of mode 0600) for each node's launcher", cfg->nnodes);
            return 0;
        }
    } else {
        CHECK(auth_secret_generate(&a));
    }
    int rc = auth_hex(&a, hex, len);
    auth_wipe(&a);
    return rc;
}

/* The job id must be the same on every node (the rendezvous rejects a rank of another job) and
 * differ between the launches one process makes (the driver runs one per world size and engine). */
int h_launch_job_id(const h_launch_cfg_t *cfg, char *job, size_t len)
{
    static int launches;
    int seq = ++launches;
    const char *ej = getenv("SYNCBENCH_JOB");
    int jl;
    if (ej && *ej) {
        jl = seq == 1 ? snprintf(job, len, "%s", ej) : snprintf(job, len, "%s-%d", ej, seq);
    } else if (cfg->nnodes > 1) {
        jl = snprintf(job, len, "mn-%016llx-%d", (unsigned long long)hash_str(cfg->master), seq);
    } else {
        s_make_job(job, len);
        jl = (int)strlen(job);
    }
    if (jl < 0 || jl >= (int)len) return err_set(ERR_INVAL, "launcher: SYNCBENCH_JOB is longer than %zu characters", len - 8);
    return 0;
}

