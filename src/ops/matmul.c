/* Matrix products in llm.c's layout (weights (OC, C), out = inp x W^T + b) built on a GEMM
 * kernel whose tile sizes are specialization constants taken from the device's tuning: on GPUs
 * the block-tiled shaders/matmul_tiled.comp (its tiles, vec4 loads and split-K planned in
 * src/ops/matmul_tiled.c), which reads both operands in their stored layouts,
 * so the forward pass is out (N, OC) = inp (N, C) x W^T directly (B k-contiguous), with the bias
 * added in the store; on CPU devices (lavapipe) the register-tiled shaders/matmul.comp as below.
 *   forward:  out^T (OC, N) = W (OC, C) x inp^T (C, N), inp^T staged in a scratch tensor,
 *             stored transposed into out (N, OC), bias added
 *   backward: dinp (N, C) += dout (N, OC) x W (OC, C)
 *             dW (OC, C)  += dout^T (OC, N) x inp (N, C)
 *             dbias (OC)  += column sums of dout (matmul_bwd_bias.comp, fixed order: serial per
 *                            column on CPU devices, in row chunks on GPUs, grad_reduce_chunks)
 * vkg_op_matmul_fwd_gelu is the forward pass with both kernels' GELU epilogue (vkg_gemm.act): the
 * bias-added product goes to out and gelu_tanh of it (shaders/gelu.glsl, gelu_fwd's bits) to act.
 * In every pass the second operand is read along its contiguous dimension by neighbouring lanes
 * and the first is read uniformly per workgroup; nothing uses atomics.
 * Where the tuning says so (CPU devices), an accumulating product whose B operand (K x N) is larger
 * than a core's cache is split along K into chunks added to the output in order by successive
 * dispatches (see ksplit_rows): every row block then reads a chunk of B while still cached.
 * On the tiled kernel, dW's product gets the caller's scratch (the forward pass's, idle in the
 * backward pass) for split-K: with too few workgroups to fill the GPU, chunks of K go to their
 * own slices of the scratch and a second kernel adds them to dW in chunk order (deterministic,
 * "+=" kept; src/ops/matmul_tiled.c).
 *
 * Index limit (src/ops/op_util.h). The forward pass and dinp, whose rows are the N = B*T rows of
 * inp / out / dout / dinp, are recorded over blocks of whole rows with advancing base addresses
 * (the forward transposes each block into its own part of the scratch); their outputs do not sum
 * over rows, so the results are the same. dweight and dbias sum over all N rows, so they are not
 * split: their kernels' wide variants (matmul.comp WIDE = 1, matmul_bwd_bias.comp WIDE = 1) form
 * each row's address with 64-bit arithmetic and index only within rows, adding in the same
 * order. vkg_op_gemm takes the wide variant whenever one of its tensors spans more than the
 * limit (the weight of a very large layer in the forward pass and dinp, for instance). A single
 * row longer than the limit is an error naming the op and the sizes. */
#include "ops/matmul_internal.h"
#include "ops/op_util.h"
#include "ops/ops.h"

VKG_PUSH_CHECK(push_gemm, matmul);

typedef struct push_transpose {
    uint64_t out, in;
    uint32_t rows, cols;
} push_transpose;
VKG_PUSH_CHECK(push_transpose, transpose);

typedef struct push_bias {
    uint64_t dbias, dout;
    uint32_t rows, cols;
} push_bias;
VKG_PUSH_CHECK(push_bias, matmul_bwd_bias);

static size_t span(size_t outer, size_t ld, size_t inner)
{
    return outer == 0 ? 0 : (outer - 1) * ld + inner;
}

/* Elements g reads or writes from the address of a, b and out. */
static size_t a_span(const vkg_gemm *g)
{
    return g->a_kcontig ? span(g->M, g->lda, g->K) : span(g->K, g->lda, g->M);
}

static size_t b_span(const vkg_gemm *g)
{
    return g->b_kcontig ? span(g->N, g->ldb, g->K) : span(g->K, g->ldb, g->N);
}

static size_t out_span(const vkg_gemm *g)
{
    return g->out_t ? span(g->N, g->ldo, g->M) : span(g->M, g->ldo, g->N);
}

#define KSPLIT_MIN_ROWS 64u

