/*
 * train_mlp's parts (examples/train_mlp.c says what the program does): the command line
 * (train_mlp_args.c), the model and its graphs (train_mlp_model.c), and the training loop
 * with main (train_mlp.c) share these types and calls. An example, not a library: the names
 * carry no prefix.
 */
#ifndef TRAIN_MLP_H
#define TRAIN_MLP_H

#include <stdint.h>

#include <pebble/pebble.h>

#define N_PIXELS     784 /* 28 x 28, what the first layer expects */
#define N_CLASSES    10
#define MAX_HIDDEN   8
#define MAX_LAYERS   (MAX_HIDDEN + 1)
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define DEFAULT_WARMUP 500 /* steps; see --help */

enum { EXIT_USAGE = 2 };

/* ---- the command line (train_mlp_args.c) ------------------------------------------------ */

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

/* Prints `train_mlp: <message>` as one line on stderr. */
void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Returns -1 to go on, or the exit status to stop with (0 after --help or --version). */
int parse_args(int argc, char **argv, options *o);
/* 0, or EXIT_USAGE after a message when --save or --plot names a file this run reads. */
int check_save_is_no_input(const options *o);
/* --plot's companion, the training graph: NAME.json for --plot NAME.svg. 0, or -1 when it
 * does not fit `size`; *stem gets the length of NAME. */
int plot_json_name(const char *plot, char *json, size_t size, size_t *stem);
/* The four IDX files of a data set folder: training images and labels, test images and labels. */
extern const char *const dataset_files[4];

/* ---- the model and its graphs (train_mlp_model.c) -------------------------------------- */

/* The parameters, owned here; every executor binds these same arrays. */
typedef struct model {
    int     n_layers;
    int64_t in[MAX_LAYERS], out[MAX_LAYERS];
    float  *w[MAX_LAYERS]; /* [out, in] */
    float  *b[MAX_LAYERS]; /* [out] */
} model;

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

/* Seeded as PyTorch's nn.Linear initialises (0), or -1 after a message. */
int  model_init(model *m, const options *o);
void model_free(model *m);
/* Whether the learning rate follows a schedule (the runtime scalar "lr"). */
int  uses_schedule(const options *o);
/* The schedule of the options over `total` steps (one per training batch). */
pbl_lr_schedule schedule_of(const options *o, int64_t total, int64_t per_epoch);
/* The training step (training 1) or the forward pass, planned for `batch`, its parameters the
 * model's arrays (CPU) or written from them (CUDA). 0, or -1 after a message. */
int  net_create(net *n, const model *m, const options *o, int64_t batch, int training);
void net_destroy(net *n);
/* The model's arrays into n's executor storage, and back. 0, or -1 after a message. */
int  model_write(net *n, const model *m);
int  model_read(const net *n, model *m);
/* How many parameters (floats) the graph holds. */
int64_t graph_param_count(const pbl_graph *g);

#endif
