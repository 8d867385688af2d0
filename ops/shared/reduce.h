/* Shared by the reduce ops' shape rule and kernel. */
#ifndef PBL_REDUCE_H
#define PBL_REDUCE_H

#include "graph/ir/op.h"
#include "graph/ir/reduce_modes.h"

/* The reduced shape of `in` with reduced dims kept as 1, from a sum/mean node's attributes
 * (empty axes: all). Returns 0 and explains in err when the axes are bad. */
int pbl__reduce_keep_shape(const pbl_shape *in, const pbl__attr_val *attr, pbl_shape *keep, char *err, size_t errlen);

/* arg_reduce's input seen as [outer, n, inner] around its axis attribute (negative: from the
 * end), for the CPU and CUDA kernels alike */
typedef struct pbl__axis_split {
    int64_t outer, n, inner;
} pbl__axis_split;

static inline pbl__axis_split pbl__arg_reduce_split(const pbl_shape *xs, const pbl__attr_val *attr)
{
    int64_t axis = attr[PBL__ARG_A_AXIS].i;
    if (axis < 0)
        axis += xs->ndim;
    pbl__axis_split s = { 1, xs->dim[axis], 1 };
    for (int32_t i = 0; i < xs->ndim; i++)
        if (i < axis)
            s.outer *= xs->dim[i];
        else if (i > axis)
            s.inner *= xs->dim[i];
    return s;
}

#endif
