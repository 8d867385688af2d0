/* Whole training steps: 200 Adam steps on a fixed seed lower the loss by a stated factor and
 * are bit-identical across two independent runs; updates run after every reader of the old
 * weights; targets select the forward pass; run-time errors are statuses. */
#define _XOPEN_SOURCE 700 /* mkdtemp */
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

static void mlp_build_opt(mlp *m, double dropout, const pbl_exec_options *eo, const pbl_optimizer_options *oo);

static void mlp_build_with(mlp *m, double dropout, const pbl_exec_options *eo)
{
    mlp_build_opt(m, dropout, eo, NULL);
}

/* > 0: mlp_build_opt clips the gradients with pbl_graph_clip_grad_norm before the optimizer */
static double explicit_clip = 0.0;

/* oo: the optimizer (NULL: Adam at lr 3e-3) */
static void mlp_build_opt(mlp *m, double dropout, const pbl_exec_options *eo, const pbl_optimizer_options *oo)
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
    if (oo)
        o = *oo;
    if (explicit_clip > 0.0)
        assert_int_equal(pbl_graph_clip_grad_norm(g, gs, 6, explicit_clip, gs, NULL), PBL_OK);
    pbl_status os = pbl_graph_add_optimizer(g, &o, ps, gs, 6);
    if (os != PBL_OK)
        print_error("add_optimizer: %s\n", pbl_graph_errmsg(g));
    assert_int_equal(os, PBL_OK);
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

/* Runs steps first..first+n-1 over the fixed batches (no loss kept). */
static void steps_from(mlp *m, int first, int n)
{
    static float x[BATCHES][B * D];
    static int32_t y[BATCHES][B];
    make_batches(x, y);
    for (int s = first; s < first + n; s++) {
        assert_int_equal(pbl_exec_write(m->e, m->x, x[s % BATCHES], sizeof x[0]), PBL_OK);
        assert_int_equal(pbl_exec_write(m->e, m->y, y[s % BATCHES], sizeof y[0]), PBL_OK);
        pbl_status st = pbl_exec_run(m->e);
        if (st != PBL_OK)
            print_error("run: %s\n", pbl_exec_errmsg(m->e));
        assert_int_equal(st, PBL_OK);
    }
}

static void steps(mlp *m, int n) { steps_from(m, 0, n); }

static void same_params(const mlp *a, const mlp *b)
{
    assert_memory_equal(a->w1, b->w1, sizeof a->w1);
    assert_memory_equal(a->b1, b->b1, sizeof a->b1);
    assert_memory_equal(a->w2, b->w2, sizeof a->w2);
    assert_memory_equal(a->b2, b->b2, sizeof a->b2);
    assert_memory_equal(a->w3, b->w3, sizeof a->w3);
    assert_memory_equal(a->b3, b->b3, sizeof a->b3);
}

/* A learning rate read from a runtime scalar: at its initial value (one f32 holds exactly)
 * the training is bit for bit the constant-rate training; pbl_exec_set_scalar changes it between runs (0 freezes the
 * weights: Adam's step is then exactly 0) with nothing re-planned; bad names and values are
 * statuses that keep the old value. */
