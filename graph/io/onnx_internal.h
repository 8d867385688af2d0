/* What the ONNX files share: protobuf-c allocations through a pbl__mem and TensorProto
 * decoding with every size checked against the data present (graph/io/onnx_tensor.c), and the
 * loader's state with the helpers through which the op converters (graph/io/onnx_ops.c) read
 * their node and define its outputs (graph/io/onnx_load.c). */
#ifndef PBL_ONNX_INTERNAL_H
#define PBL_ONNX_INTERNAL_H

#include <protobuf-c/protobuf-c.h>

#include "graph/base/errmsg.h"
#include "graph/base/mem.h"
#include "onnx/onnx.pb-c.h"
#include "pebble/onnx.h"

/* protobuf-c's allocator over m (sizes are kept in a small header, since protobuf-c's free
 * is not told them). protobuf-c reports a failed allocation as a failed unpack, like
 * malformed input: `failed` tells the two apart. */
typedef struct pbl__onnx_pb {
    pbl__mem *m;
    int       failed;
} pbl__onnx_pb;

ProtobufCAllocator pbl__onnx_pb_allocator(pbl__onnx_pb *pb);

/* The most elements one tensor may have: 2^40 (4 TiB of floats). Larger shapes are absurd
 * for this library and would overflow byte counts. */
#define PBL__ONNX_MAX_NUMEL ((int64_t)1 << 40)

/* A decoded tensor: floats (FLOAT, DOUBLE) or 64-bit integers (INT32, INT64). */
typedef struct pbl__onnx_data {
    pbl_shape shape;
    int64_t   numel;
    int       is_int;    /* 1: ints holds the data; 0: f holds it */
    float    *f;         /* numel floats from the weights' memory */
    int64_t  *ints;      /* numel int64 from the loader's memory */
    int       empty;     /* an integer constant with no elements (a shape sliced to nothing), which
                            folding may use (a Concat of it and others); never a graph value */
} pbl__onnx_data;

/* ONNX's name of TensorProto data type t ("DOUBLE"), for messages. */
const char *pbl__onnx_type_name(int32_t t);
/* Decodes t. Float data is allocated from fmem, integer data from imem. PBL_ERR_FORMAT (dims
 * negative or absurd, data size not matching the dims, raw data of the wrong length),
 * PBL_ERR_UNSUPPORTED (another element type, external data, rank above PBL_MAX_DIMS),
 * PBL_ERR_NOMEM. `what` names the tensor in messages. */
pbl_status pbl__onnx_data_decode(const Onnx__TensorProto *t, pbl__mem *fmem, pbl__mem *imem,
                                 pbl__onnx_data *out, const char *what, char *err, size_t errlen);
void       pbl__onnx_data_free(pbl__onnx_data *d, pbl__mem *fmem, pbl__mem *imem);

/* Reads a whole file (a regular one, at most PBL__FILE_IN_MAX_BINARY bytes: graph/base/file_in.h)
 * into memory from m: *len + 1 bytes to free. PBL_ERR_IO names the path and errno text. */
pbl_status pbl__onnx_read_file(const char *path, pbl__mem *m, uint8_t **data, size_t *len,
                               char *err, size_t errlen);

/* ---- the loader's state (graph/io/onnx_load.c) and the op converters (graph/io/onnx_ops.c) --------- */

typedef struct pbl__onnx_weight_item {
    pbl_value v;
    float    *data;
    size_t    bytes;
} pbl__onnx_weight_item;

struct pbl_onnx_weights {
    pbl__mem               mem;   /* the items array and every data block */
    pbl__onnx_weight_item *items;
    int32_t                n, cap;
    char                 **files; /* the external data files read, each once (their paths) */
    int32_t                n_files, cap_files;
};

/* One ONNX value name and what it is. */
typedef struct pbl__onnx_sym {
    const char    *name;        /* into the unpacked model */
    pbl_value      v;           /* the pebble value, PBL_NONE while a constant is not materialised */
    int            is_const;
    pbl__onnx_data data;        /* a constant's data, owned until it moves to the weights */
    const char    *unsupported; /* a value pebble cannot give (Dropout's mask): why */
} pbl__onnx_sym;

typedef struct pbl__onnx_ctx {
    pbl__mem          mem;      /* temporaries: the table, integer constants, the file */
    pbl_onnx_weights *w;
    pbl_graph        *g;
    const pbl_onnx_options *opt;
    int64_t           opset;    /* the default domain's version */
    pbl__onnx_sym    *syms;
    int32_t           n_syms, cap_syms;
    int32_t          *hash;     /* open addressing over syms: index + 1, 0 empty */
    int32_t           hash_cap;
    const char       *dir;      /* the model's folder (external tensor data); NULL when the
                                   model came from memory */
    const Onnx__NodeProto *node; /* the node being converted */
    int32_t           node_index;
    char             *err;
    size_t            errlen;
} pbl__onnx_ctx;

