/* The BFC pool (pebble/bfc.h) against exact offsets after scripted sequences.
 *
 * Regions come from a fake sub-allocator that hands out addresses 0x100000000 + k * 2^32
 * and never dereferences them, so every address below is known in advance and the pool's
 * bookkeeping is shown to live outside its regions. The expected values follow the rules
 * TensorFlow's BFCAllocator documents (bfc_allocator.h/.cc): 256-byte rounding, 21
 * power-of-two bins, best fit by (size, address), split at 2x or at the waste threshold,
 * doubling regions, the 0.9x back-pedal, freeing empty regions before failing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

#include "executor/bfc/bfc_internal.h"
#include "pebble/bfc.h"

#define BASE ((uintptr_t)1 << 32)
#define REGION(k) (BASE + (uintptr_t)(k) * ((uintptr_t)1 << 32))

/* ---- the fake sub-allocator ----------------------------------------------------------------- */

typedef struct fake {
    int    k;              /* regions handed out so far */
    size_t refuse_above;   /* refuse requests larger than this (0: never) */
    size_t asked[64];      /* every request, in order */
    int    n_asked;
    uintptr_t live[64];    /* regions not returned */
    size_t live_size[64];
    int    n_live;
    int    n_frees;
} fake;

static void *fake_alloc(void *ctx, size_t bytes)
{
    fake *f = ctx;
    assert_true(bytes > 0 && bytes % 256 == 0);
    if (f->n_asked < 64)
        f->asked[f->n_asked++] = bytes;
    if (f->refuse_above && bytes > f->refuse_above)
        return NULL;
    uintptr_t p = REGION(f->k++);
    assert_true(f->n_live < 64);
    f->live[f->n_live] = p;
    f->live_size[f->n_live++] = bytes;
    return (void *)p;
}

static void fake_free(void *ctx, void *p, size_t bytes)
{
    fake *f = ctx;
    f->n_frees++;
    for (int i = 0; i < f->n_live; i++)
        if (f->live[i] == (uintptr_t)p) {
            assert_int_equal(f->live_size[i], bytes);
            f->live[i] = f->live[f->n_live - 1];
            f->live_size[i] = f->live_size[f->n_live - 1];
            f->n_live--;
            return;
        }
    fail_msg("fake_free(%p): not a region handed out", p);
}

static pbl_bfc_options fake_options(fake *f, size_t limit, size_t initial)
{
    memset(f, 0, sizeof *f);
    pbl_bfc_options o = pbl_bfc_options_default();
    o.sub = (pbl_bfc_sub_allocator){ f, fake_alloc, fake_free };
    o.limit = limit;
    o.initial_region = initial;
    o.name = "test";
    return o;
}

static pbl_bfc *make(const pbl_bfc_options *o)
{
    pbl_bfc *b = NULL;
    char err[256];
    pbl_status s = pbl_bfc_create(&b, o, err, sizeof err);
    if (s != PBL_OK)
        fail_msg("create: %s", err);
    return b;
}

/* Allocates and returns the address; fails the test on an error. */
static uintptr_t A(pbl_bfc *b, size_t bytes)
{
    void *p = NULL;
    pbl_status s = pbl_bfc_alloc(b, bytes, &p);
    if (s != PBL_OK)
        fail_msg("alloc(%zu): %s", bytes, pbl_bfc_errmsg(b));
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    return (uintptr_t)p;
}

static void F(pbl_bfc *b, uintptr_t p)
{
    pbl_status s = pbl_bfc_free(b, (void *)p);
    if (s != PBL_OK)
        fail_msg("free(%#lx): %s", (unsigned long)p, pbl_bfc_errmsg(b));
    if (pbl_bfc_check(b) != PBL_OK)
        fail_msg("%s", pbl_bfc_errmsg(b));
}

static size_t chunk_of(pbl_bfc *b, uintptr_t p)
{
    size_t req = 0, chunk = 0;
    assert_int_equal(pbl_bfc_size(b, (void *)p, &req, &chunk), PBL_OK);
    return chunk;
}

static pbl_bfc_stats stats(pbl_bfc *b)
{
    pbl_bfc_stats st;
    pbl_bfc_stats_get(b, &st);
    return st;
}

/* ---- rounding and bins ---------------------------------------------------------------------- */

static void test_rounding(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 1 << 16);
    pbl_bfc *b = make(&o);
    static const size_t ask[] = { 1, 255, 256, 257, 512, 513, 1000 };
    static const size_t want[] = { 256, 256, 256, 512, 512, 768, 1024 };
    uintptr_t at = REGION(0);
    for (size_t i = 0; i < sizeof ask / sizeof *ask; i++) {
        uintptr_t p = A(b, ask[i]);
        assert_int_equal(p, at); /* consecutive splits of one region */
        size_t req, chunk;
        assert_int_equal(pbl_bfc_size(b, (void *)p, &req, &chunk), PBL_OK);
        assert_int_equal(req, ask[i]);
        assert_int_equal(chunk, want[i]);
        at += want[i];
    }
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.in_use, 256 + 256 + 256 + 512 + 512 + 768 + 1024);
    assert_int_equal(st.requested_in_use, 1 + 255 + 256 + 257 + 512 + 513 + 1000);
    void *p = (void *)1;
    assert_int_equal(pbl_bfc_alloc(b, 0, &p), PBL_OK); /* zero bytes: NULL, nothing taken */
    assert_null(p);
    assert_int_equal(pbl_bfc_free(b, NULL), PBL_OK);
    assert_int_equal(stats(b).n_allocs, 7);
    /* a request whose rounding overflows is out of memory, not a wrap-around */
    assert_int_equal(pbl_bfc_alloc(b, SIZE_MAX - 3, &p), PBL_ERR_NOMEM);
    assert_non_null(strstr(pbl_bfc_errmsg(b), "larger than any pool"));
    pbl_bfc_destroy(b);
    assert_int_equal(f.n_live, 0);
}

