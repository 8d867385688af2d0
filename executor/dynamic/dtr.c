/*
 * The dynamic runtime: eager execution from a pool under a budget, with DTR eviction and
 * rematerialisation (see executor/dynamic/dtr.h for the rules; the heuristic is heuristic.c).
 *
 * Every node runs in a frame on an explicit stack. A frame walks its node's inputs in order;
 * a resident input is pinned, an evicted one pushes a frame for its producer and the walk
 * resumes when that frame has rebuilt it. With every input pinned the node's outputs are
 * allocated (evicting as needed) and its kernel runs. The frames on the stack form a path in
 * the graph, so the stack never holds more frames than there are nodes: its storage is
 * allocated once, at create, and a chain of any length rematerialises without C recursion.
 *
 * Values that may be evicted. An update overwrites its variable in place, so a tensor
 * recomputed after that would read the new weights and differ from the original. Each tensor
 * gets a deadline: the first step, after its producer's, at which an update overwrites a
 * variable its producer reads, or — taken through its inputs, since an evicted input is
 * recomputed too — its inputs' deadlines. A tensor whose every read (the end of the run, for
 * a kept output) comes before its deadline can be recomputed whenever it is read; any other
 * tensor is never evicted.
 */
#include "executor/dynamic/dtr.h"
#include "graph/base/errmsg.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/ir/cost.h"
#include "graph/ir/registry.h"

/* A tensor is ABSENT until its node first runs, then RESIDENT or EVICTED, and DEAD once its
 * last reader has run. A dead tensor can still be rematerialised, for an evicted tensor that
 * reads it (as in the paper, freeing only drops the bytes); the frame that needed it frees it
 * again. */
enum { T_ABSENT, T_RESIDENT, T_EVICTED, T_DEAD };

typedef struct frame {
    pbl_node node;
    int32_t  k;      /* next input to make resident */
    int32_t  remat;  /* 0: the scheduled run of the node; 1: recomputing `target` */
    pbl_value target;
} frame;

struct pbl__dtr {
    pbl__mem           *mem;
    const pbl_graph    *g;
    const pbl__storage *st;
    const pbl__backend *be;
    void               *bctx;
    pbl_bfc            *pool;
    uint64_t            budget;
    FILE               *log;
    int32_t             nv, n_steps;
    const pbl_node     *schedule;
    /* per value, fixed */
    uint8_t            *dyn;        /* lives in the pool */
    uint8_t            *evictable;
    uint8_t            *kept;       /* a graph output: resident after the run */
    uint64_t           *charge;     /* bytes rounded up to PBL__DTR_CHUNK */
    int32_t            *uses;       /* reads by scheduled nodes (per occurrence) */
    int32_t            *cons_start; /* per value: the scheduled nodes reading it, CSR */
    int32_t            *cons;
    int32_t             n_cons;
    double             *node_cost;  /* per node of the graph: pbl__cost_time. The paper and
                                       MegEngine measure kernel times; an estimate from shapes
                                       keeps every decision reproducible (dry runs, tests that
                                       assert the victim) */
    /* per value, per run */
    uint8_t            *state;
    uint8_t            *held;       /* the pool holds bytes for it */
    int32_t            *uses_left;
    int32_t            *pin;
    int64_t            *last;       /* clock of the last access */
    int32_t            *set;        /* union-find set while evicted, else -1 */
    void              **buf;
    pbl_value          *res;        /* the resident tensors (candidates are among them) */
    int32_t            *res_pos;    /* per value: index in res, -1 when not resident */
    int32_t             n_res;
    pbl__dtr_dsu        dsu;
    int32_t            *roots;      /* scratch for neighbour sets */
    int32_t             max_neigh;
    frame              *stack;
    int32_t             depth;
    /* per run counters */
    uint64_t            used, peak;
    int64_t             clock, evictions, remats;
    int32_t             max_depth;
    uint64_t            run;
    int                 dry;        /* account and decide only: no pool, no kernels */
    /* facts */
    uint64_t            min_budget, unlimited_peak, last_peak;
    int64_t             last_evictions, last_remats;
    int32_t             last_max_depth;
    char                kerr[256];
    void               *scratch;    /* CPU kernels' scratch: the most a scheduled node needs */
    size_t              scratch_bytes;
};

