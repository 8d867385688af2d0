/*
 * pebble run MODEL — runs a model on input tensors and prints or saves its outputs.
 *
 *     pebble run MODEL [--input NAME=FILE.pb|FILE.npy ...] [--threads N] [--repeat N]
 *                      [--warmup N] [--output-dir D] [--output-format npy|pb]
 *                      [--dim N] [--strategy NAME] [--schedule S] [--zero-unbound]
 *                      [--format table|json]
 *                      [--expect NAME=FILE ... [--rtol R] [--atol A]]
 *
 * MODEL is an ONNX model (its initializers are bound zero-copy as the parameters), a JSON
 * graph file or zoo:NAME (whose parameters have no data: pass --zero-unbound to run them on
 * zeros, e.g. for timing, or give each with --input). Every graph input, and every parameter
 * or label without data, needs an --input (a tensor of exactly its shape) unless
 * --zero-unbound.
 * The model is planned and compiled once, run --warmup times untimed, then --repeat times
 * timed; the latency per run (mean, median, min over the timed runs, wall clock) and the
 * process's peak resident set (Linux: VmHWM from /proc/self/status, the high-water mark of
 * this program's own address space, loading included; getrusage's ru_maxrss elsewhere — on
 * Linux that one also keeps the peak of whatever process exec'd this one, e.g. a Python
 * driver) are printed with every output's shape and first values. --output-dir
 * writes each output as D/<name>.npy (or .pb). --expect compares output NAME with FILE
 * (|got − want| ≤ atol + rtol·|want|, default rtol 1e-3, atol 1e-7: ONNX's test defaults) and
 * makes the exit status 1 when any element is outside.
 *
 * Before the model runs, --output-dir's files are checked: none may be MODEL, an --input or an
 * --expect FILE (the same device and inode: the write would replace it, the reference
 * first), and no two outputs may give one file name ("a/b" and "a_b"); exit 2 naming both.
 *
 * "-" is standard input for one of MODEL (an ONNX model or a JSON graph, told from its
 * content), an --input FILE or an --expect FILE (a .npy or TensorProto, told likewise): two
 * cannot both read it. --output-dir takes no "-": it is a directory of files.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cblas.h>

#include "cli.h"
#include "graph/base/file_out.h" /* private to the library; the CLI links it statically */

enum { MAX_INPUTS = 64 };

static void print_usage(FILE *f)
{
    fprintf(f, "usage: pebble run MODEL [--input NAME=FILE ...] [--threads N] [--repeat N] [--warmup N]\n"
               "                  [--output-dir D] [--output-format npy|pb] [--dim N] [--strategy NAME]\n"
               "                  [--zero-unbound] [--backend cpu|cuda [--cuda-graph]] [--format table|json]\n"
               "\n"
               "Runs MODEL (FILE.onnx, a JSON graph, or zoo:NAME) on the given inputs and prints\n"
               "each output's shape and first values, the latency per run, the peak RSS and the\n"
               "CPU with the kernel level used (PEBBLE_CPU_LEVEL=baseline|avx2 forces a lower one)\n"
               "and OpenBLAS's kernel family (OPENBLAS_CORETYPE=NAME chooses another).\n"
               "One of MODEL, an --input FILE or an --expect FILE may be - (standard input).\n"
               "  --input NAME=FILE   input, parameter or label NAME from FILE (.pb TensorProto or .npy,\n"
               "                      of exactly NAME's shape)\n"
               "  --threads N         BLAS threads (default: the BLAS library's setting)\n"
               "  --repeat N          timed runs (default 1); --warmup N untimed runs first (default 1)\n"
               "  --output-dir D      write each output to D/NAME.npy (--output-format pb: .pb); none may\n"
               "                      be MODEL (or its external weights), an --input or an --expect FILE\n"
               "  --dim N             size of an ONNX model's symbolic input dims (default 1)\n"
               "  --strategy NAME     memory planner strategy (default best)\n"
               "  --schedule S        node order: program (default) or min_peak (the smallest lower bound)\n"
               "  --zero-unbound      zero-fill inputs and parameters that have no data\n"
               "  --backend B         cpu (default) or cuda: an NVIDIA GPU (docs/cuda.md); the weights are\n"
               "                      copied to the device once, the latency is the device's run with\n"
               "                      its final synchronisation; --cuda-graph replays the run as a CUDA Graph;\n"
               "                      not with --threads\n"
               "  --expect NAME=FILE  compare output NAME with FILE (--rtol 1e-3, --atol 1e-7); exit 1 if outside\n");
}

