/* tp_tcp.c: plain-TCP backend of the transport, for ranks on different hosts (or --transport tcp).
 *
 * One TCP connection per pair of ranks, full duplex, opened lazily: the lower rank connects to the
 * higher rank's listener and says hello (magic, run nonce, its rank and the peer's, a fresh random
 * nonce Nc and MAC("tcp-connect", Nc, run name, ranks) under the job secret); the higher rank accepts
 * whenever it makes progress, checks the MAC (constant time) and answers with its own fresh nonce Ns and
 * MAC("tcp-accept", Nc, Ns, ...), which the connecting side checks before it reads any segment. The
 * run name carries a random per-run nonce and only one connection per pair is ever accepted, so a
 * replayed hello fails (another run: other name; this run: the rank is taken). Without a job secret
 * the MACs are zeros and not checked. A send slot is one aligned buffer per peer; the commit writes an 8-byte
 * little-endian length and the payload straight from it (one sendmsg, no copy). Sockets are non-blocking and no helper thread touches them: every wait runs one progress
 * loop that polls the connection being written, every connection for incoming segments (queued per
 * peer in pooled, 64-byte aligned buffers, so reductions read aligned data in place) and the
 * listener. A commit returns once its segment is in the kernel, while reads keep flowing, so two
 * ranks writing to each other at once never deadlock on full socket buffers. Everything received is
 * checked (a hello must be in within 2 s of connecting; with 64 connections waiting, the oldest goes for
 * a newer one, so idle connections never keep a peer out; drops are reported once per 10 s): a hello with the wrong magic, nonce, rank or MAC, or a length above the slot size (checked
 * before anything is allocated), closes that connection and is counted; EOF from a connected peer is
 * ERR_PEER naming the rank. A peer whose queue holds TCP_QUEUE_SLOTS x slots segments is not read
 * until the caller takes some (TCP flow control holds the sender back), so no peer sizes our memory.
 * Liveness: a peer stopped (SIGSTOP, a debugger) or hung keeps its connection open, so heartbeats come
 * from core/tp_hb.c: a helper thread and a UDP socket per rank, authenticated like the hello (same
 * key and context). They stay off the data connections on purpose: a beat interleaved into a stream
 * would need a lock around every commit and a tag in every segment header (a per-message cost, and a
 * change to the framing the fuzz target checks), while the thread that does not touch the progress
 * engine costs the data path nothing; a wait reads one atomic per round and fails with ERR_PEER once
 * the peer it waits on has sent no beat for half the timeout (1 to 10 s). A busy rank keeps beating. */
#include "core/proc.h"
#include "core/tp_backend.h"
#include "core/tp_tcp_int.h"
#include "core/tp_hb.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_MAGIC 0x53424b44u /* "SBKD": the authenticated hello */
#define HELLO_BYTES (20 + AUTH_NONCE_BYTES + AUTH_MAC_BYTES)   /* magic, run nonce, from, to, Nc, MAC */
#define REPLY_BYTES (AUTH_NONCE_BYTES + AUTH_MAC_BYTES)        /* Ns, MAC */
#define TCP_QUEUE_SLOTS 4       /* received segments queued per peer, in units of the channel's slots */

typedef struct seg {
    struct seg *next;
    size_t len;
    char *data;
} seg_t;

typedef struct {
    int fd;
    char *sbuf;              /* send slot */
    /* incoming state machine */
    uint64_t hdr;
    size_t hdr_got;
    seg_t *cur;              /* segment being filled */
    size_t got;
    seg_t *qhead, *qtail;    /* complete segments */
    int qlen;
    seg_t *acq;              /* handed to the caller */
    /* connecting side: the acceptor's answer to our hello, checked before any segment */
    unsigned char nc[AUTH_NONCE_BYTES], reply[REPLY_BYTES];
    size_t reply_got;
    int await_reply;
} speer_t;

