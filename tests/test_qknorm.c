/* Tests of QK-norm (src/ops/qknorm.c), forward and backward, against the CPU reference's RMSNorm
 * (src/ref, written from the definition) applied to the q heads and to the k heads gathered as
 * rows of D, with the v heads passed through: one head of D = 1, D below and not a multiple of
 * the workgroup (6, 37), grouped-query heads, 3 x 64 x (12 + 2 * 4) x 64 and more head rows than
 * a dispatch has workgroups (16400 positions x 4 heads), under the
 * device's and a GPU's tuning. Every output must be finite and within a relative L2 error
 * ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND (1e-5), the v heads of out exactly qkv's.
 * Forward outputs are poisoned with NaN first; backward outputs start from random values that
 * the reference starts from too (accumulation), and the backward is bitwise reproducible. Wrong
 * sizes, bf16 tensors and a qkv beyond the index limit are refused. */
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
    int B, T, NH, NKV, D;
} shape;

static const shape SHAPES[] = {{1, 1, 1, 1, 1},
                               {2, 7, 3, 1, 6},
                               {1, 33, 4, 2, 37},
                               {3, 64, 12, 4, 64},
                               {1, 16400, 2, 1, 3}}; /* 65600 head rows: beyond one grid */
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* Copy the heads [h0, h0 + nh) of every position of x (rows, W) to rows of D of m (rows * nh,
 * D), or back (to_x). */
static void gather(float *x, float *m, size_t rows, int W, int h0, int nh, int D, int to_x)
{
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < nh; h++) {
            float *a = x + r * W + (size_t)(h0 + h) * D, *b = m + (r * nh + h) * D;
            memcpy(to_x ? a : b, to_x ? b : a, (size_t)D * sizeof(float));
        }
}

/* rstd (rows, NH + NKV) from the q rows' (rows * NH) and k rows' (rows * NKV). */
static void join_rstd(float *rstd, const float *rq, const float *rk, size_t rows, int NH, int NKV)
{
    for (size_t r = 0; r < rows; r++) {
        memcpy(rstd + r * (NH + NKV), rq + r * NH, (size_t)NH * sizeof(float));
        memcpy(rstd + r * (NH + NKV) + NH, rk + r * NKV, (size_t)NKV * sizeof(float));
    }
}

/* The reference of shape s: forward (out, rstd) and, with dqkv not NULL, backward from dout. */
static void reference(const shape *s, float *out, float *rstd, const float *qkv, const float *qw,
                      const float *kw, float *dqkv, float *dqw, float *dkw, const float *dout)
{
    size_t rows = (size_t)s->B * s->T;
    int W = (s->NH + 2 * s->NKV) * s->D, hk = s->NH + s->NKV;
    size_t n = rows * W;
    float *m = vkg_test_alloc(n), *mo = vkg_test_alloc(n), *rq = vkg_test_alloc(rows * hk);
    float *rk = rq + rows * s->NH, *md = vkg_test_alloc(n), *mg = vkg_test_alloc(n);
    float *x = vkg_test_alloc(n);
    memcpy(out, qkv, n * 4); /* the v heads */
    memcpy(x, qkv, n * 4);
    for (int k = 0; k < 2; k++) {
        int h0 = k ? s->NH : 0, nh = k ? s->NKV : s->NH, N = (int)rows * nh;
        float *rs = k ? rk : rq;
        gather(x, m, rows, W, h0, nh, s->D, 0);
        vkg_ref_rmsnorm_fwd(mo, rs, m, k ? kw : qw, N, s->D, 1e-6);
        gather(out, mo, rows, W, h0, nh, s->D, 1);
        if (!dqkv)
            continue;
        gather((float *)dout, md, rows, W, h0, nh, s->D, 0);
        gather(dqkv, mg, rows, W, h0, nh, s->D, 0);
        vkg_ref_rmsnorm_bwd(mg, k ? dkw : dqw, md, m, k ? kw : qw, rs, N, s->D);
        gather(dqkv, mg, rows, W, h0, nh, s->D, 1);
    }
    join_rstd(rstd, rq, rk, rows, s->NH, s->NKV);
    if (dqkv) /* the v heads: += dout */
        for (size_t r = 0; r < rows; r++)
            for (size_t c = (size_t)hk * s->D; c < (size_t)W; c++)
                dqkv[r * W + c] = (float)((double)dqkv[r * W + c] + (double)dout[r * W + c]);
    free(m), free(mo), free(rq), free(md), free(mg), free(x);
}

/* v = 0 the device's tuning, 1 a GPU's (256 per row, 16 chunks). */
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

