/* `vkgpt train --resume` end to end through the built binary (VKGPT_BIN), on tiny models:
 *  - two ranks (`vkgpt launch -n 2`) resume a model that came from --init on llm.c shards with no
 *    tokenizer, without --vocab, and continue bitwise as the uninterrupted run did;
 *  - a run's settings are kept in CKPT_DIR/run.json: `--resume` given only --ckpt-dir and a new
 *    --steps keeps the run's lr, schedule, warmup and evaluation (its log matches an uninterrupted
 *    run's step for step) and prints the override;
 *  - a damaged run.json is refused, naming the file and the field; a --tokenizer other than the
 *    run's is refused;
 *  - --keep's default is in --help and the kept count is printed at start;
 *  - outputs a run.json names (--log, --trace) are not written on --resume unless given again:
 *    files there stay as they were (a checkpoint folder may come from someone else);
 *  - --resume on an empty or absent folder starts fresh, with the losses and model of the same
 *    run without --resume ("always pass --resume" restarts a preempted job and starts a new one).
 * Every run has the Khronos validation layer on (--validation: a message fails the run). */
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

#include "testproc.h"
#include "testutil.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

static char tmp_root[400], text_path[512], val_path[512], shard_path[512], model_path[512];

/* Run vkgpt with args (NULL-terminated), stderr merged into stdout; returns the exit code. The
 * output stays in p->buf[0] (the caller frees p). */
static int run(vkg_test_proc *p, const char *const *args)
{
    const vkg_test_proc_opts opts = {.merge_stderr = 1};
    vkg_test_proc_start(p, args, &opts);
    int rc = vkg_test_proc_wait(p, 400);
    printf("%s", p->buf[0]);
    return rc;
}

static void expect_output(const vkg_test_proc *p, const char *needle)
{
    if (!strstr(p->buf[0], needle))
        fail_msg("the output does not contain '%s':\n%s", needle, p->buf[0]);
}

static int write_text(const char *path, int lines, uint64_t seed)
{
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog"};
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < lines; i++) {
        for (int w = 0; w < 6; w++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            fprintf(f, "%s%s", w ? " " : "", words[(seed >> 33) % 8]);
        }
        fprintf(f, ".\n");
    }
    return fclose(f);
}

/* An llm.c token shard of n tokens below 60, with no tokenizer.bin beside it. */
static int write_shard(const char *path, int n)
{
    int32_t header[256] = {20240520, 1, n};
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(header, sizeof header, 1, f);
    uint64_t s = 7;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint16_t tok = (uint16_t)((s >> 33) % 60);
        fwrite(&tok, 2, 1, f);
    }
    return fclose(f);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_resume"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    snprintf(val_path, sizeof val_path, "%s/val.txt", tmp_root);
    snprintf(shard_path, sizeof shard_path, "%s/shards/tiny_train.bin", tmp_root);
    snprintf(model_path, sizeof model_path, "%s/init/step_00000001/model.bin", tmp_root);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/shards", tmp_root);
    if (write_text(text_path, 400, 1) || write_text(val_path, 100, 2) || mkdir(dir, 0755) ||
        write_shard(shard_path, 6000))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmp_root, name);
}

#define SHAPE                                                                                      \
    "--batch", "2", "--seq", "32", "--sample-len", "0", "--comm-timeout", "20", "--validation"

/* Two ranks resume a model that came from --init on shards without a tokenizer: no --vocab is
 * needed (only rank 0 reads the checkpoint; the others take its model), and the run continues
 * bitwise: the resumed step-4 model equals the one the uninterrupted run wrote. */
