/* Token + position embedding (encoder), forward and backward.
 *   forward:  out (B,T,C) = wte[inp] + wpe[t]              (encoder_fwd.comp)
 *   backward: dwte (V,C) += per distinct token, the sum of its positions' dout rows
 *                                                          (encoder_bwd_wte.comp)
 *             dwpe (T,C) += the sum over b of dout[b, t]   (encoder_bwd_wpe.comp)
 * Both backward passes are deterministic without float atomics: every gradient element has one
 * writer that sums in a fixed order. V is not an argument (the reference has none): it is taken
 * from the size of wte / dwte, and token ids outside [0, V) give NaN rows in the forward pass and
 * no gradient in the backward pass rather than out-of-bounds accesses. */
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

/* Shapes must be positive and B*T*C (plus one grid-stride step) must fit 32-bit indices. */
static vkg_status check_shape(const char *op, int B, int T, int C)
{
    VKG_CHECK(B > 0 && T > 0 && C > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T and C must be positive (B=%d T=%d C=%d)", op, B, T, C);
    size_t n = (size_t)B * T * C;
    VKG_CHECK(n <= 0xFFFFFFFFu - 65535u * ENC_WG, VKG_ERR_INVALID_ARG,
              "%s: B*T*C = %zu is too large for 32-bit shader indices", op, n);
    return VKG_OK;
}

/* Rows of a (rows, C) table tensor: at least one, and rows*C must fit 32-bit indices. */
static vkg_status table_rows(const char *op, const char *name, vkg_tensor t, int C, uint32_t *rows)
{
    VKG_TRY(vkg__op_need(op, name, t, (size_t)C));
    size_t r = t.bytes / 4 / (size_t)C;
    if ((size_t)C * r > 0xFFFFFFFFu)
        r = 0xFFFFFFFFu / (size_t)C; /* rows beyond 32-bit indices are never addressed */
    *rows = (uint32_t)r;
    return VKG_OK;
}

vkg_status vkg_op_encoder_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor wte,
                              vkg_tensor wpe, int B, int T, int C)
{
    const char *op = "encoder_fwd";
    VKG_TRY(check_shape(op, B, T, C));
    size_t BT = (size_t)B * T;
    VKG_TRY(vkg__op_need(op, "out", out, BT * C));
    VKG_TRY(vkg__op_need(op, "inp", inp, BT));
    VKG_TRY(vkg__op_need(op, "wpe", wpe, (size_t)T * C));
    push_fwd p = {.out = out.addr,
                  .inp = inp.addr,
                  .wte = wte.addr,
                  .wpe = wpe.addr,
                  .BT = (uint32_t)BT,
                  .T = (uint32_t)T,
                  .C = (uint32_t)C};
    VKG_TRY(table_rows(op, "wte", wte, C, &p.V));
    uint32_t spec[3] = {ENC_WG, 1, 1};
    return vkg_cmd_dispatch(c, VKG_KERNEL_encoder_fwd, spec, 3, &p, sizeof p,
                            vkg__op_groups_capped((size_t)C, ENC_WG), vkg__op_groups_capped(BT, 1),
                            1, op);
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

static vkg_status dispatch_wpe(vkg_cmd *c, const push_wpe *pp, int T, int C)
{
    uint32_t spec_wpe[3] = {ENC_WG, 1, 1};
    return vkg_cmd_dispatch(c, VKG_KERNEL_encoder_bwd_wpe, spec_wpe, 3, pp, sizeof *pp,
                            vkg__op_groups_capped((size_t)T * C, ENC_WG), 1, 1, "encoder_bwd_wpe");
}

vkg_status vkg_op_encoder_bwd(vkg_cmd *c, vkg_tensor dwte, vkg_tensor dwpe, vkg_tensor dout,
                              vkg_tensor inp, int B, int T, int C)
{
    const char *op = "encoder_bwd";
    VKG_TRY(check_shape(op, B, T, C));
    size_t BT = (size_t)B * T;
    VKG_TRY(vkg__op_need(op, "dwpe", dwpe, (size_t)T * C));
    VKG_TRY(vkg__op_need(op, "dout", dout, BT * C));
    VKG_TRY(vkg__op_need(op, "inp", inp, BT));
    push_wte pt = {.dwte = dwte.addr,
                   .dout = dout.addr,
                   .inp = inp.addr,
                   .BT = (uint32_t)BT,
                   .C = (uint32_t)C};
    VKG_TRY(table_rows(op, "dwte", dwte, C, &pt.V));
    push_wpe pp = wpe_push(dwpe, dout, B, T, C);
    uint32_t wg, cpt;
    wte_config(vkg_cmd_device(c), &wg, &cpt);
    uint32_t spec_wte[4] = {wg, 1, 1, cpt};
    uint32_t gy = vkg__ceil_div((size_t)C, (size_t)wg * cpt);
    vkg_status st;
    vkg_cmd_group_begin(c); /* the two passes write different tensors */
    st = vkg_cmd_dispatch(c, VKG_KERNEL_encoder_bwd_wte, spec_wte, 4, &pt, sizeof pt,
                          vkg__op_groups_capped(BT, 1), gy, 1, "encoder_bwd_wte");
    if (st == VKG_OK)
        st = dispatch_wpe(c, &pp, T, C);
    vkg_cmd_group_end(c);
    return st;
}

vkg_status vkg_op_encoder_bwd_wpe(vkg_cmd *c, vkg_tensor dwpe, vkg_tensor dout, int B, int T, int C)
{
    const char *op = "encoder_bwd_wpe";
    VKG_TRY(check_shape(op, B, T, C));
    VKG_TRY(vkg__op_need(op, "dwpe", dwpe, (size_t)T * C));
    VKG_TRY(vkg__op_need(op, "dout", dout, (size_t)B * T * C));
    push_wpe pp = wpe_push(dwpe, dout, B, T, C);
    return dispatch_wpe(c, &pp, T, C);
}
