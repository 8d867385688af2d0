/*
 * mxnet: NNVM/MXNet's static memory planner — a reference-counting simulation of a pool of
 * shared storages (MXNet's src/nnvm/plan_memory.cc, class GraphAllocator; earlier
 * nnvm/src/pass/plan_memory.cc).
 *
 * Walk the steps in order. At each step first release the storages of the records whose
 * `last` is this step (a storage returns to the free pool when its reference count reaches
 * zero; pebble's liveness pass has already merged in-place pairs into one record, so here
 * every storage is held by one record at a time), then serve the records whose `first` is
 * this step, in record order:
 *
 *   - a request of `size` bytes matches a free storage whose size lies in
 *     [floor(size / range), size · range] (range = opt.mxnet_match_range, default 16);
 *   - first choice: the smallest free storage with size >= request; among equal sizes the
 *     one released earliest (std::multimap keeps equal keys in insertion order and MXNet
 *     walks forward from lower_bound(size));
 *   - else the largest free storage smaller than the request, grown to the request; among
 *     equal sizes the one released last (MXNet walks backward from lower_bound(size));
 *   - else a new storage of exactly the request.
 *
 * Range 1 therefore reuses only storages of exactly the requested size. The storages are
 * the result's shared objects, laid end to end by pbl__assignment_objects_to_offsets. With
 * opt.mxnet_sweep the simulation also runs with ranges 1, 2, 4, ... below the range (MXNet's
 * NNVM_AUTO_SEARCH_MATCH_RANGE) and keeps the smallest arena; ties go to the smaller range,
 * as in MXNet's loop.
 *
 * Differences from MXNet: MXNet serves one node's outputs largest first and frees a node's
 * inputs after allocating its outputs (an op reads its inputs while writing its outputs);
 * pebble's records already say that — an input read at step t lives until t + 1 — so a
 * step's releases come first and requests are served in record order. MXNet keys sizes as
 * element counts times 4 bytes; here sizes are the records' bytes. Range bounds are computed
 * in double, exact for sizes below 2^49.
 *
 * The free pool is MXNet's multimap keyed by size, built for speed: every storage's size is
 * one of the requested sizes, so sizes are ranked once; each rank holds a FIFO list of free
 * storages, and a 64-ary bitset over the ranks finds the next non-empty rank above or below
 * a size in O(log64 m) word operations (m distinct sizes).
 *
 * Complexity: O(n log n) time (two sorts, one binary search per record, O(log64 m) per pool
 * operation), O(n) memory; times the number of ranges tried with the sweep.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"

/* ---- a set of small integers in [0, m): a 64-ary tree of bitsets -------------------------- */

#define BS_MAX_LEVELS 7 /* 64^6 > 2^31 ranks */

typedef struct bitset {
    int       levels;
    int64_t   nwords[BS_MAX_LEVELS]; /* words at each level; the top level has one */
    uint64_t *w[BS_MAX_LEVELS];      /* level 0: one bit per rank; level k: one bit per word below */
} bitset;

/* Words needed for m bits, all levels together. */
static size_t bs_words(int64_t m)
{
    size_t total = 0;
    int64_t bits = m > 0 ? m : 1;
    do {
        int64_t words = (bits + 63) / 64;
        total += (size_t)words;
        bits = words;
    } while (bits > 1);
    return total;
}

static void bs_init(bitset *b, int64_t m, uint64_t *store)
{
    int64_t bits = m > 0 ? m : 1;
    b->levels = 0;
    do {
        int64_t words = (bits + 63) / 64;
        b->nwords[b->levels] = words;
        b->w[b->levels] = store;
        memset(store, 0, (size_t)words * sizeof *store);
        store += words;
        b->levels++;
        bits = words;
    } while (bits > 1);
}

static void bs_set(bitset *b, int64_t i)
{
    for (int lv = 0; lv < b->levels; lv++) {
        uint64_t *word = &b->w[lv][i >> 6];
        int was_empty = *word == 0;
        *word |= UINT64_C(1) << (i & 63);
        if (!was_empty)
            return; /* the levels above already mark this word */
        i >>= 6;
    }
}

