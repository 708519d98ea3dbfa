/* `vkgpt train` guarding what it writes, end to end through the built binary (VKGPT_BIN) on a tiny
 * byte-level model, every run with the Khronos validation layer on (--validation) and clean:
 *  - a second trainer on a checkpoint folder another one is writing exits non-zero before writing
 *    anything (log.jsonl byte for byte the same), naming the holder's pid and host and the folder;
 *    the first trainer goes on and ends cleanly; a trainer killed by SIGKILL leaves its lock file
 *    behind, and it blocks nobody;
 *  - a new run (no --resume) in a folder holding checkpoints exits 2 naming --resume;
 *  - a damaged newest checkpoint stops --resume (exit 1, naming the file and --resume-fallback);
 *    --resume-fallback resumes from the one before, warns, and leaves the damaged folder byte
 *    for byte intact beside the new checkpoint of its step; `train --help` lists the flag;
 *  - training on llm.c token shards with no tokenizer and --sample-every exits 0, saying once at
 *    the start that samples are skipped.
 * Every child is bounded in time and reaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testproc.h"
#include "testutil.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 600
static char tmp_root[CAP - 120], text_path[CAP], ckpt_dir[CAP];

/* ---- child processes ------------------------------------------------------------------------- */

static int run(vkg_test_proc *p, double timeout_s, const char *const *args)
{
    vkg_test_proc_start(p, args, NULL);
    return vkg_test_proc_wait(p, timeout_s);
}

/* ---- files ----------------------------------------------------------------------------------- */

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void expect_same_bytes(const char *path, const char *bytes, size_t n)
{
    size_t m;
    char *now = vkg_test_must_read(path, &m);
    if (m != n || memcmp(now, bytes, n) != 0)
        fail_msg("%s changed: %zu bytes, were %zu", path, m, n);
    free(now);
}

static void expect_contains(const char *what, const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("%s does not contain '%s':\n%s", what, needle, hay);
}

/* log.jsonl of ckpt_dir holds exactly steps 1..n, one per line; returns n. */
static long log_steps(void)
{
    char path[CAP + 16];
    size_t len;
    snprintf(path, sizeof path, "%s/log.jsonl", ckpt_dir);
    char *log = vkg_test_must_read(path, &len);
    long line = 0;
    for (const char *p = log; *p; p = strchr(p, '\n') + 1) {
        assert_non_null(strchr(p, '\n'));
        const char *sp = strstr(p, "\"step\":");
        assert_true(sp && sp < strchr(p, '\n'));
        assert_int_equal(strtol(sp + 7, NULL, 10), ++line);
    }
    free(log);
    return line;
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_guard"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/ckpt", tmp_root);
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < 300; i++)
        fprintf(f, "Line %d: the quick brown fox jumps over the lazy dog.\n", i);
    fclose(f);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

