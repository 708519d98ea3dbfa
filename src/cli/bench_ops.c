/* `vkgpt bench ops`: times each op's dispatches with timestamp queries, per op and shape,
 * including GPT-2 124M's shapes at B=4, T=64, and prints ms, GFLOP/s and GB/s; matmul rows also
 * show OpenBLAS sgemm on the same shape and cores, measured in the same run, as a ratio (the
 * backward as its two accumulating products, dinp and dweight; the bias sum is not counted).
 * Inputs are random; results are not checked here (the tests do that). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_blas.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "ops/ops.h"

typedef struct bench {
    vkg_device_t *dev;
    vkg_arena *arena;
    vkg_cmd *cmd;
    uint64_t rng;
    vkg_matmul_tiles tiles;
} bench;

typedef struct op_shape {
    const char *op;  /* which op */
    const char *tag; /* what the shape is */
    int N, C, OC;    /* matmul: rows, in, out; others: rows (B*T), channels, extra (V, NH, T) */
} op_shape;

/* GPT-2 124M at B=4, T=64: N = 256 rows, C = 768, NH = 12, Vp = 50304; plus the matmul target
 * shape 4096 x 768 x 768. */
static const op_shape shapes[] = {
    {"matmul_fwd", "4096x768x768", 4096, 768, 768},
    {"matmul_fwd", "gpt2 qkv", 256, 768, 2304},
    {"matmul_fwd", "gpt2 attproj", 256, 768, 768},
    {"matmul_fwd", "gpt2 fc", 256, 768, 3072},
    {"matmul_fwd", "gpt2 fcproj", 256, 3072, 768},
    {"matmul_fwd", "gpt2 classifier", 256, 768, 50304},
    {"matmul_bwd", "4096x768x768", 4096, 768, 768},
    {"matmul_bwd", "gpt2 qkv", 256, 768, 2304},
    {"matmul_bwd", "gpt2 attproj", 256, 768, 768},
    {"matmul_bwd", "gpt2 fc", 256, 768, 3072},
    {"matmul_bwd", "gpt2 fcproj", 256, 3072, 768},
    {"matmul_bwd", "gpt2 classifier", 256, 768, 50304},
    {"encoder_fwd", "gpt2 B4 T64", 256, 768, 50304},
    {"encoder_bwd", "gpt2 B4 T64", 256, 768, 50304},
    {"layernorm_fwd", "gpt2 256x768", 256, 768, 0},
    {"layernorm_bwd", "gpt2 256x768", 256, 768, 0},
    {"attention_fwd", "gpt2 B4 T64 NH12", 256, 768, 12},
    {"attention_bwd", "gpt2 B4 T64 NH12", 256, 768, 12},
    {"gelu_fwd", "gpt2 256x3072", 256, 3072, 0},
    {"gelu_bwd", "gpt2 256x3072", 256, 3072, 0},
    {"residual_fwd", "gpt2 256x768", 256, 768, 0},
    {"residual_bwd", "gpt2 256x768", 256, 768, 0},
    {"xent_fwd_bwd", "gpt2 256x50257", 256, 50257, 50304},
    {"sumsq", "gpt2 124M params", 124475904, 1, 0},
    {"adamw", "gpt2 124M params", 124475904, 1, 0},
};

#define NSHAPES (sizeof shapes / sizeof shapes[0])

