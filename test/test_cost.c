/*
 * The one cost model (graph/ir/cost.h, the rules in ops/): every op's cost is positive on a
 * non-empty node; the products' FLOPs are 2·m·n·k on known shapes; pbl_node_cost is the
 * roofline of flops and bytes; and the mirror rule's "cheap", derived from the cost, picks
 * the ops MXNet's rule names (maps, copies, layout changes) and none of the ones it keeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "graph/ir/cost.h"
#include "graph/ir/registry.h"
#include "pebble/pebble.h"

/* Every op of the registry over metas of four dims (the inputs and outputs the op has at
 * least; fill none) and its attributes' defaults: whatever the rule reads, the cost is
 * positive and the bytes are what the metas hold. */
static void test_every_op_positive(void **state)
{
    (void)state;
    pbl__meta in[PBL__MAX_IN], out[PBL__MAX_OUT];
    for (int32_t k = 0; k < PBL__MAX_IN; k++)
        in[k] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(4, 3, 8, 8) };
    for (int32_t k = 0; k < PBL__MAX_OUT; k++)
        out[k] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(4, 3, 8, 8) };
    for (int32_t id = 0; id < PBL__OP_COUNT; id++) {
        const pbl__op *op = pbl__op_get(id);
        assert_non_null(op);
        pbl__attr_val attr[16];
        memset(attr, 0, sizeof attr);
        assert_true(op->n_attrs <= 16);
        for (int32_t a = 0; a < op->n_attrs; a++)
            attr[a] = (pbl__attr_val){ .set = 0, .i = op->attrs[a].i, .f = op->attrs[a].f };
        pbl__cost_ctx c = { .in = in, .n_in = op->n_in_min, .out = out, .n_out = op->n_out, .attr = attr };
        pbl__cost k = pbl__op_cost(op, &c);
        if (k.flops <= 0 || pbl__cost_time(&k) <= 0)
            print_error("%s: flops %lld, time %lld\n", op->name, (long long)k.flops, (long long)pbl__cost_time(&k));
        assert_true(k.flops > 0);
        assert_true(pbl__cost_time(&k) > 0);
        assert_int_equal(k.bytes_read, (int64_t)op->n_in_min * 4 * 3 * 8 * 8 * 4);
        assert_int_equal(k.bytes_written, (int64_t)op->n_out * 4 * 3 * 8 * 8 * 4);
    }
}

static pbl_value var(pbl_graph *g, const char *name, pbl_dtype dt, pbl_shape s)
{
    pbl_value v;
    assert_int_equal(pbl_graph_add_variable(g, name, PBL_VALUE_INPUT, dt, s, &v), PBL_OK);
    return v;
}

