/*
 * bench/mlp_step.c — one MLP training step through pebble, against its matrix products alone.
 *
 * Builds the step exactly as a user would (public API only):
 *
 *     x [B,784] f32, y [B] i32
 *     h1 = relu(fully_connected(x, w1, b1))          784 -> 256
 *     h2 = relu(fully_connected(h1, w2, b2))         256 -> 128
 *     logits = fully_connected(h2, w3, b3)           128 -> 10
 *     loss = softmax_cross_entropy(logits, y)
 *     pbl_graph_gradient(loss, {w1, b1, w2, b2, w3, b3})
 *     pbl_graph_add_optimizer(...)  as --recipe says:
 *       train_mlp (the default): what examples/train_mlp trains with by default — AdamW
 *                 (weight decay 0.01), gradients clipped to global norm 1, and the learning
 *                 rate a runtime scalar "lr" set before every step from a cosine schedule
 *                 with 500 linear warm-up steps (peak 0.002) over 10 epochs of 430 steps
 *       adam:     plain Adam, lr 1e-3 as a constant (the recipe of earlier measurements)
 *       train_mlp_const: train_mlp's graph with its lr an attribute (0.002) instead of a
 *                 runtime scalar, and nothing set between steps: against train_mlp, what
 *                 the runtime scalar costs
 *
 * and times
 *   (a) pbl_exec_run of the whole step (forward, backward, clipping, update), with the
 *       pbl_exec_set_scalar of the step's learning rate when the recipe has one. Each step
 *       first writes a fresh batch (cycling through a pre-generated pool) with pbl_exec_write;
 *       the write is timed separately and is NOT part of the step time.
 *   (b) the same cblas_sgemm calls alone: the list of products is derived from the graph
 *       (every fully_connected and matmul node, forward and backward, in node order) and run
 *       on buffers of the same sizes, on OpenBLAS's --threads threads and, with more than
 *       one thread, also split over that many spinning threads as the executor splits them
 *       (each part a single-threaded sgemm). step/sgemm is the step against the faster of
 *       the two: its products alone, however they run best.
 *
 * Each timed loop runs --iters steps; it is repeated --reps times (step and sgemm loops
 * interleaved) and the median repetition is reported.
 *
 *     mlp_step [--batch 128] [--hidden 256,128] [--threads 1] [--streams 0] [--blas-threads 0] [--warmup 10]
 *              [--iters N] [--reps 5] [--recipe train_mlp|adam|train_mlp_const] [--format table|json]
 *              [--list] [--step-only]
 *
 * --streams goes into pbl_exec_options.streams (0: the backend's default, one stream on the
 * CPU). With several streams the executor runs BLAS single-threaded (pebble/exec.h), so the
 * sgemm-alone row, which keeps --threads, is then no longer the same work on the same cores.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "pebble/pebble.h"

#define IN_FEATURES 784
#define N_CLASSES   10
#define MAX_HIDDEN  8
#define POOL        4    /* distinct input batches cycled through */
#define TARGET_REP_S 0.5 /* default --iters aims at this much step time per repetition */

/* The train_mlp recipe (examples/train_mlp_args.c's defaults); bench/mlp_torch.py has the same. */
#define RECIPE_LR           0.002
#define RECIPE_WEIGHT_DECAY 0.01
#define RECIPE_CLIP         1.0
#define RECIPE_WARMUP       500
#define RECIPE_STEPS        4300 /* 10 epochs of 430 steps of 128 (55,000 examples) */

typedef struct options {
    int64_t batch;
    int64_t hidden[MAX_HIDDEN];
    int     n_hidden;
    int     threads;
    int     streams; /* pbl_exec_options.streams; 0: the backend's default */
    int     blas_threads; /* pbl_exec_options.blas_threads; 0: the default */
    int     warmup;
    int     iters; /* 0: calibrate */
    int     reps;
    int     json;
    int     list;
    int     step_only; /* skip the sgemm-alone loop (for profiling the step) */
    int     plain_adam; /* --recipe adam; 0: train_mlp */
    int     const_lr;   /* --recipe train_mlp_const: train_mlp with lr an attribute */
} options;

/* One matrix product as cblas_sgemm sees it (row-major): C[M,N] = op(A)·op(B). */
typedef struct gemm {
    const char *node; /* node name */
    const char *op;
    int         backward;
    int         trans_a, trans_b;
    int64_t     m, n, k;
    int64_t     batch; /* matmul over leading dims: that many products */
    float      *a, *b, *c;
} gemm;

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float rng_uniform(rng *r)
{
    return (float)((double)(rng_next(r) >> 40) / (double)(1ull << 23) - 1.0);
}

