/* Rotary position embedding (RoPE) of the Llama family, in place on the q and k heads of the
 * attention input qkv (B,T,(NH + 2 NKV) D) = per position [q (NH heads) | k (NKV) | v (NKV)],
 * head dimension D, positions t = 0..T-1, in Hugging Face transformers' rotate_half convention:
 * pairs (i, i + D/2), i < D/2, rotated by t * inv_freq[i] (rope_fwd.comp); the backward rotates
 * the gradient of the same tensor back by -t * inv_freq[i] (rope_bwd.comp), also in place. Both
 * share shaders/rope.glsl: one invocation per pair, no reduction, so each element is written by
 * one invocation. inv_freq (D/2, fp32) is the caller's, so that a frequency scaling (Llama 3's)
 * is computed on the host. Grouped-query attention (NKV < NH) only changes which heads there are.
 * Mixed precision: the forward's qkv may be bf16 (D a multiple of 4: an invocation then rotates
 * two adjacent pairs, whole words, rounded once); gradients are fp32. Index limit: above it the
 * op is recorded over blocks of whole positions, one dispatch each with qkv's address advanced
 * and the first position's index passed; one position's row longer than the limit is an error
 * naming the op. */
#include "ops/op_util.h"
#include "ops/ops.h"

#define ROPE_WG 256u

typedef struct push_rope {
    uint64_t x, inv_freq;
    uint32_t rows, T, row0, W, heads, D;
} push_rope;
VKG_PUSH_CHECK(push_rope, rope_fwd);
VKG_PUSH_CHECK(push_rope, rope_bwd);

static vkg_status rope(vkg_cmd *c, vkg_kernel_id k, const char *op, vkg_tensor x,
                       vkg_tensor inv_freq, int B, int T, int NH, int NKV, int D)
{
    VKG_CHECK(B > 0 && T > 0 && NH > 0 && NKV > 0 && D > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T, NH, NKV and D must be positive (B=%d T=%d NH=%d NKV=%d D=%d)", op, B, T,
              NH, NKV, D);
    VKG_CHECK(D % 2 == 0, VKG_ERR_INVALID_ARG, "%s: the head dimension D must be even, got %d", op,
              D);
    VKG_CHECK(T <= (1 << 24), VKG_ERR_INVALID_ARG,
              "%s: T=%d positions, more than fp32 holds exactly (2^24)", op, T);
    uint32_t bf = x.dtype == VKG_BF16;
    VKG_CHECK(!bf || D % 4 == 0, VKG_ERR_INVALID_ARG,
              "%s: a bf16 qkv needs D a multiple of 4, got %d", op, D);
    size_t W = (size_t)(NH + 2 * (size_t)NKV) * (size_t)D, rows = (size_t)B * (size_t)T;
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_CHECK(W <= limit, VKG_ERR_INVALID_ARG,
              "%s: one position's row of (NH + 2 NKV) D=%zu elements is more than the %zu one "
              "shader dispatch may index",
              op, W, limit);
    VKG_TRY(vkg__op_need_any(op, k == VKG_KERNEL_rope_fwd ? "qkv" : "dqkv", x, rows * W));
    VKG_TRY(vkg__op_need(op, "inv_freq", inv_freq, (size_t)D / 2));
    size_t nb = rows * W <= limit ? rows : limit / W;
    uint32_t spec[4] = {ROPE_WG, 1, 1, bf};
    size_t per = (size_t)(NH + NKV) * (size_t)(bf ? D / 4 : D / 2);
    vkg_cmd_group_begin(c); /* the blocks write different positions */
    vkg_status st = VKG_OK;
    for (size_t r0 = 0; r0 < rows && st == VKG_OK; r0 += nb) {
        size_t m = rows - r0 < nb ? rows - r0 : nb;
        push_rope p = {.x = x.addr + (bf ? 2 : 4) * r0 * W,
                       .inv_freq = inv_freq.addr,
                       .rows = (uint32_t)m,
                       .T = (uint32_t)T,
                       .row0 = (uint32_t)(r0 % (size_t)T),
                       .W = (uint32_t)W,
                       .heads = (uint32_t)(NH + NKV),
                       .D = (uint32_t)D};
        st = vkg_cmd_dispatch(c, k, spec, bf ? 4 : 3, &p, sizeof p,
                              vkg__op_groups_capped(m * per, ROPE_WG), 1, 1, op);
    }
    vkg_cmd_group_end(c);
    return st;
}

vkg_status vkg_op_rope_fwd(vkg_cmd *c, vkg_tensor qkv, vkg_tensor inv_freq, int B, int T, int NH,
                           int NKV, int D)
{
    return rope(c, VKG_KERNEL_rope_fwd, "rope_fwd", qkv, inv_freq, B, T, NH, NKV, D);
}

vkg_status vkg_op_rope_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor inv_freq, int B, int T, int NH,
                           int NKV, int D)
{
    const char *op = "rope_bwd";
    VKG_CHECK(dqkv.dtype != VKG_BF16, VKG_ERR_INVALID_ARG,
              "%s: tensor dqkv is bf16; gradients are fp32", op);
    return rope(c, VKG_KERNEL_rope_bwd, op, dqkv, inv_freq, B, T, NH, NKV, D);
}
