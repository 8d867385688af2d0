/*
 * finetune_onnx — fine-tunes an imported ONNX classifier on Fashion-MNIST, in plain C.
 *
 *     finetune_onnx MODEL.onnx [--data DIR] [--steps N] [--batch B] [--lr LR] [--threads T]
 *     finetune_onnx --write-mlp FILE [--hidden H] [--seed S]
 *
 * The model (an MLP exported from PyTorch, say) reads one float input [N, 784] (pixels scaled
 * to [0, 1], then standardised by Fashion-MNIST's mean 0.2860 and deviation 0.3530) and gives
 * logits [N, 10] as its first output. This program loads it (pbl_graph_load_onnx, Gemm kept as
 * fully_connected so its weights stay as stored), appends a cross-entropy loss on integer
 * labels, the backward pass (pbl_graph_gradient) and an Adam update of every initializer
 * (pbl_graph_add_optimizer), so one run of the graph is one training step — the fine-tuning
 * that ONNX Runtime needs its separate training build for. It trains on the training set in
 * order, for N steps (default: one epoch), printing every 100 steps the mean loss and accuracy
 * of those steps, then the test-set accuracy of the fine-tuned weights (through a second,
 * inference-only load of the same file whose weights receive the trained ones).
 *
 * --write-mlp writes such a model: 784 -> H (Gemm, transB=1) -> Relu -> 10 (Gemm), opset 13,
 * weights uniform in ±1/√fan_in from a seeded generator — so the example and its test need no
 * Python. The ONNX protobuf is written by hand below (a few fields of ModelProto).
 *
 * Output (stdout): "step 100: loss 0.9012 accuracy 0.6950" lines, then
 * "first 100 steps: loss A; last 100 steps: loss B" and "test accuracy: 0.81". Errors: one line
 * "finetune_onnx: message" on stderr, exit 2 for a bad command line, 1 for anything else.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pebble/pebble.h>

#include "idx.h"

#define N_PIXELS  784
#define N_CLASSES 10
#define REPORT    100 /* steps per progress line */
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("finetune_onnx: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- a minimal protobuf writer: enough of ModelProto for an MLP --------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t   n, cap;
    int      failed;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_varint(buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, t, n);
}

static void put_int(buf *b, int field, int64_t v) /* wire type 0 */
{
    put_varint(b, (uint64_t)field << 3);
    put_varint(b, (uint64_t)v);
}

static void put_bytes(buf *b, int field, const void *d, size_t n) /* wire type 2 */
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, n);
    put(b, d, n);
}

static void put_str(buf *b, int field, const char *s) { put_bytes(b, field, s, strlen(s)); }

/* a sub-message: moves m into b as field `field` and empties m */
static void put_msg(buf *b, int field, buf *m)
{
    b->failed |= m->failed;
    put_bytes(b, field, m->p, m->n);
    free(m->p);
    memset(m, 0, sizeof *m);
}

/* TensorProto: dims 1, data_type 2 (FLOAT = 1), name 8, raw_data 9 (little-endian floats) */
static void put_tensor(buf *g, const char *name, const int64_t *dims, int nd, const float *data)
{
    buf t = { 0 };
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        put_int(&t, 1, dims[i]);
        n *= dims[i];
    }
    put_int(&t, 2, 1);
    put_str(&t, 8, name);
    put_bytes(&t, 9, data, (size_t)n * sizeof *data);
    put_msg(g, 5, &t); /* GraphProto.initializer */
}

/* ValueInfoProto name 1, type 2 {tensor_type 1 {elem_type 1, shape 2 {dim 1 {dim_value 1 | dim_param 2}}}};
 * a dim of -1 is the symbolic batch "N" */
