/* DiLoCo (--sync diloco) in the trainer: ranks are threads of this process, each with its own
 * trainer and Vulkan device (validation layer on and checked), joined by the inproc transport;
 * a tiny model on a shuffled llm.c shard:
 *  - the outer step in training is the reference's (tests/outer_ref.c) bit for bit, in fp32, bf16
 *    and int8, on 2 and 3 ranks: the replicas' parameters after one inner step (a run with H = 2,
 *    stopped mid-round) and the starting point, through the reference, give the parameters of a
 *    run with H = 1 after its first step, on every rank (and int4 on 2 ranks);
 *  - with H = 1, outer lr 1 and momentum 0, every rank's parameters after the first step are the
 *    replicas' fp32 mean (sum in rank order / N) after their inner step, bit for bit;
 *  - inside a round the replicas differ, at its end they hold bitwise the same parameters, and
 *    the steps that end a round say so with the bytes of the exchange (4 n in fp32, 2 n in bf16,
 *    n + 4 n/256 in int8);
 *  - a checkpoint in the middle of a round (step 3 of H = 2, after an outer step at 2) resumed on
 *    the same ranks continues bitwise like the uninterrupted run (losses, every rank's
 *    parameters), in fp32 and in int8 (the outer momentum, the global parameters and replica 1's
 *    parameters and moments come back from outer.bin);
 *  - streaming (--fragments 2, --outer-delay 1): each fragment's outer step is the reference's
 *    over its own parameters (the layers l with l % 2 == p, half of wte's and wpe's rows, lnf
 *    with the last layer), started at its staggered step from the replicas' parameters then and
 *    landing one step later as mix x the replica's own + (1 - mix) x the new global ones (mix 0,
 *    0.25 and 0.5; fp32 on 2 and 3 ranks, int8 on 2), while the other fragment is untouched; a
 *    checkpoint with an exchange in flight resumes bitwise; a rank that fails while one runs
 *    makes the others fail at once with its reason;
 *  - a checkpoint of plain data parallelism resumes under DiLoCo;
 *  - a replica diverged in outer.bin (its steps skipped for a non-finite loss) is not averaged
 *    in: the round ends without its outer step, the global parameters and momentum bitwise as
 *    before on every rank and in the next checkpoint (fp32 and int8);
 *  - pipelines (dp = 2 x pp = 2, each replica a pipeline of two stages, 2 micro-batches a step):
 *    the first outer step is the reference's over the replicas' parameters, bit for bit (fp32;
 *    the whole model, and fragment 0 of 2 with fragment 1 untouched), replica 1's parameters
 *    taken from the checkpoint's outer state, assembled from its stages; five steps (H = 2,
 *    clipping on) train as whole-model replicas on the same micro-batches do, within 1e-5 in
 *    fp32 (the tied wte's gradient and the norms add in another order, as test_pp states) and
 *    1e-3 in int8 (the chunks of the exchange are the stages'); a checkpoint mid-round resumes
 *    bitwise under pipelines, and a whole-model replicas' checkpoint resumes under pipelines
 *    within the same bound (the outer state is the whole model's, whatever the stages); the
 *    tied wte's copies on the first and last stage stay bitwise equal (every checkpoint checks);
 *  - the first outer step bitwise the reference's on the Llama family (rank_threads.h): Llama
 *    (tied, no wpe) on 2 ranks in fp32 and int8, Qwen3 (untied lm_head, QK-norm) on 3 in fp32.
 *    Not for it here: streaming fragments (in_fragment below spells out GPT-2's table),
 *    pipelines and resuming;
 *  - refused by name: one rank, --zero 1, --outer-delay with --pp, --inner-steps 0, --grad-dtype
 * bf16, more fragments than layers or inner steps, a delay longer than a round, --outer-mix 1, and
 *    resuming a DiLoCo checkpoint without --sync diloco, on another number of ranks or with a
 *    delay when it had none. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "outer_ref.h"
#include "train/checkpoint.h"
#include "rank_threads.h"
#include "testutil.h"
#include "vkgpt/comm.h"
#include "vkgpt/train.h"

enum { L = 2, NH = 2, C = 32, V = 96, MAXT = 16, T = 16, B = 2, STEPS = 5, MAXR = 4 };

typedef struct job {
    int world, steps, H, dtype, batch;
    float outer_lr, outer_mu;
    int zero, pp, grad_bf16;
    int accum;            /* > 0: micro-batches per step (total batch accum x B x T per replica) */
    int sync;             /* 1 diloco (the default of these tests: set by new_job) */
    int fragments, delay; /* streaming (0, -1: none) */
    float mix;
    int quit_after; /* > 0: the last rank fails after this step (an API error), then leaves */
    const char *ckpt;
    int ckpt_at, resume;
    /* results */
    float loss[STEPS];
    int outer[STEPS], outer_skipped[STEPS], skipped[STEPS];
    uint64_t outer_bytes[STEPS];
    float *init;         /* rank 0's parameters before the first step */
    float *params[MAXR]; /* each rank's at the end */
    size_t nparams;
    vkg_status st[MAXR];
    char err[MAXR][512];
    vkg_test_family family; /* the model: GPT-2 of L, NH, C, or a config.json of this family */
    char model[600];        /* its path (run_job writes it) */
} job;

