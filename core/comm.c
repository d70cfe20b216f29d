/* comm.c: builds a communicator from the bootstrap: joins the store, learns which ranks share a host,
 * opens the transport; small collectives (barrier, allgather, broadcast) go through the store. */
#include "core/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOSTID_LEN 128

/* A host identity: hostname plus the kernel's boot id, so two containers named alike still differ. */
static void s_host_id(char *out, size_t len)
{
    char host[64] = "?", boot[40] = "";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    /* the network namespace too: ranks in different namespaces of one machine are different nodes to us
     * (containers, and the emulated machines of --nodes); shared memory stays within a namespace */
    char ns[64] = "";
    ssize_t nl = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[nl > 0 ? nl : 0] = '\0';
    const char *fake = getenv("SYNCBENCH_FAKE_HOST"); /* tests: pretend ranks live on different hosts */
    snprintf(out, len, "%s/%s/%s/%s", host, boot, ns, fake ? fake : "");
}

/* The transport's broadcast (its per-run nonce) is this communicator's. */
static int s_tp_bcast(void *ctx, void *buf, size_t len, int root, int timeout_ms)
{
    return comm_bcast_small(ctx, buf, len, root, timeout_ms);
}

int comm_new(comm_t **self_p, const boot_cfg_t *cfg, const comm_opts_t *opts)
{
    int rc;
    comm_t *self = calloc(1, sizeof *self);
    if (!self) return ERR_NOMEM;
    self->boot = *cfg;
    self->rank = cfg->rank;
    self->world = cfg->world;
    self->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 60000;
    self->no_yield = opts ? opts->shm_no_yield : 0;
    snprintf(self->job, sizeof self->job, "%s", cfg->job);
    log_set_rank(self->rank);
    CHECK_GOTO(rc, store_new(&self->store, cfg), fail);

    char mine[HOSTID_LEN] = {0};
    s_host_id(mine, sizeof mine);
    char *all = calloc((size_t)self->world, HOSTID_LEN);
    self->node_of = calloc((size_t)self->world, sizeof(int));
    if (!all || !self->node_of) { free(all); rc = ERR_NOMEM; goto fail; }
    rc = comm_allgather(self, mine, HOSTID_LEN, all, self->timeout_ms);
    if (rc < 0) { free(all); err_note(rc, __FILE__, __LINE__, "allgather hosts"); goto fail; }
    self->nnodes = 0;
    for (int r = 0; r < self->world; r++) {
        int node = -1;
        for (int q = 0; q < r; q++)
            if (!memcmp(all + (size_t)q * HOSTID_LEN, all + (size_t)r * HOSTID_LEN, HOSTID_LEN)) {
                node = self->node_of[q];
                break;
            }
        self->node_of[r] = node >= 0 ? node : self->nnodes++;
    }
    self->node = self->node_of[self->rank];
    self->local_rank = 0;
    self->local_world = 0;
    for (int r = 0; r < self->world; r++)
        if (self->node_of[r] == self->node) {
            if (r < self->rank) self->local_rank++;
            self->local_world++;
        }
    free(all);

    tp_opts_t to = {.kind = opts && opts->transport ? opts->transport : "auto",
                    .slot_bytes = opts ? opts->shm_slot_bytes : 0,
                    .slots = opts ? opts->shm_slots : 0,
                    .no_yield = opts ? opts->shm_no_yield : 0};
    tp_env_t env = {.rank = self->rank, .world = self->world, .local_world = self->local_world,
                    .node_of = self->node_of, .timeout_ms = self->timeout_ms, .job = self->job,
                    .boot = &self->boot, .store = self->store, .bcast = s_tp_bcast, .bcast_ctx = self};
    CHECK_GOTO(rc, tp_new(&self->tp, &env, &to), fail);
    *self_p = self;
    return 0;
fail:
    comm_destroy(&self);
    return rc;
}

