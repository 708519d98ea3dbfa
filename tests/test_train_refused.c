/* The trainer through its public API (vkgpt/train.h): what it refuses, and how it recovers from a
 * checkpoint damaged or cut short, on a tiny model and tiny llm.c shards written to a temporary
 * folder (train_fixture.h), every trainer with the Khronos validation layer on and checked for
 * zero validation messages:
 *  - corrupted inputs are refused with the right status and a message naming the file: truncated
 *    model file, state file with one flipped byte, shard with a bad magic, token >= vocabulary;
 *  - a total batch that does not divide B*T and a device that does not exist are refused;
 *  - a newest checkpoint marked complete but damaged (truncated model.bin or state.bin, a wrong
 *    header field) stops --resume naming the file and changes nothing; with the fallback the run
 *    resumes from the older one (passing over a newer one without DONE, a crash mid-write),
 *    repeats the original steps exactly, and the damaged folder is set aside byte for byte
 *    intact beside the new checkpoint of its step; a checkpoint is never written over; a folder
 *    with only an unreadable checkpoint is refused rather than restarted from scratch, and a
 *    new run refuses a folder holding another run's checkpoints;
 *  - a second trainer on a checkpoint folder is refused, naming the holder, its log untouched.
 * Runs that must train bitwise alike (resume, split memory, recompute): test_train.c. */
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
#include "os/file.h"
#include "ref/gpt2_ref.h"
#include "testutil.h"
#include "train_fixture.h"
#include "vkgpt/io.h"
#include "vkgpt/train.h"

/* ---- refused inputs -------------------------------------------------------------------------- */

/* Overwrite n bytes of a file in place at offset. */
static void overwrite(const char *path, long offset, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Corrupt a file in place: XOR the byte at offset with mask. */
static void flip_bits(const char *path, long offset, int mask)
{
    size_t n;
    unsigned char *buf = vkg_test_must_read(path, &n);
    assert_true((size_t)offset < n);
    unsigned char byte = (unsigned char)(buf[offset] ^ mask);
    free(buf);
    overwrite(path, offset, &byte, 1);
}

/* A run of one step (the tiny run's data of tag) that leaves its checkpoint in ckpt; its
 * configuration, for a resume. */
static vkg_train_config checkpoint_after_one_step(vkg_test_run_paths *p, const char *tag,
                                                  const char *ckpt)
{
    vkg_train_config c = vkg_test_train_config(p, tag, ckpt);
    c.steps = 1;
    vkg_trainer_t *t = NULL;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_step_info si;
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_trainer_destroy(&t);
    return c;
}

static void test_corrupt_inputs_are_refused(void **state)
{
    (void)state;
    vkg_test_train_data("c");
    vkg_test_run_paths p;
    char good[PATH_CAP], bad[PATH_CAP], stp[PATH_CAP];
    vkg_trainer_t *t = NULL;

    /* A model file that loads, and the same file truncated. */
    vkg_model_config mcfg = {.max_seq_len = MAXT,
                             .vocab_size = V,
                             .padded_vocab_size = 128,
                             .num_layers = L,
                             .num_heads = NH,
                             .channels = C};
    vkg_ref_gpt2_config_t rcfg = {.maxT = MAXT, .V = V, .Vp = 128, .L = L, .NH = NH, .C = C};
    size_t n = vkg_model_num_params(&mcfg);
    float *params = vkg_test_alloc(n), *back = vkg_test_alloc(n);
    vkg_ref_gpt2_init_params(&rcfg, params, 5);
    VKG_ASSERT_OK(vkg_modelfile_write(vkg_test_path_in(good, "c_model.bin"), &mcfg, params));
    vkg_train_config c = vkg_test_train_config(&p, "c", NULL);
    c.init_path = good;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    VKG_ASSERT_OK(vkg_trainer_get_params(t, back));
    assert_memory_equal(params, back, n * sizeof *params);
    vkg_test_trainer_destroy_clean(&t);
    VKG_ASSERT_OK(vkg_modelfile_write(vkg_test_path_in(bad, "c_truncated.bin"), &mcfg, params));
    assert_int_equal(vkg_os_truncate(bad, VKG_FILE_HEADER_BYTES + 4 * n - 100), 0);
    c.init_path = bad;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "truncated");
    assert_null(t);

    /* A checkpoint whose state.bin has one byte flipped (in AdamW's m), and one with a good
     * state.bin but one byte of a parameter flipped in model.bin: state.bin's record of the
     * parameters' checksum catches it. */
    const struct {
        const char *ckpt, *file;
        long offset;
        int mask;
    } flips[2] = {{"c_ckpt", "state.bin", VKG_FILE_HEADER_BYTES + 4 * 1000 + 2, 0x10},
                  {"c_ckpt2", "model.bin", VKG_FILE_HEADER_BYTES + 4 * 500 + 1, 0x01}};
    for (int i = 0; i < 2; i++) {
        c = checkpoint_after_one_step(&p, "c", flips[i].ckpt);
        flip_bits(vkg_test_path_in(stp, "%s/step_00000001/%s", flips[i].ckpt, flips[i].file),
                  flips[i].offset, flips[i].mask);
        c.resume = 1;
        vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, stp, "checksum");
        assert_null(t);
    }

    /* A model file holding a NaN (as a diverged run would leave): refused, naming the tensor. */
    c = vkg_test_train_config(&p, "c", NULL);
    vkg_param_table pt;
    vkg_model_params(&mcfg, &pt);
    size_t qkvw = pt.t[4].offset; /* wte, wpe, ln1w, ln1b precede qkvw */
    assert_string_equal(pt.t[4].name, "qkvw");
    params[qkvw + 7] = NAN;
    VKG_ASSERT_OK(vkg_modelfile_write(vkg_test_path_in(bad, "c_nan.bin"), &mcfg, params));
    c.init_path = bad;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad,
                            "parameter 7 of tensor qkvw");
    assert_null(t);

    /* A shard with a bad magic. */
    c = vkg_test_train_config(&p, "c", NULL);
    size_t len;
    unsigned char *shard = vkg_test_must_read(vkg_test_path_in(good, "c_train_001.bin"), &len);
    shard[0] ^= 0x01;
    FILE *f = fopen(vkg_test_path_in(bad, "c_badmagic.bin"), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(shard, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(shard);
    c.data = bad;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "magic");

    /* A shard with a token outside the vocabulary, at position 37. */
    uint16_t toks[4 * B * T + 1];
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++)
        toks[i] = (uint16_t)(i % V);
    toks[37] = V + 5;
    VKG_ASSERT_OK(vkg_shard_write(vkg_test_path_in(bad, "c_badtoken.bin"), toks, 4 * B * T + 1));
    c.data = bad;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad,
                            "token 105 at position 37");
    c.data = p.data;
    c.val_data = bad;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "position 37");
    assert_null(t);
    free(params);
    free(back);
}