static void test_bin_numbers(void **state)
{
    static const struct { size_t size; int bin; } v[] = {
        { 256, 0 }, { 512, 1 }, { 768, 1 }, { 1024, 2 }, { 1792, 2 }, { 2048, 3 },
        { (size_t)1 << 20, 12 }, { ((size_t)1 << 28) - 256, 19 }, { (size_t)1 << 28, 20 },
        { (size_t)1 << 40, 20 },
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        assert_int_equal(pbl__bfc_bin(v[i].size), v[i].bin);
}

/* ---- split rule ----------------------------------------------------------------------------- */

static void test_split_at_twice_the_request(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 4096);
    pbl_bfc *b = make(&o);
    uintptr_t a = A(b, 1000);                 /* 4096 region: 1024 used, 3072 split off */
    assert_int_equal(a, REGION(0));
    assert_int_equal(chunk_of(b, a), 1024);
    assert_int_equal(stats(b).n_splits, 1);
    uintptr_t c = A(b, 1024);                 /* 3072 >= 2 * 1024: split, 2048 left */
    assert_int_equal(c, REGION(0) + 1024);
    assert_int_equal(stats(b).n_splits, 2);
    uintptr_t d = A(b, 1100);                 /* 1280: 2048 < 2 * 1280: the whole chunk */
    assert_int_equal(d, REGION(0) + 2048);
    assert_int_equal(chunk_of(b, d), 2048);
    assert_int_equal(stats(b).n_splits, 2);
    assert_int_equal(stats(b).in_use, 4096);
    assert_int_equal(stats(b).requested_in_use, 1000 + 1024 + 1100);
    F(b, d);
    uintptr_t e = A(b, 1024);                 /* exactly 2x: split */
    assert_int_equal(e, REGION(0) + 2048);
    assert_int_equal(chunk_of(b, e), 1024);
    assert_int_equal(stats(b).n_splits, 3);
    pbl_bfc_destroy(b);
}

static void test_split_waste_fraction(void **state)
{
    for (int frac = 0; frac < 2; frac++) {
        fake f;
        pbl_bfc_options o = fake_options(&f, 16384, 0);
        o.allow_growth = 0;                     /* one region: the whole limit */
        o.split_waste_fraction = frac ? 0.25 : 0.0; /* threshold 4096 bytes, or 128 MiB */
        pbl_bfc *b = make(&o);
        uintptr_t p = A(b, 9000);               /* 9216 of 16384: under 2x, leftover 7168 */
        assert_int_equal(p, REGION(0));
        assert_int_equal(f.asked[0], 16384);
        assert_int_equal(chunk_of(b, p), frac ? 9216 : 16384);
        assert_int_equal(stats(b).n_splits, frac ? 1 : 0);
        pbl_bfc_destroy(b);
    }
}

/* ---- best fit ------------------------------------------------------------------------------- */

/* Used chunks between holes keep the holes from merging. Returns the pointers. */
static void layout(pbl_bfc *b, const size_t *sizes, int n, uintptr_t *p)
{
    for (int i = 0; i < n; i++)
        p[i] = A(b, sizes[i]);
}

static void test_best_fit_and_address_order(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 1 << 16);
    pbl_bfc *b = make(&o);
    /* offsets 0 1024 1280 3328 3584 4608 4864 5888, the free tail at 6144 */
    static const size_t sz[] = { 1024, 256, 2048, 256, 1024, 256, 1024, 256 };
    uintptr_t p[8];
    layout(b, sz, 8, p);
    assert_int_equal(p[7], REGION(0) + 5888);
    F(b, p[6]);  /* holes: 1024 @4864 */
    F(b, p[2]);  /*        2048 @1280 */
    F(b, p[0]);  /*        1024 @0 */
    F(b, p[4]);  /*        1024 @3584 */
    /* best fit among the 1024s: the lowest address, though @4864 was freed first */
    assert_int_equal(A(b, 1024), REGION(0) + 0);
    assert_int_equal(A(b, 800), REGION(0) + 3584);    /* 1024 before the 2048 */
    assert_int_equal(A(b, 1024), REGION(0) + 4864);
    /* only the 2048 hole is left below the tail: 1500 (1536) takes it whole (< 2x) */
    uintptr_t q = A(b, 1500);
    assert_int_equal(q, REGION(0) + 1280);
    assert_int_equal(chunk_of(b, q), 2048);
    /* nothing below the tail now: the next one comes from the tail */
    assert_int_equal(A(b, 256), REGION(0) + 6144);
    pbl_bfc_destroy(b);
}

