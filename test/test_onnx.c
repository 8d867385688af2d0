/*
 * The ONNX loader (graph/io/onnx_load.c) on models built here with protobuf-c: a small MLP and
 * shape-juggling ops against references computed in this file; Softmax's axis before and from
 * opset 13; and every class of bad input — one UNSUPPORTED status listing each unknown op,
 * malformed bytes, a missing graph, a dangling input, a value defined twice, a cycle, absurd
 * shapes, initializer data that does not match its dims — each a clean status and message.
 * Allocation failures at every point give PBL_ERR_NOMEM and leak nothing.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph/base/cpu.h"
#include "onnx/onnx.pb-c.h"
#include "pebble/pebble.h"

/* ---- building models ------------------------------------------------------------------------- */

/* A model under construction; everything lives in fixed arrays (tests are small). */
typedef struct mb {
    Onnx__ModelProto         m;
    Onnx__GraphProto         g;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto          nodes[16];
    Onnx__NodeProto         *node_ptrs[16];
    Onnx__AttributeProto     attrs[32];
    Onnx__AttributeProto    *attr_ptrs[32];
    int                      n_attrs;
    Onnx__TensorProto        inits[8];
    Onnx__TensorProto       *init_ptrs[8];
    Onnx__ValueInfoProto     vis[16];
    Onnx__ValueInfoProto    *in_ptrs[8], *out_ptrs[8];
    Onnx__TypeProto          types[16];
    Onnx__TypeProto__Tensor  tts[16];
    Onnx__TensorShapeProto   shapes[16];
    Onnx__TensorShapeProto__Dimension dims[16][6];
    Onnx__TensorShapeProto__Dimension *dim_ptrs[16][6];
    int                      n_vis;
} mb;

static void mb_init(mb *b, int64_t opset)
{
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = (char *)"";
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->m.n_opset_import = 1;
    b->m.opset_import = b->opsets;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.graph = &b->g;
    b->g.node = b->node_ptrs;
    b->g.initializer = b->init_ptrs;
    b->g.input = b->in_ptrs;
    b->g.output = b->out_ptrs;
}

static Onnx__ValueInfoProto *mb_vi(mb *b, const char *name, int32_t ndim, const int64_t *dims)
{
    int k = b->n_vis++;
    Onnx__ValueInfoProto *v = &b->vis[k];
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(&b->types[k]);
    onnx__type_proto__tensor__init(&b->tts[k]);
    onnx__tensor_shape_proto__init(&b->shapes[k]);
    v->name = (char *)name;
    v->type = &b->types[k];
    b->types[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->types[k].tensor_type = &b->tts[k];
    b->tts[k].has_elem_type = 1;
    b->tts[k].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    b->tts[k].shape = &b->shapes[k];
    b->shapes[k].n_dim = (size_t)ndim;
    b->shapes[k].dim = b->dim_ptrs[k];
    for (int32_t d = 0; d < ndim; d++) {
        onnx__tensor_shape_proto__dimension__init(&b->dims[k][d]);
        b->dims[k][d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        b->dims[k][d].dim_value = dims[d];
        b->dim_ptrs[k][d] = &b->dims[k][d];
    }
    return v;
}

static void mb_input(mb *b, const char *name, int32_t ndim, const int64_t *dims)
{
    b->in_ptrs[b->g.n_input++] = mb_vi(b, name, ndim, dims);
}

static void mb_output(mb *b, const char *name)
{
    b->out_ptrs[b->g.n_output++] = mb_vi(b, name, 0, NULL);
    b->out_ptrs[b->g.n_output - 1]->type = NULL; /* no declared type: nothing to check */
}

static void mb_init_f(mb *b, const char *name, int32_t ndim, const int64_t *dims, float *data, size_t n)
{
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->n_dims = (size_t)ndim;
    t->dims = (int64_t *)dims;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_float_data = n;
    t->float_data = data;
    b->init_ptrs[b->g.n_initializer++] = t;
}

static void mb_init_i64(mb *b, const char *name, const int64_t *dims1, int64_t *data, size_t n)
{
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->n_dims = 1;
    t->dims = (int64_t *)dims1;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_int64_data = n;
    t->int64_data = data;
    b->init_ptrs[b->g.n_initializer++] = t;
}

static Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, char **in, size_t n_in, char **out, size_t n_out)
{
    Onnx__NodeProto *n = &b->nodes[b->g.n_node];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    n->input = in;
    n->n_input = n_in;
    n->output = out;
    n->n_output = n_out;
    n->attribute = &b->attr_ptrs[b->n_attrs];
    b->node_ptrs[b->g.n_node++] = n;
    return n;
}

/* Attributes go right after their node's (call straight after mb_node). */
static void mb_attr_i(mb *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    b->attr_ptrs[b->n_attrs++] = a;
    n->n_attribute++;
}

static uint8_t *mb_pack(mb *b, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *p = malloc(*len ? *len : 1);
    assert_non_null(p);
    onnx__model_proto__pack(&b->m, p);
    return p;
}

/* Loads packed bytes; returns the status, with the message printed. */
static pbl_status load(const uint8_t *p, size_t len, pbl_graph **g, pbl_onnx_weights **w, char *err, size_t errlen)
{
    pbl_onnx_options o = pbl_onnx_options_default();
    o.weights = w;
    pbl_status s = pbl_graph_from_onnx(g, p, len, &o, err, errlen);
    printf("  load: %s%s%s\n", pbl_status_name(s), s ? ": " : "", s ? err : "");
    return s;
}

/* Runs g with the weights and input x; reads output `name` into y (n floats). */
static void run1(pbl_graph *g, pbl_onnx_weights *w, const char *xname, const float *x, size_t xn, const char *name,
                 float *y, size_t n)
{
    pbl_exec *e;
    char err[1024];
    pbl_status s = pbl_exec_create(&e, g, NULL, err, sizeof err);
    if (s != PBL_OK)
        fprintf(stderr, "exec: %s\n", err);
    assert_int_equal(s, PBL_OK);
    assert_int_equal(pbl_onnx_weights_bind(w, e, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, xname), x, xn * sizeof *x), PBL_OK);
    assert_int_equal(pbl_exec_run(e), PBL_OK);
    pbl_value v = pbl_graph_output(g, name);
    assert_int_not_equal(v, PBL_NONE);
    assert_int_equal(pbl_exec_read(e, v, y, n * sizeof *y), PBL_OK);
    pbl_exec_destroy(e);
}

static void close_to(const float *got, const double *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > tol * (1 + fabs(want[i]))) {
            fprintf(stderr, "element %zu: got %.9g want %.9g\n", i, got[i], want[i]);
            fail();
        }
}

/* ---- an MLP: Gemm(transB) -> Relu -> MatMul -> Add (broadcast) -> Softmax ------------------ */

static float W1[4 * 3], B1[4], W2[4 * 2], B2[2];
static const int64_t dW1[] = { 4, 3 }, dB1[] = { 4 }, dW2[] = { 4, 2 }, dB2[] = { 2 };
static int64_t dX[] = { 2, 3 }; /* the batch changes in test_pack_rule only */
static char *in_gemm[] = { "x", "w1", "b1" }, *out_gemm[] = { "h" }, *in_relu[] = { "h" }, *out_relu[] = { "r" };
static char *in_mm[] = { "r", "w2" }, *out_mm[] = { "m" }, *in_add[] = { "m", "b2" }, *out_add[] = { "z" };
static char *in_sm[] = { "z" }, *out_sm[] = { "p" };

