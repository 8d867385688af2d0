/* The op table and the public op queries of pebble/ops.h. */
#include "graph/ir/registry.h"

#include <string.h>

#include "pebble/ops.h"

static const pbl__op *const op_table[PBL__OP_COUNT] = {
#define PBL__OP_PTR(n) &pbl__op_##n,
    PBL__OP_LIST(PBL__OP_PTR)
#undef PBL__OP_PTR
};

const pbl__op *pbl__op_get(int32_t id)
{
    return id >= 0 && id < PBL__OP_COUNT ? op_table[id] : NULL;
}

int32_t pbl__op_find(const char *name)
{
    if (!name)
        return -1;
    for (int32_t i = 0; i < PBL__OP_COUNT; i++)
        if (strcmp(op_table[i]->name, name) == 0)
            return i;
    return -1;
}

PBL__API int32_t pbl_op_count(void) { return PBL__OP_COUNT; }

PBL__API const char *pbl_op_name(int32_t i)
{
    const pbl__op *op = pbl__op_get(i);
    return op ? op->name : NULL;
}

PBL__API int pbl_op_exists(const char *name) { return pbl__op_find(name) >= 0; }

PBL__API int pbl_op_differentiable(const char *name)
{
    const pbl__op *op = pbl__op_get(pbl__op_find(name));
    return op && op->grad;
}

PBL__API int pbl_op_has_cpu_kernel(const char *name)
{
    const pbl__op *op = pbl__op_get(pbl__op_find(name));
    return op && op->cpu;
}
