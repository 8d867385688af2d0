/*
 * Every op's forward output against a naive reference written here in plain C with double
 * accumulation, on small random shapes from a seeded PRNG. Each case builds a one-node graph
 * (pbl_graph_add_node), runs it with an executor (pbl_exec_write, pbl_exec_run, pbl_exec_read)
 * and compares every output element.
 *
 * Tolerances, |got - want| <= atol + rtol * scale (float32 kernels against double references):
 *  - one rounding per element (add, sub, mul, scale, copy, relu): rtol 1e-6 (float32's unit
 *    roundoff is 6e-8; 1e-6 leaves room for x·(1/(1-p))-style rewrites), atol 1e-7;
 *  - transcendental element-wise ops (sigmoid, tanh, gelu, softmax, log_softmax): rtol 1e-5,
 *    atol 1e-6 — float libm calls are good to a few ulps, and values that underflow or sit near
 *    0 are covered by atol;
 *  - sums over k terms (fully_connected, matmul, sum, mean, sum_to, add_n, losses): scale is
 *    Σ|terms| rather than |result|, rtol 1e-5 — float accumulation error grows like k·u·Σ|terms|
 *    (k ≤ ~30 here, so ≤ 2e-6·Σ|terms|), and cancellation must not make the bound tighter than
 *    the arithmetic can meet;
 *  - inputs near ±1000 (the stability checks): atol 1e-4, because float32's spacing at 1000 is
 *    6.1e-5, so a correct kernel that forms max + log Σ exp in float loses up to half of that.
 * Exact ops (reshape, flatten, copy, fill, broadcast_to, dropout with p=0) are compared exactly.
 */
#include "op_harness.h"

/* ---- one-node graphs ------------------------------------------------------------------------- */

typedef struct in_spec {
    pbl_shape      shape;
    pbl_dtype      dtype; /* PBL_F32 when left 0 */
    pbl_value_kind kind;  /* PBL_VALUE_INPUT when left 0 */
} in_spec;

typedef struct one_node {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_node   node;
    pbl_value  in[16];
    int32_t    n_in;
    pbl_value  out[4];
    int32_t    n_out;
} one_node;

static void one_free(one_node *c)
{
    pbl_exec_destroy(c->e);
    pbl_graph_destroy(c->g);
    memset(c, 0, sizeof *c);
}

/* Variables "in0".. of the given specs, one node "n" of `op`, every output named "out<k>",
 * and an executor. Returns 1 (printed) on failure. */
static int one_build(one_node *c, const char *op, const in_spec *in, int32_t n_in,
                     const pbl_attr *attrs, int32_t n_attrs)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(pbl_graph_create(&c->g, NULL), PBL_OK);
    c->n_in = n_in;
    for (int32_t i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", (int)i);
        TH_G(c->g, pbl_graph_add_variable(c->g, name, in[i].kind, in[i].dtype, in[i].shape,
                                          &c->in[i]));
    }
    for (int k = 0; k < 4; k++)
        c->out[k] = PBL_NONE;
    pbl_node_desc d = { .op = op, .name = "n", .inputs = c->in, .n_inputs = n_in,
                        .attrs = attrs, .n_attrs = n_attrs };
    TH_G(c->g, pbl_graph_add_node(c->g, &d, &c->node, c->out));
    pbl_node_info ni;
    TH_G(c->g, pbl_graph_node_info(c->g, c->node, &ni));
    c->n_out = ni.n_outputs;
    for (int32_t k = 0; k < c->n_out; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", (int)k);
        TH_G(c->g, pbl_graph_set_output(c->g, name, c->out[k]));
    }
    return th_exec_new(c->g, &c->e, op);
}

static size_t value_bytes(const pbl_graph *g, pbl_value v)
{
    pbl_value_info vi;
    if (pbl_graph_value_info(g, v, &vi) != PBL_OK)
        return 0;
    return (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype);
}

/* Writes every input whose data pointer is not NULL, then runs once. */
static int one_run(one_node *c, const void *const *data)
{
    for (int32_t i = 0; i < c->n_in; i++)
        if (data && data[i])
            TH_E(c->e, pbl_exec_write(c->e, c->in[i], data[i], value_bytes(c->g, c->in[i])));
    TH_E(c->e, pbl_exec_run(c->e));
    return 0;
}

/* Reads value v (an output or a variable) into buf, after checking it has `n` elements. */
static int read_value(one_node *c, pbl_value v, float *buf, int64_t n)
{
    int64_t have = th_value_numel(c->g, v);
    if (have != n) {
        fprintf(stderr, "FAIL [%s] value %d has %lld elements, want %lld\n", th_case, (int)v,
                (long long)have, (long long)n);
        return 1;
    }
    TH_E(c->e, pbl_exec_read(c->e, v, buf, (size_t)n * sizeof(float)));
    return 0;
}

static int out_shape_is(one_node *c, int32_t k, pbl_shape want)
{
    return th_shape_is("output shape", th_value_shape(c->g, c->out[k]), want);
}

static int64_t numel(pbl_shape s) { return pbl_shape_numel(&s); }

/* ---- fully_connected ------------------------------------------------------------------------- */

static int fc_case(th_rng *r, int with_bias)
{
    int64_t N = th_int(r, 1, 6), I = th_int(r, 1, 9), O = th_int(r, 1, 7);
    th_set_case("fully_connected %s bias x[%lld,%lld] w[%lld,%lld]", with_bias ? "with" : "without",
                (long long)N, (long long)I, (long long)O, (long long)I);
    in_spec in[3] = { { .shape = PBL_SHAPE(N, I) }, { .shape = PBL_SHAPE(O, I) }, { .shape = PBL_SHAPE(O) } };
    one_node c;
    if (one_build(&c, "fully_connected", in, with_bias ? 3 : 2, NULL, 0))
        return 1;
    float *x = th_falloc(N * I), *w = th_falloc(O * I), *b = th_falloc(O), *y = th_falloc(N * O);
    double *want = th_dalloc(N * O), *scale = th_dalloc(N * O);
    th_fill(r, x, N * I, -1, 1);
    th_fill(r, w, O * I, -1, 1);
    th_fill(r, b, O, -1, 1);
    int fails = one_run(&c, (const void *[]){ x, w, b });
    fails += out_shape_is(&c, 0, PBL_SHAPE(N, O));
    if (!fails)
        fails += read_value(&c, c.out[0], y, N * O);
    /* y[n, o] = Σ_i x[n, i] w[o, i] + b[o] */
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            double s = with_bias ? b[o] : 0, a = with_bias ? fabs(b[o]) : 0;
            for (int64_t i = 0; i < I; i++) {
                s += (double)x[n * I + i] * w[o * I + i];
                a += fabs((double)x[n * I + i] * w[o * I + i]);
            }
            want[n * O + o] = s;
            scale[n * O + o] = a;
        }
    if (!fails)
        fails += th_close("y", y, want, scale, N * O, 1e-6, 1e-5);
    free(x), free(w), free(b), free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static void test_fully_connected(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(101);
    int fails = 0;
    for (int rep = 0; rep < 4; rep++) {
        fails += fc_case(&r, 1);
        fails += fc_case(&r, 0);
    }
    assert_int_equal(fails, 0);
}

/* ---- matmul ---------------------------------------------------------------------------------- */

/* a: [B, m, k] (stored [B, k, m] when ta), b: [B, k, n] (stored [B, n, k] when tb) -> [B, m, n] */
static void ref_matmul(const float *a, const float *b, int64_t B, int64_t m, int64_t k, int64_t n,
                       int ta, int tb, double *c, double *scale)
{
    for (int64_t bt = 0; bt < B; bt++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, sa = 0;
                for (int64_t p = 0; p < k; p++) {
                    double av = ta ? a[bt * m * k + p * m + i] : a[bt * m * k + i * k + p];
                    double bv = tb ? b[bt * k * n + j * k + p] : b[bt * k * n + p * n + j];
                    s += av * bv;
                    sa += fabs(av * bv);
                }
                c[bt * m * n + i * n + j] = s;
                scale[bt * m * n + i * n + j] = sa;
            }
}

