/*
 * pbl_explain (pebble/viz.h): why the peak is what it is.
 *
 * - MiniMalloc's five buffers by hand: the peak step, the records live there, naive's arena,
 *   its holes at the peak and the most fragmented step, exactly;
 * - every zoo graph: the values live at the peak sum to the lower bound (the planner's own,
 *   pbl_records_lower_bound), every step's list sums to its live bytes, the holes at the
 *   peak to arena - lower bound, and the variables to the bytes outside the arena;
 * - mlp_train's kinds, producers and last readers by name, and its suggestions measured;
 * - the schedule suggestion is min_peak's lower bound (every zoo graph), and bert_base_train
 *   explained in min_peak order has that lower bound, its saving program's minus min_peak's;
 * - bad arguments, an unknown strategy, liveness records of another graph;
 * - the viewer's JSON carries the same lists;
 * - failing every host allocation in turn (in either order) gives PBL_ERR_NOMEM and leaks nothing.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failing_alloc.h"
#include "pebble/pebble.h"
#include "zoo.h"

static pbl_graph *build(const char *name)
{
    pbl_graph *g = NULL;
    char err[512] = "";
    pbl_status s = zoo_build(name, 0, &g, err, sizeof err);
    if (s != PBL_OK)
        fail_msg("zoo_build(%s): %s", name, err);
    return g;
}

/* MiniMalloc's example (shared/minimalloc_benchmarks/input.12.csv) */
static const pbl_usage_record five[] = { { 4, 0, 3 }, { 4, 3, 9 }, { 4, 0, 9 }, { 4, 9, 21 }, { 4, 0, 21 } };
static const char *const five_ids[] = { "b1", "b2", "b3", "b4", "b5" };

static void test_five_by_hand(void **state)
{
    (void)state;
    pbl_explain e;
    char err[256];
    pbl_explain_options o = pbl_explain_options_default();
    o.align = 1;
    o.strategy = "naive";
    assert_int_equal(pbl_explain_records(five, 5, five_ids, NULL, NULL, &o, &e, err, sizeof err), PBL_OK);
    /* steps 0-8 hold 12 bytes (three buffers), 9-20 hold 8 */
    assert_int_equal(e.lower_bound, 12);
    assert_int_equal(e.peak_step, 0);
    assert_int_equal(e.n_peak_steps, 9);
    assert_int_equal(e.n_steps, 21);
    assert_int_equal(e.n_live_at_peak, 3);
    assert_int_equal(e.live_at_peak[0], 0); /* equal sizes: by index */
    assert_int_equal(e.live_at_peak[1], 2);
    assert_int_equal(e.live_at_peak[2], 4);
    assert_string_equal(e.rec[e.live_at_peak[2]].name, "b5");
    assert_int_equal(e.rec[0].kind, PBL_EXPLAIN_RECORD);
    assert_int_equal(e.rec[0].producer, PBL_NONE);
    /* naive: one buffer after another, offsets 0, 4, 8, 12, 16 */
    assert_string_equal(e.strategy, "naive");
    assert_int_equal(e.arena, 20);
    for (int i = 0; i < 5; i++)
        assert_int_equal(e.rec[i].offset, 4 * i);
    /* at step 0, b1 [0, 4), b3 [8, 12) and b5 [16, 20) are live */
    assert_int_equal(e.n_holes_at_peak, 2);
    assert_int_equal(e.holes_at_peak[0].lo, 4);
    assert_int_equal(e.holes_at_peak[0].hi, 8);
    assert_int_equal(e.holes_at_peak[1].lo, 12);
    assert_int_equal(e.holes_at_peak[1].hi, 16);
    /* from step 9, b4 [12, 16) and b5 [16, 20): 12 bytes below b5's top unused */
    assert_int_equal(e.arena_step, 0);
    assert_int_equal(e.worst_step, 9);
    assert_int_equal(e.top[9], 20);
    assert_int_equal(e.n_holes_at_worst, 1);
    assert_int_equal(e.holes_at_worst[0].lo, 0);
    assert_int_equal(e.holes_at_worst[0].hi, 12);
    /* the per-step lists: step 9 holds b5 then b4 (equal sizes: by index, b4 first) */
    assert_non_null(e.step_start);
    assert_int_equal(e.step_start[10] - e.step_start[9], 2);
    assert_int_equal(e.step_record[e.step_start[9]], 3);
    assert_int_equal(e.step_record[e.step_start[9] + 1], 4);
    int32_t idx[5];
    assert_int_equal(pbl_explain_live_at(&e, 20, idx), 2);
    assert_int_equal(pbl_explain_live_at(&e, 21, idx), 0);
    assert_int_equal(e.n_suggestions, 0); /* records only: nothing to rewrite */
    pbl_explain_free(&e);
    pbl_explain_free(&e); /* twice: a freed explanation is a zeroed one */
}

