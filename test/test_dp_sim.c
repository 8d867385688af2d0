/* bench/dp_sim_model.c, the event simulation of a data-parallel step behind bench/dp_sim:
 * the all-reduce formulas, the bucketing rule and hand-computed steps, then properties over
 * pseudo-random steps (more ranks, more latency or less bandwidth never shorten a step;
 * overlap never lengthens one; the step lies between compute and compute + communication).
 * Pure arithmetic: no timing, no pebble. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bench/dp_sim_model.h"

#define EPS 1e-9

/* two ranks, no latency, one byte per second: an all-reduce of n bytes takes n seconds
 * (2(N-1)/N = 1) */
static const dps_link unit = { .alpha = 0.0, .beta = 1.0, .algo = DPS_RING };

static void test_allreduce_formulas(void **state)
{
    (void)state;
    dps_link l = { .alpha = 1.0, .beta = 100.0, .algo = DPS_RING };
    /* ring: 2(N-1)α + 2(N-1)/N·n/β = 6 + 1.5·10 */
    assert_float_equal(dps_allreduce_s(&l, 1000, 4), 21.0, EPS);
    assert_float_equal(dps_allreduce_s(&l, 1000, 1), 0.0, EPS);
    assert_float_equal(dps_allreduce_s(&l, 0, 8), 0.0, EPS);
    /* recursive doubling: ceil(log2 N)·(α + n/β) */
    l.algo = DPS_RD;
    assert_float_equal(dps_allreduce_s(&l, 1000, 4), 22.0, EPS);
    assert_float_equal(dps_allreduce_s(&l, 1000, 5), 33.0, EPS);
    assert_float_equal(dps_allreduce_s(&l, 1000, 2), 11.0, EPS);
    /* Rabenseifner: 2·ceil(log2 N)·α + 2(N-1)/N·n/β */
    l.algo = DPS_RH;
    assert_float_equal(dps_allreduce_s(&l, 1000, 4), 4.0 + 15.0, EPS);
    assert_float_equal(dps_allreduce_s(&l, 1000, 1), 0.0, EPS);
    /* best: recursive doubling for small messages or few ranks, Rabenseifner's for big ones */
    l.algo = DPS_BEST;
    assert_float_equal(dps_allreduce_s(&l, 1000, 4), 19.0, EPS);
    assert_float_equal(dps_allreduce_s(&l, 10, 512), 9.0 * 1.1, EPS);
    assert_float_equal(dps_allreduce_s(&l, 1000, 2), 11.0, EPS); /* rd 11; ring and rh 12 */
}

static void test_buckets(void **state)
{
    (void)state;
    /* finishing order is by ready step, ties by index: 0, 1, 2, 4, 3 */
    dps_grad g[] = { { 3, 0, 0 }, { 2, 0, 0 }, { 5, 2, 0 }, { 1, 4, 0 }, { 1, 3, 0 } };
    int32_t order[5], bucket[5];
    /* B = 4: {3} {2} {5: larger than B, alone} {1 1} */
    assert_int_equal(dps_buckets(g, 5, 4, 0, order, bucket), 4);
    int32_t want_order[] = { 0, 1, 2, 4, 3 }, want_bucket[] = { 0, 1, 2, 3, 3 };
    assert_memory_equal(order, want_order, sizeof order);
    assert_memory_equal(bucket, want_bucket, sizeof bucket);
    /* B = 5: {3 2} {5} {1 1}; B = 6: {3 2} {5 1} {1} */
    assert_int_equal(dps_buckets(g, 5, 5, 0, order, bucket), 3);
    assert_int_equal(dps_buckets(g, 5, 6, 0, order, bucket), 3);
    int32_t want6[] = { 0, 0, 1, 1, 2 };
    assert_memory_equal(bucket, want6, sizeof bucket);
    /* 0: one per gradient; DPS_ONE_BUCKET: one */
    assert_int_equal(dps_buckets(g, 5, 0, 0, order, bucket), 5);
    assert_int_equal(dps_buckets(g, 5, DPS_ONE_BUCKET, 0, order, bucket), 1);
    assert_int_equal(dps_buckets(g, 0, 4, 0, order, bucket), 0);
    /* a cap of 2 gradients a bucket (pbl_graph_data_parallel's is 16): {3 2} {5} {1 1} at
     * B = 5 stays; one bucket becomes {3 2} {5 1} {1} */
    assert_int_equal(dps_buckets(g, 5, 5, 2, order, bucket), 3);
    assert_int_equal(dps_buckets(g, 5, DPS_ONE_BUCKET, 2, order, bucket), 3);
    int32_t want_cap[] = { 0, 0, 1, 1, 2 };
    assert_memory_equal(bucket, want_cap, sizeof bucket);
    assert_int_equal(dps_buckets(g, 5, DPS_ONE_BUCKET, 1, order, bucket), 5);
    assert_int_equal(dps_buckets(g, 5, 4, -1, order, bucket), -1);
    /* bad input */
    assert_int_equal(dps_buckets(g, 5, -1, 0, order, bucket), -1);
    dps_grad bad[] = { { 0, 0, 0 } };
    assert_int_equal(dps_buckets(bad, 1, 4, 0, order, bucket), -1);
}

