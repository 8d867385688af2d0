/*
 * exact: an anytime offset planner that proves what it can.
 *
 * With a capacity C (opt.capacity > 0) it answers the decision problem: a packing within C
 * (PBL_OK), PBL_ERR_INFEASIBLE when it proves that none exists, PBL_ERR_TIMEOUT when the
 * budget runs out first. It tries its greedy packings, then a short search at the lower bound
 * (a packing there fits C too, and the tighter capacity prunes harder), then the search at C;
 * the other strategies' packings are consulted when that search has used half its budget.
 *
 * Without a capacity it minimises the arena: from the best greedy packing it tries the lower
 * bound, then (consulting the other strategies, so as never to be worse than any of them)
 * asks for ever smaller capacities, each a decision search (graph/planner/strategies/exact_search.c), until
 * one is proven infeasible (the result is optimal), the lower bound is reached (optimal too),
 * or the budget runs out (the best packing so far, optimal = 0).
 *
 * It starts from an incumbent: its own greedy packings, the others' (below), and `best`'s
 * result so far (in->incumbent), so it never returns anything worse than those. Before the
 * decision searches over the whole instance it tries the window step (exact_window.c: the
 * search on windows of time around the peak step and the other steps where the bound breaks,
 * the records outside placed around them by size — which closes the holes greedy packings
 * leave under the peaks of large real traces),
 * then improves the incumbent locally (exact_local.c: the records around the arena's top taken
 * out and re-packed against the fixed rest while that lowers the arena); those two are what is
 * left when the instance is too large to search as a whole. assignment.bound reports the
 * strongest lower bound it proved (the alignment-raised peak, or one step above a capacity
 * its search proved infeasible): arena / bound is the proven gap.
 *
 * The lower bound is the peak of live bytes, raised for alignment: the records of a section
 * stack with every one but the top padded to the alignment. Every packing returned has passed
 * pbl_plan_verify.
 *
 * Budget. opt.time_limit = 0 (the default, and what `best` and the property tests use) gives
 * a fixed budget of DEFAULT_NODES search nodes (DECIDE_NODES with a capacity: a decision
 * ends at its first packing, and `pebble plan --capacity` should answer without a limit being
 * asked for), so the result is the same on every machine,
 * with a safety net of DEFAULT_SECONDS of CPU time (the budget clock, pbl__plan_now) that only
 * a pathological instance on a slow machine reaches — only then does the result depend on the
 * machine. It stops at once when a
 * greedy packing reaches the lower bound. opt.time_limit > 0 (`pebble plan --time-limit S`)
 * searches for that many seconds of CPU time instead: results then depend on the machine's
 * speed, not on its load. The
 * greedy passes and the other strategies run outside the limit. No randomness is used
 * beyond the search's seeded perturbed preorders (the same on every run).
 *
 * The other strategies are consulted for up to OTHERS_MAX_N records (see offer_others); above
 * that only the O(n log n) ones (mxnet, equality, greedy_in_order) are, beside exact's own
 * greedy passes and search.
 *
 * Granularity. Every canonical packing (see the search) puts each buffer on 0 or on the
 * aligned top of another, so when g divides every size and the alignment, optimal arenas are
 * multiples of g: the lower bound is rounded up to one, and each step asks for g less.
 */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/planner/strategies/exact.h"

#define DEFAULT_NODES   20000 /* search nodes when no time limit is given */
#define DEFAULT_SECONDS 10.0  /* the safety net for that case (CPU seconds): far above what DEFAULT_NODES
                                 take, even under a sanitizer (1 s of wall time was reached there on
                                 a loaded machine, when this was wall-clock time) */
#define DECIDE_NODES    5000000 /* the same with a capacity: a decision stops at its first packing */
#define DECIDE_SECONDS  60.0
#define LB_SHARE        0.1   /* of the budget, for trying the lower bound when minimising */
#define OTHERS_MAX_N    5000  /* records; see offer_others */
#define PROBE_NODES(n)  (20 * (int64_t)(n) + 1000) /* a decision's probe at the lower bound */

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct incumbent {
    int64_t *offset;
    int64_t  arena; /* -1: none yet */
} incumbent;

