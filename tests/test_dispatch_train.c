/* Training under a lowered shader index limit, through the built binary (VKGPT_BIN): `vkgpt train`
 * on a tiny model (2 layers, 2 heads, C = 32, T = 32, B = 4, byte vocabulary) for 3 steps, once
 * with the default limit and once with VKG_MAX_DISPATCH_ELEMS=3072: the model and state files of
 * the final checkpoints must be byte for byte the same, and so must every step's loss and gradient
 * norm in the two logs. 3072 is one batch's qkv (T*3C), the longest row this model has; everything
 * larger splits or takes its wide kernels: the zeroing of the gradient activations, the logits
 * (4 x 32 x 384), wte and its gradient, the attention over batches, every (B*T, 4C) activation,
 * the optimizer's flat tensors. That the variable reaches the trainer's ops shows in two refusals:
 * a limit of 300 (below one batch of qkv) stops training with an error naming attention_fwd, and a
 * value that is not a number stops it with an error naming the variable and the value. Every run is
 * under the Khronos validation layer (forced on through the loader, logging to a file), which must
 * be active and report nothing. */
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

#define CAP 512
static char tmp_root[CAP - 100], text_path[CAP], vlog_path[CAP];

/* The last run had the validation layer active and it reported nothing; the log is removed. */
static void expect_validation_clean(void)
{
    char *log = vkg_test_read_file(vlog_path, NULL);
    if (!log || !strstr(log, "Validation Layer Active"))
        fail_msg("the validation layer was not active (its log %s: %s)", vlog_path,
                 log ? log : "missing");
    if (strstr(log, "ERROR") || strstr(log, "WARNING") || strstr(log, "PERF"))
        fail_msg("the validation layer reported:\n%s", log);
    free(log);
    unlink(vlog_path);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_dispatch_train"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    snprintf(vlog_path, sizeof vlog_path, "%s/validation.log", tmp_root);
    static const char *const words[] = {"the", "cat", "sat", "on",  "a",     "mat", "and", "dog",
                                        "ran", "to",  "big", "red", "house", "in",  "sun"};
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    uint64_t s = 2031;
    for (int line = 0; line < 800; line++) {
        for (int w = 0; w < 6; w++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            fprintf(f, "%s%s", w ? " " : "", words[(s >> 33) % 15]);
        }
        fprintf(f, ".\n");
    }
    fclose(f);
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
    unsetenv("VKG_MAX_DISPATCH_ELEMS"); /* the default run must have the default limit */
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* Train 3 steps into tmp_root/<dir> with VKG_MAX_DISPATCH_ELEMS=limit (NULL: unset); the exit
 * code, the output in *p (freed by the caller). */
static int train(vkg_test_proc *p, const char *dir, const char *limit)
{
    char ckpt[CAP + 32], env[64];
    snprintf(ckpt, sizeof ckpt, "%s/%s", tmp_root, dir);
    const char *const args[] = {
        "train",      "--data", text_path,      "--layers", "2",       "--heads", "2",
        "--channels", "32",     "--ctx",        "32",       "--batch", "4",       "--seq",
        "32",         "--lr",   "3e-3",         "--seed",   "7",       "--steps", "3",
        "--ckpt-dir", ckpt,     "--sample-len", "0",        NULL};
    snprintf(env, sizeof env, "VKG_MAX_DISPATCH_ELEMS=%s", limit ? limit : "");
    const char *const envs[] = {env, NULL};
    vkg_test_proc_opts opts = {.env = limit ? envs : NULL};
    vkg_test_proc_start(p, args, &opts);
    return vkg_test_proc_wait(p, 300);
}

/* The lines of tmp_root/<dir>/log.jsonl with their timing fields ("tokens_per_s", "ms") cut. */
static char *log_without_timing(const char *dir)
{
    char path[CAP + 64];
    snprintf(path, sizeof path, "%s/%s/log.jsonl", tmp_root, dir);
    char *log = vkg_test_read_file(path, NULL);
    if (!log)
        fail_msg("no log %s", path);
    for (char *cut; (cut = strstr(log, ",\"tokens_per_s\""));) {
        char *end = strchr(cut, '}');
        assert_non_null(end);
        memmove(cut, end, strlen(end) + 1);
    }
    return log;
}

static void expect_same_file(const char *a_dir, const char *b_dir, const char *name)
{
    char a[CAP + 64], b[CAP + 64];
    snprintf(a, sizeof a, "%s/%s/step_00000003/%s", tmp_root, a_dir, name);
    snprintf(b, sizeof b, "%s/%s/step_00000003/%s", tmp_root, b_dir, name);
    size_t na, nb;
    char *x = vkg_test_read_file(a, &na), *y = vkg_test_read_file(b, &nb);
    if (!x || !y)
        fail_msg("missing %s or %s", a, b);
    if (na != nb || memcmp(x, y, na) != 0) {
        size_t i = 0;
        while (i < na && i < nb && x[i] == y[i])
            i++;
        fail_msg("%s: %zu and %zu bytes, first difference at byte %zu", name, na, nb, i);
    }
    print_message("    %s: %zu bytes, the same\n", name, na);
    free(x);
    free(y);
}

static void test_split_training_is_bitwise_the_same(void **state)
{
    (void)state;
    vkg_test_proc p;
    assert_int_equal(train(&p, "default", NULL), 0);
    expect_validation_clean();
    vkg_test_proc_free(&p);
    assert_int_equal(train(&p, "split", "3072"), 0);
    printf("%s", p.buf[0]);
    expect_validation_clean();
    vkg_test_proc_free(&p);

    expect_same_file("default", "split", "model.bin");
    expect_same_file("default", "split", "state.bin");
    char *a = log_without_timing("default"), *b = log_without_timing("split");
    print_message("    log without timing:\n%s", a);
    if (strcmp(a, b) != 0)
        fail_msg("the logs differ:\ndefault:\n%s\nsplit:\n%s", a, b);
    assert_non_null(strstr(a, "\"step\":3,\"loss\":"));
    free(a);
    free(b);
}

static void test_limits_that_stop_training(void **state)
{
    (void)state;
    vkg_test_proc p;
    int rc = train(&p, "one_batch_too_many", "300");
    if (rc == 0 || !strstr(p.buf[1], "attention_fwd: one batch needs T*3C = 3072 elements of qkv "
                                     "(T=32 C=32), more than the 300"))
        fail_msg("limit 300: exit %d, stderr:\n%s", rc, p.buf[1]);
    expect_validation_clean();
    vkg_test_proc_free(&p);

    rc = train(&p, "not_a_number", "3k");
    if (rc == 0 || !strstr(p.buf[1], "VKG_MAX_DISPATCH_ELEMS=\"3k\" is not a positive integer"))
        fail_msg("limit 3k: exit %d, stderr:\n%s", rc, p.buf[1]);
    expect_validation_clean();
    vkg_test_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_training_is_bitwise_the_same),
        cmocka_unit_test(test_limits_that_stop_training),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
