/* The CPU backend's worker pool (executor/cpu/pool.c) and the kernels that split their loops
 * over it (pbl__cpu_for): every index is run exactly once whatever the split, parts start on
 * 16-element boundaries, every split kernel gives the bits of its serial run, forced to split
 * into 2..4 parts at odd lengths (and the pool really ran a job), matrix products split over
 * the pool (ops/cpu/linear.c) put every element in its place within rounding of the exact
 * product and split only when asked and large enough, as do the convolutions' products
 * (exactly, on small integers), an MLP trained through the
 * executor with threads = 2 and 3 (pool on) and BLAS held single-threaded (blas_threads = 1)
 * ends with the bits of threads = 1, and with the products threaded too (split over the pool,
 * or on OpenBLAS's threads) each training step stays within a bound on rounding derived from
 * the problem. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "executor/cpu/pool.h"
#include "graph/ir/registry.h"
#include "pebble/pebble.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static uint64_t rng;
static uint32_t next(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float unit(void) { return (float)(next() >> 8) / 16777216.0f; } /* [0, 1) */

static pbl__mem mem;

static pbl__cpu_pool *make_pool(int32_t threads)
{
    pbl__cpu_pool *p = NULL;
    assert_int_equal(pbl__cpu_pool_create(&mem, threads, 256, &p), PBL_OK);
    assert_non_null(p);
    return p;
}

/* ---- the pool alone --------------------------------------------------------------------- */

typedef struct visit {
    uint8_t *count; /* per index: times run */
    uint8_t *start; /* per index: a part started here */
} visit;

static void visit_range(void *ctx, int64_t lo, int64_t hi)
{
    visit *v = ctx;
    v->start[lo] = 1;
    for (int64_t i = lo; i < hi; i++)
        v->count[i]++;
}

static void test_pool_runs_each_index_once(void **state)
{
    (void)state;
    static const int64_t lengths[] = { 1, 2, 15, 16, 17, 33, 100, 1000, 4099 };
    for (int32_t threads = 2; threads <= 4; threads++) {
        pbl__cpu_pool *p = make_pool(threads);
        pbl__par par = pbl__cpu_pool_par(p, 1);
        assert_int_equal(par.threads, threads);
        for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
            int64_t n = lengths[li];
            for (int32_t parts = 1; parts <= 4 * threads + 1; parts++) {
                visit v = { calloc((size_t)n, 1), calloc((size_t)n, 1) };
                uint64_t jobs = pbl__cpu_pool_jobs(p);
                par.run(par.pool, n, 16, parts, visit_range, &v);
                for (int64_t i = 0; i < n; i++) {
                    if (v.count[i] != 1 || (v.start[i] && i % 16))
                        fail_msg("threads %d, n %lld, parts %d: index %lld ran %d times%s", (int)threads,
                                 (long long)n, (int)parts, (long long)i, (int)v.count[i],
                                 v.start[i] && i % 16 ? ", a part starts there" : "");
                }
                /* a job goes to the workers only when it has 2 non-empty parts of 16 */
                uint64_t want = parts >= 2 && n > 16 ? 1 : 0;
                assert_int_equal(pbl__cpu_pool_jobs(p) - jobs, want);
                free(v.count);
                free(v.start);
            }
        }
        pbl__cpu_pool_destroy(p);
    }
    pbl__cpu_pool_destroy(NULL);
}

/* ---- split kernels against their serial runs -------------------------------------------- */

/* One kernel call: inputs and outputs as buffers of the given shapes; adam and the sgds write
 * their variables in place (out[k] is an input's buffer, as the executor lays them out). */
enum { MAX_BUF = 6 };
typedef struct kcase {
    const char *op;
    int32_t     n_in, n_out;
    pbl_shape   in_shape[MAX_BUF], out_shape[MAX_BUF];
    int32_t     out_is_in[MAX_BUF]; /* -1: its own buffer */
} kcase;

static int64_t numel(const pbl_shape *s) { return pbl_shape_numel(s); }

/* Runs the case once with par (NULL: serial) on fresh copies of `init` (the inputs) and
 * returns the outputs, concatenated (malloc'd). */
