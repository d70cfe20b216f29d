/* optim_dev.h: core/optim.h on device arrays, in plain C, for the allreduce step machinery (arstep)
 * and the trainer's local mode on a GPU: the same optimizers with the same state layout (momentum
 * buffer; Adam's m and v), zero-initialised on the device, plus the step's helpers: a non-finite
 * check and dtype conversion of device buffers, and making a device current on a thread. Results
 * equal core/optim.c's bit for bit on the same inputs (core/cuda/optim.h says how).
 *
 * Checkpoints: optim_dev_state copies the device state into host buffers it owns and returns those;
 * the caller may read them (save) or overwrite them (resume): the host copy is uploaded back to the
 * device before the next optim_dev_step (so the returned buffers are a snapshot, valid until the next
 * optim_dev_state or destroy). Without CUDA (make CUDA=0) every call returns ERR_UNSUP "built without
 * CUDA". Calls run on the calling thread's current device and wait for their work (bounded). */
#ifndef SB_OPTIM_DEV_H
#define SB_OPTIM_DEV_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/optim.h"

typedef struct optim_dev optim_dev_t;

/* State for count parameters on the current device (dev_malloc: counted in dev_mem_stats). */
int    optim_dev_new(optim_dev_t **self_p, const optim_cfg_t *cfg, size_t count);
void   optim_dev_destroy(optim_dev_t **self_p);
/* optim_step on device pointers: params[0..count) are elements [offset, offset+count) of the range,
 * grad is f32. Returns when the update is done (or ERR_TIMEOUT after timeout_ms; <= 0: 60 s). */
int    optim_dev_step(optim_dev_t *self, float *params, const float *grad, size_t offset, size_t count,
                      float grad_scale, float lr, uint64_t step, int timeout_ms);
size_t optim_dev_state_bytes(const optim_dev_t *self);    /* device bytes of state */
/* Host copies of the state (see above): nbuf buffers of count floats. */
int    optim_dev_state(optim_dev_t *self, float **bufs, int *nbuf, size_t *count);

/* 1 in *bad when any of the n device elements of x (dtype dt) is Inf or NaN, else 0. Waits. */
int    optim_dev_nonfinite(const void *x, size_t n, dtype_t dt, int *bad, int timeout_ms);
/* Device dst = src converted (dt_convert's rounding). Waits. */
int    optim_dev_convert(void *dst, dtype_t ddt, const void *src, dtype_t sdt, size_t n, int timeout_ms);
/* Make device current on the calling thread (a thread starts on device 0: engines' helper threads
 * call this before touching device memory). */
int    optim_dev_use(int device);

#endif