static void test_best_fit_searches_larger_bins(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 1 << 16);
    pbl_bfc *b = make(&o);
    /* a 768 hole (bin 1) at 0 and a 1280 hole (bin 2) at 1024: a request of 900 (1024,
     * bin 2) must skip the smaller hole and take the 1280 one whole (< 2x). */
    static const size_t sz[] = { 768, 256, 1280, 256 };
    uintptr_t p[4];
    layout(b, sz, 4, p);
    F(b, p[0]);
    F(b, p[2]);
    uintptr_t q = A(b, 900);
    assert_int_equal(q, REGION(0) + 1024);
    assert_int_equal(chunk_of(b, q), 1280);
    /* a 600 (768) request takes the 768 hole exactly, not the tail */
    assert_int_equal(A(b, 600), REGION(0));
    pbl_bfc_destroy(b);
}

/* ---- coalescing ----------------------------------------------------------------------------- */

static void test_coalescing(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 8192);
    pbl_bfc *b = make(&o);
    uintptr_t p[4];
    static const size_t sz[] = { 1024, 1024, 1024, 1024 }; /* tail 4096 @4096 */
    layout(b, sz, 4, p);
    assert_int_equal(stats(b).n_free_chunks, 1);
    F(b, p[3]);                           /* merges right with the tail */
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.n_merges, 1);
    assert_int_equal(st.n_free_chunks, 1);
    assert_int_equal(st.largest_free, 5120);
    F(b, p[1]);                           /* neighbours used: no merge */
    assert_int_equal(stats(b).n_merges, 1);
    assert_int_equal(stats(b).n_free_chunks, 2);
    F(b, p[2]);                           /* both sides free: one chunk 1024..8192 */
    st = stats(b);
    assert_int_equal(st.n_merges, 3);
    assert_int_equal(st.n_free_chunks, 1);
    assert_int_equal(st.largest_free, 7168);
    F(b, p[0]);                           /* left edge of region, merges right */
    st = stats(b);
    assert_int_equal(st.n_merges, 4);
    assert_int_equal(st.largest_free, 8192);
    assert_int_equal(st.in_use, 0);
    /* a merge on the left: free the second of two, then the first */
    uintptr_t x = A(b, 4096), y = A(b, 2048);
    assert_int_equal(y, REGION(0) + 4096);
    F(b, x);
    F(b, y);                              /* merges left and right */
    assert_int_equal(stats(b).largest_free, 8192);
    assert_int_equal(stats(b).n_free_chunks, 1);
    pbl_bfc_destroy(b);
}

static void test_no_merge_across_regions(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 1024);
    pbl_bfc *b = make(&o);
    uintptr_t a = A(b, 1024), c = A(b, 2048);  /* regions 1024 and 2048, each full */
    assert_int_equal(a, REGION(0));
    assert_int_equal(c, REGION(1));
    F(b, a);
    F(b, c);
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.n_free_chunks, 2);
    assert_int_equal(st.largest_free, 2048);
    assert_int_equal(st.n_merges, 0);
    pbl_bfc_destroy(b);
}

/* ---- regions -------------------------------------------------------------------------------- */

static void test_growth_by_doubling(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 4096);
    pbl_bfc *b = make(&o);
    assert_int_equal(A(b, 4096), REGION(0));   /* region 4096 */
    assert_int_equal(A(b, 4096), REGION(1));   /* region 8192 */
    assert_int_equal(A(b, 4096), REGION(1) + 4096);
    uintptr_t big = A(b, 20000);               /* 20224 > 16384: doubled to 32768 */
    assert_int_equal(big, REGION(2));
    assert_int_equal(chunk_of(b, big), 32768); /* under 2x the request: not split */
    assert_int_equal(A(b, 32768), REGION(3));  /* grown for the request: no double after */
    assert_int_equal(A(b, 256), REGION(4));    /* 65536 */
    assert_int_equal(A(b, 16384), REGION(4) + 256);
    static const size_t want[] = { 4096, 8192, 32768, 32768, 65536 };
    assert_int_equal(f.n_asked, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(f.asked[i], want[i]);
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.n_region_grows, 5);
    assert_int_equal(st.n_regions, 5);
    assert_int_equal(st.reserved, 4096 + 8192 + 32768 + 32768 + 65536);
    assert_int_equal(st.peak_reserved, st.reserved);
    pbl_bfc_destroy(b);
    assert_int_equal(f.n_live, 0);
}

static void test_growth_stops_at_limit(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 12288, 4096);
    pbl_bfc *b = make(&o);
    assert_int_equal(A(b, 4096), REGION(0));
    assert_int_equal(A(b, 2048), REGION(1));   /* 8192: exactly what is left */
    assert_int_equal(A(b, 6144), REGION(1) + 2048);
    void *p = (void *)1;
    assert_int_equal(pbl_bfc_alloc(b, 256, &p), PBL_ERR_NOMEM);
    assert_null(p);
    assert_int_equal(f.n_asked, 2);            /* the limit refused before the sub-allocator */
    assert_non_null(strstr(pbl_bfc_errmsg(b), "refused by the limit"));
    /* a limit that is not a multiple of 256 is rounded down; the last region is clipped */
    fake g;
    o = fake_options(&g, 5000, 4096);
    pbl_bfc *c = make(&o);
    assert_int_equal(A(c, 3000), REGION(0));   /* 4096 (3072 used, 1024 free) */
    assert_int_equal(A(c, 700), REGION(1));    /* 768 more: 4864 = 5000 rounded down */
    assert_int_equal(g.asked[1], 768);
    assert_int_equal(stats(c).limit, 4864);
    pbl_bfc_destroy(c);
    pbl_bfc_destroy(b);
}