typedef struct {
    int fd;
    unsigned char buf[HELLO_BYTES];
    size_t got;
    uint64_t since_ns;       /* accepted at; dropped past TCP_HELLO_MS without a whole hello */
} pending_t;

#define TCP_HELLO_MS 2000    /* a connection's hello (84 bytes, sent right after connect) must be in by then */
#define TCP_WARN_MS 10000    /* dropped connections are reported at most once an interval, with a count */

typedef struct {
    store_t *store;
    int rank, world;
    size_t slot;
    int qmax;                /* segments queued per peer before we stop reading it */
    uint64_t nonce;
    auth_t auth;
    char prefix[96];
    int lfd;
    speer_t *p;
    pending_t pend[64];      /* accepted connections whose hello is incomplete */
    int npend;
    seg_t *pool;
    uint64_t rejected;
    uint64_t unreported, warned_ns;  /* drops not yet reported, when last reported */
    char last_why[96];
    int spins;               /* non-blocking polls before sleeping in poll() */
    int yield_us;            /* oversubscribed: poll-and-yield this long before sleeping */
    tp_hb_t *hb;             /* heartbeats (NULL in the fuzz entry point) */
} tcp_t;

static int s_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void s_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static seg_t *s_seg_get(tcp_t *self)
{
    seg_t *s = self->pool;
    if (s) {
        self->pool = s->next;
        s->next = NULL;
        return s;
    }
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->data = aligned_alloc(64, (self->slot + 63) & ~(size_t)63);
    if (!s->data) { free(s); return NULL; }
    return s;
}

static void s_seg_put(tcp_t *self, seg_t *s)
{
    s->next = self->pool;
    self->pool = s;
}

/* The drops not yet said, in one line with the count since the start. */
static void s_say_drops(tcp_t *self, uint64_t now)
{
    LOG_W("transport: rank %d dropped %llu TCP connection(s) that did not authenticate as a peer (latest: %s; "
          "%llu in all)", self->rank, (unsigned long long)self->unreported, self->last_why, (unsigned long long)self->rejected);
    self->unreported = 0;
    self->warned_ns = now;
}

static void s_destroy(void **be_p)
{
    tcp_t *self = be_p ? *be_p : NULL;
    if (!self) return;
    if (self->unreported) s_say_drops(self, now_ns()); /* drops since the last report: said, not lost */
    tp_hb_close(&self->hb);
    for (int r = 0; self->p && r < self->world; r++) {
        speer_t *p = &self->p[r];
        if (p->fd >= 0) close(p->fd);
        free(p->sbuf);
        seg_t *lists[3] = {p->qhead, p->cur, p->acq};
        for (int i = 0; i < 3; i++)
            for (seg_t *s = lists[i], *n; s; s = n) {
                n = i == 0 ? s->next : NULL;
                free(s->data);
                free(s);
            }
    }
    for (seg_t *s = self->pool, *n; s; s = n) {
        n = s->next;
        free(s->data);
        free(s);
    }
    for (int i = 0; i < self->npend; i++) close(self->pend[i].fd);
    if (self->lfd >= 0) close(self->lfd);
    auth_wipe(&self->auth);
    free(self->p);
    free(self);
    *be_p = NULL;
}

