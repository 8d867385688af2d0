/* pebble/viz.h: every strategy's plan for pictures (pbl_viz_plan_records) and its JSON
 * (pbl_viz_write_json). The offsets must be the planner's own, verified, and inside the arena;
 * the live-bytes curve must match a brute-force count; the JSON must parse back (jansson) to
 * the same numbers, and for graphs name each record's values, producer and consumers. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "pebble/pebble.h"

/* A small record set with reuse, ties and a gap: ten records over twelve steps. */
static const pbl_usage_record ten[] = {
    { 64, 0, 3 }, { 32, 1, 4 }, { 128, 2, 5 }, { 16, 3, 9 }, { 256, 5, 7 },
    { 64, 6, 8 }, { 96, 7, 12 }, { 8, 8, 10 }, { 200, 9, 11 }, { 40, 10, 12 },
};
#define N_TEN ((int32_t)(sizeof ten / sizeof ten[0]))

/* Bytes live at time t, counted directly. */
static int64_t live_at(const pbl_usage_record *r, int32_t n, int64_t t)
{
    int64_t sum = 0;
    for (int32_t i = 0; i < n; i++)
        if (r[i].first <= t && t < r[i].last)
            sum += r[i].size;
    return sum;
}

/* Everything pbl_viz_plan_records promises about p, for records r. */
static void check_plan(const pbl_usage_record *r, int32_t n, const pbl_viz_plan *p, int64_t align)
{
    assert_int_equal(p->n_records, n);
    assert_int_equal(p->lower_bound, pbl_records_lower_bound(r, n));
    /* the curve: at every point, the bytes live there; its peak is the lower bound */
    int64_t peak = 0;
    for (int32_t j = 0; j < p->n_points; j++) {
        if (j)
            assert_true(p->time[j] > p->time[j - 1]);
        assert_int_equal(p->live[j], live_at(r, n, p->time[j]));
        if (p->live[j] > peak)
            peak = p->live[j];
    }
    assert_int_equal(peak, p->lower_bound);
    if (n)
        assert_int_equal(p->live[p->n_points - 1], 0);
    int32_t best = -1;
    for (int32_t k = 0; k < p->n_strategies; k++) {
        const pbl_viz_strategy *s = &p->strategies[k];
        if (!s->valid) {
            assert_null(s->offset);
            assert_true(s->error[0] != '\0');
            continue;
        }
        /* the offsets are the planner's own for that strategy, and they verify */
        pbl_plan_options po = pbl_plan_options_default();
        po.align = align;
        pbl_assignment a;
        char err[256];
        assert_int_equal(pbl_plan_records(r, n, s->name, &po, &a, err, sizeof err), PBL_OK);
        assert_int_equal(a.arena, s->arena);
        assert_memory_equal(a.offset, s->offset, (size_t)n * sizeof *a.offset);
        pbl_assignment_free(&a);
        pbl_assignment b = { .offset = s->offset, .n_records = n, .arena = s->arena };
        assert_int_equal(pbl_plan_verify(r, n, &b, align, 0, err, sizeof err), PBL_OK);
        /* every rectangle inside the arena, and the arena is the highest one's top */
        int64_t top = 0;
        for (int32_t i = 0; i < n; i++) {
            assert_true(s->offset[i] >= 0);
            assert_true(s->offset[i] + r[i].size <= s->arena);
            assert_int_equal(s->offset[i] % align, 0);
            if (s->offset[i] + r[i].size > top)
                top = s->offset[i] + r[i].size;
        }
        assert_int_equal(top, s->arena);
        assert_true(s->arena >= p->lower_bound);
        assert_true(s->ms >= 0);
        if (best < 0 || s->arena < p->strategies[best].arena)
            best = k;
    }
    assert_int_equal(p->best, best);
}

static void test_every_strategy(void **state)
{
    (void)state;
    pbl_viz_plan p;
    char err[256];
    assert_int_equal(pbl_viz_plan_records(ten, N_TEN, NULL, &p, err, sizeof err), PBL_OK);
    assert_int_equal(p.n_strategies, pbl_plan_strategy_count() - 1); /* all but best */
    for (int32_t k = 0; k < p.n_strategies; k++) {
        assert_string_equal(p.strategies[k].name, pbl_plan_strategy_name(k));
        assert_true(p.strategies[k].valid); /* every strategy plans ten records */
    }
    check_plan(ten, N_TEN, &p, 1);
    assert_int_equal(p.lower_bound, 336); /* at step 6 (16 + 256 + 64) and at step 10 (96 + 200 + 40) */
    pbl_viz_plan_free(&p);
    pbl_viz_plan_free(&p); /* freed twice: a zeroed plan */
    pbl_viz_plan_free(NULL);
}