/* one bucket: the all-reduce starts after the last gradient whether or not overlap is on */
static void test_one_bucket_is_no_overlap(void **state)
{
    (void)state;
    double c[] = { 1, 1, 1, 1 };
    dps_grad g[] = { { 2, 1, 0.5 }, { 3, 2, 0.5 }, { 1, 3, 0.0 } };
    dps_step s = { c, 4, g, 3 };
    dps_result on, off;
    assert_int_equal(dps_simulate(&s, &unit, 2, DPS_ONE_BUCKET, 0, 1, &on), 0);
    assert_int_equal(dps_simulate(&s, &unit, 2, DPS_ONE_BUCKET, 0, 0, &off), 0);
    /* 4 s of compute, a 6-byte all-reduce (6 s), then 1 s of updates */
    assert_float_equal(on.step_s, 11.0, EPS);
    assert_float_equal(off.step_s, 11.0, EPS);
    assert_float_equal(on.compute_s, 5.0, EPS);
    assert_float_equal(on.comm_s, 6.0, EPS);
    assert_float_equal(on.exposed_s, 6.0, EPS);
    assert_float_equal(on.hidden, 0.0, EPS);
    assert_int_equal(on.n_buckets, 1);
    assert_int_equal(on.max_bucket_bytes, 6);
    /* without overlap, per-gradient buckets: 4..6, 6..9, 9..10; updates 6.5, 9.5, 10 */
    assert_int_equal(dps_simulate(&s, &unit, 2, 0, 0, 0, &off), 0);
    assert_float_equal(off.step_s, 10.0, EPS);
    /* one rank: no communication at all */
    assert_int_equal(dps_simulate(&s, &unit, 1, 0, 0, 1, &on), 0);
    assert_float_equal(on.step_s, 5.0, EPS);
    assert_float_equal(on.comm_s, 0.0, EPS);
    assert_float_equal(on.hidden, -1.0, EPS);
}

/* per-gradient buckets finishing one per node: every all-reduce but the last hides */
static void test_overlap_hides_all_but_last(void **state)
{
    (void)state;
    double c[] = { 1, 1, 1, 1 };
    dps_grad g[] = { { 1, 0, 0 }, { 1, 1, 0 }, { 1, 2, 0 }, { 1, 3, 0 } };
    dps_step s = { c, 4, g, 4 };
    dps_result r;
    assert_int_equal(dps_simulate(&s, &unit, 2, 0, 0, 1, &r), 0);
    assert_float_equal(r.step_s, 5.0, EPS); /* 4 of compute + the last bucket's 1 */
    assert_float_equal(r.comm_s, 4.0, EPS);
    assert_float_equal(r.exposed_s, 1.0, EPS);
    assert_float_equal(r.hidden, 0.75, EPS);
    assert_int_equal(dps_simulate(&s, &unit, 2, 0, 0, 0, &r), 0);
    assert_float_equal(r.step_s, 8.0, EPS); /* 4 + 4: nothing hidden */
    assert_float_equal(r.hidden, 0.0, EPS);
    /* 2-byte buckets: {0,1} ready at 2 runs 2..4, {2,3} ready at 4 runs 4..6 */
    assert_int_equal(dps_simulate(&s, &unit, 2, 2, 0, 1, &r), 0);
    assert_float_equal(r.step_s, 6.0, EPS);
    assert_int_equal(r.n_buckets, 2);
}

/* a bucket's update waits only for its own all-reduce; the link runs one at a time */
static void test_updates_and_busy_link(void **state)
{
    (void)state;
    double c[] = { 1, 1, 1, 1 };
    dps_grad g[] = { { 1, 0, 0.5 }, { 1, 3, 0.5 } };
    dps_step s = { c, 4, g, 2 };
    dps_result r;
    /* b0 1..2, b1 4..5; updates: 4..4.5 (b0 done long ago), then 5..5.5 */
    assert_int_equal(dps_simulate(&s, &unit, 2, 0, 0, 1, &r), 0);
    assert_float_equal(r.step_s, 5.5, EPS);
    assert_float_equal(r.exposed_s, 0.5, EPS);
    assert_float_equal(r.hidden, 0.75, EPS);
    /* a long first all-reduce delays the second: b0 1..5, b1 5..6 */
    double c2[] = { 1, 1 };
    dps_grad g2[] = { { 4, 0, 0 }, { 1, 1, 0 } };
    dps_step s2 = { c2, 2, g2, 2 };
    assert_int_equal(dps_simulate(&s2, &unit, 2, 0, 0, 1, &r), 0);
    assert_float_equal(r.step_s, 6.0, EPS);
    /* latency counts per bucket: 8 ranks, α = 1, β huge: 14 s per all-reduce */
    dps_link lat = { .alpha = 1.0, .beta = 1e30, .algo = DPS_RING };
    assert_int_equal(dps_simulate(&s2, &lat, 8, 0, 0, 1, &r), 0);
    assert_float_equal(r.step_s, 1.0 + 14.0 + 14.0, EPS);
    assert_int_equal(dps_simulate(&s2, &lat, 8, DPS_ONE_BUCKET, 0, 1, &r), 0);
    assert_float_equal(r.step_s, 2.0 + 14.0, EPS);
}

