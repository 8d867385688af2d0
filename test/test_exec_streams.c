/* The stream runtime: steps spread over several streams (CPU worker threads, events between
 * them) compute exactly the bits one stream computes — on the training MLP and on seeded
 * random graphs, with the colouring of pbl_graph_streams and with random stream assignments,
 * with unshared and with happens-before-planned storage, NaN poison on — the waits are the
 * fewest the vector clocks allow, and a kernel failing on a worker is a status naming the
 * node, after which the executor runs again.
 *
 * Several streams run OpenBLAS single-threaded; one stream runs it on blas_threads threads,
 * and OpenBLAS's threaded products may round otherwise (pebble/exec.h). So the one-stream
 * reference asks for blas_threads = 1: BLAS is held fixed and the bits compared are the
 * stream runtime's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "executor/exec_internal.h"
#include "executor/stream_sync.h"
#include "pebble/pebble.h"

static uint64_t rng;
static uint32_t next(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float unit(void) { return (float)(next() >> 8) / 16777216.0f; } /* [0, 1) */

/* Creates an executor on n_streams streams with node i on assign[i] (NULL: one stream,
 * the public constructor). */
static pbl_exec *make_exec(const pbl_graph *g, const pbl_exec_options *o, int32_t n_streams, const int32_t *assign)
{
    pbl_exec *e = NULL;
    char err[384];
    pbl_status s = assign ? pbl__exec_create_assigned(&e, g, o, n_streams, assign, err, sizeof err)
                          : pbl_exec_create(&e, g, o, err, sizeof err);
    if (s != PBL_OK)
        print_error("exec_create (%d streams): %s\n", (int)n_streams, err);
    assert_int_equal(s, PBL_OK);
    return e;
}

/* ---- the training MLP (as test_train: tanh, dropout, relu, softmax cross-entropy, Adam) ---- */

enum { B = 32, D = 24, H1 = 32, H2 = 16, C = 5, N_PARAMS = 6 };
static const int64_t param_numel[N_PARAMS] = { H1 * D, H1, H2 * H1, H2, C * H2, C };

typedef struct mlp {
    pbl_graph *g;
    pbl_value  x, y, loss, params[N_PARAMS];
} mlp;

static void mlp_build(mlp *m)
{
    memset(m, 0, sizeof *m);
    assert_int_equal(pbl_graph_create(&m->g, NULL), PBL_OK);
    pbl_graph *g = m->g;
    m->x = pbl_input(g, "x", PBL_SHAPE(B, D));
    m->y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(B));
    pbl_value w1 = pbl_param(g, "w1", PBL_SHAPE(H1, D)), b1 = pbl_param(g, "b1", PBL_SHAPE(H1));
    pbl_value w2 = pbl_param(g, "w2", PBL_SHAPE(H2, H1)), b2 = pbl_param(g, "b2", PBL_SHAPE(H2));
    pbl_value w3 = pbl_param(g, "w3", PBL_SHAPE(C, H2)), b3 = pbl_param(g, "b3", PBL_SHAPE(C));
    pbl_value h = pbl_dropout(g, pbl_tanh(g, pbl_fully_connected(g, m->x, w1, b1)), 0.2, 7, NULL);
    h = pbl_relu(g, pbl_fully_connected(g, h, w2, b2));
    pbl_value logits = pbl_fully_connected(g, h, w3, b3);
    m->loss = pbl_softmax_cross_entropy(g, logits, m->y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "loss", m->loss), PBL_OK);
    pbl_value ps[N_PARAMS] = { w1, b1, w2, b2, w3, b3 }, gs[N_PARAMS];
    memcpy(m->params, ps, sizeof ps);
    assert_int_equal(pbl_graph_gradient(g, m->loss, ps, N_PARAMS, gs), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    o.lr = 3e-3;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, ps, gs, N_PARAMS), PBL_OK);
}

