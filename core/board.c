/* board.c: the shared-memory board of core/board.h (one mapping per communicator, every rank's two
 * round buffers and its round counter; one synchronisation per round). Layout: P control lines of 64
 * bytes (round counter, sleepers, pid), padded to a page, then the buffers, rank r's round-parity-b
 * buffer at data + (2 r + b) * cap. Rank 0 creates the name ("/<run name>.board", O_EXCL, 0600, its
 * size reserved with posix_fallocate), the others check it (ours, 0600, exact size) before mapping;
 * rank 0 removes the name once every rank mapped it. */
#include "core/board.h"
#include "core/err.h"
#include "core/futex.h"
#include "core/timer.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BOARD_SLICE_MS 100   /* longest single sleep, so deadlines and dead peers get noticed */

typedef struct {
    _Atomic uint32_t round;     /* the last round this rank posted */
    _Atomic uint32_t sleepers;  /* ranks asleep on round's futex */
    _Atomic int32_t pid;
    char pad[52];
} board_ctl_t;

struct board {
    comm_t *comm;
    int rank, world;
    size_t cap;                 /* one buffer */
    size_t map_len;
    board_ctl_t *ctl;
    char *data;
    uint32_t round;             /* rounds this rank posted */
    int spin_us, yield_us;
    const void **all;
    char name[160];
};

int board_possible(comm_t *comm)
{
    if (!comm || comm->world < 2 || comm->nnodes != 1) return 0;
    for (int r = 0; r < comm->world; r++)
        if (r != comm->rank && strcmp(tp_kind(comm->tp, r), "shm")) return 0;
    return 1;
}

size_t board_bytes(const board_t *self) { return self ? self->cap : 0; }

static char *s_buf(board_t *self, int rank, uint32_t round)
{
    return self->data + ((size_t)rank * 2 + (round & 1u)) * self->cap;
}

void *board_mine(board_t *self) { return s_buf(self, self->rank, self->round + 1); }

/* Rank 0: create the name and reserve len bytes; returns the fd or a negative code. */
static int s_create(const char *name, size_t len)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(errno == EACCES ? ERR_AUTH : ERR_SYS, "board: shm_open %s: %s", name, strerror(errno));
    int e = fchmod(fd, 0600) ? errno : posix_fallocate(fd, 0, (off_t)len);
    if (e) {
        close(fd);
        shm_unlink(name);
        return err_set(e == ENOSPC ? ERR_NOSPC : ERR_SYS, "board %s (%zu bytes): %s%s", name, len, strerror(e),
                       e == ENOSPC ? " (free /dev/shm, or --ring-algo ring)" : "");
    }
    return fd;
}

/* Other ranks: open rank 0's name and check it is this run's board before mapping it. */
static int s_open(const char *name, size_t len)
{
    int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(errno == EACCES ? ERR_AUTH : ERR_SYS, "board: shm_open %s: %s", name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size != len) {
        close(fd);
        return err_set(ERR_AUTH, "shared-memory name %s is not this run's board (want uid %u, mode 0600, %zu bytes)",
                       name, (unsigned)geteuid(), len);
    }
    return fd;
}

/* Every rank's rc: 0 when all are >= 0, else the first failure (this rank's own if it failed). */
static int s_agree(comm_t *comm, int rc, int timeout_ms)
{
    int *all = calloc((size_t)comm->world, sizeof(int));
    if (!all) return ERR_NOMEM;
    int mine = rc < 0 ? rc : 0, out = mine;
    int grc = comm_allgather(comm, &mine, sizeof mine, all, timeout_ms);
    for (int r = 0; r < comm->world && grc == 0 && out == 0; r++)
        if (all[r] < 0) out = err_set(all[r], "board: rank %d could not set up the shared board", r);
    free(all);
    return grc < 0 ? grc : out;
}

