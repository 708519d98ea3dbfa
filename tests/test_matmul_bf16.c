/* bf16 weights in the matmul passes (mixed precision, src/ops/matmul.c): the weight is uploaded
 * fp32 and cast on the device (vkg_op_cast_bf16) into a bf16 tensor that the forward pass and dinp
 * read; dweight and dbias read no weight. Every case runs with the input (inp: the forward's
 * operand, dweight's) fp32 and bf16 (the stored activations of bf16 training), the reference
 * then on the rounded input as well. Two references for every output:
 *  - the fp32 CPU reference on the weights rounded as the cast rounds them (vkg_ref_bf16_round):
 *    the kernels sum the same products in fp32, so the fp32 bound holds, ||gpu - ref|| / ||ref||
 *    <= 1e-5 (VKG_TEST_REL_BOUND); dweight and dbias too;
 *  - the fp32 reference on the unrounded weights, per element (out with an fp32 input, dinp):
 *        |gpu - ref| <= 2^-8 * sum_k |x_k| |w_k| + 1e-5 * |ref| + 1e-6
 *    each rounded weight is within 2^-9 of its value relative (half a unit in the last place of
 *    bf16's 8-bit significand), so a sum of K products moves by at most 2^-9 sum |x_k| |w_k|; the
 *    bound doubles that, and adds the fp32 sums' own rounding.
 * Kernels: the device's default, the register kernel with a plain (no subgroup shuffle) tile, and
 * the tiled kernel with two tilings, on awkward shapes; outputs poisoned first, gradients start
 * from random values (accumulation checked). One case breaks the per-element bound on purpose to
 * show the check bites. */
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

typedef struct shape {
    int N, C, OC;
} shape;

static const shape shapes[] = {{1, 1, 1}, {7, 13, 37}, {33, 66, 5}, {130, 40, 9}, {64, 768, 2304}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* |x| of n values into a new array. */
static float *absolute(const float *x, size_t n)
{
    float *a = vkg_test_alloc(n);
    for (size_t i = 0; i < n; i++)
        a[i] = fabsf(x[i]);
    return a;
}

/* Count the elements of got outside ref +- (2^-8 mag + 1e-5 |ref| + 1e-6); fail naming the first
 * unless expect_bad. */
static size_t check_bound(const char *what, const float *got, const float *ref, const float *mag,
                          size_t n, int expect_bad)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = ldexp((double)mag[i], -8) + 1e-5 * fabs((double)ref[i]) + 1e-6;
        if (!(fabs((double)got[i] - (double)ref[i]) <= tol) && bad++ == 0 && !expect_bad)
            fail_msg("%s: element %zu is %.9g, the fp32 reference %.9g, bound %.3g", what, i,
                     (double)got[i], (double)ref[i], tol);
    }
    return bad;
}

static void check_fwd(vkg_gpu *g, shape s, int bias, int in16, uint64_t seed, const char *kernel)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t nin = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, nout = (size_t)s.N * s.OC;
    float *inp = vkg_test_random(&r, nin, -1.0f, 1.0f), *w = vkg_test_random(&r, nw, -0.5f, 0.5f);
    float *b = vkg_test_random(&r, (size_t)s.OC, -1.0f, 1.0f), *wr = vkg_test_alloc(nw);
    float *ref = vkg_test_alloc(nout), *ref32 = vkg_test_alloc(nout), *mag = vkg_test_alloc(nout);
    float *got = vkg_test_alloc(nout), *ainp = absolute(inp, nin), *aw = absolute(w, nw);
    for (size_t i = 0; i < nw; i++)
        wr[i] = w[i];
    vkg_ref_bf16_round(wr, nw);
    vkg_tensor t_inp = in16 ? vkg_gpu_bf16_of(g, inp, nin) : vkg_gpu_upload(g, inp, nin * 4);
    if (in16) /* the activation stored bf16 too: both operands rounded */
        vkg_ref_bf16_round(inp, nin);
    vkg_ref_matmul_fwd(ref, inp, wr, bias ? b : NULL, s.N, s.C, s.OC);
    vkg_ref_matmul_fwd(ref32, inp, w, bias ? b : NULL, s.N, s.C, s.OC);
    vkg_ref_matmul_fwd(mag, ainp, aw, NULL, s.N, s.C, s.OC);

    vkg_tensor t_w = vkg_gpu_bf16_of(g, w, nw), t_b = vkg_gpu_upload(g, b, (size_t)s.OC * 4);
    vkg_tensor t_out = vkg_gpu_poisoned(g, nout), t_scratch = vkg_gpu_poisoned(g, nin);
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, t_out, t_inp, t_w, bias ? &t_b : NULL, s.N, s.C, s.OC,
                                    t_scratch));
    vkg_gpu_run(g);
    char what[128];
    snprintf(what, sizeof what, "%s matmul_fwd bf16 weight%s N=%d C=%d OC=%d bias=%d", kernel,
             in16 ? " and input" : "", s.N, s.C, s.OC, bias);
    vkg_gpu_expect(g, what, t_out, ref, nout, VKG_TEST_REL_BOUND);
    vkg_gpu_download(g, t_out, got, nout * 4);
    if (!in16) /* (with a rounded input too the bound would need 2^-7) */
        check_bound(what, got, ref32, mag, nout, 0);
    free(inp), free(w), free(b), free(wr), free(ref), free(ref32), free(mag), free(got);
    free(ainp), free(aw);
}

