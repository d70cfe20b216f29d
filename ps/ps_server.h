/* ps_server.h: one parameter server (private to ps/): a ROUTER socket, the partitions it owns (their
 * parameters, optimizer state and aggregation buffers) and the consistency logic. Runs either as the
 * main loop of a dedicated server rank (ps_server_run) or as an actor thread inside a worker
 * (ps_server_start; the owner stops it over an inproc PAIR pipe in ps_server_destroy). */
#ifndef SB_PS_SERVER_H
#define SB_PS_SERVER_H
#include <stddef.h>
#include <stdint.h>
#include "core/comm.h"

typedef struct ps_server ps_server_t;

typedef struct {
    void  *zctx;            /* ZeroMQ context (shared with the owner in colocated mode) */
    comm_t *comm;           /* for the listen address, the store and the job id */
    int    index;           /* server index in [0, nservers) */
    int    nservers, nworkers;
    int    mode, ssp_k;     /* PS_SYNC / PS_ASYNC / PS_SSP */
    int    timeout_ms;
    size_t part_bytes;
    uint64_t job;           /* job id in every header (ps_job_id) */
    unsigned gen;           /* engine instance number: store keys "ps/<gen>/srv/<index>" */
    int    local_worker;    /* colocated: rank of the worker in this process (its traffic is local); -1 */
    int    van;             /* PS_VAN_*: which endpoints to bind (auto: tcp and ipc, tcp: tcp, ipc: ipc) */
    int    yield_us;        /* before blocking for a message, poll and yield the core this long (ps_yield_us) */
    const int *wrank;       /* the rank of each of its nworkers workers, for messages (NULL: worker w is rank w);
                             * with --ps-local-agg its workers are the machines' leaders */
    int    ndiv;            /* workers a sum averages over (0: nworkers; --ps-local-agg: every worker) */
} ps_server_cfg_t;

typedef struct {
    uint64_t bytes_sent, bytes_received;   /* network bytes (local worker's traffic excluded) */
    uint64_t rejected;
    uint64_t skipped;                      /* updates skipped for non-finite gradients */
    uint64_t early_replies;                /* PARAMS sent while that worker still owed pushes of another
                                            * partition of the same round here (pipelining) */
    size_t   mem_bytes, mem_peak_bytes;    /* params + optimizer state + aggregation buffers */
} ps_server_stats_t;

/* Bind tcp://ADDR:* (and an inproc endpoint for the local worker), publish the tcp endpoint in the
 * store under "ps/<gen>/srv/<index>". */
int  ps_server_new(ps_server_t **self_p, const ps_server_cfg_t *cfg);
/* Serve until every worker said BYE (or was declared dead). Returns 0, or the failure (ERR_PEER
 * naming the dead worker in sync mode). */
int  ps_server_run(ps_server_t *self);
/* Run the loop on a thread (colocated mode). */
int  ps_server_start(ps_server_t *self);
/* Stops the thread (it first waits, bounded by the timeout, for every worker's BYE so that replies in
 * flight are delivered), closes the sockets, frees everything. */
void ps_server_destroy(ps_server_t **self_p);
const char *ps_server_inproc(const ps_server_t *self);
void ps_server_stats(ps_server_t *self, ps_server_stats_t *out);
/* How long a PS thread polls and yields its core before blocking for a message: 200 us when all
 * ranks are on this host and outnumber its cores, else 0; SYNCBENCH_PS_YIELD_US overrides. */
int  ps_yield_us(const comm_t *comm);

#endif
