/* Pipeline statistics (src/vk/pipestats.c) on whatever device is present, with the validation
 * layer on: where the driver has VK_KHR_pipeline_executable_properties, every pipeline an op used
 * in a window is listed with at least one named statistic, and only those; where it has not, the
 * device still opens and runs ops, and asking for statistics fails with a message naming the
 * extension. Each test asserts the branch the device takes. A device opened without asking has
 * none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "ops/ops.h"
#include "vk/pipestats.h"

#define N 1000 /* elements of the element-wise inputs; rows x C = 10 x 100 for the layernorm */

static int group_setup(void **state)
{
    vkg_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = getenv("VKGPT_DEVICE");
    opts.validation = 1;
    opts.profiling = 1;
    opts.pipeline_stats = 1;
    vkg_status st = vkg_device_create(&opts, &g->dev);
    if (st != VKG_OK) {
        fprintf(stderr, "cannot open a Vulkan device with validation: %s: %s\n",
                vkg_status_name(st), vkg_error_message());
        free(g);
        return -1;
    }
    *state = g;
    return 0;
}

/* Record gelu_fwd and (with_ln) layernorm_fwd on fresh tensors, run them. */
static void run_ops(vkg_gpu *g, int with_ln)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 7);
    float *x = vkg_test_random(&r, N, -1.0f, 1.0f);
    vkg_tensor in = vkg_gpu_upload(g, x, N * sizeof(float)), out = vkg_gpu_poisoned(g, N);
    VKG_ASSERT_OK(vkg_op_gelu_fwd(g->cmd, out, in, N));
    if (with_ln) {
        float ones[100], zeros[100];
        for (int i = 0; i < 100; i++)
            ones[i] = 1.0f, zeros[i] = 0.0f;
        vkg_tensor w = vkg_gpu_upload(g, ones, sizeof ones),
                   b = vkg_gpu_upload(g, zeros, sizeof zeros);
        vkg_tensor y = vkg_gpu_poisoned(g, N), mean = vkg_gpu_poisoned(g, 10),
                   rstd = vkg_gpu_poisoned(g, 10);
        VKG_ASSERT_OK(vkg_op_layernorm_fwd(g->cmd, y, mean, rstd, in, w, b, 10, 100));
    }
    vkg_gpu_run(g);
    float got[4];
    vkg_gpu_download(g, out, got, sizeof got);
    assert_true(got[0] == got[0]); /* the op ran: its output is no longer the NaN poison */
    free(x);
}

/* Every listed pipeline has an executable, and each executable a named statistic with a value. */
static void expect_named_stats(const vkg_pipestats *p, int n)
{
    for (int i = 0; i < n; i++) {
        if (p[i].nexec < 1)
            fail_msg("pipeline of %s: no executable listed", vkg__kernel_name(p[i].kernel));
        for (int e = 0; e < p[i].nexec; e++) {
            const vkg_pipestat_exec *x = &p[i].exec[e];
            if (x->nstats < 1)
                fail_msg("pipeline of %s, executable %s: no statistic",
                         vkg__kernel_name(p[i].kernel), x->name);
            for (int s = 0; s < x->nstats; s++) {
                assert_true(x->stats[s].name[0] != '\0');
                assert_true(x->stats[s].value[0] != '\0');
            }
            printf("%s: %s %s ...\n", vkg__kernel_name(p[i].kernel), x->stats[0].name,
                   x->stats[0].value);
        }
    }
}

/* 1 when kernel k is among the n pipelines. */
static int has_kernel(const vkg_pipestats *p, int n, vkg_kernel_id k)
{
    for (int i = 0; i < n; i++)
        if (p[i].kernel == k)
            return 1;
    return 0;
}

/* The statistics of the two ops' pipelines, or the statement that there are none. */
static void test_stats_or_absence(void **state)
{
    vkg_gpu *g = *state;
    vkg_pipestats_mark(g->dev);
    run_ops(g, 1);
    vkg_pipestats *p = NULL;
    int n = -1;
    vkg_status st = vkg_pipestats_collect(g->dev, &p, &n);
    if (vkg_pipestats_enabled(g->dev)) {
        VKG_ASSERT_OK(st);
        assert_null(vkg_pipestats_absence(g->dev));
        assert_true(n >= 2);
        assert_true(has_kernel(p, n, VKG_KERNEL_gelu_fwd));
        assert_true(has_kernel(p, n, VKG_KERNEL_layernorm_fwd));
        expect_named_stats(p, n);
    } else {
        vkg_expect_error(st, VKG_ERR_UNSUPPORTED, "VK_KHR_pipeline_executable_properties");
        vkg_expect_error(st, VKG_ERR_UNSUPPORTED, "gives no pipeline statistics");
        const char *why = vkg_pipestats_absence(g->dev);
        assert_non_null(why);
        assert_non_null(strstr(why, "the driver gives no pipeline statistics"));
        assert_int_equal(n, 0);
        assert_null(p);
    }
    free(p);
}

/* A window lists the pipelines used in it, reused ones too, and no others. */
static void test_window(void **state)
{
    vkg_gpu *g = *state;
    run_ops(g, 1); /* both pipelines built before the window */
    vkg_pipestats_mark(g->dev);
    run_ops(g, 0); /* gelu's reused */
    vkg_pipestats *p = NULL;
    int n = -1;
    vkg_status st = vkg_pipestats_collect(g->dev, &p, &n);
    if (vkg_pipestats_enabled(g->dev)) {
        VKG_ASSERT_OK(st);
        assert_int_equal(n, 1);
        assert_int_equal(p[0].kernel, VKG_KERNEL_gelu_fwd);
        expect_named_stats(p, n);
        free(p);
        vkg_pipestats_mark(g->dev); /* nothing recorded since */
        VKG_ASSERT_OK(vkg_pipestats_collect(g->dev, &p, &n));
        assert_int_equal(n, 0);
        assert_null(p);
    } else {
        vkg_expect_error(st, VKG_ERR_UNSUPPORTED, "VK_KHR_pipeline_executable_properties");
        assert_int_equal(n, 0);
    }
    free(p);
}

/* Without opts.pipeline_stats a device captures nothing and says it was not asked. */
static void test_not_asked(void **state)
{
    (void)state;
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = getenv("VKGPT_DEVICE");
    opts.validation = 1;
    vkg_device_t *dev = NULL;
    VKG_ASSERT_OK(vkg_device_create(&opts, &dev));
    assert_int_equal(vkg_pipestats_enabled(dev), 0);
    assert_non_null(strstr(vkg_pipestats_absence(dev), "not asked for"));
    vkg_pipestats *p = NULL;
    int n = -1;
    vkg_expect_error(vkg_pipestats_collect(dev, &p, &n), VKG_ERR_UNSUPPORTED, "not asked for");
    const char *first = NULL;
    int msgs = vkg_device_validation_messages(dev, &first);
    vkg_device_destroy(&dev);
    if (msgs)
        fail_msg("validation layer: %s", first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stats_or_absence, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test_setup_teardown(test_window, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_not_asked),
    };
    return cmocka_run_group_tests(tests, group_setup, vkg_gpu_group_teardown);
}
