/*
 * CUDA kernels: conv2d, conv2d_grad_input, conv2d_grad_weight (1 to 3 spatial dims, groups,
 * stride, pad, dilation; ops/conv.c), as im2col + cuBLAS sgemm like the CPU kernels (ops/cpu/conv.c):
 *
 *   conv2d             y_g  = w_g · col_g(x)  (+ b)      one sgemm per chunk (and group);
 *                                                        depthwise (one input channel per
 *                                                        group): a direct kernel
 *   conv2d_grad_input  col_g = w_gᵀ · dy_g, then col2im  one thread per input element
 *   conv2d_grad_weight dw_g += dy_g · col_g(x)ᵀ          samples added in order (beta 1)
 *
 * Why im2col + sgemm rather than a direct kernel: the products are where the time goes, and
 * cuBLAS does them well; the copy kernels are simple index maps. col2im GATHERS: each thread
 * owns one input element and adds the column entries that came from it, taps in (kd, kh, kw)
 * order (the CPU's scatter order for one element), so it is race-free and deterministic (no
 * atomics).
 *
 * Column memory. Nothing is allocated at run time: the column buffer is the stream's cuBLAS
 * workspace (l->workspace). cuBLAS itself may use its workspace inside an sgemm (split-K), so
 * while a conv kernel runs, cuBLAS is given only the first eighth of it (cublasSetWorkspace,
 * restored before returning, failure included) and the columns live in the rest. Uses are
 * ordered by the stream. The columns are made for a chunk of samples at a time; when one
 * sample's columns (C·KH·KW × OH·OW floats) do not fit, for one sample and a range of output
 * positions at a time. A 1x1 kernel with stride 1 and no padding reads x (or writes dx) as it
 * lies, like the CPU.
 *
 * Layouts as in linear.cu: a row-major [r, c] matrix with leading dimension ld is, read
 * column-major, its transpose. The row-major product C[m, n] = A·B is computed as the
 * column-major Cᵀ[n, m] = Bᵀ·Aᵀ: operands swapped, each keeping its transpose flag.
 */
#include "ops/cuda/common.cuh"

extern "C" {
#include "ops/shared/geometry.h"
}

struct geom {
    int64_t N, C, D, H, W, Co, OD, OH, OW, G, Cg, Cog, KD, KH, KW, KK, K, P;
    int64_t sd, sh, sw, pd, ph, pw, dd, dh, dw; /* stride, pad (begins), dilation */
    int     plain;                              /* 1x1 kernel, stride 1, no padding */
};

/* The geometry of a conv node: x shape xs, weight shape ws, output shape ys (1-D and 2-D take
 * unit leading spatial dims, ops/shared/geometry.h); the window attributes are slots 0..3
 * (stride, pad, dilation, groups) of every conv op. */
static geom make_geom(const pbl__kargs *a, const pbl_shape *xs, const pbl_shape *ws, const pbl_shape *ys)
{
    pbl__window win;
    pbl__window_of(pbl__window_nsp(xs->ndim), NULL, &a->attr[0], &a->attr[1], &a->attr[2], &win);
    pbl__window_kernel_of(&win, ws);
    int64_t in[3], out[3];
    pbl__window_in(xs, in);
    pbl__window_in(ys, out);
    geom g;
    g.N = xs->dim[0];
    g.C = xs->dim[1];
    g.D = in[0];
    g.H = in[1];
    g.W = in[2];
    g.Co = ws->dim[0];
    g.KD = win.kernel[0];
    g.KH = win.kernel[1];
    g.KW = win.kernel[2];
    g.OD = out[0];
    g.OH = out[1];
    g.OW = out[2];
    g.G = a->attr[3].i;
    g.Cg = g.C / g.G;
    g.Cog = g.Co / g.G;
    g.KK = g.KD * g.KH * g.KW;
    g.K = g.Cg * g.KK;
    g.P = g.OD * g.OH * g.OW;
    g.sd = win.stride[0];
    g.sh = win.stride[1];
    g.sw = win.stride[2];
    g.pd = win.pad[0];
    g.ph = win.pad[1];
    g.pw = win.pad[2];
    g.dd = win.dilation[0];
    g.dh = win.dilation[1];
    g.dw = win.dilation[2];
    g.plain = g.KK == 1;
    for (int k = 0; k < 3; k++)
        g.plain = g.plain && win.stride[k] == 1 && !win.pad[k] && !win.pad[k + 3];
    return g;
}

/* x is the column matrix itself: a 1x1 kernel, stride 1, no padding (then the output
 * positions are x's) */
static int is_direct(const geom &g) { return g.plain; }

