/*
 * The model zoo (tools/zoo) and the ops it brought in (ops/conv.c, pool.c, norm.c,
 * embedding.c, transpose.c):
 *
 * - every zoo model builds and validates; training forms have backward and update nodes,
 *   inference forms none; the batch argument reaches the input and output shapes;
 * - parameter counts equal the published ones (torchvision's ResNet-50 25,557,032 and
 *   MobileNet v2 3,504,872; Hugging Face's bert-base-uncased 109,482,240 less its 590,592-
 *   parameter pooler) and lie within 2% of the rounded figures papers quote;
 * - each new op's shape errors are PBL_ERR_SHAPE naming the node and both shapes;
 * - gradient-only graphs through conv/pool/norm and embedding/layer_norm/transpose build,
 *   and the gradient rules read exactly the forward data their ops declare;
 * - every op of every zoo graph has a CPU kernel; the executor takes the gradient graphs and
 *   runs the mlp, whose loss falls on a fixed batch;
 * - transpose against a naive reference (f32 and i32, ranks 1-6), and its gradient against
 *   central finite differences (the method and tolerances of test_grad.c).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <time.h>

#include "op_harness.h"
#include "grad_reads.h"
#include "zoo.h"

#define NCASES(a) ((int)(sizeof(a) / sizeof((a)[0])))

static pbl_graph *build(const char *name, int64_t batch)
{
    pbl_graph *g = NULL;
    char err[512] = "";
    pbl_status s = zoo_build(name, batch, &g, err, sizeof err);
    if (s != PBL_OK)
        fprintf(stderr, "FAIL zoo_build(%s): %s: %s\n", name, pbl_status_name(s), err);
    assert_int_equal(s, PBL_OK);
    assert_non_null(g);
    return g;
}

typedef struct counts {
    int32_t nodes, values, backward, updates;
    int64_t params;
} counts;

static counts count(const pbl_graph *g)
{
    counts c = { .nodes = pbl_graph_node_count(g), .values = pbl_graph_value_count(g) };
    for (pbl_value v = 0; v < c.values; v++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(g, v, &vi), PBL_OK);
        if (vi.kind == PBL_VALUE_PARAM)
            c.params += pbl_shape_numel(&vi.shape);
    }
    for (pbl_node n = 0; n < c.nodes; n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        c.backward += ni.is_backward;
        c.updates += strcmp(ni.op, "sgd_momentum") == 0 || strcmp(ni.op, "adam") == 0;
    }
    return c;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the models ------------------------------------------------------------------------------ */

static void test_every_model_builds(void **state)
{
    (void)state;
    assert_int_equal(zoo_count(), 12);
    assert_null(zoo_name(zoo_count()));
    assert_null(zoo_describe(-1));
    printf("  %-20s %7s %7s %7s %7s %12s %9s\n", "model", "nodes", "values", "bwd", "updates", "params", "build ms");
    for (int i = 0; i < zoo_count(); i++) {
        const char *name = zoo_name(i);
        assert_non_null(name);
        assert_non_null(zoo_describe(i));
        int training = strstr(name, "_train") != NULL;
        double t0 = seconds();
        pbl_graph *g = build(name, 0);
        double ms = 1e3 * (seconds() - t0);
        counts c = count(g);
        printf("  %-20s %7d %7d %7d %7d %12lld %9.2f\n", name, (int)c.nodes, (int)c.values, (int)c.backward,
               (int)c.updates, (long long)c.params, ms);
        if (pbl_graph_validate(g) != PBL_OK)
            fprintf(stderr, "FAIL %s: %s\n", name, pbl_graph_errmsg(g));
        assert_int_equal(pbl_graph_validate(g), PBL_OK);
        int bert = strncmp(name, "bert", 4) == 0;
        assert_int_not_equal(pbl_graph_output(g, bert ? "sequence_output" : "logits"), PBL_NONE);
        if (training) {
            assert_true(c.backward > c.nodes / 4);
            assert_true(c.updates > 0);
            pbl_value loss = pbl_graph_output(g, "loss");
            assert_int_not_equal(loss, PBL_NONE);
            assert_int_equal(th_value_numel(g, loss), 1);
        } else {
            assert_int_equal(c.backward, 0);
            assert_int_equal(c.updates, 0);
            assert_int_equal(pbl_graph_output(g, "loss"), PBL_NONE);
        }
        pbl_graph_destroy(g);
    }
}

/* Each training form updates every parameter: one update node per parameter. */
static void test_training_updates_every_parameter(void **state)
{
    (void)state;
    for (int i = 1; i < zoo_count(); i += 2) {
        pbl_graph *g = build(zoo_name(i), 0);
        int32_t n_params = 0;
        for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
            pbl_value_info vi;
            pbl_graph_value_info(g, v, &vi);
            n_params += vi.kind == PBL_VALUE_PARAM;
        }
        counts c = count(g);
        printf("  %-20s %d parameters, %d updates\n", zoo_name(i), (int)n_params, (int)c.updates);
        assert_int_equal(c.updates, n_params);
        pbl_graph_destroy(g);
    }
}

static void test_batch_argument(void **state)
{
    (void)state;
    static const struct { const char *name, *in, *out; int64_t dflt; } m[] = {
        { "mlp", "x", "logits", 128 }, { "resnet50", "x", "logits", 32 },
        { "mobilenet_v2_train", "x", "logits", 32 }, { "bert_base", "input_ids", "sequence_output", 8 },
    };
    for (int i = 0; i < NCASES(m); i++)
        for (int64_t batch = 0; batch <= 3; batch += 3) {
            pbl_graph *g = build(m[i].name, batch);
            pbl_shape in = th_value_shape(g, pbl_graph_find_value(g, m[i].in));
            pbl_shape out = th_value_shape(g, pbl_graph_output(g, m[i].out));
            int64_t want = batch ? batch : m[i].dflt;
            char si[96], so[96];
            printf("  %-20s batch %lld: %s %s -> %s %s\n", m[i].name, (long long)batch, m[i].in,
                   pbl_shape_str(&in, si, sizeof si), m[i].out, pbl_shape_str(&out, so, sizeof so));
            assert_int_equal(in.dim[0], want);
            assert_int_equal(out.dim[0], want);
            pbl_graph_destroy(g);
        }
}

