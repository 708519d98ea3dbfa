/* Tests of the encoder (src/ops/encoder.c): token + position embedding forward and backward
 * against the CPU reference (src/ref) on random tokens and weights: B=1/T=1, odd widths (13, 37),
 * a tiny vocabulary so that tokens repeat many times (the backward pass must sum repeated tokens),
 * more positions than one workgroup scans at once, and GPT-2's B=2, T=64, C=768. Every output
 * must be finite and within a relative L2 error ||gpu - ref|| / ||ref|| <= VKG_TEST_REL_BOUND
 * (1e-5). The forward output is poisoned with NaN first; dwte and dwpe start from random values
 * that the reference starts from too, so accumulating is checked against overwriting. The
 * backward pass must be bitwise reproducible, token ids outside the table must not be read, and
 * wrong sizes must be refused naming the tensor. The wpe half alone (vkg_op_encoder_bwd_wpe)
 * matches the reference too, and so do the token embedding alone (vkg_op_embed_fwd, against the
 * reference with a zero wpe) and wte's half alone (vkg_op_encoder_bwd_wte, bit for bit the full
 * pass's dwte). */
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
    int B, T, C, V, maxT;
} shape;

static const shape SHAPES[] = {
    {1, 1, 13, 7, 1},      {3, 5, 37, 11, 8},      {4, 33, 300, 3, 40},
    {3, 100, 24, 40, 100}, {2, 64, 768, 1000, 64},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static int32_t *random_tokens(vkg_test_rng *r, size_t n, int V)
{
    int32_t *t = malloc(n * sizeof *t);
    assert_non_null(t);
    vkg_test_fill_int(r, t, n, V);
    return t;
}

static void test_encoder_fwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 31);
    for (size_t s = 0; s < NSHAPES; s++) {
        shape h = SHAPES[s];
        size_t BT = (size_t)h.B * h.T, n = BT * h.C;
        print_message("  B=%d T=%d C=%d V=%d\n", h.B, h.T, h.C, h.V);
        int32_t *inp = random_tokens(&r, BT, h.V);
        float *wte = vkg_test_random(&r, (size_t)h.V * h.C, -1.0f, 1.0f);
        float *wpe = vkg_test_random(&r, (size_t)h.maxT * h.C, -1.0f, 1.0f);
        float *ref = vkg_test_alloc(n);
        vkg_ref_encoder_fwd(ref, inp, wte, wpe, h.B, h.T, h.C);
        vkg_tensor ti = vkg_gpu_upload(g, inp, BT * 4);
        vkg_tensor tte = vkg_gpu_upload(g, wte, (size_t)h.V * h.C * 4);
        vkg_tensor tpe = vkg_gpu_upload(g, wpe, (size_t)h.maxT * h.C * 4);
        vkg_tensor out = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_encoder_fwd(g->cmd, out, ti, tte, tpe, h.B, h.T, h.C));
        vkg_tensor out_nopos = vkg_gpu_poisoned(g, n);
        VKG_ASSERT_OK(vkg_op_embed_fwd(g->cmd, out_nopos, ti, tte, h.B, h.T, h.C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "encoder_fwd out", out, ref, n);
        memset(wpe, 0, (size_t)h.maxT * h.C * sizeof *wpe);
        vkg_ref_encoder_fwd(ref, inp, wte, wpe, h.B, h.T, h.C);
        vkg_gpu_expect_ref(g, "embed_fwd out", out_nopos, ref, n);
        free(inp);
        free(wte);
        free(wpe);
        free(ref);
    }
}

