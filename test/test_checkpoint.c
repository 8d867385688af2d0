/* pbl_exec_save / pbl_exec_load: exact round trips (tensors, runtime scalars, the run
 * counter), the documented file layout, that a version-1 file of the old library still loads,
 * and that every kind of bad file (flipped byte, truncation, other shapes, missing or extra
 * tensors, a NaN or infinite scalar, unreadable path) is refused with its status while the
 * executor keeps its values. Saving
 * goes where the path leads: through a symbolic link to its target, into a FIFO or a device
 * in place, keeping a file's mode. */
#define _XOPEN_SOURCE 700 /* mkdtemp, mkfifo, mknod, symlink, readlink */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h> /* makedev */
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "graph/base/file_out.h" /* the writer itself, for a write caught half-way */
#include "pebble/pebble.h"

/* A small graph with every kind of variable a checkpoint cares about: a parameter bound to a
 * caller buffer (w), one in executor storage (b), a state variable (s), and an input (x)
 * that must not be saved.
 *
 *     y = (x + w) + b      x, w: [2, 3]   b: [3]
 *     z = relu(s)          s: [4]
 */
typedef struct fixture {
    pbl_graph *g;
    pbl_exec  *e;
    pbl_value  x, w, b, s, extra, lr, step;
    float      w_data[6];
} fixture;

typedef struct variant {
    int64_t w_rows, w_cols; /* w's shape; the file in the tests is [2, 3] */
    int     with_state;     /* graph has s */
    int     with_extra;     /* graph has one more parameter, "extra" */
    int     with_scalars;   /* graph has runtime scalars "lr" (0.5) and "step" (1), with readers */
} variant;

static const variant standard = { 2, 3, 1, 0, 0 };

static char tmpdir[256];

static void fixture_make(fixture *f, variant v)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(pbl_graph_create(&f->g, NULL), PBL_OK);
    pbl_graph *g = f->g;
    f->x = pbl_input(g, "x", PBL_SHAPE(v.w_rows, v.w_cols));
    f->w = pbl_param(g, "w", PBL_SHAPE(v.w_rows, v.w_cols));
    f->b = pbl_param(g, "b", PBL_SHAPE(v.w_cols));
    pbl_value y = pbl_add(g, pbl_add(g, f->x, f->w), f->b);
    assert_int_equal(pbl_graph_set_output(g, "y", y), PBL_OK);
    f->s = PBL_NONE;
    if (v.with_state) {
        assert_int_equal(pbl_graph_add_variable(g, "s", PBL_VALUE_STATE, PBL_F32, PBL_SHAPE(4),
                                                &f->s), PBL_OK);
        assert_int_equal(pbl_graph_set_output(g, "z", pbl_relu(g, f->s)), PBL_OK);
    }
    f->extra = PBL_NONE;
    if (v.with_extra) {
        f->extra = pbl_param(g, "extra", PBL_SHAPE(2));
        assert_int_equal(pbl_graph_set_output(g, "e", pbl_relu(g, f->extra)), PBL_OK);
    }
    f->lr = f->step = PBL_NONE;
    if (v.with_scalars) {
        assert_int_equal(pbl_graph_add_scalar(g, "lr", 0.5, &f->lr), PBL_OK);
        assert_int_equal(pbl_graph_add_scalar(g, "step", 1.0, &f->step), PBL_OK);
        assert_int_equal(pbl_graph_set_output(g, "r", pbl_add(g, f->lr, f->step)), PBL_OK);
    }
    if (pbl_graph_build_status(g) != PBL_OK)
        fail_msg("building the test graph: %s", pbl_graph_errmsg(g));

    pbl_exec_options o = pbl_exec_options_default();
    char err[256] = "";
    if (pbl_exec_create(&f->e, g, &o, err, sizeof err) != PBL_OK)
        fail_msg("pbl_exec_create: %s", err);
    size_t w_bytes = (size_t)(v.w_rows * v.w_cols) * sizeof(float);
    assert_true(w_bytes <= sizeof f->w_data);
    assert_int_equal(pbl_exec_bind(f->e, f->w, f->w_data, w_bytes), PBL_OK);
}

static void fixture_free(fixture *f)
{
    pbl_exec_destroy(f->e);
    pbl_graph_destroy(f->g);
}

/* Values: w, b, s set from one seed, so two seeds give two distinguishable states. Odd bit
 * patterns (negative zero, a denormal, a NaN payload) check the copy is bit-exact. */
typedef struct values {
    float w[6], b[3], s[4];
} values;

static values values_from(int seed)
{
    values v;
    for (int i = 0; i < 6; i++)
        v.w[i] = (float)(seed * 10 + i) * 0.37f - 1.0f;
    for (int i = 0; i < 3; i++)
        v.b[i] = (float)(seed - i) * 1.5f;
    for (int i = 0; i < 4; i++)
        v.s[i] = (float)(seed * i) * 0.25f;
    uint32_t neg_zero = 0x80000000u, denormal = 0x00000123u, nan_payload = 0x7fc01234u;
    memcpy(&v.w[0], &neg_zero, 4);
    memcpy(&v.b[1], &denormal, 4);
    memcpy(&v.s[3], &nan_payload, 4);
    v.s[0] = (float)seed;
    return v;
}

static void put_values(fixture *f, const values *v)
{
    memcpy(f->w_data, v->w, sizeof v->w);
    assert_int_equal(pbl_exec_write(f->e, f->b, v->b, sizeof v->b), PBL_OK);
    assert_int_equal(pbl_exec_write(f->e, f->s, v->s, sizeof v->s), PBL_OK);
}

/* Checks the executor holds exactly v (w through the bound buffer and through a read). */
static void expect_values(fixture *f, const values *v)
{
    values got;
    assert_int_equal(pbl_exec_read(f->e, f->w, got.w, sizeof got.w), PBL_OK);
    assert_int_equal(pbl_exec_read(f->e, f->b, got.b, sizeof got.b), PBL_OK);
    assert_int_equal(pbl_exec_read(f->e, f->s, got.s, sizeof got.s), PBL_OK);
    assert_memory_equal(f->w_data, v->w, sizeof v->w);
    assert_memory_equal(got.w, v->w, sizeof v->w);
    assert_memory_equal(got.b, v->b, sizeof v->b);
    assert_memory_equal(got.s, v->s, sizeof v->s);
}

