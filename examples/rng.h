/*
 * The examples' random numbers: xoshiro256** seeded through splitmix64 (Vigna's
 * recommendation): small, fast, and the same sequence on every platform, so a seed names one
 * run. Header-only: train_mlp draws its initial weights and its shuffles from it.
 */
#ifndef EXAMPLES_RNG_H
#define EXAMPLES_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng;

static inline uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* `stream` separates the initialisation and shuffling sequences drawn from one seed. */
static inline void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03u);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [lo, hi), from the top 24 bits: exactly the floats of that spacing. */
static inline float rng_uniform(rng *r, float lo, float hi)
{
    float u = (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

/* Uniform in [0, n) without modulo bias: reject the short last stretch of the 2^64 range. */
static inline uint64_t rng_below(rng *r, uint64_t n)
{
    const uint64_t reject_below = (0 - n) % n; /* 2^64 mod n */
    uint64_t x;
    do
        x = rng_next(r);
    while (x < reject_below);
    return x % n;
}


#endif
