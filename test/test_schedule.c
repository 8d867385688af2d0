/*
 * test_schedule: the memory-aware scheduler (pebble/schedule.h).
 *
 * - The exact search is ground truth: on tiny random graphs it equals the smallest lower
 *   bound over every topological order (enumerated, each measured by pbl_graph_liveness).
 * - On random small DAGs (inference and training): exact <= each heuristic's best <= program
 *   order, and the scheduler's model of the peak equals liveness's bound for the orders tried.
 * - Orders break no constraint: liveness refuses an order that runs an update before a reader
 *   of the weight it overwrites, and executing zoo training graphs in min_peak order gives
 *   the same bits as program order (BLAS single-threaded), on one stream and on two.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "failing_alloc.h"
#include "same_training.h"
#include "graph/ir/graph_internal.h"
#include "graph/ir/schedule.h"
#include "graph/schedule/model.h"
#include "pebble/pebble.h"
#include "tools/zoo/zoo.h"

#define B     2
#define W     8
#define MAX_V 128

static uint64_t rng;

static uint32_t next(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* A random DAG of `nodes` ops; widths vary (8 or 24 columns) so orders differ in bytes;
 * some values are outputs; `train` adds gradients and SGD-momentum updates. */
static pbl_graph *random_dag(uint64_t seed, int nodes, int train)
{
    rng = seed * 0x9e3779b97f4a7c15ull + 11;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value pool[MAX_V], params[64];
    int np = 0, nparams = 0;
    char name[32];
    pool[np++] = pbl_input(g, "x", PBL_SHAPE(B, W));
    for (int i = 0; i < nodes && np < MAX_V - 2; i++) {
        pbl_value a = pool[np - 1 - (int)(next() % (uint32_t)(np < 4 ? np : 4))];
        pbl_value b = pool[next() % (uint32_t)np];
        pbl_value v;
        switch (next() % 6) {
        case 0: v = pbl_relu(g, a); break;
        case 1: v = pbl_tanh(g, a); break;
        case 2: v = pbl_add(g, a, b); break;
        case 3: v = pbl_mul(g, a, b); break;
        default:
            snprintf(name, sizeof name, "w%d", i);
            params[nparams] = pbl_param(g, name, PBL_SHAPE(W, W));
            v = pbl_fully_connected(g, next() % 2 ? a : b, params[nparams++], PBL_NONE);
            break;
        }
        pool[np++] = v;
        if (next() % 9 == 0) {
            snprintf(name, sizeof name, "out%d", i);
            pbl_graph_set_output(g, name, v);
        }
    }
    pbl_value acc = pool[np - 1];
    for (int k = 0; k < 2; k++)
        acc = pbl_add(g, acc, pool[1 + next() % (uint32_t)(np - 1)]);
    pbl_value loss = pbl_mse_loss(g, acc, pbl_input(g, "target", PBL_SHAPE(B, W)));
    assert_int_equal(pbl_graph_build_status(g), PBL_OK);
    pbl_graph_set_output(g, "loss", loss);
    if (train && nparams > 0) {
        pbl_value grads[64];
        assert_int_equal(pbl_graph_gradient(g, loss, params, nparams, grads), PBL_OK);
        pbl_optimizer_options o = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
        assert_int_equal(pbl_graph_add_optimizer(g, &o, params, grads, nparams), PBL_OK);
    }
    return g;
}

static int64_t liveness_bound(const pbl_graph *g, const pbl_node *order, int32_t n)
{
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.order = order;
    lo.n_order = n;
    pbl_graph_records gr;
    char err[256];
    pbl_status s = pbl_graph_liveness(g, &lo, &gr, err, sizeof err);
    if (s != PBL_OK)
        fail_msg("liveness: %s", err);
    int64_t lb = pbl_records_lower_bound(gr.records, gr.n_records);
    pbl_graph_records_free(&gr);
    return lb;
}