static void put_value_info(buf *g, int field, const char *name, const int64_t *dims, int nd)
{
    buf shape = { 0 }, tt = { 0 }, type = { 0 }, vi = { 0 };
    for (int i = 0; i < nd; i++) {
        buf d = { 0 };
        if (dims[i] < 0)
            put_str(&d, 2, "N");
        else
            put_int(&d, 1, dims[i]);
        put_msg(&shape, 1, &d);
    }
    put_int(&tt, 1, 1);
    put_msg(&tt, 2, &shape);
    put_msg(&type, 1, &tt);
    put_str(&vi, 1, name);
    put_msg(&vi, 2, &type);
    put_msg(g, field, &vi);
}

/* NodeProto input 1, output 2, name 3, op_type 4, attribute 5 {name 1, i 3, type 20 (INT = 2)} */
static void put_node(buf *g, const char *op, const char *name, const char *const *in, int n_in, const char *out,
                     int trans_b)
{
    buf n = { 0 };
    for (int i = 0; i < n_in; i++)
        put_str(&n, 1, in[i]);
    put_str(&n, 2, out);
    put_str(&n, 3, name);
    put_str(&n, 4, op);
    if (trans_b) {
        buf a = { 0 };
        put_str(&a, 1, "transB");
        put_int(&a, 3, 1);
        put_int(&a, 20, 2);
        put_msg(&n, 5, &a);
    }
    put_msg(g, 1, &n);
}

/* xorshift64*, uniform in [-r, r] */
static float uniform(uint64_t *s, double r)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    double u = (double)((*s * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
    return (float)((2 * u - 1) * r);
}

static int write_mlp(const char *path, int64_t hidden, uint64_t seed)
{
    int64_t dw1[] = { hidden, N_PIXELS }, db1[] = { hidden }, dw2[] = { N_CLASSES, hidden }, db2[] = { N_CLASSES };
    size_t n1 = (size_t)(hidden * N_PIXELS), n2 = (size_t)(N_CLASSES * hidden);
    float *w1 = malloc(n1 * sizeof *w1), *b1 = malloc((size_t)hidden * sizeof *b1), *w2 = malloc(n2 * sizeof *w2),
          b2[N_CLASSES];
    int rc = 1;
    buf g = { 0 }, m = { 0 }, op = { 0 };
    if (!w1 || !b1 || !w2) {
        complain("out of memory");
        goto done;
    }
    uint64_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n1; i++)
        w1[i] = uniform(&s, 1 / sqrt(N_PIXELS));
    for (int64_t i = 0; i < hidden; i++)
        b1[i] = uniform(&s, 1 / sqrt(N_PIXELS));
    for (size_t i = 0; i < n2; i++)
        w2[i] = uniform(&s, 1 / sqrt((double)hidden));
    for (int i = 0; i < N_CLASSES; i++)
        b2[i] = uniform(&s, 1 / sqrt((double)hidden));
    static const char *const fc1[] = { "x", "fc1.weight", "fc1.bias" }, *const relu[] = { "h" },
                             *const fc2[] = { "a", "fc2.weight", "fc2.bias" };
    put_node(&g, "Gemm", "fc1", fc1, 3, "h", 1);
    put_node(&g, "Relu", "relu", relu, 1, "a", 0);
    put_node(&g, "Gemm", "fc2", fc2, 3, "logits", 1);
    put_str(&g, 2, "mlp");
    put_tensor(&g, "fc1.weight", dw1, 2, w1);
    put_tensor(&g, "fc1.bias", db1, 1, b1);
    put_tensor(&g, "fc2.weight", dw2, 2, w2);
    put_tensor(&g, "fc2.bias", db2, 1, b2);
    put_value_info(&g, 11, "x", (int64_t[]){ -1, N_PIXELS }, 2);
    put_value_info(&g, 12, "logits", (int64_t[]){ -1, N_CLASSES }, 2);
    put_int(&m, 1, 8);                  /* ir_version */
    put_str(&m, 2, "pebble finetune_onnx"); /* producer_name */
    put_msg(&m, 7, &g);                 /* graph */
    put_int(&op, 2, 13);                /* OperatorSetIdProto.version, default domain */
    put_msg(&m, 8, &op);                /* opset_import */
    if (m.failed) {
        complain("out of memory");
        goto done;
    }
    char why[512];
    if (pbl_file_write(path, m.p, m.n, why, sizeof why) != PBL_OK) { /* whole or nothing: the safe writer */
        complain("%s", why);
        goto done;
    }
    printf("wrote %s: MLP 784-%lld-10, %zu bytes\n", path, (long long)hidden, m.n);
    rc = 0;
done:
    free(w1), free(b1), free(w2), free(g.p), free(m.p), free(op.p);
    return rc;
}

