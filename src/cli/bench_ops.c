/* `vkgpt bench ops`: times each op's dispatches with timestamp queries, per op and shape,
 * including GPT-2 124M's shapes at B=4, T=64, and prints ms, GFLOP/s and GB/s; matmul rows also
 * show OpenBLAS sgemm on the same shape and cores, measured in the same run, as a ratio (the
 * backward as its two accumulating products, dinp and dweight; the bias sum is not counted).
 * The rows are the op table's (src/ops/op_table.def): its VKG_BENCH rows, each recorded by the
 * function RECORD_<op> names below, and its flat ops, recorded on random tensors. Every tensor of a
 * row gets an arena of its own. Under each row, the driver's statistics of the pipelines it used
 * (bench_stats.c), where the driver gives them; after the table, the fused forms beside their
 * pairs (bench_fused.c). Inputs are random; results are not checked here (the tests do that). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/proc.h"
#include "cli/bench_blas.h"
#include "cli/bench_ops.h"
#include "cli/cli.h"
#include "cli/flags.h"

typedef vkg_bench bench;

typedef struct op_shape op_shape;
/* Records a row's op into b->cmd on random inputs; *flops estimates the arithmetic of one run,
 * *bytes its minimum memory traffic. */
typedef vkg_status (*record_fn)(bench *b, const op_shape *s, double *flops, double *bytes);

/* One row: the op, what the shape is, the shape (matmul: rows, in, out; others: rows (B*T),
 * channels, extra (V, NH, T)), and how it is recorded: a bench_<op> function (VKG_BENCH rows)
 * or a flat op called on random tensors of N*C elements (VKG_FLAT2 / VKG_FLAT3 rows). */
struct op_shape {
    const char *op, *tag;
    int N, C, OC;
    record_fn record;
    int variant; /* passed to record: 1 for the backward pass of a forward/backward pair */
    vkg_status (*flat2)(vkg_cmd *, vkg_tensor, vkg_tensor, size_t);
    vkg_status (*flat3)(vkg_cmd *, vkg_tensor, vkg_tensor, vkg_tensor, size_t);
    double flops; /* per element, flat ops */
};

