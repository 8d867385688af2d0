/*
 * What graph/liveness/liveness.c and graph/streams/liveness.c share: the reads of a schedule
 * (each value's last reader, the graph outputs) and the record-building step, where one node
 * output's bytes go. Both build records in schedule order the same way and differ only in
 * when an in-place offer may be taken ("no later reader" versus "every other access
 * happens-before this step"), which is the can_take callback.
 */
#ifndef PBL_LIVENESS_INTERNAL_H
#define PBL_LIVENESS_INTERNAL_H

#include "graph/base/mem.h"
#include "graph/ir/graph_internal.h"
#include "graph/ir/registry.h"
#include "pebble/plan.h"

/* Per value of the graph: the last step of the schedule that reads it (-1: none), and
 * whether it is a graph output (live to the end). */
typedef struct pbl__live_reads {
    int32_t *last_read;
    uint8_t *is_output;
    int32_t  n_steps;
} pbl__live_reads;

/* Fills lr for the n steps of schedule (node ids of g), arrays allocated in m. PBL_OK or
 * PBL_ERR_NOMEM (lr then holds nothing to free). */
pbl_status pbl__live_reads_init(pbl__live_reads *lr, const pbl_graph *g, const pbl_node *schedule, int32_t n,
                                pbl__mem *m);
void       pbl__live_reads_free(pbl__live_reads *lr, const pbl_graph *g, pbl__mem *m); /* accepts a zeroed one */

/* The arrays both liveness passes fill (pbl_graph_records and pbl_stream_records alike):
 * records, record_value and value_record, n_values slots each (at least one, the sizes their
 * free functions free), value_record all -1. PBL_OK or PBL_ERR_NOMEM (what was allocated is
 * stored, for the caller's cleanup). */
pbl_status pbl__live_records_alloc(const pbl_graph *g, pbl__mem *m, pbl_usage_record **records,
                                   pbl_value **record_value, int32_t **value_record);

typedef struct pbl__live_build {
    const pbl_graph  *g;
    const pbl__live_reads *reads;
    pbl_usage_record *records;      /* the output's arrays, filled in schedule order */
    pbl_value        *record_value;
    int32_t          *value_record;
    int32_t          *n_records;
    int32_t          *n_inplace;
    int64_t           align;
    int               inplace;      /* whether in-place offers may be taken at all */
    /* whether output `out` of the node at `step` may take input `in`'s record */
    int             (*can_take)(void *ctx, pbl_value in, pbl_value out, int32_t step);
    /* optional: value v was just placed in record r, new (fresh) or joined */
    void            (*placed)(void *ctx, int32_t r, pbl_value v, int fresh);
    void             *ctx;
} pbl__live_build;

/* Builds the records of the steps of schedule (b->reads->n_steps of them), in order. Each
 * node output's own lifetime ends one past its last read (at least one step; a graph output:
 * the end of the schedule). An update output joins its input's record (and is not planned
 * when the input is a variable, the caller's bytes); else the first in-place offer can_take
 * accepts joins that input's record (an input is given away once per step); else a new record
 * opens on [step, end). A joined record lives on to end. */
void pbl__live_build_records(const pbl__live_build *b, const pbl_node *schedule);

#endif
