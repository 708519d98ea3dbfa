/* Tests of RMSNorm (src/ops/rmsnorm.c), forward, fused residual forward and backward, against the
 * CPU reference (src/ref, written from the definition) on random inputs: one row, C below and
 * not a multiple of the workgroup size (13, 37), odd row counts and widths, a width above the
 * workgroup (1601) and Llama-like 128 x 768, with eps 1e-5 and 1e-6. Every output must be finite
 * and within a relative L2 error ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND (1e-5). Forward
 * outputs are poisoned with NaN first; backward outputs start from random values that the
 * reference starts from too, so accumulating is checked against overwriting. The backward must be
 * bitwise reproducible; blocks of rows and the wide dweight kernel (a lowered index limit) must
 * give the bits of one dispatch; more rows than a dispatch has workgroups are all normalized; the
 * bf16 forms must give exactly the fp32 kernels' bits on the widened values (rounded once for a
 * bf16 out). The reference's backward is checked against finite differences of its forward in
 * double, and a wrong reference must fail the comparison (the checker bites). Wrong sizes are
 * refused naming the tensor. */
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
    int N, C;
    float eps;
} shape;

static const shape SHAPES[] = {
    {1, 13, 1e-5f}, {7, 37, 1e-6f}, {33, 300, 1e-5f}, {3, 1601, 1e-6f}, {2 * 64, 768, 1e-5f}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* Rows with different offsets and spreads, as activations have. */
static float *row_inputs(vkg_test_rng *r, int N, int C)
{
    float *x = vkg_test_alloc((size_t)N * C);
    for (int n = 0; n < N; n++) {
        float offset = vkg_test_rng_uniform(r, -1.0f, 1.0f);
        float spread = vkg_test_rng_uniform(r, 0.1f, 3.0f);
        for (int c = 0; c < C; c++)
            x[(size_t)n * C + c] = offset + spread * vkg_test_rng_uniform(r, -1.0f, 1.0f);
    }
    return x;
}

/* The tunings the kernels are run under: v = 0 the device's own, v = 1 a GPU's (256 invocations
 * per row, dweight summed in 16 contiguous chunks of rows), whatever the device is. */
#define NVARIANTS 2
static void set_variant(vkg_gpu *g, const vkg_device_tuning *own, int v)
{
    vkg_device_tuning t = *own;
    if (v == 1) {
        t.layernorm_wg = 256;
        t.grad_reduce_chunks = 16;
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
    print_message("  tuning: %s\n", v ? "a GPU's (256 per row, 16 chunks)" : "the device's");
}

static void test_rmsnorm_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 31);
    vkg_device_tuning own = vkg_device_tuning_get(g->dev);
    for (size_t s = 0; s < NVARIANTS * NSHAPES; s++) {
        if (s % NSHAPES == 0)
            set_variant(g, &own, (int)(s / NSHAPES));
        int N = SHAPES[s % NSHAPES].N, C = SHAPES[s % NSHAPES].C;
        size_t NC = (size_t)N * C;
        print_message("  N=%d C=%d eps=%g\n", N, C, (double)SHAPES[s % NSHAPES].eps);
        float *x = row_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
        float *out = vkg_test_alloc(NC), *rstd = vkg_test_alloc(N);
        vkg_ref_rmsnorm_fwd(out, rstd, x, w, N, C, SHAPES[s % NSHAPES].eps);
        vkg_tensor tx = vkg_gpu_upload(g, x, NC * 4), tw = vkg_gpu_upload(g, w, C * 4u);
        vkg_tensor tout = vkg_gpu_poisoned(g, NC), trstd = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(
            vkg_op_rmsnorm_fwd(g->cmd, tout, trstd, tx, tw, N, C, SHAPES[s % NSHAPES].eps));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "rmsnorm_fwd out", tout, out, NC);
        vkg_gpu_expect_ref(g, "rmsnorm_fwd rstd", trstd, rstd, N);
        free(x), free(w), free(out), free(rstd);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &own));
}

/* The fused form: res = a + b exactly as fp32 adds (the reference's double sum rounded once is
 * the same value), out and rstd as the reference's RMSNorm of that res, and all three the bits
 * of residual_fwd followed by rmsnorm_fwd. */
