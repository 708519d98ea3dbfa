/* Model parts (src/model: a range of layers with the embeddings and/or the head) against the
 * whole model on one device: the ground pipeline parallelism stands on. Every check runs on
 * GPT-2 and on two Llama-family configurations between them using every choice the device model
 * has (RMSNorm, rotary embeddings, GQA, SwiGLU and ReLU^2, QK-norm with head_dim != C/NH, q/k/v
 * biases, tied and untied heads); an untied model's parts share no tensor, so nothing is handed
 * between them.
 *
 * A model of L=3 layers is split at k (1 and 2) into [0, k) with the embeddings and [k, L) with
 * the head. Two micro-batches go through both parts in two activation slots (both forwards
 * first, then both backwards, as a pipeline schedules them), with the boundary activation and
 * its gradient passed by hand through the host, and the tied wte's gradient handed to whichever
 * part adds to it next (so the additions happen in the whole model's order). The loss of every
 * micro-batch, every parameter gradient and the evaluation logits must equal the whole model's
 * (accumulating the same two micro-batches) bitwise: the parts run the same dispatches on the
 * same values. The same in bf16 precision, where the boundary activation is bf16 (half the bytes).
 * Also: parts that break the layer rules, boundaries a part does not have and tokens sent to the
 * wrong part are refused with errors naming them; every part's memory plan (vkg_model_memory, no
 * device) is exactly what it allocated; and a part's backward run as input and weight passes or
 * as a split recording of one slot adds bitwise what its whole backward adds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "model/model.h"
#include "testutil.h"

enum { L = 3, C = 32, NH = 4, V = 200, VP = 256, MAXT = 16, B = 2, T = 12, MICRO = 2 };

static const vkg_model_config gpt2 = {.max_seq_len = MAXT,
                                      .vocab_size = V,
                                      .padded_vocab_size = VP,
                                      .num_layers = L,
                                      .num_heads = NH,
                                      .channels = C};
/* Llama: GQA 4/2, RMSNorm, rotary embeddings, SwiGLU, tied, no biases. */
static const vkg_model_config llama = {.max_seq_len = MAXT,
                                       .vocab_size = V,
                                       .padded_vocab_size = VP,
                                       .num_layers = L,
                                       .num_heads = NH,
                                       .channels = C,
                                       .num_kv_heads = 2,
                                       .mlp_hidden = 48,
                                       .mlp = VKG_MLP_SWIGLU,
                                       .norm = VKG_NORM_RMS,
                                       .pos = VKG_POS_ROPE,
                                       .bias = VKG_BIAS_NONE};
/* The rest of the family's choices: QK-norm, head_dim 16 (NH D = 64 != C), GQA 4/1, q/k/v
 * biases, ReLU^2, an untied head. */
static const vkg_model_config qwen = {.max_seq_len = MAXT,
                                      .vocab_size = V,
                                      .padded_vocab_size = VP,
                                      .num_layers = L,
                                      .num_heads = NH,
                                      .channels = C,
                                      .num_kv_heads = 1,
                                      .head_dim = 16,
                                      .mlp_hidden = 40,
                                      .mlp = VKG_MLP_RELU2,
                                      .norm = VKG_NORM_RMS,
                                      .norm_eps = 1e-6f,
                                      .pos = VKG_POS_ROPE,
                                      .rope_theta = 1000000.0f,
                                      .qk_norm = 1,
                                      .bias = VKG_BIAS_QKV,
                                      .untied = 1};
static const vkg_model_config *const families[] = {&gpt2, &llama, &qwen};
static const char *const family_names[] = {"gpt2", "llama", "qwen"};
#define NFAMILIES 3
/* The configuration the checks below run on. */
static const vkg_model_config *cfg = &gpt2;

