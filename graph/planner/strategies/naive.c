/* naive: every record its own bytes, one after another — the baseline every plan is
 * compared against. */
#include "graph/planner/plan_internal.h"

pbl_status pbl__plan_naive(const pbl__plan_in *in, pbl_assignment *out)
{
    int64_t at = 0;
    for (int32_t i = 0; i < in->n; i++) {
        at = pbl__align_up(at, in->opt.align);
        out->offset[i] = at;
        at += in->r[i].size;
    }
    return PBL_OK;
}