#define ARR(d, p, n) ((p) = pbl__mem_calloc((d)->mem, (size_t)((n) ? (n) : 1) * sizeof *(p)))
#define FREE(d, p, n) pbl__mem_free((d)->mem, (p), (size_t)((n) ? (n) : 1) * sizeof *(p))

static uint64_t round_chunk(uint64_t x) { return (x + PBL__DTR_CHUNK - 1) / PBL__DTR_CHUNK * PBL__DTR_CHUNK; }

static const char *vname(const pbl__dtr *d, pbl_value v) { return d->g->values[v].name; }

/* One row of the eviction log: event,run,clock,value,bytes,detail (evict: h_DTR^eq;
 * remat: how many rematerialisations it is nested in, 1 for one a node's input needs). */
static void log_row(pbl__dtr *d, const char *event, pbl_value v, double score)
{
    if (d->log && !d->dry)
        fprintf(d->log, "%s,%" PRIu64 ",%" PRId64 ",%s,%" PRIu64 ",%.6g\n", event, d->run, d->clock, vname(d, v),
                d->charge[v], score);
}

/* Moves v to state st, keeping the resident list in step. */
static void set_state(pbl__dtr *d, pbl_value v, int st)
{
    if (st == T_RESIDENT && d->res_pos[v] < 0) {
        d->res_pos[v] = d->n_res;
        d->res[d->n_res++] = v;
    } else if (st != T_RESIDENT && d->res_pos[v] >= 0) {
        pbl_value last = d->res[--d->n_res];
        d->res[d->res_pos[v]] = last;
        d->res_pos[last] = d->res_pos[v];
        d->res_pos[v] = -1;
    }
    d->state[v] = (uint8_t)st;
}

/* ---- the pool ------------------------------------------------------------------------------ */

static void release(pbl__dtr *d, pbl_value v)
{
    if (!d->held[v])
        return;
    if (!d->dry)
        pbl_bfc_free(d->pool, d->buf[v]); /* cannot fail: buf[v] is a live allocation */
    d->buf[v] = NULL;
    d->held[v] = 0;
    d->used -= d->charge[v];
}

/* The distinct union-find roots of v's evicted neighbours (its producer's inputs and the
 * outputs of its readers) into d->roots; returns how many. */
static int32_t evicted_neighbours(pbl__dtr *d, pbl_value v)
{
    const pbl_graph *g = d->g;
    int32_t n = 0;
    const pbl__node *p = &g->nodes[g->values[v].producer];
    for (int32_t pass = 0; pass < 2; pass++) {
        int32_t lo = pass ? d->cons_start[v] : 0, hi = pass ? d->cons_start[v + 1] : 1;
        for (int32_t c = lo; c < hi; c++) {
            const pbl__node *nd = pass ? &g->nodes[d->cons[c]] : p;
            const pbl_value *vals = pass ? nd->out : nd->in;
            int32_t nvals = pass ? nd->n_out : nd->n_in;
            for (int32_t k = 0; k < nvals; k++) {
                pbl_value u = vals[k];
                if (!d->dyn[u] || (d->state[u] != T_EVICTED && d->state[u] != T_DEAD) || d->set[u] < 0)
                    continue;
                int32_t r = pbl__dtr_dsu_find(&d->dsu, d->set[u]);
                int32_t j = 0;
                while (j < n && d->roots[j] != r)
                    j++;
                if (j == n)
                    d->roots[n++] = r;
            }
        }
    }
    return n;
}

/* The resident, unpinned, evictable tensor with the smallest h_DTR^eq, or -1; its score in
 * *score. */
static pbl_value pick_victim(pbl__dtr *d, double *score)
{
    pbl_value best = -1;
    double best_h = 0;
    for (int32_t i = 0; i < d->n_res; i++) {
        pbl_value v = d->res[i];
        if (d->pin[v] || !d->evictable[v])
            continue;
        int32_t n = evicted_neighbours(d, v);
        double nc = 0;
        for (int32_t j = 0; j < n; j++)
            nc += d->dsu.set[d->roots[j]].cost;
        double h = pbl__dtr_score(d->node_cost[d->g->values[v].producer], nc, d->charge[v], d->clock, d->last[v]);
        if (best < 0 || h < best_h || (h == best_h && v < best)) { /* ties: the older value */
            best = v;
            best_h = h;
        }
    }
    *score = best_h;
    return best;
}

