/* Grouped-query causal attention (src/ops/attention.c: vkg_op_attention_gqa_fwd/_bwd, NH query
 * heads over NKV key/value heads of D channels, qkv rows [q (NH D) | k (NKV D) | v (NKV D)])
 * against the double CPU reference vkg_ref_attention_gqa_fwd_f64 / _bwd_f64 (itself checked by
 * finite differences in test_attention_gqa_ref). Every shape runs with both kernel forms (the
 * subgroup form of CPU devices and the rows form of GPUs, set through the device's tuning).
 *  - fp32 kernels: out, lse and each of dq, dk, dv (dqkv minus its random start) within relative
 *    L2 VKG_TEST_REL_BOUND = 1e-5 of the reference, every element within 1e-5 |ref| + 1e-4
 *    rms(ref) (vkg_test_compare), all finite; outputs start as NaN, guards after every tensor
 *    intact. The same margins as test_attention: sums of at most D = 128 products and T = 70
 *    terms, the group's G <= 6 heads adding G times as many terms to dk and dv (about sqrt(G) the
 *    rounding, still near 1e-6). The backward runs twice from the same inputs: bitwise equal.
 *  - The checker bites: against a reference whose kv heads are swapped (query head h reading
 *    kv head h / G of the other pair), out and dk fail the bound.
 *  - NKV = NH, D = C/NH: vkg_op_attention_gqa_* and GPT-2's vkg_op_attention_* give the same bits.
 *  - bf16 qkv and out: the bf16 kernels equal the fp32 kernels on the widened values (lse and dqkv
 *    bitwise, out as the fp32 out rounded), as test_attention_bf16 holds GPT-2's.
 *  - Above a lowered index limit, passes in blocks of whole batches (dispatches counted), bitwise
 *    one dispatch's; one batch beyond the limit refused.
 *  - Refusals by name: NH not a multiple of NKV, D above VKG_ATTENTION_MAX_D, non-positive
 *    sizes, qkv / dqkv / out / dout too small for (NH + 2 NKV) D, an odd D with bf16.
 * The ctest run test_attention_gqa_split lowers the index limit (tests/CMakeLists.txt) so that
 * the split shape is recorded in blocks of batches; test_attention_gqa_as_nvidia takes a GPU's
 * tuning.
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
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

typedef struct gqa_shape {
    int B, T, NH, NKV, D;
} gqa_shape;

typedef struct gqa_sizes {
    size_t ld, oc, n_qkv, n_out, n_lse;
} gqa_sizes;

static gqa_sizes sizes_of(gqa_shape s)
{
    gqa_sizes z;
    z.oc = (size_t)s.NH * s.D;
    z.ld = z.oc + 2 * (size_t)s.NKV * s.D;
    z.n_qkv = (size_t)s.B * s.T * z.ld;
    z.n_out = (size_t)s.B * s.T * z.oc;
    z.n_lse = (size_t)s.B * s.NH * s.T;
    return z;
}

static double *dalloc(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

/* ------------------------------------------------------------- the kernels */

typedef struct gqa_host {
    gqa_sizes z;
    float *qkv, *dout, *dqkv0; /* inputs; dqkv0 = where dqkv starts */
    float *out, *lse, *dqkv;   /* the double reference, rounded */
} gqa_host;

/* Inputs (q and k in [-2, 2) as test_attention: informative softmaxes) and the reference on
 * them, computed in double; swap: the reference reads kv heads 0 and 1 exchanged (a wrong group
 * mapping). */
