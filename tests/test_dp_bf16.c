/* Gradients exchanged in bf16 (--grad-dtype bf16, vkg_train_config.grad_dtype). Ranks are
 * threads of this process, each with its own trainer and Vulkan device (validation layer on and
 * checked), joined by the inproc transport; test_dp's tiny GPT-2 over 5 steps with weight decay,
 * evaluation and clipping:
 *  - 2 ranks (2,2) and 3 ranks (2,1,1) with bf16 exchange against one device with B = 4 on the
 *    same micro-batches: per-step losses within LOSS_TOL relative, gradient norms within
 *    NORM_TOL relative and final parameters within PARAM_TOL relative L2, with a bucket per layer
 * (zero-copy where the device imports host memory), with one reduction after the backward pass, and
 * by the copy path (bitwise the zero-copy run). Why a tolerance: each rank's gradient is rounded to
 * bf16 (8 significant bits: by at most 2^-8 of each value) and the ranks' fp32 sum is rounded once
 * more, so the reduced gradient differs from one device's by up to about 2^-8 of each contribution,
 * where fp32 data parallelism agrees to 1e-5 (test_dp). AdamW divides each step by the gradient's
 *    root mean square, so most parameters move by about 2^-8 of the step (lr 3e-3) more or less;
 *    but a gradient element near zero (the ranks' parts cancelling) may change sign under the
 *    rounding, and AdamW then steps it the other way: up to 2 lr = 6e-3 apart after a step.
 *    Measured here: losses within 5e-5 relative, norms within 2.5e-3 (the norm of the rounded
 *    gradient), parameters within 1.5e-3 relative L2 (max abs 6e-3, the sign flips); the bounds
 *    below leave a margin of 3 to 10 over that and catch a wrong sum (the ranks' mean in place
 *    of their sum moves the norms by 40% and the losses by 9e-4). The bf16 runs are also asserted
 * NOT bitwise the fp32 data-parallel run's, so the option really narrows;
 *  - two identical bf16 runs are bitwise the same (losses, norms, every rank's parameters), and
 *    so is the run through the shared-memory segment (bf16 buffers read in place there);
 *  - ZeRO-1 with bf16 is bitwise data parallelism with bf16 (its bf16 reduce-scatter adds in the
 *    bf16 allreduce's order and rounds once), with buckets and without on 2 ranks, and on 3
 *    ranks (2,1,1), where the order of additions can show; it says it reduce-scatters in bf16;
 *  - a pipeline (dp = 2 x pp = 2) with bf16 against one device within the same tolerance, and
 *    not bitwise the fp32 pipeline;
 *  - --precision bf16 with bf16 exchange on 2 ranks against --precision bf16 on one device,
 *    within the tolerance (the exchange's rounding is independent of the model's precision);
 *  - bf16 exchange on one rank, or with a dtype other than fp32 and bf16, is refused naming
 *    --grad-dtype; ranks that disagree on it are refused naming the field;
 *  - the start-up description says "bf16 (" on every bf16 path and "fp32" by default;
 *  - the first comparison (2 and 3 ranks with bf16 exchange against one device, the same
 *    tolerances, the copy path bitwise) on Llama (rank_threads.h: GQA, RMSNorm, rope, SwiGLU,
 *    tied), and --precision bf16 with bf16 exchange within the tolerance on Llama and on Qwen3
 *    (whose QK-norm keeps q, k, v and the attention output in fp32 under bf16: its kernel is
 *    fp32's). */
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
#include "train/trainer_internal.h"
#include "vkgpt/comm.h"
#include "vkgpt/train.h"

enum { L = 2, NH = 2, C = 32, V = 96, MAXT = 16, T = 16, STEPS = 5, MAXR = 4 };
#define LOSS_TOL 5e-4
#define NORM_TOL 1e-2
#define PARAM_TOL 5e-3

typedef struct job {
    int world, zero, pp, micro; /* micro: accumulation steps (pipeline micro-batches) */
    int rank_batch[MAXR];
    int batch;
    long long bucket_bytes;
    int copy_path;
    vkg_comm_dtype dtype;
    int odd_dtype; /* rank 1 exchanges fp32 */
    vkg_comm_shm shm;
    int precision;
    /* results: rank 0's, and every rank's parameters */
    float loss[STEPS], norm[STEPS];
    char exchange[256], path[96]; /* rank 0's gradient exchange and collectives */
    uint64_t zc_buckets;
    int can_import;
    size_t nparams;
    float *params[MAXR];
    vkg_status st[MAXR];
    char err[MAXR][512];
    vkg_test_family family; /* the model: GPT-2 of L, NH, C, or a config.json of this family */
    char model[600];        /* its path (run_ok writes it) */
} job;

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_dp_bf16") != 0)
        return -1;
    char path[600];
    vkg_test_path_in(path, sizeof path, "train.bin");
    vkg_test_write_shard(path, 40 * 4 * T + 1, 41, V, 1);
    vkg_test_path_in(path, sizeof path, "val.bin");
    vkg_test_write_shard(path, 4 * 4 * T + 1, 42, V, 1);
    return 0;
}