/* Keeps offsets when they verify and beat the incumbent. */
static void offer(const pbl__plan_in *in, incumbent *best, const int64_t *offset)
{
    pbl_assignment a = { 0 };
    a.offset = (int64_t *)offset;
    a.n_records = in->n;
    pbl__assignment_finish(&a, in->r);
    if (best->arena >= 0 && a.arena >= best->arena)
        return;
    if (pbl_plan_verify(in->r, in->n, &a, in->opt.align, 0, NULL, 0) != PBL_OK)
        return;
    memcpy(best->offset, offset, (size_t)in->n * sizeof *offset);
    best->arena = a.arena;
}

/* The other strategies' packings (not `best`, which would call this one again). Above
 * OTHERS_MAX_N records only the cheap ones: `best` runs the rest anyway and would pay for them
 * twice, and the search has little budget per record left to improve on them. */
/* Strategies that run in O(n log n) whatever the overlap: consulted at every size. */
/* offset_greedy_by_size is one of them since its gap search goes through the space-time index
 * (graph/planner/index/spacetime.h); on real models it is usually the closest, and the local
 * improvement starts from the best of these. */
static const char *const cheap[] = { "mxnet", "equality", "greedy_in_order", "offset_greedy_by_size" };

static int is_cheap(const char *name)
{
    for (size_t i = 0; i < sizeof cheap / sizeof cheap[0]; i++)
        if (strcmp(cheap[i], name) == 0)
            return 1;
    return 0;
}

/* Whether `best` has already weighed name's finished result into in->incumbent (which exact
 * starts from), so that running it again could not lower the incumbent: on large instances
 * that rerun costs as much as the strategy itself (offset_greedy_by_size: a fifth of the
 * budget at 20k records). */
static int already_weighed(const pbl__plan_in *in, const char *name)
{
    if (!in->incumbent)
        return 0;
    for (int32_t i = 0; i < in->n_ran; i++)
        if (strcmp(in->ran[i], name) == 0)
            return 1;
    return 0;
}

static pbl_status offer_others(const pbl__plan_in *in, incumbent *best)
{
    pbl__plan_in o = *in; /* `best`'s deadline included */
    o.opt.capacity = 0;
    o.cut_off = NULL;
    o.why = NULL; /* another strategy's refusal is not exact's */
    for (int32_t i = 0; i < pbl_plan_strategy_count(); i++) {
        const char *name = pbl_plan_strategy_name(i);
        if (!name || strcmp(name, "exact") == 0 || strcmp(name, "best") == 0)
            continue;
        if ((in->n > OTHERS_MAX_N && !is_cheap(name)) || already_weighed(in, name))
            continue;
        /* past the deadline the O(n log n) ones still run (they check no clock), so that exact
         * cut off early is still never worse than they are, unless `best` gave an incumbent
         * (which is already at least as good) */
        if (pbl__plan_expired(in) && (!is_cheap(name) || in->incumbent))
            continue;
        pbl_assignment a = { 0 };
        pbl_status s = pbl__plan_by_name(&o, name, &a);
        if (s == PBL_ERR_NOMEM)
            return s;
        if (s == PBL_OK)
            offer(in, best, a.offset);
        pbl_assignment_free(&a);
    }
    return PBL_OK;
}

/* One decision search for capacity cap, with at most `share` of what is left of the budget
 * and, when max_nodes >= 0, at most that many nodes. */
static pbl__exact_result decide(pbl__exact *e, int64_t cap, pbl__exact_budget *b, double share, int64_t max_nodes,
                                int64_t *offset)
{
    pbl__exact_budget sub = *b;
    if (share < 1.0) {
        if (b->nodes_left >= 0)
            sub.nodes_left = b->nodes + (int64_t)((double)(b->nodes_left - b->nodes) * share);
        if (b->deadline > 0)
            sub.deadline = pbl__plan_now() + (b->deadline - pbl__plan_now()) * share;
    }
    if (max_nodes >= 0 && (sub.nodes_left < 0 || sub.nodes_left > b->nodes + max_nodes))
        sub.nodes_left = b->nodes + max_nodes;
    pbl__exact_result r = pbl__exact_decide(e, cap, &sub, offset);
    b->nodes = sub.nodes;
    if (sub.timed_out && sub.deadline >= b->deadline)
        b->timed_out = 1;
    return r;
}

