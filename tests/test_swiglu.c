/* Tests of SwiGLU (src/ops/swiglu.c) and squared ReLU (src/ops/pointwise.c), forward and
 * backward, against the CPU reference (src/ref, written from the definitions) on random inputs:
 * N = 1, F = 1, odd F not a multiple of the workgroup (13, 37, 301) and Llama-like 128 x 2048;
 * ReLU^2 on n = 1, 13, 37 * 41 and 2 * 64 * 3072. Gates cover both tails (+-30, +-100, where
 * exp(-g) overflows) and exact zeros. Every output must be finite and within a relative L2 error
 * ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND (1e-5). Forward outputs are poisoned with NaN
 * first; backward outputs start from random values that the reference starts from too (the
 * passes accumulate), and must be bitwise reproducible. Blocks of rows (a lowered index limit)
 * give the bits of one dispatch; the bf16 forms give exactly the fp32 kernels' bits on the widened
 * values (rounded once for a bf16 out, the half word after an odd count 0). The references'
 * backward passes are checked against finite differences, a reference with gate and up swapped
 * must fail the comparison (the layout is what the header says), and wrong sizes are refused. */
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
#include "llama_check.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

typedef struct shape {
    int N, F;
} shape;

static const shape SHAPES[] = {{1, 1}, {1, 13}, {7, 37}, {33, 301}, {128, 2048}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])
static const size_t SIZES[] = {1, 13, 37 * 41, 2 * 64 * 3072};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* h (N,2F): gates over [-8, 8] with both tails and zeros mixed in, ups over [-2, 2]. */
static float *swiglu_inputs(vkg_test_rng *r, int N, int F)
{
    static const float special[] = {0.0f, -0.0f, 30.0f, -30.0f, 100.0f, -100.0f, 1e-4f};
    float *h = vkg_test_alloc((size_t)N * 2 * F);
    for (int n = 0; n < N; n++) {
        float *gate = h + (size_t)n * 2 * F, *up = gate + F;
        for (int f = 0; f < F; f++) {
            size_t i = (size_t)n * F + f;
            gate[f] = i % 11 == 5 ? special[(i / 11) % 7] : vkg_test_rng_uniform(r, -8, 8);
            up[f] = vkg_test_rng_uniform(r, -2, 2);
        }
    }
    return h;
}

static void test_swiglu_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 41);
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = SHAPES[s].N, F = SHAPES[s].F;
        size_t n = (size_t)N * F;
        print_message("  N=%d F=%d\n", N, F);
        float *h = swiglu_inputs(&r, N, F), *out = vkg_test_alloc(n);
        vkg_ref_swiglu_fwd(out, h, N, F);
        vkg_tensor th = vkg_gpu_upload(g, h, 2 * n * 4), tout = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_op_swiglu_fwd(g->cmd, tout, th, N, F));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "swiglu_fwd out", tout, out, n);
        free(h), free(out);
    }
}

static void test_swiglu_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 42);
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = SHAPES[s].N, F = SHAPES[s].F;
        size_t n = (size_t)N * F;
        print_message("  N=%d F=%d\n", N, F);
        float *h = swiglu_inputs(&r, N, F), *dout = vkg_test_random(&r, n, -1, 1);
        float *dh = vkg_test_random(&r, 2 * n, -1, 1);
        vkg_tensor th = vkg_gpu_upload(g, h, 2 * n * 4), td = vkg_gpu_upload(g, dout, n * 4);
        vkg_tensor tdh[2] = {vkg_gpu_upload(g, dh, 2 * n * 4), vkg_gpu_upload(g, dh, 2 * n * 4)};
        vkg_ref_swiglu_bwd(dh, h, dout, N, F);
        for (int k = 0; k < 2; k++)
            VKG_ASSERT_OK(vkg_op_swiglu_bwd(g->cmd, tdh[k], th, td, N, F));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "swiglu_bwd dh", tdh[0], dh, 2 * n);
        llama_expect_words(g, "swiglu_bwd dh, run twice", tdh[0], tdh[1], 2 * n);
        free(h), free(dout), free(dh);
    }
}

/* ReLU^2 inputs over [-3, 3] with exact zeros of both signs mixed in. */
static float *relu2_inputs(vkg_test_rng *r, size_t n)
{
    float *x = vkg_test_random(r, n, -3.0f, 3.0f);
    for (size_t i = 3; i < n; i += 9)
        x[i] = i % 2 ? 0.0f : -0.0f;
    return x;
}

