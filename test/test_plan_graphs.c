/* Property test on seeded random graphs: for every planner strategy, a training step planned
 * into one arena (with NaN poison after each value's last use) computes exactly the bits the
 * unshared executor (every value its own bytes) computes. Random graphs mix element-wise ops
 * that run in place, views, skip connections with long lifetimes, matrix products, several
 * outputs and the backward pass with its aggregation nodes; every plan also passes the
 * verifier inside pbl_exec_create. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"

enum { BATCH = 3, LANES = 3, HIST = 16, MAX_PARAMS = 64, STEPS = 2 };
static const int64_t widths[LANES] = { 4, 8, 6 };

typedef struct rgraph {
    pbl_graph *g;
    pbl_value  x, target, params[MAX_PARAMS];
    int32_t    n_params;
    pbl_value  outs[4];
    int32_t    n_outs;
} rgraph;

static uint64_t st;
static uint32_t next(void)
{
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(st >> 33);
}

/* A random residual DAG of `nodes` steps over lanes of widths 4, 8, 6, ending in an MSE loss;
 * with `train`, gradients for every parameter and an SGD update each. */
static void build(rgraph *r, uint64_t seed, int nodes, int train)
{
    memset(r, 0, sizeof *r);
    st = seed * 0x9e3779b97f4a7c15ull + 1;
    assert_int_equal(pbl_graph_create(&r->g, NULL), PBL_OK);
    pbl_graph *g = r->g;
    pbl_value hist[LANES][HIST];
    int32_t n_hist[LANES] = { 0 };
    int lane = 0;
    r->x = pbl_input(g, "x", PBL_SHAPE(BATCH, widths[0]));
    pbl_value cur = r->x;
    hist[0][n_hist[0]++] = cur;
    char name[32];
    for (int i = 0; i < nodes; i++) {
        uint32_t pick = next() % 12;
        if (pick == 0)
            cur = pbl_relu(g, cur);
        else if (pick == 1)
            cur = pbl_tanh(g, cur);
        else if (pick == 2)
            cur = pbl_sigmoid(g, cur);
        else if (pick == 3)
            cur = pbl_softmax(g, cur);
        else if (pick == 4)
            cur = pbl_reshape(g, pbl_flatten(g, cur, 1), PBL_SHAPE(BATCH, widths[lane]));
        else if ((pick == 5 || pick == 6) && n_hist[lane] > 1) {
            int32_t back = 1 + (int32_t)(next() % (uint32_t)(n_hist[lane] < HIST ? n_hist[lane] - 1 : HIST - 1));
            pbl_value other = hist[lane][(n_hist[lane] - 1 - back) % HIST];
            cur = pick == 5 ? pbl_add(g, cur, other) : pbl_mul(g, cur, other);
        } else if (pick == 7 && r->n_params < MAX_PARAMS) {
            snprintf(name, sizeof name, "bias%d", i);
            pbl_value b = pbl_param(g, name, PBL_SHAPE(widths[lane]));
            r->params[r->n_params++] = b;
            cur = pbl_sub(g, cur, b);
        } else if (r->n_params < MAX_PARAMS - 1) {
            int to = (int)(next() % LANES);
            snprintf(name, sizeof name, "w%d", i);
            pbl_value w = pbl_param(g, name, PBL_SHAPE(widths[to], widths[lane]));
            r->params[r->n_params++] = w;
            cur = pbl_fully_connected(g, cur, w, PBL_NONE);
            lane = to;
        }
        hist[lane][n_hist[lane]++ % HIST] = cur;
        if (next() % 9 == 0 && r->n_outs < 3) {
            snprintf(name, sizeof name, "out%d", r->n_outs);
            pbl_graph_set_output(g, name, cur);
            r->outs[r->n_outs++] = cur;
        }
    }
    if (lane != 0 && r->n_params < MAX_PARAMS) {
        pbl_value w = pbl_param(g, "w_last", PBL_SHAPE(widths[0], widths[lane]));
        r->params[r->n_params++] = w;
        cur = pbl_fully_connected(g, cur, w, PBL_NONE);
    }
    r->target = pbl_input(g, "target", PBL_SHAPE(BATCH, widths[0]));
    pbl_value loss = pbl_mse_loss(g, cur, r->target);
    if (pbl_graph_build_status(g) != PBL_OK)
        print_error("seed %llu: %s\n", (unsigned long long)seed, pbl_graph_errmsg(g));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    pbl_graph_set_output(g, "loss", loss);
    r->outs[r->n_outs++] = loss;
    if (!train)
        return;
    pbl_value grads[MAX_PARAMS];
    assert_int_equal(pbl_graph_gradient(g, loss, r->params, r->n_params, grads), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    o.lr = 0.05;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, r->params, grads, r->n_params), PBL_OK);
}

