/* The CPU kernels, one per op, defined in ops/cpu/<family>.c beside the family's descriptors
 * in ops/<family>.c. */
#ifndef PBL_CPU_KERNELS_H
#define PBL_CPU_KERNELS_H

#include "ops/registry.h"

#define PBL__CPU_DECL(n) pbl_status pbl__cpu_##n(const pbl__kargs *a);
PBL__OP_LIST(PBL__CPU_DECL)
#undef PBL__CPU_DECL

/* f32 data of input i / output k */
#define PBL__IN(a, i)  ((const float *)(a)->in[i])
#define PBL__OUT(a, k) ((float *)(a)->out[k])
#define PBL__NUMEL(m)  pbl_shape_numel(&(m).shape)

#endif