static void build_mlp(mb *b)
{
    for (int i = 0; i < 12; i++)
        W1[i] = (float)(0.1 * i - 0.5);
    for (int i = 0; i < 4; i++)
        B1[i] = (float)(0.05 * i);
    for (int i = 0; i < 8; i++)
        W2[i] = (float)(0.3 - 0.07 * i);
    B2[0] = 0.1f, B2[1] = -0.2f;
    mb_init(b, 13);
    mb_input(b, "x", 2, dX);
    mb_init_f(b, "w1", 2, dW1, W1, 12);
    mb_init_f(b, "b1", 1, dB1, B1, 4);
    mb_init_f(b, "w2", 2, dW2, W2, 8);
    mb_init_f(b, "b2", 1, dB2, B2, 2);
    Onnx__NodeProto *n = mb_node(b, "Gemm", "fc1", in_gemm, 3, out_gemm, 1);
    mb_attr_i(b, n, "transB", 1);
    mb_node(b, "Relu", "relu", in_relu, 1, out_relu, 1);
    mb_node(b, "MatMul", "mm", in_mm, 2, out_mm, 1);
    mb_node(b, "Add", "add", in_add, 2, out_add, 1);
    mb_node(b, "Softmax", "sm", in_sm, 1, out_sm, 1);
    mb_output(b, "p");
}

/* pack 1 (at batch 2: every level) and 2: the Gemm becomes fully_connected_packed on repacked
 * weights; 0: fully_connected */
static void mlp_case(int pack)
{
    mb b;
    build_mlp(&b);
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    char err[1024];
    pbl_onnx_options opt = pbl_onnx_options_default();
    opt.weights = &w;
    opt.pack_weights = pack;
    pbl_status s = pbl_graph_from_onnx(&g, p, len, &opt, err, sizeof err);
    printf("  load (pack_weights %d): %s %s\n", pack, pbl_status_name(s), s ? err : "");
    assert_int_equal(s, PBL_OK);
    assert_int_equal(pbl_onnx_weights_count(w), 4);
    float x[6] = { 1, -2, 0.5f, 0.25f, 3, -1 }, y[4];
    run1(g, w, "x", x, 6, "p", y, 4);
    double want[4];
    for (int r = 0; r < 2; r++) {
        double h[4], z[2], mx, sum = 0;
        for (int o = 0; o < 4; o++) {
            h[o] = B1[o];
            for (int i = 0; i < 3; i++)
                h[o] += (double)x[r * 3 + i] * W1[o * 3 + i];
            h[o] = h[o] > 0 ? h[o] : 0;
        }
        for (int o = 0; o < 2; o++) {
            z[o] = B2[o];
            for (int i = 0; i < 4; i++)
                z[o] += h[i] * W2[i * 2 + o];
        }
        mx = z[0] > z[1] ? z[0] : z[1];
        for (int o = 0; o < 2; o++)
            sum += exp(z[o] - mx);
        for (int o = 0; o < 2; o++)
            want[r * 2 + o] = exp(z[o] - mx) / sum;
    }
    close_to(y, want, 4, 1e-5);
    /* the Gemm became one node named after its output */
    pbl_node fc = pbl_graph_find_node(g, "h");
    assert_int_not_equal(fc, PBL_NONE);
    pbl_node_info ni;
    pbl_graph_node_info(g, fc, &ni);
    assert_string_equal(ni.op, pack ? "fully_connected_packed" : "fully_connected");
    /* packed: w1 is a [1, 3, 16] parameter, the 4 output columns zero-padded to 16 */
    pbl_value_info wi;
    pbl_graph_value_info(g, ni.inputs[1], &wi);
    assert_int_equal(wi.shape.ndim, pack ? 3 : 2);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

static void test_mlp(void **state)
{
    (void)state;
    mlp_case(1);
    mlp_case(2);
    mlp_case(0);
}

/* pack_weights 1 packs where the packed kernel won when measured: at every batch with AVX2 or
 * AVX-512, below batch 16 at the SSE2 baseline (graph/io/onnx_ops.c, pack_wins) */
static const char *gemm_op_at(int level, int64_t batch)
{
    static char op[64];
    pbl__cpu_level_force(level);
    dX[0] = batch;
    mb b;
    build_mlp(&b);
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    char err[1024];
    pbl_onnx_options opt = pbl_onnx_options_default();
    pbl_status s = pbl_graph_from_onnx(&g, p, len, &opt, err, sizeof err);
    dX[0] = 2;
    pbl__cpu_level_force(-1);
    assert_int_equal(s, PBL_OK);
    pbl_node_info ni;
    pbl_graph_node_info(g, pbl_graph_find_node(g, "h"), &ni);
    snprintf(op, sizeof op, "%s", ni.op);
    pbl_graph_destroy(g);
    free(p);
    return op;
}

static void test_pack_rule(void **state)
{
    (void)state;
    assert_string_equal(gemm_op_at(PBL__CPU_BASELINE, 15), "fully_connected_packed");
    assert_string_equal(gemm_op_at(PBL__CPU_BASELINE, 16), "fully_connected");
    if (pbl__cpu_level_max() >= PBL__CPU_AVX2) {
        assert_string_equal(gemm_op_at(PBL__CPU_AVX2, 16), "fully_connected_packed");
        assert_string_equal(gemm_op_at(PBL__CPU_AVX2, 256), "fully_connected_packed");
    }
}

/* ---- Softmax's axis: coerced to 2-D before opset 13, one axis from 13 ------------------------ */

static void softmax_case(int64_t opset)
{
    static const int64_t d3[] = { 2, 3, 2 };
    static char *in[] = { "x" }, *out[] = { "y" };
    mb b;
    mb_init(&b, opset);
    mb_input(&b, "x", 3, d3);
    Onnx__NodeProto *n = mb_node(&b, "Softmax", "s", in, 1, out, 1);
    mb_attr_i(&b, n, "axis", 1);
    mb_output(&b, "y");
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    char err[1024];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    float x[12], y[12];
    double want[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)(0.37 * i - 2 + (i % 3));
    run1(g, w, "x", x, 12, "y", y, 12);
    for (int a = 0; a < 2; a++) {
        if (opset < 13) { /* over the 6 trailing elements of each row a */
            double s = 0;
            for (int j = 0; j < 6; j++)
                s += exp(x[a * 6 + j]);
            for (int j = 0; j < 6; j++)
                want[a * 6 + j] = exp(x[a * 6 + j]) / s;
        } else { /* over dim 1 (3 elements, stride 2) for each (a, c) */
            for (int c = 0; c < 2; c++) {
                double s = 0;
                for (int j = 0; j < 3; j++)
                    s += exp(x[a * 6 + j * 2 + c]);
                for (int j = 0; j < 3; j++)
                    want[a * 6 + j * 2 + c] = exp(x[a * 6 + j * 2 + c]) / s;
            }
        }
    }
    close_to(y, want, 12, 1e-5);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

static void test_softmax_axis(void **state)
{
    (void)state;
    softmax_case(11);
    softmax_case(13);
}

/* ---- Reshape with 0 and -1 from an initializer; ReduceSum with axes as input (opset 13) ------- */

static void test_reshape_reduce(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3, 4 }, d1[] = { 2 }, d1a[] = { 1 };
    static int64_t shape[] = { 0, -1 }, axes[] = { -1 };
    static char *in_r[] = { "x", "shape" }, *out_r[] = { "r" }, *in_s[] = { "r", "axes" }, *out_s[] = { "s" };
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", 3, dx);
    mb_init_i64(&b, "shape", d1, shape, 2);
    mb_init_i64(&b, "axes", d1a, axes, 1);
    mb_node(&b, "Reshape", "r", in_r, 2, out_r, 1);
    Onnx__NodeProto *n = mb_node(&b, "ReduceSum", "s", in_s, 2, out_s, 1);
    mb_attr_i(&b, n, "keepdims", 0);
    mb_output(&b, "s");
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    char err[1024];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    /* [2,3,4] -> [2, 12] -> sum over the last dim -> [2]; integer constants make no parameters */
    assert_int_equal(pbl_onnx_weights_count(w), 0);
    pbl_value_info vi;
    pbl_graph_value_info(g, pbl_graph_output(g, "s"), &vi);
    assert_int_equal(vi.shape.ndim, 1);
    assert_int_equal(vi.shape.dim[0], 2);
    float x[24], y[2];
    double want[2] = { 0, 0 };
    for (int i = 0; i < 24; i++)
        x[i] = (float)i, want[i / 12] += i;
    run1(g, w, "x", x, 24, "s", y, 2);
    close_to(y, want, 2, 1e-6);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

static void mb_attr_s(mb *b, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a->has_s = 1;
    a->s.data = (uint8_t *)v;
    a->s.len = strlen(v);
    b->attr_ptrs[b->n_attrs++] = a;
    n->n_attribute++;
}

/* Resize with constant scales (an empty roi beside them, as exporters write it): nearest,
 * half_pixel, round_prefer_floor repeats each pixel; with constant sizes, linear and
 * align_corners puts the corners on the corners and the midpoints between. */
static void test_resize(void **state)
{
    (void)state;
    static const int64_t dx[] = { 1, 1, 2, 2 }, d0[] = { 0 }, d4[] = { 4 };
    static float roi[1], scales[] = { 1, 1, 2, 2 };
    static int64_t sizes[] = { 1, 1, 3, 3 };
    static char *in_scales[] = { "x", "roi", "scales" }, *in_sizes[] = { "x", "", "", "sizes" }, *y[] = { "y" };
    const float x[] = { 1, 2, 3, 4 };
    const double want_nearest[] = { 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4 };
    const double want_linear[] = { 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4 };
    for (int k = 0; k < 2; k++) {
        mb b;
        mb_init(&b, 13);
        mb_input(&b, "x", 4, dx);
        if (k == 0) {
            mb_init_f(&b, "roi", 1, d0, roi, 0);
            mb_init_f(&b, "scales", 1, d4, scales, 4);
            mb_node(&b, "Resize", "rs", in_scales, 3, y, 1);
        } else {
            mb_init_i64(&b, "sizes", d4, sizes, 4);
            Onnx__NodeProto *n = mb_node(&b, "Resize", "rs", in_sizes, 4, y, 1);
            mb_attr_s(&b, n, "mode", "linear");
            mb_attr_s(&b, n, "coordinate_transformation_mode", "align_corners");
        }
        mb_output(&b, "y");
        size_t len;
        uint8_t *p = mb_pack(&b, &len);
        pbl_graph *g;
        pbl_onnx_weights *w;
        char err[1024];
        assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
        float out[16];
        size_t n = k == 0 ? 16 : 9;
        run1(g, w, "x", x, 4, "y", out, n);
        close_to(out, k == 0 ? want_nearest : want_linear, n, 1e-6);
        pbl_onnx_weights_destroy(w);
        pbl_graph_destroy(g);
        free(p);
    }
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void expect_fail(mb *b, pbl_status want, const char *needle)
{
    size_t len;
    uint8_t *p = mb_pack(b, &len);
    pbl_graph *g = (pbl_graph *)1;
    pbl_onnx_weights *w = (pbl_onnx_weights *)1;
    char err[1024];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), want);
    assert_null(g);
    assert_null(w);
    if (needle && !strstr(err, needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", err, needle);
        fail();
    }
    free(p);
}

static void test_unsupported_lists_every_op(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3 };
    static char *x[] = { "x" }, *a[] = { "a" }, *bb[] = { "b" }, *c[] = { "c" }, *d[] = { "d" };
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "Det", "e1", x, 1, a, 1);
    mb_node(&b, "Relu", "r", a, 1, bb, 1);
    mb_node(&b, "NonZero", "g1", bb, 1, c, 1);
    mb_node(&b, "Det", "e2", c, 1, d, 1);
    mb_output(&b, "d");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "Det (node 'e1'), NonZero (node 'g1')");
}

