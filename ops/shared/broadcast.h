/*
 * Broadcasting, walked row by row. A small operand broadcast against a big shape (right-
 * aligned, each small dim equal or 1) is read along each row of the big shape's last dim
 * with stride 1 (dim matches) or 0 (dim is 1), from an offset that depends on the row.
 * add/sub/mul, broadcast_to and sum_to all walk it the same way.
 */
#ifndef PBL_SHARED_BROADCAST_H
#define PBL_SHARED_BROADCAST_H

#include "pebble/graph.h"

typedef struct pbl__bcast {
    int32_t ndim;                    /* the big shape's rank */
    int64_t dim[PBL_MAX_DIMS];       /* the big shape */
    int64_t stride[PBL_MAX_DIMS];    /* the small operand's element stride per big dim (0: broadcast) */
    int64_t rows, cols;              /* big = rows × cols (cols = last dim) */
    int64_t col_stride;              /* stride[ndim - 1] */
    int     tiled;                   /* small is big's trailing dims exactly: offset = row·cols mod small numel */
    int64_t small_numel;
} pbl__bcast;

/* Whether `small` broadcasts to `big`. */
int     pbl__bcast_ok(const pbl_shape *big, const pbl_shape *small);
void    pbl__bcast_init(pbl__bcast *b, const pbl_shape *big, const pbl_shape *small);
/* Offset of the small operand's first element used by big-shape row `row`. */
int64_t pbl__bcast_row_offset(const pbl__bcast *b, int64_t row);

#endif