static pbl_schedule schedule(const pbl_graph *g, pbl_schedule_kind kind, int32_t exact_max)
{
    pbl_schedule_options o = pbl_schedule_options_default();
    o.kind = kind;
    o.exact_max_nodes = exact_max;
    pbl_schedule sc;
    char err[256];
    if (pbl_graph_schedule(g, &o, &sc, err, sizeof err) != PBL_OK)
        fail_msg("schedule: %s", err);
    /* what it reports is what liveness measures for that order */
    assert_int_equal(liveness_bound(g, sc.order, sc.n_steps), sc.peak);
    return sc;
}

/* ---- brute force: every topological order of a tiny graph ---- */

typedef struct brute {
    const pbl_graph *g;
    pbl__deps        d;
    pbl_node         order[16];
    uint8_t          placed[64]; /* nodes the outputs do not need start placed */
    int32_t          n, n_nodes;
    int64_t          best, orders;
} brute;

static void enumerate(brute *b, int32_t t)
{
    if (t == b->n) {
        int64_t lb = liveness_bound(b->g, b->order, b->n);
        if (b->best < 0 || lb < b->best)
            b->best = lb;
        b->orders++;
        return;
    }
    for (int32_t v = 0; v < b->n_nodes; v++) {
        int ready = !b->placed[v];
        for (int32_t e = b->d.pred_start[v]; ready && e < b->d.pred_start[v + 1]; e++)
            ready = b->placed[b->d.pred[e]];
        if (!ready)
            continue;
        b->placed[v] = 1;
        b->order[t] = v;
        enumerate(b, t + 1);
        b->placed[v] = 0;
    }
}

static void test_exact_is_the_minimum(void **state)
{
    (void)state;
    int checked = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        pbl_graph *g = random_dag(seed, 3 + (int)(seed % 6), (int)(seed % 3 == 0));
        pbl_schedule prog = schedule(g, PBL_SCHEDULE_PROGRAM, 0);
        int32_t n = prog.n_steps;
        if (n > 9) {
            pbl_schedule_free(&prog);
            pbl_graph_destroy(g);
            continue;
        }
        brute b = { .g = g, .n = n, .n_nodes = pbl_graph_node_count(g), .best = -1 };
        memset(b.placed, 1, sizeof b.placed);
        for (int32_t t = 0; t < n; t++)
            b.placed[prog.order[t]] = 0;
        pbl_schedule_free(&prog);
        pbl__mem m;
        pbl__mem_init(&m, NULL);
        assert_int_equal(pbl__deps_build(g, &m, &b.d), PBL_OK);
        enumerate(&b, 0);
        pbl__deps_free(&b.d, &m);
        pbl_schedule sc = schedule(g, PBL_SCHEDULE_MIN_PEAK, 40);
        assert_int_equal(sc.exact, 1);
        assert_true(sc.floor >= 0 && sc.floor <= b.best); /* the floor is under every order */
        if (sc.peak != b.best)
            fail_msg("seed %d: exact %lld, brute force over %lld orders %lld", (int)seed, (long long)sc.peak,
                     (long long)b.orders, (long long)b.best);
        checked++;
        pbl_schedule_free(&sc);
        pbl_graph_destroy(g);
    }
    assert_true(checked >= 20);
    printf("  exact search = brute force over every topological order on %d tiny graphs\n", checked);
}

/* The model's peak of the program order equals liveness's bound (the search optimises the
 * number the planners see), with and without in-place. */
static void model_agrees(const pbl_graph *g, int inplace)
{
    pbl__mem m;
    pbl__mem_init(&m, NULL);
    int32_t *order, n;
    char err[256];
    assert_int_equal(pbl__graph_schedule(g, NULL, 0, &m, &order, &n, err, sizeof err), PBL_OK);
    pbl__sched_model md;
    assert_int_equal(pbl__sched_model_build(g, order, n, 64, inplace, &m, &md), PBL_OK);
    int32_t *local = malloc((size_t)n * sizeof *local);
    for (int32_t t = 0; t < n; t++)
        local[t] = t;
    int64_t model = pbl__sched_peak(&md, local, &m);
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.inplace = inplace;
    pbl_graph_records gr;
    assert_int_equal(pbl_graph_liveness(g, &lo, &gr, err, sizeof err), PBL_OK);
    assert_int_equal(model, pbl_records_lower_bound(gr.records, gr.n_records));
    pbl_graph_records_free(&gr);
    free(local);
    pbl__sched_model_free(&md, &m);
    pbl__schedule_free(g, &m, order);
}

