/* Tests of the fused kernels (issue 12), against the CPU reference (src/ref) and against the
 * unfused ops on the same device, under every variant the device tuning can select (forced on
 * whatever device runs the tests, lavapipe in CI):
 *   - the fc product with its GELU (vkg_op_matmul_fwd_gelu: the register kernel of CPU devices,
 *     the tiled kernel of GPUs with vec4 loads, without, and with its large tile forced): the
 *     pre-activation and the activation are bitwise those of vkg_op_matmul_fwd followed by
 *     vkg_op_gelu_fwd, within VKG_TEST_REL_BOUND of the reference, and no gelu_fwd is recorded;
 *   - the residual add with the layernorm after it (vkg_op_residual_layernorm_fwd, CPU and GPU
 *     workgroups): res, out, mean and rstd bitwise those of vkg_op_residual_fwd followed by
 *     vkg_op_layernorm_fwd, within the bound of the reference, and no residual_fwd recorded;
 *   - the chunked (GPU) bias and layernorm-parameter gradients (grad_reduce_chunks 1, 3, 16):
 *     bitwise the same from run to run, and within VKG_TEST_REL_BOUND (relative L2) of the
 *     reference. Why a tolerance and not bits: the chunked form adds the same float32 terms in
 *     another order (chunk by chunk, then the chunk sums), and float addition is not associative;
 *     the rounding error of either order is about (rows / chunks + chunks) * 2^-24 relative to
 *     the sum of magnitudes, under 1e-4 relative even at 1000 rows of terms of both signs, and
 *     the reference's own float32 sums (in a third order) err alike.
 * Each of the first two also with bf16 outputs (mixed precision: the GELU output and the
 * layernorm's out stored bf16, the product reading the weight's bf16 copy): bitwise the unfused
 * ops' bf16 values (the fused GELU stores each element into its half of a word, gelu_fwd whole
 * words), and with vkg_op_matmul_fwd_gelu's ACT_BF16 constant set.
 * Shapes: GPT-2's (C = 768, OC = 4C), one row, rows and channels that are not multiples of any
 * workgroup or tile (7 x 37, 33 x 300), C not a multiple of 4. Outputs are poisoned first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

/* A device tuning the tests force: the device's own (cpu = 1: a CPU device's defaults) or a
 * discrete GPU's, with or without vec4 loads, optionally every product on the large tile. */
typedef struct variant {
    const char *name;
    int gpu, vec4, large;
} variant;

static const variant VARIANTS[] = {
    {"cpu", 0, 0, 0},
    {"gpu", 1, 1, 0},
    {"gpu scalar loads", 1, 0, 0},
    {"gpu large tile", 1, 1, 1},
};
#define NVARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])

