/* The fused ops' attribute codes, shared by their descriptors (ops/fused.c), their CPU kernels
 * (ops/cpu/fused.c) and the fusion pass (graph/passes/fuse.c). */
#ifndef PBL_OPS_FUSED_H
#define PBL_OPS_FUSED_H

/* fully_connected_act's "act" */
typedef enum pbl__fused_act {
    PBL__ACT_NONE,
    PBL__ACT_RELU,
    PBL__ACT_SIGMOID,
    PBL__ACT_TANH,
    PBL__ACT_GELU,
    PBL__ACT_COUNT
} pbl__fused_act;

/* elementwise_chain's "codes": one step each, applied to the running value v. The binary
 * steps read the chain's next extra input b; the R forms have v as the op's second operand
 * (b − v rather than v − b), so every step computes exactly what the op it replaces did. */
typedef enum pbl__chain_code {
    PBL__CHAIN_RELU = 1,
    PBL__CHAIN_SIGMOID,
    PBL__CHAIN_TANH,
    PBL__CHAIN_GELU,
    PBL__CHAIN_ADD,  /* v + b */
    PBL__CHAIN_SUB,  /* v - b */
    PBL__CHAIN_MUL,  /* v * b */
    PBL__CHAIN_DIV,  /* v / b */
    PBL__CHAIN_RADD, /* b + v */
    PBL__CHAIN_RSUB, /* b - v */
    PBL__CHAIN_RMUL, /* b * v */
    PBL__CHAIN_RDIV, /* b / v */
    PBL__CHAIN_END
} pbl__chain_code;

static inline int pbl__chain_code_binary(int64_t c) { return c >= PBL__CHAIN_ADD && c < PBL__CHAIN_END; }

#endif
