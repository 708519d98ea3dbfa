/* Tests of the reference GPT-2 (src/ref/gpt2_ref.h).
 *
 * The backward pass is checked against central finite differences of the mean loss in double on
 * a tiny config (L=2, C=8, NH=2, V=13, Vp=16, maxT=5, B=2, T=4) at EVERY parameter coordinate of
 * all 16 tensors: h = 5e-6; per coordinate error |a - n| / max(|a|, |n|, 1e-3 * max|a| of the
 * tensor) must stay below 1e-6 (measured: about 1e-8). Then: the parameter table, the init and
 * its loss (about ln V), a few AdamW steps that lower the loss, gradient accumulation over two
 * half batches against one full batch, float against double, and AdamW's weight-decay mask and
 * clipping.
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

#include "ref/fd_check.h"
#include "ref/gpt2_ref.h"
#include "ref/ref.h"
#include "testutil.h"

#define FD_H 5e-6
#define FD_BOUND 1e-6

static const vkg_ref_gpt2_config_t tiny = {.maxT = 5, .V = 13, .Vp = 16, .L = 2, .NH = 2, .C = 8};
static const char *const names[VKG_REF_GPT2_NUM_TENSORS] = {
    "wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};

static double *dnew(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

static float *fnew(size_t n)
{
    float *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

/* Random params around the init: normal init plus uniform noise of +-0.3 on every coordinate,
 * wte's padding rows included (they must still get zero gradient), so no gradient is trivial. */
static void random_params(const vkg_ref_gpt2_config_t *cfg, double *p, uint64_t seed)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    size_t n = vkg_ref_gpt2_num_params(cfg);
    vkg_ref_gpt2_init_params_f64(cfg, p, seed);
    for (size_t i = 0; i < n; i++)
        p[i] += 0.3 * (2.0 * ((double)(vkg_test_rng_u64(&r) >> 11) / 9007199254740992.0) - 1.0);
}

static void test_param_table(void **state)
{
    (void)state;
    size_t sizes[16], off[16];
    size_t want[16] = {16 * 8, 5 * 8, 2 * 8,      2 * 8,  2 * 24 * 8, 2 * 24, 2 * 8 * 8, 2 * 8,
                       2 * 8,  2 * 8, 2 * 32 * 8, 2 * 32, 2 * 8 * 32, 2 * 8,  8,         8};
    vkg_ref_gpt2_param_sizes(&tiny, sizes);
    vkg_ref_gpt2_param_offsets(&tiny, off);
    size_t total = 0;
    for (int i = 0; i < 16; i++) {
        assert_int_equal(sizes[i], want[i]);
        assert_int_equal(off[i], total);
        total += want[i];
        int decays = i == 0 || i == 1 || i == 4 || i == 6 || i == 10 || i == 12;
        assert_int_equal(vkg_ref_gpt2_param_decays(i), decays);
    }
    assert_int_equal(vkg_ref_gpt2_num_params(&tiny), total);
    vkg_ref_gpt2_config_t bad = tiny;
    bad.C = 9; /* not divisible by NH */
    assert_false(vkg_ref_gpt2_config_ok(&bad));
    bad = tiny, bad.Vp = 12; /* Vp < V */
    assert_false(vkg_ref_gpt2_config_ok(&bad));
    assert_true(vkg_ref_gpt2_config_ok(&tiny));
    vkg_ref_gpt2_f64_t *m = (vkg_ref_gpt2_f64_t *)&bad;
    assert_int_equal(vkg_ref_gpt2_create_f64(&tiny, 2, 6, &m), -1); /* T > maxT */
    assert_null(m);
    assert_int_equal(vkg_ref_gpt2_create_f64(&bad, 2, 4, &m), -1);
    assert_int_equal(vkg_ref_gpt2_create_f64(&tiny, 2, 5, &m), 0);
    assert_non_null(m);
    vkg_ref_gpt2_destroy_f64(&m);
    assert_null(m);
    vkg_ref_gpt2_destroy_f64(&m); /* NULL-safe */
    vkg_ref_gpt2_destroy_f64(NULL);
}

typedef struct fd_ctx {
    vkg_ref_gpt2_f64_t *m;
    const double *p;
    const int32_t *x, *y;
} fd_ctx;