static void mb_attr_f(mb *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1;
    a->f = v;
    b->attr_ptrs[b->n_attrs++] = a;
    n->n_attribute++;
}

static void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, int64_t *v, size_t k)
{
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->ints = v;
    a->n_ints = k;
    b->attr_ptrs[b->n_attrs++] = a;
    n->n_attribute++;
}

/* ---- shape arithmetic folded at load time, the tensor family --------------------------------- */

/* PyTorch's x.view(x.size(0), -1): Shape -> Gather -> Concat -> Reshape folds to one reshape
 * (no parameter: the shape never enters the graph), and a Gather with constant negative
 * indices runs, its ids an i32 parameter. */
static void test_fold_shape_chain(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3, 4 }, d1[] = { 1 }, d2[] = { 2 };
    static int64_t zero[] = { 0 }, minus1[] = { -1 }, ids[] = { -1, 0 };
    static char *in_sh[] = { "x" }, *out_sh[] = { "s" }, *in_g[] = { "s", "zero" }, *out_g[] = { "n" };
    static char *in_c[] = { "n", "m1" }, *out_c[] = { "shape" }, *in_r[] = { "x", "shape" }, *out_r[] = { "r" };
    static char *in_ga[] = { "r", "ids" }, *out_ga[] = { "y" };
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", 3, dx);
    mb_init_i64(&b, "zero", d1, zero, 1);
    mb_init_i64(&b, "m1", d1, minus1, 1);
    mb_init_i64(&b, "ids", d2, ids, 2);
    mb_node(&b, "Shape", "sh", in_sh, 1, out_sh, 1);
    mb_node(&b, "Gather", "g", in_g, 2, out_g, 1);
    Onnx__NodeProto *n = mb_node(&b, "Concat", "c", in_c, 2, out_c, 1);
    mb_attr_i(&b, n, "axis", 0);
    mb_node(&b, "Reshape", "rs", in_r, 2, out_r, 1);
    n = mb_node(&b, "Gather", "ga", in_ga, 2, out_ga, 1);
    mb_attr_i(&b, n, "axis", 1);
    mb_output(&b, "y");
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    char err[1024];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_onnx_weights_count(w), 1); /* ids only */
    int ops = 0;
    for (pbl_node k = 0; k < pbl_graph_node_count(g); k++)
        ops++;
    assert_int_equal(ops, 2); /* reshape, gather */
    pbl_value_info vi;
    pbl_graph_value_info(g, pbl_graph_output(g, "y"), &vi);
    assert_int_equal(vi.shape.ndim, 2);
    assert_int_equal(vi.shape.dim[1], 2);
    float x[24], y[4];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    run1(g, w, "x", x, 24, "y", y, 4);
    double want[4] = { 11, 0, 23, 12 };
    close_to(y, want, 4, 0);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

/* Bad tensor-family models: each refused naming the node and what is wrong. */
/* Shape sliced past its end is empty; concatenated with [2, -1] it is still the shape
 * [2, -1] (the TorchScript exporter's attention reshapes do this). An empty tensor read as
 * data is refused. Opset 13: Slice takes starts/ends as inputs. */
