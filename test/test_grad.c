/*
 * Every differentiable op's gradient against central finite differences, end to end through
 * the public API, plus the structure the gradient pass promises (one add_n per value read by
 * several nodes, nothing for values off the path to the loss, marked and named backward nodes
 * that pbl_graph_dump lists).
 *
 * Method. For f with inputs X_i the graph is
 *     loss = sum(mul(f(X), R))
 * with R a fixed random input of f's output shape, so every output element (and a wrong sign or
 * a transposed index anywhere) shows in the loss. pbl_graph_gradient(loss, wrt = the float
 * inputs) appends the backward pass; one run gives the analytic gradients. The numeric
 * gradient of element j of X_i is
 *     (L(x + h e_j) − L(x − h e_j)) / (x₊ − x₋)
 * from runs of the same executor with that one element perturbed (x₊ and x₋ are the perturbed
 * values as float32 actually stores them, so the division uses the step really taken).
 *
 * Step and tolerance. The loss is computed in float32: its rounding error is ~1e-7·Σ|f·R| ≲
 * 1e-6 for these sizes (inputs and R in [-1, 1], at most a few dozen terms), which becomes
 * ≲ 1e-6 / 2h = 5e-5 in the difference quotient at h = 1e-2. The truncation error of a central
 * difference is h²/6·|f'''| ≈ 2e-5·|f'''|, and |f'''| ≲ 2 for the smooth ops here (tanh's is the
 * largest); a smaller h trades truncation for more rounding, 1e-2 balances the two. Measured on
 * a correct library the worst |analytic − numeric| over all cases is 4e-5 (log_softmax), so
 * |analytic − numeric| ≤ atol + rtol·|numeric| with atol = 2e-4 and rtol = 2e-3 keeps a 5×
 * margin over both errors while catching a gradient off by a fraction of a percent of its
 * typical size (0.1–1): a missing factor, a wrong sign, a transposed or mis-broadcast index are
 * O(1) errors, and even mean's 1/count off by one (4% of gradients of ~0.04) fails by over 5×.
 * Inputs stay off kinks: relu's inputs have |x| ≥ 0.05 > h, so no difference straddles 0.
 *
 * dropout: the mask is a function of (seed, run counter, element), so the finite differences of
 * p = 0.5 use a fresh executor for every evaluation (each evaluation is then run 1 of its
 * executor and sees the same mask as the analytic run); p = 0 uses the shared executor.
 */
#include <ctype.h>

#include "grad_reads.h"
#include "op_harness.h"

#define FD_H    1e-2
#define FD_ATOL 2e-4
#define FD_RTOL 2e-3

enum { MAX_IN = 8 };

typedef struct gcase {
    const char     *label;
    const char     *op;                   /* one node of this op, or ... */
    pbl_value     (*build)(pbl_graph *g, const pbl_value *in); /* ... a composite f */
    int32_t         n_in;
    pbl_shape       shape[MAX_IN];
    pbl_dtype       dtype[MAX_IN];        /* PBL_F32 unless set */
    int32_t         no_wrt[MAX_IN];       /* 1: not differentiated (set for i32 inputs too) */
    int64_t         int_hi;               /* i32 inputs uniform in [0, int_hi) */
    const pbl_attr *attrs;
    int32_t         n_attrs;
    double          amp;                  /* float inputs in ±[min_abs, amp]; 0 means 1 */
    double          min_abs;
    int32_t         fresh_exec;           /* a new executor per evaluation (dropout p > 0) */
} gcase;

/* What check_grad leaves for structural checks (when asked to keep it). */
typedef struct gresult {
    pbl_graph *g;
    pbl_value  in[MAX_IN];
    pbl_value  grad[MAX_IN];
    int32_t    n_forward_nodes;
    int32_t    n_forward_values;
} gresult;

typedef struct gstate {
    const gcase *c;
    pbl_graph   *g;
    pbl_exec    *e;       /* the shared executor (NULL in fresh_exec mode) */
    pbl_value    in[MAX_IN], r, loss, grad[MAX_IN];
    void        *data[MAX_IN];
    int64_t      n[MAX_IN];
    float       *rdata;
    int64_t      nr;
} gstate;

/* Writes every input and R into e, runs once, reads the loss. */
static int run_once(gstate *s, pbl_exec *e, float *loss)
{
    for (int32_t i = 0; i < s->c->n_in; i++)
        TH_E(e, pbl_exec_write(e, s->in[i], s->data[i],
                               (size_t)s->n[i] * pbl_dtype_size(s->c->dtype[i])));
    TH_E(e, pbl_exec_write(e, s->r, s->rdata, (size_t)s->nr * sizeof(float)));
    TH_E(e, pbl_exec_run(e));
    TH_E(e, pbl_exec_read(e, s->loss, loss, sizeof *loss));
    return 0;
}

static int eval_loss(gstate *s, double *loss)
{
    float l = NAN;
    int fails;
    if (s->c->fresh_exec) {
        pbl_exec *e;
        if (th_exec_new(s->g, &e, "finite difference"))
            return 1;
        fails = run_once(s, e, &l);
        pbl_exec_destroy(e);
    } else {
        fails = run_once(s, s->e, &l);
    }
    *loss = l;
    return fails;
}

static int is_wrt(const gcase *c, int32_t i) { return c->dtype[i] == PBL_F32 && !c->no_wrt[i]; }

/* Builds loss = sum(mul(f(X), R)) and its gradient, checks every wrt gradient element against
 * central differences. keep: leave the graph (and ids) for further checks. */
static int check_grad(const gcase *c, th_rng *r, gresult *keep)
{
    th_set_case("%s", c->label);
    gstate s;
    memset(&s, 0, sizeof s);
    s.c = c;
    assert_int_equal(pbl_graph_create(&s.g, NULL), PBL_OK);
    pbl_graph *g = s.g;
    for (int32_t i = 0; i < c->n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", (int)i);
        pbl_value_kind kind = c->dtype[i] == PBL_I32 ? PBL_VALUE_LABEL : PBL_VALUE_INPUT;
        TH_G(g, pbl_graph_add_variable(g, name, kind, c->dtype[i], c->shape[i], &s.in[i]));
        s.n[i] = pbl_shape_numel(&c->shape[i]);
    }
    pbl_value y;
    if (c->build) {
        y = c->build(g, s.in);
    } else {
        pbl_value outs[4];
        pbl_node_desc d = { .op = c->op, .name = "f", .inputs = s.in, .n_inputs = c->n_in,
                            .attrs = c->attrs, .n_attrs = c->n_attrs };
        TH_G(g, pbl_graph_add_node(g, &d, NULL, outs));
        y = outs[0];
    }
    if (y == PBL_NONE) {
        fprintf(stderr, "FAIL [%s] building f failed: %s\n", th_case, pbl_graph_errmsg(g));
        return 1;
    }
    pbl_shape ys = th_value_shape(g, y);
    TH_G(g, pbl_graph_add_variable(g, "r", PBL_VALUE_INPUT, PBL_F32, ys, &s.r));
    s.loss = pbl_sum(g, pbl_mul(g, y, s.r), NULL, 0, 0);
    TH_G(g, pbl_graph_build_status(g));
    TH_G(g, pbl_graph_set_output(g, "loss", s.loss));
    int32_t n_fwd_nodes = pbl_graph_node_count(g), n_fwd_values = pbl_graph_value_count(g);

    pbl_value wrt[MAX_IN], grads[MAX_IN];
    int32_t n_wrt = 0, wrt_of[MAX_IN];
    for (int32_t i = 0; i < c->n_in; i++)
        if (is_wrt(c, i))
            wrt_of[n_wrt] = i, wrt[n_wrt++] = s.in[i];
    TH_G(g, pbl_graph_gradient(g, s.loss, wrt, n_wrt, grads));
    int fails = 0;
    for (int32_t k = 0; k < MAX_IN; k++)
        s.grad[k] = PBL_NONE;
    for (int32_t k = 0; k < n_wrt; k++) {
        int32_t i = wrt_of[k];
        s.grad[i] = grads[k];
        if (grads[k] == PBL_NONE) {
            fprintf(stderr, "FAIL [%s] input %d: gradient is PBL_NONE but it reaches the loss\n",
                    th_case, (int)i);
            fails++;
            continue;
        }
        char what[32];
        snprintf(what, sizeof what, "grad of input %d", (int)i);
        fails += th_shape_is(what, th_value_shape(g, grads[k]), c->shape[i]);
        snprintf(what, sizeof what, "grad%d", (int)i);
        TH_G(g, pbl_graph_set_output(g, what, grads[k]));
    }
    if (fails)
        return fails;

    /* data */
    double amp = c->amp > 0 ? c->amp : 1.0;
    for (int32_t i = 0; i < c->n_in; i++) {
        if (c->dtype[i] == PBL_I32) {
            int32_t *p = calloc((size_t)s.n[i], sizeof *p);
            for (int64_t j = 0; j < s.n[i]; j++)
                p[j] = (int32_t)th_int(r, 0, c->int_hi - 1);
            s.data[i] = p;
        } else {
            float *p = th_falloc(s.n[i]);
            th_fill_away(r, p, s.n[i], c->min_abs, amp);
            s.data[i] = p;
        }
    }
    s.nr = pbl_shape_numel(&ys);
    s.rdata = th_falloc(s.nr);
    th_fill(r, s.rdata, s.nr, -1, 1);

    /* analytic */
    float *ana[MAX_IN] = { 0 };
    pbl_exec *e;
    if (th_exec_new(g, &e, c->label))
        return 1;
    float l0;
    fails += run_once(&s, e, &l0);
    for (int32_t i = 0; i < c->n_in && !fails; i++)
        if (is_wrt(c, i)) {
            ana[i] = th_falloc(s.n[i]);
            TH_E(e, pbl_exec_read(e, s.grad[i], ana[i], (size_t)s.n[i] * sizeof(float)));
        }
    if (c->fresh_exec) {
        pbl_exec_destroy(e);
        e = NULL;
    }
    s.e = e;

    /* numeric, one element at a time */
    for (int32_t i = 0; i < c->n_in && !fails; i++) {
        if (!is_wrt(c, i))
            continue;
        float *x = s.data[i];
        double *num = th_dalloc(s.n[i]);
        for (int64_t j = 0; j < s.n[i] && !fails; j++) {
            float save = x[j];
            float xp = (float)(save + FD_H), xm = (float)(save - FD_H);
            double lp = NAN, lm = NAN;
            x[j] = xp;
            fails += eval_loss(&s, &lp);
            x[j] = xm;
            fails += eval_loss(&s, &lm);
            x[j] = save;
            num[j] = (lp - lm) / ((double)xp - (double)xm);
        }
        char what[64];
        snprintf(what, sizeof what, "d loss / d input %d (analytic vs numeric)", (int)i);
        if (!fails)
            fails += th_close(what, ana[i], num, NULL, s.n[i], FD_ATOL, FD_RTOL);
        free(num);
    }

    pbl_exec_destroy(s.e);
    for (int32_t i = 0; i < c->n_in; i++)
        free(s.data[i]), free(ana[i]);
    free(s.rdata);
    if (keep) {
        keep->g = g;
        memcpy(keep->in, s.in, sizeof keep->in);
        memcpy(keep->grad, s.grad, sizeof keep->grad);
        keep->n_forward_nodes = n_fwd_nodes;
        keep->n_forward_values = n_fwd_values;
    } else {
        pbl_graph_destroy(g);
    }
    return fails;
}