/* Drops v's bytes: evicted (still to be read) or dead (read by no later node, but maybe by a
 * rematerialisation). Either way it joins the union-find with its evicted neighbours, as
 * MegEngine drops rather than frees a tensor that a recomputation may still need. */
static pbl_status drop(pbl__dtr *d, pbl_value v, int st, char *err, size_t errlen)
{
    int32_t n = evicted_neighbours(d, v);
    int32_t s = pbl__dtr_dsu_add(&d->dsu, d->mem, d->node_cost[d->g->values[v].producer]);
    if (s < 0)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory dropping '%s'", vname(d, v));
    for (int32_t j = 0; j < n; j++)
        pbl__dtr_dsu_union(&d->dsu, s, d->roots[j]);
    release(d, v);
    set_state(d, v, st);
    d->set[v] = s;
    return PBL_OK;
}

static pbl_status evict(pbl__dtr *d, pbl_value v, double score, char *err, size_t errlen)
{
    log_row(d, "evict", v, score);
    d->evictions++;
    return drop(d, v, T_EVICTED, err, errlen);
}

/* Pool bytes for v, evicting until the budget holds them. */
static pbl_status acquire(pbl__dtr *d, pbl_value v, const pbl__node *for_node, char *err, size_t errlen)
{
    uint64_t c = d->charge[v];
    while (d->budget && d->used + c > d->budget) {
        double score;
        pbl_value victim = pick_victim(d, &score);
        if (victim < 0)
            return pbl__errf(err, errlen, PBL_ERR_BUDGET,
                        "dynamic mode: budget %" PRIu64 " bytes: node '%s' needs %" PRIu64 " bytes for '%s' with %" PRIu64
                        " bytes held by pinned or unevictable tensors",
                        d->budget, for_node->name, c, vname(d, v), d->used);
        pbl_status s = evict(d, victim, score, err, errlen);
        if (s != PBL_OK)
            return s;
    }
    size_t bytes = pbl__meta_bytes(&d->g->values[v].meta);
    if (!d->dry && pbl_bfc_alloc(d->pool, bytes ? bytes : 1, &d->buf[v]) != PBL_OK)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: allocating '%s': %s", vname(d, v),
                    pbl_bfc_errmsg(d->pool));
    d->held[v] = 1;
    d->used += c;
    if (d->used > d->peak)
        d->peak = d->used;
    return PBL_OK;
}

/* ---- running one node (its inputs are resident and pinned) --------------------------------- */

