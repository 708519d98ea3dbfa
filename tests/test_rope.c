/* Tests of the rotary position embedding (src/ops/rope.c), forward and backward, in place on the
 * q and k heads of qkv, against the CPU reference (src/ref: the rotate_half definition with cos
 * and sin in double) on random inputs: one position of one head with D = 2, odd T, grouped-query
 * heads (NKV < NH), D not a multiple of 4 (6, 10), GPT-2-sized 3 x 64 x (12 + 2 * 4) x 64, a
 * long sequence (T = 4096) with Llama 3's scaled frequencies at theta = 500000, and Llama 3.1's
 * context length (T = 131072, angles up to 131071 rad: the device's range reduction is tested).
 * Every output must be finite and within a relative L2 error ||gpu - ref|| / ||ref|| <=
 * VKG_TEST_REL_BOUND (1e-5), with the v heads bitwise untouched; forward then backward gives the
 * input back within 1e-6. Blocks of positions (a lowered index limit) give the bits of one
 * dispatch; a bf16 qkv gives the fp32 kernel's results on the widened values rounded once. The
 * reference is checked against a hand-computed quarter turn and its backward against finite
 * differences; a rotation of interleaved pairs (the other RoPE convention) must fail the
 * comparison, and wrong sizes are refused. */
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

#define PI 3.14159265358979323846

typedef struct shape {
    int B, T, NH, NKV, D;
    int llama3; /* inv_freq: 0 theta = 10000, 1 Llama 3's scaling of theta = 500000 */
} shape;

static const shape SHAPES[] = {{1, 1, 1, 1, 2, 0},     {2, 7, 3, 1, 6, 0},
                               {1, 33, 4, 2, 10, 0},   {3, 64, 12, 4, 64, 0},
                               {1, 4096, 2, 1, 16, 1}, {1, 131072, 1, 1, 4, 0}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* inv_freq[i] = theta^(-2i/D), and with llama3 the scaling of Hugging Face's
 * _compute_llama3_parameters (factor 8, low 1, high 4, original context 8192). */
static float *inv_freqs(int D, int llama3)
{
    float *f = vkg_test_alloc((size_t)D / 2);
    double theta = llama3 ? 500000.0 : 10000.0;
    for (int i = 0; i < D / 2; i++) {
        double v = pow(theta, -2.0 * i / D);
        if (llama3) {
            double wavelen = 2 * PI / v, low_wl = 8192.0 / 1.0, high_wl = 8192.0 / 4.0;
            if (wavelen > low_wl) {
                v /= 8.0;
            } else if (wavelen >= high_wl) {
                double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
                v = (1 - smooth) * v / 8.0 + smooth * v;
            }
        }
        f[i] = (float)v;
    }
    return f;
}

static size_t qkv_elems(const shape *s)
{
    return (size_t)s->B * s->T * (size_t)(s->NH + 2 * s->NKV) * s->D;
}

/* Fail unless the v heads of a and b (qkv layouts of shape s, host copies) are bitwise equal. */
static void expect_v_untouched(const shape *s, const float *a, const float *b)
{
    size_t W = (size_t)(s->NH + 2 * s->NKV) * s->D, v0 = (size_t)(s->NH + s->NKV) * s->D;
    for (size_t r = 0; r < (size_t)s->B * s->T; r++)
        if (memcmp(a + r * W + v0, b + r * W + v0, (W - v0) * sizeof(float)))
            fail_msg("the v heads of position row %zu changed", r);
}

static void test_rope_fwd_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 51);
    for (size_t k = 0; k < NSHAPES; k++) {
        const shape *s = &SHAPES[k];
        size_t n = qkv_elems(s);
        print_message("  B=%d T=%d NH=%d NKV=%d D=%d%s\n", s->B, s->T, s->NH, s->NKV, s->D,
                      s->llama3 ? " (Llama 3 frequencies)" : "");
        float *x = vkg_test_random(&r, n, -2, 2), *d = vkg_test_random(&r, n, -1, 1);
        float *f = inv_freqs(s->D, s->llama3), *rx = vkg_test_alloc(n), *rd = vkg_test_alloc(n);
        float *got = vkg_test_alloc(n);
        memcpy(rx, x, n * 4), memcpy(rd, d, n * 4);
        vkg_ref_rope_fwd(rx, f, s->B, s->T, s->NH, s->NKV, s->D);
        vkg_ref_rope_bwd(rd, f, s->B, s->T, s->NH, s->NKV, s->D);
        vkg_tensor tx = vkg_gpu_upload(g, x, n * 4), td = vkg_gpu_upload(g, d, n * 4);
        vkg_tensor tf = vkg_gpu_upload(g, f, (size_t)s->D / 2 * 4);
        vkg_tensor trip = vkg_gpu_upload(g, x, n * 4);
        VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, tx, tf, s->B, s->T, s->NH, s->NKV, s->D));
        VKG_ASSERT_OK(vkg_op_rope_bwd(g->cmd, td, tf, s->B, s->T, s->NH, s->NKV, s->D));
        VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, trip, tf, s->B, s->T, s->NH, s->NKV, s->D));
        vkg_gpu_run(g);
        VKG_ASSERT_OK(vkg_op_rope_bwd(g->cmd, trip, tf, s->B, s->T, s->NH, s->NKV, s->D));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "rope_fwd qkv", tx, rx, n);
        vkg_gpu_download(g, tx, got, n * 4);
        expect_v_untouched(s, got, x);
        vkg_gpu_expect_ref(g, "rope_bwd dqkv", td, rd, n);
        vkg_gpu_download(g, td, got, n * 4);
        expect_v_untouched(s, got, d);
        vkg_gpu_expect(g, "rope_fwd then rope_bwd", trip, x, n, 1e-6);
        free(x), free(d), free(f), free(rx), free(rd), free(got);
    }
}

