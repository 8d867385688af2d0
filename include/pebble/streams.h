/*
 * pebble/streams.h — running a graph on several streams, and planning its memory safely.
 *
 * Colouring. pbl_graph_streams schedules the graph (the executor's order), estimates each
 * node's cost (pbl_node_cost: FLOPs for products, bytes moved otherwise; or the caller's
 * function) and
 * colours the nodes the way NNVM does (nnvm/graph_algorithm.h, ColorNodeGroup): take the
 * heaviest path through the dependency DAG, give its nodes the next colour and zero their
 * weights, repeat; whatever is left gets the last colour. A colour is a stream. Each stream
 * runs its nodes in schedule order; a dependency between nodes on two streams becomes a wait
 * (an event edge), and waits already implied by stream order plus other waits are dropped, so
 * the waits that remain are a transitive reduction of the cross-stream dependencies.
 *
 * Memory. With several streams, "lifetimes do not overlap" is no longer enough for two values
 * to share bytes: the reader of one may still run on stream 1 while stream 0 writes the
 * other. Two records may share bytes only if every access of one happens-before every access
 * of the other (stream order plus waits). pbl_graph_stream_storage computes the records and
 * each record's accesses over a stream plan, plans offsets with a stream strategy, and checks
 * the result with pbl_stream_plan_verify (vector clocks; PBL_ERR_RACE names both records).
 * With one stream all of this reduces to the interval rule and the records and arena of
 * pbl_graph_liveness + pbl_plan_records.
 *
 *     // given pbl_graph *g;
 *     char err[256];
 *     pbl_stream_options so = pbl_stream_options_default();
 *     so.n_streams = 4;
 *     pbl_stream_plan sp;
 *     if (pbl_graph_streams(g, &so, &sp, err, sizeof err) != PBL_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     pbl_stream_storage_options o = pbl_stream_storage_options_default();
 *     o.strategy = PBL_STREAM_STRATEGY_HB_EVENTS;
 *     pbl_stream_storage st;
 *     if (pbl_graph_stream_storage(g, &sp, &o, &st, err, sizeof err) == PBL_OK) {
 *         // step t runs sp.schedule[t] on stream sp.stream[t] after the steps
 *         // sp.wait[sp.wait_start[t] .. sp.wait_start[t + 1]); value v lives at
 *         // st.plan.offset[st.live.value_record[v]] when value_record[v] >= 0
 *         pbl_stream_storage_free(&st);
 *     }
 *     pbl_stream_plan_free(&sp);
 *
 * Nothing here keeps global state except the lock every igraph call in pebble takes (Debian's
 * igraph is not thread-safe); everything is thread-safe on distinct data, and one graph may be
 * planned from several threads at once (it is only read).
 */
#ifndef PEBBLE_STREAMS_H
#define PEBBLE_STREAMS_H

#include <stdint.h>
#include <stdio.h>

#include "pebble/graph.h"
#include "pebble/liveness.h"
#include "pebble/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PBL_MAX_STREAMS 64

/* A node's cost estimate (any unit, >= 0; only ratios matter). */
typedef int64_t (*pbl_cost_fn)(void *user, const pbl_graph *g, pbl_node n);

/* pebble's cost model, the one static recomputation and the dynamic mode's DTR use too: the
 * larger of the node's FLOPs and the bytes it reads plus writes (a roofline with a balance of
 * one FLOP per byte), at least 1. FLOPs are 2·M·N·K for the products (fully_connected, matmul
 * and their fused forms), 2·|y|·|w|/C_out for the conv2d family, and one per element per pass
 * over the data for the rest, which are therefore weighed by their bytes. Each op's rule is
 * part of its descriptor (graph/ir/op.h). */
int64_t pbl_node_cost(const pbl_graph *g, pbl_node n);

typedef struct pbl_stream_options {
    const pbl_allocator *allocator;  /* NULL: malloc/free */
    int32_t              n_streams;  /* colours to use, 1..PBL_MAX_STREAMS (default 1) */
    pbl_cost_fn          cost;       /* NULL: pbl_node_cost */
    void                *cost_user;
    const char *const   *targets;    /* as pbl_exec_options.targets: NULL = all outputs + updates */
    int32_t              n_targets;
    const pbl_node      *order;      /* NULL: the program order; else the global schedule, as
                                        pbl_liveness_options.order: each stream runs its nodes
                                        in this order */
    int32_t              n_order;
} pbl_stream_options;

pbl_stream_options pbl_stream_options_default(void);