static void test_bad_input(void **state)
{
    (void)state;
    double c[] = { 1 };
    dps_grad g[] = { { 1, 1, 0 } }; /* ready past the last node */
    dps_step s = { c, 1, g, 1 };
    dps_result r;
    assert_int_equal(dps_simulate(&s, &unit, 2, 0, 0, 1, &r), -1);
    g[0].ready = 0;
    assert_int_equal(dps_simulate(&s, &unit, 0, 0, 0, 1, &r), -1);
    dps_link nob = { 0.0, 0.0, DPS_RING };
    assert_int_equal(dps_simulate(&s, &nob, 2, 0, 0, 1, &r), -1);
    c[0] = -1;
    assert_int_equal(dps_simulate(&s, &unit, 2, 0, 0, 1, &r), -1);
    assert_float_equal(r.step_s, 0.0, EPS);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_properties(void **state)
{
    (void)state;
    const int64_t ranks[] = { 1, 2, 8, 64, 512 };
    const int64_t sizes[] = { 0, 1000, 10000, 100000, DPS_ONE_BUCKET };
    for (int trial = 0; trial < 200; trial++) {
        double c[40];
        dps_grad g[30];
        int32_t nc = 1 + (int32_t)(next() % 40), ng = 1 + (int32_t)(next() % 30);
        for (int32_t i = 0; i < nc; i++)
            c[i] = (double)(next() % 1000) * 1e-6;
        for (int32_t i = 0; i < ng; i++)
            g[i] = (dps_grad){ 1 + (int64_t)(next() % 50000), (int32_t)(next() % (uint64_t)nc),
                               (double)(next() % 100) * 1e-6 };
        g[next() % (uint64_t)ng].ready = (next() & 1) ? nc - 1 : g[0].ready;
        int32_t last_ready = 0;
        for (int32_t i = 0; i < ng; i++)
            last_ready = g[i].ready > last_ready ? g[i].ready : last_ready;
        dps_step s = { c, nc, g, ng };
        dps_link l = { 1e-6 * (double)(next() % 20), 1e8 * (double)(1 + next() % 100), (dps_algo)(next() % 4) };
        for (int b = 0; b < 5; b++) {
            double prev = 0.0;
            for (int k = 0; k < 5; k++) {
                dps_result on, off, slow, thin;
                assert_int_equal(dps_simulate(&s, &l, ranks[k], sizes[b], 0, 1, &on), 0);
                assert_int_equal(dps_simulate(&s, &l, ranks[k], sizes[b], 0, 0, &off), 0);
                dps_link l2 = l;
                l2.alpha += 1e-6;
                assert_int_equal(dps_simulate(&s, &l2, ranks[k], sizes[b], 0, 1, &slow), 0);
                l2 = l;
                l2.beta *= 0.5;
                assert_int_equal(dps_simulate(&s, &l2, ranks[k], sizes[b], 0, 1, &thin), 0);
                assert_true(on.step_s >= prev - EPS);               /* more ranks: never faster */
                assert_true(on.step_s <= off.step_s + EPS);         /* overlap never hurts */
                assert_true(slow.step_s >= on.step_s - EPS);        /* more latency: never faster */
                assert_true(thin.step_s >= on.step_s - EPS);        /* less bandwidth: never faster */
                assert_true(on.step_s >= on.compute_s - EPS);
                assert_true(on.step_s <= on.compute_s + on.comm_s + EPS);
                assert_true(off.step_s <= off.compute_s + off.comm_s + EPS);
                if (ranks[k] == 1) {
                    assert_float_equal(on.step_s, on.compute_s, EPS);
                    assert_float_equal(on.hidden, -1.0, EPS);
                } else {
                    assert_true(on.hidden >= -EPS && on.hidden <= 1.0 + EPS);
                }
                /* one bucket finished by the last node: overlap changes nothing */
                if (sizes[b] == DPS_ONE_BUCKET && last_ready == nc - 1)
                    assert_float_equal(on.step_s, off.step_s, EPS);
                prev = on.step_s;
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_formulas),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_one_bucket_is_no_overlap),
        cmocka_unit_test(test_overlap_hides_all_but_last),
        cmocka_unit_test(test_updates_and_busy_link),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_properties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
