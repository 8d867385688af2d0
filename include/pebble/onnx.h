/*
 * pebble/onnx.h — ONNX models in, pebble graphs out; ONNX tensor files (.pb) in and out.
 *
 * An ONNX model's graph becomes a pebble graph: each graph input a PBL_VALUE_INPUT variable
 * of that name, each initializer (and each Constant node's tensor) a PBL_VALUE_PARAM variable
 * of that name whose data comes back in a pbl_onnx_weights, each node one or more pebble ops
 * (ONNX's two-way broadcasting, Gemm's alpha/beta/transposes, Softmax's axis and Reshape's 0
 * and -1 are mapped onto pebble's ops), each graph output a graph output of that name.
 *
 *     // given const char *path;   // an ONNX model file, "mlp.onnx", say
 *     float x[1 * 784] = { 0 };  // the model's graph input "input", f32 [1, 784]
 *     float y[1 * 10];            // its graph output "logits", f32 [1, 10]
 *     char err[1024];
 *     pbl_graph *g = NULL;
 *     pbl_onnx_weights *w = NULL;
 *     pbl_exec *e = NULL;
 *     pbl_onnx_options o = pbl_onnx_options_default();
 *     o.weights = &w;
 *     pbl_status s = pbl_graph_load_onnx(&g, path, &o, err, sizeof err);
 *     if (s == PBL_OK)
 *         s = pbl_exec_create(&e, g, NULL, err, sizeof err);
 *     if (s == PBL_OK)
 *         s = pbl_onnx_weights_bind(w, e, err, sizeof err);   // zero-copy: w outlives e
 *     if (s != PBL_OK)
 *         fprintf(stderr, "%s\n", err);
 *     else if (pbl_exec_write(e, pbl_graph_find_value(g, "input"), x, sizeof x) != PBL_OK ||
 *              pbl_exec_run(e) != PBL_OK ||
 *              pbl_exec_read(e, pbl_graph_output(g, "logits"), y, sizeof y) != PBL_OK)
 *         fprintf(stderr, "%s\n", pbl_exec_errmsg(e));
 *     pbl_exec_destroy(e);           // before w, whose blocks e uses
 *     pbl_onnx_weights_destroy(w);
 *     pbl_graph_destroy(g);
 *
 * Ops: Add Sub Mul Div (two-way broadcasting), Gemm, MatMul, Relu, Sigmoid, Tanh, Softmax,
 * LogSoftmax (axis semantics before and from opset 13), Flatten, Reshape (shape from an
 * initializer or Constant), Identity, Transpose, ReduceSum, ReduceMean (axes as attribute or
 * as a constant input), Concat, Dropout (inference: identity), Constant,
 * BatchNormalization (inference, with constant statistics: folded into mul + add), Conv,
 * MaxPool, AveragePool, GlobalAveragePool (pebble's conv2d / pool ops); the tensor family:
 * Gather (any axis, negative indices), Slice (attributes before opset 10, inputs from it;
 * negative steps, clamped bounds), Split, Pad (constant, reflect, edge), Unsqueeze, Squeeze,
 * Expand, Tile, Cast (between float and int32/int64), DepthToSpace, SpaceToDepth; the math
 * family (element-wise, one pebble op per ONNX op, two-way broadcasting): Clip (bounds as
 * attributes before opset 11, as inputs from it), LeakyRelu, Elu, Selu, Celu, PRelu, Softplus,
 * Softsign, HardSigmoid, HardSwish, ThresholdedRelu, Shrink, Gelu (approximate none or tanh),
 * Erf, Exp, Log, Sqrt, Neg, Abs, Reciprocal, Sign, Floor, Ceil, Round, Sin, Cos, Tan, Asin,
 * Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Pow, Min, Max, Sum, Mean, Mod (fmod 1 on floats,
 * fmod 0 on int32); Equal, Less, Greater, LessOrEqual, GreaterOrEqual, IsNaN, IsInf, Not, And,
 * Or, Xor giving, and Where taking, int32 0/1.
 * The reduction family: ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum
 * ReduceLogSumExp ReduceSumSquare (any axes), ArgMax ArgMin (indices as INT32), Hardmax (any
 * axis), NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights, ignore_index,
 * spatial dims; targets as INT32).
 * FLOAT (and DOUBLE initializers, as f32), INT32/INT64 and BOOL tensors; integers are int32 in
 * pebble (BOOL as 0/1): an int64 value outside int32 read as data is PBL_ERR_UNSUPPORTED naming
 * the tensor. An op over a dtype its pebble op does not take (Pow's int exponent) is
 * PBL_ERR_UNSUPPORTED naming the input and its dtype.
 *
 * Shape arithmetic is folded at load time: pebble's shapes are static, so Shape and Size of
 * any value are constants, and Shape, Size, ConstantOfShape, Range, Cast, Mod, Unsqueeze,
 * Squeeze, Concat, Gather, Slice, Add, Sub, Mul, Div, Neg, Equal, Less, Greater, Where, Expand,
 * Reshape and Identity on constants become constants (the exporters' Shape -> Gather ->
 * Concat -> Reshape chains end as one reshape). Those that only ever run folded (Shape's
 * kin, Range, ConstantOfShape, and ops no family maps) are refused naming the node when an
 * input is computed from data.
 *
 * Shapes: a graph input's symbolic or unknown dim (dim_param "N", or no dim_value) takes
 * options.dim_value; a negative dim_value is PBL_ERR_FORMAT. Every node's output shape is inferred by pebble; it must agree with the
 * model's value_info where the model gives one.
 *
 * Errors: a model using ops pebble does not map gives ONE PBL_ERR_UNSUPPORTED whose message
 * lists every unsupported op type with the name of one node using it ("unsupported ONNX ops:
 * Gather (node 'g1'), LSTM (node 'lstm0')"); an attribute value pebble cannot honour
 * (ceil_mode 1, a non-constant Reshape shape, an unknown Pad mode) is PBL_ERR_UNSUPPORTED naming the node; so are
 * a default-domain opset outside 1..22 and an attribute pebble does not know for its op (a
 * few that cannot change the result at inference are ignored: legacy consumed_inputs and
 * broadcast, Dropout's seed, BatchNormalization's momentum, Conv's kernel_shape; legacy
 * spatial only as 1). A value
 * outside its range (a flag such as transB not 0 or 1, Dropout's ratio outside [0, 1),
 * BatchNormalization's epsilon negative or not finite, an axis out of range, a constant Gather
 * index outside its axis, reflect pads wider than the dim, a Squeeze of a dim not 1) is PBL_ERR_ATTR naming the node. A
 * malformed protobuf, a missing required field, a dangling value reference, a value defined
 * twice, a tensor whose data does not match its dims or an absurd shape gives
 * PBL_ERR_FORMAT; nodes that depend on each other in a cycle PBL_ERR_CYCLE; shapes that do
 * not fit an op (or disagree with the model's declared shapes) PBL_ERR_SHAPE; an I/O problem
 * PBL_ERR_IO; out of memory PBL_ERR_NOMEM.
 * On failure *out is NULL (and *options.weights NULL) and err holds a message naming the
 * node, value or field. Thread-safe: calls share nothing.
 */
