/*
 * The host CUDA emulator's own semantics (emu.h, include/cublasLt.h), checked one by one:
 * launch configuration errors (not sticky), sticky faults (a host pointer given to a kernel, a
 * divergent __syncthreads, one met at two statements: each in a child process, since sticky
 * errors end a context), __syncthreads as a real barrier, block order changing between
 * launches, pageable copies staged at the call, event edges between streams, the legacy
 * stream's implicit order with blocking streams, stream capture (replay not run at capture,
 * cross-stream join, unjoined work, illegal calls during capture), cuBLAS argument checks and
 * column-major products, and every cuBLASLt epilogue on small hand-checkable matrices: bias
 * per row of D, the ReLU bit-mask (bit i + j·ld) and its ld rule, GELU's saved input,
 * DRELU/DGELU(_BGRAD), BGRADA/BGRADB; a heuristic's algorithm refusing pointers less aligned
 * than its preference promised, cuBLASLt declining epilogues under PBL_EMU_LT_DECLINE=1, and
 * the 2-D copy's pitch limit. Compiled with the emulator's sources, like a kernel file
 * (-include pbl_emu_device.h).
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static int failures;

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                         \
            fputc('\n', stderr);                                  \
            failures++;                                           \
        }                                                         \
    } while (0)

#define EQ(call, want)                                                                             \
    do {                                                                                           \
        int got_ = (int)(call);                                                                    \
        CHECK(got_ == (int)(want), "%s gave %d, want %s (%d)", #call, got_, #want, (int)(want));  \
    } while (0)

/* ---- kernels ------------------------------------------------------------------------------ */

__global__ static void fill_k(float *y, float v, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = v;
}

__global__ static void add_one_k(float *y) { y[0] += 1.0f; }

/* y[0] = sum of x[0..n) by one block of 128 threads through shared memory: wrong without a
 * real barrier (a thread would read its partner's slot before it is written) */
__global__ static void block_sum_k(float *y, const float *x, int n)
{
    __shared__ float part[128];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += 128)
        acc += x[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = 64; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        y[0] = part[0];
}

/* reverses x within the block through shared memory (every thread reads another's write) */
__global__ static void reverse_k(float *y, const float *x)
{
    __shared__ float s[64];
    s[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * 64 + threadIdx.x] = s[63 - threadIdx.x];
}

/* a race between blocks: block b reads what block b - 1 writes in the same launch */
__global__ static void chain_k(float *y) { y[blockIdx.x] = (blockIdx.x ? y[blockIdx.x - 1] : 0.0f) + 1.0f; }

__global__ static void divergent_k(float *y)
{
    if (threadIdx.x == 0)
        return; /* thread 0 leaves; the others wait at a barrier it never reaches */
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}

/* every thread passes one barrier, but the two halves of the block at different statements */
__global__ static void split_k(float *y)
{
    if (threadIdx.x < 32) {
        y[threadIdx.x] = 1.0f;
        __syncthreads();
    } else {
        __syncthreads();
        y[threadIdx.x] = 2.0f;
    }
}

/* ---- helpers ------------------------------------------------------------------------------ */

static std::vector<float> download(const float *d, size_t n)
{
    std::vector<float> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
}