static void fill_uniform(rng *r, float *p, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = scale * rng_uniform(r);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "mlp_step: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static const char *recipe_name(const options *o)
{
    return o->plain_adam ? "adam" : o->const_lr ? "train_mlp_const" : "train_mlp";
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mlp_step [--batch B] [--hidden H1,H2,...] [--threads T] [--streams S] [--blas-threads N]\n"
            "                [--warmup N] [--iters N] [--reps R] [--format table|json] [--list]\n"
            "                [--recipe train_mlp|adam|train_mlp_const] [--step-only]\n"
            "  --batch    batch size (default 128)\n"
            "  --hidden   hidden layer widths (default 256,128); input 784, output 10\n"
            "  --threads  BLAS threads for pebble (pbl_exec_options.threads) and for the\n"
            "             sgemm-alone loop (openblas_set_num_threads) (default 1)\n"
            "  --streams  pbl_exec_options.streams (default 0: the backend's default, 1 on\n"
            "             the CPU); above 1 the executor runs BLAS single-threaded\n"
            "  --blas-threads  pbl_exec_options.blas_threads for the step (default 0: with\n"
            "             --threads above 1, products split over pebble's threads; T: each\n"
            "             product whole on OpenBLAS's T threads); the sgemm-alone loop\n"
            "             always runs OpenBLAS on --threads threads\n"
            "  --warmup   untimed steps before timing (default 10)\n"
            "  --iters    steps per timed repetition (default: about %.1f s of steps)\n"
            "  --reps     timed repetitions; the median is reported (default 5)\n"
            "  --recipe   train_mlp (default): AdamW (weight decay 0.01), clipping to global\n"
            "             norm 1, a runtime lr set every step (cosine, 500 warm-up steps);\n"
            "             adam: plain Adam, lr 1e-3, no clipping;\n"
            "             train_mlp_const: train_mlp with the lr a constant (0.002)\n"
            "  --format   table (default) or json (one object)\n"
            "  --list     also print the graph's matrix products, each timed alone\n"
            "             (to stderr with --format json)\n"
            "  --step-only  time the step only, not the sgemm calls alone (for profilers)\n",
            TARGET_REP_S);
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "mlp_step: %s: expected an integer in [%ld, %ld], got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_hidden(const char *s, options *o)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    o->n_hidden = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long v;
        if (o->n_hidden == MAX_HIDDEN || parse_int("--hidden", tok, 1, 1 << 20, &v))
            return -1;
        o->hidden[o->n_hidden++] = v;
    }
    return o->n_hidden ? 0 : -1;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){ .batch = 128, .hidden = { 256, 128 }, .n_hidden = 2, .threads = 1,
                    .warmup = 10, .iters = 0, .reps = 5 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--list")) {
            o->list = 1;
            continue;
        }
        if (!strcmp(a, "--step-only")) {
            o->step_only = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mlp_step: unknown flag or missing value: %s\n", a);
            return -1;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--batch")) {
            if (parse_int(a, val, 1, 1 << 24, &v))
                return -1;
            o->batch = v;
        } else if (!strcmp(a, "--hidden")) {
            if (parse_hidden(val, o)) {
                fprintf(stderr, "mlp_step: --hidden: expected up to %d widths like 256,128\n",
                        MAX_HIDDEN);
                return -1;
            }
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, val, 1, 1024, &v))
                return -1;
            o->threads = (int)v;
        } else if (!strcmp(a, "--blas-threads")) {
            if (parse_int(a, val, 0, 1024, &v))
                return -1;
            o->blas_threads = (int)v;
        } else if (!strcmp(a, "--streams")) {
            if (parse_int(a, val, 0, PBL_MAX_STREAMS, &v))
                return -1;
            o->streams = (int)v;
        } else if (!strcmp(a, "--warmup")) {
            if (parse_int(a, val, 0, 1 << 30, &v))
                return -1;
            o->warmup = (int)v;
        } else if (!strcmp(a, "--iters")) {
            if (parse_int(a, val, 1, 1 << 30, &v))
                return -1;
            o->iters = (int)v;
        } else if (!strcmp(a, "--reps")) {
            if (parse_int(a, val, 1, 1000, &v))
                return -1;
            o->reps = (int)v;
        } else if (!strcmp(a, "--recipe")) {
            o->plain_adam = !strcmp(val, "adam");
            o->const_lr = !strcmp(val, "train_mlp_const");
            if (!o->plain_adam && !o->const_lr && strcmp(val, "train_mlp") != 0) {
                fprintf(stderr, "mlp_step: --recipe: train_mlp, adam or train_mlp_const, got '%s'\n", val);
                return -1;
            }
        } else if (!strcmp(a, "--format")) {
            if (!strcmp(val, "json"))
                o->json = 1;
            else if (!strcmp(val, "table"))
                o->json = 0;
            else {
                fprintf(stderr, "mlp_step: --format: table or json, got '%s'\n", val);
                return -1;
            }
        } else {
            fprintf(stderr, "mlp_step: unknown flag: %s\n", a);
            return -1;
        }
    }
    return 0;
}

/* ---- the model ------------------------------------------------------------------------ */

typedef struct model {
    pbl_graph *g;
    pbl_value  x, y, loss;
    pbl_value  params[2 * (MAX_HIDDEN + 1)];
    int        n_params;
    float     *param_data[2 * (MAX_HIDDEN + 1)];
    size_t     param_bytes[2 * (MAX_HIDDEN + 1)];
} model;

