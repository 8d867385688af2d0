/* Liveness: exact records on a small graph, each in-place rule, outputs living to the end,
 * and the gradient rules reading only the data their ops declare (grad_reads_in/out). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "grad_reads.h"
#include "pebble/pebble.h"

static pbl_graph_records live(pbl_graph *g, int inplace)
{
    pbl_liveness_options o = pbl_liveness_options_default();
    o.inplace = inplace;
    o.align = 16; /* the sizes below are multiples of 16: exact bytes */
    pbl_graph_records r;
    char err[256];
    pbl_status s = pbl_graph_liveness(g, &o, &r, err, sizeof err);
    if (s != PBL_OK)
        print_error("liveness: %s\n", err);
    assert_int_equal(s, PBL_OK);
    return r;
}

static void expect_record(const pbl_graph_records *r, pbl_graph *g, const char *value, int64_t size, int64_t first,
                          int64_t last)
{
    pbl_value v = pbl_graph_find_value(g, value);
    assert_int_not_equal(v, PBL_NONE);
    int32_t k = r->value_record[v];
    assert_true(k >= 0);
    const pbl_usage_record *u = &r->records[k];
    printf("  %-10s record %d: %lld bytes [%lld, %lld)\n", value, (int)k, (long long)u->size, (long long)u->first,
           (long long)u->last);
    assert_int_equal(u->size, size);
    assert_int_equal(u->first, first);
    assert_int_equal(u->last, last);
}

/* x[4,3] -> fc (h) -> relu (a) -> fc (z) -> sigmoid (s); outputs: s.
 * steps: 0 fc1, 1 relu, 2 fc2, 3 sigmoid. */
static void test_forward_records(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4, 3));
    pbl_value w1 = pbl_param(g, "w1", PBL_SHAPE(5, 3)), w2 = pbl_param(g, "w2", PBL_SHAPE(2, 5));
    pbl_node_desc d1 = { .op = "fully_connected", .name = "h", .inputs = (pbl_value[]){ x, w1 }, .n_inputs = 2 };
    pbl_value h, a, z, s;
    assert_int_equal(pbl_graph_add_node(g, &d1, NULL, &h), PBL_OK);
    pbl_node_desc d2 = { .op = "relu", .name = "a", .inputs = &h, .n_inputs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &d2, NULL, &a), PBL_OK);
    pbl_node_desc d3 = { .op = "fully_connected", .name = "z", .inputs = (pbl_value[]){ a, w2 }, .n_inputs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &d3, NULL, &z), PBL_OK);
    pbl_node_desc d4 = { .op = "sigmoid", .name = "s", .inputs = &z, .n_inputs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &d4, NULL, &s), PBL_OK);
    pbl_graph_set_output(g, "s", s);

    pbl_graph_records r = live(g, 0);
    assert_int_equal(r.n_steps, 4);
    assert_int_equal(r.n_records, 4);
    assert_int_equal(r.value_record[x], -1); /* variables are the caller's */
    expect_record(&r, g, "h", 80, 0, 2);
    expect_record(&r, g, "a", 80, 1, 3);
    expect_record(&r, g, "z", 32, 2, 4);
    expect_record(&r, g, "s", 32, 3, 4);
    pbl_graph_records_free(&r);

    /* in place: relu takes h's bytes (h dies at step 1) and sigmoid takes z's (z dies at
     * step 3 and is no output); the output s then keeps z's record alive to the end */
    r = live(g, 1);
    assert_int_equal(r.n_inplace, 2);
    assert_int_equal(r.n_records, 2);
    expect_record(&r, g, "h", 80, 0, 3);
    expect_record(&r, g, "a", 80, 0, 3);
    expect_record(&r, g, "z", 32, 2, 4);
    expect_record(&r, g, "s", 32, 2, 4); /* the output's record lives to the end */
    assert_int_equal(pbl_records_lower_bound(r.records, r.n_records), 112);
    pbl_graph_records_free(&r);
    pbl_graph_destroy(g);
}