/* K rows per chunk for g under the device's tuning, or 0 to run g in one dispatch. Only
 * accumulating products that are not stored transposed are split (each chunk re-reads the output;
 * transposed stores make that costly), and only when B exceeds the tuning's chunk size. */
static uint32_t ksplit_rows(const vkg_device_tuning *tu, const vkg_gemm *g)
{
    size_t chunk = tu->matmul_ksplit_bytes;
    if (chunk == 0 || !g->accumulate || g->out_t)
        return 0;
    if ((size_t)g->K * g->N * 4 <= chunk)
        return 0;
    uint32_t kc = (uint32_t)(chunk / ((size_t)g->N * 4));
    kc = kc < KSPLIT_MIN_ROWS ? KSPLIT_MIN_ROWS : kc;
    return kc < g->K ? kc : 0;
}

/* Check sizes and that every operand holds what g reads. */
static vkg_status check_gemm(const char *op, const vkg_gemm *g)
{
    VKG_CHECK(g->M > 0 && g->N > 0 && g->K > 0, VKG_ERR_INVALID_ARG,
              "%s: sizes must be positive (M=%u N=%u K=%u)", op, g->M, g->N, g->K);
    VKG_TRY(vkg__op_need_any(op, "out", g->out, out_span(g)));
    VKG_CHECK(g->out.dtype == VKG_F32 || !g->accumulate, VKG_ERR_INVALID_ARG,
              "%s: a bf16 out is for products that overwrite their output", op);
    VKG_TRY(vkg__op_need_any(op, "a", g->a, a_span(g)));
    VKG_TRY(vkg__op_need_any(op, "b", g->b, b_span(g)));
    if (g->bias)
        VKG_TRY(vkg__op_need(op, "bias", *g->bias, g->out_t ? g->M : g->N));
    if (g->act) {
        VKG_CHECK(!g->accumulate, VKG_ERR_INVALID_ARG,
                  "%s: the GELU epilogue is for products that overwrite their output", op);
        VKG_TRY(vkg__op_need_any(op, "act", *g->act, out_span(g)));
    }
    return VKG_OK;
}

/* 1 when g must take the kernel's wide variant (a tensor spans more than the limit); then every
 * index is within a row: M and N, and K when A is k-contiguous, must fit. */
static vkg_status gemm_wide(const char *op, const vkg_gemm *g, size_t limit, int *wide)
{
    *wide = a_span(g) > limit || b_span(g) > limit || out_span(g) > limit;
    *wide = *wide || (g->act && out_span(g) > limit);
    if (!*wide)
        return VKG_OK;
    VKG_CHECK(g->a.dtype == VKG_F32 && g->b.dtype == VKG_F32 && g->out.dtype == VKG_F32 &&
                  (!g->act || g->act->dtype == VKG_F32),
              VKG_ERR_UNSUPPORTED,
              "%s: a bf16 operand or output of a product beyond the index limit (M=%u N=%u "
              "K=%u)",
              op, g->M, g->N, g->K);
    size_t row = g->M > g->N ? (size_t)g->M : (size_t)g->N;
    if (g->a_kcontig && g->K > row)
        row = g->K;
    VKG_CHECK(row <= limit, VKG_ERR_INVALID_ARG,
              "%s: a row of %zu elements (M=%u N=%u K=%u) is more than the %zu one shader dispatch "
              "may index",
              op, row, g->M, g->N, g->K, limit);
    return VKG_OK;
}

/* Whether g runs on the tiled kernel: the tuning says so, no register tile was asked for, and g
 * is neither stored transposed nor in need of 64-bit row addresses (those run on the register
 * kernel, which in turn cannot read B k-contiguous). */
static vkg_status pick_kernel(const char *op, const vkg_gemm *g, const vkg_device_tuning *tu,
                              int wide, int *tiled)
{
    *tiled = tu->matmul_tiled && g->tiles.tm == 0 && g->tiles.tn == 0 && g->tiles.lx == 0 &&
             !g->out_t && !wide;
    VKG_CHECK(*tiled || !g->b_kcontig, VKG_ERR_UNSUPPORTED,
              "%s: the register matmul kernel reads B only n-contiguous (M=%u N=%u K=%u)", op, g->M,
              g->N, g->K);
    return VKG_OK;
}