static vkg_model *create_w(vkg_device_t *dev, int first, int last, int flags, const float *whole,
                           int precision, int split_w)
{
    vkg_model_opts o = vkg_model_opts_default();
    o.B = B, o.T = T, o.accum_steps = MICRO, o.slots = MICRO, o.precision = precision;
    o.split_w = split_w;
    o.part = (vkg_model_part){.first = first, .last = last, .flags = flags};
    vkg_model *m = NULL;
    VKG_ASSERT_OK(vkg_model_create(dev, cfg, &o, &m));
    vkg_model_memory_plan plan; /* the plan without a device is what was allocated */
    VKG_ASSERT_OK(vkg_model_memory(cfg, &o, &plan));
    assert_int_equal(plan.total, vkg_model_device_bytes(m));
    assert_int_equal(plan.activations, vkg_model_activation_bytes(m));
    const vkg_model_layout *lo = vkg_model_layout_of(m);
    assert_int_equal(lo->total, vkg_model_param_count(m));
    float *p = vkg_test_alloc(lo->total);
    vkg_model_part_extract(lo, whole, p);
    VKG_ASSERT_OK(vkg_model_set_params(m, p));
    free(p);
    return m;
}

static vkg_model *create(vkg_device_t *dev, int first, int last, int flags, const float *whole,
                         int precision)
{
    return create_w(dev, first, last, flags, whole, precision, 0);
}

/* Copy the wte gradient of part `from` into part `to` (both hold wte at part offset 0); nothing
 * for an untied model, whose parts share no tensor. */
static void hand_wte_grad(vkg_model *from, vkg_model *to)
{
    if (!vkg_model_layout_of(to)->tied)
        return;
    size_t nf = vkg_model_param_count(from), nt = vkg_model_param_count(to);
    const vkg_model_layout *lf = vkg_model_layout_of(from), *lt = vkg_model_layout_of(to);
    assert_int_equal(lf->part_offset[0], 0);
    assert_int_equal(lt->part_offset[0], 0);
    assert_int_equal(lf->count[0], lt->count[0]);
    float *gf = vkg_test_alloc(nf), *gt = vkg_test_alloc(nt);
    VKG_ASSERT_OK(vkg_model_get_grads(from, gf));
    VKG_ASSERT_OK(vkg_model_get_grads(to, gt));
    memcpy(gt, gf, lf->count[0] * sizeof *gf);
    VKG_ASSERT_OK(vkg_model_set_grads(to, gt));
    free(gf), free(gt);
}

/* The boundary activation of slot s from a to b, or the gradient from b back to a. */
static void pass(vkg_model *from, vkg_model_boundary out, vkg_model *to, vkg_model_boundary in,
                 int s)
{
    float *buf = vkg_test_alloc((size_t)B * T * C);
    VKG_ASSERT_OK(vkg_model_boundary_read(from, out, s, buf));
    VKG_ASSERT_OK(vkg_model_boundary_write(to, in, s, buf));
    free(buf);
}

static void random_tokens(vkg_test_rng *r, int32_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)(vkg_test_rng_u64(r) % V);
}