static void test_residual_rmsnorm_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 32);
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = SHAPES[s % NSHAPES].N, C = SHAPES[s % NSHAPES].C;
        size_t NC = (size_t)N * C;
        print_message("  N=%d C=%d\n", N, C);
        float *a = row_inputs(&r, N, C), *b = vkg_test_random(&r, NC, -1.0f, 1.0f);
        float *w = vkg_test_random(&r, C, 0.5f, 1.5f), *res = vkg_test_alloc(NC);
        float *out = vkg_test_alloc(NC), *rstd = vkg_test_alloc(N);
        vkg_ref_residual_fwd(res, a, b, NC);
        vkg_ref_rmsnorm_fwd(out, rstd, res, w, N, C, SHAPES[s % NSHAPES].eps);
        vkg_tensor ta = vkg_gpu_upload(g, a, NC * 4), tb = vkg_gpu_upload(g, b, NC * 4);
        vkg_tensor tw = vkg_gpu_upload(g, w, C * 4u), tres = vkg_gpu_poisoned(g, NC);
        vkg_tensor tout = vkg_gpu_poisoned(g, NC), trstd = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_residual_rmsnorm_fwd(g->cmd, tres, tout, trstd, ta, tb, tw, N, C,
                                                  SHAPES[s % NSHAPES].eps));
        vkg_gpu_run(g);
        vkg_test_cmp cr = vkg_gpu_expect_ref(g, "residual_rmsnorm_fwd res", tres, res, NC);
        assert_true(cr.max_abs == 0.0);
        vkg_gpu_expect_ref(g, "residual_rmsnorm_fwd out", tout, out, NC);
        vkg_gpu_expect_ref(g, "residual_rmsnorm_fwd rstd", trstd, rstd, N);
        /* the bits of the two ops it fuses */
        vkg_tensor pres = vkg_gpu_poisoned(g, NC), pout = vkg_gpu_poisoned(g, NC);
        vkg_tensor prstd = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, pres, ta, tb, NC));
        vkg_gpu_run(g);
        VKG_ASSERT_OK(
            vkg_op_rmsnorm_fwd(g->cmd, pout, prstd, pres, tw, N, C, SHAPES[s % NSHAPES].eps));
        vkg_gpu_run(g);
        llama_expect_words(g, "residual_rmsnorm_fwd res vs the pair", tres, pres, NC);
        llama_expect_words(g, "residual_rmsnorm_fwd out vs the pair", tout, pout, NC);
        llama_expect_words(g, "residual_rmsnorm_fwd rstd vs the pair", trstd, prstd, N);
        free(a), free(b), free(w), free(res), free(out), free(rstd);
    }
}

static void test_rmsnorm_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 33);
    vkg_device_tuning own = vkg_device_tuning_get(g->dev);
    for (size_t s = 0; s < NVARIANTS * NSHAPES; s++) {
        if (s % NSHAPES == 0)
            set_variant(g, &own, (int)(s / NSHAPES));
        int N = SHAPES[s % NSHAPES].N, C = SHAPES[s % NSHAPES].C;
        size_t NC = (size_t)N * C;
        print_message("  N=%d C=%d\n", N, C);
        float *x = row_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
        float *out = vkg_test_alloc(NC), *rstd = vkg_test_alloc(N);
        vkg_ref_rmsnorm_fwd(out, rstd, x, w, N, C, SHAPES[s % NSHAPES].eps);
        float *dout = vkg_test_random(&r, NC, -1.0f, 1.0f);
        /* starting gradients about as large as what the pass adds */
        float *dinp = vkg_test_random(&r, NC, -1.0f, 1.0f), *dw = vkg_test_random(&r, C, -5, 5);
        vkg_tensor tx = vkg_gpu_upload(g, x, NC * 4), tw = vkg_gpu_upload(g, w, C * 4u);
        vkg_tensor trstd = vkg_gpu_upload(g, rstd, N * 4u), tdout = vkg_gpu_upload(g, dout, NC * 4);
        vkg_tensor tdinp[2], tdw[2];
        for (int k = 0; k < 2; k++) {
            tdinp[k] = vkg_gpu_upload(g, dinp, NC * 4);
            tdw[k] = vkg_gpu_upload(g, dw, C * 4u);
        }
        vkg_ref_rmsnorm_bwd(dinp, dw, dout, x, w, rstd, N, C);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        for (int k = 0; k < 2; k++)
            VKG_ASSERT_OK(vkg_op_rmsnorm_bwd(g->cmd, tdinp[k], tdw[k], tdout, tx, tw, trstd, N, C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "rmsnorm_bwd dinp", tdinp[0], dinp, NC);
        vkg_gpu_expect_ref(g, "rmsnorm_bwd dweight", tdw[0], dw, C);
        /* the second run from the same inputs is bitwise identical */
        llama_expect_words(g, "rmsnorm_bwd dinp, run twice", tdinp[0], tdinp[1], NC);
        llama_expect_words(g, "rmsnorm_bwd dweight, run twice", tdw[0], tdw[1], (size_t)C);
        free(x), free(w), free(out), free(rstd), free(dout), free(dinp), free(dw);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &own));
}