static void test_relu2(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 43);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        print_message("  n=%zu\n", n);
        float *x = relu2_inputs(&r, n), *out = vkg_test_alloc(n);
        float *dout = vkg_test_random(&r, n, -1, 1), *dx = vkg_test_random(&r, n, -1, 1);
        vkg_tensor tx = vkg_gpu_upload(g, x, n * 4), tout = vkg_gpu_poisoned(g, n);
        vkg_tensor td = vkg_gpu_upload(g, dout, n * 4);
        vkg_tensor tdx[2] = {vkg_gpu_upload(g, dx, n * 4), vkg_gpu_upload(g, dx, n * 4)};
        vkg_ref_relu2_fwd(out, x, n);
        vkg_ref_relu2_bwd(dx, x, dout, n);
        VKG_ASSERT_OK(vkg_op_relu2_fwd(g->cmd, tout, tx, n));
        for (int k = 0; k < 2; k++)
            VKG_ASSERT_OK(vkg_op_relu2_bwd(g->cmd, tdx[k], tx, td, n));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "relu2_fwd out", tout, out, n);
        vkg_gpu_expect_ref(g, "relu2_bwd dinp", tdx[0], dx, n);
        llama_expect_words(g, "relu2_bwd dinp, run twice", tdx[0], tdx[1], n);
        free(x), free(out), free(dout), free(dx);
    }
}

/* Above the index limit (lowered): SwiGLU in blocks of whole rows (an even number of rows for a
 * bf16 out of odd F), ReLU^2 in chunks; every bit as in one dispatch. */
static void test_blocks(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 23, F = 75 };
    size_t n = (size_t)N * F;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 44);
    float *h = swiglu_inputs(&r, N, F), *dout = vkg_test_random(&r, n, -1, 1);
    vkg_tensor th = vkg_gpu_upload(g, h, 2 * n * 4), td = vkg_gpu_upload(g, dout, n * 4);
    vkg_tensor out[2], o16[2], dh[2], rout[2], rdx[2];
    for (int k = 0; k < 2; k++) {
        out[k] = vkg_gpu_poisoned(g, n), o16[k] = vkg_gpu_bf16_poisoned(g, n);
        dh[k] = vkg_gpu_upload(g, h, 2 * n * 4);
        rout[k] = vkg_gpu_poisoned(g, 2 * n), rdx[k] = vkg_gpu_upload(g, h, 2 * n * 4);
    }
    for (int k = 0; k < 2; k++) {
        vkg__op_set_max_elems(k ? 1000 : 0); /* 6 rows of 2F = 150, or 1000 elements */
        VKG_ASSERT_OK(vkg_op_swiglu_fwd(g->cmd, out[k], th, N, F));
        VKG_ASSERT_OK(vkg_op_swiglu_fwd(g->cmd, o16[k], th, N, F));
        VKG_ASSERT_OK(vkg_op_swiglu_bwd(g->cmd, dh[k], th, td, N, F));
        VKG_ASSERT_OK(vkg_op_relu2_fwd(g->cmd, rout[k], th, 2 * n));
        VKG_ASSERT_OK(vkg_op_relu2_bwd(g->cmd, rdx[k], th, th, 2 * n));
    }
    vkg__op_set_max_elems(0);
    vkg_gpu_run(g);
    llama_expect_words(g, "blocks: swiglu out", out[0], out[1], n);
    llama_expect_words(g, "blocks: swiglu bf16 out", o16[0], o16[1], (n + 1) / 2);
    llama_expect_words(g, "blocks: swiglu dh", dh[0], dh[1], 2 * n);
    llama_expect_words(g, "blocks: relu2 out", rout[0], rout[1], 2 * n);
    llama_expect_words(g, "blocks: relu2 dinp", rdx[0], rdx[1], 2 * n);
    free(h), free(dout);
}

/* Mixed precision: out bf16 and h (inp) bf16, each against the fp32 kernel on the widened
 * values, bitwise. */
