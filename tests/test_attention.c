/* GPU tests of causal multi-head self-attention in the flash form (src/ops/attention.c, shaders
 * attention_fwd.comp and attention_bwd_*.comp) against the CPU reference vkg_ref_attention_fwd /
 * vkg_ref_attention_bwd (double accumulation, rounded once).
 *
 * Every shape runs with both kernel forms (VKG_ATTENTION_DIRECT, the subgroup form of CPU
 * devices, and VKG_ATTENTION_SHARED, the rows form of GPUs, set through the device's tuning), so
 * both are checked on whatever device runs the tests. Per shape and form:
 *  - out and lse from the forward pass, and dqkv from two backward passes: one given the
 *    reference's out and lse (the backward alone) and one given the forward's own (the chain the
 *    model runs). Each of dqkv's parts dq, dk, dv is also compared alone (dqkv minus its start).
 *  - Outputs and the delta scratch start as NaN, so an unwritten element fails; dqkv starts from
 *    random values that the reference starts from too (the backward accumulates); every tensor is
 *    followed by a NaN guard that must stay intact (nothing written past the end).
 *  - Bound: relative L2 error at most VKG_TEST_REL_BOUND = 1e-5 and every element within
 *    1e-5 |ref| + 1e-4 rms(ref) (vkg_test_compare), all elements finite. Why 1e-5: the kernels
 *    sum in fp32 over at most hs = 80 channels and T = 256 keys or queries, where rounding errors
 *    of random sign grow as sqrt(n) 2^-24, about 1e-6 relative; the backward recomputes the
 *    probabilities as exp(s - lse) from a float lse (|lse| < 10 here: 6e-7 absolute, so under
 *    1e-6 relative in each probability). The measured errors (printed) are 1e-7 to 1e-6, so 1e-5
 *    leaves a margin of ten and still fails on a probability off by 1e-4 (test_bound_bites:
 *    lse shifted by 1e-4 is caught).
 *  - Determinism: the same command list run again from the same inputs, and a second list
 *    recorded afresh, reproduce every output bit for bit.
 * Shapes: T = 1, 7, 64 and 256, each with head sizes 8, 16, 32 and 64, heads 1, 2 and 4 and
 * batches 1 and 3 in turn, plus awkward ones (hs = 18 and 80, T = 33 and 130, GPT-2's 12 heads
 * of 64). The second ctest run under a lowered shader index limit (VKG_MAX_DISPATCH_ELEMS,
 * tests/CMakeLists.txt) records the larger shapes in blocks of batches.
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
 * QK_RANGE^2 / 3 = 1.3 whatever hs (the scale is 1/sqrt(hs)), so the softmaxes are neither
 * uniform nor one-hot. */
#define QK_RANGE 2.0f

typedef struct att_shape {
    int B, T, C, NH;
} att_shape;

typedef struct att_host {
    size_t n_qkv, n_out, n_lse, n_att;
    float *qkv, *dout, *dqkv0;     /* inputs; dqkv0 = where dqkv starts */
    float *out, *lse, *att, *dqkv; /* reference results (att: the probabilities) */
} att_host;

static void host_init(att_host *h, att_shape s, uint64_t seed)
{
    h->n_qkv = (size_t)s.B * s.T * 3 * s.C;
    h->n_out = (size_t)s.B * s.T * s.C;
    h->n_lse = (size_t)s.B * s.NH * s.T;
    h->n_att = (size_t)s.B * s.NH * s.T * s.T;
    h->qkv = vkg_test_alloc(h->n_qkv);
    h->dout = vkg_test_alloc(h->n_out);
    h->dqkv0 = vkg_test_alloc(h->n_qkv);
    h->out = vkg_test_alloc(h->n_out);
    h->lse = vkg_test_alloc(h->n_lse);
    h->att = vkg_test_alloc(h->n_att);
    h->dqkv = vkg_test_alloc(h->n_qkv);
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, seed);
    vkg_test_fill_uniform(&rng, h->qkv, h->n_qkv, -QK_RANGE, QK_RANGE);
    vkg_test_fill_uniform(&rng, h->dout, h->n_out, -1.0f, 1.0f);
    vkg_test_fill_uniform(&rng, h->dqkv0, h->n_qkv, -0.5f, 0.5f);
    vkg_ref_attention_fwd(h->out, h->lse, h->att, h->qkv, s.B, s.T, s.C, s.NH);
    memcpy(h->dqkv, h->dqkv0, h->n_qkv * sizeof(float));
    vkg_ref_attention_bwd(h->dqkv, h->dout, h->qkv, h->lse, s.B, s.T, s.C, s.NH);
}