pbl_status pbl__plan_exact(const pbl__plan_in *in, pbl_assignment *out)
{
    const pbl_allocator *al = in->opt.allocator;
    int32_t n = in->n;
    int64_t cap = in->opt.capacity, align = in->opt.align > 0 ? in->opt.align : 1;
    pbl_status s;
    int deciding = in->opt.capacity > 0;
    pbl__exact_budget budget = { .nodes_left = deciding ? DECIDE_NODES : DEFAULT_NODES,
                                 .deadline = pbl__plan_now() + (deciding ? DECIDE_SECONDS : DEFAULT_SECONDS) };
    if (in->opt.time_limit > 0) {
        budget.nodes_left = -1;
        budget.deadline = pbl__plan_now() + in->opt.time_limit;
    }
    /* `best`'s deadline (the same budget clock, pbl__plan_now) */
    int bound_by_best = in->deadline > 0 && in->deadline < budget.deadline;
    if (bound_by_best)
        budget.deadline = in->deadline;
    int64_t g = align;
    for (int32_t i = 0; i < n; i++)
        g = gcd64(g, in->r[i].size);
    int64_t lb = pbl__records_lower_bound(in->r, n, al);
    if (lb < 0)
        return PBL_ERR_NOMEM;
    lb = (lb + g - 1) / g * g;

    size_t bytes = (size_t)n * sizeof(int64_t);
    incumbent best = { pbl__plan_alloc(al, bytes), -1 };
    int64_t *trial = pbl__plan_alloc(al, bytes);
    pbl__exact *e = NULL;
    int optimal = 0;
    int64_t proven = 0; /* no packing is smaller than this (0: nothing proven yet) */
    s = PBL_ERR_NOMEM;
    if (!best.offset || !trial)
        goto done;
    s = pbl__exact_create(in->r, n, align, al, &e);
    if (s == PBL_ERR_NOMEM)
        goto done;
    if (e) {
        for (int h = 0; h < 4; h++) {
            if (pbl__exact_lowest_fit(e, h, trial) < 0) {
                s = PBL_ERR_NOMEM;
                goto done;
            }
            offer(in, &best, trial);
        }
    } else { /* too large to search: one after another, until the others do better */
        int64_t at = 0;
        for (int32_t i = 0; i < n; i++) {
            at = pbl__align_up(at, align);
            trial[i] = at;
            at += in->r[i].size;
        }
        offer(in, &best, trial);
    }
    if (in->incumbent) /* `best`'s packing so far: the search starts below it */
        offer(in, &best, in->incumbent);
    s = PBL_OK;
    if (best.arena < 0) {
        /* sizes too large to add up in 64 bits (no packing verified): let the others try */
        if ((s = offer_others(in, &best)) != PBL_OK)
            goto done;
        if (best.arena < 0) {
            s = pbl__errf(in->why, in->why_len, PBL_ERR_UNSUPPORTED,
                          "the sizes add up past 2^60 bytes and no other strategy's packing verified");
            goto done;
        }
    }
    if (e && pbl__exact_lower_bound(e) > lb)
        lb = (pbl__exact_lower_bound(e) + g - 1) / g * g;
    optimal = best.arena == lb;

    if (cap > 0) {
        /* the decision problem */
        if (best.arena > cap && lb > cap) {
            s = PBL_ERR_INFEASIBLE;
            goto done;
        }
        if (best.arena <= cap)
            goto done;
        cap -= cap % g; /* arenas are multiples of g; cap >= lb >= g */
        /* the search first (it usually settles it); if it runs out of half its budget, the
         * other strategies' packings might fit; then the rest of the budget */
        pbl__exact_result r = PBL__EXACT_ABORTED;
        if (e && lb < cap) {
            /* a packing within the lower bound fits too, and the tighter capacity prunes
             * harder: a short probe there often settles a loose decision at once */
            r = decide(e, lb, &budget, 0.25, PROBE_NODES(n), trial);
            if (r == PBL__EXACT_FOUND) {
                offer(in, &best, trial);
                optimal = 1;
                goto done;
            }
            if (r == PBL__EXACT_NOMEM) {
                s = PBL_ERR_NOMEM;
                goto done;
            }
            r = PBL__EXACT_ABORTED;
        }
        /* the window step, searching at the lower bound as when minimising (so that a
         * capacity at the arena exact gives without one is met), stopping within cap */
        memcpy(trial, best.offset, bytes);
        if (pbl__exact_window(in->r, n, align, lb, cap, budget.deadline, al, trial) < 0) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        offer(in, &best, trial);
        for (int pass = 0; pass < 2 && r == PBL__EXACT_ABORTED && best.arena > cap; pass++) {
            if (e)
                r = decide(e, cap, &budget, pass == 0 ? 0.5 : 1.0, -1, trial);
            if (r == PBL__EXACT_FOUND)
                offer(in, &best, trial);
            else if (r == PBL__EXACT_ABORTED && pass == 0 && (s = offer_others(in, &best)) != PBL_OK)
                goto done;
        }
        s = r == PBL__EXACT_NOMEM ? PBL_ERR_NOMEM
          : r == PBL__EXACT_INFEASIBLE ? PBL_ERR_INFEASIBLE
          : best.arena <= cap ? PBL_OK : PBL_ERR_TIMEOUT;
        optimal = s == PBL_OK && best.arena == lb;
        goto done;
    }

    /* minimising: the lower bound first (often reached), then ever smaller capacities */
    proven = lb;
    if (!optimal && e) {
        pbl__exact_result r = decide(e, lb, &budget, LB_SHARE, -1, trial);
        if (r == PBL__EXACT_NOMEM) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        if (r == PBL__EXACT_FOUND)
            offer(in, &best, trial);
        else if (r == PBL__EXACT_INFEASIBLE)
            proven = lb + g;
    }
    /* the other strategies' packings, so that exact is never worse than any of them; not
     * needed (nor run) when the lower bound was reached */
    if (best.arena > proven) {
        if ((s = offer_others(in, &best)) != PBL_OK)
            goto done;
    }
    /* the search on windows around the peak step, the greedy for the rest (exact_window.c):
     * where the greedy packings leave holes under the peak, which the local moves (at the
     * top) cannot reach; cheap (node budgets per window), so before them */
    if (best.arena > proven) {
        memcpy(trial, best.offset, bytes);
        if (pbl__exact_window(in->r, n, align, lb, proven, budget.deadline, al, trial) < 0) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        offer(in, &best, trial);
    }
    /* local improvement around the arena's top (exact_local.c): cheap, and the only way down
     * when the instance is too large to search (e == NULL); before the search so that the
     * search starts below what it found */
    if (best.arena > proven) {
        memcpy(trial, best.offset, bytes);
        if (pbl__exact_local(in->r, n, align, budget.deadline, al, trial) < 0) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        offer(in, &best, trial);
        if (budget.deadline > 0 && pbl__plan_now() > budget.deadline)
            budget.timed_out = 1;
    }
    while (e && best.arena - g >= proven) {
        pbl__exact_result r = decide(e, best.arena - g, &budget, 1.0, -1, trial);
        if (r == PBL__EXACT_NOMEM) {
            s = PBL_ERR_NOMEM;
            goto done;
        }
        if (r == PBL__EXACT_FOUND) {
            int64_t before = best.arena;
            offer(in, &best, trial);
            if (best.arena >= before) /* cannot happen: the search only returns fits */
                break;
        } else if (r == PBL__EXACT_INFEASIBLE) {
            proven = best.arena;
        } else {
            break;
        }
    }
    optimal = best.arena <= proven;

done:
    if (bound_by_best && budget.timed_out && in->cut_off)
        *in->cut_off = 1;
    if (s == PBL_OK) {
        memcpy(out->offset, best.offset, bytes);
        out->optimal = optimal;
        out->bound = proven > lb ? proven : lb;
    }
    pbl__exact_destroy(e);
    pbl__plan_free(al, best.offset, bytes);
    pbl__plan_free(al, trial, bytes);
    return s;
}
