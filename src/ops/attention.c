/* Causal multi-head self-attention, forward and backward, fp32, matching vkg_ref_attention_fwd
 * and vkg_ref_attention_bwd.
 *
 * Forward, two dispatches: attention_fwd (scaled scores and the causal softmax -> att), then
 * attention_fwd_pv (out = att v). Backward, two steps: attention_bwd (datt = dout v^T and the
 * softmax backward -> dpre, caller-provided scratch), then one group of three independent
 * dispatches of attention_fwd_pv, each accumulating into its own third of dqkv:
 * dq += scale dpre k, dk += scale dpre^T q, dv += att^T dout.
 * Every sum runs in a fixed order (no atomics), so results are bitwise reproducible.
 * Not here: dropout, masks other than causal, and a fused "flash" form that would not keep att
 * (the reference and the trainer keep it for the backward pass).
 */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

#define GRID_MAX 65535u

/* attention_fwd / attention_bwd tiling: LX x LY invocations, each RQ query rows x RK keys;
 * HC channels of a head in shared memory at a time. */
typedef struct score_tiles {
    uint32_t lx, ly, rq, rk, hc;
} score_tiles;

/* attention_fwd_pv tiling: LX x LY invocations, each RR output rows x RC channels; BK rows of the
 * reduction per shared-memory tile. */
typedef struct pv_tiles {
    uint32_t lx, ly, rr, rc, bk;
} pv_tiles;

/* One product O (+)= alpha * P X (or P^T X) over every (batch, head), see attention_fwd_pv.comp. */
typedef struct pv_job {
    const char *label;
    vkg_tensor P, X, O;
    uint32_t ldx, xoff, ldo, ooff;
    float alpha;
    uint32_t trans, accumulate;
} pv_job;

typedef struct push_fwd {
    uint64_t att, qkv;
    uint32_t T, C, NH, hs;
    float scale;
} push_fwd;
VKG_PUSH_CHECK(push_fwd, attention_fwd);

typedef struct push_bwd {
    uint64_t dpre, dout, qkv, att;
    uint32_t T, C, NH, hs;
} push_bwd;
VKG_PUSH_CHECK(push_bwd, attention_bwd);

typedef struct push_pv {
    uint64_t P, X, O;
    uint32_t T, NH, hs, ncb;
    uint32_t ldx, xoff, ldo, ooff;
    float alpha;
} push_pv;
VKG_PUSH_CHECK(push_pv, attention_fwd_pv);

/* Shared bytes of attention_fwd (attention_bwd needs less: one reduction array, not two). */
static size_t score_shared_bytes(const score_tiles *t)
{
    size_t bq = (size_t)t->ly * t->rq, bk = (size_t)t->lx * t->rk, hc = t->hc ? t->hc : 1;
    return 4 * (bq * hc + hc * (bk + 1) + 2 * bq * t->lx);
}

/* VKG_ATTENTION_SHARED (GPUs): 128 invocations, 32 queries x 32 keys per tile through shared
 * memory, 64 channels at a time (GPT-2's heads all have hs = 64: one chunk, the block's queries
 * loaded once; other head sizes use the same pipeline with zero-padded chunks, so a model needs
 * one variant per kernel). VKG_ATTENTION_DIRECT (CPU devices such as lavapipe): one subgroup of 8
 * lanes, 8 query rows x 2 keys per lane, read straight from memory (hc = 0): no barriers in the
 * loop and uniform loads of the query rows, about 5 times faster there than the shared-memory
 * tiling. */
static vkg_status pick_score_tiles(const char *op, const vkg_device_t *dev, score_tiles *out)
{
    const vkg_device_info *info = vkg_device_get_info(dev);
    score_tiles t = vkg_device_tuning_get(dev).attention == VKG_ATTENTION_DIRECT
                        ? (score_tiles){8, 1, 8, 2, 0}
                        : (score_tiles){16, 8, 4, 2, 64};
    while (score_shared_bytes(&t) > info->max_shared_memory && t.hc > 8)
        t.hc /= 2;
    VKG_CHECK(score_shared_bytes(&t) <= info->max_shared_memory, VKG_ERR_UNSUPPORTED,
              "%s: needs %zu bytes of shared memory, the device has %u", op, score_shared_bytes(&t),
              info->max_shared_memory);
    *out = t;
    return VKG_OK;
}

