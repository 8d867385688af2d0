/*
 * CUDA kernel: dropout with the CPU kernel's counter-based mask (ops/cpu/dropout.c):
 * element i of run r keeps when the top 24 bits of splitmix64(seed, r, i) are at least
 * p·2^24. Integer arithmetic only, so the mask is bit-identical to the CPU's, and so is y
 * (one float multiply per element).
 *
 * The run counter comes from the kernel arguments, except while a CUDA graph is captured:
 * then it is read from device memory (l->run_dev), which the backend sets before every
 * replay, so a replayed graph draws a new mask each run as an uncaptured run does.
 */
#include "ops/cuda/common.cuh"

__device__ static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ static void dropout_k(float *y, float *mask, const float *x, int64_t n, uint64_t seed, uint64_t run,
                                 const uint64_t *run_dev, uint32_t threshold, float keep_scale, const float *training)
{
    if (training && *training == 0.0f) { /* evaluation (the switch is read here, so replays see it) */
        PBL__GRID_LOOP(i, n) {
            mask[i] = 1.0f;
            y[i] = x[i];
        }
        return;
    }
    uint64_t r = run_dev ? *run_dev : run;
    uint64_t base = mix64(seed ^ mix64(r + 0x9e3779b97f4a7c15ull));
    PBL__GRID_LOOP(i, n) {
        uint32_t u = (uint32_t)(mix64(base + (uint64_t)i * 0x9e3779b97f4a7c15ull) >> 40);
        float m = u >= threshold ? keep_scale : 0.0f;
        float v = x[i];
        mask[i] = m;
        y[i] = v * m;
    }
}

extern "C" pbl_status pbl__cuda_dropout(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    double p = a->attr[0].f;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(dropout_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__OUT(a, 1), PBL__IN(a, 0), n,
                                                              (uint64_t)a->attr[1].i, a->run, l->run_dev,
                                                              (uint32_t)(p * 16777216.0), (float)(1.0 / (1.0 - p)),
                                                              a->n_in > 1 ? PBL__IN(a, 1) : NULL);
    PBL__LAUNCHED();
done:
    return s;
}
