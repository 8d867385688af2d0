/* Occupied address space over time (graph/planner/index/spacetime.h). */
#include <string.h>

#include "graph/planner/index/spacetime.h"
#include "graph/planner/plan_internal.h"

pbl_status pbl__spacetime_init(pbl__spacetime *t, int32_t steps, const pbl_allocator *al)
{
    memset(t, 0, sizeof *t);
    t->allocator = al;
    t->steps = steps > 0 ? steps : 1;
    t->leaves = 1;
    while (t->leaves < t->steps)
        t->leaves *= 2;
    size_t bytes = 2 * (size_t)t->leaves * sizeof(pbl__ivset);
    t->cover = pbl__plan_alloc(al, bytes);
    if (t->cover)
        memset(t->cover, 0, bytes);
    t->sub = pbl__plan_alloc(al, bytes);
    if (t->sub)
        memset(t->sub, 0, bytes);
    if (!t->cover || !t->sub) {
        pbl__spacetime_free(t);
        return PBL_ERR_NOMEM;
    }
    return PBL_OK;
}

void pbl__spacetime_clear(pbl__spacetime *t)
{
    for (int32_t v = 0; v < 2 * t->leaves; v++)
        t->cover[v].n = t->sub[v].n = 0;
}

/* A pooled chunk: the link to the previous one, then spans. */
#define CHUNK_BYTES  ((size_t)256 * 1024)
#define CHUNK_HEADER sizeof(pbl__span) /* keeps the spans aligned */

/* A set's array: pooled ones (cap <= PBL__SPACETIME_POOLED) live in the chunks. */
static void set_free(pbl__spacetime *t, pbl__ivset *s)
{
    if (s->cap > PBL__SPACETIME_POOLED)
        pbl__plan_free(t->allocator, s->v, (size_t)s->cap * sizeof(pbl__span));
}

void pbl__spacetime_free(pbl__spacetime *t)
{
    size_t bytes = 2 * (size_t)t->leaves * sizeof(pbl__ivset);
    for (int32_t v = 0; t->cover && v < 2 * t->leaves; v++)
        set_free(t, &t->cover[v]);
    for (int32_t v = 0; t->sub && v < 2 * t->leaves; v++)
        set_free(t, &t->sub[v]);
    while (t->chunks) {
        void *prev;
        memcpy(&prev, t->chunks, sizeof prev);
        pbl__plan_free(t->allocator, t->chunks, CHUNK_BYTES);
        t->chunks = prev;
    }
    pbl__plan_free(t->allocator, t->cover, bytes);
    pbl__plan_free(t->allocator, t->sub, bytes);
    memset(t, 0, sizeof *t);
}

/* c spans (c <= PBL__SPACETIME_POOLED) from the pool; NULL when out of memory. */
static pbl__span *pool_take(pbl__spacetime *t, int32_t c)
{
    size_t need = (size_t)c * sizeof(pbl__span);
    if (!t->chunks || t->chunk_used + need > CHUNK_BYTES) {
        char *k = pbl__plan_alloc(t->allocator, CHUNK_BYTES);
        if (!k)
            return NULL;
        memcpy(k, &t->chunks, sizeof t->chunks);
        t->chunks = k;
        t->chunk_used = CHUNK_HEADER;
    }
    pbl__span *v = (pbl__span *)((char *)t->chunks + t->chunk_used);
    t->chunk_used += need;
    return v;
}

/* Room for need spans in a set's array (doubling; pooled while small). */
static int set_grow(pbl__spacetime *t, pbl__ivset *s, int32_t need)
{
    if (need <= s->cap)
        return 1;
    int32_t c = s->cap ? s->cap : 4;
    while (c < need)
        c *= 2;
    pbl__span *w = c <= PBL__SPACETIME_POOLED ? pool_take(t, c) : pbl__plan_alloc(t->allocator, (size_t)c * sizeof *w);
    if (!w)
        return 0;
    if (s->n)
        memcpy(w, s->v, (size_t)s->n * sizeof *w);
    set_free(t, s);
    s->v = w;
    s->cap = c;
    return 1;
}

