/*
 * pebble run MODEL — runs a model on input tensors and prints or saves its outputs.
 *
 *     pebble run MODEL [--input NAME=FILE.pb|FILE.npy ...] [--threads N] [--repeat N]
 *                      [--warmup N] [--output-dir D] [--output-format npy|pb]
 *                      [--dim N] [--strategy NAME] [--zero-unbound] [--format table|json]
 *                      [--expect NAME=FILE ... [--rtol R] [--atol A]]
 *
 * MODEL is an ONNX model (its initializers are bound zero-copy as the parameters), a JSON
 * graph file or zoo:NAME (whose parameters have no data: pass --zero-unbound to run them on
 * zeros, e.g. for timing). Every graph input needs an --input unless --zero-unbound.
 * The model is planned and compiled once, run --warmup times untimed, then --repeat times
 * timed; the latency per run (mean, median, min over the timed runs, wall clock) and the
 * process's peak resident set (Linux: VmHWM from /proc/self/status, the high-water mark of
 * this program's own address space, loading included; getrusage's ru_maxrss elsewhere — on
 * Linux that one also keeps the peak of whatever process exec'd this one, e.g. a Python
 * driver) are printed with every output's shape and first values. --output-dir
 * writes each output as D/<name>.npy (or .pb). --expect compares output NAME with FILE
 * (|got − want| ≤ atol + rtol·|want|, default rtol 1e-3, atol 1e-7: ONNX's test defaults) and
 * makes the exit status 1 when any element is outside.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <strings.h>

#include "cli.h"

enum { MAX_INPUTS = 64 };

static void print_usage(FILE *f)
{
    fprintf(f, "usage: pebble run MODEL [--input NAME=FILE ...] [--threads N] [--repeat N] [--warmup N]\n"
               "                  [--output-dir D] [--output-format npy|pb] [--dim N] [--strategy NAME]\n"
               "                  [--zero-unbound] [--format table|json]\n"
               "\n"
               "Runs MODEL (FILE.onnx, a JSON graph, or zoo:NAME) on the given inputs and prints\n"
               "each output's shape and first values, the latency per run and the peak RSS.\n"
               "  --input NAME=FILE   graph input NAME from FILE (.pb TensorProto or .npy)\n"
               "  --threads N         BLAS threads (default: the BLAS library's setting)\n"
               "  --repeat N          timed runs (default 1); --warmup N untimed runs first (default 1)\n"
               "  --output-dir D      write each output to D/NAME.npy (--output-format pb: .pb)\n"
               "  --dim N             size of an ONNX model's symbolic input dims (default 1)\n"
               "  --strategy NAME     memory planner strategy (default best)\n"
               "  --zero-unbound      zero-fill inputs and parameters that have no data\n"
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

static int ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n > e && strcasecmp(s + n - e, ext) == 0;
}

/* An output's name as a file name: '/' and other awkward characters become '_'. */
static void file_name(const char *name, char *out, size_t n)
{
    size_t k = 0;
    for (; name[k] && k + 1 < n; k++) {
        char c = name[k];
        out[k] = (c == '/' || c == '\\' || c == ':' || (unsigned char)c < 0x20 || (k == 0 && c == '.')) ? '_' : c;
    }
    out[k] = '\0';
}