static job new_job(int world, int H, int dtype)
{
    return (job){.world = world,
                 .steps = STEPS,
                 .H = H,
                 .dtype = dtype,
                 .batch = B,
                 .outer_lr = 0.7f,
                 .outer_mu = 0.9f,
                 .sync = 1,
                 .fragments = 1,
                 .delay = -1,
                 .mix = 0.5f};
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_diloco") != 0)
        return -1;
    char path[600];
    vkg_test_path_in(path, sizeof path, "train.bin");
    vkg_test_write_shard(path, 40 * 6 * T + 1, 31, V, 1);
    return 0;
}

static void *run_rank(void *p)
{
    vkg_test_rank *a = p;
    job *j = a->job;
    char data[600], ckpt[600];
    vkg_test_path_in(data, sizeof data, "train.bin");
    vkg_train_config c = vkg_test_rank_config();
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.model = j->family == VKG_TEST_GPT2 ? NULL : j->model;
    c.seed = 5, c.data = data, c.shuffle = 1;
    c.batch = j->batch, c.seq = T;
    c.steps = STEPS, c.lr = 3e-3f, c.warmup = 1, c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.par.sync = j->sync, c.par.inner_steps = j->H, c.par.outer_dtype = j->dtype;
    c.par.outer_lr = j->outer_lr, c.par.outer_momentum = j->outer_mu;
    c.par.fragments = j->fragments, c.par.outer_delay = j->delay, c.par.outer_mix = j->mix;
    c.par.zero = j->zero, c.par.pp = j->pp;
    if (j->accum)
        c.total_batch = (long long)j->accum * j->batch * T * (j->world / (j->pp > 1 ? j->pp : 1));
    c.par.grad_dtype = j->grad_bf16 ? VKG_COMM_BF16 : VKG_COMM_F32;
    if (j->ckpt) {
        vkg_test_path_in(ckpt, sizeof ckpt, j->ckpt);
        c.ckpt_dir = ckpt, c.keep_checkpoints = 0, c.resume = j->resume;
    }
    vkg_test_rank_join(&c, a, j->world);
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    vkg_trainer_info info;
    if (st == VKG_OK) {
        vkg_trainer_get_info(t, &info);
        j->nparams = info.num_params;
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        if (a->rank == 0 && !j->resume && !(j->init = malloc(j->nparams * sizeof(float))))
            st = VKG_ERR_NOMEM;
        if (!j->params[a->rank])
            st = VKG_ERR_NOMEM;
    }
    /* under pipelines every rank takes part in gathering the parameters */
    if (st == VKG_OK && (a->rank == 0 ? j->init != NULL : j->pp > 1 && !j->resume))
        st = vkg_trainer_get_params(t, a->rank == 0 ? j->init : j->params[a->rank]);
    for (int n = 0; st == VKG_OK && n < j->steps && !vkg_trainer_done(t); n++) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK && a->rank == 0) {
            int k = (int)s.step - 1;
            j->loss[k] = s.loss, j->outer[k] = s.outer, j->outer_bytes[k] = s.outer_bytes;
            j->outer_skipped[k] = s.outer_skipped, j->skipped[k] = s.skipped;
        }
        if (st == VKG_OK && j->ckpt && s.step == j->ckpt_at)
            st = vkg_trainer_checkpoint(t, NULL, 0);
        if (st == VKG_OK && a->rank == j->world - 1 && s.step == j->quit_after) {
            char *text = NULL; /* no tokenizer: refused, and the trainer has failed */
            st = vkg_trainer_sample(t, NULL, -1, 1.0f, 0, 1, &text);
            free(text);
            break;
        }
    }
    if (st == VKG_OK)
        st = vkg_trainer_get_params(t, j->params[a->rank]);
    j->st[a->rank] = vkg_test_rank_finish(&t, st, j->err[a->rank], sizeof j->err[a->rank]);
    return NULL;
}

static void run_job(job *j)
{
    vkg_test_family_config(j->family, L, V, MAXT, j->model, sizeof j->model);
    vkg_test_run_ranks(j->world, j, run_rank);
}

static void expect_ok(const job *j)
{
    /* every rank's own parameters: equal to rank 0's only at the end of a round */
    vkg_test_ranks_ok(j->world, j->st, j->err[0], sizeof j->err[0], NULL, 0);
}

static void free_job(job *j)
{
    free(j->init);
    for (int r = 0; r < MAXR; r++)
        free(j->params[r]);
    memset(j, 0, sizeof *j);
}

static int same_params(const job *j, int a, int b)
{
    return !memcmp(j->params[a], j->params[b], j->nparams * sizeof(float));
}