static void test_bad_config_is_refused(void **state)
{
    (void)state;
    vkg_test_train_data("b");
    vkg_test_run_paths p;
    vkg_trainer_t *t = NULL;
    vkg_train_config c = vkg_test_train_config(&p, "b", NULL);
    c.total_batch = 3 * B * T + 8; /* not a multiple of B*T = 16 */
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--total-batch", "56");
    c = vkg_test_train_config(&p, "b", NULL);
    c.device = "99";
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND, "99", NULL);
    c.device = "no-such-vulkan-device";
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND, "no-such-vulkan-device",
                            NULL);
    c = vkg_test_train_config(&p, "b", NULL);
    c.seq = MAXT + 1;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--seq", NULL);
    c = vkg_test_train_config(&p, "b", NULL);
    c.resume = 1; /* --resume without --ckpt-dir would silently start afresh */
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--ckpt-dir", NULL);
    c = vkg_test_train_config(&p, "b", NULL);
    c.data = vkg_test_path_in(p.data, "b_nothing_*.bin");
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND, "b_nothing_", NULL);
    c.vocab_size = 0; /* no vocabulary but the one a tokenizer beside the data would give */
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND,
                            "--data: ", "no file matches '");
    c = vkg_test_train_config(&p, "b", NULL);
    char val[PATH_CAP];
    c.val_data = vkg_test_path_in(val, "b_val_typo.bin");
    c.eval_every = 1;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND,
                            "--val-data: ", "b_val_typo.bin'");
    assert_null(t);
}

/* ---- crash mid-checkpoint, damaged checkpoints, one run per folder -------------------------- */

/* The bytes of a checkpoint directory's files. */
typedef struct ckpt_bytes {
    unsigned char *b[3];
    size_t n[3];
} ckpt_bytes;

static const char *const ckpt_files[3] = {"model.bin", "state.bin", "DONE"};

static void take_bytes(const char *dir, ckpt_bytes *cb)
{
    char f[PATH_CAP];
    for (int i = 0; i < 3; i++)
        cb->b[i] = vkg_test_must_read(vkg_test_join(f, dir, ckpt_files[i]), &cb->n[i]);
}

/* dir holds exactly the bytes of cb (freed). */
static void expect_bytes(const char *dir, ckpt_bytes *cb)
{
    char f[PATH_CAP];
    for (int i = 0; i < 3; i++) {
        size_t n;
        unsigned char *now = vkg_test_must_read(vkg_test_join(f, dir, ckpt_files[i]), &n);
        if (n != cb->n[i] || memcmp(now, cb->b[i], n) != 0)
            fail_msg("%s changed: %zu bytes, were %zu", f, n, cb->n[i]);
        free(now);
        free(cb->b[i]);
    }
}

