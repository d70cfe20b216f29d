/* tp.h: the point-to-point transport that algorithms run on. Algorithms never see TCP or shared
 * memory: they acquire a send slot towards a peer, fill it (often by reducing straight into it),
 * commit it, and on the other side acquire the next received segment, use it in place, release it.
 * Each ordered pair (src, dst) is one FIFO channel; both sides must agree on the order of segments.
 *
 * Backends, chosen per peer: "shm" (same host: a lock-free single-producer/single-consumer ring of
 * slots in a shared mapping, futex wake-ups), "tcp" (plain TCP, one connection per pair, progress
 * only in the waiting thread; the default across hosts) and "zmq" (ZeroMQ ROUTER/DEALER, zero-copy sends).
 * Every wait has a timeout; a peer that dies shows up as ERR_TIMEOUT or ERR_PEER, never a hang, and
 * over tcp a peer stopped or hung for half the timeout (1 to 10 s) as ERR_PEER (heartbeats, core/tp_hb.c). */
#ifndef SB_TP_H
#define SB_TP_H
#include <stddef.h>
#include <stdint.h>
#include "core/boot.h"

typedef struct tp tp_t;

typedef struct {
    const char *kind;        /* "auto", "shm", "tcp" or "zmq" */
    size_t slot_bytes;       /* largest segment; default 1 MiB */
    int    slots;            /* segments in flight per channel; default 4 */
    int    no_yield;         /* shm, ranks outnumbering cores: 1 sleeps on the futex at once in a wait; 0 first
                              * yields the core for up to 2 ms (quick hand-offs when only the ranks run, but a
                              * yielding waiter sees its segment only after the compute thread it yielded to
                              * ends its slice, where a futex wake-up preempts it) */
} tp_opts_t;

/* What the transport needs from its communicator (core/comm.c fills it; only read during tp_new,
 * except store, which must outlive the transport). */
typedef struct {
    int rank, world;
    int local_world;         /* ranks sharing this host (more than cores: spin less, yield more) */
    const int *node_of;      /* node index of every rank: same node = shared memory under "auto" */
    int timeout_ms;          /* for commits, which take no timeout of their own */
    const char *job;         /* job id: shared-memory names start with its tag (see tp_cleanup_job) */
    const boot_cfg_t *boot;  /* where to listen (boot_local_addr); boot->auth: the job secret every tcp and
                                zmq hello proves (none: a warning, or refused when boot->auth.require) */
    store_t *store;          /* endpoints are published and learnt here */
    /* root's len bytes end up in buf on every rank (the per-run nonce); ctx is passed back */
    int (*bcast)(void *ctx, void *buf, size_t len, int root, int timeout_ms);
    void *bcast_ctx;
} tp_env_t;

/* Build the transport for these ranks: publishes this rank's endpoint in the store and learns the
 * others'. Channels to peers are opened lazily on first use. */
int  tp_new(tp_t **self_p, const tp_env_t *env, const tp_opts_t *opts);
void tp_destroy(tp_t **self_p);

/* Largest segment one slot carries towards peer. */
size_t tp_slot_bytes(tp_t *self, int peer);
/* Backend used towards peer: "shm", "tcp", "zmq" or "self". */
const char *tp_kind(tp_t *self, int peer);

/* Reserve the next send slot towards peer (waits while the channel is full). *buf gets room for
 * tp_slot_bytes(peer) bytes. */
int tp_send_acquire(tp_t *self, int peer, void **buf, int timeout_ms);
/* Publish the reserved slot holding len bytes. */
int tp_send_commit(tp_t *self, int peer, size_t len);
/* Convenience: acquire + memcpy + commit, splitting len into slot-sized segments. */
int tp_send(tp_t *self, int peer, const void *buf, size_t len, int timeout_ms);

/* Wait for the next segment from peer; *buf points at it in place (valid until release). */
int tp_recv_acquire(tp_t *self, int peer, const void **buf, size_t *len, int timeout_ms);
int tp_recv_release(tp_t *self, int peer);
/* Convenience: receive exactly len bytes (as the sender's tp_send split them) into buf. */
int tp_recv(tp_t *self, int peer, void *buf, size_t len, int timeout_ms);

/* Whom a thread of this rank waits on in a send or receive acquire now, or waited on in the last one, which
 * failed: 1 with the peer, 1 if sending (a free slot towards it) or 0 if receiving, and for how long, in ms; 0
 * when none waits. For a step's timeout to name
 * the rank it waited on (a rank alive but stuck is caught by --timeout, not by its heartbeats). */
int tp_waiting(tp_t *self, int *peer, int *sending, int *ms);
/* Mark that this rank now waits on peer (sending: for room towards it; else for its data), or, with peer -1,
 * that it waits no more (a wait that failed is left marked): the acquires do it, and other waits on a peer
 * (core/board.c) call it. NULL self: nothing. */
void tp_wait_mark(tp_t *self, int peer, int sending);

/* This run's name "sb.<job tag>.<nonce hex>": the prefix of its shared-memory names and store keys. */
const char *tp_name(tp_t *self);

/* Remove every shared-memory channel name a job may have left behind (ranks killed before both
 * sides of a channel opened it). For launchers, after every rank of the job has exited. */
void tp_cleanup_job(const char *job);

/* Bytes moved so far (for stats). */
void tp_counters(tp_t *self, uint64_t *sent, uint64_t *received);

/* Bytes moved so far between this rank and peer (the traffic matrix's entries of this rank): what
 * this transport carried plus what other carriers noted with tp_note_traffic. 0 for this rank itself
 * or a bad peer. */
void tp_peer_counters(tp_t *self, int peer, uint64_t *sent, uint64_t *received);
/* For bytes a rank moves outside the transport (the PS's ZeroMQ sockets): counted in
 * tp_peer_counters, not in tp_counters. Thread-safe; ignores a NULL self or a bad peer. */
void tp_note_traffic(tp_t *self, int peer, uint64_t sent, uint64_t received);

#endif