/* The first outer step of training against the reference, for N ranks and dtype, on family f. */
static void check_first_outer_step(vkg_test_family f, int N, int dtype)
{
    job inner = new_job(N, 2, dtype), outer = new_job(N, 1, dtype);
    inner.family = outer.family = f;
    inner.steps = outer.steps = 1;
    run_job(&inner), run_job(&outer);
    expect_ok(&inner), expect_ok(&outer);
    assert_int_equal(inner.outer[0], 0);
    assert_int_equal(outer.outer[0], 1);
    for (int r = 1; r < N; r++) {
        assert_false(same_params(&inner, 0, r)); /* inside a round: each its own */
        assert_true(same_params(&outer, 0, r));  /* after the outer step: all g */
    }
    size_t n = inner.nparams;
    assert_memory_equal(inner.init, outer.init, n * sizeof(float));
    float *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m);
    assert_true(g && m);
    memcpy(g, inner.init, n * sizeof *g);
    vkg_test_outer_ref(N, n, inner.params, g, m, (vkg_outer_dtype)dtype, 0.7f, 0.9f,
                       VKG_TEST_OUTER_EXACT);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&g[i], &outer.params[0][i], 4) && !bad++)
            first = i;
    if (bad)
        fail_msg("%s %s, %d ranks: %zu of %zu parameters differ from the reference's outer "
                 "step, first %zu: %.9g vs %.9g",
                 vkg_test_family_name(f), vkg_outer_dtype_name((vkg_outer_dtype)dtype), N, bad, n,
                 first, (double)outer.params[0][first], (double)g[first]);
    uint64_t want = dtype == VKG_OUTER_F32    ? 4 * (uint64_t)n
                    : dtype == VKG_OUTER_BF16 ? 2 * (uint64_t)n
                    : dtype == VKG_OUTER_INT8 ? (uint64_t)n + 4 * ((n + 255) / 256)
                                              : ((uint64_t)n + 1) / 2 + 4 * ((n + 255) / 256);
    assert_int_equal(outer.outer_bytes[0], want);
    printf("%s %s, %d ranks: the first outer step bitwise the reference's; %llu bytes per rank\n",
           vkg_test_family_name(f), vkg_outer_dtype_name((vkg_outer_dtype)dtype), N,
           (unsigned long long)outer.outer_bytes[0]);
    free(g), free(m);
    free_job(&inner), free_job(&outer);
}

static void test_outer_step_is_the_reference(void **state)
{
    (void)state;
    for (int N = 2; N <= 3; N++) {
        check_first_outer_step(VKG_TEST_GPT2, N, VKG_OUTER_F32);
        check_first_outer_step(VKG_TEST_GPT2, N, VKG_OUTER_BF16);
        check_first_outer_step(VKG_TEST_GPT2, N, VKG_OUTER_INT8);
    }
    check_first_outer_step(VKG_TEST_GPT2, 2, VKG_OUTER_INT4);
}

/* The Llama family (rank_threads.h): Llama on 2 ranks in fp32 and int8, Qwen3 (an untied head)
 * on 3 in fp32. */
static void test_outer_step_is_the_reference_family(void **state)
{
    (void)state;
    check_first_outer_step(VKG_TEST_LLAMA, 2, VKG_OUTER_F32);
    check_first_outer_step(VKG_TEST_LLAMA, 2, VKG_OUTER_INT8);
    check_first_outer_step(VKG_TEST_QWEN3, 3, VKG_OUTER_F32);
}

/* H = 1, outer lr 1, momentum 0: after the first step every rank holds the replicas' fp32 mean
 * (their sum in rank order / N) of their parameters after the inner step, bit for bit. */
static void test_mean_when_lr_one(void **state)
{
    (void)state;
    for (int N = 2; N <= 3; N++) {
        job inner = new_job(N, 2, VKG_OUTER_F32), outer = new_job(N, 1, VKG_OUTER_F32);
        inner.steps = outer.steps = 1;
        outer.outer_lr = 1.0f, outer.outer_mu = 0.0f;
        run_job(&inner), run_job(&outer);
        expect_ok(&inner), expect_ok(&outer);
        size_t bad = 0;
        for (size_t i = 0; i < inner.nparams; i++) {
            float s = inner.params[0][i];
            for (int r = 1; r < N; r++)
                s = s + inner.params[r][i];
            float mean = s / (float)N;
            for (int r = 0; r < N; r++)
                bad += memcmp(&mean, &outer.params[r][i], sizeof mean) != 0;
        }
        if (bad)
            fail_msg("%d ranks: %zu parameters differ from the replicas' mean", N, bad);
        printf("%d ranks, H = 1, outer lr 1, momentum 0: every rank holds the replicas' mean bit "
               "for bit\n",
               N);
        free_job(&inner), free_job(&outer);
    }
}

/* Rounds of H = 2 over 5 steps: outer steps at 2 and 4, the replicas apart at 5 (mid-round),
 * together at 4; a checkpoint at 3 resumed continues bitwise. */
