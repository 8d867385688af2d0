/*
 * The exact planner's decision search: is there a packing of the records within capacity C?
 * A depth-first branch and bound over "canonical" packings, written for pebble after reading
 * (no code taken from):
 *
 *   - M. D. Moffitt, "MiniMalloc: A Lightweight Memory Allocator for Hardware-Accelerated
 *     Machine Learning", ASPLOS '23, doi 10.1145/3623278.3624752, and its public repository
 *     github.com/google/minimalloc (Apache-2.0): canonical solutions, dominance by gaps,
 *     section inference, temporal decomposition, "hatless" buffers, round-robin preorders
 *     with growing node limits.
 *   - M. Maas et al., "TelaMalloc: Efficient On-Chip Memory Allocation for Production Machine
 *     Learning Accelerators", ASPLOS '23: place the most contended buffers first.
 *   - The single-machine bound with release dates (1|r_j|C_max: order jobs by release date),
 *     used here, at two of its points, as a per-section lower bound.
 *   - Transposition tables (memoised search states), as in game-tree search and in skyline
 *     methods for rectangle packing.
 *
 * The argument, in the terms used below. Any packing can be pushed down, one buffer at a time,
 * until no buffer can move to a lower free (aligned) offset; call such a packing stable. List
 * a stable packing's buffers by (offset, preorder rank): placing them in that order, each lands
 * exactly on minoff — the aligned top of the placed buffers it overlaps in time (0 if none).
 * So the search places, one after another, some unplaced buffer at its minoff, with (offset,
 * rank) increasing along the path. Pruning, each sound for stable packings:
 *
 *   - canonical order: a buffer whose minoff is below the last placement's offset x (or at x,
 *     ranked before it) is "behind": it cannot be placed until something raises its minoff,
 *     and if nothing unplaced overlaps it, never — the branch fails ("stuck"); a candidate
 *     that overlaps nothing unplaced must go first or never ("hatless");
 *   - dominance: if some unplaced buffer u fits under its own minoff + size, no buffer may be
 *     placed at or above that height (u could be moved down into the gap) — so candidates lie
 *     strictly below min(minoff[u] + size[u]);
 *   - sections: time is cut into the maximal sets of buffers live together (the maximal
 *     cliques of the interval graph). The unplaced buffers of a section stack in one column,
 *     each at or above its minoff, and all at or above the next placement's offset: a
 *     candidate whose offset leaves some section's column no room is never tried, and after a
 *     placement the sections it touched are checked against the release-date bound;
 *   - twins: buffers with the same size and sections are interchangeable; they go in index
 *     order;
 *   - decomposition: when no unplaced buffer crosses the boundary between two sections, the
 *     two sides are independent and are solved one after the other; a failure on one side
 *     fails the placement that split them, without retrying the other side;
 *   - memo: a component whose search failed is remembered by its state (which buffers are
 *     left, their minoffs, which are behind, x); meeting the same state again — reached through
 *     a different arrangement underneath — fails at once.
 *
 * The search is iterative (an explicit stack of OR frames, "which buffer next", and AND
 * frames, "every component in turn") with a trail that undoes every change on backtrack.
 * A run stops at a node limit; the caller's budget restarts it with each preorder in turn and
 * a doubled limit, as MiniMalloc does; the memo carries over, so a restart resumes rather than
 * repeats. When the three fixed preorders keep failing (the limit past PERTURB_AFTER
 * placements per buffer), each round adds three perturbed ones (their first key scaled by a
 * factor drawn per buffer from a seeded hash): restarting the same three orders mostly
 * resumes the same descent, while heavy-tailed searches like this one are settled by
 * diversified restarts (MiniMalloc's challenging instances at --time-limit 30: D 1,033,216
 * without them, 1,024,000 with; J 1,041,408 and 1,034,240). PERTURB_AFTER is per buffer, so
 * it scales with the instance: the limit starts at about 2n and doubles, so at 64n the fixed
 * orders have failed five rounds; decisions settled sooner never see a perturbed order. Nothing depends on the clock but the deadline, so for a
 * given node budget the result is always the same.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/planner/strategies/exact.h"

typedef struct trail_entry {
    int64_t *at;
    int64_t  old;
} trail_entry;

enum { FRAME_OR, FRAME_AND };

typedef struct frame {
    int32_t kind;
    int32_t sa, sb;               /* OR: the component is sections [sa, sb) */
    int64_t x;                    /* OR: offset of this component's last placement */
    int64_t last_pre;             /* OR: its preorder rank (-1: none yet) */
    int32_t cand_at, cand_n, ci;  /* OR: candidates in the pool, the next to try */
    size_t  mark;                 /* OR: trail length before the current candidate */
    uint64_t key[2];              /* OR: the component's state, for the memo */
    int32_t comp_at, comp_n, cj;  /* AND: components (pairs sa, sb) in the pool, the next */
} frame;

enum { N_PREORDERS = 3 };

/* A failed component state: two independent 64-bit hashes (key[0] == 0: an empty slot). */
typedef struct memo_entry {
    uint64_t key[2];
} memo_entry;

#define PERTURB_AFTER 64 /* see pbl__exact_decide */
#define MEMO_MIN    4096
#define MEMO_MAX    (1u << 20) /* entries: 16 MiB at most */
#define MEMO_PROBES 16