/* The identities every explanation keeps. */
static void check_identities(const char *name, const pbl_explain *e, const pbl_usage_record *r, int32_t n)
{
    int64_t sum = 0;
    for (int32_t k = 0; k < e->n_live_at_peak; k++)
        sum += e->rec[e->live_at_peak[k]].bytes;
    int64_t lb = pbl_records_lower_bound(r, n);
    if (sum != lb || e->lower_bound != lb)
        fail_msg("%s: live at the peak sum to %lld, explain says %lld, the planner %lld", name, (long long)sum,
                 (long long)e->lower_bound, (long long)lb);
    assert_true(e->peak_step >= 0 && e->live[e->peak_step] == lb);
    assert_true(e->arena >= lb);
    int64_t holes = 0;
    for (int32_t k = 0; k < e->n_holes_at_peak; k++)
        holes += e->holes_at_peak[k].hi - e->holes_at_peak[k].lo;
    assert_int_equal(holes, e->arena - lb);
    assert_non_null(e->step_start);
    for (int32_t t = 0; t < e->n_steps; t++) {
        int64_t s = 0;
        for (int32_t k = e->step_start[t]; k < e->step_start[t + 1]; k++) {
            const pbl_explain_record *x = &e->rec[e->step_record[k]];
            assert_true(x->first <= t && t < x->last);
            if (k > e->step_start[t])
                assert_true(e->rec[e->step_record[k - 1]].bytes >= x->bytes);
            s += x->bytes;
        }
        if (s != e->live[t])
            fail_msg("%s: step %d lists %lld bytes, live %lld", name, (int)t, (long long)s, (long long)e->live[t]);
        assert_true(e->top[t] <= e->arena && e->top[t] >= e->live[t]);
    }
    /* the peak's list is the step list at the peak */
    assert_int_equal(e->step_start[e->peak_step + 1] - e->step_start[e->peak_step], e->n_live_at_peak);
    for (int32_t k = 0; k < e->n_live_at_peak; k++)
        assert_int_equal(e->step_record[e->step_start[e->peak_step] + k], e->live_at_peak[k]);
}