static void test_parameter_counts(void **state)
{
    (void)state;
    static const struct { const char *name; int64_t exact; double published; } m[] = {
        { "mlp", 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10, 0 },
        { "mlp50", 784 * 512 + 512 + 48 * (512 * 512 + 512) + 512 * 10 + 10, 0 },
        { "mlp100", 784 * 128 + 128 + 98 * (128 * 128 + 128) + 128 * 10 + 10, 0 },
        { "resnet50", 25557032, 25.6e6 },
        { "mobilenet_v2", 3504872, 3.5e6 },
        { "bert_base", 109482240 - 590592, 110e6 },
    };
    for (int i = 0; i < NCASES(m); i++) {
        pbl_graph *g = build(m[i].name, 0);
        int64_t p = count(g).params;
        printf("  %-14s %12lld parameters (want %lld", m[i].name, (long long)p, (long long)m[i].exact);
        if (m[i].published > 0)
            printf("; published %.1fM, off by %+.2f%%", m[i].published / 1e6, 100.0 * ((double)p / m[i].published - 1));
        printf(")\n");
        assert_int_equal(p, m[i].exact);
        if (m[i].published > 0)
            assert_true(fabs((double)p / m[i].published - 1) < 0.02);
        pbl_graph_destroy(g);
    }
}

static void test_build_errors(void **state)
{
    (void)state;
    pbl_graph *g = (pbl_graph *)1;
    char err[256];
    assert_int_equal(zoo_build("resnet51", 0, &g, err, sizeof err), PBL_ERR_NOT_FOUND);
    printf("  %s\n", err);
    assert_null(g);
    assert_non_null(strstr(err, "resnet51"));
    assert_non_null(strstr(err, "bert_base_train"));
    assert_int_equal(zoo_build("mlp", -1, &g, err, sizeof err), PBL_ERR_INVALID_ARG);
    printf("  %s\n", err);
    assert_int_equal(zoo_build(NULL, 0, &g, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(zoo_build("mlp", 0, NULL, NULL, 0), PBL_ERR_INVALID_ARG);
}

/* ---- running: every op has a CPU kernel; the mlp trains ------------------------------------------ */

/* The first op of g (in node order) without a CPU kernel, or NULL. */
static const char *first_without_kernel(const pbl_graph *g)
{
    for (pbl_node n = 0; n < pbl_graph_node_count(g); n++) {
        pbl_node_info ni;
        pbl_graph_node_info(g, n, &ni);
        if (!pbl_op_has_cpu_kernel(ni.op))
            return ni.op;
    }
    return NULL;
}

/* No zoo graph, inference or training, has a shape-only op: the CPU backend runs every one
 * (not created here: resnet50_train's state alone is 300 MiB). */
static void test_zoo_ops_have_cpu_kernels(void **state)
{
    (void)state;
    for (int i = 0; i < zoo_count(); i++) {
        pbl_graph *g = build(zoo_name(i), 1);
        const char *op = first_without_kernel(g);
        if (op)
            fprintf(stderr, "FAIL %s: op %s has no CPU kernel\n", zoo_name(i), op);
        assert_null(op);
        pbl_graph_destroy(g);
    }
    printf("  %d zoo graphs: every op has a CPU kernel\n", zoo_count());
}

/* The CPU executor takes g (every op has a kernel; g plans and its arena is allocated). */
static void check_executor(pbl_graph *g)
{
    pbl_exec *e = NULL;
    char msg[512] = "";
    pbl_exec_options o = pbl_exec_options_default();
    assert_null(first_without_kernel(g));
    pbl_status s = pbl_exec_create(&e, g, &o, msg, sizeof msg);
    printf("  executor: %s %s\n", pbl_status_name(s), msg);
    assert_int_equal(s, PBL_OK);
    pbl_exec_destroy(e);
}

/* Writes uniform(±1/sqrt(fan_in)) into every parameter. */
static int init_params(pbl_graph *g, pbl_exec *e, th_rng *r)
{
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, v, &vi);
        if (vi.kind != PBL_VALUE_PARAM)
            continue;
        int64_t n = pbl_shape_numel(&vi.shape), fan_in = vi.shape.ndim == 2 ? vi.shape.dim[1] : 64;
        float *p = th_falloc(n);
        double a = 1.0 / sqrt((double)fan_in);
        th_fill(r, p, n, -a, a);
        pbl_status s = pbl_exec_write(e, v, p, (size_t)n * sizeof *p);
        free(p);
        TH_E(e, s);
    }
    return 0;
}

static void test_mlp_runs(void **state)
{
    (void)state;
    th_set_case("mlp_train batch 16");
    enum { B = 16, STEPS = 40 };
    pbl_graph *g = build("mlp_train", B);
    pbl_exec *e;
    assert_int_equal(th_exec_new(g, &e, "mlp_train"), 0);
    th_rng r = th_rng_seed(41);
    assert_int_equal(init_params(g, e, &r), 0);
    float *x = th_falloc(B * 784);
    int32_t y[B];
    th_fill(&r, x, B * 784, 0, 1);
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)th_int(&r, 0, 9);
    assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, "x"), x, sizeof(float) * B * 784), PBL_OK);
    assert_int_equal(pbl_exec_write(e, pbl_graph_find_value(g, "labels"), y, sizeof y), PBL_OK);
    float first = NAN, last = NAN;
    for (int step = 0; step < STEPS; step++) {
        pbl_status s = pbl_exec_run(e);
        if (s != PBL_OK)
            fprintf(stderr, "FAIL run: %s\n", pbl_exec_errmsg(e));
        assert_int_equal(s, PBL_OK);
        assert_int_equal(pbl_exec_read(e, pbl_graph_output(g, "loss"), &last, sizeof last), PBL_OK);
        if (step == 0)
            first = last;
    }
    printf("  mlp_train on one fixed batch of %d: loss %.4f -> %.4f after %d Adam steps\n", B, first, last, STEPS);
    assert_true(isfinite(first) && isfinite(last));
    assert_true(first > 1.5f);     /* about ln 10 for a fresh network */
    assert_true(last < 0.5f * first);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    free(x);
}