static int run_cases(const gcase *cases, int n, uint64_t seed)
{
    th_rng r = th_rng_seed(seed);
    int fails = 0;
    for (int i = 0; i < n; i++)
        fails += check_grad(&cases[i], &r, NULL);
    return fails;
}

#define NCASES(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- linear algebra --------------------------------------------------------------------------- */

static void test_grad_fully_connected(void **state)
{
    (void)state;
    const gcase cases[] = {
        { .label = "fully_connected x[3,4] w[5,4] b[5]", .op = "fully_connected", .n_in = 3,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(5, 4), PBL_SHAPE(5) } },
        { .label = "fully_connected x[4,3] w[2,3] (no bias)", .op = "fully_connected", .n_in = 2,
          .shape = { PBL_SHAPE(4, 3), PBL_SHAPE(2, 3) } },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 11), 0);
}

static void test_grad_matmul(void **state)
{
    (void)state;
    /* m = 3, k = 4, n = 2; stored shapes follow the flags */
    const pbl_attr t00[] = { PBL_ATTR_INT("trans_a", 0), PBL_ATTR_INT("trans_b", 0) };
    const pbl_attr t01[] = { PBL_ATTR_INT("trans_a", 0), PBL_ATTR_INT("trans_b", 1) };
    const pbl_attr t10[] = { PBL_ATTR_INT("trans_a", 1), PBL_ATTR_INT("trans_b", 0) };
    const pbl_attr t11[] = { PBL_ATTR_INT("trans_a", 1), PBL_ATTR_INT("trans_b", 1) };
    const gcase cases[] = {
        { .label = "matmul ta=0 tb=0 [3,4]x[4,2]", .op = "matmul", .n_in = 2,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4, 2) }, .attrs = t00, .n_attrs = 2 },
        { .label = "matmul ta=0 tb=1 [3,4]x[2,4]", .op = "matmul", .n_in = 2,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(2, 4) }, .attrs = t01, .n_attrs = 2 },
        { .label = "matmul ta=1 tb=0 [4,3]x[4,2]", .op = "matmul", .n_in = 2,
          .shape = { PBL_SHAPE(4, 3), PBL_SHAPE(4, 2) }, .attrs = t10, .n_attrs = 2 },
        { .label = "matmul ta=1 tb=1 [4,3]x[2,4]", .op = "matmul", .n_in = 2,
          .shape = { PBL_SHAPE(4, 3), PBL_SHAPE(2, 4) }, .attrs = t11, .n_attrs = 2 },
        { .label = "matmul 3-D ta=0 tb=0 [2,3,4]x[2,4,2]", .op = "matmul", .n_in = 2,
          .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(2, 4, 2) }, .attrs = t00, .n_attrs = 2 },
        { .label = "matmul 3-D ta=1 tb=1 [2,4,3]x[2,2,4]", .op = "matmul", .n_in = 2,
          .shape = { PBL_SHAPE(2, 4, 3), PBL_SHAPE(2, 2, 4) }, .attrs = t11, .n_attrs = 2 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 12), 0);
}

/* ---- element-wise ----------------------------------------------------------------------------- */

static void test_grad_binary(void **state)
{
    (void)state;
    gcase cases[4 * 4];
    char labels[4 * 4][64];
    const char *ops[] = { "add", "sub", "mul", "div" };
    const pbl_shape sa[] = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4), PBL_SHAPE(3, 4), PBL_SHAPE(2, 3, 4) };
    const pbl_shape sb[] = { PBL_SHAPE(3, 4), PBL_SHAPE(4), PBL_SHAPE(1, 4), PBL_SHAPE(3, 1) };
    int n = 0;
    for (int o = 0; o < 4; o++)
        for (int k = 0; k < 4; k++, n++) {
            char ba[32], bb[32];
            snprintf(labels[n], sizeof labels[n], "%s a%s b%s", ops[o],
                     pbl_shape_str(&sa[k], ba, sizeof ba), pbl_shape_str(&sb[k], bb, sizeof bb));
            memset(&cases[n], 0, sizeof cases[n]);
            cases[n].label = labels[n];
            cases[n].op = ops[o];
            cases[n].n_in = 2;
            cases[n].shape[0] = sa[k];
            cases[n].shape[1] = sb[k];
            if (strcmp(ops[o], "div") == 0) { /* keep b away from 0, where a / b is steep */
                cases[n].amp = 2;
                cases[n].min_abs = 0.5;
            }
        }
    assert_int_equal(run_cases(cases, n, 13), 0);
}

static void test_grad_activations(void **state)
{
    (void)state;
    const gcase cases[] = {
        /* |x| ≥ 0.05 > h: no difference straddles relu's kink */
        { .label = "relu [3,5]", .op = "relu", .n_in = 1, .shape = { PBL_SHAPE(3, 5) },
          .amp = 2, .min_abs = 0.05 },
        { .label = "sigmoid [3,5]", .op = "sigmoid", .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 3 },
        { .label = "tanh [3,5]", .op = "tanh", .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 2 },
        { .label = "gelu [3,5]", .op = "gelu", .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 3 },
        { .label = "softmax [3,5]", .op = "softmax", .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 2 },
        { .label = "softmax [2,2,4]", .op = "softmax", .n_in = 1, .shape = { PBL_SHAPE(2, 2, 4) }, .amp = 2 },
        { .label = "log_softmax [3,5]", .op = "log_softmax", .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 2 },
        { .label = "log_softmax [2,2,4]", .op = "log_softmax", .n_in = 1,
          .shape = { PBL_SHAPE(2, 2, 4) }, .amp = 2 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 14), 0);
}

/* ---- the math family (ops/math.c): every map with a gradient ------------------------------------ */

static pbl_value op_node(pbl_graph *g, const char *op, const pbl_value *in, int32_t n, const char *name)
{
    pbl_value out[4] = { PBL_NONE, PBL_NONE, PBL_NONE, PBL_NONE };
    pbl_node_desc d = { .op = op, .name = name, .inputs = in, .n_inputs = n };
    return pbl_graph_add_node(g, &d, NULL, out) == PBL_OK ? out[0] : PBL_NONE;
}

/* log, sqrt and pow's base need positive inputs: abs or exp first (their gradients chain) */
static pbl_value build_log_abs(pbl_graph *g, const pbl_value *in)
{
    pbl_value a = op_node(g, "abs", in, 1, "abs");
    return op_node(g, "log", &a, 1, "f");
}
static pbl_value build_sqrt_abs(pbl_graph *g, const pbl_value *in)
{
    pbl_value a = op_node(g, "abs", in, 1, "abs");
    return op_node(g, "sqrt", &a, 1, "f");
}
static pbl_value build_pow_exp(pbl_graph *g, const pbl_value *in)
{
    pbl_value a = op_node(g, "exp", in, 1, "exp");
    return op_node(g, "pow", (pbl_value[]){ a, in[1] }, 2, "f");
}

static pbl_value build_acosh_cosh(pbl_graph *g, const pbl_value *in)
{
    pbl_value a = op_node(g, "cosh", in, 1, "cosh");
    return op_node(g, "acosh", &a, 1, "f");
}

/* fmod(0.3·a, b) with |0.3·a| ≤ 0.3 < |b|: away from the jumps at multiples of b (∂/∂b = 0 there) */
static pbl_value build_fmod(pbl_graph *g, const pbl_value *in)
{
    pbl_attr k = PBL_ATTR_FLOAT("alpha", 0.3);
    pbl_value out[1], a;
    pbl_node_desc d = { .op = "scale", .name = "a03", .inputs = in, .n_inputs = 1, .attrs = &k, .n_attrs = 1 };
    a = pbl_graph_add_node(g, &d, NULL, out) == PBL_OK ? out[0] : PBL_NONE;
    return op_node(g, "fmod", (pbl_value[]){ a, in[1] }, 2, "f");
}