/* A schedule on streams. Plain data: it can be built by hand (tests do) as long as the
 * arrays are consistent; pbl_stream_plan_free frees what pbl_graph_streams allocated. */
typedef struct pbl_stream_plan {
    int32_t              n_streams;  /* colours used: <= the requested number (fewer when the
                                        graph has fewer paths of positive weight) */
    int32_t              n_steps;
    pbl_node            *schedule;   /* [n_steps] the node at global step t (a topological order) */
    int32_t             *stream;     /* [n_steps] the stream step t runs on */
    int32_t             *wait_start; /* [n_steps + 1] step t waits for the global steps */
    int32_t             *wait;       /* wait[wait_start[t] .. wait_start[t + 1]), each < t and on
                                        another stream, ascending; transitively reduced */
    int64_t             *cost;       /* [n_steps] the cost estimate of each step */
    const pbl_allocator *allocator;
} pbl_stream_plan;

/* Validates and schedules g and colours it into *out. Returns pbl_graph_validate's statuses,
 * PBL_ERR_INVALID_ARG (n_streams out of range, a negative cost), PBL_ERR_NOT_FOUND (a target
 * names no output), PBL_ERR_NOMEM (also when igraph runs out), PBL_ERR_UNSUPPORTED (another
 * igraph failure); err explains. */
pbl_status pbl_graph_streams(const pbl_graph *g, const pbl_stream_options *opt, pbl_stream_plan *out, char *err,
                             size_t errlen);
void       pbl_stream_plan_free(pbl_stream_plan *sp); /* accepts a zeroed or freed plan */

/* Checks a plan's shape: streams in range, every wait earlier and on another stream. With g,
 * also that every dependency of the graph (data and write-after-read) is implied by stream
 * order plus waits, and that no wait is implied by the others. PBL_OK or PBL_ERR_INVALID_ARG
 * (err names the step), PBL_ERR_NOMEM. */
pbl_status pbl_stream_plan_check(const pbl_graph *g, const pbl_stream_plan *sp, char *err, size_t errlen);

/* The estimated time of the plan on unlimited hardware per stream: the longest path through
 * stream order plus waits, weighted by cost. *total (may be NULL) gets the sum of costs, so
 * total / makespan is the speedup the plan allows. -1 when out of memory. */
int64_t pbl_stream_plan_makespan(const pbl_stream_plan *sp, int64_t *total);

/* Usage records over a stream plan: pbl_graph_records' records plus, per record, every step
 * that accesses its bytes (the producers and readers of the values that share it). */
typedef struct pbl_stream_records {
    pbl_usage_record    *records;      /* [n_records] size and schedule interval [first, last) */
    pbl_value           *record_value; /* [n_records] the value that first used it */
    int32_t              n_records;
    int32_t             *value_record; /* [n_values] its record, or -1 (not planned) */
    int32_t              n_values;
    int32_t             *access_start; /* [n_records + 1] */
    int32_t             *access;       /* steps accessing record r: access[access_start[r] ..
                                          access_start[r + 1]), ascending, distinct */
    uint8_t             *to_end;       /* [n_records] live to the end (a graph output) */
    int32_t              n_inplace;    /* in-place offers taken */
    const pbl_allocator *allocator;
} pbl_stream_records;

/* Liveness over sp (made by pbl_graph_streams for g with opt's targets). In-place offers
 * are taken as pbl_graph_liveness takes them, and only when every other access of the
 * input's bytes happens-before the step (race-free). opt: allocator, align, inplace (targets
 * are sp's). Returns PBL_ERR_INVALID_ARG (sp does not schedule g), PBL_ERR_NOMEM. */
pbl_status pbl_graph_stream_liveness(const pbl_graph *g, const pbl_stream_plan *sp, const pbl_liveness_options *opt,
                                     pbl_stream_records *out, char *err, size_t errlen);
void       pbl_stream_records_free(pbl_stream_records *r); /* accepts a zeroed or freed struct */