/* Listen on this rank's address and publish "ADDR:PORT" under key tp/<prefix>/sock/<rank>. */
static int s_open(void **be_p, const tp_backend_cfg_t *cfg)
{
    tcp_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    void *be = self;
    const char *prefix = cfg->prefix;
    self->store = cfg->env->store;
    self->rank = cfg->env->rank;
    self->world = cfg->env->world;
    self->slot = cfg->slot_bytes;
    self->qmax = TCP_QUEUE_SLOTS * cfg->slots;
    if (cfg->env->boot) self->auth = cfg->env->boot->auth;
    self->lfd = -1;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int oversub = cfg->env->local_world > ncpu;
    self->spins = oversub ? 0 : 64;
    self->yield_us = oversub ? 2000 : 0;
    const char *e = getenv("SYNCBENCH_TCP_SPINS");
    if (e) self->spins = atoi(e);
    e = getenv("SYNCBENCH_TCP_YIELD_US");
    if (e) self->yield_us = atoi(e);
    snprintf(self->prefix, sizeof self->prefix, "%s", prefix);
    for (const char *c = prefix; *c; c++) self->nonce = self->nonce * 131 + (unsigned char)*c;
    self->p = calloc((size_t)self->world, sizeof(speer_t));
    if (!self->p) { free(self); return ERR_NOMEM; }
    for (int r = 0; r < self->world; r++) self->p[r].fd = -1;
    int rc = 0;
    char addr[128];
    CHECK_GOTO(rc, boot_local_addr(cfg->env->boot, addr, sizeof addr), fail);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        rc = err_set(ERR_INVAL, "transport: local address '%s' is not IPv4", addr);
        goto fail;
    }
    self->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t sl = sizeof sa;
    if (self->lfd < 0 || bind(self->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(self->lfd, 256) < 0 ||
        getsockname(self->lfd, (struct sockaddr *)&sa, &sl) < 0 || s_nonblock(self->lfd) < 0) {
        rc = err_set(ERR_SYS, "transport: cannot listen on %s: %s", addr, strerror(errno));
        goto fail;
    }
    char key[160], ep[160];
    /* the beat address goes first: a peer that finds our listener finds it too */
    tp_hb_cfg_t hc = {.rank = self->rank, .world = self->world, .addr = addr, .prefix = self->prefix,
                      .role = "tcp-beat", .auth = &self->auth, .limit_ms = proc_stop_limit_ms(cfg->env->timeout_ms)};
    CHECK_GOTO(rc, tp_hb_open(&self->hb, &hc, ep, sizeof ep), fail);
    snprintf(key, sizeof key, "tp/%s/hb/%d", self->prefix, self->rank);
    CHECK_GOTO(rc, store_set(self->store, key, ep, strlen(ep)), fail);
    snprintf(key, sizeof key, "tp/%s/sock/%d", self->prefix, self->rank);
    int n = snprintf(ep, sizeof ep, "%s:%d", addr, ntohs(sa.sin_port));
    CHECK_GOTO(rc, store_set(self->store, key, ep, (size_t)n), fail);
    *be_p = self;
    return 0;
fail:
    s_destroy(&be);
    return rc;
}

/* What a hello's MACs cover besides the nonces: this run's name and the ranks (from connects to to). */
/* Drop a connection that broke the protocol. */
static void s_reject(tcp_t *self, int fd, const char *why)
{
    self->rejected++;
    self->unreported++;
    snprintf(self->last_why, sizeof self->last_why, "%s", why);
    close(fd);
    uint64_t now = now_ns();
    if (self->unreported == self->rejected || now - self->warned_ns >= (uint64_t)TCP_WARN_MS * 1000000u)
        s_say_drops(self, now);
}

