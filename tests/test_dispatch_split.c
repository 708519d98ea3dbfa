/* The shader index limit (src/ops/op_util.h): every op of src/ops/op_table.def, forward and
 * backward, runs on one shape twice, with the default limit (2^31 - 1 elements) and with a limit
 * lowered below its tensors so that it must split (vkg__op_set_max_elems), from the same inputs
 * uploaded afresh. Every output must be bitwise the same in both runs (memcmp), and written
 * (outputs start as NaN, or random where the op accumulates), and the lowered run must show how it
 * kept its indices within the limit:
 *  - ops split into blocks (element-wise, row-wise and attention ops) record more dispatches than
 *    the default run (vkg_cmd_dispatch_count);
 *  - ops that sum over the split dimension, and so keep one dispatch, build the wide variant of
 *    their kernel (64-bit row addresses: the specialization constant named per case is 1 in a
 *    pipeline of the device's kernel cache, which is emptied before the case and holds no such
 *    variant after the default run).
 * Attention runs with both of its kernel forms (VKG_ATTENTION_DIRECT and _SHARED). Then: an op
 * whose single row exceeds the lowered limit is refused naming the op and the sizes, recording
 * nothing; and VKG_MAX_DISPATCH_ELEMS, read once per process, is probed in child processes of this
 * program: a valid value splits a fill, an invalid one is a clear error from the first op (and the
 * next) naming the variable and the value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_fixture.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "testutil.h"

#define MAXT 9  /* tensors of one case */
#define MAXW 3  /* wide kernels one case expects */
#define MAXS 12 /* sizes of one case */

typedef enum role { IN, OUT, SCRATCH } role; /* OUT: compared; SCRATCH: neither compared nor read */

typedef struct op_case op_case;
/* Record the op of case k on tensors t (in the order of k's tensors). */
typedef vkg_status (*recorder)(vkg_cmd *c, const vkg_tensor *t, const op_case *k);

struct op_case {
    const char *name;
    recorder rec;
    int s[MAXS];  /* sizes, per recorder */
    float f[4];   /* scalars, per recorder */
    size_t limit; /* the lowered limit */
    int nt;
    size_t n[MAXT]; /* 4-byte elements per tensor */
    role role[MAXT];
    void *host[MAXT]; /* contents uploaded before each run; NULL: NaN */
    int split;        /* 1: the lowered run must record more dispatches */
    int nwide;
    vkg_kernel_id wide[MAXW]; /* kernels whose wide variant the lowered run must build */
    int wide_spec[MAXW];      /* the id of their WIDE specialization constant */
};

static vkg_test_rng rng;

static float *rnd(size_t n, float lo, float hi)
{
    return vkg_test_random(&rng, n, lo, hi);
}

static int32_t *tokens(size_t n, int V)
{
    int32_t *t = malloc(n * sizeof *t);
    assert_non_null(t);
    vkg_test_fill_int(&rng, t, n, V);
    return t;
}

static void add(op_case *k, role r, size_t n, void *host)
{
    assert_true(k->nt < MAXT);
    k->role[k->nt] = r;
    k->n[k->nt] = n;
    k->host[k->nt] = host;
    k->nt++;
}

static void expect_wide(op_case *k, vkg_kernel_id kernel, int spec_id)
{
    assert_true(k->nwide < MAXW);
    k->wide[k->nwide] = kernel;
    k->wide_spec[k->nwide] = spec_id;
    k->nwide++;
}

/* Pipelines of kernel k in the device's cache whose specialization constant id is 1. */
static int wide_variants(vkg_gpu *g, vkg_kernel_id k, int id)
{
    const vkg_kernel_cache *kc = &g->dev->kernels[k];
    int n = 0;
    for (int i = 0; i < kc->count; i++)
        n += kc->variants[i].nspec > id && kc->variants[i].spec[id] == 1;
    return n;
}

/* Upload k's tensors, record its op under `limit`, run it; the outputs' contents in out[i] (for
 * OUT tensors), the dispatches recorded in *dispatches. */