static void test_backoff_when_refused(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 0);
    o.allow_growth = 0;
    f.refuse_above = 800 << 10;
    pbl_bfc *b = make(&o);
    /* 1048576 refused, then 0.9x rounded up to 256 until one fits (truncate, round up):
     * 943872, 849664 refused, 764928 taken. */
    assert_int_equal(A(b, 1000), REGION(0));
    static const size_t want[] = { 1048576, 943872, 849664, 764928 };
    assert_int_equal(f.n_asked, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f.asked[i], want[i]);
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.n_backoffs, 3);
    assert_int_equal(st.reserved, 764928);
    /* The back-off happens once per pool: with the region full, the next region (2 MiB
     * clipped to the 283648 bytes left under the limit) is refused and nothing backs off. */
    assert_int_equal(A(b, 764928 - 1024), REGION(0) + 1024);
    f.refuse_above = 1024;
    void *p;
    assert_int_equal(pbl_bfc_alloc(b, 4096, &p), PBL_ERR_NOMEM);
    assert_int_equal(f.n_asked, 5);            /* one more request, no back-off sequence */
    assert_int_equal(f.asked[4], (1 << 20) - 764928);
    assert_int_equal(stats(b).n_backoffs, 3);
    assert_non_null(strstr(pbl_bfc_errmsg(b), "refused by the sub-allocator"));
    pbl_bfc_destroy(b);
}

static void test_backoff_gives_up_below_request(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 0);
    o.allow_growth = 0;
    f.refuse_above = 900 << 10;                /* 921600: 943872 refused, 849664 fits */
    pbl_bfc *b = make(&o);
    void *p;
    /* a request of 900000 (900096 rounded): 943872 refused, 849664 < request: give up */
    assert_int_equal(pbl_bfc_alloc(b, 900000, &p), PBL_ERR_NOMEM);
    assert_int_equal(f.n_asked, 2);
    assert_int_equal(f.asked[1], 943872);
    assert_int_equal(stats(b).n_failures, 1);
    assert_int_equal(stats(b).reserved, 0);
    pbl_bfc_destroy(b);
}

static void test_free_regions_before_failing(void **state)
{
    for (int gc = 0; gc < 2; gc++) {
        fake f;
        pbl_bfc_options o = fake_options(&f, 12288, 4096);
        o.free_regions_on_oom = gc;
        pbl_bfc *b = make(&o);
        uintptr_t x = A(b, 4096), y = A(b, 4096);  /* region 0 (4096), region 1 (8192) */
        uintptr_t z = A(b, 4096);
        assert_int_equal(z, REGION(1) + 4096);
        F(b, x);
        F(b, y);
        F(b, z);                                /* both regions empty, 12288 reserved */
        void *p = NULL;
        pbl_status s = pbl_bfc_alloc(b, 12288, &p); /* fits only in a fresh region */
        pbl_bfc_stats st = stats(b);
        if (gc) {
            assert_int_equal(s, PBL_OK);
            assert_int_equal((uintptr_t)p, REGION(2));
            assert_int_equal(st.n_region_frees, 2);
            assert_int_equal(st.n_regions, 1);
            assert_int_equal(st.reserved, 12288);
            assert_int_equal(f.n_live, 1);
            assert_int_equal(f.asked[2], 12288);   /* next region 16384, clipped to the limit */
        } else {
            assert_int_equal(s, PBL_ERR_NOMEM);
            assert_int_equal(st.n_region_frees, 0);
            assert_int_equal(f.n_live, 2);
        }
        assert_int_equal(pbl_bfc_check(b), PBL_OK);
        pbl_bfc_destroy(b);
        assert_int_equal(f.n_live, 0);
    }
}

static void test_free_regions_only_when_it_helps(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 12288, 4096);
    pbl_bfc *b = make(&o);
    uintptr_t x = A(b, 4096);
    A(b, 4096);                                /* region 1 keeps a live allocation */
    F(b, x);                                   /* region 0 empty: 4096 */
    void *p;
    /* 8192 cannot fit even with region 0 returned (4096 would be available): keep it */
    assert_int_equal(pbl_bfc_alloc(b, 8192, &p), PBL_ERR_NOMEM);
    assert_int_equal(stats(b).n_region_frees, 0);
    assert_int_equal(stats(b).n_regions, 2);
    pbl_bfc_destroy(b);
}

/* ---- out of memory, bad frees ---------------------------------------------------------------- */

static void test_oom_message_and_recovery(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 8192, 8192);
    pbl_bfc *b = make(&o);
    uintptr_t p[4];
    static const size_t sz[] = { 2048, 2048, 2048, 2048 };
    layout(b, sz, 4, p);
    F(b, p[0]);
    F(b, p[2]);                                /* 4096 free in two 2048 holes */
    void *q = (void *)1;
    assert_int_equal(pbl_bfc_alloc(b, 3000, &q), PBL_ERR_NOMEM);
    assert_null(q);
    const char *m = pbl_bfc_errmsg(b);
    assert_non_null(strstr(m, "test: out of memory allocating 3000 bytes (3072 rounded)"));
    assert_non_null(strstr(m, "largest free chunk 2048 bytes"));
    assert_non_null(strstr(m, "4096 free in 2 chunks"));
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.n_failures, 1);
    assert_int_equal(st.in_use, 4096);
    assert_int_equal(st.n_free_chunks, 2);
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    /* still usable: smaller requests fit, and freeing makes room for the failed one */
    assert_int_equal(A(b, 2048), REGION(0));
    F(b, p[1]);
    assert_int_equal(A(b, 3000), REGION(0) + 2048);
    pbl_bfc_destroy(b);
}