static void test_grad_math(void **state)
{
    (void)state;
    static const pbl_attr clip[] = { PBL_ATTR_FLOAT("min", -0.02), PBL_ATTR_FLOAT("max", 5.0) };
    static const pbl_attr leaky[] = { PBL_ATTR_FLOAT("alpha", 0.1) };
    static const pbl_attr elu[] = { PBL_ATTR_FLOAT("alpha", 0.7) };
    static const pbl_attr thr[] = { PBL_ATTR_FLOAT("alpha", 0.0) };
    static const pbl_attr shrink[] = { PBL_ATTR_FLOAT("lambd", 0.02), PBL_ATTR_FLOAT("bias", 0.1) };
#define U(o_, a, n, amp_, min_) { .label = o_ " [3,5]", .op = o_, .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, \
                                  .attrs = a, .n_attrs = n, .amp = amp_, .min_abs = min_ }
    /* kinks stay away from the inputs by more than h: |x| ≥ 0.05 where a map bends at 0 (clip's
     * lower bound and shrink's ±lambd are 0.02), hard_sigmoid's and hard_swish's bends (±2.5,
     * ±3) lie beyond the inputs, round's steps (±0.5) too; the steps' gradients are 0 */
    const gcase cases[] = {
        U("clip", clip, 2, 2, 0.05), U("leaky_relu", leaky, 1, 2, 0.05), U("elu", elu, 1, 2, 0.05),
        U("selu", NULL, 0, 2, 0.05), U("softplus", NULL, 0, 3, 0), U("softsign", NULL, 0, 2, 0.05),
        U("hard_sigmoid", NULL, 0, 2, 0), U("hard_swish", NULL, 0, 2.5, 0), U("thresholded_relu", thr, 1, 2, 0.05),
        U("shrink", shrink, 2, 2, 0.05), U("gelu_tanh", NULL, 0, 3, 0), U("erf", NULL, 0, 2, 0),
        U("exp", NULL, 0, 2, 0), U("neg", NULL, 0, 2, 0), U("abs", NULL, 0, 2, 0.05),
        U("reciprocal", NULL, 0, 2, 0.5), U("sign", NULL, 0, 2, 0.05), U("floor", NULL, 0, 0.9, 0.05),
        U("ceil", NULL, 0, 0.9, 0.05), U("round", NULL, 0, 0.4, 0), U("sin", NULL, 0, 3, 0), U("cos", NULL, 0, 3, 0),
        U("tan", NULL, 0, 1.2, 0), U("asin", NULL, 0, 0.8, 0), U("acos", NULL, 0, 0.8, 0), U("atan", NULL, 0, 2, 0),
        U("sinh", NULL, 0, 2, 0), U("cosh", NULL, 0, 2, 0), U("asinh", NULL, 0, 2, 0), U("atanh", NULL, 0, 0.8, 0),
        U("celu", elu, 1, 2, 0.05),
        /* acosh(cosh x) = |x|: acosh's domain, x ≥ 1, from cosh's range, away from acosh's pole at 1 */
        { .label = "acosh(cosh) [3,5]", .build = build_acosh_cosh, .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 2, .min_abs = 0.5 },
        { .label = "log(abs) [3,5]", .build = build_log_abs, .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 2, .min_abs = 0.5 },
        { .label = "sqrt(abs) [3,5]", .build = build_sqrt_abs, .n_in = 1, .shape = { PBL_SHAPE(3, 5) }, .amp = 2, .min_abs = 0.5 },
        { .label = "pow(exp a, b[4])", .build = build_pow_exp, .n_in = 2, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4) } },
        { .label = "pow a[2,3,4] b[3,1]", .build = build_pow_exp, .n_in = 2, .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(3, 1) } },
        { .label = "prelu x[3,4] slope[4]", .op = "prelu", .n_in = 2, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4) }, .min_abs = 0.05 },
        { .label = "prelu x[2,3,4] slope[3,1]", .op = "prelu", .n_in = 2, .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(3, 1) },
          .min_abs = 0.05 },
        { .label = "fmod(0.3 a, b[4])", .build = build_fmod, .n_in = 2, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4) },
          .amp = 1, .min_abs = 0.5 },
        { .label = "min a[3,4] b[3,4]", .op = "min", .n_in = 2, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4) } },
        { .label = "max a[3,4] b[4]", .op = "max", .n_in = 2, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4) } },
        { .label = "where c x y [3,4]", .op = "where", .n_in = 3, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4), PBL_SHAPE(3, 4) },
          .dtype = { PBL_I32, PBL_F32, PBL_F32 }, .no_wrt = { 1, 0, 0 }, .int_hi = 2 },
    };
#undef U
    assert_int_equal(run_cases(cases, NCASES(cases), 17), 0);
}

static void test_grad_losses(void **state)
{
    (void)state;
    const gcase cases[] = {
        { .label = "softmax_cross_entropy logits[4,5] labels[4]", .op = "softmax_cross_entropy",
          .n_in = 2, .shape = { PBL_SHAPE(4, 5), PBL_SHAPE(4) }, .dtype = { PBL_F32, PBL_I32 },
          .int_hi = 5, .amp = 2 },
        { .label = "mse_loss [3,4] (pred and target)", .op = "mse_loss", .n_in = 2,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4) } },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 15), 0);
}

/* ---- reductions and shapes -------------------------------------------------------------------- */

static void test_grad_reductions(void **state)
{
    (void)state;
    const pbl_attr keep[] = { PBL_ATTR_INT("keepdims", 1) };
    const pbl_attr ax1[] = { TH_ATTR_INTS("axes", 1) };
    const pbl_attr ax1k[] = { TH_ATTR_INTS("axes", 1), PBL_ATTR_INT("keepdims", 1) };
    const pbl_attr ax02[] = { TH_ATTR_INTS("axes", 0, 2) };
    gcase cases[10];
    const char *ops[] = { "sum", "mean" };
    const struct { const char *what; const pbl_attr *a; int32_t n; } forms[] = {
        { "all axes", NULL, 0 }, { "all axes keepdims", keep, 1 }, { "axis 1", ax1, 1 },
        { "axis 1 keepdims", ax1k, 2 }, { "axes {0,2}", ax02, 1 },
    };
    char labels[10][64];
    int n = 0;
    for (int o = 0; o < 2; o++)
        for (int f = 0; f < 5; f++, n++) {
            memset(&cases[n], 0, sizeof cases[n]);
            snprintf(labels[n], sizeof labels[n], "%s x[2,3,4] %s", ops[o], forms[f].what);
            cases[n].label = labels[n];
            cases[n].op = ops[o];
            cases[n].n_in = 1;
            cases[n].shape[0] = PBL_SHAPE(2, 3, 4);
            cases[n].attrs = forms[f].a;
            cases[n].n_attrs = forms[f].n;
        }
    assert_int_equal(run_cases(cases, n, 16), 0);
}

static void test_grad_shape_ops(void **state)
{
    (void)state;
    const pbl_attr rs[] = { TH_ATTR_INTS("shape", 4, -1) };
    const pbl_attr fl2[] = { PBL_ATTR_INT("axis", 2) };
    const pbl_attr sc[] = { PBL_ATTR_FLOAT("alpha", -1.7) };
    const pbl_attr bt1[] = { TH_ATTR_INTS("shape", 3, 4) };
    const pbl_attr st1[] = { TH_ATTR_INTS("shape", 4) };
    const pbl_attr st2[] = { TH_ATTR_INTS("shape", 3, 1) };
    const pbl_attr st3[] = { TH_ATTR_INTS("shape", 1, 4) };
    const gcase cases[] = {
        { .label = "reshape [2,3,4] -> [4,-1]", .op = "reshape", .n_in = 1,
          .shape = { PBL_SHAPE(2, 3, 4) }, .attrs = rs, .n_attrs = 1 },
        { .label = "flatten [2,3,4] (axis 1)", .op = "flatten", .n_in = 1, .shape = { PBL_SHAPE(2, 3, 4) } },
        { .label = "flatten [2,3,4] axis 2", .op = "flatten", .n_in = 1, .shape = { PBL_SHAPE(2, 3, 4) },
          .attrs = fl2, .n_attrs = 1 },
        { .label = "copy [3,4]", .op = "copy", .n_in = 1, .shape = { PBL_SHAPE(3, 4) } },
        { .label = "scale alpha=-1.7 [3,4]", .op = "scale", .n_in = 1, .shape = { PBL_SHAPE(3, 4) },
          .attrs = sc, .n_attrs = 1 },
        { .label = "broadcast_to [4] -> [3,4]", .op = "broadcast_to", .n_in = 1,
          .shape = { PBL_SHAPE(4) }, .attrs = bt1, .n_attrs = 1 },
        { .label = "broadcast_to [3,1] -> [3,4]", .op = "broadcast_to", .n_in = 1,
          .shape = { PBL_SHAPE(3, 1) }, .attrs = bt1, .n_attrs = 1 },
        { .label = "sum_to [3,4] -> [4]", .op = "sum_to", .n_in = 1, .shape = { PBL_SHAPE(3, 4) },
          .attrs = st1, .n_attrs = 1 },
        { .label = "sum_to [3,4] -> [3,1]", .op = "sum_to", .n_in = 1, .shape = { PBL_SHAPE(3, 4) },
          .attrs = st2, .n_attrs = 1 },
        { .label = "sum_to [2,3,4] -> [1,4]", .op = "sum_to", .n_in = 1,
          .shape = { PBL_SHAPE(2, 3, 4) }, .attrs = st3, .n_attrs = 1 },
        { .label = "add_n of 3 [3,4]", .op = "add_n", .n_in = 3,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4), PBL_SHAPE(3, 4) } },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 17), 0);
}

/* Norms (training form: the statistics depend on x, so dx has the two mean terms) and the
 * embedding lookup (the table's gradient; ids are not differentiated, repeats add up). Sets of
 * 6-24 values in ±1 keep the normalisation's third derivatives small (measured: dx within
 * 4e-5 of the differences, inside the budget of the file header). */
/* batch_norm with running statistics behind a training switch: training (1) differentiates
 * through the batch's statistics (the running ones are updated but do not feed y); evaluating
 * (0) normalises with the running statistics, never updated here (zero-filled: mean 0, var 0,
 * so eps 1 keeps inv_std at 1), constants for the gradient. */
static pbl_value build_bn(pbl_graph *g, const pbl_value *in, double on)
{
    pbl_value t;
    if (pbl_graph_add_scalar(g, "training", on, &t) != PBL_OK)
        return PBL_NONE;
    return pbl_batch_norm_switched(g, "bn", in[0], in[1], in[2], t, 0.1, on != 0 ? 1e-5 : 1.0);
}
static pbl_value build_bn_train(pbl_graph *g, const pbl_value *in) { return build_bn(g, in, 1.0); }
static pbl_value build_bn_eval(pbl_graph *g, const pbl_value *in) { return build_bn(g, in, 0.0); }

static void test_grad_norm_embedding(void **state)
{
    (void)state;
    const pbl_attr eps[] = { PBL_ATTR_FLOAT("eps", 0.1) };
    const gcase cases[] = {
        { .label = "batch_norm x[3,2,2,2]", .op = "batch_norm", .n_in = 3,
          .shape = { PBL_SHAPE(3, 2, 2, 2), PBL_SHAPE(2), PBL_SHAPE(2) } },
        { .label = "batch_norm x[6,3] eps 0.1", .op = "batch_norm", .n_in = 3,
          .shape = { PBL_SHAPE(6, 3), PBL_SHAPE(3), PBL_SHAPE(3) }, .attrs = eps, .n_attrs = 1 },
        { .label = "batch_norm with running statistics, training x[3,2,2,2]", .build = build_bn_train, .n_in = 3,
          .shape = { PBL_SHAPE(3, 2, 2, 2), PBL_SHAPE(2), PBL_SHAPE(2) } },
        { .label = "batch_norm with running statistics, evaluating x[6,3]", .build = build_bn_eval, .n_in = 3,
          .shape = { PBL_SHAPE(6, 3), PBL_SHAPE(3), PBL_SHAPE(3) } },
        { .label = "layer_norm x[3,7]", .op = "layer_norm", .n_in = 3,
          .shape = { PBL_SHAPE(3, 7), PBL_SHAPE(7), PBL_SHAPE(7) } },
        { .label = "layer_norm x[2,2,6] eps 0.1", .op = "layer_norm", .n_in = 3,
          .shape = { PBL_SHAPE(2, 2, 6), PBL_SHAPE(6), PBL_SHAPE(6) }, .attrs = eps, .n_attrs = 1 },
        { .label = "embedding ids[2,5] table[4,3]", .op = "embedding", .n_in = 2,
          .shape = { PBL_SHAPE(2, 5), PBL_SHAPE(4, 3) }, .dtype = { PBL_I32, PBL_F32 }, .int_hi = 4 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 18), 0);
}