static pbl_status exec_node(pbl__dtr *d, void **ptr, const frame *f, char *err, size_t errlen)
{
    const pbl_graph *g = d->g;
    const pbl__node *nd = &g->nodes[f->node];
    pbl_status s = PBL_OK;
    uint8_t fresh[PBL__MAX_OUT] = { 0 }; /* allocated here (else: a resident sibling rewritten) */
    for (int32_t k = 0; k < nd->n_out && s == PBL_OK; k++) {
        pbl_value v = nd->out[k];
        if (!d->dyn[v] || d->state[v] == T_RESIDENT)
            continue;
        s = acquire(d, v, nd, err, errlen);
        if (s == PBL_OK) {
            fresh[k] = 1;
            d->pin[v]++; /* the node's other outputs must not evict it */
        }
    }
    if (s != PBL_OK)
        return s;
    if (!d->dry) {
        void *in[PBL__MAX_IN], *out[PBL__MAX_OUT];
        pbl__meta in_meta[PBL__MAX_IN], out_meta[PBL__MAX_OUT];
        for (int32_t k = 0; k < nd->n_in; k++) {
            in[k] = d->dyn[nd->in[k]] ? d->buf[nd->in[k]] : ptr[nd->in[k]];
            in_meta[k] = g->values[nd->in[k]].meta;
        }
        for (int32_t k = 0; k < nd->n_out; k++) {
            out[k] = d->dyn[nd->out[k]] ? d->buf[nd->out[k]] : ptr[nd->out[k]];
            out_meta[k] = g->values[nd->out[k]].meta;
        }
        d->kerr[0] = '\0';
        pbl__kargs a = { .in = in, .out = out, .in_meta = in_meta, .out_meta = out_meta, .attr = nd->attr,
                         .n_in = nd->n_in, .n_out = nd->n_out, .run = d->run, .err = d->kerr,
                         .errlen = sizeof d->kerr, .scratch = d->scratch, .scratch_bytes = d->scratch_bytes };
        const pbl__op *op = pbl__op_get(nd->op);
        /* eager: the kernel must be done before its inputs can be freed or evicted */
        s = d->be->run(d->bctx, 0, op, &a);
        const pbl__kargs *failed = NULL;
        pbl_status ks = d->be->sync(d->bctx, &failed);
        if (s == PBL_OK)
            s = ks;
        if (s != PBL_OK)
            return pbl__errf(err, errlen, s, "node '%s' (%s): %s", nd->name, op->name,
                        d->kerr[0] ? d->kerr : "the backend failed");
    }
    d->clock++;
    for (int32_t k = 0; k < nd->n_in; k++) {
        pbl_value v = nd->in[k];
        if (!d->dyn[v])
            continue;
        d->pin[v]--;
        d->last[v] = d->clock;
        if (!f->remat)
            d->uses_left[v]--;
        if (d->uses_left[v] == 0 && !d->kept[v] && !d->pin[v] && d->state[v] == T_RESIDENT &&
            (s = drop(d, v, T_DEAD, err, errlen)) != PBL_OK)
            return s;
    }
    for (int32_t k = 0; k < nd->n_out; k++) {
        pbl_value v = nd->out[k];
        if (!d->dyn[v])
            continue;
        if (fresh[k])
            d->pin[v]--;
        d->last[v] = d->clock;
        if (f->remat && v == f->target)
            log_row(d, "remat", v, (double)(d->depth - 1));
        d->set[v] = -1;
        if (d->uses_left[v] == 0 && !d->kept[v] && v != f->target) {
            /* nobody reads it (an unused output, or a dead sibling recomputed) */
            if ((s = drop(d, v, T_DEAD, err, errlen)) != PBL_OK)
                return s;
        } else {
            set_state(d, v, T_RESIDENT);
        }
    }
    if (f->remat)
        d->remats++;
    return PBL_OK;
}

/* Runs the frames on the stack until it is empty. */
static pbl_status run_frames(pbl__dtr *d, void **ptr, char *err, size_t errlen)
{
    const pbl_graph *g = d->g;
    while (d->depth > 0) {
        frame *f = &d->stack[d->depth - 1];
        const pbl__node *nd = &g->nodes[f->node];
        int pushed = 0;
        while (f->k < nd->n_in && !pushed) {
            pbl_value v = nd->in[f->k];
            if (!d->dyn[v]) {
                f->k++;
            } else if (d->state[v] == T_RESIDENT) {
                d->pin[v]++;
                f->k++;
            } else if (d->state[v] == T_EVICTED || d->state[v] == T_DEAD) {
                if (d->depth >= d->n_steps + 1)
                    return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "dynamic mode: internal error: frame stack overflow");
                d->stack[d->depth++] = (frame){ .node = g->values[v].producer, .k = 0, .remat = 1, .target = v };
                if (d->depth > d->max_depth)
                    d->max_depth = d->depth;
                pushed = 1;
            } else {
                return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG,
                            "dynamic mode: internal error: node '%s' reads '%s', which is not computed yet", nd->name,
                            vname(d, v));
            }
        }
        if (pushed)
            continue;
        frame done = *f;
        pbl_status s = exec_node(d, ptr, &done, err, errlen);
        if (s != PBL_OK)
            return s;
        d->depth--;
    }
    return PBL_OK;
}

static void reset_run(pbl__dtr *d)
{
    for (pbl_value v = 0; v < d->nv; v++) {
        release(d, v);
        d->state[v] = T_ABSENT;
        d->res_pos[v] = -1;
        d->uses_left[v] = d->uses[v];
        d->pin[v] = 0;
        d->last[v] = 0;
        d->set[v] = -1;
    }
    d->dsu.n = 0;
    d->n_res = 0;
    d->depth = d->max_depth = 0;
    d->used = d->peak = 0;
    d->clock = d->evictions = d->remats = 0;
}

