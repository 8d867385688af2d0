/*
 * train_mlp's command line: the options, their checks, and the files they must not clobber
 * (examples/train_mlp.h). It follows tools/args/args.h, as the pebble tool's does.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h" /* tools/args: the command-line convention the pebble tool shares */
#include "train_mlp.h"

/* ---- messages -------------------------------------------------------------------------- */

/* Prints `train_mlp: <message>` as exactly one line: library messages are quoted verbatim,
 * so any newline in them is flattened rather than trusted not to be there (tools/args). */
void complain(const char *fmt, ...)
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
            "  --threads T     CPU threads for the products and kernels (default 0: the\n"
            "                  BLAS library's own choice)\n"
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

/* ---- parsing ----------------------------------------------------------------------------- */

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

int parse_args(int argc, char **argv, options *o)
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

/* ---- files the run reads, which its outputs must not replace -------------------------- */

const char *const dataset_files[4] = { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz" };

/* NAME.json for --plot NAME.svg, PLOT.json for a name without ".svg". */
int plot_json_name(const char *plot, char *json, size_t size, size_t *stem)
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

/* Which file this run reads `path` names, as a phrase ("the data set's file D/F", "the
 * checkpoint --load reads") in buf, or NULL when none: the data set's four files and the
 * --load checkpoint. */
static const char LOAD_CHECKPOINT[] = "the checkpoint --load reads";

static const char *input_named(const options *o, const char *path, char *buf, size_t size)
{
    for (size_t i = 0; i < sizeof dataset_files / sizeof dataset_files[0]; i++) {
        char data[4096];
        snprintf(data, sizeof data, "%s/%s", o->data, dataset_files[i]);
        if (args_same_file(path, data)) {
            snprintf(buf, size, "the data set's file %s", data);
            return buf;
        }
    }
    return o->load && args_same_file(path, o->load) ? LOAD_CHECKPOINT : NULL;
}

/* --save and --plot (and the graph --plot writes beside it) must not name a file this run
 * reads, nor each other (a write replaces the file whole, so an input named as an output
 * would be lost). 0, or EXIT_USAGE after a message; checked before anything is loaded. */
int check_save_is_no_input(const options *o)
{
    char what[4200];
    if (o->plot) {
        char json[4096];
        size_t stem;
        if (plot_json_name(o->plot, json, sizeof json, &stem) != 0) {
            complain("--plot %s: the name is too long to put the graph beside it", o->plot);
            return EXIT_USAGE;
        }
        if (o->save && args_same_file(o->save, json)) {
            complain("--plot %s: its training graph %s would be written over the --save checkpoint", o->plot, json);
            return EXIT_USAGE;
        }
        const char *in = input_named(o, o->plot, what, sizeof what);
        if (in) {
            complain("--plot %s: that is %s; it would be overwritten", o->plot, in);
            return EXIT_USAGE;
        }
        if ((in = input_named(o, json, what, sizeof what)) != NULL) {
            complain("--plot %s: its training graph %s would be written over %s", o->plot, json, in);
            return EXIT_USAGE;
        }
    }
    if (!o->save)
        return 0;
    const char *in = input_named(o, o->save, what, sizeof what);
    if (in) {
        complain(in == LOAD_CHECKPOINT
                     ? "--save %s: that is %s; save under another name (and rename it after, if it should "
                       "replace the old one)"
                     : "--save %s: that is %s; it would be overwritten",
                 o->save, in);
        return EXIT_USAGE;
    }
    if (o->plot && args_same_file(o->save, o->plot)) {
        complain("--save %s: --plot names the same file", o->save);
        return EXIT_USAGE;
    }
    return 0;
}
