/* Hugging Face's formats through the built binary (VKGPT_BIN), the Khronos validation layer on:
 *  - `train --save-hf fp32` writes each checkpoint's model also as step_N/hf (config.json,
 *    model.safetensors) holding exactly model.bin's parameters; with bf16, each rounded to
 *    nearest even;
 *  - --keep prunes old checkpoints with their hf folder;
 *  - `train --init step_N/hf` starts from such a directory, and its first loss equals that of
 *    `--init step_N/model.bin` (the same parameters, bitwise);
 *  - `train --model CONFIG.json` starts a new model of that configuration; --model with an
 *    architecture flag is refused before anything runs, an unknown one naming the presets;
 *  - a Qwen 2-style model (q/k/v biases, GQA, untied head) trains from its config.json, prints
 *    its family, checkpoints as config.json + model.safetensors (which read back), resumes, and
 *    `vkgpt sample` writes text from its checkpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testproc.h"
#include "testutil.h"
#include "vkgpt/io.h"

static char tmp_root[400], text_path[512];

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_cli_hf"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < 300; i++)
        fprintf(f, "the cat sat on the mat %d times, and the dog did not.\n", i);
    return fclose(f);
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* Run vkgpt with args, stderr merged; the exit code, the output in p. */
static int run(vkg_test_proc *p, const char *const *args)
{
    const vkg_test_proc_opts opts = {.merge_stderr = 1};
    vkg_test_proc_start(p, args, &opts);
    int rc = vkg_test_proc_wait(p, 300);
    printf("%s", p->buf[0]);
    return rc;
}

#define SHAPE                                                                                      \
    "--data", text_path, "--batch", "2", "--seq", "32", "--sample-len", "0", "--validation",       \
        "--lr", "1e-3"

/* The first step's loss as printed ("step 1/N loss X"). */
static double first_loss(const vkg_test_proc *p)
{
    const char *s = strstr(p->buf[0], "step 1/");
    const char *l = s ? strstr(s, " loss ") : NULL;
    if (!l)
        fail_msg("no first step in the output:\n%s", p->buf[0]);
    return atof(l + 6);
}

static void test_save_and_init(void **state)
{
    (void)state;
    char ck[600], ckb[600], hf[700], hfb[700], bin[700], cfg[800];
    snprintf(ck, sizeof ck, "%s/ck", tmp_root);
    snprintf(ckb, sizeof ckb, "%s/ckb", tmp_root);
    vkg_test_proc p;
    const char *save[] = {"train",      SHAPE, "--layers",  "1",    "--heads", "2",
                          "--channels", "32",  "--ctx",     "32",   "--steps", "2",
                          "--ckpt-dir", ck,    "--save-hf", "fp32", NULL};
    assert_int_equal(run(&p, save), 0);
    vkg_test_proc_free(&p);
    snprintf(hf, sizeof hf, "%s/step_00000002/hf", ck);
    snprintf(bin, sizeof bin, "%s/step_00000002/model.bin", ck);
    vkg_model_config a, b;
    float *pa = NULL, *pb = NULL;
    assert_int_equal(vkg_hf_model_read(hf, &a, &pa), VKG_OK);
    assert_int_equal(vkg_modelfile_read(bin, &b, &pb), VKG_OK);
    assert_memory_equal(&a, &b, sizeof a);
    assert_memory_equal(pa, pb, vkg_model_num_params(&a) * sizeof *pa);
    free(pa);

    const char *save_b[] = {"train",      SHAPE, "--layers",  "1",    "--heads", "2",
                            "--channels", "32",  "--ctx",     "32",   "--steps", "2",
                            "--ckpt-dir", ckb,   "--save-hf", "bf16", NULL};
    assert_int_equal(run(&p, save_b), 0);
    vkg_test_proc_free(&p);
    snprintf(hfb, sizeof hfb, "%s/step_00000002/hf", ckb);
    assert_int_equal(vkg_hf_model_read(hfb, &a, &pa), VKG_OK);
    size_t n = vkg_model_num_params(&a), off = 0;
    vkg_param_table t;
    vkg_model_params(&a, &t);
    for (size_t i = 0; i < n; i++) /* the same run: model.bin's values, each rounded to bf16 */
        off += pa[i] != vkg_bf16_to_f32(vkg_f32_to_bf16(pb[i])) &&
               !(i >= (size_t)a.vocab_size * a.channels && i < t.t[0].count); /* padding: 0 */
    assert_int_equal(off, 0);
    free(pa), free(pb);

    const char *from_hf[] = {"train", SHAPE, "--init", hf, "--steps", "1", NULL};
    assert_int_equal(run(&p, from_hf), 0);
    double l_hf = first_loss(&p);
    vkg_test_proc_free(&p);
    const char *from_bin[] = {"train", SHAPE, "--init", bin, "--steps", "1", NULL};
    assert_int_equal(run(&p, from_bin), 0);
    double l_bin = first_loss(&p);
    vkg_test_proc_free(&p);
    assert_true(l_hf == l_bin);
    printf("--init step_2/hf and --init step_2/model.bin: first loss %.6f both\n", l_hf);

    snprintf(cfg, sizeof cfg, "%s/config.json", hf);
    const char *model[] = {"train", SHAPE, "--model", cfg, "--steps", "1", NULL};
    assert_int_equal(run(&p, model), 0);
    if (!strstr(p.buf[0], "L=1 NH=2 C=32 maxT=32"))
        fail_msg("--model %s did not give its configuration:\n%s", cfg, p.buf[0]);
    vkg_test_proc_free(&p);
}

