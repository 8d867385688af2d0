/* CPU kernel: dropout with a counter-based mask (no RNG state to carry between runs or
 * threads): element i of run r draws splitmix64(seed, r, i). */
#include "ops/cpu/kernels.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

pbl_status pbl__cpu_dropout(const pbl__kargs *a)
{
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0), *mask = PBL__OUT(a, 1);
    double p = a->attr[0].f;
    uint64_t base = mix64((uint64_t)a->attr[1].i ^ mix64(a->run + 0x9e3779b97f4a7c15ull));
    float keep_scale = (float)(1.0 / (1.0 - p));
    /* keep when the top 24 bits, as a fraction of 2^24, are at least p */
    uint32_t threshold = (uint32_t)(p * 16777216.0);
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    if (a->n_in > 1 && PBL__IN(a, 1)[0] == 0.0f) { /* evaluation: the identity, and its gradient */
        for (int64_t i = 0; i < n; i++) {
            mask[i] = 1.0f;
            y[i] = x[i];
        }
        return PBL_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(mix64(base + (uint64_t)i * 0x9e3779b97f4a7c15ull) >> 40);
        mask[i] = u >= threshold ? keep_scale : 0.0f;
        y[i] = x[i] * mask[i];
    }
    return PBL_OK;
}
