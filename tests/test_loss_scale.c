/* Dynamic loss scaling (vkg_train_config.loss_scale; vkgpt train --loss-scale dynamic). Ranks are
 * threads of this process, each with its own trainer and Vulkan device (validation layer on and
 * checked), joined by the inproc transport; a tiny GPT-2 learning a Markov chain.
 *  - exact: in fp32 a power-of-two scale multiplies every gradient exactly and the update divides
 *    it out exactly, so 5 steps with the scale from 2^16, doubled every 2 steps, leave the
 *    parameters bitwise those of the same run without it, on one device, data parallel (2 ranks),
 *    ZeRO-1 (2 ranks), a pipeline (2 stages) and DiLoCo (2 ranks, H = 2); the gradient norm
 *    reported is the unscaled one, bitwise; the scales run 2^16, 2^16, 2^17, 2^17, 2^18;
 *  - overflow: from 2^127 the gradients overflow fp32: every such step is skipped with its loss
 *    finite, the scale halves each time, the parameters stay bitwise the initial ones, and the
 *    run goes on past --max-skipped (3) until a scale fits, then trains: applied steps have
 *    finite norms and keep the scale, any later overflow halves it again;
 *  - resume: a checkpoint in the middle of a growth window (step 3 of a window of 3) resumes
 *    bitwise, the scale and its count included (the doubling comes at the same step);
 *  - bf16 with the cooperative-matrix kernel (emulated): the gradient products run on it only
 *    under loss scaling (the run says so), and 5 steps stay within 0.1 % of the loss of the same
 *    run on the other kernels (measured on lavapipe: 2.3e-5);
 *  - exact on Llama too (rank_threads.h: GQA, RMSNorm, rope, SwiGLU, tied): scaled bitwise
 *    unscaled under data parallelism, ZeRO-1, a pipeline of 2 stages and DiLoCo. */
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
#include "vkgpt/model.h"
#include "vkgpt/train.h"

enum { L = 2, NH = 2, C = 32, V = 96, T = 16, MAXR = 2, STEPS = 5, MAXSTEPS = 200 };

typedef struct job {
    int world, zero, pp, diloco, bf16, coopmat, steps, window, stop_at, resume, until_applied;
    float scale;            /* cfg.loss_scale */
    const char *ckpt, *log; /* in the test's folder, or NULL */
    /* results (rank 0's steps) */
    int nsteps;
    float loss[MAXSTEPS], norm[MAXSTEPS], used[MAXSTEPS];
    int skipped[MAXSTEPS], overflow[MAXSTEPS];
    char coopmat_said[400];
    float *params[MAXR], *first;
    size_t nparams;
    vkg_status st[MAXR];
    char err[MAXR][512];
    vkg_test_family family; /* the model: GPT-2 of L, NH, C, or a config.json of this family */
    char model[600];        /* its path (run_job writes it) */
} job;

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_loss_scale") != 0)
        return -1;
    char data[600];
    vkg_test_path_in(data, sizeof data, "train.bin");
    vkg_test_write_shard(data, 400 * 4 * T + 1, 17, V, 1);
    return 0;
}

static void *run_rank(void *p)
{
    vkg_test_rank *a = p;
    job *j = a->job;
    char data[600], ckpt[600], log[600];
    vkg_test_path_in(data, sizeof data, "train.bin");
    vkg_train_config c = vkg_test_rank_config();
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = T, c.vocab_size = V;
    c.model = j->family == VKG_TEST_GPT2 ? NULL : j->model;
    c.seed = 3, c.data = data, c.shuffle = 0;
    c.batch = 2, c.seq = T, c.total_batch = 4 * T;
    c.steps = j->steps, c.lr = 3e-3f, c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.loss_scale = j->scale, c.loss_scale_window = j->window;
    c.precision = j->bf16 ? VKG_PRECISION_BF16 : VKG_PRECISION_FP32;
    c.coopmat = j->coopmat ? VKG_COOPMAT_EMULATE : VKG_COOPMAT_OFF;
    vkg_test_rank_join(&c, a, j->world);
    c.par.zero = j->zero, c.par.pp = j->pp;
    c.par.sync = j->diloco, c.par.inner_steps = 2;
    if (j->log) {
        vkg_test_path_in(log, sizeof log, j->log);
        c.log_path = log;
    }
    if (j->ckpt) {
        vkg_test_path_in(ckpt, sizeof ckpt, j->ckpt);
        c.ckpt_dir = ckpt, c.resume = j->resume;
    }
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    vkg_trainer_info info;
    if (st == VKG_OK) {
        vkg_trainer_get_info(t, &info);
        j->nparams = info.num_params;
        if (a->rank == 0)
            snprintf(j->coopmat_said, sizeof j->coopmat_said, "%s", info.coopmat);
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        st = j->params[a->rank] ? vkg_trainer_get_params(t, j->params[a->rank]) : VKG_ERR_NOMEM;
    }
    if (st == VKG_OK && a->rank == 0 && (j->first = malloc(j->nparams * sizeof(float))))
        memcpy(j->first, j->params[0], j->nparams * sizeof(float));
    int applied = 0;
    for (int n = 0; st == VKG_OK && !vkg_trainer_done(t) && n < MAXSTEPS; n++) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK && a->rank == 0) {
            j->loss[n] = s.loss, j->norm[n] = s.grad_norm, j->used[n] = s.loss_scale;
            j->skipped[n] = s.skipped, j->overflow[n] = s.overflow, j->nsteps = n + 1;
        }
        if (st == VKG_OK && s.step == j->stop_at) { /* a checkpoint, and the run stops */
            st = vkg_trainer_checkpoint(t, NULL, 0);
            break;
        }
        if (st == VKG_OK && j->until_applied && !s.skipped && ++applied == 3)
            break; /* three applied steps after the overflows */
        if (st == VKG_OK && j->until_applied && !applied) { /* still the initial parameters */
            st = vkg_trainer_get_params(t, j->params[a->rank]);
            if (st == VKG_OK && a->rank == 0 &&
                memcmp(j->params[0], j->first, j->nparams * sizeof(float)) != 0)
                snprintf(j->err[0], sizeof j->err[0], "a skipped step changed the parameters"),
                    st = VKG_ERR_STATE;
        }
    }
    if (st == VKG_OK)
        st = vkg_trainer_get_params(t, j->params[a->rank]);
    j->st[a->rank] = vkg_test_rank_finish(&t, st, j->err[a->rank], sizeof j->err[a->rank]);
    return NULL;
}

