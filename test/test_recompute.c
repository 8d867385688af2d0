/*
 * test_recompute: static recomputation (graph/passes/recompute.c, pebble/recompute.h).
 *
 * - training with a rewritten graph gives the plain graph's loss, gradients and parameters bit
 *   for bit (mlp_train with Adam; mlp100_train with SGD + momentum), for every method;
 * - the rewritten graph validates, its recomputations are named "<fwd>/recompute" and are
 *   scheduled after the whole forward pass, and the executor plans exactly the arena the
 *   report gives;
 * - sqrt(n) checkpointing shrinks the arena of deep MLPs, and grows like sqrt(depth) where
 *   the plain arena grows like depth (100 against 400 layers);
 * - the budget search meets 50% and 30% of the plain arena of mlp100_train, and says
 *   PBL_ERR_BUDGET, naming the least arena reached, for a budget nothing meets;
 * - failing every host allocation in turn gives PBL_ERR_NOMEM and leaks nothing.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"
#include "failing_alloc.h"
#include "same_training.h"
#include "tools/zoo/zoo.h"

static pbl_graph *zoo(const char *name, int64_t batch)
{
    pbl_graph *g = NULL;
    char err[256];
    pbl_status s = zoo_build(name, batch, &g, err, sizeof err);
    if (s != PBL_OK)
        fail_msg("%s", err);
    return g;
}

/* An MLP of `depth` fully connected layers of `width` (relu between), softmax cross-entropy,
 * backward, SGD with learning rate lr: the same construction as tools/zoo/mlp.c at any depth. */
static pbl_graph *deep_mlp(int depth, int64_t width, int64_t batch, double lr)
{
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value *params = malloc((size_t)(2 * depth) * sizeof *params);
    pbl_value *grads = malloc((size_t)(2 * depth) * sizeof *grads);
    assert_non_null(params);
    assert_non_null(grads);
    pbl_value h, y, loss;
    assert_int_equal(pbl_graph_add_variable(g, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(batch, width), &h), PBL_OK);
    assert_int_equal(pbl_graph_add_variable(g, "labels", PBL_VALUE_LABEL, PBL_I32, PBL_SHAPE(batch), &y), PBL_OK);
    for (int l = 0; l < depth; l++) {
        char name[32];
        int64_t out = l + 1 < depth ? width : 10;
        snprintf(name, sizeof name, "fc%d/w", l + 1);
        assert_int_equal(pbl_graph_add_variable(g, name, PBL_VALUE_PARAM, PBL_F32, PBL_SHAPE(out, width),
                                                &params[2 * l]), PBL_OK);
        snprintf(name, sizeof name, "fc%d/b", l + 1);
        assert_int_equal(pbl_graph_add_variable(g, name, PBL_VALUE_PARAM, PBL_F32, PBL_SHAPE(out), &params[2 * l + 1]),
                         PBL_OK);
        pbl_value in[] = { h, params[2 * l], params[2 * l + 1] };
        snprintf(name, sizeof name, "fc%d", l + 1);
        pbl_node_desc d = { .op = "fully_connected", .name = name, .inputs = in, .n_inputs = 3 };
        assert_int_equal(pbl_graph_add_node(g, &d, NULL, &h), PBL_OK);
        if (l + 1 < depth) {
            snprintf(name, sizeof name, "relu%d", l + 1);
            pbl_node_desc r = { .op = "relu", .name = name, .inputs = &h, .n_inputs = 1 };
            assert_int_equal(pbl_graph_add_node(g, &r, NULL, &h), PBL_OK);
        }
    }
    pbl_value in[] = { h, y };
    pbl_node_desc d = { .op = "softmax_cross_entropy", .name = "loss", .inputs = in, .n_inputs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, &loss), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", loss), PBL_OK);
    assert_int_equal(pbl_graph_gradient(g, loss, params, 2 * depth, grads), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_SGD);
    o.lr = lr;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, params, grads, 2 * depth), PBL_OK);
    free(params);
    free(grads);
    return g;
}

