/* dev_cuda.c: the device layer on the CUDA runtime: fork-safe device counting, device choice,
 * tracked device / pinned allocations, copies, streams with deadline waits, hwloc binding near a GPU. */
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <hwloc.h>
#include <hwloc/cudart.h>
#include <nccl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static int  s_cuda_used;        /* this process has initialized the CUDA runtime */
static int  s_count = -1;       /* cached dev_count */
static char s_why[256];
static int  s_cur = -1;

/* Allocation registry: pointer -> bytes, so dev_free can account without the caller's size. */
typedef struct { void *p; size_t bytes; int host; } s_alloc_t;
static s_alloc_t *s_allocs;
static size_t s_nallocs, s_cap;
static size_t s_dev_cur, s_dev_peak, s_host_cur, s_host_peak;

static int s_cuda_err(cudaError_t e, const char *what)
{
    return err_set(ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static void s_mark_used(void)
{
    pthread_mutex_lock(&s_lock);
    s_cuda_used = 1;
    pthread_mutex_unlock(&s_lock);
}

static int s_count_here(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!drv) snprintf(why, len, "no NVIDIA driver (libcuda.so.1 not found)");
        else snprintf(why, len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        if (drv) dlclose(drv);
        (void)cudaGetLastError();
        return 0;
    }
    if (n == 0) snprintf(why, len, "the CUDA runtime reports 0 devices");
    return n;
}

/* Count in a child so this process never initializes the driver (fork-unsafe afterwards). */
static int s_count_forked(char *why, size_t len)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        struct { int n; char why[256]; } msg;
        memset(&msg, 0, sizeof msg);
        msg.n = s_count_here(msg.why, sizeof msg.why);
        ssize_t w = write(fd[1], &msg, sizeof msg);
        _exit(w == (ssize_t)sizeof msg ? 0 : 1);
    }
    close(fd[1]);
    struct { int n; char why[256]; } msg;
    memset(&msg, 0, sizeof msg);
    size_t got = 0;
    uint64_t dl = deadline_in(30000);
    while (got < sizeof msg) {
        struct pollfd p = {.fd = fd[0], .events = POLLIN};
        int left = deadline_left_ms(dl);
        if (left == 0) break;
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        ssize_t k = read(fd[0], (char *)&msg + got, sizeof msg - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd[0]);
    if (got < sizeof msg) kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (got < sizeof msg) {
        snprintf(why, len, "device probe process failed or timed out");
        return 0;
    }
    msg.why[sizeof msg.why - 1] = '\0';
    snprintf(why, len, "%s", msg.why);
    return msg.n;
}

int dev_count(char *why, size_t len)
{
    pthread_mutex_lock(&s_lock);
    int cached = s_count, used = s_cuda_used;
    pthread_mutex_unlock(&s_lock);
    if (cached < 0) {
        char w[256] = "";
        int n = used ? -1 : s_count_forked(w, sizeof w);
        if (n < 0) {                       /* CUDA already live here, or fork failed */
            n = s_count_here(w, sizeof w);
            s_mark_used();
        }
        pthread_mutex_lock(&s_lock);
        s_count = n;
        snprintf(s_why, sizeof s_why, "%s", w);
        cached = n;
        pthread_mutex_unlock(&s_lock);
    }
    if (why && len) snprintf(why, len, "%s", cached > 0 ? "" : s_why);
    return cached;
}

int dev_name(int device, char *name, size_t name_len, char *bus, size_t bus_len)
{
    s_mark_used();
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) return s_cuda_err(e, "cudaGetDeviceProperties");
    if (name && name_len) snprintf(name, name_len, "%s", prop.name);
    if (bus && bus_len) {
        char b[32] = "";
        e = cudaDeviceGetPCIBusId(b, (int)sizeof b, device);
        if (e != cudaSuccess) return s_cuda_err(e, "cudaDeviceGetPCIBusId");
        snprintf(bus, bus_len, "%s", b);
    }
    return 0;
}

int dev_select(int local_rank, char *desc, size_t len) { return dev_select_of(local_rank, 0, desc, len); }