static void check_resume(int dtype)
{
    char dir[64];
    snprintf(dir, sizeof dir, "ckpt_%d", dtype);
    job whole = new_job(2, 2, dtype), four = new_job(2, 2, dtype);
    four.steps = 4;
    job first = new_job(2, 2, dtype), rest = new_job(2, 2, dtype);
    first.steps = 3, first.ckpt = dir, first.ckpt_at = 3;
    rest.ckpt = dir, rest.resume = 1;
    run_job(&whole), run_job(&four), run_job(&first), run_job(&rest);
    expect_ok(&whole), expect_ok(&four), expect_ok(&first), expect_ok(&rest);
    for (int k = 0; k < STEPS; k++)
        assert_int_equal(whole.outer[k], (k + 1) % 2 == 0);
    assert_true(same_params(&four, 0, 1));   /* the end of a round */
    assert_false(same_params(&whole, 0, 1)); /* step 5: inside one */
    assert_false(same_params(&first, 0, 1)); /* step 3: inside one */
    for (int k = 3; k < STEPS; k++)
        if (memcmp(&rest.loss[k], &whole.loss[k], sizeof(float)))
            fail_msg("%s: step %d loss %.9g resumed vs %.9g", vkg_outer_dtype_name(dtype), k + 1,
                     (double)rest.loss[k], (double)whole.loss[k]);
    for (int r = 0; r < 2; r++)
        if (memcmp(rest.params[r], whole.params[r], whole.nparams * sizeof(float)))
            fail_msg("%s: rank %d's parameters after resuming at step 3 differ from the "
                     "uninterrupted run's",
                     vkg_outer_dtype_name(dtype), r);
    printf("%s: resumed mid-round at step 3, bitwise the uninterrupted run (losses %.6f ... "
           "%.6f)\n",
           vkg_outer_dtype_name(dtype), (double)whole.loss[0], (double)whole.loss[STEPS - 1]);
    free_job(&whole), free_job(&four), free_job(&first), free_job(&rest);
}

static void test_resume_mid_round(void **state)
{
    (void)state;
    check_resume(VKG_OUTER_F32);
    check_resume(VKG_OUTER_INT8);
}

/* A replica that diverged (its parameters in outer.bin set to 3e38 where lnfw is, the file's
 * checksum made good) makes the resumed steps' losses non-finite, so they are skipped; the round
 * that ends at step 4 must then not take it in: no outer step, every rank's parameters after
 * step 4 are bitwise the global ones of the checkpoint, the outer momentum too, and the
 * checkpoint of step 4 holds them. */
static void test_diverged_replica_leaves_global_model(void **state)
{
    (void)state;
    const int dts[2] = {VKG_OUTER_F32, VKG_OUTER_INT8};
    for (int di = 0; di < 2; di++) {
        int dt = dts[di];
        char dir[64], path[600], outer[700];
        snprintf(dir, sizeof dir, "ckpt_diverged_%d", dt);
        job first = new_job(2, 2, dt), rest = new_job(2, 2, dt);
        first.steps = 3, first.ckpt = dir, first.ckpt_at = 3;
        run_job(&first);
        expect_ok(&first);
        size_t n = first.nparams, count = 0;
        float *x = NULL;
        vkg_test_path_in(path, sizeof path, dir);
        snprintf(outer, sizeof outer, "%s/step_00000003/outer.bin", path);
        assert_int_equal(vkg_outerfile_read(outer, n, &x, &count), VKG_OK);
        assert_int_equal(count, 5 * n); /* g, m, then replica 1's parameters, m and v */
        float *g = malloc(2 * n * sizeof *g);
        assert_non_null(g);
        memcpy(g, x, 2 * n * sizeof *g);
        for (size_t i = n - 2 * C; i < n - C; i++) /* replica 1's lnfw */
            x[2 * n + i] = 3e38f;
        assert_int_equal(vkg_outerfile_write(outer, n, x, count), VKG_OK);
        rest.ckpt = dir, rest.resume = 1, rest.steps = 1, rest.ckpt_at = 4;
        run_job(&rest);
        expect_ok(&rest);
        assert_true(rest.skipped[3]);
        assert_false(rest.outer[3]);
        assert_true(rest.outer_skipped[3]);
        for (int r = 0; r < 2; r++)
            if (memcmp(rest.params[r], g, n * sizeof *g))
                fail_msg("%s: rank %d's parameters after the round with a diverged replica are "
                         "not the global ones it started from",
                         vkg_outer_dtype_name(dt), r);
        float *y = NULL;
        snprintf(outer, sizeof outer, "%s/step_00000004/outer.bin", path);
        assert_int_equal(vkg_outerfile_read(outer, n, &y, &count), VKG_OK);
        assert_memory_equal(y, g, 2 * n * sizeof *g);     /* the global parameters and momentum */
        assert_memory_equal(y + 2 * n, g, n * sizeof *g); /* replica 1 took them */
        printf("%s: step 4 skipped, its round ended without an outer step: the global model and "
               "the outer momentum bitwise as before, on every rank and in the checkpoint\n",
               vkg_outer_dtype_name(dt));
        free(x), free(y), free(g);
        free_job(&first), free_job(&rest);
    }
}

/* A checkpoint of plain data parallelism (no outer.bin) resumes under DiLoCo: its parameters
 * become the global ones, and the rounds count from step 0 (outer steps at 2 and 4). */
static void test_plain_checkpoint_resumes(void **state)
{
    (void)state;
    job dp = new_job(2, 2, 0), rest = new_job(2, 2, 0);
    dp.sync = 0, dp.steps = 1, dp.ckpt = "ckpt_plain", dp.ckpt_at = 1;
    rest.ckpt = "ckpt_plain", rest.resume = 1;
    run_job(&dp);
    expect_ok(&dp);
    assert_true(same_params(&dp, 0, 1));
    run_job(&rest);
    expect_ok(&rest);
    for (int k = 1; k < STEPS; k++)
        assert_int_equal(rest.outer[k], (k + 1) % 2 == 0);
    assert_false(same_params(&rest, 0, 1)); /* step 5: inside a round */
    free_job(&dp), free_job(&rest);
}

