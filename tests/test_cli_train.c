/* `vkgpt train` and `vkgpt sample` end to end, through the built binary (VKGPT_BIN, set by CMake)
 * on a tiny byte-level model and a small text file written to a temporary folder:
 *  - on a pseudo-terminal, one live progress line (step, loss, tok/s, ETA) rewritten in place,
 *    and Ctrl-C (SIGINT) stops with a checkpoint; through pipes, plain lines without control codes;
 *  - SIGTERM during a long run: exits 75 (a preemption) within a bound, says it stopped, and leaves
 * a complete checkpoint whose step is the last logged step, written once although --ckpt-every 1
 * had just written it (log.jsonl ends there; old ones pruned by --keep 2);
 *  - `--resume` continues from that step to the end and writes the final checkpoint and log;
 *  - `vkgpt sample --ckpt DIR` (and one checkpoint) prints text, deterministic for a seed;
 *  - bad flags exit 2 naming the flag (`--schedule foo` lists the valid values), a total batch
 *    that does not divide, `--resume` without `--ckpt-dir`, missing devices and checkpoints.
 * Every Vulkan command runs under the Khronos validation layer, forced on through the loader
 * (VK_INSTANCE_LAYERS) with a settings file that logs to a file: each run must show the layer
 * active and report no error, warning or performance message. Every child is bounded in time
 * and reaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testproc.h"
#include "testutil.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 512
static char tmp_root[CAP - 100], text_path[CAP], ckpt_dir[CAP], vlog_path[CAP];

/* ---- child processes ------------------------------------------------------------------------- */

static void append(char **buf, size_t *n, const char *data, size_t len)
{
    char *nb = realloc(*buf, *n + len + 1);
    assert_non_null(nb);
    memcpy(nb + *n, data, len);
    *n += len;
    nb[*n] = '\0';
    *buf = nb;
}

/* Run vkgpt with args (NULL-terminated) to completion within timeout_s; returns the exit code. */
static int run(vkg_test_proc *p, double timeout_s, const char *const *args)
{
    vkg_test_proc_start(p, args, NULL);
    return vkg_test_proc_wait(p, timeout_s);
}

/* ---- the validation layer's log -------------------------------------------------------------- */

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The last command ran with the layer active (when it opened a device) and nothing reported. */
static void expect_validation_clean(int opened_device)
{
    char *log = vkg_test_read_file(vlog_path, NULL);
    if (opened_device && (!log || !strstr(log, "Validation Layer Active")))
        fail_msg("the validation layer was not active (its log %s: %s)", vlog_path,
                 log ? log : "missing");
    if (log && (strstr(log, "ERROR") || strstr(log, "WARNING") || strstr(log, "PERF")))
        fail_msg("the validation layer reported:\n%s", log);
    free(log);
    unlink(vlog_path);
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_cli"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/ckpt", tmp_root);
    snprintf(vlog_path, sizeof vlog_path, "%s/validation.log", tmp_root);
    /* Text: sentences from a small vocabulary, about 24 KB. */
    static const char *const words[] = {"the", "cat", "sat", "on",  "a",     "mat", "and", "dog",
                                        "ran", "to",  "big", "red", "house", "in",  "sun"};
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    uint64_t s = 12345;
    for (int line = 0; line < 800; line++) {
        for (int w = 0; w < 6; w++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            fprintf(f, "%s%s", w ? " " : "", words[(s >> 33) % 15]);
        }
        fprintf(f, ".\n");
    }
    fclose(f);
    /* Force the Khronos layer on for every child, logging to a file (synchronization checks on). */
    char settings[CAP];
    snprintf(settings, sizeof settings, "%s/vk_layer_settings.txt", tmp_root);
    f = fopen(settings, "w");
    if (!f)
        return -1;
    fprintf(f,
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
            "khronos_validation.log_filename = %s\n"
            "khronos_validation.report_flags = info,warn,error,perf\n"
            "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_"
            "VALIDATION_EXT\n",
            vlog_path);
    fclose(f);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation", 1);
    setenv("VK_LAYER_SETTINGS_PATH", tmp_root, 1);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* ---- helpers on outputs ---------------------------------------------------------------------- */

