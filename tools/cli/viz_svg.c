/* `pebble viz --svg`: one strategy's plan as a static SVG picture. Time runs across, arena
 * addresses up; one rectangle per record (its id, bytes and lifetime in a <title>, which
 * viewers show on hover), the live-bytes curve as a line over them, the lower bound dashed. */
#include <math.h>
#include <string.h>

#include "cli.h"

enum { W = 1000, H = 560, LEFT = 84, RIGHT = 24, TOP = 64, BOTTOM = 48 };

/* "1.50 MiB" */
static void human_bytes(char *buf, size_t cap, double b)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.*f %s", u == 0 ? 0 : b < 10 ? 2 : b < 100 ? 1 : 0, b, unit[u]);
}

/* Text with &, <, > and quotes escaped. */
static void put_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Ticks for an axis of span: a step of about span/target, 1, 2 or 5 times a power of ten.
 * Bytes count in the largest unit the span reaches (0.2 GiB, 0.4 GiB, ... rather than
 * 205 MiB, 410 MiB, ...); steps are whole numbers. */
typedef struct ticks {
    double      step, unit;
    int         digits;
    const char *name;
} ticks;

static ticks ticks_for(double span, int target, int bytes)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    while (bytes && u < 4 && span >= pow(1024, u + 1))
        u++;
    ticks t = { .unit = bytes ? pow(1024, u) : 1, .name = bytes ? unit[u] : "" };
    double raw = span / t.unit / target, p = pow(10, floor(log10(raw > 0 ? raw : 1))), m = raw / p;
    double step = p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
    if ((!bytes || u == 0) && step < 1)
        step = 1;
    t.digits = step >= 1 ? 0 : (int)-floor(log10(step) + 1e-9);
    t.step = step * t.unit;
    return t;
}

/* Colour of record i: hues spread by the golden angle, so neighbours differ; for graphs, as
 * the page does, forward tensors in blues and greens, gradients in oranges and reds. */
static void colour(int32_t i, int backward, int graph, char *buf, size_t cap)
{
    double k = fmod(i * 0.618033988749895, 1.0);
    int light = 52 + (int)(i % 3) * 7;
    double hue = !graph ? fmod(i * 137.508, 360.0) : backward ? fmod(350 + k * 60, 360.0) : 160 + k * 90;
    snprintf(buf, cap, "hsl(%.0f,%d%%,%d%%)", hue, !graph ? 60 : backward ? 72 : 55, light);
}

void cli_viz_svg(FILE *f, const pbl_viz_plan *p, int32_t k, const pbl_viz_labels *l)
{
    const char *title = l->title;
    const char *const *ids = l->ids;
    const pbl_viz_strategy *s = &p->strategies[k];
    int64_t t0 = p->n_points ? p->time[0] : 0, t1 = p->n_points ? p->time[p->n_points - 1] : 1;
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    double top = (double)(s->arena > p->lower_bound ? s->arena : p->lower_bound);
    if (top <= 0)
        top = 1;
    double sx = pw / (double)(t1 > t0 ? t1 - t0 : 1), sy = ph / top;
    char a[32], lb[32], c[48];
    human_bytes(a, sizeof a, (double)s->arena);
    human_bytes(lb, sizeof lb, (double)p->lower_bound);

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"system-ui, sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n<text x=\"%d\" y=\"24\" font-size=\"16\" "
               "font-weight=\"600\">", W, H, LEFT);
    put_text(f, title);
    fprintf(f, " — %s</text>\n<text x=\"%d\" y=\"44\" fill=\"#444\">%d tensors · arena %s · lower bound %s · "
               "ratio %.4f · %.3f ms%s</text>\n", s->name, LEFT, (int)p->n_records, a, lb,
            p->lower_bound > 0 ? (double)s->arena / (double)p->lower_bound : 1.0, s->ms,
            s->optimal ? " · optimal" : "");

    /* axes: address ticks (bytes) on the left, steps along the bottom */
    fprintf(f, "<g stroke=\"#e4e4e4\" fill=\"#555\">\n");
    ticks tk = ticks_for(top, 6, 1);
    for (int j = 0; j * tk.step <= top * 1.0001; j++) {
        double py = TOP + ph - j * tk.step * sy;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" stroke=\"none\">%.*f%s%s</text>\n", LEFT, W - RIGHT, py, py, LEFT - 6, py + 4,
                j ? tk.digits : 0, j * tk.step / tk.unit, j ? " " : "", j ? tk.name : "");
    }
    tk = ticks_for((double)(t1 - t0), 8, 0);
    for (double t = ceil((double)t0 / tk.step) * tk.step; t <= (double)t1; t += tk.step) {
        double px = LEFT + (t - (double)t0) * sx;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" stroke=\"none\">%.0f</text>\n", px,
                H - BOTTOM + 16, t);
    }
    fprintf(f, "</g>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">step</text>\n",
            LEFT + (int)pw / 2, H - 10);

    /* the records */
    fprintf(f, "<g stroke=\"#fff\" stroke-width=\"0.5\">\n");
    for (int32_t i = 0; i < p->n_records; i++) {
        const pbl_usage_record *r = &p->records[i];
        double x = LEFT + (double)(r->first - t0) * sx, w = (double)(r->last - r->first) * sx;
        double h = (double)r->size * sy, y = TOP + ph - (double)(s->offset[i] + r->size) * sy;
        pbl_value_info vi;
        int backward = l->graph && pbl_graph_value_info(l->graph, l->graph_records->record_value[i], &vi) == PBL_OK &&
                       vi.is_backward;
        colour(i, backward, l->graph != NULL, c, sizeof c);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>", x, y,
                w > 0.5 ? w : 0.5, h > 0.5 ? h : 0.5, c);
        if (ids && ids[i])
            put_text(f, ids[i]);
        else
            fprintf(f, "r%d", (int)i);
        fprintf(f, ": %lld bytes at offset %lld, steps [%lld, %lld)</title></rect>\n", (long long)r->size,
                (long long)s->offset[i], (long long)r->first, (long long)r->last);
    }
    fprintf(f, "</g>\n");

    /* the live-bytes curve: the bytes a perfect packing would need at each step */
    fprintf(f, "<path fill=\"none\" stroke=\"#222\" stroke-width=\"1.2\" d=\"");
    for (int32_t j = 0; j + 1 < p->n_points; j++) { /* "M x y H x", then "V y H x" per step */
        double y = TOP + ph - (double)p->live[j] * sy;
        if (j == 0)
            fprintf(f, "M%.2f %.2f", LEFT + (double)(p->time[0] - t0) * sx, y);
        else
            fprintf(f, "V%.2f", y);
        fprintf(f, "H%.2f", LEFT + (double)(p->time[j + 1] - t0) * sx);
    }
    if (p->n_points > 1)
        fprintf(f, "V%.2f", TOP + ph);
    fprintf(f, "\"/>\n");
    double py = TOP + ph - (double)p->lower_bound * sy, pa = TOP + ph - (double)s->arena * sy;
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"6 4\"/>\n<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#d62728\">"
               "lower bound %s</text>\n", LEFT, W - RIGHT, py, py, W - RIGHT, py - 4, lb);
    if (s->arena > p->lower_bound)
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" stroke-width=\"1\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" fill=\"#333\">arena %s</text>\n", LEFT, W - RIGHT, pa, pa, LEFT + 4,
                pa - 4, a);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#999\"/>\n</svg>\n",
            LEFT, TOP, pw, ph);
}
