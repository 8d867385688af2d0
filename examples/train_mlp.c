/*
 * train_mlp — trains a multi-layer perceptron on Fashion-MNIST with pebble, in plain C.
 *
 *     train_mlp [--hidden 256,128] [--epochs 10] [--batch 128] [--lr 0.002] [--seed 1]
 *               [--lr-schedule cosine|step|none] [--warmup 500] [--weight-decay 0.01] [--clip 1]
 *               [--dropout P] [--val N] [--plot FILE.svg]
 *               [--data DIR] [--save FILE] [--load FILE] [--threads T] [--plan] [--backend cpu|cuda]
 *     train_mlp --help | --version
 *
 * The whole training step — forward, explicit backward nodes, clipping, AdamW update — is one
 * graph run. With a schedule (--lr-schedule, --warmup; cosine after 500 steps' warm-up by
 * default) the learning rate is a runtime scalar "lr" that this program sets before every
 * step (pebble/autodiff.h pbl_lr_schedule_at, pbl_exec_set_scalar); with `--lr-schedule none
 * --warmup 0` it is a constant of the update nodes. The last --val training images (a twelfth
 * by default) are held out to validate each epoch, and --save keeps the best epoch's model.
 * Adam's step is the runtime scalar "step" (the step about to run), so a checkpoint holds it:
 * --load resumes a run where its checkpoint left it, the schedule and the shuffling included.
 * Parameters live in this program's own float arrays, bound zero-copy to the training
 * executor and to the evaluation executors, so evaluation always sees the latest weights.
 * With --backend cuda every executor runs on the GPU (pebble/exec.h PBL_BACKEND_CUDA): the
 * arrays only initialise the training executor's device copy (pbl_exec_write: a bound array
 * would be copied to the device and back at every step), the training step is a CUDA Graph
 * replayed each batch, and before each evaluation the weights are read back from the
 * training executor and written into the evaluation executor (one copy per evaluation).
 *
 * Output: one line about the model, one naming the backend and its device (pbl_exec_device),
 * one about the memory plan, one summary line per epoch on stdout (training loss and
 * accuracy, validation loss and accuracy, steps, examples, the epoch's training time and samples/s; plus a
 * progress bar on stderr when it is a terminal), and last `test accuracy: 0.8919`. Errors are one line
 * `train_mlp: <message>` on stderr; exit status 2 for a bad command line, 1 for anything
 * else that went wrong. The command line follows tools/args/args.h, as the pebble tool's:
 * --flag VALUE or --flag=VALUE, --help and --version on stdout with exit status 0.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, isatty, fileno */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pebble/pebble.h>

#include "args.h" /* tools/args: the command-line convention the pebble tool shares */
#include "idx.h"
#include "plot_svg.h"

#define N_PIXELS     784 /* 28 x 28, what the first layer expects */
#define N_CLASSES    10
#define MAX_HIDDEN   8
#define MAX_LAYERS   (MAX_HIDDEN + 1)
#define EVAL_BATCH   1000
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define DEFAULT_WARMUP 500 /* steps; see --help */

enum { EXIT_USAGE = 2 };

/* ---- messages -------------------------------------------------------------------------- */

/* Prints `train_mlp: <message>` as exactly one line: library messages are quoted verbatim,
 * so any newline in them is flattened rather than trusted not to be there (tools/args). */
static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    args_verror("train_mlp", fmt, ap);
    va_end(ap);
}

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: train_mlp [options]\n"
            "  --hidden LIST   hidden layer widths, comma-separated (default 256,128)\n"
            "  --epochs N      passes over the training set (default 10; 0: only evaluate)\n"
            "  --batch B       training batch size (default 128)\n"
            "  --lr X          peak learning rate (default 0.002)\n"
            "  --lr-schedule S cosine (default: to 0 at the last step), step (x0.5 every 3 epochs)\n"
            "                  or none; each after the warm-up\n"
            "  --warmup N      linear learning-rate warm-up over the first N steps (default 500,\n"
            "                  or a quarter of the run's steps when that is fewer)\n"
            "  --weight-decay X  AdamW's decoupled weight decay (default 0.01; 0: Adam)\n"
            "  --clip X        clip the gradients to global norm X (default 1; 0: no clipping)\n"
            "  --dropout P     dropout with probability P after each hidden layer (default 0)\n"
            "  --val N         hold out the last N training images for validation (default: a\n"
            "                  twelfth, 5000 of Fashion-MNIST's 60000; 0: none)\n"
            "  --plot FILE     after training, draw loss and accuracy per epoch as an SVG picture,\n"
            "                  and save the training graph beside it (FILE.json, for pebble viz)\n"
            "  --seed S        seed for initialisation and shuffling (default 1)\n"
            "  --data DIR      Fashion-MNIST IDX .gz files (default " DEFAULT_DATA ")\n"
            "  --save FILE     save parameters and optimizer state: at each epoch that improves\n"
            "                  the validation accuracy (without validation, after training)\n"
            "  --load FILE     before training, load a checkpoint saved with --save and resume\n"
            "                  the run it came from: the epochs it had trained are skipped\n"
            "                  (same --epochs, --batch, --val and --seed: the same steps follow)\n"
            "  --threads T     BLAS threads (default 0: the BLAS library's own choice)\n"
            "  --plan          print the training step's memory plan before training\n"
            "  --backend B     cpu (default) or cuda: train and evaluate on an NVIDIA GPU\n"
            "                  (pebble's CUDA backend, docs/cuda.md; not with --threads or\n"
            "                  under mpirun)\n"
            "  -h, --help      this text\n"
            "  --version       pebble's version and commit\n"
            "\n"
            "Options take --flag VALUE or --flag=VALUE, as the pebble tool's do. Exit status: 0\n"
            "trained, 1 a failure (data, checkpoint), 2 a bad command line.\n");
}

/* ---- command line ---------------------------------------------------------------------- */

typedef struct options {
    int         show_plan;
    int64_t     hidden[MAX_HIDDEN];
    int         n_hidden;
    long        epochs;
    long        batch;
    double      lr;
    int         schedule; /* -1: none, else a pbl_lr_schedule_kind */
    long        warmup; /* -1: the default, DEFAULT_WARMUP or a quarter of the run */
    double      weight_decay;
    double      clip;
    double      dropout;
    long        val; /* -1: the default, a twelfth of the training set */
    const char *plot;
    uint64_t    seed;
    const char *data;
    const char *save;
    const char *load;
    long        threads;
    pbl_backend_kind backend; /* where every executor runs: PBL_BACKEND_CPU or _CUDA */
    pbl_comm   *comm;  /* data parallelism (under mpirun): the ranks; NULL: one process */
    int32_t     rank, ranks;
} options;

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    int64_t v;
    if (args_int("train_mlp", flag, s, lo, hi, &v) != 0)
        return -1;
    *out = (long)v;
    return 0;
}

