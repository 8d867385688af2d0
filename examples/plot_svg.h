/*
 * plot_svg — train_mlp's --plot: loss and accuracy per epoch, training beside validation, as
 * one SVG picture of two panels (loss on the left, accuracy on the right), each with axes,
 * ticks, units and a legend.
 */
#ifndef TRAIN_MLP_PLOT_SVG_H
#define TRAIN_MLP_PLOT_SVG_H

#include <stddef.h>

/* One epoch's figures. */
typedef struct epoch_stats {
    double train_loss, train_acc; /* mean batch loss and accuracy of the training step */
    double val_loss, val_acc;     /* on the validation split, after the epoch */
    double secs, samples_per_s;   /* the epoch's training time */
} epoch_stats;

/* Draws st[0 .. n), the epochs first, first + 1, ... (a resumed run's start after 1), to `path`
 * (written whole or not at all, pbl_file_write); with has_val 0 only the training curves. 0,
 * or -1 with a message in err. */
int plot_svg_write(const char *path, const char *title, const epoch_stats *st, int n, int first, int has_val,
                   char *err, size_t errlen);

#endif
