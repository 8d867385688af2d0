/*
 * The CPU kernels that have one code path per x86-64 level (graph/base/cpu.h: baseline SSE2,
 * AVX2 + FMA, AVX-512) give the same results at every level this machine runs, each checked
 * against a double-precision reference within float tolerance (never against another path's
 * bits, nor libm's): fully_connected_packed over batch sizes that hit every row/panel block
 * and edge, tanh and sigmoid over their whole range (and NaN, ±inf; the formulas' scalar tanh
 * bit for bit with the tanh kernel's), exp and the softmax rows
 * built on it, and the pooling and
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
    /* the formulas' scalar tanh (gelu_tanh's, ops/shared/formulas.h) is the same arithmetic */
    for (int64_t i = 0; is_tanh && i < n; i++) {
        float s = pbl__tanh_poly(x[i]);
        if (memcmp(&s, &y[i], sizeof s)) {
            printf("%s: tanh(%.9g) is %.9g in the kernel, %.9g in the formulas\n", th_case, (double)x[i],
                   (double)y[i], (double)s);
            fails++;
            break;
        }
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

/* exp over [-87, 88] and past its ends, then the softmax rows built on it: both within 4 ulp
 * of double at every level, -inf (a masked logit) giving exactly 0 */
static int exp_case(int level)
{
    enum { N = 20000 };
    float *x = th_falloc(N), *y = th_falloc(N);
    double *want = th_dalloc(N), *scale = th_dalloc(N);
    for (int i = 0; i < N - 4; i++) /* up to 88.7, just below ln(FLT_MAX) */
        x[i] = -95.0f + (float)i * (183.7f / (N - 5));
    x[N - 4] = -INFINITY, x[N - 3] = -87.4f, x[N - 2] = 0.0f, x[N - 1] = -0.0f;
    for (int i = 0; i < N; i++) {
        double e = exp((double)x[i]);
        want[i] = e < FLT_MIN ? 0.0 : e; /* below FLT_MIN: 0 (at most a denormal truly) */
        scale[i] = want[i];
    }
    pbl__cpu_level_force(level);
    for (int at = 0; at < N; at += 331)
        pbl__cpu_exp_n(x + at, y + at, N - at < 331 ? N - at : 331);
    float nan_in[4] = { NAN, 88.73f, 1e30f, INFINITY }, nan_out[4]; /* NaN, then overflows */
    pbl__cpu_exp_n(nan_in, nan_out, 4);
    /* rows of 3 (many to a pass), 700 and 2500 (pieces), one logit masked in each */
    static const int64_t widths[] = { 3, 700, 2500 };
    int fails = 0;
    th_rng r = th_rng_seed(77);
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
        int64_t rows = 5, cols = widths[w];
        float *lx = th_falloc(rows * cols), *le = th_falloc(rows * cols), mx[5], sum[5];
        th_fill(&r, lx, rows * cols, -20, 20);
        for (int64_t i = 0; i < rows; i++)
            lx[i * cols + (i * 7) % cols] = -INFINITY;
        pbl__cpu_rows_sum_exp(lx, rows, cols, le, mx, sum);
        for (int64_t i = 0; i < rows; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < cols; j++)
                m = lx[i * cols + j] > m ? lx[i * cols + j] : m;
            for (int64_t j = 0; j < cols; j++)
                s += exp((double)lx[i * cols + j] - m);
            th_set_case("softmax row sum, %lld wide, at %s", (long long)cols, pbl__cpu_level_name(level));
            fails += (mx[i] != (float)m) + th_close(th_case, &sum[i], &s, NULL, 1, 0, 4.8e-7 * (double)cols);
            if (le[i * cols + (i * 7) % cols] != 0.0f) {
                printf("%s: a masked logit's exp is %g\n", th_case, (double)le[i * cols + (i * 7) % cols]);
                fails++;
            }
        }
        free(lx), free(le);
    }
    pbl__cpu_level_force(-1);
    th_set_case("exp at %s", pbl__cpu_level_name(level));
    fails += th_close(th_case, y, want, scale, N, 0, 4.8e-7);
    if (!isnan(nan_out[0]) || nan_out[1] != INFINITY || nan_out[2] != INFINITY || nan_out[3] != INFINITY) {
        printf("%s: NaN, 88.73, 1e30, inf in; %g %g %g %g out\n", th_case, (double)nan_out[0],
               (double)nan_out[1], (double)nan_out[2], (double)nan_out[3]);
        fails++;
    }
    free(x), free(y), free(want), free(scale);
    return fails;
}