static int matmul_case(th_rng *r, int batched, int ta, int tb)
{
    int64_t B = batched ? th_int(r, 2, 3) : 1;
    int64_t m = th_int(r, 1, 6), k = th_int(r, 1, 8), n = th_int(r, 1, 6);
    th_set_case("matmul %s ta=%d tb=%d B=%lld m=%lld k=%lld n=%lld", batched ? "3-D" : "2-D", ta, tb,
                (long long)B, (long long)m, (long long)k, (long long)n);
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    in_spec in[2];
    memset(in, 0, sizeof in);
    in[0].shape = batched ? PBL_SHAPE(B, ar, ac) : PBL_SHAPE(ar, ac);
    in[1].shape = batched ? PBL_SHAPE(B, br, bc) : PBL_SHAPE(br, bc);
    pbl_attr attrs[] = { PBL_ATTR_INT("trans_a", ta), PBL_ATTR_INT("trans_b", tb) };
    one_node c;
    if (one_build(&c, "matmul", in, 2, attrs, 2))
        return 1;
    float *a = th_falloc(B * m * k), *b = th_falloc(B * k * n), *y = th_falloc(B * m * n);
    double *want = th_dalloc(B * m * n), *scale = th_dalloc(B * m * n);
    th_fill(r, a, B * m * k, -1, 1);
    th_fill(r, b, B * k * n, -1, 1);
    int fails = one_run(&c, (const void *[]){ a, b });
    fails += out_shape_is(&c, 0, batched ? PBL_SHAPE(B, m, n) : PBL_SHAPE(m, n));
    if (!fails)
        fails += read_value(&c, c.out[0], y, B * m * n);
    ref_matmul(a, b, B, m, k, n, ta, tb, want, scale);
    if (!fails)
        fails += th_close("c", y, want, scale, B * m * n, 1e-6, 1e-5);
    free(a), free(b), free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static void test_matmul(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(202);
    int fails = 0;
    for (int batched = 0; batched < 2; batched++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int rep = 0; rep < 2; rep++)
                    fails += matmul_case(&r, batched, ta, tb);
    assert_int_equal(fails, 0);
}

/* ---- add / sub / mul ------------------------------------------------------------------------- */

static double bin_ref(const char *op, double a, double b)
{
    if (strcmp(op, "add") == 0)
        return a + b;
    if (strcmp(op, "sub") == 0)
        return a - b;
    if (strcmp(op, "div") == 0)
        return a / b;
    return a * b;
}

static int binary_case(th_rng *r, const char *op, pbl_shape sa, pbl_shape sb)
{
    char ba[64], bb[64];
    th_set_case("%s a%s b%s", op, pbl_shape_str(&sa, ba, sizeof ba), pbl_shape_str(&sb, bb, sizeof bb));
    in_spec in[2] = { { .shape = sa }, { .shape = sb } };
    one_node c;
    if (one_build(&c, op, in, 2, NULL, 0))
        return 1;
    int64_t na = numel(sa), nb = numel(sb);
    float *a = th_falloc(na), *b = th_falloc(nb), *y = th_falloc(na);
    double *want = th_dalloc(na);
    th_fill(r, a, na, -2, 2);
    if (strcmp(op, "div") == 0)
        th_fill_away(r, b, nb, 0.25, 2); /* no division by (nearly) zero */
    else
        th_fill(r, b, nb, -2, 2);
    int fails = one_run(&c, (const void *[]){ a, b });
    fails += out_shape_is(&c, 0, sa);
    if (!fails)
        fails += read_value(&c, c.out[0], y, na);
    for (int64_t i = 0; i < na; i++)
        want[i] = bin_ref(op, a[i], b[th_bcast_index(&sa, &sb, i)]);
    if (!fails)
        fails += th_close("y", y, want, NULL, na, 1e-7, 1e-6);
    free(a), free(b), free(y), free(want);
    one_free(&c);
    return fails;
}

static void test_binary(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(303);
    const char *ops[] = { "add", "sub", "mul", "div" };
    int fails = 0;
    for (int o = 0; o < 4; o++) {
        int64_t N = th_int(&r, 1, 5), C = th_int(&r, 2, 7), B = th_int(&r, 2, 3);
        fails += binary_case(&r, ops[o], PBL_SHAPE(N, C), PBL_SHAPE(N, C));           /* equal */
        fails += binary_case(&r, ops[o], PBL_SHAPE(B, N, C), PBL_SHAPE(B, N, C));     /* equal 3-D */
        fails += binary_case(&r, ops[o], PBL_SHAPE(N, C), PBL_SHAPE(C));              /* bias */
        fails += binary_case(&r, ops[o], PBL_SHAPE(N, C), PBL_SHAPE(1, C));           /* [1,C] */
        fails += binary_case(&r, ops[o], PBL_SHAPE(B, N, C), PBL_SHAPE(N, 1));        /* 1s inside */
    }
    assert_int_equal(fails, 0);
}

/* ---- activations ----------------------------------------------------------------------------- */

static double ref_relu(double x) { return x > 0 ? x : 0; }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static int unary_case(th_rng *r, const char *op, double (*ref)(double), double atol, double rtol)
{
    int64_t N = th_int(r, 2, 6), C = th_int(r, 4, 9);
    th_set_case("%s x[%lld,%lld]", op, (long long)N, (long long)C);
    in_spec in[1] = { { .shape = PBL_SHAPE(N, C) } };
    one_node c;
    if (one_build(&c, op, in, 1, NULL, 0))
        return 1;
    float *x = th_falloc(N * C), *y = th_falloc(N * C);
    double *want = th_dalloc(N * C);
    th_fill(r, x, N * C, -4, 4);
    /* exact zero and far tails: naive formulas overflow there (tanh as (e^2x-1)/(e^2x+1)) */
    x[0] = 0.0f, x[1] = 30.0f, x[2] = -30.0f, x[3] = 1e-3f;
    int fails = one_run(&c, (const void *[]){ x });
    fails += out_shape_is(&c, 0, PBL_SHAPE(N, C));
    if (!fails)
        fails += read_value(&c, c.out[0], y, N * C);
    for (int64_t i = 0; i < N * C; i++)
        want[i] = ref(x[i]);
    if (!fails)
        fails += th_close("y", y, want, NULL, N * C, atol, rtol);
    free(x), free(y), free(want);
    one_free(&c);
    return fails;
}

static void test_activations(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(404);
    int fails = 0;
    for (int rep = 0; rep < 2; rep++) {
        fails += unary_case(&r, "relu", ref_relu, 0, 0); /* exact: max(x, 0) rounds nothing */
        fails += unary_case(&r, "sigmoid", ref_sigmoid, 1e-6, 1e-5);
        fails += unary_case(&r, "tanh", ref_tanh, 1e-6, 1e-5);
        fails += unary_case(&r, "gelu", ref_gelu, 1e-6, 1e-5);
    }
    assert_int_equal(fails, 0);
}

/* ---- softmax / log_softmax ------------------------------------------------------------------- */

/* Over the last dim of rows × C, with the max subtracted (double). */
static void ref_softmax(const float *x, int64_t rows, int64_t C, int log_form, double *y)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *xr = x + i * C;
        double mx = xr[0], s = 0;
        for (int64_t j = 1; j < C; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++)
            s += exp((double)xr[j] - mx);
        for (int64_t j = 0; j < C; j++)
            y[i * C + j] = log_form ? (double)xr[j] - mx - log(s) : exp((double)xr[j] - mx) / s;
    }
}

/* large: rows centred on +1000 and -1000 (naive exp overflows / underflows to 0/0). */
static int softmax_case(th_rng *r, const char *op, int rank3, int large)
{
    int64_t A = th_int(r, 2, 3), N = th_int(r, 2, 5), C = th_int(r, 3, 8);
    int64_t rows = rank3 ? A * N : N;
    pbl_shape s = rank3 ? PBL_SHAPE(A, N, C) : PBL_SHAPE(N, C);
    char bs[64];
    th_set_case("%s x%s%s", op, pbl_shape_str(&s, bs, sizeof bs), large ? " near +-1000" : "");
    in_spec in[1] = { { .shape = s } };
    one_node c;
    if (one_build(&c, op, in, 1, NULL, 0))
        return 1;
    float *x = th_falloc(rows * C), *y = th_falloc(rows * C);
    double *want = th_dalloc(rows * C);
    th_fill(r, x, rows * C, -3, 3);
    if (large)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < C; j++)
                x[i * C + j] += (i % 2) ? -1000.0f : 1000.0f;
    int fails = one_run(&c, (const void *[]){ x });
    fails += out_shape_is(&c, 0, s);
    if (!fails)
        fails += read_value(&c, c.out[0], y, rows * C);
    ref_softmax(x, rows, C, strcmp(op, "log_softmax") == 0, want);
    if (!fails)
        fails += th_close("y", y, want, NULL, rows * C, large ? 1e-4 : 1e-6, 1e-5);
    free(x), free(y), free(want);
    one_free(&c);
    return fails;
}

static void test_softmax(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(505);
    int fails = 0;
    const char *ops[] = { "softmax", "log_softmax" };
    for (int o = 0; o < 2; o++)
        for (int rank3 = 0; rank3 < 2; rank3++)
            for (int large = 0; large < 2; large++)
                fails += softmax_case(&r, ops[o], rank3, large);
    assert_int_equal(fails, 0);
}

/* ---- losses ---------------------------------------------------------------------------------- */

static int sce_case(th_rng *r, int large)
{
    int64_t N = th_int(r, 1, 6), C = th_int(r, 2, 9);
    th_set_case("softmax_cross_entropy logits[%lld,%lld]%s", (long long)N, (long long)C,
                large ? " near 1000" : "");
    in_spec in[2] = { { .shape = PBL_SHAPE(N, C) }, { PBL_SHAPE(N), PBL_I32, PBL_VALUE_LABEL } };
    one_node c;
    if (one_build(&c, "softmax_cross_entropy", in, 2, NULL, 0))
        return 1;
    float *x = th_falloc(N * C), loss = NAN;
    int32_t *lab = calloc((size_t)N, sizeof *lab);
    double *lsm = th_dalloc(N * C);
    th_fill(r, x, N * C, -3, 3);
    if (large)
        for (int64_t i = 0; i < N * C; i++)
            x[i] += 1000.0f;
    for (int64_t n = 0; n < N; n++)
        lab[n] = (int32_t)th_int(r, 0, C - 1);
    int fails = one_run(&c, (const void *[]){ x, lab });
    fails += out_shape_is(&c, 0, PBL_SCALAR);
    if (!fails)
        fails += read_value(&c, c.out[0], &loss, 1);
    /* loss = mean_n −log softmax(x[n])[label[n]] */
    ref_softmax(x, N, C, 1, lsm);
    double want = 0, scale = 0;
    for (int64_t n = 0; n < N; n++) {
        want -= lsm[n * C + lab[n]] / (double)N;
        scale += fabs(lsm[n * C + lab[n]]) / (double)N;
    }
    if (!fails)
        fails += th_close("loss", &loss, &want, &scale, 1, large ? 1e-4 : 1e-6, 1e-5);
    free(x), free(lab), free(lsm);
    one_free(&c);
    return fails;
}

static int mse_case(th_rng *r)
{
    int64_t N = th_int(r, 1, 6), C = th_int(r, 1, 7);
    th_set_case("mse_loss [%lld,%lld]", (long long)N, (long long)C);
    in_spec in[2] = { { .shape = PBL_SHAPE(N, C) }, { .shape = PBL_SHAPE(N, C) } };
    one_node c;
    if (one_build(&c, "mse_loss", in, 2, NULL, 0))
        return 1;
    float *p = th_falloc(N * C), *t = th_falloc(N * C), loss = NAN;
    th_fill(r, p, N * C, -2, 2);
    th_fill(r, t, N * C, -2, 2);
    int fails = one_run(&c, (const void *[]){ p, t });
    fails += out_shape_is(&c, 0, PBL_SCALAR);
    if (!fails)
        fails += read_value(&c, c.out[0], &loss, 1);
    double want = 0;
    for (int64_t i = 0; i < N * C; i++)
        want += ((double)p[i] - t[i]) * ((double)p[i] - t[i]) / (double)(N * C);
    if (!fails)
        fails += th_close("loss", &loss, &want, NULL, 1, 1e-7, 1e-5);
    free(p), free(t);
    one_free(&c);
    return fails;
}

static void test_losses(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(606);
    int fails = 0;
    for (int rep = 0; rep < 3; rep++) {
        fails += sce_case(&r, 0);
        fails += mse_case(&r);
    }
    fails += sce_case(&r, 1);
    assert_int_equal(fails, 0);
}

/* ---- sum / mean ------------------------------------------------------------------------------ */

