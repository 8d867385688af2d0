/*
 * Dynamic mode (PBL_STORAGE_DYNAMIC): the schedule runs node by node, each output allocated
 * from a pool as its node runs and freed after its last reader, under a memory budget kept by
 * Dynamic Tensor Rematerialization (Kirisame et al., "Dynamic Tensor Rematerialization",
 * ICLR 2021; the h_DTR^eq heuristic as MegEngine's imperative runtime implements it).
 *
 * When an allocation would take the pool's charged bytes over the budget, the resident tensor
 * with the smallest
 *
 *     h(t) = (cost(t) + cost of the evicted components next to t) / (charge(t) * staleness(t))
 *
 * is evicted (executor/dynamic/heuristic.c). Tensors freed after their last reader count as
 * evicted here (a recomputation may still need them), as MegEngine drops them. An evicted tensor that is read again is recomputed by
 * re-running its producer, whose own evicted inputs are recomputed first — an explicit stack
 * of frames, never C recursion, so a chain of any length works.
 *
 * What is never evicted: variables (they are not in the pool), outputs of updates (they are
 * their variable's storage), the inputs and outputs of the node running (pinned), and every
 * tensor that could not be recomputed with the same bits before its last reader: one whose
 * recomputation would read — directly or through evicted inputs — a variable that an update
 * overwrites before that reader (see `deadline` in executor/dynamic/dtr.c).
 *
 * Everything is decided from deterministic data (sizes, an op-cost estimate, a clock counting
 * kernels), so a dry run without kernels makes exactly the decisions a real run makes: create
 * uses that to refuse a budget that cannot work and to name the smallest one that does.
 */
#ifndef PBL_DTR_H
#define PBL_DTR_H

#include <stdio.h>

#include "executor/backend.h"
#include "executor/storage.h"
#include "pebble/bfc.h"

/* The pool (pebble/bfc.h) rounds every request up to this, and the budget counts the rounded
 * bytes: the pool is told to split every chunk, so a tensor's chunk is exactly its rounded
 * size and the budget is the pool's in-use bytes. */
#define PBL__DTR_CHUNK PBL_BFC_MIN_ALLOC

typedef struct pbl__dtr pbl__dtr;

typedef struct pbl__dtr_config {
    const pbl_graph     *g;
    const pbl__storage  *st;      /* schedule, value places (PBL__PLACE_DYNAMIC), kept outputs */
    const pbl__backend  *be;      /* kernels (run on stream 0) and the pool's regions */
    void                *bctx;    /* the backend instance */
    pbl__mem            *mem;     /* host memory for the runtime's own tables and the pool */
    uint64_t             budget;  /* bytes of pool (charged: rounded to PBL__DTR_CHUNK); 0: none */
    FILE                *trace;   /* NULL, or the pool's allocation trace (pbl_bfc_options.trace) */
    FILE                *log;     /* NULL, or one CSV row per eviction and rematerialisation */
} pbl__dtr_config;

typedef struct pbl__dtr_stats {
    uint64_t budget;       /* as configured (0: none) */
    uint64_t min_budget;   /* the largest single-node working set: no smaller budget can work */
    uint64_t peak;         /* most charged bytes in the pool at once, last run */
    uint64_t unlimited_peak; /* the same without a budget (a dry run at create) */
    uint64_t pool_bytes;   /* bytes the pool holds from the backend now (>= peak: fragmentation) */
    uint64_t pool_peak_in_use; /* the pool's own count of its peak in-use bytes (= peak) */
    int64_t  evictions;    /* last run */
    int64_t  remat_ops;    /* kernels run again to rematerialise, last run */
    int32_t  max_depth;    /* most frames on the stack at once, last run (1: no nesting) */
} pbl__dtr_stats;

/* Builds the runtime and checks the budget with a dry run. PBL_ERR_BUDGET when the budget
 * cannot run the schedule: err names the smallest budget that works. PBL_ERR_NOMEM. */
pbl_status pbl__dtr_create(pbl__dtr **out, const pbl__dtr_config *c, char *err, size_t errlen);
void       pbl__dtr_destroy(pbl__dtr *d); /* accepts NULL */

/* Runs the schedule once. ptr[] holds every variable's (and alias's) pointer on entry; on
 * return it holds each kept output's pool pointer (the outputs stay resident until the next
 * run). `run` is the run counter the kernels see. err explains a failure. */
pbl_status pbl__dtr_run(pbl__dtr *d, void **ptr, uint64_t run, char *err, size_t errlen);

void pbl__dtr_stats_get(const pbl__dtr *d, pbl__dtr_stats *out);

/* ---- the eviction heuristic (executor/dynamic/heuristic.c) ---------------------------------- */

/* Union-find over evicted tensors (h_DTR^eq): each eviction makes a set holding the evicted
 * tensor's cost, merged with the sets of its evicted neighbours. Sets never split, as in the
 * paper's and MegEngine's approximation: a rematerialised tensor just leaves its set. */
typedef struct pbl__dtr_set {
    int32_t parent;
    double  cost;  /* at a root: the summed cost of the set */
} pbl__dtr_set;

typedef struct pbl__dtr_dsu {
    pbl__dtr_set *set;
    int32_t       n, cap;
} pbl__dtr_dsu;

int32_t    pbl__dtr_dsu_add(pbl__dtr_dsu *u, pbl__mem *m, double cost); /* -1: out of memory */
int32_t    pbl__dtr_dsu_find(pbl__dtr_dsu *u, int32_t x);
void       pbl__dtr_dsu_union(pbl__dtr_dsu *u, int32_t a, int32_t b);
void       pbl__dtr_dsu_free(pbl__dtr_dsu *u, pbl__mem *m);

/* h_DTR of a tensor: (cost + neighbour_cost) / (charge * (now - last + 1)). */
double pbl__dtr_score(double cost, double neighbour_cost, uint64_t charge, int64_t now, int64_t last);

#endif
