/* The trainer through its public API (vkgpt/train.h) on a tiny model and tiny llm.c shards written
 * to a temporary folder, every trainer with the Khronos validation layer on and checked for zero
 * validation messages:
 *  - resume is bit-identical: 6 steps straight vs 3 + checkpoint + a new trainer resumed + 3, with
 *    shuffling, gradient accumulation (2 micro-batches per step), warmup, evaluation and an epoch
 *    boundary crossed after the resume: per-step losses, norms, lrs and eval losses, the final
 *    parameters, and the checkpoint files are equal byte for byte; the resumed log holds exactly
 *    steps 1..6 whose losses read back to the same bits; resuming with another seed is refused;
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
 * The trainer's device is reached through trainer_internal.h to read its validation counter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_fixture.h"
#include "ref/gpt2_ref.h"
#include "testutil.h"
#include "train/trainer_internal.h"
#include "vkgpt/io.h"
#include "vkgpt/train.h"

/* Model L=2 C=32 NH=4 maxT=16 V=100 (Vp=128); micro-batch B=2 x T=8; total batch 2 x B x T. */
enum { L = 2, C = 32, NH = 4, MAXT = 16, V = 100, B = 2, T = 8, STEPS = 6 };
#define PATH_CAP 512

/* ---- temporary folder and files -------------------------------------------------------------- */

static char tmp_root[PATH_CAP];

