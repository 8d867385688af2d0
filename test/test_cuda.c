/*
 * The CUDA backend against the CPU one: every op with a CUDA kernel on random data (CUDA,
 * 1 and 2 streams, with and without a CUDA Graph, two runs so updates and dropout's run
 * counter are exercised on replay), a label out of range reported from the device, and an
 * MLP and a small CNN trained a few steps (loss every step and parameters after, within
 * tolerance).
 *
 * Tolerances (|cuda - cpu| <= tol·(1 + |cpu|)): 1e-5 for element-wise ops (same formulas,
 * no FMA contraction, but CUDA's expf/erff/tanhf differ from glibc's by an ulp or two);
 * 1e-4 for products (cuBLAS and OpenBLAS sum in different orders) and row reductions;
 * dropout's mask is compared exactly (integer arithmetic). batch_norm, layer_norm and their
 * gradients: 1e-5; both sides sum the statistics in double (the device by a block tree, the CPU
 * in sequence), so mean, inv_std and the gradient sums round to the same f32 but for rare
 * ties (an ulp: ≤ 2e-7 relative, ≤ 1e-6 in dx after its cancellation with sc ≤ 4 here) and
 * the element-wise f32 expressions are the same. embedding and embedding_grad: exact (a
 * copy; the gradient adds the same rows in the same position order). elementwise_chain: 1e-5
 * (the activations' ulps, carried through up to 8 steps; 1e-6 for the single division).
 * fully_connected_packed: 1e-4 like the products (its CPU kernel fuses multiply-adds).
 * An id out of range in embedding(+grad) is found on the device like a bad label, with the
 * CPU's message. MLP: loss within 1e-3 relative
 * per step, parameters within 2e-3 (Adam divides by sqrt(v), which magnifies differences of
 * tiny gradients in the first steps).
 *
 * Convolutions and pools. conv2d and conv2d_grad_input: 1e-4 like the products (each output
 * sums C/g·kh·kw or Co/g·kh·kw products of values in [-1, 1], at most 288 here; cuBLAS and
 * OpenBLAS order them differently, col2im adds the same taps in the same order). conv2d_grad_weight
 * sums N·OH·OW products per element: 1e-4 for the small cases, 1e-3 for the two past one
 * chunk of the column buffer (270,000 and 28,900 terms: fp32 rounding grows like √terms·ε·|partial
 * sums|, ~5e-3 absolute on sums of ~170, i.e. ~3e-5 relative, and the chunked sum adds the
 * chunks in another order than the CPU's one sgemm; measured on the host emulator: 5.7e-5 and
 * 1.4e-4, every other conv case below 4e-6). Pools and their gradients are exact
 * (tol 0): the same float operations in the same order (max: strict > from -FLT_MAX; avg: the
 * float sum of the taps inside x divided by their count; global: a double sum; gradients
 * gathered in output order, the CPU's order of adding into dx). The max-pool cases with tied
 * inputs check the tie rule (the first tap in window order equal to y takes the gradient).
 * CNN (conv, max pool, grouped conv, avg pool, global pool, SGD with momentum, 5 steps): loss
 * within 1e-4 relative per step and parameters within 1e-4.
 *
 * Without a CUDA device (or built without CUDA) the program prints why and exits 77, which
 * CTest counts as skipped. As test_cuda_emu it runs on pebble's host CUDA emulator
 * ($PEBBLE_CUDA_MODULE = libpebble_cuda_emu.so, test/cuda_emu/), which runs the same backend
 * and kernels on the CPU. `test_cuda --cpu` runs the same harness CPU against CPU (to check
 * the harness itself on a machine without a GPU).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/pebble.h"
#include "graph/ir/registry.h" /* the math family's list of unary maps */

static pbl_backend_kind other = PBL_BACKEND_CUDA;
static int failures;

#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (!(cond)) {                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                      \
            fputc('\n', stderr);                               \
            failures++;                                        \
        }                                                      \
    } while (0)

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rng_next(s) >> 11) * 0x1.0p-53);
}

/* ---- one op on both backends ---------------------------------------------------------- */

#define MAXIN 9 /* elementwise_chain: x and up to PBL_MAX_INTS operands */
typedef struct op_case {
    const char *op;
    int         n_in;
    pbl_shape   in[MAXIN];
    int         label;      /* input index holding int32 labels in [0, classes), or -1 */
    int64_t     classes;
    pbl_attr    at[6];
    int         n_at;
    float       lo, hi;     /* range of the float inputs */
    double      tol;        /* 0: exact */
} op_case;

/* > 1: float inputs take only this many values, evenly spaced in [lo, hi] (ties in a max
 * pool's windows; set around the tie cases) */
static int levels;

static int64_t numel(pbl_shape s)
{
    int64_t n = 1;
    for (int32_t i = 0; i < s.ndim; i++)
        n *= s.dim[i];
    return n;
}

/* Runs the op twice on `backend` and copies each output into out[k] (malloc'd). */
static int run_op(const op_case *c, pbl_backend_kind backend, int streams, int graph, float **out, int64_t *out_n,
                  int *n_out)
{
    pbl_graph *g = NULL;
    pbl_exec *e = NULL;
    int ok = 0;
    pbl_value in[MAXIN], outv[4];
    char err[512] = "";
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        return 0;
    for (int i = 0; i < c->n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        pbl_status s = i == c->label ? pbl_graph_add_variable(g, name, PBL_VALUE_LABEL, PBL_I32, c->in[i], &in[i])
                                     : pbl_graph_add_variable(g, name, PBL_VALUE_PARAM, PBL_F32, c->in[i], &in[i]);
        if (s != PBL_OK)
            goto done;
    }
    pbl_node_desc d = { .op = c->op, .name = "node", .inputs = in, .n_inputs = c->n_in, .attrs = c->at, .n_attrs = c->n_at };
    pbl_node node;
    if (pbl_graph_add_node(g, &d, &node, outv) != PBL_OK) {
        fprintf(stderr, "%s: %s\n", c->op, pbl_graph_errmsg(g));
        goto done;
    }
    pbl_node_info ni;
    pbl_graph_node_info(g, node, &ni);
    *n_out = ni.n_outputs;
    for (int k = 0; k < *n_out; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", k);
        pbl_graph_set_output(g, name, outv[k]);
    }
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = backend;
    o.streams = streams;
    o.cuda_graph = graph;
    o.comm_overlap = 0; /* bucket_pack, allreduce, bucket_unpack: the communication stream is the CPU's */
    if (pbl_exec_create(&e, g, &o, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "%s: exec_create: %s\n", c->op, err);
        goto done;
    }
    uint64_t seed = 1234;
    for (int i = 0; i < c->n_in; i++) {
        int64_t n = numel(c->in[i]);
        void *buf = malloc((size_t)(n ? n : 1) * 4);
        for (int64_t j = 0; j < n; j++) {
            if (i == c->label)
                ((int32_t *)buf)[j] = (int32_t)(rng_next(&seed) % (uint64_t)c->classes);
            else if (levels > 1)
                ((float *)buf)[j] = c->lo + (c->hi - c->lo) * (float)(rng_next(&seed) % (uint64_t)levels) /
                                                (float)(levels - 1);
            else
                ((float *)buf)[j] = rng_uniform(&seed, c->lo, c->hi);
        }
        pbl_status s = pbl_exec_write(e, in[i], buf, (size_t)n * 4);
        free(buf);
        if (s != PBL_OK) {
            fprintf(stderr, "%s: write: %s\n", c->op, pbl_exec_errmsg(e));
            goto done;
        }
    }
    for (int r = 0; r < 2; r++)
        if (pbl_exec_run(e) != PBL_OK) {
            fprintf(stderr, "%s: run %d: %s\n", c->op, r, pbl_exec_errmsg(e));
            goto done;
        }
    for (int k = 0; k < *n_out; k++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, outv[k], &vi);
        out_n[k] = numel(vi.shape);
        out[k] = malloc((size_t)(out_n[k] ? out_n[k] : 1) * 4);
        if (pbl_exec_read(e, outv[k], out[k], (size_t)out_n[k] * 4) != PBL_OK) {
            fprintf(stderr, "%s: read: %s\n", c->op, pbl_exec_errmsg(e));
            goto done;
        }
    }
    ok = 1;
done:
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    return ok;
}

static void compare_op(const op_case *c, int streams, int graph)
{
    float *want[4] = { 0 }, *got[4] = { 0 };
    int64_t nw[4], ng[4];
    int kw = 0, kg = 0;
    int okw = run_op(c, PBL_BACKEND_CPU, 1, 0, want, nw, &kw);
    int okg = run_op(c, other, streams, graph, got, ng, &kg);
    CHECK(okw && okg, "%s: did not run (streams %d, graph %d)", c->op, streams, graph);
    for (int k = 0; okw && okg && k < kw; k++) {
        double worst = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < nw[k]; i++) {
            double d = fabs((double)got[k][i] - (double)want[k][i]) / (1.0 + fabs((double)want[k][i]));
            if (!(d <= worst)) { /* NaN counts as worst */
                worst = isnan(d) ? INFINITY : d;
                at = i;
            }
        }
        CHECK(worst <= c->tol, "%s output %d (streams %d, graph %d): element %lld is %.9g, cpu %.9g (rel %.3g > %.3g)",
              c->op, k, streams, graph, (long long)at, (double)got[k][at], (double)want[k][at], worst, c->tol);
    }
    for (int k = 0; k < 4; k++) {
        free(want[k]);
        free(got[k]);
    }
}

#define S(...) PBL_SHAPE(__VA_ARGS__)
static const int64_t ax1[] = { 1 }, ax02[] = { 0, 2 }, sh6[] = { 6 }, sh46[] = { 4, 6 }, sh64[] = { 6, 4 }, perm201[] = { 2, 0, 1 };
static const int64_t sh23[] = { 2, 3 }, sh70[] = { 70 }, sh3170[] = { 3, 1, 70 }, sh91[] = { 9, 1 };
/* window attributes of the conv and pool cases */
static const int64_t one2[] = { 1, 1 }, two2[] = { 2, 2 }, s21[] = { 2, 1 }, s12[] = { 1, 2 }, pad1[] = { 1, 1, 1, 1 },
                     pad0110[] = { 0, 1, 1, 0 }, pad2011[] = { 2, 0, 1, 1 }, pad1120[] = { 1, 1, 2, 0 },
                     pad1002[] = { 1, 0, 0, 2 }, k3[] = { 3, 3 }, k32[] = { 3, 2 }, k23[] = { 2, 3 };