static void check_bf16(vkg_gpu *g, vkg_test_rng *r, int N, int F)
{
    size_t n = (size_t)N * F;
    char what[64];
    snprintf(what, sizeof what, "bf16 N=%d F=%d", N, F);
    print_message("  %s\n", what);
    float *h = swiglu_inputs(r, N, F), *dout = vkg_test_random(r, n, -1, 1);
    float *d0 = vkg_test_random(r, 2 * n, -1, 1), *o = vkg_test_alloc(2 * n);
    vkg_tensor h16 = vkg_gpu_bf16_of(g, h, 2 * n), td = vkg_gpu_upload(g, dout, n * 4);
    vkg_gpu_run(g);
    vkg_tensor h32 = vkg_gpu_bf16_widened(g, h16, 2 * n);
    vkg_tensor o32[2], o16[2], dh[2], r32[2], r16[2], rdx[2];
    for (int k = 0; k < 2; k++) {
        vkg_tensor in = k ? h32 : h16;
        o32[k] = vkg_gpu_poisoned(g, n), o16[k] = vkg_gpu_bf16_poisoned(g, n);
        dh[k] = vkg_gpu_upload(g, d0, 2 * n * 4);
        r32[k] = vkg_gpu_poisoned(g, n), r16[k] = vkg_gpu_bf16_poisoned(g, n);
        rdx[k] = vkg_gpu_upload(g, d0, n * 4);
        VKG_ASSERT_OK(vkg_op_swiglu_fwd(g->cmd, o32[k], in, N, F));
        VKG_ASSERT_OK(vkg_op_swiglu_fwd(g->cmd, o16[k], in, N, F));
        VKG_ASSERT_OK(vkg_op_swiglu_bwd(g->cmd, dh[k], in, td, N, F));
        VKG_ASSERT_OK(vkg_op_relu2_fwd(g->cmd, r32[k], in, n));
        VKG_ASSERT_OK(vkg_op_relu2_fwd(g->cmd, r16[k], in, n));
        VKG_ASSERT_OK(vkg_op_relu2_bwd(g->cmd, rdx[k], in, td, n));
    }
    vkg_gpu_run(g);
    llama_expect_words(g, what, o32[0], o32[1], n);
    llama_expect_words(g, what, o16[0], o16[1], (n + 1) / 2);
    llama_expect_words(g, what, dh[0], dh[1], 2 * n);
    llama_expect_words(g, what, r32[0], r32[1], n);
    llama_expect_words(g, what, r16[0], r16[1], (n + 1) / 2);
    llama_expect_words(g, what, rdx[0], rdx[1], n);
    vkg_gpu_download(g, o32[1], o, n * 4);
    llama_expect_rounded(g, what, o16[1], o, n);
    vkg_gpu_download(g, r32[1], o, n * 4);
    llama_expect_rounded(g, what, r16[1], o, n);
    vkg_gpu_expect_guard(g, what, o16[0]);
    vkg_gpu_expect_guard(g, what, r16[0]);
    free(h), free(dout), free(d0), free(o);
}

static void test_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 45);
    check_bf16(g, &r, 1, 1);
    check_bf16(g, &r, 7, 37);
    check_bf16(g, &r, 16, 512);
}

/* Finite differences of the double references: L = sum(out * g). */
typedef struct fd_ctx {
    double *x, *out, *g;
    int N, F, relu2;
} fd_ctx;

static double fd_objective(void *p)
{
    fd_ctx *c = p;
    size_t n = (size_t)c->N * c->F;
    if (c->relu2)
        vkg_ref_relu2_fwd_f64(c->out, c->x, n);
    else
        vkg_ref_swiglu_fwd_f64(c->out, c->x, c->N, c->F);
    return vkg_ref_dot_compensated(c->out, c->g, n);
}

