/*
 * test_fuse: operator fusion (graph/passes/fuse.c, pebble/fuse.h; ops/fused.c, ops/cpu/fused.c).
 *
 * - training with the fused graph gives the plain graph's loss, gradients and parameters bit
 *   for bit (zoo mlp_train with Adam; an MLP with tanh, sigmoid and gelu layers, some biases
 *   as separate adds), with fewer nodes and a planned arena no larger;
 * - random element-wise chains (every op, either operand position, intermediates that are
 *   outputs or read twice) give the same bits fused and unfused;
 * - a group that would read a parameter before its update and something computed after it
 *   is not fused (the fused graph would have a cycle);
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

static pbl_graph *fuse(const pbl_graph *g, pbl_fuse_report *r)
{
    pbl_graph *out = NULL;
    char err[512];
    pbl_fuse_options o = pbl_fuse_options_default();
    pbl_status s = pbl_graph_fuse(g, &o, &out, r, err, sizeof err);
    if (s != PBL_OK)
        fail_msg("pbl_graph_fuse: %s: %s", pbl_status_str(s), err);
    assert_int_equal(pbl_graph_validate(out), PBL_OK);
    assert_int_equal(r->nodes_before, pbl_graph_node_count(g));
    assert_int_equal(r->nodes_after, pbl_graph_node_count(out));
    /* each fused node replaces at least two */
    assert_int_equal(r->nodes_after,
                     r->nodes_before - r->fused_nodes + r->dense + r->chains + r->weight_bias + r->act_grads);
    return out;
}



static uint64_t arena(pbl_graph *g)
{
    pbl_exec *e;
    char err[256];
    if (pbl_exec_create(&e, g, NULL, err, sizeof err) != PBL_OK)
        fail_msg("pbl_exec_create: %s", err);
    pbl_exec_stats st;
    assert_int_equal(pbl_exec_stats_get(e, &st), PBL_OK);
    pbl_exec_destroy(e);
    return st.arena_bytes;
}

static int32_t count_op(const pbl_graph *g, const char *op)
{
    int32_t k = 0;
    for (pbl_node n = 0; n < pbl_graph_node_count(g); n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        k += strcmp(ni.op, op) == 0;
    }
    return k;
}

/* The bytes of the largest bias gradient a fully_connected_grad_wb node of f writes: such a
 * node writes dw and db at once, so both are live together where the unfused graph may have
 * freed dw (its update ran) before the sum wrote db. The fused arena may exceed the unfused
 * one by that much, no more. */
static uint64_t wb_extra(const pbl_graph *f)
{
    uint64_t extra = 0;
    for (pbl_node n = 0; n < pbl_graph_node_count(f); n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(f, n, &ni), PBL_OK);
        if (strcmp(ni.op, "fully_connected_grad_wb") == 0) {
            uint64_t b = value_bytes(f, ni.outputs[1]);
            extra = b > extra ? b : extra;
        }
    }
    return extra;
}

/* Fuses g, checks the fused graph is smaller and plans no larger (but for wb_extra), and
 * trains both. */
static void check_trains(pbl_graph *g, int steps, const char *what, int32_t min_dense)
{
    pbl_fuse_report r;
    pbl_graph *f = fuse(g, &r);
    uint64_t a0 = arena(g), a1 = arena(f);
    printf("  %-24s nodes %d -> %d (%d dense, %d chains, %d weight+bias, %d product+act grad), arena %llu -> %llu bytes\n",
           what, (int)r.nodes_before, (int)r.nodes_after, (int)r.dense, (int)r.chains, (int)r.weight_bias,
           (int)r.act_grads, (unsigned long long)a0, (unsigned long long)a1);
    assert_true(r.dense >= min_dense);
    assert_int_equal(count_op(f, "fully_connected_act"), r.dense);
    assert_int_equal(count_op(f, "fully_connected_grad_wb"), r.weight_bias);
    assert_int_equal(count_op(f, "matmul_act_grad"), r.act_grads);
    assert_true(r.nodes_after < r.nodes_before);
    assert_true(a1 <= a0 + wb_extra(f));
    same_training(g, f, steps, what);
    pbl_graph_destroy(f);
}

