/* store_zmq_int.h: internal entry points of the store server (core/store_zmq_srv.c) for its fuzz target
 * (fuzz/fuzz_store.c): the server's state without a socket or thread, fed one request at a time through
 * the real validation (s_handle) and handlers; replies go nowhere. Not for use elsewhere. */
#ifndef SB_STORE_ZMQ_INT_H
#define SB_STORE_ZMQ_INT_H
#include <stddef.h>
#include "core/auth.h"

struct server;

/* A server for job (world ranks); auth NULL or unset: no secret. 0 or ERR_NOMEM / ERR_INVAL. */
int  store_zmq_srv_new(struct server **out, int world, const char *job, const auth_t *auth);
/* One request as the ROUTER delivers it: frames[0] is the sender's routing id, then op, seq, key, value
 * (any count, any sizes: what a peer can send). Answers due waiters afterwards, as the server loop does. */
void store_zmq_srv_feed(struct server *s, const void *const *frames, const size_t *lens, int nframes);
/* Registered ranks (HELLO accepted) and keys held. */
int  store_zmq_srv_joined(const struct server *s);
size_t store_zmq_srv_keys(const struct server *s);
void store_zmq_srv_destroy(struct server **s);

#endif