/* The indexing ops: slice (a negative step too) puts dy back where it took x, pad's
 * gradient sums the positions that read each x (reflect and edge read some twice or more),
 * gather's adds dy's rows back at their ids (repeats add up; ids are not differentiated). */
static void test_grad_index(void **state)
{
    (void)state;
    static const int64_t st1[] = { 1, 2, 0 }, sp1[] = { 1, -1, 2 }, sz1[] = { 2, 2, 2 };
    static const int64_t pads_c[] = { 1, 0, -1, 2 }, pads_r[] = { 2, 1, 1, 2 }, pads_e[] = { 0, 3, 2, 1 };
    const pbl_attr sl[] = { PBL_ATTR_INTS("starts", st1, 3), PBL_ATTR_INTS("steps", sp1, 3), PBL_ATTR_INTS("sizes", sz1, 3) };
    const pbl_attr pc[] = { PBL_ATTR_INTS("pads", pads_c, 4), PBL_ATTR_INT("mode", 0), PBL_ATTR_FLOAT("value", 0.5) };
    const pbl_attr pr[] = { PBL_ATTR_INTS("pads", pads_r, 4), PBL_ATTR_INT("mode", 1) };
    const pbl_attr pe[] = { PBL_ATTR_INTS("pads", pads_e, 4), PBL_ATTR_INT("mode", 2) };
    const pbl_attr g1[] = { PBL_ATTR_INT("axis", 1) };
    const gcase cases[] = {
        { .label = "slice [3,4,4] starts 1,2,0 steps 1,-1,2", .op = "slice", .n_in = 1, .shape = { PBL_SHAPE(3, 4, 4) },
          .attrs = sl, .n_attrs = 3 },
        { .label = "pad constant [3,4] pads 1,0,-1,2", .op = "pad", .n_in = 1, .shape = { PBL_SHAPE(3, 4) }, .attrs = pc, .n_attrs = 3 },
        { .label = "pad reflect [3,4] pads 2,1,1,2", .op = "pad", .n_in = 1, .shape = { PBL_SHAPE(3, 4) }, .attrs = pr, .n_attrs = 2 },
        { .label = "pad edge [3,4] pads 0,3,2,1", .op = "pad", .n_in = 1, .shape = { PBL_SHAPE(3, 4) }, .attrs = pe, .n_attrs = 2 },
        { .label = "gather x[4,3] ids[2,5] axis 0", .op = "gather", .n_in = 2, .shape = { PBL_SHAPE(4, 3), PBL_SHAPE(2, 5) },
          .dtype = { PBL_F32, PBL_I32 }, .int_hi = 4 },
        { .label = "gather x[2,3,4] ids[5] axis 1", .op = "gather", .n_in = 2, .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(5) },
          .dtype = { PBL_F32, PBL_I32 }, .int_hi = 3, .attrs = g1, .n_attrs = 1 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 19), 0);
}

/* dropout p=0.5 behind a training switch (a runtime scalar, pebble/builder.h): evaluating
 * (0) it is the identity, and its gradient too; training (1) it is dropout. */
static pbl_value build_dropout_eval(pbl_graph *g, const pbl_value *in)
{
    pbl_value t;
    if (pbl_graph_add_scalar(g, "training", 0.0, &t) != PBL_OK)
        return PBL_NONE;
    return pbl_dropout_switched(g, in[0], 0.5, 5, t, NULL);
}

static pbl_value build_dropout_train(pbl_graph *g, const pbl_value *in)
{
    pbl_value t;
    if (pbl_graph_add_scalar(g, "training", 1.0, &t) != PBL_OK)
        return PBL_NONE;
    return pbl_dropout_switched(g, in[0], 0.5, 5, t, NULL);
}

static void test_grad_dropout(void **state)
{
    (void)state;
    const pbl_attr p0[] = { PBL_ATTR_FLOAT("p", 0.0), PBL_ATTR_INT("seed", 5) };
    const pbl_attr p5[] = { PBL_ATTR_FLOAT("p", 0.5), PBL_ATTR_INT("seed", 5) };
    const gcase cases[] = {
        { .label = "dropout p=0 [4,5] (shared executor)", .op = "dropout", .n_in = 1,
          .shape = { PBL_SHAPE(4, 5) }, .attrs = p0, .n_attrs = 2 },
        { .label = "dropout p=0.5 [4,5] (fresh executor per evaluation)", .op = "dropout",
          .n_in = 1, .shape = { PBL_SHAPE(4, 5) }, .attrs = p5, .n_attrs = 2, .fresh_exec = 1 },
        { .label = "dropout p=0.5 [4,5], training switch 0 (shared executor)", .build = build_dropout_eval, .n_in = 1,
          .shape = { PBL_SHAPE(4, 5) } },
        { .label = "dropout p=0.5 [4,5], training switch 1 (fresh executor per evaluation)",
          .build = build_dropout_train, .n_in = 1, .shape = { PBL_SHAPE(4, 5) }, .fresh_exec = 1 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 18), 0);
}

/* ---- composites --------------------------------------------------------------------------------- */

/* x[4,3] -> fc(w1[5,3], b1[5]) -> sigmoid -> fc(w2[3,5], b2[3]) -> cross-entropy with labels x5 */
static pbl_value build_mlp(pbl_graph *g, const pbl_value *in)
{
    pbl_value h = pbl_sigmoid(g, pbl_fully_connected(g, in[0], in[1], in[2]));
    pbl_value logits = pbl_fully_connected(g, h, in[3], in[4]);
    return pbl_softmax_cross_entropy(g, logits, in[5]);
}

static gcase mlp_case(void)
{
    gcase c = {
        .label = "mlp fc-sigmoid-fc-cross_entropy", .build = build_mlp, .n_in = 6,
        .shape = { PBL_SHAPE(4, 3), PBL_SHAPE(5, 3), PBL_SHAPE(5), PBL_SHAPE(3, 5), PBL_SHAPE(3),
                   PBL_SHAPE(4) },
        .dtype = { PBL_F32, PBL_F32, PBL_F32, PBL_F32, PBL_F32, PBL_I32 }, .int_hi = 3, .amp = 1.5,
    };
    return c;
}

static void test_grad_mlp(void **state)
{
    (void)state;
    gcase c = mlp_case();
    assert_int_equal(run_cases(&c, 1, 19), 0);
}

/* h = 1.5·x is read by relu, sigmoid and mul: f = relu(h) + sigmoid(h) + h·w */
static pbl_value build_three_consumers(pbl_graph *g, const pbl_value *in)
{
    pbl_value h = in[0];
    pbl_value outs[1];
    pbl_attr a = PBL_ATTR_FLOAT("alpha", 1.5);
    pbl_node_desc d = { .op = "scale", .name = "h", .inputs = &h, .n_inputs = 1, .attrs = &a, .n_attrs = 1 };
    if (pbl_graph_add_node(g, &d, NULL, outs) != PBL_OK)
        return PBL_NONE;
    h = outs[0];
    return pbl_add(g, pbl_add(g, pbl_relu(g, h), pbl_sigmoid(g, h)), pbl_mul(g, h, in[1]));
}

/* the same with the variable x itself as the shared value */
static pbl_value build_three_consumers_var(pbl_graph *g, const pbl_value *in)
{
    pbl_value x = in[0];
    return pbl_add(g, pbl_add(g, pbl_relu(g, x), pbl_sigmoid(g, x)), pbl_mul(g, x, in[1]));
}

/* Counts backward add_n nodes; checks there is exactly one, with 3 inputs. */
static int one_add_n(const gresult *res)
{
    int count = 0, fails = 0;
    pbl_node_info only = { 0 };
    for (pbl_node n = 0; n < pbl_graph_node_count(res->g); n++) {
        pbl_node_info ni;
        if (pbl_graph_node_info(res->g, n, &ni) != PBL_OK)
            return 1;
        if (strcmp(ni.op, "add_n") == 0) {
            count++;
            only = ni;
        }
    }
    if (count != 1) {
        fprintf(stderr, "FAIL [%s] %d add_n nodes, want exactly 1 (one aggregation per value read "
                        "by several nodes)\n", th_case, count);
        pbl_graph_dump(res->g, stderr);
        fails++;
    } else if (only.n_inputs != 3) {
        fprintf(stderr, "FAIL [%s] the add_n node %s sums %d contributions, want 3\n", th_case,
                only.name, (int)only.n_inputs);
        fails++;
    }
    return fails;
}

static void test_grad_three_consumers(void **state)
{
    (void)state;
    const gcase cases[] = {
        /* |x| ≥ 0.05 so |h| ≥ 0.075 > 1.5·h_fd: relu's kink is never straddled */
        { .label = "h = 1.5x read by relu, sigmoid, mul", .build = build_three_consumers, .n_in = 2,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4) }, .min_abs = 0.05 },
        { .label = "variable x read by relu, sigmoid, mul", .build = build_three_consumers_var,
          .n_in = 2, .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(3, 4) }, .min_abs = 0.05 },
    };
    th_rng r = th_rng_seed(20);
    int fails = 0;
    for (int i = 0; i < NCASES(cases); i++) {
        gresult res;
        memset(&res, 0, sizeof res);
        int f = check_grad(&cases[i], &r, &res);
        if (!f && res.g)
            f += one_add_n(&res);
        pbl_graph_destroy(res.g);
        fails += f;
    }
    assert_int_equal(fails, 0);
}

/* ---- structure: dead values, marking, naming, dump -------------------------------------------- */

static int count_backward(const pbl_graph *g)
{
    int n = 0;
    for (pbl_node i = 0; i < pbl_graph_node_count(g); i++) {
        pbl_node_info ni;
        if (pbl_graph_node_info(g, i, &ni) == PBL_OK && ni.is_backward)
            n++;
    }
    return n;
}