static void test_mlp_train_bit_identical(void **state)
{
    (void)state;
    pbl_graph *g = NULL;
    char err[256];
    if (zoo_build("mlp_train", 32, &g, err, sizeof err) != PBL_OK)
        fail_msg("%s", err);
    pbl_fuse_report r;
    pbl_graph *f = fuse(g, &r);
    /* the hidden layers' fully_connected + relu; the logits layer has no activation */
    assert_int_equal(r.dense, 2);
    assert_true(pbl_graph_find_node(f, "fc1+relu1") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc2+relu2") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc1") == PBL_NONE);
    /* backward: each layer's weight and bias gradients, the two hidden layers' data-gradient
     * product + relu_grad; the gradients keep their names */
    assert_int_equal(r.weight_bias, 3);
    assert_int_equal(r.act_grads, 2);
    assert_true(pbl_graph_find_node(f, "fc3/grad_w+fc3/grad_b") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc3/grad_x+relu2/grad") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc1/grad_b") == PBL_NONE);
    pbl_node wb = pbl_graph_find_node(f, "fc1/grad_w+fc1/grad_b");
    pbl_node_info ni;
    assert_int_equal(pbl_graph_node_info(f, wb, &ni), PBL_OK);
    assert_int_equal(ni.outputs[0], pbl_graph_find_value(f, "fc1/grad_w"));
    assert_int_equal(ni.outputs[1], pbl_graph_find_value(f, "fc1/grad_b"));
    pbl_graph_destroy(f);
    /* without the backward patterns the arena never grows (see wb_extra) */
    pbl_fuse_options o = pbl_fuse_options_default();
    o.backward = 0;
    assert_int_equal(pbl_graph_fuse(g, &o, &f, &r, err, sizeof err), PBL_OK);
    assert_int_equal(r.weight_bias + r.act_grads, 0);
    assert_int_equal(r.nodes_after, 22);
    assert_true(arena(f) <= arena(g));
    pbl_graph_destroy(f);
    check_trains(g, 4, "mlp_train adam", 2);
    pbl_graph_destroy(g);
}

/* 100 layers, SGD with momentum: every layer's backward fuses. */
static void test_mlp100_train_bit_identical(void **state)
{
    (void)state;
    pbl_graph *g = NULL;
    char err[256];
    if (zoo_build("mlp100_train", 64, &g, err, sizeof err) != PBL_OK)
        fail_msg("%s", err);
    pbl_fuse_report r;
    pbl_graph *f = fuse(g, &r);
    assert_int_equal(r.dense, 99);
    assert_int_equal(r.weight_bias, 100);
    assert_int_equal(r.act_grads, 99);
    pbl_graph_destroy(f);
    check_trains(g, 3, "mlp100_train momentum", 99);
    pbl_graph_destroy(g);
}

static pbl_value node2(pbl_graph *g, const char *op, const char *name, pbl_value a, pbl_value b)
{
    pbl_value in[] = { a, b }, y = PBL_NONE;
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = b == PBL_NONE ? 1 : 2 };
    pbl_status s = pbl_graph_add_node(g, &d, NULL, &y);
    if (s != PBL_OK)
        fail_msg("adding %s: %s", op, pbl_graph_errmsg(g));
    return y;
}

/* fc(x, w, b) + tanh; fc(x, w) + add(b) + sigmoid; fc(x, w) + add(b) + gelu (gelu's gradient
 * reads its input: only the add fuses); fc(x, w) + add(b) -> loss; Adam. */
