/* Whole training steps: 200 Adam steps on a fixed seed lower the loss by a stated factor and
 * are bit-identical across two independent runs; updates run after every reader of the old
 * weights; targets select the forward pass; run-time errors are statuses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"

static uint64_t rng_state;
static float uniform(void) /* [0, 1), splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (float)((z ^ (z >> 31)) >> 40) / 16777216.0f;
}

enum { B = 32, D = 24, H1 = 32, H2 = 16, C = 5, STEPS = 200, BATCHES = 4 };

typedef struct mlp {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_value  x, y, loss, params[6];
    float      w1[H1 * D], b1[H1], w2[H2 * H1], b2[H2], w3[C * H2], b3[C];
} mlp;

/* A 3-layer MLP (tanh, relu, and dropout when asked) with Adam, parameters seeded. */
static void mlp_build_with(mlp *m, double dropout, const pbl_exec_options *eo);

static void mlp_build(mlp *m, double dropout)
{
    mlp_build_with(m, dropout, NULL);
}

static void mlp_build_with(mlp *m, double dropout, const pbl_exec_options *eo)
{
    memset(m, 0, sizeof *m);
    assert_int_equal(pbl_graph_create(&m->g, NULL), PBL_OK);
    pbl_graph *g = m->g;
    m->x = pbl_input(g, "x", PBL_SHAPE(B, D));
    m->y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(B));
    pbl_value w1 = pbl_param(g, "w1", PBL_SHAPE(H1, D)), b1 = pbl_param(g, "b1", PBL_SHAPE(H1));
    pbl_value w2 = pbl_param(g, "w2", PBL_SHAPE(H2, H1)), b2 = pbl_param(g, "b2", PBL_SHAPE(H2));
    pbl_value w3 = pbl_param(g, "w3", PBL_SHAPE(C, H2)), b3 = pbl_param(g, "b3", PBL_SHAPE(C));
    pbl_value h = pbl_tanh(g, pbl_fully_connected(g, m->x, w1, b1));
    if (dropout > 0)
        h = pbl_dropout(g, h, dropout, 7, NULL);
    h = pbl_relu(g, pbl_fully_connected(g, h, w2, b2));
    pbl_value logits = pbl_fully_connected(g, h, w3, b3);
    m->loss = pbl_softmax_cross_entropy(g, logits, m->y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", m->loss), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "logits", logits), PBL_OK);
    pbl_value ps[] = { w1, b1, w2, b2, w3, b3 }, gs[6];
    memcpy(m->params, ps, sizeof ps);
    assert_int_equal(pbl_graph_gradient(g, m->loss, ps, 6, gs), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    o.lr = 3e-3;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, ps, gs, 6), PBL_OK);
    char err[256];
    /* BLAS single-threaded in every run compared here: the bits under test are our planning's,
     * not OpenBLAS's threaded rounding (pebble/exec.h, blas_threads) */
    pbl_exec_options xo = eo ? *eo : pbl_exec_options_default();
    xo.blas_threads = 1;
    pbl_status cs = pbl_exec_create(&m->e, g, &xo, err, sizeof err);
    if (cs != PBL_OK)
        print_error("exec_create: %s\n", err);
    assert_int_equal(cs, PBL_OK);
    rng_state = 42;
    float *bufs[] = { m->w1, m->b1, m->w2, m->b2, m->w3, m->b3 };
    size_t sizes[] = { sizeof m->w1, sizeof m->b1, sizeof m->w2, sizeof m->b2, sizeof m->w3, sizeof m->b3 };
    int fan_in[] = { D, D, H1, H1, H2, H2 };
    for (int p = 0; p < 6; p++) {
        float bound = 1.0f / sqrtf((float)fan_in[p]);
        for (size_t i = 0; i < sizes[p] / sizeof(float); i++)
            bufs[p][i] = (2.0f * uniform() - 1.0f) * bound;
        assert_int_equal(pbl_exec_bind(m->e, ps[p], bufs[p], sizes[p]), PBL_OK);
    }
}

static void mlp_free(mlp *m)
{
    pbl_exec_destroy(m->e);
    pbl_graph_destroy(m->g);
}