static void test_fold_empty_slice(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3, 4 }, d1[] = { 1 }, d2[] = { 2 };
    static int64_t three[] = { 3 }, big[] = { 100 }, tail[] = { 2, -1 };
    static char *in_sh[] = { "x" }, *out_sh[] = { "s" }, *in_sl[] = { "s", "three", "big" }, *out_sl[] = { "e" };
    static char *in_c[] = { "e", "tail" }, *out_c[] = { "shape" }, *in_r[] = { "x", "shape" }, *out_r[] = { "y" };
    static char *in_a[] = { "x", "e" }, *out_a[] = { "z" };
    for (int as_data = 0; as_data < 2; as_data++) {
        mb b;
        mb_init(&b, 13);
        mb_input(&b, "x", 3, dx);
        mb_init_i64(&b, "three", d1, three, 1);
        mb_init_i64(&b, "big", d1, big, 1);
        mb_init_i64(&b, "tail", d2, tail, 2);
        mb_node(&b, "Shape", "sh", in_sh, 1, out_sh, 1);
        mb_node(&b, "Slice", "sl", in_sl, 3, out_sl, 1);
        Onnx__NodeProto *n = mb_node(&b, "Concat", "c", in_c, 2, out_c, 1);
        mb_attr_i(&b, n, "axis", 0);
        if (as_data) { /* the empty slice added to x: data, refused */
            mb_node(&b, "Add", "add", in_a, 2, out_a, 1);
            mb_output(&b, "z");
        } else {
            mb_node(&b, "Reshape", "rs", in_r, 2, out_r, 1);
            mb_output(&b, "y");
        }
        size_t len;
        uint8_t *p = mb_pack(&b, &len);
        pbl_graph *g = NULL;
        pbl_onnx_weights *w = NULL;
        char err[1024];
        pbl_status s = load(p, len, &g, &w, err, sizeof err);
        if (as_data) {
            assert_int_equal(s, PBL_ERR_UNSUPPORTED);
            assert_non_null(strstr(err, "node 'add'"));
            assert_non_null(strstr(err, "'e' is an empty tensor"));
        } else {
            assert_int_equal(s, PBL_OK);
            pbl_value_info vi;
            pbl_graph_value_info(g, pbl_graph_output(g, "y"), &vi);
            assert_int_equal(vi.shape.ndim, 2);
            assert_int_equal(vi.shape.dim[0], 2);
            assert_int_equal(vi.shape.dim[1], 12);
            pbl_onnx_weights_destroy(w);
            pbl_graph_destroy(g);
        }
        free(p);
    }
}

static void test_tensor_ops_refused(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3 }, d1[] = { 1 }, d2[] = { 2 }, d4[] = { 4 };
    static int64_t bad_id[] = { 3 }, pads[] = { 0, 5, 0, 5 }, shape[] = { 6 };
    static char *in_g[] = { "x", "ids" }, *in_p[] = { "x", "pads" }, *in_x[] = { "x" }, *out_y[] = { "y" };
    static char *in_sh[] = { "x" }, *out_s[] = { "s" }, *in_r[] = { "x", "s2" }, *in_nz[] = { "x" }, *out_nz[] = { "nz" };
    static char *in_s2[] = { "nz" }, *out_s2[] = { "s2" };
    (void)shape;
    mb b;
    /* a constant index outside the axis */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_i64(&b, "ids", d1, bad_id, 1);
    mb_node(&b, "Gather", "g", in_g, 2, out_y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'g' (Gather): index 3 of 'ids' is outside [-2, 2)");
    /* an axis out of range */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_i64(&b, "ids", d1, bad_id, 1);
    Onnx__NodeProto *n = mb_node(&b, "Gather", "g", in_g, 2, out_y, 1);
    mb_attr_i(&b, n, "axis", 2);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'g' (Gather): attribute axis 2 is out of range for rank 2");
    /* reflect pads wider than the dim */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_i64(&b, "pads", d4, pads, 4);
    n = mb_node(&b, "Pad", "p", in_p, 2, out_y, 1);
    mb_attr_s(&b, n, "mode", "reflect");
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'p' (Pad): pads 5 and 5 of axis 1 (size 3) are out of range for mode reflect");
    /* an unknown pad mode */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_i64(&b, "pads", d4, pads, 4);
    n = mb_node(&b, "Pad", "p", in_p, 2, out_y, 1);
    mb_attr_s(&b, n, "mode", "wrap");
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "node 'p' (Pad): attribute mode is not one pebble knows");
    /* a squeeze of a dim that is not 1 */
    mb_init(&b, 11);
    mb_input(&b, "x", 2, dx);
    n = mb_node(&b, "Squeeze", "sq", in_x, 1, out_y, 1);
    mb_attr_ints(&b, n, "axes", (int64_t[]){ 1 }, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'sq' (Squeeze): axis 1 has size 3");
    /* a shape computed from data: the Shape of NonZero's output folds, but NonZero itself is
     * refused by name at the check of ops */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "NonZero", "nz", in_nz, 1, out_nz, 1);
    mb_node(&b, "Shape", "sh", in_s2, 1, out_s2, 1);
    mb_node(&b, "Reshape", "r", in_r, 2, out_y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "NonZero (node 'nz')");
    /* Range over a graph input: data-dependent, refused naming the node */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "Shape", "sh", in_sh, 1, out_s, 1);
    static char *in_rg[] = { "x", "x", "x" };
    mb_node(&b, "Range", "rg", in_rg, 3, out_y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "node 'rg' (Range): its inputs are computed at run time");
    (void)d2;
}

/* ---- the math family's converters (graph/io/onnx_ops_math.c) -------------------------------- */

/* The op of the node named `name`, or "" */
static const char *op_of(const pbl_graph *g, const char *name)
{
    pbl_node_info ni;
    pbl_node n = pbl_graph_find_node(g, name);
    return n != PBL_NONE && pbl_graph_node_info(g, n, &ni) == PBL_OK ? ni.op : "";
}

/* Loads b, checks node `node` is pebble op `op`, runs x through it and compares output y. */
static void math_case(mb *b, const char *node, const char *op, const float *x, size_t n, const double *want)
{
    size_t len;
    uint8_t *p = mb_pack(b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    char err[1024];
    float y[16];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    assert_string_equal(op_of(g, node), op);
    run1(g, w, "x", x, n, "y", y, n);
    close_to(y, want, n, 1e-6);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

static void test_math_converters(void **state)
{
    (void)state;
    static const int64_t d6[] = { 6 }, d123[] = { 1, 2, 3 }, d2[] = { 2 };
    static float zero[] = { 0 }, six[] = { 6 }, slope[] = { 0.5f, -2 };
    static char *in_clip[] = { "x", "lo", "hi" }, *in_x[] = { "x" }, *out_y[] = { "y" }, *in_pr[] = { "x", "slope" };
    const float x[6] = { -1, 3, 7, 0.5f, 6.5f, -0.2f };
    mb b;

    /* ReLU6 as PyTorch exports it (opset 13): Clip with constant bounds is one clip node */
    mb_init(&b, 13);
    mb_input(&b, "x", 1, d6);
    mb_init_f(&b, "lo", 0, NULL, zero, 1);
    mb_init_f(&b, "hi", 0, NULL, six, 1);
    mb_node(&b, "Clip", "c", in_clip, 3, out_y, 1);
    mb_output(&b, "y");
    math_case(&b, "y", "clip", x, 6, (const double[]){ 0, 3, 6, 0.5, 6, 0 });

    /* opset 6: the bounds are attributes */
    mb_init(&b, 6);
    mb_input(&b, "x", 1, d6);
    Onnx__NodeProto *n = mb_node(&b, "Clip", "c", in_x, 1, out_y, 1);
    mb_attr_f(&b, n, "min", -0.5f);
    mb_attr_f(&b, n, "max", 1);
    mb_output(&b, "y");
    math_case(&b, "y", "clip", x, 6, (const double[]){ -0.5, 1, 1, 0.5, 1, -0.2 });

    /* min above max: every element is max, as numpy's clip (and ONNX's reference) gives */
    mb_init(&b, 6);
    mb_input(&b, "x", 1, d6);
    n = mb_node(&b, "Clip", "c", in_x, 1, out_y, 1);
    mb_attr_f(&b, n, "min", 2);
    mb_attr_f(&b, n, "max", 1);
    mb_output(&b, "y");
    math_case(&b, "y", "clip", x, 6, (const double[]){ 1, 1, 1, 1, 1, 1 });

    /* Gelu (opset 20) with approximate "tanh" */
    mb_init(&b, 20);
    mb_input(&b, "x", 1, d6);
    n = mb_node(&b, "Gelu", "g", in_x, 1, out_y, 1);
    Onnx__AttributeProto *a = &b.attrs[b.n_attrs];
    onnx__attribute_proto__init(a);
    a->name = (char *)"approximate";
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a->has_s = 1;
    a->s.data = (uint8_t *)"tanh";
    a->s.len = 4;
    b.attr_ptrs[b.n_attrs++] = a;
    n->n_attribute++;
    mb_output(&b, "y");
    double want[6];
    for (int i = 0; i < 6; i++)
        want[i] = 0.5 * x[i] * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
    math_case(&b, "y", "gelu_tanh", x, 6, want);

    /* PRelu before opset 7: a slope of X's channel count is per channel ([C] -> [C, 1]) */
    mb_init(&b, 6);
    mb_input(&b, "x", 3, d123);
    mb_init_f(&b, "slope", 1, d2, slope, 2);
    mb_node(&b, "PRelu", "p", in_pr, 2, out_y, 1);
    mb_output(&b, "y");
    math_case(&b, "y", "prelu", x, 6, (const double[]){ -0.5, 3, 7, 0.5, 6.5, 0.4 });

    /* Pow with an int32 exponent: unsupported (pebble's pow is f32), never run as floats */
    static char *in_pow[] = { "x", "e" };
    mb_init(&b, 13);
    mb_input(&b, "x", 1, d6);
    mb_input(&b, "e", 1, d6);
    b.tts[1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    mb_node(&b, "Pow", "pw", in_pow, 2, out_y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "input 'e' is i32");

    /* Mod over int32 (fmod 0): Python's sign rule; a zero divisor and −1 give 0 rather than
     * trapping (INT32_MIN % −1 overflows) */
    static const int64_t d4[] = { 4 };
    mb_init(&b, 13);
    mb_input(&b, "x", 1, d4);
    mb_input(&b, "e", 1, d4);
    b.tts[0].elem_type = b.tts[1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    mb_node(&b, "Mod", "m", in_pow, 2, out_y, 1);
    mb_output(&b, "y");
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    pbl_exec *e;
    char err[1024];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_exec_create(&e, g, NULL, err, sizeof err), PBL_OK);
    const int32_t xi[4] = { 7, -7, INT32_MIN, 5 }, ei[4] = { -3, 3, -1, 0 };
    int32_t yi[4];
    assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, "x"), xi, sizeof xi), PBL_OK);
    assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, "e"), ei, sizeof ei), PBL_OK);
    assert_int_equal(pbl_exec_run(e), PBL_OK);
    assert_int_equal(pbl_exec_read(e, pbl_graph_output(g, "y"), yi, sizeof yi), PBL_OK);
    assert_int_equal(yi[0], -2);
    assert_int_equal(yi[1], 2);
    assert_int_equal(yi[2], 0);
    assert_int_equal(yi[3], 0);
    pbl_exec_destroy(e);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

