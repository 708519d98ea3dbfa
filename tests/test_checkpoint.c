/* Tests of src/train/checkpoint and statefile: a bit-exact round trip of parameters, moments,
 * step, RNG, data position and hyperparameters; the documented layout (size, magic, CRC-32 of
 * every preceding byte); the newest complete checkpoint chosen over incomplete or broken newer
 * ones; truncated, corrupted, foreign, wrong-version and mismatched files refused with a message
 * naming the file; failures while writing leaving the previous checkpoint loadable; a checkpoint
 * marked complete never written over; pruning; the resume check of must-match hyperparameters;
 * resuming stopped by a damaged newest checkpoint (truncated, wrong header) unless falling back,
 * which sets it aside untouched; the folder's lock refusing a second holder and not a dead one.
 * Each test works in its own temporary folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "train/checkpoint.h"
#include "vkgpt/io.h"

typedef struct fixture {
    char dir[64];
    char path[512];
    vkg_gpt2_config cfg;
    size_t n;
    float *params, *m, *v;
} fixture;

static vkg_gpt2_config tiny_config(int maxT)
{
    vkg_gpt2_config c = {maxT, 50, vkg_gpt2_pad_vocab(50), 2, 2, 8};
    return c;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/vkg_test_ckpt_XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    f->cfg = tiny_config(16);
    f->n = vkg_gpt2_num_params(&f->cfg);
    f->params = vkg_test_alloc(f->n);
    f->m = vkg_test_alloc(f->n);
    f->v = vkg_test_alloc(f->n);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 2024);
    vkg_test_fill_uniform(&r, f->params, f->n, -1.0f, 1.0f);
    vkg_test_fill_uniform(&r, f->m, f->n, -1e-3f, 1e-3f);
    vkg_test_fill_uniform(&r, f->v, f->n, 0.0f, 1e-6f);
    *state = f;
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int teardown(void **state)
{
    fixture *f = *state;
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f->params);
    free(f->m);
    free(f->v);
    free(f);
    return 0;
}

static const char *sub(fixture *f, const char *rel)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, rel);
    return f->path;
}

static vkg_checkpoint_state make_state(uint64_t step)
{
    vkg_checkpoint_state s;
    memset(&s, 0, sizeof s);
    s.hp = vkg_train_hparams_default();
    s.hp.batch_size = 3;
    s.hp.seq_len = 16;
    s.hp.total_batch = 96;
    s.hp.world_size = 2;
    s.hp.shuffle = 1;
    s.hp.seed = 0x123456789abcdefull;
    s.hp.schedule.kind = VKG_SCHEDULE_LINEAR;
    s.hp.schedule.lr = 6e-4f;
    s.hp.schedule.lr_min_frac = 0.1f;
    s.hp.schedule.warmup = 7;
    s.hp.schedule.total_steps = 5000;
    s.hp.weight_decay = 0.1f;
    s.hp.beta2 = 0.95f;
    s.step = step;
    s.tokens = step * 96 + 0x100000000ull;
    for (int i = 0; i < VKG_CHECKPOINT_NUM_RNG; i++)
        s.rng[i] = 0xfedcba9876543210ull ^ (step * 31 + (uint64_t)i);
    vkg_data_pos d = {3, step % 11, 11, 1, 0x123456789abcdefull};
    s.data_pos = d;
    return s;
}

static void write_ckpt(fixture *f, uint64_t step)
{
    vkg_checkpoint_state s = make_state(step);
    char out[512];
    assert_int_equal(
        vkg_checkpoint_write(sub(f, "ck"), &f->cfg, f->params, f->m, f->v, &s, out, sizeof out),
        VKG_OK);
    char want[512];
    snprintf(want, sizeof want, "%s/ck/step_%08llu", f->dir, (unsigned long long)step);
    assert_string_equal(out, want);
}

static void assert_msg_has(const char *a, const char *b)
{
    const char *msg = vkg_error_message();
    if (!strstr(msg, a) || (b && !strstr(msg, b))) {
        fprintf(stderr, "error message \"%s\" lacks \"%s\" or \"%s\"\n", msg, a, b ? b : "");
        fail();
    }
}

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

/* Bitwise CRC-32 (IEEE), independent of the library's table-driven one. */
static uint32_t crc32_ref(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, fp), *n);
    fclose(fp);
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
}