/* Fixed synthetic data: class k has mean +1 on features k, k+C, k+2C, ... */
static void make_batches(float x[BATCHES][B * D], int32_t y[BATCHES][B])
{
    rng_state = 7;
    for (int bt = 0; bt < BATCHES; bt++)
        for (int i = 0; i < B; i++) {
            y[bt][i] = (int32_t)(uniform() * C);
            for (int j = 0; j < D; j++)
                x[bt][i * D + j] = (uniform() - 0.5f) * 2.0f + (j % C == y[bt][i] ? 1.0f : 0.0f);
        }
}

/* Trains STEPS steps; returns the mean loss of the first and last pass over the batches. */
static void train(mlp *m, float *first, float *last)
{
    static float x[BATCHES][B * D];
    static int32_t y[BATCHES][B];
    make_batches(x, y);
    double sum_first = 0, sum_last = 0;
    for (int s = 0; s < STEPS; s++) {
        int bt = s % BATCHES;
        assert_int_equal(pbl_exec_write(m->e, m->x, x[bt], sizeof x[bt]), PBL_OK);
        assert_int_equal(pbl_exec_write(m->e, m->y, y[bt], sizeof y[bt]), PBL_OK);
        pbl_status st = pbl_exec_run(m->e);
        if (st != PBL_OK)
            print_error("run: %s\n", pbl_exec_errmsg(m->e));
        assert_int_equal(st, PBL_OK);
        float l;
        assert_int_equal(pbl_exec_read(m->e, m->loss, &l, sizeof l), PBL_OK);
        if (s < BATCHES)
            sum_first += l;
        if (s >= STEPS - BATCHES)
            sum_last += l;
    }
    *first = (float)(sum_first / BATCHES);
    *last = (float)(sum_last / BATCHES);
}

/* The loss after 200 steps must be below a tenth of the first: on this separable data a
 * correct gradient and update reach ~0.01 from ~1.6; a wrong sign, a missing term or a stale
 * weight leaves it far higher. Two fresh runs must agree to the bit. */
static void check_training(double dropout, float factor)
{
    mlp a, b;
    float fa, la, fb, lb;
    mlp_build(&a, dropout);
    train(&a, &fa, &la);
    mlp_build(&b, dropout);
    train(&b, &fb, &lb);
    printf("  dropout %.1f: loss %.4f -> %.4f (factor %.1f, need > %.0f); rerun %.4f -> %.4f\n", dropout, fa, la,
           fa / la, factor, fb, lb);
    assert_true(la * factor < fa);
    assert_memory_equal(&fa, &fb, sizeof fa);
    assert_memory_equal(&la, &lb, sizeof la);
    assert_memory_equal(a.w1, b.w1, sizeof a.w1);
    assert_memory_equal(a.b1, b.b1, sizeof a.b1);
    assert_memory_equal(a.w2, b.w2, sizeof a.w2);
    assert_memory_equal(a.w3, b.w3, sizeof a.w3);
    assert_memory_equal(a.b3, b.b3, sizeof a.b3);
    mlp_free(&a);
    mlp_free(&b);
}

/* 100 steps on the planned arena, for every strategy, with and without NaN poison, end with
 * the same parameter bits as 100 steps with every value in its own bytes. A plan that let two
 * live values share bytes would change the numbers; poison makes reading a dead value NaN. */
