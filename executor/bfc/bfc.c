/* The BFC pool: allocate by best fit, split, coalesce on free, grow regions by doubling under
 * a limit, back off when the sub-allocator refuses, return empty regions before failing.
 * The rules and their constants follow TensorFlow's BFCAllocator
 * (tensorflow/core/common_runtime/bfc_allocator.cc: kMinAllocationSize 256, kNumBins 21,
 * the 2x / 128 MiB split rule, Extend's doubling and 0.9 back-pedal, DeallocateFreeRegions);
 * the code is our own. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "executor/bfc/bfc_internal.h"
#include "graph/base/errmsg.h"
#include "graph/base/export.h"

#define MIN_ALLOC ((size_t)PBL_BFC_MIN_ALLOC)
#define DEFAULT_SPLIT_WASTE ((size_t)128 << 20)

static size_t round_down(size_t n) { return n & ~(MIN_ALLOC - 1); }

/* Rounds up to 256; 0 when that overflows. */
static size_t round_up(size_t n)
{
    return n > SIZE_MAX - (MIN_ALLOC - 1) ? 0 : round_down(n + MIN_ALLOC - 1);
}

static void set_err(pbl_bfc *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(pbl_bfc *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pbl__verrf(b->errmsg, sizeof b->errmsg, PBL_OK, fmt, ap);
    va_end(ap);
}

/* ---- the default sub-allocator: host memory ------------------------------------------------ */

static void *host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return aligned_alloc(MIN_ALLOC, bytes); /* bytes is a multiple of 256, as C11 requires */
}

static void host_free(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    free(p);
}

PBL__API pbl_bfc_options pbl_bfc_options_default(void)
{
    pbl_bfc_options o;
    memset(&o, 0, sizeof o);
    o.allow_growth = 1;
    o.initial_region = (size_t)2 << 20;
    o.free_regions_on_oom = 1;
    return o;
}

/* ---- chunk records -------------------------------------------------------------------------- */

/* Makes sure `k` records can be taken without allocating, so that no step after this one
 * can fail for bookkeeping memory. */
static pbl_status chunks_reserve(pbl_bfc *b, int32_t k)
{
    int32_t spare = 0;
    for (int32_t h = b->free_slot; h != PBL__BFC_NONE && spare < k; h = b->chunks[h].next)
        spare++;
    if (spare >= k || b->n_slots + (k - spare) <= b->cap_chunks)
        return PBL_OK;
    void *p = b->chunks;
    if (pbl__mem_reserve(&b->mem, &p, &b->cap_chunks, b->n_slots + (k - spare),
                         sizeof *b->chunks) != PBL_OK)
        return PBL_ERR_NOMEM;
    b->chunks = p;
    return PBL_OK;
}

/* A fresh record (after chunks_reserve). */
static int32_t chunk_take(pbl_bfc *b)
{
    int32_t h = b->free_slot;
    if (h != PBL__BFC_NONE)
        b->free_slot = b->chunks[h].next;
    else
        h = b->n_slots++;
    pbl__bfc_chunk *c = &b->chunks[h];
    memset(c, 0, sizeof *c);
    c->prev = c->next = c->left = c->right = PBL__BFC_NONE;
    c->bin = -1;
    /* xorshift64: deterministic priorities, so a run is reproducible */
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    c->prio = (uint32_t)(b->rng >> 32);
    return h;
}

static void chunk_release(pbl_bfc *b, int32_t h)
{
    b->chunks[h].next = b->free_slot;
    b->chunks[h].ptr = 0;
    b->chunks[h].size = 0;
    b->free_slot = h;
}

/* ---- create / destroy ----------------------------------------------------------------------- */