int dev_select_of(int local_rank, int ngpus, char *desc, size_t len)
{
    char why[256];
    int n = dev_count(why, sizeof why);
    if (n <= 0) {
        if (desc && len) snprintf(desc, len, "none (%s)", why);
        return err_set(ERR_NODEV, "no CUDA device: %s", why);
    }
    if (ngpus > 0) {
        if (ngpus > n) CHECK(dev_check_gpus_with(ngpus, n, why, getenv("CUDA_VISIBLE_DEVICES")));
        n = ngpus;
    }
    if (local_rank < 0) return err_set(ERR_INVAL, "dev_select: local rank %d", local_rank);
    int d = local_rank % n;
    s_mark_used();
    cudaError_t e = cudaSetDevice(d);
    if (e != cudaSuccess) return s_cuda_err(e, "cudaSetDevice");
    e = cudaFree(NULL);                 /* create the context now, not inside a timed region */
    if (e != cudaSuccess) return s_cuda_err(e, "creating the CUDA context");
    s_cur = d;
    if (desc && len) {
        char name[128] = "", bus[32] = "", phys[32];
        int ids[64];
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        int nv = dev_visible_parse(cvd, ids, 64);
        if (nv < 0) snprintf(phys, sizeof phys, "%d", d);
        else if (d < nv && ids[d] >= 0) snprintf(phys, sizeof phys, "%d", ids[d]);
        else snprintf(phys, sizeof phys, "?");
        (void)dev_name(d, name, sizeof name, bus, sizeof bus);
        snprintf(desc, len, "cuda:%d (physical %s, %s, %s%s)", d, phys, name, bus,
                 local_rank >= n ? ", shared with other ranks" : "");
    }
    return d;
}

int dev_current(void) { return s_cur; }

int dev_bind_near(int device, char *desc, size_t len)
{
    s_mark_used();
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return err_set(ERR_UNSUP, "hwloc_topology_init failed");
    int rc = 0;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set || hwloc_topology_load(topo) != 0) {
        rc = err_set(ERR_UNSUP, "hwloc could not load the topology");
    } else if (hwloc_cudart_get_device_cpuset(topo, device, set) != 0 || hwloc_bitmap_iszero(set)) {
        rc = err_set(ERR_UNSUP, "hwloc does not know the CPUs near cuda:%d", device);
    } else if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0) {
        rc = err_set(ERR_SYS, "hwloc_set_cpubind: %s", strerror(errno));
    } else if (desc && len) {
        char list[200];
        hwloc_bitmap_list_snprintf(list, sizeof list, set);
        snprintf(desc, len, "bound to CPUs %s (near cuda:%d)", list, device);
    }
    if (rc < 0 && desc && len) snprintf(desc, len, "not bound (%s)", err_detail());
    if (set) hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return rc;
}

static int s_track_add(void *p, size_t bytes, int host)
{
    pthread_mutex_lock(&s_lock);
    if (s_nallocs == s_cap) {
        size_t cap = s_cap ? s_cap * 2 : 64;
        s_alloc_t *a = realloc(s_allocs, cap * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&s_lock);
            return ERR_NOMEM;
        }
        s_allocs = a;
        s_cap = cap;
    }
    s_allocs[s_nallocs++] = (s_alloc_t){p, bytes, host};
    if (host) {
        s_host_cur += bytes;
        if (s_host_cur > s_host_peak) s_host_peak = s_host_cur;
    } else {
        s_dev_cur += bytes;
        if (s_dev_cur > s_dev_peak) s_dev_peak = s_dev_cur;
    }
    pthread_mutex_unlock(&s_lock);
    return 0;
}

static void s_track_del(void *p)
{
    pthread_mutex_lock(&s_lock);
    for (size_t i = s_nallocs; i-- > 0;)
        if (s_allocs[i].p == p) {
            if (s_allocs[i].host) s_host_cur -= s_allocs[i].bytes;
            else s_dev_cur -= s_allocs[i].bytes;
            s_allocs[i] = s_allocs[--s_nallocs];
            break;
        }
    pthread_mutex_unlock(&s_lock);
}