static void test_bad_frees(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 8192);
    pbl_bfc *b = make(&o);
    uintptr_t x = A(b, 1024), y = A(b, 1024);
    F(b, x);
    pbl_bfc_stats before = stats(b);
    static const struct { uintptr_t p; const char *says; } bad[] = {
        { REGION(0), "already freed" },
        { REGION(0) + 1024 + 256, "256 bytes inside the used chunk" },
        { REGION(0) + 4096, "inside the free chunk" },
        { REGION(7), "never allocated here" },
        { 12345, "never allocated here" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(pbl_bfc_free(b, (void *)bad[i].p), PBL_ERR_INVALID_ARG);
        if (!strstr(pbl_bfc_errmsg(b), bad[i].says))
            fail_msg("free(%#lx): '%s' lacks '%s'", (unsigned long)bad[i].p, pbl_bfc_errmsg(b),
                     bad[i].says);
        assert_int_equal(pbl_bfc_check(b), PBL_OK);
    }
    pbl_bfc_stats after = stats(b);
    assert_int_equal(after.n_bad_frees, 5);
    assert_int_equal(after.in_use, before.in_use);
    assert_int_equal(after.n_frees, before.n_frees);
    assert_int_equal(after.n_free_chunks, before.n_free_chunks);
    size_t req;
    assert_int_equal(pbl_bfc_size(b, (void *)REGION(0), &req, NULL), PBL_ERR_INVALID_ARG);
    assert_int_equal(stats(b).n_bad_frees, 5);  /* a size query is not a bad free */
    F(b, y);
    /* a double free after the chunk merged with its neighbours: inside a free chunk */
    assert_int_equal(pbl_bfc_free(b, (void *)y), PBL_ERR_INVALID_ARG);
    assert_non_null(strstr(pbl_bfc_errmsg(b), "1024 bytes inside the free chunk at 0x100000000"));
    pbl_bfc_destroy(b);
}

static void test_bad_options(void **state)
{
    fake f;
    char err[200];
    pbl_bfc *b = (pbl_bfc *)1;
    pbl_bfc_options o = fake_options(&f, 0, 4096);
    o.allow_growth = 0;
    assert_int_equal(pbl_bfc_create(&b, &o, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_null(b);
    assert_non_null(strstr(err, "allow_growth 0 needs a limit"));
    o = fake_options(&f, 0, 4096);
    o.sub.free = NULL;
    assert_int_equal(pbl_bfc_create(&b, &o, err, sizeof err), PBL_ERR_INVALID_ARG);
    o = fake_options(&f, 0, 4096);
    o.split_waste_fraction = 1.5;
    assert_int_equal(pbl_bfc_create(&b, &o, err, sizeof err), PBL_ERR_INVALID_ARG);
    assert_int_equal(pbl_bfc_create(NULL, &o, err, sizeof err), PBL_ERR_INVALID_ARG);
    pbl_bfc_destroy(NULL);
}

/* ---- stats, dump, bar, trace ---------------------------------------------------------------- */

static void test_stats_and_fragmentation(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 8192, 0);
    o.allow_growth = 0;
    pbl_bfc *b = make(&o);
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.reserved, 0);
    assert_true(st.fragmentation == 0.0);
    uintptr_t p[4];
    /* offsets 0, 2048, 3072, 5120; the last splits 3072 (>= 2x), leaving 2048 @6144 */
    static const size_t sz[] = { 2048, 1024, 2000, 1024 };
    layout(b, sz, 4, p);
    st = stats(b);
    assert_int_equal(st.in_use, 6144);
    assert_int_equal(st.peak_in_use, 6144);
    assert_int_equal(st.requested_in_use, 2048 + 1024 + 2000 + 1024);
    assert_int_equal(st.largest_free, 2048);
    assert_true(st.fragmentation == 0.0);       /* one free chunk */
    F(b, p[0]);
    F(b, p[2]);                                 /* free: 2048 @0, 2048 @3072, 2048 @6144 */
    st = stats(b);
    assert_int_equal(st.in_use, 2048);
    assert_int_equal(st.peak_in_use, 6144);
    assert_int_equal(st.total_free, 6144);
    assert_int_equal(st.largest_free, 2048);
    assert_int_equal(st.n_free_chunks, 3);
    assert_true(st.fragmentation > 0.6666 && st.fragmentation < 0.6667); /* 1 - 2048/6144 */
    F(b, p[3]);                                 /* 3072 .. 8192 merge: 5120 */
    st = stats(b);
    assert_int_equal(st.largest_free, 5120);
    assert_true(st.fragmentation > 0.2857 && st.fragmentation < 0.2858); /* 1 - 5120/7168 */
    assert_int_equal(st.n_allocs, 4);
    assert_int_equal(st.n_frees, 3);
    assert_int_equal(st.n_splits, 4);
    assert_int_equal(st.n_merges, 2);
    assert_int_equal(st.n_live, 1);
    assert_int_equal(st.n_region_grows, 1);
    assert_int_equal(st.n_failures, 0);
    assert_true(st.bookkeeping > 0);
    pbl_bfc_destroy(b);
}

