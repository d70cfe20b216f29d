/* comm.h: a communicator: the ranks of one job, their nodes, the rendezvous store and the
 * point-to-point transport. Small collectives here (barrier, allgather of small blobs) go through the
 * store; bulk data goes through the transport (tp.h), which engines use directly. */
#ifndef SB_COMM_H
#define SB_COMM_H
#include <stddef.h>
#include "core/boot.h"
#include "core/tp.h"

typedef struct comm {
    int rank, world;
    int local_rank, local_world;  /* measured: ranks sharing this host */
    int node, nnodes;             /* node index (ordered by lowest rank), number of nodes */
    int *node_of;                 /* node index of every rank */
    int timeout_ms;
    int no_yield;                 /* comm_opts_t's shm_no_yield (the transport's and board.h's waits) */
    char job[64];
    boot_cfg_t boot;
    store_t *store;
    tp_t *tp;
    unsigned long seq;            /* round counter for store-based collectives of all ranks */
    unsigned long gseq;           /* round counter for collectives of a leading group of ranks */
} comm_t;

typedef struct {
    const char *transport;   /* "auto" (shm within a node, tcp across), "shm", "tcp", "zmq" */
    size_t shm_slot_bytes;   /* shared-memory channel slot size; 0 = default */
    int    shm_slots;        /* slots per channel; 0 = default */
    int    shm_no_yield;     /* 1: ranks outnumbering cores sleep at once in a wait instead of yielding first
                              * (for callers that compute beside the communication: see tp_opts_t) */
} comm_opts_t;

int  comm_new(comm_t **self_p, const boot_cfg_t *cfg, const comm_opts_t *opts);
void comm_destroy(comm_t **self_p);
/* Destroy after a failure: no final barrier, and no waiting for the other ranks to leave the store. */
void comm_abort(comm_t **self_p);
int  comm_barrier(comm_t *self, int timeout_ms);
/* Every rank contributes len bytes; all[] receives world * len bytes in rank order. */
int  comm_allgather(comm_t *self, const void *mine, size_t len, void *all, int timeout_ms);
/* The same among ranks [0, n) only (e.g. the workers while PS servers serve). */
int  comm_allgather_group(comm_t *self, const void *mine, size_t len, void *all, int n, int timeout_ms);
/* Root's len bytes end up in buf on every rank (small data, through the store). */
int  comm_bcast_small(comm_t *self, void *buf, size_t len, int root, int timeout_ms);

#endif