/* VKG_ATTENTION_SHARED: 128 invocations, 32 rows x 64 channels per workgroup, 32 reduction rows
 * per shared tile (4 * (32 * 33 + 32 * 64) = 12.4 KiB, within Vulkan's guaranteed 16 KiB).
 * VKG_ATTENTION_DIRECT: one subgroup, 8 rows x 4 channels per lane, read straight from memory
 * (bk = 0). */
static pv_tiles pick_pv_tiles(const vkg_device_t *dev)
{
    return vkg_device_tuning_get(dev).attention == VKG_ATTENTION_DIRECT
               ? (pv_tiles){8, 1, 8, 4, 0}
               : (pv_tiles){16, 8, 4, 4, 32};
}

/* Positive sizes, C divisible by NH, and every index within 32 bits. */
static vkg_status check_shape(const char *op, int B, int T, int C, int NH)
{
    VKG_CHECK(B > 0 && T > 0 && C > 0 && NH > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T, C and NH must be positive, got B=%d T=%d C=%d NH=%d", op, B, T, C, NH);
    VKG_CHECK(C % NH == 0, VKG_ERR_INVALID_ARG, "%s: C=%d is not divisible by NH=%d", op, C, NH);
    double qkv_elems = (double)B * T * 3.0 * C, att_elems = (double)B * NH * (double)T * T;
    VKG_CHECK(qkv_elems <= 4294967295.0, VKG_ERR_INVALID_ARG,
              "%s: qkv has B*T*3C = %.0f elements, more than 32-bit indices reach", op, qkv_elems);
    VKG_CHECK(att_elems <= 4294967295.0, VKG_ERR_INVALID_ARG,
              "%s: att has B*NH*T*T = %.0f elements, more than 32-bit indices reach", op,
              att_elems);
    return VKG_OK;
}

static vkg_status check_grid(const char *op, uint32_t gx, uint32_t gy, uint32_t gz)
{
    VKG_CHECK(gx <= GRID_MAX && gy <= GRID_MAX && gz <= GRID_MAX, VKG_ERR_INVALID_ARG,
              "%s: grid %u x %u x %u exceeds %u workgroups per dimension (T, NH or B too large)",
              op, gx, gy, gz, GRID_MAX);
    return VKG_OK;
}

static vkg_status record_pv(vkg_cmd *c, const char *op, const pv_tiles *t, const pv_job *j, int B,
                            int T, int NH, int hs)
{
    uint32_t br = t->ly * t->rr, bc = t->lx * t->rc;
    uint32_t ncb = vkg__ceil_div((size_t)hs, bc);
    uint32_t gx = vkg__ceil_div((size_t)T, br), gy = ncb * (uint32_t)NH, gz = (uint32_t)B;
    VKG_TRY(check_grid(op, gx, gy, gz));
    push_pv p = {.P = j->P.addr,
                 .X = j->X.addr,
                 .O = j->O.addr,
                 .T = (uint32_t)T,
                 .NH = (uint32_t)NH,
                 .hs = (uint32_t)hs,
                 .ncb = ncb,
                 .ldx = j->ldx,
                 .xoff = j->xoff,
                 .ldo = j->ldo,
                 .ooff = j->ooff,
                 .alpha = j->alpha};
    uint32_t spec[8] = {t->lx, t->ly, 1, t->rr, t->rc, t->bk, j->trans, j->accumulate};
    return vkg_cmd_dispatch(c, VKG_KERNEL_attention_fwd_pv, spec, 8, &p, sizeof p, gx, gy, gz,
                            j->label);
}

vkg_status vkg_op_attention_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor att, vkg_tensor qkv, int B,
                                int T, int C, int NH)
{
    const char *op = "attention_fwd";
    VKG_TRY(check_shape(op, B, T, C, NH));
    size_t BT = (size_t)B * T;
    VKG_TRY(vkg__op_need(op, "out", out, BT * C));
    VKG_TRY(vkg__op_need(op, "att", att, (size_t)B * NH * T * T));
    VKG_TRY(vkg__op_need(op, "qkv", qkv, BT * 3 * C));
    const vkg_device_t *dev = vkg_cmd_device(c);
    int hs = C / NH;
    score_tiles st;
    VKG_TRY(pick_score_tiles(op, dev, &st));
    pv_tiles pt = pick_pv_tiles(dev);

    uint32_t gx = vkg__ceil_div((size_t)T, st.ly * st.rq);
    VKG_TRY(check_grid(op, gx, (uint32_t)NH, (uint32_t)B));
    push_fwd p = {.att = att.addr,
                  .qkv = qkv.addr,
                  .T = (uint32_t)T,
                  .C = (uint32_t)C,
                  .NH = (uint32_t)NH,
                  .hs = (uint32_t)hs,
                  .scale = (float)(1.0 / sqrt(hs))};
    uint32_t spec[6] = {st.lx, st.ly, 1, st.rq, st.rk, st.hc};
    VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_attention_fwd, spec, 6, &p, sizeof p, gx, (uint32_t)NH,
                             (uint32_t)B, "attention_fwd"));

    pv_job j = {.label = "attention_fwd_pv",
                .P = att,
                .X = qkv,
                .O = out,
                .ldx = 3 * (uint32_t)C,
                .xoff = 2 * (uint32_t)C,
                .ldo = (uint32_t)C,
                .ooff = 0,
                .alpha = 1.0f,
                .trans = 0,
                .accumulate = 0};
    return record_pv(c, op, &pt, &j, B, T, NH, hs);
}

