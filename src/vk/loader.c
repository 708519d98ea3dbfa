/* The Vulkan loader opened at run time (vkapi.h): volk's search of the usual library names, or
 * the one named by VKG_VULKAN_LOADER, once per process; then the entry points of the first
 * instance. A machine without a loader gets an error saying what to install, not a failed start. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "os/clock.h"
#include "os/host.h"
#include "os/thread.h"
#include "vk/vkapi.h"

static vkg_os_once load_once = VKG_OS_ONCE_INIT;
/* Written inside the once only, read after it. */
static VkResult load_result = VK_ERROR_INITIALIZATION_FAILED;
static const char *load_override;                    /* VKG_VULKAN_LOADER when set and not empty */
static atomic_flag instance_lock = ATOMIC_FLAG_INIT; /* held for one volkLoadInstance, once */
static int instance_loaded;                          /* guarded by instance_lock */

/* vkGetInstanceProcAddr of the library at path, or NULL when it cannot be opened or lacks it.
 * The library stays open for the life of the process, as volk's own does. */
static PFN_vkGetInstanceProcAddr open_loader(const char *path)
{
    return (PFN_vkGetInstanceProcAddr)vkg_os_library_function(path, "vkGetInstanceProcAddr");
}

static void load(void)
{
    const char *path = getenv("VKG_VULKAN_LOADER");
    if (path && path[0]) {
        load_override = path;
        PFN_vkGetInstanceProcAddr gipa = open_loader(path);
        if (gipa) {
            volkInitializeCustom(gipa);
            load_result = VK_SUCCESS;
        }
        return;
    }
    load_result = volkInitialize();
}

vkg_status vkg__vk_load(void)
{
    vkg_os_once_run(&load_once, load);
    if (load_result == VK_SUCCESS)
        return VKG_OK;
    if (load_override)
        return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                        "no Vulkan loader found at %s (VKG_VULKAN_LOADER): unset it to use "
                        "the system's %s, or %s",
                        load_override, vkg_os_vulkan_loader_name(), vkg_os_vulkan_loader_hint());
    return VKG_FAIL(VKG_ERR_UNSUPPORTED, "no Vulkan loader (%s) found: %s",
                    vkg_os_vulkan_loader_name(), vkg_os_vulkan_loader_hint());
}

void vkg__vk_load_instance(VkInstance instance)
{
    while (atomic_flag_test_and_set_explicit(&instance_lock, memory_order_acquire))
        vkg_os_sleep_ms(1);
    if (!instance_loaded) {
        volkLoadInstance(instance);
        instance_loaded = 1;
    }
    atomic_flag_clear_explicit(&instance_lock, memory_order_release);
}