static pbl_graph *rewrite(const pbl_graph *g, pbl_recompute_method method, uint64_t budget,
                          pbl_recompute_report *r)
{
    pbl_recompute_options o = pbl_recompute_options_default();
    o.method = method;
    o.budget = budget;
    pbl_graph *out = NULL;
    char err[512];
    pbl_status s = pbl_graph_recompute(g, &o, &out, r, err, sizeof err);
    if (s != PBL_OK)
        fail_msg("pbl_graph_recompute: %s: %s", pbl_status_str(s), err);
    assert_int_equal(pbl_graph_validate(out), PBL_OK);
    return out;
}

/* ---- training: bit-identical to the plain graph -------------------------------------------- */


static void check_method_trains(const char *model, int64_t batch, pbl_recompute_method m, double budget_frac,
                                int steps, int expect_recompute)
{
    pbl_graph *g = zoo(model, batch);
    pbl_recompute_report r;
    pbl_graph *probe = rewrite(g, PBL_RECOMPUTE_SQRT, 0, &r); /* for the plain arena */
    uint64_t budget = budget_frac > 0 ? (uint64_t)(budget_frac * (double)r.arena_plain) : 0;
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(probe);
    pbl_graph *lean = rewrite(g, m, budget, &r);
    char what[96];
    snprintf(what, sizeof what, "%s %s%s", model,
             m == PBL_RECOMPUTE_MIRROR ? "mirror" : m == PBL_RECOMPUTE_SQRT ? "sqrt" : "budget",
             budget_frac > 0 ? (budget_frac > 0.99 ? " 100%" : budget_frac > 0.4 ? " 50%" : " 30%") : "");
    printf("  %-28s %d checkpoints of %d candidates, %d recomputed, extra %.1f%% of step flops, arena %llu -> %llu\n",
           what, (int)r.n_checkpoints, (int)r.candidates, (int)r.recomputed, 100 * r.extra_flops / r.step_flops,
           (unsigned long long)r.arena_plain, (unsigned long long)r.arena);
    if (expect_recompute)
        assert_true(r.recomputed > 0);
    else /* the plain graph fits: the search adds no work */
        assert_int_equal(r.recomputed, 0);
    same_training(g, lean, steps, what);
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(lean);
    pbl_graph_destroy(g);
}

static void test_mlp_bit_identical(void **state)
{
    (void)state;
    check_method_trains("mlp_train", 32, PBL_RECOMPUTE_MIRROR, 0, 3, 1);
    check_method_trains("mlp_train", 32, PBL_RECOMPUTE_SQRT, 0, 3, 1);
    /* on three layers no recomputation lowers the peak (it lies where relu1 and its gradient
     * meet): a budget of the plain arena is met with nothing recomputed, 50% is refused
     * (test_budget) */
    check_method_trains("mlp_train", 32, PBL_RECOMPUTE_BUDGET, 1.0, 3, 0);
}

static void test_mlp100_bit_identical(void **state)
{
    (void)state;
    check_method_trains("mlp100_train", 64, PBL_RECOMPUTE_SQRT, 0, 2, 1);
    check_method_trains("mlp100_train", 64, PBL_RECOMPUTE_BUDGET, 0.5, 2, 1);
    check_method_trains("mlp100_train", 64, PBL_RECOMPUTE_BUDGET, 0.3, 2, 1);
}

/* Attributes are copied as set: a learning rate other than the default must survive. */
static void test_attributes_copied(void **state)
{
    (void)state;
    pbl_graph *g = deep_mlp(12, 16, 8, 0.05);
    pbl_recompute_report r;
    pbl_graph *lean = rewrite(g, PBL_RECOMPUTE_SQRT, 0, &r);
    assert_true(r.recomputed > 0);
    double lr = 0;
    assert_int_equal(pbl_graph_node_attr_float(lean, pbl_graph_find_node(lean, "fc1/w/update"), "lr", &lr), PBL_OK);
    assert_true(lr == 0.05);
    same_training(g, lean, 2, "12 layers, sgd lr 0.05, sqrt");
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(lean);
    pbl_graph_destroy(g);
}

/* ---- the rewritten graph: names, order, the executor's arena -------------------------------- */

