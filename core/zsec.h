/* zsec.h: ZeroMQ's CURVE security keyed by the job secret, and the ZAP handler that refuses clients
 * without it, for every ZeroMQ socket of a job (the store, the PS, the zmq transport).
 * Keys: for a domain ("store", "ps", "tp"), the server's and the client's CURVE key pairs are
 * crypto_box_seed_keypair of a BLAKE2b keyed by the job secret, so only a holder of the secret can
 * complete the handshake (it must know the server's public key) and pass ZAP (its public key must be
 * the domain's client key). The handshake completes before ZeroMQ accepts one message frame from a
 * peer, so an unauthenticated peer's frames are never buffered, and ZMQ_HANDSHAKE_IVL closes a peer
 * that does not finish it within ZSEC_HANDSHAKE_MS. Without a secret (a->set == 0) nothing is set:
 * the job runs unauthenticated, as auth_require warns. A ZAP handler serves one ZeroMQ context: open
 * it before the context's first server socket binds, close it before zmq_ctx_term. */
#ifndef SB_ZSEC_H
#define SB_ZSEC_H
#include <stdint.h>
#include "core/auth.h"

#define ZSEC_HANDSHAKE_MS 5000       /* a peer that has not finished the CURVE handshake is dropped */
/* CURVE sends a frame as a MESSAGE command: name, nonce, MAC and flags, 33 bytes more than the frame;
 * a ZMQ_MAXMSGSIZE must leave this much room or a full-sized frame closes the connection */
#define ZSEC_OVERHEAD 64
#define ZSEC_REPORT_MS 10000         /* refusals are reported at most once an interval, with a count */

typedef struct zsec zsec_t;

/* Start the ZAP handler of ctx (a thread bound to inproc://zeromq.zap.01). *out = NULL and 0 when a
 * has no secret. what names the owner in its warnings ("store", "ps server 1"). */
int  zsec_open(zsec_t **out, void *ctx, const auth_t *a, const char *what);
/* Refusals not yet reported are reported, the thread stops and its socket closes. */
void zsec_close(zsec_t **z);
/* Make sock a CURVE server of domain (secret key, ZAP domain, handshake deadline); no-op without a
 * secret. Before bind. */
int  zsec_server(const auth_t *a, void *sock, const char *domain);
/* Make sock a CURVE client of domain's server; no-op without a secret. Before connect. */
int  zsec_client(const auth_t *a, void *sock, const char *domain);
/* A watch on a client socket's handshakes (a ZeroMQ monitor over a PAIR in ctx), so a refused
 * handshake is named instead of waited out: zsec_watch before connect, then zsec_wait_handshake
 * returns 0 once a handshake succeeded, ERR_AUTH when the server refused this job's keys (a
 * mechanism mismatch, a ZAP refusal, or ZSEC_FAILS_FATAL handshakes in a row dropped), ERR_TIMEOUT
 * at the deadline (no server answered). */
#define ZSEC_FAILS_FATAL 3
typedef struct zsec_watch zsec_watch_t;
int  zsec_watch(zsec_watch_t **out, void *ctx, void *sock);
int  zsec_wait_handshake(zsec_watch_t *w, int timeout_ms, char *why, size_t whylen);
void zsec_unwatch(zsec_watch_t **w);
/* Clients ZAP refused so far (0 for NULL). */
uint64_t zsec_refused(const zsec_t *z);
/* The domain's key pair for role "server" or "client" (32 bytes each); for tests. */
void zsec_keypair(const auth_t *a, const char *domain, const char *role, unsigned char pk[32], unsigned char sk[32]);

#endif