/* Peak resident set in KiB and where it came from. */
static long peak_rss_kib(const char **source)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    if (kib > 0) {
        *source = "VmHWM";
        return kib;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *source = "getrusage ru_maxrss";
    return ru.ru_maxrss;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* An output's name as a file name: '/' and other awkward characters become '_'; cut at 511
 * bytes. Two names can so become one file name: check_output_files refuses that. */
static void file_name(const char *name, char *out, size_t n)
{
    size_t k = 0;
    for (; name[k] && k + 1 < n; k++) {
        char c = name[k];
        out[k] = (c == '/' || c == '\\' || c == ':' || (unsigned char)c < 0x20 || (k == 0 && c == '.')) ? '_' : c;
    }
    out[k] = '\0';
}

enum { OUT_PATH_MAX = 4096 };

/* Where --output-dir writes output `name`: D/<file name>.npy (or .pb) in path (OUT_PATH_MAX
 * bytes); -1 when that is too long to hold. */
static int output_path(const char *outdir, const char *name, int pb_out, char *path)
{
    char fname[512];
    file_name(name, fname, sizeof fname);
    int n = snprintf(path, OUT_PATH_MAX, "%s/%s.%s", outdir, fname, pb_out ? "pb" : "npy");
    return n < 0 || n >= OUT_PATH_MAX ? -1 : 0;
}

typedef struct run_opts {
    const char *model, *outdir, *strategy, *inputs[MAX_INPUTS], *expects[MAX_INPUTS];
    int         n_inputs, n_expects, zero, json, pb_out, cuda, cuda_graph;
    double      rtol, atol;
    int64_t     threads, repeat, warmup, dim;
    pbl_schedule_kind schedule;
} run_opts;

static const args_flag run_flags[] = { { "--input", 1 }, { "--threads", 1 }, { "--repeat", 1 }, { "--warmup", 1 },
                                       { "--output-dir", 1 }, { "--output-format", 1 }, { "--dim", 1 },
                                       { "--strategy", 1 }, { "--zero-unbound", 0 }, { "--format", 1 },
                                       { "--expect", 1 }, { "--rtol", 1 }, { "--atol", 1 }, { "--schedule", 1 },
                                       { "--backend", 1 }, { "--cuda-graph", 0 } };
enum { F_INPUT, F_THREADS, F_REPEAT, F_WARMUP, F_OUTDIR, F_OUTFMT, F_DIM, F_STRATEGY, F_ZERO, F_FORMAT,
       F_EXPECT, F_RTOL, F_ATOL, F_SCHEDULE, F_BACKEND, F_CUDA_GRAPH };

/* --input or --expect NAME=FILE into list (n of them so far), refusing a doubled NAME and a
 * second reader of standard input. */
static int take_named(const char *flag, const char *v, const char **list, int *n)
{
    if (*n == MAX_INPUTS || !strchr(v, '=')) {
        cli_error("%s: '%s' is not NAME=FILE%s", flag, v, *n == MAX_INPUTS ? " (or too many)" : "");
        return CLI_USAGE;
    }
    size_t nl = (size_t)(strchr(v, '=') - v);
    for (int i = 0; i < *n; i++)
        if (strncmp(list[i], v, nl + 1) == 0) {
            cli_error("%s: '%.*s' is given twice", flag, (int)nl, v);
            return CLI_USAGE;
        }
    char what[160];
    snprintf(what, sizeof what, "%s %.*s=-", flag, (int)(nl < 100 ? nl : 100), v);
    if (cli_is_stdio(v + nl + 1) && cli_stdin_claim(what) != CLI_OK)
        return CLI_USAGE;
    list[(*n)++] = v;
    return 0;
}

static int take_arg(void *ctx, int which, const char *v)
{
    run_opts *o = ctx;
    switch (which) {
    case ARGS_POSITIONAL:
        return cli_take_file("run", "MODEL", &o->model, v) ? CLI_USAGE : 0;
    case F_INPUT:
        return take_named("--input", v, o->inputs, &o->n_inputs);
    case F_EXPECT:
        return take_named("--expect", v, o->expects, &o->n_expects);
    case F_RTOL:
        return cli_parse_double("--rtol", v, 0, 1e9, &o->rtol) ? CLI_USAGE : 0;
    case F_ATOL:
        return cli_parse_double("--atol", v, 0, 1e9, &o->atol) ? CLI_USAGE : 0;
    case F_THREADS:
        return cli_parse_int("--threads", v, 1, 1024, &o->threads) ? CLI_USAGE : 0;
    case F_REPEAT:
        return cli_parse_int("--repeat", v, 1, 100000000, &o->repeat) ? CLI_USAGE : 0;
    case F_WARMUP:
        return cli_parse_int("--warmup", v, 0, 100000000, &o->warmup) ? CLI_USAGE : 0;
    case F_DIM:
        return cli_parse_int("--dim", v, 1, INT64_C(1) << 30, &o->dim) ? CLI_USAGE : 0;
    case F_OUTDIR:
        if (cli_is_stdio(v)) {
            cli_error("--output-dir -: a directory of output files cannot be standard output"
                      " (the outputs' first values are printed there; give a directory)");
            return CLI_USAGE;
        }
        o->outdir = v;
        return 0;
    case F_BACKEND:
        if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
            cli_error("--backend: '%s' is not cpu or cuda", v);
            return CLI_USAGE;
        }
        o->cuda = strcmp(v, "cuda") == 0;
        return 0;
    case F_CUDA_GRAPH:
        o->cuda_graph = 1;
        return 0;
    case F_OUTFMT:
        if (strcmp(v, "npy") != 0 && strcmp(v, "pb") != 0) {
            cli_error("--output-format: '%s' is not npy or pb", v);
            return CLI_USAGE;
        }
        o->pb_out = strcmp(v, "pb") == 0;
        return 0;
    case F_STRATEGY:
        if (cli_check_strategy(v, 0) != CLI_OK) /* before loading, not after */
            return CLI_USAGE;
        o->strategy = v;
        return 0;
    case F_SCHEDULE:
        if (cli_check_schedule(v, 0) != CLI_OK)
            return CLI_USAGE;
        pbl_schedule_kind_parse(v, &o->schedule);
        return 0;
    case F_ZERO:
        o->zero = 1;
        return 0;
    default: /* F_FORMAT */
        if (strcmp(v, "table") != 0 && strcmp(v, "json") != 0) {
            cli_error("--format: '%s' is not table or json", v);
            return CLI_USAGE;
        }
        o->json = strcmp(v, "json") == 0;
        return 0;
    }
}