/* Record one dispatch of the register kernel for a checked product (wide: the variant with
 * 64-bit row addresses). */
static vkg_status gemm_dispatch(vkg_cmd *c, const vkg_gemm *g, const char *op, int wide)
{
    vkg_device_t *dev = vkg_cmd_device(c);
    vkg_matmul_tiles t = g->tiles;
    if (t.tm == 0 || t.tn == 0 || t.lx == 0) {
        vkg_device_tuning tu = vkg_device_tuning_get(dev);
        t = (vkg_matmul_tiles){tu.matmul_tm, tu.matmul_tn, tu.matmul_lx};
    }
    push_gemm p = vkg__gemm_push(g, 0, 0);
    /* One load of A per k shared by subgroup broadcasts when the workgroup is one subgroup
     * holding as many lanes as rows. */
    const vkg_device_info *info = vkg_device_get_info(dev);
    uint32_t shuffle = t.tm == t.lx && t.lx == info->subgroup_size;
    uint32_t abf = g->a.dtype == VKG_BF16, bbf = g->b.dtype == VKG_BF16;
    /* STORE_BF16: bit 0 act, bit 1 out */
    uint32_t store = (g->act && g->act->dtype == VKG_BF16) | (g->out.dtype == VKG_BF16) << 1;
    uint32_t spec[14] = {t.lx,
                         1,
                         1,
                         t.tm,
                         t.tn,
                         g->a_kcontig ? 1u : 0u,
                         g->out_t ? 1u : 0u,
                         g->accumulate ? 1u : 0u,
                         shuffle,
                         wide ? 1u : 0u,
                         g->act ? 1u : 0u,
                         abf,
                         bbf,
                         store};
    /* fp32 products name no bf16 constants (their pipelines are those of before bf16). */
    int nspec = store ? 14 : abf || bbf ? 13 : g->act ? 11 : wide ? 10 : 9;
    uint32_t gx = vkg__ceil_div(g->N, (size_t)t.lx * t.tn), gy = vkg__ceil_div(g->M, t.tm);
    return vkg_cmd_dispatch(c, VKG_KERNEL_matmul, spec, nspec, &p, sizeof p, gx, gy, 1, op);
}

vkg_status vkg_op_gemm(vkg_cmd *c, const vkg_gemm *g)
{
    const char *op = g->label ? g->label : "gemm";
    VKG_TRY(check_gemm(op, g));
    size_t limit;
    int wide;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(gemm_wide(op, g, limit, &wide));
    vkg_device_tuning tu = vkg_device_tuning_get(vkg_cmd_device(c));
    if (vkg__coopmat_takes(&tu, g, wide))
        return vkg__matmul_coopmat_dispatch(c, g, op, &tu);
    int tiled;
    VKG_TRY(pick_kernel(op, g, &tu, wide, &tiled));
    uint32_t kc = ksplit_rows(&tu, g);
    if (kc == 0)
        return tiled ? vkg__matmul_tiled_dispatch(c, g, op, &tu, limit)
                     : gemm_dispatch(c, g, op, wide);
    for (uint32_t k0 = 0; k0 < g->K; k0 += kc) {
        /* Chunk [k0, k0 + kc): A and B start k0 columns (rows of A^T) and k0 rows later. */
        size_t aoff =
            vkg_dtype_bytes(g->a.dtype) * (g->a_kcontig ? (size_t)k0 : (size_t)k0 * g->lda);
        size_t boff =
            vkg_dtype_bytes(g->b.dtype) * (g->b_kcontig ? (size_t)k0 : (size_t)k0 * g->ldb);
        vkg_gemm h = *g;
        h.K = g->K - k0 < kc ? g->K - k0 : kc;
        h.a = vkg_tensor_view(g->a, aoff, g->a.bytes - aoff);
        h.b = vkg_tensor_view(g->b, boff, g->b.bytes - boff);
        if (k0 > 0)
            vkg_cmd_barrier(c); /* the chunks add to the same output, in order */
        VKG_TRY(tiled ? vkg__matmul_tiled_dispatch(c, &h, op, &tu, limit)
                      : gemm_dispatch(c, &h, op, wide));
    }
    return VKG_OK;
}

