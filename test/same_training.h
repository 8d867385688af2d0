/*
 * same_training.h: training a graph and its rewrite (fused, recomputed, ...) side by side and
 * requiring the same bits after every step — the loss and parameters with planned storage,
 * and the gradients too with unshared storage (where no bytes are reused, so they stay readable).
 * Shared by test_fuse.c and test_recompute.c. Include after cmocka.h.
 */
#ifndef PBL_TEST_SAME_TRAINING_H
#define PBL_TEST_SAME_TRAINING_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/pebble.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s) { return (float)((double)(rng_next(s) >> 40) / (double)(1ull << 24)) * 2 - 1; }

/* The variables a training run binds, and what the test compares after a step: the loss and
 * the gradients (every update's second input; readable after a run with unshared storage only,
 * where no bytes are reused). */
typedef struct run {
    pbl_graph *g;
    pbl_exec  *e;
    int32_t    n_vars, n_grads;
    pbl_value  vars[512], grads[512];
    size_t     bytes[512], grad_bytes[512];
    void      *data[512];
} run;

static size_t value_bytes(const pbl_graph *g, pbl_value v)
{
    pbl_value_info vi;
    assert_int_equal(pbl_graph_value_info(g, v, &vi), PBL_OK);
    return (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype);
}

/* Binds every input, label and parameter of g to data generated from `seed` by name order:
 * two graphs with the same variables get the same bytes. The nodes run in `schedule`'s order
 * on `streams` streams (0: the default; test_schedule compares the orders). */
static void run_open_schedule(run *r, pbl_graph *g, pbl_storage_mode storage, pbl_schedule_kind schedule,
                              int32_t streams, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->g = g;
    char err[256];
    pbl_exec_options o = pbl_exec_options_default();
    o.storage = storage;
    o.blas_threads = 1; /* held fixed: the bits compared are the rewrite's, not OpenBLAS's threads' */
    o.schedule = schedule;
    o.streams = streams;
    if (pbl_exec_create(&r->e, g, &o, err, sizeof err) != PBL_OK)
        fail_msg("pbl_exec_create: %s", err);
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(g, v, &vi), PBL_OK);
        if (vi.kind == PBL_VALUE_NODE || vi.kind == PBL_VALUE_STATE)
            continue;
        assert_true(r->n_vars < 512);
        int64_t n = pbl_shape_numel(&vi.shape);
        size_t bytes = (size_t)n * pbl_dtype_size(vi.dtype);
        void *p = malloc(bytes);
        assert_non_null(p);
        uint64_t s = seed;
        for (const char *c = vi.name; *c; c++)
            s = s * 131 + (uint64_t)(unsigned char)*c;
        if (vi.dtype == PBL_I32) {
            for (int64_t i = 0; i < n; i++)
                ((int32_t *)p)[i] = (int32_t)(rng_next(&s) % 10);
        } else {
            /* He-uniform for weights (fan-in is the last dim), U(-1, 1) for the rest */
            float scale = vi.kind == PBL_VALUE_PARAM && vi.shape.ndim == 2 ? sqrtf(6.0f / (float)vi.shape.dim[1]) : 1;
            if (vi.kind == PBL_VALUE_PARAM && vi.shape.ndim == 1)
                scale = 0.01f;
            for (int64_t i = 0; i < n; i++)
                ((float *)p)[i] = scale * uniform(&s);
        }
        assert_int_equal(pbl_exec_bind(r->e, v, p, bytes), PBL_OK);
        r->vars[r->n_vars] = v;
        r->bytes[r->n_vars] = bytes;
        r->data[r->n_vars++] = p;
    }
    r->grads[r->n_grads] = pbl_graph_output(g, "loss");
    r->grad_bytes[r->n_grads++] = sizeof(float);
    for (pbl_node n = 0; n < pbl_graph_node_count(g) && storage == PBL_STORAGE_UNSHARED; n++) {
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, n, &ni), PBL_OK);
        if (strcmp(ni.op, "sgd") && strcmp(ni.op, "sgd_momentum") && strcmp(ni.op, "adam"))
            continue;
        assert_true(r->n_grads < 512);
        r->grads[r->n_grads] = ni.inputs[1];
        r->grad_bytes[r->n_grads++] = value_bytes(g, ni.inputs[1]);
    }
}