static void path_in_tmp(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

/* Files in tmpdir whose names hold ".tmp." (a save's temporary, left behind). */
static int temporaries_left(void)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return p;
}

static void spill(const char *path, const unsigned char *p, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Saves the standard fixture holding values_from(1) to `name` in tmpdir. */
static void save_standard(const char *name, char *path, size_t n)
{
    fixture f;
    fixture_make(&f, standard);
    values v = values_from(1);
    put_values(&f, &v);
    path_in_tmp(path, n, name);
    if (pbl_exec_save(f.e, path) != PBL_OK)
        fail_msg("pbl_exec_save: %s", pbl_exec_errmsg(f.e));
    fixture_free(&f);
}

/* Gives every variable of f distinct values (from `seed`) through write and bind. */
static void fill_variant(fixture *f, variant var, int seed, float *b, float *s, float *extra)
{
    const int64_t n_w = var.w_rows * var.w_cols;
    for (int64_t i = 0; i < n_w; i++)
        f->w_data[i] = (float)(seed * 100 + i) * 0.5f;
    for (int64_t i = 0; i < var.w_cols; i++)
        b[i] = (float)(seed * 10 - i);
    assert_int_equal(pbl_exec_write(f->e, f->b, b, (size_t)var.w_cols * sizeof *b), PBL_OK);
    for (int i = 0; i < 4; i++)
        s[i] = (float)(seed + i) * 0.125f;
    if (var.with_state)
        assert_int_equal(pbl_exec_write(f->e, f->s, s, 4 * sizeof *s), PBL_OK);
    extra[0] = (float)seed;
    extra[1] = -(float)seed;
    if (var.with_extra)
        assert_int_equal(pbl_exec_write(f->e, f->extra, extra, 2 * sizeof *extra), PBL_OK);
    if (var.with_scalars) {
        assert_int_equal(pbl_exec_set_scalar(f->e, "lr", seed * 0.25), PBL_OK);
        assert_int_equal(pbl_exec_set_scalar(f->e, "step", seed + 10), PBL_OK);
    }
}

/* Loads `path` into a fixture of variant `var` and expects status `want`, a message naming
 * the path and containing each of the NULL-terminated strings, and every variable exactly
 * as it was before the load. */
static void expect_load_fails(const char *path, variant var, pbl_status want, ...)
{
    fixture f;
    fixture_make(&f, var);
    float b[3], s[4], extra[2];
    fill_variant(&f, var, 2, b, s, extra);
    float w_before[6], got[6];
    memcpy(w_before, f.w_data, sizeof w_before);
    const size_t w_bytes = (size_t)(var.w_rows * var.w_cols) * sizeof(float);
    const uint64_t runs_before = pbl_exec_run_count(f.e);

    pbl_status st = pbl_exec_load(f.e, path);
    const char *msg = pbl_exec_errmsg(f.e);
    print_message("    load %s -> %s: %s\n", strrchr(path, '/') + 1, pbl_status_name(st), msg);
    assert_int_equal(st, want);
    assert_non_null(strstr(msg, path));
    va_list ap;
    va_start(ap, want);
    for (const char *want_text; (want_text = va_arg(ap, const char *));)
        if (!strstr(msg, want_text))
            fail_msg("message '%s' does not contain '%s'", msg, want_text);
    va_end(ap);

    /* unchanged: the bound buffer, and every variable as the executor reads it */
    assert_memory_equal(f.w_data, w_before, w_bytes);
    assert_int_equal(pbl_exec_read(f.e, f.w, got, w_bytes), PBL_OK);
    assert_memory_equal(got, w_before, w_bytes);
    assert_int_equal(pbl_exec_read(f.e, f.b, got, (size_t)var.w_cols * sizeof *got), PBL_OK);
    assert_memory_equal(got, b, (size_t)var.w_cols * sizeof *got);
    if (var.with_state) {
        assert_int_equal(pbl_exec_read(f.e, f.s, got, 4 * sizeof *got), PBL_OK);
        assert_memory_equal(got, s, 4 * sizeof *got);
    }
    if (var.with_extra) {
        assert_int_equal(pbl_exec_read(f.e, f.extra, got, 2 * sizeof *got), PBL_OK);
        assert_memory_equal(got, extra, 2 * sizeof *got);
    }
    if (var.with_scalars) {
        double lr = 0, step = 0;
        assert_int_equal(pbl_exec_get_scalar(f.e, "lr", &lr), PBL_OK);
        assert_int_equal(pbl_exec_get_scalar(f.e, "step", &step), PBL_OK);
        assert_true(lr == 0.5 && step == 12.0);
    }
    assert_int_equal(pbl_exec_run_count(f.e), runs_before);
    fixture_free(&f);
}

/* ---- tests ----------------------------------------------------------------------------- */

static void round_trip_is_exact(void **state)
{
    char path[512];
    fixture f;
    fixture_make(&f, standard);
    values v1 = values_from(1), v2 = values_from(2);
    put_values(&f, &v1);
    path_in_tmp(path, sizeof path, "round.ckpt");
    if (pbl_exec_save(f.e, path) != PBL_OK)
        fail_msg("pbl_exec_save: %s", pbl_exec_errmsg(f.e));

    put_values(&f, &v2);
    expect_values(&f, &v2);
    if (pbl_exec_load(f.e, path) != PBL_OK)
        fail_msg("pbl_exec_load: %s", pbl_exec_errmsg(f.e));
    expect_values(&f, &v1);
    print_message("    saved values 1, wrote values 2, loaded: all 13 floats bit-identical to 1\n");

    /* A second executor over another graph of the same variables loads it too. */
    fixture f2;
    fixture_make(&f2, standard);
    assert_int_equal(pbl_exec_load(f2.e, path), PBL_OK);
    expect_values(&f2, &v1);
    fixture_free(&f2);
    fixture_free(&f);
}

static void file_layout_is_as_documented(void **state)
{
    char path[512];
    save_standard("layout.ckpt", path, sizeof path);
    size_t len;
    unsigned char *p = slurp(path, &len);

    /* records w [2,3], b [3], s [4]; the input x is not saved */
    size_t want = 8 + 4 + 4;
    want += 4 + 1 + 4 + 4 + 2 * 8 + 8 + 6 * 4;
    want += 4 + 1 + 4 + 4 + 1 * 8 + 8 + 3 * 4;
    want += 4 + 1 + 4 + 4 + 1 * 8 + 8 + 4 * 4;
    want += 8 + 4; /* version 2: run counter, no scalars */
    want += 4;
    print_message("    file is %zu bytes, layout predicts %zu\n", len, want);
    assert_int_equal(len, want);
    assert_memory_equal(p, "PBLCKPT\0", 8);
    assert_int_equal(le32(p + 8), 2);  /* version */
    assert_int_equal(le32(p + 12), 3); /* tensors */
    assert_int_equal(le32(p + 16), 1); /* first name's length */
    assert_int_equal(p[20], 'w');
    assert_int_equal(le32(p + 21), PBL_F32);
    assert_int_equal(le32(p + 25), 2); /* ndim */
    assert_int_equal(le32(p + 29), 2); /* dims, low halves of i64 */
    assert_int_equal(le32(p + 37), 3);
    assert_int_equal(le32(p + 45), 24); /* nbytes */
    values v = values_from(1);
    assert_memory_equal(p + 53, v.w, sizeof v.w); /* little-endian host: raw floats */
    assert_int_equal(le32(p + len - 16), 0); /* runs, low and high halves: never run */
    assert_int_equal(le32(p + len - 12), 0);
    assert_int_equal(le32(p + len - 8), 0);  /* scalars */

    uLong crc = crc32(crc32(0L, Z_NULL, 0), p, (uInt)(len - 4));
    print_message("    trailing CRC %08x, zlib crc32 of the rest %08lx\n", le32(p + len - 4), crc);
    assert_int_equal(le32(p + len - 4), (uint32_t)crc);
    free(p);
}

static void flipped_byte_is_a_checksum_error(void **state)
{
    char path[512], bad[512];
    save_standard("flip.ckpt", path, sizeof path);
    size_t len;
    unsigned char *p = slurp(path, &len);
    /* one byte in a name, two in tensor data, one in the CRC itself */
    const size_t where[] = { 20, 60, len - 18, len - 1 };
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        p[where[i]] ^= 0x40;
        snprintf(bad, sizeof bad, "%s/flip%zu.ckpt", tmpdir, where[i]);
        spill(bad, p, len);
        expect_load_fails(bad, standard, PBL_ERR_CHECKSUM, "CRC", NULL);
        p[where[i]] ^= 0x40;
    }
    free(p);
}