static pbl_status run_schedule(pbl__dtr *d, void **ptr, char *err, size_t errlen)
{
    reset_run(d);
    pbl_status s = PBL_OK;
    for (int32_t t = 0; t < d->n_steps && s == PBL_OK; t++) {
        d->stack[d->depth++] = (frame){ .node = d->schedule[t], .k = 0, .remat = 0, .target = -1 };
        s = run_frames(d, ptr, err, errlen);
    }
    /* Kept outputs end resident: pin those that are, bring back the evicted ones. */
    for (pbl_value v = 0; v < d->nv && s == PBL_OK; v++) {
        if (!d->dyn[v] || !d->kept[v])
            continue;
        if (d->state[v] == T_EVICTED) {
            d->stack[d->depth++] = (frame){ .node = d->g->values[v].producer, .k = 0, .remat = 1, .target = v };
            s = run_frames(d, ptr, err, errlen);
        }
        if (s == PBL_OK)
            d->pin[v]++;
    }
    if (s == PBL_OK && !d->dry)
        for (pbl_value v = 0; v < d->nv; v++)
            if (d->dyn[v] && d->kept[v])
                ptr[v] = d->buf[v];
    d->depth = 0;
    return s;
}

/* A run that only accounts: the decisions of a real run with this budget. */
static pbl_status dry_run(pbl__dtr *d, uint64_t budget, uint64_t *peak, char *err, size_t errlen)
{
    uint64_t keep = d->budget;
    d->budget = budget;
    d->dry = 1;
    pbl_status s = run_schedule(d, NULL, err, errlen);
    *peak = d->peak;
    reset_run(d);
    d->dry = 0;
    d->budget = keep;
    return s;
}

/* ---- create --------------------------------------------------------------------------------- */

/* The first step after `after` at which an update overwrites variable w (INT32_MAX: none). */
static int32_t next_write(const int32_t *ws, const int32_t *w_step, int32_t w, int32_t after)
{
    int32_t best = INT32_MAX;
    for (int32_t i = ws[w]; i < ws[w + 1]; i++)
        if (w_step[i] > after && w_step[i] < best)
            best = w_step[i];
    return best;
}

/* The variable whose storage v is (itself, or the variable an update aliases), else -1. */
static pbl_value storage_var(const pbl__storage *st, const pbl_graph *g, pbl_value v)
{
    if (st->place[v] == PBL__PLACE_ALIAS)
        return st->alias[v];
    return g->values[v].producer == PBL_NONE ? v : -1;
}

/* Evictable: every read of a tensor comes before its deadline (see the top of the file). */
static pbl_status find_evictable(pbl__dtr *d, char *err, size_t errlen)
{
    const pbl_graph *g = d->g;
    const pbl__storage *st = d->st;
    int32_t nv = d->nv, n = d->n_steps, nw = 0;
    int32_t *ws = NULL, *w_step = NULL, *deadline = NULL, *last_read = NULL;
    pbl_status s = PBL_OK;
    for (int32_t t = 0; t < n; t++)
        nw += pbl__op_get(g->nodes[d->schedule[t]].op)->n_mutates;
    if (!ARR(d, ws, nv + 1) || !ARR(d, w_step, nw) || !ARR(d, deadline, nv) || !ARR(d, last_read, nv)) {
        s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory");
        goto done;
    }
    /* the steps at which each variable is overwritten, CSR by variable */
    for (int32_t pass = 0; pass < 2; pass++) {
        for (int32_t t = 0; t < n; t++) {
            const pbl__node *nd = &g->nodes[d->schedule[t]];
            const pbl__op *op = pbl__op_get(nd->op);
            for (int32_t m = 0; m < op->n_mutates; m++) {
                pbl_value w = storage_var(st, g, nd->in[op->mutates[m][1]]);
                if (w < 0)
                    continue;
                if (pass == 0)
                    ws[w + 1]++;
                else
                    w_step[ws[w]++] = t;
            }
        }
        if (pass == 0)
            for (int32_t v = 0; v < nv; v++)
                ws[v + 1] += ws[v];
        else /* the fill advanced each start to the next variable's: shift back */
            for (int32_t v = nv; v > 0; v--)
                ws[v] = ws[v - 1];
        if (pass == 1)
            ws[0] = 0;
    }
    for (int32_t v = 0; v < nv; v++) {
        deadline[v] = INT32_MAX;
        last_read[v] = d->kept[v] ? n : -1;
    }
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[d->schedule[t]];
        int32_t dl = INT32_MAX;
        for (int32_t k = 0; k < nd->n_in; k++) {
            pbl_value u = nd->in[k];
            if (d->dyn[u]) {
                if (deadline[u] < dl)
                    dl = deadline[u];
                if (t > last_read[u])
                    last_read[u] = t;
                continue;
            }
            pbl_value w = storage_var(st, g, u);
            if (w >= 0) {
                int32_t nx = next_write(ws, w_step, w, t);
                if (nx < dl)
                    dl = nx;
            }
        }
        for (int32_t k = 0; k < nd->n_out; k++)
            deadline[nd->out[k]] = dl;
    }
    for (int32_t v = 0; v < nv; v++)
        d->evictable[v] = d->dyn[v] && last_read[v] < deadline[v];
