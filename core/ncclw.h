/* ncclw.h: a NCCL communicator built from our bootstrap, shared by the engines that offer NCCL
 * (ring: NCCL_ALGO=Ring; tree: NCCL_ALGO=Tree). It lives in core/ so that neither engine includes
 * the other; each calls it directly with its algorithm.
 *
 * - the ncclUniqueId of rank 0 travels through our store (comm_bcast_small), with rank 0's failure
 *   text if it could not make one, so no rank waits for an id that never comes;
 * - the communicator is non-blocking (ncclConfig_t.blocking = 0): init, enqueue and completion are
 *   polled against a deadline, and on timeout or any asynchronous error ncclCommAbort tears it down,
 *   so a dead rank turns into ERR_TIMEOUT / ERR_NCCL on the others instead of a hang; after that
 *   every call returns ERR_STATE;
 * - NCCL_ALGO is process-wide and NCCL's threads read it, so it is set ONCE per process, before the
 *   process's first NCCL call, and never changed or unset (ncclConfig_t has no per-communicator
 *   algorithm): ncclw_algo_init(algo) does it, ncclw_new calls it first; a launcher may call it at rank
 *   start-up, before any thread exists. The user's NCCL_ALGO, when set, wins (ncclw_algo() says so). A
 *   second communicator asking for another algorithm in the same process gets ERR_STATE;
 * - at world 1 NCCL runs its single-rank path (a local copy) whatever NCCL_ALGO says: ncclw_algo()
 *   labels it so, and "ring nccl" and "tree nccl" measure the same thing there;
 * - collectives run on a dedicated non-blocking stream; buffers are device pointers on `device`,
 *   already written (the producer's stream synchronized, or use ncclw_stream() to order work);
 * - two ranks of one node on the same GPU are refused up front (NCCL cannot do it) with ERR_UNSUP.
 * Without CUDA/NCCL (make CUDA=0) ncclw_new returns ERR_UNSUP "built without CUDA/NCCL". */
#ifndef SB_NCCLW_H
#define SB_NCCLW_H
#include <stddef.h>
#include "core/comm.h"
#include "core/dtype.h"

typedef struct ncclw ncclw_t;

/* Collective over comm. device: this rank's CUDA device (made current). algo: "Ring", "Tree", ... or
 * NULL for NCCL's own choice. Errors: ERR_NODEV, ERR_UNSUP, ERR_NCCL (with NCCL's text), ERR_TIMEOUT. */
int  ncclw_new(ncclw_t **self_p, comm_t *comm, int device, const char *algo, int timeout_ms);
/* Blocking allreduce (in place when send == recv): returns when recv holds the result. */
int  ncclw_allreduce(ncclw_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                     int timeout_ms);
/* Fix NCCL_ALGO for this process (see above): the first call sets it to algo (NULL: leave it to NCCL)
 * unless the user set NCCL_ALGO; later calls return 0 for the same choice (or under the user's value)
 * and ERR_STATE for another. No GPU needed (both builds). */
int  ncclw_algo_init(const char *algo);
/* The text ncclw_algo() reports for a communicator of world ranks asking for algo, given the process's
 * choice: "nccl Tree", "nccl Ring (NCCL_ALGO from the user)", "nccl Ring, world 1: a local copy ...". */
void ncclw_algo_label(const char *algo, int world, char *out, size_t len);
/* The communicator's stream (cudaStream_t as void *). */
void *ncclw_stream(ncclw_t *self);
/* What runs: e.g. "nccl Ring" or "nccl Tree,Ring (NCCL_ALGO from the user)". */
const char *ncclw_algo(ncclw_t *self);
/* Bytes handed to NCCL so far (send side, count * dtype size per call). */
size_t ncclw_bytes(ncclw_t *self);
void ncclw_destroy(ncclw_t **self_p);

#endif