/* ---- fine-tuning -------------------------------------------------------------------------- */

typedef struct dataset {
    idx_array images, labels;
} dataset;

static int load_set(dataset *d, const char *dir, const char *images, const char *labels)
{
    char path[4096], err[512];
    memset(d, 0, sizeof *d);
    snprintf(path, sizeof path, "%s/%s", dir, images);
    if (idx_read(&d->images, path, 3, err, sizeof err) != 0 || d->images.dims[1] * d->images.dims[2] != N_PIXELS) {
        complain("%s", d->images.data ? "images are not 28x28" : err);
        idx_array_free(&d->images);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, labels);
    if (idx_read(&d->labels, path, 1, err, sizeof err) != 0 || d->labels.dims[0] != d->images.dims[0]) {
        complain("%s: %s", path, d->labels.data ? "not one label per image" : err);
        idx_array_free(&d->images);
        idx_array_free(&d->labels);
        return -1;
    }
    for (size_t i = 0; i < d->labels.size; i++)
        if (d->labels.data[i] >= N_CLASSES) {
            complain("%s: label %zu is %u", path, i, d->labels.data[i]);
            idx_array_free(&d->images);
            idx_array_free(&d->labels);
            return -1;
        }
    return 0;
}

/* examples [first, first + n) of d into x (standardised) and y */
static void fill_batch(const dataset *d, int64_t first, int64_t n, float *x, int32_t *y)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *px = d->images.data + (size_t)(first + i) * N_PIXELS;
        for (int j = 0; j < N_PIXELS; j++)
            x[i * N_PIXELS + j] = (px[j] / 255.0f - 0.2860f) / 0.3530f;
        if (y)
            y[i] = d->labels.data[first + i];
    }
}

static int64_t correct(const float *logits, const uint8_t *labels, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *r = logits + i * N_CLASSES;
        int best = 0;
        for (int k = 1; k < N_CLASSES; k++)
            if (r[k] > r[best])
                best = k;
        c += best == labels[i];
    }
    return c;
}

/* The model's float input and first output, checked against what this program feeds. */
static int model_io(pbl_graph *g, int64_t batch, pbl_value *x, pbl_value *logits)
{
    *x = PBL_NONE;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, v, &vi);
        if (vi.kind == PBL_VALUE_INPUT && vi.dtype == PBL_F32) {
            if (*x != PBL_NONE) {
                complain("the model has more than one float input");
                return -1;
            }
            if (vi.shape.ndim != 2 || vi.shape.dim[0] != batch || vi.shape.dim[1] != N_PIXELS) {
                complain("input '%s' must be [N, %d]", vi.name, N_PIXELS);
                return -1;
            }
            *x = v;
        }
    }
    const char *name;
    pbl_value_info li;
    if (*x == PBL_NONE || pbl_graph_output_count(g) < 1 || pbl_graph_output_at(g, 0, &name, logits) != PBL_OK ||
        pbl_graph_value_info(g, *logits, &li) != PBL_OK || li.shape.ndim != 2 || li.shape.dim[0] != batch ||
        li.shape.dim[1] != N_CLASSES) {
        complain("the model must read one float input [N, %d] and give logits [N, %d] first", N_PIXELS, N_CLASSES);
        return -1;
    }
    return 0;
}

