/* What a BFC pool can tell about itself: stats, the memory map, the occupancy bar, and a
 * check of every invariant (for tests and debugging; it walks everything). */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "executor/bfc/bfc_internal.h"
#include "graph/base/export.h"

void pbl__bfc_stats_locked(const pbl_bfc *b, pbl_bfc_stats *st)
{
    *st = b->st;
    st->limit = b->limit;
    st->n_regions = b->n_regions;
    st->total_free = b->st.reserved - b->st.in_use;
    st->largest_free = pbl__bfc_largest_free(b);
    st->fragmentation =
        st->total_free ? 1.0 - (double)st->largest_free / (double)st->total_free : 0.0;
    st->bookkeeping = b->mem.live;
}

PBL__API void pbl_bfc_stats_get(pbl_bfc *b, pbl_bfc_stats *st)
{
    if (!st)
        return;
    memset(st, 0, sizeof *st);
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    pbl__bfc_stats_locked(b, st);
    pthread_mutex_unlock(&b->mu);
}

/* ---- the occupancy bar ---------------------------------------------------------------------- */

/* A walk over every chunk of every region in address order, with each chunk's position in
 * the regions laid end to end. */
typedef struct walk {
    const pbl_bfc *b;
    int32_t region, h;
    size_t  start; /* of chunk h, in the concatenation */
} walk;

static void walk_begin(walk *w, const pbl_bfc *b)
{
    w->b = b;
    w->region = 0;
    w->start = 0;
    w->h = b->n_regions ? b->regions[0].first : PBL__BFC_NONE;
}

static void walk_next(walk *w)
{
    const pbl_bfc *b = w->b;
    w->start += b->chunks[w->h].size;
    w->h = b->chunks[w->h].next;
    if (w->h == PBL__BFC_NONE && ++w->region < b->n_regions)
        w->h = b->regions[w->region].first;
}

static size_t bar_locked(const pbl_bfc *b, char *buf, size_t n)
{
    size_t total = b->st.reserved, cells = n - 1;
    if (total == 0) {
        buf[0] = '\0';
        return 0;
    }
    if (cells > total)
        cells = total;
    walk w;
    walk_begin(&w, b);
    for (size_t i = 0; i < cells; i++) {
        /* cell i covers [lo, hi) */
        size_t lo = (size_t)((unsigned __int128)total * i / cells);
        size_t hi = (size_t)((unsigned __int128)total * (i + 1) / cells);
        while (w.start + b->chunks[w.h].size <= lo)
            walk_next(&w);
        size_t used = 0;
        walk v = w;
        while (v.h != PBL__BFC_NONE && v.start < hi) {
            const pbl__bfc_chunk *c = &b->chunks[v.h];
            if (c->in_use) {
                size_t s = v.start > lo ? v.start : lo;
                size_t e = v.start + c->size < hi ? v.start + c->size : hi;
                used += e - s;
            }
            walk_next(&v);
        }
        buf[i] = used == 0 ? '.' : used == hi - lo ? '#' : ':';
    }
    buf[cells] = '\0';
    return cells;
}

PBL__API size_t pbl_bfc_bar(pbl_bfc *b, char *buf, size_t n)
{
    if (!b || !buf || n == 0)
        return 0;
    pthread_mutex_lock(&b->mu);
    size_t k = bar_locked(b, buf, n);
    pthread_mutex_unlock(&b->mu);
    return k;
}

/* ---- the memory map ------------------------------------------------------------------------- */

static size_t count_tree(const pbl__bfc_chunk *c, int32_t t, size_t *bytes)
{
    if (t == PBL__BFC_NONE)
        return 0;
    *bytes += c[t].size;
    return 1 + count_tree(c, c[t].left, bytes) + count_tree(c, c[t].right, bytes);
}

