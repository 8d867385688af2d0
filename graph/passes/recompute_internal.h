/* Static recomputation's pieces shared by graph/passes/recompute.c (the methods and the search) and
 * graph/passes/recompute_rewrite.c (building the rewritten graph). See pebble/recompute.h. */
#ifndef PBL_RECOMPUTE_INTERNAL_H
#define PBL_RECOMPUTE_INTERNAL_H

#include "graph/ir/graph_internal.h"
#include "pebble/recompute.h"

/* What the methods need to know about the input graph, per node and per value. */
typedef struct pbl__rc_info {
    int32_t  n_nodes, n_values;
    uint8_t *forward;      /* per node: neither a backward node nor an update */
    uint8_t *recomputable; /* per value: output of a forward node, not a graph output */
    uint8_t *candidate;    /* per value: recomputable and read by a backward node (droppable) */
    int32_t  n_candidates;
} pbl__rc_info;

pbl_status pbl__rc_info_build(const pbl_graph *g, pbl__mem *m, pbl__rc_info *info);
void       pbl__rc_info_free(pbl__rc_info *info, pbl__mem *m);

/* Builds into *out a copy of g in which every value with drop[v] set (recomputable values
 * only) is recomputed, where a backward node needs it, by a copy of its producer named
 * "<node>/recompute", inserted just before the first such backward node; the copy reads
 * recomputed values for dropped inputs and the originals for the rest. *recomputed and
 * *extra_flops count the copies. err explains a failure (PBL_ERR_NOMEM, or a name clash). */
pbl_status pbl__rc_rewrite(const pbl_graph *g, const pbl__rc_info *info, const uint8_t *drop,
                           const pbl_allocator *a, pbl_graph **out, int32_t *recomputed,
                           double *extra_flops, char *err, size_t errlen);

#endif
