/*
 * The storage step: where every value of the schedule lives. The executor asks it once, then
 * binds addresses. It runs liveness (graph -> usage records and the schedule), plans the
 * records with a strategy of the planner core, verifies the result, and gives every value a
 * place. PBL_STORAGE_UNSHARED is the `naive` strategy without in-place sharing. PBL_STORAGE_DYNAMIC
 * takes no in-place offers and plans nothing: node outputs are placed in the dynamic pool.
 *
 * On several streams (pebble/streams.h) it colours the schedule into streams (or takes a
 * given stream per node), computes the records with every step that accesses them, and plans
 * them with the happens-before-safe strategy, verified with vector clocks: the serial plan
 * would let a value's bytes be reused while a reader on another stream still runs. `live`
 * and `plan` then view the stream records (same meaning: records, value_record, schedule).
 */
#ifndef PBL_STORAGE_H
#define PBL_STORAGE_H

#include "graph/ir/graph_internal.h"
#include "pebble/exec.h"
#include "pebble/liveness.h"
#include "pebble/streams.h"

typedef enum pbl__place {
    PBL__PLACE_NONE,      /* not computed by this schedule */
    PBL__PLACE_VARIABLE,  /* a variable: caller buffer if bound, else the variable region */
    PBL__PLACE_ARENA,     /* node output at `offset` in the arena */
    PBL__PLACE_ALIAS,     /* the storage of value `alias` (a variable an update writes in place) */
    PBL__PLACE_DYNAMIC,   /* node output allocated from the pool as it runs (executor/dynamic/dtr.c) */
} pbl__place;

typedef struct pbl__storage {
    uint8_t          *place;        /* per value: pbl__place */
    uint64_t         *offset;       /* per value: bytes into the arena or the variable region */
    pbl_value        *alias;        /* per value: the variable whose storage it shares (ALIAS) */
    int32_t          *kept;         /* per value: readable after a run (variables, outputs, unshared mode) */
    int32_t           n_values;
    uint64_t          arena_bytes;
    uint64_t          variable_bytes;
    uint64_t          naive_bytes;    /* the `naive` strategy on live's records */
    uint64_t          unshared_bytes; /* every planner-owned node output its own bytes */
    uint64_t          lower_bound;
    const char       *strategy;     /* static string */
    pbl_graph_records live;         /* records, their values, the schedule (a view of sr and sp
                                       on several streams) */
    pbl_assignment    plan;         /* offset per record */
    int32_t           multi;        /* planned over the stream plan sp */
    pbl_stream_plan   sp;           /* multi: the streams, their waits */
    pbl_stream_records sr;          /* multi: the records with the steps that access them */
} pbl__storage;

#define PBL__ALIGN 64

/* Plans storage for the executor's schedule (targets as in pbl_exec_options) on o->streams
 * streams, or on n_streams streams with node i on stream_of_node[i] when stream_of_node is
 * given. One stream is the serial path. err explains. */
pbl_status pbl__storage_plan(const pbl_graph *g, const pbl_exec_options *o, int32_t n_streams,
                             const int32_t *stream_of_node, pbl__mem *m, pbl__storage *out, char *err,
                             size_t errlen);
void       pbl__storage_free(pbl__storage *s, pbl__mem *m);

#endif