/* Trains `steps` steps from seeded parameters; returns the parameters then every loss (malloc'd). */
static float *mlp_train(const mlp *m, pbl_exec *e, int steps, size_t *n_out)
{
    size_t np = 0;
    for (int p = 0; p < N_PARAMS; p++)
        np += (size_t)param_numel[p];
    float *res = calloc(np + (size_t)steps, sizeof *res);
    rng = 42;
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++) {
        for (int64_t i = 0; i < param_numel[p]; i++)
            res[at + i] = (2.0f * unit() - 1.0f) * 0.2f;
        assert_int_equal(pbl_exec_write(e, m->params[p], res + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    }
    static float x[B * D];
    static int32_t y[B];
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < B; i++) {
            y[i] = (int32_t)(next() % C);
            for (int j = 0; j < D; j++)
                x[i * D + j] = unit() - 0.5f + (j % C == y[i] ? 1.0f : 0.0f);
        }
        assert_int_equal(pbl_exec_write(e, m->x, x, sizeof x), PBL_OK);
        assert_int_equal(pbl_exec_write(e, m->y, y, sizeof y), PBL_OK);
        pbl_status st = pbl_exec_run(e);
        if (st != PBL_OK)
            print_error("run: %s\n", pbl_exec_errmsg(e));
        assert_int_equal(st, PBL_OK);
        assert_int_equal(pbl_exec_read(e, m->loss, res + np + s, sizeof(float)), PBL_OK);
    }
    for (int p = 0, at = 0; p < N_PARAMS; at += (int)param_numel[p], p++)
        assert_int_equal(pbl_exec_read(e, m->params[p], res + at, (size_t)param_numel[p] * sizeof(float)), PBL_OK);
    *n_out = np + (size_t)steps;
    return res;
}

/* 1, 2 and 4 streams — coloured by pbl_graph_streams, and each node on a seeded random stream
 * — give the bits of one stream with serial planned storage, for unshared and happens-before
 * planned storage, NaN poison on. */
static void test_mlp_streams_match(void **state)
{
    (void)state;
    enum { STEPS = 30 };
    mlp m;
    mlp_build(&m);
    size_t n_ref, n;
    pbl_exec_options o = pbl_exec_options_default();
    o.poison = 1;
    o.blas_threads = 1; /* as several streams run it: see the file's comment */
    pbl_exec *e = make_exec(m.g, &o, 1, NULL);
    float *ref = mlp_train(&m, e, STEPS, &n_ref);
    pbl_exec_stats serial;
    pbl_exec_stats_get(e, &serial);
    pbl_exec_destroy(e);
    int32_t nn = pbl_graph_node_count(m.g);
    int32_t *assign = malloc((size_t)nn * sizeof *assign);
    for (int storage = 0; storage < 2; storage++) {
        o.storage = storage ? PBL_STORAGE_PLANNED : PBL_STORAGE_UNSHARED;
        for (int32_t k = 1; k <= 4; k *= 2) {
            for (int trial = -1; trial < 3; trial++) { /* -1: pbl_graph_streams' colouring */
                rng = 1000u + (uint64_t)(k * 10 + trial);
                for (int32_t i = 0; i < nn; i++)
                    assign[i] = (int32_t)(next() % (uint32_t)k);
                o.streams = k;
                e = make_exec(m.g, &o, k, trial < 0 ? NULL : assign);
                pbl_exec_stats st;
                pbl_exec_stats_get(e, &st);
                float *got = mlp_train(&m, e, STEPS, &n);
                assert_int_equal(n, n_ref);
                if (memcmp(got, ref, n * sizeof *got) != 0)
                    print_error("%s, %d streams, trial %d: parameters or losses differ from one stream\n",
                                storage ? "planned" : "unshared", (int)k, trial);
                assert_memory_equal(got, ref, n * sizeof *got);
                if (trial < 0)
                    printf("  MLP, %d steps, %s storage, %d streams asked: %d used, %d waits, arena %llu bytes "
                           "(serial plan %llu): bit-identical to one stream (and 3 random assignments)\n",
                           STEPS, storage ? "planned" : "unshared", (int)k, (int)st.streams, (int)st.waits,
                           (unsigned long long)st.arena_bytes, (unsigned long long)serial.arena_bytes);
                assert_true(st.streams >= 1 && st.streams <= k);
                if (storage)
                    assert_true(st.arena_bytes >= serial.lower_bound);
                free(got);
                pbl_exec_destroy(e);
            }
        }
    }
    o.streams = PBL_MAX_STREAMS + 1;
    char err[256];
    assert_int_equal(pbl_exec_create(&e, m.g, &o, err, sizeof err), PBL_ERR_INVALID_ARG);
    printf("  %d streams -> %s\n", PBL_MAX_STREAMS + 1, err);
    o.streams = 2;
    o.storage = PBL_STORAGE_DYNAMIC;
    assert_int_equal(pbl_exec_create(&e, m.g, &o, err, sizeof err), PBL_ERR_UNSUPPORTED);
    printf("  dynamic storage on 2 streams -> %s\n", err);
    free(assign);
    free(ref);
    pbl_graph_destroy(m.g);
}

