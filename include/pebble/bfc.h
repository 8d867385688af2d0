/*
 * pebble/bfc.h — a best-fit-with-coalescing (BFC) memory pool, as TensorFlow's BFCAllocator
 * does it, for dynamic mode (memory whose lifetimes are not known before the run).
 *
 * The pool takes big regions from a sub-allocator (host malloc by default; a device's
 * cudaMalloc in a backend) and carves them into chunks:
 *   - every request is rounded up to a multiple of 256 bytes;
 *   - free chunks sit in 21 bins by size (bin i holds sizes in [256 << i, 256 << (i + 1)), the
 *     last bin everything larger), each bin ordered by size, then address;
 *   - an allocation takes the smallest free chunk that fits (lowest address among equals),
 *     searching its own bin and then larger bins;
 *   - the chunk is split when it is at least twice the request, or when keeping it whole
 *     would waste the split threshold or more (128 MiB, or split_waste_fraction * limit);
 *   - a freed chunk merges with its free neighbours in the same region;
 *   - when nothing fits, a new region is taken: regions grow by doubling (starting at
 *     initial_region, or the whole limit when allow_growth is 0) while the total stays under
 *     `limit`; when the sub-allocator refuses, the region size backs off to 0.9x (once per
 *     pool, as TensorFlow does) until it succeeds or gets smaller than the request;
 *   - before an allocation fails, regions holding no allocation are returned to the
 *     sub-allocator and the allocation is tried again.
 *
 *     pbl_bfc *b;
 *     char err[256];
 *     pbl_bfc_options o = pbl_bfc_options_default();
 *     o.limit = 64u << 20;
 *     if (pbl_bfc_create(&b, &o, err, sizeof err) != PBL_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     void *p;
 *     if (pbl_bfc_alloc(b, 1000, &p) != PBL_OK)            // 1024 bytes of a region
 *         fprintf(stderr, "%s\n", pbl_bfc_errmsg(b));      // names the request, largest free
 *     else
 *         pbl_bfc_free(b, p);
 *     pbl_bfc_dump(b, stdout);                              // memory map, bins, counters
 *     pbl_bfc_destroy(b);                                   // regions back to the sub-allocator
 *
 * Bookkeeping (chunk records, the region table) lives outside the regions, in host memory
 * from `allocator` (pebble/alloc.h), so region addresses may be device pointers the host
 * never touches. Allocations are aligned as the sub-allocator's regions are (the default
 * host sub-allocator gives 256-byte alignment).
 *
 * Thread-safety: every call on one pool takes that pool's mutex, so one pool may be shared
 * by threads. pbl_bfc_errmsg returns the pool's last message; with several threads failing
 * at once, a thread may read another's message. Pools are independent of each other.
 */
#ifndef PEBBLE_BFC_H
#define PEBBLE_BFC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pebble/alloc.h"
#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pbl_bfc pbl_bfc;

enum {
    PBL_BFC_MIN_ALLOC = 256, /* requests are rounded up to multiples of this */
    PBL_BFC_NUM_BINS = 21,   /* bin i: chunk sizes in [256 << i, 256 << (i + 1)); the last: larger */
};

/* Where regions come from. `alloc` returns `bytes` (a multiple of 256) or NULL when it
 * cannot; `free` gets back the same pointer and size. Addresses are only compared and
 * offset, never dereferenced, so they may be device addresses. */
typedef struct pbl_bfc_sub_allocator {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes);
    void  (*free)(void *ctx, void *p, size_t bytes);
} pbl_bfc_sub_allocator;

/* Called after every successful allocation (op 'a') and free (op 'f') with the allocation's
 * id (0, 1, 2, ... in allocation order) and the bytes the caller asked for. */
typedef void (*pbl_bfc_trace_fn)(void *ctx, char op, int64_t id, size_t bytes);

typedef struct pbl_bfc_options {
    size_t                limit;          /* most bytes held from the sub-allocator at once;
                                             0 (default): no limit but the sub-allocator's */
    pbl_bfc_sub_allocator sub;            /* .alloc NULL (default): host memory, 256-aligned */
    int32_t               allow_growth;   /* 1 (default): the first region is initial_region
                                             and each new one doubles; 0: the first region is
                                             the whole limit (needs a limit) */
    size_t                initial_region; /* default 2 MiB; rounded up to 256 */
    double                split_waste_fraction; /* a chunk under twice the request is still
                                             split when the leftover is >= this fraction of
                                             limit; 0 (default): >= 128 MiB, as TensorFlow */
    int32_t               free_regions_on_oom; /* 1 (default): return regions holding nothing
                                             to the sub-allocator and retry before failing */
    const pbl_allocator  *allocator;      /* bookkeeping; NULL: malloc/free */
    const char           *name;           /* in messages and the dump; copied; default "bfc" */
    FILE                 *trace;          /* if set: CSV rows "alloc,ID,BYTES" / "free,ID,BYTES"
                                             after a header "op,id,bytes" written by create
                                             (the format bench/bfc_replay reads) */
    pbl_bfc_trace_fn      trace_fn;       /* if set: called as documented above */
    void                 *trace_ctx;
} pbl_bfc_options;

