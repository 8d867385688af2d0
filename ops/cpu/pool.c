/* CPU kernels: max_pool2d, avg_pool2d (padding not counted, ONNX's count_include_pad = 0) and
 * global_avg_pool, forward only. */
#include <float.h>

#include "ops/cpu/kernels.h"
#include "ops/window.h"

/* x[N,C,H,W] -> y[N,C,OH,OW]: each output the max or mean of the window's taps that fall
 * inside x (the shape rule keeps every window overlapping x). */
static pbl_status pool(const pbl__kargs *a, int is_max)
{
    const pbl_shape *xs = &a->in_meta[0].shape, *ys = &a->out_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], H = xs->dim[2], W = xs->dim[3], OH = ys->dim[2], OW = ys->dim[3];
    pbl__window w;
    pbl__window_of(&a->attr[0], &a->attr[1], &a->attr[2], &a->attr[3], &w);
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *xp = x + nc * H * W;
        float *yp = y + nc * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float m = -FLT_MAX;
                double sum = 0.0;
                int64_t count = 0;
                for (int64_t kh = 0; kh < w.kernel[0]; kh++) {
                    int64_t ih = oh * w.stride[0] - w.pad[0] + kh * w.dilation[0];
                    if (ih < 0 || ih >= H)
                        continue;
                    for (int64_t kw = 0; kw < w.kernel[1]; kw++) {
                        int64_t iw = ow * w.stride[1] - w.pad[1] + kw * w.dilation[1];
                        if (iw < 0 || iw >= W)
                            continue;
                        float v = xp[ih * W + iw];
                        m = v > m ? v : m;
                        sum += v;
                        count++;
                    }
                }
                yp[oh * OW + ow] = is_max ? m : count ? (float)(sum / (double)count) : 0.0f;
            }
    }
    return PBL_OK;
}

pbl_status pbl__cpu_max_pool2d(const pbl__kargs *a) { return pool(a, 1); }
pbl_status pbl__cpu_avg_pool2d(const pbl__kargs *a) { return pool(a, 0); }

/* x[N,C,...] -> y[N,C,1,...]: the mean of each (n, c) plane */
pbl_status pbl__cpu_global_avg_pool(const pbl__kargs *a)
{
    const pbl_shape *xs = &a->in_meta[0].shape;
    int64_t NC = xs->dim[0] * xs->dim[1], S = pbl_shape_numel(xs) / (NC ? NC : 1);
    const float *x = PBL__IN(a, 0);
    float *y = PBL__OUT(a, 0);
    for (int64_t nc = 0; nc < NC; nc++) {
        double s = 0.0;
        for (int64_t i = 0; i < S; i++)
            s += x[nc * S + i];
        y[nc] = (float)(s / (double)S);
    }
    return PBL_OK;
}