static void run_job(job *j)
{
    vkg_test_family_config(j->family, L, V, T, j->model, sizeof j->model);
    vkg_test_run_ranks(j->world, j, run_rank);
    /* under a pipeline only rank 0's gather holds the whole model; DiLoCo's replicas differ
     * between outer steps */
    vkg_test_ranks_ok(j->world, j->st, &j->err[0][0], sizeof j->err[0],
                      j->pp || j->diloco ? NULL : j->params, j->nparams);
}

static void free_job(job *j)
{
    for (int r = 0; r < MAXR; r++)
        free(j->params[r]);
    free(j->first);
}

/* Scaled and unscaled runs of one strategy: bitwise the same parameters and norms. */
static void exact_case(const char *what, job base)
{
    job off = base, on = base;
    off.steps = on.steps = STEPS;
    on.scale = 65536.0f, on.window = 2;
    run_job(&off);
    run_job(&on);
    static const float want[STEPS] = {65536.0f, 65536.0f, 131072.0f, 131072.0f, 262144.0f};
    for (int n = 0; n < STEPS; n++) {
        printf("%s: step %d loss %.7f norm %.7g (scaled: %.7f %.7g at scale %g)\n", what, n + 1,
               (double)off.loss[n], (double)off.norm[n], (double)on.loss[n], (double)on.norm[n],
               (double)on.used[n]);
        assert_false(on.skipped[n] || off.skipped[n]);
        assert_true(off.used[n] == 0.0f && on.used[n] == want[n]);
        assert_memory_equal(&on.loss[n], &off.loss[n], sizeof(float));
        assert_memory_equal(&on.norm[n], &off.norm[n], sizeof(float));
    }
    for (int r = 0; r < (base.pp ? 1 : base.world); r++)
        assert_memory_equal(on.params[r], off.params[r], on.nparams * sizeof(float));
    free_job(&off);
    free_job(&on);
}

static void test_exact_single(void **state)
{
    (void)state;
    exact_case("one device", (job){.world = 1});
}

static void test_exact_data_parallel(void **state)
{
    (void)state;
    exact_case("data parallel, 2 ranks", (job){.world = 2});
}

static void test_exact_zero1(void **state)
{
    (void)state;
    exact_case("ZeRO-1, 2 ranks", (job){.world = 2, .zero = 1});
}

static void test_exact_pipeline(void **state)
{
    (void)state;
    exact_case("pipeline, 2 stages", (job){.world = 2, .pp = 2});
}

static void test_exact_diloco(void **state)
{
    (void)state;
    exact_case("DiLoCo, 2 ranks, H = 2", (job){.world = 2, .diloco = 1});
}

/* Llama (rank_threads.h): scaled bitwise unscaled under every strategy. */
static void test_exact_llama(void **state)
{
    (void)state;
    exact_case("llama, data parallel, 2 ranks", (job){.world = 2, .family = VKG_TEST_LLAMA});
    exact_case("llama, ZeRO-1, 2 ranks", (job){.world = 2, .zero = 1, .family = VKG_TEST_LLAMA});
    exact_case("llama, pipeline, 2 stages", (job){.world = 2, .pp = 2, .family = VKG_TEST_LLAMA});
    exact_case("llama, DiLoCo, 2 ranks, H = 2",
               (job){.world = 2, .diloco = 1, .family = VKG_TEST_LLAMA});
}

