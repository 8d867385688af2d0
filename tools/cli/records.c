/* Where `pebble plan` gets its records: a records CSV file, or a graph (a zoo model or a graph
 * file, see model.c) run through liveness, with the values' names as ids; "-" is standard
 * input holding either. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The value's name as an id the CSV writer accepts: commas, quotes and control characters
 * (C1 ones such as U+009B, CSI, too: ids reach a terminal with `--out -`) become '_'; a value
 * without a name is "v<index>". */
static size_t id_for(const pbl_graph *g, pbl_value v, char *dst, size_t cap)
{
    pbl_value_info info;
    const char *name = pbl_graph_value_info(g, v, &info) == PBL_OK && info.name && info.name[0] ? info.name : NULL;
    int n;
    if (name)
        n = snprintf(dst, cap, "%s", name);
    else
        n = snprintf(dst, cap, "v%d", (int)v);
    if (n < 0)
        return 0;
    size_t len = (size_t)n < cap ? (size_t)n : cap - 1;
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)dst[k];
        if (c == ',' || c == '"' || c < 0x20 || c == 0x7f)
            dst[k] = '_';
        else if (c == 0xc2 && k + 1 < len && (unsigned char)dst[k + 1] >= 0x80 && (unsigned char)dst[k + 1] < 0xa0)
            dst[k] = dst[k + 1] = '_';
    }
    return len;
}

static int load_graph(const char *name, int64_t batch, int64_t align, const char *schedule, cli_records *out)
{
    char err[1024];
    pbl_graph *g = NULL;
    int rc = cli_model_load(name, batch, &g);
    if (rc != CLI_OK)
        return rc;
    pbl_graph_records gr;
    pbl_liveness_options lo = pbl_liveness_options_default();
    lo.align = align ? align : 64; /* sizes rounded as the plan will align them: an exact bound */
    pbl_schedule sc = { 0 };
    out->schedule = schedule;
    if (strcmp(schedule, "program") != 0) {
        pbl_schedule_options so = pbl_schedule_options_default();
        so.kind = PBL_SCHEDULE_MIN_PEAK;
        so.align = lo.align;
        double t0 = cli_now_ms();
        pbl_status s = pbl_graph_schedule(g, &so, &sc, err, sizeof err);
        out->schedule_ms = cli_now_ms() - t0;
        if (s != PBL_OK) {
            cli_error("%s: schedule: %s", cli_display_name(name), err);
            pbl_graph_destroy(g);
            return CLI_FAIL;
        }
        out->program_lower_bound = sc.program_peak;
        out->min_peak_lower_bound = sc.peak;
        out->schedule_method = sc.method;
        out->schedule_exact = sc.exact;
        lo.order = sc.order;
        lo.n_order = sc.n_steps;
    }
    pbl_status s = pbl_graph_liveness(g, &lo, &gr, err, sizeof err);
    pbl_schedule_free(&sc);
    if (s != PBL_OK) {
        cli_error("%s: liveness: %s", cli_display_name(name), err);
        pbl_graph_destroy(g);
        return CLI_FAIL;
    }
    size_t n = (size_t)gr.n_records, text_len = 0;
    enum { ID_MAX = 256 };
    out->from_graph = 1;
    out->own_ids = malloc((n ? n : 1) * sizeof *out->own_ids);
    out->own_id_text = malloc((n ? n : 1) * ID_MAX);
    if (!out->own_ids || !out->own_id_text) {
        cli_error("%s: out of memory", cli_display_name(name));
        rc = CLI_FAIL;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        out->own_ids[i] = out->own_id_text + text_len;
        text_len += id_for(g, gr.record_value[i], out->own_ids[i], ID_MAX) + 1;
    }
    out->file.records = gr.records;
    out->file.ids = out->own_ids;
    out->file.n = gr.n_records;
    out->default_align = lo.align;
    out->graph = g; /* kept, with its records, for labels */
    out->graph_records = gr;
    return rc;
done:
    pbl_graph_records_free(&gr);
    pbl_graph_destroy(g);
    return rc;
}

int cli_records_load(const char *source, int64_t batch, int64_t align, cli_records *out)
{
    return cli_records_load_scheduled(source, batch, align, "program", out);
}

int cli_records_load_scheduled(const char *source, int64_t batch, int64_t align, const char *schedule,
                               cli_records *out)
{
    memset(out, 0, sizeof *out);
    int is_graph, rc = cli_source_is_graph(source, &is_graph);
    if (rc != CLI_OK)
        return rc;
    if (is_graph)
        return load_graph(source, batch, align, schedule, out);
    if (strcmp(schedule, "program") != 0) {
        cli_error("%s: --schedule applies to graphs only (a records CSV's lifetimes are fixed)",
                  cli_display_name(source));
        return CLI_USAGE;
    }
    if (batch) {
        cli_error("%s: --batch applies to zoo graphs only (a records CSV's sizes are fixed)", cli_display_name(source));
        return CLI_USAGE;
    }
    char err[2048];
    pbl_status s;
    if (cli_is_stdio(source)) {
        const unsigned char *data;
        size_t len;
        if ((rc = cli_stdin_read(&data, &len)) != CLI_OK)
            return rc;
        s = pbl_records_parse_csv((const char *)data, len, CLI_STDIN_NAME, NULL, &out->file, err, sizeof err);
    } else {
        s = pbl_records_read_csv(source, NULL, &out->file, err, sizeof err);
    }
    if (s != PBL_OK) {
        cli_error("%s", err);
        return s == PBL_ERR_FORMAT ? CLI_USAGE : CLI_FAIL;
    }
    out->default_align = 1;
    return CLI_OK;
}

void cli_records_free(cli_records *r)
{
    if (!r)
        return;
    if (r->from_graph) {
        pbl_graph_records_free(&r->graph_records);
        pbl_graph_destroy(r->graph);
        free(r->own_ids);
        free(r->own_id_text);
    } else {
        pbl_records_file_free(&r->file);
    }
    memset(r, 0, sizeof *r);
}