static float *upload(const std::vector<float> &h)
{
    float *d = nullptr;
    cudaMalloc((void **)&d, h.size() * sizeof(float));
    cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

/* Runs f in a child process (a sticky error ends the context); its exit status. */
template <class F>
static int in_child(F f)
{
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0)
        _exit(f());
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

/* ---- the checks ----------------------------------------------------------------------------- */

static void sticky_faults()
{
    /* before any stream exists (fork with no other threads) */
    int rc = in_child([] {
        float host[4];
        PBL__LAUNCH(fill_k, 1, 4, 0, nullptr)(host, 1.0f, 4);
        cudaError_t e = cudaGetLastError(); /* found when the kernel runs: maybe already */
        if (e != cudaSuccess && e != cudaErrorIllegalAddress)
            return 1;
        if (cudaDeviceSynchronize() != cudaErrorIllegalAddress)
            return 2;
        float *d = nullptr;
        return cudaMalloc((void **)&d, 4) == cudaErrorIllegalAddress ? 0 : 3; /* sticky */
    });
    CHECK(rc == 0, "a host pointer given to a kernel: child exit %d", rc);
    rc = in_child([] {
        float *d = nullptr;
        cudaMalloc((void **)&d, 64 * sizeof(float));
        PBL__LAUNCH(divergent_k, 1, 64, 0, nullptr)(d);
        cudaError_t e = cudaDeviceSynchronize();
        return e == cudaErrorLaunchFailure && cudaGetLastError() == cudaErrorLaunchFailure ? 0 : 1;
    });
    CHECK(rc == 0, "a divergent __syncthreads: child exit %d", rc);
    rc = in_child([] {
        float *d = nullptr;
        cudaMalloc((void **)&d, 64 * sizeof(float));
        PBL__LAUNCH(split_k, 1, 64, 0, nullptr)(d);
        return cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1;
    });
    CHECK(rc == 0, "__syncthreads met at two statements: child exit %d", rc);
}

static void launch_config()
{
    float *d = nullptr;
    EQ(cudaMalloc((void **)&d, 1024 * sizeof(float)), cudaSuccess);
    PBL__LAUNCH(fill_k, 1, 1025, 0, nullptr)(d, 1.0f, 1024);
    EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EQ(cudaGetLastError(), cudaSuccess); /* not sticky: read once, then cleared */
    PBL__LAUNCH(fill_k, 0, 32, 0, nullptr)(d, 1.0f, 1024);
    EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
    EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    PBL__LAUNCH(fill_k, dim3(2, 1, 1), dim3(32, 32, 1), 0, nullptr)(d, 2.0f, 1024);
    EQ(cudaGetLastError(), cudaSuccess);
    std::vector<float> h = download(d, 1024);
    CHECK(h[0] == 2.0f && h[1023] == 2.0f, "2 blocks of 32x32 threads filled %g .. %g", (double)h[0], (double)h[1023]);
    /* "cudaMemcpy2DAsync() returns an error if dpitch or spitch is greater than the maximum
     * allowed" (memPitch, 2^31 - 1): one 16-byte row, inside d, with a 2 GiB pitch */
    EQ(cudaMemcpy2DAsync(d, (size_t)1 << 31, d + 8, 16, 16, 1, cudaMemcpyDeviceToDevice, nullptr),
       cudaErrorInvalidPitchValue);
    EQ(cudaMemcpy2DAsync(d, 16, d + 8, 16, 16, 1, cudaMemcpyDeviceToDevice, nullptr), cudaSuccess);
    (void)cudaGetLastError();
    EQ(cudaFree(d), cudaSuccess);
    int x = 0;
    EQ(cudaFree(&x), cudaErrorInvalidValue);
    EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EQ(cudaFree(nullptr), cudaSuccess);
    cudaStream_t bogus = reinterpret_cast<cudaStream_t>(&x);
    EQ(cudaStreamSynchronize(bogus), cudaErrorInvalidResourceHandle);
    EQ(cudaMemcpy(&x, &x, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue); /* dst is no device memory */
    (void)cudaGetLastError();
}

static void barrier()
{
    std::vector<float> x(1000);
    double want = 0;
    for (int i = 0; i < 1000; i++) {
        x[(size_t)i] = (float)(i % 7) - 3.0f;
        want += x[(size_t)i];
    }
    float *dx = upload(x), *dy = nullptr;
    cudaMalloc((void **)&dy, sizeof(float));
    PBL__LAUNCH(block_sum_k, 1, 128, 0, nullptr)(dy, dx, 1000);
    EQ(cudaGetLastError(), cudaSuccess);
    std::vector<float> y = download(dy, 1);
    CHECK(y[0] == (float)want, "block sum %g, want %g", (double)y[0], want);
    std::vector<float> r(256);
    for (int i = 0; i < 256; i++)
        r[(size_t)i] = (float)i;
    float *dr = upload(r), *dout = nullptr;
    cudaMalloc((void **)&dout, 256 * sizeof(float));
    PBL__LAUNCH(reverse_k, 4, 64, 0, nullptr)(dout, dr);
    std::vector<float> o = download(dout, 256);
    CHECK(o[0] == 63.0f && o[63] == 0.0f && o[64] == 127.0f && o[255] == 192.0f, "block reverse: %g %g %g %g",
          (double)o[0], (double)o[63], (double)o[64], (double)o[255]);
    /* the order of blocks changes between launches, so a race between blocks shows */
    float *dc = nullptr;
    cudaMalloc((void **)&dc, 8 * sizeof(float));
    std::vector<float> runs[2];
    for (int run = 0; run < 2; run++) {
        cudaMemset(dc, 0, 8 * sizeof(float));
        PBL__LAUNCH(chain_k, 8, 1, 0, nullptr)(dc);
        runs[run] = download(dc, 8);
    }
    CHECK(runs[0] != runs[1], "two launches of a kernel racing between blocks gave the same result (%g, %g)",
          (double)runs[0][7], (double)runs[1][7]);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dr);
    cudaFree(dout);
    cudaFree(dc);
}

static void streams_events()
{
    cudaStream_t a, b;
    cudaEvent_t ev;
    EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
    EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
    EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    /* a pageable source is staged at the call: changing it after the call changes nothing */
    float *d = nullptr;
    cudaMalloc((void **)&d, 4096 * sizeof(float));
    std::vector<float> h(4096, 5.0f);
    EQ(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, a), cudaSuccess);
    std::fill(h.begin(), h.end(), -1.0f);
    /* b's kernel after a's copy, through the event only */
    EQ(cudaEventRecord(ev, a), cudaSuccess);
    EQ(cudaStreamWaitEvent(b, ev, 0), cudaSuccess);
    PBL__LAUNCH(add_one_k, 1, 1, 0, b)(d);
    EQ(cudaStreamSynchronize(b), cudaSuccess);
    std::vector<float> got(2);
    EQ(cudaMemcpyAsync(got.data(), d, 2 * sizeof(float), cudaMemcpyDeviceToHost, b), cudaSuccess);
    EQ(cudaStreamSynchronize(b), cudaSuccess);
    CHECK(got[0] == 6.0f && got[1] == 5.0f, "after the staged copy and the event: %g %g", (double)got[0],
          (double)got[1]);
    EQ(cudaEventQuery(ev), cudaSuccess);
    EQ(cudaStreamQuery(a), cudaSuccess);
    /* the legacy stream and a blocking stream order each other without events */
    cudaStream_t blocking;
    EQ(cudaStreamCreate(&blocking), cudaSuccess);
    EQ(cudaMemsetAsync(d, 0, 4, nullptr), cudaSuccess);
    for (int k = 0; k < 50; k++) { /* alternate: each waits for the other's previous work */
        PBL__LAUNCH(add_one_k, 1, 1, 0, blocking)(d);
        PBL__LAUNCH(add_one_k, 1, 1, 0, nullptr)(d);
    }
    EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    EQ(cudaMemcpy(got.data(), d, sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(got[0] == 100.0f, "legacy and blocking streams interleaved: %g, want 100", (double)got[0]);
    cudaStreamDestroy(blocking);
    cudaFree(d);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    EQ(cudaStreamDestroy(a), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
}

static void capture()
{
    cudaStream_t s0, s1;
    cudaEvent_t fork_ev, join_ev, outside;
    cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join_ev, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&outside, cudaEventDisableTiming);
    float *d = nullptr;
    cudaMalloc((void **)&d, 2 * sizeof(float));
    cudaMemsetAsync(d, 0, 2 * sizeof(float), s0);
    cudaStreamSynchronize(s0);

    /* captured work does not run at capture; s1 joins through an event and back */
    EQ(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    PBL__LAUNCH(add_one_k, 1, 1, 0, s0)(d);
    EQ(cudaEventRecord(fork_ev, s0), cudaSuccess);
    EQ(cudaStreamWaitEvent(s1, fork_ev, 0), cudaSuccess);
    cudaStreamCaptureStatus st;
    EQ(cudaStreamIsCapturing(s1, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusActive, "s1 joined the capture: status %d", (int)st);
    PBL__LAUNCH(add_one_k, 1, 1, 0, s1)(d + 1);
    EQ(cudaEventRecord(join_ev, s1), cudaSuccess);
    EQ(cudaStreamWaitEvent(s0, join_ev, 0), cudaSuccess);
    cudaGraph_t g = nullptr;
    EQ(cudaStreamEndCapture(s0, &g), cudaSuccess);
    std::vector<float> h(2);
    cudaMemcpy(h.data(), d, 8, cudaMemcpyDeviceToHost);
    CHECK(h[0] == 0.0f && h[1] == 0.0f, "captured work ran at capture: %g %g", (double)h[0], (double)h[1]);
    cudaGraphExec_t x = nullptr;
    EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    EQ(cudaGraphLaunch(x, s0), cudaSuccess);
    EQ(cudaGraphLaunch(x, s0), cudaSuccess);
    EQ(cudaStreamSynchronize(s0), cudaSuccess);
    cudaMemcpy(h.data(), d, 8, cudaMemcpyDeviceToHost);
    CHECK(h[0] == 2.0f && h[1] == 2.0f, "two replays: %g %g", (double)h[0], (double)h[1]);
    EQ(cudaGraphExecDestroy(x), cudaSuccess);
    EQ(cudaGraphDestroy(g), cudaSuccess);

    /* a forked stream not joined back */
    EQ(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cudaEventRecord(fork_ev, s0);
    cudaStreamWaitEvent(s1, fork_ev, 0);
    PBL__LAUNCH(add_one_k, 1, 1, 0, s1)(d);
    EQ(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureUnmatched);
    EQ(cudaStreamEndCapture(s0, &g), cudaErrorStreamCaptureUnjoined);
    CHECK(g == nullptr, "an unjoined capture gave a graph");
    EQ(cudaStreamIsCapturing(s1, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusNone, "s1 still capturing after the end: %d", (int)st);

    /* illegal during a capture: synchronising the stream, an allocation from this thread,
     * waiting on an event recorded outside the capture */
    EQ(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EQ(cudaStreamSynchronize(s0), cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamIsCapturing(s0, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusInvalidated, "sync during capture: status %d", (int)st);
    EQ(cudaStreamEndCapture(s0, &g), cudaErrorStreamCaptureInvalidated);
    EQ(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    float *m = nullptr;
    EQ(cudaMalloc((void **)&m, 16), cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamEndCapture(s0, &g), cudaErrorStreamCaptureInvalidated);
    cudaEventRecord(outside, s1);
    EQ(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EQ(cudaStreamWaitEvent(s0, outside, 0), cudaErrorStreamCaptureIsolation);
    EQ(cudaStreamEndCapture(s0, &g), cudaErrorStreamCaptureInvalidated);
    EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    (void)cudaGetLastError();
    cudaFree(d);
    cudaEventDestroy(fork_ev);
    cudaEventDestroy(join_ev);
    cudaEventDestroy(outside);
    cudaStreamDestroy(s0);
    cudaStreamDestroy(s1);
}

static void cublas()
{
    cublasHandle_t h;
    EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    /* column-major A [2, 3] = [[1 2 3], [4 5 6]], B [3, 2] = [[1 0], [0 1], [1 1]] */
    float *A = upload({ 1, 4, 2, 5, 3, 6 }), *B = upload({ 1, 0, 1, 0, 1, 1 }), *C = upload({ 9, 9, 9, 9 });
    float one = 1.0f, zero = 0.0f;
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2), CUBLAS_STATUS_SUCCESS);
    std::vector<float> c = download(C, 4); /* A·B = [[4 5], [10 11]] */
    CHECK(c[0] == 4 && c[1] == 10 && c[2] == 5 && c[3] == 11, "sgemm NN: %g %g %g %g", (double)c[0], (double)c[1],
          (double)c[2], (double)c[3]);
    /* Aᵀ·A with A read transposed: [3, 3], only (0,0) = 17 checked, and (2,1) = 2·3 + 5·6 = 36 */
    float *D = nullptr;
    cudaMalloc((void **)&D, 9 * sizeof(float));
    EQ(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 3, 3, 2, &one, A, 2, A, 2, &zero, D, 3), CUBLAS_STATUS_SUCCESS);
    std::vector<float> dd = download(D, 9);
    CHECK(dd[0] == 17 && dd[2 + 1 * 3] == 36, "sgemm TN: %g %g", (double)dd[0], (double)dd[5]);
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 1, B, 3, &zero, C, 2), CUBLAS_STATUS_INVALID_VALUE);
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 2, &zero, C, 2), CUBLAS_STATUS_INVALID_VALUE);
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 1), CUBLAS_STATUS_INVALID_VALUE);
    EQ(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 3, 3, 2, &one, A, 1, A, 2, &zero, D, 3), CUBLAS_STATUS_INVALID_VALUE);
    EQ(cublasSgemm(h, (cublasOperation_t)7, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2),
       CUBLAS_STATUS_INVALID_VALUE);
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 3, &one, A, 2, B, 3, &zero, C, 2), CUBLAS_STATUS_INVALID_VALUE);
    EQ(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, 0, B, 3, 0, &zero, C, 2, 0, -1),
       CUBLAS_STATUS_INVALID_VALUE);
    /* TF32 math: inputs keep 10 mantissa bits, so 1 + 2^-12 reads as 1; full fp32 keeps it */
    float *x = upload({ 1.0f + 0x1p-12f }), *o = upload({ 1.0f }), *y = upload({ 0.0f });
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, x, 1, o, 1, &zero, y, 1), CUBLAS_STATUS_SUCCESS);
    CHECK(download(y, 1)[0] == 1.0f + 0x1p-12f, "fp32 sgemm %.9g", (double)download(y, 1)[0]);
    EQ(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, x, 1, o, 1, &zero, y, 1), CUBLAS_STATUS_SUCCESS);
    CHECK(download(y, 1)[0] == 1.0f, "TF32 sgemm %.9g, want 1", (double)download(y, 1)[0]);
    for (float *p : { x, o, y })
        cudaFree(p);
    EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2), CUBLAS_STATUS_NOT_INITIALIZED);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(D);
}

