/* The scheduler's memory model (see model.h). */
#include "graph/schedule/model.h"

#include <string.h>

#include "graph/ir/registry.h"
#include "graph/ir/schedule.h"

/* One block holds every array, so freeing needs one size. */
typedef struct carver {
    char  *at, *end;
} carver;

static void *carve(carver *c, size_t bytes)
{
    bytes = (bytes + 15) / 16 * 16;
    void *p = c->at;
    c->at += bytes;
    return c->at <= c->end ? p : NULL;
}

static int32_t reads_twice(const int32_t *list, int32_t from, int32_t to, int32_t r)
{
    for (int32_t k = from; k < to; k++)
        if (list[k] == r)
            return 1;
    return 0;
}

pbl_status pbl__sched_model_build(const pbl_graph *g, const int32_t *order, int32_t n, int64_t align, int inplace,
                                  pbl__mem *m, pbl__sched_model *md)
{
    memset(md, 0, sizeof *md);
    pbl__deps d;
    if (pbl__deps_build(g, m, &d) != PBL_OK)
        return PBL_ERR_NOMEM;
    int32_t n_reads = 0, n_outs = 0;
    for (int32_t t = 0; t < n; t++) {
        n_reads += g->nodes[order[t]].n_in;
        n_outs += g->nodes[order[t]].n_out;
    }
    size_t nn = (size_t)g->n_nodes + 1, nv = (size_t)g->n_values + 1, nl = (size_t)n + 1;
    size_t ne = (size_t)d.n_edges + 1, nr = (size_t)n_outs + 1;
    size_t bytes = 16 * 24 + nl * sizeof(pbl_node) + nn * sizeof(int32_t) + 2 * nl * sizeof(int32_t) +
                   2 * ne * sizeof(int32_t) + nl + nv * sizeof(int32_t) + nr * (sizeof(int64_t) + 1 + sizeof(int32_t) +
                   sizeof(uint64_t)) + 2 * nl * sizeof(int32_t) + nr * sizeof(int32_t) +
                   ((size_t)n_reads + 1) * sizeof(int32_t);
    char *block = pbl__mem_calloc(m, bytes);
    if (!block) {
        pbl__deps_free(&d, m);
        return PBL_ERR_NOMEM;
    }
    carver c = { block, block + bytes };
    md->g = g;
    md->n = n;
    md->inplace = inplace;
    md->bytes_used = bytes;
    md->node = carve(&c, nl * sizeof(pbl_node));
    md->local = carve(&c, nn * sizeof(int32_t));
    md->pred_start = carve(&c, nl * sizeof(int32_t));
    md->succ_start = carve(&c, nl * sizeof(int32_t));
    md->pred = carve(&c, ne * sizeof(int32_t));
    md->succ = carve(&c, ne * sizeof(int32_t));
    md->urgent = carve(&c, nl);
    md->rec_of = carve(&c, nv * sizeof(int32_t));
    md->rec_size = carve(&c, nr * sizeof(int64_t));
    md->rec_out = carve(&c, nr);
    md->rec_readers = carve(&c, nr * sizeof(int32_t));
    md->rec_mask = carve(&c, nr * sizeof(uint64_t));
    md->new_start = carve(&c, nl * sizeof(int32_t));
    md->read_start = carve(&c, nl * sizeof(int32_t));
    md->new_rec = carve(&c, nr * sizeof(int32_t));
    md->read_rec = carve(&c, ((size_t)n_reads + 1) * sizeof(int32_t));

    for (int32_t i = 0; i < g->n_nodes; i++)
        md->local[i] = -1;
    for (int32_t t = 0; t < n; t++) {
        md->node[t] = order[t];
        md->local[order[t]] = t;
    }
    /* the dependency edges among the nodes kept, in local ids */
    for (int32_t t = 0; t < n; t++) {
        pbl_node v = order[t];
        md->pred_start[t + 1] = md->pred_start[t];
        for (int32_t e = d.pred_start[v]; e < d.pred_start[v + 1]; e++)
            if (md->local[d.pred[e]] >= 0)
                md->pred[md->pred_start[t + 1]++] = md->local[d.pred[e]];
        md->succ_start[t + 1] = md->succ_start[t];
        for (int32_t e = d.succ_start[v]; e < d.succ_start[v + 1]; e++)
            if (md->local[d.succ[e]] >= 0)
                md->succ[md->succ_start[t + 1]++] = md->local[d.succ[e]];
        md->urgent[t] = pbl__op_get(g->nodes[v].op)->n_mutates > 0;
    }
    md->n_edges = md->pred_start[n];
    pbl__deps_free(&d, m);

    /* records: in program order, so an update's input has its record before the update */
    for (int32_t v = 0; v < g->n_values; v++)
        md->rec_of[v] = -1;
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[order[t]];
        const pbl__op *op = pbl__op_get(nd->op);
        md->new_start[t + 1] = md->new_start[t];
        for (int32_t k = 0; k < nd->n_out; k++) {
            int mutated = 0;
            for (int32_t q = 0; q < op->n_mutates; q++) {
                if (op->mutates[q][0] == k) {
                    md->rec_of[nd->out[k]] = md->rec_of[nd->in[op->mutates[q][1]]]; /* -1: a variable */
                    mutated = 1;
                }
            }
            if (mutated)
                continue;
            int32_t r = md->n_rec++;
            int64_t b = (int64_t)pbl__meta_bytes(&g->values[nd->out[k]].meta);
            md->rec_size[r] = (b + align - 1) / align * align;
            md->rec_of[nd->out[k]] = r;
            md->new_rec[md->new_start[t + 1]++] = r;
        }
    }
    for (int32_t i = 0; i < g->n_outputs; i++) {
        int32_t r = md->rec_of[g->outputs[i].value];
        if (r >= 0)
            md->rec_out[r] = 1;
    }
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[order[t]];
        md->read_start[t + 1] = md->read_start[t];
        for (int32_t k = 0; k < nd->n_in; k++) {
            int32_t r = md->rec_of[nd->in[k]];
            if (r < 0 || reads_twice(md->read_rec, md->read_start[t], md->read_start[t + 1], r))
                continue;
            md->read_rec[md->read_start[t + 1]++] = r;
            md->rec_readers[r]++;
            if (t < 64)
                md->rec_mask[r] |= UINT64_C(1) << t;
        }
    }
    return PBL_OK;
}