static int parse_hidden(const char *s, options *o)
{
    o->n_hidden = 0;
    const char *p = s;
    for (;;) {
        char item[32];
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof item) {
            complain("--hidden: '%s' is not a comma-separated list of layer widths", s);
            return -1;
        }
        if (o->n_hidden == MAX_HIDDEN) {
            complain("--hidden: at most %d hidden layers", MAX_HIDDEN);
            return -1;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        long w;
        if (parse_long("--hidden", item, 1, 65536, &w) != 0)
            return -1;
        o->hidden[o->n_hidden++] = w;
        if (p[n] == '\0')
            return 0;
        p += n + 1;
    }
}

static const args_flag flags[] = { { "--hidden", 1 }, { "--epochs", 1 }, { "--batch", 1 }, { "--lr", 1 },
                                   { "--seed", 1 },   { "--data", 1 },   { "--save", 1 },  { "--load", 1 },
                                   { "--threads", 1 }, { "--plan", 0 },  { "--lr-schedule", 1 },
                                   { "--warmup", 1 }, { "--weight-decay", 1 }, { "--clip", 1 },
                                   { "--dropout", 1 }, { "--val", 1 }, { "--plot", 1 }, { "--backend", 1 } };
enum { F_HIDDEN, F_EPOCHS, F_BATCH, F_LR, F_SEED, F_DATA, F_SAVE, F_LOAD, F_THREADS, F_PLAN, F_SCHEDULE, F_WARMUP,
       F_WEIGHT_DECAY, F_CLIP, F_DROPOUT, F_VAL, F_PLOT, F_BACKEND, N_FLAGS };

/* One argument (tools/args calls this for each): 0 to go on, else EXIT_USAGE after a message. */
static int take_arg(void *ctx, int which, const char *val)
{
    options *o = ctx;
    if (which == ARGS_POSITIONAL) {
        complain("unexpected argument '%s': train_mlp takes options only (see train_mlp --help)", val);
        return EXIT_USAGE;
    }
    const char *flag = flags[which].name;
    int bad = 0;
    switch (which) {
    case F_PLAN:
        o->show_plan = 1;
        break;
    case F_HIDDEN:
        bad = parse_hidden(val, o);
        break;
    case F_EPOCHS:
        bad = parse_long(flag, val, 0, 100000, &o->epochs);
        break;
    case F_BATCH:
        bad = parse_long(flag, val, 1, 1 << 20, &o->batch);
        break;
    case F_THREADS:
        bad = parse_long(flag, val, 0, 1024, &o->threads);
        break;
    case F_LR:
        bad = args_double("train_mlp", flag, val, 0, 10, &o->lr);
        if (!bad && o->lr == 0) {
            complain("--lr: %s is out of range (greater than 0, at most 10)", val);
            bad = -1;
        }
        break;
    case F_SCHEDULE:
        if (strcmp(val, "none") == 0)
            o->schedule = -1;
        else if (strcmp(val, "step") == 0)
            o->schedule = PBL_LR_STEP;
        else if (strcmp(val, "cosine") == 0)
            o->schedule = PBL_LR_COSINE;
        else {
            complain("--lr-schedule: '%s' is not none, step or cosine", val);
            bad = -1;
        }
        break;
    case F_WARMUP:
        bad = parse_long(flag, val, 0, 1L << 30, &o->warmup);
        break;
    case F_WEIGHT_DECAY:
        bad = args_double("train_mlp", flag, val, 0, 1, &o->weight_decay);
        break;
    case F_CLIP:
        bad = args_double("train_mlp", flag, val, 0, 1e6, &o->clip);
        break;
    case F_DROPOUT:
        bad = args_double("train_mlp", flag, val, 0, 0.95, &o->dropout);
        break;
    case F_VAL:
        bad = parse_long(flag, val, 0, 1L << 30, &o->val);
        break;
    case F_BACKEND:
        if (strcmp(val, "cpu") == 0)
            o->backend = PBL_BACKEND_CPU;
        else if (strcmp(val, "cuda") == 0)
            o->backend = PBL_BACKEND_CUDA;
        else {
            complain("--backend: '%s' is not cpu or cuda", val);
            bad = -1;
        }
        break;
    case F_SEED: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (end == val || *end != '\0' || val[0] == '-' || val[0] == '+' || val[0] == ' ') {
            complain("--seed: '%s' is not a non-negative integer", val);
            bad = -1;
        } else if (errno == ERANGE) {
            complain("--seed: %s is out of range (0..%llu)", val, ULLONG_MAX);
            bad = -1;
        }
        o->seed = v;
        break;
    }
    default: /* --data, --save, --load, --plot: names */
        if (val[0] == '\0') {
            complain("%s needs a non-empty value", flag);
            bad = -1;
        } else if (strcmp(val, "-") == 0) {
            /* "-" is standard input or output elsewhere; here neither fits, so it is refused
             * rather than taken as a file named "-" */
            complain("%s -: %s", flag,
                     which == F_DATA ? "the data set is a directory of files, not standard input"
                     : which == F_SAVE || which == F_PLOT
                         ? "standard output carries the training report; give a file name"
                         : "a checkpoint is read from a file (its size is checked first), not standard input");
            bad = -1;
        } else {
            *(which == F_DATA ? &o->data : which == F_SAVE ? &o->save : which == F_PLOT ? &o->plot : &o->load) = val;
        }
        break;
    }
    return bad ? EXIT_USAGE : 0;
}

/* Returns -1 to go on, or the exit status to stop with (0 after --help or --version). */
static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){ .hidden = { 256, 128 }, .n_hidden = 2, .epochs = 10, .batch = 128,
                    .lr = 2e-3, .schedule = PBL_LR_COSINE, .warmup = -1,
                    .weight_decay = 0.01, .clip = 1, .val = -1, .seed = 1, .data = DEFAULT_DATA };
    args_spec spec = { "train_mlp", NULL, pbl_version(), flags, N_FLAGS, take_arg, print_usage };
    int rc = args_parse(&spec, argc, argv, o);
    if (rc == ARGS_GO_ON && o->backend == PBL_BACKEND_CUDA && o->threads > 0) {
        /* the CUDA backend ignores it: refused rather than silently doing nothing */
        complain("--threads sets CPU threads; with --backend cuda the work runs on the GPU (leave it out)");
        return EXIT_USAGE;
    }
    return rc;
}

/* ---- random numbers -------------------------------------------------------------------- */

/* xoshiro256** seeded through splitmix64 (Vigna's recommendation): small, fast, and the same
 * sequence on every platform, so a seed names one run. */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* `stream` separates the initialisation and shuffling sequences drawn from one seed. */