static void check_split(vkg_gpu *g, int k, int precision)
{
    const char *prec = precision == VKG_PRECISION_BF16 ? "bf16" : "fp32";
    size_t n = vkg_model_num_params(cfg);
    float *whole = vkg_test_alloc(n), *gw = vkg_test_alloc(n), *gparts = vkg_test_alloc(n);
    vkg_model_init_params(cfg, whole, 11);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 21 + (uint64_t)k);
    int32_t inp[MICRO][B * T], tgt[MICRO][B * T];
    for (int mb = 0; mb < MICRO; mb++) {
        random_tokens(&r, inp[mb], B * T);
        random_tokens(&r, tgt[mb], B * T);
    }

    /* The whole model, accumulating the two micro-batches. */
    vkg_model *w =
        create(g->dev, 0, L, VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD, whole, precision);
    float lw[MICRO];
    VKG_ASSERT_OK(vkg_model_zero_grad(w));
    for (int mb = 0; mb < MICRO; mb++)
        VKG_ASSERT_OK(vkg_model_forward_backward(w, inp[mb], tgt[mb], &lw[mb]));
    VKG_ASSERT_OK(vkg_model_get_grads(w, gw));

    /* The two parts: both forwards, then both backwards. */
    vkg_model *a = create(g->dev, 0, k, VKG_MODEL_PART_EMBED, whole, precision);
    vkg_model *b = create(g->dev, k, L, VKG_MODEL_PART_HEAD, whole, precision);
    /* the activation boundary goes as the model stores it, its gradient in fp32 */
    size_t act = precision == VKG_PRECISION_BF16 ? 2 : 4;
    assert_int_equal(vkg_model_boundary_bytes(a, VKG_MODEL_OUT), (size_t)B * T * C * act);
    assert_int_equal(vkg_model_boundary_bytes(b, VKG_MODEL_IN), (size_t)B * T * C * act);
    assert_int_equal(vkg_model_boundary_bytes(b, VKG_MODEL_DIN), (size_t)B * T * C * 4);
    assert_int_equal(vkg_model_boundary_bytes(a, VKG_MODEL_DOUT), (size_t)B * T * C * 4);
    float lb[MICRO];
    VKG_ASSERT_OK(vkg_model_zero_grad(a));
    VKG_ASSERT_OK(vkg_model_zero_grad(b));
    for (int s = 0; s < MICRO; s++) {
        VKG_ASSERT_OK(vkg_model_forward_train(a, s, inp[s], NULL, NULL));
        pass(a, VKG_MODEL_OUT, b, VKG_MODEL_IN, s);
        VKG_ASSERT_OK(vkg_model_forward_train(b, s, NULL, tgt[s], &lb[s]));
    }
    for (int s = 0; s < MICRO; s++) {
        if (s > 0) /* the whole model adds this classifier gradient to wte after a's rows */
            hand_wte_grad(a, b);
        VKG_ASSERT_OK(vkg_model_backward(b, s));
        pass(b, VKG_MODEL_DIN, a, VKG_MODEL_DOUT, s);
        hand_wte_grad(b, a);
        VKG_ASSERT_OK(vkg_model_backward(a, s));
    }
    for (int s = 0; s < MICRO; s++)
        if (memcmp(&lb[s], &lw[s], sizeof lw[s]))
            fail_msg("%s split at %d: micro-batch %d loss %.9g differs from the whole model's %.9g",
                     prec, k, s, (double)lb[s], (double)lw[s]);
    float *ga = vkg_test_alloc(vkg_model_param_count(a)),
          *gb = vkg_test_alloc(vkg_model_param_count(b));
    VKG_ASSERT_OK(vkg_model_get_grads(a, ga));
    VKG_ASSERT_OK(vkg_model_get_grads(b, gb));
    memset(gparts, 0xff, n * sizeof *gparts); /* NaN: a tensor no part fills is caught */
    vkg_model_part_insert(vkg_model_layout_of(b), gb, gparts);
    vkg_model_part_insert(vkg_model_layout_of(a), ga, gparts); /* a's wte holds the whole sum */
    for (size_t i = 0; i < n; i++)
        if (memcmp(&gparts[i], &gw[i], sizeof gw[i]))
            fail_msg("%s split at %d: gradient %zu is %.9g from the parts but %.9g from the "
                     "whole model",
                     prec, k, i, (double)gparts[i], (double)gw[i]);
    printf("%s split at %d: losses %.7f %.7f and %zu gradients bitwise equal to the whole "
           "model's\n",
           prec, k, (double)lb[0], (double)lb[1], n);

    /* Evaluation and logits through the parts (slot 0's forward list). */
    float ew = 0.0f, ep = 0.0f, rw[VP], rp[VP];
    VKG_ASSERT_OK(vkg_model_forward(w, inp[1], tgt[1], &ew));
    VKG_ASSERT_OK(vkg_model_forward(a, inp[1], NULL, NULL));
    pass(a, VKG_MODEL_OUT, b, VKG_MODEL_IN, 0);
    VKG_ASSERT_OK(vkg_model_forward(b, NULL, tgt[1], &ep));
    assert_memory_equal(&ew, &ep, sizeof ew);
    VKG_ASSERT_OK(vkg_model_forward(w, inp[0], NULL, NULL));
    VKG_ASSERT_OK(vkg_model_forward(a, inp[0], NULL, NULL));
    pass(a, VKG_MODEL_OUT, b, VKG_MODEL_IN, 0);
    VKG_ASSERT_OK(vkg_model_forward(b, NULL, NULL, NULL));
    VKG_ASSERT_OK(vkg_model_logits_row(w, B - 1, T - 1, rw));
    VKG_ASSERT_OK(vkg_model_logits_row(b, B - 1, T - 1, rp));
    assert_memory_equal(rw, rp, sizeof rw);

    vkg_model_destroy(&w), vkg_model_destroy(&a), vkg_model_destroy(&b);
    free(whole), free(gw), free(gparts), free(ga), free(gb);
}