/* Positive sizes, and the index limit in *limit. */
static vkg_status check_shape(const char *op, int N, int C, int OC, size_t *limit)
{
    VKG_CHECK(N > 0 && C > 0 && OC > 0, VKG_ERR_INVALID_ARG,
              "%s: N, C and OC must be positive (got %d, %d, %d)", op, N, C, OC);
    return vkg__op_limit(op, limit);
}

/* Rows per block of the row-wise passes (forward, dinp), whose tensors have rows of C and OC
 * floats: N when all N rows fit the limit, else as many as fit. */
static vkg_status row_block(const char *op, int N, int C, int OC, size_t limit, size_t *rows)
{
    size_t w = (size_t)(C > OC ? C : OC);
    *rows = (size_t)N;
    if ((size_t)N * w <= limit)
        return VKG_OK;
    VKG_CHECK(w <= limit, VKG_ERR_INVALID_ARG,
              "%s: one row of C=%d or OC=%d elements is more than the %zu one shader dispatch may "
              "index",
              op, C, OC, limit);
    *rows = limit / w;
    return VKG_OK;
}

/* Rows [r0, r0 + n) of a tensor with rows of w elements. */
static vkg_tensor rows_view(vkg_tensor t, size_t r0, size_t n, size_t w)
{
    size_t e = vkg_dtype_bytes(t.dtype);
    return vkg_tensor_view(t, e * r0 * w, e * n * w);
}

vkg_status vkg_op_transpose(vkg_cmd *c, vkg_tensor out, vkg_tensor in, int rows, int cols)
{
    const char *op = "transpose";
    VKG_CHECK(rows > 0 && cols > 0, VKG_ERR_INVALID_ARG,
              "%s: rows and cols must be positive (got %d, %d)", op, rows, cols);
    size_t n = (size_t)rows * (size_t)cols, limit;
    VKG_TRY(vkg__op_need(op, "out", out, n));
    VKG_TRY(vkg__op_need_any(op, "in", in, n));
    VKG_TRY(vkg__op_limit(op, &limit));
    /* Above the limit, the wide variant forms the address of each row of in and of out with
     * 64-bit arithmetic and indexes within rows. */
    int wide = n > limit;
    VKG_CHECK(!wide || in.dtype == VKG_F32, VKG_ERR_UNSUPPORTED,
              "%s: a bf16 input beyond the index limit (rows=%d cols=%d)", op, rows, cols);
    if (wide)
        VKG_CHECK((size_t)rows <= limit && (size_t)cols <= limit, VKG_ERR_INVALID_ARG,
                  "%s: a row of rows=%d or cols=%d elements is more than the %zu one shader "
                  "dispatch may index",
                  op, rows, cols, limit);
    push_transpose p = {
        .out = out.addr, .in = in.addr, .rows = (uint32_t)rows, .cols = (uint32_t)cols};
    uint32_t spec[5] = {64, 4, 1, wide ? 1u : 0u, in.dtype == VKG_BF16};
    int nspec = in.dtype == VKG_BF16 ? 5 : wide ? 4 : 3;
    return vkg_cmd_dispatch(c, VKG_KERNEL_transpose, spec, nspec, &p, sizeof p,
                            vkg__ceil_div((size_t)rows, 64), vkg__ceil_div((size_t)cols, 4), 1,
                            "transpose");
}