/* ---- random graphs: independent lanes that meet, so streams really overlap ---- */

enum { RB = 3, LANES = 4, W = 6, MAXP = 48 };

typedef struct rgraph {
    pbl_graph *g;
    pbl_value  x, target, params[MAXP], outs[4];
    int32_t    n_params, n_outs;
} rgraph;

static void rgraph_build(rgraph *r, uint64_t seed, int nodes)
{
    memset(r, 0, sizeof *r);
    rng = seed * 0x9e3779b97f4a7c15ull + 3;
    assert_int_equal(pbl_graph_create(&r->g, NULL), PBL_OK);
    pbl_graph *g = r->g;
    r->x = pbl_input(g, "x", PBL_SHAPE(RB, W));
    pbl_value lane[LANES];
    for (int l = 0; l < LANES; l++)
        lane[l] = r->x;
    char name[32];
    for (int i = 0; i < nodes; i++) {
        int l = (int)(next() % LANES);
        pbl_value cur = lane[l];
        uint32_t pick = next() % 8;
        if (pick == 0)
            cur = pbl_relu(g, cur);
        else if (pick == 1)
            cur = pbl_tanh(g, cur);
        else if (pick == 2)
            cur = pbl_sigmoid(g, cur);
        else if (pick == 3)
            cur = pbl_add(g, cur, lane[(l + 1 + (int)(next() % (LANES - 1))) % LANES]); /* lanes meet */
        else if (pick == 4)
            cur = pbl_mul(g, cur, lane[(int)(next() % LANES)]);
        else if (pick == 5 && r->n_params < MAXP) {
            snprintf(name, sizeof name, "b%d", i);
            pbl_value b = pbl_param(g, name, PBL_SHAPE(W));
            r->params[r->n_params++] = b;
            cur = pbl_sub(g, cur, b);
        } else if (r->n_params < MAXP) {
            snprintf(name, sizeof name, "w%d", i);
            pbl_value w = pbl_param(g, name, PBL_SHAPE(W, W));
            r->params[r->n_params++] = w;
            cur = pbl_fully_connected(g, cur, w, PBL_NONE);
        }
        lane[l] = cur;
        if (next() % 11 == 0 && r->n_outs < 3) {
            snprintf(name, sizeof name, "out%d", r->n_outs);
            pbl_graph_set_output(g, name, cur);
            r->outs[r->n_outs++] = cur;
        }
    }
    pbl_value sum = lane[0];
    for (int l = 1; l < LANES; l++)
        sum = pbl_add(g, sum, lane[l]);
    r->target = pbl_input(g, "target", PBL_SHAPE(RB, W));
    pbl_value loss = pbl_mse_loss(g, sum, r->target);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    pbl_graph_set_output(g, "loss", loss);
    r->outs[r->n_outs++] = loss;
    if (r->n_params == 0)
        return;
    pbl_value grads[MAXP];
    assert_int_equal(pbl_graph_gradient(g, loss, r->params, r->n_params, grads), PBL_OK);
    pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    o.lr = 0.05;
    assert_int_equal(pbl_graph_add_optimizer(g, &o, r->params, grads, r->n_params), PBL_OK);
}

static size_t numel(const pbl_graph *g, pbl_value v)
{
    pbl_value_info vi;
    pbl_graph_value_info(g, v, &vi);
    return (size_t)pbl_shape_numel(&vi.shape);
}