static void host_init(gqa_host *h, gqa_shape s, uint64_t seed, int swap)
{
    gqa_sizes z = h->z = sizes_of(s);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    h->qkv = vkg_test_random(&r, z.n_qkv, -2.0f, 2.0f);
    h->dout = vkg_test_random(&r, z.n_out, -1.0f, 1.0f);
    h->dqkv0 = vkg_test_random(&r, z.n_qkv, -0.5f, 0.5f);
    h->out = vkg_test_alloc(z.n_out);
    h->lse = vkg_test_alloc(z.n_lse);
    h->dqkv = vkg_test_alloc(z.n_qkv);
    double *x = dalloc(z.n_qkv), *dy = dalloc(z.n_out), *o = dalloc(z.n_out);
    double *l = dalloc(z.n_lse), *dx = dalloc(z.n_qkv);
    for (size_t i = 0; i < z.n_qkv; i++) {
        x[i] = h->qkv[i];
        dx[i] = h->dqkv0[i];
    }
    for (size_t i = 0; i < z.n_out; i++)
        dy[i] = h->dout[i];
    if (swap) /* k and v of kv heads 0 and 1 exchanged in every row */
        for (size_t row = 0; row < (size_t)s.B * s.T; row++)
            for (int part = 0; part < 2; part++)
                for (int c = 0; c < s.D; c++) {
                    double *a = x + row * z.ld + z.oc + (size_t)part * s.NKV * s.D + c;
                    double t = a[0];
                    a[0] = a[s.D];
                    a[s.D] = t;
                }
    vkg_ref_attention_gqa_fwd_f64(o, l, x, s.B, s.T, s.NH, s.NKV, s.D);
    vkg_ref_attention_gqa_bwd_f64(dx, dy, x, l, s.B, s.T, s.NH, s.NKV, s.D);
    for (size_t i = 0; i < z.n_out; i++)
        h->out[i] = (float)o[i];
    for (size_t i = 0; i < z.n_lse; i++)
        h->lse[i] = (float)l[i];
    for (size_t i = 0; i < z.n_qkv; i++)
        h->dqkv[i] = (float)dx[i];
    free(x), free(dy), free(o), free(l), free(dx);
}

static void host_free(gqa_host *h)
{
    free(h->qkv), free(h->dout), free(h->dqkv0), free(h->out), free(h->lse), free(h->dqkv);
}

/* One part of the gradient (0: q, NH D columns; 1: k, 2: v, NKV D each) minus its start, of got
 * and of the reference, compared at `bound`; returns the comparison (fails the test when ok is
 * NULL and the part is off). */
static vkg_test_cmp part_cmp(const char *what, const float *got, const gqa_host *h, gqa_shape s,
                             int part, double bound, int *ok)
{
    size_t w = part == 0 ? h->z.oc : (size_t)s.NKV * s.D;
    size_t off = part == 0 ? 0 : h->z.oc + (size_t)(part - 1) * s.NKV * s.D;
    size_t rows = (size_t)s.B * s.T, n = rows * w, i = 0;
    float *g = vkg_test_alloc(n), *r = vkg_test_alloc(n);
    for (size_t row = 0; row < rows; row++)
        for (size_t c = 0; c < w; c++, i++) {
            size_t o = row * h->z.ld + off + c;
            g[i] = got[o] - h->dqkv0[o];
            r[i] = h->dqkv[o] - h->dqkv0[o];
        }
    vkg_test_cmp cmp;
    int good = vkg_test_compare(what, g, r, n, bound, &cmp);
    free(g), free(r);
    if (ok)
        *ok = good;
    else if (!good)
        fail_msg("%s differs from the reference: rel_l2 %.3g max_rel %.3g first bad %zu", what,
                 cmp.rel_l2, cmp.max_rel, cmp.first_bad);
    return cmp;
}

static void with_form(vkg_gpu *g, vkg_attention_variant v)
{
    vkg_device_tuning t = vkg_device_tuning_get(g->dev);
    t.attention = v;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
}

