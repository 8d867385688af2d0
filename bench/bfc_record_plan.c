/*
 * bfc_record_plan: records the allocation trace a zoo graph's executor makes when each
 * planner-owned buffer is allocated as it is produced and freed after its last reader,
 * through a BFC pool whose trace hook writes the CSV bfc_replay reads.
 *
 *   bfc_record_plan MODEL OUT.csv [BATCH]      e.g. bfc_record_plan mlp_train out.csv
 *
 * The sequence comes from liveness (pebble/liveness.h): the usage records of the planned
 * executor's schedule (in-place sharing taken, sizes aligned to 64), replayed in step order
 * — at step t the records whose lifetime ended (last == t) are freed, then those produced
 * at t (first == t) are allocated; graph outputs are freed after the last step. This is the
 * planned executor's allocation sequence, not a trace of dynamic (DTR) execution: there is
 * no eviction and no recomputation in it.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/pebble.h"
#include "zoo.h"

typedef struct ev {
    int64_t step;
    int32_t alloc;  /* frees (0) before allocs (1) at one step */
    int32_t record;
} ev;

static int cmp_ev(const void *a, const void *b)
{
    const ev *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->alloc != y->alloc)
        return x->alloc - y->alloc;
    return (x->record > y->record) - (x->record < y->record);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bfc_record_plan MODEL OUT.csv [BATCH]\n");
        return 2;
    }
    char err[512];
    pbl_graph *g = NULL;
    int64_t batch = argc > 3 ? atoll(argv[3]) : 0;
    if (zoo_build(argv[1], batch, &g, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "bfc_record_plan: %s\n", err);
        return 1;
    }
    pbl_graph_records gr;
    memset(&gr, 0, sizeof gr);
    pbl_liveness_options lo = pbl_liveness_options_default();
    if (pbl_graph_liveness(g, &lo, &gr, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "bfc_record_plan: %s\n", err);
        pbl_graph_destroy(g);
        return 1;
    }
    int rc = 1;
    FILE *out = NULL;
    pbl_bfc *b = NULL;
    void **ptr = calloc((size_t)gr.n_records + 1, sizeof *ptr);
    ev *e = malloc(((size_t)gr.n_records * 2 + 1) * sizeof *e);
    if (!ptr || !e)
        goto done;
    int32_t n = 0;
    for (int32_t r = 0; r < gr.n_records; r++) {
        e[n++] = (ev){ gr.records[r].first, 1, r };
        e[n++] = (ev){ gr.records[r].last, 0, r };
    }
    qsort(e, (size_t)n, sizeof *e, cmp_ev);

    out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        goto done;
    }
    pbl_bfc_options o = pbl_bfc_options_default();
    o.trace = out;
    if (pbl_bfc_create(&b, &o, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "bfc_record_plan: %s\n", err);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t r = e[i].record;
        if (e[i].alloc) {
            if (pbl_bfc_alloc(b, (size_t)gr.records[r].size, &ptr[r]) != PBL_OK) {
                fprintf(stderr, "bfc_record_plan: %s\n", pbl_bfc_errmsg(b));
                goto done;
            }
        } else if (pbl_bfc_free(b, ptr[r]) != PBL_OK) {
            fprintf(stderr, "bfc_record_plan: %s\n", pbl_bfc_errmsg(b));
            goto done;
        }
    }
    pbl_bfc_stats st;
    pbl_bfc_stats_get(b, &st);
    fprintf(stderr, "%s: %d records over %d steps, %d events; pool peak in use %zu, peak reserved %zu\n",
            argv[1], (int)gr.n_records, (int)gr.n_steps, (int)n, st.peak_in_use, st.peak_reserved);
    rc = 0;
done:
    pbl_bfc_destroy(b);
    if (out && fclose(out) != 0)
        rc = 1;
    free(ptr);
    free(e);
    pbl_graph_records_free(&gr);
    pbl_graph_destroy(g);
    return rc;
}