/* The forward pass, with the GELU epilogue into act when act is not NULL. */
static vkg_status matmul_fwd(vkg_cmd *c, vkg_tensor out, const vkg_tensor *act, vkg_tensor inp,
                             vkg_tensor weight, const vkg_tensor *bias, int N, int C, int OC,
                             vkg_tensor scratch)
{
    const char *op = act ? "matmul_fwd_gelu" : "matmul_fwd";
    size_t limit, nb;
    VKG_TRY(check_shape(op, N, C, OC, &limit));
    VKG_TRY(vkg__op_need(op, "scratch", scratch, (size_t)N * (size_t)C));
    VKG_TRY(row_block(op, N, C, OC, limit, &nb));
    /* bf16 outputs: blocks of an even number of rows start on whole words whatever OC is */
    if ((out.dtype == VKG_BF16 || (act && act->dtype == VKG_BF16)) && nb > 1)
        nb &= ~(size_t)1;
    int split = nb < (size_t)N;
    /* The tensors by the names the caller knows, whichever kernel (and operand order) runs. */
    VKG_TRY(vkg__op_need_any(op, "weight", weight, (size_t)OC * (size_t)C));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, (size_t)N * (size_t)C));
    VKG_TRY(vkg__op_need_any(op, "out", out, (size_t)N * (size_t)OC));
    if (act)
        VKG_TRY(vkg__op_need_any(op, "act", *act, (size_t)N * (size_t)OC));
    /* The tiled kernel reads the whole weight in one dispatch: only while it fits the limit. */
    vkg_device_tuning tu = vkg_device_tuning_get(vkg_cmd_device(c));
    int tiled = (tu.matmul_tiled || vkg__coopmat_takes_fwd(&tu, inp.dtype, weight.dtype)) &&
                (size_t)OC * (size_t)C <= limit;
    /* Each block of rows: multiplied in place by the tiled kernel; for the register kernel,
     * transposed into its own part of the scratch first. */
    for (size_t n0 = 0; n0 < (size_t)N; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb;
        vkg_tensor s = split ? rows_view(scratch, n0, m, (size_t)C) : scratch;
        vkg_tensor o = split ? rows_view(out, n0, m, (size_t)OC) : out;
        vkg_tensor in = split ? rows_view(inp, n0, m, (size_t)C) : inp;
        vkg_tensor ac = act && split ? rows_view(*act, n0, m, (size_t)OC) : out;
        vkg_gemm g = {.out = o,
                      .bias = bias,
                      .act = act ? (split ? &ac : act) : NULL,
                      .K = (uint32_t)C,
                      .lda = (uint32_t)C,
                      .ldo = (uint32_t)OC,
                      .a_kcontig = 1,
                      .label = op};
        if (tiled) { /* out (m, OC) = inp (m, C) x W^T: W read k-contiguous */
            g.a = in, g.b = weight, g.M = (uint32_t)m, g.N = (uint32_t)OC, g.ldb = (uint32_t)C;
            g.b_kcontig = 1;
        } else { /* out^T (OC, m) = W (OC, C) x inp^T (C, m), stored transposed */
            VKG_TRY(vkg_op_transpose(c, s, in, (int)m, C));
            g.a = weight, g.b = s, g.M = (uint32_t)OC, g.N = (uint32_t)m, g.ldb = (uint32_t)m;
            g.out_t = 1;
        }
        VKG_TRY(vkg_op_gemm(c, &g));
    }
    return VKG_OK;
}

vkg_status vkg_op_matmul_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor weight,
                             const vkg_tensor *bias, int N, int C, int OC, vkg_tensor scratch)
{
    return matmul_fwd(c, out, NULL, inp, weight, bias, N, C, OC, scratch);
}

vkg_status vkg_op_matmul_fwd_gelu(vkg_cmd *c, vkg_tensor out, vkg_tensor act, vkg_tensor inp,
                                  vkg_tensor weight, const vkg_tensor *bias, int N, int C, int OC,
                                  vkg_tensor scratch)
{
    return matmul_fwd(c, out, &act, inp, weight, bias, N, C, OC, scratch);
}

/* dinp (N,C) += dout (N,OC) x weight (OC,C), over blocks of whole rows when N rows exceed the
 * limit. */
static vkg_status record_dinp(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dout, vkg_tensor weight,
                              int N, int C, int OC, size_t limit)
{
    const char *op = "matmul_bwd_dinp";
    size_t nb;
    VKG_TRY(row_block(op, N, C, OC, limit, &nb));
    int split = nb < (size_t)N;
    if (split) {
        VKG_TRY(vkg__op_need(op, "out", dinp, (size_t)N * (size_t)C));
        VKG_TRY(vkg__op_need(op, "a", dout, (size_t)N * (size_t)OC));
    }
    for (size_t n0 = 0; n0 < (size_t)N; n0 += nb) {
        size_t m = (size_t)N - n0 < nb ? (size_t)N - n0 : nb;
        vkg_gemm g = {.out = split ? rows_view(dinp, n0, m, (size_t)C) : dinp,
                      .a = split ? rows_view(dout, n0, m, (size_t)OC) : dout,
                      .b = weight,
                      .M = (uint32_t)m,
                      .N = (uint32_t)C,
                      .K = (uint32_t)OC,
                      .lda = (uint32_t)OC,
                      .ldb = (uint32_t)C,
                      .ldo = (uint32_t)C,
                      .a_kcontig = 1,
                      .accumulate = 1,
                      .label = op};
        VKG_TRY(vkg_op_gemm(c, &g));
    }
    return VKG_OK;
}

