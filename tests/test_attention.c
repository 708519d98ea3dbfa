/* GPU tests of causal multi-head self-attention (src/ops/attention.c, shaders attention_*.comp)
 * against the CPU reference vkg_ref_attention_fwd / vkg_ref_attention_bwd.
 *
 * Bound: out, att and dqkv, and each of the three gradient parts dq, dk, dv taken alone (dqkv
 * minus its starting value), must be within relative L2 error VKG_TEST_REL_BOUND = 1e-5 of the
 * reference, with every element finite. Outputs start as NaN so an unwritten element fails; dqkv
 * starts from random values that the reference starts from too (the backward accumulates); att
 * must be exactly 0 above the diagonal; a second run of the same command list must reproduce every
 * output bit for bit. Every shape runs with both kernel forms (VKG_ATTENTION_DIRECT and
 * VKG_ATTENTION_SHARED, set through the device's tuning), so both are checked on whatever device
 * runs the tests. Two shapes exist for the second ctest run, under a lowered shader index limit
 * (VKG_MAX_DISPATCH_ELEMS, tests/CMakeLists.txt): it records them in blocks of whole batches and
 * in blocks of heads of one batch.
 */
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

/* q and k uniform in [-QK_RANGE, QK_RANGE): scores have a standard deviation of about
 * QK_RANGE^2 / 3 = 1.3, so the softmaxes are neither uniform nor one-hot. */
#define QK_RANGE 2.0f

typedef struct att_shape {
    int B, T, C, NH;
} att_shape;

typedef struct att_host {
    size_t n_qkv, n_out, n_att;
    float *qkv, *dout, *dqkv0; /* inputs; dqkv0 = where dqkv starts */
    float *out, *att, *dqkv;   /* reference results */
} att_host;

static void host_init(att_host *h, att_shape s, uint64_t seed)
{
    h->n_qkv = (size_t)s.B * s.T * 3 * s.C;
    h->n_out = (size_t)s.B * s.T * s.C;
    h->n_att = (size_t)s.B * s.NH * s.T * s.T;
    h->qkv = vkg_test_alloc(h->n_qkv);
    h->dout = vkg_test_alloc(h->n_out);
    h->dqkv0 = vkg_test_alloc(h->n_qkv);
    h->out = vkg_test_alloc(h->n_out);
    h->att = vkg_test_alloc(h->n_att);
    h->dqkv = vkg_test_alloc(h->n_qkv);
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, seed);
    vkg_test_fill_uniform(&rng, h->qkv, h->n_qkv, -QK_RANGE, QK_RANGE);
    vkg_test_fill_uniform(&rng, h->dout, h->n_out, -1.0f, 1.0f);
    vkg_test_fill_uniform(&rng, h->dqkv0, h->n_qkv, -0.5f, 0.5f);
    vkg_ref_attention_fwd(h->out, h->att, h->qkv, s.B, s.T, s.C, s.NH);
    memcpy(h->dqkv, h->dqkv0, h->n_qkv * sizeof(float));
    vkg_ref_attention_bwd(h->dqkv, h->dout, h->qkv, h->att, s.B, s.T, s.C, s.NH);
}

static void host_free(att_host *h)
{
    free(h->qkv);
    free(h->dout);
    free(h->dqkv0);
    free(h->out);
    free(h->att);
    free(h->dqkv);
}

/* The reference softmaxes must be informative: over rows with at least 8 keys, the mean largest
 * probability lies well between uniform (1/(t+1)) and one-hot (1). */
static void expect_informative_softmax(const att_host *h, att_shape s)
{
    double sum_max = 0.0, sum_uniform = 0.0;
    int rows = 0;
    for (int bh = 0; bh < s.B * s.NH; bh++)
        for (int t = 7; t < s.T; t++) {
            const float *row = h->att + ((size_t)bh * s.T + t) * s.T;
            float m = 0.0f;
            for (int t2 = 0; t2 <= t; t2++)
                m = row[t2] > m ? row[t2] : m;
            sum_max += m;
            sum_uniform += 1.0 / (t + 1);
            rows++;
        }
    if (rows == 0)
        return;
    double mean_max = sum_max / rows, mean_uniform = sum_uniform / rows;
    if (!(mean_max > 1.5 * mean_uniform && mean_max < 0.9))
        fail_msg("test inputs give degenerate softmaxes: mean row max %.3f (uniform %.3f)",
                 mean_max, mean_uniform);
}

/* Relative L2 error of one part (0 = q, 1 = k, 2 = v) of the gradient alone. */
static double part_error(const char *what, const float *got, const att_host *h, att_shape s,
                         int part)
{
    size_t n = h->n_out;
    float *g = vkg_test_alloc(n), *r = vkg_test_alloc(n);
    size_t i = 0;
    for (size_t bt = 0; bt < (size_t)s.B * s.T; bt++)
        for (int c = 0; c < s.C; c++, i++) {
            size_t o = bt * 3 * s.C + (size_t)part * s.C + c;
            g[i] = got[o] - h->dqkv0[o];
            r[i] = h->dqkv[o] - h->dqkv0[o];
        }
    vkg_test_cmp cmp;
    int ok = vkg_test_compare(what, g, r, n, VKG_TEST_REL_BOUND, &cmp);
    free(g);
    free(r);
    if (!ok)
        fail_msg("%s differs from the reference: rel_l2 %.3g", what, cmp.rel_l2);
    return cmp.rel_l2;
}