/* axes: which of x's dims are reduced (n_axes 0: all). */
static int reduce_case(th_rng *r, const char *op, const int64_t *axes, int32_t n_axes, int keepdims)
{
    pbl_shape xs = PBL_SHAPE(th_int(r, 2, 4), th_int(r, 2, 4), th_int(r, 2, 5));
    int red[PBL_MAX_DIMS] = { 0 };
    for (int32_t d = 0; d < xs.ndim; d++)
        red[d] = n_axes == 0;
    for (int32_t a = 0; a < n_axes; a++)
        red[axes[a]] = 1;
    /* expected shape: reduced dims dropped, or kept as 1 */
    pbl_shape ys = { 0 };
    int64_t count = 1;
    for (int32_t d = 0; d < xs.ndim; d++) {
        if (red[d])
            count *= xs.dim[d];
        if (!red[d])
            ys.dim[ys.ndim++] = xs.dim[d];
        else if (keepdims)
            ys.dim[ys.ndim++] = 1;
    }
    char bx[64], by[64], ax[64] = "all (attribute left out)";
    if (n_axes > 0) {
        int at = snprintf(ax, sizeof ax, "{");
        for (int32_t a = 0; a < n_axes; a++)
            at += snprintf(ax + at, sizeof ax - (size_t)at, "%s%lld", a ? "," : "", (long long)axes[a]);
        snprintf(ax + at, sizeof ax - (size_t)at, "}");
    }
    th_set_case("%s x%s axes %s%s -> %s", op, pbl_shape_str(&xs, bx, sizeof bx), ax,
                keepdims ? " keepdims" : "", pbl_shape_str(&ys, by, sizeof by));
    /* axes = [] means all: the all-axes cases leave the attribute to its default */
    pbl_attr attrs[2] = { PBL_ATTR_INT("keepdims", keepdims), PBL_ATTR_INTS("axes", axes, n_axes) };
    in_spec in[1] = { { .shape = xs } };
    one_node c;
    if (one_build(&c, op, in, 1, attrs, n_axes ? 2 : 1))
        return 1;
    int64_t nx = numel(xs), ny = numel(ys);
    float *x = th_falloc(nx), *y = th_falloc(ny);
    double *want = th_dalloc(ny), *scale = th_dalloc(ny);
    th_fill(r, x, nx, -2, 2);
    int fails = one_run(&c, (const void *[]){ x });
    fails += out_shape_is(&c, 0, ys);
    if (!fails)
        fails += read_value(&c, c.out[0], y, ny);
    /* flat output index: x's index with reduced dims skipped (the same with keepdims) */
    for (int64_t i = 0; i < nx; i++) {
        int64_t rem = i, o = 0, stride = 1;
        for (int32_t d = xs.ndim - 1; d >= 0; d--) {
            int64_t cd = rem % xs.dim[d];
            rem /= xs.dim[d];
            if (!red[d]) {
                o += cd * stride;
                stride *= xs.dim[d];
            }
        }
        double div = strcmp(op, "mean") == 0 ? (double)count : 1.0;
        want[o] += x[i] / div;
        scale[o] += fabs(x[i]) / div;
    }
    if (!fails)
        fails += th_close("y", y, want, scale, ny, 1e-7, 1e-5);
    free(x), free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static void test_reductions(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(707);
    int fails = 0;
    const char *ops[] = { "sum", "mean" };
    const int64_t a0[] = { 0 }, a1[] = { 1 }, a2[] = { 2 }, a02[] = { 0, 2 };
    for (int o = 0; o < 2; o++) {
        fails += reduce_case(&r, ops[o], NULL, 0, 0);
        fails += reduce_case(&r, ops[o], NULL, 0, 1);
        fails += reduce_case(&r, ops[o], a0, 1, 0);
        fails += reduce_case(&r, ops[o], a1, 1, 0);
        fails += reduce_case(&r, ops[o], a1, 1, 1);
        fails += reduce_case(&r, ops[o], a2, 1, 0);
        fails += reduce_case(&r, ops[o], a2, 1, 1);
        fails += reduce_case(&r, ops[o], a02, 2, 0);
    }
    assert_int_equal(fails, 0);
}

/* ---- reshape, flatten, copy: data unchanged, shape as asked ---------------------------------- */

static int same_data_case(th_rng *r, const char *op, pbl_shape xs, const pbl_attr *attrs,
                          int32_t n_attrs, pbl_shape want_shape)
{
    in_spec in[1] = { { .shape = xs } };
    one_node c;
    if (one_build(&c, op, in, 1, attrs, n_attrs))
        return 1;
    int64_t n = numel(xs);
    float *x = th_falloc(n), *y = th_falloc(n);
    double *want = th_dalloc(n);
    th_fill(r, x, n, -5, 5);
    for (int64_t i = 0; i < n; i++)
        want[i] = x[i];
    int fails = out_shape_is(&c, 0, want_shape);
    fails += one_run(&c, (const void *[]){ x });
    if (!fails)
        fails += read_value(&c, c.out[0], y, n);
    if (!fails)
        fails += th_close("y", y, want, NULL, n, 0, 0);
    /* a second run with new data: catches a kernel-less alias that copied once at bind time */
    th_fill(r, x, n, -5, 5);
    for (int64_t i = 0; i < n; i++)
        want[i] = x[i];
    if (!fails)
        fails += one_run(&c, (const void *[]){ x });
    if (!fails)
        fails += read_value(&c, c.out[0], y, n);
    if (!fails)
        fails += th_close("y (second run)", y, want, NULL, n, 0, 0);
    free(x), free(y), free(want);
    one_free(&c);
    return fails;
}

static void test_reshape_flatten_copy(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(808);
    int fails = 0;
    th_set_case("reshape [2,3,4] -> [4,-1]");
    pbl_attr rs1[] = { TH_ATTR_INTS("shape", 4, -1) };
    fails += same_data_case(&r, "reshape", PBL_SHAPE(2, 3, 4), rs1, 1, PBL_SHAPE(4, 6));
    th_set_case("reshape [2,3,4] -> [-1]");
    pbl_attr rs2[] = { TH_ATTR_INTS("shape", -1) };
    fails += same_data_case(&r, "reshape", PBL_SHAPE(2, 3, 4), rs2, 1, PBL_SHAPE(24));
    th_set_case("reshape [6,4] -> [2,-1,3]");
    pbl_attr rs3[] = { TH_ATTR_INTS("shape", 2, -1, 3) };
    fails += same_data_case(&r, "reshape", PBL_SHAPE(6, 4), rs3, 1, PBL_SHAPE(2, 4, 3));
    th_set_case("reshape [5,3] -> [3,5]");
    pbl_attr rs4[] = { TH_ATTR_INTS("shape", 3, 5) };
    fails += same_data_case(&r, "reshape", PBL_SHAPE(5, 3), rs4, 1, PBL_SHAPE(3, 5));

    th_set_case("flatten [2,3,4] default axis");
    fails += same_data_case(&r, "flatten", PBL_SHAPE(2, 3, 4), NULL, 0, PBL_SHAPE(2, 12));
    th_set_case("flatten [2,3,4] axis 2");
    pbl_attr fl2[] = { PBL_ATTR_INT("axis", 2) };
    fails += same_data_case(&r, "flatten", PBL_SHAPE(2, 3, 4), fl2, 1, PBL_SHAPE(6, 4));
    th_set_case("flatten [2,3,4,5] axis 3");
    pbl_attr fl3[] = { PBL_ATTR_INT("axis", 3) };
    fails += same_data_case(&r, "flatten", PBL_SHAPE(2, 3, 4, 5), fl3, 1, PBL_SHAPE(24, 5));

    th_set_case("copy [3,7]");
    fails += same_data_case(&r, "copy", PBL_SHAPE(3, 7), NULL, 0, PBL_SHAPE(3, 7));
    th_set_case("copy []");
    fails += same_data_case(&r, "copy", PBL_SCALAR, NULL, 0, PBL_SCALAR);
    assert_int_equal(fails, 0);
}

/* ---- conv2d, pools ------------------------------------------------------------------------------ */

typedef struct win_case {
    int64_t N, C, H, W, Co, KH, KW, groups;
    int64_t stride[2], pad[4], dil[2];
    int     bias;
} win_case;

static int64_t win_out(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d)
{
    return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

/* conv2d against the definition: y[n,o,i,j] = b[o] + Σ_{c,u,v} x[n, g·C/G + c, i·s − p + u·d,
 * j·s − p + v·d] · w[o, c, u, v] over taps inside x (g = o's group). */
static int conv_case(th_rng *r, const win_case *k)
{
    int64_t OH = win_out(k->H, k->KH, k->stride[0], k->pad[0], k->pad[2], k->dil[0]);
    int64_t OW = win_out(k->W, k->KW, k->stride[1], k->pad[1], k->pad[3], k->dil[1]);
    int64_t Cg = k->C / k->groups, Cog = k->Co / k->groups;
    th_set_case("conv2d x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] groups %lld stride %lld,%lld pad %lld,%lld,%lld,%lld "
                "dilation %lld,%lld%s", (long long)k->N, (long long)k->C, (long long)k->H, (long long)k->W,
                (long long)k->Co, (long long)Cg, (long long)k->KH, (long long)k->KW, (long long)k->groups,
                (long long)k->stride[0], (long long)k->stride[1], (long long)k->pad[0], (long long)k->pad[1],
                (long long)k->pad[2], (long long)k->pad[3], (long long)k->dil[0], (long long)k->dil[1],
                k->bias ? " bias" : "");
    in_spec in[3] = { { .shape = PBL_SHAPE(k->N, k->C, k->H, k->W) }, { .shape = PBL_SHAPE(k->Co, Cg, k->KH, k->KW) },
                      { .shape = PBL_SHAPE(k->Co) } };
    pbl_attr at[] = { PBL_ATTR_INTS("stride", k->stride, 2), PBL_ATTR_INTS("pad", k->pad, 4),
                      PBL_ATTR_INTS("dilation", k->dil, 2), PBL_ATTR_INT("groups", k->groups) };
    one_node c;
    if (one_build(&c, "conv2d", in, k->bias ? 3 : 2, at, 4))
        return 1;
    int64_t nx = numel(in[0].shape), nw = numel(in[1].shape), ny = k->N * k->Co * OH * OW;
    float *x = th_falloc(nx), *w = th_falloc(nw), *b = th_falloc(k->Co), *y = th_falloc(ny);
    double *want = th_dalloc(ny), *scale = th_dalloc(ny);
    th_fill(r, x, nx, -1, 1);
    th_fill(r, w, nw, -1, 1);
    th_fill(r, b, k->Co, -1, 1);
    int fails = one_run(&c, (const void *[]){ x, w, b });
    fails += out_shape_is(&c, 0, PBL_SHAPE(k->N, k->Co, OH, OW));
    if (!fails)
        fails += read_value(&c, c.out[0], y, ny);
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t o = 0; o < k->Co; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    int64_t g = o / Cog, at_ = ((n * k->Co + o) * OH + i) * OW + j;
                    double s = k->bias ? b[o] : 0, a = k->bias ? fabs(b[o]) : 0;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t u = 0; u < k->KH; u++)
                            for (int64_t v = 0; v < k->KW; v++) {
                                int64_t ih = i * k->stride[0] - k->pad[0] + u * k->dil[0];
                                int64_t iw = j * k->stride[1] - k->pad[1] + v * k->dil[1];
                                if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W)
                                    continue;
                                double p = (double)x[((n * k->C + g * Cg + ci) * k->H + ih) * k->W + iw] *
                                           w[((o * Cg + ci) * k->KH + u) * k->KW + v];
                                s += p;
                                a += fabs(p);
                            }
                    want[at_] = s;
                    scale[at_] = a;
                }
    if (!fails)
        fails += th_close("y", y, want, scale, ny, 1e-6, 1e-5);
    free(x), free(w), free(b), free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static void test_conv2d(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1313);
    const win_case cases[] = {
        { 2, 3, 5, 6, 4, 3, 3, 1, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, 1 },   /* same padding */
        { 1, 4, 7, 7, 6, 3, 2, 2, { 2, 1 }, { 0, 1, 1, 0 }, { 1, 1 }, 1 },   /* groups, strides, asymmetric pads */
        { 2, 2, 8, 6, 3, 3, 3, 1, { 1, 2 }, { 2, 0, 2, 1 }, { 2, 1 }, 0 },   /* dilation, no bias */
        { 3, 5, 4, 3, 2, 1, 1, 1, { 1, 1 }, { 0, 0, 0, 0 }, { 1, 1 }, 1 },   /* 1x1: read x in place */
        { 1, 4, 5, 5, 4, 3, 3, 4, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, 0 },   /* depthwise */
    };
    int fails = 0;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        fails += conv_case(&r, &cases[i]);
    assert_int_equal(fails, 0);
}