static void truncation_is_a_format_error(void **state)
{
    char path[512], bad[512];
    save_standard("trunc.ckpt", path, sizeof path);
    size_t len;
    unsigned char *p = slurp(path, &len);
    const size_t cut[] = { 0, 7, 19, 20, 40, len / 2, len - 5, len - 1 };
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        snprintf(bad, sizeof bad, "%s/trunc%zu.ckpt", tmpdir, cut[i]);
        spill(bad, p, cut[i]);
        expect_load_fails(bad, standard, PBL_ERR_FORMAT, NULL);
    }
    free(p);
}

static void bad_magic_and_version_are_format_errors(void **state)
{
    char path[512], bad[512];
    save_standard("magic.ckpt", path, sizeof path);
    size_t len;
    unsigned char *p = slurp(path, &len);

    p[0] = 'X';
    path_in_tmp(bad, sizeof bad, "badmagic.ckpt");
    spill(bad, p, len);
    expect_load_fails(bad, standard, PBL_ERR_FORMAT, "magic", NULL);
    p[0] = 'P';

    /* version 3 with a CRC that matches: a well-formed file of a version we cannot read */
    p[8] = 3;
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)(len - 4));
    for (int i = 0; i < 4; i++)
        p[len - 4 + i] = (unsigned char)(crc >> (8 * i));
    path_in_tmp(bad, sizeof bad, "version3.ckpt");
    spill(bad, p, len);
    expect_load_fails(bad, standard, PBL_ERR_FORMAT, "version 3", NULL);
    p[8] = 0; /* there never was a version 0 */
    crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)(len - 4));
    for (int i = 0; i < 4; i++)
        p[len - 4 + i] = (unsigned char)(crc >> (8 * i));
    path_in_tmp(bad, sizeof bad, "version0.ckpt");
    spill(bad, p, len);
    expect_load_fails(bad, standard, PBL_ERR_FORMAT, "version 0", NULL);
    free(p);
}

static void other_shape_is_a_shape_error(void **state)
{
    char path[512];
    save_standard("shape.ckpt", path, sizeof path);
    const variant transposed = { 3, 2, 1, 0, 0 };
    expect_load_fails(path, transposed, PBL_ERR_SHAPE, "'w'", "[2, 3]", "[3, 2]", NULL);
}

static void missing_or_extra_tensor_is_not_found(void **state)
{
    char path[512];
    save_standard("names.ckpt", path, sizeof path);
    const variant more_params = { 2, 3, 1, 1, 0 };
    expect_load_fails(path, more_params, PBL_ERR_NOT_FOUND, "'extra'", NULL);
    const variant no_state = { 2, 3, 0, 0, 0 };
    expect_load_fails(path, no_state, PBL_ERR_NOT_FOUND, "'s'", NULL);
}

