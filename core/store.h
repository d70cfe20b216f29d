/* store.h: the rendezvous key-value store: the public calls every module uses (set / get-with-wait /
 * add / del) and the small interface each store kind implements (gloo's rendezvous::Store): a ZeroMQ
 * server and client for tcp:// and env:// (core/store_zmq.c), plain files in a shared directory for
 * file:// (core/store_file.c). core/boot.c joins the ranks through this interface (store_new) and
 * dispatches every call to it; nothing outside these files branches on the store kind. */
#ifndef SB_STORE_H
#define SB_STORE_H
#include <stddef.h>
#include <stdint.h>

typedef struct boot_cfg boot_cfg_t;   /* core/boot.h */
typedef struct store store_t;

/* Limits of the store: keys are NUL-terminated strings of 1..STORE_KEY_MAX bytes; values hold at most
 * STORE_VAL_MAX bytes. */
#define STORE_KEY_MAX 256
#define STORE_VAL_MAX (1 << 28)

/* Join the rendezvous. tcp/env: rank 0 hosts a ZeroMQ server on host:port (ERR_ADDRINUSE with a clear
 * detail if the port is taken), every rank connects and says hello with (rank, world); the server
 * rejects a world that disagrees (ERR_MISMATCH) or a rank already joined (ERR_DUP); an unreachable
 * master gives ERR_TIMEOUT after cfg->timeout_ms. With a job secret (cfg->auth, core/auth.h) server and
 * client prove knowledge of it by challenge-response before the hello counts: a client that cannot is
 * turned away with ERR_AUTH and registers nothing, and a client refuses a server that cannot (ERR_AUTH).
 * Without one the join goes ahead after a one-line warning, unless cfg->auth.require (ERR_AUTH). file: the same checks through files created with
 * O_EXCL in the shared directory. Returns when every rank has joined; a timeout detail says either
 * "could not reach master HOST:PORT" or "only K of W ranks joined ... (missing: ...)". tcp/env: a peer that
 * fails the CURVE handshake (another job secret, or none) is said by rank 0 at once ("store: N connections
 * (latest from ADDR:PORT) refused (why...); still waiting for rank(s) R ...") and named in a timeout's detail,
 * but never ends the join: an outsider's failed handshake cannot be told from a misconfigured rank's.
 * file:// naming: every file is "<tag>@..." (tag: auth_job_tag of the job id) in the directory (created
 * 0700 if needed; files 0600); the last rank to
 * leave removes them. Files left by a crashed run with the same job id make the next run fail with
 * ERR_DUP / ERR_MISMATCH naming them: remove them, use a fresh directory or another SYNCBENCH_JOB.
 * A store_t may be shared between threads, but calls are serialized: a waiting get holds up the
 * others on the same store_t. Not usable across fork(). */
int  store_new(store_t **self_p, const boot_cfg_t *cfg);
int  store_set(store_t *self, const char *key, const void *val, size_t len);
/* Wait until key exists (or timeout_ms; < 0 = cfg->timeout_ms), then return a malloc'd copy in *val
 * (caller frees; NUL-terminated one byte past *len for convenience). ERR_TIMEOUT if never set. */
int  store_get(store_t *self, const char *key, void **val, size_t *len, int timeout_ms);
/* Atomically add delta to the integer counter key (created at 0) and return the new value. Counters are
 * stored as decimal text, so store_get on the key reads e.g. "3"; add on a non-number is ERR_INVAL. */
int  store_add(store_t *self, const char *key, int64_t delta, int64_t *out);
/* Remove key (absent is fine). */
int  store_del(store_t *self, const char *key);
/* Leave: rank 0 keeps serving until every rank has left (bounded by the timeout). Safe twice. */
void store_destroy(store_t **self_p);
/* Leave after a failure, without waiting for the others: rank 0's server stops at once, another rank
 * waits at most STORE_ABANDON_MS for its leave to be answered. Safe twice. */
#define STORE_ABANDON_MS 300
void store_abandon(store_t **self_p);

/* ---------------- the interface a store kind implements ---------------- */

/* Who had joined when a wait for every rank ran out of time. */
typedef struct {
    int  joined;          /* ranks that had joined */
    char missing[512];    /* "1, 3" (then whatever the store adds, e.g. "; turned away: ...") */
    char where[1100];     /* appended to the detail as is (" in /shared/dir"), or "" */
} store_wait_t;

/* One store kind. core/boot.c validates every argument (cfg valid, keys 1..STORE_KEY_MAX bytes, values
 * at most STORE_VAL_MAX, timeouts resolved) and serializes the calls; the ops only do the work and
 * err_set a detail. cfg stays valid (and unchanged) until destroy. */
typedef struct {
    const char *name;
    /* Set up: connect to the master / start its server (rank 0) / create the directory. *impl_p is set
     * whenever something was allocated, also on failure, so that destroy(impl, 0) can undo it. */
    int  (*open)(void **impl_p, const boot_cfg_t *cfg, uint64_t deadline);
    /* Register (cfg->rank, cfg->world) under cfg->job: ERR_MISMATCH when the world (or job) disagrees with
     * the ranks already there, ERR_DUP when the rank is taken, ERR_TIMEOUT when the store is unreachable. */
    int  (*hello)(void *impl, uint64_t deadline);
    /* Wait until every rank has registered. Out of time: fill *w (w->joined >= 0) and return ERR_TIMEOUT;
     * boot.c writes the detail "only K of W ranks joined within T s (missing: ...)...". Any other error
     * (w->joined left at -1) carries the store's own detail. */
    int  (*wait_all)(void *impl, uint64_t deadline, store_wait_t *w);
    int  (*set)(void *impl, const char *key, const void *val, size_t len);
    int  (*get)(void *impl, const char *key, void **val, size_t *len, int timeout_ms);
    int  (*add)(void *impl, const char *key, int64_t delta, int64_t *out);
    int  (*del)(void *impl, const char *key);
    /* Free everything. leave = 1 after a completed join: leave properly (the server waits for the
     * others; the last rank out cleans up); 2: leave after a failure (store_abandon: wait for nobody);
     * 0 after a failed join: undo this rank's registration, stop at once. */
    void (*destroy)(void *impl, int leave);
} store_ops_t;

extern const store_ops_t store_zmq_ops;   /* tcp://, env:// */
extern const store_ops_t store_file_ops;  /* file:// */

/* Helpers shared by the store kinds (core/boot.c). */
/* "1, 2, 5" : the ranks r < world with !joined[r], at most 16 of them then ", ...". */
void store_missing_ranks(const unsigned char *joined, int world, char *buf, size_t len);
/* A counter's new value: cur (n bytes of decimal text; NULL = absent = 0) plus delta, in *out and as
 * text in num; returns the text's length. ERR_INVAL when cur is not a counter, ERR_RANGE on overflow. */
int  store_counter_add(const char *key, const void *cur, size_t n, int64_t delta, int64_t *out, char num[32]);
/* Sleep ms milliseconds (poll loops). */
void store_sleep_ms(int ms);

#endif