static void run_once(vkg_gpu *g, const op_case *k, size_t limit, void **out, int *dispatches)
{
    vkg_tensor t[MAXT];
    for (int i = 0; i < k->nt; i++)
        t[i] =
            k->host[i] ? vkg_gpu_upload(g, k->host[i], k->n[i] * 4) : vkg_gpu_poisoned(g, k->n[i]);
    vkg__op_set_max_elems(limit);
    int before = vkg_cmd_dispatch_count(g->cmd);
    vkg_status st = k->rec(g->cmd, t, k);
    *dispatches = vkg_cmd_dispatch_count(g->cmd) - before;
    vkg__op_set_max_elems(0);
    VKG_ASSERT_OK(st);
    vkg_gpu_run(g);
    for (int i = 0; i < k->nt; i++) {
        out[i] = NULL;
        if (k->role[i] != OUT)
            continue;
        out[i] = vkg_test_alloc(k->n[i]);
        vkg_gpu_download(g, t[i], out[i], k->n[i] * 4);
        vkg_gpu_expect_guard(g, k->name, t[i]);
    }
}

/* Run case k with the default and the lowered limit; check what the header says; free k. */
static void check_case(vkg_gpu *g, op_case *k)
{
    void *a[MAXT], *b[MAXT];
    int na, nb;
    vkDeviceWaitIdle(g->dev->device);
    vkg__kernels_release(g->dev); /* so a wide variant seen below was built by this case */
    run_once(g, k, VKG_OP_MAX_ELEMS, a, &na);
    for (int w = 0; w < k->nwide; w++)
        if (wide_variants(g, k->wide[w], k->wide_spec[w]) != 0)
            fail_msg("%s: the default limit built a wide variant of %s", k->name,
                     vkg__kernel_name(k->wide[w]));
    run_once(g, k, k->limit, b, &nb);
    print_message("    %-34s limit %-6zu dispatches %d -> %d", k->name, k->limit, na, nb);
    for (int w = 0; w < k->nwide; w++) {
        int n = wide_variants(g, k->wide[w], k->wide_spec[w]);
        print_message(", wide %s", vkg__kernel_name(k->wide[w]));
        if (n == 0)
            fail_msg("%s: no wide variant of %s was built under limit %zu", k->name,
                     vkg__kernel_name(k->wide[w]), k->limit);
    }
    print_message("\n");
    if (k->split && nb <= na)
        fail_msg("%s: %d dispatches under limit %zu, %d by default: not split", k->name, nb,
                 k->limit, na);
    for (int i = 0; i < k->nt; i++) {
        if (k->role[i] != OUT)
            continue;
        const uint32_t *x = a[i], *y = b[i];
        for (size_t e = 0; e < k->n[i]; e++) {
            if ((x[e] & 0x7F800000u) == 0x7F800000u && (x[e] & 0x007FFFFFu) != 0)
                fail_msg("%s: output %d element %zu is NaN (not written?)", k->name, i, e);
            if (x[e] != y[e])
                fail_msg("%s: output %d element %zu differs: %a by default, %a split", k->name, i,
                         e, (double)((const float *)x)[e], (double)((const float *)y)[e]);
        }
        free(a[i]);
        free(b[i]);
    }
    for (int i = 0; i < k->nt; i++)
        free(k->host[i]);
    memset(k, 0, sizeof *k);
}

/* ---- element-wise ops -------------------------------------------------------------------- */

static vkg_status rec_fill(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_fill(c, t[0], k->n[0], k->f[0]);
}

static vkg_status rec_scale(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_scale(c, t[0], k->n[0], k->f[0]);
}

static vkg_status rec_gelu_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_gelu_fwd(c, t[0], t[1], k->n[0]);
}

static vkg_status rec_gelu_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_gelu_bwd(c, t[0], t[1], t[2], k->n[0]);
}

static vkg_status rec_residual_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    /* s[0] = 1: in place, out = a */
    return vkg_op_residual_fwd(c, t[0], k->s[0] ? t[0] : t[1], t[2], k->n[0]);
}

static vkg_status rec_residual_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_residual_bwd(c, t[0], t[1], t[2], k->n[0]);
}

static vkg_status rec_adamw(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_adamw(c, t[0], t[1], t[2], t[3], k->n[0], 0.9f, 0.95f, 1e-8f, 0.1f, t[4], &t[5]);
}