static void test_two_ranks_resume_without_vocab(void **state)
{
    (void)state;
    vkg_test_proc p;
    char init[600], ckpt[600], newest[700], done[800], aside[700];
    path_in(init, sizeof init, "init");
    path_in(ckpt, sizeof ckpt, "dp");
    /* The --init model: one step of a new model over the shards' 60 tokens. */
    const char *make[] = {"train",      "--data", shard_path, "--vocab", "64",
                          "--layers",   "1",      "--heads",  "2",       "--channels",
                          "32",         "--ctx",  "32",       "--steps", "1",
                          "--ckpt-dir", init,     SHAPE,      NULL};
    assert_int_equal(run(&p, make), 0);
    vkg_test_proc_free(&p);
    const char *first[] = {
        "launch", "-n",         "2",      "--transport", "ipc",     "--", "train",
        "--data", shard_path,   "--init", model_path,    "--steps", "4",  "--ckpt-every",
        "2",      "--ckpt-dir", ckpt,     SHAPE,         NULL};
    assert_int_equal(run(&p, first), 0);
    vkg_test_proc_free(&p);
    /* The step-4 checkpoint set aside: the newest complete one is step 2's. */
    snprintf(newest, sizeof newest, "%s/step_00000004", ckpt);
    snprintf(aside, sizeof aside, "%s/uninterrupted", tmp_root);
    assert_int_equal(rename(newest, aside), 0);
    const char *again[] = {"launch", "-n",       "2",        "--transport", "ipc", "--",
                           "train",  "--data",   shard_path, "--steps",     "4",   "--ckpt-dir",
                           ckpt,     "--resume", SHAPE,      NULL};
    int rc = run(&p, again);
    if (rc != 0)
        fail_msg("the two-rank resume without --vocab failed (exit %d)", rc);
    expect_output(&p, "[rank 0] resumed at step 2");
    expect_output(&p, "[rank 1] resumed at step 2");
    vkg_test_proc_free(&p);
    snprintf(done, sizeof done, "%s/DONE", newest);
    struct stat sb;
    assert_int_equal(stat(done, &sb), 0);
    char a[800], b[800];
    snprintf(a, sizeof a, "%s/model.bin", aside);
    snprintf(b, sizeof b, "%s/model.bin", newest);
    size_t na = 0, nb = 0;
    unsigned char *ma = vkg_test_must_read(a, &na), *mb = vkg_test_must_read(b, &nb);
    assert_int_equal(na, nb);
    if (memcmp(ma, mb, na))
        fail_msg("the resumed step-4 model differs from the uninterrupted run's");
    free(ma), free(mb);
}

/* The value of "key": in the log line of step `step` (as text), or "" when absent. */
static void log_field(const char *log, int step, const char *key, char *out, size_t cap)
{
    char head[32], k[64];
    snprintf(head, sizeof head, "{\"step\":%d,", step);
    snprintf(k, sizeof k, "\"%s\":", key);
    out[0] = '\0';
    const char *line = strstr(log, head);
    if (!line)
        fail_msg("no step %d in the log:\n%s", step, log);
    const char *end = strchr(line, '\n'), *at = strstr(line, k);
    if (!at || (end && at > end))
        return;
    at += strlen(k);
    size_t n = strcspn(at, ",}");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
}

#define SETTINGS                                                                                   \
    "--data", text_path, "--layers", "1", "--heads", "2", "--channels", "32", "--ctx", "32",       \
        "--lr", "1.7e-3", "--schedule", "linear", "--warmup", "2", "--lr-min-frac", "0.3",         \
        "--eval-every", "2", "--val-data", val_path, "--eval-batches", "2", SHAPE

/* Resuming with only --ckpt-dir and a longer --steps keeps the run's lr, schedule and evaluation:
 * steps 3 and 4 log the same lr, loss and eval loss as a run of 4 steps with every flag; the
 * override of --steps is printed. */
static void test_resume_keeps_settings(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ref[600], ckpt[600], path[700];
    path_in(ref, sizeof ref, "settings_ref");
    path_in(ckpt, sizeof ckpt, "settings");
    const char *whole[] = {"train", SETTINGS, "--steps", "4", "--ckpt-dir", ref, NULL};
    assert_int_equal(run(&p, whole), 0);
    vkg_test_proc_free(&p);
    /* The same run, stopped at 2 of 4 steps: its schedule spans 4 steps too. */
    const char *part[] = {"train", SETTINGS,     "--steps", "4", "--ckpt-every",
                          "2",     "--ckpt-dir", ckpt,      NULL};
    assert_int_equal(run(&p, part), 0);
    vkg_test_proc_free(&p);
    char step4[700];
    snprintf(step4, sizeof step4, "%s/step_00000004", ckpt);
    snprintf(path, sizeof path, "%s/set_aside", tmp_root);
    assert_int_equal(rename(step4, path), 0);
    const char *resume[] = {"train", "--ckpt-dir", ckpt, "--resume", "--validation", NULL};
    assert_int_equal(run(&p, resume), 0);
    expect_output(&p, "resumed at step 2");
    expect_output(&p, "resume: settings from");
    vkg_test_proc_free(&p);
    snprintf(path, sizeof path, "%s/log.jsonl", ref);
    char *ref_log = vkg_test_must_read(path, NULL);
    snprintf(path, sizeof path, "%s/log.jsonl", ckpt);
    char *log = vkg_test_must_read(path, NULL);
    static const char *const keys[] = {"lr", "loss", "eval_loss"};
    for (int step = 3; step <= 4; step++)
        for (int k = 0; k < 3; k++) {
            char want[64], got[64];
            log_field(ref_log, step, keys[k], want, sizeof want);
            log_field(log, step, keys[k], got, sizeof got);
            if (!want[0] && k < 2)
                fail_msg("the reference log has no %s at step %d", keys[k], step);
            if (strcmp(want, got))
                fail_msg("step %d: %s is '%s' resumed, '%s' in the uninterrupted run", step,
                         keys[k], got, want);
        }
    char eval4[64];
    log_field(log, 4, "eval_loss", eval4, sizeof eval4);
    assert_true(eval4[0] != '\0'); /* the evaluation was kept */
    free(ref_log), free(log);
}

