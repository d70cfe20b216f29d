/* tree_gpu_cuda.c: the GPU-direct tree allreduce within a node over CUDA IPC.
 *
 * Design. Ranks form a binary tree in heap order (parent (r-1)/2, children 2r+1, 2r+2; depth
 * ceil(log2(P+1))). Every rank owns a device workspace of S = TREE_GPU_SLOTS segment slots and, per
 * slot, two interprocess events (up: "my partial sum of this segment is in my slot"; down: "the final
 * segment is in my slot / I finished reading my parent's slot"). At setup the ranks exchange the
 * workspace and event IPC handles plus the name of a small POSIX shared-memory control block (two
 * monotonic counters, up and down) through the store, and open their parent's and children's.
 * Segments are numbered globally across calls (g); segment g uses slot g % S.
 *   up(g):   wait until each child has published down >= g-S+1 (its copy out of my slot g-S is done:
 *            the slot is free) and up >= g+1, make my stream wait on their events, then one kernel
 *            reads my input and the children's slots directly (P2P / same GPU) and writes the partial
 *            (root: final, scaled for avg) into my slot; record up[slot], publish up = g+1.
 *   down(g): non-root: wait parent down >= g+1 and its event, copy the parent's slot into my slot
 *            (if I have children) and my output; record down[slot], publish down = g+1. Root: record
 *            and publish, then copy its slot to the output.
 * The host loop issues up(k) and down(k - (S-1)), so S-1 segments are between the two phases and the
 * GPU pipelines them while the host only waits for peers to *enqueue* (counters are published right
 * after cudaEventRecord returns; the events carry the GPU-side order). Nothing goes through host
 * memory. Several ranks may share one GPU: the IPC handles are opened in other processes' contexts.
 * A peer that stops publishing turns into ERR_TIMEOUT at the deadline and the object is broken. */
#include "allreduce-tree/tree_gpu.h"
#include "core/cuda/reduce.h"
#include "core/dev.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define S TREE_GPU_SLOTS
/* IPC-shared allocations are rounded up to 2 MiB: cudaMalloc may sub-allocate a small buffer from a
 * larger block, and cudaIpcGetMemHandle exposes the whole block to the peer (other allocations of
 * this process included); 2 MiB is the allocation granularity, so a rounded buffer is a block alone. */
#define IPC_ALIGN ((size_t)2 << 20)
static size_t s_ws_bytes(size_t seg_bytes) { return ((size_t)S * seg_bytes + IPC_ALIGN - 1) / IPC_ALIGN * IPC_ALIGN; }

typedef struct {
    _Atomic uint64_t up;
    char pad0[56];
    _Atomic uint64_t down;
    char pad1[56];
} s_ctl_t;

typedef struct {
    int ok;
    char why[160];
    int node, pid, nslots;
    uint64_t seg_bytes;
    char bus[32];
    char shm[64];
    cudaIpcMemHandle_t mem;
    cudaIpcEventHandle_t up[S], down[S];
} s_hello_t;

typedef struct {
    int rank;                 /* -1: absent */
    char *ws;                 /* opened IPC workspace */
    cudaEvent_t up[S], down[S];
    s_ctl_t *ctl;
} s_peer_t;

struct tree_gpu {
    comm_t *comm;
    int device, rank, world, broken;
    size_t seg_bytes;
    cudaStream_t stream;
    char *ws;
    cudaEvent_t up[S], down[S];
    s_ctl_t *ctl;
    char shm[64];
    s_peer_t parent, child[2];
    int nchild;
    uint64_t seq;             /* next global segment number */
    size_t bytes_read;
    char impl[128];
};

