/*
 * The exact order: a bottleneck shortest path over the sets of executed nodes. A state is
 * the set S (a bit mask); its key is the highest step peak on the best way found to reach
 * it. Keys only grow along a path, so states popped in key order are final (Dijkstra), and
 * the first time the full set pops its key is the minimum peak. States whose key reaches
 * the bound (the best heuristic's peak) are never pushed: when the queue empties first, no
 * order beats the bound, which proves the heuristic optimal.
 */
#include <string.h>

#include "graph/schedule/model.h"

typedef struct state {
    uint64_t set;
    int64_t  live;   /* model live bytes after set */
    int64_t  key;    /* best bottleneck to reach it */
    int32_t  parent; /* state index, -1 for the empty set */
    int32_t  node;   /* the node that led here from parent */
} state;

typedef struct qitem {
    int64_t key;
    int32_t state;
} qitem;

typedef struct search {
    const pbl__sched_model *md;
    pbl__mem *m;
    state    *st;
    int32_t   n_st, cap_st;
    int32_t  *table; /* open addressing: state index + 1, 0 empty */
    size_t    table_n;
    qitem    *q;
    int32_t   qn, qcap;
    uint64_t *pred_mask; /* [n] */
} search;

static size_t hash(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x;
}

static void q_push(search *s, int64_t key, int32_t i)
{
    int32_t at = s->qn++;
    while (at > 0 && s->q[(at - 1) / 2].key > key) {
        s->q[at] = s->q[(at - 1) / 2];
        at = (at - 1) / 2;
    }
    s->q[at] = (qitem){ key, i };
}

static qitem q_pop(search *s)
{
    qitem top = s->q[0], x = s->q[--s->qn];
    int32_t at = 0;
    for (;;) {
        int32_t c = 2 * at + 1;
        if (c >= s->qn)
            break;
        if (c + 1 < s->qn && s->q[c + 1].key < s->q[c].key)
            c++;
        if (s->q[c].key >= x.key)
            break;
        s->q[at] = s->q[c];
        at = c;
    }
    if (s->qn > 0)
        s->q[at] = x;
    return top;
}

/* The slot of set in the table (its state, or the empty slot where it goes). */
static size_t slot_of(const search *s, uint64_t set)
{
    size_t h = hash(set) & (s->table_n - 1);
    while (s->table[h] && s->st[s->table[h] - 1].set != set)
        h = (h + 1) & (s->table_n - 1);
    return h;
}

/* Doubles the states' room and the table (kept at most half full), rehashing. */
static int grow(search *s)
{
    size_t old_n = s->table_n;
    state *st = pbl__mem_resize(s->m, s->st, (size_t)s->cap_st * sizeof *st, (size_t)s->cap_st * 2 * sizeof *st);
    int32_t *table = pbl__mem_calloc(s->m, old_n * 2 * sizeof *table);
    if (!st || !table) {
        if (st)
            s->st = st;
        pbl__mem_free(s->m, table, old_n * 2 * sizeof *table);
        return -1;
    }
    s->st = st;
    s->cap_st *= 2;
    pbl__mem_free(s->m, s->table, old_n * sizeof *s->table);
    s->table = table;
    s->table_n = old_n * 2;
    for (int32_t i = 0; i < s->n_st; i++)
        s->table[slot_of(s, s->st[i].set)] = i + 1;
    return 0;
}

int pbl__sched_exact(const pbl__sched_model *md, int64_t bound, int64_t max_states, pbl__mem *m, int32_t *order,
                     int64_t *peak)
{
    int32_t n = md->n;
    if (n > 64)
        return -1;
    if (max_states > (INT64_C(1) << 26))
        max_states = INT64_C(1) << 26;
    search s = { .md = md, .m = m, .cap_st = 1024, .table_n = 2048 };
    /* each popped state pushes at most n successors, but a queue entry is pushed only when
     * a state is new or improved, so n_st * n bounds it; start smaller and grow */
    s.qcap = 1024;
    s.st = pbl__mem_alloc(m, (size_t)s.cap_st * sizeof *s.st);
    s.table = pbl__mem_calloc(m, s.table_n * sizeof *s.table);
    s.q = pbl__mem_alloc(m, (size_t)s.qcap * sizeof *s.q);
    s.pred_mask = pbl__mem_calloc(m, (size_t)(n ? n : 1) * sizeof *s.pred_mask);
    int rc = -2;
    if (!s.st || !s.table || !s.q || !s.pred_mask)
        goto done;
    for (int32_t v = 0; v < n; v++)
        for (int32_t e = md->pred_start[v]; e < md->pred_start[v + 1]; e++)
            s.pred_mask[v] |= UINT64_C(1) << md->pred[e];
    uint64_t full = n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
    s.st[0] = (state){ .set = 0, .live = 0, .key = 0, .parent = -1, .node = -1 };
    s.n_st = 1;
    s.table[slot_of(&s, 0)] = 1;
    q_push(&s, 0, 0);
    rc = 0;
    while (s.qn > 0) {
        qitem it = q_pop(&s);
        state cur = s.st[it.state];
        if (it.key > cur.key)
            continue; /* stale */
        if (cur.set == full) {
            int32_t at = it.state;
            for (int32_t t = n - 1; t >= 0; t--) {
                order[t] = s.st[at].node;
                at = s.st[at].parent;
            }
            *peak = cur.key;
            rc = 1;
            goto done;
        }
        pbl__sched_cursor c = { .cnt = NULL, .done = cur.set };
        for (int32_t v = 0; v < n; v++) {
            uint64_t bit = UINT64_C(1) << v;
            if ((cur.set & bit) || (s.pred_mask[v] & ~cur.set))
                continue;
            int64_t p, a;
            pbl__sched_step(md, &c, cur.live, v, &p, &a);
            int64_t key = p > cur.key ? p : cur.key;
            if (key >= bound)
                continue;
            uint64_t next = cur.set | bit;
            size_t h = slot_of(&s, next);
            int32_t i;
            if (s.table[h]) {
                i = s.table[h] - 1;
                if (s.st[i].key <= key)
                    continue;
            } else {
                if (s.n_st >= max_states) {
                    rc = -1;
                    goto done;
                }
                if (s.n_st == s.cap_st) {
                    if (grow(&s) != 0) {
                        rc = -2;
                        goto done;
                    }
                    h = slot_of(&s, next);
                }
                i = s.n_st++;
                s.table[h] = i + 1;
                s.st[i].set = next;
                s.st[i].live = a;
            }
            s.st[i].key = key;
            s.st[i].parent = it.state;
            s.st[i].node = v;
            if (s.qn == s.qcap) {
                qitem *q = pbl__mem_resize(m, s.q, (size_t)s.qcap * sizeof *s.q, (size_t)s.qcap * 2 * sizeof *s.q);
                if (!q) {
                    rc = -2;
                    goto done;
                }
                s.q = q;
                s.qcap *= 2;
            }
            q_push(&s, key, i);
        }
    }
done:
    pbl__mem_free(m, s.st, (size_t)s.cap_st * sizeof *s.st);
    pbl__mem_free(m, s.table, s.table_n * sizeof *s.table);
    pbl__mem_free(m, s.q, (size_t)s.qcap * sizeof *s.q);
    pbl__mem_free(m, s.pred_mask, (size_t)(n ? n : 1) * sizeof *s.pred_mask);
    return rc;
}
