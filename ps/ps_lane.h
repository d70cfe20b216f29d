/* ps_lane.h: the parameter server's shared-memory lane: for a worker and a server on one host that
 * exchange descriptors (cross-memory reads, core/cma.h), two single-producer single-consumer rings of
 * small messages in one mapping (worker -> server requests, server -> worker replies), so a data
 * message goes from the sender's thread straight to the receiver's, with no ZeroMQ I/O thread and no
 * socket on the way. ZeroMQ stays beside it for everything else (setup, authentication, INIT, errors
 * too long for a slot, wake-ups, remote workers).
 *
 * Ordering with ZeroMQ: every lane message carries zseq, the number of ZeroMQ messages its sender had
 * sent on the same connection since the lane was set up. A receiver takes a lane message only once it
 * received that many ZeroMQ messages from the peer, and before handling a ZeroMQ message it takes every
 * lane message sent before it (zseq <= what it had received so far). So the peer's messages are
 * handled in the order they were sent, whichever way each went (a BYE after the last push, a message
 * that fell back to ZeroMQ because the ring was full or it was too long).
 *
 * Wake-ups: a receiver polls its lanes (and ZeroMQ without waiting) while it yields or spins, then sets
 * the ring's sleeping flag (seq_cst), looks at the ring once more and blocks in zmq_poll (bounded). A
 * sender that finds the flag set after publishing a message clears it and sends a keep-alive HELLO over
 * ZeroMQ, which ends the receiver's zmq_poll. Every wait keeps its deadline and dead-peer checks.
 *
 * Trust: the worker creates the mapping (a random name, O_EXCL, 0600) and names it to the server over
 * its authenticated connection; the server checks owner, mode and exact size before mapping it and
 * unlinks the name at once. Nothing read from the mapping is trusted: a slot is copied out before it
 * is parsed, lengths are checked against the slot, counters against the ring's capacity. */
#ifndef SB_PS_LANE_H
#define SB_PS_LANE_H
#include <stddef.h>
#include <stdint.h>
#include "ps/ps_van.h"

#define PS_LANE_SLOTS      128      /* messages in flight per direction */
#define PS_LANE_SLOT_BYTES 1024     /* one message: its frames (lengths + bytes) must fit */
#define PS_LANE_NAME_MAX   64

typedef struct ps_lane ps_lane_t;

/* Worker: create a fresh mapping under a random name (written to name). */
int  ps_lane_create(ps_lane_t **self_p, char name[PS_LANE_NAME_MAX]);
/* Server: open the worker's mapping `name` (checked: our uid, 0600, exact size), map it, unlink it. */
int  ps_lane_open(ps_lane_t **self_p, const char *name, size_t name_len);
/* Worker: remove the name (the server normally did; harmless when it is gone). */
void ps_lane_unlink(ps_lane_t *self);
void ps_lane_destroy(ps_lane_t **self_p);
/* Whether the lane can still be used (a malformed counter breaks it for good). */
int  ps_lane_ok(const ps_lane_t *self);

/* Enqueue [header][frames...] on our outgoing ring (zseq = ZeroMQ messages we sent since setup).
 * 1: sent (zero-copy frames already released; *bytes += its size); 0: not sent (too long, ring full,
 * lane broken): send it over ZeroMQ instead. *wake is set when the receiver went to sleep: send it a
 * keep-alive over ZeroMQ. */
int  ps_lane_send(ps_lane_t *self, const wire_hdr_t *h, const ps_frame_t *fr, int nfr, uint64_t zseq,
                  uint64_t *bytes, int *wake);
/* For tests of a receiver's checks: publish len bytes (<= a slot) as the next slot as they are, and
 * move the ring's head on by advance (1; more makes the counter jump). */
void ps_lane_send_raw(ps_lane_t *self, const void *slot, size_t len, uint64_t advance);
/* Take the next message of our incoming ring if its zseq <= zgot (ZeroMQ messages received from the
 * peer since setup): m gets [ident if idlen][header][frames...] (copies; close with ps_van_close_msg).
 * 1: got one; 0: none ready; ERR_PROTO: a malformed slot (consumed; err_detail says why) or a broken
 * ring (ps_lane_ok turns 0). */
int  ps_lane_recv(ps_lane_t *self, ps_vmsg_t *m, const void *ident, size_t idlen, uint64_t zgot);
/* Is a message waiting on our incoming ring? */
int  ps_lane_ready(const ps_lane_t *self);

/* zmq_poll over items[0..ni) that also returns when a lane of lanes[0..nl) (NULL entries skipped) has
 * a message: polls both while yielding the core for yield_us (or spinning briefly when yield_us is 0 and
 * a lane is up), then sets the lanes' sleeping flags, re-checks them and blocks in zmq_poll for at most
 * timeout_ms. With no lane (nl 0) it is the PS's only wait on ZeroMQ alone: yield, then block.
 * Returns zmq_poll's result (> 0 when a lane is ready, even if no item is), < 0 on a poll error. */
int  ps_lane_poll(ps_lane_t *const *lanes, int nl, zmq_pollitem_t *items, int ni, int timeout_ms, int yield_us);

#endif