static float *run_case(const kcase *c, float *const *init, const pbl__par *par)
{
    int32_t id = pbl__op_find(c->op);
    assert_true(id >= 0);
    const pbl__op *op = pbl__op_get(id);
    pbl__attr_val attr[8];
    memset(attr, 0, sizeof attr);
    for (int32_t i = 0; i < op->n_attrs; i++) {
        attr[i].i = op->attrs[i].i;
        attr[i].f = op->attrs[i].f;
    }
    if (!strcmp(c->op, "adam") || !strcmp(c->op, "sgd") || !strcmp(c->op, "sgd_momentum")) {
        attr[0].f = 1e-2; /* lr */
        attr[op->n_attrs - 1].f = 1e-3; /* weight decay, so the w term is exercised */
    }
    void *in[MAX_BUF], *out[MAX_BUF];
    pbl__meta in_meta[MAX_BUF], out_meta[MAX_BUF];
    for (int32_t i = 0; i < c->n_in; i++) {
        size_t bytes = (size_t)numel(&c->in_shape[i]) * sizeof(float);
        in[i] = malloc(bytes);
        memcpy(in[i], init[i], bytes);
        in_meta[i] = (pbl__meta){ .dtype = PBL_F32, .shape = c->in_shape[i] };
    }
    int64_t total = 0;
    for (int32_t k = 0; k < c->n_out; k++) {
        out[k] = c->out_is_in[k] >= 0 ? in[c->out_is_in[k]] : calloc((size_t)numel(&c->out_shape[k]), sizeof(float));
        out_meta[k] = (pbl__meta){ .dtype = PBL_F32, .shape = c->out_shape[k] };
        total += numel(&c->out_shape[k]);
    }
    char err[128] = "";
    pbl__kargs a = { .in = in, .out = out, .in_meta = in_meta, .out_meta = out_meta, .attr = attr,
                     .n_in = c->n_in, .n_out = c->n_out, .err = err, .errlen = sizeof err, .par = par };
    if (op->cpu_scratch) { /* the column matrix of the convolutions */
        a.scratch_bytes = op->cpu_scratch(&a);
        a.scratch = malloc(a.scratch_bytes ? a.scratch_bytes : 1);
    }
    assert_int_equal(op->cpu(&a), PBL_OK);
    free(a.scratch);
    float *res = malloc((size_t)total * sizeof *res);
    for (int32_t k = 0, at = 0; k < c->n_out; at += (int)numel(&c->out_shape[k]), k++)
        memcpy(res + at, out[k], (size_t)numel(&c->out_shape[k]) * sizeof(float));
    for (int32_t k = 0; k < c->n_out; k++)
        if (c->out_is_in[k] < 0)
            free(out[k]);
    for (int32_t i = 0; i < c->n_in; i++)
        free(in[i]);
    return res;
}

static void test_split_kernels_match_serial(void **state)
{
    (void)state;
    enum { N = 4099, ROWS = 37, COLS = 1031 }; /* odd lengths: unequal parts, a ragged tail */
    const pbl_shape v = PBL_SHAPE(N), one = PBL_SHAPE(1), m = PBL_SHAPE(ROWS, COLS), col = PBL_SHAPE(COLS);
    const pbl_shape big = PBL_SHAPE(300007), scalar = PBL_SCALAR; /* past 64 chunks of 4096 */
    kcase cases[] = {
        { "relu", 1, 1, { v }, { v }, { -1 } },
        { "sigmoid", 1, 1, { v }, { v }, { -1 } },
        { "tanh", 1, 1, { v }, { v }, { -1 } },
        { "gelu", 1, 1, { v }, { v }, { -1 } },
        { "relu_grad", 2, 1, { v, v }, { v }, { -1 } },
        { "sigmoid_grad", 2, 1, { v, v }, { v }, { -1 } },
        { "tanh_grad", 2, 1, { v, v }, { v }, { -1 } },
        { "gelu_grad", 2, 1, { v, v }, { v }, { -1 } },
        { "relu", 1, 1, { m }, { m }, { 0 } }, /* in place */
        { "sum_to", 1, 1, { m }, { col }, { -1 } }, /* a bias gradient */
        { "sgd", 2, 1, { v, v }, { v }, { 0 } },
        { "sgd_momentum", 3, 2, { v, v, v }, { v, v }, { 0, 2 } },
        { "adam", 5, 4, { v, v, v, v, one }, { v, v, v, one }, { 0, 2, 3, 4 } },
        /* the sum of squares in fixed chunks: inputs that end mid-chunk and mid-lane */
        { "global_norm", 3, 1, { v, m, one }, { scalar }, { -1 } },
        { "global_norm", 3, 1, { m, big, v }, { scalar }, { -1 } },
    };
    for (int32_t threads = 2; threads <= 4; threads++) {
        pbl__cpu_pool *p = make_pool(threads);
        pbl__par par = pbl__cpu_pool_par(p, 1); /* every loop long enough to split */
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            const kcase *c = &cases[ci];
            float *init[MAX_BUF];
            rng = 7u + ci;
            for (int32_t i = 0; i < c->n_in; i++) {
                int64_t n = numel(&c->in_shape[i]);
                init[i] = malloc((size_t)n * sizeof(float));
                for (int64_t j = 0; j < n; j++)
                    init[i][j] = 4.0f * unit() - 2.0f;
            }
            if (!strcmp(c->op, "adam")) { /* m, v >= 0 as Adam keeps them; t a step count */
                for (int64_t j = 0; j < N; j++)
                    init[3][j] = init[3][j] * init[3][j];
                init[4][0] = 3.0f;
            }
            float *want = run_case(c, init, NULL);
            uint64_t jobs = pbl__cpu_pool_jobs(p);
            float *got = run_case(c, init, &par);
            if (pbl__cpu_pool_jobs(p) == jobs)
                fail_msg("%s on %d threads: the kernel did not split", c->op, (int)threads);
            int64_t total = 0;
            for (int32_t k = 0; k < c->n_out; k++)
                total += numel(&c->out_shape[k]);
            for (int64_t j = 0; j < total; j++)
                if (memcmp(&got[j], &want[j], sizeof(float)))
                    fail_msg("%s on %d threads: output element %lld is %.9g split, %.9g serial", c->op,
                             (int)threads, (long long)j, (double)got[j], (double)want[j]);
            free(want);
            free(got);
            for (int32_t i = 0; i < c->n_in; i++)
                free(init[i]);
        }
        pbl__cpu_pool_destroy(p);
    }
}

/* ---- matrix products split over the pool (ops/cpu/linear.c) ------------------------------ */

/* γ(n) = n·u / (1 − n·u), u = 2^-24: a float sum of n products is within γ(n)·Σ|products| of the
 * exact sum in any order (see the bound further down). */
