/*
 * bench/dp_sim.c — predicted data-parallel step time (issue 19, point 6) for 1, 8, 64 and 512
 * ranks, without overlap, and with overlap and gradient buckets of several sizes; and the
 * bucket size it would pick per rank count.
 *
 * From a training graph (forward, backward, optimizer updates) it takes, through the public
 * API only: the node order (pbl_graph_schedule, program order: the executor's), each node's
 * cost (pbl_node_cost, pebble/streams.h), and each parameter gradient (an update node's
 * second input: sgd, sgd_momentum and adam take (param, grad, ...)) with the schedule step of
 * the node that produces it. Cost units become seconds by a calibration (the real graph timed
 * on this machine with pebble's executor: measured step / total cost) or by --flops. Then
 * bench/dp_sim_model.c simulates the step (the model and its sources are in its header and in
 * docs/data_parallel_sim.md).
 *
 *     dp_sim [--model mlp|ZOO_TRAIN_NAME|FILE.json] [--hidden 512,512] [--batch 128]
 *            [--link eth100[,ib100,...]] [--alpha S] [--beta BYTES_PER_S] [--algo ring|rd|rh|best]
 *            [--flops F | --threads 1] [--ranks 1,8,64,512] [--buckets 64K,128K,...,64M]
 *            [--max-grads 16] [--list] [--format table|json]
 *
 * --batch is per rank (weak scaling: N ranks train on N·batch samples per step). --max-grads:
 * a bucket holds at most that many gradients, as in pbl_graph_data_parallel (whose
 * bucket_pack node takes 16 inputs); 0 lifts the cap. The no-overlap row is one all-reduce of
 * every gradient after the backward pass, uncapped.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/dp_sim_model.h"
#include "pebble/pebble.h"
#include "tools/zoo/zoo.h"

#define MAX_LIST 16
#define MAX_HIDDEN 16

/* Link presets: nominal figures (latency of one message, bandwidth of one link, one direction),
 * not measurements; docs/data_parallel_sim.md gives their grounds. */
typedef struct preset {
    const char *name, *what;
    double      alpha, beta;
} preset;

static const preset presets[] = {
    { "shm", "one host, MPI over shared memory", 1e-6, 10e9 },
    { "eth100", "100 Gb/s Ethernet, TCP", 15e-6, 12.5e9 },
    { "ib100", "100 Gb/s InfiniBand EDR, RDMA", 2e-6, 12.5e9 },
    { "ib400", "400 Gb/s InfiniBand NDR, RDMA", 2e-6, 50e9 },
    { "nvlink", "NVLink 3 between GPUs through NVSwitch", 3e-6, 150e9 },
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

typedef struct options {
    const char *model;
    int64_t     hidden[MAX_HIDDEN];
    int         n_hidden;
    int64_t     batch;
    int         link[MAX_LIST];
    int         n_links;
    double      alpha, beta; /* < 0: the preset's */
    dps_algo    algo;
    double      flops;       /* > 0: no calibration */
    int         threads;
    int64_t     ranks[MAX_LIST];
    int         n_ranks;
    int64_t     buckets[MAX_LIST];
    int         n_buckets;
    int32_t     max_grads;   /* gradients a bucket holds at most (0: no limit) */
    int         list, json;
} options;

/* What the simulation needs from the graph, costs still in units. */
typedef struct step_desc {
    int32_t     n_compute, n_grads;
    double     *compute_units;  /* [n_compute] */
    dps_grad   *grads;          /* update_s holds units until scaled */
    const char **grad_names;    /* [n_grads] */
    const char **producer_names;
    double      total_units;
    int64_t     grad_bytes;
    int32_t     n_nodes;
} step_desc;

static void usage(void)
{
    fprintf(stderr,
            "usage: dp_sim [--model mlp|ZOO_TRAIN_NAME|FILE.json] [--hidden 512,512] [--batch N]\n"
            "              [--link NAME[,NAME...]] [--alpha SECONDS] [--beta BYTES_PER_S] [--algo ring|rd|rh|best]\n"
            "              [--flops F | --threads T] [--ranks 1,8,64,512] [--buckets 64K,...,64M]\n"
            "              [--max-grads 16] [--list] [--format table|json]\n"
            "links:");
    for (int i = 0; i < N_PRESETS; i++)
        fprintf(stderr, " %s", presets[i].name);
    fprintf(stderr, "\n");
}

/* "64K" -> 65536 (K, M, G: powers of 1024); -1 on a bad number */
static int64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    int64_t m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        m = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        m = 1024 * 1024 * 1024, end++;
    if (*end || v > INT64_MAX / m)
        return -1;
    return (int64_t)v * m;
}