static void test_runtime_lr_scalar(void **state)
{
    (void)state;
    mlp a, b;
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    o.lr = 0.00390625; /* 2^-8 */
    mlp_build_opt(&a, 0.0, NULL, &o);
    o.lr_scalar = "lr";
    mlp_build_opt(&b, 0.0, NULL, &o);
    pbl_value lr = pbl_graph_find_value(b.g, "lr");
    pbl_value_info vi;
    assert_int_equal(pbl_graph_value_info(b.g, lr, &vi), PBL_OK);
    assert_int_equal(vi.kind, PBL_VALUE_SCALAR);
    assert_true(vi.initial == 0.00390625);
    assert_string_equal(pbl_value_kind_name(vi.kind), "scalar");
    steps(&a, 20);
    steps(&b, 20);
    same_params(&a, &b);
    /* dynamic storage and unshared storage start the scalar at its value too */
    for (int k = 0; k < 2; k++) {
        mlp d;
        pbl_exec_options eo = pbl_exec_options_default();
        eo.storage = k == 0 ? PBL_STORAGE_DYNAMIC : PBL_STORAGE_UNSHARED;
        mlp_build_opt(&d, 0.0, &eo, &o);
        steps(&d, 20);
        same_params(&a, &d);
        mlp_free(&d);
    }
    pbl_exec_stats s0, s1;
    assert_int_equal(pbl_exec_stats_get(b.e, &s0), PBL_OK);
    /* lr 0: nothing moves */
    assert_int_equal(pbl_exec_set_scalar(b.e, "lr", 0.0), PBL_OK);
    float w1[H1 * D];
    memcpy(w1, b.w1, sizeof w1);
    steps(&b, 3);
    assert_memory_equal(w1, b.w1, sizeof w1);
    assert_int_equal(pbl_exec_set_scalar(b.e, "lr", 3e-3), PBL_OK); /* stored as the f32 nearest */
    double got = -1;
    assert_int_equal(pbl_exec_get_scalar(b.e, "lr", &got), PBL_OK);
    assert_true(got == (double)(float)3e-3);
    steps(&b, 1);
    assert_memory_not_equal(w1, b.w1, sizeof w1);
    assert_int_equal(pbl_exec_stats_get(b.e, &s1), PBL_OK);
    assert_int_equal(s0.arena_bytes, s1.arena_bytes);
    /* bad input: unknown name, not a scalar, NaN, ±inf, beyond f32; the old value stays */
    assert_int_equal(pbl_exec_set_scalar(b.e, "nope", 1.0), PBL_ERR_NOT_FOUND);
    assert_non_null(strstr(pbl_exec_errmsg(b.e), "'nope'"));
    assert_int_equal(pbl_exec_set_scalar(b.e, "x", 1.0), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(pbl_exec_errmsg(b.e), "not a scalar"));
    assert_int_equal(pbl_exec_set_scalar(b.e, NULL, 1.0), PBL_ERR_NOT_FOUND);
    assert_int_equal(pbl_exec_set_scalar(b.e, "lr", NAN), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(pbl_exec_errmsg(b.e), "not a finite"));
    assert_int_equal(pbl_exec_set_scalar(b.e, "lr", INFINITY), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_set_scalar(b.e, "lr", -INFINITY), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_set_scalar(b.e, "lr", 1e300), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_get_scalar(b.e, "lr", &got), PBL_OK);
    assert_true(got == (double)(float)3e-3);
    assert_int_equal(pbl_exec_get_scalar(b.e, "w1", &got), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_get_scalar(b.e, "lr", NULL), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_set_scalar(NULL, "lr", 1.0), PBL_ERR_INVALID_ARG);
    /* building: a non-finite initial value, a name taken by a non-scalar */
    pbl_value v;
    assert_int_equal(pbl_graph_add_scalar(b.g, "bad", NAN, &v), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_graph_add_scalar(b.g, "bad", 1e39, &v), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_graph_add_scalar(b.g, "lr", 1.0, &v), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_graph_add_variable(b.g, "s2", PBL_VALUE_SCALAR, PBL_F32, PBL_SHAPE(2), &v), PBL_ERR_INVALID_ARG);
    mlp_free(&a);
    mlp_free(&b);
    o.lr_scalar = "x"; /* an input, not a scalar */
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4)), w = pbl_param(g, "w", PBL_SHAPE(4));
    pbl_value loss = pbl_mse_loss(g, x, w), gw;
    assert_int_equal(pbl_graph_gradient(g, loss, &w, 1, &gw), PBL_OK);
    int32_t nv = pbl_graph_value_count(g);
    assert_int_equal(pbl_graph_add_optimizer(g, &o, &w, &gw, 1), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(pbl_graph_errmsg(g), "not a scalar"));
    /* an empty name is no scalar the caller could set: it once made one unnamed scalar per
     * update ("var15", "var23", ...) */
    const char **named[] = { &o.lr_scalar, &o.weight_decay_scalar, &o.step_scalar };
    o.lr_scalar = NULL;
    for (int k = 0; k < 3; k++) {
        *named[k] = "";
        assert_int_equal(pbl_graph_add_optimizer(g, &o, &w, &gw, 1), PBL_ERR_INVALID_ARG);
        assert_non_null(strstr(pbl_graph_errmsg(g), "empty"));
        assert_int_equal(pbl_graph_value_count(g), nv);
        *named[k] = NULL;
    }
    o.clip_norm = NAN;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, &w, &gw, 1), PBL_ERR_INVALID_ARG);
    o.clip_norm = -1;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, &w, &gw, 1), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_graph_clip_grad_norm(g, &gw, 1, 0.0, &gw, NULL), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_graph_value_count(g), nv); /* restored */
    /* a hand-made update with a bad "scalars" mask (as a JSON graph may hold) is told which
     * values the mask is made of (it once said "only bits 11 may be set") */
    pbl_value rate;
    assert_int_equal(pbl_graph_add_scalar(g, "rate", 0.1, &rate), PBL_OK);
    pbl_value in[] = { w, gw, rate };
    pbl_attr at[] = { PBL_ATTR_INT("scalars", 16) };
    pbl_node_desc d = { .op = "sgd", .inputs = in, .n_inputs = 3, .attrs = at, .n_attrs = 1 };
    assert_int_equal(pbl_graph_add_node(g, &d, NULL, NULL), PBL_ERR_ATTR);
    assert_non_null(strstr(pbl_graph_errmsg(g), "a sum of 1 (lr), 2 (weight_decay), 8 (norm)"));
    pbl_graph_destroy(g);
}

/* Weight decay and Adam's step as scalars (every update reads the same ones), AdamW: the
 * scalars start where the constants are, so the runs agree to the bit; AdamW is not Adam + L2. */
