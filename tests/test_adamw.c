/* GPU tests of the AdamW update (src/ops/adamw.c, shaders/adamw.comp) with device-side step
 * parameters and gradient clipping, against the CPU reference vkg_ref_adamw.
 *
 * Bound: after every step param, m and v, and the update itself (param after minus param before),
 * within relative L2 error VKG_TEST_REL_BOUND = 1e-5 of the reference, every element finite.
 * The step is recorded ONCE (sum of squares of the gradient, then AdamW) and replayed for several
 * steps; between steps only device memory changes: new gradients and a new vkg_step_params (the
 * learning rate and t advance). Cases: weight decay on and off, clipping off (grad_clip 0),
 * inactive (threshold above the norm), active (below it: the test checks it really clips), and no
 * sum-of-squares tensor. Elements past n are NaN sentinels that must stay untouched.
 * The optimizer module (src/optim/adamw.c) sharded as ZeRO-1 shards it: two optimizers over the
 * two halves of the parameters (cut at a partial sum of the norm), each with moments for its
 * half only and its own partial sums of the norm, added together, take bitwise the steps of one
 * optimizer over everything, with clipping active.
 * A gradient holding a NaN, an infinity or a value whose square overflows makes the sum of squares
 * non-finite: the update then leaves parameters and both moments bitwise as they were, clipping
 * on or off, and the next finite step updates again.
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
#include "optim/adamw.h"
#include "ref/ref.h"
#include "testutil.h"

#define STEPS 4
#define TAIL 5 /* sentinel elements past n */
#define BETA1 0.9f
#define BETA2 0.999f
#define EPS 1e-8f

typedef enum clip_mode { CLIP_OFF, CLIP_INACTIVE, CLIP_ACTIVE, CLIP_NO_SUMSQ } clip_mode;

typedef struct adamw_case {
    size_t n;
    float weight_decay;
    clip_mode clip;
} adamw_case;

static void run_case(vkg_gpu *g, adamw_case k, uint64_t seed)
{
    size_t n = k.n, nt = n + TAIL;
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, seed);
    float *param = vkg_test_alloc(nt), *grad = vkg_test_alloc(n), *m = vkg_test_alloc(n);
    float *v = vkg_test_alloc(n), *before = vkg_test_alloc(n), *after = vkg_test_alloc(nt);
    float *upd_gpu = vkg_test_alloc(n), *upd_ref = vkg_test_alloc(n);
    vkg_test_fill_uniform(&rng, param, n, -1.0f, 1.0f);
    for (size_t i = n; i < nt; i++)
        param[i] = NAN;
    memset(m, 0, n * sizeof *m);
    memset(v, 0, n * sizeof *v);

    vkg_tensor tp = vkg_gpu_upload(g, param, nt * sizeof(float));
    vkg_tensor tg = vkg_gpu_upload(g, NULL, n * sizeof(float));
    vkg_tensor tm = vkg_gpu_upload(g, m, n * sizeof(float));
    vkg_tensor tv = vkg_gpu_upload(g, v, n * sizeof(float));
    vkg_tensor tstep = vkg_gpu_upload(g, NULL, sizeof(vkg_step_params));
    vkg_tensor tsum = vkg_gpu_poisoned(g, 1);
    vkg_tensor scratch = vkg_gpu_poisoned(g, vkg_op_sumsq_scratch_elems(&n, 1));

    /* Record once. */
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_sumsq(g->cmd, tsum, &tg, &n, 1, scratch, 0));
    VKG_ASSERT_OK(vkg_op_adamw(g->cmd, tp, tg, tm, tv, n, BETA1, BETA2, EPS, k.weight_decay, tstep,
                               k.clip == CLIP_NO_SUMSQ ? NULL : &tsum));
    VKG_ASSERT_OK(vkg_cmd_end(g->cmd));

    double worst = 0.0;
    int clipped = 0;
    for (int t = 1; t <= STEPS; t++) {
        vkg_test_fill_uniform(&rng, grad, n, -1.0f, 1.0f);
        double norm = sqrt(vkg_ref_sumsq(grad, n));
        vkg_step_params sp = {
            .lr = 0.1f / (float)t, .t = (uint32_t)t, .grad_clip = 0.0f, .unscale = 1.0f};
        if (k.clip == CLIP_INACTIVE)
            sp.grad_clip = (float)(2.0 * norm);
        else if (k.clip == CLIP_ACTIVE || k.clip == CLIP_NO_SUMSQ)
            sp.grad_clip = (float)(0.3 * norm);
        float scale = 1.0f;
        if (k.clip != CLIP_NO_SUMSQ && sp.grad_clip > 0.0f && norm > sp.grad_clip)
            scale = (float)(sp.grad_clip / norm);
        clipped += scale < 1.0f;
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, tg, 0, grad, n * sizeof(float)));
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, tstep, 0, &sp, sizeof sp));
        VKG_ASSERT_OK(vkg_cmd_run(g->cmd, 0)); /* replay, never re-recorded */

        memcpy(before, param, n * sizeof(float));
        vkg_ref_adamw(param, grad, m, v, n, sp.lr, BETA1, BETA2, EPS, k.weight_decay, t, scale);
        const vkg_tensor outs[3] = {tp, tm, tv};
        const float *refs[3] = {param, m, v};
        const char *names[3] = {"param", "m", "v"};
        for (int o = 0; o < 3; o++) {
            double e = vkg_gpu_expect_ref(g, names[o], outs[o], refs[o], n).rel_l2;
            worst = e > worst ? e : worst;
        }
        /* The update alone, so an error in it is not hidden by the size of param. */
        vkg_gpu_download(g, tp, after, nt * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            upd_ref[i] = param[i] - before[i];
            upd_gpu[i] = after[i] - before[i];
        }
        vkg_test_cmp cmp;
        if (!vkg_test_compare("update", upd_gpu, upd_ref, n, VKG_TEST_REL_BOUND, &cmp))
            fail_msg("step %d: the update differs from the reference: rel_l2 %.3g", t, cmp.rel_l2);
        if (cmp.rel_l2 > worst)
            worst = cmp.rel_l2;
        for (size_t i = n; i < nt; i++)
            if (!isnan(after[i]))
                fail_msg("param[%zu], past n = %zu, was written", i, n);
        /* Continue from the GPU's parameters so both sides take the same next step. */
        memcpy(param, after, n * sizeof(float));
        vkg_gpu_download(g, tm, m, n * sizeof(float));
        vkg_gpu_download(g, tv, v, n * sizeof(float));
    }
    if (k.clip == CLIP_ACTIVE)
        assert_int_equal(clipped, STEPS); /* the case really clipped */
    else
        assert_int_equal(clipped, 0);
    printf("    n=%zu wd=%g clip mode %d: max rel_l2 over %d steps %.3g\n", n,
           (double)k.weight_decay, (int)k.clip, STEPS, worst);
    free(upd_ref);
    free(upd_gpu);
    free(after);
    free(before);
    free(v);
    free(m);
    free(grad);
    free(param);
}

