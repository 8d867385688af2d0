/* libFuzzer target for the JSON graph loader: any bytes must give a graph or a clean error
 * (a status and a message), never a crash, a leak or a huge allocation; a graph that loads
 * must save, load again and save to the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pbl_graph *g = NULL;
    char err[512] = "";
    pbl_status s = pbl_graph_from_json(&g, (const char *)data, size, NULL, err, sizeof err);
    if (s != PBL_OK) {
        if (g || !err[0] || s >= 0) {
            fprintf(stderr, "error without a clean result: %d '%s'\n", (int)s, err);
            abort();
        }
        return 0;
    }
    char *t1 = NULL, *t2 = NULL;
    size_t n1 = 0, n2 = 0;
    pbl_graph *h = NULL;
    if (pbl_graph_to_json(g, &t1, &n1, err, sizeof err) == PBL_OK) {
        if (pbl_graph_from_json(&h, t1, n1, NULL, err, sizeof err) != PBL_OK) {
            fprintf(stderr, "a saved graph does not load: %s\n", err);
            abort();
        }
        if (pbl_graph_to_json(h, &t2, &n2, err, sizeof err) != PBL_OK || n1 != n2 || memcmp(t1, t2, n1) != 0) {
            fprintf(stderr, "save -> load -> save changed the text\n");
            abort();
        }
    }
    pbl_json_free(t1);
    pbl_json_free(t2);
    pbl_graph_destroy(h);
    pbl_graph_destroy(g);
    return 0;
}
