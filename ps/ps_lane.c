/* ps_lane.c: the PS's shared-memory lane (ps_lane.h): one mapping per (worker, server) pair on a host,
 * two single-producer single-consumer rings of fixed 1 KiB slots with C11 acquire/release counters, a
 * sleeping flag per ring for the wake-up protocol, and a poll that watches lanes and ZeroMQ together.
 * Layout: a 64-byte header (magic), the request ring's control lines, the reply ring's, then the
 * request slots and the reply slots. A slot: u32 used bytes, u32 frame count, u64 zseq, u32 length per
 * frame, the frames' bytes. */
#include "ps/ps_lane.h"
#include "core/auth.h"
#include "core/err.h"
#include "core/timer.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LANE_MAGIC 0x314e414c53505342ull /* "BSPSLAN1" */
#define LANE_SPIN_US 30                  /* spin this long before sleeping when every rank has a core */
#define LANE_SLOT_HDR 16                 /* used, nfr, zseq */

typedef struct {
    _Atomic uint64_t head;      /* messages published (producer) */
    char pad0[56];
    _Atomic uint64_t tail;      /* messages taken (consumer) */
    char pad1[56];
    _Atomic uint32_t sleeping;  /* the consumer is (about to be) blocked in zmq_poll */
    char pad2[60];
} ring_ctl_t;

typedef struct {
    uint64_t magic;
    char pad[56];
    ring_ctl_t req, rep;
} lane_hdr_t;

struct ps_lane {
    void *map;
    size_t map_len;
    ring_ctl_t *tx, *rx;        /* ours to produce on / consume from */
    unsigned char *txs, *rxs;   /* their slots */
    uint64_t tx_head, rx_tail;  /* our private copies (the shared ones are not trusted) */
    int broken;
    char name[PS_LANE_NAME_MAX];
    int named;                  /* the creator still owns a name to unlink */
};

static size_t s_map_len(void) { return sizeof(lane_hdr_t) + 2 * (size_t)PS_LANE_SLOTS * PS_LANE_SLOT_BYTES; }

static int s_map(ps_lane_t **self_p, int fd, int worker, const char *name)
{
    size_t len = s_map_len();
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return err_set(ERR_SYS, "ps lane: mmap %s: %s", name, strerror(errno));
    ps_lane_t *self = calloc(1, sizeof *self);
    if (!self) {
        munmap(p, len);
        return ERR_NOMEM;
    }
    lane_hdr_t *hd = p;
    unsigned char *slots = (unsigned char *)p + sizeof(lane_hdr_t);
    unsigned char *req = slots, *rep = slots + (size_t)PS_LANE_SLOTS * PS_LANE_SLOT_BYTES;
    self->map = p;
    self->map_len = len;
    self->tx = worker ? &hd->req : &hd->rep;
    self->rx = worker ? &hd->rep : &hd->req;
    self->txs = worker ? req : rep;
    self->rxs = worker ? rep : req;
    snprintf(self->name, sizeof self->name, "%s", name);
    *self_p = self;
    return 0;
}

int ps_lane_create(ps_lane_t **self_p, char name[PS_LANE_NAME_MAX])
{
    unsigned char rnd[AUTH_NONCE_BYTES];
    auth_challenge(rnd);
    int n = snprintf(name, PS_LANE_NAME_MAX, "/sb-psl-");
    for (size_t i = 0; i < sizeof rnd && i < 16; i++) n += snprintf(name + n, (size_t)(PS_LANE_NAME_MAX - n), "%02x", rnd[i]);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(ERR_SYS, "ps lane: shm_open %s: %s", name, strerror(errno));
    int e = fchmod(fd, 0600) ? errno : posix_fallocate(fd, 0, (off_t)s_map_len());
    if (e) {
        close(fd);
        shm_unlink(name);
        return err_set(e == ENOSPC ? ERR_NOSPC : ERR_SYS, "ps lane %s (%zu bytes): %s", name, s_map_len(), strerror(e));
    }
    int rc = s_map(self_p, fd, 1, name);
    close(fd);
    if (rc < 0) {
        shm_unlink(name);
        return rc;
    }
    ((lane_hdr_t *)(*self_p)->map)->magic = LANE_MAGIC;
    (*self_p)->named = 1;
    return 0;
}

