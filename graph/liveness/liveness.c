/*
 * Liveness: a scheduled graph's usage records (see pebble/liveness.h).
 *
 * Step t runs order[t]. A node output produced at step p and last read at step q lives on
 * [p, q + 1); an output nobody reads lives on [p, p + 1); a graph output lives to the end.
 * Only reads by scheduled nodes count, and since backward nodes are explicit, a forward value
 * no gradient reads dies with its last forward reader (the ops' grad_reads bits describe the
 * same thing; test_liveness checks they agree).
 *
 * Records are built in schedule order so in-place decisions see final reader information:
 * an output that takes its input's storage joins the input's record, which then lives on.
 * Update outputs (mutates) join their input's record the same way, or are not planned at all
 * when the input is a variable (the caller's bytes).
 */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/liveness/liveness_internal.h"
#include "graph/ir/schedule.h"
#include "graph/ir/registry.h"
#include "pebble/liveness.h"

PBL__API pbl_liveness_options pbl_liveness_options_default(void)
{
    pbl_liveness_options o = { .allocator = NULL, .align = 64, .inplace = 1, .targets = NULL, .n_targets = 0,
                               .order = NULL, .n_order = 0 };
    return o;
}

PBL__API void pbl_graph_records_free(pbl_graph_records *r)
{
    if (!r)
        return;
    pbl__mem m;
    pbl__mem_init(&m, r->allocator);
    pbl__mem_free(&m, r->records, (size_t)r->n_values * sizeof *r->records);
    pbl__mem_free(&m, r->record_value, (size_t)r->n_values * sizeof *r->record_value);
    pbl__mem_free(&m, r->value_record, (size_t)r->n_values * sizeof *r->value_record);
    pbl__mem_free(&m, r->schedule, (size_t)r->n_values * sizeof *r->schedule);
    memset(r, 0, sizeof *r);
}

typedef struct live_state {
    const pbl_graph       *g;
    const int32_t         *order;
    int32_t                n;
    pbl__live_reads        reads;
    pbl_graph_records     *out;
    int64_t                align;
} live_state;

pbl_status pbl__live_reads_init(pbl__live_reads *lr, const pbl_graph *g, const pbl_node *schedule, int32_t n,
                                pbl__mem *m)
{
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    lr->n_steps = n;
    lr->last_read = pbl__mem_alloc(m, nv * sizeof *lr->last_read);
    lr->is_output = pbl__mem_calloc(m, nv);
    if (!lr->last_read || !lr->is_output) {
        pbl__live_reads_free(lr, g, m);
        return PBL_ERR_NOMEM;
    }
    for (int32_t v = 0; v < g->n_values; v++)
        lr->last_read[v] = -1;
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[schedule[t]];
        for (int32_t k = 0; k < nd->n_in; k++)
            lr->last_read[nd->in[k]] = t; /* steps ascend: the last write wins */
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        lr->is_output[g->outputs[i].value] = 1;
    return PBL_OK;
}

void pbl__live_reads_free(pbl__live_reads *lr, const pbl_graph *g, pbl__mem *m)
{
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    pbl__mem_free(m, lr->last_read, nv * sizeof *lr->last_read);
    pbl__mem_free(m, lr->is_output, nv);
    memset(lr, 0, sizeof *lr);
}

/* Places output k of node nd, run at step t (see pbl__live_build_records). Returns the
 * record, or -1 when not planned; *fresh says whether it is new. taken[] marks the inputs
 * already given away at this step. */
static int32_t place(const pbl__live_build *b, const pbl__node *nd, int32_t k, int32_t t, int32_t taken[PBL__MAX_IN],
                     int *fresh)
{
    const pbl__op *op = pbl__op_get(nd->op);
    pbl_value v = nd->out[k];
    const pbl__live_reads *lr = b->reads;
    int64_t end = lr->is_output[v] ? lr->n_steps : lr->last_read[v] >= t ? lr->last_read[v] + 1 : t + 1;
    int32_t join = -1;
    *fresh = 0;
    for (int32_t m = 0; m < op->n_mutates && join < 0; m++) {
        if (op->mutates[m][0] != k)
            continue;
        join = b->value_record[nd->in[op->mutates[m][1]]]; /* -1 for a variable: the caller's bytes, unplanned */
        if (join < 0)
            return -1;
    }
    for (int32_t m = 0; b->inplace && join < 0 && m < op->n_inplace; m++) {
        int32_t slot = op->inplace[m][1];
        if (op->inplace[m][0] != k || taken[slot])
            continue;
        if (b->can_take(b->ctx, nd->in[slot], v, t)) {
            join = b->value_record[nd->in[slot]];
            taken[slot] = 1;
            (*b->n_inplace)++;
        }
    }
    if (join >= 0) {
        b->value_record[v] = join;
        if (b->records[join].last < end)
            b->records[join].last = end;
        return join;
    }
    int32_t r = (*b->n_records)++;
    int64_t bytes = (int64_t)pbl__meta_bytes(&b->g->values[v].meta);
    b->records[r] = (pbl_usage_record){ .size = (bytes + b->align - 1) / b->align * b->align, .first = t, .last = end };
    b->record_value[r] = v;
    b->value_record[v] = r;
    *fresh = 1;
    return r;
}