static void test_every_zoo_graph(void **state)
{
    (void)state;
    for (int i = 0; i < zoo_count(); i++) {
        const char *name = zoo_name(i);
        pbl_graph *g = build(name);
        pbl_explain e;
        char err[512];
        pbl_explain_options o = pbl_explain_options_default();
        o.max_recompute = 2;
        pbl_status s = pbl_explain_graph(g, &o, &e, err, sizeof err);
        if (s != PBL_OK)
            fail_msg("%s: %s", name, err);
        check_identities(name, &e, e.graph_records.records, e.graph_records.n_records);
        int64_t vars = 0;
        for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
            pbl_value_info vi;
            assert_int_equal(pbl_graph_value_info(g, v, &vi), PBL_OK);
            if (vi.kind != PBL_VALUE_NODE)
                vars += pbl_shape_numel(&vi.shape) * (int64_t)pbl_dtype_size(vi.dtype);
        }
        assert_int_equal(e.outside_bytes, vars);
        int training = strstr(name, "_train") != NULL, grads = 0, saved = 0;
        for (int32_t r = 0; r < e.n_records; r++) {
            grads += e.rec[r].kind == PBL_EXPLAIN_PARAM_GRADIENT;
            saved += e.rec[r].kind == PBL_EXPLAIN_SAVED_ACTIVATION;
            assert_true(e.rec[r].kind >= PBL_EXPLAIN_TEMPORARY && e.rec[r].kind <= PBL_EXPLAIN_GRADIENT);
            assert_non_null(e.rec[r].name);
            assert_true(e.rec[r].producer != PBL_NONE);
        }
        if (training)
            assert_true(grads > 0 && saved > 0);
        else
            assert_true(grads == 0 && saved == 0);
        /* fusion and the schedule are always estimated; the schedule is min_peak's bound */
        assert_true(e.n_suggestions >= 2);
        assert_int_equal(e.suggestions[0].fix, PBL_EXPLAIN_FIX_FUSION);
        assert_int_equal(e.suggestions[0].estimated, 1);
        assert_int_equal(e.suggestions[0].saves, e.lower_bound - e.suggestions[0].lower_bound);
        const pbl_explain_suggestion *sx = &e.suggestions[e.n_suggestions - 1];
        assert_int_equal(sx->fix, PBL_EXPLAIN_FIX_SCHEDULE);
        assert_int_equal(sx->estimated, 1);
        pbl_schedule_options so = pbl_schedule_options_default();
        so.kind = PBL_SCHEDULE_MIN_PEAK;
        pbl_schedule sc;
        assert_int_equal(pbl_graph_schedule(g, &so, &sc, err, sizeof err), PBL_OK);
        assert_int_equal(sc.program_peak, e.lower_bound);
        assert_int_equal(sx->lower_bound, sc.peak);
        assert_int_equal(sx->saves, e.lower_bound - sc.peak);
        assert_true(sx->saves >= 0);
        if (sx->saves == 0)
            assert_non_null(strstr(sx->note, "program order is already minimal"));
        pbl_schedule_free(&sc);
        for (int32_t k = 1; k + 1 < e.n_suggestions; k++) {
            const pbl_explain_suggestion *x = &e.suggestions[k];
            assert_int_equal(x->fix, PBL_EXPLAIN_FIX_RECOMPUTE);
            assert_int_equal(e.rec[e.graph_records.value_record[x->value]].kind, PBL_EXPLAIN_SAVED_ACTIVATION);
        }
        printf("%-20s lower bound %12lld at step %4d of %4d: %4d live, %d suggestions\n", name,
               (long long)e.lower_bound, (int)e.peak_step, (int)e.n_steps, (int)e.n_live_at_peak,
               (int)e.n_suggestions);
        pbl_explain_free(&e);
        pbl_graph_destroy(g);
    }
}

static const pbl_explain_record *find(const pbl_explain *e, const char *name)
{
    for (int32_t r = 0; r < e->n_records; r++)
        if (strcmp(e->rec[r].name, name) == 0)
            return &e->rec[r];
    fail_msg("no record named %s", name);
    return NULL;
}

static const char *node_name(const pbl_graph *g, pbl_node n)
{
    pbl_node_info ni;
    return n != PBL_NONE && pbl_graph_node_info(g, n, &ni) == PBL_OK ? ni.name : "-";
}

/* zoo:mlp_train: fc1 -> relu -> fc2 -> relu -> fc3 -> softmax cross-entropy, Adam. The peak
 * is in the backward pass, where fc1's weight gradient (802,816 bytes) is written while fc2's
 * input gradient is still live. */
