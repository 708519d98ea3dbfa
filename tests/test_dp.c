/* Data-parallel training is single-device training on the union of the ranks' data. Ranks are
 * threads of this process, each with its own trainer and Vulkan device (validation layer on and
 * checked), joined by the inproc transport. On a tiny model over 5 steps (shuffled llm.c shards,
 * evaluation, weight decay and clipping on):
 *  - 2 ranks with micro-batch B/2, 1 rank with B, and 1 rank with B/2 and 2 accumulation steps
 *    give the same per-step losses (1e-5 relative), eval losses (where the eval batches are the
 *    same: not for the smaller single-rank B) and final parameters (1e-4 relative L2); every
 *    rank of a job holds bitwise the same parameters; the same with the gradient allreduce
 *    overlapped per layer bucket and not overlapped at all. The buckets take the zero-copy path
 *    where the device imports host memory (the device copies them into the collectives' buffer:
 *    asserted taken for every bucket of every step, so a silent fallback fails) and the copy
 *    path when forced (read through the device mapping, and through host copies as on a
 *    discrete GPU): all four bitwise the same;
 *  - 3 ranks with unequal micro-batches (2,1,1) equal 1 rank with B = 4, and (3,2,1) with 2
 *    accumulation steps equal 1 rank with B = 6 and 2 accumulation steps (token weighting), its
 *    buckets zero-copy and by the copy path bitwise alike;
 *  - --lr-scale linear|sqrt scales lr by total/base batch (or its root) on 1 and 2 ranks alike;
 *  - a rank whose flags or data differ (another --seq, --rank-batch list, bucket size, or a data
 *    file of the same size with other tokens) is refused on every rank with VKG_ERR_MISMATCH
 *    naming the rank and the field;
 *  - a checkpoint of 2 ranks (B/2 each) resumes on 1 rank with B, and one of 1 rank with B
 *    resumes on 2 ranks with (3,1) (world size and split change, total batch kept), continuing
 *    exactly like the uninterrupted run;
 *  - when rank 0 fails (its checkpoint cannot be written, mid-run or at the end; a call of its
 *    own fails), rank 1 fails too with an error naming rank 0 and the cause;
 *  - the first comparison (but for the discrete-like devices: the same tolerances, the copy path
 *    bitwise zero-copy, a bucket per gradient unit: L + 3, L + 2 for a tied head without wpe)
 *    again on three Llama-family configs
 * (rank_threads.h): Llama (GQA 4/2, RMSNorm, rope, SwiGLU, tied head, no wpe: no embeddings
 * unit, wte finishes with the classifier's), Qwen3 (QK-norm, head_dim 16 != C/NH, an untied
 * lm_head) and Qwen2 (q/k/v biases, one kv head). Their resume across layouts is not run here
 * (test_train resumes a Qwen 3-style model bit for bit on one device). */
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

#include "os/file.h"
#include "rank_threads.h"
#include "testutil.h"
#include "train/trainer_internal.h"
#include "vkgpt/comm.h"
#include "vkgpt/io.h"
#include "vkgpt/train.h"

enum { L = 2, NH = 2, C = 32, V = 96, MAXT = 16, T = 16, STEPS = 5, MAXR = 3 };

/* What the odd rank of a mismatch test changes. */
enum {
    ODD_SEQ,
    ODD_RANK_BATCH,
    ODD_DATA,
    ODD_BUCKETS,
    ODD_BETA2,
    ODD_EPS,
    ODD_LOSS_SCALE,
    ODD_CKPT_EVERY,
    ODD_NO_CKPT,
    ODD_EVAL
};