struct pbl__exact {
    const pbl_allocator *al;
    int32_t n, n_sec;
    int64_t align;
    /* per buffer, in internal order (sorted by first section): */
    int32_t *orig;      /* the caller's index */
    int64_t *size;
    int32_t *slo, *shi; /* sections [slo, shi) */
    double  *area;      /* size x lifetime, for a preorder */
    int64_t *width;     /* lifetime, last - first */
    int32_t *adj_at;    /* n + 1: overlap lists */
    int32_t *adj;
    int64_t *pre;       /* preorder rank under the current heuristic (within a component) */
    int64_t *asize;     /* size rounded up to the alignment */
    int32_t *twin;      /* the previous buffer with the same size and sections, or -1 */
    /* per section: */
    int32_t *sec_at;    /* n_sec + 1: member lists, the unplaced members first */
    int32_t *sec_mem;
    int32_t *mbase;     /* n: buffer k's slot for section s is mpos[mbase[k] + s - slo[k]] */
    int32_t *mpos;      /* where in sec_mem buffer k sits in section s */
    int32_t *first_at;  /* n_sec + 1: first buffer whose slo >= s */
    int64_t *total0;    /* sum of member sizes */
    int64_t *atotal0;   /* sum of member asizes */
    int64_t *maxpad;    /* largest asize - size among the members */
    int64_t *cuts0;     /* n_sec: buffers crossing the boundary after section s */
    /* search state, undone through the trail */
    int64_t *minoff, *offset, *rem, *ucnt, *cuts; /* rem: unplaced asizes per section; ucnt:
                                                     unplaced members, at the front of its list */
    int64_t *udeg;      /* unplaced buffers each buffer overlaps */
    uint64_t *salt;     /* per buffer, for hashing states */
    /* scratch */
    int64_t  cap;       /* the capacity of the current run */
    int32_t *tight;     /* n_sec: scratch for push_or */
    int32_t *low_hint;  /* n_sec: a member of the section with a low minoff (see section_bound) */
    int32_t *order;     /* n: for building preorders */
    pbl__key4 *keys;    /* n: the same */
    int      h;         /* the preorder heuristic of the current run (>= N_PREORDERS: a
                           perturbed one, see prepbl__key4) */
    uint64_t n_perturbed; /* perturbed runs so far: each one's seed (deterministic) */
    frame   *frames;
    int32_t  n_frames, cap_frames;
    trail_entry *trail;
    size_t   trail_n, trail_cap;
    int32_t *cand;
    size_t   cand_n, cand_cap;
    int32_t *comp;
    size_t   comp_n, comp_cap;
    memo_entry *memo;   /* failed component states (a lossy cache: a miss only costs time) */
    size_t   memo_cap, memo_n;
    int64_t  memo_at;   /* the capacity the states failed at (they fail below it too) */
    /* the fixed-size arrays above live in one block */
    void    *block;
    size_t   block_bytes;
};

/* ---- growable pools ---------------------------------------------------------------------- */