pbl_bfc_options pbl_bfc_options_default(void);

/* Creates an empty pool (no region is taken until the first allocation).
 * PBL_ERR_INVALID_ARG: a sub-allocator with only one of alloc/free, allow_growth 0 without
 * a limit, a negative or >= 1 split_waste_fraction. PBL_ERR_NOMEM. On failure *out is NULL
 * and, when given, err (size errlen) holds the message. */
pbl_status pbl_bfc_create(pbl_bfc **out, const pbl_bfc_options *o, char *err, size_t errlen);

/* Returns every region to the sub-allocator, whether or not allocations are still live
 * (their pointers dangle after). Accepts NULL. */
void pbl_bfc_destroy(pbl_bfc *b);

/* *ptr = `bytes` (rounded up to 256) from the pool. bytes == 0 gives *ptr = NULL and PBL_OK.
 * PBL_ERR_NOMEM when nothing fits under the limit, the sub-allocator refuses, or bookkeeping
 * memory runs out; *ptr is NULL, pbl_bfc_errmsg names the request and the largest free chunk,
 * and the pool is as it was (except that it may have returned empty regions). */
pbl_status pbl_bfc_alloc(pbl_bfc *b, size_t bytes, void **ptr);

/* Gives back an allocation. NULL is a no-op (PBL_OK). A pointer that is not the start of a
 * live allocation of this pool — never allocated, already freed, inside a chunk, another
 * pool's — is PBL_ERR_INVALID_ARG with a message saying which, and changes nothing (the
 * check is always on: a lookup in the tree of used chunks). A pointer freed twice whose
 * chunk has since merged with a neighbour is reported as lying inside a free chunk. */
pbl_status pbl_bfc_free(pbl_bfc *b, void *ptr);

/* The bytes the caller asked for when `ptr` was allocated, and the chunk's (rounded) size.
 * PBL_ERR_INVALID_ARG as for pbl_bfc_free. Either output may be NULL. */
pbl_status pbl_bfc_size(pbl_bfc *b, const void *ptr, size_t *requested, size_t *chunk);

/* The last error's message ("" when none). */
const char *pbl_bfc_errmsg(const pbl_bfc *b);

typedef struct pbl_bfc_stats {
    size_t  limit;            /* the limit in force (SIZE_MAX rounded down when none) */
    size_t  in_use;           /* bytes in allocated chunks (rounded sizes), as TensorFlow */
    size_t  requested_in_use; /* bytes the callers asked for, of live allocations */
    size_t  peak_in_use;      /* most in_use ever */
    size_t  reserved;         /* bytes held from the sub-allocator now */
    size_t  peak_reserved;    /* most reserved ever */
    size_t  total_free;       /* reserved - in_use */
    size_t  largest_free;     /* the largest free chunk */
    double  fragmentation;    /* 1 - largest_free / total_free; 0 when nothing is free */
    int64_t n_live;           /* live allocations */
    int64_t n_allocs, n_frees;
    int64_t n_splits, n_merges;
    int64_t n_region_grows;   /* regions taken from the sub-allocator */
    int64_t n_region_frees;   /* regions returned before destroy (empty regions, on OOM) */
    int64_t n_backoffs;       /* sub-allocator refusals answered by backing off to 0.9x */
    int64_t n_failures;       /* allocations that returned PBL_ERR_NOMEM */
    int64_t n_bad_frees;      /* frees refused as unknown or already freed */
    int32_t n_regions;
    int32_t n_free_chunks;
    size_t  bookkeeping;      /* host bytes of bookkeeping held now */
} pbl_bfc_stats;

void pbl_bfc_stats_get(pbl_bfc *b, pbl_bfc_stats *st);

/* Writes the state to f: a summary line, the occupancy bar, then per region (by address)
 * one line per chunk — offset in the region, size, used/free, requested bytes and allocation
 * id of used chunks — then the non-empty bins and the counters. PBL_ERR_IO on a write error. */
pbl_status pbl_bfc_dump(pbl_bfc *b, FILE *f);

/* Writes an occupancy bar of n - 1 cells (plus the NUL) into buf: the regions by address,
 * end to end, each cell covering reserved / (n - 1) bytes: '#' all in use, '.' all free,
 * ':' partly in use, and nothing at all (an empty string) when no region is held. Cells
 * that would cover less than a byte are not written (the bar is shorter). n == 0 writes
 * nothing. Returns the number of cells written. */
size_t pbl_bfc_bar(pbl_bfc *b, char *buf, size_t n);

/* Debug check of every invariant: chunks tile each region, no two free neighbours, each
 * free chunk in its bin in order, bins hold only free chunks, counters agree. PBL_OK, or
 * PBL_ERR_INVALID_ARG with a message naming the broken invariant (a bug in the pool). */
pbl_status pbl_bfc_check(pbl_bfc *b);

#ifdef __cplusplus
}
#endif
#endif
