/* Tests of layernorm (src/ops/layernorm.c), forward and backward, against the CPU reference
 * (src/ref) on random inputs: one row, C below and not a multiple of the workgroup size (13, 37),
 * a row count and width that are not multiples of anything, and GPT-2's B=2, T=64, C=768. Every
 * output must be finite and within a relative L2 error ||gpu - ref|| / ||ref|| <=
 * VKG_TEST_REL_BOUND (1e-5). Forward outputs (out, mean, rstd) are poisoned with NaN first;
 * backward outputs start from random values that the reference starts from too, so accumulating
 * is checked against overwriting. The backward pass must be bitwise reproducible, and wrong sizes
 * must be refused naming the tensor. */
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

typedef struct shape {
    int N, C;
} shape;

static const shape SHAPES[] = {{1, 13}, {7, 37}, {33, 300}, {2 * 64, 768}, {3, 1601}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* Rows with different offsets and spreads, as activations have. */
static float *layer_inputs(vkg_test_rng *r, int N, int C)
{
    float *x = vkg_test_alloc((size_t)N * C);
    for (int n = 0; n < N; n++) {
        float offset = vkg_test_rng_uniform(r, -2.0f, 2.0f);
        float spread = vkg_test_rng_uniform(r, 0.1f, 3.0f);
        for (int c = 0; c < C; c++)
            x[(size_t)n * C + c] = offset + spread * vkg_test_rng_uniform(r, -1.0f, 1.0f);
    }
    return x;
}

static void test_layernorm_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 21);
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = SHAPES[s].N, C = SHAPES[s].C;
        size_t NC = (size_t)N * C;
        print_message("  N=%d C=%d\n", N, C);
        float *x = layer_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
        float *b = vkg_test_random(&r, C, -0.5f, 0.5f);
        float *out = vkg_test_alloc(NC), *mean = vkg_test_alloc(N), *rstd = vkg_test_alloc(N);
        vkg_ref_layernorm_fwd(out, mean, rstd, x, w, b, N, C);
        vkg_tensor tx = vkg_gpu_upload(g, x, NC * 4), tw = vkg_gpu_upload(g, w, C * 4u);
        vkg_tensor tb = vkg_gpu_upload(g, b, C * 4u);
        vkg_tensor tout = vkg_gpu_poisoned(g, NC), tmean = vkg_gpu_poisoned(g, N);
        vkg_tensor trstd = vkg_gpu_poisoned(g, N);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, tout, tmean, trstd, tx, tw, tb, N, C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "layernorm_fwd out", tout, out, NC);
        vkg_gpu_expect_ref(g, "layernorm_fwd mean", tmean, mean, N);
        vkg_gpu_expect_ref(g, "layernorm_fwd rstd", trstd, rstd, N);
        free(x);
        free(w);
        free(b);
        free(out);
        free(mean);
        free(rstd);
    }
}

