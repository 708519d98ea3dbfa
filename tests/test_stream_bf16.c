/* The residual stream stored bf16 (mixed precision): the kernels that write it (encoder_fwd,
 * residual_fwd, the fused residual + layernorm) and those that read it (layernorm_fwd, the fused
 * form's a, layernorm_bwd's inp, residual_fwd's a). Every check is exact, since each bf16 mode
 * runs the fp32 kernel's arithmetic on the widened values and rounds once:
 *  - a written stream is bitwise the fp32 result rounded to nearest even on the CPU
 *    (vkg_ref_bf16_bits): the embedding sum, a + b (a NaN row for a bad token stays NaN);
 *  - a read stream gives bitwise what the fp32 kernel gives on an fp32 tensor of the widened
 *    values: mean, rstd and out (fp32 and bf16) of the layernorm, dinp, dweight and dbias of its
 *    backward; the fused form normalizes the row it stored (its outputs are the unfused
 *    layernorm's on the widened res).
 * Also under a lowered shader index limit (blocks of rows and positions, dparams' wide variant,
 * flat chunks), outputs poisoned first and guards checked; odd C and a res whose type is not a's
 * are refused, naming them. */
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

/* Fail naming what unless the first `words` 32-bit words of a and b are equal. */
static void expect_words(vkg_gpu *g, const char *what, vkg_tensor a, vkg_tensor b, size_t words)
{
    uint32_t *x = malloc(words * 4), *y = malloc(words * 4);
    assert_non_null(x);
    assert_non_null(y);
    vkg_gpu_download(g, a, x, words * 4);
    vkg_gpu_download(g, b, y, words * 4);
    for (size_t i = 0; i < words; i++)
        if (x[i] != y[i])
            fail_msg("%s: word %zu is %08x, expected %08x", what, i, x[i], y[i]);
    free(x), free(y);
}

/* 1 when bf16 bits h are a NaN (all exponent bits set and a mantissa bit). */
static int bf16_is_nan(uint16_t h)
{
    return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0;
}

/* Fail naming what unless the bf16 tensor t holds exactly the n values of want rounded once (a
 * NaN wanted is any NaN: devices differ in the NaN their arithmetic makes). */
static void expect_rounded(vkg_gpu *g, const char *what, vkg_tensor t, const float *want, size_t n)
{
    uint16_t *h = malloc((n + 1) / 2 * 4);
    assert_non_null(h);
    vkg_gpu_download(g, t, h, (n + 1) / 2 * 4);
    for (size_t i = 0; i < n; i++)
        if (isnan(want[i]) ? !bf16_is_nan(h[i]) : h[i] != vkg_ref_bf16_bits(want[i]))
            fail_msg("%s: element %zu is bf16 %04x, the rounded fp32 result %04x (%.9g)", what, i,
                     h[i], vkg_ref_bf16_bits(want[i]), (double)want[i]);
    if (n % 2 && h[n] != 0)
        fail_msg("%s: the half word after the last element is %04x, not 0", what, h[n]);
    free(h);
}

/* encoder_fwd with a bf16 out (B x T positions, one bad token): the fp32 sums rounded. */
static void check_encoder(vkg_gpu *g, vkg_test_rng *r, int B, int T, int C, int V)
{
    size_t bt = (size_t)B * T, n = bt * (size_t)C;
    float *wte = vkg_test_random(r, (size_t)V * C, -1, 1), *wpe = vkg_test_random(r, T * C, -1, 1);
    int32_t *tok = malloc(bt * sizeof *tok);
    assert_non_null(tok);
    for (size_t i = 0; i < bt; i++)
        tok[i] = (int32_t)(vkg_test_rng_u64(r) % (uint64_t)V);
    float *want = vkg_test_alloc(n);
    vkg_ref_encoder_fwd(want, tok, wte, wpe, B, T, C); /* the reference reads any token's row */
    tok[bt - 1] = V;                                   /* out of range: a NaN row */
    for (int c = 0; c < C; c++)
        want[(bt - 1) * C + (size_t)c] = NAN;
    vkg_tensor tw = vkg_gpu_upload(g, wte, (size_t)V * C * 4),
               tp = vkg_gpu_upload(g, wpe, T * C * 4);
    vkg_tensor ti = vkg_gpu_upload(g, tok, bt * 4), o16 = vkg_gpu_bf16_poisoned(g, n);
    VKG_ASSERT_OK(vkg_op_encoder_fwd(g->cmd, o16, ti, tw, tp, B, T, C));
    vkg_gpu_run(g);
    char what[80];
    snprintf(what, sizeof what, "encoder_fwd bf16 out B=%d T=%d C=%d", B, T, C);
    expect_rounded(g, what, o16, want, n);
    vkg_gpu_expect_guard(g, what, o16);
    free(wte), free(wpe), free(tok), free(want);
}

