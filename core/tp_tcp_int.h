/* tp_tcp_int.h: internal entry point of the TCP transport backend for its fuzz target (fuzz/fuzz_tcp.c):
 * feeds bytes to the real hello check and segment framing of core/tp_tcp.c through an in-process
 * AF_UNIX socket pair (no network, no store, no listener). Not for use elsewhere. */
#ifndef SB_TP_TCP_INT_H
#define SB_TP_TCP_INT_H
#include <stddef.h>
#include <stdint.h>
#include "core/auth.h"

#define TP_TCP_FUZZ_PREFIX "sb.fuzz.0"   /* the run name the fed instance has (hello nonce and MAC context) */
#define TP_TCP_HELLO_MAGIC 0x53424b44u   /* as on the wire: see core/tp_tcp.c */

typedef struct {
    size_t slot;             /* slot bytes: the longest segment accepted */
    int slots;               /* slots per channel (the per-peer queue holds 4 x slots segments) */
    size_t chunk;            /* bytes written to the socket between two rounds of reading (>= 1) */
    int connector;           /* 0: we are rank 1 accepting rank 0's hello (data = hello + segments);
                              * 1: we are rank 1 that connected to rank 2 with the nonce Nc = zeros
                              *    (data = its reply Ns + MAC, then segments) */
    const auth_t *auth;      /* the job secret (NULL or unset: no MACs checked) */
    void (*on_seg)(void *arg, const void *buf, size_t len);   /* each segment taken, in order */
    void *arg;
    int accepted;            /* out: the hello or reply was accepted */
} tp_tcp_fuzz_t;

/* Run the instance over data until the stream ends or the connection is dropped. Returns the last read
 * status (ERR_PEER at the end of a good stream, ERR_PROTO / ERR_AUTH when dropped, 0 for a hello that
 * was turned away or never completed), or ERR_NOMEM / ERR_SYS */
int tp_tcp_fuzz_feed(const void *data, size_t len, tp_tcp_fuzz_t *cfg);

#endif