/* Runs STEPS steps; returns every output and every parameter, concatenated (malloc'd). */
static float *run(const rgraph *r, const pbl_exec_options *o, size_t *n_floats, pbl_exec_stats *stats)
{
    pbl_exec *e;
    char err[256];
    pbl_status s = pbl_exec_create(&e, r->g, o, err, sizeof err);
    if (s != PBL_OK)
        print_error("exec_create (%s): %s\n", o->strategy ? o->strategy : "unshared", err);
    assert_int_equal(s, PBL_OK);
    size_t total = 0, at = 0;
    for (int32_t i = 0; i < r->n_params; i++) {
        pbl_value_info vi;
        pbl_graph_value_info(r->g, r->params[i], &vi);
        total += (size_t)pbl_shape_numel(&vi.shape);
    }
    for (int32_t i = 0; i < r->n_outs; i++) {
        pbl_value_info vi;
        pbl_graph_value_info(r->g, r->outs[i], &vi);
        total += (size_t)pbl_shape_numel(&vi.shape);
    }
    float *res = calloc(total, sizeof *res), x[BATCH * 8], t[BATCH * 4];
    uint64_t seed = 99;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        t[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f;
    pbl_exec_write(e, r->x, x, BATCH * 4 * sizeof(float));
    pbl_exec_write(e, r->target, t, sizeof t);
    for (int32_t i = 0; i < r->n_params; i++) { /* deterministic parameters through write */
        pbl_value_info vi;
        pbl_graph_value_info(r->g, r->params[i], &vi);
        size_t n = (size_t)pbl_shape_numel(&vi.shape);
        float *p = malloc(n * sizeof *p);
        for (size_t j = 0; j < n; j++)
            p[j] = 0.3f * ((float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f);
        assert_int_equal(pbl_exec_write(e, r->params[i], p, n * sizeof *p), PBL_OK);
        free(p);
    }
    for (int k = 0; k < STEPS; k++) {
        s = pbl_exec_run(e);
        if (s != PBL_OK)
            print_error("run (%s): %s\n", o->strategy ? o->strategy : "unshared", pbl_exec_errmsg(e));
        assert_int_equal(s, PBL_OK);
    }
    for (int32_t i = 0; i < r->n_outs; i++) {
        pbl_value_info vi;
        pbl_graph_value_info(r->g, r->outs[i], &vi);
        size_t n = (size_t)pbl_shape_numel(&vi.shape);
        assert_int_equal(pbl_exec_read(e, r->outs[i], res + at, n * sizeof *res), PBL_OK);
        at += n;
    }
    for (int32_t i = 0; i < r->n_params; i++) {
        pbl_value_info vi;
        pbl_graph_value_info(r->g, r->params[i], &vi);
        size_t n = (size_t)pbl_shape_numel(&vi.shape);
        assert_int_equal(pbl_exec_read(e, r->params[i], res + at, n * sizeof *res), PBL_OK);
        at += n;
    }
    pbl_exec_stats_get(e, stats);
    pbl_exec_destroy(e);
    *n_floats = total;
    return res;
}

static void check_seeds(int train, int n_seeds)
{
    int runs = 0;
    uint64_t sum_arena = 0, sum_unshared = 0, sum_lb = 0;
    for (int seed = 0; seed < n_seeds; seed++) {
        rgraph r;
        build(&r, (uint64_t)seed, 8 + seed % 40, train);
        pbl_exec_options unshared = pbl_exec_options_default();
        unshared.storage = PBL_STORAGE_UNSHARED;
        unshared.blas_threads = 1; /* BLAS held fixed in every run: the bits compared are the plans' */
        size_t n_ref, n;
        pbl_exec_stats ns, ps;
        float *ref = run(&r, &unshared, &n_ref, &ns);
        for (int32_t k = 0; k < pbl_plan_strategy_count(); k++) {
            pbl_exec_options o = pbl_exec_options_default();
            o.strategy = pbl_plan_strategy_name(k);
            o.poison = 1;
            o.blas_threads = 1;
            float *got = run(&r, &o, &n, &ps);
            assert_int_equal(n, n_ref);
            if (memcmp(got, ref, n * sizeof *got) != 0)
                print_error("seed %d, strategy %s: results differ from the unshared run\n", seed, o.strategy);
            assert_memory_equal(got, ref, n * sizeof *got);
            assert_true(ps.arena_bytes >= ps.lower_bound);
            if (strcmp(o.strategy, "best") == 0) {
                sum_arena += ps.arena_bytes;
                sum_unshared += ps.unshared_bytes;
                sum_lb += ps.lower_bound;
            }
            free(got);
            runs++;
        }
        free(ref);
        pbl_graph_destroy(r.g);
    }
    printf("  %s: %d graphs x %d strategies = %d planned runs equal to unshared; best's arenas total %.3f of "
           "unshared, %.3f of the lower bound\n", train ? "training" : "forward", n_seeds, (int)pbl_plan_strategy_count(),
           runs, (double)sum_arena / (double)sum_unshared, (double)sum_arena / (double)sum_lb);
}

static void test_forward_graphs(void **state)
{
    (void)state;
    check_seeds(0, 60);
}

static void test_training_graphs(void **state)
{
    (void)state;
    check_seeds(1, 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_graphs),
        cmocka_unit_test(test_training_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
