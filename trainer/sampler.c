/* sampler.c: DistributedSampler: a Fisher-Yates shuffle of 0..n-1 seeded by (seed, epoch), padded or
 * truncated to a multiple of world, strided by rank; plus the batch cursor that the trainer advances. */
#include "trainer/sampler.h"
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "trainer/rng.h"

struct sampler {
    sampler_cfg_t cfg;
    size_t num_samples, total;
    size_t *perm;       /* n */
    size_t *mine;       /* num_samples */
    uint64_t epoch;
    size_t pos;
    int    built;
};

int sampler_new(sampler_t **self_p, const sampler_cfg_t *cfg)
{
    if (!self_p || !cfg || cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world || cfg->n == 0)
        return err_set(ERR_INVAL, "sampler: need n > 0 and 0 <= rank < world");
    size_t w = (size_t)cfg->world;
    if (cfg->drop_last && cfg->n < w)
        return err_set(ERR_INVAL, "sampler: drop_last with %zu samples for %d ranks leaves nothing", cfg->n, cfg->world);
    sampler_t *s = calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->cfg = *cfg;
    /* torch: drop_last and n % world: num_samples = ceil((n - world) / world) = floor(n / world) */
    s->num_samples = cfg->drop_last ? cfg->n / w : (cfg->n + w - 1) / w;
    s->total = s->num_samples * w;
    s->perm = malloc(cfg->n * sizeof(size_t));
    s->mine = malloc((s->num_samples ? s->num_samples : 1) * sizeof(size_t));
    if (!s->perm || !s->mine) {
        sampler_destroy(&s);
        return err_set(ERR_NOMEM, "sampler: cannot allocate %zu indices", cfg->n);
    }
    *self_p = s;
    return sampler_set_epoch(s, 0);
}

void sampler_destroy(sampler_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->perm);
    free((*self_p)->mine);
    free(*self_p);
    *self_p = NULL;
}

size_t sampler_num_samples(const sampler_t *self) { return self->num_samples; }
const size_t *sampler_indices(const sampler_t *self) { return self->mine; }

int sampler_set_epoch(sampler_t *self, uint64_t epoch)
{
    size_t n = self->cfg.n, w = (size_t)self->cfg.world, r = (size_t)self->cfg.rank;
    for (size_t i = 0; i < n; i++) self->perm[i] = i;
    if (self->cfg.shuffle) {
        rng_t g;
        rng_seed(&g, self->cfg.seed, epoch);
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)rng_below(&g, (uint64_t)i + 1);
            size_t t = self->perm[i];
            self->perm[i] = self->perm[j];
            self->perm[j] = t;
        }
    }
    /* padded index k of the epoch list is perm[k % n] (repeats from the start, as many times as needed);
     * truncation is k < total <= n */
    for (size_t i = 0; i < self->num_samples; i++) self->mine[i] = self->perm[(r + i * w) % n];
    self->epoch = epoch;
    self->pos = 0;
    self->built = 1;
    return 0;
}

int sampler_next(sampler_t *self, size_t batch, const size_t **idx, size_t *n)
{
    if (batch == 0) return err_set(ERR_INVAL, "sampler: batch 0");
    if (self->cfg.drop_last && batch > self->num_samples)
        return err_set(ERR_INVAL, "sampler: drop_last with a batch of %zu but only %zu samples per rank per epoch",
                       batch, self->num_samples);
    size_t left = self->num_samples - self->pos;
    if (left == 0 || (self->cfg.drop_last && left < batch)) {
        CHECK(sampler_set_epoch(self, self->epoch + 1));
        left = self->num_samples;
    }
    size_t k = left < batch ? left : batch;
    *idx = self->mine + self->pos;
    *n = k;
    self->pos += k;
    return 0;
}

void sampler_position(const sampler_t *self, uint64_t *epoch, size_t *offset)
{
    *epoch = self->epoch;
    *offset = self->pos;
}

int sampler_seek(sampler_t *self, uint64_t epoch, size_t offset)
{
    if (offset > self->num_samples)
        return err_set(ERR_RANGE, "sampler: offset %zu beyond the %zu samples of an epoch", offset, self->num_samples);
    if (!self->built || self->epoch != epoch) CHECK(sampler_set_epoch(self, epoch));
    self->pos = offset;
    return 0;
}
