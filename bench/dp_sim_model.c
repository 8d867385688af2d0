/*
 * bench/dp_sim_model.c — see dp_sim_model.h for the model and its sources.
 */
#include "dp_sim_model.h"

#include <stdlib.h>
#include <string.h>

double dps_allreduce_s(const dps_link *l, int64_t bytes, int64_t ranks)
{
    if (ranks <= 1 || bytes <= 0)
        return 0.0;
    double n = (double)ranks, b = (double)bytes;
    double ring = 2.0 * (n - 1.0) * l->alpha + 2.0 * (n - 1.0) / n * b / l->beta;
    int rounds = 0;
    for (int64_t p = 1; p < ranks; p *= 2)
        rounds++;
    double rd = rounds * (l->alpha + b / l->beta);
    double rh = 2.0 * rounds * l->alpha + 2.0 * (n - 1.0) / n * b / l->beta;
    double best = rd < ring ? rd : ring;
    switch (l->algo) {
    case DPS_RD:
        return rd;
    case DPS_RH:
        return rh;
    case DPS_BEST:
        return rh < best ? rh : best;
    case DPS_RING:
    default:
        return ring;
    }
}

/* qsort context-free: sort (ready, index) pairs */
typedef struct key {
    int32_t ready, index;
} key;

static int cmp_key(const void *a, const void *b)
{
    const key *x = a, *y = b;
    if (x->ready != y->ready)
        return x->ready < y->ready ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

int32_t dps_buckets(const dps_grad *grads, int32_t n, int64_t bucket_bytes, int32_t max_grads, int32_t *order,
                    int32_t *bucket)
{
    if (n < 0 || bucket_bytes < 0 || max_grads < 0)
        return -1;
    key *k = malloc((size_t)(n ? n : 1) * sizeof *k);
    if (!k)
        return -1;
    int32_t nb = 0, rc = 0;
    for (int32_t i = 0; i < n; i++) {
        if (grads[i].bytes <= 0) {
            rc = -1;
            goto done;
        }
        k[i] = (key){ grads[i].ready, i };
    }
    qsort(k, (size_t)n, sizeof *k, cmp_key);
    int64_t held = 0; /* bytes in the open bucket */
    int32_t count = 0; /* its gradients */
    for (int32_t i = 0; i < n; i++) {
        int64_t b = grads[k[i].index].bytes;
        /* a full bucket closes; an empty one takes anything (a big gradient goes alone) */
        if (held > 0 && (b > bucket_bytes - held || (max_grads > 0 && count == max_grads))) {
            nb++;
            held = 0;
            count = 0;
        }
        held += b;
        count++;
        order[i] = k[i].index;
        bucket[i] = nb;
    }
    rc = n ? nb + 1 : 0;
done:
    free(k);
    return rc;
}

typedef struct bucket_info {
    int32_t last_ready; /* compute index after which every gradient of it exists */
    int64_t bytes;
    double  update_s, allreduce_s, end; /* end: when its all-reduce is done */
} bucket_info;

static int valid(const dps_step *s, const dps_link *l, int64_t ranks)
{
    if (!s || !l || ranks < 1 || !(l->beta > 0.0) || !(l->alpha >= 0.0) || s->n_compute < 0 || s->n_grads < 0 ||
        (s->n_compute && !s->compute_s) || (s->n_grads && !s->grads))
        return 0;
    for (int32_t i = 0; i < s->n_compute; i++)
        if (!(s->compute_s[i] >= 0.0))
            return 0;
    for (int32_t i = 0; i < s->n_grads; i++)
        if (s->grads[i].ready < 0 || s->grads[i].ready >= s->n_compute || !(s->grads[i].update_s >= 0.0))
            return 0;
    return 1;
}

int dps_simulate(const dps_step *s, const dps_link *l, int64_t ranks, int64_t bucket_bytes, int32_t max_grads,
                 int overlap, dps_result *out)
{
    memset(out, 0, sizeof *out);
    if (!valid(s, l, ranks))
        return -1;
    int32_t n = s->n_grads, nb = 0, rc = -1;
    size_t cnt = (size_t)(n ? n : 1);
    int32_t *order = malloc(cnt * sizeof *order), *bkt = malloc(cnt * sizeof *bkt);
    bucket_info *b = calloc(cnt, sizeof *b);
    if (!order || !bkt || !b)
        goto done;
    nb = dps_buckets(s->grads, n, bucket_bytes, max_grads, order, bkt);
    if (nb < 0)
        goto done;
    for (int32_t i = 0; i < n; i++) {
        const dps_grad *g = &s->grads[order[i]];
        bucket_info *k = &b[bkt[i]];
        k->last_ready = g->ready; /* finishing order: the last one seen is the latest */
        k->bytes += g->bytes;
        k->update_s += g->update_s;
        out->compute_s += g->update_s;
    }
    for (int32_t k = 0; k < nb; k++) {
        b[k].allreduce_s = dps_allreduce_s(l, b[k].bytes, ranks);
        out->comm_s += b[k].allreduce_s;
        if (b[k].bytes > out->max_bucket_bytes)
            out->max_bucket_bytes = b[k].bytes;
    }
    double tc = 0.0, tm = 0.0; /* when the compute and the communication streams are free */
    int32_t started = 0;
    for (int32_t i = 0; i < s->n_compute; i++) {
        tc += s->compute_s[i];
        out->compute_s += s->compute_s[i];
        while (overlap && started < nb && b[started].last_ready <= i) {
            tm = (tm > tc ? tm : tc) + b[started].allreduce_s;
            b[started++].end = tm;
        }
    }
    /* without overlap every all-reduce starts here, after the backward pass */
    for (; started < nb; started++) {
        tm = (tm > tc ? tm : tc) + b[started].allreduce_s;
        b[started].end = tm;
    }
    /* the updates follow the backward pass, each after its own bucket's all-reduce */
    for (int32_t k = 0; k < nb; k++)
        tc = (tc > b[k].end ? tc : b[k].end) + b[k].update_s;
    out->step_s = tc;
    out->exposed_s = tc - out->compute_s;
    if (out->exposed_s < 0.0) /* rounding: the sums were taken in another order */
        out->exposed_s = 0.0;
    out->hidden = -1.0;
    if (out->comm_s > 0.0) { /* clamped: the sums round differently from the event times */
        out->hidden = 1.0 - out->exposed_s / out->comm_s;
        out->hidden = out->hidden < 0.0 ? 0.0 : out->hidden > 1.0 ? 1.0 : out->hidden;
    }
    out->n_buckets = nb;
    rc = 0;
done:
    free(order);
    free(bkt);
    free(b);
    if (rc != 0)
        memset(out, 0, sizeof *out);
    return rc;
}
