/* Causal attention with bf16 activations (mixed precision, src/ops/attention.c): qkv and the
 * output stored bf16, every sum, lse, delta and dqkv fp32. Per shape and kernel form (both forms
 * on any device, as tests/test_attention.c):
 *  - the bf16 kernels against the fp32 kernels on the widened bf16 values: lse and dqkv bitwise
 *    equal, out equal to the fp32 out rounded to bf16 (the kernels differ only in their loads
 *    and in the one rounding of the store);
 *  - out against the CPU reference on the rounded qkv, per element
 *        |got - ref| <= 2^-8 |ref| + 1e-5
 *    (half a bf16 unit, 2^-9 relative, for the store's rounding, doubled for the fp32 sums' own
 *    error, which the fp32 tests hold to 1e-5 relative, plus a floor for values near 0);
 *  - dqkv against the CPU reference on the rounded qkv under a relative L2 bound of 2^-8: the
 *    reference forms delta = dout . out from its own unrounded out, the kernels from the bf16 out,
 *    which moves each delta by at most 2^-9 of sum |dout| |out|.
 * Outputs poisoned, dqkv starts from random values (accumulated), guards intact; an odd head
 * size and mixed fp32 / bf16 tensors are refused. */
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

typedef struct att_shape {
    int B, T, C, NH;
} att_shape;

/* GPT-2's heads of 64 at a test length, awkward lengths and head sizes, and a single token. */
static const att_shape shapes[] = {{1, 1, 2, 1}, {2, 37, 18, 3}, {1, 130, 64, 2}, {2, 64, 768, 12}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void with_form(vkg_gpu *g, vkg_attention_variant v)
{
    vkg_device_tuning t = vkg_device_tuning_get(g->dev);
    t.attention = v;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
}

/* The bits of x rounded to bf16, widened again. */
static float rounded(float x)
{
    return vkg_ref_bf16_widen(vkg_ref_bf16_bits(x));
}

static void check_shape(vkg_gpu *g, att_shape s, uint64_t seed, const char *form)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t nq = (size_t)s.B * s.T * 3 * s.C, no = (size_t)s.B * s.T * s.C;
    size_t ns = (size_t)s.B * s.NH * s.T;
    float *qkv = vkg_test_random(&r, nq, -2.0f, 2.0f), *dout = vkg_test_random(&r, no, -1.0f, 1.0f);
    float *d0 = vkg_test_random(&r, nq, -1.0f, 1.0f), *ref_out = vkg_test_alloc(no);
    float *ref_lse = vkg_test_alloc(ns), *ref_d = vkg_test_alloc(nq), *o32 = vkg_test_alloc(no);
    float *d16 = vkg_test_alloc(nq), *d32 = vkg_test_alloc(nq);
    float *l16 = vkg_test_alloc(ns), *l32 = vkg_test_alloc(ns);
    vkg_tensor q16 = vkg_gpu_bf16_of(g, qkv, nq);
    vkg_ref_bf16_round(qkv, nq);
    vkg_ref_attention_fwd(ref_out, ref_lse, NULL, qkv, s.B, s.T, s.C, s.NH);
    memcpy(ref_d, d0, nq * 4);
    vkg_ref_attention_bwd(ref_d, dout, qkv, ref_lse, s.B, s.T, s.C, s.NH);

    vkg_tensor q32 = vkg_gpu_upload(g, qkv, nq * 4), out16 = vkg_gpu_bf16_poisoned(g, no);
    vkg_tensor out32 = vkg_gpu_poisoned(g, no), lse16 = vkg_gpu_poisoned(g, ns);
    vkg_tensor lse32 = vkg_gpu_poisoned(g, ns), td = vkg_gpu_upload(g, dout, no * 4);
    vkg_tensor dq16 = vkg_gpu_upload(g, d0, nq * 4), dq32 = vkg_gpu_upload(g, d0, nq * 4);
    vkg_tensor delta = vkg_gpu_poisoned(g, ns), delta2 = vkg_gpu_poisoned(g, ns);
    VKG_ASSERT_OK(vkg_op_attention_fwd(g->cmd, out16, lse16, q16, s.B, s.T, s.C, s.NH));
    VKG_ASSERT_OK(vkg_op_attention_fwd(g->cmd, out32, lse32, q32, s.B, s.T, s.C, s.NH));
    vkg_gpu_run(g);
    float *got = vkg_gpu_download_bf16(g, out16, no);
    /* the fp32 backward gets the widened bf16 out, so both read the same values */
    vkg_tensor outw = vkg_gpu_upload(g, got, no * 4);
    VKG_ASSERT_OK(
        vkg_op_attention_bwd(g->cmd, dq16, td, q16, out16, lse16, s.B, s.T, s.C, s.NH, delta));
    VKG_ASSERT_OK(
        vkg_op_attention_bwd(g->cmd, dq32, td, q32, outw, lse16, s.B, s.T, s.C, s.NH, delta2));
    vkg_gpu_run(g);

    char what[128];
    snprintf(what, sizeof what, "%s form, B=%d T=%d C=%d NH=%d", form, s.B, s.T, s.C, s.NH);
    vkg_gpu_download(g, out32, o32, no * 4);
    vkg_gpu_download(g, lse16, l16, ns * 4);
    vkg_gpu_download(g, lse32, l32, ns * 4);
    vkg_gpu_download(g, dq16, d16, nq * 4);
    vkg_gpu_download(g, dq32, d32, nq * 4);
    for (size_t i = 0; i < no; i++) {
        double tol = ldexp(fabs((double)ref_out[i]), -8) + 1e-5;
        if (memcmp(&got[i], &(float){rounded(o32[i])}, 4) != 0)
            fail_msg("%s: bf16 out[%zu] = %.9g, the fp32 kernel's rounded %.9g", what, i,
                     (double)got[i], (double)rounded(o32[i]));
        if (!(fabs((double)got[i] - (double)ref_out[i]) <= tol))
            fail_msg("%s: bf16 out[%zu] = %.9g, the reference %.9g (bound %.3g)", what, i,
                     (double)got[i], (double)ref_out[i], tol);
    }
    if (memcmp(l16, l32, ns * 4) != 0)
        fail_msg("%s: lse of the bf16 forward differs from the fp32 kernel's", what);
    if (memcmp(d16, d32, nq * 4) != 0)
        fail_msg("%s: dqkv of the bf16 backward differs from the fp32 kernel's", what);
    vkg_gpu_expect_ref(g, "lse (bf16 qkv)", lse16, ref_lse, ns);
    vkg_gpu_expect(g, "dqkv (bf16 qkv and out)", dq16, ref_d, nq, ldexp(1.0, -8));
    vkg_gpu_expect_guard(g, what, out16);
    free(qkv), free(dout), free(d0), free(ref_out), free(ref_lse), free(ref_d), free(o32);
    free(d16), free(d32), free(l16), free(l32), free(got);
}