/* Forward, then the backward from the forward's own out and lse, twice from the same start. */
static void check_shape(vkg_gpu *g, gqa_shape s, uint64_t seed, const char *form)
{
    gqa_host h;
    host_init(&h, s, seed, 0);
    gqa_sizes z = h.z;
    vkg_tensor qkv = vkg_gpu_upload(g, h.qkv, z.n_qkv * 4);
    vkg_tensor dout = vkg_gpu_upload(g, h.dout, z.n_out * 4);
    vkg_tensor out = vkg_gpu_poisoned(g, z.n_out), lse = vkg_gpu_poisoned(g, z.n_lse);
    vkg_tensor delta = vkg_gpu_poisoned(g, z.n_lse);
    vkg_tensor d1 = vkg_gpu_upload(g, h.dqkv0, z.n_qkv * 4);
    vkg_tensor d2 = vkg_gpu_upload(g, h.dqkv0, z.n_qkv * 4);
    VKG_ASSERT_OK(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, s.B, s.T, s.NH, s.NKV, s.D));
    vkg_gpu_run(g);
    VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, d1, dout, qkv, out, lse, s.B, s.T, s.NH, s.NKV,
                                           s.D, delta));
    vkg_gpu_run(g);
    VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, d2, dout, qkv, out, lse, s.B, s.T, s.NH, s.NKV,
                                           s.D, delta));
    vkg_gpu_run(g);
    char what[160];
    snprintf(what, sizeof what, "B=%d T=%d NH=%d NKV=%d D=%d (%s form)", s.B, s.T, s.NH, s.NKV, s.D,
             form);
    vkg_test_cmp e_out = vkg_gpu_expect_ref(g, "out", out, h.out, z.n_out);
    vkg_test_cmp e_lse = vkg_gpu_expect_ref(g, "lse", lse, h.lse, z.n_lse);
    vkg_gpu_expect_guard(g, "delta", delta);
    float *g1 = vkg_test_alloc(z.n_qkv), *g2 = vkg_test_alloc(z.n_qkv);
    vkg_gpu_download(g, d1, g1, z.n_qkv * 4);
    vkg_gpu_download(g, d2, g2, z.n_qkv * 4);
    vkg_gpu_expect_guard(g, "dqkv", d1);
    vkg_test_cmp e[3];
    for (int part = 0; part < 3; part++)
        e[part] = part_cmp(part == 0   ? "dq"
                           : part == 1 ? "dk"
                                       : "dv",
                           g1, &h, s, part, VKG_TEST_REL_BOUND, NULL);
    if (memcmp(g1, g2, z.n_qkv * 4) != 0)
        fail_msg("%s: the backward run again differs bitwise", what);
    printf("gqa %s: rel_l2 out %.2e lse %.2e dq %.2e dk %.2e dv %.2e; max_rel out %.1e dk %.1e dv "
           "%.1e; backward twice bitwise equal\n",
           what, e_out.rel_l2, e_lse.rel_l2, e[0].rel_l2, e[1].rel_l2, e[2].rel_l2, e_out.max_rel,
           e[1].max_rel, e[2].max_rel);
    free(g1), free(g2);
    host_free(&h);
}

