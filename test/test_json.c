/* JSON graphs (pebble/json.h): every zoo graph, inference and training, saves, loads and saves
 * again to the same bytes with the same value and node ids; every attribute type survives
 * exactly; an MLP training graph runs bit-identically before and after a round trip; a table
 * of malformed files each gives its status and the JSON path; failing each allocation of a
 * load in turn leaks nothing; saving replaces files atomically; the fuzzer's regression
 * inputs each give a clean error. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pebble/pebble.h"
#include "zoo.h"

#ifndef JSON_REGRESSIONS_DIR
#error "JSON_REGRESSIONS_DIR: the fuzzer's regression inputs"
#endif

static char *to_json(const pbl_graph *g, size_t *len)
{
    char *t = NULL, err[512];
    pbl_status s = pbl_graph_to_json(g, &t, len, err, sizeof err);
    if (s != PBL_OK)
        print_error("to_json: %s\n", err);
    assert_int_equal(s, PBL_OK);
    return t;
}

static pbl_graph *from_json(const char *t, size_t len)
{
    pbl_graph *g = NULL;
    char err[512];
    pbl_status s = pbl_graph_from_json(&g, t, len, NULL, err, sizeof err);
    if (s != PBL_OK)
        print_error("from_json: %s\n", err);
    assert_int_equal(s, PBL_OK);
    return g;
}

/* Same ids, names, kinds, dtypes, shapes, producers, backward marks, inputs and outputs. */
static void assert_same_graph(const pbl_graph *a, const pbl_graph *b)
{
    assert_int_equal(pbl_graph_value_count(a), pbl_graph_value_count(b));
    assert_int_equal(pbl_graph_node_count(a), pbl_graph_node_count(b));
    assert_int_equal(pbl_graph_output_count(a), pbl_graph_output_count(b));
    for (pbl_value v = 0; v < pbl_graph_value_count(a); v++) {
        pbl_value_info x, y;
        assert_int_equal(pbl_graph_value_info(a, v, &x), PBL_OK);
        assert_int_equal(pbl_graph_value_info(b, v, &y), PBL_OK);
        assert_string_equal(x.name, y.name);
        assert_int_equal(x.kind, y.kind);
        assert_int_equal(x.dtype, y.dtype);
        assert_true(pbl_shape_equal(&x.shape, &y.shape));
        assert_int_equal(x.producer, y.producer);
        assert_int_equal(x.producer_slot, y.producer_slot);
        assert_int_equal(x.is_backward, y.is_backward);
    }
    for (pbl_node n = 0; n < pbl_graph_node_count(a); n++) {
        pbl_node_info x, y;
        assert_int_equal(pbl_graph_node_info(a, n, &x), PBL_OK);
        assert_int_equal(pbl_graph_node_info(b, n, &y), PBL_OK);
        assert_string_equal(x.name, y.name);
        assert_string_equal(x.op, y.op);
        assert_int_equal(x.n_inputs, y.n_inputs);
        assert_int_equal(x.is_backward, y.is_backward);
        for (int32_t i = 0; i < x.n_inputs; i++)
            assert_int_equal(x.inputs[i], y.inputs[i]);
    }
    for (int32_t i = 0; i < pbl_graph_output_count(a); i++) {
        const char *na, *nb;
        pbl_value va, vb;
        assert_int_equal(pbl_graph_output_at(a, i, &na, &va), PBL_OK);
        assert_int_equal(pbl_graph_output_at(b, i, &nb, &vb), PBL_OK);
        assert_string_equal(na, nb);
        assert_int_equal(va, vb);
    }
}

/* save -> load -> save: the same bytes, the same graph, and the gradient pass refused again
 * when it had run. */
static void round_trip(const pbl_graph *g, const char *what)
{
    size_t n1, n2;
    char *t1 = to_json(g, &n1);
    pbl_graph *h = from_json(t1, n1);
    char *t2 = to_json(h, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0)
        print_error("%s: the second save differs from the first\n", what);
    assert_int_equal(n1, n2);
    assert_memory_equal(t1, t2, n1);
    assert_same_graph(g, h);
    assert_int_equal(pbl_graph_validate(h), PBL_OK);
    pbl_json_free(t1);
    pbl_json_free(t2);
    pbl_graph_destroy(h);
}