static double gam(int64_t n)
{
    const double u = 0x1p-24;
    return (double)n * u / (1 - (double)n * u);
}

/* One product case: fully_connected (x[m,k]·w[n,k]ᵀ, with a bias when `bias`) or matmul
 * (op(a)[m,k]·op(b)[k,n], `batch` of them). */
typedef struct pcase {
    int     fc, bias, ta, tb;
    int64_t batch, m, n, k;
} pcase;

enum { GUARD = 64 }; /* floats past the end of each output, which no part may touch */

/* Runs the case with par (NULL: serial) on the given inputs, into a fresh output filled with
 * NaN (an element no part writes stays NaN) followed by GUARD sentinels; checks the guard and
 * returns the output (malloc'd). */
static float *run_product(const pcase *c, float *const *in_data, const pbl__par *par)
{
    const pbl__op *op = pbl__op_get(pbl__op_find(c->fc ? "fully_connected" : "matmul"));
    pbl__attr_val attr[2] = { { .i = c->ta }, { .i = c->tb } };
    pbl__meta in_meta[3], out_meta[1];
    int64_t out_n = c->batch * c->m * c->n;
    if (c->fc) {
        in_meta[0] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(c->m, c->k) };
        in_meta[1] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(c->n, c->k) };
        in_meta[2] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(c->n) };
        out_meta[0] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(c->m, c->n) };
    } else {
        in_meta[0] = (pbl__meta){ .dtype = PBL_F32,
                                  .shape = c->ta ? PBL_SHAPE(c->batch, c->k, c->m) : PBL_SHAPE(c->batch, c->m, c->k) };
        in_meta[1] = (pbl__meta){ .dtype = PBL_F32,
                                  .shape = c->tb ? PBL_SHAPE(c->batch, c->n, c->k) : PBL_SHAPE(c->batch, c->k, c->n) };
        out_meta[0] = (pbl__meta){ .dtype = PBL_F32, .shape = PBL_SHAPE(c->batch, c->m, c->n) };
    }
    float *out = malloc((size_t)(out_n + GUARD) * sizeof *out);
    for (int64_t i = 0; i < out_n; i++)
        out[i] = NAN;
    for (int64_t i = 0; i < GUARD; i++)
        out[out_n + i] = -7.0f;
    void *in[3] = { in_data[0], in_data[1], in_data[2] }, *outp[1] = { out };
    char err[128] = "";
    pbl__kargs a = { .in = in, .out = outp, .in_meta = in_meta, .out_meta = out_meta, .attr = attr,
                     .n_in = c->fc ? 2 + c->bias : 2, .n_out = 1, .err = err, .errlen = sizeof err, .par = par };
    assert_int_equal(op->cpu(&a), PBL_OK);
    for (int64_t i = 0; i < GUARD; i++)
        if (out[out_n + i] != -7.0f)
            fail_msg("product %lldx%lldx%lld: a part wrote %lld floats past the output", (long long)c->m,
                     (long long)c->n, (long long)c->k, (long long)i);
    return out;
}

/* Every element of a split product lands in its place and within the rounding any order of
 * its sum may give (Higham's γ(k+1)·Σ|terms|, see the bound further down) of the exact value,
 * computed here in double; the pool really ran a job. Awkward shapes: parts of unequal size
 * and a ragged tail, rows too few to split (then the columns are), transposed operands,
 * leading dimensions wider than the part, a bias preloaded into each part's block. Never
 * compared bit for bit: the parts are BLAS calls of other shapes than the whole. */