/* loss = sum(tanh(x)·R); with_dead adds z -> relu "dead_z" (an output, but off the loss path)
 * and sigmoid(x) "dead_x" (x's second reader, also off the path). */
static int build_dead_graph(pbl_graph *g, int with_dead, pbl_value *x, pbl_value *z, pbl_value *rr,
                            pbl_value *dead, pbl_value *loss)
{
    TH_G(g, pbl_graph_add_variable(g, "x", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(3, 4), x));
    TH_G(g, pbl_graph_add_variable(g, "z", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(3, 4), z));
    TH_G(g, pbl_graph_add_variable(g, "r", PBL_VALUE_INPUT, PBL_F32, PBL_SHAPE(3, 4), rr));
    pbl_value t = pbl_tanh(g, *x);
    *loss = pbl_sum(g, pbl_mul(g, t, *rr), NULL, 0, 0);
    dead[0] = dead[1] = PBL_NONE;
    if (with_dead) {
        pbl_node_desc dz = { .op = "relu", .name = "dead_z", .inputs = z, .n_inputs = 1 };
        pbl_node_desc dx = { .op = "sigmoid", .name = "dead_x", .inputs = x, .n_inputs = 1 };
        TH_G(g, pbl_graph_add_node(g, &dz, NULL, &dead[0]));
        TH_G(g, pbl_graph_add_node(g, &dx, NULL, &dead[1]));
        TH_G(g, pbl_graph_set_output(g, "dead", dead[0]));
    }
    TH_G(g, pbl_graph_build_status(g));
    TH_G(g, pbl_graph_set_output(g, "loss", *loss));
    return 0;
}

static void test_grad_dead_values(void **state)
{
    (void)state;
    th_set_case("value with no path to the loss");
    pbl_graph *g, *ref;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    assert_int_equal(pbl_graph_create(&ref, NULL), PBL_OK);
    pbl_value x, z, rr, dead[2], loss, rx, rz, rrr, rdead[2], rloss;
    int fails = build_dead_graph(g, 1, &x, &z, &rr, dead, &loss);
    fails += build_dead_graph(ref, 0, &rx, &rz, &rrr, rdead, &rloss);
    assert_int_equal(fails, 0);
    int32_t n_fwd = pbl_graph_node_count(g);

    pbl_value wrt[2] = { x, z }, grads[2] = { 12345, 12345 };
    pbl_status s = pbl_graph_gradient(g, loss, wrt, 2, grads);
    if (s != PBL_OK)
        fails += th_report(__FILE__, __LINE__, "pbl_graph_gradient", s, pbl_graph_errmsg(g));
    pbl_value rwrt[2] = { rx, rz }, rgrads[2];
    s = pbl_graph_gradient(ref, rloss, rwrt, 2, rgrads);
    if (s != PBL_OK)
        fails += th_report(__FILE__, __LINE__, "pbl_graph_gradient (reference graph)", s,
                           pbl_graph_errmsg(ref));
    assert_int_equal(fails, 0);

    if (grads[1] != PBL_NONE) {
        fprintf(stderr, "FAIL [%s] z has no path to the loss but its gradient is %d, want PBL_NONE\n",
                th_case, (int)grads[1]);
        fails++;
    }
    if (grads[0] == PBL_NONE) {
        fprintf(stderr, "FAIL [%s] x reaches the loss but its gradient is PBL_NONE\n", th_case);
        fails++;
    }
    /* no backward node reads z or the dead nodes' outputs, or is named after a dead node */
    for (pbl_node n = n_fwd; n < pbl_graph_node_count(g); n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        if (strncmp(ni.name, "dead_", 5) == 0) {
            fprintf(stderr, "FAIL [%s] backward node %s (%s) differentiates a dead node\n", th_case,
                    ni.name, ni.op);
            fails++;
        }
        for (int32_t k = 0; k < ni.n_inputs; k++)
            if (ni.inputs[k] == z || ni.inputs[k] == dead[0] || ni.inputs[k] == dead[1]) {
                fprintf(stderr, "FAIL [%s] backward node %s (%s) reads dead value %d\n", th_case,
                        ni.name, ni.op, (int)ni.inputs[k]);
                fails++;
            }
    }
    /* and the backward pass is exactly as big as without the dead branches */
    if (count_backward(g) != count_backward(ref)) {
        fprintf(stderr, "FAIL [%s] %d backward nodes with dead branches, %d without\n", th_case,
                count_backward(g), count_backward(ref));
        pbl_graph_dump(g, stderr);
        fails++;
    }

    /* and x's gradient is still right: d/dx sum(tanh(x)·R) = (1 − tanh²x)·R */
    if (!fails) {
        pbl_exec *e = NULL;
        pbl_status so = pbl_graph_set_output(g, "gx", grads[0]);
        if (so != PBL_OK)
            fails += th_report(__FILE__, __LINE__, "set_output gx", so, pbl_graph_errmsg(g));
        else if (th_exec_new(g, &e, "dead values"))
            fails++;
        th_rng r = th_rng_seed(21);
        float xd[12], zd[12], rd[12], gx[12];
        double want[12];
        th_fill(&r, xd, 12, -2, 2);
        th_fill(&r, zd, 12, -2, 2);
        th_fill(&r, rd, 12, -1, 1);
        for (int i = 0; i < 12; i++)
            want[i] = (1 - tanh(xd[i]) * tanh(xd[i])) * rd[i];
        if (!fails) {
            pbl_status st = PBL_OK;
            if ((st = pbl_exec_write(e, x, xd, sizeof xd)) != PBL_OK ||
                (st = pbl_exec_write(e, z, zd, sizeof zd)) != PBL_OK ||
                (st = pbl_exec_write(e, rr, rd, sizeof rd)) != PBL_OK ||
                (st = pbl_exec_run(e)) != PBL_OK || (st = pbl_exec_read(e, grads[0], gx, sizeof gx)) != PBL_OK)
                fails += th_report(__FILE__, __LINE__, "run", st, pbl_exec_errmsg(e));
            else
                fails += th_close("d loss / dx", gx, want, NULL, 12, 1e-6, 1e-5);
        }
        pbl_exec_destroy(e);
    }
    pbl_graph_destroy(g);
    pbl_graph_destroy(ref);
    assert_int_equal(fails, 0);
}

/* Lines of a dump, read back from a tmpfile. */
typedef struct dump_lines {
    char  *buf;
    char **line;
    int    n;
} dump_lines;

static int dump_read(const pbl_graph *g, dump_lines *d)
{
    memset(d, 0, sizeof *d);
    FILE *f = tmpfile();
    assert_non_null(f);
    pbl_status s = pbl_graph_dump(g, f);
    if (s != PBL_OK) {
        fclose(f);
        return th_report(__FILE__, __LINE__, "pbl_graph_dump", s, pbl_graph_errmsg(g));
    }
    long size = ftell(f);
    rewind(f);
    d->buf = calloc((size_t)size + 1, 1);
    assert_non_null(d->buf);
    size_t got = fread(d->buf, 1, (size_t)size, f);
    fclose(f);
    d->buf[got] = 0;
    int cap = 1;
    for (size_t i = 0; i < got; i++)
        cap += d->buf[i] == '\n';
    d->line = calloc((size_t)cap, sizeof *d->line);
    for (char *p = d->buf; *p;) {
        char *nl = strchr(p, '\n');
        d->line[d->n++] = p;
        if (!nl)
            break;
        *nl = 0;
        p = nl + 1;
    }
    return 0;
}

static void dump_free(dump_lines *d)
{
    free(d->buf);
    free(d->line);
}

/* Whether `name` occurs in `line` as a whole name (not as part of a longer name). */
static int has_name(const char *line, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(line, name); p; p = strstr(p + 1, name)) {
        int before = p == line || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '/' || p[-1] == ':');
        int after = !(isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '/' || p[n] == ':');
        if (before && after)
            return 1;
    }
    return 0;
}

/* The dump line that lists node ni: it names the node and shows "<op>(". -1 if none. */
static int node_line(const dump_lines *d, const pbl_node_info *ni)
{
    char call[64];
    snprintf(call, sizeof call, "%s(", ni->op);
    for (int i = 0; i < d->n; i++)
        if (has_name(d->line[i], ni->name) && strstr(d->line[i], call))
            return i;
    return -1;
}

/* Case-insensitive "backward" in line. */
static int says_backward(const char *line)
{
    for (const char *p = line; *p; p++) {
        size_t k = 0;
        while (k < 8 && p[k] && tolower((unsigned char)p[k]) == "backward"[k])
            k++;
        if (k == 8)
            return 1;
    }
    return 0;
}

/* Whether the dump marks backward nodes (nodes n_fwd.. of g, listed on lines line_of[n]),
 * either per line — a word (a run of letters, or one punctuation mark such as '*') that is on
 * every backward node's line, in none of their names or ops (names like "fc1/grad_w" do not
 * count as a mark), and on no forward node's line — or by a section: a line naming no node that
 * says "backward", after every forward node's line and before every backward node's line. */
static int dump_marks_backward(const pbl_graph *g, const dump_lines *d, const int *line_of,
                               int32_t n_fwd)
{
    int32_t nn = pbl_graph_node_count(g);
    const char *first = d->line[line_of[n_fwd]];
    for (const char *p = first; *p;) {
        char word[64];
        size_t len = 0;
        if (isalpha((unsigned char)*p)) {
            while (isalpha((unsigned char)p[len]) && len < sizeof word - 1)
                len++;
        } else if (ispunct((unsigned char)*p) && !strchr("%_/:.,=()[]'", *p)) {
            len = 1;
        } else {
            p++;
            continue;
        }
        memcpy(word, p, len);
        word[len] = 0;
        p += len;
        int ok = 1;
        for (pbl_node n = 0; n < nn && ok; n++) {
            pbl_node_info ni;
            if (pbl_graph_node_info(g, n, &ni) != PBL_OK)
                return 0;
            int on = strstr(d->line[line_of[n]], word) != NULL;
            if (n >= n_fwd)
                ok = on && !strstr(ni.name, word) && !strstr(ni.op, word);
            else
                ok = !on;
        }
        if (ok)
            return 1;
    }
    int last_fwd = -1, first_bwd = d->n;
    for (pbl_node n = 0; n < nn; n++) {
        if (n < n_fwd && line_of[n] > last_fwd)
            last_fwd = line_of[n];
        if (n >= n_fwd && line_of[n] < first_bwd)
            first_bwd = line_of[n];
    }
    for (int i = last_fwd + 1; i < first_bwd; i++)
        if (says_backward(d->line[i]))
            return 1;
    return 0;
}

