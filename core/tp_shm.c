/* tp_shm.c: shared-memory backend of the transport, for ranks on the same host.
 *
 * One shared mapping per (src, dst), named "/<prefix>.<src>.<dst>", holding `slots` slots of
 * `slot_bytes` each and a header with a 32-bit head (segments committed by the producer) and tail
 * (segments released by the consumer). The producer writes straight into slot head % slots (so an
 * algorithm can reduce into it), then publishes with a release store; the consumer reads the slot in
 * place and releases it: a segment is never copied by the transport. Waiting spins briefly (only when
 * ranks do not outnumber cores) and then sleeps on a futex in the shared page; the other side wakes it
 * only when a waiter flag is set. Sleeps are sliced so the deadline and the peer's liveness (its pid)
 * are checked: a dead peer gives ERR_PEER, a slow one ERR_TIMEOUT, and one stopped (SIGSTOP, a debugger:
 * state T in /proc) for half the timeout (1 to 10 s) ERR_PEER naming it, unless harness's launcher, which
 * watches its ranks' states itself, started this rank (SYNCBENCH_LAUNCHED). Channels open lazily; the second
 * side to open one removes its name, and tp_cleanup_job removes names a killed rank left behind.
 *
 * Names are "/sb.<job tag>.<random run nonce>.<src>.<dst>" (the job id itself never appears). The
 * first side to open creates the name with O_CREAT|O_EXCL, mode 0600, and reserves its whole size with
 * posix_fallocate, so a /dev/shm too small fails here with "need N bytes in /dev/shm (have M)" instead
 * of a SIGBUS later. The second side opens the existing name and checks it (fstat) before mapping it:
 * ours (our uid), mode 0600, a regular object of exactly the channel's size; anything else (a name
 * someone else created or planted) is an error naming it. A run's nonce is random, so a name left by a
 * dead earlier run never collides with this run's (tp_cleanup_job removes those). */
#include "core/tp_backend.h"
#include "core/err.h"
#include "core/futex.h"
#include "core/proc.h"
#include "core/timer.h"
#include <dirent.h>
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
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Atomic uint32_t head;
    char pad0[60];
    _Atomic uint32_t tail;
    char pad1[60];
    _Atomic uint32_t cons_wait;
    _Atomic uint32_t prod_wait;
    _Atomic uint32_t opened;
    uint32_t slots;
    uint64_t slot_bytes;
    _Atomic int32_t prod_pid;
    _Atomic int32_t cons_pid;
    char pad2[24];
    uint64_t len[TP_MAX_SLOTS];
} shm_hdr_t;

#define SHM_HDR_BYTES 4096

typedef struct {
    shm_hdr_t *h;
    char *data;
    size_t map_len;
    uint32_t pos;       /* producer: next head; consumer: next tail */
    int acquired;
} shm_chan_t;

typedef struct {
    int rank, world;
    size_t slot_bytes;
    int slots;
    int spin;           /* microseconds to spin before sleeping on the futex */
    int yield_us;       /* then microseconds to yield the core before sleeping */
    int stop_ms;        /* a peer stopped this long fails the wait (0: the launcher watches) */
    char prefix[96];
    shm_chan_t **tx, **rx;
} shm_t;

/* ---------- futex wait / wake ---------- */

static int s_peer_dead(_Atomic int32_t *pid)
{
    int32_t p = atomic_load(pid);
    return p > 0 && kill(p, 0) < 0 && errno == ESRCH;
}