static void s_destroy(comm_t **self_p, int failed)
{
    comm_t *self = self_p ? *self_p : NULL;
    if (!self) return;
    /* Channels open lazily, so a rank that finished early may hold a channel its peer has yet to
     * open and drain: meet once more before the transport goes (bounded, so a dead rank can't hold
     * the others for long). After a failure nobody waits for anybody. */
    if (self->tp && self->store && self->world > 1 && !failed) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", err_detail());
        if (comm_barrier(self, self->timeout_ms < 5000 ? self->timeout_ms : 5000) < 0) {
            LOG_W("leaving: %s", err_detail());
            err_clear();
            if (keep[0]) err_set(ERR_PEER, "%s", keep); /* the caller's error stays the one it reports */
        }
    }
    tp_destroy(&self->tp);
    if (failed) store_abandon(&self->store);
    else store_destroy(&self->store);
    free(self->node_of);
    free(self);
    *self_p = NULL;
}

void comm_destroy(comm_t **self_p) { s_destroy(self_p, 0); }
void comm_abort(comm_t **self_p) { s_destroy(self_p, 1); }

int comm_barrier(comm_t *self, int timeout_ms)
{
    char key[64];
    unsigned long seq = ++self->seq;
    snprintf(key, sizeof key, "bar/%lu", seq);
    int64_t v = 0;
    CHECK(store_add(self->store, key, 1, &v));
    snprintf(key, sizeof key, "bar/%lu/done", seq);
    if (v == self->world) {
        CHECK(store_set(self->store, key, "1", 1));
        return 0;
    }
    void *val = NULL;
    size_t len = 0;
    int rc = store_get(self->store, key, &val, &len, timeout_ms);
    free(val);
    if (rc == ERR_TIMEOUT)
        return err_set(rc, "barrier: only %lld of %d ranks arrived within %d ms", (long long)v, self->world,
                       timeout_ms);
    return rc;
}

int comm_allgather(comm_t *self, const void *mine, size_t len, void *all, int timeout_ms)
{
    return comm_allgather_group(self, mine, len, all, self->world, timeout_ms);
}

int comm_allgather_group(comm_t *self, const void *mine, size_t len, void *all, int n, int timeout_ms)
{
    char key[64];
    if (n < 1 || n > self->world || self->rank >= n)
        return err_set(ERR_INVAL, "allgather: rank %d is not in the group of the first %d ranks", self->rank, n);
    /* a group's rounds have their own counter, so ranks outside it stay in step with the rest */
    unsigned long seq = n == self->world ? ++self->seq : ++self->gseq;
    char ns[16];
    snprintf(ns, sizeof ns, n == self->world ? "ag" : "ag%d", n);
    uint64_t dl = deadline_in(timeout_ms);
    snprintf(key, sizeof key, "%s/%lu/%d", ns, seq, self->rank);
    CHECK(store_set(self->store, key, mine, len));
    for (int r = 0; r < n; r++) {
        void *val = NULL;
        size_t l = 0;
        snprintf(key, sizeof key, "%s/%lu/%d", ns, seq, r);
        int rc = store_get(self->store, key, &val, &l, deadline_left_ms(dl));
        if (rc == ERR_TIMEOUT) return err_set(rc, "allgather: rank %d did not contribute within %d ms", r, timeout_ms);
        CHECK(rc);
        if (l != len) {
            free(val);
            return err_set(ERR_MISMATCH, "allgather: rank %d sent %zu bytes, expected %zu", r, l, len);
        }
        memcpy((char *)all + (size_t)r * len, val, len);
        free(val);
    }
    return 0;
}

int comm_bcast_small(comm_t *self, void *buf, size_t len, int root, int timeout_ms)
{
    char key[64];
    unsigned long seq = ++self->seq;
    snprintf(key, sizeof key, "bc/%lu", seq);
    if (self->rank == root) return store_set(self->store, key, buf, len);
    void *val = NULL;
    size_t l = 0;
    int rc = store_get(self->store, key, &val, &l, timeout_ms);
    if (rc == ERR_TIMEOUT) return err_set(rc, "broadcast from rank %d timed out after %d ms", root, timeout_ms);
    CHECK(rc);
    if (l != len) {
        free(val);
        return err_set(ERR_MISMATCH, "broadcast: root sent %zu bytes, expected %zu", l, len);
    }
    memcpy(buf, val, len);
    free(val);
    return 0;
}