static double rel_error(const char *what, const float *got, const float *ref, size_t n)
{
    vkg_test_cmp cmp;
    vkg_test_compare(what, got, ref, n, VKG_TEST_REL_BOUND, &cmp);
    return cmp.rel_l2;
}

static void expect_zero_above_diagonal(const float *att, att_shape s)
{
    for (int bh = 0; bh < s.B * s.NH; bh++)
        for (int t = 0; t < s.T; t++)
            for (int t2 = t + 1; t2 < s.T; t2++) {
                float v = att[((size_t)bh * s.T + t) * s.T + t2];
                if (v != 0.0f)
                    fail_msg("att[bh=%d, t=%d, t2=%d] = %g above the diagonal, expected 0", bh, t,
                             t2, (double)v);
            }
}

/* Forward and backward of one shape with the current tiling, checked against h. */
static void check_shape(vkg_gpu *g, att_shape s, const att_host *h, const char *tiling)
{
    vkg_tensor qkv = vkg_gpu_upload(g, h->qkv, h->n_qkv * sizeof(float));
    vkg_tensor out = vkg_gpu_poisoned(g, h->n_out);
    vkg_tensor att = vkg_gpu_poisoned(g, h->n_att);
    vkg_tensor dout = vkg_gpu_upload(g, h->dout, h->n_out * sizeof(float));
    vkg_tensor dqkv = vkg_gpu_upload(g, h->dqkv0, h->n_qkv * sizeof(float));
    vkg_tensor dpre = vkg_gpu_poisoned(g, h->n_att);
    /* the backward reads the reference att, so it is checked on its own */
    vkg_tensor att_in = vkg_gpu_upload(g, h->att, h->n_att * sizeof(float));
    /* a list of its own, recorded once and run twice */
    vkg_cmd *c = NULL;
    VKG_ASSERT_OK(vkg_cmd_create(g->dev, &c));
    VKG_ASSERT_OK(vkg_cmd_begin(c));
    VKG_ASSERT_OK(vkg_op_attention_fwd(c, out, att, qkv, s.B, s.T, s.C, s.NH));
    VKG_ASSERT_OK(vkg_op_attention_bwd(c, dqkv, dout, qkv, att_in, s.B, s.T, s.C, s.NH, dpre));
    VKG_ASSERT_OK(vkg_cmd_end(c));
    VKG_ASSERT_OK(vkg_cmd_run(c, 0));

    vkg_gpu_expect(g, "out", out, h->out, h->n_out, VKG_TEST_REL_BOUND);
    vkg_gpu_expect(g, "att", att, h->att, h->n_att, VKG_TEST_REL_BOUND);
    vkg_gpu_expect(g, "dqkv", dqkv, h->dqkv, h->n_qkv, VKG_TEST_REL_BOUND);

    float *out1 = vkg_test_alloc(h->n_out), *att1 = vkg_test_alloc(h->n_att);
    float *dqkv1 = vkg_test_alloc(h->n_qkv), *again = vkg_test_alloc(h->n_qkv);
    vkg_gpu_download(g, out, out1, h->n_out * sizeof(float));
    vkg_gpu_download(g, att, att1, h->n_att * sizeof(float));
    vkg_gpu_download(g, dqkv, dqkv1, h->n_qkv * sizeof(float));
    expect_zero_above_diagonal(att1, s);
    double e_dq = part_error("dq", dqkv1, h, s, 0), e_dk = part_error("dk", dqkv1, h, s, 1),
           e_dv = part_error("dv", dqkv1, h, s, 2);
    printf("attention B=%d T=%d C=%d NH=%d (%s tiling): rel_l2 out %.2e att %.2e dqkv %.2e "
           "(dq %.2e dk %.2e dv %.2e)\n",
           s.B, s.T, s.C, s.NH, tiling, rel_error("out", out1, h->out, h->n_out),
           rel_error("att", att1, h->att, h->n_att), rel_error("dqkv", dqkv1, h->dqkv, h->n_qkv),
           e_dq, e_dk, e_dv);

    /* replay from the same starting dqkv, with the scratch poisoned again: bitwise identical */
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, dqkv, 0, h->dqkv0, h->n_qkv * sizeof(float)));
    size_t n_nan = h->n_att > h->n_out ? h->n_att : h->n_out;
    float *nan = vkg_test_alloc(n_nan);
    for (size_t i = 0; i < n_nan; i++)
        nan[i] = NAN;
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, dpre, 0, nan, h->n_att * sizeof(float)));
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, att, 0, nan, h->n_att * sizeof(float)));
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, out, 0, nan, h->n_out * sizeof(float)));
    free(nan);
    VKG_ASSERT_OK(vkg_cmd_run(c, 0));
    vkg_cmd_destroy(&c);
    vkg_gpu_download(g, dqkv, again, h->n_qkv * sizeof(float));
    assert_memory_equal(again, dqkv1, h->n_qkv * sizeof(float));
    vkg_gpu_download(g, out, again, h->n_out * sizeof(float));
    assert_memory_equal(again, out1, h->n_out * sizeof(float));
    free(again);
    again = vkg_test_alloc(h->n_att);
    vkg_gpu_download(g, att, again, h->n_att * sizeof(float));
    assert_memory_equal(again, att1, h->n_att * sizeof(float));
    free(again);
    free(out1);
    free(att1);
    free(dqkv1);
}