/* max / average over the window's taps inside x (padding is neither a max candidate nor counted) */
static int pool_case(th_rng *r, const char *op, const win_case *k)
{
    int64_t OH = win_out(k->H, k->KH, k->stride[0], k->pad[0], k->pad[2], k->dil[0]);
    int64_t OW = win_out(k->W, k->KW, k->stride[1], k->pad[1], k->pad[3], k->dil[1]);
    th_set_case("%s x[%lld,%lld,%lld,%lld] kernel %lld,%lld stride %lld,%lld pad %lld,%lld,%lld,%lld dilation %lld,%lld",
                op, (long long)k->N, (long long)k->C, (long long)k->H, (long long)k->W, (long long)k->KH,
                (long long)k->KW, (long long)k->stride[0], (long long)k->stride[1], (long long)k->pad[0],
                (long long)k->pad[1], (long long)k->pad[2], (long long)k->pad[3], (long long)k->dil[0],
                (long long)k->dil[1]);
    int is_max = strcmp(op, "max_pool2d") == 0;
    in_spec in[1] = { { .shape = PBL_SHAPE(k->N, k->C, k->H, k->W) } };
    int64_t kern[2] = { k->KH, k->KW };
    pbl_attr at[] = { PBL_ATTR_INTS("kernel", kern, 2), PBL_ATTR_INTS("stride", k->stride, 2),
                      PBL_ATTR_INTS("pad", k->pad, 4), PBL_ATTR_INTS("dilation", k->dil, 2) };
    one_node c;
    if (one_build(&c, op, in, 1, at, 4))
        return 1;
    int64_t nx = numel(in[0].shape), ny = k->N * k->C * OH * OW;
    float *x = th_falloc(nx), *y = th_falloc(ny);
    double *want = th_dalloc(ny);
    th_fill(r, x, nx, -3, -1); /* all negative: a max that wrongly took a padding 0 shows */
    int fails = one_run(&c, (const void *[]){ x });
    fails += out_shape_is(&c, 0, PBL_SHAPE(k->N, k->C, OH, OW));
    if (!fails)
        fails += read_value(&c, c.out[0], y, ny);
    for (int64_t p = 0; p < k->N * k->C; p++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                double m = -INFINITY, s = 0;
                int cnt = 0;
                for (int64_t u = 0; u < k->KH; u++)
                    for (int64_t v = 0; v < k->KW; v++) {
                        int64_t ih = i * k->stride[0] - k->pad[0] + u * k->dil[0];
                        int64_t iw = j * k->stride[1] - k->pad[1] + v * k->dil[1];
                        if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W)
                            continue;
                        double t = x[(p * k->H + ih) * k->W + iw];
                        m = t > m ? t : m;
                        s += t;
                        cnt++;
                    }
                want[(p * OH + i) * OW + j] = is_max ? m : s / cnt;
            }
    if (!fails)
        fails += th_close("y", y, want, NULL, ny, 1e-7, 1e-6);
    free(x), free(y), free(want);
    one_free(&c);
    return fails;
}

static void test_pools(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1414);
    const win_case cases[] = {
        { 2, 3, 6, 6, 0, 2, 2, 1, { 2, 2 }, { 0, 0, 0, 0 }, { 1, 1 }, 0 },
        { 1, 2, 5, 7, 0, 3, 3, 1, { 1, 2 }, { 1, 1, 2, 0 }, { 1, 1 }, 0 },
        { 2, 1, 7, 6, 0, 2, 3, 1, { 2, 1 }, { 1, 0, 0, 2 }, { 2, 2 }, 0 },
    };
    int fails = 0;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        fails += pool_case(&r, "max_pool2d", &cases[i]);
        fails += pool_case(&r, "avg_pool2d", &cases[i]);
    }
    /* global average pooling: the mean of each (n, c) plane, spatial rank 2 and 1 */
    const pbl_shape shapes[] = { PBL_SHAPE(2, 3, 4, 5), PBL_SHAPE(3, 2, 7) };
    for (int i = 0; i < 2; i++) {
        char sx[64];
        th_set_case("global_avg_pool x%s", pbl_shape_str(&shapes[i], sx, sizeof sx));
        in_spec in[1] = { { .shape = shapes[i] } };
        one_node c;
        fails += one_build(&c, "global_avg_pool", in, 1, NULL, 0);
        int64_t nx = numel(shapes[i]), NC = shapes[i].dim[0] * shapes[i].dim[1], S = nx / NC;
        float *x = th_falloc(nx), *y = th_falloc(NC);
        double *want = th_dalloc(NC);
        th_fill(&r, x, nx, -2, 2);
        if (!fails)
            fails += one_run(&c, (const void *[]){ x });
        if (!fails)
            fails += read_value(&c, c.out[0], y, NC);
        for (int64_t p = 0; p < NC; p++) {
            for (int64_t q = 0; q < S; q++)
                want[p] += x[p * S + q];
            want[p] /= (double)S;
        }
        if (!fails)
            fails += th_close("y", y, want, NULL, NC, 1e-7, 1e-6);
        free(x), free(y), free(want);
        one_free(&c);
    }
    assert_int_equal(fails, 0);
}

/* max_pool2d_grad(dy, x, y) against its definition: each output's dy goes to ONE tap, the first
 * in window order (rows, then columns) whose x equals y. x takes 3 values only, so most windows
 * hold tied maxima: sending dy to every tied tap, or to the last one, fails. */
static int max_pool_grad_case(th_rng *r, const win_case *k)
{
    int64_t OH = win_out(k->H, k->KH, k->stride[0], k->pad[0], k->pad[2], k->dil[0]);
    int64_t OW = win_out(k->W, k->KW, k->stride[1], k->pad[1], k->pad[3], k->dil[1]);
    th_set_case("max_pool2d_grad x[%lld,%lld,%lld,%lld] kernel %lld,%lld stride %lld,%lld pad %lld,%lld,%lld,%lld "
                "dilation %lld,%lld", (long long)k->N, (long long)k->C, (long long)k->H, (long long)k->W,
                (long long)k->KH, (long long)k->KW, (long long)k->stride[0], (long long)k->stride[1],
                (long long)k->pad[0], (long long)k->pad[1], (long long)k->pad[2], (long long)k->pad[3],
                (long long)k->dil[0], (long long)k->dil[1]);
    int64_t NC = k->N * k->C, nx = NC * k->H * k->W, ny = NC * OH * OW;
    in_spec in[3] = { { .shape = PBL_SHAPE(k->N, k->C, OH, OW) }, { .shape = PBL_SHAPE(k->N, k->C, k->H, k->W) },
                      { .shape = PBL_SHAPE(k->N, k->C, OH, OW) } };
    int64_t kern[2] = { k->KH, k->KW };
    pbl_attr at[] = { PBL_ATTR_INTS("kernel", kern, 2), PBL_ATTR_INTS("stride", k->stride, 2),
                      PBL_ATTR_INTS("pad", k->pad, 4), PBL_ATTR_INTS("dilation", k->dil, 2) };
    one_node c;
    if (one_build(&c, "max_pool2d_grad", in, 3, at, 4))
        return 1;
    float *dy = th_falloc(ny), *x = th_falloc(nx), *y = th_falloc(ny), *dx = th_falloc(nx);
    double *want = th_dalloc(nx);
    th_fill(r, dy, ny, -1, 1);
    for (int64_t i = 0; i < nx; i++)
        x[i] = -1.0f - (float)th_int(r, 0, 2); /* -1, -2 or -3 */
    for (int64_t p = 0; p < NC; p++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                int64_t o = (p * OH + i) * OW + j, first = -1;
                float m = -INFINITY;
                for (int64_t u = 0; u < k->KH; u++)
                    for (int64_t v = 0; v < k->KW; v++) {
                        int64_t ih = i * k->stride[0] - k->pad[0] + u * k->dil[0];
                        int64_t iw = j * k->stride[1] - k->pad[1] + v * k->dil[1];
                        if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W)
                            continue;
                        int64_t at_ = (p * k->H + ih) * k->W + iw;
                        if (x[at_] > m)
                            m = x[at_], first = at_;
                    }
                y[o] = m;
                want[first] += dy[o];
            }
    int fails = one_run(&c, (const void *[]){ dy, x, y });
    if (!fails)
        fails += read_value(&c, c.out[0], dx, nx);
    if (!fails)
        fails += th_close("dx", dx, want, NULL, nx, 1e-7, 1e-6);
    free(dy), free(x), free(y), free(dx), free(want);
    one_free(&c);
    return fails;
}

static void test_max_pool_grad(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1515);
    const win_case cases[] = {
        { 2, 3, 6, 6, 0, 2, 2, 1, { 2, 2 }, { 0, 0, 0, 0 }, { 1, 1 }, 0 },   /* disjoint windows */
        { 1, 2, 5, 7, 0, 3, 3, 1, { 1, 2 }, { 1, 1, 2, 0 }, { 1, 1 }, 0 },   /* overlapping, padded */
        { 2, 1, 7, 6, 0, 2, 3, 1, { 2, 1 }, { 1, 0, 0, 2 }, { 2, 2 }, 0 },   /* dilated */
    };
    int fails = 0;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        fails += max_pool_grad_case(&r, &cases[i]);
    assert_int_equal(fails, 0);
}

/* ---- fully_connected_packed ------------------------------------------------------------------ */

/* w[N,K] packed as the op documents (wp[p, k, j] = w[16p + j, k], 0 past N); y against
 * x·wᵀ + b in double. M from 1 to 13 walks the kernel's 8-, 4-, 2- and 1-row blocks; N not a
 * multiple of 16 or 32 its masked and odd panels. */
static int fcp_case(th_rng *r, int64_t M, int64_t K, int64_t N, int with_bias)
{
    th_set_case("fully_connected_packed x[%lld,%lld] w[%lld,%lld]%s", (long long)M, (long long)K, (long long)N,
                (long long)K, with_bias ? " bias" : "");
    int64_t NB = (N + 15) / 16;
    in_spec in[3] = { { .shape = PBL_SHAPE(M, K) }, { .shape = PBL_SHAPE(NB, K, 16) }, { .shape = PBL_SHAPE(N) } };
    pbl_attr at[] = { PBL_ATTR_INT("out", N) };
    one_node c;
    if (one_build(&c, "fully_connected_packed", in, with_bias ? 3 : 2, at, 1))
        return 1;
    float *x = th_falloc(M * K), *w = th_falloc(N * K), *wp = th_falloc(NB * K * 16), *b = th_falloc(N);
    float *y = th_falloc(M * N);
    double *want = th_dalloc(M * N), *scale = th_dalloc(M * N);
    th_fill(r, x, M * K, -1, 1);
    th_fill(r, w, N * K, -1, 1);
    th_fill(r, b, N, -1, 1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            wp[((n / 16) * K + k) * 16 + n % 16] = w[n * K + k];
    int fails = one_run(&c, (const void *[]){ x, wp, b });
    fails += out_shape_is(&c, 0, PBL_SHAPE(M, N));
    if (!fails)
        fails += read_value(&c, c.out[0], y, M * N);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = with_bias ? b[n] : 0, a = with_bias ? fabs(b[n]) : 0;
            for (int64_t k = 0; k < K; k++) {
                s += (double)x[m * K + k] * w[n * K + k];
                a += fabs((double)x[m * K + k] * w[n * K + k]);
            }
            want[m * N + n] = s;
            scale[m * N + n] = a;
        }
    if (!fails)
        fails += th_close("y", y, want, scale, M * N, 1e-6, 1e-5);
    free(x), free(w), free(wp), free(b), free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static void test_fully_connected_packed(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1515);
    int fails = 0;
    for (int64_t M = 1; M <= 13; M++)
        fails += fcp_case(&r, M, 1 + M % 5 * 7, M % 2 ? 37 : 64, M % 3 != 0);
    fails += fcp_case(&r, 16, 33, 10, 1);  /* one masked panel */
    fails += fcp_case(&r, 11, 17, 20, 1);  /* a pair whose second panel is masked */
    fails += fcp_case(&r, 5, 9, 50, 0);
    fails += fcp_case(&r, 9, 20, 48, 0);   /* an odd number of full panels */
    assert_int_equal(fails, 0);
}