static void bs_clear(bitset *b, int64_t i)
{
    for (int lv = 0; lv < b->levels; lv++) {
        uint64_t *word = &b->w[lv][i >> 6];
        *word &= ~(UINT64_C(1) << (i & 63));
        if (*word != 0)
            return;
        i >>= 6;
    }
}

/* The smallest member >= i, or -1. */
static int64_t bs_next(const bitset *b, int64_t i)
{
    int lv;
    for (lv = 0; lv < b->levels; lv++) {
        int64_t wi = i >> 6;
        if (wi >= b->nwords[lv])
            return -1;
        uint64_t bits = b->w[lv][wi] & (~UINT64_C(0) << (i & 63));
        if (bits) {
            i = (wi << 6) | __builtin_ctzll(bits);
            break;
        }
        i = wi + 1; /* the next word, as a bit of the level above */
    }
    if (lv == b->levels)
        return -1;
    while (lv-- > 0)
        i = (i << 6) | __builtin_ctzll(b->w[lv][i]);
    return i;
}

/* The largest member <= i, or -1. */
static int64_t bs_prev(const bitset *b, int64_t i)
{
    int lv;
    for (lv = 0; lv < b->levels; lv++) {
        if (i < 0)
            return -1;
        int64_t wi = i >> 6;
        int bit = (int)(i & 63);
        uint64_t mask = bit == 63 ? ~UINT64_C(0) : (UINT64_C(1) << (bit + 1)) - 1;
        uint64_t bits = b->w[lv][wi] & mask;
        if (bits) {
            i = (wi << 6) | (63 - __builtin_clzll(bits));
            break;
        }
        i = wi - 1;
    }
    if (lv == b->levels)
        return -1;
    while (lv-- > 0)
        i = (i << 6) | (63 - __builtin_clzll(b->w[lv][i]));
    return i;
}

/* ---- the simulation ---------------------------------------------------------------------- */

typedef struct sim {
    int32_t  n;
    int32_t  m;          /* distinct sizes */
    int64_t *key;        /* [m] the distinct sizes, ascending */
    int32_t *rank;       /* [n] per record: index of its size in key */
    const pbl__key2 *by_first; /* [n] records by (first, index) */
    const pbl__key2 *by_last;  /* [n] records by (last, index) */
    int32_t *head;       /* [m] per rank: earliest-released free storage, or -1 */
    int32_t *tail;       /* [m] per rank: latest-released free storage, or -1 */
    int32_t *next;       /* [n] per storage: the storage released after it at its rank */
    int32_t *prev;       /* [n] per storage: the one released before it */
    int32_t *srank;      /* [n] per storage: rank of its size */
    bitset   nonempty;   /* ranks with a free storage */
} sim;

static void pool_push(sim *s, int32_t st)
{
    int32_t r = s->srank[st];
    s->next[st] = -1;
    s->prev[st] = s->tail[r];
    if (s->tail[r] >= 0)
        s->next[s->tail[r]] = st;
    else
        s->head[r] = st;
    s->tail[r] = st;
    if (s->head[r] == st)
        bs_set(&s->nonempty, r);
}

static void pool_take(sim *s, int32_t st)
{
    int32_t r = s->srank[st];
    if (s->prev[st] >= 0)
        s->next[s->prev[st]] = s->next[st];
    else
        s->head[r] = s->next[st];
    if (s->next[st] >= 0)
        s->prev[s->next[st]] = s->prev[st];
    else
        s->tail[r] = s->prev[st];
    if (s->head[r] < 0)
        bs_clear(&s->nonempty, r);
}

/* One simulation with the given range: object[] per record, object_size[] per storage.
 * Returns the number of storages. */