#ifndef PEBBLE_ONNX_H
#define PEBBLE_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "pebble/exec.h"
#include "pebble/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Initializer data of a loaded model: one block per parameter variable. */
typedef struct pbl_onnx_weights pbl_onnx_weights;

typedef struct pbl_onnx_options {
    const pbl_allocator *allocator; /* the graph's and the weights' host memory; NULL: malloc */
    int64_t              dim_value; /* size of symbolic/unknown input dims (default 1) */
    pbl_onnx_weights   **weights;   /* not NULL: receives the initializer data (the caller
                                       destroys it); NULL: the data is dropped (planning only) */
    int32_t              pack_weights; /* a Gemm x·wᵀ + b whose w is a constant may become
                                       fully_connected_packed, w repacked at load time into
                                       the CPU kernel's panels (pebble/ops.h). 1 (default):
                                       where that is faster on this CPU's kernel level
                                       (pbl_cpu_kernels: every batch with AVX2 or AVX-512,
                                       batches below 16 at the SSE2 baseline); 2: always;
                                       0: never (fully_connected on w as stored) */
} pbl_onnx_options;

pbl_onnx_options pbl_onnx_options_default(void);

/* Loads the ONNX model file `path` as a new graph. opt may be NULL. Statuses: see above;
 * path must be a regular file (a FIFO or a device: PBL_ERR_IO at once, the open never blocks)
 * of at most 2 GiB (PBL_ERR_FORMAT, before reading). Weights kept as external data (the
 * `model.onnx.data` file torch.onnx.export's default exporter writes beside the model) are
 * read from their file, found relative to the model's folder: only a plain relative location
 * (no leading '/', no '..'), a regular file, and a range inside it of exactly the tensor's
 * bytes are accepted (PBL_ERR_FORMAT / PBL_ERR_IO naming the initializer otherwise). */