/* The forward pass into a bf16 out (the stored activation), alone and with the GELU epilogue into
 * a bf16 act: out is the fp32 out rounded to bf16, bitwise (the same sums, one rounding on
 * store), and within 2^-8 |ref| + 1e-5 mag + 1e-6 of the fp32 reference (half a bf16 unit for the
 * rounding, doubled, plus the fp32 sums' error as above); act is bitwise what gelu_fwd makes of
 * the bf16 out (the recomputation in the backward pass gives the forward's bits). */
static void check_fwd_out16(vkg_gpu *g, shape s, int bias, int in16, uint64_t seed,
                            const char *kernel)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t nin = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, nout = (size_t)s.N * s.OC;
    float *inp = vkg_test_random(&r, nin, -1.0f, 1.0f), *w = vkg_test_random(&r, nw, -0.5f, 0.5f);
    float *b = vkg_test_random(&r, (size_t)s.OC, -1.0f, 1.0f), *ref = vkg_test_alloc(nout);
    float *mag = vkg_test_alloc(nout), *o32 = vkg_test_alloc(nout);
    vkg_tensor t_inp = in16 ? vkg_gpu_bf16_of(g, inp, nin) : vkg_gpu_upload(g, inp, nin * 4);
    vkg_tensor t_w = vkg_gpu_bf16_of(g, w, nw), t_b = vkg_gpu_upload(g, b, (size_t)s.OC * 4);
    if (in16)
        vkg_ref_bf16_round(inp, nin);
    vkg_ref_bf16_round(w, nw);
    vkg_ref_matmul_fwd(ref, inp, w, bias ? b : NULL, s.N, s.C, s.OC);
    for (size_t i = 0; i < nin; i++)
        inp[i] = fabsf(inp[i]);
    for (size_t i = 0; i < nw; i++)
        w[i] = fabsf(w[i]);
    vkg_ref_matmul_fwd(mag, inp, w, NULL, s.N, s.C, s.OC);
    vkg_tensor out32 = vkg_gpu_poisoned(g, nout), out16 = vkg_gpu_bf16_poisoned(g, nout);
    vkg_tensor pre16 = vkg_gpu_bf16_poisoned(g, nout), act16 = vkg_gpu_bf16_poisoned(g, nout);
    vkg_tensor re16 = vkg_gpu_bf16_poisoned(g, nout), scr = vkg_gpu_poisoned(g, nin);
    const vkg_tensor *tb = bias ? &t_b : NULL;
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, out32, t_inp, t_w, tb, s.N, s.C, s.OC, scr));
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, out16, t_inp, t_w, tb, s.N, s.C, s.OC, scr));
    VKG_ASSERT_OK(
        vkg_op_matmul_fwd_gelu(g->cmd, pre16, act16, t_inp, t_w, tb, s.N, s.C, s.OC, scr));
    vkg_gpu_run(g);
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, re16, pre16, nout));
    vkg_gpu_run(g);
    char what[128];
    snprintf(what, sizeof what, "%s matmul_fwd bf16 out%s N=%d C=%d OC=%d bias=%d", kernel,
             in16 ? " and input" : "", s.N, s.C, s.OC, bias);
    vkg_gpu_download(g, out32, o32, nout * 4);
    float *got = vkg_gpu_download_bf16(g, out16, nout),
          *pre = vkg_gpu_download_bf16(g, pre16, nout);
    float *act = vkg_gpu_download_bf16(g, act16, nout), *re = vkg_gpu_download_bf16(g, re16, nout);
    for (size_t i = 0; i < nout; i++) {
        float want = vkg_ref_bf16_widen(vkg_ref_bf16_bits(o32[i]));
        double tol = ldexp(fabs((double)ref[i]), -8) + 1e-5 * (double)mag[i] + 1e-6;
        if (memcmp(&got[i], &want, 4) != 0 || memcmp(&pre[i], &want, 4) != 0)
            fail_msg("%s: element %zu is %.9g (with GELU %.9g), the fp32 out rounded %.9g", what, i,
                     (double)got[i], (double)pre[i], (double)want);
        if (!(fabs((double)got[i] - (double)ref[i]) <= tol))
            fail_msg("%s: element %zu is %.9g, the reference %.9g (bound %.3g)", what, i,
                     (double)got[i], (double)ref[i], tol);
        if (memcmp(&act[i], &re[i], 4) != 0)
            fail_msg("%s: GELU element %zu is %.9g, gelu_fwd of the bf16 out %.9g", what, i,
                     (double)act[i], (double)re[i]);
    }
    vkg_gpu_expect_guard(g, what, out16);
    vkg_gpu_expect_guard(g, what, pre16);
    vkg_gpu_expect_guard(g, what, act16);
    free(inp), free(w), free(b), free(ref), free(mag), free(o32), free(got), free(pre), free(act);
    free(re);
}

