/* board.h: a shared-memory "board" for latency-bound collectives among the ranks of one host: every
 * rank owns two buffers (used in alternate rounds) and one round counter in a single shared mapping.
 * A round is one synchronisation: a rank fills its buffer, posts it, and waits until every rank has
 * posted the same round; then it may read every rank's buffer of that round in place. No data moves
 * through the transport's channels and no segment is handed rank to rank: one hand-off per round.
 *
 * Why two buffers are enough: a rank that finished round n saw every rank post n, and a rank posts n
 * only after it finished reading round n-1, so when it writes its round n+1 buffer (the parity of
 * n-1) nobody reads that buffer any more. The buffers of round n stay valid until this rank's next
 * board_exchange.
 *
 * Waiting spins briefly when every rank has a core, yields the core when ranks outnumber cores, then
 * sleeps on a futex (woken only when someone sleeps); sleeps are sliced so the deadline and the peers'
 * liveness (their pids) are checked: a dead rank gives ERR_PEER, a slow one ERR_TIMEOUT. */
#ifndef SB_BOARD_H
#define SB_BOARD_H
#include <stddef.h>
#include "core/comm.h"

typedef struct board board_t;

/* Collective over every rank of comm; every rank must be on this host and the transport towards every
 * peer must be shared memory ("shm"), else ERR_UNSUP with a reason. `bytes`: the capacity of one
 * rank's buffer (rounded up to 64). The mapping's name starts with the transport's run name, so
 * tp_cleanup_job removes it if a rank dies before every rank opened it. */
int  board_new(board_t **self_p, comm_t *comm, size_t bytes, int timeout_ms);
void board_destroy(board_t **self_p);
/* Capacity of one rank's buffer. */
size_t board_bytes(const board_t *self);
/* 1 when board_new can work on comm (one host, shared memory to every peer, at least 2 ranks). */
int  board_possible(comm_t *comm);
/* This rank's buffer for its next round: fill up to board_bytes(), then board_exchange. */
void *board_mine(board_t *self);
/* Post this rank's buffer and wait until every rank posted this round; then (*all)[r] points at rank r's
 * buffer of the round (*all has one entry per rank), valid until this rank's next board_exchange. */
int  board_exchange(board_t *self, const void *const **all, int timeout_ms);

#endif