/* Above the index limit (lowered to 5 position rows): blocks of positions that start inside a
 * sequence (T = 7), every bit as in one dispatch, fp32 and bf16. */
static void test_blocks_of_positions(void **state)
{
    vkg_gpu *g = *state;
    const shape s = {3, 7, 3, 1, 8, 0};
    size_t n = qkv_elems(&s), W = (size_t)(s.NH + 2 * s.NKV) * s.D;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 52);
    float *x = vkg_test_random(&r, n, -2, 2), *f = inv_freqs(s.D, 0);
    vkg_tensor tf = vkg_gpu_upload(g, f, (size_t)s.D / 2 * 4), t[2], d[2], h[2];
    for (int k = 0; k < 2; k++) {
        t[k] = vkg_gpu_upload(g, x, n * 4), d[k] = vkg_gpu_upload(g, x, n * 4);
        h[k] = vkg_gpu_bf16_of(g, x, n);
    }
    vkg_gpu_run(g);
    for (int k = 0; k < 2; k++) {
        vkg__op_set_max_elems(k ? 5 * W : 0);
        VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, t[k], tf, s.B, s.T, s.NH, s.NKV, s.D));
        VKG_ASSERT_OK(vkg_op_rope_bwd(g->cmd, d[k], tf, s.B, s.T, s.NH, s.NKV, s.D));
        VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, h[k], tf, s.B, s.T, s.NH, s.NKV, s.D));
    }
    vkg__op_set_max_elems(0);
    vkg_gpu_run(g);
    llama_expect_words(g, "blocks: rope_fwd", t[0], t[1], n);
    llama_expect_words(g, "blocks: rope_bwd", d[0], d[1], n);
    llama_expect_words(g, "blocks: rope_fwd bf16", h[0], h[1], n / 2);
    free(x), free(f);
}