/* A chunk: samples [n0, n0 + ns), output positions [p0, p0 + pc). */
struct chunking {
    int64_t ns, pc; /* samples per chunk; positions per chunk (P unless ns is 1) */
};

/* The largest chunks whose columns (C·KK rows of pc floats per sample) fit in cap floats;
 * pc 0 when not even one position does. */
static chunking plan_chunks(const geom &g, int64_t cap)
{
    chunking c;
    int64_t rows = g.C * g.KK, per_sample = rows * g.P;
    if (per_sample <= cap) {
        c.ns = cap / per_sample < g.N ? cap / per_sample : g.N;
        c.pc = g.P;
    } else {
        c.ns = 1;
        c.pc = cap / rows;
    }
    return c;
}

/* col[s][c·KK + (kd·KH + kh)·KW + kw][j] = x[n0 + s, c, id, ih, iw] (0 in the padding) for
 * output position p0 + j = (od·OH + oh)·OW + ow, id = od·sd − pd + kd·dd, ih and iw likewise;
 * rows of pc floats. */
__global__ static void im2col_k(float *col, const float *x, geom g, int64_t n0, int64_t ns, int64_t p0, int64_t pc)
{
    int64_t rows = g.C * g.KK;
    PBL__GRID_LOOP(i, ns * rows * pc) {
        int64_t j = i % pc, r = (i / pc) % rows, s = i / (pc * rows);
        /* a 2-D or 1-D conv (one depth slot) skips the depth's divisions: 64-bit division is
         * slow on a GPU, and the branch is the same for every thread */
        int flat = g.KD == 1 && g.OD == 1;
        int64_t c = r / g.KK, t = r % g.KK, kw = t % g.KW, kh = flat ? t / g.KW : (t / g.KW) % g.KH;
        int64_t kd = flat ? 0 : t / (g.KW * g.KH);
        int64_t p = p0 + j, ow = p % g.OW, oh = flat ? p / g.OW : (p / g.OW) % g.OH, od = flat ? 0 : p / (g.OW * g.OH);
        int64_t id = od * g.sd - g.pd + kd * g.dd, ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
        float v = 0.0f;
        if (id >= 0 && id < g.D && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
            v = x[((((n0 + s) * g.C + c) * g.D + id) * g.H + ih) * g.W + iw];
        col[i] = v;
    }
}

/* The gather inverse of im2col_k: dx[n0 + s, c, id, ih, iw] = (accumulate ? dx : 0) + Σ the
 * column entries copied from it, taps in (kd, kh, kw) order. A tap reads output row oh when
 * oh·sh = ih + ph − kh·dh exactly (od, ow likewise); only positions in [p0, p0 + pc) are in
 * this chunk. */
__global__ static void col2im_k(float *dx, const float *col, geom g, int64_t n0, int64_t ns, int64_t p0, int64_t pc,
                                int accumulate)
{
    int64_t HW = g.H * g.W, S = g.D * HW;
    PBL__GRID_LOOP(i, ns * g.C * S) {
        int64_t iw = i % g.W, ih = (i / g.W) % g.H, id = (i / HW) % g.D, c = (i / S) % g.C, s = i / (g.C * S);
        const float *cs = col + (s * g.C + c) * g.KK * pc;
        float acc = 0.0f;
        for (int64_t kd = 0; kd < g.KD; kd++) {
            int64_t td = id + g.pd - kd * g.dd;
            if (td < 0 || td % g.sd != 0 || td / g.sd >= g.OD)
                continue;
            int64_t od = td / g.sd;
            for (int64_t kh = 0; kh < g.KH; kh++) {
                int64_t th = ih + g.ph - kh * g.dh;
                if (th < 0 || th % g.sh != 0 || th / g.sh >= g.OH)
                    continue;
                int64_t oh = th / g.sh;
                for (int64_t kw = 0; kw < g.KW; kw++) {
                    int64_t tw = iw + g.pw - kw * g.dw;
                    if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.OW)
                        continue;
                    int64_t p = (od * g.OH + oh) * g.OW + tw / g.sw - p0;
                    if (p >= 0 && p < pc)
                        acc += cs[((kd * g.KH + kh) * g.KW + kw) * pc + p];
                }
            }
        }
        float *d = dx + ((n0 + s) * g.C + c) * S + (id * g.H + ih) * g.W + iw;
        *d = accumulate ? *d + acc : acc;
    }
}

/* y[n, o, p] = b[o]: the product then adds onto it (beta 1), as the CPU's sgemm does */
__global__ static void bias_planes(float *y, const float *b, int64_t n, int64_t Co, int64_t P)
{
    PBL__GRID_LOOP(i, n)
        y[i] = b[(i / P) % Co];
}