static int grow(const pbl_allocator *al, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *q = pbl__plan_alloc(al, nc * elem);
    if (!q)
        return 0;
    if (*p) {
        memcpy(q, *p, *cap * elem);
        pbl__plan_free(al, *p, *cap * elem);
    }
    *p = q;
    *cap = nc;
    return 1;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* ---- preparation ------------------------------------------------------------------------- */

/* carve: hand out aligned pieces of one block (or count the bytes when base is NULL) */
static void *carve(char *base, size_t *at, size_t bytes)
{
    size_t a = (*at + 15) & ~(size_t)15;
    *at = a + bytes;
    return base ? base + a : NULL;
}

static void carve_all(pbl__exact *e, char *base, size_t *at, int64_t n_adj, int64_t n_mem)
{
    size_t n = (size_t)e->n, ns = (size_t)e->n_sec;
    e->orig = carve(base, at, n * sizeof(int32_t));
    e->size = carve(base, at, n * sizeof(int64_t));
    e->slo = carve(base, at, n * sizeof(int32_t));
    e->shi = carve(base, at, n * sizeof(int32_t));
    e->area = carve(base, at, n * sizeof(double));
    e->width = carve(base, at, n * sizeof(int64_t));
    e->adj_at = carve(base, at, (n + 1) * sizeof(int32_t));
    e->adj = carve(base, at, (size_t)n_adj * sizeof(int32_t));
    e->pre = carve(base, at, n * sizeof(int64_t));
    e->asize = carve(base, at, n * sizeof(int64_t));
    e->twin = carve(base, at, n * sizeof(int32_t));
    e->sec_at = carve(base, at, (ns + 1) * sizeof(int32_t));
    e->sec_mem = carve(base, at, (size_t)n_mem * sizeof(int32_t));
    e->mbase = carve(base, at, n * sizeof(int32_t));
    e->mpos = carve(base, at, (size_t)n_mem * sizeof(int32_t));
    e->first_at = carve(base, at, (ns + 1) * sizeof(int32_t));
    e->total0 = carve(base, at, ns * sizeof(int64_t));
    e->atotal0 = carve(base, at, ns * sizeof(int64_t));
    e->maxpad = carve(base, at, ns * sizeof(int64_t));
    e->cuts0 = carve(base, at, ns * sizeof(int64_t));
    e->minoff = carve(base, at, n * sizeof(int64_t));
    e->offset = carve(base, at, n * sizeof(int64_t));
    e->rem = carve(base, at, ns * sizeof(int64_t));
    e->ucnt = carve(base, at, ns * sizeof(int64_t));
    e->cuts = carve(base, at, ns * sizeof(int64_t));
    e->udeg = carve(base, at, n * sizeof(int64_t));
    e->tight = carve(base, at, ns * sizeof(int32_t));
    e->low_hint = carve(base, at, ns * sizeof(int32_t));
    e->salt = carve(base, at, n * sizeof(uint64_t));
    e->order = carve(base, at, n * sizeof(int32_t));
    e->keys = carve(base, at, n * sizeof(pbl__key4));
    e->frames = carve(base, at, (2 * n + 4) * sizeof(frame));
}

/* Buffers are sorted by first section, so the ones after i that meet it are i+1 .. j-1, j the
 * first to start at or after i's last section. */
static int32_t later_end(const pbl__exact *e, int32_t i)
{
    int32_t lo = i + 1, hi = e->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (e->slo[mid] < e->shi[i])
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

pbl_status pbl__exact_create(const pbl_usage_record *r, int32_t n, int64_t align, const pbl_allocator *al,
                             pbl__exact **out)
{
    *out = NULL;
    if (n <= 0)
        return PBL_ERR_INVALID_ARG;
    int64_t sum = 0;
    for (int32_t i = 0; i < n; i++) {
        if (r[i].size > (INT64_C(1) << 60) - sum) /* sums of sizes must not overflow */
            return PBL_ERR_UNSUPPORTED;
        sum += r[i].size;
    }
    pbl__exact *e = pbl__plan_alloc(al, sizeof *e);
    if (!e)
        return PBL_ERR_NOMEM;
    memset(e, 0, sizeof *e);
    e->al = al;
    pbl_status st = PBL_ERR_NOMEM;
    size_t nt_bytes = (size_t)n * 2 * sizeof(int64_t);
    int64_t *t = pbl__plan_alloc(al, nt_bytes);
    uint8_t *seg_start = pbl__plan_alloc(al, (size_t)n * 2);
    uint8_t *seg_end = pbl__plan_alloc(al, (size_t)n * 2);
    int32_t *sec_before = pbl__plan_alloc(al, (size_t)n * 2 * sizeof(int32_t));
    pbl__key4 *keys = pbl__plan_alloc(al, (size_t)n * sizeof(pbl__key4));
    if (!t || !seg_start || !seg_end || !sec_before || !keys)
        goto done;
    e->n = n;
    e->align = align > 0 ? align : 1;

    /* distinct times; segment i is [t[i], t[i+1]); it is a section (a maximal clique) when a
     * record starts at t[i] and one ends at t[i+1] */
    for (int32_t i = 0; i < n; i++) {
        t[2 * i] = r[i].first;
        t[2 * i + 1] = r[i].last;
    }
    qsort(t, (size_t)n * 2, sizeof *t, pbl__i64_cmp);
    int32_t nt = 0;
    for (int32_t i = 0; i < 2 * n; i++)
        if (nt == 0 || t[nt - 1] != t[i])
            t[nt++] = t[i];
    memset(seg_start, 0, (size_t)nt);
    memset(seg_end, 0, (size_t)nt);
    for (int32_t i = 0; i < n; i++) {
        seg_start[pbl__search_i64(t, nt, r[i].first, 0)] = 1;
        seg_end[pbl__search_i64(t, nt, r[i].last, 0) - 1] = 1;
    }
    sec_before[0] = 0;
    for (int32_t i = 0; i + 1 < nt; i++)
        sec_before[i + 1] = sec_before[i] + (seg_start[i] && seg_end[i]);
    e->n_sec = sec_before[nt - 1];

    /* internal order: by first section, then last, then the caller's index */
    for (int32_t i = 0; i < n; i++) {
        int32_t lo = sec_before[pbl__search_i64(t, nt, r[i].first, 0)], hi = sec_before[pbl__search_i64(t, nt, r[i].last, 0)];
        keys[i] = (pbl__key4){ lo, hi, 0, i };
    }
    qsort(keys, (size_t)n, sizeof *keys, pbl__key4_cmp);
    /* overlaps: buffers share a section exactly when their lifetimes meet, so buffer i meets
     * the later ones whose first section is below its last */
    int64_t n_adj = 0, n_mem = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t lo = i + 1, hi = n; /* the first later buffer starting at or after i's end */
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (keys[mid].k1 < keys[i].k2)
                lo = mid + 1;
            else
                hi = mid;
        }
        n_adj += 2 * (int64_t)(lo - i - 1);
        n_mem += keys[i].k2 - keys[i].k1;
    }
    if (n_adj > 2 * (int64_t)PBL__EXACT_MAX_PAIRS || n_mem > PBL__EXACT_MAX_PAIRS) {
        st = PBL_ERR_UNSUPPORTED;
        goto done;
    }
    size_t bytes = 0;
    carve_all(e, NULL, &bytes, n_adj, n_mem);
    e->block = pbl__plan_alloc(al, bytes);
    if (!e->block)
        goto done;
    e->block_bytes = bytes;
    bytes = 0;
    carve_all(e, e->block, &bytes, n_adj, n_mem);
    e->cap_frames = 2 * n + 4;

    for (int32_t k = 0; k < n; k++) {
        const pbl_usage_record *rec = &r[keys[k].idx];
        e->orig[k] = keys[k].idx;
        e->size[k] = rec->size;
        e->slo[k] = (int32_t)keys[k].k1;
        e->shi[k] = (int32_t)keys[k].k2;
        e->area[k] = (double)rec->size * (double)(rec->last - rec->first);
        e->width[k] = rec->last - rec->first;
        e->salt[k] = mix64((uint64_t)k + UINT64_C(0xD6E8FEB86659FD93));
        e->asize[k] = (rec->size + e->align - 1) / e->align * e->align;
    }
    /* twins: buffers with the same size and sections are interchangeable, so they are placed
     * in index order (the buffers are sorted by sections, so twins share a run) */
    for (int32_t k = 0, run0 = 0; k < n; k++) {
        if (e->slo[k] != e->slo[run0] || e->shi[k] != e->shi[run0])
            run0 = k;
        e->twin[k] = -1;
        for (int32_t j = k - 1; j >= run0; j--)
            if (e->size[j] == e->size[k]) {
                e->twin[k] = j;
                break;
            }
    }
    /* overlap lists (CSR): count, then fill both directions */
    memset(e->adj_at, 0, ((size_t)n + 1) * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        int32_t j = later_end(e, i);
        e->adj_at[i + 1] += j - i - 1;
        for (int32_t k = i + 1; k < j; k++)
            e->adj_at[k + 1]++;
    }
    for (int32_t i = 0; i < n; i++)
        e->adj_at[i + 1] += e->adj_at[i];
    int32_t *fill = e->order; /* scratch: next free slot per buffer */
    for (int32_t i = 0; i < n; i++)
        fill[i] = e->adj_at[i];
    for (int32_t i = 0; i < n; i++) {
        int32_t j = later_end(e, i);
        for (int32_t k = i + 1; k < j; k++) {
            e->adj[fill[i]++] = k;
            e->adj[fill[k]++] = i;
        }
    }
    /* section members, totals, first buffer per section, cuts */
    int32_t ns = e->n_sec;
    memset(e->sec_at, 0, ((size_t)ns + 1) * sizeof(int32_t));
    memset(e->total0, 0, (size_t)ns * sizeof(int64_t));
    memset(e->atotal0, 0, (size_t)ns * sizeof(int64_t));
    memset(e->maxpad, 0, (size_t)ns * sizeof(int64_t));
    memset(e->cuts0, 0, (size_t)ns * sizeof(int64_t));
    for (int32_t k = 0; k < n; k++)
        for (int32_t s = e->slo[k]; s < e->shi[k]; s++) {
            e->sec_at[s + 1]++;
            e->total0[s] += e->size[k];
            e->atotal0[s] += e->asize[k];
            if (e->asize[k] - e->size[k] > e->maxpad[s])
                e->maxpad[s] = e->asize[k] - e->size[k];
            if (s + 1 < e->shi[k])
                e->cuts0[s]++;
        }
    for (int32_t s = 0; s < ns; s++)
        e->sec_at[s + 1] += e->sec_at[s];
    for (int32_t k = 0, s = 0; s <= ns; s++) {
        while (k < n && e->slo[k] < s)
            k++;
        e->first_at[s] = k;
    }
    {
        /* members in buffer order; a second pass with a moving cursor per section */
        int32_t *cur = pbl__plan_alloc(al, (size_t)(ns ? ns : 1) * sizeof(int32_t));
        if (!cur)
            goto done;
        for (int32_t s = 0; s < ns; s++)
            cur[s] = e->sec_at[s];
        for (int32_t k = 0, mb = 0; k < n; k++) {
            e->mbase[k] = mb;
            for (int32_t s = e->slo[k]; s < e->shi[k]; s++) {
                e->mpos[mb++] = cur[s];
                e->sec_mem[cur[s]++] = k;
            }
        }
        pbl__plan_free(al, cur, (size_t)(ns ? ns : 1) * sizeof(int32_t));
    }
    st = PBL_OK;
done:
    pbl__plan_free(al, t, nt_bytes);
    pbl__plan_free(al, seg_start, (size_t)n * 2);
    pbl__plan_free(al, seg_end, (size_t)n * 2);
    pbl__plan_free(al, sec_before, (size_t)n * 2 * sizeof(int32_t));
    pbl__plan_free(al, keys, (size_t)n * sizeof(pbl__key4));
    if (st == PBL_OK)
        *out = e;
    else
        pbl__exact_destroy(e);
    return st;
}