static char *read_all(FILE *f)
{
    long n = ftell(f);
    rewind(f);
    char *s = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

static void test_dump(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 4096);
    pbl_bfc *b = make(&o);
    uintptr_t x = A(b, 1000), y = A(b, 512);
    A(b, 3000);                                 /* region 1 (8192) */
    F(b, x);
    (void)y;
    FILE *t = tmpfile();
    assert_non_null(t);
    assert_int_equal(pbl_bfc_dump(b, t), PBL_OK);
    char *got = read_all(t);
    fclose(t);
    const char *want =
        "bfc \"test\": 12288 bytes reserved in 2 regions (peak 12288), limit 1048576\n"
        "in use 3584 bytes in 2 allocations (requested 3512, peak 4608); free 8704 in 3 chunks, "
        "largest 5120, fragmentation 0.4118\n"
        /* 64 cells of 192 bytes: region 0's used 1024..1536 is cells 5 (part) to 7, region
         * 1's used 4096..7168 cells 21 (part) to 37 (part) */
        "[.....:##.............:###############:..........................]\n"
        "region 0 at 0x100000000: 4096 bytes\n"
        "        offset         size state    requested         id\n"
        "             0         1024 free \n"
        "          1024          512 used           512          1\n"
        "          1536         2560 free \n"
        "region 1 at 0x200000000: 8192 bytes\n"
        "        offset         size state    requested         id\n"
        "             0         3072 used          3000          2\n"
        "          3072         5120 free \n"
        "bin  2 [1024, 2048): 1 free chunks, 1024 bytes\n"
        "bin  3 [2048, 4096): 1 free chunks, 2560 bytes\n"
        "bin  4 [4096, 8192): 1 free chunks, 5120 bytes\n"
        "allocs 3, frees 1, splits 3, merges 0, region grows 2, region frees 0, backoffs 0, "
        "failures 0, bad frees 0\n";
    if (strcmp(got, want) != 0)
        fail_msg("dump:\n%s\nwanted:\n%s", got, want);
    free(got);
    pbl_bfc_destroy(b);
}

static void test_bar(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 8192, 0);
    o.allow_growth = 0;
    pbl_bfc *b = make(&o);
    char bar[64];
    assert_int_equal(pbl_bfc_bar(b, bar, sizeof bar), 0);   /* no region yet */
    assert_string_equal(bar, "");
    uintptr_t x = A(b, 2048);
    A(b, 1024);
    A(b, 100);                                  /* 2048 used, 1024 used, 256 used, rest free */
    F(b, x);
    assert_int_equal(pbl_bfc_bar(b, bar, 9), 8); /* 8 cells of 1024 bytes */
    assert_string_equal(bar, "..#:....");
    assert_int_equal(pbl_bfc_bar(b, bar, 5), 4); /* 4 cells of 2048 */
    assert_string_equal(bar, ".:..");  /* 1280 of cell 1 used */
    assert_int_equal(pbl_bfc_bar(b, bar, 1), 0);
    assert_string_equal(bar, "");
    /* more cells than bytes is not possible here (8192 bytes); a 1-byte cell is fine */
    pbl_bfc_destroy(b);
}

typedef struct seen {
    char    op[8];
    int64_t id[8];
    size_t  bytes[8];
    int     n;
} seen;

static void on_event(void *ctx, char op, int64_t id, size_t bytes)
{
    seen *s = ctx;
    assert_true(s->n < 8);
    s->op[s->n] = op;
    s->id[s->n] = id;
    s->bytes[s->n++] = bytes;
}

static void test_trace(void **state)
{
    fake f;
    pbl_bfc_options o = fake_options(&f, 1 << 20, 4096);
    FILE *t = tmpfile();
    assert_non_null(t);
    seen ev = { { 0 }, { 0 }, { 0 }, 0 };
    o.trace = t;
    o.trace_fn = on_event;
    o.trace_ctx = &ev;
    pbl_bfc *b = make(&o);
    uintptr_t x = A(b, 1000), y = A(b, 7);
    F(b, x);
    void *p;
    assert_int_equal(pbl_bfc_alloc(b, 1 << 21, &p), PBL_ERR_NOMEM); /* failures: no row */
    assert_int_equal(pbl_bfc_free(b, (void *)x), PBL_ERR_INVALID_ARG); /* nor bad frees */
    F(b, y);
    char *got = read_all(t);
    fclose(t);
    assert_string_equal(got, "op,id,bytes\nalloc,0,1000\nalloc,1,7\nfree,0,1000\nfree,1,7\n");
    assert_int_equal(ev.n, 4); /* the callback sees the same events */
    assert_memory_equal(ev.op, "aaff", 4);
    static const int64_t want_id[] = { 0, 1, 0, 1 };
    static const size_t want_bytes[] = { 1000, 7, 1000, 7 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ev.id[i], want_id[i]);
        assert_int_equal(ev.bytes[i], want_bytes[i]);
    }
    free(got);
    pbl_bfc_destroy(b);
}

/* ---- the default host sub-allocator --------------------------------------------------------- */

static void test_host_memory(void **state)
{
    pbl_bfc_options o = pbl_bfc_options_default();
    o.limit = 8 << 20;
    pbl_bfc *b = make(&o);
    unsigned char *p[16];
    for (int i = 0; i < 16; i++) {
        assert_int_equal(pbl_bfc_alloc(b, (size_t)(i + 1) * 1000, (void **)&p[i]), PBL_OK);
        assert_int_equal((uintptr_t)p[i] % 256, 0);
        memset(p[i], i, (size_t)(i + 1) * 1000); /* ASan: the bytes are really there */
    }
    for (int i = 0; i < 16; i++) {
        assert_int_equal(p[i][(i + 1) * 1000 - 1], i);
        assert_int_equal(pbl_bfc_free(b, p[i]), PBL_OK);
    }
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    pbl_bfc_destroy(b);
}

