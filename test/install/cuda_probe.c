/* Asks an installed pebble for a CUDA executor and prints what happened: run.sh checks that
 * libpebble found libpebble_cuda.so by itself (no $PEBBLE_CUDA_MODULE, no LD_LIBRARY_PATH):
 * the executor opens on a GPU, and without one the module's own "no CUDA device" comes back,
 * not the loader's "libpebble_cuda.so: cannot open shared object file". */
#include <stdio.h>

#include <pebble/pebble.h>

int main(void)
{
    pbl_graph *g = NULL;
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        return 1;
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(4));
    pbl_graph_set_output(g, "y", pbl_relu(g, x));
    pbl_exec_options o = pbl_exec_options_default();
    o.backend = PBL_BACKEND_CUDA;
    pbl_exec *e = NULL;
    char err[512] = "";
    pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
    printf("%s%s%s\n", pbl_status_name(s), *err ? ": " : "", err);
    pbl_exec_destroy(e);
    pbl_graph_destroy(g);
    return 0;
}
