/* What a user of the vkgpt binary (VKGPT_BIN, set by CMake) is told, and how it exits:
 *  - a file, pattern or device named on the command line that does not exist is a usage error
 *    (exit 2) naming the flag and the path, for train, sample and prepare alike (a mistyped --data
 *    says "no file matches", not that the vocabulary is unknown); a file that exists but cannot
 *    be used is a failure while running (exit 1), for train and sample alike; --rank-batch
 *    auto's flags are refused naming them (--rebalance-every 0 or without auto, auto with --pp);
 *  - errors show the sentence only, without the status name or code locations; VKGPT_VERBOSE=1
 *    or `vkgpt --verbose` adds both;
 *  - --ckpt-dir creates its missing parent folders;
 *  - SIGINT or SIGTERM stops `train` and `launch` with a complete checkpoint and exit 130 (SIGINT)
 *    or 75 (SIGTERM: a preemption, to resume); SIGTERM during the final sample cuts it short;
 *  - `train --help` shows every default, the ones the code uses, even after other flags;
 *  - the progress lines carry the time elapsed and an ETA, and a line announces the final
 *    checkpoint and the final sample before they are made; `bench ops` prints its header before
 *    timing its first row, also into a pipe.
 * Every child runs under the Khronos validation layer (forced on through the loader, logging to a
 * file that must hold no error or warning), bounded in time and reaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testproc.h"
#include "testutil.h"
#include "vkgpt/train.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 512
#define TINY                                                                                       \
    "--layers", "1", "--heads", "1", "--channels", "8", "--ctx", "8", "--batch", "2", "--seq", "8"

static char tmp_root[CAP - 100], text_path[CAP], fifo_path[CAP], vlog_path[CAP];

static void expect_contains(const char *what, const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("%s does not contain '%s':\n%s", what, needle, hay);
}

/* Nothing the validation layer logged is an error, a warning or a performance message. */
static void expect_validation_clean(void)
{
    char *log = vkg_test_read_file(vlog_path, NULL);
    if (log && (strstr(log, "ERROR") || strstr(log, "WARNING") || strstr(log, "PERF")))
        fail_msg("the validation layer reported:\n%s", log);
    free(log);
    unlink(vlog_path);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The first code location ("name.c:123") in s, or NULL. */
static const char *code_location(const char *s)
{
    for (const char *p = strstr(s, ".c:"); p; p = strstr(p + 1, ".c:"))
        if (p > s && p[3] >= '0' && p[3] <= '9')
            return p;
    return NULL;
}

/* stderr tells the user what happened in words only: no status name, no code location. */
static void expect_plain(const char *err)
{
    if (strstr(err, "VKG_ERR_") || code_location(err))
        fail_msg("stderr shows a status name or a code location:\n%s", err);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_cli_errors"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    snprintf(fifo_path, sizeof fifo_path, "%s/pipe.txt", tmp_root);
    snprintf(vlog_path, sizeof vlog_path, "%s/validation.log", tmp_root);
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog"};
    uint64_t s = 12345;
    for (int i = 0; i < 3000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        fprintf(f, "%s%s", words[(s >> 33) % 8], (s >> 20) % 8 ? " " : ".\n");
    }
    fclose(f);
    if (mkfifo(fifo_path, 0600))
        return -1;
    char settings[CAP + 32];
    snprintf(settings, sizeof settings, "%s/vk_layer_settings.txt", tmp_root);
    f = fopen(settings, "w");
    if (!f)
        return -1;
    fprintf(f,
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
            "khronos_validation.log_filename = %s\n"
            "khronos_validation.report_flags = info,warn,error,perf\n",
            vlog_path);
    fclose(f);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation", 1);
    setenv("VK_LAYER_SETTINGS_PATH", tmp_root, 1);
    unsetenv("VKGPT_DEVICE");
    unsetenv("VKGPT_VERBOSE");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* Run args to the end; the exit code, with the output in *p (the caller frees it). */
static int run(vkg_test_proc *p, const char *const *args, const vkg_test_proc_opts *opts)
{
    vkg_test_proc_start(p, args, opts);
    return vkg_test_proc_wait(p, 120);
}

/* ---- exit codes and messages ----------------------------------------------------------------- */

static void test_named_paths(void **state)
{
    (void)state;
    char pattern[CAP + 32], typo[CAP + 32], none[CAP + 32], out[CAP + 32];
    snprintf(pattern, sizeof pattern, "%s/nope/shard_*.bin", tmp_root);
    snprintf(typo, sizeof typo, "%s/tiny.text", tmp_root);
    snprintf(none, sizeof none, "%s/none.bin", tmp_root);
    snprintf(out, sizeof out, "%s/prepared", tmp_root);
    char m_pattern[CAP + 64], m_typo[CAP + 64], m_none[CAP + 64];
    snprintf(m_pattern, sizeof m_pattern, "--data: no file matches '%s'", pattern);
    snprintf(m_typo, sizeof m_typo, "--data: no file matches '%s'", typo);
    snprintf(m_none, sizeof m_none, "no such file or folder '%s'", none);
    const struct {
        const char *args[20];
        int code;
        const char *want;
    } rows[] = {
        {{"train", "--data", pattern, TINY, NULL}, 2, m_pattern},
        {{"train", "--data", typo, TINY, NULL}, 2, m_typo},
        {{"train", "--data", text_path, "--init", none, NULL}, 2, "--init: no such file or folder"},
        {{"train", "--data", text_path, "--tokenizer", none, TINY, NULL}, 2, m_none},
        {{"prepare", "--out", out, none, NULL}, 2, m_none},
        {{"sample", "--ckpt", none, NULL}, 2, none},
        {{"train", "--data", fifo_path, TINY, NULL}, 1, "is a FIFO"},
        {{"sample", "--ckpt", fifo_path, NULL}, 1, "neither a regular file nor a folder"},
        {{"nosuchcommand", NULL}, 2, "unknown command 'nosuchcommand'"},
        {{"train", "--data", text_path, "--lr", "fast", NULL}, 2, "--lr"},
        {{"train", "--data", text_path, "--rank-batch", "auto", "--rebalance-every", "0", TINY,
          NULL},
         2,
         "--rebalance-every must be a whole number from 1"},
        {{"train", "--data", text_path, "--rebalance-every", "5", TINY, NULL},
         2,
         "--rebalance-every needs --rank-batch auto"},
        {{"train", "--data", text_path, "--rank-batch", "auto", "--pp", "2", TINY, NULL},
         2,
         "--rank-batch auto is not supported with --pp"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        vkg_test_proc p;
        int rc = run(&p, rows[k].args, NULL);
        if (rc != rows[k].code)
            fail_msg("row %zu: exit code %d, expected %d; stderr:\n%s", k, rc, rows[k].code,
                     p.buf[1]);
        expect_contains("stderr", p.buf[1], rows[k].want);
        assert_null(strstr(p.buf[1], "vocabulary"));
        expect_plain(p.buf[1]);
        vkg_test_proc_free(&p);
        expect_validation_clean();
    }
}

/* The sentence by default; the status and the code locations with VKGPT_VERBOSE=1 or --verbose. */
static void test_error_text_and_verbose(void **state)
{
    (void)state;
    char blocked[CAP + 32], want[CAP + 96];
    snprintf(blocked, sizeof blocked, "%s/x", text_path); /* a file where a folder must go */
    snprintf(want, sizeof want, "--ckpt-dir: cannot create folder %s: a file of that name is in",
             text_path);
    const char *const args[] = {"train", "--data", text_path, TINY, "--ckpt-dir", blocked, NULL};
    const char *const verbose[] = {"--verbose", "train",      "--data", text_path,
                                   TINY,        "--ckpt-dir", blocked,  NULL};
    const char *const env[] = {"VKGPT_VERBOSE=1", NULL};
    const vkg_test_proc_opts with_env = {.env = env};
    vkg_test_proc p;
    assert_int_equal(run(&p, args, NULL), 1);
    expect_contains("stderr", p.buf[1], "vkgpt train: ");
    expect_contains("stderr", p.buf[1], want);
    expect_plain(p.buf[1]);
    vkg_test_proc_free(&p);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(run(&p, k ? verbose : args, k ? NULL : &with_env), 1);
        expect_contains("stderr", p.buf[1], "--ckpt-dir: ");
        expect_contains("stderr", p.buf[1], want + strlen("--ckpt-dir: "));
        expect_contains("stderr", p.buf[1], "(VKG_ERR_IO)");
        if (!code_location(p.buf[1]))
            fail_msg("verbose stderr names no code location:\n%s", p.buf[1]);
        vkg_test_proc_free(&p);
    }
    /* a device that does not exist: a usage error, in words */
    const char *const device[] = {"train", "--data", text_path, TINY, "--device", "99", NULL};
    assert_int_equal(run(&p, device, NULL), 2);
    expect_contains("stderr", p.buf[1], "device 99 does not exist");
    expect_plain(p.buf[1]);
    vkg_test_proc_free(&p);
    /* the exit statuses are documented in the usage */
    const char *const help[] = {"--help", NULL};
    assert_int_equal(run(&p, help, NULL), 0);
    expect_contains("vkgpt --help", p.buf[0], "VKGPT_VERBOSE");
    expect_contains("vkgpt --help", p.buf[0], "2 a usage error");
    expect_contains("vkgpt --help", p.buf[0], "128 + N");
    expect_contains("vkgpt --help", p.buf[0], "75 preempted");
    vkg_test_proc_free(&p);
    expect_validation_clean();
}

/* ---- a run: folders, progress, the end ------------------------------------------------------- */

/* The offset of needle in hay, failing the test when it is not there. */
static size_t offset_of(const char *hay, const char *needle)
{
    const char *at = strstr(hay, needle);
    if (!at)
        fail_msg("output does not contain '%s':\n%s", needle, hay);
    return (size_t)(at - hay);
}

static void test_run_folders_and_progress(void **state)
{
    (void)state;
    char dir[CAP + 32], done[CAP + 64];
    snprintf(dir, sizeof dir, "%s/runs/deep/x", tmp_root); /* runs/ does not exist */
    const char *const args[] = {"train",        "--data", text_path,    TINY, "--steps", "3",
                                "--sample-len", "4",      "--ckpt-dir", dir,  NULL};
    vkg_test_proc p;
    assert_int_equal(run(&p, args, NULL), 0);
    snprintf(done, sizeof done, "%s/step_00000003/DONE", dir);
    assert_true(file_exists(done));
    const char *out = p.buf[0];
    for (int s = 1; s <= 3; s++) { /* every plain progress line: elapsed and ETA */
        char head[32];
        snprintf(head, sizeof head, "\nstep %d/3 ", s);
        size_t at = offset_of(out, head);
        const char *eol = strchr(out + at + 1, '\n');
        const char *el = strstr(out + at, " elapsed "), *eta = strstr(out + at, " ETA ");
        if (!el || !eta || el > eol || eta > eol)
            fail_msg("step %d's line has no elapsed time and ETA:\n%s", s, out);
    }
    assert_non_null(strstr(out, "step 3/3 ") && strstr(strstr(out, "step 3/3 "), " ETA 0s"));
    /* announced before they are made */
    assert_true(offset_of(out, "writing the checkpoint of step 3") <
                offset_of(out, "\ncheckpoint "));
    assert_true(offset_of(out, "sampling 4 tokens") < offset_of(out, "--- sample ---"));
    vkg_test_proc_free(&p);
    expect_validation_clean();
}

/* `bench ops` into a pipe: its header (device, kernel, columns) comes before the first row is
 * timed, so a long first row is not a silence. The row is never waited for. */
static void test_bench_ops_header_first(void **state)
{
    (void)state;
    const char *const args[] = {"bench", "ops", "--op", "matmul_fwd", "--iters", "100000", NULL};
    vkg_test_proc p;
    vkg_test_proc_start(&p, args, NULL);
    int seen = vkg_test_proc_pump(&p, 60, "# each row: the median of 100000 timed runs");
    vkg_test_proc_kill(&p);
    if (!seen)
        fail_msg("no header within 60 s; stdout:\n%s\nstderr:\n%s", p.buf[0], p.buf[1]);
    expect_contains("stdout", p.buf[0], "# device: ");
    assert_null(strstr(p.buf[0], "\nmatmul_fwd ")); /* the header came before any row */
    vkg_test_proc_free(&p);
    unlink(vlog_path); /* killed mid-run: the layer's log may end anywhere */
}

/* ---- signals --------------------------------------------------------------------------------- */

/* A long run under `launch` (launch != 0) or alone, signalled once a second step is shown: exit
 * 130 for SIGINT, 75 (preempted) otherwise, "stopping", and a complete checkpoint. */
static void stop_with(int sig, int launch, const char *name)
{
    char dir[CAP + 32];
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    const char *const train[] = {"train",        "--data", text_path,    TINY, "--steps", "100000",
                                 "--sample-len", "0",      "--ckpt-dir", dir,  NULL};
    const char *const launched[] = {"launch",       "-n",      "1",          "--",      "train",
                                    "--data",       text_path, TINY,         "--steps", "100000",
                                    "--sample-len", "0",       "--ckpt-dir", dir,       NULL};
    vkg_test_proc p;
    vkg_test_proc_start(&p, launch ? launched : train, NULL);
    if (!vkg_test_proc_pump(&p, 120, "step 2/")) {
        vkg_test_proc_kill(&p);
        fail_msg("no second step; stdout:\n%s\nstderr:\n%s", p.buf[0], p.buf[1]);
    }
    assert_int_equal(kill(p.pid, sig), 0);
    int rc = vkg_test_proc_wait(&p, 60);
    int want = sig == SIGINT ? 128 + SIGINT : 75;
    if (rc != want)
        fail_msg("%s: exit code %d after signal %d, expected %d; stderr:\n%s", name, rc, sig, want,
                 p.buf[1]);
    expect_contains("stdout", p.buf[0], "stopping");
    const char *ck = strstr(p.buf[0], "checkpoint /"); /* the path, written once saved */
    assert_non_null(ck);
    char done[CAP + 64];
    snprintf(done, sizeof done, "%.*s/DONE", (int)strcspn(ck + 11, "\n"), ck + 11);
    if (!file_exists(done))
        fail_msg("no complete checkpoint %s", done);
    vkg_test_proc_free(&p);
    expect_validation_clean();
}

/* SIGTERM during the final sample (a million tokens: hours) ends it at once with the text so
 * far: exit 75, "sample cut short", the sample printed. */
static void test_interrupted_sample(void **state)
{
    (void)state;
    const char *const train[] = {"train", "--data",       text_path, TINY, "--steps",
                                 "1",     "--sample-len", "1000000", NULL};
    vkg_test_proc p;
    vkg_test_proc_start(&p, train, NULL);
    if (!vkg_test_proc_pump(&p, 120, "sampling 1000000 tokens")) {
        vkg_test_proc_kill(&p);
        fail_msg("no final sample; stdout:\n%s\nstderr:\n%s", p.buf[0], p.buf[1]);
    }
    assert_int_equal(kill(p.pid, SIGTERM), 0);
    int rc = vkg_test_proc_wait(&p, 60);
    if (rc != 75)
        fail_msg("exit code %d after SIGTERM during the sample, expected 75; stderr:\n%s", rc,
                 p.buf[1]);
    expect_contains("stdout", p.buf[0], "--- sample ---");
    expect_contains("stdout", p.buf[0], "sample cut short by signal 15");
    vkg_test_proc_free(&p);
    expect_validation_clean();
}

static void test_interrupted_exit_codes(void **state)
{
    (void)state;
    stop_with(SIGTERM, 0, "term");
    stop_with(SIGINT, 0, "int");
    stop_with(SIGTERM, 1, "launch_term");
    stop_with(SIGINT, 1, "launch_int");
    stop_with(SIGUSR1, 0, "usr1");
    stop_with(SIGUSR1, 1, "launch_usr1");
}

/* ---- --help ---------------------------------------------------------------------------------- */

/* The line of flag in help ("  --lr  ...\n"), copied into line; fails when there is none. */
static void flag_line(const char *help, const char *flag, char *line, size_t cap)
{
    char head[80];
    snprintf(head, sizeof head, "\n  %.64s ", flag);
    const char *at = strstr(help, head);
    if (!at)
        fail_msg("--help has no line for %s:\n%s", flag, help);
    at += 1;
    snprintf(line, cap, "%.*s", (int)strcspn(at, "\n"), at);
}

static void expect_default(const char *help, const char *flag, const char *value)
{
    char line[1024], want[128];
    flag_line(help, flag, line, sizeof line);
    snprintf(want, sizeof want, "(default: %s)", value);
    size_t n = strlen(line), w = strlen(want);
    if (n < w || strcmp(line + n - w, want))
        fail_msg("%s's line does not end in '%s':\n%s", flag, want, line);
}

static void test_help_defaults(void **state)
{
    (void)state;
    const vkg_train_config d = vkg_train_config_default();
    const struct {
        const char *flag;
        double value;
    } numbers[] = {
        {"--layers", d.layers},
        {"--heads", d.heads},
        {"--channels", d.channels},
        {"--ctx", d.max_seq_len},
        {"--batch", d.batch},
        {"--seq", d.seq},
        {"--steps", d.steps},
        {"--lr", d.lr},
        {"--warmup", d.warmup},
        {"--lr-min-frac", d.lr_min_frac},
        {"--weight-decay", d.weight_decay},
        {"--beta1", d.beta1},
        {"--beta2", d.beta2},
        {"--eps", d.eps},
        {"--grad-clip", d.grad_clip},
        {"--eval-batches", d.eval_batches},
        {"--keep", d.keep_checkpoints},
        {"--seed", (double)d.seed},
    };
    /* Flags without a default: what they name must be given, or they switch something on. */
    static const char *const none[] = {
        "--data",       "--val-data",   "--vocab-dir",       "--init",       "--trace",
        "--ckpt-dir",   "--resume",     "--resume-fallback", "--validation", "--quiet",
        "--rank-batch", "--no-overlap", "--listen-all"};
    const char *const plain[] = {"train", "--help", NULL};
    const char *const after[] = {"train",   "--lr", "1",      "--steps", "5",
                                 "--top-k", "3",    "--help", NULL};
    for (int k = 0; k < 2; k++) {
        vkg_test_proc p;
        assert_int_equal(run(&p, k ? after : plain, NULL), 0);
        const char *help = p.buf[0];
        for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
            char v[64];
            snprintf(v, sizeof v, "%g", numbers[i].value);
            expect_default(help, numbers[i].flag, v);
        }
        expect_default(help, "--schedule", "cosine");
        expect_default(help, "--sample-len", "200");
        expect_default(help, "--temperature", "0.8");
        expect_default(help, "--top-k", "40");
        expect_default(help, "--sample-every", "0");
        /* every other flag states its default, or is one of those that have none */
        for (const char *l = strstr(help, "\n  -"); l; l = strstr(l + 1, "\n  -")) {
            char flag[64], line[1024];
            snprintf(flag, sizeof flag, "%.*s", (int)strcspn(l + 3, " "), l + 3);
            flag_line(help, flag, line, sizeof line);
            int exempt = 0;
            for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
                exempt |= !strcmp(flag, none[i]);
            if (!exempt && !strstr(line, "default"))
                fail_msg("%s shows no default:\n%s", flag, line);
        }
        vkg_test_proc_free(&p);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_paths),
        cmocka_unit_test(test_error_text_and_verbose),
        cmocka_unit_test(test_run_folders_and_progress),
        cmocka_unit_test(test_bench_ops_header_first),
        cmocka_unit_test(test_interrupted_sample),
        cmocka_unit_test(test_interrupted_exit_codes),
        cmocka_unit_test(test_help_defaults),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
