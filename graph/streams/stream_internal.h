/*
 * What the stream files share (graph/streams/streams.c, stream_clock.c, stream_liveness.c,
 * stream_planner.c, stream_verify.c, dot.c). Everything here works on plain arrays — steps,
 * streams, waits — and knows nothing about graphs.
 *
 * Vector clocks. clock[t·S + s] is the latest step on stream s known to have finished when
 * step t starts (-1: none): the step before t on s's queue when s is t's stream, and through
 * waits whatever the waited-for steps knew. Steps on one stream run in ascending order, so
 * step a happens-before step b (a != b) exactly when a <= clock[b·S + stream[a]].
 */
#ifndef PBL_STREAM_INTERNAL_H
#define PBL_STREAM_INTERNAL_H

#include "graph/base/mem.h"
#include "pebble/streams.h"

/* pbl_graph_streams with every node's stream given (stream_of_node[node], in [0,
 * opt->n_streams)) instead of coloured: the same schedule, costs and transitively reduced
 * waits for every dependency that crosses streams. stream_of_node NULL: coloured, as
 * pbl_graph_streams. PBL_ERR_INVALID_ARG names a node whose stream is out of range. */
pbl_status pbl__graph_streams_given(const pbl_graph *g, const pbl_stream_options *opt, const int32_t *stream_of_node,
                                    pbl_stream_plan *out, char *err, size_t errlen);

/* The clocks of sp (n_steps · n_streams entries, allocated in m; free with
 * pbl__stream_clocks_free). PBL_ERR_NOMEM. sp must pass pbl__stream_plan_shape. */
pbl_status pbl__stream_clocks(const pbl_stream_plan *sp, pbl__mem *m, int32_t **clock);
void       pbl__stream_clocks_free(const pbl_stream_plan *sp, pbl__mem *m, int32_t *clock);

/* Checks streams and waits are in range and every wait is earlier and on another stream. */
pbl_status pbl__stream_plan_shape(const pbl_stream_plan *sp, char *err, size_t errlen);

/* Replaces sp's waits by a transitive reduction of the edges need[need_start[t] ..
 * need_start[t + 1]) (steps t must follow; any order, duplicates and same-stream ones
 * allowed) given stream order: processing each step's needs latest first, a need is kept
 * only if the clock built from stream order and the needs kept so far does not cover it.
 * Since a step can only know of earlier steps, no kept wait is implied by the others.
 * sp's wait arrays are reallocated with m. PBL_ERR_NOMEM. */
pbl_status pbl__stream_reduce(pbl_stream_plan *sp, pbl__mem *m, const int32_t *need_start, const int32_t *need);

void pbl__stream_waits_free(pbl_stream_plan *sp, pbl__mem *m);

/* The sizes of sp's arrays as allocated (for frees). */
static inline size_t pbl__stream_n(const pbl_stream_plan *sp) { return (size_t)(sp->n_steps ? sp->n_steps : 1); }

/* Verifier core: as pbl_stream_plan_verify, and *bad_a, *bad_b (may be NULL) get the two
 * records of a race (-1 otherwise). */
pbl_status pbl__stream_verify(const pbl_stream_plan *sp, const pbl_stream_records *sr, const pbl_assignment *a,
                              int64_t align, int32_t *bad_a, int32_t *bad_b, char *err, size_t errlen);

/* pbl_stream_plan_records, and the two records of a race (as pbl__stream_verify). */
pbl_status pbl__stream_plan_records(pbl_stream_plan *sp, const pbl_stream_records *sr,
                                    const pbl_stream_storage_options *opt, pbl_assignment *out, int32_t *n_added,
                                    int32_t *bad_a, int32_t *bad_b, char *err, size_t errlen);

#endif