void pbl__exact_destroy(pbl__exact *e)
{
    if (!e)
        return;
    const pbl_allocator *al = e->al;
    pbl__plan_free(al, e->trail, e->trail_cap * sizeof(trail_entry));
    pbl__plan_free(al, e->cand, e->cand_cap * sizeof(int32_t));
    pbl__plan_free(al, e->comp, e->comp_cap * sizeof(int32_t));
    pbl__plan_free(al, e->memo, e->memo_cap * sizeof(memo_entry));
    pbl__plan_free(al, e->block, e->block_bytes);
    pbl__plan_free(al, e, sizeof *e);
}

void pbl__exact_take_scratch(pbl__exact *e, pbl__exact *from)
{
    if (!e || !from || e->al != from->al)
        return;
    if (from->trail_cap > e->trail_cap) {
        pbl__plan_free(e->al, e->trail, e->trail_cap * sizeof(trail_entry));
        e->trail = from->trail;
        e->trail_cap = from->trail_cap;
        from->trail = NULL;
        from->trail_cap = 0;
    }
    if (from->cand_cap > e->cand_cap) {
        pbl__plan_free(e->al, e->cand, e->cand_cap * sizeof(int32_t));
        e->cand = from->cand;
        e->cand_cap = from->cand_cap;
        from->cand = NULL;
        from->cand_cap = 0;
    }
    if (from->comp_cap > e->comp_cap) {
        pbl__plan_free(e->al, e->comp, e->comp_cap * sizeof(int32_t));
        e->comp = from->comp;
        e->comp_cap = from->comp_cap;
        from->comp = NULL;
        from->comp_cap = 0;
    }
}

/* ---- preorders --------------------------------------------------------------------------- */

/* Rank buffers, larger first, ties by index, by MiniMalloc's three default keys: 0 lifetime,
 * area, total (the most contended section a buffer lives in, TelaMalloc's "contention");
 * 1 total, area, lifetime; 2 total, lifetime, area; and for the greedy only, 3 size,
 * lifetime, total (TFLite's greedy by size). */
static pbl__key4 prepbl__key4(const pbl__exact *e, int h, int32_t k, const int64_t *totals)
{
    int64_t total = 0;
    for (int32_t s = e->slo[k]; s < e->shi[k]; s++)
        if (totals[s] > total)
            total = totals[s];
    int64_t width = e->width[k];
    int64_t area = (int64_t)(e->area[k] > 9e18 ? 9e18 : e->area[k]);
    if (h >= N_PREORDERS && h < 2 * N_PREORDERS) {
        /* a perturbed preorder: heuristic h - N_PREORDERS with its first key scaled by a
         * factor in [1, 1.5) drawn per buffer from the run's seed, so that buffers of similar
         * priority change places (restarts with the same three orders only resume the same
         * descent; these reach other parts of the tree) */
        pbl__key4 key = prepbl__key4(e, h - N_PREORDERS, k, totals);
        uint64_t z = mix64(e->n_perturbed * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)k);
        int64_t a = key.k1 < 0 ? -key.k1 : key.k1;
        if (a < INT64_MAX / 2)
            key.k1 -= (int64_t)((double)a * (double)(z >> 11) / 9007199254740992.0 * 0.5);
        return key;
    }
    if (h == 0)
        return (pbl__key4){ -width, -area, -total, k };
    if (h == 1)
        return (pbl__key4){ -total, -area, -width, k };
    if (h == 2)
        return (pbl__key4){ -total, -width, -area, k };
    return (pbl__key4){ -e->size[k], -width, -total, k };
}

static void set_preorder(pbl__exact *e, int h, pbl__key4 *keys)
{
    for (int32_t k = 0; k < e->n; k++)
        keys[k] = prepbl__key4(e, h, k, e->total0);
    qsort(keys, (size_t)e->n, sizeof *keys, pbl__key4_cmp);
    for (int32_t k = 0; k < e->n; k++)
        e->pre[keys[k].idx] = k;
}

