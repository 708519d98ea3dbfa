/* Layer normalization over the last dimension, forward and backward.
 *   forward:  out (N,C) = (inp - mean) * rstd * weight + bias, saving mean (N) and rstd (N)
 *             (layernorm_fwd.comp: one workgroup per row, tree reductions in shared memory);
 *             fused with the residual add before it, res = a + b is formed, stored and
 *             normalized in the same dispatch (layernorm_fwd.comp RESIDUAL = 1)
 *   backward: dinp (N,C) += ...            (layernorm_bwd_dinp.comp, one workgroup per row)
 *             dweight, dbias (C) += column sums over the N rows
 *                                          (layernorm_bwd_dparams.comp, fixed order, no atomics;
 *                                          on GPUs in contiguous row chunks, grad_reduce_chunks)
 * eps = 1e-5 and the biased variance, as in llm.c.
 * Mixed precision: out may be bf16 (rounded once), the fused form's b may be bf16, and the
 * residual stream may be bf16: inp (the fused form's a and res, which then share the type; res
 * = a + b rounded once and normalized as rounded) and the backward pass's inp, read widened.
 * Index limit (src/ops/op_util.h): the forward pass and dinp work row by row, so above the limit
 * they are recorded over blocks of whole rows, one dispatch each with the addresses of the
 * row-wise tensors (inp, out, dout, dinp, mean, rstd) advanced. dweight and dbias sum over all N
 * rows: they are not split, their kernel's wide variant (layernorm_bwd_dparams.comp WIDE = 1)
 * walks the row addresses with 64-bit arithmetic and adds in the same order. A row of more than
 * the limit is an error naming the op and C. */
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct push_fwd {
    uint64_t out, mean, rstd, inp, weight, bias;
    uint32_t N, C;
    uint64_t res, addend; /* RESIDUAL = 1 only */
} push_fwd;
VKG_PUSH_CHECK(push_fwd, layernorm_fwd);

typedef struct push_dinp {
    uint64_t dinp, dout, inp, weight, mean, rstd;
    uint32_t N, C;
} push_dinp;
VKG_PUSH_CHECK(push_dinp, layernorm_bwd_dinp);

typedef struct push_dparams {
    uint64_t dweight, dbias, dout, inp, mean, rstd;
    uint32_t N, C;
} push_dparams;
VKG_PUSH_CHECK(push_dparams, layernorm_bwd_dparams);

/* Invocations per row (a power of two), from the device's tuning: narrow where every barrier of
 * the reduction tree is costly (CPU devices), wide on GPUs. */
static uint32_t row_wg(vkg_cmd *c)
{
    return vkg_device_tuning_get(vkg_cmd_device(c)).layernorm_wg;
}

/* Channels x row lanes of layernorm_bwd_dparams: a warp of 32 reads two rows of 16 adjacent
 * channels (two 64-byte segments), and C = 768 gives 48 workgroups. */
#define DPARAMS_CX 16u
#define DPARAMS_RY 16u

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
static vkg_status layernorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor mean, vkg_tensor rstd,
                                vkg_tensor inp, const vkg_tensor *addend, const vkg_tensor *res,
                                vkg_tensor weight, vkg_tensor bias, int N, int C)
{
    const char *op = res ? "residual_layernorm_fwd" : "layernorm_fwd";
    size_t limit, nb;
    VKG_TRY(check_shape(op, N, C, &limit, &nb));
    size_t NC = (size_t)N * C;
    VKG_TRY(vkg__op_need_any(op, "out", out, NC));
    uint32_t obf = out.dtype == VKG_BF16;
    VKG_CHECK(!obf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 out needs even C, got %d", op,
              C);
    VKG_TRY(vkg__op_need(op, "mean", mean, (size_t)N));
    VKG_TRY(vkg__op_need(op, "rstd", rstd, (size_t)N));
    VKG_TRY(vkg__op_need_any(op, res ? "a" : "inp", inp, NC));
    VKG_TRY(vkg__op_need(op, "weight", weight, (size_t)C));
    VKG_TRY(vkg__op_need(op, "bias", bias, (size_t)C));
    uint32_t sbf = inp.dtype == VKG_BF16; /* the residual stream: inp (and res) */
    if (res) {
        VKG_TRY(vkg__op_need_any(op, "res", *res, NC));
        VKG_TRY(vkg__op_need_any(op, "addend", *addend, NC));
        VKG_CHECK(res->dtype == inp.dtype, VKG_ERR_INVALID_ARG,
                  "%s: res and a must both be fp32 or both bf16 (the residual stream's type)", op);
    }
    VKG_CHECK(!sbf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 %s needs even C, got %d", op,
              res ? "residual stream" : "inp", C);
    uint32_t abf = res && addend->dtype == VKG_BF16;
    VKG_CHECK(!abf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 b needs even C, got %d", op, C);
    /* fp32 tensors name no bf16 constants (their pipelines are those of before bf16). */
    uint32_t spec[7] = {row_wg(c), 1, 1, res ? 1u : 0u, obf, abf, sbf};
    int nspec = sbf ? 7 : abf ? 6 : obf ? 5 : res ? 4 : 3;
    for (size_t n0 = 0; n0 < (size_t)N; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb, at = 4 * n0 * (size_t)C;
        push_fwd p = {.out = out.addr + (obf ? at / 2 : at),
                      .mean = mean.addr + 4 * n0,
                      .rstd = rstd.addr + 4 * n0,
                      .inp = inp.addr + (sbf ? at / 2 : at),
                      .weight = weight.addr,
                      .bias = bias.addr,
                      .N = (uint32_t)m,
                      .C = (uint32_t)C,
                      .res = res ? res->addr + (sbf ? at / 2 : at) : out.addr,
                      .addend = res ? addend->addr + (abf ? at / 2 : at) : inp.addr};
        VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_layernorm_fwd, spec, nspec, &p, sizeof p,
                                 vkg__op_groups_capped(m, 1), 1, 1, op));
    }
    return VKG_OK;
}