static void test_elementwise_ops(void **state)
{
    vkg_gpu *g = *state;
    const size_t n = 5000, limit = 2000;
    op_case k = {.name = "fill", .rec = rec_fill, .f = {1.25f}, .limit = limit, .split = 1};
    add(&k, OUT, n, NULL);
    check_case(g, &k);

    k = (op_case){.name = "scale", .rec = rec_scale, .f = {-0.75f}, .limit = limit, .split = 1};
    add(&k, OUT, n, rnd(n, -2, 2));
    check_case(g, &k);

    k = (op_case){.name = "gelu_fwd", .rec = rec_gelu_fwd, .limit = limit, .split = 1};
    add(&k, OUT, n, NULL);
    add(&k, IN, n, rnd(n, -4, 4));
    check_case(g, &k);

    k = (op_case){.name = "gelu_bwd", .rec = rec_gelu_bwd, .limit = limit, .split = 1};
    add(&k, OUT, n, rnd(n, -1, 1));
    add(&k, IN, n, rnd(n, -4, 4));
    add(&k, IN, n, rnd(n, -1, 1));
    check_case(g, &k);

    for (int in_place = 0; in_place <= 1; in_place++) {
        k = (op_case){.name = in_place ? "residual_fwd (out = a)" : "residual_fwd",
                      .rec = rec_residual_fwd,
                      .s = {in_place},
                      .limit = limit,
                      .split = 1};
        add(&k, OUT, n, in_place ? rnd(n, -1, 1) : NULL);
        add(&k, IN, n, rnd(n, -1, 1));
        add(&k, IN, n, rnd(n, -1, 1));
        check_case(g, &k);
    }

    k = (op_case){.name = "residual_bwd", .rec = rec_residual_bwd, .limit = limit, .split = 1};
    add(&k, OUT, n, rnd(n, -1, 1));
    add(&k, OUT, n, rnd(n, -1, 1));
    add(&k, IN, n, rnd(n, -1, 1));
    check_case(g, &k);

    k = (op_case){.name = "adamw", .rec = rec_adamw, .limit = limit, .split = 1};
    add(&k, OUT, n, rnd(n, -1, 1));       /* param */
    add(&k, IN, n, rnd(n, -1, 1));        /* grad */
    add(&k, OUT, n, rnd(n, -0.1f, 0.1f)); /* m */
    add(&k, OUT, n, rnd(n, 0, 0.01f));    /* v */
    vkg_step_params *sp = calloc(1, sizeof *sp);
    assert_non_null(sp);
    *sp = (vkg_step_params){.lr = 1e-2f, .t = 3, .grad_clip = 1.0f};
    add(&k, IN, 4, sp);
    float *sumsq = malloc(sizeof *sumsq);
    assert_non_null(sumsq);
    *sumsq = 7.0f; /* norm above the clip: the gradient is scaled */
    add(&k, IN, 1, sumsq);
    check_case(g, &k);
}

/* ---- sum of squares ---------------------------------------------------------------------- */

static vkg_status rec_sumsq(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    const vkg_tensor xs[2] = {t[0], t[1]};
    const size_t ns[2] = {k->n[0], k->n[1]};
    return vkg_op_sumsq(c, t[3], xs, ns, 2, t[2], 0);
}

static void test_sumsq(void **state)
{
    vkg_gpu *g = *state;
    const size_t ns[2] = {100003, 3001};
    op_case k = {.name = "sumsq", .rec = rec_sumsq, .limit = 10000};
    add(&k, IN, ns[0], rnd(ns[0], -1, 1));
    add(&k, IN, ns[1], rnd(ns[1], -1, 1));
    add(&k, OUT, vkg_op_sumsq_scratch_elems(g->dev, ns, 2), NULL); /* the partials, all written */
    add(&k, OUT, 1, NULL);
    expect_wide(&k, VKG_KERNEL_sumsq_partial, 3);
    check_case(g, &k);
}

/* ---- layernorm --------------------------------------------------------------------------- */

static vkg_status rec_ln_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_layernorm_fwd(c, t[0], t[1], t[2], t[3], t[4], t[5], k->s[0], k->s[1]);
}

static vkg_status rec_ln_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_layernorm_bwd(c, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], k->s[0],
                                k->s[1]);
}