/* BOOL tensors read as int32 0/1, from raw bytes (any nonzero byte is true) or int32_data */
static void test_bool_tensor(void **state)
{
    (void)state;
    static int64_t dims[] = { 3 };
    static uint8_t raw[] = { 0, 1, 2 };
    static int32_t ints[] = { 1, 0, 5 };
    for (int k = 0; k < 2; k++) {
        Onnx__TensorProto t;
        onnx__tensor_proto__init(&t);
        t.n_dims = 1;
        t.dims = dims;
        t.has_data_type = 1;
        t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
        if (k == 0) {
            t.has_raw_data = 1;
            t.raw_data.data = raw;
            t.raw_data.len = 3;
        } else {
            t.n_int32_data = 3;
            t.int32_data = ints;
        }
        uint8_t buf[64];
        size_t len = onnx__tensor_proto__pack(&t, buf);
        pbl_onnx_tensor out;
        char err[256];
        assert_int_equal(pbl_onnx_tensor_parse(buf, len, "b", &out, err, sizeof err), PBL_OK);
        assert_int_equal(out.dtype, PBL_I32);
        const int32_t *v = out.data;
        assert_int_equal(v[0], k == 0 ? 0 : 1);
        assert_int_equal(v[1], k == 0 ? 1 : 0);
        assert_int_equal(v[2], 1);
        pbl_onnx_tensor_free(&out);
    }
}

/* Values a model may not silently carry (issue 14): each is refused, naming the field and
 * the accepted range; the same model with a valid value loads. 17 hostile cases. */
static void test_strict_validation(void **state)
{
    (void)state;
    mb b;
    /* opsets outside 1..22 (an explicit 0 too): the opset decides what ops mean */
    static const int64_t bad_opsets[] = { 0, -1, 23, 1000, INT64_C(1) << 62 };
    for (size_t i = 0; i < sizeof bad_opsets / sizeof bad_opsets[0]; i++) {
        build_mlp(&b);
        b.opset.version = bad_opsets[i];
        expect_fail(&b, PBL_ERR_UNSUPPORTED, "opset_import[0]: the default domain's opset version is");
        build_mlp(&b);
        b.opset.version = bad_opsets[i];
        expect_fail(&b, PBL_ERR_UNSUPPORTED, "pebble accepts 1 to 22");
    }
    /* a flag that is neither 0 nor 1 */
    build_mlp(&b);
    b.attrs[0].i = 7; /* fc1's transB */
    expect_fail(&b, PBL_ERR_ATTR, "node 'fc1' (Gemm): attribute transB is 7; it must be 0 or 1");
    build_mlp(&b);
    b.attrs[0].i = -1;
    expect_fail(&b, PBL_ERR_ATTR, "attribute transB is -1; it must be 0 or 1");
    /* an attribute Gemm does not have */
    build_mlp(&b);
    b.attrs[0].name = (char *)"transC";
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "node 'fc1' (Gemm): attribute 'transC' is not one pebble knows for Gemm");
    /* Dropout's ratio outside [0, 1) and BatchNormalization's negative epsilon */
    static const int64_t dx[] = { 1, 2, 2, 2 }, dc[] = { 2 };
    static float st[4][2] = { { 1, 1 }, { 0, 0 }, { 0, 0 }, { 1, 1 } };
    static char *x[] = { "x" }, *y[] = { "y" }, *bn_in[] = { "x", "s", "bias", "mean", "var" };
    static const float ratios[] = { 2.0f, -0.5f, 1.0f };
    for (size_t i = 0; i < 3; i++) {
        mb_init(&b, 7);
        mb_input(&b, "x", 4, dx);
        mb_attr_f(&b, mb_node(&b, "Dropout", "drop", x, 1, y, 1), "ratio", ratios[i]);
        mb_output(&b, "y");
        expect_fail(&b, PBL_ERR_ATTR, "node 'drop' (Dropout): attribute ratio is");
    }
    /* from opset 12 the ratio is an input */
    static const int64_t d1[] = { 1 };
    static float r2[1] = { 2.0f };
    static char *drop_in[] = { "x", "r" };
    mb_init(&b, 13);
    mb_input(&b, "x", 4, dx);
    mb_init_f(&b, "r", 0, d1, r2, 1);
    mb_node(&b, "Dropout", "drop", drop_in, 2, y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'drop' (Dropout): input ratio 'r' is 2; it must be in [0, 1)");
    for (int eps_ok = 0; eps_ok < 2; eps_ok++) {
        mb_init(&b, 15);
        mb_input(&b, "x", 4, dx);
        mb_init_f(&b, "s", 1, dc, st[0], 2);
        mb_init_f(&b, "bias", 1, dc, st[1], 2);
        mb_init_f(&b, "mean", 1, dc, st[2], 2);
        mb_init_f(&b, "var", 1, dc, st[3], 2);
        mb_attr_f(&b, mb_node(&b, "BatchNormalization", "bn", bn_in, 5, y, 1), "epsilon", eps_ok ? 1e-5f : -1e-5f);
        mb_output(&b, "y");
        if (eps_ok) {
            size_t len;
            uint8_t *p = mb_pack(&b, &len);
            pbl_graph *g;
            pbl_onnx_weights *w;
            char err[1024];
            assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
            pbl_onnx_weights_destroy(w);
            pbl_graph_destroy(g);
            free(p);
        } else {
            expect_fail(&b, PBL_ERR_ATTR, "node 'bn' (BatchNormalization): attribute epsilon is -1e-05; it must be a finite number >= 0");
        }
    }
    /* legacy spatial 0: statistics per element, which pebble does not compute */
    mb_init(&b, 7);
    mb_input(&b, "x", 4, dx);
    mb_init_f(&b, "s", 1, dc, st[0], 2);
    mb_init_f(&b, "bias", 1, dc, st[1], 2);
    mb_init_f(&b, "mean", 1, dc, st[2], 2);
    mb_init_f(&b, "var", 1, dc, st[3], 2);
    mb_attr_i(&b, mb_node(&b, "BatchNormalization", "bn", bn_in, 5, y, 1), "spatial", 0);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "node 'bn' (BatchNormalization): spatial 0 (statistics per element) is not supported");
    /* a graph input's dim_value that is negative: a malformed size, not a symbolic dim that
     * --dim would silently fill in */
    static const int64_t neg_dims[][2] = { { -5, 3 }, { 2, INT64_MIN } };
    static char *xa[] = { "x" }, *ya[] = { "y" };
    for (size_t i = 0; i < 2; i++) {
        mb_init(&b, 13);
        mb_input(&b, "x", 2, neg_dims[i]);
        mb_node(&b, "Relu", "r", xa, 1, ya, 1);
        mb_output(&b, "y");
        expect_fail(&b, PBL_ERR_FORMAT, i == 0 ? "graph input 'x': dim 0 is -5 (negative" : "graph input 'x': dim 1 is -9223372036854775808 (negative");
    }
    /* a rank-3 weight: the message names W, not X (X is rank 4) */
    static const int64_t dw3[] = { 2, 2, 2 };
    static float w3[8];
    static char *conv_in[] = { "x", "w" };
    mb_init(&b, 13);
    mb_input(&b, "x", 4, dx);
    mb_init_f(&b, "w", 3, dw3, w3, 8);
    mb_node(&b, "Conv", "conv", conv_in, 2, y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_SHAPE, "W has rank 3 but X has rank 4");
}