static const char *path_in(char *buf, const char *fmt, ...)
{
    char rel[PATH_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    int len = snprintf(buf, PATH_CAP, "%s/%s", tmp_root, rel);
    assert_true(len > 0 && len < PATH_CAP);
    return buf;
}

/* out = dir/name */
static const char *join(char *out, const char *dir, const char *name)
{
    int len = snprintf(out, PATH_CAP, "%s/%s", dir, name);
    assert_true(len > 0 && len < PATH_CAP);
    return out;
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int group_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/vkg_test_train_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A shard of n tokens from a small "language": mostly (prev * 7 + 3) % V, sometimes random. */
static void write_shard(const char *path, size_t n, uint64_t seed)
{
    uint16_t *tok = malloc(n * sizeof *tok);
    assert_non_null(tok);
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    uint16_t t = (uint16_t)(vkg_test_rng_u64(&r) % V);
    for (size_t i = 0; i < n; i++) {
        tok[i] = t;
        t = vkg_test_rng_u64(&r) % 4 == 0 ? (uint16_t)(vkg_test_rng_u64(&r) % V)
                                          : (uint16_t)((t * 7 + 3) % V);
    }
    VKG_ASSERT_OK(vkg_shard_write(path, tok, n));
    free(tok);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    buf[size] = 0;
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static void expect_same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = read_file(a, &na), *y = read_file(b, &nb);
    if (na != nb || memcmp(x, y, na) != 0)
        fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, na, nb);
    free(x);
    free(y);
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    unsigned char *buf = read_file(from, &n);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(buf);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Train data: two shards, 4 + 3 = 7 global batches of B*T tokens, so 6 steps of 2 micro-batches
 * cross an epoch boundary (and reshuffle) after the mid-run resume at step 3. */
static void write_data(const char *tag)
{
    char p[PATH_CAP];
    write_shard(path_in(p, "%s_train_000.bin", tag), 4 * B * T + 1, 11);
    write_shard(path_in(p, "%s_train_001.bin", tag), 3 * B * T + 1, 12);
    write_shard(path_in(p, "%s_val.bin", tag), 3 * B * T + 1, 13);
}

/* The tiny run every test starts from (strings point into bufs, which must outlive create). */
typedef struct run_paths {
    char data[PATH_CAP], val[PATH_CAP], ckpt[PATH_CAP];
} run_paths;

static vkg_train_config tiny_config(run_paths *p, const char *tag, const char *ckpt)
{
    vkg_train_config c = vkg_train_config_default();
    c.validation = 1;
    c.device = getenv("VKGPT_DEVICE");
    c.layers = L, c.heads = NH, c.channels = C, c.max_seq_len = MAXT, c.vocab_size = V;
    c.seed = 1234;
    c.data = path_in(p->data, "%s_train_*.bin", tag);
    c.val_data = path_in(p->val, "%s_val.bin", tag);
    c.shuffle = 1;
    c.batch = B, c.seq = T, c.total_batch = 2 * B * T;
    c.steps = STEPS;
    c.lr = 1e-2f, c.warmup = 2, c.schedule = VKG_SCHEDULE_COSINE;
    c.weight_decay = 0.1f, c.grad_clip = 1.0f;
    c.eval_every = 2, c.eval_batches = 2;
    c.ckpt_dir = ckpt ? path_in(p->ckpt, "%s", ckpt) : NULL;
    c.keep_checkpoints = 0;
    return c;
}

/* Destroy the trainer; the validation layer must have reported nothing over its whole life, its
 * device's destruction (objects left behind) included. */
static void destroy_expecting_no_validation_messages(vkg_trainer_t **t)
{
    char first[1024];
    int n = vkg_trainer_destroy_report(t, first, sizeof first);
    if (n != 0)
        fail_msg("the validation layer reported %d message(s); the first: %s", n, first);
}

static void expect_error(vkg_status got, vkg_status want, const char *needle1, const char *needle2)
{
    const char *msg = vkg_error_message();
    if (got != want)
        fail_msg("expected %s, got %s: %s", vkg_status_name(want), vkg_status_name(got), msg);
    if ((needle1 && !strstr(msg, needle1)) || (needle2 && !strstr(msg, needle2)))
        fail_msg("the message does not name '%s'%s%s: %s", needle1, needle2 ? " and " : "",
                 needle2 ? needle2 : "", msg);
    printf("refused as expected (%s): %s\n", vkg_status_name(got), msg);
}

typedef struct step_record {
    float loss[STEPS], lr[STEPS], norm[STEPS], eval[STEPS];
} step_record;

/* Run steps first..last (1-based, inclusive) and record them. */
static void run_steps(vkg_trainer_t *t, int first, int last, step_record *rec)
{
    for (int s = first; s <= last; s++) {
        assert_false(vkg_trainer_done(t));
        vkg_step_info info;
        VKG_ASSERT_OK(vkg_trainer_step(t, &info));
        assert_int_equal(info.step, s);
        assert_true(isfinite(info.loss));
        assert_int_equal(info.has_eval, s % 2 == 0);
        assert_int_equal(info.tokens, (uint64_t)s * 2 * B * T);
        rec->loss[s - 1] = info.loss, rec->lr[s - 1] = info.lr;
        rec->norm[s - 1] = info.grad_norm, rec->eval[s - 1] = info.has_eval ? info.eval_loss : 0;
    }
}

/* ---- resume ---------------------------------------------------------------------------------- */

static void check_log(const char *log, const step_record *want)
{
    size_t n;
    char *text = (char *)read_file(log, &n);
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

static void test_resume_is_bit_identical(void **state)
{
    (void)state;
    write_data("r");
    run_paths pa, pb;
    char pth[PATH_CAP], ck_a[PATH_CAP], ck_b[PATH_CAP], fa[PATH_CAP], fb[PATH_CAP];
    step_record straight, split;
    vkg_trainer_t *t = NULL;
    vkg_trainer_info info;

    /* Straight: 6 steps, then a checkpoint. */
    vkg_train_config ca = tiny_config(&pa, "r", "straight");
    VKG_ASSERT_OK(vkg_trainer_create(&ca, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.accum_steps, 2);
    assert_int_equal(info.padded_vocab_size, 128);
    assert_int_equal(info.resumed, 0);
    size_t n = info.num_params;
    float *params_a = vkg_test_alloc(n), *params_b = vkg_test_alloc(n);
    run_steps(t, 1, STEPS, &straight);
    assert_true(vkg_trainer_done(t));
    VKG_ASSERT_OK(vkg_trainer_get_params(t, params_a));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, ck_a, sizeof ck_a));
    destroy_expecting_no_validation_messages(&t);
    assert_null(t);

    /* Split: 3 steps, checkpoint, destroy; a new trainer resumes and runs the other 3. */
    vkg_train_config cb = tiny_config(&pb, "r", "split");
    VKG_ASSERT_OK(vkg_trainer_create(&cb, &t));
    run_steps(t, 1, STEPS / 2, &split);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    destroy_expecting_no_validation_messages(&t);
    assert_true(exists(path_in(pth, "split/step_00000003/DONE")));

    cb.resume = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&cb, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.resumed, 1);
    assert_int_equal(info.start_step, STEPS / 2);
    run_steps(t, STEPS / 2 + 1, STEPS, &split);
    assert_true(vkg_trainer_done(t));
    VKG_ASSERT_OK(vkg_trainer_get_params(t, params_b));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, ck_b, sizeof ck_b));
    destroy_expecting_no_validation_messages(&t);

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
    expect_same_file(join(fa, ck_a, "model.bin"), join(fb, ck_b, "model.bin"));
    expect_same_file(join(fa, ck_a, "state.bin"), join(fb, ck_b, "state.bin"));
    check_log(path_in(pth, "split/log.jsonl"), &straight);
    check_log(path_in(pth, "straight/log.jsonl"), &straight);
    assert_true(exists(path_in(pth, "split/log.svg")));

    /* The same folder with another seed (or another batch shape) is refused, not mixed. */
    cb.seed = 99;
    expect_error(vkg_trainer_create(&cb, &t), VKG_ERR_MISMATCH, "seed", NULL);
    assert_null(t);
    free(params_a);
    free(params_b);
}