static void test_adamw_scalars_match_constants(void **state)
{
    (void)state;
    mlp a, b;
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAMW);
    assert_true(o.weight_decay == 0.01);
    o.lr = 0.001953125; /* 2^-9 and 2^-6: exact in f32, so scalar and constant agree */
    o.weight_decay = 0.015625;
    mlp_build_opt(&a, 0.0, NULL, &o);
    o.lr_scalar = "lr";
    o.weight_decay_scalar = "wd";
    mlp_build_opt(&b, 0.0, NULL, &o);
    steps(&a, 10);
    steps(&b, 10);
    same_params(&a, &b);
    /* the step as a scalar, advanced by the caller, equals each parameter's own count */
    mlp c;
    o.step_scalar = "step";
    mlp_build_opt(&c, 0.0, NULL, &o);
    for (int s = 1; s <= 10; s++) {
        assert_int_equal(pbl_exec_set_scalar(c.e, "step", s), PBL_OK);
        steps_from(&c, s - 1, 1);
    }
    same_params(&a, &c);
    /* ... and is read: left at 1, every step is corrected as the first, and the run differs */
    mlp e;
    mlp_build_opt(&e, 0.0, NULL, &o);
    steps(&e, 10);
    assert_memory_not_equal(a.w1, e.w1, sizeof a.w1);
    mlp_free(&e);
    /* AdamW differs from Adam with L2 */
    mlp d;
    pbl_optimizer_options l2 = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    l2.weight_decay = 0.01;
    mlp_build_opt(&d, 0.0, NULL, &l2);
    steps(&d, 10);
    assert_memory_not_equal(a.w1, d.w1, sizeof a.w1);
    mlp_free(&a);
    mlp_free(&b);
    mlp_free(&c);
    mlp_free(&d);
}

/* Clipping: with a limit far above the norm the factor is exactly 1 (the same bits as no
 * clipping); with a tiny one, one SGD step moves the parameters by lr·max_norm in all. */
static void test_clip_grad_norm(void **state)
{
    (void)state;
    mlp a, b, c;
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_SGD);
    o.lr = 0.1;
    mlp_build_opt(&a, 0.0, NULL, &o);
    o.clip_norm = 1e9;
    mlp_build_opt(&b, 0.0, NULL, &o);
    assert_true(pbl_graph_find_node(b.g, "grad_norm") != PBL_NONE);
    steps(&a, 5);
    steps(&b, 5);
    same_params(&a, &b);
    o.clip_norm = 1e-3;
    mlp_build_opt(&c, 0.0, NULL, &o);
    mlp before = c; /* the parameter buffers, copied */
    steps(&c, 1);
    double moved = 0;
    const float *p0[] = { before.w1, before.b1, before.w2, before.b2, before.w3, before.b3 };
    const float *p1[] = { c.w1, c.b1, c.w2, c.b2, c.w3, c.b3 };
    size_t n[] = { H1 * D, H1, H2 * H1, H2, C * H2, C };
    for (int p = 0; p < 6; p++)
        for (size_t i = 0; i < n[p]; i++)
            moved += ((double)p1[p][i] - p0[p][i]) * ((double)p1[p][i] - p0[p][i]);
    moved = sqrt(moved);
    printf("  clip 1e-3, lr 0.1: parameters moved %.6g (want 1e-4)\n", moved);
    assert_true(fabs(moved - 1e-4) < 1e-6);
    mlp_free(&a);
    mlp_free(&b);
    mlp_free(&c);
}

/* The optimizer clips inside its updates (the global norm as an extra input, no clip_by_norm
 * pass per gradient): the parameters match, to the bit, an explicit pbl_graph_clip_grad_norm
 * followed by the unclipped optimizer, for every kind, with scalars before the norm's input. */
static void test_fused_clip_matches_explicit(void **state)
{
    (void)state;
    const pbl_optimizer_kind kinds[] = { PBL_OPTIM_SGD, PBL_OPTIM_SGD_MOMENTUM, PBL_OPTIM_ADAM, PBL_OPTIM_ADAMW };
    for (int k = 0; k < 4; k++)
        for (int with_scalars = 0; with_scalars < 2; with_scalars++) {
            pbl_optimizer_options o = pbl_optimizer_options_default(kinds[k]);
            o.lr = 0.05;
            o.lr_scalar = with_scalars ? "lr" : NULL;
            o.step_scalar = with_scalars && kinds[k] >= PBL_OPTIM_ADAM ? "step" : NULL;
            mlp fused, expl, plain; /* plain: unclipped, to show the clipping acts */
            o.clip_norm = 0.25; /* below the norm of these gradients: every step clips */
            mlp_build_opt(&fused, 0.0, NULL, &o);
            o.clip_norm = 0.0;
            mlp_build_opt(&plain, 0.0, NULL, &o);
            explicit_clip = 0.25;
            mlp_build_opt(&expl, 0.0, NULL, &o);
            explicit_clip = 0.0;
            /* one node fewer per gradient: the clip_by_norm nodes are gone */
            assert_int_equal(pbl_graph_node_count(fused.g) + 6, pbl_graph_node_count(expl.g));
            for (int s = 1; s <= 8; s++) {
                if (o.step_scalar) {
                    assert_int_equal(pbl_exec_set_scalar(fused.e, "step", s), PBL_OK);
                    assert_int_equal(pbl_exec_set_scalar(expl.e, "step", s), PBL_OK);
                }
                steps_from(&fused, s - 1, 1);
                steps_from(&expl, s - 1, 1);
                steps_from(&plain, s - 1, 1);
            }
            same_params(&fused, &expl);
            assert_memory_not_equal(fused.w1, plain.w1, sizeof fused.w1);
            mlp_free(&fused);
            mlp_free(&expl);
            mlp_free(&plain);
        }
}