static void test_chosen_strategies_and_align(void **state)
{
    (void)state;
    const char *names[] = { "naive", "offset_greedy_by_size", "exact" };
    pbl_viz_options o = pbl_viz_options_default();
    o.strategies = names;
    o.n_strategies = 3;
    o.align = 64;
    pbl_viz_plan p;
    char err[256];
    assert_int_equal(pbl_viz_plan_records(ten, N_TEN, &o, &p, err, sizeof err), PBL_OK);
    assert_int_equal(p.n_strategies, 3);
    assert_string_equal(p.strategies[1].name, "offset_greedy_by_size");
    check_plan(ten, N_TEN, &p, 64);
    /* naive puts every record after the previous one, at aligned offsets */
    int64_t sum = ten[N_TEN - 1].size;
    for (int32_t i = 0; i + 1 < N_TEN; i++)
        sum += (ten[i].size + 63) / 64 * 64;
    assert_int_equal(p.strategies[0].arena, sum);
    pbl_viz_plan_free(&p);

    names[1] = "no_such_strategy";
    assert_int_equal(pbl_viz_plan_records(ten, N_TEN, &o, &p, err, sizeof err), PBL_ERR_NOT_FOUND);
    assert_non_null(strstr(err, "no_such_strategy"));
    pbl_viz_plan_free(&p);
    pbl_usage_record bad[] = { { 8, 3, 3 } };
    assert_int_equal(pbl_viz_plan_records(bad, 1, NULL, &p, err, sizeof err), PBL_ERR_INVALID_ARG);
    pbl_viz_plan_free(&p);
    assert_int_equal(pbl_viz_plan_records(NULL, 0, NULL, &p, err, sizeof err), PBL_OK);
    assert_int_equal(p.n_points, 0);
    assert_int_equal(p.lower_bound, 0);
    pbl_viz_plan_free(&p);
}

/* The JSON of p, parsed. */
static json_t *to_json(const pbl_viz_plan *p, const pbl_viz_labels *l, char **text)
{
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    assert_non_null(f);
    char err[256];
    pbl_status s = pbl_viz_write_json(p, l, f, err, sizeof err);
    fclose(f);
    if (s != PBL_OK)
        print_error("pbl_viz_write_json: %s\n", err);
    assert_int_equal(s, PBL_OK);
    json_error_t je;
    json_t *j = json_loadb(*text, len, 0, &je);
    if (!j)
        print_error("JSON line %d: %s\n", je.line, je.text);
    assert_non_null(j);
    return j;
}

static int64_t at(json_t *array, size_t i) { return json_integer_value(json_array_get(array, i)); }

static void test_json_matches_plan(void **state)
{
    (void)state;
    pbl_viz_plan p;
    char err[256];
    assert_int_equal(pbl_viz_plan_records(ten, N_TEN, NULL, &p, err, sizeof err), PBL_OK);
    const char *ids[N_TEN] = { "a", "b", "</script><b>\"x\"&", "d", "e", "f", "g", "h", "i", "j\n" };
    pbl_viz_labels l = { .title = "ten <records>", .ids = ids };
    char *text = NULL;
    json_t *j = to_json(&p, &l, &text);
    /* nothing that could end a <script> element or open a tag */
    assert_null(strstr(text, "</"));
    assert_null(strchr(text, '<'));
    assert_string_equal(json_string_value(json_object_get(j, "format")), "pebble-viz");
    assert_string_equal(json_string_value(json_object_get(j, "title")), "ten <records>");
    assert_int_equal(json_integer_value(json_object_get(j, "n_records")), N_TEN);
    assert_int_equal(json_integer_value(json_object_get(j, "lower_bound")), p.lower_bound);
    assert_int_equal(json_integer_value(json_object_get(j, "best")), p.best);
    json_t *rec = json_object_get(j, "records");
    for (int32_t i = 0; i < N_TEN; i++) {
        assert_string_equal(json_string_value(json_array_get(json_object_get(rec, "id"), (size_t)i)), ids[i]);
        assert_int_equal(at(json_object_get(rec, "size"), (size_t)i), ten[i].size);
        assert_int_equal(at(json_object_get(rec, "first"), (size_t)i), ten[i].first);
        assert_int_equal(at(json_object_get(rec, "last"), (size_t)i), ten[i].last);
    }
    json_t *live = json_object_get(j, "live");
    assert_int_equal(json_array_size(json_object_get(live, "time")), (size_t)p.n_points);
    for (int32_t k = 0; k < p.n_points; k++)
        assert_int_equal(at(json_object_get(live, "bytes"), (size_t)k), p.live[k]);
    json_t *st = json_object_get(j, "strategies");
    assert_int_equal(json_array_size(st), (size_t)p.n_strategies);
    for (int32_t k = 0; k < p.n_strategies; k++) {
        json_t *s = json_array_get(st, (size_t)k);
        assert_string_equal(json_string_value(json_object_get(s, "name")), p.strategies[k].name);
        assert_int_equal(json_integer_value(json_object_get(s, "arena")), p.strategies[k].arena);
        double ratio = json_real_value(json_object_get(s, "ratio"));
        assert_true(ratio >= 1.0 && ratio < (double)p.strategies[k].arena / (double)p.lower_bound + 1e-5);
        json_t *off = json_object_get(s, "offset");
        assert_int_equal(json_array_size(off), (size_t)N_TEN);
        for (int32_t i = 0; i < N_TEN; i++)
            assert_int_equal(at(off, (size_t)i), p.strategies[k].offset[i]);
    }
    assert_null(json_object_get(j, "graph"));
    json_decref(j);
    free(text);
    pbl_viz_plan_free(&p);
}