static void force(vkg_gpu *g, const variant *v)
{
    vkg_device_tuning t = vkg__device_tuning_defaults(v->gpu ? VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
                                                             : VK_PHYSICAL_DEVICE_TYPE_CPU,
                                                      vkg_device_get_info(g->dev)->subgroup_size);
    t.mmt_vec4 = (uint32_t)v->vec4;
    vkg__mmt_fit(g->dev, &t);
    if (v->large) {
        vkg_matmul_tiling large = t.mmt[VKG_MMT_LARGE];
        vkg__mmt_force(&t, &large);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
}

/* got and want hold the same bits. */
static void expect_same_bits(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            fail_msg("%s: element %zu is %.9g, the unfused ops give %.9g", what, i, (double)got[i],
                     (double)want[i]);
}

static void expect_tensors_same(vkg_gpu *g, const char *what, vkg_tensor a, vkg_tensor b, size_t n)
{
    float *x = vkg_test_alloc(n), *y = vkg_test_alloc(n);
    vkg_gpu_download(g, a, x, n * 4);
    vkg_gpu_download(g, b, y, n * 4);
    expect_same_bits(what, x, y, n);
    free(x);
    free(y);
}

/* A poisoned tensor of n values: fp32, or bf16 (two to a 32-bit word, as the kernels store). */
static vkg_tensor poisoned_as(vkg_gpu *g, size_t n, int bf16)
{
    vkg_tensor t = vkg_gpu_poisoned(g, bf16 ? (n + 1) / 2 : n);
    t.dtype = bf16 ? VKG_BF16 : VKG_F32;
    return t;
}

/* The n values of a and b (fp32, or bf16 compared as their 16-bit values) hold the same bits. */
static void expect_values_same(vkg_gpu *g, const char *what, vkg_tensor a, vkg_tensor b, size_t n)
{
    if (a.dtype == VKG_F32) {
        expect_tensors_same(g, what, a, b, n);
        return;
    }
    size_t words = (n + 1) / 2;
    uint16_t *x = malloc(words * 4), *y = malloc(words * 4);
    assert_true(x && y);
    vkg_gpu_download(g, a, x, words * 4);
    vkg_gpu_download(g, b, y, words * 4);
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            fail_msg("%s (bf16): element %zu is 0x%04x, the unfused ops give 0x%04x", what, i, x[i],
                     y[i]);
    free(x);
    free(y);
}

typedef struct mm_shape {
    int N, C, OC;
} mm_shape;

static const mm_shape MM_SHAPES[] = {{1, 13, 7}, {7, 37, 50}, {33, 64, 96}, {32, 768, 3072}};

static void matmul_gelu_case(vkg_gpu *g, vkg_test_rng *r, const variant *v, mm_shape s, int bf16)
{
    size_t nin = (size_t)s.N * s.C, nout = (size_t)s.N * s.OC, nw = (size_t)s.OC * s.C;
    print_message("  %s%s: N=%d C=%d OC=%d\n", v->name, bf16 ? " bf16" : "", s.N, s.C, s.OC);
    float *x = vkg_test_random(r, nin, -2.0f, 2.0f);
    float *w = vkg_test_random(r, (size_t)s.OC * s.C, -0.2f, 0.2f);
    float *b = vkg_test_random(r, (size_t)s.OC, -1.0f, 1.0f);
    float *pre = vkg_test_alloc(nout), *act = vkg_test_alloc(nout);
    vkg_ref_matmul_fwd(pre, x, w, b, s.N, s.C, s.OC);
    vkg_ref_gelu_fwd(act, pre, nout);
    vkg_tensor tx = vkg_gpu_upload(g, x, nin * 4),
               tw = vkg_gpu_upload(g, w, (size_t)s.OC * s.C * 4);
    vkg_tensor tb = vkg_gpu_upload(g, b, (size_t)s.OC * 4), scratch = vkg_gpu_poisoned(g, nin);
    vkg_tensor pre1 = vkg_gpu_poisoned(g, nout), act1 = poisoned_as(g, nout, bf16);
    vkg_tensor pre2 = vkg_gpu_poisoned(g, nout), act2 = poisoned_as(g, nout, bf16);
    if (bf16) { /* the weight's bf16 copy, as the model's products read it */
        vkg_tensor w16 = poisoned_as(g, nw, 1);
        VKG_ASSERT_OK(vkg_op_cast_bf16(g->cmd, w16, tw, nw));
        vkg_gpu_run(g);
        tw = w16;
    }
    vkg_status st =
        vkg_op_matmul_fwd_gelu(g->cmd, pre1, act1, tx, tw, &tb, s.N, s.C, s.OC, scratch);
    if (bf16 && st == VKG_ERR_UNSUPPORTED && getenv("VKG_MAX_DISPATCH_ELEMS")) {
        /* (a lowered limit: bf16 products beyond it are refused, as in vkg_op_matmul_fwd) */
        print_message("    refused beyond the lowered index limit\n");
        vkg_gpu_run(g);
        free(x), free(w), free(b), free(pre), free(act);
        return;
    }
    VKG_ASSERT_OK(st);
    assert_int_equal(vkg_cmd_kernel_count(g->cmd, VKG_KERNEL_gelu_fwd), 0);
    vkg_cmd_logged l; /* the product ran with its GELU epilogue, on the variant's kernel */
    assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, 0, &l), 0);
    if (l.kernel == VKG_KERNEL_matmul_tiled)
        assert_true(l.spec[12] == 1 && l.nspec == (bf16 ? 16 : 13) && (!bf16 || l.spec[15] == 1));
    else
        assert_true(l.kernel == VKG_KERNEL_matmul && l.nspec == (bf16 ? 14 : 11) &&
                    l.spec[10] == 1 && (!bf16 || l.spec[13] == 1));
    if (!getenv("VKG_MAX_DISPATCH_ELEMS")) /* (a lowered limit sends large products elsewhere) */
        assert_int_equal(l.kernel, v->gpu ? VKG_KERNEL_matmul_tiled : VKG_KERNEL_matmul);
    VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, pre2, tx, tw, &tb, s.N, s.C, s.OC, scratch));
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, act2, pre2, nout));
    vkg_gpu_run(g);
    if (!bf16) { /* (bf16 weights: test_matmul_bf16 and test_acts_bf16 bound them) */
        vkg_gpu_expect_ref(g, "matmul_fwd_gelu pre-activation", pre1, pre, nout);
        vkg_gpu_expect_ref(g, "matmul_fwd_gelu activation", act1, act, nout);
    }
    expect_tensors_same(g, "matmul_fwd_gelu pre-activation", pre1, pre2, nout);
    expect_values_same(g, "matmul_fwd_gelu activation", act1, act2, nout);
    vkg_gpu_expect_guard(g, "matmul_fwd_gelu activation", act1);
    free(x), free(w), free(b), free(pre), free(act);
}