static void test_split_products_match_exact(void **state)
{
    (void)state;
    static const pcase cases[] = {
        { .fc = 1, .bias = 1, .batch = 1, .m = 130, .n = 33, .k = 200 },
        { .fc = 1, .bias = 0, .batch = 1, .m = 257, .n = 10, .k = 37 },
        { .fc = 1, .bias = 1, .batch = 1, .m = 17, .n = 130, .k = 64 },   /* too few rows: columns */
        { .fc = 1, .bias = 1, .batch = 1, .m = 1, .n = 1000, .k = 3 },
        { .fc = 0, .ta = 0, .tb = 0, .batch = 1, .m = 129, .n = 70, .k = 65 },
        { .fc = 0, .ta = 1, .tb = 0, .batch = 1, .m = 10, .n = 300, .k = 128 }, /* a weight gradient */
        { .fc = 0, .ta = 1, .tb = 0, .batch = 1, .m = 99, .n = 131, .k = 40 },
        { .fc = 0, .ta = 0, .tb = 1, .batch = 2, .m = 100, .n = 17, .k = 33 },
        { .fc = 0, .ta = 1, .tb = 1, .batch = 3, .m = 5, .n = 97, .k = 9 },
    };
    for (int32_t threads = 2; threads <= 4; threads++) {
        pbl__cpu_pool *p = make_pool(threads);
        pbl__par par = pbl__cpu_pool_par(p, 1); /* every product large enough to split */
        par.products = 1;
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            const pcase *c = &cases[ci];
            int64_t na = c->batch * c->m * c->k, nb = c->batch * c->k * c->n;
            float *in[3] = { malloc((size_t)na * sizeof(float)), malloc((size_t)nb * sizeof(float)),
                             malloc((size_t)c->n * sizeof(float)) };
            rng = 11u + ci;
            for (int64_t i = 0; i < na; i++)
                in[0][i] = 4.0f * unit() - 2.0f;
            for (int64_t i = 0; i < nb; i++)
                in[1][i] = 4.0f * unit() - 2.0f;
            for (int64_t i = 0; i < c->n; i++)
                in[2][i] = 4.0f * unit() - 2.0f;
            uint64_t jobs = pbl__cpu_pool_jobs(p);
            float *got = run_product(c, in, &par);
            if (pbl__cpu_pool_jobs(p) == jobs)
                fail_msg("product %lldx%lldx%lld on %d threads: it did not split", (long long)c->m,
                         (long long)c->n, (long long)c->k, (int)threads);
            for (int64_t bi = 0; bi < c->batch; bi++)
                for (int64_t i = 0; i < c->m; i++)
                    for (int64_t j = 0; j < c->n; j++) {
                        /* fully_connected: a = x[m,k], b = w[n,k] (op(b) = wᵀ) */
                        int ta = c->fc ? 0 : c->ta, tb = c->fc ? 1 : c->tb;
                        const float *A = in[0] + bi * c->m * c->k, *Bm = in[1] + bi * c->k * c->n;
                        double exact = c->fc && c->bias ? in[2][j] : 0.0, mag = fabs(exact);
                        for (int64_t k = 0; k < c->k; k++) {
                            double t = (double)(ta ? A[k * c->m + i] : A[i * c->k + k]) *
                                       (double)(tb ? Bm[j * c->k + k] : Bm[k * c->n + j]);
                            exact += t;
                            mag += fabs(t);
                        }
                        double v = got[(bi * c->m + i) * c->n + j], bound = 1.01 * gam(c->k + 1) * mag;
                        if (!(fabs(v - exact) <= bound))
                            fail_msg("%s %lldx%lldx%lld (ta %d, tb %d) on %d threads: element [%lld,%lld,%lld] is "
                                     "%.9g, exact %.9g (bound %.3g)", c->fc ? "fully_connected" : "matmul",
                                     (long long)c->m, (long long)c->n, (long long)c->k, ta, tb, (int)threads,
                                     (long long)bi, (long long)i, (long long)j, v, exact, bound);
                    }
            free(got);
            for (int i = 0; i < 3; i++)
                free(in[i]);
        }
        pbl__cpu_pool_destroy(p);
    }
    print_message("%d products split over 2-4 threads: every element written once, in place, within rounding "
                  "of the exact product\n", (int)(sizeof cases / sizeof *cases));
}

/* The convolutions' products (ops/cpu/conv.c) go through the same split: with small integers
 * every sum is exact in float whatever its order, so split and serial runs must agree bit for
 * bit (a part in the wrong place, run twice or not at all cannot), and the pool must have run
 * a job. conv2d splits the rows of w·col (70 output channels), its input gradient the columns
 * of wᵀ·dy (36 rows, 100 output positions), its weight gradient the rows of dy·colᵀ, each
 * part accumulating the samples in turn (beta 1 after the first). */
static void test_split_convolutions_exact(void **state)
{
    (void)state;
    const pbl_shape x = PBL_SHAPE(3, 4, 12, 12), w = PBL_SHAPE(70, 4, 3, 3), b = PBL_SHAPE(70),
                    y = PBL_SHAPE(3, 70, 10, 10);
    kcase cases[] = {
        { "conv2d", 3, 1, { x, w, b }, { y }, { -1 } },
        { "conv2d_grad_input", 2, 1, { y, w }, { x }, { -1 } },
        { "conv2d_grad_weight", 2, 1, { y, x }, { w }, { -1 } },
    };
    pbl__cpu_pool *p = make_pool(2);
    pbl__par par = pbl__cpu_pool_par(p, 1);
    par.products = 1;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const kcase *c = &cases[ci];
        float *init[MAX_BUF];
        rng = 5u + ci;
        for (int32_t i = 0; i < c->n_in; i++) {
            int64_t n = numel(&c->in_shape[i]);
            init[i] = malloc((size_t)n * sizeof(float));
            for (int64_t j = 0; j < n; j++)
                init[i][j] = (float)(int)(next() % 5) - 2.0f; /* -2..2 */
        }
        float *want = run_case(c, init, NULL);
        uint64_t jobs = pbl__cpu_pool_jobs(p);
        float *got = run_case(c, init, &par);
        if (pbl__cpu_pool_jobs(p) == jobs)
            fail_msg("%s: its products did not split", c->op);
        for (int64_t j = 0; j < numel(&c->out_shape[0]); j++)
            if (memcmp(&got[j], &want[j], sizeof(float)))
                fail_msg("%s: output element %lld is %.9g split, %.9g serial (exact sums)", c->op, (long long)j,
                         (double)got[j], (double)want[j]);
        free(want);
        free(got);
        for (int32_t i = 0; i < c->n_in; i++)
            free(init[i]);
    }
    pbl__cpu_pool_destroy(p);
}

/* Products stay whole without the flag, and where they are too small or too thin to split. */
static void test_products_split_only_when_asked(void **state)
{
    (void)state;
    pbl__cpu_pool *p = make_pool(2);
    pbl__par par = pbl__cpu_pool_par(p, 1);
    static const pcase big = { .fc = 0, .batch = 1, .m = 256, .n = 256, .k = 64 };
    static const pcase thin = { .fc = 0, .batch = 1, .m = 40, .n = 40, .k = 4096 }; /* < 2 parts of 32 */
    float *in[3] = { calloc(256 * 4096, sizeof(float)), calloc(256 * 4096, sizeof(float)), NULL };
    const struct { const pcase *c; int products; int64_t min_work; int split; } want[] = {
        { &big, 0, 1, 0 }, { &big, 1, 1, 1 }, { &big, 1, 256 * 256 * 64, 0 }, { &thin, 1, 1, 0 },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        par.products = want[i].products;
        par.min_work = want[i].min_work;
        uint64_t jobs = pbl__cpu_pool_jobs(p);
        free(run_product(want[i].c, in, &par));
        if ((pbl__cpu_pool_jobs(p) != jobs) != want[i].split)
            fail_msg("case %zu: the product %s split", i, want[i].split ? "was not" : "was");
    }
    free(in[0]);
    free(in[1]);
    pbl__cpu_pool_destroy(p);
}

