/* tp_sock.h: the transport's plain-TCP backend (internal to core/tp.c): one TCP connection per pair
 * of ranks, length-prefixed segments, and a progress engine without helper threads. */
#ifndef SB_TP_SOCK_H
#define SB_TP_SOCK_H
#include <stddef.h>
#include <stdint.h>

struct comm;
typedef struct tp_sock tp_sock_t;

/* Listen on this rank's address and publish "ADDR:PORT" under key tp/<prefix>/sock/<rank>. */
int  tp_sock_new(tp_sock_t **self_p, struct comm *comm, const char *prefix, size_t slot_bytes);
void tp_sock_destroy(tp_sock_t **self_p);
int  tp_sock_send_acquire(tp_sock_t *self, int peer, void **buf, int timeout_ms);
/* Returns once the segment is handed to the kernel; receives from every peer progress meanwhile, so
 * two ranks sending to each other never block each other. */
int  tp_sock_send_commit(tp_sock_t *self, int peer, size_t len, int timeout_ms);
int  tp_sock_recv_acquire(tp_sock_t *self, int peer, const void **buf, size_t *len, int timeout_ms);
int  tp_sock_recv_release(tp_sock_t *self, int peer);
uint64_t tp_sock_rejected(tp_sock_t *self);

#endif
