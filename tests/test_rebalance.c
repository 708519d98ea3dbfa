/* --rank-batch auto on two ranks of different speed (threads of this process, each with its own
 * trainer and Vulkan device, validation layer on and checked, joined by the inproc transport;
 * rank 1 made slower by the test-only VKG_TEST_ROW_DELAY_MS="0,100": 100 ms per row, more than
 * a row's compute even on a loaded machine, where 20 ms was lost in the noise):
 *  - the split moves rows to the faster rank 0 (from 4,4), and the run's losses and final
 *    parameters equal, bit for bit, those of fixed --rank-batch runs with the same splits,
 *    chained through checkpoints at the steps where the split changed, all under loss scaling
 *    (the models built for a new split carry the scale); the log records every step's split and
 *    every re-balancing; the same on a Llama-family model;
 *  - with rank 0's device limited (memory_limit) to the memory plan of 5 rows, no split ever
 *    gives it more: the run settles on 5,3;
 *  - refused, naming the flag: --rebalance-every 0, auto with --zero 1 or --sync diloco (the CLI
 * refuses auto with --pp before a trainer exists: test_cli_errors). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "os/proc.h"
#include "parallel/strategy.h"
#include "rank_threads.h"
#include "testutil.h"
#include "vkgpt/train.h"

enum { L = 2, NH = 2, C = 32, V = 96, MAXT = 16, T = 16, B = 4, ACCUM = 2, STEPS = 8 };
enum { EVERY = 2, WORLD = 2 };

typedef struct job {
    int automatic;         /* --rank-batch auto (else rank_batch) */
    int rank_batch[WORLD]; /* a fixed split */
    int rebalance_every;
    int pp, zero, diloco;
    uint64_t memory_limit[WORLD];
    const char *ckpt; /* checkpoint folder (NULL: none) */
    int resume;
    int steps;        /* to run now (of STEPS) */
    float loss_scale; /* --loss-scale dynamic from this (0: off) */
    char model[600];  /* a Llama-family config.json (vkg_test_family_config); "": GPT-2 */
    /* results: rank 0's per step (index: step - 1), every rank's parameters */
    float loss[STEPS];
    char split[STEPS][256];
    int ran[STEPS];
    float *params[WORLD];
    size_t nparams;
    vkg_status st[WORLD];
    char err[WORLD][512];
} job;

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_dir_make("vkg_test_rebalance") != 0)
        return -1;
    char path[600];
    vkg_test_path_in(path, sizeof path, "train.bin");
    vkg_test_write_shard(path, 40 * 8 * T + 1, 31, V, 1); /* 40 global batches of 8 rows */
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
    c.seed = 5, c.data = data, c.shuffle = 0;
    c.batch = B, c.seq = T, c.total_batch = (long long)WORLD * B * T * ACCUM;
    c.steps = STEPS, c.lr = 3e-3f, c.warmup = 1, c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.loss_scale = j->loss_scale;
    c.model = j->model[0] ? j->model : NULL;
    if (j->ckpt) {
        vkg_test_path_in(ckpt, sizeof ckpt, j->ckpt);
        c.ckpt_dir = ckpt, c.keep_checkpoints = 0, c.resume = j->resume;
    }
    vkg_test_rank_join(&c, a, WORLD * (j->pp > 1 ? j->pp : 1));
    c.par.pp = j->pp, c.par.zero = j->zero;
    if (j->diloco)
        c.par.sync = VKG_SYNC_DILOCO, c.par.inner_steps = 2, c.par.outer_lr = 0.7f,
        c.par.outer_momentum = 0.9f;
    c.memory_limit = a->rank < WORLD ? j->memory_limit[a->rank] : 0;
    if (j->automatic)
        c.par.rank_batch_auto = 1, c.rebalance_every = j->rebalance_every;
    else
        c.par.rank_batch = j->rank_batch, c.par.rank_batch_count = WORLD;
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    for (int n = 0; st == VKG_OK && n < j->steps && !vkg_trainer_done(t); n++) {
        vkg_step_info s;
        st = vkg_trainer_step(t, &s);
        if (st == VKG_OK && a->rank == 0) {
            j->loss[s.step - 1] = s.loss, j->ran[s.step - 1] = 1;
            snprintf(j->split[s.step - 1], sizeof j->split[0], "%s", s.rank_batches);
        }
    }
    if (st == VKG_OK && j->ckpt)
        st = vkg_trainer_checkpoint(t, NULL, 0);
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        j->nparams = (size_t)info.num_params;
        j->params[a->rank] = malloc(j->nparams * sizeof(float));
        st = j->params[a->rank] ? vkg_trainer_get_params(t, j->params[a->rank]) : VKG_ERR_NOMEM;
    }
    j->st[a->rank] = vkg_test_rank_finish(&t, st, j->err[a->rank], sizeof j->err[a->rank]);
    return NULL;
}

