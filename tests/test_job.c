/* The job's rank layout and its one place of computation (src/parallel/job.c):
 *  - every (world, pp) of up to 12 ranks: pp x dp = world, each rank's (stage, replica) is
 *    stage x dp + replica (vkg_job_rank_of gives the rank back), every (stage, replica) pair is
 *    one rank, a stage's replicas sit on neighbouring ranks, and pp <= 1 means one stage;
 *  - --pp that does not divide the ranks, and ranks out of range, are refused naming the flag;
 *  - a job of one rank: its layout, no communicator, no groups, the batch split of one rank;
 *  - a --rank-batch list of the wrong length refused naming the flag and both counts. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_every_split),
        cmocka_unit_test(test_layout_refused),
        cmocka_unit_test(test_job_alone),
        cmocka_unit_test(test_rank_batch_count_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