/* The number N of the last "step N/" line in out, or -1. */
static long last_step(const char *out)
{
    long last = -1;
    for (const char *p = out; (p = strstr(p, "step ")); p += 5)
        if ((p == out || p[-1] == '\n' || p[-1] == '\r') && strchr(p + 5, '/')) {
            char *end;
            long v = strtol(p + 5, &end, 10);
            if (end != p + 5 && *end == '/')
                last = v;
        }
    return last;
}

/* log.jsonl holds exactly steps 1..n, one per line. */
static void expect_log_steps(long n)
{
    char path[CAP + 16];
    snprintf(path, sizeof path, "%s/log.jsonl", ckpt_dir);
    char *log = vkg_test_read_file(path, NULL);
    assert_non_null(log);
    long line = 0;
    for (const char *p = log; *p; p = strchr(p, '\n') + 1) {
        assert_non_null(strchr(p, '\n'));
        line++;
        const char *sp = strstr(p, "\"step\":");
        assert_true(sp && sp < strchr(p, '\n'));
        assert_int_equal(strtol(sp + 7, NULL, 10), line);
    }
    assert_int_equal(line, n);
    free(log);
}

static void expect_checkpoint(long step)
{
    char path[CAP + 32];
    snprintf(path, sizeof path, "%s/step_%08ld/DONE", ckpt_dir, step);
    if (!file_exists(path))
        fail_msg("no complete checkpoint %s", path);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void expect_contains(const char *what, const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("%s does not contain '%s':\n%s", what, needle, hay);
}

/* ---- tests ----------------------------------------------------------------------------------- */

#define TRAIN_FLAGS                                                                                \
    "train", "--data", text_path, "--layers", "2", "--heads", "2", "--channels", "32", "--ctx",    \
        "32", "--batch", "4", "--seq", "32", "--lr", "3e-3", "--seed", "7", "--ckpt-dir",          \
        ckpt_dir, "--ckpt-every", "1", "--keep", "2"

static void test_sigterm_resume_sample(void **state)
{
    (void)state;
    vkg_test_proc p;
    /* A run far longer than the test, stopped by SIGTERM once a few steps are logged. */
    const char *const train[] = {TRAIN_FLAGS, "--steps", "100000", "--sample-len", "0", NULL};
    vkg_test_proc_start(&p, train, NULL);
    if (!vkg_test_proc_pump(&p, 120, "step 3/")) {
        vkg_test_proc_kill(&p);
        fail_msg("no third step logged; stdout:\n%s\nstderr:\n%s", p.buf[0], p.buf[1]);
    }
    assert_int_equal(kill(p.pid, SIGTERM), 0);
    double sent = vkg_test_now();
    int rc = vkg_test_proc_wait(&p, 60);
    printf("exited %d, %.1f s after SIGTERM\n%s", rc, vkg_test_now() - sent, p.buf[0]);
    assert_int_equal(rc, 75); /* a preemption: saved, not finished, to resume */
    expect_contains("stdout", p.buf[0], "stopping");
    expect_contains("stdout", p.buf[0], "signal 15");
    assert_null(strstr(p.buf[0], "\033[")); /* off a terminal: plain lines, no control codes */
    long n = last_step(p.buf[0]);
    assert_true(n >= 3);
    char line[CAP + 64];
    snprintf(line, sizeof line, "checkpoint %s/step_%08ld\n", ckpt_dir, n);
    assert_int_equal(count(p.buf[0], line), 1); /* periodic (every step) and final: written once */
    expect_checkpoint(n);
    expect_log_steps(n);
    expect_validation_clean(1);
    /* --keep 2: at most two checkpoint folders remain. */
    int dirs = 0;
    for (long s = 1; s <= n; s++) {
        char d[CAP + 32];
        snprintf(d, sizeof d, "%s/step_%08ld", ckpt_dir, s);
        dirs += file_exists(d);
    }
    assert_true(dirs >= 1 && dirs <= 2);
    vkg_test_proc_free(&p);

    /* --resume continues from step n to n + 3. */
    char steps[32], first[64], final[64], resumed[64];
    snprintf(steps, sizeof steps, "%ld", n + 3);
    snprintf(first, sizeof first, "\nstep %ld/%ld ", n + 1, n + 3);
    snprintf(final, sizeof final, "\nstep %ld/%ld ", n + 3, n + 3);
    snprintf(resumed, sizeof resumed, "resumed at step %ld\n", n);
    const char *const again[] = {TRAIN_FLAGS,    "--steps", steps, "--resume",
                                 "--sample-len", "16",      NULL};
    assert_int_equal(run(&p, 120, again), 0);
    printf("%s", p.buf[0]);
    expect_contains("stdout", p.buf[0], resumed);
    expect_contains("stdout", p.buf[0], first);
    expect_contains("stdout", p.buf[0], final);
    expect_contains("stdout", p.buf[0], "--- sample ---");
    assert_int_equal(last_step(p.buf[0]), n + 3);
    snprintf(line, sizeof line, "\nstep %ld/", n); /* no step repeated */
    assert_null(strstr(p.buf[0], line));
    expect_checkpoint(n + 3);
    expect_log_steps(n + 3);
    expect_validation_clean(1);
    vkg_test_proc_free(&p);

    /* Sampling from the folder and from one checkpoint, same seed: the same text. */
    const char *const sample[] = {"sample",   "--ckpt", ckpt_dir, "--len", "24",
                                  "--prompt", "the ",   "--seed", "3",     NULL};
    assert_int_equal(run(&p, 60, sample), 0);
    printf("sample: [%s]\n", p.buf[0]);
    assert_int_equal(strncmp(p.buf[0], "the ", 4), 0);
    assert_true(p.len[0] > 4 + 1);
    expect_validation_clean(1);
    char one[CAP + 32];
    snprintf(one, sizeof one, "%s/step_%08ld", ckpt_dir, n + 3);
    const char *const sample1[] = {"sample",   "--ckpt", one,      "--len", "24",
                                   "--prompt", "the ",   "--seed", "3",     NULL};
    vkg_test_proc q;
    assert_int_equal(run(&q, 60, sample1), 0);
    assert_string_equal(p.buf[0], q.buf[0]);
    expect_validation_clean(1);
    vkg_test_proc_free(&p);
    vkg_test_proc_free(&q);
}

/* On a terminal (a pseudo-terminal here) train draws one live line, rewritten in place, with the
 * step, loss, tokens/s and ETA; Ctrl-C (SIGINT) stops it like SIGTERM, with a checkpoint. */
static void test_terminal_progress_and_sigint(void **state)
{
    (void)state;
    char dir[CAP + 16], steps_dir[CAP + 64];
    snprintf(dir, sizeof dir, "%s/tty", tmp_root);
    const char *argv[] = {VKGPT_BIN,      "train", "--data",     text_path, "--layers", "2",
                          "--heads",      "2",     "--channels", "32",      "--ctx",    "32",
                          "--batch",      "4",     "--seq",      "32",      "--steps",  "100000",
                          "--sample-len", "0",     "--ckpt-dir", dir,       NULL};
    int master = -1;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        execv(VKGPT_BIN, (char *const *)argv);
        _exit(127);
    }
    char *out = calloc(1, 1);
    size_t n = 0;
    double t0 = vkg_test_now();
    int sent = 0, done = 0;
    while (!done && vkg_test_now() < t0 + 120) {
        struct pollfd pfd = {.fd = master, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0) {
            char chunk[4096];
            ssize_t got = read(master, chunk, sizeof chunk);
            if (got > 0)
                append(&out, &n, chunk, (size_t)got);
            else
                done = 1; /* EIO once the child is gone */
        }
        if (!sent && strstr(out, "step 3/")) {
            assert_int_equal(kill(pid, SIGINT), 0);
            sent = 1;
        }
    }
    int st = 0;
    if (!done)
        kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(master);
    printf("%s\n", out);
    if (!done)
        fail_msg("vkgpt train on a terminal did not finish in time");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT);
    expect_contains("terminal output", out, "\r\033[Kstep 2/100000 | loss ");
    expect_contains("terminal output", out, " tok/s | ETA ");
    expect_contains("terminal output", out, " | elapsed ");
    expect_contains("terminal output", out, "stopping");
    expect_contains("terminal output", out, "signal 2");
    assert_null(strstr(out, "\nstep 2/")); /* the live line is rewritten, not one per step */
    long last = 0;
    for (const char *q = out; (q = strstr(q, "\r\033[Kstep ")); q++)
        last = strtol(q + 9, NULL, 10);
    assert_true(last >= 3);
    snprintf(steps_dir, sizeof steps_dir, "%s/step_%08ld/DONE", dir, last);
    if (!file_exists(steps_dir))
        fail_msg("no complete checkpoint %s after SIGINT", steps_dir);
    expect_validation_clean(1);
    free(out);
}