int cli_run(int argc, char **argv)
{
    static const cli_flag flags[] = { { "--input", 1 }, { "--threads", 1 }, { "--repeat", 1 }, { "--warmup", 1 },
                                      { "--output-dir", 1 }, { "--output-format", 1 }, { "--dim", 1 },
                                      { "--strategy", 1 }, { "--zero-unbound", 0 }, { "--format", 1 },
                                      { "--expect", 1 }, { "--rtol", 1 }, { "--atol", 1 },
                                      { "--help", 0 }, { "-h", 0 } };
    enum { F_INPUT, F_THREADS, F_REPEAT, F_WARMUP, F_OUTDIR, F_OUTFMT, F_DIM, F_STRATEGY, F_ZERO, F_FORMAT,
           F_EXPECT, F_RTOL, F_ATOL };
    cli_args args = { .argc = argc, .argv = argv, .i = 1, .command = "run" };
    const char *model = NULL, *outdir = NULL, *strategy = NULL, *inputs[MAX_INPUTS], *expects[MAX_INPUTS];
    int n_inputs = 0, n_expects = 0, zero = 0, json = 0, pb_out = 0, mismatches = 0, shape_mismatches = 0;
    double rtol = 1e-3, atol = 1e-7;
    int64_t threads = 0, repeat = 1, warmup = 1, dim = 1;
    int which;
    const char *v;
    for (;;) {
        int k = cli_next_arg(&args, flags, (int)(sizeof flags / sizeof flags[0]), &which, &v);
        if (k == CLI_ARG_END)
            break;
        if (k == CLI_ARG_BAD)
            return CLI_USAGE;
        if (k == CLI_ARG_FILE) {
            if (cli_take_file("run", "MODEL", &model, v))
                return CLI_USAGE;
        } else if (which == F_INPUT) {
            if (n_inputs == MAX_INPUTS || !strchr(v, '=')) {
                cli_error("--input: '%s' is not NAME=FILE%s", v, n_inputs == MAX_INPUTS ? " (or too many inputs)" : "");
                return CLI_USAGE;
            }
            size_t nl = (size_t)(strchr(v, '=') - v);
            for (int i = 0; i < n_inputs; i++)
                if (strncmp(inputs[i], v, nl + 1) == 0) {
                    cli_error("--input: '%.*s' is given twice", (int)nl, v);
                    return CLI_USAGE;
                }
            inputs[n_inputs++] = v;
        } else if (which == F_EXPECT) {
            if (n_expects == MAX_INPUTS || !strchr(v, '=')) {
                cli_error("--expect: '%s' is not NAME=FILE%s", v, n_expects == MAX_INPUTS ? " (or too many)" : "");
                return CLI_USAGE;
            }
            size_t nl = (size_t)(strchr(v, '=') - v);
            for (int i = 0; i < n_expects; i++)
                if (strncmp(expects[i], v, nl + 1) == 0) {
                    cli_error("--expect: '%.*s' is given twice", (int)nl, v);
                    return CLI_USAGE;
                }
            expects[n_expects++] = v;
        } else if (which == F_RTOL) {
            if (cli_parse_double("--rtol", v, 0, 1e9, &rtol))
                return CLI_USAGE;
        } else if (which == F_ATOL) {
            if (cli_parse_double("--atol", v, 0, 1e9, &atol))
                return CLI_USAGE;
        } else if (which == F_THREADS) {
            if (cli_parse_int("--threads", v, 1, 1024, &threads))
                return CLI_USAGE;
        } else if (which == F_REPEAT) {
            if (cli_parse_int("--repeat", v, 1, 100000000, &repeat))
                return CLI_USAGE;
        } else if (which == F_WARMUP) {
            if (cli_parse_int("--warmup", v, 0, 100000000, &warmup))
                return CLI_USAGE;
        } else if (which == F_DIM) {
            if (cli_parse_int("--dim", v, 1, INT64_C(1) << 30, &dim))
                return CLI_USAGE;
        } else if (which == F_OUTDIR) {
            outdir = v;
        } else if (which == F_OUTFMT) {
            if (strcmp(v, "npy") != 0 && strcmp(v, "pb") != 0) {
                cli_error("--output-format: '%s' is not npy or pb", v);
                return CLI_USAGE;
            }
            pb_out = strcmp(v, "pb") == 0;
        } else if (which == F_STRATEGY) {
            if (cli_check_strategy(v, 0) != CLI_OK) /* before loading, not after */
                return CLI_USAGE;
            strategy = v;
        } else if (which == F_ZERO) {
            zero = 1;
        } else if (which == F_FORMAT) {
            if (strcmp(v, "table") != 0 && strcmp(v, "json") != 0) {
                cli_error("--format: '%s' is not table or json", v);
                return CLI_USAGE;
            }
            json = strcmp(v, "json") == 0;
        } else {
            print_usage(stdout);
            return CLI_OK;
        }
    }
    if (!model) {
        cli_error("run: no MODEL given (see pebble run --help)");
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

    char err[4096];
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
    if (ends_with(model, ".onnx")) {
        pbl_onnx_options o = pbl_onnx_options_default();
        o.weights = &w;
        o.dim_value = dim;
        pbl_status s = pbl_graph_load_onnx(&g, model, &o, err, sizeof err);
        if (s != PBL_OK) {
            cli_error("%s", err);
            rc = s == PBL_ERR_IO || s == PBL_ERR_NOMEM ? CLI_FAIL : CLI_USAGE;
            goto done;
        }
    } else if ((rc = cli_model_load(model, 0, &g)) != CLI_OK) {
        goto done;
    }
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
            cli_error("--expect %.*s: not an output of %s (outputs: %s)", (int)(eq - expects[i]), expects[i], model, err);
            rc = CLI_USAGE;
            goto done;
        }
    }
    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = (int32_t)threads;
    eo.strategy = strategy;
    pbl_status s = pbl_exec_create(&e, g, &eo, err, sizeof err);
    if (s != PBL_OK) {
        cli_error("%s: %s", model, err);
        rc = s == PBL_ERR_UNSUPPORTED ? CLI_USAGE : CLI_FAIL;
        goto done;
    }
    if (w && (s = pbl_onnx_weights_bind(w, e, err, sizeof err)) != PBL_OK) {
        cli_error("%s: %s", model, err);
        rc = CLI_FAIL;
        goto done;
    }
    /* inputs from files */
    for (int i = 0; i < n_inputs; i++) {
        const char *eq = strchr(inputs[i], '=');
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)(eq - inputs[i]), inputs[i]);
        pbl_value iv = pbl_graph_find_value(g, name);
        pbl_value_info vi;
        if (iv == PBL_NONE || pbl_graph_value_info(g, iv, &vi) != PBL_OK || vi.kind != PBL_VALUE_INPUT) {
            cli_error("--input: '%s' is not an input of %s", name, model);
            rc = CLI_USAGE;
            goto done;
        }
        if ((rc = cli_tensor_read(eq + 1, &data[i])) != CLI_OK)
            goto done;
        char s1[96], s2[96];
        if (data[i].dtype != vi.dtype || pbl_shape_numel(&data[i].shape) != pbl_shape_numel(&vi.shape)) {
            cli_error("--input %s: %s holds %s %s but the input is %s %s", name, eq + 1, pbl_dtype_name(data[i].dtype),
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
            cli_error("%s: run: %s", model, pbl_exec_errmsg(e));
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
        printf("{\"model\": "), cli_json_string(stdout, model), printf(", \"outputs\": [");
    else
        printf("model %s: %d nodes, arena %llu bytes (naive %llu, unshared %llu, lower bound %llu)\n", model,
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
            printf("output %s %s %s:", name, pbl_shape_str(&vi.shape, sh, sizeof sh), pbl_dtype_name(vi.dtype));
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
                cli_error("--expect %s: %s is %s %s, the output %s %s", name, expects[i] + nl + 1, pbl_dtype_name(want.dtype),
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
                printf("expect %s: %lld of %lld elements outside rtol %g atol %g; max |got - want| %.3g at [%lld]\n", name,
                       (long long)bad, (long long)n, rtol, atol, maxd, (long long)worst);
            mismatches += bad > 0;
            pbl_onnx_tensor_free(&want);
        }
        if (outdir) {
            char fname[512], path[4096];
            file_name(name, fname, sizeof fname);
            snprintf(path, sizeof path, "%s/%s.%s", outdir, fname, pb_out ? "pb" : "npy");
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
               "\"naive_bytes\": %llu, \"unshared_bytes\": %llu, \"lower_bound\": %llu, \"nodes\": %d}\n",
               (long long)threads, (long long)warmup, (long long)repeat, mean, median, ms[0], t_load, rss, rss_source,
               (unsigned long long)st.arena_bytes, (unsigned long long)st.naive_bytes,
               (unsigned long long)st.unshared_bytes, (unsigned long long)st.lower_bound, (int)st.nodes);
    } else {
        printf("latency per run over %lld runs (after %lld warm-up): mean %.4f ms, median %.4f ms, min %.4f ms\n",
               (long long)repeat, (long long)warmup, mean, median, ms[0]);
        printf("load + plan + bind: %.2f ms; peak RSS %ld KiB (%s)\n", t_load, rss, rss_source);
    }
    if (rc == CLI_OK && mismatches) {
        cli_error("%s: %d output(s) differ from --expect", model, mismatches);
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
