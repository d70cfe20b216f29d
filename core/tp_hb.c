/* tp_hb.c: transport-level heartbeats for the tcp and zmq backends (core/tp_hb.h).
 *
 * Why: a peer on another host that is stopped (SIGSTOP, a debugger) or hung keeps its TCP connection
 * open (its kernel acknowledges), so without a beat a rank waiting on it waits its whole timeout.
 *
 * How: one UDP socket and one helper thread per backend instance. The thread never touches the data
 * connections (so the single-threaded progress engines of tp_tcp.c / tp_zmq.c stay as they are, and
 * the data path pays nothing: a wait loop reads one atomic per round). Every limit / 5 it sends each
 * peer whose beat address it knows a 60-byte datagram: magic "SBHB", the run nonce, from, to, a
 * sequence number that only grows, and MAC(role, seq, run name, from, to) under the job secret (the
 * hello's key and context, tp_auth_ctx). It reads peers' beats as they come and keeps only those to this
 * rank, of this run, with a MAC that verifies and a sequence number above the last one from that rank
 * (a replay or another job's beat is dropped). The side that connects a data connection knows its
 * peer's beat address from the store; the other side learns it from the first authenticated beat and
 * keeps it (a forged beat from elsewhere later changes nothing). A peer watched (a data connection
 * exists) whose beats have come through once and that has then sent nothing for the limit (half the
 * timeout, 1 to 10 s) is marked dead by the thread, which judges only after draining the socket and
 * only while it has itself been running: if
 * the thread went unscheduled for half the limit (this process was stopped or starved), every watched
 * peer gets the limit afresh, so a rank never blames a peer for its own gap. The mark clears when the
 * peer beats again. A peer never heard from is never judged (UDP blocked between hosts: one warning, and
 * the wait's own timeout rules as before); a new peer address is beaten at once, so a peer is heard
 * within moments of connecting. Without a job secret beats are not authenticated (like the hellos).
 * SYNCBENCH_TP_HB_DROP=1 drops every incoming beat (tests: a firewall between hosts). */
#include "core/tp_hb.h"
#include "core/tp_backend.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct tp_hb {
    int rank, world, limit_ms, interval_ms;
    int fd, wake;                   /* UDP socket; eventfd that stops the thread */
    uint64_t nonce;
    char prefix[96], role[24];
    auth_t auth;
    pthread_t thr;
    int started;
    atomic_int stop;
    pthread_mutex_t mu;             /* addr / known: written by tp_hb_peer and the thread */
    struct sockaddr_in *addr;
    unsigned char *known;
    uint64_t *seq_in;               /* thread only */
    uint64_t seq_out;               /* thread only */
    _Atomic uint64_t *last;         /* when each peer's last good beat came (ns) */
    atomic_int *watched;
    atomic_int *heard;              /* a good beat came from this peer once: only then is it judged */
    atomic_int *dead_ms;            /* silence, once past the limit; 0 while alive; -1: never heard */
    int warned;                     /* main thread: said once that beats do not come through */
    int deaf;                       /* SYNCBENCH_TP_HB_DROP=1 (tests): drop every beat, as a firewall would */
};

uint64_t tp_hb_nonce(const char *prefix)
{
    uint64_t n = 0;
    for (const char *c = prefix; *c; c++) n = n * 131 + (unsigned char)*c;
    return n;
}

static void s_mac(const char *prefix, const char *role, const auth_t *auth, int from, int to, uint64_t seq,
                  unsigned char mac[AUTH_MAC_BYTES], const unsigned char *check, int *ok)
{
    unsigned char na[AUTH_NONCE_BYTES] = {0}, ctx[128];
    memcpy(na, &seq, 8);
    size_t cl = tp_auth_ctx(prefix, from, to, ctx);
    if (check) *ok = auth_verify(auth, role, na, NULL, ctx, cl, check) == 0;
    else auth_respond(auth, role, na, NULL, ctx, cl, mac);
}

void tp_hb_build(unsigned char out[TP_HB_BYTES], uint64_t run_nonce, const char *prefix, const char *role,
                 const auth_t *auth, int from, int to, uint64_t seq)
{
    uint32_t magic = TP_HB_MAGIC, f = (uint32_t)from, t = (uint32_t)to;
    memcpy(out, &magic, 4);
    memcpy(out + 4, &run_nonce, 8);
    memcpy(out + 12, &f, 4);
    memcpy(out + 16, &t, 4);
    memcpy(out + 20, &seq, 8);
    s_mac(prefix, role, auth, from, to, seq, out + 28, NULL, NULL);
}

