/* Tests of src/train/checkpoint and statefile: a bit-exact round trip of parameters, moments,
 * step, RNG, data position and hyperparameters; the documented layout (size, magic, CRC-32 of
 * every preceding byte); the newest complete checkpoint chosen over incomplete or broken newer
 * ones; truncated, corrupted, foreign, wrong-version and mismatched files refused with a message
 * naming the file; failures while writing leaving the previous checkpoint loadable; a checkpoint
 * marked complete never written over; pruning; the resume check of must-match hyperparameters;
 * a state file whose parameter count wraps refused; moments that are not finite (or a negative v)
 * refused on load despite a valid checksum, and a checkpoint holding a non-finite value never
 * written. Each test works in its own temporary folder
 * (ckpt_fixture.h). Resuming past a damaged checkpoint and the folder's lock:
 * test_checkpoint_resume.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/file.h"
#include "ckpt_fixture.h"
#include "testutil.h"
#include "train/checkpoint.h"
#include "vkgpt/io.h"

static void assert_state_equal(const vkg_checkpoint_state *a, const vkg_checkpoint_state *b)
{
    assert_int_equal(a->hp.batch_size, b->hp.batch_size);
    assert_int_equal(a->hp.seq_len, b->hp.seq_len);
    assert_true(a->hp.total_batch == b->hp.total_batch && a->hp.seed == b->hp.seed);
    assert_int_equal(a->hp.world_size, b->hp.world_size);
    assert_int_equal(a->hp.shuffle, b->hp.shuffle);
    assert_memory_equal(&a->hp.schedule, &b->hp.schedule, sizeof a->hp.schedule);
    float fa[5] = {a->hp.weight_decay, a->hp.beta1, a->hp.beta2, a->hp.eps, a->hp.grad_clip};
    float fb[5] = {b->hp.weight_decay, b->hp.beta1, b->hp.beta2, b->hp.eps, b->hp.grad_clip};
    assert_memory_equal(fa, fb, sizeof fa);
    assert_true(a->step == b->step && a->tokens == b->tokens);
    assert_memory_equal(a->rng, b->rng, sizeof a->rng);
    assert_memory_equal(&a->data_pos, &b->data_pos, sizeof a->data_pos);
}

static void test_roundtrip(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_ck_write(f, 1234);
    char latest[512];
    uint64_t step = 0;
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 1234);
    assert_string_equal(latest, vkg_ck_path(f, "ck/step_00001234"));
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(latest, &c), VKG_OK);
    assert_memory_equal(&c.cfg, &f->cfg, sizeof c.cfg);
    assert_int_equal(c.num_params, f->n);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    assert_memory_equal(c.m, f->m, f->n * sizeof(float));
    assert_memory_equal(c.v, f->v, f->n * sizeof(float));
    vkg_checkpoint_state want = vkg_ck_state(1234);
    assert_state_equal(&c.state, &want);
    vkg_checkpoint_deinit(&c);
    assert_null(c.params);

    /* the documented layout: size, magic, version, parameter count, CRC-32 trailer */
    size_t n;
    unsigned char *b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00001234/state.bin"), &n);
    assert_int_equal(n, 1024 + 8 * f->n + 4);
    int32_t hdr[4];
    memcpy(hdr, b, sizeof hdr);
    assert_int_equal(hdr[0], VKG_STATE_MAGIC);
    assert_int_equal(hdr[1], VKG_STATE_VERSION);
    uint64_t np;
    memcpy(&np, b + 4 * 54, 8);
    assert_true(np == f->n);
    uint32_t stored;
    memcpy(&stored, b + n - 4, 4);
    assert_true(stored == vkg_test_crc32(b, n - 4));
    assert_memory_equal(b + 1024, f->m, f->n * sizeof(float));
    free(b);
    assert_int_equal(access(vkg_ck_path(f, "ck/step_00001234/DONE"), F_OK), 0);
    vkg_model_config mc; /* model.bin is a valid llm.c fp32 model file */
    int version = 0;
    assert_int_equal(
        vkg_modelfile_read_header(vkg_ck_path(f, "ck/step_00001234/model.bin"), &mc, &version),
        VKG_OK);
    assert_int_equal(version, 3);
}