static void expect_refused(job *j, vkg_status want, const char *needle)
{
    run_job(j);
    vkg_test_ranks_refused(j->world, j->st, j->err[0], sizeof j->err[0], want, needle);
    free_job(j);
}

/* Rank 0 refuses what the checkpoint holds (VKG_ERR_MISMATCH naming needle), and every other
 * rank fails with its message. */
static void expect_refused_by_rank0(job *j, const char *needle)
{
    run_job(j);
    for (int r = 0; r < j->world; r++) {
        printf("rank %d: %s: %s\n", r, vkg_status_name(j->st[r]), j->err[r]);
        if (j->st[r] == VKG_OK || (r == 0 && j->st[r] != VKG_ERR_MISMATCH) ||
            !strstr(j->err[r], needle))
            fail_msg("rank %d: expected a refusal naming '%s', got %s: %s", r, needle,
                     vkg_status_name(j->st[r]), j->err[r]);
    }
    free_job(j);
}

static void test_refused(void **state)
{
    (void)state;
    job j = new_job(1, 2, 0);
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--sync diloco needs 2 or more data-parallel ranks");
    j = new_job(2, 2, 0), j.zero = 1;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--zero 1");
    j = new_job(4, 2, 0), j.pp = 2, j.accum = 2, j.fragments = 2, j.delay = 1;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--outer-delay 1 does not combine with --pp 2");
    j = new_job(2, 0, 0);
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--inner-steps");
    j = new_job(2, 2, 0), j.grad_bf16 = 1;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--grad-dtype");
    j = new_job(2, 2, 0), j.outer_mu = 1.0f;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--outer-momentum");
    j = new_job(2, 4, 0), j.fragments = 3; /* L = 2 layers */
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--fragments 3");
    j = new_job(2, 1, 0), j.fragments = 2;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--inner-steps");
    j = new_job(2, 2, 0), j.delay = 3;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--outer-delay 3");
    j = new_job(2, 2, 0), j.delay = 1, j.mix = 1.0f;
    expect_refused(&j, VKG_ERR_INVALID_ARG, "--outer-mix");
    /* a DiLoCo checkpoint (2 replicas of 3 rows) resumed without DiLoCo, or on 3 ranks of 2 rows
     * (the same total batch) */
    job save = new_job(2, 2, 0);
    save.steps = 1, save.batch = 3, save.ckpt = "ckpt_refuse", save.ckpt_at = 1;
    run_job(&save);
    expect_ok(&save);
    free_job(&save);
    j = new_job(2, 2, 0), j.batch = 3, j.sync = 0, j.ckpt = "ckpt_refuse", j.resume = 1;
    expect_refused_by_rank0(&j, "--sync diloco");
    j = new_job(3, 2, 0), j.ckpt = "ckpt_refuse", j.resume = 1;
    expect_refused_by_rank0(&j, "the same number of ranks");
    j = new_job(2, 2, 0), j.batch = 3, j.delay = 1, j.ckpt = "ckpt_refuse", j.resume = 1;
    expect_refused_by_rank0(&j, "--outer-delay");
}

/* Whether element i of the whole parameter vector is in fragment p of 2, written apart from
 * diloco.c: the layers l with l % 2 == p of every stacked tensor, wte's and wpe's rows
 * [p R / 2, (p + 1) R / 2), lnfw and lnfb with the last layer (L - 1) % 2. */
