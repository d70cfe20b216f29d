/* ncclw_cuda.c: the NCCL communicator of ncclw.h: unique id through our store, non-blocking init with
 * NCCL_ALGO fixed once per process before the first NCCL call (core/ncclw.c), allreduce on a dedicated
 * stream, deadline polling, abort on timeout or asynchronous error. */
#include "core/ncclw.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct ncclw {
    comm_t *comm;
    int device;
    ncclComm_t nc;
    cudaStream_t stream;
    int aborted;
    size_t bytes;
    char algo[160];
};

static int s_nccl_err(ncclw_t *self, ncclResult_t r, const char *what)
{
    const char *last = self && self->nc ? ncclGetLastError(self->nc) : NULL;
    return err_set(ERR_NCCL, "%s: %s%s%s", what, ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

static void s_abort(ncclw_t *self)
{
    if (self->nc && !self->aborted) {
        ncclCommAbort(self->nc);
        self->aborted = 1;
        self->nc = NULL;
    }
}

static void s_pause(unsigned spins)
{
    if (spins < 2000) sched_yield();
    else usleep(spins < 20000 ? 20 : 200);
}

/* Poll until the communicator's pending operation (init, enqueue, finalize) leaves ncclInProgress. */
static int s_settle(ncclw_t *self, uint64_t dl, int timeout_ms, const char *what)
{
    for (unsigned spins = 0;; spins++) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(self->nc, &st);
        if (r != ncclSuccess) st = r;
        if (st == ncclSuccess) return 0;
        if (st != ncclInProgress) {
            int rc = s_nccl_err(self, st, what);
            s_abort(self);
            return rc;
        }
        if (deadline_passed(dl)) {
            s_abort(self);
            return err_set(ERR_TIMEOUT, "%s: NCCL still in progress after %d ms (communicator aborted)", what,
                           timeout_ms);
        }
        s_pause(spins);
    }
}

static int s_map_dtype(dtype_t dt, ncclDataType_t *out)
{
    switch (dt) {
    case DT_F32: *out = ncclFloat32; return 0;
    case DT_F16: *out = ncclFloat16; return 0;
    case DT_BF16: *out = ncclBfloat16; return 0;
    default: return err_set(ERR_INVAL, "ncclw: dtype %d", (int)dt);
    }
}

typedef struct {
    int ok;
    char why[124];
    ncclUniqueId id;
} s_idmsg_t;

typedef struct {
    int node;
    char bus[32];
} s_place_t;

/* NCCL refuses two ranks on one GPU; say so before it does, the same way on every rank. */
static int s_check_placement(comm_t *comm, int device, int timeout_ms)
{
    s_place_t mine, *all = calloc((size_t)comm->world, sizeof *all);
    if (!all) return err_set(ERR_NOMEM, "ncclw: placement table");
    memset(&mine, 0, sizeof mine);
    mine.node = comm->node;
    if (dev_name(device, NULL, 0, mine.bus, sizeof mine.bus) < 0) snprintf(mine.bus, sizeof mine.bus, "cuda:%d", device);
    int rc = comm_allgather(comm, &mine, sizeof mine, all, timeout_ms);
    for (int a = 0; rc == 0 && a < comm->world; a++)
        for (int b = a + 1; rc == 0 && b < comm->world; b++)
            if (all[a].node == all[b].node && strcmp(all[a].bus, all[b].bus) == 0)
                rc = err_set(ERR_UNSUP,
                             "NCCL cannot run two ranks on one GPU (ranks %d and %d both use %s on node %d); "
                             "use one rank per GPU, or the GPU-direct tree (--tree-impl gpu) to share a GPU",
                             a, b, all[a].bus, all[a].node);
    free(all);
    return rc;
}

int ncclw_new(ncclw_t **self_p, comm_t *comm, int device, const char *algo, int timeout_ms)
{
    *self_p = NULL;
    char why[256];
    int n = dev_count(why, sizeof why);
    if (n <= 0) return err_set(ERR_NODEV, "NCCL needs a CUDA device: %s", why);
    if (device < 0 || device >= n)
        return err_set(ERR_NODEV, "NCCL: device %d does not exist (%d visible)", device, n);
    uint64_t dl = deadline_in(timeout_ms);
    /* before ncclGetUniqueId, the process's first NCCL call that starts threads */
    const char *user = getenv("NCCL_ALGO");
    if (user && *user && algo && *algo && strcasecmp(user, algo) != 0)
        LOG_W("NCCL_ALGO=%s from the environment overrides the %s algorithm", user, algo);
    CHECK(ncclw_algo_init(algo));
    cudaError_t ce = cudaSetDevice(device);
    if (ce != cudaSuccess) return err_set(ERR_CUDA, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    CHECK(s_check_placement(comm, device, deadline_left_ms(dl)));

    s_idmsg_t msg;
    memset(&msg, 0, sizeof msg);
    if (comm->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&msg.id);
        msg.ok = r == ncclSuccess;
        if (!msg.ok) snprintf(msg.why, sizeof msg.why, "ncclGetUniqueId on rank 0: %s", ncclGetErrorString(r));
    }
    CHECK(comm_bcast_small(comm, &msg, sizeof msg, 0, deadline_left_ms(dl)));
    if (!msg.ok) return err_set(ERR_NCCL, "%s", msg.why);

    ncclw_t *self = calloc(1, sizeof *self);
    if (!self) return err_set(ERR_NOMEM, "ncclw_new");
    self->comm = comm;
    self->device = device;
    ce = cudaStreamCreateWithFlags(&self->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) {
        free(self);
        return err_set(ERR_CUDA, "cudaStreamCreateWithFlags: %s", cudaGetErrorString(ce));
    }

    ncclw_algo_label(algo, comm->world, self->algo, sizeof self->algo);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&self->nc, comm->world, msg.id, comm->rank, &cfg);
    int rc = 0;
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = s_nccl_err(self, r, "ncclCommInitRankConfig");
        if (self->nc) s_abort(self);
    } else {
        rc = s_settle(self, dl, timeout_ms, "NCCL communicator init");
    }
    if (rc < 0) {
        err_note(rc, __FILE__, __LINE__, "ncclCommInitRankConfig");
        ncclw_destroy(&self);
        return rc;
    }
    LOG_D("ncclw: rank %d/%d on cuda:%d, %s", comm->rank, comm->world, device, self->algo);
    *self_p = self;
    return 0;
}

