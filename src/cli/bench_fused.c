/* `vkgpt bench ops`, the fused forms' section: each op that does two ops' work in one dispatch
 * timed beside the two ops it replaces, on the same shape and inputs' types, so that the ratio
 * fused / (first op + element-wise pass) reads the same on every device. The shapes are GPT-2
 * 124M's (C = 768) at B = 4, T = 64 and at the training shape B = 8, T = 1024; each in fp32 and
 * with the tensors' types of --precision bf16 (src/model/record.c: bf16 weight copy and
 * activations, fp32 bias and layernorm parameters, fp32 mean and rstd). Results are not checked
 * here (the tests do that). */
#include <stdio.h>
#include <string.h>

#include "cli/bench_ops.h"
#include "cli/internal.h"

/* A fused form and its pair: ops[0] (the product, or the residual add), ops[1] (the pass after
 * it), ops[2] (the fused form); N rows (B*T), C channels, OC outputs of the product. */
typedef struct fused_group {
    const char *ops[3];
    const char *tag;
    int product; /* 1: matmul_fwd + gelu_fwd; 0: residual_fwd + layernorm_fwd */
    int N, C, OC;
} fused_group;

static const fused_group groups[] = {
    {{"matmul_fwd", "gelu_fwd", "matmul_fwd_gelu"}, "gpt2 fc B4 T64", 1, 256, 768, 3072},
    {{"residual_fwd", "layernorm_fwd", "residual_layernorm_fwd"}, "gpt2 B4 T64", 0, 256, 768, 0},
    {{"matmul_fwd", "gelu_fwd", "matmul_fwd_gelu"}, "gpt2 fc B8 T1024", 1, 8192, 768, 3072},
    {{"residual_fwd", "layernorm_fwd", "residual_layernorm_fwd"}, "gpt2 B8 T1024", 0, 8192, 768, 0},
};

#define NGROUPS (sizeof groups / sizeof groups[0])

/* The fc product (N,C) x (OC,C)^T + bias, its GELU, or both in one dispatch (which = 0, 1, 2),
 * with activations and weights of type dt; *flops and *bytes describe one run. */
static vkg_status record_fc(vkg_bench *b, const fused_group *g, int which, vkg_dtype dt,
                            double *flops, double *bytes)
{
    size_t N = (size_t)g->N, C = (size_t)g->C, OC = (size_t)g->OC;
    double es = (double)vkg_dtype_bytes(dt), gelu = 20.0 * (double)(N * OC);
    vkg_tensor inp, w, bias, out, act, scratch;
    VKG_TRY(vkg_bench_tensor(b, N * C, dt, &inp));
    VKG_TRY(vkg_bench_tensor(b, OC * C, dt, &w));
    VKG_TRY(vkg_bench_tensor(b, OC, VKG_F32, &bias));
    VKG_TRY(vkg_bench_tensor(b, N * OC, dt, &out));
    VKG_TRY(vkg_bench_tensor(b, N * OC, dt, &act));
    VKG_TRY(vkg_bench_tensor(b, N * C, VKG_F32, &scratch));
    double product = 2.0 * (double)N * (double)C * (double)OC;
    double operands = es * (double)(N * C + OC * C) + 4.0 * (double)OC;
    if (which == 0) {
        *flops = product, *bytes = operands + es * (double)(N * OC);
        return vkg_op_matmul_fwd(b->cmd, out, inp, w, &bias, g->N, g->C, g->OC, scratch);
    }
    if (which == 1) {
        *flops = gelu, *bytes = 2.0 * es * (double)(N * OC);
        return vkg_op_gelu_fwd(b->cmd, act, out, N * OC);
    }
    *flops = product + gelu, *bytes = operands + 2.0 * es * (double)(N * OC);
    return vkg_op_matmul_fwd_gelu(b->cmd, out, act, inp, w, &bias, g->N, g->C, g->OC, scratch);
}

/* The residual add res = a + b, the layernorm of res, or both in one dispatch (which = 0, 1,
 * 2), with the residual stream and activations of type dt. */