/* ---- memory plans ---------------------------------------------------------------------------- */

/* Run STEPS steps of cfg and keep the records and the final parameters; info out. */
static void run_whole(vkg_train_config *cfg, step_record *rec, float *params,
                      vkg_trainer_info *info)
{
    vkg_trainer_t *t = NULL;
    VKG_ASSERT_OK(vkg_trainer_create(cfg, &t));
    vkg_trainer_get_info(t, info);
    run_steps(t, 1, STEPS, rec);
    VKG_ASSERT_OK(vkg_trainer_get_params(t, params));
    destroy_expecting_no_validation_messages(&t);
}

static void expect_same_run(const char *what, const step_record *a, const step_record *b,
                            const float *pa, const float *pb, size_t n)
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
    write_data("m");
    run_paths p;
    step_record plain, other;
    vkg_trainer_info ip, io;
    vkg_train_config c = tiny_config(&p, "m", NULL);
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
    expect_error(vkg_trainer_create(&cm, &t), VKG_ERR_NOMEM, "--batch 2 x --seq 8 need",
                 "the largest --batch that fits is 1");
    assert_null(t);
    cm.memory_limit = ip.device_bytes / 2; /* less than the parameters and AdamW need */
    expect_error(vkg_trainer_create(&cm, &t), VKG_ERR_NOMEM, "the largest pool: AdamW moments",
                 "no --batch fits");
    assert_null(t);
    cm = c;
    cm.max_allocation = 64 << 10; /* the parameters are 117.5 KiB */
    expect_error(vkg_trainer_create(&cm, &t), VKG_ERR_NOMEM, "tensor params needs",
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

/* ---- refused inputs -------------------------------------------------------------------------- */

/* Corrupt a file in place: XOR the byte at offset with mask. */
static void flip_bits(const char *path, long offset, int mask)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    int byte = fgetc(f);
    assert_true(byte != EOF);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    fputc(byte ^ mask, f);
    assert_int_equal(fclose(f), 0);
}

