/* `vkgpt bench ops` end to end, under the Khronos validation layer (forced on through the loader,
 * logging to a file that must hold no error or warning):
 *  - the header says whether the driver gives pipeline statistics, with the reason the device
 *    itself gives when it does not, and the run still succeeds; where it does, every row is
 *    followed by at least one pipeline line carrying a named statistic;
 *  - the fused forms' section has, for matmul_fwd_gelu and residual_layernorm_fwd, the fused
 *    form beside its two ops in fp32 and in bf16, at B = 4, T = 64 and (the layernorm) at the
 *    training shape B = 8, T = 1024, and its ratio columns are the printed times' ratios;
 *  - the Llama-family ops (RMSNorm, ReLU^2, SwiGLU, RoPE, QK-norm) have their rows, timed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testproc.h"
#include "testutil.h"
#include "vk/pipestats.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 512

static char tmp_root[CAP - 100], vlog_path[CAP];

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_bench_ops"))
        return -1;
    snprintf(vlog_path, sizeof vlog_path, "%s/validation.log", tmp_root);
    return vkg_test_validation_force(tmp_root, vlog_path, 0);
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* Run bench ops with these arguments (after "bench", "ops"); its stdout, which the caller
 * frees. Fails the test unless it exits 0 with a clean validation log. */
static char *bench_ops(const char *const *extra)
{
    const char *args[16] = {"bench", "ops"};
    int n = 2;
    while (*extra && n < 15)
        args[n++] = *extra++;
    args[n] = NULL;
    vkg_test_proc p;
    vkg_test_proc_start(&p, args, NULL);
    int rc = vkg_test_proc_wait(&p, 500);
    if (rc != 0)
        fail_msg("bench ops exited %d; stdout:\n%s\nstderr:\n%s", rc, p.buf[0], p.buf[1]);
    vkg_test_validation_clean(vlog_path, 1);
    char *out = strdup(p.buf[0]);
    vkg_test_proc_free(&p);
    assert_non_null(out);
    return out;
}

/* What the device the bench opens says about statistics: NULL when it gives them, else why not
 * (the same device, opened here with statistics asked for and the validation layer on). */
static const char *device_absence(int *enabled)
{
    static char why[256];
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = getenv("VKGPT_DEVICE");
    opts.validation = 1;
    opts.pipeline_stats = 1;
    vkg_device_t *dev = NULL;
    if (vkg_device_create(&opts, &dev) != VKG_OK)
        fail_msg("cannot open the device: %s", vkg_error_message());
    *enabled = vkg_pipestats_enabled(dev);
    snprintf(why, sizeof why, "%s", *enabled ? "" : vkg_pipestats_absence(dev));
    vkg_device_destroy(&dev);
    return *enabled ? NULL : why;
}

/* The statistics header and lines follow what the device gives, and the run succeeds. */
static void test_stats_lines(void **state)
{
    (void)state;
    int enabled = 0;
    const char *why = device_absence(&enabled);
    const char *const args[] = {"--op", "layernorm_fwd", "--iters", "1", NULL};
    char *out = bench_ops(args);
    int rows = 0;
    if (!enabled) {
        char want[300];
        snprintf(want, sizeof want, "# pipeline statistics: none: %s\n", why);
        if (!strstr(out, want))
            fail_msg("no line '%s' in:\n%s", want, out);
        assert_non_null(strstr(why, "the driver gives no pipeline statistics ("));
        assert_null(strstr(out, "\n#   "));
    } else {
        assert_non_null(strstr(out, "# pipeline statistics: after each row"));
    }
    /* each row (a line starting with an op name that has a time) */
    for (const char *line = out; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        if (strncmp(line, "layernorm_fwd ", 14) && strncmp(line, "residual_", 9))
            continue;
        rows++;
        const char *next = strchr(line, '\n');
        assert_non_null(next);
        if (enabled) { /* a pipeline line: "#   kernel [...], executable (subgroup S): name value"
                        */
            if (strncmp(next + 1, "#   ", 4) || !strstr(next + 1, "(subgroup "))
                fail_msg("row without pipeline statistics:\n%.*s", (int)(next - line), line);
            const char *colon = strstr(next + 1, "): ");
            assert_non_null(colon);
            assert_true(colon[3] != '\n' && strncmp(colon + 3, "the driver names no", 19));
        }
    }
    assert_int_equal(rows, 1 + 12); /* the table's layernorm_fwd row, the fused section's 12 */
    free(out);
}

/* The numbers after `tag` on the row of op with type ("fp32", "bf16"): ms and the two ratio
 * columns (NAN for "-"). Fails the test when the row is missing. */