static double mean_loss(void *ctx)
{
    fd_ctx *c = ctx;
    return vkg_ref_gpt2_forward_f64(c->m, c->p, c->x, c->y);
}

static void test_fd_full_model(void **state)
{
    (void)state;
    enum { B = 2, T = 4 };
    size_t n = vkg_ref_gpt2_num_params(&tiny), sizes[16], off[16];
    vkg_ref_gpt2_param_sizes(&tiny, sizes);
    vkg_ref_gpt2_param_offsets(&tiny, off);
    double *p = dnew(n), *g = dnew(n);
    random_params(&tiny, p, 11);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 12);
    int32_t x[B * T], y[B * T];
    vkg_test_fill_int(&r, x, B * T, tiny.V);
    vkg_test_fill_int(&r, y, B * T, tiny.V);
    fd_ctx c = {.p = p, .x = x, .y = y};
    assert_int_equal(vkg_ref_gpt2_create_f64(&tiny, B, T, &c.m), 0);
    double loss = mean_loss(&c);
    for (size_t i = 0; i < n; i++)
        g[i] = 0.25; /* pre-filled: backward must accumulate */
    vkg_ref_gpt2_backward_f64(c.m, p, g, 1.0);
    for (size_t i = 0; i < n; i++)
        g[i] -= 0.25;
    double worst = 0.0;
    for (int k = 0; k < 16; k++) { /* every coordinate of every tensor */
        vkg_ref_fd_result_t res =
            vkg_ref_fd_check(p + off[k], g + off[k], sizes[k], sizes[k], FD_H, 0, mean_loss, &c);
        double gmax = 0.0;
        for (size_t i = off[k]; i < off[k] + sizes[k]; i++)
            gmax = fmax(gmax, fabs(g[i]));
        printf("fd gpt2 %-9s %4zu coords  max|grad| %.2e  max rel err %.2e (at %zu)\n", names[k],
               res.checked, gmax, res.max_err, res.worst);
        assert_true(gmax > 1e-3); /* no tensor's gradient is trivial */
        worst = fmax(worst, res.max_err);
    }
    assert_true(worst < FD_BOUND);
    /* wte's padding rows are masked out of the softmax: exactly zero gradient */
    for (size_t i = (size_t)tiny.V * tiny.C; i < sizes[0]; i++)
        assert_true(g[i] == 0.0);
    /* the sweep restored every parameter exactly */
    assert_true(mean_loss(&c) == loss);
    vkg_ref_gpt2_destroy_f64(&c.m);
    free(p), free(g);
}

/* The forward written again from llm.c's table, walking the parameter array with a cursor in
 * tensor order, so a layout or wiring mistake in gpt2_ref would have to be made twice. */