static int grow(const pbl_allocator *al, pbl__span **v, int32_t *cap, int32_t need)
{
    if (need <= *cap)
        return 1;
    int32_t c = *cap ? *cap : 4;
    while (c < need)
        c *= 2;
    pbl__span *w = pbl__plan_alloc(al, (size_t)c * sizeof *w);
    if (!w)
        return 0;
    if (*cap)
        memcpy(w, *v, (size_t)*cap * sizeof *w);
    pbl__plan_free(al, *v, (size_t)*cap * sizeof **v);
    *v = w;
    *cap = c;
    return 1;
}

/* Adds [lo, hi) to a merged set: the intervals it meets or touches become one. */
static int ivset_add(pbl__spacetime *t, pbl__ivset *s, int64_t lo, int64_t hi)
{
    /* i: the first interval ending at or after lo; j: the first starting after hi */
    int32_t i = 0, j, a = 0, b = s->n;
    while (a < b) {
        int32_t m = a + (b - a) / 2;
        if (s->v[m].end < lo)
            a = m + 1;
        else
            b = m;
    }
    i = a;
    b = s->n;
    while (a < b) {
        int32_t m = a + (b - a) / 2;
        if (s->v[m].offset <= hi)
            a = m + 1;
        else
            b = m;
    }
    j = a;
    if (i < j) { /* merge s->v[i, j) with [lo, hi) into s->v[i] */
        if (s->v[i].offset < lo)
            lo = s->v[i].offset;
        if (s->v[j - 1].end > hi)
            hi = s->v[j - 1].end;
        s->v[i] = (pbl__span){ lo, hi };
        memmove(&s->v[i + 1], &s->v[j], (size_t)(s->n - j) * sizeof *s->v);
        s->n -= j - i - 1;
        return 1;
    }
    if (!set_grow(t, s, s->n + 1))
        return 0;
    memmove(&s->v[i + 1], &s->v[i], (size_t)(s->n - i) * sizeof *s->v);
    s->v[i] = (pbl__span){ lo, hi };
    s->n++;
    return 1;
}

static int add_rec(pbl__spacetime *t, int32_t v, int32_t lo, int32_t hi, int32_t a, int32_t b, int64_t off,
                   int64_t end)
{
    if (b <= lo || hi <= a)
        return 1;
    if (!ivset_add(t, &t->sub[v], off, end))
        return 0;
    if (a <= lo && hi <= b)
        return ivset_add(t, &t->cover[v], off, end);
    int32_t mid = lo + (hi - lo) / 2;
    return add_rec(t, 2 * v, lo, mid, a, b, off, end) && add_rec(t, 2 * v + 1, mid, hi, a, b, off, end);
}

pbl_status pbl__spacetime_add(pbl__spacetime *t, int32_t a, int32_t b, int64_t offset, int64_t end)
{
    return add_rec(t, 1, 0, t->leaves, a, b, offset, end) ? PBL_OK : PBL_ERR_NOMEM;
}

typedef struct query {
    const pbl__spacetime *t;
    pbl__span           **out;
    int32_t              *cap, *n;
    int32_t              *run, *n_runs;
} query;

static int take(query *q, const pbl__ivset *s)
{
    if (s->n == 0)
        return 1;
    if (!grow(q->t->allocator, q->out, q->cap, *q->n + s->n))
        return 0;
    q->run[(*q->n_runs)++] = *q->n;
    memcpy(*q->out + *q->n, s->v, (size_t)s->n * sizeof *s->v);
    *q->n += s->n;
    return 1;
}