static void test_zoo_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < zoo_count(); i++) {
        pbl_graph *g;
        char err[256];
        assert_int_equal(zoo_build(zoo_name(i), 2, &g, err, sizeof err), PBL_OK);
        size_t len;
        char *t = to_json(g, &len);
        printf("  %-20s %6d values %6d nodes  %8zu bytes of JSON\n", zoo_name(i), (int)pbl_graph_value_count(g),
               (int)pbl_graph_node_count(g), len);
        pbl_json_free(t);
        round_trip(g, zoo_name(i));
        pbl_graph_destroy(g);
    }
}

/* Every attribute type, given and defaulted, including values JSON numbers cannot say. */
static void test_attribute_types(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x \"quoted\"\n\xc3\xa9", PBL_SHAPE(2, 3, 4));
    const double alphas[] = { 0.1, -0.0, 1e-300, 4.9406564584124654e-324, 1.7976931348623157e308, -3.0, INFINITY,
                              -INFINITY, NAN, 1.0 / 3.0 };
    const char *names[] = { "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9" };
    for (int k = 0; k < 10; k++) {
        pbl_attr a = PBL_ATTR_FLOAT("alpha", alphas[k]);
        pbl_node_desc d = { .op = "scale", .name = names[k], .inputs = &x, .n_inputs = 1, .attrs = &a, .n_attrs = 1 };
        assert_int_equal(pbl_graph_add_node(g, &d, NULL, NULL), PBL_OK);
    }
    int64_t axes[] = { 0, 2 }, perm[] = { 2, 0, 1 };
    pbl_attr sum_attrs[] = { PBL_ATTR_INTS("axes", axes, 2), PBL_ATTR_INT("keepdims", 1) };
    pbl_node_desc ds = { .op = "sum", .name = "sum", .inputs = &x, .n_inputs = 1, .attrs = sum_attrs, .n_attrs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &ds, NULL, NULL), PBL_OK);
    pbl_attr empty = PBL_ATTR_INTS("axes", axes, 0);
    pbl_node_desc de = { .op = "mean", .name = "mean", .inputs = &x, .n_inputs = 1, .attrs = &empty, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &de, NULL, NULL), PBL_OK);
    pbl_attr tp = PBL_ATTR_INTS("perm", perm, 3);
    pbl_node_desc dt = { .op = "transpose", .name = "t", .inputs = &x, .n_inputs = 1, .attrs = &tp, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &dt, NULL, NULL), PBL_OK);
    pbl_attr drop[] = { PBL_ATTR_FLOAT("p", 0.25), PBL_ATTR_INT("seed", INT64_MIN) };
    pbl_node_desc dd = { .op = "dropout", .name = "drop", .inputs = &x, .n_inputs = 1, .attrs = drop, .n_attrs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &dd, NULL, NULL), PBL_OK);
    pbl_value m = pbl_graph_find_value(g, "drop:1");
    assert_int_not_equal(m, PBL_NONE);
    assert_int_equal(pbl_graph_set_output(g, "mask", m), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "x", x), PBL_OK);
    round_trip(g, "attributes");

    size_t len;
    char *t = to_json(g, &len);
    pbl_graph *h = from_json(t, len);
    for (int k = 0; k < 10; k++) {
        double a, b;
        assert_int_equal(pbl_graph_node_attr_float(g, pbl_graph_find_node(g, names[k]), "alpha", &a), PBL_OK);
        assert_int_equal(pbl_graph_node_attr_float(h, pbl_graph_find_node(h, names[k]), "alpha", &b), PBL_OK);
        assert_memory_equal(&a, &b, sizeof a); /* bit for bit: -0.0 and NaN included */
    }
    const int64_t *ints;
    int32_t n;
    int64_t i64;
    double f;
    assert_int_equal(pbl_graph_node_attr_ints(h, pbl_graph_find_node(h, "sum"), "axes", &ints, &n), PBL_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ints[1], 2);
    assert_int_equal(pbl_graph_node_attr_int(h, pbl_graph_find_node(h, "sum"), "keepdims", &i64), PBL_OK);
    assert_int_equal(i64, 1);
    assert_int_equal(pbl_graph_node_attr_ints(h, pbl_graph_find_node(h, "t"), "perm", &ints, &n), PBL_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ints[0], 2);
    assert_int_equal(pbl_graph_node_attr_int(h, pbl_graph_find_node(h, "drop"), "seed", &i64), PBL_OK);
    assert_true(i64 == INT64_MIN);
    assert_int_equal(pbl_graph_node_attr_float(h, pbl_graph_find_node(h, "drop"), "p", &f), PBL_OK);
    assert_true(f == 0.25);
    /* 0.1 is written in its shortest exact form, not as 0.10000000000000001 */
    assert_non_null(strstr(t, "\"alpha\": 0.1}"));
    assert_non_null(strstr(t, "\"alpha\": -0.0}"));
    assert_non_null(strstr(t, "\"alpha\": \"-inf\"}"));
    pbl_json_free(t);
    pbl_graph_destroy(h);
    pbl_graph_destroy(g);
}

