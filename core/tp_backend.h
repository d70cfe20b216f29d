/* tp_backend.h: the transport's backend table (internal to core/tp*.c; modelled on NCCL's
 * ncclTransport). core/tp.c picks one backend per peer and calls through this table; each backend
 * (core/tp_shm.c, core/tp_tcp.c, core/tp_zmq.c) keeps one instance for all its peers and moves
 * slot-sized segments in FIFO order per ordered pair of ranks. Never include it outside core/tp*.c. */
#ifndef SB_TP_BACKEND_H
#define SB_TP_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include "core/tp.h"
#include "core/auth.h"

#define TP_MAX_SLOTS 64      /* most segments in flight per channel */
#define TP_SLICE_MS 100      /* longest single sleep of a wait, so deadlines and peers get checked */

/* What a backend instance is opened with (valid only during open; copy what you keep). */
typedef struct {
    const tp_env_t *env;
    const char *prefix;      /* this run's name: "sb.<job tag>.<random nonce hex>" (channel names, store keys) */
    size_t slot_bytes;       /* largest segment */
    int slots;               /* segments in flight per channel */
    int no_yield;            /* tp_opts_t's */
} tp_backend_cfg_t;

/* tp.c has already checked peer (a valid rank other than this one) and, for send_commit, that
 * len <= slot_bytes. Returns are 0 or negative codes from core/err.h. */
typedef struct tp_backend {
    const char *name;        /* what tp_kind() says: "shm", "tcp", "zmq" */
    int  (*open)(void **be_p, const tp_backend_cfg_t *cfg);
    void (*destroy)(void **be_p);
    int  (*send_acquire)(void *be, int peer, void **buf, int timeout_ms);
    int  (*send_commit)(void *be, int peer, size_t len, int timeout_ms);
    int  (*recv_acquire)(void *be, int peer, const void **buf, size_t *len, int timeout_ms);
    /* *len gets the size of the segment released (for tp_counters) */
    int  (*recv_release)(void *be, int peer, size_t *len);
    /* Remove names a killed job left behind (NULL when the backend leaves none). */
    void (*cleanup_job)(const char *job);
} tp_backend_t;

extern const tp_backend_t tp_backend_shm, tp_backend_tcp, tp_backend_zmq;

/* The context a backend's hello MAC covers (core/auth.h): the run's name (prefix), then the sending
 * and receiving ranks; at most 128 bytes (a longer prefix is cut). Returns its length. */
size_t tp_auth_ctx(const char *prefix, int from, int to, unsigned char out[128]);

/* The job id as it appears in names: its tag (auth_job_tag: 16 hex digits of a hash), never the id. */
void tp_job_name(const char *job, char *out, size_t len);

#endif
