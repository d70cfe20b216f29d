/* dev.h: the CUDA device layer in plain C: how many GPUs are visible (and why none), which one a rank
 * uses, device and pinned-host allocations with accounting, copies, streams with deadline waits, and
 * binding a rank to the CPU cores near its GPU. Streams are passed as `void *` (a cudaStream_t) so
 * callers need no CUDA headers; without CUDA (`make CUDA=0`) every call that needs a device returns
 * ERR_UNSUP with err_set "built without CUDA", and dev_count() returns 0 with that reason.
 *
 * Fork rule: the CUDA driver does not survive fork(). dev_count() therefore counts in a short-lived
 * child process (unless this process already uses CUDA), so a launcher or a test may call it and then
 * fork ranks that each call dev_select(). */
#ifndef SB_DEV_H
#define SB_DEV_H
#include <stddef.h>
#include <stdint.h>

/* Number of CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applied); 0 when built without
 * CUDA, without a driver or without a device, with the reason in why (may be NULL). Cached. */
int  dev_count(char *why, size_t len);

/* --gpus N check for a launcher: 0 when want GPUs exist; else ERR_NODEV with err_set
 * "asked for 4 GPUs but 1 is visible (CUDA_VISIBLE_DEVICES=0); use --procs N for CPU ranks".
 * want < 1 is ERR_INVAL. Fork-safe (uses dev_count). */
int  dev_check_gpus(int want);
/* The same decision from given facts (have visible devices, why none, the CUDA_VISIBLE_DEVICES value
 * or NULL when unset): what dev_check_gpus does, testable without a GPU. */
int  dev_check_gpus_with(int want, int have, const char *why, const char *cvd);

/* Parse a CUDA_VISIBLE_DEVICES value the way the CUDA runtime does: a comma list of ordinals or
 * GPU-/MIG- UUIDs; parsing stops at the first invalid entry ("0,2,-1,1" names 0 and 2); "",
 * "-1" and "NoDevFiles" hide every device. An ordinal past the installed GPUs also ends the list at
 * run time, which only the runtime knows: the result is an upper bound on dev_count(). Fills up to
 * max entries of ids with the ordinals (-2 for a UUID entry) and returns how many devices the list
 * names (<= max). cvd NULL (unset) returns -1. */
int  dev_visible_parse(const char *cvd, int *ids, int max);

/* Choose and set this rank's device: local_rank % dev_count() (several ranks may share one GPU).
 * Returns the device ordinal (>= 0) within the visible set, or a negative error (ERR_NODEV when none).
 * Describes the choice ("cuda:0 (physical 2, NVIDIA H200, 0000:19:00.0)") into desc when non-NULL. */
int  dev_select(int local_rank, char *desc, size_t len);
/* The same among the first ngpus visible devices only (--gpus N with several ranks per GPU: local
 * rank r uses device r % ngpus); ngpus <= 0 means all; ERR_NODEV when fewer than ngpus are visible. */
int  dev_select_of(int local_rank, int ngpus, char *desc, size_t len);
/* The device this process selected, -1 before dev_select. */
int  dev_current(void);
/* Name and PCI bus id of a device ("0000:19:00.0"). */
int  dev_name(int device, char *name, size_t name_len, char *bus, size_t bus_len);

/* Bind the calling process to the cores hwloc reports close to device (hwloc's cudart helpers);
 * describes what was done. ERR_UNSUP when hwloc cannot tell (the caller keeps its binding). */
int  dev_bind_near(int device, char *desc, size_t len);

/* Device memory on the current device, tracked: the project's allocations (current and peak). */
int  dev_malloc(void **p, size_t bytes);
void dev_free(void **p);                 /* NULLs the pointer; safe on NULL */
/* Page-locked host memory (for staging copies), tracked separately. */
int  dev_host_alloc(void **p, size_t bytes);
void dev_host_free(void **p);
/* Copies in any direction (cudaMemcpyDefault: unified addressing tells host from device).
 * dev_memcpy and dev_memset are complete when they return 0: they run on the legacy default stream,
 * which is then synchronized (errors checked), so work queued afterwards on ANY stream (the
 * non-blocking NCCL, IPC-tree and model streams included) sees the copied or filled bytes. They do
 * not wait for other streams: what another stream writes into src or dst must be waited for first
 * (dev_stream_wait; ncclw_allreduce, tree_gpu_allreduce and the model's calls return drained).
 * dev_memcpy_async is ordered on stream only (NULL = the legacy default stream) and may return before
 * the copy is done. */
int  dev_memcpy(void *dst, const void *src, size_t bytes);
int  dev_memcpy_async(void *dst, const void *src, size_t bytes, void *stream);
int  dev_memset(void *dst, int byte, size_t bytes);

/* A non-blocking stream (does not synchronize with the legacy default stream). */
int  dev_stream_new(void **stream);
void dev_stream_destroy(void **stream);
/* Wait until every operation queued on stream is done, polling so the wait gives up after
 * timeout_ms (ERR_TIMEOUT); a failed kernel or copy gives ERR_CUDA with the CUDA text. */
int  dev_stream_wait(void *stream, int timeout_ms);
/* Wait for the whole device (cudaDeviceSynchronize, then the last error). */
int  dev_sync(void);

typedef struct {
    size_t dev_cur, dev_peak;       /* project allocations on the device (dev_malloc) */
    size_t host_cur, host_peak;     /* pinned host allocations (dev_host_alloc) */
    size_t dev_used, dev_total;     /* cudaMemGetInfo: total - free, total (every process on the GPU) */
    int    device;                  /* -1 when no device is selected (then everything is 0) */
} dev_mem_t;
void dev_mem_stats(dev_mem_t *out);
/* Reset the peaks to the current values. */
void dev_mem_reset_peak(void);

/* CUDA runtime and driver versions (e.g. 13000) and the NCCL version code; 0 when absent. */
void dev_versions(int *runtime, int *driver, int *nccl);

#endif