static double independent_loss(const vkg_ref_gpt2_config_t *cfg, const double *p, const int32_t *x,
                               const int32_t *y, int B, int T)
{
    int C = cfg->C, L = cfg->L, BT = B * T;
    const double *cur = p, *t[16];
    size_t cnt[16] = {(size_t)cfg->Vp * C,
                      (size_t)cfg->maxT * C,
                      (size_t)L * C,
                      (size_t)L * C,
                      (size_t)L * 3 * C * C,
                      (size_t)L * 3 * C,
                      (size_t)L * C * C,
                      (size_t)L * C,
                      (size_t)L * C,
                      (size_t)L * C,
                      (size_t)L * 4 * C * C,
                      (size_t)L * 4 * C,
                      (size_t)L * 4 * C * C,
                      (size_t)L * C,
                      (size_t)C,
                      (size_t)C};
    for (int k = 0; k < 16; k++)
        t[k] = cur, cur += cnt[k];
    assert_int_equal(cur - p, vkg_ref_gpt2_num_params(cfg));
    double *res = dnew((size_t)BT * C), *ln = dnew((size_t)BT * C), *qkv = dnew((size_t)BT * 3 * C);
    double *lse = dnew((size_t)B * cfg->NH * T), *ya = dnew((size_t)BT * C);
    double *proj = dnew((size_t)BT * C), *h = dnew((size_t)BT * 4 * C);
    double *hg = dnew((size_t)BT * 4 * C), *mean = dnew(BT), *rstd = dnew(BT);
    double *logits = dnew((size_t)BT * cfg->Vp), *losses = dnew(BT);
    vkg_ref_encoder_fwd_f64(res, x, t[0], t[1], B, T, C);
    for (int l = 0; l < L; l++) {
        vkg_ref_layernorm_fwd_f64(ln, mean, rstd, res, t[2] + l * C, t[3] + l * C, BT, C);
        vkg_ref_matmul_fwd_f64(qkv, ln, t[4] + l * 3 * C * C, t[5] + l * 3 * C, BT, C, 3 * C);
        vkg_ref_attention_fwd_f64(ya, lse, NULL, qkv, B, T, C, cfg->NH);
        vkg_ref_matmul_fwd_f64(proj, ya, t[6] + l * C * C, t[7] + l * C, BT, C, C);
        vkg_ref_residual_fwd_f64(res, res, proj, (size_t)BT * C);
        vkg_ref_layernorm_fwd_f64(ln, mean, rstd, res, t[8] + l * C, t[9] + l * C, BT, C);
        vkg_ref_matmul_fwd_f64(h, ln, t[10] + l * 4 * C * C, t[11] + l * 4 * C, BT, C, 4 * C);
        vkg_ref_gelu_fwd_f64(hg, h, (size_t)BT * 4 * C);
        vkg_ref_matmul_fwd_f64(proj, hg, t[12] + l * 4 * C * C, t[13] + l * C, BT, 4 * C, C);
        vkg_ref_residual_fwd_f64(res, res, proj, (size_t)BT * C);
    }
    vkg_ref_layernorm_fwd_f64(ln, mean, rstd, res, t[14], t[15], BT, C);
    vkg_ref_matmul_fwd_f64(logits, ln, t[0], NULL, BT, C, cfg->Vp); /* tied to wte */
    vkg_ref_xent_fwd_bwd_f64(losses, NULL, logits, y, BT, cfg->V, cfg->Vp, 0.0);
    double sum = 0.0;
    for (int i = 0; i < BT; i++)
        sum += losses[i];
    free(res), free(ln), free(qkv), free(lse), free(ya), free(proj), free(h), free(hg);
    free(mean), free(rstd), free(logits), free(losses);
    return sum / BT;
}

static void test_forward_wiring(void **state)
{
    (void)state;
    enum { B = 3, T = 4 };
    double *p = dnew(vkg_ref_gpt2_num_params(&tiny));
    random_params(&tiny, p, 61);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 62);
    int32_t x[B * T], y[B * T];
    vkg_test_fill_int(&r, x, B * T, tiny.V);
    vkg_test_fill_int(&r, y, B * T, tiny.V);
    vkg_ref_gpt2_f64_t *m = NULL;
    assert_int_equal(vkg_ref_gpt2_create_f64(&tiny, B, T, &m), 0);
    double want = independent_loss(&tiny, p, x, y, B, T);
    double got = vkg_ref_gpt2_forward_f64(m, p, x, y);
    printf("wiring: model loss %.15f, independent %.15f\n", got, want);
    assert_true(fabs(got - want) <= 1e-13 * want);
    vkg_ref_gpt2_destroy_f64(&m);
    free(p);
}