static void test_malformed(void **state)
{
    (void)state;
    pbl_graph *g;
    char err[512];
    static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34 };
    assert_int_equal(pbl_graph_from_onnx(&g, junk, sizeof junk, NULL, err, sizeof err), PBL_ERR_FORMAT);
    assert_null(g);
    /* every prefix of a valid model: a status, never a crash. A cut between two fields is a
     * valid smaller message (the model without its opset import, say), so some load. */
    mb b;
    build_mlp(&b);
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    int ok = 0, format = 0;
    for (size_t cut = 0; cut < len; cut++) {
        pbl_status s = pbl_graph_from_onnx(&g, p, cut, NULL, err, sizeof err);
        ok += s == PBL_OK;
        format += s == PBL_ERR_FORMAT;
        assert_true(s == PBL_OK || s == PBL_ERR_FORMAT || s == PBL_ERR_UNSUPPORTED || s == PBL_ERR_SHAPE);
        assert_true((s == PBL_OK) == (g != NULL));
        pbl_graph_destroy(g);
    }
    printf("  %zu prefixes: %d load, %d PBL_ERR_FORMAT\n", len, ok, format);
    assert_true(format > (int)len / 2);
    free(p);
    /* an empty buffer is a model without a graph */
    assert_int_equal(pbl_graph_from_onnx(&g, NULL, 0, NULL, err, sizeof err), PBL_ERR_FORMAT);
    assert_non_null(strstr(err, "no graph"));
    assert_int_equal(pbl_graph_load_onnx(&g, "/nonexistent/model.onnx", NULL, err, sizeof err), PBL_ERR_IO);
}

static void test_structure_errors(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3 }, huge[] = { INT64_C(1) << 31, INT64_C(1) << 31 }, dw[] = { 4, 3 };
    static char *x[] = { "x" }, *a[] = { "a" }, *bb[] = { "b" }, *nope[] = { "nope" };
    static float wdata[5];
    mb b;
    /* dangling input */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "Relu", "r", nope, 1, a, 1);
    mb_output(&b, "a");
    expect_fail(&b, PBL_ERR_FORMAT, "'nope' names no");
    /* a value defined twice */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "Relu", "r1", x, 1, a, 1);
    mb_node(&b, "Relu", "r2", x, 1, a, 1);
    mb_output(&b, "a");
    expect_fail(&b, PBL_ERR_FORMAT, "defined twice");
    /* a cycle: a = relu(b), b = relu(a) */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "Relu", "r1", bb, 1, a, 1);
    mb_node(&b, "Relu", "r2", a, 1, bb, 1);
    mb_output(&b, "a");
    expect_fail(&b, PBL_ERR_CYCLE, "cycle");
    /* absurd input shape */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, huge);
    mb_node(&b, "Relu", "r", x, 1, a, 1);
    mb_output(&b, "a");
    expect_fail(&b, PBL_ERR_FORMAT, "absurd");
    /* initializer data that does not match its dims */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_f(&b, "w", 2, dw, wdata, 5);
    mb_node(&b, "Relu", "r", x, 1, a, 1);
    mb_output(&b, "a");
    expect_fail(&b, PBL_ERR_FORMAT, "12 elements but the data holds 5");
    /* no outputs */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_node(&b, "Relu", "r", x, 1, a, 1);
    expect_fail(&b, PBL_ERR_FORMAT, "no outputs");
    /* shapes that do not fit an op */
    static char *xw[] = { "x", "w" };
    static const int64_t dw2[] = { 4, 4 };
    static float w16[16];
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_f(&b, "w", 2, dw2, w16, 16);
    mb_node(&b, "MatMul", "mm", xw, 2, a, 1);
    mb_output(&b, "a");
    expect_fail(&b, PBL_ERR_SHAPE, "node 'mm' (MatMul)");
}

/* ---- allocation failures --------------------------------------------------------------------- */

typedef struct counting {
    long calls, fail_at;
    size_t live;
} counting;