/* ---- concat ---------------------------------------------------------------------------------- */

/* Three inputs x_i: shape `base` with dim `axis` set to len[i]; y against an index-by-index
 * reference (exact: concat only moves floats). */
static int concat_case(th_rng *r, pbl_shape base, int64_t axis, const int64_t len[3])
{
    char sb[64];
    th_set_case("concat base %s axis %lld lens %lld,%lld,%lld", pbl_shape_str(&base, sb, sizeof sb),
                (long long)axis, (long long)len[0], (long long)len[1], (long long)len[2]);
    int64_t ax = axis < 0 ? axis + base.ndim : axis;
    in_spec in[3];
    float *x[3];
    pbl_shape ys = base;
    ys.dim[ax] = 0;
    for (int i = 0; i < 3; i++) {
        in[i] = (in_spec){ .shape = base };
        in[i].shape.dim[ax] = len[i];
        ys.dim[ax] += len[i];
        x[i] = th_falloc(numel(in[i].shape));
        th_fill(r, x[i], numel(in[i].shape), -3, 3);
    }
    pbl_attr at[] = { PBL_ATTR_INT("axis", axis) };
    one_node c;
    int fails = one_build(&c, "concat", in, 3, at, 1);
    float *y = th_falloc(numel(ys));
    double *want = th_dalloc(numel(ys));
    if (!fails)
        fails += one_run(&c, (const void *[]){ x[0], x[1], x[2] });
    if (!fails)
        fails += out_shape_is(&c, 0, ys);
    if (!fails)
        fails += read_value(&c, c.out[0], y, numel(ys));
    /* y[o, j, i] = x_k[o, j - start_k, i] for the input k whose range holds j */
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < base.ndim; d++) {
        if (d < ax)
            outer *= base.dim[d];
        if (d > ax)
            inner *= base.dim[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ys.dim[ax]; j++)
            for (int64_t i = 0; i < inner; i++) {
                int k = 0;
                int64_t jj = j;
                while (jj >= len[k])
                    jj -= len[k++];
                want[(o * ys.dim[ax] + j) * inner + i] = x[k][(o * len[k] + jj) * inner + i];
            }
    if (!fails)
        fails += th_close("y", y, want, NULL, numel(ys), 0, 0);
    for (int i = 0; i < 3; i++)
        free(x[i]);
    free(y), free(want);
    one_free(&c);
    return fails;
}

static void test_concat(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1212);
    int fails = 0;
    fails += concat_case(&r, PBL_SHAPE(2, 1, 3), 1, (int64_t[]){ 1, 4, 2 });
    fails += concat_case(&r, PBL_SHAPE(1, 3), 0, (int64_t[]){ 2, 1, 3 });
    fails += concat_case(&r, PBL_SHAPE(2, 3, 1), -1, (int64_t[]){ 3, 1, 2 });
    fails += concat_case(&r, PBL_SHAPE(5), 0, (int64_t[]){ 1, 1, 1 });
    /* mismatched non-axis dims are refused when the node is built */
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value a = pbl_input(g, "a", PBL_SHAPE(2, 3)), b = pbl_input(g, "b", PBL_SHAPE(3, 3));
    pbl_attr at[] = { PBL_ATTR_INT("axis", 1) };
    pbl_node_desc d = { .op = "concat", .inputs = (pbl_value[]){ a, b }, .n_inputs = 2, .attrs = at, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, NULL), PBL_ERR_SHAPE);
    pbl_graph_destroy(g);
    assert_int_equal(fails, 0);
}

/* ---- dropout --------------------------------------------------------------------------------- */

static int dropout_build(one_node *c, int64_t rows, int64_t cols, double p, int64_t seed)
{
    in_spec in[1] = { { .shape = PBL_SHAPE(rows, cols) } };
    pbl_attr attrs[] = { PBL_ATTR_FLOAT("p", p), PBL_ATTR_INT("seed", seed) };
    if (one_build(c, "dropout", in, 1, attrs, 2))
        return 1;
    if (c->n_out != 2) {
        fprintf(stderr, "FAIL [%s] dropout has %d outputs, want 2 (y, mask)\n", th_case, (int)c->n_out);
        return 1;
    }
    return out_shape_is(c, 0, PBL_SHAPE(rows, cols)) + out_shape_is(c, 1, PBL_SHAPE(rows, cols));
}

static void test_dropout_p0_is_identity(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(909);
    th_set_case("dropout p=0 [7,9]");
    one_node c;
    int fails = dropout_build(&c, 7, 9, 0.0, 3);
    float x[63], y[63], mask[63];
    double want[63];
    th_fill(&r, x, 63, -3, 3);
    for (int i = 0; i < 63; i++)
        want[i] = x[i];
    for (int run = 0; run < 2 && !fails; run++) {
        fails += one_run(&c, (const void *[]){ x });
        fails += read_value(&c, c.out[0], y, 63) + read_value(&c, c.out[1], mask, 63);
        if (!fails)
            fails += th_close("y (p=0 keeps everything, scale 1)", y, want, NULL, 63, 0, 0);
        for (int i = 0; i < 63 && !fails; i++)
            if (mask[i] != 1.0f) {
                fprintf(stderr, "FAIL [%s] run %d: mask[%d] = %g, want 1 (nothing dropped)\n",
                        th_case, run, i, (double)mask[i]);
                fails++;
            }
    }
    one_free(&c);
    assert_int_equal(fails, 0);
}

/* The training switch (a second input, a runtime scalar): 0 passes x through with mask 1
 * whatever p; switched back on, it drops exactly as the same dropout without a switch. */
static void test_dropout_training_switch(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(910);
    th_set_case("dropout p=0.5 [7,9] with a training switch");
    in_spec in[2] = { { .shape = PBL_SHAPE(7, 9) }, { .shape = PBL_SCALAR, .kind = PBL_VALUE_SCALAR } };
    pbl_attr attrs[] = { PBL_ATTR_FLOAT("p", 0.5), PBL_ATTR_INT("seed", 3) };
    one_node c, plain;
    int fails = one_build(&c, "dropout", in, 2, attrs, 2) + one_build(&plain, "dropout", in, 1, attrs, 2);
    float x[63], y[63], mask[63], py[63];
    double want[63];
    th_fill(&r, x, 63, -3, 3);
    for (int i = 0; i < 63; i++)
        want[i] = x[i];
    assert_int_equal(pbl_exec_set_scalar(c.e, "in1", 0.0), PBL_OK);
    fails += one_run(&c, (const void *[]){ x, NULL });
    fails += read_value(&c, c.out[0], y, 63) + read_value(&c, c.out[1], mask, 63);
    fails += th_close("y (evaluation: x)", y, want, NULL, 63, 0, 0);
    for (int i = 0; i < 63; i++)
        want[i] = 1.0;
    fails += th_close("mask (evaluation: 1)", mask, want, NULL, 63, 0, 0);
    /* on again: the same mask as a switchless dropout at the same run count (2) */
    assert_int_equal(pbl_exec_set_scalar(c.e, "in1", 1.0), PBL_OK);
    fails += one_run(&c, (const void *[]){ x, NULL });
    fails += one_run(&plain, (const void *[]){ x }) + one_run(&plain, (const void *[]){ x });
    fails += read_value(&c, c.out[0], y, 63) + read_value(&plain, plain.out[0], py, 63);
    for (int i = 0; i < 63; i++)
        want[i] = py[i];
    fails += th_close("y (training: as plain dropout)", y, want, NULL, 63, 0, 0);
    int dropped = 0;
    for (int i = 0; i < 63; i++)
        dropped += y[i] == 0.0f;
    if (dropped == 0) {
        fprintf(stderr, "FAIL [%s] training dropped nothing\n", th_case);
        fails++;
    }
    one_free(&c);
    one_free(&plain);
    assert_int_equal(fails, 0);
}

/* batch_norm with running statistics (pbl_batch_norm_switched) against naive formulas:
 * two training runs (the first copies the batch's mean and unbiased variance, the second
 * averages with momentum 0.25), then an evaluation run that normalises x with them and
 * leaves them, and outputs them as mean and inv_std. x: [4, 3, 2]. */
static void bn_batch_stats(const float *x, double *mean, double *var_b)
{
    for (int c = 0; c < 3; c++) {
        double s = 0, q = 0;
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 2; j++)
                s += x[(n * 3 + c) * 2 + j];
        mean[c] = s / 8;
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 2; j++)
                q += (x[(n * 3 + c) * 2 + j] - mean[c]) * (x[(n * 3 + c) * 2 + j] - mean[c]);
        var_b[c] = q / 8;
    }
}