static void test_encoder_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 31);
    check_encoder(g, &r, 1, 1, 2, 5);
    check_encoder(g, &r, 3, 7, 38, 50);
    check_encoder(g, &r, 4, 64, 768, 300);
    vkg__op_set_max_elems(10 * 38); /* blocks of one sequence; wte's wide gather */
    check_encoder(g, &r, 3, 7, 38, 200);
    vkg__op_set_max_elems(5 * 38); /* parts of a sequence */
    check_encoder(g, &r, 3, 7, 38, 4);
    vkg__op_set_max_elems(0);
    vkg_tensor o16 = vkg_gpu_bf16_poisoned(g, 9), t = vkg_gpu_poisoned(g, 9);
    vkg_expect_invalid(vkg_op_encoder_fwd(g->cmd, o16, t, t, t, 1, 3, 3), "even C");
}

/* residual_fwd writing the stream (a and b bf16, out bf16: the layer's closing add without a
 * layernorm after it) and reading it (a bf16, b and out fp32). */
static void check_residual(vkg_gpu *g, vkg_test_rng *r, size_t n)
{
    float *a = vkg_test_random(r, n, -3, 3), *b = vkg_test_random(r, n, -3, 3);
    float *sum = vkg_test_alloc(n), *got = vkg_test_alloc(n);
    vkg_tensor a16 = vkg_gpu_bf16_of(g, a, n), b16 = vkg_gpu_bf16_of(g, b, n);
    vkg_tensor b32 = vkg_gpu_upload(g, b, n * 4), o16 = vkg_gpu_bf16_poisoned(g, n);
    vkg_tensor o32 = vkg_gpu_poisoned(g, n);
    VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, o16, a16, b16, n));
    VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, o32, a16, b32, n));
    vkg_gpu_run(g);
    vkg_ref_bf16_round(a, n);
    float *b_r = vkg_test_alloc(n);
    memcpy(b_r, b, n * 4);
    vkg_ref_bf16_round(b_r, n);
    char what[64];
    snprintf(what, sizeof what, "residual_fwd bf16 a, b, out n=%zu", n);
    for (size_t i = 0; i < n; i++)
        sum[i] = a[i] + b_r[i];
    expect_rounded(g, what, o16, sum, n);
    vkg_gpu_expect_guard(g, what, o16);
    for (size_t i = 0; i < n; i++)
        sum[i] = a[i] + b[i];
    vkg_gpu_download(g, o32, got, n * 4);
    if (memcmp(got, sum, n * 4) != 0)
        fail_msg("residual_fwd bf16 a, fp32 b and out n=%zu: not a + b exactly", n);
    vkg_gpu_expect_guard(g, what, o32);
    free(a), free(b), free(b_r), free(sum), free(got);
}

static void test_residual_stream(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 32);
    const size_t sizes[] = {1, 7, 1001, 256 * 768 + 2};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        check_residual(g, &r, sizes[s]);
    vkg__op_set_max_elems(1000); /* chunks of whole words */
    check_residual(g, &r, 10001);
    vkg__op_set_max_elems(0);
}

/* The row-wise ops on a bf16 stream of N rows x C channels: layernorm_fwd reading it (out fp32
 * and bf16), the fused form writing it, layernorm_bwd reading it; each against the fp32 kernel
 * on the widened values, bitwise. */
