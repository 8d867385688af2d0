/*
 * A check shared by test_liveness and test_zoo: every forward value a backward node reads is
 * data its forward node's op declares in grad_reads_in / grad_reads_out (the bits liveness
 * relies on to let other values die early). Backward nodes are matched to their forward node
 * by name ("<forward>/grad..."); aggregation and seed nodes read only backward values.
 */
#ifndef PBL_TEST_GRAD_READS_H
#define PBL_TEST_GRAD_READS_H

#include <stdio.h>
#include <string.h>

#include "graph/ir/registry.h"
#include "pebble/pebble.h"

typedef struct grad_reads {
    int       checked;      /* forward reads looked at */
    int       undeclared;   /* of those, reads the op does not declare (each printed) */
    /* optional: ops to record what their gradients actually read, to compare with the bits */
    const char *const *track;
    int       n_track;
    uint32_t *read_in, *read_out; /* per tracked op: inputs / outputs read */
    int      *seen;               /* per tracked op: differentiated in some graph */
} grad_reads;

static void grad_reads_check(const pbl_graph *g, const char *graph_name, grad_reads *gr)
{
    for (pbl_node n = 0; n < pbl_graph_node_count(g); n++) {
        pbl_node_info bi;
        pbl_graph_node_info(g, n, &bi);
        const char *slash = strrchr(bi.name, '/');
        if (!bi.is_backward || !slash)
            continue;
        char fwd[128];
        snprintf(fwd, sizeof fwd, "%.*s", (int)(slash - bi.name), bi.name);
        pbl_node f = pbl_graph_find_node(g, fwd);
        pbl_node_info fi = { 0 };
        const pbl__op *op = NULL;
        int tracked = -1;
        if (f != PBL_NONE) {
            pbl_graph_node_info(g, f, &fi);
            op = pbl__op_get(pbl__op_find(fi.op));
            for (int k = 0; k < gr->n_track; k++)
                if (strcmp(fi.op, gr->track[k]) == 0)
                    tracked = k, gr->seen[k] = 1;
        }
        for (int32_t k = 0; k < bi.n_inputs; k++) {
            pbl_value_info vi;
            pbl_graph_value_info(g, bi.inputs[k], &vi);
            if (vi.is_backward)
                continue;
            int ok = 0;
            for (int32_t i = 0; op && i < fi.n_inputs; i++)
                if (fi.inputs[i] == bi.inputs[k]) {
                    ok |= op->grad_reads_in >> i & 1;
                    if (tracked >= 0)
                        gr->read_in[tracked] |= 1u << i;
                }
            for (int32_t o = 0; op && o < fi.n_outputs; o++)
                if (fi.outputs[o] == bi.inputs[k]) {
                    ok |= op->grad_reads_out >> o & 1;
                    if (tracked >= 0)
                        gr->read_out[tracked] |= 1u << o;
                }
            if (!ok) {
                fprintf(stderr, "FAIL %s: backward node '%s' reads '%s', which '%s' does not declare\n", graph_name,
                        bi.name, vi.name, fwd);
                gr->undeclared++;
            }
            gr->checked++;
        }
    }
}

#endif
