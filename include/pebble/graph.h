/*
 * pebble/graph.h — the computation graph: variables, op nodes, named outputs.
 *
 * A graph holds values and nodes. A value is a typed tensor with a static shape: either a
 * variable (an input, a parameter, a label or optimizer state, whose data the caller provides
 * or the executor zero-fills) or the output of a node. A node applies a registered op
 * (see pebble/ops.h for the list) to input values and produces output values.
 *
 *     pbl_graph *g;
 *     pbl_graph_create(&g, NULL);
 *     pbl_value x, w, b, y;
 *     pbl_graph_add_variable(g, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(64, 784), &x);
 *     pbl_graph_add_variable(g, "w", PBL_VALUE_PARAM, PBL_F32, PBL_SHAPE(10, 784), &w);
 *     pbl_graph_add_variable(g, "b", PBL_VALUE_PARAM, PBL_F32, PBL_SHAPE(10), &b);
 *     pbl_value in[] = { x, w, b };
 *     pbl_node_desc d = { .op = "fully_connected", .name = "fc", .inputs = in, .n_inputs = 3 };
 *     if (pbl_graph_add_node(g, &d, NULL, &y) != PBL_OK)
 *         fprintf(stderr, "%s\n", pbl_graph_errmsg(g));
 *     pbl_graph_set_output(g, "logits", y);
 *     ...
 *     pbl_graph_dump(g, stdout);
 *     pbl_graph_destroy(g);
 *
 * prints:
 *
 *     graph: 4 values, 1 nodes, 1 outputs
 *       %0 [64, 784] f32 = input 'x'
 *       %1 [10, 784] f32 = param 'w'
 *       %2 [10] f32 = param 'b'
 *       %3 [64, 10] f32 = fully_connected(%0, %1, %2)  # fc
 *     output 'logits' = %3
 *
 * pebble/builder.h has one-line helpers per op (pbl_fully_connected(g, x, w, b) ...), and
 * pebble/autodiff.h the gradient pass that appends explicit backward nodes.
 *
 * Building is checked eagerly: pbl_graph_add_node infers the output shapes and rejects an
 * unknown op, a wrong number of inputs, a bad attribute, a dtype or shape mismatch, or an
 * input id that names no value, leaving the graph unchanged. pbl_graph_validate re-checks a
 * whole graph (after pbl_graph_set_input rewiring, or after loading one) including cycles.
 *
 * Thread-safety: a graph may be read from several threads at once — every call taking a
 * `const pbl_graph *` only reads it (executors, liveness, stream planning validate it into
 * their own message, not the graph's); any call that changes it needs exclusive access,
 * pbl_graph_validate included (it records its message in the graph). Different graphs are
 * independent.
 */
#ifndef PEBBLE_GRAPH_H
#define PEBBLE_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "pebble/alloc.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PBL_MAX_DIMS   6   /* tensor rank limit */
#define PBL_MAX_INTS   8   /* length limit of an integer-list attribute */
#define PBL_NONE      (-1) /* "no value" / "no node" */

typedef struct pbl_graph pbl_graph;
typedef int32_t pbl_value; /* index of a value in its graph, 0..pbl_graph_value_count()-1 */
typedef int32_t pbl_node;  /* index of a node in its graph, 0..pbl_graph_node_count()-1 */

typedef enum pbl_dtype {
    PBL_F32,
    PBL_I32,
} pbl_dtype;

typedef struct pbl_shape {
    int32_t ndim;               /* 0 is a scalar (one element) */
    int64_t dim[PBL_MAX_DIMS];
} pbl_shape;

/* PBL_SHAPE(128, 784) builds a pbl_shape from 1..PBL_MAX_DIMS dimensions; PBL_SCALAR is rank 0.
 * C++ has no compound literals (g++: "taking address of temporary array"), so there the same
 * call goes through a function template at the end of this header: same dims, same ndim. */
#ifndef __cplusplus
#define PBL_SHAPE(...)                                                                       \
    pbl_shape_make((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),           \
                   (int64_t[]){__VA_ARGS__})
#else
#define PBL_SHAPE(...) pbl__shape_cxx(__VA_ARGS__)
#endif
#define PBL_SCALAR pbl_shape_make(0, NULL)

pbl_shape pbl_shape_make(int32_t ndim, const int64_t *dims);
int64_t   pbl_shape_numel(const pbl_shape *s);            /* product of dims; 1 for a scalar */
int       pbl_shape_equal(const pbl_shape *a, const pbl_shape *b);
/* Writes "[128, 784]" into buf (always NUL-terminated); returns buf. */
char     *pbl_shape_str(const pbl_shape *s, char *buf, size_t size);
size_t    pbl_dtype_size(pbl_dtype t);                    /* bytes per element */
const char *pbl_dtype_name(pbl_dtype t);                  /* "f32", "i32" */

