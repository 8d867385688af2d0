/*
 * pebble's host CUDA emulator: cuBLAS (sgemm, strided batched) and cuBLASLt (matmul with
 * epilogues; their semantics are listed in include/cublasLt.h).
 *
 * Column-major throughout, as the libraries are. Argument checks follow NVIDIA's cuBLAS
 * documentation for cublas<t>gemm: CUBLAS_STATUS_INVALID_VALUE when m, n or k < 0, a transpose
 * is not N/T/C, lda < max(1, m) for op N (max(1, k) otherwise), ldb < max(1, k) for op N
 * (max(1, n) otherwise), ldc < max(1, m), alpha or beta NULL; CUBLAS_STATUS_NOT_INITIALIZED for
 * a handle that cublasCreate did not return (or that was destroyed). The work is enqueued on
 * the handle's stream (cublasSetStream) or, for cuBLASLt, on the call's stream: under a
 * capture it becomes a graph node. Every matrix must lie inside one device allocation (its
 * extent from its ld and dimensions): else the sticky cudaErrorIllegalAddress when it would
 * run, as a GPU would fault. Products accumulate in float, k in increasing order; with
 * beta == 0, C is not read (cuBLAS: "C does not have to be a valid input"). Under
 * CUBLAS_TF32_TENSOR_OP_MATH (cuBLAS) or CUBLAS_COMPUTE_32F_FAST_TF32 (cuBLASLt) the inputs are
 * rounded to TF32 first, so a product that slipped into TF32 fails test_cuda's fp32 tolerances
 * (tried: the backend's math mode set to TF32 fails 78 checks; fully_connected_act's cuBLASLt
 * descriptor set to FAST_TF32 fails its cases).
 *
 * cuBLASLt algorithms. cublasLtMatmulAlgoGetHeuristic chooses for the alignment its preference
 * declares (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES, 256 by default) and the bias
 * pointer's own alignment (cublasLt.h: the heuristic "depend[s] on its value to determine
 * expected pointer alignment"); an algorithm it returns remembers them, and cublasLtMatmul
 * with that algorithm and a less aligned pointer fails loudly (CUBLAS_STATUS_INVALID_VALUE and
 * a line on stderr) where a GPU kernel built for the stricter alignment would misbehave.
 * $PBL_EMU_LT_DECLINE=1 makes cuBLASLt decline every epilogue but DEFAULT (the heuristic
 * answers CUBLAS_STATUS_NOT_SUPPORTED, cublasLtMatmul with a NULL algo likewise), as a GPU's
 * library may for an fp32 configuration: the callers' fallbacks then run (test_cuda_emu_lt_declined).
 */
#include "emu.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

struct cublasContext {
    cudaStream_t        stream = nullptr;
    void               *workspace = nullptr;
    size_t              workspace_bytes = 0;
    cublasMath_t        math = CUBLAS_DEFAULT_MATH;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

struct cublasLtContext {
    int unused = 0;
};

namespace {

std::mutex                      handles_m;
std::set<cublasContext *>       handles;
std::set<cublasLtContext *>     lt_handles;

bool live(cublasContext *h)
{
    std::lock_guard<std::mutex> lk(handles_m);
    return h && handles.count(h);
}

bool live_lt(cublasLtContext *h)
{
    std::lock_guard<std::mutex> lk(handles_m);
    return h && lt_handles.count(h);
}

/* Bytes a column-major rows x cols matrix with leading dimension ld spans. */
size_t extent(int64_t rows, int64_t cols, int64_t ld, size_t esize)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    return (size_t)((cols - 1) * ld + rows) * esize;
}

/* The pointers a piece of work reads or writes: checked when it is enqueued. */
struct span {
    const void *p;
    size_t      n;
    const char *what;
};

/* Enqueues `work`, or a sticky illegal-address fault if a span is not device memory. */
cudaError_t submit(cudaStream_t s, const char *call, std::vector<span> spans, std::function<void()> work)
{
    for (const span &sp : spans)
        if (sp.n && !pbl_emu::is_device(sp.p, sp.n)) {
            std::string c = call, w = sp.what;
            const void *p = sp.p;
            size_t n = sp.n;
            return pbl_emu::enqueue(s, [c, w, p, n] {
                pbl_emu::set_sticky(cudaErrorIllegalAddress, "%s: %s (%p, %zu bytes) is not inside one device allocation",
                                    c.c_str(), w.c_str(), p, n);
            }, call);
        }
    return pbl_emu::enqueue(s, std::move(work), call);
}

float opget(const float *M, int64_t ld, bool t, int64_t r, int64_t c)
{
    return t ? M[c + r * ld] : M[r + c * ld];
}

/* v rounded to TF32 (10 mantissa bits, to nearest, ties away: PTX cvt.rna.tf32.f32), as the
 * tensor cores read fp32 inputs under CUBLAS_TF32_TENSOR_OP_MATH or CUBLAS_COMPUTE_32F_FAST_TF32:
 * a product that asked for TF32 loses ~3 decimal digits here too, so it cannot pass a
 * comparison that full fp32 needs by luck */
float tf32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) { /* not inf/NaN */
        u += 0x1000u;
        u &= ~0x1fffu;
    }
    memcpy(&v, &u, sizeof v);
    return v;
}

