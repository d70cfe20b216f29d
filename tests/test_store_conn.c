/* test_store_conn.c: the store's connection bounds (core/store_conn.h) against descriptors reused under them. */
/* The store learns of connections from its ROUTER monitor, a queue read between requests, so a descriptor an
 * event names may by then hold another connection: ZeroMQ closed the first (its end not read yet) and accept(2)
 * gave the number to a newer one, from the same address when both come from this host. These tests build that
 * state with real loopback sockets (dup2 puts the newer connection on the older one's number) and drive
 * sconn_event / sconn_authed / sconn_tick in the order the server thread would see them. The newer connection,
 * a rank's in the store, must be neither expired nor evicted for the older one; a rank's request read before
 * its accept event must still count; and the bounds themselves still close what they should. Loopback only. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/store_conn.h"

typedef struct { int lfd, port; } lst_t;

static lst_t s_listen(void)
{
    lst_t l = {.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    cr_assert_geq(l.lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    cr_assert_eq(bind(l.lfd, (struct sockaddr *)&a, sizeof a), 0, "%s", strerror(errno));
    cr_assert_eq(listen(l.lfd, 16), 0);
    cr_assert_eq(getsockname(l.lfd, (struct sockaddr *)&a, &al), 0);
    l.port = ntohs(a.sin_port);
    return l;
}

/* A connection from 127.0.0.1: *cli its client end; returns the accepted (server) end. */
static int s_conn(const lst_t *l, int *cli)
{
    *cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(*cli, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)l->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(connect(*cli, (struct sockaddr *)&a, sizeof a), 0, "%s", strerror(errno)); /* loopback, backlog free */
    struct pollfd p = {.fd = l->lfd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 2000), 1, "no connection to accept within 2 s");
    int fd = accept(l->lfd, NULL, NULL);
    cr_assert_geq(fd, 0, "%s", strerror(errno));
    return fd;
}

/* Close the connection on descriptor to (as ZeroMQ would) and move the one on fd there (as accept(2) would
 * reuse the number); returns to. */
static int s_move(int fd, int to)
{
    cr_assert_neq(fd, to);
    cr_assert_eq(dup2(fd, to), to);
    close(fd);
    return to;
}

/* The connection whose client end is cli is still open: no EOF (the server end's shutdown) within 50 ms. */
static int s_open(int cli)
{
    struct pollfd p = {.fd = cli, .events = POLLIN};
    return poll(&p, 1, 50) == 0;
}

static void s_sleep_ms(int ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static sconn_t *s_new(const lst_t *l, int per_src, int total, int unauth_ms)
{
    sconn_t *c = NULL;
    sconn_cfg_t cfg = {.per_src = per_src, .total = total, .unauth_ms = unauth_ms, .port = l->port};
    cr_assert_eq(sconn_new(&c, &cfg), 0);
    return c;
}

/* An unjoined connection's deadline passes after ZeroMQ closed it and a newer one took its descriptor (with a
 * secret both come at 5 s: ZeroMQ's CURVE handshake deadline and the store's). */
Test(store_conn, deadline_spares_a_reused_descriptor, .timeout = 20)
{
    lst_t l = s_listen();
    sconn_t *c = s_new(&l, 64, 64, 50);
    int ca, cb, a = s_conn(&l, &ca);
    cr_assert_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, a), 0);
    /* ZeroMQ closed it (its DISCONNECTED not read yet) and a newer connection got its descriptor */
    int b = s_move(s_conn(&l, &cb), a);
    s_sleep_ms(100);
    cr_expect_eq(sconn_tick(c), 0, "the older connection's deadline closed the newer one");
    cr_expect(s_open(cb), "the newer connection was shut down");
    sconn_stats_t st;
    sconn_stats(c, &st);
    cr_expect(st.expired == 0 && st.stale == 1 && st.open == 0, "expired %llu stale %llu open %d",
              (unsigned long long)st.expired, (unsigned long long)st.stale, st.open);
    /* the newer one's own events, then its own deadline: closed (it never joined) */
    sconn_event(c, ZMQ_EVENT_DISCONNECTED, a);
    cr_assert_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, b), 0);
    s_sleep_ms(100);
    cr_expect_eq(sconn_tick(c), 1);
    cr_expect(!s_open(cb), "an unjoined connection past its deadline stayed open");
    sconn_free(&c);
    close(b); close(ca); close(cb); close(l.lfd);
}

/* The total is full: the oldest unjoined connection gives way, but the record found is of one ZeroMQ closed,
 * its descriptor now another's. That place is free already; nothing open is evicted for it. */
