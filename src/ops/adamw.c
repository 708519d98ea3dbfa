/* AdamW update (shaders/adamw.comp). The per-step values (learning rate, step count, clipping
 * threshold) come from a vkg_step_params on the device and the clipping scale from a device-side
 * sum of squares, so the update is recorded once and replayed every step. This file does not
 * decide which tensors decay: the caller passes weight_decay per tensor.
 * Index limit: the flat tensors are cut into segments of at most 2^30 elements, fewer when the
 * shader index limit is lower, one dispatch each with the four base addresses advanced; every
 * element's update reads only its own elements (and the global sum of squares), so the results
 * do not depend on the cut. */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

#define ADAMW_WG 256u
#define ADAMW_SEGMENT ((size_t)1 << 30) /* elements per dispatch at most (small shader indices) */

_Static_assert(sizeof(vkg_step_params) == 16, "vkg_step_params must match shaders/adamw.comp");

typedef struct push_adamw {
    uint64_t param, grad, m, v, step, sumsq;
    uint32_t n, has_sumsq;
    float beta1, beta2, eps, weight_decay;
    float ln_beta1, ln_beta2;
} push_adamw;
VKG_PUSH_CHECK(push_adamw, adamw);

/* ln(beta) in double, rounded to float; beta = 0 gives a huge negative value (beta^t = 0). */
static float log_beta(float beta)
{
    return beta > 0.0f ? (float)log((double)beta) : -1e30f;
}

vkg_status vkg_op_adamw(vkg_cmd *c, vkg_tensor param, vkg_tensor grad, vkg_tensor m, vkg_tensor v,
                        size_t n, float beta1, float beta2, float eps, float weight_decay,
                        vkg_tensor step, const vkg_tensor *sumsq)
{
    const char *op = "adamw";
    VKG_CHECK(beta1 >= 0.0f && beta1 < 1.0f && beta2 >= 0.0f && beta2 < 1.0f, VKG_ERR_INVALID_ARG,
              "%s: beta1=%g and beta2=%g must lie in [0, 1)", op, (double)beta1, (double)beta2);
    VKG_CHECK(eps > 0.0f && isfinite(eps), VKG_ERR_INVALID_ARG,
              "%s: eps=%g must be positive and finite", op, (double)eps);
    VKG_CHECK(weight_decay >= 0.0f && isfinite(weight_decay), VKG_ERR_INVALID_ARG,
              "%s: weight_decay=%g must be non-negative and finite", op, (double)weight_decay);
    VKG_TRY(vkg__op_need(op, "param", param, n));
    VKG_TRY(vkg__op_need(op, "grad", grad, n));
    VKG_TRY(vkg__op_need(op, "m", m, n));
    VKG_TRY(vkg__op_need(op, "v", v, n));
    VKG_TRY(vkg__op_need(op, "step", step, sizeof(vkg_step_params) / 4));
    VKG_CHECK(step.addr % 16 == 0, VKG_ERR_INVALID_ARG, "%s: tensor step is not 16-byte aligned",
              op);
    if (sumsq)
        VKG_TRY(vkg__op_need(op, "sumsq", *sumsq, 1));
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    size_t segment = ADAMW_SEGMENT;
    if (n > limit && segment > limit)
        segment = vkg__op_flat_chunk(limit);

    push_adamw p = {.step = step.addr,
                    .sumsq = sumsq ? sumsq->addr : step.addr,
                    .has_sumsq = sumsq != NULL,
                    .beta1 = beta1,
                    .beta2 = beta2,
                    .eps = eps,
                    .weight_decay = weight_decay,
                    .ln_beta1 = log_beta(beta1),
                    .ln_beta2 = log_beta(beta2)};
    uint32_t spec[3] = {ADAMW_WG, 1, 1};
    for (size_t off = 0; off < n; off += segment) {
        size_t seg = n - off < segment ? n - off : segment;
        p.param = param.addr + off * 4;
        p.grad = grad.addr + off * 4;
        p.m = m.addr + off * 4;
        p.v = v.addr + off * 4;
        p.n = (uint32_t)seg;
        VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_adamw, spec, 3, &p, sizeof p,
                                 vkg__op_groups_capped(seg, ADAMW_WG), 1, 1, op));
    }
    return VKG_OK;
}