static void test_init_loss(void **state)
{
    (void)state;
    vkg_ref_gpt2_config_t cfg = {.maxT = 16, .V = 50, .Vp = 64, .L = 2, .NH = 4, .C = 32};
    enum { B = 4, T = 16 };
    size_t n = vkg_ref_gpt2_num_params(&cfg), sizes[16], off[16];
    vkg_ref_gpt2_param_sizes(&cfg, sizes);
    vkg_ref_gpt2_param_offsets(&cfg, off);
    float *p = fnew(n);
    double *pd = dnew(n);
    vkg_ref_gpt2_init_params(&cfg, p, 5);
    vkg_ref_gpt2_init_params_f64(&cfg, pd, 5);
    for (size_t i = 0; i < n; i++)
        assert_true(p[i] == (float)pd[i]); /* both precisions init identically */
    for (int k = 0; k < 16; k++) {
        const float *t = p + off[k];
        size_t cnt = k == 0 ? (size_t)cfg.V * cfg.C : sizes[k];
        double s2 = 0.0;
        for (size_t i = 0; i < cnt; i++)
            s2 += (double)t[i] * t[i];
        double std = sqrt(s2 / cnt);
        if (vkg_ref_gpt2_param_decays(k)) {
            double want = (k == 6 || k == 12) ? 0.02 / sqrt(2.0 * cfg.L) : 0.02;
            assert_true(fabs(std - want) < 0.1 * want);
        } else {
            double want = (k == 2 || k == 8 || k == 14) ? 1.0 : 0.0; /* ln weights, biases */
            for (size_t i = 0; i < cnt; i++)
                assert_true(t[i] == (float)want);
        }
    }
    for (size_t i = (size_t)cfg.V * cfg.C; i < sizes[0]; i++)
        assert_true(p[i] == 0.0f); /* wte padding rows */
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 6);
    int32_t x[B * T], y[B * T];
    vkg_test_fill_int(&r, x, B * T, cfg.V);
    vkg_test_fill_int(&r, y, B * T, cfg.V);
    vkg_ref_gpt2_t *m = NULL;
    assert_int_equal(vkg_ref_gpt2_create(&cfg, B, T, &m), 0);
    double loss = vkg_ref_gpt2_forward(m, p, x, y);
    printf("init loss %.6f, ln V %.6f\n", loss, log((double)cfg.V));
    assert_true(fabs(loss - log((double)cfg.V)) < 0.02);
    const float *logits = vkg_ref_gpt2_logits(m), *losses = vkg_ref_gpt2_losses(m);
    double mean = 0.0;
    for (int i = 0; i < B * T; i++) {
        mean += losses[i] / (B * T);
        for (int c = cfg.V; c < cfg.Vp; c++)
            assert_true(logits[(size_t)i * cfg.Vp + c] == 0.0f); /* zero padding rows of wte */
    }
    assert_true(fabs(mean - loss) < 1e-6);
    /* without targets: -1, same logits */
    float *keep = fnew((size_t)B * T * cfg.Vp);
    memcpy(keep, logits, (size_t)B * T * cfg.Vp * sizeof *keep);
    assert_true(vkg_ref_gpt2_forward(m, p, x, NULL) == -1.0);
    assert_memory_equal(keep, vkg_ref_gpt2_logits(m), (size_t)B * T * cfg.Vp * sizeof *keep);
    assert_true(vkg_ref_gpt2_activations(m)->logits == logits);
    vkg_ref_gpt2_destroy(&m);
    free(p), free(pd), free(keep);
}

static void test_adamw_lowers_loss(void **state)
{
    (void)state;
    enum { B = 2, T = 5 };
    size_t n = vkg_ref_gpt2_num_params(&tiny);
    float *p = fnew(n), *g = fnew(n), *mo = fnew(n), *v = fnew(n);
    vkg_ref_gpt2_init_params(&tiny, p, 21);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 22);
    int32_t x[B * T], y[B * T];
    vkg_test_fill_int(&r, x, B * T, tiny.V);
    vkg_test_fill_int(&r, y, B * T, tiny.V);
    vkg_ref_gpt2_t *m = NULL;
    assert_int_equal(vkg_ref_gpt2_create(&tiny, B, T, &m), 0);
    vkg_ref_gpt2_adamw_t hp = {.lr = 1e-2,
                               .beta1 = 0.9,
                               .beta2 = 0.95,
                               .eps = 1e-8,
                               .weight_decay = 0.1,
                               .grad_clip = 1.0};
    double first = 0.0, prev = INFINITY;
    for (int step = 1; step <= 10; step++) {
        double loss = vkg_ref_gpt2_forward(m, p, x, y);
        if (step == 1)
            first = loss;
        assert_true(loss < prev); /* a fixed batch: every step helps */
        prev = loss;
        vkg_ref_gpt2_zero_grad(&tiny, g);
        vkg_ref_gpt2_backward(m, p, g, 1.0);
        double norm = vkg_ref_gpt2_adamw(&tiny, p, g, mo, v, &hp, step);
        assert_true(norm > 0.0 && isfinite(norm));
    }
    double last = vkg_ref_gpt2_forward(m, p, x, y);
    printf("adamw: loss %.4f -> %.4f in 10 steps\n", first, last);
    assert_true(last < first - 0.5);
    vkg_ref_gpt2_destroy(&m);
    free(p), free(g), free(mo), free(v);
}

