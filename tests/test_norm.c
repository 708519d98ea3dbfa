/* GPU tests of the deterministic sum of squares (src/ops/norm.c, shaders sumsq_*.comp) against
 * the CPU reference vkg_ref_sumsq (accumulated in double).
 *
 * Bound: the result within relative error VKG_TEST_REL_BOUND = 1e-5 of the reference (for one
 * number the relative L2 error is |gpu - ref| / |ref|), finite. The result and the scratch
 * partials start as NaN so an unwritten partial fails. Sizes: 1, odd sizes, several million
 * elements, tensors given as views at unaligned offsets, several tensors (one empty) summed in one
 * call, and accumulation into an existing value. A replay of the recorded list and a second,
 * separate recording must give the same result bit for bit; so must the two stages recorded
 * alone, the partials computed in slices.
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
#include "ops/ops.h"
#include "ref/ref.h"
#include "testutil.h"

#define MAX_TENSORS 4

typedef struct sumsq_case {
    const char *name;
    int count;
    size_t n[MAX_TENSORS];
    float range;    /* values uniform in [-range, range) */
    int accumulate; /* start out[0] at START and add to it */
} sumsq_case;

#define START 2.5f

static float read_one(vkg_gpu *g, vkg_tensor t)
{
    float x;
    vkg_gpu_download(g, t, &x, sizeof x);
    return x;
}

static void run_case(vkg_gpu *g, sumsq_case k, uint64_t seed)
{
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, seed);
    vkg_tensor xs[MAX_TENSORS];
    double ref = k.accumulate ? START : 0.0;
    for (int i = 0; i < k.count; i++) {
        float *x = vkg_test_alloc(k.n[i] + 3);
        vkg_test_fill_uniform(&rng, x, k.n[i] + 3, -k.range, k.range);
        /* The tensor is a view 3 floats into its allocation: offsets need not be aligned. */
        vkg_tensor whole = vkg_gpu_upload(g, x, (k.n[i] + 3) * sizeof(float));
        xs[i] = vkg_tensor_view(whole, 3 * sizeof(float), k.n[i] * sizeof(float));
        ref += vkg_ref_sumsq(x + 3, k.n[i]);
        free(x);
    }
    size_t ns = vkg_op_sumsq_scratch_elems(k.n, k.count);
    vkg_tensor scratch = vkg_gpu_poisoned(g, ns);
    vkg_tensor out =
        k.accumulate ? vkg_gpu_upload(g, &(float){START}, sizeof(float)) : vkg_gpu_poisoned(g, 1);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_sumsq(g->cmd, out, xs, k.n, k.count, scratch, k.accumulate));
    VKG_ASSERT_OK(vkg_cmd_end(g->cmd)); /* kept for the replay below */
    VKG_ASSERT_OK(vkg_cmd_run(g->cmd, 0));

    float ref_f = (float)ref;
    vkg_gpu_expect(g, k.name, out, &ref_f, 1, VKG_TEST_REL_BOUND);
    float got = read_one(g, out);
    printf("    %-40s %zu partials  rel err %.3g\n", k.name, ns, fabs((double)got - ref) / ref);

    /* Replay: the same result bit for bit (reset out first when accumulating). */
    if (k.accumulate)
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, out, 0, &(float){START}, sizeof(float)));
    VKG_ASSERT_OK(vkg_cmd_run(g->cmd, 0));
    float again = read_one(g, out);
    if (memcmp(&again, &got, sizeof got) != 0)
        fail_msg("%s: replay gave %.9g, first run %.9g", k.name, (double)again, (double)got);

    /* A separate recording into a fresh output and scratch: bit for bit again. */
    vkg_tensor out2 =
        k.accumulate ? vkg_gpu_upload(g, &(float){START}, sizeof(float)) : vkg_gpu_poisoned(g, 1);
    vkg_tensor scratch2 = vkg_gpu_poisoned(g, ns);
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
    VKG_ASSERT_OK(vkg_op_sumsq(g->cmd, out2, xs, k.n, k.count, scratch2, k.accumulate));
    vkg_gpu_run(g);
    again = read_one(g, out2);
    if (memcmp(&again, &got, sizeof got) != 0)
        fail_msg("%s: second recording gave %.9g, first %.9g", k.name, (double)again, (double)got);
}

static void test_single_tensors(void **state)
{
    vkg_gpu *g = *state;
    run_case(g, (sumsq_case){"n=1", 1, {1}, 3.0f, 0}, 1);
    run_case(g, (sumsq_case){"n=1000", 1, {1000}, 1.0f, 0}, 2);
    run_case(g, (sumsq_case){"n=1000003", 1, {1000003}, 1.0f, 0}, 3);
    run_case(g, (sumsq_case){"n=77777, values up to 100", 1, {77777}, 100.0f, 0}, 4);
}

static void test_several_million(void **state)
{
    vkg_gpu *g = *state;
    run_case(g, (sumsq_case){"n=6000011", 1, {6000011}, 1.0f, 0}, 5);
}

static void test_several_tensors_and_accumulate(void **state)
{
    vkg_gpu *g = *state;
    run_case(g, (sumsq_case){"4 tensors (17, 300001, 0, 1)", 4, {17, 300001, 0, 1}, 1.0f, 0}, 6);
    run_case(g, (sumsq_case){"2 tensors added to 2.5", 2, {4099, 123457}, 0.5f, 1}, 7);
    run_case(g, (sumsq_case){"1 tensor of 5 added to 2.5", 1, {5}, 0.5f, 1}, 8);
}