static void run_job(job *j)
{
    vkg_test_run_ranks(WORLD * (j->pp > 1 ? j->pp : 1), j, run_rank);
}

static void free_job(job *j)
{
    for (int r = 0; r < WORLD; r++)
        free(j->params[r]), j->params[r] = NULL;
}

/* The auto run of the first test, and the chain of fixed runs that repeats its splits. */
static job auto_job(const char *ckpt)
{
    return (job){.automatic = 1, .rebalance_every = EVERY, .ckpt = ckpt, .steps = STEPS};
}

/* "a,b" into two ints. */
static void parse_split(const char *s, int *out)
{
    if (sscanf(s, "%d,%d", &out[0], &out[1]) != 2)
        fail_msg("split '%s' is not two rank batches", s);
}

/* Every line of dir/log.jsonl names its step's split as the run reported it, and the steps after
 * which the split was chosen again (calibration, then every EVERY steps) carry "rebalance". */
static void expect_log(const char *dir, const job *j)
{
    char path[700];
    vkg_test_path_in(path, sizeof path, dir);
    strncat(path, "/log.jsonl", sizeof path - strlen(path) - 1);
    size_t n = 0;
    char *text = vkg_test_read_file(path, &n);
    assert_non_null(text);
    int lines = 0, rebalances = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        long long step = 0;
        assert_int_equal(sscanf(line, "{\"step\":%lld", &step), 1);
        char want[300]; /* a split is at most 255 characters */
        snprintf(want, sizeof want, "\"rank_batch\":\"%s\"", j->split[step - 1]);
        if (!strstr(line, want))
            fail_msg("log line of step %lld lacks %s: %s", step, want, line);
        int due = step % EVERY == 0 && step < STEPS;
        if (due != (strstr(line, "\"rebalance\":\"") != NULL))
            fail_msg("step %lld: re-balancing %s in the log: %s", step,
                     due ? "missing" : "unexpected", line);
        if (due && step < STEPS) { /* the next step's split */
            snprintf(want, sizeof want, "\"rebalance\":\"%s\"", j->split[step]);
            if (!strstr(line, want))
                fail_msg("step %lld: the log says %s", step, line);
        }
        rebalances += due;
    }
    assert_int_equal(lines, STEPS);
    assert_int_equal(rebalances, STEPS / EVERY - 1);
    free(text);
}

static void auto_equals_fixed_splits(vkg_test_family fam)
{
    char auto_dir[64], fixed_dir[64], model[600] = "";
    snprintf(auto_dir, sizeof auto_dir, "auto-%s", vkg_test_family_name(fam));
    snprintf(fixed_dir, sizeof fixed_dir, "fixed-%s", vkg_test_family_name(fam));
    if (fam != VKG_TEST_GPT2)
        vkg_test_family_config(fam, L, V, MAXT, model, sizeof model);
    vkg_os_setenv("VKG_TEST_ROW_DELAY_MS", "0,100", 1);
    job a = auto_job(auto_dir);
    memcpy(a.model, model, sizeof model);
    a.loss_scale = 1024.0f; /* a model built for a new split must carry it too */
    run_job(&a);
    vkg_os_setenv("VKG_TEST_ROW_DELAY_MS", "", 1); /* empty: no delay */
    vkg_test_ranks_ok(WORLD, a.st, a.err[0], sizeof a.err[0], a.params, a.nparams);
    int first[2], last[2];
    parse_split(a.split[0], first);
    parse_split(a.split[STEPS - 1], last);
    for (int s = 0; s < STEPS; s++)
        printf("auto step %d: split %s loss %.7f\n", s + 1, a.split[s], (double)a.loss[s]);
    assert_int_equal(first[0], B), assert_int_equal(first[1], B);
    if (!(last[0] > last[1]))
        fail_msg("the faster rank 0 ends with %d rows, the slower rank 1 with %d", last[0],
                 last[1]);
    expect_log(auto_dir, &a);

    /* The same splits, fixed, chained through checkpoints where the split changes. */
    float loss[STEPS];
    float *params = NULL;
    size_t nparams = 0;
    int segments = 0;
    for (int s0 = 0; s0 < STEPS;) {
        int s1 = s0 + 1;
        while (s1 < STEPS && !strcmp(a.split[s1], a.split[s0]))
            s1++;
        job f = {.ckpt = fixed_dir, .resume = s0 > 0, .steps = s1 - s0, .loss_scale = 1024.0f};
        memcpy(f.model, model, sizeof model);
        parse_split(a.split[s0], f.rank_batch);
        run_job(&f);
        vkg_test_ranks_ok(WORLD, f.st, f.err[0], sizeof f.err[0], f.params, f.nparams);
        for (int s = s0; s < s1; s++) {
            assert_true(f.ran[s]);
            loss[s] = f.loss[s];
        }
        free(params);
        params = f.params[0], f.params[0] = NULL, nparams = f.nparams;
        free_job(&f);
        segments++;
        s0 = s1;
    }
    printf("%d fixed segments\n", segments);
    assert_true(segments >= 2);
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&loss[s], &a.loss[s], sizeof loss[s]))
            fail_msg("step %d (split %s): loss %.9g auto, %.9g fixed", s + 1, a.split[s],
                     (double)a.loss[s], (double)loss[s]);
    assert_int_equal(nparams, a.nparams);
    if (memcmp(params, a.params[0], nparams * sizeof *params))
        fail_msg("the final parameters differ from the fixed splits' run");
    free(params);
    free_job(&a);
}