/* Above the index limit (lowered to 2000 elements): the forward and dinp in blocks of whole
 * rows, dweight through 64-bit row addresses; every bit as in one dispatch. */
static void test_blocks_of_rows(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 29, C = 256 };
    size_t NC = (size_t)N * C;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 34);
    float *a = row_inputs(&r, N, C), *b = vkg_test_random(&r, NC, -1, 1);
    float *w = vkg_test_random(&r, C, 0.5f, 1.5f), *dout = vkg_test_random(&r, NC, -1, 1);
    vkg_tensor ta = vkg_gpu_upload(g, a, NC * 4), tb = vkg_gpu_upload(g, b, NC * 4);
    vkg_tensor tw = vkg_gpu_upload(g, w, C * 4), td = vkg_gpu_upload(g, dout, NC * 4);
    vkg_tensor res[2], out[2], rstd[2], dinp[2], dw[2];
    for (int k = 0; k < 2; k++) {
        res[k] = vkg_gpu_poisoned(g, NC), out[k] = vkg_gpu_poisoned(g, NC);
        rstd[k] = vkg_gpu_poisoned(g, N);
        dinp[k] = vkg_gpu_upload(g, dout, NC * 4), dw[k] = vkg_gpu_upload(g, w, C * 4);
    }
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    for (int k = 0; k < 2; k++) {
        vkg__op_set_max_elems(k ? 2000 : 0);
        VKG_ASSERT_OK(
            vkg_op_residual_rmsnorm_fwd(g->cmd, res[k], out[k], rstd[k], ta, tb, tw, N, C, 1e-5f));
    }
    vkg__op_set_max_elems(0);
    vkg_gpu_run(g);
    for (int k = 0; k < 2; k++) {
        vkg__op_set_max_elems(k ? 2000 : 0);
        VKG_ASSERT_OK(vkg_op_rmsnorm_bwd(g->cmd, dinp[k], dw[k], td, res[0], tw, rstd[0], N, C));
    }
    vkg__op_set_max_elems(0);
    vkg_gpu_run(g);
    llama_expect_words(g, "blocks: res", res[0], res[1], NC);
    llama_expect_words(g, "blocks: out", out[0], out[1], NC);
    llama_expect_words(g, "blocks: rstd", rstd[0], rstd[1], N);
    llama_expect_words(g, "blocks: dinp", dinp[0], dinp[1], NC);
    llama_expect_words(g, "blocks: dweight", dw[0], dw[1], C);
    free(a), free(b), free(w), free(dout);
}