static float next_uniform(bench *b)
{
    b->rng = b->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((b->rng >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
}

/* A tensor of n floats, uniform in [-0.05, 0.05) (or of n int32 token ids below `tokens`). */
static vkg_status random_tensor_ex(bench *b, size_t n, int tokens, vkg_tensor *out)
{
    VKG_TRY(vkg_arena_alloc(b->arena, (n ? n : 1) * sizeof(float), out));
    float *host = malloc((n ? n : 1) * sizeof *host);
    VKG_CHECK(host, VKG_ERR_NOMEM, "no memory for %zu floats", n);
    for (size_t i = 0; i < n; i++) {
        float u = next_uniform(b);
        if (tokens) {
            int32_t t = (int32_t)((u + 0.5f) * (float)tokens) % tokens;
            memcpy(&host[i], &t, sizeof t);
        } else {
            host[i] = u * 0.1f;
        }
    }
    vkg_status st = vkg_tensor_write(b->dev, *out, 0, host, n * sizeof *host);
    free(host);
    return st;
}

static vkg_status random_tensor(bench *b, size_t n, vkg_tensor *out)
{
    return random_tensor_ex(b, n, 0, out);
}

/* Device bytes a row needs (inputs, outputs, scratch), generously. */
static size_t row_bytes(const op_shape *s)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, OC = (size_t)(s->OC > 0 ? s->OC : 1);
    size_t slack = (size_t)1 << 20;
    if (!strncmp(s->op, "matmul", 6))
        return 4 * (3 * N * C + 2 * OC * C + 2 * N * OC + 2 * OC) + slack;
    if (!strncmp(s->op, "encoder", 7))
        return 4 * (2 * OC * C + 4 * N * C + N) + slack;
    if (!strncmp(s->op, "xent", 4))
        return 4 * (N * OC + 2 * N) + slack;
    if (!strncmp(s->op, "attention", 9))
        return 4 * (8 * N * C + 2 * 4 * OC * (N / 4) * (N / 4)) + slack;
    if (!strcmp(s->op, "sumsq") || !strcmp(s->op, "adamw"))
        return 4 * (4 * N * C) + (16u << 20);
    return 4 * (8 * N * C) + slack;
}

static vkg_status record_matmul(bench *b, const op_shape *s, double *flops, double *bytes)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, OC = (size_t)s->OC;
    vkg_tensor inp, w, bias, out, scratch, dinp, dw, dbias, dout;
    VKG_TRY(random_tensor(b, N * C, &inp));
    VKG_TRY(random_tensor(b, OC * C, &w));
    VKG_TRY(random_tensor(b, OC, &bias));
    if (!strcmp(s->op, "matmul_fwd")) {
        VKG_TRY(random_tensor(b, N * OC, &out));
        VKG_TRY(random_tensor(b, N * C, &scratch));
        VKG_TRY(vkg_op_matmul_fwd(b->cmd, out, inp, w, &bias, s->N, s->C, s->OC, scratch));
        *flops = 2.0 * (double)N * (double)C * (double)OC;
        *bytes = 4.0 * (double)(N * C + OC * C + N * OC);
    } else {
        VKG_TRY(random_tensor(b, N * C, &dinp));
        VKG_TRY(random_tensor(b, OC * C, &dw));
        VKG_TRY(random_tensor(b, OC, &dbias));
        VKG_TRY(random_tensor(b, N * OC, &dout));
        VKG_TRY(vkg_op_matmul_bwd(b->cmd, dinp, dw, &dbias, dout, inp, w, s->N, s->C, s->OC));
        *flops = 4.0 * (double)N * (double)C * (double)OC;
        *bytes = 4.0 * (double)(2 * N * C + 2 * OC * C + N * OC);
    }
    return VKG_OK;
}