static float next_uniform(bench *b)
{
    b->rng = b->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((b->rng >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
}

/* A tensor of n elements of type dt in an arena of its own, uniform in [-0.05, 0.05) (bf16: the
 * upper halves of those floats), or of n int32 token ids below `tokens`. */
static vkg_status random_tensor_ex(bench *b, size_t n, int tokens, vkg_dtype dt, vkg_tensor *out)
{
    VKG_CHECK(b->narenas < VKG_BENCH_TENSORS, VKG_ERR_INVALID_ARG,
              "bench ops: a row may allocate at most %d tensors", VKG_BENCH_TENSORS);
    size_t bytes = ((n ? n : 1) * sizeof(float) + 255) / 256 * 256;
    vkg_arena **arena = &b->arenas[b->narenas];
    VKG_TRY(vkg_arena_create(b->dev, bytes, "bench", arena));
    b->narenas++;
    VKG_TRY(vkg_arena_alloc(*arena, bytes, out));
    out->dtype = dt;
    float *host = malloc((n ? n : 1) * sizeof *host);
    VKG_CHECK(host, VKG_ERR_NOMEM, "no memory for %zu floats", n);
    uint16_t *half = (uint16_t *)host; /* bf16: packed in place, element i at half[i] */
    for (size_t i = 0; i < n; i++) {
        float u = next_uniform(b);
        if (tokens) {
            int32_t t = (int32_t)((u + 0.5f) * (float)tokens) % tokens;
            memcpy(&host[i], &t, sizeof t);
        } else if (dt == VKG_BF16) {
            float x = u * 0.1f;
            uint32_t bits;
            memcpy(&bits, &x, sizeof bits);
            half[i] = (uint16_t)(bits >> 16);
        } else {
            host[i] = u * 0.1f;
        }
    }
    vkg_status st = vkg_tensor_write(b->dev, *out, 0, host, n * vkg_dtype_bytes(dt));
    free(host);
    return st;
}

vkg_status vkg_bench_tensor(vkg_bench *b, size_t n, vkg_dtype dt, vkg_tensor *out)
{
    return random_tensor_ex(b, n, 0, dt, out);
}

static vkg_status random_tensor(bench *b, size_t n, vkg_tensor *out)
{
    return random_tensor_ex(b, n, 0, VKG_F32, out);
}

/* Submit what is recorded and start recording again (the inputs a backward pass needs). */
static vkg_status run_and_restart(bench *b)
{
    VKG_TRY(vkg_cmd_end(b->cmd));
    VKG_TRY(vkg_cmd_run(b->cmd, 0));
    return vkg_cmd_begin(b->cmd);
}

static vkg_status bench_matmul_fwd(bench *b, const op_shape *s, double *flops, double *bytes)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, OC = (size_t)s->OC;
    vkg_tensor inp, w, bias, out, scratch;
    VKG_TRY(random_tensor(b, N * C, &inp));
    VKG_TRY(random_tensor(b, OC * C, &w));
    VKG_TRY(random_tensor(b, OC, &bias));
    VKG_TRY(random_tensor(b, N * OC, &out));
    VKG_TRY(random_tensor(b, N * C, &scratch));
    *flops = 2.0 * (double)N * (double)C * (double)OC;
    *bytes = 4.0 * (double)(N * C + OC * C + N * OC);
    return vkg_op_matmul_fwd(b->cmd, out, inp, w, &bias, s->N, s->C, s->OC, scratch);
}

static vkg_status bench_matmul_bwd(bench *b, const op_shape *s, double *flops, double *bytes)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, OC = (size_t)s->OC;
    vkg_tensor inp, w, dinp, dw, dbias, dout, scratch;
    VKG_TRY(random_tensor(b, N * C, &inp));
    VKG_TRY(random_tensor(b, N * (C > OC ? C : OC), &scratch)); /* as the model's: split-K */
    VKG_TRY(random_tensor(b, OC * C, &w));
    VKG_TRY(random_tensor(b, N * C, &dinp));
    VKG_TRY(random_tensor(b, OC * C, &dw));
    VKG_TRY(random_tensor(b, OC, &dbias));
    VKG_TRY(random_tensor(b, N * OC, &dout));
    *flops = 4.0 * (double)N * (double)C * (double)OC;
    *bytes = 4.0 * (double)(2 * N * C + 2 * OC * C + N * OC);
    return vkg_op_matmul_bwd(b->cmd, dinp, dw, &dbias, dout, inp, w, s->N, s->C, s->OC, &scratch);
}

/* Encoder rows: B = 4, T = N / 4, a table of OC rows; backward when dwte is wanted. */
static vkg_status encoder_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int backward = s->variant;
    size_t N = (size_t)s->N, C = (size_t)s->C, n = N * C;
    vkg_tensor inp, wte, wpe, out;
    VKG_TRY(random_tensor_ex(b, N, 50257, VKG_F32, &inp)); /* token ids */
    VKG_TRY(random_tensor(b, (size_t)s->OC * C, &wte));
    VKG_TRY(random_tensor(b, 64 * C, &wpe));
    VKG_TRY(random_tensor(b, n, &out));
    *bytes = 4.0 * (double)(3 * n);
    *flops = (double)n;
    if (!backward)
        return vkg_op_encoder_fwd(b->cmd, out, inp, wte, wpe, 4, (int)N / 4, (int)C);
    return vkg_op_encoder_bwd(b->cmd, wte, wpe, out, inp, 4, (int)N / 4, (int)C);
}

/* Layernorm rows: the forward, and for the backward its inputs computed first. */
static vkg_status layernorm_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int backward = s->variant;
    size_t N = (size_t)s->N, C = (size_t)s->C, n = N * C;
    vkg_tensor x, y, mean, rstd, w, bias, dx, dw, db;
    VKG_TRY(random_tensor(b, n, &x));
    VKG_TRY(random_tensor(b, n, &y));
    VKG_TRY(random_tensor(b, N, &mean));
    VKG_TRY(random_tensor(b, N, &rstd));
    VKG_TRY(random_tensor(b, C, &w));
    VKG_TRY(random_tensor(b, C, &bias));
    *flops = 8.0 * (double)n;
    *bytes = 4.0 * (double)(2 * n);
    VKG_TRY(vkg_op_layernorm_fwd(b->cmd, y, mean, rstd, x, w, bias, (int)N, (int)C));
    if (!backward)
        return VKG_OK;
    VKG_TRY(random_tensor(b, n, &dx));
    VKG_TRY(random_tensor(b, C, &dw));
    VKG_TRY(random_tensor(b, C, &db));
    VKG_TRY(run_and_restart(b));
    *bytes = 4.0 * (double)(4 * n);
    return vkg_op_layernorm_bwd(b->cmd, dx, dw, db, y, x, w, mean, rstd, (int)N, (int)C);
}