/* Formats the message into c->err and returns s (the one formatter, graph/base/errmsg.h). */
#define pbl__onnx_fail(c, s, ...) pbl__errf((c)->err, (c)->errlen, (s), __VA_ARGS__)
/* "node 'fc1' (Gemm)" or "node #3 (Gemm)" for messages, into buf. */
const char *pbl__onnx_node_label(pbl__onnx_ctx *c, char *buf, size_t n);

/* Returns from the calling function with status s and a message naming the current node. */
#define NODE_FAIL(c, s, fmt, ...)                                                                  \
    do {                                                                                           \
        char nl_[256];                                                                             \
        return pbl__onnx_fail((c), (s), "%s: " fmt, pbl__onnx_node_label((c), nl_, sizeof nl_),    \
                              __VA_ARGS__);                                                        \
    } while (0)

/* Decodes initializer t whose data is external (graph/io/onnx_external.c: the file beside
 * the model, only the tensor's range read), as pbl__onnx_data_decode does inline data. */
pbl_status pbl__onnx_external_decode(pbl__onnx_ctx *c, const Onnx__TensorProto *t, pbl__onnx_data *out,
                                     const char *what);
/* The table entry of ONNX value `name`, or NULL. */
pbl__onnx_sym *pbl__onnx_sym_find(pbl__onnx_ctx *c, const char *name);
/* Adds a name; PBL_ERR_FORMAT when it is already defined (ONNX values are assigned once). */
pbl_status pbl__onnx_sym_add(pbl__onnx_ctx *c, const char *name, pbl__onnx_sym **out);
/* Float data -> a parameter variable, its data moved into the weights; on failure *out is
 * PBL_NONE and the data still the caller's. */
pbl_status pbl__onnx_add_weight(pbl__onnx_ctx *c, const char *base, pbl_shape shape, float *data, pbl_value *out);
/* The pebble value of ONNX value `name` (materialising a float constant). */
pbl_status pbl__onnx_get(pbl__onnx_ctx *c, const char *name, pbl_value *out);
/* The integer data of constant `name` (shapes, axes). */
pbl_status pbl__onnx_get_ints(pbl__onnx_ctx *c, const char *name, const int64_t **ints, int64_t *n);
/* v's shape in the graph being built ({0} when v is not a value). */
pbl_shape  pbl__onnx_shape_of(pbl__onnx_ctx *c, pbl_value v);
/* Defines ONNX value `name` as pebble value v (nothing for an empty name). */
pbl_status pbl__onnx_define(pbl__onnx_ctx *c, const char *name, pbl_value v);
/* Emits one pebble node for the current ONNX node: named after its first output, with
 * "/suffix" for helper nodes (a transpose before a softmax). */
pbl_status pbl__onnx_emit(pbl__onnx_ctx *c, const char *op, const pbl_value *in, int32_t n_in, const pbl_attr *attrs,
                          int32_t n_attrs, const char *suffix, pbl_value *out);
/* The same, every output of the node (at most 4; PBL_NONE past its last). */
pbl_status pbl__onnx_emit_outs(pbl__onnx_ctx *c, const char *op, const pbl_value *in, int32_t n_in,
                               const pbl_attr *attrs, int32_t n_attrs, const char *suffix, pbl_value outs[4]);

/* Converts the current node (c->node) into pebble nodes and defines its outputs. */
typedef pbl_status (*pbl__onnx_convert_fn)(pbl__onnx_ctx *c);

/* The default domain's opsets pebble converts (ONNX 1.0 to 1.17): the ops it maps keep, up to
 * opset 22, meanings its converters follow (opset 13's Softmax axis, 18's Reduce axes input). */
#define PBL__ONNX_OPSET_MIN 1
#define PBL__ONNX_OPSET_MAX 22

/* One ONNX op pebble converts: its converter and the attributes it reads, and the few it may
 * ignore because they cannot change the result at inference (consumed_inputs and broadcast,
 * legacy hints from opsets before 7; Dropout's seed; BatchNormalization's momentum, used only in
 * training; Conv's kernel_shape, which the weight's shape already says). Any other attribute is
 * refused: pebble cannot know whether it changes what the node computes, and a model run with it
 * silently ignored could be wrong. */
typedef struct pbl__onnx_op {
    const char          *name;
    pbl__onnx_convert_fn fn;
    const char          *attrs; /* space-separated names; NULL: the converter checks them */
} pbl__onnx_op;

/* A family's ops (one graph/io/onnx_ops*.c each); graph/io/onnx_ops.c lists the tables. */
typedef struct pbl__onnx_op_table {
    const pbl__onnx_op *ops;
    size_t              n;
} pbl__onnx_op_table;