/* Read whatever is available on peer r's connection into its queue. */
static int s_read_peer(tcp_t *self, int r)
{
    speer_t *p = &self->p[r];
    while (p->await_reply) {
        ssize_t n = recv(p->fd, p->reply + p->reply_got, REPLY_BYTES - p->reply_got, 0);
        if (n == 0) return err_set(ERR_AUTH, "transport: rank %d closed the connection from rank %d during its "
                                   "hello (does it have the same job secret?)", r, self->rank);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
            return err_set(ERR_PEER, "transport: connection to rank %d: %s", r, strerror(errno));
        }
        p->reply_got += (size_t)n;
        if (p->reply_got < REPLY_BYTES) continue;
        unsigned char ctx[128];
        size_t cl = tp_auth_ctx(self->prefix, self->rank, r, ctx);
        if (auth_verify(&self->auth, "tcp-accept", p->nc, p->reply, ctx, cl, p->reply + AUTH_NONCE_BYTES) < 0) {
            s_reject(self, p->fd, "the peer could not prove it knows the job secret");
            p->fd = -1;
            return err_set(ERR_AUTH, "transport: the listener of rank %d could not prove it knows the job secret", r);
        }
        p->await_reply = 0;
    }
    for (;;) {
        if (p->hdr_got == 0 && p->qlen >= self->qmax) return 0; /* full: read on once the caller takes some */
        if (p->hdr_got < sizeof p->hdr) {
            ssize_t n = recv(p->fd, (char *)&p->hdr + p->hdr_got, sizeof p->hdr - p->hdr_got, 0);
            if (n == 0) return err_set(ERR_PEER, "transport: rank %d closed its connection to rank %d", r, self->rank);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
                return err_set(ERR_PEER, "transport: connection from rank %d: %s", r, strerror(errno));
            }
            p->hdr_got += (size_t)n;
            if (p->hdr_got < sizeof p->hdr) continue;
            if (p->hdr > self->slot) {
                s_reject(self, p->fd, "segment longer than a slot");
                p->fd = -1;
                return err_set(ERR_PROTO, "transport: rank %d announced a %llu-byte segment (slot %zu)", r,
                               (unsigned long long)p->hdr, self->slot);
            }
            p->cur = s_seg_get(self);
            if (!p->cur) return ERR_NOMEM;
            p->cur->len = (size_t)p->hdr;
            p->got = 0;
        }
        if (p->got < p->cur->len) {
            ssize_t n = recv(p->fd, p->cur->data + p->got, p->cur->len - p->got, 0);
            if (n == 0) return err_set(ERR_PEER, "transport: rank %d closed its connection to rank %d", r, self->rank);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
                return err_set(ERR_PEER, "transport: connection from rank %d: %s", r, strerror(errno));
            }
            p->got += (size_t)n;
            if (p->got < p->cur->len) continue;
        }
        if (p->qtail) p->qtail->next = p->cur;
        else p->qhead = p->cur;
        p->qtail = p->cur;
        p->qlen++;
        p->cur = NULL;
        p->hdr_got = 0;
    }
}