/* One cuBLASLt matmul D[m, n] = epilogue(A[m, k]·B[k, n]), no transposes, beta 0. */
static cublasStatus_t lt(cublasLtHandle_t h, cublasLtEpilogue_t epi, int m, int n, int k, const float *A, const float *B,
                         float *D, void *bias, void *aux, int64_t aux_ld)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (bias)
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) {
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    }
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, (uint64_t)m, (uint64_t)k, m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, (uint64_t)k, (uint64_t)n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, (uint64_t)m, (uint64_t)n, m);
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasLtMatmul(h, op, &one, A, la, B, lb, &zero, D, ld, D, ld, nullptr, nullptr, 0, nullptr);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cudaDeviceSynchronize();
    return s;
}

static bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f * (1.0f + std::fabs(b)); }

static float gelu_t(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }

static void cublaslt()
{
    cublasLtHandle_t h;
    EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    /* A [2, 2] = [[1 -2], [3 4]] (column-major 1 3 -2 4), B = I: the product is A */
    float *A = upload({ 1, 3, -2, 4 }), *I = upload({ 1, 0, 0, 1 }), *D = upload({ 0, 0, 0, 0 });
    float *bias = upload({ 10, 20 }), *g = upload({ 0, 0 });
    unsigned char *mask = nullptr;
    float *gin = nullptr;
    cudaMalloc((void **)&mask, 2 * 128 / 8);
    cudaMalloc((void **)&gin, 2 * 8 * sizeof(float));
    std::vector<float> d;

    EQ(lt(h, CUBLASLT_EPILOGUE_BIAS, 2, 2, 2, A, I, D, bias, nullptr, 0), CUBLAS_STATUS_SUCCESS);
    d = download(D, 4); /* bias per ROW of D: row 0 + 10, row 1 + 20 */
    CHECK(d[0] == 11 && d[1] == 23 && d[2] == 8 && d[3] == 24, "BIAS: %g %g %g %g", (double)d[0], (double)d[1],
          (double)d[2], (double)d[3]);
    EQ(lt(h, CUBLASLT_EPILOGUE_RELU, 2, 2, 2, A, I, D, nullptr, nullptr, 0), CUBLAS_STATUS_SUCCESS);
    d = download(D, 4);
    CHECK(d[0] == 1 && d[1] == 3 && d[2] == 0 && d[3] == 4, "RELU: %g %g %g %g", (double)d[0], (double)d[1],
          (double)d[2], (double)d[3]);
    EQ(lt(h, CUBLASLT_EPILOGUE_RELU_BIAS, 2, 2, 2, A, I, D, bias, nullptr, 0), CUBLAS_STATUS_SUCCESS);
    d = download(D, 4);
    CHECK(d[2] == 8, "RELU_BIAS: bias before the ReLU: %g", (double)d[2]);

    /* the ReLU mask: bit i + j·ld set where kept; A's element (0, 1) = -2 is dropped */
    cudaMemset(mask, 0, 32);
    EQ(lt(h, CUBLASLT_EPILOGUE_RELU_AUX, 2, 2, 2, A, I, D, nullptr, mask, 128), CUBLAS_STATUS_SUCCESS);
    std::vector<unsigned char> mk(32);
    cudaMemcpy(mk.data(), mask, 32, cudaMemcpyDeviceToHost);
    CHECK(mk[0] == 0x3 && mk[16] == 0x2, "RELU_AUX mask bytes %#x %#x, want 0x3 0x2", mk[0], mk[16]);
    EQ(lt(h, CUBLASLT_EPILOGUE_RELU_AUX, 2, 2, 2, A, I, D, nullptr, mask, 100), CUBLAS_STATUS_INVALID_VALUE);
    EQ(lt(h, CUBLASLT_EPILOGUE_RELU_AUX, 2, 2, 2, A, I, D, nullptr, nullptr, 0), CUBLAS_STATUS_INVALID_VALUE);
    EQ(lt(h, CUBLASLT_EPILOGUE_BIAS, 2, 2, 2, A, I, D, nullptr, nullptr, 0), CUBLAS_STATUS_INVALID_VALUE);

    /* DRELU(_BGRAD): a gradient of ones through that mask; bias gradient = row sums of D */
    float *ones = upload({ 1, 1, 1, 1 });
    EQ(lt(h, CUBLASLT_EPILOGUE_DRELU_BGRAD, 2, 2, 2, ones, I, D, g, mask, 128), CUBLAS_STATUS_SUCCESS);
    d = download(D, 4);
    std::vector<float> gb = download(g, 2);
    CHECK(d[0] == 1 && d[1] == 1 && d[2] == 0 && d[3] == 1, "DRELU: %g %g %g %g", (double)d[0], (double)d[1],
          (double)d[2], (double)d[3]);
    CHECK(gb[0] == 1 && gb[1] == 2, "DRELU_BGRAD bias gradient %g %g, want 1 2", (double)gb[0], (double)gb[1]);

    /* GELU (tanh form), GELU_AUX_BIAS saving its input, DGELU_BGRAD reading it */
    EQ(lt(h, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 2, 2, 2, A, I, D, bias, gin, 8), CUBLAS_STATUS_SUCCESS);
    d = download(D, 4);
    std::vector<float> gi = download(gin, 16);
    CHECK(gi[0] == 11 && gi[1] == 23 && gi[8] == 8 && gi[9] == 24, "GELU_AUX_BIAS input %g %g %g %g", (double)gi[0],
          (double)gi[1], (double)gi[8], (double)gi[9]);
    CHECK(near(d[2], gelu_t(8.0f)), "GELU_BIAS: %g, want %g", (double)d[2], (double)gelu_t(8.0f));
    EQ(lt(h, CUBLASLT_EPILOGUE_GELU_AUX, 2, 2, 2, A, I, D, nullptr, gin, 4), CUBLAS_STATUS_INVALID_VALUE);
    float *small = upload({ 0.5f, -1.0f, 0, 0, 0, 0, 0, 0, 2.0f, 0.25f, 0, 0, 0, 0, 0, 0 });
    EQ(lt(h, CUBLASLT_EPILOGUE_DGELU_BGRAD, 2, 2, 2, ones, I, D, g, small, 8), CUBLAS_STATUS_SUCCESS);
    d = download(D, 4);
    gb = download(g, 2);
    float x0 = 0.5f, step = 1e-3f;
    float fd = (gelu_t(x0 + step) - gelu_t(x0 - step)) / (2 * step);
    CHECK(std::fabs(d[0] - fd) < 1e-3f, "DGELU at 0.5: %g, finite difference %g", (double)d[0], (double)fd);
    CHECK(near(gb[0], d[0] + d[2]) && near(gb[1], d[1] + d[3]), "DGELU_BGRAD: %g %g", (double)gb[0], (double)gb[1]);

    /* BGRADA: sums of op(A)'s rows over k (m of them); BGRADB: sums of op(B)'s columns over k (n) */
    float *B23 = upload({ 1, 2, 3, 4, 5, 6 }); /* B [2, 3] column-major: columns (1 2) (3 4) (5 6) */
    float *D23 = nullptr, *g3 = nullptr;
    cudaMalloc((void **)&D23, 6 * sizeof(float));
    cudaMalloc((void **)&g3, 3 * sizeof(float));
    EQ(lt(h, CUBLASLT_EPILOGUE_BGRADA, 2, 3, 2, A, B23, D23, g, nullptr, 0), CUBLAS_STATUS_SUCCESS);
    gb = download(g, 2);
    CHECK(gb[0] == -1 && gb[1] == 7, "BGRADA %g %g, want -1 7", (double)gb[0], (double)gb[1]);
    EQ(lt(h, CUBLASLT_EPILOGUE_BGRADB, 2, 3, 2, A, B23, D23, g3, nullptr, 0), CUBLAS_STATUS_SUCCESS);
    std::vector<float> g3h = download(g3, 3);
    d = download(D23, 6);
    CHECK(g3h[0] == 3 && g3h[1] == 7 && g3h[2] == 11, "BGRADB %g %g %g, want 3 7 11", (double)g3h[0],
          (double)g3h[1], (double)g3h[2]);
    CHECK(d[0] == 1 - 4 && d[1] == 3 + 8, "BGRADB's product %g %g", (double)d[0], (double)d[1]);

    for (float *p : { A, I, D, bias, g, ones, small, B23, D23, g3, gin })
        cudaFree(p);
    cudaFree(mask);
    EQ(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS);
}

