/* Token + position embedding (encoder), forward and backward.
 *   forward:  out (B,T,C) = wte[inp] + wpe[t]              (encoder_fwd.comp; out fp32, or bf16
 *                                                          for mixed precision's residual stream;
 *                                                          without wpe for rotary models)
 *   backward: dwte (V,C) += per distinct token, the sum of its positions' dout rows
 *                                                          (encoder_bwd_wte.comp)
 *             dwpe (T,C) += the sum over b of dout[b, t]   (encoder_bwd_wpe.comp)
 * Both backward passes are deterministic without float atomics: every gradient element has one
 * writer that sums in a fixed order. V is not an argument (the reference has none): it is taken
 * from the size of wte / dwte, and token ids outside [0, V) give NaN rows in the forward pass and
 * no gradient in the backward pass rather than out-of-bounds accesses.
 * Index limit (src/ops/op_util.h): the forward pass is recorded over blocks of whole positions
 * when B*T*C exceeds the limit (whole sequences per block when one fits, else parts of one
 * sequence, with wpe's address advanced too); its gather from wte, whose row is the token's, takes
 * the wide variant of the kernel (64-bit row addresses, encoder_fwd.comp WIDE = 1) when wte holds
 * more than the limit. The backward passes sum over positions (dwte) and over the batch (dwpe):
 * they are not split, their kernels' wide variants form the address of each row of dout and dwte
 * with 64-bit arithmetic and add in the same order. A row of C, a sequence of T*C (dwpe) or B*T
 * token ids (dwte) beyond the limit is an error naming the op and the sizes. */
#include "ops/op_util.h"
#include "ops/ops.h"

#define ENC_WG 256u /* flat passes (forward, dwpe) */

typedef struct push_fwd {
    uint64_t out, inp, wte, wpe;
    uint32_t BT, T, C, V;
} push_fwd;
VKG_PUSH_CHECK(push_fwd, encoder_fwd);

typedef struct push_wpe {
    uint64_t dwpe, dout;
    uint32_t B, TC;
} push_wpe;
VKG_PUSH_CHECK(push_wpe, encoder_bwd_wpe);

typedef struct push_wte {
    uint64_t dwte, dout, inp;
    uint32_t BT, C, V;
    uint32_t pad_;
} push_wte;
VKG_PUSH_CHECK(push_wte, encoder_bwd_wte);

