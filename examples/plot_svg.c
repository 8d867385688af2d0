/* plot_svg: train_mlp's picture of a run (see plot_svg.h). */
#include "plot_svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pebble/status.h"

/* A growing text buffer; `failed` once an allocation failed (the rest is then dropped). */
typedef struct text {
    char  *p;
    size_t len, cap;
    int    failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = t->failed ? -1 : vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap ? 2 * t->cap : 4096) + (size_t)n;
        char *q = realloc(t->p, cap);
        if (!q) {
            t->failed = 1;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
}

/* The text with &, < and > escaped for XML. */
static void put_escaped(text *t, const char *s)
{
    for (; *s; s++)
        put(t, "%s", *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : (char[]){ *s, 0 });
}

/* A step of 1, 2 or 5 times a power of ten that cuts [lo, hi] into about `parts`. */
static double nice_step(double lo, double hi, int parts)
{
    double raw = (hi - lo) / parts;
    double mag = pow(10, floor(log10(raw)));
    double f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* Geometry of one panel: its plot area in pixels and its data ranges. */
typedef struct panel {
    double left, top, width, height;
    double x0, x1, y0, y1;
} panel;

static double px(const panel *p, double x) { return p->left + (x - p->x0) / (p->x1 - p->x0) * p->width; }
static double py(const panel *p, double y) { return p->top + (p->y1 - y) / (p->y1 - p->y0) * p->height; }

/* How many decimals a tick step needs (0.05 -> 2, 0.1 -> 1, 2 -> 0). */
static int decimals_of(double step)
{
    int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d > 6 ? 6 : d;
}

/* A y tick's label: "0.85" as a rule; from 1e5 up, the tick as an integer times a power of ten
 * ("12e8" for 1.2e9), so a diverging run's labels stay a few characters wide and do not run
 * into the axis title. */
static void tick_label(char *buf, size_t size, double y, double step, int decimals)
{
    if (step < 1e5 && fabs(y) < 1e5) {
        snprintf(buf, size, "%.*f", decimals, y);
        return;
    }
    int e = (int)floor(log10(step) + 1e-9); /* step is 1, 2 or 5 times 10^e: y / 10^e is whole */
    double m = round(y / pow(10, e));
    if (m == 0)
        snprintf(buf, size, "0");
    else
        snprintf(buf, size, "%.0fe%d", m, e);
}

enum { TRAIN, VAL };
static const char *const series_name[] = { "training", "validation" };
static const char *const series_color[] = { "#1f77b4", "#d62728" };
static const char *const series_dash[] = { "", " stroke-dasharray=\"6 4\"" };

static double value_of(const epoch_stats *s, int series, int acc)
{
    return acc ? (series == TRAIN ? s->train_acc : s->val_acc) : (series == TRAIN ? s->train_loss : s->val_loss);
}

/* One panel: frame, grid and ticks, axis labels, both curves with markers, the legend; st[i]
 * is epoch first + i. */
static void draw_panel(text *t, panel *p, const epoch_stats *st, int n, int first, int has_val, int acc)
{
    const int n_series = has_val ? 2 : 1;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        for (int s = 0; s < n_series; s++) {
            double v = value_of(&st[i], s, acc);
            if (isfinite(v)) {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
    if (!(lo <= hi)) {
        lo = 0;
        hi = 1;
    }
    /* at least a thousandth of the values' size: a loss stuck at 937975 needs no ticks 0.0005 apart */
    double pad = (hi - lo) * 0.08 + 1e-3 * (fabs(hi) > 1 ? fabs(hi) : 1);
    lo -= pad;
    hi += pad;
    if (acc && hi > 1)
        hi = 1;
    if (lo < 0)
        lo = 0;
    double ystep = nice_step(lo, hi, 5);
    p->y0 = floor(lo / ystep) * ystep;
    p->y1 = ceil(hi / ystep) * ystep;
    const int last = first + n - 1; /* x is the epoch number; one epoch sits mid-panel */
    p->x0 = n > 1 ? first : first - 1;
    p->x1 = n > 1 ? last : first + 1;
    double xstep = n > 1 ? ceil(nice_step(first, last, 10)) : 1;

    put(t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" stroke=\"#444444\"/>\n",
        p->left, p->top, p->width, p->height);
    const int yd = decimals_of(ystep);
    for (double y = p->y0; y <= p->y1 + ystep * 1e-6; y += ystep) {
        double Y = py(p, y);
        put(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", p->left, Y,
            p->left + p->width, Y);
        put(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>\n", p->left - 5, Y, p->left,
            Y);
        char label[32];
        tick_label(label, sizeof label, y, ystep, yd);
        put(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", p->left - 8, Y + 4, label);
    }
    for (double x = first; x <= last + 1e-9; x += xstep) { /* no tick for an epoch not trained */
        double X = px(p, x);
        put(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>\n", X, p->top + p->height,
            X, p->top + p->height + 5);
        put(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", X, p->top + p->height + 20, x);
    }
    put(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">epoch</text>\n", p->left + p->width / 2,
        p->top + p->height + 42);
    const char *ylabel = acc ? "accuracy (fraction of images right)" : "loss (mean cross-entropy, nats)";
    double yx = p->left - 58, yy = p->top + p->height / 2;
    put(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n", yx,
        yy, yx, yy, ylabel);
    put(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-weight=\"bold\">%s</text>\n",
        p->left + p->width / 2, p->top - 10, acc ? "Accuracy" : "Loss");

    /* a NaN or infinite figure (a run that diverged) is a gap: one such coordinate would make
     * renderers drop the whole polyline */
    for (int s = 0; s < n_series; s++) {
        int open = 0;
        for (int i = 0; i < n; i++) {
            double v = value_of(&st[i], s, acc);
            if (!isfinite(v)) {
                if (open)
                    put(t, "\"/>\n");
                open = 0;
                continue;
            }
            if (!open)
                put(t, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", series_color[s],
                    series_dash[s]);
            put(t, "%s%.1f,%.1f", open ? " " : "", px(p, first + i), py(p, v));
            open = 1;
        }
        if (open)
            put(t, "\"/>\n");
        for (int i = 0; i < n; i++)
            if (isfinite(value_of(&st[i], s, acc)))
                put(t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>epoch %d %s %s %.4f</title></circle>\n",
                    px(p, first + i), py(p, value_of(&st[i], s, acc)), series_color[s], first + i, series_name[s],
                    acc ? "accuracy" : "loss", value_of(&st[i], s, acc));
    }
    /* legend: top right for loss (falling curves), bottom right for accuracy (rising ones) */
    double lx = p->left + p->width - 130, ly = acc ? p->top + p->height - 12 - 20.0 * n_series : p->top + 10;
    put(t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"120\" height=\"%.1f\" fill=\"#ffffff\" fill-opacity=\"0.85\" "
           "stroke=\"#999999\"/>\n",
        lx, ly, 8 + 20.0 * n_series);
    for (int s = 0; s < n_series; s++) {
        double Y = ly + 14 + 20.0 * s;
        put(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", lx + 8, Y,
            lx + 36, Y, series_color[s], series_dash[s]);
        put(t, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 42, Y + 4, series_name[s]);
    }
}

int plot_svg_write(const char *path, const char *title, const epoch_stats *st, int n, int first, int has_val,
                   char *err, size_t errlen)
{
    enum { W = 1000, H = 440 };
    text t = { 0 };
    put(&t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    put(&t,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n",
        W, H, W, H);
    put(&t, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n");
    put(&t, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">", W / 2);
    put_escaped(&t, title);
    put(&t, "</text>\n");
    if (n == 0)
        put(&t, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no epochs were trained</text>\n", W / 2, H / 2);
    else {
        panel loss = { .left = 90, .top = 60, .width = 380, .height = 310 };
        panel acc = { .left = 590, .top = 60, .width = 380, .height = 310 };
        draw_panel(&t, &loss, st, n, first, has_val, 0);
        draw_panel(&t, &acc, st, n, first, has_val, 1);
    }
    put(&t, "</svg>\n");
    int rc = -1;
    if (t.failed)
        snprintf(err, errlen, "%s: out of memory for the picture", path);
    else
        rc = pbl_file_write(path, t.p, t.len, err, errlen) == PBL_OK ? 0 : -1;
    free(t.p);
    return rc;
}
