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
 *
 * The program in four files: the command line (train_mlp_args.c), the model and its graphs
 * (train_mlp_model.c), what they share (train_mlp.h), and here the data, the training and
 * evaluation loops, resuming, data-parallel ranks and main.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, isatty, fileno */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h" /* args_on_signals */
#include "idx.h"
#include "plot_svg.h"
#include "rng.h"
#include "train_mlp.h"

#define EVAL_BATCH 1000

/* ---- data ------------------------------------------------------------------------------ */

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
static int write_plot(const options *o, const net *train_net, const char *shape, const epoch_stats *hist, long first,
                      long n, int64_t n_val)
{
    char title[256], err[512];
    snprintf(title, sizeof title, "train_mlp %s, batch %ld, seed %" PRIu64 "%s", shape, o->batch, o->seed,
             n_val > 0 ? "" : " (no validation split)");
    if (plot_svg_write(o->plot, title, hist, (int)n, (int)first, n_val > 0, err, sizeof err) != 0) {
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
        /* step and none have no end for the check to see; the run does */
        if (o.warmup > o.epochs * per_epoch) {
            complain("--warmup: %ld steps outlast the run (%" PRId64 " steps in all): the rate would never reach --lr",
                     o.warmup, o.epochs * per_epoch);
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
    char err[512], plot_json[4096];
    size_t plot_stem;
    if (o.plot && (pbl_file_check(o.plot, err, sizeof err) != PBL_OK ||
                   /* and the graph it writes beside it (its name fits: checked with the options) */
                   (plot_json_name(o.plot, plot_json, sizeof plot_json, &plot_stem) == 0 &&
                    pbl_file_check(plot_json, err, sizeof err) != PBL_OK))) {
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
    if (o.plot && write_plot(&o, &train_net, shape, hist + (first_epoch - 1), first_epoch, o.epochs - first_epoch + 1,
                             n_val) != 0)
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