static void test_roundtrip(void **state)
{
    fixture *f = *state;
    write_ckpt(f, 1234);
    char latest[512];
    uint64_t step = 0;
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 1234);
    assert_string_equal(latest, sub(f, "ck/step_00001234"));
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(latest, &c), VKG_OK);
    assert_memory_equal(&c.cfg, &f->cfg, sizeof c.cfg);
    assert_int_equal(c.num_params, f->n);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    assert_memory_equal(c.m, f->m, f->n * sizeof(float));
    assert_memory_equal(c.v, f->v, f->n * sizeof(float));
    vkg_checkpoint_state want = make_state(1234);
    assert_state_equal(&c.state, &want);
    vkg_checkpoint_deinit(&c);
    assert_null(c.params);

    /* the documented layout: size, magic, version, parameter count, CRC-32 trailer */
    size_t n;
    unsigned char *b = slurp(sub(f, "ck/step_00001234/state.bin"), &n);
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
    assert_true(stored == crc32_ref(b, n - 4));
    assert_memory_equal(b + 1024, f->m, f->n * sizeof(float));
    free(b);
    assert_int_equal(access(sub(f, "ck/step_00001234/DONE"), F_OK), 0);
    vkg_gpt2_config mc; /* model.bin is a valid llm.c fp32 model file */
    int version = 0;
    assert_int_equal(vkg_modelfile_read_header(sub(f, "ck/step_00001234/model.bin"), &mc, &version),
                     VKG_OK);
    assert_int_equal(version, 3);
}

static void test_newest_complete(void **state)
{
    fixture *f = *state;
    char latest[512];
    uint64_t step;
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_ERR_NOT_FOUND); /* no directory at all */
    write_ckpt(f, 10);
    write_ckpt(f, 20);
    write_ckpt(f, 30);
    write_ckpt(f, 40);
    assert_int_equal(unlink(sub(f, "ck/step_00000040/DONE")), 0);              /* incomplete */
    assert_int_equal(truncate(sub(f, "ck/step_00000030/state.bin"), 2000), 0); /* unreadable */
    mkdir(sub(f, "ck/step_abc"), 0777);                                        /* not checkpoints */
    mkdir(sub(f, "ck/step_99999999x"), 0777);
    mkdir(sub(f, "ck/other"), 0777);
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 20);
    assert_string_equal(latest, sub(f, "ck/step_00000020"));
    /* a name without the zero padding counts by its number */
    char from[512];
    snprintf(from, sizeof from, "%s", sub(f, "ck/step_00000010"));
    assert_int_equal(rename(from, sub(f, "ck/step_10")), 0);
    snprintf(from, sizeof from, "%s", sub(f, "ck/step_00000020"));
    assert_int_equal(rename(from, sub(f, "ck/step_5")), 0);
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK); /* step_5 holds step 20's state: skipped */
    assert_true(step == 10);
    char small[8];
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), small, sizeof small, &step),
                     VKG_ERR_INVALID_ARG);
    assert_int_equal(unlink(sub(f, "ck/step_10/DONE")), 0);
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_ERR_NOT_FOUND);
    assert_msg_has("no complete checkpoint", "DONE");
}

/* Load the checkpoint of `step` and expect a format error naming `file` and `what`. */
static void expect_refused(fixture *f, const char *ckpt, const char *file, const char *what)
{
    vkg_checkpoint c;
    char path[512];
    snprintf(path, sizeof path, "%s/ck/%s", f->dir, ckpt);
    assert_int_equal(vkg_checkpoint_load(path, &c), VKG_ERR_FORMAT);
    assert_null(c.params);
    assert_null(c.m);
    if (file) /* else the message names the directory */
        snprintf(path, sizeof path, "%s/ck/%s/%s", f->dir, ckpt, file);
    assert_msg_has(path, what);
}