/* More rows than one dispatch has workgroups (65535): the row loops must cover the rest. */
static void test_rows_beyond_the_grid(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 65535 + 40, C = 3 };
    size_t NC = (size_t)N * C;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 38);
    float *x = row_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
    float *dout = vkg_test_random(&r, NC, -1, 1), *dinp = vkg_test_random(&r, NC, -1, 1);
    float *out = vkg_test_alloc(NC), *rstd = vkg_test_alloc(N), dw[C] = {0};
    vkg_tensor tx = vkg_gpu_upload(g, x, NC * 4), tw = vkg_gpu_upload(g, w, C * 4);
    vkg_tensor td = vkg_gpu_upload(g, dout, NC * 4), tdinp = vkg_gpu_upload(g, dinp, NC * 4);
    vkg_tensor tout = vkg_gpu_poisoned(g, NC), trstd = vkg_gpu_poisoned(g, N);
    vkg_tensor tdw = vkg_gpu_upload(g, dw, sizeof dw);
    vkg_ref_rmsnorm_fwd(out, rstd, x, w, N, C, 1e-5f);
    /* the backward pass gets the reference's rstd, as the reference does */
    vkg_tensor rrstd = vkg_gpu_upload(g, rstd, N * 4);
    vkg_ref_rmsnorm_bwd(dinp, dw, dout, x, w, rstd, N, C);
    VKG_ASSERT_OK(vkg_op_rmsnorm_fwd(g->cmd, tout, trstd, tx, tw, N, C, 1e-5f));
    VKG_ASSERT_OK(vkg_op_rmsnorm_bwd(g->cmd, tdinp, tdw, td, tx, tw, rrstd, N, C));
    vkg_gpu_run(g);
    vkg_gpu_expect_ref(g, "rmsnorm_fwd out", tout, out, NC);
    vkg_gpu_expect_ref(g, "rmsnorm_fwd rstd", trstd, rstd, N);
    vkg_gpu_expect_ref(g, "rmsnorm_bwd dinp", tdinp, dinp, NC);
    vkg_gpu_expect_ref(g, "rmsnorm_bwd dweight", tdw, dw, C);
    free(x), free(w), free(dout), free(dinp), free(out), free(rstd);
}

/* Mixed precision on N rows x C channels: rmsnorm_fwd reading a bf16 stream (out fp32 and bf16),
 * the fused form writing it (b bf16), rmsnorm_bwd reading it; each against the fp32 kernels on
 * the widened values, bitwise, and a bf16 out as the fp32 out rounded once. */
static void check_bf16(vkg_gpu *g, vkg_test_rng *r, int N, int C)
{
    size_t nc = (size_t)N * C;
    float *a = vkg_test_random(r, nc, -3, 3), *b = vkg_test_random(r, nc, -3, 3);
    float *w = vkg_test_random(r, C, 0.5f, 1.5f), *dout = vkg_test_random(r, nc, -1, 1);
    float *d0 = vkg_test_random(r, nc + (size_t)C, -1, 1);
    char what[96];
    snprintf(what, sizeof what, "bf16 N=%d C=%d", N, C);
    print_message("  %s\n", what);
    vkg_tensor a16 = vkg_gpu_bf16_of(g, a, nc), b16 = vkg_gpu_bf16_of(g, b, nc);
    vkg_tensor tw = vkg_gpu_upload(g, w, C * 4), td = vkg_gpu_upload(g, dout, nc * 4);
    vkg_gpu_run(g);
    vkg_tensor a32 = vkg_gpu_bf16_widened(g, a16, nc);
    vkg_tensor o32[2], o16[2], rs[2];
    for (int k = 0; k < 2; k++) {
        o32[k] = vkg_gpu_poisoned(g, nc), o16[k] = vkg_gpu_bf16_poisoned(g, nc);
        rs[k] = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_op_rmsnorm_fwd(g->cmd, o32[k], rs[k], k ? a32 : a16, tw, N, C, 1e-6f));
        VKG_ASSERT_OK(vkg_op_rmsnorm_fwd(g->cmd, o16[k], rs[k], k ? a32 : a16, tw, N, C, 1e-6f));
    }
    vkg_gpu_run(g);
    llama_expect_words(g, what, o32[0], o32[1], nc);
    llama_expect_words(g, what, rs[0], rs[1], N);
    llama_expect_words(g, what, o16[0], o16[1], nc / 2);
    float *o = vkg_test_alloc(nc);
    vkg_gpu_download(g, o32[1], o, nc * 4);
    llama_expect_rounded(g, what, o16[1], o, nc);
    vkg_gpu_expect_guard(g, what, o16[0]);

    /* the fused form writing the stream: res = a + b rounded once (residual_fwd's bits), then
     * normalized as rounded (rmsnorm_fwd's bits on res) */
    vkg_tensor res16[2], f16[2], f32[2], frs[2];
    for (int k = 0; k < 2; k++) {
        res16[k] = vkg_gpu_bf16_poisoned(g, nc), f16[k] = vkg_gpu_bf16_poisoned(g, nc);
        f32[k] = vkg_gpu_poisoned(g, nc), frs[k] = vkg_gpu_poisoned(g, N);
    }
    VKG_ASSERT_OK(
        vkg_op_residual_rmsnorm_fwd(g->cmd, res16[0], f16[0], frs[0], a16, b16, tw, N, C, 1e-6f));
    VKG_ASSERT_OK(
        vkg_op_residual_rmsnorm_fwd(g->cmd, res16[0], f32[0], frs[0], a16, b16, tw, N, C, 1e-6f));
    VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, res16[1], a16, b16, nc));
    vkg_gpu_run(g);
    VKG_ASSERT_OK(vkg_op_rmsnorm_fwd(g->cmd, f16[1], frs[1], res16[1], tw, N, C, 1e-6f));
    VKG_ASSERT_OK(vkg_op_rmsnorm_fwd(g->cmd, f32[1], frs[1], res16[1], tw, N, C, 1e-6f));
    vkg_gpu_run(g);
    llama_expect_words(g, what, res16[0], res16[1], nc / 2);
    llama_expect_words(g, what, f16[0], f16[1], nc / 2);
    llama_expect_words(g, what, f32[0], f32[1], nc);
    llama_expect_words(g, what, frs[0], frs[1], N);
    vkg_gpu_expect_guard(g, what, res16[0]);

    /* rmsnorm_bwd reading the stream */
    vkg_tensor di[2], dw[2];
    for (int k = 0; k < 2; k++) {
        di[k] = vkg_gpu_upload(g, d0, nc * 4), dw[k] = vkg_gpu_upload(g, d0 + nc, C * 4);
        VKG_ASSERT_OK(vkg_op_rmsnorm_bwd(g->cmd, di[k], dw[k], td, k ? a32 : a16, tw, rs[0], N, C));
    }
    vkg_gpu_run(g);
    llama_expect_words(g, what, di[0], di[1], nc);
    llama_expect_words(g, what, dw[0], dw[1], C);
    free(a), free(b), free(w), free(dout), free(d0), free(o);
}

