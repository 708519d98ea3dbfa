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
 * Index limit (src/ops/op_util.h): every (batch, head) pair is computed on its own, so above the
 * limit each pass is recorded over blocks of pairs, one dispatch per block with the addresses of
 * att, dpre, qkv, dqkv, out and dout advanced to the block's first pair: blocks of whole batches
 * (all heads) while one batch fits, else blocks of heads of one batch. The largest index of a
 * block is then below its pairs' att (heads x T*T) and its batch's qkv (T*3C); one head beyond the
 * limit (T*T or T*3C) is an error naming the op and the sizes. The results are the same.
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

/* Positive sizes and C divisible by NH. */
static vkg_status check_shape(const char *op, int B, int T, int C, int NH)
{
    VKG_CHECK(B > 0 && T > 0 && C > 0 && NH > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T, C and NH must be positive, got B=%d T=%d C=%d NH=%d", op, B, T, C, NH);
    VKG_CHECK(C % NH == 0, VKG_ERR_INVALID_ARG, "%s: C=%d is not divisible by NH=%d", op, C, NH);
    return VKG_OK;
}

/* A block of (batch, head) pairs recorded by one dispatch of each pass: batches [b0, b0 + nb) and
 * heads [h0, h0 + nh) of each (nh = NH, h0 = 0 unless the block is part of one batch). */
typedef struct att_block {
    size_t b0, nb, h0, nh;
} att_block;

/* The blocks of a shape: *per_batch batches per block (all heads), or, when 0, *per_head heads of
 * one batch per block. One block of everything when all of it fits the limit. */
static vkg_status plan_blocks(const char *op, int B, int T, int C, int NH, size_t *per_batch,
                              size_t *per_head)
{
    size_t limit;
    *per_batch = (size_t)B;
    *per_head = (size_t)NH;
    VKG_TRY(vkg__op_limit(op, &limit));
    size_t TT = (size_t)T * T, att_b = (size_t)NH * TT, qkv_b = (size_t)T * 3 * C;
    if ((size_t)B * att_b <= limit && (size_t)B * qkv_b <= limit)
        return VKG_OK;
    size_t nb = limit / att_b < limit / qkv_b ? limit / att_b : limit / qkv_b;
    *per_batch = nb < GRID_MAX ? nb : GRID_MAX;
    if (nb > 0)
        return VKG_OK;
    VKG_CHECK(TT <= limit && qkv_b <= limit, VKG_ERR_INVALID_ARG,
              "%s: one head needs T*T = %zu elements of att and T*3C = %zu of qkv (T=%d C=%d), "
              "more than the %zu one shader dispatch may index",
              op, TT, qkv_b, T, C, limit);
    *per_head = limit / TT;
    return VKG_OK;
}

/* The i-th block of the plan, or 0 when there are fewer. */
static int block_at(int B, int NH, size_t per_batch, size_t per_head, size_t i, att_block *out)
{
    if (per_batch > 0) {
        size_t b0 = i * per_batch;
        if (b0 >= (size_t)B)
            return 0;
        *out =
            (att_block){b0, (size_t)B - b0 < per_batch ? (size_t)B - b0 : per_batch, 0, (size_t)NH};
        return 1;
    }
    size_t blocks_per_batch = ((size_t)NH + per_head - 1) / per_head;
    size_t b = i / blocks_per_batch, h0 = i % blocks_per_batch * per_head;
    if (b >= (size_t)B)
        return 0;
    *out = (att_block){b, 1, h0, (size_t)NH - h0 < per_head ? (size_t)NH - h0 : per_head};
    return 1;
}

/* Byte offsets of a block's first pair in att / dpre (B,NH,T,T), in a (B,T,ld) tensor whose head
 * h starts at channel h*hs of its part. */
static uint64_t att_at(const att_block *k, int T, int NH)
{
    return 4 * ((k->b0 * (size_t)NH + k->h0) * (size_t)T * (size_t)T);
}

static uint64_t rows_at(const att_block *k, int T, size_t ld, int hs)
{
    return 4 * (k->b0 * (size_t)T * ld + k->h0 * (size_t)hs);
}

static vkg_status check_grid(const char *op, uint32_t gx, uint32_t gy, uint32_t gz)
{
    VKG_CHECK(gx <= GRID_MAX && gy <= GRID_MAX && gz <= GRID_MAX, VKG_ERR_INVALID_ARG,
              "%s: grid %u x %u x %u exceeds %u workgroups per dimension (T, NH or B too large)",
              op, gx, gy, gz, GRID_MAX);
    return VKG_OK;
}

/* One dispatch of attention_fwd_pv for job j over block k. */
static vkg_status record_pv(vkg_cmd *c, const char *op, const pv_tiles *t, const pv_job *j,
                            const att_block *k, int T, int NH, int hs)
{
    uint32_t br = t->ly * t->rr, bc = t->lx * t->rc;
    uint32_t ncb = vkg__ceil_div((size_t)hs, bc);
    uint32_t gx = vkg__ceil_div((size_t)T, br), gy = ncb * (uint32_t)k->nh, gz = (uint32_t)k->nb;
    VKG_TRY(check_grid(op, gx, gy, gz));
    push_pv p = {.P = j->P.addr + att_at(k, T, NH),
                 .X = j->X.addr + rows_at(k, T, j->ldx, hs),
                 .O = j->O.addr + rows_at(k, T, j->ldo, hs),
                 .T = (uint32_t)T,
                 .NH = (uint32_t)k->nh,
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
    size_t BT = (size_t)B * T, per_batch, per_head;
    VKG_TRY(vkg__op_need(op, "out", out, BT * C));
    VKG_TRY(vkg__op_need(op, "att", att, (size_t)B * NH * T * T));
    VKG_TRY(vkg__op_need(op, "qkv", qkv, BT * 3 * C));
    VKG_TRY(plan_blocks(op, B, T, C, NH, &per_batch, &per_head));
    const vkg_device_t *dev = vkg_cmd_device(c);
    int hs = C / NH;
    score_tiles st;
    VKG_TRY(pick_score_tiles(op, dev, &st));
    pv_tiles pt = pick_pv_tiles(dev);
    uint32_t gx = vkg__ceil_div((size_t)T, st.ly * st.rq);
    uint32_t spec[6] = {st.lx, st.ly, 1, st.rq, st.rk, st.hc};
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

    /* The blocks are independent: the probabilities of every block, then their products. */
    vkg_status status = VKG_OK;
    att_block k;
    vkg_cmd_group_begin(c);
    for (size_t i = 0; status == VKG_OK && block_at(B, NH, per_batch, per_head, i, &k); i++) {
        push_fwd p = {.att = att.addr + att_at(&k, T, NH),
                      .qkv = qkv.addr + rows_at(&k, T, 3 * (size_t)C, hs),
                      .T = (uint32_t)T,
                      .C = (uint32_t)C,
                      .NH = (uint32_t)k.nh,
                      .hs = (uint32_t)hs,
                      .scale = (float)(1.0 / sqrt(hs))};
        status = check_grid(op, gx, (uint32_t)k.nh, (uint32_t)k.nb);
        if (status == VKG_OK)
            status = vkg_cmd_dispatch(c, VKG_KERNEL_attention_fwd, spec, 6, &p, sizeof p, gx,
                                      (uint32_t)k.nh, (uint32_t)k.nb, "attention_fwd");
    }
    vkg_cmd_group_end(c);
    VKG_TRY(status);
    vkg_cmd_group_begin(c);
    for (size_t i = 0; status == VKG_OK && block_at(B, NH, per_batch, per_head, i, &k); i++)
        status = record_pv(c, op, &pt, &j, &k, T, NH, hs);
    vkg_cmd_group_end(c);
    return status;
}

vkg_status vkg_op_attention_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout, vkg_tensor qkv,
                                vkg_tensor att, int B, int T, int C, int NH, vkg_tensor dpre)
{
    const char *op = "attention_bwd";
    VKG_TRY(check_shape(op, B, T, C, NH));
    size_t BT = (size_t)B * T, att_elems = (size_t)B * NH * T * T, per_batch, per_head;
    VKG_TRY(vkg__op_need(op, "dqkv", dqkv, BT * 3 * C));
    VKG_TRY(vkg__op_need(op, "dout", dout, BT * C));
    VKG_TRY(vkg__op_need(op, "qkv", qkv, BT * 3 * C));
    VKG_TRY(vkg__op_need(op, "att", att, att_elems));
    VKG_TRY(vkg__op_need(op, "dpre", dpre, att_elems));
    VKG_TRY(plan_blocks(op, B, T, C, NH, &per_batch, &per_head));
    const vkg_device_t *dev = vkg_cmd_device(c);
    int hs = C / NH;
    score_tiles st;
    VKG_TRY(pick_score_tiles(op, dev, &st));
    pv_tiles pt = pick_pv_tiles(dev);
    uint32_t gx = vkg__ceil_div((size_t)T, st.ly * st.rq);
    uint32_t spec[6] = {st.lx, st.ly, 1, st.rq, st.rk, st.hc};

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
    /* The score gradients of every block (independent), then the three products of every block:
     * they write disjoint thirds of dqkv and read only what the first pass finished. */
    vkg_status status = VKG_OK;
    att_block k;
    vkg_cmd_group_begin(c);
    for (size_t i = 0; status == VKG_OK && block_at(B, NH, per_batch, per_head, i, &k); i++) {
        push_bwd p = {.dpre = dpre.addr + att_at(&k, T, NH),
                      .dout = dout.addr + rows_at(&k, T, (size_t)C, hs),
                      .qkv = qkv.addr + rows_at(&k, T, 3 * (size_t)C, hs),
                      .att = att.addr + att_at(&k, T, NH),
                      .T = (uint32_t)T,
                      .C = (uint32_t)C,
                      .NH = (uint32_t)k.nh,
                      .hs = (uint32_t)hs};
        status = check_grid(op, gx, (uint32_t)k.nh, (uint32_t)k.nb);
        if (status == VKG_OK)
            status = vkg_cmd_dispatch(c, VKG_KERNEL_attention_bwd, spec, 6, &p, sizeof p, gx,
                                      (uint32_t)k.nh, (uint32_t)k.nb, "attention_bwd");
    }
    vkg_cmd_group_end(c);
    VKG_TRY(status);
    vkg_cmd_group_begin(c);
    for (size_t i = 0; status == VKG_OK && block_at(B, NH, per_batch, per_head, i, &k); i++)
        for (int q = 0; q < 3 && status == VKG_OK; q++)
            status = record_pv(c, op, &pt, &jobs[q], &k, T, NH, hs);
    vkg_cmd_group_end(c);
    return status;
}
