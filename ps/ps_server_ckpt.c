/* ps_server_ckpt.c: a parameter server's part of a checkpoint: on worker 0's SAVE it writes its shard
 * (core/shard.h: every partition it owns, with its parameters, optimizer buffers and step count) to
 * "<base>.s<index>", whole or not at all, and answers with the file's size and hash, or an ERROR naming
 * what failed (a full disk). The shard is one consistent snapshot: the server handles one message at a
 * time, and in sync mode no round completes without worker 0, which sends SAVE only between steps. */
#include "ps/ps_server_int.h"
#include "ps/ps_ckpt.h"
#include "core/shard.h"
#include <sys/stat.h>

static void s_answer_error(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *req, int code,
                           const char *text)
{
    wire_hdr_t h = {.type = WIRE_ERROR, .sender = (uint32_t)self->rank, .job = self->job, .key = req->key,
                    .clock = req->clock, .dtype = DT_F32, .aux = code, .nframes = 1};
    ps_frame_t f = {text, strlen(text), 0, NULL, NULL};
    pss_send(self, w, ident, idlen, &h, &f, 1);
}

int pss_on_save(ps_server_t *self, int w, const void *ident, size_t idlen, const wire_hdr_t *h, ps_vmsg_t *m)
{
    if (w != 0) REJ(ERR_PROTO, "SAVE from worker %d (only worker 0 checkpoints)", pss_wrank(self, w));
    size_t n = m->n == 3 ? ps_van_size(m, 2) : 0;
    const char *base = n ? ps_van_data(m, 2) : NULL;
    if (h->nframes != 1 || n == 0 || n >= PSC_BASE_MAX || memchr(base, 0, n))
        REJ(ERR_PROTO, "SAVE needs one frame naming the checkpoint (1 to %d bytes, no NUL)", PSC_BASE_MAX - 1);
    if (!self->lay_set) REJ(ERR_STATE, "SAVE before the parameters were initialised");
    char path[PSC_BASE_MAX + 16];
    snprintf(path, sizeof path, "%.*s.s%d", (int)n, base, self->cfg.index);
    shard_t sh = {.index = (uint32_t)self->cfg.index, .nservers = (uint32_t)self->cfg.nservers,
                  .total = self->lay.total, .optim_kind = (uint32_t)self->optim_kind, .nranges = self->npslots};
    int rc = 0, nopt = -1;
    sh.ranges = calloc(self->npslots + 1, sizeof *sh.ranges);
    sh.data = calloc((self->npslots + 1) * (1 + SHARD_MAX_OPT), sizeof *sh.data);
    if (!sh.ranges || !sh.data) rc = err_set(ERR_NOMEM, "ps server %d: checkpoint tables", self->cfg.index);
    for (size_t i = 0; i < self->npslots && !rc; i++) {
        slot_t *s = &self->pslots[i];
        if (!s->inited) {
            rc = err_set(ERR_STATE, "ps server %d: SAVE before partition %llu was initialised", self->cfg.index,
                         (unsigned long long)s->key);
            break;
        }
        float *bufs[OPTIM_MAX_BUFS] = {0};
        int nb = OPTIM_MAX_BUFS;
        size_t cnt = 0;
        if ((rc = optim_state(s->opt, bufs, &nb, &cnt)) < 0) break;
        if (nopt < 0) nopt = nb;
        if (nb != nopt || cnt != s->len || nb > SHARD_MAX_OPT) {
            rc = err_set(ERR_STATE, "ps server %d: partition %llu holds %d optimizer buffers of %zu", self->cfg.index,
                         (unsigned long long)s->key, nb, cnt);
            break;
        }
        sh.ranges[i] = (shard_range_t){.start = s->start, .len = s->len, .applied = s->applied};
        sh.data[i * (1 + (size_t)nb)] = s->params;
        for (int k = 0; k < nb; k++) sh.data[i * (1 + (size_t)nb) + 1 + (size_t)k] = bufs[k];
    }
    sh.nopt = nopt < 0 ? 0 : (uint32_t)nopt;
    uint64_t hash = 0;
    if (!rc) rc = shard_write(path, &sh, &hash);
    free(sh.ranges);
    free(sh.data);
    if (rc < 0) {
        char text[600];
        snprintf(text, sizeof text, "checkpoint: %s", err_detail());
        LOG_E("ps server %d: %s", self->cfg.index, text);
        s_answer_error(self, w, ident, idlen, h, rc, text);
        return 0;
    }
    struct stat st;
    psc_saved_t r = {.bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0, .hash = hash};
    wire_hdr_t a = {.type = WIRE_SAVE, .sender = (uint32_t)self->rank, .job = self->job, .key = (uint64_t)self->cfg.index,
                    .clock = h->clock, .dtype = DT_F32, .nframes = 1};
    ps_frame_t f = {&r, sizeof r, 0, NULL, NULL};
    pss_send(self, w, ident, idlen, &a, &f, 1);
    return 0;
}
