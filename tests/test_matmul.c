/* Matmul forward and backward (src/ops/matmul.c) against the CPU reference.
 * Bound: ||gpu - ref|| / ||ref|| <= 1e-5 (VKG_TEST_REL_BOUND) for every output, every element
 * finite. Outputs of the forward are poisoned with NaN first; gradients start from random values
 * the reference starts from too, so accumulation is checked. The backward runs whole and as its
 * two halves (dweight, then dinp). Both kernel variants run on every
 * device: the device's default tiles and explicit ones (the subgroup-shuffle variant when the tile
 * matches the subgroup, the plain one otherwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "matmul_check.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

typedef vkg_mm_shape shape;

static const shape shapes[] = {
    {1, 1, 1}, {7, 13, 37}, {33, 67, 5}, {1, 768, 50}, {64, 768, 2304}, {130, 40, 9},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void test_matmul_fwd(void **state)
{
    vkg_gpu *g = *state;
    for (size_t i = 0; i < NSHAPES; i++)
        for (int bias = 0; bias <= 1; bias++)
            vkg_mm_check_fwd(g, shapes[i], bias, 100 + i * 2 + (size_t)bias);
}

static void test_matmul_bwd(void **state)
{
    vkg_gpu *g = *state;
    for (size_t i = 0; i < NSHAPES; i++)
        for (int bias = 0; bias <= 1; bias++)
            vkg_mm_check_bwd(g, shapes[i], bias, 0, 200 + i * 2 + (size_t)bias);
    for (size_t i = 0; i < NSHAPES; i++)
        vkg_mm_check_bwd(g, shapes[i], (int)(i % 2), 1, 300 + i);
}

/* Every tile variant on awkward sizes: out = A B with A both layouts, stored both ways. */
static void test_gemm_tile_variants(void **state)
{
    vkg_gpu *g = *state;
    const vkg_device_info *info = vkg_device_get_info(g->dev);
    uint32_t sg = info->subgroup_size;
    const vkg_matmul_tiles tiles[] = {{0, 0, 0}, {4, 4, 64}, {sg, 4, sg}, {sg, 1, sg}, {3, 5, 16}};
    const int M = 29, N = 45, K = 19;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 7);
    float a[M * K], b[K * N], ref[M * N], aT[K * M];
    vkg_test_fill_uniform(&r, a, M * K, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, b, K * N, -1.0f, 1.0f);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            aT[k * M + m] = a[m * K + k];
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)a[m * K + k] * b[k * N + n];
            ref[m * N + n] = (float)acc;
        }
    vkg_tensor ta = vkg_gpu_upload(g, a, sizeof a), taT = vkg_gpu_upload(g, aT, sizeof aT);
    vkg_tensor tb = vkg_gpu_upload(g, b, sizeof b);
    for (size_t v = 0; v < sizeof tiles / sizeof tiles[0]; v++)
        for (int kcontig = 0; kcontig <= 1; kcontig++) {
            vkg_tensor out = vkg_gpu_poisoned(g, M * N), outT = vkg_gpu_poisoned(g, M * N);
            vkg_gemm gm = {.out = out,
                           .a = kcontig ? ta : taT,
                           .b = tb,
                           .M = M,
                           .N = N,
                           .K = K,
                           .lda = kcontig ? K : M,
                           .ldb = N,
                           .ldo = N,
                           .a_kcontig = kcontig,
                           .tiles = tiles[v],
                           .label = "gemm"};
            VKG_ASSERT_OK(vkg_op_gemm(g->cmd, &gm));
            gm.out = outT, gm.out_t = 1, gm.ldo = M;
            VKG_ASSERT_OK(vkg_op_gemm(g->cmd, &gm));
            vkg_gpu_run(g);
            float got[M * N], gotT[M * N], back[M * N];
            vkg_gpu_download(g, out, got, sizeof got);
            vkg_gpu_download(g, outT, gotT, sizeof gotT);
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++)
                    back[m * N + n] = gotT[n * M + m];
            char what[64];
            snprintf(what, sizeof what, "gemm tiles %u,%u,%u kcontig %d", tiles[v].tm, tiles[v].tn,
                     tiles[v].lx, kcontig);
            assert_true(vkg_test_compare(what, got, ref, M * N, VKG_TEST_REL_BOUND, NULL));
            assert_true(vkg_test_compare(what, back, ref, M * N, VKG_TEST_REL_BOUND, NULL));
        }
}