static void test_activations_bit_identical(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    const char *acts[] = { "tanh", "sigmoid", "gelu", NULL };
    int64_t width[] = { 24, 1500, 256, 12, 10 }; /* fc2 sums 1500 products, over BLAS's K blocks */
    pbl_value h = pbl_input(g, "x", PBL_SHAPE(64, width[0])), labels = pbl_label(g, "labels", PBL_I32, PBL_SHAPE(64));
    pbl_value params[8], grads[8];
    for (int l = 0; l < 4; l++) {
        char w[16], b[16], fc[16], add[16], act[16];
        snprintf(w, sizeof w, "fc%d/w", l + 1);
        snprintf(b, sizeof b, "fc%d/b", l + 1);
        snprintf(fc, sizeof fc, "fc%d", l + 1);
        snprintf(add, sizeof add, "bias%d", l + 1);
        snprintf(act, sizeof act, "act%d", l + 1);
        params[2 * l] = pbl_param(g, w, PBL_SHAPE(width[l + 1], width[l]));
        params[2 * l + 1] = pbl_param(g, b, PBL_SHAPE(width[l + 1]));
        pbl_value in[] = { h, params[2 * l], params[2 * l + 1] };
        pbl_node_desc d = { .op = "fully_connected", .name = fc, .inputs = in, .n_inputs = l == 0 ? 3 : 2 };
        assert_int_equal(pbl_graph_add_node(g, &d, NULL, &h), PBL_OK);
        if (l > 0)
            h = node2(g, "add", add, h, params[2 * l + 1]);
        if (acts[l])
            h = node2(g, acts[l], act, h, PBL_NONE);
    }
    pbl_value loss = pbl_softmax_cross_entropy(g, h, labels);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", loss), PBL_OK);
    assert_int_equal(pbl_graph_gradient(g, loss, params, 8, grads), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    assert_int_equal(pbl_graph_add_optimizer(g, &o, params, grads, 8), PBL_OK);
    pbl_fuse_report r;
    pbl_graph *f = fuse(g, &r);
    assert_true(pbl_graph_find_node(f, "fc1+act1") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc2+bias2+act2") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc3+bias3") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "act3") != PBL_NONE); /* gelu stays: its gradient reads fc3+bias3 */
    assert_true(pbl_graph_find_node(f, "fc4+bias4") != PBL_NONE);
    /* backward: fc1's bias gradient is a sum after its product; the others' are sum_to nodes
     * of the bias adds, before the product (the fused node takes the sum_to's place) */
    assert_int_equal(r.weight_bias, 4);
    assert_true(pbl_graph_find_node(f, "fc1/grad_w+fc1/grad_b") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc2/grad_w+bias2/grad_b") != PBL_NONE);
    /* tanh_grad, sigmoid_grad and gelu_grad of data-gradient products */
    assert_int_equal(r.act_grads, 3);
    assert_true(pbl_graph_find_node(f, "fc4/grad_x+act3/grad") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc3/grad_x+act2/grad") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "fc2/grad_x+act1/grad") != PBL_NONE);
    pbl_graph_destroy(f);
    check_trains(g, 4, "tanh/sigmoid/gelu adam", 4);
    pbl_graph_destroy(g);
}

/* ---- random element-wise chains ------------------------------------------------------------ */

static const char *const chain_ops[] = { "relu", "sigmoid", "tanh", "gelu", "add", "sub", "mul", "div" };

/* Runs g's forward (every output) with inputs from `seed`; returns the outputs' bytes. */
static float *run_outputs(pbl_graph *g, uint64_t seed, int64_t numel)
{
    run r;
    run_open(&r, g, PBL_STORAGE_PLANNED, seed);
    assert_int_equal(pbl_exec_run(r.e), PBL_OK);
    int32_t n_out = pbl_graph_output_count(g);
    float *y = malloc((size_t)(n_out * numel) * sizeof *y);
    assert_non_null(y);
    for (int32_t k = 0; k < n_out; k++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", (int)k);
        assert_int_equal(pbl_exec_read(r.e, pbl_graph_output(g, name), y + k * numel, (size_t)numel * sizeof *y), PBL_OK);
    }
    run_close(&r);
    return y;
}

static void test_random_chains(void **state)
{
    (void)state;
    uint64_t rng = 42;
    int32_t chains = 0, fused = 0;
    for (int trial = 0; trial < 60; trial++) {
        pbl_graph *g;
        assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
        int64_t numel = 1 + (int64_t)(rng_next(&rng) % 1500); /* blocks of 512 and a tail */
        pbl_value vars[6];
        for (int k = 0; k < 6; k++) {
            char name[8];
            snprintf(name, sizeof name, "in%d", k);
            vars[k] = pbl_input(g, name, PBL_SHAPE(numel));
        }
        int32_t n_out = 0;
        pbl_value v = vars[0];
        int len = 2 + (int)(rng_next(&rng) % 14);
        for (int i = 0; i < len; i++) {
            const char *op = chain_ops[rng_next(&rng) % 8];
            char name[16];
            snprintf(name, sizeof name, "n%d", i);
            if (strcmp(op, "add") && strcmp(op, "sub") && strcmp(op, "mul") && strcmp(op, "div")) {
                v = node2(g, op, name, v, PBL_NONE);
            } else {
                pbl_value b = vars[rng_next(&rng) % 6];
                v = rng_next(&rng) % 2 ? node2(g, op, name, v, b) : node2(g, op, name, b, v);
            }
            uint64_t cut = rng_next(&rng) % 10;
            if (cut == 0 && i + 1 < len) { /* an intermediate output: the chain breaks here */
                char on[16];
                snprintf(on, sizeof on, "y%d", (int)n_out++);
                assert_int_equal(pbl_graph_set_output(g, on, v), PBL_OK);
            } else if (cut == 1 && i + 1 < len) { /* read twice: the chain breaks here too */
                char nn[16];
                snprintf(nn, sizeof nn, "twice%d", i);
                v = node2(g, "add", nn, v, v);
            }
        }
        char on[16];
        snprintf(on, sizeof on, "y%d", (int)n_out++);
        assert_int_equal(pbl_graph_set_output(g, on, v), PBL_OK);
        pbl_fuse_report r;
        pbl_graph *f = fuse(g, &r);
        assert_int_equal(count_op(f, "elementwise_chain"), r.chains);
        chains += r.chains;
        fused += r.fused_nodes;
        uint64_t seed = rng_next(&rng);
        float *a = run_outputs(g, seed, numel), *b = run_outputs(f, seed, numel);
        if (memcmp(a, b, (size_t)(n_out * numel) * sizeof *a) != 0)
            fail_msg("trial %d: a chain of %d ops over %lld elements differs fused", trial, len, (long long)numel);
        assert_true(arena(f) <= arena(g));
        free(a);
        free(b);
        pbl_graph_destroy(f);
        pbl_graph_destroy(g);
    }
    printf("  60 random chains: %d elementwise_chain nodes from %d nodes, outputs match bit for bit\n", (int)chains,
           (int)fused);
    assert_true(chains >= 30);
}

/* ---- fusion must not create a cycle ------------------------------------------------------- */

/* y = relu(p) + tanh(sgd(p, grad)): fusing relu with the add would make one node that reads
 * p before its update and tanh of the update. tanh with the add is fine. */
static void test_no_fusion_across_update(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value p = pbl_param(g, "p", PBL_SHAPE(16)), grad = pbl_input(g, "grad", PBL_SHAPE(16));
    pbl_value r = node2(g, "relu", "r", p, PBL_NONE);
    pbl_value p2 = node2(g, "sgd", "update", p, grad);
    pbl_value t = node2(g, "tanh", "t", p2, PBL_NONE);
    pbl_value y = node2(g, "add", "y", r, t);
    assert_int_equal(pbl_graph_set_output(g, "y0", y), PBL_OK);
    pbl_fuse_report rep;
    pbl_graph *f = fuse(g, &rep);
    assert_int_equal(rep.chains, 1);
    assert_true(pbl_graph_find_node(f, "r") != PBL_NONE);
    assert_true(pbl_graph_find_node(f, "t+y") != PBL_NONE);
    float *a = run_outputs(g, 3, 16), *b = run_outputs(f, 3, 16);
    assert_memory_equal(a, b, 16 * sizeof *a);
    free(a);
    free(b);
    pbl_graph_destroy(f);
    pbl_graph_destroy(g);
}

/* s = sum(dy) feeds x (through broadcast_to), then matmul(dy, x, trans_a = 1): fusing the
 * product with the sum would make one node that needs its own output. */
static void test_no_weight_bias_cycle(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value dy0 = pbl_input(g, "dy0", PBL_SHAPE(6, 5));
    pbl_value dy = node2(g, "tanh", "dy", dy0, PBL_NONE);
    static const int64_t axis0[] = { 0 }, shape65[] = { 6, 5 };
    pbl_attr ax = PBL_ATTR_INTS("axes", axis0, 1), sh = PBL_ATTR_INTS("shape", shape65, 2);
    pbl_value s, x, dw;
    pbl_node_desc ds = { .op = "sum", .name = "s", .inputs = &dy, .n_inputs = 1, .attrs = &ax, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &ds, NULL, &s), PBL_OK);
    pbl_node_desc db = { .op = "broadcast_to", .name = "x", .inputs = &s, .n_inputs = 1, .attrs = &sh, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &db, NULL, &x), PBL_OK);
    pbl_attr ta = PBL_ATTR_INT("trans_a", 1);
    pbl_node_desc dm = { .op = "matmul", .name = "dw", .inputs = (pbl_value[]){ dy, x }, .n_inputs = 2, .attrs = &ta,
                         .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &dm, NULL, &dw), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "y0", dw), PBL_OK);
    pbl_fuse_report rep;
    pbl_graph *f = fuse(g, &rep);
    assert_int_equal(rep.weight_bias, 0);
    float *a = run_outputs(g, 5, 25), *b = run_outputs(f, 5, 25);
    assert_memory_equal(a, b, 25 * sizeof *a);
    free(a);
    free(b);
    pbl_graph_destroy(f);
    pbl_graph_destroy(g);
}