/* ---- an MLP through the executor ---------------------------------------------------------- */

/* Big enough that the pool splits (parts of 16384 element-costs, executor/cpu/backend.c) the
 * relu, its gradient and b1's gradient sum (128·256 elements each) and w1's update (40960),
 * and that the products are threaded: x·w1ᵀ and w1's gradient are 128·256·160 = 5.2 M
 * multiply-adds, above the 65536·4 below which OpenBLAS 0.3.21 keeps an sgemm on one thread,
 * and above the 2 x 2^17 the pool splits (ops/cpu/linear.c). */
enum { B = 128, D = 160, H = 256, C = 10, N_PARAMS = 4, STEPS = 5 };
static const int64_t param_numel[N_PARAMS] = { H * D, H, C * H, C };
enum { NP = H * D + H + C * H + C }; /* every parameter, w1 b1 w2 b2 end to end */

typedef struct mlp {
    pbl_graph *g;
    pbl_value  x, y, loss, ps[N_PARAMS], gs[N_PARAMS];
} mlp;

/* relu(x·w1ᵀ + b1)·w2ᵀ + b2, softmax cross-entropy, then `optim` over the four parameters. */
static void mlp_build(mlp *m, pbl_optimizer_kind optim, double lr)
{
    assert_int_equal(pbl_graph_create(&m->g, NULL), PBL_OK);
    pbl_graph *g = m->g;
    m->x = pbl_input(g, "x", PBL_SHAPE(B, D));
    m->y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(B));
    m->ps[0] = pbl_param(g, "w1", PBL_SHAPE(H, D));
    m->ps[1] = pbl_param(g, "b1", PBL_SHAPE(H));
    m->ps[2] = pbl_param(g, "w2", PBL_SHAPE(C, H));
    m->ps[3] = pbl_param(g, "b2", PBL_SHAPE(C));
    pbl_value h = pbl_relu(g, pbl_fully_connected(g, m->x, m->ps[0], m->ps[1]));
    m->loss = pbl_softmax_cross_entropy(g, pbl_fully_connected(g, h, m->ps[2], m->ps[3]), m->y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", m->loss), PBL_OK);
    assert_int_equal(pbl_graph_gradient(g, m->loss, m->ps, N_PARAMS, m->gs), PBL_OK);
    pbl_optimizer_options oo = pbl_optimizer_options_default(optim);
    oo.lr = lr;
    assert_int_equal(pbl_graph_add_optimizer(g, &oo, m->ps, m->gs, N_PARAMS), PBL_OK);
}

static pbl_exec *mlp_exec(const mlp *m, pbl_storage_mode storage, int32_t threads, int32_t blas_threads)
{
    pbl_exec_options o = pbl_exec_options_default();
    o.storage = storage;
    o.threads = threads;
    o.blas_threads = blas_threads;
    pbl_exec *e = NULL;
    char err[256];
    if (pbl_exec_create(&e, m->g, &o, err, sizeof err) != PBL_OK)
        fail_msg("pbl_exec_create: %s", err);
    return e;
}

/* Writes the seeded parameters (rng = 42) to p[NP]. */
static void init_params(float *p)
{
    rng = 42;
    for (size_t i = 0; i < NP; i++)
        p[i] = (2.0f * unit() - 1.0f) * 0.08f;
}

/* The next batch from rng: class k has +1 on features k, k + C, ... */
static void next_batch(float *x, int32_t *y)
{
    for (int i = 0; i < B; i++) {
        y[i] = (int32_t)(next() % C);
        for (int j = 0; j < D; j++)
            x[i * D + j] = unit() - 0.5f + (j % C == y[i] ? 1.0f : 0.0f);
    }
}

/* Trains STEPS Adam steps with `threads` and `blas_threads`; returns every parameter, then the
 * losses (malloc'd). */
