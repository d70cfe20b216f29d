/* tp_hb.h: transport-level heartbeats for the tcp and zmq backends (internal to core/tp*.c): a helper
 * thread per backend instance sends a small authenticated UDP datagram to every peer it has a data
 * connection with and reads theirs, so a waiting rank can tell a peer that is stopped or hung (its
 * connection open, the kernel answering for it) from one that is only busy: a busy rank's heartbeat
 * thread does not wait on its compute and keeps beating. See core/tp_hb.c for the datagram. */
#ifndef SB_TP_HB_H
#define SB_TP_HB_H
#include <stddef.h>
#include <stdint.h>
#include "core/auth.h"

#define TP_HB_BYTES (28 + AUTH_MAC_BYTES)   /* magic, run nonce, from, to, sequence number, MAC */
#define TP_HB_MAGIC 0x53424842u             /* "SBHB" */

typedef struct tp_hb tp_hb_t;

typedef struct {
    int rank, world;
    const char *addr;        /* IPv4 address to bind (the data listener's) */
    const char *prefix;      /* the run's name: beats carry its hash and their MACs cover it */
    const char *role;        /* MAC role label, "tcp-beat" or "zmq-beat" */
    const auth_t *auth;      /* the job secret (copied); none: MACs are zeros and not checked */
    int limit_ms;            /* silence after which a watched peer is dead (core/proc.h proc_stop_limit_ms) */
} tp_hb_cfg_t;

/* Bind the UDP socket and start the thread; ep gets "ADDR:PORT" to publish for peers. */
int  tp_hb_open(tp_hb_t **hb_p, const tp_hb_cfg_t *cfg, char *ep, size_t eplen);
/* Stop the thread (at once: it is woken) and close the socket. NULL is fine. */
void tp_hb_close(tp_hb_t **hb_p);
/* Peer's published "ADDR:PORT": beat to it from now on (the other side learns ours from our first
 * authenticated beat). ERR_PROTO for a bad endpoint. */
int  tp_hb_peer(tp_hb_t *hb, int peer, const char *ep);
/* A data connection with peer exists: judge its silence from now on. NULL hb: nothing. */
void tp_hb_watch(tp_hb_t *hb, int peer);
/* For wait loops only (an atomic load): 0, or ERR_PEER naming peer once it has sent no beat for the
 * limit while this rank's own heartbeat thread ran. NULL hb: 0. */
int  tp_hb_check(tp_hb_t *hb, int peer);

/* The datagram check the thread runs (exposed for the fuzz target fuzz/fuzz_beat.c): 0 and *from /
 * *seq when buf is a well-formed beat of this run to rank `rank` (of world) whose MAC verifies under
 * auth, else ERR_PROTO or ERR_AUTH. */
int  tp_hb_parse(const void *buf, size_t len, uint64_t run_nonce, const char *prefix, const char *role,
                 const auth_t *auth, int rank, int world, int *from, uint64_t *seq);
/* Build the beat from -> to with sequence number seq (what tp_hb_parse accepts). */
void tp_hb_build(unsigned char out[TP_HB_BYTES], uint64_t run_nonce, const char *prefix, const char *role,
                 const auth_t *auth, int from, int to, uint64_t seq);
/* The run nonce a prefix stands for in hellos and beats (the tcp hello's hash of the run name). */
uint64_t tp_hb_nonce(const char *prefix);

#endif
