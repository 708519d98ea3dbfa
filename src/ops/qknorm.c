/* QK-norm (OLMo 2, Qwen 3): RMSNorm without bias over each head's D values of q and k, with one
 * weight (D) shared by the query heads and one by the key heads, on the attention input qkv
 * (B,T,(NH + 2 NKV) D) = per position [q (NH heads) | k (NKV) | v (NKV)]; out has qkv's layout
 * (v copied), so that it is the next op's whole input.
 *   forward:  out, rstd (B,T,NH + NKV)        (qknorm_fwd.comp, one workgroup per head row)
 *   backward: dqkv += ... (v: += dout)        (qknorm_bwd_dinp.comp, one workgroup per head row)
 *             dq_weight, dk_weight (D) += column sums over the head rows
 *                                          (qknorm_bwd_dweight.comp, fixed order, no atomics;
 *                                          on GPUs in contiguous chunks, grad_reduce_chunks)
 * fp32 only (a bf16 tensor is refused), and within one dispatch's index limit (qkv larger than
 * the limit is refused naming the op: no blocks and no 64-bit variant). */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct push_fwd {
    uint64_t out, rstd, qkv, q_weight, k_weight;
    uint32_t rows, NH, NKV, D;
    float eps;
    uint32_t pad_;
} push_fwd;
VKG_PUSH_CHECK(push_fwd, qknorm_fwd);

typedef struct push_dinp {
    uint64_t dqkv, dout, qkv, q_weight, k_weight, rstd;
    uint32_t rows, NH, NKV, D;
} push_dinp;
VKG_PUSH_CHECK(push_dinp, qknorm_bwd_dinp);

typedef struct push_dweight {
    uint64_t dweight, dout, qkv, rstd;
    uint32_t rows, NH, NKV, D, head0, nheads;
} push_dweight;
VKG_PUSH_CHECK(push_dweight, qknorm_bwd_dweight);

/* Channels x row lanes of qknorm_bwd_dweight, as rmsnorm_bwd_dweight's. */
#define DWEIGHT_CX 16u
#define DWEIGHT_RY 16u

/* Invocations per head row: the layernorm's tuning, at most the power of two at or above D. */
static uint32_t head_wg(vkg_cmd *c, int D)
{
    uint32_t wg = vkg_device_tuning_get(vkg_cmd_device(c)).layernorm_wg, fit = 1;
    while (fit < (uint32_t)D && fit < wg)
        fit *= 2;
    return fit;
}

/* Positive sizes within the index limit; *rows = B*T, *W = (NH + 2 NKV) D. */
static vkg_status check_shape(const char *op, int B, int T, int NH, int NKV, int D, size_t *rows,
                              size_t *W)
{
    VKG_CHECK(B > 0 && T > 0 && NH > 0 && NKV > 0 && D > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T, NH, NKV and D must be positive (B=%d T=%d NH=%d NKV=%d D=%d)", op, B, T,
              NH, NKV, D);
    *rows = (size_t)B * (size_t)T;
    *W = ((size_t)NH + 2 * (size_t)NKV) * (size_t)D;
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    return vkg__op_fits(op, "qkv", *rows * *W, limit);
}

vkg_status vkg_op_qknorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor rstd, vkg_tensor qkv,
                             vkg_tensor q_weight, vkg_tensor k_weight, int B, int T, int NH,
                             int NKV, int D, float eps)
{
    const char *op = "qknorm_fwd";
    size_t rows = 0, W = 0;
    VKG_TRY(check_shape(op, B, T, NH, NKV, D, &rows, &W));
    VKG_CHECK(isfinite(eps) && eps > 0.0f, VKG_ERR_INVALID_ARG,
              "%s: eps must be positive and finite, got %g", op, (double)eps);
    VKG_TRY(vkg__op_need(op, "out", out, rows * W));
    VKG_TRY(vkg__op_need(op, "rstd", rstd, rows * (size_t)(NH + NKV)));
    VKG_TRY(vkg__op_need(op, "qkv", qkv, rows * W));
    VKG_TRY(vkg__op_need(op, "q_weight", q_weight, (size_t)D));
    VKG_TRY(vkg__op_need(op, "k_weight", k_weight, (size_t)D));
    push_fwd p = {.out = out.addr,
                  .rstd = rstd.addr,
                  .qkv = qkv.addr,
                  .q_weight = q_weight.addr,
                  .k_weight = k_weight.addr,
                  .rows = (uint32_t)rows,
                  .NH = (uint32_t)NH,
                  .NKV = (uint32_t)NKV,
                  .D = (uint32_t)D,
                  .eps = eps};
    uint32_t spec[3] = {head_wg(c, D), 1, 1};
    return vkg_cmd_dispatch(c, VKG_KERNEL_qknorm_fwd, spec, 3, &p, sizeof p,
                            vkg__op_groups_capped(rows * (size_t)(NH + 2 * NKV), 1), 1, 1, op);
}