/* Adds a node and returns it; its outputs go to y (room for 4) when not NULL. */
static pbl_node node(pbl_graph *g, const char *op, const pbl_value *in, int32_t n_in, const pbl_attr *at,
                     int32_t n_at, pbl_value *y)
{
    pbl_value out[4];
    pbl_node n;
    pbl_node_desc d = { .op = op, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    pbl_status s = pbl_graph_add_node(g, &d, &n, y ? y : out);
    if (s != PBL_OK)
        print_error("%s: %s\n", op, pbl_graph_errmsg(g));
    assert_int_equal(s, PBL_OK);
    return n;
}

static int64_t flops(const pbl_graph *g, pbl_node n) { return pbl__node_cost(g, n).flops; }

static void test_products(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    /* y[8,3] = x[8,5]·w[3,5]ᵀ + b: m 8, n 3, k 5 */
    pbl_value x = var(g, "x", PBL_F32, PBL_SHAPE(8, 5)), w = var(g, "w", PBL_F32, PBL_SHAPE(3, 5));
    pbl_value b = var(g, "b", PBL_F32, PBL_SHAPE(3));
    pbl_node fc = node(g, "fully_connected", (pbl_value[]){ x, w, b }, 3, NULL, 0, NULL);
    assert_int_equal(flops(g, fc), 2 * 8 * 3 * 5);
    pbl_node fca = node(g, "fully_connected_act", (pbl_value[]){ x, w, b }, 3,
                        (pbl_attr[]){ PBL_ATTR_INT("act", 1) }, 1, NULL);
    assert_int_equal(flops(g, fca), 2 * 8 * 3 * 5);
    /* the packed layout: w as one 16-column panel [1, 5, 16] */
    pbl_value wp = var(g, "wp", PBL_F32, PBL_SHAPE(1, 5, 16));
    pbl_node fcp = node(g, "fully_connected_packed", (pbl_value[]){ x, wp }, 2,
                        (pbl_attr[]){ PBL_ATTR_INT("out", 3) }, 1, NULL);
    assert_int_equal(flops(g, fcp), 2 * 8 * 3 * 5);
    /* batched matmul [2,4,5]·[2,5,3]: batch 2, m 4, n 3, k 5; and with a transposed a */
    pbl_value a = var(g, "a", PBL_F32, PBL_SHAPE(2, 4, 5)), bb = var(g, "bb", PBL_F32, PBL_SHAPE(2, 5, 3));
    pbl_value at = var(g, "at", PBL_F32, PBL_SHAPE(2, 5, 4));
    pbl_node mm = node(g, "matmul", (pbl_value[]){ a, bb }, 2, NULL, 0, NULL);
    assert_int_equal(flops(g, mm), 2 * 2 * 4 * 3 * 5);
    pbl_node mmt = node(g, "matmul", (pbl_value[]){ at, bb }, 2, (pbl_attr[]){ PBL_ATTR_INT("trans_a", 1) }, 1, NULL);
    assert_int_equal(flops(g, mmt), 2 * 2 * 4 * 3 * 5);
    /* the fused gradients: the product plus one operation per element of the epilogue */
    pbl_value a2 = var(g, "a2", PBL_F32, PBL_SHAPE(4, 5)), b2 = var(g, "b2", PBL_F32, PBL_SHAPE(5, 3));
    pbl_value s2 = var(g, "s2", PBL_F32, PBL_SHAPE(4, 3));
    pbl_node mag = node(g, "matmul_act_grad", (pbl_value[]){ a2, b2, s2 }, 3,
                        (pbl_attr[]){ PBL_ATTR_INT("act", 1) }, 1, NULL);
    assert_int_equal(flops(g, mag), 2 * 4 * 3 * 5 + 4 * 3);
    pbl_value dy = var(g, "dy", PBL_F32, PBL_SHAPE(8, 3));
    pbl_node wb = node(g, "fully_connected_grad_wb", (pbl_value[]){ dy, x }, 2, NULL, 0, NULL);
    assert_int_equal(flops(g, wb), 2 * 3 * 5 * 8 + 8 * 3); /* dw: m 3, n 5, k 8; db: 24 adds */
    /* conv2d x[2,3,8,8] w[4,3,3,3] pad 1 -> y[2,4,8,8]: each of 512 outputs a dot of 27 */
    pbl_value cx = var(g, "cx", PBL_F32, PBL_SHAPE(2, 3, 8, 8)), cw = var(g, "cw", PBL_F32, PBL_SHAPE(4, 3, 3, 3));
    pbl_attr pad = PBL_ATTR_INTS("pad", ((int64_t[]){ 1 }), 1);
    pbl_value cy;
    pbl_node cv = node(g, "conv2d", (pbl_value[]){ cx, cw }, 2, &pad, 1, &cy);
    assert_int_equal(flops(g, cv), 2 * 512 * 27);
    pbl_attr gi[] = { pad, PBL_ATTR_INTS("shape", ((int64_t[]){ 2, 3, 8, 8 }), 4) };
    pbl_node cgi = node(g, "conv2d_grad_input", (pbl_value[]){ cy, cw }, 2, gi, 2, NULL);
    assert_int_equal(flops(g, cgi), 2 * 512 * 27);
    pbl_attr gw[] = { pad, PBL_ATTR_INTS("shape", ((int64_t[]){ 4, 3, 3, 3 }), 4) };
    pbl_node cgw = node(g, "conv2d_grad_weight", (pbl_value[]){ cy, cx }, 2, gw, 2, NULL);
    assert_int_equal(flops(g, cgw), 2 * 512 * 27);
    /* depthwise (groups 3): each output a dot of 9 */
    pbl_value dw = var(g, "dw", PBL_F32, PBL_SHAPE(3, 1, 3, 3));
    pbl_attr dwa[] = { pad, PBL_ATTR_INT("groups", 3) };
    pbl_node dcv = node(g, "conv2d", (pbl_value[]){ cx, dw }, 2, dwa, 2, NULL);
    assert_int_equal(flops(g, dcv), 2 * (2 * 3 * 8 * 8) * 9);

    /* the stream weight is the roofline: fc moves (40 + 15 + 3 + 24)·4 = 328 bytes for 240
     * FLOPs, a 64x64x64 product 49152 bytes for 524288 FLOPs */
    assert_int_equal(pbl_node_cost(g, fc), (8 * 5 + 3 * 5 + 3 + 8 * 3) * 4);
    pbl_value p = var(g, "p", PBL_F32, PBL_SHAPE(64, 64)), q = var(g, "q", PBL_F32, PBL_SHAPE(64, 64));
    pbl_node big = node(g, "matmul", (pbl_value[]){ p, q }, 2, NULL, 0, NULL);
    assert_int_equal(pbl_node_cost(g, big), 2 * 64 * 64 * 64);
    pbl_graph_destroy(g);
}

/* The mirror rule's choice, node by node on typical shapes. */
static void test_cheap(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = var(g, "x", PBL_F32, PBL_SHAPE(8, 16)), y = var(g, "y", PBL_F32, PBL_SHAPE(8, 16));
    pbl_value w = var(g, "w", PBL_F32, PBL_SHAPE(16, 16)), v = var(g, "v", PBL_F32, PBL_SHAPE(16));
    pbl_value img = var(g, "img", PBL_F32, PBL_SHAPE(2, 4, 8, 8)), k = var(g, "k", PBL_F32, PBL_SHAPE(4, 4, 3, 3));
    pbl_value c4 = var(g, "c4", PBL_F32, PBL_SHAPE(4));
    pbl_value ids = var(g, "ids", PBL_I32, PBL_SHAPE(8)), lab = var(g, "lab", PBL_I32, PBL_SHAPE(8));
    pbl_attr shape816 = PBL_ATTR_INTS("shape", ((int64_t[]){ 8, 16 }), 2);
    pbl_attr shape128 = PBL_ATTR_INTS("shape", ((int64_t[]){ 128 }), 1);
    pbl_attr shape16 = PBL_ATTR_INTS("shape", ((int64_t[]){ 16 }), 1);
    pbl_attr kern = PBL_ATTR_INTS("kernel", ((int64_t[]){ 3 }), 1);
    pbl_attr pool[] = { kern, PBL_ATTR_INTS("stride", ((int64_t[]){ 2 }), 1),
                        PBL_ATTR_INTS("pad", ((int64_t[]){ 1 }), 1) };
    struct {
        const char    *op;
        pbl_value      in[3];
        int32_t        n_in;
        const pbl_attr *at;
        int32_t        n_at;
        int            cheap;
    } c[] = {
        /* MXNet's mirror: maps, copies and layout changes are recomputed */
        { "add", { x, y }, 2, NULL, 0, 1 },
        { "sub", { x, y }, 2, NULL, 0, 1 },
        { "mul", { x, y }, 2, NULL, 0, 1 },
        { "scale", { x }, 1, NULL, 0, 1 },
        { "copy", { x }, 1, NULL, 0, 1 },
        { "relu", { x }, 1, NULL, 0, 1 },
        { "sigmoid", { x }, 1, NULL, 0, 1 },
        { "tanh", { x }, 1, NULL, 0, 1 },
        { "gelu", { x }, 1, NULL, 0, 1 },
        { "reshape", { x }, 1, &shape128, 1, 1 },
        { "flatten", { img }, 1, NULL, 0, 1 },
        { "broadcast_to", { v }, 1, &shape816, 1, 1 },
        { "transpose", { x }, 1, NULL, 0, 1 },
        /* the rule's answer where the old list was silent: a map, a gather, a concatenation
         * and a constant are single streaming passes too */
        { "div", { x, y }, 2, NULL, 0, 1 },
        { "embedding", { ids, w }, 2, NULL, 0, 1 },
        { "concat", { x, y }, 2, (pbl_attr[]){ PBL_ATTR_INT("axis", 0) }, 1, 1 },
        { "fill", { 0 }, 0, &shape816, 1, 1 },
        /* kept: products, windows, reductions, losses, row statistics, the random draw */
        { "fully_connected", { x, w }, 2, NULL, 0, 0 },
        { "matmul", { x, w }, 2, NULL, 0, 0 },
        { "conv2d", { img, k }, 2, (pbl_attr[]){ PBL_ATTR_INTS("pad", ((int64_t[]){ 1 }), 1) }, 1, 0 },
        { "max_pool2d", { img }, 1, pool, 3, 0 },
        { "avg_pool2d", { img }, 1, pool, 3, 0 },
        { "global_avg_pool", { img }, 1, NULL, 0, 0 },
        { "sum", { x }, 1, NULL, 0, 0 },
        { "mean", { x }, 1, (pbl_attr[]){ PBL_ATTR_INTS("axes", ((int64_t[]){ 1 }), 1) }, 1, 0 },
        { "sum_to", { x }, 1, &shape16, 1, 0 },
        { "softmax", { x }, 1, NULL, 0, 0 },
        { "log_softmax", { x }, 1, NULL, 0, 0 },
        { "softmax_cross_entropy", { x, lab }, 2, NULL, 0, 0 },
        { "mse_loss", { x, y }, 2, NULL, 0, 0 },
        { "batch_norm", { img, c4, c4 }, 3, NULL, 0, 0 },
        { "layer_norm", { x, v, v }, 3, NULL, 0, 0 },
        { "dropout", { x }, 1, NULL, 0, 0 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        pbl_node n = node(g, c[i].op, c[i].in, c[i].n_in, c[i].at, c[i].n_at, NULL);
        pbl__cost e = pbl__node_cost(g, n);
        if (pbl__cost_cheap(&e) != c[i].cheap)
            print_error("%s: flops %lld, bytes written %lld: cheap %d, want %d\n", c[i].op, (long long)e.flops,
                        (long long)e.bytes_written, pbl__cost_cheap(&e), c[i].cheap);
        assert_int_equal(pbl__cost_cheap(&e), c[i].cheap);
    }
    pbl_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_positive),
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_cheap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
