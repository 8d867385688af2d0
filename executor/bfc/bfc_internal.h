/* The BFC pool's state, shared by bfc.c (allocate, free, regions), bfc_bins.c (the ordered
 * trees behind the bins) and bfc_report.c (stats, dump, bar, invariant check).
 *
 * Nothing is stored inside the regions: a region's address may be device memory. Chunks are
 * records in one growable array, named by index ("handle"); an unused record waits on a free
 * list. A chunk is either free, and then sits in its bin's tree keyed by (size, address) (a
 * treap threaded through the records: bfc_bins.c), or in use, and then sits in a hash table
 * from address to record (bfc_used.c). Putting a chunk into a bin and taking one out of the
 * table allocate nothing, so a free can never fail for want of bookkeeping memory. */
#ifndef PBL_BFC_INTERNAL_H
#define PBL_BFC_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "graph/base/mem.h"
#include "pebble/bfc.h"

#define PBL__BFC_NONE (-1)

typedef struct pbl__bfc_chunk {
    uintptr_t ptr;        /* first byte */
    size_t    size;       /* bytes, a multiple of 256 */
    size_t    requested;  /* in use: bytes the caller asked for */
    int64_t   id;         /* in use: allocation id (order of allocation) */
    int32_t   prev, next; /* address neighbours in the same region; unused record: next is
                             the free-list link */
    int32_t   left, right;/* treap children */
    uint32_t  prio;       /* treap heap priority (a parent's is >= its children's) */
    int8_t    in_use;
    int8_t    bin;        /* free: its bin; otherwise -1 */
} pbl__bfc_chunk;

typedef struct pbl__bfc_region {
    uintptr_t base;
    size_t    size;
    int32_t   first;      /* chunk at base; the region's chunks follow through .next */
} pbl__bfc_region;

struct pbl_bfc {
    pbl__mem        mem;
    pthread_mutex_t mu;
    char           *name;
    /* options, fixed at create */
    pbl_bfc_sub_allocator sub;
    size_t          limit;            /* rounded down to 256 */
    size_t          split_threshold;  /* leftover bytes that justify a split below 2x */
    int32_t         free_regions_on_oom;
    FILE           *trace;
    pbl_bfc_trace_fn trace_fn;
    void           *trace_ctx;
    /* growth */
    size_t          next_region;      /* size of the next region (doubles) */
    int32_t         backed_off;       /* the 0.9x back-off happens once per pool */
    /* chunks */
    pbl__bfc_chunk *chunks;
    int32_t         cap_chunks, n_slots, free_slot;
    uint64_t        rng;              /* treap priorities */
    int32_t         bins[PBL_BFC_NUM_BINS]; /* treap roots of free chunks by (size, address) */
    int32_t        *used_tab;         /* used chunks by address: open addressing, NONE empty */
    uint32_t        used_cap;         /* slots, a power of two (0 before the first alloc) */
    int             used_bits;        /* log2(used_cap) */
    /* regions, sorted by base address */
    pbl__bfc_region *regions;
    int32_t         n_regions, cap_regions;
    /* counters */
    pbl_bfc_stats   st;               /* the fields that are counted, not derived */
    int64_t         next_id;
    char            errmsg[320];
};

/* The bin of a free chunk of `size` bytes (>= 256). */
int pbl__bfc_bin(size_t size);

/* Treaps over b->chunks keyed by (size, ptr). insert/erase return the new root; erase needs
 * h to be in the tree. */
int32_t pbl__bfc_treap_insert(pbl__bfc_chunk *c, int32_t root, int32_t h);
int32_t pbl__bfc_treap_erase(pbl__bfc_chunk *c, int32_t root, int32_t h);
/* The first chunk by (size, ptr) with size >= `size`; NONE when all are smaller. */
int32_t pbl__bfc_treap_lower_bound(const pbl__bfc_chunk *c, int32_t root, size_t size);
/* The last chunk in key order (the largest of a bin); NONE for an empty tree. */
int32_t pbl__bfc_treap_max(const pbl__bfc_chunk *c, int32_t root);

/* Puts free chunk h in its bin / takes it out. */
void pbl__bfc_bin_insert(pbl_bfc *b, int32_t h);
void pbl__bfc_bin_remove(pbl_bfc *b, int32_t h);
/* The largest free chunk's size (0 when none). */
size_t pbl__bfc_largest_free(const pbl_bfc *b);

/* The index of used chunks. reserve makes room for n entries (may allocate: PBL_ERR_NOMEM
 * leaves the table as it was); insert needs that room; remove needs h to be in the table. */
pbl_status pbl__bfc_used_reserve(pbl_bfc *b, int64_t n);
void       pbl__bfc_used_insert(pbl_bfc *b, int32_t h);
void       pbl__bfc_used_remove(pbl_bfc *b, int32_t h);
int32_t    pbl__bfc_used_find(const pbl_bfc *b, uintptr_t p); /* NONE if none */

/* Stats with the derived fields filled in; the caller holds b->mu. */
void pbl__bfc_stats_locked(const pbl_bfc *b, pbl_bfc_stats *st);

#endif