static void test_encoder_bwd(void **state)
{
    vkg_gpu *g = *state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 32);
    for (size_t s = 0; s < NSHAPES; s++) {
        shape h = SHAPES[s];
        size_t BT = (size_t)h.B * h.T, n = BT * h.C;
        size_t nte = (size_t)h.V * h.C, npe = (size_t)h.maxT * h.C;
        print_message("  B=%d T=%d C=%d V=%d\n", h.B, h.T, h.C, h.V);
        int32_t *inp = random_tokens(&r, BT, h.V);
        float *dout = vkg_test_random(&r, n, -1.0f, 1.0f);
        /* starting gradients about as large as what the pass adds */
        float *dwte = vkg_test_random(&r, nte, -2.0f, 2.0f);
        float *dwpe = vkg_test_random(&r, npe, -2.0f, 2.0f);
        vkg_tensor ti = vkg_gpu_upload(g, inp, BT * 4), td = vkg_gpu_upload(g, dout, n * 4);
        vkg_tensor tte[3], tpe[3];
        for (int k = 0; k < 3; k++)
            tte[k] = vkg_gpu_upload(g, dwte, nte * 4);
        for (int k = 0; k < 3; k++)
            tpe[k] = vkg_gpu_upload(g, dwpe, npe * 4);
        vkg_ref_encoder_bwd(dwte, dwpe, dout, inp, h.B, h.T, h.C);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        for (int k = 0; k < 2; k++)
            VKG_ASSERT_OK(vkg_op_encoder_bwd(g->cmd, tte[k], tpe[k], td, ti, h.B, h.T, h.C));
        VKG_ASSERT_OK(vkg_op_encoder_bwd_wpe(g->cmd, tpe[2], td, h.B, h.T, h.C));
        VKG_ASSERT_OK(vkg_op_encoder_bwd_wte(g->cmd, tte[2], td, ti, h.B, h.T, h.C));
        vkg_gpu_run(g);
        vkg_gpu_expect_ref(g, "encoder_bwd dwte", tte[0], dwte, nte);
        vkg_gpu_expect_ref(g, "encoder_bwd dwpe", tpe[0], dwpe, npe);
        vkg_gpu_expect_ref(g, "encoder_bwd_wpe dwpe", tpe[2], dwpe, npe);
        /* the second run from the same inputs is bitwise identical */
        size_t most = nte > npe ? nte : npe;
        float *u = vkg_test_alloc(most), *v = vkg_test_alloc(most);
        vkg_gpu_download(g, tte[0], u, nte * 4);
        vkg_gpu_download(g, tte[1], v, nte * 4);
        assert_memory_equal(u, v, nte * 4);
        vkg_gpu_download(g, tte[2], v, nte * 4); /* wte's half alone: the same bits */
        assert_memory_equal(u, v, nte * 4);
        vkg_gpu_download(g, tpe[0], u, npe * 4);
        vkg_gpu_download(g, tpe[1], v, npe * 4);
        assert_memory_equal(u, v, npe * 4);
        free(u);
        free(v);
        free(inp);
        free(dout);
        free(dwte);
        free(dwpe);
    }
}

/* More positions than one dispatch has workgroups (65535): the position loop must cover the
 * rest. (Forward only: the dwte pass scans all earlier positions for every position.) */
static void test_positions_beyond_the_grid(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 32800, T = 2, C = 3, V = 5 };
    size_t BT = (size_t)B * T, n = BT * C;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 34);
    int32_t *inp = random_tokens(&r, BT, V);
    float wte[V * C], wpe[T * C], *ref = vkg_test_alloc(n);
    vkg_test_fill_uniform(&r, wte, V * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, wpe, T * C, -1.0f, 1.0f);
    vkg_ref_encoder_fwd(ref, inp, wte, wpe, B, T, C);
    vkg_tensor ti = vkg_gpu_upload(g, inp, BT * 4), tte = vkg_gpu_upload(g, wte, sizeof wte);
    vkg_tensor tpe = vkg_gpu_upload(g, wpe, sizeof wpe), out = vkg_gpu_poisoned(g, n);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_encoder_fwd(g->cmd, out, ti, tte, tpe, B, T, C));
    vkg_gpu_run(g);
    vkg_gpu_expect_ref(g, "encoder_fwd out", out, ref, n);
    free(inp);
    free(ref);
}

/* Token ids outside [0, V) (V from the size of wte): a NaN row forward, no gradient backward,
 * every other row exact. */
