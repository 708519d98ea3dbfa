/* RMSNorm over the last dimension (the Llama family's norm), forward and backward.
 *   forward:  out (N,C) = inp * rstd * weight, rstd (N) = 1 / sqrt(mean(inp^2) + eps), saving
 *             rstd (rmsnorm_fwd.comp: one workgroup per row, a tree reduction in shared memory);
 *             fused with the residual add before it, res = a + b is formed, stored and
 *             normalized in the same dispatch (rmsnorm_fwd.comp RESIDUAL = 1)
 *   backward: dinp (N,C) += ...            (rmsnorm_bwd_dinp.comp, one workgroup per row)
 *             dweight (C) += column sums over the N rows
 *                                          (rmsnorm_bwd_dweight.comp, fixed order, no atomics;
 *                                          on GPUs in contiguous row chunks, grad_reduce_chunks)
 * No bias and no mean subtracted; eps is the caller's (Llama: 1e-5 or 1e-6).
 * Mixed precision, as layernorm.c: out may be bf16 (rounded once), the fused form's b may be
 * bf16, and the residual stream may be bf16: inp (the fused form's a and res, which then share
 * the type; res = a + b rounded once and normalized as rounded) and the backward pass's inp, read
 * widened. Index limit (src/ops/op_util.h): as layernorm.c, the forward pass and dinp are
 * recorded over blocks of whole rows above the limit, and dweight's kernel walks the rows with
 * 64-bit addresses (WIDE = 1); a row of more than the limit is an error naming the op and C. */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct push_fwd {
    uint64_t out, rstd, inp, weight;
    uint32_t N, C;
    float eps;
    uint32_t pad_;
    uint64_t res, addend; /* RESIDUAL = 1 only */
} push_fwd;
VKG_PUSH_CHECK(push_fwd, rmsnorm_fwd);

typedef struct push_dinp {
    uint64_t dinp, dout, inp, weight, rstd;
    uint32_t N, C;
} push_dinp;
VKG_PUSH_CHECK(push_dinp, rmsnorm_bwd_dinp);

typedef struct push_dweight {
    uint64_t dweight, dout, inp, rstd;
    uint32_t N, C;
} push_dweight;
VKG_PUSH_CHECK(push_dweight, rmsnorm_bwd_dweight);

/* Invocations per row: the layernorm's (a power of two, from the device's tuning). */
static uint32_t row_wg(vkg_cmd *c)
{
    return vkg_device_tuning_get(vkg_cmd_device(c)).layernorm_wg;
}

/* Channels x row lanes of rmsnorm_bwd_dweight, as layernorm_bwd_dparams's. */
#define DWEIGHT_CX 16u
#define DWEIGHT_RY 16u

/* Positive sizes; *limit the index limit and *rows the rows per block (N when N rows fit). */
static vkg_status check_shape(const char *op, int N, int C, size_t *limit, size_t *rows)
{
    *rows = (size_t)N;
    VKG_CHECK(N > 0 && C > 0, VKG_ERR_INVALID_ARG, "%s: N and C must be positive (N=%d C=%d)", op,
              N, C);
    VKG_TRY(vkg__op_limit(op, limit));
    if ((size_t)N * (size_t)C <= *limit)
        return VKG_OK;
    VKG_CHECK((size_t)C <= *limit, VKG_ERR_INVALID_ARG,
              "%s: one row of C=%d elements is more than the %zu one shader dispatch may index", op,
              C, *limit);
    *rows = *limit / (size_t)C;
    return VKG_OK;
}

/* The forward pass; with res (not NULL) of inp + *addend, stored to *res. */
static vkg_status rmsnorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor rstd, vkg_tensor inp,
                              const vkg_tensor *addend, const vkg_tensor *res, vkg_tensor weight,
                              int N, int C, float eps)
{
    const char *op = res ? "residual_rmsnorm_fwd" : "rmsnorm_fwd";
    size_t limit, nb;
    VKG_TRY(check_shape(op, N, C, &limit, &nb));
    VKG_CHECK(isfinite(eps) && eps > 0.0f, VKG_ERR_INVALID_ARG,
              "%s: eps must be positive and finite, got %g", op, (double)eps);
    size_t NC = (size_t)N * C;
    VKG_TRY(vkg__op_need_any(op, "out", out, NC));
    uint32_t obf = out.dtype == VKG_BF16;
    VKG_CHECK(!obf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 out needs even C, got %d", op,
              C);
    VKG_TRY(vkg__op_need(op, "rstd", rstd, (size_t)N));
    VKG_TRY(vkg__op_need_any(op, res ? "a" : "inp", inp, NC));
    VKG_TRY(vkg__op_need(op, "weight", weight, (size_t)C));
    uint32_t sbf = inp.dtype == VKG_BF16; /* the residual stream: inp (and res) */
    if (res) {
        VKG_TRY(vkg__op_need_any(op, "res", *res, NC));
        VKG_TRY(vkg__op_need_any(op, "b", *addend, NC));
        VKG_CHECK(res->dtype == inp.dtype, VKG_ERR_INVALID_ARG,
                  "%s: res and a must both be fp32 or both bf16 (the residual stream's type)", op);
    }
    VKG_CHECK(!sbf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 %s needs even C, got %d", op,
              res ? "residual stream" : "inp", C);
    uint32_t abf = res && addend->dtype == VKG_BF16;
    VKG_CHECK(!abf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 b needs even C, got %d", op, C);
    uint32_t spec[7] = {row_wg(c), 1, 1, res ? 1u : 0u, obf, abf, sbf};
    int nspec = sbf ? 7 : abf ? 6 : obf ? 5 : res ? 4 : 3;
    for (size_t n0 = 0; n0 < (size_t)N; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb, at = 4 * n0 * (size_t)C;
        push_fwd p = {.out = out.addr + (obf ? at / 2 : at),
                      .rstd = rstd.addr + 4 * n0,
                      .inp = inp.addr + (sbf ? at / 2 : at),
                      .weight = weight.addr,
                      .N = (uint32_t)m,
                      .C = (uint32_t)C,
                      .eps = eps,
                      .res = res ? res->addr + (sbf ? at / 2 : at) : out.addr,
                      .addend = res ? addend->addr + (abf ? at / 2 : at) : inp.addr};
        VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_rmsnorm_fwd, spec, nspec, &p, sizeof p,
                                 vkg__op_groups_capped(m, 1), 1, 1, op));
    }
    return VKG_OK;
}

