/* Tensors in files for `pebble run`: ONNX TensorProto (.pb, through pebble/onnx.h) and NumPy
 * .npy (format 1.0-3.0, little-endian f4/f8/i4/i8, C order; read here, since it is four
 * lines of header and raw data); "-" reads standard input, either format, told by content. */
#define _POSIX_C_SOURCE 200809L /* fmemopen */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "graph/base/file_in.h"  /* private to the library; the CLI links it statically */
#include "graph/base/file_out.h"

static int ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n > e && strcasecmp(s + n - e, ext) == 0;
}

/* The value of 'key' in a Python dict literal: points at its first character, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    char q[64];
    snprintf(q, sizeof q, "'%s'", key);
    const char *p = strstr(h, q);
    if (!p)
        return NULL;
    p += strlen(q);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

/* Reads the .npy file open as f; messages start with path. Closes f. */
static int npy_read(FILE *f, const char *path, pbl_onnx_tensor *t)
{
    memset(t, 0, sizeof *t);
    int rc = CLI_USAGE;
    unsigned char pre[12];
    char *h = NULL;
    void *raw = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] < 1 || pre[6] > 3) {
        cli_error("%s: not a .npy file (no \\x93NUMPY magic of version 1-3)", path);
        goto done;
    }
    size_t hl = pre[8] | (size_t)pre[9] << 8;
    if (pre[6] >= 2) { /* versions 2 and 3: a 4-byte header length */
        if (fread(pre + 10, 1, 2, f) != 2) {
            cli_error("%s: truncated header", path);
            goto done;
        }
        hl = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hl > (1u << 20) || !(h = calloc(1, hl + 1)) || fread(h, 1, hl, f) != hl) {
        cli_error("%s: bad or truncated header", path);
        goto done;
    }
    const char *descr = dict_value(h, "descr"), *fo = dict_value(h, "fortran_order"), *sh = dict_value(h, "shape");
    if (!descr || !fo || !sh || *sh != '(') {
        cli_error("%s: the header lacks descr, fortran_order or shape", path);
        goto done;
    }
    if (strncmp(fo, "False", 5) != 0) {
        cli_error("%s: Fortran-ordered arrays are not supported (save with C order)", path);
        goto done;
    }
    int esize, is_float;
    if (strncmp(descr, "'<f4'", 5) == 0)
        esize = 4, is_float = 1;
    else if (strncmp(descr, "'<f8'", 5) == 0)
        esize = 8, is_float = 1;
    else if (strncmp(descr, "'<i4'", 5) == 0)
        esize = 4, is_float = 0;
    else if (strncmp(descr, "'<i8'", 5) == 0)
        esize = 8, is_float = 0;
    else {
        cli_error("%s: element type %.8s is not supported (<f4, <f8, <i4, <i8 are)", path, descr);
        goto done;
    }
    int64_t numel = 1;
    for (const char *p = sh + 1; *p && *p != ')';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 1 || d > (INT64_C(1) << 40) / numel || t->shape.ndim == PBL_MAX_DIMS) {
            cli_error("%s: shape %.40s is not supported (positive dims, rank at most %d)", path, sh, PBL_MAX_DIMS);
            goto done;
        }
        t->shape.dim[t->shape.ndim++] = d;
        numel *= d;
        p = end;
    }
    /* the data must be exactly what the shape says: compared with what is left of the file
     * before allocating (a header may promise 2^40 elements over a few bytes), and one byte
     * more means the header and the data disagree */
    uint64_t want = (uint64_t)numel * (uint64_t)esize;
    long at = ftell(f);
    if (at >= 0 && fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        if (end < 0 || fseek(f, at, SEEK_SET) != 0) {
            cli_error("%s: cannot seek: %s", path, strerror(errno));
            rc = CLI_FAIL;
            goto done;
        }
        if ((uint64_t)(end - at) != want) {
            char ss[96];
            cli_error("%s: the data is %s than its shape %s says (%llu bytes of data, %llu expected)", path,
                      (uint64_t)(end - at) < want ? "shorter" : "longer", pbl_shape_str(&t->shape, ss, sizeof ss),
                      (unsigned long long)(end - at), (unsigned long long)want);
            goto done;
        }
    }
    raw = malloc(want ? (size_t)want : 1);
    if (!raw) {
        cli_error("%s: out of memory (%llu bytes)", path, (unsigned long long)want);
        rc = CLI_FAIL;
        goto done;
    }
    if (fread(raw, (size_t)esize, (size_t)numel, f) != (size_t)numel) {
        cli_error("%s: the data is shorter than its shape says", path);
        goto done;
    }
    if (fgetc(f) != EOF) {
        cli_error("%s: the data is longer than its shape says (trailing bytes)", path);
        goto done;
    }
    t->dtype = is_float ? PBL_F32 : PBL_I32;
    t->bytes = (size_t)numel * 4;
    t->data = malloc(t->bytes);
    t->name = calloc(1, 1);
    if (!t->data || !t->name) {
        cli_error("%s: out of memory", path);
        rc = CLI_FAIL;
        goto done;
    }
    for (int64_t i = 0; i < numel; i++) {
        if (is_float) {
            float v;
            if (esize == 4)
                memcpy(&v, (char *)raw + 4 * i, 4);
            else {
                double d;
                memcpy(&d, (char *)raw + 8 * i, 8);
                v = (float)d;
            }
            ((float *)t->data)[i] = v;
        } else {
            int64_t v;
            if (esize == 4) {
                int32_t w;
                memcpy(&w, (char *)raw + 4 * i, 4);
                v = w;
            } else {
                memcpy(&v, (char *)raw + 8 * i, 8);
            }
            if (v < INT32_MIN || v > INT32_MAX) {
                cli_error("%s: element %lld is %lld, outside int32", path, (long long)i, (long long)v);
                goto done;
            }
            ((int32_t *)t->data)[i] = (int32_t)v;
        }
    }
    rc = CLI_OK;