static void test_refuses_bad_files(void **state)
{
    fixture *f = *state;
    size_t n;
    unsigned char *b;
    write_ckpt(f, 1);
    truncate(sub(f, "ck/step_00000001/state.bin"), (off_t)(1024 + 8 * f->n));
    expect_refused(f, "step_00000001", "state.bin", "truncated");

    write_ckpt(f, 2); /* one flipped bit in m */
    b = slurp(sub(f, "ck/step_00000002/state.bin"), &n);
    b[1024 + 4 * 17 + 1] ^= 0x10;
    spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000002", "state.bin", "checksum");

    write_ckpt(f, 3); /* foreign magic */
    b = slurp(sub(f, "ck/step_00000003/state.bin"), &n);
    int32_t magic = VKG_MODEL_MAGIC;
    memcpy(b, &magic, 4);
    spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000003", "state.bin", "bad magic");

    write_ckpt(f, 4); /* wrong version */
    b = slurp(sub(f, "ck/step_00000004/state.bin"), &n);
    b[4] = 9;
    spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000004", "state.bin", "version 9");

    write_ckpt(f, 5); /* state of another model configuration */
    vkg_gpt2_config other = tiny_config(24);
    size_t n2 = vkg_gpt2_num_params(&other);
    float *z = calloc(n2, sizeof *z);
    vkg_checkpoint_state s = make_state(5);
    assert_int_equal(vkg_statefile_write(sub(f, "ck/step_00000005/state.bin"), &other, &s, z, z),
                     VKG_OK);
    free(z);
    expect_refused(f, "step_00000005", "state.bin", "model.bin");
    assert_msg_has("maxT=24", "maxT=16");

    write_ckpt(f, 6); /* truncated model file */
    truncate(sub(f, "ck/step_00000006/model.bin"), 3000);
    expect_refused(f, "step_00000006", "model.bin", "truncated");

    write_ckpt(f, 7); /* no DONE */
    unlink(sub(f, "ck/step_00000007/DONE"));
    expect_refused(f, "step_00000007", NULL, "DONE");
    /* the header-only read refuses the same damage without reading the moments */
    vkg_gpt2_config cfg;
    size_t np;
    assert_int_equal(
        vkg_statefile_read(sub(f, "ck/step_00000001/state.bin"), &cfg, &s, &np, NULL, NULL),
        VKG_ERR_FORMAT);
    assert_int_equal(
        vkg_statefile_read(sub(f, "ck/step_00000002/state.bin"), &cfg, &s, &np, NULL, NULL),
        VKG_OK); /* a flipped moment byte needs the full read to show */
    uint64_t step;
    char latest[512];
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 2); /* 3..7 broken in their headers, sizes or DONE */

    write_ckpt(f, 8); /* one flipped bit in a parameter of model.bin: state.bin has its CRC */
    b = slurp(sub(f, "ck/step_00000008/model.bin"), &n);
    b[1024 + 4 * 33 + 2] ^= 0x04;
    spit(f->path, b, n);
    free(b);
    expect_refused(f, "step_00000008", "model.bin", "checksum");
    assert_msg_has("state.bin", "corrupted");
}