static void test_out_of_range_tokens(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 2, T = 3, C = 5, V = 4 };
    int32_t inp[B * T] = {1, 4, 3, -1, 1, 0};
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 33);
    float wte[V * C], wpe[T * C], dout[B * T * C], dwte[V * C] = {0}, dwpe[T * C] = {0};
    vkg_test_fill_uniform(&r, wte, V * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, wpe, T * C, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, dout, B * T * C, -1.0f, 1.0f);
    vkg_tensor ti = vkg_gpu_upload(g, inp, sizeof inp), tte = vkg_gpu_upload(g, wte, sizeof wte);
    vkg_tensor tpe = vkg_gpu_upload(g, wpe, sizeof wpe), td = vkg_gpu_upload(g, dout, sizeof dout);
    vkg_tensor out = vkg_gpu_poisoned(g, B * T * C);
    vkg_tensor tdte = vkg_gpu_upload(g, dwte, sizeof dwte);
    vkg_tensor tdpe = vkg_gpu_upload(g, dwpe, sizeof dwpe);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_encoder_fwd(g->cmd, out, ti, tte, tpe, B, T, C));
    VKG_ASSERT_OK(vkg_op_encoder_bwd(g->cmd, tdte, tdpe, td, ti, B, T, C));
    vkg_gpu_run(g);
    float got[B * T * C], gte[V * C];
    vkg_gpu_download(g, out, got, sizeof got);
    vkg_gpu_download(g, tdte, gte, sizeof gte);
    for (int bt = 0; bt < B * T; bt++) {
        for (int c = 0; c < C; c++) {
            float o = got[bt * C + c];
            if (inp[bt] < 0 || inp[bt] >= V)
                assert_true(isnan(o));
            else
                assert_true(o == wte[inp[bt] * C + c] + wpe[(bt % T) * C + c]);
        }
    }
    /* dwte: the reference on the valid positions only (invalid rows of dout zeroed) */
    int32_t inp_ok[B * T];
    for (int bt = 0; bt < B * T; bt++) {
        inp_ok[bt] = inp[bt] < 0 || inp[bt] >= V ? 0 : inp[bt];
        if (inp_ok[bt] != inp[bt])
            memset(dout + bt * C, 0, C * sizeof(float));
    }
    float ref_te[V * C] = {0};
    vkg_ref_encoder_bwd(ref_te, dwpe, dout, inp_ok, B, T, C);
    assert_memory_equal(gte, ref_te, sizeof gte);
}

static void test_wrong_sizes_are_refused(void **state)
{
    vkg_gpu *g = *state;
    enum { B = 2, T = 3, C = 4 };
    vkg_tensor act = vkg_gpu_poisoned(g, B * T * C), act_short = vkg_gpu_poisoned(g, B * T * C - 1);
    vkg_tensor tok = vkg_gpu_upload(g, NULL, B * T * 4), tok_short = vkg_gpu_upload(g, NULL, 4);
    vkg_tensor pos = vkg_gpu_poisoned(g, T * C), pos_short = vkg_gpu_poisoned(g, T * C - 1);
    vkg_tensor table = vkg_gpu_poisoned(g, 10 * C), table_short = vkg_gpu_poisoned(g, C - 1);
    vkg_cmd *c = g->cmd;
    vkg_expect_invalid(vkg_op_encoder_fwd(c, act_short, tok, table, pos, B, T, C),
                       "encoder_fwd: tensor out holds 23 elements, the shape needs 24");
    vkg_expect_invalid(vkg_op_encoder_fwd(c, act, tok_short, table, pos, B, T, C),
                       "encoder_fwd: tensor inp");
    vkg_expect_invalid(vkg_op_encoder_fwd(c, act, tok, table_short, pos, B, T, C),
                       "encoder_fwd: tensor wte");
    vkg_expect_invalid(vkg_op_encoder_fwd(c, act, tok, table, pos_short, B, T, C),
                       "encoder_fwd: tensor wpe");
    vkg_expect_invalid(vkg_op_encoder_fwd(c, act, tok, table, pos, B, 0, C),
                       "encoder_fwd: B, T and C must be positive");
    /* A row longer than the shader index limit (C - 1 here, in place of 2^31 - 1) is refused. */
    vkg__op_set_max_elems(C - 1);
    vkg_status st = vkg_op_encoder_fwd(c, act, tok, table, pos, B, T, C);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "encoder_fwd: one row of C=4 elements is more than the 3");
    vkg_expect_invalid(vkg_op_encoder_bwd(c, table_short, pos, act, tok, B, T, C),
                       "encoder_bwd: tensor dwte");
    vkg_expect_invalid(vkg_op_encoder_bwd(c, table, pos_short, act, tok, B, T, C),
                       "encoder_bwd: tensor dwpe");
    vkg_expect_invalid(vkg_op_encoder_bwd(c, table, pos, act_short, tok, B, T, C),
                       "encoder_bwd: tensor dout");
    vkg_expect_invalid(vkg_op_encoder_bwd(c, table, pos, act, tok_short, B, T, C),
                       "encoder_bwd: tensor inp");
    vkg_expect_invalid(vkg_op_encoder_bwd(c, table, pos, act, tok, -1, T, C),
                       "encoder_bwd: B, T and C must be positive");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_encoder_fwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_encoder_bwd, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_positions_beyond_the_grid, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_out_of_range_tokens, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_sizes_are_refused, vkg_gpu_setup,
                                        vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