int dev_malloc(void **p, size_t bytes)
{
    *p = NULL;
    s_mark_used();
    void *q = NULL;
    cudaError_t e = cudaMalloc(&q, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        return err_set(e == cudaErrorMemoryAllocation ? ERR_NOMEM : ERR_CUDA,
                       "cudaMalloc(%zu bytes) on cuda:%d: %s (%zu of %zu bytes free)", bytes, s_cur,
                       cudaGetErrorString(e), fr, tot);
    }
    if (s_track_add(q, bytes, 0) < 0) {
        cudaFree(q);
        return err_set(ERR_NOMEM, "dev_malloc: tracking table");
    }
    *p = q;
    return 0;
}

void dev_free(void **p)
{
    if (!p || !*p) return;
    s_track_del(*p);
    cudaFree(*p);
    *p = NULL;
}

int dev_host_alloc(void **p, size_t bytes)
{
    *p = NULL;
    s_mark_used();
    void *q = NULL;
    cudaError_t e = cudaHostAlloc(&q, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return err_set(ERR_NOMEM, "cudaHostAlloc(%zu bytes): %s", bytes, cudaGetErrorString(e));
    }
    if (s_track_add(q, bytes, 1) < 0) {
        cudaFreeHost(q);
        return err_set(ERR_NOMEM, "dev_host_alloc: tracking table");
    }
    *p = q;
    return 0;
}

void dev_host_free(void **p)
{
    if (!p || !*p) return;
    s_track_del(*p);
    cudaFreeHost(*p);
    *p = NULL;
}

/* The one place where dev_memcpy / dev_memset become complete (dev.h): the legacy default stream is
 * synchronized after the operation, so no other stream (NCCL's, the IPC tree's, the model's, all
 * non-blocking and never ordered after the legacy stream) can overtake it. cudaMemcpy alone is not
 * enough: a pageable host-to-device copy may return once the source is staged, before the data lands,
 * and cudaMemset never waits. The error of the operation itself (or of earlier work on the legacy
 * stream) is returned as ERR_CUDA with what was being done. */
static int s_legacy_done(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return s_cuda_err(e, what);
}

int dev_memcpy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return 0;
    return s_legacy_done(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamLegacy), "cudaMemcpy");
}

int dev_memcpy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0) return 0;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : s_cuda_err(e, "cudaMemcpyAsync");
}

int dev_memset(void *dst, int byte, size_t bytes)
{
    if (bytes == 0) return 0;
    return s_legacy_done(cudaMemsetAsync(dst, byte, bytes, cudaStreamLegacy), "cudaMemset");
}

int dev_stream_new(void **stream)
{
    *stream = NULL;
    s_mark_used();
    cudaStream_t s;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return s_cuda_err(e, "cudaStreamCreateWithFlags");
    *stream = s;
    return 0;
}

void dev_stream_destroy(void **stream)
{
    if (!stream || !*stream) return;
    cudaStreamDestroy((cudaStream_t)*stream);
    *stream = NULL;
}

int dev_stream_wait(void *stream, int timeout_ms)
{
    uint64_t dl = deadline_in(timeout_ms);
    for (unsigned spins = 0;; spins++) {
        cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) return s_cuda_err(e, "waiting for a CUDA stream");
        if (deadline_passed(dl))
            return err_set(ERR_TIMEOUT, "CUDA stream still busy after %d ms", timeout_ms);
        if (spins < 1000) sched_yield();
        else usleep(50);
    }
}

int dev_sync(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? 0 : s_cuda_err(e, "cudaDeviceSynchronize");
}

void dev_mem_stats(dev_mem_t *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s_lock);
    out->dev_cur = s_dev_cur;
    out->dev_peak = s_dev_peak;
    out->host_cur = s_host_cur;
    out->host_peak = s_host_peak;
    pthread_mutex_unlock(&s_lock);
    out->device = s_cur;
    if (s_cur >= 0) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
            out->dev_total = tot;
            out->dev_used = tot - fr;
        } else {
            (void)cudaGetLastError();
        }
    }
}

void dev_mem_reset_peak(void)
{
    pthread_mutex_lock(&s_lock);
    s_dev_peak = s_dev_cur;
    s_host_peak = s_host_cur;
    pthread_mutex_unlock(&s_lock);
}

void dev_versions(int *runtime, int *driver, int *nccl)
{
    int v = 0;
    if (runtime) *runtime = cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
    v = 0;
    if (driver) *driver = cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
    v = 0;
    if (nccl) *nccl = ncclGetVersion(&v) == ncclSuccess ? v : 0;
}