/* A graph with scalars saves and loads through JSON: kind "scalar", its value, the updates'
 * "scalars" attribute; an executor of the loaded graph starts the scalar at that value. */
static void test_scalars_json_round_trip(void **state)
{
    (void)state;
    mlp a;
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAMW);
    o.lr = 0.0025;
    o.lr_scalar = "lr";
    mlp_build_opt(&a, 0.0, NULL, &o);
    char *text = NULL;
    size_t len = 0;
    char err[256];
    assert_int_equal(pbl_graph_to_json(a.g, &text, &len, err, sizeof err), PBL_OK);
    assert_non_null(strstr(text, "\"kind\": \"scalar\""));
    assert_non_null(strstr(text, "\"value\": 0.0025"));
    pbl_graph *h;
    assert_int_equal(pbl_graph_from_json(&h, text, len, NULL, err, sizeof err), PBL_OK);
    pbl_value_info vi;
    assert_int_equal(pbl_graph_value_info(h, pbl_graph_find_value(h, "lr"), &vi), PBL_OK);
    assert_int_equal(vi.kind, PBL_VALUE_SCALAR);
    assert_true(vi.initial == 0.0025);
    pbl_exec *e;
    assert_int_equal(pbl_exec_create(&e, h, NULL, err, sizeof err), PBL_OK);
    double got;
    assert_int_equal(pbl_exec_get_scalar(e, "lr", &got), PBL_OK);
    assert_true(got == (double)0.0025f);
    pbl_exec_destroy(e);
    /* a value on a non-scalar is refused */
    const char *bad = "{\"format\": \"pebble-graph\", \"version\": \"1.0\", \"variables\": ["
                      "{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [], \"value\": 1}],"
                      " \"nodes\": [], \"outputs\": []}";
    pbl_graph *k = NULL;
    assert_int_equal(pbl_graph_from_json(&k, bad, strlen(bad), NULL, err, sizeof err), PBL_ERR_FORMAT);
    assert_non_null(strstr(err, "only a scalar"));
    const char *big = "{\"format\": \"pebble-graph\", \"version\": \"1.0\", \"variables\": ["
                      "{\"name\": \"lr\", \"kind\": \"scalar\", \"dtype\": \"f32\", \"shape\": [], \"value\": 1e300}],"
                      " \"nodes\": [], \"outputs\": []}";
    assert_int_equal(pbl_graph_from_json(&k, big, strlen(big), NULL, err, sizeof err), PBL_ERR_FORMAT);
    assert_non_null(strstr(err, "beyond f32"));
    pbl_graph_destroy(h);
    pbl_json_free(text);
    mlp_free(&a);
}

/* One scheduled step as a resumable loop runs it: the runtime scalar "step" holds the step
 * about to run (1, 2, ...; it starts at 1), so a loop that reads it back after a load knows
 * where it is. The rate is the schedule's at step - 1; the step advances after the run. */
static void scheduled_step(mlp *m, const pbl_lr_schedule *s)
{
    double next = 0;
    assert_int_equal(pbl_exec_get_scalar(m->e, "step", &next), PBL_OK);
    const int64_t k = (int64_t)next - 1; /* steps done */
    assert_int_equal(pbl_exec_set_scalar(m->e, "lr", pbl_lr_schedule_at(s, k)), PBL_OK);
    steps_from(m, (int)k, 1);
    assert_int_equal(pbl_exec_set_scalar(m->e, "step", (double)(k + 2)), PBL_OK);
}

/* Resuming: K scheduled AdamW steps with dropout, a checkpoint, a fresh graph and executor
 * that load it, K more steps: the parameters are bit for bit those of 2K steps straight
 * through. The schedule's position and Adam's bias correction come back through the scalar
 * "step", a weight decay changed at run time through "wd", dropout's masks through the run
 * counter. Without scalars in the checkpoint the fresh executor would restart at step 1. */