/* ---- against a naive model ------------------------------------------------------------------ */

/* One region of `cap` bytes as a list of chunks by address; best fit by a linear scan. */
typedef struct model {
    size_t off[4096], size[4096];
    int    used[4096];
    int    n;
} model;

static long model_alloc(model *m, size_t rounded)
{
    int best = -1;
    for (int i = 0; i < m->n; i++)
        if (!m->used[i] && m->size[i] >= rounded && (best < 0 || m->size[i] < m->size[best]))
            best = i; /* strict <: the lowest address among equal sizes */
    if (best < 0)
        return -1;
    if (m->size[best] >= 2 * rounded) {
        memmove(&m->off[best + 1], &m->off[best], (size_t)(m->n - best) * sizeof *m->off);
        memmove(&m->size[best + 1], &m->size[best], (size_t)(m->n - best) * sizeof *m->size);
        memmove(&m->used[best + 1], &m->used[best], (size_t)(m->n - best) * sizeof *m->used);
        m->n++;
        m->off[best + 1] = m->off[best] + rounded;
        m->size[best + 1] = m->size[best] - rounded;
        m->used[best + 1] = 0;
        m->size[best] = rounded;
    }
    m->used[best] = 1;
    return (long)m->off[best];
}

static void model_free(model *m, size_t off)
{
    int i = 0;
    while (m->off[i] != off)
        i++;
    m->used[i] = 0;
    for (int k = i + 1; k >= i; k--) { /* merge k into k - 1 when both are free */
        if (k <= 0 || k >= m->n || m->used[k] || m->used[k - 1])
            continue;
        m->size[k - 1] += m->size[k];
        memmove(&m->off[k], &m->off[k + 1], (size_t)(m->n - k - 1) * sizeof *m->off);
        memmove(&m->size[k], &m->size[k + 1], (size_t)(m->n - k - 1) * sizeof *m->size);
        memmove(&m->used[k], &m->used[k + 1], (size_t)(m->n - k - 1) * sizeof *m->used);
        m->n--;
    }
}

static void test_random_against_model(void **state)
{
    const size_t cap = (size_t)1 << 22;
    fake f;
    pbl_bfc_options o = fake_options(&f, cap, 0);
    o.allow_growth = 0;
    pbl_bfc *b = make(&o);
    static model m;
    m.n = 1;
    m.off[0] = 0;
    m.size[0] = cap;
    m.used[0] = 0;
    uintptr_t live[512];
    int n_live = 0;
    uint64_t x = 12345;
    long fails = 0;
    for (int step = 0; step < 6000; step++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(x >> 33);
        if (n_live < 512 && (r % 100 < 55 || n_live == 0)) {
            /* sizes spread over several bins, with many repeats so ties happen */
            size_t bytes = (r >> 8) % 4 == 0 ? 1 + (r >> 10) % 65536 : 256u << ((r >> 10) % 8);
            void *p = NULL;
            pbl_status s = pbl_bfc_alloc(b, bytes, &p);
            long want = model_alloc(&m, (bytes + 255) & ~(size_t)255);
            if (want < 0) {
                assert_int_equal(s, PBL_ERR_NOMEM);
                fails++;
            } else {
                assert_int_equal(s, PBL_OK);
                assert_int_equal((uintptr_t)p, REGION(0) + (uintptr_t)want);
                live[n_live++] = (uintptr_t)p;
            }
        } else {
            int i = (int)((r >> 8) % (unsigned)n_live);
            assert_int_equal(pbl_bfc_free(b, (void *)live[i]), PBL_OK);
            model_free(&m, live[i] - REGION(0));
            live[i] = live[--n_live];
        }
        if (step % 64 == 0 && pbl_bfc_check(b) != PBL_OK)
            fail_msg("step %d: %s", step, pbl_bfc_errmsg(b));
    }
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    printf("6000 random steps matched the linear best-fit model (%ld out-of-memory answers, "
           "%d chunks in the model at the end)\n", fails, m.n);
    assert_true(fails > 0); /* the sequence reaches the limit */
    pbl_bfc_destroy(b);
}

/* Many live allocations, freed in a scrambled order: the index of used chunks (a hash table
 * with backward-shift removal) must find every one and keep no stale entry. */
static void test_many_live(void **state)
{
    enum { N = 20000 };
    fake f;
    pbl_bfc_options o = fake_options(&f, (size_t)1 << 30, 1 << 20);
    pbl_bfc *b = make(&o);
    static uintptr_t p[N];
    for (int i = 0; i < N; i++) {
        void *q;
        assert_int_equal(pbl_bfc_alloc(b, 256 * (size_t)(1 + i % 3), &q), PBL_OK);
        p[i] = (uintptr_t)q;
    }
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    for (int k = 0; k < N; k++) {
        int i = (int)(((uint64_t)k * 7919u) % N); /* 7919 is prime to N: a permutation */
        assert_int_equal(pbl_bfc_free(b, (void *)p[i]), PBL_OK);
        assert_int_equal(pbl_bfc_free(b, (void *)p[i]), PBL_ERR_INVALID_ARG);
        if (k % 2500 == 0 && pbl_bfc_check(b) != PBL_OK)
            fail_msg("after %d frees: %s", k + 1, pbl_bfc_errmsg(b));
    }
    pbl_bfc_stats st = stats(b);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.n_live, 0);
    assert_int_equal(st.n_bad_frees, N);
    assert_int_equal(st.n_free_chunks, st.n_regions); /* every region one free chunk again */
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    pbl_bfc_destroy(b);
}