static void check_both_forms(vkg_gpu *g, gqa_shape s, uint64_t seed)
{
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    with_form(g, VKG_ATTENTION_DIRECT);
    check_shape(g, s, seed, "subgroup");
    with_form(g, VKG_ATTENTION_SHARED);
    check_shape(g, s, seed, "rows");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* Groups of every size: one kv head for all (NKV = 1), pairs, and none (NKV = NH); T past a
 * tile of either form (37, 70) */
static void test_groups(void **state)
{
    check_both_forms(*state, (gqa_shape){2, 37, 4, 2, 32}, 1);
    check_both_forms(*state, (gqa_shape){2, 37, 4, 1, 8}, 2);
    check_both_forms(*state, (gqa_shape){3, 20, 6, 2, 64}, 3);
    check_both_forms(*state, (gqa_shape){2, 70, 6, 6, 16}, 4);
    check_both_forms(*state, (gqa_shape){2, 33, 1, 1, 8}, 5);
    check_both_forms(*state, (gqa_shape){2, 29, 6, 1, 32}, 6);
}

/* Head dims apart from C/NH: Qwen3's 128, and odd 13 (fp32 only), 24 (not a multiple of the 8
 * lanes). The largest, VKG_ATTENTION_MAX_D = 256, passed the same checks when tried (rel_l2 under
 * 7e-7 in both forms) but is not run here: lavapipe takes about four minutes to compile its
 * kernels unrolled over 256 channels. */
static void test_head_dims(void **state)
{
    check_both_forms(*state, (gqa_shape){2, 45, 4, 2, 128}, 7);
    check_both_forms(*state, (gqa_shape){2, 41, 6, 2, 13}, 8);
    check_both_forms(*state, (gqa_shape){2, 19, 4, 4, 24}, 9);
}

/* Unsplit under the default limit; under VKG_MAX_DISPATCH_ELEMS=65536 (test_attention_gqa_split)
 * the batches (T (NH + 2 NKV) D = 64 * 12 * 64 = 49152 values of qkv each) go one per dispatch. */
static void test_split_shape(void **state)
{
    check_both_forms(*state, (gqa_shape){3, 64, 8, 2, 64}, 10);
}

/* Above the index limit (lowered to two batches' qkv, T (NH + 2 NKV) D = 12800 values each) the
 * passes are recorded in blocks of two batches, three dispatches each, with every bit as in one
 * dispatch; one batch beyond the limit is refused by name. Both forms. */
static void test_blocks_of_batches(void **state)
{
    vkg_gpu *g = *state;
    gqa_shape s = {5, 40, 6, 2, 32};
    gqa_sizes z = sizes_of(s);
    size_t per_batch = (size_t)s.T * z.ld;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 15);
    float *qkv = vkg_test_random(&r, z.n_qkv, -2.0f, 2.0f);
    float *dout = vkg_test_random(&r, z.n_out, -1.0f, 1.0f), *zero = calloc(z.n_qkv, 4);
    assert_non_null(zero);
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    for (int form = 0; form < 2; form++) {
        with_form(g, form ? VKG_ATTENTION_SHARED : VKG_ATTENTION_DIRECT);
        vkg_tensor tq = vkg_gpu_upload(g, qkv, z.n_qkv * 4);
        vkg_tensor td = vkg_gpu_upload(g, dout, z.n_out * 4);
        vkg_tensor t[2][4]; /* out, lse, delta, dqkv; [0] one dispatch, [1] blocks */
        int nf[2], nb[2];
        for (int k = 0; k < 2; k++) {
            t[k][0] = vkg_gpu_poisoned(g, z.n_out);
            t[k][1] = vkg_gpu_poisoned(g, z.n_lse);
            t[k][2] = vkg_gpu_poisoned(g, z.n_lse);
            t[k][3] = vkg_gpu_upload(g, zero, z.n_qkv * 4); /* dqkv accumulates from 0 */
        }
        for (int k = 0; k < 2; k++) {
            vkg__op_set_max_elems(k ? 2 * per_batch : 0);
            int before = vkg_cmd_dispatch_count(g->cmd);
            VKG_ASSERT_OK(
                vkg_op_attention_gqa_fwd(g->cmd, t[k][0], t[k][1], tq, s.B, s.T, s.NH, s.NKV, s.D));
            nf[k] = vkg_cmd_dispatch_count(g->cmd) - before;
        }
        vkg__op_set_max_elems(0);
        vkg_gpu_run(g);
        for (int k = 0; k < 2; k++) {
            vkg__op_set_max_elems(k ? 2 * per_batch : 0);
            int before = vkg_cmd_dispatch_count(g->cmd);
            VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, t[k][3], td, tq, t[0][0], t[0][1], s.B,
                                                   s.T, s.NH, s.NKV, s.D, t[k][2]));
            nb[k] = vkg_cmd_dispatch_count(g->cmd) - before;
        }
        vkg__op_set_max_elems(0);
        vkg_gpu_run(g);
        assert_int_equal(nf[0], 1);
        assert_int_equal(nf[1], 3);
        assert_int_equal(nb[0], 3);
        assert_int_equal(nb[1], 9);
        size_t n[4] = {z.n_out, z.n_lse, z.n_lse, z.n_qkv};
        for (int i = 0; i < 4; i++) {
            float *a = vkg_test_alloc(n[i]), *b = vkg_test_alloc(n[i]);
            vkg_gpu_download(g, t[0][i], a, n[i] * 4);
            vkg_gpu_download(g, t[1][i], b, n[i] * 4);
            for (size_t j = 0; j < n[i]; j++)
                if (!isfinite(a[j]))
                    fail_msg("tensor %d element %zu is not finite: unwritten", i, j);
            if (memcmp(a, b, n[i] * 4) != 0)
                fail_msg("%s form: tensor %d in blocks of batches differs from one dispatch",
                         form ? "rows" : "subgroup", i);
            free(a), free(b);
        }
        vkg__op_set_max_elems(per_batch - 1);
        vkg_expect_invalid(
            vkg_op_attention_gqa_fwd(g->cmd, t[0][0], t[0][1], tq, s.B, s.T, s.NH, s.NKV, s.D),
            "attention_gqa_fwd: one batch needs T*(NH+2*NKV)*D = 12800 elements of qkv");
        vkg_expect_invalid(vkg_op_attention_gqa_bwd(g->cmd, t[0][3], td, tq, t[0][0], t[0][1], s.B,
                                                    s.T, s.NH, s.NKV, s.D, t[0][2]),
                           "attention_gqa_bwd: one batch needs T*(NH+2*NKV)*D = 12800");
        vkg__op_set_max_elems(0);
    }
    printf("blocks of two batches: 3 forward and 9 backward dispatches, bitwise one dispatch's, "
           "in both forms\n");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
    free(qkv), free(dout), free(zero);
}