static void test_failed_write_keeps_previous(void **state)
{
    fixture *f = *state;
    write_ckpt(f, 5);
    write_ckpt(f, 10);
    /* a directory where state.bin must go makes the rename fail after model.bin is written */
    mkdir(sub(f, "ck/step_00000020"), 0777);
    mkdir(sub(f, "ck/step_00000020/state.bin"), 0777);
    mkdir(sub(f, "ck/step_00000020/state.bin/x"), 0777);
    float *p2 = vkg_test_alloc(f->n);
    memset(p2, 0, f->n * sizeof *p2);
    vkg_checkpoint_state s = make_state(20);
    assert_int_equal(vkg_checkpoint_write(sub(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
                     VKG_ERR_IO);
    assert_msg_has("state.bin", NULL);
    assert_int_equal(access(sub(f, "ck/step_00000020/DONE"), F_OK), -1);
    /* a file where the step directory must go */
    spit(sub(f, "ck/step_00000030"), (const unsigned char *)"x", 1);
    s = make_state(30);
    assert_int_equal(vkg_checkpoint_write(sub(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
                     VKG_ERR_IO);
    char latest[512];
    uint64_t step;
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 10);
    vkg_checkpoint c;
    assert_int_equal(vkg_checkpoint_load(latest, &c), VKG_OK);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    /* a step whose directory is marked complete is never written over, even when damaged (its
     * state.bin gone): refused before anything is written, its model.bin and DONE kept */
    size_t before_n, after_n;
    unsigned char *before = slurp(sub(f, "ck/step_00000010/model.bin"), &before_n);
    assert_int_equal(unlink(sub(f, "ck/step_00000010/state.bin")), 0);
    s = make_state(10);
    assert_int_equal(vkg_checkpoint_write(sub(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
                     VKG_ERR_STATE);
    assert_msg_has("step_00000010", "marked complete");
    unsigned char *after = slurp(sub(f, "ck/step_00000010/model.bin"), &after_n);
    assert_true(before_n == after_n && memcmp(before, after, before_n) == 0);
    assert_int_equal(access(sub(f, "ck/step_00000010/DONE"), F_OK), 0);
    assert_int_equal(access(sub(f, "ck/step_00000010/state.bin"), F_OK), -1);
    free(before);
    free(after);
    /* an interrupted write (no DONE) is written over, and a failure midway leaves no DONE */
    write_ckpt(f, 40);
    assert_int_equal(unlink(sub(f, "ck/step_00000040/DONE")), 0);
    assert_int_equal(unlink(sub(f, "ck/step_00000040/state.bin")), 0);
    mkdir(f->path, 0777);
    mkdir(sub(f, "ck/step_00000040/state.bin/x"), 0777);
    s = make_state(40);
    assert_int_equal(vkg_checkpoint_write(sub(f, "ck"), &f->cfg, p2, f->m, f->v, &s, NULL, 0),
                     VKG_ERR_IO);
    assert_int_equal(access(sub(f, "ck/step_00000040/DONE"), F_OK), -1);
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
                     VKG_OK);
    assert_true(step == 5);
    assert_int_equal(vkg_checkpoint_load(latest, &c), VKG_OK);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    free(p2);
}

static int exists(fixture *f, const char *rel)
{
    return access(sub(f, rel), F_OK) == 0;
}

/* The bytes of a checkpoint directory's three files, to check that nothing changed them. */
typedef struct snapshot {
    unsigned char *b[3];
    size_t n[3];
} snapshot;

static const char *const ckpt_files[3] = {"model.bin", "state.bin", "DONE"};

static void take(fixture *f, const char *rel_dir, snapshot *sn)
{
    char rel[256];
    for (int i = 0; i < 3; i++) {
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, ckpt_files[i]);
        sn->b[i] = slurp(sub(f, rel), &sn->n[i]);
    }
}

/* rel_dir holds exactly the bytes of sn (which is freed). */
static void expect_unchanged(fixture *f, const char *rel_dir, snapshot *sn)
{
    char rel[256];
    for (int i = 0; i < 3; i++) {
        size_t n;
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, ckpt_files[i]);
        unsigned char *now = slurp(sub(f, rel), &n);
        if (n != sn->n[i] || memcmp(now, sn->b[i], n) != 0)
            fail_msg("%s changed (%zu bytes, was %zu)", f->path, n, sn->n[i]);
        free(now);
        free(sn->b[i]);
    }
}

/* Resume under ck without fallback: refused with VKG_ERR_FORMAT naming file and what, nothing
 * changed. */
static void expect_resume_refused(fixture *f, const char *file, const char *what)
{
    vkg_checkpoint c;
    char path[512], notes[2048];
    snapshot sn;
    take(f, "ck/step_00000030", &sn);
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_FORMAT);
    printf("refused: %s\n", vkg_error_message());
    assert_null(c.params);
    snprintf(path, sizeof path, "%s/ck/step_00000030/%s", f->dir, file);
    assert_msg_has(path, what);
    assert_msg_has("marked complete", "nothing was changed");
    expect_unchanged(f, "ck/step_00000030", &sn);
    assert_false(exists(f, "ck/step_00000030.damaged"));
}

/* Overwrite the 32-bit header slot `slot` of a file in place. */
static void poke_header(const char *path, int slot, int32_t value)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    memcpy(b + 4 * slot, &value, 4);
    spit(path, b, n);
    free(b);
}

