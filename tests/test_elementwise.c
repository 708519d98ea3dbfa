/* Tests of the elementwise ops (src/ops/elementwise.c), fill and scale, against the CPU reference
 * (src/ref) on n = 1, odd sizes, GPT-2 124M's wte gradient (50304 x 768) and a size past one
 * dispatch's grid (65535 workgroups of 256), where the shader's grid-stride loop must cover the
 * rest. Every output must be finite and within ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND
 * (1e-5). fill's output is poisoned with NaN first; scale works in place on random values. The
 * fixture's NaN guard after each tensor must stay untouched (no write past n). */
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
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

static const size_t SIZES[] = {1, 13, 37 * 41, 50304 * 768, 65535 * 256 + 513};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static void test_fill(void **state)
{
    vkg_gpu *g = *state;
    const float values[] = {0.0f, -2.5f, 1e-30f};
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float v = values[s % 3], *ref = vkg_test_alloc(n);
        vkg_ref_fill(ref, v, n);
        vkg_tensor t = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_op_fill(g->cmd, t, n, v));
        vkg_gpu_run(g);
        if (v == 0.0f) { /* a zero reference has no relative error: compare exactly */
            float *got = vkg_test_alloc(n);
            vkg_gpu_download(g, t, got, n * sizeof *got);
            for (size_t i = 0; i < n; i++)
                if (got[i] != 0.0f)
                    fail_msg("fill n=%zu: element %zu is %g, not 0", n, i, (double)got[i]);
            free(got);
        } else {
            vkg_gpu_expect_ref(g, "fill", t, ref, n);
        }
        vkg_gpu_expect_guard(g, "fill", t);
        free(ref);
    }
}

static void test_scale(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 41);
    const float factors[] = {0.5f, -3.0f, 1.0f / 7.0f};
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float f = factors[s % 3], *x = vkg_test_random(&r, n, -4.0f, 4.0f);
        vkg_tensor t = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, t, 0, x, n * sizeof *x));
        vkg_ref_scale(x, f, n);
        VKG_ASSERT_OK(vkg_op_scale(g->cmd, t, n, f));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "scale", t, x, n);
        free(x);
    }
}

static void test_bad_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    vkg_tensor t = vkg_gpu_poisoned(g, 10);
    vkg_expect_invalid(vkg_op_fill(g->cmd, t, 11, 0.0f), "x");
    vkg_expect_invalid(vkg_op_scale(g->cmd, t, 11, 2.0f), "x");
    VKG_ASSERT_OK(vkg_op_fill(g->cmd, t, 0, 1.0f)); /* nothing to do is fine */
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fill, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_scale, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