static void test_grad_backward_nodes_marked_named_dumped(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(22);
    gresult res;
    memset(&res, 0, sizeof res);
    gcase mlp = mlp_case();
    int fails = check_grad(&mlp, &r, &res);
    assert_int_equal(fails, 0);
    pbl_graph *g = res.g;
    th_set_case("backward nodes of the mlp: is_backward, names, dump");
    int32_t nn = pbl_graph_node_count(g), nv = pbl_graph_value_count(g);
    if (nn <= res.n_forward_nodes) {
        fprintf(stderr, "FAIL [%s] no backward nodes were added\n", th_case);
        fails++;
    }
    for (pbl_node n = 0; n < nn; n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        int want = n >= res.n_forward_nodes;
        if (ni.is_backward != want) {
            fprintf(stderr, "FAIL [%s] node %d %s (%s): is_backward %d, want %d\n", th_case, (int)n,
                    ni.name ? ni.name : "(null)", ni.op, (int)ni.is_backward, want);
            fails++;
        }
        if (!ni.name || !ni.name[0]) {
            fprintf(stderr, "FAIL [%s] node %d (%s) has no name\n", th_case, (int)n, ni.op);
            fails++;
            continue;
        }
        /* backward nodes are named after what they differentiate: "<forward name>/<suffix>" */
        if (want) {
            const char *slash = strchr(ni.name, '/');
            char prefix[128] = "";
            if (slash && (size_t)(slash - ni.name) < sizeof prefix)
                memcpy(prefix, ni.name, (size_t)(slash - ni.name)), prefix[slash - ni.name] = 0;
            pbl_node fn = prefix[0] ? pbl_graph_find_node(g, prefix) : PBL_NONE;
            pbl_value fv = prefix[0] ? pbl_graph_find_value(g, prefix) : PBL_NONE;
            int fwd = (fn != PBL_NONE && fn < res.n_forward_nodes) ||
                      (fv != PBL_NONE && fv < res.n_forward_values);
            if (!fwd) {
                fprintf(stderr, "FAIL [%s] backward node %s (%s) is not named \"<forward node>/...\"\n",
                        th_case, ni.name, ni.op);
                fails++;
            }
        }
        for (int32_t k = 0; k < ni.n_outputs; k++) {
            pbl_value_info vi;
            assert_int_equal(pbl_graph_value_info(g, ni.outputs[k], &vi), PBL_OK);
            if (vi.is_backward != want) {
                fprintf(stderr, "FAIL [%s] value %s (output %d of %s): is_backward %d, want %d\n",
                        th_case, vi.name, (int)k, ni.name, (int)vi.is_backward, want);
                fails++;
            }
        }
    }

    /* the dump: a line per variable, per node (forward and backward) and per output */
    dump_lines d;
    fails += dump_read(g, &d);
    int32_t n_vars = 0;
    for (pbl_value v = 0; v < nv; v++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(g, v, &vi), PBL_OK);
        if (vi.producer != PBL_NONE)
            continue;
        n_vars++;
        int found = 0;
        for (int i = 0; i < d.n && !found; i++)
            found = has_name(d.line[i], vi.name);
        if (!found) {
            fprintf(stderr, "FAIL [%s] dump lists no variable %s\n", th_case, vi.name);
            fails++;
        }
    }
    for (int32_t i = 0; i < pbl_graph_output_count(g); i++) {
        const char *name;
        pbl_value v;
        assert_int_equal(pbl_graph_output_at(g, i, &name, &v), PBL_OK);
        int found = 0;
        for (int k = 0; k < d.n && !found; k++)
            found = has_name(d.line[k], name);
        if (!found) {
            fprintf(stderr, "FAIL [%s] dump lists no output %s\n", th_case, name);
            fails++;
        }
    }
    int want_lines = n_vars + nn + pbl_graph_output_count(g);
    if (d.n < want_lines) {
        fprintf(stderr, "FAIL [%s] dump has %d lines, want at least %d (%d variables + %d nodes + "
                        "%d outputs)\n", th_case, d.n, want_lines, (int)n_vars, (int)nn,
                (int)pbl_graph_output_count(g));
        fails++;
    }
    int *line_of = calloc((size_t)nn, sizeof *line_of);
    for (pbl_node n = 0; n < nn; n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        line_of[n] = node_line(&d, &ni);
        if (line_of[n] < 0) {
            fprintf(stderr, "FAIL [%s] dump has no line naming %s node %s with \"%s(\"\n", th_case,
                    n >= res.n_forward_nodes ? "backward" : "forward", ni.name, ni.op);
            fails++;
        }
    }
    if (!fails && nn > res.n_forward_nodes && !dump_marks_backward(g, &d, line_of, res.n_forward_nodes)) {
        fprintf(stderr, "FAIL [%s] the dump does not mark backward nodes: no word on every backward "
                        "node's line (other than in names and ops) that no forward line has, and no "
                        "\"backward\" section line between the forward and backward nodes\n", th_case);
        fails++;
    }
    if (fails) {
        fprintf(stderr, "---- dump ----\n");
        for (int i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.line[i]);
    }
    free(line_of);
    dump_free(&d);
    pbl_graph_destroy(g);
    assert_int_equal(fails, 0);
}

/* ---- convolution and pooling ------------------------------------------------------------------- */

/* conv2d (its input, weight and bias gradients: conv2d_grad_input, conv2d_grad_weight, sum),
 * avg_pool2d and global_avg_pool: linear in each input, so the central difference is exact up
 * to rounding. max_pool2d is tested in test_ops against its definition (a finite difference
 * straddles a change of the max whenever two taps lie within h). */
/* Clipping by global norm (pbl_graph_clip_grad_norm: global_norm, then clip_by_norm of each
 * input), differentiated through both the scaled tensors and the norm: the inputs' norm is about
 * 2 for inputs in ±[0.2, 1], so max_norm 0.5 clips (factor ~0.25, far from the kink at 1) and
 * 100 leaves them alone (the gradient is then dy itself, the norm's path 0). */
static pbl_value build_clip(pbl_graph *g, const pbl_value *in, double max_norm)
{
    pbl_value clipped[2];
    if (pbl_graph_clip_grad_norm(g, in, 2, max_norm, clipped, NULL) != PBL_OK)
        return PBL_NONE;
    return pbl_add(g, clipped[0], clipped[1]); /* [3, 4] + [4], broadcast */
}
static pbl_value build_clip_active(pbl_graph *g, const pbl_value *in) { return build_clip(g, in, 0.5); }
static pbl_value build_clip_idle(pbl_graph *g, const pbl_value *in) { return build_clip(g, in, 100.0); }

static void test_grad_clipping(void **state)
{
    (void)state;
    const gcase cases[] = {
        { .label = "global_norm of [3,4], [5], []", .op = "global_norm", .n_in = 3,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(5), PBL_SCALAR }, .min_abs = 0.2 },
        { .label = "clip by global norm 0.5 of [3,4], [4] (clipping)", .build = build_clip_active, .n_in = 2,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4) }, .min_abs = 0.2 },
        { .label = "clip by global norm 100 of [3,4], [4] (left alone)", .build = build_clip_idle, .n_in = 2,
          .shape = { PBL_SHAPE(3, 4), PBL_SHAPE(4) }, .min_abs = 0.2 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 1109), 0);
}

static void test_grad_conv_pool(void **state)
{
    (void)state;
    static const int64_t s1[] = { 1, 1 }, s2[] = { 2, 1 }, s12[] = { 1, 2 }, p1[] = { 1, 1, 1, 1 },
                         pa[] = { 0, 1, 1, 0 }, pb[] = { 2, 0, 1, 1 }, d1[] = { 1, 1 }, d2[] = { 2, 1 },
                         k2[] = { 2, 2 }, k23[] = { 2, 3 }, k3[] = { 3, 3 };
    const pbl_attr same[] = { PBL_ATTR_INTS("stride", s1, 2), PBL_ATTR_INTS("pad", p1, 4),
                              PBL_ATTR_INTS("dilation", d1, 2), PBL_ATTR_INT("groups", 1) };
    const pbl_attr grouped[] = { PBL_ATTR_INTS("stride", s2, 2), PBL_ATTR_INTS("pad", pa, 4),
                                 PBL_ATTR_INTS("dilation", d1, 2), PBL_ATTR_INT("groups", 2) };
    const pbl_attr dilated[] = { PBL_ATTR_INTS("stride", s12, 2), PBL_ATTR_INTS("pad", pb, 4),
                                 PBL_ATTR_INTS("dilation", d2, 2), PBL_ATTR_INT("groups", 1) };
    const pbl_attr depthwise[] = { PBL_ATTR_INTS("pad", p1, 4), PBL_ATTR_INT("groups", 3) };
    const pbl_attr avg_a[] = { PBL_ATTR_INTS("kernel", k3, 2), PBL_ATTR_INTS("stride", s12, 2),
                               PBL_ATTR_INTS("pad", p1, 4) };
    const pbl_attr avg_b[] = { PBL_ATTR_INTS("kernel", k23, 2), PBL_ATTR_INTS("stride", s2, 2),
                               PBL_ATTR_INTS("pad", pa, 4), PBL_ATTR_INTS("dilation", d2, 2) };
    const pbl_attr avg_c[] = { PBL_ATTR_INTS("kernel", k2, 2), PBL_ATTR_INTS("stride", k2, 2) };
    const gcase cases[] = {
        { .label = "conv2d x[2,3,5,6] w[4,3,3,3] b[4] pad 1", .op = "conv2d", .n_in = 3,
          .shape = { PBL_SHAPE(2, 3, 5, 6), PBL_SHAPE(4, 3, 3, 3), PBL_SHAPE(4) }, .attrs = same, .n_attrs = 4 },
        { .label = "conv2d x[1,4,7,6] w[6,2,3,2] groups 2 stride 2,1 pad 0,1,1,0", .op = "conv2d", .n_in = 2,
          .shape = { PBL_SHAPE(1, 4, 7, 6), PBL_SHAPE(6, 2, 3, 2) }, .attrs = grouped, .n_attrs = 4 },
        { .label = "conv2d x[2,2,8,6] w[3,2,3,3] b[3] stride 1,2 pad 2,0,1,1 dilation 2,1", .op = "conv2d", .n_in = 3,
          .shape = { PBL_SHAPE(2, 2, 8, 6), PBL_SHAPE(3, 2, 3, 3), PBL_SHAPE(3) }, .attrs = dilated, .n_attrs = 4 },
        { .label = "conv2d x[2,3,4,5] w[3,1,3,3] depthwise", .op = "conv2d", .n_in = 2,
          .shape = { PBL_SHAPE(2, 3, 4, 5), PBL_SHAPE(3, 1, 3, 3) }, .attrs = depthwise, .n_attrs = 2 },
        { .label = "conv2d x[2,3,4,3] w[5,3,1,1] (1x1: x read in place)", .op = "conv2d", .n_in = 2,
          .shape = { PBL_SHAPE(2, 3, 4, 3), PBL_SHAPE(5, 3, 1, 1) } },
        { .label = "avg_pool2d x[2,2,5,7] kernel 3 stride 1,2 pad 1", .op = "avg_pool2d", .n_in = 1,
          .shape = { PBL_SHAPE(2, 2, 5, 7) }, .attrs = avg_a, .n_attrs = 3 },
        { .label = "avg_pool2d x[1,2,7,6] kernel 2,3 stride 2,1 pad 0,1,1,0 dilation 2,1", .op = "avg_pool2d",
          .n_in = 1, .shape = { PBL_SHAPE(1, 2, 7, 6) }, .attrs = avg_b, .n_attrs = 4 },
        { .label = "avg_pool2d x[2,3,4,6] kernel 2 stride 2", .op = "avg_pool2d", .n_in = 1,
          .shape = { PBL_SHAPE(2, 3, 4, 6) }, .attrs = avg_c, .n_attrs = 2 },
        { .label = "global_avg_pool x[2,3,4,5]", .op = "global_avg_pool", .n_in = 1, .shape = { PBL_SHAPE(2, 3, 4, 5) } },
        { .label = "global_avg_pool x[3,2,7]", .op = "global_avg_pool", .n_in = 1, .shape = { PBL_SHAPE(3, 2, 7) } },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 16), 0);
}

