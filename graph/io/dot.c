/*
 * pbl_graph_write_dot: a scheduled graph as Graphviz DOT (see pebble/streams.h). Boxes are
 * nodes, filled with their stream's colour and labelled with op, step and stream; ellipses
 * are the variables they read. A solid edge is a value flowing from its producer to a reader,
 * labelled with the value's name, bytes and arena offset (when a storage plan is given); a
 * dashed red edge is a wait across streams. Graph outputs have a double border.
 */
#include <stdio.h>
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/ir/graph_internal.h"
#include "pebble/streams.h"

/* Graphviz's pastel28 scheme, one colour per stream (cycled past eight). */
static const char *const fill[] = { "#b3e2cd", "#fdcdac", "#cbd5e8", "#f4cae4",
                                    "#e6f5c9", "#fff2ae", "#f1e2cc", "#cccccc" };

/* Writes s as the inside of a DOT string: quotes and backslashes escaped; control characters
 * (C0, DEL, and C1 such as U+009B, CSI) shown as the text \xNN, as pebble's messages show
 * them, so that `viz --dot -` sends no escape sequence from a hostile name to a terminal. */
static void put_escaped(FILE *f, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; c && *c; c++) {
        if (*c == '\n')
            fputs("\\n", f);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\\\x%02x", *c);
        else if (*c == 0xc2 && c[1] >= 0x80 && c[1] < 0xa0)
            fprintf(f, "\\\\xc2\\\\x%02x", *++c);
        else {
            if (*c == '"' || *c == '\\')
                fputc('\\', f);
            fputc(*c, f);
        }
    }
}

static void value_label(FILE *f, const pbl_graph *g, const pbl_stream_storage *st, pbl_value v)
{
    put_escaped(f, g->values[v].name);
    fprintf(f, "\\n%zu B", pbl__meta_bytes(&g->values[v].meta));
    int32_t r = st && v < st->live.n_values ? st->live.value_record[v] : -1;
    if (r >= 0 && st->plan.offset)
        fprintf(f, " @ %lld", (long long)st->plan.offset[r]);
}

PBL__API pbl_status pbl_graph_write_dot(const pbl_graph *g, const pbl_stream_plan *sp, const pbl_stream_storage *st,
                                        FILE *f, char *err, size_t errlen)
{
    pbl__errclear(err, errlen);
    if (!g || !f) {
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "dot: no %s", g ? "file" : "graph");
    }
    pbl_stream_plan own = { 0 };
    pbl_status s;
    if (!sp) { /* one stream: the executor's schedule */
        s = pbl_graph_streams(g, NULL, &own, err, errlen);
        if (s != PBL_OK)
            return s;
        sp = &own;
    } else if (pbl_stream_plan_check(NULL, sp, err, errlen) != PBL_OK) {
        return PBL_ERR_INVALID_ARG;
    }
    pbl__mem m;
    pbl__mem_init(&m, sp->allocator);
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1), nv = (size_t)(g->n_values ? g->n_values : 1);
    int32_t *step_of = pbl__mem_alloc(&m, nn * sizeof *step_of);
    uint8_t *is_output = pbl__mem_calloc(&m, nv), *drawn = pbl__mem_calloc(&m, nv);
    s = PBL_ERR_NOMEM;
    if (!step_of || !is_output || !drawn) {
        pbl__errf(err, errlen, s, "out of memory");
        goto done;
    }
    s = PBL_ERR_INVALID_ARG;
    for (int32_t i = 0; i < g->n_nodes; i++)
        step_of[i] = -1;
    for (int32_t t = 0; t < sp->n_steps; t++) {
        if (!sp->schedule || sp->schedule[t] < 0 || sp->schedule[t] >= g->n_nodes) {
            pbl__errf(err, errlen, s, "dot: step %d runs no node of the graph", (int)t);
            goto done;
        }
        step_of[sp->schedule[t]] = t;
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        is_output[g->outputs[i].value] = 1;

    fprintf(f, "digraph pebble {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=8];\n");
    for (int32_t t = 0; t < sp->n_steps; t++) {
        const pbl__node *nd = &g->nodes[sp->schedule[t]];
        int out = 0;
        for (int32_t k = 0; k < nd->n_out; k++)
            out |= is_output[nd->out[k]];
        fprintf(f, "  n%d [shape=box, style=filled, fillcolor=\"%s\"%s, label=\"", (int)sp->schedule[t],
                fill[sp->stream[t] % 8], out ? ", peripheries=2" : "");
        put_escaped(f, nd->name);
        fprintf(f, "\\nstep %d, stream %d\"];\n", (int)t, (int)sp->stream[t]);
        for (int32_t k = 0; k < nd->n_in; k++) {
            pbl_value v = nd->in[k];
            if (g->values[v].producer != PBL_NONE || drawn[v])
                continue;
            drawn[v] = 1;
            fprintf(f, "  v%d [shape=ellipse, label=\"", (int)v);
            value_label(f, g, NULL, v);
            fprintf(f, "\"];\n");
        }
    }
    for (int32_t t = 0; t < sp->n_steps; t++) {
        const pbl__node *nd = &g->nodes[sp->schedule[t]];
        for (int32_t k = 0; k < nd->n_in; k++) {
            pbl_value v = nd->in[k];
            pbl_node p = g->values[v].producer;
            if (p == PBL_NONE)
                fprintf(f, "  v%d -> n%d [label=\"", (int)v, (int)sp->schedule[t]);
            else
                fprintf(f, "  n%d -> n%d [label=\"", (int)p, (int)sp->schedule[t]);
            value_label(f, g, st, v);
            fprintf(f, "\"];\n");
        }
        for (int32_t e = sp->wait_start[t]; e < sp->wait_start[t + 1]; e++)
            fprintf(f, "  n%d -> n%d [style=dashed, color=red, constraint=false];\n", (int)sp->schedule[sp->wait[e]],
                    (int)sp->schedule[t]);
    }
    fprintf(f, "}\n");
    s = PBL_OK;
    if (ferror(f)) {
        s = pbl__errf(err, errlen, PBL_ERR_IO, "dot: writing failed");
    }
done:
    pbl__mem_free(&m, step_of, nn * sizeof *step_of);
    pbl__mem_free(&m, is_output, nv);
    pbl__mem_free(&m, drawn, nv);
    pbl_stream_plan_free(&own);
    return s;
}