/* The job's training config for rank r (paths in data and val). */
static vkg_train_config config_of(const job *j, const vkg_test_rank *a, char *data, char *val)
{
    vkg_test_path_in(data, 600, "train.bin");
    vkg_test_path_in(val, 600, "val.bin");
    vkg_train_config c = vkg_test_rank_config();
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.model = j->family == VKG_TEST_GPT2 ? NULL : j->model;
    c.seed = 79, c.data = data, c.val_data = val, c.shuffle = 0;
    c.batch = j->batch, c.seq = T, c.total_batch = 4 * T;
    c.steps = STEPS, c.lr = 3e-3f, c.warmup = 1, c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.eval_every = 2, c.eval_batches = 2;
    c.precision = j->precision;
    vkg_test_rank_join(&c, a, j->world);
    c.par.comm.shm = j->shm;
    if (j->world > 1 && !j->pp)
        c.par.rank_batch = j->rank_batch, c.par.rank_batch_count = j->world;
    c.par.bucket_bytes = j->bucket_bytes, c.par.force_copy_path = j->copy_path;
    c.par.zero = j->zero, c.par.pp = j->pp;
    c.par.grad_dtype = j->odd_dtype && a->rank == 1 ? VKG_COMM_F32 : j->dtype;
    return c;
}

static void *run_rank(void *p)
{
    vkg_test_rank *a = p;
    job *j = a->job;
    char data[600], val[600];
    vkg_train_config c = config_of(j, a, data, val);
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    for (int n = 0; st == VKG_OK && n < STEPS; n++) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK && a->rank == 0)
            j->loss[n] = s.loss, j->norm[n] = s.grad_norm;
    }
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        if (a->rank == 0) {
            snprintf(j->exchange, sizeof j->exchange, "%s", info.grad_exchange);
            snprintf(j->path, sizeof j->path, "%s", info.comm_path);
            j->zc_buckets = vkg_strategy_zero_copy_buckets(t->par);
            j->can_import = vkg_device_get_info(t->dev)->external_memory_host;
        }
        j->nparams = info.num_params;
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        st = j->params[a->rank] ? vkg_trainer_get_params(t, j->params[a->rank]) : VKG_ERR_NOMEM;
    }
    j->st[a->rank] = vkg_test_rank_finish(&t, st, j->err[a->rank], sizeof j->err[a->rank]);
    return NULL;
}

/* Run j; every rank must succeed and (without a pipeline) hold rank 0's parameters. */
static void run_ok(job *j)
{
    vkg_test_family_config(j->family, L, V, MAXT, j->model, sizeof j->model);
    vkg_test_run_ranks(j->world, j, run_rank);
    vkg_test_ranks_ok(j->world, j->st, j->err[0], sizeof j->err[0], j->pp ? NULL : j->params,
                      j->nparams);
}

static void free_job(job *j)
{
    for (int r = 0; r < MAXR; r++) {
        free(j->params[r]);
        j->params[r] = NULL;
    }
}

static job single(void)
{
    return (job){.world = 1, .batch = 4};
}

static job ranks(int world, const int *b, long long bucket_bytes)
{
    job j = {.world = world, .batch = b[0], .bucket_bytes = bucket_bytes, .dtype = VKG_COMM_BF16};
    for (int r = 0; r < world; r++)
        j.rank_batch[r] = b[r];
    return j;
}

/* Losses and final parameters of a within the bf16 exchange's tolerance of b's. */
static void expect_close(const char *what, const job *a, const job *b)
{
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs((double)a->loss[s] - b->loss[s]) / fabs((double)b->loss[s]);
        printf("%s step %d: loss %.7f vs %.7f (rel %.2e), norm %.5f vs %.5f\n", what, s + 1,
               (double)a->loss[s], (double)b->loss[s], rel, (double)a->norm[s], (double)b->norm[s]);
        if (!(rel <= LOSS_TOL))
            fail_msg("%s: step %d loss %.8f vs %.8f (rel %.3e > %.1e)", what, s + 1,
                     (double)a->loss[s], (double)b->loss[s], rel, LOSS_TOL);
        rel = fabs((double)a->norm[s] - b->norm[s]) / fabs((double)b->norm[s]);
        if (!(rel <= NORM_TOL))
            fail_msg("%s: step %d gradient norm %.6f vs %.6f (rel %.3e > %.1e)", what, s + 1,
                     (double)a->norm[s], (double)b->norm[s], rel, NORM_TOL);
    }
    vkg_test_cmp cmp;
    assert_int_equal(a->nparams, b->nparams);
    if (!vkg_test_compare(what, a->params[0], b->params[0], a->nparams, PARAM_TOL, &cmp))
        fail_msg("%s: final parameters differ (rel L2 %.3e > %.1e)", what, cmp.rel_l2, PARAM_TOL);
    printf("%s: final parameters rel L2 %.3e, max abs %.3e\n", what, cmp.rel_l2, cmp.max_abs);
}