static void test_batch_norm_running_stats(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(911);
    th_set_case("batch_norm with running statistics, x [4, 3, 2], momentum 0.25");
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4, 3, 2)), sc = pbl_input(g, "scale", PBL_SHAPE(3));
    pbl_value b = pbl_input(g, "bias", PBL_SHAPE(3)), t;
    assert_int_equal(pbl_graph_add_scalar(g, "training", 1.0, &t), PBL_OK);
    pbl_value y = pbl_batch_norm_switched(g, "bn", x, sc, b, t, 0.25, 1e-5);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "y", y), PBL_OK);
    pbl_exec *e;
    assert_int_equal(th_exec_new(g, &e, "batch_norm"), 0);
    float xs[24], scv[3] = { 1.5f, -0.5f, 2.0f }, bv[3] = { 0.1f, 0.2f, -0.3f }, rm[3], rv[3], cnt, yv[24];
    double want_m[3], want_v[3], m[3], vb[3], wy[24];
    assert_int_equal(pbl_exec_write(e, sc, scv, sizeof scv), PBL_OK);
    assert_int_equal(pbl_exec_write(e, b, bv, sizeof bv), PBL_OK);
    int fails = 0;
    for (int run = 0; run < 2; run++) {
        th_fill(&r, xs, 24, -2, 3);
        bn_batch_stats(xs, m, vb);
        for (int c = 0; c < 3; c++) {
            double unb = vb[c] * 8 / 7;
            want_m[c] = run == 0 ? m[c] : 0.75 * want_m[c] + 0.25 * m[c];
            want_v[c] = run == 0 ? unb : 0.75 * want_v[c] + 0.25 * unb;
        }
        assert_int_equal(pbl_exec_write(e, x, xs, sizeof xs), PBL_OK);
        assert_int_equal(pbl_exec_run(e), PBL_OK);
    }
    assert_int_equal(pbl_exec_read(e, pbl_graph_find_value(g, "bn/running_mean"), rm, sizeof rm), PBL_OK);
    assert_int_equal(pbl_exec_read(e, pbl_graph_find_value(g, "bn/running_var"), rv, sizeof rv), PBL_OK);
    assert_int_equal(pbl_exec_read(e, pbl_graph_find_value(g, "bn/count"), &cnt, sizeof cnt), PBL_OK);
    fails += th_close("running_mean after 2 runs", rm, want_m, NULL, 3, 1e-6, 1e-5);
    fails += th_close("running_var after 2 runs", rv, want_v, NULL, 3, 1e-6, 1e-4);
    double two = 2;
    fails += th_close("count", &cnt, &two, NULL, 1, 0, 0);
    /* evaluation */
    assert_int_equal(pbl_exec_set_scalar(e, "training", 0.0), PBL_OK);
    th_fill(&r, xs, 24, -2, 3);
    for (int i = 0; i < 24; i++) {
        int c = (i / 2) % 3;
        wy[i] = (xs[i] - rm[c]) / sqrt((double)rv[c] + 1e-5) * scv[c] + bv[c];
    }
    assert_int_equal(pbl_exec_write(e, x, xs, sizeof xs), PBL_OK);
    assert_int_equal(pbl_exec_run(e), PBL_OK);
    assert_int_equal(pbl_exec_read(e, y, yv, sizeof yv), PBL_OK);
    fails += th_close("y (evaluation: the running statistics)", yv, wy, NULL, 24, 1e-5, 1e-5);
    float rm2[3], cnt2;
    assert_int_equal(pbl_exec_read(e, pbl_graph_find_value(g, "bn/running_mean"), rm2, sizeof rm2), PBL_OK);
    assert_int_equal(pbl_exec_read(e, pbl_graph_find_value(g, "bn/count"), &cnt2, sizeof cnt2), PBL_OK);
    assert_memory_equal(rm, rm2, sizeof rm);
    assert_true(cnt2 == 2.0f);
    /* building errors: no name, no switch, a rank-1 x; the graph is left as it was */
    int32_t nv = pbl_graph_value_count(g);
    pbl_graph_build_reset(g);
    assert_int_equal(pbl_batch_norm_switched(g, NULL, x, sc, b, t, 0.1, 1e-5), PBL_NONE);
    pbl_graph_build_reset(g);
    assert_int_equal(pbl_batch_norm_switched(g, "bn2", x, sc, b, PBL_NONE, 0.1, 1e-5), PBL_NONE);
    pbl_graph_build_reset(g);
    assert_int_equal(pbl_batch_norm_switched(g, "bn3", x, sc, b, t, 0.0, 1e-5), PBL_NONE); /* momentum 0 */
    assert_int_equal(pbl_graph_build_status(g), PBL_ERR_ATTR);
    assert_int_equal(pbl_graph_value_count(g), nv);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    assert_int_equal(fails, 0);
}

enum { DR = 20, DC = 50, DN = DR * DC };

/* Checks one p=0.5 run: each y is 0 or 2x, the mask is nonzero exactly where y is kept and
 * holds one value there (1, or the 2 = 1/(1-p) scale: the header leaves that open), and about
 * half is kept (binomial(1000, 0.5): sd 15.8, so [400, 600] is over 6 sd). */
static int dropout_half_check(const float *x, const float *y, const float *mask, const char *run)
{
    int kept = 0, fails = 0;
    float mask_kept = 0;
    for (int i = 0; i < DN; i++) {
        int k = y[i] != 0.0f;
        kept += k;
        if (k && fabsf(y[i] - 2.0f * x[i]) > 1e-6f * fabsf(2.0f * x[i])) {
            fprintf(stderr, "FAIL [%s] %s: y[%d] = %.9g, want 0 or 2x = %.9g\n", th_case, run, i,
                    (double)y[i], 2.0 * x[i]);
            return 1;
        }
        if ((mask[i] != 0.0f) != k) {
            fprintf(stderr, "FAIL [%s] %s: mask[%d] = %g but y[%d] = %g (x = %g)\n", th_case, run,
                    i, (double)mask[i], i, (double)y[i], (double)x[i]);
            return 1;
        }
        if (k && mask_kept == 0)
            mask_kept = mask[i];
        if (k && mask[i] != mask_kept) {
            fprintf(stderr, "FAIL [%s] %s: mask holds both %g and %g on kept elements\n", th_case,
                    run, (double)mask_kept, (double)mask[i]);
            return 1;
        }
    }
    if (mask_kept != 0 && mask_kept != 1.0f && mask_kept != 2.0f) {
        fprintf(stderr, "FAIL [%s] %s: kept mask value %g, want 1 or 1/(1-p) = 2\n", th_case, run,
                (double)mask_kept);
        fails++;
    }
    if (kept < 400 || kept > 600) {
        fprintf(stderr, "FAIL [%s] %s: kept %d of %d, want about half (400..600)\n", th_case, run,
                kept, DN);
        fails++;
    }
    return fails;
}

static int count_diff(const float *a, const float *b, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

static void test_dropout_half(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(910);
    static float x[DN], y[DN], m1[DN], m2[DN], mb[DN], ms[DN];
    th_fill_away(&r, x, DN, 0.5, 1.5); /* nonzero, so y == 0 means dropped */
    th_set_case("dropout p=0.5 [%d,%d] seed 42", DR, DC);
    one_node a, b, s;
    int fails = dropout_build(&a, DR, DC, 0.5, 42);
    fails += dropout_build(&b, DR, DC, 0.5, 42);
    fails += dropout_build(&s, DR, DC, 0.5, 43);
    if (!fails) {
        /* executor a, first run */
        fails += one_run(&a, (const void *[]){ x });
        fails += read_value(&a, a.out[0], y, DN) + read_value(&a, a.out[1], m1, DN);
        if (!fails)
            fails += dropout_half_check(x, y, m1, "exec a run 1");
        /* another executor, same seed, same run counter: the same mask */
        fails += one_run(&b, (const void *[]){ x });
        fails += read_value(&b, b.out[1], mb, DN);
        if (!fails && count_diff(m1, mb, DN) != 0) {
            fprintf(stderr, "FAIL [%s] same seed and run counter, two executors: masks differ in "
                            "%d of %d elements\n", th_case, count_diff(m1, mb, DN), DN);
            fails++;
        }
        /* the next run of a: a different mask, still a valid one */
        fails += one_run(&a, (const void *[]){ x });
        fails += read_value(&a, a.out[0], y, DN) + read_value(&a, a.out[1], m2, DN);
        if (!fails)
            fails += dropout_half_check(x, y, m2, "exec a run 2");
        if (!fails && count_diff(m1, m2, DN) < DN / 10) {
            fprintf(stderr, "FAIL [%s] run 2's mask differs from run 1's in only %d of %d elements "
                            "(independent masks differ in about half)\n", th_case,
                    count_diff(m1, m2, DN), DN);
            fails++;
        }
        if (pbl_exec_run_count(a.e) != 2) {
            fprintf(stderr, "FAIL [%s] run count %llu after 2 runs\n", th_case,
                    (unsigned long long)pbl_exec_run_count(a.e));
            fails++;
        }
        /* another seed: another mask */
        fails += one_run(&s, (const void *[]){ x });
        fails += read_value(&s, s.out[1], ms, DN);
        if (!fails && count_diff(m1, ms, DN) < DN / 10) {
            fprintf(stderr, "FAIL [%s] seed 43's mask differs from seed 42's in only %d of %d\n",
                    th_case, count_diff(m1, ms, DN), DN);
            fails++;
        }
    }
    one_free(&a), one_free(&b), one_free(&s);
    assert_int_equal(fails, 0);
}

/* ---- scale, fill, broadcast_to, sum_to, add_n ------------------------------------------------ */

static int scale_case(th_rng *r, int with_attr, double alpha)
{
    th_set_case("scale alpha=%g%s", alpha, with_attr ? "" : " (default)");
    in_spec in[1] = { { .shape = PBL_SHAPE(4, 5) } };
    pbl_attr attrs[] = { PBL_ATTR_FLOAT("alpha", alpha) };
    one_node c;
    if (one_build(&c, "scale", in, 1, attrs, with_attr ? 1 : 0))
        return 1;
    float x[20], y[20];
    double want[20];
    th_fill(r, x, 20, -3, 3);
    for (int i = 0; i < 20; i++)
        want[i] = alpha * x[i];
    int fails = one_run(&c, (const void *[]){ x });
    fails += out_shape_is(&c, 0, PBL_SHAPE(4, 5));
    if (!fails)
        fails += read_value(&c, c.out[0], y, 20);
    if (!fails)
        fails += th_close("y", y, want, NULL, 20, 1e-7, 1e-6);
    one_free(&c);
    return fails;
}

static int fill_case(const pbl_attr *attrs, int32_t n_attrs, pbl_shape want_shape, double value)
{
    one_node c;
    if (one_build(&c, "fill", NULL, 0, attrs, n_attrs))
        return 1;
    int64_t n = numel(want_shape);
    float *y = th_falloc(n);
    double *want = th_dalloc(n);
    for (int64_t i = 0; i < n; i++)
        want[i] = (float)value;
    int fails = out_shape_is(&c, 0, want_shape);
    fails += one_run(&c, NULL);
    if (!fails)
        fails += read_value(&c, c.out[0], y, n);
    if (!fails)
        fails += th_close("y", y, want, NULL, n, 0, 0);
    free(y), free(want);
    one_free(&c);
    return fails;
}

/* broadcast_to: y[i] = x[bcast(i)]; sum_to: y[j] = Σ_{i: bcast(i) = j} x[i]. */
static int bcast_case(th_rng *r, const char *op, pbl_shape xs, pbl_shape ys)
{
    char bx[64], by[64];
    th_set_case("%s %s -> %s", op, pbl_shape_str(&xs, bx, sizeof bx), pbl_shape_str(&ys, by, sizeof by));
    int to = strcmp(op, "broadcast_to") == 0;
    pbl_attr attrs[1] = { PBL_ATTR_INTS("shape", ys.dim, ys.ndim) };
    in_spec in[1] = { { .shape = xs } };
    one_node c;
    if (one_build(&c, op, in, 1, attrs, 1))
        return 1;
    int64_t nx = numel(xs), ny = numel(ys);
    float *x = th_falloc(nx), *y = th_falloc(ny);
    double *want = th_dalloc(ny), *scale = th_dalloc(ny);
    th_fill(r, x, nx, -2, 2);
    if (to)
        for (int64_t i = 0; i < ny; i++) {
            want[i] = x[th_bcast_index(&ys, &xs, i)];
            scale[i] = fabs(want[i]);
        }
    else
        for (int64_t i = 0; i < nx; i++) {
            want[th_bcast_index(&xs, &ys, i)] += x[i];
            scale[th_bcast_index(&xs, &ys, i)] += fabs(x[i]);
        }
    int fails = one_run(&c, (const void *[]){ x });
    fails += out_shape_is(&c, 0, ys);
    if (!fails)
        fails += read_value(&c, c.out[0], y, ny);
    if (!fails)
        fails += th_close("y", y, want, scale, ny, to ? 0 : 1e-7, to ? 0 : 1e-5);
    free(x), free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static int add_n_case(th_rng *r, int32_t k)
{
    int64_t N = th_int(r, 1, 4), C = th_int(r, 1, 6);
    th_set_case("add_n of %d [%lld,%lld]", (int)k, (long long)N, (long long)C);
    in_spec in[16];
    memset(in, 0, sizeof in);
    for (int32_t i = 0; i < k; i++)
        in[i].shape = PBL_SHAPE(N, C);
    one_node c;
    if (one_build(&c, "add_n", in, k, NULL, 0))
        return 1;
    float *x[16], *y = th_falloc(N * C);
    double *want = th_dalloc(N * C), *scale = th_dalloc(N * C);
    for (int32_t i = 0; i < k; i++) {
        x[i] = th_falloc(N * C);
        th_fill(r, x[i], N * C, -2, 2);
        for (int64_t j = 0; j < N * C; j++)
            want[j] += x[i][j], scale[j] += fabs(x[i][j]);
    }
    int fails = one_run(&c, (const void *const *)x);
    fails += out_shape_is(&c, 0, PBL_SHAPE(N, C));
    if (!fails)
        fails += read_value(&c, c.out[0], y, N * C);
    if (!fails)
        fails += th_close("y", y, want, scale, N * C, 1e-7, 1e-5);
    for (int32_t i = 0; i < k; i++)
        free(x[i]);
    free(y), free(want), free(scale);
    one_free(&c);
    return fails;
}

static void test_scale_fill(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1001);
    int fails = scale_case(&r, 1, -2.5) + scale_case(&r, 1, 0.125) + scale_case(&r, 0, 1.0);

    th_set_case("fill [2,3] value 2.5");
    pbl_attr f1[] = { TH_ATTR_INTS("shape", 2, 3), PBL_ATTR_FLOAT("value", 2.5) };
    fails += fill_case(f1, 2, PBL_SHAPE(2, 3), 2.5);
    th_set_case("fill [] value -1.25");
    pbl_attr f2[] = { PBL_ATTR_FLOAT("value", -1.25) };
    fails += fill_case(f2, 1, PBL_SCALAR, -1.25);
    th_set_case("fill [4] default value 0");
    pbl_attr f3[] = { TH_ATTR_INTS("shape", 4) };
    fails += fill_case(f3, 1, PBL_SHAPE(4), 0.0);
    assert_int_equal(fails, 0);
}

static void test_broadcast_to_sum_to(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1002);
    int fails = 0;
    int64_t N = th_int(&r, 2, 5), C = th_int(&r, 2, 6), B = th_int(&r, 2, 3);
    fails += bcast_case(&r, "broadcast_to", PBL_SHAPE(C), PBL_SHAPE(N, C));
    fails += bcast_case(&r, "broadcast_to", PBL_SHAPE(1, C), PBL_SHAPE(N, C));
    fails += bcast_case(&r, "broadcast_to", PBL_SHAPE(N, 1), PBL_SHAPE(N, C));
    fails += bcast_case(&r, "broadcast_to", PBL_SHAPE(N, 1), PBL_SHAPE(B, N, C));
    fails += bcast_case(&r, "broadcast_to", PBL_SCALAR, PBL_SHAPE(N, C));
    fails += bcast_case(&r, "sum_to", PBL_SHAPE(N, C), PBL_SHAPE(C));
    fails += bcast_case(&r, "sum_to", PBL_SHAPE(N, C), PBL_SHAPE(1, C));
    fails += bcast_case(&r, "sum_to", PBL_SHAPE(N, C), PBL_SHAPE(N, 1));
    fails += bcast_case(&r, "sum_to", PBL_SHAPE(B, N, C), PBL_SHAPE(N, C));
    fails += bcast_case(&r, "sum_to", PBL_SHAPE(B, N, C), PBL_SHAPE(N, 1));
    fails += bcast_case(&r, "sum_to", PBL_SHAPE(N, C), PBL_SCALAR);
    assert_int_equal(fails, 0);
}

