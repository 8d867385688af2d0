/* The CPU backend's worker pool (executor/cpu/pool.c) and the kernels that split their loops
 * over it (pbl__cpu_for): every index is run exactly once whatever the split, parts start on
 * 16-element boundaries, every split kernel gives the bits of its serial run, forced to split
 * into 2..4 parts at odd lengths (and the pool really ran a job), and an MLP trained through
 * the executor with threads = 2 (pool on) ends with the bits of threads = 1. */
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
    assert_int_equal(pbl__cpu_pool_create(&mem, threads, &p), PBL_OK);
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
    assert_int_equal(op->cpu(&a), PBL_OK);
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

/* ---- an MLP through the executor ---------------------------------------------------------- */

/* Big enough that the default threshold splits: w1 is 40960 elements. */
enum { B = 64, D = 160, H = 256, C = 10, N_PARAMS = 4, STEPS = 5 };
static const int64_t param_numel[N_PARAMS] = { H * D, H, C * H, C };

/* Trains STEPS steps with `threads`; returns every parameter, then the losses (malloc'd). */
static float *train(int32_t threads, size_t *n_out)
{
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(B, D)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(B));
    pbl_value ps[N_PARAMS] = { pbl_param(g, "w1", PBL_SHAPE(H, D)), pbl_param(g, "b1", PBL_SHAPE(H)),
                               pbl_param(g, "w2", PBL_SHAPE(C, H)), pbl_param(g, "b2", PBL_SHAPE(C)) };
    pbl_value h = pbl_relu(g, pbl_fully_connected(g, x, ps[0], ps[1]));
    pbl_value loss = pbl_softmax_cross_entropy(g, pbl_fully_connected(g, h, ps[2], ps[3]), y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", loss), PBL_OK);
    pbl_value gs[N_PARAMS];
    assert_int_equal(pbl_graph_gradient(g, loss, ps, N_PARAMS, gs), PBL_OK);
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    assert_int_equal(pbl_graph_add_optimizer(g, &oo, ps, gs, N_PARAMS), PBL_OK);

    pbl_exec_options o = pbl_exec_options_default();
    o.threads = threads;
    pbl_exec *e = NULL;
    char err[256];
    assert_int_equal(pbl_exec_create(&e, g, &o, err, sizeof err), PBL_OK);
    size_t np = 0;
    for (int p = 0; p < N_PARAMS; p++)
        np += (size_t)param_numel[p];
    float *res = calloc(np + STEPS, sizeof *res);
    rng = 42;
    for (size_t i = 0; i < np; i++)
        res[i] = (2.0f * unit() - 1.0f) * 0.08f;
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++)
        assert_int_equal(pbl_exec_write(e, ps[p], res + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    static float xb[B * D];
    static int32_t yb[B];
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < B; i++) {
            yb[i] = (int32_t)(next() % C);
            for (int j = 0; j < D; j++)
                xb[i * D + j] = unit() - 0.5f + (j % C == yb[i] ? 1.0f : 0.0f);
        }
        assert_int_equal(pbl_exec_write(e, x, xb, sizeof xb), PBL_OK);
        assert_int_equal(pbl_exec_write(e, y, yb, sizeof yb), PBL_OK);
        assert_int_equal(pbl_exec_run(e), PBL_OK);
        assert_int_equal(pbl_exec_read(e, loss, res + np + s, sizeof(float)), PBL_OK);
    }
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++)
        assert_int_equal(pbl_exec_read(e, ps[p], res + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    *n_out = np + STEPS;
    return res;
}

/* OpenBLAS splits a product between its threads by rows and columns of the result, never
 * along the sum, so each element of a product is the same sum with 1 or 2 threads; the pool
 * splits the rest element by element: the whole step gives the same bits. Not under TSan:
 * OpenBLAS's threads are not instrumented (the pool itself is covered above). */
static void test_training_threads_match(void **state)
{
    (void)state;
#ifdef UNDER_TSAN
    skip(); /* returns through cmocka's jump: the rest is compiled, not run */
#endif
    size_t n1, n2;
    float *one = train(1, &n1), *two = train(2, &n2);
    assert_int_equal(n1, n2);
    for (size_t i = 0; i < n1; i++)
        if (memcmp(&one[i], &two[i], sizeof(float)))
            fail_msg("value %zu of %zu (parameters, then losses): %.9g with 2 threads, %.9g with 1", i, n1,
                     (double)two[i], (double)one[i]);
    print_message("%zu parameters and %d losses: same bits with threads 1 and 2 (last loss %.6g)\n",
                  n1 - STEPS, STEPS, (double)one[n1 - 1]);
    free(one);
    free(two);
}

int main(void)
{
    pbl__mem_init(&mem, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_runs_each_index_once),
        cmocka_unit_test(test_split_kernels_match_serial),
        cmocka_unit_test(test_training_threads_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
