/* Internal: Vulkan instance creation and physical-device enumeration (instance.c). */
#ifndef VKG_VK_INSTANCE_H
#define VKG_VK_INSTANCE_H

#include "vk/vkapi.h"

#include "vkgpt/device.h"

/* Create an instance; with validation, enable the Khronos layer (synchronization validation on)
 * and route its warnings/errors to dev's counter. dev may be NULL only without validation. */
vkg_status vkg__instance_create(int validation, vkg_device_t *dev, VkInstance *out,
                                VkDebugUtilsMessengerEXT *messenger);
void vkg__instance_destroy(VkInstance instance, VkDebugUtilsMessengerEXT messenger);
/* 1 when phys offers the device extension `name`. */
int vkg__device_has_extension(VkPhysicalDevice phys, const char *name);
/* All physical devices; *out is malloc'd. */
vkg_status vkg__physical_devices(VkInstance instance, VkPhysicalDevice **out, uint32_t *count);
/* vkg_device_list, with the validation layer on when validation is set: *messages (may be NULL)
 * gets the number of warnings and errors it reported while listing. */
vkg_status vkg__device_list(int validation, vkg_device_info **out, int *count, int *messages);

#endif
