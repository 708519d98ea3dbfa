/* The job's rank layout and its one place of computation (src/parallel/job.c):
 *  - every (world, pp) of up to 12 ranks: pp x dp = world, each rank's (stage, replica) is
 *    stage x dp + replica (vkg_job_rank_of gives the rank back), every (stage, replica) pair is
 *    one rank, a stage's replicas sit on neighbouring ranks, and pp <= 1 means one stage;
 *  - --pp that does not divide the ranks, and ranks out of range, are refused naming the flag;
 *  - a job of one rank: its layout, no communicator, no groups, the batch split of one rank;
 *  - a --rank-batch list of the wrong length refused naming the flag and both counts;
 *  - --rank-batch auto's split (vkg_job_balance): rows in proportion to speed where they divide,
 *    the split that finishes soonest checked against every split of up to 12 rows over 3 ranks,
 *    each rank >= 1 and within its cap, ties to the lower rank, caps too small for the global
 *    micro-batch refused naming the rows; a balanced job's new split keeps its global
 *    micro-batch, offsets and token weights, one of another sum is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/job.h"
#include "vkgpt/status.h"

static void test_layout_every_split(void **state)
{
    (void)state;
    for (int world = 1; world <= 12; world++)
        for (int pp = 0; pp <= world; pp++) {
            int stages = pp > 1 ? pp : 1;
            if (world % stages)
                continue;
            int seen[12] = {0};
            for (int rank = 0; rank < world; rank++) {
                vkg_job_layout l;
                assert_int_equal(vkg_job_layout_of(world, rank, pp, &l), VKG_OK);
                assert_int_equal(l.world, world);
                assert_int_equal(l.rank, rank);
                assert_int_equal(l.pp, stages);
                assert_int_equal(l.pp * l.dp, world);
                assert_true(l.stage >= 0 && l.stage < l.pp);
                assert_true(l.replica >= 0 && l.replica < l.dp);
                assert_int_equal(vkg_job_rank_of(&l, l.stage, l.replica), rank);
                assert_int_equal(l.stage * l.dp + l.replica, rank);
                seen[vkg_job_rank_of(&l, l.stage, l.replica)]++;
                if (l.replica > 0) /* neighbours: the previous rank is the previous replica */
                    assert_int_equal(vkg_job_rank_of(&l, l.stage, l.replica - 1), rank - 1);
            }
            for (int rank = 0; rank < world; rank++)
                assert_int_equal(seen[rank], 1);
        }
}

static void test_layout_refused(void **state)
{
    (void)state;
    vkg_job_layout l;
    assert_int_equal(vkg_job_layout_of(6, 0, 4, &l), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "--pp 4 does not divide the 6 ranks"));
    assert_int_equal(vkg_job_layout_of(4, 4, 2, &l), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "rank 4 of world size 4"));
    assert_int_equal(vkg_job_layout_of(0, 0, 1, &l), VKG_ERR_INVALID_ARG);
    vkg_error_clear();
}

static void test_job_alone(void **state)
{
    (void)state;
    vkg_comm_config cc;
    vkg_comm_config_default(&cc);
    vkg_job *job = NULL;
    assert_int_equal(vkg_job_create(&cc, 1, 3, NULL, 0, &job), VKG_OK);
    const vkg_job_layout *l = vkg_job_layout_get(job);
    assert_int_equal(l->world, 1);
    assert_int_equal(vkg_job_dp(job), 1);
    assert_int_equal(vkg_job_pp(job), 1);
    assert_int_equal(vkg_job_stage(job), 0);
    assert_int_equal(vkg_job_replica(job), 0);
    assert_null(vkg_job_comm(job));
    assert_null(vkg_job_dp_group(job));
    assert_null(vkg_job_pipe_group(job));
    assert_null(vkg_job_tie_group(job));
    assert_int_equal(vkg_job_rank_batch(job), 3);
    assert_int_equal(vkg_job_global_batch(job), 3);
    assert_true(vkg_job_loss_scale(job) == 1.0f);
    vkg_job_destroy(&job, NULL);
    assert_null(job);
    vkg_job_destroy(&job, NULL); /* NULL-safe */
}

static void test_rank_batch_count_refused(void **state)
{
    (void)state;
    vkg_comm_config cc;
    vkg_comm_config_default(&cc);
    vkg_job *job = NULL;
    const int rb[2] = {2, 2};
    assert_int_equal(vkg_job_create(&cc, 1, 2, rb, 2, &job), VKG_ERR_INVALID_ARG);
    assert_null(job);
    assert_non_null(strstr(vkg_error_message(), "--rank-batch lists 2 micro-batch sizes for 1"));
    vkg_error_clear();
}