void pbl__live_build_records(const pbl__live_build *b, const pbl_node *schedule)
{
    for (int32_t t = 0; t < b->reads->n_steps; t++) {
        const pbl__node *nd = &b->g->nodes[schedule[t]];
        int32_t taken[PBL__MAX_IN] = { 0 };
        for (int32_t k = 0; k < nd->n_out; k++) {
            int fresh;
            int32_t r = place(b, nd, k, t, taken, &fresh);
            if (r >= 0 && b->placed)
                b->placed(b->ctx, r, nd->out[k], fresh);
        }
    }
}

/* Whether output `out` of the node at `step` may take input `in`'s record in place. */
static int can_take(void *ctx, pbl_value in, pbl_value out, int32_t step)
{
    const live_state *s = ctx;
    const pbl_graph *g = s->g;
    int32_t r = s->out->value_record[in];
    return r >= 0 && !s->reads.is_output[in] && s->reads.last_read[in] == step &&
           s->out->records[r].last == step + 1 &&
           pbl__meta_bytes(&g->values[in].meta) == pbl__meta_bytes(&g->values[out].meta);
}

static void build_records(live_state *s, int inplace)
{
    pbl_graph_records *o = s->out;
    pbl__live_build b = { .g = s->g, .reads = &s->reads, .records = o->records, .record_value = o->record_value,
                          .value_record = o->value_record, .n_records = &o->n_records, .n_inplace = &o->n_inplace,
                          .align = s->align, .inplace = inplace, .can_take = can_take, .ctx = s };
    pbl__live_build_records(&b, s->order);
}

pbl_status pbl__live_records_alloc(const pbl_graph *g, pbl__mem *m, pbl_usage_record **records,
                                   pbl_value **record_value, int32_t **value_record)
{
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    *records = pbl__mem_alloc(m, nv * sizeof **records);
    *record_value = pbl__mem_alloc(m, nv * sizeof **record_value);
    *value_record = pbl__mem_alloc(m, nv * sizeof **value_record);
    if (!*records || !*record_value || !*value_record)
        return PBL_ERR_NOMEM;
    for (int32_t v = 0; v < g->n_values; v++)
        (*value_record)[v] = -1;
    return PBL_OK;
}

PBL__API pbl_status pbl_graph_liveness(const pbl_graph *g, const pbl_liveness_options *opt, pbl_graph_records *out,
                                       char *err, size_t errlen)
{
    char why[256] = "";
    pbl__errclear(err, errlen);
    if (!g || !out) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "liveness: no %s", g ? "output" : "graph");
    }
    memset(out, 0, sizeof *out);
    pbl_liveness_options o = opt ? *opt : pbl_liveness_options_default();
    pbl__mem m;
    pbl__mem_init(&m, o.allocator);
    pbl_status s = pbl__graph_check(g, &m, err, errlen); /* g is only read */
    if (s != PBL_OK)
        return s;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    live_state st = { .g = g, .out = out, .align = o.align > 0 ? o.align : 1 };
    int32_t *order = NULL;
    s = pbl__graph_schedule_given(g, o.targets, o.n_targets, o.order, o.n_order, &m, &order, &st.n, why, sizeof why);
    if (s != PBL_OK)
        goto done;
    st.order = order;
    out->allocator = o.allocator;
    out->n_values = g->n_values;
    s = pbl__live_records_alloc(g, &m, &out->records, &out->record_value, &out->value_record);
    /* n_values slots (every node has an output, so n_nodes <= n_values): one size to free */
    out->schedule = pbl__mem_alloc(&m, nv * sizeof *out->schedule);
    snprintf(why, sizeof why, "out of memory");
    if (s != PBL_OK || !out->schedule || pbl__live_reads_init(&st.reads, g, order, st.n, &m) != PBL_OK) {
        s = PBL_ERR_NOMEM;
        goto done;
    }
    memcpy(out->schedule, order, (size_t)st.n * sizeof *out->schedule);
    out->n_steps = st.n;
    build_records(&st, o.inplace);
    s = PBL_OK;
done:
    if (order)
        pbl__schedule_free(g, &m, order);
    pbl__live_reads_free(&st.reads, g, &m);
    if (s != PBL_OK) {
        pbl__errf(err, errlen, s, "%s", why);
        pbl_graph_records_free(out);
    }
    return s;
}
