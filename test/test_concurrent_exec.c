/* One graph, read from several threads at once (pebble/graph.h's promise): 4 threads create
 * executors from one shared graph (the zoo's mlp_train: Adam, backward pass), bind their own
 * buffers, train a few steps and get the bits one thread gets alone; 4 threads plan one graph
 * at once (liveness + the `best` planner, whose coloring strategy calls igraph; the stream
 * colouring, which calls igraph too, then stream storage) and get the single-threaded plans.
 * A validation failure reaches the caller's buffer and leaves the const graph's message alone.
 * Labelled `threads`: .ci/test runs it under ThreadSanitizer, which must report nothing (the
 * executor used to cast the const away and validate through the graph, writing its message
 * and memory counters from every thread). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"
#include "tools/zoo/zoo.h"

enum { N_THREADS = 4, STEPS = 3, BATCH = 16, ROUNDS = 2 };

static uint32_t next(uint64_t *rng)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*rng >> 33);
}
static float unit(uint64_t *rng) { return (float)(next(rng) >> 8) / 16777216.0f; } /* [0, 1) */

static pbl_graph *shared_graph(void)
{
    pbl_graph *g = NULL;
    char err[256];
    pbl_status s = zoo_build("mlp_train", BATCH, &g, err, sizeof err);
    if (s != PBL_OK)
        print_error("zoo_build: %s\n", err);
    assert_int_equal(s, PBL_OK);
    return g;
}

/* ---- executors -------------------------------------------------------------------------- */

/* One thread's work: an executor on `streams` streams over g, every variable bound to this
 * job's own buffers (parameters seeded the same in every job, inputs and labels drawn from the
 * same seed each step); out: the parameters after STEPS runs, then each step's loss. Worker
 * threads never call cmocka (it longjmps): they report through status and err. */
typedef struct exec_job {
    const pbl_graph *g;
    int32_t          streams;
    pbl_status       status;
    char             err[384];
    unsigned char   *out;
    size_t           out_bytes;
} exec_job;

static size_t value_bytes(const pbl_value_info *vi) { return (size_t)pbl_shape_numel(&vi->shape) * pbl_dtype_size(vi->dtype); }

static void fill(const pbl_value_info *vi, void *p, uint64_t *rng)
{
    int64_t n = pbl_shape_numel(&vi->shape);
    for (int64_t i = 0; i < n; i++)
        if (vi->dtype == PBL_I32)
            ((int32_t *)p)[i] = (int32_t)(next(rng) % 10); /* mlp_train: 10 classes */
        else
            ((float *)p)[i] = vi->kind == PBL_VALUE_PARAM ? (2.0f * unit(rng) - 1.0f) * 0.05f : unit(rng) - 0.5f;
}

static void *exec_worker(void *arg)
{
    exec_job *j = arg;
    const pbl_graph *g = j->g;
    int32_t nv = pbl_graph_value_count(g);
    pbl_value loss = pbl_graph_output(g, "loss");
    void **buf = calloc((size_t)nv, sizeof *buf);
    pbl_exec *e = NULL;
    j->status = PBL_ERR_NOMEM;
    snprintf(j->err, sizeof j->err, "out of memory");
    if (!buf)
        return NULL;
    pbl_exec_options o = pbl_exec_options_default();
    o.threads = 1;
    o.streams = j->streams;
    o.poison = 1;
    j->status = pbl_exec_create(&e, g, &o, j->err, sizeof j->err);
    if (j->status != PBL_OK)
        goto done;
    uint64_t rng = 12345;
    size_t param_bytes = 0;
    for (pbl_value v = 0; v < nv && j->status == PBL_OK; v++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, v, &vi);
        if (vi.kind != PBL_VALUE_PARAM && vi.kind != PBL_VALUE_INPUT && vi.kind != PBL_VALUE_LABEL)
            continue;
        if (!(buf[v] = malloc(value_bytes(&vi)))) {
            j->status = PBL_ERR_NOMEM;
            goto done;
        }
        if (vi.kind == PBL_VALUE_PARAM) {
            fill(&vi, buf[v], &rng);
            param_bytes += value_bytes(&vi);
        }
        j->status = pbl_exec_bind(e, v, buf[v], value_bytes(&vi));
    }
    j->out_bytes = param_bytes + STEPS * sizeof(float);
    if (j->status != PBL_OK || !(j->out = malloc(j->out_bytes)))
        goto done_msg;
    for (int step = 0; step < STEPS && j->status == PBL_OK; step++) {
        for (pbl_value v = 0; v < nv; v++) {
            pbl_value_info vi;
            pbl_graph_value_info(g, v, &vi);
            if (vi.kind == PBL_VALUE_INPUT || vi.kind == PBL_VALUE_LABEL)
                fill(&vi, buf[v], &rng);
        }
        j->status = pbl_exec_run(e);
        if (j->status == PBL_OK)
            j->status = pbl_exec_read(e, loss, j->out + param_bytes + (size_t)step * sizeof(float), sizeof(float));
    }
    size_t at = 0;
    for (pbl_value v = 0; v < nv && j->status == PBL_OK; v++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, v, &vi);
        if (vi.kind == PBL_VALUE_PARAM) {
            memcpy(j->out + at, buf[v], value_bytes(&vi)); /* bound: the executor trained them in place */
            at += value_bytes(&vi);
        }
    }
