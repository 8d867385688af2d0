/* pbl_explain_records: the peak step of a set of usage records, what is live there, and
 * where a strategy's arena wastes bytes (pebble/viz.h). The graph-level entry and its
 * suggestions are in suggest.c. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/explain/explain_internal.h"
#include "graph/ir/graph_internal.h"
#include "graph/ir/op.h"
#include "graph/ir/registry.h"

/* Steps are array indices here; records whose times reach beyond this are refused. */
#define MAX_STEPS (INT32_C(1) << 26)

PBL__API pbl_explain_options pbl_explain_options_default(void)
{
    pbl_explain_options o = { .allocator = NULL, .align = 64, .strategy = "best", .time_limit = 0,
                              .suggest = 1, .max_recompute = 8, .schedule = PBL_SCHEDULE_PROGRAM };
    return o;
}

PBL__API const char *pbl_explain_kind_name(pbl_explain_kind k)
{
    static const char *const names[] = { "record",   "temporary", "saved_activation", "output",
                                         "parameter_gradient", "gradient", "input", "label",
                                         "parameter", "optimizer_state" };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

PBL__API void pbl_explain_free(pbl_explain *e)
{
    if (!e)
        return;
    pbl__mem m;
    pbl__mem_init(&m, e->allocator);
    pbl__mem_free(&m, e->rec, (size_t)e->n_records * sizeof *e->rec);
    pbl__mem_free(&m, e->live, (size_t)e->n_steps * sizeof *e->live);
    pbl__mem_free(&m, e->top, (size_t)e->n_steps * sizeof *e->top);
    pbl__mem_free(&m, e->live_at_peak, (size_t)e->n_records * sizeof *e->live_at_peak);
    pbl__mem_free(&m, e->holes_at_peak, (size_t)(e->n_records + 1) * sizeof *e->holes_at_peak);
    pbl__mem_free(&m, e->holes_at_worst, (size_t)(e->n_records + 1) * sizeof *e->holes_at_worst);
    pbl__mem_free(&m, e->step_start, e->step_start ? ((size_t)e->n_steps + 1) * sizeof *e->step_start : 0);
    pbl__mem_free(&m, e->step_record, (size_t)e->n_step_records * sizeof *e->step_record);
    pbl__mem_free(&m, e->outside, (size_t)e->n_outside * sizeof *e->outside);
    pbl__mem_free(&m, e->suggestions, (size_t)PBL__EXPLAIN_MAX_SUGGESTIONS * sizeof *e->suggestions);
    pbl_graph_records_free(&e->graph_records);
    memset(e, 0, sizeof *e);
}

/* A record index with its sort key (qsort has no context argument in C11). */
typedef struct keyed {
    int64_t key;
    int32_t idx;
} keyed;

static int by_key_desc(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int by_key_asc(const void *a, const void *b)
{
    return -by_key_desc(a, b);
}

/* The records live at t, sorted by key (bytes descending, or offset ascending). */
static int32_t live_sorted(const pbl_explain *e, int32_t t, keyed *tmp, int by_offset)
{
    int32_t m = 0;
    for (int32_t i = 0; i < e->n_records; i++) {
        const pbl_explain_record *r = &e->rec[i];
        if (r->first <= t && t < r->last) /* the half-open lifetime of pebble/plan.h */
            tmp[m++] = (keyed){ .key = by_offset ? r->offset : r->bytes, .idx = i };
    }
    qsort(tmp, (size_t)m, sizeof *tmp, by_offset ? by_key_asc : by_key_desc);
    return m;
}

PBL__API int32_t pbl_explain_live_at(const pbl_explain *e, int32_t t, int32_t *idx)
{
    if (!e || t < 0 || t >= e->n_steps || e->n_records == 0)
        return 0;
    pbl__mem mem;
    pbl__mem_init(&mem, e->allocator);
    keyed *tmp = pbl__mem_alloc(&mem, (size_t)e->n_records * sizeof *tmp);
    if (!tmp)
        return 0;
    int32_t m = live_sorted(e, t, tmp, 0);
    for (int32_t k = 0; k < m; k++)
        idx[k] = tmp[k].idx;
    pbl__mem_free(&mem, tmp, (size_t)e->n_records * sizeof *tmp);
    return m;
}

/* The address ranges of [0, end) that no record live at t covers. */
static int32_t holes_at(const pbl_explain *e, int32_t t, int64_t end, keyed *tmp, pbl_explain_range *out)
{
    int32_t m = live_sorted(e, t, tmp, 1), h = 0;
    int64_t at = 0;
    for (int32_t k = 0; k <= m; k++) {
        int64_t lo = k < m ? e->rec[tmp[k].idx].offset : end;
        if (lo > at)
            out[h++] = (pbl_explain_range){ at, lo };
        if (k < m && lo + e->rec[tmp[k].idx].bytes > at)
            at = lo + e->rec[tmp[k].idx].bytes;
    }
    return h;
}

/* What the graph says about each record: its values, producer, last reader and kind. */
static pbl_status label_from_graph(pbl_explain *e, const pbl_graph *g, const pbl_graph_records *gr, pbl__mem *m)
{
    size_t n = (size_t)e->n_records;
    int32_t *last_step = pbl__mem_alloc(m, (n ? n : 1) * sizeof *last_step);
    uint8_t *flags = pbl__mem_calloc(m, n ? n : 1);
    if (!last_step || !flags) {
        pbl__mem_free(m, last_step, (n ? n : 1) * sizeof *last_step);
        pbl__mem_free(m, flags, n ? n : 1);
        return PBL_ERR_NOMEM;
    }
    enum { READ_BY_BACKWARD = 1, READ_BY_UPDATE = 2, IS_OUTPUT = 4 };
    for (size_t r = 0; r < n; r++)
        last_step[r] = -1;
    for (int32_t t = 0; t < gr->n_steps; t++) {
        const pbl__node *nd = &g->nodes[gr->schedule[t]];
        const pbl__op *op = pbl__op_get(nd->op);
        int update = !nd->is_backward && op && op->n_mutates > 0;
        for (int32_t k = 0; k < nd->n_in; k++) {
            int32_t r = gr->value_record[nd->in[k]];
            if (r < 0)
                continue;
            last_step[r] = t;
            flags[r] |= (uint8_t)((nd->is_backward ? READ_BY_BACKWARD : 0) | (update ? READ_BY_UPDATE : 0));
        }
    }
    for (int32_t i = 0; i < g->n_outputs; i++) {
        int32_t r = gr->value_record[g->outputs[i].value];
        if (r >= 0)
            flags[r] |= IS_OUTPUT;
    }
    for (int32_t v = 0; v < gr->n_values; v++)
        if (gr->value_record[v] >= 0)
            e->rec[gr->value_record[v]].n_values++;
    for (size_t r = 0; r < n; r++) {
        pbl_explain_record *x = &e->rec[r];
        const pbl__value *val = &g->values[gr->record_value[r]];
        x->value = gr->record_value[r];
        x->name = val->name;
        x->shape = val->meta.shape;
        x->dtype = val->meta.dtype;
        x->producer = val->producer;
        x->last_reader = last_step[r] >= 0 ? gr->schedule[last_step[r]] : PBL_NONE;
        if (val->is_backward)
            x->kind = flags[r] & (READ_BY_UPDATE | IS_OUTPUT) ? PBL_EXPLAIN_PARAM_GRADIENT : PBL_EXPLAIN_GRADIENT;
        else if (flags[r] & IS_OUTPUT)
            x->kind = PBL_EXPLAIN_OUTPUT;
        else
            x->kind = flags[r] & READ_BY_BACKWARD ? PBL_EXPLAIN_SAVED_ACTIVATION : PBL_EXPLAIN_TEMPORARY;
    }
    pbl__mem_free(m, last_step, (n ? n : 1) * sizeof *last_step);
    pbl__mem_free(m, flags, n ? n : 1);
    return PBL_OK;
}

/* The variables: the caller's bytes, live for the whole run, outside the arena. */
static pbl_status list_outside(pbl_explain *e, const pbl_graph *g, const pbl_graph_records *gr, pbl__mem *m)
{
    int32_t k = 0;
    for (int32_t v = 0; v < g->n_values; v++)
        k += g->values[v].kind != PBL_VALUE_NODE;
    if (k == 0)
        return PBL_OK;
    e->outside = pbl__mem_calloc(m, (size_t)k * sizeof *e->outside);
    if (!e->outside)
        return PBL_ERR_NOMEM;
    e->n_outside = k;
    k = 0;
    for (int32_t v = 0; v < g->n_values; v++) {
        const pbl__value *val = &g->values[v];
        if (val->kind == PBL_VALUE_NODE)
            continue;
        pbl_explain_record *x = &e->outside[k++];
        x->name = val->name;
        x->value = v;
        x->n_values = 1;
        x->shape = val->meta.shape;
        x->dtype = val->meta.dtype;
        x->bytes = pbl_shape_numel(&val->meta.shape) * (int64_t)pbl_dtype_size(val->meta.dtype);
        x->first = 0;
        x->last = gr->n_steps;
        x->offset = -1;
        x->producer = PBL_NONE;
        x->last_reader = PBL_NONE;
        for (int32_t t = 0; t < gr->n_steps; t++) {
            const pbl__node *nd = &g->nodes[gr->schedule[t]];
            for (int32_t i = 0; i < nd->n_in; i++)
                if (nd->in[i] == v)
                    x->last_reader = gr->schedule[t];
        }
        x->kind = val->kind == PBL_VALUE_INPUT   ? PBL_EXPLAIN_INPUT
                : val->kind == PBL_VALUE_LABEL   ? PBL_EXPLAIN_LABEL
                : val->kind == PBL_VALUE_PARAM   ? PBL_EXPLAIN_PARAMETER
                                                 : PBL_EXPLAIN_OPTIMIZER_STATE;
        e->outside_bytes += x->bytes;
    }
    return PBL_OK;
}

/* Every step's live list, largest first: each record is appended to the steps of its
 * lifetime in order of the sort, so each step's slice comes out sorted. Skipped (NULL) past
 * PBL_EXPLAIN_MAX_LISTED entries. */
static pbl_status list_steps(pbl_explain *e, pbl__mem *m)
{
    int32_t n = e->n_records, T = e->n_steps;
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += e->rec[i].last - e->rec[i].first;
    if (total > PBL_EXPLAIN_MAX_LISTED || total == 0 || T == 0)
        return PBL_OK;
    size_t nb = (size_t)(n ? n : 1) * sizeof(keyed);
    keyed *order = pbl__mem_alloc(m, nb);
    e->step_start = pbl__mem_calloc(m, ((size_t)T + 1) * sizeof *e->step_start);
    e->step_record = pbl__mem_alloc(m, (size_t)total * sizeof *e->step_record);
    e->n_step_records = total;
    if (!order || !e->step_start || !e->step_record) {
        pbl__mem_free(m, order, nb);
        return PBL_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n; i++) {
        order[i] = (keyed){ .key = e->rec[i].bytes, .idx = i };
        for (int64_t t = e->rec[i].first; t < e->rec[i].last; t++)
            e->step_start[t + 1]++;
    }
    for (int32_t t = 0; t < T; t++)
        e->step_start[t + 1] += e->step_start[t];
    qsort(order, (size_t)n, sizeof *order, by_key_desc);
    for (int32_t k = 0; k < n; k++) /* a moving cursor per step, shifted back below */
        for (int64_t t = e->rec[order[k].idx].first; t < e->rec[order[k].idx].last; t++)
            e->step_record[e->step_start[t]++] = order[k].idx;
    for (int32_t t = T; t > 0; t--)
        e->step_start[t] = e->step_start[t - 1];
    e->step_start[0] = 0;
    pbl__mem_free(m, order, nb);
    return PBL_OK;
}

/* The live-bytes curve, the peak and the records live at it; checks that they sum to the
 * planner's own lower bound (two computations of one number: a mismatch is a bug here). */
static pbl_status find_peak(pbl_explain *e, const pbl_usage_record *r, pbl__mem *m, char *err, size_t errlen)
{
    int32_t n = e->n_records;
    e->live = pbl__mem_calloc(m, (size_t)(e->n_steps ? e->n_steps : 0) * sizeof *e->live);
    e->live_at_peak = pbl__mem_alloc(m, (size_t)n * sizeof *e->live_at_peak);
    if ((e->n_steps && !e->live) || (n && !e->live_at_peak))
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory for %d steps", (int)e->n_steps);
    for (int32_t i = 0; i < n; i++) {
        e->live[r[i].first] += r[i].size;
        if (r[i].last < e->n_steps)
            e->live[r[i].last] -= r[i].size;
    }
    e->peak_step = -1;
    for (int32_t t = 0; t < e->n_steps; t++) {
        if (t)
            e->live[t] += e->live[t - 1];
        if (e->live[t] > e->lower_bound) {
            e->lower_bound = e->live[t];
            e->peak_step = t;
            e->n_peak_steps = 0;
        }
        e->n_peak_steps += e->peak_step >= 0 && e->live[t] == e->lower_bound;
    }
    e->n_live_at_peak = pbl_explain_live_at(e, e->peak_step, e->live_at_peak);
    if (n && e->peak_step >= 0 && e->n_live_at_peak == 0)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory listing the peak");
    int64_t sum = 0;
    for (int32_t k = 0; k < e->n_live_at_peak; k++)
        sum += e->rec[e->live_at_peak[k]].bytes;
    int64_t lb = pbl_records_lower_bound(r, n);
    if (lb < 0)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory for the lower bound");
    assert(sum == e->lower_bound && sum == lb);
    if (sum != e->lower_bound || sum != lb) /* NDEBUG builds: still a status, never a wrong answer */
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG,
                         "explain: internal: the values live at step %d sum to %lld bytes, the lower bound is %lld",
                         (int)e->peak_step, (long long)sum, (long long)lb);
    return PBL_OK;
}

/* Each step's top: records by top descending, each fills the steps of its lifetime not yet
 * filled (a next-unfilled pointer with path halving skips the filled ones), so the work is
 * O(n log n + steps) however long the lifetimes. */
static pbl_status fill_top(pbl_explain *e, pbl__mem *m)
{
    int32_t n = e->n_records, T = e->n_steps;
    size_t nb = (size_t)(n ? n : 1) * sizeof(keyed), tb = ((size_t)T + 1) * sizeof(int32_t);
    keyed *order = pbl__mem_alloc(m, nb);
    int32_t *next = pbl__mem_alloc(m, tb);
    if (!order || !next) {
        pbl__mem_free(m, order, nb);
        pbl__mem_free(m, next, tb);
        return PBL_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n; i++)
        order[i] = (keyed){ .key = e->rec[i].offset + e->rec[i].bytes, .idx = i };
    qsort(order, (size_t)n, sizeof *order, by_key_desc);
    for (int32_t t = 0; t <= T; t++)
        next[t] = t;
    for (int32_t k = 0; k < n; k++) {
        const pbl_explain_record *x = &e->rec[order[k].idx];
        for (int32_t t = (int32_t)x->first;;) {
            while (next[t] != t) /* the first unfilled step at or after t */
                t = next[t] = next[next[t]];
            if (t >= x->last)
                break;
            e->top[t] = order[k].key;
            next[t] = t + 1;
        }
    }
    pbl__mem_free(m, order, nb);
    pbl__mem_free(m, next, tb);
    return PBL_OK;
}

/* The chosen strategy's offsets, verified, and where its arena exceeds the live bytes. */
static pbl_status place(pbl_explain *e, const pbl_usage_record *r, const pbl_explain_options *o, pbl__mem *m,
                        char *err, size_t errlen)
{
    int32_t n = e->n_records;
    pbl_plan_options po = pbl_plan_options_default();
    po.allocator = o->allocator;
    po.align = o->align;
    po.time_limit = o->time_limit;
    pbl_assignment a;
    pbl_status s = pbl_plan_records(r, n, o->strategy, &po, &a, err, errlen);
    if (s != PBL_OK)
        return s;
    s = pbl_plan_verify(r, n, &a, o->align, 0, err, errlen);
    if (s == PBL_OK) {
        e->arena = a.arena;
        for (int32_t i = 0; i < n; i++)
            e->rec[i].offset = a.offset[i];
    }
    pbl_assignment_free(&a);
    if (s != PBL_OK)
        return s;
    /* the highest byte in use at each step: below it, what is not live is fragmentation */
    e->top = pbl__mem_calloc(m, (size_t)e->n_steps * sizeof *e->top);
    if (e->n_steps && !e->top)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory for %d steps", (int)e->n_steps);
    if ((s = fill_top(e, m)) != PBL_OK)
        return pbl__errf(err, errlen, s, "explain: out of memory for %d steps", (int)e->n_steps);
    e->worst_step = e->arena_step = -1;
    int64_t worst = 0;
    for (int32_t t = 0; t < e->n_steps; t++) {
        if (e->top[t] - e->live[t] > worst) {
            worst = e->top[t] - e->live[t];
            e->worst_step = t;
        }
        if (e->arena_step < 0 && e->top[t] == e->arena && e->arena > 0)
            e->arena_step = t;
    }
    size_t cap = (size_t)n + 1;
    keyed *tmp = pbl__mem_alloc(m, cap * sizeof *tmp);
    e->holes_at_peak = pbl__mem_alloc(m, cap * sizeof *e->holes_at_peak);
    e->holes_at_worst = pbl__mem_alloc(m, cap * sizeof *e->holes_at_worst);
    if (!tmp || !e->holes_at_peak || !e->holes_at_worst) {
        pbl__mem_free(m, tmp, cap * sizeof *tmp);
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory for the arena's holes");
    }
    if (e->peak_step >= 0)
        e->n_holes_at_peak = holes_at(e, e->peak_step, e->arena, tmp, e->holes_at_peak);
    if (e->worst_step >= 0)
        e->n_holes_at_worst = holes_at(e, e->worst_step, e->top[e->worst_step], tmp, e->holes_at_worst);
    pbl__mem_free(m, tmp, cap * sizeof *tmp);
    return PBL_OK;
}

PBL__API pbl_status pbl_explain_records(const pbl_usage_record *r, int32_t n, const char *const *ids,
                                        const pbl_graph *g, const pbl_graph_records *gr,
                                        const pbl_explain_options *opt, pbl_explain *out, char *err,
                                        size_t errlen)
{
    pbl_explain_options o = opt ? *opt : pbl_explain_options_default();
    if (!o.strategy)
        o.strategy = "best";
    pbl__errclear(err, errlen);
    if (!out)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "explain: no output");
    memset(out, 0, sizeof *out);
    out->allocator = o.allocator;
    out->peak_step = out->worst_step = out->arena_step = -1;
    if (n < 0 || (n > 0 && !r) || o.align < 1 || (g != NULL) != (gr != NULL))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "explain: bad arguments (n %d, align %lld%s)", (int)n,
                         (long long)o.align, (g != NULL) != (gr != NULL) ? ", a graph without its records" : "");
    if (gr && (gr->records != r || gr->n_records != n || gr->n_values != pbl_graph_value_count(g)))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "explain: the liveness records are not the graph's");
    int64_t steps = 0;
    for (int32_t i = 0; i < n; i++) {
        if (r[i].first < 0 || r[i].last <= r[i].first || r[i].size < 0 || r[i].last > MAX_STEPS)
            return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG,
                             "explain: record %d: steps [%lld, %lld) and size %lld (steps from 0 up to %d)", (int)i,
                             (long long)r[i].first, (long long)r[i].last, (long long)r[i].size, (int)MAX_STEPS);
        if (r[i].last > steps)
            steps = r[i].last;
    }
    if (gr && gr->n_steps > steps)
        steps = gr->n_steps;
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    out->n_records = n;
    out->n_steps = (int32_t)steps;
    out->rec = pbl__mem_calloc(&m, (size_t)n * sizeof *out->rec);
    if (n && !out->rec)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory for %d records", (int)n);
    for (int32_t i = 0; i < n; i++) {
        pbl_explain_record *x = &out->rec[i];
        x->name = ids ? ids[i] : NULL;
        x->value = x->producer = x->last_reader = PBL_NONE;
        x->bytes = r[i].size;
        x->first = r[i].first;
        x->last = r[i].last;
        x->kind = PBL_EXPLAIN_RECORD;
    }
    pbl_status s = PBL_OK;
    if (g && ((s = label_from_graph(out, g, gr, &m)) != PBL_OK || (s = list_outside(out, g, gr, &m)) != PBL_OK))
        return pbl__errf(err, errlen, s, "explain: out of memory labelling %d records", (int)n);
    if ((s = find_peak(out, r, &m, err, errlen)) != PBL_OK)
        return s;
    if (list_steps(out, &m) != PBL_OK)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "explain: out of memory listing each step's records");
    out->strategy = NULL;
    for (int32_t k = 0; k < pbl_plan_strategy_count(); k++)
        if (strcmp(pbl_plan_strategy_name(k), o.strategy) == 0)
            out->strategy = pbl_plan_strategy_name(k);
    if (!out->strategy)
        return pbl__errf(err, errlen, PBL_ERR_NOT_FOUND, "explain: unknown strategy '%s'", o.strategy);
    return place(out, r, &o, &m, err, errlen);
}