typedef struct run_opts {
    const char *model, *data;
    int64_t     steps, batch;
    double      lr;
    int32_t     threads;
} run_opts;

static int load_model(const char *path, int64_t batch, pbl_graph **g, pbl_onnx_weights **w)
{
    char err[1024];
    pbl_onnx_options o = pbl_onnx_options_default();
    o.dim_value = batch;
    o.weights = w;
    o.pack_weights = 0; /* weights stay as stored: they are what the optimizer updates */
    if (pbl_graph_load_onnx(g, path, &o, err, sizeof err) != PBL_OK) {
        complain("%s", err);
        return -1;
    }
    return 0;
}

static int make_exec(pbl_graph *g, const pbl_onnx_weights *w, int32_t threads, pbl_exec **e)
{
    char err[1024];
    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = threads;
    if (pbl_exec_create(e, g, &eo, err, sizeof err) != PBL_OK || pbl_onnx_weights_bind(w, *e, err, sizeof err) != PBL_OK) {
        complain("%s", err);
        return -1;
    }
    return 0;
}

/* Test accuracy with the trained weights: an inference-only load of the same file, its
 * weights overwritten by the trained ones (same file, same blocks in the same order). */
static int evaluate(const run_opts *ro, const pbl_onnx_weights *trained, const dataset *test)
{
    pbl_graph *g = NULL;
    pbl_onnx_weights *w = NULL;
    pbl_exec *e = NULL;
    float *x = NULL, *logits = NULL;
    int rc = -1;
    pbl_value xv, lv;
    if (load_model(ro->model, ro->batch, &g, &w) != 0 || model_io(g, ro->batch, &xv, &lv) != 0)
        goto done;
    for (int32_t i = 0; i < pbl_onnx_weights_count(w); i++) {
        void *src, *dst;
        size_t ns, nd;
        pbl_value vs, vd;
        pbl_onnx_weights_at(trained, i, &vs, &src, &ns);
        pbl_onnx_weights_at(w, i, &vd, &dst, &nd);
        memcpy(dst, src, ns < nd ? ns : nd);
    }
    if (make_exec(g, w, ro->threads, &e) != 0)
        goto done;
    x = malloc((size_t)(ro->batch * N_PIXELS) * sizeof *x);
    logits = malloc((size_t)(ro->batch * N_CLASSES) * sizeof *logits);
    if (!x || !logits) {
        complain("out of memory");
        goto done;
    }
    int64_t n = (int64_t)test->labels.size / ro->batch * ro->batch, right = 0;
    for (int64_t first = 0; first < n; first += ro->batch) {
        fill_batch(test, first, ro->batch, x, NULL);
        if (pbl_exec_write(e, xv, x, (size_t)(ro->batch * N_PIXELS) * sizeof *x) != PBL_OK || pbl_exec_run(e) != PBL_OK ||
            pbl_exec_read(e, lv, logits, (size_t)(ro->batch * N_CLASSES) * sizeof *logits) != PBL_OK) {
            complain("%s", pbl_exec_errmsg(e));
            goto done;
        }
        right += correct(logits, test->labels.data + first, ro->batch);
    }
    printf("test accuracy: %.4f (%lld images)\n", n ? (double)right / (double)n : 0.0, (long long)n);
    rc = 0;
done:
    free(x), free(logits);
    pbl_exec_destroy(e);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    return rc;
}

