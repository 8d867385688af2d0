/* The reduce ops' attribute codes, shared by their descriptors (ops/reduce.c), their kernels
 * (ops/cpu/reduce.c, ops/cuda/reduce.cu) and the ONNX converters (graph/io/onnx_ops_reduce.c). */
#ifndef PBL_IR_REDUCE_MODES_H
#define PBL_IR_REDUCE_MODES_H

/* reduce's and reduce_grad's "mode" attribute: what combines the elements of each group. */
enum {
    PBL__RED_MAX, PBL__RED_MIN, PBL__RED_PROD, PBL__RED_L1, PBL__RED_L2,
    PBL__RED_LOG_SUM_EXP, PBL__RED_LOG_SUM, PBL__RED_SUM_SQUARE, PBL__RED_MODES
};
/* reduce's attribute slots (axes and keepdims first, as sum and mean have them). */
enum { PBL__RED_A_AXES, PBL__RED_A_KEEPDIMS, PBL__RED_A_MODE };
/* arg_reduce's attribute slots; its mode is 0 argmax, 1 argmin. */
enum { PBL__ARG_A_AXIS, PBL__ARG_A_KEEPDIMS, PBL__ARG_A_LAST, PBL__ARG_A_MODE };

#endif
