/*
 * What the planner's strategy files share. A strategy gets validated records and options and
 * fills an assignment allocated by pbl__assignment_init. Strategies that produce shared
 * objects (TFLite's "objects") fill object[] and object_size[] and call
 * pbl__assignment_objects_to_offsets, which lays the objects end to end.
 */
#ifndef PBL_PLAN_INTERNAL_H
#define PBL_PLAN_INTERNAL_H

#include <stddef.h>

#include "graph/base/export.h"
#include "pebble/plan.h"

typedef struct pbl__plan_in {
    const pbl_usage_record *r;
    int32_t                 n;
    pbl_plan_options        opt;     /* defaults filled in */
    int64_t                 horizon; /* max over records of last */
} pbl__plan_in;

typedef pbl_status (*pbl__strategy_fn)(const pbl__plan_in *in, pbl_assignment *out);

/* Declarations of every strategy function: pbl__plan_<name>. */
#include "graph/planner/strategies.h"
#define PBL__STRATEGY_DECL(name) pbl_status pbl__plan_##name(const pbl__plan_in *in, pbl_assignment *out);
PBL__STRATEGY_LIST(PBL__STRATEGY_DECL)
#undef PBL__STRATEGY_DECL

/* Allocates offset[] (and, when with_objects, object[] and object_size[] for up to n objects),
 * zeroed. PBL_OK or PBL_ERR_NOMEM. */
pbl_status pbl__assignment_init(pbl_assignment *a, int32_t n, int with_objects, const pbl_allocator *al);
/* Offsets from objects: object k starts where object k-1 ends (each start aligned); sets
 * offset[], arena. n_objects and object_size[] must be set. */
void       pbl__assignment_objects_to_offsets(pbl_assignment *a, int64_t align);
/* arena = max(offset + size). */
void       pbl__assignment_finish(pbl_assignment *a, const pbl_usage_record *r);

void      *pbl__plan_alloc(const pbl_allocator *al, size_t bytes);   /* NULL on failure */
void       pbl__plan_free(const pbl_allocator *al, void *p, size_t bytes);

static inline int64_t pbl__align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

#endif
