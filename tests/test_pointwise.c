/* Tests of the pointwise ops (src/ops/pointwise.c): GELU (tanh approximation) and the residual
 * add, forward and backward, against the CPU reference (src/ref) on random inputs of awkward
 * sizes. Every output must be finite and within a relative L2 error
 * ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND (1e-5). Forward outputs are poisoned with NaN
 * first; backward outputs start from random values that the reference starts from too, so
 * accumulating is checked against overwriting. Backward passes must be bitwise reproducible, and
 * tensors that are too small must be refused by name. */
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

/* n = 1, odd sizes, and GPT-2's fc activation at B=2, T=64, 4C=3072. */
static const size_t SIZES[] = {1, 13, 37 * 41, 2 * 64 * 3072};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* GELU inputs over [-6, 6] (both tails) with exact zeros and large values mixed in. */
static float *gelu_inputs(vkg_test_rng *r, size_t n)
{
    float *x = vkg_test_random(r, n, -6.0f, 6.0f);
    static const float special[] = {0.0f, -0.0f, 30.0f, -30.0f, 1e-4f, -1e-4f};
    for (size_t i = 0; i < n; i += 7)
        x[i] = special[(i / 7) % 6];
    return x;
}

static void test_gelu_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 11);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float *x = gelu_inputs(&r, n), *ref = vkg_test_alloc(n);
        vkg_ref_gelu_fwd(ref, x, n);
        vkg_tensor tx = vkg_gpu_upload(g, x, n * sizeof *x), out = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, out, tx, n));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "gelu_fwd out", out, ref, n);
        free(x);
        free(ref);
    }
}

static void test_gelu_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 12);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float *x = gelu_inputs(&r, n), *dout = vkg_test_random(&r, n, -1.0f, 1.0f);
        float *dinp = vkg_test_random(&r, n, -1.0f, 1.0f);
        vkg_tensor tx = vkg_gpu_upload(g, x, n * 4), td = vkg_gpu_upload(g, dout, n * 4);
        vkg_tensor t1 = vkg_gpu_upload(g, dinp, n * 4), t2 = vkg_gpu_upload(g, dinp, n * 4);
        vkg_ref_gelu_bwd(dinp, x, dout, n);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_gelu_bwd(g->cmd, t1, tx, td, n));
        VKG_ASSERT_OK(vkg_op_gelu_bwd(g->cmd, t2, tx, td, n));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "gelu_bwd dinp", t1, dinp, n);
        float *a = vkg_test_alloc(n), *b = vkg_test_alloc(n);
        vkg_gpu_download(g, t1, a, n * 4);
        vkg_gpu_download(g, t2, b, n * 4);
        assert_memory_equal(a, b, n * 4);
        free(a);
        free(b);
        free(x);
        free(dout);
        free(dinp);
    }
}

static void test_residual_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 13);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float *a = vkg_test_random(&r, n, -2.0f, 2.0f), *b = vkg_test_random(&r, n, -2.0f, 2.0f);
        float *ref = vkg_test_alloc(n);
        vkg_ref_residual_fwd(ref, a, b, n);
        vkg_tensor ta = vkg_gpu_upload(g, a, n * 4), tb = vkg_gpu_upload(g, b, n * 4);
        vkg_tensor out = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, out, ta, tb, n));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "residual_fwd out", out, ref, n);
        /* in place: a = a + b */
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, ta, ta, tb, n));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "residual_fwd in place", ta, ref, n);
        free(a);
        free(b);
        free(ref);
    }
}

static void test_residual_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 14);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float *dout = vkg_test_random(&r, n, -1.0f, 1.0f);
        float *da = vkg_test_random(&r, n, -1.0f, 1.0f), *db = vkg_test_random(&r, n, -1.0f, 1.0f);
        vkg_tensor td = vkg_gpu_upload(g, dout, n * 4);
        vkg_tensor ta1 = vkg_gpu_upload(g, da, n * 4), tb1 = vkg_gpu_upload(g, db, n * 4);
        vkg_tensor ta2 = vkg_gpu_upload(g, da, n * 4), tb2 = vkg_gpu_upload(g, db, n * 4);
        vkg_ref_residual_bwd(da, db, dout, n);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_residual_bwd(g->cmd, ta1, tb1, td, n));
        VKG_ASSERT_OK(vkg_op_residual_bwd(g->cmd, ta2, tb2, td, n));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "residual_bwd da", ta1, da, n);
        vkg_gpu_expect_ref(g, "residual_bwd db", tb1, db, n);
        float *x = vkg_test_alloc(n), *y = vkg_test_alloc(n);
        vkg_gpu_download(g, ta1, x, n * 4);
        vkg_gpu_download(g, ta2, y, n * 4);
        assert_memory_equal(x, y, n * 4);
        vkg_gpu_download(g, tb1, x, n * 4);
        vkg_gpu_download(g, tb2, y, n * 4);
        assert_memory_equal(x, y, n * 4);
        free(x);
        free(y);
        free(dout);
        free(da);
        free(db);
    }
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 100 };
    vkg_tensor ok = vkg_gpu_poisoned(g, N), small = vkg_gpu_poisoned(g, N - 1);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_gelu_fwd(c, small, ok, N), "gelu_fwd: tensor out holds 99 elements");
    vkg_expect_invalid(vkg_op_gelu_fwd(c, ok, small, N), "gelu_fwd: tensor inp");
    vkg_expect_invalid(vkg_op_gelu_bwd(c, small, ok, ok, N), "gelu_bwd: tensor dinp");
    vkg_expect_invalid(vkg_op_gelu_bwd(c, ok, small, ok, N), "gelu_bwd: tensor inp");
    vkg_expect_invalid(vkg_op_gelu_bwd(c, ok, ok, small, N), "gelu_bwd: tensor dout");
    vkg_expect_invalid(vkg_op_residual_fwd(c, small, ok, ok, N), "residual_fwd: tensor out");
    vkg_expect_invalid(vkg_op_residual_fwd(c, ok, small, ok, N), "residual_fwd: tensor a");
    vkg_expect_invalid(vkg_op_residual_fwd(c, ok, ok, small, N), "residual_fwd: tensor b");
    vkg_expect_invalid(vkg_op_residual_bwd(c, small, ok, ok, N), "residual_bwd: tensor da");
    vkg_expect_invalid(vkg_op_residual_bwd(c, ok, small, ok, N), "residual_bwd: tensor db");
    vkg_expect_invalid(vkg_op_residual_bwd(c, ok, ok, small, N), "residual_bwd: tensor dout");
    /* Beyond the shader index limit the op splits: only the tensors' sizes can refuse it. */
    vkg_expect_invalid(vkg_op_gelu_fwd(c, ok, ok, (size_t)1 << 32),
                       "gelu_fwd: tensor out holds 100 elements, the shape needs 4294967296");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gelu_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_gelu_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_residual_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_residual_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
