/*
 * The CUDA kernels, one per op, defined in ops/cuda/<family>.cu beside the family's CPU
 * kernels in ops/cpu/<family>.c. Included from C (executor/cuda/backend.c) and from C++
 * (the .cu files), so it declares C linkage.
 *
 * Each pbl__cuda_<op>(l, a) ENQUEUES the op on l->stream (cuBLAS bound to it) and returns
 * PBL_OK, or PBL_ERR_DEVICE with the failing call, file and line in a->err when a launch or
 * a cuBLAS call fails. Failures that depend on the data (a label out of range) are found on
 * the device: the kernel writes {l->tag + 1, row, value} into l->flag (first writer wins)
 * and the backend turns it into a message at sync (pbl__cuda_flag_message).
 */
#ifndef PBL_CUDA_KERNELS_H
#define PBL_CUDA_KERNELS_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "graph/ir/registry.h"

typedef struct pbl__cuda_launch {
    cudaStream_t    stream;
    cublasHandle_t  blas;     /* bound to `stream` by the backend */
    cublasLtHandle_t lt;      /* cuBLASLt, for products with fused epilogues */
    void           *workspace; /* the stream's cuBLAS workspace, shared with cuBLASLt (the
                                 stream orders their uses) */
    size_t          workspace_bytes;
    int            *flag;     /* device int[3]: {tag + 1, row, value} of the first data failure */
    int32_t         tag;      /* this launch's index in the backend's list of launched kargs */
    const uint64_t *run_dev;  /* while capturing a CUDA graph: the device run counter that
                                 graph_launch sets before each replay; NULL: use a->run */
} pbl__cuda_launch;

typedef pbl_status (*pbl__cuda_fn)(const pbl__cuda_launch *l, const pbl__kargs *a);

/* The ops with a CUDA kernel (has_kernel reports exactly these). */
#define PBL__CUDA_OP_LIST(X)                                                       \
    X(fully_connected) X(matmul)                                                   \
    X(add) X(sub) X(mul) X(div) X(scale) X(add_n) X(fill) X(copy)                  \
    X(relu) X(sigmoid) X(tanh) X(gelu)                                             \
    X(relu_grad) X(sigmoid_grad) X(tanh_grad) X(gelu_grad)                         \
    X(softmax) X(log_softmax) X(softmax_grad) X(log_softmax_grad)                  \
    X(softmax_cross_entropy) X(softmax_cross_entropy_grad)                         \
    X(mse_loss) X(mse_loss_grad)                                                   \
    X(sum) X(mean) X(sum_to) X(broadcast_to)                                       \
    X(reshape) X(flatten)                                                          \
    X(dropout)                                                                     \
    X(sgd) X(sgd_momentum) X(adam)                                                 \
    X(transpose) X(concat)                                                         \
    X(fully_connected_act) X(fully_connected_grad_wb) X(matmul_act_grad)          \
    X(conv2d) X(conv2d_grad_input) X(conv2d_grad_weight)                           \
    X(max_pool2d) X(max_pool2d_grad) X(avg_pool2d) X(avg_pool2d_grad)              \
    X(global_avg_pool) X(global_avg_pool_grad)                                     \
    X(batch_norm) X(batch_norm_grad) X(layer_norm) X(layer_norm_grad)              \
    X(embedding) X(embedding_grad)                                                 \
    X(elementwise_chain) X(fully_connected_packed)                                 \
    X(global_norm) X(clip_by_norm) X(batch_norm_update)                           \
    X(global_norm_grad) X(clip_by_norm_grad_norm)                               \
    X(slice) X(slice_grad) X(pad) X(pad_grad) X(gather) X(gather_grad) X(cast)     \
    X(resize) X(resize_grad)                                                       \
    PBL__MATH_OP_LIST(X) \
    X(reduce) X(reduce_grad) X(arg_reduce) X(hardmax) X(nll_loss) X(nll_loss_grad) \
    X(bucket_pack) X(bucket_unpack) X(allreduce)

#define PBL__CUDA_DECL(n) pbl_status pbl__cuda_##n(const pbl__cuda_launch *l, const pbl__kargs *a);
PBL__CUDA_OP_LIST(PBL__CUDA_DECL)
#undef PBL__CUDA_DECL

/* The message for a device-side failure flag {tag + 1, row, value} of the kernel of op with
 * arguments a (written into a->err); the status to report. It picks the op's own: */
pbl_status pbl__cuda_flag_message(const pbl__op *op, const pbl__kargs *a, int row, int value);
/* softmax_cross_entropy(+grad): a label out of range (ops/cuda/loss.cu) */
pbl_status pbl__cuda_label_flag_message(const pbl__kargs *a, int row, int value);
/* embedding(+grad): an id out of range (ops/cuda/embedding.cu) */
pbl_status pbl__cuda_gather_flag_message(const pbl__op *op, const pbl__kargs *a, int position, int id); /* gather(+grad): ops/cuda/index.cu */
pbl_status pbl__cuda_ids_flag_message(const pbl__op *op, const pbl__kargs *a, int position, int id);

#ifdef __cplusplus
}
#endif

#endif
