/*
 * bfc_replay: allocation traces through the BFC pool (pebble/bfc.h) and the C library's
 * malloc/free, side by side.
 *
 *   bfc_replay [--format table|json] [--min-time S] [--limit BYTES] TRACE.csv...
 *
 * A trace is the CSV a pool writes when pbl_bfc_options.trace is set: a header "op,id,bytes",
 * then one row per event, "alloc,ID,BYTES" or "free,ID,BYTES" (ID matches a free to its
 * alloc). Each trace is replayed over and over (at least --min-time seconds, default 0.3, and
 * 3 times) through one pool and through malloc/free; allocations still live at the end of a
 * replay are freed outside the timed part. Reported per allocator:
 *
 *   ops/s          trace events (allocs + frees) per second over all timed replays;
 *   peak reserved  BFC: the most bytes the pool held from its sub-allocator (host
 *                  aligned_alloc) over all replays (pbl_bfc_stats.peak_reserved);
 *                  malloc: the most bytes glibc held from the system during one untimed
 *                  replay in a fresh process (this program, --malloc-footprint), as
 *                  mallinfo2's arena + hblkhd (sbrk heap + mmapped chunks) above their value
 *                  before it (after malloc_trim(0)), sampled after every event;
 *   peak usable    malloc only: the most sum of malloc_usable_size over live blocks.
 * "peak live" is the most bytes the trace itself asks for at once (the lower bound).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pebble/pebble.h"

typedef struct event {
    int32_t slot;   /* dense id */
    int32_t alloc;  /* 1 alloc, 0 free */
    size_t  bytes;
} event;

typedef struct trace {
    const char *path;
    event      *ev;
    int64_t     n, n_allocs;
    int32_t     n_slots;
    size_t      peak_live;
} trace;

typedef struct result {
    double  bfc_ops_s, malloc_ops_s;
    size_t  bfc_peak_reserved, bfc_peak_in_use;
    int32_t bfc_regions;
    double  bfc_frag_end;
    int64_t bfc_splits, bfc_merges, bfc_grows, bfc_failures;
    size_t  malloc_peak_reserved, malloc_peak_usable;
    int     have_mallinfo;
    int64_t replays_bfc, replays_malloc;
} result;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- reading a trace ------------------------------------------------------------------------ */

static int read_trace(const char *path, trace *t)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bfc_replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int64_t cap = 1024, *ids = NULL;
    t->ev = malloc((size_t)cap * sizeof *t->ev);
    ids = malloc((size_t)cap * sizeof *ids);
    char line[256];
    long lineno = 0;
    int64_t max_id = -1;
    int rc = -1;
    if (!t->ev || !ids)
        goto done;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || (lineno == 1 && strcmp(line, "op,id,bytes") == 0))
            continue;
        char op[16];
        long long id;
        unsigned long long bytes;
        char extra;
        if (sscanf(line, "%15[a-z],%lld,%llu%c", op, &id, &bytes, &extra) != 3 || id < 0 ||
            id > 100000000 || (strcmp(op, "alloc") != 0 && strcmp(op, "free") != 0)) {
            fprintf(stderr, "bfc_replay: %s:%ld: expected alloc|free,ID,BYTES, got '%s'\n", path,
                    lineno, line);
            goto done;
        }
        if (t->n == cap) {
            cap *= 2;
            event *ev = realloc(t->ev, (size_t)cap * sizeof *t->ev);
            if (ev)
                t->ev = ev;
            int64_t *grown = realloc(ids, (size_t)cap * sizeof *ids);
            if (grown)
                ids = grown;
            if (!ev || !grown) {
                fprintf(stderr, "bfc_replay: %s: out of memory\n", path);
                goto done;
            }
        }
        t->ev[t->n] = (event){ 0, op[0] == 'a', (size_t)bytes };
        ids[t->n++] = id;
        if (id > max_id)
            max_id = id;
    }
    /* ids -> dense slots, and the checks a replay relies on */
    int32_t *slot = malloc((size_t)(max_id + 1) * sizeof *slot);
    size_t *live = calloc((size_t)(max_id + 1), sizeof *live);
    if (!slot || !live)
        goto done_maps;
    for (int64_t i = 0; i <= max_id; i++)
        slot[i] = -1;
    size_t now = 0;
    for (int64_t i = 0; i < t->n; i++) {
        event *e = &t->ev[i];
        int64_t id = ids[i];
        if (e->alloc) {
            if (slot[id] >= 0 && live[id]) {
                fprintf(stderr, "bfc_replay: %s: id %" PRId64 " allocated twice\n", path, id);
                goto done_maps;
            }
            if (slot[id] < 0)
                slot[id] = t->n_slots++;
            live[id] = e->bytes ? e->bytes : 1;
            now += e->bytes;
            if (now > t->peak_live)
                t->peak_live = now;
            t->n_allocs++;
        } else {
            if (slot[id] < 0 || !live[id]) {
                fprintf(stderr, "bfc_replay: %s: free of id %" PRId64 " that is not live\n", path, id);
                goto done_maps;
            }
            live[id] = 0;
            now -= e->bytes;
        }
        e->slot = slot[id];
    }
    rc = 0;