/* ---- an MLP training graph runs the same before and after a round trip -------------------- */

enum { B = 16, D = 12, H = 10, C = 4, STEPS = 20 };

static pbl_graph *mlp_train_graph(void)
{
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(B, D));
    pbl_value y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(B));
    pbl_value w1 = pbl_param(g, "w1", PBL_SHAPE(H, D)), b1 = pbl_param(g, "b1", PBL_SHAPE(H));
    pbl_value h = pbl_dropout(g, pbl_tanh(g, pbl_fully_connected(g, x, w1, b1)), 0.2, 11, NULL);
    pbl_value w2 = pbl_param(g, "w2", PBL_SHAPE(C, H)), b2 = pbl_param(g, "b2", PBL_SHAPE(C));
    pbl_value logits = pbl_fully_connected(g, h, w2, b2);
    pbl_value loss = pbl_softmax_cross_entropy(g, logits, y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", loss), PBL_OK);
    pbl_value ps[] = { w1, b1, w2, b2 }, gs[4];
    assert_int_equal(pbl_graph_gradient(g, loss, ps, 4, gs), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    o.lr = 0.01;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, ps, gs, 4), PBL_OK);
    return g;
}

/* Runs STEPS steps from fixed data and weights; writes the losses and the final weights. */
static void train(const pbl_graph *g, float *losses, float *weights, size_t n_weights)
{
    pbl_exec *e;
    char err[256];
    pbl_exec_options o = pbl_exec_options_default();
    o.blas_threads = 1; /* both graphs' runs with BLAS held fixed: the bits compared are the loader's */
    pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
    if (s != PBL_OK)
        print_error("exec_create: %s\n", err);
    assert_int_equal(s, PBL_OK);
    static const char *const params[] = { "w1", "b1", "w2", "b2" };
    const size_t sizes[] = { H * D, H, C * H, C };
    uint32_t r = 12345;
    float *p = weights;
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < sizes[k]; i++) {
            r = r * 1664525u + 1013904223u;
            p[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 0.5f;
        }
        assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, params[k]), p, sizes[k] * sizeof *p), PBL_OK);
        p += sizes[k];
    }
    assert_int_equal((size_t)(p - weights), n_weights);
    float x[B * D];
    int32_t y[B];
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < B * D; i++) {
            r = r * 1664525u + 1013904223u;
            x[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
        }
        for (int i = 0; i < B; i++)
            y[i] = (int32_t)((i + step) % C);
        assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, "x"), x, sizeof x), PBL_OK);
        assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, "y"), y, sizeof y), PBL_OK);
        assert_int_equal(pbl_exec_run(e), PBL_OK);
        assert_int_equal(pbl_exec_read(e, pbl_graph_output(g, "loss"), &losses[step], sizeof(float)), PBL_OK);
    }
    p = weights;
    for (int k = 0; k < 4; k++) {
        assert_int_equal(pbl_exec_read(e, pbl_graph_find_value(g, params[k]), p, sizes[k] * sizeof *p), PBL_OK);
        p += sizes[k];
    }
    pbl_exec_destroy(e);
}