typedef struct job {
    int world;
    int rank_batch[MAXR];
    int batch;       /* when world == 1 */
    long long total; /* tokens per step */
    int steps;       /* steps to run (5 unless resuming) */
    int odd_rank;    /* this rank differs from the others in odd_what (-1: none) */
    int odd_what;
    const char *ckpt; /* checkpoint folder or NULL */
    int resume, checkpoint_at_end;
    int ckpt_every; /* every rank calls vkg_trainer_checkpoint after every ckpt_every-th step */
    int sample_at;  /* rank 0 samples after this step (0: never; fails without a tokenizer) */
    long long bucket_bytes; /* vkg_train_config.bucket_bytes */
    int staging;            /* devices as if discrete: gradients reach the host by copies */
    int copy_path;          /* vkg_train_config.force_copy_path */
    vkg_lr_scale lr_scale;  /* with base_batch (tokens) */
    long long base_batch;
    float peak_lr;         /* rank 0's lr after --lr-scale (vkg_trainer_info) */
    vkg_comm_shm shm;      /* shared-memory policy of the communicator (inproc: off by default) */
    char path[96];         /* what rank 0's collectives ran on */
    char bucket_path[256]; /* how rank 0's buckets reached them */
    int can_import;        /* rank 0's device has VK_EXT_external_memory_host */
    uint64_t zc_buckets[MAXR]; /* buckets each rank reduced on the zero-copy path */
    /* results (rank 0's, plus every rank's parameters) */
    float loss[STEPS], eval[STEPS];
    long long first_step;
    float *params[MAXR];
    vkg_status st[MAXR];
    char err[MAXR][512];
    size_t nparams;
    int nbuckets;
    vkg_test_family family; /* the model: GPT-2 of L, NH, C, or a config.json of this family */
    char model[600];        /* its path (run_job writes it) */
} job;

static void write_shard(const char *name, size_t n, uint64_t seed)
{
    char path[600];
    vkg_test_path_in(path, sizeof path, name);
    vkg_test_write_shard(path, n, seed, V, 1);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_dp") != 0)
        return -1;
    write_shard("train.bin", 40 * 6 * T + 1, 21); /* 40 global batches of 6 rows */
    write_shard("val.bin", 4 * 6 * T + 1, 22);
    write_shard("other.bin", 40 * 6 * T + 1, 23); /* same size as train.bin, other tokens */
    return 0;
}