/* the shapes the gradient ops make */
static const int64_t x2376[] = { 2, 3, 7, 6 }, w4333[] = { 4, 3, 3, 3 }, x1497[] = { 1, 4, 9, 7 },
                     w6232[] = { 6, 2, 3, 2 }, x2286[] = { 2, 2, 8, 6 }, w3233[] = { 3, 2, 3, 3 },
                     x2355[] = { 2, 3, 5, 5 }, w3133[] = { 3, 1, 3, 3 }, x3543[] = { 3, 5, 4, 3 },
                     w2511[] = { 2, 5, 1, 1 }, x2433[] = { 2, 4, 3, 3 }, w6211[] = { 6, 2, 1, 1 },
                     x1277[] = { 1, 2, 7, 7 }, w2211[] = { 2, 2, 1, 1 }, x3_4_300[] = { 3, 4, 300, 300 },
                     w2433[] = { 2, 4, 3, 3 }, x1_32_170[] = { 1, 32, 170, 170 }, w2_32_33[] = { 2, 32, 3, 3 },
                     x1257[] = { 1, 2, 5, 7 }, x2196[] = { 2, 1, 9, 6 }, x3266[] = { 3, 2, 6, 6 },
                     x1354[] = { 1, 3, 5, 4 }, x2345[] = { 2, 3, 4, 5 }, x327[] = { 3, 2, 7 },
                     x2_2_33_31[] = { 2, 2, 33, 31 };
/* 1-D and 3-D windows (ops/shared/geometry.h: unit leading slots) */
static const int64_t s121[] = { 1, 2, 1 }, pad3[] = { 1, 0, 1, 0, 1, 1 }, d112[] = { 1, 1, 2 }, k222[] = { 2, 2, 2 },
                     st2[] = { 2 }, pad12[] = { 1, 2 }, k3x1[] = { 3 }, pad1x1[] = { 1 }, x12456[] = { 1, 2, 4, 5, 6 },
                     w32222[] = { 3, 2, 2, 2, 2 }, x249[] = { 2, 4, 9 }, w423[] = { 4, 2, 3 }, x238[] = { 2, 3, 8 };
#define NDIM(name, v) PBL_ATTR_INTS(name, v, (int64_t)(sizeof v / sizeof v[0]))
/* resize: the shapes made (y, and x for the gradient) */
static const int64_t rs2373[] = { 2, 3, 7, 3 }, rs2345[] = { 2, 3, 4, 5 }, rs257[] = { 2, 5, 7 }, rs234[] = { 2, 3, 4 },
                     rs1268[] = { 1, 2, 6, 8 }, rs1234[] = { 1, 2, 3, 4 };

/* the indexing cases */
static const int64_t sl_st[] = { 1, 3, 0 }, sl_sp[] = { 1, -2, 3 }, sl_sz[] = { 2, 2, 2 }, x345[] = { 3, 4, 5 },
                     pd_c[] = { 0, 1, -1, 0, 2, 3 }, pd_r[] = { 0, 1, 2, 0, 1, 1 }, pd_e[] = { 0, 0, 4, 0, 1, 3 },
                     x256[] = { 2, 5, 6 }, x374[] = { 3, 7, 4 };
#define ATTRS(...) { __VA_ARGS__ }, (int)(sizeof((pbl_attr[]){ __VA_ARGS__ }) / sizeof(pbl_attr))
#define STRIDE(v)  PBL_ATTR_INTS("stride", v, 2)
#define PAD(v)     PBL_ATTR_INTS("pad", v, 4)
#define DIL(v)     PBL_ATTR_INTS("dilation", v, 2)
#define GROUPS(n)  PBL_ATTR_INT("groups", n)
#define KERNEL(v)  PBL_ATTR_INTS("kernel", v, 2)
#define MADE(v)    PBL_ATTR_INTS("shape", v, (int64_t)(sizeof v / sizeof v[0]))
/* elementwise_chain programs (graph/ir/fused_codes.h: 1 relu, 2 sigmoid, 3 tanh, 4 gelu, 5 add, 6 sub,
 * 7 mul, 8 div, 9 radd, 10 rsub, 11 rmul, 12 rdiv); together they use every code, the last
 * two are single steps, the fourth is PBL_MAX_INTS long */
static const int64_t chain1[] = { 1, 5, 2, 7 }, chain2[] = { 6, 3, 10, 8 }, chain3[] = { 4, 9, 11, 12 },
                     chain4[] = { 3, 9, 1, 10, 2, 11, 8, 5 }, chain5[] = { 12 }, chain6[] = { 4 };