static void test_corrupt_inputs_are_refused(void **state)
{
    (void)state;
    write_data("c");
    run_paths p;
    char good[PATH_CAP], bad[PATH_CAP], stp[PATH_CAP];
    vkg_trainer_t *t = NULL;

    /* A model file that loads, and the same file truncated. */
    vkg_gpt2_config mcfg = {.max_seq_len = MAXT,
                            .vocab_size = V,
                            .padded_vocab_size = 128,
                            .num_layers = L,
                            .num_heads = NH,
                            .channels = C};
    vkg_ref_gpt2_config_t rcfg = {.maxT = MAXT, .V = V, .Vp = 128, .L = L, .NH = NH, .C = C};
    size_t n = vkg_gpt2_num_params(&mcfg);
    float *params = vkg_test_alloc(n), *back = vkg_test_alloc(n);
    vkg_ref_gpt2_init_params(&rcfg, params, 5);
    VKG_ASSERT_OK(vkg_modelfile_write(path_in(good, "c_model.bin"), &mcfg, params));
    vkg_train_config c = tiny_config(&p, "c", NULL);
    c.init_path = good;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    VKG_ASSERT_OK(vkg_trainer_get_params(t, back));
    assert_memory_equal(params, back, n * sizeof *params);
    destroy_expecting_no_validation_messages(&t);
    VKG_ASSERT_OK(vkg_modelfile_write(path_in(bad, "c_truncated.bin"), &mcfg, params));
    assert_int_equal(truncate(bad, (off_t)(VKG_FILE_HEADER_BYTES + 4 * n - 100)), 0);
    c.init_path = bad;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "truncated");
    assert_null(t);

    /* A checkpoint whose state.bin has one byte flipped (in AdamW's m). */
    c = tiny_config(&p, "c", "c_ckpt");
    c.steps = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_step_info si;
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_trainer_destroy(&t);
    flip_bits(path_in(stp, "c_ckpt/step_00000001/state.bin"), VKG_FILE_HEADER_BYTES + 4 * 1000 + 2,
              0x10);
    c.resume = 1;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, stp, "checksum");
    assert_null(t);

    /* A checkpoint with a good state.bin but one byte of a parameter flipped in model.bin:
     * state.bin's record of the parameters' checksum catches it. */
    c = tiny_config(&p, "c", "c_ckpt2");
    c.steps = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_trainer_destroy(&t);
    flip_bits(path_in(stp, "c_ckpt2/step_00000001/model.bin"), VKG_FILE_HEADER_BYTES + 4 * 500 + 1,
              0x01);
    c.resume = 1;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, stp, "checksum");
    assert_null(t);

    /* A model file holding a NaN (as a diverged run would leave): refused, naming the tensor. */
    c = tiny_config(&p, "c", NULL);
    size_t qkvw = 0, sizes[VKG_GPT2_NUM_PARAM_TENSORS];
    vkg_gpt2_param_sizes(&mcfg, sizes);
    for (int i = 0; i < 4; i++) /* wte, wpe, ln1w, ln1b precede qkvw */
        qkvw += sizes[i];
    params[qkvw + 7] = NAN;
    VKG_ASSERT_OK(vkg_modelfile_write(path_in(bad, "c_nan.bin"), &mcfg, params));
    c.init_path = bad;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "parameter 7 of tensor qkvw");
    assert_null(t);

    /* A shard with a bad magic. */
    c = tiny_config(&p, "c", NULL);
    size_t len;
    unsigned char *shard = read_file(path_in(good, "c_train_001.bin"), &len);
    shard[0] ^= 0x01;
    FILE *f = fopen(path_in(bad, "c_badmagic.bin"), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(shard, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(shard);
    c.data = bad;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "magic");

    /* A shard with a token outside the vocabulary, at position 37. */
    uint16_t toks[4 * B * T + 1];
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++)
        toks[i] = (uint16_t)(i % V);
    toks[37] = V + 5;
    VKG_ASSERT_OK(vkg_shard_write(path_in(bad, "c_badtoken.bin"), toks, 4 * B * T + 1));
    c.data = bad;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "token 105 at position 37");
    c.data = p.data;
    c.val_data = bad;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, bad, "position 37");
    assert_null(t);
    free(params);
    free(back);
}

static void test_bad_config_is_refused(void **state)
{
    (void)state;
    write_data("b");
    run_paths p;
    vkg_trainer_t *t = NULL;
    vkg_train_config c = tiny_config(&p, "b", NULL);
    c.total_batch = 3 * B * T + 8; /* not a multiple of B*T = 16 */
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--total-batch", "56");
    c = tiny_config(&p, "b", NULL);
    c.device = "99";
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND, "99", NULL);
    c.device = "no-such-vulkan-device";
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND, "no-such-vulkan-device", NULL);
    c = tiny_config(&p, "b", NULL);
    c.seq = MAXT + 1;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--seq", NULL);
    c = tiny_config(&p, "b", NULL);
    c.resume = 1; /* --resume without --ckpt-dir would silently start afresh */
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--ckpt-dir", NULL);
    c = tiny_config(&p, "b", NULL);
    c.data = path_in(p.data, "b_nothing_*.bin");
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_NOT_FOUND, "b_nothing_", NULL);
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
        cb->b[i] = read_file(join(f, dir, ckpt_files[i]), &cb->n[i]);
}

