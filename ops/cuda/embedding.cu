/*
 * CUDA kernels: embedding and embedding_grad (ops/embedding.c, CPU kernels in
 * ops/cpu/embedding.c).
 *
 * Ids are checked on the device: an id outside [0, V) claims the launch's failure flag
 * ({tag + 1, position, id}, first claim wins) and the backend reports the CPU's message
 * ("id 12 at position 3 is outside [0, 10)") at sync, PBL_ERR_INVALID_ARG.
 *
 * The gradient is deterministic and equal to the CPU's bit for bit, without float atomics:
 * one block per table row v scans the ids in chunks of EMB_THREADS, compacts the positions
 * holding v in increasing order (a __shared__ prefix sum over the chunk), and each thread
 * adds dy's rows at those positions into its columns of row v in that order, the CPU's
 * order. The cost is a read of the ids per table row (V·n id reads: 31M for BERT-base's
 * 30522-row table and 1024 tokens) against atomicAdd's n·D scattered adds; a sort of the
 * (id, position) pairs would scale better when both V and n are large.
 */
#include <cstring>

#include "ops/cuda/common.cuh"

#define EMB_THREADS 256

__device__ static void claim(int *flag, int tag, int64_t pos, int id)
{
    if (atomicCAS(flag, 0, tag + 1) == 0) {
        flag[1] = (int)pos;
        flag[2] = id;
    }
}

/* y[i, j] = table[ids[i], j]; a bad id leaves zeros (the run fails at sync) */
__global__ static void embedding_k(float *y, const int32_t *ids, const float *table, int64_t n, int64_t d, int64_t v,
                                   int *flag, int tag)
{
    PBL__GRID_LOOP(e, n * d) {
        int64_t i = e / d, j = e % d;
        int id = ids[i];
        if (id < 0 || id >= v) {
            if (j == 0)
                claim(flag, tag, i, id);
            y[e] = 0.0f;
            continue;
        }
        y[e] = table[(int64_t)id * d + j];
    }
}

__global__ static void embedding_grad_k(float *dt, const float *dy, const int32_t *ids, int64_t n, int64_t d,
                                        int64_t v, int *flag, int tag)
{
    __shared__ int hit[EMB_THREADS];      /* 1 where the chunk holds row r, then its prefix sum */
    __shared__ int64_t pos[EMB_THREADS];  /* the chunk's positions holding r, increasing */
    /* any[t % 3]: how many of chunk t's positions hold its row (chunks counted across the
     * block's rows), so a chunk without r costs one barrier, not the scan's 16. Three flags:
     * thread 0 clears chunk t+1's before chunk t's barrier, when every thread has read chunk
     * t-2's (the same flag) and none can yet add to chunk t+1's. */
    __shared__ int any[3];
    if (threadIdx.x == 0)
        any[0] = any[1] = any[2] = 0;
    __syncthreads();
    int64_t t = 0;
    for (int64_t r = blockIdx.x; r < v; r += gridDim.x) {
        float *row = dt + r * d;
        for (int64_t j = threadIdx.x; j < d; j += EMB_THREADS)
            row[j] = 0.0f;
        for (int64_t i0 = 0; i0 < n; i0 += EMB_THREADS, t++) {
            int64_t i = i0 + threadIdx.x;
            int id = i < n ? ids[i] : -1;
            if (r == 0 && i < n && (id < 0 || id >= v))
                claim(flag, tag, i, id);
            int mine = i < n && id == r;
            if (mine)
                atomicAdd(&any[t % 3], 1);
            if (threadIdx.x == 0)
                any[(t + 1) % 3] = 0;
            __syncthreads();
            if (any[t % 3] == 0)
                continue; /* the same for every thread of the block */
            hit[threadIdx.x] = mine;
            __syncthreads();
            for (int off = 1; off < EMB_THREADS; off *= 2) { /* inclusive scan (Hillis–Steele) */
                int add = (int)threadIdx.x >= off ? hit[threadIdx.x - off] : 0;
                __syncthreads();
                hit[threadIdx.x] += add;
                __syncthreads();
            }
            int count = hit[EMB_THREADS - 1];
            if (mine)
                pos[hit[threadIdx.x] - 1] = i;
            __syncthreads();
            /* each thread owns columns j ≡ threadIdx.x: no other thread touches them */
            for (int64_t j = threadIdx.x; j < d; j += EMB_THREADS) {
                float acc = row[j];
                for (int q = 0; q < count; q++)
                    acc += dy[pos[q] * d + j];
                row[j] = acc;
            }
            __syncthreads(); /* hit and pos are rewritten by the next chunk */
        }
    }
}

extern "C" pbl_status pbl__cuda_embedding(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[0]), v = a->in_meta[1].shape.dim[0], d = a->in_meta[1].shape.dim[1];
    PBL__LAUNCH(embedding_k, pbl__blocks(n * d), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), (const int32_t *)a->in[0],
                                                                             PBL__IN(a, 1), n, d, v, l->flag, l->tag);
    PBL__LAUNCHED();
done:
    return s;
}

extern "C" pbl_status pbl__cuda_embedding_grad(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    int64_t n = PBL__NUMEL(a->in_meta[1]), v = a->out_meta[0].shape.dim[0], d = a->out_meta[0].shape.dim[1];
    unsigned blocks = (unsigned)(v < 65535 * 16 ? v : 65535 * 16);
    PBL__LAUNCH(embedding_grad_k, blocks, EMB_THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0),
                                                                     (const int32_t *)a->in[1], n, d, v, l->flag, l->tag);
    PBL__LAUNCHED();
done:
    return s;
}

/* The message of embedding's and embedding_grad's failure flag: the CPU's (ops/cpu/embedding.c). */
extern "C" pbl_status pbl__cuda_ids_flag_message(const pbl__op *op, const pbl__kargs *a, int position, int id)
{
    int64_t v = strcmp(op->name, "embedding_grad") == 0 ? a->out_meta[0].shape.dim[0] : a->in_meta[1].shape.dim[0];
    snprintf(a->err, a->errlen, "id %d at position %d is outside [0, %lld)", id, position, (long long)v);
    return PBL_ERR_INVALID_ARG;
}