done:
    if (rc != CLI_OK)
        pbl_onnx_tensor_free(t);
    free(raw);
    free(h);
    fclose(f);
    return rc;
}

/* A tensor from standard input: .npy when it starts with NumPy's magic, else a TensorProto. */
static int stdin_tensor_read(pbl_onnx_tensor *t)
{
    memset(t, 0, sizeof *t);
    const unsigned char *data;
    size_t len;
    int rc = cli_stdin_read(&data, &len);
    if (rc != CLI_OK)
        return rc;
    if (len >= 6 && memcmp(data, "\x93NUMPY", 6) == 0) {
        FILE *f = fmemopen((void *)data, len, "rb");
        if (!f) {
            cli_error("%s: %s", CLI_STDIN_NAME, strerror(errno));
            return CLI_FAIL;
        }
        return npy_read(f, CLI_STDIN_NAME, t);
    }
    char err[2048];
    pbl_status s = pbl_onnx_tensor_parse(data, len, CLI_STDIN_NAME, t, err, sizeof err);
    if (s != PBL_OK) {
        cli_error("%s", err);
        return s == PBL_ERR_NOMEM ? CLI_FAIL : CLI_USAGE;
    }
    return CLI_OK;
}

int cli_tensor_read(const char *path, pbl_onnx_tensor *t)
{
    if (cli_is_stdio(path))
        return stdin_tensor_read(t);
    if (ends_with(path, ".npy")) {
        FILE *f;
        char err[2048];
        pbl_status s = pbl__file_in_open(path, "a .npy tensor", PBL__FILE_IN_MAX_BINARY, &f, NULL, err, sizeof err);
        if (s != PBL_OK) {
            memset(t, 0, sizeof *t);
            cli_error("%s", err);
            return s == PBL_ERR_IO ? CLI_FAIL : CLI_USAGE;
        }
        return npy_read(f, path, t);
    }
    if (!ends_with(path, ".pb")) {
        cli_error("%s: unknown tensor file type (.pb or .npy)", path);
        return CLI_USAGE;
    }
    char err[2048];
    pbl_status s = pbl_onnx_tensor_read(path, t, err, sizeof err);
    if (s != PBL_OK) {
        cli_error("%s", err);
        return s == PBL_ERR_IO || s == PBL_ERR_NOMEM ? CLI_FAIL : CLI_USAGE;
    }
    return CLI_OK;
}

int cli_tensor_write(const char *path, const pbl_onnx_tensor *t)
{
    if (ends_with(path, ".pb")) {
        char err[2048];
        if (pbl_onnx_tensor_write(path, t, err, sizeof err) != PBL_OK) {
            cli_error("%s", err);
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    char header[256];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     t->dtype == PBL_F32 ? "<f4" : "<i4");
    for (int32_t k = 0; k < t->shape.ndim; k++)
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", (long long)t->shape.dim[k],
                      k + 1 < t->shape.ndim ? " " : "");
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    /* the magic, version and length (10 bytes) plus the header end on a multiple of 64 */
    int total = (10 + n + 1 + 63) / 64 * 64;
    while (10 + n + 1 < total)
        header[n++] = ' ';
    header[n++] = '\n';
    /* whole or nothing, as the .pb writer: a symlink's target is replaced, a FIFO written in place */
    char err[2048];
    pbl__file_out o;
    if (pbl__file_out_open(&o, path, NULL, err, sizeof err) != PBL_OK) {
        cli_error("%s", err);
        return CLI_FAIL;
    }
    unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8) };
    errno = 0;
    int ok = fwrite(pre, 1, 10, o.f) == 10 && fwrite(header, 1, (size_t)n, o.f) == (size_t)n &&
             fwrite(t->data, 1, t->bytes, o.f) == t->bytes;
    int rc = CLI_OK;
    if (!ok) {
        cli_error("%s: writing: %s", path, strerror(errno ? errno : EIO));
        rc = CLI_FAIL;
    }
    if (pbl__file_out_close(&o, ok, err, sizeof err) != PBL_OK) {
        cli_error("%s", err);
        rc = CLI_FAIL;
    }
    return rc;
}