/* RMSNorm rows (eps 1e-5): the forward, and for the backward its inputs computed first. */
static vkg_status rmsnorm_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int backward = s->variant;
    size_t N = (size_t)s->N, C = (size_t)s->C, n = N * C;
    vkg_tensor x, y, rstd, w, dx, dw;
    VKG_TRY(random_tensor(b, n, &x));
    VKG_TRY(random_tensor(b, n, &y));
    VKG_TRY(random_tensor(b, N, &rstd));
    VKG_TRY(random_tensor(b, C, &w));
    *flops = 4.0 * (double)n;
    *bytes = 4.0 * (double)(2 * n);
    VKG_TRY(vkg_op_rmsnorm_fwd(b->cmd, y, rstd, x, w, (int)N, (int)C, 1e-5f));
    if (!backward)
        return VKG_OK;
    VKG_TRY(random_tensor(b, n, &dx));
    VKG_TRY(random_tensor(b, C, &dw));
    VKG_TRY(run_and_restart(b));
    *flops = 8.0 * (double)n;
    *bytes = 4.0 * (double)(4 * n);
    return vkg_op_rmsnorm_bwd(b->cmd, dx, dw, y, x, w, rstd, (int)N, (int)C);
}

/* SwiGLU rows: h (N,2F) and out (N,F), F = C; the backward accumulates into dh. */
static vkg_status swiglu_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int backward = s->variant;
    size_t N = (size_t)s->N, F = (size_t)s->C, n = N * F;
    vkg_tensor h, out;
    VKG_TRY(random_tensor(b, 2 * n, &h));
    VKG_TRY(random_tensor(b, n, &out));
    *flops = 6.0 * (double)n;
    *bytes = 4.0 * (double)(3 * n);
    if (!backward)
        return vkg_op_swiglu_fwd(b->cmd, out, h, (int)N, (int)F);
    vkg_tensor dh;
    VKG_TRY(random_tensor(b, 2 * n, &dh));
    *flops = 12.0 * (double)n;
    *bytes = 4.0 * (double)(7 * n);
    return vkg_op_swiglu_bwd(b->cmd, dh, h, out, (int)N, (int)F);
}

/* RoPE rows: B = 4, T = N / 4, D = 64, NH = C / D query heads, NKV = OC key/value heads, in
 * place on qkv (the backward on a gradient of the same shape); inv_freq Llama's theta = 10000. */
static vkg_status rope_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int D = 64, NH = s->C / D, NKV = s->OC, T = s->N / 4;
    size_t rows = (size_t)s->N, W = (size_t)(NH + 2 * NKV) * D;
    size_t rotated = rows * (size_t)(NH + NKV) * D;
    vkg_tensor qkv, inv_freq;
    VKG_TRY(random_tensor(b, rows * W, &qkv));
    VKG_TRY(random_tensor(b, (size_t)D / 2, &inv_freq));
    float f[32];
    for (int i = 0; i < D / 2; i++)
        f[i] = (float)pow(10000.0, -2.0 * i / D);
    VKG_TRY(vkg_tensor_write(b->dev, inv_freq, 0, f, sizeof f));
    *flops = 3.0 * (double)rotated; /* 2 multiplies and an add per element, angles not counted */
    *bytes = 4.0 * (double)(2 * rotated);
    if (s->variant)
        return vkg_op_rope_bwd(b->cmd, qkv, inv_freq, 4, T, NH, NKV, D);
    return vkg_op_rope_fwd(b->cmd, qkv, inv_freq, 4, T, NH, NKV, D);
}