static int dump_locked(const pbl_bfc *b, FILE *f)
{
    pbl_bfc_stats st;
    pbl__bfc_stats_locked(b, &st);
    int bad = 0;
#define OUT(...) (bad |= fprintf(f, __VA_ARGS__) < 0)
    OUT("bfc \"%s\": %zu bytes reserved in %d regions (peak %zu), limit %zu\n", b->name,
        st.reserved, (int)st.n_regions, st.peak_reserved, st.limit);
    OUT("in use %zu bytes in %" PRId64 " allocations (requested %zu, peak %zu); free %zu in %d "
        "chunks, largest %zu, fragmentation %.4f\n",
        st.in_use, st.n_live, st.requested_in_use, st.peak_in_use, st.total_free,
        (int)st.n_free_chunks, st.largest_free, st.fragmentation);
    char bar[65];
    bar_locked(b, bar, sizeof bar);
    OUT("[%s]\n", bar);
    for (int32_t r = 0; r < b->n_regions; r++) {
        const pbl__bfc_region *rg = &b->regions[r];
        OUT("region %d at %p: %zu bytes\n", (int)r, (void *)rg->base, rg->size);
        OUT("  %12s %12s %-5s %12s %10s\n", "offset", "size", "state", "requested", "id");
        for (int32_t h = rg->first; h != PBL__BFC_NONE; h = b->chunks[h].next) {
            const pbl__bfc_chunk *c = &b->chunks[h];
            if (c->in_use)
                OUT("  %12zu %12zu %-5s %12zu %10" PRId64 "\n", (size_t)(c->ptr - rg->base),
                    c->size, "used", c->requested, c->id);
            else
                OUT("  %12zu %12zu %-5s\n", (size_t)(c->ptr - rg->base), c->size, "free");
        }
    }
    for (int i = 0; i < PBL_BFC_NUM_BINS; i++) {
        size_t bytes = 0, k = count_tree(b->chunks, b->bins[i], &bytes);
        if (k == 0)
            continue;
        if (i < PBL_BFC_NUM_BINS - 1)
            OUT("bin %2d [%zu, %zu): %zu free chunks, %zu bytes\n", i,
                (size_t)PBL_BFC_MIN_ALLOC << i, (size_t)PBL_BFC_MIN_ALLOC << (i + 1), k, bytes);
        else
            OUT("bin %2d [%zu, ...): %zu free chunks, %zu bytes\n", i,
                (size_t)PBL_BFC_MIN_ALLOC << i, k, bytes);
    }
    OUT("allocs %" PRId64 ", frees %" PRId64 ", splits %" PRId64 ", merges %" PRId64
        ", region grows %" PRId64 ", region frees %" PRId64 ", backoffs %" PRId64
        ", failures %" PRId64 ", bad frees %" PRId64 "\n",
        st.n_allocs, st.n_frees, st.n_splits, st.n_merges, st.n_region_grows,
        st.n_region_frees, st.n_backoffs, st.n_failures, st.n_bad_frees);
#undef OUT
    return bad;
}

PBL__API pbl_status pbl_bfc_dump(pbl_bfc *b, FILE *f)
{
    if (!b || !f)
        return PBL_ERR_INVALID_ARG;
    pthread_mutex_lock(&b->mu);
    int bad = dump_locked(b, f);
    pthread_mutex_unlock(&b->mu);
    return bad || ferror(f) ? PBL_ERR_IO : PBL_OK;
}

/* ---- the invariant check -------------------------------------------------------------------- */

typedef struct tree_check {
    const pbl__bfc_chunk *c;
    int     bin;
    int32_t last;      /* previous node in order */
    size_t  count;
    const char *broken;
    int32_t where;
} tree_check;

static void check_tree(tree_check *k, int32_t t, uint32_t parent_prio)
{
    if (t == PBL__BFC_NONE || k->broken)
        return;
    const pbl__bfc_chunk *c = k->c;
    if (c[t].prio > parent_prio) {
        k->broken = "a treap node outranks its parent";
        k->where = t;
        return;
    }
    check_tree(k, c[t].left, c[t].prio);
    if (k->broken)
        return;
    int ordered;
    if (k->last == PBL__BFC_NONE)
        ordered = 1;
    else
        ordered = c[k->last].size < c[t].size ||
                  (c[k->last].size == c[t].size && c[k->last].ptr < c[t].ptr);
    if (!ordered)
        k->broken = "a bin is not ordered by (size, address)";
    else if (c[t].in_use || c[t].bin != k->bin || pbl__bfc_bin(c[t].size) != k->bin)
        k->broken = "a bin holds a chunk that is used or of another bin's size";
    if (k->broken) {
        k->where = t;
        return;
    }
    k->last = t;
    k->count++;
    check_tree(k, c[t].right, c[t].prio);
}

