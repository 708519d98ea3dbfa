/* GPU test fixture: opens the Vulkan device (VKGPT_DEVICE or the first suitable one) with the
 * Khronos validation layer on, gives each test a fresh arena and command list, and fails the test
 * when the validation layer reported anything. Also upload/download/poison helpers; every tensor
 * they allocate is followed by a NaN guard that output checks verify. */
#ifndef VKG_GPU_FIXTURE_H
#define VKG_GPU_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "testutil.h"
#include "vk/vk.h"

typedef struct vkg_gpu {
    vkg_device_t *dev;
    vkg_arena *arena;
    vkg_cmd *cmd;
} vkg_gpu;

/* cmocka group setup/teardown: *state becomes a vkg_gpu with the device open. */
int vkg_gpu_group_setup(void **state);
int vkg_gpu_group_teardown(void **state);
/* vkg_gpu_group_setup with the device opened in this cooperative-matrix mode. */
int vkg_gpu_group_setup_coopmat(void **state, vkg_coopmat_mode coopmat);
/* cmocka per-test setup/teardown: a fresh 256 MiB arena and command list; teardown fails the test
 * if the validation layer reported any warning or error during it. */
int vkg_gpu_setup(void **state);
int vkg_gpu_teardown(void **state);

/* Floats of NaN placed after every tensor the fixture allocates: a shader writing past the end
 * of an output is caught when the output is checked. */
#define VKG_GPU_GUARD 64
/* Allocate a tensor of `bytes` (followed by the NaN guard) and fill it from host memory (src may
 * be NULL: left as is). */
vkg_tensor vkg_gpu_upload(vkg_gpu *g, const void *src, size_t bytes);
/* 1 when t's guard is still all NaN; else 0 with the first changed float's index. */
int vkg_gpu_guard_intact(vkg_gpu *g, vkg_tensor t, int *first_bad);
/* Fail the test (naming what) when anything after t was written: its guard must still be NaN. */
void vkg_gpu_expect_guard(vkg_gpu *g, const char *what, vkg_tensor t);
/* Allocate a tensor of n floats filled with NaN, so unwritten outputs are caught. */
vkg_tensor vkg_gpu_poisoned(vkg_gpu *g, size_t n);
/* bf16 tensors (mixed precision), n values packed two to a word, followed by the guard:
 * vkg_gpu_bf16_of records (into g->cmd, done at the next vkg_gpu_run) the cast of x on the
 * device; vkg_gpu_bf16_poisoned is all NaN; vkg_gpu_download_bf16 returns the n values of t
 * widened to floats (malloc'd, the caller frees). */
vkg_tensor vkg_gpu_bf16_of(vkg_gpu *g, const float *x, size_t n);
vkg_tensor vkg_gpu_bf16_poisoned(vkg_gpu *g, size_t n);
float *vkg_gpu_download_bf16(vkg_gpu *g, vkg_tensor t, size_t n);
/* An fp32 tensor of the n values of the bf16 tensor t as widened (downloaded and uploaded). */
vkg_tensor vkg_gpu_bf16_widened(vkg_gpu *g, vkg_tensor t, size_t n);
/* Read n floats (or bytes/4 int32) of t into host memory. */
void vkg_gpu_download(vkg_gpu *g, vkg_tensor t, void *dst, size_t bytes);
/* Download n floats of t and compare them with ref under a relative-L2 bound (vkg_test_compare):
 * fails the test, naming `what`, the errors and the first bad index, on a mismatch or any
 * non-finite element, or when t's guard was overwritten; otherwise prints the measured error for
 * the record and returns it. */
vkg_test_cmp vkg_gpu_expect(vkg_gpu *g, const char *what, vkg_tensor t, const float *ref, size_t n,
                            double bound);
/* vkg_gpu_expect at the shader bound VKG_TEST_REL_BOUND. */
vkg_test_cmp vkg_gpu_expect_ref(vkg_gpu *g, const char *what, vkg_tensor t, const float *ref,
                                size_t n);
/* Assert that a call failed with `want` and that the error message contains `needle`. */
void vkg_expect_error(vkg_status got, vkg_status want, const char *needle);
/* Assert VKG_ERR_INVALID_ARG with a message containing `needle`. */
void vkg_expect_invalid(vkg_status got, const char *needle);
/* End, run and wait for what was recorded in the fixture's command list, then start a new
 * recording (so a test can record and run again); asserts success. */
void vkg_gpu_run(vkg_gpu *g);
/* Assert that a vkgpt call succeeded, printing the error message when it did not. */
#define VKG_ASSERT_OK(expr)                                                                        \
    do {                                                                                           \
        vkg_status vkg_assert_st_ = (expr);                                                        \
        if (vkg_assert_st_ != VKG_OK)                                                              \
            fail_msg("%s -> %s: %s", #expr, vkg_status_name(vkg_assert_st_), vkg_error_message()); \
    } while (0)

#endif
