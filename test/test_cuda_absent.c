/*
 * Without a usable CUDA backend (built with PEBBLE_CUDA=OFF, or no device on this machine)
 * creating a CUDA executor fails cleanly: PBL_ERR_UNSUPPORTED, a message saying why, *out
 * NULL, and every host byte the executor took through the allocator hook given back.
 * With a device the program exits 77 (test_cuda covers that case).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/pebble.h"

typedef struct counter {
    long live, calls;
} counter;

static void *count_alloc(void *ctx, size_t bytes)
{
    counter *c = ctx;
    void *p = malloc(bytes + 16);
    if (!p)
        return NULL;
    memcpy(p, &bytes, sizeof bytes);
    c->live += (long)bytes;
    c->calls++;
    return (char *)p + 16;
}

static void count_free(void *ctx, void *p, size_t bytes)
{
    counter *c = ctx;
    if (!p)
        return;
    size_t had;
    memcpy(&had, (char *)p - 16, sizeof had);
    c->live -= (long)had;
    free((char *)p - 16);
}

int main(void)
{
    int fails = 0;
    pbl_graph *g = NULL;
    if (pbl_graph_create(&g, NULL) != PBL_OK)
        return 1;
    pbl_value x = pbl_input(g, "x", PBL_SHAPE(8, 4));
    pbl_value w = pbl_param(g, "w", PBL_SHAPE(3, 4));
    pbl_graph_set_output(g, "y", pbl_relu(g, pbl_fully_connected(g, x, w, PBL_NONE)));
    if (pbl_graph_build_status(g) != PBL_OK)
        return 1;
    for (int streams = 0; streams <= 2; streams++) {
        counter c = { 0, 0 };
        pbl_allocator a = { .alloc = count_alloc, .free = count_free, .user = &c };
        pbl_exec_options o = pbl_exec_options_default();
        o.allocator = &a;
        o.backend = PBL_BACKEND_CUDA;
        o.streams = streams;
        o.cuda_graph = streams == 2;
        pbl_exec *e = (pbl_exec *)&c; /* must come back NULL */
        char err[256] = "";
        pbl_status s = pbl_exec_create(&e, g, &o, err, sizeof err);
        if (s == PBL_OK) {
            printf("a CUDA device is present: test_cuda covers it (skipped)\n");
            pbl_exec_destroy(e);
            pbl_graph_destroy(g);
            return 77;
        }
        printf("streams %d: %s: %s (%ld allocations, %ld bytes left)\n", streams, pbl_status_name(s), err, c.calls,
               c.live);
        if (s != PBL_ERR_UNSUPPORTED) {
            fprintf(stderr, "FAIL: want PBL_ERR_UNSUPPORTED, got %s\n", pbl_status_name(s));
            fails++;
        }
        if (!strstr(err, "CUDA")) {
            fprintf(stderr, "FAIL: the message does not say CUDA: '%s'\n", err);
            fails++;
        }
        if (e != NULL) {
            fprintf(stderr, "FAIL: *out is not NULL after a failure\n");
            fails++;
        }
        if (c.live != 0) {
            fprintf(stderr, "FAIL: %ld host bytes leaked\n", c.live);
            fails++;
        }
    }
    /* pbl_exec_device: a CPU executor names the CPU, as pbl_cpu_describe does */
    pbl_exec *cpu = NULL;
    pbl_exec_options o = pbl_exec_options_default();
    if (pbl_exec_create(&cpu, g, &o, NULL, 0) != PBL_OK) {
        fprintf(stderr, "FAIL: creating a CPU executor\n");
        fails++;
    } else {
        printf("cpu executor's device: %s\n", pbl_exec_device(cpu));
        if (strcmp(pbl_exec_device(cpu), pbl_cpu_describe()) != 0) {
            fprintf(stderr, "FAIL: pbl_exec_device '%s' is not pbl_cpu_describe '%s'\n", pbl_exec_device(cpu),
                    pbl_cpu_describe());
            fails++;
        }
    }
    pbl_exec_destroy(cpu);
    if (strcmp(pbl_exec_device(NULL), "no executor") != 0) {
        fprintf(stderr, "FAIL: pbl_exec_device(NULL) is '%s'\n", pbl_exec_device(NULL));
        fails++;
    }
    pbl_graph_destroy(g);
    return fails ? 1 : 0;
}