static void test_qknorm(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 61);
    vkg_device_tuning own = vkg_device_tuning_get(g->dev);
    for (size_t i = 0; i < 2 * NSHAPES; i++) {
        if (i % NSHAPES == 0)
            set_variant(g, &own, (int)(i / NSHAPES));
        const shape *s = &SHAPES[i % NSHAPES];
        size_t rows = (size_t)s->B * s->T, hk = (size_t)(s->NH + s->NKV);
        size_t n = rows * (size_t)(s->NH + 2 * s->NKV) * s->D, D = (size_t)s->D;
        print_message("  B=%d T=%d NH=%d NKV=%d D=%d\n", s->B, s->T, s->NH, s->NKV, s->D);
        float *x = vkg_test_random(&r, n, -2, 2), *qw = vkg_test_random(&r, D, 0.5f, 1.5f);
        float *kw = vkg_test_random(&r, D, 0.5f, 1.5f), *dout = vkg_test_random(&r, n, -1, 1);
        float *dx = vkg_test_random(&r, n, -1, 1), *dqw = vkg_test_random(&r, D, -5, 5);
        float *dkw = vkg_test_random(&r, D, -5, 5), *out = vkg_test_alloc(n);
        float *rstd = vkg_test_alloc(rows * hk), *got = vkg_test_alloc(n);
        vkg_tensor tx = vkg_gpu_upload(g, x, n * 4), tqw = vkg_gpu_upload(g, qw, D * 4);
        vkg_tensor tkw = vkg_gpu_upload(g, kw, D * 4), td = vkg_gpu_upload(g, dout, n * 4);
        vkg_tensor tout = vkg_gpu_poisoned(g, n), trstd = vkg_gpu_poisoned(g, rows * hk);
        vkg_tensor tdx[2], tdqw[2], tdkw[2];
        for (int k = 0; k < 2; k++) {
            tdx[k] = vkg_gpu_upload(g, dx, n * 4);
            tdqw[k] = vkg_gpu_upload(g, dqw, D * 4), tdkw[k] = vkg_gpu_upload(g, dkw, D * 4);
        }
        reference(s, out, rstd, x, qw, kw, dx, dqw, dkw, dout);
        VKG_ASSERT_OK(vkg_op_qknorm_fwd(g->cmd, tout, trstd, tx, tqw, tkw, s->B, s->T, s->NH,
                                        s->NKV, s->D, 1e-6f));
        vkg_gpu_run(g);
        for (int k = 0; k < 2; k++)
            VKG_ASSERT_OK(vkg_op_qknorm_bwd(g->cmd, tdx[k], tdqw[k], tdkw[k], td, tx, tqw, tkw,
                                            trstd, s->B, s->T, s->NH, s->NKV, s->D));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "qknorm_fwd out", tout, out, n);
        vkg_gpu_expect_ref(g, "qknorm_fwd rstd", trstd, rstd, rows * hk);
        vkg_gpu_download(g, tout, got, n * 4);
        for (size_t p = 0; p < rows; p++) {
            size_t W = n / rows, v0 = hk * D;
            if (memcmp(got + p * W + v0, x + p * W + v0, (W - v0) * 4))
                fail_msg("qknorm_fwd: the v heads of position row %zu are not qkv's", p);
        }
        vkg_gpu_expect_ref(g, "qknorm_bwd dqkv", tdx[0], dx, n);
        vkg_gpu_expect_ref(g, "qknorm_bwd dq_weight", tdqw[0], dqw, D);
        vkg_gpu_expect_ref(g, "qknorm_bwd dk_weight", tdkw[0], dkw, D);
        llama_expect_words(g, "qknorm_bwd dqkv, run twice", tdx[0], tdx[1], n);
        llama_expect_words(g, "qknorm_bwd dq_weight, run twice", tdqw[0], tdqw[1], D);
        llama_expect_words(g, "qknorm_bwd dk_weight, run twice", tdkw[0], tdkw[1], D);
        free(x), free(qw), free(kw), free(dout), free(dx), free(dqw), free(dkw), free(out);
        free(rstd), free(got);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &own));
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 2, T = 3, NH = 2, NKV = 1, D = 6, N = B * T * (NH + 2 * NKV) * D };
    vkg_tensor x = vkg_gpu_poisoned(g, N), short_x = vkg_gpu_poisoned(g, N - 1);
    vkg_tensor rs = vkg_gpu_poisoned(g, B * T * (NH + NKV));
    vkg_tensor short_rs = vkg_gpu_poisoned(g, B * T * (NH + NKV) - 1);
    vkg_tensor w = vkg_gpu_poisoned(g, D), short_w = vkg_gpu_poisoned(g, D - 1);
    vkg_tensor x16 = vkg_gpu_bf16_poisoned(g, N);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_qknorm_fwd(c, short_x, rs, x, w, w, B, T, NH, NKV, D, 1e-6f),
                       "qknorm_fwd: tensor out holds 143 elements, the shape needs 144");
    vkg_expect_invalid(vkg_op_qknorm_fwd(c, x, short_rs, x, w, w, B, T, NH, NKV, D, 1e-6f),
                       "qknorm_fwd: tensor rstd");
    vkg_expect_invalid(vkg_op_qknorm_fwd(c, x, rs, x16, w, w, B, T, NH, NKV, D, 1e-6f),
                       "qknorm_fwd: tensor qkv");
    vkg_expect_invalid(vkg_op_qknorm_fwd(c, x, rs, x, w, short_w, B, T, NH, NKV, D, 1e-6f),
                       "qknorm_fwd: tensor k_weight");
    vkg_expect_invalid(vkg_op_qknorm_fwd(c, x, rs, x, w, w, B, T, NH, NKV, D, -1.0f),
                       "qknorm_fwd: eps must be positive");
    vkg_expect_invalid(vkg_op_qknorm_fwd(c, x, rs, x, w, w, B, T, 0, NKV, D, 1e-6f),
                       "qknorm_fwd: B, T, NH, NKV and D must be positive");
    vkg_expect_invalid(vkg_op_qknorm_bwd(c, x, w, short_w, x, x, w, w, rs, B, T, NH, NKV, D),
                       "qknorm_bwd: tensor dk_weight");
    vkg_expect_invalid(vkg_op_qknorm_bwd(c, x, w, w, short_x, x, w, w, rs, B, T, NH, NKV, D),
                       "qknorm_bwd: tensor dout");
    vkg_expect_invalid(vkg_op_qknorm_bwd(c, x, w, w, x, x, w, w, short_rs, B, T, NH, NKV, D),
                       "qknorm_bwd: tensor rstd");
    vkg__op_set_max_elems(N - 1);
    vkg_status st = vkg_op_qknorm_fwd(c, x, rs, x, w, w, B, T, NH, NKV, D, 1e-6f);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "qknorm_fwd");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_qknorm, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
