/* What explain.c and suggest.c share (pebble/viz.h). */
#ifndef PBL_EXPLAIN_INTERNAL_H
#define PBL_EXPLAIN_INTERNAL_H

#include "graph/base/export.h"
#include "graph/base/mem.h"
#include "pebble/viz.h"

/* Room for the suggestions: fusion, the schedule, and at most this many less two
 * recomputations (opt.max_recompute is clamped to it). */
#define PBL__EXPLAIN_MAX_SUGGESTIONS 34

#endif
