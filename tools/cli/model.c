/* Model graphs for the command line: "zoo:NAME" (tools/zoo) or a file whose extension names
 * its format. One table of formats, so each new loader (ONNX) is one row. */
#include <string.h>
#include <strings.h>

#include "cli.h"
#ifdef PEBBLE_HAVE_ZOO
#include "zoo.h"
#endif

#define ZOO_PREFIX "zoo:"

static pbl_status load_json(pbl_graph **out, const char *path, char *err, size_t errlen)
{
    return pbl_graph_load_json(out, path, NULL, err, errlen);
}

static pbl_status load_onnx(pbl_graph **out, const char *path, char *err, size_t errlen)
{
    return pbl_graph_load_onnx(out, path, NULL, err, errlen); /* planning: initializer data dropped */
}

/* Graph file formats by extension (compared without regard to case). The loader's message
 * starts with the file's name. */
static const struct model_format {
    const char *ext;
    pbl_status (*load)(pbl_graph **out, const char *path, char *err, size_t errlen);
} formats[] = {
    { ".json", load_json },
    { ".onnx", load_onnx },
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

int cli_model_is_graph(const char *source)
{
    return strncmp(source, ZOO_PREFIX, strlen(ZOO_PREFIX)) == 0 || format_of(source) != NULL;
}

const char *cli_model_extensions(void)
{
    static char list[128];
    if (!list[0])
        for (int i = 0; i < N_FORMATS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", formats[i].ext);
    return list;
}

int cli_model_load(const char *source, int64_t batch, pbl_graph **out)
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
    const struct model_format *f = format_of(source);
    if (!f) {
        cli_error("%s: not a model graph (known: zoo:NAME and files ending %s)", source, cli_model_extensions());
        return CLI_USAGE;
    }
    if (batch) {
        cli_error("%s: --batch applies to zoo graphs only (a file's shapes are fixed)", source);
        return CLI_USAGE;
    }
    pbl_status s = f->load(out, source, err, sizeof err);
    if (s != PBL_OK) {
        cli_error("%s", err);
        /* a file that could not be read is a failure; one that says something wrong is
         * malformed input */
        return s == PBL_ERR_IO || s == PBL_ERR_NOMEM ? CLI_FAIL : CLI_USAGE;
    }
    return CLI_OK;
}