static void test_layernorm(void **state)
{
    vkg_gpu *g = *state;
    const int N = 50, C = 37;
    const size_t NC = (size_t)N * C;
    op_case k = {.name = "layernorm_fwd", .rec = rec_ln_fwd, .s = {N, C}, .limit = 400, .split = 1};
    add(&k, OUT, NC, NULL);
    add(&k, OUT, N, NULL);
    add(&k, OUT, N, NULL);
    add(&k, IN, NC, rnd(NC, -2, 3));
    add(&k, IN, C, rnd(C, 0.5f, 1.5f));
    add(&k, IN, C, rnd(C, -0.5f, 0.5f));
    check_case(g, &k);

    k = (op_case){
        .name = "layernorm_bwd", .rec = rec_ln_bwd, .s = {N, C}, .limit = 400, .split = 1};
    add(&k, OUT, NC, rnd(NC, -1, 1)); /* dinp */
    add(&k, OUT, C, rnd(C, -1, 1));   /* dweight */
    add(&k, OUT, C, rnd(C, -1, 1));   /* dbias */
    add(&k, IN, NC, rnd(NC, -1, 1));  /* dout */
    add(&k, IN, NC, rnd(NC, -2, 3));  /* inp */
    add(&k, IN, C, rnd(C, 0.5f, 1.5f));
    add(&k, IN, N, rnd(N, -0.5f, 0.5f)); /* mean */
    add(&k, IN, N, rnd(N, 0.5f, 2.0f));  /* rstd */
    expect_wide(&k, VKG_KERNEL_layernorm_bwd_dparams, 3);
    check_case(g, &k);
}

/* ---- softmax cross-entropy --------------------------------------------------------------- */

static vkg_status rec_xent(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    /* s[3]: 0 dlogits apart (t[1]), 1 evaluation (no dlogits), 2 in place (dlogits = logits) */
    const vkg_tensor *d = k->s[3] == 0 ? &t[1] : k->s[3] == 2 ? &t[2] : NULL;
    return vkg_op_xent_fwd_bwd(c, t[0], d, t[2], t[3], k->s[0], k->s[1], k->s[2], k->f[0]);
}

static void test_xent(void **state)
{
    vkg_gpu *g = *state;
    const int N = 20, V = 100, Vp = 128;
    const char *names[3] = {"xent_fwd_bwd", "xent_fwd (evaluation)", "xent_fwd_bwd (in place)"};
    for (int mode = 0; mode < 3; mode++) {
        op_case k = {.name = names[mode],
                     .rec = rec_xent,
                     .s = {N, V, Vp, mode},
                     .f = {0.05f},
                     .limit = 500,
                     .split = 1};
        add(&k, OUT, (size_t)N, NULL);
        add(&k, mode == 0 ? OUT : SCRATCH, (size_t)N * Vp, NULL);
        add(&k, mode == 2 ? OUT : IN, (size_t)N * Vp, rnd((size_t)N * Vp, -5, 5));
        add(&k, IN, (size_t)N, tokens((size_t)N, V));
        check_case(g, &k);
    }
}

/* ---- encoder ----------------------------------------------------------------------------- */

static vkg_status rec_enc_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_encoder_fwd(c, t[0], t[1], t[2], t[3], k->s[0], k->s[1], k->s[2]);
}

static vkg_status rec_enc_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_encoder_bwd(c, t[0], t[1], t[2], t[3], k->s[0], k->s[1], k->s[2]);
}

static vkg_status rec_enc_bwd_wpe(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_encoder_bwd_wpe(c, t[1], t[2], k->s[0], k->s[1], k->s[2]);
}

static void test_encoder(void **state)
{
    vkg_gpu *g = *state;
    const int B = 3, T = 10, C = 16, V = 50, maxT = 12;
    const size_t BT = (size_t)B * T;
    /* 200: blocks of whole sequences (12 rows fit: one sequence of 10); 100: parts of a sequence
     * (6 rows, then 4); wte (800 elements) is beyond both. */
    const size_t limits[2] = {200, 100};
    for (int i = 0; i < 2; i++) {
        op_case k = {.name = i ? "encoder_fwd (parts of sequences)" : "encoder_fwd",
                     .rec = rec_enc_fwd,
                     .s = {B, T, C},
                     .limit = limits[i],
                     .split = 1};
        add(&k, OUT, BT * C, NULL);
        add(&k, IN, BT, tokens(BT, V));
        add(&k, IN, (size_t)V * C, rnd((size_t)V * C, -1, 1));
        add(&k, IN, (size_t)maxT * C, rnd((size_t)maxT * C, -1, 1));
        expect_wide(&k, VKG_KERNEL_encoder_fwd, 3);
        check_case(g, &k);
    }
    for (int wpe_only = 0; wpe_only <= 1; wpe_only++) {
        op_case k = {.name = wpe_only ? "encoder_bwd_wpe" : "encoder_bwd",
                     .rec = wpe_only ? rec_enc_bwd_wpe : rec_enc_bwd,
                     .s = {B, T, C},
                     .limit = 200};
        add(&k, wpe_only ? IN : OUT, (size_t)V * C, rnd((size_t)V * C, -1, 1)); /* dwte */
        add(&k, OUT, (size_t)T * C, rnd((size_t)T * C, -1, 1));                 /* dwpe */
        add(&k, IN, BT * C, rnd(BT * C, -1, 1));                                /* dout */
        add(&k, IN, BT, tokens(BT, 7)); /* few distinct tokens: rows summed */
        if (!wpe_only)
            expect_wide(&k, VKG_KERNEL_encoder_bwd_wte, 4);
        expect_wide(&k, VKG_KERNEL_encoder_bwd_wpe, 3);
        check_case(g, &k);
    }
}

