/* The trainer through its public API (vkgpt/train.h): runs that must train bit for bit alike, on a
 * tiny model and tiny llm.c shards written to a temporary folder (train_fixture.h), every trainer
 * with the Khronos validation layer on and checked for zero validation messages:
 *  - resume is bit-identical: 6 steps straight vs 3 + checkpoint + a new trainer resumed + 3, with
 *    shuffling, gradient accumulation (2 micro-batches per step), warmup, evaluation and an epoch
 *    boundary crossed after the resume: per-step losses, norms, lrs and eval losses, the final
 *    parameters, and the checkpoint files are equal byte for byte; the resumed log holds exactly
 *    steps 1..6 whose losses read back to the same bits; resuming with another seed is refused;
 *    the same for a Qwen 3-style model of the Llama family (its checkpoints: config.json and
 *    model.safetensors);
 *  - pools split into many allocations (and the staging path) and GELU recomputation train
 *    bitwise as the plain run; too little memory, or an allocation limit below the parameters,
 *    is refused before anything is allocated, naming what does not fit and what would.
 * Refused inputs and damaged checkpoints: test_train_refused.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "testutil.h"
#include "train_fixture.h"
#include "vkgpt/train.h"

/* ---- resume ---------------------------------------------------------------------------------- */

static void check_log(const char *log, const vkg_test_step_record *want)
{
    size_t n;
    char *text = vkg_test_must_read(log, &n);
    int lines = 0;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        lines++;
        const char *sp = strstr(line, "\"step\":"), *lp = strstr(line, "\"loss\":");
        if (!sp || !lp)
            fail_msg("log line %d has no step or loss: %s", lines, line);
        assert_int_equal(strtoll(sp + 7, NULL, 10), lines);
        float loss = strtof(lp + 7, NULL);
        if (memcmp(&loss, &want->loss[lines - 1], sizeof loss) != 0)
            fail_msg("log line %d: loss %.9g, the straight run had %.9g", lines, (double)loss,
                     (double)want->loss[lines - 1]);
    }
    assert_int_equal(lines, STEPS);
    free(text);
}

/* Resume bit for bit; model: NULL (GPT-2 of the fixture's sizes) or a config.json's path; the
 * checkpoints' files (named in files) compared byte for byte. */
