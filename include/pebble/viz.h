/*
 * pebble/viz.h — a memory plan as data and JSON for pictures, and why its peak is what it is.
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
 * Every memory plan of a graph is at least its lower bound: the largest sum of record bytes
 * live at one step. pbl_explain_records finds that step (the peak) and lists every record
 * live at it — for records made from a graph, the value, its shape, producer, last reader
 * and kind (a parameter gradient, an activation kept for backward, a temporary...) — whose
 * bytes sum exactly to the lower bound. It plans the records with one strategy and says
 * where that arena's waste sits: the address ranges unused at the peak (arena - lower bound
 * bytes), and the step whose live records leave the most bytes unused below the highest one
 * in use (fragmentation), with its holes. pbl_explain_graph does the same for a graph (its
 * liveness first, in the order opt.schedule names) and adds what would lower the peak:
 * fusing it, recomputing each activation kept for backward that is live at the peak (the
 * lower bound after each, measured on the rewritten graph, not guessed), and running its
 * nodes in the min_peak order of pebble/schedule.h (that order's lower bound).
 *
 *     // given pbl_graph *g;
 *     pbl_explain e;
 *     char err[256];
 *     pbl_explain_options o = pbl_explain_options_default();
 *     if (pbl_explain_graph(g, &o, &e, err, sizeof err) == PBL_OK) {
 *         printf("peak at step %d: %lld bytes\n", (int)e.peak_step, (long long)e.lower_bound);
 *         for (int32_t i = 0; i < e.n_live_at_peak; i++) {
 *             const pbl_explain_record *r = &e.rec[e.live_at_peak[i]];
 *             printf("  %s %lld %s\n", r->name, (long long)r->bytes, pbl_explain_kind_name(r->kind));
 *         }
 *     }
 *     pbl_explain_free(&e);
 *
 * Variables (inputs, labels, parameters, optimizer state) belong to the caller, not to the
 * arena: they are not in the lower bound, and are listed apart (outside, n_outside).
 *
 * Thread-safe on distinct data; graphs are only read.
 */
#ifndef PEBBLE_VIZ_H
#define PEBBLE_VIZ_H

#include <stdint.h>
#include <stdio.h>

#include "pebble/alloc.h"
#include "pebble/graph.h"
#include "pebble/liveness.h"
#include "pebble/plan.h"
#include "pebble/schedule.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- why the peak is what it is (pbl_explain) --------------------------------------- */

/* The most entries pbl_explain's per-step lists hold (the sum of all lifetimes). */
#define PBL_EXPLAIN_MAX_LISTED (INT64_C(1) << 22)

/* What a value is for. The first five are planned (in the arena); the rest are variables. */
typedef enum pbl_explain_kind {
    PBL_EXPLAIN_RECORD,           /* a bare usage record (no graph): nothing more is known */
    PBL_EXPLAIN_TEMPORARY,        /* a forward value only forward nodes read */
    PBL_EXPLAIN_SAVED_ACTIVATION, /* a forward value a backward node reads: kept for backward */
    PBL_EXPLAIN_OUTPUT,           /* a forward graph output: live to the end */
    PBL_EXPLAIN_PARAM_GRADIENT,   /* a backward value an optimizer update reads, or a backward graph output */
    PBL_EXPLAIN_GRADIENT,         /* any other backward value (an activation's gradient...) */
    PBL_EXPLAIN_INPUT,            /* variables, outside the arena: */
    PBL_EXPLAIN_LABEL,
    PBL_EXPLAIN_PARAMETER,
    PBL_EXPLAIN_OPTIMIZER_STATE,
} pbl_explain_kind;

/* "record", "temporary", "saved_activation", "output", "parameter_gradient", "gradient",
 * "input", "label", "parameter", "optimizer_state"; "?" out of range. */
const char *pbl_explain_kind_name(pbl_explain_kind k);

typedef struct pbl_explain_options {
    const pbl_allocator *allocator;  /* NULL: malloc/free */
    int64_t              align;      /* graphs: record sizes rounded up, offsets aligned (default 64) */
    const char          *strategy;   /* the planner strategy whose arena is explained (default "best") */
    double               time_limit; /* CPU seconds for searching strategies (0: their default) */
    int32_t              suggest;    /* pbl_explain_graph: estimate fusion, recomputation and the schedule (default 1) */
    int32_t              max_recompute; /* at most this many activations tried (default 8, largest first) */
    pbl_schedule_kind    schedule;   /* pbl_explain_graph: the node order explained, and the one
                                        each rewritten graph is measured in (default
                                        PBL_SCHEDULE_PROGRAM; pebble/schedule.h) */
} pbl_explain_options;

pbl_explain_options pbl_explain_options_default(void);

/* One usage record and what uses it. Names and strings point into the graph (or the ids
 * given), which must outlive the explanation. */
typedef struct pbl_explain_record {
    const char      *name;        /* the first value's name (or the record's id, or NULL) */
    pbl_value        value;       /* that value, or PBL_NONE without a graph */
    int32_t          n_values;    /* values sharing the record (in-place), 0 without a graph */
    pbl_shape        shape;       /* the value's */
    pbl_dtype        dtype;
    int64_t          bytes;       /* the record's size (aligned): what the lower bound counts */
    int64_t          first, last; /* live on steps [first, last) */
    int64_t          offset;      /* in the chosen strategy's arena */
    pbl_node         producer;    /* PBL_NONE for a bare record */
    pbl_node         last_reader; /* the last node reading any of its values; PBL_NONE if none */
    pbl_explain_kind kind;
} pbl_explain_record;