/* Resuming never passes over a damaged checkpoint marked complete unless asked to: truncation and
 * wrong headers stop it like a flipped bit, naming the file; with fallback the damaged one is set
 * aside untouched and a later checkpoint of its step is written beside it. */
static void test_resume_damaged(void **state)
{
    fixture *f = *state;
    vkg_checkpoint c;
    char path[512], notes[2048];
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_NOT_FOUND); /* no folder: a new run */
    write_ckpt(f, 10);
    write_ckpt(f, 20);
    write_ckpt(f, 30);
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes), VKG_OK);
    assert_string_equal(path, sub(f, "ck/step_00000030"));
    assert_true(c.state.step == 30);
    assert_string_equal(notes, "");
    vkg_checkpoint_deinit(&c);

    size_t n_model = 1024 + 4 * f->n, n_state = 1024 + 8 * f->n + 4;
    /* truncated model.bin, truncated state.bin */
    assert_int_equal(truncate(sub(f, "ck/step_00000030/model.bin"), (off_t)n_model - 4), 0);
    expect_resume_refused(f, "model.bin", "truncated");
    assert_int_equal(truncate(sub(f, "ck/step_00000030/model.bin"), (off_t)n_model), 0);
    assert_int_equal(truncate(sub(f, "ck/step_00000030/state.bin"), (off_t)n_state - 100), 0);
    expect_resume_refused(f, "state.bin", "truncated");
    assert_int_equal(unlink(sub(f, "ck/step_00000030/DONE")), 0);
    assert_int_equal(unlink(sub(f, "ck/step_00000030/state.bin")), 0);
    assert_int_equal(unlink(sub(f, "ck/step_00000030/model.bin")), 0);
    write_ckpt(f, 30); /* no DONE: written over */
    /* a wrong header field: model.bin's heads (same size, same parameters), state.bin's magic */
    poke_header(sub(f, "ck/step_00000030/model.bin"), 5, 1);
    expect_resume_refused(f, "state.bin", "does not match");
    assert_msg_has("model.bin", "NH=1");
    poke_header(sub(f, "ck/step_00000030/model.bin"), 5, f->cfg.num_heads);
    poke_header(sub(f, "ck/step_00000030/state.bin"), 0, 1234);
    expect_resume_refused(f, "state.bin", "bad magic");

    /* With fallback: step 20, and step 30 set aside, untouched. A newer interrupted write (no
     * DONE) is passed over and left where it is. */
    write_ckpt(f, 40);
    assert_int_equal(unlink(sub(f, "ck/step_00000040/DONE")), 0);
    snapshot sn;
    take(f, "ck/step_00000030", &sn);
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes), VKG_OK);
    printf("fallback notes: %s\n", notes);
    assert_string_equal(path, sub(f, "ck/step_00000020"));
    assert_true(c.state.step == 20);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    assert_non_null(strstr(notes, "step_00000040 (no DONE"));
    assert_non_null(strstr(notes, "step_00000030 (does not load: "));
    assert_non_null(strstr(notes, "bad magic"));
    assert_non_null(strstr(notes, "set aside untouched as step_00000030.damaged"));
    assert_false(exists(f, "ck/step_00000030"));
    assert_true(exists(f, "ck/step_00000040/model.bin"));
    expect_unchanged(f, "ck/step_00000030.damaged", &sn);
    /* the run goes on: step 30 is written anew beside it; pruning and resuming leave it alone */
    take(f, "ck/step_00000030.damaged", &sn);
    write_ckpt(f, 30);
    int removed = 0;
    assert_int_equal(vkg_checkpoint_prune(sub(f, "ck"), 1, 30, &removed), VKG_OK);
    assert_int_equal(removed, 2); /* steps 10 and 20 */
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes), VKG_OK);
    assert_string_equal(path, sub(f, "ck/step_00000030"));
    vkg_checkpoint_deinit(&c);
    expect_unchanged(f, "ck/step_00000030.damaged", &sn);
    /* damaged again: the next free name */
    assert_int_equal(truncate(sub(f, "ck/step_00000030/model.bin"), 100), 0);
    write_ckpt(f, 25);
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes), VKG_OK);
    assert_string_equal(path, sub(f, "ck/step_00000025"));
    vkg_checkpoint_deinit(&c);
    assert_true(exists(f, "ck/step_00000030.damaged.2/DONE"));
    assert_true(exists(f, "ck/step_00000030.damaged/DONE"));
    /* nothing loads: refused even with fallback, nothing renamed */
    assert_int_equal(truncate(sub(f, "ck/step_00000025/state.bin"), 100), 0);
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_FORMAT);
    printf("none loads: %s\n", vkg_error_message());
    assert_msg_has("none of its 1 checkpoints marked complete loads", "step_00000025");
    assert_true(exists(f, "ck/step_00000025/DONE"));
    /* a directory holding another step's checkpoint does not load either */
    char from[512];
    snprintf(from, sizeof from, "%s", sub(f, "ck/step_00000025"));
    assert_int_equal(rename(from, sub(f, "ck/step_00000099.bad")), 0);
    write_ckpt(f, 50);
    snprintf(from, sizeof from, "%s", sub(f, "ck/step_00000050"));
    assert_int_equal(rename(from, sub(f, "ck/step_00000060")), 0);
    assert_int_equal(
        vkg_checkpoint_resume(sub(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_FORMAT);
    assert_msg_has("step_00000060/state.bin", "holds step 50");
}

/* One process at a time holds a checkpoint folder; the second is told who holds it; a holder
 * that died (even by SIGKILL) leaves a file that blocks nobody. */
static void test_lock(void **state)
{
    fixture *f = *state;
    char host[64] = "", want[160];
    gethostname(host, sizeof host - 1);
    int fd = -1, fd2 = -1;
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd), VKG_OK);
    assert_true(fd >= 0);
    size_t n;
    unsigned char *text = slurp(sub(f, VKG_CHECKPOINT_LOCK_NAME), &n);
    snprintf(want, sizeof want, "pid %ld host %s\n", (long)getpid(), host);
    assert_true(n == strlen(want) && memcmp(text, want, n) == 0);
    free(text);
    /* a second claim (another open file description, as another process has) is refused */
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd2), VKG_ERR_STATE);
    assert_int_equal(fd2, -1);
    printf("refused: %s\n", vkg_error_message());
    snprintf(want, sizeof want, "pid %ld on host %s", (long)getpid(), host);
    assert_msg_has(want, f->dir);
    assert_msg_has("in use by another trainer", VKG_CHECKPOINT_LOCK_NAME);
    vkg_checkpoint_unlock(&fd);
    assert_int_equal(fd, -1);
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd2), VKG_OK);
    vkg_checkpoint_unlock(&fd2);

    /* another process holds it, then is killed: refused while it lives, free after */
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        int cfd;
        char ok = vkg_checkpoint_lock(f->dir, &cfd) == VKG_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd), VKG_ERR_STATE);
    snprintf(want, sizeof want, "pid %ld on host %s", (long)child, host);
    assert_msg_has(want, NULL);
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    close(ready[0]), close(ready[1]);
    text = slurp(sub(f, VKG_CHECKPOINT_LOCK_NAME), &n); /* the dead holder's text is still there */
    snprintf(want, sizeof want, "pid %ld host", (long)child);
    assert_true(n > strlen(want) && memcmp(text, want, strlen(want)) == 0);
    free(text);
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd), VKG_OK);
    text = slurp(sub(f, VKG_CHECKPOINT_LOCK_NAME), &n);
    snprintf(want, sizeof want, "pid %ld host %s\n", (long)getpid(), host);
    assert_true(n == strlen(want) && memcmp(text, want, n) == 0);
    free(text);
    vkg_checkpoint_unlock(&fd);
    /* a folder that does not exist cannot be locked: an I/O error naming the file */
    assert_int_equal(vkg_checkpoint_lock(sub(f, "none"), &fd), VKG_ERR_IO);
    assert_msg_has("none/" VKG_CHECKPOINT_LOCK_NAME, NULL);
}

