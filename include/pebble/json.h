/*
 * pebble/json.h — graphs as JSON text: save any graph, load it back exactly.
 *
 * A saved graph holds everything a pebble graph is: its variables (name, kind, dtype, shape),
 * its nodes in order (forward, backward and optimizer updates, with the attributes the
 * builder was given), and its named outputs. Saving, loading and saving again gives the same
 * bytes, and a loaded graph has the same value and node ids as the one saved, so it plans
 * and runs identically. (The one exception: a graph in which pbl_graph_set_input made a node
 * read a later node's output loads with its nodes in a topological order, so its ids differ;
 * from then on its saves are stable.)
 *
 *     // given pbl_graph *g;
 *     char err[512];
 *     if (pbl_graph_save_json(g, "mlp.json", err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);
 *     pbl_graph *h;
 *     if (pbl_graph_load_json(&h, "mlp.json", NULL, err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);   // "mlp.json: $.nodes[3].inputs[1]: unknown value 'x7'"
 *
 * The format (version "1.0"; one variable, node or output per line when saved):
 *
 *     {
 *       "format": "pebble-graph",
 *       "version": "1.0",
 *       "gradient": true,            optional: pbl_graph_gradient ran (it may not run again)
 *       "variables": [
 *         {"name": "x", "kind": "input", "dtype": "f32", "shape": [128, 784]},
 *         {"name": "w1/m", "kind": "state", "dtype": "f32", "shape": [256, 784], "after_nodes": 40},
 *         {"name": "lr", "kind": "scalar", "dtype": "f32", "shape": [], "value": 0.001},
 *         ...
 *       ],
 *       "nodes": [
 *         {"name": "fc1", "op": "fully_connected", "inputs": ["x", "w1", "b1"],
 *          "shapes": [[128, 256]], "dtypes": ["f32"]},
 *         {"name": "drop1", "op": "dropout", "inputs": ["fc1"], "attrs": {"p": 0.5, "seed": 7}, ...},
 *         {"name": "fc1/grad_w", ..., "backward": true},
 *         ...
 *       ],
 *       "outputs": [{"name": "loss", "value": "loss"}]
 *     }
 *
 * - kind is "input", "param", "label", "state" or "scalar"; dtype "f32" or "i32"; a shape
 *   lists 0 to PBL_MAX_DIMS positive dims ([] is a scalar). A "scalar" variable is a runtime
 *   hyper-parameter (pbl_graph_add_scalar): f32, one element, and "value", the number an
 *   executor starts it at (0 when left out; only scalars may have one).
 * - A node's output values are named after it: "fc1", and "drop1:1" for a second output.
 *   Inputs name values (variables or node outputs).
 * - attrs: an integer for an int attribute, a number for a float one (also "inf", "-inf" or
 *   "nan" as strings, which JSON numbers cannot say), an array of integers for an int list.
 *   Attributes left out take the op's defaults (pebble/ops.h).
 * - Optional: "shapes"/"dtypes" (what the node's outputs are; when present they must be what
 *   the op infers), "backward" (made by the gradient pass), "after_nodes" (a variable is
 *   created once that many nodes exist; it keeps value ids as they were when saved; variables
 *   are listed in creation order).
 * - Nodes are added in file order when every input is defined earlier (what the saver always
 *   writes, unless pbl_graph_set_input rewired a node to a later value); otherwise in a
 *   topological order. A file with a cycle is refused.
 * - A file with another major version is refused; a newer minor version may carry fields
 *   this reader does not know, which it ignores (unknown fields in a 1.0 file are errors).
 *
 * Errors: the message gives the file (when loading one), the JSON path and what is wrong
 * ("g.json: $.nodes[3].inputs[1]: unknown value 'x7'"; syntax errors give line and column).
 * Statuses: PBL_ERR_FORMAT for malformed JSON, a missing field, a wrong type or version;
 * PBL_ERR_IO for a file that cannot be read or written; otherwise the graph builder's own
 * (PBL_ERR_UNKNOWN_OP, PBL_ERR_ARITY, PBL_ERR_ATTR, PBL_ERR_SHAPE, PBL_ERR_DTYPE,
 * PBL_ERR_DANGLING for an unknown value, PBL_ERR_CYCLE, PBL_ERR_INVALID_ARG for a duplicate
 * name or a bad kind or shape), and PBL_ERR_NOMEM. Loading goes through pbl_graph_add_variable
 * and pbl_graph_add_node, so every check of the builder applies, then pbl_graph_validate.
 *
 * Memory: the graph and the loader's own bookkeeping use the allocator given (pebble/alloc.h);
 * the JSON parser (jansson) allocates with malloc, as jansson's allocator is process-global.
 * Thread-safety: all functions are; a graph being saved must not change meanwhile.
 */
#ifndef PEBBLE_JSON_H
#define PEBBLE_JSON_H

#include <stddef.h>

#include "pebble/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PBL_JSON_VERSION_MAJOR 1
#define PBL_JSON_VERSION_MINOR 0

/* Writes g as JSON text into a new NUL-terminated buffer *text of *len bytes (len may be
 * NULL), allocated with g's allocator (pbl_graph_options.allocator, which must then outlive
 * the text) and released with pbl_json_free. Returns PBL_OK, PBL_ERR_UNSUPPORTED (a name that
 * is not valid UTF-8, which JSON cannot hold) or PBL_ERR_NOMEM; err (may be NULL) explains. */
pbl_status pbl_graph_to_json(const pbl_graph *g, char **text, size_t *len, char *err, size_t errlen);

/* Writes g's JSON to path: to a temporary file beside it, then renamed over path, so path
 * holds either its old content or the whole new one. Returns what pbl_graph_to_json does,
 * or PBL_ERR_IO (err names the file and the reason). */
pbl_status pbl_graph_save_json(const pbl_graph *g, const char *path, char *err, size_t errlen);

/* Builds a new graph *out from len bytes of JSON text (no NUL needed). a (may be NULL) is the
 * new graph's allocator. On error *out is NULL and nothing is leaked. */
pbl_status pbl_graph_from_json(pbl_graph **out, const char *text, size_t len, const pbl_allocator *a,
                               char *err, size_t errlen);

/* Reads path and builds a graph from it, as pbl_graph_from_json; messages start "path: ".
 * path must be a regular file (a FIFO or a device: PBL_ERR_IO at once, the open never blocks)
 * of at most 1 GiB (PBL_ERR_FORMAT, before reading). */
pbl_status pbl_graph_load_json(pbl_graph **out, const char *path, const pbl_allocator *a, char *err,
                               size_t errlen);

/* Frees text from pbl_graph_to_json. Accepts NULL. */
void pbl_json_free(char *text);

#ifdef __cplusplus
}
#endif
#endif
