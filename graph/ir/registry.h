/* The op registry: a constant table, one descriptor per op, found by name or id. */
#ifndef PBL_REGISTRY_H
#define PBL_REGISTRY_H

#include "graph/ir/op.h"

/* The math family (ops/math.c), element-wise maps whose formulas are one table
 * (ops/shared/math.h). The differentiable maps come with a gradient op each, named with
 * S = _grad: unary <n>_grad (dy, x) -> dx, binary <n>_grad (dy, a, b) -> the full-shape
 * gradient of input "wrt". The rest (comparisons, logic, predicates, where's condition)
 * output or read int32 0/1; the int maps take and give int32. */
#define PBL__MATH_UNARY_LIST(X, S)                                                 \
    X(clip##S) X(leaky_relu##S) X(elu##S) X(selu##S) X(softplus##S)                \
    X(softsign##S) X(hard_sigmoid##S) X(hard_swish##S) X(thresholded_relu##S)      \
    X(shrink##S) X(gelu_tanh##S) X(erf##S) X(exp##S) X(log##S) X(sqrt##S)          \
    X(neg##S) X(abs##S) X(reciprocal##S) X(sign##S) X(floor##S) X(ceil##S)         \
    X(round##S) X(sin##S) X(cos##S) X(tan##S) X(asin##S) X(acos##S) X(atan##S)     \
    X(sinh##S) X(cosh##S) X(asinh##S) X(acosh##S) X(atanh##S) X(celu##S)
#define PBL__MATH_BINARY_LIST(X, S) X(pow##S) X(prelu##S) X(min##S) X(max##S) X(fmod##S)
#define PBL__MATH_COMPARE_LIST(X) X(equal) X(less) X(greater) X(less_equal) X(greater_equal)
#define PBL__MATH_LOGIC_LIST(X) X(logical_and) X(logical_or) X(logical_xor)
#define PBL__MATH_PREDICATE_LIST(X) X(is_nan) X(is_inf)
#define PBL__MATH_INT_LIST(X) X(mod)
#define PBL__MATH_OP_LIST(X)                                                       \
    PBL__MATH_UNARY_LIST(X, ) PBL__MATH_UNARY_LIST(X, _grad)                       \
    PBL__MATH_BINARY_LIST(X, ) PBL__MATH_BINARY_LIST(X, _grad)                     \
    PBL__MATH_COMPARE_LIST(X) PBL__MATH_LOGIC_LIST(X) X(logical_not) X(where)         \
    PBL__MATH_PREDICATE_LIST(X) PBL__MATH_INT_LIST(X)

/* Every op; each descriptor is defined in the ops/<family>.c file that owns it. */
#define PBL__OP_LIST(X)                                                            \
    X(fully_connected) X(matmul)                                                   \
    X(add) X(sub) X(mul) X(scale) X(add_n) X(fill) X(copy)                         \
    X(relu) X(sigmoid) X(tanh) X(gelu)                                             \
    X(relu_grad) X(sigmoid_grad) X(tanh_grad) X(gelu_grad)                         \
    X(softmax) X(log_softmax) X(softmax_grad) X(log_softmax_grad)                  \
    X(softmax_cross_entropy) X(softmax_cross_entropy_grad)                         \
    X(mse_loss) X(mse_loss_grad)                                                   \
    X(sum) X(mean) X(sum_to) X(broadcast_to)                                       \
    X(reshape) X(flatten)                                                          \
    X(dropout)                                                                     \
    X(sgd) X(sgd_momentum) X(adam)                                                 \
    X(conv2d) X(conv2d_grad_input) X(conv2d_grad_weight)                           \
    X(max_pool2d) X(max_pool2d_grad) X(avg_pool2d) X(avg_pool2d_grad)              \
    X(global_avg_pool) X(global_avg_pool_grad)                                     \
    X(batch_norm) X(batch_norm_grad) X(layer_norm) X(layer_norm_grad)              \
    X(embedding) X(embedding_grad)                                                 \
    X(transpose)                                                                   \
    X(div) X(concat) X(fully_connected_packed)                                     \
    X(fully_connected_act) X(elementwise_chain)                                   \
    X(fully_connected_grad_wb) X(matmul_act_grad)                                 \
    X(global_norm) X(clip_by_norm) X(batch_norm_update)                           \
    X(global_norm_grad) X(clip_by_norm_grad_norm)                               \
    X(slice) X(slice_grad) X(pad) X(pad_grad) X(gather) X(gather_grad) X(cast)     \
    X(resize) X(resize_grad)                                                       \
    PBL__MATH_OP_LIST(X)                                                           \
    X(reduce) X(reduce_grad) X(arg_reduce) X(hardmax) X(nll_loss) X(nll_loss_grad) \
    X(bucket_pack) X(allreduce) X(bucket_unpack)

enum {
#define PBL__OP_ENUM(n) PBL__OP_##n,
    PBL__OP_LIST(PBL__OP_ENUM)
#undef PBL__OP_ENUM
    PBL__OP_COUNT
};

#define PBL__OP_DECL(n) extern const pbl__op pbl__op_##n;
PBL__OP_LIST(PBL__OP_DECL)
#undef PBL__OP_DECL

const pbl__op *pbl__op_get(int32_t id);        /* NULL when out of range */
int32_t        pbl__op_find(const char *name); /* -1 when unknown */

#endif