static void test_overflow(void **state)
{
    (void)state;
    job j = {.world = 1,
             .steps = MAXSTEPS,
             .scale = 0x1p127f,
             .until_applied = 1,
             .log = "overflow.jsonl"};
    run_job(&j);
    int k = 0, applied = 0;
    while (k < j.nsteps && j.skipped[k])
        k++;
    printf("%d steps overflowed (scales 2^127 .. 2^%d), the first applied at 2^%d; %d steps\n", k,
           128 - k, 127 - k, j.nsteps);
    assert_true(k > 3); /* past --max-skipped 3 */
    assert_true(j.used[0] == 0x1p127f);
    for (int n = 0; n < j.nsteps; n++) {
        /* an overflow: the loss finite, the next step at half the scale; else the same scale */
        assert_true(j.skipped[n] == j.overflow[n] && isfinite(j.loss[n]));
        if (n + 1 < j.nsteps)
            assert_true(j.used[n + 1] == (j.overflow[n] ? 0.5f : 1.0f) * j.used[n]);
        applied += !j.skipped[n];
        assert_true(j.skipped[n] || isfinite(j.norm[n]));
    }
    assert_int_equal(applied, 3);
    /* the log: every step's scale, the overflows marked */
    char path[600];
    vkg_test_path_in(path, sizeof path, j.log);
    char *text = vkg_test_must_read(path, NULL);
    int lines = 0, marked = 0;
    for (const char *at = text; (at = strstr(at, "\"loss_scale\":")) != NULL; at++)
        lines++;
    for (const char *at = text; (at = strstr(at, "\"overflow\":true")) != NULL; at++)
        marked++;
    assert_int_equal(lines, j.nsteps);
    assert_int_equal(marked, j.nsteps - applied);
    assert_non_null(strstr(text, "\"loss_scale\":1.70141183e+38,\"overflow\":true"));
    free(text);
    assert_memory_not_equal(j.params[0], j.first, j.nparams * sizeof(float)); /* it trained */
    free_job(&j);
}

static void test_resume(void **state)
{
    (void)state;
    job whole = {.world = 1, .steps = 7, .scale = 1024.0f, .window = 3};
    run_job(&whole);
    job first = whole, second = whole;
    first.ckpt = second.ckpt = "resume";
    first.stop_at = 5; /* after one doubling (after step 3) and 2 steps of the next window */
    second.resume = 1;
    run_job(&first);
    run_job(&second);
    for (int n = 0; n < 2; n++) {
        printf("step %d: scale %g (uninterrupted %g)\n", 6 + n, (double)second.used[n],
               (double)whole.used[5 + n]);
        assert_true(second.used[n] == whole.used[5 + n]);
        assert_memory_equal(&second.loss[n], &whole.loss[5 + n], sizeof(float));
    }
    assert_true(whole.used[5] == 2048.0f && whole.used[6] == 4096.0f);
    assert_memory_equal(second.params[0], whole.params[0], whole.nparams * sizeof(float));
    free_job(&whole);
    free_job(&first);
    free_job(&second);
}

static void test_bf16_coopmat(void **state)
{
    (void)state;
    job off = {.world = 1, .steps = STEPS, .bf16 = 1, .coopmat = 1};
    job on = off, plain = off;
    on.scale = 65536.0f;
    plain.coopmat = 0;
    run_job(&off);
    run_job(&on);
    run_job(&plain);
    printf("coopmat without loss scaling: %s\nwith: %s\n", off.coopmat_said, on.coopmat_said);
    assert_null(strstr(off.coopmat_said, "gradient products"));
    assert_non_null(strstr(on.coopmat_said, "gradient products"));
    for (int n = 0; n < STEPS; n++) {
        printf("step %d: loss %.6f on the other kernels, %.6f with the gradient products on "
               "cooperative matrices\n",
               n + 1, (double)plain.loss[n], (double)on.loss[n]);
        assert_false(on.skipped[n]);
        assert_true(fabsf(on.loss[n] - plain.loss[n]) <= 1e-3f * plain.loss[n]);
    }
    /* the gradient products did run elsewhere: not the bits of the forward-only run */
    assert_memory_not_equal(on.params[0], off.params[0], on.nparams * sizeof(float));
    free_job(&off);
    free_job(&on);
    free_job(&plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_single), cmocka_unit_test(test_exact_data_parallel),
        cmocka_unit_test(test_exact_zero1),  cmocka_unit_test(test_exact_pipeline),
        cmocka_unit_test(test_exact_diloco), cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_resume),       cmocka_unit_test(test_bf16_coopmat),
        cmocka_unit_test(test_exact_llama),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
