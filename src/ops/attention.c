/* Causal multi-head self-attention, forward and backward, fp32, in the flash form: the (T, T)
 * attention matrix is never stored. Matches vkg_ref_attention_fwd and vkg_ref_attention_bwd,
 * and in its grouped-query form (vkg_op_attention_gqa_*: NH query heads sharing NKV key/value
 * heads, head dim D given) vkg_ref_attention_gqa_fwd/_bwd. GPT-2's ops are the grouped-query
 * kernels with NKV = NH and D = C/NH, where the kernels compute the same operations in the same
 * order as before grouping existed (only addresses changed), so their results are bit for bit
 * those of before. The key/value gradient kernel runs one workgroup per key/value head and sums
 * its group's query heads in ascending order, each over its query tiles, in registers.
 * Mixed precision: qkv and out may be bf16 (the forward's both or neither; an even head size),
 * widened on load and rounded once on store; lse, delta, every sum and dqkv stay fp32.
 *
 * Forward, one dispatch (attention_fwd): per (batch, head, block of query rows), the key tiles
 * the block can see with the online softmax; writes out and the rows' logsumexp lse, which is all
 * the backward pass keeps of the softmax. Backward, two steps: attention_bwd_delta (delta =
 * rowsum(dout * out) per row and head), then one group of two independent dispatches that
 * recompute the probabilities from q, k and lse: attention_bwd_dq (per block of queries over
 * the key tiles it sees: dq) and attention_bwd_dkv (per block of keys over the query tiles that
 * see it: dk and dv), each accumulating into its own part of dqkv. Every sum runs in a fixed
 * order and every output element has one writer (no atomics), so results are bitwise
 * reproducible on a device.
 * Two forms, chosen by the device's tuning (vkg_device_tuning.attention): VKG_ATTENTION_SHARED
 * (GPUs: an invocation per row, tiles staged in shared memory) and VKG_ATTENTION_DIRECT (CPU
 * devices: one subgroup per workgroup, register tiles, subgroup broadcasts, no shared memory and
 * no barriers); see pick_plan. Not here: dropout, masks other than causal.
 * Index limit (src/ops/op_util.h): every (batch, head) pair is computed on its own, so above the
 * limit each pass is recorded over blocks of whole batches, one dispatch per block with the
 * addresses of every tensor advanced to the block's first batch. The largest index of a block is
 * below its batches' qkv (T*3C each, T*(NH+2*NKV)*D grouped: out and dout hold less, lse and
 * delta NH*T); one batch beyond the limit is an error naming the op and the sizes (its heads
 * interleave within each row of qkv, so fewer heads would not shorten the range). The results are
 * the same.
 */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

#define GRID_MAX 65535u

/* Workgroup sizes and tiles of the four kernels (specialization constants 0 and 3-5). */
typedef struct att_plan {
    uint32_t form;           /* 0: rows per invocation (GPUs); 1: one subgroup (CPU devices) */
    uint32_t fwd_wg, fwd_bk; /* attention_fwd: query rows per workgroup, keys per tile */
    uint32_t dq_wg, dq_bk;   /* attention_bwd_dq: the same */
    uint32_t dkv_wg, dkv_bq; /* attention_bwd_dkv: keys per workgroup, queries per tile */
    uint32_t delta_wg;       /* attention_bwd_delta: (row, head) pairs per workgroup */
} att_plan;

/* The grouped-query layout shared by attention_fwd, _bwd_dq and _bwd_dkv: G query heads per
 * key/value head, qkv rows of LD = (NH + 2 NKV) hs values, k at KOFF = NH hs and v at
 * VOFF = KOFF + NKV hs of a row, out rows of OC = NH hs. */
typedef struct push_fwd {
    uint64_t out, lse, qkv;
    uint32_t T, NH, hs, G;
    uint32_t LD, KOFF, VOFF, OC;
    float scale;
} push_fwd;
VKG_PUSH_CHECK(push_fwd, attention_fwd);

typedef struct push_delta {
    uint64_t delta, dout, out;
    uint32_t T, C, NH, hs;
} push_delta;
VKG_PUSH_CHECK(push_delta, attention_bwd_delta);

typedef struct push_bwd {
    uint64_t dqkv, dout, qkv, lse, delta;
    uint32_t T, NH, hs, G;
    uint32_t LD, KOFF, VOFF, OC;
    float scale;
} push_bwd;
VKG_PUSH_CHECK(push_bwd, attention_bwd_dq);
VKG_PUSH_CHECK(push_bwd, attention_bwd_dkv);