static float *train(int32_t threads, int32_t blas_threads, size_t *n_out)
{
    mlp m;
    mlp_build(&m, PBL_OPTIM_ADAM, 1e-3);
    pbl_exec *e = mlp_exec(&m, PBL_STORAGE_PLANNED, threads, blas_threads);
    float *res = calloc(NP + STEPS, sizeof *res);
    init_params(res);
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++)
        assert_int_equal(pbl_exec_write(e, m.ps[p], res + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    static float xb[B * D];
    static int32_t yb[B];
    for (int s = 0; s < STEPS; s++) {
        next_batch(xb, yb);
        assert_int_equal(pbl_exec_write(e, m.x, xb, sizeof xb), PBL_OK);
        assert_int_equal(pbl_exec_write(e, m.y, yb, sizeof yb), PBL_OK);
        assert_int_equal(pbl_exec_run(e), PBL_OK);
        assert_int_equal(pbl_exec_read(e, m.loss, res + NP + s, sizeof(float)), PBL_OK);
    }
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++)
        assert_int_equal(pbl_exec_read(e, m.ps[p], res + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    pbl_exec_destroy(e);
    pbl_graph_destroy(m.g);
    *n_out = NP + STEPS;
    return res;
}

/* Our determinism with BLAS held fixed: with blas_threads = 1 OpenBLAS runs every product on
 * the calling thread as with threads = 1, and the pool splits the rest element by element, so
 * 2 and 3 threads give the bits of 1. (With BLAS's own threads the products may round
 * otherwise: see test_training_blas_threads_within_bound.) Also under TSan, which sees every
 * thread at work here: OpenBLAS runs a product on the calling thread when its count is 1. */
static void test_training_threads_match(void **state)
{
    (void)state;
    size_t n1, n;
    float *one = train(1, 1, &n1);
    for (int32_t threads = 2; threads <= 3; threads++) {
        float *got = train(threads, 1, &n);
        assert_int_equal(n, n1);
        for (size_t i = 0; i < n1; i++)
            if (memcmp(&one[i], &got[i], sizeof(float)))
                fail_msg("value %zu of %zu (parameters, then losses): %.9g with %d threads, %.9g with 1 (BLAS "
                         "single-threaded in both)", i, n1, (double)got[i], (int)threads, (double)one[i]);
        free(got);
    }
    print_message("%d parameters and %d losses: same bits with threads 1, 2 and 3, blas_threads 1 (last loss "
                  "%.6g)\n", (int)NP, STEPS, (double)one[n1 - 1]);
    free(one);
}

/* A negative blas_threads is refused at create, naming the field. */
static void test_blas_threads_checked(void **state)
{
    (void)state;
    mlp m;
    mlp_build(&m, PBL_OPTIM_SGD, 0.1);
    pbl_exec_options o = pbl_exec_options_default();
    o.blas_threads = -1;
    pbl_exec *e = NULL;
    char err[256];
    assert_int_equal(pbl_exec_create(&e, m.g, &o, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_null(e);
    assert_non_null(strstr(err, "blas_threads"));
    print_message("blas_threads -1 -> %s\n", err);
    pbl_graph_destroy(m.g);
}

/* ---- threads 2 against 1 with BLAS's own threads: within a bound from the problem ---------- */

/* threads = 2 also threads the products, split over the pool (blas_threads 0) or on OpenBLAS's
 * 2 threads (blas_threads 2), and neither always rounds like one single-threaded call (0.3.21's
 * Haswell and Zen kernels change the last bits of 15% of the elements of a 128x256x160 product
 * on 2 threads; a part of fewer rows may take other kernel paths), so the two runs are
 * compared within a bound on what rounding alone can do, derived below from the problem; a
 * pool that drops, repeats or races a part, or a product read before it is written, misses
 * it by orders of magnitude.
 *
 * Each step starts both executors from the same parameters (run A's, copied into run B's), so
 * the bound is one training step deep; SGD keeps the update linear in the gradient. Each run is
 * compared with the exact step (computed here in double; its own error, ~1e-16 relative, is
 * covered by the 1% added at the end), and two runs within E of it are within 2E of each other.
 * With u = 2^-24 and γ(n) = n·u / (1 − n·u), a sum of n products computed in any order, with
 * or without fused multiply-adds, is within γ(n)·Σ|products| of the exact sum (Higham, Accuracy
 * and Stability of Numerical Algorithms, 2nd ed., §3.1); sums whose inputs carry errors e add
 * Σ|factor|·e. Per element, with the exact values on the right (|·| of each factor):
 *   z1 = x·w1ᵀ + b1 (D + 1 terms): e_z1 = γ(D+1)·(Σ|x||w1| + |b1|); h = relu(z1): e_h = e_z1
 *   z2 = h·w2ᵀ + b2: e_z2 = Σ|w2|·e_h + γ(H+1)·(Σ(|h| + e_h)|w2| + |b2|)
 *   loss row i, lse(z2) − z2[y]: 2·max_k e_z2 (lse moves by at most the largest change) plus
 *     the kernel's own rounding: a subtraction and an expf per logit (glibc's expf is within 1
 *     ulp), a float sum of C terms, a logf and two float operations, together below
 *     (C + 4 + R + 2|L| + |m + L| + |loss_i|)·u with R = max|z2 − m|, m the row's max and
 *     L = log Σ exp(z2 − m); the mean over rows is summed in double and rounded once: + u|loss|
 *   dz2 = (softmax(z2) − onehot(y)) / B: softmax's k-th element moves by at most a factor
 *     e^{±2δ} for logits that move by δ, so p·(e^{2δ} − 1) with δ = max_k e_z2, plus the
 *     kernel's rounding (the expf, sum, division and product above: p·(C + 8 + 2R)·u, and
 *     u·|dz2| for the label's subtraction), all / B (a power of two: exact)
 *   dw2 = dz2ᵀ·h and dw1 = dz1ᵀ·x (B terms), dh = dz2·w2 (C terms): the sum rule above
 *   db2, db1: float sums of B terms (sum over axis 0), the same rule
 *   dz1 = dh where h > 0: e_dh, or |dh| + e_dh where |z1| ≤ e_z1 (the mask may flip)
 *   sgd, w − lr·g in float: lr·e_g + u·lr·(|g| + e_g) + u·(|w − lr·g| + lr·e_g)
 * The bound is first order (products of two error terms, ~1e-12 relative, are in the 1%). */

/* One step's exact loss, gradients (w1 b1 w2 b2 end to end) and their error bounds E (each
 * run's distance from them), from parameters p and the batch (x, y). */
typedef struct step_bound {
    double loss, e_loss;
    double g[NP], e_g[NP];
} step_bound;

static void bound_step(const float *p, const float *x, const int32_t *y, step_bound *sb)
{
    const double u = 0x1p-24;
    const float *w1 = p, *b1 = p + H * D, *w2 = b1 + H, *b2 = w2 + C * H;
    static double z1[B][H], e_h[B][H], h[B][H], z2[B][C], e_z2[B][C], dz2[B][C], e_dz2[B][C];
    static double dz1[B][H], e_dz1[B][H];
    double *g = sb->g, *e = sb->e_g;
    memset(sb, 0, sizeof *sb);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < H; j++) {
            double s = b1[j], a = fabs((double)b1[j]);
            for (int k = 0; k < D; k++) {
                s += (double)x[i * D + k] * w1[j * D + k];
                a += fabs((double)x[i * D + k] * w1[j * D + k]);
            }
            z1[i][j] = s;
            e_h[i][j] = gam(D + 1) * a;
            h[i][j] = s > 0 ? s : 0;
        }
    for (int i = 0; i < B; i++) {
        double mx = -INFINITY, delta = 0, sum = 0, r = 0;
        for (int k = 0; k < C; k++) {
            double s = b2[k], a = fabs((double)b2[k]), prop = 0;
            for (int j = 0; j < H; j++) {
                s += h[i][j] * w2[k * H + j];
                a += (h[i][j] + e_h[i][j]) * fabs((double)w2[k * H + j]);
                prop += e_h[i][j] * fabs((double)w2[k * H + j]);
            }
            z2[i][k] = s;
            e_z2[i][k] = prop + gam(H + 1) * a;
            mx = s > mx ? s : mx;
            delta = e_z2[i][k] > delta ? e_z2[i][k] : delta;
        }
        for (int k = 0; k < C; k++) {
            sum += exp(z2[i][k] - mx);
            r = fabs(z2[i][k] - mx) > r ? fabs(z2[i][k] - mx) : r;
        }
        double lse_m = log(sum), row = mx + lse_m - z2[i][y[i]];
        sb->loss += row / B;
        sb->e_loss += (2 * delta + (C + 4 + r + 2 * fabs(lse_m) + fabs(mx + lse_m) + fabs(row)) * u) / B;
        for (int k = 0; k < C; k++) {
            double pk = exp(z2[i][k] - mx) / sum, d = pk - (k == y[i]);
            dz2[i][k] = d / B;
            e_dz2[i][k] = (pk * expm1(2 * delta) + pk * (C + 8 + 2 * r) * u + u * fabs(d)) / B;
        }
    }
    sb->e_loss += u * fabs(sb->loss);
    /* dh = dz2·w2 (C terms), then dz1 through relu's mask */
    for (int i = 0; i < B; i++)
        for (int j = 0; j < H; j++) {
            double s = 0, a = 0, prop = 0;
            for (int k = 0; k < C; k++) {
                s += dz2[i][k] * w2[k * H + j];
                a += (fabs(dz2[i][k]) + e_dz2[i][k]) * fabs((double)w2[k * H + j]);
                prop += e_dz2[i][k] * fabs((double)w2[k * H + j]);
            }
            double e_dh = prop + gam(C) * a;
            dz1[i][j] = z1[i][j] > 0 ? s : 0;
            e_dz1[i][j] = fabs(z1[i][j]) <= e_h[i][j] ? fabs(s) + e_dh : z1[i][j] > 0 ? e_dh : 0;
        }
    /* dw1 = dz1ᵀ·x, db1 = Σ dz1; dw2 = dz2ᵀ·h, db2 = Σ dz2 (B terms each) */
    double *gw1 = g, *gb1 = g + H * D, *gw2 = gb1 + H, *gb2 = gw2 + C * H;
    double *ew1 = e, *eb1 = e + H * D, *ew2 = eb1 + H, *eb2 = ew2 + C * H;
    for (int j = 0; j < H; j++) {
        double sb1 = 0, ab1 = 0, pb1 = 0;
        for (int i = 0; i < B; i++) {
            sb1 += dz1[i][j];
            ab1 += fabs(dz1[i][j]) + e_dz1[i][j];
            pb1 += e_dz1[i][j];
        }
        gb1[j] = sb1;
        eb1[j] = pb1 + gam(B) * ab1;
        for (int k = 0; k < D; k++) {
            double s = 0, a = 0, prop = 0;
            for (int i = 0; i < B; i++) {
                double xv = fabs((double)x[i * D + k]);
                s += dz1[i][j] * x[i * D + k];
                a += (fabs(dz1[i][j]) + e_dz1[i][j]) * xv;
                prop += e_dz1[i][j] * xv;
            }
            gw1[j * D + k] = s;
            ew1[j * D + k] = prop + gam(B) * a;
        }
    }
    for (int k = 0; k < C; k++) {
        double sb2 = 0, ab2 = 0, pb2 = 0;
        for (int i = 0; i < B; i++) {
            sb2 += dz2[i][k];
            ab2 += fabs(dz2[i][k]) + e_dz2[i][k];
            pb2 += e_dz2[i][k];
        }
        gb2[k] = sb2;
        eb2[k] = pb2 + gam(B) * ab2;
        for (int j = 0; j < H; j++) {
            double s = 0, a = 0, prop = 0;
            for (int i = 0; i < B; i++) {
                s += dz2[i][k] * h[i][j];
                a += (fabs(dz2[i][k]) + e_dz2[i][k]) * (h[i][j] + e_h[i][j]);
                prop += e_dz2[i][k] * h[i][j] + fabs(dz2[i][k]) * e_h[i][j];
            }
            gw2[k * H + j] = s;
            ew2[k * H + j] = prop + gam(B) * a;
        }
    }
}

/* |a − b| ≤ 1.01·2E for each of n values; returns the largest |a − b| / 2E and counts the
 * values whose bits differ. */
static double check_within(const char *what, int step, const float *a, const float *b, const double *e, size_t n,
                           int64_t *differ)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]), lim = 2 * e[i];
        if (d > 1.01 * lim)
            fail_msg("step %d, %s[%zu]: %.9g with 2 threads, %.9g with 1: apart by %.3g, more than rounding can "
                     "explain (%.3g)", step + 1, what, i, (double)b[i], (double)a[i], d, lim);
        if (lim > 0 && d / lim > worst)
            worst = d / lim;
        *differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
    }
    return worst;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* threads 2 against 1 with the products threaded as blas_threads says for run B: 0, split over
 * the pool; 2, OpenBLAS's own threads. */
