/* ZeRO-1 (--zero 1) is data parallelism bit for bit, with 1/N of AdamW's moments on each rank.
 * Ranks are threads of this process, each with its own trainer and Vulkan device (validation
 * layer on and checked), joined by the inproc transport; the model is test_dp's tiny GPT-2 over
 * 5 steps with weight decay, evaluation and clipping (the gradient norm exceeds the clip, so the
 * norm decides the update):
 *  - 2 ranks (2,2) and 3 ranks (2,1,1): per-step losses, gradient norms, eval losses and every
 *    rank's final parameters are bitwise those of the unsharded data-parallel run on the same
 *    micro-batches, with a bucket per layer (reduce-scatter overlapped with the backward pass),
 *    with the default buckets, with one reduction after the backward pass, (2 ranks) with the
 *    buckets read through host copies as on a discrete GPU, (2 ranks) with the buckets by the copy
 *    path instead of zero-copy (also bitwise the zero-copy run), with 2 accumulation steps (rows
 * 1,1; only the last micro-batch communicates), and (3 ranks) with the allreduce forced onto the
 *    ring, which adds each chunk in another order (its parameters differ from the rank-order
 *    run's: the order matters, and is kept);
 *  - each rank's AdamW holds the moments of its shard only: its device bytes are exactly what
 *    vkg_strategy_zero_plan computes for its rank, the shards tile the parameters, and each is
 *    1/N of them give or take one partial sum of the norm;
 *  - the checkpoint of a --zero 1 run (moments gathered from the shards) is byte for byte the
 *    unsharded run's; resumed on 1 rank it continues bitwise like the unsharded run's resumed
 *    there; an unsharded checkpoint of 2 ranks resumed with --zero 1 on 3 ranks continues bitwise
 *    like it resumed unsharded on 3;
 *  - --zero 1 alone or with --pp is refused naming the flag; ranks that disagree on --zero are
 *    refused naming the field;
 *  - the Llama family (rank_threads.h): --zero 1 bitwise the unsharded run with a bucket per layer
 *    on 2 ranks (2,2) and 3 (2,1,1), for Llama (GQA, RMSNorm, rope, SwiGLU, tied) and Qwen3
 *    (QK-norm, head_dim 16, untied lm_head); each rank's moments are its plan's share for both
 *    tables. Not resumed here (test_pp resumes ZeRO-1 under pipelines on Llama). */
#include <math.h>
#include <pthread.h>
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

enum { L = 2, NH = 2, C = 32, V = 96, MAXT = 16, T = 16, STEPS = 5, MAXR = 3 };
#define CLIP 1.0f

typedef struct job {
    int world, zero, pp;
    int rank_batch[MAXR];
    int batch; /* when world == 1 */
    long long bucket_bytes;
    int ring;       /* the allreduce on the ring from 3 ranks, for buckets of 2 KiB or more */
    int staging;    /* devices as if discrete: gradients reach the host by copies */
    int copy_path;  /* buckets by the copy path, not zero-copy (force_copy_path) */
    int odd_nozero; /* rank 1 runs without --zero */
    int steps;
    const char *ckpt; /* checkpoint folder or NULL */
    int resume, checkpoint_at_end;
    /* results */
    float loss[STEPS], norm[STEPS], eval[STEPS];
    long long first_step;
    size_t nparams;
    float *params[MAXR];
    size_t opt_bytes[MAXR], mfirst[MAXR], mcount[MAXR];
    vkg_model_config mcfg;
    vkg_status st[MAXR];
    char err[MAXR][512];
    vkg_test_family family; /* the model: GPT-2 of L, NH, C, or a config.json of this family */
    char model[600];        /* its path (run_job writes it) */
} job;

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_zero") != 0)
        return -1;
    char path[600];
    vkg_test_path_in(path, sizeof path, "train.bin");
    vkg_test_write_shard(path, 40 * 4 * T + 1, 31, V, 1);
    vkg_test_path_in(path, sizeof path, "val.bin");
    vkg_test_write_shard(path, 4 * 4 * T + 1, 32, V, 1);
    return 0;
}