void pbl__sched_model_free(pbl__sched_model *md, pbl__mem *m)
{
    if (md->node)
        pbl__mem_free(m, md->node, md->bytes_used);
    memset(md, 0, sizeof *md);
}

static int32_t left(const pbl__sched_model *md, const pbl__sched_cursor *c, int32_t r)
{
    if (c->cnt)
        return c->cnt[r];
    return __builtin_popcountll(md->rec_mask[r] & ~c->done);
}

static int reads(const pbl__sched_model *md, int32_t v, int32_t r)
{
    return reads_twice(md->read_rec, md->read_start[v], md->read_start[v + 1], r);
}

/* The bytes v's in-place outputs save during its step, taken as pbl_graph_liveness takes
 * them: output by output, offer by offer, an input slot at most once, and only an input
 * whose record ends with this step, is no graph output, and has the output's bytes. */
static int64_t inplace_saving(const pbl__sched_model *md, const pbl__sched_cursor *c, int32_t v)
{
    const pbl_graph *g = md->g;
    const pbl__node *nd = &g->nodes[md->node[v]];
    const pbl__op *op = pbl__op_get(nd->op);
    int32_t taken[PBL__MAX_IN] = { 0 }, taken_rec[PBL__MAX_IN];
    int32_t n_taken = 0;
    int64_t saved = 0;
    for (int32_t k = 0; k < nd->n_out; k++) {
        int mutated = 0;
        for (int32_t q = 0; q < op->n_mutates; q++)
            mutated |= op->mutates[q][0] == k;
        if (mutated)
            continue;
        for (int32_t q = 0; q < op->n_inplace; q++) {
            int32_t slot = op->inplace[q][1];
            if (op->inplace[q][0] != k || taken[slot])
                continue;
            pbl_value in = nd->in[slot], out = nd->out[k];
            int32_t r = md->rec_of[in];
            if (r < 0 || md->rec_out[r] || left(md, c, r) != 1 || !reads(md, v, r) ||
                pbl__meta_bytes(&g->values[in].meta) != pbl__meta_bytes(&g->values[out].meta))
                continue;
            int again = 0;
            for (int32_t j = 0; j < n_taken; j++)
                again |= taken_rec[j] == r;
            if (again)
                continue;
            taken[slot] = 1;
            taken_rec[n_taken++] = r;
            saved += md->rec_size[md->rec_of[out]];
            break;
        }
    }
    return saved;
}

void pbl__sched_step(const pbl__sched_model *md, const pbl__sched_cursor *c, int64_t live, int32_t v, int64_t *peak,
                     int64_t *after)
{
    int64_t p = live, a = live;
    for (int32_t k = md->new_start[v]; k < md->new_start[v + 1]; k++) {
        int32_t r = md->new_rec[k];
        p += md->rec_size[r];
        if (md->rec_out[r] || md->rec_readers[r] > 0)
            a += md->rec_size[r];
    }
    for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++) {
        int32_t r = md->read_rec[k];
        if (!md->rec_out[r] && left(md, c, r) == 1)
            a -= md->rec_size[r];
    }
    if (md->inplace)
        p -= inplace_saving(md, c, v);
    *peak = p;
    *after = a;
}