vkg_status vkg_op_layernorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor mean, vkg_tensor rstd,
                                vkg_tensor inp, vkg_tensor weight, vkg_tensor bias, int N, int C)
{
    return layernorm_fwd(c, out, mean, rstd, inp, NULL, NULL, weight, bias, N, C);
}

vkg_status vkg_op_residual_layernorm_fwd(vkg_cmd *c, vkg_tensor res, vkg_tensor out,
                                         vkg_tensor mean, vkg_tensor rstd, vkg_tensor a,
                                         vkg_tensor b, vkg_tensor weight, vkg_tensor bias, int N,
                                         int C)
{
    return layernorm_fwd(c, out, mean, rstd, a, &b, &res, weight, bias, N, C);
}

vkg_status vkg_op_layernorm_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dweight, vkg_tensor dbias,
                                vkg_tensor dout, vkg_tensor inp, vkg_tensor weight, vkg_tensor mean,
                                vkg_tensor rstd, int N, int C)
{
    const char *op = "layernorm_bwd";
    size_t limit, nb;
    VKG_TRY(check_shape(op, N, C, &limit, &nb));
    size_t NC = (size_t)N * C;
    VKG_TRY(vkg__op_need(op, "dinp", dinp, NC));
    VKG_TRY(vkg__op_need(op, "dweight", dweight, (size_t)C));
    VKG_TRY(vkg__op_need(op, "dbias", dbias, (size_t)C));
    VKG_TRY(vkg__op_need(op, "dout", dout, NC));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, NC));
    VKG_TRY(vkg__op_need(op, "weight", weight, (size_t)C));
    VKG_TRY(vkg__op_need(op, "mean", mean, (size_t)N));
    VKG_TRY(vkg__op_need(op, "rstd", rstd, (size_t)N));
    uint32_t ibf = inp.dtype == VKG_BF16;
    VKG_CHECK(!ibf || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 inp needs even C, got %d", op,
              C);
    push_dparams pp = {.dweight = dweight.addr,
                       .dbias = dbias.addr,
                       .dout = dout.addr,
                       .inp = inp.addr,
                       .mean = mean.addr,
                       .rstd = rstd.addr,
                       .N = (uint32_t)N,
                       .C = (uint32_t)C};
    /* fp32 inputs name no bf16 constant (their pipelines are those of before bf16) */
    uint32_t spec_i[4] = {row_wg(c), 1, 1, 1};
    int wide = NC > limit;
    uint32_t chunks = vkg_device_tuning_get(vkg_cmd_device(c)).grad_reduce_chunks;
    uint32_t cx = chunks ? VKG_GRAD_REDUCE_CX : DPARAMS_CX;
    uint32_t spec_p[6] = {cx, chunks ? chunks : DPARAMS_RY, 1, wide ? 1u : 0u, chunks ? 1u : 0u, 1};
    vkg_status st = VKG_OK;
    vkg_cmd_group_begin(c); /* the two passes (and the blocks of rows) write different tensors */
    for (size_t n0 = 0; n0 < (size_t)N && st == VKG_OK; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb, at = 4 * n0 * (size_t)C;
        push_dinp pi = {.dinp = dinp.addr + at,
                        .dout = dout.addr + at,
                        .inp = inp.addr + (ibf ? at / 2 : at),
                        .weight = weight.addr,
                        .mean = mean.addr + 4 * n0,
                        .rstd = rstd.addr + 4 * n0,
                        .N = (uint32_t)m,
                        .C = (uint32_t)C};
        st = vkg_cmd_dispatch(c, VKG_KERNEL_layernorm_bwd_dinp, spec_i, ibf ? 4 : 3, &pi, sizeof pi,
                              vkg__op_groups_capped(m, 1), 1, 1, "layernorm_bwd_dinp");
    }
    if (st == VKG_OK)
        st = vkg_cmd_dispatch(c, VKG_KERNEL_layernorm_bwd_dparams, spec_p,
                              ibf      ? 6
                              : chunks ? 5
                              : wide   ? 4
                                       : 3,
                              &pp, sizeof pp, vkg__op_groups_capped((size_t)C, cx), 1, 1,
                              "layernorm_bwd_dparams");
    vkg_cmd_group_end(c);
    return st;
}