static void test_no_clipping(void **state)
{
    vkg_gpu *g = *state;
    run_case(g, (adamw_case){.n = 1, .weight_decay = 0.0f, .clip = CLIP_OFF}, 1);
    run_case(g, (adamw_case){.n = 1001, .weight_decay = 0.1f, .clip = CLIP_OFF}, 2);
    run_case(g, (adamw_case){.n = 300007, .weight_decay = 0.0f, .clip = CLIP_INACTIVE}, 3);
}

static void test_clipping(void **state)
{
    vkg_gpu *g = *state;
    run_case(g, (adamw_case){.n = 1001, .weight_decay = 0.0f, .clip = CLIP_ACTIVE}, 4);
    run_case(g, (adamw_case){.n = 300007, .weight_decay = 0.1f, .clip = CLIP_ACTIVE}, 5);
    run_case(g, (adamw_case){.n = 4099, .weight_decay = 0.1f, .clip = CLIP_NO_SUMSQ}, 6);
}

/* One optimizer over params [0, n) (weight decay on the first segment) and two over its halves
 * [0, a) and [a, n), a at a partial sum of the norm: the same sum of squares and parameters,
 * moments and device bytes of the halves alone. */
static void test_sharded_optimizer(void **state)
{
    vkg_gpu *g = *state;
    size_t n = 100003, dec = 40000;
    size_t P = vkg_adamw_norm_partition(n, NULL);
    size_t *b = malloc((P + 1) * sizeof *b);
    vkg_adamw_norm_partition(n, b);
    size_t half = P / 2, a = b[half];
    free(b);
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, 77);
    float *p0 = vkg_test_alloc(n), *grad = vkg_test_alloc(n);
    vkg_test_fill_uniform(&rng, p0, n, -1.0f, 1.0f);
    vkg_tensor pw = vkg_gpu_upload(g, p0, n * 4), gw = vkg_gpu_upload(g, NULL, n * 4);
    vkg_tensor ps = vkg_gpu_upload(g, p0, n * 4), gs = vkg_gpu_upload(g, NULL, n * 4);
    vkg_adamw_config cfg = vkg_adamw_config_default();
    cfg.weight_decay = 0.1f;
    vkg_adamw_segment whole[2] = {{0, dec, 1}, {dec, n - dec, 0}};
    vkg_adamw_segment lo[2] = {{0, dec, 1}, {dec, a - dec, 0}}, hi[1] = {{a, n - a, 0}};
    vkg_adamw *ow = NULL, *oa = NULL, *ob = NULL;
    VKG_ASSERT_OK(vkg_adamw_create(g->dev, &cfg, pw, gw, n, whole, 2, &ow));
    VKG_ASSERT_OK(vkg_adamw_create(g->dev, &cfg, ps, gs, n, lo, 2, &oa));
    VKG_ASSERT_OK(vkg_adamw_create(g->dev, &cfg, ps, gs, n, hi, 1, &ob));
    VKG_ASSERT_OK(vkg_adamw_norm_shard(oa, 0, half));
    VKG_ASSERT_OK(vkg_adamw_norm_shard(ob, half, P - half));
    size_t first, count;
    vkg_adamw_moment_range(ob, &first, &count);
    assert_true(first == a && count == n - a);
    assert_int_equal(vkg_adamw_device_bytes(ob), vkg_adamw_memory_of(n - a, P));
    assert_int_equal(vkg_adamw_device_bytes(ow), vkg_adamw_memory_of(n, P));
    float *parts = vkg_test_alloc(P), *x = vkg_test_alloc(n), *y = vkg_test_alloc(n);
    int clipped = 0;
    for (uint32_t t = 1; t <= 3; t++) {
        vkg_test_fill_uniform(&rng, grad, n, -1.0f, 1.0f);
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, gw, 0, grad, n * 4));
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, gs, 0, grad, n * 4));
        float sw, ss;
        VKG_ASSERT_OK(vkg_adamw_grad_sumsq(ow, &sw));
        VKG_ASSERT_OK(vkg_adamw_grad_partials(oa, parts));
        VKG_ASSERT_OK(vkg_adamw_grad_partials(ob, parts + half));
        VKG_ASSERT_OK(vkg_adamw_sum_partials(ob, parts, &ss));
        printf("    step %u: sum of squares %.9g whole, %.9g from two shards\n", t, (double)sw,
               (double)ss);
        assert_memory_equal(&sw, &ss, sizeof sw);
        float clip = 0.5f * sqrtf(sw); /* clipping active */
        clipped += clip < sqrtf(sw);
        VKG_ASSERT_OK(vkg_adamw_update(ow, 1e-2f, t, clip, sw, 1.0f));
        VKG_ASSERT_OK(vkg_adamw_update(oa, 1e-2f, t, clip, ss, 1.0f));
        VKG_ASSERT_OK(vkg_adamw_update(ob, 1e-2f, t, clip, ss, 1.0f));
    }
    assert_int_equal(clipped, 3);
    vkg_gpu_download(g, pw, x, n * 4);
    vkg_gpu_download(g, ps, y, n * 4);
    assert_memory_equal(x, y, n * 4);
    assert_memory_not_equal(x, p0, n * 4);
    float *m = vkg_test_alloc(n), *v = vkg_test_alloc(n);
    VKG_ASSERT_OK(vkg_adamw_get_moments(ow, x, y));
    VKG_ASSERT_OK(vkg_adamw_get_moments(oa, m, v));
    VKG_ASSERT_OK(vkg_adamw_get_moments(ob, m + a, v + a));
    assert_memory_equal(x, m, n * 4);
    assert_memory_equal(y, v, n * 4);
    vkg_adamw_destroy(&ow), vkg_adamw_destroy(&oa), vkg_adamw_destroy(&ob);
    free(p0), free(grad), free(parts), free(x), free(y), free(m), free(v);
}

