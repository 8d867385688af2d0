/* Shared by the reduce ops' shape rule and kernel. */
#ifndef PBL_REDUCE_H
#define PBL_REDUCE_H

#include "graph/ir/op.h"
#include "graph/ir/reduce_modes.h"

/* The reduced shape of `in` with reduced dims kept as 1, from a sum/mean node's attributes
 * (empty axes: all). Returns 0 and explains in err when the axes are bad. */
int pbl__reduce_keep_shape(const pbl_shape *in, const pbl__attr_val *attr, pbl_shape *keep, char *err, size_t errlen);

#endif
