/* The kernels that store or load bf16 activations (mixed precision): gelu_fwd and layernorm_fwd
 * with a bf16 output, transpose with a bf16 input (the register matmul's staging of a bf16 input),
 * gelu_fwd and gelu_bwd with a bf16 input, residual_fwd and the fused residual + layernorm with
 * a bf16 b (these: bitwise the fp32 kernels on the widened values, see their tests; also under a
 * lowered shader index limit, in chunks and blocks of rows). The matmul
 * kernels' bf16 out is tests/test_matmul_bf16.c's, attention's tests/test_attention_bf16.c's.
 * Bounds, per element:
 *  - gelu_fwd, layernorm_fwd: the bf16 output against the fp32 CPU reference,
 *        |got - ref| <= 2^-8 |ref| + 1e-5 (1e-4 for layernorm's normalised values)
 *    rounding to nearest costs at most 2^-9 |ref| (half a unit of bf16's 8-bit significand); the
 *    bound doubles it for the fp32 computation's own error (the fp32 kernels' tests hold them to
 *    1e-5 relative), plus an absolute floor for values near 0;
 *  - and against the same kernel's fp32 output rounded on the CPU: within one bf16 unit (the two
 *    paths compute the same fp32 expression; a compiler may contract it differently);
 *  - transpose: exactly the widened bf16 input.
 * Awkward sizes (odd n, rows not a multiple of the workgroup), outputs poisoned first, guards
 * after each tensor untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

/* got against ref (bound above) and against fp32 (one bf16 unit of its rounding). */
static void expect_bf16(const char *what, const float *got, const float *ref, const float *fp32,
                        size_t n, double floor)
{
    for (size_t i = 0; i < n; i++) {
        double r = ref[i], tol = ldexp(fabs(r), -8) + floor;
        double f = vkg_ref_bf16_widen(vkg_ref_bf16_bits(fp32[i]));
        if (!(fabs((double)got[i] - r) <= tol))
            fail_msg("%s: element %zu is %.9g, the reference %.9g (bound %.3g)", what, i,
                     (double)got[i], r, tol);
        if (!(fabs((double)got[i] - f) <= ldexp(fabs(f), -7)))
            fail_msg("%s: element %zu is %.9g, the fp32 kernel's rounded %.9g", what, i,
                     (double)got[i], f);
    }
}

/* Element counts of the flat ops: odd ones (a half-filled last word) and GPT-2's fc width. */
static const size_t flat_sizes[] = {1, 7, 1001, 256 * 3072 + 3};

static void test_gelu_fwd_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 11);
    for (size_t s = 0; s < sizeof flat_sizes / sizeof flat_sizes[0]; s++) {
        size_t n = flat_sizes[s];
        float *x = vkg_test_random(&r, n, -6.0f, 6.0f), *ref = vkg_test_alloc(n);
        float *f32 = vkg_test_alloc(n);
        vkg_ref_gelu_fwd(ref, x, n);
        vkg_tensor in = vkg_gpu_upload(g, x, n * 4), o32 = vkg_gpu_poisoned(g, n);
        vkg_tensor o16 = vkg_gpu_bf16_poisoned(g, n);
        VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, o16, in, n));
        VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, o32, in, n));
        vkg_gpu_run(g);
        vkg_gpu_download(g, o32, f32, n * 4);
        float *got = vkg_gpu_download_bf16(g, o16, n);
        char what[64];
        snprintf(what, sizeof what, "gelu_fwd bf16 out n=%zu", n);
        expect_bf16(what, got, ref, f32, n, 1e-5);
        vkg_gpu_expect_guard(g, what, o16);
        free(x), free(ref), free(f32), free(got);
    }
}

/* Rows N x channels C (even: bf16 rows are whole words) of the row-wise ops. */
static const int row_shapes[][2] = {{1, 2}, {3, 38}, {37, 256}, {256, 768}};

