/* ncclw_nocuda.c: the NCCL wrapper of a host-only build: every constructor says it was built without
 * CUDA/NCCL. */
#include "core/ncclw.h"
#include "core/err.h"

int ncclw_new(ncclw_t **self_p, comm_t *comm, int device, const char *algo, int timeout_ms)
{
    (void)comm; (void)device; (void)algo; (void)timeout_ms;
    if (self_p) *self_p = NULL;
    return err_set(ERR_UNSUP, "built without CUDA/NCCL");
}

int ncclw_allreduce(ncclw_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op, int timeout_ms)
{
    (void)self; (void)send; (void)recv; (void)count; (void)dt; (void)op; (void)timeout_ms;
    return err_set(ERR_UNSUP, "built without CUDA/NCCL");
}

void *ncclw_stream(ncclw_t *self) { (void)self; return NULL; }
const char *ncclw_algo(ncclw_t *self) { (void)self; return "none (built without CUDA/NCCL)"; }
size_t ncclw_bytes(ncclw_t *self) { (void)self; return 0; }
void ncclw_destroy(ncclw_t **self_p) { if (self_p) *self_p = NULL; }