static void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03u);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [lo, hi), from the top 24 bits: exactly the floats of that spacing. */
static float rng_uniform(rng *r, float lo, float hi)
{
    float u = (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

/* Uniform in [0, n) without modulo bias: reject the short last stretch of the 2^64 range. */
static uint64_t rng_below(rng *r, uint64_t n)
{
    const uint64_t reject_below = (0 - n) % n; /* 2^64 mod n */
    uint64_t x;
    do
        x = rng_next(r);
    while (x < reject_below);
    return x % n;
}

/* ---- data ------------------------------------------------------------------------------ */

/* The four IDX files of a data set folder. */
static const char *const dataset_files[] = { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz" };

/* Whether a and b are one existing file (same device and inode: a link, "./x" beside "x"). */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* --plot's companion, the training graph: NAME.json for --plot NAME.svg (PLOT.json for a name
 * without ".svg"). 0, or -1 when it does not fit `size`; *stem gets the length of NAME. */
static int plot_json_name(const char *plot, char *json, size_t size, size_t *stem)
{
    size_t len = strlen(plot);
    if (len > 4 && strcmp(plot + len - 4, ".svg") == 0)
        len -= 4;
    if (len + 6 > size)
        return -1;
    memcpy(json, plot, len);
    strcpy(json + len, ".json");
    *stem = len;
    return 0;
}

/* --save must not name a file this run reads: the data set's files or the --load checkpoint
 * (a save replaces the file whole, so an input named as the output would be lost). 0, or
 * EXIT_USAGE after a message; checked before anything is loaded. */
static int check_save_is_no_input(const options *o)
{
    if (o->plot) { /* the same for --plot, and its graph must not replace the checkpoint */
        char json[4096];
        size_t stem;
        if (plot_json_name(o->plot, json, sizeof json, &stem) != 0) {
            complain("--plot %s: the name is too long to put the graph beside it", o->plot);
            return EXIT_USAGE;
        }
        const char *other[] = { o->save, o->load };
        for (int i = 0; i < 2; i++)
            if (other[i] && (strcmp(other[i], json) == 0 || same_file(other[i], json))) {
                complain("--plot %s: its training graph %s would be written over the %s checkpoint", o->plot, json,
                         i == 0 ? "--save" : "--load");
                return EXIT_USAGE;
            }
        for (size_t i = 0; i < sizeof dataset_files / sizeof dataset_files[0]; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", o->data, dataset_files[i]);
            if (same_file(o->plot, path)) {
                complain("--plot %s: that is the data set's file %s; it would be overwritten", o->plot, path);
                return EXIT_USAGE;
            }
        }
        if (o->load && same_file(o->plot, o->load)) {
            complain("--plot %s: that is the checkpoint --load reads", o->plot);
            return EXIT_USAGE;
        }
    }
    if (!o->save)
        return 0;
    for (size_t i = 0; i < sizeof dataset_files / sizeof dataset_files[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", o->data, dataset_files[i]);
        if (same_file(o->save, path)) {
            complain("--save %s: that is the data set's file %s; it would be overwritten", o->save, path);
            return EXIT_USAGE;
        }
    }
    if (o->plot && (strcmp(o->save, o->plot) == 0 || same_file(o->save, o->plot))) {
        complain("--save %s: --plot names the same file", o->save);
        return EXIT_USAGE;
    }
    if (o->load && same_file(o->save, o->load)) {
        complain("--save %s: that is the checkpoint --load reads; save under another name (and rename it"
                 " after, if it should replace the old one)", o->save);
        return EXIT_USAGE;
    }
    return 0;
}

typedef struct dataset {
    idx_array images; /* [n, 28, 28] bytes */
    idx_array labels; /* [n] bytes, each < N_CLASSES */
    int64_t   n;
} dataset;

static int load_dataset(dataset *d, const char *dir, const char *images, const char *labels)
{
    char path[4096], err[512];
    memset(d, 0, sizeof *d);
    snprintf(path, sizeof path, "%s/%s", dir, images);
    if (idx_read(&d->images, path, 3, err, sizeof err) != 0) {
        complain("%s", err);
        return -1;
    }
    if ((uint64_t)d->images.dims[1] * d->images.dims[2] != N_PIXELS) {
        complain("%s: images are %" PRIu32 "x%" PRIu32 ", the model reads 28x28 = %d pixels",
                 path, d->images.dims[1], d->images.dims[2], N_PIXELS);
        goto fail_free_images;
    }
    snprintf(path, sizeof path, "%s/%s", dir, labels);
    if (idx_read(&d->labels, path, 1, err, sizeof err) != 0) {
        complain("%s", err);
        goto fail_free_images;
    }
    if (d->labels.dims[0] != d->images.dims[0]) {
        complain("%s: %" PRIu32 " labels for %" PRIu32 " images in %s", path,
                 d->labels.dims[0], d->images.dims[0], images);
        goto fail_free_labels;
    }
    for (size_t i = 0; i < d->labels.size; i++)
        if (d->labels.data[i] >= N_CLASSES) {
            complain("%s: label %zu is %u, classes are 0..%d", path, i, d->labels.data[i],
                     N_CLASSES - 1);
            goto fail_free_labels;
        }
    d->n = d->images.dims[0];
    return 0;

fail_free_labels:
    idx_array_free(&d->labels);
fail_free_images:
    idx_array_free(&d->images);
    return -1;
}

static void dataset_free(dataset *d)
{
    idx_array_free(&d->images);
    idx_array_free(&d->labels);
}

/* Gathers the samples idx[0..batch-1] as x: [batch, 784] floats in [0, 1], y: [batch]. */
static void gather(const dataset *d, const int64_t *idx, int64_t batch, float *x, int32_t *y)
{
    for (int64_t i = 0; i < batch; i++) {
        const uint8_t *img = d->images.data + (size_t)idx[i] * N_PIXELS;
        for (int p = 0; p < N_PIXELS; p++)
            x[i * N_PIXELS + p] = (float)img[p] * (1.0f / 255.0f);
        y[i] = d->labels.data[idx[i]];
    }
}

/* ---- the model ------------------------------------------------------------------------- */

/* The parameters, owned here; every executor binds these same arrays. */
typedef struct model {
    int     n_layers;
    int64_t in[MAX_LAYERS], out[MAX_LAYERS];
    float  *w[MAX_LAYERS]; /* [out, in] */
    float  *b[MAX_LAYERS]; /* [out] */
} model;

static int model_init(model *m, const options *o)
{
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    rng r;
    rng_seed(&r, o->seed, 1);
    for (int l = 0; l < m->n_layers; l++) {
        m->in[l] = l == 0 ? N_PIXELS : o->hidden[l - 1];
        m->out[l] = l == o->n_hidden ? N_CLASSES : o->hidden[l];
        m->w[l] = malloc((size_t)(m->in[l] * m->out[l]) * sizeof(float));
        m->b[l] = malloc((size_t)m->out[l] * sizeof(float));
        if (!m->w[l] || !m->b[l]) {
            complain("out of memory for layer %d's parameters", l + 1);
            return -1;
        }
        /* PyTorch's nn.Linear default: kaiming_uniform(a = sqrt 5) gives W ~ U(±1/sqrt(in)),
         * and the bias the same bound, so results compare with the usual baselines. */
        const float bound = 1.0f / sqrtf((float)m->in[l]);
        for (int64_t i = 0; i < m->in[l] * m->out[l]; i++)
            m->w[l][i] = rng_uniform(&r, -bound, bound);
        for (int64_t i = 0; i < m->out[l]; i++)
            m->b[l][i] = rng_uniform(&r, -bound, bound);
    }
    return 0;
}

static void model_free(model *m)
{
    for (int l = 0; l < m->n_layers; l++) {
        free(m->w[l]);
        free(m->b[l]);
    }
}

static int uses_schedule(const options *o) { return o->schedule >= 0 || o->warmup > 0; }

/* The schedule of the options over `total` steps (one per training batch). */
static pbl_lr_schedule schedule_of(const options *o, int64_t total, int64_t per_epoch)
{
    pbl_lr_schedule s = pbl_lr_schedule_default(o->schedule >= 0 ? (pbl_lr_schedule_kind)o->schedule : PBL_LR_CONSTANT,
                                                o->lr);
    s.warmup_steps = o->warmup;
    s.total_steps = total;
    s.step_size = 3 * per_epoch;
    s.gamma = 0.5;
    return s;
}

/* One graph and its executor: the training step (forward, backward, Adam) or, for
 * evaluation, the forward pass alone at some batch size. */
typedef struct net {
    pbl_graph *g;
    pbl_exec  *e;
    int64_t    batch;
    pbl_value  x, y, loss, logits;
    pbl_value  params[2 * MAX_LAYERS]; /* fc1/w, fc1/b, fc2/w, ... */
    int        n_params;
} net;

static void net_destroy(net *n)
{
    pbl_exec_destroy(n->e);
    pbl_graph_destroy(n->g);
    memset(n, 0, sizeof *n);
}

/* Parameter l of the net (fc1/w, fc1/b, fc2/w, ...): the model's array and its bytes. */
static float *param_data(const model *m, int i, size_t *bytes)
{
    const int l = i / 2;
    *bytes = (size_t)(i % 2 ? m->out[l] : m->in[l] * m->out[l]) * sizeof(float);
    return i % 2 ? m->b[l] : m->w[l];
}

static int model_bind(net *n, const model *m)
{
    for (int i = 0; i < n->n_params; i++) {
        size_t bytes;
        float *p = param_data(m, i, &bytes);
        if (pbl_exec_bind(n->e, n->params[i], p, bytes) != PBL_OK) {
            complain("binding layer %d's parameters: %s", i / 2 + 1, pbl_exec_errmsg(n->e));
            return -1;
        }
    }
    return 0;
}

/* The model's arrays into n's executor storage (on the device, with --backend cuda). */
static int model_write(net *n, const model *m)
{
    for (int i = 0; i < n->n_params; i++) {
        size_t bytes;
        const float *p = param_data(m, i, &bytes);
        if (pbl_exec_write(n->e, n->params[i], p, bytes) != PBL_OK) {
            complain("writing layer %d's parameters: %s", i / 2 + 1, pbl_exec_errmsg(n->e));
            return -1;
        }
    }
    return 0;
}

/* n's parameters (the training executor's, after its updates) back into the model's arrays. */
static int model_read(const net *n, model *m)
{
    for (int i = 0; i < n->n_params; i++) {
        size_t bytes;
        float *p = param_data(m, i, &bytes);
        if (pbl_exec_read(n->e, n->params[i], p, bytes) != PBL_OK) {
            complain("reading layer %d's parameters: %s", i / 2 + 1, pbl_exec_errmsg(n->e));
            return -1;
        }
    }
    return 0;
}

static int net_create(net *n, const model *m, const options *o, int64_t batch, int training)
{
    memset(n, 0, sizeof *n);
    n->batch = batch;
    n->loss = PBL_NONE;
    pbl_status s = pbl_graph_create(&n->g, NULL);
    if (s != PBL_OK) {
        complain("creating a graph: %s", pbl_status_str(s));
        return -1;
    }
    pbl_graph *g = n->g;
    pbl_value *params = n->params, grads[2 * MAX_LAYERS];
    n->n_params = 2 * m->n_layers;
    char name[32];

    // x: [batch, 784] -> fc+relu per hidden layer -> logits: [batch, 10]
    n->x = pbl_input(g, "x", PBL_SHAPE(batch, N_PIXELS));
    pbl_value h = n->x;
    for (int l = 0; l < m->n_layers; l++) {
        snprintf(name, sizeof name, "fc%d/w", l + 1);
        params[2 * l] = pbl_param(g, name, PBL_SHAPE(m->out[l], m->in[l]));
        snprintf(name, sizeof name, "fc%d/b", l + 1);
        params[2 * l + 1] = pbl_param(g, name, PBL_SHAPE(m->out[l]));
        h = pbl_fully_connected(g, h, params[2 * l], params[2 * l + 1]);
        if (l + 1 < m->n_layers)
            h = pbl_relu(g, h);
        /* dropout only in the training step: evaluation nets are graphs of their own */
        if (l + 1 < m->n_layers && training && o->dropout > 0)
            h = pbl_dropout(g, h, o->dropout, o->seed * 16 + (uint64_t)l, NULL);
    }
    n->logits = h;
    if (training) {
        n->y = pbl_label(g, "labels", PBL_I32, PBL_SHAPE(batch));
        n->loss = pbl_softmax_cross_entropy(g, n->logits, n->y);
    }
    if (pbl_graph_build_status(g) != PBL_OK) {
        complain("building the model: %s", pbl_graph_errmsg(g));
        goto fail_destroy;
    }
    if ((s = pbl_graph_set_output(g, "logits", n->logits)) != PBL_OK ||
        (training && (s = pbl_graph_set_output(g, "loss", n->loss)) != PBL_OK)) {
        complain("naming the model's outputs: %s", pbl_graph_errmsg(g));
        goto fail_destroy;
    }
    if (training) {
        const int32_t n_params = 2 * m->n_layers;
        if ((s = pbl_graph_gradient(g, n->loss, params, n_params, grads)) != PBL_OK) {
            complain("gradient pass: %s", pbl_graph_errmsg(g));
            goto fail_destroy;
        }
        pbl_optimizer_options opt = pbl_optimizer_options_default(o->weight_decay > 0 ? PBL_OPTIM_ADAMW : PBL_OPTIM_ADAM);
        opt.lr = o->lr;
        opt.weight_decay = o->weight_decay;
        opt.clip_norm = o->clip;
        if (uses_schedule(o))
            opt.lr_scalar = "lr"; /* set before every step from the schedule */
        /* the step about to run, advanced after each: checkpoints hold it, so --load knows
         * where the run it resumes stopped (the same bits as each parameter's own count) */
        opt.step_scalar = "step";
        if (o->comm) { /* the gradients averaged over the ranks, bucket by bucket, before the update */
            pbl_data_parallel_options dp = pbl_data_parallel_options_default();
            if ((s = pbl_graph_data_parallel(g, &dp, grads, n_params, grads)) != PBL_OK) {
                complain("data-parallel pass: %s", pbl_graph_errmsg(g));
                goto fail_destroy;
            }
        }
        if ((s = pbl_graph_add_optimizer(g, &opt, params, grads, n_params)) != PBL_OK) {
            complain("adding the optimizer: %s", pbl_graph_errmsg(g));
            goto fail_destroy;
        }
    }

    pbl_exec_options eo = pbl_exec_options_default();
    eo.threads = (int32_t)o->threads;
    eo.comm = training ? o->comm : NULL;
    eo.backend = o->backend;
    /* the training step is captured once and replayed: one launch per step instead of one per
     * kernel (the learning rate is a scalar in device memory, the batch's rows are written in
     * place; a partial last batch captures again, pbl_exec_set_batch). Evaluation runs eager. */
    eo.cuda_graph = training && o->backend == PBL_BACKEND_CUDA;
    char err[512] = "";
    if ((s = pbl_exec_create(&n->e, g, &eo, err, sizeof err)) != PBL_OK) {
        complain("creating the %s executor: %s", training ? "training" : "evaluation",
                 err[0] ? err : pbl_status_str(s));
        goto fail_destroy;
    }
    /* CPU: the model's arrays themselves, shared by every executor. CUDA: a copy in device
     * storage (a bound array would be uploaded before and downloaded after every run), given
     * the arrays' values here; evaluate() refreshes an evaluation executor's copy. */
    if (o->backend == PBL_BACKEND_CPU ? model_bind(n, m) != 0 : model_write(n, m) != 0)
        goto fail_destroy;
    return 0;

fail_destroy:
    net_destroy(n);
    return -1;
}

static int64_t graph_param_count(const pbl_graph *g)
{
    int64_t total = 0;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) == PBL_OK && vi.kind == PBL_VALUE_PARAM)
            total += pbl_shape_numel(&vi.shape);
    }
    return total;
}