static void test_attention_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    for (size_t i = 0; i < NSHAPES; i++) {
        with_form(g, VKG_ATTENTION_DIRECT);
        check_shape(g, shapes[i], 100 + i, "subgroup");
        with_form(g, VKG_ATTENTION_SHARED);
        check_shape(g, shapes[i], 100 + i, "rows");
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* bf16 heads are whole words (an odd head size is refused), and the forward's qkv and out are
 * both bf16 or both fp32. */
static void test_attention_bf16_refused(void **state)
{
    vkg_gpu *g = *state;
    vkg_tensor q16 = vkg_gpu_bf16_poisoned(g, 3 * 9 * 2), o16 = vkg_gpu_bf16_poisoned(g, 9 * 2);
    vkg_tensor o32 = vkg_gpu_poisoned(g, 9 * 2), lse = vkg_gpu_poisoned(g, 3 * 2);
    vkg_tensor dq = vkg_gpu_poisoned(g, 3 * 9 * 2);
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, o16, lse, q16, 1, 2, 9, 3), "even head size");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, o32, lse, q16, 1, 2, 6, 3), "both bf16");
    vkg_expect_invalid(vkg_op_attention_bwd(g->cmd, dq, o32, q16, o16, lse, 1, 2, 9, 3, lse),
                       "even head size");
    vkg_expect_invalid(vkg_op_attention_bwd(g->cmd, q16, o32, q16, o16, lse, 1, 2, 6, 3, lse),
                       "bf16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_attention_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_attention_bf16_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
