/*
 * CUDA kernel of elementwise_chain (ops/fused.c; codes in graph/ir/fused_codes.h): one thread per
 * element runs the whole program on its running value v, in registers, and writes y once.
 * Each step is the f32 expression of the CPU kernel (ops/cpu/fused.c) and of the op it
 * replaced (the activations through common.cuh's pbl__act_*), so results equal the CPU's
 * except where CUDA's expf/tanhf/erff differ from glibc's by an ulp.
 *
 * y may be x's storage (the op's in-place offer): a thread reads every input at its index
 * before it writes y there, and no thread reads another index.
 */
#include "ops/cuda/common.cuh"

extern "C" {
#include "graph/ir/fused_codes.h"
}

/* The program by value (kernel parameter space): codes and, per step, its operand (binary
 * steps) or NULL. */
struct chain_prog {
    int32_t      n;
    int32_t      code[PBL_MAX_INTS];
    const float *b[PBL_MAX_INTS];
};

__global__ static void chain_k(float *y, const float *x, chain_prog p, int64_t n)
{
    PBL__GRID_LOOP(i, n) {
        float v = x[i];
        for (int32_t k = 0; k < p.n; k++) {
            const float *b = p.b[k];
            switch (p.code[k]) {
            case PBL__CHAIN_RELU: v = pbl__act_relu(v); break;
            case PBL__CHAIN_SIGMOID: v = pbl__act_sigmoid(v); break;
            case PBL__CHAIN_TANH: v = pbl__act_tanh(v); break;
            case PBL__CHAIN_GELU: v = pbl__act_gelu(v); break;
            case PBL__CHAIN_ADD: v = v + b[i]; break;
            case PBL__CHAIN_SUB: v = v - b[i]; break;
            case PBL__CHAIN_MUL: v = v * b[i]; break;
            case PBL__CHAIN_DIV: v = v / b[i]; break;
            case PBL__CHAIN_RADD: v = b[i] + v; break;
            case PBL__CHAIN_RSUB: v = b[i] - v; break;
            case PBL__CHAIN_RMUL: v = b[i] * v; break;
            case PBL__CHAIN_RDIV: v = b[i] / v; break;
            default: break; /* the shape rule admitted only the codes above */
            }
        }
        y[i] = v;
    }
}

extern "C" pbl_status pbl__cuda_elementwise_chain(const pbl__cuda_launch *l, const pbl__kargs *a)
{
    pbl_status s = PBL_OK;
    const pbl__attr_val *codes = &a->attr[0];
    int64_t n = PBL__NUMEL(a->in_meta[0]);
    chain_prog p = {};
    int32_t operand = 1;
    p.n = codes->n_ints;
    for (int32_t k = 0; k < codes->n_ints; k++) {
        p.code[k] = (int32_t)codes->ints[k];
        p.b[k] = pbl__chain_code_binary(codes->ints[k]) ? PBL__IN(a, operand++) : NULL;
    }
    PBL__LAUNCH(chain_k, pbl__blocks(n), PBL__THREADS, 0, l->stream)(PBL__OUT(a, 0), PBL__IN(a, 0), p, n);
    PBL__LAUNCHED();
done:
    return s;
}