static void test_add_n(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1003);
    int fails = add_n_case(&r, 2) + add_n_case(&r, 3) + add_n_case(&r, 16);
    assert_int_equal(fails, 0);
}

/* ---- optimizer updates ----------------------------------------------------------------------- */
/*
 * Two steps each, with different gradients, against the standard formulas (double):
 *   every optimizer: g ← g + wd·w
 *   sgd:             w ← w − lr·g
 *   sgd_momentum:    m ← μ·m + g;  w ← w − lr·m
 *   adam:            t ← t + 1;  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
 *                    w ← w − lr·m̂ / (√v̂ + ε),  m̂ = m/(1−β1^t), v̂ = v/(1−β2^t)
 *   adamw:           as adam with g undecayed, and w ← w·(1 − lr·wd) before the step
 * With runtime scalars (the "scalars" mask), lr and wd come from scalar variables the test
 * sets with pbl_exec_set_scalar, changed between the steps, and (mask bit 4) Adam's step
 * from a scalar set to 3 and 7 (t still counts 1, 2).
 * w is a parameter written once, g an input written each step, and m, v, t zero-filled state,
 * so the second step reads what the first wrote in place. The updated w is read both through
 * the node's output w' and through w itself (w' is w's storage).
 */

enum { OR = 3, OC = 4, ON = OR * OC };

typedef struct optim_cfg {
    const char *op;
    double lr, mom, b1, b2, eps, wd;
    int    set_hyper; /* 0: leave momentum/beta/eps to the op's defaults */
    int    decoupled; /* adam: AdamW */
    int    scalars;   /* the op's "scalars" mask: 1 lr, 2 wd, 4 step (adam) */
} optim_cfg;

static int optim_case(th_rng *r, const optim_cfg *o)
{
    th_set_case("%s lr=%g mom=%g b1=%g b2=%g eps=%g wd=%g decoupled=%d scalars=%d%s", o->op, o->lr, o->mom, o->b1,
                o->b2, o->eps, o->wd, o->decoupled, o->scalars, o->set_hyper ? "" : " (defaults)");
    int adam = strcmp(o->op, "adam") == 0, mom = strcmp(o->op, "sgd_momentum") == 0;
    in_spec in[8] = { { PBL_SHAPE(OR, OC), PBL_F32, PBL_VALUE_PARAM },
                      { PBL_SHAPE(OR, OC), PBL_F32, PBL_VALUE_INPUT },
                      { PBL_SHAPE(OR, OC), PBL_F32, PBL_VALUE_STATE },
                      { PBL_SHAPE(OR, OC), PBL_F32, PBL_VALUE_STATE },
                      { PBL_SHAPE(1), PBL_F32, PBL_VALUE_STATE } };
    int32_t n_in = adam ? 5 : mom ? 3 : 2, base = n_in;
    for (int b = 1; b <= 4; b <<= 1)
        if (o->scalars & b)
            in[n_in++] = (in_spec){ PBL_SCALAR, PBL_F32, PBL_VALUE_SCALAR };
    pbl_attr attrs[8];
    int32_t na = 0;
    if (!(o->scalars & 1))
        attrs[na++] = PBL_ATTR_FLOAT("lr", o->lr);
    if (o->wd != 0 && !(o->scalars & 2))
        attrs[na++] = PBL_ATTR_FLOAT("weight_decay", o->wd);
    if (o->scalars)
        attrs[na++] = PBL_ATTR_INT("scalars", o->scalars);
    if (o->decoupled)
        attrs[na++] = PBL_ATTR_INT("decoupled", 1);
    if (o->set_hyper && mom)
        attrs[na++] = PBL_ATTR_FLOAT("momentum", o->mom);
    if (o->set_hyper && adam) {
        attrs[na++] = PBL_ATTR_FLOAT("beta1", o->b1);
        attrs[na++] = PBL_ATTR_FLOAT("beta2", o->b2);
        attrs[na++] = PBL_ATTR_FLOAT("eps", o->eps);
    }
    one_node c;
    if (one_build(&c, o->op, in, n_in, attrs, na))
        return 1;
    int32_t want_out = adam ? 4 : mom ? 2 : 1; /* w'; w', m'; w', m', v', t' */
    if (c.n_out != want_out) {
        fprintf(stderr, "FAIL [%s] %d outputs, want %d\n", th_case, (int)c.n_out, (int)want_out);
        one_free(&c);
        return 1;
    }
    float w0[ON], g[ON], w[ON], m[ON], v[ON], t = -1;
    double rw[ON], rm[ON] = { 0 }, rv[ON] = { 0 }, rt = 0;
    /* adam with a large eps relative to √v̂ (|g| ~ 0.01..0.05, ε = 1e-3) makes ε's place matter */
    double gmax = adam && o->set_hyper ? 0.05 : 1.0;
    th_fill(r, w0, ON, -1, 1);
    for (int i = 0; i < ON; i++)
        rw[i] = w0[i];
    int fails = 0;
    TH_E(c.e, pbl_exec_write(c.e, c.in[0], w0, sizeof w0));
    for (int step = 1; step <= 2 && !fails; step++) {
        th_fill_away(r, g, ON, gmax / 5, gmax);
        rt += 1;
        /* with scalars, the second step runs at other values: nothing re-planned */
        double lr = o->scalars & 1 ? o->lr * step : o->lr, wd = o->scalars & 2 ? o->wd / step : o->wd;
        double bc_step = o->scalars & 4 ? 3 + 4 * (step - 1) : rt;
        for (int b = 1, k = base; b <= 4; b <<= 1) {
            if (!(o->scalars & b))
                continue;
            char name[16];
            snprintf(name, sizeof name, "in%d", k++);
            TH_E(c.e, pbl_exec_set_scalar(c.e, name, b == 1 ? lr : b == 2 ? wd : bc_step));
        }
        for (int i = 0; i < ON; i++) {
            double gi = g[i] + (o->decoupled ? 0 : wd) * rw[i];
            if (adam) {
                rm[i] = o->b1 * rm[i] + (1 - o->b1) * gi;
                rv[i] = o->b2 * rv[i] + (1 - o->b2) * gi * gi;
                double mh = rm[i] / (1 - pow(o->b1, bc_step)), vh = rv[i] / (1 - pow(o->b2, bc_step));
                if (o->decoupled)
                    rw[i] *= 1 - lr * wd;
                rw[i] -= lr * mh / (sqrt(vh) + o->eps);
            } else if (mom) {
                rm[i] = o->mom * rm[i] + gi;
                rw[i] -= lr * rm[i];
            } else {
                rw[i] -= lr * gi;
            }
        }
        fails += one_run(&c, (const void *[]){ NULL, g, NULL, NULL, NULL, NULL, NULL, NULL }); /* m, v, t: state */
        char what[64];
        snprintf(what, sizeof what, "step %d: w' (output 0)", step);
        if (!fails)
            fails += read_value(&c, c.out[0], w, ON) + th_close(what, w, rw, NULL, ON, 1e-6, 1e-5);
        snprintf(what, sizeof what, "step %d: w read through the variable", step);
        if (!fails)
            fails += read_value(&c, c.in[0], w, ON) + th_close(what, w, rw, NULL, ON, 1e-6, 1e-5);
        if (!fails && (mom || adam)) {
            snprintf(what, sizeof what, "step %d: m' (output 1)", step);
            fails += read_value(&c, c.out[1], m, ON) + th_close(what, m, rm, NULL, ON, 1e-7, 1e-5);
        }
        if (!fails && adam) {
            snprintf(what, sizeof what, "step %d: v' (output 2)", step);
            fails += read_value(&c, c.out[2], v, ON) + th_close(what, v, rv, NULL, ON, 1e-9, 1e-5);
            snprintf(what, sizeof what, "step %d: t' (output 3)", step);
            fails += read_value(&c, c.out[3], &t, 1) + th_close(what, &t, &rt, NULL, 1, 0, 0);
        }
    }
    one_free(&c);
    return fails;
}