typedef enum pbl_value_kind {
    PBL_VALUE_INPUT,  /* data fed each run (features) */
    PBL_VALUE_PARAM,  /* trained weights: the caller binds or writes them */
    PBL_VALUE_LABEL,  /* targets fed each run */
    PBL_VALUE_STATE,  /* optimizer state; zero-filled by the executor unless bound */
    PBL_VALUE_NODE,   /* produced by a node */
    PBL_VALUE_SCALAR, /* a runtime hyper-parameter: one f32 the caller may change between runs
                         (pbl_graph_add_scalar; pbl_exec_set_scalar) without re-planning */
} pbl_value_kind;

const char *pbl_value_kind_name(pbl_value_kind k);

typedef enum pbl_attr_type {
    PBL_ATTR_INT,
    PBL_ATTR_FLOAT,
    PBL_ATTR_INTS,
} pbl_attr_type;

/* An attribute as passed to pbl_graph_add_node; the graph copies it. */
typedef struct pbl_attr {
    const char    *name;
    pbl_attr_type  type;
    int64_t        i;
    double         f;
    const int64_t *ints;
    int32_t        n_ints;
} pbl_attr;

#ifndef __cplusplus
#define PBL_ATTR_INT(n, v)     ((pbl_attr){ .name = (n), .type = PBL_ATTR_INT, .i = (v) })
#define PBL_ATTR_FLOAT(n, v)   ((pbl_attr){ .name = (n), .type = PBL_ATTR_FLOAT, .f = (v) })
#define PBL_ATTR_INTS(n, p, k) ((pbl_attr){ .name = (n), .type = PBL_ATTR_INTS, .ints = (p), .n_ints = (k) })
#else /* no compound literals or (before C++20) designated initializers: a function below */
#define PBL_ATTR_INT(n, v)     pbl__attr_cxx((n), PBL_ATTR_INT, (v), 0, NULL, 0)
#define PBL_ATTR_FLOAT(n, v)   pbl__attr_cxx((n), PBL_ATTR_FLOAT, 0, (v), NULL, 0)
#define PBL_ATTR_INTS(n, p, k) pbl__attr_cxx((n), PBL_ATTR_INTS, 0, 0, (p), (k))
#endif

typedef struct pbl_graph_options {
    const pbl_allocator *allocator; /* NULL: malloc/free */
} pbl_graph_options;

pbl_graph_options pbl_graph_options_default(void);

/* Creates an empty graph. opt may be NULL. Returns PBL_OK or PBL_ERR_NOMEM (*out = NULL). */
pbl_status pbl_graph_create(pbl_graph **out, const pbl_graph_options *opt);
/* Frees the graph and everything it owns. Accepts NULL. */
void       pbl_graph_destroy(pbl_graph *g);
/* The message of the last failed call on g ("" if none). Valid until the next call on g. */
const char *pbl_graph_errmsg(const pbl_graph *g);

/* Adds a variable. Names are unique among values; NULL or "" picks "var<N>".
 * Returns PBL_ERR_INVALID_ARG (bad kind, duplicate name, non-positive dim, rank too high)
 * or PBL_ERR_NOMEM. */
pbl_status pbl_graph_add_variable(pbl_graph *g, const char *name, pbl_value_kind kind,
                                  pbl_dtype dtype, pbl_shape shape, pbl_value *out);

/* Adds a runtime scalar: a rank-0 f32 variable of kind PBL_VALUE_SCALAR that optimizer
 * updates (lr, weight decay, Adam's step), dropout and batch normalisation (the training
 * switch) may read at run time. Executors start it at `initial` and pbl_exec_set_scalar
 * changes it between runs, with no re-planning (it lives outside the planned arena, like
 * every variable). Returns PBL_ERR_INVALID_ARG for a duplicate name or a non-finite initial
 * value, PBL_ERR_NOMEM. pebble/autodiff.h's optimizer options name scalars to read. */
pbl_status pbl_graph_add_scalar(pbl_graph *g, const char *name, double initial, pbl_value *out);

typedef struct pbl_node_desc {
    const char      *op;        /* registered op name, see pebble/ops.h */
    const char      *name;      /* unique node name; NULL picks "<op><N>" */
    const pbl_value *inputs;
    int32_t          n_inputs;
    const pbl_attr  *attrs;
    int32_t          n_attrs;
} pbl_node_desc;

/* Adds a node, inferring its output shapes. On success *node_out (if not NULL) is the node
 * and outputs[0..k-1] (if not NULL; room for the op's output count) its output values, named
 * after the node ("fc1"; "drop1:1" for a second output).
 * Returns PBL_ERR_UNKNOWN_OP, PBL_ERR_ARITY, PBL_ERR_ATTR, PBL_ERR_DTYPE, PBL_ERR_SHAPE,
 * PBL_ERR_DANGLING (an input names no value), PBL_ERR_INVALID_ARG (duplicate name) or
 * PBL_ERR_NOMEM; the message names the node and op, and for shapes both shapes.
 * On error the graph is unchanged. */
pbl_status pbl_graph_add_node(pbl_graph *g, const pbl_node_desc *desc,
                              pbl_node *node_out, pbl_value *outputs);

/* Names v as a graph output. Outputs stay live to the end of a run and are what an
 * executor computes by default. Re-using a name re-points it. */
