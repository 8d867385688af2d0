/* quickstart: build a tiny regression model, differentiate it, train it with SGD.
 * The README shows this file; it is built and run as a test so the README stays true. */
#include <pebble/pebble.h>
#include <stdio.h>

int main(void)
{
    pbl_graph *g;
    pbl_graph_create(&g, NULL);

    /* y ≈ x·wᵀ + b, fitted to the line y = 3x − 1 on four points */
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4, 1));
    pbl_value t = pbl_input(g, "t", PBL_SHAPE(4, 1));
    pbl_value w = pbl_param(g, "w", PBL_SHAPE(1, 1));
    pbl_value b = pbl_param(g, "b", PBL_SHAPE(1));
    pbl_value loss = pbl_mse_loss(g, pbl_fully_connected(g, x, w, b), t);
    if (pbl_graph_build_status(g) != PBL_OK) {
        fprintf(stderr, "quickstart: %s\n", pbl_graph_errmsg(g));
        return 1;
    }
    pbl_graph_set_output(g, "loss", loss);

    /* backward nodes and one SGD update per parameter: one run = one training step */
    pbl_value params[] = { w, b }, grads[2];
    pbl_optimizer_options opt = pbl_optimizer_options_default(PBL_OPTIM_SGD);
    opt.lr = 0.1;
    if (pbl_graph_gradient(g, loss, params, 2, grads) != PBL_OK ||
        pbl_graph_add_optimizer(g, &opt, params, grads, 2) != PBL_OK) {
        fprintf(stderr, "quickstart: %s\n", pbl_graph_errmsg(g));
        return 1;
    }

    pbl_exec *e;
    char err[256];
    if (pbl_exec_create(&e, g, NULL, err, sizeof err) != PBL_OK) {
        fprintf(stderr, "quickstart: %s\n", err);
        return 1;
    }
    float xs[4] = { 0, 1, 2, 3 }, ts[4] = { -1, 2, 5, 8 }, ws[1] = { 0 }, bs[1] = { 0 }, l = 0;
    pbl_exec_bind(e, w, ws, sizeof ws); /* parameters live in our buffers */
    pbl_exec_bind(e, b, bs, sizeof bs);
    pbl_exec_write(e, x, xs, sizeof xs);
    pbl_exec_write(e, t, ts, sizeof ts);
    for (int step = 0; step < 200; step++) {
        if (pbl_exec_run(e) != PBL_OK) {
            fprintf(stderr, "quickstart: %s\n", pbl_exec_errmsg(e));
            return 1;
        }
    }
    pbl_exec_read(e, loss, &l, sizeof l);
    printf("w = %.3f, b = %.3f, loss = %.2g\n", ws[0], bs[0], l);

    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    return ws[0] > 2.9f && ws[0] < 3.1f && bs[0] > -1.1f && bs[0] < -0.9f ? 0 : 1;
}