PBL__API pbl_status pbl_bfc_create(pbl_bfc **out, const pbl_bfc_options *opt, char *err,
                                   size_t errlen)
{
    pbl_bfc_options o = opt ? *opt : pbl_bfc_options_default();
    const char *why = NULL;
    pbl_status s = PBL_ERR_INVALID_ARG;
    if (!out)
        why = "no output pointer";
    else if ((o.sub.alloc == NULL) != (o.sub.free == NULL))
        why = "the sub-allocator needs both alloc and free";
    else if (!o.allow_growth && o.limit == 0)
        why = "allow_growth 0 needs a limit (the first region is the whole limit)";
    else if (!(o.split_waste_fraction >= 0.0 && o.split_waste_fraction < 1.0))
        why = "split_waste_fraction must be in [0, 1)";
    if (out)
        *out = NULL;
    if (why) {
        return pbl__errf(err, errlen, s, "bfc_create: %s", why);
    }

    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    pbl_bfc *b = pbl__mem_calloc(&m, sizeof *b);
    if (!b)
        goto fail_nomem;
    b->mem = m;
    b->name = pbl__mem_strdup(&b->mem, o.name ? o.name : "bfc");
    if (!b->name)
        goto fail_free_pool;
    if (pthread_mutex_init(&b->mu, NULL) != 0)
        goto fail_free_name;

    b->sub = o.sub;
    if (!b->sub.alloc) {
        b->sub.alloc = host_alloc;
        b->sub.free = host_free;
    }
    b->limit = round_down(o.limit ? o.limit : SIZE_MAX);
    b->split_threshold = o.split_waste_fraction > 0.0
                             ? (size_t)(o.split_waste_fraction * (double)b->limit)
                             : DEFAULT_SPLIT_WASTE;
    if (o.allow_growth) {
        size_t first = round_up(o.initial_region ? o.initial_region : MIN_ALLOC);
        b->next_region = first && first < b->limit ? first : b->limit;
    } else {
        b->next_region = b->limit;
    }
    b->free_regions_on_oom = o.free_regions_on_oom;
    b->trace = o.trace;
    b->trace_fn = o.trace_fn;
    b->trace_ctx = o.trace_ctx;
    b->free_slot = PBL__BFC_NONE;
    for (int i = 0; i < PBL_BFC_NUM_BINS; i++)
        b->bins[i] = PBL__BFC_NONE;
    b->rng = 0x9E3779B97F4A7C15ull;
    b->st.limit = b->limit;
    if (b->trace)
        fprintf(b->trace, "op,id,bytes\n");
    *out = b;
    return PBL_OK;

fail_free_name:
    pbl__mem_strfree(&b->mem, b->name);
fail_free_pool:
    m = b->mem;
    pbl__mem_free(&m, b, sizeof *b);
fail_nomem:
    return pbl__errf(err, errlen, PBL_ERR_NOMEM, "bfc_create: out of memory for the pool's bookkeeping");
}

PBL__API void pbl_bfc_destroy(pbl_bfc *b)
{
    if (!b)
        return;
    for (int32_t i = 0; i < b->n_regions; i++)
        b->sub.free(b->sub.ctx, (void *)b->regions[i].base, b->regions[i].size);
    pbl__mem_free(&b->mem, b->regions, (size_t)b->cap_regions * sizeof *b->regions);
    pbl__mem_free(&b->mem, b->chunks, (size_t)b->cap_chunks * sizeof *b->chunks);
    pbl__mem_free(&b->mem, b->used_tab, (size_t)b->used_cap * sizeof *b->used_tab);
    pbl__mem_strfree(&b->mem, b->name);
    pthread_mutex_destroy(&b->mu);
    pbl__mem m = b->mem;
    pbl__mem_free(&m, b, sizeof *b);
}

PBL__API const char *pbl_bfc_errmsg(const pbl_bfc *b)
{
    return b ? b->errmsg : "no pool";
}

/* ---- regions -------------------------------------------------------------------------------- */

