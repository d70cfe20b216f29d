/* ps_ckpt.c: checkpoints of the parameter servers' state, worker side. Save (engine state_save, worker 0
 * only, between steps): a SAVE to every server, each writes its shard "<base>.s<index>" (ps_server_ckpt.c)
 * and answers with the file's size and hash, collected here with the step's reply loop (ps_step.c). Resume
 * (attach with param_set_t.restore): worker 0's INIT of each partition carries the saved values of the
 * partition's range, the step count and the optimizer buffers (ps_ckpt.h), whatever layout saved them:
 * the trainer gathered the shards into flat vectors (core/shard.h), so another server count re-shards. */
#include "ps/ps_int.h"
#include "ps/ps_ckpt.h"

void psw_layout_text(const engine_t *self, char *buf, size_t len)
{
    snprintf(buf, len, "ps servers=%d %s partitions=%zu part_elems=%zu local_agg=%d mode=%s", self->nservers,
             self->opt.colocate ? "colocated" : "dedicated", self->lay.nparts, self->lay.part_elems, self->lagg,
             self->opt.mode == PS_SYNC ? "sync" : self->opt.mode == PS_ASYNC ? "async" : "ssp");
}

int psw_on_saved(engine_t *self, int s, const wire_hdr_t *h, ps_vmsg_t *m, collect_t *c, size_t *left)
{
    psc_saved_t r;
    if (h->type != WIRE_SAVE || h->key != (uint64_t)s || m->n != 2 || ps_van_size(m, 1) != sizeof r || c->saved[s]) {
        self->rejected++;
        LOG_W("ps worker %d: dropped an unexpected %s from server %d while checkpointing", self->comm->rank,
              wire_type_name(h->type), s);
        return 0;
    }
    memcpy(&r, ps_van_data(m, 1), sizeof r);
    c->save->files[s].bytes = r.bytes;
    c->save->files[s].hash = r.hash;
    c->saved[s] = 1;
    (*left)--;
    return 0;
}

int psw_state_save(engine_t *self, const char *base, engine_saved_t *out)
{
    CHECK(psw_worker_only(self, "state_save"));
    memset(out, 0, sizeof *out);
    if (!self->attached) return err_set(ERR_STATE, "ps: checkpoint before attach");
    if (self->comm->rank != 0 || self->member)
        return err_set(ERR_STATE, "ps: only worker 0 checkpoints the servers (this is rank %d)", self->comm->rank);
    size_t bl = base ? strlen(base) : 0;
    if (bl == 0 || bl >= PSC_BASE_MAX) return err_set(ERR_INVAL, "ps: checkpoint name of %zu bytes (1 to %d)", bl, PSC_BASE_MAX - 1);
    int S = self->nservers;
    out->files = calloc((size_t)S, sizeof *out->files);
    uint8_t *saved = calloc((size_t)S, 1);
    if (!out->files || !saved) {
        free(out->files);
        free(saved);
        out->files = NULL;
        return err_set(ERR_NOMEM, "ps: checkpoint of %d servers", S);
    }
    out->nfiles = S;
    psw_layout_text(self, out->layout, sizeof out->layout);
    int rc = 0;
    for (int s = 0; s < S && !rc; s++) {
        snprintf(out->files[s].path, sizeof out->files[s].path, "%s.s%d", base, s);
        wire_hdr_t h = psw_hdr(self, WIRE_SAVE, (uint64_t)s, self->clock, 0, 0, DT_F32, 0, 1);
        ps_frame_t f = {base, bl, 0, NULL, NULL};
        rc = psw_send(self, s, &h, &f, 1);
    }
    collect_t c = {.lay = &self->lay, .dt = DT_F32, .save = out, .saved = saved};
    if (!rc) rc = psw_collect(self, &c, (size_t)S, self->cfg.timeout_ms);
    free(saved);
    if (rc < 0) {
        free(out->files);
        out->files = NULL;
        out->nfiles = 0;
    }
    return rc;
}

int psw_init_state(engine_t *self, size_t k, const ps_meta_t *meta, const float *values)
{
    const engine_restore_t *r = self->ps.restore;
    int s = ps_part_owner(&self->lay, k);
    size_t st = ps_part_start(&self->lay, k), n = ps_part_len(&self->lay, k);
    if (r->nopt < 0 || r->nopt > 2) return err_set(ERR_INVAL, "ps: resume with %d optimizer buffers", r->nopt);
    psc_state_t ps = {.applied = r->applied, .nopt = (uint32_t)r->nopt};
    wire_hdr_t h = psw_hdr(self, WIRE_INIT, k, 0, st, n, DT_F32, (int)self->ps.grad_dtype, 4 + (uint32_t)r->nopt);
    ps_frame_t fr[6] = {{meta, sizeof *meta, 0, NULL, NULL},
                        {&self->ps.optim, sizeof self->ps.optim, 0, NULL, NULL},
                        {values + st, n * sizeof(float), 0, NULL, NULL},
                        {&ps, sizeof ps, 0, NULL, NULL}};
    for (int b = 0; b < r->nopt; b++) {
        if (!r->opt[b]) return err_set(ERR_INVAL, "ps: resume optimizer buffer %d missing", b);
        fr[4 + b] = (ps_frame_t){r->opt[b] + st, n * sizeof(float), 0, NULL, NULL};
    }
    return psw_send(self, s, &h, fr, 4 + r->nopt);
}
