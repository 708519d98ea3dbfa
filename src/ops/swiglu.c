/* SwiGLU, the gated MLP activation of the Llama family, forward and backward.
 *   forward:  out (N,F) = silu(gate) * up, silu(g) = g / (1 + exp(-g)), where h (N,2F) is the
 *             fused gate-and-up product and holds per row gate = h[n, 0..F), up = h[n, F..2F)
 *             (swiglu_fwd.comp, one invocation per element of out)
 *   backward: dh (N,2F) += [dout * up * silu'(gate) | dout * silu(gate)]
 *             (swiglu_bwd.comp, one invocation per element of dout, the only writer of its two
 *             elements of dh: deterministic)
 * Mixed precision, as GELU's: the forward's out and h may be bf16 (h widened, out rounded once),
 * the backward's h bf16; dh and dout are fp32. Index limit (src/ops/op_util.h): above it the op
 * is recorded over blocks of whole rows, one dispatch each with every address advanced (no
 * element depends on another row, so the results are the same); a row of h (2F elements) longer
 * than the limit is an error naming the op and F. */
#include "ops/op_util.h"
#include "ops/ops.h"

#define SWIGLU_WG 256u

typedef struct push_fwd {
    uint64_t out, h;
    uint32_t N, F;
} push_fwd;
VKG_PUSH_CHECK(push_fwd, swiglu_fwd);

typedef struct push_bwd {
    uint64_t dh, h, dout;
    uint32_t N, F;
} push_bwd;
VKG_PUSH_CHECK(push_bwd, swiglu_bwd);

/* Positive sizes; *rows the rows per dispatch (N when N rows fit the limit), even when `even`
 * (a bf16 out of odd F then starts every block on a whole word). */
static vkg_status check_shape(const char *op, int N, int F, int even, size_t *rows)
{
    size_t limit;
    *rows = (size_t)N;
    VKG_CHECK(N > 0 && F > 0, VKG_ERR_INVALID_ARG, "%s: N and F must be positive (N=%d F=%d)", op,
              N, F);
    VKG_TRY(vkg__op_limit(op, &limit));
    if ((size_t)N * 2 * (size_t)F <= limit)
        return VKG_OK;
    *rows = limit / (2 * (size_t)F) & (even ? ~(size_t)1 : ~(size_t)0);
    VKG_CHECK(*rows > 0, VKG_ERR_INVALID_ARG,
              "%s: %s of h (2F=%zu elements each) %s more than the %zu one shader dispatch may "
              "index",
              op, even ? "two rows" : "one row", 2 * (size_t)F,
              even ? "(a bf16 out of odd F takes rows in pairs) are" : "is", limit);
    return VKG_OK;
}

vkg_status vkg_op_swiglu_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor h, int N, int F)
{
    const char *op = "swiglu_fwd";
    uint32_t obf = out.dtype == VKG_BF16, hbf = h.dtype == VKG_BF16;
    size_t nb;
    VKG_TRY(check_shape(op, N, F, obf && F % 2, &nb));
    VKG_TRY(vkg__op_need_any(op, "out", out, (size_t)N * F));
    VKG_TRY(vkg__op_need_any(op, "h", h, (size_t)N * 2 * F));
    /* fp32 tensors name no bf16 constants */
    uint32_t spec[5] = {SWIGLU_WG, 1, 1, obf, hbf};
    int nspec = hbf ? 5 : obf ? 4 : 3;
    for (size_t n0 = 0; n0 < (size_t)N; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb, at = n0 * (size_t)F;
        push_fwd p = {.out = out.addr + (obf ? 2 : 4) * at,
                      .h = h.addr + (hbf ? 2 : 4) * 2 * at,
                      .N = (uint32_t)m,
                      .F = (uint32_t)F};
        size_t items = obf ? (m * F + 1) / 2 : m * F;
        VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_swiglu_fwd, spec, nspec, &p, sizeof p,
                                 vkg__op_groups_capped(items, SWIGLU_WG), 1, 1, op));
    }
    return VKG_OK;
}

vkg_status vkg_op_swiglu_bwd(vkg_cmd *c, vkg_tensor dh, vkg_tensor h, vkg_tensor dout, int N, int F)
{
    const char *op = "swiglu_bwd";
    uint32_t hbf = h.dtype == VKG_BF16;
    size_t nb;
    VKG_TRY(check_shape(op, N, F, 0, &nb));
    VKG_TRY(vkg__op_need(op, "dh", dh, (size_t)N * 2 * F));
    VKG_TRY(vkg__op_need_any(op, "h", h, (size_t)N * 2 * F));
    VKG_TRY(vkg__op_need(op, "dout", dout, (size_t)N * F));
    uint32_t spec[5] = {SWIGLU_WG, 1, 1, 0, hbf};
    vkg_cmd_group_begin(c); /* the blocks write different rows */
    vkg_status st = VKG_OK;
    for (size_t n0 = 0; n0 < (size_t)N && st == VKG_OK; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb, at = n0 * (size_t)F;
        push_bwd p = {.dh = dh.addr + 4 * 2 * at,
                      .h = h.addr + (hbf ? 2 : 4) * 2 * at,
                      .dout = dout.addr + 4 * at,
                      .N = (uint32_t)m,
                      .F = (uint32_t)F};
        st = vkg_cmd_dispatch(c, VKG_KERNEL_swiglu_bwd, spec, hbf ? 5 : 3, &p, sizeof p,
                              vkg__op_groups_capped(m * F, SWIGLU_WG), 1, 1, op);
    }
    vkg_cmd_group_end(c);
    return st;
}
