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
#include <sys/stat.h>
#include <zmq.h>

/* A connection is its descriptor and its socket's inode: the monitor reports a descriptor, and by the time
 * an event is read ZeroMQ may have closed that one and accept(2) handed the number to a newer connection,
 * from the same address when peers share a host; the inode tells the two apart (see s_close). */
typedef struct {
    int fd, authed, port;        /* port: the peer's */
    uint64_t ino;
    char addr[INET6_ADDRSTRLEN];
    uint64_t t_ns;
} conn_t;

typedef struct { int fd; uint64_t ino; } sock_t;

#define SCONN_PRUNE_MS 1000      /* how often the sockets joined ranks spoke from are checked for still being open */

struct sconn {
    sconn_cfg_t cfg;
    conn_t *c;
    int n, cap, peak;
    sock_t *ok;                  /* the sockets joined ranks spoke from (sconn_authed), whether or not accepted yet */
    int nok, capok;
    uint64_t accepted, refused, evicted, expired, stale, unreported, reported_ns, pruned_ns;
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
    char st[96] = "";
    if (c->stale)
        snprintf(st, sizeof st, "; %llu left alone, their descriptor holding a newer connection", (unsigned long long)c->stale);
    LOG_W("store: closed %llu connection(s) over the bounds (%d a source address, %d in all) or not joining within %d ms "
          "(latest from %s; %llu since the start%s)", (unsigned long long)c->unreported, c->cfg.per_src, c->cfg.total,
          c->cfg.unauth_ms, c->last_addr[0] ? c->last_addr : "?",
          (unsigned long long)(c->refused + c->evicted + c->expired), st);
    c->unreported = 0;
    c->reported_ns = now;
}

void sconn_free(sconn_t **cp)
{
    sconn_t *c = cp ? *cp : NULL;
    if (!c) return;
    s_report(c, 1);
    free(c->c);
    free(c->ok);
    free(c);
    *cp = NULL;
}

/* The peer address (and, port non-NULL, its port) of fd if it is a TCP socket on our port (0), else -1. */
static int s_peer(const sconn_t *c, int fd, char *addr, size_t len, int *peer_port)
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
    if (peer_port)
        *peer_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

/* The inode of the socket on fd (0), or -1 when fd is not an open socket. */
static int s_ino(int fd, uint64_t *ino)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return -1;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

/* Close fd if it still holds the socket ino (connected from addr to our port); count it. Otherwise that
 * connection has ended and its descriptor may hold a newer one, a joining rank's even: left alone, counted stale,
 * and -1 (the record is to be dropped). Without the inode, an unjoined connection's deadline (5 s, ZeroMQ's CURVE
 * handshake deadline too) or an eviction could shut down a rank's connection accepted on a reused descriptor. */
static int s_close(sconn_t *c, int fd, uint64_t ino, const char *addr, uint64_t *counter)
{
    char now[INET6_ADDRSTRLEN];
    uint64_t cur;
    if (s_ino(fd, &cur) != 0 || cur != ino || s_peer(c, fd, now, sizeof now, NULL) != 0 || strcmp(now, addr) != 0) {
        c->stale++;
        return -1;
    }
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

static int s_is_ok(const sconn_t *c, int fd, uint64_t ino)
{
    for (int i = 0; i < c->nok; i++)
        if (c->ok[i].fd == fd && c->ok[i].ino == ino) return 1;
    return 0;
}

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
    uint64_t ino;
    int pport = 0;
    if (s_peer(c, fd, addr, sizeof addr, &pport) != 0 || s_ino(fd, &ino) != 0) return 0; /* gone already, or not ours */
    int i = s_find(c, fd);
    if (i >= 0) s_drop(c, i); /* its end was not reported */
    c->accepted++;
    uint64_t now = now_ns();
    int closed = 0;
    for (;;) {
        int mine = s_count(c, addr);
        if (mine < c->cfg.per_src && c->n < c->cfg.total) break;
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
        if (v < 0) return closed + (s_close(c, fd, ino, addr, &c->refused) > 0);
        int r = s_close(c, c->c[v].fd, c->c[v].ino, c->c[v].addr, &c->evicted);
        closed += r > 0;
        s_drop(c, v); /* closed, or ended already (stale): either way a place is free; check the bounds again */
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        conn_t *nc = realloc(c->c, (size_t)cap * sizeof *nc);
        if (!nc) return closed + (s_close(c, fd, ino, addr, &c->refused) > 0);
        c->c = nc;
        c->cap = cap;
    }
    conn_t *k = &c->c[c->n++];
    k->fd = fd;
    k->ino = ino;
    k->port = pport;
    k->authed = s_is_ok(c, fd, ino); /* a joined rank spoke from it before this event was read */
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

int sconn_peer(const sconn_t *c, int fd, char *buf, size_t len)
{
    int i = c ? s_find(c, fd) : -1;
    if (i < 0 || !len) return -1;
    const conn_t *k = &c->c[i];
    snprintf(buf, len, strchr(k->addr, ':') ? "[%s]:%d" : "%s:%d", k->addr, k->port);
    return 0;
}

void sconn_authed(sconn_t *c, int fd)
{
    uint64_t ino;
    if (!c || s_ino(fd, &ino) != 0) return;
    /* remembered by socket, not by record: under a flood the monitor's accept event can be read after the rank's
     * first request, and the record it then makes must still know the rank spoke */
    int j = 0;
    while (j < c->nok && c->ok[j].fd != fd) j++;
    if (j == c->nok) {
        if (c->nok == c->capok) {
            int cap = c->capok ? 2 * c->capok : 16;
            sock_t *no = realloc(c->ok, (size_t)cap * sizeof *no);
            if (!no) return; /* this connection stays subject to the deadline; its next request tries again */
            c->ok = no;
            c->capok = cap;
        }
        c->nok++;
    }
    c->ok[j] = (sock_t){.fd = fd, .ino = ino}; /* a descriptor's earlier socket is gone */
    int i = s_find(c, fd);
    if (i >= 0 && c->c[i].ino == ino) c->c[i].authed = 1;
}

int sconn_tick(sconn_t *c)
{
    if (!c) return 0;
    uint64_t now = now_ns(), lim = (uint64_t)c->cfg.unauth_ms * 1000000ull;
    int closed = 0;
    for (int i = 0; i < c->n;) {
        conn_t *k = &c->c[i];
        if (!k->authed && now - k->t_ns > lim) {
            closed += s_close(c, k->fd, k->ino, k->addr, &c->expired) > 0;
            s_drop(c, i);
        } else i++;
    }
    if (now - c->pruned_ns >= (uint64_t)SCONN_PRUNE_MS * 1000000ull) { /* forget joined ranks' sockets that ended */
        c->pruned_ns = now;
        for (int j = 0; j < c->nok;) {
            uint64_t ino;
            if (s_ino(c->ok[j].fd, &ino) != 0 || ino != c->ok[j].ino) c->ok[j] = c->ok[--c->nok];
            else j++;
        }
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
    st->stale = c->stale;
}