vkg_status vkg_op_rmsnorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor rstd, vkg_tensor inp,
                              vkg_tensor weight, int N, int C, float eps)
{
    return rmsnorm_fwd(c, out, rstd, inp, NULL, NULL, weight, N, C, eps);
}

vkg_status vkg_op_residual_rmsnorm_fwd(vkg_cmd *c, vkg_tensor res, vkg_tensor out, vkg_tensor rstd,
                                       vkg_tensor a, vkg_tensor b, vkg_tensor weight, int N, int C,
                                       float eps)
{
    return rmsnorm_fwd(c, out, rstd, a, &b, &res, weight, N, C, eps);
}

vkg_status vkg_op_rmsnorm_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dweight, vkg_tensor dout,
                              vkg_tensor inp, vkg_tensor weight, vkg_tensor rstd, int N, int C)
{
    const char *op = "rmsnorm_bwd";
    size_t limit, nb;
    VKG_TRY(check_shape(op, N, C, &limit, &nb));
    size_t NC = (size_t)N * C;
    VKG_TRY(vkg__op_need(op, "dinp", dinp, NC));
    VKG_TRY(vkg__op_need(op, "dweight", dweight, (size_t)C));
    VKG_TRY(vkg__op_need(op, "dout", dout, NC));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, NC));
    VKG_TRY(vkg__op_need(op, "weight", weight, (size_t)C));
    VKG_TRY(vkg__op_need(op, "rstd", rstd, (size_t)N));
    uint32_t ibf = inp.dtype == VKG_BF16;
    VKG_CHECK(!ibf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 inp needs even C, got %d", op,
              C);
    push_dweight pw = {.dweight = dweight.addr,
                       .dout = dout.addr,
                       .inp = inp.addr,
                       .rstd = rstd.addr,
                       .N = (uint32_t)N,
                       .C = (uint32_t)C};
    uint32_t spec_i[4] = {row_wg(c), 1, 1, 1};
    int wide = NC > limit;
    uint32_t chunks = vkg_device_tuning_get(vkg_cmd_device(c)).grad_reduce_chunks;
    uint32_t cx = chunks ? VKG_GRAD_REDUCE_CX : DWEIGHT_CX;
    uint32_t spec_w[6] = {cx, chunks ? chunks : DWEIGHT_RY, 1, wide ? 1u : 0u, chunks ? 1u : 0u, 1};
    vkg_status st = VKG_OK;
    vkg_cmd_group_begin(c); /* the two passes (and the blocks of rows) write different tensors */
    for (size_t n0 = 0; n0 < (size_t)N && st == VKG_OK; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb, at = 4 * n0 * (size_t)C;
        push_dinp pi = {.dinp = dinp.addr + at,
                        .dout = dout.addr + at,
                        .inp = inp.addr + (ibf ? at / 2 : at),
                        .weight = weight.addr,
                        .rstd = rstd.addr + 4 * n0,
                        .N = (uint32_t)m,
                        .C = (uint32_t)C};
        st = vkg_cmd_dispatch(c, VKG_KERNEL_rmsnorm_bwd_dinp, spec_i, ibf ? 4 : 3, &pi, sizeof pi,
                              vkg__op_groups_capped(m, 1), 1, 1, "rmsnorm_bwd_dinp");
    }
    if (st == VKG_OK)
        st = vkg_cmd_dispatch(c, VKG_KERNEL_rmsnorm_bwd_dweight, spec_w,
                              ibf      ? 6
                              : chunks ? 5
                              : wide   ? 4
                                       : 3,
                              &pw, sizeof pw, vkg__op_groups_capped((size_t)C, cx), 1, 1,
                              "rmsnorm_bwd_dweight");
    vkg_cmd_group_end(c);
    return st;
}