static void test_mlp_train_kinds(void **state)
{
    (void)state;
    pbl_graph *g = build("mlp_train");
    pbl_explain e;
    char err[512];
    assert_int_equal(pbl_explain_graph(g, NULL, &e, err, sizeof err), PBL_OK);
    const pbl_explain_record *gw = find(&e, "fc1/grad_w");
    assert_int_equal(gw->kind, PBL_EXPLAIN_PARAM_GRADIENT);
    assert_int_equal(gw->bytes, 256 * 784 * 4);
    assert_string_equal(node_name(g, gw->producer), "fc1/grad_w");
    assert_string_equal(node_name(g, gw->last_reader), "fc1/w/update");
    assert_int_equal(find(&e, "fc3")->kind, PBL_EXPLAIN_OUTPUT);
    assert_int_equal(find(&e, "loss")->kind, PBL_EXPLAIN_OUTPUT);
    assert_int_equal(find(&e, "fc2/grad_x")->kind, PBL_EXPLAIN_GRADIENT);
    /* fc1's output is kept for backward (relu's gradient reads it, in place as relu1) */
    int saved = 0;
    for (int32_t r = 0; r < e.n_records; r++)
        saved += e.rec[r].kind == PBL_EXPLAIN_SAVED_ACTIVATION;
    assert_true(saved >= 2);
    /* the peak holds fc1's weight gradient */
    int has = 0;
    for (int32_t k = 0; k < e.n_live_at_peak; k++)
        has |= &e.rec[e.live_at_peak[k]] == gw;
    assert_true(has);
    assert_int_equal(e.rec[e.live_at_peak[0]].bytes, gw->bytes); /* the largest first */
    /* outside: the parameters, Adam's two moments per parameter, the input and labels */
    int64_t params = 0, state_bytes = 0;
    for (int32_t k = 0; k < e.n_outside; k++) {
        if (e.outside[k].kind == PBL_EXPLAIN_PARAMETER)
            params += e.outside[k].bytes;
        if (e.outside[k].kind == PBL_EXPLAIN_OPTIMIZER_STATE)
            state_bytes += e.outside[k].bytes;
    }
    assert_true(params > 0);
    assert_true(state_bytes >= 2 * params);
    assert_string_equal(pbl_explain_kind_name(PBL_EXPLAIN_SAVED_ACTIVATION), "saved_activation");
    assert_string_equal(pbl_explain_kind_name((pbl_explain_kind)99), "?");
    pbl_explain_free(&e);
    pbl_graph_destroy(g);
}

/* Recomputing a saved activation of the CNN: the estimate is the rewritten graph's lower
 * bound, and at least one activation live at ResNet-50's peak saves bytes. */
static void test_recompute_estimates(void **state)
{
    (void)state;
    pbl_graph *g = build("resnet50_train");
    pbl_explain e;
    char err[512];
    pbl_explain_options o = pbl_explain_options_default();
    o.max_recompute = 3;
    assert_int_equal(pbl_explain_graph(g, &o, &e, err, sizeof err), PBL_OK);
    int recomputes = 0, saving = 0;
    for (int32_t k = 0; k < e.n_suggestions; k++) {
        const pbl_explain_suggestion *x = &e.suggestions[k];
        if (x->fix != PBL_EXPLAIN_FIX_RECOMPUTE)
            continue;
        recomputes++;
        assert_true(x->estimated);
        assert_non_null(x->name);
        assert_int_equal(x->saves, e.lower_bound - x->lower_bound);
        saving += x->saves > 0;
    }
    assert_int_equal(recomputes, 3);
    assert_true(saving >= 1);
    pbl_explain_free(&e);
    pbl_graph_destroy(g);
}

/* bert_base_train, whose order has freedom: min_peak lowers its bound (1.275 to 1.185 GB at
 * batch 1 in bench/README.md). Explained in program order, the schedule suggestion saves the
 * difference; explained in min_peak order, the peak is min_peak's bound, its live values sum
 * to it, and the schedule saves nothing more. */