static void *c_alloc(void *user, size_t n)
{
    counting *c = user;
    if (++c->calls == c->fail_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        c->live += n;
    return p;
}

static void c_free(void *user, void *p, size_t n)
{
    counting *c = user;
    if (p)
        c->live -= n;
    free(p);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    mb b;
    build_mlp(&b);
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    long n_allocs = 0;
    for (long k = 1;; k++) {
        counting c = { .fail_at = k };
        pbl_allocator a = { c_alloc, c_free, &c };
        pbl_onnx_options o = pbl_onnx_options_default();
        o.allocator = &a;
        pbl_onnx_weights *w;
        o.weights = &w;
        pbl_graph *g;
        char err[512];
        pbl_status s = pbl_graph_from_onnx(&g, p, len, &o, err, sizeof err);
        if (s == PBL_OK) {
            pbl_onnx_weights_destroy(w);
            pbl_graph_destroy(g);
            assert_int_equal(c.live, 0);
            n_allocs = k - 1;
            break;
        }
        if (s != PBL_ERR_NOMEM)
            fprintf(stderr, "failing allocation %ld: %s: %s\n", k, pbl_status_name(s), err);
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_null(g);
        assert_int_equal(c.live, 0);
    }
    printf("  %ld allocations, each failed once: PBL_ERR_NOMEM, nothing leaked\n", n_allocs);
    assert_true(n_allocs > 10);
    free(p);
}

/* ---- tensor files ---------------------------------------------------------------------------- */

static void test_tensor_file_round_trip(void **state)
{
    (void)state;
    float data[6] = { 1, 2.5f, -3, 4, 5e-8f, 6 };
    pbl_onnx_tensor t = { .name = "t", .dtype = PBL_F32, .shape = PBL_SHAPE(2, 3), .data = data, .bytes = sizeof data };
    char path[] = "/tmp/pebble_test_onnx_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[512];
    assert_int_equal(pbl_onnx_tensor_write(path, &t, err, sizeof err), PBL_OK);
    pbl_onnx_tensor r;
    assert_int_equal(pbl_onnx_tensor_read(path, &r, err, sizeof err), PBL_OK);
    assert_string_equal(r.name, "t");
    assert_int_equal(r.dtype, PBL_F32);
    assert_true(pbl_shape_equal(&r.shape, &t.shape));
    assert_memory_equal(r.data, data, sizeof data);
    pbl_onnx_tensor_free(&r);
    /* the file's bytes parsed from memory (standard input): the same tensor */
    static unsigned char bytes[4096];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    assert_true(len > sizeof data && len < sizeof bytes);
    assert_int_equal(pbl_onnx_tensor_parse(bytes, len, "<stdin>", &r, err, sizeof err), PBL_OK);
    assert_string_equal(r.name, "t");
    assert_int_equal(r.dtype, PBL_F32);
    assert_true(pbl_shape_equal(&r.shape, &t.shape));
    assert_memory_equal(r.data, data, sizeof data);
    pbl_onnx_tensor_free(&r);
    /* cut short: refused, named as asked */
    assert_int_equal(pbl_onnx_tensor_parse(bytes, len - 5, "<stdin>", &r, err, sizeof err), PBL_ERR_FORMAT);
    assert_true(strncmp(err, "<stdin>: ", 9) == 0);
    assert_null(r.data);
    assert_int_equal(pbl_onnx_tensor_parse(NULL, 3, "<stdin>", &r, err, sizeof err), PBL_ERR_INVALID_ARG);
    /* a file that is not a tensor */
    f = fopen(path, "wb");
    fputs("\xff\xff\xff\xff", f);
    fclose(f);
    assert_int_equal(pbl_onnx_tensor_read(path, &r, err, sizeof err), PBL_ERR_FORMAT);
    assert_null(r.data);
    remove(path);
}

/* ---- external tensor data --------------------------------------------------------------------- */

/* z = x + w, w's three floats at byte 8 of w.data beside the model (what torch.onnx.export's
 * default exporter writes for large weights); the entries of w's external_data are given. */
typedef struct ext_model {
    mb                          b;
    Onnx__StringStringEntryProto e[3];
    Onnx__StringStringEntryProto *ep[3];
} ext_model;

static const int64_t dExtX[] = { 2, 3 }, dExtW[] = { 3 };
static char *in_ext[] = { "x", "w" }, *out_ext[] = { "z" };

static void ext_build(ext_model *em, const char *location, const char *offset, const char *length)
{
    mb *b = &em->b;
    mb_init(b, 13);
    mb_input(b, "x", 2, dExtX);
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    onnx__tensor_proto__init(t);
    t->name = (char *)"w";
    t->n_dims = 1;
    t->dims = (int64_t *)dExtW;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    const char *keys[3] = { "location", "offset", "length" }, *vals[3] = { location, offset, length };
    for (int k = 0; k < 3; k++) {
        if (!vals[k])
            continue;
        onnx__string_string_entry_proto__init(&em->e[t->n_external_data]);
        em->e[t->n_external_data].key = (char *)keys[k];
        em->e[t->n_external_data].value = (char *)vals[k];
        em->ep[t->n_external_data] = &em->e[t->n_external_data];
        t->n_external_data++;
    }
    t->external_data = em->ep;
    b->init_ptrs[b->g.n_initializer++] = t;
    mb_node(b, "Add", "add", in_ext, 2, out_ext, 1);
    mb_output(b, "z");
}

/* Writes the model to dir/model.onnx and loads it from there; the status, err filled. */
static pbl_status ext_load(ext_model *em, const char *dir, pbl_graph **g, pbl_onnx_weights **w, char *err, size_t errlen)
{
    size_t len;
    uint8_t *p = mb_pack(&em->b, &len);
    char path[512];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, len, f), len);
    fclose(f);
    pbl_onnx_options o = pbl_onnx_options_default();
    o.weights = w;
    pbl_status s = pbl_graph_load_onnx(g, path, &o, err, errlen);
    printf("  load external: %s%s%s\n", pbl_status_name(s), s ? ": " : "", s ? err : "");
    /* the same bytes from memory cannot name a file beside them */
    pbl_graph *g2 = NULL;
    char err2[512];
    pbl_onnx_options o2 = pbl_onnx_options_default();
    assert_int_equal(pbl_graph_from_onnx(&g2, p, len, &o2, err2, sizeof err2), PBL_ERR_UNSUPPORTED);
    assert_null(g2);
    free(p);
    return s;
}

static void test_external_data(void **state)
{
    (void)state;
    char dir[] = "/tmp/pebble_test_onnx_ext_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char data_path[512];
    snprintf(data_path, sizeof data_path, "%s/w.data", dir);
    float junk[2] = { 99, 99 }, wv[3] = { 0.5f, -1.25f, 4.0f };
    FILE *f = fopen(data_path, "wb");
    assert_non_null(f);
    fwrite(junk, sizeof junk, 1, f);
    fwrite(wv, sizeof wv, 1, f);
    fclose(f);

    ext_model em;
    pbl_graph *g = NULL;
    pbl_onnx_weights *w = NULL;
    char err[1024];
    ext_build(&em, "w.data", "8", "12");
    assert_int_equal(ext_load(&em, dir, &g, &w, err, sizeof err), PBL_OK);
    float x[6] = { 1, 2, 3, 4, 5, 6 }, z[6];
    run1(g, w, "x", x, 6, "z", z, 6);
    for (int i = 0; i < 6; i++)
        assert_true(z[i] == x[i] + wv[i % 3]);
    /* the file the weights came from is listed, once (pebble run's outputs must not replace it) */
    assert_int_equal(pbl_onnx_weights_file_count(w), 1);
    assert_string_equal(pbl_onnx_weights_file_at(w, 0), data_path);
    assert_null(pbl_onnx_weights_file_at(w, 1));
    assert_int_equal(pbl_onnx_weights_file_count(NULL), 0);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);

    /* refused, each naming the initializer and why */
    static const struct {
        const char *loc, *off, *len, *needle;
        pbl_status  want;
    } bad[] = {
        { "../w.data", "8", "12", "not a relative path inside", PBL_ERR_FORMAT },
        { "/etc/passwd", NULL, NULL, "not a relative path inside", PBL_ERR_FORMAT },
        { "", NULL, NULL, "not a relative path inside", PBL_ERR_FORMAT },
        { "w.data", "16", "12", "past the end", PBL_ERR_FORMAT },
        { "w.data", "8", "8", "length is 8 bytes, but its dims and type need 12", PBL_ERR_FORMAT },
        { "w.data", "-8", NULL, "offset '-8' is not a non-negative integer", PBL_ERR_FORMAT },
        { "w.data", "8", "12x", "length '12x' is not a non-negative integer", PBL_ERR_FORMAT },
        { "missing.data", NULL, NULL, "missing.data", PBL_ERR_IO },
        { ".", NULL, NULL, "not a regular file", PBL_ERR_IO },
        { NULL, "8", "12", "without a location", PBL_ERR_FORMAT },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ext_build(&em, bad[k].loc, bad[k].off, bad[k].len);
        g = NULL;
        w = NULL;
        assert_int_equal(ext_load(&em, dir, &g, &w, err, sizeof err), bad[k].want);
        assert_null(g);
        assert_non_null(strstr(err, "initializer 'w'"));
        assert_non_null(strstr(err, bad[k].needle));
    }
    remove(data_path);
    char model[512];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    remove(model);
    rmdir(dir);
}

