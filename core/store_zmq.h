/* store_zmq.h: private to core/store_zmq*.c: the tcp:// / env:// store's wire helpers, shared by the
 * server (store_zmq_srv.c: the map, the handlers, the thread on rank 0) and the client (store_zmq.c).
 * The protocol is described at the top of core/store_zmq.c. */
#ifndef SB_STORE_ZMQ_H
#define SB_STORE_ZMQ_H
#include "core/boot.h"
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define STORE_MAXMSG ((int64_t)STORE_VAL_MAX + 4096)
#define STORE_RCVHWM 64             /* messages queued per connection: one request in flight per client */
#define STORE_SNDHWM 256
#define STORE_UNAUTH_MS 5000        /* a connection no joined rank spoke from within this is closed (core/store_conn.h) */

static inline void szmq_put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static inline void szmq_put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static inline uint32_t szmq_get32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static inline uint64_t szmq_get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

#define MP_MAX 6
typedef struct { zmq_msg_t m[MP_MAX]; int n, extra; } mp_t;

/* Receive one whole multipart message (frames past MP_MAX are counted in extra and dropped): 0 or -1. */
int  szmq_mp_recv(void *sock, mp_t *mp, int flags);
void szmq_mp_close(mp_t *mp);
/* 1: readable, 0: not within ms, -1: error. */
int  szmq_poll_in(void *sock, int ms);

/* The server thread on rank 0 (store_zmq_srv.c). */
typedef struct server server_t;
int  szmq_server_start(server_t **out, void *ctx, const boot_cfg_t *cfg);
/* Stop it: graceful (abort 0) waits, bounded by the timeout, until every joined rank has left; abort 1
 * stops at once. Frees the server. */
void szmq_server_stop(server_t **s, int abort);

#endif