/* Shared bytes of the GPU form's kernels for head size hs. */
static size_t fwd_shared(uint32_t bk, size_t hs)
{
    return 4 * 2 * (size_t)bk * hs; /* a tile of keys and one of values (attention_bwd_dq too) */
}

static size_t dkv_shared(uint32_t wg, uint32_t bq, size_t hs)
{
    return 4 * (2 * (size_t)wg * (hs + 1) + 2 * (size_t)bq * hs + 2 * (size_t)bq);
}

/* VKG_ATTENTION_DIRECT on a device whose subgroups have 4 to 16 lanes (CPU devices such as
 * lavapipe, 8 lanes = one AVX2 register): the subgroup form, a workgroup of one subgroup of S
 * lanes owning S query rows (or keys), tiles of 2S keys (queries) so that each lane holds two
 * scores per row (at hs = 64: 64 output and 16 score accumulators per lane in the forward pass,
 * the size of the matmul's register tile; tiles of 4S measured no faster). Otherwise
 * (VKG_ATTENTION_SHARED, or subgroups too wide for register tiles of S rows, or of a size the
 * driver may not keep when it compiles) the rows form: 64 query rows per workgroup over tiles of 32
 * keys (16 KiB of shared memory at hs = 64, Vulkan's guaranteed minimum), and 32 keys per workgroup
 * over tiles of 16 queries for the key gradients (24.4 KiB at hs = 64); tiles are halved, then the
 * key blocks, while the device allows less. */
static vkg_status pick_plan(const char *op, const vkg_device_t *dev, int hs, att_plan *out)
{
    const vkg_device_info *info = vkg_device_get_info(dev);
    uint32_t S = info->subgroup_size;
    if (vkg_device_tuning_get(dev).attention == VKG_ATTENTION_DIRECT && S >= 4 && S <= 16) {
        *out = (att_plan){1, S, 2 * S, S, 2 * S, S, 2 * S, 64};
        return VKG_OK;
    }
    att_plan pl = {0, 64, 32, 64, 32, 32, 16, 64};
    size_t max = info->max_shared_memory;
    while (fwd_shared(pl.fwd_bk, (size_t)hs) > max && pl.fwd_bk > 1)
        pl.fwd_bk /= 2;
    pl.dq_bk = pl.fwd_bk;
    while (dkv_shared(pl.dkv_wg, pl.dkv_bq, (size_t)hs) > max && pl.dkv_bq > 1)
        pl.dkv_bq /= 2;
    while (dkv_shared(pl.dkv_wg, pl.dkv_bq, (size_t)hs) > max && pl.dkv_wg > 1)
        pl.dkv_wg /= 2;
    size_t need = fwd_shared(pl.fwd_bk, (size_t)hs);
    if (dkv_shared(pl.dkv_wg, pl.dkv_bq, (size_t)hs) > need)
        need = dkv_shared(pl.dkv_wg, pl.dkv_bq, (size_t)hs);
    VKG_CHECK(need <= max, VKG_ERR_UNSUPPORTED,
              "%s: head size %d needs %zu bytes of shared memory, the device has %zu", op, hs, need,
              max);
    *out = pl;
    return VKG_OK;
}