done:
    FREE(d, ws, nv + 1);
    FREE(d, w_step, nw);
    FREE(d, deadline, nv);
    FREE(d, last_read, nv);
    return s;
}

static pbl_status build_tables(pbl__dtr *d, char *err, size_t errlen)
{
    const pbl_graph *g = d->g;
    const pbl__storage *st = d->st;
    int32_t nv = d->nv, n = d->n_steps;
    if (!ARR(d, d->dyn, nv) || !ARR(d, d->evictable, nv) || !ARR(d, d->kept, nv) || !ARR(d, d->charge, nv) ||
        !ARR(d, d->uses, nv) || !ARR(d, d->cons_start, nv + 1) || !ARR(d, d->node_cost, g->n_nodes) ||
        !ARR(d, d->state, nv) || !ARR(d, d->held, nv) || !ARR(d, d->uses_left, nv) || !ARR(d, d->pin, nv) ||
        !ARR(d, d->last, nv) || !ARR(d, d->set, nv) || !ARR(d, d->buf, nv) ||
        !ARR(d, d->stack, n + 1) || !ARR(d, d->res, nv) || !ARR(d, d->res_pos, nv))
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory");
    for (pbl_value v = 0; v < nv; v++) {
        d->dyn[v] = st->place[v] == PBL__PLACE_DYNAMIC;
        d->kept[v] = d->dyn[v] && st->kept[v];
        d->charge[v] = round_chunk(pbl__meta_bytes(&g->values[v].meta));
        if (d->charge[v] == 0)
            d->charge[v] = PBL__DTR_CHUNK;
        d->set[v] = -1;
    }
    d->n_cons = 0;
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[d->schedule[t]];
        pbl__cost c = pbl__node_cost(g, d->schedule[t]);
        d->node_cost[d->schedule[t]] = (double)pbl__cost_time(&c);
        for (int32_t k = 0; k < nd->n_in; k++)
            if (d->dyn[nd->in[k]]) {
                d->uses[nd->in[k]]++;
                d->cons_start[nd->in[k] + 1]++;
                d->n_cons++;
            }
    }
    for (pbl_value v = 0; v < nv; v++)
        d->cons_start[v + 1] += d->cons_start[v];
    if (!ARR(d, d->cons, d->n_cons))
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory");
    /* readers of each value (a node reading it twice is listed twice: harmless for roots) */
    int32_t *fill = NULL;
    if (!ARR(d, fill, nv))
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory");
    int32_t max_neigh = 1;
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[d->schedule[t]];
        for (int32_t k = 0; k < nd->n_in; k++) {
            pbl_value v = nd->in[k];
            if (d->dyn[v])
                d->cons[d->cons_start[v] + fill[v]++] = d->schedule[t];
        }
    }
    FREE(d, fill, nv);
    /* the most neighbours any tensor has: the scratch for root sets */
    for (pbl_value v = 0; v < nv; v++) {
        if (!d->dyn[v])
            continue;
        int32_t c = g->nodes[g->values[v].producer].n_in;
        for (int32_t i = d->cons_start[v]; i < d->cons_start[v + 1]; i++)
            c += g->nodes[d->cons[i]].n_out;
        if (c > max_neigh)
            max_neigh = c;
    }
    d->max_neigh = max_neigh;
    if (!ARR(d, d->roots, max_neigh))
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory");
    /* the largest single-node working set: its inputs and outputs in the pool at once */
    uint64_t lb = 0;
    for (int32_t t = 0; t < n; t++) {
        const pbl__node *nd = &g->nodes[d->schedule[t]];
        uint64_t ws = 0;
        for (int32_t k = 0; k < nd->n_in; k++) {
            pbl_value v = nd->in[k];
            int dup = 0;
            for (int32_t j = 0; j < k; j++)
                dup |= nd->in[j] == v;
            if (d->dyn[v] && !dup)
                ws += d->charge[v];
        }
        for (int32_t k = 0; k < nd->n_out; k++)
            if (d->dyn[nd->out[k]])
                ws += d->charge[nd->out[k]];
        if (ws > lb)
            lb = ws;
    }
    d->min_budget = lb;
    return find_evictable(d, err, errlen);
}