static void check_bwd(vkg_gpu *g, shape s, int bias, int in16, uint64_t seed, const char *kernel)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t nin = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, nout = (size_t)s.N * s.OC;
    float *inp = vkg_test_random(&r, nin, -1.0f, 1.0f), *w = vkg_test_random(&r, nw, -0.5f, 0.5f);
    float *dout = vkg_test_random(&r, nout, -1.0f, 1.0f);
    float *dinp = vkg_test_random(&r, nin, -1.0f, 1.0f), *dw = vkg_test_random(&r, nw, -1.0f, 1.0f);
    float *db = vkg_test_random(&r, (size_t)s.OC, -1.0f, 1.0f), *wr = vkg_test_alloc(nw);
    float *dinp32 = vkg_test_alloc(nin), *mag = calloc(nin, 4), *got = vkg_test_alloc(nin);
    float *adout = absolute(dout, nout), *aw = absolute(w, nw), *scr = calloc(nw, 4);
    assert_true(mag && scr);
    vkg_tensor t_w = vkg_gpu_bf16_of(g, w, nw);
    vkg_tensor t_inp = in16 ? vkg_gpu_bf16_of(g, inp, nin) : vkg_gpu_upload(g, inp, nin * 4);
    if (in16) /* dweight reads the bf16 input */
        vkg_ref_bf16_round(inp, nin);
    vkg_tensor t_dout = vkg_gpu_upload(g, dout, nout * 4),
               t_dinp = vkg_gpu_upload(g, dinp, nin * 4);
    vkg_tensor t_dw = vkg_gpu_upload(g, dw, nw * 4), t_db = vkg_gpu_upload(g, db, (size_t)s.OC * 4);
    vkg_tensor t_scratch = vkg_gpu_poisoned(g, (size_t)s.N * (size_t)(s.C > s.OC ? s.C : s.OC));
    for (size_t i = 0; i < nw; i++)
        wr[i] = w[i];
    vkg_ref_bf16_round(wr, nw);
    for (size_t i = 0; i < nin; i++)
        dinp32[i] = dinp[i];
    vkg_ref_matmul_bwd(dinp32, scr, NULL, dout, inp, w, s.N, s.C, s.OC);
    vkg_ref_matmul_bwd(mag, scr, NULL, adout, inp, aw, s.N, s.C, s.OC); /* mag starts at 0 */
    vkg_ref_matmul_bwd(dinp, dw, bias ? db : NULL, dout, inp, wr, s.N, s.C, s.OC);

    VKG_ASSERT_OK(vkg_op_matmul_bwd(g->cmd, t_dinp, t_dw, bias ? &t_db : NULL, t_dout, t_inp, t_w,
                                    s.N, s.C, s.OC, &t_scratch));
    vkg_gpu_run(g);
    char what[128];
    snprintf(what, sizeof what, "%s matmul_bwd bf16 weight N=%d C=%d OC=%d bias=%d: dinp", kernel,
             s.N, s.C, s.OC, bias);
    vkg_gpu_expect(g, what, t_dinp, dinp, nin, VKG_TEST_REL_BOUND);
    vkg_gpu_download(g, t_dinp, got, nin * 4);
    check_bound(what, got, dinp32, mag, nin, 0);
    vkg_gpu_expect(g, "matmul_bwd bf16 weight: dweight", t_dw, dw, nw, VKG_TEST_REL_BOUND);
    if (bias)
        vkg_gpu_expect(g, "matmul_bwd bf16 weight: dbias", t_db, db, (size_t)s.OC,
                       VKG_TEST_REL_BOUND);
    free(inp), free(w), free(dout), free(dinp), free(dw), free(db), free(wr), free(dinp32);
    free(mag), free(got), free(adout), free(aw), free(scr);
}

