/* engine.c: the public API's engine (sb_engine_*): an engine of the API's table on a communicator, and
 * its collectives (allreduce, async allreduce with requests, bit-exact broadcast, barrier), run in call
 * order on one communication thread; a failure breaks the engine and is reported to every later call. */
#include "api/api_int.h"
#include "core/err.h"
#include "core/timer.h"
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K_ALLREDUCE, K_BCAST, K_BARRIER };
#define BCAST_CHUNK (4u << 20)   /* bytes of a broadcast per allreduce (16 MiB of f32 scratch) */
#define WAIT_SLACK_MS 5000       /* a blocking call waits this much beyond the collectives ahead of it */

struct sb_req {
    int kind;
    void *buf;
    size_t count;              /* elements (allreduce) or bytes (broadcast) */
    dtype_t dt;
    redop_t op;
    int root, timeout_ms;
    int done, rc, detached;
    char msg[512];
    sb_engine_t *eng;
    struct sb_req *next;
};

struct sb_engine {
    sb_comm_t *c;
    api_spec_t spec;
    engine_cfg_t cfg;
    engine_t *eng;
    int server, nworkers;
    pthread_t th;
    int th_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    sb_req_t *head, *tail;
    int queued;                /* requests queued or running */
    int inline_busy;           /* a blocking call runs on its caller's thread (s_blocking): the thread waits */
    int stop, broken;
    char broken_msg[512];
    uint64_t seq;              /* collectives run (the check's round) */
    float *scratch;            /* broadcast staging */
};

static int s_tmo(const sb_engine_t *e, int t) { return t > 0 ? t : e->c->comm->timeout_ms; }

/* "check": every worker's (kind, count, dtype, op, root) against the others' before a collective */
static int s_check(sb_engine_t *e, const sb_req_t *r)
{
    int64_t mine[5] = {r->kind, (int64_t)r->count, r->dt, r->op, r->root};
    int n = e->nworkers;
    int64_t *all = calloc((size_t)n, sizeof mine);
    if (!all) return err_set(ERR_NOMEM, "check");
    int rc = comm_allgather_group(e->c->comm, mine, sizeof mine, all, n, s_tmo(e, r->timeout_ms));
    static const char *const kinds[] = {"allreduce", "broadcast", "barrier"};
    for (int q = 0; rc == 0 && q < n; q++) {
        const int64_t *o = all + 5 * q;
        if (memcmp(o, mine, sizeof mine)) {
            int k = (int)o[0] >= 0 && o[0] <= K_BARRIER ? (int)o[0] : 0;
            rc = err_set(ERR_MISMATCH, "collective %llu: rank %d calls %s of %lld %s (%s, root %d) but rank %d calls "
                         "%s of %lld %s (%s, root %d)", (unsigned long long)e->seq, e->c->comm->rank, kinds[r->kind],
                         (long long)r->count, r->kind == K_BCAST ? "bytes" : dt_name(r->dt), op_name(r->op), r->root,
                         q, kinds[k], (long long)o[1], k == K_BCAST ? "bytes" : dt_name((dtype_t)o[2]),
                         op_name((redop_t)o[3]), (int)o[4]);
        }
    }
    free(all);
    return rc;
}

/* Broadcast bit for bit through the engine's sum: every 16-bit word as an f32 integer (exact), the
 * other workers contributing zeros. */
static int s_bcast(sb_engine_t *e, sb_req_t *r)
{
    if (!e->scratch) {
        e->scratch = malloc(BCAST_CHUNK / 2 * sizeof(float));
        if (!e->scratch) return err_set(ERR_NOMEM, "broadcast staging");
    }
    int me = e->c->comm->rank == r->root;
    unsigned char *b = r->buf;
    for (size_t off = 0; off < r->count; off += BCAST_CHUNK) {
        size_t n = r->count - off < BCAST_CHUNK ? r->count - off : BCAST_CHUNK, words = (n + 1) / 2;
        for (size_t i = 0; i < words; i++) {
            unsigned w = 0;
            if (me) w = b[off + 2 * i] | (2 * i + 1 < n ? (unsigned)b[off + 2 * i + 1] << 8 : 0u);
            e->scratch[i] = (float)w;
        }
        CHECK(e->spec.ops->allreduce(e->eng, e->scratch, e->scratch, words, DT_F32, OP_SUM, s_tmo(e, r->timeout_ms)));
        for (size_t i = 0; i < words; i++) {
            float f = e->scratch[i];
            if (!(f >= 0 && f <= 65535 && f == (float)(unsigned)f))
                return err_set(ERR_WRONG, "broadcast: word %zu came back as %g (ranks disagree on the root?)", off / 2 + i,
                               (double)f);
            unsigned w = (unsigned)f;
            b[off + 2 * i] = (unsigned char)(w & 0xff);
            if (2 * i + 1 < n) b[off + 2 * i + 1] = (unsigned char)(w >> 8);
        }
    }
    return 0;
}