/* ---- bookkeeping allocation failures -------------------------------------------------------- */

typedef struct counting {
    long   calls, fail_at; /* fail the call numbered fail_at (from 0); -1: never */
    size_t live;
} counting;

static void *counting_alloc(void *user, size_t n)
{
    counting *c = user;
    if (c->calls++ == c->fail_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        c->live += n;
    return p;
}

static void counting_free(void *user, void *p, size_t n)
{
    counting *c = user;
    if (p)
        c->live -= n;
    free(p);
}

/* A script that needs many chunk records and several region-table growths. Returns the
 * number of allocations that failed with PBL_ERR_NOMEM; any other outcome fails the test. */
static int run_script(counting *c, fake *f, int *created)
{
    pbl_allocator a = { counting_alloc, counting_free, c };
    pbl_bfc_options o = fake_options(f, 1 << 24, 4096);
    o.allocator = &a;
    pbl_bfc *b = NULL;
    char err[200];
    *created = 0;
    pbl_status s = pbl_bfc_create(&b, &o, err, sizeof err);
    if (s != PBL_OK) {
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_null(b);
        return 1;
    }
    *created = 1;
    int nomem = 0;
    void *p[200];
    for (int i = 0; i < 200; i++) {
        s = pbl_bfc_alloc(b, (size_t)256 * (1 + i % 7) + (i % 3) * 5000, &p[i]);
        if (s == PBL_ERR_NOMEM) {
            nomem++;
            assert_null(p[i]);
            assert_non_null(strstr(pbl_bfc_errmsg(b), "out of memory"));
        } else {
            assert_int_equal(s, PBL_OK);
        }
        if (pbl_bfc_check(b) != PBL_OK)
            fail_msg("alloc %d: %s", i, pbl_bfc_errmsg(b));
    }
    for (int i = 0; i < 200; i += 2)
        assert_int_equal(pbl_bfc_free(b, p[i]), PBL_OK);
    for (int i = 1; i < 200; i += 2)
        assert_int_equal(pbl_bfc_free(b, p[i]), PBL_OK);
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    pbl_bfc_stats st;
    pbl_bfc_stats_get(b, &st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.n_failures, nomem);
    pbl_bfc_destroy(b);
    return nomem;
}

static void test_bookkeeping_failures(void **state)
{
    counting c = { 0, -1, 0 };
    fake f;
    int created;
    assert_int_equal(run_script(&c, &f, &created), 0);
    long n_calls = c.calls;
    assert_true(n_calls >= 4);
    for (long fail = 0; fail < n_calls; fail++) {
        counting d = { 0, fail, 0 };
        int failed = run_script(&d, &f, &created);
        assert_int_equal(failed, 1); /* exactly the one allocation that hit the failure */
        assert_int_equal(d.live, 0);
        assert_int_equal(f.n_live, 0);
    }
    printf("the script with each of its %ld bookkeeping allocations failing in turn: one "
           "PBL_ERR_NOMEM, the pool consistent, nothing leaked\n", n_calls);
}

/* ---- threads -------------------------------------------------------------------------------- */

static void *hammer(void *arg)
{
    pbl_bfc *b = arg;
    void *p[32] = { 0 };
    for (int i = 0; i < 4000; i++) {
        int k = (i * 7) % 32;
        if (p[k]) {
            if (pbl_bfc_free(b, p[k]) != PBL_OK)
                return (void *)1;
            p[k] = NULL;
        } else if (pbl_bfc_alloc(b, (size_t)(k + 1) * 300, &p[k]) != PBL_OK) {
            return (void *)1;
        } else {
            memset(p[k], k, (size_t)(k + 1) * 300);
        }
    }
    for (int k = 0; k < 32; k++)
        pbl_bfc_free(b, p[k]);
    return NULL;
}

static void test_threads(void **state)
{
    pbl_bfc_options o = pbl_bfc_options_default();
    pbl_bfc *b = make(&o);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, b), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    assert_int_equal(pbl_bfc_check(b), PBL_OK);
    assert_int_equal(stats(b).in_use, 0);
    assert_int_equal(stats(b).n_allocs, stats(b).n_frees);
    pbl_bfc_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_bin_numbers),
        cmocka_unit_test(test_split_at_twice_the_request),
        cmocka_unit_test(test_split_waste_fraction),
        cmocka_unit_test(test_best_fit_and_address_order),
        cmocka_unit_test(test_best_fit_searches_larger_bins),
        cmocka_unit_test(test_coalescing),
        cmocka_unit_test(test_no_merge_across_regions),
        cmocka_unit_test(test_growth_by_doubling),
        cmocka_unit_test(test_growth_stops_at_limit),
        cmocka_unit_test(test_backoff_when_refused),
        cmocka_unit_test(test_backoff_gives_up_below_request),
        cmocka_unit_test(test_free_regions_before_failing),
        cmocka_unit_test(test_free_regions_only_when_it_helps),
        cmocka_unit_test(test_oom_message_and_recovery),
        cmocka_unit_test(test_bad_frees),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_stats_and_fragmentation),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_bar),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_host_memory),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_many_live),
        cmocka_unit_test(test_bookkeeping_failures),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