/* The liveness pass turns the big training graphs into usage records (planned, not run here). */
static void test_shape_only_graphs_plan(void **state)
{
    (void)state;
    const char *names[] = { "resnet50_train", "mobilenet_v2_train", "bert_base_train" };
    for (int i = 0; i < NCASES(names); i++) {
        pbl_graph *g = build(names[i], 0);
        pbl_liveness_options o = pbl_liveness_options_default();
        pbl_graph_records r;
        char err[256] = "";
        pbl_status s = pbl_graph_liveness(g, &o, &r, err, sizeof err);
        if (s != PBL_OK)
            fprintf(stderr, "FAIL liveness of %s: %s\n", names[i], err);
        assert_int_equal(s, PBL_OK);
        int64_t total = 0;
        for (int32_t k = 0; k < r.n_records; k++)
            total += r.records[k].size;
        int64_t lb = pbl_records_lower_bound(r.records, r.n_records);
        printf("  %-20s %5d steps, %5d records, %8.1f MiB in all, lower bound %8.1f MiB\n", names[i],
               (int)r.n_steps, (int)r.n_records, (double)total / (1 << 20), (double)lb / (1 << 20));
        assert_int_equal(r.n_steps, pbl_graph_node_count(g));
        assert_true(lb > 0 && lb < total);
        pbl_graph_records_free(&r);
        pbl_graph_destroy(g);
    }
}

/* ---- shape errors ---------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *op;
    int32_t     n_in;
    pbl_shape   shape[5];
    pbl_dtype   dtype[5];      /* PBL_F32 unless set */
    pbl_attr    attrs[4];
    int32_t     n_attrs;
    const char *want[2];       /* both shapes, as the message must show them */
} bad_case;

#define INTS(name, ...) TH_ATTR_INTS(name, __VA_ARGS__)

static int check_bad(const bad_case *c)
{
    th_set_case("shape error of %s", c->op);
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value in[5];
    for (int32_t i = 0; i < c->n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", (int)i);
        TH_G(g, pbl_graph_add_variable(g, name, PBL_VALUE_INPUT, c->dtype[i], c->shape[i], &in[i]));
    }
    char node[64];
    snprintf(node, sizeof node, "bad_%s", c->op);
    pbl_value out[4];
    pbl_node_desc d = { .op = c->op, .name = node, .inputs = in, .n_inputs = c->n_in, .attrs = c->attrs,
                        .n_attrs = c->n_attrs };
    int32_t nodes = pbl_graph_node_count(g), values = pbl_graph_value_count(g);
    pbl_status s = pbl_graph_add_node(g, &d, NULL, out);
    const char *msg = pbl_graph_errmsg(g);
    printf("  %-22s %s: %s\n", c->op, pbl_status_name(s), msg);
    int fails = 0;
    if (s != PBL_ERR_SHAPE)
        fprintf(stderr, "FAIL [%s] status %s, want PBL_ERR_SHAPE\n", th_case, pbl_status_name(s)), fails++;
    char quoted[80];
    snprintf(quoted, sizeof quoted, "'%s'", node);
    const char *need[] = { quoted, c->want[0], c->want[1] };
    for (int k = 0; k < 3; k++)
        if (!strstr(msg, need[k]))
            fprintf(stderr, "FAIL [%s] the message does not name %s\n", th_case, need[k]), fails++;
    if (pbl_graph_node_count(g) != nodes || pbl_graph_value_count(g) != values)
        fprintf(stderr, "FAIL [%s] the graph changed\n", th_case), fails++;
    pbl_graph_destroy(g);
    return fails;
}