/* ---- matmul ------------------------------------------------------------------------------ */

static vkg_status rec_mm_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_matmul_fwd(c, t[0], t[1], t[2], &t[3], k->s[0], k->s[1], k->s[2], t[4]);
}

/* s[3]: 0 the whole backward pass, 1 dinp alone, 2 dweight (and dbias) alone */
static vkg_status rec_mm_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    int N = k->s[0], C = k->s[1], OC = k->s[2];
    const vkg_tensor *dbias = k->s[4] ? &t[2] : NULL;
    if (k->s[3] == 1)
        return vkg_op_matmul_bwd_dinp(c, t[0], t[3], t[5], N, C, OC);
    if (k->s[3] == 2)
        return vkg_op_matmul_bwd_dweight(c, t[1], dbias, t[3], t[4], N, C, OC, NULL);
    return vkg_op_matmul_bwd(c, t[0], t[1], dbias, t[3], t[4], t[5], N, C, OC, NULL);
}

/* s: M, N, K, a_kcontig, out_t, tm, tn, lx */
static vkg_status rec_gemm(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    uint32_t M = (uint32_t)k->s[0], N = (uint32_t)k->s[1], K = (uint32_t)k->s[2];
    vkg_gemm gm = {.out = t[0],
                   .a = t[1],
                   .b = t[2],
                   .M = M,
                   .N = N,
                   .K = K,
                   .lda = k->s[3] ? K : M,
                   .ldb = N,
                   .ldo = k->s[4] ? M : N,
                   .a_kcontig = k->s[3],
                   .out_t = k->s[4],
                   .tiles = {(uint32_t)k->s[5], (uint32_t)k->s[6], (uint32_t)k->s[7]},
                   .label = "gemm"};
    return vkg_op_gemm(c, &gm);
}

static vkg_status rec_transpose(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_transpose(c, t[0], t[1], k->s[0], k->s[1]);
}

static void add_matmul_fwd(vkg_gpu *g, const char *name, int N, int C, int OC, size_t limit,
                           int wide)
{
    op_case k = {.name = name, .rec = rec_mm_fwd, .s = {N, C, OC}, .limit = limit, .split = 1};
    add(&k, OUT, (size_t)N * OC, NULL);
    add(&k, IN, (size_t)N * C, rnd((size_t)N * C, -1, 1));
    add(&k, IN, (size_t)OC * C, rnd((size_t)OC * C, -0.5f, 0.5f));
    add(&k, IN, (size_t)OC, rnd((size_t)OC, -1, 1));
    add(&k, SCRATCH, (size_t)N * C, NULL);
    if (wide)
        expect_wide(&k, VKG_KERNEL_matmul, 9);
    check_case(g, &k);
}

static void add_matmul_bwd(vkg_gpu *g, const char *name, int N, int C, int OC, int part, int bias,
                           size_t limit, int weight_wide)
{
    op_case k = {.name = name,
                 .rec = rec_mm_bwd,
                 .s = {N, C, OC, part, bias},
                 .limit = limit,
                 .split = part != 2};
    add(&k, part != 2 ? OUT : IN, (size_t)N * C, rnd((size_t)N * C, -1, 1));   /* dinp */
    add(&k, part != 1 ? OUT : IN, (size_t)OC * C, rnd((size_t)OC * C, -1, 1)); /* dweight */
    add(&k, bias ? OUT : IN, (size_t)OC, rnd((size_t)OC, -1, 1));              /* dbias */
    add(&k, IN, (size_t)N * OC, rnd((size_t)N * OC, -1, 1));                   /* dout */
    add(&k, IN, (size_t)N * C, rnd((size_t)N * C, -1, 1));                     /* inp */
    add(&k, IN, (size_t)OC * C, rnd((size_t)OC * C, -0.5f, 0.5f));             /* weight */
    if (part != 1 || weight_wide)
        expect_wide(&k, VKG_KERNEL_matmul, 9);
    if (part != 1 && bias)
        expect_wide(&k, VKG_KERNEL_matmul_bwd_bias, 3);
    check_case(g, &k);
}