static void test_bf16(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 35);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    check_bf16(g, &r, 1, 2);
    check_bf16(g, &r, 5, 38);
    check_bf16(g, &r, 33, 768);
    vkg_gpu_run(g);
}

/* Finite differences of the double reference: L = sum(out * g), gradients of inp and weight. */
typedef struct fd_ctx {
    double *x, *w, *out, *rstd, *g;
    int N, C;
} fd_ctx;

static double fd_objective(void *p)
{
    fd_ctx *c = p;
    vkg_ref_rmsnorm_fwd_f64(c->out, c->rstd, c->x, c->w, c->N, c->C, 1e-5);
    return vkg_ref_dot_compensated(c->out, c->g, (size_t)c->N * c->C);
}

static void test_reference_fd(void **state)
{
    (void)state;
    enum { N = 5, C = 23 };
    double x[N * C], w[C], out[N * C], rstd[N], g[N * C], dx[N * C], dw[C];
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 36);
    vkg_test_fill_uniform_f64(&r, x, N * C, -2, 2);
    vkg_test_fill_uniform_f64(&r, w, C, 0.5, 1.5);
    vkg_test_fill_uniform_f64(&r, g, N * C, -1, 1);
    fd_ctx c = {x, w, out, rstd, g, N, C};
    fd_objective(&c);
    for (size_t i = 0; i < N * C; i++)
        dx[i] = 0.25; /* pre-filled: the backward accumulates */
    for (size_t i = 0; i < C; i++)
        dw[i] = 0.25;
    vkg_ref_rmsnorm_bwd_f64(dx, dw, g, x, w, rstd, N, C);
    for (size_t i = 0; i < N * C; i++)
        dx[i] -= 0.25;
    for (size_t i = 0; i < C; i++)
        dw[i] -= 0.25;
    llama_fd("rmsnorm dinp", x, dx, N * C, N * C, fd_objective, &c, 1e-6);
    llama_fd("rmsnorm dweight", w, dw, C, C, fd_objective, &c, 1e-6);
}