/* ---- training and evaluation ----------------------------------------------------------- */

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Redraws the progress bar in place; only called when stderr is a terminal. */
static void progress_draw(long epoch, long epochs, int64_t done, int64_t total, double loss)
{
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int filled = (int)(WIDTH * done / total);
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[WIDTH] = '\0';
    fprintf(stderr, "\repoch %ld/%ld [%s] %3d%%  loss %.4f", epoch, epochs, bar,
            (int)(100 * done / total), loss);
}

static void progress_clear(void)
{
    fprintf(stderr, "\r%70s\r", "");
}

/* The run's shuffling, its schedule and its step count, carried from one epoch to the next. */
typedef struct trainer {
    net            *t;
    const dataset  *d;
    const options  *o;
    int64_t         n_train; /* samples [0, n_train) train; the rest validate */
    int64_t         n_batches;
    int64_t        *order;
    float          *x, *logits;
    int32_t        *y;
    rng             r;
    pbl_lr_schedule sched;
    int64_t         step;
    int             progress;
} trainer;

static void trainer_free(trainer *tr)
{
    free(tr->logits);
    free(tr->y);
    free(tr->x);
    free(tr->order);
}

static int trainer_init(trainer *tr, net *t, const dataset *d, const options *o, int64_t n_train, int progress)
{
    *tr = (trainer){ .t = t, .d = d, .o = o, .n_train = n_train, .progress = progress };
    /* every example counts: the last batch of an epoch may be partial, and runs with its real
     * count through the same executor (pbl_exec_set_batch), its loss the mean over its rows */
    tr->n_batches = (n_train + t->batch - 1) / t->batch;
    /* data-parallel: each step is --batch samples, t->batch of them on each rank; the last
     * partial batch of an epoch is left out (its samples could not be shared evenly) */
    if (o->ranks > 1)
        tr->n_batches = n_train / o->batch;
    tr->order = malloc((size_t)(n_train > 0 ? n_train : 1) * sizeof *tr->order);
    tr->x = malloc((size_t)t->batch * N_PIXELS * sizeof *tr->x);
    tr->y = malloc((size_t)t->batch * sizeof *tr->y);
    tr->logits = malloc((size_t)t->batch * N_CLASSES * sizeof *tr->logits);
    if (!tr->order || !tr->x || !tr->y || !tr->logits) {
        complain("out of memory for a training batch");
        trainer_free(tr);
        return -1;
    }
    rng_seed(&tr->r, o->seed, 2);
    for (int64_t i = 0; i < n_train; i++)
        tr->order[i] = i;
    tr->sched = schedule_of(o, o->epochs * tr->n_batches, tr->n_batches);
    return 0;
}