static void test_resume_from_checkpoint_is_exact(void **state)
{
    (void)state;
    enum { K = 12 };
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAMW);
    o.lr_scalar = "lr";
    o.weight_decay_scalar = "wd";
    o.step_scalar = "step";
    pbl_lr_schedule sch = pbl_lr_schedule_default(PBL_LR_COSINE, 4e-3);
    sch.warmup_steps = 5;
    sch.total_steps = 2 * K;
    assert_int_equal(pbl_lr_schedule_check(&sch, NULL, 0), PBL_OK);

    mlp straight, first, resumed;
    mlp_build_opt(&straight, 0.25, NULL, &o);
    mlp_build_opt(&first, 0.25, NULL, &o);
    for (int i = 0; i < 2 * K; i++) {
        if (i == K / 2)
            assert_int_equal(pbl_exec_set_scalar(straight.e, "wd", 0.03), PBL_OK);
        scheduled_step(&straight, &sch);
    }
    for (int i = 0; i < K; i++) {
        if (i == K / 2)
            assert_int_equal(pbl_exec_set_scalar(first.e, "wd", 0.03), PBL_OK);
        scheduled_step(&first, &sch);
    }
    char dir[] = "/tmp/test_train_resume.XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/k.ckpt", dir);
    if (pbl_exec_save(first.e, path) != PBL_OK)
        fail_msg("save: %s", pbl_exec_errmsg(first.e));

    mlp_build_opt(&resumed, 0.25, NULL, &o); /* its own graph, scalars at their initial values */
    double step = 0, wd = 0;
    assert_int_equal(pbl_exec_get_scalar(resumed.e, "step", &step), PBL_OK);
    assert_true(step == 1.0);
    if (pbl_exec_load(resumed.e, path) != PBL_OK)
        fail_msg("load: %s", pbl_exec_errmsg(resumed.e));
    assert_int_equal(pbl_exec_get_scalar(resumed.e, "step", &step), PBL_OK);
    assert_int_equal(pbl_exec_get_scalar(resumed.e, "wd", &wd), PBL_OK);
    assert_true(step == K + 1 && wd == (double)(float)0.03);
    assert_int_equal(pbl_exec_run_count(resumed.e), K);
    for (int i = 0; i < K; i++)
        scheduled_step(&resumed, &sch);
    printf("  %d steps, save, load into a fresh executor, %d more: parameters bit-identical to %d straight\n", K,
           K, 2 * K);
    same_params(&straight, &resumed);
    assert_memory_not_equal(first.w1, resumed.w1, sizeof first.w1); /* the K more steps moved them */
    unlink(path);
    rmdir(dir);
    mlp_free(&straight);
    mlp_free(&first);
    mlp_free(&resumed);
}

/* Schedules against their formulas at chosen steps; parameters that make no sense are errors
 * and evaluate to NaN (which pbl_exec_set_scalar refuses). */