static void test_newest_complete(void **state)
{
    vkg_ck_fixture *f = *state;
    char latest[512];
    uint64_t step;
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_ERR_NOT_FOUND); /* no directory at all */
    vkg_ck_write(f, 10);
    vkg_ck_write(f, 20);
    vkg_ck_write(f, 30);
    vkg_ck_write(f, 40);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000040/DONE")), 0); /* incomplete */
    assert_int_equal(truncate(vkg_ck_path(f, "ck/step_00000030/state.bin"), 2000),
                     0);                         /* unreadable */
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_abc")); /* not checkpoints */
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_99999999x"));
    vkg_os_mkdir(vkg_ck_path(f, "ck/other"));
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 20);
    assert_string_equal(latest, vkg_ck_path(f, "ck/step_00000020"));
    /* a name without the zero padding counts by its number */
    char from[512];
    snprintf(from, sizeof from, "%s", vkg_ck_path(f, "ck/step_00000010"));
    assert_int_equal(rename(from, vkg_ck_path(f, "ck/step_10")), 0);
    snprintf(from, sizeof from, "%s", vkg_ck_path(f, "ck/step_00000020"));
    assert_int_equal(rename(from, vkg_ck_path(f, "ck/step_5")), 0);
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK); /* step_5 holds step 20's state: skipped */
    assert_true(step == 10);
    char small[8];
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), small, sizeof small, &step),
                     VKG_ERR_INVALID_ARG);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_10/DONE")), 0);
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_ERR_NOT_FOUND);
    vkg_ck_expect_msg("no complete checkpoint", "DONE");
}

/* Load the checkpoint of `step` and expect a format error naming `file` and `what`. */
static void expect_refused(vkg_ck_fixture *f, const char *ckpt, const char *file, const char *what)
{
    vkg_checkpoint c;
    char path[512];
    snprintf(path, sizeof path, "%s/ck/%s", f->dir, ckpt);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    assert_null(c.params);
    assert_null(c.m);
    if (file) /* else the message names the directory */
        snprintf(path, sizeof path, "%s/ck/%s/%s", f->dir, ckpt, file);
    vkg_ck_expect_msg(path, what);
}

static void test_refuses_bad_files(void **state)
{
    vkg_ck_fixture *f = *state;
    size_t n;
    unsigned char *b;
    vkg_ck_write(f, 1);
    truncate(vkg_ck_path(f, "ck/step_00000001/state.bin"), (off_t)(1024 + 8 * f->n));
    expect_refused(f, "step_00000001", "state.bin", "truncated");

    vkg_ck_write(f, 2); /* one flipped bit in m */
    b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000002/state.bin"), &n);
    b[1024 + 4 * 17 + 1] ^= 0x10;
    vkg_ck_spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000002", "state.bin", "checksum");

    vkg_ck_write(f, 3); /* foreign magic */
    b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000003/state.bin"), &n);
    int32_t magic = VKG_MODEL_MAGIC;
    memcpy(b, &magic, 4);
    vkg_ck_spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000003", "state.bin", "bad magic");

    vkg_ck_write(f, 4); /* wrong version */
    b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000004/state.bin"), &n);
    b[4] = 9;
    vkg_ck_spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000004", "state.bin", "version 9");

    vkg_ck_write(f, 5); /* state of another model configuration */
    vkg_model_config other = vkg_ck_config(24);
    size_t n2 = vkg_model_num_params(&other);
    float *z = calloc(n2, sizeof *z);
    vkg_checkpoint_state s = vkg_ck_state(5);
    assert_int_equal(
        vkg_statefile_write(vkg_ck_path(f, "ck/step_00000005/state.bin"), &other, &s, z, z),
        VKG_OK);
    free(z);
    expect_refused(f, "step_00000005", "state.bin", "model.bin");
    vkg_ck_expect_msg("maxT=24", "maxT=16");

    vkg_ck_write(f, 6); /* truncated model file */
    truncate(vkg_ck_path(f, "ck/step_00000006/model.bin"), 3000);
    expect_refused(f, "step_00000006", "model.bin", "truncated");

    vkg_ck_write(f, 7); /* no DONE */
    unlink(vkg_ck_path(f, "ck/step_00000007/DONE"));
    expect_refused(f, "step_00000007", NULL, "DONE");
    /* the header-only read refuses the same damage without reading the moments */
    vkg_model_config cfg;
    size_t np;
    assert_int_equal(
        vkg_statefile_read(vkg_ck_path(f, "ck/step_00000001/state.bin"), &cfg, &s, &np, NULL, NULL),
        VKG_ERR_FORMAT);
    assert_int_equal(
        vkg_statefile_read(vkg_ck_path(f, "ck/step_00000002/state.bin"), &cfg, &s, &np, NULL, NULL),
        VKG_OK); /* a flipped moment byte needs the full read to show */
    uint64_t step;
    char latest[512];
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 2); /* 3..7 broken in their headers, sizes or DONE */

    vkg_ck_write(f, 8); /* one flipped bit in a parameter of model.bin: state.bin has its CRC */
    b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000008/model.bin"), &n);
    b[1024 + 4 * 33 + 2] ^= 0x04;
    vkg_ck_spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000008", "model.bin", "checksum");
    vkg_ck_expect_msg("state.bin", "corrupted");
}