/* How many rows of logits [n, N_CLASSES] have their highest logit at the label. */
static int64_t count_correct(const float *logits, const int32_t *y, int64_t n)
{
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *row = logits + i * N_CLASSES;
        int best = 0;
        for (int c = 1; c < N_CLASSES; c++)
            if (row[c] > row[best])
                best = c;
        correct += best == y[i];
    }
    return correct;
}

/* The order of an epoch's samples: the last epoch's, shuffled (Fisher-Yates). */
static void shuffle_epoch(trainer *tr)
{
    for (int64_t i = tr->n_train - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&tr->r, (uint64_t)i + 1);
        int64_t tmp = tr->order[i];
        tr->order[i] = tr->order[j];
        tr->order[j] = tmp;
    }
}

/* One pass over the training samples: their mean batch loss and the share of them the
 * training step classified right (with the weights of the moment, as they change). */
static int train_epoch(trainer *tr, long epoch, epoch_stats *st)
{
    net *t = tr->t;
    const options *o = tr->o;
    const int64_t batch = t->batch;
    shuffle_epoch(tr);
    const double start = now_seconds();
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t b = 0; b < tr->n_batches; b++) {
        const int64_t rows = o->ranks > 1 || tr->n_train - b * batch >= batch ? batch : tr->n_train - b * batch;
        if (o->ranks > 1) /* this rank's share of step b's o->batch samples */
            gather(tr->d, tr->order + b * o->batch + (int64_t)o->rank * batch, rows, tr->x, tr->y);
        else
            gather(tr->d, tr->order + b * batch, rows, tr->x, tr->y);
        float loss;
        if ((uses_schedule(o) && pbl_exec_set_scalar(t->e, "lr", pbl_lr_schedule_at(&tr->sched, tr->step)) != PBL_OK) ||
            pbl_exec_set_batch(t->e, rows) != PBL_OK ||
            pbl_exec_write(t->e, t->x, tr->x, (size_t)rows * N_PIXELS * sizeof *tr->x) != PBL_OK ||
            pbl_exec_write(t->e, t->y, tr->y, (size_t)rows * sizeof *tr->y) != PBL_OK ||
            pbl_exec_run(t->e) != PBL_OK || pbl_exec_read(t->e, t->loss, &loss, sizeof loss) != PBL_OK ||
            pbl_exec_read(t->e, t->logits, tr->logits, (size_t)rows * N_CLASSES * sizeof(float)) != PBL_OK ||
            pbl_exec_set_scalar(t->e, "step", (double)(++tr->step + 1)) != PBL_OK) {
            if (tr->progress)
                progress_clear();
            complain("epoch %ld, batch %" PRId64 ": %s", epoch, b + 1, pbl_exec_errmsg(t->e));
            return -1;
        }
        loss_sum += (double)loss * (double)rows; /* the epoch's loss: the mean over its examples */
        correct += count_correct(tr->logits, tr->y, rows);
        if (tr->progress && (b % 16 == 0 || b + 1 == tr->n_batches))
            progress_draw(epoch, o->epochs, b + 1, tr->n_batches, loss_sum / (double)(b * batch + rows));
    }
    int64_t seen = o->ranks > 1 ? tr->n_batches * o->batch : tr->n_train;
    if (o->ranks > 1) { /* every rank's share of the epoch's loss and hits, for rank 0 to print */
        float sums[2] = { (float)loss_sum, (float)correct };
        if (pbl_comm_allreduce_sum(o->comm, sums, 2) != PBL_OK) {
            complain("epoch %ld: summing the ranks' losses: %s", epoch, pbl_comm_errmsg(o->comm));
            return -1;
        }
        loss_sum = sums[0];
        correct = (int64_t)sums[1];
    }
    st->secs = now_seconds() - start;
    if (tr->progress)
        progress_clear();
    st->train_loss = loss_sum / (double)seen;
    st->train_acc = (double)correct / (double)seen;
    st->samples_per_s = st->secs > 0 ? (double)seen / st->secs : 0.0;
    return 0;
}