/* Three training steps; every output and parameter, concatenated (malloc'd). */
static float *rgraph_run(const rgraph *r, pbl_exec *e, size_t *n_out)
{
    size_t total = 0, at = 0;
    for (int32_t i = 0; i < r->n_params; i++)
        total += numel(r->g, r->params[i]);
    for (int32_t i = 0; i < r->n_outs; i++)
        total += numel(r->g, r->outs[i]);
    float *res = calloc(total, sizeof *res), x[RB * W], t[RB * W], p[W * W];
    rng = 99;
    for (int i = 0; i < RB * W; i++) {
        x[i] = unit() - 0.5f;
        t[i] = unit();
    }
    assert_int_equal(pbl_exec_write(e, r->x, x, sizeof x), PBL_OK);
    assert_int_equal(pbl_exec_write(e, r->target, t, sizeof t), PBL_OK);
    for (int32_t i = 0; i < r->n_params; i++) {
        size_t n = numel(r->g, r->params[i]);
        for (size_t j = 0; j < n; j++)
            p[j] = 0.4f * (unit() - 0.5f);
        assert_int_equal(pbl_exec_write(e, r->params[i], p, n * sizeof *p), PBL_OK);
    }
    for (int k = 0; k < 3; k++) {
        pbl_status s = pbl_exec_run(e);
        if (s != PBL_OK)
            print_error("run: %s\n", pbl_exec_errmsg(e));
        assert_int_equal(s, PBL_OK);
    }
    for (int32_t i = 0; i < r->n_outs; i++) {
        size_t n = numel(r->g, r->outs[i]);
        assert_int_equal(pbl_exec_read(e, r->outs[i], res + at, n * sizeof *res), PBL_OK);
        at += n;
    }
    for (int32_t i = 0; i < r->n_params; i++) {
        size_t n = numel(r->g, r->params[i]);
        assert_int_equal(pbl_exec_read(e, r->params[i], res + at, n * sizeof *res), PBL_OK);
        at += n;
    }
    *n_out = total;
    return res;
}

/* Each graph: one stream with serial planned storage is the reference; 1..4 streams with a
 * random assignment and with the colouring, unshared and happens-before planned, poison on. */
static void test_random_graphs_match(void **state)
{
    (void)state;
    enum { SEEDS = 30 };
    int runs = 0;
    for (int seed = 0; seed < SEEDS; seed++) {
        rgraph r;
        rgraph_build(&r, (uint64_t)seed, 6 + seed % 30);
        size_t n_ref, n;
        pbl_exec_options o = pbl_exec_options_default();
        o.poison = 1;
        o.blas_threads = 1;
        pbl_exec *e = make_exec(r.g, &o, 1, NULL);
        float *ref = rgraph_run(&r, e, &n_ref);
        pbl_exec_destroy(e);
        int32_t nn = pbl_graph_node_count(r.g);
        int32_t *assign = malloc((size_t)nn * sizeof *assign);
        for (int32_t k = 1; k <= 4; k++) {
            for (int variant = 0; variant < 4; variant++) { /* bit 0: planned; bit 1: colouring */
                rng = (uint64_t)seed * 31u + (uint64_t)k;
                for (int32_t i = 0; i < nn; i++)
                    assign[i] = (int32_t)(next() % (uint32_t)k);
                o.storage = variant & 1 ? PBL_STORAGE_PLANNED : PBL_STORAGE_UNSHARED;
                o.streams = k;
                e = make_exec(r.g, &o, k, variant & 2 ? NULL : assign);
                float *got = rgraph_run(&r, e, &n);
                assert_int_equal(n, n_ref);
                if (memcmp(got, ref, n * sizeof *got) != 0)
                    print_error("seed %d, %d streams, %s storage, %s: results differ from one stream\n", seed,
                                (int)k, variant & 1 ? "planned" : "unshared", variant & 2 ? "coloured" : "random");
                assert_memory_equal(got, ref, n * sizeof *got);
                free(got);
                pbl_exec_destroy(e);
                runs++;
            }
        }
        free(assign);
        free(ref);
        pbl_graph_destroy(r.g);
    }
    printf("  %d random training graphs x 1..4 streams x {unshared, planned} x {random, coloured} = %d runs, each "
           "bit-identical to one stream\n", SEEDS, runs);
}