static int s_run(sb_engine_t *e, sb_req_t *r)
{
    if (e->spec.check || r->kind == K_BARRIER) CHECK(s_check(e, r));
    switch (r->kind) {
    case K_ALLREDUCE:
        if (r->count == 0) return 0;
        return e->spec.ops->allreduce(e->eng, r->buf, r->buf, r->count, r->dt, r->op, s_tmo(e, r->timeout_ms));
    case K_BCAST: return r->count ? s_bcast(e, r) : 0;
    default: return 0; /* the barrier is the check's allgather */
    }
}

/* Under e->mu, after a collective that returned rc (broken: the engine was already broken before it): a failure
 * other than a mismatch found by the check leaves the ranks' streams of collectives out of step. */
static void s_note_failure(sb_engine_t *e, int rc, int broken, const char *msg)
{
    if (rc < 0 && !broken && rc != ERR_MISMATCH) {
        e->broken = 1;
        e->c->failed = 1;
        snprintf(e->broken_msg, sizeof e->broken_msg, "%s", msg);
    }
}

static void *s_thread(void *arg)
{
    sb_engine_t *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while ((!e->head || e->inline_busy) && !e->stop) pthread_cond_wait(&e->cv_work, &e->mu);
        if (!e->head) break;
        sb_req_t *r = e->head;
        int broken = e->broken;
        pthread_mutex_unlock(&e->mu);
        int rc;
        char msg[512] = "";
        if (broken) {
            rc = ERR_STATE;
            snprintf(msg, sizeof msg, "an earlier collective failed: %.470s", e->broken_msg);
        } else {
            err_clear();
            rc = s_run(e, r);
            if (rc < 0) snprintf(msg, sizeof msg, "%s", err_detail()[0] ? err_detail() : err_str(rc));
            e->seq++;
        }
        pthread_mutex_lock(&e->mu);
        s_note_failure(e, rc, broken, msg);
        e->head = r->next;
        if (!e->head) e->tail = NULL;
        e->queued--;
        r->rc = rc;
        snprintf(r->msg, sizeof r->msg, "%s", msg);
        r->done = 1;
        if (r->detached) free(r);
        pthread_cond_broadcast(&e->cv_done);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static int s_worker_only(const sb_engine_t *e, const char *what)
{
    char t[200];
    if (!e) {
        snprintf(t, sizeof t, "%s: NULL engine", what);
        return api_fail_text(ERR_INVAL, t);
    }
    if (e->server) {
        snprintf(t, sizeof t, "%s: rank %d is a parameter server (sb_engine_serve), not a worker", what,
                 e->c->comm->rank);
        return api_fail_text(ERR_UNSUP, t);
    }
    return 0;
}

/* A new request of e from tmpl, pending (done 0) or done at birth (done 1: sb_wait returns 0 at once). */
static sb_req_t *s_new_req(sb_engine_t *e, const sb_req_t *tmpl, int done)
{
    sb_req_t *r = malloc(sizeof *r);
    if (!r) return NULL;
    *r = *tmpl;
    r->eng = e;
    r->next = NULL;
    r->done = done;
    r->detached = 0;
    r->rc = 0;
    r->msg[0] = '\0';
    return r;
}

static int s_submit(sb_engine_t *e, const sb_req_t *tmpl, sb_req_t **out)
{
    sb_req_t *r = s_new_req(e, tmpl, 0);
    if (!r) return api_fail_text(ERR_NOMEM, "request");
    pthread_mutex_lock(&e->mu);
    if (e->stop) {
        pthread_mutex_unlock(&e->mu);
        free(r);
        return api_fail_text(ERR_STATE, "the engine is being freed");
    }
    if (e->tail) e->tail->next = r;
    else e->head = r;
    e->tail = r;
    e->queued++;
    pthread_cond_signal(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
    *out = r;
    return 0;
}

int sb_wait(sb_req_t *r, int timeout_ms)
{
    if (!r) return api_fail_text(ERR_INVAL, "sb_wait: NULL request");
    sb_engine_t *e = r->eng;
    if (timeout_ms <= 0) timeout_ms = e->c->comm->timeout_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&e->mu);
    int w = 0;
    while (!r->done && w != ETIMEDOUT) w = pthread_cond_timedwait(&e->cv_done, &e->mu, &ts);
    int done = r->done;
    pthread_mutex_unlock(&e->mu);
    if (!done) {
        char t[160];
        snprintf(t, sizeof t, "the collective did not complete within %d ms (the request is still pending)", timeout_ms);
        return api_fail_text(ERR_TIMEOUT, t);
    }
    if (r->rc < 0) api_fail_text(r->rc, r->msg);
    return r->rc;
}

int sb_test(const sb_req_t *r)
{
    if (!r) return 0;
    pthread_mutex_lock(&r->eng->mu);
    int d = r->done;
    pthread_mutex_unlock(&r->eng->mu);
    return d;
}

/* Hand r to the communication thread for good (it frees it when done), or free it when done already. */
static void s_detach(sb_req_t *r)
{
    sb_engine_t *e = r->eng;
    pthread_mutex_lock(&e->mu);
    int done = r->done;
    if (!done) r->detached = 1;
    pthread_mutex_unlock(&e->mu);
    if (done) free(r);
}

void sb_req_free(sb_req_t **rp)
{
    sb_req_t *r = rp ? *rp : NULL;
    if (!r) return;
    *rp = NULL;
    s_detach(r);
}

/* A blocking call: queue, then wait for it beyond the timeouts of the collectives ahead of it. */
static int s_blocking(sb_engine_t *e, const sb_req_t *tmpl)
{
    /* nothing queued or running: the collective runs here, on the caller's thread, sparing the two thread
     * hand-offs (tens of microseconds each in a VM); the communication thread waits until it is done, and a
     * request submitted meanwhile goes after it, so every rank's order stays its callers' */
    pthread_mutex_lock(&e->mu);
    if (!e->head && !e->inline_busy && !e->stop) {
        int broken = e->broken;
        char msg[512] = "";
        e->inline_busy = 1;
        pthread_mutex_unlock(&e->mu);
        int rc;
        if (broken) {
            rc = ERR_STATE;
            snprintf(msg, sizeof msg, "an earlier collective failed: %.470s", e->broken_msg);
        } else {
            err_clear();
            sb_req_t r = *tmpl;
            r.eng = e;
            rc = s_run(e, &r);
            if (rc < 0) snprintf(msg, sizeof msg, "%s", err_detail()[0] ? err_detail() : err_str(rc));
            e->seq++;
        }
        pthread_mutex_lock(&e->mu);
        s_note_failure(e, rc, broken, msg);
        e->inline_busy = 0;
        pthread_cond_signal(&e->cv_work);
        pthread_mutex_unlock(&e->mu);
        return rc < 0 ? api_fail_text(rc, msg) : rc;
    }
    pthread_mutex_unlock(&e->mu);
    sb_req_t *r;
    CHECK(s_submit(e, tmpl, &r));
    pthread_mutex_lock(&e->mu);
    long ahead = e->queued;
    pthread_mutex_unlock(&e->mu);
    long t = (long)s_tmo(e, tmpl->timeout_ms) * ahead + WAIT_SLACK_MS;
    int rc = sb_wait(r, t > INT32_MAX ? INT32_MAX : (int)t);
    int pending = !sb_test(r);
    s_detach(r); /* frees it, or, still pending, the communication thread will */
    if (pending) {
        pthread_mutex_lock(&e->mu);
        if (!e->broken) {
            e->broken = 1;
            e->c->failed = 1;
            snprintf(e->broken_msg, sizeof e->broken_msg, "%s", sb_last_error());
        }
        pthread_mutex_unlock(&e->mu);
    }
    return rc;
}

/* World size 1 (no server rank either) and not broken: the sum and the average of one buffer are the buffer,
 * bit for bit, and a broadcast or barrier has no one to meet, so a collective is done on the caller's thread
 * without a hand-off to the communication thread, a copy or a pass over the data. */
static int s_solo(sb_engine_t *e)
{
    if (e->c->comm->world != 1) return 0;
    pthread_mutex_lock(&e->mu);
    int ok = !e->broken;
    pthread_mutex_unlock(&e->mu);
    return ok;
}

static int s_ar_args(const sb_engine_t *e, const void *buf, size_t count, sb_dtype_t dt, sb_op_t op)
{
    CHECK(s_worker_only(e, "allreduce"));
    char t[200];
    if ((int)dt < 0 || dt >= (sb_dtype_t)DT_COUNT) {
        snprintf(t, sizeof t, "allreduce: dtype %d is not f32 (0), f16 (1) or bf16 (2)", (int)dt);
        return api_fail_text(ERR_INVAL, t);
    }
    if (op != SB_SUM && op != SB_AVG) {
        snprintf(t, sizeof t, "allreduce: op %d is not sum (0) or avg (1)", (int)op);
        return api_fail_text(ERR_INVAL, t);
    }
    if (count && !buf) return api_fail_text(ERR_INVAL, "allreduce: NULL buffer");
    if (count > SIZE_MAX / 8 / dt_size((dtype_t)dt)) return api_fail_text(ERR_RANGE, "allreduce: count too large");
    return 0;
}

int sb_allreduce(sb_engine_t *e, void *buf, size_t count, sb_dtype_t dt, sb_op_t op, int timeout_ms)
{
    CHECK(s_ar_args(e, buf, count, dt, op));
    sb_req_t t = {.kind = K_ALLREDUCE, .buf = buf, .count = count, .dt = (dtype_t)dt, .op = (redop_t)op,
                  .timeout_ms = timeout_ms};
    if (s_solo(e)) return 0;
    return s_blocking(e, &t);
}

int sb_allreduce_async(sb_engine_t *e, void *buf, size_t count, sb_dtype_t dt, sb_op_t op, int timeout_ms,
                       sb_req_t **req)
{
    if (!req) return api_fail_text(ERR_INVAL, "allreduce_async: req is NULL");
    *req = NULL;
    CHECK(s_ar_args(e, buf, count, dt, op));
    sb_req_t t = {.kind = K_ALLREDUCE, .buf = buf, .count = count, .dt = (dtype_t)dt, .op = (redop_t)op,
                  .timeout_ms = timeout_ms};
    if (s_solo(e)) {
        *req = s_new_req(e, &t, 1);
        return *req ? 0 : api_fail_text(ERR_NOMEM, "request");
    }
    return s_submit(e, &t, req);
}

int sb_broadcast(sb_engine_t *e, void *buf, size_t nbytes, int root, int timeout_ms)
{
    CHECK(s_worker_only(e, "broadcast"));
    char t[200];
    if (root < 0 || root >= e->nworkers) {
        snprintf(t, sizeof t, "broadcast: root %d is not a worker rank (0 to %d)", root, e->nworkers - 1);
        return api_fail_text(ERR_RANGE, t);
    }
    if (nbytes && !buf) return api_fail_text(ERR_INVAL, "broadcast: NULL buffer");
    sb_req_t r = {.kind = K_BCAST, .buf = buf, .count = nbytes, .root = root, .timeout_ms = timeout_ms};
    if (s_solo(e)) return 0; /* the root is this worker: buf is root's already */
    return s_blocking(e, &r);
}

int sb_barrier(sb_engine_t *e, int timeout_ms)
{
    CHECK(s_worker_only(e, "barrier"));
    sb_req_t r = {.kind = K_BARRIER, .timeout_ms = timeout_ms};
    if (s_solo(e)) return 0;
    return s_blocking(e, &r);
}

int sb_engine_new(sb_engine_t **ep, sb_comm_t *c, const char *spec, int timeout_ms)
{
    if (!ep) return api_fail_text(ERR_INVAL, "sb_engine_new: eng is NULL");
    *ep = NULL;
    if (!c) return api_fail_text(ERR_INVAL, "sb_engine_new: NULL communicator");
    if (c->has_engine) return api_fail_text(ERR_STATE, "sb_engine_new: this communicator has an engine: free it first");
    sb_engine_t *e = calloc(1, sizeof *e);
    if (!e) return api_fail_text(ERR_NOMEM, "sb_engine_new");
    int rc = api_spec_parse(spec, &e->spec);
    if (rc < 0) {
        free(e);
        return api_fail(rc);
    }
    comm_t *comm = c->comm;
    const engine_ops_t *ops = e->spec.ops;
    int extra = ops->extra_ranks ? ops->extra_ranks(e->spec.opts, comm->world) : 0;
    if (extra > 0 && extra >= comm->world) {
        char t[300];
        snprintf(t, sizeof t, "engine '%s' needs %d server rank%s beside the workers but the job has %d rank%s: start "
                 "workers + %d processes (ranks from %d on serve)", spec, extra, extra > 1 ? "s" : "", comm->world,
                 comm->world > 1 ? "s" : "", extra, comm->world - extra);
        api_spec_free(&e->spec);
        free(e);
        return api_fail_text(ERR_INVAL, t);
    }
    e->c = c;
    e->nworkers = comm->world - extra;
    e->server = comm->rank >= e->nworkers;
    e->cfg = (engine_cfg_t){.device = -1, .timeout_ms = timeout_ms > 0 ? timeout_ms : comm->timeout_ms,
                            .nworkers = e->nworkers, .opts = e->spec.opts, .size_scale = 1};
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv_work, NULL);
    pthread_cond_init(&e->cv_done, NULL);
    rc = ops->create(&e->eng, comm, &e->cfg);
    if (rc == 0 && !e->server) {
        if (pthread_create(&e->th, NULL, s_thread, e) != 0) rc = err_set(ERR_SYS, "cannot start the communication thread");
        else e->th_started = 1;
    }
    if (rc < 0) {
        api_fail(rc);
        if (e->eng) ops->destroy(&e->eng);
        c->failed = 1;
        api_spec_free(&e->spec);
        free(e);
        return rc;
    }
    c->has_engine = 1;
    *ep = e;
    return 0;
}