static void run_open(run *r, pbl_graph *g, pbl_storage_mode storage, uint64_t seed)
{
    run_open_schedule(r, g, storage, PBL_SCHEDULE_PROGRAM, 0, seed);
}

static void run_close(run *r)
{
    pbl_exec_destroy(r->e);
    for (int32_t i = 0; i < r->n_vars; i++)
        free(r->data[i]);
}

/* Compares, after a step, a's and b's gradients (and loss) and variables (parameters). */
static int64_t compare(const run *a, const run *b, int step, const char *what)
{
    int64_t compared = 0;
    assert_int_equal(a->n_vars, b->n_vars);
    assert_int_equal(a->n_grads, b->n_grads);
    for (int32_t i = 0; i < a->n_grads; i++) {
        pbl_value_info ai, bi;
        assert_int_equal(pbl_graph_value_info(a->g, a->grads[i], &ai), PBL_OK);
        assert_int_equal(pbl_graph_value_info(b->g, b->grads[i], &bi), PBL_OK);
        assert_string_equal(ai.name, bi.name);
        void *x = malloc(a->grad_bytes[i]), *y = malloc(a->grad_bytes[i]);
        assert_int_equal(pbl_exec_read(a->e, a->grads[i], x, a->grad_bytes[i]), PBL_OK);
        assert_int_equal(pbl_exec_read(b->e, b->grads[i], y, a->grad_bytes[i]), PBL_OK);
        if (memcmp(x, y, a->grad_bytes[i]) != 0)
            fail_msg("%s: step %d: %s differs", what, step + 1, ai.name);
        compared += (int64_t)a->grad_bytes[i];
        free(x);
        free(y);
    }
    for (int32_t i = 0; i < a->n_vars; i++) {
        if (memcmp(a->data[i], b->data[i], a->bytes[i]) != 0)
            fail_msg("%s: step %d: variable %d differs", what, step + 1, (int)i);
        compared += (int64_t)a->bytes[i];
    }
    return compared;
}

/* Runs `steps` steps of g and of its rewrite side by side, with planned storage (the loss and
 * the parameters must be the same bits after every step) and with unshared storage (so are the
 * gradients). */
static void same_training(pbl_graph *plain, pbl_graph *lean, int steps, const char *what)
{
    run a, b, c, d;
    run_open(&a, plain, PBL_STORAGE_PLANNED, 7);
    run_open(&b, lean, PBL_STORAGE_PLANNED, 7);
    run_open(&c, plain, PBL_STORAGE_UNSHARED, 7);
    run_open(&d, lean, PBL_STORAGE_UNSHARED, 7);
    assert_true(c.n_grads > 2);
    int64_t compared = 0;
    for (int step = 0; step < steps; step++) {
        assert_int_equal(pbl_exec_run(a.e), PBL_OK);
        assert_int_equal(pbl_exec_run(b.e), PBL_OK);
        assert_int_equal(pbl_exec_run(c.e), PBL_OK);
        assert_int_equal(pbl_exec_run(d.e), PBL_OK);
        compared += compare(&a, &b, step, what);
        compared += compare(&c, &d, step, what);
    }
    float loss = 0;
    assert_int_equal(pbl_exec_read(a.e, pbl_graph_output(plain, "loss"), &loss, sizeof loss), PBL_OK);
    assert_true(isfinite(loss));
    printf("  %-28s %d steps: loss, %d gradients and %d variables match bit for bit (%lld bytes), loss %.5f\n",
           what, steps, (int)c.n_grads - 1, (int)a.n_vars, (long long)compared, (double)loss);
    run_close(&a);
    run_close(&b);
    run_close(&c);
    run_close(&d);
}

#endif
