/*
 * Runtime hyper-parameters of the update ops (sgd, sgd_momentum, adam): each reads a value
 * from its attribute, or, when its bit of the "scalars" attribute is set, from a trailing
 * scalar input (a PBL_VALUE_SCALAR the caller changes between runs). The trailing inputs
 * come after the op's fixed inputs in bit order. Shared by the descriptors and both backends'
 * kernels, so the slot arithmetic is written once.
 */
#ifndef PBL_OPS_SHARED_HYPER_H
#define PBL_OPS_SHARED_HYPER_H

#include <stdint.h>

enum {
    PBL__HYPER_LR = 1,     /* bit 0: the learning rate */
    PBL__HYPER_WD = 2,     /* bit 1: the weight decay */
    PBL__HYPER_STEP = 4,   /* bit 2 (adam): the bias-correction step, instead of the state t */
    PBL__HYPER_NORM = 8,   /* bit 3: the gradients' global norm; g is clipped by the "max_norm"
                            * attribute as clip_by_norm would, fused into the update */
};

/* The input slot of hyper-parameter `bit` for an op with `base` fixed inputs, or -1 when
 * `mask` does not route it through an input. */
static inline int32_t pbl__hyper_slot(int32_t base, int64_t mask, int64_t bit)
{
    if (!(mask & bit))
        return -1;
    int32_t k = base;
    for (int64_t b = 1; b < bit; b <<= 1)
        k += (mask & b) ? 1 : 0;
    return k;
}

static inline int32_t pbl__hyper_count(int64_t mask)
{
    return (int32_t)((mask & 1) + ((mask >> 1) & 1) + ((mask >> 2) & 1) + ((mask >> 3) & 1));
}

#endif