static void *run_rank(void *p)
{
    vkg_test_rank *a = p;
    job *j = a->job;
    char data[600], val[600], ckpt[600];
    int odd = a->rank == j->odd_rank;
    vkg_test_path_in(data, sizeof data, odd && j->odd_what == ODD_DATA ? "other.bin" : "train.bin");
    vkg_test_path_in(val, sizeof val, "val.bin");
    vkg_train_config c = vkg_test_rank_config();
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.model = j->family == VKG_TEST_GPT2 ? NULL : j->model;
    c.seed = 77, c.data = data, c.val_data = val, c.shuffle = 0;
    c.batch = j->batch, c.seq = odd && j->odd_what == ODD_SEQ ? T / 2 : T;
    c.total_batch = j->total;
    c.steps = STEPS, c.lr = 3e-3f, c.warmup = 1, c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.eval_every = 2, c.eval_batches = odd && j->odd_what == ODD_EVAL ? 3 : 2;
    c.beta2 = odd && j->odd_what == ODD_BETA2 ? 0.99f : c.beta2;
    c.eps = odd && j->odd_what == ODD_EPS ? 1e-6f : c.eps;
    c.loss_scale = odd && j->odd_what == ODD_LOSS_SCALE ? 1024.0f : c.loss_scale;
    if (j->ckpt && !(odd && j->odd_what == ODD_NO_CKPT)) {
        vkg_test_path_in(ckpt, sizeof ckpt, j->ckpt);
        c.ckpt_dir = ckpt, c.keep_checkpoints = 0, c.resume = j->resume;
        c.ckpt_every = odd && j->odd_what == ODD_CKPT_EVERY ? 2 : j->ckpt_every;
    }
    vkg_test_rank_join(&c, a, j->world);
    c.par.comm.shm = j->shm;
    int swapped[MAXR];
    memcpy(swapped, j->rank_batch, sizeof swapped);
    swapped[0] = j->rank_batch[1], swapped[1] = j->rank_batch[0];
    if (j->world > 1)
        c.par.rank_batch = odd && j->odd_what == ODD_RANK_BATCH ? swapped : j->rank_batch,
        c.par.rank_batch_count = j->world;
    c.par.bucket_bytes = odd && j->odd_what == ODD_BUCKETS ? -1 : j->bucket_bytes;
    c.force_staging = j->staging;
    c.par.force_copy_path = j->copy_path;
    c.lr_scale = j->lr_scale, c.base_batch = j->base_batch;
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    int n = 0;
    while (st == VKG_OK && n < j->steps && !vkg_trainer_done(t)) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK && a->rank == 0) {
            if (n == 0)
                j->first_step = s.step;
            j->loss[n] = s.loss, j->eval[n] = s.has_eval ? s.eval_loss : NAN;
        }
        n++;
        if (st == VKG_OK && j->ckpt_every && s.step % j->ckpt_every == 0)
            st = vkg_trainer_checkpoint(t, NULL, 0);
        if (st == VKG_OK && a->rank == 0 && s.step == j->sample_at) {
            char *text = NULL;
            st = vkg_trainer_sample(t, NULL, 4, 1.0f, 0, 1, &text);
            free(text);
        }
    }
    if (st == VKG_OK && j->checkpoint_at_end)
        st = vkg_trainer_checkpoint(t, NULL, 0);
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        if (a->rank == 0) {
            j->peak_lr = info.lr;
            snprintf(j->path, sizeof j->path, "%s", info.comm_path);
            snprintf(j->bucket_path, sizeof j->bucket_path, "%s", info.bucket_path);
            j->can_import = vkg_device_get_info(t->dev)->external_memory_host;
        }
        j->zc_buckets[a->rank] = vkg_strategy_zero_copy_buckets(t->par);
        j->nparams = (size_t)info.num_params;
        j->nbuckets = vkg_strategy_bucket_count(t->par);
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        st = j->params[a->rank] ? vkg_trainer_get_params(t, j->params[a->rank]) : VKG_ERR_NOMEM;
    }
    j->st[a->rank] = vkg_test_rank_finish(&t, st, j->err[a->rank], sizeof j->err[a->rank]);
    return NULL;
}

/* Run every rank of j as a thread; returns with the results in j. */
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
    for (int r = 0; r < MAXR; r++)
        free(j->params[r]);
}

/* Losses, eval losses (unless a evaluates on other batches: a smaller B) and final parameters. */
static void expect_same_run(const char *what, const job *a, const job *b, int nsteps)
{
    int same_eval_batches = a->world > 1 || a->batch == b->batch;
    for (int s = 0; s < nsteps; s++) {
        double rel = fabs((double)a->loss[s] - b->loss[s]) / fabs((double)b->loss[s]);
        printf("%s step %d: loss %.7f vs %.7f (rel %.2e)\n", what, s + 1, (double)a->loss[s],
               (double)b->loss[s], rel);
        if (!(rel <= 1e-5))
            fail_msg("%s: step %d loss %.8f vs %.8f (rel %.3e > 1e-5)", what, s + 1,
                     (double)a->loss[s], (double)b->loss[s], rel);
        if (isnan(a->eval[s]) != isnan(b->eval[s]))
            fail_msg("%s: step %d evaluated in one run only", what, s + 1);
        if (same_eval_batches && !isnan(a->eval[s]) &&
            fabs((double)a->eval[s] - b->eval[s]) > 1e-5 * fabs((double)b->eval[s]))
            fail_msg("%s: step %d eval loss %.8f vs %.8f", what, s + 1, (double)a->eval[s],
                     (double)b->eval[s]);
    }
    vkg_test_cmp cmp;
    assert_int_equal(a->nparams, b->nparams);
    if (!vkg_test_compare(what, a->params[0], b->params[0], a->nparams, 1e-4, &cmp))
        fail_msg("%s: final parameters differ (rel L2 %.3e > 1e-4)", what, cmp.rel_l2);
    printf("%s: final parameters rel L2 %.3e, max abs %.3e\n", what, cmp.rel_l2, cmp.max_abs);
}