static void test_shape_errors(void **state)
{
    (void)state;
    const bad_case cases[] = {
        { "conv2d", 2, { PBL_SHAPE(2, 3, 8, 8), PBL_SHAPE(4, 5, 3, 3) }, .want = { "[2, 3, 8, 8]", "[4, 5, 3, 3]" } },
        { "conv2d", 3, { PBL_SHAPE(2, 3, 8, 8), PBL_SHAPE(4, 3, 3, 3), PBL_SHAPE(5) },
          .want = { "[5]", "[4, 3, 3, 3]" } },
        { "conv2d", 2, { PBL_SHAPE(2, 6, 8, 8), PBL_SHAPE(6, 2, 3, 3) }, .attrs = { PBL_ATTR_INT("groups", 6) },
          .n_attrs = 1, .want = { "[2, 6, 8, 8]", "[6, 2, 3, 3]" } },
        { "conv2d", 2, { PBL_SHAPE(1, 3, 4, 4), PBL_SHAPE(8, 3, 5, 5) }, .want = { "[1, 3, 4, 4]", "[8, 3, 5, 5]" } },
        { "conv2d_grad_input", 2, { PBL_SHAPE(2, 4, 8, 8), PBL_SHAPE(4, 3, 3, 3) },
          .attrs = { INTS("shape", 2, 3, 8, 8), INTS("stride", 2), INTS("pad", 1) }, .n_attrs = 3,
          .want = { "[2, 4, 8, 8]", "[2, 4, 4, 4]" } },
        { "conv2d_grad_weight", 2, { PBL_SHAPE(2, 4, 4, 4), PBL_SHAPE(2, 3, 8, 8) },
          .attrs = { INTS("shape", 4, 3, 3, 3), INTS("pad", 1) }, .n_attrs = 2,
          .want = { "[2, 4, 4, 4]", "[2, 3, 8, 8]" } },
        { "max_pool2d", 1, { PBL_SHAPE(2, 3, 2, 2) }, .attrs = { INTS("kernel", 3) }, .n_attrs = 1,
          .want = { "[2, 3, 2, 2]", "[3, 3]" } },
        { "max_pool2d_grad", 3, { PBL_SHAPE(2, 3, 4, 4), PBL_SHAPE(2, 3, 8, 8), PBL_SHAPE(2, 3, 4, 4) },
          .attrs = { INTS("kernel", 2) }, .n_attrs = 1, .want = { "[2, 3, 4, 4]", "[2, 3, 7, 7]" } },
        { "avg_pool2d", 1, { PBL_SHAPE(2, 3) }, .attrs = { INTS("kernel", 2) }, .n_attrs = 1,
          .want = { "[2, 3]", "1 to 3 spatial dims" } },
        { "avg_pool2d_grad", 1, { PBL_SHAPE(2, 3, 3, 3) },
          .attrs = { INTS("kernel", 2), INTS("stride", 2), INTS("shape", 2, 3, 8, 8) }, .n_attrs = 3,
          .want = { "[2, 3, 3, 3]", "[2, 3, 4, 4]" } },
        { "global_avg_pool", 1, { PBL_SHAPE(2, 3) }, .want = { "[2, 3]", "[N, C, d1, ...]" } },
        { "global_avg_pool_grad", 1, { PBL_SHAPE(2, 4, 1, 1) }, .attrs = { INTS("shape", 2, 3, 5, 5) },
          .n_attrs = 1, .want = { "[2, 4, 1, 1]", "[2, 3, 5, 5]" } },
        { "batch_norm", 3, { PBL_SHAPE(2, 3, 4, 4), PBL_SHAPE(4), PBL_SHAPE(3) },
          .want = { "[4]", "[2, 3, 4, 4]" } },
        { "batch_norm_grad", 5, { PBL_SHAPE(2, 3, 4, 4), PBL_SHAPE(2, 3, 4, 4), PBL_SHAPE(3), PBL_SHAPE(4), PBL_SHAPE(3) },
          .want = { "mean is [4]", "[2, 3, 4, 4]" } },
        { "layer_norm", 3, { PBL_SHAPE(2, 5, 8), PBL_SHAPE(7), PBL_SHAPE(8) }, .want = { "[7]", "[2, 5, 8]" } },
        { "layer_norm_grad", 5,
          { PBL_SHAPE(2, 5, 7), PBL_SHAPE(2, 5, 8), PBL_SHAPE(8), PBL_SHAPE(2, 5, 1), PBL_SHAPE(2, 5, 1) },
          .want = { "[2, 5, 7]", "[2, 5, 8]" } },
        { "embedding", 2, { PBL_SHAPE(2, 3), PBL_SHAPE(10) }, { PBL_I32, PBL_F32 }, .want = { "[2, 3]", "[10]" } },
        { "embedding_grad", 2, { PBL_SHAPE(2, 4, 8), PBL_SHAPE(2, 3) }, { PBL_F32, PBL_I32 },
          .attrs = { PBL_ATTR_INT("num_embeddings", 10) }, .n_attrs = 1, .want = { "[2, 4, 8]", "[2, 3]" } },
        { "transpose", 1, { PBL_SHAPE(2, 3) }, .attrs = { INTS("perm", 1, 0, 2) }, .n_attrs = 1,
          .want = { "[2, 3]", "[1, 0, 2]" } },
    };
    int fails = 0;
    for (int i = 0; i < NCASES(cases); i++)
        fails += check_bad(&cases[i]);
    assert_int_equal(fails, 0);
}

/* Attribute and dtype errors are their own statuses. */
static void test_attr_and_dtype_errors(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 3, 8, 8)), w = pbl_param(g, "w", PBL_SHAPE(4, 3, 3, 3));
    pbl_value t = pbl_param(g, "t", PBL_SHAPE(10, 4)), xi;
    pbl_graph_add_variable(g, "xi", PBL_VALUE_INPUT, PBL_I32, PBL_SHAPE(2, 3, 8, 8), &xi);
    const pbl_attr stride0[] = { INTS("stride", 0) }, pad3[] = { INTS("pad", 1, 1, 1) };
    const pbl_attr groups0[] = { PBL_ATTR_INT("groups", 0) }, no_kernel[] = { INTS("stride", 1) };
    const pbl_attr pad_big[] = { INTS("kernel", 2), INTS("pad", 2) }, dup[] = { INTS("perm", 0, 0, 1, 2) };
    const struct {
        const char *what, *op;
        pbl_value in[2];
        int32_t n_in;
        const pbl_attr *at;
        int32_t n_at;
        pbl_status want;
    } c[] = {
        { "stride 0", "conv2d", { x, w }, 2, stride0, 1, PBL_ERR_ATTR },
        { "pad of 3 ints", "conv2d", { x, w }, 2, pad3, 1, PBL_ERR_ATTR },
        { "groups 0", "conv2d", { x, w }, 2, groups0, 1, PBL_ERR_ATTR },
        { "no kernel", "max_pool2d", { x }, 1, no_kernel, 1, PBL_ERR_ATTR },
        { "pad as large as the kernel", "avg_pool2d", { x }, 1, pad_big, 2, PBL_ERR_ATTR },
        { "perm naming axis 0 twice", "transpose", { x }, 1, dup, 1, PBL_ERR_ATTR },
        { "f32 ids", "embedding", { t, t }, 2, NULL, 0, PBL_ERR_DTYPE },
        { "i32 image", "conv2d", { xi, w }, 2, NULL, 0, PBL_ERR_DTYPE },
    };
    for (int i = 0; i < NCASES(c); i++) {
        pbl_node_desc d = { .op = c[i].op, .inputs = c[i].in, .n_inputs = c[i].n_in, .attrs = c[i].at,
                            .n_attrs = c[i].n_at };
        pbl_value out[4];
        pbl_status s = pbl_graph_add_node(g, &d, NULL, out);
        printf("  %-10s %-28s %s: %s\n", c[i].op, c[i].what, pbl_status_name(s), pbl_graph_errmsg(g));
        assert_int_equal(s, c[i].want);
    }
    pbl_graph_destroy(g);
}