done_maps:
    free(slot);
    free(live);
done:
    free(ids);
    fclose(f);
    if (rc == 0 && t->n == 0) {
        fprintf(stderr, "bfc_replay: %s: no events\n", path);
        rc = -1;
    }
    return rc;
}

/* ---- replays -------------------------------------------------------------------------------- */

/* One replay through the pool; leftovers are freed after the clock stops. */
static int replay_bfc(pbl_bfc *b, const trace *t, void **p, double *secs)
{
    double t0 = now_s();
    for (int64_t i = 0; i < t->n; i++) {
        const event *e = &t->ev[i];
        if (e->alloc) {
            if (pbl_bfc_alloc(b, e->bytes, &p[e->slot]) != PBL_OK) {
                fprintf(stderr, "bfc_replay: %s: event %" PRId64 ": %s\n", t->path, i,
                        pbl_bfc_errmsg(b));
                return -1;
            }
        } else {
            pbl_bfc_free(b, p[e->slot]);
            p[e->slot] = NULL;
        }
    }
    *secs += now_s() - t0;
    for (int32_t s = 0; s < t->n_slots; s++) {
        pbl_bfc_free(b, p[s]);
        p[s] = NULL;
    }
    return 0;
}

static int replay_malloc(const trace *t, void **p, double *secs)
{
    double t0 = now_s();
    for (int64_t i = 0; i < t->n; i++) {
        const event *e = &t->ev[i];
        if (e->alloc) {
            p[e->slot] = malloc(e->bytes ? e->bytes : 1);
            if (!p[e->slot])
                return -1;
        } else {
            free(p[e->slot]);
            p[e->slot] = NULL;
        }
    }
    *secs += now_s() - t0;
    for (int32_t s = 0; s < t->n_slots; s++) {
        free(p[s]);
        p[s] = NULL;
    }
    return 0;
}

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define HAVE_MALLINFO2 1
static size_t held_by_malloc(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.arena + mi.hblkhd;
}
#endif

/* An untimed replay through malloc, sampling what glibc holds after every event. */
static int measure_malloc(const trace *t, void **p, result *r)
{
    size_t usable = 0;
#ifdef HAVE_MALLINFO2
    malloc_trim(0);
    size_t base = held_by_malloc();
    r->have_mallinfo = 1;
#endif
    for (int64_t i = 0; i < t->n; i++) {
        const event *e = &t->ev[i];
        if (e->alloc) {
            p[e->slot] = malloc(e->bytes ? e->bytes : 1);
            if (!p[e->slot])
                return -1;
            usable += malloc_usable_size(p[e->slot]);
        } else {
            usable -= malloc_usable_size(p[e->slot]);
            free(p[e->slot]);
            p[e->slot] = NULL;
        }
        if (usable > r->malloc_peak_usable)
            r->malloc_peak_usable = usable;
#ifdef HAVE_MALLINFO2
        size_t held = held_by_malloc();
        if (held > base && held - base > r->malloc_peak_reserved)
            r->malloc_peak_reserved = held - base;
#endif
    }
    for (int32_t s = 0; s < t->n_slots; s++) {
        free(p[s]);
        p[s] = NULL;
    }
    return 0;
}

/* malloc's footprint depends on everything the process did before (glibc keeps freed memory
 * and raises its mmap threshold as it goes), so each trace is measured in a fresh process:
 * this program again, with --malloc-footprint. */