int tp_hb_parse(const void *buf, size_t len, uint64_t run_nonce, const char *prefix, const char *role,
                const auth_t *auth, int rank, int world, int *from, uint64_t *seq)
{
    const unsigned char *b = buf;
    if (len != TP_HB_BYTES) return ERR_PROTO;
    uint32_t magic, f, t;
    uint64_t n, s;
    memcpy(&magic, b, 4);
    memcpy(&n, b + 4, 8);
    memcpy(&f, b + 12, 4);
    memcpy(&t, b + 16, 4);
    memcpy(&s, b + 20, 8);
    if (magic != TP_HB_MAGIC || n != run_nonce || t != (uint32_t)rank || f >= (uint32_t)world || f == (uint32_t)rank)
        return ERR_PROTO;
    int ok = 0;
    s_mac(prefix, role, auth, (int)f, rank, s, NULL, b + 28, &ok);
    if (!ok) return ERR_AUTH;
    *from = (int)f;
    *seq = s;
    return 0;
}

/* Read every datagram waiting; keep the good beats. */
static void s_drain(tp_hb_t *hb, int *fresh)
{
    for (;;) {
        unsigned char b[TP_HB_BYTES + 1];
        struct sockaddr_in src;
        socklen_t sl = sizeof src;
        ssize_t n = recvfrom(hb->fd, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&src, &sl);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;   /* EAGAIN, or an ICMP error from a peer gone: nothing more to read now */
        }
        int from;
        uint64_t seq;
        if (hb->deaf) continue;
        if (tp_hb_parse(b, (size_t)n, hb->nonce, hb->prefix, hb->role, &hb->auth, hb->rank, hb->world, &from, &seq) < 0 ||
            seq <= hb->seq_in[from])
            continue;
        hb->seq_in[from] = seq;
        atomic_store(&hb->last[from], now_ns());
        atomic_store(&hb->heard[from], 1);
        if (!hb->known[from] && sl == sizeof src && src.sin_family == AF_INET) {
            pthread_mutex_lock(&hb->mu);
            if (!hb->known[from]) {
                hb->addr[from] = src;
                hb->known[from] = 1;
                *fresh = 1;   /* answer at once: the peer hears from us before its limit starts to matter */
            }
            pthread_mutex_unlock(&hb->mu);
        }
    }
}

static void s_beat(tp_hb_t *hb)
{
    pthread_mutex_lock(&hb->mu);
    for (int r = 0; r < hb->world; r++) {
        if (!hb->known[r]) continue;
        unsigned char b[TP_HB_BYTES];
        tp_hb_build(b, hb->nonce, hb->prefix, hb->role, &hb->auth, hb->rank, r, ++hb->seq_out);
        /* best effort: a lost beat is covered by the next four */
        (void)sendto(hb->fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&hb->addr[r], sizeof hb->addr[r]);
    }
    pthread_mutex_unlock(&hb->mu);
}

static void *s_thread(void *arg)
{
    tp_hb_t *hb = arg;
    uint64_t ival = (uint64_t)hb->interval_ms * 1000000u, lim = (uint64_t)hb->limit_ms * 1000000u;
    uint64_t next = 0, prev = now_ns();
    while (!atomic_load(&hb->stop)) {
        uint64_t t = now_ns();
        int ms = next > t ? (int)((next - t) / 1000000u) + 1 : 0;
        struct pollfd fds[2] = {{.fd = hb->fd, .events = POLLIN}, {.fd = hb->wake, .events = POLLIN}};
        if (poll(fds, 2, ms) < 0 && errno != EINTR) break;
        if (atomic_load(&hb->stop)) break;
        uint64_t w;
        int fresh = fds[1].revents != 0 && read(hb->wake, &w, sizeof w) > 0;   /* tp_hb_peer: beat now */
        s_drain(hb, &fresh);
        t = now_ns();
        int gap = t - prev > lim / 2;   /* this thread did not run for a while: judge nobody on it */
        prev = t;
        if (t >= next || fresh) {
            s_beat(hb);
            next = t + ival;
        }
        for (int r = 0; r < hb->world; r++) {
            if (!atomic_load(&hb->watched[r])) continue;
            uint64_t l = atomic_load(&hb->last[r]);
            if (gap && l < t) atomic_store(&hb->last[r], l = t);
            uint64_t quiet = t > l ? t - l : 0;
            int heard = atomic_load(&hb->heard[r]);
            atomic_store(&hb->dead_ms[r], quiet < lim ? 0 : heard ? (int)(quiet / 1000000u) : -1);
        }
    }
    return NULL;
}

void tp_hb_close(tp_hb_t **hb_p)
{
    tp_hb_t *hb = hb_p ? *hb_p : NULL;
    if (!hb) return;
    if (hb->started) {
        atomic_store(&hb->stop, 1);
        uint64_t one = 1;
        (void)!write(hb->wake, &one, sizeof one);
        pthread_join(hb->thr, NULL);
    }
    if (hb->fd >= 0) close(hb->fd);
    if (hb->wake >= 0) close(hb->wake);
    pthread_mutex_destroy(&hb->mu);
    auth_wipe(&hb->auth);
    free(hb->addr);
    free(hb->known);
    free(hb->seq_in);
    free((void *)hb->last);
    free((void *)hb->watched);
    free((void *)hb->heard);
    free((void *)hb->dead_ms);
    free(hb);
    *hb_p = NULL;
}