/* --keep prunes checkpoints with their hf folder. */
static void test_prune_with_hf(void **state)
{
    (void)state;
    char ck[600], old[700], kept[700];
    snprintf(ck, sizeof ck, "%s/ck_keep", tmp_root);
    vkg_test_proc p;
    const char *args[] = {"train",        SHAPE, "--layers", "1",  "--heads",   "2",
                          "--channels",   "32",  "--ctx",    "32", "--steps",   "3",
                          "--ckpt-every", "1",   "--keep",   "1",  "--save-hf", "fp32",
                          "--ckpt-dir",   ck,    NULL};
    assert_int_equal(run(&p, args), 0);
    vkg_test_proc_free(&p);
    snprintf(old, sizeof old, "%s/step_00000001", ck);
    snprintf(kept, sizeof kept, "%s/step_00000003/hf/model.safetensors", ck);
    FILE *f = fopen(old, "rb");
    assert_null(f);
    f = fopen(kept, "rb");
    assert_non_null(f);
    fclose(f);
}

static void test_model_refusals(void **state)
{
    (void)state;
    vkg_test_proc p;
    const char *both[] = {"train", SHAPE, "--model", "llama-125m", "--layers", "2", NULL};
    assert_int_equal(run(&p, both), 2);
    if (!strstr(p.buf[0], "--layers conflicts with --model"))
        fail_msg("--model with --layers not refused by name:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
    const char *nothing[] = {"train", SHAPE, "--model", "no-such-model", "--steps", "1", NULL};
    assert_true(run(&p, nothing) != 0);
    if (!strstr(p.buf[0], "neither a preset") || !strstr(p.buf[0], "tinyllama-1.1b"))
        fail_msg("an unknown --model not refused naming the presets:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
}

static void test_llama_family_cli(void **state)
{
    (void)state;
    char cfg[600], ck[600], step[700];
    snprintf(cfg, sizeof cfg, "%s/qwen2.json", tmp_root);
    snprintf(ck, sizeof ck, "%s/ck_qwen2", tmp_root);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "{\"model_type\": \"qwen2\", \"hidden_size\": 32, \"intermediate_size\": 48, "
               "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, "
               "\"vocab_size\": 257, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-6, "
               "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false}\n");
    assert_int_equal(fclose(f), 0);
    vkg_test_proc p;
    const char *train[] = {"train",      SHAPE, "--model",      cfg, "--steps", "2",
                           "--ckpt-dir", ck,    "--ckpt-every", "2", NULL};
    assert_int_equal(run(&p, train), 0);
    if (!strstr(p.buf[0], "family: RMSNorm (eps 1e-06), rotary (theta 10000), GQA 4/1 heads of 8, "
                          "SwiGLU 48, q/k/v biases, untied head"))
        fail_msg("the family is not printed as configured:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
    snprintf(step, sizeof step, "%s/step_00000002", ck);
    vkg_model_config c;
    float *params = NULL;
    assert_int_equal(vkg_hf_model_read(step, &c, &params), VKG_OK);
    assert_int_equal(c.bias, VKG_BIAS_QKV);
    assert_int_equal(c.untied, 1);
    assert_int_equal(c.num_kv_heads, 1);
    free(params);
    const char *resume[] = {"train", SHAPE,        "--model", cfg,        "--steps",
                            "3",     "--ckpt-dir", ck,        "--resume", NULL};
    assert_int_equal(run(&p, resume), 0);
    if (!strstr(p.buf[0], "step 3/3"))
        fail_msg("the resumed run did not take step 3:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
    const char *sample[] = {"sample", "--ckpt", ck, "--len", "16", "--raw", NULL};
    assert_int_equal(run(&p, sample), 0);
    assert_true(strlen(p.buf[0]) >= 16); /* 16 byte-level tokens at least */
    vkg_test_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_family_cli),
        cmocka_unit_test(test_save_and_init),
        cmocka_unit_test(test_prune_with_hf),
        cmocka_unit_test(test_model_refusals),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