/* QK-norm rows: the RoPE rows' shape (D = 64), eps 1e-6; for the backward, rstd from a forward
 * pass first. */
static vkg_status qknorm_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int D = 64, NH = s->C / D, NKV = s->OC, T = s->N / 4;
    size_t rows = (size_t)s->N, W = (size_t)(NH + 2 * NKV) * D;
    size_t normed = rows * (size_t)(NH + NKV) * D;
    vkg_tensor qkv, out, rstd, qw, kw;
    VKG_TRY(random_tensor(b, rows * W, &qkv));
    VKG_TRY(random_tensor(b, rows * W, &out));
    VKG_TRY(random_tensor(b, rows * (size_t)(NH + NKV), &rstd));
    VKG_TRY(random_tensor(b, (size_t)D, &qw));
    VKG_TRY(random_tensor(b, (size_t)D, &kw));
    *flops = 4.0 * (double)normed;
    *bytes = 4.0 * (double)(2 * rows * W);
    VKG_TRY(vkg_op_qknorm_fwd(b->cmd, out, rstd, qkv, qw, kw, 4, T, NH, NKV, D, 1e-6f));
    if (!s->variant)
        return VKG_OK;
    vkg_tensor dqkv, dqw, dkw;
    VKG_TRY(random_tensor(b, rows * W, &dqkv));
    VKG_TRY(random_tensor(b, (size_t)D, &dqw));
    VKG_TRY(random_tensor(b, (size_t)D, &dkw));
    VKG_TRY(run_and_restart(b));
    *flops = 8.0 * (double)normed;
    *bytes = 4.0 * (double)(4 * rows * W);
    return vkg_op_qknorm_bwd(b->cmd, dqkv, dqw, dkw, out, qkv, qw, kw, rstd, 4, T, NH, NKV, D);
}

/* Attention rows: B = 4, T = N / 4, NH = OC; for the backward, out and lse from a forward pass
 * first. Flops count the products a model needs (causal: half of each): q k^T and att v forward,
 * twice that backward; the flash backward's recomputation of the scores is not counted. */
static vkg_status attention_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int backward = s->variant;
    size_t N = (size_t)s->N, C = (size_t)s->C, n = N * C;
    int NH = s->OC, Bq = 4, T = (int)N / 4;
    size_t stats = (size_t)Bq * NH * T;
    vkg_tensor qkv, out, lse, dqkv, dout, delta;
    VKG_TRY(random_tensor(b, 3 * n, &qkv));
    VKG_TRY(random_tensor(b, n, &out));
    VKG_TRY(random_tensor(b, stats, &lse));
    *flops = 4.0 * (double)Bq * T * T * (double)C / 2.0; /* causal: half of QK^T and AV */
    *bytes = 4.0 * (double)(4 * n + stats);
    VKG_TRY(vkg_op_attention_fwd(b->cmd, out, lse, qkv, Bq, T, (int)C, NH));
    if (!backward)
        return VKG_OK;
    VKG_TRY(random_tensor(b, 3 * n, &dqkv));
    VKG_TRY(random_tensor(b, n, &dout));
    VKG_TRY(random_tensor(b, stats, &delta));
    VKG_TRY(run_and_restart(b));
    *flops *= 2.0;
    *bytes = 4.0 * (double)(9 * n + 2 * stats);
    return vkg_op_attention_bwd(b->cmd, dqkv, dout, qkv, out, lse, Bq, T, (int)C, NH, delta);
}

/* Grouped-query attention rows: B = 4, T = N / 4, D = 64, NH = C / D, NKV = OC; flops as
 * attention_case (the products a model needs), bytes: qkv of (NH + 2 NKV) D per row. */