vkg_status vkg_op_qknorm_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dq_weight,
                             vkg_tensor dk_weight, vkg_tensor dout, vkg_tensor qkv,
                             vkg_tensor q_weight, vkg_tensor k_weight, vkg_tensor rstd, int B,
                             int T, int NH, int NKV, int D)
{
    const char *op = "qknorm_bwd";
    size_t rows = 0, W = 0;
    VKG_TRY(check_shape(op, B, T, NH, NKV, D, &rows, &W));
    VKG_TRY(vkg__op_need(op, "dqkv", dqkv, rows * W));
    VKG_TRY(vkg__op_need(op, "dq_weight", dq_weight, (size_t)D));
    VKG_TRY(vkg__op_need(op, "dk_weight", dk_weight, (size_t)D));
    VKG_TRY(vkg__op_need(op, "dout", dout, rows * W));
    VKG_TRY(vkg__op_need(op, "qkv", qkv, rows * W));
    VKG_TRY(vkg__op_need(op, "q_weight", q_weight, (size_t)D));
    VKG_TRY(vkg__op_need(op, "k_weight", k_weight, (size_t)D));
    VKG_TRY(vkg__op_need(op, "rstd", rstd, rows * (size_t)(NH + NKV)));
    push_dinp pi = {.dqkv = dqkv.addr,
                    .dout = dout.addr,
                    .qkv = qkv.addr,
                    .q_weight = q_weight.addr,
                    .k_weight = k_weight.addr,
                    .rstd = rstd.addr,
                    .rows = (uint32_t)rows,
                    .NH = (uint32_t)NH,
                    .NKV = (uint32_t)NKV,
                    .D = (uint32_t)D};
    uint32_t spec_i[3] = {head_wg(c, D), 1, 1};
    uint32_t chunks = vkg_device_tuning_get(vkg_cmd_device(c)).grad_reduce_chunks;
    uint32_t cx = chunks ? VKG_GRAD_REDUCE_CX : DWEIGHT_CX;
    uint32_t spec_w[4] = {cx, chunks ? chunks : DWEIGHT_RY, 1, chunks ? 1u : 0u};
    vkg_cmd_group_begin(c); /* the three dispatches write different tensors */
    vkg_status st = vkg_cmd_dispatch(c, VKG_KERNEL_qknorm_bwd_dinp, spec_i, 3, &pi, sizeof pi,
                                     vkg__op_groups_capped(rows * (size_t)(NH + 2 * NKV), 1), 1, 1,
                                     "qknorm_bwd_dinp");
    for (int k = 0; k < 2 && st == VKG_OK; k++) {
        push_dweight pw = {.dweight = k ? dk_weight.addr : dq_weight.addr,
                           .dout = dout.addr,
                           .qkv = qkv.addr,
                           .rstd = rstd.addr,
                           .rows = (uint32_t)rows,
                           .NH = (uint32_t)NH,
                           .NKV = (uint32_t)NKV,
                           .D = (uint32_t)D,
                           .head0 = k ? (uint32_t)NH : 0u,
                           .nheads = k ? (uint32_t)NKV : (uint32_t)NH};
        st = vkg_cmd_dispatch(c, VKG_KERNEL_qknorm_bwd_dweight, spec_w, chunks ? 4 : 3, &pw,
                              sizeof pw, vkg__op_groups_capped((size_t)D, cx), 1, 1,
                              "qknorm_bwd_dweight");
    }
    vkg_cmd_group_end(c);
    return st;
}