int64_t pbl__sched_peak(const pbl__sched_model *md, const int32_t *order, pbl__mem *m)
{
    size_t bytes = (size_t)(md->n_rec + 1) * sizeof(int32_t);
    int32_t *cnt = pbl__mem_alloc(m, bytes);
    if (!cnt)
        return -1;
    memcpy(cnt, md->rec_readers, (size_t)md->n_rec * sizeof *cnt);
    pbl__sched_cursor c = { .cnt = cnt };
    int64_t live = 0, peak = 0;
    for (int32_t t = 0; t < md->n; t++) {
        int32_t v = order[t];
        int64_t p, a;
        pbl__sched_step(md, &c, live, v, &p, &a);
        if (p > peak)
            peak = p;
        live = a;
        for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++)
            cnt[md->read_rec[k]]--;
    }
    pbl__mem_free(m, cnt, bytes);
    return peak;
}

int64_t pbl__sched_floor(const pbl__sched_model *md, pbl__mem *m)
{
    int32_t n = md->n, words = (n + 63) / 64;
    if (n == 0)
        return 0;
    if (n > 8192)
        return -1; /* the ancestor sets would take n^2 / 8 bytes */
    size_t ab = (size_t)n * (size_t)words * sizeof(uint64_t), rb = (size_t)(md->n_rec + 1) * sizeof(int32_t);
    uint64_t *anc = pbl__mem_calloc(m, ab), *desc = pbl__mem_calloc(m, ab);
    int32_t *producer = pbl__mem_alloc(m, rb), *rs = pbl__mem_calloc(m, rb + sizeof(int32_t));
    int32_t *rd = pbl__mem_alloc(m, (size_t)(md->read_start[n] + 1) * sizeof(int32_t));
    int64_t floor = -2;
    if (!anc || !desc || !producer || !rs || !rd)
        goto done;
    /* each record's producer and readers (CSR) */
    for (int32_t v = 0; v < n; v++)
        for (int32_t k = md->new_start[v]; k < md->new_start[v + 1]; k++)
            producer[md->new_rec[k]] = v;
    for (int32_t v = 0; v < n; v++)
        for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++)
            rs[md->read_rec[k] + 1]++;
    for (int32_t r = 0; r < md->n_rec; r++)
        rs[r + 1] += rs[r];
    {
        int32_t *cur = pbl__mem_alloc(m, rb);
        if (!cur)
            goto done;
        memcpy(cur, rs, (size_t)md->n_rec * sizeof *cur);
        for (int32_t v = 0; v < n; v++)
            for (int32_t k = md->read_start[v]; k < md->read_start[v + 1]; k++)
                rd[cur[md->read_rec[k]]++] = v;
        pbl__mem_free(m, cur, rb);
    }
    /* local ids are a topological order: a node's ancestors are known before it */
    for (int32_t v = 0; v < n; v++) {
        uint64_t *a = anc + (size_t)v * words;
        for (int32_t e = md->pred_start[v]; e < md->pred_start[v + 1]; e++) {
            int32_t p = md->pred[e];
            const uint64_t *b = anc + (size_t)p * words;
            for (int32_t w = 0; w < words; w++)
                a[w] |= b[w];
            a[p / 64] |= UINT64_C(1) << (p % 64);
        }
    }
    for (int32_t v = n - 1; v >= 0; v--) {
        uint64_t *d = desc + (size_t)v * words;
        d[v / 64] |= UINT64_C(1) << (v % 64); /* v counts as its own descendant here */
        for (int32_t e = md->succ_start[v]; e < md->succ_start[v + 1]; e++) {
            const uint64_t *b = desc + (size_t)md->succ[e] * words;
            for (int32_t w = 0; w < words; w++)
                d[w] |= b[w];
        }
    }
    /* at v's step, whatever the order: every record an ancestor of v made that v or one of
     * its descendants reads (or that is a graph output) is live, and so are
     * v's own new records (unless v may take an input's bytes in place: not counted then) */
    floor = 0;
    for (int32_t v = 0; v < n; v++) {
        const uint64_t *a = anc + (size_t)v * words, *d = desc + (size_t)v * words;
        int64_t live = 0;
        int may_share = md->inplace && pbl__op_get(md->g->nodes[md->node[v]].op)->n_inplace > 0;
        for (int32_t k = md->new_start[v]; k < md->new_start[v + 1] && !may_share; k++)
            live += md->rec_size[md->new_rec[k]];
        for (int32_t r = 0; r < md->n_rec; r++) {
            int32_t p = producer[r];
            if (!(a[p / 64] >> (p % 64) & 1))
                continue;
            int needed = md->rec_out[r];
            for (int32_t k = rs[r]; k < rs[r + 1] && !needed; k++)
                needed = d[rd[k] / 64] >> (rd[k] % 64) & 1;
            if (needed)
                live += md->rec_size[r];
        }
        if (live > floor)
            floor = live;
    }
done:
    pbl__mem_free(m, anc, ab);
    pbl__mem_free(m, desc, ab);
    pbl__mem_free(m, producer, rb);
    pbl__mem_free(m, rs, rb + sizeof(int32_t));
    pbl__mem_free(m, rd, (size_t)(md->read_start[n] + 1) * sizeof(int32_t));
    return floor;
}
