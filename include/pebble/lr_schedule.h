/*
 * pebble/lr_schedule.h — learning-rate schedules the caller evaluates per step.
 *
 * A schedule is plain data and one pure function of the step: no graph, no executor, no
 * state. Feed its value to a runtime scalar (pebble/graph.h pbl_graph_add_scalar, the
 * optimizer's lr_scalar in pebble/autodiff.h) before each run:
 *
 *     // given pbl_exec *e;
 *     pbl_lr_schedule s = pbl_lr_schedule_default(PBL_LR_COSINE, 1e-3);
 *     s.warmup_steps = 100;
 *     s.total_steps = 4690;
 *     char err[128];
 *     if (pbl_lr_schedule_check(&s, err, sizeof err) != PBL_OK)
 *         fprintf(stderr, "%s\n", err);
 *     for (int64_t step = 0; step < s.total_steps; step++) {
 *         pbl_exec_set_scalar(e, "lr", pbl_lr_schedule_at(&s, step));
 *         // ... write the batch ...
 *         pbl_exec_run(e);
 *     }
 *
 * Steps count from 0. Every kind starts with an optional linear warm-up: for step <
 * warmup_steps the rate is base_lr·(step + 1)/warmup_steps (never 0, base_lr at the last
 * warm-up step). After it, with k = step − warmup_steps:
 *   PBL_LR_CONSTANT  base_lr
 *   PBL_LR_STEP      base_lr·gamma^floor(k / step_size)                 (PyTorch's StepLR)
 *   PBL_LR_COSINE    min_lr + (base_lr − min_lr)·(1 + cos(π·k/(total_steps − warmup_steps)))/2,
 *                    min_lr from total_steps on                         (CosineAnnealingLR)
 * Thread-safety: all functions are pure.
 */
#ifndef PEBBLE_LR_SCHEDULE_H
#define PEBBLE_LR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "pebble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pbl_lr_schedule_kind {
    PBL_LR_CONSTANT,
    PBL_LR_STEP,
    PBL_LR_COSINE,
} pbl_lr_schedule_kind;

typedef struct pbl_lr_schedule {
    pbl_lr_schedule_kind kind;
    double  base_lr;      /* the rate after warm-up; finite, >= 0 */
    int64_t warmup_steps; /* default 0: none */
    int64_t step_size;    /* PBL_LR_STEP: steps between decays (default 1000; >= 1) */
    double  gamma;        /* PBL_LR_STEP: the decay factor (default 0.1; in (0, 1]) */
    int64_t total_steps;  /* PBL_LR_COSINE: the step at which min_lr is reached (> warmup_steps) */
    double  min_lr;       /* PBL_LR_COSINE: the floor (default 0; in [0, base_lr]) */
} pbl_lr_schedule;

pbl_lr_schedule pbl_lr_schedule_default(pbl_lr_schedule_kind kind, double base_lr);

/* PBL_OK, or PBL_ERR_INVALID_ARG with the reason in err (size errlen; may be NULL): an unknown
 * kind, a base_lr or min_lr that is negative or not finite, a negative warm-up, a step_size
 * below 1, a gamma outside (0, 1], total_steps not past the warm-up, min_lr above base_lr. */
pbl_status pbl_lr_schedule_check(const pbl_lr_schedule *s, char *err, size_t errlen);

/* The rate at `step` (a negative step counts as 0); NaN when s is NULL or fails
 * pbl_lr_schedule_check (pbl_exec_set_scalar refuses NaN, so a bad schedule cannot train). */
double pbl_lr_schedule_at(const pbl_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