/* ---- the search -------------------------------------------------------------------------- */

static inline void set(pbl__exact *e, int64_t *at, int64_t v)
{
    e->trail[e->trail_n++] = (trail_entry){ at, *at };
    *at = v;
}

static void unplace(pbl__exact *e, int32_t b);

/* Undoes the trail back to mark: old values, and placements (entries with no address) by
 * their inverse. */
static void undo(pbl__exact *e, size_t mark)
{
    while (e->trail_n > mark) {
        trail_entry *t = &e->trail[--e->trail_n];
        if (t->at)
            *t->at = t->old;
        else
            unplace(e, (int32_t)t->old);
    }
}

/* A lower bound on the height of section s's column (or cap, when it is known to be no more). Its unplaced buffers stack, each at or
 * above its minoff, so the column reaches at least (lowest minoff + all their sizes) and at
 * least (t + sizes of those whose minoff is t or more), t the top just placed: two points of
 * the single-machine release-date bound max over r of (r + sizes released at r or later),
 * without its sort. A column of aligned buffers wastes each one's padding but the top one's. */
static int64_t section_bound(pbl__exact *e, int32_t s, int64_t t)
{
    if (e->ucnt[s] == 0)
        return 0;
    /* Both points are at most (a member's minoff, or t) + rem: when a remembered member with a
     * low minoff (a hint, not undone on backtrack) is still unplaced and low enough, the
     * bound is within the capacity without looking at the rest. */
    int32_t w = e->low_hint[s];
    int64_t rem = e->rem[s] - e->maxpad[s];
    if (t + rem <= e->cap && e->offset[w] < 0 && e->minoff[w] + rem <= e->cap)
        return e->cap;
    const int32_t *mem = e->sec_mem + e->sec_at[s];
    int64_t lowest = INT64_MAX, above = 0;
    for (int64_t m = 0; m < e->ucnt[s]; m++) {
        int32_t u = mem[m];
        int64_t v = e->minoff[u];
        if (v < lowest) {
            lowest = v;
            w = u;
        }
        above += v >= t ? e->asize[u] : 0;
    }
    e->low_hint[s] = w;
    int64_t lb = lowest + e->rem[s] > t + above ? lowest + e->rem[s] : t + above;
    return lb - e->maxpad[s];
}

/* Takes b out of section s's unplaced members: swapped with the last and the count lowered.
 * Undoing raises the count again, which takes b back in: placements are undone last first, so
 * b is still the first one past the count. */
static void leave_section(pbl__exact *e, int32_t b, int32_t s)
{
    int32_t *mem = e->sec_mem + e->sec_at[s];
    int32_t last = (int32_t)--e->ucnt[s], at = e->mpos[e->mbase[b] + s - e->slo[b]] - e->sec_at[s];
    int32_t v = mem[last];
    mem[at] = v;
    mem[last] = b;
    e->mpos[e->mbase[v] + s - e->slo[v]] = e->sec_at[s] + at;
    e->mpos[e->mbase[b] + s - e->slo[b]] = e->sec_at[s] + last;
}

/* The inverse of place's bookkeeping (not of the minoffs it raised: those are on the trail). */
static void unplace(pbl__exact *e, int32_t b)
{
    e->offset[b] = -1;
    for (int32_t k = e->adj_at[b]; k < e->adj_at[b + 1]; k++)
        e->udeg[e->adj[k]] += e->offset[e->adj[k]] < 0;
    for (int32_t s = e->slo[b]; s < e->shi[b]; s++) {
        e->rem[s] += e->asize[b];
        e->ucnt[s]++;
    }
    for (int32_t s = e->slo[b]; s + 1 < e->shi[b]; s++)
        e->cuts[s]++;
}

/* Places buffer b at x (its minoff) inside component [sa, sb) and propagates. 0: pruned (the
 * caller undoes). The trail must have room for trail_need(b) entries. The bookkeeping is done
 * in full before any check fails, so that unplace can reverse it. */
static int place(pbl__exact *e, int32_t b, int64_t x, int64_t cap, int32_t sa, int32_t sb)
{
    int64_t a = e->align;
    e->offset[b] = x;
    e->trail[e->trail_n++] = (trail_entry){ NULL, b };
    int64_t top = (x + e->size[b] + a - 1) / a * a;
    int32_t lo = e->slo[b], hi = e->shi[b], fits = 1;
    for (int32_t k = e->adj_at[b]; k < e->adj_at[b + 1]; k++) {
        int32_t u = e->adj[k];
        if (e->offset[u] >= 0)
            continue;
        e->udeg[u]--;
        if (e->minoff[u] >= top)
            continue;
        fits &= top + e->size[u] <= cap;
        set(e, &e->minoff[u], top);
        if (e->slo[u] < lo)
            lo = e->slo[u];
        if (e->shi[u] > hi)
            hi = e->shi[u];
    }
    for (int32_t s = e->slo[b]; s < e->shi[b]; s++) {
        e->rem[s] -= e->asize[b];
        leave_section(e, b, s);
    }
    for (int32_t s = e->slo[b]; s + 1 < e->shi[b]; s++)
        e->cuts[s]--;
    if (!fits)
        return 0;
    for (int32_t s = lo; s < hi; s++)
        if (section_bound(e, s, top) > cap)
            return 0;
    return 1;
}

static size_t trail_need(const pbl__exact *e, int32_t b)
{
    return 1 + (size_t)(e->adj_at[b + 1] - e->adj_at[b]);
}

static int has_unplaced(const pbl__exact *e, int32_t sa, int32_t sb)
{
    for (int32_t s = sa; s < sb; s++)
        if (e->rem[s] > 0)
            return 1;
    return 0;
}

