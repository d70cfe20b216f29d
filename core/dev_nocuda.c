/* dev_nocuda.c: the device layer of a host-only build (make CUDA=0): no device, every device call is
 * ERR_UNSUP "built without CUDA". */
#include "core/dev.h"
#include "core/err.h"
#include <stdio.h>
#include <string.h>

static int s_unsup(void) { return err_set(ERR_UNSUP, "built without CUDA (make CUDA=0 or no nvcc/NCCL found)"); }

int dev_count(char *why, size_t len)
{
    if (why && len) snprintf(why, len, "built without CUDA");
    return 0;
}

int dev_select(int local_rank, char *desc, size_t len) { return dev_select_of(local_rank, 0, desc, len); }

int dev_select_of(int local_rank, int ngpus, char *desc, size_t len)
{
    (void)local_rank; (void)ngpus;
    if (desc && len) snprintf(desc, len, "none (built without CUDA)");
    return err_set(ERR_NODEV, "no CUDA device: built without CUDA");
}

int dev_current(void) { return -1; }

int dev_name(int device, char *name, size_t name_len, char *bus, size_t bus_len)
{
    (void)device;
    if (name && name_len) name[0] = '\0';
    if (bus && bus_len) bus[0] = '\0';
    return s_unsup();
}

int dev_bind_near(int device, char *desc, size_t len)
{
    (void)device;
    if (desc && len) snprintf(desc, len, "not bound (built without CUDA)");
    return s_unsup();
}

int dev_malloc(void **p, size_t bytes) { (void)bytes; if (p) *p = NULL; return s_unsup(); }
void dev_free(void **p) { if (p) *p = NULL; }
int dev_host_alloc(void **p, size_t bytes) { (void)bytes; if (p) *p = NULL; return s_unsup(); }
void dev_host_free(void **p) { if (p) *p = NULL; }
int dev_memcpy(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return s_unsup(); }
int dev_memcpy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst; (void)src; (void)bytes; (void)stream;
    return s_unsup();
}
int dev_memset(void *dst, int byte, size_t bytes) { (void)dst; (void)byte; (void)bytes; return s_unsup(); }
int dev_stream_new(void **stream) { if (stream) *stream = NULL; return s_unsup(); }
void dev_stream_destroy(void **stream) { if (stream) *stream = NULL; }
int dev_stream_wait(void *stream, int timeout_ms) { (void)stream; (void)timeout_ms; return s_unsup(); }
int dev_sync(void) { return s_unsup(); }

void dev_mem_stats(dev_mem_t *out)
{
    memset(out, 0, sizeof *out);
    out->device = -1;
}
void dev_mem_reset_peak(void) {}

void dev_versions(int *runtime, int *driver, int *nccl)
{
    if (runtime) *runtime = 0;
    if (driver) *driver = 0;
    if (nccl) *nccl = 0;
}