static void test_layernorm_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 22);
    for (size_t s = 0; s < NSHAPES; s++) {
        int N = SHAPES[s].N, C = SHAPES[s].C;
        size_t NC = (size_t)N * C;
        print_message("  N=%d C=%d\n", N, C);
        float *x = layer_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
        float *b = vkg_test_random(&r, C, -0.5f, 0.5f);
        float *out = vkg_test_alloc(NC), *mean = vkg_test_alloc(N), *rstd = vkg_test_alloc(N);
        vkg_ref_layernorm_fwd(out, mean, rstd, x, w, b, N, C);
        float *dout = vkg_test_random(&r, NC, -1.0f, 1.0f);
        /* starting gradients about as large as what the pass adds */
        float *dinp = vkg_test_random(&r, NC, -1.0f, 1.0f);
        float *dw = vkg_test_random(&r, C, -5.0f, 5.0f), *db = vkg_test_random(&r, C, -5.0f, 5.0f);
        vkg_tensor tx = vkg_gpu_upload(g, x, NC * 4), tw = vkg_gpu_upload(g, w, C * 4u);
        vkg_tensor tmean = vkg_gpu_upload(g, mean, N * 4u), trstd = vkg_gpu_upload(g, rstd, N * 4u);
        vkg_tensor tdout = vkg_gpu_upload(g, dout, NC * 4);
        vkg_tensor tdinp[2], tdw[2], tdb[2];
        for (int k = 0; k < 2; k++) {
            tdinp[k] = vkg_gpu_upload(g, dinp, NC * 4);
            tdw[k] = vkg_gpu_upload(g, dw, C * 4u);
            tdb[k] = vkg_gpu_upload(g, db, C * 4u);
        }
        vkg_ref_layernorm_bwd(dinp, dw, db, dout, x, w, mean, rstd, N, C);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        for (int k = 0; k < 2; k++)
            VKG_ASSERT_OK(vkg_op_layernorm_bwd(g->cmd, tdinp[k], tdw[k], tdb[k], tdout, tx, tw,
                                               tmean, trstd, N, C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "layernorm_bwd dinp", tdinp[0], dinp, NC);
        vkg_gpu_expect_ref(g, "layernorm_bwd dweight", tdw[0], dw, C);
        vkg_gpu_expect_ref(g, "layernorm_bwd dbias", tdb[0], db, C);
        /* the second run from the same inputs is bitwise identical */
        float *u = vkg_test_alloc(NC), *v = vkg_test_alloc(NC);
        vkg_tensor pairs[3][2] = {{tdinp[0], tdinp[1]}, {tdw[0], tdw[1]}, {tdb[0], tdb[1]}};
        size_t sizes[3] = {NC, (size_t)C, (size_t)C};
        for (int k = 0; k < 3; k++) {
            vkg_gpu_download(g, pairs[k][0], u, sizes[k] * 4);
            vkg_gpu_download(g, pairs[k][1], v, sizes[k] * 4);
            assert_memory_equal(u, v, sizes[k] * 4);
        }
        free(u);
        free(v);
        free(x);
        free(w);
        free(b);
        free(out);
        free(mean);
        free(rstd);
        free(dout);
        free(dinp);
        free(dw);
        free(db);
    }
}