static void unreadable_and_unwritable_paths_are_io_errors(void **state)
{
    char path[512], existing[512];
    path_in_tmp(path, sizeof path, "does-not-exist.ckpt");
    expect_load_fails(path, standard, PBL_ERR_IO, "No such file", NULL);

    fixture f;
    fixture_make(&f, standard);
    values v = values_from(1);
    put_values(&f, &v);

    path_in_tmp(path, sizeof path, "no-such-dir/x.ckpt");
    assert_int_equal(pbl_exec_save(f.e, path), PBL_ERR_IO);
    print_message("    save -> %s\n", pbl_exec_errmsg(f.e));
    assert_non_null(strstr(pbl_exec_errmsg(f.e), path));
    assert_non_null(strstr(pbl_exec_errmsg(f.e), "No such file"));

    /* Saving over a directory fails at the rename: the temporary file must not be left. */
    path_in_tmp(path, sizeof path, "a-dir");
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(pbl_exec_save(f.e, path), PBL_ERR_IO);
    print_message("    save -> %s\n", pbl_exec_errmsg(f.e));
    assert_non_null(strstr(pbl_exec_errmsg(f.e), path));
    assert_int_equal(temporaries_left(), 0);
    assert_int_equal(rmdir(path), 0);

    /* Saving over an existing checkpoint replaces it whole. */
    save_standard("existing.ckpt", existing, sizeof existing);
    values v3 = values_from(3);
    put_values(&f, &v3);
    assert_int_equal(pbl_exec_save(f.e, existing), PBL_OK);
    put_values(&f, &v);
    assert_int_equal(pbl_exec_load(f.e, existing), PBL_OK);
    expect_values(&f, &v3);
    fixture_free(&f);
}

/* Saves v through a fresh fixture to path; returns the status, the message in msg. */
static pbl_status save_values(const char *path, int seed, char *msg, size_t n)
{
    fixture f;
    fixture_make(&f, standard);
    values v = values_from(seed);
    put_values(&f, &v);
    pbl_status s = pbl_exec_save(f.e, path);
    snprintf(msg, n, "%s", pbl_exec_errmsg(f.e));
    fixture_free(&f);
    return s;
}

/* Loads path into a fresh fixture and checks it holds values_from(seed). */
static void expect_file_holds(const char *path, int seed)
{
    fixture f;
    fixture_make(&f, standard);
    if (pbl_exec_load(f.e, path) != PBL_OK)
        fail_msg("pbl_exec_load('%s'): %s", path, pbl_exec_errmsg(f.e));
    values v = values_from(seed);
    expect_values(&f, &v);
    fixture_free(&f);
}

/* A save through a symbolic link (a relative one, as `ln -s` makes) replaces the file it
 * names; the link stays a link to the same name. */
static void save_through_a_symlink_writes_its_target(void **state)
{
    char real[512], link[512], msg[512], text[512];
    save_standard("real.ckpt", real, sizeof real);
    path_in_tmp(link, sizeof link, "link.ckpt");
    assert_int_equal(symlink("real.ckpt", link), 0);

    if (save_values(link, 3, msg, sizeof msg) != PBL_OK)
        fail_msg("pbl_exec_save through a link: %s", msg);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    ssize_t len = readlink(link, text, sizeof text - 1);
    assert_true(len > 0);
    text[len] = '\0';
    assert_string_equal(text, "real.ckpt");
    expect_file_holds(real, 3);
    assert_int_equal(temporaries_left(), 0);
    print_message("    saved through link.ckpt -> real.ckpt: the link stays, real.ckpt holds "
                  "the new values\n");
    assert_int_equal(unlink(link), 0);
}

/* A save over an existing file keeps its permission bits: a private checkpoint (0600) does
 * not become readable by everyone (0644 under the usual umask). */
static void save_keeps_the_files_mode(void **state)
{
    char path[512], msg[512];
    save_standard("private.ckpt", path, sizeof path);
    assert_int_equal(chmod(path, 0600), 0);
    mode_t old_mask = umask(022); /* a new file would be 0644: the test can tell */
    pbl_status s = save_values(path, 4, msg, sizeof msg);
    umask(old_mask);
    if (s != PBL_OK)
        fail_msg("pbl_exec_save over a 0600 file: %s", msg);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    print_message("    mode after saving over a 0600 file: %04o\n", (unsigned)(st.st_mode & 07777));
    assert_int_equal(st.st_mode & 07777, 0600);
    expect_file_holds(path, 4);

    /* a new file gets what the umask gives any new file, not a temporary's private 0600 */
    char fresh[512];
    path_in_tmp(fresh, sizeof fresh, "fresh.ckpt");
    old_mask = umask(022);
    s = save_values(fresh, 4, msg, sizeof msg);
    umask(old_mask);
    assert_int_equal(s, PBL_OK);
    assert_int_equal(stat(fresh, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
}

/* A save onto a FIFO writes the checkpoint into it (a reader gets exactly the bytes a save to
 * a file holds) and the FIFO stays a FIFO. The reader is a child process; if the save never
 * opens the FIFO, the child's alarm ends it instead of the test hanging. */
static void save_onto_a_fifo_writes_into_it(void **state)
{
    char fifo[512], got[512], plain[512], msg[512];
    path_in_tmp(fifo, sizeof fifo, "pipe.ckpt");
    path_in_tmp(got, sizeof got, "from-pipe.ckpt");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        alarm(5);
        FILE *in = fopen(fifo, "rb"), *out = fopen(got, "wb");
        if (!in || !out)
            _exit(2);
        int c;
        while ((c = getc(in)) != EOF)
            putc(c, out);
        _exit(fclose(out) == 0 && !ferror(in) ? 0 : 3);
    }
    pbl_status s = save_values(fifo, 5, msg, sizeof msg);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (s != PBL_OK)
        fail_msg("pbl_exec_save onto a FIFO: %s", msg);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the FIFO's reader did not finish (status %#x): the save never wrote into "
                 "the FIFO", (unsigned)status);
    path_in_tmp(plain, sizeof plain, "plain5.ckpt");
    assert_int_equal(save_values(plain, 5, msg, sizeof msg), PBL_OK);
    size_t n_got, n_plain;
    unsigned char *a = slurp(got, &n_got), *b = slurp(plain, &n_plain);
    assert_int_equal(n_got, n_plain);
    assert_memory_equal(a, b, n_plain);
    free(a);
    free(b);
    assert_int_equal(temporaries_left(), 0);
    print_message("    the FIFO's reader got the %zu bytes of a saved file; pipe.ckpt is still "
                  "a FIFO\n", n_got);
    assert_int_equal(unlink(fifo), 0);
}

/* A save onto a device that refuses the data (a private copy of /dev/full, so nothing
 * outside tmpdir is at stake) fails with the device's error and leaves the device node. */