/* Where the weight + bias node goes. order 0: the product, then the sum — the node takes the
 * product's place. 1: the sum, then x computed, then the product — the product's inputs do
 * not exist at the sum's place, so the node takes the product's. 2: as 1, but the sum's
 * output is read (scaled) before the product — neither place works, nothing fuses. Results
 * agree with the plain graph in every case. */
static void test_weight_bias_placement(void **state)
{
    (void)state;
    static const int64_t axis0[] = { 0 };
    for (int order = 0; order < 3; order++) {
        pbl_graph *g;
        assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
        pbl_value dy = node2(g, "tanh", "dy", pbl_input(g, "dy0", PBL_SHAPE(6, 5)), PBL_NONE), x = PBL_NONE, s, dw;
        pbl_value x0 = pbl_input(g, "x0", PBL_SHAPE(6, 4));
        pbl_attr ax = PBL_ATTR_INTS("axes", axis0, 1), ta = PBL_ATTR_INT("trans_a", 1);
        pbl_node_desc ds = { .op = "sum", .name = "s", .inputs = &dy, .n_inputs = 1, .attrs = &ax, .n_attrs = 1 };
        pbl_node_desc dm = { .op = "matmul", .name = "dw", .n_inputs = 2, .attrs = &ta, .n_attrs = 1 };
        if (order == 0) {
            x = node2(g, "tanh", "x", x0, PBL_NONE);
            dm.inputs = (pbl_value[]){ dy, x };
            assert_int_equal(pbl_graph_add_node(g, &dm, NULL, &dw), PBL_OK);
            assert_int_equal(pbl_graph_add_node(g, &ds, NULL, &s), PBL_OK);
        } else {
            assert_int_equal(pbl_graph_add_node(g, &ds, NULL, &s), PBL_OK);
            if (order == 2)
                s = node2(g, "tanh", "s2", s, PBL_NONE);
            x = node2(g, "tanh", "x", x0, PBL_NONE);
            dm.inputs = (pbl_value[]){ dy, x };
            assert_int_equal(pbl_graph_add_node(g, &dm, NULL, &dw), PBL_OK);
        }
        assert_int_equal(pbl_graph_set_output(g, "y0", dw), PBL_OK);
        assert_int_equal(pbl_graph_set_output(g, "y1", s), PBL_OK);
        pbl_fuse_report rep;
        pbl_graph *f = fuse(g, &rep);
        assert_int_equal(rep.weight_bias, order < 2);
        if (order < 2) {
            pbl_node_info ni;
            pbl_node n = pbl_graph_find_node(f, "dw+s");
            assert_int_equal(pbl_graph_node_info(f, n, &ni), PBL_OK);
            assert_string_equal(ni.op, "fully_connected_grad_wb");
            /* after x's tanh (order 1: which the plain graph ran after the sum) */
            assert_true(pbl_graph_find_node(f, "x") < n);
            assert_int_equal(ni.outputs[1], pbl_graph_find_value(f, "s"));
        }
        float got[2][25];
        for (int k = 0; k < 2; k++) {
            run r;
            run_open(&r, k ? f : g, PBL_STORAGE_PLANNED, 5);
            assert_int_equal(pbl_exec_run(r.e), PBL_OK);
            assert_int_equal(pbl_exec_read(r.e, pbl_graph_output(r.g, "y0"), got[k], 20 * sizeof(float)), PBL_OK);
            assert_int_equal(pbl_exec_read(r.e, pbl_graph_output(r.g, "y1"), got[k] + 20, 5 * sizeof(float)), PBL_OK);
            run_close(&r);
        }
        assert_memory_equal(got[0], got[1], sizeof got[0]);
        pbl_graph_destroy(f);
        pbl_graph_destroy(g);
    }
}

