/* The shader index limit (src/ops/op_util.h) on the element-wise and row-wise ops of
 * src/ops/op_table.def (fill, scale, GELU, residual, AdamW, sum of squares, layernorm, softmax
 * cross-entropy) and the encoder, forward and backward: each runs on one shape twice, with the
 * default limit (2^31 - 1 elements) and with a limit lowered below its tensors so that it must
 * split (vkg__op_set_max_elems), from the same inputs uploaded afresh (dispatch_check.h).
 * Every output must be bitwise the same in both runs (memcmp), and written (outputs start as
 * NaN, or random where the op accumulates), and the lowered run must show how it kept its indices
 * within the limit:
 *  - ops split into blocks (element-wise and row-wise ops) record more dispatches than the default
 * run (vkg_cmd_dispatch_count);
 *  - ops that sum over the split dimension, and so keep one dispatch, build the wide variant of
 *    their kernel (64-bit row addresses: the specialization constant named per case is 1 in a
 *    pipeline of the device's kernel cache, which is emptied before the case and holds no such
 *    variant after the default run).
 * Matmul, gemm, transpose and attention: test_dispatch_split_matmul.c; rows beyond the limit and
 * VKG_MAX_DISPATCH_ELEMS: test_dispatch_limit.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "dispatch_check.h"
#include "gpu_fixture.h"
#include "ops/ops.h"
#include "testutil.h"

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
    vkg_dc_add(&k, OUT, n, NULL);
    vkg_dc_check(g, &k);

    k = (op_case){.name = "scale", .rec = rec_scale, .f = {-0.75f}, .limit = limit, .split = 1};
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -2, 2));
    vkg_dc_check(g, &k);

    k = (op_case){.name = "gelu_fwd", .rec = rec_gelu_fwd, .limit = limit, .split = 1};
    vkg_dc_add(&k, OUT, n, NULL);
    vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -4, 4));
    vkg_dc_check(g, &k);

    k = (op_case){.name = "gelu_bwd", .rec = rec_gelu_bwd, .limit = limit, .split = 1};
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -1, 1));
    vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -4, 4));
    vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -1, 1));
    vkg_dc_check(g, &k);

    for (int in_place = 0; in_place <= 1; in_place++) {
        k = (op_case){.name = in_place ? "residual_fwd (out = a)" : "residual_fwd",
                      .rec = rec_residual_fwd,
                      .s = {in_place},
                      .limit = limit,
                      .split = 1};
        vkg_dc_add(&k, OUT, n, in_place ? vkg_dc_rnd(n, -1, 1) : NULL);
        vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -1, 1));
        vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -1, 1));
        vkg_dc_check(g, &k);
    }

    k = (op_case){.name = "residual_bwd", .rec = rec_residual_bwd, .limit = limit, .split = 1};
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -1, 1));
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -1, 1));
    vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -1, 1));
    vkg_dc_check(g, &k);

    k = (op_case){.name = "adamw", .rec = rec_adamw, .limit = limit, .split = 1};
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -1, 1));       /* param */
    vkg_dc_add(&k, IN, n, vkg_dc_rnd(n, -1, 1));        /* grad */
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -0.1f, 0.1f)); /* m */
    vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, 0, 0.01f));    /* v */
    vkg_step_params *sp = calloc(1, sizeof *sp);
    assert_non_null(sp);
    *sp = (vkg_step_params){.lr = 1e-2f, .t = 3, .grad_clip = 1.0f, .unscale = 1.0f};
    vkg_dc_add(&k, IN, 4, sp);
    float *sumsq = malloc(sizeof *sumsq);
    assert_non_null(sumsq);
    *sumsq = 7.0f; /* norm above the clip: the gradient is scaled */
    vkg_dc_add(&k, IN, 1, sumsq);
    vkg_dc_check(g, &k);
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
    vkg_dc_add(&k, IN, ns[0], vkg_dc_rnd(ns[0], -1, 1));
    vkg_dc_add(&k, IN, ns[1], vkg_dc_rnd(ns[1], -1, 1));
    vkg_dc_add(&k, OUT, vkg_op_sumsq_scratch_elems(ns, 2), NULL); /* the partials, all written */
    vkg_dc_add(&k, OUT, 1, NULL);
    vkg_dc_expect_wide(&k, VKG_KERNEL_sumsq_partial, 3);
    vkg_dc_check(g, &k);
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
    vkg_dc_add(&k, OUT, NC, NULL);
    vkg_dc_add(&k, OUT, N, NULL);
    vkg_dc_add(&k, OUT, N, NULL);
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -2, 3));
    vkg_dc_add(&k, IN, C, vkg_dc_rnd(C, 0.5f, 1.5f));
    vkg_dc_add(&k, IN, C, vkg_dc_rnd(C, -0.5f, 0.5f));
    vkg_dc_check(g, &k);

    k = (op_case){
        .name = "layernorm_bwd", .rec = rec_ln_bwd, .s = {N, C}, .limit = 400, .split = 1};
    vkg_dc_add(&k, OUT, NC, vkg_dc_rnd(NC, -1, 1)); /* dinp */
    vkg_dc_add(&k, OUT, C, vkg_dc_rnd(C, -1, 1));   /* dweight */
    vkg_dc_add(&k, OUT, C, vkg_dc_rnd(C, -1, 1));   /* dbias */
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -1, 1));  /* dout */
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -2, 3));  /* inp */
    vkg_dc_add(&k, IN, C, vkg_dc_rnd(C, 0.5f, 1.5f));
    vkg_dc_add(&k, IN, N, vkg_dc_rnd(N, -0.5f, 0.5f)); /* mean */
    vkg_dc_add(&k, IN, N, vkg_dc_rnd(N, 0.5f, 2.0f));  /* rstd */
    vkg_dc_expect_wide(&k, VKG_KERNEL_layernorm_bwd_dparams, 3);
    vkg_dc_check(g, &k);
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
        vkg_dc_add(&k, OUT, (size_t)N, NULL);
        vkg_dc_add(&k, mode == 0 ? OUT : SCRATCH, (size_t)N * Vp, NULL);
        vkg_dc_add(&k, mode == 2 ? OUT : IN, (size_t)N * Vp, vkg_dc_rnd((size_t)N * Vp, -5, 5));
        vkg_dc_add(&k, IN, (size_t)N, vkg_dc_tokens((size_t)N, V));
        vkg_dc_check(g, &k);
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
        vkg_dc_add(&k, OUT, BT * C, NULL);
        vkg_dc_add(&k, IN, BT, vkg_dc_tokens(BT, V));
        vkg_dc_add(&k, IN, (size_t)V * C, vkg_dc_rnd((size_t)V * C, -1, 1));
        vkg_dc_add(&k, IN, (size_t)maxT * C, vkg_dc_rnd((size_t)maxT * C, -1, 1));
        vkg_dc_expect_wide(&k, VKG_KERNEL_encoder_fwd, 3);
        vkg_dc_check(g, &k);
    }
    for (int wpe_only = 0; wpe_only <= 1; wpe_only++) {
        op_case k = {.name = wpe_only ? "encoder_bwd_wpe" : "encoder_bwd",
                     .rec = wpe_only ? rec_enc_bwd_wpe : rec_enc_bwd,
                     .s = {B, T, C},
                     .limit = 200};
        vkg_dc_add(&k, wpe_only ? IN : OUT, (size_t)V * C,
                   vkg_dc_rnd((size_t)V * C, -1, 1));                         /* dwte */
        vkg_dc_add(&k, OUT, (size_t)T * C, vkg_dc_rnd((size_t)T * C, -1, 1)); /* dwpe */
        vkg_dc_add(&k, IN, BT * C, vkg_dc_rnd(BT * C, -1, 1));                /* dout */
        vkg_dc_add(&k, IN, BT, vkg_dc_tokens(BT, 7)); /* few distinct tokens: rows summed */
        if (!wpe_only)
            vkg_dc_expect_wide(&k, VKG_KERNEL_encoder_bwd_wte, 4);
        vkg_dc_expect_wide(&k, VKG_KERNEL_encoder_bwd_wpe, 3);
        vkg_dc_check(g, &k);
    }
}

int main(void)
{
    vkg_dc_seed(2031);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_elementwise_ops, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_sumsq, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_layernorm, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_xent, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_encoder, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
