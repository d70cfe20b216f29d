/* store_conn.c: rank 0's store's bounds on its TCP connections (store_conn.h). */
#include "core/store_conn.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include "core/zsec.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

typedef struct {
    int fd, authed;
    char addr[INET6_ADDRSTRLEN];
    uint64_t t_ns;
} conn_t;

struct sconn {
    sconn_cfg_t cfg;
    conn_t *c;
    int n, cap, peak;
    uint64_t accepted, refused, evicted, expired, unreported, reported_ns;
    char last_addr[INET6_ADDRSTRLEN];
};

void sconn_limits(int world, int *per_src, int *total)
{
    if (world < 1) world = 1;
    *per_src = world + SCONN_SLACK_SRC;
    *total = 2 * world + SCONN_SLACK_TOTAL;
}

int sconn_new(sconn_t **out, const sconn_cfg_t *cfg)
{
    *out = NULL;
    if (!cfg || cfg->per_src < 1 || cfg->total < 1 || cfg->unauth_ms < 1) return err_set(ERR_INVAL, "sconn_new: bad bounds");
    sconn_t *c = calloc(1, sizeof *c);
    if (!c) return ERR_NOMEM;
    c->cfg = *cfg;
    c->reported_ns = now_ns();
    *out = c;
    return 0;
}

static void s_report(sconn_t *c, int force)
{
    if (!c->unreported) return;
    uint64_t now = now_ns();
    if (!force && now - c->reported_ns < (uint64_t)ZSEC_REPORT_MS * 1000000ull) return;
    LOG_W("store: closed %llu connection(s) over the bounds (%d a source address, %d in all) or not joining within %d ms "
          "(latest from %s; %llu since the start)", (unsigned long long)c->unreported, c->cfg.per_src, c->cfg.total,
          c->cfg.unauth_ms, c->last_addr[0] ? c->last_addr : "?",
          (unsigned long long)(c->refused + c->evicted + c->expired));
    c->unreported = 0;
    c->reported_ns = now;
}

void sconn_free(sconn_t **cp)
{
    sconn_t *c = cp ? *cp : NULL;
    if (!c) return;
    s_report(c, 1);
    free(c->c);
    free(c);
    *cp = NULL;
}

/* The peer address of fd if it is a TCP socket on our port (0), else -1. */
static int s_peer(const sconn_t *c, int fd, char *addr, size_t len)
{
    struct sockaddr_storage ss, ls;
    socklen_t sl = sizeof ss, ll = sizeof ls;
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 || getsockname(fd, (struct sockaddr *)&ls, &ll) != 0)
        return -1;
    int port = ls.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ls)->sin_port)
             : ls.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ls)->sin6_port) : -1;
    if (port != c->cfg.port) return -1;
    const void *a = ss.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
                  : ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr : NULL;
    if (!a || !inet_ntop(ss.ss_family, a, addr, (socklen_t)len)) return -1;
    return 0;
}

/* Close fd if it is still the connection from addr; count it. */
static int s_close(sconn_t *c, int fd, const char *addr, uint64_t *counter)
{
    char now[INET6_ADDRSTRLEN];
    if (s_peer(c, fd, now, sizeof now) != 0 || strcmp(now, addr) != 0) return 0;
    shutdown(fd, SHUT_RDWR);
    (*counter)++;
    c->unreported++;
    snprintf(c->last_addr, sizeof c->last_addr, "%s", addr);
    return 1;
}

static int s_find(const sconn_t *c, int fd)
{
    for (int i = 0; i < c->n; i++)
        if (c->c[i].fd == fd) return i;
    return -1;
}

static void s_drop(sconn_t *c, int i) { c->c[i] = c->c[--c->n]; }

static int s_count(const sconn_t *c, const char *addr)
{
    int k = 0;
    for (int i = 0; i < c->n; i++) k += strcmp(c->c[i].addr, addr) == 0;
    return k;
}

/* The oldest unauthenticated connection of addr, if older than SCONN_EVICT_MS at now (now UINT64_MAX: any), or -1. */
static int s_victim(const sconn_t *c, const char *addr, uint64_t now)
{
    int v = -1;
    for (int i = 0; i < c->n; i++) {
        const conn_t *k = &c->c[i];
        if (k->authed || strcmp(k->addr, addr) != 0) continue;
        if (now != UINT64_MAX && now - k->t_ns < (uint64_t)SCONN_EVICT_MS * 1000000ull) continue;
        if (v < 0 || k->t_ns < c->c[v].t_ns) v = i;
    }
    return v;
}

static int s_accepted(sconn_t *c, int fd)
{
    char addr[INET6_ADDRSTRLEN];
    if (s_peer(c, fd, addr, sizeof addr) != 0) return 0; /* gone already, or not ours */
    int i = s_find(c, fd);
    if (i >= 0) s_drop(c, i); /* its end was not reported */
    c->accepted++;
    uint64_t now = now_ns();
    int mine = s_count(c, addr), closed = 0;
    if (mine >= c->cfg.per_src || c->n >= c->cfg.total) {
        /* the total is full and this address holds fewer than the busiest: the busiest gives way at once (a
         * rank from an address of its own gets in however fast others churn); else its own oldest, if old */
        const char *from = addr;
        int most = mine;
        if (mine < c->cfg.per_src)
            for (int j = 0; j < c->n; j++) {
                int k = s_count(c, c->c[j].addr);
                if (k > most) { most = k; from = c->c[j].addr; }
            }
        int v = s_victim(c, from, from == addr ? now : UINT64_MAX);
        if (v < 0) return s_close(c, fd, addr, &c->refused);
        closed += s_close(c, c->c[v].fd, c->c[v].addr, &c->evicted);
        s_drop(c, v);
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        conn_t *nc = realloc(c->c, (size_t)cap * sizeof *nc);
        if (!nc) return closed + s_close(c, fd, addr, &c->refused);
        c->c = nc;
        c->cap = cap;
    }
    conn_t *k = &c->c[c->n++];
    k->fd = fd;
    k->authed = 0;
    k->t_ns = now;
    snprintf(k->addr, sizeof k->addr, "%s", addr);
    if (c->n > c->peak) c->peak = c->n;
    return closed;
}

int sconn_event(sconn_t *c, unsigned ev, int32_t value)
{
    if (!c) return 0;
    if (ev == ZMQ_EVENT_ACCEPTED) return s_accepted(c, value);
    if (ev == ZMQ_EVENT_DISCONNECTED || ev == ZMQ_EVENT_CLOSED) {
        int i = s_find(c, value);
        if (i >= 0) s_drop(c, i);
    }
    return 0;
}

void sconn_authed(sconn_t *c, int fd)
{
    int i = c && fd >= 0 ? s_find(c, fd) : -1;
    if (i >= 0) c->c[i].authed = 1;
}

int sconn_tick(sconn_t *c)
{
    if (!c) return 0;
    uint64_t now = now_ns(), lim = (uint64_t)c->cfg.unauth_ms * 1000000ull;
    int closed = 0;
    for (int i = 0; i < c->n;) {
        conn_t *k = &c->c[i];
        if (!k->authed && now - k->t_ns > lim) {
            closed += s_close(c, k->fd, k->addr, &c->expired);
            s_drop(c, i);
        } else i++;
    }
    s_report(c, 0);
    return closed;
}

void sconn_stats(const sconn_t *c, sconn_stats_t *st)
{
    memset(st, 0, sizeof *st);
    if (!c) return;
    st->open = c->n;
    st->peak = c->peak;
    st->accepted = c->accepted;
    st->refused = c->refused;
    st->evicted = c->evicted;
    st->expired = c->expired;
}