static void check_all(vkg_gpu *g, const char *kernel, uint64_t seed)
{
    for (size_t i = 0; i < NSHAPES; i++) {
        check_fwd(g, shapes[i], (int)(i % 2), (int)(i % 2), seed + i, kernel);
        check_fwd(g, shapes[i], (int)(i % 2), (int)((i + 1) % 2), seed + 50 + i, kernel);
        check_bwd(g, shapes[i], (int)((i + 1) % 2), (int)(i % 2), seed + 100 + i, kernel);
        check_bwd(g, shapes[i], (int)(i % 2), (int)((i + 1) % 2), seed + 150 + i, kernel);
        check_fwd_out16(g, shapes[i], (int)((i + 1) % 2), (int)(i % 2), seed + 200 + i, kernel);
    }
}

static void test_default_kernel(void **state)
{
    check_all(*state, "default", 1000);
}

static void test_register_plain(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev), t = saved;
    t.matmul_tiled = 0, t.matmul_tm = 4, t.matmul_tn = 2, t.matmul_lx = 16;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    check_all(g, "register 4x2/16", 2000);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* Every product of check_all on the tiled kernel forced to tiles[first], tiles[first + 1]. The
 * bf16 outputs are staged in shared memory (matmul_tiled.comp's staged epilogue) in two passes
 * (64x64x16:4x4), four (128x128x16:8x8, single buffered, so that it fits 32 KiB) and one
 * (64x64x16:4x4+db); 48x40x12:3x5 (odd TM) stores them directly. Two tilings a test, so that
 * the fixture's arena holds their tensors under every tuning. */
static void tiled_pair(vkg_gpu *g, size_t first)
{
    static const vkg_matmul_tiling tiles[] = {{64, 64, 16, 4, 4, 0, 0},
                                              {48, 40, 12, 3, 5, 0, 0},
                                              {128, 128, 16, 8, 8, 0, 0},
                                              {64, 64, 16, 4, 4, 0, 1}};
    static const char *const names[] = {"tiled 64x64x16", "tiled 48x40x12", "tiled 128x128x16",
                                        "tiled 64x64x16+db"};
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    for (size_t v = first; v < first + 2; v++) {
        vkg_device_tuning t = saved;
        vkg__mmt_force(&t, &tiles[v]);
        VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
        check_all(g, names[v], 3000 + 200 * v);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

static void test_tiled(void **state)
{
    tiled_pair(*state, 0);
}

static void test_tiled_staged(void **state)
{
    tiled_pair(*state, 2);
}

/* The forward pass into bf16 outputs recorded in blocks of rows under a lowered shader index
 * limit (src/ops/op_util.h): blocks of an even number of rows, so every block's out starts on a
 * whole word even with an odd OC; the same checks as unsplit. */
static void test_fwd_out16_split(void **state)
{
    vkg_gpu *g = *state;
    const shape split_shapes[] = {{130, 40, 9}, {33, 66, 5}};
    vkg__op_set_max_elems(1000);
    for (size_t i = 0; i < sizeof split_shapes / sizeof split_shapes[0]; i++) {
        check_fwd_out16(g, split_shapes[i], 1, 0, 4000 + i, "split");
        check_fwd_out16(g, split_shapes[i], 0, 1, 4100 + i, "split");
    }
    vkg__op_set_max_elems(0);
}

/* The per-element bound rejects a result off by 4 x 2^-9 of the magnitude; an fp32 op refuses a
 * bf16 tensor, an accumulating product a bf16 out. */
static void test_checker_bites(void **state)
{
    vkg_gpu *g = *state;
    float ref[3] = {1.0f, -2.0f, 0.5f}, mag[3] = {1.0f, 2.0f, 0.5f}, got[3];
    for (int i = 0; i < 3; i++)
        got[i] = ref[i] + (float)ldexp(mag[i], -7);
    assert_int_equal(check_bound("broken", got, ref, mag, 3, 1), 3);
    vkg_tensor t = vkg_gpu_poisoned(g, 8);
    t.dtype = VKG_BF16;
    vkg_expect_invalid(vkg_op_matmul_fwd(g->cmd, t, t, t, NULL, 2, 2, 2, t), "bf16");
    vkg_gemm acc = {.label = "accumulate into bf16"};
    acc.out = acc.a = acc.b = t;
    acc.M = acc.N = acc.K = acc.lda = acc.ldb = acc.ldo = 2;
    acc.a_kcontig = acc.accumulate = 1;
    vkg_expect_invalid(vkg_op_gemm(g->cmd, &acc), "a bf16 out is for products that overwrite");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_default_kernel, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_register_plain, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_tiled, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_tiled_staged, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_fwd_out16_split, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_checker_bites, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