static int fail_graph(const model *m, const char *what, pbl_status s)
{
    fprintf(stderr, "mlp_step: %s: %s: %s\n", what, pbl_status_str(s), pbl_graph_errmsg(m->g));
    return -1;
}

static int build_model(model *m, const options *o, rng *r)
{
    pbl_status s = pbl_graph_create(&m->g, NULL);
    if (s != PBL_OK) {
        fprintf(stderr, "mlp_step: pbl_graph_create: %s\n", pbl_status_str(s));
        return -1;
    }
    m->x = pbl_input(m->g, "x", PBL_SHAPE(o->batch, IN_FEATURES));
    m->y = pbl_label(m->g, "y", PBL_I32, PBL_SHAPE(o->batch));
    pbl_value h = m->x;
    int64_t in = IN_FEATURES;
    m->n_params = 0;
    for (int l = 0; l <= o->n_hidden; l++) {
        int64_t out = l < o->n_hidden ? o->hidden[l] : N_CLASSES;
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "w%d", l + 1);
        snprintf(bn, sizeof bn, "b%d", l + 1);
        pbl_value w = pbl_param(m->g, wn, PBL_SHAPE(out, in));
        pbl_value b = pbl_param(m->g, bn, PBL_SHAPE(out));
        h = pbl_fully_connected(m->g, h, w, b);
        if (l < o->n_hidden)
            h = pbl_relu(m->g, h);
        /* PyTorch nn.Linear's default init: U(-1/sqrt(in), 1/sqrt(in)) for w and b */
        float bound = (float)(1.0 / sqrt((double)in));
        int pw = m->n_params++, pb = m->n_params++;
        m->params[pw] = w;
        m->params[pb] = b;
        m->param_bytes[pw] = (size_t)(out * in) * sizeof(float);
        m->param_bytes[pb] = (size_t)out * sizeof(float);
        m->param_data[pw] = xmalloc(m->param_bytes[pw]);
        m->param_data[pb] = xmalloc(m->param_bytes[pb]);
        fill_uniform(r, m->param_data[pw], out * in, bound);
        fill_uniform(r, m->param_data[pb], out, bound);
        in = out;
    }
    m->loss = pbl_softmax_cross_entropy(m->g, h, m->y);
    if ((s = pbl_graph_build_status(m->g)) != PBL_OK)
        return fail_graph(m, "building the forward graph", s);
    if ((s = pbl_graph_set_output(m->g, "loss", m->loss)) != PBL_OK)
        return fail_graph(m, "pbl_graph_set_output", s);

    pbl_value grads[2 * (MAX_HIDDEN + 1)];
    if ((s = pbl_graph_gradient(m->g, m->loss, m->params, m->n_params, grads)) != PBL_OK)
        return fail_graph(m, "pbl_graph_gradient", s);
    for (int i = 0; i < m->n_params; i++)
        if (grads[i] == PBL_NONE) {
            fprintf(stderr, "mlp_step: parameter %d has no gradient\n", i);
            return -1;
        }
    pbl_optimizer_options opt = pbl_optimizer_options_default(o->plain_adam ? PBL_OPTIM_ADAM : PBL_OPTIM_ADAMW);
    opt.lr = 1e-3;
    if (!o->plain_adam) {
        opt.lr = RECIPE_LR;
        opt.weight_decay = RECIPE_WEIGHT_DECAY;
        opt.clip_norm = RECIPE_CLIP;
        opt.lr_scalar = o->const_lr ? NULL : "lr";
    }
    if ((s = pbl_graph_add_optimizer(m->g, &opt, m->params, grads, m->n_params)) != PBL_OK)
        return fail_graph(m, "pbl_graph_add_optimizer", s);
    return 0;
}

static void destroy_model(model *m)
{
    for (int i = 0; i < m->n_params; i++)
        free(m->param_data[i]);
    pbl_graph_destroy(m->g);
}

/* ---- the matrix products of the graph --------------------------------------------------- */

static int value_shape(const pbl_graph *g, pbl_value v, pbl_shape *out)
{
    pbl_value_info vi;
    if (pbl_graph_value_info(g, v, &vi) != PBL_OK)
        return -1;
    *out = vi.shape;
    return 0;
}

static int64_t leading_numel(const pbl_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i + 2 < s->ndim; i++)
        n *= s->dim[i];
    return n;
}

/* Appends one gemm per fully_connected or matmul node, in node order (the order the builder
 * and the gradient pass created them, a topological order). Returns the count or -1. */