static void test_auto_equals_fixed_splits(void **state)
{
    (void)state;
    auto_equals_fixed_splits(VKG_TEST_GPT2);
}

/* The same on a Llama-family model (GQA, RMSNorm, rope, SwiGLU, tied, rank_threads.h), whose
 * checkpoints hold config.json and model.safetensors. */
static void test_auto_equals_fixed_splits_llama(void **state)
{
    (void)state;
    auto_equals_fixed_splits(VKG_TEST_LLAMA);
}

/* Bytes of the memory plan of one rank with b rows, as the fit check counts them. */
static uint64_t plan_bytes(int b)
{
    vkg_model_config cfg = {.max_seq_len = MAXT,
                            .vocab_size = V,
                            .padded_vocab_size = vkg_model_pad_vocab(V),
                            .num_layers = L,
                            .num_heads = NH,
                            .channels = C};
    vkg_plan_opts po = {0};
    vkg_stage_memory m[1];
    assert_int_equal(vkg_strategy_plan(&cfg, b, T, ACCUM, 1, NULL, 0, &po, m), VKG_OK);
    return m[0].total;
}

static void test_split_within_memory(void **state)
{
    (void)state;
    vkg_os_setenv("VKG_TEST_ROW_DELAY_MS", "0,100", 1);
    job a = {.automatic = 1, .rebalance_every = 1, .steps = 6};
    a.memory_limit[0] = (plan_bytes(5) + plan_bytes(6)) / 2; /* 5 rows fit rank 0, 6 do not */
    run_job(&a);
    vkg_os_setenv("VKG_TEST_ROW_DELAY_MS", "", 1); /* empty: no delay */
    vkg_test_ranks_ok(WORLD, a.st, a.err[0], sizeof a.err[0], a.params, a.nparams);
    for (int s = 0; s < a.steps; s++) {
        int split[2];
        parse_split(a.split[s], split);
        printf("capped step %d: split %s\n", s + 1, a.split[s]);
        if (split[0] > 5)
            fail_msg("step %d gave rank 0 %d rows, beyond the 5 its memory fits", s + 1, split[0]);
    }
    assert_string_equal(a.split[a.steps - 1], "5,3");
    free_job(&a);
}

static void expect_refused(job *j, const char *needle)
{
    run_job(j);
    int world = WORLD * (j->pp > 1 ? j->pp : 1);
    for (int r = 0; r < world && r < WORLD; r++) {
        printf("rank %d: %s\n", r, j->err[r]);
        assert_int_equal(j->st[r], VKG_ERR_INVALID_ARG);
        if (!strstr(j->err[r], needle))
            fail_msg("rank %d: '%s' does not name %s", r, j->err[r], needle);
    }
    free_job(j);
}

static void test_refused(void **state)
{
    (void)state;
    job every0 = {.automatic = 1, .rebalance_every = 0, .steps = 1};
    expect_refused(&every0, "--rebalance-every must be > 0");
    job zero = {.automatic = 1, .rebalance_every = 2, .zero = 1, .steps = 1};
    expect_refused(&zero, "--rank-batch auto is not supported with --zero 1");
    job diloco = {.automatic = 1, .rebalance_every = 2, .diloco = 1, .steps = 1};
    expect_refused(&diloco, "--rank-batch auto is not supported with --sync diloco");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_equals_fixed_splits),
        cmocka_unit_test(test_auto_equals_fixed_splits_llama),
        cmocka_unit_test(test_split_within_memory),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_test_dir_teardown);
}