done_msg:
    if (j->status != PBL_OK)
        snprintf(j->err, sizeof j->err, "%s", pbl_exec_errmsg(e));
done:
    pbl_exec_destroy(e);
    for (pbl_value v = 0; v < nv; v++)
        free(buf[v]);
    free(buf);
    return NULL;
}

/* 4 threads at once, two on one stream and two on two (the stream colouring runs in
 * pbl_exec_create), each bit-identical to one executor trained alone. */
static void test_executors_from_one_graph(void **state)
{
    (void)state;
    pbl_graph *g = shared_graph();
    exec_job ref = { .g = g, .streams = 1 };
    exec_worker(&ref);
    if (ref.status != PBL_OK)
        print_error("reference: %s\n", ref.err);
    assert_int_equal(ref.status, PBL_OK);
    for (int round = 0; round < ROUNDS; round++) {
        exec_job jobs[N_THREADS];
        pthread_t th[N_THREADS];
        for (int i = 0; i < N_THREADS; i++) {
            jobs[i] = (exec_job){ .g = g, .streams = 1 + i % 2 };
            assert_int_equal(pthread_create(&th[i], NULL, exec_worker, &jobs[i]), 0);
        }
        for (int i = 0; i < N_THREADS; i++)
            assert_int_equal(pthread_join(th[i], NULL), 0);
        for (int i = 0; i < N_THREADS; i++) {
            if (jobs[i].status != PBL_OK)
                print_error("thread %d: %s\n", i, jobs[i].err);
            assert_int_equal(jobs[i].status, PBL_OK);
            assert_int_equal(jobs[i].out_bytes, ref.out_bytes);
            assert_memory_equal(jobs[i].out, ref.out, ref.out_bytes);
            free(jobs[i].out);
        }
    }
    float loss0, lossN;
    memcpy(&loss0, ref.out + ref.out_bytes - STEPS * sizeof(float), sizeof loss0);
    memcpy(&lossN, ref.out + ref.out_bytes - sizeof(float), sizeof lossN);
    printf("  mlp_train (batch %d), %d steps: %d rounds of %d threads (streams 1, 2, 1, 2) each bit-identical to "
           "one thread alone (%zu bytes of parameters and losses; loss %.4f -> %.4f)\n",
           BATCH, STEPS, ROUNDS, N_THREADS, ref.out_bytes, (double)loss0, (double)lossN);
    assert_string_equal(pbl_graph_errmsg(g), "");
    free(ref.out);
    pbl_graph_destroy(g);
}

/* ---- planning --------------------------------------------------------------------------- */

/* One thread's planning of g: liveness + `best` (offsets, arena), and a stream plan on 2
 * streams with its stream storage; out holds what the plans decided, to compare bit for bit. */
typedef struct plan_job {
    const pbl_graph *g;
    pbl_status       status;
    char             err[384];
    int64_t         *out; /* arena, offsets, then stream arena, streams, stream per step, offsets */
    size_t           n_out;
    int64_t          arena, stream_arena;
    int32_t          streams;
} plan_job;

static void *plan_worker(void *arg)
{
    plan_job *j = arg;
    pbl_graph_records live = { 0 };
    pbl_assignment a = { 0 };
    pbl_stream_plan sp = { 0 };
    pbl_stream_storage st = { 0 };
    j->status = pbl_graph_liveness(j->g, NULL, &live, j->err, sizeof j->err);
    if (j->status == PBL_OK)
        j->status = pbl_plan_records(live.records, live.n_records, "best", NULL, &a, j->err, sizeof j->err);
    if (j->status == PBL_OK)
        j->status = pbl_plan_verify(live.records, live.n_records, &a, 1, 0, j->err, sizeof j->err);
    pbl_stream_options so = pbl_stream_options_default();
    so.n_streams = 2;
    if (j->status == PBL_OK)
        j->status = pbl_graph_streams(j->g, &so, &sp, j->err, sizeof j->err);
    if (j->status == PBL_OK)
        j->status = pbl_graph_stream_storage(j->g, &sp, NULL, &st, j->err, sizeof j->err);
    if (j->status != PBL_OK)
        goto done;
    j->n_out = 1 + (size_t)live.n_records + 2 + (size_t)sp.n_steps + (size_t)st.live.n_records;
    j->status = PBL_ERR_NOMEM;
    if (!(j->out = malloc(j->n_out * sizeof *j->out)))
        goto done;
    size_t k = 0;
    j->out[k++] = a.arena;
    for (int32_t i = 0; i < live.n_records; i++)
        j->out[k++] = a.offset[i];
    j->out[k++] = st.plan.arena;
    j->out[k++] = sp.n_streams;
    for (int32_t t = 0; t < sp.n_steps; t++)
        j->out[k++] = sp.stream[t];
    for (int32_t i = 0; i < st.live.n_records; i++)
        j->out[k++] = st.plan.offset[i];
    j->arena = a.arena;
    j->stream_arena = st.plan.arena;
    j->streams = sp.n_streams;
    j->status = PBL_OK;
done:
    pbl_stream_storage_free(&st);
    pbl_stream_plan_free(&sp);
    pbl_assignment_free(&a);
    pbl_graph_records_free(&live);
    return NULL;
}