static void *run_rank(void *p)
{
    vkg_test_rank *a = p;
    job *j = a->job;
    char data[600], val[600], ckpt[600];
    vkg_test_path_in(data, sizeof data, "train.bin");
    vkg_test_path_in(val, sizeof val, "val.bin");
    vkg_train_config c = vkg_test_rank_config();
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.model = j->family == VKG_TEST_GPT2 ? NULL : j->model;
    c.seed = 78, c.data = data, c.val_data = val, c.shuffle = 0;
    c.batch = j->batch, c.seq = T, c.total_batch = 4 * T;
    c.steps = STEPS, c.lr = 3e-3f, c.warmup = 1, c.weight_decay = 0.1f, c.grad_clip = CLIP;
    c.eval_every = 2, c.eval_batches = 2;
    if (j->ckpt) {
        vkg_test_path_in(ckpt, sizeof ckpt, j->ckpt);
        c.ckpt_dir = ckpt, c.keep_checkpoints = 0, c.resume = j->resume;
    }
    vkg_test_rank_join(&c, a, j->world);
    if (j->ring)
        c.par.comm.ring_min_ranks = 3, c.par.comm.small_bytes = 2048;
    if (j->world > 1 && !j->pp)
        c.par.rank_batch = j->rank_batch, c.par.rank_batch_count = j->world;
    c.par.bucket_bytes = j->bucket_bytes;
    c.force_staging = j->staging;
    c.par.force_copy_path = j->copy_path;
    c.par.zero = j->odd_nozero && a->rank == 1 ? 0 : j->zero;
    c.par.pp = j->pp;
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    int steps = j->steps ? j->steps : STEPS, n = 0;
    while (st == VKG_OK && n < steps && !vkg_trainer_done(t)) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK && a->rank == 0) {
            if (n == 0)
                j->first_step = s.step;
            j->loss[n] = s.loss, j->norm[n] = s.grad_norm;
            j->eval[n] = s.has_eval ? s.eval_loss : NAN;
        }
        n++;
    }
    if (st == VKG_OK && j->checkpoint_at_end)
        st = vkg_trainer_checkpoint(t, NULL, 0);
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        j->nparams = info.num_params;
        j->opt_bytes[a->rank] = info.optimizer_bytes;
        j->mfirst[a->rank] = info.moment_first, j->mcount[a->rank] = info.moment_count;
        if (a->rank == 0)
            j->mcfg = t->mcfg;
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        st = j->params[a->rank] ? vkg_trainer_get_params(t, j->params[a->rank]) : VKG_ERR_NOMEM;
    }
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
    vkg_test_ranks_ok(j->world, j->st, j->err[0], sizeof j->err[0], j->params, j->nparams);
}

static void free_job(job *j)
{
    for (int r = 0; r < MAXR; r++) {
        free(j->params[r]);
        j->params[r] = NULL;
    }
}

static job ranks(int world, const int *b, int zero, long long bucket_bytes)
{
    job j = {.world = world, .zero = zero, .batch = b[0], .bucket_bytes = bucket_bytes};
    for (int r = 0; r < world; r++)
        j.rank_batch[r] = b[r];
    return j;
}

static job single(void)
{
    return (job){.world = 1, .batch = 4};
}