/* Moments that are not finite, or a negative v, refused on load although the checksum holds
 * (the state file is rewritten whole with a valid CRC), naming the file, tensor and element. */
static void test_refuses_bad_moments(void **state)
{
    vkg_ck_fixture *f = *state;
    size_t wpe = (size_t)f->cfg.padded_vocab_size * (size_t)f->cfg.channels; /* wpe's start */
    const struct {
        int moment; /* 0: m, 1: v */
        size_t at;
        float value;
        const char *what, *where;
    } cases[4] = {{0, 3, NAN, "first moment m", "tensor wte, element 3, is nan"},
                  {1, wpe + 5, INFINITY, "second moment v", "tensor wpe, element 5, is inf"},
                  {1, f->n - 1, -1e-9f, "second moment v", "tensor lnfb, element 7, is -1e-09"},
                  {0, 10, -INFINITY, "first moment m", "element 10, is -inf"}};
    for (int k = 0; k < 4; k++) {
        uint64_t step = (uint64_t)k + 1;
        char ckpt[32], rel[64];
        snprintf(ckpt, sizeof ckpt, "step_%08llu", (unsigned long long)step);
        snprintf(rel, sizeof rel, "ck/%s/state.bin", ckpt);
        vkg_ck_write(f, step);
        float *x = cases[k].moment ? f->v : f->m, keep = x[cases[k].at];
        x[cases[k].at] = cases[k].value;
        vkg_checkpoint_state s = vkg_ck_state(step);
        s.params_crc = vkg_statefile_crc32_floats(f->params, f->n), s.params_crc_set = 1;
        assert_int_equal(vkg_statefile_write(vkg_ck_path(f, rel), &f->cfg, &s, f->m, f->v), VKG_OK);
        x[cases[k].at] = keep;
        expect_refused(f, ckpt, "state.bin", cases[k].what);
        vkg_ck_expect_msg(cases[k].where, "must be finite and v >= 0");
    }
}

/* A checkpoint holding a value that is not finite (or a negative v) is refused before anything
 * is written: no folder, no DONE, the previous checkpoint still the newest. */
static void test_never_saves_nonfinite(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_ck_write(f, 1);
    float *arrays[3] = {f->params, f->m, f->v};
    const float bad[3] = {NAN, INFINITY, -1.0f};
    const char *names[3] = {"parameter of tensor", "first moment m", "second moment v"};
    for (int k = 0; k < 3; k++) {
        float keep = arrays[k][20];
        arrays[k][20] = bad[k];
        vkg_checkpoint_state s = vkg_ck_state(2);
        assert_int_equal(
            vkg_checkpoint_write(vkg_ck_path(f, "ck"), &f->cfg, f->params, f->m, f->v, &s, NULL, 0),
            VKG_ERR_INVALID_ARG);
        vkg_ck_expect_msg(names[k], "never marked complete");
        arrays[k][20] = keep;
        assert_false(vkg_ck_exists(f, "ck/step_00000002"));
    }
    uint64_t step;
    char latest[512];
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 1);
}

