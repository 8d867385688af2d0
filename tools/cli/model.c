/* Model graphs for the command line: "zoo:NAME" (tools/zoo), "-" (standard input, its format
 * told from its content) or a file whose extension names its format. One table of formats,
 * so each new loader is one row. */
#include <string.h>
#include <strings.h>

#include "cli.h"
#ifdef PEBBLE_HAVE_ZOO
#include "zoo.h"
#endif

#define ZOO_PREFIX "zoo:"

static pbl_status load_json(pbl_graph **out, const char *path, const pbl_onnx_options *onnx, char *err, size_t errlen)
{
    return pbl_graph_load_json(out, path, NULL, err, errlen);
}

static pbl_status parse_json(pbl_graph **out, const unsigned char *data, size_t len, const pbl_onnx_options *onnx,
                             char *err, size_t errlen)
{
    return pbl_graph_from_json(out, (const char *)data, len, NULL, err, errlen);
}

/* onnx NULL: planning only, the initializers' data dropped. The weights are kept until the
 * files they came from (external data beside the model) are known, so that no output of this
 * command replaces one: refused as bad usage, like an output that is MODEL itself. */
static pbl_status load_onnx(pbl_graph **out, const char *path, const pbl_onnx_options *onnx, char *err, size_t errlen)
{
    pbl_onnx_options o = onnx ? *onnx : pbl_onnx_options_default();
    pbl_onnx_weights *own = NULL;
    if (!o.weights)
        o.weights = &own;
    pbl_status s = pbl_graph_load_onnx(out, path, &o, err, errlen);
    for (int32_t i = 0; s == PBL_OK && i < pbl_onnx_weights_file_count(*o.weights); i++) {
        const char *file = pbl_onnx_weights_file_at(*o.weights, i);
        char what[4200];
        snprintf(what, sizeof what, "%s, which holds %s's external weights", file, path);
        if (cli_output_named(file, what, err, errlen)) {
            pbl_graph_destroy(*out);
            *out = NULL;
            pbl_onnx_weights_destroy(*o.weights);
            *o.weights = NULL;
            s = PBL_ERR_INVALID_ARG;
        }
    }
    pbl_onnx_weights_destroy(own);
    return s;
}

static pbl_status parse_onnx(pbl_graph **out, const unsigned char *data, size_t len, const pbl_onnx_options *onnx,
                             char *err, size_t errlen)
{
    return pbl_graph_from_onnx(out, data, len, onnx, err, errlen);
}

/* Graph file formats: by extension (compared without regard to case) for files, by content
 * (cli_content_of) for standard input. A file loader's message starts with the file's name;
 * a parser's does not. */
static const struct model_format {
    const char *ext;
    int         content;
    pbl_status (*load)(pbl_graph **out, const char *path, const pbl_onnx_options *onnx, char *err, size_t errlen);
    pbl_status (*parse)(pbl_graph **out, const unsigned char *data, size_t len, const pbl_onnx_options *onnx,
                        char *err, size_t errlen);
} formats[] = {
    { ".json", CLI_CONTENT_JSON, load_json, parse_json },
    { ".onnx", CLI_CONTENT_ONNX, load_onnx, parse_onnx },
};
#define N_FORMATS ((int)(sizeof formats / sizeof formats[0]))

static const struct model_format *format_of(const char *path)
{
    size_t n = strlen(path);
    for (int i = 0; i < N_FORMATS; i++) {
        size_t e = strlen(formats[i].ext);
        if (n > e && strcasecmp(path + n - e, formats[i].ext) == 0)
            return &formats[i];
    }
    return NULL;
}

int cli_source_is_graph(const char *source, int *is_graph)
{
    *is_graph = 0;
    if (cli_is_stdio(source)) {
        const unsigned char *data;
        size_t len;
        int rc = cli_stdin_read(&data, &len);
        if (rc != CLI_OK)
            return rc;
        *is_graph = cli_content_of(data, len) != CLI_CONTENT_RECORDS;
        return CLI_OK;
    }
    *is_graph = strncmp(source, ZOO_PREFIX, strlen(ZOO_PREFIX)) == 0 || format_of(source) != NULL;
    return CLI_OK;
}

const char *cli_model_extensions(void)
{
    static char list[128];
    if (!list[0])
        for (int i = 0; i < N_FORMATS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", formats[i].ext);
    return list;
}

/* A graph from standard input: a JSON graph or an ONNX model, told from its content. */
static pbl_status parse_stdin(const pbl_onnx_options *onnx, pbl_graph **out, int *rc, char *err, size_t errlen)
{
    const unsigned char *data;
    size_t len;
    if ((*rc = cli_stdin_read(&data, &len)) != CLI_OK)
        return PBL_ERR_IO;
    int content = cli_content_of(data, len);
    for (int i = 0; i < N_FORMATS; i++)
        if (formats[i].content == content)
            return formats[i].parse(out, data, len, onnx, err, errlen);
    snprintf(err, errlen, "not a JSON graph or an ONNX model (its first line is text, as a records CSV's is)");
    return PBL_ERR_FORMAT;
}

int cli_model_load_with(const char *source, int64_t batch, const pbl_onnx_options *onnx, pbl_graph **out)
{
    char err[2048];
    *out = NULL;
    if (strncmp(source, ZOO_PREFIX, strlen(ZOO_PREFIX)) == 0) {
#ifdef PEBBLE_HAVE_ZOO
        pbl_status s = zoo_build(source + strlen(ZOO_PREFIX), batch, out, err, sizeof err);
        if (s != PBL_OK) {
            cli_error("%s", err);
            return s == PBL_ERR_NOT_FOUND || s == PBL_ERR_INVALID_ARG ? CLI_USAGE : CLI_FAIL;
        }
        return CLI_OK;
#else
        cli_error("%s: zoo graphs are not part of this build", source);
        return CLI_FAIL;
#endif
    }
    const struct model_format *f = cli_is_stdio(source) ? NULL : format_of(source);
    if (!f && !cli_is_stdio(source)) {
        cli_error("%s: not a model graph (known: zoo:NAME, - for standard input, and files ending %s)", source,
                  cli_model_extensions());
        return CLI_USAGE;
    }
    if (batch) {
        cli_error("%s: --batch applies to zoo graphs only (a file's shapes are fixed)", cli_display_name(source));
        return CLI_USAGE;
    }
    pbl_status s;
    if (f) {
        s = f->load(out, source, onnx, err, sizeof err);
        if (s != PBL_OK)
            cli_error("%s", err);
    } else {
        int rc = CLI_OK;
        s = parse_stdin(onnx, out, &rc, err, sizeof err);
        if (rc != CLI_OK)
            return rc; /* reported */
        if (s != PBL_OK)
            cli_error("%s: %s", CLI_STDIN_NAME, err);
    }
    /* a file that could not be read is a failure; one that says something wrong is
     * malformed input */
    if (s != PBL_OK)
        return s == PBL_ERR_IO || s == PBL_ERR_NOMEM ? CLI_FAIL : CLI_USAGE;
    return CLI_OK;
}

int cli_model_load(const char *source, int64_t batch, pbl_graph **out)
{
    return cli_model_load_with(source, batch, NULL, out);
}