static void test_lr_schedules(void **state)
{
    (void)state;
    pbl_lr_schedule c = pbl_lr_schedule_default(PBL_LR_CONSTANT, 0.5);
    assert_int_equal(pbl_lr_schedule_check(&c, NULL, 0), PBL_OK);
    assert_true(pbl_lr_schedule_at(&c, 0) == 0.5 && pbl_lr_schedule_at(&c, 123456) == 0.5);
    c.warmup_steps = 4; /* 0.125, 0.25, 0.375, 0.5, then 0.5 */
    assert_true(pbl_lr_schedule_at(&c, 0) == 0.125 && pbl_lr_schedule_at(&c, 2) == 0.375);
    assert_true(pbl_lr_schedule_at(&c, 3) == 0.5 && pbl_lr_schedule_at(&c, 9) == 0.5);
    assert_true(pbl_lr_schedule_at(&c, -5) == 0.125);
    pbl_lr_schedule st = pbl_lr_schedule_default(PBL_LR_STEP, 1.0);
    st.step_size = 10;
    st.gamma = 0.5;
    st.warmup_steps = 2;
    assert_true(pbl_lr_schedule_at(&st, 0) == 0.5);
    assert_true(pbl_lr_schedule_at(&st, 2) == 1.0 && pbl_lr_schedule_at(&st, 11) == 1.0);
    assert_true(pbl_lr_schedule_at(&st, 12) == 0.5 && pbl_lr_schedule_at(&st, 32) == 0.125);
    pbl_lr_schedule co = pbl_lr_schedule_default(PBL_LR_COSINE, 1.0);
    co.warmup_steps = 10;
    co.total_steps = 110;
    co.min_lr = 0.1;
    assert_true(pbl_lr_schedule_at(&co, 9) == 1.0);
    assert_true(pbl_lr_schedule_at(&co, 10) == 1.0);
    assert_true(fabs(pbl_lr_schedule_at(&co, 60) - 0.55) < 1e-12);   /* halfway: the mean */
    assert_true(fabs(pbl_lr_schedule_at(&co, 35) - (0.1 + 0.9 * 0.5 * (1 + cos(3.14159265358979323846 / 4)))) < 1e-12);
    assert_true(pbl_lr_schedule_at(&co, 110) == 0.1 && pbl_lr_schedule_at(&co, 1000) == 0.1);
    for (int64_t k = 10; k < 110; k++) /* non-increasing after the warm-up */
        assert_true(pbl_lr_schedule_at(&co, k + 1) <= pbl_lr_schedule_at(&co, k));
    /* nonsense */
    char err[128];
    pbl_lr_schedule bad = co;
    bad.total_steps = 10;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "total_steps"));
    assert_true(isnan(pbl_lr_schedule_at(&bad, 5)));
    bad = co;
    bad.min_lr = 2.0;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    bad = co;
    bad.base_lr = NAN;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    bad.base_lr = -1;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    /* finite in double, but no f32 holds it: every rate would be refused by
     * pbl_exec_set_scalar, so the check refuses the schedule up front */
    bad.base_lr = 1e300;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "f32"));
    assert_true(isnan(pbl_lr_schedule_at(&bad, 5)));
    bad = co;
    bad.warmup_steps = -1;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    bad = st;
    bad.step_size = 0;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    bad = st;
    bad.gamma = 0;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    bad.gamma = 1.5;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    bad = st;
    bad.kind = (pbl_lr_schedule_kind)9;
    assert_int_equal(pbl_lr_schedule_check(&bad, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_lr_schedule_check(NULL, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_true(isnan(pbl_lr_schedule_at(NULL, 0)));
}

/* ---- partial batches (pbl_exec_set_batch) ------------------------------------------------ */

enum { PB_MAX = 128, PB_SMALL = 37, PB_D = 24, PB_H = 32, PB_C = 5, PB_VARS = 32 };

/* Variables shared by name: the reference executors (one planned per batch size) read and
 * write the same parameter and state buffers, so together they train one model. */
typedef struct pb_vars {
    int32_t n;
    char    name[PB_VARS][64];
    float  *data[PB_VARS];
    size_t  bytes[PB_VARS];
} pb_vars;

typedef struct pb_net {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_value  x, y, loss, logits, grads[6];
} pb_net;

static float *pb_var(pb_vars *vs, const char *name, size_t bytes)
{
    for (int32_t i = 0; i < vs->n; i++)
        if (!strcmp(vs->name[i], name)) {
            assert_int_equal(vs->bytes[i], bytes);
            return vs->data[i];
        }
    assert_true(vs->n < PB_VARS);
    snprintf(vs->name[vs->n], sizeof vs->name[0], "%s", name);
    vs->bytes[vs->n] = bytes;
    vs->data[vs->n] = calloc(1, bytes);
    assert_non_null(vs->data[vs->n]);
    rng_state = 100 + (uint64_t)vs->n; /* parameters seeded by order of first use */
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        vs->data[vs->n][i] = strstr(name, "running") || strstr(name, "count") || strstr(name, "/") ? 0.0f
                                                                                             : (2.0f * uniform() - 1.0f) * 0.3f;
    return vs->data[vs->n++];
}

static void pb_vars_free(pb_vars *vs)
{
    for (int32_t i = 0; i < vs->n; i++)
        free(vs->data[i]);
}

/* fc -> batch_norm (running statistics) -> tanh -> fc -> relu -> fc -> softmax cross-entropy,
 * Adam, at batch `batch`; every parameter and state variable bound to vs by name; the
 * gradients are graph outputs so they can be read after a run. */
static void pb_build(pb_net *n, int64_t batch, pb_vars *vs)
{
    memset(n, 0, sizeof *n);
    assert_int_equal(pbl_graph_create(&n->g, NULL), PBL_OK);
    pbl_graph *g = n->g;
    n->x = pbl_input(g, "x", PBL_SHAPE(batch, PB_D));
    n->y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(batch));
    pbl_value w1 = pbl_param(g, "w1", PBL_SHAPE(PB_H, PB_D)), b1 = pbl_param(g, "b1", PBL_SHAPE(PB_H));
    pbl_value w2 = pbl_param(g, "w2", PBL_SHAPE(PB_H, PB_H)), b2 = pbl_param(g, "b2", PBL_SHAPE(PB_H));
    pbl_value w3 = pbl_param(g, "w3", PBL_SHAPE(PB_C, PB_H)), b3 = pbl_param(g, "b3", PBL_SHAPE(PB_C));
    pbl_value gamma = pbl_param(g, "gamma", PBL_SHAPE(PB_H)), beta = pbl_param(g, "beta", PBL_SHAPE(PB_H));
    pbl_value training;
    assert_int_equal(pbl_graph_add_scalar(g, "training", 1.0, &training), PBL_OK);
    pbl_value h = pbl_fully_connected(g, n->x, w1, b1);
    h = pbl_tanh(g, pbl_batch_norm_switched(g, "bn", h, gamma, beta, training, 0.1, 1e-5));
    h = pbl_relu(g, pbl_fully_connected(g, h, w2, b2));
    n->logits = pbl_fully_connected(g, h, w3, b3);
    n->loss = pbl_softmax_cross_entropy(g, n->logits, n->y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", n->loss), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "logits", n->logits), PBL_OK);
    pbl_value ps[] = { w1, b1, w2, b2, w3, gamma };
    assert_int_equal(pbl_graph_gradient(g, n->loss, ps, 6, n->grads), PBL_OK);
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "grad%d", i);
        assert_int_equal(pbl_graph_set_output(g, name, n->grads[i]), PBL_OK);
    }
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    o.lr = 1e-2;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, ps, n->grads, 6), PBL_OK);
    (void)b3; /* b3 is not trained: its gradient is not asked for */
    pbl_exec_options xo = pbl_exec_options_default();
    xo.blas_threads = 1; /* the bits compared are the planner's and kernels', not OpenBLAS's threads' */
    char err[256];
    pbl_status cs = pbl_exec_create(&n->e, g, &xo, err, sizeof err);
    if (cs != PBL_OK)
        print_error("exec_create: %s\n", err);
    assert_int_equal(cs, PBL_OK);
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(g, v, &vi), PBL_OK);
        if (vi.kind != PBL_VALUE_PARAM && vi.kind != PBL_VALUE_STATE)
            continue;
        size_t bytes = (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype);
        assert_int_equal(pbl_exec_bind(n->e, v, pb_var(vs, vi.name, bytes), bytes), PBL_OK);
    }
}

