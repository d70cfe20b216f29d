/* test_sampler.c: DistributedSampler semantics: the ranks' indices are disjoint and cover the data
 * set (padded by repeating from the start), every epoch reshuffles (the same way on every rank),
 * drop_last truncates, and the batch cursor moves across epochs. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"
#include "trainer/sampler.h"

static size_t *s_epoch(size_t n, int world, int rank, uint64_t seed, uint64_t epoch, int drop_last, size_t *ns)
{
    sampler_t *s = NULL;
    sampler_cfg_t c = {.n = n, .world = world, .rank = rank, .seed = seed, .shuffle = 1, .drop_last = drop_last};
    cr_assert_eq(sampler_new(&s, &c), 0);
    cr_assert_eq(sampler_set_epoch(s, epoch), 0);
    *ns = sampler_num_samples(s);
    size_t *out = malloc(*ns * sizeof(size_t));
    memcpy(out, sampler_indices(s), *ns * sizeof(size_t));
    sampler_destroy(&s);
    sampler_destroy(&s);
    return out;
}

Test(sampler, partition_is_disjoint_complete_and_padded)
{
    const size_t n = 103;
    const int world = 4;
    size_t ns = 0;
    int *hits = calloc(n, sizeof(int));
    size_t total = 0;
    for (int r = 0; r < world; r++) {
        size_t *ix = s_epoch(n, world, r, 5, 0, 0, &ns);
        cr_assert_eq(ns, 26u, "ceil(103 / 4)");
        for (size_t i = 0; i < ns; i++) {
            cr_assert_lt(ix[i], n);
            hits[ix[i]]++;
        }
        total += ns;
        free(ix);
    }
    cr_assert_eq(total, 104u);
    size_t twice = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert(hits[i] >= 1, "index %zu never sampled", i);
        cr_assert(hits[i] <= 2);
        twice += hits[i] == 2;
    }
    cr_assert_eq(twice, 1u, "exactly the padding (1 index) repeats");
    free(hits);
}

Test(sampler, padding_repeats_from_the_start_when_world_exceeds_n)
{
    size_t ns;
    /* n = 3, world = 8: padded list is perm[0], perm[1], perm[2], perm[0], ... (8 entries) */
    size_t *r0 = s_epoch(3, 8, 0, 1, 0, 0, &ns);
    size_t *r3 = s_epoch(3, 8, 3, 1, 0, 0, &ns);
    size_t *r6 = s_epoch(3, 8, 6, 1, 0, 0, &ns);
    cr_assert_eq(ns, 1u);
    cr_assert_eq(r0[0], r3[0]);
    cr_assert_eq(r0[0], r6[0]);
    free(r0); free(r3); free(r6);
}

Test(sampler, stride_matches_one_shared_permutation)
{
    const size_t n = 40;
    size_t ns, ns1;
    size_t *all = s_epoch(n, 1, 0, 9, 2, 0, &ns1);
    for (int r = 0; r < 4; r++) {
        size_t *ix = s_epoch(n, 4, r, 9, 2, 0, &ns);
        for (size_t i = 0; i < ns; i++) cr_assert_eq(ix[i], all[(size_t)r + 4 * i], "rank takes every world-th index");
        free(ix);
    }
    free(all);
}

Test(sampler, epochs_reshuffle_deterministically)
{
    const size_t n = 1000;
    size_t ns;
    size_t *e0 = s_epoch(n, 2, 1, 11, 0, 0, &ns);
    size_t *e0b = s_epoch(n, 2, 1, 11, 0, 0, &ns);
    size_t *e1 = s_epoch(n, 2, 1, 11, 1, 0, &ns);
    size_t *s2 = s_epoch(n, 2, 1, 12, 0, 0, &ns);
    cr_assert_eq(memcmp(e0, e0b, ns * sizeof(size_t)), 0, "same (seed, epoch) -> same order");
    cr_assert_neq(memcmp(e0, e1, ns * sizeof(size_t)), 0, "a new epoch reshuffles");
    cr_assert_neq(memcmp(e0, s2, ns * sizeof(size_t)), 0, "a new seed reshuffles");
    size_t same = 0;
    for (size_t i = 0; i < ns; i++) same += e0[i] == e1[i];
    cr_assert_lt(same, ns / 10);
    free(e0); free(e0b); free(e1); free(s2);
}

Test(sampler, drop_last_truncates)
{
    const size_t n = 103;
    size_t ns;
    int *hits = calloc(n, sizeof(int));
    for (int r = 0; r < 4; r++) {
        size_t *ix = s_epoch(n, 4, r, 5, 0, 1, &ns);
        cr_assert_eq(ns, 25u, "floor(103 / 4)");
        for (size_t i = 0; i < ns; i++) hits[ix[i]]++;
        free(ix);
    }
    size_t seen = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_leq(hits[i], 1, "no index repeats with drop_last");
        seen += hits[i];
    }
    cr_assert_eq(seen, 100u);
    free(hits);
    sampler_t *s = NULL;
    sampler_cfg_t c = {.n = 3, .world = 4, .rank = 0, .seed = 1, .shuffle = 1, .drop_last = 1};
    cr_assert_eq(sampler_new(&s, &c), ERR_INVAL);
}

Test(sampler, batches_cross_epochs_short_last_batch_or_dropped)
{
    sampler_t *s = NULL;
    sampler_cfg_t c = {.n = 10, .world = 1, .rank = 0, .seed = 1, .shuffle = 1, .drop_last = 0};
    cr_assert_eq(sampler_new(&s, &c), 0);
    const size_t *ix;
    size_t k;
    uint64_t ep;
    size_t off;
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0); cr_assert_eq(k, 4u);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0); cr_assert_eq(k, 4u);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0); cr_assert_eq(k, 2u, "short last batch");
    sampler_position(s, &ep, &off);
    cr_assert_eq(ep, 0u);
    cr_assert_eq(off, 10u);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0); cr_assert_eq(k, 4u);
    sampler_position(s, &ep, &off);
    cr_assert_eq(ep, 1u);
    cr_assert_eq(off, 4u);
    /* seek reproduces the same batch */
    size_t want[4];
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0);
    memcpy(want, ix, sizeof want);
    cr_assert_eq(sampler_seek(s, 1, 4), 0);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0);
    cr_assert_eq(memcmp(want, ix, sizeof want), 0);
    sampler_destroy(&s);

    c.drop_last = 1;
    cr_assert_eq(sampler_new(&s, &c), 0);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0);
    cr_assert_eq(sampler_next(s, 4, &ix, &k), 0);
    cr_assert_eq(k, 4u, "the short batch is dropped: next epoch");
    sampler_position(s, &ep, &off);
    cr_assert_eq(ep, 1u);
    sampler_destroy(&s);
}