/* a and b trained bitwise alike: losses, norms and parameters. */
static void expect_bitwise(const char *what, const job *a, const job *b)
{
    assert_int_equal(a->nparams, b->nparams);
    if (memcmp(a->loss, b->loss, sizeof a->loss) || memcmp(a->norm, b->norm, sizeof a->norm))
        fail_msg("%s: the losses or gradient norms differ", what);
    for (size_t i = 0; i < a->nparams; i++)
        if (memcmp(&a->params[0][i], &b->params[0][i], sizeof(float)))
            fail_msg("%s: parameter %zu is %.9g vs %.9g (first difference)", what, i,
                     (double)a->params[0][i], (double)b->params[0][i]);
}

/* a's parameters are not b's bit for bit (the exchange really changed something). */
static void expect_apart(const char *what, const job *a, const job *b)
{
    size_t d = 0;
    for (size_t i = 0; i < a->nparams; i++)
        d += memcmp(&a->params[0][i], &b->params[0][i], sizeof(float)) != 0;
    printf("%s: %zu of %zu parameters differ\n", what, d, a->nparams);
    if (d < a->nparams / 10)
        fail_msg("%s: only %zu of %zu parameters differ", what, d, a->nparams);
}

static void expect_exchange(const job *j, const char *prefix)
{
    printf("exchange: %s\n", j->exchange);
    if (strncmp(j->exchange, prefix, strlen(prefix)))
        fail_msg("gradient exchange '%s', expected '%s...'", j->exchange, prefix);
}

static void two_and_three_ranks_match_one(vkg_test_family f)
{
    const int b2[2] = {2, 2}, b3[3] = {2, 1, 1};
    job one = single(), fp32 = ranks(2, b2, 1);
    fp32.dtype = VKG_COMM_F32;
    job per_layer = ranks(2, b2, 1), flat = ranks(2, b2, -1), copied = ranks(2, b2, 1);
    job three = ranks(3, b3, 1);
    copied.copy_path = 1;
    job *runs[] = {&one, &fp32, &per_layer, &flat, &copied, &three};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        runs[i]->family = f, run_ok(runs[i]);
    expect_exchange(&fp32, "fp32");
    expect_exchange(&per_layer, "bf16 ("), expect_exchange(&flat, "bf16 (");
    assert_true(one.loss[STEPS - 1] < one.loss[0]);
    expect_close("2 ranks bf16, a bucket per layer vs 1 rank", &per_layer, &one);
    expect_close("2 ranks bf16, no overlap vs 1 rank", &flat, &one);
    expect_close("3 ranks (2,1,1) bf16, a bucket per layer vs 1 rank", &three, &one);
    expect_apart("2 ranks bf16 vs fp32", &per_layer, &fp32);
    /* zero-copy where the device imports host memory: every bucket of every step */
    /* L + 3 gradient units; L + 2 for a tied head without wpe (no embeddings unit) */
    int units = L + 3 - (f == VKG_TEST_LLAMA || f == VKG_TEST_QWEN2);
    if (per_layer.can_import && per_layer.zc_buckets != (uint64_t)STEPS * units)
        fail_msg("%llu buckets zero-copy, expected %d", (unsigned long long)per_layer.zc_buckets,
                 STEPS * units);
    assert_int_equal(copied.zc_buckets, 0);
    expect_bitwise("2 ranks bf16: zero-copy vs the copy path", &per_layer, &copied);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        free_job(runs[i]);
}

static void test_two_and_three_ranks_match_one(void **state)
{
    (void)state;
    two_and_three_ranks_match_one(VKG_TEST_GPT2);
}

static void test_two_and_three_ranks_match_one_llama(void **state)
{
    (void)state;
    two_and_three_ranks_match_one(VKG_TEST_LLAMA);
}