/* Overwrite the 32-bit header slot `slot` of a file in place. */
static void poke_slot(const char *path, int slot, int32_t value)
{
    overwrite(path, 4L * slot, &value, sizeof value);
}

static void test_crash_mid_checkpoint_resumes_older(void **state)
{
    (void)state;
    vkg_test_train_data("k");
    vkg_test_run_paths p;
    char a[PATH_CAP], b[PATH_CAP], log[PATH_CAP];
    vkg_test_step_record orig, again;
    vkg_trainer_t *t = NULL;
    vkg_train_config c = vkg_test_train_config(&p, "k", "k_ckpt");
    c.steps = 4;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_test_train_steps(t, 1, 2, &orig);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_test_train_steps(t, 3, 4, &orig);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_test_trainer_destroy_clean(&t);
    size_t n_log;
    unsigned char *log_before =
        vkg_test_must_read(vkg_test_path_in(log, "k_ckpt/log.jsonl"), &n_log);
    char model_copy[PATH_CAP], state_copy[PATH_CAP];
    vkg_test_copy_file(vkg_test_path_in(a, "k_ckpt/step_00000004/model.bin"),
                       vkg_test_path_in(model_copy, "k_model4.bin"));
    vkg_test_copy_file(vkg_test_path_in(a, "k_ckpt/step_00000004/state.bin"),
                       vkg_test_path_in(state_copy, "k_state4.bin"));

    /* A new run in the folder is refused: it would write over this run's checkpoints and log. */
    vkg_train_config fresh = c;
    fresh.resume = 0;
    vkg_test_expect_refused(vkg_trainer_create(&fresh, &t), VKG_ERR_INVALID_ARG, "--ckpt-dir",
                            "--resume");
    assert_null(t);

    /* The newest checkpoint, marked complete, damaged three ways: each stops --resume naming the
     * file and what is wrong, and changes nothing. */
    char dir4_buf[PATH_CAP];
    const char *dir4 = vkg_test_path_in(dir4_buf, "k_ckpt/step_00000004");
    c.resume = 1;
    for (int damage = 0; damage < 3; damage++) {
        ckpt_bytes cb;
        vkg_test_copy_file(model_copy, vkg_test_join(a, dir4, "model.bin"));
        vkg_test_copy_file(state_copy, vkg_test_join(a, dir4, "state.bin"));
        if (damage == 0) /* truncated model.bin */
            assert_int_equal(
                vkg_os_truncate(vkg_test_join(a, dir4, "model.bin"), VKG_FILE_HEADER_BYTES + 4000),
                0);
        if (damage == 1) /* truncated state.bin (a crash cannot leave this beside DONE) */
            assert_int_equal(vkg_os_truncate(vkg_test_join(a, dir4, "state.bin"), 3000), 0);
        if (damage == 2) /* model.bin's header with another number of heads (same size) */
            poke_slot(vkg_test_join(a, dir4, "model.bin"), 5, 2);
        take_bytes(dir4, &cb);
        const char *file = vkg_test_join(a, dir4, damage == 0 ? "model.bin" : "state.bin");
        vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, file,
                                damage == 2 ? "does not match" : "truncated");
        assert_non_null(strstr(vkg_error_message(), "--resume-fallback"));
        assert_null(t);
        expect_bytes(dir4, &cb);
    }
    size_t n;
    unsigned char *log_now = vkg_test_must_read(log, &n);
    assert_true(n == n_log && memcmp(log_now, log_before, n) == 0);
    free(log_now);

    /* A crash mid-write of step 5 (no DONE) beside it. --resume-fallback resumes from step 2:
     * step 4 is set aside untouched, the run repeats the original steps exactly and writes a new
     * step 4 beside it. */
    assert_int_equal(vkg_os_mkdir(vkg_test_path_in(a, "k_ckpt/step_00000005")), 0);
    vkg_test_copy_file(vkg_test_path_in(a, "k_ckpt/step_00000002/model.bin"),
                       vkg_test_path_in(b, "k_ckpt/step_00000005/model.bin"));
    vkg_test_copy_file(vkg_test_path_in(a, "k_ckpt/step_00000002/state.bin"),
                       vkg_test_path_in(b, "k_ckpt/step_00000005/state.bin"));
    ckpt_bytes damaged;
    take_bytes(dir4, &damaged);
    c.resume_fallback = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_trainer_info info;
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.resumed, 1);
    assert_int_equal(info.start_step, 2);
    /* and the user is told what was passed over, why, and where it went */
    printf("passed over: %s\n", info.resume_skipped);
    assert_non_null(strstr(info.resume_skipped, "step_00000005 ("));
    assert_non_null(strstr(info.resume_skipped, "no DONE"));
    assert_non_null(strstr(info.resume_skipped, "step_00000004 (does not load"));
    assert_non_null(strstr(info.resume_skipped, "does not match"));
    assert_non_null(strstr(info.resume_skipped, "as step_00000004.damaged"));
    vkg_test_train_steps(t, 3, 4, &again);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_test_trainer_destroy_clean(&t);
    assert_memory_equal(&orig.loss[2], &again.loss[2], 2 * sizeof orig.loss[0]);
    assert_memory_equal(&orig.norm[2], &again.norm[2], 2 * sizeof orig.norm[0]);
    expect_bytes(vkg_test_path_in(a, "k_ckpt/step_00000004.damaged"), &damaged);
    assert_true(vkg_test_exists(vkg_test_path_in(a, "k_ckpt/step_00000004/DONE")));
    /* the new step 4 is the original one, byte for byte (only its header was damaged) */
    poke_slot(vkg_test_path_in(a, "k_ckpt/step_00000004.damaged/model.bin"), 5, NH);
    vkg_test_expect_same_file(vkg_test_path_in(a, "k_ckpt/step_00000004.damaged/model.bin"),
                              vkg_test_path_in(b, "k_ckpt/step_00000004/model.bin"));
    /* and it is never written over: a second checkpoint of the same step is refused */
    vkg_train_config again_cfg = c;
    again_cfg.steps = 4;
    VKG_ASSERT_OK(vkg_trainer_create(&again_cfg, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.start_step, 4);
    vkg_test_expect_refused(vkg_trainer_checkpoint(t, NULL, 0), VKG_ERR_STATE, "step_00000004",
                            "marked complete");
    vkg_trainer_destroy(&t);

    /* Only a complete-but-unreadable checkpoint left: refused, not restarted from scratch,
     * with or without the fallback. */
    c = checkpoint_after_one_step(&p, "k", "k_only");
    assert_int_equal(vkg_os_truncate(vkg_test_path_in(a, "k_only/step_00000001/model.bin"), 2000),
                     0);
    c.resume = 1;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, "step_00000001",
                            "model.bin");
    c.resume_fallback = 1;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, "step_00000001",
                            "model.bin");
    assert_null(t);
    assert_true(vkg_test_exists(vkg_test_path_in(a, "k_only/step_00000001/DONE")));
    c.resume_fallback = 0;
    /* A folder with only an incomplete (no DONE) checkpoint starts afresh. */
    assert_int_equal(remove(vkg_test_path_in(a, "k_only/step_00000001/DONE")), 0);
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.resumed, 0);
    assert_int_equal(info.start_step, 0);
    vkg_trainer_destroy(&t);
    /* --resume-fallback alone is a usage error */
    c.resume = 0, c.resume_fallback = 1;
    vkg_test_expect_refused(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--resume-fallback",
                            "--resume");
    free(log_before);
}