/* The evaluation net (forward only), planned for `batch` (EVAL_BATCH, or the larger of the
 * validation and test sets when both are smaller) and made when first needed; smaller
 * chunks run in it after pbl_exec_set_batch. */
typedef struct evaluator {
    model         *m;
    const options *o;
    const net     *trained; /* --backend cuda: the training net, whose weights evaluate() copies */
    int64_t        batch;
    net            net;
    int            made;
    float         *x;
    float          logits[EVAL_BATCH * N_CLASSES];
    int32_t        y[EVAL_BATCH];
} evaluator;

static void evaluator_free(evaluator *ev)
{
    if (ev->made)
        net_destroy(&ev->net);
    free(ev->x);
    ev->x = NULL;
    ev->made = 0;
}

/* Mean cross-entropy and accuracy of the current weights on samples [first, first + count). */
static int evaluate(evaluator *ev, const dataset *d, int64_t first, int64_t count, double *loss, double *acc)
{
    if (!ev->x && !(ev->x = malloc((size_t)ev->batch * N_PIXELS * sizeof *ev->x))) {
        complain("out of memory for an evaluation batch");
        return -1;
    }
    if (!ev->made) {
        if (net_create(&ev->net, ev->m, ev->o, ev->batch, 0) != 0)
            return -1;
        ev->made = 1;
    }
    net *n = &ev->net;
    /* on the GPU the latest weights are in the training executor's device storage: through
     * the model's arrays into this executor's (on the CPU both bind the arrays themselves) */
    if (ev->o->backend != PBL_BACKEND_CPU && (model_read(ev->trained, ev->m) != 0 || model_write(n, ev->m) != 0))
        return -1;
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t done = 0; done < count;) {
        const int64_t batch = count - done < ev->batch ? count - done : ev->batch;
        const int64_t at = first + done;
        for (int64_t i = 0; i < batch; i++) {
            const uint8_t *img = d->images.data + (size_t)(at + i) * N_PIXELS;
            for (int p = 0; p < N_PIXELS; p++)
                ev->x[i * N_PIXELS + p] = (float)img[p] * (1.0f / 255.0f);
            ev->y[i] = d->labels.data[at + i];
        }
        if (pbl_exec_set_batch(n->e, batch) != PBL_OK ||
            pbl_exec_write(n->e, n->x, ev->x, (size_t)batch * N_PIXELS * sizeof *ev->x) != PBL_OK ||
            pbl_exec_run(n->e) != PBL_OK ||
            pbl_exec_read(n->e, n->logits, ev->logits, (size_t)batch * N_CLASSES * sizeof(float)) != PBL_OK) {
            complain("evaluating samples %" PRId64 "..%" PRId64 ": %s", at, at + batch - 1, pbl_exec_errmsg(n->e));
            return -1;
        }
        for (int64_t i = 0; i < batch; i++) { /* cross-entropy: log-sum-exp minus the label's logit */
            const float *row = ev->logits + i * N_CLASSES;
            double top = row[0], sum = 0;
            for (int c = 1; c < N_CLASSES; c++)
                top = row[c] > top ? row[c] : top;
            for (int c = 0; c < N_CLASSES; c++)
                sum += exp((double)row[c] - top);
            loss_sum += top + log(sum) - (double)row[ev->y[i]];
        }
        correct += count_correct(ev->logits, ev->y, batch);
        done += batch;
    }
    *loss = count > 0 ? loss_sum / (double)count : 0;
    *acc = count > 0 ? (double)correct / (double)count : 0;
    return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

/* Signals: the temporaries of --save's and --plot's writes in progress are removed. */
static int cleanup_on_signal(void)
{
    return pbl_cleanup_temporaries();
}

/* The model's name, "784-256-128-10". */
static void model_shape(const model *m, char *shape, size_t size)
{
    int used = snprintf(shape, size, "%d", N_PIXELS);
    for (int l = 0; l < m->n_layers && used < (int)size; l++)
        used += snprintf(shape + used, size - (size_t)used, "-%" PRId64, m->out[l]);
}

/* --plot: the curves as FILE, and the training graph beside it as FILE's stem + ".json" for
 * `pebble viz`, whose page shows the step's memory plan. */
static int write_plot(const options *o, const net *train_net, const char *shape, const epoch_stats *hist, long n,
                      int64_t n_val)
{
    char title[256], err[512];
    snprintf(title, sizeof title, "train_mlp %s, batch %ld, seed %" PRIu64 "%s", shape, o->batch, o->seed,
             n_val > 0 ? "" : " (no validation split)");
    if (plot_svg_write(o->plot, title, hist, (int)n, n_val > 0, err, sizeof err) != 0) {
        complain("%s", err);
        return -1;
    }
    char json[4096];
    size_t len;
    if (plot_json_name(o->plot, json, sizeof json, &len) != 0) { /* not reached: checked first */
        complain("--plot %s: the name is too long to put the graph beside it", o->plot);
        return -1;
    }
    if (pbl_graph_save_json(train_net->g, json, err, sizeof err) != PBL_OK) {
        complain("%s", err);
        return -1;
    }
    printf("plot: %s; memory view of the training step: pebble viz %s --html %.*s.html\n", o->plot, json, (int)len,
           o->plot);
    return 0;
}