static vkg_status attention_gqa_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int backward = s->variant, D = 64, NH = s->C / D, NKV = s->OC, Bq = 4, T = s->N / 4;
    size_t rows = (size_t)s->N, n = rows * (size_t)s->C, nq = rows * (size_t)(NH + 2 * NKV) * D;
    size_t stats = (size_t)Bq * NH * T;
    vkg_tensor qkv, out, lse, dqkv, dout, delta;
    VKG_TRY(random_tensor(b, nq, &qkv));
    VKG_TRY(random_tensor(b, n, &out));
    VKG_TRY(random_tensor(b, stats, &lse));
    *flops = 4.0 * (double)Bq * T * T * (double)s->C / 2.0;
    *bytes = 4.0 * (double)(nq + n + stats);
    VKG_TRY(vkg_op_attention_gqa_fwd(b->cmd, out, lse, qkv, Bq, T, NH, NKV, D));
    if (!backward)
        return VKG_OK;
    VKG_TRY(random_tensor(b, nq, &dqkv));
    VKG_TRY(random_tensor(b, n, &dout));
    VKG_TRY(random_tensor(b, stats, &delta));
    VKG_TRY(run_and_restart(b));
    *flops *= 2.0;
    *bytes = 4.0 * (double)(3 * nq + 3 * n + 2 * stats);
    return vkg_op_attention_gqa_bwd(b->cmd, dqkv, dout, qkv, out, lse, Bq, T, NH, NKV, D, delta);
}

/* Cross-entropy rows: N rows, V = C, Vp = OC, dlogits in place. */
static vkg_status bench_xent_fwd_bwd(bench *b, const op_shape *s, double *flops, double *bytes)
{
    size_t N = (size_t)s->N, Vp = (size_t)s->OC;
    vkg_tensor logits, targets, losses;
    VKG_TRY(random_tensor(b, N * Vp, &logits));
    VKG_TRY(random_tensor_ex(b, N, s->C, VKG_F32, &targets));
    VKG_TRY(random_tensor(b, N, &losses));
    *flops = 4.0 * (double)(N * Vp);
    *bytes = 4.0 * (double)(2 * N * Vp);
    return vkg_op_xent_fwd_bwd(b->cmd, losses, &logits, logits, targets, (int)N, s->C, (int)Vp,
                               1.0f / (float)N);
}

/* The gradient norm and the optimizer over N parameters: sumsq alone, or AdamW. */
static vkg_status update_case(bench *b, const op_shape *s, double *flops, double *bytes)
{
    int adamw = s->variant;
    size_t n = (size_t)s->N * (size_t)s->C;
    size_t scratch_elems = vkg_op_sumsq_scratch_elems(&n, 1);
    vkg_tensor x, scratch, step, grad, m, v;
    VKG_TRY(random_tensor(b, n, &x));
    VKG_TRY(random_tensor(b, scratch_elems, &scratch));
    VKG_TRY(random_tensor(b, 4, &step));
    *flops = 2.0 * (double)n;
    *bytes = 4.0 * (double)n;
    if (!adamw)
        return vkg_op_sumsq(b->cmd, step, &x, &n, 1, scratch, 0);
    VKG_TRY(random_tensor(b, n, &grad));
    VKG_TRY(random_tensor(b, n, &m));
    VKG_TRY(random_tensor(b, n, &v));
    vkg_step_params sp = {.lr = 1e-4f, .t = 1, .grad_clip = 0.0f, .unscale = 1.0f};
    VKG_TRY(vkg_tensor_write(b->dev, step, 0, &sp, sizeof sp));
    *flops = 12.0 * (double)n;
    *bytes = 4.0 * (double)(7 * n);
    return vkg_op_adamw(b->cmd, x, grad, m, v, n, 0.9f, 0.95f, 1e-8f, 0.1f, step, NULL);
}

/* A flat op of the table on random tensors of N*C elements. */
static vkg_status record_flat(bench *b, const op_shape *s, double *flops, double *bytes)
{
    size_t n = (size_t)s->N * (size_t)s->C;
    int k = s->flat3 ? 3 : 2;
    vkg_tensor t[3];
    for (int i = 0; i < k; i++)
        VKG_TRY(random_tensor(b, n, &t[i]));
    *flops = s->flops * (double)n;
    *bytes = 4.0 * (double)k * (double)n;
    if (s->flat3)
        return s->flat3(b->cmd, t[0], t[1], t[2], n);
    return s->flat2(b->cmd, t[0], t[1], n);
}

