/*
 * pebble/viz.h — what a picture of a memory plan needs, as data and as JSON.
 *
 * A plan drawn in time × address is one rectangle per usage record: its lifetime across,
 * its bytes up, at its offset. pbl_viz_plan_records plans one set of records with several
 * strategies (by default every strategy but "best", which only repeats the others), checks
 * each result with pbl_plan_verify, and keeps each strategy's offsets, arena, ratio to the
 * lower bound and planning time, with the live-bytes curve (whose maximum is the lower
 * bound). pbl_viz_write_json writes all of it as one JSON object, with each record's label —
 * and for records made from a graph by pbl_graph_liveness, the values that share the record,
 * their shape, producer and consumers, and the node at each step. That object is what
 * `pebble viz --html` embeds in its page.
 *
 *     // given const pbl_usage_record *r; int32_t n;
 *     pbl_viz_plan p;
 *     char err[256];
 *     pbl_viz_options o = pbl_viz_options_default();
 *     if (pbl_viz_plan_records(r, n, &o, &p, err, sizeof err) == PBL_OK) {
 *         printf("%s packs into %lld bytes\n", p.strategies[p.best].name,
 *                (long long)p.strategies[p.best].arena);
 *         pbl_viz_labels l = { .title = "input.csv" };
 *         pbl_viz_write_json(&p, &l, stdout, err, sizeof err);
 *         pbl_viz_plan_free(&p);
 *     }
 *
 * Thread-safe on distinct data.
 */
#ifndef PEBBLE_VIZ_H
#define PEBBLE_VIZ_H

#include <stdint.h>
#include <stdio.h>

#include "pebble/alloc.h"
#include "pebble/explain.h"
#include "pebble/graph.h"
#include "pebble/liveness.h"
#include "pebble/plan.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_viz_options {
    const pbl_allocator *allocator;     /* NULL: malloc/free */
    int64_t              align;         /* offsets are multiples of this (default 1) */
    double               time_limit;    /* seconds for all the strategies together (0: none): each
                                           gets what is left divided by those still to run, as
                                           its pbl_plan_options.time_limit, and one still working
                                           then stops (cut_off) */
    const char *const   *strategies;    /* names to run; NULL: every strategy but "best" */
    int32_t              n_strategies;
} pbl_viz_options;

pbl_viz_options pbl_viz_options_default(void);

typedef struct pbl_viz_strategy {
    const char *name;       /* the planner's static name (pbl_plan_strategy_name) */
    int32_t     valid;      /* planned, and accepted by pbl_plan_verify */
    int32_t     optimal;    /* the planner proved it optimal */
    int64_t     arena;      /* bytes (0 unless valid) */
    double      ms;         /* wall-clock milliseconds pbl_plan_records took */
    int64_t    *offset;     /* per record, the verified offsets; NULL unless valid */
    char        error[256]; /* why not valid ("" when valid) */
    int32_t     cut_off;    /* the time limit stopped it early (valid or not) */
} pbl_viz_strategy;

typedef struct pbl_viz_plan {
    const pbl_usage_record *records;     /* the caller's, borrowed: keep them while p lives */
    int32_t                 n_records;
    int64_t                 align;
    int64_t                 lower_bound; /* the curve's peak (pbl_records_lower_bound) */
    /* The live-bytes curve, a step function: live[k] bytes from time[k] up to time[k + 1];
     * the last point has 0 bytes. The distinct firsts and lasts, ascending. */
    int64_t                *time, *live;
    int32_t                 n_points;
    pbl_viz_strategy       *strategies;
    int32_t                 n_strategies;
    int32_t                 best;        /* the smallest valid arena (first of equals), -1 if none */
    const pbl_allocator    *allocator;
} pbl_viz_plan;

/* Plans r[0, n) with each strategy, verifies each result and fills *out (freed with
 * pbl_viz_plan_free, also after an error). A strategy that fails or is rejected keeps its
 * message in error and is not an error here. Returns PBL_ERR_INVALID_ARG (a bad record, bad
 * options), PBL_ERR_NOT_FOUND (an unknown strategy name), PBL_ERR_NOMEM; err explains. */
pbl_status pbl_viz_plan_records(const pbl_usage_record *r, int32_t n, const pbl_viz_options *opt,
                                pbl_viz_plan *out, char *err, size_t errlen);
void       pbl_viz_plan_free(pbl_viz_plan *p); /* accepts a zeroed or freed plan */

/* What to call things in the JSON. Every field may be left NULL. */
typedef struct pbl_viz_labels {
    const char              *title;  /* the file or model the records came from */
    const char *const       *ids;    /* per record; NULL: "r<index>" */
    /* The graph and the liveness result the records came from (records == graph_records->
     * records): adds each record's values, shape, producer and consumers, and the schedule. */
    const pbl_graph         *graph;
    const pbl_graph_records *graph_records;
    /* pbl_explain_records of the same records (may be NULL): adds the peak and, per step,
     * the records live there with their kinds: what `pebble explain` lists. */
    const pbl_explain       *explain;
} pbl_viz_labels;

/* Writes p as one JSON object (UTF-8; '<', '>' and '&' escaped, so that the text can sit
 * inside an HTML <script> element):
 *   {"format": "pebble-viz", "version": 1, "title", "align", "lower_bound", "n_records",
 *    "records": {"id": [...], "size": [...], "first": [...], "last": [...]},
 *    "live": {"time": [...], "bytes": [...]},
 *    "strategies": [{"name", "valid", "optimal", "arena", "ratio", "ms", "offset": [...],
 *                    "error", "cut_off"}],  (offset and ratio null unless valid)
 *    "best": index or -1,
 *    "graph": {"values": [[names] per record], "shape": [...], "producer": [...],
 *              "consumers": [[...] per record], "backward": [0/1 per record],
 *              "schedule": ["node (op)" per step]},   (only with a graph)
 *    "explain": {"strategy", "arena", "lower_bound", "peak_step", "n_peak_steps",
 *                "kind": [per record], "last_reader": ["node (op)" or null per record],
 *                "live_at_peak": [record indices, largest first],
 *                "steps": {"start": [n_steps + 1], "record": [...]} or null}}  (only with explain;
 *                step t's records are record[start[t] .. start[t + 1]), as pbl_explain lists them)
 * Returns PBL_ERR_INVALID_ARG (graph records or an explanation that do not match p), PBL_ERR_IO (a write
 * failed), PBL_ERR_NOMEM. */
pbl_status pbl_viz_write_json(const pbl_viz_plan *p, const pbl_viz_labels *labels, FILE *f, char *err,
                              size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