static void test_mlp_runs_identically(void **state)
{
    (void)state;
    enum { NW = H * D + H + C * H + C };
    pbl_graph *g = mlp_train_graph();
    char path[] = "test_json_mlp.json", err[512];
    remove(path);
    assert_int_equal(pbl_graph_save_json(g, path, err, sizeof err), PBL_OK);
    pbl_graph *h;
    pbl_status s = pbl_graph_load_json(&h, path, NULL, err, sizeof err);
    if (s != PBL_OK)
        print_error("%s\n", err);
    assert_int_equal(s, PBL_OK);
    assert_same_graph(g, h);
    static float la[STEPS], lb[STEPS], wa[NW], wb[NW];
    train(g, la, wa, NW);
    train(h, lb, wb, NW);
    printf("  loss %.5f -> %.5f in %d Adam steps, the same bits after the round trip\n", la[0], la[STEPS - 1], STEPS);
    assert_true(la[STEPS - 1] < la[0]);
    assert_memory_equal(la, lb, sizeof la);
    assert_memory_equal(wa, wb, sizeof wa);
    /* the gradient pass ran, so it may not run again on the loaded graph */
    pbl_value w1 = pbl_graph_find_value(h, "w1"), gr;
    assert_int_equal(pbl_graph_gradient(h, pbl_graph_output(h, "loss"), &w1, 1, &gr), PBL_ERR_INVALID_ARG);
    remove(path);
    pbl_graph_destroy(h);
    pbl_graph_destroy(g);
}

/* ---- malformed input ------------------------------------------------------------------------ */

#define HEAD "{\"format\": \"pebble-graph\", \"version\": \"1.0\", "
#define X "{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [4, 3]}"

typedef struct bad_case {
    const char *text;
    pbl_status  status;
    const char *says;   /* a substring of the message: the JSON path and what is wrong */
} bad_case;