/* The budget must run the schedule; when it cannot, bisect dry runs between the largest
 * working set (nothing smaller can work) and the unlimited peak (always works) for the
 * smallest budget that does, and name it. Dry runs are deterministic, so the named budget
 * works in a real run. (DTR is not monotone in the budget: a budget between two that work
 * may fail; bisection names one that works, as small as it finds.) */
static pbl_status check_budget(pbl__dtr *d, char *err, size_t errlen)
{
    char why[256] = "";
    uint64_t peak = 0;
    pbl_status s = dry_run(d, 0, &peak, why, sizeof why);
    if (s != PBL_OK)
        return pbl__errf(err, errlen, s, "%s", why);
    d->unlimited_peak = peak;
    if (!d->budget || d->budget >= peak)
        return PBL_OK;
    if (d->budget >= d->min_budget) {
        s = dry_run(d, d->budget, &peak, why, sizeof why);
        if (s != PBL_ERR_BUDGET)
            return s == PBL_OK ? PBL_OK : pbl__errf(err, errlen, s, "%s", why);
    }
    uint64_t lo = d->budget / PBL__DTR_CHUNK * PBL__DTR_CHUNK, hi = d->unlimited_peak;
    if (d->min_budget > PBL__DTR_CHUNK && lo < d->min_budget - PBL__DTR_CHUNK)
        lo = d->min_budget - PBL__DTR_CHUNK; /* below the working set nothing works */
    while (hi - lo > PBL__DTR_CHUNK) {
        uint64_t mid = (lo + (hi - lo) / 2) / PBL__DTR_CHUNK * PBL__DTR_CHUNK;
        if (mid <= lo)
            mid = lo + PBL__DTR_CHUNK;
        char w2[256];
        s = dry_run(d, mid, &peak, w2, sizeof w2);
        if (s == PBL_OK)
            hi = mid;
        else if (s == PBL_ERR_BUDGET)
            lo = mid;
        else
            return pbl__errf(err, errlen, s, "%s", w2);
    }
    return pbl__errf(err, errlen, PBL_ERR_BUDGET,
                "dynamic mode: a budget of %" PRIu64 " bytes cannot run this schedule (%s); the smallest budget that "
                "works is %" PRIu64 " bytes (the largest single-node working set is %" PRIu64
                ", the peak without a budget %" PRIu64 ")",
                d->budget, why[0] ? why : "smaller than the largest single-node working set", hi, d->min_budget,
                d->unlimited_peak);
}

void pbl__dtr_destroy(pbl__dtr *d)
{
    if (!d)
        return;
    int32_t nv = d->nv;
    pbl_bfc_destroy(d->pool); /* every chunk with it */
    FREE(d, d->dyn, nv);
    FREE(d, d->evictable, nv);
    FREE(d, d->kept, nv);
    FREE(d, d->charge, nv);
    FREE(d, d->uses, nv);
    FREE(d, d->cons_start, nv + 1);
    FREE(d, d->cons, d->n_cons);
    FREE(d, d->node_cost, d->g->n_nodes);
    FREE(d, d->state, nv);
    FREE(d, d->held, nv);
    FREE(d, d->uses_left, nv);
    FREE(d, d->pin, nv);
    FREE(d, d->last, nv);
    FREE(d, d->set, nv);
    FREE(d, d->buf, nv);
    FREE(d, d->roots, d->max_neigh);
    FREE(d, d->stack, d->n_steps + 1);
    FREE(d, d->res, nv);
    FREE(d, d->res_pos, nv);
    pbl__dtr_dsu_free(&d->dsu, d->mem);
    pbl__mem_free(d->mem, d->scratch, d->scratch_bytes);
    pbl__mem_free(d->mem, d, sizeof *d);
}

/* The most scratch a scheduled node's CPU kernel needs (rematerialisation reruns scheduled
 * nodes only), allocated once here: kernels never allocate. */