static void test_layernorm_fwd_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 12);
    for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
        int N = row_shapes[s][0], C = row_shapes[s][1];
        size_t nc = (size_t)N * C;
        float *x = vkg_test_random(&r, nc, -3.0f, 3.0f), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
        float *b = vkg_test_random(&r, C, -0.5f, 0.5f), *ref = vkg_test_alloc(nc);
        float *mean = vkg_test_alloc(N), *rstd = vkg_test_alloc(N), *f32 = vkg_test_alloc(nc);
        vkg_ref_layernorm_fwd(ref, mean, rstd, x, w, b, N, C);
        vkg_tensor tx = vkg_gpu_upload(g, x, nc * 4), tw = vkg_gpu_upload(g, w, C * 4);
        vkg_tensor tb = vkg_gpu_upload(g, b, C * 4), o16 = vkg_gpu_bf16_poisoned(g, nc);
        vkg_tensor o32 = vkg_gpu_poisoned(g, nc), tm = vkg_gpu_poisoned(g, N);
        vkg_tensor tr = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, o16, tm, tr, tx, tw, tb, N, C));
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, o32, tm, tr, tx, tw, tb, N, C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "layernorm_fwd (bf16 run) mean", tm, mean, N);
        vkg_gpu_expect_ref(g, "layernorm_fwd (bf16 run) rstd", tr, rstd, N);
        vkg_gpu_download(g, o32, f32, nc * 4);
        float *got = vkg_gpu_download_bf16(g, o16, nc);
        char what[64];
        snprintf(what, sizeof what, "layernorm_fwd bf16 out N=%d C=%d", N, C);
        expect_bf16(what, got, ref, f32, nc, 1e-4);
        vkg_gpu_expect_guard(g, what, o16);
        free(x), free(w), free(b), free(ref), free(mean), free(rstd), free(f32), free(got);
    }
    /* bf16 rows are whole words: an odd C is refused */
    vkg_tensor o16 = vkg_gpu_bf16_poisoned(g, 9), t = vkg_gpu_poisoned(g, 9);
    vkg_expect_invalid(vkg_op_layernorm_fwd(g->cmd, o16, t, t, t, t, t, 3, 3), "even C");
}

static void test_transpose_bf16_in(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 13);
    const int shapes[][2] = {{1, 1}, {3, 5}, {65, 33}, {256, 768}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int R = shapes[s][0], C = shapes[s][1];
        size_t n = (size_t)R * C;
        float *x = vkg_test_random(&r, n, -10.0f, 10.0f), *want = vkg_test_alloc(n);
        float *got = vkg_test_alloc(n);
        vkg_tensor in = vkg_gpu_bf16_of(g, x, n), out = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_op_transpose(g->cmd, out, in, R, C));
        vkg_gpu_run(g);
        vkg_ref_bf16_round(x, n);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++)
                want[(size_t)j * R + i] = x[(size_t)i * C + j];
        vkg_gpu_download(g, out, got, n * 4);
        assert_memory_equal(got, want, n * 4);
        vkg_gpu_expect_guard(g, "transpose bf16 in", out);
        free(x), free(want), free(got);
    }
}

/* Fail naming what unless the n floats of a and b are bitwise equal. */
static void expect_same_bits(vkg_gpu *g, const char *what, vkg_tensor a, vkg_tensor b, size_t n)
{
    float *x = vkg_test_alloc(n), *y = vkg_test_alloc(n);
    vkg_gpu_download(g, a, x, n * 4);
    vkg_gpu_download(g, b, y, n * 4);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], 4) != 0)
            fail_msg("%s: element %zu is %.9g, the fp32 kernel's on the widened input %.9g", what,
                     i, (double)x[i], (double)y[i]);
    free(x), free(y);
}

/* gelu_fwd and gelu_bwd reading a bf16 input (the fc product stored bf16): bitwise the fp32
 * kernels on the widened values (an fp32 and a bf16 output for gelu_fwd), and gelu_bwd against
 * the CPU reference on them within 1e-4 relative L2 (the fp32 kernel's own accuracy is
 * test_pointwise's; a lone element reaches 1.04e-5 here, so the fp32 bound of 1e-5 is loosened
 * tenfold: an input read from the wrong half of its word would still be caught). */
static void check_gelu_in(vkg_gpu *g, vkg_test_rng *r, size_t n)
{
    float *x = vkg_test_random(r, n, -6.0f, 6.0f), *dout = vkg_test_random(r, n, -1, 1);
    float *d0 = vkg_test_random(r, n, -1.0f, 1.0f);
    vkg_tensor x16 = vkg_gpu_bf16_of(g, x, n);
    vkg_gpu_run(g);
    vkg_tensor x32 = vkg_gpu_bf16_widened(g, x16, n), td = vkg_gpu_upload(g, dout, n * 4);
    vkg_tensor o16 = vkg_gpu_poisoned(g, n), o32 = vkg_gpu_poisoned(g, n);
    vkg_tensor h16 = vkg_gpu_bf16_poisoned(g, n), h32 = vkg_gpu_bf16_poisoned(g, n);
    vkg_tensor di16 = vkg_gpu_upload(g, d0, n * 4), di32 = vkg_gpu_upload(g, d0, n * 4);
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, o16, x16, n));
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, o32, x32, n));
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, h16, x16, n));
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, h32, x32, n));
    VKG_ASSERT_OK(vkg_op_gelu_bwd(g->cmd, di16, x16, td, n));
    VKG_ASSERT_OK(vkg_op_gelu_bwd(g->cmd, di32, x32, td, n));
    vkg_gpu_run(g);
    char what[64];
    snprintf(what, sizeof what, "gelu bf16 in n=%zu", n);
    expect_same_bits(g, what, o16, o32, n);
    expect_same_bits(g, what, h16, h32, (n + 1) / 2);
    expect_same_bits(g, what, di16, di32, n);
    vkg_ref_bf16_round(x, n);
    vkg_ref_gelu_bwd(d0, x, dout, n);
    vkg_gpu_expect(g, "gelu_bwd bf16 inp", di16, d0, n, 1e-4);
    vkg_gpu_expect_guard(g, what, o16);
    vkg_gpu_expect_guard(g, what, h16);
    free(x), free(dout), free(d0);
}

