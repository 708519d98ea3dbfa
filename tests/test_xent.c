/* GPU tests of the fused softmax + cross-entropy (src/ops/xent.c, shaders/xent_fwd_bwd.comp)
 * against the CPU reference vkg_ref_xent_fwd_bwd.
 *
 * Bound: losses and dlogits within relative L2 error VKG_TEST_REL_BOUND = 1e-5 of the reference,
 * every element finite. Outputs start as NaN so an unwritten element fails, and the padding
 * columns of the logits are NaN so reading one fails too; padding columns of dlogits must be
 * exactly 0. The losses-only (evaluation) variant must give the same losses bit for bit and leave
 * the logits untouched; the in-place variant (dlogits = logits) must give the same dlogits bit for
 * bit; a replay of the command list must reproduce every output bit for bit. Shapes cover N = 1,
 * V = 1, V = Vp, V not a multiple of the workgroup, Vp = V rounded up to 128, GPT-2's
 * N = 256, V = 50257, Vp = 50304, and N > 65535 (a 2-D grid).
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

#include "gpu_fixture.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

typedef struct xent_shape {
    int N, V, Vp;
    float spread; /* logits uniform in [-spread, spread) */
    float dloss;
} xent_shape;

/* Download n floats of t, compare with ref at the bound (vkg_gpu_expect) and print the error. */
static float *expect_download(vkg_gpu *g, const char *what, vkg_tensor t, const float *ref,
                              size_t n)
{
    vkg_gpu_expect_ref(g, what, t, ref, n);
    float *got = vkg_test_alloc(n);
    vkg_gpu_download(g, t, got, n * sizeof *got);
    return got;
}

static void check_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    if (memcmp(a, b, bytes) != 0)
        fail_msg("%s: not bitwise identical", what);
}

static void run_shape(vkg_gpu *g, xent_shape s, uint64_t seed)
{
    size_t N = (size_t)s.N, V = (size_t)s.V, Vp = (size_t)s.Vp, nl = N * Vp;
    printf("  N=%d V=%d Vp=%d\n", s.N, s.V, s.Vp);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    float *logits = vkg_test_alloc(nl), *ref_d = vkg_test_alloc(nl), *ref_l = vkg_test_alloc(N);
    int32_t *targets = malloc(N * sizeof *targets);
    assert_non_null(targets);
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, seed);
    vkg_test_fill_uniform(&rng, logits, nl, -s.spread, s.spread);
    for (size_t i = 0; i < N; i++)
        for (size_t c = V; c < Vp; c++)
            logits[i * Vp + c] = NAN; /* padding: never read */
    vkg_test_fill_int(&rng, targets, N, s.V);
    vkg_ref_xent_fwd_bwd(ref_l, ref_d, logits, targets, s.N, s.V, s.Vp, s.dloss);

    vkg_tensor tl = vkg_gpu_upload(g, logits, nl * sizeof(float));
    vkg_tensor tinplace = vkg_gpu_upload(g, logits, nl * sizeof(float));
    vkg_tensor tt = vkg_gpu_upload(g, targets, N * sizeof(int32_t));
    vkg_tensor losses = vkg_gpu_poisoned(g, N), losses_eval = vkg_gpu_poisoned(g, N);
    vkg_tensor losses_inplace = vkg_gpu_poisoned(g, N), dl = vkg_gpu_poisoned(g, nl);
    VKG_ASSERT_OK(vkg_op_xent_fwd_bwd(g->cmd, losses, &dl, tl, tt, s.N, s.V, s.Vp, s.dloss));
    VKG_ASSERT_OK(vkg_op_xent_fwd_bwd(g->cmd, losses_eval, NULL, tl, tt, s.N, s.V, s.Vp, s.dloss));
    VKG_ASSERT_OK(vkg_op_xent_fwd_bwd(g->cmd, losses_inplace, &tinplace, tinplace, tt, s.N, s.V,
                                      s.Vp, s.dloss));
    VKG_ASSERT_OK(vkg_cmd_end(g->cmd)); /* kept for the replay below */
    VKG_ASSERT_OK(vkg_cmd_run(g->cmd, 0));

    float *got_l = expect_download(g, "losses", losses, ref_l, N);
    float *got_d = expect_download(g, "dlogits", dl, ref_d, nl);
    for (size_t i = 0; i < N; i++)
        for (size_t c = V; c < Vp; c++)
            if (got_d[i * Vp + c] != 0.0f || signbit(got_d[i * Vp + c]))
                fail_msg("dlogits[%zu, %zu] (padding) = %g, expected exactly 0", i, c,
                         (double)got_d[i * Vp + c]);

    float *other = vkg_test_alloc(nl);
    vkg_gpu_download(g, losses_eval, other, N * sizeof(float));
    check_bits("losses of the losses-only variant", other, got_l, N * sizeof(float));
    vkg_gpu_download(g, tl, other, nl * sizeof(float));
    check_bits("logits after the out-of-place and losses-only runs", other, logits,
               nl * sizeof(float));
    vkg_gpu_download(g, losses_inplace, other, N * sizeof(float));
    check_bits("losses of the in-place variant", other, got_l, N * sizeof(float));
    vkg_gpu_download(g, tinplace, other, nl * sizeof(float));
    check_bits("dlogits computed in place", other, got_d, nl * sizeof(float));

    /* Replay (small shapes, to keep the test short on CPU devices): the first two dispatches read
     * unchanged logits and must repeat bit for bit. */
    if (nl <= ((size_t)1 << 20)) {
        VKG_ASSERT_OK(vkg_cmd_run(g->cmd, 0));
        vkg_gpu_download(g, losses, other, N * sizeof(float));
        check_bits("losses on replay", other, got_l, N * sizeof(float));
        vkg_gpu_download(g, dl, other, nl * sizeof(float));
        check_bits("dlogits on replay", other, got_d, nl * sizeof(float));
    }

    free(other);
    free(got_d);
    free(got_l);
    free(targets);
    free(ref_l);
    free(ref_d);
    free(logits);
}