/* A comma-separated list of sizes (or plain numbers) into out; -1 when bad or too long */
static int parse_list(const char *s, int64_t *out, int max, int64_t min)
{
    int n = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int64_t v = parse_size(tok);
        if (v < min || n == max)
            return -1;
        out[n++] = v;
    }
    return n ? n : -1;
}

static int parse_links(const char *s, options *o)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    o->n_links = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = -1;
        for (int i = 0; i < N_PRESETS; i++)
            if (!strcmp(tok, presets[i].name))
                found = i;
        if (found < 0 || o->n_links == MAX_LIST)
            return -1;
        o->link[o->n_links++] = found;
    }
    return o->n_links ? 0 : -1;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){ .model = "mlp", .hidden = { 512, 512 }, .n_hidden = 2, .batch = -1, .link = { 1 },
                    .n_links = 1, .alpha = -1, .beta = -1, .algo = DPS_RING, .threads = 1,
                    .ranks = { 1, 8, 64, 512 }, .n_ranks = 4, .max_grads = 16,
                    .n_buckets = 11 };
    for (int i = 0; i < o->n_buckets; i++) /* 64 KiB, 128 KiB, ... 64 MiB */
        o->buckets[i] = (int64_t)(64 << 10) << i;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--list")) {
            o->list = 1;
            continue;
        }
        if (!v) {
            ok = 0;
        } else if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--hidden")) {
            o->n_hidden = parse_list(v, o->hidden, MAX_HIDDEN, 1);
            ok = o->n_hidden > 0;
        } else if (!strcmp(a, "--batch")) {
            o->batch = parse_size(v);
            ok = o->batch >= 0;
        } else if (!strcmp(a, "--link")) {
            ok = parse_links(v, o) == 0;
        } else if (!strcmp(a, "--alpha")) {
            char *end;
            o->alpha = strtod(v, &end);
            ok = *end == 0 && o->alpha >= 0 && isfinite(o->alpha);
        } else if (!strcmp(a, "--beta")) {
            char *end;
            o->beta = strtod(v, &end);
            ok = *end == 0 && o->beta > 0 && isfinite(o->beta);
        } else if (!strcmp(a, "--algo")) {
            o->algo = !strcmp(v, "ring") ? DPS_RING : !strcmp(v, "rd") ? DPS_RD : !strcmp(v, "rh") ? DPS_RH : DPS_BEST;
            ok = !strcmp(v, "ring") || !strcmp(v, "rd") || !strcmp(v, "rh") || !strcmp(v, "best");
        } else if (!strcmp(a, "--flops")) {
            char *end;
            o->flops = strtod(v, &end);
            ok = *end == 0 && o->flops > 0 && isfinite(o->flops);
        } else if (!strcmp(a, "--threads")) {
            o->threads = atoi(v);
            ok = o->threads >= 1 && o->threads <= 256;
        } else if (!strcmp(a, "--ranks")) {
            o->n_ranks = parse_list(v, o->ranks, MAX_LIST, 1);
            ok = o->n_ranks > 0;
        } else if (!strcmp(a, "--buckets")) {
            o->n_buckets = parse_list(v, o->buckets, MAX_LIST, 1);
            ok = o->n_buckets > 0;
        } else if (!strcmp(a, "--max-grads")) {
            char *end;
            long m = strtol(v, &end, 10);
            ok = *end == 0 && end != v && m >= 0 && m <= INT32_MAX;
            o->max_grads = (int32_t)m;
        } else if (!strcmp(a, "--format")) {
            o->json = !strcmp(v, "json");
            ok = o->json || !strcmp(v, "table");
        } else {
            ok = 0;
        }
        if (!ok) {
            fprintf(stderr, "dp_sim: bad or incomplete option '%s%s%s'\n", a, v ? " " : "", v ? v : "");
            usage();
            return -1;
        }
        i++;
    }
    return 0;
}