/* The tiled kernel (the GPU form), forced on this device through the tuning, in several block
 * shapes: the matmul passes on every shape above (bias, accumulation, the two halves of the
 * backward), gemm with each operand in each layout and accumulation, one dispatch for the forward
 * (no transpose), and the same bits on a second run. */
static void test_tiled_kernel(void **state)
{
    vkg_gpu *g = *state;
    vkg_device_tuning saved = vkg_device_tuning_get(g->dev);
    /* bm, bn, bk, tm, tn */
    const uint32_t blocks[][5] = {{128, 128, 16, 8, 8},
                                  {64, 64, 16, 4, 4},
                                  {32, 64, 8, 4, 8},
                                  {48, 40, 12, 3, 5},
                                  {8, 8, 4, 1, 1}};
    for (size_t v = 0; v < sizeof blocks / sizeof blocks[0]; v++) {
        vkg_device_tuning t = saved;
        vkg_matmul_tiling blk = {
            blocks[v][0], blocks[v][1], blocks[v][2], blocks[v][3], blocks[v][4], 0, 0};
        vkg__mmt_force(&t, &blk);
        VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &t));
        printf("tiled %ux%ux%u, %ux%u per invocation\n", blk.bm, blk.bn, blk.bk, blk.tm, blk.tn);
        for (size_t i = 0; i < NSHAPES; i++) {
            vkg_mm_check_fwd(g, shapes[i], (int)(i % 2), 400 + i);
            vkg_mm_check_bwd(g, shapes[i], (int)((i + 1) % 2), (int)(i % 2), 500 + i);
        }
        /* gemm: A and B in both layouts, accumulate into a known start. */
        const int M = 29, N = 45, K = 19;
        vkg_test_rng r;
        vkg_test_rng_seed(&r, 70 + v);
        float a[M * K], aT[K * M], b[K * N], bT[N * K], start[M * N], ref[M * N];
        vkg_test_fill_uniform(&r, a, M * K, -1.0f, 1.0f);
        vkg_test_fill_uniform(&r, b, K * N, -1.0f, 1.0f);
        vkg_test_fill_uniform(&r, start, M * N, -1.0f, 1.0f);
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                aT[k * M + m] = a[m * K + k];
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                bT[n * K + k] = b[k * N + n];
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double acc = start[m * N + n];
                for (int k = 0; k < K; k++)
                    acc += (double)a[m * K + k] * b[k * N + n];
                ref[m * N + n] = (float)acc;
            }
        vkg_tensor ta = vkg_gpu_upload(g, a, sizeof a), taT = vkg_gpu_upload(g, aT, sizeof aT);
        vkg_tensor tb = vkg_gpu_upload(g, b, sizeof b), tbT = vkg_gpu_upload(g, bT, sizeof bT);
        for (int lay = 0; lay < 4; lay++) {
            int ak = lay & 1, bk = lay >> 1;
            vkg_tensor out = vkg_gpu_upload(g, start, sizeof start);
            vkg_gemm gm = {.out = out,
                           .a = ak ? ta : taT,
                           .b = bk ? tbT : tb,
                           .M = M,
                           .N = N,
                           .K = K,
                           .lda = ak ? K : M,
                           .ldb = bk ? K : N,
                           .ldo = N,
                           .a_kcontig = ak,
                           .b_kcontig = bk,
                           .accumulate = 1,
                           .label = "gemm"};
            VKG_ASSERT_OK(vkg_op_gemm(g->cmd, &gm));
            vkg_gpu_run(g);
            float got[M * N];
            vkg_gpu_download(g, out, got, sizeof got);
            char what[64];
            snprintf(what, sizeof what, "tiled gemm a_kcontig %d b_kcontig %d", ak, bk);
            assert_true(vkg_test_compare(what, got, ref, M * N, VKG_TEST_REL_BOUND, NULL));
        }
    }
    /* One dispatch for the forward pass (the register kernel transposes first), and the same
     * bits twice. */
    const shape s = {64, 768, 2304};
    size_t nin = (size_t)s.N * s.C, nw = (size_t)s.OC * s.C, nout = (size_t)s.N * s.OC;
    float *inp = vkg_test_alloc(nin), *w = vkg_test_alloc(nw), *o1 = vkg_test_alloc(nout),
          *o2 = vkg_test_alloc(nout);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 99);
    vkg_test_fill_uniform(&r, inp, nin, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, w, nw, -1.0f, 1.0f);
    vkg_tensor ti = vkg_gpu_upload(g, inp, nin * 4), tw = vkg_gpu_upload(g, w, nw * 4);
    vkg_tensor to = vkg_gpu_poisoned(g, nout), ts = vkg_gpu_poisoned(g, nin);
    for (int run = 0; run < 2; run++) {
        int before = vkg_cmd_dispatch_count(g->cmd);
        VKG_ASSERT_OK(vkg_op_matmul_fwd(g->cmd, to, ti, tw, NULL, s.N, s.C, s.OC, ts));
        /* (a lowered VKG_MAX_DISPATCH_ELEMS splits it and sends the weight to the register
         * kernel: then at least one transpose and one product per block) */
        if (!getenv("VKG_MAX_DISPATCH_ELEMS"))
            assert_int_equal(vkg_cmd_dispatch_count(g->cmd) - before, 1);
        else
            assert_true(vkg_cmd_dispatch_count(g->cmd) - before >= 2);
        vkg_gpu_run(g);
        vkg_gpu_download(g, to, run ? o2 : o1, nout * 4);
    }
    assert_memory_equal(o1, o2, nout * 4);
    /* The register kernel cannot read B k-contiguous: asked to, it refuses. */
    vkg_gemm bad = {.out = to,
                    .a = ti,
                    .b = tw,
                    .M = 4,
                    .N = 4,
                    .K = 4,
                    .lda = 4,
                    .ldb = 4,
                    .ldo = 4,
                    .a_kcontig = 1,
                    .b_kcontig = 1,
                    .tiles = {4, 4, 64},
                    .label = "gemm"};
    assert_int_equal(vkg_op_gemm(g->cmd, &bad), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(vkg_error_message(), "reads B only n-contiguous"));
    free(inp), free(w), free(o1), free(o2);
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &saved));
}