/* Under a launcher (mpirun -np N, N > 1) the process is one rank of a data-parallel run:
 * joins the others (pebble/exec.h pbl_comm) and silences stdout on all but rank 0. Returns -1
 * to go on, or the exit status to stop with. */
static int join_ranks(options *o)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n)
        n = getenv("PMI_SIZE"); /* MPICH's launchers */
    o->rank = 0;
    o->ranks = 1;
    if (!n || atoi(n) <= 1)
        return -1;
    char err[512];
    if (pbl_comm_create_mpi(&o->comm, NULL, err, sizeof err) != PBL_OK) {
        complain("started by an MPI launcher, but %s", err);
        return 1;
    }
    o->rank = pbl_comm_rank(o->comm);
    o->ranks = pbl_comm_size(o->comm);
    if (o->backend == PBL_BACKEND_CUDA) { /* pbl_exec_create would refuse it after the data is loaded */
        if (o->rank == 0)
            complain("--backend cuda: data-parallel training under an MPI launcher runs on the CPU only (MPI "
                     "sums host memory; the CUDA backend needs an NCCL communicator, docs/data_parallel.md)");
        pbl_comm_destroy(o->comm);
        o->comm = NULL;
        return EXIT_USAGE;
    }
    if (o->batch % o->ranks != 0) {
        if (o->rank == 0)
            complain("--batch: %ld samples cannot be shared evenly by %d ranks (make it a multiple of %d)", o->batch,
                     (int)o->ranks, (int)o->ranks);
        pbl_comm_destroy(o->comm);
        o->comm = NULL;
        return EXIT_USAGE;
    }
    if (o->rank > 0 && !freopen("/dev/null", "w", stdout)) { /* rank 0 prints, evaluates and saves */
        complain("rank %d: cannot silence stdout: %s", (int)o->rank, strerror(errno));
        return 1;
    }
    return -1;
}

/* After --load: the checkpoint's "step" (the step about to run; 1 for a checkpoint without
 * it, one of an older pebble) says how many steps the run it came from had done. The run goes
 * on from there: tr's step (the schedule's position) is that count and the epochs before it
 * are skipped, their shuffles replayed, so the rest is what the interrupted run would have
 * done. *first_epoch is the first epoch to train. 0, or the exit status after a message: 1
 * when the checkpoint's step is no step count (the file is bad), EXIT_USAGE when the count
 * does not end an epoch of this run (another --batch or --val). */
static int resume_at(const options *o, trainer *tr, long *first_epoch)
{
    double next = 1;
    if (pbl_exec_get_scalar(tr->t->e, "step", &next) != PBL_OK) {
        complain("--load %s: %s", o->load, pbl_exec_errmsg(tr->t->e));
        return 1;
    }
    /* pbl_exec_load takes any finite scalar: a step that is fractional, below 1 or past what
     * int64_t holds (its conversion is undefined) did not come from a run of this program */
    if (!(next >= 1 && next <= 0x1p53) || next != floor(next)) {
        complain("--load %s: its 'step' scalar is %g, not a step count (a whole number from 1)", o->load, next);
        return 1;
    }
    const int64_t done = (int64_t)next - 1;
    if (done == 0)
        return 0;
    if (done % tr->n_batches != 0) {
        complain("--load %s: its run stopped after step %" PRId64 ", inside an epoch of %" PRId64
                 " steps (was it trained with another --batch or --val?)", o->load, done, tr->n_batches);
        return EXIT_USAGE;
    }
    const int64_t epochs_done = done / tr->n_batches;
    for (int64_t e = 0; e < epochs_done && e < o->epochs; e++)
        shuffle_epoch(tr);
    tr->step = done;
    *first_epoch = epochs_done + 1 > o->epochs ? o->epochs + 1 : (long)(epochs_done + 1);
    printf("resuming after epoch %" PRId64 " (step %" PRId64 ")%s\n", epochs_done, done,
           epochs_done >= o->epochs ? ": every epoch of --epochs is done" : "");
    return 0;
}