static void test_exp_softmax_rows(void **state)
{
    (void)state;
    int fails = 0;
    for (int l = 0; l < levels(); l++)
        fails += exp_case(l);
    assert_int_equal(fails, 0);
}

/* ---- pooling and depthwise convolution ------------------------------------------------------ */

/* One window shape: kernel, stride, pad (top, left, bottom, right), dilation; for the pools
 * ceil (ceil_mode) and count_pad (count_include_pad; depthwise cases ignore both). */
typedef struct win_case {
    int64_t k[2], s[2], p[4], d[2];
    int     ceil, count_pad;
} win_case;

static const win_case wins[] = {
    { { 2, 2 }, { 2, 2 }, { 0, 0, 0, 0 }, { 1, 1 }, 0, 0 }, { { 3, 3 }, { 2, 2 }, { 1, 1, 1, 1 }, { 1, 1 }, 0, 1 },
    { { 3, 3 }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, 0, 0 }, { { 3, 2 }, { 1, 3 }, { 0, 2, 1, 0 }, { 2, 2 }, 0, 0 },
    { { 5, 5 }, { 2, 1 }, { 2, 2, 2, 2 }, { 1, 1 }, 0, 1 }, { { 3, 3 }, { 2, 2 }, { 0, 0, 0, 0 }, { 1, 1 }, 1, 0 },
    { { 2, 3 }, { 2, 2 }, { 1, 0, 0, 1 }, { 1, 1 }, 1, 1 },
};

/* the output size along one dim (pbl__window_out's rule) */
static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, int ceil)
{
    int64_t span = in + p0 + p1 - d * (k - 1) - 1;
    if (span < 0)
        return 0;
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (o - 1) * s >= in + p0)
        o--;
    return o;
}

static void set_ints(pbl__attr_val *a, int64_t v0, int64_t v1)
{
    a->ints[0] = v0, a->ints[1] = v1, a->n_ints = 2, a->set = 1;
}