static pbl_status check_locked(pbl_bfc *b)
{
    const pbl__bfc_chunk *c = b->chunks;
    size_t reserved = 0, in_use = 0, requested = 0;
    int64_t live = 0;
    int32_t free_chunks = 0;
    for (int32_t r = 0; r < b->n_regions; r++) {
        const pbl__bfc_region *rg = &b->regions[r];
        if (r > 0 && b->regions[r - 1].base + b->regions[r - 1].size > rg->base) {
            snprintf(b->errmsg, sizeof b->errmsg, "%s: check: regions %d and %d overlap or are out of order", b->name, (int)r - 1, (int)r);
            return PBL_ERR_INVALID_ARG;
        }
        uintptr_t at = rg->base;
        int32_t prev = PBL__BFC_NONE;
        for (int32_t h = rg->first; h != PBL__BFC_NONE; prev = h, h = c[h].next) {
            const char *broken = NULL;
            if (c[h].ptr != at)
                broken = "chunks do not tile their region";
            else if (c[h].prev != prev)
                broken = "a chunk's prev link is wrong";
            else if (c[h].size == 0 || c[h].size % PBL_BFC_MIN_ALLOC)
                broken = "a chunk's size is not a positive multiple of 256";
            else if (!c[h].in_use && prev != PBL__BFC_NONE && !c[prev].in_use)
                broken = "two free neighbours were not merged";
            else if (!c[h].in_use && c[h].bin != pbl__bfc_bin(c[h].size))
                broken = "a free chunk is not in its bin";
            else if (c[h].in_use && (c[h].bin != -1 || c[h].requested == 0 || c[h].requested > c[h].size))
                broken = "a used chunk's fields are inconsistent";
            if (broken) {
                snprintf(b->errmsg, sizeof b->errmsg, "%s: check: region %d, offset %zu: %s",
                         b->name, (int)r, (size_t)(c[h].ptr - rg->base), broken);
                return PBL_ERR_INVALID_ARG;
            }
            at += c[h].size;
            if (c[h].in_use) {
                in_use += c[h].size;
                requested += c[h].requested;
                live++;
            } else {
                free_chunks++;
            }
        }
        if (at != rg->base + rg->size) {
            snprintf(b->errmsg, sizeof b->errmsg, "%s: check: region %d's chunks cover %zu of its %zu bytes",
                     b->name, (int)r, (size_t)(at - rg->base), rg->size);
            return PBL_ERR_INVALID_ARG;
        }
        reserved += rg->size;
    }
    size_t in_bins = 0;
    for (int i = 0; i < PBL_BFC_NUM_BINS; i++) {
        tree_check k = { c, i, PBL__BFC_NONE, 0, NULL, PBL__BFC_NONE };
        check_tree(&k, b->bins[i], UINT32_MAX);
        if (k.broken) {
            snprintf(b->errmsg, sizeof b->errmsg, "%s: check: %s (chunk at %p)", b->name,
                     k.broken, (void *)c[k.where].ptr);
            return PBL_ERR_INVALID_ARG;
        }
        in_bins += k.count;
    }
    /* the index of used chunks: every entry a used chunk found from its own address, one
     * entry per used chunk */
    int64_t indexed = 0;
    for (uint32_t i = 0; i < b->used_cap; i++) {
        int32_t h = b->used_tab[i];
        if (h == PBL__BFC_NONE)
            continue;
        indexed++;
        if (!c[h].in_use || pbl__bfc_used_find(b, c[h].ptr) != h) {
            snprintf(b->errmsg, sizeof b->errmsg, "%s: check: the index of used chunks holds %s chunk at %p",
                     b->name, c[h].in_use ? "an unreachable" : "a free", (void *)c[h].ptr);
            return PBL_ERR_INVALID_ARG;
        }
    }
    if (indexed != live) {
        snprintf(b->errmsg, sizeof b->errmsg, "%s: check: the index of used chunks holds %" PRId64 " chunks, the regions %" PRId64,
                 b->name, indexed, live);
        return PBL_ERR_INVALID_ARG;
    }
    const char *broken = NULL;
    if (in_bins != (size_t)free_chunks || free_chunks != b->st.n_free_chunks)
        broken = "the bins and the regions disagree on the free chunks";
    else if (reserved != b->st.reserved)
        broken = "the regions' sizes do not add up to reserved";
    else if (in_use != b->st.in_use || requested != b->st.requested_in_use || live != b->st.n_live)
        broken = "the used chunks do not add up to in_use";
    else if (b->st.reserved > b->limit)
        broken = "reserved exceeds the limit";
    if (broken) {
        snprintf(b->errmsg, sizeof b->errmsg, "%s: check: %s", b->name, broken);
        return PBL_ERR_INVALID_ARG;
    }
    return PBL_OK;
}

PBL__API pbl_status pbl_bfc_check(pbl_bfc *b)
{
    if (!b)
        return PBL_ERR_INVALID_ARG;
    pthread_mutex_lock(&b->mu);
    pbl_status s = check_locked(b);
    pthread_mutex_unlock(&b->mu);
    return s;
}
