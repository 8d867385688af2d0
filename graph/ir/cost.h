/*
 * A node's cost, and what each consumer makes of it. The cost itself is the op descriptor's
 * (pbl__op.cost, graph/ir/op.h): FLOPs and bytes read and written, from the node's shapes and
 * attributes. Every consumer turns it into its own number here, in one place:
 *
 *   pbl__cost_time    the stream colouring's weight (pbl_node_cost) and DTR's recomputation
 *                     cost (executor/dynamic/heuristic.c)
 *   pbl__cost_cheap   static recomputation's mirror rule (graph/passes/recompute.c)
 *   .flops            static recomputation's FLOP figures (graph/passes/recompute_rewrite.c)
 */
#ifndef PBL_COST_H
#define PBL_COST_H

#include "graph/ir/op.h"

/* Node n's cost by its op's rule; zeros for an id out of range. */
pbl__cost pbl__node_cost(const pbl_graph *g, pbl_node n);

/* The cost of op `op` (NULL: the default alone) over the metas and attributes in c: the
 * default of pbl__cost_fn, then the op's rule. pbl__node_cost is this over a node's values. */
pbl__cost pbl__op_cost(const pbl__op *op, const pbl__cost_ctx *c);

/* An estimate of the node's time: the roofline, the larger of its FLOPs and its bytes moved,
 * with a machine balance of one FLOP per byte. Products are compute-bound under it and
 * everything else is bound by memory. A real machine's balance is tens of FLOPs per byte (a
 * GPU) or a few (a CPU core); taking 1 understates products against memory-bound ops, which
 * only matters where a consumer weighs a product against many small ops: the stream
 * colouring asks for the heaviest path, DTR ranks tensors by cost, neither needs times. */
int64_t pbl__cost_time(const pbl__cost *c);

/* Cheap to recompute (MXNet's mirror rule): at most one operation per four bytes written, one
 * per f32 element — a single streaming pass, no more work than writing the value it saves.
 * This keeps maps, copies and layout changes (add, relu, gelu, reshape, transpose, a
 * broadcast, a gather) and excludes what reads more than it writes or passes over its data
 * again: products, convolutions, pooling windows, reductions, losses, softmax, the norms, and
 * dropout (its random draw is a hash of eight operations per element). */
int pbl__cost_cheap(const pbl__cost *c);

#endif
