/* boot.c: joining the rendezvous and the store calls every module makes. store_new picks the store
 * kind for the init method (core/store_zmq.c for tcp:// and env://, core/store_file.c for file://),
 * then runs the one bootstrap: set up, register this rank (the store checks that the world agrees and
 * that the rank is not taken), wait until every rank has registered, and on failure undo it all while
 * keeping the first error's detail. store_set/get/add/del validate their arguments, serialize the
 * calls on a store_t, and dispatch them to the store kind. */
#include "core/boot.h"
#include "core/store.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MISSING_SHOWN 16            /* ranks listed in a "missing:" detail */

struct store {
    boot_cfg_t cfg;                 /* a copy; the store kind keeps a pointer to it */
    const store_ops_t *ops;
    void *impl;
    pthread_mutex_t mu;
};

/* The store kind of each init method. */
static const struct { const char *method; const store_ops_t *ops; } s_kinds[] = {
    {"tcp", &store_zmq_ops},
    {"env", &store_zmq_ops},
    {"file", &store_file_ops},
};

void store_missing_ranks(const unsigned char *joined, int world, char *buf, size_t len)
{
    size_t off = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 0; r < world && off < len; r++)
        if (!joined[r]) {
            if (shown == MISSING_SHOWN) { snprintf(buf + off, len - off, ", ..."); break; }
            int k = snprintf(buf + off, len - off, "%s%d", shown ? ", " : "", r);
            if (k > 0) off += (size_t)k;
            shown++;
        }
}

void store_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int store_counter_add(const char *key, const void *cur, size_t n, int64_t delta, int64_t *out, char num[32])
{
    int64_t v = 0;
    if (cur) {
        char buf[32], *end = NULL;
        int ok = n > 0 && n < sizeof buf;
        if (ok) {
            memcpy(buf, cur, n);
            buf[n] = '\0';
            errno = 0;
            v = strtoll(buf, &end, 10);
            ok = !*end && !errno;
        }
        if (!ok) return err_set(ERR_INVAL, "key '%s' holds a value that is not a counter", key);
    }
    if ((delta > 0 && v > INT64_MAX - delta) || (delta < 0 && v < INT64_MIN - delta))
        return err_set(ERR_RANGE, "counter '%s' would overflow", key);
    *out = v + delta;
    return snprintf(num, 32, "%lld", (long long)*out);
}

static int s_check_key(const char *key)
{
    if (!key || !*key) return err_set(ERR_INVAL, "store key is empty");
    if (strlen(key) > STORE_KEY_MAX) return err_set(ERR_RANGE, "store key '%.40s...' is longer than %d bytes", key, STORE_KEY_MAX);
    return 0;
}

/* Set up, register, wait for everyone; one deadline for all three. */
static int s_join(store_t *self)
{
    const boot_cfg_t *cfg = &self->cfg;
    uint64_t deadline = deadline_in(cfg->timeout_ms);
    CHECK(self->ops->open(&self->impl, cfg, deadline));
    CHECK(self->ops->hello(self->impl, deadline));
    store_wait_t w = {.joined = -1};
    int rc = self->ops->wait_all(self->impl, deadline, &w);
    if (rc == ERR_TIMEOUT && w.joined >= 0)
        return err_set(ERR_TIMEOUT, "only %d of %d ranks joined within %.1f s (missing: %s)%s", w.joined, cfg->world,
                       cfg->timeout_ms / 1000.0, w.missing, w.where);
    return rc;
}