/* The recorder of each VKG_BENCH op of the table, and its variant. */
#define RECORD_matmul_fwd bench_matmul_fwd, 0
#define RECORD_matmul_bwd bench_matmul_bwd, 0
#define RECORD_attention_fwd attention_case, 0
#define RECORD_attention_bwd attention_case, 1
#define RECORD_attention_gqa_fwd attention_gqa_case, 0
#define RECORD_attention_gqa_bwd attention_gqa_case, 1
#define RECORD_encoder_fwd encoder_case, 0
#define RECORD_encoder_bwd encoder_case, 1
#define RECORD_layernorm_fwd layernorm_case, 0
#define RECORD_layernorm_bwd layernorm_case, 1
#define RECORD_rmsnorm_fwd rmsnorm_case, 0
#define RECORD_rmsnorm_bwd rmsnorm_case, 1
#define RECORD_swiglu_fwd swiglu_case, 0
#define RECORD_swiglu_bwd swiglu_case, 1
#define RECORD_rope_fwd rope_case, 0
#define RECORD_rope_bwd rope_case, 1
#define RECORD_qknorm_fwd qknorm_case, 0
#define RECORD_qknorm_bwd qknorm_case, 1
#define RECORD_xent_fwd_bwd bench_xent_fwd_bwd, 0
#define RECORD_sumsq update_case, 0
#define RECORD_adamw update_case, 1