/* ---- gradients through conv, pool, norm, embedding -------------------------------------------- */

static int has_backward_op(const pbl_graph *g, const char *op)
{
    for (pbl_node n = 0; n < pbl_graph_node_count(g); n++) {
        pbl_node_info ni;
        pbl_graph_node_info(g, n, &ni);
        if (ni.is_backward && strcmp(ni.op, op) == 0)
            return 1;
    }
    return 0;
}

/* Adds one node named `name`; returns its first output (all in outs when given). */
static pbl_value node(pbl_graph *g, const char *op, const char *name, const pbl_value *in, int32_t n_in,
                      const pbl_attr *at, int32_t n_at, pbl_value *outs)
{
    pbl_value o[4];
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    pbl_status s = pbl_graph_add_node(g, &d, NULL, outs ? outs : o);
    if (s != PBL_OK)
        fprintf(stderr, "FAIL adding %s: %s\n", name, pbl_graph_errmsg(g));
    assert_int_equal(s, PBL_OK);
    return outs ? outs[0] : o[0];
}

/* Differentiates loss with respect to params; checks each gradient's shape, that the graph
 * validates, that each op in `ops` has a backward node, and that the CPU executor takes it. */
static void check_gradient_graph(pbl_graph *g, pbl_value loss, const pbl_value *params, int32_t n,
                                 const char *const *ops, int n_ops)
{
    pbl_value grads[16];
    int32_t before = pbl_graph_node_count(g);
    pbl_status s = pbl_graph_gradient(g, loss, params, n, grads);
    if (s != PBL_OK)
        fprintf(stderr, "FAIL gradient: %s\n", pbl_graph_errmsg(g));
    assert_int_equal(s, PBL_OK);
    printf("  %d forward nodes, %d backward nodes\n", (int)before, (int)(pbl_graph_node_count(g) - before));
    assert_int_equal(pbl_graph_set_output(g, "loss", loss), PBL_OK);
    for (int32_t i = 0; i < n; i++) {
        assert_int_not_equal(grads[i], PBL_NONE);
        pbl_shape gs = th_value_shape(g, grads[i]), ps = th_value_shape(g, params[i]);
        assert_true(pbl_shape_equal(&gs, &ps));
        char name[32];
        snprintf(name, sizeof name, "grad%d", (int)i);
        assert_int_equal(pbl_graph_set_output(g, name, grads[i]), PBL_OK);
    }
    assert_int_equal(pbl_graph_validate(g), PBL_OK);
    for (int k = 0; k < n_ops; k++) {
        if (!has_backward_op(g, ops[k]))
            fprintf(stderr, "FAIL no backward %s node\n", ops[k]);
        assert_true(has_backward_op(g, ops[k]));
    }
    check_executor(g);
}

enum { CPN_PARAMS = 6 };

/* x: [2, 3, 16, 16] -conv s2-> [2, 8, 8, 8] -bn, relu, max pool s2-> [2, 8, 4, 4]
 *   -depthwise, dilation 2-> [2, 8, 4, 4] -avg pool 2-> [2, 8, 2, 2] -global-> [2, 8] -fc-> [2, 5]
 * -> cross-entropy. Fills p[CPN_PARAMS]; returns the loss. */
static pbl_value build_conv_pool_norm(pbl_graph *g, pbl_value *p)
{
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 3, 16, 16));
    p[0] = pbl_param(g, "w1", PBL_SHAPE(8, 3, 3, 3));
    p[1] = pbl_param(g, "b1", PBL_SHAPE(8));
    p[2] = pbl_param(g, "scale", PBL_SHAPE(8));
    p[3] = pbl_param(g, "shift", PBL_SHAPE(8));
    p[4] = pbl_param(g, "dw", PBL_SHAPE(8, 1, 3, 3));
    p[5] = pbl_param(g, "fc_w", PBL_SHAPE(5, 8));
    pbl_attr c1[] = { INTS("stride", 2), INTS("pad", 1) };
    pbl_value h = node(g, "conv2d", "conv", (pbl_value[]){ x, p[0], p[1] }, 3, c1, 2, NULL);
    pbl_value bn[3];
    node(g, "batch_norm", "bn", (pbl_value[]){ h, p[2], p[3] }, 3, NULL, 0, bn);
    h = pbl_relu(g, bn[0]);
    pbl_attr mp[] = { INTS("kernel", 3), INTS("stride", 2), INTS("pad", 1) };
    h = node(g, "max_pool2d", "maxpool", &h, 1, mp, 3, NULL);
    pbl_attr dw[] = { INTS("pad", 2), INTS("dilation", 2), PBL_ATTR_INT("groups", 8) };
    h = node(g, "conv2d", "depthwise", (pbl_value[]){ h, p[4] }, 2, dw, 3, NULL);
    pbl_attr ap[] = { INTS("kernel", 2), INTS("stride", 2) };
    h = node(g, "avg_pool2d", "avgpool", &h, 1, ap, 2, NULL);
    h = pbl_flatten(g, node(g, "global_avg_pool", "gap", &h, 1, NULL, 0, NULL), 1);
    pbl_value logits = pbl_fully_connected(g, h, p[5], PBL_NONE);
    pbl_value loss = pbl_softmax_cross_entropy(g, logits, pbl_label(g, "y", PBL_I32, PBL_SHAPE(2)));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(th_value_shape(g, logits).dim[1], 5);
    return loss;
}

static void test_gradient_conv_pool_norm(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value p[CPN_PARAMS];
    pbl_value loss = build_conv_pool_norm(g, p);
    const char *ops[] = { "conv2d_grad_input", "conv2d_grad_weight", "batch_norm_grad", "max_pool2d_grad",
                          "avg_pool2d_grad", "global_avg_pool_grad", "sum" };
    check_gradient_graph(g, loss, p, CPN_PARAMS, ops, NCASES(ops));
    /* the first conv reads the input x, which has no gradient: no grad_input for it */
    assert_int_equal(pbl_graph_find_node(g, "conv/grad_input"), PBL_NONE);
    assert_int_not_equal(pbl_graph_find_node(g, "depthwise/grad_input"), PBL_NONE);
    pbl_graph_destroy(g);
}