static void pb_free(pb_net *n)
{
    pbl_exec_destroy(n->e);
    pbl_graph_destroy(n->g);
}

/* Runs one step of the first `rows` rows of (x, y) and reads the loss, logits and gradients. */
static void pb_step(pb_net *n, const float *x, const int32_t *y, int64_t rows, float *loss, float *logits,
                    float *grads, size_t grad_floats)
{
    assert_int_equal(pbl_exec_write(n->e, n->x, x, (size_t)rows * PB_D * sizeof *x), PBL_OK);
    assert_int_equal(pbl_exec_write(n->e, n->y, y, (size_t)rows * sizeof *y), PBL_OK);
    pbl_status s = pbl_exec_run(n->e);
    if (s != PBL_OK)
        print_error("run: %s\n", pbl_exec_errmsg(n->e));
    assert_int_equal(s, PBL_OK);
    assert_int_equal(pbl_exec_read(n->e, n->loss, loss, sizeof *loss), PBL_OK);
    assert_int_equal(pbl_exec_read(n->e, n->logits, logits, (size_t)rows * PB_C * sizeof *logits), PBL_OK);
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(n->g, n->grads[i], &vi), PBL_OK);
        size_t k = (size_t)pbl_shape_numel(&vi.shape);
        assert_true(at + k <= grad_floats);
        assert_int_equal(pbl_exec_read(n->e, n->grads[i], grads + at, k * sizeof *grads), PBL_OK);
        at += k;
    }
}

/* A batch of 37 through an executor planned for 128 trains exactly as executors planned for
 * 37 (and 128 for the full batches around it): the same loss, logits, gradients, updated
 * parameters and batch-norm running statistics, bit for bit, step after step (the sums run in
 * the same order over the same rows, BLAS single-threaded on both sides). */
static void test_partial_batch_matches_planned(void **state)
{
    (void)state;
    pb_vars va = { 0 }, vr = { 0 };
    pb_net a, r_max, r_small;
    pb_build(&a, PB_MAX, &va);
    pb_build(&r_max, PB_MAX, &vr);
    pb_build(&r_small, PB_SMALL, &vr);
    pbl_exec_stats st;
    assert_int_equal(pbl_exec_stats_get(a.e, &st), PBL_OK);
    assert_int_equal(st.planned_batch, PB_MAX);
    assert_int_equal(st.batch, PB_MAX);
    uint64_t arena = st.arena_bytes;

    static float x[PB_MAX * PB_D];
    static int32_t y[PB_MAX];
    static float la[PB_MAX * PB_C], lr[PB_MAX * PB_C], ga[4096], gr[4096];
    const int64_t rows[] = { PB_MAX, PB_SMALL, PB_SMALL, PB_MAX, 1, PB_SMALL };
    for (int step = 0; step < 6; step++) {
        rng_state = 1000 + (uint64_t)step;
        for (int i = 0; i < PB_MAX; i++) {
            y[i] = (int32_t)(uniform() * PB_C);
            for (int j = 0; j < PB_D; j++)
                x[i * PB_D + j] = uniform() - 0.5f + (j % PB_C == y[i] ? 1.0f : 0.0f);
        }
        int64_t n = rows[step];
        assert_int_equal(pbl_exec_set_batch(a.e, n), PBL_OK);
        pb_net *ref = n == PB_MAX ? &r_max : &r_small;
        if (n == 1) { /* a batch of 1: its reference executor is planned for 1 */
            pb_free(&r_small);
            pb_build(&r_small, 1, &vr);
            ref = &r_small;
        }
        float loss_a, loss_r;
        memset(ga, 0, sizeof ga);
        memset(gr, 0, sizeof gr);
        pb_step(&a, x, y, n, &loss_a, la, ga, 4096);
        pb_step(ref, x, y, n, &loss_r, lr, gr, 4096);
        assert_memory_equal(&loss_a, &loss_r, sizeof loss_a);
        assert_memory_equal(la, lr, (size_t)n * PB_C * sizeof *la);
        assert_memory_equal(ga, gr, sizeof ga);
        assert_int_equal(va.n, vr.n);
        for (int32_t i = 0; i < va.n; i++) {
            assert_string_equal(va.name[i], vr.name[i]);
            if (memcmp(va.data[i], vr.data[i], va.bytes[i]))
                print_error("step %d (batch %lld): '%s' differs\n", step, (long long)n, va.name[i]);
            assert_memory_equal(va.data[i], vr.data[i], va.bytes[i]);
        }
        if (n == 1) {
            pb_free(&r_small);
            pb_build(&r_small, PB_SMALL, &vr);
        }
    }
    assert_int_equal(pbl_exec_stats_get(a.e, &st), PBL_OK);
    assert_int_equal(st.batch, PB_SMALL);
    assert_int_equal(st.arena_bytes, arena); /* the same arena: nothing re-planned */
    pb_free(&a);
    pb_free(&r_max);
    pb_free(&r_small);
    pb_vars_free(&va);
    pb_vars_free(&vr);
}

