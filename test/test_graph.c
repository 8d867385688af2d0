/* The graph API: every validation error returns its status with a message naming the node;
 * failed calls leave the graph unchanged; rewiring, cycles, names, dump; the allocator hook
 * failing the Nth allocation gives PBL_ERR_NOMEM and leaks nothing. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"

/* Fails with the message when it does not contain every given fragment. */
static void expect_msg(const char *msg, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *want = va_arg(ap, const char *);
        if (!strstr(msg, want)) {
            print_error("message \"%s\" lacks \"%s\"\n", msg, want);
            fail();
        }
    }
    va_end(ap);
}

typedef struct fixture {
    pbl_graph *g;
    pbl_value x, w, b, labels;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_int_equal(pbl_graph_create(&f->g, NULL), PBL_OK);
    assert_int_equal(pbl_graph_add_variable(f->g, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(8, 5), &f->x), PBL_OK);
    assert_int_equal(pbl_graph_add_variable(f->g, "w", PBL_VALUE_PARAM, PBL_F32, PBL_SHAPE(3, 5), &f->w), PBL_OK);
    assert_int_equal(pbl_graph_add_variable(f->g, "b", PBL_VALUE_PARAM, PBL_F32, PBL_SHAPE(3), &f->b), PBL_OK);
    assert_int_equal(pbl_graph_add_variable(f->g, "labels", PBL_VALUE_LABEL, PBL_I32, PBL_SHAPE(8), &f->labels), PBL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pbl_graph_destroy(f->g);
    free(f);
    return 0;
}

/* Adds a node; checks the status, that the graph did not change on failure, and returns the
 * graph's message. */
static const char *try_node(fixture *f, const char *op, const char *name, const pbl_value *in, int32_t n_in,
                            const pbl_attr *at, int32_t n_at, pbl_status want)
{
    int32_t nv = pbl_graph_value_count(f->g), nn = pbl_graph_node_count(f->g);
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    pbl_value out[4];
    pbl_status s = pbl_graph_add_node(f->g, &d, NULL, out);
    if (s != want)
        print_error("status %s, want %s: %s\n", pbl_status_name(s), pbl_status_name(want), pbl_graph_errmsg(f->g));
    assert_int_equal(s, want);
    if (s != PBL_OK) {
        assert_int_equal(pbl_graph_value_count(f->g), nv);
        assert_int_equal(pbl_graph_node_count(f->g), nn);
    }
    printf("  %-22s -> %s: %s\n", op ? op : "(null)", pbl_status_name(s), s ? pbl_graph_errmsg(f->g) : "");
    return pbl_graph_errmsg(f->g);
}

static void test_unknown_op(void **state)
{
    fixture *f = *state;
    const char *m = try_node(f, "convolution_3000", "c1", &f->x, 1, NULL, 0, PBL_ERR_UNKNOWN_OP);
    expect_msg(m, 2, "'c1'", "convolution_3000");
}

static void test_arity(void **state)
{
    fixture *f = *state;
    const char *m = try_node(f, "relu", "r1", (pbl_value[]){ f->x, f->x }, 2, NULL, 0, PBL_ERR_ARITY);
    expect_msg(m, 3, "'r1'", "relu", "got 2");
    m = try_node(f, "fully_connected", "fc", &f->x, 1, NULL, 0, PBL_ERR_ARITY);
    expect_msg(m, 2, "'fc'", "2 to 3");
}

static void test_bad_attribute(void **state)
{
    fixture *f = *state;
    pbl_value in[] = { f->x, f->x };
    pbl_attr unknown = PBL_ATTR_INT("transpose_everything", 1);
    const char *m = try_node(f, "matmul", "mm1", in, 2, &unknown, 1, PBL_ERR_ATTR);
    expect_msg(m, 3, "'mm1'", "matmul", "transpose_everything");
    pbl_attr wrong_type = PBL_ATTR_FLOAT("trans_a", 1.0);
    m = try_node(f, "matmul", "mm2", in, 2, &wrong_type, 1, PBL_ERR_ATTR);
    expect_msg(m, 3, "'mm2'", "trans_a", "an int");
    pbl_attr bad_value = PBL_ATTR_INT("trans_a", 2);
    m = try_node(f, "matmul", "mm3", in, 2, &bad_value, 1, PBL_ERR_ATTR);
    expect_msg(m, 2, "'mm3'", "trans_a");
    pbl_attr twice[] = { PBL_ATTR_INT("trans_a", 1), PBL_ATTR_INT("trans_a", 0) };
    m = try_node(f, "matmul", "mm4", in, 2, twice, 2, PBL_ERR_ATTR);
    expect_msg(m, 2, "'mm4'", "twice");
    m = try_node(f, "reshape", "rs", &f->x, 1, NULL, 0, PBL_ERR_ATTR);
    expect_msg(m, 2, "'rs'", "'shape' is required");
    pbl_attr p = PBL_ATTR_FLOAT("p", 1.5);
    m = try_node(f, "dropout", "drop", &f->x, 1, &p, 1, PBL_ERR_ATTR);
    expect_msg(m, 2, "'drop'", "[0, 1)");
}

static void test_shape_mismatch(void **state)
{
    fixture *f = *state;
    /* fc with w [3, 5] given as x: x is [3, 5], w is [8, 5]... use w as x and x as w */
    const char *m = try_node(f, "fully_connected", "fc_bad", (pbl_value[]){ f->x, f->x, f->b }, 3, NULL, 0, PBL_ERR_SHAPE);
    expect_msg(m, 4, "'fc_bad'", "fully_connected", "[8, 5]", "[3]");
    m = try_node(f, "add", "add_bad", (pbl_value[]){ f->x, f->w }, 2, NULL, 0, PBL_ERR_SHAPE);
    expect_msg(m, 4, "'add_bad'", "add", "[8, 5]", "[3, 5]");
    pbl_attr ta = PBL_ATTR_INT("trans_b", 1);
    m = try_node(f, "matmul", "mm_bad", (pbl_value[]){ f->x, f->x }, 2, &ta, 0, PBL_ERR_SHAPE);
    expect_msg(m, 3, "'mm_bad'", "[8, 5]", "inner dims");
}

static void test_dtype_mismatch(void **state)
{
    fixture *f = *state;
    const char *m = try_node(f, "relu", "r_int", &f->labels, 1, NULL, 0, PBL_ERR_DTYPE);
    expect_msg(m, 3, "'r_int'", "relu", "i32");
    pbl_value logits;
    try_node(f, "fully_connected", "fc", (pbl_value[]){ f->x, f->w, f->b }, 3, NULL, 0, PBL_OK);
    logits = pbl_graph_find_value(f->g, "fc");
    m = try_node(f, "softmax_cross_entropy", "ce", (pbl_value[]){ logits, f->x }, 2, NULL, 0, PBL_ERR_DTYPE);
    expect_msg(m, 2, "'ce'", "labels");
}

static void test_dangling(void **state)
{
    fixture *f = *state;
    const char *m = try_node(f, "relu", "r_ghost", (pbl_value[]){ 4711 }, 1, NULL, 0, PBL_ERR_DANGLING);
    expect_msg(m, 3, "'r_ghost'", "relu", "4711");
    assert_int_equal(pbl_graph_set_output(f->g, "out", 999), PBL_ERR_DANGLING);
    expect_msg(pbl_graph_errmsg(f->g), 2, "'out'", "999");
}

static void test_duplicate_names(void **state)
{
    fixture *f = *state;
    pbl_value v;
    assert_int_equal(pbl_graph_add_variable(f->g, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(1), &v), PBL_ERR_INVALID_ARG);
    expect_msg(pbl_graph_errmsg(f->g), 1, "'x'");
    try_node(f, "relu", "act", &f->x, 1, NULL, 0, PBL_OK);
    const char *m = try_node(f, "sigmoid", "act", &f->x, 1, NULL, 0, PBL_ERR_INVALID_ARG);
    expect_msg(m, 2, "'act'", "exists");
    /* a variable shape with a zero dim */
    assert_int_equal(pbl_graph_add_variable(f->g, "z", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(4, 0), &v), PBL_ERR_INVALID_ARG);
    expect_msg(pbl_graph_errmsg(f->g), 2, "'z'", "[4, 0]");
}

static void test_cycle_and_rewire(void **state)
{
    fixture *f = *state;
    pbl_graph *g = f->g;
    pbl_value a = pbl_relu(g, f->x), b = pbl_sigmoid(g, a), c = pbl_tanh(g, b);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_validate(g), PBL_OK);
    pbl_value_info ai, ci;
    pbl_graph_value_info(g, a, &ai);
    pbl_graph_value_info(g, c, &ci);
    /* rewiring to a value of another shape is refused */
    assert_int_equal(pbl_graph_set_input(g, ai.producer, 0, f->w), PBL_ERR_SHAPE);
    expect_msg(pbl_graph_errmsg(g), 3, "relu", "[8, 5]", "[3, 5]");
    /* relu(x) -> relu(tanh(...)): a cycle relu -> sigmoid -> tanh -> relu */
    assert_int_equal(pbl_graph_set_input(g, ai.producer, 0, c), PBL_OK);
    assert_int_equal(pbl_graph_validate(g), PBL_ERR_CYCLE);
    const char *m = pbl_graph_errmsg(g);
    printf("  cycle -> %s\n", m);
    int named = strstr(m, "'relu") || strstr(m, "'sigmoid") || strstr(m, "'tanh");
    assert_true(named);
    expect_msg(m, 1, "cycle");
    /* the executor refuses it too, with the same message */
    pbl_exec *e = NULL;
    char err[256];
    assert_int_equal(pbl_exec_create(&e, g, NULL, err, sizeof err), PBL_ERR_CYCLE);
    assert_null(e);
    expect_msg(err, 1, "cycle");
    /* undoing the rewire makes it valid again */
    assert_int_equal(pbl_graph_set_input(g, ai.producer, 0, f->x), PBL_OK);
    assert_int_equal(pbl_graph_validate(g), PBL_OK);
}