static const bad_case bad_cases[] = {
    { "", PBL_ERR_FORMAT, "line 1" },
    { HEAD "\"variables\": [" X, PBL_ERR_FORMAT, "line 1, column" },                    /* truncated */
    { "[1, 2]", PBL_ERR_FORMAT, "$: a graph is a JSON object, not an array" },
    { "{\"version\": \"1.0\"}", PBL_ERR_FORMAT, "$: missing field 'format'" },
    { "{\"format\": \"onnx\", \"version\": \"1.0\"}", PBL_ERR_FORMAT, "$.format: 'onnx'" },
    { "{\"format\": \"pebble-graph\"}", PBL_ERR_FORMAT, "$: missing field 'version'" },
    { "{\"format\": \"pebble-graph\", \"version\": 1}", PBL_ERR_FORMAT, "$.version: must be a string, not an integer" },
    { "{\"format\": \"pebble-graph\", \"version\": \"2.0\"}", PBL_ERR_FORMAT, "$.version: version 2.0 is not supported" },
    { "{\"format\": \"pebble-graph\", \"version\": \"1\"}", PBL_ERR_FORMAT, "$.version: '1' is not MAJOR.MINOR" },
    { HEAD "\"nodez\": []}", PBL_ERR_FORMAT, "$: unknown field 'nodez'" },
    { HEAD "\"variables\": {}}", PBL_ERR_FORMAT, "$.variables: must be an array, not an object" },
    { HEAD "\"variables\": [3]}", PBL_ERR_FORMAT, "$.variables[0]: must be an object, not an integer" },
    { HEAD "\"variables\": [{\"kind\": \"input\", \"dtype\": \"f32\", \"shape\": []}]}", PBL_ERR_FORMAT,
      "$.variables[0]: missing field 'name'" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"weights\", \"dtype\": \"f32\", \"shape\": []}]}",
      PBL_ERR_FORMAT, "$.variables[0].kind: 'weights' is not one of" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f64\", \"shape\": []}]}",
      PBL_ERR_FORMAT, "$.variables[0].dtype: dtype 'f64'" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [2, \"3\"]}]}",
      PBL_ERR_FORMAT, "$.variables[0].shape[1]: a dim must be an integer, not a string" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [1,1,1,1,1,1,1]}]}",
      PBL_ERR_INVALID_ARG, "$.variables[0].shape: rank 7" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [4, -3]}]}",
      PBL_ERR_INVALID_ARG, "$.variables[0]: variable 'x': bad shape [4, -3]" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [0]}]}",
      PBL_ERR_INVALID_ARG, "$.variables[0]: variable 'x': bad shape [0]" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", "
      "\"shape\": [9223372036854775807, 9223372036854775807]}]}",
      PBL_ERR_INVALID_ARG, "$.variables[0]: variable 'x': bad shape" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", "
      "\"shape\": [1048576, 1048576, 1048576]}]}",
      PBL_ERR_INVALID_ARG, "2^40 elements at most" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [99999999999999999999]}]}",
      PBL_ERR_FORMAT, "line 1" },                                                         /* beyond int64 */
    { HEAD "\"variables\": [" X ", " X "]}", PBL_ERR_INVALID_ARG, "$.variables[1]: variable 'x': a value of that name exists" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"x\", \"op\": \"relu\", \"inputs\": [\"x\"]}]}",
      PBL_ERR_INVALID_ARG, "$.nodes[0]: node 'x' (relu): a value named 'x' exists" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"x\"]}, "
      "{\"name\": \"r\", \"op\": \"tanh\", \"inputs\": [\"x\"]}]}",
      PBL_ERR_INVALID_ARG, "$.nodes[1]: node 'r' (tanh): a node of that name exists" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"frobnicate\", \"inputs\": [\"x\"]}]}",
      PBL_ERR_UNKNOWN_OP, "$.nodes[0].op: unknown op 'frobnicate'" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"inputs\": [\"x\"]}]}",
      PBL_ERR_FORMAT, "$.nodes[0]: missing field 'op'" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"x\", \"x7\"]}]}",
      PBL_ERR_DANGLING, "$.nodes[0].inputs[1]: unknown value 'x7'" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"x\", \"x\"]}]}",
      PBL_ERR_ARITY, "$.nodes[0].inputs: node 'r' (relu): takes 1 inputs, got 2" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [3]}]}",
      PBL_ERR_FORMAT, "$.nodes[0].inputs[0]: must be a value's name, not an integer" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"a\", \"op\": \"relu\", \"inputs\": [\"b\"]}, "
      "{\"name\": \"b\", \"op\": \"relu\", \"inputs\": [\"a\"]}]}",
      PBL_ERR_CYCLE, "$.nodes[0]: node 'a' lies on a cycle" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"c\", \"op\": \"relu\", \"inputs\": [\"x\"]}, "
      "{\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"c\", \"b\"]}, "
      "{\"name\": \"b\", \"op\": \"relu\", \"inputs\": [\"b\"]}]}",
      PBL_ERR_CYCLE, "$.nodes[2]: node 'b' lies on a cycle" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"s\", \"op\": \"scale\", \"inputs\": [\"x\"], "
      "\"attrs\": {\"alpha\": \"big\"}}]}",
      PBL_ERR_FORMAT, "$.nodes[0].attrs.alpha: must be a number" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"s\", \"op\": \"scale\", \"inputs\": [\"x\"], "
      "\"attrs\": {\"beta\": 2}}]}",
      PBL_ERR_ATTR, "$.nodes[0].attrs: node 's' (scale): op has no attribute 'beta'" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"f\", \"op\": \"flatten\", \"inputs\": [\"x\"], "
      "\"attrs\": {\"axis\": 1.5}}]}",
      PBL_ERR_ATTR, "$.nodes[0].attrs: node 'f' (flatten): attribute 'axis' must be an int" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"t\", \"op\": \"transpose\", \"inputs\": [\"x\"], "
      "\"attrs\": {\"perm\": [1,0,1,0,1,0,1,0,1]}}]}",
      PBL_ERR_ATTR, "$.nodes[0].attrs.perm: 9 ints" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"s\", \"op\": \"scale\", \"inputs\": [\"x\"], "
      "\"attrs\": {\"alpha\": 1, \"alpha\": 2}}]}",
      PBL_ERR_FORMAT, "duplicate object key" },
    { HEAD "\"variables\": [" X ", {\"name\": \"w\", \"kind\": \"param\", \"dtype\": \"f32\", \"shape\": [5, 2]}], "
      "\"nodes\": [{\"name\": \"fc\", \"op\": \"fully_connected\", \"inputs\": [\"x\", \"w\"]}]}",
      PBL_ERR_SHAPE, "$.nodes[0]: node 'fc' (fully_connected)" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"x\"], "
      "\"shapes\": [[4, 4]]}]}",
      PBL_ERR_SHAPE, "$.nodes[0].shapes[0]: the op gives [4, 3], the file says [4, 4]" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"x\"], "
      "\"dtypes\": [\"i32\"]}]}",
      PBL_ERR_DTYPE, "$.nodes[0].dtypes[0]: the op gives f32, the file says i32" },
    { HEAD "\"variables\": [" X "], \"nodes\": [{\"name\": \"r\", \"op\": \"relu\", \"inputs\": [\"x\"], "
      "\"backward\": 1}]}",
      PBL_ERR_FORMAT, "$.nodes[0].backward: must be a boolean, not an integer" },
    { HEAD "\"variables\": [" X "], \"outputs\": [{\"name\": \"y\", \"value\": \"z\"}]}",
      PBL_ERR_DANGLING, "$.outputs[0].value: unknown value 'z'" },
    { HEAD "\"variables\": [" X "], \"outputs\": [{\"name\": \"y\", \"value\": \"x\"}, {\"name\": \"y\", \"value\": \"x\"}]}",
      PBL_ERR_INVALID_ARG, "$.outputs[1].name: output 'y' is listed twice" },
    { HEAD "\"variables\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [2], \"after_nodes\": 3}]}",
      PBL_ERR_FORMAT, "$.variables[0].after_nodes: 3; must be 0..0" },
    { HEAD "\"variables\": [" X ", {\"name\": \"g\", \"kind\": \"param\", \"dtype\": \"f32\", \"shape\": [4, 3]}], "
      "\"nodes\": [{\"name\": \"u1\", \"op\": \"sgd\", \"inputs\": [\"x\", \"g\"]}, "
      "{\"name\": \"u2\", \"op\": \"sgd\", \"inputs\": [\"x\", \"g\"]}]}",
      PBL_ERR_INVALID_ARG, "$: node 'u2' (sgd): value 'x' is already updated in place by node 'u1'" },
};