/* A reference with the wrong group mapping fails: out and dk against kv heads swapped. */
static void test_checker_bites(void **state)
{
    vkg_gpu *g = *state;
    gqa_shape s = {2, 37, 4, 2, 32};
    gqa_host h;
    host_init(&h, s, 11, 1);
    gqa_sizes z = h.z;
    vkg_tensor qkv = vkg_gpu_upload(g, h.qkv, z.n_qkv * 4);
    vkg_tensor dout = vkg_gpu_upload(g, h.dout, z.n_out * 4);
    vkg_tensor out = vkg_gpu_poisoned(g, z.n_out), lse = vkg_gpu_poisoned(g, z.n_lse);
    vkg_tensor delta = vkg_gpu_poisoned(g, z.n_lse);
    vkg_tensor d = vkg_gpu_upload(g, h.dqkv0, z.n_qkv * 4);
    VKG_ASSERT_OK(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, s.B, s.T, s.NH, s.NKV, s.D));
    vkg_gpu_run(g);
    VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, d, dout, qkv, out, lse, s.B, s.T, s.NH, s.NKV,
                                           s.D, delta));
    vkg_gpu_run(g);
    float *o = vkg_test_alloc(z.n_out), *got = vkg_test_alloc(z.n_qkv);
    vkg_gpu_download(g, out, o, z.n_out * 4);
    vkg_gpu_download(g, d, got, z.n_qkv * 4);
    vkg_test_cmp cmp;
    int ok_out = vkg_test_compare("out", o, h.out, z.n_out, VKG_TEST_REL_BOUND, &cmp), ok_dk;
    vkg_test_cmp cdk = part_cmp("dk", got, &h, s, 1, VKG_TEST_REL_BOUND, &ok_dk);
    printf("kv heads swapped in the reference: out rel_l2 %.2e, dk rel_l2 %.2e\n", cmp.rel_l2,
           cdk.rel_l2);
    assert_false(ok_out);
    assert_false(ok_dk);
    free(o), free(got);
    host_free(&h);
}

/* NKV = NH, D = C/NH: the grouped entry points give GPT-2's ops' bits, in both forms. */
static void test_gpt2_bitwise(void **state)
{
    vkg_gpu *g = *state;
    gqa_shape s = {2, 40, 3, 3, 32};
    int C = s.NH * s.D;
    gqa_host h;
    host_init(&h, s, 12, 0);
    gqa_sizes z = h.z;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    for (int form = 0; form < 2; form++) {
        with_form(g, form ? VKG_ATTENTION_SHARED : VKG_ATTENTION_DIRECT);
        vkg_tensor qkv = vkg_gpu_upload(g, h.qkv, z.n_qkv * 4);
        vkg_tensor dout = vkg_gpu_upload(g, h.dout, z.n_out * 4);
        vkg_tensor t[2][5]; /* out, lse, delta, dqkv, per entry point */
        for (int k = 0; k < 2; k++) {
            t[k][0] = vkg_gpu_poisoned(g, z.n_out);
            t[k][1] = vkg_gpu_poisoned(g, z.n_lse);
            t[k][2] = vkg_gpu_poisoned(g, z.n_lse);
            t[k][3] = vkg_gpu_upload(g, h.dqkv0, z.n_qkv * 4);
        }
        VKG_ASSERT_OK(vkg_op_attention_fwd(g->cmd, t[0][0], t[0][1], qkv, s.B, s.T, C, s.NH));
        VKG_ASSERT_OK(
            vkg_op_attention_gqa_fwd(g->cmd, t[1][0], t[1][1], qkv, s.B, s.T, s.NH, s.NH, s.D));
        vkg_gpu_run(g);
        VKG_ASSERT_OK(vkg_op_attention_bwd(g->cmd, t[0][3], dout, qkv, t[0][0], t[0][1], s.B, s.T,
                                           C, s.NH, t[0][2]));
        VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, t[1][3], dout, qkv, t[1][0], t[1][1], s.B,
                                               s.T, s.NH, s.NH, s.D, t[1][2]));
        vkg_gpu_run(g);
        size_t n[4] = {z.n_out, z.n_lse, z.n_lse, z.n_qkv};
        for (int i = 0; i < 4; i++) {
            float *a = vkg_test_alloc(n[i]), *b = vkg_test_alloc(n[i]);
            vkg_gpu_download(g, t[0][i], a, n[i] * 4);
            vkg_gpu_download(g, t[1][i], b, n[i] * 4);
            if (memcmp(a, b, n[i] * 4) != 0)
                fail_msg("%s form: tensor %d of the grouped ops differs from GPT-2's",
                         form ? "rows" : "subgroup", i);
            free(a), free(b);
        }
    }
    printf("NKV = NH, D = C/NH: out, lse, delta and dqkv bitwise GPT-2's in both forms\n");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
    host_free(&h);
}