static void test_schedule_order(void **state)
{
    (void)state;
    pbl_graph *g = build("bert_base_train");
    char err[512];
    pbl_explain_options o = pbl_explain_options_default();
    o.max_recompute = 0;
    pbl_explain prog, minp;
    assert_int_equal(pbl_explain_graph(g, &o, &prog, err, sizeof err), PBL_OK);
    o.schedule = PBL_SCHEDULE_MIN_PEAK;
    assert_int_equal(pbl_explain_graph(g, &o, &minp, err, sizeof err), PBL_OK);
    check_identities("bert_base_train (min_peak)", &minp, minp.graph_records.records, minp.graph_records.n_records);
    assert_true(minp.lower_bound < prog.lower_bound);
    const pbl_explain_suggestion *a = &prog.suggestions[prog.n_suggestions - 1];
    const pbl_explain_suggestion *b = &minp.suggestions[minp.n_suggestions - 1];
    assert_int_equal(a->fix, PBL_EXPLAIN_FIX_SCHEDULE);
    assert_int_equal(a->lower_bound, minp.lower_bound);
    assert_int_equal(a->saves, prog.lower_bound - minp.lower_bound);
    assert_non_null(strstr(a->note, "min_peak"));
    assert_int_equal(b->fix, PBL_EXPLAIN_FIX_SCHEDULE);
    assert_int_equal(b->saves, 0);
    assert_non_null(strstr(b->note, "this is the min_peak order"));
    /* the min_peak order is not the program order: some step runs another node */
    int differs = 0;
    for (int32_t t = 0; t < prog.graph_records.n_steps; t++)
        differs |= prog.graph_records.schedule[t] != minp.graph_records.schedule[t];
    assert_true(differs);
    printf("bert_base_train: program %lld, min_peak %lld, schedule saves %lld\n", (long long)prog.lower_bound,
           (long long)minp.lower_bound, (long long)a->saves);
    pbl_explain_free(&prog);
    pbl_explain_free(&minp);
    pbl_graph_destroy(g);
}

static void test_errors(void **state)
{
    (void)state;
    pbl_explain e;
    char err[256];
    pbl_explain_options o = pbl_explain_options_default();
    o.align = 1;
    assert_int_equal(pbl_explain_records(five, -1, NULL, NULL, NULL, &o, &e, err, sizeof err), PBL_ERR_INVALID_ARG);
    pbl_explain_free(&e);
    assert_int_equal(pbl_explain_records(NULL, 3, NULL, NULL, NULL, &o, &e, err, sizeof err), PBL_ERR_INVALID_ARG);
    pbl_explain_free(&e);
    pbl_usage_record bad = { 4, 5, 5 }; /* an empty lifetime */
    assert_int_equal(pbl_explain_records(&bad, 1, NULL, NULL, NULL, &o, &e, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "record 0"));
    pbl_explain_free(&e);
    o.strategy = "no_such_strategy";
    assert_int_equal(pbl_explain_records(five, 5, NULL, NULL, NULL, &o, &e, err, sizeof err), PBL_ERR_NOT_FOUND);
    assert_non_null(strstr(err, "no_such_strategy"));
    pbl_explain_free(&e);
    assert_int_equal(pbl_explain_graph(NULL, NULL, &e, err, sizeof err), PBL_ERR_INVALID_ARG);
    pbl_explain_free(&e);
    /* liveness records of another graph */
    pbl_graph *g = build("mlp_train"), *h = build("mlp");
    /* a schedule kind out of range */
    pbl_explain_options bad_order = pbl_explain_options_default();
    bad_order.schedule = (pbl_schedule_kind)7;
    assert_int_equal(pbl_explain_graph(g, &bad_order, &e, err, sizeof err), PBL_ERR_INVALID_ARG);
    pbl_explain_free(&e);
    pbl_graph_records gr;
    assert_int_equal(pbl_graph_liveness(h, NULL, &gr, err, sizeof err), PBL_OK);
    assert_int_equal(pbl_explain_records(gr.records, gr.n_records, NULL, g, &gr, NULL, &e, err, sizeof err),
                     PBL_ERR_INVALID_ARG);
    pbl_explain_free(&e);
    /* none at all: no peak */
    o = pbl_explain_options_default();
    assert_int_equal(pbl_explain_records(NULL, 0, NULL, NULL, NULL, &o, &e, err, sizeof err), PBL_OK);
    assert_int_equal(e.peak_step, -1);
    assert_int_equal(e.lower_bound, 0);
    assert_int_equal(e.n_live_at_peak, 0);
    pbl_explain_free(&e);
    pbl_graph_records_free(&gr);
    pbl_graph_destroy(g);
    pbl_graph_destroy(h);
}