/* One optimizer step after a finite one: a gradient element set to bad (clipping at clip) must
 * leave parameters and moments bitwise unchanged. */
static void skip_case(vkg_gpu *g, float bad, float clip)
{
    size_t n = 5003;
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, 5);
    float *p0 = vkg_test_alloc(n), *grad = vkg_test_alloc(n);
    float *pa = vkg_test_alloc(n), *ma = vkg_test_alloc(n), *va = vkg_test_alloc(n);
    float *pb = vkg_test_alloc(n), *mb = vkg_test_alloc(n), *vb = vkg_test_alloc(n);
    vkg_test_fill_uniform(&rng, p0, n, -1.0f, 1.0f);
    vkg_tensor tp = vkg_gpu_upload(g, p0, n * 4), tg = vkg_gpu_upload(g, NULL, n * 4);
    vkg_adamw_config cfg = vkg_adamw_config_default();
    cfg.weight_decay = 0.1f;
    vkg_adamw_segment seg = {0, n, 1};
    vkg_adamw *o = NULL;
    VKG_ASSERT_OK(vkg_adamw_create(g->dev, &cfg, tp, tg, n, &seg, 1, &o));
    float sumsq, skipped = 0.0f;
    for (uint32_t t = 1; t <= 3; t++) {
        vkg_test_fill_uniform(&rng, grad, n, -1.0f, 1.0f);
        if (t == 2)
            grad[n / 2] = bad;
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, tg, 0, grad, n * 4));
        VKG_ASSERT_OK(vkg_adamw_grad_sumsq(o, &sumsq));
        assert_true(t == 2 ? !isfinite(sumsq) : isfinite(sumsq));
        if (t == 2)
            skipped = sumsq;
        vkg_gpu_download(g, tp, pb, n * 4);
        VKG_ASSERT_OK(vkg_adamw_get_moments(o, mb, vb));
        VKG_ASSERT_OK(vkg_adamw_update(o, 1e-2f, t, clip, sumsq, 1.0f));
        vkg_gpu_download(g, tp, pa, n * 4);
        VKG_ASSERT_OK(vkg_adamw_get_moments(o, ma, va));
        if (t == 2) {
            assert_memory_equal(pa, pb, n * 4);
            assert_memory_equal(ma, mb, n * 4);
            assert_memory_equal(va, vb, n * 4);
        } else {
            assert_memory_not_equal(pa, pb, n * 4);
        }
    }
    printf("    gradient %g, clip %g: the step with sum of squares %g left everything as it was\n",
           (double)bad, (double)clip, (double)skipped);
    vkg_adamw_destroy(&o);
    free(p0), free(grad), free(pa), free(ma), free(va), free(pb), free(mb), free(vb);
}