static vkg_status record_residual_ln(vkg_bench *b, const fused_group *g, int which, vkg_dtype dt,
                                     double *flops, double *bytes)
{
    size_t N = (size_t)g->N, C = (size_t)g->C, n = N * C;
    double es = (double)vkg_dtype_bytes(dt), stats = 8.0 * (double)N;
    vkg_tensor a, x, res, out, mean, rstd, w, bias;
    VKG_TRY(vkg_bench_tensor(b, n, dt, &a));
    VKG_TRY(vkg_bench_tensor(b, n, dt, &x));
    VKG_TRY(vkg_bench_tensor(b, n, dt, &res));
    VKG_TRY(vkg_bench_tensor(b, n, dt, &out));
    VKG_TRY(vkg_bench_tensor(b, N, VKG_F32, &mean));
    VKG_TRY(vkg_bench_tensor(b, N, VKG_F32, &rstd));
    VKG_TRY(vkg_bench_tensor(b, C, VKG_F32, &w));
    VKG_TRY(vkg_bench_tensor(b, C, VKG_F32, &bias));
    if (which == 0) {
        *flops = (double)n, *bytes = 3.0 * es * (double)n;
        return vkg_op_residual_fwd(b->cmd, res, a, x, n);
    }
    if (which == 1) {
        *flops = 8.0 * (double)n, *bytes = 2.0 * es * (double)n + stats;
        return vkg_op_layernorm_fwd(b->cmd, out, mean, rstd, res, w, bias, g->N, g->C);
    }
    *flops = 9.0 * (double)n, *bytes = 4.0 * es * (double)n + stats;
    return vkg_op_residual_layernorm_fwd(b->cmd, res, out, mean, rstd, a, x, w, bias, g->N, g->C);
}

/* Record and time one row: *ms its median, *flops and *bytes one run's. */
static vkg_status time_row(vkg_bench *b, const fused_group *g, int which, vkg_dtype dt, int iters,
                           double *ms, double *flops, double *bytes)
{
    vkg_pipestats_mark(b->dev);
    VKG_TRY(vkg_cmd_create(b->dev, &b->cmd));
    VKG_TRY(vkg_cmd_begin(b->cmd));
    if (g->product)
        VKG_TRY(record_fc(b, g, which, dt, flops, bytes));
    else
        VKG_TRY(record_residual_ln(b, g, which, dt, flops, bytes));
    VKG_TRY(vkg_cmd_end(b->cmd));
    return vkg_bench_time(b, iters, ms);
}

/* Whether a group has an op that starts with `only` and a shape that contains `shape` (NULL:
 * any). */
static int selected(const fused_group *g, const char *only, const char *shape)
{
    if (shape && !strstr(g->tag, shape))
        return 0;
    for (int i = 0; i < 3; i++)
        if (!only || !strncmp(g->ops[i], only, strlen(only)))
            return 1;
    return 0;
}

vkg_status vkg_bench_fused(vkg_bench *b, const char *only, const char *shape, int iters)
{
    int header = 0;
    for (size_t gi = 0; gi < NGROUPS; gi++) {
        const fused_group *g = &groups[gi];
        if (!selected(g, only, shape))
            continue;
        if (!header) {
            printf("# fused forms beside their pairs, fp32 then bf16 (the tensors' types of "
                   "--precision bf16); fused/pair = fused ms / (first op ms + element-wise ms), "
                   "target 1.15 or less; bf16/fp32 = the row's ms / the fp32 row's\n");
            printf("%-22s %-4s %-18s %10s %10s %9s %10s %9s\n", "op", "type", "shape", "ms",
                   "GFLOP/s", "GB/s", "fused/pair", "bf16/fp32");
            header = 1;
        }
        double ms[2][3];
        for (int d = 0; d < 2; d++)
            for (int which = 0; which < 3; which++) {
                double flops = 0, bytes = 0, *t = &ms[d][which];
                vkg_status st =
                    time_row(b, g, which, d ? VKG_BF16 : VKG_F32, iters, t, &flops, &bytes);
                if (st == VKG_OK) {
                    printf("%-22s %-4s %-18s %10.3f %10.2f %9.2f", g->ops[which],
                           d ? "bf16" : "fp32", g->tag, *t, flops / *t / 1e6, bytes / *t / 1e6);
                    if (which == 2)
                        printf(" %10.3f", *t / (ms[d][0] + ms[d][1]));
                    else
                        printf(" %10s", "-");
                    if (d)
                        printf(" %9.3f\n", *t / ms[0][which]);
                    else
                        printf(" %9s\n", "-");
                    st = vkg_bench_print_stats(b);
                    fflush(stdout);
                }
                vkg_bench_row_end(b);
                VKG_TRY(st);
            }
    }
    return VKG_OK;
}
