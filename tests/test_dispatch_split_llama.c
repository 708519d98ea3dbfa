/* The shader index limit (src/ops/op_util.h) on the Llama-family ops (RMSNorm and its fused
 * residual form, SwiGLU, ReLU^2, RoPE), forward and backward, with the harness of
 * test_dispatch_split.c (dispatch_check.h): each op runs on one shape twice, with the default
 * limit and with a limit lowered below its tensors, from the same inputs uploaded afresh; every
 * output must be bitwise the same in both runs and written, the lowered run must record more
 * dispatches (blocks of rows or positions, chunks of elements), and RMSNorm's weight gradient,
 * which sums over the split rows in one dispatch, must build the wide variant of its kernel
 * (64-bit row addresses). QK-norm refuses a qkv beyond the limit (test_qknorm.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "dispatch_check.h"
#include "gpu_fixture.h"
#include "ops/ops.h"
#include "testutil.h"

static vkg_status rec_rms_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_rmsnorm_fwd(c, t[0], t[1], t[2], t[3], k->s[0], k->s[1], k->f[0]);
}

static vkg_status rec_res_rms_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_residual_rmsnorm_fwd(c, t[0], t[1], t[2], t[3], t[4], t[5], k->s[0], k->s[1],
                                       k->f[0]);
}

static vkg_status rec_rms_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_rmsnorm_bwd(c, t[0], t[1], t[2], t[3], t[4], t[5], k->s[0], k->s[1]);
}

static void test_rmsnorm(void **state)
{
    vkg_gpu *g = *state;
    const int N = 50, C = 37;
    const size_t NC = (size_t)N * C;
    op_case k = {.name = "rmsnorm_fwd",
                 .rec = rec_rms_fwd,
                 .s = {N, C},
                 .f = {1e-5f},
                 .limit = 400,
                 .split = 1};
    vkg_dc_add(&k, OUT, NC, NULL);
    vkg_dc_add(&k, OUT, N, NULL);
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -2, 3));
    vkg_dc_add(&k, IN, C, vkg_dc_rnd(C, 0.5f, 1.5f));
    vkg_dc_check(g, &k);

    k = (op_case){.name = "residual_rmsnorm_fwd",
                  .rec = rec_res_rms_fwd,
                  .s = {N, C},
                  .f = {1e-6f},
                  .limit = 400,
                  .split = 1};
    vkg_dc_add(&k, OUT, NC, NULL); /* res */
    vkg_dc_add(&k, OUT, NC, NULL); /* out */
    vkg_dc_add(&k, OUT, N, NULL);  /* rstd */
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -2, 3));
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -1, 1));
    vkg_dc_add(&k, IN, C, vkg_dc_rnd(C, 0.5f, 1.5f));
    vkg_dc_check(g, &k);

    k = (op_case){.name = "rmsnorm_bwd", .rec = rec_rms_bwd, .s = {N, C}, .limit = 400, .split = 1};
    vkg_dc_add(&k, OUT, NC, vkg_dc_rnd(NC, -1, 1)); /* dinp */
    vkg_dc_add(&k, OUT, C, vkg_dc_rnd(C, -1, 1));   /* dweight */
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -1, 1));  /* dout */
    vkg_dc_add(&k, IN, NC, vkg_dc_rnd(NC, -2, 3));  /* inp */
    vkg_dc_add(&k, IN, C, vkg_dc_rnd(C, 0.5f, 1.5f));
    vkg_dc_add(&k, IN, N, vkg_dc_rnd(N, 0.5f, 2.0f)); /* rstd */
    vkg_dc_expect_wide(&k, VKG_KERNEL_rmsnorm_bwd_dweight, 3);
    vkg_dc_check(g, &k);
}

static vkg_status rec_swiglu_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_swiglu_fwd(c, t[0], t[1], k->s[0], k->s[1]);
}

