/* GPU test fixture (see gpu_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_fixture.h"
#include "ops/ops.h"
#include "testutil.h"

#define FIXTURE_ARENA_BYTES ((size_t)256 << 20)

int vkg_gpu_group_setup(void **state)
{
    return vkg_gpu_group_setup_coopmat(state, VKG_COOPMAT_OFF);
}

int vkg_gpu_group_setup_coopmat(void **state, vkg_coopmat_mode coopmat)
{
    vkg_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = getenv("VKGPT_DEVICE");
    opts.validation = 1;
    opts.profiling = 1;
    opts.coopmat = coopmat;
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

int vkg_gpu_group_teardown(void **state)
{
    vkg_gpu *g = *state;
    int n = 0;
    char first[1024];
    if (g) {
        n = vkg_device_destroy_report(&g->dev, first, sizeof first);
        free(g);
    }
    if (n) { /* what the tests' teardowns had not seen: reported while the device was destroyed */
        fprintf(stderr, "validation layer reported %d message(s) by the device's end; first: %s\n",
                n, first);
        return -1; /* cmocka fails the group */
    }
    return 0;
}

int vkg_gpu_setup(void **state)
{
    vkg_gpu *g = *state;
    if (vkg_arena_create(g->dev, FIXTURE_ARENA_BYTES, "test", &g->arena) != VKG_OK ||
        vkg_cmd_create(g->dev, &g->cmd) != VKG_OK || vkg_cmd_begin(g->cmd) != VKG_OK) {
        fprintf(stderr, "fixture setup: %s\n", vkg_error_message());
        return -1;
    }
    return 0;
}

int vkg_gpu_teardown(void **state)
{
    vkg_gpu *g = *state;
    vkDeviceWaitIdle(g->dev->device);
    vkg_cmd_destroy(&g->cmd);
    vkg_arena_destroy(&g->arena);
    const char *first;
    int n = vkg_device_validation_messages(g->dev, &first);
    if (n) {
        fprintf(stderr, "validation layer reported %d message(s); first: %s\n", n, first);
        atomic_store(&g->dev->validation_count, 0);
        return -1; /* cmocka fails the test when its teardown fails */
    }
    return 0;
}

static vkg_tensor guard_of(vkg_tensor t)
{
    t.addr += t.bytes, t.offset += t.bytes;
    t.bytes = VKG_GPU_GUARD * sizeof(float);
    return t;
}

vkg_tensor vkg_gpu_upload(vkg_gpu *g, const void *src, size_t bytes)
{
    vkg_tensor t;
    float guard[VKG_GPU_GUARD];
    for (int i = 0; i < VKG_GPU_GUARD; i++)
        guard[i] = NAN;
    VKG_ASSERT_OK(vkg_arena_alloc(g->arena, bytes + sizeof guard, &t));
    t.bytes = bytes;
    if (src)
        VKG_ASSERT_OK(vkg_tensor_write(g->dev, t, 0, src, bytes));
    VKG_ASSERT_OK(vkg_tensor_write(g->dev, guard_of(t), 0, guard, sizeof guard));
    return t;
}

int vkg_gpu_guard_intact(vkg_gpu *g, vkg_tensor t, int *first_bad)
{
    float tail[VKG_GPU_GUARD];
    VKG_ASSERT_OK(vkg_tensor_read(g->dev, guard_of(t), 0, tail, sizeof tail));
    for (int i = 0; i < VKG_GPU_GUARD; i++)
        if (!isnan(tail[i])) {
            *first_bad = i;
            return 0;
        }
    return 1;
}

void vkg_gpu_expect_guard(vkg_gpu *g, const char *what, vkg_tensor t)
{
    int bad = -1;
    if (!vkg_gpu_guard_intact(g, t, &bad))
        fail_msg("%s: written past its end: float %d after the tensor (%zu bytes) was changed",
                 what, bad, t.bytes);
}

vkg_tensor vkg_gpu_poisoned(vkg_gpu *g, size_t n)
{
    float *nan = malloc((n ? n : 1) * sizeof *nan);
    assert_non_null(nan);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    vkg_tensor t = vkg_gpu_upload(g, nan, n * sizeof(float));
    free(nan);
    return t;
}

void vkg_gpu_download(vkg_gpu *g, vkg_tensor t, void *dst, size_t bytes)
{
    VKG_ASSERT_OK(vkg_tensor_read(g->dev, t, 0, dst, bytes));
}

vkg_tensor vkg_gpu_bf16_poisoned(vkg_gpu *g, size_t n)
{
    vkg_tensor t = vkg_gpu_poisoned(g, (n + 1) / 2);
    t.dtype = VKG_BF16;
    return t;
}

vkg_tensor vkg_gpu_bf16_of(vkg_gpu *g, const float *x, size_t n)
{
    vkg_tensor t32 = vkg_gpu_upload(g, x, n * 4), t16 = vkg_gpu_bf16_poisoned(g, n);
    VKG_ASSERT_OK(vkg_op_cast_bf16(g->cmd, t16, t32, n));
    return t16;
}

float *vkg_gpu_download_bf16(vkg_gpu *g, vkg_tensor t, size_t n)
{
    uint16_t *h = malloc((n + 1) / 2 * 4);
    float *x = vkg_test_alloc(n);
    assert_non_null(h);
    vkg_gpu_download(g, t, h, (n + 1) / 2 * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&x[i], &u, 4);
    }
    free(h);
    return x;
}

void vkg_gpu_run(vkg_gpu *g)
{
    VKG_ASSERT_OK(vkg_cmd_end(g->cmd));
    VKG_ASSERT_OK(vkg_cmd_run(g->cmd, 0));
    VKG_ASSERT_OK(vkg_cmd_begin(g->cmd));
}

vkg_test_cmp vkg_gpu_expect(vkg_gpu *g, const char *what, vkg_tensor t, const float *ref, size_t n,
                            double bound)
{
    float *got = vkg_test_alloc(n);
    vkg_gpu_download(g, t, got, n * sizeof *got);
    vkg_test_cmp cmp;
    int ok = vkg_test_compare(what, got, ref, n, bound, &cmp);
    free(got);
    if (!ok)
        fail_msg("%s differs from the reference: rel_l2 %.3g > %.3g or %zu non-finite", what,
                 cmp.rel_l2, bound, cmp.nonfinite);
    vkg_gpu_expect_guard(g, what, t);
    print_message("    %-34s n=%-8zu rel_l2 %.3g  max_abs %.3g\n", what, n, cmp.rel_l2,
                  cmp.max_abs);
    return cmp;
}

vkg_test_cmp vkg_gpu_expect_ref(vkg_gpu *g, const char *what, vkg_tensor t, const float *ref,
                                size_t n)
{
    return vkg_gpu_expect(g, what, t, ref, n, VKG_TEST_REL_BOUND);
}

void vkg_expect_error(vkg_status got, vkg_status want, const char *needle)
{
    if (got != want)
        fail_msg("expected %s, got %s: %s", vkg_status_name(want), vkg_status_name(got),
                 vkg_error_message());
    if (!strstr(vkg_error_message(), needle))
        fail_msg("error message \"%s\" does not mention \"%s\"", vkg_error_message(), needle);
}

void vkg_expect_invalid(vkg_status got, const char *needle)
{
    vkg_expect_error(got, VKG_ERR_INVALID_ARG, needle);
}

vkg_tensor vkg_gpu_bf16_widened(vkg_gpu *g, vkg_tensor t, size_t n)
{
    float *x = vkg_gpu_download_bf16(g, t, n);
    vkg_tensor w = vkg_gpu_upload(g, x, n * 4);
    free(x);
    return w;
}