static void test_two_parts_equal_whole(void **state)
{
    for (int f = 0; f < NFAMILIES; f++) {
        cfg = families[f];
        printf("%s:\n", family_names[f]);
        for (int k = 1; k < L; k++)
            check_split(*state, k, VKG_PRECISION_FP32);
    }
    cfg = &gpt2;
}

/* Mixed precision: the boundary is the bf16 residual stream, passed as stored (half the bytes);
 * the parts still run the whole model's dispatches on the same values, so bitwise again. */
static void test_two_parts_equal_whole_bf16(void **state)
{
    for (int f = 0; f < NFAMILIES; f++) {
        cfg = families[f];
        printf("%s:\n", family_names[f]);
        for (int k = 1; k < L; k++)
            check_split(*state, k, VKG_PRECISION_BF16);
    }
    cfg = &gpt2;
}

/* The ways a part's backward may run, each adding the same values in the same order: */
enum {
    WHOLE_PASS, /* vkg_model_backward, slot by slot */
    TWO_PASSES, /* every slot's input pass, then every slot's weight pass (ZB-H1's deferral) */
    SPLIT_LAST, /* the last slot's backward as a split recording of 2 lists (pipeline buckets) */
    NUM_WAYS
};

/* Two parts (split at 1) created with split_w; both slots forward, then backward in `way`; the
 * gradients of both parts and the gradients passed between them into ga, gb, din. */
static void run_backward_way(vkg_gpu *g, int way, const float *whole, const int32_t *inp,
                             const int32_t *tgt, float *ga, float *gb, float *din)
{
    vkg_model *a = create_w(g->dev, 0, 1, VKG_MODEL_PART_EMBED, whole, VKG_PRECISION_FP32, 1);
    vkg_model *b = create_w(g->dev, 1, L, VKG_MODEL_PART_HEAD, whole, VKG_PRECISION_FP32, 1);
    VKG_ASSERT_OK(vkg_model_zero_grad(a));
    VKG_ASSERT_OK(vkg_model_zero_grad(b));
    for (int s = 0; s < MICRO; s++) {
        VKG_ASSERT_OK(vkg_model_forward_train(a, s, inp + s * B * T, NULL, NULL));
        pass(a, VKG_MODEL_OUT, b, VKG_MODEL_IN, s);
        VKG_ASSERT_OK(vkg_model_forward_train(b, s, NULL, tgt + s * B * T, NULL));
    }
    for (int s = 0; s < MICRO; s++) {
        vkg_model *parts[2] = {b, a};
        for (int i = 0; i < 2; i++) {
            vkg_model *m = parts[i];
            if (way == TWO_PASSES) {
                VKG_ASSERT_OK(vkg_model_backward_input(m, s));
            } else if (way == SPLIT_LAST && s == MICRO - 1) {
                int last[2] = {0, vkg_model_unit_count(m) - 1};
                VKG_ASSERT_OK(vkg_model_split_backward(m, s, last, 2, NULL));
                VKG_ASSERT_OK(vkg_model_split_submit(m, NULL, NULL));
                VKG_ASSERT_OK(vkg_model_split_wait(m, 0));
                VKG_ASSERT_OK(vkg_model_split_finish(m, NULL));
                VKG_ASSERT_OK(vkg_model_split_commit(m));
            } else {
                VKG_ASSERT_OK(vkg_model_backward(m, s));
            }
            if (m == b) {
                VKG_ASSERT_OK(vkg_model_boundary_read(b, VKG_MODEL_DIN, s, din + s * B * T * C));
                VKG_ASSERT_OK(vkg_model_boundary_write(a, VKG_MODEL_DOUT, s, din + s * B * T * C));
            }
        }
    }
    for (int s = 0; way == TWO_PASSES && s < MICRO; s++) {
        VKG_ASSERT_OK(vkg_model_backward_weight(b, s));
        VKG_ASSERT_OK(vkg_model_backward_weight(a, s));
    }
    VKG_ASSERT_OK(vkg_model_get_grads(a, ga));
    VKG_ASSERT_OK(vkg_model_get_grads(b, gb));
    vkg_model_destroy(&a), vkg_model_destroy(&b);
}