static void test_planned_matches_unshared(void **state)
{
    (void)state;
    enum { N_STEPS = 100 };
    static float x[BATCHES][B * D];
    static int32_t y[BATCHES][B];
    make_batches(x, y);
    pbl_exec_options unshared = pbl_exec_options_default();
    unshared.storage = PBL_STORAGE_UNSHARED;
    mlp ref;
    mlp_build_with(&ref, 0.2, &unshared);
    for (int s = 0; s < N_STEPS; s++) {
        pbl_exec_write(ref.e, ref.x, x[s % BATCHES], sizeof x[0]);
        pbl_exec_write(ref.e, ref.y, y[s % BATCHES], sizeof y[0]);
        assert_int_equal(pbl_exec_run(ref.e), PBL_OK);
    }
    pbl_exec_stats ns;
    pbl_exec_stats_get(ref.e, &ns);
    int checked = 0;
    for (int32_t k = 0; k < pbl_plan_strategy_count(); k++) {
        for (int poison = 0; poison <= 1; poison++) {
            pbl_exec_options o = pbl_exec_options_default();
            o.strategy = pbl_plan_strategy_name(k);
            o.poison = poison;
            mlp m;
            mlp_build_with(&m, 0.2, &o);
            for (int s = 0; s < N_STEPS; s++) {
                pbl_exec_write(m.e, m.x, x[s % BATCHES], sizeof x[0]);
                pbl_exec_write(m.e, m.y, y[s % BATCHES], sizeof y[0]);
                pbl_status st = pbl_exec_run(m.e);
                if (st != PBL_OK)
                    print_error("%s: %s\n", o.strategy, pbl_exec_errmsg(m.e));
                assert_int_equal(st, PBL_OK);
            }
            pbl_exec_stats ps;
            pbl_exec_stats_get(m.e, &ps);
            if (!poison)
                printf("  %-24s arena %7llu bytes (unshared %llu, lower bound %llu, %d in place)\n", o.strategy,
                       (unsigned long long)ps.arena_bytes, (unsigned long long)ns.arena_bytes,
                       (unsigned long long)ps.lower_bound, ps.inplace);
            assert_true(ps.arena_bytes <= ns.arena_bytes);
            assert_true(ps.arena_bytes >= ps.lower_bound);
            assert_memory_equal(m.w1, ref.w1, sizeof m.w1);
            assert_memory_equal(m.b1, ref.b1, sizeof m.b1);
            assert_memory_equal(m.w2, ref.w2, sizeof m.w2);
            assert_memory_equal(m.b2, ref.b2, sizeof m.b2);
            assert_memory_equal(m.w3, ref.w3, sizeof m.w3);
            assert_memory_equal(m.b3, ref.b3, sizeof m.b3);
            float la, lb;
            assert_int_equal(pbl_exec_read(m.e, m.loss, &la, sizeof la), PBL_OK);
            assert_int_equal(pbl_exec_read(ref.e, ref.loss, &lb, sizeof lb), PBL_OK);
            assert_memory_equal(&la, &lb, sizeof la);
            /* an intermediate that is not an output is refused after a run */
            pbl_value h = pbl_graph_find_value(m.g, "tanh1");
            float buf[B * H1];
            assert_int_not_equal(h, PBL_NONE);
            assert_int_equal(pbl_exec_read(m.e, h, buf, sizeof buf), PBL_ERR_INVALID_ARG);
            mlp_free(&m);
            checked++;
        }
    }
    printf("  %d planned runs match the unshared run bit for bit\n", checked);
    mlp_free(&ref);
}

static void test_training_lowers_loss_and_repeats(void **state)
{
    (void)state;
    check_training(0.0, 10.0f);
}

static void test_training_with_dropout_repeats(void **state)
{
    (void)state;
    check_training(0.2, 4.0f);
}

/* y = x·wᵀ, loss = mse(y, t); gradients for x and w; sgd on w. The graph lets the update run
 * as soon as dw exists, but dx = dy·w must still see the OLD w. */
