/* GPT-2 on the device (src/model) against the CPU reference model (src/ref/gpt2_ref).
 * A tiny model (L=2, C=64, NH=4, V=256, T=16, B=4) from the same initial parameters trains 10
 * AdamW steps (weight decay and clipping on) on both: every step's loss must agree within 1e-5
 * relative and the final parameters within 1e-4 relative (||gpu - ref|| / ||ref||); the loss at
 * initialisation is within 2% of ln(V). Also: gradient accumulation (B=2, 2 micro-steps) equals
 * one batch of B=4, tokens outside the vocabulary are refused, and the eval forward gives the
 * training forward's loss. */
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
#include "model/model.h"
#include "ops/tuning.h"
#include "optim/adamw.h"
#include "parallel/strategy.h"
#include "ref/gpt2_ref.h"
#include "testutil.h"

enum { L = 2, C = 64, NH = 4, V = 256, MAXT = 16, B = 4, T = 16, STEPS = 10 };

static const vkg_model_config cfg = {.max_seq_len = MAXT,
                                     .vocab_size = V,
                                     .padded_vocab_size = V,
                                     .num_layers = L,
                                     .num_heads = NH,
                                     .channels = C};
static const vkg_ref_gpt2_config_t rcfg = {.maxT = MAXT, .V = V, .Vp = V, .L = L, .NH = NH, .C = C};

static vkg_model_opts opts(int b, int accum)
{
    vkg_model_opts o = vkg_model_opts_default();
    o.B = b;
    o.T = T;
    o.accum_steps = accum;
    return o;
}

static const vkg_adamw_config adamw_cfg = {
    .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};

/* AdamW over every tensor of m, as the trainer has it. */
static vkg_adamw *optimizer(vkg_model *m)
{
    vkg_adamw *opt = NULL;
    VKG_ASSERT_OK(vkg_strategy_create_adamw(&adamw_cfg, m, &opt));
    return opt;
}

/* The norm, then the update clipped by it; *norm gets the global gradient norm. */
static vkg_status update(vkg_adamw *opt, float lr, uint32_t t, float clip, float *norm)
{
    float sumsq = 0.0f;
    VKG_TRY(vkg_adamw_grad_sumsq(opt, &sumsq));
    *norm = sqrtf(sumsq);
    return vkg_adamw_update(opt, lr, t, clip, sumsq, 1.0f);
}

/* Batches drawn from a small "language": token k follows token k-1 with noise, so it learns. */
static void make_batch(vkg_test_rng *r, int32_t *inp, int32_t *tgt, int rows)
{
    for (int b = 0; b < rows; b++) {
        int32_t tok = (int32_t)(vkg_test_rng_u64(r) % V);
        for (int t = 0; t <= T; t++) {
            int32_t next = (vkg_test_rng_u64(r) % 4 == 0) ? (int32_t)(vkg_test_rng_u64(r) % V)
                                                          : (tok * 7 + 3) % V;
            if (t < T)
                inp[b * T + t] = tok;
            if (t > 0)
                tgt[b * T + t - 1] = tok;
            tok = next;
        }
    }
}