static void save_onto_a_full_device_fails_and_keeps_it(void **state)
{
    char dev[512], msg[512];
    path_in_tmp(dev, sizeof dev, "full");
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 7)) != 0) {
        print_message("    skipped: cannot make a device node here (mknod: %s)\n", strerror(errno));
        skip();
    }
    pbl_status s = save_values(dev, 6, msg, sizeof msg);
    print_message("    save onto a copy of /dev/full -> %s: %s\n", pbl_status_str(s), msg);
    assert_int_equal(s, PBL_ERR_IO);
    assert_non_null(strstr(msg, dev));
    assert_non_null(strstr(msg, strerror(ENOSPC)));
    struct stat st;
    assert_int_equal(lstat(dev, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_rdev, makedev(1, 7));
    assert_int_equal(temporaries_left(), 0);
    assert_int_equal(unlink(dev), 0);
}

/* A save into a folder that does not exist is one clean error naming the path; nothing is
 * created, neither the folder nor a temporary. */
static void save_into_a_missing_folder_is_a_clean_error(void **state)
{
    char path[512], dir[512], msg[512];
    path_in_tmp(dir, sizeof dir, "absent");
    path_in_tmp(path, sizeof path, "absent/x.ckpt");
    assert_int_equal(save_values(path, 1, msg, sizeof msg), PBL_ERR_IO);
    print_message("    save -> %s\n", msg);
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, strerror(ENOENT)));
    assert_null(strchr(msg, '\n'));
    assert_null(strstr(msg, ".tmp.")); /* the temporary's random name would only confuse */
    assert_int_not_equal(access(dir, F_OK), 0);
    assert_int_equal(temporaries_left(), 0);
}

/* The temporary beside the target is created exclusively under a name nobody can predict: a
 * symbolic link planted at the old predictable name ("<path>.tmp.<pid>") toward another file
 * is neither followed (the other file keeps its bytes) nor renamed over the target. */
