/* The executor's two baselines, each with one definition (pebble/exec.h, pebble/plan.h):
 * naive_bytes is the `naive` strategy's arena on the records liveness gives the graph (in-place
 * sharing taken), exactly what `pebble plan GRAPH --strategy naive` computes; unshared_bytes is
 * every node output in its own 64-aligned bytes, the arena of PBL_STORAGE_UNSHARED. Both are
 * recomputed here through the public planner and compared with what executors in every
 * storage mode report; mlp_train's figures are the ones the README quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"
#include "zoo.h"

/* The `naive` strategy's arena on the graph's records, with or without in-place sharing,
 * planned at the executor's alignment, as the command line plans a graph. */
static uint64_t naive_arena(const pbl_graph *g, int inplace)
{
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.align = 64;
    lo.inplace = inplace;
    pbl_graph_records gr;
    char err[256];
    assert_int_equal(pbl_graph_liveness(g, &lo, &gr, err, sizeof err), PBL_OK);
    pbl_plan_options po = pbl_plan_options_default();
    po.align = 64;
    pbl_assignment a;
    assert_int_equal(pbl_plan_records(gr.records, gr.n_records, "naive", &po, &a, err, sizeof err), PBL_OK);
    uint64_t arena = (uint64_t)a.arena;
    pbl_assignment_free(&a);
    pbl_graph_records_free(&gr);
    return arena;
}

static pbl_exec_stats stats_of(const pbl_graph *g, pbl_storage_mode mode)
{
    pbl_exec_options o = pbl_exec_options_default();
    o.storage = mode;
    pbl_exec *e;
    char err[256];
    pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
    if (s != PBL_OK)
        print_error("exec_create: %s\n", err);
    assert_int_equal(s, PBL_OK);
    pbl_exec_stats st;
    assert_int_equal(pbl_exec_stats_get(e, &st), PBL_OK);
    pbl_exec_destroy(e);
    return st;
}

static void check_model(const char *name, uint64_t want_naive, uint64_t want_unshared)
{
    pbl_graph *g;
    char err[256];
    assert_int_equal(zoo_build(name, 0, &g, err, sizeof err), PBL_OK);
    uint64_t naive = naive_arena(g, 1), unshared = naive_arena(g, 0);
    pbl_exec_stats planned = stats_of(g, PBL_STORAGE_PLANNED);
    pbl_exec_stats apart = stats_of(g, PBL_STORAGE_UNSHARED);
    pbl_exec_stats dynamic = stats_of(g, PBL_STORAGE_DYNAMIC);
    printf("  %-12s naive %llu, unshared %llu (planner); planned executor: arena %llu, naive %llu, unshared "
           "%llu, %d in place; unshared executor: arena %llu, naive %llu\n",
           name, (unsigned long long)naive, (unsigned long long)unshared, (unsigned long long)planned.arena_bytes,
           (unsigned long long)planned.naive_bytes, (unsigned long long)planned.unshared_bytes, planned.inplace,
           (unsigned long long)apart.arena_bytes, (unsigned long long)apart.naive_bytes);
    /* a planned executor's naive figure is the naive strategy on its own (in-place) records */
    assert_int_equal(planned.naive_bytes, naive);
    /* unshared: the same in every mode, and the arena of the unshared mode */
    assert_int_equal(planned.unshared_bytes, unshared);
    assert_int_equal(apart.unshared_bytes, unshared);
    assert_int_equal(dynamic.unshared_bytes, unshared);
    assert_int_equal(apart.arena_bytes, unshared);
    /* with no in-place sharing there is one record per value: the two baselines coincide */
    assert_int_equal(apart.naive_bytes, unshared);
    assert_int_equal(apart.inplace, 0);
    /* in place shares bytes, so the naive baseline is below the unshared one exactly when an
     * offer was taken; every plan is at most naive */
    assert_true(planned.inplace > 0 ? naive < unshared : naive == unshared);
    assert_true(planned.arena_bytes <= naive);
    if (want_naive) {
        assert_int_equal(naive, want_naive);
        assert_int_equal(unshared, want_unshared);
    }
    pbl_graph_destroy(g);
}

static void test_mlp_train(void **state)
{
    (void)state;
    /* README ("Planning memory") and examples/train_mlp --plan quote these */
    check_model("mlp_train", 1344192, 1737408);
}

static void test_other_models(void **state)
{
    (void)state;
    check_model("mlp", 0, 0);
    check_model("mlp50_train", 0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_train),
        cmocka_unit_test(test_other_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
