/* pbl_graph_stream_storage: stream liveness -> a stream strategy -> the verifier, with value
 * names in a race message (see pebble/streams.h). */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/ir/graph_internal.h"
#include "graph/planner/plan_internal.h"
#include "graph/streams/stream_internal.h"

static const char *value_name(const pbl_graph *g, pbl_value v) { return g->values[v].name; }

PBL__API void pbl_stream_storage_free(pbl_stream_storage *s)
{
    if (!s)
        return;
    pbl_stream_records_free(&s->live);
    pbl_assignment_free(&s->plan);
    memset(s, 0, sizeof *s);
}

PBL__API pbl_status pbl_graph_stream_storage(const pbl_graph *g, pbl_stream_plan *sp,
                                             const pbl_stream_storage_options *opt, pbl_stream_storage *out,
                                             char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!out || !g || !sp) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "stream storage: no %s", !g ? "graph" : !sp ? "stream plan" : "output");
    }
    memset(out, 0, sizeof *out);
    pbl_stream_storage_options o = opt ? *opt : pbl_stream_storage_options_default();
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.allocator = o.allocator;
    lo.align = o.align > 0 ? o.align : 1;
    lo.inplace = o.inplace;
    pbl_status s = pbl_graph_stream_liveness(g, sp, &lo, &out->live, err, errlen);
    if (s != PBL_OK)
        return s;
    out->lower_bound = pbl__records_lower_bound(out->live.records, out->live.n_records, o.allocator);
    char why[512] = "";
    int32_t ra = -1, rb = -1;
    if (out->lower_bound < 0)
        s = pbl__errf(why, sizeof why, PBL_ERR_NOMEM, "out of memory");
    else
        s = pbl__stream_plan_records(sp, &out->live, &o, &out->plan, &out->n_added_waits, &ra, &rb, why, sizeof why);
    if (s != PBL_OK) {
        if (ra >= 0 && rb >= 0)
            pbl__errf(err, errlen, s, "stream storage: values '%s' and '%s': %s",
                      value_name(g, out->live.record_value[ra]), value_name(g, out->live.record_value[rb]), why);
        else
            pbl__errf(err, errlen, s, "stream storage: %s", why);
        pbl_stream_storage_free(out);
    }
    return s;
}
