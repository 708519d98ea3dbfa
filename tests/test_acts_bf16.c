/* The kernels that store or load bf16 activations (mixed precision): gelu_fwd and layernorm_fwd
 * with a bf16 output, transpose with a bf16 input (the register matmul's staging of a bf16 input).
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

#include "gpu_fixture.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

/* A bf16 tensor of n values cast on the device from x. */
static vkg_tensor bf16_of(vkg_gpu *g, const float *x, size_t n)
{
    vkg_tensor t32 = vkg_gpu_upload(g, x, n * 4), t16 = vkg_gpu_poisoned(g, (n + 1) / 2);
    t16.dtype = VKG_BF16;
    VKG_ASSERT_OK(vkg_op_cast_bf16(g->cmd, t16, t32, n));
    return t16;
}

/* A poisoned bf16 output of n values, and its fp32 view (words) for downloads and the guard. */
static vkg_tensor bf16_out(vkg_gpu *g, size_t n, vkg_tensor *words)
{
    *words = vkg_gpu_poisoned(g, (n + 1) / 2);
    vkg_tensor t = *words;
    t.dtype = VKG_BF16;
    return t;
}

/* The n bf16 values of words, widened. */
static float *download_bf16(vkg_gpu *g, vkg_tensor words, size_t n)
{
    uint16_t *h = malloc((n + 1) / 2 * 4);
    float *x = vkg_test_alloc(n);
    assert_non_null(h);
    vkg_gpu_download(g, words, h, (n + 1) / 2 * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = vkg_ref_bf16_widen(h[i]);
    free(h);
    return x;
}

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

static void test_gelu_fwd_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 11);
    const size_t sizes[] = {1, 7, 1001, 256 * 3072 + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = vkg_test_random(&r, n, -6.0f, 6.0f), *ref = vkg_test_alloc(n);
        float *f32 = vkg_test_alloc(n);
        vkg_ref_gelu_fwd(ref, x, n);
        vkg_tensor in = vkg_gpu_upload(g, x, n * 4), words, o32 = vkg_gpu_poisoned(g, n);
        vkg_tensor o16 = bf16_out(g, n, &words);
        VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, o16, in, n));
        VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, o32, in, n));
        vkg_gpu_run(g);
        vkg_gpu_download(g, o32, f32, n * 4);
        float *got = download_bf16(g, words, n);
        char what[64];
        snprintf(what, sizeof what, "gelu_fwd bf16 out n=%zu", n);
        expect_bf16(what, got, ref, f32, n, 1e-5);
        vkg_gpu_expect_guard(g, what, words);
        free(x), free(ref), free(f32), free(got);
    }
}

static void test_layernorm_fwd_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 12);
    const int shapes[][2] = {{1, 2}, {3, 38}, {37, 256}, {256, 768}}; /* N, C (even) */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], C = shapes[s][1];
        size_t nc = (size_t)N * C;
        float *x = vkg_test_random(&r, nc, -3.0f, 3.0f), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
        float *b = vkg_test_random(&r, C, -0.5f, 0.5f), *ref = vkg_test_alloc(nc);
        float *mean = vkg_test_alloc(N), *rstd = vkg_test_alloc(N), *f32 = vkg_test_alloc(nc);
        vkg_ref_layernorm_fwd(ref, mean, rstd, x, w, b, N, C);
        vkg_tensor tx = vkg_gpu_upload(g, x, nc * 4), tw = vkg_gpu_upload(g, w, C * 4);
        vkg_tensor tb = vkg_gpu_upload(g, b, C * 4), words, o16 = bf16_out(g, nc, &words);
        vkg_tensor o32 = vkg_gpu_poisoned(g, nc), tm = vkg_gpu_poisoned(g, N);
        vkg_tensor tr = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, o16, tm, tr, tx, tw, tb, N, C));
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, o32, tm, tr, tx, tw, tb, N, C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "layernorm_fwd (bf16 run) mean", tm, mean, N);
        vkg_gpu_expect_ref(g, "layernorm_fwd (bf16 run) rstd", tr, rstd, N);
        vkg_gpu_download(g, o32, f32, nc * 4);
        float *got = download_bf16(g, words, nc);
        char what[64];
        snprintf(what, sizeof what, "layernorm_fwd bf16 out N=%d C=%d", N, C);
        expect_bf16(what, got, ref, f32, nc, 1e-4);
        vkg_gpu_expect_guard(g, what, words);
        free(x), free(w), free(b), free(ref), free(mean), free(rstd), free(f32), free(got);
    }
    /* bf16 rows are whole words: an odd C is refused */
    vkg_tensor words, o16 = bf16_out(g, 9, &words), t = vkg_gpu_poisoned(g, 9);
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
        vkg_tensor in = bf16_of(g, x, n), out = vkg_gpu_poisoned(g, n);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gelu_fwd_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_layernorm_fwd_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_transpose_bf16_in, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