/* The path j's buckets took on every rank: zero-copy for each bucket of each step where the
 * device imports host memory and the copy path is not forced, else none, and the start-up line
 * saying so. */
static void expect_bucket_path(const job *j)
{
    int zero_copy = j->can_import && !j->copy_path;
    printf("buckets by %s\n", j->bucket_path);
    for (int r = 0; r < j->world; r++)
        if (j->zc_buckets[r] != (zero_copy ? (uint64_t)(j->steps * j->nbuckets) : 0))
            fail_msg("rank %d reduced %llu buckets zero-copy, expected %d (%s)", r,
                     (unsigned long long)j->zc_buckets[r], zero_copy ? j->steps * j->nbuckets : 0,
                     j->bucket_path);
    const char *want = zero_copy      ? "zero-copy: "
                       : j->copy_path ? "copy: zero-copy turned off"
                                      : "copy: ";
    if (strncmp(j->bucket_path, want, strlen(want)))
        fail_msg("bucket path '%s', expected '%s...'", j->bucket_path, want);
}

/* a and b trained bitwise alike: losses and every rank's parameters. */
static void expect_bitwise(const char *what, const job *a, const job *b)
{
    assert_int_equal(a->nparams, b->nparams);
    if (memcmp(a->loss, b->loss, sizeof a->loss))
        fail_msg("%s: the losses differ", what);
    if (memcmp(a->params[0], b->params[0], a->nparams * sizeof(float)))
        fail_msg("%s: the parameters differ", what);
}

static job single(int batch, long long total)
{
    return (job){.world = 1, .batch = batch, .total = total, .steps = STEPS, .odd_rank = -1};
}

static job ranks(int world, const int *b, long long total)
{
    job j = {.world = world, .batch = b[0], .total = total, .steps = STEPS, .odd_rank = -1};
    for (int r = 0; r < world; r++)
        j.rank_batch[r] = b[r];
    return j;
}

/* buf (160 bytes) = what, after the family's name unless GPT-2; returns buf. */
static const char *named(vkg_test_family f, const char *what, char *buf)
{
    snprintf(buf, 160, "%s%s%s", f == VKG_TEST_GPT2 ? "" : vkg_test_family_name(f),
             f == VKG_TEST_GPT2 ? "" : ": ", what);
    return buf;
}