/* pool (is_max 1/0) or depthwise conv (is_max -1) of x[2, 3, H, W] at `level` vs a reference */
static int window_case(int level, const win_case *wc, int64_t H, int64_t W, int is_max, th_rng *r)
{
    int ceil = is_max >= 0 && wc->ceil, count_pad = is_max == 0 && wc->count_pad;
    int64_t N = 2, C = 3, OH = out_dim(H, wc->k[0], wc->s[0], wc->p[0], wc->p[2], wc->d[0], ceil),
            OW = out_dim(W, wc->k[1], wc->s[1], wc->p[1], wc->p[3], wc->d[1], ceil);
    if (OH < 1 || OW < 1)
        return 0;
    float *x = th_falloc(N * C * H * W), *wt = th_falloc(C * wc->k[0] * wc->k[1]), *b = th_falloc(C),
          *y = th_falloc(N * C * OH * OW);
    double *want = th_dalloc(N * C * OH * OW), *scale = th_dalloc(N * C * OH * OW);
    th_fill(r, x, N * C * H * W, -1, 1);
    th_fill(r, wt, C * wc->k[0] * wc->k[1], -1, 1);
    th_fill(r, b, C, -1, 1);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = is_max == 1 ? -INFINITY : is_max == 0 ? 0 : b[nc % C], mag = is_max < 0 ? fabs(b[nc % C]) : 0;
                int64_t count = 0;
                for (int64_t kh = 0; kh < wc->k[0]; kh++)
                    for (int64_t kw = 0; kw < wc->k[1]; kw++) {
                        int64_t ih = oh * wc->s[0] - wc->p[0] + kh * wc->d[0], iw = ow * wc->s[1] - wc->p[1] + kw * wc->d[1];
                        /* count_pad counts the taps inside the padded input (not the ceil tail) */
                        if (count_pad && ih >= -wc->p[0] && ih < H + wc->p[2] && iw >= -wc->p[1] && iw < W + wc->p[3])
                            count++;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        double v = x[(nc * H + ih) * W + iw];
                        count += !count_pad;
                        if (is_max == 1)
                            acc = v > acc ? v : acc;
                        else if (is_max == 0)
                            acc += v, mag += fabs(v);
                        else
                            acc += v * wt[(nc % C) * wc->k[0] * wc->k[1] + kh * wc->k[1] + kw],
                                mag += fabs(v * wt[(nc % C) * wc->k[0] * wc->k[1] + kh * wc->k[1] + kw]);
                    }
                if (is_max == 1 && count == 0)
                    acc = -FLT_MAX; /* no tap inside x: the kernel's starting value */
                if (is_max == 0)
                    acc = count ? acc / (double)count : 0, mag = count ? mag / (double)count : 0;
                want[(nc * OH + oh) * OW + ow] = acc;
                scale[(nc * OH + oh) * OW + ow] = is_max == 1 ? fabs(acc) : mag;
            }
    call c;
    call_init(&c, is_max < 0 ? 3 : 1);
    c.in[0] = x, c.out[0] = y;
    c.in_meta[0] = meta(4, (int64_t[]){ N, C, H, W });
    c.out_meta[0] = meta(4, (int64_t[]){ N, C, OH, OW });
    char scratch[64];
    c.a.scratch = scratch, c.a.scratch_bytes = sizeof scratch;
    if (is_max >= 0) { /* attrs kernel, stride, pad, dilation */
        set_ints(&c.attr[0], wc->k[0], wc->k[1]);
        set_ints(&c.attr[1], wc->s[0], wc->s[1]);
        set_ints(&c.attr[2], wc->p[0], wc->p[1]);
        c.attr[2].ints[2] = wc->p[2], c.attr[2].ints[3] = wc->p[3], c.attr[2].n_ints = 4;
        set_ints(&c.attr[3], wc->d[0], wc->d[1]);
        c.attr[4].i = ceil, c.attr[5].i = count_pad;
    } else { /* attrs stride, pad, dilation, group; w [C, 1, KH, KW], b [C] */
        c.in[1] = wt, c.in[2] = b;
        c.in_meta[1] = meta(4, (int64_t[]){ C, 1, wc->k[0], wc->k[1] });
        c.in_meta[2] = meta(1, (int64_t[]){ C });
        set_ints(&c.attr[0], wc->s[0], wc->s[1]);
        set_ints(&c.attr[1], wc->p[0], wc->p[1]);
        c.attr[1].ints[2] = wc->p[2], c.attr[1].ints[3] = wc->p[3], c.attr[1].n_ints = 4;
        set_ints(&c.attr[2], wc->d[0], wc->d[1]);
        c.attr[3].i = C, c.attr[3].set = 1;
    }
    pbl__cpu_level_force(level);
    pbl_status s = is_max == 1 ? pbl__cpu_max_pool2d(&c.a) : is_max == 0 ? pbl__cpu_avg_pool2d(&c.a) : pbl__cpu_conv2d(&c.a);
    pbl__cpu_level_force(-1);
    th_set_case("%s at %s: x [2, 3, %lld, %lld] kernel %lldx%lld stride %lldx%lld pad %lld,%lld,%lld,%lld dilation %lldx%lld "
                "ceil %d count_pad %d",
                is_max == 1 ? "max_pool2d" : is_max == 0 ? "avg_pool2d" : "depthwise conv2d", pbl__cpu_level_name(level),
                (long long)H, (long long)W, (long long)wc->k[0], (long long)wc->k[1], (long long)wc->s[0],
                (long long)wc->s[1], (long long)wc->p[0], (long long)wc->p[1], (long long)wc->p[2], (long long)wc->p[3],
                (long long)wc->d[0], (long long)wc->d[1], ceil, count_pad);
    int fails = 0;
    if (s != PBL_OK) {
        printf("%s: %s (%s)\n", th_case, pbl_status_name(s), c.err);
        fails++;
    } else
        fails += th_close(th_case, y, want, scale, N * C * OH * OW, 0.0, 1e-6);
    free(x), free(wt), free(b), free(y), free(want), free(scale);
    return fails;
}

static void test_pool_depthwise(void **state)
{
    (void)state;
    th_rng r = th_rng_seed(5);
    static const int64_t sizes[][2] = { { 1, 1 }, { 4, 4 }, { 7, 9 }, { 16, 33 }, { 28, 28 } };
    int fails = 0;
    for (int l = 0; l < levels(); l++)
        for (size_t i = 0; i < sizeof wins / sizeof *wins; i++)
            for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++)
                for (int kind = -1; kind <= 1; kind++)
                    fails += window_case(l, &wins[i], sizes[j][0], sizes[j][1], kind, &r);
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
        cmocka_unit_test(test_exp_softmax_rows),
        cmocka_unit_test(test_pool_depthwise),
        cmocka_unit_test(test_level_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