/* Accept connections and finish hellos. */
static int s_accept(tcp_t *self)
{
    for (;;) {
        int fd = accept4(self->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (self->npend == (int)(sizeof self->pend / sizeof self->pend[0])) {
            /* full: the oldest goes, never the newcomer (a real peer says hello at once, so idle
             * connections cannot keep it out) */
            int old = 0;
            for (int i = 1; i < self->npend; i++)
                if (self->pend[i].since_ns < self->pend[old].since_ns) old = i;
            s_reject(self, self->pend[old].fd, "the oldest of 64 connections without a hello, for a newer one");
            self->pend[old] = self->pend[--self->npend];
        }
        self->pend[self->npend++] = (pending_t){.fd = fd, .since_ns = now_ns()};
    }
    uint64_t now = now_ns();
    for (int i = 0; i < self->npend; i++) {
        pending_t *q = &self->pend[i];
        if (now - q->since_ns > (uint64_t)TCP_HELLO_MS * 1000000u) {
            s_reject(self, q->fd, "no hello within 2 s of connecting");
            *q = self->pend[--self->npend];
            i--;
            continue;
        }
        ssize_t n = recv(q->fd, (char *)q->buf + q->got, sizeof q->buf - q->got, 0);
        int drop = 0;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) drop = 1;
        else if (n > 0) q->got += (size_t)n;
        if (!drop && q->got == sizeof q->buf) {
            uint32_t magic, from_u, to_u;
            uint64_t nonce;
            memcpy(&magic, q->buf, 4);
            memcpy(&nonce, q->buf + 4, 8);
            memcpy(&from_u, q->buf + 12, 4);
            memcpy(&to_u, q->buf + 16, 4);
            int from = (int)from_u;
            const unsigned char *nc = q->buf + 20, *mac = nc + AUTH_NONCE_BYTES;
            unsigned char ctx[128], reply[REPLY_BYTES];
            size_t cl = 0;
            if (magic != HELLO_MAGIC || nonce != self->nonce || from < 0 || from >= self->rank ||
                to_u != (uint32_t)self->rank || self->p[from].fd >= 0) {
                s_reject(self, q->fd, "bad hello (foreign job, wrong rank or a second connection)");
            } else if (cl = tp_auth_ctx(self->prefix, from, self->rank, ctx),
                       auth_verify(&self->auth, "tcp-connect", nc, NULL, ctx, cl, mac) < 0) {
                LOG_W("transport: rejected a connection claiming to be rank %d: it could not prove it knows the job "
                      "secret", from);
                s_reject(self, q->fd, "no proof of the job secret");
            } else {
                auth_challenge(reply);
                auth_respond(&self->auth, "tcp-accept", nc, reply, ctx, cl, reply + AUTH_NONCE_BYTES);
                if (send(q->fd, reply, sizeof reply, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof reply) {
                    s_reject(self, q->fd, "could not answer its hello");
                } else {
                    s_tune(q->fd);
                    self->p[from].fd = q->fd;
                    tp_hb_watch(self->hb, from);
                }
            }
            *q = self->pend[--self->npend];
            i--;
            continue;
        }
        if (drop) {
            s_reject(self, q->fd, "closed before its hello");
            *q = self->pend[--self->npend];
            i--;
        }
    }
    return 0;
}

/* One round of progress: wait up to ms for anything, then read every readable connection. When
 * wfd >= 0 it is also polled for writability. */
static int s_progress(tcp_t *self, int wfd, int ms)
{
    struct pollfd fds[1 + 64 + 1024];
    int map[1 + 64 + 1024];
    int n = 0;
    fds[n] = (struct pollfd){.fd = self->lfd, .events = POLLIN};
    map[n++] = -1;
    for (int i = 0; i < self->npend; i++) {
        fds[n] = (struct pollfd){.fd = self->pend[i].fd, .events = POLLIN};
        map[n++] = -1;
    }
    for (int r = 0; r < self->world && n < (int)(sizeof fds / sizeof fds[0]); r++)
        if (self->p[r].fd >= 0) {
            short ev = (short)((self->p[r].qlen < self->qmax ? POLLIN : 0) | (self->p[r].fd == wfd ? POLLOUT : 0));
            if (!ev) continue;
            fds[n] = (struct pollfd){.fd = self->p[r].fd, .events = ev};
            map[n++] = r;
        }
    int k = poll(fds, (nfds_t)n, ms);
    if (k < 0) return errno == EINTR ? 0 : err_set(ERR_SYS, "poll: %s", strerror(errno));
    if (k == 0) return 0;
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents) continue;
        if (map[i] < 0) {
            CHECK(s_accept(self));
            continue;
        }
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) CHECK(s_read_peer(self, map[i]));
    }
    return 0;
}

/* Learn where peer's heartbeats come from (it published that before its listener's address). */
static int s_hb_peer(tcp_t *self, int peer, uint64_t dl)
{
    char key[160], ep[160];
    snprintf(key, sizeof key, "tp/%s/hb/%d", self->prefix, peer);
    void *val = NULL;
    size_t len = 0;
    int rc = store_get(self->store, key, &val, &len, deadline_left_ms(dl));
    if (rc < 0) { free(val); return err_set(rc, "transport: no heartbeat address from rank %d", peer); }
    snprintf(ep, sizeof ep, "%.*s", (int)(len < 159 ? len : 159), (char *)val);
    free(val);
    return tp_hb_peer(self->hb, peer, ep);
}