static void test_sticky_builder(void **state)
{
    fixture *f = *state;
    pbl_graph *g = f->g;
    pbl_value h = pbl_fully_connected(g, f->w, f->w, PBL_NONE); /* [3,5]·[3,5]ᵀ is fine: [3,3] */
    assert_int_not_equal(h, PBL_NONE);
    pbl_value bad = pbl_add(g, h, f->x);          /* [3,3] + [8,5]: the first error */
    pbl_value later = pbl_relu(g, f->x);           /* would succeed, but building stopped */
    assert_int_equal(bad, PBL_NONE);
    assert_int_equal(later, PBL_NONE);
    assert_int_equal(pbl_graph_build_status(g), PBL_ERR_SHAPE);
    expect_msg(pbl_graph_errmsg(g), 3, "add", "[3, 3]", "[8, 5]");
    pbl_graph_build_reset(g);
    assert_int_not_equal(pbl_relu(g, f->x), PBL_NONE);
}

static void test_dump_and_queries(void **state)
{
    fixture *f = *state;
    pbl_graph *g = f->g;
    pbl_value y = pbl_fully_connected(g, f->x, f->w, f->b);
    pbl_value loss = pbl_softmax_cross_entropy(g, y, f->labels);
    assert_int_equal(pbl_graph_set_output(g, "loss", loss), PBL_OK);
    assert_int_equal(pbl_graph_output(g, "loss"), loss);
    assert_int_equal(pbl_graph_find_value(g, "w"), f->w);
    pbl_value wrt[] = { f->w, f->b, f->x }, grads[3];
    assert_int_equal(pbl_graph_gradient(g, loss, wrt, 2, grads), PBL_OK);
    /* a second gradient pass is refused */
    assert_int_equal(pbl_graph_gradient(g, loss, wrt, 2, grads), PBL_ERR_INVALID_ARG);
    int32_t backward = 0;
    for (pbl_node n = 0; n < pbl_graph_node_count(g); n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        backward += ni.is_backward;
        if (ni.is_backward)
            assert_non_null(strchr(ni.name, '/'));
    }
    assert_true(backward >= 4); /* seed, ce grad, grad_w, grad_b */
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    assert_int_equal(pbl_graph_dump(g, mf), PBL_OK);
    fclose(mf);
    printf("%s", text);
    expect_msg(text, 6, "backward:", "fully_connected(", "softmax_cross_entropy_grad(", "trans_a=1",
               "(backward)", "output 'loss'");
    free(text);
    int64_t ta = -1;
    pbl_node gw = pbl_graph_find_node(g, "fully_connected0/grad_w");
    assert_int_not_equal(gw, PBL_NONE);
    assert_int_equal(pbl_graph_node_attr_int(g, gw, "trans_a", &ta), PBL_OK);
    assert_int_equal(ta, 1);
    assert_int_equal(pbl_graph_node_attr_int(g, gw, "nope", &ta), PBL_ERR_NOT_FOUND);
    double dv;
    assert_int_equal(pbl_graph_node_attr_float(g, gw, "trans_a", &dv), PBL_ERR_ATTR);
}