static void host_free(att_host *h)
{
    free(h->qkv);
    free(h->dout);
    free(h->dqkv0);
    free(h->out);
    free(h->lse);
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

/* Relative L2 error of one part (0 = q, 1 = k, 2 = v) of the gradient alone; fails above the
 * bound. At T = 1 the gradients of q and k are 0 (the only probability is 1, whatever the
 * score), so there the reference holds only rounding residue (about 1e-8) and the part is held
 * to an absolute bound of 1e-6 instead. */
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
    if (s.T == 1 && part < 2) {
        double max_abs = 0.0;
        for (size_t j = 0; j < n; j++) {
            if (!(fabsf(g[j]) <= 1e-6f))
                fail_msg("%s at T = 1: element %zu is %g, expected 0", what, j, (double)g[j]);
            max_abs = fabs(g[j]) > max_abs ? fabs(g[j]) : max_abs;
        }
        free(g);
        free(r);
        return max_abs;
    }
    int ok = vkg_test_compare(what, g, r, n, VKG_TEST_REL_BOUND, &cmp);
    free(g);
    free(r);
    if (!ok)
        fail_msg("%s differs from the reference: rel_l2 %.3g max_rel %.3g first bad %zu", what,
                 cmp.rel_l2, cmp.max_rel, cmp.first_bad);
    return cmp.rel_l2;
}

/* The device tensors of one shape: inputs uploaded, outputs poisoned. */
typedef struct att_dev {
    vkg_tensor qkv, dout, out, lse, dqkv, dqkv2, delta, ref_out, ref_lse;
} att_dev;

static att_dev dev_init(vkg_gpu *g, const att_host *h)
{
    att_dev d;
    d.qkv = vkg_gpu_upload(g, h->qkv, h->n_qkv * sizeof(float));
    d.dout = vkg_gpu_upload(g, h->dout, h->n_out * sizeof(float));
    d.out = vkg_gpu_poisoned(g, h->n_out);
    d.lse = vkg_gpu_poisoned(g, h->n_lse);
    d.dqkv = vkg_gpu_upload(g, h->dqkv0, h->n_qkv * sizeof(float));
    d.dqkv2 = vkg_gpu_upload(g, h->dqkv0, h->n_qkv * sizeof(float));
    d.delta = vkg_gpu_poisoned(g, h->n_lse);
    d.ref_out = vkg_gpu_upload(g, h->out, h->n_out * sizeof(float));
    d.ref_lse = vkg_gpu_upload(g, h->lse, h->n_lse * sizeof(float));
    return d;
}

/* Forward; backward from the reference's out and lse into dqkv; backward from the forward's own
 * into dqkv2 (the delta scratch serves both, one after the other). */
static vkg_cmd *record(vkg_gpu *g, const att_dev *d, att_shape s)
{
    vkg_cmd *c = NULL;
    VKG_ASSERT_OK(vkg_cmd_create(g->dev, &c));
    VKG_ASSERT_OK(vkg_cmd_begin(c));
    VKG_ASSERT_OK(vkg_op_attention_fwd(c, d->out, d->lse, d->qkv, s.B, s.T, s.C, s.NH));
    VKG_ASSERT_OK(vkg_op_attention_bwd(c, d->dqkv, d->dout, d->qkv, d->ref_out, d->ref_lse, s.B,
                                       s.T, s.C, s.NH, d->delta));
    vkg_cmd_barrier(c);
    VKG_ASSERT_OK(vkg_op_attention_bwd(c, d->dqkv2, d->dout, d->qkv, d->out, d->lse, s.B, s.T, s.C,
                                       s.NH, d->delta));
    VKG_ASSERT_OK(vkg_cmd_end(c));
    return c;
}