/* An algorithm from cublasLtMatmulAlgoGetHeuristic holds the alignment its preference promised
 * (256 by default): cublasLtMatmul refuses a less aligned pointer with it. PBL_EMU_LT_DECLINE=1
 * makes cuBLASLt decline every epilogue but DEFAULT. */
static cublasStatus_t lt_heuristic(cublasLtHandle_t h, cublasLtEpilogue_t epi, const float *A, const float *B, float *D,
                                   void *bias, uint32_t align_a, int *returned)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l2;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    uint64_t ws = 0;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (bias)
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    cublasLtMatrixLayoutCreate(&l2, CUDA_R_32F, 2, 2, 2);
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (align_a)
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    *returned = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, op, l2, l2, l2, l2, pref, 1, &res, returned);
    float one = 1.0f, zero = 0.0f;
    if (s == CUBLAS_STATUS_SUCCESS && *returned == 1)
        s = cublasLtMatmul(h, op, &one, A, l2, B, l2, &zero, D, l2, D, l2, &res.algo, nullptr, 0, nullptr);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(l2);
    cublasLtMatmulDescDestroy(op);
    cudaDeviceSynchronize();
    return s;
}

static void cublaslt_algos()
{
    cublasLtHandle_t h;
    EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *A = upload({ 0, 1, 3, -2, 4 }), *I = upload({ 1, 0, 0, 1 }), *D = upload({ 0, 0, 0, 0 });
    float *bias = upload({ 10, 20 });
    int n = 0;
    EQ(lt_heuristic(h, CUBLASLT_EPILOGUE_DEFAULT, A, I, D, nullptr, 0, &n), CUBLAS_STATUS_SUCCESS);
    CHECK(n == 1, "the heuristic returned %d algorithms", n);
    /* A + 1 is 4-byte aligned: refused under the default promise of 256, run under a promise of 4 */
    EQ(lt_heuristic(h, CUBLASLT_EPILOGUE_DEFAULT, A + 1, I, D, nullptr, 0, &n), CUBLAS_STATUS_INVALID_VALUE);
    EQ(lt_heuristic(h, CUBLASLT_EPILOGUE_DEFAULT, A + 1, I, D, nullptr, 4, &n), CUBLAS_STATUS_SUCCESS);
    std::vector<float> d = download(D, 4);
    CHECK(d[0] == 1 && d[1] == 3 && d[2] == -2 && d[3] == 4, "A + 1 times I: %g %g %g %g", (double)d[0],
          (double)d[1], (double)d[2], (double)d[3]);
    setenv("PBL_EMU_LT_DECLINE", "1", 1);
    EQ(lt_heuristic(h, CUBLASLT_EPILOGUE_BIAS, A + 1, I, D, bias, 4, &n), CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(n == 0, "a declined heuristic returned %d algorithms", n);
    EQ(lt(h, CUBLASLT_EPILOGUE_BIAS, 2, 2, 2, A, I, D, bias, nullptr, 0), CUBLAS_STATUS_NOT_SUPPORTED);
    EQ(lt_heuristic(h, CUBLASLT_EPILOGUE_DEFAULT, A + 1, I, D, nullptr, 4, &n), CUBLAS_STATUS_SUCCESS);
    unsetenv("PBL_EMU_LT_DECLINE");
    for (float *p : { A, I, D, bias })
        cudaFree(p);
    EQ(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS);
}

int main()
{
    sticky_faults();
    int n = 0;
    EQ(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK(n == 1, "%d devices", n);
    cudaDeviceProp p;
    EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    CHECK(strstr(p.name, "emulator") != nullptr, "device name '%s'", p.name);
    launch_config();
    barrier();
    streams_events();
    capture();
    cublas();
    cublaslt();
    cublaslt_algos();
    EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("the emulator's runtime, capture, cuBLAS and cuBLASLt semantics hold\n");
    return failures ? 1 : 0;
}