/* Make sure the connection to peer exists. */
static int s_connect(tcp_t *self, int peer, uint64_t dl)
{
    speer_t *p = &self->p[peer];
    if (p->fd >= 0) return 0;
    if (peer > self->rank) {
        char key[160];
        snprintf(key, sizeof key, "tp/%s/sock/%d", self->prefix, peer);
        void *val = NULL;
        size_t len = 0;
        int rc = store_get(self->store, key, &val, &len, deadline_left_ms(dl));
        if (rc < 0) { free(val); return err_set(rc, "transport: no address from rank %d", peer); }
        char ep[160];
        snprintf(ep, sizeof ep, "%.*s", (int)(len < 159 ? len : 159), (char *)val);
        free(val);
        char *colon = strrchr(ep, ':');
        struct sockaddr_in sa = {.sin_family = AF_INET};
        if (!colon || (*colon = '\0', inet_pton(AF_INET, ep, &sa.sin_addr) != 1))
            return err_set(ERR_PROTO, "transport: rank %d published a bad address", peer);
        sa.sin_port = htons((uint16_t)atoi(colon + 1));
        CHECK(s_hb_peer(self, peer, dl));
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return err_set(ERR_SYS, "socket: %s", strerror(errno));
        s_nonblock(fd);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            return err_set(ERR_PEER, "transport: cannot connect to rank %d at %s:%s: %s", peer, ep, colon + 1, strerror(e));
        }
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int left = deadline_left_ms(dl);
        if (poll(&pf, 1, left < 0 ? -1 : left) <= 0) {
            close(fd);
            return err_set(ERR_TIMEOUT, "transport: connecting to rank %d at %s timed out", peer, ep);
        }
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            close(fd);
            return err_set(ERR_PEER, "transport: cannot connect to rank %d at %s: %s", peer, ep, strerror(err));
        }
        unsigned char hello[HELLO_BYTES], ctx[128];
        uint32_t magic = HELLO_MAGIC, from_u = (uint32_t)self->rank, to_u = (uint32_t)peer;
        memcpy(hello, &magic, 4);
        memcpy(hello + 4, &self->nonce, 8);
        memcpy(hello + 12, &from_u, 4);
        memcpy(hello + 16, &to_u, 4);
        auth_challenge(p->nc);
        memcpy(hello + 20, p->nc, AUTH_NONCE_BYTES);
        auth_respond(&self->auth, "tcp-connect", p->nc, NULL, ctx, tp_auth_ctx(self->prefix, self->rank, peer, ctx),
                     hello + 20 + AUTH_NONCE_BYTES);
        size_t off = 0;
        while (off < sizeof hello) {
            ssize_t w = send(fd, (char *)hello + off, sizeof hello - off, MSG_NOSIGNAL);
            if (w > 0) off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                close(fd);
                return err_set(ERR_PEER, "transport: hello to rank %d: %s", peer, strerror(errno));
            } else {
                pf.events = POLLOUT;
                poll(&pf, 1, 10);
            }
        }
        s_tune(fd);
        p->fd = fd;
        tp_hb_watch(self->hb, peer);
        p->await_reply = 1;
        p->reply_got = 0;
        return 0;
    }
    /* the lower rank connects to us: accept until it does */
    while (p->fd < 0) {
        int left = deadline_left_ms(dl);
        if (left == 0) return err_set(ERR_TIMEOUT, "transport: rank %d never connected to rank %d", peer, self->rank);
        CHECK(s_progress(self, -1, left < 0 || left > TP_SLICE_MS ? TP_SLICE_MS : left));
    }
    return 0;
}

static int s_send_acquire(void *be, int peer, void **buf, int timeout_ms)
{
    tcp_t *self = be;
    CHECK(s_connect(self, peer, deadline_in(timeout_ms)));
    speer_t *p = &self->p[peer];
    if (!p->sbuf && !(p->sbuf = aligned_alloc(64, (self->slot + 63) & ~(size_t)63))) return ERR_NOMEM;
    *buf = p->sbuf;
    return 0;
}

/* Returns once the segment is handed to the kernel; receives from every peer progress meanwhile, so
 * two ranks sending to each other never block each other. */