/* Outputs back to their starting contents: NaN, or dqkv0 for the accumulated gradients. */
static void reset_outputs(vkg_gpu *g, const att_dev *d, const att_host *h)
{
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, d->dqkv, 0, h->dqkv0, h->n_qkv * sizeof(float)));
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, d->dqkv2, 0, h->dqkv0, h->n_qkv * sizeof(float)));
    float *nan = vkg_test_alloc(h->n_out);
    for (size_t i = 0; i < h->n_out; i++)
        nan[i] = NAN;
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, d->out, 0, nan, h->n_out * sizeof(float)));
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, d->lse, 0, nan, h->n_lse * sizeof(float)));
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, d->delta, 0, nan, h->n_lse * sizeof(float)));
    free(nan);
}

/* The outputs' bytes: out, lse, dqkv, dqkv2 one after the other. */
static float *snapshot(vkg_gpu *g, const att_dev *d, const att_host *h)
{
    float *v = vkg_test_alloc(h->n_out + h->n_lse + 2 * h->n_qkv);
    vkg_gpu_download(g, d->out, v, h->n_out * sizeof(float));
    vkg_gpu_download(g, d->lse, v + h->n_out, h->n_lse * sizeof(float));
    vkg_gpu_download(g, d->dqkv, v + h->n_out + h->n_lse, h->n_qkv * sizeof(float));
    vkg_gpu_download(g, d->dqkv2, v + h->n_out + h->n_lse + h->n_qkv, h->n_qkv * sizeof(float));
    return v;
}

/* Forward and backward of one shape with the current form, checked against h. */
static void check_shape(vkg_gpu *g, att_shape s, const att_host *h, const char *form)
{
    att_dev d = dev_init(g, h);
    vkg_cmd *c = record(g, &d, s);
    VKG_ASSERT_OK(vkg_cmd_run(c, 0));

    vkg_test_cmp e_out = vkg_gpu_expect(g, "out", d.out, h->out, h->n_out, VKG_TEST_REL_BOUND);
    vkg_test_cmp e_lse = vkg_gpu_expect(g, "lse", d.lse, h->lse, h->n_lse, VKG_TEST_REL_BOUND);
    vkg_gpu_expect(g, "dqkv", d.dqkv, h->dqkv, h->n_qkv, VKG_TEST_REL_BOUND);
    vkg_test_cmp e_chain =
        vkg_gpu_expect(g, "dqkv (chained)", d.dqkv2, h->dqkv, h->n_qkv, VKG_TEST_REL_BOUND);
    vkg_gpu_expect_guard(g, "delta", d.delta);
    float *first = snapshot(g, &d, h);
    const float *dq1 = first + h->n_out + h->n_lse;
    const float *dq2 = dq1 + h->n_qkv;
    double e_dq = part_error("dq", dq1, h, s, 0), e_dk = part_error("dk", dq1, h, s, 1),
           e_dv = part_error("dv", dq1, h, s, 2);
    for (int part = 0; part < 3; part++)
        part_error(part == 0   ? "dq (chained)"
                   : part == 1 ? "dk (chained)"
                               : "dv (chained)",
                   dq2, h, s, part);
    printf("attention B=%d T=%d C=%d NH=%d hs=%d (%s form): rel_l2 out %.2e lse %.2e (max abs "
           "%.1e) dq %.2e dk %.2e dv %.2e chained dqkv %.2e\n",
           s.B, s.T, s.C, s.NH, s.C / s.NH, form, e_out.rel_l2, e_lse.rel_l2, e_lse.max_abs, e_dq,
           e_dk, e_dv, e_chain.rel_l2);

    /* the same list again, then a list recorded afresh: bitwise identical */
    size_t bytes = (h->n_out + h->n_lse + 2 * h->n_qkv) * sizeof(float);
    for (int again = 0; again < 2; again++) {
        reset_outputs(g, &d, h);
        if (again) {
            vkg_cmd_destroy(&c);
            c = record(g, &d, s);
        }
        VKG_ASSERT_OK(vkg_cmd_run(c, 0));
        float *next = snapshot(g, &d, h);
        if (memcmp(next, first, bytes) != 0)
            fail_msg("%s form, B=%d T=%d C=%d NH=%d: %s differs from the first run", form, s.B, s.T,
                     s.C, s.NH, again ? "a list recorded again" : "the same list run again");
        free(next);
    }
    vkg_cmd_destroy(&c);
    free(first);
}

