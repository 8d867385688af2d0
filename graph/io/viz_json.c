/* pbl_viz_write_json: a pbl_viz_plan, with labels, as the JSON object a viewer reads
 * (pebble/viz.h). Arrays are per field ("columns"), not per record: shorter text, and a
 * viewer indexes them by record. */
#include <string.h>

#include "graph/base/errmsg.h"
#include "graph/planner/plan_internal.h"
#include "pebble/viz.h"

/* A JSON string. '<', '>' and '&' are escaped so that "</script>" in a name cannot end the
 * page's script element; other bytes pass through (names are UTF-8 or ASCII). */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else if (*c < 0x20 || *c == 0x7f || *c == '<' || *c == '>' || *c == '&')
            fprintf(f, "\\u%04x", *c);
        else if (*c == 0xc2 && c[1] >= 0x80 && c[1] < 0xa0) /* a C1 control (U+009B is CSI) */
            fprintf(f, "\\u%04x", *++c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static void put_i64_array(FILE *f, const char *key, const int64_t *v, int32_t n, size_t stride)
{
    fprintf(f, "\"%s\": [", key);
    for (int32_t i = 0; i < n; i++) {
        const int64_t *x = (const int64_t *)(const void *)((const char *)v + (size_t)i * stride);
        fprintf(f, i ? ",%lld" : "%lld", (long long)*x);
    }
    fputc(']', f);
}

/* "fc1 (fully_connected)" */
static void put_node(FILE *f, const pbl_graph *g, pbl_node n)
{
    pbl_node_info ni;
    if (n == PBL_NONE || pbl_graph_node_info(g, n, &ni) != PBL_OK) {
        fputs("null", f);
        return;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s (%s)", ni.name, ni.op);
    put_string(f, buf);
}

/* A CSR list: for each record r, items[start[r] .. start[r + 1]). */
typedef struct csr {
    int32_t *start, *item;
    size_t   n_start, n_item;
} csr;

static void csr_free(const pbl_allocator *al, csr *c)
{
    pbl__plan_free(al, c->start, c->n_start * sizeof *c->start);
    pbl__plan_free(al, c->item, c->n_item * sizeof *c->item);
}

/* Groups pairs (key[k], item[k]) of k < m by key, keys in [0, n_keys), keeping the pairs'
 * order within a key. */
static pbl_status csr_build(const pbl_allocator *al, const int32_t *key, const int32_t *item, int32_t m,
                            int32_t n_keys, csr *out)
{
    out->n_start = (size_t)n_keys + 1;
    out->n_item = (size_t)m;
    out->start = pbl__plan_alloc(al, out->n_start * sizeof *out->start);
    out->item = pbl__plan_alloc(al, out->n_item * sizeof *out->item);
    if (!out->start || !out->item)
        return PBL_ERR_NOMEM;
    memset(out->start, 0, out->n_start * sizeof *out->start);
    for (int32_t k = 0; k < m; k++)
        out->start[key[k] + 1]++;
    for (int32_t r = 0; r < n_keys; r++)
        out->start[r + 1] += out->start[r];
    /* fill with a moving cursor per key, then shift the starts back */
    for (int32_t k = 0; k < m; k++)
        out->item[out->start[key[k]]++] = item[k];
    for (int32_t r = n_keys; r > 0; r--)
        out->start[r] = out->start[r - 1];
    out->start[0] = 0;
    return PBL_OK;
}

/* Each record's values (in value order) and consumers (nodes in schedule order that read any
 * of its values, each once). */
static pbl_status graph_lists(const pbl_viz_plan *p, const pbl_graph *g, const pbl_graph_records *gr, csr *values,
                              csr *consumers)
{
    const pbl_allocator *al = p->allocator;
    int32_t nv = gr->n_values, m = 0, cap = 0;
    pbl_status s = PBL_ERR_NOMEM;
    size_t key_bytes = (size_t)nv * sizeof(int32_t);
    int32_t *key = pbl__plan_alloc(al, key_bytes), *item = pbl__plan_alloc(al, key_bytes);
    int32_t *ckey = NULL, *citem = NULL;
    if (!key || !item)
        goto done;
    for (pbl_value v = 0; v < nv; v++)
        if (gr->value_record[v] >= 0) {
            key[m] = gr->value_record[v];
            item[m++] = v;
        }
    if ((s = csr_build(al, key, item, m, p->n_records, values)) != PBL_OK)
        goto done;
    for (int32_t t = 0; t < gr->n_steps; t++) {
        pbl_node_info ni;
        if (pbl_graph_node_info(g, gr->schedule[t], &ni) == PBL_OK)
            cap += ni.n_inputs;
    }
    s = PBL_ERR_NOMEM;
    ckey = pbl__plan_alloc(al, (size_t)cap * sizeof *ckey);
    citem = pbl__plan_alloc(al, (size_t)cap * sizeof *citem);
    if (!ckey || !citem)
        goto done;
    m = 0;
    for (int32_t t = 0; t < gr->n_steps; t++) {
        pbl_node_info ni;
        if (pbl_graph_node_info(g, gr->schedule[t], &ni) != PBL_OK)
            continue;
        int32_t first = m;
        for (int32_t k = 0; k < ni.n_inputs && m < cap; k++) {
            int32_t r = ni.inputs[k] >= 0 && ni.inputs[k] < nv ? gr->value_record[ni.inputs[k]] : -1;
            int seen = 0;
            for (int32_t j = first; j < m && !seen; j++)
                seen = ckey[j] == r;
            if (r >= 0 && !seen) {
                ckey[m] = r;
                citem[m++] = gr->schedule[t];
            }
        }
    }
    s = csr_build(al, ckey, citem, m, p->n_records, consumers);
done:
    pbl__plan_free(al, key, key_bytes);
    pbl__plan_free(al, item, key_bytes);
    pbl__plan_free(al, ckey, (size_t)cap * sizeof *ckey);
    pbl__plan_free(al, citem, (size_t)cap * sizeof *citem);
    return s;
}

static pbl_status write_graph(FILE *f, const pbl_viz_plan *p, const pbl_graph *g, const pbl_graph_records *gr)
{
    csr values = { 0 }, consumers = { 0 };
    pbl_status s = graph_lists(p, g, gr, &values, &consumers);
    if (s != PBL_OK)
        goto done;
    fputs(",\n\"graph\": {\"values\": [", f);
    for (int32_t r = 0; r < p->n_records; r++) {
        fputs(r ? ",[" : "[", f);
        for (int32_t k = values.start[r]; k < values.start[r + 1]; k++) {
            pbl_value_info vi;
            fputs(k > values.start[r] ? "," : "", f);
            put_string(f, pbl_graph_value_info(g, values.item[k], &vi) == PBL_OK ? vi.name : "?");
        }
        fputc(']', f);
    }
    fputs("],\n\"shape\": [", f);
    for (int32_t r = 0; r < p->n_records; r++) {
        pbl_value_info vi;
        char shape[160], buf[200] = "?";
        if (pbl_graph_value_info(g, gr->record_value[r], &vi) == PBL_OK)
            snprintf(buf, sizeof buf, "%s %s", pbl_shape_str(&vi.shape, shape, sizeof shape), pbl_dtype_name(vi.dtype));
        fputs(r ? "," : "", f);
        put_string(f, buf);
    }
    fputs("],\n\"producer\": [", f);
    for (int32_t r = 0; r < p->n_records; r++) {
        pbl_value_info vi;
        fputs(r ? "," : "", f);
        put_node(f, g, pbl_graph_value_info(g, gr->record_value[r], &vi) == PBL_OK ? vi.producer : PBL_NONE);
    }
    fputs("],\n\"backward\": [", f);
    for (int32_t r = 0; r < p->n_records; r++) {
        pbl_value_info vi;
        int bw = pbl_graph_value_info(g, gr->record_value[r], &vi) == PBL_OK && vi.is_backward;
        fputs(r ? (bw ? ",1" : ",0") : (bw ? "1" : "0"), f);
    }
    fputs("],\n\"consumers\": [", f);
    for (int32_t r = 0; r < p->n_records; r++) {
        fputs(r ? ",[" : "[", f);
        for (int32_t k = consumers.start[r]; k < consumers.start[r + 1]; k++) {
            fputs(k > consumers.start[r] ? "," : "", f);
            put_node(f, g, consumers.item[k]);
        }
        fputc(']', f);
    }
    fputs("],\n\"schedule\": [", f);
    for (int32_t t = 0; t < gr->n_steps; t++) {
        fputs(t ? "," : "", f);
        put_node(f, g, gr->schedule[t]);
    }
    fputs("]}", f);
done:
    csr_free(p->allocator, &values);
    csr_free(p->allocator, &consumers);
    return s;
}

static void put_i32_list(FILE *f, const int32_t *v, int64_t n)
{
    fputc('[', f);
    for (int64_t i = 0; i < n; i++)
        fprintf(f, i ? ",%d" : "%d", (int)v[i]);
    fputc(']', f);
}

/* pbl_explain's data as it stands: the viewer lists what `pebble explain` lists, from the
 * same arrays. */
static void write_explain(FILE *f, const pbl_explain *e, const pbl_graph *g)
{
    fputs(",\n\"explain\": {\"strategy\": ", f);
    put_string(f, e->strategy);
    fprintf(f, ", \"arena\": %lld, \"lower_bound\": %lld, \"peak_step\": %d, \"n_peak_steps\": %d,\n\"kind\": [",
            (long long)e->arena, (long long)e->lower_bound, (int)e->peak_step, (int)e->n_peak_steps);
    for (int32_t r = 0; r < e->n_records; r++)
        fprintf(f, r ? ",\"%s\"" : "\"%s\"", pbl_explain_kind_name(e->rec[r].kind));
    fputs("],\n\"last_reader\": [", f);
    for (int32_t r = 0; r < e->n_records; r++) {
        fputs(r ? "," : "", f);
        if (g)
            put_node(f, g, e->rec[r].last_reader);
        else
            fputs("null", f);
    }
    fputs("],\n\"live_at_peak\": ", f);
    put_i32_list(f, e->live_at_peak, e->n_live_at_peak);
    fputs(",\n\"steps\": ", f);
    if (e->step_start) {
        fputs("{\"start\": ", f);
        put_i32_list(f, e->step_start, (int64_t)e->n_steps + 1);
        fputs(",\n\"record\": ", f);
        put_i32_list(f, e->step_record, e->n_step_records);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fputc('}', f);
}

PBL__API pbl_status pbl_viz_write_json(const pbl_viz_plan *p, const pbl_viz_labels *labels, FILE *f, char *err,
                                       size_t errlen)
{
    pbl_viz_labels l = labels ? *labels : (pbl_viz_labels){ 0 };
    if (!p || !f)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "viz: no plan or no file to write");
    if ((l.graph != NULL) != (l.graph_records != NULL))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "viz: a graph needs its liveness records, and they their graph");
    if (l.graph_records && (l.graph_records->n_records != p->n_records || l.graph_records->records != p->records ||
                            l.graph_records->n_values != pbl_graph_value_count(l.graph)))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG,
                   "viz: the graph's liveness records (%d) are not the records planned (%d)",
                   (int)l.graph_records->n_records, (int)p->n_records);
    if (l.explain && l.explain->n_records != p->n_records)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "viz: the explanation has %d records, the plan %d",
                         (int)l.explain->n_records, (int)p->n_records);
    for (int32_t i = 0; l.explain && i < p->n_records; i++)
        if (l.explain->rec[i].first != p->records[i].first || l.explain->rec[i].last != p->records[i].last ||
            l.explain->rec[i].bytes != p->records[i].size)
            return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "viz: the explanation's record %d is not the plan's", (int)i);
    fputs("{\"format\": \"pebble-viz\", \"version\": 1, \"title\": ", f);
    put_string(f, l.title ? l.title : "");
    fprintf(f, ", \"align\": %lld, \"lower_bound\": %lld, \"n_records\": %d,\n\"records\": {\"id\": [",
            (long long)p->align, (long long)p->lower_bound, (int)p->n_records);
    for (int32_t i = 0; i < p->n_records; i++) {
        fputs(i ? "," : "", f);
        if (l.ids && l.ids[i]) {
            put_string(f, l.ids[i]);
        } else {
            fprintf(f, "\"r%d\"", (int)i);
        }
    }
    fputs("],\n", f);
    put_i64_array(f, "size", p->n_records ? &p->records[0].size : NULL, p->n_records, sizeof *p->records);
    fputs(",\n", f);
    put_i64_array(f, "first", p->n_records ? &p->records[0].first : NULL, p->n_records, sizeof *p->records);
    fputs(",\n", f);
    put_i64_array(f, "last", p->n_records ? &p->records[0].last : NULL, p->n_records, sizeof *p->records);
    fputs("},\n\"live\": {", f);
    put_i64_array(f, "time", p->time, p->n_points, sizeof *p->time);
    fputs(", ", f);
    put_i64_array(f, "bytes", p->live, p->n_points, sizeof *p->live);
    fputs("},\n\"strategies\": [", f);
    for (int32_t k = 0; k < p->n_strategies; k++) {
        const pbl_viz_strategy *v = &p->strategies[k];
        fputs(k ? ",\n{\"name\": " : "\n{\"name\": ", f);
        put_string(f, v->name);
        fprintf(f, ", \"valid\": %s, \"optimal\": %s, \"arena\": %lld, \"ms\": %.3f, \"ratio\": ",
                v->valid ? "true" : "false", v->optimal ? "true" : "false", (long long)v->arena, v->ms);
        if (v->valid && p->lower_bound > 0)
            fprintf(f, "%.6f", (double)v->arena / (double)p->lower_bound);
        else
            fputs(v->valid ? "1" : "null", f);
        fputs(", \"error\": ", f);
        put_string(f, v->error);
        fprintf(f, ", \"cut_off\": %s, ", v->cut_off ? "true" : "false");
        if (v->valid)
            put_i64_array(f, "offset", v->offset, p->n_records, sizeof *v->offset);
        else
            fputs("\"offset\": null", f);
        fputc('}', f);
    }
    fprintf(f, "],\n\"best\": %d", (int)p->best);
    if (l.graph) {
        pbl_status s = write_graph(f, p, l.graph, l.graph_records);
        if (s != PBL_OK)
            return pbl__errf(err, errlen, s, "viz: out of memory for the graph's labels");
    }
    if (l.explain)
        write_explain(f, l.explain, l.graph);
    fputs("}\n", f);
    if (ferror(f))
        return pbl__errf(err, errlen, PBL_ERR_IO, "viz: writing the JSON failed");
    return PBL_OK;
}