static void test_malformed(void **state)
{
    (void)state;
    int n = (int)(sizeof bad_cases / sizeof bad_cases[0]);
    for (int i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        pbl_graph *g = (pbl_graph *)&g;
        char err[512] = "";
        pbl_status s = pbl_graph_from_json(&g, c->text, strlen(c->text), NULL, err, sizeof err);
        int ok = s == c->status && g == NULL && strstr(err, c->says) != NULL;
        printf("  %-20s %s\n", pbl_status_name(s), err);
        if (!ok)
            print_error("case %d: want %s and a message with \"%s\"\n", i, pbl_status_name(c->status), c->says);
        assert_true(ok);
    }
}

/* A file out of topological order (a node rewired to a later value) loads in a topological
 * order; a newer minor version's unknown fields are skipped. */
static void test_order_and_minor_version(void **state)
{
    (void)state;
    const char *t = "{\"format\": \"pebble-graph\", \"version\": \"1.7\", \"future\": {\"x\": 1}, "
                    "\"variables\": [" X "], \"nodes\": ["
                    "{\"name\": \"b\", \"op\": \"relu\", \"inputs\": [\"a\"], \"colour\": \"red\"}, "
                    "{\"name\": \"a\", \"op\": \"tanh\", \"inputs\": [\"x\"]}], "
                    "\"outputs\": [{\"name\": \"y\", \"value\": \"b\"}]}";
    pbl_graph *g = from_json(t, strlen(t));
    assert_int_equal(pbl_graph_find_node(g, "a"), 0);
    assert_int_equal(pbl_graph_find_node(g, "b"), 1);
    assert_int_equal(pbl_graph_output(g, "y"), pbl_graph_find_value(g, "b"));
    pbl_graph_destroy(g);

    /* node a rewired to read node b, made after it: a valid graph whose nodes are out of
     * topological order; it loads with b first, and saves are stable from then on */
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4, 3));
    pbl_node a;
    pbl_value ya;
    pbl_node_desc da = { .op = "relu", .name = "a", .inputs = &x, .n_inputs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &da, &a, &ya), PBL_OK);
    pbl_value yb = pbl_tanh(g, x);
    assert_int_equal(pbl_graph_set_input(g, a, 0, yb), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "y", ya), PBL_OK);
    assert_int_equal(pbl_graph_validate(g), PBL_OK);
    size_t n1, n2, n3;
    char *t1 = to_json(g, &n1);
    pbl_graph *h1 = from_json(t1, n1);
    assert_int_equal(pbl_graph_find_node(h1, "a"), 1);
    pbl_node_info ni;
    assert_int_equal(pbl_graph_node_info(h1, 1, &ni), PBL_OK);
    assert_int_equal(ni.inputs[0], pbl_graph_find_value(h1, "tanh1"));
    char *t2 = to_json(h1, &n2);
    pbl_graph *h2 = from_json(t2, n2);
    char *t3 = to_json(h2, &n3);
    assert_int_equal(n2, n3);
    assert_memory_equal(t2, t3, n2);
    pbl_json_free(t1);
    pbl_json_free(t2);
    pbl_json_free(t3);
    pbl_graph_destroy(h2);
    pbl_graph_destroy(h1);
    pbl_graph_destroy(g);
}