/* Two trainers on one checkpoint folder: the second is refused before it writes anything, naming
 * the holder and the folder; once the first is gone the folder is free again. */
static void test_one_trainer_per_folder(void **state)
{
    (void)state;
    vkg_test_train_data("l");
    vkg_test_run_paths p;
    char log[PATH_CAP], want[128], host[64] = "";
    vkg_os_hostname(host, sizeof host);
    vkg_trainer_t *t = NULL, *u = NULL;
    vkg_train_config c = vkg_test_train_config(&p, "l", "l_ckpt");
    c.steps = 2;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_step_info si;
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    size_t n0, n1;
    unsigned char *before = vkg_test_must_read(vkg_test_path_in(log, "l_ckpt/log.jsonl"), &n0);
    snprintf(want, sizeof want, "pid %ld on host %s", vkg_os_pid(), host);
    vkg_test_expect_refused(vkg_trainer_create(&c, &u), VKG_ERR_STATE, want, p.ckpt);
    assert_null(u);
    unsigned char *after = vkg_test_must_read(log, &n1);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    free(after);
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_test_trainer_destroy_clean(&t);
    c.resume = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &u));
    vkg_trainer_destroy(&u);
    free(before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corrupt_inputs_are_refused),
        cmocka_unit_test(test_bad_config_is_refused),
        cmocka_unit_test(test_crash_mid_checkpoint_resumes_older),
        cmocka_unit_test(test_one_trainer_per_folder),
    };
    return cmocka_run_group_tests(tests, vkg_test_train_setup, vkg_test_train_teardown);
}