static void test_grad_accumulation(void **state)
{
    (void)state;
    enum { B = 4, T = 4 };
    size_t n = vkg_ref_gpt2_num_params(&tiny);
    double *p = dnew(n), *gfull = dnew(n), *gacc = dnew(n);
    random_params(&tiny, p, 31);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 32);
    int32_t x[B * T], y[B * T];
    vkg_test_fill_int(&r, x, B * T, tiny.V);
    vkg_test_fill_int(&r, y, B * T, tiny.V);
    vkg_ref_gpt2_f64_t *full = NULL, *half = NULL;
    assert_int_equal(vkg_ref_gpt2_create_f64(&tiny, B, T, &full), 0);
    assert_int_equal(vkg_ref_gpt2_create_f64(&tiny, B / 2, T, &half), 0);
    double lf = vkg_ref_gpt2_forward_f64(full, p, x, y);
    vkg_ref_gpt2_backward_f64(full, p, gfull, 1.0);
    double l1 = vkg_ref_gpt2_forward_f64(half, p, x, y);
    vkg_ref_gpt2_backward_f64(half, p, gacc, 0.5);
    double l2 = vkg_ref_gpt2_forward_f64(half, p, x + B / 2 * T, y + B / 2 * T);
    vkg_ref_gpt2_backward_f64(half, p, gacc, 0.5);
    assert_true(fabs(lf - 0.5 * (l1 + l2)) < 1e-14);
    double gmax = 0.0, dmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs(gfull[i]));
        dmax = fmax(dmax, fabs(gfull[i] - gacc[i]));
    }
    printf("accumulation: max|full - 2 halves| %.2e, max|grad| %.2e\n", dmax, gmax);
    assert_true(gmax > 0.0 && dmax <= 1e-12 * gmax);
    /* grad_scale is linear: one backward with 2 equals two with 1 */
    double *g2 = dnew(n);
    vkg_ref_gpt2_backward_f64(half, p, g2, 2.0);
    vkg_ref_gpt2_zero_grad_f64(&tiny, gacc);
    vkg_ref_gpt2_backward_f64(half, p, gacc, 1.0);
    vkg_ref_gpt2_backward_f64(half, p, gacc, 1.0);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(g2[i] - gacc[i]) <= 1e-13 * gmax);
    vkg_ref_gpt2_destroy_f64(&full);
    vkg_ref_gpt2_destroy_f64(&half);
    free(p), free(gfull), free(gacc), free(g2);
}

static void test_f32_matches_f64(void **state)
{
    (void)state;
    vkg_ref_gpt2_config_t cfg = {.maxT = 16, .V = 50, .Vp = 64, .L = 2, .NH = 4, .C = 32};
    enum { B = 2, T = 13 };
    size_t n = vkg_ref_gpt2_num_params(&cfg);
    double *pd = dnew(n), *gd = dnew(n);
    float *p = fnew(n), *g = fnew(n), *gdf = fnew(n);
    random_params(&cfg, pd, 41);
    for (size_t i = 0; i < n; i++)
        pd[i] = p[i] = (float)pd[i]; /* the same float-representable params */
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 42);
    int32_t x[B * T], y[B * T];
    vkg_test_fill_int(&r, x, B * T, cfg.V);
    vkg_test_fill_int(&r, y, B * T, cfg.V);
    vkg_ref_gpt2_t *m = NULL;
    vkg_ref_gpt2_f64_t *md = NULL;
    assert_int_equal(vkg_ref_gpt2_create(&cfg, B, T, &m), 0);
    assert_int_equal(vkg_ref_gpt2_create_f64(&cfg, B, T, &md), 0);
    double lf = vkg_ref_gpt2_forward(m, p, x, y), ld = vkg_ref_gpt2_forward_f64(md, pd, x, y);
    vkg_ref_gpt2_backward(m, p, g, 1.0);
    vkg_ref_gpt2_backward_f64(md, pd, gd, 1.0);
    for (size_t i = 0; i < n; i++)
        gdf[i] = (float)gd[i];
    vkg_test_cmp cmp;
    int ok = vkg_test_compare("gpt2 grads f32 vs f64", g, gdf, n, 1e-5, &cmp);
    printf("f32 vs f64: loss %.9f vs %.9f, grads rel_l2 %.2e\n", lf, ld, cmp.rel_l2);
    assert_true(ok);
    assert_true(fabs(lf - ld) < 1e-6 * ld);
    assert_true(fabs(vkg_ref_gpt2_grad_norm(&cfg, g) / vkg_ref_gpt2_grad_norm_f64(&cfg, gd) - 1) <
                1e-5);
    vkg_ref_gpt2_destroy(&m);
    vkg_ref_gpt2_destroy_f64(&md);
    free(pd), free(gd), free(p), free(g), free(gdf);
}