static int in_fragment(size_t i, int p)
{
    enum { VP = 128 }; /* V = 96 padded */
    size_t at = 0;
    size_t stacked[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    if (i < (size_t)VP * C)
        return (int)(i / C) * 2 / VP == p;
    at = (size_t)VP * C;
    if (i < at + (size_t)MAXT * C)
        return (int)((i - at) / C) * 2 / MAXT == p;
    at += (size_t)MAXT * C;
    for (int k = 0; k < 12; k++) {
        if (i < at + stacked[k] * L)
            return (int)((i - at) / stacked[k]) % 2 == p;
        at += stacked[k] * L;
    }
    return (L - 1) % 2 == p;
}

/* Fragment p's elements of x (n) packed in order into out; their count. */
static size_t pack_fragment(const float *x, size_t n, int p, float *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (in_fragment(i, p))
            out[k++] = x[i];
    return k;
}

/* Streaming, H = 2, 2 fragments, delay 1: fragment 0's round ends at step 1 (offset H / 2),
 * fragment 1's at step 2. After step 2, fragment 0's outer step has landed (started from the
 * replicas' parameters after step 1) and fragment 1's exchange is in flight. The replicas'
 * parameters after steps 1 and 2 without any outer step come from a run whose round is longer. */
static void check_streaming(int N, int dtype, float mix)
{
    job alone1 = new_job(N, 100, dtype), alone2 = new_job(N, 100, dtype);
    alone1.steps = 1, alone2.steps = 2;
    job s = new_job(N, 2, dtype);
    s.steps = 2, s.fragments = 2, s.delay = 1, s.mix = mix;
    run_job(&alone1), run_job(&alone2), run_job(&s);
    expect_ok(&alone1), expect_ok(&alone2), expect_ok(&s);
    assert_int_equal(s.outer[0], 0); /* fragment 0 started, nothing landed */
    assert_int_equal(s.outer[1], 1); /* fragment 0 landed */
    size_t n = s.nparams;
    assert_memory_equal(s.init, alone1.init, n * sizeof(float));
    float *P[MAXR], *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m);
    assert_true(g && m);
    size_t n0 = pack_fragment(s.init, n, 0, g);
    assert_true(n0 > 0 && n0 < n);
    for (int r = 0; r < N; r++) {
        P[r] = malloc(n0 * sizeof *P[r]);
        assert_non_null(P[r]);
        assert_int_equal(pack_fragment(alone1.params[r], n, 0, P[r]), n0);
    }
    vkg_test_outer_ref(N, n0, P, g, m, (vkg_outer_dtype)dtype, 0.7f, 0.9f, VKG_TEST_OUTER_EXACT);
    size_t bad = 0, first = 0;
    for (int r = 0; r < N; r++)
        for (size_t i = 0, k = 0; i < n; i++) {
            float own = alone2.params[r][i], want = own;
            if (in_fragment(i, 0)) {
                want = mix == 0.0f ? g[k] : mix * own + (1.0f - mix) * g[k];
                k++;
            }
            if (memcmp(&want, &s.params[r][i], sizeof want) && !bad++)
                first = i;
        }
    if (bad)
        fail_msg("%s, %d ranks, mix %g: %zu parameters differ from the reference (first %zu: "
                 "%.9g)",
                 vkg_outer_dtype_name((vkg_outer_dtype)dtype), N, (double)mix, bad, first,
                 (double)s.params[0][first]);
    printf("%s, %d ranks, mix %g: fragment 0 (%zu of %zu parameters) landed bitwise as the "
           "reference's, one step late; fragment 1 untouched\n",
           vkg_outer_dtype_name((vkg_outer_dtype)dtype), N, (double)mix, n0, n);
    for (int r = 0; r < N; r++)
        free(P[r]);
    free(g), free(m);
    free_job(&alone1), free_job(&alone2), free_job(&s);
}

static void test_streaming_is_the_reference(void **state)
{
    (void)state;
    check_streaming(2, VKG_OUTER_F32, 0.0f);
    check_streaming(2, VKG_OUTER_F32, 0.5f);
    check_streaming(3, VKG_OUTER_F32, 0.25f);
    check_streaming(2, VKG_OUTER_INT8, 0.5f);
}

/* Streaming: the last rank fails after step 1 while fragment 0's exchange runs beside step 2:
 * its piece ends with the others' and the failure reaches them at once, naming the rank and its
 * reason, on 2 and 3 ranks. */
static void test_streaming_peer_fails_in_flight(void **state)
{
    (void)state;
    for (int N = 2; N <= 3; N++) {
        job j = new_job(N, 2, VKG_OUTER_INT8);
        j.fragments = 2, j.quit_after = 1;
        run_job(&j);
        printf("%d ranks, rank %d: %s: %s\n", N, N - 1, vkg_status_name(j.st[N - 1]), j.err[N - 1]);
        assert_int_not_equal(j.st[N - 1], VKG_OK);
        assert_non_null(strstr(j.err[N - 1], "no tokenizer")); /* the shard has none */
        for (int r = 0; r < N - 1; r++) {
            printf("%d ranks, rank %d: %s: %s\n", N, r, vkg_status_name(j.st[r]), j.err[r]);
            if (j.st[r] != VKG_ERR_PEER || !strstr(j.err[r], "no tokenizer"))
                fail_msg("rank %d: expected VKG_ERR_PEER with rank %d's reason, got %s: %s", r,
                         N - 1, vkg_status_name(j.st[r]), j.err[r]);
        }
        free_job(&j);
    }
}

/* Streaming with a checkpoint at step 3, when fragment 0's exchange (started at 3) is in flight:
 * resumed, steps 4 and 5 are bitwise the uninterrupted run's. */
static void test_streaming_resume_in_flight(void **state)
{
    (void)state;
    for (int dtype = VKG_OUTER_F32; dtype <= VKG_OUTER_INT8; dtype += 2) {
        char dir[64];
        snprintf(dir, sizeof dir, "ckpt_stream_%d", dtype);
        job whole = new_job(2, 2, dtype), first = new_job(2, 2, dtype), rest = new_job(2, 2, dtype);
        whole.fragments = first.fragments = rest.fragments = 2;
        first.steps = 3, first.ckpt = dir, first.ckpt_at = 3;
        rest.ckpt = dir, rest.resume = 1;
        run_job(&whole), run_job(&first), run_job(&rest);
        expect_ok(&whole), expect_ok(&first), expect_ok(&rest);
        for (int k = 1; k < STEPS; k++) /* a fragment lands every step from 2 on */
            assert_int_equal(whole.outer[k], 1);
        for (int k = 3; k < STEPS; k++)
            if (memcmp(&rest.loss[k], &whole.loss[k], sizeof(float)))
                fail_msg("%s: step %d loss %.9g resumed vs %.9g",
                         vkg_outer_dtype_name((vkg_outer_dtype)dtype), k + 1, (double)rest.loss[k],
                         (double)whole.loss[k]);
        for (int r = 0; r < 2; r++)
            if (memcmp(rest.params[r], whole.params[r], whole.nparams * sizeof(float)))
                fail_msg("%s: rank %d's parameters after resuming in flight differ",
                         vkg_outer_dtype_name((vkg_outer_dtype)dtype), r);
        printf("%s streaming: resumed with an exchange in flight at step 3, bitwise the "
               "uninterrupted run\n",
               vkg_outer_dtype_name((vkg_outer_dtype)dtype));
        free_job(&whole), free_job(&first), free_job(&rest);
    }
}