static void test_reference_fd(void **state)
{
    (void)state;
    enum { N = 4, F = 19, NF = N * F };
    double h[2 * NF], out[NF], g[NF], dh[2 * NF];
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 46);
    vkg_test_fill_uniform_f64(&r, h, 2 * NF, -6, 6);
    vkg_test_fill_uniform_f64(&r, g, NF, -1, 1);
    for (size_t i = 0; i < 2 * NF; i++)
        dh[i] = 0.25; /* pre-filled: the backward accumulates */
    vkg_ref_swiglu_bwd_f64(dh, h, g, N, F);
    for (size_t i = 0; i < 2 * NF; i++)
        dh[i] -= 0.25;
    fd_ctx c = {h, out, g, N, F, 0};
    llama_fd("swiglu dh", h, dh, 2 * NF, 2 * NF, fd_objective, &c, 1e-6);
    /* ReLU^2 away from its kink at 0 (|x| >= 0.05, far beyond the step 5e-6) */
    for (size_t i = 0; i < NF; i++) {
        h[i] = h[i] < 0 ? h[i] - 0.05 : h[i] + 0.05;
        dh[i] = 0.25;
    }
    vkg_ref_relu2_bwd_f64(dh, h, g, NF);
    for (size_t i = 0; i < NF; i++)
        dh[i] -= 0.25;
    fd_ctx c2 = {h, out, g, N, F, 1};
    llama_fd("relu2 dinp", h, dh, NF, NF, fd_objective, &c2, 1e-6);
}

/* The comparison bites, and the layout is the documented one: a reference fed h with its gate
 * and up halves swapped fails it. */
static void test_layout_bites(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 5, F = 21, NF = N * F };
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 47);
    float *h = swiglu_inputs(&r, N, F), *swapped = vkg_test_alloc(2 * NF);
    float *out = vkg_test_alloc(NF), *got = vkg_test_alloc(NF);
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++) {
            swapped[n * 2 * F + f] = h[n * 2 * F + F + f];
            swapped[n * 2 * F + F + f] = h[n * 2 * F + f];
        }
    vkg_tensor th = vkg_gpu_upload(g, h, sizeof(float) * 2 * NF), tout = vkg_gpu_poisoned(g, NF);
    VKG_ASSERT_OK(vkg_op_swiglu_fwd(g->cmd, tout, th, N, F));
    vkg_gpu_run(g);
    vkg_gpu_download(g, tout, got, sizeof(float) * NF);
    vkg_ref_swiglu_fwd(out, swapped, N, F);
    vkg_test_cmp cmp;
    assert_false(vkg_test_compare("gate and up swapped", got, out, NF, VKG_TEST_REL_BOUND, &cmp));
    free(h), free(swapped), free(out), free(got);
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 6, F = 10 };
    vkg_tensor h = vkg_gpu_poisoned(g, 2 * N * F), o = vkg_gpu_poisoned(g, N * F);
    vkg_tensor short_h = vkg_gpu_poisoned(g, 2 * N * F - 1);
    vkg_tensor short_o = vkg_gpu_poisoned(g, N * F - 1);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_swiglu_fwd(c, short_o, h, N, F),
                       "swiglu_fwd: tensor out holds 59 elements, the shape needs 60");
    vkg_expect_invalid(vkg_op_swiglu_fwd(c, o, short_h, N, F), "swiglu_fwd: tensor h");
    vkg_expect_invalid(vkg_op_swiglu_fwd(c, o, h, N, 0), "swiglu_fwd: N and F must be positive");
    vkg_expect_invalid(vkg_op_swiglu_bwd(c, short_h, h, o, N, F), "swiglu_bwd: tensor dh");
    vkg_expect_invalid(vkg_op_swiglu_bwd(c, h, short_h, o, N, F), "swiglu_bwd: tensor h");
    vkg_expect_invalid(vkg_op_swiglu_bwd(c, h, h, short_o, N, F), "swiglu_bwd: tensor dout");
    vkg__op_set_max_elems(2 * F - 1);
    vkg_status st = vkg_op_swiglu_fwd(c, o, h, N, F);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "swiglu_fwd: one row of h (2F=20 elements each) is more than the 19");
    vkg_expect_invalid(vkg_op_relu2_fwd(c, short_o, o, N * F), "relu2_fwd: tensor out");
    vkg_expect_invalid(vkg_op_relu2_fwd(c, o, short_o, N * F), "relu2_fwd: tensor inp");
    vkg_expect_invalid(vkg_op_relu2_bwd(c, short_o, o, o, N * F), "relu2_bwd: tensor dinp");
    vkg_expect_invalid(vkg_op_relu2_bwd(c, o, short_o, o, N * F), "relu2_bwd: tensor inp");
    vkg_expect_invalid(vkg_op_relu2_bwd(c, o, o, short_o, N * F), "relu2_bwd: tensor dout");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_swiglu_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_swiglu_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_relu2, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_blocks, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_reference_fd),
        cmocka_unit_test_setup_teardown(test_layout_bites, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