static void test_gradient_embedding_layer_norm(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value ids;
    pbl_graph_add_variable(g, "ids", PBL_VALUE_INPUT, PBL_I32, PBL_SHAPE(2, 6), &ids);
    pbl_value p[] = { pbl_param(g, "table", PBL_SHAPE(11, 8)), pbl_param(g, "gamma", PBL_SHAPE(8)),
                      pbl_param(g, "beta", PBL_SHAPE(8)), pbl_param(g, "w", PBL_SHAPE(3, 8)) };
    // ids: [2, 6] -> [2, 6, 8] -layer_norm-> -transpose-> [6, 2, 8] -> [12, 8] -fc-> [12, 3]
    pbl_value e = node(g, "embedding", "emb", (pbl_value[]){ ids, p[0] }, 2, NULL, 0, NULL);
    pbl_value ln[3];
    node(g, "layer_norm", "ln", (pbl_value[]){ e, p[1], p[2] }, 3, NULL, 0, ln);
    pbl_shape stat = th_value_shape(g, ln[1]), want = PBL_SHAPE(2, 6, 1);
    assert_true(pbl_shape_equal(&stat, &want));
    pbl_attr perm = INTS("perm", 1, 0, 2);
    pbl_value t = node(g, "transpose", "tr", &ln[0], 1, &perm, 1, NULL);
    pbl_value logits = pbl_fully_connected(g, pbl_reshape(g, t, PBL_SHAPE(12, 8)), p[3], PBL_NONE);
    pbl_value loss = pbl_softmax_cross_entropy(g, logits, pbl_label(g, "y", PBL_I32, PBL_SHAPE(12)));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    const char *ops[] = { "embedding_grad", "layer_norm_grad", "transpose" };
    check_gradient_graph(g, loss, p, NCASES(p), ops, NCASES(ops));
    pbl_graph_destroy(g);
}

/* The saved statistics are outputs without a gradient: a loss that depends on them fails
 * cleanly and leaves the graph as it was. */
static void test_saved_statistics_not_differentiable(void **state)
{
    (void)state;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 3, 4, 4));
    pbl_value s = pbl_param(g, "s", PBL_SHAPE(3)), b = pbl_param(g, "b", PBL_SHAPE(3));
    pbl_value bn[3];
    node(g, "batch_norm", "bn", (pbl_value[]){ x, s, b }, 3, NULL, 0, bn);
    pbl_value loss = pbl_add(g, pbl_sum(g, bn[0], NULL, 0, 0), pbl_sum(g, bn[2], NULL, 0, 0));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    int32_t nodes = pbl_graph_node_count(g);
    pbl_value grads[2];
    pbl_status st = pbl_graph_gradient(g, loss, (pbl_value[]){ s, b }, 2, grads);
    printf("  %s: %s\n", pbl_status_name(st), pbl_graph_errmsg(g));
    assert_int_equal(st, PBL_ERR_NOT_DIFFERENTIABLE);
    assert_non_null(strstr(pbl_graph_errmsg(g), "'bn'"));
    assert_int_equal(pbl_graph_node_count(g), nodes);
    pbl_graph_destroy(g);
}

/* Over the zoo's training graphs (and the conv/pool/norm graph above): every forward value a backward node reads is data its
 * forward node's op declares in grad_reads_in/out, and for the new ops every declared bit is
 * read somewhere (the declarations are neither too small nor too large). */
static void test_gradient_reads_declared(void **state)
{
    (void)state;
    static const char *const new_ops[] = { "conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool",
                                           "batch_norm", "layer_norm", "embedding", "transpose" };
    uint32_t read_in[NCASES(new_ops)] = { 0 }, read_out[NCASES(new_ops)] = { 0 };
    int seen[NCASES(new_ops)] = { 0 }, fails = 0;
    grad_reads gr = { .track = new_ops, .n_track = NCASES(new_ops), .read_in = read_in, .read_out = read_out,
                      .seen = seen };
    const char *graphs[] = { "resnet50_train", "mobilenet_v2_train", "bert_base_train", "conv_pool_norm",
                             "batch_norm_switched" };
    for (int gi = 0; gi < NCASES(graphs); gi++) {
        pbl_graph *g;
        if (gi < 3) {
            g = build(graphs[gi], 1);
        } else if (gi == 4) { /* batch_norm with running statistics: its gradient reads the switch */
            pbl_graph_create(&g, NULL);
            pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 3, 4, 4)), t, p[2], grads[2];
            p[0] = pbl_param(g, "s", PBL_SHAPE(3));
            p[1] = pbl_param(g, "b", PBL_SHAPE(3));
            assert_int_equal(pbl_graph_add_scalar(g, "training", 1.0, &t), PBL_OK);
            pbl_value y = pbl_batch_norm_switched(g, "bn", x, p[0], p[1], t, 0.1, 1e-5);
            pbl_value loss = pbl_sum(g, pbl_mul(g, y, y), NULL, 0, 0);
            assert_int_equal(pbl_graph_build_status(g), PBL_OK);
            assert_int_equal(pbl_graph_gradient(g, loss, p, 2, grads), PBL_OK);
        } else { /* the zoo has no avg_pool2d */
            pbl_graph_create(&g, NULL);
            pbl_value p[CPN_PARAMS], grads[CPN_PARAMS];
            pbl_value loss = build_conv_pool_norm(g, p);
            assert_int_equal(pbl_graph_gradient(g, loss, p, CPN_PARAMS, grads), PBL_OK);
        }
        grad_reads_check(g, graphs[gi], &gr);
        pbl_graph_destroy(g);
    }
    printf("  %d forward reads by backward nodes, all declared\n", gr.checked);
    fails += gr.undeclared;
    for (int k = 0; k < NCASES(new_ops); k++) {
        const pbl__op *op = pbl__op_get(pbl__op_find(new_ops[k]));
        printf("  %-16s declares in 0x%x out 0x%x, reads in 0x%x out 0x%x\n", new_ops[k], op->grad_reads_in,
               op->grad_reads_out, read_in[k], read_out[k]);
        if (!seen[k] || read_in[k] != op->grad_reads_in || read_out[k] != op->grad_reads_out)
            fprintf(stderr, "FAIL %s: declared and read differ (or the op is in no zoo graph)\n", new_ops[k]), fails++;
    }
    assert_int_equal(fails, 0);
}

