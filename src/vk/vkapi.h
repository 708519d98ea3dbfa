/* Internal: the Vulkan API as vkgpt sees it. Every Vulkan entry point is a function pointer that
 * volk fills at run time from the system's loader (libvulkan.so.1, vulkan-1.dll, libvulkan.1.dylib
 * or MoltenVK), so no binary links a Vulkan import library. This is the only file that includes
 * volk.h; every other file of src/vk includes this one instead of vulkan/vulkan.h. */
#ifndef VKG_VK_VKAPI_H
#define VKG_VK_VKAPI_H

#include <volk.h>

#include "base/error.h"

/* Load the Vulkan loader once per process: the library named by the environment variable
 * VKG_VULKAN_LOADER when it is set and not empty, else the platform's usual names (volk's search).
 * Returns VKG_OK once the global entry points (vkCreateInstance, vkEnumerateInstance*) are usable;
 * VKG_ERR_UNSUPPORTED when no loader can be opened, with a message naming the library looked for
 * and what to install. Later calls return the first call's outcome. Thread-safe. */
vkg_status vkg__vk_load(void);

/* Fill the instance- and device-level entry points from instance, on the first call only (later
 * instances reuse them: the loader's entry points dispatch on the object they are given). Call
 * after a successful vkCreateInstance. Thread-safe. */
void vkg__vk_load_instance(VkInstance instance);

#endif