static int s_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    return err_set(ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

static s_ctl_t *s_map(const char *name, int create)
{
    int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    if (fd < 0) return NULL;
    if (create && ftruncate(fd, sizeof(s_ctl_t)) != 0) {
        close(fd);
        shm_unlink(name);
        return NULL;
    }
    void *p = mmap(NULL, sizeof(s_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    return (s_ctl_t *)p;
}

/* Wait until *ctr >= target (published by a peer after it enqueued the work). */
static int s_wait_ctr(tree_gpu_t *self, _Atomic uint64_t *ctr, uint64_t target, int peer, const char *what,
                      uint64_t dl, int timeout_ms)
{
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(ctr, memory_order_acquire) >= target) return 0;
        if (deadline_passed(dl)) {
            self->broken = 1;
            return err_set(ERR_TIMEOUT, "gpu tree: rank %d did not publish %s of segment %llu within %d ms", peer,
                           what, (unsigned long long)(target - 1), timeout_ms);
        }
        if (spins < 4000) sched_yield();
        else usleep(20);
    }
}

static void s_peer_close(s_peer_t *p)
{
    for (int j = 0; j < S; j++) {
        if (p->up[j]) cudaEventDestroy(p->up[j]);
        if (p->down[j]) cudaEventDestroy(p->down[j]);
        p->up[j] = p->down[j] = NULL;
    }
    if (p->ws) cudaIpcCloseMemHandle(p->ws);
    p->ws = NULL;
    if (p->ctl) munmap(p->ctl, sizeof(s_ctl_t));
    p->ctl = NULL;
}

static int s_peer_open(tree_gpu_t *self, s_peer_t *p, const s_hello_t *h)
{
    if (h->node != self->comm->node)
        return err_set(ERR_UNSUP, "gpu tree spans one node (rank %d is on node %d, rank %d on node %d); use impl host or nccl",
                       p->rank, h->node, self->rank, self->comm->node);
    int pdev = -1;
    if (cudaDeviceGetByPCIBusId(&pdev, h->bus) != cudaSuccess) {
        (void)cudaGetLastError();
        return err_set(ERR_UNSUP, "gpu tree: rank %d's GPU %s is not visible to rank %d (CUDA_VISIBLE_DEVICES)",
                       p->rank, h->bus, self->rank);
    }
    if (pdev != self->device) {
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, self->device, pdev) != cudaSuccess || !can)
            return err_set(ERR_UNSUP, "gpu tree: cuda:%d cannot access cuda:%d (no P2P); use impl host or nccl",
                           self->device, pdev);
    }
    void *ws = NULL;
    CHECK(s_cuda(cudaIpcOpenMemHandle(&ws, h->mem, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle"));
    p->ws = ws;
    for (int j = 0; j < S; j++) {
        CHECK(s_cuda(cudaIpcOpenEventHandle(&p->up[j], h->up[j]), "cudaIpcOpenEventHandle"));
        CHECK(s_cuda(cudaIpcOpenEventHandle(&p->down[j], h->down[j]), "cudaIpcOpenEventHandle"));
    }
    p->ctl = s_map(h->shm, 0);
    if (!p->ctl) return err_set(ERR_SYS, "gpu tree: opening rank %d's control block %s failed", p->rank, h->shm);
    return 0;
}

/* Local setup: stream, workspace, events, control block; fills hello. */
static int s_local_setup(tree_gpu_t *self, s_hello_t *h)
{
    CHECK(s_cuda(cudaSetDevice(self->device), "cudaSetDevice"));
    CHECK(s_cuda(cudaStreamCreateWithFlags(&self->stream, cudaStreamNonBlocking), "cudaStreamCreate"));
    void *ws = NULL;
    CHECK(dev_malloc(&ws, s_ws_bytes(self->seg_bytes)));
    self->ws = ws;
    CHECK(s_cuda(cudaIpcGetMemHandle(&h->mem, self->ws), "cudaIpcGetMemHandle"));
    for (int j = 0; j < S; j++) {
        CHECK(s_cuda(cudaEventCreateWithFlags(&self->up[j], cudaEventDisableTiming | cudaEventInterprocess),
                     "cudaEventCreate(interprocess)"));
        CHECK(s_cuda(cudaEventCreateWithFlags(&self->down[j], cudaEventDisableTiming | cudaEventInterprocess),
                     "cudaEventCreate(interprocess)"));
        CHECK(s_cuda(cudaIpcGetEventHandle(&h->up[j], self->up[j]), "cudaIpcGetEventHandle"));
        CHECK(s_cuda(cudaIpcGetEventHandle(&h->down[j], self->down[j]), "cudaIpcGetEventHandle"));
    }
    static _Atomic int counter;
    snprintf(self->shm, sizeof self->shm, "/sbtg-%d-%d-%d", (int)getpid(), self->rank, atomic_fetch_add(&counter, 1));
    self->ctl = s_map(self->shm, 1);
    if (!self->ctl) {
        self->shm[0] = '\0';
        return err_set(ERR_SYS, "gpu tree: creating the shared control block failed");
    }
    atomic_store(&self->ctl->up, 0);
    atomic_store(&self->ctl->down, 0);
    snprintf(h->shm, sizeof h->shm, "%s", self->shm);
    CHECK(dev_name(self->device, NULL, 0, h->bus, sizeof h->bus));
    return 0;
}

/* Every rank learns whether every rank succeeded; the first failure's text becomes everyone's error. */
static int s_agree(tree_gpu_t *self, int rc, const char *stage, int timeout_ms)
{
    struct { int rc; char why[200]; } mine, *all = calloc((size_t)self->world, sizeof mine);
    if (!all) return err_set(ERR_NOMEM, "gpu tree: agree");
    memset(&mine, 0, sizeof mine);
    mine.rc = rc;
    if (rc < 0) snprintf(mine.why, sizeof mine.why, "%s", err_detail());
    int grc = comm_allgather(self->comm, &mine, sizeof mine, all, timeout_ms);
    if (grc == 0)
        for (int r = 0; r < self->world; r++)
            if (all[r].rc < 0) {
                grc = err_set(r == self->rank ? all[r].rc : ERR_PEER, "gpu tree %s failed on rank %d: %s", stage, r,
                              all[r].why);
                break;
            }
    free(all);
    return grc;
}

int tree_gpu_new(tree_gpu_t **self_p, comm_t *comm, int device, size_t seg_bytes, int timeout_ms)
{
    *self_p = NULL;
    char why[256];
    int n = dev_count(why, sizeof why);
    if (n <= 0) return err_set(ERR_NODEV, "gpu tree needs a CUDA device: %s", why);
    if (device < 0 || device >= n) return err_set(ERR_NODEV, "gpu tree: device %d does not exist (%d visible)", device, n);
    if (seg_bytes == 0) seg_bytes = (size_t)4 << 20;
    seg_bytes = (seg_bytes + 255) & ~(size_t)255;
    tree_gpu_t *self = calloc(1, sizeof *self);
    if (!self) return err_set(ERR_NOMEM, "tree_gpu_new");
    self->comm = comm;
    self->device = device;
    self->rank = comm->rank;
    self->world = comm->world;
    self->seg_bytes = seg_bytes;
    self->parent.rank = self->rank == 0 ? -1 : (self->rank - 1) / 2;
    for (int c = 0; c < 2; c++) {
        int r = 2 * self->rank + 1 + c;
        self->child[c].rank = r < self->world ? r : -1;
        if (r < self->world) self->nchild++;
    }
    uint64_t dl = deadline_in(timeout_ms);
    int rc;
    s_hello_t *hello = calloc((size_t)self->world + 1, sizeof *hello);
    if (!hello) {
        free(self);
        return err_set(ERR_NOMEM, "tree_gpu_new");
    }
    s_hello_t *mine = &hello[self->world];
    mine->node = comm->node;
    mine->pid = (int)getpid();
    mine->nslots = S;
    mine->seg_bytes = seg_bytes;
    rc = s_local_setup(self, mine);
    mine->ok = rc == 0;
    if (rc < 0) snprintf(mine->why, sizeof mine->why, "%s", err_detail());
    CHECK_GOTO(rc, comm_allgather(comm, mine, sizeof *mine, hello, deadline_left_ms(dl)), fail);
    for (int r = 0; r < self->world; r++)
        if (!hello[r].ok) {
            rc = err_set(r == self->rank ? ERR_CUDA : ERR_PEER, "gpu tree setup failed on rank %d: %s", r, hello[r].why);
            goto fail;
        }
    for (int r = 0; r < self->world; r++)
        if (hello[r].seg_bytes != seg_bytes || hello[r].nslots != S) {
            rc = err_set(ERR_MISMATCH, "gpu tree: rank %d uses %llu-byte segments x %d, rank %d %zu x %d", r,
                         (unsigned long long)hello[r].seg_bytes, hello[r].nslots, self->rank, seg_bytes, S);
            goto fail;
        }
    rc = 0;
    if (self->parent.rank >= 0) rc = s_peer_open(self, &self->parent, &hello[self->parent.rank]);
    for (int c = 0; rc == 0 && c < 2; c++)
        if (self->child[c].rank >= 0) rc = s_peer_open(self, &self->child[c], &hello[self->child[c].rank]);
    CHECK_GOTO(rc, s_agree(self, rc, "opening peers' IPC handles", deadline_left_ms(dl)), fail);
    shm_unlink(self->shm);      /* everyone who needs it has it mapped */
    self->shm[0] = '\0';
    {
        int ndev = 0;
        char bus0[32] = "";
        for (int r = 0; r < self->world; r++) {
            int seen = 0;
            for (int q = 0; q < r; q++) seen |= strcmp(hello[q].bus, hello[r].bus) == 0;
            if (!seen) ndev++;
            if (r == 0) snprintf(bus0, sizeof bus0, "%s", hello[r].bus);
        }
        snprintf(self->impl, sizeof self->impl, "gpu-ipc tree, %d rank%s on %d GPU%s, seg %zu KiB x %d", self->world,
                 self->world == 1 ? "" : "s", ndev, ndev == 1 ? "" : "s", seg_bytes >> 10, S);
    }
    free(hello);
    *self_p = self;
    return 0;
fail:
    free(hello);
    self->broken = 1;
    tree_gpu_destroy(&self);
    return rc;
}

static char *s_slot(char *ws, tree_gpu_t *self, uint64_t g) { return ws + (size_t)(g % S) * self->seg_bytes; }

static int s_up(tree_gpu_t *self, uint64_t g, const char *in, size_t n, dtype_t dt, float scale, uint64_t dl, int tmo)
{
    int j = (int)(g % S);
    const void *srcs[3];
    int ns = 0;
    srcs[ns++] = in;
    for (int c = 0; c < 2; c++) {
        s_peer_t *p = &self->child[c];
        if (p->rank < 0) continue;
        if (g >= S) {     /* the child finished copying out of my slot for g - S */
            CHECK(s_wait_ctr(self, &p->ctl->down, g - S + 1, p->rank, "down", dl, tmo));
            CHECK(s_cuda(cudaStreamWaitEvent(self->stream, p->down[j], 0), "cudaStreamWaitEvent"));
        }
        CHECK(s_wait_ctr(self, &p->ctl->up, g + 1, p->rank, "up", dl, tmo));
        CHECK(s_cuda(cudaStreamWaitEvent(self->stream, p->up[j], 0), "cudaStreamWaitEvent"));
        srcs[ns++] = s_slot(p->ws, self, g);
        self->bytes_read += n * dt_size(dt);
    }
    CHECK(gpu_reduce_n(s_slot(self->ws, self, g), srcs, ns, n, dt, scale, self->stream));
    CHECK(s_cuda(cudaEventRecord(self->up[j], self->stream), "cudaEventRecord"));
    atomic_store_explicit(&self->ctl->up, g + 1, memory_order_release);
    return 0;
}

static int s_down(tree_gpu_t *self, uint64_t g, char *out, size_t n, dtype_t dt, uint64_t dl, int tmo)
{
    int j = (int)(g % S);
    size_t bytes = n * dt_size(dt);
    char *mine = s_slot(self->ws, self, g);
    if (self->parent.rank < 0) {
        CHECK(s_cuda(cudaEventRecord(self->down[j], self->stream), "cudaEventRecord"));
        atomic_store_explicit(&self->ctl->down, g + 1, memory_order_release);
        CHECK(dev_memcpy_async(out, mine, bytes, self->stream));
        return 0;
    }
    s_peer_t *p = &self->parent;
    CHECK(s_wait_ctr(self, &p->ctl->down, g + 1, p->rank, "down", dl, tmo));
    CHECK(s_cuda(cudaStreamWaitEvent(self->stream, p->down[j], 0), "cudaStreamWaitEvent"));
    const char *theirs = s_slot(p->ws, self, g);
    self->bytes_read += bytes;
    if (self->nchild > 0) {
        CHECK(dev_memcpy_async(mine, theirs, bytes, self->stream));
        CHECK(s_cuda(cudaEventRecord(self->down[j], self->stream), "cudaEventRecord"));
        atomic_store_explicit(&self->ctl->down, g + 1, memory_order_release);
        CHECK(dev_memcpy_async(out, mine, bytes, self->stream));
    } else {
        CHECK(dev_memcpy_async(out, theirs, bytes, self->stream));
        CHECK(s_cuda(cudaEventRecord(self->down[j], self->stream), "cudaEventRecord"));
        atomic_store_explicit(&self->ctl->down, g + 1, memory_order_release);
    }
    return 0;
}

int tree_gpu_allreduce(tree_gpu_t *self, const void *send, void *recv, size_t count, dtype_t dt, redop_t op,
                       int timeout_ms)
{
    if (!self) return err_set(ERR_INVAL, "tree_gpu_allreduce: no tree");
    if (self->broken) return err_set(ERR_STATE, "gpu tree is broken after an earlier failure; destroy it");
    size_t esz = dt_size(dt);
    if (esz == 0) return err_set(ERR_INVAL, "gpu tree: dtype %d", (int)dt);
    if (op != OP_SUM && op != OP_AVG) return err_set(ERR_INVAL, "gpu tree: op %d", (int)op);
    if (count == 0) return 0;
    CHECK(s_cuda(cudaSetDevice(self->device), "cudaSetDevice"));
    float scale = op == OP_AVG ? 1.0f / (float)self->world : 1.0f;
    uint64_t dl = deadline_in(timeout_ms);
    size_t seg = self->seg_bytes / esz;
    size_t nseg = (count + seg - 1) / seg;
    const char *in = send;
    char *out = recv;
    if (self->world == 1) {
        const void *srcs[1] = {send};
        CHECK(gpu_reduce_n(recv, srcs, 1, count, dt, scale, self->stream));
    } else {
        const size_t lag = S - 1;
        for (size_t it = 0; it < nseg + lag; it++) {
            if (it < nseg) {
                size_t off = it * seg, n = count - off < seg ? count - off : seg;
                int rc = s_up(self, self->seq + it, in + off * esz, n, dt, self->parent.rank < 0 ? scale : 1.0f, dl,
                              timeout_ms);
                if (rc < 0) {
                    self->broken = 1;
                    CHECK(rc);
                }
            }
            if (it >= lag) {
                size_t k = it - lag, off = k * seg, n = count - off < seg ? count - off : seg;
                int rc = s_down(self, self->seq + k, out + off * esz, n, dt, dl, timeout_ms);
                if (rc < 0) {
                    self->broken = 1;
                    CHECK(rc);
                }
            }
        }
        self->seq += nseg;
    }
    int rc = dev_stream_wait(self->stream, deadline_left_ms(dl) > 0 ? deadline_left_ms(dl) : 1);
    if (rc < 0) {
        self->broken = 1;
        CHECK(rc);
    }
    return 0;
}

const char *tree_gpu_impl(tree_gpu_t *self) { return self ? self->impl : "none"; }
size_t tree_gpu_bytes(tree_gpu_t *self) { return self ? self->bytes_read : 0; }
size_t tree_gpu_mem_bytes(tree_gpu_t *self) { return self ? s_ws_bytes(self->seg_bytes) : 0; }

void tree_gpu_destroy(tree_gpu_t **self_p)
{
    if (!self_p || !*self_p) return;
    tree_gpu_t *self = *self_p;
    int tmo = self->comm && self->comm->timeout_ms > 0 ? self->comm->timeout_ms : 30000;
    if (self->stream) (void)dev_stream_wait(self->stream, tmo);
    /* peers may still be copying out of my workspace: wait for everyone before freeing it */
    if (!self->broken && self->comm) (void)comm_barrier(self->comm, tmo);
    s_peer_close(&self->parent);
    s_peer_close(&self->child[0]);
    s_peer_close(&self->child[1]);
    for (int j = 0; j < S; j++) {
        if (self->up[j]) cudaEventDestroy(self->up[j]);
        if (self->down[j]) cudaEventDestroy(self->down[j]);
    }
    if (self->ctl) munmap(self->ctl, sizeof(s_ctl_t));
    if (self->shm[0]) shm_unlink(self->shm);
    void *ws = self->ws;
    dev_free(&ws);
    if (self->stream) cudaStreamDestroy(self->stream);
    free(self);
    *self_p = NULL;
}