static void test_not_differentiable_restores(void **state)
{
    fixture *f = *state;
    pbl_graph *g = f->g;
    /* relu_grad has no gradient rule; put it between w and the loss */
    pbl_node_desc d = { .op = "relu_grad", .name = "rg", .inputs = (pbl_value[]){ f->w, f->w }, .n_inputs = 2 };
    pbl_value r;
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, &r), PBL_OK);
    pbl_value loss = pbl_sum(g, r, NULL, 0, 0);
    int32_t nv = pbl_graph_value_count(g), nn = pbl_graph_node_count(g);
    pbl_value grad;
    assert_int_equal(pbl_graph_gradient(g, loss, &f->w, 1, &grad), PBL_ERR_NOT_DIFFERENTIABLE);
    expect_msg(pbl_graph_errmsg(g), 2, "'rg'", "relu_grad");
    assert_int_equal(pbl_graph_value_count(g), nv);
    assert_int_equal(pbl_graph_node_count(g), nn);
}

/* ---- allocation failure injection ------------------------------------------------------- */

typedef struct counting {
    long   fail_at;  /* the allocation number that fails (-1: none) */
    long   count;
    long   live_blocks;
    size_t live_bytes;
} counting;

static void *c_alloc(void *user, size_t n)
{
    counting *c = user;
    if (c->count++ == c->fail_at)
        return NULL;
    c->live_blocks++;
    c->live_bytes += n;
    return malloc(n);
}