static void test_matmul_rejects_bad_shapes(void **state)
{
    vkg_gpu *g = *state;
    vkg_tensor small = vkg_gpu_poisoned(g, 10), big = vkg_gpu_poisoned(g, 1000);
    assert_int_equal(vkg_op_matmul_fwd(g->cmd, big, big, small, NULL, 4, 5, 6, big),
                     VKG_ERR_INVALID_ARG);
    /* named as the caller knows it, whichever kernel the device takes */
    assert_non_null(strstr(vkg_error_message(), "matmul_fwd: tensor weight holds 10 elements"));
    assert_int_equal(vkg_op_matmul_fwd(g->cmd, big, big, big, NULL, 0, 5, 6, big),
                     VKG_ERR_INVALID_ARG);
    assert_int_equal(vkg_op_matmul_bwd(g->cmd, big, big, &small, big, big, big, 4, 5, 11, NULL),
                     VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "dbias"));
    vkg_gpu_run(g);
}

/* The backward reductions run in a fixed order: two runs give the same bits. */
static void test_matmul_bwd_deterministic(void **state)
{
    vkg_gpu *g = *state;
    const int N = 37, C = 24, OC = 19;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 11);
    float inp[N * C], w[OC * C], dout[N * OC];
    vkg_test_fill_uniform(&r, inp, N * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, w, OC * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, dout, N * OC, -1.0f, 1.0f);
    vkg_tensor ti = vkg_gpu_upload(g, inp, sizeof inp), tw = vkg_gpu_upload(g, w, sizeof w);
    vkg_tensor td = vkg_gpu_upload(g, dout, sizeof dout);
    vkg_tensor di = vkg_gpu_upload(g, NULL, sizeof inp), dw = vkg_gpu_upload(g, NULL, sizeof w);
    vkg_tensor db = vkg_gpu_upload(g, NULL, OC * 4);
    float first[OC * C + OC], second[OC * C + OC];
    for (int run = 0; run < 2; run++) {
        VKG_ASSERT_OK(vkg_op_fill(g->cmd, di, N * C, 0.0f));
        VKG_ASSERT_OK(vkg_op_fill(g->cmd, dw, OC * C, 0.0f));
        VKG_ASSERT_OK(vkg_op_fill(g->cmd, db, OC, 0.0f));
        VKG_ASSERT_OK(vkg_op_matmul_bwd(g->cmd, di, dw, &db, td, ti, tw, N, C, OC, NULL));
        vkg_gpu_run(g);
        float *dst = run ? second : first;
        vkg_gpu_download(g, dw, dst, OC * C * 4);
        vkg_gpu_download(g, db, dst + OC * C, OC * 4);
    }
    assert_memory_equal(first, second, sizeof first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matmul_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_gemm_tile_variants, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_tiled_kernel, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_rejects_bad_shapes, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_bwd_deterministic, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