static void resume_bit_identical(const char *tag, const char *model, const char *const *files)
{
    vkg_test_train_data(tag);
    vkg_test_run_paths pa, pb;
    char pth[PATH_CAP], ck_a[PATH_CAP], ck_b[PATH_CAP], fa[PATH_CAP], fb[PATH_CAP];
    vkg_test_step_record straight, split;
    vkg_trainer_t *t = NULL;
    vkg_trainer_info info;

    char straight_dir[32], split_dir[32], split_ckpt[64], split_log[64], straight_log[64];
    snprintf(straight_dir, sizeof straight_dir, "%s-straight", tag);
    snprintf(split_dir, sizeof split_dir, "%s-split", tag);
    snprintf(split_ckpt, sizeof split_ckpt, "%s/step_00000003/DONE", split_dir);
    snprintf(split_log, sizeof split_log, "%s/log.jsonl", split_dir);
    snprintf(straight_log, sizeof straight_log, "%s/log.jsonl", straight_dir);

    /* Straight: 6 steps, then a checkpoint. */
    vkg_train_config ca = vkg_test_train_config(&pa, tag, straight_dir);
    ca.model = model;
    VKG_ASSERT_OK(vkg_trainer_create(&ca, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.accum_steps, 2);
    assert_int_equal(info.padded_vocab_size, 128);
    assert_int_equal(info.resumed, 0);
    size_t n = info.num_params;
    float *params_a = vkg_test_alloc(n), *params_b = vkg_test_alloc(n);
    vkg_test_train_steps(t, 1, STEPS, &straight);
    assert_true(vkg_trainer_done(t));
    VKG_ASSERT_OK(vkg_trainer_get_params(t, params_a));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, ck_a, sizeof ck_a));
    vkg_test_trainer_destroy_clean(&t);
    assert_null(t);

    /* Split: 3 steps, checkpoint, destroy; a new trainer resumes and runs the other 3. */
    vkg_train_config cb = vkg_test_train_config(&pb, tag, split_dir);
    cb.model = model;
    VKG_ASSERT_OK(vkg_trainer_create(&cb, &t));
    vkg_test_train_steps(t, 1, STEPS / 2, &split);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_test_trainer_destroy_clean(&t);
    assert_true(vkg_test_exists(vkg_test_path_in(pth, "%s", split_ckpt)));

    cb.resume = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&cb, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.resumed, 1);
    assert_int_equal(info.start_step, STEPS / 2);
    vkg_test_train_steps(t, STEPS / 2 + 1, STEPS, &split);
    assert_true(vkg_trainer_done(t));
    VKG_ASSERT_OK(vkg_trainer_get_params(t, params_b));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, ck_b, sizeof ck_b));
    vkg_test_trainer_destroy_clean(&t);

    for (int s = 0; s < STEPS; s++)
        printf("step %d loss %.9g / %.9g  norm %.9g / %.9g  lr %.6g  eval %.9g / %.9g\n", s + 1,
               (double)straight.loss[s], (double)split.loss[s], (double)straight.norm[s],
               (double)split.norm[s], (double)split.lr[s], (double)straight.eval[s],
               (double)split.eval[s]);
    /* The run must actually move, so that equality means something. */
    assert_true(straight.loss[STEPS - 1] < straight.loss[0]);
    assert_true(straight.lr[0] < straight.lr[1]); /* warmup */
    assert_memory_equal(straight.loss, split.loss, sizeof straight.loss);
    assert_memory_equal(straight.norm, split.norm, sizeof straight.norm);
    assert_memory_equal(straight.lr, split.lr, sizeof straight.lr);
    assert_memory_equal(straight.eval, split.eval, sizeof straight.eval);
    if (memcmp(params_a, params_b, n * sizeof *params_a) != 0) {
        size_t i = 0;
        while (memcmp(&params_a[i], &params_b[i], sizeof *params_a) == 0)
            i++;
        fail_msg("final parameters differ first at %zu: %.9g vs %.9g", i, (double)params_a[i],
                 (double)params_b[i]);
    }
    for (int i = 0; files[i]; i++)
        vkg_test_expect_same_file(vkg_test_join(fa, ck_a, files[i]),
                                  vkg_test_join(fb, ck_b, files[i]));
    check_log(vkg_test_path_in(pth, "%s", split_log), &straight);
    check_log(vkg_test_path_in(pth, "%s", straight_log), &straight);
    assert_true(vkg_test_exists(vkg_test_path_in(pth, "%s/log.svg", split_dir)));

    /* The same folder with another seed (or another batch shape) is refused, not mixed. */
    cb.seed = 99;
    vkg_test_expect_refused(vkg_trainer_create(&cb, &t), VKG_ERR_MISMATCH, "seed", NULL);
    assert_null(t);
    free(params_a);
    free(params_b);
}

static void test_resume_is_bit_identical(void **state)
{
    (void)state;
    static const char *const files[] = {"model.bin", "state.bin", NULL};
    resume_bit_identical("r", NULL, files);
}

/* The same for the Llama family: a Qwen 3-style model (QK-norm, head_dim 16 != C/NH, GQA 4/2,
 * rotary embeddings, SwiGLU, untied head), whose checkpoints hold config.json and
 * model.safetensors in place of llm.c's model.bin. */
static void test_resume_is_bit_identical_llama_family(void **state)
{
    (void)state;
    char path[PATH_CAP];
    vkg_test_path_in(path, "qwen3-tiny.json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"model_type\": \"qwen3\", \"hidden_size\": %d, \"intermediate_size\": 48, "
            "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": 2, "
            "\"head_dim\": 16, \"vocab_size\": %d, \"max_position_embeddings\": %d, "
            "\"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false}\n",
            C, L, NH, V, MAXT);
    assert_int_equal(fclose(f), 0);
    static const char *const files[] = {"config.json", "model.safetensors", "state.bin", NULL};
    resume_bit_identical("q", path, files);
}

/* ---- memory plans ---------------------------------------------------------------------------- */

/* Run STEPS steps of cfg and keep the records and the final parameters; info out. */
static void run_whole(vkg_train_config *cfg, vkg_test_step_record *rec, float *params,
                      vkg_trainer_info *info)
{
    vkg_trainer_t *t = NULL;
    VKG_ASSERT_OK(vkg_trainer_create(cfg, &t));
    vkg_trainer_get_info(t, info);
    vkg_test_train_steps(t, 1, STEPS, rec);
    VKG_ASSERT_OK(vkg_trainer_get_params(t, params));
    vkg_test_trainer_destroy_clean(&t);
}

