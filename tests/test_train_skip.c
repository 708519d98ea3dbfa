/* Steps whose gradient norm is not finite never reach the parameters, under every strategy.
 * Ranks are threads of this process, each with its own trainer and Vulkan device (validation
 * layer on and checked), joined by the inproc transport. The model is a tiny GPT-2 whose final
 * layernorm weight is 1e20, all its values finite: its gradients overflow fp32 (the classifier's
 * alone are about 1e20 per element), so every step's global gradient norm is NaN or infinite.
 * For one device, data parallel (2 ranks), ZeRO-1 (2 ranks), a pipeline (2 stages) and DiLoCo
 * (2 ranks, an outer step after every step, so after each skipped one):
 *  - steps 1 and 2 are skipped on every rank and counted (skipped, skipped_total, skipped_run);
 *  - the parameters after them are bitwise those of the model file, and the checkpoint written
 *    then holds them and all-zero AdamW moments (the moments were not touched either);
 *  - step 3, the third in a row (--max-skipped 3), stops the run on every rank with
 *    VKG_ERR_ABORTED naming --max-skipped. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rank_threads.h"
#include "testutil.h"
#include "train/checkpoint.h"
#include "vkgpt/io.h"
#include "vkgpt/train.h"

enum { L = 2, NH = 2, C = 32, V = 96, MAXT = 16, T = 16, MAXR = 2, MAX_SKIPPED = 3 };
#define HUGE_LNFW 1e20f

typedef struct job {
    int world, zero, pp, diloco;
    const char *ckpt;
    /* results */
    int skipped[MAXR][2];
    long long total[MAXR], run[MAXR];
    float norm[2];
    float *params[MAXR];
    size_t nparams;
    vkg_status st[MAXR];
    char err[MAXR][512];
} job;

static vkg_train_config base_config(char *data)
{
    vkg_test_path_in(data, 600, "train.bin");
    vkg_train_config c = vkg_test_rank_config();
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.seed = 5, c.data = data, c.shuffle = 0;
    c.batch = 2, c.seq = T, c.total_batch = 4 * T;
    c.steps = 6, c.lr = 1e-3f, c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.max_skipped = MAX_SKIPPED;
    return c;
}

/* The model file: the seeded GPT-2 init of the run's shape, its final layernorm weight 1e20. */
static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_train_skip") != 0)
        return -1;
    char data[600], model[600];
    vkg_test_path_in(data, sizeof data, "train.bin");
    vkg_test_write_shard(data, 40 * 4 * T + 1, 41, V, 1);
    vkg_train_config c = base_config(data);
    vkg_trainer_t *t = NULL;
    if (vkg_trainer_create(&c, &t) != VKG_OK)
        return -1;
    vkg_trainer_info info;
    vkg_trainer_get_info(t, &info);
    vkg_model_config mc = {.max_seq_len = MAXT,
                           .vocab_size = V,
                           .padded_vocab_size = info.padded_vocab_size,
                           .num_layers = L,
                           .num_heads = NH,
                           .channels = C};
    float *p = malloc(info.num_params * sizeof *p);
    vkg_status st = p ? vkg_trainer_get_params(t, p) : VKG_ERR_NOMEM;
    vkg_trainer_destroy(&t);
    vkg_param_table pt;
    vkg_model_params(&mc, &pt);
    size_t at = pt.t[14].offset; /* lnfw is tensor 14 */
    for (size_t k = 0; st == VKG_OK && k < pt.t[14].count; k++)
        p[at + k] = HUGE_LNFW;
    vkg_test_path_in(model, sizeof model, "huge.bin");
    if (st == VKG_OK)
        st = vkg_modelfile_write(model, &mc, p);
    free(p);
    return st == VKG_OK ? 0 : -1;
}

