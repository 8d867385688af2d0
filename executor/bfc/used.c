/* The BFC pool's index of used chunks: address -> chunk record, for pbl_bfc_free.
 *
 * An open-addressing hash table of chunk handles with linear probing, kept at most half
 * full. Removal shifts the following run back instead of leaving tombstones, so lookups stay
 * short however many frees happen, and removing never allocates: a free cannot fail for want
 * of bookkeeping memory. Growing happens only on the allocation path, before anything else
 * changes (pbl__bfc_used_reserve). TensorFlow's RegionManager indexes every 256-byte slot of
 * every region instead (O(1), but host memory in proportion to the regions' size). */
#include <string.h>

#include "executor/bfc/bfc_internal.h"

static uint32_t home(const pbl_bfc *b, uintptr_t p)
{
    /* Fibonacci hashing of the 256-byte unit: chunk addresses are multiples of 256 */
    return (uint32_t)(((uint64_t)(p >> 8) * 0x9E3779B97F4A7C15ull) >> (64 - b->used_bits));
}

pbl_status pbl__bfc_used_reserve(pbl_bfc *b, int64_t n)
{
    if (b->used_cap && n * 2 <= (int64_t)b->used_cap)
        return PBL_OK;
    int bits = b->used_bits ? b->used_bits : 6;
    while (((int64_t)1 << bits) < n * 2)
        bits++;
    if (bits > 30)
        return PBL_ERR_NOMEM;
    uint32_t cap = (uint32_t)1 << bits;
    int32_t *t = pbl__mem_alloc(&b->mem, (size_t)cap * sizeof *t);
    if (!t)
        return PBL_ERR_NOMEM;
    memset(t, 0xFF, (size_t)cap * sizeof *t); /* all PBL__BFC_NONE */
    int32_t *old = b->used_tab;
    uint32_t old_cap = b->used_cap;
    b->used_tab = t;
    b->used_cap = cap;
    b->used_bits = bits;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i] != PBL__BFC_NONE)
            pbl__bfc_used_insert(b, old[i]);
    pbl__mem_free(&b->mem, old, (size_t)old_cap * sizeof *old);
    return PBL_OK;
}

void pbl__bfc_used_insert(pbl_bfc *b, int32_t h)
{
    uint32_t mask = b->used_cap - 1, i = home(b, b->chunks[h].ptr);
    while (b->used_tab[i] != PBL__BFC_NONE)
        i = (i + 1) & mask;
    b->used_tab[i] = h;
}

/* The slot holding the chunk that starts at p, or -1. */
static int64_t slot_of(const pbl_bfc *b, uintptr_t p)
{
    if (!b->used_cap)
        return -1;
    uint32_t mask = b->used_cap - 1;
    for (uint32_t i = home(b, p);; i = (i + 1) & mask) {
        int32_t h = b->used_tab[i];
        if (h == PBL__BFC_NONE)
            return -1;
        if (b->chunks[h].ptr == p)
            return i;
    }
}

int32_t pbl__bfc_used_find(const pbl_bfc *b, uintptr_t p)
{
    int64_t i = slot_of(b, p);
    return i < 0 ? PBL__BFC_NONE : b->used_tab[i];
}

void pbl__bfc_used_remove(pbl_bfc *b, int32_t h)
{
    int64_t at = slot_of(b, b->chunks[h].ptr);
    if (at < 0) /* not reached: h is in the table */
        return;
    uint32_t mask = b->used_cap - 1, i = (uint32_t)at, j = i;
    /* Backward shift: an entry further along the run moves into the hole unless its home lies
     * cyclically in (hole, entry], where the hole would cut it off from its home. */
    for (;;) {
        j = (j + 1) & mask;
        int32_t e = b->used_tab[j];
        if (e == PBL__BFC_NONE)
            break;
        uint32_t k = home(b, b->chunks[e].ptr);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            b->used_tab[i] = e;
            i = j;
        }
    }
    b->used_tab[i] = PBL__BFC_NONE;
}
