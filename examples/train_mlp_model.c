/*
 * train_mlp's model: the parameters it owns, and the graphs and executors built over them —
 * the training step (forward, explicit backward nodes, clipping, AdamW, and under mpirun the
 * data-parallel all-reduce) and the forward pass that evaluates (examples/train_mlp.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "train_mlp.h"

int model_init(model *m, const options *o)
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

void model_free(model *m)
{
    for (int l = 0; l < m->n_layers; l++) {
        free(m->w[l]);
        free(m->b[l]);
    }
}

int uses_schedule(const options *o) { return o->schedule >= 0 || o->warmup > 0; }

/* The schedule of the options over `total` steps (one per training batch). */
pbl_lr_schedule schedule_of(const options *o, int64_t total, int64_t per_epoch)
{
    pbl_lr_schedule s = pbl_lr_schedule_default(o->schedule >= 0 ? (pbl_lr_schedule_kind)o->schedule : PBL_LR_CONSTANT,
                                                o->lr);
    s.warmup_steps = o->warmup;
    s.total_steps = total;
    s.step_size = 3 * per_epoch;
    s.gamma = 0.5;
    return s;
}

void net_destroy(net *n)
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
int model_write(net *n, const model *m)
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
int model_read(const net *n, model *m)
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

int net_create(net *n, const model *m, const options *o, int64_t batch, int training)
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

int64_t graph_param_count(const pbl_graph *g)
{
    int64_t total = 0;
    for (pbl_value v = 0; v < pbl_graph_value_count(g); v++) {
        pbl_value_info vi;
        if (pbl_graph_value_info(g, v, &vi) == PBL_OK && vi.kind == PBL_VALUE_PARAM)
            total += pbl_shape_numel(&vi.shape);
    }
    return total;
}