static void *run_rank(void *p)
{
    vkg_test_rank *a = p;
    job *j = a->job;
    char data[600], model[600], ckpt[600];
    vkg_train_config c = base_config(data);
    vkg_test_path_in(model, sizeof model, "huge.bin");
    vkg_test_path_in(ckpt, sizeof ckpt, j->ckpt);
    c.init_path = model, c.vocab_size = 0;
    c.ckpt_dir = ckpt;
    vkg_test_rank_join(&c, a, j->world);
    c.par.zero = j->zero, c.par.pp = j->pp;
    c.par.sync = j->diloco, c.par.inner_steps = 1;
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    for (int n = 0; st == VKG_OK && n < 2; n++) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        j->skipped[a->rank][n] = s.skipped;
        j->total[a->rank] = s.skipped_total, j->run[a->rank] = s.skipped_run;
        if (a->rank == 0)
            j->norm[n] = s.grad_norm;
    }
    if (st == VKG_OK)
        st = vkg_trainer_checkpoint(t, NULL, 0);
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        j->nparams = info.num_params;
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        st = j->params[a->rank] ? vkg_trainer_get_params(t, j->params[a->rank]) : VKG_ERR_NOMEM;
    }
    if (st == VKG_OK) { /* the third skipped step in a row ends the run */
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK)
            snprintf(j->err[a->rank], sizeof j->err[a->rank], "step 3 was not refused");
        else if (st == VKG_ERR_ABORTED && strstr(vkg_error_message(), "--max-skipped 3"))
            st = VKG_OK;
        else
            snprintf(j->err[a->rank], sizeof j->err[a->rank], "step 3: %s", vkg_error_message());
        st = st == VKG_OK && j->err[a->rank][0] ? VKG_ERR_STATE : st;
    }
    j->st[a->rank] = vkg_test_rank_finish(&t, st, j->err[a->rank], sizeof j->err[a->rank]);
    return NULL;
}

static void run_case(const char *what, job *j)
{
    vkg_test_run_ranks(j->world, j, run_rank);
    printf("%s: gradient norms %g %g\n", what, (double)j->norm[0], (double)j->norm[1]);
    for (int r = 0; r < j->world; r++) {
        if (j->st[r] != VKG_OK)
            fail_msg("%s: rank %d: %s", what, r, j->err[r]);
        assert_true(j->skipped[r][0] && j->skipped[r][1]);
        assert_true(j->total[r] == 2 && j->run[r] == 2);
    }
    assert_false(isfinite(j->norm[0]) || isfinite(j->norm[1]));
    /* The parameters are the model file's, bit for bit, on every rank that holds them all. */
    char path[600], dir[700];
    vkg_test_path_in(path, sizeof path, "huge.bin");
    size_t bytes;
    unsigned char *file = vkg_test_must_read(path, &bytes);
    assert_int_equal(bytes, 1024 + 4 * j->nparams);
    for (int r = 0; r < (j->pp ? 1 : j->world); r++)
        assert_memory_equal(j->params[r], file + 1024, 4 * j->nparams);
    /* The checkpoint of step 2 holds them too, and AdamW's moments are still all zero. */
    vkg_test_path_in(path, sizeof path, j->ckpt);
    snprintf(dir, sizeof dir, "%s/step_00000002", path);
    vkg_checkpoint ck;
    assert_int_equal(vkg_checkpoint_load(dir, &ck), VKG_OK);
    assert_memory_equal(ck.params, file + 1024, 4 * j->nparams);
    float *zero = calloc(j->nparams, sizeof *zero);
    assert_non_null(zero);
    assert_memory_equal(ck.m, zero, 4 * j->nparams);
    assert_memory_equal(ck.v, zero, 4 * j->nparams);
    free(zero);
    vkg_checkpoint_deinit(&ck);
    free(file);
    for (int r = 0; r < MAXR; r++)
        free(j->params[r]);
}

static void test_single(void **state)
{
    (void)state;
    job j = {.world = 1, .ckpt = "single"};
    run_case("one device", &j);
}

static void test_data_parallel(void **state)
{
    (void)state;
    job j = {.world = 2, .ckpt = "dp"};
    run_case("data parallel, 2 ranks", &j);
}

static void test_zero1(void **state)
{
    (void)state;
    job j = {.world = 2, .zero = 1, .ckpt = "zero"};
    run_case("ZeRO-1, 2 ranks", &j);
}

static void test_pipeline(void **state)
{
    (void)state;
    job j = {.world = 2, .pp = 2, .ckpt = "pp"};
    run_case("pipeline, 2 stages", &j);
}

static void test_diloco(void **state)
{
    (void)state;
    job j = {.world = 2, .diloco = 1, .ckpt = "diloco"};
    run_case("DiLoCo, 2 ranks, H = 1", &j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single), cmocka_unit_test(test_data_parallel),
        cmocka_unit_test(test_zero1),  cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_diloco),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