vkg_status vkg_op_attention_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout, vkg_tensor qkv,
                                vkg_tensor att, int B, int T, int C, int NH, vkg_tensor dpre)
{
    const char *op = "attention_bwd";
    VKG_TRY(check_shape(op, B, T, C, NH));
    size_t BT = (size_t)B * T, att_elems = (size_t)B * NH * T * T;
    VKG_TRY(vkg__op_need(op, "dqkv", dqkv, BT * 3 * C));
    VKG_TRY(vkg__op_need(op, "dout", dout, BT * C));
    VKG_TRY(vkg__op_need(op, "qkv", qkv, BT * 3 * C));
    VKG_TRY(vkg__op_need(op, "att", att, att_elems));
    VKG_TRY(vkg__op_need(op, "dpre", dpre, att_elems));
    const vkg_device_t *dev = vkg_cmd_device(c);
    int hs = C / NH;
    score_tiles st;
    VKG_TRY(pick_score_tiles(op, dev, &st));
    pv_tiles pt = pick_pv_tiles(dev);

    uint32_t gx = vkg__ceil_div((size_t)T, st.ly * st.rq);
    VKG_TRY(check_grid(op, gx, (uint32_t)NH, (uint32_t)B));
    push_bwd p = {.dpre = dpre.addr,
                  .dout = dout.addr,
                  .qkv = qkv.addr,
                  .att = att.addr,
                  .T = (uint32_t)T,
                  .C = (uint32_t)C,
                  .NH = (uint32_t)NH,
                  .hs = (uint32_t)hs};
    uint32_t spec[6] = {st.lx, st.ly, 1, st.rq, st.rk, st.hc};
    VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_attention_bwd, spec, 6, &p, sizeof p, gx, (uint32_t)NH,
                             (uint32_t)B, "attention_bwd"));

    uint32_t C3 = 3 * (uint32_t)C, uC = (uint32_t)C;
    float scale = (float)(1.0 / sqrt(hs));
    const pv_job jobs[3] = {
        {.label = "attention_bwd_dq",
         .P = dpre,
         .X = qkv,
         .O = dqkv,
         .ldx = C3,
         .xoff = uC,
         .ldo = C3,
         .ooff = 0,
         .alpha = scale,
         .trans = 0,
         .accumulate = 1},
        {.label = "attention_bwd_dk",
         .P = dpre,
         .X = qkv,
         .O = dqkv,
         .ldx = C3,
         .xoff = 0,
         .ldo = C3,
         .ooff = uC,
         .alpha = scale,
         .trans = 1,
         .accumulate = 1},
        {.label = "attention_bwd_dv",
         .P = att,
         .X = dout,
         .O = dqkv,
         .ldx = uC,
         .xoff = 0,
         .ldo = C3,
         .ooff = 2 * uC,
         .alpha = 1.0f,
         .trans = 1,
         .accumulate = 1},
    };
    /* the three write disjoint thirds of dqkv and read only what the first pass finished */
    vkg_status status = VKG_OK;
    vkg_cmd_group_begin(c);
    for (int i = 0; i < 3 && status == VKG_OK; i++)
        status = record_pv(c, op, &pt, &jobs[i], B, T, NH, hs);
    vkg_cmd_group_end(c);
    return status;
}
