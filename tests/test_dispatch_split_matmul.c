/* The shader index limit (src/ops/op_util.h) on the products and attention of
 * src/ops/op_table.def: matmul forward and backward (whole, dinp alone, dweight alone, a weight
 * beyond the limit, K chunks), gemm in every layout with default and explicit tiles, transpose,
 * and attention forward and backward in both of its kernel forms (VKG_ATTENTION_DIRECT and
 * _SHARED). Each runs on one shape twice, with the default limit (2^31 - 1 elements) and with a
 * limit lowered below its tensors so that it must split (vkg__op_set_max_elems), from the same
 * inputs uploaded afresh (dispatch_check.h).
 * Every output must be bitwise the same in both runs (memcmp), and written (outputs start as
 * NaN, or random where the op accumulates), and the lowered run must show how it kept its indices
 * within the limit:
 *  - ops split into blocks (matmul rows, attention) record more dispatches than the default run
 *    (vkg_cmd_dispatch_count);
 *  - ops that sum over the split dimension, and so keep one dispatch, build the wide variant of
 *    their kernel (64-bit row addresses: the specialization constant named per case is 1 in a
 *    pipeline of the device's kernel cache, which is emptied before the case and holds no such
 *    variant after the default run).
 * The element-wise and row-wise ops and the encoder: test_dispatch_split.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "dispatch_check.h"
#include "gpu_fixture.h"
#include "ops/ops.h"
#include "testutil.h"

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
    vkg_dc_add(&k, OUT, (size_t)N * OC, NULL);
    vkg_dc_add(&k, IN, (size_t)N * C, vkg_dc_rnd((size_t)N * C, -1, 1));
    vkg_dc_add(&k, IN, (size_t)OC * C, vkg_dc_rnd((size_t)OC * C, -0.5f, 0.5f));
    vkg_dc_add(&k, IN, (size_t)OC, vkg_dc_rnd((size_t)OC, -1, 1));
    vkg_dc_add(&k, SCRATCH, (size_t)N * C, NULL);
    if (wide)
        vkg_dc_expect_wide(&k, VKG_KERNEL_matmul, 9);
    vkg_dc_check(g, &k);
}

static void add_matmul_bwd(vkg_gpu *g, const char *name, int N, int C, int OC, int part, int bias,
                           size_t limit, int weight_wide)
{
    op_case k = {.name = name,
                 .rec = rec_mm_bwd,
                 .s = {N, C, OC, part, bias},
                 .limit = limit,
                 .split = part != 2};
    vkg_dc_add(&k, part != 2 ? OUT : IN, (size_t)N * C,
               vkg_dc_rnd((size_t)N * C, -1, 1)); /* dinp */
    vkg_dc_add(&k, part != 1 ? OUT : IN, (size_t)OC * C,
               vkg_dc_rnd((size_t)OC * C, -1, 1));                               /* dweight */
    vkg_dc_add(&k, bias ? OUT : IN, (size_t)OC, vkg_dc_rnd((size_t)OC, -1, 1));  /* dbias */
    vkg_dc_add(&k, IN, (size_t)N * OC, vkg_dc_rnd((size_t)N * OC, -1, 1));       /* dout */
    vkg_dc_add(&k, IN, (size_t)N * C, vkg_dc_rnd((size_t)N * C, -1, 1));         /* inp */
    vkg_dc_add(&k, IN, (size_t)OC * C, vkg_dc_rnd((size_t)OC * C, -0.5f, 0.5f)); /* weight */
    if (part != 1 || weight_wide)
        vkg_dc_expect_wide(&k, VKG_KERNEL_matmul, 9);
    if (part != 1 && bias)
        vkg_dc_expect_wide(&k, VKG_KERNEL_matmul_bwd_bias, 3);
    vkg_dc_check(g, &k);
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
                vkg_dc_add(&k, OUT, (size_t)M * N, NULL);
                vkg_dc_add(&k, IN, (size_t)M * K, vkg_dc_rnd((size_t)M * K, -1, 1));
                vkg_dc_add(&k, IN, (size_t)K * N, vkg_dc_rnd((size_t)K * N, -1, 1));
                vkg_dc_expect_wide(&k, VKG_KERNEL_matmul, 9);
                vkg_dc_check(g, &k);
                free(name);
            }

    op_case k = {.name = "transpose", .rec = rec_transpose, .s = {50, 37}, .limit = 500};
    vkg_dc_add(&k, OUT, 50 * 37, NULL);
    vkg_dc_add(&k, IN, 50 * 37, vkg_dc_rnd(50 * 37, -1, 1));
    vkg_dc_expect_wide(&k, VKG_KERNEL_transpose, 3);
    vkg_dc_check(g, &k);
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
        vkg_dc_add(&k, OUT, nout, NULL);  /* out */
        vkg_dc_add(&k, OUT, nstat, NULL); /* lse */
        vkg_dc_add(&k, IN, nqkv, vkg_dc_rnd(nqkv, -2, 2));
        vkg_dc_check(g, &k);

        snprintf(name, 96, "attention_bwd B=%d T=%d C=%d NH=%d %s", B, T, C, NH, form);
        k = (op_case){.name = name,
                      .rec = rec_att_bwd,
                      .s = {B, T, C, NH},
                      .limit = (size_t)shapes[s][4],
                      .split = 1};
        vkg_dc_add(&k, OUT, nqkv, vkg_dc_rnd(nqkv, -1, 1)); /* dqkv, accumulated */
        vkg_dc_add(&k, IN, nout, vkg_dc_rnd(nout, -1, 1));  /* dout */
        vkg_dc_add(&k, IN, nqkv, vkg_dc_rnd(nqkv, -2, 2));  /* qkv */
        vkg_dc_add(&k, IN, nout, vkg_dc_rnd(nout, -1, 1));  /* out */
        vkg_dc_add(&k, IN, nstat, vkg_dc_rnd(nstat, 0, 2)); /* lse */
        vkg_dc_add(&k, SCRATCH, nstat, NULL);               /* delta */
        vkg_dc_check(g, &k);
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

int main(void)
{
    vkg_dc_seed(2031);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matmul, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_attention, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