static vkg_status rec_swiglu_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_swiglu_bwd(c, t[0], t[1], t[2], k->s[0], k->s[1]);
}

static vkg_status rec_relu2_fwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_relu2_fwd(c, t[0], t[1], (size_t)k->s[0]);
}

static vkg_status rec_relu2_bwd(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    return vkg_op_relu2_bwd(c, t[0], t[1], t[2], (size_t)k->s[0]);
}

static void test_swiglu_relu2(void **state)
{
    vkg_gpu *g = *state;
    const int N = 41, F = 29;
    const size_t NF = (size_t)N * F;
    op_case k = {
        .name = "swiglu_fwd", .rec = rec_swiglu_fwd, .s = {N, F}, .limit = 300, .split = 1};
    vkg_dc_add(&k, OUT, NF, NULL);
    vkg_dc_add(&k, IN, 2 * NF, vkg_dc_rnd(2 * NF, -6, 6));
    vkg_dc_check(g, &k);

    k = (op_case){
        .name = "swiglu_bwd", .rec = rec_swiglu_bwd, .s = {N, F}, .limit = 300, .split = 1};
    vkg_dc_add(&k, OUT, 2 * NF, vkg_dc_rnd(2 * NF, -1, 1)); /* dh */
    vkg_dc_add(&k, IN, 2 * NF, vkg_dc_rnd(2 * NF, -6, 6));  /* h */
    vkg_dc_add(&k, IN, NF, vkg_dc_rnd(NF, -1, 1));          /* dout */
    vkg_dc_check(g, &k);

    k = (op_case){
        .name = "relu2_fwd", .rec = rec_relu2_fwd, .s = {(int)NF}, .limit = 300, .split = 1};
    vkg_dc_add(&k, OUT, NF, NULL);
    vkg_dc_add(&k, IN, NF, vkg_dc_rnd(NF, -3, 3));
    vkg_dc_check(g, &k);

    k = (op_case){
        .name = "relu2_bwd", .rec = rec_relu2_bwd, .s = {(int)NF}, .limit = 300, .split = 1};
    vkg_dc_add(&k, OUT, NF, vkg_dc_rnd(NF, -1, 1));
    vkg_dc_add(&k, IN, NF, vkg_dc_rnd(NF, -3, 3));
    vkg_dc_add(&k, IN, NF, vkg_dc_rnd(NF, -1, 1));
    vkg_dc_check(g, &k);
}

static vkg_status rec_rope(vkg_cmd *c, const vkg_tensor *t, const op_case *k)
{
    const int *s = k->s;
    if (s[5])
        return vkg_op_rope_bwd(c, t[0], t[1], s[0], s[1], s[2], s[3], s[4]);
    return vkg_op_rope_fwd(c, t[0], t[1], s[0], s[1], s[2], s[3], s[4]);
}

static void test_rope(void **state)
{
    vkg_gpu *g = *state;
    const int B = 3, T = 11, NH = 3, NKV = 1, D = 10;
    const size_t n = (size_t)B * T * (NH + 2 * NKV) * D;
    for (int bwd = 0; bwd < 2; bwd++) {
        op_case k = {.name = bwd ? "rope_bwd" : "rope_fwd",
                     .rec = rec_rope,
                     .s = {B, T, NH, NKV, D, bwd},
                     .limit = 4 * (NH + 2 * NKV) * D, /* blocks of 4 positions across sequences */
                     .split = 1};
        vkg_dc_add(&k, OUT, n, vkg_dc_rnd(n, -2, 2)); /* in place */
        float *f = malloc(D / 2 * sizeof *f);
        assert_non_null(f);
        for (int i = 0; i < D / 2; i++)
            f[i] = (float)pow(10000.0, -2.0 * i / D);
        vkg_dc_add(&k, IN, D / 2, f);
        vkg_dc_check(g, &k);
    }
}

int main(void)
{
    vkg_dc_seed(38);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rmsnorm, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_swiglu_relu2, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_rope, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