static void expect_same_run(const char *what, const vkg_test_step_record *a,
                            const vkg_test_step_record *b, const float *pa, const float *pb,
                            size_t n)
{
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&a->loss[s], &b->loss[s], sizeof(float)) ||
            memcmp(&a->norm[s], &b->norm[s], sizeof(float)) ||
            memcmp(&a->eval[s], &b->eval[s], sizeof(float)))
            fail_msg("%s: step %d loss %.9g / %.9g norm %.9g / %.9g eval %.9g / %.9g", what, s + 1,
                     (double)a->loss[s], (double)b->loss[s], (double)a->norm[s], (double)b->norm[s],
                     (double)a->eval[s], (double)b->eval[s]);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&pa[i], &pb[i], sizeof *pa))
            fail_msg("%s: parameter %zu %.9g / %.9g", what, i, (double)pa[i], (double)pb[i]);
    printf("%s: %d steps, losses, norms and %zu parameters bitwise equal\n", what, STEPS, n);
}

/* Pools split into many allocations (a largest allocation just above the largest tensor, the
 * staging path too) and GELU recomputation train bitwise as the plain run: same ops, same
 * order of additions, other addresses. */
static void test_split_memory_and_recompute_are_bit_identical(void **state)
{
    (void)state;
    vkg_test_train_data("m");
    vkg_test_run_paths p;
    vkg_test_step_record plain, other;
    vkg_trainer_info ip, io;
    vkg_train_config c = vkg_test_train_config(&p, "m", NULL);
    c.max_seq_len = MAXT;
    size_t n = 0;
    {
        vkg_trainer_t *t = NULL;
        VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
        vkg_trainer_get_info(t, &ip);
        n = ip.num_params;
        vkg_trainer_destroy(&t);
    }
    float *pa = vkg_test_alloc(n), *pb = vkg_test_alloc(n);
    run_whole(&c, &plain, pa, &ip);
    assert_true(plain.loss[STEPS - 1] < plain.loss[0]);

    vkg_train_config cs = c;
    cs.max_allocation = (ip.param_bytes + 65535) / 65536 * 65536; /* the parameters just fit */
    cs.force_staging = 1;
    run_whole(&cs, &other, pb, &io);
    printf("allocations: %d without a limit, %d with %llu bytes at most; %.1f KiB of host copies\n",
           ip.allocations, io.allocations, (unsigned long long)io.max_allocation,
           (double)io.host_bytes / 1024.0);
    assert_int_equal(io.max_allocation, cs.max_allocation);
    assert_true(io.allocations > ip.allocations);
    expect_same_run("split allocations, staging", &plain, &other, pa, pb, n);

    /* Too little memory, or an allocation limit below the parameters: refused before anything is
     * allocated, naming what does not fit and what would. */
    vkg_train_config cm = c;
    cm.memory_limit = ip.device_bytes - (32 << 10); /* B = 1 needs about 100 KiB less */
    vkg_trainer_t *t = NULL;
    vkg_test_expect_refused(vkg_trainer_create(&cm, &t), VKG_ERR_NOMEM, "--batch 2 x --seq 8 need",
                            "the largest --batch that fits is 1");
    assert_null(t);
    cm.memory_limit = ip.device_bytes / 2; /* less than the parameters and AdamW need */
    vkg_test_expect_refused(vkg_trainer_create(&cm, &t), VKG_ERR_NOMEM,
                            "the largest pool: AdamW moments", "no --batch fits");
    assert_null(t);
    cm = c;
    cm.max_allocation = 64 << 10; /* the parameters are 117.5 KiB */
    vkg_test_expect_refused(vkg_trainer_create(&cm, &t), VKG_ERR_NOMEM, "tensor params needs",
                            "no --batch fits");
    assert_null(t);

    vkg_train_config cr = c;
    cr.recompute = 1;
    run_whole(&cr, &other, pb, &io);
    assert_true(io.activation_bytes < ip.activation_bytes);
    expect_same_run("recompute gelu", &plain, &other, pa, pb, n);
    free(pa);
    free(pb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_bit_identical),
        cmocka_unit_test(test_resume_is_bit_identical_llama_family),
        cmocka_unit_test(test_split_memory_and_recompute_are_bit_identical),
    };
    return cmocka_run_group_tests(tests, vkg_test_train_setup, vkg_test_train_teardown);
}
