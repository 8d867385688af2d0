/*
 * ONNX backend node tests (Debian's libonnx-testdata: DIR/test_NAME/model.onnx with
 * test_data_set_N/input_K.pb and output_K.pb) run through pebble: load, plan, run, compare.
 *
 *     onnx_conformance [--data DIR ...] [--min-pass N] [--verbose]
 *
 * DIR defaults to libonnx-testdata's node, pytorch-converted, pytorch-operator and simple
 * suites (its "real" suite holds only download stubs).
 *
 * Each test is one of:
 *   passed       every output of every data set within tolerance;
 *   failed       loaded and ran but an output differs, or pebble refused a model it claims
 *                to support (any status but PBL_ERR_UNSUPPORTED) — printed with the reason;
 *   unsupported  pebble said PBL_ERR_UNSUPPORTED: an op it does not map, an attribute value it
 *                cannot honour, or an op that is only planned (no CPU kernel yet).
 * Tolerance: |got − want| ≤ atol + rtol·|want| with rtol 1e-3, atol 1e-7 — the defaults of
 * ONNX's own backend test loader (onnx/backend/test/loader/__init__.py, onnx 1.23; a test's
 * data.json may override them there, which this program ignores). Outputs must also match
 * in shape and dtype. Exit status: 1 when fewer than N tests passed in all (--min-pass), else 0;
 * 77 (skipped) when no suite is installed.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pebble/pebble.h"

#define RTOL 1e-3
#define ATOL 1e-7

enum { PASSED, FAILED, UNSUPPORTED };

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted subdirectory names of dir starting with prefix; returns the count (list malloc'd). */
static int list_dirs(const char *dir, const char *prefix, char ***out)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    char **v = NULL;
    *out = NULL;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = realloc(v, (size_t)cap * sizeof *v);
            if (!v)
                break;
        }
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (v)
        qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return v ? n : 0;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* The graph's input variables in creation order (the model's input order). */
static int graph_inputs(const pbl_graph *g, pbl_value *in, int max)
{
    int k = 0;
    for (pbl_value v = 0; v < pbl_graph_value_count(g) && k < max; v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) == PBL_OK && vi.kind == PBL_VALUE_INPUT)
            in[k++] = v;
    }
    return k;
}

/* Runs one data set; returns PASSED or FAILED with the reason in why. */
static int run_set(const pbl_graph *g, pbl_exec *e, const char *set, char *why, size_t wl)
{
    char path[4096], err[2048];
    pbl_value in[64];
    int n_in = graph_inputs(g, in, 64);
    for (int k = 0;; k++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", set, k);
        if (!file_exists(path)) {
            if (k != n_in) {
                snprintf(why, wl, "%s: %d input files for %d graph inputs", set, k, n_in);
                return FAILED;
            }
            break;
        }
        if (k >= n_in) {
            snprintf(why, wl, "%s: more input files than the graph's %d inputs", set, n_in);
            return FAILED;
        }
        pbl_onnx_tensor t;
        pbl_status s = pbl_onnx_tensor_read(path, &t, err, sizeof err);
        if (s != PBL_OK) {
            snprintf(why, wl, "%s", err);
            return s == PBL_ERR_UNSUPPORTED ? UNSUPPORTED : FAILED;
        }
        s = pbl_exec_write(e, in[k], t.data, t.bytes);
        pbl_onnx_tensor_free(&t);
        if (s != PBL_OK) {
            snprintf(why, wl, "input_%d: %s", k, pbl_exec_errmsg(e));
            return FAILED;
        }
    }
    if (pbl_exec_run(e) != PBL_OK) {
        snprintf(why, wl, "run: %s", pbl_exec_errmsg(e));
        return FAILED;
    }
    int n_out = pbl_graph_output_count(g);
    for (int k = 0; k < n_out; k++) {
        snprintf(path, sizeof path, "%s/output_%d.pb", set, k);
        pbl_onnx_tensor t;
        pbl_status s = pbl_onnx_tensor_read(path, &t, err, sizeof err);
        if (s != PBL_OK) {
            snprintf(why, wl, "%s", err);
            return s == PBL_ERR_UNSUPPORTED ? UNSUPPORTED : FAILED;
        }
        const char *name;
        pbl_value v;
        pbl_value_info vi;
        pbl_graph_output_at(g, k, &name, &v);
        pbl_graph_value_info(g, v, &vi);
        char s1[96], s2[96];
        if (vi.dtype != t.dtype || pbl_shape_numel(&vi.shape) != pbl_shape_numel(&t.shape) ||
            (vi.shape.ndim != t.shape.ndim && !(vi.shape.ndim == 0 && t.shape.ndim == 0))) {
            snprintf(why, wl, "output '%s': pebble gives %s %s, expected %s %s", name, pbl_dtype_name(vi.dtype),
                     pbl_shape_str(&vi.shape, s1, sizeof s1), pbl_dtype_name(t.dtype), pbl_shape_str(&t.shape, s2, sizeof s2));
            pbl_onnx_tensor_free(&t);
            return FAILED;
        }
        if (!pbl_shape_equal(&vi.shape, &t.shape)) {
            snprintf(why, wl, "output '%s': shape %s, expected %s", name, pbl_shape_str(&vi.shape, s1, sizeof s1),
                     pbl_shape_str(&t.shape, s2, sizeof s2));
            pbl_onnx_tensor_free(&t);
            return FAILED;
        }
        void *got = malloc(t.bytes ? t.bytes : 1);
        int rc = PASSED;
        if (!got || pbl_exec_read(e, v, got, t.bytes) != PBL_OK) {
            snprintf(why, wl, "output '%s': cannot read it: %s", name, pbl_exec_errmsg(e));
            rc = FAILED;
        } else {
            int64_t n = pbl_shape_numel(&t.shape);
            for (int64_t i = 0; i < n && rc == PASSED; i++) {
                double a, b;
                if (t.dtype == PBL_F32)
                    a = ((float *)got)[i], b = ((float *)t.data)[i];
                else
                    a = ((int32_t *)got)[i], b = ((int32_t *)t.data)[i];
                int ok = fabs(a - b) <= ATOL + RTOL * fabs(b) || (isnan(a) && isnan(b)) || a == b;
                if (!ok) {
                    snprintf(why, wl, "%s: output '%s'[%lld] is %.9g, expected %.9g (rtol %g, atol %g)", set, name,
                             (long long)i, a, b, RTOL, ATOL);
                    rc = FAILED;
                }
            }
        }
        free(got);
        pbl_onnx_tensor_free(&t);
        if (rc != PASSED)
            return rc;
    }
    return PASSED;
}