static void two_ranks_match_one(vkg_test_family f)
{
    enum { B = 4 };
    job one = single(B, B * T), accum = single(B / 2, B * T);
    one.family = accum.family = f;
    job two = ranks(2, (const int[]){B / 2, B / 2}, B * T);
    two.family = f;
    job buckets = two, flat = two;
    buckets.bucket_bytes = 1; /* a bucket per layer: 5 lists, overlapped (zero-copy) */
    flat.bucket_bytes = -1;   /* one allreduce after the backward pass */
    job mapped = buckets, staged = buckets, staged_copy = buckets;
    mapped.copy_path = 1;                            /* the host packs from the device's mapping */
    staged.staging = 1;                              /* zero-copy as on a discrete GPU */
    staged_copy.staging = staged_copy.copy_path = 1; /* packs from host copies */
    job *runs[] = {&one, &accum, &two, &buckets, &flat, &mapped, &staged, &staged_copy};
    /* the Llama family: not the discrete-like devices (what they change is not the model's) */
    size_t n = f == VKG_TEST_GPT2 ? sizeof runs / sizeof runs[0] : 6;
    char what[160];
    for (size_t i = 0; i < n; i++)
        run_job(runs[i]), expect_ok(runs[i]);
    for (size_t i = 3; i < n; i++) /* L + 3 units; L + 2 for a tied head without wpe */
        assert_int_equal(runs[i]->nbuckets,
                         runs[i] == &flat ? 0
                                          : L + 3 - (f == VKG_TEST_LLAMA || f == VKG_TEST_QWEN2));
    expect_bucket_path(&buckets), expect_bucket_path(&mapped);
    expect_same_run(named(f, "2 ranks B/2, a bucket per layer vs 1 rank B", what), &buckets, &one,
                    STEPS);
    expect_same_run(named(f, "2 ranks B/2, no overlap vs 1 rank B", what), &flat, &one, STEPS);
    expect_bitwise(named(f, "buckets zero-copy vs by the copy path", what), &buckets, &mapped);
    if (n == sizeof runs / sizeof runs[0]) {
        assert_true(buckets.can_import == staged.can_import);
        expect_bucket_path(&staged), expect_bucket_path(&staged_copy);
        expect_bitwise("buckets zero-copy vs zero-copy on a discrete-like device", &buckets,
                       &staged);
        expect_bitwise("buckets zero-copy vs by the copy path through host copies", &buckets,
                       &staged_copy);
    }
    free_job(&buckets), free_job(&flat), free_job(&mapped), free_job(&staged);
    free_job(&staged_copy);
    assert_true(one.loss[0] > 0.0f && one.loss[STEPS - 1] < one.loss[0]);
    expect_same_run(named(f, "1 rank B/2 x 2 accumulation vs 1 rank B", what), &accum, &one, STEPS);
    expect_same_run(named(f, "2 ranks B/2 vs 1 rank B", what), &two, &one, STEPS);
    free_job(&one), free_job(&accum), free_job(&two);
}

static void test_two_ranks_match_one(void **state)
{
    (void)state;
    two_ranks_match_one(VKG_TEST_GPT2);
}

/* The same comparisons on the Llama family (rank_threads.h): GQA, RMSNorm, rope, SwiGLU and a tied
 * head without wpe; QK-norm, another head_dim and an untied lm_head (its own gradient unit); q/k/v
 * biases over one kv head. */
static void test_two_ranks_match_one_llama(void **state)
{
    (void)state;
    two_ranks_match_one(VKG_TEST_LLAMA);
}

static void test_two_ranks_match_one_qwen3(void **state)
{
    (void)state;
    two_ranks_match_one(VKG_TEST_QWEN3);
}

static void test_two_ranks_match_one_qwen2(void **state)
{
    (void)state;
    two_ranks_match_one(VKG_TEST_QWEN2);
}

static void test_unequal_ranks_are_token_weighted(void **state)
{
    (void)state;
    job one4 = single(4, 4 * T), three = ranks(3, (const int[]){2, 1, 1}, 4 * T);
    run_job(&one4), run_job(&three);
    expect_ok(&one4), expect_ok(&three);
    expect_same_run("3 ranks (2,1,1) vs 1 rank B=4", &three, &one4, STEPS);
    job one6 = single(6, 12 * T), three6 = ranks(3, (const int[]){3, 2, 1}, 12 * T);
    three6.bucket_bytes = 20000; /* a few buckets, with accumulation */
    run_job(&one6), run_job(&three6);
    expect_ok(&one6), expect_ok(&three6);
    printf("(3,2,1): %d gradient buckets\n", three6.nbuckets);
    assert_true(three6.nbuckets > 1 && three6.nbuckets < L + 3);
    expect_same_run("3 ranks (3,2,1) x 2 accumulation vs 1 rank B=6 x 2", &three6, &one6, STEPS);
    job copied = three6;
    memset(copied.params, 0, sizeof copied.params); /* three6's own */
    copied.copy_path = 1;
    run_job(&copied);
    expect_ok(&copied);
    expect_bucket_path(&three6), expect_bucket_path(&copied);
    expect_bitwise("3 ranks (3,2,1): buckets zero-copy vs by the copy path", &three6, &copied);
    free_job(&one4), free_job(&three), free_job(&one6), free_job(&three6), free_job(&copied);
}