/* A bf16 qkv: the fp32 kernel's results on the widened values, rounded once, v kept. */
static void test_bf16(void **state)
{
    vkg_gpu *g = *state;
    static const shape shapes[] = {{1, 1, 1, 1, 4, 0}, {2, 9, 3, 1, 12, 0}, {2, 64, 12, 4, 64, 1}};
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 53);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const shape *s = &shapes[k];
        size_t n = qkv_elems(s);
        print_message("  bf16 B=%d T=%d NH=%d NKV=%d D=%d\n", s->B, s->T, s->NH, s->NKV, s->D);
        float *x = vkg_test_random(&r, n, -2, 2), *f = inv_freqs(s->D, s->llama3);
        float *want = vkg_test_alloc(n);
        vkg_tensor tf = vkg_gpu_upload(g, f, (size_t)s->D / 2 * 4);
        vkg_tensor h = vkg_gpu_bf16_of(g, x, n);
        vkg_gpu_run(g);
        vkg_tensor w = vkg_gpu_bf16_widened(g, h, n);
        VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, h, tf, s->B, s->T, s->NH, s->NKV, s->D));
        VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, w, tf, s->B, s->T, s->NH, s->NKV, s->D));
        vkg_gpu_run(g);
        vkg_gpu_download(g, w, want, n * 4);
        llama_expect_rounded(g, "rope_fwd bf16", h, want, n);
        vkg_gpu_expect_guard(g, "rope_fwd bf16", h);
        free(x), free(f), free(want);
    }
}

/* The reference against a hand computation: inv_freq = pi/2 turns (x0, x1) by a quarter at
 * t = 1 into (-x1, x0), and by a half at t = 2 into (-x0, -x1); t = 0 keeps it. */
static void test_reference_quarter_turn(void **state)
{
    (void)state;
    double qkv[3][6] = {{1, 2, 9, 9, 7, 7}, {1, 2, 9, 9, 7, 7}, {1, 2, 9, 9, 7, 7}}, f = PI / 2;
    vkg_ref_rope_fwd_f64(&qkv[0][0], &f, 1, 3, 1, 1, 2); /* q = (x0, x1), k = (9, 9), v = (7, 7) */
    double want[3][2] = {{1, 2}, {-2, 1}, {-1, -2}};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 2; i++)
            assert_true(fabs(qkv[t][i] - want[t][i]) < 1e-15);
    assert_true(fabs(qkv[1][2] + 9) < 1e-15 && fabs(qkv[1][3] - 9) < 1e-15); /* k turned too */
    assert_true(qkv[1][4] == 7 && qkv[1][5] == 7);                           /* v kept */
}

/* Finite differences: L = sum(rope(qkv) * g); its gradient is rope_bwd(g) (v passes as is). */
typedef struct fd_ctx {
    double *x, *out, *f, *g;
    shape s;
    size_t n;
} fd_ctx;

static double fd_objective(void *p)
{
    fd_ctx *c = p;
    memcpy(c->out, c->x, c->n * sizeof(double));
    vkg_ref_rope_fwd_f64(c->out, c->f, c->s.B, c->s.T, c->s.NH, c->s.NKV, c->s.D);
    return vkg_ref_dot_compensated(c->out, c->g, c->n);
}

static void test_reference_fd(void **state)
{
    (void)state;
    const shape s = {2, 5, 2, 1, 6, 0};
    enum { N = 2 * 5 * (2 + 2) * 6 };
    double x[N], out[N], g[N], grad[N], f[3];
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 54);
    vkg_test_fill_uniform_f64(&r, x, N, -2, 2);
    vkg_test_fill_uniform_f64(&r, g, N, -1, 1);
    for (int i = 0; i < 3; i++)
        f[i] = pow(10000.0, -2.0 * i / 6);
    memcpy(grad, g, sizeof g);
    vkg_ref_rope_bwd_f64(grad, f, s.B, s.T, s.NH, s.NKV, s.D);
    fd_ctx c = {x, out, f, g, s, N};
    llama_fd("rope dqkv", x, grad, N, N, fd_objective, &c, 1e-6);
}