static void row_of(const char *out, const char *op, const char *type, const char *tag, double *ms,
                   double *fused, double *bf16)
{
    char head[128];
    snprintf(head, sizeof head, "\n%-22s %-4s %s ", op, type, tag);
    const char *at = strstr(out, head);
    if (!at)
        fail_msg("no row '%s' in:\n%s", head + 1, out);
    double gflops, gbs;
    char r1[32], r2[32];
    if (sscanf(at + strlen(head), "%lf %lf %lf %31s %31s", ms, &gflops, &gbs, r1, r2) != 5)
        fail_msg("row '%s' does not have five columns", head + 1);
    *fused = strcmp(r1, "-") ? atof(r1) : NAN;
    *bf16 = strcmp(r2, "-") ? atof(r2) : NAN;
    assert_true(*ms > 0);
}

/* A ratio as printed (three decimals) against the times it is made of. */
static void expect_ratio(const char *what, double printed, double want)
{
    if (!(fabs(printed - want) <= 0.002 + 0.01 * want))
        fail_msg("%s: printed %.3f, the printed times give %.4f", what, printed, want);
}

/* Each fused form's group: its three rows in fp32 and bf16, ratios from the printed times. */
static void expect_group(const char *out, const char *const ops[3], const char *tag)
{
    double ms[2][3], fused[2][3], bf16[2][3];
    static const char *const types[2] = {"fp32", "bf16"};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 3; i++)
            row_of(out, ops[i], types[d], tag, &ms[d][i], &fused[d][i], &bf16[d][i]);
    for (int d = 0; d < 2; d++) {
        assert_true(isnan(fused[d][0]) && isnan(fused[d][1]));
        expect_ratio("fused/pair", fused[d][2], ms[d][2] / (ms[d][0] + ms[d][1]));
        for (int i = 0; i < 3; i++) {
            if (d == 0)
                assert_true(isnan(bf16[d][i]));
            else
                expect_ratio("bf16/fp32", bf16[d][i], ms[1][i] / ms[0][i]);
        }
    }
}

static void test_fused_rows(void **state)
{
    (void)state;
    const char *const fc_args[] = {"--op", "matmul_fwd_gelu", "--shape", "B4 T64", "--iters", "1",
                                   NULL};
    char *out = bench_ops(fc_args);
    static const char *const fc[3] = {"matmul_fwd", "gelu_fwd", "matmul_fwd_gelu"};
    expect_group(out, fc, "gpt2 fc B4 T64");
    assert_null(strstr(out, "B8 T1024")); /* --shape left the training shape out */
    free(out);
    const char *const ln_args[] = {"--op", "residual_layernorm", "--iters", "1", NULL};
    out = bench_ops(ln_args);
    static const char *const ln[3] = {"residual_fwd", "layernorm_fwd", "residual_layernorm_fwd"};
    expect_group(out, ln, "gpt2 B4 T64");
    expect_group(out, ln, "gpt2 B8 T1024");
    free(out);
}

/* The Llama-family rows (grouped-query attention, RMSNorm, ReLU^2, SwiGLU, RoPE, QK-norm): each
 * op's row at its llama shape, with a positive time, and --shape llama leaves GPT-2's rows out. */
static void test_llama_rows(void **state)
{
    (void)state;
    const char *const args[] = {"--shape", "llama", "--iters", "1", NULL};
    char *out = bench_ops(args);
    static const char *const ops[][2] = {
        {"attention_gqa_fwd", "llama B4 T256 NH12 NKV4 D64"},
        {"attention_gqa_bwd", "llama B4 T256 NH12 NKV4 D64"},
        {"rope_fwd", "llama B4 T64 NH12 NKV4 D64"},
        {"rope_bwd", "llama B4 T64 NH12 NKV4 D64"},
        {"qknorm_fwd", "llama B4 T64 NH12 NKV4 D64"},
        {"qknorm_bwd", "llama B4 T64 NH12 NKV4 D64"},
        {"rmsnorm_fwd", "llama 256x768"},
        {"rmsnorm_bwd", "llama 256x768"},
        {"relu2_fwd", "llama 256x3072"},
        {"relu2_bwd", "llama 256x3072"},
        {"swiglu_fwd", "llama 256x2048"},
        {"swiglu_bwd", "llama 256x2048"},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "\n%s ", ops[i][0]);
        const char *at = strstr(out, head), *tag = at ? strstr(at, ops[i][1]) : NULL;
        const char *eol = at ? strchr(at + 1, '\n') : NULL;
        if (!at || !tag || (eol && tag > eol))
            fail_msg("no row '%s' at '%s' in:\n%s", ops[i][0], ops[i][1], out);
        double ms = 0;
        if (sscanf(tag + strlen(ops[i][1]), "%lf", &ms) != 1 || !(ms > 0))
            fail_msg("row '%s' has no positive time", ops[i][0]);
    }
    assert_null(strstr(out, "gpt2"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_lines),
        cmocka_unit_test(test_fused_rows),
        cmocka_unit_test(test_llama_rows),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