/* A two-layer MLP with its gradient: the JSON names each record's values, shape, producer and
 * consumers, as the graph says. */
static void test_json_graph_labels(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4, 8)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(4));
    pbl_value w1 = pbl_param(g, "w1", PBL_SHAPE(16, 8)), b1 = pbl_param(g, "b1", PBL_SHAPE(16));
    pbl_value w2 = pbl_param(g, "w2", PBL_SHAPE(3, 16)), b2 = pbl_param(g, "b2", PBL_SHAPE(3));
    pbl_value h = pbl_relu(g, pbl_fully_connected(g, x, w1, b1));
    pbl_value logits = pbl_fully_connected(g, h, w2, b2);
    pbl_value loss = pbl_softmax_cross_entropy(g, logits, y);
    /* off the gradient's path, relu can take its input's record (a record with two values);
     * mul reads one value twice (one consumer, listed once) */
    pbl_value c = pbl_copy(g, logits);
    pbl_graph_set_output(g, "positive", pbl_relu(g, pbl_mul(g, c, c)));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    pbl_value wrt[] = { w1, b1, w2, b2 }, grads[4];
    assert_int_equal(pbl_graph_gradient(g, loss, wrt, 4, grads), PBL_OK);
    const char *grad_names[] = { "dw1", "db1", "dw2", "db2" };
    for (int k = 0; k < 4; k++)
        pbl_graph_set_output(g, grad_names[k], grads[k]);
    pbl_graph_records gr;
    pbl_liveness_options lo = pbl_liveness_options_default();
    char err[256];
    assert_int_equal(pbl_graph_liveness(g, &lo, &gr, err, sizeof err), PBL_OK);
    assert_true(gr.n_inplace > 0);

    pbl_viz_options o = pbl_viz_options_default();
    o.align = 64;
    pbl_viz_plan p;
    assert_int_equal(pbl_viz_plan_records(gr.records, gr.n_records, &o, &p, err, sizeof err), PBL_OK);
    check_plan(gr.records, gr.n_records, &p, 64);
    pbl_viz_labels l = { .title = "mlp", .graph = g, .graph_records = &gr };
    char *text = NULL;
    json_t *j = to_json(&p, &l, &text);
    json_t *G = json_object_get(j, "graph");
    assert_non_null(G);
    const char *keys[] = { "values", "shape", "producer", "backward", "consumers" };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        assert_int_equal(json_array_size(json_object_get(G, keys[k])), (size_t)gr.n_records);
    assert_int_equal(json_array_size(json_object_get(G, "schedule")), (size_t)gr.n_steps);
    int shared = 0, backward = 0;
    for (int32_t r = 0; r < gr.n_records; r++) {
        pbl_value_info vi;
        assert_int_equal(pbl_graph_value_info(g, gr.record_value[r], &vi), PBL_OK);
        json_t *values = json_array_get(json_object_get(G, "values"), (size_t)r);
        /* the record's values: exactly those liveness put in it */
        size_t count = 0;
        for (pbl_value v = 0; v < gr.n_values; v++)
            if (gr.value_record[v] == r) {
                pbl_value_info wi;
                pbl_graph_value_info(g, v, &wi);
                assert_string_equal(json_string_value(json_array_get(values, count)), wi.name);
                count++;
            }
        assert_int_equal(json_array_size(values), count);
        shared += (int)count - 1;
        pbl_node_info ni;
        assert_int_equal(pbl_graph_node_info(g, vi.producer, &ni), PBL_OK);
        char want[256];
        snprintf(want, sizeof want, "%s (%s)", ni.name, ni.op);
        assert_string_equal(json_string_value(json_array_get(json_object_get(G, "producer"), (size_t)r)), want);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(G, "backward"), (size_t)r)),
                         vi.is_backward ? 1 : 0);
        backward += vi.is_backward;
        /* consumers: the scheduled nodes reading one of its values, each once */
        json_t *cons = json_array_get(json_object_get(G, "consumers"), (size_t)r);
        size_t n_cons = 0;
        for (int32_t t = 0; t < gr.n_steps; t++) {
            assert_int_equal(pbl_graph_node_info(g, gr.schedule[t], &ni), PBL_OK);
            int reads = 0;
            for (int32_t k = 0; k < ni.n_inputs; k++)
                reads |= gr.value_record[ni.inputs[k]] == r;
            if (reads) {
                snprintf(want, sizeof want, "%s (%s)", ni.name, ni.op);
                assert_string_equal(json_string_value(json_array_get(cons, n_cons)), want);
                n_cons++;
            }
        }
        assert_int_equal(json_array_size(cons), n_cons);
    }
    assert_int_equal(shared, gr.n_inplace); /* each offer taken puts one more value in a record */
    printf("%d records, %d backward, %d in place\n", (int)gr.n_records, backward, (int)gr.n_inplace);
    assert_true(backward > 0 && backward < gr.n_records);
    json_decref(j);
    free(text);

    /* labels from another record set are refused */
    pbl_viz_plan q;
    assert_int_equal(pbl_viz_plan_records(ten, N_TEN, NULL, &q, err, sizeof err), PBL_OK);
    FILE *f = fopen("/dev/null", "w");
    assert_int_equal(pbl_viz_write_json(&q, &l, f, err, sizeof err), PBL_ERR_INVALID_ARG);
    fclose(f);
    pbl_viz_plan_free(&q);
    pbl_viz_plan_free(&p);
    pbl_graph_records_free(&gr);
    pbl_graph_destroy(g);
}