/* A part's backward as input and weight passes (split_w) with every weight pass deferred past
 * the other slot's input pass, and as a split recording of the last slot's backward alone, adds
 * bitwise what vkg_model_backward adds, and passes the same input gradient back; without split_w
 * the two passes are refused. */
static void backward_ways(vkg_gpu *g);

static void test_backward_ways(void **state)
{
    for (int f = 0; f < NFAMILIES; f++) {
        cfg = families[f];
        printf("%s:\n", family_names[f]);
        backward_ways(*state);
    }
    cfg = &gpt2;
}

static void backward_ways(vkg_gpu *g)
{
    size_t n = vkg_model_num_params(cfg);
    float *whole = vkg_test_alloc(n);
    vkg_model_init_params(cfg, whole, 12);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 33);
    int32_t inp[MICRO * B * T], tgt[MICRO * B * T];
    random_tokens(&r, inp, MICRO * B * T);
    random_tokens(&r, tgt, MICRO * B * T);
    float *ga[NUM_WAYS], *gb[NUM_WAYS], *din[NUM_WAYS];
    size_t na = 0, nb = 0;
    for (int w = 0; w < NUM_WAYS; w++) {
        if (w == 0) { /* the parts' sizes */
            vkg_model *a = create(g->dev, 0, 1, VKG_MODEL_PART_EMBED, whole, VKG_PRECISION_FP32);
            vkg_model *b = create(g->dev, 1, L, VKG_MODEL_PART_HEAD, whole, VKG_PRECISION_FP32);
            na = vkg_model_param_count(a), nb = vkg_model_param_count(b);
            assert_int_equal(vkg_model_backward_input(a, 0), VKG_ERR_STATE);
            assert_int_equal(vkg_model_backward_weight(b, 0), VKG_ERR_STATE);
            vkg_model_destroy(&a), vkg_model_destroy(&b);
        }
        ga[w] = vkg_test_alloc(na), gb[w] = vkg_test_alloc(nb);
        din[w] = vkg_test_alloc((size_t)MICRO * B * T * C);
        run_backward_way(g, w, whole, inp, tgt, ga[w], gb[w], din[w]);
    }
    static const char *const names[NUM_WAYS] = {"whole pass", "input then weight passes",
                                                "split last backward"};
    for (int w = 1; w < NUM_WAYS; w++) {
        if (memcmp(ga[w], ga[0], na * sizeof *ga[0]) || memcmp(gb[w], gb[0], nb * sizeof *gb[0]))
            fail_msg("%s: the parts' gradients differ from the whole backward's", names[w]);
        if (memcmp(din[w], din[0], (size_t)MICRO * B * T * C * sizeof *din[0]))
            fail_msg("%s: the input gradient passed back differs", names[w]);
        printf("%s: %zu + %zu gradients and the input gradient bitwise the whole backward's\n",
               names[w], na, nb);
    }
    for (int w = 0; w < NUM_WAYS; w++)
        free(ga[w]), free(gb[w]), free(din[w]);
    free(whole);
}

static void expect_refused(vkg_status st, const char *needle)
{
    assert_int_equal(st, VKG_ERR_INVALID_ARG);
    if (!strstr(vkg_error_message(), needle))
        fail_msg("expected \"%s\" in: %s", needle, vkg_error_message());
}

