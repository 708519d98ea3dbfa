/* The tiled matmul double buffered (matmul_tiled.comp's DBUF) gives the single-buffered kernel's
 * bits in every mode of its epilogue and operands: bias, GELU with an fp32 and a bf16
 * activation, bf16 A or B operands, ACCUMULATE, split-K (partial products and their ordered sum),
 * on the vec4 and scalar paths, for two tilings (64x64x16:4x4, and 48x40x12:3x5 whose blocks are
 * no power of two), on a shape that is no multiple of either block and takes many k-steps (so
 * each buffer is refilled several times, the last step partial). Each product's recorded
 * dispatch names DBUF = 1 or leaves it out (single), so both forms really ran; the single one is
 * checked against the CPU reference too (the table's entries are in test_matmul_tiles). The vec4
 * path (4 floats, or 4 bf16 widened, per load) gives the scalar path's bits in every mode. */
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
#include "testutil.h"

#define SPEC_VEC4 11 /* matmul_tiled.comp's constant_ids */
#define SPEC_DBUF 16

enum { M = 70, N = 76, K = 600 };

typedef struct mode {
    const char *name;
    int a_bf16, b_bf16, bias, gelu, act_bf16, accumulate, splitk, b_kcontig;
    uint32_t vec4; /* the VEC4 constant expected */
} mode;

static const mode modes[] = {
    {"bias, vec4", 0, 0, 1, 0, 0, 0, 0, 1, 1},
    {"bias + GELU, fp32 act, vec4", 0, 0, 1, 1, 0, 0, 0, 1, 1},
    {"GELU, bf16 act, bf16 B, vec4", 0, 1, 0, 1, 1, 0, 0, 1, 1},
    {"bias + GELU, bf16 act, bf16 A and B, vec4", 1, 1, 1, 1, 1, 0, 0, 1, 1},
    {"bf16 A, B n-contiguous, vec4", 1, 0, 0, 0, 0, 0, 0, 0, 1},
    {"accumulate, B n-contiguous, vec4", 0, 0, 0, 0, 0, 1, 0, 0, 1},
    {"accumulate, split-K, vec4", 0, 0, 0, 0, 0, 1, 1, 1, 1},
};
#define NMODES (sizeof modes / sizeof modes[0])

/* v (n floats) on the device, as bf16 (cast there) when bf16. */
static vkg_tensor operand(vkg_gpu *g, const float *v, size_t n, int bf16)
{
    return bf16 ? vkg_gpu_bf16_of(g, v, n) : vkg_gpu_upload(g, v, n * 4);
}

/* R = A B (+ out's start when accumulating, + bias) in mode m with tiles t, on the same random
 * inputs every call: the output into out (M * N floats), the activation into act (M * N floats,
 * or (M * N + 1) / 2 words when bf16) when m->gelu; returns the product's recorded dispatch. */
static vkg_cmd_logged run(vkg_gpu *g, const mode *m, const vkg_matmul_tiling *t, float *out,
                          float *act, uint32_t vec4)
{
    vkg_device_tuning tu = vkg_device_tuning_get(g->dev);
    vkg__mmt_force(&tu, t);
    tu.mmt_fill = 1u << 20; /* every product "too small": split-K wherever it is allowed */
    tu.mmt_splitk = 1;
    tu.mmt_vec4 = vec4;
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &tu));
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 77);
    float *a = vkg_test_random(&r, (size_t)M * K, -1.0f, 1.0f);
    float *b = vkg_test_random(&r, (size_t)K * N, -1.0f, 1.0f);
    float *bias = vkg_test_random(&r, N, -1.0f, 1.0f), *start = vkg_test_random(&r, M * N, -1, 1);
    vkg_tensor ta = operand(g, a, (size_t)M * K, m->a_bf16);
    vkg_tensor tb = operand(g, b, (size_t)K * N, m->b_bf16), tbias = vkg_gpu_upload(g, bias, N * 4);
    vkg_tensor to =
        m->accumulate ? vkg_gpu_upload(g, start, M * N * 4) : vkg_gpu_poisoned(g, M * N);
    vkg_tensor tact = vkg_gpu_poisoned(g, M * N), scratch = vkg_gpu_poisoned(g, 8 * M * N);
    if (m->act_bf16)
        tact.dtype = VKG_BF16;
    vkg_gemm gm = {.out = to,
                   .a = ta,
                   .b = tb,
                   .bias = m->bias ? &tbias : NULL,
                   .M = M,
                   .N = N,
                   .K = K,
                   .lda = K,
                   .ldb = m->b_kcontig ? K : N,
                   .ldo = N,
                   .a_kcontig = 1,
                   .b_kcontig = m->b_kcontig,
                   .accumulate = m->accumulate,
                   .splitk_scratch = m->splitk ? &scratch : NULL,
                   .act = m->gelu ? &tact : NULL,
                   .label = "gemm"};
    VKG_ASSERT_OK(vkg_op_gemm(g->cmd, &gm));
    vkg_cmd_logged l;
    assert_int_equal(vkg_cmd_logged_dispatch(g->cmd, m->splitk ? 1 : 0, &l), 0);
    assert_int_equal(l.kernel, VKG_KERNEL_matmul_tiled);
    assert_int_equal(l.grid[2] > 1, m->splitk); /* split-K taken exactly where asked */
    assert_int_equal(l.spec[SPEC_VEC4], vec4 ? m->vec4 : 0);
    vkg_gpu_run(g);
    vkg_gpu_download(g, to, out, M * N * 4);
    if (m->gelu)
        vkg_gpu_download(g, tact, act, m->act_bf16 ? (M * N + 1) / 2 * 4 : M * N * 4);
    free(a), free(b), free(bias), free(start);
    return l;
}