static void test_heuristics_against_exact(void **state)
{
    (void)state;
    int n_graphs = 0, n_better = 0, n_heur_opt = 0, n_floor = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        pbl_graph *g = random_dag(seed, 4 + (int)(seed % 9), (int)(seed % 2));
        model_agrees(g, 1);
        model_agrees(g, 0);
        pbl_schedule prog = schedule(g, PBL_SCHEDULE_PROGRAM, 0);
        pbl_schedule heur = schedule(g, PBL_SCHEDULE_MIN_PEAK, 0);
        pbl_schedule ex = schedule(g, PBL_SCHEDULE_MIN_PEAK, 64);
        if (prog.n_steps <= 40)
            assert_int_equal(ex.exact, 1);
        assert_true(heur.peak <= prog.peak);
        assert_true(ex.peak <= heur.peak);
        assert_true(heur.floor <= ex.peak);
        n_floor += heur.floor == ex.peak;
        assert_int_equal(prog.peak, prog.program_peak);
        assert_int_equal(heur.program_peak, prog.peak);
        /* the exact search cut off after 4 sets: the heuristics' order, nothing proven by it */
        pbl_schedule_options co = pbl_schedule_options_default();
        co.kind = PBL_SCHEDULE_MIN_PEAK;
        co.exact_max_states = 4;
        pbl_schedule cut;
        char err[256];
        assert_int_equal(pbl_graph_schedule(g, &co, &cut, err, sizeof err), PBL_OK);
        assert_int_equal(cut.peak, heur.peak);
        assert_true(!cut.exact || cut.peak == cut.floor || cut.peak == ex.peak);
        pbl_schedule_free(&cut);
        n_graphs++;
        n_better += ex.peak < prog.peak;
        n_heur_opt += heur.peak == ex.peak;
        pbl_schedule_free(&prog);
        pbl_schedule_free(&heur);
        pbl_schedule_free(&ex);
        pbl_graph_destroy(g);
    }
    printf("  %d random DAGs: exact <= heuristics <= program; the order lowers the bound on %d, "
           "the heuristics reach the exact minimum on %d, the floor meets it on %d\n", n_graphs, n_better,
           n_heur_opt, n_floor);
}

/* With targets, only the nodes they need are ordered, and the bound is liveness's for them. */
static void test_targets(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        pbl_graph *g = random_dag(seed, 16, 1);
        const char *targets[] = { "loss" };
        pbl_schedule_options o = pbl_schedule_options_default();
        o.kind = PBL_SCHEDULE_MIN_PEAK;
        o.targets = targets;
        o.n_targets = 1;
        pbl_schedule sc;
        char err[256];
        assert_int_equal(pbl_graph_schedule(g, &o, &sc, err, sizeof err), PBL_OK);
        assert_true(sc.n_steps < pbl_graph_node_count(g)); /* no backward, no updates */
        pbl_liveness_options lo = pbl_liveness_options_default();
        lo.targets = targets;
        lo.n_targets = 1;
        lo.order = sc.order;
        lo.n_order = sc.n_steps;
        pbl_graph_records gr;
        assert_int_equal(pbl_graph_liveness(g, &lo, &gr, err, sizeof err), PBL_OK);
        assert_int_equal(pbl_records_lower_bound(gr.records, gr.n_records), sc.peak);
        assert_true(sc.peak <= sc.program_peak);
        pbl_graph_records_free(&gr);
        pbl_schedule_free(&sc);
        o.targets = (const char *const[]){ "nope" };
        assert_int_equal(pbl_graph_schedule(g, &o, &sc, err, sizeof err), PBL_ERR_NOT_FOUND);
        pbl_graph_destroy(g);
    }
}