/* One operand of a chunk's products: its base, leading dimension, and strides between
 * samples and between groups. */
struct mat {
    const float *p;
    int64_t ld, s_sample, s_group;
};

/* The column-major sgemm C = op(A)·op(B) (m x n, inner k) for every group of each of the ns
 * samples: strided-batched over the groups, one call per sample; with one group, one call
 * batched over the samples unless `sum_samples` (then every sample adds into the same C, in
 * order, with beta 1 after the first: the CPU's order). beta0 is the first call's beta. */
static pbl_status chunk_gemm(const pbl__cuda_launch *l, const pbl__kargs *a, cublasOperation_t ta,
                             cublasOperation_t tb, int64_t m, int64_t n, int64_t k, mat A, mat B, float beta0, mat C,
                             int64_t ns, int64_t G, int sum_samples)
{
    pbl_status s = PBL_OK;
    float one = 1.0f, beta = beta0;
    if (G == 1 && !sum_samples) {
        PBL__CUBLAS(cublasSgemmStridedBatched(l->blas, ta, tb, (int)m, (int)n, (int)k, &one, A.p, (int)A.ld,
                                              A.s_sample, B.p, (int)B.ld, B.s_sample, &beta, (float *)C.p, (int)C.ld,
                                              C.s_sample, (int)ns));
        goto done;
    }
    for (int64_t i = 0; i < ns; i++) {
        PBL__CUBLAS(cublasSgemmStridedBatched(l->blas, ta, tb, (int)m, (int)n, (int)k, &one, A.p + i * A.s_sample,
                                              (int)A.ld, A.s_group, B.p + i * B.s_sample, (int)B.ld, B.s_group, &beta,
                                              (float *)C.p + (sum_samples ? 0 : i * C.s_sample), (int)C.ld, C.s_group,
                                              (int)G));
        if (sum_samples)
            beta = 1.0f;
    }
done:
    return s;
}

/* cuBLAS keeps the first eighth of the workspace while the rest holds columns */
#define BLAS_SHARE 8

/* The column buffer (the workspace past cuBLAS's share), its size in floats, and cuBLAS
 * narrowed to its share. */
static pbl_status columns_begin(const pbl__cuda_launch *l, const pbl__kargs *a, float **col, int64_t *cap)
{
    pbl_status s = PBL_OK;
    size_t keep = (l->workspace_bytes / BLAS_SHARE) & ~(size_t)255;
    *col = (float *)((char *)l->workspace + keep);
    *cap = (int64_t)((l->workspace_bytes - keep) / sizeof(float));
    PBL__CUBLAS(cublasSetWorkspace(l->blas, l->workspace, keep));
done:
    return s;
}

/* cuBLAS gets its whole workspace back; s is the kernel's status so far. */
static pbl_status columns_end(const pbl__cuda_launch *l, const pbl__kargs *a, pbl_status s)
{
    cublasStatus_t e = cublasSetWorkspace(l->blas, l->workspace, l->workspace_bytes);
    if (e != CUBLAS_STATUS_SUCCESS && s == PBL_OK) {
        snprintf(a->err, a->errlen, "cublasSetWorkspace (restoring) failed at %s:%d: %s", __FILE__, __LINE__,
                 pbl__cublas_status_str(e));
        s = PBL_ERR_DEVICE;
    }
    return s;
}

/* chunks whose columns fit in cap floats, or a message when one column does not */
static pbl_status chunks_for(const geom &g, int64_t cap, const pbl__kargs *a, const char *op, chunking *ch)
{
    *ch = plan_chunks(g, cap);
    if (ch->pc >= 1)
        return PBL_OK;
    snprintf(a->err, a->errlen, "%s: one output position's columns (%lld floats) exceed the stream workspace (%lld)",
             op, (long long)(g.C * g.KK), (long long)cap);
    return PBL_ERR_NOMEM;
}

/* Depthwise (one input channel per group, Cg = 1, any channel multiplier Cog): one thread per
 * output element adds its KK taps, (kd, kh, kw) in order, onto the bias. im2col + sgemm would
 * run one tiny product per sample and group (K = KK rows): on an H200 mobilenet_v2's
 * depthwise layers made its captured inference 1.8x PyTorch's. */