/* The files --output-dir would write, checked before the model runs: no two outputs may map
 * to one file (names equal after file_name: "a/b" and "a_b", or cut at 511 bytes), and none
 * may be a file this run reads (MODEL, its external data files w lists, an --input or an
 * --expect FILE: same device and inode, so a link or another spelling counts), which the
 * write would replace. CLI_OK, or CLI_USAGE
 * after one message naming both; CLI_FAIL after one when a file could not be written. */
static int check_output_files(const run_opts *o, const pbl_graph *g, const pbl_onnx_weights *w)
{
    int32_t n = pbl_graph_output_count(g);
    char(*paths)[OUT_PATH_MAX] = calloc(n > 0 ? (size_t)n : 1, sizeof *paths);
    if (!paths) {
        cli_error("run: out of memory");
        return CLI_FAIL;
    }
    int rc = CLI_OK;
    for (int32_t k = 0; k < n && rc == CLI_OK; k++) {
        const char *name;
        pbl_graph_output_at(g, k, &name, NULL);
        if (output_path(o->outdir, name, o->pb_out, paths[k]) != 0) {
            cli_error("--output-dir %s: output '%.200s...': the file name would be too long", o->outdir, name);
            rc = CLI_USAGE;
            break;
        }
        for (int32_t j = 0; j < k && rc == CLI_OK; j++) {
            const char *other;
            pbl_graph_output_at(g, j, &other, NULL);
            if (args_same_file(paths[j], paths[k])) {
                cli_error("--output-dir %s: outputs '%s' and '%s' would both be written to %s; rename one of them",
                          o->outdir, other, name, paths[k]);
                rc = CLI_USAGE;
            }
        }
        /* what this run reads: "--input NAME=FILE" / "--expect NAME=FILE" and MODEL */
        for (int i = 0; i < o->n_inputs + o->n_expects && rc == CLI_OK; i++) {
            const char *arg = i < o->n_inputs ? o->inputs[i] : o->expects[i - o->n_inputs];
            const char *file = strchr(arg, '=') + 1;
            if (cli_is_stdio(file) ? cli_same_as_stdin(paths[k]) : args_same_file(file, paths[k])) {
                cli_error("--output-dir %s: output '%s' would be written to %s, which is %s %s; it would be"
                          " overwritten (give another --output-dir)", o->outdir, name, paths[k],
                          i < o->n_inputs ? "--input" : "--expect", arg);
                rc = CLI_USAGE;
            }
        }
        /* an ONNX model's external data files, which hold its weights */
        for (int32_t i = 0; i < pbl_onnx_weights_file_count(w) && rc == CLI_OK; i++)
            if (args_same_file(pbl_onnx_weights_file_at(w, i), paths[k])) {
                cli_error("--output-dir %s: output '%s' would be written to %s, which holds MODEL's external"
                          " weights; it would be overwritten", o->outdir, name, paths[k]);
                rc = CLI_USAGE;
            }
        if (rc == CLI_OK && strncmp(o->model, "zoo:", 4) != 0 &&
            (cli_is_stdio(o->model) ? cli_same_as_stdin(paths[k]) : args_same_file(o->model, paths[k]))) {
            cli_error("--output-dir %s: output '%s' would be written to %s, which is MODEL; it would be overwritten",
                      o->outdir, name, paths[k]);
            rc = CLI_USAGE;
        }
    }
    /* each file can be written (a read-only folder, a directory in the way): found now, not
     * after the runs */
    for (int32_t k = 0; k < n && rc == CLI_OK; k++) {
        char err[OUT_PATH_MAX + 256];
        if (pbl__file_out_check(paths[k], NULL, err, sizeof err) != PBL_OK) {
            cli_error("--output-dir: %s", err);
            rc = CLI_FAIL;
        }
    }
    free(paths);
    return rc;
}