/* Pipelines: dp = 2 replicas, each a pipeline of pp = 2 stages (ranks 0, 1 stage 0; 2, 3 stage
 * 1), 2 micro-batches a step. */
static job pp_job(int H, int dtype)
{
    job j = new_job(4, H, dtype);
    j.pp = 2, j.accum = 2;
    return j;
}

/* Whole-model replicas on the same micro-batches (2 ranks, 2 micro-batches a step). */
static job replicas_job(int H, int dtype)
{
    job j = new_job(2, H, dtype);
    j.accum = 2;
    return j;
}

/* Replica 1's parameters in the outer state of checkpoint dir at step (no delay: g, m, then
 * replica 1's parameters, m, v). */
static float *replica1_from_checkpoint(const char *dir, int step, size_t n)
{
    char name[600], path[800];
    snprintf(name, sizeof name, "%s/step_%08d/outer.bin", dir, step);
    vkg_test_path_in(path, sizeof path, name);
    float *x = NULL;
    size_t count = 0;
    vkg_status st = vkg_outerfile_read(path, n, &x, &count);
    if (st != VKG_OK)
        fail_msg("%s: %s", path, vkg_error_message());
    assert_int_equal(count, 5 * n);
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    memcpy(p, x + 2 * n, n * sizeof *p);
    free(x);
    return p;
}

/* The first outer step under pipelines against the reference, fp32: with H = 1 over the whole
 * model, and with 2 fragments (H = 2: fragment 0's round ends at step 1, no delay under
 * pipelines) over fragment 0, fragment 1 left as replica 0's own. The replicas' parameters after
 * step 1 come from a run whose round is longer: replica 0's gathered, replica 1's from the
 * checkpoint's outer state. */
static void test_pipeline_outer_step_is_the_reference(void **state)
{
    (void)state;
    job alone = pp_job(100, VKG_OUTER_F32), whole = pp_job(1, VKG_OUTER_F32);
    job frag = pp_job(2, VKG_OUTER_F32);
    alone.steps = whole.steps = frag.steps = 1;
    alone.ckpt = "ckpt_pp_alone", alone.ckpt_at = 1;
    frag.fragments = 2;
    run_job(&alone), run_job(&whole), run_job(&frag);
    expect_ok(&alone), expect_ok(&whole), expect_ok(&frag);
    assert_int_equal(alone.outer[0], 0);
    assert_int_equal(whole.outer[0], 1);
    assert_int_equal(frag.outer[0], 1);
    size_t n = alone.nparams;
    assert_memory_equal(alone.init, whole.init, n * sizeof(float));
    assert_memory_equal(alone.init, frag.init, n * sizeof(float));
    float *P[2] = {alone.params[0], replica1_from_checkpoint("ckpt_pp_alone", 1, n)};
    assert_memory_not_equal(P[0], P[1], n * sizeof(float)); /* inside a round: each its own */
    float *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m);
    assert_true(g && m);
    memcpy(g, alone.init, n * sizeof *g);
    vkg_test_outer_ref(2, n, P, g, m, VKG_OUTER_F32, 0.7f, 0.9f, VKG_TEST_OUTER_EXACT);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&g[i], &whole.params[0][i], 4) && !bad++)
            first = i;
    if (bad)
        fail_msg("pp = 2: %zu of %zu parameters differ from the reference's outer step, first "
                 "%zu: %.9g vs %.9g",
                 bad, n, first, (double)whole.params[0][first], (double)g[first]);
    /* fragment 0 of 2: the reference over its elements (fp32: element by element) */
    memcpy(g, alone.init, n * sizeof *g), memset(m, 0, n * sizeof *m);
    vkg_test_outer_ref(2, n, P, g, m, VKG_OUTER_F32, 0.7f, 0.9f, VKG_TEST_OUTER_EXACT);
    size_t n0 = 0;
    for (size_t i = 0; i < n; i++) {
        float want = in_fragment(i, 0) ? g[i] : P[0][i];
        n0 += (size_t)in_fragment(i, 0);
        if (memcmp(&want, &frag.params[0][i], 4) && !bad++)
            first = i;
    }
    if (bad)
        fail_msg("pp = 2, 2 fragments: %zu parameters differ from the reference (first %zu: "
                 "%.9g)",
                 bad, first, (double)frag.params[0][first]);
    printf("pp = 2 x dp = 2, fp32: the first outer step bitwise the reference's (all %zu "
           "parameters; with 2 fragments fragment 0's %zu, fragment 1 untouched)\n",
           n, n0);
    free(P[1]), free(g), free(m);
    free_job(&alone), free_job(&whole), free_job(&frag);
}