static void check_layernorm(vkg_gpu *g, vkg_test_rng *r, int N, int C)
{
    size_t nc = (size_t)N * C;
    float *a = vkg_test_random(r, nc, -3, 3), *b = vkg_test_random(r, nc, -3, 3);
    float *w = vkg_test_random(r, C, 0.5f, 1.5f), *bias = vkg_test_random(r, C, -1, 1);
    float *dout = vkg_test_random(r, nc, -1, 1), *d0 = vkg_test_random(r, nc, -1, 1);
    float *dp0 = vkg_test_random(r, 2 * (size_t)C, -1, 1);
    vkg_tensor a16 = vkg_gpu_bf16_of(g, a, nc), b16 = vkg_gpu_bf16_of(g, b, nc);
    vkg_tensor tw = vkg_gpu_upload(g, w, C * 4), tb = vkg_gpu_upload(g, bias, C * 4);
    vkg_tensor td = vkg_gpu_upload(g, dout, nc * 4);
    vkg_gpu_run(g);
    vkg_tensor a32 = vkg_gpu_bf16_widened(g, a16, nc);
    char what[96];
    snprintf(what, sizeof what, "bf16 stream N=%d C=%d", N, C);

    /* layernorm_fwd reading the stream: out fp32 and bf16 */
    vkg_tensor o32[2], o16[2], st[2];
    for (int k = 0; k < 2; k++) {
        o32[k] = vkg_gpu_poisoned(g, nc), o16[k] = vkg_gpu_bf16_poisoned(g, nc);
        st[k] = vkg_gpu_poisoned(g, 2 * (size_t)N);
        vkg_tensor in = k ? a32 : a16, m = vkg_tensor_view(st[k], 0, 4 * (size_t)N);
        vkg_tensor rs = vkg_tensor_view(st[k], 4 * (size_t)N, 4 * (size_t)N);
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, o32[k], m, rs, in, tw, tb, N, C));
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, o16[k], m, rs, in, tw, tb, N, C));
    }
    vkg_gpu_run(g);
    expect_words(g, what, o32[0], o32[1], nc);
    expect_words(g, what, o16[0], o16[1], (nc + 1) / 2);
    expect_words(g, what, st[0], st[1], 2 * (size_t)N);
    vkg_gpu_expect_guard(g, what, o16[0]);

    /* the fused form writing it: res = a + b rounded, normalized as rounded */
    vkg_tensor res16 = vkg_gpu_bf16_poisoned(g, nc), f16 = vkg_gpu_bf16_poisoned(g, nc);
    vkg_tensor f32 = vkg_gpu_poisoned(g, nc), fst = vkg_gpu_poisoned(g, 2 * (size_t)N);
    vkg_tensor fm = vkg_tensor_view(fst, 0, 4 * (size_t)N);
    vkg_tensor fr = vkg_tensor_view(fst, 4 * (size_t)N, 4 * (size_t)N);
    VKG_ASSERT_OK(
        vkg_op_residual_layernorm_fwd(g->cmd, res16, f16, fm, fr, a16, b16, tw, tb, N, C));
    VKG_ASSERT_OK(
        vkg_op_residual_layernorm_fwd(g->cmd, res16, f32, fm, fr, a16, b16, tw, tb, N, C));
    vkg_gpu_run(g);
    float *x = vkg_gpu_download_bf16(g, a16, nc), *y = vkg_gpu_download_bf16(g, b16, nc);
    for (size_t i = 0; i < nc; i++)
        x[i] += y[i];
    expect_rounded(g, what, res16, x, nc);
    vkg_gpu_expect_guard(g, what, res16);
    vkg_tensor res32 = vkg_gpu_bf16_widened(g, res16, nc), u32 = vkg_gpu_poisoned(g, nc);
    vkg_tensor u16 = vkg_gpu_bf16_poisoned(g, nc), ust = vkg_gpu_poisoned(g, 2 * (size_t)N);
    vkg_tensor um = vkg_tensor_view(ust, 0, 4 * (size_t)N);
    vkg_tensor ur = vkg_tensor_view(ust, 4 * (size_t)N, 4 * (size_t)N);
    VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, u32, um, ur, res32, tw, tb, N, C));
    VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, u16, um, ur, res32, tw, tb, N, C));
    vkg_gpu_run(g);
    expect_words(g, what, f32, u32, nc);
    expect_words(g, what, f16, u16, (nc + 1) / 2);
    expect_words(g, what, fst, ust, 2 * (size_t)N);

    /* layernorm_bwd reading it (dinp and the parameter gradients accumulate into the same
     * starting values) */
    vkg_tensor di[2], dp[2];
    for (int k = 0; k < 2; k++) {
        di[k] = vkg_gpu_upload(g, d0, nc * 4), dp[k] = vkg_gpu_upload(g, dp0, 2 * (size_t)C * 4);
        vkg_tensor dw = vkg_tensor_view(dp[k], 0, 4 * (size_t)C);
        vkg_tensor db = vkg_tensor_view(dp[k], 4 * (size_t)C, 4 * (size_t)C);
        vkg_tensor m = vkg_tensor_view(st[0], 0, 4 * (size_t)N);
        vkg_tensor rs = vkg_tensor_view(st[0], 4 * (size_t)N, 4 * (size_t)N);
        VKG_ASSERT_OK(
            vkg_op_layernorm_bwd(g->cmd, di[k], dw, db, td, k ? a32 : a16, tw, m, rs, N, C));
    }
    vkg_gpu_run(g);
    expect_words(g, what, di[0], di[1], nc);
    expect_words(g, what, dp[0], dp[1], 2 * (size_t)C);
    free(a), free(b), free(w), free(bias), free(dout), free(d0), free(dp0), free(x), free(y);
}

static void test_layernorm_stream(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 33);
    const int shapes[][2] = {{1, 2}, {3, 38}, {37, 256}, {256, 768}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_layernorm(g, &r, shapes[s][0], shapes[s][1]);
    vkg__op_set_max_elems(2000); /* blocks of 7 rows of 256; dparams' wide variant */
    check_layernorm(g, &r, 37, 256);
    vkg__op_set_max_elems(0);
    vkg_tensor s16 = vkg_gpu_bf16_poisoned(g, 9), t = vkg_gpu_poisoned(g, 9);
    vkg_expect_invalid(vkg_op_layernorm_fwd(g->cmd, t, t, t, s16, t, t, 3, 3), "even C");
    vkg_expect_invalid(vkg_op_layernorm_bwd(g->cmd, t, t, t, t, s16, t, t, t, 3, 3), "even C");
    vkg_expect_invalid(vkg_op_residual_layernorm_fwd(g->cmd, s16, t, t, t, t, t, t, t, 3, 3),
                       "both be fp32 or both bf16");
    vkg_expect_invalid(vkg_op_residual_layernorm_fwd(g->cmd, t, t, t, t, s16, t, t, t, 3, 3),
                       "both be fp32 or both bf16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_encoder_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_residual_stream, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_layernorm_stream, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