/* Batches outside [1, planned] and graphs whose batch cannot vary are statuses with a message;
 * a refused call leaves the batch as it was. */
static void test_partial_batch_errors(void **state)
{
    (void)state;
    pb_vars vs = { 0 };
    pb_net n;
    pb_build(&n, PB_MAX, &vs);
    assert_int_equal(pbl_exec_set_batch(n.e, PB_SMALL), PBL_OK);
    assert_int_equal(pbl_exec_set_batch(n.e, PB_MAX + 1), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(pbl_exec_errmsg(n.e), "planned for batch 128"));
    assert_int_equal(pbl_exec_set_batch(n.e, 0), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_set_batch(n.e, -5), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_set_batch(NULL, 3), PBL_ERR_INVALID_ARG);
    pbl_exec_stats st;
    assert_int_equal(pbl_exec_stats_get(n.e, &st), PBL_OK);
    assert_int_equal(st.batch, PB_SMALL);
    /* at 37, writes and reads take 37 rows; a bind still takes the planned size */
    static float x[PB_MAX * PB_D];
    assert_int_equal(pbl_exec_write(n.e, n.x, x, sizeof x), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(pbl_exec_errmsg(n.e), "at the current batch"));
    assert_int_equal(pbl_exec_write(n.e, n.x, x, (size_t)PB_SMALL * PB_D * sizeof *x), PBL_OK);
    assert_int_equal(pbl_exec_bind(n.e, n.x, x, (size_t)PB_SMALL * PB_D * sizeof *x), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_exec_bind(n.e, n.x, x, sizeof x), PBL_OK);
    pb_free(&n);
    pb_vars_free(&vs);

    /* a reshape to a fixed batch does not follow it: refused, naming the node */
    pbl_graph *g;
    pbl_exec *e;
    char err[256];
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x2 = pbl_input(g, "x", PBL_SHAPE(8, 6));
    pbl_value r = pbl_reshape(g, x2, PBL_SHAPE(8, 2, 3));
    assert_int_equal(pbl_graph_set_output(g, "r", pbl_relu(g, r)), PBL_OK);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_exec_create(&e, g, NULL, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_exec_set_batch(e, 4), PBL_ERR_UNSUPPORTED);
    assert_non_null(strstr(pbl_exec_errmsg(e), "reshape"));
    assert_int_equal(pbl_exec_stats_get(e, &st), PBL_OK);
    assert_int_equal(st.batch, 8);
    assert_int_equal(pbl_exec_set_batch(e, 8), PBL_OK);
    pbl_exec_destroy(e);
    /* dynamic storage runs only its planned batch */
    pbl_exec_options o = pbl_exec_options_default();
    o.storage = PBL_STORAGE_DYNAMIC;
    assert_int_equal(pbl_exec_create(&e, g, &o, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_exec_set_batch(e, 4), PBL_ERR_UNSUPPORTED);
    assert_int_equal(pbl_exec_set_batch(e, 8), PBL_OK);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);

    /* a loss through pbl_mean: its gradient's broadcast_to and 1/count scale hold the planned
     * batch as attributes, so a smaller batch would be wrong: refused, not run */
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value xm = pbl_input(g, "x", PBL_SHAPE(8, 3)), wm = pbl_param(g, "w", PBL_SHAPE(3));
    pbl_value lm = pbl_mean(g, pbl_mul(g, xm, wm), NULL, 0, 0);
    assert_int_equal(pbl_graph_set_output(g, "loss", lm), PBL_OK);
    pbl_value gm;
    assert_int_equal(pbl_graph_gradient(g, lm, &wm, 1, &gm), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "dw", gm), PBL_OK);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_exec_create(&e, g, NULL, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_exec_set_batch(e, 5), PBL_ERR_UNSUPPORTED);
    assert_int_equal(pbl_exec_set_batch(e, 8), PBL_OK);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);

    /* inputs with different first dimensions: no batch to vary */
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value a = pbl_input(g, "a", PBL_SHAPE(4, 3)), b = pbl_input(g, "b", PBL_SHAPE(5, 3));
    pbl_value ab = pbl_matmul(g, a, b, 0, 1);
    assert_int_equal(pbl_graph_set_output(g, "ab", ab), PBL_OK);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_exec_create(&e, g, NULL, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_exec_stats_get(e, &st), PBL_OK);
    assert_int_equal(st.planned_batch, 0);
    assert_int_equal(pbl_exec_set_batch(e, 2), PBL_ERR_UNSUPPORTED);
    assert_non_null(strstr(pbl_exec_errmsg(e), "do not share a batch"));
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
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
        cmocka_unit_test(test_runtime_lr_scalar),
        cmocka_unit_test(test_adamw_scalars_match_constants),
        cmocka_unit_test(test_clip_grad_norm),
        cmocka_unit_test(test_fused_clip_matches_explicit),
        cmocka_unit_test(test_scalars_json_round_trip),
        cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_resume_from_checkpoint_is_exact),
        cmocka_unit_test(test_partial_batch_matches_planned),
        cmocka_unit_test(test_partial_batch_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
