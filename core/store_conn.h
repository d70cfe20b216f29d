/* store_conn.h: rank 0's store bounds its TCP connections: per source address, in all, and in time.
 *
 * ZeroMQ accepts every connection and has no limit of its own; a peer that only connects (no secret
 * needed) holds a descriptor until it leaves, so about 20,000 idle connections once took rank 0 to
 * "Too many open files" and the finished run's results were lost (issue 33 section 1). The store's
 * ROUTER monitor reports each accepted connection with its descriptor; this governor records its peer
 * address, and:
 *   - at most per_src connections a source address and total in all: when the total is full, a
 *     connection from an address holding fewer than the busiest one takes the place of that address's
 *     oldest unauthenticated connection; otherwise (its own address at per_src, or the busiest) it takes
 *     the place of its own address's oldest unauthenticated one older than SCONN_EVICT_MS, or is closed;
 *   - a connection from which no joined rank has spoken (its HELLO) within unauth_ms is closed (with a
 *     secret, ZeroMQ's CURVE handshake deadline, ZSEC_HANDSHAKE_MS, closes most before that);
 *   - refusals are counted and reported once per ZSEC_REPORT_MS, never a line each.
 * A connection is closed with shutdown(2), so ZeroMQ sees its peer leave and closes the descriptor
 * itself; a descriptor is touched only while it still holds the socket recorded at its accept (its inode), a
 * TCP socket on the store's port connected to the recorded address: a descriptor reused for anything else,
 * a newer connection from the same host included, is left alone. */
#ifndef SB_STORE_CONN_H
#define SB_STORE_CONN_H
#include <stddef.h>
#include <stdint.h>

#define SCONN_SLACK_SRC   16     /* per source: the world (every rank on one host) plus this */
#define SCONN_SLACK_TOTAL 64     /* in all: twice the world plus this */
#define SCONN_EVICT_MS    1000   /* an unauthenticated connection younger than this is not evicted */

typedef struct sconn sconn_t;

typedef struct {
    int per_src, total;          /* the bounds (sconn_limits) */
    int unauth_ms;               /* time to the first request of a joined rank */
    int port;                    /* the store's TCP port */
} sconn_cfg_t;

/* The bounds for a job of world ranks. */
void sconn_limits(int world, int *per_src, int *total);
int  sconn_new(sconn_t **out, const sconn_cfg_t *cfg);
/* Reports what is not yet reported; NULL-safe. */
void sconn_free(sconn_t **c);
/* A monitor event of the store's ROUTER (ZMQ_EVENT_ACCEPTED, _DISCONNECTED, _CLOSED with the descriptor;
 * others ignored). Returns the connections it closed. */
int  sconn_event(sconn_t *c, unsigned ev, int32_t value);
/* "ADDR:PORT" of the peer recorded for the connection on fd (its accept read while it was open): 0, else -1
 * (buf untouched). Read it before passing fd's end to sconn_event, which drops the record. */
int  sconn_peer(const sconn_t *c, int fd, char *buf, size_t len);
/* A request from a joined rank came in on descriptor fd: the socket now on fd is authenticated, whether its
 * accept event was read already or comes later. */
void sconn_authed(sconn_t *c, int fd);
/* Close unauthenticated connections past their time; report refusals due. Returns the connections closed. */
int  sconn_tick(sconn_t *c);

typedef struct {
    int open, peak;                         /* connections now, the most at once */
    uint64_t accepted, refused, evicted, expired;
    uint64_t stale;                         /* closures skipped: the descriptor no longer held that connection */
} sconn_stats_t;
void sconn_stats(const sconn_t *c, sconn_stats_t *st);

#endif
