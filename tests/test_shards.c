/* ZeRO-1's cut of a model part into shards (src/parallel/shards.c), without a device, against the
 * contract in shards.h written out here: every shard non-empty and contiguous, the shards after
 * the leading cuts each a run of whole partial sums of the norm ([P k / K, P (k + 1) / K)) that
 * starts and ends where those partial sums do, the leading shards holding none; without leading
 * cuts exactly vkg_strategy_zero_plan's shards of a whole model; and for a pipeline's first and
 * last stage (the last one's norm past its wte copy, cut at the first stage's cuts inside wte)
 * member r of both stages holding the same piece of wte, for GPT-2 124M's split over 2 stages and
 * 2 to 8 data-parallel ranks, where wte (38.6 M floats) holds several of the first stage's cuts.
 * Also the refusals: more shards than partial sums, a leading cut past the norm's start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "optim/adamw.h"
#include "parallel/shards.h"
#include "parallel/strategy.h"

/* Checks one cut of n parameters (norm from `from`, nlead leading cuts) against the contract. */
static void check_cut(size_t n, size_t from, int N, int nlead, const size_t *b, const size_t *pb)
{
    size_t P = vkg_adamw_norm_partition(n - from, NULL);
    size_t *part = malloc((P + 1) * sizeof *part);
    assert_non_null(part);
    vkg_adamw_norm_partition(n - from, part);
    int K = N - nlead;
    assert_int_equal(b[0], 0);
    assert_int_equal(b[N], n);
    for (int q = 0; q < N; q++) {
        assert_true(b[q] < b[q + 1]); /* non-empty, in order */
        if (q < nlead) {              /* a leading shard: inside the tied copy, no partial sums */
            assert_true(b[q + 1] < from);
            assert_int_equal(pb[q], 0);
            assert_int_equal(pb[q + 1], 0);
            continue;
        }
        int k = q - nlead;
        assert_true(pb[q] < pb[q + 1]); /* at least one partial sum */
        if (!from) {                    /* evenly by count */
            assert_int_equal(pb[q], P * (size_t)k / (size_t)K);
            assert_int_equal(pb[q + 1], P * (size_t)(k + 1) / (size_t)K);
        } else if (q + 1 < N) { /* the first partial sum at or past an even share */
            size_t start = nlead ? b[nlead] : 0;
            size_t target = start + (n - start) / (size_t)K * (size_t)(k + 1);
            assert_true(from + part[pb[q + 1]] >= target || pb[q + 1] == P - (size_t)(K - k - 1));
            assert_true(pb[q + 1] == pb[q] + 1 || from + part[pb[q + 1] - 1] < target);
        }
        /* the shard's partial sums lie inside it: it ends where its last one ends */
        assert_int_equal(b[q + 1], from + part[pb[q + 1]]);
        assert_true(b[q] <= from + part[pb[q]]);
    }
    free(part);
}

static void test_whole_model(void **state)
{
    (void)state;
    vkg_model_config cfg = {.max_seq_len = 1024,
                            .vocab_size = 50257,
                            .padded_vocab_size = 50304,
                            .num_layers = 12,
                            .num_heads = 12,
                            .channels = 768};
    size_t n = vkg_model_num_params(&cfg);
    for (int N = 1; N <= 8; N++) {
        size_t b[9], pb[9];
        vkg_zero_shard sh[8];
        assert_int_equal(vkg__shards_cut(n, 0, N, NULL, 0, b, pb), VKG_OK);
        check_cut(n, 0, N, 0, b, pb);
        assert_int_equal(vkg_strategy_zero_plan(&cfg, N, sh), VKG_OK);
        for (int q = 0; q < N; q++) {
            assert_int_equal(sh[q].first, b[q]);
            assert_int_equal(sh[q].count, b[q + 1] - b[q]);
            assert_int_equal(sh[q].part_first, pb[q]);
            assert_int_equal(sh[q].part_count, pb[q + 1] - pb[q]);
        }
    }
}

/* GPT-2 124M over 2 stages of 6 layers: the first stage wte, wpe and 6 blocks, the last 6 blocks,
 * the final layer norm and the copy of wte (wte first in both parts). */
static void test_tied_stages(void **state)
{
    (void)state;
    size_t C = 768, W = 50304 * C, block = 12 * C * C + 13 * C;
    size_t n0 = W + 1024 * C + 6 * block, n1 = W + 6 * block + 2 * C;
    int with_lead = 0;
    for (int N = 2; N <= 8; N++) {
        size_t b0[9], p0[9], b1[9], p1[9], lead[8];
        assert_int_equal(vkg__shards_cut(n0, 0, N, NULL, 0, b0, p0), VKG_OK);
        check_cut(n0, 0, N, 0, b0, p0);
        int nlead = 0; /* the first stage's cuts inside wte, as pp_strategy.c hands them over */
        while (nlead < N - 1 && b0[nlead + 1] < W)
            lead[nlead] = b0[nlead + 1], nlead++;
        with_lead += nlead > 0;
        assert_int_equal(vkg__shards_cut(n1, W, N, lead, nlead, b1, p1), VKG_OK);
        check_cut(n1, W, N, nlead, b1, p1);
        for (int r = 0; r < N; r++) { /* member r's piece of wte: the same on both stages */
            vkg_shards z0 = {.N = N, .me = r, .bounds = b0}, z1 = {.N = N, .me = r, .bounds = b1};
            size_t lo0, hi0, lo1, hi1;
            vkg__shards_tied(&z0, W, &lo0, &hi0);
            vkg__shards_tied(&z1, W, &lo1, &hi1);
            assert_int_equal(lo0, lo1);
            assert_int_equal(hi0, hi1);
        }
        fprintf(stderr, "  dp %d: %d of the first stage's cuts inside wte; last stage's shards", N,
                nlead);
        for (int q = 0; q < N; q++)
            fprintf(stderr, " %.1fM", (double)(b1[q + 1] - b1[q]) / 1e6);
        fprintf(stderr, "\n");
    }
    assert_true(with_lead >= 5); /* the leading cuts were exercised */
}

static void test_refusals(void **state)
{
    (void)state;
    size_t b[9], pb[9], lead[1] = {500};
    size_t P = vkg_adamw_norm_partition(1000, NULL);
    assert_int_equal(vkg__shards_cut(1000, 0, (int)P + 1, NULL, 0, b, pb), VKG_ERR_INVALID_ARG);
    assert_int_equal(vkg__shards_cut(1000, 400, 2, lead, 1, b, pb), VKG_ERR_INVALID_ARG);
    assert_int_equal(vkg__shards_cut(1000, 0, 0, NULL, 0, b, pb), VKG_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_model),
        cmocka_unit_test(test_tied_stages),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