static void test_matmul(void **state)
{
    vkg_gpu *g = *state;
    /* Rows in blocks of 16 (N x OC = 480 > 200), the weight (96) within the limit. */
    add_matmul_fwd(g, "matmul_fwd", 40, 8, 12, 200, 0);
    /* Rows in blocks of 6, and the weight (720) beyond the limit: the wide product too. */
    add_matmul_fwd(g, "matmul_fwd (wide weight)", 20, 24, 30, 200, 1);
    add_matmul_bwd(g, "matmul_bwd", 40, 8, 12, 0, 1, 200, 0);
    add_matmul_bwd(g, "matmul_bwd_dinp", 40, 8, 12, 1, 0, 200, 0);
    add_matmul_bwd(g, "matmul_bwd_dweight", 40, 8, 12, 2, 1, 200, 0);
    /* A weight of 400 x 400: on devices whose tuning splits an accumulating product along K
     * (CPU devices), dinp is also recorded in chunks of K, in each block of rows. */
    add_matmul_bwd(g, "matmul_bwd (K chunks, wide weight)", 9, 400, 400, 0, 0, 2000, 1);

    const int tiles[2][3] = {{0, 0, 0}, {3, 5, 16}};
    const int M = 29, N = 45, K = 19;
    for (int v = 0; v < 2; v++)
        for (int kcontig = 0; kcontig <= 1; kcontig++)
            for (int out_t = 0; out_t <= 1; out_t++) {
                char *name = malloc(64);
                assert_non_null(name);
                snprintf(name, 64, "gemm tiles %d,%d,%d kcontig %d out_t %d", tiles[v][0],
                         tiles[v][1], tiles[v][2], kcontig, out_t);
                op_case k = {.name = name,
                             .rec = rec_gemm,
                             .s = {M, N, K, kcontig, out_t, tiles[v][0], tiles[v][1], tiles[v][2]},
                             .limit = 300};
                add(&k, OUT, (size_t)M * N, NULL);
                add(&k, IN, (size_t)M * K, rnd((size_t)M * K, -1, 1));
                add(&k, IN, (size_t)K * N, rnd((size_t)K * N, -1, 1));
                expect_wide(&k, VKG_KERNEL_matmul, 9);
                check_case(g, &k);
                free(name);
            }

    op_case k = {.name = "transpose", .rec = rec_transpose, .s = {50, 37}, .limit = 500};
    add(&k, OUT, 50 * 37, NULL);
    add(&k, IN, 50 * 37, rnd(50 * 37, -1, 1));
    expect_wide(&k, VKG_KERNEL_transpose, 3);
    check_case(g, &k);
}

/* ---- attention --------------------------------------------------------------------------- */

static vkg_status rec_att_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_attention_fwd(c, t[0], t[1], t[2], k->s[0], k->s[1], k->s[2], k->s[3]);
}

static vkg_status rec_att_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_attention_bwd(c, t[0], t[1], t[2], t[3], t[4], k->s[0], k->s[1], k->s[2], k->s[3],
                                t[5]);
}