static void test_update_waits_for_readers(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_param(g, "x", PBL_SHAPE(2, 3)), w = pbl_param(g, "w", PBL_SHAPE(2, 3));
    pbl_value t = pbl_input(g, "t", PBL_SHAPE(2, 2));
    pbl_value y = pbl_fully_connected(g, x, w, PBL_NONE);
    pbl_value loss = pbl_mse_loss(g, y, t);
    pbl_value wrt[] = { w, x }, grads[2];
    assert_int_equal(pbl_graph_gradient(g, loss, wrt, 2, grads), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_SGD);
    o.lr = 0.5;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, wrt, grads, 1), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "dx", grads[1]), PBL_OK);
    pbl_exec *e;
    assert_int_equal(pbl_exec_create(&e, g, NULL, NULL, 0), PBL_OK);
    float xs[6] = { 1, 2, 3, 4, 5, 6 }, ws[6] = { 0.5f, -1, 2, 1, 0, -0.5f }, w0[6], ts[4] = { 1, 0, 0, 1 };
    memcpy(w0, ws, sizeof ws);
    assert_int_equal(pbl_exec_bind(e, x, xs, sizeof xs), PBL_OK);
    assert_int_equal(pbl_exec_bind(e, w, ws, sizeof ws), PBL_OK);
    assert_int_equal(pbl_exec_write(e, t, ts, sizeof ts), PBL_OK);
    assert_int_equal(pbl_exec_run(e), PBL_OK);
    float dx[6];
    assert_int_equal(pbl_exec_read(e, grads[1], dx, sizeof dx), PBL_OK);
    /* dx = (2/4)(y − t)·w_old */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            double want = 0;
            for (int j = 0; j < 2; j++) {
                double yij = 0;
                for (int q = 0; q < 3; q++)
                    yij += xs[i * 3 + q] * w0[j * 3 + q];
                want += 0.5 * (yij - ts[i * 2 + j]) * w0[j * 3 + k];
            }
            assert_float_equal(dx[i * 3 + k], want, 1e-4);
        }
    assert_memory_not_equal(ws, w0, sizeof ws); /* and w was updated */
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
}

/* An update created BEFORE another reader of its weight: program order alone would run it
 * first; the write-after-read edge must hold it back. */
static void test_update_created_before_reader(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value w = pbl_param(g, "w", PBL_SHAPE(2, 3)), gw = pbl_input(g, "gw", PBL_SHAPE(2, 3));
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(1, 3));
    pbl_node_desc d = { .op = "sgd", .name = "update", .inputs = (pbl_value[]){ w, gw }, .n_inputs = 2,
                        .attrs = (pbl_attr[]){ PBL_ATTR_FLOAT("lr", 1.0) }, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, NULL), PBL_OK);
    pbl_value y = pbl_fully_connected(g, x, w, PBL_NONE);
    assert_int_equal(pbl_graph_set_output(g, "y", y), PBL_OK);
    pbl_exec *e;
    assert_int_equal(pbl_exec_create(&e, g, NULL, NULL, 0), PBL_OK);
    float ws[6] = { 1, 2, 3, 4, 5, 6 }, gs[6] = { 10, 10, 10, 10, 10, 10 }, xs[3] = { 1, 1, 1 }, ys[2];
    assert_int_equal(pbl_exec_bind(e, w, ws, sizeof ws), PBL_OK);
    assert_int_equal(pbl_exec_write(e, gw, gs, sizeof gs), PBL_OK);
    assert_int_equal(pbl_exec_write(e, x, xs, sizeof xs), PBL_OK);
    assert_int_equal(pbl_exec_run(e), PBL_OK);
    assert_int_equal(pbl_exec_read(e, y, ys, sizeof ys), PBL_OK);
    printf("  y = %g %g (old w gives 6 15; updated w would give -24 -15)\n", ys[0], ys[1]);
    assert_float_equal(ys[0], 6.0f, 0.0f);
    assert_float_equal(ys[1], 15.0f, 0.0f);
    assert_float_equal(ws[0], -9.0f, 0.0f);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
}

#if defined(__x86_64__)
#include <xmmintrin.h>
/* flush_denormals: on, a denormal input reads as zero inside the run; off, it survives. The
 * calling thread's MXCSR is the same after the run either way. */
