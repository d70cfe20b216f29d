/* ps_hb_srv.h: the PS server's reading of a worker's hello and heartbeats, without sockets or clock.
 *
 * Pure functions of a connection's state and one message: ps_server_live.c acts on what they decide
 * (answers, refusals, liveness times), fuzz/fuzz_hb.c feeds them any bytes.
 *
 * Two connections of a worker run the CHAL/PROOF hello (ps_proto.h): its data connection (roles
 * "ps-server" / "ps-client") and its heartbeat connection (ps_hb.h; routing id ps_hb_routing_id, roles
 * "ps-hb-server" / "ps-hb-client"), which carries nothing but that hello and beats (HELLO of kind
 * PS_HELLO_HEARTBEAT, no payload, count = the worker's interval in ms). Every decision is one of
 * ps_hbv_act_t; a refusal carries the error code and the text the server logs and answers. */
#ifndef SB_PS_HB_SRV_H
#define SB_PS_HB_SRV_H
#include <stddef.h>
#include <stdint.h>
#include "core/auth.h"
#include "ps/wire.h"

#define PS_HELLO_ANSWER_BYTES (AUTH_NONCE_BYTES + AUTH_MAC_BYTES)   /* the server's answer: its nonce, its MAC */

/* One connection's handshake: a challenge answered (the nonces), its proof accepted. */
typedef struct {
    int chal, authed;
    unsigned char nc[AUTH_NONCE_BYTES], ns[AUTH_NONCE_BYTES];
} ps_hello_t;

/* What the server knows of the job. */
typedef struct {
    const auth_t *auth;   /* the job secret; NULL or unset: none (every connection counts as authenticated) */
    uint64_t job;         /* the job id of every header */
    int timeout_ms;       /* the job's (<= 0: 60 s): a beat's announced interval is clamped to [1, it] */
} ps_hb_srv_t;

typedef enum {
    PS_HBV_DROP,     /* nothing to do, nothing to answer (a beat of a worker that said BYE or was given up on) */
    PS_HBV_REFUSE,   /* refused: answer ERROR (code, why) */
    PS_HBV_ANSWER,   /* a challenge: send HELLO CHAL with out (our nonce, our MAC) */
    PS_HBV_AUTHED,   /* a proof that verified: the connection is authenticated */
    PS_HBV_BEAT      /* a beat: the worker is alive, beating every ival_ms */
} ps_hbv_act_t;

typedef struct {
    ps_hbv_act_t act;
    int code;                                  /* PS_HBV_REFUSE: an ERR_ code (< 0) */
    char why[192];                             /* PS_HBV_REFUSE: what was wrong */
    unsigned char out[PS_HELLO_ANSWER_BYTES];  /* PS_HBV_ANSWER */
    int ival_ms;                               /* PS_HBV_BEAT */
} ps_hbv_t;

/* The worker index (< nworkers) whose heartbeat connection sent a message with routing id ident and
 * decoded header h (of this job), or -1: not heartbeat traffic. */
int ps_hb_of(uint64_t job, int nworkers, const void *ident, size_t idlen, const wire_hdr_t *h);

/* The server's step of a HELLO of kind CHAL or PROOF (h->aux) from worker wi (wrank: its rank, for
 * texts) on its data (hb 0) or heartbeat (hb 1) connection, whose state is hs, with nfr payload frames
 * received, the first being payload[0..plen). A challenge is answered with a fresh nonce and our MAC; a
 * proof over the last challenge (used up either way) authenticates the connection. */
void ps_hello_step(const ps_hb_srv_t *c, int wi, int wrank, int hb, ps_hello_t *hs, const wire_hdr_t *h, int nfr,
                   const void *payload, size_t plen, ps_hbv_t *v);

/* One message on worker wi's heartbeat connection: its hello, then beats; nothing else is accepted. gone:
 * the worker said BYE or was given up on. nfr payload frames were received (truncated: more than the
 * socket layer keeps), the first being payload[0..plen). */
void ps_hb_step(const ps_hb_srv_t *c, int wi, int wrank, ps_hello_t *hs, int gone, const wire_hdr_t *h, int nfr,
                int truncated, const void *payload, size_t plen, ps_hbv_t *v);

#endif