/* dir holds exactly the bytes of cb (freed). */
static void expect_bytes(const char *dir, ckpt_bytes *cb)
{
    char f[PATH_CAP];
    for (int i = 0; i < 3; i++) {
        size_t n;
        unsigned char *now = read_file(join(f, dir, ckpt_files[i]), &n);
        if (n != cb->n[i] || memcmp(now, cb->b[i], n) != 0)
            fail_msg("%s changed: %zu bytes, were %zu", f, n, cb->n[i]);
        free(now);
        free(cb->b[i]);
    }
}

/* Overwrite the 32-bit header slot `slot` of a file in place. */
static void poke_slot(const char *path, int slot, int32_t value)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 4L * slot, SEEK_SET), 0);
    assert_int_equal(fwrite(&value, 4, 1, f), 1);
    assert_int_equal(fclose(f), 0);
}

static void test_crash_mid_checkpoint_resumes_older(void **state)
{
    (void)state;
    write_data("k");
    run_paths p;
    char a[PATH_CAP], b[PATH_CAP], log[PATH_CAP];
    step_record orig, again;
    vkg_trainer_t *t = NULL;
    vkg_train_config c = tiny_config(&p, "k", "k_ckpt");
    c.steps = 4;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    run_steps(t, 1, 2, &orig);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    run_steps(t, 3, 4, &orig);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    destroy_expecting_no_validation_messages(&t);
    size_t n_log;
    unsigned char *log_before = read_file(path_in(log, "k_ckpt/log.jsonl"), &n_log);
    char model_copy[PATH_CAP], state_copy[PATH_CAP];
    copy_file(path_in(a, "k_ckpt/step_00000004/model.bin"), path_in(model_copy, "k_model4.bin"));
    copy_file(path_in(a, "k_ckpt/step_00000004/state.bin"), path_in(state_copy, "k_state4.bin"));

    /* A new run in the folder is refused: it would write over this run's checkpoints and log. */
    vkg_train_config fresh = c;
    fresh.resume = 0;
    expect_error(vkg_trainer_create(&fresh, &t), VKG_ERR_INVALID_ARG, "--ckpt-dir", "--resume");
    assert_null(t);

    /* The newest checkpoint, marked complete, damaged three ways: each stops --resume naming the
     * file and what is wrong, and changes nothing. */
    char dir4_buf[PATH_CAP];
    const char *dir4 = path_in(dir4_buf, "k_ckpt/step_00000004");
    c.resume = 1;
    for (int damage = 0; damage < 3; damage++) {
        ckpt_bytes cb;
        copy_file(model_copy, join(a, dir4, "model.bin"));
        copy_file(state_copy, join(a, dir4, "state.bin"));
        if (damage == 0) /* truncated model.bin */
            assert_int_equal(truncate(join(a, dir4, "model.bin"), VKG_FILE_HEADER_BYTES + 4000), 0);
        if (damage == 1) /* truncated state.bin (a crash cannot leave this beside DONE) */
            assert_int_equal(truncate(join(a, dir4, "state.bin"), 3000), 0);
        if (damage == 2) /* model.bin's header with another number of heads (same size) */
            poke_slot(join(a, dir4, "model.bin"), 5, 2);
        take_bytes(dir4, &cb);
        const char *file = join(a, dir4, damage == 0 ? "model.bin" : "state.bin");
        expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, file,
                     damage == 2 ? "does not match" : "truncated");
        assert_non_null(strstr(vkg_error_message(), "--resume-fallback"));
        assert_null(t);
        expect_bytes(dir4, &cb);
    }
    size_t n;
    unsigned char *log_now = read_file(log, &n);
    assert_true(n == n_log && memcmp(log_now, log_before, n) == 0);
    free(log_now);

    /* A crash mid-write of step 5 (no DONE) beside it. --resume-fallback resumes from step 2:
     * step 4 is set aside untouched, the run repeats the original steps exactly and writes a new
     * step 4 beside it. */
    assert_int_equal(mkdir(path_in(a, "k_ckpt/step_00000005"), 0755), 0);
    copy_file(path_in(a, "k_ckpt/step_00000002/model.bin"),
              path_in(b, "k_ckpt/step_00000005/model.bin"));
    copy_file(path_in(a, "k_ckpt/step_00000002/state.bin"),
              path_in(b, "k_ckpt/step_00000005/state.bin"));
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
    run_steps(t, 3, 4, &again);
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    destroy_expecting_no_validation_messages(&t);
    assert_memory_equal(&orig.loss[2], &again.loss[2], 2 * sizeof orig.loss[0]);
    assert_memory_equal(&orig.norm[2], &again.norm[2], 2 * sizeof orig.norm[0]);
    expect_bytes(path_in(a, "k_ckpt/step_00000004.damaged"), &damaged);
    assert_true(exists(path_in(a, "k_ckpt/step_00000004/DONE")));
    /* the new step 4 is the original one, byte for byte (only its header was damaged) */
    poke_slot(path_in(a, "k_ckpt/step_00000004.damaged/model.bin"), 5, NH);
    expect_same_file(path_in(a, "k_ckpt/step_00000004.damaged/model.bin"),
                     path_in(b, "k_ckpt/step_00000004/model.bin"));
    /* and it is never written over: a second checkpoint of the same step is refused */
    vkg_train_config again_cfg = c;
    again_cfg.steps = 4;
    VKG_ASSERT_OK(vkg_trainer_create(&again_cfg, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.start_step, 4);
    expect_error(vkg_trainer_checkpoint(t, NULL, 0), VKG_ERR_STATE, "step_00000004",
                 "marked complete");
    vkg_trainer_destroy(&t);

    /* Only a complete-but-unreadable checkpoint left: refused, not restarted from scratch,
     * with or without the fallback. */
    c = tiny_config(&p, "k", "k_only");
    c.steps = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_step_info si;
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    vkg_trainer_destroy(&t);
    assert_int_equal(truncate(path_in(a, "k_only/step_00000001/model.bin"), 2000), 0);
    c.resume = 1;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, "step_00000001", "model.bin");
    c.resume_fallback = 1;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_FORMAT, "step_00000001", "model.bin");
    assert_null(t);
    assert_true(exists(path_in(a, "k_only/step_00000001/DONE")));
    c.resume_fallback = 0;
    /* A folder with only an incomplete (no DONE) checkpoint starts afresh. */
    assert_int_equal(unlink(path_in(a, "k_only/step_00000001/DONE")), 0);
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_trainer_get_info(t, &info);
    assert_int_equal(info.resumed, 0);
    assert_int_equal(info.start_step, 0);
    vkg_trainer_destroy(&t);
    /* --resume-fallback alone is a usage error */
    c.resume = 0, c.resume_fallback = 1;
    expect_error(vkg_trainer_create(&c, &t), VKG_ERR_INVALID_ARG, "--resume-fallback", "--resume");
    free(log_before);
}