static int run_test(const char *dir, char *why, size_t wl)
{
    char path[4096], err[2048];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    pbl_graph *g = NULL;
    pbl_onnx_weights *w = NULL;
    pbl_onnx_options o = pbl_onnx_options_default();
    o.weights = &w;
    pbl_status s = pbl_graph_load_onnx(&g, path, &o, err, sizeof err);
    if (s != PBL_OK) {
        snprintf(why, wl, "load: %s: %s", pbl_status_name(s), err);
        return s == PBL_ERR_UNSUPPORTED ? UNSUPPORTED : FAILED;
    }
    pbl_exec *e = NULL;
    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = 1;
    eo.poison = 1; /* a planning bug shows as a wrong result */
    s = pbl_exec_create(&e, g, &eo, err, sizeof err);
    int rc = PASSED;
    if (s != PBL_OK) {
        snprintf(why, wl, "%s: %s", s == PBL_ERR_UNSUPPORTED ? "planned only" : pbl_status_name(s), err);
        rc = s == PBL_ERR_UNSUPPORTED ? UNSUPPORTED : FAILED;
    } else if ((s = pbl_onnx_weights_bind(w, e, err, sizeof err)) != PBL_OK) {
        snprintf(why, wl, "bind: %s", err);
        rc = FAILED;
    } else {
        char **sets;
        int n = list_dirs(dir, "test_data_set_", &sets);
        if (n <= 0) {
            snprintf(why, wl, "no test_data_set_* in %s", dir);
            rc = FAILED;
        }
        for (int i = 0; i < n && rc == PASSED; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, sets[i]);
            rc = run_set(g, e, path, why, wl);
        }
        free_list(sets, n);
    }
    pbl_exec_destroy(e);
    pbl_onnx_weights_destroy(w);
    pbl_graph_destroy(g);
    return rc;
}

int main(int argc, char **argv)
{
    static const char *const dflt[] = { "/usr/share/libonnx-testdata/data/node",
                                        "/usr/share/libonnx-testdata/data/pytorch-converted",
                                        "/usr/share/libonnx-testdata/data/pytorch-operator",
                                        "/usr/share/libonnx-testdata/data/simple" };
    const char *data[16];
    int n_data = 0;
    long min_pass = -1;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc && n_data < 16)
            data[n_data++] = argv[++i];
        else if (strcmp(argv[i], "--min-pass") == 0 && i + 1 < argc)
            min_pass = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = 1;
        else {
            fprintf(stderr, "usage: onnx_conformance [--data DIR ...] [--min-pass N] [--verbose]\n");
            return 2;
        }
    }
    if (n_data == 0)
        for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++)
            data[n_data++] = dflt[i];
    int total[3] = { 0 }, suites = 0;
    static const char *const label[] = { "PASS", "FAIL", "UNSUPPORTED" };
    for (int d = 0; d < n_data; d++) {
        char **tests;
        int n = list_dirs(data[d], "test_", &tests);
        if (n < 0) {
            printf("missing: %s\n", data[d]);
            continue;
        }
        suites++;
        int count[3] = { 0 };
        for (int i = 0; i < n; i++) {
            char dir[4096], why[4096] = "";
            snprintf(dir, sizeof dir, "%s/%s", data[d], tests[i]);
            int rc = run_test(dir, why, sizeof why);
            count[rc]++;
            total[rc]++;
            if (rc == FAILED || verbose)
                printf("%-11s %s%s%s\n", label[rc], tests[i], why[0] ? ": " : "", why);
        }
        free_list(tests, n);
        printf("%s: %d passed, %d failed, %d unsupported, of %d\n", data[d], count[PASSED], count[FAILED],
               count[UNSUPPORTED], n);
    }
    if (suites == 0) {
        printf("SKIP: no ONNX test suite found (install libonnx-testdata)\n");
        return 77;
    }
    printf("onnx conformance: %d passed, %d failed, %d unsupported, of %d (tolerance rtol %g, atol %g)\n",
           total[PASSED], total[FAILED], total[UNSUPPORTED], total[0] + total[1] + total[2], RTOL, ATOL);
    if (min_pass >= 0 && total[PASSED] < min_pass) {
        printf("FAIL: %d passed, fewer than the committed threshold %ld\n", total[PASSED], min_pass);
        return 1;
    }
    return 0;
}