/* bf16 qkv and out: the bf16 kernels read the widened values and round out once, so they equal
 * the fp32 kernels on the widened qkv bit for bit (out: the fp32 out rounded). */
static void test_bf16(void **state)
{
    vkg_gpu *g = *state;
    gqa_shape s = {2, 37, 6, 2, 32};
    gqa_sizes z = sizes_of(s);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 13);
    float *qkv = vkg_test_random(&r, z.n_qkv, -2.0f, 2.0f);
    float *dout = vkg_test_random(&r, z.n_out, -1.0f, 1.0f);
    float *d0 = vkg_test_random(&r, z.n_qkv, -0.5f, 0.5f);
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    for (int form = 0; form < 2; form++) {
        with_form(g, form ? VKG_ATTENTION_SHARED : VKG_ATTENTION_DIRECT);
        vkg_tensor q16 = vkg_gpu_bf16_of(g, qkv, z.n_qkv);
        vkg_gpu_run(g);
        vkg_tensor q32 = vkg_gpu_bf16_widened(g, q16, z.n_qkv);
        vkg_tensor o16 = vkg_gpu_bf16_poisoned(g, z.n_out), o32 = vkg_gpu_poisoned(g, z.n_out);
        vkg_tensor l16 = vkg_gpu_poisoned(g, z.n_lse), l32 = vkg_gpu_poisoned(g, z.n_lse);
        vkg_tensor td = vkg_gpu_upload(g, dout, z.n_out * 4);
        vkg_tensor dq16 = vkg_gpu_upload(g, d0, z.n_qkv * 4),
                   dq32 = vkg_gpu_upload(g, d0, z.n_qkv * 4);
        vkg_tensor delta = vkg_gpu_poisoned(g, z.n_lse), delta2 = vkg_gpu_poisoned(g, z.n_lse);
        VKG_ASSERT_OK(vkg_op_attention_gqa_fwd(g->cmd, o16, l16, q16, s.B, s.T, s.NH, s.NKV, s.D));
        VKG_ASSERT_OK(vkg_op_attention_gqa_fwd(g->cmd, o32, l32, q32, s.B, s.T, s.NH, s.NKV, s.D));
        vkg_gpu_run(g);
        vkg_tensor ow = vkg_gpu_bf16_widened(g, o16, z.n_out);
        VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, dq16, td, q16, o16, l16, s.B, s.T, s.NH,
                                               s.NKV, s.D, delta));
        VKG_ASSERT_OK(vkg_op_attention_gqa_bwd(g->cmd, dq32, td, q32, ow, l16, s.B, s.T, s.NH,
                                               s.NKV, s.D, delta2));
        vkg_gpu_run(g);
        float *got = vkg_gpu_download_bf16(g, o16, z.n_out), *f32 = vkg_test_alloc(z.n_out);
        float *a = vkg_test_alloc(z.n_qkv), *b = vkg_test_alloc(z.n_qkv);
        float *la = vkg_test_alloc(z.n_lse), *lb = vkg_test_alloc(z.n_lse);
        vkg_gpu_download(g, o32, f32, z.n_out * 4);
        vkg_gpu_download(g, dq16, a, z.n_qkv * 4);
        vkg_gpu_download(g, dq32, b, z.n_qkv * 4);
        vkg_gpu_download(g, l16, la, z.n_lse * 4);
        vkg_gpu_download(g, l32, lb, z.n_lse * 4);
        for (size_t i = 0; i < z.n_out; i++) {
            float want = vkg_ref_bf16_widen(vkg_ref_bf16_bits(f32[i]));
            if (memcmp(&got[i], &want, 4) != 0)
                fail_msg("bf16 out[%zu] = %.9g, the fp32 kernel's rounded %.9g", i, (double)got[i],
                         (double)want);
        }
        if (memcmp(la, lb, z.n_lse * 4) != 0 || memcmp(a, b, z.n_qkv * 4) != 0)
            fail_msg("%s form: bf16 lse or dqkv differs from the fp32 kernels'",
                     form ? "rows" : "subgroup");
        vkg_gpu_expect_guard(g, "bf16 out", o16);
        free(got), free(f32), free(a), free(b), free(la), free(lb);
    }
    printf("bf16 qkv and out: equal to the fp32 kernels on the widened values in both forms\n");
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
    free(qkv), free(dout), free(d0);
}

