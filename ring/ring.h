/* ring.h: the ring allreduce engine: a chunked, pipelined host ring (reduce-scatter + allgather over
 * the transport) and, on GPUs, NCCL. */
#ifndef SB_RING_H
#define SB_RING_H
#include "core/engine.h"
#include "core/board.h"

extern const engine_ops_t ring_engine;

/* The engine's options (ring_small.c): which algorithm runs on host buffers, and the size below which
 * auto picks the one-shot. */
enum { RING_ALGO_AUTO, RING_ALGO_RING, RING_ALGO_ONESHOT };
#define RING_ONESHOT_KB_DEFAULT 64
#define RING_DEFAULT_SEG_BYTES (256u << 10) /* the host ring's pipelining segment (--seg-kb) */
#define RING_STR_(x) #x
#define RING_STR(x) RING_STR_(x)
#define RING_ONESHOT_KB_DEFAULT_S RING_STR(RING_ONESHOT_KB_DEFAULT)
typedef struct {
    int    algo;              /* RING_ALGO_* */
    int    hier;              /* --ring-hier: the hierarchical allreduce on host buffers across machines */
    size_t oneshot_max;       /* bytes: the board's buffer size (a forced one-shot's piece); with
                               * oneshot_set, also where auto stops running the one-shot */
    int    oneshot_set;       /* --ring-oneshot-kb given; else auto stops at ring_oneshot_auto_max */
} ring_opts_t;
/* Where auto hands over from the one-shot to the ring without --ring-oneshot-kb: 16 KiB up to 4 ranks,
 * 32 KiB from 8 (the one-shot reads (P - 1) n per rank, the ring's latency grows with P; measured
 * crossovers on a 2-core host: results/small_messages.txt), never above the board. */
size_t ring_oneshot_auto_max(const ring_opts_t *o, int world);
extern const engine_opt_t ring_options[];
void ring_opts_init(void *opts);
int  ring_opt_set(void *opts, const char *name, const char *value);
int  ring_algo_parse(const char *s);          /* RING_ALGO_* or -1 */
const char *ring_algo_name(int algo);

/* The one-shot allreduce through a shared-memory board (ring_small.c): one synchronisation per
 * board-sized piece; every rank sums the P inputs in rank order (identical results everywhere). The bytes
 * every peer reads are noted per peer (tp_note_traffic), not in tp_counters. */
int ring_oneshot_allreduce(board_t *board, comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                           dtype_t dt, redop_t op, int timeout_ms);

/* The host ring collective itself (reused by tests and the bench): out-of-place allowed (sendbuf may
 * equal recvbuf); seg_bytes 0 = default. */
int ring_allreduce_host(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt,
                        redop_t op, size_t seg_bytes, int timeout_ms);
/* The same ring over P of the communicator's ranks, in the order ranks[0 .. P-1] (NULL: ranks 0 .. P-1),
 * which every one of them must call alike; ranks outside it take no part. OP_AVG divides by avg_of (0: P;
 * the hierarchical allreduce's leaders sum every rank's input and divide by the world). dl: the deadline
 * of the whole call (deadline_in). */
int ring_allreduce_ranks(comm_t *comm, const int *ranks, int P, const void *sendbuf, void *recvbuf, size_t count,
                         dtype_t dt, redop_t op, int avg_of, size_t seg_bytes, uint64_t dl);
/* The pipelining segment in elements: seg_bytes (0: RING_DEFAULT_SEG_BYTES), at most a transport slot towards
 * peer, a multiple of 16 elements from 64 on, at least 1. */
size_t ring_seg_elems(comm_t *comm, int peer, size_t seg_bytes, size_t esz);

/* The hierarchical allreduce (ring_hier.c, --ring-hier; the Horovod / NCCL design) on host buffers: the
 * machines are comm->node_of's nodes, each led by its lowest rank. Within each machine a pipelined chain
 * reduces every rank's input to the leader (highest rank first: x_0 + (x_1 + (... + x_{L-1}))); the leaders
 * run the ring above among themselves, in node order; a pipelined chain broadcasts the leader's result within
 * its machine (copies: every rank ends with the same bits). Intra-machine steps use the communicator's
 * transport (shared memory under auto). ring_hier_applies: more than one machine and fewer machines than
 * ranks (else it is the flat ring, which ring_hier_allreduce then runs). */
int ring_hier_applies(const comm_t *comm);
int ring_hier_allreduce(comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, dtype_t dt, redop_t op,
                        size_t seg_bytes, int timeout_ms);

/* The ring's schedule, which ring_allreduce_host executes and `harness explain` prints. The buffer of
 * count elements is cut into world chunks (ring_chunk_start/len). Step 0 .. world-2 is the
 * reduce-scatter, step world-1 .. 2 world-3 the allgather; at every step each rank sends one chunk to
 * rank+1 and receives one from rank-1: in the reduce-scatter it adds the received chunk to its own
 * values of that chunk (the last reduce-scatter step completes chunk rank+1 on rank), in the
 * allgather it stores it. (The engine works segment by segment, each segment through every step.) */
typedef struct {
    int allgather;        /* 0: reduce-scatter step, 1: allgather step */
    int to, from;         /* rank + 1, rank - 1 */
    int send_chunk;       /* the chunk this rank sends to `to` */
    int recv_chunk;       /* the chunk it receives from `from` (reduced into its own, or stored) */
} ring_step_t;
void   ring_schedule(int world, int rank, int step, ring_step_t *out);
size_t ring_chunk_start(size_t count, int world, int c);
size_t ring_chunk_len(size_t count, int world, int c);
/* ring_sched.c: the engine's schedule entry (engine_ops_t.schedule): the one-shot where the engine takes
 * it at this size, the hierarchical allreduce with --ring-hier on machines of env->gpus_per_node > 1 (more
 * than one), else the ring steps above. */
int ring_sched(const void *opts, const sched_env_t *env, size_t count, size_t esz, sched_t *out);

#endif