static void test_adamw_mask_and_clip(void **state)
{
    (void)state;
    size_t n = vkg_ref_gpt2_num_params(&tiny), sizes[16], off[16];
    vkg_ref_gpt2_param_sizes(&tiny, sizes);
    vkg_ref_gpt2_param_offsets(&tiny, off);
    double *p = dnew(n), *p0 = dnew(n), *g = dnew(n), *m = dnew(n), *v = dnew(n);
    random_params(&tiny, p, 51);
    memcpy(p0, p, n * sizeof *p);
    vkg_ref_gpt2_adamw_t hp = {.lr = 0.01,
                               .beta1 = 0.9,
                               .beta2 = 0.95,
                               .eps = 1e-8,
                               .weight_decay = 0.1,
                               .grad_clip = 1.0};
    /* zero gradients: decayed tensors shrink by exactly (1 - lr wd), the others do not move */
    assert_true(vkg_ref_gpt2_adamw_f64(&tiny, p, g, m, v, &hp, 1) == 0.0);
    for (int k = 0; k < 16; k++) {
        double f = vkg_ref_gpt2_param_decays(k) ? 1.0 - 0.01 * 0.1 : 1.0;
        for (size_t i = off[k]; i < off[k] + sizes[k]; i++)
            assert_true(fabs(p[i] - f * p0[i]) <= 1e-15 * fabs(p0[i]));
    }
    /* clipping: norm 5 > clip 1 scales every gradient by 1/5 */
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 52);
    vkg_test_fill_uniform_f64(&r, g, n, -1, 1);
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * g[i];
    for (size_t i = 0; i < n; i++)
        g[i] *= 5.0 / sqrt(s);
    assert_true(fabs(vkg_ref_gpt2_grad_norm_f64(&tiny, g) - 5.0) < 1e-13);
    double *q = dnew(n), *mq = dnew(n), *vq = dnew(n);
    memcpy(p, p0, n * sizeof *p), memset(m, 0, n * sizeof *m), memset(v, 0, n * sizeof *v);
    memcpy(q, p0, n * sizeof *q);
    for (int t = 1; t <= 2; t++) {
        double norm = vkg_ref_gpt2_adamw_f64(&tiny, p, g, m, v, &hp, t);
        assert_true(fabs(norm - 5.0) < 1e-13);
        for (int k = 0; k < 16; k++) /* by hand: per tensor with grad_scale clip / norm */
            vkg_ref_adamw_f64(q + off[k], g + off[k], mq + off[k], vq + off[k], sizes[k], 0.01, 0.9,
                              0.95, 1e-8, vkg_ref_gpt2_param_decays(k) ? 0.1 : 0.0, t, 1.0 / norm);
    }
    assert_memory_equal(p, q, n * sizeof *p);
    assert_memory_equal(m, mq, n * sizeof *m);
    for (size_t i = 0; i < n; i++) /* after 2 steps m = (0.1 * 0.9 + 0.1) g / 5 */
        assert_true(fabs(m[i] - 0.19 * g[i] / 5.0) < 1e-15);
    /* grad_clip 0 disables clipping */
    hp.grad_clip = 0.0;
    memcpy(p, p0, n * sizeof *p), memset(m, 0, n * sizeof *m), memset(v, 0, n * sizeof *v);
    vkg_ref_gpt2_adamw_f64(&tiny, p, g, m, v, &hp, 1);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(m[i] - 0.1 * g[i]) < 1e-15);
    free(p), free(p0), free(g), free(m), free(v), free(q), free(mq), free(vq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_table),         cmocka_unit_test(test_fd_full_model),
        cmocka_unit_test(test_init_loss),           cmocka_unit_test(test_adamw_lowers_loss),
        cmocka_unit_test(test_grad_accumulation),   cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_adamw_mask_and_clip), cmocka_unit_test(test_forward_wiring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