/* Wait until *word != old. */
static int s_wait_change(shm_t *self, _Atomic uint32_t *word, uint32_t old, _Atomic uint32_t *flag,
                         _Atomic int32_t *peer_pid, uint64_t dl, int peer)
{
    if (self->spin > 0) {
        /* spin for at most spin microseconds: cheap hand-offs when every rank has a core, bounded
         * waste when something else holds the peer's core */
        uint64_t until = now_ns() + (uint64_t)self->spin * 1000u;
        do {
            for (int i = 0; i < 64; i++) {
                if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
                futex_pause();
            }
        } while (now_ns() < until);
    }
    if (self->yield_us > 0) {
        /* ranks outnumber cores: hand the core to another rank (likely the one we wait for) rather
         * than sleep, since a futex wake-up in a VM costs tens of microseconds */
        uint64_t until = now_ns() + (uint64_t)self->yield_us * 1000u;
        do {
            if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
            sched_yield();
        } while (now_ns() < until);
    }
    uint64_t stopped_at = 0; /* when the peer was first seen stopped in this wait */
    for (;;) {
        atomic_store(flag, 1);
        if (atomic_load(word) != old) {
            atomic_store(flag, 0);
            return 0;
        }
        int left = deadline_left_ms(dl);
        if (left == 0) {
            atomic_store(flag, 0);
            return err_set(ERR_TIMEOUT, "transport: rank %d waited too long for rank %d (shm)", self->rank, peer);
        }
        int slice = (left < 0 || left > TP_SLICE_MS) ? TP_SLICE_MS : left;
        struct timespec ts = {.tv_sec = slice / 1000, .tv_nsec = (long)(slice % 1000) * 1000000L};
        futex_op(word, FUTEX_WAIT, old, &ts);
        atomic_store(flag, 0);
        if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
        if (s_peer_dead(peer_pid))
            return err_set(ERR_PEER, "transport: rank %d (pid %d) died", peer, (int)atomic_load(peer_pid));
        if (self->stop_ms > 0 && proc_stopped((int)atomic_load(peer_pid))) {
            uint64_t t = now_ns();
            if (!stopped_at) stopped_at = t;
            else if (t - stopped_at >= (uint64_t)self->stop_ms * 1000000u)
                return err_set(ERR_PEER, "transport: rank %d (pid %d) has been stopped (SIGSTOP or a debugger) for %.1f s "
                                         "(the limit: half the timeout, 1 to 10 s); rank %d stops waiting for it",
                               peer, (int)atomic_load(peer_pid), (double)(t - stopped_at) / 1e9, self->rank);
        } else {
            stopped_at = 0;
        }
    }
}

static inline void s_wake(_Atomic uint32_t *word, _Atomic uint32_t *flag)
{
    if (atomic_load(flag)) futex_op(word, FUTEX_WAKE, 1, NULL);
}

/* ---------- channels ---------- */

static void s_chan_name(shm_t *self, int src, int dst, char *out, size_t len)
{
    snprintf(out, len, "/%s.%d.%d", self->prefix, src, dst);
}

/* Create the name (O_EXCL, 0600) and reserve len bytes: the fd, or a negative code (the name is gone). */
static int s_chan_create(const char *name, size_t len, int fd)
{
    if (fchmod(fd, 0600) != 0) { /* whatever the umask left */
        int e = errno;
        return err_set(ERR_SYS, "shm channel %s: fchmod: %s", name, strerror(e));
    }
    int e = posix_fallocate(fd, 0, (off_t)len);
    if (e == 0) return 0;
    if (e == ENOSPC || e == EFBIG) {
        struct statvfs vs;
        unsigned long long have = statvfs("/dev/shm", &vs) == 0 ? (unsigned long long)vs.f_bavail * vs.f_frsize : 0;
        return err_set(ERR_NOSPC, "shm channel %s: need %zu bytes in /dev/shm (have %llu): free some, enlarge it "
                       "(docker --shm-size), or use smaller/fewer slots (SYNCBENCH_SHM_SLOT_KB, SYNCBENCH_SHM_SLOTS)",
                       name, len, have);
    }
    return err_set(ERR_SYS, "shm channel %s (%zu bytes): posix_fallocate: %s", name, len, strerror(e));
}

