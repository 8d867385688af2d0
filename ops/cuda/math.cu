/* CUDA kernels of the math family (ops/math.c): the formulas of ops/shared/math.h, the same
 * ones the CPU kernels (ops/cpu/math.c) run. Every element reads only its own index of the
 * full-shape operands, so the maps may run in place, as on the CPU. */
#include "ops/cuda/common.cuh"
#include "ops/shared/math.h"

/* The op's float attribute k (p, q of the formulas), 0 when it has fewer */
#define ATTR_F(a, na, k) ((na) > (k) ? (float)(a)->attr[k].f : 0.0f)

/* ---- unary: y = f(x), dx = dy·f'(x) ------------------------------------------------------- */

#define UNARY(n)                                                                                    \
    __global__ static void n##_k(float *y, const float *x, float p, float q, int64_t cnt)           \
    {                                                                                               \
        PBL__GRID_LOOP(i, cnt)                                                                      \
            y[i] = pbl__mf_##n(x[i], p, q);                                                         \
    }                                                                                               \
    __global__ static void n##_grad_k(float *dx, const float *dy, const float *x, float p, float q, int64_t cnt) \
    {                                                                                               \
        PBL__GRID_LOOP(i, cnt)                                                                      \
            dx[i] = dy[i] * pbl__md_##n(x[i], p, q);                                                \
    }                                                                                               \
    extern "C" pbl_status pbl__cuda_##n(const pbl__cuda_launch *l, const pbl__kargs *a)            \
    {                                                                                               \
        pbl_status s = PBL_OK;                                                                      \
        int64_t cnt = PBL__NUMEL(a->in_meta[0]);                                                    \
        PBL__LAUNCH(n##_k, pbl__blocks(cnt), PBL__THREADS, 0, l->stream)(                           \
            PBL__OUT(a, 0), PBL__IN(a, 0), ATTR_F(a, PBL__MATH_ATTRS_##n, 0), ATTR_F(a, PBL__MATH_ATTRS_##n, 1), cnt); \
        PBL__LAUNCHED();                                                                            \
    done:                                                                                           \
        return s;                                                                                   \
    }                                                                                               \
    extern "C" pbl_status pbl__cuda_##n##_grad(const pbl__cuda_launch *l, const pbl__kargs *a)     \
    {                                                                                               \
        pbl_status s = PBL_OK;                                                                      \
        int64_t cnt = PBL__NUMEL(a->in_meta[0]);                                                    \
        PBL__LAUNCH(n##_grad_k, pbl__blocks(cnt), PBL__THREADS, 0, l->stream)(                      \
            PBL__OUT(a, 0), PBL__IN(a, 0), PBL__IN(a, 1), ATTR_F(a, PBL__MATH_ATTRS_##n, 0),        \
            ATTR_F(a, PBL__MATH_ATTRS_##n, 1), cnt);                                                \
        PBL__LAUNCHED();                                                                            \
    done:                                                                                           \
        return s;                                                                                   \
    }
PBL__MATH_UNARY_LIST(UNARY, )

/* ---- broadcast binary: out[i] = F(full operands at i, b at its broadcast offset) ------------ */

/* The functors the one broadcast kernel runs: each reads (dy,) a at i and b, writes out[i]. */
#define FUNCTORS(n)                                                                                 \
    struct n##_f {                                                                                  \
        __device__ void operator()(float *o, const float *const *f, float b, int64_t i, int64_t) const \
        {                                                                                           \
            o[i] = pbl__mf_##n(f[0][i], b);                                                         \
        }                                                                                           \
    };                                                                                              \
    struct n##_grad_f {                                                                             \
        __device__ void operator()(float *o, const float *const *f, float b, int64_t i, int64_t wrt) const \
        {                                                                                           \
            o[i] = f[0][i] * (wrt == 0 ? pbl__mda_##n(f[1][i], b) : pbl__mdb_##n(f[1][i], b));    \
        }                                                                                           \
    };
PBL__MATH_BINARY_LIST(FUNCTORS, )

#define CMP_FUNCTORS(n)                                                                             \
    struct n##_cf {                                                                                 \
        __device__ void operator()(int32_t *o, const float *const *f, float b, int64_t i, int64_t) const \
        {                                                                                           \
            o[i] = pbl__mcf_##n(f[0][i], b);                                                        \
        }                                                                                           \
    };                                                                                              \
    struct n##_ci {                                                                                 \
        __device__ void operator()(int32_t *o, const int32_t *const *f, int32_t b, int64_t i, int64_t) const \
        {                                                                                           \
            o[i] = pbl__mci_##n(f[0][i], b);                                                        \
        }                                                                                           \
    };
PBL__MATH_COMPARE_LIST(CMP_FUNCTORS)
PBL__MATH_LOGIC_LIST(CMP_FUNCTORS)

#define INT_FUNCTOR(n)                                                                              \
    struct n##_if {                                                                                 \
        __device__ void operator()(int32_t *o, const int32_t *const *f, int32_t b, int64_t i, int64_t) const \
        {                                                                                           \
            o[i] = pbl__mi_##n(f[0][i], b);                                                         \
        }                                                                                           \
    };
PBL__MATH_INT_LIST(INT_FUNCTOR)

/* Up to two full-shape operands, passed by value */
template <typename T> struct fulls {
    const T *p[2];
};

template <typename F, typename TO, typename T>
__global__ static void bcast_k(F fn, TO *o, fulls<T> f, const T *b, int64_t cnt, pbl__dbcast bc, int same, int64_t wrt)
{
    PBL__GRID_LOOP(i, cnt)
        fn(o, f.p, b[same ? i : pbl__dbcast_offset(bc, i)], i, wrt);
}

/* inputs: n_full full-shape ones from `first`, then b (broadcast to them) */
template <typename F, typename TO, typename T>
static pbl_status bcast(const pbl__cuda_launch *l, const pbl__kargs *a, int32_t first, int32_t n_full, int64_t wrt)
{
    pbl_status s = PBL_OK;
    int32_t ib = first + n_full;
    int64_t cnt = PBL__NUMEL(a->in_meta[first]);
    pbl__dbcast bc = pbl__dbcast_make(&a->in_meta[first].shape, &a->in_meta[ib].shape);
    int same = PBL__NUMEL(a->in_meta[ib]) == cnt;
    fulls<T> f;
    f.p[0] = (const T *)a->in[first];
    f.p[1] = n_full > 1 ? (const T *)a->in[first + 1] : NULL;
    PBL__LAUNCH((bcast_k<F, TO, T>), pbl__blocks(cnt), PBL__THREADS, 0, l->stream)(F(), (TO *)a->out[0], f,
                                                                                     (const T *)a->in[ib], cnt, bc, same, wrt);
    PBL__LAUNCHED();
done:
    return s;
}

#define BINARY(n)                                                                                   \
    extern "C" pbl_status pbl__cuda_##n(const pbl__cuda_launch *l, const pbl__kargs *a)            \
    {                                                                                               \
        return bcast<n##_f, float, float>(l, a, 0, 1, 0);                                           \
    }                                                                                               \
    extern "C" pbl_status pbl__cuda_##n##_grad(const pbl__cuda_launch *l, const pbl__kargs *a)     \
    {                                                                                               \
        return bcast<n##_grad_f, float, float>(l, a, 0, 2, a->attr[0].i);                           \
    }
PBL__MATH_BINARY_LIST(BINARY, )

#define COMPARE(n)                                                                                  \
    extern "C" pbl_status pbl__cuda_##n(const pbl__cuda_launch *l, const pbl__kargs *a)            \
    {                                                                                               \
        if (a->in_meta[0].dtype == PBL_F32)                                                         \
            return bcast<n##_cf, int32_t, float>(l, a, 0, 1, 0);                                    \
        return bcast<n##_ci, int32_t, int32_t>(l, a, 0, 1, 0);                                      \
    }
PBL__MATH_COMPARE_LIST(COMPARE)
PBL__MATH_LOGIC_LIST(COMPARE)

#define INT_MAP(n)                                                                                  \
    extern "C" pbl_status pbl__cuda_##n(const pbl__cuda_launch *l, const pbl__kargs *a)            \
    {                                                                                               \
        return bcast<n##_if, int32_t, int32_t>(l, a, 0, 1, 0);                                      \
    }
PBL__MATH_INT_LIST(INT_MAP)

#define PREDICATE(n)                                                                                \
    __global__ static void n##_k(int32_t *y, const float *x, int64_t p, int64_t q, int64_t cnt)     \
    {                                                                                               \
        PBL__GRID_LOOP(i, cnt)                                                                      \
            y[i] = pbl__mp_##n(x[i], p, q);                                                         \
    }                                                                                               \
    extern "C" pbl_status pbl__cuda_##n(const pbl__cuda_launch *l, const pbl__kargs *a)            \
    {                                                                                               \
        pbl_status s = PBL_OK;                                                                      \
        int64_t cnt = PBL__NUMEL(a->in_meta[0]);                                                    \
        int64_t p = PBL__MATH_ATTRS_##n > 0 ? a->attr[0].i : 0, q = PBL__MATH_ATTRS_##n > 1 ? a->attr[1].i : 0; \
        PBL__LAUNCH(n##_k, pbl__blocks(cnt), PBL__THREADS, 0, l->stream)((int32_t *)a->out[0], PBL__IN(a, 0), p, q, cnt); \
        PBL__LAUNCHED();                                                                            \
    done:                                                                                           \
        return s;                                                                                   \
    }
PBL__MATH_PREDICATE_LIST(PREDICATE)

__global__ static void not_k(int32_t *y, const int32_t *x, int64_t cnt)
{
    PBL__GRID_LOOP(i, cnt)
        y[i] = x[i] == 0;
}

extern "C" pbl_status pbl__cuda_logical_not(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t cnt = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(not_k, pbl__blocks(cnt), PBL__THREADS, 0, l->stream)((int32_t *)a->out[0], (const int32_t *)a->in[0], cnt);
    PBL__LAUNCHED();
done:
    return s;
}

/* cond ? x : y; x and y of any (4-byte) dtype */
__global__ static void where_k(uint32_t *o, const int32_t *c, const uint32_t *x, const uint32_t *y, int64_t cnt)
{
    PBL__GRID_LOOP(i, cnt)
        o[i] = c[i] ? x[i] : y[i];
}

extern "C" pbl_status pbl__cuda_where(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t cnt = PBL__NUMEL(a->in_meta[0]);
    PBL__LAUNCH(where_k, pbl__blocks(cnt), PBL__THREADS, 0, l->stream)((uint32_t *)a->out[0], (const int32_t *)a->in[0],
                                                                       (const uint32_t *)a->in[1],
                                                                       (const uint32_t *)a->in[2], cnt);
    PBL__LAUNCHED();
done:
    return s;
}