static int footprint_child(const char *self, const char *path, result *r)
{
    if (strchr(self, '\'') || strchr(path, '\'')) {
        fprintf(stderr, "bfc_replay: %s: a quote in a path\n", path);
        return -1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --malloc-footprint '%s'", self, path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    int have = 0;
    int ok = fscanf(f, "%zu %zu %d", &r->malloc_peak_reserved, &r->malloc_peak_usable, &have) == 3;
    r->have_mallinfo = have;
    return pclose(f) == 0 && ok ? 0 : -1;
}

static int run(const char *self, const trace *t, double min_time, size_t limit, result *r)
{
    memset(r, 0, sizeof *r);
    void **p = calloc((size_t)t->n_slots, sizeof *p);
    if (!p)
        return -1;
    int rc = -1;
    if (footprint_child(self, t->path, r) != 0) {
        fprintf(stderr, "bfc_replay: %s: measuring malloc's footprint failed\n", t->path);
        goto done;
    }

    pbl_bfc_options o = pbl_bfc_options_default();
    o.limit = limit;
    o.name = t->path;
    pbl_bfc *b;
    char err[256];
    if (pbl_bfc_create(&b, &o, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "bfc_replay: %s\n", err);
        goto done;
    }
    double secs = 0;
    while (secs < min_time || r->replays_bfc < 3) {
        if (replay_bfc(b, t, p, &secs) != 0) {
            pbl_bfc_destroy(b);
            goto done;
        }
        r->replays_bfc++;
    }
    r->bfc_ops_s = (double)t->n * (double)r->replays_bfc / secs;
    pbl_bfc_stats st;
    pbl_bfc_stats_get(b, &st);
    r->bfc_peak_reserved = st.peak_reserved;
    r->bfc_peak_in_use = st.peak_in_use;
    r->bfc_regions = st.n_regions;
    r->bfc_frag_end = st.fragmentation;
    r->bfc_splits = st.n_splits;
    r->bfc_merges = st.n_merges;
    r->bfc_grows = st.n_region_grows;
    r->bfc_failures = st.n_failures;
    pbl_bfc_destroy(b);

    secs = 0;
    while (secs < min_time || r->replays_malloc < 3) {
        if (replay_malloc(t, p, &secs) != 0)
            goto done;
        r->replays_malloc++;
    }
    r->malloc_ops_s = (double)t->n * (double)r->replays_malloc / secs;
    rc = 0;
done:
    free(p);
    return rc;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int main(int argc, char **argv)
{
    int json = 0;
    double min_time = 0.3;
    size_t limit = 0;
    int first = argc;
    if (argc == 3 && strcmp(argv[1], "--malloc-footprint") == 0) {
        trace t;
        result r;
        memset(&r, 0, sizeof r);
        void **p = NULL;
        if (read_trace(argv[2], &t) != 0 || !(p = calloc((size_t)t.n_slots, sizeof *p)) ||
            measure_malloc(&t, p, &r) != 0)
            return 1;
        printf("%zu %zu %d\n", r.malloc_peak_reserved, r.malloc_peak_usable, r.have_mallinfo);
        free(p);
        free(t.ev);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            json = strcmp(argv[++i], "json") == 0;
            if (!json && strcmp(argv[i], "table") != 0) {
                fprintf(stderr, "bfc_replay: --format table|json\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
            min_time = atof(argv[++i]);
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            limit = (size_t)strtoull(argv[++i], NULL, 10);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bfc_replay [--format table|json] [--min-time S] [--limit BYTES] TRACE.csv...\n");
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (first >= argc) {
        fprintf(stderr, "usage: bfc_replay [--format table|json] [--min-time S] [--limit BYTES] TRACE.csv...\n");
        return 2;
    }
    if (json)
        printf("{\"traces\": [");
    else
        printf("%-28s %8s %12s | %11s %14s %8s | %11s %14s %14s\n", "trace", "events",
               "peak live", "bfc Mops/s", "bfc reserved", "vs live", "malloc Mops/s",
               "malloc held", "malloc usable");
    int status = 0;
    for (int i = first; i < argc; i++) {
        trace t;
        result r;
        if (read_trace(argv[i], &t) != 0 || run(argv[0], &t, min_time, limit, &r) != 0) {
            status = 1;
            free(t.ev);
            continue;
        }
        char held[32];
        if (r.have_mallinfo)
            snprintf(held, sizeof held, "%zu", r.malloc_peak_reserved);
        else
            snprintf(held, sizeof held, json ? "null" : "n/a");
        if (json) {
            printf("%s\n  {\"trace\": \"%s\", \"events\": %" PRId64 ", \"allocs\": %" PRId64
                   ", \"peak_live\": %zu,\n"
                   "   \"bfc\": {\"ops_per_s\": %.0f, \"peak_reserved\": %zu, \"peak_in_use\": %zu, "
                   "\"regions\": %d, \"region_grows\": %" PRId64 ", \"splits\": %" PRId64
                   ", \"merges\": %" PRId64 ", \"failures\": %" PRId64
                   ", \"fragmentation_at_end\": %.4f, \"replays\": %" PRId64 "},\n"
                   "   \"malloc\": {\"ops_per_s\": %.0f, \"peak_held\": %s, \"peak_usable\": %zu, "
                   "\"held_measure\": \"mallinfo2 arena+hblkhd\", \"replays\": %" PRId64 "}}",
                   i == first ? "" : ",", base_name(t.path), t.n, t.n_allocs, t.peak_live,
                   r.bfc_ops_s, r.bfc_peak_reserved, r.bfc_peak_in_use, (int)r.bfc_regions,
                   r.bfc_grows, r.bfc_splits, r.bfc_merges, r.bfc_failures, r.bfc_frag_end,
                   r.replays_bfc, r.malloc_ops_s, held, r.malloc_peak_usable, r.replays_malloc);
        } else {
            printf("%-28s %8" PRId64 " %12zu | %11.2f %14zu %7.2fx | %11.2f %14s %14zu\n",
                   base_name(t.path), t.n, t.peak_live, r.bfc_ops_s / 1e6, r.bfc_peak_reserved,
                   t.peak_live ? (double)r.bfc_peak_reserved / (double)t.peak_live : 0.0,
                   r.malloc_ops_s / 1e6, held, r.malloc_peak_usable);
        }
        free(t.ev);
    }
    if (json)
        printf("\n]}\n");
    else
        printf("bfc reserved: pbl_bfc_stats.peak_reserved over all replays (one pool); malloc "
               "held: glibc mallinfo2 arena+hblkhd above its start, peak over one replay in a fresh process; "
               "malloc usable: peak sum of malloc_usable_size\n");
    fflush(stdout);
    return status;
}