/* ---- failures ---- */

/* A label out of range fails the loss kernel on its worker: the status and message name the
 * node; a run with good labels afterwards succeeds. */
static void test_kernel_failure_on_a_stream(void **state)
{
    (void)state;
    mlp m;
    mlp_build(&m);
    pbl_exec_options o = pbl_exec_options_default();
    o.storage = PBL_STORAGE_UNSHARED;
    int32_t nn = pbl_graph_node_count(m.g);
    int32_t *assign = malloc((size_t)nn * sizeof *assign);
    for (int32_t i = 0; i < nn; i++)
        assign[i] = i % 3;
    pbl_exec *e = make_exec(m.g, &o, 3, assign);
    static float x[B * D], p[H1 * D];
    int32_t y[B];
    for (int i = 0; i < B; i++)
        y[i] = i % C;
    y[5] = 99;
    for (int q = 0; q < N_PARAMS; q++)
        assert_int_equal(pbl_exec_write(e, m.params[q], p, (size_t)param_numel[q] * sizeof(float)), PBL_OK);
    assert_int_equal(pbl_exec_write(e, m.x, x, sizeof x), PBL_OK);
    assert_int_equal(pbl_exec_write(e, m.y, y, sizeof y), PBL_OK);
    pbl_status s = pbl_exec_run(e);
    printf("  bad label on 3 streams -> %s: %s\n", pbl_status_str(s), pbl_exec_errmsg(e));
    assert_int_not_equal(s, PBL_OK);
    assert_non_null(strstr(pbl_exec_errmsg(e), "softmax_cross_entropy"));
    assert_non_null(strstr(pbl_exec_errmsg(e), "label 99"));
    assert_int_equal(pbl_exec_run_count(e), 0);
    y[5] = 0;
    assert_int_equal(pbl_exec_write(e, m.y, y, sizeof y), PBL_OK);
    assert_int_equal(pbl_exec_run(e), PBL_OK);
    assert_int_equal(pbl_exec_run_count(e), 1);
    pbl_exec_destroy(e);

    /* a bad assignment is a status */
    char err[384];
    assign[0] = 7;
    assert_int_equal(pbl__exec_create_assigned(&e, m.g, &o, 3, assign, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_null(e);
    printf("  stream 7 of 3 -> %s\n", err);
    free(assign);
    pbl_graph_destroy(m.g);
}

/* Given streams are the streams run: every node on stream 1 of 2 needs no wait (a colouring
 * of the MLP would spread it over both and wait), and alternating streams need waits. */
static void test_assigned_streams_kept(void **state)
{
    (void)state;
    mlp m;
    mlp_build(&m);
    int32_t nn = pbl_graph_node_count(m.g);
    int32_t *assign = malloc((size_t)nn * sizeof *assign);
    pbl_exec_options o = pbl_exec_options_default();
    o.storage = PBL_STORAGE_NAIVE;
    for (int alternate = 0; alternate < 2; alternate++) {
        for (int32_t i = 0; i < nn; i++)
            assign[i] = alternate ? i % 2 : 1;
        pbl_exec *e = make_exec(m.g, &o, 2, assign);
        pbl_exec_stats st;
        assert_int_equal(pbl_exec_stats_get(e, &st), PBL_OK);
        printf("  %s: %d streams, %d waits\n", alternate ? "alternating" : "all on stream 1", (int)st.streams,
               (int)st.waits);
        assert_int_equal(st.streams, 2);
        if (alternate)
            assert_true(st.waits > 0);
        else
            assert_int_equal(st.waits, 0);
        pbl_exec_destroy(e);
    }
    free(assign);
    pbl_graph_destroy(m.g);
}

/* Every allocation of a 2-stream create (planned, poison) failing in turn gives PBL_ERR_NOMEM
 * and leaks nothing. */
typedef struct counting { int64_t n, fail_at, live; } counting;
static void *c_alloc(void *u, size_t n)
{
    counting *c = u;
    if (++c->n == c->fail_at)
        return NULL;
    c->live++;
    return malloc(n);
}
static void c_free(void *u, void *p, size_t n)
{
    (void)n;
    ((counting *)u)->live--;
    free(p);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    mlp m;
    mlp_build(&m);
    int32_t nn = pbl_graph_node_count(m.g);
    int32_t *assign = malloc((size_t)nn * sizeof *assign);
    for (int32_t i = 0; i < nn; i++)
        assign[i] = i % 2;
    counting c = { 0, 0, 0 };
    pbl_allocator a = { .alloc = c_alloc, .free = c_free, .user = &c };
    pbl_exec_options o = pbl_exec_options_default();
    o.poison = 1;
    o.allocator = &a;
    pbl_exec *e = make_exec(m.g, &o, 2, assign);
    pbl_exec_destroy(e);
    int64_t total = c.n;
    assert_int_equal(c.live, 0);
    for (int64_t k = 1; k <= total; k++) {
        c = (counting){ 0, k, 0 };
        char err[256];
        pbl_status s = pbl__exec_create_assigned(&e, m.g, &o, 2, assign, err, sizeof err);
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_null(e);
        if (c.live != 0)
            print_error("failing allocation %lld of %lld leaks %lld blocks\n", (long long)k, (long long)total,
                        (long long)c.live);
        assert_int_equal(c.live, 0);
    }
    printf("  2-stream create: each of %lld allocations failing gives PBL_ERR_NOMEM, no leak\n", (long long)total);
    free(assign);
    pbl_graph_destroy(m.g);
}

/* ---- the waits ---- */

/* Steps 0..5 on streams A B A B A B:
 *   1 needs 0; 2 needs 1; 3 needs 0 (implied: 3 comes after 1 on B, which saw 0);
 *   4 needs 1 and 3 (3 alone implies 1); 5 needs 2 and 4 (4 implies 2: 4 is after 2 on A).
 * Expected: 1 waits for 0, 2 for 1, 4 for 3, 5 for 4; events on steps 0, 1, 3, 4. */
static void test_sync_reduction(void **state)
{
    (void)state;
    int32_t stream[] = { 0, 1, 0, 1, 0, 1 };
    int32_t need_start[] = { 0, 0, 1, 2, 3, 5, 7 };
    int32_t need[] = { 0, 1, 0, 1, 3, 2, 4 };
    pbl__mem m;
    pbl__mem_init(&m, NULL);
    pbl__stream_sync s;
    char err[128];
    assert_int_equal(pbl__stream_sync_build(6, 2, stream, need_start, need, &m, &s, err, sizeof err), PBL_OK);
    int32_t want_start[] = { 0, 0, 1, 2, 2, 3, 4 };
    int32_t want_event[] = { 0, 1, -1, 2, 3, -1 };
    int32_t want_wait[] = { 0, 1, 2, 3 }; /* events of steps 0, 1, 3, 4 */
    assert_int_equal(s.n_waits, 4);
    assert_int_equal(s.n_events, 4);
    assert_memory_equal(s.wait_start, want_start, sizeof want_start);
    assert_memory_equal(s.event, want_event, sizeof want_event);
    assert_memory_equal(s.wait_ev, want_wait, sizeof want_wait);
    pbl__stream_sync_free(&s, &m);
    int32_t bad[] = { 0, 4, 0, 1, 3, 2, 4 }; /* step 1 needs step 4: not earlier */
    assert_int_equal(pbl__stream_sync_build(6, 2, stream, need_start, bad, &m, &s, err, sizeof err),
                     PBL_ERR_INVALID_ARG);
    printf("  a need on a later step -> %s\n", err);
    assert_int_equal(m.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_reduction),
        cmocka_unit_test(test_mlp_streams_match),
        cmocka_unit_test(test_random_graphs_match),
        cmocka_unit_test(test_kernel_failure_on_a_stream),
        cmocka_unit_test(test_assigned_streams_kept),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