pbl_status pbl_graph_set_output(pbl_graph *g, const char *name, pbl_value v);

/* Rewires input `slot` of `node` to `v` (graph rewriting). Checks that v exists and has the
 * shape and dtype the slot had; does not check for cycles — pbl_graph_validate does. */
pbl_status pbl_graph_set_input(pbl_graph *g, pbl_node node, int32_t slot, pbl_value v);

/* Checks the whole graph: every node's op, arity, attributes, input ids and shapes, every
 * output name, and that the graph is acyclic. Returns the first problem's status; the
 * message names the node. */
pbl_status pbl_graph_validate(pbl_graph *g);

/* ---- reading a graph ---------------------------------------------------------------- */

typedef struct pbl_value_info {
    const char    *name;
    pbl_value_kind kind;
    pbl_dtype      dtype;
    pbl_shape      shape;
    pbl_node       producer;      /* PBL_NONE for variables */
    int32_t        producer_slot;
    int32_t        is_backward;   /* made by the gradient pass */
    double         initial;       /* PBL_VALUE_SCALAR: its value when an executor starts; else 0 */
} pbl_value_info;

typedef struct pbl_node_info {
    const char      *name;
    const char      *op;
    const pbl_value *inputs;
    int32_t          n_inputs;
    const pbl_value *outputs;
    int32_t          n_outputs;
    int32_t          is_backward; /* made by the gradient pass */
} pbl_node_info;

int32_t    pbl_graph_value_count(const pbl_graph *g);
int32_t    pbl_graph_node_count(const pbl_graph *g);
int32_t    pbl_graph_output_count(const pbl_graph *g);
/* Returns PBL_ERR_INVALID_ARG for an id out of range. Pointers stay valid until g changes. */
pbl_status pbl_graph_value_info(const pbl_graph *g, pbl_value v, pbl_value_info *out);
pbl_status pbl_graph_node_info(const pbl_graph *g, pbl_node n, pbl_node_info *out);
/* Name and value of output i (0..pbl_graph_output_count()-1). */
pbl_status pbl_graph_output_at(const pbl_graph *g, int32_t i, const char **name, pbl_value *v);
/* The value or node of that name, or PBL_NONE. */
pbl_value  pbl_graph_find_value(const pbl_graph *g, const char *name);
pbl_node   pbl_graph_find_node(const pbl_graph *g, const char *name);
pbl_value  pbl_graph_output(const pbl_graph *g, const char *name);
/* Reads a node's attribute as given or as defaulted by the op. PBL_ERR_NOT_FOUND if the op
 * has no attribute of that name, PBL_ERR_ATTR if it has another type. `ints`/`n` may be NULL. */
pbl_status pbl_graph_node_attr_int(const pbl_graph *g, pbl_node n, const char *name, int64_t *v);
pbl_status pbl_graph_node_attr_float(const pbl_graph *g, pbl_node n, const char *name, double *v);
pbl_status pbl_graph_node_attr_ints(const pbl_graph *g, pbl_node n, const char *name,
                                    const int64_t **ints, int32_t *n_ints);

/* Writes a readable listing of g to f, one line each: a header "graph: V values, N nodes,
 * O outputs"; every variable, "  %0 [64, 784] f32 = input 'x'" (value id, shape, dtype, kind,
 * name); every node in node order, "  %3 [64, 10] f32 = fully_connected(%0, %1, %2)  # fc"
 * (its outputs, comma-separated, = the op and its input ids, the attributes that were set as
 * name=value, then "# " and the node's name, followed by " (backward)" for a node of the
 * gradient pass and " (update)" for an optimizer update), with a heading line "backward:",
 * "update:" or "forward:" wherever the kind changes from the node before (the forward nodes
 * at the start have none); every output, "output 'logits' = %3". The example at the top of
 * this file shows a whole listing. Returns PBL_OK, PBL_ERR_INVALID_ARG (g or f NULL) or
 * PBL_ERR_IO (f reports a write error). */
pbl_status pbl_graph_dump(const pbl_graph *g, FILE *f);

#ifdef __cplusplus
}

/* The C++ forms of PBL_SHAPE and PBL_ATTR_* (C++11). Each dimension converts to int64_t as
 * C's array initialiser converts it (no narrowing error for a size_t), and the count is the
 * number of arguments, as C's sizeof. extern "C++": this header may be included inside an
 * extern "C" block, where a template is an error. */
extern "C++" {
template <typename... D>
inline pbl_shape pbl__shape_cxx(D... d)
{
    const int64_t dims[] = { static_cast<int64_t>(d)... };
    return pbl_shape_make(static_cast<int32_t>(sizeof...(D)), dims);
}

inline pbl_attr pbl__attr_cxx(const char *name, pbl_attr_type type, int64_t i, double f,
                              const int64_t *ints, int32_t n_ints)
{
    pbl_attr a = {};
    a.name = name;
    a.type = type;
    a.i = i;
    a.f = f;
    a.ints = ints;
    a.n_ints = n_ints;
    return a;
}
}
#endif
#endif