/* Two trainers on one checkpoint folder: the second is refused before it writes anything, naming
 * the holder and the folder; once the first is gone the folder is free again. */
static void test_one_trainer_per_folder(void **state)
{
    (void)state;
    write_data("l");
    run_paths p;
    char log[PATH_CAP], want[128], host[64] = "";
    gethostname(host, sizeof host - 1);
    vkg_trainer_t *t = NULL, *u = NULL;
    vkg_train_config c = tiny_config(&p, "l", "l_ckpt");
    c.steps = 2;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &t));
    vkg_step_info si;
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    size_t n0, n1;
    unsigned char *before = read_file(path_in(log, "l_ckpt/log.jsonl"), &n0);
    snprintf(want, sizeof want, "pid %ld on host %s", (long)getpid(), host);
    expect_error(vkg_trainer_create(&c, &u), VKG_ERR_STATE, want, p.ckpt);
    assert_null(u);
    unsigned char *after = read_file(log, &n1);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    free(after);
    VKG_ASSERT_OK(vkg_trainer_step(t, &si));
    VKG_ASSERT_OK(vkg_trainer_checkpoint(t, NULL, 0));
    destroy_expecting_no_validation_messages(&t);
    c.resume = 1;
    VKG_ASSERT_OK(vkg_trainer_create(&c, &u));
    vkg_trainer_destroy(&u);
    free(before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_bit_identical),
        cmocka_unit_test(test_split_memory_and_recompute_are_bit_identical),
        cmocka_unit_test(test_corrupt_inputs_are_refused),
        cmocka_unit_test(test_bad_config_is_refused),
        cmocka_unit_test(test_crash_mid_checkpoint_resumes_older),
        cmocka_unit_test(test_one_trainer_per_folder),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