/* ref (M, N) = start (when accumulating) + bias + A B from run's inputs (fp32 modes only). */
static void reference(const mode *m, float *ref)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 77);
    float *a = vkg_test_random(&r, (size_t)M * K, -1.0f, 1.0f);
    float *b = vkg_test_random(&r, (size_t)K * N, -1.0f, 1.0f);
    float *bias = vkg_test_random(&r, N, -1.0f, 1.0f), *start = vkg_test_random(&r, M * N, -1, 1);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = m->accumulate ? start[i * N + j] : m->bias ? bias[j] : 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)a[(size_t)i * K + k] *
                       b[m->b_kcontig ? (size_t)j * K + k : (size_t)k * N + j];
            ref[i * N + j] = (float)acc;
        }
    free(a), free(b), free(bias), free(start);
}

static void test_dbuf_modes(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    const vkg_matmul_tiling tiles[] = {{64, 64, 16, 4, 4, 0, 0}, {48, 40, 12, 3, 5, 0, 0}};
    float *one = vkg_test_alloc(M * N), *two = vkg_test_alloc(M * N), *ref = vkg_test_alloc(M * N);
    float *act1 = vkg_test_alloc(M * N), *act2 = vkg_test_alloc(M * N);
    for (size_t v = 0; v < sizeof tiles / sizeof tiles[0]; v++)
        for (size_t i = 0; i < NMODES; i++) {
            const mode *m = &modes[i];
            vkg_matmul_tiling t = tiles[v];
            vkg_cmd_logged l = run(g, m, &t, one, act1, 1);
            assert_true(l.nspec <= SPEC_DBUF); /* single buffered names no DBUF */
            if (m->vec4) {                     /* the scalar path: the same bits */
                run(g, m, &t, two, act2, 0);
                assert_memory_equal(one, two, M * N * 4);
                if (m->gelu)
                    assert_memory_equal(act1, act2, m->act_bf16 ? (M * N + 1) / 2 * 4 : M * N * 4);
            }
            t.dbuf = 1;
            l = run(g, m, &t, two, act2, 1);
            assert_true(l.nspec == SPEC_DBUF + 1 && l.spec[SPEC_DBUF] == 1);
            char what[128];
            snprintf(what, sizeof what, "%ux%ux%u, %s", t.bm, t.bn, t.bk, m->name);
            printf("%s: double buffered == single\n", what);
            if (!m->a_bf16 && !m->b_bf16) {
                reference(m, ref);
                assert_true(vkg_test_compare(what, one, ref, M * N, VKG_TEST_REL_BOUND, NULL));
            }
            assert_memory_equal(one, two, M * N * 4);
            if (m->gelu)
                assert_memory_equal(act1, act2, m->act_bf16 ? (M * N + 1) / 2 * 4 : M * N * 4);
        }
    free(one), free(two), free(ref), free(act1), free(act2);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dbuf_modes, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