/* The peer created the name: wait (until dl) until it has its full size, then check it is ours. */
static int s_chan_check(const char *name, size_t len, int fd, uint64_t dl)
{
    for (;;) {
        struct stat st;
        if (fstat(fd, &st) != 0) return err_set(ERR_SYS, "shm channel %s: fstat: %s", name, strerror(errno));
        /* a mode within 0600 may still be the creator's umask, before its fchmod */
        if (st.st_uid != geteuid() || (st.st_mode & 07777 & ~0600u) || !S_ISREG(st.st_mode) ||
            (size_t)st.st_size > len || ((size_t)st.st_size == len && (st.st_mode & 07777) != 0600))
            return err_set(ERR_AUTH, "shared-memory name %s already exists and is not this run's channel (owner uid %u, "
                           "mode %04o, %lld bytes; want uid %u, mode 0600, %zu bytes): refusing it", name,
                           (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (long long)st.st_size,
                           (unsigned)geteuid(), len);
        if ((size_t)st.st_size == len && (st.st_mode & 07777) == 0600) return 0;
        if (deadline_passed(dl))
            return err_set(ERR_TIMEOUT, "shm channel %s stayed at %lld of %zu bytes", name, (long long)st.st_size, len);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int s_chan_open(shm_t *self, int src, int dst, shm_chan_t **out, uint64_t dl)
{
    char name[160];
    s_chan_name(self, src, dst, name, sizeof name);
    size_t len = SHM_HDR_BYTES + (size_t)self->slots * self->slot_bytes;
    int fd = -1;
    for (int tries = 0; fd < 0; tries++) {
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            int rc = s_chan_create(name, len, fd);
            if (rc < 0) {
                close(fd);
                shm_unlink(name);
                return rc;
            }
            break;
        }
        if (errno != EEXIST) return err_set(errno == EACCES ? ERR_AUTH : ERR_SYS, "shm_open %s: %s", name, strerror(errno));
        fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            int rc = s_chan_check(name, len, fd, dl);
            if (rc < 0) {
                close(fd);
                return rc;
            }
            break;
        }
        if (errno != ENOENT || tries > 100)
            return err_set(errno == EACCES ? ERR_AUTH : ERR_SYS, "shm_open %s (made by someone else): %s", name,
                           strerror(errno));
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return err_set(ERR_SYS, "mmap %s: %s", name, strerror(errno));
    shm_chan_t *c = calloc(1, sizeof *c);
    if (!c) { munmap(p, len); return ERR_NOMEM; }
    c->h = p;
    c->data = (char *)p + SHM_HDR_BYTES;
    c->map_len = len;
    if (src == self->rank) atomic_store(&c->h->prod_pid, (int32_t)getpid());
    else atomic_store(&c->h->cons_pid, (int32_t)getpid());
    /* the second side to open removes the name: the mapping lives on, nothing is left behind */
    if (atomic_fetch_add(&c->h->opened, 1) == 1) shm_unlink(name);
    *out = c;
    return 0;
}

/* Unmap a channel; its name goes too, in case the peer never opened it. */
static void s_chan_close(shm_t *self, int src, int dst, shm_chan_t **cp)
{
    if (!*cp) return;
    char name[160];
    s_chan_name(self, src, dst, name, sizeof name);
    shm_unlink(name);
    munmap((*cp)->h, (*cp)->map_len);
    free(*cp);
    *cp = NULL;
}

/* ---------- backend ---------- */

static void s_destroy(void **be_p)
{
    shm_t *self = be_p ? *be_p : NULL;
    if (!self) return;
    for (int r = 0; r < self->world; r++) {
        if (self->tx) s_chan_close(self, self->rank, r, &self->tx[r]);
        if (self->rx) s_chan_close(self, r, self->rank, &self->rx[r]);
    }
    free(self->tx);
    free(self->rx);
    free(self);
    *be_p = NULL;
}

static int s_open(void **be_p, const tp_backend_cfg_t *cfg)
{
    shm_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->rank = cfg->env->rank;
    self->world = cfg->env->world;
    self->slot_bytes = cfg->slot_bytes;
    self->slots = cfg->slots;
    snprintf(self->prefix, sizeof self->prefix, "%s", cfg->prefix);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int oversub = cfg->env->local_world > ncpu;
    self->spin = oversub ? 0 : 50; /* microseconds */
    self->yield_us = oversub && !cfg->no_yield ? 2000 : 0;
    /* a stopped peer: half the timeout, 1 to 10 s, as harness's launcher rules for the ranks it starts (and watches) */
    self->stop_ms = getenv("SYNCBENCH_LAUNCHED") ? 0 : proc_stop_limit_ms(cfg->env->timeout_ms);
    const char *e = getenv("SYNCBENCH_SHM_SPIN_US");
    if (e) self->spin = atoi(e);
    e = getenv("SYNCBENCH_SHM_YIELD_US");
    if (e) self->yield_us = atoi(e);
    self->tx = calloc((size_t)self->world, sizeof(shm_chan_t *));
    self->rx = calloc((size_t)self->world, sizeof(shm_chan_t *));
    if (!self->tx || !self->rx) {
        void *p = self;
        s_destroy(&p);
        return ERR_NOMEM;
    }
    *be_p = self;
    return 0;
}

static int s_send_acquire(void *be, int peer, void **buf, int timeout_ms)
{
    shm_t *self = be;
    if (!self->tx[peer]) CHECK(s_chan_open(self, self->rank, peer, &self->tx[peer], deadline_in(timeout_ms)));
    shm_chan_t *c = self->tx[peer];
    if (!c->acquired) {
        uint32_t tail = atomic_load_explicit(&c->h->tail, memory_order_acquire);
        uint64_t dl = UINT64_MAX;
        int first = 1;
        while (c->pos - tail >= (uint32_t)self->slots) {
            if (first) { dl = deadline_in(timeout_ms); first = 0; }
            CHECK(s_wait_change(self, &c->h->tail, tail, &c->h->prod_wait, &c->h->cons_pid, dl, peer));
            tail = atomic_load_explicit(&c->h->tail, memory_order_acquire);
        }
        c->acquired = 1;
    }
    *buf = c->data + (size_t)(c->pos % (uint32_t)self->slots) * self->slot_bytes;
    return 0;
}

static int s_send_commit(void *be, int peer, size_t len, int timeout_ms)
{
    (void)timeout_ms; /* never waits: the slot was reserved by acquire */
    shm_t *self = be;
    shm_chan_t *c = self->tx[peer];
    if (!c || !c->acquired) return err_set(ERR_STATE, "transport: commit without acquire");
    c->h->len[c->pos % (uint32_t)self->slots] = len;
    c->pos++;
    c->acquired = 0;
    atomic_store(&c->h->head, c->pos);
    s_wake(&c->h->head, &c->h->cons_wait);
    return 0;
}

static int s_recv_acquire(void *be, int peer, const void **buf, size_t *len, int timeout_ms)
{
    shm_t *self = be;
    if (!self->rx[peer]) CHECK(s_chan_open(self, peer, self->rank, &self->rx[peer], deadline_in(timeout_ms)));
    shm_chan_t *c = self->rx[peer];
    uint32_t head = atomic_load_explicit(&c->h->head, memory_order_acquire);
    if (head == c->pos) {
        uint64_t dl = deadline_in(timeout_ms);
        while (head == c->pos) {
            CHECK(s_wait_change(self, &c->h->head, head, &c->h->cons_wait, &c->h->prod_pid, dl, peer));
            head = atomic_load_explicit(&c->h->head, memory_order_acquire);
        }
    }
    uint32_t slot = c->pos % (uint32_t)self->slots;
    uint64_t l = c->h->len[slot];
    if (l > self->slot_bytes) return err_set(ERR_PROTO, "transport: corrupt segment length %llu from rank %d", (unsigned long long)l, peer);
    c->acquired = 1;
    *buf = c->data + (size_t)slot * self->slot_bytes;
    *len = (size_t)l;
    return 0;
}

static int s_recv_release(void *be, int peer, size_t *len)
{
    shm_t *self = be;
    shm_chan_t *c = self->rx[peer];
    if (!c || !c->acquired) return err_set(ERR_STATE, "transport: release without acquire");
    *len = (size_t)c->h->len[c->pos % (uint32_t)self->slots];
    c->pos++;
    c->acquired = 0;
    atomic_store(&c->h->tail, c->pos);
    s_wake(&c->h->tail, &c->h->prod_wait);
    return 0;
}

/* Every channel name of a job starts with "sb.<job name>." (the prefix tp.c builds). */
static void s_cleanup_job(const char *job)
{
    char name[48], pre[64];
    tp_job_name(job, name, sizeof name);
    int pl = snprintf(pre, sizeof pre, "sb.%s.", name);
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, pre, (size_t)pl)) continue;
        char path[300];
        snprintf(path, sizeof path, "/%s", e->d_name);
        shm_unlink(path);
    }
    closedir(d);
}

const tp_backend_t tp_backend_shm = {
    .name = "shm",
    .open = s_open,
    .destroy = s_destroy,
    .send_acquire = s_send_acquire,
    .send_commit = s_send_commit,
    .recv_acquire = s_recv_acquire,
    .recv_release = s_recv_release,
    .cleanup_job = s_cleanup_job,
};
