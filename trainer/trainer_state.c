/* trainer_state.c: the trainer's state across ranks and runs: parameter checksums, the workers' cross-check, and
 * checkpoint save and resume (trainer.h; the file format is trainer/ckpt.h's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "core/log.h"
#include "trainer/trainer_impl.h"

uint64_t trainer_checksum(const trainer_t *self)
{
    if (self->emu) return ckpt_hash(emu_params(self->emu), emu_count(self->emu) * sizeof(float), 0x5eed);
    if (trainer_sync_host(self) < 0) LOG_W("trainer_checksum: %s", err_detail());
    const mlp_shape_t *s = mlp_shape(self->mlp);
    return ckpt_hash(mlp_params(self->mlp), s->count * sizeof(float), 0x5eed);
}

typedef struct {
    uint64_t step, hash;
    int32_t rank, pad;
} s_check_t;

/* One record per worker: ranks [0, world) of the communicator are the workers (dedicated PS servers,
 * when present, come after them and do not take part). */
static int s_gather_workers(trainer_t *t, const s_check_t *mine, s_check_t *all)
{
    return comm_allgather_group(t->cfg.comm, mine, sizeof *mine, all, t->cfg.world, t->cfg.timeout_ms);
}

int trainer_check(trainer_t *self)
{
    if (!self->cfg.comm || self->cfg.world < 2) return 0;
    int w = self->cfg.world;
    CHECK(trainer_sync_host(self));
    s_check_t mine = {.step = self->step, .hash = trainer_checksum(self), .rank = self->cfg.rank};
    s_check_t *all = calloc((size_t)w, sizeof *all);
    if (!all) return ERR_NOMEM;
    int rc = s_gather_workers(self, &mine, all);
    self->nchecks++;
    if (rc) {
        free(all);
        return rc;
    }
    char bad[512];
    size_t off = 0;
    int nbad = 0;
    for (int r = 1; r < w; r++)
        if (all[r].hash != all[0].hash || all[r].step != all[0].step) {
            nbad++;
            if (off < sizeof bad)
                off += (size_t)snprintf(bad + off, sizeof bad - off, "%s%d (%016llx at step %llu)", nbad > 1 ? ", " : "", r,
                                        (unsigned long long)all[r].hash, (unsigned long long)all[r].step);
        }
    if (nbad) {
        rc = err_set(ERR_MISMATCH, "parameter checksums differ after step %llu: rank 0 has %016llx; %d rank%s from it: %s",
                     (unsigned long long)all[0].step, (unsigned long long)all[0].hash, nbad, nbad > 1 ? "s differ" : " differs", bad);
        LOG_E("%s", err_detail());
    }
    free(all);
    return rc;
}

int trainer_save(trainer_t *self, const char *path)
{
    if (self->emu) return trainer_can_save(self);
    const mlp_shape_t *s = mlp_shape(self->mlp);
    ckpt_t c;
    memset(&c, 0, sizeof c);
    mlp_format(s, c.model, sizeof c.model);
    snprintf(c.data, sizeof c.data, "%s", dataset_name(self->data));
    c.step = self->step;
    c.applied = self->applied;
    sampler_position(self->sampler, &c.epoch, &c.offset);
    c.seed = self->cfg.seed;
    c.world = (uint32_t)self->cfg.world;
    c.drop_last = (uint32_t)self->cfg.drop_last;
    c.global_batch = self->cfg.global_batch;
    memcpy(c.rng, self->rng.s, sizeof c.rng);
    c.amp_scale = self->amp.scale;
    c.amp_good = self->amp.good_steps;
    c.amp_overflows = self->amp.overflows;
    c.optim_kind = (uint32_t)self->cfg.optim.kind;
    c.grad_dtype = (uint32_t)self->cfg.grad_dtype;
    c.lr = self->cfg.optim.lr;
    c.count = s->count;
    CHECK(trainer_sync_host(self));
    c.params = mlp_params(self->mlp);
    if (self->optim || self->dopt || (self->ops && self->ops->optim_state && self->engine)) {
        float *bufs[CKPT_MAX_OPT] = {0};
        int nbuf = CKPT_MAX_OPT;
        size_t count = 0;
        if (self->optim) CHECK(optim_state(self->optim, bufs, &nbuf, &count));
        else if (self->dopt) CHECK(optim_dev_state(self->dopt, bufs, &nbuf, &count)); /* host snapshot */
        else CHECK(self->ops->optim_state(self->engine, bufs, &nbuf, &count));
        if (nbuf > CKPT_MAX_OPT || (nbuf && count != s->count))
            return err_set(ERR_STATE, "checkpoint: optimizer state of %d x %zu floats", nbuf, count);
        c.nopt = nbuf;
        for (int k = 0; k < nbuf; k++) c.opt[k] = bufs[k];
    } else {
        CHECK(trainer_can_save(self));
    }
    /* state the engine holds elsewhere (a PS's servers): its shards, the workers' file and a manifest */
    if (self->ops && self->ops->state_save && self->engine) return ckpt_save_set(path, &c, self->ops, self->engine);
    return ckpt_write(path, &c);
}

