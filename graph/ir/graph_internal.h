/* The graph IR as the library sees it. Public code reaches it only through pebble/graph.h. */
#ifndef PBL_GRAPH_INTERNAL_H
#define PBL_GRAPH_INTERNAL_H

#include <stdarg.h>

#include "graph/base/mem.h"
#include "graph/base/names.h"
#include "pebble/graph.h"

/* One attribute of a node, in the slot its op's schema gives it. */
typedef struct pbl__attr_val {
    int64_t i;
    double  f;
    int64_t ints[PBL_MAX_INTS];
    int32_t n_ints;
    int32_t set;      /* given by the caller (else the schema default) */
} pbl__attr_val;

/* dtype and shape: what shape rules read and write. */
typedef struct pbl__meta {
    pbl_dtype dtype;
    pbl_shape shape;
} pbl__meta;

typedef struct pbl__value {
    char          *name;
    pbl_value_kind kind;
    pbl__meta      meta;
    pbl_node       producer;  /* PBL_NONE for variables */
    int32_t        slot;      /* which output of the producer */
    int32_t        is_backward;
    double         initial;   /* PBL_VALUE_SCALAR: the value executors start from */
} pbl__value;

typedef struct pbl__node {
    char          *name;
    int32_t        op;        /* index in the op registry */
    int32_t        n_in, n_out;
    pbl_value     *in;        /* n_in ids */
    pbl_value     *out;       /* n_out ids */
    pbl__attr_val *attr;      /* the op's n_attrs slots */
    int32_t        is_backward;
} pbl__node;

typedef struct pbl__output {
    char     *name;
    pbl_value value;
} pbl__output;

struct pbl_graph {
    pbl__mem     mem;
    pbl__value  *values;
    int32_t      n_values, cap_values;
    pbl__node   *nodes;
    int32_t      n_nodes, cap_nodes;
    pbl__output *outputs;
    int32_t      n_outputs, cap_outputs;
    pbl__names   value_names, node_names;
    int32_t      in_backward;   /* nodes added now are backward nodes */
    int32_t      has_gradient;  /* pbl_graph_gradient ran */
    pbl_status   build_status;  /* first error met by a builder helper */
    char         errmsg[512];
};

/* Records the message (printf-style) as g's last error and returns s. */
pbl_status pbl__graph_fail(pbl_graph *g, pbl_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
pbl_status pbl__graph_vfail(pbl_graph *g, pbl_status s, const char *fmt, va_list ap);

/* Byte size of a value's data. */
size_t pbl__meta_bytes(const pbl__meta *m);

/* Removes every node and value added after the counts given (undoing a failed pass). */
void pbl__graph_truncate(pbl_graph *g, int32_t n_values, int32_t n_nodes);

/* Gives value v the name `name` (a pass that rewrites a graph keeps the names callers look
 * values up by). PBL_ERR_INVALID_ARG when another value has that name, PBL_ERR_NOMEM. */
pbl_status pbl__graph_rename_value(pbl_graph *g, pbl_value v, const char *name);

/* Runs node n's shape rule on its current inputs into out[] (the op's n_out). The message,
 * on failure, goes to err (errlen bytes; err may be NULL) and names the node, the op and the
 * shapes involved. Reads g only. */
pbl_status pbl__graph_infer_node(const pbl_graph *g, const pbl__node *n, pbl__meta *out, char *err, size_t errlen);
/* The same with the inputs' metas taken from metas[value id] instead of g (NULL: g's): the
 * executor re-infers shapes for a smaller batch (pbl_exec_set_batch) without touching g. */
pbl_status pbl__graph_infer_node_with(const pbl_graph *g, const pbl__node *n, const pbl__meta *metas, pbl__meta *out,
                                      char *err, size_t errlen);

/* pbl_graph_validate's checks on a graph that is only read: scratch memory comes from m and
 * the message, on failure, goes to err (errlen bytes; err may be NULL), so nothing is written
 * into g and several threads may check one graph at once (the executor, liveness and stream
 * planning take a const graph). Same statuses as pbl_graph_validate. */
pbl_status pbl__graph_check(const pbl_graph *g, pbl__mem *m, char *err, size_t errlen);

#endif