static void test_small_shapes(void **state)
{
    vkg_gpu *g = *state;
    run_shape(g, (xent_shape){.N = 1, .V = 1, .Vp = 128, .spread = 3.0f, .dloss = 1.0f}, 1);
    run_shape(g, (xent_shape){.N = 1, .V = 1, .Vp = 1, .spread = 3.0f, .dloss = 0.5f}, 2);
    run_shape(g, (xent_shape){.N = 7, .V = 77, .Vp = 77, .spread = 4.0f, .dloss = 0.25f}, 3);
    run_shape(g, (xent_shape){.N = 5, .V = 1000, .Vp = 1024, .spread = 30.0f, .dloss = 0.2f}, 4);
    run_shape(g, (xent_shape){.N = 3, .V = 2113, .Vp = 2176, .spread = 8.0f, .dloss = 1.0f / 3}, 5);
}

static void test_gpt2_vocab(void **state)
{
    vkg_gpu *g = *state;
    run_shape(
        g, (xent_shape){.N = 256, .V = 50257, .Vp = 50304, .spread = 6.0f, .dloss = 1.0f / 256}, 6);
}

static void test_many_rows_2d_grid(void **state)
{
    vkg_gpu *g = *state;
    run_shape(g, (xent_shape){.N = 70001, .V = 3, .Vp = 128, .spread = 2.0f, .dloss = 1e-3f}, 7);
}

/* The checker must bite: a reference gradient moved by one target's worth fails the comparison. */
static void test_comparison_bites(void **state)
{
    (void)state;
    enum { N = 4, V = 50, Vp = 64 };
    float logits[N * Vp], d[N * Vp], d_bad[N * Vp], l[N];
    int32_t targets[N] = {3, 0, 49, 17};
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, 8);
    vkg_test_fill_uniform(&rng, logits, N * Vp, -2.0f, 2.0f);
    vkg_ref_xent_fwd_bwd(l, d, logits, targets, N, V, Vp, 1.0f);
    targets[2] = 48;
    vkg_ref_xent_fwd_bwd(l, d_bad, logits, targets, N, V, Vp, 1.0f);
    vkg_test_cmp cmp;
    assert_false(vkg_test_compare("dlogits with a wrong target", d_bad, d, N * Vp,
                                  VKG_TEST_REL_BOUND, &cmp));
}

static void test_bad_arguments(void **state)
{
    vkg_gpu *g = *state;
    vkg_cmd *c = g->cmd;
    vkg_tensor logits = vkg_gpu_poisoned(g, 4 * 128), losses = vkg_gpu_poisoned(g, 4);
    vkg_tensor targets = vkg_gpu_upload(g, NULL, 4 * sizeof(int32_t));
    vkg_tensor small = vkg_gpu_poisoned(g, 3);
    vkg_tensor shifted = vkg_tensor_view(logits, 4, 4 * 127 * sizeof(float));
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, NULL, logits, targets, 0, 100, 128, 1.0f),
                       "xent_fwd_bwd: N, V and Vp must be positive");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, NULL, logits, targets, 4, 0, 128, 1.0f),
                       "must be positive");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, NULL, logits, targets, 4, 129, 128, 1.0f),
                       "V=129 exceeds the padded vocabulary Vp=128");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, NULL, logits, targets, 5, 100, 128, 1.0f),
                       "tensor logits holds 512 elements");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, small, NULL, logits, targets, 4, 100, 128, 1.0f),
                       "tensor losses");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, NULL, logits, small, 4, 100, 128, 1.0f),
                       "tensor targets");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, &small, logits, targets, 4, 100, 128, 1.0f),
                       "tensor dlogits");
    vkg_expect_invalid(vkg_op_xent_fwd_bwd(c, losses, &shifted, logits, targets, 3, 100, 128, 1.0f),
                       "dlogits partly overlaps logits");
    /* More rows than one dispatch indexes are split; one row longer than the limit (127 here, in
     * place of 2^31 - 1) is refused, naming the op and Vp. */
    vkg__op_set_max_elems(127);
    vkg_status st = vkg_op_xent_fwd_bwd(c, losses, NULL, logits, targets, 4, 100, 128, 1.0f);
    vkg__op_set_max_elems(0);
    vkg_expect_invalid(st, "xent_fwd_bwd: one row of logits (Vp=128) is more than the 127");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_shapes, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_gpt2_vocab, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_many_rows_2d_grid, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_comparison_bites),
        cmocka_unit_test_setup_teardown(test_bad_arguments, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