static void test_rewrite_shape(void **state)
{
    (void)state;
    pbl_graph *g = zoo("mlp100_train", 64);
    int32_t nodes0 = pbl_graph_node_count(g), values0 = pbl_graph_value_count(g);
    pbl_recompute_report r;
    pbl_graph *lean = rewrite(g, PBL_RECOMPUTE_SQRT, 0, &r);
    /* the input is untouched; every recompute node is "<fwd>/recompute" */
    assert_int_equal(pbl_graph_node_count(g), nodes0);
    assert_int_equal(pbl_graph_value_count(g), values0);
    assert_int_equal(pbl_graph_node_count(lean), nodes0 + r.recomputed);
    int32_t named = 0;
    for (pbl_node n = 0; n < pbl_graph_node_count(lean); n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(lean, n, &ni), PBL_OK);
        const char *slash = strstr(ni.name, "/recompute");
        if (!slash)
            continue;
        named++;
        assert_true(ni.is_backward);
        char fwd[128];
        snprintf(fwd, sizeof fwd, "%.*s", (int)(slash - ni.name), ni.name);
        pbl_node f = pbl_graph_find_node(g, fwd);
        assert_true(f != PBL_NONE);
        pbl_node_info fi;
        assert_int_equal(pbl_graph_node_info(g, f, &fi), PBL_OK);
        assert_string_equal(fi.op, ni.op);
    }
    assert_int_equal(named, r.recomputed);
    /* checkpoints: about sqrt(99) of the 99 relu outputs, each named in the input graph */
    assert_true(r.n_checkpoints >= 7 && r.n_checkpoints <= 12);
    for (int32_t i = 0; i < r.n_checkpoints; i++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(g, r.checkpoints[i], &vi), PBL_OK);
        assert_non_null(strstr(vi.name, "relu"));
    }

    /* order: every recomputation runs after the loss, i.e. after the whole forward pass */
    pbl_graph_records gr;
    pbl_liveness_options lo = pbl_liveness_options_default();
    char err[256];
    assert_int_equal(pbl_graph_liveness(lean, &lo, &gr, err, sizeof err), PBL_OK);
    int32_t loss_step = -1, first_recompute = -1;
    for (int32_t t = 0; t < gr.n_steps; t++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(lean, gr.schedule[t], &ni), PBL_OK);
        if (strcmp(ni.op, "softmax_cross_entropy") == 0)
            loss_step = t;
        if (strstr(ni.name, "/recompute") && first_recompute < 0)
            first_recompute = t;
    }
    assert_true(loss_step >= 0 && first_recompute > loss_step);
    pbl_graph_records_free(&gr);

    /* the executor plans exactly the arena the report gives */
    pbl_exec *e;
    pbl_exec_options eo = pbl_exec_options_default();
    assert_int_equal(pbl_exec_create(&e, lean, &eo, err, sizeof err), PBL_OK);
    pbl_exec_stats st;
    assert_int_equal(pbl_exec_stats_get(e, &st), PBL_OK);
    assert_int_equal(st.arena_bytes, r.arena);
    pbl_exec_destroy(e);
    printf("  mlp100_train batch 64 sqrt: %d recompute nodes after step %d (the loss), executor arena %llu = report\n",
           (int)r.recomputed, (int)loss_step, (unsigned long long)st.arena_bytes);
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(lean);
    pbl_graph_destroy(g);
}

/* MXNet's rule on an MLP: the relus are recomputed from the kept fully connected outputs. */
static void test_mirror_rule(void **state)
{
    (void)state;
    pbl_graph *g = zoo("mlp_train", 32);
    pbl_recompute_report r;
    pbl_graph *lean = rewrite(g, PBL_RECOMPUTE_MIRROR, 0, &r);
    assert_int_equal(r.recomputed, 2);
    assert_true(pbl_graph_find_node(lean, "relu1/recompute") != PBL_NONE);
    assert_true(pbl_graph_find_node(lean, "relu2/recompute") != PBL_NONE);
    assert_true(pbl_graph_find_node(lean, "fc1/recompute") == PBL_NONE);
    printf("  mlp_train mirror: relu1, relu2 recomputed; arena %llu -> %llu\n", (unsigned long long)r.arena_plain,
           (unsigned long long)r.arena);
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(lean);
    pbl_graph_destroy(g);
}

/* ---- memory: sqrt(n) ----------------------------------------------------------------------- */