static void attention_cases(vkg_gpu *g, const char *form)
{
    /* (B, T, C, NH, limit): blocks of 2 batches (324 elements of qkv per batch, limit 700);
     * blocks of one batch (162 of qkv per batch, limit 200); blocks of one batch of one head of
     * hs = 5 over T = 20, past a tile of either form (300 of qkv per batch, limit 400). */
    const int shapes[3][5] = {{3, 9, 12, 3, 700}, {2, 9, 6, 3, 200}, {3, 20, 5, 1, 400}};
    for (int s = 0; s < 3; s++) {
        int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
        size_t nstat = (size_t)B * NH * T;
        char *name = malloc(96);
        assert_non_null(name);
        snprintf(name, 96, "attention_fwd B=%d T=%d C=%d NH=%d %s", B, T, C, NH, form);
        op_case k = {.name = name,
                     .rec = rec_att_fwd,
                     .s = {B, T, C, NH},
                     .limit = (size_t)shapes[s][4],
                     .split = 1};
        add(&k, OUT, nout, NULL);  /* out */
        add(&k, OUT, nstat, NULL); /* lse */
        add(&k, IN, nqkv, rnd(nqkv, -2, 2));
        check_case(g, &k);

        snprintf(name, 96, "attention_bwd B=%d T=%d C=%d NH=%d %s", B, T, C, NH, form);
        k = (op_case){.name = name,
                      .rec = rec_att_bwd,
                      .s = {B, T, C, NH},
                      .limit = (size_t)shapes[s][4],
                      .split = 1};
        add(&k, OUT, nqkv, rnd(nqkv, -1, 1)); /* dqkv, accumulated */
        add(&k, IN, nout, rnd(nout, -1, 1));  /* dout */
        add(&k, IN, nqkv, rnd(nqkv, -2, 2));  /* qkv */
        add(&k, IN, nout, rnd(nout, -1, 1));  /* out */
        add(&k, IN, nstat, rnd(nstat, 0, 2)); /* lse */
        add(&k, SCRATCH, nstat, NULL);        /* delta */
        check_case(g, &k);
        free(name);
    }
}

static void test_attention(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev), t = saved;
    t.attention = VKG_ATTENTION_DIRECT;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    attention_cases(g, "(subgroup form)");
    t.attention = VKG_ATTENTION_SHARED;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    attention_cases(g, "(rows form)");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* Record `call` under the limit `lim` and expect it refused with a message containing `needle`. */
#define EXPECT_REFUSED(lim, call, needle)                                                          \
    do {                                                                                           \
        vkg__op_set_max_elems(lim);                                                                \
        vkg_status refused_st_ = (call);                                                           \
        vkg__op_set_max_elems(0);                                                                  \
        vkg_expect_invalid(refused_st_, needle);                                                   \
    } while (0)

/* One row beyond the limit cannot be split: a clear error naming the op and the sizes, and
 * nothing recorded. */