/* The viewer's JSON carries the explanation's lists, and refuses one of other records. */
static void test_viz_json(void **state)
{
    (void)state;
    pbl_graph *g = build("mlp_train");
    char err[512];
    pbl_graph_records gr;
    assert_int_equal(pbl_graph_liveness(g, NULL, &gr, err, sizeof err), PBL_OK);
    pbl_viz_plan p;
    pbl_viz_options vo = pbl_viz_options_default();
    vo.align = 64;
    assert_int_equal(pbl_viz_plan_records(gr.records, gr.n_records, &vo, &p, err, sizeof err), PBL_OK);
    pbl_explain e;
    pbl_explain_options eo = pbl_explain_options_default();
    assert_int_equal(pbl_explain_records(gr.records, gr.n_records, NULL, g, &gr, &eo, &e, err, sizeof err), PBL_OK);
    pbl_viz_labels l = { .title = "mlp_train", .graph = g, .graph_records = &gr, .explain = &e };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(pbl_viz_write_json(&p, &l, f, err, sizeof err), PBL_OK);
    fclose(f);
    char want[256];
    snprintf(want, sizeof want, "\"peak_step\": %d,", (int)e.peak_step);
    assert_non_null(strstr(text, want));
    char *list = strstr(text, "\"live_at_peak\": [");
    assert_non_null(list);
    list += strlen("\"live_at_peak\": [");
    for (int32_t k = 0; k < e.n_live_at_peak; k++) { /* the same indices, in the same order */
        assert_int_equal(strtol(list, &list, 10), e.live_at_peak[k]);
        list += *list == ',';
    }
    assert_int_equal(*list, ']');
    assert_non_null(strstr(text, "\"parameter_gradient\""));
    assert_non_null(strstr(text, "\"steps\": {\"start\": [0,"));
    free(text);
    /* an explanation of other records */
    pbl_explain other;
    eo.align = 1;
    assert_int_equal(pbl_explain_records(five, 5, NULL, NULL, NULL, &eo, &other, err, sizeof err), PBL_OK);
    l.explain = &other;
    f = open_memstream(&text, &len);
    assert_int_equal(pbl_viz_write_json(&p, &l, f, err, sizeof err), PBL_ERR_INVALID_ARG);
    fclose(f);
    free(text);
    pbl_explain_free(&other);
    pbl_explain_free(&e);
    pbl_viz_plan_free(&p);
    pbl_graph_records_free(&gr);
    pbl_graph_destroy(g);
}

static void test_failing_allocations(void **state)
{
    (void)state;
    pbl_graph *g = build("mlp_train");
    for (int order = 0; order < 2; order++) {
    long total = 0;
    for (long fail_at = 1;; fail_at++) {
        failing f = { .fail_at = fail_at };
        pbl_allocator hook = { failing_alloc, failing_free, &f };
        pbl_explain_options o = pbl_explain_options_default();
        o.allocator = &hook;
        o.schedule = order ? PBL_SCHEDULE_MIN_PEAK : PBL_SCHEDULE_PROGRAM;
        pbl_explain e;
        char err[512] = "";
        pbl_status s = pbl_explain_graph(g, &o, &e, err, sizeof err);
        pbl_explain_free(&e);
        if (f.live != 0)
            fail_msg("allocation %ld failing leaked %zu bytes", fail_at, f.live);
        if (s == PBL_OK && f.count < fail_at) {
            total = f.count;
            break;
        }
        if (s != PBL_ERR_NOMEM)
            fail_msg("allocation %ld failing gave %s: %s", fail_at, pbl_status_str(s), err);
    }
    printf("%s order: failed each of %ld allocations in turn: PBL_ERR_NOMEM, nothing leaked\n",
           order ? "min_peak" : "program", total);
    }
    pbl_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_five_by_hand),      cmocka_unit_test(test_every_zoo_graph),
        cmocka_unit_test(test_mlp_train_kinds),   cmocka_unit_test(test_recompute_estimates),
        cmocka_unit_test(test_errors),            cmocka_unit_test(test_viz_json),
        cmocka_unit_test(test_failing_allocations), cmocka_unit_test(test_schedule_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
