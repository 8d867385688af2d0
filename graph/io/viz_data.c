/* pbl_viz_plan_records: every strategy's verified offsets for one set of records, with the
 * live-bytes curve, for pictures that compare strategies (pebble/viz.h). */
#include <string.h>
#include <time.h>

#include "graph/base/errmsg.h"
#include "graph/planner/plan_internal.h"
#include "graph/planner/sort.h"
#include "pebble/viz.h"

PBL__API pbl_viz_options pbl_viz_options_default(void)
{
    pbl_viz_options o = { .allocator = NULL, .align = 1, .time_limit = 0, .strategies = NULL, .n_strategies = 0 };
    return o;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The planner's own pointer for a strategy name, or NULL. */
static const char *strategy_named(const char *name)
{
    for (int32_t i = 0; name && i < pbl_plan_strategy_count(); i++)
        if (strcmp(pbl_plan_strategy_name(i), name) == 0)
            return pbl_plan_strategy_name(i);
    return NULL;
}

/* The live-bytes step function: a difference array over the distinct times. */
static pbl_status live_curve(pbl_viz_plan *p)
{
    const pbl_allocator *al = p->allocator;
    int32_t n = p->n_records;
    size_t cap = 2 * (size_t)n;
    int64_t *pts = pbl__plan_alloc(al, cap * sizeof *pts);
    int64_t *delta = pbl__plan_alloc(al, cap * sizeof *delta);
    if (!pts || !delta) {
        pbl__plan_free(al, pts, cap * sizeof *pts);
        pbl__plan_free(al, delta, cap * sizeof *delta);
        return PBL_ERR_NOMEM;
    }
    int32_t m = n ? pbl__distinct_times(p->records, n, pts) : 0;
    memset(delta, 0, cap * sizeof *delta);
    for (int32_t i = 0; i < n; i++) {
        delta[pbl__search_i64(pts, m, p->records[i].first, 0)] += p->records[i].size;
        delta[pbl__search_i64(pts, m, p->records[i].last, 0)] -= p->records[i].size;
    }
    for (int32_t k = 1; k < m; k++)
        delta[k] += delta[k - 1];
    /* the arrays keep their allocated size (freed with it), only m entries are meaningful */
    p->time = pts;
    p->live = delta;
    p->n_points = m;
    return PBL_OK;
}

PBL__API pbl_status pbl_viz_plan_records(const pbl_usage_record *r, int32_t n, const pbl_viz_options *opt,
                                         pbl_viz_plan *out, char *err, size_t errlen)
{
    pbl_viz_options o = opt ? *opt : pbl_viz_options_default();
    memset(out, 0, sizeof *out);
    out->allocator = o.allocator;
    out->best = -1;
    pbl__errclear(err, errlen);
    if (n < 0 || (n > 0 && !r) || o.align < 1 || o.n_strategies < 0 || (o.n_strategies > 0 && !o.strategies))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "viz: bad arguments (n %d, align %lld, %d strategies)",
                   (int)n, (long long)o.align, (int)o.n_strategies);
    int32_t count = o.strategies ? o.n_strategies : pbl_plan_strategy_count() - 1; /* all but best */
    for (int32_t s = 0; o.strategies && s < count; s++)
        if (!strategy_named(o.strategies[s]))
            return pbl__errf(err, errlen, PBL_ERR_NOT_FOUND, "viz: unknown strategy '%s'",
                       o.strategies[s] ? o.strategies[s] : "(null)");
    out->records = r;
    out->n_records = n;
    out->align = o.align;
    pbl_status s = live_curve(out);
    if (s != PBL_OK)
        return pbl__errf(err, errlen, s, "viz: out of memory for the live-bytes curve of %d records", (int)n);
    for (int32_t j = 0; j < out->n_points; j++) /* the curve's peak is the lower bound */
        if (out->live[j] > out->lower_bound)
            out->lower_bound = out->live[j];
    out->strategies = pbl__plan_alloc(o.allocator, (size_t)count * sizeof *out->strategies);
    if (!out->strategies)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "viz: out of memory for %d strategies", (int)count);
    memset(out->strategies, 0, (size_t)count * sizeof *out->strategies);
    out->n_strategies = count;

    pbl_plan_options po = pbl_plan_options_default();
    po.allocator = o.allocator;
    po.align = o.align;
    po.time_limit = o.time_limit;
    double start = pbl__plan_now(); /* the limit counts CPU seconds, as the planner does */
    for (int32_t k = 0; k < count; k++) {
        pbl_viz_strategy *v = &out->strategies[k];
        v->name = strategy_named(o.strategies ? o.strategies[k] : pbl_plan_strategy_name(k));
        pbl_assignment a;
        if (o.time_limit > 0) { /* what is left, shared by the strategies still to run */
            po.time_limit = (o.time_limit - (pbl__plan_now() - start)) / (double)(count - k);
            if (po.time_limit < 1e-6) /* spent: each still stops at its first clock check */
                po.time_limit = 1e-6;
        }
        double t0 = now_ms();
        s = pbl_plan_records(r, n, v->name, &po, &a, v->error, sizeof v->error);
        v->ms = now_ms() - t0;
        v->cut_off = s == PBL_ERR_TIMEOUT && po.time_limit > 0;
        if (s == PBL_ERR_NOMEM || s == PBL_ERR_INVALID_ARG) /* for every strategy alike: stop */
            return pbl__errf(err, errlen, s, "viz: %s: %s", v->name, v->error);
        if (s != PBL_OK) {
            if (!v->error[0])
                snprintf(v->error, sizeof v->error, "%s", pbl_status_str(s));
            continue;
        }
        char why[sizeof v->error - 32];
        s = pbl_plan_verify(r, n, &a, o.align, 0, why, sizeof why);
        if (s == PBL_OK) {
            v->cut_off = a.cut_off != 0;
            v->valid = 1;
            v->optimal = a.optimal != 0;
            v->arena = a.arena;
            /* the offsets move over: same allocator, same size (n entries) */
            v->offset = a.offset;
            a.offset = NULL;
            if (out->best < 0 || v->arena < out->strategies[out->best].arena)
                out->best = k;
        } else {
            snprintf(v->error, sizeof v->error, "rejected by the verifier: %s", why);
        }
        pbl_assignment_free(&a);
    }
    return PBL_OK;
}

PBL__API void pbl_viz_plan_free(pbl_viz_plan *p)
{
    if (!p)
        return;
    const pbl_allocator *al = p->allocator;
    size_t cap = 2 * (size_t)p->n_records;
    pbl__plan_free(al, p->time, cap * sizeof *p->time);
    pbl__plan_free(al, p->live, cap * sizeof *p->live);
    if (p->strategies) {
        size_t n = (size_t)p->n_records;
        for (int32_t k = 0; k < p->n_strategies; k++)
            pbl__plan_free(al, p->strategies[k].offset, n * sizeof(int64_t));
        pbl__plan_free(al, p->strategies, (size_t)p->n_strategies * sizeof *p->strategies);
    }
    memset(p, 0, sizeof *p);
}