static int query_rec(query *q, int32_t v, int32_t lo, int32_t hi, int32_t a, int32_t b)
{
    if (b <= lo || hi <= a || q->t->sub[v].n == 0)
        return 1;
    if (a <= lo && hi <= b)
        return take(q, &q->t->sub[v]);
    if (!take(q, &q->t->cover[v]))
        return 0;
    int32_t mid = lo + (hi - lo) / 2;
    return query_rec(q, 2 * v, lo, mid, a, b) && query_rec(q, 2 * v + 1, mid, hi, a, b);
}

pbl_status pbl__spacetime_query(const pbl__spacetime *t, int32_t a, int32_t b, pbl__span **out, int32_t *cap,
                                int32_t *n_out, int32_t run[PBL__SPACETIME_MAX_RUNS], int32_t *n_runs)
{
    *n_runs = 0;
    query q = { t, out, cap, n_out, run, n_runs };
    return query_rec(&q, 1, 0, t->leaves, a, b) ? PBL_OK : PBL_ERR_NOMEM;
}

void pbl__spacetime_merge_runs(pbl__span *a, pbl__span *tmp, int32_t n, int32_t *run, int32_t n_runs)
{
    pbl__span *from = a, *to = tmp;
    while (n_runs > 1) {
        int32_t k = 0;
        for (int32_t r = 0; r < n_runs; r += 2) {
            int32_t i = run[r], mid = r + 1 < n_runs ? run[r + 1] : n;
            int32_t j = mid, end = r + 2 < n_runs ? run[r + 2] : n, o = i;
            while (i < mid && j < end)
                to[o++] = from[j].offset < from[i].offset ? from[j++] : from[i++];
            while (i < mid)
                to[o++] = from[i++];
            while (j < end)
                to[o++] = from[j++];
            run[k++] = run[r];
        }
        n_runs = k;
        pbl__span *t = from;
        from = to;
        to = t;
    }
    if (from != a)
        memcpy(a, from, (size_t)n * sizeof *a);
}

pbl_status pbl__spacetime_taken(const pbl__spacetime *t, int32_t a, int32_t b, pbl__spacetime_scan *s,
                                const pbl__span **out, int32_t *n)
{
    int32_t run[PBL__SPACETIME_MAX_RUNS], n_runs;
    *n = 0;
    if (pbl__spacetime_query(t, a, b, &s->v, &s->cap, n, run, &n_runs) != PBL_OK)
        return PBL_ERR_NOMEM;
    if (*n > s->tmp_cap) {
        pbl__plan_free(t->allocator, s->tmp, (size_t)s->tmp_cap * sizeof *s->tmp);
        s->tmp_cap = s->cap;
        s->tmp = pbl__plan_alloc(t->allocator, (size_t)s->tmp_cap * sizeof *s->tmp);
        if (!s->tmp) {
            s->tmp_cap = 0;
            return PBL_ERR_NOMEM;
        }
    }
    pbl__spacetime_merge_runs(s->v, s->tmp, *n, run, n_runs);
    *out = s->v;
    return PBL_OK;
}

void pbl__spacetime_scan_free(pbl__spacetime_scan *s, const pbl_allocator *al)
{
    pbl__plan_free(al, s->v, (size_t)s->cap * sizeof *s->v);
    pbl__plan_free(al, s->tmp, (size_t)s->tmp_cap * sizeof *s->tmp);
    *s = (pbl__spacetime_scan){ 0 };
}

int64_t pbl__spans_smallest_gap(const pbl__span *taken, int32_t n, int64_t size)
{
    /* the gaps between the taken intervals are free over the whole lifetime */
    int64_t end = 0, best = -1, best_gap = INT64_MAX;
    for (int32_t k = 0; k < n; k++) {
        int64_t off = taken[k].offset;
        if (off >= end && off - end >= size && off - end < best_gap) {
            best_gap = off - end;
            best = end;
        }
        if (taken[k].end > end)
            end = taken[k].end;
    }
    return best >= 0 ? best : end;
}