/* ---- the graph --------------------------------------------------------------------------- */

/* The MLP of issue 19: 784 -> hidden -> 10, relu, softmax cross-entropy, Adam lr 1e-3. */
static pbl_graph *build_mlp(const options *o, int64_t batch)
{
    pbl_graph *g = NULL;
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        return NULL;
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(batch, 784)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(batch));
    pbl_value params[2 * (MAX_HIDDEN + 1)], grads[2 * (MAX_HIDDEN + 1)], h = x;
    int np = 0;
    int64_t in = 784;
    for (int l = 0; l <= o->n_hidden; l++) {
        int64_t out = l < o->n_hidden ? o->hidden[l] : 10;
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "w%d", l + 1);
        snprintf(bn, sizeof bn, "b%d", l + 1);
        pbl_value w = pbl_param(g, wn, PBL_SHAPE(out, in)), b = pbl_param(g, bn, PBL_SHAPE(out));
        h = pbl_fully_connected(g, h, w, b);
        if (l < o->n_hidden)
            h = pbl_relu(g, h);
        params[np++] = w;
        params[np++] = b;
        in = out;
    }
    pbl_value loss = pbl_softmax_cross_entropy(g, h, y);
    pbl_optimizer_options opt = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    opt.lr = 1e-3;
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_set_output(g, "loss", loss) != PBL_OK ||
        pbl_graph_gradient(g, loss, params, np, grads) != PBL_OK ||
        pbl_graph_add_optimizer(g, &opt, params, grads, np) != PBL_OK || pbl_graph_validate(g) != PBL_OK) {
        fprintf(stderr, "dp_sim: building the MLP: %s\n", pbl_graph_errmsg(g));
        pbl_graph_destroy(g);
        return NULL;
    }
    return g;
}

static pbl_graph *load_model(const options *o, int64_t batch)
{
    char err[512];
    pbl_graph *g = NULL;
    size_t n = strlen(o->model);
    if (!strcmp(o->model, "mlp"))
        return build_mlp(o, batch);
    if (n > 5 && !strcmp(o->model + n - 5, ".json")) {
        if (pbl_graph_load_json(&g, o->model, NULL, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "dp_sim: %s\n", err);
            return NULL;
        }
        return g;
    }
    if (zoo_build(o->model, batch, &g, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "dp_sim: %s\n", err);
        return NULL;
    }
    return g;
}

static int is_update(const pbl_graph *g, const pbl_node_info *ni)
{
    if (strcmp(ni->op, "sgd") && strcmp(ni->op, "sgd_momentum") && strcmp(ni->op, "adam"))
        return 0;
    pbl_value_info vi;
    return ni->n_inputs >= 2 && pbl_graph_value_info(g, ni->inputs[0], &vi) == PBL_OK && vi.kind == PBL_VALUE_PARAM;
}

static void step_free(step_desc *d)
{
    free(d->compute_units);
    free(d->grads);
    free(d->grad_names);
    free(d->producer_names);
    memset(d, 0, sizeof *d);
}