/* The index of the region holding address p, or -1. */
static int32_t region_of(const pbl_bfc *b, uintptr_t p)
{
    int32_t lo = 0, hi = b->n_regions;
    while (lo < hi) { /* first region with base > p */
        int32_t mid = lo + (hi - lo) / 2;
        if (b->regions[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const pbl__bfc_region *r = &b->regions[lo - 1];
    return p - r->base < r->size ? lo - 1 : -1;
}

/* Takes a new region big enough for `rounded` bytes (TensorFlow's Extend). The caller has
 * reserved a chunk record. Returns 1 on success; on failure *why says what refused. */
static int extend(pbl_bfc *b, size_t rounded, const char **why)
{
    size_t available = round_down(b->limit - b->st.reserved);
    if (rounded > available) {
        *why = "the limit";
        return 0;
    }
    void *grown = b->regions;
    if (pbl__mem_reserve(&b->mem, &grown, &b->cap_regions, b->n_regions + 1,
                         sizeof *b->regions) != PBL_OK) {
        *why = "bookkeeping memory";
        return 0;
    }
    b->regions = grown;

    /* Doubling until the request fits; a region that had to grow for a big request does not
     * double again afterwards. */
    int increased = 0;
    while (rounded > b->next_region) {
        b->next_region = b->next_region > SIZE_MAX / 2 ? SIZE_MAX : b->next_region * 2;
        increased = 1;
    }
    size_t bytes = b->next_region < available ? b->next_region : available;
    void *p = b->sub.alloc(b->sub.ctx, bytes);
    if (!p && !b->backed_off) {
        /* Once per pool: shrink by 0.9x until the sub-allocator agrees or the region would
         * no longer hold the request. */
        b->backed_off = 1;
        while (!p) {
            bytes = round_up((size_t)((double)bytes * 0.9));
            if (bytes < rounded)
                break;
            b->st.n_backoffs++;
            p = b->sub.alloc(b->sub.ctx, bytes);
        }
    }
    if (!p) {
        *why = "the sub-allocator";
        return 0;
    }
    if (!increased)
        b->next_region = b->next_region > SIZE_MAX / 2 ? SIZE_MAX : b->next_region * 2;

    uintptr_t base = (uintptr_t)p;
    int32_t at = 0;
    while (at < b->n_regions && b->regions[at].base < base)
        at++;
    memmove(&b->regions[at + 1], &b->regions[at],
            (size_t)(b->n_regions - at) * sizeof *b->regions);
    int32_t h = chunk_take(b);
    b->chunks[h].ptr = base;
    b->chunks[h].size = bytes;
    b->regions[at] = (pbl__bfc_region){ base, bytes, h };
    b->n_regions++;
    pbl__bfc_bin_insert(b, h);
    b->st.reserved += bytes;
    if (b->st.reserved > b->st.peak_reserved)
        b->st.peak_reserved = b->st.reserved;
    b->st.n_region_grows++;
    return 1;
}

/* Returns regions holding no allocation to the sub-allocator, when that could make room for
 * `rounded` bytes (TensorFlow's DeallocateFreeRegions). Returns 1 if any was returned. */
static int free_empty_regions(pbl_bfc *b, size_t rounded)
{
    size_t empty = 0;
    for (int32_t i = 0; i < b->n_regions; i++) {
        const pbl__bfc_chunk *c = &b->chunks[b->regions[i].first];
        if (!c->in_use && c->next == PBL__BFC_NONE) /* free neighbours merge: one chunk */
            empty += b->regions[i].size;
    }
    if (empty == 0 || rounded > b->limit - b->st.reserved + empty)
        return 0;
    int32_t kept = 0;
    for (int32_t i = 0; i < b->n_regions; i++) {
        pbl__bfc_region r = b->regions[i];
        const pbl__bfc_chunk *c = &b->chunks[r.first];
        if (!c->in_use && c->next == PBL__BFC_NONE) {
            pbl__bfc_bin_remove(b, r.first);
            chunk_release(b, r.first);
            b->sub.free(b->sub.ctx, (void *)r.base, r.size);
            b->st.reserved -= r.size;
            b->st.n_region_frees++;
        } else {
            b->regions[kept++] = r;
        }
    }
    b->n_regions = kept;
    return 1;
}

/* ---- allocate ------------------------------------------------------------------------------- */

/* Best fit: the smallest free chunk of at least `rounded` bytes, lowest address among equals,
 * from the request's bin upward. Marks it used, splitting off the rest when worthwhile. */
static int32_t take_chunk(pbl_bfc *b, size_t rounded, size_t requested)
{
    int32_t h = PBL__BFC_NONE;
    for (int bin = pbl__bfc_bin(rounded); bin < PBL_BFC_NUM_BINS && h == PBL__BFC_NONE; bin++)
        h = pbl__bfc_treap_lower_bound(b->chunks, b->bins[bin], rounded);
    if (h == PBL__BFC_NONE)
        return h;
    pbl__bfc_bin_remove(b, h);
    size_t size = b->chunks[h].size;
    if (size - rounded >= rounded || size - rounded >= b->split_threshold) { /* 2x rule */
        int32_t r = chunk_take(b); /* reserved by the caller */
        pbl__bfc_chunk *c = &b->chunks[h], *rc = &b->chunks[r];
        rc->ptr = c->ptr + rounded;
        rc->size = size - rounded;
        rc->prev = h;
        rc->next = c->next;
        if (c->next != PBL__BFC_NONE)
            b->chunks[c->next].prev = r;
        c->next = r;
        c->size = rounded;
        pbl__bfc_bin_insert(b, r);
        b->st.n_splits++;
    }
    pbl__bfc_chunk *c = &b->chunks[h];
    c->in_use = 1;
    c->requested = requested;
    c->id = b->next_id++;
    pbl__bfc_used_insert(b, h); /* room reserved by the caller */
    b->st.in_use += c->size;
    b->st.requested_in_use += requested;
    if (b->st.in_use > b->st.peak_in_use)
        b->st.peak_in_use = b->st.in_use;
    b->st.n_live++;
    b->st.n_allocs++;
    return h;
}

static pbl_status alloc_locked(pbl_bfc *b, size_t bytes, void **ptr)
{
    size_t rounded = round_up(bytes);
    if (rounded == 0) {
        b->st.n_failures++;
        set_err(b, "%s: out of memory allocating %zu bytes: larger than any pool can hold",
                b->name, bytes);
        return PBL_ERR_NOMEM;
    }
    /* two records (a new region's chunk and a split's remainder) and a slot in the index */
    if (chunks_reserve(b, 2) != PBL_OK || pbl__bfc_used_reserve(b, b->st.n_live + 1) != PBL_OK) {
        b->st.n_failures++;
        set_err(b, "%s: out of memory allocating %zu bytes: no host memory for bookkeeping",
                b->name, bytes);
        return PBL_ERR_NOMEM;
    }
    const char *why = NULL;
    int32_t h = take_chunk(b, rounded, bytes);
    if (h == PBL__BFC_NONE && extend(b, rounded, &why))
        h = take_chunk(b, rounded, bytes);
    if (h == PBL__BFC_NONE && b->free_regions_on_oom && free_empty_regions(b, rounded) &&
        extend(b, rounded, &why))
        h = take_chunk(b, rounded, bytes);
    if (h == PBL__BFC_NONE) {
        b->st.n_failures++;
        size_t largest = pbl__bfc_largest_free(b);
        set_err(b,
                "%s: out of memory allocating %zu bytes (%zu rounded): largest free chunk %zu "
                "bytes, %zu free in %d chunks, %zu reserved in %d regions of limit %zu; "
                "refused by %s",
                b->name, bytes, rounded, largest, b->st.reserved - b->st.in_use,
                (int)b->st.n_free_chunks, b->st.reserved, (int)b->n_regions, b->limit,
                why ? why : "the limit");
        return PBL_ERR_NOMEM;
    }
    *ptr = (void *)b->chunks[h].ptr;
    if (b->trace)
        fprintf(b->trace, "alloc,%" PRId64 ",%zu\n", b->chunks[h].id, bytes);
    if (b->trace_fn)
        b->trace_fn(b->trace_ctx, 'a', b->chunks[h].id, bytes);
    return PBL_OK;
}

PBL__API pbl_status pbl_bfc_alloc(pbl_bfc *b, size_t bytes, void **ptr)
{
    if (!b || !ptr)
        return PBL_ERR_INVALID_ARG;
    *ptr = NULL;
    if (bytes == 0)
        return PBL_OK;
    pthread_mutex_lock(&b->mu);
    pbl_status s = alloc_locked(b, bytes, ptr);
    pthread_mutex_unlock(&b->mu);
    return s;
}

/* ---- free ----------------------------------------------------------------------------------- */

/* The used chunk starting at p, or NONE with a message saying what p is instead. */
static int32_t lookup_used(pbl_bfc *b, const void *ptr, const char *what)
{
    uintptr_t p = (uintptr_t)ptr;
    int32_t h = pbl__bfc_used_find(b, p);
    if (h != PBL__BFC_NONE)
        return h;
    int32_t r = region_of(b, p);
    if (r < 0) {
        set_err(b, "%s: %s(%p): not an address in any region of this pool (never allocated here)",
                b->name, what, ptr);
        return PBL__BFC_NONE;
    }
    for (int32_t c = b->regions[r].first; c != PBL__BFC_NONE; c = b->chunks[c].next) {
        const pbl__bfc_chunk *k = &b->chunks[c];
        if (p - k->ptr >= k->size)
            continue;
        if (k->ptr == p)
            set_err(b, "%s: %s(%p): a free chunk of %zu bytes (already freed?)", b->name, what,
                    ptr, k->size);
        else
            set_err(b, "%s: %s(%p): %zu bytes inside the %s chunk at %p (not the start of an "
                       "allocation)",
                    b->name, what, ptr, (size_t)(p - k->ptr), k->in_use ? "used" : "free",
                    (void *)k->ptr);
        break;
    }
    return PBL__BFC_NONE;
}

PBL__API pbl_status pbl_bfc_free(pbl_bfc *b, void *ptr)
{
    if (!b)
        return PBL_ERR_INVALID_ARG;
    if (!ptr)
        return PBL_OK;
    pthread_mutex_lock(&b->mu);
    int32_t h = lookup_used(b, ptr, "free");
    if (h == PBL__BFC_NONE) {
        b->st.n_bad_frees++;
        pthread_mutex_unlock(&b->mu);
        return PBL_ERR_INVALID_ARG;
    }
    pbl__bfc_chunk *c = &b->chunks[h];
    int64_t id = c->id;
    size_t requested = c->requested;
    pbl__bfc_used_remove(b, h);
    b->st.in_use -= c->size;
    b->st.requested_in_use -= requested;
    b->st.n_live--;
    b->st.n_frees++;
    c->in_use = 0;
    c->requested = 0;
    c->id = 0;

    /* coalesce: the right neighbour into h, then h into the left neighbour */
    int32_t n = c->next;
    if (n != PBL__BFC_NONE && !b->chunks[n].in_use) {
        pbl__bfc_bin_remove(b, n);
        c->size += b->chunks[n].size;
        c->next = b->chunks[n].next;
        if (c->next != PBL__BFC_NONE)
            b->chunks[c->next].prev = h;
        chunk_release(b, n);
        b->st.n_merges++;
    }
    int32_t l = c->prev;
    if (l != PBL__BFC_NONE && !b->chunks[l].in_use) {
        pbl__bfc_bin_remove(b, l);
        pbl__bfc_chunk *lc = &b->chunks[l];
        lc->size += c->size;
        lc->next = c->next;
        if (lc->next != PBL__BFC_NONE)
            b->chunks[lc->next].prev = l;
        chunk_release(b, h);
        h = l;
        b->st.n_merges++;
    }
    pbl__bfc_bin_insert(b, h);
    if (b->trace)
        fprintf(b->trace, "free,%" PRId64 ",%zu\n", id, requested);
    if (b->trace_fn)
        b->trace_fn(b->trace_ctx, 'f', id, requested);
    pthread_mutex_unlock(&b->mu);
    return PBL_OK;
}

PBL__API pbl_status pbl_bfc_size(pbl_bfc *b, const void *ptr, size_t *requested, size_t *chunk)
{
    if (!b || !ptr)
        return PBL_ERR_INVALID_ARG;
    pthread_mutex_lock(&b->mu);
    int32_t h = lookup_used(b, ptr, "size");
    if (h != PBL__BFC_NONE) {
        if (requested)
            *requested = b->chunks[h].requested;
        if (chunk)
            *chunk = b->chunks[h].size;
    }
    pthread_mutex_unlock(&b->mu);
    return h != PBL__BFC_NONE ? PBL_OK : PBL_ERR_INVALID_ARG;
}
