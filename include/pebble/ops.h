/*
 * pebble/ops.h — the registered ops.
 *
 * Inputs in order; "?" marks an optional trailing input. Shapes: N batch, C classes.
 * Broadcasting ("bcast"): b's shape, right-aligned against a's, has each dim equal or 1.
 *
 * op                          inputs                  outputs      attributes (default)
 * ---------------------------------------------------------------------------------------------
 * fully_connected             x[N,in] w[out,in] b?[out]  y[N,out]
 * matmul                      a[...,m,k] b[...,k,n]   c[...,m,n]   trans_a (0), trans_b (0)
 * add / sub / mul             a, b (bcast)            y (a's shape)
 * relu / sigmoid / tanh / gelu  x                     y            (gelu: exact, with erf)
 * softmax / log_softmax       x                       y            over the last dim
 * softmax_cross_entropy       logits[N,C] labels[N] i32  loss []  mean over the batch
 * mse_loss                    pred, target (same)     loss []      mean of squares
 * sum / mean                  x                       y            axes ([] = all), keepdims (0)
 * reshape                     x                       y            shape (one dim may be -1)
 * flatten                     x                       y            axis (1)
 * copy                        x                       y
 * dropout                     x training?[]           y, mask      p (0.5), seed (0); training, a
 *                                                                  runtime scalar (pebble/graph.h):
 *                                                                  0 evaluates (y = x, mask = 1)
 * scale                       x                       y = alpha·x  alpha (1)
 * fill                        —                       y            shape ([]), value (0)
 * broadcast_to / sum_to       x                       y            shape
 * add_n                       x1..x16 (same shapes)   y = Σ xi
 * sgd                         w g s?..                w'           lr, weight_decay (0), scalars (0)
 * sgd_momentum                w g m s?..              w' m'        lr, momentum (0.9), weight_decay,
 *                                                                  scalars (0)
 * adam                        w g m v t[1] s?..       w' m' v' t'  lr, beta1 (0.9), beta2 (0.999),
 *                                                                  eps (1e-8), weight_decay,
 *                                                                  scalars (0), decoupled (0; 1:
 *                                                                  AdamW, w·(1 − lr·wd) first)
 *   scalars: bit 0 lr, bit 1 weight_decay, bit 2 (adam) the bias-correction step come from
 *   trailing one-element f32 inputs s (runtime scalars), in bit order, instead of attributes
 * global_norm                 x1..x16 (f32)           n[] = sqrt(Σ all xi²)   not differentiable
 * clip_by_norm                x norm[]                y = x·min(1, max_norm/(norm + 1e-6))
 *                                                                  max_norm (required, > 0);
 *                                                                  not differentiable
 * relu_grad, sigmoid_grad, tanh_grad, softmax_grad, log_softmax_grad   dy y  ->  dx
 * gelu_grad                   dy x                    dx
 * softmax_cross_entropy_grad  logits labels dloss     dlogits
 * mse_loss_grad               pred target dloss       dpred
 *
 *
 * fully_connected_packed      x[M,K] wp[ceil(N/16),K,16] b?[N]  y[M,N] = x·wᵀ + b   out (N, required);
 *                             wp[p,k,j] = w[16p+j, k], 0 past N (weights packed once, e.g. by
 *                             the ONNX loader); inference only, not differentiable
 * div                         a, b (bcast)            y = a / b
 * concat                      x1..x16 (one dtype)     y            axis (required); all dims but
 *                                                                  axis agree; not differentiable
 * fully_connected_act         x[N,in] w[out,in] b?[out]  y = act(x·wᵀ + b)  act (0 none, 1 relu, 2 sigmoid,
 *                                                     3 tanh, 4 gelu), bias_after (0); made by
 *                                                     pbl_graph_fuse (pebble/fuse.h); not differentiable
 * elementwise_chain           x, b1..bk (x's shape)   y            codes (required): a chain of
 *                                                     element-wise steps (graph/ir/fused_codes.h); made by
 *                                                     pbl_graph_fuse; not differentiable
 * fully_connected_grad_wb     dy[N,out] x[N,in]       dw[out,in] = dyᵀ·x, db[out] = Σ_n dy; made by
 *                                                     pbl_graph_fuse; not differentiable
 * matmul_act_grad             a b s                   dx = act_grad(op(a)·op(b), s)  trans_a, trans_b
 *                                                     (0), act (required: 1 relu, 2 sigmoid, 3 tanh,
 *                                                     4 gelu; s as that gradient op's second input);
 *                                                     made by pbl_graph_fuse; not differentiable
 *
 * Normalisation (training form: statistics of the batch, biased variance; mean and inv_std =
 * 1/sqrt(var + eps) are saved for the gradient) and embedding; they and their gradient ops run:
 * batch_norm                  x[N,C,...] scale[C] bias[C]  y, mean[C], inv_std[C]          eps (1e-5)
 *                             [running_mean[C] running_var[C] training[]]: with the switch 0,
 *                             normalises with the running statistics (and outputs them)
 * batch_norm_update           mean inv_std running_mean running_var count[1] training[]
 *                             -> running_mean' running_var' count' (in place; only in training)
 *                             momentum (0.1), eps (1e-5), set_size (required); made by
 *                             pbl_batch_norm_switched (pebble/builder.h); not differentiable
 * layer_norm                  x[...,D] gamma[D] beta[D]    y, mean[...,1], inv_std[...,1]  eps (1e-5)
 * embedding                   ids (i32, any rank) table[V,D]  y[...,D]; an id outside [0, V)
 *                                                     fails the run (PBL_ERR_INVALID_ARG)
 * batch_norm_grad, layer_norm_grad, embedding_grad: their gradient ops.
 *
 * Convolution and pooling over 1 to 3 spatial dims (x [N,C,W], [N,C,H,W] or [N,C,D,H,W]; the
 * names say 2d for history); max_pool2d's gradient goes to the first tap, in window order,
 * whose x equals y. Window attributes list 1 int (every spatial dim) or one per spatial dim;
 * pad 1, one per dim (both ends) or two per dim (all begins, then all ends):
 * conv2d                      x[N,C,d...] w[Co,C/g,k...] b?[Co]  y  stride, pad, dilation,
 *                                                                   groups (1)
 * max_pool2d / avg_pool2d     x[N,C,d...]             y            kernel (required), stride (1),
 *                                                                  pad, dilation, ceil (0: ONNX
 *                                                                  ceil_mode); avg divides by the
 *                                                                  taps inside x, or with
 *                                                                  count_pad 1 inside the padded x
 * global_avg_pool             x[N,C,...]              y[N,C,1,...]
 * conv2d_grad_input  dy w -> dx,  conv2d_grad_weight  dy x -> dw   (the window attributes, shape:
 *                                                     the shape made), max_pool2d_grad dy x y -> dx,
 *                                                     avg_pool2d_grad dy -> dx (shape),
 *                                                     global_avg_pool_grad dy -> dx (shape);
 *                                                     conv2d_grad_input is ONNX ConvTranspose too
 *                                                     and has a gradient (conv2d, conv2d_grad_weight)
 * resize                      x                       y            shape (y's, required), mode (0
 *                                                                  nearest, 1 linear), coord (0
 *                                                                  half_pixel, 1 pytorch_half_pixel,
 *                                                                  2 align_corners, 3 asymmetric,
 *                                                                  4 tf_half_pixel_for_nearest),
 *                                                                  nearest (0 round_prefer_floor,
 *                                                                  1 round_prefer_ceil, 2 floor,
 *                                                                  3 ceil), scale_bits (each dim's
 *                                                                  scale as binary64 bits; empty:
 *                                                                  y/x); any rank
 * resize_grad dy -> dx (resize's attributes and x_shape)
 *
 * transpose                   x                       y            perm ([] = reverse); runs on the CPU
 *
 * The optimizer ops write their outputs over their inputs (w' is w's storage): every other
 * reader of w is scheduled before the update. t is the per-parameter step count (float32,
 * exact to 2^24 steps). The *_grad ops are what the gradient pass emits; they have no
 * gradient themselves, but for conv2d_grad_input.
 */
#ifndef PEBBLE_OPS_H
#define PEBBLE_OPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int32_t     pbl_op_count(void);
const char *pbl_op_name(int32_t i);       /* NULL when out of range */
int         pbl_op_exists(const char *name);
int         pbl_op_differentiable(const char *name);
/* Whether the CPU backend can run the op (shape-only ops cannot: they are planned, not run). */
int         pbl_op_has_cpu_kernel(const char *name);

#ifdef __cplusplus
}
#endif
#endif