static void test_prune(void **state)
{
    fixture *f = *state;
    for (uint64_t s = 1; s <= 6; s++)
        write_ckpt(f, s);
    unlink(sub(f, "ck/step_00000005/DONE")); /* incomplete: removed, not one of the kept */
    write_ckpt(f, 9);
    mkdir(sub(f, "ck/step_00000000"), 0777); /* an old failed attempt with a temp file */
    spit(sub(f, "ck/step_00000000/.state.bin.tmp-1-2"), (const unsigned char *)"x", 1);
    write_ckpt(f, 7);
    unlink(sub(f, "ck/step_00000007/DONE"));
    int removed = -1;
    assert_int_equal(vkg_checkpoint_prune(sub(f, "ck"), 0, 6, &removed), VKG_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(vkg_checkpoint_prune(sub(f, "ck"), 3, 6, &removed), VKG_OK);
    assert_int_equal(removed, 4);
    assert_false(exists(f, "ck/step_00000000") || exists(f, "ck/step_00000001") ||
                 exists(f, "ck/step_00000002") || exists(f, "ck/step_00000005"));
    assert_true(exists(f, "ck/step_00000003/DONE") && exists(f, "ck/step_00000004/DONE") &&
                exists(f, "ck/step_00000006/DONE"));
    assert_true(exists(f, "ck/step_00000007") && exists(f, "ck/step_00000009/DONE"));
    /* keep 1: only the protected one, even when it is not the newest on disk */
    assert_int_equal(vkg_checkpoint_prune(sub(f, "ck"), 1, 4, &removed), VKG_OK);
    assert_int_equal(removed, 1);
    assert_true(exists(f, "ck/step_00000004/DONE") && exists(f, "ck/step_00000006/DONE"));
    assert_false(exists(f, "ck/step_00000003"));
    char latest[512];
    uint64_t step;
    assert_int_equal(vkg_checkpoint_find_latest(sub(f, "ck"), latest, sizeof latest, &step),
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
    assert_msg_has("batch size B = 4", "has 8");
    b = a;
    b.seed = 7;
    assert_int_equal(vkg_checkpoint_check_resume(&a, &b), VKG_ERR_MISMATCH);
    assert_msg_has("seed", NULL);
    b = a;
    b.total_batch = 512;
    assert_int_equal(vkg_checkpoint_check_resume(&a, &b), VKG_ERR_MISMATCH);
    assert_msg_has("total batch", NULL);
}

/* A header whose parameter count wraps around 2^64 to 0 (C = 2^30, Vp = 2^31 - 1, maxT = 2^31 - 14,
 * one layer) was accepted as a model of 0 parameters in a 1028-byte file. */
static void test_refuses_wrapping_count(void **state)
{
    fixture *f = *state;
    int32_t h[256] = {VKG_STATE_MAGIC, VKG_STATE_VERSION, 2147483634, 1, 1, 1, 1 << 30, 2147483647};
    unsigned char b[1028];
    memcpy(b, h, sizeof h);
    uint32_t crc = crc32_ref(b, 1024);
    memcpy(b + 1024, &crc, 4);
    spit(sub(f, "wrap.bin"), b, sizeof b);
    vkg_gpt2_config cfg;
    vkg_checkpoint_state s;
    size_t np = 99;
    float *m = NULL, *v = NULL;
    assert_int_equal(vkg_statefile_read(f->path, &cfg, &s, &np, &m, &v), VKG_ERR_FORMAT);
    assert_msg_has("wrap.bin", "implausible model");
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newest_complete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_keeps_previous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_damaged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_wrapping_count, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