static void test_planning_one_graph(void **state)
{
    (void)state;
    pbl_graph *g = shared_graph();
    plan_job ref = { .g = g };
    plan_worker(&ref);
    if (ref.status != PBL_OK)
        print_error("reference: %s\n", ref.err);
    assert_int_equal(ref.status, PBL_OK);
    for (int round = 0; round < ROUNDS; round++) {
        plan_job jobs[N_THREADS];
        pthread_t th[N_THREADS];
        for (int i = 0; i < N_THREADS; i++) {
            jobs[i] = (plan_job){ .g = g };
            assert_int_equal(pthread_create(&th[i], NULL, plan_worker, &jobs[i]), 0);
        }
        for (int i = 0; i < N_THREADS; i++)
            assert_int_equal(pthread_join(th[i], NULL), 0);
        for (int i = 0; i < N_THREADS; i++) {
            if (jobs[i].status != PBL_OK)
                print_error("thread %d: %s\n", i, jobs[i].err);
            assert_int_equal(jobs[i].status, PBL_OK);
            assert_int_equal(jobs[i].n_out, ref.n_out);
            assert_memory_equal(jobs[i].out, ref.out, ref.n_out * sizeof *ref.out);
            free(jobs[i].out);
        }
    }
    printf("  mlp_train: %d rounds of %d threads planning at once (liveness + best: arena %lld bytes; "
           "2 streams: %d used, arena %lld bytes) each identical to one thread alone\n",
           ROUNDS, N_THREADS, (long long)ref.arena, (int)ref.streams, (long long)ref.stream_arena);
    assert_string_equal(pbl_graph_errmsg(g), "");
    free(ref.out);
    pbl_graph_destroy(g);
}

/* ---- a failed validation of a const graph -------------------------------------------------- */

/* A graph rewired into a cycle (pbl_graph_set_input does not look for cycles): pbl_exec_create,
 * pbl_graph_liveness and pbl_graph_streams refuse it with the message in the caller's buffer
 * and write nothing into the graph; pbl_graph_validate (not const) still leaves the message in
 * the graph. */
static void test_invalid_graph_message(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(2, 3));
    pbl_value y = pbl_relu(g, x), z = pbl_tanh(g, y);
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    assert_int_equal(pbl_graph_set_output(g, "z", z), PBL_OK);
    pbl_value_info vi;
    assert_int_equal(pbl_graph_value_info(g, y, &vi), PBL_OK);
    assert_int_equal(pbl_graph_set_input(g, vi.producer, 0, z), PBL_OK); /* relu(tanh(relu(...))) */
    assert_string_equal(pbl_graph_errmsg(g), "");

    char err[256] = "";
    pbl_exec *e = NULL;
    assert_int_equal(pbl_exec_create(&e, g, NULL, err, sizeof err), PBL_ERR_CYCLE);
    assert_null(e);
    printf("  pbl_exec_create: %s\n", err);
    assert_non_null(strstr(err, "lies on a cycle"));
    pbl_graph_records live;
    err[0] = '\0';
    assert_int_equal(pbl_graph_liveness(g, NULL, &live, err, sizeof err), PBL_ERR_CYCLE);
    assert_non_null(strstr(err, "lies on a cycle"));
    pbl_stream_plan sp;
    err[0] = '\0';
    assert_int_equal(pbl_graph_streams(g, NULL, &sp, err, sizeof err), PBL_ERR_CYCLE);
    assert_non_null(strstr(err, "lies on a cycle"));
    assert_int_equal(pbl_graph_liveness(g, NULL, &live, NULL, 0), PBL_ERR_CYCLE); /* no buffer: fine */
    assert_string_equal(pbl_graph_errmsg(g), ""); /* the const graph was not written */

    assert_int_equal(pbl_graph_validate(g), PBL_ERR_CYCLE);
    assert_string_equal(pbl_graph_errmsg(g), err);
    pbl_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_executors_from_one_graph),
        cmocka_unit_test(test_planning_one_graph),
        cmocka_unit_test(test_invalid_graph_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