/* ---- bad models of the reduction family and types pebble cannot run: clean errors naming the
 * node and the attribute, or the tensor ------------------------------------------------------- */
static void test_reduce_family_errors(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3 }, dl[] = { 2 };
    static char *x[] = { "x" }, *y[] = { "y" }, *sce_in[] = { "x", "l" };
    mb b;
    /* graph inputs of element types pebble cannot compute in: the input is named */
    static const int32_t types[] = { ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, ONNX__TENSOR_PROTO__DATA_TYPE__STRING,
                                     ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 };
    for (size_t i = 0; i < 3; i++) {
        mb_init(&b, 13);
        mb_input(&b, "x", 2, dx);
        b.tts[0].elem_type = types[i];
        mb_node(&b, "Relu", "r", x, 1, y, 1);
        mb_output(&b, "y");
        static const char *const names[] = { "element type DOUBLE (11)", "element type STRING (8)",
                                             "element type FLOAT16 (10)" };
        char needle[96];
        snprintf(needle, sizeof needle, "graph input 'x': %s is not supported", names[i]);
        expect_fail(&b, PBL_ERR_UNSUPPORTED, needle);
    }
    /* a float16 initializer: named, with its type */
    static float w[6];
    static char *add_in[] = { "x", "w" };
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_init_f(&b, "w", 2, dx, w, 6);
    b.inits[0].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    mb_node(&b, "Add", "add", add_in, 2, y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_UNSUPPORTED, "FLOAT16");
    /* ReduceMax keepdims 2, an axis out of range; ArgMax's and Hardmax's axis */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_attr_i(&b, mb_node(&b, "ReduceMax", "rmax", x, 1, y, 1), "keepdims", 2);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'rmax' (ReduceMax): attribute keepdims is 2; it must be 0 or 1");
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_attr_i(&b, mb_node(&b, "ArgMax", "am", x, 1, y, 1), "axis", 2);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'am' (ArgMax): attribute axis is 2; it must be in [-2, 2)");
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_attr_i(&b, mb_node(&b, "ArgMin", "am", x, 1, y, 1), "select_last_index", 3);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'am' (ArgMin): attribute select_last_index is 3; it must be 0 or 1");
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_attr_i(&b, mb_node(&b, "Hardmax", "hm", x, 1, y, 1), "axis", -3);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'hm' (Hardmax): attribute axis is -3");
    /* SoftmaxCrossEntropyLoss: a reduction that is not none/sum/mean; float labels */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_input(&b, "l", 1, dl);
    b.tts[1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    mb_attr_s(&b, mb_node(&b, "SoftmaxCrossEntropyLoss", "sce", sce_in, 2, y, 1), "reduction", "avg");
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_ATTR, "node 'sce' (SoftmaxCrossEntropyLoss): attribute reduction is not one of none, sum, mean");
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_input(&b, "l", 1, dl);
    mb_node(&b, "NegativeLogLikelihoodLoss", "nll", sce_in, 2, y, 1);
    mb_output(&b, "y");
    expect_fail(&b, PBL_ERR_DTYPE, "node 'nll' (NegativeLogLikelihoodLoss): target 'l' must hold integer class indices");
    /* and a good one loads: int64 labels run as i32 */
    mb_init(&b, 13);
    mb_input(&b, "x", 2, dx);
    mb_input(&b, "l", 1, dl);
    b.tts[1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    mb_attr_s(&b, mb_node(&b, "SoftmaxCrossEntropyLoss", "sce", sce_in, 2, y, 1), "reduction", "sum");
    mb_output(&b, "y");
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *wts;
    char err[1024];
    assert_int_equal(load(p, len, &g, &wts, err, sizeof err), PBL_OK);
    pbl_onnx_weights_destroy(wts);
    pbl_graph_destroy(g);
    free(p);
}

/* ---- the reduction family runs: ReduceLogSumExp with axes from an input (opset 18), Hardmax
 * on a middle axis (opset 13: that one axis), ReduceProd with axes as an attribute ------------ */
static void test_reduce_family_runs(void **state)
{
    (void)state;
    static const int64_t dx[] = { 2, 3, 4 }, d1[] = { 1 };
    static int64_t axes[] = { 1 };
    static char *in_l[] = { "x", "axes" }, *out_l[] = { "lse" }, *in_h[] = { "x" }, *out_h[] = { "hm" },
                *out_p[] = { "prod" };
    mb b;
    mb_init(&b, 18);
    mb_input(&b, "x", 3, dx);
    mb_init_i64(&b, "axes", d1, axes, 1);
    mb_attr_i(&b, mb_node(&b, "ReduceLogSumExp", "lse", in_l, 2, out_l, 1), "keepdims", 0);
    mb_attr_i(&b, mb_node(&b, "Hardmax", "hm", in_h, 1, out_h, 1), "axis", 1);
    mb_output(&b, "lse");
    mb_output(&b, "hm");
    size_t len;
    uint8_t *p = mb_pack(&b, &len);
    pbl_graph *g;
    pbl_onnx_weights *w;
    char err[1024];
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    float x[24], lse[8], hm[24];
    double want_l[8], want_h[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)((i * 7) % 11) / 4.0f - 1.0f;
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 4; k++) {
            double sum = 0;
            int best = 0;
            for (int c = 0; c < 3; c++) {
                sum += exp(x[(n * 3 + c) * 4 + k]);
                if (x[(n * 3 + c) * 4 + k] > x[(n * 3 + best) * 4 + k])
                    best = c;
            }
            want_l[n * 4 + k] = log(sum);
            for (int c = 0; c < 3; c++)
                want_h[(n * 3 + c) * 4 + k] = c == best;
        }
    run1(g, w, "x", x, 24, "lse", lse, 8);
    close_to(lse, want_l, 8, 1e-6);
    run1(g, w, "x", x, 24, "hm", hm, 24);
    close_to(hm, want_h, 24, 0);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
    /* ReduceProd, opset 13, axes as an attribute, kept dims */
    mb_init(&b, 13);
    mb_input(&b, "x", 3, dx);
    Onnx__NodeProto *n = mb_node(&b, "ReduceProd", "prod", in_h, 1, out_p, 1);
    Onnx__AttributeProto *a = &b.attrs[b.n_attrs];
    onnx__attribute_proto__init(a);
    a->name = (char *)"axes";
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    static int64_t ax02[] = { 0, -1 };
    a->ints = ax02;
    a->n_ints = 2;
    b.attr_ptrs[b.n_attrs++] = a;
    n->n_attribute++;
    mb_output(&b, "prod");
    p = mb_pack(&b, &len);
    assert_int_equal(load(p, len, &g, &w, err, sizeof err), PBL_OK);
    pbl_value_info vi;
    pbl_graph_value_info(g, pbl_graph_output(g, "prod"), &vi);
    assert_int_equal(vi.shape.ndim, 3);
    assert_int_equal(vi.shape.dim[0], 1);
    assert_int_equal(vi.shape.dim[1], 3);
    assert_int_equal(vi.shape.dim[2], 1);
    float prod[3];
    double want_p[3] = { 1, 1, 1 };
    for (int i = 0; i < 24; i++)
        want_p[(i / 4) % 3] *= x[i];
    run1(g, w, "x", x, 24, "prod", prod, 3);
    close_to(prod, want_p, 3, 1e-6);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_pack_rule),
        cmocka_unit_test(test_softmax_axis),
        cmocka_unit_test(test_reshape_reduce),
        cmocka_unit_test(test_math_converters),
        cmocka_unit_test(test_bool_tensor),
        cmocka_unit_test(test_unsupported_lists_every_op),
        cmocka_unit_test(test_fold_shape_chain),
        cmocka_unit_test(test_fold_empty_slice),
        cmocka_unit_test(test_tensor_ops_refused),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_strict_validation),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_tensor_file_round_trip),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_reduce_family_errors),
        cmocka_unit_test(test_reduce_family_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