/* Five steps (H = 2: outer steps at 2 and 4; clipping on) under pipelines against whole-model
 * replicas on the same micro-batches, and a checkpoint at step 3 resumed under pipelines
 * (bitwise the uninterrupted pipelines) and from the whole-model replicas' checkpoint (within
 * the bound): fp32 within 1e-5, int8 within 1e-3. */
static void check_pipeline_trains(int dtype, double bound)
{
    const char *name = vkg_outer_dtype_name((vkg_outer_dtype)dtype);
    char dir[64], wdir[64], tdir[64];
    snprintf(dir, sizeof dir, "ckpt_pp_%d", dtype);
    snprintf(tdir, sizeof tdir, "ckpt_pp_tie_%d", dtype);
    snprintf(wdir, sizeof wdir, "ckpt_rep_%d", dtype);
    job ref = replicas_job(2, dtype), pp = pp_job(2, dtype);
    job first = pp_job(2, dtype), rest = pp_job(2, dtype), cross = pp_job(2, dtype);
    ref.ckpt = wdir, ref.ckpt_at = 3;
    pp.ckpt = tdir, pp.ckpt_at = 4; /* after an outer step: the wte copies checked */
    first.steps = 3, first.ckpt = dir, first.ckpt_at = 3;
    rest.ckpt = dir, rest.resume = 1;
    cross.ckpt = wdir, cross.resume = 1;
    run_job(&ref), run_job(&pp), run_job(&first), run_job(&rest), run_job(&cross);
    expect_ok(&ref), expect_ok(&pp), expect_ok(&first), expect_ok(&rest), expect_ok(&cross);
    size_t n = ref.nparams;
    assert_int_equal(pp.nparams, n);
    for (int k = 0; k < STEPS; k++) {
        assert_int_equal(pp.outer[k], (k + 1) % 2 == 0);
        assert_int_equal(ref.outer[k], pp.outer[k]);
        if (fabs(pp.loss[k] - ref.loss[k]) > 1e-5 * fabs(ref.loss[k]))
            fail_msg("%s: step %d loss %.9g under pipelines vs %.9g", name, k + 1,
                     (double)pp.loss[k], (double)ref.loss[k]);
    }
    assert_memory_equal(&pp.loss[0], &ref.loss[0], sizeof(float)); /* the same first forward */
    vkg_test_cmp cmp;
    if (!vkg_test_compare("pipelines vs replicas", pp.params[0], ref.params[0], n, bound, &cmp))
        fail_msg("%s: parameters under pipelines rel L2 %.3e > %.0e", name, cmp.rel_l2, bound);
    printf("%s, pp = 2 x dp = 2 vs 2 whole-model replicas, 5 steps: losses within 1e-5, "
           "parameters rel L2 %.2e\n",
           name, cmp.rel_l2);
    for (int k = 3; k < STEPS; k++)
        if (memcmp(&rest.loss[k], &pp.loss[k], sizeof(float)))
            fail_msg("%s: step %d loss %.9g resumed under pipelines vs %.9g", name, k + 1,
                     (double)rest.loss[k], (double)pp.loss[k]);
    if (memcmp(rest.params[0], pp.params[0], n * sizeof(float)))
        fail_msg("%s: parameters after resuming under pipelines at step 3 differ", name);
    if (!vkg_test_compare("replicas' checkpoint under pipelines", cross.params[0], ref.params[0], n,
                          bound, &cmp))
        fail_msg("%s: the replicas' checkpoint resumed under pipelines: rel L2 %.3e > %.0e", name,
                 cmp.rel_l2, bound);
    printf("%s: resumed at step 3 under pipelines bitwise; the replicas' checkpoint resumed under "
           "pipelines within %.2e\n",
           name, cmp.rel_l2);
    free_job(&ref), free_job(&pp), free_job(&first), free_job(&rest), free_job(&cross);
}

static void test_pipeline_trains_as_replicas(void **state)
{
    (void)state;
    check_pipeline_trains(VKG_OUTER_F32, 1e-5);
    check_pipeline_trains(VKG_OUTER_INT8, 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_outer_step_is_the_reference),
        cmocka_unit_test(test_outer_step_is_the_reference_family),
        cmocka_unit_test(test_mean_when_lr_one),
        cmocka_unit_test(test_resume_mid_round),
        cmocka_unit_test(test_plain_checkpoint_resumes),
        cmocka_unit_test(test_diverged_replica_leaves_global_model),
        cmocka_unit_test(test_streaming_is_the_reference),
        cmocka_unit_test(test_streaming_resume_in_flight),
        cmocka_unit_test(test_streaming_peer_fails_in_flight),
        cmocka_unit_test(test_pipeline_outer_step_is_the_reference),
        cmocka_unit_test(test_pipeline_trains_as_replicas),
    };
    if (getenv("VKG_TEST_FILTER")) /* e.g. VKG_TEST_FILTER='test_pipeline*' */
        cmocka_set_test_filter(getenv("VKG_TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
