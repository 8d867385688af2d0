/*
 * bfc_record_dtr: records the BFC pool's allocation trace of pebble's dynamic mode (DTR)
 * running MLP training steps, for bfc_replay.
 *
 *   bfc_record_dtr OUT.csv [--hidden W1,W2,...] [--layers L --width W] [--batch B] [--steps S]
 *                          [--budget-pct P]
 *
 * Builds x [B,784] -> fully_connected+relu hidden layers (--hidden: these widths, default
 * 256,128 as the zoo's mlp; --layers L --width W: L-1 of width W) -> 10 classes,
 * softmax cross-entropy, the gradient of every weight and bias and Adam (lr 1e-3), with
 * parameters drawn like PyTorch's nn.Linear (U(+-1/sqrt(in)), seeded) and a random batch.
 * Runs S steps (default 2: the second starts with the first's outputs still in the pool)
 * with storage PBL_STORAGE_DYNAMIC and pbl_exec_options.trace = OUT.csv. --budget-pct P
 * (default 0: no budget) sets the budget to P% of the peak the same graph reaches with no
 * budget (pbl_exec_stats.dynamic_unlimited_peak), so DTR evicts and rematerialises; the
 * trace then holds the evictions' frees and the recomputations' allocations.
 * Prints the executor's dynamic-mode stats to stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/pebble.h"

enum { IN = 784, CLASSES = 10, MAX_LAYERS = 1024 };

typedef struct net {
    pbl_graph *g;
    pbl_value  x, y, params[2 * MAX_LAYERS];
    float     *data[2 * MAX_LAYERS];
    size_t     bytes[2 * MAX_LAYERS];
    int        n_params;
} net;

static uint64_t rng = 0x5DEECE66Dull;
static float uniform(void) /* [0, 1), xorshift64* */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((rng * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

static int build(net *n, int layers, const int64_t *hidden, int64_t batch)
{
    memset(n, 0, sizeof *n);
    if (pbl_graph_create(&n->g, NULL) != PBL_OK)
        return -1;
    n->x = pbl_input(n->g, "x", PBL_SHAPE(batch, IN));
    n->y = pbl_label(n->g, "y", PBL_I32, PBL_SHAPE(batch));
    pbl_value h = n->x;
    int64_t in = IN;
    for (int l = 0; l < layers; l++) {
        int64_t out = l < layers - 1 ? hidden[l] : CLASSES;
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "w%d", l + 1);
        snprintf(bn, sizeof bn, "b%d", l + 1);
        pbl_value w = pbl_param(n->g, wn, PBL_SHAPE(out, in));
        pbl_value b = pbl_param(n->g, bn, PBL_SHAPE(out));
        h = pbl_fully_connected(n->g, h, w, b);
        if (l < layers - 1)
            h = pbl_relu(n->g, h);
        float bound = (float)(1.0 / sqrt((double)in));
        for (int k = 0; k < 2; k++) {
            int i = n->n_params++;
            n->params[i] = k ? b : w;
            n->bytes[i] = (size_t)(k ? out : out * in) * sizeof(float);
            n->data[i] = malloc(n->bytes[i]);
            if (!n->data[i])
                return -1;
            for (size_t j = 0; j < n->bytes[i] / sizeof(float); j++)
                n->data[i][j] = (2.0f * uniform() - 1.0f) * bound;
        }
        in = out;
    }
    pbl_value loss = pbl_softmax_cross_entropy(n->g, h, n->y);
    if (pbl_graph_build_status(n->g) != PBL_OK || pbl_graph_set_output(n->g, "loss", loss) != PBL_OK)
        return -1;
    pbl_value grads[2 * MAX_LAYERS];
    if (pbl_graph_gradient(n->g, loss, n->params, n->n_params, grads) != PBL_OK)
        return -1;
    pbl_optimizer_options opt = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    opt.lr = 1e-3;
    return pbl_graph_add_optimizer(n->g, &opt, n->params, grads, n->n_params) == PBL_OK ? 0 : -1;
}

/* An executor in dynamic mode with its parameters bound and one batch written. */
static pbl_status open_exec(pbl_exec **e, net *n, uint64_t budget, FILE *trace, int64_t batch,
                            const float *x, const int32_t *y, char *err, size_t errlen)
{
    pbl_exec_options eo = pbl_exec_options_default();
    eo.storage = PBL_STORAGE_DYNAMIC;
    eo.budget = budget;
    eo.trace = trace;
    pbl_status s = pbl_exec_create(e, n->g, &eo, err, errlen);
    for (int i = 0; s == PBL_OK && i < n->n_params; i++)
        s = pbl_exec_bind(*e, n->params[i], n->data[i], n->bytes[i]);
    if (s == PBL_OK)
        s = pbl_exec_write(*e, n->x, x, (size_t)batch * IN * sizeof *x);
    if (s == PBL_OK)
        s = pbl_exec_write(*e, n->y, y, (size_t)batch * sizeof *y);
    if (s != PBL_OK && *e)
        snprintf(err, errlen, "%s", pbl_exec_errmsg(*e));
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bfc_record_dtr OUT.csv [--hidden W1,W2,...] [--layers L --width W] "
                        "[--batch B] [--steps S] [--budget-pct P]\n");
        return 2;
    }
    int layers = 3, steps = 2;
    static int64_t hidden[MAX_LAYERS] = { 256, 128 };
    int64_t width = 0, batch = 128;
    double pct = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--hidden") == 0) {
            layers = 1;
            for (char *p = argv[i + 1]; *p && layers < MAX_LAYERS; layers++) {
                hidden[layers - 1] = strtoll(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else if (strcmp(argv[i], "--layers") == 0)
            layers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--width") == 0)
            width = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--budget-pct") == 0)
            pct = atof(argv[i + 1]);
        else {
            fprintf(stderr, "bfc_record_dtr: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (layers < 1 || layers > MAX_LAYERS || width < 0 || batch < 1 || steps < 1 || pct < 0) {
        fprintf(stderr, "bfc_record_dtr: bad option value\n");
        return 2;
    }
    for (int l = 0; l < layers - 1; l++) {
        if (width)
            hidden[l] = width;
        if (hidden[l] < 1) {
            fprintf(stderr, "bfc_record_dtr: bad hidden width\n");
            return 2;
        }
    }
    static net n; /* large: off the stack */
    char err[512] = "";
    int rc = 1;
    float *x = malloc((size_t)batch * IN * sizeof *x);
    int32_t *y = malloc((size_t)batch * sizeof *y);
    FILE *out = NULL;
    pbl_exec *e = NULL;
    if (!x || !y || build(&n, layers, hidden, batch) != 0) {
        fprintf(stderr, "bfc_record_dtr: building the MLP failed: %s\n",
                n.g ? pbl_graph_errmsg(n.g) : "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < batch * IN; i++)
        x[i] = uniform();
    for (int64_t i = 0; i < batch; i++)
        y[i] = (int32_t)(uniform() * CLASSES);

    uint64_t budget = 0;
    pbl_exec_stats st;
    if (pct > 0) { /* the unlimited peak, from an executor without a trace */
        if (open_exec(&e, &n, 0, NULL, batch, x, y, err, sizeof err) != PBL_OK ||
            pbl_exec_stats_get(e, &st) != PBL_OK) {
            fprintf(stderr, "bfc_record_dtr: %s\n", err);
            goto done;
        }
        budget = (uint64_t)((double)st.dynamic_unlimited_peak * pct / 100.0);
        pbl_exec_destroy(e);
        e = NULL;
    }
    out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        goto done;
    }
    if (open_exec(&e, &n, budget, out, batch, x, y, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "bfc_record_dtr: %s\n", err);
        goto done;
    }
    for (int s = 0; s < steps; s++)
        if (pbl_exec_run(e) != PBL_OK) {
            fprintf(stderr, "bfc_record_dtr: step %d: %s\n", s, pbl_exec_errmsg(e));
            goto done;
        }
    pbl_exec_stats_get(e, &st);
    float loss = 0;
    pbl_exec_read(e, pbl_graph_output(n.g, "loss"), &loss, sizeof loss);
    fprintf(stderr,
            "MLP %d layers, first hidden width %lld, batch %lld, %d steps, budget %llu (%.0f%% of "
            "the unlimited peak %llu): peak %llu, %lld evictions, %lld kernels re-run, remat depth "
            "%d, pool holds %llu; loss %.4f\n",
            layers, (long long)(layers > 1 ? hidden[0] : 0), (long long)batch, steps, (unsigned long long)budget, pct,
            (unsigned long long)st.dynamic_unlimited_peak, (unsigned long long)st.dynamic_peak,
            (long long)st.evictions, (long long)st.remat_ops, (int)st.remat_depth,
            (unsigned long long)st.dynamic_pool_bytes, loss);
    rc = 0;
done:
    pbl_exec_destroy(e); /* outputs still live: the trace ends with them allocated */
    if (out && fclose(out) != 0)
        rc = 1;
    for (int i = 0; i < n.n_params; i++)
        free(n.data[i]);
    pbl_graph_destroy(n.g);
    free(x);
    free(y);
    return rc;
}