/* Positive sizes and C divisible by NH. */
static vkg_status check_shape(const char *op, int B, int T, int C, int NH)
{
    VKG_CHECK(B > 0 && T > 0 && C > 0 && NH > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T, C and NH must be positive, got B=%d T=%d C=%d NH=%d", op, B, T, C, NH);
    VKG_CHECK(C % NH == 0, VKG_ERR_INVALID_ARG, "%s: C=%d is not divisible by NH=%d", op, C, NH);
    return VKG_OK;
}

/* The shape of one call: B, T, NH query heads and NKV key/value heads of D channels, in the
 * grouped-query layout (ld: values per row of qkv and dqkv, oc: of out and dout); GPT-2's
 * C, NH is NKV = NH, D = C / NH (ld = 3C, oc = C). gqa: the caller is a GQA entry point (its
 * messages name NKV and D). */
typedef struct att_shape {
    int B, T, NH, NKV, D, gqa;
    size_t ld, oc;
} att_shape;

static att_shape make_shape(int B, int T, int NH, int NKV, int D, int gqa)
{
    att_shape s = {B, T, NH, NKV, D, gqa, 0, 0};
    s.oc = (size_t)NH * (size_t)D;
    s.ld = s.oc + 2 * (size_t)NKV * (size_t)D;
    return s;
}

/* Batches per dispatch: all of them when they fit the limit, else as many whole batches as do
 * (at most GRID_MAX, the grid's z). */
static vkg_status plan_blocks(const char *op, const att_shape *s, size_t *per_batch)
{
    size_t limit, qkv_b = (size_t)s->T * s->ld;
    VKG_TRY(vkg__op_limit(op, &limit));
    *per_batch = (size_t)s->B;
    if ((size_t)s->B * qkv_b <= limit)
        return VKG_OK;
    VKG_CHECK(s->gqa || qkv_b <= limit, VKG_ERR_INVALID_ARG,
              "%s: one batch needs T*3C = %zu elements of qkv (T=%d C=%zu), more than the %zu one "
              "shader dispatch may index",
              op, qkv_b, s->T, s->oc, limit);
    VKG_CHECK(qkv_b <= limit, VKG_ERR_INVALID_ARG,
              "%s: one batch needs T*(NH+2*NKV)*D = %zu elements of qkv (T=%d NH=%d NKV=%d D=%d), "
              "more than the %zu one shader dispatch may index",
              op, qkv_b, s->T, s->NH, s->NKV, s->D, limit);
    *per_batch = limit / qkv_b < GRID_MAX ? limit / qkv_b : GRID_MAX;
    return VKG_OK;
}

/* bf16 tensors (mixed precision) need an even head size: a head's channels are whole words. */
static vkg_status check_bf16_heads(const char *op, uint32_t bf16, int hs)
{
    VKG_CHECK(!bf16 || hs % 2 == 0, VKG_ERR_INVALID_ARG,
              "%s: bf16 qkv or out needs an even head size, got %d", op, hs);
    return VKG_OK;
}

static vkg_status check_grid(const char *op, uint32_t gx, uint32_t gy, uint32_t gz)
{
    VKG_CHECK(gx <= GRID_MAX && gy <= GRID_MAX && gz <= GRID_MAX, VKG_ERR_INVALID_ARG,
              "%s: grid %u x %u x %u exceeds %u workgroups per dimension (T, NH or B too large)",
              op, gx, gy, gz, GRID_MAX);
    return VKG_OK;
}

/* Byte offsets of batch b0 in a (B,T,ld) tensor t and in a (B,NH,T) one. */
static uint64_t rows_at(vkg_tensor t, size_t b0, int T, size_t ld)
{
    return vkg_dtype_bytes(t.dtype) * (b0 * (size_t)T * ld);
}

static uint64_t stats_at(size_t b0, int T, int NH)
{
    return 4 * (b0 * (size_t)NH * (size_t)T);
}

/* Blocks of whole batches: the i-th is [*b0, *b0 + *nb), or 0 when there are fewer. */
static int block_at(int B, size_t per_batch, size_t i, size_t *b0, size_t *nb)
{
    *b0 = i * per_batch;
    if (*b0 >= (size_t)B)
        return 0;
    *nb = (size_t)B - *b0 < per_batch ? (size_t)B - *b0 : per_batch;
    return 1;
}

/* Checks of a GQA call: positive sizes, NH a multiple of NKV, D at most VKG_ATTENTION_MAX_D. */
static vkg_status check_gqa(const char *op, int B, int T, int NH, int NKV, int D)
{
    VKG_CHECK(B > 0 && T > 0 && NH > 0 && NKV > 0 && D > 0, VKG_ERR_INVALID_ARG,
              "%s: B, T, NH, NKV and D must be positive, got B=%d T=%d NH=%d NKV=%d D=%d", op, B, T,
              NH, NKV, D);
    VKG_CHECK(NH % NKV == 0, VKG_ERR_INVALID_ARG,
              "%s: NH=%d query heads are not a multiple of NKV=%d key/value heads", op, NH, NKV);
    VKG_CHECK(D <= VKG_ATTENTION_MAX_D, VKG_ERR_INVALID_ARG,
              "%s: head dim D=%d is above the %d the kernels hold in registers", op, D,
              VKG_ATTENTION_MAX_D);
    return VKG_OK;
}

/* The forward pass of shape s (checked by the caller). */
static vkg_status att_fwd(const char *op, vkg_cmd *c, vkg_tensor out, vkg_tensor lse,
                          vkg_tensor qkv, const att_shape *s)
{
    int B = s->B, T = s->T, NH = s->NH, hs = s->D;
    size_t BT = (size_t)B * T, per_batch, b0, nb;
    VKG_TRY(vkg__op_need_any(op, "out", out, BT * s->oc));
    VKG_TRY(vkg__op_need(op, "lse", lse, (size_t)B * NH * T));
    VKG_TRY(vkg__op_need_any(op, "qkv", qkv, BT * s->ld));
    VKG_TRY(plan_blocks(op, s, &per_batch));
    uint32_t bf = qkv.dtype == VKG_BF16;
    VKG_CHECK(out.dtype == qkv.dtype, VKG_ERR_INVALID_ARG,
              "%s: qkv and out must both be fp32 or both bf16", op);
    VKG_TRY(check_bf16_heads(op, bf, hs));
    att_plan pl;
    VKG_TRY(pick_plan(op, vkg_cmd_device(c), hs, &pl));
    uint32_t gx = vkg__ceil_div((size_t)T, pl.fwd_wg);
    /* fp32 names no ACT_BF16 constant (its pipeline is the one of before bf16) */
    uint32_t spec[7] = {pl.fwd_wg, 1, 1, pl.form, (uint32_t)hs, pl.fwd_bk, bf};
    vkg_status status = VKG_OK;
    vkg_cmd_group_begin(c); /* the blocks are independent */
    for (size_t i = 0; status == VKG_OK && block_at(B, per_batch, i, &b0, &nb); i++) {
        push_fwd p = {.out = out.addr + rows_at(out, b0, T, s->oc),
                      .lse = lse.addr + stats_at(b0, T, NH),
                      .qkv = qkv.addr + rows_at(qkv, b0, T, s->ld),
                      .T = (uint32_t)T,
                      .NH = (uint32_t)NH,
                      .hs = (uint32_t)hs,
                      .G = (uint32_t)(NH / s->NKV),
                      .LD = (uint32_t)s->ld,
                      .KOFF = (uint32_t)s->oc,
                      .VOFF = (uint32_t)(s->oc + (size_t)s->NKV * hs),
                      .OC = (uint32_t)s->oc,
                      .scale = (float)(1.0 / sqrt(hs))};
        status = check_grid(op, gx, (uint32_t)NH, (uint32_t)nb);
        if (status == VKG_OK)
            status = vkg_cmd_dispatch(c, VKG_KERNEL_attention_fwd, spec, bf ? 7 : 6, &p, sizeof p,
                                      gx, (uint32_t)NH, (uint32_t)nb, "attention_fwd");
    }
    vkg_cmd_group_end(c);
    return status;
}

/* The backward pass of shape s (checked by the caller). */
static vkg_status att_bwd(const char *op, vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout,
                          vkg_tensor qkv, vkg_tensor out, vkg_tensor lse, const att_shape *s,
                          vkg_tensor delta)
{
    int B = s->B, T = s->T, NH = s->NH, NKV = s->NKV, hs = s->D;
    size_t BT = (size_t)B * T, stats = (size_t)B * NH * T, per_batch, b0, nb;
    VKG_TRY(vkg__op_need(op, "dqkv", dqkv, BT * s->ld));
    VKG_TRY(vkg__op_need(op, "dout", dout, BT * s->oc));
    VKG_TRY(vkg__op_need_any(op, "qkv", qkv, BT * s->ld));
    VKG_TRY(vkg__op_need_any(op, "out", out, BT * s->oc));
    VKG_TRY(vkg__op_need(op, "lse", lse, stats));
    VKG_TRY(vkg__op_need(op, "delta", delta, stats));
    VKG_TRY(plan_blocks(op, s, &per_batch));
    uint32_t qbf = qkv.dtype == VKG_BF16, obf = out.dtype == VKG_BF16;
    VKG_TRY(check_bf16_heads(op, qbf || obf, hs));
    att_plan pl;
    VKG_TRY(pick_plan(op, vkg_cmd_device(c), hs, &pl));
    uint32_t gd = vkg__ceil_div((size_t)T * NH, pl.delta_wg);
    uint32_t gq = vkg__ceil_div((size_t)T, pl.dq_wg), gk = vkg__ceil_div((size_t)T, pl.dkv_wg);
    /* fp32 tensors name no bf16 constants (their pipelines are those of before bf16) */
    uint32_t spec_d[4] = {pl.delta_wg, 1, 1, obf};
    uint32_t spec_q[7] = {pl.dq_wg, 1, 1, pl.form, (uint32_t)hs, pl.dq_bk, qbf};
    uint32_t spec_k[7] = {pl.dkv_wg, 1, 1, pl.form, (uint32_t)hs, pl.dkv_bq, qbf};
    float scale = (float)(1.0 / sqrt(hs));

    /* delta of every block (independent), then dq and dk, dv of every block: they write
     * disjoint parts of dqkv and read only what the first pass finished. */
    vkg_status status = VKG_OK;
    vkg_cmd_group_begin(c);
    for (size_t i = 0; status == VKG_OK && block_at(B, per_batch, i, &b0, &nb); i++) {
        push_delta p = {.delta = delta.addr + stats_at(b0, T, NH),
                        .dout = dout.addr + rows_at(dout, b0, T, s->oc),
                        .out = out.addr + rows_at(out, b0, T, s->oc),
                        .T = (uint32_t)T,
                        .C = (uint32_t)s->oc,
                        .NH = (uint32_t)NH,
                        .hs = (uint32_t)hs};
        status = check_grid(op, gd, (uint32_t)nb, 1);
        if (status == VKG_OK)
            status = vkg_cmd_dispatch(c, VKG_KERNEL_attention_bwd_delta, spec_d, obf ? 4 : 3, &p,
                                      sizeof p, gd, (uint32_t)nb, 1, "attention_bwd_delta");
    }
    vkg_cmd_group_end(c);
    VKG_TRY(status);
    vkg_cmd_group_begin(c);
    for (size_t i = 0; status == VKG_OK && block_at(B, per_batch, i, &b0, &nb); i++) {
        push_bwd p = {.dqkv = dqkv.addr + rows_at(dqkv, b0, T, s->ld),
                      .dout = dout.addr + rows_at(dout, b0, T, s->oc),
                      .qkv = qkv.addr + rows_at(qkv, b0, T, s->ld),
                      .lse = lse.addr + stats_at(b0, T, NH),
                      .delta = delta.addr + stats_at(b0, T, NH),
                      .T = (uint32_t)T,
                      .NH = (uint32_t)NH,
                      .hs = (uint32_t)hs,
                      .G = (uint32_t)(NH / NKV),
                      .LD = (uint32_t)s->ld,
                      .KOFF = (uint32_t)s->oc,
                      .VOFF = (uint32_t)(s->oc + (size_t)NKV * hs),
                      .OC = (uint32_t)s->oc,
                      .scale = scale};
        status = check_grid(op, gq > gk ? gq : gk, (uint32_t)NH, (uint32_t)nb);
        if (status == VKG_OK)
            status = vkg_cmd_dispatch(c, VKG_KERNEL_attention_bwd_dq, spec_q, qbf ? 7 : 6, &p,
                                      sizeof p, gq, (uint32_t)NH, (uint32_t)nb, "attention_bwd_dq");
        /* the key and value gradients: one workgroup row per key/value head, over its group */
        if (status == VKG_OK)
            status =
                vkg_cmd_dispatch(c, VKG_KERNEL_attention_bwd_dkv, spec_k, qbf ? 7 : 6, &p, sizeof p,
                                 gk, (uint32_t)NKV, (uint32_t)nb, "attention_bwd_dkv");
    }
    vkg_cmd_group_end(c);
    return status;
}

vkg_status vkg_op_attention_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor lse, vkg_tensor qkv, int B,
                                int T, int C, int NH)
{
    const char *op = "attention_fwd";
    VKG_TRY(check_shape(op, B, T, C, NH));
    att_shape s = make_shape(B, T, NH, NH, C / NH, 0);
    return att_fwd(op, c, out, lse, qkv, &s);
}