static void train_matches_reference(vkg_gpu *g)
{
    size_t n = vkg_ref_gpt2_num_params(&rcfg);
    assert_int_equal(n, vkg_model_num_params(&cfg));
    float *params = vkg_test_alloc(n), *grads = vkg_test_alloc(n), *m1 = vkg_test_alloc(n);
    float *m2 = vkg_test_alloc(n), *gpu_params = vkg_test_alloc(n);
    vkg_ref_gpt2_init_params(&rcfg, params, 1234);
    memset(m1, 0, n * 4), memset(m2, 0, n * 4);
    vkg_ref_gpt2_t *ref = NULL;
    assert_int_equal(vkg_ref_gpt2_create(&rcfg, B, T, &ref), 0);
    vkg_model_opts o = opts(B, 1);
    vkg_model *model = NULL;
    VKG_ASSERT_OK(vkg_model_create(g->dev, &cfg, &o, &model));
    VKG_ASSERT_OK(vkg_model_set_params(model, params));
    /* The step runs the fused kernels: GELU in the fc product's epilogue and every residual add
     * inside the layernorm after it, so no gelu_fwd or residual_fwd dispatch of their own. */
    assert_int_equal(vkg_model_list_kernel_count(model, VKG_KERNEL_gelu_fwd), 0);
    assert_int_equal(vkg_model_list_kernel_count(model, VKG_KERNEL_residual_fwd), 0);
    assert_int_equal(vkg_model_list_kernel_count(model, VKG_KERNEL_layernorm_fwd), 2 * L + 1);
    vkg_adamw *opt = optimizer(model);
    vkg_ref_gpt2_adamw_t hp = {.lr = 1e-3,
                               .beta1 = adamw_cfg.beta1,
                               .beta2 = adamw_cfg.beta2,
                               .eps = adamw_cfg.eps,
                               .weight_decay = adamw_cfg.weight_decay,
                               .grad_clip = 1.0};
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 99);
    int32_t inp[B * T], tgt[B * T];
    for (int step = 1; step <= STEPS; step++) {
        make_batch(&r, inp, tgt, B);
        double ref_loss = vkg_ref_gpt2_forward(ref, params, inp, tgt);
        vkg_ref_gpt2_zero_grad(&rcfg, grads);
        vkg_ref_gpt2_backward(ref, params, grads, 1.0);
        double ref_norm = vkg_ref_gpt2_adamw(&rcfg, params, grads, m1, m2, &hp, step);
        float loss = 0.0f, norm = 0.0f;
        VKG_ASSERT_OK(vkg_model_zero_grad(model));
        VKG_ASSERT_OK(vkg_model_forward_backward(model, inp, tgt, &loss));
        VKG_ASSERT_OK(update(opt, (float)hp.lr, (uint32_t)step, (float)hp.grad_clip, &norm));
        double rel = fabs(loss - ref_loss) / fabs(ref_loss);
        printf("step %2d loss gpu %.7f ref %.7f rel %.2e  grad norm gpu %.6f ref %.6f\n", step,
               (double)loss, ref_loss, rel, (double)norm, ref_norm);
        if (step == 1)
            assert_true(fabs(ref_loss - log((double)V)) < 0.02 * log((double)V));
        if (rel > 1e-5)
            fail_msg("step %d: loss %.9g differs from the reference %.9g (rel %.3g > 1e-5)", step,
                     (double)loss, ref_loss, rel);
        assert_true(fabs(norm - ref_norm) <= 1e-4 * ref_norm);
    }
    VKG_ASSERT_OK(vkg_model_get_params(model, gpu_params));
    vkg_test_cmp cmp;
    assert_true(vkg_test_compare("parameters after 10 steps", gpu_params, params, n, 1e-4, &cmp));
    printf("final parameters: rel_l2 %.3g max_abs %.3g\n", cmp.rel_l2, cmp.max_abs);
    vkg_adamw_destroy(&opt);
    vkg_model_destroy(&model);
    vkg_ref_gpt2_destroy(&ref);
    free(params), free(grads), free(m1), free(m2), free(gpu_params);
}

static void test_train_matches_reference(void **state)
{
    train_matches_reference(*state);
}

/* A discrete GPU's tuning (the tiled matmul, the shared-memory attention, wide reductions),
 * forced on this device: ten steps match the reference as closely. */
static void test_train_matches_reference_gpu_tuning(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    vkg_device_tuning gpu = vkg__device_tuning_defaults(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 32);
    assert_int_equal(gpu.matmul_tiled, 1);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &gpu));
    train_matches_reference(g);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* With GELU recomputed in the backward pass (gelu_fwd once per layer there), a step gives the
 * bits of the fused forward pass's stored activations: same loss, same gradients. In both
 * precisions: with bf16 the fc product's epilogue stores the GELU output bf16, and the layernorms
 * fused with the residual adds store theirs bf16, as the unfused kernels would (no residual_fwd,
 * no gelu_fwd in the forward pass either). */