static int s_send_commit(void *be, int peer, size_t len, int timeout_ms)
{
    tcp_t *self = be;
    speer_t *p = &self->p[peer];
    if (p->fd < 0 || !p->sbuf) return err_set(ERR_STATE, "transport: commit without acquire");
    uint64_t hdr = len;
    struct iovec iov[2] = {{&hdr, sizeof hdr}, {p->sbuf, len}};
    size_t total = sizeof hdr + len, done = 0;
    uint64_t dl = deadline_in(timeout_ms);
    while (done < total) {
        struct iovec v[2];
        int nv = 0;
        size_t skip = done;
        for (int i = 0; i < 2; i++) {
            if (skip >= iov[i].iov_len) { skip -= iov[i].iov_len; continue; }
            v[nv].iov_base = (char *)iov[i].iov_base + skip;
            v[nv].iov_len = iov[i].iov_len - skip;
            skip = 0;
            nv++;
        }
        struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)nv};
        ssize_t w = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { done += (size_t)w; continue; }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return err_set(ERR_PEER, "transport: sending to rank %d: %s", peer, strerror(errno));
        int left = deadline_left_ms(dl);
        if (left == 0) return err_set(ERR_TIMEOUT, "transport: rank %d stopped reading from rank %d", peer, self->rank);
        CHECK(tp_hb_check(self->hb, peer));
        /* the socket is full: keep reading everyone meanwhile */
        CHECK(s_progress(self, p->fd, left < 0 || left > TP_SLICE_MS ? TP_SLICE_MS : left));
    }
    return 0;
}

static int s_recv_acquire(void *be, int peer, const void **buf, size_t *len, int timeout_ms)
{
    tcp_t *self = be;
    uint64_t dl = deadline_in(timeout_ms);
    CHECK(s_connect(self, peer, dl));
    speer_t *p = &self->p[peer];
    if (!p->acq) {
        if (!p->qhead) CHECK(s_read_peer(self, peer));
        int spins = 0;
        uint64_t yield_until = now_ns() + (uint64_t)self->yield_us * 1000u;
        while (!p->qhead) {
            int left = deadline_left_ms(dl);
            if (left == 0) return err_set(ERR_TIMEOUT, "transport: rank %d waited too long for rank %d (tcp)", self->rank, peer);
            CHECK(tp_hb_check(self->hb, peer));
            /* non-blocking rounds first (yielding the core when ranks outnumber cores): a wake-up
             * from poll() costs tens of microseconds in a VM, often more than the wait itself */
            int busy = spins < self->spins || (self->yield_us && now_ns() < yield_until);
            int ms = busy ? 0 : (left < 0 || left > TP_SLICE_MS ? TP_SLICE_MS : left);
            CHECK(s_progress(self, -1, ms));
            if (busy && !p->qhead && self->yield_us) sched_yield();
            spins++;
        }
        p->acq = p->qhead;
        p->qlen--;
        p->qhead = p->acq->next;
        if (!p->qhead) p->qtail = NULL;
        p->acq->next = NULL;
    }
    *buf = p->acq->data;
    *len = p->acq->len;
    return 0;
}

static int s_recv_release(void *be, int peer, size_t *len)
{
    tcp_t *self = be;
    speer_t *p = &self->p[peer];
    if (!p->acq) return err_set(ERR_STATE, "transport: release without acquire");
    *len = p->acq->len;
    s_seg_put(self, p->acq);
    p->acq = NULL;
    return 0;
}

const tp_backend_t tp_backend_tcp = {
    .name = "tcp",
    .open = s_open,
    .destroy = s_destroy,
    .send_acquire = s_send_acquire,
    .send_commit = s_send_commit,
    .recv_acquire = s_recv_acquire,
    .recv_release = s_recv_release,
};

/* ---------------- fuzzing entry point (core/tp_tcp_int.h; fuzz/fuzz_tcp.c) ---------------- */

_Static_assert(TP_TCP_HELLO_MAGIC == HELLO_MAGIC, "tp_tcp_int.h and tp_tcp.c disagree on the hello magic");

