/* The Vulkan loader is opened at run time (src/vk/loader.c, through volk), so a machine without
 * one gets a clear error instead of a binary that cannot start:
 *  - with VKG_VULKAN_LOADER naming a file that does not exist, `vkgpt devices` fails (exit 1)
 *    with one sentence naming that path, the loader it would otherwise use and what to install;
 *  - a file that exists but is no loader gets the same sentence;
 *  - with VKG_VULKAN_LOADER empty, the system's loader is used and the devices are listed.
 * Every child runs with the Khronos validation layer forced on through the loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testproc.h"
#include "testutil.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 512

static char tmp_root[CAP - 100], missing_path[CAP], not_loader_path[CAP];

static void expect_contains(const char *what, const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("%s does not contain '%s':\n%s", what, needle, hay);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_vk_loader"))
        return -1;
    snprintf(missing_path, sizeof missing_path, "%s/absent/vulkan-loader", tmp_root);
    snprintf(not_loader_path, sizeof not_loader_path, "%s/not-a-loader.txt", tmp_root);
    FILE *f = fopen(not_loader_path, "w");
    if (!f)
        return -1;
    fputs("this text is no shared library\n", f);
    fclose(f);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation", 1);
    unsetenv("VKGPT_DEVICE");
    unsetenv("VKGPT_VERBOSE");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

/* `vkgpt devices` with VKG_VULKAN_LOADER=path fails with the loader sentence. */
static void expect_no_loader(const char *path)
{
    char env_entry[CAP + 32];
    snprintf(env_entry, sizeof env_entry, "VKG_VULKAN_LOADER=%s", path);
    const char *const env[] = {env_entry, NULL};
    const char *const args[] = {"devices", NULL};
    vkg_test_proc_opts opts = {.env = env};
    vkg_test_proc p;
    vkg_test_proc_start(&p, args, &opts);
    int rc = vkg_test_proc_wait(&p, 120);
    if (rc != 1)
        fail_msg("vkgpt devices without a loader exited %d, not 1:\n%s%s", rc, p.buf[0], p.buf[1]);
    expect_contains("stderr", p.buf[1], "no Vulkan loader");
    expect_contains("stderr", p.buf[1], path);
    expect_contains("stderr", p.buf[1], "install");
    expect_contains("stderr", p.buf[1], "Vulkan SDK");
    if (strstr(p.buf[0], "[0]"))
        fail_msg("a device was listed without a loader:\n%s", p.buf[0]);
    vkg_test_proc_free(&p);
}

static void test_missing_loader_is_named(void **state)
{
    (void)state;
    expect_no_loader(missing_path);
}

static void test_file_that_is_no_loader(void **state)
{
    (void)state;
    expect_no_loader(not_loader_path);
}

static void test_system_loader_by_default(void **state)
{
    (void)state;
    const char *const env[] = {"VKG_VULKAN_LOADER=", NULL};
    const char *const args[] = {"devices", NULL};
    vkg_test_proc_opts opts = {.env = env};
    vkg_test_proc p;
    vkg_test_proc_start(&p, args, &opts);
    int rc = vkg_test_proc_wait(&p, 120);
    if (rc != 0)
        fail_msg("vkgpt devices exited %d:\n%s%s", rc, p.buf[0], p.buf[1]);
    expect_contains("stdout", p.buf[0], "[0]");
    vkg_test_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_loader_is_named),
        cmocka_unit_test(test_file_that_is_no_loader),
        cmocka_unit_test(test_system_loader_by_default),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
