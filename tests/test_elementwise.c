/* Tests of the elementwise ops (src/ops/elementwise.c), fill, scale and the cast to bf16, against
 * the CPU reference
 * (src/ref) on n = 1, odd sizes, GPT-2 124M's wte gradient (50304 x 768) and a size past one
 * dispatch's grid (65535 workgroups of 256), where the shader's grid-stride loop must cover the
 * rest. Every output must be finite and within ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND
 * (1e-5). fill's output is poisoned with NaN first; scale works in place on random values. The
 * fixture's NaN guard after each tensor must stay untouched (no write past n). The cast to bf16
 * must match the reference's rounding (src/ref/bf16.c) bit for bit on n = 1, odd sizes and one
 * past a dispatch's grid, special values (ties both
 * ways, NaN, infinities, -0, a value that rounds to infinity, subnormals) included, with the
 * high half of an odd n's last word 0. */
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

/* x with the special values at its start (n >= 10 only). */
static void put_specials(float *x, size_t n)
{
    const uint32_t bits[] = {
        0x3F808000u, /* 1 + 2^-8: a tie, rounds down to the even 1.0 */
        0x3F818000u, /* a tie that rounds up to the even 0x3F82 */
        0x3F808001u, /* just above a tie: up */
        0x7FC00000u, /* NaN */
        0x7F800001u, /* signalling NaN: stays NaN (quiet) */
        0x7F800000u, /* +inf */
        0xFF800000u, /* -inf */
        0x80000000u, /* -0 */
        0x7F7FFFFFu, /* FLT_MAX: rounds to +inf */
        0x00018000u, /* a subnormal tie */
    };
    for (size_t i = 0; i < sizeof bits / sizeof bits[0] && i < n; i++)
        memcpy(&x[i], &bits[i], sizeof x[i]);
}

static void test_cast_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 43);
    /* The last: more words than one dispatch's grid (65535 workgroups of 256) covers. */
    const size_t sizes[] = {1, 13, 37 * 41, 2 * 65535 * 256 + 7};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s], words = (n + 1) / 2;
        float *x = vkg_test_random(&r, n, -1e3f, 1e3f);
        if (n >= 10)
            put_specials(x, n);
        vkg_tensor in = vkg_gpu_upload(g, x, n * sizeof *x);
        vkg_tensor out = vkg_gpu_poisoned(g, words), guard = out;
        out.dtype = VKG_BF16;
        VKG_ASSERT_OK(vkg_op_cast_bf16(g->cmd, out, in, n));
        vkg_gpu_run(g);
        uint16_t *got = malloc(words * 4);
        assert_non_null(got);
        vkg_gpu_download(g, guard, got, words * 4);
        for (size_t i = 0; i < 2 * words; i++) {
            uint16_t want = i < n ? vkg_ref_bf16_bits(x[i]) : 0;
            if (got[i] != want)
                fail_msg("cast_bf16 n=%zu: element %zu of %g is 0x%04x, want 0x%04x", n, i,
                         i < n ? (double)x[i] : 0.0, got[i], want);
        }
        vkg_gpu_expect_guard(g, "cast_bf16", guard);
        free(got), free(x);
    }
}

static void test_bad_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    vkg_tensor t = vkg_gpu_poisoned(g, 10);
    vkg_expect_invalid(vkg_op_fill(g->cmd, t, 11, 0.0f), "x");
    vkg_expect_invalid(vkg_op_scale(g->cmd, t, 11, 2.0f), "x");
    VKG_ASSERT_OK(vkg_op_fill(g->cmd, t, 0, 1.0f));                /* nothing to do is fine */
    vkg_expect_invalid(vkg_op_cast_bf16(g->cmd, t, t, 4), "bf16"); /* out must be bf16 */
    vkg_tensor h = t;
    h.dtype = VKG_BF16;
    vkg_expect_invalid(vkg_op_cast_bf16(g->cmd, h, t, 21), "out"); /* 20 bf16 values fit */
    vkg_expect_invalid(vkg_op_fill(g->cmd, h, 4, 0.0f), "bf16");   /* fp32-only ops refuse */
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fill, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_scale, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_cast_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