static int finetune(const run_opts *ro)
{
    dataset train = { 0 }, test = { 0 };
    pbl_graph *g = NULL;
    pbl_onnx_weights *w = NULL;
    pbl_exec *e = NULL;
    float *x = NULL, *logits = NULL;
    int32_t *y = NULL;
    pbl_value *params = NULL, *grads = NULL;
    int rc = 1;
    if (load_set(&train, ro->data, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz") != 0 ||
        load_set(&test, ro->data, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz") != 0)
        goto done;
    pbl_value xv, lv;
    if (load_model(ro->model, ro->batch, &g, &w) != 0 || model_io(g, ro->batch, &xv, &lv) != 0)
        goto done;
    /* loss, backward pass, optimizer: every initializer is trained */
    int32_t np = pbl_onnx_weights_count(w);
    params = calloc((size_t)(np ? np : 1), sizeof *params);
    grads = calloc((size_t)(np ? np : 1), sizeof *grads);
    if (!params || !grads) {
        complain("out of memory");
        goto done;
    }
    for (int32_t i = 0; i < np; i++) {
        void *d;
        size_t n;
        pbl_onnx_weights_at(w, i, &params[i], &d, &n);
    }
    pbl_value yv = pbl_label(g, "labels", PBL_I32, pbl_shape_make(1, &ro->batch));
    pbl_value loss = pbl_softmax_cross_entropy(g, lv, yv);
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    oo.lr = ro->lr;
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_set_output(g, "loss", loss) != PBL_OK ||
        pbl_graph_gradient(g, loss, params, np, grads) != PBL_OK || pbl_graph_add_optimizer(g, &oo, params, grads, np) != PBL_OK) {
        complain("cannot append the training step: %s", pbl_graph_errmsg(g));
        goto done;
    }
    if (make_exec(g, w, ro->threads, &e) != 0)
        goto done;
    x = malloc((size_t)(ro->batch * N_PIXELS) * sizeof *x);
    y = malloc((size_t)ro->batch * sizeof *y);
    logits = malloc((size_t)(ro->batch * N_CLASSES) * sizeof *logits);
    if (!x || !y || !logits) {
        complain("out of memory");
        goto done;
    }
    int64_t per_epoch = (int64_t)train.labels.size / ro->batch, steps = ro->steps ? ro->steps : per_epoch;
    double sum_loss = 0, first_loss = -1, last_loss = 0;
    int64_t right = 0, in_window = 0;
    printf("fine-tuning %s: %d parameter blocks, batch %lld, %lld steps, Adam lr %g\n", ro->model, (int)np,
           (long long)ro->batch, (long long)steps, ro->lr);
    for (int64_t step = 0; step < steps; step++) {
        int64_t first = step % per_epoch * ro->batch;
        float l;
        fill_batch(&train, first, ro->batch, x, y);
        if (pbl_exec_write(e, xv, x, (size_t)(ro->batch * N_PIXELS) * sizeof *x) != PBL_OK ||
            pbl_exec_write(e, yv, y, (size_t)ro->batch * sizeof *y) != PBL_OK || pbl_exec_run(e) != PBL_OK ||
            pbl_exec_read(e, loss, &l, sizeof l) != PBL_OK ||
            pbl_exec_read(e, lv, logits, (size_t)(ro->batch * N_CLASSES) * sizeof *logits) != PBL_OK) {
            complain("step %lld: %s", (long long)step, pbl_exec_errmsg(e));
            goto done;
        }
        sum_loss += l;
        right += correct(logits, train.labels.data + first, ro->batch);
        in_window++;
        if (in_window == REPORT || step + 1 == steps) {
            double ml = sum_loss / (double)in_window;
            printf("step %lld: loss %.4f accuracy %.4f\n", (long long)step + 1, ml,
                   (double)right / (double)(in_window * ro->batch));
            if (first_loss < 0)
                first_loss = ml;
            last_loss = ml;
            sum_loss = 0;
            right = in_window = 0;
        }
    }
    printf("first %d steps: loss %.4f; last %d steps: loss %.4f\n", REPORT, first_loss, REPORT, last_loss);
    rc = evaluate(ro, w, &test) == 0 ? 0 : 1;
done:
    free(x), free(y), free(logits), free(params), free(grads);
    pbl_exec_destroy(e);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    idx_array_free(&train.images), idx_array_free(&train.labels);
    idx_array_free(&test.images), idx_array_free(&test.labels);
    return rc;
}

/* ---- command line ------------------------------------------------------------------------- */

static int number(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(d >= lo && d <= hi)) {
        complain("%s takes a number in [%g, %g]", flag, lo, hi);
        return -1;
    }
    *out = d;
    return 0;
}

static void usage(FILE *f)
{
    fputs("usage: finetune_onnx MODEL.onnx [--data DIR] [--steps N] [--batch B] [--lr LR] [--threads T]\n"
          "       finetune_onnx --write-mlp FILE [--hidden H] [--seed S]\n", f);
}

int main(int argc, char **argv)
{
    run_opts ro = { .data = DEFAULT_DATA, .batch = 64, .lr = 1e-3, .threads = 1 };
    const char *write_to = NULL, *tune_flag = NULL, *mlp_flag = NULL; /* the last flag of each mode */
    double hidden = 128, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (a[0] != '-' && !ro.model) {
            ro.model = a;
            continue;
        }
        if (strcmp(a, "--write-mlp") == 0 && v)
            write_to = v;
        else if (strcmp(a, "--data") == 0 && v)
            ro.data = v;
        else if (strcmp(a, "--steps") == 0 && number(a, v, 0, 1e9, &d) == 0)
            ro.steps = (int64_t)d;
        else if (strcmp(a, "--batch") == 0 && number(a, v, 1, 60000, &d) == 0)
            ro.batch = (int64_t)d;
        else if (strcmp(a, "--lr") == 0 && number(a, v, 0, 10, &d) == 0)
            ro.lr = d;
        else if (strcmp(a, "--threads") == 0 && number(a, v, 1, 256, &d) == 0)
            ro.threads = (int32_t)d;
        else if (strcmp(a, "--hidden") == 0 && number(a, v, 1, 65536, &d) == 0)
            hidden = d;
        else if (strcmp(a, "--seed") == 0 && number(a, v, 0, 1e15, &d) == 0)
            seed = d;
        else {
            static const char *const flags[] = { "--write-mlp", "--data", "--steps", "--batch", "--lr", "--threads",
                                                 "--hidden", "--seed" };
            int known = 0; /* a known flag here had no value or a bad one (already said) */
            for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
                known |= strcmp(a, flags[k]) == 0;
            if (!known)
                complain("unexpected argument '%s'", a);
            else if (!v)
                complain("%s needs a value", a);
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--hidden") == 0 || strcmp(a, "--seed") == 0)
            mlp_flag = a;
        else if (strcmp(a, "--write-mlp") != 0)
            tune_flag = a;
        i++;
    }
    /* the two modes do not mix: a MODEL beside --write-mlp would be neither read nor tuned,
     * and the new model may be written over it (`finetune_onnx m.onnx --write-mlp m.onnx`) */
    if (write_to && (ro.model || tune_flag)) {
        if (ro.model)
            complain("--write-mlp %s writes a new model and fine-tunes nothing; MODEL %s would not be read "
                     "(leave it out, or run the two steps one after the other)",
                     write_to, ro.model);
        else
            complain("%s fine-tunes a MODEL; --write-mlp only writes a new one", tune_flag);
        return 2;
    }
    if (write_to && strcmp(write_to, "-") == 0) {
        /* a model is binary and standard output carries the report: refused rather than a
         * file named "-" made in its place */
        complain("--write-mlp -: give a file name (the model is not written to standard output)");
        return 2;
    }
    if (!write_to && mlp_flag) {
        complain("%s shapes the model --write-mlp writes; it does nothing without it", mlp_flag);
        return 2;
    }
    if (write_to)
        return write_mlp(write_to, (int64_t)hidden, (uint64_t)seed);
    if (!ro.model) {
        usage(stderr);
        return 2;
    }
    return finetune(&ro);
}