/* An order that runs an update before another reader of its weight is refused. */
static void test_given_order_checked(void **state)
{
    (void)state;
    pbl_graph *g;
    assert_int_equal(pbl_graph_create(&g, NULL), PBL_OK);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(B, W)), w = pbl_param(g, "w", PBL_SHAPE(W, W));
    pbl_value h = pbl_fully_connected(g, x, w, PBL_NONE);
    pbl_value loss = pbl_mse_loss(g, h, pbl_input(g, "t", PBL_SHAPE(B, W)));
    pbl_graph_set_output(g, "loss", loss);
    pbl_value gw;
    assert_int_equal(pbl_graph_gradient(g, loss, &w, 1, &gw), PBL_OK);
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_SGD);
    assert_int_equal(pbl_graph_add_optimizer(g, &oo, &w, &gw, 1), PBL_OK);
    pbl_schedule sc = schedule(g, PBL_SCHEDULE_PROGRAM, 0);
    int32_t n = sc.n_steps;
    pbl_node bad[64];
    /* move the update (last) to the front of the nodes after the first */
    memcpy(bad, sc.order, (size_t)n * sizeof *bad);
    pbl_node upd = bad[n - 1];
    memmove(bad + 1, bad, (size_t)(n - 1) * sizeof *bad);
    bad[0] = upd;
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.order = bad;
    lo.n_order = n;
    pbl_graph_records gr;
    char err[256];
    assert_int_equal(pbl_graph_liveness(g, &lo, &gr, err, sizeof err), PBL_ERR_INVALID_ARG);
    printf("  update first -> %s\n", err);
    lo.n_order = n - 1;
    assert_int_equal(pbl_graph_liveness(g, &lo, &gr, err, sizeof err), PBL_ERR_INVALID_ARG);
    printf("  a step short -> %s\n", err);
    pbl_schedule_free(&sc);
    pbl_graph_destroy(g);
}

static void test_kind_names(void **state)
{
    (void)state;
    pbl_schedule_kind k;
    assert_int_equal(pbl_schedule_kind_count(), 2);
    assert_int_equal(pbl_schedule_kind_parse("min_peak", &k), PBL_OK);
    assert_int_equal(k, PBL_SCHEDULE_MIN_PEAK);
    assert_string_equal(pbl_schedule_kind_name(PBL_SCHEDULE_PROGRAM), "program");
    assert_int_equal(pbl_schedule_kind_parse("fastest", &k), PBL_ERR_NOT_FOUND);
    assert_null(pbl_schedule_kind_name((pbl_schedule_kind)7));
}

/* Training in min_peak order gives the bits of program order; `streams` > 1 colours the
 * min_peak order (happens-before planned and verified at create). */
/* Returns min_peak's lower bound minus program order's (the executor did take the order). */
static int64_t same_bits(pbl_graph *g, int steps, int32_t streams, const char *what)
{
    run a, b;
    run_open(&a, g, PBL_STORAGE_PLANNED, 7);
    run_open_schedule(&b, g, PBL_STORAGE_PLANNED, PBL_SCHEDULE_MIN_PEAK, streams, 7);
    pbl_exec_stats sa, sb;
    int64_t compared = 0;
    for (int step = 0; step < steps; step++) {
        assert_int_equal(pbl_exec_run(a.e), PBL_OK);
        assert_int_equal(pbl_exec_run(b.e), PBL_OK);
        compared += compare(&a, &b, step, what);
    }
    pbl_exec_stats_get(a.e, &sa);
    pbl_exec_stats_get(b.e, &sb);
    printf("  %-22s %d stream(s), %d steps: same bits (%lld bytes compared); lower bound %llu -> %llu, arena %llu -> %llu\n",
           what, (int)sb.streams, steps, (long long)compared, (unsigned long long)sa.lower_bound, (unsigned long long)sb.lower_bound,
           (unsigned long long)sa.arena_bytes, (unsigned long long)sb.arena_bytes);
    if (streams <= 1)
        assert_true(sb.lower_bound <= sa.lower_bound);
    run_close(&a);
    run_close(&b);
    return (int64_t)sb.lower_bound - (int64_t)sa.lower_bound;
}