static void test_row_beyond_the_limit(void **state)
{
    vkg_gpu *g = *state;
    vkg_cmd *c = g->cmd;
    vkg_tensor big = vkg_gpu_poisoned(g, 20000), ids = vkg_gpu_upload(g, NULL, 400 * 4);
    EXPECT_REFUSED(30, vkg_op_layernorm_fwd(c, big, big, big, big, big, big, 4, 37),
                   "layernorm_fwd: one row of C=37 elements is more than the 30 one shader "
                   "dispatch may index");
    EXPECT_REFUSED(30, vkg_op_layernorm_bwd(c, big, big, big, big, big, big, big, big, 4, 37),
                   "layernorm_bwd: one row of C=37");
    EXPECT_REFUSED(30, vkg_op_xent_fwd_bwd(c, big, NULL, big, ids, 4, 20, 32, 1.0f),
                   "xent_fwd_bwd: one row of logits (Vp=32) is more than the 30");
    EXPECT_REFUSED(100, vkg_op_attention_fwd(c, big, big, big, 2, 11, 6, 3),
                   "attention_fwd: one batch needs T*3C = 198 elements of qkv (T=11 C=6), more "
                   "than the 100");
    EXPECT_REFUSED(100, vkg_op_attention_bwd(c, big, big, big, big, big, 2, 11, 6, 3, big),
                   "attention_bwd: one batch needs T*3C = 198");
    EXPECT_REFUSED(100, vkg_op_matmul_fwd(c, big, big, big, NULL, 8, 20, 101, big),
                   "matmul_fwd: one row of C=20 or OC=101 elements is more than the 100");
    EXPECT_REFUSED(100, vkg_op_matmul_bwd_dinp(c, big, big, big, 8, 101, 20),
                   "matmul_bwd_dinp: one row of C=101 or OC=20");
    EXPECT_REFUSED(
        100, vkg_op_matmul_bwd_dweight(c, big, NULL, big, big, 8, 101, 20, NULL),
        "matmul_bwd_dweight: a row of 101 elements (M=20 N=101 K=8) is more than the 100");
    EXPECT_REFUSED(100, vkg_op_transpose(c, big, big, 101, 20),
                   "transpose: a row of rows=101 or cols=20 elements is more than the 100");
    EXPECT_REFUSED(100, vkg_op_encoder_fwd(c, big, ids, big, big, 2, 4, 101),
                   "encoder_fwd: one row of C=101 elements is more than the 100");
    EXPECT_REFUSED(100, vkg_op_encoder_bwd_wpe(c, big, big, 2, 11, 10),
                   "encoder_bwd_wpe: one sequence of T*C = 110 elements (dwpe) is more than the "
                   "100");
    EXPECT_REFUSED(100, vkg_op_encoder_bwd(c, big, big, big, ids, 101, 1, 1),
                   "encoder_bwd: the B*T = 101 token ids are more than the 100");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

/* ---- VKG_MAX_DISPATCH_ELEMS -------------------------------------------------------------- */

/* Child mode (--env-probe): open the device, record fills of 5000 elements twice and print
 * "dispatches D" or "error STATUS: MESSAGE" for each; exit 0. */
static int env_probe(void)
{
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = getenv("VKGPT_DEVICE");
    vkg_device_t *dev = NULL;
    vkg_arena *arena = NULL;
    vkg_cmd *c = NULL;
    vkg_tensor x;
    if (vkg_device_create(&opts, &dev) || vkg_arena_create(dev, 5000 * 4 + 256, "probe", &arena) ||
        vkg_arena_alloc(arena, 5000 * 4, &x) || vkg_cmd_create(dev, &c) || vkg_cmd_begin(c)) {
        printf("setup failed: %s\n", vkg_error_message());
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        int before = vkg_cmd_dispatch_count(c);
        vkg_status st = vkg_op_fill(c, x, 5000, 1.0f);
        if (st == VKG_OK)
            printf("dispatches %d\n", vkg_cmd_dispatch_count(c) - before);
        else
            printf("error %s: %s\n", vkg_status_name(st), vkg_error_message());
    }
    vkg_cmd_end(c);
    vkg_cmd_destroy(&c);
    vkg_arena_destroy(&arena);
    vkg_device_destroy(&dev);
    return 0;
}

static char self_path[1024];

/* Run this program in probe mode with VKG_MAX_DISPATCH_ELEMS set to value (NULL: unset); its
 * output. */
static char *probe(const char *value)
{
    char cmd[1400];
    if (value)
        snprintf(cmd, sizeof cmd, "VKG_MAX_DISPATCH_ELEMS='%s' '%s' --env-probe 2>&1", value,
                 self_path);
    else
        snprintf(cmd, sizeof cmd, "env -u VKG_MAX_DISPATCH_ELEMS '%s' --env-probe 2>&1", self_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = calloc(1, 4096);
    assert_non_null(out);
    size_t n = fread(out, 1, 4095, p);
    out[n] = '\0';
    int rc = pclose(p);
    print_message("    VKG_MAX_DISPATCH_ELEMS=%s:\n%s", value ? value : "(unset)", out);
    assert_int_equal(rc, 0);
    return out;
}

static void test_limit_from_the_environment(void **state)
{
    (void)state;
    char *out = probe(NULL);
    assert_non_null(strstr(out, "dispatches 1\ndispatches 1\n"));
    free(out);
    out = probe("1000"); /* 5 chunks of 1000 */
    assert_non_null(strstr(out, "dispatches 5\ndispatches 5\n"));
    free(out);
    out = probe("2147483647");
    assert_non_null(strstr(out, "dispatches 1\n"));
    free(out);
    const char *bad[] = {"12abc", "0", "-5", "", " 100", "2147483648", "1e6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = probe(bad[i]);
        char want[128];
        snprintf(want, sizeof want, "fill: VKG_MAX_DISPATCH_ELEMS=\"%s\" is not a positive integer",
                 bad[i]);
        /* the same error from the first op and the next: the value is read once */
        const char *first = strstr(out, want);
        if (!first || !strstr(first + 1, want) || !strstr(out, "error VKG_ERR_INVALID_ARG"))
            fail_msg("VKG_MAX_DISPATCH_ELEMS=\"%s\": expected twice \"%s\", got:\n%s", bad[i], want,
                     out);
        free(out);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--env-probe"))
        return env_probe();
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 1;
    self_path[len] = '\0';
    vkg_test_rng_seed(&rng, 2031);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_elementwise_ops, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_sumsq, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_layernorm, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_xent, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_encoder, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_matmul, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_attention, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_row_beyond_the_limit, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_limit_from_the_environment),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