/* The gradient allreduce through shared memory (ranks as threads: the segment is required, since
 * inproc does not use it by default) trains bitwise like the ZeroMQ path: same losses, same
 * parameters, for 2 ranks and for 3 (where the order of additions shows), with buckets (zero-copy
 * into the collectives' buffer, which lies in the segment). */
static void test_shm_equals_zmq(void **state)
{
    (void)state;
    if (!vkg_comm_has_shm()) {
        fprintf(stderr, "  skipped: this build has no shared-memory collectives\n");
        skip();
    }
    for (int world = 2; world <= 3; world++) {
        job zmq = ranks(world, (const int[]){2, 1, 1}, (world == 2 ? 3 : 4) * T);
        zmq.bucket_bytes = 1;
        job shm = zmq;
        shm.shm = VKG_COMM_SHM_REQUIRE;
        run_job(&zmq), run_job(&shm);
        expect_ok(&zmq), expect_ok(&shm);
        printf("%d ranks: %s vs %s\n", world, shm.path, zmq.path);
        assert_non_null(strstr(shm.path, "shm ("));
        assert_non_null(strstr(zmq.path, "zmq inproc"));
        expect_bucket_path(&shm), expect_bucket_path(&zmq);
        if (shm.can_import && !strstr(shm.bucket_path, "shared-memory segment"))
            fail_msg("%d ranks over shm: buckets by %s", world, shm.bucket_path);
        assert_memory_equal(shm.loss, zmq.loss, sizeof shm.loss);
        if (memcmp(shm.params[0], zmq.params[0], shm.nparams * sizeof(float)))
            fail_msg("%d ranks: parameters trained over shm differ from the ZeroMQ path's", world);
        free_job(&zmq), free_job(&shm);
    }
}

/* --lr-scale multiplies lr by total batch / base batch (linear) or its square root (sqrt), on one
 * rank as on two for the same total batch, and the steps use the scaled lr. */
static void test_lr_scale(void **state)
{
    (void)state;
    const struct {
        vkg_lr_scale scale;
        double factor;
    } cases[] = {{VKG_LR_SCALE_NONE, 1.0}, {VKG_LR_SCALE_LINEAR, 4.0}, {VKG_LR_SCALE_SQRT, 2.0}};
    job base = single(4, 4 * T);
    base.steps = 2;
    run_job(&base);
    expect_ok(&base);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        job one = single(4, 4 * T), two = ranks(2, (const int[]){2, 2}, 4 * T);
        one.steps = two.steps = 2;
        one.lr_scale = two.lr_scale = cases[i].scale;
        one.base_batch = two.base_batch = T; /* a quarter of the total batch */
        run_job(&one), run_job(&two);
        expect_ok(&one), expect_ok(&two);
        double want = 3e-3 * cases[i].factor;
        printf("lr scale %d: peak lr %.6g (1 rank), %.6g (2 ranks), want %.6g\n",
               (int)cases[i].scale, (double)one.peak_lr, (double)two.peak_lr, want);
        assert_true(fabs(one.peak_lr - want) <= 1e-6 * want);
        assert_true(two.peak_lr == one.peak_lr);
        /* the update uses it: a larger lr moves the parameters further from the same start */
        if (cases[i].factor > 1.0 && !memcmp(one.params[0], base.params[0], base.nparams * 4))
            fail_msg("lr scale %d trained exactly like no scaling", (int)cases[i].scale);
        free_job(&one), free_job(&two);
    }
    free_job(&base);
}