/* The run, on one rank or each of several. */
static int main_ranked(const options *opt)
{
    /* an interrupted --save or --plot leaves no temporary file (pebble/status.h) */
    args_on_signals(cleanup_on_signal);

    int rc = 1;
    options o = *opt;
    dataset train_set, test_set;
    if (load_dataset(&train_set, o.data, dataset_files[0], dataset_files[1]) != 0)
        return rc;
    if (load_dataset(&test_set, o.data, dataset_files[2], dataset_files[3]) != 0)
        goto free_train_set;
    /* the validation split: the last n_val training images, the same for every seed */
    const int64_t n_val = o.val >= 0 ? o.val : train_set.n / 12;
    if (n_val >= train_set.n) {
        complain("--val: %ld leaves no training images (the training set has %" PRId64 ")", o.val, train_set.n);
        rc = EXIT_USAGE;
        goto free_test_set;
    }
    const int64_t n_train = train_set.n - n_val;
    if (o.epochs > 0 && o.batch > n_train) {
        complain("--batch: %ld is larger than the training set (%" PRId64 " images%s)", o.batch, n_train,
                 n_val > 0 ? " after the validation split" : "");
        rc = EXIT_USAGE;
        goto free_test_set;
    }

    /* the default warm-up: 500 steps, or a quarter of a shorter run (so any run can have one) */
    if (o.warmup < 0) {
        const int64_t quarter = o.epochs * ((n_train + o.batch - 1) / o.batch) / 4;
        o.warmup = quarter < DEFAULT_WARMUP ? (long)quarter : DEFAULT_WARMUP;
    }
    if (uses_schedule(&o) && o.epochs > 0) {
        int64_t per_epoch = (n_train + o.batch - 1) / o.batch;
        pbl_lr_schedule sched = schedule_of(&o, o.epochs * per_epoch, per_epoch);
        char why[160];
        if (pbl_lr_schedule_check(&sched, why, sizeof why) != PBL_OK) {
            complain("--lr-schedule/--warmup: %s (%" PRId64 " steps in all)", why, o.epochs * per_epoch);
            rc = EXIT_USAGE;
            goto free_test_set;
        }
    }

    model m;
    /* one evaluation net for the validation split and the test set, the last chunk of each partial */
    const int64_t eval_n = n_val > test_set.n ? n_val : test_set.n;
    trainer tr = { 0 };
    epoch_stats *hist = NULL;
    net train_net = { 0 };
    evaluator ev = { .m = &m, .o = &o, .trained = &train_net, .batch = eval_n < EVAL_BATCH ? eval_n : EVAL_BATCH };
    if (model_init(&m, &o) != 0)
        goto free_model;
    if (net_create(&train_net, &m, &o, o.batch / o.ranks, 1) != 0)
        goto free_nets;
    /* --save's and --plot's folders are writable (and the names no directories) before the
     * epochs, not after them: the trained model would otherwise be lost */
    if (o.save && pbl_exec_save_check(train_net.e, o.save) != PBL_OK) {
        complain("%s", pbl_exec_errmsg(train_net.e));
        goto free_nets;
    }
    char err[512];
    if (o.plot && pbl_file_check(o.plot, err, sizeof err) != PBL_OK) {
        complain("%s", err);
        goto free_nets;
    }

    pbl_exec_stats st;
    char shape[128];
    model_shape(&m, shape, sizeof shape);
    if (pbl_exec_stats_get(train_net.e, &st) != PBL_OK) {
        complain("reading executor statistics: %s", pbl_exec_errmsg(train_net.e));
        goto free_nets;
    }
    printf("model %s  %" PRId64 " parameters  batch %ld  train %" PRId64 "  validation %" PRId64 "  test %" PRId64
           "\n",
           shape, graph_param_count(train_net.g), o.batch, n_train, n_val, test_set.n);
    /* where it runs: the CPU's kernels, or the GPU (and which module, when PEBBLE_CUDA_MODULE
     * picks one: the host emulator of the tests, or a build other than the one beside libpebble) */
    const char *module = getenv("PEBBLE_CUDA_MODULE");
    printf("backend: %s on %s%s%s\n", o.backend == PBL_BACKEND_CUDA ? "cuda" : "cpu", pbl_exec_device(train_net.e),
           o.backend == PBL_BACKEND_CUDA && module && *module ? "; module " : "",
           o.backend == PBL_BACKEND_CUDA && module && *module ? module : "");
    if (o.ranks > 1)
        printf("data-parallel: %d ranks, %ld samples each per step, gradients all-reduced over MPI\n", (int)o.ranks,
               o.batch / o.ranks);
    if (o.show_plan) {
        printf("memory plan of one training step (%d nodes):\n", st.nodes);
        pbl_exec_dump_plan(train_net.e, stdout);
    }
    /* naive: the `naive` strategy on the same records (what `pebble plan --strategy naive`
     * prints); unshared: every value its own bytes, in place or not (pebble/exec.h) */
    printf("memory: arena %" PRIu64 " bytes (%s), naive %" PRIu64 " (%.2fx), unshared %" PRIu64
           " (%.2fx), lower bound %" PRIu64 " (%.3fx); %d values share in place\n",
           st.arena_bytes, st.strategy, st.naive_bytes, (double)st.naive_bytes / (double)st.arena_bytes,
           st.unshared_bytes, (double)st.unshared_bytes / (double)st.arena_bytes, st.lower_bound,
           (double)st.arena_bytes / (double)st.lower_bound, st.inplace);
    fflush(stdout);

    if (o.load && pbl_exec_load(train_net.e, o.load) != PBL_OK) {
        complain("%s", pbl_exec_errmsg(train_net.e));
        goto free_nets;
    }
    if (o.epochs > 0) {
        if (trainer_init(&tr, &train_net, &train_set, &o, n_train, o.rank == 0 && isatty(fileno(stderr))) != 0)
            goto free_nets;
        if (!(hist = calloc((size_t)o.epochs, sizeof *hist))) {
            complain("out of memory for %ld epochs' statistics", o.epochs);
            goto free_nets;
        }
    }
    /* a resumed run skips the epochs its checkpoint had trained, shuffling as they did */
    long first_epoch = 1;
    int resumed = o.load && o.epochs > 0 ? resume_at(&o, &tr, &first_epoch) : 0;
    if (resumed != 0) {
        rc = resumed;
        goto free_nets;
    }
    /* with validation, --save keeps the best epoch's model; without, the last one */
    long best_epoch = 0;
    double best_acc = -1;
    for (long epoch = first_epoch; epoch <= o.epochs; epoch++) {
        epoch_stats *es = &hist[epoch - 1];
        if (train_epoch(&tr, epoch, es) != 0)
            goto free_nets;
        printf("epoch %ld/%ld  loss %.4f  acc %.4f", epoch, o.epochs, es->train_loss, es->train_acc);
        if (n_val > 0 && o.rank == 0) { /* the other ranks' weights are the same bits */
            if (evaluate(&ev, &train_set, n_train, n_val, &es->val_loss, &es->val_acc) != 0)
                goto free_nets;
            printf("  val loss %.4f  val acc %.4f", es->val_loss, es->val_acc);
        }
        printf("  %" PRId64 " steps, %" PRId64 " examples  %.1f s  %.0f samples/s", tr.n_batches,
               o.ranks > 1 ? tr.n_batches * o.batch : n_train, es->secs,
               es->samples_per_s);
        if (n_val > 0 && o.rank == 0 && es->val_acc > best_acc) {
            best_acc = es->val_acc;
            best_epoch = epoch;
            if (o.save) {
                if (pbl_exec_save(train_net.e, o.save) != PBL_OK) {
                    printf("\n");
                    fflush(stdout);
                    complain("%s", pbl_exec_errmsg(train_net.e));
                    goto free_nets;
                }
                printf("  saved (best val acc)");
            }
        }
        printf("\n");
        fflush(stdout);
    }
    if (o.rank > 0) { /* rank 0 plots, saves and evaluates */
        rc = 0;
        goto free_nets;
    }
    if (o.save && best_epoch == 0) {
        if (pbl_exec_save(train_net.e, o.save) != PBL_OK) {
            complain("%s", pbl_exec_errmsg(train_net.e));
            goto free_nets;
        }
    } else if (best_epoch > 0) {
        printf("best validation accuracy %.4f at epoch %ld%s%s\n", best_acc, best_epoch,
               o.save ? ": its model is saved in " : "", o.save ? o.save : "");
    }
    /* the plot shows the epochs this run trained */
    if (o.plot && write_plot(&o, &train_net, shape, hist + (first_epoch - 1), o.epochs - first_epoch + 1, n_val) != 0)
        goto free_nets;

    double test_loss, test_acc;
    if (evaluate(&ev, &test_set, 0, test_set.n, &test_loss, &test_acc) != 0)
        goto free_nets;
    printf("test accuracy: %.4f\n", test_acc);
    rc = 0;

free_nets:
    free(hist);
    trainer_free(&tr);
    evaluator_free(&ev);
    net_destroy(&train_net);
free_model:
    model_free(&m);
free_test_set:
    dataset_free(&test_set);
free_train_set:
    dataset_free(&train_set);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != ARGS_GO_ON)
        return rc;
    if ((rc = check_save_is_no_input(&o)) != 0)
        return rc;
    if ((rc = join_ranks(&o)) != -1)
        return rc;
    rc = main_ranked(&o);
    pbl_comm_destroy(o.comm);
    return rc;
}