__global__ static void conv_depthwise_k(float *y, const float *x, const float *w, const float *b, geom g, int64_t n)
{
    PBL__GRID_LOOP(i, n) {
        int64_t p = i % g.P, t = i / g.P, co = t % g.Co, nn = t / g.Co;
        int flat = g.KD == 1 && g.OD == 1; /* as in im2col_k: no depth divisions for 1-D/2-D */
        int64_t ow = p % g.OW, oh = flat ? p / g.OW : (p / g.OW) % g.OH, od = flat ? 0 : p / (g.OW * g.OH);
        const float *xc = x + (nn * g.C + co / g.Cog) * g.D * g.H * g.W, *wc = w + co * g.KK;
        float acc = b ? b[co] : 0.0f;
        for (int64_t kd = 0; kd < g.KD; kd++) {
            int64_t id = od * g.sd - g.pd + kd * g.dd;
            if (id < 0 || id >= g.D)
                continue;
            for (int64_t kh = 0; kh < g.KH; kh++) {
                int64_t ih = oh * g.sh - g.ph + kh * g.dh;
                if (ih < 0 || ih >= g.H)
                    continue;
                for (int64_t kw = 0; kw < g.KW; kw++) {
                    int64_t iw = ow * g.sw - g.pw + kw * g.dw;
                    if (iw >= 0 && iw < g.W)
                        acc += xc[(id * g.H + ih) * g.W + iw] * wc[(kd * g.KH + kh) * g.KW + kw];
                }
            }
        }
        y[i] = acc;
    }
}

