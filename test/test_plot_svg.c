/*
 * train_mlp's --plot picture (examples/plot_svg.c) on runs that go wrong: a diverging run's
 * losses (1e9, or stuck at 937975) and non-finite figures (a NaN loss, an infinite one).
 * The picture must stay a picture: every coordinate a number, the finite points drawn, and
 * tick labels short enough to sit between the axis and its title.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "examples/plot_svg.h"

/* Draws st[0 .. n) and returns the SVG text (free it). */
static char *draw_from(const epoch_stats *st, int n, int first)
{
    char path[] = "/tmp/test_plot_svg.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[256] = "";
    assert_int_equal(plot_svg_write(path, "test", st, n, first, 1, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t len = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    unlink(path);
    text[len] = '\0';
    return text;
}

static char *draw(const epoch_stats *st, int n) { return draw_from(st, n, 1); }

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* Every attribute value is free of "nan" and "inf": a polyline with one such coordinate is
 * dropped whole by SVG renderers (rsvg-convert drew neither loss curve). */
static void no_nonfinite_attributes(const char *text)
{
    for (const char *p = strstr(text, "=\""); p; p = strstr(p, "=\"")) {
        p += 2;
        const char *end = strchr(p, '"');
        assert_non_null(end);
        char value[4096];
        size_t len = (size_t)(end - p) < sizeof value - 1 ? (size_t)(end - p) : sizeof value - 1;
        memcpy(value, p, len);
        value[len] = '\0';
        if (strstr(value, "nan") || strstr(value, "inf"))
            fail_msg("attribute value '%s' is not a number", value);
        p = end + 1;
    }
}

/* The y-axis tick labels (right-aligned texts) each have at most `most` characters, and
 * they differ from one another. */
static void short_tick_labels(const char *text, size_t most)
{
    const char *tag = "text-anchor=\"end\">";
    char seen[64][32];
    int n = 0;
    for (const char *p = strstr(text, tag); p; p = strstr(p, tag)) {
        p += strlen(tag);
        const char *end = strchr(p, '<');
        assert_non_null(end);
        size_t len = (size_t)(end - p);
        if (len > most)
            fail_msg("tick label '%.*s' has %zu characters (at most %zu fit beside the axis title)", (int)len, p, len,
                     most);
        assert_true(n < 64);
        memcpy(seen[n], p, len);
        seen[n][len] = '\0';
        n++;
        p = end;
    }
    assert_true(n >= 6); /* both panels' ticks */
    for (int i = 1; i < n; i++)
        if (strcmp(seen[i], seen[i - 1]) == 0)
            fail_msg("two ticks in a row are labelled '%s'", seen[i]);
}

static void test_nonfinite_figures_leave_gaps(void **state)
{
    (void)state;
    epoch_stats st[4] = {
        { .train_loss = 2.3, .train_acc = 0.10, .val_loss = 2.2, .val_acc = 0.12 },
        { .train_loss = NAN, .train_acc = 0.10, .val_loss = 1.9, .val_acc = 0.10 },
        { .train_loss = 1.1, .train_acc = 0.50, .val_loss = INFINITY, .val_acc = 0.52 },
        { .train_loss = 0.5, .train_acc = 0.80, .val_loss = 0.6, .val_acc = -INFINITY },
    };
    char *text = draw(st, 4);
    no_nonfinite_attributes(text);
    assert_int_equal(count(text, "<circle"), 13); /* one marker per finite figure */
    free(text);
}

static void test_diverging_losses_keep_short_tick_labels(void **state)
{
    (void)state;
    /* figures of a real run: train_mlp --lr 10 --clip 0 --weight-decay 0 --lr-schedule none
     * --warmup 0 --hidden 2048,2048 on 6000 Fashion-MNIST images */
    epoch_stats st[4] = {
        { .train_loss = 1188455694.18, .train_acc = 0.1958, .val_loss = 1220789.35, .val_acc = 0.1340 },
        { .train_loss = 238753.30, .train_acc = 0.1310, .val_loss = 1268606.36, .val_acc = 0.1130 },
        { .train_loss = 64553.34, .train_acc = 0.1132, .val_loss = 946668.42, .val_acc = 0.1070 },
        { .train_loss = 6.88, .train_acc = 0.1126, .val_loss = 937975.08, .val_acc = 0.1210 },
    };
    char *text = draw(st, 4);
    no_nonfinite_attributes(text);
    short_tick_labels(text, 6);
    free(text);
    /* a loss stuck at one large value: the range is a fraction of the value, not 0.002 */
    for (int i = 0; i < 4; i++)
        st[i].train_loss = st[i].val_loss = 937975.08;
    text = draw(st, 4);
    short_tick_labels(text, 6);
    free(text);
}

/* The ordinary picture is unchanged in what the CLI test checks: four curves, labels of a
 * few characters. */
static void test_ordinary_run(void **state)
{
    (void)state;
    epoch_stats st[3] = {
        { .train_loss = 0.52, .train_acc = 0.81, .val_loss = 0.44, .val_acc = 0.84 },
        { .train_loss = 0.37, .train_acc = 0.86, .val_loss = 0.38, .val_acc = 0.86 },
        { .train_loss = 0.33, .train_acc = 0.88, .val_loss = 0.36, .val_acc = 0.87 },
    };
    char *text = draw(st, 3);
    assert_int_equal(count(text, "<polyline"), 4);
    assert_int_equal(count(text, "<circle"), 12);
    short_tick_labels(text, 5);
    assert_non_null(strstr(text, ">0.40<"));
    free(text);
}

/* A resumed run (train_mlp --load) draws the epochs it trained under their own numbers. */
static void test_resumed_run_keeps_its_epoch_numbers(void **state)
{
    (void)state;
    epoch_stats st[2] = {
        { .train_loss = 0.52, .train_acc = 0.81, .val_loss = 0.44, .val_acc = 0.84 },
        { .train_loss = 0.37, .train_acc = 0.86, .val_loss = 0.38, .val_acc = 0.86 },
    };
    char *text = draw_from(st, 2, 7);
    assert_non_null(strstr(text, "<title>epoch 7 training loss 0.5200</title>"));
    assert_non_null(strstr(text, "<title>epoch 8 validation accuracy 0.8600</title>"));
    assert_null(strstr(text, "<title>epoch 1 "));
    assert_non_null(strstr(text, "text-anchor=\"middle\">7</text>")); /* the x ticks */
    assert_non_null(strstr(text, "text-anchor=\"middle\">8</text>"));
    assert_null(strstr(text, "text-anchor=\"middle\">1</text>"));
    free(text);
    /* one epoch: its number under the point, as for a first epoch */
    text = draw_from(st, 1, 7);
    assert_non_null(strstr(text, "text-anchor=\"middle\">7</text>"));
    assert_null(strstr(text, "text-anchor=\"middle\">8</text>")); /* not trained: no tick */
    assert_null(strstr(text, "text-anchor=\"middle\">1</text>"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonfinite_figures_leave_gaps),
        cmocka_unit_test(test_diverging_losses_keep_short_tick_labels),
        cmocka_unit_test(test_ordinary_run),
        cmocka_unit_test(test_resumed_run_keeps_its_epoch_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