/* Everything but matmul: *flops is an estimate of the arithmetic, *bytes the minimum traffic. */
static vkg_status record_other(bench *b, const op_shape *s, double *flops, double *bytes)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, n = N * C;
    const char *op = s->op;
    vkg_tensor x, y, z, w, u, v;
    if (!strncmp(op, "encoder", 7)) {
        size_t Vp = (size_t)s->OC;
        VKG_TRY(random_tensor_ex(b, N, 50257, &x)); /* token ids */
        VKG_TRY(random_tensor(b, Vp * C, &w));
        VKG_TRY(random_tensor(b, 64 * C, &u));
        VKG_TRY(random_tensor(b, n, &y));
        *bytes = 4.0 * (double)(3 * n);
        *flops = (double)n;
        if (!strcmp(op, "encoder_fwd"))
            return vkg_op_encoder_fwd(b->cmd, y, x, w, u, 4, (int)N / 4, (int)C);
        return vkg_op_encoder_bwd(b->cmd, w, u, y, x, 4, (int)N / 4, (int)C);
    }
    if (!strncmp(op, "layernorm", 9)) {
        VKG_TRY(random_tensor(b, n, &x));
        VKG_TRY(random_tensor(b, n, &y));
        VKG_TRY(random_tensor(b, N, &u));
        VKG_TRY(random_tensor(b, N, &v));
        VKG_TRY(random_tensor(b, C, &w));
        VKG_TRY(random_tensor(b, C, &z));
        *flops = 8.0 * (double)n;
        *bytes = 4.0 * (double)(2 * n);
        VKG_TRY(vkg_op_layernorm_fwd(b->cmd, y, u, v, x, w, z, (int)N, (int)C));
        if (!strcmp(op, "layernorm_fwd"))
            return VKG_OK;
        vkg_tensor dx, dw, db;
        VKG_TRY(random_tensor(b, n, &dx));
        VKG_TRY(random_tensor(b, C, &dw));
        VKG_TRY(random_tensor(b, C, &db));
        VKG_TRY(vkg_cmd_end(b->cmd));
        VKG_TRY(vkg_cmd_run(b->cmd, 0)); /* mean and rstd for the backward */
        VKG_TRY(vkg_cmd_begin(b->cmd));
        *bytes = 4.0 * (double)(4 * n);
        return vkg_op_layernorm_bwd(b->cmd, dx, dw, db, y, x, w, u, v, (int)N, (int)C);
    }
    if (!strncmp(op, "attention", 9)) {
        int NH = s->OC, Bq = 4, T = (int)N / 4;
        size_t att = (size_t)Bq * NH * T * T;
        VKG_TRY(random_tensor(b, 3 * n, &x));
        VKG_TRY(random_tensor(b, n, &y));
        VKG_TRY(random_tensor(b, att, &u));
        *flops = 4.0 * (double)Bq * T * T * (double)C / 2.0; /* causal: half of QK^T and AV */
        *bytes = 4.0 * (double)(4 * n + att);
        VKG_TRY(vkg_op_attention_fwd(b->cmd, y, u, x, Bq, T, (int)C, NH));
        if (!strcmp(op, "attention_fwd"))
            return VKG_OK;
        VKG_TRY(random_tensor(b, 3 * n, &z));
        VKG_TRY(random_tensor(b, att, &v));
        VKG_TRY(vkg_cmd_end(b->cmd));
        VKG_TRY(vkg_cmd_run(b->cmd, 0));
        VKG_TRY(vkg_cmd_begin(b->cmd));
        *flops *= 2.0;
        return vkg_op_attention_bwd(b->cmd, z, y, x, u, Bq, T, (int)C, NH, v);
    }
    if (!strncmp(op, "xent", 4)) {
        size_t Vp = (size_t)s->OC;
        VKG_TRY(random_tensor(b, N * Vp, &x));
        VKG_TRY(random_tensor_ex(b, N, (int)C, &y));
        VKG_TRY(random_tensor(b, N, &u));
        *flops = 4.0 * (double)(N * Vp);
        *bytes = 4.0 * (double)(2 * N * Vp);
        return vkg_op_xent_fwd_bwd(b->cmd, u, &x, x, y, (int)N, (int)C, (int)Vp, 1.0f / (float)N);
    }
    if (!strcmp(op, "sumsq") || !strcmp(op, "adamw")) {
        size_t scratch = vkg_op_sumsq_scratch_elems(b->dev, &n, 1);
        VKG_TRY(random_tensor(b, n, &x));
        VKG_TRY(random_tensor(b, scratch, &u));
        VKG_TRY(random_tensor(b, 4, &v));
        *flops = 2.0 * (double)n;
        *bytes = 4.0 * (double)n;
        if (!strcmp(op, "sumsq"))
            return vkg_op_sumsq(b->cmd, v, &x, &n, 1, u, 0);
        VKG_TRY(random_tensor(b, n, &y));
        VKG_TRY(random_tensor(b, n, &z));
        VKG_TRY(random_tensor(b, n, &w));
        vkg_step_params sp = {.lr = 1e-4f, .t = 1, .grad_clip = 0.0f};
        VKG_TRY(vkg_tensor_write(b->dev, v, 0, &sp, sizeof sp));
        *flops = 12.0 * (double)n;
        *bytes = 4.0 * (double)(7 * n);
        return vkg_op_adamw(b->cmd, x, y, z, w, n, 0.9f, 0.95f, 1e-8f, 0.1f, v, NULL);
    }
    /* gelu and residual */
    VKG_TRY(random_tensor(b, n, &x));
    VKG_TRY(random_tensor(b, n, &y));
    VKG_TRY(random_tensor(b, n, &z));
    *flops = (!strncmp(op, "gelu", 4) ? 20.0 : 1.0) * (double)n;
    *bytes = 4.0 * (double)(3 * n);
    if (!strcmp(op, "gelu_fwd"))
        return vkg_op_gelu_fwd(b->cmd, y, x, n);
    if (!strcmp(op, "gelu_bwd"))
        return vkg_op_gelu_bwd(b->cmd, z, x, y, n);
    if (!strcmp(op, "residual_fwd"))
        return vkg_op_residual_fwd(b->cmd, z, x, y, n);
    return vkg_op_residual_bwd(b->cmd, z, x, y, n);
}

