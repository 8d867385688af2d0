/* The strategies, in the order `best` tries them and `--strategy all` prints them. Each
 * X(name) is implemented as pbl__plan_<name> in graph/plan_<file>.c. `best` is not listed:
 * it is the dispatcher's (graph/planner/plan.c). */
#ifndef PBL_PLAN_STRATEGIES_H
#define PBL_PLAN_STRATEGIES_H

#define PBL__STRATEGY_LIST(X) \
    X(naive) \
    X(mxnet) \
    X(coloring) \
    X(best_fit_heap) \
    X(equality) \
    X(greedy_in_order) \
    X(greedy_by_breadth) \
    X(greedy_by_size) \
    X(greedy_best) \
    X(min_cost_flow) \
    X(offset_greedy_by_size) \
    X(exact)

#endif