int ncclw_allreduce(ncclw_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op, int timeout_ms)
{
    if (!self) return err_set(ERR_INVAL, "ncclw_allreduce: no communicator");
    if (self->aborted || !self->nc)
        return err_set(ERR_STATE, "NCCL communicator was aborted after an earlier failure");
    ncclDataType_t ndt = ncclFloat32;
    CHECK(s_map_dtype(dt, &ndt));
    if (op != OP_SUM && op != OP_AVG) return err_set(ERR_INVAL, "ncclw: op %d", (int)op);
    if (count == 0) return 0;
    uint64_t dl = deadline_in(timeout_ms);
    ncclResult_t r = ncclAllReduce(send, recv, count, ndt, op == OP_AVG ? ncclAvg : ncclSum, self->nc, self->stream);
    if (r != ncclSuccess && r != ncclInProgress) {
        int rc = s_nccl_err(self, r, "ncclAllReduce");
        s_abort(self);
        return rc;
    }
    if (r == ncclInProgress) CHECK(s_settle(self, dl, timeout_ms, "ncclAllReduce enqueue"));
    self->bytes += count * dt_size(dt);
    for (unsigned spins = 0;; spins++) {
        cudaError_t ce = cudaStreamQuery(self->stream);
        if (ce == cudaSuccess) return 0;
        if (ce != cudaErrorNotReady) {
            s_abort(self);
            return err_set(ERR_CUDA, "NCCL allreduce stream: %s", cudaGetErrorString(ce));
        }
        if ((spins & 63) == 0) {
            ncclResult_t st = ncclSuccess;
            ncclCommGetAsyncError(self->nc, &st);
            if (st != ncclSuccess && st != ncclInProgress) {
                int rc = s_nccl_err(self, st, "ncclAllReduce");
                s_abort(self);
                return rc;
            }
        }
        if (deadline_passed(dl)) {
            s_abort(self);
            return err_set(ERR_TIMEOUT,
                           "NCCL allreduce of %zu %s not done after %d ms (a peer died or stalled); communicator aborted",
                           count, dt_name(dt), timeout_ms);
        }
        s_pause(spins);
    }
}

void *ncclw_stream(ncclw_t *self) { return self ? (void *)self->stream : NULL; }
const char *ncclw_algo(ncclw_t *self) { return self ? self->algo : "none"; }
size_t ncclw_bytes(ncclw_t *self) { return self ? self->bytes : 0; }

void ncclw_destroy(ncclw_t **self_p)
{
    if (!self_p || !*self_p) return;
    ncclw_t *self = *self_p;
    if (self->nc && !self->aborted) {
        int tmo = self->comm && self->comm->timeout_ms > 0 ? self->comm->timeout_ms : 30000;
        uint64_t dl = deadline_in(tmo);
        ncclResult_t r = ncclCommFinalize(self->nc);
        int ok = (r == ncclSuccess || r == ncclInProgress) && s_settle(self, dl, tmo, "ncclCommFinalize") == 0;
        if (ok) {
            ncclCommDestroy(self->nc);
            self->nc = NULL;
        } else {
            s_abort(self);
        }
    }
    if (self->stream) cudaStreamDestroy(self->stream);
    free(self);
    *self_p = NULL;
}