static pbl_status alloc_scratch(pbl__dtr *d)
{
    if (d->be != &pbl__backend_cpu)
        return PBL_OK;
    size_t most = 0;
    for (int32_t t = 0; t < d->n_steps; t++) {
        const pbl__node *nd = &d->g->nodes[d->schedule[t]];
        const pbl__op *op = pbl__op_get(nd->op);
        if (!op->cpu_scratch)
            continue;
        pbl__meta in_meta[PBL__MAX_IN], out_meta[PBL__MAX_OUT];
        for (int32_t k = 0; k < nd->n_in; k++)
            in_meta[k] = d->g->values[nd->in[k]].meta;
        for (int32_t k = 0; k < nd->n_out; k++)
            out_meta[k] = d->g->values[nd->out[k]].meta;
        pbl__kargs a = { .in_meta = in_meta, .out_meta = out_meta, .attr = nd->attr, .n_in = nd->n_in,
                         .n_out = nd->n_out };
        size_t need = op->cpu_scratch(&a);
        if (need > most)
            most = need;
    }
    if (most && !(d->scratch = pbl__mem_alloc(d->mem, most)))
        return PBL_ERR_NOMEM;
    d->scratch_bytes = most;
    return PBL_OK;
}

pbl_status pbl__dtr_create(pbl__dtr **out, const pbl__dtr_config *c, char *err, size_t errlen)
{
    *out = NULL;
    pbl__dtr *d = pbl__mem_calloc(c->mem, sizeof *d);
    if (!d)
        return pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory");
    d->mem = c->mem;
    d->g = c->g;
    d->st = c->st;
    d->be = c->be;
    d->bctx = c->bctx;
    d->budget = c->budget;
    d->log = c->log;
    d->nv = c->g->n_values;
    d->n_steps = c->st->live.n_steps;
    d->schedule = c->st->live.schedule;
    pbl_status s = build_tables(d, err, errlen);
    if (s == PBL_OK && alloc_scratch(d) != PBL_OK)
        s = pbl__errf(err, errlen, PBL_ERR_NOMEM, "dynamic mode: out of memory for the kernels' scratch");
    if (s == PBL_OK)
        s = check_budget(d, err, errlen);
    if (s == PBL_OK) {
        /* Regions from the backend; no limit (the budget bounds in-use bytes, and regions may
         * exceed it by fragmentation, reported in the stats); every chunk split down to its
         * rounded request (leftover >= 256 = fraction * limit), so charges are exact. */
        pbl_bfc_options bo = pbl_bfc_options_default();
        bo.limit = (size_t)1 << 52;
        bo.split_waste_fraction = (double)PBL__DTR_CHUNK / (double)bo.limit;
        bo.sub = (pbl_bfc_sub_allocator){ .ctx = c->bctx, .alloc = c->be->alloc, .free = c->be->free };
        bo.allocator = c->mem->hook.alloc ? &c->mem->hook : NULL;
        bo.name = "dynamic";
        bo.trace = c->trace;
        s = pbl_bfc_create(&d->pool, &bo, err, errlen);
    }
    if (s != PBL_OK) {
        pbl__dtr_destroy(d);
        return s;
    }
    if (d->log)
        fprintf(d->log, "event,run,clock,value,bytes,detail\n");
    *out = d;
    return PBL_OK;
}

pbl_status pbl__dtr_run(pbl__dtr *d, void **ptr, uint64_t run, char *err, size_t errlen)
{
    d->run = run;
    for (pbl_value v = 0; v < d->nv; v++)
        if (d->kept[v])
            ptr[v] = NULL; /* freed below; readable again when this run succeeds */
    pbl_status s = run_schedule(d, ptr, err, errlen);
    d->last_max_depth = d->max_depth;
    d->last_peak = d->peak;
    d->last_evictions = d->evictions;
    d->last_remats = d->remats;
    return s;
}

void pbl__dtr_stats_get(const pbl__dtr *d, pbl__dtr_stats *out)
{
    pbl_bfc_stats bs;
    pbl_bfc_stats_get(d->pool, &bs);
    *out = (pbl__dtr_stats){ .budget = d->budget, .min_budget = d->min_budget, .peak = d->last_peak,
                             .unlimited_peak = d->unlimited_peak, .pool_bytes = bs.reserved,
                             .pool_peak_in_use = bs.peak_in_use,
                             .evictions = d->last_evictions, .remat_ops = d->last_remats,
                             .max_depth = d->last_max_depth };
}