/* More rows than one dispatch has workgroups (65535): the row loop must cover the rest. */
static void test_rows_beyond_the_grid(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 65535 + 40, C = 3 };
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 23);
    float *x = layer_inputs(&r, N, C), *w = vkg_test_random(&r, C, 0.5f, 1.5f);
    float *b = vkg_test_random(&r, C, -0.5f, 0.5f),
          *dout = vkg_test_random(&r, (size_t)N * C, -1, 1);
    float *out = vkg_test_alloc((size_t)N * C), *mean = vkg_test_alloc(N);
    float *rstd = vkg_test_alloc(N), *dinp = vkg_test_random(&r, (size_t)N * C, -1, 1);
    float dw[C] = {0}, db[C] = {0};
    vkg_tensor tx = vkg_gpu_upload(g, x, (size_t)N * C * 4), tw = vkg_gpu_upload(g, w, C * 4);
    vkg_tensor tb = vkg_gpu_upload(g, b, C * 4), td = vkg_gpu_upload(g, dout, (size_t)N * C * 4);
    vkg_tensor tout = vkg_gpu_poisoned(g, (size_t)N * C), tmean = vkg_gpu_poisoned(g, N);
    vkg_tensor trstd = vkg_gpu_poisoned(g, N), tdinp = vkg_gpu_upload(g, dinp, (size_t)N * C * 4);
    vkg_tensor tdw = vkg_gpu_upload(g, dw, sizeof dw), tdb = vkg_gpu_upload(g, db, sizeof db);
    vkg_ref_layernorm_fwd(out, mean, rstd, x, w, b, N, C);
    /* the backward pass gets the reference's mean and rstd, as the reference does: with C = 3
     * some rows are nearly constant, and an ulp of difference in their mean is amplified */
    vkg_tensor rmean = vkg_gpu_upload(g, mean, N * 4), rrstd = vkg_gpu_upload(g, rstd, N * 4);
    vkg_ref_layernorm_bwd(dinp, dw, db, dout, x, w, mean, rstd, N, C);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, tout, tmean, trstd, tx, tw, tb, N, C));
    VKG_ASSERT_OK(vkg_op_layernorm_bwd(g->cmd, tdinp, tdw, tdb, td, tx, tw, rmean, rrstd, N, C));
    vkg_gpu_run(g);
    vkg_gpu_expect_ref(g, "layernorm_fwd out", tout, out, (size_t)N * C);
    vkg_gpu_expect_ref(g, "layernorm_fwd mean", tmean, mean, N);
    vkg_gpu_expect_ref(g, "layernorm_fwd rstd", trstd, rstd, N);
    vkg_gpu_expect_ref(g, "layernorm_bwd dinp", tdinp, dinp, (size_t)N * C);
    vkg_gpu_expect_ref(g, "layernorm_bwd dweight", tdw, dw, C);
    vkg_gpu_expect_ref(g, "layernorm_bwd dbias", tdb, db, C);
    free(x);
    free(w);
    free(b);
    free(dout);
    free(out);
    free(mean);
    free(rstd);
    free(dinp);
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { N = 6, C = 10 };
    vkg_tensor big = vkg_gpu_poisoned(g, N * C), row = vkg_gpu_poisoned(g, C);
    vkg_tensor col = vkg_gpu_poisoned(g, N), tiny = vkg_gpu_poisoned(g, N - 1);
    vkg_tensor short_row = vkg_gpu_poisoned(g, C - 1), short_big = vkg_gpu_poisoned(g, N * C - 1);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, short_big, col, col, big, row, row, N, C),
                       "layernorm_fwd: tensor out holds 59 elements, the shape needs 60");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, tiny, col, big, row, row, N, C),
                       "layernorm_fwd: tensor mean");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, col, tiny, big, row, row, N, C),
                       "layernorm_fwd: tensor rstd");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, col, col, short_big, row, row, N, C),
                       "layernorm_fwd: tensor inp");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, col, col, big, short_row, row, N, C),
                       "layernorm_fwd: tensor weight");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, col, col, big, row, short_row, N, C),
                       "layernorm_fwd: tensor bias");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, col, col, big, row, row, 0, C),
                       "layernorm_fwd: N and C must be positive");
    vkg_expect_invalid(vkg_op_layernorm_fwd(c, big, col, col, big, row, row, N, -1),
                       "layernorm_fwd: N and C must be positive");
    /* A row longer than the shader index limit (C - 1 here, in place of 2^31 - 1) is refused. */
    vkg__op_set_max_elems(C - 1);
    vkg_status st = vkg_op_layernorm_fwd(c, big, col, col, big, row, row, N, C);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "layernorm_fwd: one row of C=10 elements is more than the 9");
    vkg__op_set_max_elems(C - 1);
    st = vkg_op_layernorm_bwd(c, big, row, row, big, big, row, col, col, N, C);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "layernorm_bwd: one row of C=10 elements is more than the 9");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, short_big, row, row, big, big, row, col, col, N, C),
                       "layernorm_bwd: tensor dinp");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, short_row, row, big, big, row, col, col, N, C),
                       "layernorm_bwd: tensor dweight");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, row, short_row, big, big, row, col, col, N, C),
                       "layernorm_bwd: tensor dbias");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, row, row, short_big, big, row, col, col, N, C),
                       "layernorm_bwd: tensor dout");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, row, row, big, short_big, row, col, col, N, C),
                       "layernorm_bwd: tensor inp");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, row, row, big, big, short_row, col, col, N, C),
                       "layernorm_bwd: tensor weight");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, row, row, big, big, row, tiny, col, N, C),
                       "layernorm_bwd: tensor mean");
    vkg_expect_invalid(vkg_op_layernorm_bwd(c, big, row, row, big, big, row, col, tiny, N, C),
                       "layernorm_bwd: tensor rstd");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layernorm_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_layernorm_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_rows_beyond_the_grid, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