vkg_status vkg_op_attention_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout, vkg_tensor qkv,
                                vkg_tensor out, vkg_tensor lse, int B, int T, int C, int NH,
                                vkg_tensor delta)
{
    const char *op = "attention_bwd";
    VKG_TRY(check_shape(op, B, T, C, NH));
    att_shape s = make_shape(B, T, NH, NH, C / NH, 0);
    return att_bwd(op, c, dqkv, dout, qkv, out, lse, &s, delta);
}

vkg_status vkg_op_attention_gqa_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor lse, vkg_tensor qkv,
                                    int B, int T, int NH, int NKV, int D)
{
    const char *op = "attention_gqa_fwd";
    VKG_TRY(check_gqa(op, B, T, NH, NKV, D));
    att_shape s = make_shape(B, T, NH, NKV, D, 1);
    return att_fwd(op, c, out, lse, qkv, &s);
}

vkg_status vkg_op_attention_gqa_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout, vkg_tensor qkv,
                                    vkg_tensor out, vkg_tensor lse, int B, int T, int NH, int NKV,
                                    int D, vkg_tensor delta)
{
    const char *op = "attention_gqa_bwd";
    VKG_TRY(check_gqa(op, B, T, NH, NKV, D));
    att_shape s = make_shape(B, T, NH, NKV, D, 1);
    return att_bwd(op, c, dqkv, dout, qkv, out, lse, &s, delta);
}