static void test_flush_denormals(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4));
    pbl_node_desc d = { .op = "scale", .inputs = &x, .n_inputs = 1,
                        .attrs = (pbl_attr[]){ PBL_ATTR_FLOAT("alpha", 2.0) }, .n_attrs = 1 };
    pbl_value y;
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, &y), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "y", y), PBL_OK);
    float xs[4] = { 1e-40f, -3e-39f, 1.0f, 0.0f };
    for (int flush = 0; flush <= 1; flush++) {
        pbl_exec_options o = pbl_exec_options_default();
        o.flush_denormals = flush;
        pbl_exec *e;
        assert_int_equal(pbl_exec_create(&e, g, &o, NULL, 0), PBL_OK);
        assert_int_equal(pbl_exec_write(e, x, xs, sizeof xs), PBL_OK);
        unsigned before = _mm_getcsr();
        assert_int_equal(pbl_exec_run(e), PBL_OK);
        assert_int_equal(_mm_getcsr(), before);
        float ys[4];
        assert_int_equal(pbl_exec_read(e, y, ys, sizeof ys), PBL_OK);
        printf("  flush_denormals=%d: 2 * 1e-40 = %g\n", flush, (double)ys[0]);
        if (flush)
            assert_true(ys[0] == 0.0f && ys[1] == 0.0f);
        else
            assert_true(ys[0] == 2.0f * xs[0] && ys[1] == 2.0f * xs[1] && ys[0] != 0.0f);
        assert_true(ys[2] == 2.0f);
        pbl_exec_destroy(e);
    }
    pbl_graph_destroy(g);
}
#else
static void test_flush_denormals(void **state)
{
    (void)state;
    skip(); /* FTZ/DAZ is x86 state; other targets run with IEEE underflow */
}
#endif

static void test_targets_and_runtime_errors(void **state)
{
    (void)state;
    mlp m;
    mlp_build(&m, 0.0);
    /* an evaluation executor over the training graph: forward only, sharing parameters */
    pbl_exec_options o = pbl_exec_options_default();
    const char *targets[] = { "logits" };
    o.targets = targets;
    o.n_targets = 1;
    pbl_exec *ev;
    assert_int_equal(pbl_exec_create(&ev, m.g, &o, NULL, 0), PBL_OK);
    pbl_exec_stats st, train_st;
    pbl_exec_stats_get(ev, &st);
    pbl_exec_stats_get(m.e, &train_st);
    printf("  training step: %d nodes; logits only: %d nodes\n", train_st.nodes, st.nodes);
    assert_int_equal(st.nodes, 5); /* 3 × fully_connected, tanh, relu, and nothing else */
    assert_true(train_st.nodes > st.nodes);
    /* an unknown target */
    const char *bad[] = { "nope" };
    o.targets = bad;
    char err[256];
    pbl_exec *none = NULL;
    assert_int_equal(pbl_exec_create(&none, m.g, &o, err, sizeof err), PBL_ERR_NOT_FOUND);
    assert_non_null(strstr(err, "'nope'"));
    /* nothing written yet: the input is unbound */
    assert_int_equal(pbl_exec_run(ev), PBL_ERR_UNBOUND);
    assert_non_null(strstr(pbl_exec_errmsg(ev), "'x'"));
    /* a label out of range is a status naming the node, not a crash */
    float x[B * D] = { 0 };
    int32_t y[B] = { 0 };
    y[3] = C + 7;
    assert_int_equal(pbl_exec_write(m.e, m.x, x, sizeof x), PBL_OK);
    assert_int_equal(pbl_exec_write(m.e, m.y, y, sizeof y), PBL_OK);
    assert_int_equal(pbl_exec_run(m.e), PBL_ERR_INVALID_ARG);
    printf("  bad label -> %s\n", pbl_exec_errmsg(m.e));
    assert_non_null(strstr(pbl_exec_errmsg(m.e), "softmax_cross_entropy"));
    assert_non_null(strstr(pbl_exec_errmsg(m.e), "row 3"));
    /* size checks on bind/write/read */
    assert_int_equal(pbl_exec_write(m.e, m.x, x, sizeof x - 4), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_bind(m.e, m.loss, x, 4), PBL_ERR_INVALID_ARG);
    pbl_exec_destroy(ev);
    mlp_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_training_lowers_loss_and_repeats),
        cmocka_unit_test(test_training_with_dropout_repeats),
        cmocka_unit_test(test_planned_matches_unshared),
        cmocka_unit_test(test_update_waits_for_readers),
        cmocka_unit_test(test_update_created_before_reader),
        cmocka_unit_test(test_flush_denormals),
        cmocka_unit_test(test_targets_and_runtime_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
