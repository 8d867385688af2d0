/*
 * The storage step: where every value of a schedule lives. This is the seam between
 * planning and execution: the executor asks it once for each value's place, then binds
 * addresses. PBL_STORAGE_NAIVE gives every node output its own bytes; the memory planner
 * (records -> offsets) slots in here as further modes.
 */
#ifndef PBL_STORAGE_H
#define PBL_STORAGE_H

#include "graph/graph_internal.h"
#include "pebble/exec.h"

typedef enum pbl__place {
    PBL__PLACE_NONE,      /* not computed by this schedule */
    PBL__PLACE_VARIABLE,  /* a variable: caller buffer if bound, else the variable region */
    PBL__PLACE_ARENA,     /* node output at `offset` in the arena */
    PBL__PLACE_ALIAS,     /* the storage of value `alias` (updates written in place) */
} pbl__place;

typedef struct pbl__storage {
    uint8_t   *place;        /* per value: pbl__place */
    uint64_t  *offset;       /* per value: bytes into the arena or the variable region */
    pbl_value *alias;        /* per value: the value whose storage it shares (ALIAS) */
    uint64_t   arena_bytes;
    uint64_t   variable_bytes;
    int32_t    n_values;
} pbl__storage;

#define PBL__ALIGN 64

/* Places every value read or written by the nodes in order[0..n). `computed` (per value)
 * says which node outputs the schedule produces. */
pbl_status pbl__storage_plan(const pbl_graph *g, const int32_t *order, int32_t n, pbl_storage_mode mode,
                             pbl__mem *m, pbl__storage *out);
void       pbl__storage_free(pbl__storage *s, pbl__mem *m);

#endif