static void with_form(vkg_gpu *g, vkg_attention_variant v)
{
    vkg_device_tuning t = vkg_device_tuning_get(g->dev);
    t.attention = v;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
}

/* Run shape s with both kernel forms, whatever the device; the device's own form afterwards. */
static void check_attention(vkg_gpu *g, att_shape s, uint64_t seed)
{
    att_host h;
    host_init(&h, s, seed);
    expect_informative_softmax(&h, s);
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    with_form(g, VKG_ATTENTION_DIRECT);
    check_shape(g, s, &h, "subgroup");
    with_form(g, VKG_ATTENTION_SHARED);
    check_shape(g, s, &h, "rows");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
    host_free(&h);
}

/* Four shapes at T: head sizes 8, 16, 32, 64 with heads and batches taken in turn from (1, 2, 4)
 * and (1, 3). */
static void check_sequence(vkg_gpu *g, int T, int turn)
{
    static const int hs[4] = {8, 16, 32, 64}, nh[3] = {1, 2, 4}, bs[2] = {1, 3};
    for (int i = 0; i < 4; i++) {
        int NH = nh[(i + turn) % 3], B = bs[(i + turn) % 2];
        check_attention(g, (att_shape){.B = B, .T = T, .C = hs[i] * NH, .NH = NH},
                        (uint64_t)(100 * T + i));
    }
}

/* T = 1: the only key is the query's own, out = v exactly and the gradients of q and k are 0 */
static void test_single_position(void **state)
{
    check_sequence(*state, 1, 0);
}

/* T = 7: less than one tile of either form */
static void test_short_sequence(void **state)
{
    check_sequence(*state, 7, 1);
}

/* T = 64: several tiles of the subgroup form, one block of the rows form */
static void test_medium_sequence(void **state)
{
    check_sequence(*state, 64, 2);
}

/* T = 256: several blocks and tiles of both forms, tiles wholly above the diagonal skipped */
static void test_long_sequence(void **state)
{
    check_sequence(*state, 256, 0);
}

/* T just past a tile, hs = 18 (not a multiple of the 8 lanes); one head of 80 channels; T = 130
 * past two blocks of the rows form; GPT-2's heads */
static void test_awkward_shapes(void **state)
{
    check_attention(*state, (att_shape){.B = 2, .T = 33, .C = 54, .NH = 3}, 3);
    check_attention(*state, (att_shape){.B = 3, .T = 20, .C = 80, .NH = 1}, 4);
    check_attention(*state, (att_shape){.B = 1, .T = 130, .C = 64, .NH = 2}, 5);
    check_attention(*state, (att_shape){.B = 1, .T = 64, .C = 768, .NH = 12}, 6);
}

/* Unsplit under the default limit. Under VKG_MAX_DISPATCH_ELEMS=147456 (the GPT-2 shape's one
 * batch of qkv, T*3C, the most it can be) the first is recorded in blocks of 4 batches (qkv of
 * 36864 elements per batch), the second in blocks of 2 (73728), as are the T = 256 shapes of
 * three batches. */
static void test_split_shapes(void **state)
{
    check_attention(*state, (att_shape){.B = 5, .T = 64, .C = 192, .NH = 3}, 7);
    check_attention(*state, (att_shape){.B = 3, .T = 256, .C = 96, .NH = 2}, 8);
}

/* The bound is tight enough to see a probability off by 1e-4: the backward given an lse shifted
 * by 1e-4 (every probability scaled by e^-1e-4) fails the comparison, in each form. */