static int collect_gemms(const pbl_graph *g, gemm **out)
{
    int32_t nn = pbl_graph_node_count(g);
    gemm *list = xmalloc((size_t)(nn > 0 ? nn : 1) * sizeof *list);
    int n = 0;
    pbl_node i;
    for (i = 0; i < nn; i++) {
        pbl_node_info ni;
        if (pbl_graph_node_info(g, i, &ni) != PBL_OK)
            goto fail;
        gemm e = { .node = ni.name, .op = ni.op, .backward = ni.is_backward, .batch = 1 };
        pbl_shape a, b;
        if (!strcmp(ni.op, "fully_connected")) {
            /* x[N,in] · w[out,in]ᵀ  ->  y[N,out] */
            if (ni.n_inputs < 2 || value_shape(g, ni.inputs[0], &a) ||
                value_shape(g, ni.inputs[1], &b) || a.ndim < 1 || b.ndim != 2)
                goto fail;
            e.trans_b = 1;
            e.k = a.dim[a.ndim - 1];
            e.m = pbl_shape_numel(&a) / e.k;
            e.n = b.dim[0];
        } else if (!strcmp(ni.op, "matmul")) {
            /* op(a)[...,m,k] · op(b)[...,k,n]  ->  c[...,m,n] */
            int64_t ta = 0, tb = 0;
            pbl_shape c;
            if (ni.n_inputs < 2 || ni.n_outputs < 1 || value_shape(g, ni.inputs[0], &a) ||
                value_shape(g, ni.inputs[1], &b) || value_shape(g, ni.outputs[0], &c) ||
                a.ndim < 2 || b.ndim < 2 || c.ndim < 2 ||
                pbl_graph_node_attr_int(g, i, "trans_a", &ta) != PBL_OK ||
                pbl_graph_node_attr_int(g, i, "trans_b", &tb) != PBL_OK)
                goto fail;
            e.trans_a = ta != 0;
            e.trans_b = tb != 0;
            e.m = a.dim[a.ndim - (e.trans_a ? 1 : 2)];
            e.k = a.dim[a.ndim - (e.trans_a ? 2 : 1)];
            e.n = b.dim[b.ndim - (e.trans_b ? 2 : 1)];
            e.batch = leading_numel(&c);
        } else {
            continue;
        }
        list[n++] = e;
    }
    *out = list;
    return n;
fail:
    fprintf(stderr, "mlp_step: could not read the shapes of node %d\n", (int)i);
    free(list);
    return -1;
}

static void gemm_alloc(gemm *list, int n, rng *r)
{
    for (int i = 0; i < n; i++) {
        gemm *e = &list[i];
        int64_t na = e->batch * e->m * e->k, nb = e->batch * e->k * e->n,
                nc = e->batch * e->m * e->n;
        e->a = xmalloc((size_t)na * sizeof(float));
        e->b = xmalloc((size_t)nb * sizeof(float));
        e->c = xmalloc((size_t)nc * sizeof(float));
        fill_uniform(r, e->a, na, 1.0f);
        fill_uniform(r, e->b, nb, 1.0f);
        memset(e->c, 0, (size_t)nc * sizeof(float));
    }
}

static void gemm_free(gemm *list, int n)
{
    for (int i = 0; i < n; i++) {
        free(list[i].a);
        free(list[i].b);
        free(list[i].c);
    }
    free(list);
}

static void gemm_run(const gemm *list, int n)
{
    for (int i = 0; i < n; i++) {
        const gemm *e = &list[i];
        int lda = (int)(e->trans_a ? e->m : e->k); /* A stored [m,k] or, transposed, [k,m] */
        int ldb = (int)(e->trans_b ? e->k : e->n); /* B stored [k,n] or, transposed, [n,k] */
        for (int64_t j = 0; j < e->batch; j++)
            cblas_sgemm(CblasRowMajor, e->trans_a ? CblasTrans : CblasNoTrans,
                        e->trans_b ? CblasTrans : CblasNoTrans, (int)e->m, (int)e->n, (int)e->k,
                        1.0f, e->a + j * e->m * e->k, lda, e->b + j * e->k * e->n, ldb, 0.0f,
                        e->c + j * e->m * e->n, (int)e->n);
    }
}

static double gemm_flops(const gemm *list, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++)
        f += 2.0 * (double)list[i].batch * (double)list[i].m * (double)list[i].n *
             (double)list[i].k;
    return f;
}

static void set_blas_threads(int t)
{
#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
    openblas_set_num_threads(t);
#else
    (void)t;
#endif
}

static const char *blas_core(void)
{
#ifdef PEBBLE_HAVE_OPENBLAS_THREADS
    return openblas_get_corename();
#else
    return "unknown";
#endif
}

/* Prints "key": v then `after`; null for NaN or infinity, which JSON has no words for. */
static void json_num(const char *key, double v, const char *after)
{
    if (isfinite(v))
        printf("\"%s\": %.6g%s", key, v, after);
    else
        printf("\"%s\": null%s", key, after);
}

/* ---- timing ------------------------------------------------------------------------------ */

typedef struct batch_pool {
    float   *x[POOL];
    int32_t *y[POOL];
    size_t   x_bytes, y_bytes;
} batch_pool;

typedef struct step_ctx {
    pbl_exec   *e;
    const model *m;
    batch_pool *pool;
    int         next;
    const pbl_lr_schedule *sched; /* NULL: no runtime learning rate */
    int64_t     step;             /* the schedule's step, counted over every run */
} step_ctx;

/* Runs `iters` steps; returns the seconds spent in pbl_exec_run and adds the seconds spent
 * writing the inputs to *write_s. Returns a negative number on error. */