/* The two stages recorded alone, as a sharded optimizer runs them: the partition has as many
 * partials as vkg_op_sumsq's scratch, in contiguous ascending chunks covering the tensor;
 * partials computed in three slices (as three ranks would, one of them empty) into their places
 * and then added by the final stage give vkg_op_sumsq's result bit for bit, under the device's
 * own workgroup size and under others (the partition is not the tuning's: ranks on devices of
 * other tunings shard a norm at the same partials). */
static void test_stages_alone(void **state)
{
    vkg_gpu *g = *state;
    const size_t sizes[] = {5, 1000003, 77777};
    vkg_device_tuning own = vkg_device_tuning_get(g->dev), tu = own;
    const uint32_t wgs[] = {own.sumsq_wg, 32, 128};
    for (size_t k = 0; k < 3 * sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k / 3];
        tu.sumsq_wg = wgs[k % 3];
        VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &tu));
        vkg_test_rng rng;
        vkg_test_rng_seed(&rng, 40 + k);
        float *x = vkg_test_alloc(n);
        vkg_test_fill_uniform(&rng, x, n, -2.0f, 2.0f);
        vkg_tensor xt = vkg_gpu_upload(g, x, n * sizeof(float));
        free(x);
        size_t P = vkg_op_sumsq_partition(n, NULL);
        size_t *b = malloc((P + 1) * sizeof *b);
        assert_int_equal(vkg_op_sumsq_partition(n, b), P);
        assert_int_equal(P, vkg_op_sumsq_scratch_elems(&n, 1));
        assert_true(b[0] == 0 && b[P] == n);
        for (size_t p = 0; p < P; p++)
            assert_true(b[p] < b[p + 1]);
        free(b);
        vkg_tensor out = vkg_gpu_poisoned(g, 1), scratch = vkg_gpu_poisoned(g, P);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        VKG_ASSERT_OK(vkg_op_sumsq(g->cmd, out, &xt, &n, 1, scratch, 0));
        vkg_gpu_run(g);
        float whole = read_one(g, out);
        size_t cut[4] = {0, P / 3, P / 3, P}; /* the middle slice is empty */
        vkg_tensor parts = vkg_gpu_poisoned(g, P), out2 = vkg_gpu_poisoned(g, 1);
        VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
        for (int s = 0; s < 3; s++)
            VKG_ASSERT_OK(vkg_op_sumsq_partials(
                g->cmd, vkg_tensor_view(parts, cut[s] * 4, (cut[s + 1] - cut[s]) * 4), xt, n,
                cut[s], cut[s + 1] - cut[s]));
        vkg_cmd_barrier(g->cmd);
        VKG_ASSERT_OK(vkg_op_sumsq_final(g->cmd, out2, parts, P, 0));
        vkg_gpu_run(g);
        float sliced = read_one(g, out2);
        printf("    n=%zu, workgroups of %u: %zu partials, whole %.9g, in slices %.9g\n", n,
               tu.sumsq_wg, P, (double)whole, (double)sliced);
        if (memcmp(&whole, &sliced, sizeof whole))
            fail_msg("n=%zu, workgroups of %u: the stages alone give %.9g, vkg_op_sumsq %.9g", n,
                     tu.sumsq_wg, (double)sliced, (double)whole);
    }
    VKG_ASSERT_OK(vkg_device_tuning_set(g->dev, &own));
}

static void test_bad_arguments(void **state)
{
    vkg_gpu *g = *state;
    vkg_cmd *c = g->cmd;
    vkg_tensor xs[2] = {vkg_gpu_poisoned(g, 100), vkg_gpu_poisoned(g, 10)};
    size_t ns[2] = {100, 11};
    size_t ok_ns[2] = {100, 10};
    vkg_tensor out = vkg_gpu_poisoned(g, 1), none = vkg_gpu_poisoned(g, 0);
    vkg_tensor scratch = vkg_gpu_poisoned(g, vkg_op_sumsq_scratch_elems(ok_ns, 2));
    vkg_expect_invalid(vkg_op_sumsq(c, out, xs, ns, 0, scratch, 0),
                       "sumsq: needs at least one tensor");
    vkg_expect_invalid(vkg_op_sumsq(c, out, xs, ns, 2, scratch, 0),
                       "sumsq: tensor xs[1] holds 10 elements, the shape needs 11");
    vkg_expect_invalid(vkg_op_sumsq(c, none, xs, ok_ns, 2, scratch, 0), "tensor out");
    vkg_expect_invalid(vkg_op_sumsq(c, out, xs, ok_ns, 2, none, 0), "tensor scratch");
    vkg_expect_invalid(vkg_op_sumsq_partials(c, scratch, xs[0], 100, 1, 1000),
                       "sumsq_partials: partial sums [1, 1001) asked of a tensor of 100 elements");
    vkg_expect_invalid(vkg_op_sumsq_final(c, none, scratch, 1, 0), "tensor out");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_tensors, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_several_million, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_several_tensors_and_accumulate, vkg_gpu_setup,
                                        vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_stages_alone, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, vkg_gpu_setup, vkg_gpu_teardown),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