int cli_run(int argc, char **argv)
{
    run_opts o = { .rtol = 1e-3, .atol = 1e-7, .repeat = 1, .warmup = 1, .dim = 1 };
    int parsed = cli_parse("run", run_flags, (int)(sizeof run_flags / sizeof run_flags[0]), take_arg, print_usage,
                           argc, argv, &o);
    if (parsed != ARGS_GO_ON)
        return parsed;
    const char *model = o.model, *outdir = o.outdir, *strategy = o.strategy, *model_name = cli_display_name(o.model);
    const char *const *inputs = o.inputs, *const *expects = o.expects;
    int n_inputs = o.n_inputs, n_expects = o.n_expects, zero = o.zero, json = o.json, pb_out = o.pb_out;
    int mismatches = 0, shape_mismatches = 0;
    double rtol = o.rtol, atol = o.atol;
    int64_t threads = o.threads, repeat = o.repeat, warmup = o.warmup, dim = o.dim;
    if (!model) {
        cli_error("run: no MODEL given (see pebble run --help)");
        return CLI_USAGE;
    }
    if (o.cuda_graph && !o.cuda) {
        cli_error("--cuda-graph: only with --backend cuda");
        return CLI_USAGE;
    }
    if (o.cuda && threads > 0) { /* the CUDA backend takes no BLAS threads: not silently ignored */
        cli_error("--threads: BLAS threads on the CPU; with --backend cuda the run is on the GPU (leave it out)");
        return CLI_USAGE;
    }
    /* the output directory before the model runs, not after its outputs are printed */
    struct stat sb;
    if (outdir && stat(outdir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        cli_error("--output-dir %s: exists and is not a directory", outdir);
        return CLI_USAGE;
    }
    if (outdir && mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        cli_error("--output-dir %s: %s", outdir, strerror(errno));
        return errno == ENOENT || errno == ENOTDIR ? CLI_USAGE : CLI_FAIL;
    }

    char err[4096], shown[4 * CLI_NAME_SHOWN];
    int rc = CLI_OK;
    pbl_graph *g = NULL;
    pbl_onnx_weights *w = NULL;
    pbl_exec *e = NULL;
    pbl_onnx_tensor *data = calloc(MAX_INPUTS, sizeof *data);
    double *ms = calloc((size_t)repeat, sizeof *ms);
    void *zeros = NULL;
    if (!data || !ms) {
        cli_error("run: out of memory");
        rc = CLI_FAIL;
        goto done;
    }
    double t_load = cli_now_ms();
    pbl_onnx_options onnx = pbl_onnx_options_default();
    onnx.weights = &w; /* the initializers are the parameters' data */
    onnx.dim_value = dim;
    if ((rc = cli_model_load_with(model, 0, &onnx, &g)) != CLI_OK)
        goto done;
    /* every --expect names an output */
    for (int i = 0; i < n_expects; i++) {
        const char *eq = strchr(expects[i], '=');
        int found = 0;
        for (int32_t k = 0; k < pbl_graph_output_count(g) && !found; k++) {
            const char *name;
            pbl_graph_output_at(g, k, &name, NULL);
            found = strlen(name) == (size_t)(eq - expects[i]) && strncmp(name, expects[i], (size_t)(eq - expects[i])) == 0;
        }
        if (!found) {
            size_t len = 0;
            err[0] = '\0';
            for (int32_t k = 0; k < pbl_graph_output_count(g) && len < sizeof err; k++) {
                const char *name;
                pbl_graph_output_at(g, k, &name, NULL);
                len += (size_t)snprintf(err + len, sizeof err - len, "%s%s", k ? ", " : "", name);
            }
            cli_error("--expect %.*s: not an output of %s (outputs: %s)", (int)(eq - expects[i]), expects[i], model_name, err);
            rc = CLI_USAGE;
            goto done;
        }
    }
    /* before anything runs or is written */
    if (outdir && (rc = check_output_files(&o, g, w)) != CLI_OK)
        goto done;
    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = (int32_t)threads;
    eo.strategy = strategy;
    eo.schedule = o.schedule;
    if (o.cuda) {
        eo.backend = PBL_BACKEND_CUDA;
        eo.cuda_graph = o.cuda_graph;
    }
    pbl_status s = pbl_exec_create(&e, g, &eo, err, sizeof err);
    if (s != PBL_OK) {
        cli_error("%s: %s", model_name, err);
        /* on the CPU an unsupported model is bad input; on the GPU the same status says the
         * machine cannot run it (no device, no loadable module, an op without a CUDA kernel),
         * a failure as for train_mlp --backend cuda */
        rc = s == PBL_ERR_UNSUPPORTED && !o.cuda ? CLI_USAGE : CLI_FAIL;
        goto done;
    }
    /* on the CPU the weights are bound where they lie; a bound variable on the device would be
     * copied there before every run, so there they are written once */
    if (w && !o.cuda && (s = pbl_onnx_weights_bind(w, e, err, sizeof err)) != PBL_OK) {
        cli_error("%s: %s", model_name, err);
        rc = CLI_FAIL;
        goto done;
    }
    for (int32_t k = 0; w && o.cuda && k < pbl_onnx_weights_count(w); k++) {
        pbl_value wv;
        pbl_value_info wi;
        void *wd;
        size_t wb;
        pbl_onnx_weights_at(w, k, &wv, &wd, &wb);
        if (pbl_exec_write(e, wv, wd, wb) != PBL_OK) {
            const char *wname = pbl_graph_value_info(g, wv, &wi) == PBL_OK && wi.name ? wi.name : "?";
            cli_error("%s: writing weight '%s' to the device: %s", model_name, wname, pbl_exec_errmsg(e));
            rc = CLI_FAIL;
            goto done;
        }
    }
    /* inputs from files */
    for (int i = 0; i < n_inputs; i++) {
        const char *eq = strchr(inputs[i], '=');
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)(eq - inputs[i]), inputs[i]);
        pbl_value iv = pbl_graph_find_value(g, name);
        pbl_value_info vi;
        /* every value the "has no data" hint below names: inputs, parameters, labels */
        if (iv == PBL_NONE || pbl_graph_value_info(g, iv, &vi) != PBL_OK ||
            (vi.kind != PBL_VALUE_INPUT && vi.kind != PBL_VALUE_PARAM && vi.kind != PBL_VALUE_LABEL)) {
            cli_error("--input: '%s' is not an input, parameter or label of %s", name, model_name);
            rc = CLI_USAGE;
            goto done;
        }
        if ((rc = cli_tensor_read(eq + 1, &data[i])) != CLI_OK)
            goto done;
        char s1[96], s2[96];
        /* the shape exactly: (784, 8) has [8, 784]'s element count but not its layout */
        if (data[i].dtype != vi.dtype || !pbl_shape_equal(&data[i].shape, &vi.shape)) {
            cli_error("--input %s: %s holds %s %s but the input is %s %s", name, cli_display_name(eq + 1),
                      pbl_dtype_name(data[i].dtype),
                      pbl_shape_str(&data[i].shape, s1, sizeof s1), pbl_dtype_name(vi.dtype),
                      pbl_shape_str(&vi.shape, s2, sizeof s2));
            rc = CLI_USAGE;
            goto done;
        }
        if (pbl_exec_write(e, iv, data[i].data, data[i].bytes) != PBL_OK) {
            cli_error("--input %s: %s", name, pbl_exec_errmsg(e));
            rc = CLI_FAIL;
            goto done;
        }
    }
    /* variables still without data */
    for (pbl_value x = 0; x < pbl_graph_value_count(g); x++) {
        pbl_value_info vi;
        pbl_graph_value_info(g, x, &vi);
        if (vi.kind != PBL_VALUE_INPUT && vi.kind != PBL_VALUE_PARAM && vi.kind != PBL_VALUE_LABEL)
            continue;
        int given = 0;
        for (int i = 0; i < n_inputs && !given; i++)
            given = strncmp(inputs[i], vi.name, strlen(vi.name)) == 0 && inputs[i][strlen(vi.name)] == '=';
        for (int32_t k = 0; w && k < pbl_onnx_weights_count(w) && !given; k++) {
            pbl_value wv;
            pbl_onnx_weights_at(w, k, &wv, NULL, NULL);
            given = wv == x;
        }
        if (given)
            continue;
        if (!zero) {
            cli_error("run: %s '%s' %s has no data (give --input %s=FILE, or --zero-unbound)", pbl_value_kind_name(vi.kind),
                      vi.name, pbl_shape_str(&vi.shape, err, sizeof err), vi.name);
            rc = CLI_USAGE;
            goto done;
        }
        size_t bytes = (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype);
        free(zeros);
        zeros = calloc(1, bytes ? bytes : 1);
        if (!zeros || pbl_exec_write(e, x, zeros, bytes) != PBL_OK) {
            cli_error("run: zero-filling '%s': %s", vi.name, zeros ? pbl_exec_errmsg(e) : "out of memory");
            rc = CLI_FAIL;
            goto done;
        }
    }
    t_load = cli_now_ms() - t_load;
    for (int64_t r = 0; r < warmup + repeat; r++) {
        double t0 = cli_now_ms();
        if ((s = pbl_exec_run(e)) != PBL_OK) {
            cli_error("%s: run: %s", model_name, pbl_exec_errmsg(e));
            rc = CLI_FAIL;
            goto done;
        }
        if (r >= warmup)
            ms[r - warmup] = cli_now_ms() - t0;
    }
    double mean = 0;
    for (int64_t r = 0; r < repeat; r++)
        mean += ms[r] / (double)repeat;
    qsort(ms, (size_t)repeat, sizeof *ms, cmp_double);
    double median = repeat % 2 ? ms[repeat / 2] : 0.5 * (ms[repeat / 2 - 1] + ms[repeat / 2]);
    pbl_exec_stats st;
    pbl_exec_stats_get(e, &st);
    if (json)
        printf("{\"model\": "), cli_json_string(stdout, model_name), printf(", \"outputs\": [");
    else
        printf("model %s: %d nodes, arena %llu bytes (naive %llu, unshared %llu, lower bound %llu)\n",
               cli_shown(model_name, shown, sizeof shown),
               (int)st.nodes, (unsigned long long)st.arena_bytes, (unsigned long long)st.naive_bytes,
               (unsigned long long)st.unshared_bytes, (unsigned long long)st.lower_bound);
    for (int32_t k = 0; k < pbl_graph_output_count(g); k++) {
        const char *name;
        pbl_value ov;
        pbl_value_info vi;
        pbl_graph_output_at(g, k, &name, &ov);
        pbl_graph_value_info(g, ov, &vi);
        pbl_onnx_tensor t = { .name = (char *)name, .dtype = vi.dtype, .shape = vi.shape };
        t.bytes = (size_t)pbl_shape_numel(&vi.shape) * pbl_dtype_size(vi.dtype);
        t.data = malloc(t.bytes ? t.bytes : 1);
        if (!t.data || pbl_exec_read(e, ov, t.data, t.bytes) != PBL_OK) {
            cli_error("output %s: %s", name, t.data ? pbl_exec_errmsg(e) : "out of memory");
            free(t.data);
            rc = CLI_FAIL;
            goto done;
        }
        char sh[96];
        if (json) {
            printf("%s{\"name\": ", k ? ", " : "");
            cli_json_string(stdout, name);
            printf(", \"shape\": [");
            for (int32_t d = 0; d < vi.shape.ndim; d++)
                printf("%s%lld", d ? ", " : "", (long long)vi.shape.dim[d]);
            printf("]}");
        } else {
            printf("output %s %s %s:", cli_shown(name, shown, sizeof shown), pbl_shape_str(&vi.shape, sh, sizeof sh), pbl_dtype_name(vi.dtype));
            int64_t n = pbl_shape_numel(&vi.shape);
            for (int64_t i = 0; i < n && i < 8; i++) {
                if (vi.dtype == PBL_F32)
                    printf(" %.6g", (double)((float *)t.data)[i]);
                else
                    printf(" %d", (int)((int32_t *)t.data)[i]);
            }
            printf("%s\n", n > 8 ? " ..." : "");
        }
        for (int i = 0; i < n_expects; i++) {
            size_t nl = strlen(name);
            if (strncmp(expects[i], name, nl) != 0 || expects[i][nl] != '=')
                continue;
            pbl_onnx_tensor want;
            int erc = cli_tensor_read(expects[i] + nl + 1, &want);
            if (erc != CLI_OK) {
                free(t.data);
                rc = erc;
                goto done;
            }
            int64_t n = pbl_shape_numel(&vi.shape), bad = 0, worst = 0;
            double maxd = 0;
            if (want.dtype != vi.dtype || !pbl_shape_equal(&want.shape, &vi.shape)) {
                /* one line, and the exit status 1; not counted again in the summary below */
                char s1[96], s2[96];
                cli_error("--expect %s: %s is %s %s, the output %s %s", name, cli_display_name(expects[i] + nl + 1),
                          pbl_dtype_name(want.dtype),
                          pbl_shape_str(&want.shape, s1, sizeof s1), pbl_dtype_name(vi.dtype),
                          pbl_shape_str(&vi.shape, s2, sizeof s2));
                shape_mismatches++;
                pbl_onnx_tensor_free(&want);
                continue;
            } else {
                for (int64_t j = 0; j < n; j++) {
                    double got = vi.dtype == PBL_F32 ? ((float *)t.data)[j] : ((int32_t *)t.data)[j];
                    double exp_ = vi.dtype == PBL_F32 ? ((float *)want.data)[j] : ((int32_t *)want.data)[j];
                    double d = fabs(got - exp_);
                    if (d > maxd || d != d)
                        maxd = d, worst = j;
                    bad += !(d <= atol + rtol * fabs(exp_));
                }
            }
            if (!json)
                printf("expect %s: %lld of %lld elements outside rtol %g atol %g; max |got - want| %.3g at [%lld]\n",
                       cli_shown(name, shown, sizeof shown),
                       (long long)bad, (long long)n, rtol, atol, maxd, (long long)worst);
            mismatches += bad > 0;
            pbl_onnx_tensor_free(&want);
        }
        if (outdir) {
            char path[OUT_PATH_MAX];
            output_path(outdir, name, pb_out, path); /* its length was checked before the run */
            int wrc = cli_tensor_write(path, &t);
            if (wrc != CLI_OK)
                rc = wrc;
        }
        free(t.data);
    }
    const char *rss_source;
    long rss = peak_rss_kib(&rss_source);
    if (json) {
        printf("], \"threads\": %lld, \"warmup\": %lld, \"repeat\": %lld, \"latency_ms\": {\"mean\": %.6f, \"median\": %.6f, "
               "\"min\": %.6f}, \"setup_ms\": %.3f, \"peak_rss_kib\": %ld, \"peak_rss_source\": \"%s\", \"arena_bytes\": %llu, "
               "\"naive_bytes\": %llu, \"unshared_bytes\": %llu, \"lower_bound\": %llu, \"nodes\": %d, \"cpu\": \"%s\", "
               "\"cpu_kernels\": \"%s\", \"backend\": \"%s\", \"cuda_graph\": %d}\n",
               (long long)threads, (long long)warmup, (long long)repeat, mean, median, ms[0], t_load, rss, rss_source,
               (unsigned long long)st.arena_bytes, (unsigned long long)st.naive_bytes,
               (unsigned long long)st.unshared_bytes, (unsigned long long)st.lower_bound, (int)st.nodes,
               pbl_cpu_describe(), pbl_cpu_kernels(), o.cuda ? "cuda" : "cpu", o.cuda_graph);
    } else {
        printf("latency per run over %lld runs (after %lld warm-up): mean %.4f ms, median %.4f ms, min %.4f ms\n",
               (long long)repeat, (long long)warmup, mean, median, ms[0]);
        printf("load + plan + bind: %.2f ms; peak RSS %ld KiB (%s)\n", t_load, rss, rss_source);
        if (o.cuda)
            printf("backend: cuda%s (the latency includes each run's final synchronisation)\n",
                   o.cuda_graph ? ", runs replayed as a CUDA Graph" : "");
        printf("cpu: %s\n", pbl_cpu_describe());
#ifdef PEBBLE_HAVE_OPENBLAS_CORENAME
        /* the sgemm kernel family: OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU costs resnet18
         * about 1.6x the time in sgemm (bench/README.md), so a timing must say which ran */
        printf("blas: OpenBLAS %s kernels%s\n", openblas_get_corename(),
               getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE)" : "");
#endif
    }
    if (rc == CLI_OK && mismatches) {
        cli_error("%s: %d output(s) differ from --expect", model_name, mismatches);
        rc = CLI_FAIL;
    }
    if (rc == CLI_OK && shape_mismatches)
        rc = CLI_FAIL;
done:
    for (int i = 0; data && i < n_inputs; i++)
        pbl_onnx_tensor_free(&data[i]);
    free(data);
    free(ms);
    free(zeros);
    pbl_exec_destroy(e);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    return rc;
}