/* Rank 1 differs in one setting: both ranks refuse to train, naming rank 1 and the field. */
static void expect_refused(int what, const int *batches, const char *field)
{
    job j = ranks(2, batches, (batches[0] + batches[1]) * T);
    j.odd_rank = 1, j.odd_what = what;
    if (what == ODD_SEQ)
        j.total = 0; /* each rank's own B*T x ranks */
    run_job(&j);
    for (int r = 0; r < 2; r++) {
        if (j.st[r] != VKG_ERR_MISMATCH)
            fail_msg("rank %d: expected VKG_ERR_MISMATCH, got %s: %s", r, vkg_status_name(j.st[r]),
                     j.err[r]);
        if (!strstr(j.err[r], "rank 1") || !strstr(j.err[r], field))
            fail_msg("rank %d's message does not name rank 1 and %s: %s", r, field, j.err[r]);
        printf("rank %d refused as expected: %s\n", r, j.err[r]);
    }
    free_job(&j);
}

static void test_mismatching_rank_is_refused(void **state)
{
    (void)state;
    expect_refused(ODD_SEQ, (const int[]){2, 2}, "seq");
    expect_refused(ODD_RANK_BATCH, (const int[]){3, 1}, "--rank-batch list");
    expect_refused(ODD_DATA, (const int[]){2, 2}, "training data checksum");
    expect_refused(ODD_BUCKETS, (const int[]){2, 2}, "gradient bucket bytes");
    expect_refused(ODD_BETA2, (const int[]){2, 2}, "--beta2");
    expect_refused(ODD_EPS, (const int[]){2, 2}, "--eps");
    expect_refused(ODD_LOSS_SCALE, (const int[]){2, 2}, "--loss-scale");
    expect_refused(ODD_EVAL, (const int[]){2, 2}, "--eval-batches");
}

/* Saving is collective: ranks that differ on --ckpt-every, or where one has no --ckpt-dir, are
 * refused at the start naming the field, before any step (not at the first save). */
static void test_mismatching_checkpoints_are_refused(void **state)
{
    (void)state;
    for (int what = ODD_CKPT_EVERY; what <= ODD_NO_CKPT; what++) {
        job j = ranks(2, (const int[]){2, 2}, 4 * T);
        j.odd_rank = 1, j.odd_what = what;
        j.ckpt = what == ODD_CKPT_EVERY ? "ck_odd_every" : "ck_odd_none", j.ckpt_every = 3;
        run_job(&j);
        for (int r = 0; r < 2; r++) {
            if (j.st[r] != VKG_ERR_MISMATCH || !strstr(j.err[r], "rank 1") ||
                !strstr(j.err[r], "--ckpt-every"))
                fail_msg("rank %d: expected a mismatch naming rank 1 and --ckpt-every, got %s: %s",
                         r, vkg_status_name(j.st[r]), j.err[r]);
            printf("rank %d refused as expected: %s\n", r, j.err[r]);
        }
        free_job(&j);
    }
}

/* Steps 1..3 on `first` with a checkpoint, then 4..5 resumed on `second`, against `straight`. */
static void resume_across(const char *what, const char *dir, job first, job second,
                          const job *straight)
{
    first.ckpt = second.ckpt = dir;
    first.steps = 3, first.checkpoint_at_end = 1;
    second.resume = 1;
    run_job(&first);
    expect_ok(&first);
    run_job(&second);
    expect_ok(&second);
    assert_int_equal(second.first_step, 4);
    job merged = *straight;
    memcpy(merged.loss, first.loss, 3 * sizeof(float));
    memcpy(merged.eval, first.eval, 3 * sizeof(float));
    memcpy(merged.loss + 3, second.loss, 2 * sizeof(float));
    memcpy(merged.eval + 3, second.eval, 2 * sizeof(float));
    merged.params[0] = second.params[0];
    expect_same_run(what, &merged, straight, STEPS);
    free_job(&first), free_job(&second);
}