/* --resume where there is nothing to resume (an empty folder, or none) trains from the start: the
 * same losses and final model as without --resume. */
static void test_resume_nothing_starts_fresh(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ref[600], empty[600], absent[600], path[700];
    path_in(ref, sizeof ref, "fresh_ref");
    path_in(empty, sizeof empty, "fresh_empty");
    path_in(absent, sizeof absent, "fresh_absent");
    assert_int_equal(mkdir(empty, 0755), 0);
    const char *plain[] = {"train", SETTINGS, "--steps", "3", "--ckpt-dir", ref, NULL};
    assert_int_equal(run(&p, plain), 0);
    vkg_test_proc_free(&p);
    const char *dirs[] = {empty, absent};
    snprintf(path, sizeof path, "%s/log.jsonl", ref);
    char *ref_log = vkg_test_must_read(path, NULL);
    for (int d = 0; d < 2; d++) {
        const char *again[] = {"train",      SETTINGS, "--steps",  "3",
                               "--ckpt-dir", dirs[d],  "--resume", NULL};
        assert_int_equal(run(&p, again), 0);
        assert_null(strstr(p.buf[0], "resumed at step"));
        vkg_test_proc_free(&p);
        snprintf(path, sizeof path, "%s/log.jsonl", dirs[d]);
        char *log = vkg_test_must_read(path, NULL);
        for (int step = 1; step <= 3; step++) {
            char want[64], got[64];
            log_field(ref_log, step, "loss", want, sizeof want);
            log_field(log, step, "loss", got, sizeof got);
            if (!want[0] || strcmp(want, got))
                fail_msg("step %d: loss '%s' with --resume on %s, '%s' without", step, got, dirs[d],
                         want);
        }
        free(log);
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/step_00000003/model.bin", ref);
        snprintf(b, sizeof b, "%s/step_00000003/model.bin", dirs[d]);
        size_t na = 0, nb = 0;
        char *x = vkg_test_must_read(a, &na), *y = vkg_test_must_read(b, &nb);
        assert_true(na == nb && na > 0 && memcmp(x, y, na) == 0);
        free(x), free(y);
    }
    free(ref_log);
}