static double run_steps(step_ctx *c, int iters, double *write_s)
{
    double run = 0, wr = 0;
    for (int i = 0; i < iters; i++) {
        int p = c->next;
        c->next = (c->next + 1) % POOL;
        double t0 = now_s();
        pbl_status s = pbl_exec_write(c->e, c->m->x, c->pool->x[p], c->pool->x_bytes);
        if (s == PBL_OK)
            s = pbl_exec_write(c->e, c->m->y, c->pool->y[p], c->pool->y_bytes);
        double t1 = now_s();
        if (s == PBL_OK && c->sched) /* part of the step, as in a training loop */
            s = pbl_exec_set_scalar(c->e, "lr", pbl_lr_schedule_at(c->sched, c->step++ % RECIPE_STEPS));
        if (s == PBL_OK)
            s = pbl_exec_run(c->e);
        double t2 = now_s();
        if (s != PBL_OK) {
            fprintf(stderr, "mlp_step: step: %s: %s\n", pbl_status_str(s), pbl_exec_errmsg(c->e));
            return -1;
        }
        wr += t1 - t0;
        run += t2 - t1;
    }
    if (write_s)
        *write_s += wr;
    return run;
}

static double run_gemms(const gemm *list, int n, int iters)
{
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        gemm_run(list, n);
    return now_s() - t0;
}

/* ---- the products alone, split as the executor splits them ----------------------------
 *
 * With threads > 1 and blas_threads 0 the executor splits each large product along the rows
 * of its result (its columns when there are fewer than 64 rows) into at most `threads` parts,
 * multiples of 16 rows or columns and at least 32 wide, each one single-threaded sgemm
 * (ops/cpu/linear.c). The step's products are then not OpenBLAS's threaded ones, so the
 * baseline the step is held against is the faster of the two ways to run them alone: this
 * split, on threads that spin between products (the quickest hand-off there is: a fair
 * baseline, not a slowed one), or OpenBLAS's own threading (run_gemms). */
/* A polite spin: on x86 the pause instruction leaves the core's resources to a sibling. */
static inline void spin_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

enum { TEAM_MAX = 64, SPLIT_MIN_SIDE = 32, SPLIT_ALIGN = 16, SPLIT_MADDS = 1 << 20 };

typedef struct team {
    int           n; /* threads, the caller's included */
    pthread_t     worker[TEAM_MAX];
    atomic_uint   gen;     /* bumped for every part-set handed out */
    atomic_int    pending; /* workers not yet done with the current one */
    atomic_int    quit;
    const gemm   *g;       /* the product and the matrix of its batch */
    int64_t       j;
    int           parts, by_cols;
    int64_t       chunk;
} team;

typedef struct team_arg {
    team *t;
    int   id;
} team_arg;

static void split_part(const team *t, int p)
{
    const gemm *e = t->g;
    int64_t side = t->by_cols ? e->n : e->m, lo = (int64_t)p * t->chunk, hi = lo + t->chunk;
    if (hi > side)
        hi = side;
    if (lo >= hi)
        return;
    int lda = (int)(e->trans_a ? e->m : e->k), ldb = (int)(e->trans_b ? e->k : e->n);
    int rows = t->by_cols ? (int)e->m : (int)(hi - lo), cols = t->by_cols ? (int)(hi - lo) : (int)e->n;
    int64_t r0 = t->by_cols ? 0 : lo, c0 = t->by_cols ? lo : 0;
    const float *a = e->a + t->j * e->m * e->k + (e->trans_a ? r0 : r0 * lda);
    const float *b = e->b + t->j * e->k * e->n + (e->trans_b ? c0 * ldb : c0);
    float *c = e->c + t->j * e->m * e->n + r0 * e->n + c0;
    cblas_sgemm(CblasRowMajor, e->trans_a ? CblasTrans : CblasNoTrans, e->trans_b ? CblasTrans : CblasNoTrans, rows,
                cols, (int)e->k, 1.0f, a, lda, b, ldb, 0.0f, c, (int)e->n);
}

static void *team_worker(void *arg)
{
    team_arg *ta = arg;
    team *t = ta->t;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        while ((g = atomic_load_explicit(&t->gen, memory_order_acquire)) == seen)
            if (atomic_load_explicit(&t->quit, memory_order_relaxed))
                return NULL;
            else
                spin_relax();
        seen = g;
        if (ta->id < t->parts)
            split_part(t, ta->id);
        atomic_fetch_sub_explicit(&t->pending, 1, memory_order_release);
    }
}

/* One product (matrix j of its batch): whole when small, as the executor leaves it, else its
 * parts over the team, part 0 on the calling thread. */