static pbl_status conv_depthwise(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    geom g = make_geom(a, &a->in_meta[0].shape, &a->in_meta[1].shape, &a->out_meta[0].shape);
    int64_t n = g.N * g.Co * g.P;
    PBL__LAUNCH(conv_depthwise_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(
        PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1), a->n_in == 3 ? PBL__IN(a, 2) : NULL, g, n);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_conv2d(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    if (a->in_meta[1].shape.dim[1] == 1 && a->attr[3].i > 1) /* depthwise: Cg = 1 */
        return conv_depthwise(l, a);
    pbl_status s = PBL_OK;
    geom g = make_geom(a, &a->in_meta[0].shape, &a->in_meta[1].shape, &a->out_meta[0].shape);
    const float *x = PBL__IN(a, 0), *w = PBL__IN(a, 1);
    float *y = PBL__OUT(a, 0), *col = NULL;
    int64_t cap = 0;
    int narrowed = 0;
    float beta = 0.0f;
    chunking ch = { g.N, g.P };
    int direct = is_direct(g);
    if (a->n_in == 3) {
        int64_t n = g.N * g.Co * g.P;
        PBL__LAUNCH(bias_planes, pbl__blocks(n), PBL__THREADS, 0, l->stream)(y, PBL__IN(a, 2), n, g.Co, g.P);
        PBL__LAUNCHED();
        beta = 1.0f;
    }
    if (!direct) {
        if ((s = columns_begin(l, a, &col, &cap)) != PBL_OK)
            goto done;
        narrowed = 1;
        if ((s = chunks_for(g, cap, a, "conv2d", &ch)) != PBL_OK)
            goto done;
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += ch.ns) {
        int64_t ns = g.N - n0 < ch.ns ? g.N - n0 : ch.ns;
        for (int64_t p0 = 0; p0 < g.P; p0 += ch.pc) {
            int64_t pc = g.P - p0 < ch.pc ? g.P - p0 : ch.pc;
            mat cm;
            if (direct) {
                cm = { x + n0 * g.C * g.P, g.P, g.C * g.P, g.Cg * g.P };
            } else {
                int64_t n = ns * g.C * g.KK * pc;
                PBL__LAUNCH(im2col_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(col, x, g, n0, ns, p0, pc);
                PBL__LAUNCHED();
                cm = { col, pc, g.C * g.KK * pc, g.K * pc };
            }
            /* row-major y_g[Cog, pc] (ld P) = w_g[Cog, K] · col_g[K, pc]
             * <=> column-major y_gᵀ[pc, Cog] = col_gᵀ[pc, K] · w_gᵀ[K, Cog] */
            mat wm = { w, g.K, 0, g.Cog * g.K };
            mat ym = { y + n0 * g.Co * g.P + p0, g.P, g.Co * g.P, g.Cog * g.P };
            if ((s = chunk_gemm(l, a, CUBLAS_OP_N, CUBLAS_OP_N, pc, g.Cog, g.K, cm, wm, beta, ym, ns, g.G, 0)) != PBL_OK)
                goto done;
        }
    }
done:
    return narrowed ? columns_end(l, a, s) : s;
}

extern "C" pbl_status pbl__cuda_conv2d_grad_input(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    geom g = make_geom(a, &a->out_meta[0].shape, &a->in_meta[1].shape, &a->in_meta[0].shape);
    const float *dy = PBL__IN(a, 0), *w = PBL__IN(a, 1);
    float *dx = PBL__OUT(a, 0), *col = NULL;
    int64_t cap = 0;
    int narrowed = 0;
    chunking ch = { g.N, g.P };
    int direct = is_direct(g);
    if (!direct) {
        if ((s = columns_begin(l, a, &col, &cap)) != PBL_OK)
            goto done;
        narrowed = 1;
        if ((s = chunks_for(g, cap, a, "conv2d_grad_input", &ch)) != PBL_OK)
            goto done;
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += ch.ns) {
        int64_t ns = g.N - n0 < ch.ns ? g.N - n0 : ch.ns;
        for (int64_t p0 = 0; p0 < g.P; p0 += ch.pc) {
            int64_t pc = g.P - p0 < ch.pc ? g.P - p0 : ch.pc;
            /* direct: dx_g[Cg, P] itself is the column matrix */
            mat cm = direct ? mat{ dx + n0 * g.C * g.P, g.P, g.C * g.P, g.Cg * g.P }
                            : mat{ col, pc, g.C * g.KK * pc, g.K * pc };
            /* row-major col_g[K, pc] = w_gᵀ[K, Cog] · dy_g[Cog, pc] (ld P)
             * <=> column-major col_gᵀ[pc, K] = dy_gᵀ[pc, Cog] · w_g[Cog, K] (w_g read transposed) */
            mat dm = { dy + n0 * g.Co * g.P + p0, g.P, g.Co * g.P, g.Cog * g.P };
            mat wm = { w, g.K, 0, g.Cog * g.K };
            if ((s = chunk_gemm(l, a, CUBLAS_OP_N, CUBLAS_OP_T, pc, g.K, g.Cog, dm, wm, 0.0f, cm, ns, g.G, 0)) != PBL_OK)
                goto done;
            if (!direct) {
                int64_t n = ns * g.C * g.D * g.H * g.W;
                PBL__LAUNCH(col2im_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(dx, col, g, n0, ns, p0, pc, p0 > 0);
                PBL__LAUNCHED();
            }
        }
    }
done:
    return narrowed ? columns_end(l, a, s) : s;
}

extern "C" pbl_status pbl__cuda_conv2d_grad_weight(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    geom g = make_geom(a, &a->in_meta[1].shape, &a->out_meta[0].shape, &a->in_meta[0].shape);
    const float *dy = PBL__IN(a, 0), *x = PBL__IN(a, 1);
    float *dw = PBL__OUT(a, 0), *col = NULL;
    int64_t cap = 0;
    int narrowed = 0;
    float beta = 0.0f;
    chunking ch = { g.N, g.P };
    int direct = is_direct(g);
    if (!direct) {
        if ((s = columns_begin(l, a, &col, &cap)) != PBL_OK)
            goto done;
        narrowed = 1;
        if ((s = chunks_for(g, cap, a, "conv2d_grad_weight", &ch)) != PBL_OK)
            goto done;
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += ch.ns) {
        int64_t ns = g.N - n0 < ch.ns ? g.N - n0 : ch.ns;
        for (int64_t p0 = 0; p0 < g.P; p0 += ch.pc) {
            int64_t pc = g.P - p0 < ch.pc ? g.P - p0 : ch.pc;
            mat cm;
            if (direct) {
                cm = { x + n0 * g.C * g.P, g.P, g.C * g.P, g.Cg * g.P };
            } else {
                int64_t n = ns * g.C * g.KK * pc;
                PBL__LAUNCH(im2col_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(col, x, g, n0, ns, p0, pc);
                PBL__LAUNCHED();
                cm = { col, pc, g.C * g.KK * pc, g.K * pc };
            }
            /* row-major dw_g[Cog, K] += dy_g[Cog, pc] (ld P) · col_g[K, pc]ᵀ
             * <=> column-major dw_gᵀ[K, Cog] += col_g[K, pc] (stored as [pc, K]: transposed) · dy_gᵀ[pc, Cog] */
            mat dm = { dy + n0 * g.Co * g.P + p0, g.P, g.Co * g.P, g.Cog * g.P };
            mat wm = { dw, g.K, 0, g.Cog * g.K };
            if ((s = chunk_gemm(l, a, CUBLAS_OP_T, CUBLAS_OP_N, g.K, g.Cog, pc, cm, dm, beta, wm, ns, g.G, 1)) != PBL_OK)
                goto done;
            beta = 1.0f;
        }
    }
done:
    return narrowed ? columns_end(l, a, s) : s;
}