static int32_t simulate(sim *s, const pbl_usage_record *r, double range, int32_t *object, int64_t *object_size)
{
    int32_t n = s->n, n_storages = 0;
    for (int32_t k = 0; k < s->m; k++)
        s->head[k] = s->tail[k] = -1;
    bs_init(&s->nonempty, s->m, s->nonempty.w[0]);

    int32_t p = 0, q = 0; /* next release in by_last, next request in by_first */
    while (q < n) {
        int64_t t = s->by_first[q].k;
        if (p < n && s->by_last[p].k < t)
            t = s->by_last[p].k;
        /* releases at step t: each record held its storage's only reference */
        for (; p < n && s->by_last[p].k == t; p++)
            pool_push(s, object[s->by_last[p].idx]);
        /* requests at step t, in record order */
        for (; q < n && s->by_first[q].k == t; q++) {
            int32_t i = s->by_first[q].idx, want = s->rank[i];
            int64_t size = r[i].size;
            int32_t st = -1;
            int64_t k = bs_next(&s->nonempty, want);
            if (k >= 0 && (double)s->key[k] <= (double)size * range) {
                st = s->head[k];
            } else {
                k = bs_prev(&s->nonempty, (int64_t)want - 1);
                if (k >= 0 && (double)s->key[k] >= floor((double)size / range))
                    st = s->tail[k];
            }
            if (st >= 0) {
                pool_take(s, st);
                if (s->key[s->srank[st]] < size) { /* grow it to the request */
                    s->srank[st] = want;
                    object_size[st] = size;
                }
            } else {
                st = n_storages++;
                s->srank[st] = want;
                object_size[st] = size;
            }
            object[i] = st;
        }
    }
    return n_storages;
}

/* Carves the next array of `count` items of `item` bytes out of a scratch block. */
static void *carve(char **at, size_t count, size_t item)
{
    void *p = *at;
    size_t bytes = (count * item + 7) & ~(size_t)7;
    *at += bytes;
    return p;
}

pbl_status pbl__plan_mxnet(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    int32_t n = in->n;
    /* scratch: the sim's arrays and one simulation's result */
    size_t nn = (size_t)n, words = bs_words(n);
    size_t bytes = 8 * 16 + nn * (sizeof(int64_t) + sizeof(int32_t) + sizeof(pbl__key2) + 2 * sizeof(int32_t) +
                                  3 * sizeof(int32_t) + sizeof(int32_t) + sizeof(int64_t)) +
                   words * sizeof(uint64_t);
    char *block = pbl__plan_alloc(al, bytes), *at = block;
    if (!block)
        return PBL_ERR_NOMEM;
    sim s = { .n = n, .by_first = in->by_first, .by_last = in->by_last };
    s.key = carve(&at, nn, sizeof *s.key);
    s.rank = carve(&at, nn, sizeof *s.rank);
    pbl__key2 *by_size = carve(&at, nn, sizeof *by_size);
    s.head = carve(&at, nn, sizeof *s.head);
    s.tail = carve(&at, nn, sizeof *s.tail);
    s.next = carve(&at, nn, sizeof *s.next);
    s.prev = carve(&at, nn, sizeof *s.prev);
    s.srank = carve(&at, nn, sizeof *s.srank);
    int32_t *try_object = carve(&at, nn, sizeof *try_object);
    int64_t *try_size = carve(&at, nn, sizeof *try_size);
    s.nonempty.w[0] = carve(&at, words, sizeof(uint64_t));

    /* rank the sizes */
    const pbl_usage_record *r = in->r;
    for (int32_t i = 0; i < n; i++)
        by_size[i] = (pbl__key2){ r[i].size, i };
    qsort(by_size, nn, sizeof *by_size, pbl__key2_cmp);
    s.m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s.m == 0 || s.key[s.m - 1] != by_size[i].k)
            s.key[s.m++] = by_size[i].k;
        s.rank[by_size[i].idx] = s.m - 1;
    }

    /* ranges: 1, 2, 4, ... below the range when sweeping, then the range itself */
    double range = in->opt.mxnet_match_range;
    int have = 0;
    int64_t best = 0;
    double tryr = in->opt.mxnet_sweep ? 1.0 : range;
    for (;;) {
        int32_t k = simulate(&s, r, tryr, try_object, try_size);
        int64_t arena = pbl__objects_arena(try_size, k, in->opt.align);
        if (!have || arena < best) {
            memcpy(out->object, try_object, nn * sizeof *try_object);
            memcpy(out->object_size, try_size, (size_t)k * sizeof *try_size);
            out->n_objects = k;
            best = arena;
            have = 1;
        }
        if (tryr >= range)
            break;
        tryr = tryr * 2 < range ? tryr * 2 : range;
    }
    pbl__plan_free(al, block, bytes);
    return PBL_OK;
}