/* ---- memory ---------------------------------------------------------------------------------- */

typedef struct counting {
    long   count, fail_at;
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

static void test_allocation_failures(void **state)
{
    (void)state;
    pbl_graph *g;
    char err[256];
    assert_int_equal(zoo_build("mlp_train", 4, &g, err, sizeof err), PBL_OK);
    /* out of topological order too, so the reordering's allocations are failed as well */
    const char *extra = "{\"format\": \"pebble-graph\", \"version\": \"1.0\", \"variables\": [" X "], \"nodes\": ["
                        "{\"name\": \"b\", \"op\": \"dropout\", \"inputs\": [\"a\"]}, "
                        "{\"name\": \"a\", \"op\": \"tanh\", \"inputs\": [\"x\"]}]}";
    size_t len;
    char *t = to_json(g, &len);
    const char *texts[] = { t, extra };
    size_t lens[] = { len, strlen(extra) };
    char path[] = "test_json_alloc.json";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(t, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    for (int which = 0; which < 3; which++) {
        counting c = { .fail_at = -1 };
        pbl_allocator a = { c_alloc, c_free, &c };
        pbl_graph *h;
        pbl_status s = which < 2 ? pbl_graph_from_json(&h, texts[which], lens[which], &a, err, sizeof err)
                                 : pbl_graph_load_json(&h, path, &a, err, sizeof err);
        assert_int_equal(s, PBL_OK);
        pbl_graph_destroy(h);
        long total = c.count;
        assert_int_equal(c.live_blocks, 0);
        long nomem = 0;
        for (long n = 0; n < total; n++) {
            c = (counting){ .fail_at = n };
            h = (pbl_graph *)&h;
            s = which < 2 ? pbl_graph_from_json(&h, texts[which], lens[which], &a, err, sizeof err)
                          : pbl_graph_load_json(&h, path, &a, err, sizeof err);
            if (s != PBL_ERR_NOMEM || h != NULL || c.live_blocks != 0 || c.live_bytes != 0)
                print_error("failing allocation %ld of %ld: %s (%s), %ld blocks / %zu bytes live\n", n, total,
                            pbl_status_name(s), err, c.live_blocks, c.live_bytes);
            assert_int_equal(s, PBL_ERR_NOMEM);
            assert_null(h);
            assert_int_equal(c.live_blocks, 0);
            assert_int_equal(c.live_bytes, 0);
            nomem++;
        }
        printf("  %s: %ld allocations, each failed in turn: PBL_ERR_NOMEM and nothing live every time\n",
               which == 0 ? "mlp_train from text" : which == 1 ? "reordered nodes" : "mlp_train from a file", nomem);
        assert_true(total > 10);
    }
    remove(path);

    /* pbl_graph_to_json's text comes from the graph's allocator: each of its allocations
     * failed in turn is PBL_ERR_NOMEM with nothing more live, and the text is the same */
    counting c = { .fail_at = -1 };
    pbl_allocator a = { c_alloc, c_free, &c };
    pbl_graph *h;
    assert_int_equal(pbl_graph_from_json(&h, t, len, &a, err, sizeof err), PBL_OK);
    long blocks = c.live_blocks, start = c.count;
    size_t bytes = c.live_bytes;
    char *u;
    size_t ulen;
    assert_int_equal(pbl_graph_to_json(h, &u, &ulen, err, sizeof err), PBL_OK);
    long n_json = c.count - start;
    assert_int_equal(ulen, len);
    assert_memory_equal(u, t, len);
    assert_int_equal(c.live_blocks, blocks + 1);
    pbl_json_free(u);
    assert_int_equal(c.live_blocks, blocks);
    assert_int_equal(c.live_bytes, bytes);
    for (long n = 0; n < n_json; n++) {
        c.fail_at = c.count + n;
        u = (char *)&u;
        assert_int_equal(pbl_graph_to_json(h, &u, &ulen, err, sizeof err), PBL_ERR_NOMEM);
        assert_null(u);
        assert_int_equal(c.live_blocks, blocks);
        assert_int_equal(c.live_bytes, bytes);
    }
    printf("  mlp_train to text (%zu bytes): %ld allocations from the graph's allocator, each failed in turn: "
           "PBL_ERR_NOMEM and nothing more live\n", len, n_json);
    assert_true(n_json >= 1);
    pbl_graph_destroy(h);
    assert_int_equal(c.live_blocks, 0);
    pbl_json_free(t);
    pbl_graph_destroy(g);
}

/* ---- files ----------------------------------------------------------------------------------- */

static void test_files(void **state)
{
    (void)state;
    pbl_graph *g;
    char err[512];
    assert_int_equal(zoo_build("mlp", 2, &g, err, sizeof err), PBL_OK);
    /* a file that cannot be created leaves nothing behind */
    assert_int_equal(pbl_graph_save_json(g, "no_such_dir_json/x.json", err, sizeof err), PBL_ERR_IO);
    assert_non_null(strstr(err, "no_such_dir_json/x.json"));
    /* saving over a file replaces it whole */
    const char *path = "test_json_files.json";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    assert_int_equal(pbl_graph_save_json(g, path, err, sizeof err), PBL_OK);
    pbl_graph *h;
    assert_int_equal(pbl_graph_load_json(&h, path, NULL, err, sizeof err), PBL_OK);
    assert_same_graph(g, h);
    pbl_graph_destroy(h);
    /* no temporary file is left beside it */
    DIR *d = opendir(".");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        assert_null(strstr(e->d_name, "test_json_files.json.tmp"));
    closedir(d);
    remove(path);
    /* a message from a file starts with its name */
    f = fopen(path, "wb");
    fputs("{\"format\": \"pebble-graph\", \"version\": \"1.0\", \"nodes\": [{\"name\": \"n\", \"op\": \"relu\", "
          "\"inputs\": [\"x7\"]}]}",
          f);
    fclose(f);
    h = (pbl_graph *)&h;
    assert_int_equal(pbl_graph_load_json(&h, path, NULL, err, sizeof err), PBL_ERR_DANGLING);
    assert_null(h);
    assert_string_equal(err, "test_json_files.json: $.nodes[0].inputs[0]: unknown value 'x7'");
    remove(path);
    assert_int_equal(pbl_graph_load_json(&h, path, NULL, err, sizeof err), PBL_ERR_IO);
    assert_non_null(strstr(err, "test_json_files.json: cannot open"));
    /* JSON holds UTF-8 only */
    pbl_graph *bad;
    assert_int_equal(pbl_graph_create(&bad, NULL), PBL_OK);
    pbl_input(bad, "x\xff", PBL_SHAPE(2));
    char *t = (char *)&t;
    assert_int_equal(pbl_graph_to_json(bad, &t, NULL, err, sizeof err), PBL_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(err, "not valid UTF-8"));
    pbl_graph_destroy(bad);
    pbl_graph_destroy(g);
}

/* Inputs the fuzzer once found troublesome: each must give a clean error (or load). */
static void test_fuzz_regressions(void **state)
{
    (void)state;
    DIR *d = opendir(JSON_REGRESSIONS_DIR);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024], err[512] = "";
        snprintf(path, sizeof path, "%s/%s", JSON_REGRESSIONS_DIR, e->d_name);
        pbl_graph *g = (pbl_graph *)&g;
        pbl_status s = pbl_graph_load_json(&g, path, NULL, err, sizeof err);
        printf("  %-28s %-20s %s\n", e->d_name, pbl_status_name(s), err);
        assert_true(s == PBL_OK ? g != NULL : g == NULL && err[0] != '\0');
        if (s == PBL_OK) {
            size_t len;
            char *t = to_json(g, &len);
            pbl_json_free(t);
        }
        pbl_graph_destroy(s == PBL_OK ? g : NULL);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zoo_round_trip),
        cmocka_unit_test(test_attribute_types),
        cmocka_unit_test(test_mlp_runs_identically),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_order_and_minor_version),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
