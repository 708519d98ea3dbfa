/* The shader checker must bite. A correct GPU result is compared against deliberately corrupted
 * references (one element off by 5%, a forgotten bias, a transposed weight) and the
 * comparison must fail and point at the right element; an output the shader never writes stays
 * NaN (poisoned) and must be reported as non-finite; a write past an output's end must be caught
 * by the NaN guard after it. The uncorrupted reference must pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

enum { N = 23, C = 17, OC = 11 };

typedef struct run {
    float inp[N * C], w[OC * C], b[OC], gpu[N * OC], ref[N * OC];
} run;

static void gpu_matmul(vkg_gpu *g, run *r)
{
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, 5);
    vkg_test_fill_uniform(&rng, r->inp, N * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&rng, r->w, OC * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&rng, r->b, OC, -1.0f, 1.0f);
    vkg_tensor ti = vkg_gpu_upload(g, r->inp, sizeof r->inp),
               tw = vkg_gpu_upload(g, r->w, sizeof r->w);
    vkg_tensor tb = vkg_gpu_upload(g, r->b, sizeof r->b), out = vkg_gpu_poisoned(g, N * OC);
    vkg_tensor scratch = vkg_gpu_poisoned(g, N * C);
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, out, ti, tw, &tb, N, C, OC, scratch));
    vkg_gpu_run(g);
    vkg_gpu_download(g, out, r->gpu, sizeof r->gpu);
    vkg_ref_matmul_fwd(r->ref, r->inp, r->w, r->b, N, C, OC);
}

static void test_correct_reference_passes(void **state)
{
    static run r;
    gpu_matmul(*state, &r);
    vkg_test_cmp cmp;
    assert_true(
        vkg_test_compare("matmul vs reference", r.gpu, r.ref, N * OC, VKG_TEST_REL_BOUND, &cmp));
    assert_true(cmp.rel_l2 < VKG_TEST_REL_BOUND);
    assert_int_equal(cmp.nonfinite, 0);
}

static void test_one_corrupted_element_is_found(void **state)
{
    static run r;
    gpu_matmul(*state, &r);
    const size_t bad = 97;
    /* Large enough to matter over the whole tensor: 5% of one element. */
    r.ref[bad] *= 1.05f;
    vkg_test_cmp cmp;
    assert_false(vkg_test_compare("deliberately corrupted reference", r.gpu, r.ref, N * OC,
                                  VKG_TEST_REL_BOUND, &cmp));
    assert_int_equal(cmp.first_bad, bad);
    assert_true(cmp.rel_l2 > VKG_TEST_REL_BOUND);
}

static void test_wrong_reference_math_is_found(void **state)
{
    static run r;
    gpu_matmul(*state, &r);
    /* A reference that forgets the bias: the classic "looks about right" bug. */
    vkg_ref_matmul_fwd(r.ref, r.inp, r.w, NULL, N, C, OC);
    assert_false(
        vkg_test_compare("reference without bias", r.gpu, r.ref, N * OC, VKG_TEST_REL_BOUND, NULL));
    /* A reference with the weight read as (C, OC) instead of (OC, C). */
    float wt[OC * C];
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++)
            wt[c * OC + o] = r.w[o * C + c];
    vkg_ref_matmul_fwd(r.ref, r.inp, wt, r.b, N, C, OC);
    assert_false(vkg_test_compare("reference with transposed weight", r.gpu, r.ref, N * OC,
                                  VKG_TEST_REL_BOUND, NULL));
}

static void test_unwritten_output_is_found(void **state)
{
    vkg_gpu *g = *state;
    static run r;
    gpu_matmul(g, &r);
    /* Run the product on fewer rows than the output holds: the last row stays NaN. */
    vkg_tensor ti = vkg_gpu_upload(g, r.inp, sizeof r.inp), tw = vkg_gpu_upload(g, r.w, sizeof r.w);
    vkg_tensor tb = vkg_gpu_upload(g, r.b, sizeof r.b), out = vkg_gpu_poisoned(g, N * OC);
    vkg_tensor scratch = vkg_gpu_poisoned(g, N * C);
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, out, ti, tw, &tb, N - 1, C, OC, scratch));
    vkg_gpu_run(g);
    vkg_gpu_download(g, out, r.gpu, sizeof r.gpu);
    vkg_test_cmp cmp;
    assert_false(vkg_test_compare("output with an unwritten row", r.gpu, r.ref, N * OC,
                                  VKG_TEST_REL_BOUND, &cmp));
    assert_int_equal(cmp.nonfinite, OC);
    assert_int_equal(cmp.first_bad, (size_t)(N - 1) * OC);
}

/* A write one float past an output's end (a shader told its size wrongly) lands in the fixture's
 * NaN guard, which the output check then reports; an untouched guard passes. */
static void test_write_past_the_end_is_found(void **state)
{
    vkg_gpu *g = *state;
    vkg_tensor out = vkg_gpu_poisoned(g, N), wider = out;
    wider.bytes += 3 * sizeof(float); /* the tensor and the first three guard floats */
    VKG_ASSERT_OK(vkg_op_fill(g->cmd, out, N, 1.0f));
    vkg_gpu_run(g);
    int bad = -1;
    assert_true(vkg_gpu_guard_intact(g, out, &bad));
    VKG_ASSERT_OK(vkg_op_fill(g->cmd, wider, N + 2, 1.0f));
    vkg_gpu_run(g);
    assert_false(vkg_gpu_guard_intact(g, out, &bad));
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_correct_reference_passes, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_one_corrupted_element_is_found, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_reference_math_is_found, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_write_past_the_end_is_found, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_unwritten_output_is_found, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