/* The rows: the VKG_BENCH, VKG_FLAT2 and VKG_FLAT3 rows of src/ops/op_table.def, in its order. */
static const op_shape shapes[] = {
#define VKG_BENCH(op, tag, N, C, OC) {#op, tag, N, C, OC, RECORD_##op, NULL, NULL, 0},
#define VKG_FLAT2(name, t0, t1, flops, tag, N, C)                                                  \
    {#name, tag, N, C, 0, record_flat, 0, vkg_op_##name, NULL, flops},
#define VKG_FLAT3(name, t0, t1, t2, flops, tag, N, C)                                              \
    {#name, tag, N, C, 0, record_flat, 0, NULL, vkg_op_##name, flops},
#include "cli/internal.h"
#include "ops/op_table.def"
};

#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Record shape s into b->cmd; *flops and *bytes describe one run. */
static vkg_status record(bench *b, const op_shape *s, double *flops, double *bytes)
{
    VKG_TRY(vkg_cmd_begin(b->cmd));
    VKG_TRY(s->record(b, s, flops, bytes));
    return vkg_cmd_end(b->cmd);
}

/* OpenBLAS on a matmul row's product, in ms (< 0: no reference for this row). */
static double blas_ms(const op_shape *s, int iters)
{
    if (!vkg_bench_blas_available())
        return -1.0;
    if (s->record == bench_matmul_fwd)
        return vkg_bench_sgemm_ms(s->N, s->OC, s->C, iters);
    if (s->record == bench_matmul_bwd)
        return vkg_bench_sgemm_bwd_ms(s->N, s->C, s->OC, iters);
    return -1.0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

vkg_status vkg_bench_time(vkg_bench *b, int iters, double *ms)
{
    double *t = calloc((size_t)iters, sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "no memory");
    vkg_status st = vkg_cmd_run(b->cmd, 0); /* warm-up: pipelines built, caches warm */
    for (int it = 0; it < iters && st == VKG_OK; it++) {
        st = vkg_cmd_run(b->cmd, 0);
        const vkg_cmd_timing *tim;
        int n = vkg_cmd_timings(b->cmd, &tim);
        for (int i = 0; i < n; i++)
            t[it] += tim[i].ns / 1e6;
    }
    if (st == VKG_OK) {
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        *ms = t[iters / 2];
    }
    free(t);
    return st;
}

/* "TM,TN,LX": three whole numbers, nothing else, each in its range. */
static int parse_tiles(const char *s, vkg_matmul_tiles *t)
{
    static const unsigned long max[3] = {16, 16, 1024};
    unsigned long v[3];
    const char *p = s;
    for (int i = 0; i < 3; i++) {
        char *end;
        if (*p < '0' || *p > '9')
            return 0;
        errno = 0;
        v[i] = strtoul(p, &end, 10);
        if (errno || v[i] < 1 || v[i] > max[i] || *end != (i < 2 ? ',' : '\0'))
            return 0;
        p = end + (i < 2);
    }
    t->tm = (unsigned)v[0];
    t->tn = (unsigned)v[1];
    t->lx = (unsigned)v[2];
    return 1;
}

int vkg_cli_bench_ops(int argc, char **argv)
{
    const char *select = getenv("VKGPT_DEVICE"), *only = NULL, *tiles = NULL, *block = NULL;
    const char *shape = NULL;
    int iters = 5, kernel = 0, coopmat = VKG_COOPMAT_OFF;
    static const char *const kernels[] = {"device", "register", "tiled", NULL};
    bench b = {.rng = 42};
    const vkg_flag flags[] = {
        {"--device", VKG_FLAG_STR, &select,
         "device index or name substring (default: VKGPT_DEVICE or the first)", 0, 0, 0},
        {"--iters", VKG_FLAG_INT, &iters, "timed runs per row, median reported (default 5)", 0, 1,
         100000},
        {"--op", VKG_FLAG_STR, &only,
         "only rows whose op starts with this (e.g. matmul_fwd); a fused form's rows run when "
         "any of its three ops does",
         0, 0, 0},
        {"--shape", VKG_FLAG_STR, &shape,
         "only rows whose shape contains this (e.g. 'B4 T64', 'B8 T1024', 'gpt2 fc')", 0, 0, 0},
        {"--tiles", VKG_FLAG_STR, &tiles,
         "tiled matmul tiles for every product, BMxBNxBK:TMxTN[/SG][+db|+sb] or a table entry "
         "(nvidia-large...; see vkgpt devices; +db double-buffered, +sb single-buffered shared "
         "tiles); or the register kernel's TM,TN (1..16),LX "
         "(1..1024 lanes); default: the device's",
         0, 0, 0},
        {"--matmul", VKG_FLAG_CHOICE, &kernel,
         "matmul kernel: the device's choice, the register one, or the tiled one (GPUs)", kernels,
         0, 0},
        {"--block", VKG_FLAG_STR, &block,
         "tiled matmul block BM,BN,BK,TM,TN (e.g. 128,128,16,8,8); default: the device's", 0, 0, 0},
        {"--coopmat", VKG_FLAG_CHOICE, &coopmat,
         "the cooperative-matrix kernel for the bf16 rows' forward products, as train's "
         "--coopmat (default off: the rows of the tiled kernel)",
         vkg_cli_coopmats, 0, 0},
    };
    int rc = vkg_flags_parse("bench ops", "[options]", flags, (int)(sizeof flags / sizeof flags[0]),
                             argc, argv, NULL, NULL);
    if (rc)
        return rc == VKG_FLAGS_HELP ? 0 : 2;
    vkg_matmul_tiling tiled = {0};
    if (vkg_cli_tiles("bench ops", tiles && !strchr(tiles, ',') ? tiles : NULL, &tiled))
        return 2;
    if (tiles && strchr(tiles, ',') && !parse_tiles(tiles, &b.tiles)) {
        fprintf(stderr,
                "vkgpt bench ops: --tiles wants TM,TN,LX with TM and TN from 1 to 16 and LX from "
                "1 to 1024, got '%s'\n",
                tiles);
        return 2;
    }
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = select;
    opts.profiling = 1;
    opts.pipeline_stats = 1;
    opts.coopmat = (vkg_coopmat_mode)coopmat;
    vkg_status st = vkg_device_create(&opts, &b.dev);
    if (st != VKG_OK)
        return vkg_cli_report("bench ops", st);
    const vkg_device_info *info = vkg_device_get_info(b.dev);
    if (!info->timestamps) {
        fprintf(stderr, "vkgpt bench ops: %s has no compute timestamps\n", info->name);
        vkg_device_destroy(&b.dev);
        return 1;
    }
    vkg_device_tuning tu = vkg_device_tuning_get(b.dev);
    int bl[5], nbl = block ? vkg_flags_int_list(block, 1, 256, bl, 5) : 0;
    if (block && nbl != 5) {
        fprintf(stderr,
                "vkgpt bench ops: --block wants BM,BN,BK,TM,TN (whole numbers from 1 to "
                "256), got '%s'\n",
                block);
        vkg_device_destroy(&b.dev);
        return 2;
    }
    if (b.tiles.tm) {
        tu.matmul_tm = b.tiles.tm;
        tu.matmul_tn = b.tiles.tn;
        tu.matmul_lx = b.tiles.lx;
    }
    if (kernel)
        tu.matmul_tiled = kernel == 2;
    if (nbl == 5) {
        tiled = (vkg_matmul_tiling){(uint32_t)bl[0],
                                    (uint32_t)bl[1],
                                    (uint32_t)bl[2],
                                    (uint32_t)bl[3],
                                    (uint32_t)bl[4],
                                    0,
                                    0};
    }
    if (tiled.bm)
        vkg__mmt_force(&tu, &tiled);
    if (b.tiles.tm || kernel || tiled.bm) {
        st = vkg_device_tuning_set(b.dev, &tu);
        if (st != VKG_OK) {
            vkg_device_destroy(&b.dev);
            return (vkg_cli_report("bench ops", st), 2);
        }
    }
    printf("# device: %s (%s)\n", info->name, info->driver);
    if (tu.matmul_tiled && !b.tiles.tm)
        for (int i = 0; i < VKG_MMT_SIZES; i++) {
            const vkg_matmul_tiling *t = &tu.mmt[i];
            printf("# matmul: tiled (%s row, %s), %u x %u x %u blocks, %u x %u per invocation, "
                   "subgroup %u, %s buffered\n",
                   tu.mmt_row,
                   i == 0   ? "small"
                   : i == 1 ? "medium"
                            : "large",
                   t->bm, t->bn, t->bk, t->tm, t->tn, vkg__mmt_subgroup(b.dev, t),
                   t->dbuf ? "double" : "single");
        }
    else
        printf("# matmul: register tiles, %u rows x %u columns per lane, %u lanes\n", tu.matmul_tm,
               tu.matmul_tn, tu.matmul_lx);
    if (vkg_pipestats_enabled(b.dev))
        printf("# pipeline statistics: after each row, every statistic the driver gives for each "
               "pipeline the row used (kernel [specialization constants], executable)\n");
    else
        printf("# pipeline statistics: none: %s\n", vkg_pipestats_absence(b.dev));
    printf("# each row: the median of %d timed runs, printed as it finishes\n", iters);
    printf("%-14s %-18s %10s %10s %9s %12s %8s\n", "op", "shape", "ms", "GFLOP/s", "GB/s",
           "openblas_ms", "ratio");
    fflush(stdout); /* the header at once, also into a pipe: the first row can take a while */
    int live = vkg_os_isatty(2);
    for (size_t i = 0; i < NSHAPES && st == VKG_OK; i++) {
        const op_shape *s = &shapes[i];
        if ((only && strncmp(s->op, only, strlen(only))) || (shape && !strstr(s->tag, shape)))
            continue;
        double flops = 0, bytes = 0, ms = 0;
        if (live) { /* on a terminal: what is being timed, erased when its row is printed */
            fprintf(stderr, "timing %s %s (%d runs)...", s->op, s->tag, iters);
            fflush(stderr);
        }
        vkg_pipestats_mark(b.dev);
        st = vkg_cmd_create(b.dev, &b.cmd);
        if (st == VKG_OK)
            st = record(&b, s, &flops, &bytes);
        if (st == VKG_OK)
            st = vkg_bench_time(&b, iters, &ms);
        if (live)
            fprintf(stderr, "\r\033[K");
        if (st == VKG_OK) {
            printf("%-14s %-18s %10.3f %10.2f %9.2f", s->op, s->tag, ms, flops / ms / 1e6,
                   bytes / ms / 1e6);
            double blas = blas_ms(s, iters);
            if (blas > 0)
                printf(" %12.3f %8.3f\n", blas, blas / ms);
            else
                printf(" %12s %8s\n", "-", "-");
            st = vkg_bench_print_stats(&b);
            fflush(stdout);
        }
        vkg_bench_row_end(&b);
    }
    if (st == VKG_OK)
        st = vkg_bench_fused(&b, only, shape, iters);
    vkg_bench_row_end(&b);
    vkg_device_destroy(&b.dev);
    return st == VKG_OK ? 0 : vkg_cli_report("bench ops", st);
}