static void test_bad_arguments(void **state)
{
    (void)state;
    pbl_graph *out = (pbl_graph *)&out;
    char err[128];
    assert_int_equal(pbl_graph_fuse(NULL, NULL, &out, NULL, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_null(out);
    assert_non_null(strstr(err, "NULL"));
    /* the fused ops check their attributes like any op */
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4)), y;
    int64_t codes[] = { 5 }; /* add: needs an operand */
    pbl_attr at = PBL_ATTR_INTS("codes", codes, 1);
    pbl_node_desc d = { .op = "elementwise_chain", .inputs = &x, .n_inputs = 1, .attrs = &at, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, &y), PBL_ERR_ARITY);
    codes[0] = 99;
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, &y), PBL_ERR_ATTR);
    pbl_value a = pbl_input(g, "a", PBL_SHAPE(3, 4)), b = pbl_input(g, "b", PBL_SHAPE(4, 5));
    pbl_value sv = pbl_input(g, "s", PBL_SHAPE(3, 5)), outs[2];
    pbl_attr act = PBL_ATTR_INT("act", 0); /* none: not an activation's gradient */
    pbl_node_desc m = { .op = "matmul_act_grad", .inputs = (pbl_value[]){ a, b, sv }, .n_inputs = 3, .attrs = &act,
                        .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &m, NULL, &y), PBL_ERR_ATTR);
    act.i = 1;
    assert_int_equal(pbl_graph_add_node(g, &m, NULL, &y), PBL_OK);
    m.inputs = (pbl_value[]){ a, b, a }; /* s is not the product's shape */
    assert_int_equal(pbl_graph_add_node(g, &m, NULL, &y), PBL_ERR_SHAPE);
    pbl_node_desc w = { .op = "fully_connected_grad_wb", .inputs = (pbl_value[]){ a, b }, .n_inputs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &w, NULL, outs), PBL_ERR_SHAPE); /* 3 rows and 4 */
    w.inputs = (pbl_value[]){ a, sv };
    assert_int_equal(pbl_graph_add_node(g, &w, NULL, outs), PBL_OK);
    pbl_graph_destroy(g);
}