/* an operand's element as the product reads it */
float in_val(const float *M, int64_t ld, bool t, int64_t r, int64_t c, bool round_tf32)
{
    float v = opget(M, ld, t, r, c);
    return round_tf32 ? tf32(v) : v;
}

/* C[m, n] = alpha·op(A)·op(B) + beta·C, column-major */
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t lda,
          const float *B, int64_t ldb, float beta, float *C, int64_t ldc, bool round_tf32)
{
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < k; p++)
                acc += in_val(A, lda, ta, i, p, round_tf32) * in_val(B, ldb, tb, p, j, round_tf32);
            float v = alpha * acc;
            C[i + j * ldc] = beta == 0.0f ? v : v + beta * C[i + j * ldc];
        }
}

bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

int64_t max1(int64_t v) { return v > 1 ? v : 1; }

cublasStatus_t gemm_common(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, long long sa, const float *B, int ldb,
                           long long sb, const float *beta, float *C, int ldc, long long sc, int batch,
                           const char *call)
{
    if (!live(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || !op_ok(ta) || !op_ok(tb) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    bool tra = ta != CUBLAS_OP_N, trb = tb != CUBLAS_OP_N;
    if (lda < max1(tra ? k : m) || ldb < max1(trb ? n : k) || ldc < max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    bool dev = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    float al = dev ? 0.0f : *alpha, be = dev ? 0.0f : *beta;
    const float *dal = dev ? alpha : nullptr, *dbe = dev ? beta : nullptr;
    bool round_tf32 = h->math == CUBLAS_TF32_TENSOR_OP_MATH;
    std::vector<span> spans;
    for (int b = 0; b < batch; b++) {
        spans.push_back({ A + b * sa, extent(tra ? k : m, tra ? m : k, lda, 4), "A" });
        spans.push_back({ B + b * sb, extent(trb ? n : k, trb ? k : n, ldb, 4), "B" });
        spans.push_back({ C + b * sc, extent(m, n, ldc, 4), "C" });
    }
    if (dev) {
        spans.push_back({ alpha, 4, "alpha" });
        spans.push_back({ beta, 4, "beta" });
    }
    cudaError_t e = submit(h->stream, call, std::move(spans), [=] {
        float a1 = dal ? *dal : al, b1 = dbe ? *dbe : be;
        for (int b = 0; b < batch; b++)
            gemm(tra, trb, m, n, k, a1, A + b * sa, lda, B + b * sb, ldb, b1, C + b * sc, ldc, round_tf32);
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* ---- cuBLASLt descriptors ------------------------------------------------------------------- */

struct lt_desc {
    int32_t  compute, scale, pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    int32_t  transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N, fill = 0;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    void    *bias = nullptr, *aux = nullptr;
    int64_t  bias_stride = 0, aux_ld = 0, aux_stride = 0;
    int32_t  aux_type = -1, bias_type = -1;
};

struct lt_layout {
    int32_t  type;
    int32_t  order = CUBLASLT_ORDER_COL;
    uint64_t rows, cols;
    int64_t  ld;
    int32_t  batch = 1;
    int64_t  stride = 0;
};

struct lt_pref {
    uint64_t max_ws = 0;
    uint32_t search = 0;
    uint32_t align[4] = { 256, 256, 256, 256 }; /* A, B, C, D: the alignment the caller promises */
};

/* The emulator's algorithm handle: a tag and the alignments it was chosen for. */
const uint64_t ALGO_TAG = 0x70626c656d75616cull; /* "pblemual" */
enum { ALGO_A = 1, ALGO_B, ALGO_C, ALGO_D, ALGO_BIAS };

/* The largest power of two up to 256 dividing p's address. */
uint32_t align_of(const void *p)
{
    uint32_t al = 256;
    while (al > 1 && (uintptr_t)p % al != 0)
        al /= 2;
    return al;
}

bool lt_declines(uint32_t epilogue)
{
    const char *e = getenv("PBL_EMU_LT_DECLINE");
    return epilogue != CUBLASLT_EPILOGUE_DEFAULT && e && strcmp(e, "1") == 0;
}

std::mutex             lt_m;
std::set<lt_desc *>    descs;
std::set<lt_layout *>  layouts;
std::set<lt_pref *>    prefs;

template <class T>
bool live_obj(std::set<T *> &set, T *p)
{
    std::lock_guard<std::mutex> lk(lt_m);
    return p && set.count(p);
}

template <class T>
cublasStatus_t set_field(T &field, const void *buf, size_t size)
{
    if (!buf || size != sizeof(T))
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

bool has_bias_in(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_bias_out(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DRELU_BGRAD || e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}
bool is_relu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_RELU_AUX ||
           e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
}
bool is_gelu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool relu_mask_aux(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DRELU ||
           e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}
bool gelu_input_aux(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
           e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
bool known_epilogue(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DEFAULT || is_relu(e) || is_gelu(e) || has_bias_in(e) || has_bias_out(e) ||
           e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DGELU;
}

const float GELU_C = 0.7978845608028654f; /* sqrt(2/pi) */
const float GELU_K = 0.044715f;

float gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(GELU_C * (x + GELU_K * x * x * x))); }

float gelu_tanh_grad(float x)
{
    float t = tanhf(GELU_C * (x + GELU_K * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_K * x * x);
}

/* A matmul's checked configuration, copied for the enqueued work. */
struct lt_job {
    bool     ta, tb;
    bool     tf32; /* CUBLAS_COMPUTE_32F_FAST_TF32 */
    int64_t  m, n, k, lda, ldb, ldc, ldd;
    uint32_t epi;
    float    alpha, beta;
    const float *dalpha, *dbeta; /* device pointer mode */
    const float *A, *B, *C;
    float   *D;
    float   *bias;
    void    *aux;
    int64_t  aux_ld;
};

void lt_run(const lt_job &j)
{
    float alpha = j.dalpha ? *j.dalpha : j.alpha, beta = j.dbeta ? *j.dbeta : j.beta;
    std::vector<float> prod((size_t)(j.m * j.n));
    for (int64_t c = 0; c < j.n; c++)
        for (int64_t r = 0; r < j.m; r++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < j.k; p++)
                acc += in_val(j.A, j.lda, j.ta, r, p, j.tf32) * in_val(j.B, j.ldb, j.tb, p, c, j.tf32);
            float v = alpha * acc;
            prod[(size_t)(r + c * j.m)] = beta == 0.0f ? v : v + beta * j.C[r + c * j.ldc];
        }
    uint32_t e = j.epi;
    unsigned char *mask = (unsigned char *)j.aux;
    float *gin = (float *)j.aux;
    for (int64_t c = 0; c < j.n; c++)
        for (int64_t r = 0; r < j.m; r++) {
            float v = prod[(size_t)(r + c * j.m)];
            int64_t bit = r + c * j.aux_ld;
            if (has_bias_in(e))
                v += j.bias[r];
            if (e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
                gin[r + c * j.aux_ld] = v;
            if (is_relu(e)) {
                bool keep = v > 0.0f;
                if (e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS) {
                    unsigned char bitv = (unsigned char)(1u << (bit % 8));
                    mask[bit / 8] = keep ? (unsigned char)(mask[bit / 8] | bitv) : (unsigned char)(mask[bit / 8] & ~bitv);
                }
                v = keep ? v : 0.0f;
            } else if (is_gelu(e)) {
                v = gelu_tanh(v);
            } else if (e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DRELU_BGRAD) {
                v = (mask[bit / 8] >> (bit % 8)) & 1u ? v : 0.0f;
            } else if (e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
                v = v * gelu_tanh_grad(gin[r + c * j.aux_ld]);
            }
            j.D[r + c * j.ldd] = v;
        }
    if (e == CUBLASLT_EPILOGUE_DRELU_BGRAD || e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
        for (int64_t r = 0; r < j.m; r++) {
            float acc = 0.0f;
            for (int64_t c = 0; c < j.n; c++)
                acc += j.D[r + c * j.ldd];
            j.bias[r] = acc;
        }
    } else if (e == CUBLASLT_EPILOGUE_BGRADA) {
        for (int64_t r = 0; r < j.m; r++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < j.k; p++)
                acc += opget(j.A, j.lda, j.ta, r, p);
            j.bias[r] = acc;
        }
    } else if (e == CUBLASLT_EPILOGUE_BGRADB) {
        for (int64_t c = 0; c < j.n; c++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < j.k; p++)
                acc += opget(j.B, j.ldb, j.tb, p, c);
            j.bias[c] = acc;
        }
    }
}

/* Checks a matmul's descriptors; fills the job's shapes. */
cublasStatus_t lt_check(lt_desc *d, lt_layout *a, lt_layout *b, lt_layout *c, lt_layout *dd, lt_job *j)
{
    if (!live_obj(descs, d) || !live_obj(layouts, a) || !live_obj(layouts, b) || !live_obj(layouts, c) ||
        !live_obj(layouts, dd))
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_FAST_TF32 &&
         d->compute != CUBLAS_COMPUTE_32F_PEDANTIC) ||
        d->scale != CUDA_R_32F || d->transc != CUBLAS_OP_N)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    for (lt_layout *l : { a, b, c, dd })
        if (l->type != CUDA_R_32F || l->order != CUBLASLT_ORDER_COL || l->batch != 1)
            return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!op_ok((cublasOperation_t)d->transa) || !op_ok((cublasOperation_t)d->transb) || !known_epilogue(d->epilogue))
        return CUBLAS_STATUS_INVALID_VALUE;
    j->ta = d->transa != CUBLAS_OP_N;
    j->tb = d->transb != CUBLAS_OP_N;
    j->m = (int64_t)dd->rows;
    j->n = (int64_t)dd->cols;
    j->k = (int64_t)(j->ta ? a->rows : a->cols);
    int64_t am = (int64_t)(j->ta ? a->cols : a->rows);
    int64_t bk = (int64_t)(j->tb ? b->cols : b->rows), bn = (int64_t)(j->tb ? b->rows : b->cols);
    if (am != j->m || bk != j->k || bn != j->n || (int64_t)c->rows != j->m || (int64_t)c->cols != j->n)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (lt_layout *l : { a, b, c, dd })
        if (l->ld < max1((int64_t)l->rows))
            return CUBLAS_STATUS_INVALID_VALUE;
    j->lda = a->ld;
    j->ldb = b->ld;
    j->ldc = c->ld;
    j->ldd = dd->ld;
    j->epi = d->epilogue;
    j->tf32 = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    if ((has_bias_in(j->epi) || has_bias_out(j->epi)) && !d->bias)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (relu_mask_aux(j->epi) || gelu_input_aux(j->epi)) {
        if (!d->aux)
            return CUBLAS_STATUS_INVALID_VALUE;
        int64_t mult = relu_mask_aux(j->epi) ? 128 : 8;
        if (d->aux_ld < j->m || d->aux_ld % mult != 0)
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    j->bias = (float *)d->bias;
    j->aux = d->aux;
    j->aux_ld = d->aux_ld;
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    default: return "unknown error";
    }
}

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (pbl_emu::sticky() != cudaSuccess)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasContext *c = new cublasContext;
    std::lock_guard<std::mutex> lk(handles_m);
    handles.insert(c);
    *h = c;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    std::lock_guard<std::mutex> lk(handles_m);
    if (!h || !handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handles.erase(h);
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!live(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s)
{
    if (!live(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s)
        return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (!live(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && (!ws || !pbl_emu::is_device(ws, bytes) || ((uintptr_t)ws % 256) != 0))
        return CUBLAS_STATUS_INVALID_VALUE; /* device memory, 256-byte aligned (cuBLAS guide) */
    h->workspace = ws;
    h->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!live(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_PEDANTIC_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->math = mode; /* CUBLAS_TF32_TENSOR_OP_MATH rounds the products' inputs to TF32 (tf32()) */
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t h, cublasPointerMode_t mode)
{
    if (!live(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    h->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc)
{
    return gemm_common(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, "cublasSgemm");
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long int sa,
                                         const float *B, int ldb, long long int sb, const float *beta, float *C,
                                         int ldc, long long int sc, int batch)
{
    return gemm_common(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch,
                       "cublasSgemmStridedBatched");
}

/* ---- cuBLASLt ------------------------------------------------------------------------------ */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtContext *c = new cublasLtContext;
    std::lock_guard<std::mutex> lk(handles_m);
    lt_handles.insert(c);
    *h = c;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    std::lock_guard<std::mutex> lk(handles_m);
    if (!h || !lt_handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lt_handles.erase(h);
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *p, cublasComputeType_t compute, cudaDataType_t scale)
{
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_desc *d = new lt_desc;
    d->compute = compute;
    d->scale = scale;
    std::lock_guard<std::mutex> lk(lt_m);
    descs.insert(d);
    *p = reinterpret_cast<cublasLtMatmulDesc_t>(d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t p)
{
    lt_desc *d = reinterpret_cast<lt_desc *>(p);
    std::lock_guard<std::mutex> lk(lt_m);
    if (!d || !descs.count(d))
        return CUBLAS_STATUS_INVALID_VALUE;
    descs.erase(d);
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t p, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size)
{
    lt_desc *d = reinterpret_cast<lt_desc *>(p);
    if (!live_obj(descs, d))
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set_field(d->compute, buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set_field(d->scale, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set_field(d->pointer_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA: return set_field(d->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set_field(d->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSC: return set_field(d->transc, buf, size);
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return set_field(d->fill, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_field(d->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_field(d->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return set_field(d->bias_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set_field(d->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set_field(d->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return set_field(d->aux_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return set_field(d->aux_type, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_field(d->bias_type, buf, size);
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t p, cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t size, size_t *written)
{
    lt_desc *d = reinterpret_cast<lt_desc *>(p);
    if (!live_obj(descs, d))
        return CUBLAS_STATUS_INVALID_VALUE;
    const void *src = nullptr;
    size_t n = 0;
    switch (attr) {
#define F(a, f) case a: src = &d->f; n = sizeof d->f; break;
    F(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute) F(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale)
    F(CUBLASLT_MATMUL_DESC_POINTER_MODE, pointer_mode) F(CUBLASLT_MATMUL_DESC_TRANSA, transa)
    F(CUBLASLT_MATMUL_DESC_TRANSB, transb) F(CUBLASLT_MATMUL_DESC_TRANSC, transc)
    F(CUBLASLT_MATMUL_DESC_FILL_MODE, fill) F(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue)
    F(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias) F(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, bias_stride)
    F(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux) F(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld)
    F(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, aux_stride)
    F(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type) F(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type)
#undef F
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (written)
        *written = n;
    if (size == 0 && written)
        return CUBLAS_STATUS_SUCCESS; /* a size query */
    if (!buf || size != n)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, src, n);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *p, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld)
{
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_layout *l = new lt_layout;
    l->type = type;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    std::lock_guard<std::mutex> lk(lt_m);
    layouts.insert(l);
    *p = reinterpret_cast<cublasLtMatrixLayout_t>(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t p)
{
    lt_layout *l = reinterpret_cast<lt_layout *>(p);
    std::lock_guard<std::mutex> lk(lt_m);
    if (!l || !layouts.count(l))
        return CUBLAS_STATUS_INVALID_VALUE;
    layouts.erase(l);
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t p, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size)
{
    lt_layout *l = reinterpret_cast<lt_layout *>(p);
    if (!live_obj(layouts, l))
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return set_field(l->type, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_field(l->order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return set_field(l->rows, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return set_field(l->cols, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD: return set_field(l->ld, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_field(l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set_field(l->stride, buf, size);
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_pref *r = new lt_pref;
    std::lock_guard<std::mutex> lk(lt_m);
    prefs.insert(r);
    *p = reinterpret_cast<cublasLtMatmulPreference_t>(r);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    lt_pref *r = reinterpret_cast<lt_pref *>(p);
    std::lock_guard<std::mutex> lk(lt_m);
    if (!r || !prefs.count(r))
        return CUBLAS_STATUS_INVALID_VALUE;
    prefs.erase(r);
    delete r;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size)
{
    lt_pref *r = reinterpret_cast<lt_pref *>(p);
    if (!live_obj(prefs, r))
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return set_field(r->search, buf, size);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set_field(r->max_ws, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set_field(r->align[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set_field(r->align[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set_field(r->align[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set_field(r->align[3], buf, size);
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[], int *returned)
{
    if (!live_lt(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested <= 0 || !results || !returned || !live_obj(prefs, reinterpret_cast<lt_pref *>(pref)))
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_job j;
    cublasStatus_t st = lt_check(reinterpret_cast<lt_desc *>(op), reinterpret_cast<lt_layout *>(a),
                                 reinterpret_cast<lt_layout *>(b), reinterpret_cast<lt_layout *>(c),
                                 reinterpret_cast<lt_layout *>(d), &j);
    *returned = 0;
    if (st != CUBLAS_STATUS_SUCCESS)
        return st == CUBLAS_STATUS_INVALID_VALUE ? st : CUBLAS_STATUS_NOT_SUPPORTED;
    if (lt_declines(j.epi))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    lt_pref *p = reinterpret_cast<lt_pref *>(pref);
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = ALGO_TAG;
    for (int i = 0; i < 4; i++)
        results[0].algo.data[ALGO_A + i] = p->align[i];
    results[0].algo.data[ALGO_BIAS] = j.bias ? align_of(j.bias) : 256;
    results[0].workspaceSize = 0; /* the emulator's one algorithm needs no workspace */
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t ad, const void *B, cublasLtMatrixLayout_t bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cd, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t stream)
{
    if (!live_lt(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lt_desc *d = reinterpret_cast<lt_desc *>(op);
    lt_job j;
    cublasStatus_t st = lt_check(d, reinterpret_cast<lt_layout *>(ad), reinterpret_cast<lt_layout *>(bd),
                                 reinterpret_cast<lt_layout *>(cd), reinterpret_cast<lt_layout *>(dd), &j);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (!alpha || !beta || !A || !B || !D || (workspace_bytes && !workspace))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (C == D && j.ldc != j.ldd)
        return CUBLAS_STATUS_INVALID_VALUE; /* in place (C == D) needs identical layouts */
    bool dev = d->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    j.alpha = dev ? 0.0f : *(const float *)alpha;
    j.beta = dev ? 0.0f : *(const float *)beta;
    j.dalpha = dev ? (const float *)alpha : nullptr;
    j.dbeta = dev ? (const float *)beta : nullptr;
    if (!dev && j.beta != 0.0f && !C)
        return CUBLAS_STATUS_INVALID_VALUE;
    j.A = (const float *)A;
    j.B = (const float *)B;
    j.C = (const float *)C;
    j.D = (float *)D;
    std::vector<span> spans = {
        { A, extent(j.ta ? j.k : j.m, j.ta ? j.m : j.k, j.lda, 4), "A" },
        { B, extent(j.tb ? j.n : j.k, j.tb ? j.k : j.n, j.ldb, 4), "B" },
        { D, extent(j.m, j.n, j.ldd, 4), "D" },
    };
    if (C)
        spans.push_back({ C, extent(j.m, j.n, j.ldc, 4), "C" });
    if (has_bias_in(j.epi) || has_bias_out(j.epi))
        spans.push_back({ j.bias, (size_t)(j.epi == CUBLASLT_EPILOGUE_BGRADB ? j.n : j.m) * 4, "bias" });
    if (relu_mask_aux(j.epi))
        spans.push_back({ j.aux, (size_t)((j.n - 1) * j.aux_ld + j.m + 7) / 8, "aux (ReLU bit-mask)" });
    if (gelu_input_aux(j.epi))
        spans.push_back({ j.aux, extent(j.m, j.n, j.aux_ld, 4), "aux (GELU input)" });
    if (workspace_bytes)
        spans.push_back({ workspace, workspace_bytes, "workspace" });
    if (dev) {
        spans.push_back({ alpha, 4, "alpha" });
        spans.push_back({ beta, 4, "beta" });
    }
    if (!algo && lt_declines(j.epi))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (algo) {
        if (algo->data[0] != ALGO_TAG)
            return CUBLAS_STATUS_INVALID_VALUE; /* not from cublasLtMatmulAlgoGetHeuristic */
        const void *ptr[5] = { A, B, C ? C : D, D, j.bias };
        static const char *const name[5] = { "A", "B", "C", "D", "the bias" };
        for (int i = 0; i < 5; i++)
            if (ptr[i] && align_of(ptr[i]) < algo->data[ALGO_A + i]) {
                fprintf(stderr,
                        "pebble CUDA emulator: cublasLtMatmul: %s (%p) is %u-byte aligned, the algorithm was chosen "
                        "for %llu (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES / the bias pointer at the heuristic)\n",
                        name[i], ptr[i], align_of(ptr[i]), (unsigned long long)algo->data[ALGO_A + i]);
                return CUBLAS_STATUS_INVALID_VALUE;
            }
    }
    if (j.m == 0 || j.n == 0)
        return CUBLAS_STATUS_SUCCESS;
    cudaError_t e = submit(stream, "cublasLtMatmul", std::move(spans), [j] { lt_run(j); });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // extern "C"