static double finish(const int *rows, const double *speed, int n)
{
    double worst = 0.0;
    for (int k = 0; k < n; k++)
        worst = (double)rows[k] / speed[k] > worst ? (double)rows[k] / speed[k] : worst;
    return worst;
}

static void test_balance_split(void **state)
{
    (void)state;
    int out[4], big[4] = {100, 100, 100, 100};
    double s31[2] = {3.0, 1.0};
    assert_int_equal(vkg_job_balance(8, 2, s31, big, out), VKG_OK);
    assert_int_equal(out[0], 6), assert_int_equal(out[1], 2);
    double same[3] = {1.0, 1.0, 1.0};
    assert_int_equal(vkg_job_balance(7, 3, same, big, out), VKG_OK); /* ties: lower ranks */
    assert_int_equal(out[0], 3), assert_int_equal(out[1], 2), assert_int_equal(out[2], 2);
    double fast[2] = {1000.0, 1.0};
    assert_int_equal(vkg_job_balance(8, 2, fast, big, out), VKG_OK); /* every rank >= 1 */
    assert_int_equal(out[0], 7), assert_int_equal(out[1], 1);
    int cap[2] = {5, 100};
    assert_int_equal(vkg_job_balance(8, 2, fast, cap, out), VKG_OK); /* within the cap */
    assert_int_equal(out[0], 5), assert_int_equal(out[1], 3);
    /* Against every split of G rows over 3 ranks: none finishes sooner, caps held. */
    double sp[3] = {2.5, 1.0, 0.7};
    int caps[3] = {6, 12, 3};
    for (int G = 3; G <= 12; G++) {
        assert_int_equal(vkg_job_balance(G, 3, sp, caps, out), VKG_OK);
        assert_int_equal(out[0] + out[1] + out[2], G);
        for (int k = 0; k < 3; k++)
            assert_true(out[k] >= 1 && out[k] <= caps[k]);
        double best = finish(out, sp, 3);
        for (int a = 1; a <= caps[0]; a++)
            for (int b = 1; b <= caps[1]; b++) {
                int c = G - a - b, x[3] = {a, b, c};
                if (c >= 1 && c <= caps[2] && finish(x, sp, 3) < best - 1e-12)
                    fail_msg("G %d: %d,%d,%d finishes sooner than %d,%d,%d", G, a, b, c, out[0],
                             out[1], out[2]);
            }
    }
    int tiny[2] = {3, 4};
    assert_int_equal(vkg_job_balance(8, 2, s31, tiny, out), VKG_ERR_NOMEM);
    assert_non_null(strstr(vkg_error_message(), "fit 7 rows in all"));
    assert_int_equal(vkg_job_balance(1, 2, s31, big, out), VKG_ERR_INVALID_ARG);
    double zero[2] = {1.0, 0.0};
    assert_int_equal(vkg_job_balance(8, 2, zero, big, out), VKG_ERR_INVALID_ARG);
    vkg_error_clear();
}

static void test_set_batches(void **state)
{
    (void)state;
    vkg_comm_config cc;
    vkg_comm_config_default(&cc);
    vkg_job *job = NULL;
    assert_int_equal(vkg_job_create(&cc, 1, 3, NULL, 0, &job), VKG_OK);
    int b[1] = {3}, wrong[1] = {4};
    assert_int_equal(vkg_job_set_batches(job, b), VKG_ERR_STATE); /* not balanced */
    vkg_job_balance_on(job);
    vkg_data_config dc = vkg_data_config_default();
    vkg_job_data_config(job, &dc); /* whole global micro-batches */
    assert_int_equal(dc.batch_size, 3);
    assert_int_equal(dc.rank, 0), assert_int_equal(dc.world_size, 1);
    assert_int_equal(vkg_job_set_batches(job, wrong), VKG_ERR_STATE);
    assert_non_null(strstr(vkg_error_message(), "global micro-batch of 3 rows"));
    assert_int_equal(vkg_job_set_batches(job, b), VKG_OK);
    assert_int_equal(vkg_job_global_batch(job), 3);
    assert_int_equal(vkg_job_batch_of(job, 0), 3);
    assert_string_equal(vkg_job_batch_list(job), "3");
    vkg_job_destroy(&job, NULL);
    vkg_error_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_every_split), cmocka_unit_test(test_layout_refused),
        cmocka_unit_test(test_job_alone),          cmocka_unit_test(test_rank_batch_count_refused),
        cmocka_unit_test(test_balance_split),      cmocka_unit_test(test_set_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