/* The same for 1-D and 3-D windows, conv2d_grad_input as a forward op (ONNX ConvTranspose: its
 * gradients are conv2d and conv2d_grad_weight), and pooling's ceil and count_pad. */
static void test_grad_conv_pool_nd(void **state)
{
    (void)state;
    static const int64_t s2[] = { 2 }, p12[] = { 1, 2 }, d2[] = { 2 }, k3[] = { 3 }, s121[] = { 1, 2, 1 },
                         p3[] = { 1, 0, 1, 0, 1, 1 }, d112[] = { 1, 1, 2 }, k222[] = { 2, 2, 2 }, s22[] = { 2, 2 },
                         k33[] = { 3, 3 }, p1[] = { 1 }, sh[] = { 1, 3, 9, 8 }, sh1[] = { 2, 2, 11 };
    const pbl_attr conv1[] = { PBL_ATTR_INTS("stride", s2, 1), PBL_ATTR_INTS("pad", p12, 2),
                               PBL_ATTR_INTS("dilation", d2, 1), PBL_ATTR_INT("groups", 2) };
    const pbl_attr conv3[] = { PBL_ATTR_INTS("stride", s121, 3), PBL_ATTR_INTS("pad", p3, 6),
                               PBL_ATTR_INTS("dilation", d112, 3) };
    const pbl_attr convt[] = { PBL_ATTR_INTS("stride", s22, 2), PBL_ATTR_INTS("pad", p1, 1),
                               PBL_ATTR_INT("groups", 1), PBL_ATTR_INTS("shape", sh, 4) };
    const pbl_attr convt1[] = { PBL_ATTR_INTS("stride", s2, 1), PBL_ATTR_INTS("dilation", d2, 1),
                                PBL_ATTR_INT("groups", 2), PBL_ATTR_INTS("shape", sh1, 3) };
    const pbl_attr avg1[] = { PBL_ATTR_INTS("kernel", k3, 1), PBL_ATTR_INTS("stride", s2, 1),
                              PBL_ATTR_INTS("pad", p1, 1), PBL_ATTR_INT("ceil", 1), PBL_ATTR_INT("count_pad", 1) };
    const pbl_attr avg3[] = { PBL_ATTR_INTS("kernel", k222, 3), PBL_ATTR_INTS("stride", s121, 3),
                              PBL_ATTR_INTS("pad", p3, 6), PBL_ATTR_INT("count_pad", 1) };
    const pbl_attr avg2[] = { PBL_ATTR_INTS("kernel", k33, 2), PBL_ATTR_INTS("stride", s22, 2),
                              PBL_ATTR_INT("ceil", 1) };
    const gcase cases[] = {
        { .label = "conv2d 1-D x[2,4,9] w[4,2,3] b[4] groups 2 stride 2 pad 1,2 dilation 2", .op = "conv2d", .n_in = 3,
          .shape = { PBL_SHAPE(2, 4, 9), PBL_SHAPE(4, 2, 3), PBL_SHAPE(4) }, .attrs = conv1, .n_attrs = 4 },
        { .label = "conv2d 3-D x[1,2,4,5,6] w[3,2,2,2,2] b[3] stride 1,2,1 pad 1,0,1,0,1,1 dilation 1,1,2",
          .op = "conv2d", .n_in = 3, .shape = { PBL_SHAPE(1, 2, 4, 5, 6), PBL_SHAPE(3, 2, 2, 2, 2), PBL_SHAPE(3) },
          .attrs = conv3, .n_attrs = 3 },
        { .label = "conv2d_grad_input (ConvTranspose) x[1,2,5,4] w[2,3,3,3] stride 2 pad 1 -> [1,3,9,8]",
          .op = "conv2d_grad_input", .n_in = 2, .shape = { PBL_SHAPE(1, 2, 5, 4), PBL_SHAPE(2, 3, 3, 3) },
          .attrs = convt, .n_attrs = 4 },
        { .label = "conv2d_grad_input 1-D x[2,4,4] w[4,1,3] groups 2 stride 2 dilation 2 -> [2,2,11] (1 past)",
          .op = "conv2d_grad_input", .n_in = 2, .shape = { PBL_SHAPE(2, 4, 4), PBL_SHAPE(4, 1, 3) }, .attrs = convt1,
          .n_attrs = 4 },
        { .label = "avg_pool2d 1-D x[2,3,8] kernel 3 stride 2 pad 1 ceil count_pad", .op = "avg_pool2d", .n_in = 1,
          .shape = { PBL_SHAPE(2, 3, 8) }, .attrs = avg1, .n_attrs = 5 },
        { .label = "avg_pool2d 3-D x[1,2,4,5,6] kernel 2 stride 1,2,1 pad 1,0,1,0,1,1 count_pad", .op = "avg_pool2d",
          .n_in = 1, .shape = { PBL_SHAPE(1, 2, 4, 5, 6) }, .attrs = avg3, .n_attrs = 4 },
        { .label = "avg_pool2d x[2,2,6,7] kernel 3 stride 2 ceil", .op = "avg_pool2d", .n_in = 1,
          .shape = { PBL_SHAPE(2, 2, 6, 7) }, .attrs = avg2, .n_attrs = 3 },
        { .label = "global_avg_pool x[1,2,3,4,2]", .op = "global_avg_pool", .n_in = 1,
          .shape = { PBL_SHAPE(1, 2, 3, 4, 2) } },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 16), 0);
}

/* resize (nearest and linear; its gradient is resize_grad): linear in x, so the central
 * difference is exact up to rounding. A resized channel dim (no one-to-one leading dims: one
 * gradient plane) and scales given apart from the sizes (0.6 over 4 elements: 2 outputs). */
static void test_grad_resize(void **state)
{
    (void)state;
    static const int64_t y1[] = { 2, 3, 7, 3 }, y2[] = { 1, 2, 6, 8 }, y3[] = { 2, 5, 7 }, y4[] = { 1, 1, 2, 2 };
    int64_t bits[4];
    const double sc[4] = { 1, 1, 0.6000000238418579, 0.6000000238418579 };
    memcpy(bits, sc, sizeof bits);
    const pbl_attr lin[] = { PBL_ATTR_INTS("shape", y1, 4), PBL_ATTR_INT("mode", 1) };
    const pbl_attr near[] = { PBL_ATTR_INTS("shape", y2, 4), PBL_ATTR_INT("coord", 3), PBL_ATTR_INT("nearest", 2) };
    const pbl_attr corners[] = { PBL_ATTR_INTS("shape", y3, 3), PBL_ATTR_INT("mode", 1), PBL_ATTR_INT("coord", 2) };
    const pbl_attr scaled[] = { PBL_ATTR_INTS("shape", y4, 4), PBL_ATTR_INT("mode", 1),
                                PBL_ATTR_INTS("scale_bits", bits, 4) };
    const gcase cases[] = {
        { .label = "resize linear half_pixel x[2,3,4,5] -> [2,3,7,3]", .op = "resize", .n_in = 1,
          .shape = { PBL_SHAPE(2, 3, 4, 5) }, .attrs = lin, .n_attrs = 2 },
        { .label = "resize nearest asymmetric floor x[1,2,3,4] -> [1,2,6,8]", .op = "resize", .n_in = 1,
          .shape = { PBL_SHAPE(1, 2, 3, 4) }, .attrs = near, .n_attrs = 3 },
        { .label = "resize linear align_corners x[2,3,4] -> [2,5,7]", .op = "resize", .n_in = 1,
          .shape = { PBL_SHAPE(2, 3, 4) }, .attrs = corners, .n_attrs = 3 },
        { .label = "resize linear x[1,1,4,4] scales 0.6 -> [1,1,2,2]", .op = "resize", .n_in = 1,
          .shape = { PBL_SHAPE(1, 1, 4, 4) }, .attrs = scaled, .n_attrs = 3 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 16), 0);
}

/* ---- this session's reductions and losses (reduce, nll_loss, broadcast matmul) --------------
 * reduce's modes over one axis, two axes and all, keepdims or not. max and min take inputs
 * spread over ±4 so that no two elements of a group lie within the step h of each other for
 * this seed (a difference straddling a change of the max would be meaningless); prod, L1 and
 * L2 keep |x| ≥ 0.3 (off the kinks of |x| and away from L2's zero); log-sum reads x² + ...,
 * through a mul, so its sums are positive. */