static void test_refusals(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 1, T = 4, NH = 4, NKV = 2, D = 8 };
    size_t n_qkv = B * T * (NH + 2 * NKV) * D, n_out = B * T * NH * D, n_lse = B * NH * T;
    vkg_tensor qkv = vkg_gpu_poisoned(g, n_qkv), out = vkg_gpu_poisoned(g, n_out);
    vkg_tensor lse = vkg_gpu_poisoned(g, n_lse), delta = vkg_gpu_poisoned(g, n_lse);
    vkg_tensor short_qkv = vkg_tensor_view(qkv, 0, (n_qkv - 1) * sizeof(float));
    vkg_tensor short_out = vkg_tensor_view(out, 0, (n_out - 1) * sizeof(float));
    vkg_tensor q16 = vkg_gpu_bf16_poisoned(g, B * T * (NH + 2 * NKV) * 13);
    vkg_tensor o16 = vkg_gpu_bf16_poisoned(g, B * T * NH * 13);

    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, B, T, NH, 3, D),
                       "attention_gqa_fwd: NH=4 query heads are not a multiple of NKV=3");
    vkg_expect_invalid(
        vkg_op_attention_gqa_bwd(g->cmd, qkv, out, qkv, out, lse, B, T, NH, 3, D, delta),
        "attention_gqa_bwd: NH=4 query heads are not a multiple of NKV=3");
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, B, T, 1, 1, 512),
                       "attention_gqa_fwd: head dim D=512 is above the 256");
    vkg_expect_invalid(
        vkg_op_attention_gqa_bwd(g->cmd, qkv, out, qkv, out, lse, B, T, 1, 1, 512, delta),
        "attention_gqa_bwd: head dim D=512 is above the 256");
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, B, T, NH, 0, D),
                       "attention_gqa_fwd: B, T, NH, NKV and D must be positive");
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, B, T, NH, NKV, 0),
                       "attention_gqa_fwd: B, T, NH, NKV and D must be positive");
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, out, lse, short_qkv, B, T, NH, NKV, D),
                       "attention_gqa_fwd: tensor qkv holds");
    /* the GPT-2 layout's qkv (3 NH D per row) is too small for the grouped one with NKV = NH */
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, out, lse, qkv, B, T, NH, NH, D),
                       "attention_gqa_fwd: tensor qkv holds");
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, short_out, lse, qkv, B, T, NH, NKV, D),
                       "attention_gqa_fwd: tensor out holds");
    vkg_expect_invalid(
        vkg_op_attention_gqa_bwd(g->cmd, short_qkv, out, qkv, out, lse, B, T, NH, NKV, D, delta),
        "attention_gqa_bwd: tensor dqkv holds");
    vkg_expect_invalid(
        vkg_op_attention_gqa_bwd(g->cmd, qkv, short_out, qkv, out, lse, B, T, NH, NKV, D, delta),
        "attention_gqa_bwd: tensor dout holds");
    vkg_expect_invalid(
        vkg_op_attention_gqa_bwd(g->cmd, qkv, out, short_qkv, out, lse, B, T, NH, NKV, D, delta),
        "attention_gqa_bwd: tensor qkv holds");
    vkg_expect_invalid(vkg_op_attention_gqa_fwd(g->cmd, o16, lse, q16, B, T, NH, NKV, 13),
                       "attention_gqa_fwd: bf16 qkv or out needs an even head size");
    assert_int_equal(vkg_cmd_dispatch_count(g->cmd), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_groups, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_head_dims, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_split_shape, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_blocks_of_batches, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_checker_bites, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_gpt2_bitwise, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
