/* rng.h: the trainer's deterministic random numbers: splitmix64 for seeding and hashing (seed, epoch)
 * style tuples, xoshiro256** as the generator (state fits in a checkpoint), uniform and Gaussian
 * draws, and an unbiased bounded integer (Lemire) for shuffles. Same seed -> same bits everywhere. */
#ifndef SB_TRAINER_RNG_H
#define SB_TRAINER_RNG_H
#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } rng_t;

static inline uint64_t rng_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Seed from a tuple: (seed, stream) -> independent generators for e.g. (seed, epoch). */
static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (rng_splitmix(&stream) + 0x632be59bd9b4e019ull);
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&x);
}

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t out = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return out;
}

/* Uniform in [0, 1) with 24 bits (exact in f32). */
static inline float rng_uniform(rng_t *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

/* Standard normal (Box-Muller, one draw per call; deterministic). */
static inline float rng_normal(rng_t *r)
{
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double u2 = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Unbiased integer in [0, n), n > 0. */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
    uint64_t x = rng_next(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = (0 - n) % n;
        while (l < t) {
            x = rng_next(r);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

#endif