/* Walks g's schedule: compute nodes in order with their costs, and one dps_grad per update. */
static int describe(const pbl_graph *g, step_desc *d)
{
    char err[512];
    memset(d, 0, sizeof *d);
    pbl_schedule_options so = pbl_schedule_options_default();
    pbl_schedule sc = { 0 };
    int32_t nn = pbl_graph_node_count(g), *index = NULL, rc = -1;
    if (pbl_graph_schedule(g, &so, &sc, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "dp_sim: scheduling: %s\n", err);
        return -1;
    }
    size_t cap = (size_t)(sc.n_steps ? sc.n_steps : 1);
    index = malloc((size_t)(nn ? nn : 1) * sizeof *index);
    d->compute_units = malloc(cap * sizeof *d->compute_units);
    d->grads = malloc(cap * sizeof *d->grads);
    d->grad_names = malloc(cap * sizeof *d->grad_names);
    d->producer_names = malloc(cap * sizeof *d->producer_names);
    if (!index || !d->compute_units || !d->grads || !d->grad_names || !d->producer_names) {
        fprintf(stderr, "dp_sim: out of memory\n");
        goto done;
    }
    for (int32_t i = 0; i < nn; i++)
        index[i] = -1;
    d->n_nodes = sc.n_steps;
    for (int32_t t = 0; t < sc.n_steps; t++) {
        pbl_node n = sc.order[t];
        pbl_node_info ni;
        if (pbl_graph_node_info(g, n, &ni) != PBL_OK)
            goto done;
        double units = (double)pbl_node_cost(g, n);
        d->total_units += units;
        if (!is_update(g, &ni)) {
            index[n] = d->n_compute;
            d->compute_units[d->n_compute++] = units;
            continue;
        }
        pbl_value_info gi;
        if (pbl_graph_value_info(g, ni.inputs[1], &gi) != PBL_OK)
            goto done;
        if (gi.producer == PBL_NONE || index[gi.producer] < 0) {
            fprintf(stderr, "dp_sim: update %s: its gradient %s is not made by an earlier node\n", ni.name, gi.name);
            goto done;
        }
        pbl_node_info pi;
        pbl_graph_node_info(g, gi.producer, &pi);
        int64_t bytes = pbl_shape_numel(&gi.shape) * (int64_t)pbl_dtype_size(gi.dtype);
        d->grads[d->n_grads] = (dps_grad){ bytes > 0 ? bytes : 1, index[gi.producer], units };
        d->grad_names[d->n_grads] = gi.name;
        d->producer_names[d->n_grads++] = pi.name;
        d->grad_bytes += bytes;
    }
    if (!d->n_grads) {
        fprintf(stderr, "dp_sim: the graph has no optimizer updates (sgd, sgd_momentum, adam): give a training "
                        "graph (a zoo model's _train form)\n");
        goto done;
    }
    rc = 0;
done:
    free(index);
    pbl_schedule_free(&sc);
    if (rc)
        step_free(d);
    return rc;
}

/* ---- calibration: the real step on this machine ------------------------------------------- */

/* With one thread the process CPU clock: on a machine shared with other jobs it leaves out
 * the time the step waited for a core, which wall time would count as compute. */
static clockid_t calib_clock = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(calib_clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds (CPU time with one thread, else wall) per pbl_exec_run of g (every variable bound to small pseudo-random data,
 * labels and integer inputs in 0..9), 5 repetitions of a loop lasting about 0.2 s. */
static double measure_step(const pbl_graph *g, int threads, int *iters_out)
{
    char err[512];
    pbl_exec *e = NULL;
    void **data = calloc((size_t)pbl_graph_value_count(g) + 1, sizeof *data);
    int nd = 0;
    double result = -1;
    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = threads;
    calib_clock = threads == 1 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
    if (!data || pbl_exec_create(&e, g, &eo, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "dp_sim: calibration: %s\n", data ? err : "out of memory");
        goto done;
    }
    uint64_t seed = 1;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) != PBL_OK || vi.kind == PBL_VALUE_NODE || vi.kind == PBL_VALUE_STATE ||
            vi.kind == PBL_VALUE_SCALAR)
            continue;
        int64_t n = pbl_shape_numel(&vi.shape);
        size_t bytes = (size_t)n * pbl_dtype_size(vi.dtype);
        void *p = malloc(bytes ? bytes : 1);
        if (!p)
            goto done;
        data[nd++] = p;
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            if (vi.dtype == PBL_I32)
                ((int32_t *)p)[i] = (int32_t)((seed >> 33) % 10);
            else
                ((float *)p)[i] = ((float)(seed >> 40) / (float)(1 << 24) - 0.5f) * 0.1f;
        }
        if (pbl_exec_bind(e, v, p, bytes) != PBL_OK) {
            fprintf(stderr, "dp_sim: calibration: binding %s: %s\n", vi.name, pbl_exec_errmsg(e));
            goto done;
        }
    }
    /* warm-up, and a loop length of about 0.2 s */
    int iters = 1;
    for (;;) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++)
            if (pbl_exec_run(e) != PBL_OK)
                goto run_failed;
        double dt = now_s() - t0;
        if (dt >= 0.1 || iters >= 1 << 20) {
            iters = dt > 0 ? (int)(iters * 0.2 / dt) : iters;
            break;
        }
        iters *= 2;
    }
    iters = iters < 1 ? 1 : iters;
    double rep[5];
    for (int k = 0; k < 5; k++) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++)
            if (pbl_exec_run(e) != PBL_OK)
                goto run_failed;
        rep[k] = (now_s() - t0) / iters;
    }
    qsort(rep, 5, sizeof rep[0], cmp_double);
    result = rep[2];
    *iters_out = iters;
    goto done;