/* Shapes must be positive, a row of C fit the limit (*limit). */
static vkg_status check_shape(const char *op, int B, int T, int C, size_t *limit)
{
    VKG_CHECK(B > 0 && T > 0 && C > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T and C must be positive (B=%d T=%d C=%d)", op, B, T, C);
    VKG_TRY(vkg__op_limit(op, limit));
    VKG_CHECK((size_t)C <= *limit, VKG_ERR_INVALID_ARG,
              "%s: one row of C=%d elements is more than the %zu one shader dispatch may index", op,
              C, *limit);
    return VKG_OK;
}

/* Rows of a (rows, C) table tensor: at least one (token ids are int32: at most 2^31 - 1 rows are
 * ever addressed). */
static vkg_status table_rows(const char *op, const char *name, vkg_tensor t, int C, uint32_t *rows)
{
    VKG_TRY(vkg__op_need(op, name, t, (size_t)C));
    size_t r = t.bytes / 4 / (size_t)C;
    *rows = r > 0x7FFFFFFFu ? 0x7FFFFFFFu : (uint32_t)r;
    return VKG_OK;
}

/* One dispatch of the forward pass over positions [at, at + m) of the batch, whose wpe rows start
 * at row t0 and whose position in the sequence is (bt mod T) + t0. */
static vkg_status fwd_block(vkg_cmd *c, const push_fwd *whole, int wide, int bf16, int wpe,
                            size_t at, size_t m, size_t t0, uint32_t T)
{
    size_t C = whole->C;
    push_fwd p = *whole;
    p.out += (bf16 ? 2 : 4) * at * C;
    p.inp += 4 * at;
    p.wpe += 4 * t0 * C;
    p.BT = (uint32_t)m;
    p.T = T;
    /* fp32 outputs name no bf16 constant, and with wpe no WPE constant (their pipelines are
     * those of before bf16 and rotary models) */
    uint32_t spec[6] = {ENC_WG, 1, 1, wide ? 1u : 0u, bf16 ? 1u : 0u, 0};
    return vkg_cmd_dispatch(c, VKG_KERNEL_encoder_fwd, spec,
                            !wpe   ? 6
                            : bf16 ? 5
                            : wide ? 4
                                   : 3,
                            &p, sizeof p, vkg__op_groups_capped(bf16 ? (C + 1) / 2 : C, ENC_WG),
                            vkg__op_groups_capped(m, 1), 1, "encoder_fwd");
}

/* The forward pass; wpe NULL: the token embedding alone. */
static vkg_status encoder_fwd(vkg_cmd *c, const char *op, vkg_tensor out, vkg_tensor inp,
                              vkg_tensor wte, const vkg_tensor *wpe, int B, int T, int C)
{
    size_t limit;
    VKG_TRY(check_shape(op, B, T, C, &limit));
    size_t BT = (size_t)B * T, uT = (size_t)T;
    VKG_TRY(vkg__op_need_any(op, "out", out, BT * C));
    int bf16 = out.dtype == VKG_BF16;
    VKG_CHECK(!bf16 || C % 2 == 0, VKG_ERR_INVALID_ARG, "%s: a bf16 out needs even C, got %d", op,
              C);
    VKG_TRY(vkg__op_need(op, "inp", inp, BT));
    if (wpe)
        VKG_TRY(vkg__op_need(op, "wpe", *wpe, uT * C));
    push_fwd p = {.out = out.addr,
                  .inp = inp.addr,
                  .wte = wte.addr,
                  .wpe = wpe ? wpe->addr : wte.addr, /* not read without wpe */
                  .BT = (uint32_t)BT,
                  .T = (uint32_t)T,
                  .C = (uint32_t)C};
    VKG_TRY(table_rows(op, "wte", wte, C, &p.V));
    int wide = (size_t)p.V * (size_t)C > limit;
    /* Positions per dispatch: all of them, else as many whole sequences as fit. */
    size_t nb = BT * C <= limit ? BT : limit / (size_t)C / uT * uT;
    if (nb > 0) {
        for (size_t at = 0; at < BT; at += nb)
            VKG_TRY(fwd_block(c, &p, wide, bf16, wpe != NULL, at, BT - at < nb ? BT - at : nb, 0,
                              (uint32_t)T));
        return VKG_OK;
    }
    /* Not even one sequence fits: parts of each, wpe advanced to the part's first position and T
     * set to the part's length (the shader takes bt mod T as the position). */
    size_t part = limit / (size_t)C;
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t t0 = 0; t0 < uT; t0 += part) {
            size_t m = uT - t0 < part ? uT - t0 : part;
            VKG_TRY(fwd_block(c, &p, wide, bf16, wpe != NULL, b * uT + t0, m, t0, (uint32_t)m));
        }
    return VKG_OK;
}

vkg_status vkg_op_encoder_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor wte,
                              vkg_tensor wpe, int B, int T, int C)
{
    return encoder_fwd(c, "encoder_fwd", out, inp, wte, &wpe, B, T, C);
}

vkg_status vkg_op_embed_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor wte, int B,
                            int T, int C)
{
    return encoder_fwd(c, "embed_fwd", out, inp, wte, NULL, B, T, C);
}

/* Workgroup of encoder_bwd_wte: invocations (the device's tuning), and channels per invocation.
 * GPUs: 256 x 4 covers C <= 1024 with one workgroup per position. CPU devices: 64 x 4, since every
 * barrier switches through all subgroups of the workgroup. */
static void wte_config(const vkg_device_t *dev, uint32_t *wg, uint32_t *cpt)
{
    *wg = vkg_device_tuning_get(dev).encoder_wte_wg;
    *cpt = 4u;
}

static push_wpe wpe_push(vkg_tensor dwpe, vkg_tensor dout, int B, int T, int C)
{
    return (push_wpe){
        .dwpe = dwpe.addr, .dout = dout.addr, .B = (uint32_t)B, .TC = (uint32_t)((size_t)T * C)};
}

/* Whether dwpe's pass takes the wide variant (B*T*C beyond the limit: 64-bit addresses of the
 * batch rows of dout, indexed within one sequence of T*C, which must fit). */
static vkg_status wpe_wide(const char *op, int B, int T, int C, size_t limit, int *wide)
{
    size_t TC = (size_t)T * C;
    *wide = (size_t)B * TC > limit;
    VKG_CHECK(!*wide || TC <= limit, VKG_ERR_INVALID_ARG,
              "%s: one sequence of T*C = %zu elements (dwpe) is more than the %zu one shader "
              "dispatch may index",
              op, TC, limit);
    return VKG_OK;
}