static void training_within_bound(int32_t blas_threads)
{
    const double lr = 0.05;
    mlp m;
    mlp_build(&m, PBL_OPTIM_SGD, lr);
    /* unshared storage: every gradient keeps its own bytes, readable after the run */
    pbl_exec *ea = mlp_exec(&m, PBL_STORAGE_UNSHARED, 1, 0),
             *eb = mlp_exec(&m, PBL_STORAGE_UNSHARED, 2, blas_threads);
    static float pa[NP], pb[NP], p0[NP], ga[NP], gb[NP], xb[B * D];
    static double e_w[NP];
    static step_bound sb;
    int32_t yb[B];
    init_params(pa);
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++) {
        assert_int_equal(pbl_exec_bind(ea, m.ps[p], pa + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
        assert_int_equal(pbl_exec_bind(eb, m.ps[p], pb + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    }
    static double rel[NP];
    size_t n_rel = 0;
    double worst = 0;
    int64_t differ = 0;
    for (int s = 0; s < STEPS; s++) {
        memcpy(pb, pa, sizeof pb);
        memcpy(p0, pa, sizeof p0);
        next_batch(xb, yb);
        bound_step(p0, xb, yb, &sb);
        pbl_exec *es[2] = { ea, eb };
        float loss[2];
        for (int r = 0; r < 2; r++) {
            assert_int_equal(pbl_exec_write(es[r], m.x, xb, sizeof xb), PBL_OK);
            assert_int_equal(pbl_exec_write(es[r], m.y, yb, sizeof yb), PBL_OK);
            assert_int_equal(pbl_exec_run(es[r]), PBL_OK);
            assert_int_equal(pbl_exec_read(es[r], m.loss, &loss[r], sizeof(float)), PBL_OK);
            float *gr = r ? gb : ga;
            for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++)
                assert_int_equal(pbl_exec_read(es[r], m.gs[p], gr + at, (size_t)param_numel[p] * sizeof(float)),
                                 PBL_OK);
        }
        double w = check_within("loss", s, &loss[0], &loss[1], &sb.e_loss, 1, &differ);
        worst = w > worst ? w : worst;
        w = check_within("gradient (w1 b1 w2 b2)", s, ga, gb, sb.e_g, NP, &differ);
        worst = w > worst ? w : worst;
        n_rel = 0;
        for (size_t i = 0; i < NP; i++) {
            double gi = fabs(sb.g[i]), eg = sb.e_g[i], u = 0x1p-24, lrf = (float)lr; /* the kernel's lr */
            e_w[i] = lrf * eg + u * lrf * (gi + eg) + u * (fabs((double)p0[i] - lrf * sb.g[i]) + lrf * eg);
            if (gi > 0)
                rel[n_rel++] = eg / gi;
        }
        w = check_within("parameter after the update", s, pa, pb, e_w, NP, &differ);
        worst = w > worst ? w : worst;
    }
    qsort(rel, n_rel, sizeof *rel, cmp_double);
    print_message("%d SGD steps, threads 2 (products %s) against 1: loss, %d gradients and parameters "
                  "within the rounding bound E, the largest difference %.3g E; %lld values differ in their bits; "
                  "E over |gradient|: median %.2g, 99th percentile %.2g (last step)\n", STEPS,
                  blas_threads ? "on OpenBLAS's 2 threads" : "split over the pool", (int)NP, worst,
                  (long long)differ, rel[n_rel / 2], rel[n_rel * 99 / 100]);
    pbl_exec_destroy(ea);
    pbl_exec_destroy(eb);
    pbl_graph_destroy(m.g);
}

static void test_training_blas_threads_within_bound(void **state)
{
    (void)state;
#ifdef UNDER_TSAN
    skip(); /* OpenBLAS's own threads are not instrumented (the pool is covered above) */
#endif
    training_within_bound(0);
    training_within_bound(2);
}

int main(void)
{
    pbl__mem_init(&mem, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_runs_each_index_once),
        cmocka_unit_test(test_split_kernels_match_serial),
        cmocka_unit_test(test_split_products_match_exact),
        cmocka_unit_test(test_products_split_only_when_asked),
        cmocka_unit_test(test_split_convolutions_exact),
        cmocka_unit_test(test_training_threads_match),
        cmocka_unit_test(test_training_blas_threads_within_bound),
        cmocka_unit_test(test_blas_threads_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