/* The ops the zoo brought in have CPU kernels, gradients included, and the forward ones are
 * differentiable: convolution, pooling, norms, embedding, transpose (and conv2d_grad_input,
 * which is also ONNX ConvTranspose). */
static void test_kernels_as_documented(void **state)
{
    (void)state;
    static const char *const run[] = { "conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool", "conv2d_grad_input",
                                       "conv2d_grad_weight", "max_pool2d_grad", "avg_pool2d_grad",
                                       "global_avg_pool_grad", "batch_norm", "batch_norm_grad", "layer_norm",
                                       "layer_norm_grad", "embedding", "embedding_grad" };
    for (int i = 0; i < NCASES(run); i++) {
        assert_true(pbl_op_has_cpu_kernel(run[i]));
        /* conv2d_grad_input is ONNX ConvTranspose's forward too, so it has a gradient */
        int is_forward = strstr(run[i], "_grad") == NULL || strcmp(run[i], "conv2d_grad_input") == 0;
        assert_int_equal(pbl_op_differentiable(run[i]), is_forward);
    }
    assert_true(pbl_op_has_cpu_kernel("transpose"));
    assert_true(pbl_op_differentiable("transpose"));
}

/* ---- transpose: forward against a naive reference, gradient by finite differences ---------- */

/* y[j] = x[i], i the flat index in x of y's multi-index j mapped through perm. */
static int64_t naive_source(const pbl_shape *x, const int64_t *perm, int64_t j)
{
    int64_t ydim[PBL_MAX_DIMS], idx[PBL_MAX_DIMS] = { 0 }, xi[PBL_MAX_DIMS];
    int32_t r = x->ndim;
    for (int32_t k = 0; k < r; k++)
        ydim[k] = x->dim[perm[k]];
    for (int32_t k = r - 1; k >= 0; k--) {
        idx[k] = j % ydim[k];
        j /= ydim[k];
    }
    for (int32_t k = 0; k < r; k++)
        xi[perm[k]] = idx[k];
    int64_t i = 0;
    for (int32_t d = 0; d < r; d++)
        i = i * x->dim[d] + xi[d];
    return i;
}

typedef struct tcase {
    pbl_shape shape;
    int32_t   n_perm;      /* 0: the default (reversed dims) */
    int64_t   perm[PBL_MAX_DIMS];
} tcase;

static int check_transpose(const tcase *c, pbl_dtype dtype, th_rng *r)
{
    char sx[96];
    th_set_case("transpose %s x%s n_perm %d", pbl_dtype_name(dtype), pbl_shape_str(&c->shape, sx, sizeof sx),
                (int)c->n_perm);
    int64_t perm[PBL_MAX_DIMS];
    for (int32_t k = 0; k < c->shape.ndim; k++)
        perm[k] = c->n_perm ? c->perm[k] : c->shape.ndim - 1 - k;
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x, y;
    TH_G(g, pbl_graph_add_variable(g, "x", PBL_VALUE_INPUT, dtype, c->shape, &x));
    pbl_attr at = PBL_ATTR_INTS("perm", c->perm, c->n_perm);
    pbl_node_desc d = { .op = "transpose", .name = "t", .inputs = &x, .n_inputs = 1, .attrs = &at,
                        .n_attrs = c->n_perm ? 1 : 0 };
    TH_G(g, pbl_graph_add_node(g, &d, NULL, &y));
    TH_G(g, pbl_graph_set_output(g, "y", y));
    int fails = 0;
    pbl_shape ys = th_value_shape(g, y);
    for (int32_t k = 0; k < c->shape.ndim; k++)
        fails += ys.dim[k] != c->shape.dim[perm[k]];
    int64_t n = pbl_shape_numel(&c->shape);
    uint32_t *in = calloc((size_t)n, 4), *out = calloc((size_t)n, 4);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == PBL_F32) {
            float f = (float)th_uniform(r, -1, 1);
            memcpy(&in[i], &f, 4);
        } else {
            int32_t v = (int32_t)th_int(r, -1000000, 1000000);
            memcpy(&in[i], &v, 4);
        }
    }
    pbl_exec *e;
    if (th_exec_new(g, &e, "transpose"))
        return 1;
    TH_E(e, pbl_exec_write(e, x, in, (size_t)n * 4));
    TH_E(e, pbl_exec_run(e));
    TH_E(e, pbl_exec_read(e, y, out, (size_t)n * 4));
    int64_t bad = 0, first_bad = -1;
    for (int64_t j = 0; j < n; j++)
        if (out[j] != in[naive_source(&c->shape, perm, j)]) {
            if (!bad++)
                first_bad = j;
        }
    if (bad || fails) {
        fprintf(stderr, "FAIL [%s] %lld of %lld elements differ from the naive reference (first at %lld)\n", th_case,
                (long long)bad, (long long)n, (long long)first_bad);
        fails++;
    }
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    free(in);
    free(out);
    return fails;
}