int board_new(board_t **self_p, comm_t *comm, size_t bytes, int timeout_ms)
{
    if (!board_possible(comm))
        return err_set(ERR_UNSUP, "board: needs at least 2 ranks, all on this host, with the shared-memory transport");
    board_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->comm = comm;
    self->rank = comm->rank;
    self->world = comm->world;
    self->cap = bytes ? (bytes + 63) / 64 * 64 : 64;
    size_t ctl = ((size_t)self->world * sizeof(board_ctl_t) + 4095) / 4096 * 4096;
    self->map_len = ctl + (size_t)self->world * 2 * self->cap;
    self->all = calloc((size_t)self->world, sizeof(void *));
    snprintf(self->name, sizeof self->name, "/%s.board", tp_name(comm->tp));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int oversub = comm->local_world > ncpu;
    self->spin_us = oversub ? 0 : 50;
    self->yield_us = oversub && !comm->no_yield ? 2000 : 0;
    const char *e = getenv("SYNCBENCH_SHM_SPIN_US");
    if (e) self->spin_us = atoi(e);
    e = getenv("SYNCBENCH_SHM_YIELD_US");
    if (e) self->yield_us = atoi(e);

    int fd = -1, rc = self->all ? 0 : ERR_NOMEM;
    if (rc == 0 && self->rank == 0 && (fd = s_create(self->name, self->map_len)) < 0) rc = fd;
    rc = s_agree(comm, rc, timeout_ms);                   /* the name exists (or nobody goes on) */
    if (rc == 0 && self->rank != 0 && (fd = s_open(self->name, self->map_len)) < 0) rc = fd;
    void *p = MAP_FAILED;
    if (rc >= 0) {
        p = mmap(NULL, self->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) rc = err_set(ERR_SYS, "board: mmap %s: %s", self->name, strerror(errno));
    }
    if (fd >= 0) close(fd);
    if (p != MAP_FAILED) {
        self->ctl = p;
        self->data = (char *)p + ctl;
        atomic_store(&self->ctl[self->rank].pid, (int32_t)getpid());
    }
    rc = s_agree(comm, rc, timeout_ms);                   /* every rank mapped it */
    if (self->rank == 0) shm_unlink(self->name);
    if (rc < 0) {
        board_destroy(&self);
        return rc;
    }
    *self_p = self;
    return 0;
}

void board_destroy(board_t **self_p)
{
    board_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    if (self->ctl) munmap(self->ctl, self->map_len);
    free(self->all);
    free(self);
    *self_p = NULL;
}

static inline int s_reached(board_ctl_t *c, uint32_t round)
{
    return (int32_t)(atomic_load_explicit(&c->round, memory_order_acquire) - round) >= 0;
}

/* Wait until rank r posted `round`: spin (until spin_end), yield (until yield_end), then sleep. */
static int s_wait(board_t *self, int r, uint32_t round, uint64_t dl, uint64_t spin_end, uint64_t yield_end)
{
    board_ctl_t *c = &self->ctl[r];
    while (!s_reached(c, round)) {
        uint64_t t = now_ns();
        if (t < spin_end) {
            for (int i = 0; i < 64 && !s_reached(c, round); i++) futex_pause();
            continue;
        }
        if (t < yield_end) {
            sched_yield();
            continue;
        }
        int left = deadline_left_ms(dl);
        if (left == 0)
            return err_set(ERR_TIMEOUT, "board: rank %d waited too long for rank %d (round %u)", self->rank, r,
                           (unsigned)round);
        int slice = (left < 0 || left > BOARD_SLICE_MS) ? BOARD_SLICE_MS : left;
        struct timespec ts = {.tv_sec = slice / 1000, .tv_nsec = (long)(slice % 1000) * 1000000L};
        atomic_fetch_add(&c->sleepers, 1);
        uint32_t seen = atomic_load(&c->round); /* after announcing: a post from now on wakes us */
        if ((int32_t)(seen - round) < 0) futex_op(&c->round, FUTEX_WAIT, seen, &ts);
        atomic_fetch_sub(&c->sleepers, 1);
        if (s_reached(c, round)) break;
        int32_t pid = atomic_load(&c->pid);
        if (pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
            return err_set(ERR_PEER, "board: rank %d (pid %d) died", r, (int)pid);
    }
    return 0;
}

int board_exchange(board_t *self, const void *const **all, int timeout_ms)
{
    uint32_t round = ++self->round;
    board_ctl_t *me = &self->ctl[self->rank];
    atomic_store(&me->round, round); /* seq_cst: ordered before the sleepers load (and the buffer before it) */
    if (atomic_load(&me->sleepers)) futex_op(&me->round, FUTEX_WAKE, INT32_MAX, NULL);
    uint64_t t = now_ns(), dl = deadline_in(timeout_ms);
    uint64_t spin_end = t + (uint64_t)self->spin_us * 1000u;
    uint64_t yield_end = spin_end + (uint64_t)self->yield_us * 1000u;
    for (int k = 1; k < self->world; k++) {
        int r = (self->rank + k) % self->world;
        tp_wait_mark(self->comm ? self->comm->tp : NULL, r, 0); /* for a step's timeout to name r */
        int rc = s_wait(self, r, round, dl, spin_end, yield_end);
        if (rc < 0) return rc; /* r stays marked */
        tp_wait_mark(self->comm ? self->comm->tp : NULL, -1, 0); /* a round not everyone posted: the collective has failed */
    }
    for (int r = 0; r < self->world; r++) self->all[r] = s_buf(self, r, round);
    *all = self->all;
    return 0;
}