static int same_bits(float a, float b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* Every step's loss, norm and eval loss, and the final parameters, bit for bit (from `from` on:
 * a resumed run's steps). */
static void expect_bitwise(const char *what, const job *a, const job *b, int nsteps)
{
    for (int s = 0; s < nsteps; s++) {
        printf("%s step %d: loss %.9g / %.9g, norm %.9g / %.9g\n", what, s + 1, (double)a->loss[s],
               (double)b->loss[s], (double)a->norm[s], (double)b->norm[s]);
        if (!same_bits(a->loss[s], b->loss[s]))
            fail_msg("%s: step %d loss %.9g vs %.9g", what, s + 1, (double)a->loss[s],
                     (double)b->loss[s]);
        if (!same_bits(a->norm[s], b->norm[s]))
            fail_msg("%s: step %d gradient norm %.9g vs %.9g", what, s + 1, (double)a->norm[s],
                     (double)b->norm[s]);
        if (isnan(a->eval[s]) != isnan(b->eval[s]) ||
            (!isnan(a->eval[s]) && !same_bits(a->eval[s], b->eval[s])))
            fail_msg("%s: step %d eval loss %.9g vs %.9g", what, s + 1, (double)a->eval[s],
                     (double)b->eval[s]);
    }
    assert_int_equal(a->nparams, b->nparams);
    for (size_t i = 0; i < a->nparams; i++)
        if (!same_bits(a->params[0][i], b->params[0][i]))
            fail_msg("%s: parameter %zu is %.9g vs %.9g (first difference)", what, i,
                     (double)a->params[0][i], (double)b->params[0][i]);
}

/* The unsharded run and the --zero 1 run of the same job, compared bit for bit; the norm must
 * have clipped at least one step (else the norm's bits would not matter to the parameters).
 * Returns the unsharded run (the caller frees it). */
static job zero_equals_dp(const char *what, job dp)
{
    job zero = dp;
    zero.zero = 1;
    run_job(&dp), run_job(&zero);
    expect_ok(&dp), expect_ok(&zero);
    expect_bitwise(what, &zero, &dp, STEPS);
    int clipped = 0;
    for (int s = 0; s < STEPS; s++)
        clipped += dp.norm[s] > CLIP;
    assert_true(clipped > 0);
    assert_true(dp.loss[STEPS - 1] < dp.loss[0]);
    free_job(&zero);
    return dp;
}

/* Parameters of a and b that differ in their bits. */
static size_t bits_apart(const job *a, const job *b)
{
    size_t d = 0;
    for (size_t i = 0; i < a->nparams; i++)
        d += !same_bits(a->params[0][i], b->params[0][i]);
    return d;
}

static void test_two_ranks_bitwise(void **state)
{
    (void)state;
    const int b[2] = {2, 2};
    job staged = ranks(2, b, 0, 1), copied = ranks(2, b, 0, 1);
    staged.staging = 1;
    copied.copy_path = staged.copy_path = 1;
    job runs[6] = {zero_equals_dp("2 ranks, a bucket per layer", ranks(2, b, 0, 1)),
                   zero_equals_dp("2 ranks, default buckets", ranks(2, b, 0, 0)),
                   zero_equals_dp("2 ranks, no overlap", ranks(2, b, 0, -1)),
                   zero_equals_dp("2 ranks, a bucket per layer through host copies", staged),
                   zero_equals_dp("2 ranks of 1 row, 2 accumulation steps",
                                  ranks(2, (const int[]){1, 1}, 0, 1)),
                   zero_equals_dp("2 ranks, a bucket per layer by the copy path", copied)};
    expect_bitwise("2 ranks, a bucket per layer: zero-copy vs the copy path", &runs[0], &runs[5],
                   STEPS);
    for (int i = 0; i < 6; i++)
        free_job(&runs[i]);
}

static void test_three_ranks_bitwise(void **state)
{
    (void)state;
    const int b[3] = {2, 1, 1};
    job per_layer = zero_equals_dp("3 ranks, a bucket per layer", ranks(3, b, 0, 1));
    job flat = zero_equals_dp("3 ranks, no overlap", ranks(3, b, 0, -1));
    job ring = ranks(3, b, 0, 1);
    ring.ring = 1;
    ring = zero_equals_dp("3 ranks, a bucket per layer, ring allreduce", ring);
    /* the ring adds three ranks' gradients in another order than rank order: other bits, which
     * the sharded run has reproduced */
    size_t apart = bits_apart(&ring, &per_layer);
    printf("the ring's parameters differ from rank order's in %zu of %zu\n", apart, ring.nparams);
    assert_true(apart > 0);
    free_job(&per_layer), free_job(&flat), free_job(&ring);
}

/* The Llama family (rank_threads.h): --zero 1 bitwise the unsharded run on 2 ranks (2,2) and on
 * 3 (2,1,1) with a bucket per layer. */
static void zero_family(vkg_test_family f)
{
    char what[2][96];
    job j[2] = {ranks(2, (const int[]){2, 2}, 0, 1), ranks(3, (const int[]){2, 1, 1}, 0, 1)};
    const char *name[2] = {"2 ranks, a bucket per layer", "3 ranks, a bucket per layer"};
    for (int k = 0; k < 2; k++) {
        j[k].family = f;
        snprintf(what[k], sizeof what[k], "%s: %s", vkg_test_family_name(f), name[k]);
        job dp = zero_equals_dp(what[k], j[k]);
        free_job(&dp);
    }
}

static void test_llama_bitwise(void **state)
{
    (void)state;
    zero_family(VKG_TEST_LLAMA);
}

static void test_qwen3_bitwise(void **state)
{
    (void)state;
    zero_family(VKG_TEST_QWEN3);
}

/* Each rank's optimizer is the plan's for its rank, and a 1/N share of the unsharded one. */
static void moments_per_rank(vkg_test_family f)
{
    job dp = ranks(2, (const int[]){2, 2}, 0, 1);
    dp.family = f;
    dp.steps = 1;
    run_job(&dp);
    expect_ok(&dp);
    for (int N = 2; N <= 3; N++) {
        job z = ranks(N, N == 2 ? (const int[]){2, 2} : (const int[]){2, 1, 1}, 1, 1);
        z.family = f;
        z.steps = 1;
        run_job(&z);
        expect_ok(&z);
        vkg_zero_shard plan[MAXR];
        assert_int_equal(vkg_strategy_zero_plan(&z.mcfg, N, plan), VKG_OK);
        size_t n = z.nparams, chunk = 0, next = 0;
        size_t P = vkg_adamw_norm_partition(n, NULL);
        size_t *pb = malloc((P + 1) * sizeof *pb);
        vkg_adamw_norm_partition(n, pb);
        for (size_t p = 0; p < P; p++)
            chunk = pb[p + 1] - pb[p] > chunk ? pb[p + 1] - pb[p] : chunk;
        free(pb);
        for (int r = 0; r < N; r++) {
            printf("%s, %d ranks: rank %d holds the moments of [%zu, +%zu) of %zu parameters: %zu "
                   "bytes of AdamW (plan %zu; unsharded %zu)\n",
                   vkg_test_family_name(f), N, r, z.mfirst[r], z.mcount[r], n, z.opt_bytes[r],
                   plan[r].optimizer, dp.opt_bytes[0]);
            assert_int_equal(z.opt_bytes[r], plan[r].optimizer);
            assert_int_equal(z.mfirst[r], plan[r].first);
            assert_int_equal(z.mcount[r], plan[r].count);
            assert_int_equal(z.mfirst[r], next); /* the shards tile the parameters */
            next += z.mcount[r];
            /* about 1/N: within one partial sum of an even share */
            assert_true(z.mcount[r] + chunk >= n / (size_t)N &&
                        z.mcount[r] <= n / (size_t)N + chunk);
            assert_true(z.opt_bytes[r] < dp.opt_bytes[0] / (size_t)N + 2 * chunk * 4 + 256);
        }
        assert_int_equal(next, n);
        assert_int_equal(dp.mfirst[0], 0);
        assert_int_equal(dp.mcount[0], n);
        assert_true(chunk < n / 8); /* enough partial sums for the shares to be even */
        free_job(&z);
    }
    free_job(&dp);
}

static void test_moments_per_rank(void **state)
{
    (void)state;
    moments_per_rank(VKG_TEST_GPT2);
}

/* The plan with the Llama family's and an untied head's tables. */
static void test_moments_per_rank_family(void **state)
{
    (void)state;
    moments_per_rank(VKG_TEST_LLAMA);
    moments_per_rank(VKG_TEST_QWEN3);
}

static void expect_same_file(const char *dir_a, const char *dir_b, const char *name)
{
    char in_a[600], in_b[600], a[700], b[700];
    snprintf(in_a, sizeof in_a, "%s/step_00000003/%s", dir_a, name);
    snprintf(in_b, sizeof in_b, "%s/step_00000003/%s", dir_b, name);
    vkg_test_path_in(a, sizeof a, in_a);
    vkg_test_path_in(b, sizeof b, in_b);
    size_t na, nb;
    char *x = vkg_test_must_read(a, &na), *y = vkg_test_must_read(b, &nb);
    if (na != nb || memcmp(x, y, na))
        fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, na, nb);
    printf("%s: %zu bytes, the same in %s and %s\n", name, na, dir_a, dir_b);
    free(x), free(y);
}