/* Sorts candidates by (minoff, preorder rank). */
static void sort_candidates(pbl__exact *e, int32_t *c, int32_t k)
{
    /* shell sort: small k is the common case; no comparator context needed */
    static const int32_t gaps[] = { 701, 301, 132, 57, 23, 10, 4, 1 };
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        int32_t h = gaps[g];
        for (int32_t i = h; i < k; i++) {
            int32_t v = c[i];
            int64_t vo = e->minoff[v];
            int64_t vp = e->pre[v];
            int32_t j = i;
            while (j >= h && (e->minoff[c[j - h]] > vo || (e->minoff[c[j - h]] == vo && e->pre[c[j - h]] > vp))) {
                c[j] = c[j - h];
                j -= h;
            }
            c[j] = v;
        }
    }
}

/* Ranks the unplaced buffers of component [sa, sb) by the run's heuristic with the sections'
 * remaining totals (as MiniMalloc does for each subproblem it splits off). 0: out of memory. */
static int rank_component(pbl__exact *e, int32_t sa, int32_t sb)
{
    int32_t m = 0;
    for (int32_t u = e->first_at[sa]; u < e->first_at[sb]; u++)
        if (e->offset[u] < 0)
            e->keys[m++] = prepbl__key4(e, e->h, u, e->rem);
    if (!grow(e->al, (void **)&e->trail, &e->trail_cap, e->trail_n + (size_t)m, sizeof(trail_entry)))
        return 0;
    qsort(e->keys, (size_t)m, sizeof *e->keys, pbl__key4_cmp);
    for (int32_t i = 0; i < m; i++)
        set(e, &e->pre[e->keys[i].idx], i);
    return 1;
}

/* ---- the memo of failed states ---------------------------------------------------------------
 *
 * What remains to be solved at an OR frame depends only on its unplaced buffers, their
 * minoffs, x, and which of them are behind the canonical order (minoff below x, or at x with a
 * smaller rank than the last placement's): the same remainder reached through a different
 * arrangement below — two buffers stacked in the other order, say — fails again. So a frame
 * that runs out of candidates records its state, and a frame that finds its state recorded
 * fails at once. Failing at capacity C means failing below C as well, so the memo survives
 * decisions for smaller capacities and restarts with other preorders. */


static memo_entry *memo_slot(const pbl__exact *e, const uint64_t key[2], int *found)
{
    size_t mask = e->memo_cap - 1, at = (size_t)key[0] & mask;
    memo_entry *empty = NULL;
    for (int p = 0; p < MEMO_PROBES; p++) {
        memo_entry *m = &e->memo[(at + (size_t)p) & mask];
        if (m->key[0] == key[0] && m->key[1] == key[1]) {
            *found = 1;
            return m;
        }
        if (!m->key[0] && !empty)
            empty = m;
    }
    *found = 0;
    return empty ? empty : &e->memo[(at + (size_t)(key[1] % MEMO_PROBES)) & mask]; /* evict */
}

static int memo_has(const pbl__exact *e, const uint64_t key[2])
{
    int found = 0;
    if (e->memo)
        memo_slot(e, key, &found);
    return found;
}

/* Records a failed state. Out of memory is not an error here: the memo just stops growing. */
static void memo_put(pbl__exact *e, const uint64_t key[2])
{
    if (!e->memo || (e->memo_n >= e->memo_cap / 2 && e->memo_cap < MEMO_MAX)) {
        size_t cap = e->memo ? e->memo_cap * 2 : MEMO_MIN;
        memo_entry *m = pbl__plan_alloc(e->al, cap * sizeof *m);
        if (m) {
            memo_entry *old = e->memo;
            size_t old_cap = e->memo_cap;
            memset(m, 0, cap * sizeof *m);
            e->memo = m;
            e->memo_cap = cap;
            e->memo_n = 0;
            for (size_t i = 0; i < old_cap; i++)
                if (old[i].key[0]) {
                    int found;
                    *memo_slot(e, old[i].key, &found) = old[i];
                    e->memo_n++;
                }
            pbl__plan_free(e->al, old, old_cap * sizeof *old);
        }
        if (!e->memo)
            return;
    }
    int found;
    memo_entry *m = memo_slot(e, key, &found);
    if (!found) {
        e->memo_n += !m->key[0];
        m->key[0] = key[0];
        m->key[1] = key[1];
    }
}

/* Pushes an OR frame for component [sa, sb) and lists its candidates. 0: out of memory. */
static int push_or(pbl__exact *e, int32_t sa, int32_t sb, int64_t x, int64_t last_pre)
{
    int32_t u0 = e->first_at[sa], u1 = e->first_at[sb];
    if (!grow(e->al, (void **)&e->cand, &e->cand_cap, e->cand_n + (size_t)(u1 - u0), sizeof(int32_t)))
        return 0;
    frame *f = &e->frames[e->n_frames++];
    memset(f, 0, sizeof *f);
    f->kind = FRAME_OR;
    f->sa = sa;
    f->sb = sb;
    f->x = x;
    f->last_pre = last_pre;
    f->cand_at = (int32_t)e->cand_n;
    int32_t *c = e->cand + e->cand_n;
    int32_t k = 0;
    int64_t min_h = INT64_MAX;
    uint64_t h0 = 0, h1 = 0;
    for (int32_t u = u0; u < u1; u++) {
        if (e->offset[u] >= 0)
            continue;
        int64_t m = e->minoff[u];
        if (m + e->size[u] < min_h)
            min_h = m + e->size[u];
        int behind = !(m > x || (m == x && e->pre[u] > last_pre));
        /* two symmetric sums of one mixed value per buffer: a different pair of states has
         * to collide in both */
        uint64_t hu = mix64(((uint64_t)m * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)behind) ^ e->salt[u]);
        h0 += hu;
        h1 += hu * (hu | 1);
        if (!behind) {
            if (e->twin[u] < 0 || e->offset[e->twin[u]] >= 0)
                c[k++] = u;
        } else if (e->udeg[u] == 0) {
            /* stuck: below the canonical order, and nothing left to lift it */
            k = 0;
            min_h = INT64_MIN;
            break;
        }
    }
    f->key[0] = mix64(h0 ^ mix64((uint64_t)x)) | 1;
    f->key[1] = mix64(h1 + (uint64_t)x * UINT64_C(0x9E3779B97F4A7C15));
    if (min_h != INT64_MIN && memo_has(e, f->key)) {
        k = 0;
        f->key[0] = 0; /* known already */
    }
    int32_t kept = 0;
    for (int32_t i = 0; i < k; i++)
        if (e->minoff[c[i]] < min_h)
            c[kept++] = c[i];
    sort_candidates(e, c, kept);
    /* Every buffer left after a candidate b goes at or above b's offset, so each section's
     * remaining column (b taken out) must fit above it: b at y needs y <= room[s] for every
     * section s, room[s] = cap - rem[s] + maxpad[s], plus asize[b] where b lives in s. The
     * candidates come in increasing y: those below the smallest room pass at once. */
    int64_t y_max = kept ? e->minoff[c[kept - 1]] : 0;
    int32_t n_tight = 0;
    for (int32_t s = sa; s < sb; s++) /* the sections some candidate could overflow */
        if (e->rem[s] > 0 && e->cap - e->rem[s] + e->maxpad[s] < y_max)
            e->tight[n_tight++] = s;
    int32_t n_ok = 0;
    for (int32_t i = 0; i < kept; i++) {
        int32_t b = c[i];
        int64_t y = e->minoff[b];
        int ok = 1;
        for (int32_t j = 0; j < n_tight && ok; j++) {
            int32_t s = e->tight[j];
            int64_t rem = e->rem[s] - (s >= e->slo[b] && s < e->shi[b] ? e->asize[b] : 0);
            ok = rem <= 0 || y + rem - e->maxpad[s] <= e->cap;
        }
        if (ok)
            c[n_ok++] = b;
        /* a candidate that overlaps no unplaced buffer ("hatless") goes now or never: once
         * something above its minoff is placed, nothing could lift it into the canonical
         * order */
        if (e->udeg[b] == 0)
            break;
    }
    kept = n_ok;
    f->cand_n = kept;
    e->cand_n += (size_t)kept;
    return 1;
}