static void save_ignores_a_link_planted_at_a_temporary_name(void **state)
{
    char path[512], victim[512], planted[600], msg[512];
    save_standard("planted.ckpt", path, sizeof path);
    path_in_tmp(victim, sizeof victim, "victim.txt");
    spill(victim, (const unsigned char *)"precious\n", 9);
    snprintf(planted, sizeof planted, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(symlink(victim, planted), 0);

    if (save_values(path, 7, msg, sizeof msg) != PBL_OK)
        fail_msg("pbl_exec_save beside a planted link: %s", msg);
    size_t n;
    unsigned char *v = slurp(victim, &n);
    assert_int_equal(n, 9);
    assert_memory_equal(v, "precious\n", 9);
    free(v);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    expect_file_holds(path, 7);
    assert_int_equal(lstat(planted, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    print_message("    a link planted at %s.tmp.<pid> toward victim.txt: victim.txt keeps its 9 "
                  "bytes, the checkpoint is a regular file with the new values\n", "planted.ckpt");
    assert_int_equal(unlink(planted), 0);
    assert_int_equal(temporaries_left(), 0);
}

/* A writer killed mid-save (kill -9) leaves its temporary, "<path>.tmp.<pid>.<12 letters>";
 * the next save to the same path removes those whose process is gone, and only those: a
 * running process's temporary, another file's, a link and a name that merely looks alike
 * stay. The dead pid is a child that has exited and been reaped. */
static void save_removes_temporaries_of_dead_writers(void **state)
{
    char path[512], msg[512], name[700];
    save_standard("stale.ckpt", path, sizeof path);
    fflush(NULL);
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);

    struct { const char *fmt; long pid; int removed; } cases[] = {
        { "%s.tmp.%ld.abcdefghijkl", (long)dead, 1 },       /* a dead writer's: removed */
        { "%s.tmp.%ld.012345abcdef", (long)dead, 1 },
        { "%s.tmp.%ld.abcdefghijkl", (long)getppid(), 0 }, /* a running process's: kept */
        { "%s.tmp.%ld.abcdefghijk", (long)dead, 0 },        /* 11 letters: not ours */
        { "%s.tmp.%ld.abcdefghijkL", (long)dead, 0 },       /* a letter we never use */
        { "%s.tmp.%ld", (long)dead, 0 },                    /* the old names: not ours */
        { "%s.bak.tmp.%ld.abcdefghijkl", (long)dead, 0 },   /* another file's */
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n_cases; i++) {
        snprintf(name, sizeof name, cases[i].fmt, path, cases[i].pid);
        spill(name, (const unsigned char *)"left\n", 5);
    }
    char link[700];
    snprintf(link, sizeof link, "%s.tmp.%ld.linklinklink", path, (long)dead);
    assert_int_equal(symlink("stale.ckpt", link), 0);

    if (save_values(path, 8, msg, sizeof msg) != PBL_OK)
        fail_msg("pbl_exec_save beside stale temporaries: %s", msg);
    expect_file_holds(path, 8);
    for (int i = 0; i < n_cases; i++) {
        snprintf(name, sizeof name, cases[i].fmt, path, cases[i].pid);
        if (cases[i].removed != (access(name, F_OK) != 0))
            fail_msg("%s: %s after the save, expected %s", name + strlen(tmpdir) + 1,
                     cases[i].removed ? "still there" : "gone", cases[i].removed ? "gone" : "kept");
        if (!cases[i].removed)
            assert_int_equal(unlink(name), 0);
    }
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(unlink(link), 0);
    assert_int_equal(temporaries_left(), 0);
    print_message("    beside stale.ckpt: 2 temporaries of a dead pid removed; a live pid's, "
                  "4 look-alikes and a link kept\n");
}

/* An allocator that fails the Nth allocation from when it is armed, and counts live bytes. */
typedef struct failing_alloc {
    long   armed_at, fail_at, count;
    size_t live;
} failing_alloc;

static void *failing_malloc(void *user, size_t n)
{
    failing_alloc *a = user;
    a->count++;
    if (a->fail_at > 0 && a->count == a->armed_at + a->fail_at)
        return NULL;
    a->live += n;
    return malloc(n);
}

static void failing_free(void *user, void *p, size_t n)
{
    failing_alloc *a = user;
    if (p)
        a->live -= n;
    free(p);
}

/* Every allocation save and load make can fail: each failure is PBL_ERR_NOMEM with nothing
 * leaked, a failed save leaves no file, and a failed load leaves the values as they were. */
static void allocation_failures_are_clean(void **state)
{
    char path[512], missing[512];
    save_standard("alloc.ckpt", path, sizeof path);
    path_in_tmp(missing, sizeof missing, "alloc-save.ckpt");

    failing_alloc fa = { 0 };
    pbl_allocator hook = { failing_malloc, failing_free, &fa };
    fixture f;
    fixture_make(&f, standard);
    pbl_exec_destroy(f.e); /* again, with the hook */
    pbl_exec_options o = pbl_exec_options_default();
    o.allocator = &hook;
    char err[256] = "";
    if (pbl_exec_create(&f.e, f.g, &o, err, sizeof err) != PBL_OK)
        fail_msg("pbl_exec_create: %s", err);
    assert_int_equal(pbl_exec_bind(f.e, f.w, f.w_data, sizeof f.w_data), PBL_OK);
    values v = values_from(2);
    put_values(&f, &v);

    int save_failures = 0, load_failures = 0;
    for (long k = 1; k < 50; k++) {
        size_t live = fa.live;
        fa.armed_at = fa.count;
        fa.fail_at = k;
        pbl_status s = pbl_exec_save(f.e, missing);
        fa.fail_at = 0;
        assert_int_equal(fa.live, live);
        if (s == PBL_OK)
            break;
        assert_int_equal(s, PBL_ERR_NOMEM);
        assert_int_not_equal(access(missing, F_OK), 0);
        save_failures++;
    }
    for (long k = 1; k < 50; k++) {
        size_t live = fa.live;
        fa.armed_at = fa.count;
        fa.fail_at = k;
        pbl_status s = pbl_exec_load(f.e, path);
        fa.fail_at = 0;
        assert_int_equal(fa.live, live);
        if (s == PBL_OK)
            break;
        assert_int_equal(s, PBL_ERR_NOMEM);
        expect_values(&f, &v);
        load_failures++;
    }
    print_message("    failed each of save's %d and load's %d allocations: PBL_ERR_NOMEM, "
                  "no bytes leaked, no file written, values unchanged\n", save_failures,
                  load_failures);
    assert_true(save_failures >= 1);
    assert_true(load_failures >= 1);
    values loaded = values_from(1);
    expect_values(&f, &loaded);
    fixture_free(&f);
    assert_int_equal(fa.live, 0);
}

/* ---- runtime scalars and the run counter (version 2) ------------------------------------ */

static const variant with_scalars = { 2, 3, 1, 0, 1 };

static uint32_t scalar_bits(fixture *f, pbl_value v)
{
    float x;
    uint32_t bits;
    assert_int_equal(pbl_exec_read(f->e, v, &x, sizeof x), PBL_OK);
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

static void run_times(fixture *f, int n)
{
    float x[6] = { 0 };
    assert_int_equal(pbl_exec_write(f->e, f->x, x, sizeof x), PBL_OK);
    for (int i = 0; i < n; i++)
        assert_int_equal(pbl_exec_run(f->e), PBL_OK);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* What the loop set is what a fresh executor gets back: each scalar's f32 bits and the run
 * counter (dropout's masks draw from it), beside the tensors; the file ends as documented. */
static void scalars_and_run_count_round_trip(void **state)
{
    char path[512];
    fixture f, g;
    fixture_make(&f, with_scalars);
    values v = values_from(1);
    put_values(&f, &v);
    run_times(&f, 3);
    assert_int_equal(pbl_exec_set_scalar(f.e, "lr", 0.1), PBL_OK); /* not exact in f32 */
    assert_int_equal(pbl_exec_set_scalar(f.e, "step", 7), PBL_OK);
    const uint32_t lr_bits = scalar_bits(&f, f.lr), step_bits = scalar_bits(&f, f.step);
    path_in_tmp(path, sizeof path, "scalars.ckpt");
    if (pbl_exec_save(f.e, path) != PBL_OK)
        fail_msg("pbl_exec_save: %s", pbl_exec_errmsg(f.e));

    fixture_make(&g, with_scalars);
    assert_int_not_equal(scalar_bits(&g, g.lr), lr_bits); /* 0.5 and 1 before the load */
    if (pbl_exec_load(g.e, path) != PBL_OK)
        fail_msg("pbl_exec_load: %s", pbl_exec_errmsg(g.e));
    expect_values(&g, &v);
    assert_int_equal(scalar_bits(&g, g.lr), lr_bits);
    assert_int_equal(scalar_bits(&g, g.step), step_bits);
    assert_int_equal(pbl_exec_run_count(g.e), 3);
    print_message("    lr %08x and step %08x, 3 runs: restored into a fresh executor bit for bit\n", lr_bits,
                  step_bits);

    /* the tail: runs (u64) 3, 2 scalars, "lr" then "step" in the graph's order, then the CRC */
    size_t len;
    unsigned char *p = slurp(path, &len);
    const size_t tail = len - 4 - (4 + 2 + 4) - (4 + 4 + 4) - 12;
    assert_int_equal(le32(p + tail), 3);
    assert_int_equal(le32(p + tail + 4), 0);
    assert_int_equal(le32(p + tail + 8), 2);
    assert_int_equal(le32(p + tail + 12), 2);
    assert_memory_equal(p + tail + 16, "lr", 2);
    assert_int_equal(le32(p + tail + 18), lr_bits);
    assert_int_equal(le32(p + tail + 22), 4);
    assert_memory_equal(p + tail + 26, "step", 4);
    assert_int_equal(le32(p + tail + 30), step_bits);
    free(p);

    /* a graph without those scalars skips them and loads the rest */
    fixture h;
    fixture_make(&h, standard);
    assert_int_equal(pbl_exec_load(h.e, path), PBL_OK);
    expect_values(&h, &v);
    fixture_free(&h);
    fixture_free(&g);
    fixture_free(&f);
}

/* A file of the old library (version 1: test/data/fuzz_checkpoint_seeds/w_b_s.ckpt, w 1..6,
 * b 1..3, s 1..4) loads; the graph's scalars and run counter keep what they had. So do they
 * for a version-2 file without scalars, except the run counter, which it holds. */
static void old_files_load_and_keep_the_scalars(void **state)
{
    fixture f;
    fixture_make(&f, with_scalars);
    values v2 = values_from(2);
    put_values(&f, &v2); /* a run needs every parameter */
    assert_int_equal(pbl_exec_set_scalar(f.e, "lr", 0.25), PBL_OK);
    run_times(&f, 2);
    const char *old = PBL_TEST_DATA "/fuzz_checkpoint_seeds/w_b_s.ckpt";
    size_t len;
    unsigned char *p = slurp(old, &len);
    assert_int_equal(le32(p + 8), 1);
    free(p);
    if (pbl_exec_load(f.e, old) != PBL_OK)
        fail_msg("pbl_exec_load: %s", pbl_exec_errmsg(f.e));
    float w[6], b[3], s[4];
    assert_int_equal(pbl_exec_read(f.e, f.w, w, sizeof w), PBL_OK);
    assert_int_equal(pbl_exec_read(f.e, f.b, b, sizeof b), PBL_OK);
    assert_int_equal(pbl_exec_read(f.e, f.s, s, sizeof s), PBL_OK);
    assert_true(w[0] == 1 && w[5] == 6 && b[2] == 3 && s[3] == 4);
    double lr = 0, step = 0;
    assert_int_equal(pbl_exec_get_scalar(f.e, "lr", &lr), PBL_OK);
    assert_int_equal(pbl_exec_get_scalar(f.e, "step", &step), PBL_OK);
    assert_true(lr == 0.25 && step == 1.0);
    assert_int_equal(pbl_exec_run_count(f.e), 2);
    print_message("    version-1 file loaded: w, b, s as saved; lr 0.25 and step 1 kept, run count 2 kept\n");

    char path[512];
    save_standard("noscalars.ckpt", path, sizeof path);
    assert_int_equal(pbl_exec_load(f.e, path), PBL_OK);
    assert_int_equal(pbl_exec_get_scalar(f.e, "lr", &lr), PBL_OK);
    assert_true(lr == 0.25);
    assert_int_equal(pbl_exec_run_count(f.e), 0);
    fixture_free(&f);
}

/* Writes `name` in tmpdir: the standard file with its (empty) scalar section replaced by
 * `n` scalars (names[i], bits[i]) and a CRC that matches. */
static void craft_scalars(const char *name, char *path, size_t path_len, int n, const char *const *names,
                          const uint32_t *bits)
{
    char base[512];
    save_standard("craft-base.ckpt", base, sizeof base);
    size_t len;
    unsigned char *p = slurp(base, &len);
    unsigned char *q = malloc(len + 256);
    assert_non_null(q);
    size_t at = len - 8; /* after the run counter: the scalar count, then the CRC */
    memcpy(q, p, at);
    put_le32(q + at, (uint32_t)n);
    at += 4;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(names[i]) + (names[i][0] == '\0'); /* "" stands for one NUL */
        put_le32(q + at, (uint32_t)nl);
        memcpy(q + at + 4, names[i], nl);
        put_le32(q + at + 4 + nl, bits[i]);
        at += 8 + nl;
    }
    put_le32(q + at, (uint32_t)crc32(crc32(0L, Z_NULL, 0), q, (uInt)at));
    path_in_tmp(path, path_len, name);
    spill(path, q, at + 4);
    free(q);
    free(p);
}

/* A scalar that is NaN or infinite, named twice, named with a NUL, or named after a value
 * that is not a scalar, and a file cut short in its scalars: each a clean error naming the
 * file, the executor unchanged. A scalar the graph lacks is skipped. */
static void bad_scalars_are_refused(void **state)
{
    char path[512];
    const uint32_t nan_bits = 0x7fc00000u, inf_bits = 0x7f800000u, ninf_bits = 0xff800000u, one = 0x3f800000u;
    const char *lr[] = { "lr" }, *twice[] = { "lr", "lr" }, *b[] = { "b" }, *nul[] = { "" },
               *other[] = { "momentum" };
    craft_scalars("nan.ckpt", path, sizeof path, 1, lr, &nan_bits);
    expect_load_fails(path, with_scalars, PBL_ERR_FORMAT, "'lr' is NaN", NULL);
    craft_scalars("inf.ckpt", path, sizeof path, 1, lr, &inf_bits);
    expect_load_fails(path, with_scalars, PBL_ERR_FORMAT, "'lr' is infinite", NULL);
    craft_scalars("ninf.ckpt", path, sizeof path, 1, lr, &ninf_bits);
    expect_load_fails(path, with_scalars, PBL_ERR_FORMAT, "infinite", NULL);
    const uint32_t two[] = { one, one };
    craft_scalars("twice.ckpt", path, sizeof path, 2, twice, two);
    expect_load_fails(path, with_scalars, PBL_ERR_FORMAT, "'lr' appears twice", NULL);
    craft_scalars("param.ckpt", path, sizeof path, 1, b, &one);
    expect_load_fails(path, with_scalars, PBL_ERR_NOT_FOUND, "'b' is a param", NULL);
    craft_scalars("nul.ckpt", path, sizeof path, 1, nul, &one);
    expect_load_fails(path, with_scalars, PBL_ERR_FORMAT, "NUL", NULL);
    /* a NaN is refused even where the graph has no such scalar: the file is bad */
    craft_scalars("nan-other.ckpt", path, sizeof path, 1, other, &nan_bits);
    expect_load_fails(path, standard, PBL_ERR_FORMAT, "'momentum' is NaN", NULL);

    craft_scalars("other.ckpt", path, sizeof path, 1, other, &one);
    fixture f;
    fixture_make(&f, with_scalars);
    assert_int_equal(pbl_exec_load(f.e, path), PBL_OK);
    double v = 0;
    assert_int_equal(pbl_exec_get_scalar(f.e, "lr", &v), PBL_OK);
    assert_true(v == 0.5);
    fixture_free(&f);

    /* cut anywhere in the run counter, the count or a scalar (CRC left as saved, or fixed) */
    fixture g;
    fixture_make(&g, with_scalars);
    char whole[512], bad[512];
    path_in_tmp(whole, sizeof whole, "cut-scalars.ckpt");
    assert_int_equal(pbl_exec_save(g.e, whole), PBL_OK);
    fixture_free(&g);
    size_t len;
    unsigned char *p = slurp(whole, &len);
    const size_t section = len - 4 - 12 - (4 + 2 + 4) - (4 + 4 + 4);
    for (size_t cut = section; cut < len - 4; cut += 3) {
        for (int fix = 0; fix < 2; fix++) {
            unsigned char *q = malloc(cut + 4);
            assert_non_null(q);
            memcpy(q, p, cut);
            if (fix)
                put_le32(q + cut, (uint32_t)crc32(crc32(0L, Z_NULL, 0), q, (uInt)cut));
            else
                memcpy(q + cut, p + len - 4, 4);
            snprintf(bad, sizeof bad, "%s/cut%zu-%d.ckpt", tmpdir, cut, fix);
            spill(bad, q, cut + 4);
            free(q);
            expect_load_fails(bad, with_scalars, PBL_ERR_FORMAT, NULL);
        }
    }
    free(p);
}

/* ---- setup ----------------------------------------------------------------------------- */

static int make_tmpdir(void **state)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_checkpoint.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* pbl_exec_save_check finds what would make a save fail, before the work, and writes nothing:
 * a directory, a missing folder; a writable name, an existing file (unchanged) and a FIFO
 * (not opened: that would block without a reader) pass. */
static void save_check_finds_bad_destinations_without_writing(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, standard);
    char path[512], fifo[512], existing[512];
    path_in_tmp(path, sizeof path, "check_new.ckpt");
    assert_int_equal(pbl_exec_save_check(f.e, path), PBL_OK);
    assert_int_not_equal(access(path, F_OK), 0); /* nothing written */
    save_standard("check_old.ckpt", existing, sizeof existing);
    assert_int_equal(pbl_exec_save_check(f.e, existing), PBL_OK);
    expect_file_holds(existing, 1);
    path_in_tmp(fifo, sizeof fifo, "check.fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(pbl_exec_save_check(f.e, fifo), PBL_OK);
    assert_int_equal(unlink(fifo), 0);
    assert_int_equal(pbl_exec_save_check(f.e, tmpdir), PBL_ERR_IO);
    assert_non_null(strstr(pbl_exec_errmsg(f.e), "is a directory"));
    path_in_tmp(path, sizeof path, "absent/x.ckpt");
    assert_int_equal(pbl_exec_save_check(f.e, path), PBL_ERR_IO);
    assert_non_null(strstr(pbl_exec_errmsg(f.e), strerror(ENOENT)));
    print_message("    save_check -> %s\n", pbl_exec_errmsg(f.e));
    assert_int_equal(temporaries_left(), 0);
    fixture_free(&f);
}

/* A write caught half-way by a signal: pbl_cleanup_temporaries (what the programs' handlers
 * call) removes the named temporary at once and leaves the target as it was; the write
 * then fails cleanly, and so does any later one (the process is meant to be dying). With
 * O_TMPFILE the temporary has no name until it is linked, so there is nothing to remove and
 * the link fails. Each in a child process, as cleaning up is for a process about to end. */
static void cleanup_removes_a_pending_temporary(void **state)
{
    (void)state;
    char path[512];
    save_standard("pending.ckpt", path, sizeof path);
    for (int named = 1; named >= 0; named--) {
        fflush(NULL);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            char msg[256];
            setenv("PEBBLE_NO_O_TMPFILE", named ? "1" : "0", 1);
            pbl__file_out o;
            int bad = pbl__file_out_open(&o, path, NULL, msg, sizeof msg) != PBL_OK;
            bad |= fputs("half a file", o.f) < 0;
            bad |= temporaries_left() != named;
            bad |= pbl_cleanup_temporaries() != named;
            bad |= temporaries_left() != 0;
            bad |= pbl__file_out_close(&o, 1, msg, sizeof msg) != PBL_ERR_IO;
            bad |= temporaries_left() != 0;
            fprintf(stderr, "    %s temporary: the write after the cleanup -> %s\n", named ? "named" : "unnamed", msg);
            bad |= pbl__file_out_open(&o, path, NULL, msg, sizeof msg) == PBL_OK &&
                   pbl__file_out_close(&o, 1, msg, sizeof msg) == PBL_OK && named; /* a later named write fails */
            _exit(bad);
        }
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        expect_file_holds(path, 1);
        assert_int_equal(temporaries_left(), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_is_exact),
        cmocka_unit_test(file_layout_is_as_documented),
        cmocka_unit_test(flipped_byte_is_a_checksum_error),
        cmocka_unit_test(truncation_is_a_format_error),
        cmocka_unit_test(bad_magic_and_version_are_format_errors),
        cmocka_unit_test(other_shape_is_a_shape_error),
        cmocka_unit_test(missing_or_extra_tensor_is_not_found),
        cmocka_unit_test(unreadable_and_unwritable_paths_are_io_errors),
        cmocka_unit_test(save_through_a_symlink_writes_its_target),
        cmocka_unit_test(save_keeps_the_files_mode),
        cmocka_unit_test(save_onto_a_fifo_writes_into_it),
        cmocka_unit_test(save_onto_a_full_device_fails_and_keeps_it),
        cmocka_unit_test(save_into_a_missing_folder_is_a_clean_error),
        cmocka_unit_test(save_ignores_a_link_planted_at_a_temporary_name),
        cmocka_unit_test(save_removes_temporaries_of_dead_writers),
        cmocka_unit_test(save_check_finds_bad_destinations_without_writing),
        cmocka_unit_test(cleanup_removes_a_pending_temporary),
        cmocka_unit_test(allocation_failures_are_clean),
        cmocka_unit_test(scalars_and_run_count_round_trip),
        cmocka_unit_test(old_files_load_and_keep_the_scalars),
        cmocka_unit_test(bad_scalars_are_refused),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