/* A flag given again overrides the run's value, says so, and is kept for the next resume. */
static void test_resume_override_printed(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ckpt[600], path[700];
    path_in(ckpt, sizeof ckpt, "override");
    const char *part[] = {"train", SETTINGS, "--steps", "2", "--ckpt-dir", ckpt, NULL};
    assert_int_equal(run(&p, part), 0);
    vkg_test_proc_free(&p);
    const char *resume[] = {
        "train",          "--ckpt-dir", ckpt,   "--resume", "--steps",      "3",
        "--eval-batches", "3",          "--lr", "1.7e-3",   "--validation", NULL};
    assert_int_equal(run(&p, resume), 0);
    expect_output(&p, "resume: --steps 3 (the run had 2)");
    expect_output(&p, "resume: --eval-batches 3 (the run had 2)");
    if (strstr(p.buf[0], "resume: --lr")) /* given again with the run's value: no difference */
        fail_msg("--lr 1.7e-3 is the run's own value, yet reported as an override:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
    snprintf(path, sizeof path, "%s/run.json", ckpt);
    char *saved = vkg_test_must_read(path, NULL);
    if (!strstr(saved, "\"eval-batches\": \"3\"") || !strstr(saved, "\"lr\": \"0.0017\""))
        fail_msg("run.json does not hold the resumed run's settings:\n%s", saved);
    free(saved);
}

/* Relative --data and --val-data given in one folder resume from another: run.json keeps them
 * from the folder the run started in; given again from there, they are no override. */
static void test_relative_paths_resume_anywhere(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ckpt[600], path[700], here[4096];
    path_in(ckpt, sizeof ckpt, "relative");
    assert_non_null(getcwd(here, sizeof here));
    assert_int_equal(chdir(tmp_root), 0);
    const char *part[] = {
        "train",    "--data", "tiny.txt", "--val-data", "val.txt",    "--eval-every", "2",
        "--layers", "1",      "--heads",  "2",          "--channels", "32",           "--ctx",
        "32",       SHAPE,    "--steps",  "2",          "--ckpt-dir", ckpt,           NULL};
    int rc = run(&p, part);
    vkg_test_proc_free(&p);
    const char *again[] = {"train", "--ckpt-dir", ckpt,       "--resume",     "--steps",
                           "3",     "--data",     "tiny.txt", "--validation", NULL};
    int rc_again = -1;
    if (rc == 0)
        rc_again = run(&p, again); /* the same relative path, from the same folder */
    int repeated = rc_again == 0 && !strstr(p.buf[0], "resume: --data");
    if (rc == 0)
        vkg_test_proc_free(&p);
    assert_int_equal(chdir("/"), 0);
    const char *resume[] = {"train",   "--ckpt-dir", ckpt,           "--resume",
                            "--steps", "4",          "--validation", NULL};
    int rc_elsewhere = rc == 0 ? run(&p, resume) : -1;
    assert_int_equal(chdir(here), 0);
    assert_int_equal(rc, 0);
    assert_int_equal(rc_again, 0);
    assert_true(repeated);
    assert_int_equal(rc_elsewhere, 0);
    expect_output(&p, "resumed at step 3");
    vkg_test_proc_free(&p);
    snprintf(path, sizeof path, "%s/run.json", ckpt);
    char *saved = vkg_test_must_read(path, NULL), want[700];
    snprintf(want, sizeof want, "\"data\": \"%s\"", text_path);
    if (!strstr(saved, want))
        fail_msg("run.json does not hold --data from the folder the run started in:\n%s", saved);
    free(saved);
}

/* A run with --log and --trace outside its folder, resumed with neither given again: both files
 * stay byte for byte as they were (no truncation, no .svg written beside the log), the resumed
 * run logs into its folder, and the start says why. */
static void test_resume_does_not_write_outputs_run_json_names(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ckpt[600], log[600], trace[600], svg[600], inside[700];
    path_in(ckpt, sizeof ckpt, "outputs");
    path_in(log, sizeof log, "outputs_log.jsonl");
    path_in(trace, sizeof trace, "outputs_trace.json");
    path_in(svg, sizeof svg, "outputs_log.svg");
    const char *part[] = {"train", SETTINGS, "--steps", "2",   "--ckpt-dir", ckpt,
                          "--log", log,      "--trace", trace, NULL};
    assert_int_equal(run(&p, part), 0);
    vkg_test_proc_free(&p);
    size_t nlog = 0, ntrace = 0;
    char *log0 = vkg_test_must_read(log, &nlog), *trace0 = vkg_test_must_read(trace, &ntrace);
    remove(svg);
    const char *resume[] = {"train",   "--ckpt-dir", ckpt,           "--resume",
                            "--steps", "3",          "--validation", NULL};
    assert_int_equal(run(&p, resume), 0);
    expect_output(&p, "resume: --log not taken from the run's settings");
    expect_output(&p, "resume: --trace not taken from the run's settings");
    vkg_test_proc_free(&p);
    size_t n1 = 0, n2 = 0;
    char *log1 = vkg_test_must_read(log, &n1), *trace1 = vkg_test_must_read(trace, &n2);
    assert_true(n1 == nlog && !memcmp(log0, log1, nlog));
    assert_true(n2 == ntrace && !memcmp(trace0, trace1, ntrace));
    FILE *f = fopen(svg, "rb");
    assert_null(f);
    snprintf(inside, sizeof inside, "%s/log.jsonl", ckpt);
    char *in = vkg_test_must_read(inside, NULL); /* the resumed steps went into the folder */
    assert_non_null(strstr(in, "{\"step\":3,"));
    free(log0), free(log1), free(trace0), free(trace1), free(in);
}

/* Replace the first occurrence of from by to in the file at path. */
static void edit_file(const char *path, const char *from, const char *to)
{
    char *text = vkg_test_must_read(path, NULL), *at = strstr(text, from);
    if (!at)
        fail_msg("%s does not contain '%s'", path, from);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    fclose(f);
    free(text);
}

/* A damaged run.json is refused with exit 2, naming the file and the field; nothing trains. A
 * --tokenizer other than the run's is refused too. */
static void test_damaged_run_json_refused(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ckpt[600], path[700], good[700];
    path_in(ckpt, sizeof ckpt, "damaged");
    const char *part[] = {"train", SETTINGS, "--steps", "1", "--ckpt-dir", ckpt, NULL};
    assert_int_equal(run(&p, part), 0);
    vkg_test_proc_free(&p);
    snprintf(path, sizeof path, "%s/run.json", ckpt);
    snprintf(good, sizeof good, "%s/run.json.good", tmp_root);
    size_t n = 0;
    char *orig = vkg_test_must_read(path, &n);
    const struct {
        const char *from, *to, *field;
    } cases[] = {
        {"\"lr\": \"0.0017\"", "\"lr\": \"fast\"", "field \"flags.lr\""},
        {"\"lr\": \"0.0017\"", "\"lr\": 0.0017", "field \"flags.lr\""},
        {"\"warmup\": \"2\"", "\"warmpu\": \"2\"", "field \"flags.warmpu\""},
        {"\"schedule\": \"linear\"", "\"schedule\": \"cosinus\"", "field \"flags.schedule\""},
        {"\"version\": 1", "\"version\": 7", "field \"version\""},
    };
    const char *resume[] = {"train", "--ckpt-dir", ckpt, "--resume", "--steps", "2", NULL};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fwrite(orig, 1, n, f);
        fclose(f);
        edit_file(path, cases[i].from, cases[i].to);
        int rc = run(&p, resume);
        if (rc != 2)
            fail_msg("a run.json with %s resumed with exit %d, not 2", cases[i].to, rc);
        expect_output(&p, path);
        expect_output(&p, cases[i].field);
        if (strstr(p.buf[0], "step 2/"))
            fail_msg("trained from a damaged run.json");
        vkg_test_proc_free(&p);
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(orig, 1, n / 2, f); /* cut short */
    fclose(f);
    assert_int_equal(run(&p, resume), 2);
    expect_output(&p, path);
    vkg_test_proc_free(&p);
    f = fopen(path, "w");
    assert_non_null(f);
    fwrite(orig, 1, n, f);
    fclose(f);
    const char *tok[] = {"train", "--ckpt-dir", ckpt, "--resume", "--tokenizer", "byte", NULL};
    assert_int_equal(run(&p, tok), 2);
    expect_output(&p, "--tokenizer byte disagrees with the run's tokenizer");
    vkg_test_proc_free(&p);
    free(orig);
}

/* --keep: its default in --help, and what it keeps said at start. */
static void test_keep_documented(void **state)
{
    (void)state;
    vkg_test_proc p;
    char ckpt[600];
    path_in(ckpt, sizeof ckpt, "keep");
    const char *help[] = {"train", "--help", NULL};
    assert_int_equal(run(&p, help), 0);
    const char *line = strstr(p.buf[0], "--keep");
    if (!line || !strstr(line, "(default: 3)") || strchr(line, '\n') < strstr(line, "(default: 3)"))
        fail_msg("--help does not give --keep's default of 3:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
    const char *train[] = {"train", SETTINGS, "--steps", "1", "--ckpt-dir", ckpt, NULL};
    assert_int_equal(run(&p, train), 0);
    expect_output(&p, "keeping the newest 3, older ones deleted (--keep)");
    vkg_test_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks_resume_without_vocab),
        cmocka_unit_test(test_resume_keeps_settings),
        cmocka_unit_test(test_resume_override_printed),
        cmocka_unit_test(test_relative_paths_resume_anywhere),
        cmocka_unit_test(test_resume_does_not_write_outputs_run_json_names),
        cmocka_unit_test(test_damaged_run_json_refused),
        cmocka_unit_test(test_keep_documented),
        cmocka_unit_test(test_resume_nothing_starts_fresh),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