enum { R_NONE, R_OK, R_FAIL, R_ABORT, R_NOMEM };

/* One depth-first run with the current preorder, at most `limit` placements. */
static int run(pbl__exact *e, int64_t cap, int64_t limit, pbl__exact_budget *b)
{
    int32_t n = e->n, ns = e->n_sec;
    e->cap = cap;
    for (int32_t k = 0; k < n; k++) {
        e->offset[k] = -1;
        e->minoff[k] = 0;
        e->udeg[k] = e->adj_at[k + 1] - e->adj_at[k];
    }
    for (int32_t s = 0; s < ns; s++) {
        e->rem[s] = e->atotal0[s];
        e->ucnt[s] = e->sec_at[s + 1] - e->sec_at[s];
        e->low_hint[s] = e->sec_mem[e->sec_at[s]];
        e->cuts[s] = e->cuts0[s];
        if (e->rem[s] - e->maxpad[s] > cap)
            return R_FAIL;
    }
    e->trail_n = 0;
    e->cand_n = 0;
    e->comp_n = 0;
    e->n_frames = 0;
    /* the root: every independent stretch of time is a component */
    if (!grow(e->al, (void **)&e->comp, &e->comp_cap, 2 * (size_t)ns + 2, sizeof(int32_t)))
        return R_NOMEM;
    frame *root = &e->frames[e->n_frames++];
    memset(root, 0, sizeof *root);
    root->kind = FRAME_AND;
    for (int32_t s = 0, start = 0; s < ns; s++)
        if (s + 1 == ns || e->cuts[s] == 0) {
            e->comp[e->comp_n++] = start;
            e->comp[e->comp_n++] = s + 1;
            start = s + 1;
        }
    root->comp_n = (int32_t)(e->comp_n / 2);

    int64_t used = 0;
    int res = R_NONE;
    while (e->n_frames > 0) {
        frame *f = &e->frames[e->n_frames - 1];
        if (f->kind == FRAME_AND) {
            if (res == R_FAIL || f->cj == f->comp_n) {
                e->comp_n = (size_t)f->comp_at;
                e->n_frames--;
                if (res != R_FAIL)
                    res = R_OK;
                continue;
            }
            int32_t sa = e->comp[f->comp_at + 2 * f->cj], sb = e->comp[f->comp_at + 2 * f->cj + 1];
            f->cj++;
            if (!rank_component(e, sa, sb) || !push_or(e, sa, sb, 0, -1))
                return R_NOMEM;
            res = R_NONE;
            continue;
        }
        if (res == R_OK) { /* a child finished the component: so did this frame */
            e->cand_n = (size_t)f->cand_at;
            e->n_frames--;
            continue;
        }
        if (res == R_FAIL)
            undo(e, f->mark);
        res = R_FAIL;
        while (f->ci < f->cand_n) {
            int32_t bi = e->cand[f->cand_at + f->ci++];
            if (used >= limit || (b->nodes_left >= 0 && b->nodes >= b->nodes_left))
                return R_ABORT;
            if ((b->nodes & 255) == 0 && b->deadline > 0 && pbl__plan_now() > b->deadline) {
                b->timed_out = 1;
                return R_ABORT;
            }
            used++;
            b->nodes++;
            f->mark = e->trail_n;
            if (!grow(e->al, (void **)&e->trail, &e->trail_cap, e->trail_n + trail_need(e, bi), sizeof(trail_entry)))
                return R_NOMEM;
            int64_t x = e->minoff[bi];
            if (!place(e, bi, x, cap, f->sa, f->sb)) {
                undo(e, f->mark);
                continue;
            }
            /* split the component where no unplaced buffer crosses any more */
            if (!grow(e->al, (void **)&e->comp, &e->comp_cap,
                      e->comp_n + 2 * (size_t)(e->shi[bi] - e->slo[bi]) + 4, sizeof(int32_t)))
                return R_NOMEM;
            int32_t comp_at = (int32_t)e->comp_n, start = f->sa;
            int32_t k0 = e->slo[bi] > f->sa ? e->slo[bi] : f->sa;
            int32_t k1 = e->shi[bi] - 1 < f->sb - 1 ? e->shi[bi] - 1 : f->sb - 1;
            for (int32_t k = k0; k < k1; k++)
                if (e->cuts[k] == 0) {
                    if (has_unplaced(e, start, k + 1)) {
                        e->comp[e->comp_n++] = start;
                        e->comp[e->comp_n++] = k + 1;
                    }
                    start = k + 1;
                }
            if (has_unplaced(e, start, f->sb)) {
                e->comp[e->comp_n++] = start;
                e->comp[e->comp_n++] = f->sb;
            }
            int32_t n_comp = (int32_t)(e->comp_n - (size_t)comp_at) / 2;
            if (n_comp == 0) {
                e->comp_n = (size_t)comp_at;
                res = R_OK;
            } else if (n_comp == 1) {
                int32_t sa = e->comp[comp_at], sb = e->comp[comp_at + 1];
                e->comp_n = (size_t)comp_at;
                if (!push_or(e, sa, sb, x, e->pre[bi]))
                    return R_NOMEM;
                res = R_NONE;
            } else {
                frame *a = &e->frames[e->n_frames++];
                memset(a, 0, sizeof *a);
                a->kind = FRAME_AND;
                a->comp_at = comp_at;
                a->comp_n = n_comp;
                res = R_NONE;
            }
            break;
        }
        if (res != R_NONE) { /* R_OK: finished here; R_FAIL: no candidate left */
            if (res == R_FAIL && f->key[0])
                memo_put(e, f->key);
            e->cand_n = (size_t)f->cand_at;
            e->n_frames--;
        }
    }
    return res == R_OK ? R_OK : R_FAIL;
}