static pbl_value red_node(pbl_graph *g, pbl_value x, int64_t mode)
{
    pbl_value y = PBL_NONE;
    const pbl_attr at[] = { TH_ATTR_INTS("axes", 1), PBL_ATTR_INT("mode", mode) };
    pbl_node_desc d = { .op = "reduce", .name = "f", .inputs = &x, .n_inputs = 1, .attrs = at, .n_attrs = 2 };
    pbl_graph_add_node(g, &d, NULL, &y);
    return y;
}

static pbl_value build_log_sum_of_squares(pbl_graph *g, const pbl_value *in)
{
    return red_node(g, pbl_mul(g, in[0], in[0]), 6 /* log-sum */);
}

/* ONNX MatMul [2,3,4]·[4,5]: b broadcast over the batch, then the batched product (the
 * converter's form when both operands have batch dims that differ) */
static pbl_value build_bcast_matmul(pbl_graph *g, const pbl_value *in)
{
    const int64_t sh[] = { 2, 4, 5 };
    pbl_value b = PBL_NONE, y = PBL_NONE;
    const pbl_attr bt[] = { PBL_ATTR_INTS("shape", sh, 3) };
    pbl_node_desc db = { .op = "broadcast_to", .name = "bb", .inputs = &in[1], .n_inputs = 1, .attrs = bt, .n_attrs = 1 };
    pbl_graph_add_node(g, &db, NULL, &b);
    pbl_value ab[] = { in[0], b };
    pbl_node_desc dm = { .op = "matmul", .name = "f", .inputs = ab, .n_inputs = 2 };
    pbl_graph_add_node(g, &dm, NULL, &y);
    return y;
}

static void test_grad_reduce_modes(void **state)
{
    (void)state;
    const pbl_attr forms[3][3] = {
        { TH_ATTR_INTS("axes", 1), PBL_ATTR_INT("keepdims", 0) },
        { TH_ATTR_INTS("axes", 0, 2), PBL_ATTR_INT("keepdims", 1) },
        { PBL_ATTR_INT("keepdims", 0) },
    };
    static const int32_t n_forms[3] = { 2, 2, 1 };
    static const char *const names[] = { "max", "min", "prod", "L1", "L2", "log-sum-exp", "log-sum", "sum-square" };
    pbl_attr attrs[8][3][3];
    gcase cases[8 * 3 + 4];
    char labels[8 * 3][64];
    int n = 0;
    for (int m = 0; m < 8; m++) {
        if (m == 6)
            continue; /* log-sum: the composite below */
        for (int f = 0; f < 3; f++, n++) {
            memcpy(attrs[m][f], forms[f], sizeof forms[f]);
            attrs[m][f][n_forms[f]] = PBL_ATTR_INT("mode", m);
            memset(&cases[n], 0, sizeof cases[n]);
            snprintf(labels[n], sizeof labels[n], "reduce %s x[2,3,4] form %d", names[m], f);
            cases[n].label = labels[n];
            cases[n].op = "reduce";
            cases[n].n_in = 1;
            cases[n].shape[0] = PBL_SHAPE(2, 3, 4);
            cases[n].attrs = attrs[m][f];
            cases[n].n_attrs = n_forms[f] + 1;
            cases[n].amp = m <= 1 ? 4 : 1;
            cases[n].min_abs = m >= 2 && m <= 4 ? 0.3 : 0;
        }
    }
    cases[n++] = (gcase){ .label = "reduce log-sum of x*x, axis 1", .build = build_log_sum_of_squares, .n_in = 1,
                          .shape = { PBL_SHAPE(2, 3, 4) }, .min_abs = 0.3 };
    cases[n++] = (gcase){ .label = "matmul [2,3,4] x broadcast [4,5]", .build = build_bcast_matmul, .n_in = 2,
                          .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(4, 5) } };
    assert_int_equal(run_cases(cases, n, 31), 0);
}

/* SoftmaxCrossEntropyLoss as the ONNX converter emits it for scores [N, C, d]: the classes
 * moved last, log_softmax, moved back, nll_loss (mean) */
static pbl_value build_sce_spatial(pbl_graph *g, const pbl_value *in)
{
    const int64_t perm[] = { 0, 2, 1 };
    const pbl_attr pa[] = { PBL_ATTR_INTS("perm", perm, 3) };
    pbl_value t = PBL_NONE, lp = PBL_NONE, back = PBL_NONE, y = PBL_NONE;
    pbl_node_desc d1 = { .op = "transpose", .name = "to_last", .inputs = &in[0], .n_inputs = 1, .attrs = pa, .n_attrs = 1 };
    pbl_graph_add_node(g, &d1, NULL, &t);
    pbl_node_desc d2 = { .op = "log_softmax", .name = "lsm", .inputs = &t, .n_inputs = 1 };
    pbl_graph_add_node(g, &d2, NULL, &lp);
    pbl_node_desc d3 = { .op = "transpose", .name = "back", .inputs = &lp, .n_inputs = 1, .attrs = pa, .n_attrs = 1 };
    pbl_graph_add_node(g, &d3, NULL, &back);
    pbl_value nin[] = { back, in[1] };
    pbl_node_desc d4 = { .op = "nll_loss", .name = "f", .inputs = nin, .n_inputs = 2 };
    pbl_graph_add_node(g, &d4, NULL, &y);
    return y;
}

static void test_grad_nll_loss(void **state)
{
    (void)state;
    const pbl_attr mean_ii[] = { PBL_ATTR_INT("ignore_index", 1) };
    const pbl_attr none[] = { PBL_ATTR_INT("reduction", 0) };
    const pbl_attr sum_ii[] = { PBL_ATTR_INT("reduction", 1), PBL_ATTR_INT("ignore_index", 2) };
    const gcase cases[] = {
        { .label = "nll_loss logp[6,5] target[6] mean", .op = "nll_loss", .n_in = 2,
          .shape = { PBL_SHAPE(6, 5), PBL_SHAPE(6) }, .dtype = { PBL_F32, PBL_I32 }, .int_hi = 5 },
        { .label = "nll_loss logp[6,4] target[6] weight[4] mean ignore 1", .op = "nll_loss", .n_in = 3,
          .shape = { PBL_SHAPE(6, 4), PBL_SHAPE(6), PBL_SHAPE(4) }, .dtype = { PBL_F32, PBL_I32, PBL_F32 },
          .no_wrt = { 0, 0, 1 }, .int_hi = 4, .min_abs = 0.2, .attrs = mean_ii, .n_attrs = 1 },
        { .label = "nll_loss logp[2,3,4] target[2,4] none", .op = "nll_loss", .n_in = 2,
          .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(2, 4) }, .dtype = { PBL_F32, PBL_I32 }, .int_hi = 3,
          .attrs = none, .n_attrs = 1 },
        { .label = "nll_loss logp[2,3,2,2] target[2,2,2] weight[3] sum ignore 2", .op = "nll_loss", .n_in = 3,
          .shape = { PBL_SHAPE(2, 3, 2, 2), PBL_SHAPE(2, 2, 2), PBL_SHAPE(3) }, .dtype = { PBL_F32, PBL_I32, PBL_F32 },
          .no_wrt = { 0, 0, 1 }, .int_hi = 3, .attrs = sum_ii, .n_attrs = 2 },
        { .label = "softmax cross-entropy scores[2,3,4] target[2,4] (ONNX's form)", .build = build_sce_spatial,
          .n_in = 2, .shape = { PBL_SHAPE(2, 3, 4), PBL_SHAPE(2, 4) }, .dtype = { PBL_F32, PBL_I32 }, .int_hi = 3,
          .amp = 2 },
    };
    assert_int_equal(run_cases(cases, NCASES(cases), 32), 0);
}

/* reduce's and nll_loss's gradients read exactly the data their ops declare (grad_reads.h) */
static void test_grad_reads_reduce_nll(void **state)
{
    (void)state;
    static const char *const ops[] = { "reduce", "nll_loss" };
    uint32_t read_in[2] = { 0 }, read_out[2] = { 0 };
    int seen[2] = { 0 }, fails = 0;
    grad_reads gr = { .track = ops, .n_track = 2, .read_in = read_in, .read_out = read_out, .seen = seen };
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_param(g, "x", PBL_SHAPE(4, 3)), w = pbl_input(g, "w", PBL_SHAPE(3)),
              t = pbl_label(g, "t", PBL_I32, PBL_SHAPE(4)), r = red_node(g, x, 0), lp = pbl_log_softmax(g, x), y;
    pbl_value nin[] = { lp, t, w };
    pbl_node_desc d = { .op = "nll_loss", .name = "nll", .inputs = nin, .n_inputs = 3 };
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, &y), PBL_OK);
    pbl_value loss = pbl_add(g, pbl_sum(g, r, NULL, 0, 0), y), dx;
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_gradient(g, loss, &x, 1, &dx), PBL_OK);
    grad_reads_check(g, "reduce + nll_loss", &gr);
    fails += gr.undeclared;
    for (int k = 0; k < 2; k++) {
        const pbl__op *op = pbl__op_get(pbl__op_find(ops[k]));
        if (!seen[k] || read_in[k] != op->grad_reads_in || read_out[k] != op->grad_reads_out)
            fprintf(stderr, "FAIL %s: declares in 0x%x out 0x%x, reads in 0x%x out 0x%x\n", ops[k], op->grad_reads_in,
                    op->grad_reads_out, read_in[k], read_out[k]), fails++;
    }
    pbl_graph_destroy(g);
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_fully_connected),
        cmocka_unit_test(test_grad_matmul),
        cmocka_unit_test(test_grad_binary),
        cmocka_unit_test(test_grad_activations),
        cmocka_unit_test(test_grad_losses),
        cmocka_unit_test(test_grad_math),
        cmocka_unit_test(test_grad_reductions),
        cmocka_unit_test(test_grad_shape_ops),
        cmocka_unit_test(test_grad_norm_embedding),
        cmocka_unit_test(test_grad_index),
        cmocka_unit_test(test_grad_dropout),
        cmocka_unit_test(test_grad_conv_pool),
        cmocka_unit_test(test_grad_clipping),
        cmocka_unit_test(test_grad_conv_pool_nd),
        cmocka_unit_test(test_grad_resize),
        cmocka_unit_test(test_grad_mlp),
        cmocka_unit_test(test_grad_three_consumers),
        cmocka_unit_test(test_grad_dead_values),
        cmocka_unit_test(test_grad_backward_nodes_marked_named_dumped),
        cmocka_unit_test(test_grad_reduce_modes),
        cmocka_unit_test(test_grad_nll_loss),
        cmocka_unit_test(test_grad_reads_reduce_nll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