/* ---- out of memory ------------------------------------------------------------------------ */

static void test_allocation_failures(void **state)
{
    (void)state;
    pbl_graph *g = NULL;
    char err[256];
    if (zoo_build("mlp_train", 8, &g, err, sizeof err) != PBL_OK)
        fail_msg("%s", err);
    failing f = { 0 };
    pbl_allocator hook = { failing_alloc, failing_free, &f };
    pbl_fuse_options o = pbl_fuse_options_default();
    o.allocator = &hook;
    long fail_at = 1;
    for (;; fail_at++) {
        f = (failing){ .fail_at = fail_at };
        pbl_graph *out = NULL;
        pbl_status s = pbl_graph_fuse(g, &o, &out, NULL, err, sizeof err);
        if (s == PBL_OK) {
            assert_non_null(out);
            pbl_graph_destroy(out);
            assert_int_equal(f.live, 0);
            break;
        }
        if (s != PBL_ERR_NOMEM)
            fail_msg("allocation %ld failing gave %s: %s", fail_at, pbl_status_str(s), err);
        assert_null(out);
        if (f.live != 0)
            fail_msg("allocation %ld failing leaked %zu bytes", fail_at, f.live);
    }
    printf("  each of %ld allocations failed in turn: PBL_ERR_NOMEM, nothing leaked\n", fail_at - 1);
    assert_true(fail_at > 10);
    pbl_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_train_bit_identical),
        cmocka_unit_test(test_mlp100_train_bit_identical),
        cmocka_unit_test(test_activations_bit_identical),
        cmocka_unit_test(test_random_chains),
        cmocka_unit_test(test_no_fusion_across_update),
        cmocka_unit_test(test_no_weight_bias_cycle),
        cmocka_unit_test(test_weight_bias_placement),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