typedef enum pbl_stream_strategy {
    /* MXNet's: bytes freed on a stream are reused only by a value produced on that stream
     * (the last access of the old record and the producer of the new one share a colour),
     * and only when happens-before allows; offsets by greedy-by-size. */
    PBL_STREAM_STRATEGY_COLOUR,
    /* Happens-before-aware: any two records ordered by happens-before may share, across
     * colours. The smaller of (a) greedy-by-size with the exact happens-before conflict test
     * and (b) interval_strategy over the records' "safe intervals" (a record is reusable from
     * the first step all of whose later steps know its accesses are done). */
    PBL_STREAM_STRATEGY_HB,
    /* HB, after adding waits that save memory: candidates are the producers of the largest
     * records; making a candidate wait for every step scheduled before it (on the streams it
     * does not yet know) lets its record reuse any bytes freed earlier. A candidate is kept if
     * the records' safe-interval lower bound drops and the plan's makespan
     * (pbl_stream_plan_makespan) stays within (1 + event_slack) times the original. The new
     * waits are merged into the stream plan (still transitively reduced). */
    PBL_STREAM_STRATEGY_HB_EVENTS
} pbl_stream_strategy;

typedef struct pbl_stream_storage_options {
    const pbl_allocator *allocator;        /* NULL: malloc/free */
    int64_t              align;            /* record sizes and offsets (default 64) */
    int32_t              inplace;          /* take race-free in-place offers (default 1) */
    pbl_stream_strategy  strategy;         /* default PBL_STREAM_STRATEGY_HB */
    const char          *interval_strategy;/* pbl_plan_records strategy for HB's (b) (default "best") */
    double               event_slack;      /* HB_EVENTS: allowed makespan growth (default 0.02) */
    int32_t              max_candidates;   /* HB_EVENTS: producers tried (default 64) */
} pbl_stream_storage_options;

pbl_stream_storage_options pbl_stream_storage_options_default(void);

const char *pbl_stream_strategy_name(pbl_stream_strategy s); /* "colour", "hb", "hb_events"; NULL */

/* Plans offsets for sr's records over sp with o's strategy (graph-free: records and access
 * steps in, offsets out). HB_EVENTS may add waits to *sp (reallocated with sp's allocator, so
 * sp's wait arrays must be ones pbl_graph_streams made); *n_added (may be NULL) gets the
 * number of waits in the new plan that the old one lacked (the reduction may drop old ones
 * the new ones imply). The result is verified with pbl_stream_plan_verify before it is
 * returned. PBL_ERR_INVALID_ARG, PBL_ERR_NOMEM,
 * PBL_ERR_RACE (a strategy bug: the verifier refused its plan). */
pbl_status pbl_stream_plan_records(pbl_stream_plan *sp, const pbl_stream_records *sr,
                                   const pbl_stream_storage_options *o, pbl_assignment *out, int32_t *n_added,
                                   char *err, size_t errlen);

/* The verifier. For every two records whose bytes overlap, every access of one must
 * happen-before every access of the other (vector clocks over stream order and waits), and
 * neither may be live to the end unless the other is wholly before it. Also checks offsets
 * against align and the arena. PBL_ERR_RACE with err naming both records, their bytes and two
 * unordered accesses; PBL_ERR_INVALID_ARG, PBL_ERR_NOMEM. */
pbl_status pbl_stream_plan_verify(const pbl_stream_plan *sp, const pbl_stream_records *sr, const pbl_assignment *a,
                                  int64_t align, char *err, size_t errlen);

/* Everything the executor needs in one call. */
typedef struct pbl_stream_storage {
    pbl_stream_records live;         /* records, value_record, accesses */
    pbl_assignment     plan;         /* per record: offset; plan.arena: arena bytes */
    int64_t            lower_bound;  /* serial lower bound: pbl_records_lower_bound(live.records) */
    int32_t            n_added_waits;/* waits HB_EVENTS added to the stream plan (as n_added) */
} pbl_stream_storage;

/* Liveness over sp, then pbl_stream_plan_records; sp gains HB_EVENTS' waits. Value names
 * appear in a race message. Statuses as the two calls. */
pbl_status pbl_graph_stream_storage(const pbl_graph *g, pbl_stream_plan *sp, const pbl_stream_storage_options *o,
                                    pbl_stream_storage *out, char *err, size_t errlen);
void       pbl_stream_storage_free(pbl_stream_storage *s); /* accepts a zeroed or freed struct */

/* Graphviz DOT of g's scheduled nodes: nodes filled by stream (sp NULL: one stream) and
 * labelled with their step; data edges solid, labelled with the value's bytes and, with st,
 * its arena offset; waits dashed red. Nodes not scheduled are left out. PBL_ERR_IO when f
 * fails, PBL_ERR_INVALID_ARG, PBL_ERR_NOMEM. */
pbl_status pbl_graph_write_dot(const pbl_graph *g, const pbl_stream_plan *sp, const pbl_stream_storage *st, FILE *f,
                               char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