static vkg_status dispatch_wpe(vkg_cmd *c, const push_wpe *pp, int T, int C, int wide)
{
    uint32_t spec_wpe[4] = {ENC_WG, 1, 1, 1};
    return vkg_cmd_dispatch(c, VKG_KERNEL_encoder_bwd_wpe, spec_wpe, wide ? 4 : 3, pp, sizeof *pp,
                            vkg__op_groups_capped((size_t)T * C, ENC_WG), 1, 1, "encoder_bwd_wpe");
}

/* The backward pass; dwpe NULL: wte's rows alone. */
static vkg_status encoder_bwd(vkg_cmd *c, const char *op, vkg_tensor dwte, const vkg_tensor *dwpe,
                              vkg_tensor dout, vkg_tensor inp, int B, int T, int C)
{
    size_t limit;
    VKG_TRY(check_shape(op, B, T, C, &limit));
    size_t BT = (size_t)B * T;
    if (dwpe)
        VKG_TRY(vkg__op_need(op, "dwpe", *dwpe, (size_t)T * C));
    VKG_TRY(vkg__op_need(op, "dout", dout, BT * C));
    VKG_TRY(vkg__op_need(op, "inp", inp, BT));
    push_wte pt = {.dwte = dwte.addr,
                   .dout = dout.addr,
                   .inp = inp.addr,
                   .BT = (uint32_t)BT,
                   .C = (uint32_t)C};
    VKG_TRY(table_rows(op, "dwte", dwte, C, &pt.V));
    int wide = BT * C > limit || (size_t)pt.V * (size_t)C > limit;
    VKG_CHECK(BT <= limit, VKG_ERR_INVALID_ARG,
              "%s: the B*T = %zu token ids are more than the %zu elements one shader dispatch may "
              "index",
              op, BT, limit);
    int pe_wide = 0;
    if (dwpe)
        VKG_TRY(wpe_wide(op, B, T, C, limit, &pe_wide));
    uint32_t wg, cpt;
    wte_config(vkg_cmd_device(c), &wg, &cpt);
    uint32_t spec_wte[5] = {wg, 1, 1, cpt, 1};
    uint32_t gy = vkg__ceil_div((size_t)C, (size_t)wg * cpt);
    vkg_status st;
    vkg_cmd_group_begin(c); /* the two passes write different tensors */
    st = vkg_cmd_dispatch(c, VKG_KERNEL_encoder_bwd_wte, spec_wte, wide ? 5 : 4, &pt, sizeof pt,
                          vkg__op_groups_capped(BT, 1), gy, 1, "encoder_bwd_wte");
    if (st == VKG_OK && dwpe) {
        push_wpe pp = wpe_push(*dwpe, dout, B, T, C);
        st = dispatch_wpe(c, &pp, T, C, pe_wide);
    }
    vkg_cmd_group_end(c);
    return st;
}

vkg_status vkg_op_encoder_bwd(vkg_cmd *c, vkg_tensor dwte, vkg_tensor dwpe, vkg_tensor dout,
                              vkg_tensor inp, int B, int T, int C)
{
    return encoder_bwd(c, "encoder_bwd", dwte, &dwpe, dout, inp, B, T, C);
}

vkg_status vkg_op_encoder_bwd_wte(vkg_cmd *c, vkg_tensor dwte, vkg_tensor dout, vkg_tensor inp,
                                  int B, int T, int C)
{
    return encoder_bwd(c, "encoder_bwd_wte", dwte, NULL, dout, inp, B, T, C);
}

vkg_status vkg_op_encoder_bwd_wpe(vkg_cmd *c, vkg_tensor dwpe, vkg_tensor dout, int B, int T, int C)
{
    const char *op = "encoder_bwd_wpe";
    size_t limit;
    VKG_TRY(check_shape(op, B, T, C, &limit));
    VKG_TRY(vkg__op_need(op, "dwpe", dwpe, (size_t)T * C));
    VKG_TRY(vkg__op_need(op, "dout", dout, (size_t)B * T * C));
    int wide;
    VKG_TRY(wpe_wide(op, B, T, C, limit, &wide));
    push_wpe pp = wpe_push(dwpe, dout, B, T, C);
    return dispatch_wpe(c, &pp, T, C, wide);
}