int64_t pbl__exact_lower_bound(const pbl__exact *e)
{
    int64_t lb = 0;
    for (int32_t s = 0; s < e->n_sec; s++)
        if (e->atotal0[s] - e->maxpad[s] > lb)
            lb = e->atotal0[s] - e->maxpad[s];
    return lb;
}

/* ---- a greedy start ------------------------------------------------------------------------ */

typedef struct span {
    int64_t lo, hi;
} span;

/* Sorts spans by lo: insertion runs of 16, then bottom-up merges through tmp. */
static void sort_spans(span *a, span *tmp, int32_t m)
{
    for (int32_t r = 0; r < m; r += 16) {
        int32_t end = r + 16 < m ? r + 16 : m;
        for (int32_t i = r + 1; i < end; i++) {
            span v = a[i];
            int32_t j = i;
            while (j > r && a[j - 1].lo > v.lo) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = v;
        }
    }
    for (int32_t w = 16; w < m; w *= 2) {
        for (int32_t lo = 0; lo < m; lo += 2 * w) {
            int32_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
            int32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = a[j].lo < a[i].lo ? a[j++] : a[i++];
            while (i < mid)
                tmp[k++] = a[i++];
            while (j < hi)
                tmp[k++] = a[j++];
        }
        memcpy(a, tmp, (size_t)m * sizeof *a);
    }
}

int64_t pbl__exact_lowest_fit(pbl__exact *e, int h, int64_t *offset)
{
    int32_t n = e->n;
    span *sp = pbl__plan_alloc(e->al, 2 * (size_t)n * sizeof *sp);
    if (!sp)
        return -1;
    set_preorder(e, h, e->keys);
    for (int32_t k = 0; k < n; k++)
        e->order[e->pre[k]] = k;
    e->h = -1;
    for (int32_t k = 0; k < n; k++)
        e->offset[k] = -1;
    int64_t arena = 0, a = e->align;
    for (int32_t i = 0; i < n; i++) {
        int32_t b = e->order[i], m = 0;
        for (int32_t k = e->adj_at[b]; k < e->adj_at[b + 1]; k++) {
            int32_t u = e->adj[k];
            if (e->offset[u] >= 0)
                sp[m++] = (span){ e->offset[u], e->offset[u] + e->size[u] };
        }
        sort_spans(sp, sp + n, m);
        int64_t y = 0;
        for (int32_t j = 0; j < m && sp[j].lo < y + e->size[b]; j++)
            if (sp[j].hi > y)
                y = (sp[j].hi + a - 1) / a * a;
        e->offset[b] = y;
        if (y + e->size[b] > arena)
            arena = y + e->size[b];
    }
    for (int32_t k = 0; k < n; k++)
        offset[e->orig[k]] = e->offset[k];
    pbl__plan_free(e->al, sp, 2 * (size_t)n * sizeof *sp);
    return arena;
}

pbl__exact_result pbl__exact_decide(pbl__exact *e, int64_t cap, pbl__exact_budget *b, int64_t *offset)
{
    pbl__exact_result out = PBL__EXACT_ABORTED;
    int64_t limit = 2 * (int64_t)e->n + 64;
    if (cap > e->memo_at && e->memo) { /* states failed below this capacity: forget them */
        memset(e->memo, 0, e->memo_cap * sizeof *e->memo);
        e->memo_n = 0;
    }
    e->memo_at = cap;
    for (int done = 0; !done; limit *= 2) {
        /* once the limit is past PERTURB_AFTER placements per buffer (the three fixed orders
         * failed to settle it several times over), each round adds as many perturbed ones */
        int n_h = limit >= PERTURB_AFTER * (int64_t)e->n ? 2 * N_PREORDERS : N_PREORDERS;
        for (int h = 0; h < n_h && !done; h++) {
            e->h = h;
            if (h >= N_PREORDERS)
                e->n_perturbed++;
            int r = run(e, cap, limit, b);
            if (r == R_OK) {
                for (int32_t k = 0; k < e->n; k++)
                    offset[e->orig[k]] = e->offset[k];
                out = PBL__EXACT_FOUND;
                done = 1;
            } else if (r == R_FAIL) {
                out = PBL__EXACT_INFEASIBLE;
                done = 1;
            } else if (r == R_NOMEM) {
                out = PBL__EXACT_NOMEM;
                done = 1;
            } else if (b->timed_out || (b->nodes_left >= 0 && b->nodes >= b->nodes_left)) {
                done = 1;
            }
        }
        if (limit > INT64_MAX / 4)
            limit = INT64_MAX / 4;
    }
    return out;
}
