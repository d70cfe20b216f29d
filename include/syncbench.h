/* syncbench.h: the public C API of libsyncbench (installed; docs/api.md): a communicator, an engine
 * picked by name (ring, tree, ps) and collectives on host buffers, for frameworks such as PyTorch.
 *
 * Model. Every process of a job creates one communicator (sb_comm_new: from torchrun's environment or
 * explicit rank / world / master), then one engine on it (sb_engine_new, collective: every rank with the
 * same spec). Collectives are called by every worker in the same order with the same count, dtype and
 * op (spec option "check" verifies that on every call). They run in call order on one communication
 * thread of the engine, so an asynchronous allreduce overlaps the caller's work and a blocking call
 * issued after it completes after it. Buffers are host memory, reduced in place.
 *
 * A parameter server with dedicated servers ("ps:servers=S") needs S ranks beside the workers: start
 * workers + S processes; sb_engine_new returns on all of them, sb_engine_is_server says which are
 * servers, and a server calls sb_engine_serve, which returns when every worker freed its engine.
 * Workers are ranks [0, sb_engine_size), servers the ranks after them.
 *
 * Errors. Every function that can fail returns 0 or a negative SB_ERR_* code; sb_strerror names the
 * code and sb_last_error gives this thread's detail of the latest failure ("transport: rank 2 (pid 41)
 * died"). After a collective failed (a peer died, a timeout), the engine is broken: later collectives
 * fail at once with SB_ERR_STATE and the first failure's detail; free it (and the communicator).
 * Every blocking call takes a timeout in milliseconds (<= 0: the communicator's, 300 s by default).
 *
 * Security: as the harness's launcher does, the rendezvous and the engines authenticate with the job
 * secret from SYNCBENCH_JOB_SECRET or SYNCBENCH_JOB_SECRET_FILE (a 0600 file); without one a warning is
 * printed once, and SYNCBENCH_REQUIRE_AUTH=1 refuses to run. Thread safety: one communicator and engine
 * may be used from several threads; a request is waited on by one thread. */
#ifndef SYNCBENCH_H
#define SYNCBENCH_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYNCBENCH_VERSION_MAJOR 0
#define SYNCBENCH_VERSION_MINOR 1
#define SYNCBENCH_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH; the SONAME is libsyncbench.so.MAJOR */
#define SYNCBENCH_VERSION (SYNCBENCH_VERSION_MAJOR * 10000 + SYNCBENCH_VERSION_MINOR * 100 + SYNCBENCH_VERSION_PATCH)

/* The version of the library actually loaded (compare with SYNCBENCH_VERSION at build time). */
int syncbench_version(void);
/* "0.1.0 (git sha)": the version and the source tree it was built from. */
const char *syncbench_version_string(void);

/* Error codes (the values are stable within a major version). */
enum {
    SB_OK = 0,
    SB_ERR_INVAL = -1,      /* invalid argument (bad spec, dtype, count, NULL buffer) */
    SB_ERR_NOMEM = -2,
    SB_ERR_TIMEOUT = -3,    /* a blocking call ran past its timeout */
    SB_ERR_IO = -4,
    SB_ERR_PROTO = -5,      /* malformed or unexpected message */
    SB_ERR_PEER = -6,       /* a peer failed or went away (sb_last_error names it) */
    SB_ERR_SYS = -7,
    SB_ERR_UNSUP = -8,      /* not supported (e.g. a collective on a server rank) */
    SB_ERR_MISMATCH = -9,   /* ranks disagree (count, dtype or op with "check"; world sizes) */
    SB_ERR_RANGE = -10,
    SB_ERR_ADDRINUSE = -11, /* the rendezvous port is taken */
    SB_ERR_STATE = -20,     /* call out of order, or the engine is broken by an earlier failure */
    SB_ERR_AUTH = -21       /* a peer does not know the job secret */
};
/* Text for a code ("timed out"); never NULL. */
const char *sb_strerror(int code);
/* This thread's detail of its latest failed call ("" when none); valid until this thread's next call. */
const char *sb_last_error(void);

typedef enum { SB_F32 = 0, SB_F16 = 1, SB_BF16 = 2 } sb_dtype_t;  /* f16/bf16 accumulate in f32 */
typedef enum { SB_SUM = 0, SB_AVG = 1 } sb_op_t;                  /* AVG: the sum / workers */

typedef struct sb_comm sb_comm_t;
typedef struct sb_engine sb_engine_t;
typedef struct sb_req sb_req_t;

