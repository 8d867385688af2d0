/* CUDA kernels: add, sub, mul, div with broadcasting; scale, add_n, fill, copy, and the
 * views reshape and flatten (a copy unless run in place). Every element reads only its
 * own index of the big operand, so in-place runs are safe, as on the CPU. */
#include "ops/cuda/common.cuh"

enum bin_kind { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV };

template <int K>
__global__ static void binary_k(float *y, const float *x, const float *b, int64_t n, pbl__dbcast bc, int same)
{
    PBL__GRID_LOOP(i, n) {
        float u = x[i], v = b[same ? i : pbl__dbcast_offset(bc, i)];
        y[i] = K == BIN_ADD ? u + v : K == BIN_SUB ? u - v : K == BIN_MUL ? u * v : u / v;
    }
}

/* add, sub, mul over i32: wrapping, computed unsigned as on the CPU */
template <int K>
__global__ static void binary_int_k(int32_t *y, const int32_t *x, const int32_t *b, int64_t n, pbl__dbcast bc, int same)
{
    PBL__GRID_LOOP(i, n) {
        uint32_t u = (uint32_t)x[i], v = (uint32_t)b[same ? i : pbl__dbcast_offset(bc, i)];
        y[i] = (int32_t)(K == BIN_ADD ? u + v : K == BIN_SUB ? u - v : u * v);
    }
}

template <int K>
static pbl_status binary(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    pbl__dbcast bc = pbl__dbcast_make(&a->in_meta[0].shape, &a->in_meta[1].shape);
    int same = PBL__NUMEL(a->in_meta[1]) == n;
    if (a->in_meta[0].dtype == PBL_I32)
        PBL__LAUNCH(binary_int_k<K>, pbl__blocks(n), PBL__THREADS, 0, l->stream)((int32_t *)a->out[0], (const int32_t *)a->in[0],
                                                                              (const int32_t *)a->in[1], n, bc, same);
    else
        PBL__LAUNCH(binary_k<K>, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1), n, bc, same);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_add(const pbl__cuda_launch *l, const pbl__kargs *a) { return binary<BIN_ADD>(l, a); }
extern "C" pbl_status pbl__cuda_sub(const pbl__cuda_launch *l, const pbl__kargs *a) { return binary<BIN_SUB>(l, a); }
extern "C" pbl_status pbl__cuda_mul(const pbl__cuda_launch *l, const pbl__kargs *a) { return binary<BIN_MUL>(l, a); }
extern "C" pbl_status pbl__cuda_div(const pbl__cuda_launch *l, const pbl__kargs *a) { return binary<BIN_DIV>(l, a); }

__global__ static void scale_k(float *y, const float *x, float alpha, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        y[i] = alpha * x[i];
}

extern "C" pbl_status pbl__cuda_scale(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(scale_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), (float)a->attr[0].f, n);
    PBL__LAUNCHED();
done:
    return s;
}

/* y += x, one input at a time in input order: the CPU's order of additions per element */
__global__ static void accumulate_k(float *y, const float *x, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        y[i] += x[i];
}

extern "C" pbl_status pbl__cuda_add_n(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    float *y = PBL__OUT(a, 0);
    if (y != PBL__IN(a, 0))
        PBL__CU(cudaMemcpyAsync(y, PBL__IN(a, 0), (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, l->stream));
    for (int32_t k = 1; k < a->n_in; k++) {
        PBL__LAUNCH(accumulate_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(y, PBL__IN(a, k), n);
        PBL__LAUNCHED();
    }
done:
    return s;
}

__global__ static void fill_k(float *y, float v, int64_t n)
{
    PBL__GRID_LOOP(i, n)
        y[i] = v;
}

extern "C" pbl_status pbl__cuda_fill(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->out_meta[0]);
    PBL__LAUNCH(fill_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), (float)a->attr[1].f, n);
    PBL__LAUNCHED();
done:
    return s;
}

static pbl_status copy_bytes(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    if (a->out[0] != a->in[0])
        PBL__CU(cudaMemcpyAsync(a->out[0], a->in[0], pbl__meta_bytes(&a->in_meta[0]), cudaMemcpyDeviceToDevice,
                                l->stream));
done:
    return s;
}

extern "C" pbl_status pbl__cuda_copy(const pbl__cuda_launch *l, const pbl__kargs *a) { return copy_bytes(l, a); }
extern "C" pbl_status pbl__cuda_reshape(const pbl__cuda_launch *l, const pbl__kargs *a) { return copy_bytes(l, a); }
extern "C" pbl_status pbl__cuda_flatten(const pbl__cuda_launch *l, const pbl__kargs *a) { return copy_bytes(l, a); }