static void test_nonfinite_norm_skips(void **state)
{
    vkg_gpu *g = *state;
    const float bad[3] = {NAN, INFINITY, 1e30f}; /* 1e30 squared overflows the sum */
    for (int i = 0; i < 3; i++) {
        skip_case(g, bad[i], 1.0f);
        skip_case(g, bad[i], 0.0f);
    }
}

static void test_bad_arguments(void **state)
{
    vkg_gpu *g = *state;
    vkg_cmd *c = g->cmd;
    vkg_tensor x = vkg_gpu_poisoned(g, 100), small = vkg_gpu_poisoned(g, 99);
    vkg_tensor step = vkg_gpu_poisoned(g, 4), none = vkg_gpu_poisoned(g, 0);
    vkg_tensor step_off = vkg_tensor_view(vkg_gpu_poisoned(g, 8), 4, 16);
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, x, 100, 1.0f, 0.999f, 1e-8f, 0.0f, step, NULL),
                       "adamw: beta1=1 and beta2=0.999 must lie in [0, 1)");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, x, 100, 0.9f, 0.999f, 0.0f, 0.0f, step, NULL),
                       "eps=0");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, x, 100, 0.9f, 0.999f, 1e-8f, -1.0f, step, NULL),
                       "weight_decay=-1");
    vkg_expect_invalid(vkg_op_adamw(c, small, x, x, x, 100, 0.9f, 0.999f, 1e-8f, 0.0f, step, NULL),
                       "adamw: tensor param holds 99 elements, the shape needs 100");
    vkg_expect_invalid(vkg_op_adamw(c, x, small, x, x, 100, 0.9f, 0.999f, 1e-8f, 0.0f, step, NULL),
                       "tensor grad");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, small, x, 100, 0.9f, 0.999f, 1e-8f, 0.0f, step, NULL),
                       "tensor m ");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, small, 100, 0.9f, 0.999f, 1e-8f, 0.0f, step, NULL),
                       "tensor v ");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, x, 100, 0.9f, 0.999f, 1e-8f, 0.0f, none, NULL),
                       "tensor step");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, x, 100, 0.9f, 0.999f, 1e-8f, 0.0f, step_off, NULL),
                       "tensor step is not 16-byte aligned");
    vkg_expect_invalid(vkg_op_adamw(c, x, x, x, x, 100, 0.9f, 0.999f, 1e-8f, 0.0f, step, &none),
                       "tensor sumsq");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_clipping, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_clipping, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_sharded_optimizer, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_norm_skips, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