/* dweight (and dbias when given), recorded into the caller's group (or alone). Both sum over the
 * N rows: above the limit their kernels take the wide variant rather than a split. */
static vkg_status record_dweight(vkg_cmd *c, vkg_tensor dweight, const vkg_tensor *dbias,
                                 vkg_tensor dout, vkg_tensor inp, int N, int C, int OC,
                                 size_t limit, const vkg_tensor *scratch)
{
    vkg_gemm gw = {.out = dweight,
                   .a = dout,
                   .b = inp,
                   .M = (uint32_t)OC,
                   .N = (uint32_t)C,
                   .K = (uint32_t)N,
                   .lda = (uint32_t)OC,
                   .ldb = (uint32_t)C,
                   .ldo = (uint32_t)C,
                   .a_kcontig = 0,
                   .accumulate = 1,
                   .splitk_scratch = scratch,
                   .label = "matmul_bwd_dweight"};
    if (dbias)
        VKG_TRY(vkg__op_need("matmul_bwd", "dbias", *dbias, (size_t)OC));
    VKG_TRY(vkg_op_gemm(c, &gw));
    if (!dbias)
        return VKG_OK;
    /* dout's rows hold OC floats: the product above checked that OC fits (its M). */
    int wide = (size_t)N * (size_t)OC > limit;
    push_bias p = {
        .dbias = dbias->addr, .dout = dout.addr, .rows = (uint32_t)N, .cols = (uint32_t)OC};
    uint32_t chunks = vkg_device_tuning_get(vkg_cmd_device(c)).grad_reduce_chunks;
    if (chunks == 0) { /* one invocation per column */
        uint32_t spec[4] = {64, 1, 1, 1};
        return vkg_cmd_dispatch(c, VKG_KERNEL_matmul_bwd_bias, spec, wide ? 4 : 3, &p, sizeof p,
                                vkg__ceil_div((size_t)OC, 64), 1, 1, "matmul_bwd_dbias");
    }
    uint32_t spec[5] = {VKG_GRAD_REDUCE_CX, chunks, 1, wide ? 1u : 0u, 1u};
    return vkg_cmd_dispatch(c, VKG_KERNEL_matmul_bwd_bias, spec, 5, &p, sizeof p,
                            vkg__ceil_div((size_t)OC, VKG_GRAD_REDUCE_CX), 1, 1,
                            "matmul_bwd_dbias");
}

vkg_status vkg_op_matmul_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dweight,
                             const vkg_tensor *dbias, vkg_tensor dout, vkg_tensor inp,
                             vkg_tensor weight, int N, int C, int OC, const vkg_tensor *scratch)
{
    size_t limit;
    VKG_TRY(check_shape("matmul_bwd", N, C, OC, &limit));
    /* The three gradients read the same inputs and write different tensors: independent. */
    vkg_cmd_group_begin(c);
    vkg_status st = record_dinp(c, dinp, dout, weight, N, C, OC, limit);
    if (st == VKG_OK)
        st = record_dweight(c, dweight, dbias, dout, inp, N, C, OC, limit, scratch);
    vkg_cmd_group_end(c);
    return st;
}

vkg_status vkg_op_matmul_bwd_dinp(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dout, vkg_tensor weight,
                                  int N, int C, int OC)
{
    size_t limit;
    VKG_TRY(check_shape("matmul_bwd", N, C, OC, &limit));
    return record_dinp(c, dinp, dout, weight, N, C, OC, limit);
}

vkg_status vkg_op_matmul_bwd_dweight(vkg_cmd *c, vkg_tensor dweight, const vkg_tensor *dbias,
                                     vkg_tensor dout, vkg_tensor inp, int N, int C, int OC,
                                     const vkg_tensor *scratch)
{
    size_t limit;
    VKG_TRY(check_shape("matmul_bwd", N, C, OC, &limit));
    vkg_cmd_group_begin(c);
    vkg_status st = record_dweight(c, dweight, dbias, dout, inp, N, C, OC, limit, scratch);
    vkg_cmd_group_end(c);
    return st;
}