int store_new(store_t **self_p, const boot_cfg_t *cfg)
{
    if (!self_p || !cfg) return err_set(ERR_INVAL, "store_new: NULL argument");
    *self_p = NULL;
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
        return err_set(ERR_RANGE, "store_new: rank %d / world %d is not valid (use boot_cfg_init)", cfg->rank, cfg->world);
    /* a job of one rank has nobody to let in (the store refuses ranks beyond the world): no warning,
     * but --require-auth still refuses it */
    if (cfg->world > 1 || cfg->auth.require) CHECK(auth_require(&cfg->auth, "store"));
    const store_ops_t *ops = NULL;
    for (size_t i = 0; i < sizeof s_kinds / sizeof s_kinds[0] && !ops; i++)
        if (!strcmp(cfg->method, s_kinds[i].method)) ops = s_kinds[i].ops;
    if (!ops) return err_set(ERR_INVAL, "store_new: unknown method '%s'", cfg->method);
    store_t *self = calloc(1, sizeof *self);
    if (!self) return err_set(ERR_NOMEM, "store_new");
    self->cfg = *cfg;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = BOOT_DEFAULT_TIMEOUT_MS;
    self->ops = ops;
    pthread_mutex_init(&self->mu, NULL);
    int rc = s_join(self);
    if (rc < 0) {
        err_note(rc, __FILE__, __LINE__, "store_new");
        /* keep the detail: undoing the join must not overwrite it */
        char d[512];
        snprintf(d, sizeof d, "%s", err_detail());
        if (self->impl) ops->destroy(self->impl, 0);
        pthread_mutex_destroy(&self->mu);
        free(self);
        err_set(rc, "%s", d);
        return rc;
    }
    LOG_D("store: rank %d of %d joined job %s via %s", cfg->rank, cfg->world, cfg->job, cfg->method);
    *self_p = self;
    return 0;
}

int store_set(store_t *self, const char *key, const void *val, size_t len)
{
    if (!self) return err_set(ERR_INVAL, "store_set: NULL store");
    CHECK(s_check_key(key));
    if (len > STORE_VAL_MAX) return err_set(ERR_RANGE, "store value of %zu bytes is over the %d-byte limit", len, STORE_VAL_MAX);
    if (len && !val) return err_set(ERR_INVAL, "store_set: NULL value");
    pthread_mutex_lock(&self->mu);
    int rc = self->ops->set(self->impl, key, len ? val : "", len);
    pthread_mutex_unlock(&self->mu);
    return rc;
}

int store_get(store_t *self, const char *key, void **val, size_t *len, int timeout_ms)
{
    if (!self || !val || !len) return err_set(ERR_INVAL, "store_get: NULL argument");
    CHECK(s_check_key(key));
    if (timeout_ms < 0) timeout_ms = self->cfg.timeout_ms;
    *val = NULL;
    *len = 0;
    pthread_mutex_lock(&self->mu);
    int rc = self->ops->get(self->impl, key, val, len, timeout_ms);
    pthread_mutex_unlock(&self->mu);
    return rc;
}

int store_add(store_t *self, const char *key, int64_t delta, int64_t *out)
{
    if (!self) return err_set(ERR_INVAL, "store_add: NULL store");
    CHECK(s_check_key(key));
    int64_t v = 0;
    pthread_mutex_lock(&self->mu);
    int rc = self->ops->add(self->impl, key, delta, &v);
    pthread_mutex_unlock(&self->mu);
    if (rc == 0 && out) *out = v;
    return rc;
}

int store_del(store_t *self, const char *key)
{
    if (!self) return err_set(ERR_INVAL, "store_del: NULL store");
    CHECK(s_check_key(key));
    pthread_mutex_lock(&self->mu);
    int rc = self->ops->del(self->impl, key);
    pthread_mutex_unlock(&self->mu);
    return rc;
}

static void s_leave(store_t **self_p, int how)
{
    if (!self_p || !*self_p) return;
    store_t *self = *self_p;
    *self_p = NULL;
    self->ops->destroy(self->impl, how);
    auth_wipe(&self->cfg.auth);
    pthread_mutex_destroy(&self->mu);
    free(self);
}

void store_destroy(store_t **self_p) { s_leave(self_p, 1); }
void store_abandon(store_t **self_p) { s_leave(self_p, 2); }
