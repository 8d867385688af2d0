/*
 * What test_ops.c and test_grad.c share: a seeded PRNG (no rand(): results must not depend on
 * the C library), small graph/executor helpers that report the library's own message when a
 * call fails, and a tolerance compare that prints the worst element it saw.
 *
 * Case functions return the number of failed checks (0 = pass) after printing what failed, so
 * one cmocka test can run all its cases and report every failure, then assert the total is 0.
 */
#ifndef PEBBLE_TEST_OP_HARNESS_H
#define PEBBLE_TEST_OP_HARNESS_H

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

/* ---- PRNG: splitmix64, fixed seeds -------------------------------------------------------- */

typedef struct th_rng {
    uint64_t s;
} th_rng;

static inline th_rng th_rng_seed(uint64_t seed)
{
    th_rng r = { seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL };
    return r;
}

static inline uint64_t th_next(th_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double th_uniform(th_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(th_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [lo, hi]. */
static inline int64_t th_int(th_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(th_next(r) % (uint64_t)(hi - lo + 1));
}

static inline void th_fill(th_rng *r, float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)th_uniform(r, lo, hi);
}

/* Uniform magnitude in [min_abs, max_abs] with a random sign: keeps values off kinks (relu at 0). */
static inline void th_fill_away(th_rng *r, float *x, int64_t n, double min_abs, double max_abs)
{
    for (int64_t i = 0; i < n; i++) {
        double m = th_uniform(r, min_abs, max_abs);
        x[i] = (float)((th_next(r) & 1) ? m : -m);
    }
}

static inline float *th_falloc(int64_t n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

static inline double *th_dalloc(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

/* ---- reporting ------------------------------------------------------------------------------ */

/* The case now running, printed with every failure ("matmul 2-D ta=1 tb=0 [3x4]x[4x5]"). */
static char th_case[160];

static inline void th_set_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void th_set_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(th_case, sizeof th_case, fmt, ap);
    va_end(ap);
}

/* Prints a failed library call with its status and the handle's message; returns 1. */
static inline int th_report(const char *file, int line, const char *what, pbl_status s,
                            const char *msg)
{
    fprintf(stderr, "FAIL [%s] %s:%d: %s failed: %s (%s): %s\n", th_case, file, line, what,
            pbl_status_name(s), pbl_status_str(s), msg ? msg : "");
    return 1;
}

/* In a function returning a failure count: run `call`, and on a non-OK status print it with
 * the graph's (or executor's) message and return 1. */
#define TH_G(g, call)                                                                      \
    do {                                                                                   \
        pbl_status th_s_ = (call);                                                         \
        if (th_s_ != PBL_OK)                                                               \
            return th_report(__FILE__, __LINE__, #call, th_s_, pbl_graph_errmsg(g));       \
    } while (0)
#define TH_E(e, call)                                                                      \
    do {                                                                                   \
        pbl_status th_s_ = (call);                                                         \
        if (th_s_ != PBL_OK)                                                               \
            return th_report(__FILE__, __LINE__, #call, th_s_, pbl_exec_errmsg(e));        \
    } while (0)

/* Passes when |got[i] - want[i]| <= atol + rtol * scale[i] for every i, scale[i] being
 * |want[i]| when `scale` is NULL (a caller passes Σ|terms| for sums, so that cancellation
 * does not make the bound meaninglessly tight). NaN and Inf fail. Prints, on failure, the
 * number of bad elements, the worst one (index, got, want, abs and rel error) and the
 * tolerances; returns 1 on failure, 0 on success. */
static inline int th_close(const char *what, const float *got, const double *want,
                           const double *scale, int64_t n, double atol, double rtol)
{
    int64_t bad = 0, worst = -1;
    double worst_excess = -INFINITY, max_abs = 0, max_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        double s = scale ? scale[i] : fabs(want[i]);
        double err = fabs((double)got[i] - want[i]);
        double tol = atol + rtol * s;
        double rel = err / (fabs(want[i]) > 1e-30 ? fabs(want[i]) : 1e-30);
        if (!(err <= tol)) { /* also catches NaN */
            bad++;
            double excess = isnan(err) ? INFINITY : err - tol;
            if (worst < 0 || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
        if (!(err <= max_abs))
            max_abs = err;
        if (!(rel <= max_rel))
            max_rel = rel;
    }
    if (bad == 0)
        return 0;
    double ws = scale ? scale[worst] : fabs(want[worst]);
    fprintf(stderr,
            "FAIL [%s] %s: %lld of %lld elements out of tolerance (atol %.3g, rtol %.3g); "
            "max abs err %.6g, max rel err %.6g; worst [%lld]: got %.9g want %.9g "
            "(abs err %.6g, allowed %.6g)\n",
            th_case, what, (long long)bad, (long long)n, atol, rtol, max_abs, max_rel, (long long)worst,
            (double)got[worst], want[worst], fabs((double)got[worst] - want[worst]),
            atol + rtol * ws);
    return 1;
}

/* Prints "[2, 3]" style shapes side by side on a mismatch; returns 1 on failure. */
static inline int th_shape_is(const char *what, pbl_shape got, pbl_shape want)
{
    if (pbl_shape_equal(&got, &want))
        return 0;
    char a[96], b[96];
    fprintf(stderr, "FAIL [%s] %s: shape %s, want %s\n", th_case, what, pbl_shape_str(&got, a, sizeof a),
            pbl_shape_str(&want, b, sizeof b));
    return 1;
}

/* ---- graph and executor helpers ------------------------------------------------------------ */

static inline pbl_shape th_value_shape(const pbl_graph *g, pbl_value v)
{
    pbl_value_info vi;
    if (pbl_graph_value_info(g, v, &vi) != PBL_OK)
        return pbl_shape_make(0, NULL);
    return vi.shape;
}

static inline int64_t th_value_numel(const pbl_graph *g, pbl_value v)
{
    pbl_shape s = th_value_shape(g, v);
    return pbl_shape_numel(&s);
}

/* Creates an executor with default options; prints the message and returns 1 on failure. */
static inline int th_exec_new(const pbl_graph *g, pbl_exec **e, const char *what)
{
    char msg[512] = "";
    pbl_exec_options o = pbl_exec_options_default();
    pbl_status s = pbl_exec_create(e, g, &o, msg, sizeof msg);
    if (s != PBL_OK) {
        fprintf(stderr, "FAIL [%s] %s: pbl_exec_create failed: %s: %s\n", th_case, what,
                pbl_status_name(s), msg);
        *e = NULL;
        return 1;
    }
    return 0;
}

/* An INTS attribute from a literal list: TH_ATTR_INTS("axes", 0, 2). The parentheses keep the
 * compound literal's commas from splitting PBL_ATTR_INTS's arguments. */
#define TH_ATTR_INTS(name, ...)                                                            \
    PBL_ATTR_INTS(name, ((const int64_t[]){ __VA_ARGS__ }),                                \
                  (int32_t)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)))

/* ---- broadcasting index maps (reference side) ---------------------------------------------- */

/* For flat index i into `big`, the flat index into `small` under right-aligned broadcasting
 * (small's dims equal to big's or 1; missing leading dims count as 1). Used both for
 * "b broadcast against a" and, reversed, for sum_to. */
static inline int64_t th_bcast_index(const pbl_shape *big, const pbl_shape *small, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int32_t d = big->ndim - 1, sd = small->ndim - 1; d >= 0; d--, sd--) {
        int64_t c = i % big->dim[d];
        i /= big->dim[d];
        if (sd >= 0) {
            if (small->dim[sd] != 1)
                idx += c * stride;
            stride *= small->dim[sd];
        }
    }
    return idx;
}

#endif