static void test_matmul_fwd_gelu(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 12);
    for (size_t v = 0; v < NVARIANTS; v++) {
        force(g, &VARIANTS[v]);
        for (size_t s = 0; s < sizeof MM_SHAPES / sizeof MM_SHAPES[0]; s++)
            for (int bf16 = 0; bf16 < 2; bf16++)
                matmul_gelu_case(g, &r, &VARIANTS[v], MM_SHAPES[s], bf16);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

typedef struct ln_shape {
    int N, C;
} ln_shape;

static const ln_shape LN_SHAPES[] = {{1, 13}, {7, 37}, {33, 300}, {64, 768}, {3, 1601}};
#define NLN (sizeof LN_SHAPES / sizeof LN_SHAPES[0])

static void residual_layernorm_case(vkg_gpu *g, vkg_test_rng *r, const variant *v, ln_shape s,
                                    int bf16)
{
    size_t NC = (size_t)s.N * s.C;
    print_message("  %s%s: N=%d C=%d\n", v->name, bf16 ? " bf16" : "", s.N, s.C);
    float *a = vkg_test_random(r, NC, -2.0f, 2.0f), *b = vkg_test_random(r, NC, -1.0f, 1.0f);
    float *w = vkg_test_random(r, (size_t)s.C, 0.5f, 1.5f);
    float *bias = vkg_test_random(r, (size_t)s.C, -0.5f, 0.5f);
    float *res = vkg_test_alloc(NC), *out = vkg_test_alloc(NC);
    float *mean = vkg_test_alloc((size_t)s.N), *rstd = vkg_test_alloc((size_t)s.N);
    vkg_ref_residual_fwd(res, a, b, NC);
    vkg_ref_layernorm_fwd(out, mean, rstd, res, w, bias, s.N, s.C);
    vkg_tensor ta = vkg_gpu_upload(g, a, NC * 4), tb = vkg_gpu_upload(g, b, NC * 4);
    vkg_tensor tw = vkg_gpu_upload(g, w, (size_t)s.C * 4);
    vkg_tensor tbias = vkg_gpu_upload(g, bias, (size_t)s.C * 4);
    vkg_tensor t[2][4]; /* fused, unfused: res, out, mean, rstd */
    for (int i = 0; i < 2; i++) {
        t[i][0] = vkg_gpu_poisoned(g, NC), t[i][1] = poisoned_as(g, NC, bf16);
        t[i][2] = vkg_gpu_poisoned(g, (size_t)s.N), t[i][3] = vkg_gpu_poisoned(g, (size_t)s.N);
    }
    VKG_ASSERT_OK(vkg_op_residual_layernorm_fwd(g->cmd, t[0][0], t[0][1], t[0][2], t[0][3], ta, tb,
                                                tw, tbias, s.N, s.C));
    assert_int_equal(vkg_cmd_kernel_count(g->cmd, VKG_KERNEL_residual_fwd), 0);
    VKG_ASSERT_OK(vkg_op_residual_fwd(g->cmd, t[1][0], ta, tb, NC));
    VKG_ASSERT_OK(
        vkg_op_layernorm_fwd(g->cmd, t[1][1], t[1][2], t[1][3], t[1][0], tw, tbias, s.N, s.C));
    vkg_gpu_run(g);
    vkg_gpu_expect_ref(g, "residual_layernorm_fwd res", t[0][0], res, NC);
    if (!bf16) /* (bf16: test_acts_bf16 bounds layernorm_fwd's) */
        vkg_gpu_expect_ref(g, "residual_layernorm_fwd out", t[0][1], out, NC);
    vkg_gpu_expect_ref(g, "residual_layernorm_fwd mean", t[0][2], mean, (size_t)s.N);
    vkg_gpu_expect_ref(g, "residual_layernorm_fwd rstd", t[0][3], rstd, (size_t)s.N);
    static const char *const names[4] = {"res", "out", "mean", "rstd"};
    for (int k = 0; k < 4; k++)
        expect_values_same(g, names[k], t[0][k], t[1][k], k < 2 ? NC : (size_t)s.N);
    vkg_gpu_expect_guard(g, "residual_layernorm_fwd out", t[0][1]);
    free(a), free(b), free(w), free(bias), free(res), free(out), free(mean), free(rstd);
}

static void test_residual_layernorm_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 13);
    for (size_t v = 0; v < 2; v++) { /* cpu and gpu: the layernorm's workgroup differs */
        force(g, &VARIANTS[v]);
        for (size_t s = 0; s < NLN; s++)
            for (int bf16 = 0; bf16 < 1 + (LN_SHAPES[s].C % 2 == 0); bf16++) /* bf16: even C */
                residual_layernorm_case(g, &r, &VARIANTS[v], LN_SHAPES[s], bf16);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

/* The bias gradient (through vkg_op_matmul_bwd) and the layernorm-parameter gradients of one
 * shape with the chunked reductions: twice from the same start (bitwise equal), and against the
 * reference. */
static void grad_reduce_case(vkg_gpu *g, vkg_test_rng *r, ln_shape s)
{
    int N = s.N, C = s.C, OC = s.C; /* dbias of a square product: OC columns over N rows */
    size_t NC = (size_t)N * C;
    float *dout = vkg_test_random(r, NC, -1.0f, 1.0f), *x = vkg_test_random(r, NC, -2.0f, 2.0f);
    float *w = vkg_test_random(r, (size_t)OC * C, -0.5f, 0.5f);
    float *lw = vkg_test_random(r, (size_t)C, 0.5f, 1.5f),
          *lb = vkg_test_random(r, (size_t)C, 0, 1);
    float *start = vkg_test_random(r, (size_t)C, -0.1f, 0.1f);
    float *dbias = vkg_test_alloc((size_t)C), *dlw = vkg_test_alloc((size_t)C);
    float *dlb = vkg_test_alloc((size_t)C), *dinp = vkg_test_alloc(NC);
    float *dw = vkg_test_alloc((size_t)OC * C), *lnout = vkg_test_alloc(NC);
    float *mean = vkg_test_alloc((size_t)N), *rstd = vkg_test_alloc((size_t)N);
    vkg_ref_layernorm_fwd(lnout, mean, rstd, x, lw, lb, N, C);
    memset(dinp, 0, NC * 4), memset(dw, 0, (size_t)OC * C * 4);
    memcpy(dbias, start, (size_t)C * 4), memcpy(dlw, start, (size_t)C * 4);
    memcpy(dlb, start, (size_t)C * 4);
    vkg_ref_matmul_bwd(dinp, dw, dbias, dout, x, w, N, C, OC);
    vkg_ref_layernorm_bwd(dinp, dlw, dlb, dout, x, lw, mean, rstd, N, C);
    vkg_tensor tdout = vkg_gpu_upload(g, dout, NC * 4), tx = vkg_gpu_upload(g, x, NC * 4);
    vkg_tensor tw = vkg_gpu_upload(g, w, (size_t)OC * C * 4);
    vkg_tensor tlw = vkg_gpu_upload(g, lw, (size_t)C * 4);
    vkg_tensor tmean = vkg_gpu_upload(g, mean, (size_t)N * 4);
    vkg_tensor trstd = vkg_gpu_upload(g, rstd, (size_t)N * 4);
    vkg_tensor tdinp = vkg_gpu_upload(g, NULL, NC * 4),
               tdw = vkg_gpu_upload(g, NULL, (size_t)OC * C * 4);
    vkg_tensor out[2][3]; /* run, (dbias, dlnw, dlnb) */
    for (int run = 0; run < 2; run++) {
        for (int k = 0; k < 3; k++)
            out[run][k] = vkg_gpu_upload(g, start, (size_t)C * 4);
        VKG_ASSERT_OK(
            vkg_op_matmul_bwd(g->cmd, tdinp, tdw, &out[run][0], tdout, tx, tw, N, C, OC, NULL));
        vkg_cmd_logged l;
        assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, 0, &l), 0);
        assert_int_equal(l.kernel, VKG_KERNEL_matmul_bwd_bias);
        assert_int_equal(l.nspec, 5); /* the chunked variant */
        VKG_ASSERT_OK(vkg_op_layernorm_bwd(g->cmd, tdinp, out[run][1], out[run][2], tdout, tx, tlw,
                                           tmean, trstd, N, C));
        assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, 0, &l), 0);
        assert_int_equal(l.kernel, VKG_KERNEL_layernorm_bwd_dparams);
        assert_int_equal(l.spec[4], 1);
    }
    vkg_gpu_run(g);
    vkg_gpu_expect_ref(g, "chunked dbias", out[0][0], dbias, (size_t)C);
    vkg_gpu_expect_ref(g, "chunked layernorm dweight", out[0][1], dlw, (size_t)C);
    vkg_gpu_expect_ref(g, "chunked layernorm dbias", out[0][2], dlb, (size_t)C);
    for (int k = 0; k < 3; k++)
        expect_tensors_same(g, "chunked reduction, second run", out[1][k], out[0][k], (size_t)C);
    free(dout), free(x), free(w), free(lw), free(lb), free(start), free(dbias), free(dlw);
    free(dlb), free(dinp), free(dw), free(lnout), free(mean), free(rstd);
}

static void test_grad_reduce_chunked(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    static const uint32_t chunks[] = {1, 3, 16};
    static const ln_shape shapes[] = {{1, 13}, {7, 37}, {33, 300}, {1000, 37}, {128, 768}};
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 14);
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        vkg_device_tuning t = saved;
        t.grad_reduce_chunks = chunks[i];
        VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            print_message("  chunks=%u N=%d C=%d\n", chunks[i], shapes[s].N, shapes[s].C);
            grad_reduce_case(g, &r, shapes[s]);
        }
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matmul_fwd_gelu, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_residual_layernorm_fwd, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_grad_reduce_chunked, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
