/* The strategies, in the order `--strategy all` prints them (`best` has its own order, the
 * portfolio in graph/planner/plan.c). Each
 * X(name, fills) is implemented as pbl__plan_<name> in graph/planner/strategies/; fills says
 * what it fills in the assignment (plan_internal.h: OFFSETS or OBJECTS). `best` is not
 * listed: it is the dispatcher's (graph/planner/plan.c). */
#ifndef PBL_PLAN_STRATEGIES_H
#define PBL_PLAN_STRATEGIES_H

#define PBL__STRATEGY_LIST(X) \
    X(naive, OFFSETS) \
    X(mxnet, OBJECTS) \
    X(coloring, OBJECTS) \
    X(best_fit_heap, OFFSETS) \
    X(equality, OBJECTS) \
    X(greedy_in_order, OBJECTS) \
    X(greedy_by_breadth, OBJECTS) \
    X(greedy_by_size, OBJECTS) \
    X(greedy_best, OBJECTS) \
    X(min_cost_flow, OBJECTS) \
    X(offset_greedy_by_size, OFFSETS) \
    X(exact, OFFSETS)

#endif