/* In place is refused when the input is an output, is read later, or differs in size. */
static void test_inplace_refusals(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 4));
    pbl_value w = pbl_param(g, "w", PBL_SHAPE(4, 4));
    pbl_value h = pbl_fully_connected(g, x, w, PBL_NONE); /* step 0 */
    pbl_value a = pbl_relu(g, h);                          /* step 1: h is an output -> no */
    pbl_value b = pbl_tanh(g, a);                          /* step 2: a is read later -> no */
    pbl_value c = pbl_add(g, a, b);                        /* step 3: a dies here -> yes (over a) */
    pbl_value t = pbl_sum(g, c, NULL, 0, 0);               /* step 4: a scalar: sizes differ, no offer anyway */
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    pbl_graph_set_output(g, "h", h);
    pbl_graph_set_output(g, "t", t);
    pbl_graph_records r = live(g, 1);
    assert_int_not_equal(r.value_record[a], r.value_record[h]);
    assert_int_not_equal(r.value_record[b], r.value_record[a]);
    assert_int_equal(r.value_record[c], r.value_record[a]);
    assert_int_equal(r.n_inplace, 1);
    assert_int_equal(r.records[r.value_record[h]].last, r.n_steps); /* output: to the end */
    pbl_graph_records_free(&r);
    pbl_graph_destroy(g);
}

/* Every input of a backward node is a backward value, or data of its forward node that the op
 * declares its gradient reads. Checked over a graph using every differentiable op. */
static void test_gradient_reads_declared(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(6, 8)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(6));
    pbl_value w = pbl_param(g, "w", PBL_SHAPE(8, 8)), b = pbl_param(g, "b", PBL_SHAPE(8));
    pbl_value v = pbl_param(g, "v", PBL_SHAPE(8, 8)), t = pbl_input(g, "t", PBL_SHAPE(6, 8));
    pbl_value h = pbl_fully_connected(g, x, w, b);
    pbl_value m = pbl_matmul(g, h, v, 0, 1);
    pbl_value e = pbl_add(g, pbl_mul(g, pbl_sub(g, m, b), b), h);
    pbl_value act = pbl_add(g, pbl_add(g, pbl_relu(g, e), pbl_sigmoid(g, e)), pbl_add(g, pbl_tanh(g, e), pbl_gelu(g, e)));
    pbl_value d = pbl_dropout(g, act, 0.25, 3, NULL);
    pbl_value r = pbl_reshape(g, pbl_flatten(g, pbl_copy(g, d), 1), PBL_SHAPE(6, 8));
    pbl_value sm = pbl_add(g, pbl_softmax(g, r), pbl_log_softmax(g, r));
    pbl_value red = pbl_add(g, pbl_add(g, sm, pbl_mean(g, sm, (int64_t[]){ 1 }, 1, 1)),
                            pbl_sum(g, sm, (int64_t[]){ 0 }, 1, 1));
    pbl_value l1 = pbl_softmax_cross_entropy(g, red, y);
    pbl_value l2 = pbl_mse_loss(g, sm, t);
    pbl_value loss = pbl_add(g, l1, l2);
    if (pbl_graph_build_status(g) != PBL_OK)
        print_error("build: %s\n", pbl_graph_errmsg(g));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    pbl_value wrt[] = { w, b, v }, grads[3];
    assert_int_equal(pbl_graph_gradient(g, loss, wrt, 3, grads), PBL_OK);

    grad_reads gr = { 0 };
    grad_reads_check(g, "test graph", &gr);
    printf("  %d forward reads by backward nodes, all declared\n", gr.checked);
    assert_int_equal(gr.undeclared, 0);
    assert_true(gr.checked >= 15);
    pbl_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_records),
        cmocka_unit_test(test_inplace_refusals),
        cmocka_unit_test(test_gradient_reads_declared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