/* A byte range [lo, hi) of the arena. */
typedef struct pbl_explain_range {
    int64_t lo, hi;
} pbl_explain_range;

/* A way to lower the peak and what it gains, measured by planning the rewritten graph. */
typedef enum pbl_explain_fix {
    PBL_EXPLAIN_FIX_FUSION,    /* pbl_graph_fuse with its default options */
    PBL_EXPLAIN_FIX_RECOMPUTE, /* drop one saved activation, recompute it for backward */
    PBL_EXPLAIN_FIX_SCHEDULE,  /* the min_peak order (pbl_graph_schedule): its lower bound;
                                  saves 0 where the explained order is already as low */
} pbl_explain_fix;

typedef struct pbl_explain_suggestion {
    pbl_explain_fix fix;
    pbl_value       value;        /* RECOMPUTE: the activation (in the explained graph) */
    const char     *name;         /* RECOMPUTE: its name; else NULL */
    int32_t         estimated;    /* 0: no estimate (lower_bound and saves are 0) */
    int64_t         lower_bound;  /* the lower bound after the change */
    int64_t         saves;        /* the explained lower bound minus that (may be <= 0) */
    char            note[160];    /* how it was measured, or why not */
} pbl_explain_suggestion;

typedef struct pbl_explain {
    int32_t             n_records;
    pbl_explain_record *rec;            /* n_records */
    int32_t             n_steps;        /* the largest last */
    int64_t            *live;           /* per step: bytes live (n_steps) */
    int64_t             lower_bound;    /* max of live: the sum over live_at_peak */
    int32_t             peak_step;      /* the first step where live == lower_bound (-1: no records) */
    int32_t             n_peak_steps;   /* steps at the peak */
    int32_t            *live_at_peak;   /* record indices live at peak_step, largest first */
    int32_t             n_live_at_peak;
    /* The same list for every step: step t's is step_record[step_start[t] ..
     * step_start[t + 1]). NULL (both) when it would hold more than PBL_EXPLAIN_MAX_LISTED
     * entries; pbl_explain_live_at answers for any step. */
    int32_t            *step_start;     /* n_steps + 1 */
    int32_t            *step_record;    /* n_step_records */
    int64_t             n_step_records;
    const char         *strategy;       /* the strategy's static name */
    int64_t             arena;
    /* Where the arena's waste sits. At the peak, arena - lower_bound bytes are unused: the
     * holes. Elsewhere, bytes below the highest one in use that are not live are
     * fragmentation (the free space above that byte is merely unused). */
    int64_t            *top;            /* per step: the highest byte in use + 1 (n_steps) */
    int32_t             arena_step;     /* the first step whose top is the arena: what sets it */
    int32_t             worst_step;     /* the first step of most fragmentation (top - live); -1 none */
    pbl_explain_range  *holes_at_peak;  /* address ranges of [0, arena) unused at peak_step, ascending */
    int32_t             n_holes_at_peak;
    pbl_explain_range  *holes_at_worst; /* those of [0, top) at worst_step */
    int32_t             n_holes_at_worst;
    pbl_explain_record *outside;        /* graphs: the variables (caller-owned bytes) */
    int32_t             n_outside;
    int64_t             outside_bytes;
    pbl_explain_suggestion *suggestions;
    int32_t             n_suggestions;
    pbl_graph_records   graph_records;  /* pbl_explain_graph: the liveness it explains */
    const pbl_allocator *allocator;
} pbl_explain;

/* Explains records r[0, n): g and gr (both NULL, or both given, gr made from g by
 * pbl_graph_liveness with r == gr->records) name the values; ids (may be NULL) name bare
 * records. Makes no suggestions. Fills *out (free it with pbl_explain_free, also after an
 * error). Steps are array indices here: records must lie within [0, 2^26) steps. Returns
 * PBL_ERR_INVALID_ARG (bad records or options, gr not g's), PBL_ERR_NOT_FOUND
 * (an unknown strategy), the planner's statuses (no valid plan), PBL_ERR_NOMEM; err explains. */
pbl_status pbl_explain_records(const pbl_usage_record *r, int32_t n, const char *const *ids, const pbl_graph *g,
                               const pbl_graph_records *gr, const pbl_explain_options *opt, pbl_explain *out,
                               char *err, size_t errlen);

/* Explains g: its liveness (kept in out->graph_records), the records' explanation, and with
 * opt.suggest the suggestions. Returns pbl_graph_liveness's statuses and pbl_explain_records's. */
pbl_status pbl_explain_graph(const pbl_graph *g, const pbl_explain_options *opt, pbl_explain *out, char *err,
                             size_t errlen);

/* The records live at step t (first <= t < last), largest first (then by index), into idx
 * (room for n_records); returns their count (0 for a step out of range, or when its
 * scratch memory cannot be had). */
int32_t pbl_explain_live_at(const pbl_explain *e, int32_t t, int32_t *idx);

void pbl_explain_free(pbl_explain *e); /* accepts a zeroed or freed explanation */

/* ---- a plan as data for pictures (pbl_viz) ------------------------------------------ */

typedef struct pbl_viz_options {
    const pbl_allocator *allocator;     /* NULL: malloc/free */
    int64_t              align;         /* offsets are multiples of this (default 1) */
    double               time_limit;    /* CPU seconds (the calling thread's, as pbl_plan_options
                                           counts them) for all the strategies together (0: none): each
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