/* Run args; expect exit code want and stderr naming each of the NULL-terminated needles. */
static void expect_refusal(int want, const char *const *args, const char *n1, const char *n2)
{
    vkg_test_proc p;
    int rc = run(&p, 60, args);
    if (rc != want)
        fail_msg("exit code %d, expected %d; stderr: %s", rc, want, p.buf[1]);
    expect_contains("stderr", p.buf[1], n1);
    if (n2)
        expect_contains("stderr", p.buf[1], n2);
    expect_validation_clean(0);
    vkg_test_proc_free(&p);
}

static void test_bad_flags(void **state)
{
    (void)state;
    const char *const schedule[] = {"train", "--data", text_path, "--schedule", "foo", NULL};
    expect_refusal(2, schedule, "--schedule", "cosine, linear, constant");
    const char *const lr[] = {"train", "--data", text_path, "--lr", "fast", NULL};
    expect_refusal(2, lr, "--lr", "fast");
    const char *const batch[] = {"train", "--data", text_path, "--batch", "0", NULL};
    expect_refusal(2, batch, "--batch", NULL);
    const char *const unknown[] = {"train", "--data", text_path, "--bogus", NULL};
    expect_refusal(2, unknown, "--bogus", NULL);
    const char *const novalue[] = {"train", "--data", text_path, "--steps", NULL};
    expect_refusal(2, novalue, "--steps", NULL);
    const char *const nodata[] = {"train", "--steps", "3", NULL};
    expect_refusal(2, nodata, "--data", NULL);
    const char *const total[] = {"train", "--data",  text_path, "--layers",      "1",  "--channels",
                                 "32",    "--heads", "2",       "--ctx",         "16", "--batch",
                                 "2",     "--seq",   "16",      "--total-batch", "40", NULL};
    expect_refusal(2, total, "--total-batch", "40");
    const char *const resume[] = {"train", "--data", text_path, "--layers", "1", "--resume", NULL};
    expect_refusal(2, resume, "--ckpt-dir", NULL);
    const char *const device[] = {"train", "--data", text_path, "--device", "99", NULL};
    expect_refusal(2, device, "99", NULL);
    const char *const devices[] = {"devices", "--device", "99", NULL};
    expect_refusal(2, devices, "99", NULL);
    char missing[CAP + 16];
    snprintf(missing, sizeof missing, "%s/none", tmp_root);
    const char *const nockpt[] = {"sample", "--ckpt", missing, NULL};
    expect_refusal(2, nockpt, missing, NULL);
    const char *const temp[] = {"sample", "--ckpt", missing, "--temperature", "hot", NULL};
    expect_refusal(2, temp, "--temperature", NULL);
    vkg_test_proc p;
    const char *const help[] = {"train", "--help", NULL};
    assert_int_equal(run(&p, 30, help), 0);
    expect_contains("train --help", p.buf[0], "--total-batch");
    expect_contains("train --help", p.buf[0], "cosine|linear|constant");
    vkg_test_proc_free(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_resume_sample),
        cmocka_unit_test(test_terminal_progress_and_sigint),
        cmocka_unit_test(test_bad_flags),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