int tp_hb_open(tp_hb_t **hb_p, const tp_hb_cfg_t *cfg, char *ep, size_t eplen)
{
    *hb_p = NULL;
    tp_hb_t *hb = calloc(1, sizeof *hb);
    if (!hb) return ERR_NOMEM;
    hb->fd = hb->wake = -1;
    pthread_mutex_init(&hb->mu, NULL);
    hb->rank = cfg->rank;
    hb->world = cfg->world;
    hb->limit_ms = cfg->limit_ms;
    hb->interval_ms = cfg->limit_ms / 5 > 0 ? cfg->limit_ms / 5 : 1;
    snprintf(hb->prefix, sizeof hb->prefix, "%s", cfg->prefix);
    snprintf(hb->role, sizeof hb->role, "%s", cfg->role);
    hb->nonce = tp_hb_nonce(hb->prefix);
    const char *e = getenv("SYNCBENCH_TP_HB_DROP");
    hb->deaf = e && !strcmp(e, "1");
    if (cfg->auth) hb->auth = *cfg->auth;
    size_t w = (size_t)cfg->world;
    hb->addr = calloc(w, sizeof *hb->addr);
    hb->known = calloc(w, 1);
    hb->seq_in = calloc(w, sizeof *hb->seq_in);
    hb->last = calloc(w, sizeof *hb->last);
    hb->watched = calloc(w, sizeof *hb->watched);
    hb->heard = calloc(w, sizeof *hb->heard);
    hb->dead_ms = calloc(w, sizeof *hb->dead_ms);
    if (!hb->addr || !hb->known || !hb->seq_in || !hb->last || !hb->watched || !hb->heard || !hb->dead_ms) {
        tp_hb_close(&hb);
        return ERR_NOMEM;
    }
    int rc = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t sl = sizeof sa;
    if (inet_pton(AF_INET, cfg->addr, &sa.sin_addr) != 1) {
        rc = err_set(ERR_INVAL, "transport: heartbeat address '%s' is not IPv4", cfg->addr);
    } else if ((hb->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
               bind(hb->fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
               getsockname(hb->fd, (struct sockaddr *)&sa, &sl) < 0 ||
               (hb->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        rc = err_set(ERR_SYS, "transport: cannot open the heartbeat socket on %s: %s", cfg->addr, strerror(errno));
    }
    if (rc == 0) {
        /* the thread takes no signals: they stay with the threads that wait on them */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&hb->thr, NULL, s_thread, hb);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e) rc = err_set(ERR_SYS, "transport: cannot start the heartbeat thread: %s", strerror(e));
        else hb->started = 1;
    }
    if (rc < 0) {
        tp_hb_close(&hb);
        return rc;
    }
    snprintf(ep, eplen, "%s:%d", cfg->addr, ntohs(sa.sin_port));
    *hb_p = hb;
    return 0;
}

int tp_hb_peer(tp_hb_t *hb, int peer, const char *ep)
{
    if (!hb) return 0;
    char host[64];
    const char *colon = strrchr(ep, ':');
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int port = colon ? atoi(colon + 1) : 0;
    if (!colon || colon - ep >= (long)sizeof host || port <= 0 || port > 65535)
        return err_set(ERR_PROTO, "transport: rank %d published a bad heartbeat address", peer);
    memcpy(host, ep, (size_t)(colon - ep));
    host[colon - ep] = '\0';
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return err_set(ERR_PROTO, "transport: rank %d published a bad heartbeat address", peer);
    sa.sin_port = htons((uint16_t)port);
    pthread_mutex_lock(&hb->mu);
    hb->addr[peer] = sa;
    hb->known[peer] = 1;
    pthread_mutex_unlock(&hb->mu);
    uint64_t one = 1;
    (void)!write(hb->wake, &one, sizeof one);   /* the first beat goes now */
    return 0;
}

void tp_hb_watch(tp_hb_t *hb, int peer)
{
    if (!hb || atomic_load(&hb->watched[peer])) return;
    uint64_t t = now_ns();
    if (atomic_load(&hb->last[peer]) < t) atomic_store(&hb->last[peer], t);
    atomic_store(&hb->watched[peer], 1);
}

int tp_hb_check(tp_hb_t *hb, int peer)
{
    if (!hb) return 0;
    int d = atomic_load_explicit(&hb->dead_ms[peer], memory_order_relaxed);
    if (!d) return 0;
    if (d < 0) {
        if (!hb->warned++)
            LOG_W("transport: no heartbeat has come from rank %d in %.1f s (UDP to this rank's heartbeat port blocked?); "
                  "a stopped or hung peer is then noticed only at the timeout", peer, hb->limit_ms / 1000.0);
        return 0;
    }
    return err_set(ERR_PEER, "transport: rank %d has sent no heartbeat for %.1f s (stopped or hung; the limit: half "
                             "the timeout, 1 to 10 s); rank %d stops waiting for it", peer, d / 1000.0, hb->rank);
}