static void test_failed_write_keeps_previous(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_ck_write(f, 5);
    vkg_ck_write(f, 10);
    /* a directory where state.bin must go makes the rename fail after model.bin is written */
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_00000020"));
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_00000020/state.bin"));
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_00000020/state.bin/x"));
    float *p2 = vkg_test_alloc(f->n);
    memset(p2, 0, f->n * sizeof *p2);
    vkg_checkpoint_state s = vkg_ck_state(20);
    assert_int_equal(
        vkg_checkpoint_write(vkg_ck_path(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
        VKG_ERR_IO);
    vkg_ck_expect_msg("state.bin", NULL);
    assert_int_equal(access(vkg_ck_path(f, "ck/step_00000020/DONE"), F_OK), -1);
    /* a file where the step directory must go */
    vkg_ck_spit(vkg_ck_path(f, "ck/step_00000030"), (const unsigned char *)"x", 1);
    s = vkg_ck_state(30);
    assert_int_equal(
        vkg_checkpoint_write(vkg_ck_path(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
        VKG_ERR_IO);
    char latest[512];
    uint64_t step;
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 10);
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(latest, &c), VKG_OK);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    /* a step whose directory is marked complete is never written over, even when damaged (its
     * state.bin gone): refused before anything is written, its model.bin and DONE kept */
    size_t before_n, after_n;
    unsigned char *before =
        vkg_test_must_read(vkg_ck_path(f, "ck/step_00000010/model.bin"), &before_n);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000010/state.bin")), 0);
    s = vkg_ck_state(10);
    assert_int_equal(
        vkg_checkpoint_write(vkg_ck_path(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
        VKG_ERR_STATE);
    vkg_ck_expect_msg("step_00000010", "marked complete");
    unsigned char *after =
        vkg_test_must_read(vkg_ck_path(f, "ck/step_00000010/model.bin"), &after_n);
    assert_true(before_n == after_n && memcmp(before, after, before_n) == 0);
    assert_int_equal(access(vkg_ck_path(f, "ck/step_00000010/DONE"), F_OK), 0);
    assert_int_equal(access(vkg_ck_path(f, "ck/step_00000010/state.bin"), F_OK), -1);
    free(before);
    free(after);
    /* an interrupted write (no DONE) is written over, and a failure midway leaves no DONE */
    vkg_ck_write(f, 40);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000040/DONE")), 0);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000040/state.bin")), 0);
    vkg_os_mkdir(f->path);
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_00000040/state.bin/x"));
    s = vkg_ck_state(40);
    assert_int_equal(
        vkg_checkpoint_write(vkg_ck_path(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
        VKG_ERR_IO);
    assert_int_equal(access(vkg_ck_path(f, "ck/step_00000040/DONE"), F_OK), -1);
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 5);
    assert_int_equal(vkg_checkpoint_load(latest, &c), VKG_OK);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    free(p2);
}

static void test_prune(void **state)
{
    vkg_ck_fixture *f = *state;
    for (uint64_t s = 1; s <= 6; s++)
        vkg_ck_write(f, s);
    unlink(vkg_ck_path(f, "ck/step_00000005/DONE")); /* incomplete: removed, not one of the kept */
    vkg_ck_write(f, 9);
    vkg_os_mkdir(vkg_ck_path(f, "ck/step_00000000")); /* an old failed attempt with a temp file */
    vkg_ck_spit(vkg_ck_path(f, "ck/step_00000000/.state.bin.tmp-1-2"), (const unsigned char *)"x",
                1);
    vkg_ck_write(f, 7);
    unlink(vkg_ck_path(f, "ck/step_00000007/DONE"));
    int removed = -1;
    assert_int_equal(vkg_checkpoint_prune(vkg_ck_path(f, "ck"), 0, 6, &removed), VKG_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(vkg_checkpoint_prune(vkg_ck_path(f, "ck"), 3, 6, &removed), VKG_OK);
    assert_int_equal(removed, 4);
    assert_false(vkg_ck_exists(f, "ck/step_00000000") || vkg_ck_exists(f, "ck/step_00000001") ||
                 vkg_ck_exists(f, "ck/step_00000002") || vkg_ck_exists(f, "ck/step_00000005"));
    assert_true(vkg_ck_exists(f, "ck/step_00000003/DONE") &&
                vkg_ck_exists(f, "ck/step_00000004/DONE") &&
                vkg_ck_exists(f, "ck/step_00000006/DONE"));
    assert_true(vkg_ck_exists(f, "ck/step_00000007") && vkg_ck_exists(f, "ck/step_00000009/DONE"));
    /* keep 1: only the protected one, even when it is not the newest on disk */
    assert_int_equal(vkg_checkpoint_prune(vkg_ck_path(f, "ck"), 1, 4, &removed), VKG_OK);
    assert_int_equal(removed, 1);
    assert_true(vkg_ck_exists(f, "ck/step_00000004/DONE") &&
                vkg_ck_exists(f, "ck/step_00000006/DONE"));
    assert_false(vkg_ck_exists(f, "ck/step_00000003"));
    char latest[512];
    uint64_t step;
    assert_int_equal(vkg_checkpoint_find_latest(vkg_ck_path(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 9);
}

static void test_check_resume(void **state)
{
    (void)state;
    vkg_train_hparams a = vkg_train_hparams_default(), b = a;
    b.schedule.lr = 1.0f; /* informative fields may change */
    b.schedule.total_steps = 99999;
    b.grad_clip = 0.0f;
    assert_int_equal(vkg_checkpoint_check_resume(&a, &b), VKG_OK);
    b.batch_size = 8;
    assert_int_equal(vkg_checkpoint_check_resume(&a, &b), VKG_ERR_MISMATCH);
    vkg_ck_expect_msg("batch size B = 4", "has 8");
    b = a;
    b.seed = 7;
    assert_int_equal(vkg_checkpoint_check_resume(&a, &b), VKG_ERR_MISMATCH);
    vkg_ck_expect_msg("seed", NULL);
    b = a;
    b.total_batch = 512;
    assert_int_equal(vkg_checkpoint_check_resume(&a, &b), VKG_ERR_MISMATCH);
    vkg_ck_expect_msg("total batch", NULL);
}

/* A header whose parameter count wraps around 2^64 to 0 (C = 2^30, Vp = 2^31 - 1, maxT = 2^31 - 14,
 * one layer) was accepted as a model of 0 parameters in a 1028-byte file. */
static void test_refuses_wrapping_count(void **state)
{
    vkg_ck_fixture *f = *state;
    int32_t h[256] = {VKG_STATE_MAGIC, VKG_STATE_VERSION, 2147483634, 1, 1, 1, 1 << 30, 2147483647};
    unsigned char b[1028];
    memcpy(b, h, sizeof h);
    uint32_t crc = vkg_test_crc32(b, 1024);
    memcpy(b + 1024, &crc, 4);
    vkg_ck_spit(vkg_ck_path(f, "wrap.bin"), b, sizeof b);
    vkg_model_config cfg;
    vkg_checkpoint_state s;
    size_t np = 99;
    float *m = NULL, *v = NULL;
    assert_int_equal(vkg_statefile_read(f->path, &cfg, &s, &np, &m, &v), VKG_ERR_FORMAT);
    vkg_ck_expect_msg("wrap.bin", "more than 2^31 - 1"); /* 3C rows: refused by the config check */
    assert_null(m);
}

/* DiLoCo's outer.bin: written before DONE, loaded with the checkpoint, its layout as documented,
 * and refused when damaged (a flipped byte, a truncation, another parameter count, a count that
 * is no outer state, a value not finite) naming the file. */
static void test_outer_state(void **state)
{
    vkg_ck_fixture *f = *state;
    size_t count = f->n * 5; /* 2 replicas: g, momentum, replica 1's parameters, m, v */
    float *x = malloc(count * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < count; i++)
        x[i] = (float)i * 0.25f - 3.0f;
    vkg_checkpoint_state cs = vkg_ck_state(7);
    char path[512];
    assert_int_equal(vkg_checkpoint_write_outer(vkg_ck_path(f, "ck"), &f->cfg, f->params, f->m,
                                                f->v, x, count, &cs, path, sizeof path),
                     VKG_OK);
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_OK);
    assert_int_equal(c.outer_count, count);
    assert_memory_equal(c.outer, x, count * sizeof *x);
    vkg_checkpoint_deinit(&c);
    assert_null(c.outer);
    size_t n;
    unsigned char *b = vkg_test_must_read(vkg_ck_path(f, "ck/step_00000007/outer.bin"), &n);
    assert_int_equal(n, 1024 + 4 * count);
    uint32_t h[7];
    memcpy(h, b, sizeof h);
    assert_true(h[0] == VKG_OUTER_MAGIC && h[1] == VKG_OUTER_VERSION && h[2] == f->n && h[3] == 0);
    assert_true(h[4] == count && h[5] == 0 && h[6] == vkg_test_crc32(b + 1024, n - 1024));
    assert_memory_equal(b + 1024, x, count * sizeof *x);
    const char *outer = vkg_ck_path(f, "ck/step_00000007/outer.bin");
    char op[512];
    snprintf(op, sizeof op, "%s", outer);
    b[1024 + 13] ^= 0x10; /* a flipped bit in the body */
    vkg_ck_spit(op, b, n);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    vkg_ck_expect_msg("outer.bin", "checksum mismatch");
    b[1024 + 13] ^= 0x10;
    vkg_ck_spit(op, b, n - 4); /* truncated */
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    vkg_ck_expect_msg("outer.bin", NULL);
    b[8] ^= 1; /* another parameter count */
    vkg_ck_spit(op, b, n);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    vkg_ck_expect_msg("outer.bin", "parameters");
    b[8] ^= 1;
    vkg_ck_spit(op, b, n);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_OK); /* restored: loads again */
    vkg_checkpoint_deinit(&c);
    free(b);
    /* replica 1's second moment v negative: a damaged file, as in state.bin */
    x[4 * f->n + 5] = -0.5f;
    assert_int_equal(vkg_outerfile_write(op, f->n, x, count), VKG_OK);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    vkg_ck_expect_msg("outer.bin", "replica 1's AdamW second moment v, parameter 5) is -0.5");
    x[4 * f->n + 5] = 1.0f;
    /* delayed (7n: g, momentum, replica 0's exchange, replica 1's parameters, m, v, exchange):
     * an exchange may be negative, v may not */
    float *y = calloc(7 * f->n, sizeof *y);
    assert_non_null(y);
    y[6 * f->n] = -1.0f;
    assert_int_equal(vkg_outerfile_write(op, f->n, y, 7 * f->n), VKG_OK);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_OK);
    vkg_checkpoint_deinit(&c);
    y[5 * f->n + 2] = -1.0f;
    assert_int_equal(vkg_outerfile_write(op, f->n, y, 7 * f->n), VKG_OK);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    vkg_ck_expect_msg("outer.bin", "replica 1's AdamW second moment v, parameter 2)");
    free(y);
    /* not written: a count that is no outer state, a value not finite */
    cs = vkg_ck_state(8);
    assert_int_equal(vkg_checkpoint_write_outer(vkg_ck_path(f, "ck"), &f->cfg, f->params, f->m,
                                                f->v, x, count - 1, &cs, NULL, 0),
                     VKG_ERR_INVALID_ARG);
    x[f->n + 2] = NAN;
    assert_int_equal(vkg_checkpoint_write_outer(vkg_ck_path(f, "ck"), &f->cfg, f->params, f->m,
                                                f->v, x, count, &cs, NULL, 0),
                     VKG_ERR_INVALID_ARG);
    vkg_ck_expect_msg("outer state", "not finite");
    assert_false(vkg_ck_exists(f, "ck/step_00000008/DONE"));
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_outer_state, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_newest_complete, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_files, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_moments, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_never_saves_nonfinite, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_keeps_previous, vkg_ck_setup,
                                        vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_prune, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_check_resume, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_refuses_wrapping_count, vkg_ck_setup, vkg_ck_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