extern const pbl__onnx_op_table pbl__onnx_ops_core;   /* graph/io/onnx_ops.c */
extern const pbl__onnx_op_table pbl__onnx_ops_nn;     /* graph/io/onnx_ops_nn.c */
extern const pbl__onnx_op_table pbl__onnx_ops_tensor; /* graph/io/onnx_ops_tensor.c */
extern const pbl__onnx_op_table pbl__onnx_ops_math;   /* graph/io/onnx_ops_math.c */
extern const pbl__onnx_op_table pbl__onnx_ops_reduce; /* graph/io/onnx_ops_reduce.c */

/* Whether pebble maps n's op (in any family's table). */
int pbl__onnx_known_op(const Onnx__NodeProto *n);
/* Converts c->node, a known op: refuses an attribute its op's entry does not list, then runs
 * the op's converter. */
pbl_status pbl__onnx_convert(pbl__onnx_ctx *c);
/* Whether d names ONNX's default domain ("" or "ai.onnx"). */
int         pbl__onnx_default_domain(const char *d);

/* ---- what the converters share (graph/io/onnx_node.c) ---------------------------------------- */

/* Input i's name, or NULL when absent or empty (an omitted optional input). */
const char *pbl__onnx_in_name(const Onnx__NodeProto *n, size_t i);
/* The current node's inputs: the first lo present, at most hi in all, and an output. */
pbl_status  pbl__onnx_need_inputs(pbl__onnx_ctx *c, size_t lo, size_t hi);
/* Attribute `name` of n, or NULL. */
const Onnx__AttributeProto *pbl__onnx_attr_find(const Onnx__NodeProto *n, const char *name);
/* The current node's attribute `name` into *out, dflt when absent; a wrong type is an error. */
pbl_status  pbl__onnx_attr_int(pbl__onnx_ctx *c, const char *name, int64_t dflt, int64_t *out);
pbl_status  pbl__onnx_attr_float(pbl__onnx_ctx *c, const char *name, double dflt, double *out);
/* An int attribute that is a flag: 0 or 1, anything else refused. */
pbl_status  pbl__onnx_attr_bool(pbl__onnx_ctx *c, const char *name, int64_t dflt, int64_t *out);
/* An ints attribute into buf (at most max); *n = -1 when absent. */
pbl_status  pbl__onnx_attr_ints(pbl__onnx_ctx *c, const char *name, int64_t *buf, int32_t max, int32_t *n);
/* auto_pad's value, one of NOTSET, VALID, SAME_UPPER, SAME_LOWER (dflt when absent). */
pbl_status  pbl__onnx_attr_string_is(pbl__onnx_ctx *c, const char *name, const char *dflt, const char **out);
/* numpy two-way broadcasting of a and b into out; 0 when they do not broadcast. */
int         pbl__onnx_bcast_shape(const pbl_shape *a, const pbl_shape *b, pbl_shape *out);
/* x as shape `want`: x itself when it has it, else one `op` node (broadcast_to, reshape). */
pbl_status  pbl__onnx_to_shape(pbl__onnx_ctx *c, pbl_value x, pbl_shape want, const char *op, const char *suffix,
                               pbl_value *out);
/* out = a (op) b with ONNX's two-way broadcasting (pebble's binary ops broadcast b to a). */
pbl_status  pbl__onnx_binary(pbl__onnx_ctx *c, const char *op, int commutative, pbl_value a, pbl_value b,
                             const char *suffix, pbl_value *out);
/* The converter of an op that is one pebble op over its one input, without attributes. */
pbl_status  pbl__onnx_unary(pbl__onnx_ctx *c, const char *op);

/* ---- shape arithmetic folded at load time (graph/io/onnx_fold.c) and what it shares with the
 * tensor family's converters (graph/io/onnx_ops_tensor.c) ------------------------------------- */

/* Whether the folder knows n's op (it may then stand for a converter no family has). */
int        pbl__onnx_foldable(const Onnx__NodeProto *n);
/* Folds c->node when its inputs are constants (Shape: any input, its shape is static): its
 * outputs become constants and *done = 1; else *done = 0 and nothing changes. */
pbl_status pbl__onnx_fold(pbl__onnx_ctx *c, int *done);
/* ONNX's clamped slice of one dim of n: the first position and how many (0: empty). */
void       pbl__onnx_slice_dim(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count);
/* The current Slice node's first position, step and count for each dim of x. */
pbl_status pbl__onnx_slice_params(pbl__onnx_ctx *c, const pbl_shape *x, int64_t *first, int64_t *step, int64_t *count);
/* The current Unsqueeze (squeeze 0) or Squeeze (1) node's output shape for input shape x. */
pbl_status pbl__onnx_unsqueeze_shape(pbl__onnx_ctx *c, const pbl_shape *x, int squeeze, pbl_shape *out);
/* ONNX element type -> pebble dtype (INT64 and INT32 are i32, DOUBLE is f32), or -1. */
int        pbl__onnx_dtype_of(int64_t t);

#endif