static void test_bound_bites(void **state)
{
    vkg_gpu *g = *state;
    att_shape s = {.B = 1, .T = 64, .C = 64, .NH = 2};
    att_host h;
    host_init(&h, s, 9);
    float *shifted = vkg_test_alloc(h.n_lse), *got = vkg_test_alloc(h.n_qkv);
    for (size_t i = 0; i < h.n_lse; i++)
        shifted[i] = h.lse[i] + 1e-4f;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    for (int form = 0; form < 2; form++) {
        with_form(g, form ? VKG_ATTENTION_SHARED : VKG_ATTENTION_DIRECT);
        vkg_tensor qkv = vkg_gpu_upload(g, h.qkv, h.n_qkv * sizeof(float));
        vkg_tensor dout = vkg_gpu_upload(g, h.dout, h.n_out * sizeof(float));
        vkg_tensor out = vkg_gpu_upload(g, h.out, h.n_out * sizeof(float));
        vkg_tensor lse = vkg_gpu_upload(g, shifted, h.n_lse * sizeof(float));
        vkg_tensor dqkv = vkg_gpu_upload(g, h.dqkv0, h.n_qkv * sizeof(float));
        vkg_tensor delta = vkg_gpu_poisoned(g, h.n_lse);
        VKG_ASSERT_OK(
            vkg_op_attention_bwd(g->cmd, dqkv, dout, qkv, out, lse, s.B, s.T, s.C, s.NH, delta));
        vkg_gpu_run(g);
        vkg_gpu_download(g, dqkv, got, h.n_qkv * sizeof(float));
        vkg_test_cmp cmp;
        int ok = vkg_test_compare("dqkv", got, h.dqkv, h.n_qkv, VKG_TEST_REL_BOUND, &cmp);
        printf("lse + 1e-4 (%s form): dqkv rel_l2 %.2e\n", form ? "rows" : "subgroup", cmp.rel_l2);
        assert_false(ok);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
    free(shifted);
    free(got);
    host_free(&h);
}

static void test_bad_shapes(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 1, T = 4, C = 12, NH = 3 };
    size_t n_qkv = B * T * 3 * C, n_out = B * T * C, n_lse = B * NH * T;
    vkg_tensor qkv = vkg_gpu_poisoned(g, n_qkv), out = vkg_gpu_poisoned(g, n_out);
    vkg_tensor lse = vkg_gpu_poisoned(g, n_lse), delta = vkg_gpu_poisoned(g, n_lse);
    vkg_tensor short_lse = vkg_tensor_view(lse, 0, (n_lse - 1) * sizeof(float));
    vkg_tensor short_delta = vkg_tensor_view(delta, 0, (n_lse - 1) * sizeof(float));
    vkg_tensor short_qkv = vkg_tensor_view(qkv, 0, (n_qkv - 1) * sizeof(float));
    vkg_tensor short_out = vkg_tensor_view(out, 0, (n_out - 1) * sizeof(float));

    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, lse, qkv, B, T, 10, NH),
                       "attention_fwd: C=10 is not divisible by NH=3");
    vkg_expect_invalid(vkg_op_attention_bwd(g->cmd, qkv, out, qkv, out, lse, B, T, 10, NH, delta),
                       "attention_bwd: C=10 is not divisible by NH=3");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, lse, qkv, B, 0, C, NH),
                       "attention_fwd: B, T, C and NH must be positive");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, short_lse, qkv, B, T, C, NH),
                       "attention_fwd: tensor lse holds");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, out, lse, short_qkv, B, T, C, NH),
                       "attention_fwd: tensor qkv holds");
    vkg_expect_invalid(vkg_op_attention_fwd(g->cmd, short_out, lse, qkv, B, T, C, NH),
                       "attention_fwd: tensor out holds");
    vkg_expect_invalid(
        vkg_op_attention_bwd(g->cmd, qkv, out, qkv, out, lse, B, T, C, NH, short_delta),
        "attention_bwd: tensor delta holds");
    vkg_expect_invalid(
        vkg_op_attention_bwd(g->cmd, qkv, out, qkv, out, short_lse, B, T, C, NH, delta),
        "attention_bwd: tensor lse holds");
    vkg_expect_invalid(
        vkg_op_attention_bwd(g->cmd, qkv, out, qkv, short_out, lse, B, T, C, NH, delta),
        "attention_bwd: tensor out holds");
    vkg_expect_invalid(
        vkg_op_attention_bwd(g->cmd, short_qkv, out, qkv, out, lse, B, T, C, NH, delta),
        "attention_bwd: tensor dqkv holds");
    assert_int_equal(vkg_cmd_dispatch_count(g->cmd), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_position, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_short_sequence, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_medium_sequence, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_long_sequence, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_awkward_shapes, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_split_shapes, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bound_bites, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_shapes, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