static void test_zoo_training_same_bits(void **state)
{
    (void)state;
    const char *names[] = { "mlp_train", "mobilenet_v2_train" };
    const int64_t batch[] = { 8, 2 };
    for (int i = 0; i < 2; i++) {
        pbl_graph *g;
        char err[256];
        if (zoo_build(names[i], batch[i], &g, err, sizeof err) != PBL_OK)
            fail_msg("%s: %s", names[i], err);
        assert_true(same_bits(g, 2, 1, names[i]) < 0); /* both graphs' bounds drop at this batch */
        same_bits(g, 2, 2, names[i]);
        pbl_graph_destroy(g);
    }
    pbl_graph *g = random_dag(5, 20, 1);
    same_bits(g, 2, 1, "random DAG, training");
    same_bits(g, 2, 3, "random DAG, training");
    pbl_graph_destroy(g);
}

static void test_streams_min_peak(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        pbl_graph *g = random_dag(seed, 18, (int)(seed % 2));
        pbl_schedule sc = schedule(g, PBL_SCHEDULE_MIN_PEAK, 40);
        pbl_stream_options so = pbl_stream_options_default();
        so.n_streams = 2;
        so.order = sc.order;
        so.n_order = sc.n_steps;
        pbl_stream_plan sp;
        char err[256];
        assert_int_equal(pbl_graph_streams(g, &so, &sp, err, sizeof err), PBL_OK);
        assert_int_equal(memcmp(sp.schedule, sc.order, (size_t)sc.n_steps * sizeof *sc.order), 0);
        assert_int_equal(pbl_stream_plan_check(g, &sp, err, sizeof err), PBL_OK);
        pbl_stream_storage_options o = pbl_stream_storage_options_default();
        pbl_stream_storage st;
        assert_int_equal(pbl_graph_stream_storage(g, &sp, &o, &st, err, sizeof err), PBL_OK);
        pbl_stream_storage_free(&st);
        pbl_stream_plan_free(&sp);
        pbl_schedule_free(&sc);
        pbl_graph_destroy(g);
    }
}

/* Every allocation of pbl_graph_schedule failed in turn (exact search and floor included):
 * PBL_ERR_NOMEM and no byte left; then with none failing, every byte returned too. */
static void test_out_of_memory(void **state)
{
    (void)state;
    pbl_graph *g = random_dag(3, 14, 1);
    long n_allocs = 0;
    for (long k = 1;; k++) {
        failing f = { .fail_at = k };
        pbl_allocator al = { failing_alloc, failing_free, &f };
        pbl_schedule_options o = pbl_schedule_options_default();
        o.allocator = &al;
        o.kind = PBL_SCHEDULE_MIN_PEAK;
        pbl_schedule sc;
        char err[256];
        pbl_status s = pbl_graph_schedule(g, &o, &sc, err, sizeof err);
        if (s == PBL_OK) {
            assert_true(f.count < k); /* nothing left to fail */
            pbl_schedule_free(&sc);
            assert_int_equal(f.live, 0);
            n_allocs = f.count;
            break;
        }
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_true(strlen(err) > 0);
        if (f.live != 0)
            fail_msg("allocation %ld failed: %zu bytes left", k, f.live);
    }
    pbl_graph_destroy(g);
    printf("  each of %ld allocations failed in turn: PBL_ERR_NOMEM, nothing leaked\n", n_allocs);
}

int main(void)
{
    (void)same_training; /* the header's harness for rewrites; this file compares orders */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_exact_is_the_minimum),
        cmocka_unit_test(test_heuristics_against_exact),
        cmocka_unit_test(test_given_order_checked),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_streams_min_peak),
        cmocka_unit_test(test_zoo_training_same_bits),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
