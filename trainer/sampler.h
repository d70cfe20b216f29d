/* sampler.h: PyTorch DistributedSampler semantics. Each epoch the dataset indices are shuffled with a
 * generator seeded by (seed, epoch) (the same permutation on every rank), padded by repeating from
 * the start up to a multiple of the world size (or, with drop_last, truncated down to one), and rank r
 * takes indices r, r + world, r + 2 world, ... Batches are consecutive runs of a rank's indices; the
 * last batch of an epoch is short unless drop_last (as DataLoader(drop_last=...)). */
#ifndef SB_TRAINER_SAMPLER_H
#define SB_TRAINER_SAMPLER_H
#include <stddef.h>
#include <stdint.h>

typedef struct sampler sampler_t;

typedef struct {
    size_t   n;          /* dataset size */
    int      world, rank;
    uint64_t seed;
    int      shuffle;    /* 1 = shuffle each epoch (default in DistributedSampler) */
    int      drop_last;
} sampler_cfg_t;

int  sampler_new(sampler_t **self_p, const sampler_cfg_t *cfg);
void sampler_destroy(sampler_t **self_p);
/* Indices this rank sees per epoch (DistributedSampler.num_samples). */
size_t sampler_num_samples(const sampler_t *self);
/* Build epoch e's indices and rewind to its start. */
int  sampler_set_epoch(sampler_t *self, uint64_t epoch);
/* This rank's indices for the current epoch (num_samples of them). */
const size_t *sampler_indices(const sampler_t *self);
/* Next batch of up to `batch` indices: *idx points into the epoch's indices, *n how many. At the end
 * of an epoch (or when fewer than batch remain and drop_last), moves to the next epoch first. */
int  sampler_next(sampler_t *self, size_t batch, const size_t **idx, size_t *n);
/* Position for checkpoints: epoch and offset within it. */
void sampler_position(const sampler_t *self, uint64_t *epoch, size_t *offset);
int  sampler_seek(sampler_t *self, uint64_t epoch, size_t offset);

#endif