static void test_sqrt_memory(void **state)
{
    (void)state;
    uint64_t plain[2], lean[2];
    int depth[2] = { 100, 400 };
    for (int i = 0; i < 2; i++) {
        pbl_graph *g = deep_mlp(depth[i], 32, 64, 0.01);
        pbl_recompute_report r;
        pbl_graph *out = rewrite(g, PBL_RECOMPUTE_SQRT, 0, &r);
        plain[i] = r.arena_plain;
        lean[i] = r.arena;
        printf("  %d layers of 32, batch 64: plain arena %llu, sqrt %llu (%d checkpoints, %d recomputed, "
               "+%.1f%% flops)\n",
               depth[i], (unsigned long long)plain[i], (unsigned long long)lean[i], (int)r.n_checkpoints,
               (int)r.recomputed, 100 * r.extra_flops / r.step_flops);
        assert_true(lean[i] < plain[i]);
        pbl_recompute_report_free(&r);
        pbl_graph_destroy(out);
        pbl_graph_destroy(g);
    }
    double grow_plain = (double)plain[1] / (double)plain[0], grow_lean = (double)lean[1] / (double)lean[0];
    printf("  4x the depth: plain arena x%.2f, sqrt arena x%.2f (sqrt(4) = 2)\n", grow_plain, grow_lean);
    assert_true(grow_plain > 3.5);
    assert_true(grow_lean < 2.8);
    assert_true(2 * lean[0] < plain[0]);
}

/* ---- the budget search ------------------------------------------------------------------- */

