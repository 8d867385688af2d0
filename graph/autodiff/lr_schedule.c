/* Learning-rate schedules (pebble/autodiff.h): one pure function of the step. */
#include <float.h>
#include <math.h>

#include "graph/base/errmsg.h"
#include "graph/base/export.h"
#include "pebble/autodiff.h"

PBL__API pbl_lr_schedule pbl_lr_schedule_default(pbl_lr_schedule_kind kind, double base_lr)
{
    pbl_lr_schedule s = { .kind = kind, .base_lr = base_lr, .warmup_steps = 0, .step_size = 1000, .gamma = 0.1,
                          .total_steps = 0, .min_lr = 0.0 };
    return s;
}

PBL__API pbl_status pbl_lr_schedule_check(const pbl_lr_schedule *s, char *err, size_t errlen)
{
    if (!s)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: none given");
    if (s->kind != PBL_LR_CONSTANT && s->kind != PBL_LR_STEP && s->kind != PBL_LR_COSINE)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: unknown kind %d", (int)s->kind);
    if (!(s->base_lr >= 0.0 && isfinite(s->base_lr)))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: base_lr is %g; it must be finite and >= 0",
                         s->base_lr);
    if (s->base_lr > FLT_MAX) /* the rates go into f32 scalars, which refuse it (min_lr is at most base_lr) */
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: base_lr is %g, beyond f32's range", s->base_lr);
    if (s->warmup_steps < 0)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: warmup_steps is %lld; it must be >= 0",
                         (long long)s->warmup_steps);
    if (s->kind == PBL_LR_STEP && s->step_size < 1)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: step_size is %lld; it must be >= 1",
                         (long long)s->step_size);
    if (s->kind == PBL_LR_STEP && !(s->gamma > 0.0 && s->gamma <= 1.0))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: gamma is %g; it must be in (0, 1]", s->gamma);
    if (s->kind == PBL_LR_COSINE && s->total_steps <= s->warmup_steps)
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG,
                         "lr schedule: total_steps (%lld) must be greater than warmup_steps (%lld)",
                         (long long)s->total_steps, (long long)s->warmup_steps);
    if (s->kind == PBL_LR_COSINE && !(s->min_lr >= 0.0 && s->min_lr <= s->base_lr))
        return pbl__errf(err, errlen, PBL_ERR_INVALID_ARG, "lr schedule: min_lr is %g; it must be in [0, base_lr = %g]",
                         s->min_lr, s->base_lr);
    return PBL_OK;
}

PBL__API double pbl_lr_schedule_at(const pbl_lr_schedule *s, int64_t step)
{
    if (pbl_lr_schedule_check(s, NULL, 0) != PBL_OK)
        return NAN;
    if (step < 0)
        step = 0;
    if (step < s->warmup_steps) /* (step + 1): the first step already moves */
        return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
    int64_t k = step - s->warmup_steps;
    switch (s->kind) {
    case PBL_LR_STEP:
        return s->base_lr * pow(s->gamma, (double)(k / s->step_size));
    case PBL_LR_COSINE: {
        int64_t span = s->total_steps - s->warmup_steps;
        if (k >= span)
            return s->min_lr;
        const double pi = 3.14159265358979323846;
        return s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(pi * (double)k / (double)span));
    }
    default:
        return s->base_lr;
    }
}