static void c_free(void *user, void *p, size_t n)
{
    counting *c = user;
    if (!p)
        return;
    c->live_blocks--;
    c->live_bytes -= n;
    free(p);
}

/* Builds, differentiates and runs a small training step through allocator a. */
static pbl_status build_and_run(const pbl_allocator *a)
{
    pbl_graph_options go = pbl_graph_options_default();
    go.allocator = a;
    pbl_graph *g = NULL;
    pbl_exec *e = NULL;
    pbl_status s = pbl_graph_create(&g, &go);
    if (s != PBL_OK)
        return s;
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4, 6)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(4));
    pbl_value w = pbl_param(g, "w", PBL_SHAPE(3, 6)), b = pbl_param(g, "b", PBL_SHAPE(3));
    pbl_value h = pbl_fully_connected(g, x, w, b);
    pbl_value loss = pbl_softmax_cross_entropy(g, pbl_add(g, pbl_relu(g, h), pbl_sigmoid(g, h)), y);
    s = pbl_graph_build_status(g);
    if (s == PBL_OK)
        s = pbl_graph_set_output(g, "loss", loss);
    pbl_value params[] = { w, b }, grads[2];
    if (s == PBL_OK)
        s = pbl_graph_gradient(g, loss, params, 2, grads);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    if (s == PBL_OK)
        s = pbl_graph_add_optimizer(g, &o, params, grads, 2);
    pbl_exec_options eo = pbl_exec_options_default();
    eo.allocator = a;
    if (s == PBL_OK)
        s = pbl_exec_create(&e, g, &eo, NULL, 0);
    float xs[24] = { 0 }, ws[18] = { 0 }, bs[3] = { 0 };
    int32_t ys[4] = { 0, 1, 2, 0 };
    if (s == PBL_OK)
        s = pbl_exec_write(e, x, xs, sizeof xs);
    if (s == PBL_OK)
        s = pbl_exec_write(e, y, ys, sizeof ys);
    if (s == PBL_OK)
        s = pbl_exec_bind(e, w, ws, sizeof ws);
    if (s == PBL_OK)
        s = pbl_exec_bind(e, b, bs, sizeof bs);
    if (s == PBL_OK)
        s = pbl_exec_run(e);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    return s;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    counting c = { .fail_at = -1 };
    pbl_allocator a = { c_alloc, c_free, &c };
    assert_int_equal(build_and_run(&a), PBL_OK);
    long total = c.count;
    assert_int_equal(c.live_blocks, 0);
    printf("  a clean run makes %ld allocations; failing each in turn:\n", total);
    for (long n = 0; n < total; n++) {
        c = (counting){ .fail_at = n };
        pbl_status s = build_and_run(&a);
        if (s != PBL_ERR_NOMEM || c.live_blocks != 0 || c.live_bytes != 0)
            print_error("failing allocation %ld: status %s, %ld blocks / %zu bytes still live\n", n,
                        pbl_status_name(s), c.live_blocks, c.live_bytes);
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_int_equal(c.live_blocks, 0);
        assert_int_equal(c.live_bytes, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unknown_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_attribute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtype_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dangling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cycle_and_rewire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_builder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_and_queries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_differentiable_restores, setup, teardown),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