/* Steps 1..3 of j with a checkpoint in dir at the end. */
static void first_part(job j, const char *dir)
{
    j.ckpt = dir, j.steps = 3, j.checkpoint_at_end = 1;
    run_job(&j);
    expect_ok(&j);
    free_job(&j);
}

/* Steps 4..5 of j resumed from dir, into *out. */
static void resumed(job j, const char *dir, job *out)
{
    j.ckpt = dir, j.resume = 1, j.steps = 2;
    run_job(&j);
    expect_ok(&j);
    assert_int_equal(j.first_step, 4);
    *out = j;
}

static void test_resume(void **state)
{
    (void)state;
    const int two[2] = {2, 2}, three[3] = {2, 1, 1};
    first_part(ranks(2, two, 1, 1), "ck_zero");
    first_part(ranks(2, two, 0, 1), "ck_dp");
    first_part(ranks(2, two, 0, 1), "ck_dp_b");
    /* the moments gathered from the shards are the unsharded run's, byte for byte */
    expect_same_file("ck_zero", "ck_dp", "model.bin");
    expect_same_file("ck_zero", "ck_dp", "state.bin");
    job from_zero, from_dp;
    resumed(single(), "ck_zero", &from_zero);
    resumed(single(), "ck_dp", &from_dp);
    expect_bitwise("--zero 1 checkpoint resumed on 1 rank vs the unsharded one", &from_zero,
                   &from_dp, 2);
    free_job(&from_zero), free_job(&from_dp);
    /* an unsharded checkpoint of 2 ranks into --zero 1 on 3 */
    job into_zero, into_dp;
    resumed(ranks(3, three, 1, 1), "ck_dp", &into_zero);
    resumed(ranks(3, three, 0, 1), "ck_dp_b", &into_dp);
    expect_bitwise("unsharded 2-rank checkpoint resumed with --zero 1 on 3 ranks vs without",
                   &into_zero, &into_dp, 2);
    free_job(&into_zero), free_job(&into_dp);
}

static void expect_refused(job j, vkg_status want, const char *needle)
{
    run_job(&j);
    vkg_test_ranks_refused(j.world, j.st, j.err[0], sizeof j.err[0], want, needle);
    free_job(&j);
}

static void test_refused(void **state)
{
    (void)state;
    job alone = single();
    alone.zero = 1;
    expect_refused(alone, VKG_ERR_INVALID_ARG, "--zero 1 needs 2 or more data-parallel ranks");
    job piped = ranks(2, (const int[]){2, 2}, 1, 0);
    piped.pp = 2;
    expect_refused(piped, VKG_ERR_INVALID_ARG,
                   "--zero 1 needs 2 or more data-parallel ranks per pipeline stage");
    job odd = ranks(2, (const int[]){2, 2}, 1, 1);
    odd.odd_nozero = 1;
    expect_refused(odd, VKG_ERR_MISMATCH, "ZeRO stage (--zero)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks_bitwise),       cmocka_unit_test(test_three_ranks_bitwise),
        cmocka_unit_test(test_moments_per_rank),        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_llama_bitwise),           cmocka_unit_test(test_qwen3_bitwise),
        cmocka_unit_test(test_moments_per_rank_family), cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