static void test_sgd(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1101);
    optim_cfg a = { .op = "sgd", .lr = 0.1 };
    optim_cfg b = { .op = "sgd", .lr = 0.05, .wd = 0.1 };
    assert_int_equal(optim_case(&r, &a) + optim_case(&r, &b), 0);
}

static void test_sgd_momentum(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1102);
    optim_cfg a = { .op = "sgd_momentum", .lr = 0.1, .mom = 0.9 };                    /* default μ */
    optim_cfg b = { .op = "sgd_momentum", .lr = 0.05, .mom = 0.5, .wd = 0.1, .set_hyper = 1 };
    assert_int_equal(optim_case(&r, &a) + optim_case(&r, &b), 0);
}

static void test_adam(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1103);
    optim_cfg a = { .op = "adam", .lr = 0.1, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8 };     /* defaults */
    optim_cfg b = { .op = "adam", .lr = 0.05, .b1 = 0.8, .b2 = 0.99, .eps = 1e-3, .wd = 0.1,
                    .set_hyper = 1 };
    assert_int_equal(optim_case(&r, &a) + optim_case(&r, &b), 0);
}

static void test_adamw_and_runtime_scalars(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1104);
    optim_cfg cases[] = {
        { .op = "adam", .lr = 0.05, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.1, .decoupled = 1 },
        { .op = "adam", .lr = 0.05, .b1 = 0.8, .b2 = 0.99, .eps = 1e-3, .wd = 0.2, .set_hyper = 1, .decoupled = 1,
          .scalars = 7 },
        { .op = "adam", .lr = 0.02, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.1, .scalars = 1 },
        { .op = "sgd", .lr = 0.1, .wd = 0.1, .scalars = 3 },
        { .op = "sgd", .lr = 0.1, .wd = 0.1, .scalars = 2 },
        { .op = "sgd_momentum", .lr = 0.05, .mom = 0.5, .wd = 0.1, .set_hyper = 1, .scalars = 1 },
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fails += optim_case(&r, &cases[i]);
    assert_int_equal(fails, 0);
}

/* ---- i32 add, sub, mul ----------------------------------------------------------------------- */
/* b [3] broadcast over a [2, 3], wrapping on overflow like ONNX's integer ops; mixed dtypes are
 * refused, and i32 div is not offered (ONNX's integer division is not the float op). */
static void test_int_binary(void **state)
{
    (void)state;
    const char *ops[3] = { "add", "sub", "mul" };
    int32_t a[6] = { 1, -2, 3, INT32_MAX, INT32_MIN, 7 }, b[3] = { 10, 1, -3 };
    for (int k = 0; k < 3; k++) {
        in_spec in[2] = { { .shape = PBL_SHAPE(2, 3), .dtype = PBL_I32 }, { .shape = PBL_SHAPE(3), .dtype = PBL_I32 } };
        one_node c;
        th_set_case("i32 %s", ops[k]);
        assert_int_equal(one_build(&c, ops[k], in, 2, NULL, 0), 0);
        assert_int_equal(one_run(&c, (const void *[]){ a, b }), 0);
        int32_t y[6];
        assert_int_equal(pbl_exec_read(c.e, c.out[0], y, sizeof y), PBL_OK);
        for (int i = 0; i < 6; i++) {
            uint32_t u = (uint32_t)a[i], v = (uint32_t)b[i % 3];
            int32_t want = (int32_t)(k == 0 ? u + v : k == 1 ? u - v : u * v);
            assert_int_equal(y[i], want);
        }
        one_free(&c);
    }
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x, f, z;
    assert_int_equal(pbl_graph_add_variable(g, "x", PBL_VALUE_INPUT, PBL_I32, PBL_SHAPE(3), &x), PBL_OK);
    assert_int_equal(pbl_graph_add_variable(g, "f", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(3), &f), PBL_OK);
    pbl_node_desc mixed = { .op = "add", .name = "mixed", .inputs = (pbl_value[]){ x, f }, .n_inputs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &mixed, NULL, &z), PBL_ERR_DTYPE);
    assert_non_null(strstr(pbl_graph_errmsg(g), "both must be f32, or both i32"));
    pbl_node_desc idiv = { .op = "div", .name = "idiv", .inputs = (pbl_value[]){ x, x }, .n_inputs = 2 };
    assert_int_equal(pbl_graph_add_node(g, &idiv, NULL, &z), PBL_ERR_DTYPE);
    pbl_graph_destroy(g);
}

/* ---- clipping by global norm ---------------------------------------------------------------- */
/* global_norm over three tensors against sqrt(Σ x²) in double; clip_by_norm scales by
 * min(1, max_norm / (norm + 1e-6)) both below and above the limit. */
static void test_global_norm_and_clip(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(1105);
    in_spec in[3] = { { .shape = PBL_SHAPE(3, 4) }, { .shape = PBL_SHAPE(5) }, { .shape = PBL_SCALAR } };
    one_node c;
    th_set_case("global_norm of [3, 4], [5], []");
    assert_int_equal(one_build(&c, "global_norm", in, 3, NULL, 0), 0);
    float a[12], b[5], d[1], got;
    th_fill(&r, a, 12, -2, 2);
    th_fill(&r, b, 5, -2, 2);
    d[0] = 3.0f;
    double want = 0;
    for (int i = 0; i < 12; i++)
        want += (double)a[i] * a[i];
    for (int i = 0; i < 5; i++)
        want += (double)b[i] * b[i];
    want = sqrt(want + 9.0);
    int fails = one_run(&c, (const void *[]){ a, b, d });
    fails += read_value(&c, c.out[0], &got, 1) + th_close("norm", &got, &want, NULL, 1, 0, 1e-6);
    one_free(&c);
    /* long inputs that end mid-lane and mid-chunk: the sum runs in 32 lanes over fixed chunks */
    enum { LA = 70001, LB = 150000, LC = 90017 };
    in_spec lin[3] = { { .shape = PBL_SHAPE(LA) }, { .shape = PBL_SHAPE(LB) }, { .shape = PBL_SHAPE(LC) } };
    th_set_case("global_norm of [%d], [%d], [%d]", LA, LB, LC);
    assert_int_equal(one_build(&c, "global_norm", lin, 3, NULL, 0), 0);
    float *la = malloc((LA + LB + LC) * sizeof *la);
    assert_non_null(la);
    th_fill(&r, la, LA + LB + LC, -2, 2);
    want = 0;
    for (int i = 0; i < LA + LB + LC; i++)
        want += (double)la[i] * la[i];
    want = sqrt(want);
    fails += one_run(&c, (const void *[]){ la, la + LA, la + LA + LB });
    fails += read_value(&c, c.out[0], &got, 1) + th_close("long norm", &got, &want, NULL, 1, 0, 1e-6);
    one_free(&c);
    /* squares past float's range (1e40): the norm, 1e20·√600, still comes out right */
    in_spec hin[1] = { { .shape = PBL_SHAPE(600) } };
    th_set_case("global_norm of 600 x 1e20");
    assert_int_equal(one_build(&c, "global_norm", hin, 1, NULL, 0), 0);
    for (int i = 0; i < 600; i++)
        la[i] = 1e20f;
    want = 1e20 * sqrt(600.0);
    fails += one_run(&c, (const void *[]){ la });
    fails += read_value(&c, c.out[0], &got, 1) + th_close("huge norm", &got, &want, NULL, 1, 0, 1e-6);
    one_free(&c);
    /* squares below float's range (1e-50): the float runs flush them; 3000 zeros first, so the
     * first chunk (4096) holds zeros, then such values: the norm is 1e-25·√7000 */
    in_spec tin[1] = { { .shape = PBL_SHAPE(10000) } };
    th_set_case("global_norm of 3000 x 0, 7000 x 1e-25");
    assert_int_equal(one_build(&c, "global_norm", tin, 1, NULL, 0), 0);
    for (int i = 0; i < 10000; i++)
        la[i] = i < 3000 ? 0.0f : 1e-25f;
    want = (double)1e-25f * sqrt(7000.0);
    fails += one_run(&c, (const void *[]){ la });
    fails += read_value(&c, c.out[0], &got, 1) + th_close("tiny norm", &got, &want, NULL, 1, 0, 1e-6);
    one_free(&c);
    free(la);
    for (int k = 0; k < 2; k++) {
        double max_norm = k == 0 ? 0.5 : 100.0; /* clipped, then left alone */
        in_spec cin[2] = { { .shape = PBL_SHAPE(3, 4) }, { .shape = PBL_SCALAR } };
        pbl_attr at[1] = { PBL_ATTR_FLOAT("max_norm", max_norm) };
        th_set_case("clip_by_norm max_norm=%g", max_norm);
        assert_int_equal(one_build(&c, "clip_by_norm", cin, 2, at, 1), 0);
        float norm = 2.5f, y[12];
        double f = max_norm / (2.5 + 1e-6), wy[12];
        f = f < 1 ? f : 1;
        for (int i = 0; i < 12; i++)
            wy[i] = a[i] * f;
        fails += one_run(&c, (const void *[]){ a, &norm });
        fails += read_value(&c, c.out[0], y, 12) + th_close("clipped", y, wy, NULL, 12, 1e-7, 1e-6);
        one_free(&c);
    }
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fully_connected),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_losses),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_reshape_flatten_copy),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_fully_connected_packed),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_max_pool_grad),
        cmocka_unit_test(test_dropout_p0_is_identity),
        cmocka_unit_test(test_dropout_half),
        cmocka_unit_test(test_scale_fill),
        cmocka_unit_test(test_broadcast_to_sum_to),
        cmocka_unit_test(test_add_n),
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_sgd_momentum),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_adamw_and_runtime_scalars),
        cmocka_unit_test(test_dropout_training_switch),
        cmocka_unit_test(test_batch_norm_running_stats),
        cmocka_unit_test(test_global_norm_and_clip),
        cmocka_unit_test(test_int_binary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