static void test_budget(void **state)
{
    (void)state;
    pbl_graph *g = zoo("mlp100_train", 64);
    const double fracs[] = { 0.5, 0.3 };
    uint64_t plain = 0;
    for (int i = 0; i < 2; i++) {
        pbl_recompute_report r;
        pbl_recompute_options o = pbl_recompute_options_default();
        o.method = PBL_RECOMPUTE_BUDGET;
        pbl_graph *probe = NULL;
        char err[512];
        if (!plain) {
            assert_int_equal(pbl_graph_recompute(g, &o, &probe, &r, err, sizeof err), PBL_OK);
            plain = r.arena_plain;
            assert_int_equal(r.recomputed, 0); /* no budget: nothing is worth recomputing */
            assert_int_equal(r.arena, plain);
            pbl_recompute_report_free(&r);
            pbl_graph_destroy(probe);
        }
        o.budget = (uint64_t)(fracs[i] * (double)plain);
        pbl_graph *out = NULL;
        pbl_status s = pbl_graph_recompute(g, &o, &out, &r, err, sizeof err);
        printf("  mlp100_train batch 64, budget %.0f%% (%llu of %llu): %s, arena %llu, %d checkpoints, %d recomputed, "
               "+%.1f%% flops, B %llu, %d plans\n",
               100 * fracs[i], (unsigned long long)o.budget, (unsigned long long)plain, pbl_status_str(s),
               (unsigned long long)r.arena, (int)r.n_checkpoints, (int)r.recomputed,
               100 * r.extra_flops / r.step_flops, (unsigned long long)r.segment_bytes, (int)r.plans_tried);
        if (s == PBL_OK) {
            assert_true(r.arena <= o.budget);
            assert_int_equal(pbl_graph_validate(out), PBL_OK);
        } else {
            assert_int_equal(s, PBL_ERR_BUDGET);
            assert_null(out);
            assert_true(r.arena > o.budget);
        }
        /* both budgets are reachable on this model; failing here means the search got worse */
        assert_int_equal(s, PBL_OK);
        pbl_recompute_report_free(&r);
        pbl_graph_destroy(out);
    }

    /* 1% is out of reach: the message names the least arena reached */
    pbl_recompute_options o = pbl_recompute_options_default();
    o.method = PBL_RECOMPUTE_BUDGET;
    o.budget = plain / 100;
    pbl_recompute_report r;
    pbl_graph *out = (pbl_graph *)&o; /* must come back NULL */
    char err[512], least[32];
    assert_int_equal(pbl_graph_recompute(g, &o, &out, &r, err, sizeof err), PBL_ERR_BUDGET);
    assert_null(out);
    assert_true(r.arena > o.budget && r.arena < plain);
    snprintf(least, sizeof least, "%llu bytes", (unsigned long long)r.arena);
    assert_non_null(strstr(err, least));
    printf("  budget 1%%: %s\n", err);
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(g);

    /* the three-layer mlp cannot go below its plain arena: 50% is refused, honestly */
    g = zoo("mlp_train", 256);
    o.budget = 1;
    assert_int_equal(pbl_graph_recompute(g, &o, &out, &r, err, sizeof err), PBL_ERR_BUDGET);
    o.budget = r.arena_plain / 2;
    pbl_recompute_report_free(&r);
    assert_int_equal(pbl_graph_recompute(g, &o, &out, &r, err, sizeof err), PBL_ERR_BUDGET);
    assert_null(out);
    assert_int_equal(r.arena, r.arena_plain);
    printf("  mlp_train batch 256, budget 50%%: %s\n", err);
    pbl_recompute_report_free(&r);
    pbl_graph_destroy(g);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    pbl_graph *g = zoo("mlp_train", 8), *out;
    char err[256];
    pbl_recompute_options o = pbl_recompute_options_default();
    assert_int_equal(pbl_graph_recompute(NULL, &o, &out, NULL, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_graph_recompute(g, &o, NULL, NULL, err, sizeof err), PBL_ERR_INVALID_ARG);
    o.search_points = 1;
    assert_int_equal(pbl_graph_recompute(g, &o, &out, NULL, err, sizeof err), PBL_ERR_INVALID_ARG);
    o = pbl_recompute_options_default();
    o.method = (pbl_recompute_method)7;
    assert_int_equal(pbl_graph_recompute(g, &o, &out, NULL, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_null(out);
    /* a graph with no backward pass is copied as is */
    pbl_graph *fwd = zoo("mlp", 8);
    pbl_recompute_report r;
    o = pbl_recompute_options_default();
    assert_int_equal(pbl_graph_recompute(fwd, &o, &out, &r, err, sizeof err), PBL_OK);
    assert_int_equal(r.candidates, 0);
    assert_int_equal(r.recomputed, 0);
    assert_int_equal(pbl_graph_node_count(out), pbl_graph_node_count(fwd));
    pbl_recompute_report_free(&r);
    pbl_recompute_report_free(NULL);
    pbl_graph_destroy(out);
    pbl_graph_destroy(fwd);
    pbl_graph_destroy(g);
}

/* ---- out of memory ------------------------------------------------------------------------ */

static void test_allocation_failures(void **state)
{
    (void)state;
    pbl_graph *g = zoo("mlp_train", 8);
    const pbl_recompute_method methods[] = { PBL_RECOMPUTE_SQRT, PBL_RECOMPUTE_BUDGET };
    for (int m = 0; m < 2; m++) {
        failing f = { 0 };
        pbl_allocator hook = { failing_alloc, failing_free, &f };
        pbl_recompute_options o = pbl_recompute_options_default();
        o.allocator = &hook;
        o.method = methods[m];
        o.search_points = 4;
        o.strategy = "greedy_by_size"; /* fewer allocations than "best": the loop stays quick */
        long fail_at = 1;
        for (;; fail_at++) {
            f = (failing){ .fail_at = fail_at };
            pbl_graph *out = NULL;
            pbl_recompute_report r;
            char err[256];
            pbl_status s = pbl_graph_recompute(g, &o, &out, &r, err, sizeof err);
            if (s == PBL_OK) {
                assert_non_null(out);
                pbl_recompute_report_free(&r);
                pbl_graph_destroy(out);
                assert_int_equal(f.live, 0);
                break;
            }
            if (s != PBL_ERR_NOMEM)
                fail_msg("allocation %ld failing gave %s: %s", fail_at, pbl_status_str(s), err);
            assert_null(out);
            pbl_recompute_report_free(&r);
            if (f.live != 0)
                fail_msg("allocation %ld failing leaked %zu bytes", fail_at, f.live);
        }
        printf("  %s: each of %ld allocations failed in turn: PBL_ERR_NOMEM, nothing leaked\n",
               m ? "budget" : "sqrt", fail_at - 1);
    }
    pbl_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_bit_identical),
        cmocka_unit_test(test_mlp100_bit_identical),
        cmocka_unit_test(test_attributes_copied),
        cmocka_unit_test(test_rewrite_shape),
        cmocka_unit_test(test_mirror_rule),
        cmocka_unit_test(test_sqrt_memory),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