static void team_product(team *t, const gemm *e, int64_t j)
{
    int64_t work = e->m * e->n * e->k, parts = work / SPLIT_MADDS;
    int by_cols = e->m / SPLIT_MIN_SIDE < 2;
    int64_t side = by_cols ? e->n : e->m;
    if (parts > t->n)
        parts = t->n;
    if (parts > side / SPLIT_MIN_SIDE)
        parts = side / SPLIT_MIN_SIDE;
    t->g = e;
    t->j = j;
    t->by_cols = by_cols;
    t->parts = parts >= 2 ? (int)parts : 1;
    t->chunk = t->parts == 1 ? side : ((side + t->parts - 1) / t->parts + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
    if (t->parts == 1) {
        split_part(t, 0);
        return;
    }
    atomic_store_explicit(&t->pending, t->n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
    split_part(t, 0);
    while (atomic_load_explicit(&t->pending, memory_order_acquire) > 0)
        spin_relax();
}

/* `iters` rounds of every product split over `threads` threads (OpenBLAS held at one), timed
 * from the first to the last with the workers already spinning; -1 when a thread cannot start. */
static double run_gemms_split(const gemm *list, int n, int iters, int threads)
{
    team t = { .n = threads < TEAM_MAX ? threads : TEAM_MAX };
    team_arg args[TEAM_MAX];
    int started = 0;
    for (int w = 1; w < t.n; w++) {
        args[w] = (team_arg){ &t, w };
        if (pthread_create(&t.worker[w], NULL, team_worker, &args[w]) != 0)
            break;
        started++;
    }
    double took = -1;
    if (started == t.n - 1) {
        set_blas_threads(1);
        double t0 = now_s();
        for (int i = 0; i < iters; i++)
            for (int g = 0; g < n; g++)
                for (int64_t j = 0; j < list[g].batch; j++)
                    team_product(&t, &list[g], j);
        took = now_s() - t0;
    }
    atomic_store(&t.quit, 1);
    for (int w = 1; w <= started; w++)
        pthread_join(t.worker[w], NULL);
    return took;
}

/* The products one by one, each timed alone: `iters` calls, median of `reps`. */
static void print_gemms(FILE *f, const gemm *list, int n, int iters, int reps)
{
    double *t = xmalloc((size_t)reps * sizeof *t);
    fprintf(f, "matrix products (node order): C[M,N] = op(A)[M,K] . op(B)[K,N], each timed "
               "alone\n");
    fprintf(f, "  %-24s %-16s %-4s %6s %6s %6s %5s %2s %2s %10s %9s\n", "node", "op", "bwd", "M",
            "N", "K", "batch", "tA", "tB", "us/call", "GFLOP/s");
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < reps; r++)
            t[r] = run_gemms(&list[i], 1, iters) / iters;
        double per = median(t, reps);
        fprintf(f, "  %-24s %-16s %-4s %6lld %6lld %6lld %5lld %2d %2d %10.2f %9.2f\n",
                list[i].node, list[i].op, list[i].backward ? "yes" : "no", (long long)list[i].m,
                (long long)list[i].n, (long long)list[i].k, (long long)list[i].batch,
                list[i].trans_a, list[i].trans_b, 1e6 * per,
                gemm_flops(&list[i], 1) * 1e-9 / per);
    }
    free(t);
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    rng r = { 0x5eed };
    model m = { 0 };
    int rc = 1;
    pbl_exec *e = NULL;
    gemm *gemms = NULL;
    int n_gemms = 0;
    batch_pool pool = { 0 };

    if (build_model(&m, &o, &r))
        goto out;

    /* inputs: a pool of random batches, written one per step */
    pool.x_bytes = (size_t)(o.batch * IN_FEATURES) * sizeof(float);
    pool.y_bytes = (size_t)o.batch * sizeof(int32_t);
    for (int p = 0; p < POOL; p++) {
        pool.x[p] = xmalloc(pool.x_bytes);
        pool.y[p] = xmalloc(pool.y_bytes);
        fill_uniform(&r, pool.x[p], o.batch * IN_FEATURES, 1.0f);
        for (int64_t i = 0; i < o.batch; i++)
            pool.y[p][i] = (int32_t)(rng_next(&r) % N_CLASSES);
    }

    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = o.threads;
    eo.streams = o.streams;
    eo.blas_threads = o.blas_threads;
    char err[512] = "";
    pbl_status s = pbl_exec_create(&e, m.g, &eo, err, sizeof err);
    if (s != PBL_OK) {
        fprintf(stderr, "mlp_step: pbl_exec_create: %s: %s\n", pbl_status_str(s), err);
        goto out;
    }
    for (int i = 0; i < m.n_params; i++) {
        s = pbl_exec_bind(e, m.params[i], m.param_data[i], m.param_bytes[i]);
        if (s != PBL_OK) {
            fprintf(stderr, "mlp_step: pbl_exec_bind: %s: %s\n", pbl_status_str(s),
                    pbl_exec_errmsg(e));
            goto out;
        }
    }

    n_gemms = collect_gemms(m.g, &gemms);
    if (n_gemms < 0)
        goto out;
    gemm_alloc(gemms, n_gemms, &r);

    pbl_lr_schedule sched = pbl_lr_schedule_default(PBL_LR_COSINE, RECIPE_LR);
    sched.warmup_steps = RECIPE_WARMUP;
    sched.total_steps = RECIPE_STEPS;
    step_ctx ctx = { .e = e, .m = &m, .pool = &pool, .sched = o.plain_adam || o.const_lr ? NULL : &sched };

    /* warm up both; then, when --iters is not given, calibrate it on the step: double a
     * short run until it lasts 0.1 s */
    set_blas_threads(o.threads);
    if (run_steps(&ctx, o.warmup, NULL) < 0)
        goto out;
    if (!o.step_only)
        run_gemms(gemms, n_gemms, o.warmup);
    int iters = o.iters;
    if (iters == 0) {
        int n = 1;
        double t;
        for (;;) {
            if ((t = run_steps(&ctx, n, NULL)) < 0)
                goto out;
            if (t >= 0.1 || n >= 1 << 20)
                break;
            n *= 2;
        }
        double per = t / n;
        iters = per > 0 ? (int)(TARGET_REP_S / per) : 1000;
        if (iters < 10)
            iters = 10;
        if (iters > 1000000)
            iters = 1000000;
    }

    double *t_step = xmalloc((size_t)o.reps * sizeof(double));
    double *t_write = xmalloc((size_t)o.reps * sizeof(double));
    double *t_gemm = xmalloc((size_t)o.reps * sizeof(double));
    double *t_split = xmalloc((size_t)o.reps * sizeof(double));
    const int split = !o.step_only && o.threads > 1; /* the products alone split too */
    if (split && run_gemms_split(gemms, n_gemms, o.warmup, o.threads) < 0) {
        fprintf(stderr, "mlp_step: cannot start %d threads for the split products\n", o.threads);
        free(t_step);
        free(t_write);
        free(t_gemm);
        free(t_split);
        goto out;
    }
    for (int rep = 0; rep < o.reps; rep++) {
        double w = 0;
        /* The executor sets the BLAS thread count itself (eo.threads); set it again before
         * the sgemm loop in case anything changed it. */
        t_step[rep] = run_steps(&ctx, iters, &w);
        t_write[rep] = w;
        if (t_step[rep] < 0) {
            free(t_step);
            free(t_write);
            free(t_gemm);
            free(t_split);
            goto out;
        }
        t_split[rep] = split ? run_gemms_split(gemms, n_gemms, iters, o.threads) : NAN;
        set_blas_threads(o.threads);
        t_gemm[rep] = o.step_only ? NAN : run_gemms(gemms, n_gemms, iters);
        /* after threaded calls OpenBLAS's server threads go on polling (sched_yield) for some
         * 2^28 cycles before they sleep: let them, or they take turns on the cores with the
         * step's and the split's threads that come next */
        if (!o.step_only && o.threads > 1)
            nanosleep(&(struct timespec){ .tv_sec = 0, .tv_nsec = 300 * 1000 * 1000 }, NULL);
    }
    float loss = NAN;
    s = pbl_exec_read(e, m.loss, &loss, sizeof loss);
    if (s != PBL_OK)
        fprintf(stderr, "mlp_step: reading the loss: %s: %s\n", pbl_status_str(s),
                pbl_exec_errmsg(e));
    pbl_exec_stats st = { 0 };
    pbl_exec_stats_get(e, &st);

    double step_s = median(t_step, o.reps) / iters;
    double write_s = median(t_write, o.reps) / iters;
    double blas_s = median(t_gemm, o.reps) / iters;
    double split_s = split ? median(t_split, o.reps) / iters : NAN;
    free(t_step);
    free(t_write);
    free(t_gemm);
    free(t_split);
    /* the baseline: the products alone, whichever way runs them faster */
    const int split_won = split && split_s < blas_s;
    double gemm_s = split_won ? split_s : blas_s;
    double flops = gemm_flops(gemms, n_gemms);
    double ratio = step_s / gemm_s; /* NaN with --step-only */
    double sps = (double)o.batch / step_s, sps_w = (double)o.batch / (step_s + write_s);
    double gps = (double)o.batch / gemm_s;

    char hidden[128] = "";
    for (int i = 0, len = 0; i < o.n_hidden && len < (int)sizeof hidden; i++)
        len += snprintf(hidden + len, sizeof hidden - (size_t)len, "%s%lld", i ? "," : "",
                        (long long)o.hidden[i]);

    if (o.json) {
        printf("{\"bench\": \"mlp_step\", \"batch\": %lld, \"hidden\": [%s], \"threads\": %d, "
               "\"blas_threads\": %d, \"streams\": %d, \"streams_used\": %d, \"waits\": %d, "
               "\"recipe\": \"%s\", \"blas_core\": \"%s\", \"warmup\": %d, \"iters\": %d, \"reps\": %d, "
               "\"graph_nodes\": %d, \"schedule_nodes\": %d, \"arena_bytes\": %llu, ",
               (long long)o.batch, hidden, o.threads, o.blas_threads, o.streams, (int)st.streams, (int)st.waits,
               recipe_name(&o), blas_core(), o.warmup, iters, o.reps, (int)pbl_graph_node_count(m.g), (int)st.nodes,
               (unsigned long long)st.arena_bytes);
        printf("\"step\": {");
        json_num("steps_per_s", 1.0 / step_s, ", ");
        json_num("samples_per_s", sps, ", ");
        json_num("ms_per_step", 1e3 * step_s, "}, ");
        json_num("write_ms_per_step", 1e3 * write_s, ", ");
        printf("\"step_with_write\": {");
        json_num("steps_per_s", 1.0 / (step_s + write_s), ", ");
        json_num("samples_per_s", sps_w, ", ");
        json_num("ms_per_step", 1e3 * (step_s + write_s), "}, ");
        printf("\"sgemm\": {\"calls\": %d, ", n_gemms);
        json_num("gflop_per_step", flops * 1e-9, ", ");
        json_num("steps_per_s", 1.0 / gemm_s, ", ");
        json_num("samples_per_s", gps, ", ");
        json_num("ms_per_step", 1e3 * gemm_s, ", ");
        json_num("gflops", flops * 1e-9 / gemm_s, ", ");
        printf("\"baseline\": \"%s\", ", split_won ? "split" : "openblas");
        json_num("openblas_ms_per_step", 1e3 * blas_s, ", ");
        json_num("split_ms_per_step", 1e3 * split_s, "}, ");
        json_num("step_over_sgemm", ratio, ", ");
        json_num("step_gflops", flops * 1e-9 / step_s, ", ");
        json_num("last_loss", (double)loss, "}\n");
    } else {
        char layers[160];
        snprintf(layers, sizeof layers, "%s", hidden);
        for (char *c = layers; *c; c++)
            if (*c == ',')
                *c = '-';
        printf("mlp_step: batch %lld, layers %d-%s-%d, threads %d, blas_threads %d, streams %d (%d waits), "
               "BLAS core %s\n",
               (long long)o.batch, IN_FEATURES, layers, N_CLASSES, o.threads, o.blas_threads, (int)st.streams,
               (int)st.waits, blas_core());
        printf("recipe: %s\n", o.plain_adam ? "adam (lr 1e-3, constant; no clipping)"
                                : o.const_lr ? "train_mlp_const (AdamW, weight decay 0.01, clip 1, lr 0.002 constant)"
                                             : "train_mlp (AdamW, weight decay 0.01, clip 1, runtime lr: cosine, "
                                               "500 warm-up steps, peak 0.002)");
        printf("graph: %d nodes (%d scheduled), %d matrix products, %.4f GFLOP/step, arena "
               "%.2f MiB\n",
               (int)pbl_graph_node_count(m.g), (int)st.nodes, n_gemms, flops * 1e-9,
               (double)st.arena_bytes / (1024.0 * 1024.0));
        printf("timing: median of %d reps x %d steps (warm-up %d); step = pbl_exec_run only, "
               "input write timed apart\n\n",
               o.reps, iters, o.warmup);
        printf("%-26s %12s %14s %11s %9s\n", "", "steps/s", "samples/s", "ms/step", "GFLOP/s*");
        printf("%-26s %12.1f %14.0f %11.4f %9.2f\n", "pebble step (run)", 1.0 / step_s, sps,
               1e3 * step_s, flops * 1e-9 / step_s);
        printf("%-26s %12.1f %14.0f %11.4f %9s\n", "pebble step (write+run)",
               1.0 / (step_s + write_s), sps_w, 1e3 * (step_s + write_s), "");
        printf("%-26s %12s %14s %11.4f %9s\n", "  input write alone", "", "", 1e3 * write_s, "");
        if (o.step_only)
            printf("%-26s (skipped: --step-only)\n", "sgemm alone");
        else {
            printf("%-26s %12.1f %14.0f %11.4f %9.2f%s\n", "sgemm alone, OpenBLAS", 1.0 / blas_s,
                   (double)o.batch / blas_s, 1e3 * blas_s, flops * 1e-9 / blas_s, split_won ? "" : "  <- baseline");
            if (split)
                printf("%-26s %12.1f %14.0f %11.4f %9.2f%s\n", "sgemm alone, split", 1.0 / split_s,
                       (double)o.batch / split_s, 1e3 * split_s, flops * 1e-9 / split_s,
                       split_won ? "  <- baseline" : "");
        }
        if (o.step_only)
            printf("\nlast loss %.6g\n", (double)loss);
        else
            printf("\nstep / sgemm time ratio: %.3f, against the faster way to run the products alone   (last loss "
                   "%.6g)\n", ratio, (double)loss);
        printf("* GFLOP/s: the flops of the graph's matrix products over the row's time\n");
    }
    if (o.list) {
        FILE *f = o.json ? stderr : stdout;
        set_blas_threads(o.threads);
        fprintf(f, "\n");
        print_gemms(f, gemms, n_gemms, iters, o.reps);
    }
    rc = 0;
out:
    pbl_exec_destroy(e);
    if (gemms)
        gemm_free(gemms, n_gemms);
    for (int p = 0; p < POOL; p++) {
        free(pool.x[p]);
        free(pool.y[p]);
    }
    destroy_model(&m);
    return rc;
}