/* Take the oldest queued segment from peer as recv_acquire does (without its wait) and release it. */
static void s_fuzz_take(tcp_t *self, int peer, tp_tcp_fuzz_t *cfg)
{
    speer_t *p = &self->p[peer];
    p->acq = p->qhead;
    p->qlen--;
    p->qhead = p->acq->next;
    if (!p->qhead) p->qtail = NULL;
    p->acq->next = NULL;
    if (cfg->on_seg) cfg->on_seg(cfg->arg, p->acq->data, p->acq->len);
    size_t len;
    s_recv_release(self, peer, &len);
}

/* Rank 1 of 3 with no listener: its peer's end of an AF_UNIX socket pair stands for the connection
 * (accepted: a pending hello; connected: awaiting the reply), data is written in cfg->chunk pieces with
 * a round of the real s_accept / s_read_peer after each, one queued segment is taken per round. */
int tp_tcp_fuzz_feed(const void *data, size_t len, tp_tcp_fuzz_t *cfg)
{
    tcp_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    void *be = self;
    self->rank = 1;
    self->world = 3;
    self->slot = cfg->slot;
    self->qmax = TCP_QUEUE_SLOTS * cfg->slots;
    if (cfg->auth) self->auth = *cfg->auth;
    self->lfd = -1;
    snprintf(self->prefix, sizeof self->prefix, "%s", TP_TCP_FUZZ_PREFIX);
    for (const char *c = self->prefix; *c; c++) self->nonce = self->nonce * 131 + (unsigned char)*c;
    int sv[2] = {-1, -1}, rc = 0, peer = cfg->connector ? 2 : 0;
    if (!(self->p = calloc((size_t)self->world, sizeof(speer_t)))) { s_destroy(&be); return ERR_NOMEM; }
    for (int r = 0; r < self->world; r++) self->p[r].fd = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || s_nonblock(sv[0]) < 0 || s_nonblock(sv[1]) < 0) {
        rc = err_set(ERR_SYS, "socketpair: %s", strerror(errno));
        if (sv[0] >= 0) { close(sv[0]); close(sv[1]); }
        s_destroy(&be);
        return rc;
    }
    if (cfg->connector) {
        self->p[peer].fd = sv[0];
        self->p[peer].await_reply = 1;            /* Nc: zeros (calloc) */
    } else {
        self->pend[self->npend++] = (pending_t){.fd = sv[0], .since_ns = now_ns()};
    }
    const unsigned char *d = data;
    size_t off = 0, chunk = cfg->chunk ? cfg->chunk : 1;
    cfg->accepted = 0;
    /* every round writes, reads or takes something, so 3 x len rounds are more than enough */
    for (size_t round = 0; rc == 0 && round < 3 * len + 64; round++) {
        size_t n = len - off < chunk ? len - off : chunk;
        ssize_t w = n ? write(sv[1], d + off, n) : 0;   /* non-blocking: a full socket waits for reads */
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            rc = err_set(ERR_SYS, "write: %s", strerror(errno));
            break;
        }
        if (w > 0 && (off += (size_t)w) == len) shutdown(sv[1], SHUT_WR);
        if (len == 0 && round == 0) shutdown(sv[1], SHUT_WR);
        speer_t *p = &self->p[peer];
        if (self->npend) {
            rc = s_accept(self);
            if (!self->npend && p->fd < 0) break;     /* turned away */
            continue;
        }
        if (p->fd < 0) break;
        rc = s_read_peer(self, peer);
        if (!p->await_reply) cfg->accepted = 1;   /* the hello was accepted, or the reply checked */
        if (p->qhead) s_fuzz_take(self, peer, cfg);
    }
    while (self->p[peer].qhead) s_fuzz_take(self, peer, cfg);   /* what was queued before the end */
    close(sv[1]);
    s_destroy(&be);
    return rc;
}