int sb_engine_serve(sb_engine_t *e)
{
    if (!e) return api_fail_text(ERR_INVAL, "sb_engine_serve: NULL engine");
    if (!e->server) {
        char t[160];
        snprintf(t, sizeof t, "sb_engine_serve: rank %d is a worker; only ranks %d and above serve", e->c->comm->rank,
                 e->nworkers);
        return api_fail_text(ERR_STATE, t);
    }
    int rc = e->spec.ops->serve ? e->spec.ops->serve(e->eng) : err_set(ERR_UNSUP, "engine has no server role");
    if (rc < 0) e->c->failed = 1;
    return api_fail(rc);
}

void sb_engine_free(sb_engine_t **ep)
{
    sb_engine_t *e = ep ? *ep : NULL;
    if (!e) return;
    *ep = NULL;
    int joined = 1;
    if (e->th_started) {
        pthread_mutex_lock(&e->mu);
        long ahead = e->queued;
        e->stop = 1;
        pthread_cond_signal(&e->cv_work);
        pthread_mutex_unlock(&e->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(((long)e->cfg.timeout_ms * ahead + WAIT_SLACK_MS) / 1000);
        joined = pthread_timedjoin_np(e->th, NULL, &ts) == 0;
    }
    if (!joined) {
        /* a collective is stuck past every timeout: the engine cannot be torn down under it; leave it */
        e->c->failed = 1;
        e->c->has_engine = 0;
        return;
    }
    if (e->broken) e->c->failed = 1;
    e->spec.ops->destroy(&e->eng);
    e->c->has_engine = 0;
    api_spec_free(&e->spec);
    free(e->scratch);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv_work);
    pthread_cond_destroy(&e->cv_done);
    free(e);
}

const char *sb_engine_name(const sb_engine_t *e) { return e ? e->spec.ops->name : ""; }
int sb_engine_rank(const sb_engine_t *e) { return e ? e->c->comm->rank : api_fail_text(ERR_INVAL, "NULL engine"); }
int sb_engine_size(const sb_engine_t *e) { return e ? e->nworkers : api_fail_text(ERR_INVAL, "NULL engine"); }
int sb_engine_is_server(const sb_engine_t *e) { return e ? e->server : 0; }