/* The comparison bites: a reference with one weight changed by 1 % fails it. */
static void test_checker_bites(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 9, C = 50 };
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 37);
    float *x = row_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
    float *out = vkg_test_alloc(N * C), *rstd = vkg_test_alloc(N), *got = vkg_test_alloc(N * C);
    vkg_tensor tx = vkg_gpu_upload(g, x, sizeof(float) * N * C), tw = vkg_gpu_upload(g, w, C * 4);
    vkg_tensor tout = vkg_gpu_poisoned(g, N * C), trstd = vkg_gpu_poisoned(g, N);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_rmsnorm_fwd(g->cmd, tout, trstd, tx, tw, N, C, 1e-5f));
    vkg_gpu_run(g);
    vkg_gpu_download(g, tout, got, sizeof(float) * N * C);
    w[7] *= 1.01f;
    vkg_ref_rmsnorm_fwd(out, rstd, x, w, N, C, 1e-5f);
    vkg_test_cmp cmp;
    assert_false(vkg_test_compare("broken reference", got, out, N * C, VKG_TEST_REL_BOUND, &cmp));
    free(x), free(w), free(out), free(rstd), free(got);
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 6, C = 10 };
    vkg_tensor big = vkg_gpu_poisoned(g, N * C), row = vkg_gpu_poisoned(g, C);
    vkg_tensor col = vkg_gpu_poisoned(g, N), tiny = vkg_gpu_poisoned(g, N - 1);
    vkg_tensor short_row = vkg_gpu_poisoned(g, C - 1), short_big = vkg_gpu_poisoned(g, N * C - 1);
    vkg_tensor odd16 = vkg_gpu_bf16_poisoned(g, 3 * 5);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, short_big, col, big, row, N, C, 1e-5f),
                       "rmsnorm_fwd: tensor out holds 59 elements, the shape needs 60");
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, big, tiny, big, row, N, C, 1e-5f),
                       "rmsnorm_fwd: tensor rstd");
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, big, col, short_big, row, N, C, 1e-5f),
                       "rmsnorm_fwd: tensor inp");
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, big, col, big, short_row, N, C, 1e-5f),
                       "rmsnorm_fwd: tensor weight");
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, big, col, big, row, 0, C, 1e-5f),
                       "rmsnorm_fwd: N and C must be positive");
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, big, col, big, row, N, C, 0.0f),
                       "rmsnorm_fwd: eps must be positive");
    vkg_expect_invalid(vkg_op_rmsnorm_fwd(c, odd16, col, odd16, row, 3, 5, 1e-5f),
                       "rmsnorm_fwd: a bf16 out needs even C, got 5");
    vkg_expect_invalid(
        vkg_op_residual_rmsnorm_fwd(c, big, big, col, big, short_big, row, N, C, 1e-5f),
        "residual_rmsnorm_fwd: tensor b");
    vkg_expect_invalid(
        vkg_op_residual_rmsnorm_fwd(c, short_big, big, col, big, big, row, N, C, 1e-5f),
        "residual_rmsnorm_fwd: tensor res");
    vkg__op_set_max_elems(C - 1);
    vkg_status st = vkg_op_rmsnorm_fwd(c, big, col, big, row, N, C, 1e-5f);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "rmsnorm_fwd: one row of C=10 elements is more than the 9");
    vkg_expect_invalid(vkg_op_rmsnorm_bwd(c, short_big, row, big, big, row, col, N, C),
                       "rmsnorm_bwd: tensor dinp");
    vkg_expect_invalid(vkg_op_rmsnorm_bwd(c, big, short_row, big, big, row, col, N, C),
                       "rmsnorm_bwd: tensor dweight");
    vkg_expect_invalid(vkg_op_rmsnorm_bwd(c, big, row, short_big, big, row, col, N, C),
                       "rmsnorm_bwd: tensor dout");
    vkg_expect_invalid(vkg_op_rmsnorm_bwd(c, big, row, big, short_big, row, col, N, C),
                       "rmsnorm_bwd: tensor inp");
    vkg_expect_invalid(vkg_op_rmsnorm_bwd(c, big, row, big, big, short_row, col, N, C),
                       "rmsnorm_bwd: tensor weight");
    vkg_expect_invalid(vkg_op_rmsnorm_bwd(c, big, row, big, big, row, tiny, N, C),
                       "rmsnorm_bwd: tensor rstd");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rmsnorm_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_residual_rmsnorm_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_rmsnorm_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_blocks_of_rows, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_rows_beyond_the_grid, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bf16, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_reference_fd),
        cmocka_unit_test_setup_teardown(test_checker_bites, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