int trainer_can_save(const trainer_t *self)
{
    if (self->emu)
        return err_set(ERR_UNSUP, "checkpoint: model %s is emulated (its parameters are a test pattern, not a model "
                       "worth keeping); --save and --resume are for the MLP", self->cfg.model);
    int stateful = self->cfg.optim.kind == OPT_ADAM || self->cfg.optim.momentum != 0.0f;
    if (self->ops && stateful && !self->ops->optim_state && !self->ops->state_save)
        return err_set(ERR_UNSUP, "checkpoint: the optimizer state (momentum/Adam moments) of engine '%s' lives on its "
                       "servers, and a checkpoint without it would not resume bit-identically; use ring or tree, or "
                       "--optim sgd:momentum=0", self->ops->name);
    return 0;
}

int trainer_resume(trainer_t *self, const char *path)
{
    if (self->attached) return err_set(ERR_STATE, "resume after attach: resume first, then attach");
    if (self->emu) return trainer_can_save(self);
    ckpt_t c;
    CHECK(ckpt_load(path, &c));
    const mlp_shape_t *s = mlp_shape(self->mlp);
    char spec[128];
    mlp_format(s, spec, sizeof spec);
    int rc = 0;
    if (strcmp(spec, c.model) || c.count != s->count)
        rc = err_set(ERR_MISMATCH, "resume '%s': written for model %s, this run has %s", path, c.model, spec);
    else if (c.seed != self->cfg.seed)
        rc = err_set(ERR_MISMATCH, "resume '%s': written with --seed %llu, this run has --seed %llu (data and sampler "
                     "order derive from it)", path, (unsigned long long)c.seed, (unsigned long long)self->cfg.seed);
    else if (strcmp(c.data, dataset_name(self->data)))
        rc = err_set(ERR_MISMATCH, "resume '%s': written while training on %s data, this run uses %s", path, c.data,
                     dataset_name(self->data));
    else if (c.optim_kind != (uint32_t)self->cfg.optim.kind)
        rc = err_set(ERR_MISMATCH, "resume '%s': written with a different optimizer", path);
    if (rc) {
        ckpt_free(&c);
        return rc;
    }
    uint64_t offset = c.offset;
    if (c.world != (uint32_t)self->cfg.world || c.global_batch != self->cfg.global_batch ||
        c.drop_last != (uint32_t)self->cfg.drop_last) {
        LOG_W("resume '%s': written with %u workers, batch %llu, drop_last %u; now %d, %zu, %d: the data order "
              "continues approximately, not bit-identically", path, c.world, (unsigned long long)c.global_batch,
              c.drop_last, self->cfg.world, self->cfg.global_batch, self->cfg.drop_last);
        offset = c.world ? c.offset * c.world / (uint64_t)self->cfg.world : 0;
        if (offset > sampler_num_samples(self->sampler)) offset = sampler_num_samples(self->sampler);
    }
    if (c.grad_dtype != (uint32_t)self->cfg.grad_dtype)
        LOG_W("resume '%s': written with --grad-dtype %s, now %s", path, dt_name((dtype_t)c.grad_dtype),
              dt_name(self->cfg.grad_dtype));
    /* another learning rate is allowed (a schedule by hand), but never silent: one line, from rank 0 */
    if (c.has_lr && c.lr != self->cfg.optim.lr && self->cfg.rank == 0)
        LOG_W("resume '%s': saved at learning rate %g, this run's --optim gives %g: training continues at %g", path,
              (double)c.lr, (double)self->cfg.optim.lr, (double)self->cfg.optim.lr);
    rc = sampler_seek(self->sampler, c.epoch, (size_t)offset);
    if (!rc) {
        memcpy(mlp_params(self->mlp), c.params, c.count * sizeof(float));
        self->step = c.step;
        self->applied = c.applied;
        memcpy(self->rng.s, c.rng, sizeof c.rng);
        if (self->amp.enabled && c.grad_dtype == (uint32_t)self->cfg.grad_dtype) {
            self->amp.scale = c.amp_scale;
            self->amp.good_steps = c.amp_good;
        }
        self->amp.overflows = c.amp_overflows;
        for (int k = 0; k < CKPT_MAX_OPT; k++) {
            free(self->pending_opt[k]);
            self->pending_opt[k] = c.opt[k];
            c.opt[k] = NULL;
        }
        self->pending_nopt = c.nopt;
        free(self->pending_srv);
        self->pending_srv = c.srv_params; /* the servers' copy (a manifest), or NULL */
        c.srv_params = NULL;
        snprintf(self->pending_layout, sizeof self->pending_layout, "%s", c.layout);
    }
    ckpt_free(&c);
    return rc;
}