int ps_lane_open(ps_lane_t **self_p, const char *name, size_t name_len)
{
    char nm[PS_LANE_NAME_MAX];
    /* only names ps_lane_create makes: "/sb-psl-" and 32 hex digits */
    int ok = name_len == 8 + 32 && memcmp(name, "/sb-psl-", 8) == 0;
    for (size_t i = 8; ok && i < name_len; i++) ok = (name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f');
    if (!ok) return err_set(ERR_PROTO, "ps lane: not a lane name");
    memcpy(nm, name, name_len);
    nm[name_len] = 0;
    int fd = shm_open(nm, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(errno == EACCES ? ERR_AUTH : ERR_SYS, "ps lane: shm_open %s: %s", nm, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size != s_map_len()) {
        close(fd);
        return err_set(ERR_AUTH, "ps lane: %s is not a lane of this user (want uid %u, mode 0600, %zu bytes)", nm,
                       (unsigned)geteuid(), s_map_len());
    }
    int rc = s_map(self_p, fd, 0, nm);
    close(fd);
    shm_unlink(nm); /* mapped: the name is not needed any more, nothing is left behind */
    if (rc < 0) return rc;
    lane_hdr_t *hd = (*self_p)->map;
    if (hd->magic != LANE_MAGIC || atomic_load(&hd->req.head) || atomic_load(&hd->rep.tail)) {
        ps_lane_destroy(self_p);
        return err_set(ERR_PROTO, "ps lane: %s is not a fresh lane", nm);
    }
    return 0;
}

void ps_lane_unlink(ps_lane_t *self)
{
    if (self && self->named) shm_unlink(self->name);
    if (self) self->named = 0;
}

void ps_lane_destroy(ps_lane_t **self_p)
{
    ps_lane_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    ps_lane_unlink(self);
    munmap(self->map, self->map_len);
    free(self);
    *self_p = NULL;
}

int ps_lane_ok(const ps_lane_t *self) { return self && !self->broken; }

int ps_lane_send(ps_lane_t *self, const wire_hdr_t *h, const ps_frame_t *fr, int nfr, uint64_t zseq,
                 uint64_t *bytes, int *wake)
{
    *wake = 0;
    if (!self || self->broken || nfr < 0 || nfr + 1 > PS_VAN_MAX_FRAMES) return 0;
    unsigned char hdr[WIRE_HDR_MAX];
    int hl = wire_encode(h, hdr, sizeof hdr);
    if (hl < 0) return 0;
    size_t need = LANE_SLOT_HDR + 4 * (size_t)(nfr + 1) + (size_t)hl;
    for (int i = 0; i < nfr; i++) need += fr[i].len;
    if (need > PS_LANE_SLOT_BYTES) return 0;
    uint64_t tail = atomic_load_explicit(&self->tx->tail, memory_order_acquire);
    if (tail > self->tx_head || self->tx_head - tail > PS_LANE_SLOTS) {
        self->broken = 1; /* the consumer's counter jumped: use ZeroMQ from now on */
        return 0;
    }
    if (self->tx_head - tail == PS_LANE_SLOTS) return 0; /* full */
    unsigned char *s = self->txs + (self->tx_head % PS_LANE_SLOTS) * PS_LANE_SLOT_BYTES;
    uint32_t used = (uint32_t)need, n = (uint32_t)nfr + 1, len = (uint32_t)hl;
    memcpy(s, &used, 4);
    memcpy(s + 4, &n, 4);
    memcpy(s + 8, &zseq, 8);
    size_t at = LANE_SLOT_HDR + 4 * (size_t)n;
    memcpy(s + LANE_SLOT_HDR, &len, 4);
    memcpy(s + at, hdr, (size_t)hl);
    at += (size_t)hl;
    for (int i = 0; i < nfr; i++) {
        len = (uint32_t)fr[i].len;
        memcpy(s + LANE_SLOT_HDR + 4 * (size_t)(i + 1), &len, 4);
        if (fr[i].len) memcpy(s + at, fr[i].data, fr[i].len);
        at += fr[i].len;
    }
    self->tx_head++;
    /* seq_cst store, then the flag: either the consumer's re-check sees this message or we see its flag */
    atomic_store(&self->tx->head, self->tx_head);
    if (atomic_load(&self->tx->sleeping) && atomic_exchange(&self->tx->sleeping, 0)) *wake = 1;
    for (int i = 0; i < nfr; i++)
        if (fr[i].zc && fr[i].ffn) fr[i].ffn((void *)fr[i].data, fr[i].hint); /* copied: released */
    if (bytes) *bytes += need;
    return 1;
}

void ps_lane_send_raw(ps_lane_t *self, const void *slot, size_t len, uint64_t advance)
{
    if (!self || len > PS_LANE_SLOT_BYTES) return;
    memcpy(self->txs + (self->tx_head % PS_LANE_SLOTS) * PS_LANE_SLOT_BYTES, slot, len);
    self->tx_head += advance;
    atomic_store(&self->tx->head, self->tx_head);
}

int ps_lane_ready(const ps_lane_t *self)
{
    return self && !self->broken && atomic_load_explicit(&self->rx->head, memory_order_acquire) != self->rx_tail;
}

static int s_bad(ps_lane_t *self, int broken, const char *what)
{
    if (broken) self->broken = 1;
    return err_set(ERR_PROTO, "malformed shared-memory lane message: %s", what);
}

int ps_lane_recv(ps_lane_t *self, ps_vmsg_t *m, const void *ident, size_t idlen, uint64_t zgot)
{
    ps_van_msg_reset(m);
    if (!self || self->broken) return 0;
    uint64_t head = atomic_load_explicit(&self->rx->head, memory_order_acquire);
    if (head == self->rx_tail) return 0;
    if (head < self->rx_tail || head - self->rx_tail > PS_LANE_SLOTS)
        return s_bad(self, 1, "the ring's head counter jumped");
    /* copy the slot out first: the producer may rewrite it while we parse */
    unsigned char s[PS_LANE_SLOT_BYTES];
    memcpy(s, self->rxs + (self->rx_tail % PS_LANE_SLOTS) * PS_LANE_SLOT_BYTES, sizeof s);
    uint64_t zseq;
    memcpy(&zseq, s + 8, 8);
    if (zseq > zgot) return 0; /* a ZeroMQ message sent before it has not arrived yet */
    self->rx_tail++;
    atomic_store_explicit(&self->rx->tail, self->rx_tail, memory_order_release);
    uint32_t used, n;
    memcpy(&used, s, 4);
    memcpy(&n, s + 4, 4);
    int base = idlen ? 1 : 0;
    /* no sum or product of untrusted counts before they are bounded: n + base and 4 n wrapped around */
    if (n < 1 || n > (uint32_t)(PS_VAN_MAX_FRAMES - base) || used > sizeof s || used < LANE_SLOT_HDR + 4 * (size_t)n)
        return s_bad(self, 0, "bad frame count or size");
    size_t at = LANE_SLOT_HDR + 4 * (size_t)n;
    if (idlen) {
        if (zmq_msg_init_size(&m->f[0], idlen) != 0) return ERR_NOMEM;
        memcpy(zmq_msg_data(&m->f[0]), ident, idlen);
        m->n = 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        memcpy(&len, s + LANE_SLOT_HDR + 4 * (size_t)i, 4);
        if (len > used - at) {
            ps_van_close_msg(m);
            return s_bad(self, 0, "a frame runs past its slot");
        }
        if (zmq_msg_init_size(&m->f[m->n], len) != 0) {
            ps_van_close_msg(m);
            return ERR_NOMEM;
        }
        if (len) memcpy(zmq_msg_data(&m->f[m->n]), s + at, len);
        m->n++;
        at += len;
    }
    if (at != used) {
        ps_van_close_msg(m);
        return s_bad(self, 0, "trailing bytes in its slot");
    }
    m->bytes = used;
    return 1;
}

static int s_any_ready(ps_lane_t *const *lanes, int nl)
{
    for (int i = 0; i < nl; i++)
        if (lanes[i] && ps_lane_ready(lanes[i])) return 1;
    return 0;
}

static void s_sleeping(ps_lane_t *const *lanes, int nl, uint32_t v)
{
    for (int i = 0; i < nl; i++)
        if (lanes[i] && !lanes[i]->broken) atomic_store(&lanes[i]->rx->sleeping, v);
}

int ps_lane_poll(ps_lane_t *const *lanes, int nl, zmq_pollitem_t *items, int ni, int timeout_ms, int yield_us)
{
    if (timeout_ms == 0) {
        int rc = zmq_poll(items, ni, 0);
        return rc >= 0 && s_any_ready(lanes, nl) ? rc + 1 : rc;
    }
    int lanes_up = 0;
    for (int i = 0; i < nl; i++) lanes_up |= lanes[i] && !lanes[i]->broken;
    if (yield_us > 0 || lanes_up) { /* no lane and a core each: block at once, as plain ZeroMQ would */
        uint64_t until = now_ns() + (uint64_t)(yield_us > 0 ? yield_us : LANE_SPIN_US) * 1000u;
        unsigned it = 0;
        do {
            if (s_any_ready(lanes, nl)) {
                int rc = zmq_poll(items, ni, 0);
                return rc < 0 ? rc : rc + 1;
            }
            /* ZeroMQ's own check costs more than a look at the rings: every few rounds when spinning */
            if (yield_us > 0 || (it++ & 7) == 0) {
                int rc = zmq_poll(items, ni, 0);
                if (rc != 0) return rc;
            }
            if (yield_us > 0) sched_yield();
        } while (now_ns() < until);
    }
    s_sleeping(lanes, nl, 1);
    int rc;
    if (s_any_ready(lanes, nl)) { /* published between our last look and the flag */
        rc = zmq_poll(items, ni, 0);
        if (rc >= 0) rc++;
    } else {
        rc = zmq_poll(items, ni, timeout_ms);
        if (rc >= 0 && s_any_ready(lanes, nl)) rc++;
    }
    s_sleeping(lanes, nl, 0);
    return rc;
}