static void recompute_gelu_same_bits(vkg_gpu *g, int precision)
{
    vkg_test_rng r;
    int32_t inp[B * T], tgt[B * T];
    vkg_test_rng_seed(&r, 8);
    make_batch(&r, inp, tgt, B);
    float loss[2];
    size_t n = vkg_model_num_params(&cfg);
    float *params = vkg_test_alloc(n), *g0 = vkg_test_alloc(n), *g1 = vkg_test_alloc(n);
    vkg_ref_gpt2_init_params(&rcfg, params, 4321);
    for (int rc = 0; rc < 2; rc++) {
        vkg_model_opts o = opts(B, 1);
        o.recompute = rc ? VKG_MODEL_RECOMPUTE_GELU : 0;
        o.precision = precision;
        vkg_model *m = NULL;
        VKG_ASSERT_OK(vkg_model_create(g->dev, &cfg, &o, &m));
        assert_int_equal(vkg_model_list_kernel_count(m, VKG_KERNEL_gelu_fwd), rc ? L : 0);
        assert_int_equal(vkg_model_list_kernel_count(m, VKG_KERNEL_residual_fwd), 0);
        VKG_ASSERT_OK(vkg_model_set_params(m, params));
        VKG_ASSERT_OK(vkg_model_zero_grad(m));
        VKG_ASSERT_OK(vkg_model_forward_backward(m, inp, tgt, &loss[rc]));
        VKG_ASSERT_OK(vkg_model_get_grads(m, rc ? g1 : g0));
        vkg_model_destroy(&m);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    assert_memory_equal(g0, g1, n * sizeof *g0);
    free(params), free(g0), free(g1);
}

static void test_recompute_gelu_same_bits(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    vkg_device_tuning gpu = vkg__device_tuning_defaults(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 32);
    for (int p = VKG_PRECISION_FP32; p <= VKG_PRECISION_BF16; p++) {
        VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
        recompute_gelu_same_bits(g, p);
        VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &gpu));
        recompute_gelu_same_bits(g, p);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* One optimizer step over B=4 equals two accumulated micro-steps of B=2 on the same rows. */
static void test_accumulation_equals_one_batch(void **state)
{
    vkg_gpu *g = *state;
    size_t n = vkg_model_num_params(&cfg);
    float *params = vkg_test_alloc(n), *big = vkg_test_alloc(n), *acc = vkg_test_alloc(n);
    vkg_ref_gpt2_init_params(&rcfg, params, 77);
    vkg_model_opts o4 = opts(B, 1), o2 = opts(B / 2, 2);
    vkg_model *m4 = NULL, *m2 = NULL;
    VKG_ASSERT_OK(vkg_model_create(g->dev, &cfg, &o4, &m4));
    VKG_ASSERT_OK(vkg_model_create(g->dev, &cfg, &o2, &m2));
    VKG_ASSERT_OK(vkg_model_set_params(m4, params));
    VKG_ASSERT_OK(vkg_model_set_params(m2, params));
    vkg_adamw *opt4 = optimizer(m4), *opt2 = optimizer(m2);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 5);
    int32_t inp[B * T], tgt[B * T];
    for (int step = 1; step <= 3; step++) {
        make_batch(&r, inp, tgt, B);
        float l4, la, lb, n4 = 0.0f, n2 = 0.0f;
        VKG_ASSERT_OK(vkg_model_zero_grad(m4));
        VKG_ASSERT_OK(vkg_model_forward_backward(m4, inp, tgt, &l4));
        VKG_ASSERT_OK(update(opt4, 1e-3f, (uint32_t)step, 0.0f, &n4));
        VKG_ASSERT_OK(vkg_model_zero_grad(m2));
        VKG_ASSERT_OK(vkg_model_forward_backward(m2, inp, tgt, &la));
        VKG_ASSERT_OK(vkg_model_forward_backward(m2, inp + B / 2 * T, tgt + B / 2 * T, &lb));
        VKG_ASSERT_OK(update(opt2, 1e-3f, (uint32_t)step, 0.0f, &n2));
        double mean2 = 0.5 * ((double)la + (double)lb);
        assert_true(fabs(mean2 - l4) <= 1e-5 * fabs((double)l4));
        assert_true(fabs((double)n2 - n4) <= 1e-4 * n4);
    }
    VKG_ASSERT_OK(vkg_model_get_params(m4, big));
    VKG_ASSERT_OK(vkg_model_get_params(m2, acc));
    assert_true(vkg_test_compare("accumulated vs single batch", acc, big, n, 1e-5, NULL));
    vkg_adamw_destroy(&opt4);
    vkg_adamw_destroy(&opt2);
    vkg_model_destroy(&m4);
    vkg_model_destroy(&m2);
    free(params), free(big), free(acc);
}

static void test_eval_and_bad_tokens(void **state)
{
    vkg_gpu *g = *state;
    size_t n = vkg_model_num_params(&cfg);
    float *params = vkg_test_alloc(n);
    vkg_ref_gpt2_init_params(&rcfg, params, 3);
    vkg_model_opts o = opts(B, 1);
    vkg_model *m = NULL;
    VKG_ASSERT_OK(vkg_model_create(g->dev, &cfg, &o, &m));
    VKG_ASSERT_OK(vkg_model_set_params(m, params));
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 8);
    int32_t inp[B * T], tgt[B * T];
    make_batch(&r, inp, tgt, B);
    float eval = 0.0f, train = 0.0f;
    VKG_ASSERT_OK(vkg_model_forward(m, inp, tgt, &eval));
    VKG_ASSERT_OK(vkg_model_zero_grad(m));
    VKG_ASSERT_OK(vkg_model_forward_backward(m, inp, tgt, &train));
    assert_true(eval == train);
    float row[V];
    assert_int_equal(vkg_model_logits_row(m, 0, 0, row), VKG_ERR_STATE);
    VKG_ASSERT_OK(vkg_model_forward(m, inp, NULL, NULL));
    VKG_ASSERT_OK(vkg_model_logits_row(m, B - 1, T - 1, row));
    for (int i = 0; i < V; i++)
        assert_true(isfinite(row[i]));
    inp[37] = V;
    assert_int_equal(vkg_model_forward(m, inp, tgt, &eval), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "input token 256 at position 37"));
    inp[37] = 0;
    tgt[5] = -1;
    assert_int_equal(vkg_model_forward_backward(m, inp, tgt, &train), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "target token -1 at position 5"));
    vkg_model_opts bad = opts(B, 1);
    bad.T = MAXT + 1;
    vkg_model *none = NULL;
    assert_int_equal(vkg_model_create(g->dev, &cfg, &bad, &none), VKG_ERR_INVALID_ARG);
    assert_null(none);
    vkg_model_destroy(&m);
    free(params);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_train_matches_reference_gpu_tuning, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_train_matches_reference, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_recompute_gelu_same_bits, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_accumulation_equals_one_batch, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_eval_and_bad_tokens, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