#define TRAIN_FLAGS                                                                                \
    "train", "--data", text_path, "--layers", "2", "--heads", "2", "--channels", "32", "--ctx",    \
        "32", "--batch", "2", "--seq", "32", "--lr", "3e-3", "--sample-len", "0", "--validation",  \
        "--ckpt-dir", ckpt_dir

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_one_trainer_per_folder(void **state)
{
    (void)state;
    char log[CAP + 16], holder[160], host[64] = "", lock[CAP + 16];
    gethostname(host, sizeof host - 1);
    snprintf(log, sizeof log, "%s/log.jsonl", ckpt_dir);
    snprintf(lock, sizeof lock, "%s/vkgpt.lock", ckpt_dir);
    const char *const first[] = {TRAIN_FLAGS, "--steps", "100000", "--ckpt-every", "2", NULL};
    vkg_test_proc a, b;
    vkg_test_proc_start(&a, first, NULL);
    if (!vkg_test_proc_pump(&a, 120, "step 3/")) {
        vkg_test_proc_kill(&a);
        fail_msg("no third step; stdout:\n%s\nstderr:\n%s", a.buf[0], a.buf[1]);
    }
    /* Frozen, so that its log stands still while the second trainer tries. */
    assert_int_equal(kill(a.pid, SIGSTOP), 0);
    size_t n;
    char *before = vkg_test_must_read(log, &n);
    snprintf(holder, sizeof holder, "pid %ld on host %s", (long)a.pid, host);
    const char *const second[] = {TRAIN_FLAGS, "--steps", "10", NULL};
    const char *const resumed[] = {TRAIN_FLAGS, "--steps", "10", "--resume", NULL};
    for (int i = 0; i < 2; i++) {
        assert_int_not_equal(run(&b, 60, i ? resumed : second), 0);
        expect_contains("stderr", b.buf[1], holder);
        expect_contains("stderr", b.buf[1], ckpt_dir);
        expect_contains("stderr", b.buf[1], "in use by another trainer");
        assert_null(strstr(b.buf[0], "step 1/"));
        expect_same_bytes(log, before, n);
        vkg_test_proc_free(&b);
    }
    free(before);
    assert_int_equal(kill(a.pid, SIGCONT), 0);
    assert_int_equal(kill(a.pid, SIGTERM), 0);
    assert_int_equal(vkg_test_proc_wait(&a, 60), 75); /* a preemption: saved, to resume */
    expect_contains("stdout", a.buf[0], "stopping on signal 15");
    long steps = log_steps();
    assert_true(steps >= 3);
    vkg_test_proc_free(&a);

    /* A trainer killed outright leaves its lock file (naming it) behind: it blocks nobody. */
    const char *const more[] = {TRAIN_FLAGS, "--steps", "100000", "--resume", NULL};
    vkg_test_proc_start(&a, more, NULL);
    if (!vkg_test_proc_pump(&a, 120, "/100000 ")) {
        vkg_test_proc_kill(&a);
        fail_msg("the resumed run did not step; stderr:\n%s", a.buf[1]);
    }
    assert_int_equal(kill(a.pid, SIGKILL), 0);
    vkg_test_proc_wait(&a, 30);
    char *text = vkg_test_must_read(lock, &n);
    snprintf(holder, sizeof holder, "pid %ld host %s", (long)a.pid, host);
    expect_contains("the lock file", text, holder);
    free(text);
    vkg_test_proc_free(&a);
    char final[32];
    snprintf(final, sizeof final, "%ld", steps + 2);
    const char *const last[] = {TRAIN_FLAGS, "--steps", final, "--resume", NULL};
    assert_int_equal(run(&a, 120, last), 0);
    expect_contains("stdout", a.buf[0], "validation layer: 0 message(s)");
    assert_int_equal(log_steps(), steps + 2);
    vkg_test_proc_free(&a);

    /* A new run in the folder (no --resume) is a usage error: it would write over this one. */
    const char *const fresh[] = {TRAIN_FLAGS, "--steps", "3", NULL};
    assert_int_equal(run(&a, 60, fresh), 2);
    expect_contains("stderr", a.buf[1], "--resume");
    expect_contains("stderr", a.buf[1], "already holds checkpoints");
    assert_int_equal(log_steps(), steps + 2);
    vkg_test_proc_free(&a);
}

static void test_damaged_checkpoint(void **state)
{
    (void)state;
    char dir[CAP + 32], aside[CAP + 80], file[CAP + 64], want[64];
    vkg_test_proc p;
    const char *const help[] = {"train", "--help", NULL};
    assert_int_equal(run(&p, 30, help), 0);
    expect_contains("train --help", p.buf[0], "--resume-fallback");
    vkg_test_proc_free(&p);
    /* The checkpoint folder of the test before: its newest checkpoint, damaged. */
    long steps = log_steps();
    snprintf(dir, sizeof dir, "%s/step_%08ld", ckpt_dir, steps);
    snprintf(file, sizeof file, "%s/state.bin", dir);
    assert_int_equal(truncate(file, 5000), 0);
    size_t nm, ns;
    char path[CAP + 128];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    char *model = vkg_test_must_read(path, &nm), *state_bytes = vkg_test_must_read(file, &ns);
    char final[32];
    snprintf(final, sizeof final, "%ld", steps + 1);
    const char *const resume[] = {TRAIN_FLAGS, "--steps", final, "--resume", NULL};
    assert_int_equal(run(&p, 60, resume), 1);
    expect_contains("stderr", p.buf[1], file);
    expect_contains("stderr", p.buf[1], "truncated");
    expect_contains("stderr", p.buf[1], "--resume-fallback");
    expect_same_bytes(file, state_bytes, ns);
    vkg_test_proc_free(&p);
    /* Sampling reads the newest checkpoint that loads, and says which newer one it passed over. */
    const char *const sample[] = {"sample", "--ckpt", ckpt_dir, "--len", "4", NULL};
    assert_int_equal(run(&p, 60, sample), 0);
    expect_contains("stderr", p.buf[1], dir);
    expect_contains("stderr", p.buf[1], "does not load");
    vkg_test_proc_free(&p);
    /* With the fallback: resumed from the checkpoint before it, which repeats the steps after
     * it; the damaged folder is set aside, byte for byte intact. */
    const char *const fallback[] = {TRAIN_FLAGS, "--steps",           final,
                                    "--resume",  "--resume-fallback", NULL};
    assert_int_equal(run(&p, 120, fallback), 0);
    snprintf(want, sizeof want, "step_%08ld.damaged", steps);
    expect_contains("stderr", p.buf[1], want);
    expect_contains("stderr", p.buf[1], "truncated");
    expect_contains("stdout", p.buf[0], "resumed at step ");
    expect_contains("stdout", p.buf[0], "validation layer: 0 message(s)");
    snprintf(aside, sizeof aside, "%s/%s", ckpt_dir, want);
    snprintf(path, sizeof path, "%s/model.bin", aside);
    expect_same_bytes(path, model, nm);
    snprintf(path, sizeof path, "%s/state.bin", aside);
    expect_same_bytes(path, state_bytes, ns);
    snprintf(path, sizeof path, "%s/step_%08ld/DONE", ckpt_dir, steps + 1);
    assert_true(file_exists(path));
    assert_int_equal(log_steps(), steps + 1);
    free(model);
    free(state_bytes);
    vkg_test_proc_free(&p);
}