static void test_gelu_bf16_in(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 14);
    for (size_t s = 0; s < sizeof flat_sizes / sizeof flat_sizes[0]; s++)
        check_gelu_in(g, &r, flat_sizes[s]);
    vkg__op_set_max_elems(1000); /* chunks of 1000 elements: bf16 offsets of whole words */
    check_gelu_in(g, &r, 10001);
    vkg__op_set_max_elems(0);
}

/* The residual add and the fused residual + layernorm with b bf16 (a projection's output stored
 * bf16): res = a + widened b exactly (one fp32 add), and the layernorm's outputs bitwise those of
 * the fp32 op on the widened b; an odd C is refused. */
static void check_residual_b(vkg_gpu *g, vkg_test_rng *r, int N, int C)
{
    size_t nc = (size_t)N * C;
    float *a = vkg_test_random(r, nc, -3.0f, 3.0f), *b = vkg_test_random(r, nc, -3, 3);
    float *w = vkg_test_random(r, C, 0.5f, 1.5f), *bias = vkg_test_random(r, C, -1, 1);
    float *sum = vkg_test_alloc(nc), *got = vkg_test_alloc(nc);
    vkg_tensor ta = vkg_gpu_upload(g, a, nc * 4), b16 = vkg_gpu_bf16_of(g, b, nc);
    vkg_tensor tw = vkg_gpu_upload(g, w, C * 4), tb = vkg_gpu_upload(g, bias, C * 4);
    vkg_gpu_run(g);
    vkg_tensor b32 = vkg_gpu_bf16_widened(g, b16, nc), res16 = vkg_gpu_poisoned(g, nc);
    vkg_tensor res32 = vkg_gpu_poisoned(g, nc), sum16 = vkg_gpu_poisoned(g, nc);
    vkg_tensor o16 = vkg_gpu_poisoned(g, nc), o32 = vkg_gpu_poisoned(g, nc);
    vkg_tensor st16 = vkg_gpu_poisoned(g, 2 * (size_t)N), st32 = vkg_gpu_poisoned(g, 2 * N);
    vkg_tensor m16 = vkg_tensor_view(st16, 0, 4 * (size_t)N);
    vkg_tensor r16 = vkg_tensor_view(st16, 4 * (size_t)N, 4 * (size_t)N);
    vkg_tensor m32 = vkg_tensor_view(st32, 0, 4 * (size_t)N);
    vkg_tensor r32 = vkg_tensor_view(st32, 4 * (size_t)N, 4 * (size_t)N);
    VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, sum16, ta, b16, nc));
    VKG_ASSERT_OK(
        vkg_op_residual_layernorm_fwd(g->cmd, res16, o16, m16, r16, ta, b16, tw, tb, N, C));
    VKG_ASSERT_OK(
        vkg_op_residual_layernorm_fwd(g->cmd, res32, o32, m32, r32, ta, b32, tw, tb, N, C));
    vkg_gpu_run(g);
    vkg_ref_bf16_round(b, nc);
    for (size_t i = 0; i < nc; i++)
        sum[i] = a[i] + b[i];
    char what[64];
    snprintf(what, sizeof what, "residual bf16 b N=%d C=%d", N, C);
    vkg_gpu_download(g, sum16, got, nc * 4);
    assert_memory_equal(got, sum, nc * 4);
    vkg_gpu_download(g, res16, got, nc * 4);
    assert_memory_equal(got, sum, nc * 4);
    expect_same_bits(g, what, o16, o32, nc);
    expect_same_bits(g, what, st16, st32, 2 * (size_t)N);
    vkg_gpu_expect_guard(g, what, sum16);
    vkg_gpu_expect_guard(g, what, o16);
    free(a), free(b), free(w), free(bias), free(sum), free(got);
}

static void test_residual_bf16_b(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 15);
    for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++)
        check_residual_b(g, &r, row_shapes[s][0], row_shapes[s][1]);
    vkg__op_set_max_elems(2000); /* blocks of 7 rows of 256 (layernorm), chunks of 1024 */
    check_residual_b(g, &r, 37, 256);
    vkg__op_set_max_elems(0);
    vkg_tensor b16 = vkg_gpu_bf16_poisoned(g, 9), t = vkg_gpu_poisoned(g, 9);
    vkg_expect_invalid(vkg_op_residual_layernorm_fwd(g->cmd, t, t, t, t, t, b16, t, t, 3, 3),
                       "even C");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gelu_fwd_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_layernorm_fwd_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_transpose_bf16_in, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_gelu_bf16_in, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_residual_bf16_b, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