static void test_transpose_forward(void **state)
{
    (void)state;
    const tcase cases[] = {
        { PBL_SHAPE(7), 0, { 0 } },
        { PBL_SHAPE(3, 5), 0, { 0 } },
        { PBL_SHAPE(3, 5), 2, { 0, 1 } },
        { PBL_SHAPE(2, 3, 4), 3, { 2, 0, 1 } },
        { PBL_SHAPE(2, 3, 4), 3, { 1, 2, 0 } },
        { PBL_SHAPE(2, 5, 3, 4), 4, { 0, 2, 1, 3 } }, /* BERT's heads */
        { PBL_SHAPE(2, 3, 1, 4, 2), 0, { 0 } },
        { PBL_SHAPE(2, 3, 2, 3, 2, 2), 6, { 5, 3, 1, 0, 2, 4 } },
        { PBL_SHAPE(4, 1, 6), 3, { 1, 2, 0 } },
    };
    th_rng r = th_rng_seed(71);
    int fails = 0;
    for (int i = 0; i < NCASES(cases); i++) {
        fails += check_transpose(&cases[i], PBL_F32, &r);
        fails += check_transpose(&cases[i], PBL_I32, &r);
    }
    printf("  %d shapes, f32 and i32: bit-exact against the naive reference\n", NCASES(cases));
    assert_int_equal(fails, 0);
}

/* loss = Σ transpose(x)·R. Analytic d loss / dx from the backward pass, numeric by central
 * differences with test_grad.c's step and tolerances (the loss is linear in x, so only float32
 * rounding separates the two). */
#define FD_H    1e-2
#define FD_ATOL 2e-4
#define FD_RTOL 2e-3

static int check_transpose_grad(const tcase *c, th_rng *r)
{
    char sx[96];
    th_set_case("transpose gradient x%s n_perm %d", pbl_shape_str(&c->shape, sx, sizeof sx), (int)c->n_perm);
    pbl_graph *g;
    pbl_graph_create(&g, NULL);
    pbl_value x, rv, dx;
    TH_G(g, pbl_graph_add_variable(g, "x", PBL_VALUE_INPUT, PBL_F32, c->shape, &x));
    pbl_attr at = PBL_ATTR_INTS("perm", c->perm, c->n_perm);
    pbl_node_desc d = { .op = "transpose", .name = "t", .inputs = &x, .n_inputs = 1, .attrs = &at,
                        .n_attrs = c->n_perm ? 1 : 0 };
    pbl_value y;
    TH_G(g, pbl_graph_add_node(g, &d, NULL, &y));
    TH_G(g, pbl_graph_add_variable(g, "r", PBL_VALUE_INPUT, PBL_F32, th_value_shape(g, y), &rv));
    pbl_value loss = pbl_sum(g, pbl_mul(g, y, rv), NULL, 0, 0);
    TH_G(g, pbl_graph_build_status(g));
    TH_G(g, pbl_graph_set_output(g, "loss", loss));
    TH_G(g, pbl_graph_gradient(g, loss, &x, 1, &dx));
    TH_G(g, pbl_graph_set_output(g, "dx", dx));
    int fails = 0;
    if (pbl_graph_find_node(g, "t/grad") == PBL_NONE)
        fprintf(stderr, "FAIL [%s] no backward transpose 't/grad'\n", th_case), fails++;

    int64_t n = pbl_shape_numel(&c->shape);
    float *xd = th_falloc(n), *rd = th_falloc(n), *ana = th_falloc(n);
    double *num = th_dalloc(n);
    th_fill(r, xd, n, -1, 1);
    th_fill(r, rd, n, -1, 1);
    pbl_exec *e;
    if (th_exec_new(g, &e, "transpose gradient"))
        return 1;
    TH_E(e, pbl_exec_write(e, rv, rd, (size_t)n * sizeof *rd));
    TH_E(e, pbl_exec_write(e, x, xd, (size_t)n * sizeof *xd));
    TH_E(e, pbl_exec_run(e));
    TH_E(e, pbl_exec_read(e, dx, ana, (size_t)n * sizeof *ana));
    for (int64_t j = 0; j < n; j++) {
        float save = xd[j], xp = (float)(save + FD_H), xm = (float)(save - FD_H), lp, lm;
        xd[j] = xp;
        TH_E(e, pbl_exec_write(e, x, xd, (size_t)n * sizeof *xd));
        TH_E(e, pbl_exec_run(e));
        TH_E(e, pbl_exec_read(e, loss, &lp, sizeof lp));
        xd[j] = xm;
        TH_E(e, pbl_exec_write(e, x, xd, (size_t)n * sizeof *xd));
        TH_E(e, pbl_exec_run(e));
        TH_E(e, pbl_exec_read(e, loss, &lm, sizeof lm));
        xd[j] = save;
        num[j] = ((double)lp - (double)lm) / ((double)xp - (double)xm);
    }
    fails += th_close("d loss / dx (analytic vs numeric)", ana, num, NULL, n, FD_ATOL, FD_RTOL);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    free(xd), free(rd), free(ana), free(num);
    return fails;
}

static void test_transpose_gradient(void **state)
{
    (void)state;
    const tcase cases[] = {
        { PBL_SHAPE(3, 4), 0, { 0 } },
        { PBL_SHAPE(2, 3, 4), 3, { 2, 0, 1 } },
        { PBL_SHAPE(2, 3, 2, 2), 4, { 0, 2, 1, 3 } },
    };
    th_rng r = th_rng_seed(72);
    int fails = 0;
    for (int i = 0; i < NCASES(cases); i++)
        fails += check_transpose_grad(&cases[i], &r);
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_model_builds),
        cmocka_unit_test(test_training_updates_every_parameter),
        cmocka_unit_test(test_batch_argument),
        cmocka_unit_test(test_parameter_counts),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_zoo_ops_have_cpu_kernels),
        cmocka_unit_test(test_mlp_runs),
        cmocka_unit_test(test_shape_only_graphs_plan),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_attr_and_dtype_errors),
        cmocka_unit_test(test_gradient_conv_pool_norm),
        cmocka_unit_test(test_gradient_embedding_layer_norm),
        cmocka_unit_test(test_saved_statistics_not_differentiable),
        cmocka_unit_test(test_gradient_reads_declared),
        cmocka_unit_test(test_kernels_as_documented),
        cmocka_unit_test(test_transpose_forward),
        cmocka_unit_test(test_transpose_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