/* The comparison bites, and the convention is rotate_half: the kernel's output differs from a
 * rotation of interleaved pairs (2i, 2i + 1), the other RoPE convention. */
static void test_convention_bites(void **state)
{
    vkg_gpu *g = *state;
    const shape s = {1, 6, 2, 1, 8, 0};
    size_t n = qkv_elems(&s), W = (size_t)(s.NH + 2 * s.NKV) * s.D;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 55);
    float *x = vkg_test_random(&r, n, -2, 2), *f = inv_freqs(s.D, 0), *other = vkg_test_alloc(n);
    float *got = vkg_test_alloc(n);
    memcpy(other, x, n * 4);
    for (int t = 0; t < s.T; t++)
        for (int h = 0; h < s.NH + s.NKV; h++)
            for (int i = 0; i < s.D / 2; i++) {
                float *v = other + (size_t)t * W + (size_t)h * s.D;
                double a = t * (double)f[i], x1 = v[2 * i], x2 = v[2 * i + 1];
                v[2 * i] = (float)(x1 * cos(a) - x2 * sin(a));
                v[2 * i + 1] = (float)(x2 * cos(a) + x1 * sin(a));
            }
    vkg_tensor tx = vkg_gpu_upload(g, x, n * 4), tf = vkg_gpu_upload(g, f, (size_t)s.D / 2 * 4);
    VKG_ASSERT_OK(vkg_op_rope_fwd(g->cmd, tx, tf, s.B, s.T, s.NH, s.NKV, s.D));
    vkg_gpu_run(g);
    vkg_gpu_download(g, tx, got, n * 4);
    vkg_test_cmp cmp;
    assert_false(vkg_test_compare("interleaved pairs", got, other, n, VKG_TEST_REL_BOUND, &cmp));
    free(x), free(f), free(other), free(got);
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 2, T = 3, NH = 2, NKV = 1, D = 6, W = (NH + 2 * NKV) * D };
    vkg_tensor x = vkg_gpu_poisoned(g, B * T * W), short_x = vkg_gpu_poisoned(g, B * T * W - 1);
    vkg_tensor f = vkg_gpu_poisoned(g, D / 2), short_f = vkg_gpu_poisoned(g, D / 2 - 1);
    vkg_tensor x16 = vkg_gpu_bf16_poisoned(g, B * T * W);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_rope_fwd(c, short_x, f, B, T, NH, NKV, D),
                       "rope_fwd: tensor qkv holds 143 elements, the shape needs 144");
    vkg_expect_invalid(vkg_op_rope_fwd(c, x, short_f, B, T, NH, NKV, D),
                       "rope_fwd: tensor inv_freq");
    vkg_expect_invalid(vkg_op_rope_fwd(c, x, f, B, T, NH, NKV, 5),
                       "rope_fwd: the head dimension D must be even, got 5");
    vkg_expect_invalid(vkg_op_rope_fwd(c, x, f, B, T, NH, 0, D),
                       "rope_fwd: B, T, NH, NKV and D must be positive");
    vkg_expect_invalid(vkg_op_rope_fwd(c, x16, f, B, T, NH, NKV, D),
                       "rope_fwd: a bf16 qkv needs D a multiple of 4, got 6");
    vkg_expect_invalid(vkg_op_rope_bwd(c, short_x, f, B, T, NH, NKV, D),
                       "rope_bwd: tensor dqkv holds 143 elements");
    vkg_expect_invalid(vkg_op_rope_bwd(c, x16, f, B, T, NH, NKV, 4),
                       "rope_bwd: tensor dqkv is bf16");
    vkg__op_set_max_elems(W - 1);
    vkg_status st = vkg_op_rope_fwd(c, x, f, B, T, NH, NKV, D);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "rope_fwd: one position's row of (NH + 2 NKV) D=24 elements is more");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rope_fwd_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_blocks_of_positions, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_reference_quarter_turn),
        cmocka_unit_test(test_reference_fd),
        cmocka_unit_test_setup_teardown(test_convention_bites, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