/* Every op with a CUDA kernel against the CPU, 1 and 2 streams, eager and graph. */
static void run_cases(void)
{
    const op_case cases[] = {
    { "fully_connected", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "fully_connected", 2, { S(8, 16), S(12, 16) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "matmul", 2, { S(2, 5, 7), S(2, 7, 3) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "matmul", 2, { S(7, 5), S(3, 7) }, -1, 0, { PBL_ATTR_INT("trans_a", 1), PBL_ATTR_INT("trans_b", 1) }, 2, -1, 1, 1e-4 },
    { "add", 2, { S(4, 6), S(6) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "sub", 2, { S(4, 6), S(4, 1) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "mul", 2, { S(2, 3, 4), S(3, 1) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "div", 2, { S(4, 6), S(4, 6) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-6 },
    { "scale", 1, { S(5, 3) }, -1, 0, { PBL_ATTR_FLOAT("alpha", -0.75) }, 1, -1, 1, 1e-6 },
    { "add_n", 3, { S(5, 3), S(5, 3), S(5, 3) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "fill", 0, { { 0 } }, -1, 0, { PBL_ATTR_INTS("shape", sh46, 2), PBL_ATTR_FLOAT("value", 2.5) }, 2, 0, 1, 0 },
    { "copy", 1, { S(7) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "reshape", 1, { S(4, 6) }, -1, 0, { PBL_ATTR_INTS("shape", sh64, 2) }, 1, -1, 1, 0 },
    { "flatten", 1, { S(2, 3, 4) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "relu", 1, { S(9, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "sigmoid", 1, { S(9, 7) }, -1, 0, { { 0 } }, 0, -4, 4, 1e-5 },
    { "tanh", 1, { S(9, 7) }, -1, 0, { { 0 } }, 0, -4, 4, 1e-5 },
    { "gelu", 1, { S(9, 7) }, -1, 0, { { 0 } }, 0, -4, 4, 1e-5 },
    { "relu_grad", 2, { S(9, 7), S(9, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "sigmoid_grad", 2, { S(9, 7), S(9, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "tanh_grad", 2, { S(9, 7), S(9, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "gelu_grad", 2, { S(9, 7), S(9, 7) }, -1, 0, { { 0 } }, 0, -3, 3, 1e-5 },
    { "softmax", 1, { S(5, 7) }, -1, 0, { { 0 } }, 0, -5, 5, 1e-5 },
    { "log_softmax", 1, { S(5, 7) }, -1, 0, { { 0 } }, 0, -5, 5, 1e-5 },
    { "softmax_grad", 2, { S(5, 7), S(5, 7) }, -1, 0, { { 0 } }, 0, 0, 1, 1e-5 },
    { "log_softmax_grad", 2, { S(5, 7), S(5, 7) }, -1, 0, { { 0 } }, 0, -3, 0, 1e-5 },
    { "softmax_cross_entropy", 2, { S(300, 5), S(300) }, 1, 5, { { 0 } }, 0, -5, 5, 1e-5 },
    { "softmax_cross_entropy_grad", 3, { S(6, 5), S(6), { 0 } }, 1, 5, { { 0 } }, 0, -5, 5, 1e-5 },
    { "mse_loss", 2, { S(40, 5), S(40, 5) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "mse_loss_grad", 3, { S(4, 5), S(4, 5), { 0 } }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "sum", 1, { S(4, 6) }, -1, 0, { PBL_ATTR_INTS("axes", ax1, 1) }, 1, -1, 1, 1e-5 },
    { "sum", 1, { S(40, 60) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "mean", 1, { S(3, 4, 5) }, -1, 0, { PBL_ATTR_INTS("axes", ax02, 2), PBL_ATTR_INT("keepdims", 1) }, 2, -1, 1, 1e-5 },
    { "sum_to", 1, { S(4, 6) }, -1, 0, { PBL_ATTR_INTS("shape", sh6, 1) }, 1, -1, 1, 1e-5 },
    /* more rows than a block's 8 warps, columns over 3 blocks of 32 (the last partial); a
     * middle dim reduced; two dims reduced around a kept one */
    { "sum_to", 1, { S(100, 70) }, -1, 0, { PBL_ATTR_INTS("shape", sh70, 1) }, 1, -1, 1, 1e-5 },
    { "sum_to", 1, { S(3, 9, 70) }, -1, 0, { PBL_ATTR_INTS("shape", sh3170, 3) }, 1, -1, 1, 1e-5 },
    { "sum_to", 1, { S(3, 9, 70) }, -1, 0, { PBL_ATTR_INTS("shape", sh91, 2) }, 1, -1, 1, 1e-5 },
    { "broadcast_to", 1, { S(6) }, -1, 0, { PBL_ATTR_INTS("shape", sh46, 2) }, 1, -1, 1, 0 },
    { "dropout", 1, { S(1000) }, -1, 0, { PBL_ATTR_FLOAT("p", 0.3), PBL_ATTR_INT("seed", 5) }, 2, -1, 1, 0 },
    { "dropout", 2, { S(1000), S(1) }, -1, 0, { PBL_ATTR_FLOAT("p", 0.3), PBL_ATTR_INT("seed", 5) }, 2, -1, 1, 0 }, /* switch on */
    { "dropout", 2, { S(1000), S(1) }, -1, 0, { PBL_ATTR_FLOAT("p", 0.3), PBL_ATTR_INT("seed", 5) }, 2, 0, 0, 0 },  /* off: x = 0 too */
    { "sgd", 2, { S(33), S(33) }, -1, 0, { PBL_ATTR_FLOAT("lr", 0.1), PBL_ATTR_FLOAT("weight_decay", 0.01) }, 2, -1, 1, 1e-6 },
    { "sgd_momentum", 3, { S(33), S(33), S(33) }, -1, 0, { PBL_ATTR_FLOAT("lr", 0.1), PBL_ATTR_FLOAT("momentum", 0.9) }, 2, -1, 1, 1e-6 },
    { "adam", 5, { S(33), S(33), S(33), S(33), S(1) }, -1, 0, { PBL_ATTR_FLOAT("lr", 0.01) }, 1, 0, 1, 1e-5 },
    /* past 4096 elements: several blocks, the step counted by a launch of its own */
    { "adam", 5, { S(5000), S(5000), S(5000), S(5000), S(1) }, -1, 0, { PBL_ATTR_FLOAT("lr", 0.01) }, 1, 0, 1, 1e-5 },
    /* runtime scalars (the "scalars" mask: 1 lr, 2 weight_decay, 4 step) and AdamW */
    { "sgd", 4, { S(33), S(33), S(1), S(1) }, -1, 0, { PBL_ATTR_INT("scalars", 3) }, 1, -1, 1, 1e-6 },
    { "sgd_momentum", 4, { S(33), S(33), S(33), S(1) }, -1, 0, { PBL_ATTR_INT("scalars", 2) }, 1, -1, 1, 1e-6 },
    { "adam", 8, { S(33), S(33), S(33), S(33), S(1), S(1), S(1), S(1) }, -1, 0, { PBL_ATTR_INT("scalars", 7), PBL_ATTR_INT("decoupled", 1) }, 2, 0, 1, 1e-5 },
    { "adam", 5, { S(33), S(33), S(33), S(33), S(1) }, -1, 0, { PBL_ATTR_FLOAT("lr", 0.01), PBL_ATTR_FLOAT("weight_decay", 0.1), PBL_ATTR_INT("decoupled", 1) }, 3, 0, 1, 1e-5 },
    /* batch_norm with running statistics: the switch on (inputs in [0.5, 1]: var > 0) ... */
    { "batch_norm", 6, { S(4, 3, 5), S(3), S(3), S(3), S(3), S(1) }, -1, 0, { { 0 } }, 0, 0.5f, 1, 1e-5 },
    { "batch_norm_grad", 6, { S(4, 3, 5), S(4, 3, 5), S(3), S(3), S(3), S(1) }, -1, 0, { { 0 } }, 0, 0.5f, 1, 1e-5 },
    { "batch_norm_update", 6, { S(3), S(3), S(3), S(3), S(1), S(1) }, -1, 0, { PBL_ATTR_INT("set_size", 20) }, 1, 0.5f, 1, 1e-5 },
    /* ... and off (inputs 0: the running statistics and the switch) */
    { "batch_norm", 6, { S(4, 3, 5), S(3), S(3), S(3), S(3), S(1) }, -1, 0, { { 0 } }, 0, 0, 0, 1e-5 },
    { "global_norm", 3, { S(33), S(4, 5), S(1) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "global_norm", 1, { S(3000) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    /* several blocks (at least 4096 elements each) whose ranges cross the inputs' ends, then
     * more than 256 x 4096 elements: 241 blocks of 4352 */
    { "global_norm", 3, { S(5000), S(3), S(40000) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "global_norm", 2, { S(1024, 1024), S(1) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "clip_by_norm", 2, { S(5, 7), S(1) }, -1, 0, { PBL_ATTR_FLOAT("max_norm", 0.5) }, 1, 0, 2, 1e-6 },
    { "transpose", 1, { S(3, 4, 5) }, -1, 0, { PBL_ATTR_INTS("perm", perm201, 3) }, 1, -1, 1, 0 },
    { "transpose", 1, { S(6, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "concat", 3, { S(2, 3, 4), S(2, 1, 4), S(2, 2, 4) }, -1, 0, { PBL_ATTR_INT("axis", 1) }, 1, -1, 1, 0 },
    { "concat", 2, { S(2, 3), S(2, 5) }, -1, 0, { PBL_ATTR_INT("axis", -1) }, 1, -1, 1, 0 },
    { "concat", 2, { S(2, 3), S(4, 3) }, -1, 0, { PBL_ATTR_INT("axis", 0) }, 1, -1, 1, 0 }, /* outer 1: 1-D copies */
    /* data parallelism's ops; allreduce with no communicator (one rank): a copy, mean or not */
    { "bucket_pack", 3, { S(2, 3), S(5), S(4, 1) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "bucket_unpack", 1, { S(15) }, -1, 0, { PBL_ATTR_INT("offset", 6), PBL_ATTR_INTS("shape", sh23, 2) }, 2, -1, 1, 0 },
    { "allreduce", 1, { S(33) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "allreduce", 1, { S(33) }, -1, 0, { PBL_ATTR_INT("mean", 0) }, 1, -1, 1, 0 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 0), PBL_ATTR_INT("bias_after", 0) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 0), PBL_ATTR_INT("bias_after", 1) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 2, { S(8, 16), S(12, 16) }, -1, 0, { PBL_ATTR_INT("act", 0) }, 1, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 1), PBL_ATTR_INT("bias_after", 0) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 1), PBL_ATTR_INT("bias_after", 1) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 2, { S(8, 16), S(12, 16) }, -1, 0, { PBL_ATTR_INT("act", 1) }, 1, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 2), PBL_ATTR_INT("bias_after", 0) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 2), PBL_ATTR_INT("bias_after", 1) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 2, { S(8, 16), S(12, 16) }, -1, 0, { PBL_ATTR_INT("act", 2) }, 1, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 3), PBL_ATTR_INT("bias_after", 0) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 3), PBL_ATTR_INT("bias_after", 1) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 2, { S(8, 16), S(12, 16) }, -1, 0, { PBL_ATTR_INT("act", 3) }, 1, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 4), PBL_ATTR_INT("bias_after", 0) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 3, { S(8, 16), S(12, 16), S(12) }, -1, 0, { PBL_ATTR_INT("act", 4), PBL_ATTR_INT("bias_after", 1) }, 2, -1, 1, 1e-4 },
    { "fully_connected_act", 2, { S(8, 16), S(12, 16) }, -1, 0, { PBL_ATTR_INT("act", 4) }, 1, -1, 1, 1e-4 },
    /* the backward fusion's ops: dw with db through BGRADB (db has 12 entries and x 16 columns,
     * so BGRADA's sum of x would not even fit), a batch of 300 rows summed; products + act grads */
    { "fully_connected_grad_wb", 2, { S(8, 12), S(8, 16) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "fully_connected_grad_wb", 2, { S(300, 5), S(300, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "matmul_act_grad", 3, { S(8, 12), S(12, 16), S(8, 16) }, -1, 0, { PBL_ATTR_INT("act", 1) }, 1, -1, 1, 1e-4 },
    { "matmul_act_grad", 3, { S(8, 12), S(12, 16), S(8, 16) }, -1, 0, { PBL_ATTR_INT("act", 2) }, 1, -1, 1, 1e-4 },
    { "matmul_act_grad", 3, { S(8, 12), S(12, 16), S(8, 16) }, -1, 0, { PBL_ATTR_INT("act", 3) }, 1, -1, 1, 1e-4 },
    { "matmul_act_grad", 3, { S(8, 12), S(12, 16), S(8, 16) }, -1, 0, { PBL_ATTR_INT("act", 4) }, 1, -3, 3, 1e-4 },
    { "matmul_act_grad", 3, { S(12, 8), S(16, 12), S(8, 16) }, -1, 0, { PBL_ATTR_INT("trans_a", 1), PBL_ATTR_INT("trans_b", 1), PBL_ATTR_INT("act", 1) }, 3, -1, 1, 1e-4 },
    /* conv2d: same padding + bias; groups with stride 2,1 and asymmetric pads; dilation; depthwise
     * stride 2; 1x1 read in place (with and without groups); 1x1 stride 2 (inputs no output
     * reads). Columns larger than one chunk: `chunked` below. */
    { "conv2d", 3, { S(2, 3, 7, 6), S(4, 3, 3, 3), S(4) }, -1, 0, ATTRS(STRIDE(one2), PAD(pad1)), -1, 1, 1e-4 },
    { "conv2d", 2, { S(1, 4, 9, 7), S(6, 2, 3, 2) }, -1, 0, ATTRS(STRIDE(s21), PAD(pad0110), GROUPS(2)), -1, 1, 1e-4 },
    { "conv2d", 3, { S(2, 2, 8, 6), S(3, 2, 3, 3), S(3) }, -1, 0, ATTRS(STRIDE(s12), PAD(pad2011), DIL(s21)), -1, 1, 1e-4 },
    { "conv2d", 2, { S(2, 3, 5, 5), S(3, 1, 3, 3) }, -1, 0, ATTRS(STRIDE(two2), PAD(pad1), GROUPS(3)), -1, 1, 1e-4 },
    /* depthwise (the direct kernel): a channel multiplier of 2 with bias and dilation; 1-D and 3-D */
    { "conv2d", 3, { S(2, 3, 6, 7), S(6, 1, 3, 2), S(6) }, -1, 0, ATTRS(STRIDE(s21), PAD(pad0110), DIL(s12), GROUPS(3)), -1, 1, 1e-4 },
    { "conv2d", 2, { S(2, 4, 9), S(4, 1, 3) }, -1, 0, ATTRS(NDIM("stride", st2), NDIM("pad", pad12), GROUPS(4)), -1, 1, 1e-4 },
    { "conv2d", 3, { S(1, 2, 4, 5, 6), S(2, 1, 2, 2, 2), S(2) }, -1, 0, ATTRS(NDIM("stride", s121), NDIM("pad", pad3), GROUPS(2)), -1, 1, 1e-4 },
    { "conv2d", 3, { S(3, 5, 4, 3), S(2, 5, 1, 1), S(2) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-4 },
    { "conv2d", 2, { S(2, 4, 3, 3), S(6, 2, 1, 1) }, -1, 0, ATTRS(GROUPS(2)), -1, 1, 1e-4 },
    { "conv2d", 2, { S(1, 2, 7, 7), S(2, 2, 1, 1) }, -1, 0, ATTRS(STRIDE(two2)), -1, 1, 1e-4 },
    /* 3-D: stride 1,2,1, pads begin 1,0,1 end 0,1,1, dilation 1,1,2; 1-D: groups 2, stride 2,
     * pads 1,2, dilation 2; and their gradient ops */
    { "conv2d", 3, { S(1, 2, 4, 5, 6), S(3, 2, 2, 2, 2), S(3) }, -1, 0, ATTRS(NDIM("stride", s121), NDIM("pad", pad3), NDIM("dilation", d112)), -1, 1, 1e-4 },
    { "conv2d", 2, { S(2, 4, 9), S(4, 2, 3) }, -1, 0, ATTRS(NDIM("stride", st2), NDIM("pad", pad12), NDIM("dilation", st2), GROUPS(2)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(1, 3, 4, 3, 6), S(3, 2, 2, 2, 2) }, -1, 0, ATTRS(NDIM("stride", s121), NDIM("pad", pad3), NDIM("dilation", d112), MADE(x12456)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(2, 4, 4), S(4, 2, 3) }, -1, 0, ATTRS(NDIM("stride", st2), NDIM("pad", pad12), NDIM("dilation", st2), GROUPS(2), MADE(x249)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(1, 3, 4, 3, 6), S(1, 2, 4, 5, 6) }, -1, 0, ATTRS(NDIM("stride", s121), NDIM("pad", pad3), NDIM("dilation", d112), MADE(w32222)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(2, 4, 4), S(2, 4, 9) }, -1, 0, ATTRS(NDIM("stride", st2), NDIM("pad", pad12), NDIM("dilation", st2), GROUPS(2), MADE(w423)), -1, 1, 1e-4 },
    /* conv2d_grad_input (dy, w) and conv2d_grad_weight (dy, x): the same convolutions */
    { "conv2d_grad_input", 2, { S(2, 4, 7, 6), S(4, 3, 3, 3) }, -1, 0, ATTRS(STRIDE(one2), PAD(pad1), MADE(x2376)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(1, 6, 4, 7), S(6, 2, 3, 2) }, -1, 0, ATTRS(STRIDE(s21), PAD(pad0110), GROUPS(2), MADE(x1497)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(2, 3, 7, 3), S(3, 2, 3, 3) }, -1, 0, ATTRS(STRIDE(s12), PAD(pad2011), DIL(s21), MADE(x2286)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(2, 3, 3, 3), S(3, 1, 3, 3) }, -1, 0, ATTRS(STRIDE(two2), PAD(pad1), GROUPS(3), MADE(x2355)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(3, 2, 4, 3), S(2, 5, 1, 1) }, -1, 0, ATTRS(MADE(x3543)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(2, 6, 3, 3), S(6, 2, 1, 1) }, -1, 0, ATTRS(GROUPS(2), MADE(x2433)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(1, 2, 4, 4), S(2, 2, 1, 1) }, -1, 0, ATTRS(STRIDE(two2), MADE(x1277)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(2, 4, 7, 6), S(2, 3, 7, 6) }, -1, 0, ATTRS(STRIDE(one2), PAD(pad1), MADE(w4333)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(1, 6, 4, 7), S(1, 4, 9, 7) }, -1, 0, ATTRS(STRIDE(s21), PAD(pad0110), GROUPS(2), MADE(w6232)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(2, 3, 7, 3), S(2, 2, 8, 6) }, -1, 0, ATTRS(STRIDE(s12), PAD(pad2011), DIL(s21), MADE(w3233)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(2, 3, 3, 3), S(2, 3, 5, 5) }, -1, 0, ATTRS(STRIDE(two2), PAD(pad1), GROUPS(3), MADE(w3133)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(3, 2, 4, 3), S(3, 5, 4, 3) }, -1, 0, ATTRS(MADE(w2511)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(2, 6, 3, 3), S(2, 4, 3, 3) }, -1, 0, ATTRS(GROUPS(2), MADE(w6211)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(1, 2, 4, 4), S(1, 2, 7, 7) }, -1, 0, ATTRS(STRIDE(two2), MADE(w2211)), -1, 1, 1e-4 },
    /* pools: kernel 3 stride 2 pad 1; 3x2 stride 1,2 asymmetric pads; dilation 2 with pads;
     * 2x2 stride 2; 2x2 stride 1 (overlapping). Same sums in the same order: exact. */
    { "max_pool2d", 1, { S(2, 3, 7, 6) }, -1, 0, ATTRS(KERNEL(k3), STRIDE(two2), PAD(pad1)), -1, 1, 0 },
    { "max_pool2d", 1, { S(1, 2, 5, 7) }, -1, 0, ATTRS(KERNEL(k32), STRIDE(s12), PAD(pad1120)), -3, -1, 0 },
    { "max_pool2d", 1, { S(2, 1, 9, 6) }, -1, 0, ATTRS(KERNEL(k23), STRIDE(s21), PAD(pad1002), DIL(two2)), -1, 1, 0 },
    { "max_pool2d", 1, { S(1, 3, 5, 4) }, -1, 0, ATTRS(KERNEL(two2)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(2, 3, 7, 6) }, -1, 0, ATTRS(KERNEL(k3), STRIDE(two2), PAD(pad1)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(1, 2, 5, 7) }, -1, 0, ATTRS(KERNEL(k32), STRIDE(s12), PAD(pad1120)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(2, 1, 9, 6) }, -1, 0, ATTRS(KERNEL(k23), STRIDE(s21), PAD(pad1002), DIL(two2)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(3, 2, 6, 6) }, -1, 0, ATTRS(KERNEL(two2), STRIDE(two2)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(1, 3, 5, 4) }, -1, 0, ATTRS(KERNEL(two2)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(2, 3, 4, 3) }, -1, 0, ATTRS(KERNEL(k3), STRIDE(two2), PAD(pad1), MADE(x2376)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(1, 2, 6, 4) }, -1, 0, ATTRS(KERNEL(k32), STRIDE(s12), PAD(pad1120), MADE(x1257)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(2, 1, 4, 4) }, -1, 0, ATTRS(KERNEL(k23), STRIDE(s21), PAD(pad1002), DIL(two2), MADE(x2196)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(3, 2, 3, 3) }, -1, 0, ATTRS(KERNEL(two2), STRIDE(two2), MADE(x3266)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(1, 3, 4, 3) }, -1, 0, ATTRS(KERNEL(two2), MADE(x1354)), -1, 1, 0 },
    /* resize: linear half_pixel; linear align_corners resizing the channel dim too (one
     * gradient plane); nearest asymmetric floor. Same functions (ops/shared/resize.h). */
    { "resize", 1, { S(2, 3, 4, 5) }, -1, 0, ATTRS(MADE(rs2373), PBL_ATTR_INT("mode", 1)), -1, 1, 1e-6 },
    { "resize", 1, { S(2, 3, 4) }, -1, 0, ATTRS(MADE(rs257), PBL_ATTR_INT("mode", 1), PBL_ATTR_INT("coord", 2)), -1, 1, 1e-6 },
    { "resize", 1, { S(1, 2, 3, 4) }, -1, 0, ATTRS(MADE(rs1268), PBL_ATTR_INT("coord", 3), PBL_ATTR_INT("nearest", 2)), -1, 1, 0 },
    { "resize_grad", 1, { S(2, 3, 7, 3) }, -1, 0, ATTRS(MADE(rs2373), PBL_ATTR_INT("mode", 1), PBL_ATTR_INTS("x_shape", rs2345, 4)), -1, 1, 1e-6 },
    { "resize_grad", 1, { S(2, 5, 7) }, -1, 0, ATTRS(MADE(rs257), PBL_ATTR_INT("mode", 1), PBL_ATTR_INT("coord", 2), PBL_ATTR_INTS("x_shape", rs234, 3)), -1, 1, 1e-6 },
    { "resize_grad", 1, { S(1, 2, 6, 8) }, -1, 0, ATTRS(MADE(rs1268), PBL_ATTR_INT("coord", 3), PBL_ATTR_INT("nearest", 2), PBL_ATTR_INTS("x_shape", rs1234, 4)), -1, 1, 0 },
    /* 3-D with ceil; 1-D with ceil and count_pad; their gradients */
    { "max_pool2d", 1, { S(1, 2, 4, 5, 6) }, -1, 0, ATTRS(NDIM("kernel", k222), NDIM("stride", s121), NDIM("pad", pad3), PBL_ATTR_INT("ceil", 1)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(1, 2, 4, 5, 6) }, -1, 0, ATTRS(NDIM("kernel", k222), NDIM("stride", s121), NDIM("pad", pad3), PBL_ATTR_INT("count_pad", 1)), -1, 1, 0 },
    { "avg_pool2d", 1, { S(2, 3, 8) }, -1, 0, ATTRS(NDIM("kernel", k3x1), NDIM("stride", st2), NDIM("pad", pad1x1), PBL_ATTR_INT("ceil", 1), PBL_ATTR_INT("count_pad", 1)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(2, 3, 5) }, -1, 0, ATTRS(NDIM("kernel", k3x1), NDIM("stride", st2), NDIM("pad", pad1x1), PBL_ATTR_INT("ceil", 1), PBL_ATTR_INT("count_pad", 1), MADE(x238)), -1, 1, 0 },
    { "avg_pool2d_grad", 1, { S(1, 2, 4, 3, 7) }, -1, 0, ATTRS(NDIM("kernel", k222), NDIM("stride", s121), NDIM("pad", pad3), PBL_ATTR_INT("count_pad", 1), MADE(x12456)), -1, 1, 0 },
    { "global_avg_pool", 1, { S(2, 3, 4, 5) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "global_avg_pool", 1, { S(3, 2, 7) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "global_avg_pool", 1, { S(2, 2, 33, 31) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "global_avg_pool_grad", 1, { S(2, 3, 1, 1) }, -1, 0, ATTRS(MADE(x2345)), -1, 1, 0 },
    { "global_avg_pool_grad", 1, { S(3, 2, 1) }, -1, 0, ATTRS(MADE(x327)), -1, 1, 0 },
    { "global_avg_pool_grad", 1, { S(2, 2, 1, 1) }, -1, 0, ATTRS(MADE(x2_2_33_31)), -1, 1, 0 },
    { "batch_norm", 3, { S(4, 3, 5, 5), S(3), S(3) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-5 },
    { "batch_norm", 3, { S(6, 5), S(5), S(5) }, -1, 0, { PBL_ATTR_FLOAT("eps", 0.1) }, 1, -1, 1, 1e-5 },
    { "batch_norm", 3, { S(2, 4, 7), S(4), S(4) }, -1, 0, { PBL_ATTR_FLOAT("eps", 1e-3) }, 1, -1, 1, 1e-5 },
    { "batch_norm", 3, { S(1, 2, 30, 30), S(2), S(2) }, -1, 0, { { 0 } }, 0, 0, 3, 1e-5 },
    { "batch_norm_grad", 5, { S(4, 3, 5, 5), S(4, 3, 5, 5), S(3), S(3), S(3) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-5 },
    { "batch_norm_grad", 5, { S(6, 5), S(6, 5), S(5), S(5), S(5) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-5 },
    { "batch_norm_grad", 5, { S(2, 3, 20, 20), S(2, 3, 20, 20), S(3), S(3), S(3) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-5 },
    { "layer_norm", 3, { S(6, 10), S(10), S(10) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-5 },
    { "layer_norm", 3, { S(2, 3, 17), S(17), S(17) }, -1, 0, { PBL_ATTR_FLOAT("eps", 0.01) }, 1, -1, 1, 1e-5 },
    { "layer_norm", 3, { S(5), S(5), S(5) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-5 },
    { "layer_norm", 3, { S(3, 700), S(700), S(700) }, -1, 0, { { 0 } }, 0, 0, 3, 1e-5 },
    { "layer_norm_grad", 5, { S(6, 10), S(6, 10), S(10), S(6, 1), S(6, 1) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-5 },
    { "layer_norm_grad", 5, { S(2, 3, 300), S(2, 3, 300), S(300), S(2, 3, 1), S(2, 3, 1) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-5 },
    { "layer_norm_grad", 5, { S(7), S(7), S(7), S(1), S(1) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-5 },
    { "layer_norm_grad", 5, { S(50, 40), S(50, 40), S(40), S(50, 1), S(50, 1) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-5 },
    { "embedding", 2, { S(6), S(10, 4) }, 0, 10, { { 0 } }, 0, -1, 1, 0 },
    { "embedding", 2, { S(2, 3), S(7, 300) }, 0, 7, { { 0 } }, 0, -1, 1, 0 },
    { "embedding_grad", 2, { S(2, 3, 5), S(2, 3) }, 1, 4, { PBL_ATTR_INT("num_embeddings", 4) }, 1, -1, 1, 0 },
    { "embedding_grad", 2, { S(600, 3), S(600) }, 1, 5, { PBL_ATTR_INT("num_embeddings", 5) }, 1, -1, 1, 0 },
    { "embedding_grad", 2, { S(40, 300), S(40) }, 1, 7, { PBL_ATTR_INT("num_embeddings", 9) }, 1, -1, 1, 0 },
    { "embedding_grad", 2, { S(700, 3), S(700) }, 1, 50, { PBL_ATTR_INT("num_embeddings", 60) }, 1, -1, 1, 0 },
    { "elementwise_chain", 3, { S(9, 7), S(9, 7), S(9, 7) }, -1, 0, { PBL_ATTR_INTS("codes", chain1, 4) }, 1, -1, 1, 1e-5 },
    { "elementwise_chain", 4, { S(300), S(300), S(300), S(300) }, -1, 0, { PBL_ATTR_INTS("codes", chain2, 4) }, 1, 0.5f, 2, 1e-5 },
    { "elementwise_chain", 4, { S(2, 3, 4), S(2, 3, 4), S(2, 3, 4), S(2, 3, 4) }, -1, 0, { PBL_ATTR_INTS("codes", chain3, 4) }, 1, 0.5f, 2, 1e-5 },
    { "elementwise_chain", 6, { S(1000), S(1000), S(1000), S(1000), S(1000), S(1000) }, -1, 0, { PBL_ATTR_INTS("codes", chain4, 8) }, 1, 0.5f, 2, 1e-5 },
    { "elementwise_chain", 2, { S(3, 4, 5), S(3, 4, 5) }, -1, 0, { PBL_ATTR_INTS("codes", chain5, 1) }, 1, 0.5f, 2, 1e-6 },
    { "elementwise_chain", 1, { S(17) }, -1, 0, { PBL_ATTR_INTS("codes", chain6, 1) }, 1, -4, 4, 1e-5 },
    { "fully_connected_packed", 3, { S(8, 16), S(2, 16, 16), S(20) }, -1, 0, { PBL_ATTR_INT("out", 20) }, 1, -1, 1, 1e-4 },
    { "fully_connected_packed", 2, { S(5, 24), S(2, 24, 16) }, -1, 0, { PBL_ATTR_INT("out", 32) }, 1, -1, 1, 1e-4 },
    { "fully_connected_packed", 3, { S(3, 7), S(1, 7, 16), S(5) }, -1, 0, { PBL_ATTR_INT("out", 5) }, 1, -1, 1, 1e-4 },
    { "fully_connected_packed", 2, { S(9, 33), S(4, 33, 16) }, -1, 0, { PBL_ATTR_INT("out", 49) }, 1, -1, 1, 1e-4 },
    { "slice", 1, { S(3, 4, 5) }, -1, 0, ATTRS(PBL_ATTR_INTS("starts", sl_st, 3), PBL_ATTR_INTS("steps", sl_sp, 3), PBL_ATTR_INTS("sizes", sl_sz, 3)), -1, 1, 0 },
    { "slice_grad", 1, { S(2, 2, 2) }, -1, 0, ATTRS(PBL_ATTR_INTS("starts", sl_st, 3), PBL_ATTR_INTS("steps", sl_sp, 3), MADE(x345)), -1, 1, 0 },
    { "pad", 1, { S(2, 5, 6) }, -1, 0, ATTRS(PBL_ATTR_INTS("pads", pd_c, 6), PBL_ATTR_FLOAT("value", 0.25)), -1, 1, 0 },
    { "pad", 1, { S(2, 5, 6) }, -1, 0, ATTRS(PBL_ATTR_INTS("pads", pd_r, 6), PBL_ATTR_INT("mode", 1)), -1, 1, 0 },
    { "pad_grad", 1, { S(2, 7, 9) }, -1, 0, ATTRS(PBL_ATTR_INTS("pads", pd_r, 6), PBL_ATTR_INT("mode", 1), MADE(x256)), -1, 1, 0 },
    { "pad_grad", 1, { S(2, 6, 13) }, -1, 0, ATTRS(PBL_ATTR_INTS("pads", pd_e, 6), PBL_ATTR_INT("mode", 2), MADE(x256)), -1, 1, 0 },
    { "gather", 2, { S(3, 7, 4), S(2, 5) }, 1, 7, ATTRS(PBL_ATTR_INT("axis", 1)), -1, 1, 0 },
    { "gather_grad", 2, { S(3, 2, 5, 4), S(2, 5) }, 1, 7, ATTRS(PBL_ATTR_INT("axis", 1), MADE(x374)), -1, 1, 0 },
    { "cast", 1, { S(4, 6) }, 0, 50, ATTRS(PBL_ATTR_INT("to", PBL_F32)), -1, 1, 0 },
    /* reduce's modes (0 max, 2 prod, 4 L2, 5 log-sum-exp, 7 sum of squares), their gradient,
     * argmax/argmin, hardmax and nll_loss with its gradient */
    { "reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INTS("axes", ax1, 1), PBL_ATTR_INT("mode", 0) }, 2, -1, 1, 0 },
    { "reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INTS("axes", ax02, 2), PBL_ATTR_INT("mode", 2), PBL_ATTR_INT("keepdims", 1) }, 3, 0.5f, 1.5f, 1e-5 },
    { "reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INT("mode", 4) }, 1, -1, 1, 1e-5 },
    { "reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INTS("axes", ax1, 1), PBL_ATTR_INT("mode", 5) }, 2, -3, 3, 1e-5 },
    { "reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INTS("axes", ax02, 2), PBL_ATTR_INT("mode", 7) }, 2, -1, 1, 1e-5 },
    { "reduce_grad", 3, { S(4, 6, 5), S(4, 5), S(4, 5) }, -1, 0, { PBL_ATTR_INTS("axes", ax1, 1), PBL_ATTR_INT("mode", 5) }, 2, -1, 1, 1e-5 },
    { "reduce_grad", 3, { S(4, 6, 5), S(1, 6, 1), S(1, 6, 1) }, -1, 0, { PBL_ATTR_INTS("axes", ax02, 2), PBL_ATTR_INT("mode", 2), PBL_ATTR_INT("keepdims", 1) }, 3, 0.5f, 1.5f, 1e-5 },
    { "reduce_grad", 3, { S(4, 6, 5), S(6), S(6) }, -1, 0, { PBL_ATTR_INTS("axes", ax02, 2), PBL_ATTR_INT("mode", 3) }, 2, -1, 1, 1e-6 },
    { "arg_reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INT("axis", 1) }, 1, -1, 1, 0 },
    { "arg_reduce", 1, { S(4, 6, 5) }, -1, 0, { PBL_ATTR_INT("axis", -1), PBL_ATTR_INT("mode", 1), PBL_ATTR_INT("select_last", 1), PBL_ATTR_INT("keepdims", 0) }, 4, -1, 1, 0 },
    { "hardmax", 1, { S(7, 9) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "nll_loss", 3, { S(6, 5, 3), S(6, 3), S(5) }, 1, 5, { PBL_ATTR_INT("ignore_index", 2) }, 1, 0.1f, 1, 1e-5 },
    { "nll_loss", 2, { S(6, 5, 3), S(6, 3) }, 1, 5, { PBL_ATTR_INT("reduction", 0) }, 1, -1, 1, 1e-6 },
    { "nll_loss", 2, { S(8, 5), S(8) }, 1, 5, { PBL_ATTR_INT("reduction", 1) }, 1, -1, 1, 1e-5 },
    { "nll_loss", 2, { S(300, 5), S(300) }, 1, 5, { { 0 } }, 0, -1, 1, 1e-5 }, /* more targets than threads */
    { "nll_loss_grad", 3, { S(300, 5), S(300), { 0 } }, 1, 5, { { 0 } }, 0, -1, 1, 1e-5 },
    { "nll_loss_grad", 4, { S(6, 5, 3), S(6, 3), { 0 }, S(5) }, 1, 5, { PBL_ATTR_INT("ignore_index", 2) }, 1, 0.1f, 1, 1e-5 },
    { "nll_loss_grad", 3, { S(6, 5, 3), S(6, 3), S(6, 3) }, 1, 5, { PBL_ATTR_INT("reduction", 0) }, 1, -1, 1, 1e-6 },
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++)
        for (int streams = 1; streams <= 2; streams++)
            for (int graph = 0; graph <= 1; graph++)
                compare_op(&cases[i], streams, graph);
    /* The math family (ops/math.c, one formula table for both backends): every unary map and
     * its gradient at the default attributes (each on its domain: log, sqrt, pow's base
     * positive, asin, acos, atanh inside (-1, 1), acosh above 1), the
     * binary maps and their gradients with b broadcast, comparisons on 3 levels (ties for
     * equal), logical_not and where on 0/1 ints. */
    static const char *const math_unary[] = {
#define PBL__NAME(n) #n,
        PBL__MATH_UNARY_LIST(PBL__NAME, )
#undef PBL__NAME
    };
    int nm = 0;
    for (size_t i = 0; i < sizeof math_unary / sizeof math_unary[0]; i++) {
        const char *m = math_unary[i];
        int pos = strcmp(m, "log") == 0 || strcmp(m, "sqrt") == 0, acosh = strcmp(m, "acosh") == 0;
        int unit = strcmp(m, "asin") == 0 || strcmp(m, "acos") == 0 || strcmp(m, "atanh") == 0;
        float lo = pos ? 0.1f : acosh ? 1.1f : unit ? -0.9f : -3, hi = unit ? 0.9f : 3;
        char grad[64];
        snprintf(grad, sizeof grad, "%s_grad", m);
        const op_case u[] = {
            { m, 1, { S(9, 7) }, -1, 0, { { 0 } }, 0, lo, hi, 1e-5 },
            { grad, 2, { S(9, 7), S(9, 7) }, -1, 0, { { 0 } }, 0, lo, hi, 1e-5 },
        };
        for (int k = 0; k < 2; k++, nm++)
            for (int streams = 1; streams <= 2; streams++)
                compare_op(&u[k], streams, streams - 1);
    }
    const op_case math_cases[] = {
    { "pow", 2, { S(4, 6), S(6) }, -1, 0, { { 0 } }, 0, 0.5f, 2, 1e-5 },
    { "pow_grad", 3, { S(4, 6), S(4, 6), S(4, 1) }, -1, 0, { PBL_ATTR_INT("wrt", 1) }, 1, 0.5f, 2, 1e-5 },
    { "prelu", 2, { S(2, 3, 4), S(3, 1) }, -1, 0, { { 0 } }, 0, -1, 1, 1e-6 },
    { "prelu_grad", 3, { S(2, 3, 4), S(2, 3, 4), S(3, 1) }, -1, 0, { PBL_ATTR_INT("wrt", 0) }, 1, -1, 1, 1e-6 },
    { "prelu_grad", 3, { S(2, 3, 4), S(2, 3, 4), S(3, 1) }, -1, 0, { PBL_ATTR_INT("wrt", 1) }, 1, -1, 1, 1e-6 },
    { "min", 2, { S(4, 6), S(4, 6) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "max_grad", 3, { S(4, 6), S(4, 6), S(6) }, -1, 0, { PBL_ATTR_INT("wrt", 1) }, 1, -1, 1, 0 },
    { "fmod", 2, { S(4, 6), S(6) }, -1, 0, { { 0 } }, 0, -3, 3, 1e-6 },
    { "fmod_grad", 3, { S(4, 6), S(4, 6), S(6) }, -1, 0, { PBL_ATTR_INT("wrt", 1) }, 1, -3, 3, 0 },
    { "is_nan", 1, { S(5, 3) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "is_inf", 1, { S(5, 3) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "where", 3, { S(5, 3), S(5, 3), S(5, 3) }, 0, 2, { { 0 } }, 0, -1, 1, 0 },
    { "logical_not", 1, { S(5, 3) }, 0, 2, { { 0 } }, 0, -1, 1, 0 },
    };
    const op_case math_ties[] = {
    { "equal", 2, { S(4, 6), S(6) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "less", 2, { S(4, 6), S(4, 1) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    { "greater_equal", 2, { S(4, 6), S(4, 6) }, -1, 0, { { 0 } }, 0, -1, 1, 0 },
    };
    for (size_t i = 0; i < sizeof math_cases / sizeof math_cases[0]; i++, nm++)
        for (int streams = 1; streams <= 2; streams++)
            compare_op(&math_cases[i], streams, streams - 1);
    for (size_t i = 0; i < sizeof math_ties / sizeof math_ties[0]; i++, nm++) {
        levels = 3;
        compare_op(&math_ties[i], 1, 0);
        levels = 0;
    }
    /* Inputs of 3 values (-1, 0, 1), so windows hold several taps equal to their max and, for
     * max_pool2d_grad (dy, x, y), several taps equal to y: the first in window order takes the
     * gradient (y need not be x's true max for that rule to be tested). */
    const op_case ties[] = {
    { "max_pool2d", 1, { S(3, 2, 6, 6) }, -1, 0, ATTRS(KERNEL(two2), STRIDE(two2)), -1, 1, 0 },
    { "max_pool2d_grad", 3, { S(2, 3, 4, 3), S(2, 3, 7, 6), S(2, 3, 4, 3) }, -1, 0, ATTRS(KERNEL(k3), STRIDE(two2), PAD(pad1)), -1, 1, 0 },
    { "max_pool2d_grad", 3, { S(1, 2, 6, 4), S(1, 2, 5, 7), S(1, 2, 6, 4) }, -1, 0, ATTRS(KERNEL(k32), STRIDE(s12), PAD(pad1120)), -1, 1, 0 },
    { "max_pool2d_grad", 3, { S(2, 1, 4, 4), S(2, 1, 9, 6), S(2, 1, 4, 4) }, -1, 0, ATTRS(KERNEL(k23), STRIDE(s21), PAD(pad1002), DIL(two2)), -1, 1, 0 },
    { "max_pool2d_grad", 3, { S(3, 2, 3, 3), S(3, 2, 6, 6), S(3, 2, 3, 3) }, -1, 0, ATTRS(KERNEL(two2), STRIDE(two2)), -1, 1, 0 },
    { "max_pool2d_grad", 3, { S(1, 2, 4, 3, 7), S(1, 2, 4, 5, 6), S(1, 2, 4, 3, 7) }, -1, 0, ATTRS(NDIM("kernel", k222), NDIM("stride", s121), NDIM("pad", pad3), PBL_ATTR_INT("ceil", 1)), -1, 1, 0 },
    { "max_pool2d_grad", 3, { S(1, 3, 4, 3), S(1, 3, 5, 4), S(1, 3, 4, 3) }, -1, 0, ATTRS(KERNEL(two2)), -1, 1, 0 },
    };
    int nt = (int)(sizeof ties / sizeof ties[0]);
    for (int i = 0; i < nt; i++)
        for (int streams = 1; streams <= 2; streams++)
            for (int graph = 0; graph <= 1; graph++) {
                levels = 3;
                compare_op(&ties[i], streams, graph);
                levels = 0;
            }
    /* Past one chunk of the convolutions' column buffer (28 MiB, 7,340,032 floats): 3 samples
     * whose columns (3.24M floats each) fit 2 at a time; 1 sample whose columns (8.3M) need 2
     * chunks of output positions. Big for the emulator (seconds each), so 1 stream, eager only:
     * the chunking does not depend on streams or capture, which the small cases cover. */
    const op_case chunked[] = {
    { "conv2d", 3, { S(3, 4, 300, 300), S(2, 4, 3, 3), S(2) }, -1, 0, ATTRS(PAD(pad1)), -1, 1, 1e-4 },
    { "conv2d", 2, { S(1, 32, 170, 170), S(2, 32, 3, 3) }, -1, 0, ATTRS(PAD(pad1)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(3, 2, 300, 300), S(2, 4, 3, 3) }, -1, 0, ATTRS(PAD(pad1), MADE(x3_4_300)), -1, 1, 1e-4 },
    { "conv2d_grad_input", 2, { S(1, 2, 170, 170), S(2, 32, 3, 3) }, -1, 0, ATTRS(PAD(pad1), MADE(x1_32_170)), -1, 1, 1e-4 },
    { "conv2d_grad_weight", 2, { S(3, 2, 300, 300), S(3, 4, 300, 300) }, -1, 0, ATTRS(PAD(pad1), MADE(w2433)), -1, 1, 1e-3 },
    { "conv2d_grad_weight", 2, { S(1, 2, 170, 170), S(1, 32, 170, 170) }, -1, 0, ATTRS(PAD(pad1), MADE(w2_32_33)), -1, 1, 1e-3 },
    };
    int nc = (int)(sizeof chunked / sizeof chunked[0]);
    for (int i = 0; i < nc; i++)
        compare_op(&chunked[i], 1, 0);
    printf("%d op cases + %d with tied inputs x {1, 2 streams} x {eager, CUDA graph}, %d chunked convolutions, %d math-family cases\n", n,
           nt, nc, nm);
}

/* ---- a label out of range, found on the device ------------------------------------------ */

static void bad_label(void)
{
    pbl_graph *g = NULL;
    pbl_exec *e = NULL;
    char err[256];
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_param(g, "x", PBL_SHAPE(4, 3)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(4));
    pbl_graph_set_output(g, "loss", pbl_softmax_cross_entropy(g, x, y));
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = other;
    pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
    CHECK(s == PBL_OK, "bad_label: exec_create: %s", err);
    if (s == PBL_OK) {
        float xs[12] = { 0 };
        int32_t bad[4] = { 0, 1, 3, 2 }, good[4] = { 0, 1, 2, 2 };
        pbl_exec_write(e, x, xs, sizeof xs);
        pbl_exec_write(e, y, bad, sizeof bad);
        s = pbl_exec_run(e);
        CHECK(s == PBL_ERR_INVALID_ARG, "bad_label: run gave %s", pbl_status_name(s));
        CHECK(strstr(pbl_exec_errmsg(e), "label 3 in row 2 is outside [0, 3)") != NULL, "bad_label: message '%s'",
              pbl_exec_errmsg(e));
        pbl_exec_write(e, y, good, sizeof good);
        s = pbl_exec_run(e); /* the flag was cleared: the next run is clean */
        CHECK(s == PBL_OK, "bad_label: the run after a failure gave %s: %s", pbl_status_name(s), pbl_exec_errmsg(e));
        float loss = 0;
        pbl_exec_read(e, pbl_graph_output(g, "loss"), &loss, sizeof loss);
        CHECK(fabsf(loss - logf(3.0f)) < 1e-5f, "bad_label: loss %g, want ln 3", (double)loss);
    }
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
}

/* An id out of range in embedding (forward, then gradient): the run fails with the CPU's
 * message, and the next run with good ids is clean. */
static void bad_ids(int grad)
{
    pbl_graph *g = NULL;
    pbl_exec *e = NULL;
    char err[256];
    const char *what = grad ? "bad_ids (embedding_grad)" : "bad_ids (embedding)";
    pbl_graph_create(&g, NULL);
    pbl_value ids = pbl_label(g, "ids", PBL_I32, PBL_SHAPE(4)), t, out;
    pbl_attr nv = PBL_ATTR_INT("num_embeddings", 5);
    if (grad) {
        t = pbl_param(g, "dy", PBL_SHAPE(4, 2));
        pbl_node_desc d = { .op = "embedding_grad", .name = "emb", .inputs = (pbl_value[]){ t, ids }, .n_inputs = 2,
                            .attrs = &nv, .n_attrs = 1 };
        pbl_graph_add_node(g, &d, NULL, &out);
    } else {
        t = pbl_param(g, "table", PBL_SHAPE(5, 2));
        pbl_node_desc d = { .op = "embedding", .name = "emb", .inputs = (pbl_value[]){ ids, t }, .n_inputs = 2 };
        pbl_graph_add_node(g, &d, NULL, &out);
    }
    pbl_graph_set_output(g, "y", out);
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = other;
    pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
    CHECK(s == PBL_OK, "%s: exec_create: %s", what, err);
    if (s == PBL_OK) {
        float ts[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, y[10];
        int32_t bad[4] = { 0, 4, grad ? -1 : 5, 2 }, good[4] = { 0, 4, 4, 2 };
        size_t nt = grad ? 8 : 10, ny = grad ? 10 : 8; /* dy [4, 2] -> [5, 2]; table [5, 2] -> [4, 2] */
        pbl_exec_write(e, t, ts, nt * sizeof(float));
        pbl_exec_write(e, ids, bad, sizeof bad);
        s = pbl_exec_run(e);
        CHECK(s == PBL_ERR_INVALID_ARG, "%s: run gave %s", what, pbl_status_name(s));
        const char *want = grad ? "id -1 at position 2 is outside [0, 5)" : "id 5 at position 2 is outside [0, 5)";
        CHECK(strstr(pbl_exec_errmsg(e), want) != NULL, "%s: message '%s', want '%s'", what, pbl_exec_errmsg(e), want);
        pbl_exec_write(e, ids, good, sizeof good);
        s = pbl_exec_run(e);
        CHECK(s == PBL_OK, "%s: the run after a failure gave %s: %s", what, pbl_status_name(s), pbl_exec_errmsg(e));
        s = pbl_exec_read(e, out, y, ny * sizeof(float));
        CHECK(s == PBL_OK, "%s: read: %s", what, pbl_exec_errmsg(e));
        /* forward: table rows 0, 4, 4, 2; gradient: dy rows into rows 0, 4 (twice), 2 */
        const float want_y[10] = { 1, 2, 9, 10, 9, 10, 5, 6 }, want_g[10] = { 1, 2, 0, 0, 7, 8, 0, 0, 8, 10 };
        for (size_t i = 0; s == PBL_OK && i < ny; i++)
            CHECK(y[i] == (grad ? want_g : want_y)[i], "%s: element %d is %g, want %g", what, (int)i, (double)y[i],
                  (double)(grad ? want_g : want_y)[i]);
    }
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
}

/* ---- an MLP trained on both backends ---------------------------------------------------- */

enum { B = 32, D = 48, H = 40, C = 10, STEPS = 6 };

typedef struct mlp {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_value  x, y, loss, p[6];
} mlp;

/* fused: the graph trained is pbl_graph_fuse's copy (dense and backward groups; this MLP has
 * no element-wise chain to fuse), so the fused ops run inside a training step.
 * partial: the steps run batches of partial_rows[step] rows of the planned B
 * (pbl_exec_set_batch), so the kernels take the real batch and a CUDA graph is captured again
 * when it changes. */
static const int64_t partial_rows[STEPS] = { B, 13, 13, 1, B, 20 };

static int mlp_train(pbl_backend_kind backend, int streams, int graph, int bind, int fused, int partial,
                     float *losses, float *params, int64_t *n_params)
{
    mlp m = { 0 };
    int ok = 0;
    char err[256];
    pbl_graph_create(&m.g, NULL);
    pbl_graph *g = m.g;
    m.x = pbl_input(g, "x", PBL_SHAPE(B, D));
    m.y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(B));
    pbl_shape shp[6] = { PBL_SHAPE(H, D), PBL_SHAPE(H), PBL_SHAPE(H, H), PBL_SHAPE(H), PBL_SHAPE(C, H), PBL_SHAPE(C) };
    const char *names[6] = { "w1", "b1", "w2", "b2", "w3", "b3" };
    for (int i = 0; i < 6; i++)
        m.p[i] = pbl_param(g, names[i], shp[i]);
    pbl_value h = pbl_relu(g, pbl_fully_connected(g, m.x, m.p[0], m.p[1]));
    h = pbl_dropout(g, h, 0.2, 11, NULL);
    h = pbl_tanh(g, pbl_fully_connected(g, h, m.p[2], m.p[3]));
    m.loss = pbl_softmax_cross_entropy(g, pbl_fully_connected(g, h, m.p[4], m.p[5]), m.y);
    pbl_graph_set_output(g, "loss", m.loss);
    pbl_value gr[6];
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_gradient(g, m.loss, m.p, 6, gr) != PBL_OK)
        goto done;
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_ADAM);
    oo.lr = 3e-3;
    if (pbl_graph_add_optimizer(g, &oo, m.p, gr, 6) != PBL_OK)
        goto done;
    if (fused) {
        pbl_fuse_options fo = pbl_fuse_options_default();
        pbl_fuse_report fr;
        pbl_graph *f = NULL;
        if (pbl_graph_fuse(g, &fo, &f, &fr, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "mlp: fuse: %s\n", err);
            goto done;
        }
        pbl_graph_destroy(m.g);
        m.g = g = f;
        m.x = pbl_graph_find_value(g, "x");
        m.y = pbl_graph_find_value(g, "y");
        m.loss = pbl_graph_output(g, "loss");
        for (int i = 0; i < 6; i++)
            m.p[i] = pbl_graph_find_value(g, names[i]);
        CHECK(fr.dense == 2 && fr.weight_bias == 3 && fr.act_grads == 1,
              "mlp: fused %d dense, %d weight+bias, %d product+act grad; want 2, 3, 1", (int)fr.dense,
              (int)fr.weight_bias, (int)fr.act_grads);

    }
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = backend;
    o.streams = streams;
    o.cuda_graph = graph;
    if (pbl_exec_create(&m.e, g, &o, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "mlp: exec_create: %s\n", err);
        goto done;
    }
    uint64_t seed = 99;
    int64_t off = 0;
    for (int i = 0; i < 6; i++) {
        int64_t n = numel(shp[i]);
        for (int64_t j = 0; j < n; j++)
            params[off + j] = rng_uniform(&seed, -0.3f, 0.3f);
        pbl_status s = bind ? pbl_exec_bind(m.e, m.p[i], params + off, (size_t)n * 4)
                            : pbl_exec_write(m.e, m.p[i], params + off, (size_t)n * 4);
        if (s != PBL_OK)
            goto done;
        off += n;
    }
    *n_params = off;
    static float xs[B * D];
    int32_t ys[B];
    for (int step = 0; step < STEPS; step++) {
        for (int j = 0; j < B * D; j++)
            xs[j] = rng_uniform(&seed, -1, 1);
        for (int j = 0; j < B; j++)
            ys[j] = (int32_t)(rng_next(&seed) % C);
        int64_t rows = partial ? partial_rows[step] : B;
        if (pbl_exec_set_batch(m.e, rows) != PBL_OK ||
            pbl_exec_write(m.e, m.x, xs, (size_t)rows * D * sizeof *xs) != PBL_OK ||
            pbl_exec_write(m.e, m.y, ys, (size_t)rows * sizeof *ys) != PBL_OK ||
            pbl_exec_run(m.e) != PBL_OK || pbl_exec_read(m.e, m.loss, &losses[step], sizeof(float)) != PBL_OK) {
            fprintf(stderr, "mlp step %d: %s\n", step, pbl_exec_errmsg(m.e));
            goto done;
        }
    }
    off = 0;
    for (int i = 0; !bind && i < 6; i++) {
        if (pbl_exec_read(m.e, m.p[i], params + off, (size_t)numel(shp[i]) * 4) != PBL_OK)
            goto done;
        off += numel(shp[i]);
    }
    ok = 1;
done:
    pbl_exec_destroy(m.e);
    pbl_graph_destroy(m.g);
    return ok;
}

static void compare_mlp(int streams, int graph, int bind, int fused, int partial)
{
    enum { NP = H * D + H + H * H + H + C * H + C };
    static float pw[NP], pg[NP];
    float lw[STEPS], lg[STEPS];
    int64_t nw = 0, ng = 0;
    char what[80];
    snprintf(what, sizeof what, "mlp streams %d graph %d bind %d fused %d partial %d", streams, graph, bind, fused,
             partial);
    int ok = mlp_train(PBL_BACKEND_CPU, 1, 0, 0, 0, partial, lw, pw, &nw) &&
             mlp_train(other, streams, graph, bind, fused, partial, lg, pg, &ng);
    CHECK(ok && nw == NP && ng == NP, "%s did not train", what);
    if (!ok)
        return;
    for (int s = 0; s < STEPS; s++)
        CHECK(fabs(lg[s] - lw[s]) <= 1e-3 * fabs(lw[s]), "%s step %d: loss %.7g, cpu %.7g", what, s, (double)lg[s],
              (double)lw[s]);
    double worst = 0;
    for (int64_t i = 0; i < NP; i++) {
        double d = fabs((double)pg[i] - (double)pw[i]);
        worst = d > worst || isnan(d) ? d : worst; /* a NaN stays the worst */
    }
    CHECK(worst <= 2e-3, "%s: parameters differ by up to %.3g", what, worst);
    printf("%s: final loss %.6f (cpu %.6f), max |dparam| %.3g\n", what, (double)lg[STEPS - 1], (double)lw[STEPS - 1],
           worst);
}

/* ---- a small CNN trained on both backends ------------------------------------------------ */

/* conv 3x3 pad 1 + bias, relu, max pool 2x2/2, grouped conv 3x3 pad 1 + bias, relu, avg pool
 * 3x3/2 pad 1, global average pool, flatten, fully connected, softmax cross-entropy; SGD with
 * momentum. Every conv/pool op and gradient op runs inside one CUDA executor (pbl_exec_create
 * refuses a graph with an op lacking a CUDA kernel), the max pool's gradient with the y the
 * forward really computed. */
enum { CB = 4, CSTEPS = 5, CNP = 8 * 3 * 9 + 8 + 8 * 4 * 9 + 8 + 5 * 8 + 5 };

static pbl_value node1(pbl_graph *g, const char *op, const pbl_value *in, int n_in, const pbl_attr *at, int n_at)
{
    pbl_value out[4] = { PBL_NONE };
    pbl_node_desc d = { .op = op, .inputs = in, .n_inputs = n_in, .attrs = at, .n_attrs = n_at };
    if (pbl_graph_add_node(g, &d, NULL, out) != PBL_OK)
        return PBL_NONE;
    return out[0];
}

static int cnn_train(pbl_backend_kind backend, int streams, int graph, float *losses, float *params)
{
    pbl_graph *g = NULL;
    pbl_exec *e = NULL;
    int ok = 0;
    char err[256] = "";
    pbl_graph_create(&g, NULL);
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(CB, 3, 12, 12)), y = pbl_label(g, "y", PBL_I32, PBL_SHAPE(CB));
    pbl_shape shp[6] = { PBL_SHAPE(8, 3, 3, 3), PBL_SHAPE(8), PBL_SHAPE(8, 4, 3, 3), PBL_SHAPE(8), PBL_SHAPE(5, 8),
                         PBL_SHAPE(5) };
    const char *names[6] = { "w1", "b1", "w2", "b2", "w3", "b3" };
    pbl_value p[6], gr[6];
    for (int i = 0; i < 6; i++)
        p[i] = pbl_param(g, names[i], shp[i]);
    const pbl_attr c1[] = { PAD(pad1) }, c2[] = { PAD(pad1), GROUPS(2) }, mp[] = { KERNEL(two2), STRIDE(two2) },
                   ap[] = { KERNEL(k3), STRIDE(two2), PAD(pad1) };
    pbl_value h = pbl_relu(g, node1(g, "conv2d", (pbl_value[]){ x, p[0], p[1] }, 3, c1, 1));
    h = node1(g, "max_pool2d", &h, 1, mp, 2);
    h = pbl_relu(g, node1(g, "conv2d", (pbl_value[]){ h, p[2], p[3] }, 3, c2, 2));
    h = node1(g, "avg_pool2d", &h, 1, ap, 3);
    h = pbl_flatten(g, node1(g, "global_avg_pool", &h, 1, NULL, 0), 1);
    pbl_value loss = pbl_softmax_cross_entropy(g, pbl_fully_connected(g, h, p[4], p[5]), y);
    pbl_graph_set_output(g, "loss", loss);
    if (pbl_graph_build_status(g) != PBL_OK || pbl_graph_gradient(g, loss, p, 6, gr) != PBL_OK) {
        fprintf(stderr, "cnn: %s\n", pbl_graph_errmsg(g));
        goto done;
    }
    pbl_optimizer_options oo = pbl_optimizer_options_default(PBL_OPTIM_SGD_MOMENTUM);
    oo.lr = 0.05;
    if (pbl_graph_add_optimizer(g, &oo, p, gr, 6) != PBL_OK)
        goto done;
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = backend;
    o.streams = streams;
    o.cuda_graph = graph;
    if (pbl_exec_create(&e, g, &o, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "cnn: exec_create: %s\n", err);
        goto done;
    }
    uint64_t seed = 77;
    int64_t off = 0;
    for (int i = 0; i < 6; i++) {
        int64_t n = numel(shp[i]);
        for (int64_t j = 0; j < n; j++)
            params[off + j] = rng_uniform(&seed, -0.4f, 0.4f);
        if (pbl_exec_write(e, p[i], params + off, (size_t)n * 4) != PBL_OK)
            goto done;
        off += n;
    }
    static float xs[CB * 3 * 12 * 12];
    int32_t ys[CB];
    for (int step = 0; step < CSTEPS; step++) {
        for (int j = 0; j < CB * 3 * 12 * 12; j++)
            xs[j] = rng_uniform(&seed, -1, 1);
        for (int j = 0; j < CB; j++)
            ys[j] = (int32_t)(rng_next(&seed) % 5);
        if (pbl_exec_write(e, x, xs, sizeof xs) != PBL_OK || pbl_exec_write(e, y, ys, sizeof ys) != PBL_OK ||
            pbl_exec_run(e) != PBL_OK || pbl_exec_read(e, loss, &losses[step], sizeof(float)) != PBL_OK) {
            fprintf(stderr, "cnn step %d: %s\n", step, pbl_exec_errmsg(e));
            goto done;
        }
    }
    off = 0;
    for (int i = 0; i < 6; i++) {
        if (pbl_exec_read(e, p[i], params + off, (size_t)numel(shp[i]) * 4) != PBL_OK)
            goto done;
        off += numel(shp[i]);
    }
    ok = off == CNP;
done:
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    return ok;
}

static void compare_cnn(int streams, int graph)
{
    static float pw[CNP], pg[CNP];
    float lw[CSTEPS], lg[CSTEPS];
    int ok = cnn_train(PBL_BACKEND_CPU, 1, 0, lw, pw) && cnn_train(other, streams, graph, lg, pg);
    CHECK(ok, "cnn (streams %d, graph %d) did not train", streams, graph);
    if (!ok)
        return;
    for (int s = 0; s < CSTEPS; s++)
        CHECK(fabs(lg[s] - lw[s]) <= 1e-4 * fabs(lw[s]), "cnn (streams %d, graph %d) step %d: loss %.7g, cpu %.7g",
              streams, graph, s, (double)lg[s], (double)lw[s]);
    double worst = 0;
    for (int64_t i = 0; i < CNP; i++)
        worst = fmax(worst, fabs((double)pg[i] - (double)pw[i]));
    CHECK(worst <= 1e-4, "cnn (streams %d, graph %d): parameters differ by up to %.3g", streams, graph, worst);
    printf("cnn streams %d graph %d: loss %.6f -> %.6f (cpu %.6f -> %.6f), max |dparam| %.3g\n", streams, graph,
           (double)lg[0], (double)lg[CSTEPS - 1], (double)lw[0], (double)lw[CSTEPS - 1], worst);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--cpu") == 0) {
        other = PBL_BACKEND_CPU;
    } else {
        /* a device? */
        pbl_graph *g = NULL;
        pbl_exec *e = NULL;
        char err[256] = "";
        pbl_graph_create(&g, NULL);
        pbl_graph_set_output(g, "y", pbl_relu(g, pbl_param(g, "x", PBL_SHAPE(4))));
        pbl_exec_options o = pbl_exec_options_default();
        o.backend = PBL_BACKEND_CUDA;
        pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
        char device[512] = ""; /* pbl_exec_device: the GPU cudaGetDeviceProperties names */
        if (s == PBL_OK)
            snprintf(device, sizeof device, "%s", pbl_exec_device(e));
        pbl_exec_destroy(e);
        pbl_graph_destroy(g);
        if (s == PBL_ERR_UNSUPPORTED) {
            printf("no CUDA device: %s (skipped)\n", err);
            return 77;
        }
        if (s != PBL_OK) {
            fprintf(stderr, "FAIL: creating a CUDA executor: %s: %s\n", pbl_status_name(s), err);
            return 1;
        }
        const char *module = getenv("PEBBLE_CUDA_MODULE");
        if (module && *module) /* test_cuda_emu: the host emulator (it names its device on stderr) */
            printf("CUDA backend module: %s\n", module);
        printf("CUDA device: %s\n", device);
        CHECK(strstr(device, "(device 0, compute capability ") && strcmp(device, pbl_cpu_describe()) != 0,
              "pbl_exec_device names no GPU: '%s'", device);
        if (module && strstr(module, "cuda_emu")) /* the emulator's cudaDeviceProp.name */
            CHECK(strstr(device, "emulator") != NULL, "the emulator's device is '%s'", device);
    }
    run_cases();
    bad_label();
    bad_ids(0);
    bad_ids(1);
    for (int streams = 1; streams <= 2; streams++)
        for (int graph = 0; graph <= 1; graph++)
            compare_mlp(streams, graph, 0, 0, 0);
    compare_mlp(2, 1, 1, 0, 0);
    for (int graph = 0; graph <= 1; graph++)
        compare_mlp(2, graph, 0, 1, 0);
    for (int graph = 0; graph <= 1; graph++) /* partial batches (pbl_exec_set_batch), captured or not */
        compare_mlp(2, graph, 1, 1, 1);
    for (int streams = 1; streams <= 2; streams++)
        for (int graph = 0; graph <= 1; graph++)
            compare_cnn(streams, graph);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