/* ---- allocation failures: a clean status and no leak ------------------------------------------- */

typedef struct counting {
    long   count, fail_at;
    int    failed;
    size_t live;
} counting;

static void *c_alloc(void *user, size_t n)
{
    counting *c = user;
    if (c->count++ == c->fail_at) {
        c->failed = 1;
        return NULL;
    }
    c->live += n;
    return malloc(n);
}

static void c_free(void *user, void *p, size_t n)
{
    counting *c = user;
    if (p)
        c->live -= n;
    free(p);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    const char *names[] = { "naive", "greedy_by_size", "offset_greedy_by_size" };
    long runs = 0;
    for (long fail_at = 0;; fail_at++) {
        counting c = { .fail_at = fail_at };
        pbl_allocator al = { c_alloc, c_free, &c };
        pbl_viz_options o = pbl_viz_options_default();
        o.allocator = &al;
        o.strategies = names;
        o.n_strategies = 3;
        pbl_viz_plan p;
        char err[256];
        pbl_status s = pbl_viz_plan_records(ten, N_TEN, &o, &p, err, sizeof err);
        runs++;
        if (s == PBL_OK) {
            FILE *f = fopen("/dev/null", "w");
            assert_int_equal(pbl_viz_write_json(&p, NULL, f, err, sizeof err), PBL_OK);
            fclose(f);
        } else if (s != PBL_ERR_NOMEM) {
            print_error("failing allocation %ld: %s: %s\n", fail_at, pbl_status_str(s), err);
            fail();
        }
        pbl_viz_plan_free(&p);
        if (c.live != 0) {
            print_error("failing allocation %ld: %zu bytes leaked\n", fail_at, c.live);
            fail();
        }
        if (!c.failed)
            break;
    }
    printf("allocation failures: %ld runs, no leak\n", runs);
    assert_true(runs > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_strategy),
        cmocka_unit_test(test_chosen_strategies_and_align),
        cmocka_unit_test(test_json_matches_plan),
        cmocka_unit_test(test_json_graph_labels),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