pbl_status pbl_graph_load_onnx(pbl_graph **out, const char *path, const pbl_onnx_options *opt,
                               char *err, size_t errlen);
/* The same from the serialized ModelProto in data[0..len). External data cannot be found
 * from memory: such a model is PBL_ERR_UNSUPPORTED (load it from its file). */
pbl_status pbl_graph_from_onnx(pbl_graph **out, const void *data, size_t len,
                               const pbl_onnx_options *opt, char *err, size_t errlen);

/* The number of parameter blocks, and block i: its variable, data and size in bytes. */
int32_t    pbl_onnx_weights_count(const pbl_onnx_weights *w);
pbl_status pbl_onnx_weights_at(const pbl_onnx_weights *w, int32_t i, pbl_value *v,
                               void **data, size_t *bytes);
/* Binds every block to its variable in e (pbl_exec_bind: zero-copy, so w must outlive e).
 * Returns the first failing bind's status, with its message in err. */
pbl_status pbl_onnx_weights_bind(const pbl_onnx_weights *w, pbl_exec *e, char *err, size_t errlen);
void       pbl_onnx_weights_destroy(pbl_onnx_weights *w); /* accepts NULL */
/* The external data files the blocks were read from (each once, as the model's folder and
 * the location): a program that writes files should not replace one (the model would lose
 * its weights). i out of range (or w NULL): NULL. */
int32_t     pbl_onnx_weights_file_count(const pbl_onnx_weights *w);
const char *pbl_onnx_weights_file_at(const pbl_onnx_weights *w, int32_t i);

/* ---- tensor files (TensorProto, as in ONNX's test_data_set_N/input_K.pb) ------------------ */

typedef struct pbl_onnx_tensor {
    char     *name;    /* "" when the file gives none */
    pbl_dtype dtype;   /* FLOAT -> PBL_F32; INT32, and INT64 within int32 range -> PBL_I32 */
    pbl_shape shape;
    void     *data;    /* numel elements of dtype, malloc'd */
    size_t    bytes;
} pbl_onnx_tensor;

/* Reads one serialized TensorProto. PBL_ERR_IO, PBL_ERR_FORMAT (malformed, data size not
 * matching the dims, rank above PBL_MAX_DIMS), PBL_ERR_UNSUPPORTED (another element type),
 * PBL_ERR_NOMEM. On failure *out is zeroed. As pbl_graph_load_onnx, path must be a regular
 * file of at most 2 GiB. */
pbl_status pbl_onnx_tensor_read(const char *path, pbl_onnx_tensor *out, char *err, size_t errlen);
/* The same from the serialized TensorProto in data[0..len) (standard input, a buffer);
 * messages start with name (NULL: "<bytes>"). No PBL_ERR_IO. */
pbl_status pbl_onnx_tensor_parse(const void *data, size_t len, const char *name, pbl_onnx_tensor *out,
                                 char *err, size_t errlen);
/* Writes t as a TensorProto file, whole or not at all (a temporary file beside it, renamed
 * over it; a symbolic link's target is replaced and the link kept; a FIFO or device is written
 * in place; a directory is refused with PBL_ERR_IO). */
pbl_status pbl_onnx_tensor_write(const char *path, const pbl_onnx_tensor *t, char *err, size_t errlen);
void       pbl_onnx_tensor_free(pbl_onnx_tensor *t); /* accepts NULL and a zeroed tensor */

#ifdef __cplusplus
}
#endif
#endif
