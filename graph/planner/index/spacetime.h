/*
 * Occupied address space over time, for the offset strategies' gap searches: which bytes are
 * taken, at some step of a window of time, by the records placed so far — as merged
 * intervals, so a query costs what the occupied space's shape costs (its holes), not what the
 * number of records overlapping the window costs.
 *
 * A segment tree over the elementary time intervals (between consecutive distinct firsts and
 * lasts). A placed span [offset, end) over steps [a, b) is added to two merged interval sets:
 * `cover` of each canonical node of [a, b) (the span is taken over all of that node's steps)
 * and `sub` of those nodes and every ancestor (taken at some step under the node). The bytes
 * taken at some step of a window W are then the union of `sub` of W's canonical nodes and
 * `cover` of the nodes above them: O(log T) merged lists. Two records overlap in time iff their
 * step ranges meet, so this union is exactly the union of the placed spans that overlap W.
 *
 * Why that is enough for the strategies' walks (offset greedy by size, best-fit heap): they
 * only read the gaps between the spans, i.e. the complement of their union, so merged
 * intervals give the same offsets as the spans one by one.
 *
 * Memory: every node owns two growable arrays; a span adds at most one interval per set it
 * enters (merging can only shrink a set). Small arrays (most of them: up to
 * PBL__SPACETIME_POOLED spans) are cut from large pooled chunks, so freeing the index frees a
 * few chunks instead of one array per node (56k records left ~10^5 arrays, 25 ms of free()
 * after `best`'s deadline had passed); an outgrown pooled array is left in its chunk (at most
 * as much again as the arrays hold). Larger arrays come from the allocator. Not thread-safe per
 * index.
 */
#ifndef PBL_PLAN_SPACETIME_H
#define PBL_PLAN_SPACETIME_H

#include <stdint.h>

#include "graph/planner/sort.h"
#include "pebble/alloc.h"
#include "pebble/status.h"

typedef struct pbl__ivset {
    pbl__span *v;   /* merged, disjoint, non-touching, by offset */
    int32_t    n, cap;
} pbl__ivset;

#define PBL__SPACETIME_POOLED 64 /* spans: arrays up to this capacity come from the pool */

typedef struct pbl__spacetime {
    const pbl_allocator *allocator;
    void                *chunks;     /* pooled chunks, linked through their first bytes */
    size_t               chunk_used; /* bytes used in the newest chunk */
    int32_t              steps;  /* elementary time intervals */
    int32_t              leaves; /* power of two >= steps */
    pbl__ivset          *cover;  /* [2·leaves] */
    pbl__ivset          *sub;    /* [2·leaves] */
} pbl__spacetime;

/* An empty index over `steps` elementary intervals. PBL_OK or PBL_ERR_NOMEM. */
pbl_status pbl__spacetime_init(pbl__spacetime *t, int32_t steps, const pbl_allocator *al);
/* Empties every set, keeping their memory. */
void       pbl__spacetime_clear(pbl__spacetime *t);
void       pbl__spacetime_free(pbl__spacetime *t);
/* Marks bytes [offset, end) taken over steps [a, b). PBL_OK or PBL_ERR_NOMEM. */
pbl_status pbl__spacetime_add(pbl__spacetime *t, int32_t a, int32_t b, int64_t offset, int64_t end);
/* Sets a query takes at most: one per node of two root-to-leaf paths and one per canonical
 * node (4 per level), for up to 2^31 steps. */
#define PBL__SPACETIME_MAX_RUNS 132

/* Appends to out[] (growing it from the allocator as needed: *out, *cap) the merged intervals
 * of every set whose union is the bytes taken at some step of [a, b): runs, each sorted by
 * offset, possibly overlapping each other; *n_out counts the intervals, run[0, *n_runs) holds
 * where each run starts. PBL_OK or PBL_ERR_NOMEM. */
pbl_status pbl__spacetime_query(const pbl__spacetime *t, int32_t a, int32_t b, pbl__span **out, int32_t *cap,
                                int32_t *n_out, int32_t run[PBL__SPACETIME_MAX_RUNS], int32_t *n_runs);
/* Sorts a[0, n), made of the sorted runs starting at run[0, n_runs), by offset: pairwise
 * merges, O(n log n_runs) (a radix sort of the whole took a third more on 56k records, and
 * walking the runs without merging them, hopping over covered intervals, twice as long: the
 * union has about as many pieces as the runs have intervals). run[] is overwritten; tmp
 * holds n. */
void       pbl__spacetime_merge_runs(pbl__span *a, pbl__span *tmp, int32_t n, int32_t *run, int32_t n_runs);

/* A caller's buffers for pbl__spacetime_taken, grown from the index's allocator and kept
 * between calls; zero-initialise, release with pbl__spacetime_scan_free. */
typedef struct pbl__spacetime_scan {
    pbl__span *v, *tmp;
    int32_t    cap, tmp_cap;
} pbl__spacetime_scan;
/* The bytes taken at some step of [a, b), by offset (intervals may overlap): query, then
 * merge of the runs. *out points into s, valid until its next use. PBL_OK or PBL_ERR_NOMEM. */
pbl_status pbl__spacetime_taken(const pbl__spacetime *t, int32_t a, int32_t b, pbl__spacetime_scan *s,
                                const pbl__span **out, int32_t *n);
void       pbl__spacetime_scan_free(pbl__spacetime_scan *s, const pbl_allocator *al);
/* Offset greedy's choice among taken[0, n) (by offset): the start of the smallest gap that
 * holds `size` (the lowest such), else the end of the highest taken byte. */
int64_t    pbl__spans_smallest_gap(const pbl__span *taken, int32_t n, int64_t size);

#endif