static void test_deterministic(void **state)
{
    (void)state;
    const int b[2] = {2, 2};
    job a = ranks(2, b, 1), again = ranks(2, b, 1), shm = ranks(2, b, 1);
    shm.shm = VKG_COMM_SHM_REQUIRE;
    run_ok(&a), run_ok(&again), run_ok(&shm);
    printf("%s vs %s\n", shm.path, a.path);
    /* without shared memory in the build, the fallback is said in the path */
    assert_non_null(strstr(shm.path, vkg_comm_has_shm() ? "shm (" : "zmq inproc (--transport shm"));
    assert_non_null(strstr(a.path, "zmq inproc"));
    expect_bitwise("2 ranks bf16, twice", &a, &again);
    expect_bitwise("2 ranks bf16, over shm vs ZeroMQ", &shm, &a);
    free_job(&a), free_job(&again), free_job(&shm);
}

static void test_zero_equals_dp(void **state)
{
    (void)state;
    const int b[3] = {2, 2}, b3[3] = {2, 1, 1};
    static const char *const what[] = {"ZeRO-1 vs dp, bf16, buckets",
                                       "ZeRO-1 vs dp, bf16, no overlap",
                                       "ZeRO-1 vs dp, bf16, 3 ranks (2,1,1), buckets"};
    for (int v = 0; v < 3; v++) {
        job dp = v < 2 ? ranks(2, b, v ? -1 : 1) : ranks(3, b3, 1), zero = dp;
        zero.zero = 1;
        run_ok(&dp), run_ok(&zero);
        expect_exchange(&zero, "bf16 (rounded to nearest even, reduce-scattered in bf16");
        expect_bitwise(what[v], &zero, &dp);
        free_job(&dp), free_job(&zero);
    }
}

static void test_pipeline(void **state)
{
    (void)state;
    job one = single(), pipe = {.world = 4, .pp = 2, .batch = 1, .dtype = VKG_COMM_BF16};
    job fp32 = pipe;
    fp32.dtype = VKG_COMM_F32;
    run_ok(&one), run_ok(&pipe), run_ok(&fp32);
    expect_exchange(&pipe, "bf16 (");
    expect_close("dp 2 x pp 2 bf16 vs 1 rank", &pipe, &one);
    expect_apart("dp 2 x pp 2 bf16 vs fp32", &pipe, &fp32);
    free_job(&one), free_job(&pipe), free_job(&fp32);
}

static void bf16_precision(vkg_test_family f)
{
    job one = single(), two = ranks(2, (const int[]){2, 2}, 1);
    one.precision = two.precision = VKG_PRECISION_BF16;
    one.family = two.family = f;
    run_ok(&one), run_ok(&two);
    char what[96];
    snprintf(what, sizeof what, "%s --precision bf16: 2 ranks bf16 exchange vs 1 rank",
             vkg_test_family_name(f));
    expect_close(what, &two, &one);
    free_job(&one), free_job(&two);
}

static void test_bf16_precision(void **state)
{
    (void)state;
    bf16_precision(VKG_TEST_GPT2);
}

/* Llama; Qwen3, whose QK-norm keeps q, k, v and the attention output in fp32 under bf16. */
static void test_bf16_precision_family(void **state)
{
    (void)state;
    bf16_precision(VKG_TEST_LLAMA);
    bf16_precision(VKG_TEST_QWEN3);
}

static void expect_refused(job j, vkg_status want, const char *needle)
{
    vkg_test_run_ranks(j.world, &j, run_rank);
    vkg_test_ranks_refused(j.world, j.st, j.err[0], sizeof j.err[0], want, needle);
    free_job(&j);
}

static void test_refused(void **state)
{
    (void)state;
    job alone = single();
    alone.dtype = VKG_COMM_BF16;
    expect_refused(alone, VKG_ERR_INVALID_ARG, "--grad-dtype bf16 needs 2 or more data-parallel");
    job half = ranks(2, (const int[]){2, 2}, 1);
    half.dtype = VKG_COMM_F16;
    expect_refused(half, VKG_ERR_INVALID_ARG, "--grad-dtype: dtype 2 is neither fp32 nor bf16");
    job piped = {.world = 2, .pp = 2, .batch = 2, .dtype = VKG_COMM_BF16};
    expect_refused(piped, VKG_ERR_INVALID_ARG, "--grad-dtype bf16 needs 2 or more data-parallel");
    job odd = ranks(2, (const int[]){2, 2}, 1);
    odd.odd_dtype = 1;
    expect_refused(odd, VKG_ERR_MISMATCH, "gradient exchange dtype (--grad-dtype)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_and_three_ranks_match_one),
        cmocka_unit_test(test_two_and_three_ranks_match_one_llama),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_zero_equals_dp),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_bf16_precision),
        cmocka_unit_test(test_bf16_precision_family),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