/* Run shape s with both kernel forms: the direct one (CPU devices' default) and the shared-memory
 * one (GPUs' default), whatever the device. */
static void check_attention(vkg_gpu *g, att_shape s, uint64_t seed)
{
    att_host h;
    host_init(&h, s, seed);
    expect_informative_softmax(&h, s);
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev), t = saved;
    t.attention = VKG_ATTENTION_DIRECT;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    check_shape(g, s, &h, "direct");
    t.attention = VKG_ATTENTION_SHARED;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    check_shape(g, s, &h, "shared-memory");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
    host_free(&h);
}

static void test_single_position(void **state)
{
    check_attention(*state, (att_shape){.B = 2, .T = 1, .C = 8, .NH = 2}, 1);
}

static void test_tiny_heads(void **state)
{
    check_attention(*state, (att_shape){.B = 1, .T = 7, .C = 12, .NH = 3}, 2);
}

/* T just past a tile, hs = 18: neither a power of two nor a multiple of 4 */
static void test_odd_sizes(void **state)
{
    check_attention(*state, (att_shape){.B = 2, .T = 33, .C = 54, .NH = 3}, 3);
}

/* one head of 80 channels: more than one shared-memory chunk and channel block */
static void test_single_wide_head(void **state)
{
    check_attention(*state, (att_shape){.B = 3, .T = 20, .C = 80, .NH = 1}, 4);
}

/* several query and key tiles */
static void test_long_sequence(void **state)
{
    check_attention(*state, (att_shape){.B = 1, .T = 130, .C = 64, .NH = 2}, 5);
}

static void test_gpt2_shape(void **state)
{
    check_attention(*state, (att_shape){.B = 1, .T = 64, .C = 768, .NH = 12}, 6);
}

/* Unsplit under the default limit. Under VKG_MAX_DISPATCH_ELEMS=147456 (the GPT-2 shape's one
 * batch of qkv, T*3C, the most it can be), the first is recorded in blocks of 4 batches (qkv of
 * 36864 elements per batch), the second in blocks of 2 heads (att of 65536 per head). */
static void test_split_shapes(void **state)
{
    check_attention(*state, (att_shape){.B = 5, .T = 64, .C = 192, .NH = 3}, 7);
    check_attention(*state, (att_shape){.B = 1, .T = 256, .C = 48, .NH = 3}, 8);
}

static void test_bad_shapes(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 1, T = 4, C = 12, NH = 3 };
    size_t n_qkv = B * T * 3 * C, n_out = B * T * C, n_att = B * NH * T * T;
    vkg_tensor qkv = vkg_gpu_poisoned(g, n_qkv), out = vkg_gpu_poisoned(g, n_out);
    vkg_tensor att = vkg_gpu_poisoned(g, n_att), dpre = vkg_gpu_poisoned(g, n_att);
    vkg_tensor short_att = vkg_tensor_view(att, 0, (n_att - 1) * sizeof(float));
    vkg_tensor short_dpre = vkg_tensor_view(dpre, 0, (n_att - 1) * sizeof(float));
    vkg_tensor short_qkv = vkg_tensor_view(qkv, 0, (n_qkv - 1) * sizeof(float));

    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, att, qkv, B, T, 10, NH),
                       "attention_fwd: C=10 is not divisible by NH=3");
    vkg_expect_invalid(vkg_op_attention_bwd(g->cmd, qkv, out, qkv, att, B, T, 10, NH, dpre),
                       "attention_bwd: C=10 is not divisible by NH=3");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, att, qkv, B, 0, C, NH),
                       "attention_fwd: B, T, C and NH must be positive");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, short_att, qkv, B, T, C, NH),
                       "attention_fwd: tensor att holds");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, att, short_qkv, B, T, C, NH),
                       "attention_fwd: tensor qkv holds");
    vkg_expect_invalid(vkg_op_attention_bwd(g->cmd, qkv, out, qkv, att, B, T, C, NH, short_dpre),
                       "attention_bwd: tensor dpre holds");
    vkg_expect_invalid(vkg_op_attention_bwd(g->cmd, short_qkv, out, qkv, att, B, T, C, NH, dpre),
                       "attention_bwd: tensor dqkv holds");
    assert_int_equal(vkg_cmd_dispatch_count(g->cmd), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_position, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_tiny_heads, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_odd_sizes, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_single_wide_head, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_long_sequence, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_gpt2_shape, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_split_shapes, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_shapes, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