run_failed:
    fprintf(stderr, "dp_sim: calibration: %s\n", pbl_exec_errmsg(e));
done:
    pbl_exec_destroy(e);
    for (int i = 0; i < nd; i++)
        free(data[i]);
    free(data);
    return result;
}

/* ---- the table --------------------------------------------------------------------------- */

typedef struct config {
    const char *label; /* "no overlap", "per gradient", "no byte limit" or NULL: bucket bytes */
    int64_t     bucket_bytes;
    int         overlap;
} config;

static void config_name(const config *c, char *buf, size_t n)
{
    if (c->label) {
        snprintf(buf, n, "%s", c->label);
        return;
    }
    int64_t b = c->bucket_bytes;
    if (b % (1 << 20) == 0)
        snprintf(buf, n, "%lld MiB", (long long)(b >> 20));
    else if (b % 1024 == 0)
        snprintf(buf, n, "%lld KiB", (long long)(b >> 10));
    else
        snprintf(buf, n, "%lld B", (long long)b);
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    int is_mlp = !strcmp(o.model, "mlp");
    int64_t batch = o.batch >= 0 ? o.batch : is_mlp ? 128 : 0;
    if (is_mlp && batch < 1) {
        fprintf(stderr, "dp_sim: --batch must be at least 1 for the MLP\n");
        return 2;
    }
    pbl_graph *g = load_model(&o, batch);
    if (!g)
        return 1;
    if (batch == 0) /* the model's default: the first input's leading dimension */
        for (pbl_value v = 0; v < pbl_graph_value_count(g) && batch == 0; v++) {
            pbl_value_info vi;
            if (pbl_graph_value_info(g, v, &vi) == PBL_OK && vi.kind == PBL_VALUE_INPUT && vi.shape.ndim > 0)
                batch = vi.shape.dim[0];
        }
    step_desc d;
    if (describe(g, &d) != 0) {
        pbl_graph_destroy(g);
        return 1;
    }
    /* cost units -> seconds */
    double measured = -1, s_per_unit;
    int iters = 0;
    if (o.flops > 0) {
        s_per_unit = 1.0 / o.flops;
    } else {
        measured = measure_step(g, o.threads, &iters);
        if (measured <= 0) {
            step_free(&d);
            pbl_graph_destroy(g);
            return 1;
        }
        s_per_unit = measured / d.total_units;
    }
    double *compute_s = malloc((size_t)(d.n_compute ? d.n_compute : 1) * sizeof *compute_s);
    if (!compute_s) {
        fprintf(stderr, "dp_sim: out of memory\n");
        return 1;
    }
    double fwd_bwd_ms = 0;
    for (int32_t i = 0; i < d.n_compute; i++) {
        compute_s[i] = d.compute_units[i] * s_per_unit;
        fwd_bwd_ms += compute_s[i] * 1e3;
    }
    for (int32_t i = 0; i < d.n_grads; i++)
        d.grads[i].update_s *= s_per_unit;
    dps_step st = { compute_s, d.n_compute, d.grads, d.n_grads };

    config cfg[MAX_LIST + 3];
    int nc = 0;
    cfg[nc++] = (config){ "no overlap", DPS_ONE_BUCKET, 0 };
    cfg[nc++] = (config){ "per gradient", 0, 1 };
    for (int i = 0; i < o.n_buckets; i++)
        cfg[nc++] = (config){ NULL, o.buckets[i], 1 };
    cfg[nc++] = (config){ "no byte limit", DPS_ONE_BUCKET, 1 };

    char model_name[128];
    if (is_mlp) {
        int k = snprintf(model_name, sizeof model_name, "mlp 784");
        for (int i = 0; i < o.n_hidden && k < (int)sizeof model_name; i++)
            k += snprintf(model_name + k, sizeof model_name - (size_t)k, "-%lld", (long long)o.hidden[i]);
        if (k < (int)sizeof model_name)
            snprintf(model_name + k, sizeof model_name - (size_t)k, "-10 adam");
    } else {
        snprintf(model_name, sizeof model_name, "%s", o.model);
    }
    const char *algo = o.algo == DPS_RING ? "ring" : o.algo == DPS_RD ? "rd" : o.algo == DPS_RH ? "rh" : "best";
    int custom = o.alpha >= 0 || o.beta >= 0;
    int n_links = custom ? 1 : o.n_links;

    if (o.json) {
        printf("{\"model\": \"%s\", \"batch_per_rank\": %lld, \"nodes\": %d, \"gradients\": %d, "
               "\"gradient_bytes\": %lld, \"cost_units\": %.0f, \"max_grads\": %d, ",
               model_name, (long long)batch, (int)d.n_nodes, (int)d.n_grads, (long long)d.grad_bytes, d.total_units,
               (int)o.max_grads);
        if (measured > 0)
            printf("\"rate\": {\"source\": \"calibrated\", \"threads\": %d, \"clock\": \"%s\", "
                   "\"measured_step_ms\": %.4f, \"iters\": %d, \"s_per_unit\": %.6g}, ",
                   o.threads, o.threads == 1 ? "cpu" : "wall", measured * 1e3, iters, s_per_unit);
        else
            printf("\"rate\": {\"source\": \"flops\", \"flops\": %.6g, \"s_per_unit\": %.6g}, ", o.flops, s_per_unit);
        printf("\"forward_backward_ms\": %.4f, \"algo\": \"%s\", \"links\": [", fwd_bwd_ms, algo);
    } else {
        printf("model %s, batch %lld per rank: %d nodes, %d gradients, %.3f MiB of gradients\n", model_name,
               (long long)batch, (int)d.n_nodes, (int)d.n_grads, (double)d.grad_bytes / (1 << 20));
        if (measured > 0)
            printf("compute rate: calibrated: measured step %.3f ms (pebble executor, %d thread%s, %s time, median "
                   "of 5 x %d steps) / %.4g cost units = %.4g ns per unit\n",
                   measured * 1e3, o.threads, o.threads == 1 ? "" : "s", o.threads == 1 ? "CPU" : "wall", iters,
                   d.total_units, s_per_unit * 1e9);
        else
            printf("compute rate: --flops %.4g: %.4g ns per cost unit\n", o.flops, s_per_unit * 1e9);
        printf("forward+backward %.3f ms, updates %.3f ms; all-reduce: %s; at most %d gradients a bucket%s\n",
               fwd_bwd_ms, (d.total_units * s_per_unit * 1e3) - fwd_bwd_ms, algo, (int)o.max_grads,
               o.max_grads ? "" : " (0: no limit)");
    }
    if (o.list && !o.json) {
        printf("\ngradients in finishing order (the bucketing order; node: its producer's place among the\n"
               "non-update nodes in schedule order):\n%-28s %-28s %6s %12s %10s\n", "gradient", "made by", "node",
               "bytes", "ready ms");
        int32_t *order = malloc((size_t)d.n_grads * sizeof *order), *bk = malloc((size_t)d.n_grads * sizeof *bk);
        if (order && bk && dps_buckets(d.grads, d.n_grads, 0, 0, order, bk) >= 0)
            for (int32_t i = 0; i < d.n_grads; i++) {
                const dps_grad *gr = &d.grads[order[i]];
                double t = 0;
                for (int32_t k = 0; k <= gr->ready; k++)
                    t += compute_s[k];
                printf("%-28s %-28s %6d %12lld %10.4f\n", d.grad_names[order[i]], d.producer_names[order[i]],
                       (int)gr->ready, (long long)gr->bytes, t * 1e3);
            }
        free(order);
        free(bk);
    }
    int rc = 0;
    for (int li = 0; li < n_links; li++) {
        const preset *p = &presets[o.link[li]];
        dps_link l = { o.alpha >= 0 ? o.alpha : p->alpha, o.beta >= 0 ? o.beta : p->beta, o.algo };
        const char *lname = custom ? "custom" : p->name;
        if (o.json) {
            printf("%s{\"link\": \"%s\", \"alpha_s\": %.6g, \"beta_bytes_per_s\": %.6g, \"rows\": [", li ? ", " : "",
                   lname, l.alpha, l.beta);
        } else {
            printf("\nlink %s (%s): alpha %.3g us, beta %.4g GB/s\n", lname, custom ? "--alpha/--beta" : p->what,
                   l.alpha * 1e6, l.beta * 1e-9);
            printf("%6s  %-13s %7s %10s %10s %10s %10s %7s %6s\n", "ranks", "buckets", "count", "largest", "comm ms",
                   "step ms", "exposed ms", "hidden", "eff");
        }
        int first_row = 1;
        char picks[MAX_LIST][32];
        double pick_ms[MAX_LIST];
        for (int ri = 0; ri < o.n_ranks; ri++) {
            int64_t n = o.ranks[ri];
            double best = -1;
            for (int c = 0; c < nc; c++) {
                dps_result r;
                if (dps_simulate(&st, &l, n, cfg[c].bucket_bytes, cfg[c].overlap ? o.max_grads : 0, cfg[c].overlap, &r) != 0) {
                    fprintf(stderr, "dp_sim: simulation failed\n");
                    rc = 1;
                    continue;
                }
                char name[32];
                config_name(&cfg[c], name, sizeof name);
                /* the pick: the shortest overlapped step; on a tie the larger bucket (fewer calls) */
                if (cfg[c].overlap && (best < 0 || r.step_s <= best * (1 + 1e-9))) {
                    best = r.step_s;
                    snprintf(picks[ri], sizeof picks[ri], "%s", name);
                    pick_ms[ri] = r.step_s * 1e3;
                }
                if (n == 1 && c > 0) /* one rank: no communication, every row the same */
                    continue;
                if (o.json) {
                    printf("%s{\"ranks\": %lld, \"buckets\": \"%s\", \"overlap\": %d, \"bucket_bytes\": %lld, "
                           "\"count\": %d, \"largest_bytes\": %lld, \"comm_ms\": %.9g, \"step_ms\": %.9g, "
                           "\"exposed_ms\": %.9g, \"hidden\": ",
                           first_row ? "" : ", ", (long long)n, n == 1 ? "-" : name, cfg[c].overlap,
                           cfg[c].bucket_bytes == DPS_ONE_BUCKET ? -1LL : (long long)cfg[c].bucket_bytes,
                           (int)r.n_buckets, (long long)r.max_bucket_bytes, r.comm_s * 1e3, r.step_s * 1e3,
                           r.exposed_s * 1e3);
                    if (r.hidden < 0)
                        printf("null");
                    else
                        printf("%.4f", r.hidden);
                    printf(", \"efficiency\": %.4f}", r.compute_s / r.step_s);
                    first_row = 0;
                } else {
                    char hid[16];
                    if (r.hidden < 0)
                        snprintf(hid, sizeof hid, "-");
                    else
                        snprintf(hid, sizeof hid, "%.1f%%", r.hidden * 100);
                    printf("%6lld  %-13s %7d %10lld %10.3f %10.3f %10.3f %7s %5.1f%%\n", (long long)n,
                           n == 1 ? "-" : name, (int)r.n_buckets, (long long)r.max_bucket_bytes, r.comm_s * 1e3,
                           r.step_s * 1e3, r.exposed_s * 1e3, hid, 100 * r.compute_s / r.step_s);
                }
            }
        }
        if (o.json) {
            printf("], \"picks\": [");
            for (int ri = 0; ri < o.n_ranks; ri++)
                printf("%s{\"ranks\": %lld, \"buckets\": \"%s\", \"step_ms\": %.9g}", ri ? ", " : "",
                       (long long)o.ranks[ri], o.ranks[ri] == 1 ? "-" : picks[ri], pick_ms[ri]);
            printf("]}");
        } else {
            printf("pick:");
            for (int ri = 0, k = 0; ri < o.n_ranks; ri++)
                if (o.ranks[ri] > 1)
                    printf("%s %lld ranks: %s (%.3f ms)", k++ ? ";" : "", (long long)o.ranks[ri], picks[ri],
                           pick_ms[ri]);
            printf("\n");
        }
    }
    if (o.json)
        printf("]}\n");
    free(compute_s);
    step_free(&d);
    pbl_graph_destroy(g);
    return rc;
}