static void test_resume_with_another_world_size(void **state)
{
    (void)state;
    job straight = single(4, 4 * T);
    run_job(&straight);
    expect_ok(&straight);
    resume_across("2 ranks (2,2) then 1 rank B=4", "ck_2to1", ranks(2, (const int[]){2, 2}, 4 * T),
                  single(4, 4 * T), &straight);
    resume_across("1 rank B=4 then 2 ranks (3,1)", "ck_1to2", single(4, 4 * T),
                  ranks(2, (const int[]){3, 1}, 4 * T), &straight);
    free_job(&straight);
}

/* Rank 0 fails and rank 1 must fail too, naming rank 0 and the cause (needles), not a
 * disagreement about collectives or a timeout. */
static void expect_rank0_failure(job *j, vkg_status rank0_status, const char *n1, const char *n2)
{
    run_job(j);
    for (int r = 0; r < 2; r++)
        printf("rank %d: %s: %s\n", r, vkg_status_name(j->st[r]), j->err[r]);
    if (j->st[0] != rank0_status || !strstr(j->err[0], n1) || !strstr(j->err[0], n2))
        fail_msg("rank 0: expected %s naming '%s' and '%s', got %s: %s",
                 vkg_status_name(rank0_status), n1, n2, vkg_status_name(j->st[0]), j->err[0]);
    if (j->st[1] != VKG_ERR_PEER || !strstr(j->err[1], "rank 0") || !strstr(j->err[1], n1) ||
        !strstr(j->err[1], n2))
        fail_msg("rank 1: expected VKG_ERR_PEER naming rank 0, '%s' and '%s', got %s: %s", n1, n2,
                 vkg_status_name(j->st[1]), j->err[1]);
    free_job(j);
}

/* A file where rank 0's checkpoint of `step` must go: writing it fails, as on a full disk. */
static void block_checkpoint(const char *dir, int step)
{
    char path[700], name[32];
    vkg_test_path_in(path, sizeof path, dir);
    assert_int_equal(vkg_os_mkdir(path), 0);
    snprintf(name, sizeof name, "/step_%08d", step);
    strcat(path, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
}

/* When a rank fails, the others fail at once saying which rank failed and why: rank 0's
 * checkpoint write failing mid-run and at the end (every rank learns the outcome of rank 0's
 * write), and rank 0 failing in a call of its own (a sample without a tokenizer: the transport's
 * abort carries its message). */
static void test_failing_rank_tells_why(void **state)
{
    (void)state;
    job j = ranks(2, (const int[]){2, 2}, 4 * T);
    j.ckpt = "ck_blocked_mid", j.ckpt_every = 2;
    block_checkpoint(j.ckpt, 2);
    expect_rank0_failure(&j, VKG_ERR_IO, "step_00000002", "a file of that name is in the way");
    j = ranks(2, (const int[]){2, 2}, 4 * T);
    j.ckpt = "ck_blocked_end", j.checkpoint_at_end = 1;
    block_checkpoint(j.ckpt, STEPS);
    expect_rank0_failure(&j, VKG_ERR_IO, "step_00000005", "a file of that name is in the way");
    j = ranks(2, (const int[]){2, 2}, 4 * T);
    j.sample_at = 2;
    expect_rank0_failure(&j, VKG_ERR_STATE, "no tokenizer", "--tokenizer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks_match_one),
        cmocka_unit_test(test_two_ranks_match_one_llama),
        cmocka_unit_test(test_two_ranks_match_one_qwen3),
        cmocka_unit_test(test_two_ranks_match_one_qwen2),
        cmocka_unit_test(test_shm_equals_zmq),
        cmocka_unit_test(test_unequal_ranks_are_token_weighted),
        cmocka_unit_test(test_lr_scale),
        cmocka_unit_test(test_mismatching_rank_is_refused),
        cmocka_unit_test(test_mismatching_checkpoints_are_refused),
        cmocka_unit_test(test_resume_with_another_world_size),
        cmocka_unit_test(test_failing_rank_tells_why),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