Test(store_conn, eviction_spares_a_reused_descriptor, .timeout = 20)
{
    lst_t l = s_listen();
    sconn_t *c = s_new(&l, 64, 2, 60000);
    int c1, c2, cc, cd, ce;
    int a1 = s_conn(&l, &c1), a2 = s_conn(&l, &c2);
    sconn_event(c, ZMQ_EVENT_ACCEPTED, a1);
    sconn_event(c, ZMQ_EVENT_ACCEPTED, a2);
    int x = s_move(s_conn(&l, &cc), a1);  /* a1 closed, a newer one on its descriptor (its accept not read yet) */
    s_sleep_ms(SCONN_EVICT_MS + 100);      /* both records old enough to be evicted */
    int d = s_conn(&l, &cd);
    cr_expect_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, d), 0, "a connection was closed for a place already free");
    cr_expect(s_open(cc), "the connection on the reused descriptor was evicted");
    cr_expect(s_open(c2) && s_open(cd), "an open connection was closed");
    sconn_stats_t st;
    sconn_stats(c, &st);
    cr_expect(st.evicted == 0 && st.stale == 1 && st.open == 2, "evicted %llu stale %llu open %d",
              (unsigned long long)st.evicted, (unsigned long long)st.stale, st.open);
    /* full again (a2, d): a newcomer evicts the oldest open one, a2 */
    int e = s_conn(&l, &ce);
    cr_expect_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, e), 1);
    cr_expect(!s_open(c2) && s_open(cd) && s_open(ce), "the oldest unjoined connection was not the one evicted");
    sconn_free(&c);
    close(x); close(a2); close(d); close(e);
    close(c1); close(c2); close(cc); close(cd); close(ce); close(l.lfd);
}

/* Under a flood the monitor's queue lags: a rank's HELLO (sconn_authed) can be read before its accept event.
 * The connection still counts as joined; a later connection on that descriptor does not. */
Test(store_conn, rank_heard_before_its_accept_keeps_its_connection, .timeout = 20)
{
    lst_t l = s_listen();
    sconn_t *c = s_new(&l, 64, 64, 50);
    int cb, cf, b = s_conn(&l, &cb);
    sconn_authed(c, b);
    cr_assert_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, b), 0);
    s_sleep_ms(100);
    cr_expect_eq(sconn_tick(c), 0);
    cr_expect(s_open(cb), "a joined rank's connection was closed as unjoined");
    /* the rank leaves; a connection that never joined gets its descriptor */
    int f = s_move(s_conn(&l, &cf), b);
    sconn_event(c, ZMQ_EVENT_DISCONNECTED, b);
    sconn_event(c, ZMQ_EVENT_ACCEPTED, f);
    s_sleep_ms(100);
    cr_expect_eq(sconn_tick(c), 1, "the rank's standing passed to the next connection on its descriptor");
    cr_expect(!s_open(cf));
    sconn_free(&c);
    close(f); close(cb); close(cf); close(l.lfd);
}

/* The per-source bound: a third connection from 127.0.0.1 within SCONN_EVICT_MS is refused. */
Test(store_conn, per_source_bound_refuses, .timeout = 20)
{
    lst_t l = s_listen();
    sconn_t *c = s_new(&l, 2, 64, 60000);
    int k[3], s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = s_conn(&l, &k[i]);
        cr_expect_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, s[i]), i == 2, "connection %d", i);
    }
    cr_expect(s_open(k[0]) && s_open(k[1]) && !s_open(k[2]));
    sconn_stats_t st;
    sconn_stats(c, &st);
    cr_expect(st.refused == 1 && st.open == 2, "refused %llu open %d", (unsigned long long)st.refused, st.open);
    sconn_free(&c);
    for (int i = 0; i < 3; i++) { close(s[i]); close(k[i]); }
    close(l.lfd);
}

/* The peer recorded at a connection's accept names it after ZeroMQ closed it: rank 0's store reads a refused
 * handshake's peer from the end event that follows it (core/store_zmq_srv.c), by then a closed descriptor. */
Test(store_conn, peer_of_a_closed_connection_is_the_one_accepted, .timeout = 20)
{
    lst_t l = s_listen();
    sconn_t *c = s_new(&l, 64, 64, 60000);
    int ca, a = s_conn(&l, &ca);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    cr_assert_eq(getsockname(ca, (struct sockaddr *)&me, &ml), 0);
    char want[64], got[64] = "";
    snprintf(want, sizeof want, "127.0.0.1:%d", ntohs(me.sin_port));
    cr_expect_eq(sconn_peer(c, a, got, sizeof got), -1, "a peer before its accept was read");
    cr_assert_eq(sconn_event(c, ZMQ_EVENT_ACCEPTED, a), 0);
    close(a);
    cr_expect_eq(sconn_peer(c, a, got, sizeof got), 0);
    cr_expect_str_eq(got, want);
    sconn_event(c, ZMQ_EVENT_DISCONNECTED, a);
    cr_expect_eq(sconn_peer(c, a, got, sizeof got), -1, "a peer after its end");
    sconn_free(&c);
    close(ca); close(l.lfd);
}