/* An llm.c token shard of n tokens below vocab, with no tokenizer.bin beside it. */
static void write_shard(const char *path, int n, int vocab)
{
    int32_t header[256] = {20240520, 1, n};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(header, sizeof header, 1, f), 1);
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)((i * 7 + i / 5) % vocab);
        assert_int_equal(fwrite(&t, 2, 1, f), 1);
    }
    assert_int_equal(fclose(f), 0);
}

static void test_shards_without_tokenizer(void **state)
{
    (void)state;
    char shard[CAP + 16];
    snprintf(shard, sizeof shard, "%s/shards/train_000.bin", tmp_root);
    char dir[CAP];
    snprintf(dir, sizeof dir, "%s/shards", tmp_root);
    assert_int_equal(mkdir(dir, 0755), 0);
    write_shard(shard, 4000, 64);
    const char *const args[] = {"train", "--data",         shard, "--vocab",      "64", "--layers",
                                "1",     "--heads",        "2",   "--channels",   "16", "--ctx",
                                "16",    "--batch",        "2",   "--seq",        "16", "--steps",
                                "3",     "--sample-every", "1",   "--validation", NULL};
    vkg_test_proc p;
    assert_int_equal(run(&p, 120, args), 0);
    expect_contains("stdout", p.buf[0], "step 3/3");
    expect_contains("stdout", p.buf[0], "no tokenizer");
    expect_contains("stdout", p.buf[0], "samples are skipped");
    expect_contains("stdout", p.buf[0], "validation layer: 0 message(s)");
    const char *note = strstr(p.buf[0], "samples are skipped");
    assert_null(strstr(note + 1, "samples are skipped")); /* said once */
    assert_true(note < strstr(p.buf[0], "step 1/"));      /* at the start */
    assert_null(strstr(p.buf[0], "--- sample ---"));
    vkg_test_proc_free(&p);
}

/* --resume continues the checkpoint's model: an architecture flag that agrees with it is fine,
 * one that disagrees is an error (exit 2) naming both values, not silently ignored. */
static void test_resume_with_architecture_flags(void **state)
{
    (void)state;
    char dir[CAP];
    snprintf(dir, sizeof dir, "%s/arch", tmp_root);
    const char *const first[] = {"train", "--data",     text_path, "--layers", "1",  "--heads",
                                 "2",     "--channels", "16",      "--ctx",    "16", "--batch",
                                 "2",     "--seq",      "16",      "--steps",  "2",  "--sample-len",
                                 "0",     "--ckpt-dir", dir,       NULL};
    vkg_test_proc p;
    assert_int_equal(run(&p, 120, first), 0);
    vkg_test_proc_free(&p);
    const char *const same[] = {"train", "--data",     text_path, "--layers", "1",  "--heads",
                                "2",     "--channels", "16",      "--ctx",    "16", "--batch",
                                "2",     "--seq",      "16",      "--steps",  "3",  "--sample-len",
                                "0",     "--ckpt-dir", dir,       "--resume", NULL};
    assert_int_equal(run(&p, 120, same), 0);
    expect_contains("stdout", p.buf[0], "resumed at step 2");
    vkg_test_proc_free(&p);
    const char *const other[] = {"train", "--data",     text_path, "--layers", "3",  "--steps",
                                 "4",     "--batch",    "2",       "--seq",    "16", "--sample-len",
                                 "0",     "--ckpt-dir", dir,       "--resume", NULL};
    assert_int_equal(run(&p, 120, other), 2);
    expect_contains("stderr", p.buf[1],
                    "--layers 3 disagrees with the checkpoint resumed at step 3");
    expect_contains("stderr", p.buf[1], "has --layers 1");
    vkg_test_proc_free(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_trainer_per_folder),
        cmocka_unit_test(test_damaged_checkpoint),
        cmocka_unit_test(test_shards_without_tokenizer),
        cmocka_unit_test(test_resume_with_architecture_flags),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
