/* Fused softmax + cross-entropy over a padded vocabulary (shaders/xent_fwd_bwd.comp): one
 * workgroup per row, online max/sum of exp reduced in shared memory, losses and (optionally)
 * dlogits in one dispatch. It does not average the losses: the caller sums them (or folds 1/N
 * into dloss).
 * Index limit (src/ops/op_util.h): rows are independent, so above the limit the rows are recorded
 * in blocks of whole rows, one dispatch each with the addresses of logits, dlogits, losses and
 * targets advanced; the results are the same. A row of Vp floats beyond the limit is an error. */
#include "ops/op_util.h"
#include "ops/ops.h"

#define XENT_MAX_GROUPS 65535u
#define XENT_PER_LANE 4u /* columns per invocation per chunk of pass 1 (spec constant K) */

typedef struct push_xent {
    uint64_t logits, losses, dlogits, targets, dscale;
    uint32_t N, V, Vp;
    float dloss;
} push_xent;
VKG_PUSH_CHECK(push_xent, xent_fwd_bwd);

/* Invocations per row: enough for XENT_PER_LANE columns each, between the subgroup size and the
 * tuning's cap (small where barriers are costly, as on CPU devices; wide on GPUs). Powers of 2. */
static uint32_t xent_workgroup(const vkg_device_t *dev, int V)
{
    const vkg_device_info *info = vkg_device_get_info(dev);
    uint32_t cap = vkg_device_tuning_get(dev).xent_wg_max;
    uint32_t w = 1;
    while (w < info->subgroup_size && w < cap)
        w *= 2;
    while (w < cap && (size_t)w * XENT_PER_LANE < (size_t)V)
        w *= 2;
    return w;
}

static int ranges_overlap(vkg_tensor a, size_t abytes, vkg_tensor b, size_t bbytes)
{
    return a.addr < b.addr + bbytes && b.addr < a.addr + abytes;
}

vkg_status vkg_op_xent_fwd_bwd(vkg_cmd *c, vkg_tensor losses, const vkg_tensor *dlogits,
                               vkg_tensor logits, vkg_tensor targets, int N, int V, int Vp,
                               float dloss)
{
    return vkg_op_xent_fwd_bwd_scaled(c, losses, dlogits, logits, targets, N, V, Vp, dloss, NULL);
}

vkg_status vkg_op_xent_fwd_bwd_scaled(vkg_cmd *c, vkg_tensor losses, const vkg_tensor *dlogits,
                                      vkg_tensor logits, vkg_tensor targets, int N, int V, int Vp,
                                      float dloss, const vkg_tensor *dscale)
{
    const char *op = "xent_fwd_bwd";
    VKG_CHECK(N > 0 && V > 0 && Vp > 0, VKG_ERR_INVALID_ARG,
              "%s: N, V and Vp must be positive (N=%d V=%d Vp=%d)", op, N, V, Vp);
    VKG_CHECK(V <= Vp, VKG_ERR_INVALID_ARG, "%s: V=%d exceeds the padded vocabulary Vp=%d", op, V,
              Vp);
    size_t elems = (size_t)N * (size_t)Vp, limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_CHECK((size_t)Vp <= limit, VKG_ERR_INVALID_ARG,
              "%s: one row of logits (Vp=%d) is more than the %zu elements one shader dispatch may "
              "index",
              op, Vp, limit);
    size_t nb = elems <= limit ? (size_t)N : limit / (size_t)Vp; /* rows per dispatch */
    VKG_TRY(vkg__op_need(op, "logits", logits, elems));
    VKG_TRY(vkg__op_need(op, "losses", losses, (size_t)N));
    VKG_TRY(vkg__op_need(op, "targets", targets, (size_t)N));
    if (dlogits) {
        VKG_TRY(vkg__op_need(op, "dlogits", *dlogits, elems));
        VKG_CHECK(
            dlogits->addr == logits.addr || !ranges_overlap(*dlogits, elems * 4, logits, elems * 4),
            VKG_ERR_INVALID_ARG,
            "%s: tensor dlogits partly overlaps logits (it must be logits itself or apart)", op);
    }
    if (dscale)
        VKG_TRY(vkg__op_need(op, "dscale", *dscale, 1));
    uint32_t wg = xent_workgroup(vkg_cmd_device(c), V);
    /* without a scale the pipeline of before (no sixth constant) */
    uint32_t spec[6] = {wg, 1, 1, dlogits ? 1u : 0u, XENT_PER_LANE, 1u};
    int nspec = dscale && dlogits ? 6 : 5;
    for (size_t r0 = 0; r0 < (size_t)N; r0 += nb) {
        size_t m = (size_t)N - r0 < nb ? (size_t)N - r0 : nb, at = 4 * r0 * (size_t)Vp;
        push_xent p = {.logits = logits.addr + at,
                       .losses = losses.addr + 4 * r0,
                       .dlogits = (dlogits ? dlogits->addr : logits.addr) + at,
                       .targets = targets.addr + 4 * r0,
                       .dscale = dscale && dlogits ? dscale->addr : 0,
                       .N = (uint32_t)m,
                       .V = (uint32_t)V,
                       .Vp = (uint32_t)Vp,
                       .dloss = dloss};
        uint32_t gx = (uint32_t)m < XENT_MAX_GROUPS ? (uint32_t)m : XENT_MAX_GROUPS;
        uint32_t gy = vkg__ceil_div(m, gx);
        VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_xent_fwd_bwd, spec, nspec, &p, sizeof p, gx, gy, 1,
                                 dlogits ? "xent_fwd_bwd" : "xent_fwd"));
    }
    return VKG_OK;
}