/* How a communicator finds the others. Zero-initialised (or NULL) means: from the environment. */
typedef struct {
    int rank, world;          /* >= 0: explicit; -1 (or both 0 from a zeroed struct): from RANK / WORLD_SIZE
                               * (torchrun), OMPI_COMM_WORLD_* (mpirun) or SLURM_* (srun) */
    const char *init_method;  /* "tcp://HOST:PORT" (rank 0's host), "file:///shared/dir", or NULL / "env://":
                               * MASTER_ADDR and SYNCBENCH_MASTER_PORT, else MASTER_PORT + 1 (torchrun's own
                               * store holds MASTER_PORT) */
    int timeout_ms;           /* the default of every blocking call; <= 0: 300000 */
    const char *transport;    /* "auto" (NULL: shared memory within a host, TCP across), "shm", "tcp", "zmq" */
} sb_comm_cfg_t;

/* Join the job: blocks until every rank joined (or the timeout). 0 or an SB_ERR_*. */
int  sb_comm_new(sb_comm_t **comm, const sb_comm_cfg_t *cfg);
/* Leave: with no failure, meets the other ranks once more (bounded); NULL-safe, sets *comm to NULL. */
void sb_comm_free(sb_comm_t **comm);
int  sb_comm_rank(const sb_comm_t *comm);        /* this process's rank in [0, world) */
int  sb_comm_world(const sb_comm_t *comm);       /* every process, servers included */
int  sb_comm_local_rank(const sb_comm_t *comm);  /* among the ranks on this host (measured) */
int  sb_comm_local_world(const sb_comm_t *comm);
/* Every rank of the communicator (servers included) meets. */
int  sb_comm_barrier(sb_comm_t *comm, int timeout_ms);

/* An engine on comm (collective). spec: "NAME[:OPT[=VALUE],...]": NAME ring, tree or ps; OPT one of the
 * engine's options, with or without its "NAME-" prefix ("ring:algo=ring", "ps:servers=2",
 * "ps:colocate,mode=ssp:2", "ps:partition-kb=1024"), or "check" (every collective first verifies that
 * the workers agree on count, dtype and op: a mismatch is SB_ERR_MISMATCH, not a wrong sum). An unknown
 * name or option is SB_ERR_INVAL with the valid ones in sb_last_error. The communicator must outlive
 * the engine; one engine per communicator at a time. */
int  sb_engine_new(sb_engine_t **eng, sb_comm_t *comm, const char *spec, int timeout_ms);
/* Waits for the collectives in flight (bounded), then leaves; NULL-safe, sets *eng to NULL. */
void sb_engine_free(sb_engine_t **eng);
const char *sb_engine_name(const sb_engine_t *eng);   /* "ring", "tree", "ps" */
int  sb_engine_rank(const sb_engine_t *eng);          /* worker rank; on a server its communicator rank */
int  sb_engine_size(const sb_engine_t *eng);          /* workers */
int  sb_engine_is_server(const sb_engine_t *eng);     /* 1 on a dedicated PS server rank */
/* A server rank serves until every worker freed its engine (or failed: the error names it). */
int  sb_engine_serve(sb_engine_t *eng);

/* Collectives among the workers (a server rank gets SB_ERR_UNSUP). buf: count elements of dtype,
 * reduced in place; count 0 is allowed and moves nothing. In a world of one (sb_comm_world 1) every
 * collective is done when it returns, buf untouched (its own sum and average), and an async allreduce's
 * request is done at birth. */
int  sb_allreduce(sb_engine_t *eng, void *buf, size_t count, sb_dtype_t dtype, sb_op_t op, int timeout_ms);
/* The same, queued: returns at once with *req; buf must stay valid and untouched until sb_wait says
 * done. timeout_ms bounds the collective itself once it starts. */
int  sb_allreduce_async(sb_engine_t *eng, void *buf, size_t count, sb_dtype_t dtype, sb_op_t op, int timeout_ms,
                        sb_req_t **req);
/* Wait up to timeout_ms for req: the collective's result (0 or SB_ERR_*) once it is done (sb_test is then
 * 1; waiting again returns the same), or SB_ERR_TIMEOUT with sb_test 0 when the wait itself ran out. */
int  sb_wait(sb_req_t *req, int timeout_ms);
/* 1 when req is done, 0 when not. */
int  sb_test(const sb_req_t *req);
/* Free a request: a done one at once; a pending one is handed to the communication thread, which frees it
 * when it completes (a queued collective cannot be taken back; buf must stay valid until then). NULL-safe. */
void sb_req_free(sb_req_t **req);
/* root's nbytes of buf end up in buf on every worker, bit for bit (any data). */
int  sb_broadcast(sb_engine_t *eng, void *buf, size_t nbytes, int root, int timeout_ms);
/* The workers meet (after every collective queued before it). */
int  sb_barrier(sb_engine_t *eng, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