static void test_bad_parts_refused(void **state)
{
    vkg_gpu *g = *state;
    vkg_model_opts o = vkg_model_opts_default();
    o.B = B, o.T = T;
    vkg_model *m = NULL;
    const struct {
        vkg_model_part part;
        const char *needle;
    } bad[] = {
        {{1, 3, VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD}, "embeddings belong to the part"},
        {{0, 2, VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD}, "head belongs to the part"},
        {{0, 2, 0}, "embeddings belong to the part"},
        {{2, 2, VKG_MODEL_PART_HEAD}, "non-empty range"},
        {{1, 4, VKG_MODEL_PART_HEAD}, "non-empty range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.part = bad[i].part;
        expect_refused(vkg_model_create(g->dev, cfg, &o, &m), bad[i].needle);
        assert_null(m);
    }
    o.part = (vkg_model_part){0, 2, VKG_MODEL_PART_EMBED};
    o.slots = 0;
    expect_refused(vkg_model_create(g->dev, cfg, &o, &m), "activation slots");
    o.slots = 1;
    VKG_ASSERT_OK(vkg_model_create(g->dev, cfg, &o, &m));
    float buf[B * T * C];
    int32_t tok[B * T] = {0};
    expect_refused(vkg_model_boundary_read(m, VKG_MODEL_DIN, 0, buf), "no input boundary");
    expect_refused(vkg_model_boundary_write(m, VKG_MODEL_IN, 0, buf), "no input boundary");
    expect_refused(vkg_model_boundary_read(m, VKG_MODEL_OUT, 1, buf), "slot 1 outside [0, 1)");
    expect_refused(vkg_model_forward_train(m, 0, tok, tok, NULL), "targets go to the last part");
    expect_refused(vkg_model_forward_train(m, 0, NULL, NULL, NULL), "needs input tokens");
    vkg_model *h = NULL;
    o.part = (vkg_model_part){2, 3, VKG_MODEL_PART_HEAD};
    VKG_ASSERT_OK(vkg_model_create(g->dev, cfg, &o, &h));
    expect_refused(vkg_model_boundary_write(h, VKG_MODEL_DOUT, 0, buf), "no output boundary");
    expect_refused(vkg_model_forward(h, tok, tok, NULL), "tokens go to the first part");
    assert_int_equal(vkg_model_forward_backward(h, NULL, tok, NULL), VKG_ERR_STATE);
    vkg_model_destroy(&m), vkg_model_destroy(&h);
}

/* With the MLP's activation recomputed in the backward pass (VKG_MODEL_RECOMPUTE_GELU: GELU,
 * SwiGLU or ReLU^2 once per layer there), a whole model's forward-backward of two micro-batches
 * gives the same loss and gradients, bitwise, for every family, in fp32 and bf16. */
static void test_recompute_same_bits(void **state)
{
    vkg_gpu *g = *state;
    for (int f = 0; f < NFAMILIES; f++)
        for (int prec = 0; prec < 2; prec++) {
            cfg = families[f];
            size_t n = vkg_model_num_params(cfg);
            float *whole = vkg_test_alloc(n), *gr[2] = {vkg_test_alloc(n), vkg_test_alloc(n)};
            float loss[2][MICRO];
            vkg_model_init_params(cfg, whole, 13);
            vkg_test_rng r;
            vkg_test_rng_seed(&r, 44);
            int32_t inp[MICRO * B * T], tgt[MICRO * B * T];
            random_tokens(&r, inp, MICRO * B * T);
            random_tokens(&r, tgt, MICRO * B * T);
            for (int rc = 0; rc < 2; rc++) {
                vkg_model_opts o = vkg_model_opts_default();
                o.B = B, o.T = T, o.accum_steps = MICRO, o.precision = prec;
                o.recompute = rc ? VKG_MODEL_RECOMPUTE_GELU : 0;
                vkg_model *m = NULL;
                VKG_ASSERT_OK(vkg_model_create(g->dev, cfg, &o, &m));
                VKG_ASSERT_OK(vkg_model_set_params(m, whole));
                VKG_ASSERT_OK(vkg_model_zero_grad(m));
                for (int mb = 0; mb < MICRO; mb++)
                    VKG_ASSERT_OK(vkg_model_forward_backward(m, inp + mb * B * T, tgt + mb * B * T,
                                                             &loss[rc][mb]));
                VKG_ASSERT_OK(vkg_model_get_grads(m, gr[rc]));
                vkg_model_destroy(&m);
            }
            if (memcmp(loss[0], loss[1], sizeof loss[0]) || memcmp(gr[0], gr[1], n * sizeof *gr[0]))
                fail_msg("%s %s: recomputing the MLP activation changed the step", family_names[f],
                         prec ? "bf16" : "fp32");
            printf("%s %s: recomputed MLP activation, loss %.7f and %zu gradients bitwise\n",
                   family_names[f], prec ? "bf16" : "fp32", (double)loss[0][0], n);
            free(whole), free(gr[0]), free(gr[1]);
        }
    cfg = &gpt2;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_parts_equal_whole, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_two_parts_equal_whole_bf16, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_parts_refused, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_backward_ways, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_recompute_same_bits, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