/* Record shape s into b->cmd; *flops and *bytes describe one run. */
static vkg_status record(bench *b, const op_shape *s, double *flops, double *bytes)
{
    VKG_TRY(vkg_cmd_begin(b->cmd));
    if (!strncmp(s->op, "matmul", 6))
        VKG_TRY(record_matmul(b, s, flops, bytes));
    else
        VKG_TRY(record_other(b, s, flops, bytes));
    return vkg_cmd_end(b->cmd);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

/* Median over iters of the summed dispatch times of one run, in ms. */
static vkg_status time_runs(bench *b, int iters, double *ms)
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
    const char *select = getenv("VKGPT_DEVICE"), *only = NULL, *tiles = NULL;
    int iters = 5;
    bench b = {.rng = 42};
    const vkg_flag flags[] = {
        {"--device", VKG_FLAG_STR, &select,
         "device index or name substring (default: VKGPT_DEVICE or the first)", 0, 0, 0},
        {"--iters", VKG_FLAG_INT, &iters, "timed runs per row, median reported (default 5)", 0, 1,
         100000},
        {"--op", VKG_FLAG_STR, &only, "only rows whose op starts with this (e.g. matmul_fwd)", 0, 0,
         0},
        {"--tiles", VKG_FLAG_STR, &tiles,
         "matmul tile TM,TN (1..16),LX (1..1024 lanes); default: the device's", 0, 0, 0},
    };
    int rc = vkg_flags_parse("bench ops", "[options]", flags, (int)(sizeof flags / sizeof flags[0]),
                             argc, argv, NULL, NULL);
    if (rc)
        return rc == VKG_FLAGS_HELP ? 0 : 2;
    if (tiles && !parse_tiles(tiles, &b.tiles)) {
        fprintf(stderr,
                "vkgpt bench ops: --tiles wants TM,TN,LX with TM and TN from 1 to 16 and LX from "
                "1 to 1024, got '%s'\n",
                tiles);
        return 2;
    }
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = select;
    opts.profiling = 1;
    vkg_status st = vkg_device_create(&opts, &b.dev);
    if (st != VKG_OK)
        return st == VKG_ERR_NOT_FOUND ? (vkg_cli_report("bench ops", st), 2)
                                       : vkg_cli_report("bench ops", st);
    const vkg_device_info *info = vkg_device_get_info(b.dev);
    if (!info->timestamps) {
        fprintf(stderr, "vkgpt bench ops: %s has no compute timestamps\n", info->name);
        vkg_device_destroy(&b.dev);
        return 1;
    }
    vkg_device_tuning tu = vkg_device_tuning_get(b.dev);
    if (b.tiles.tm) {
        tu.matmul_tm = b.tiles.tm;
        tu.matmul_tn = b.tiles.tn;
        tu.matmul_lx = b.tiles.lx;
        st = vkg_device_tuning_set(b.dev, &tu);
        if (st != VKG_OK) {
            vkg_device_destroy(&b.dev);
            return (vkg_cli_report("bench ops", st), 2);
        }
    }
    printf("# device: %s (%s)\n# matmul tiles: %u rows x %u columns per lane, %u lanes\n",
           info->name, info->driver, tu.matmul_tm, tu.matmul_tn, tu.matmul_lx);
    printf("%-14s %-18s %10s %10s %9s %12s %8s\n", "op", "shape", "ms", "GFLOP/s", "GB/s",
           "openblas_ms", "ratio");
    for (size_t i = 0; i < NSHAPES && st == VKG_OK; i++) {
        const op_shape *s = &shapes[i];
        if (only && strncmp(s->op, only, strlen(only)))
            continue;
        size_t need = row_bytes(s);
        double flops = 0, bytes = 0, ms = 0;
        st = vkg_arena_create(b.dev, need, "bench", &b.arena);
        if (st == VKG_OK)
            st = vkg_cmd_create(b.dev, &b.cmd);
        if (st == VKG_OK)
            st = record(&b, s, &flops, &bytes);
        if (st == VKG_OK)
            st = time_runs(&b, iters, &ms);
        if (st == VKG_OK) {
            printf("%-14s %-18s %10.3f %10.2f %9.2f", s->op, s->tag, ms, flops / ms / 1e6,
                   bytes / ms / 1e6);
            double blas = -1.0;
            if (!strcmp(s->op, "matmul_fwd") && vkg_bench_blas_available())
                blas = vkg_bench_sgemm_ms(s->N, s->OC, s->C, iters);
            else if (!strcmp(s->op, "matmul_bwd") && vkg_bench_blas_available())
                blas = vkg_bench_sgemm_bwd_ms(s->N, s->C, s->OC, iters);
            if (blas > 0)
                printf(" %12.3f %8.3f\n", blas, blas / ms);
            else
                printf(" %12s %8s\n", "-", "-");
            fflush(stdout);
        }
        vkg_cmd_destroy(&b.cmd);
        vkg_arena_destroy(&b.arena);
    }
    vkg_device_destroy(&b.dev);
    return st == VKG_OK ? 0 : vkg_cli_report("bench ops", st);
}
