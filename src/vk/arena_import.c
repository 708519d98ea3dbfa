/* Host memory imported as a device buffer (VK_EXT_external_memory_host): the caller's own
 * allocation becomes a one-block host arena whose tensors copies can read and write, so that
 * the device copies into memory the host uses in place (gradient buckets straight into the
 * collectives' buffer) instead of into a host arena the host then copies out of.
 * Not here: the arena itself (arena.c), who owns the memory (the caller), the memory type rules
 * (memtype.c). */
#include <stdint.h>

#include "vk/vk.h"

static const VkExternalMemoryHandleTypeFlagBits host_handle =
    VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
static const VkBufferUsageFlags import_usage =
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

int vkg__host_importable(VkPhysicalDevice phys)
{
    VkPhysicalDeviceExternalBufferInfo bi = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO,
        .usage = import_usage,
        .handleType = host_handle};
    VkExternalBufferProperties bp = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES};
    vkGetPhysicalDeviceExternalBufferProperties(phys, &bi, &bp);
    return (bp.externalMemoryProperties.externalMemoryFeatures &
            VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT) != 0;
}

/* Whether the driver imports host allocations for buffers of import_usage. */
static vkg_status check_importable(vkg_device_t *dev, const char *role)
{
    VKG_CHECK(vkg__host_importable(dev->phys), VKG_ERR_UNSUPPORTED,
              "importing %s: %s does not import host allocations as transfer buffers", role,
              dev->info.name);
    return VKG_OK;
}

/* The memory type of the import: the readback rule among the types the driver allows for both
 * the pointer and the buffer. */
static vkg_status import_type(vkg_device_t *dev, void *ptr, VkBuffer buf, size_t bytes,
                              const char *role, uint32_t *type)
{
    VkMemoryHostPointerPropertiesEXT hp = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    VKG_VK(dev->get_host_pointer_props(dev->device, host_handle, ptr, &hp));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev->device, buf, &req);
    VKG_CHECK(req.size <= bytes, VKG_ERR_UNSUPPORTED,
              "importing %s: a buffer of %zu bytes needs %llu bytes of memory on %s", role, bytes,
              (unsigned long long)req.size, dev->info.name);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(dev->phys, &mem);
    int t = vkg__memtype_choose(&mem, hp.memoryTypeBits & req.memoryTypeBits, VKG_MEM_READBACK,
                                dev->info.unified_memory);
    VKG_CHECK(t >= 0, VKG_ERR_UNSUPPORTED,
              "importing %s: no host-visible coherent memory type of %s takes this host pointer "
              "(pointer types 0x%x, buffer types 0x%x)",
              role, dev->info.name, hp.memoryTypeBits, req.memoryTypeBits);
    *type = (uint32_t)t;
    return VKG_OK;
}

vkg_status vkg_arena_import_host(vkg_device_t *dev, void *ptr, size_t bytes, const char *role,
                                 vkg_arena **out)
{
    role = role ? role : "?";
    VKG_CHECK(dev->get_host_pointer_props, VKG_ERR_UNSUPPORTED,
              "importing %s: %s lacks VK_EXT_external_memory_host", role, dev->info.name);
    uint64_t align = dev->info.host_import_alignment;
    VKG_CHECK(ptr && bytes > 0, VKG_ERR_INVALID_ARG, "importing %s: no memory given (%zu bytes)",
              role, bytes);
    VKG_CHECK(align && (uintptr_t)ptr % align == 0 && bytes % align == 0, VKG_ERR_INVALID_ARG,
              "importing %s: host pointer %p and size %zu must be multiples of %s's "
              "minImportedHostPointerAlignment, %llu bytes",
              role, ptr, bytes, dev->info.name, (unsigned long long)align);
    VKG_TRY(check_importable(dev, role));
    VkExternalMemoryBufferCreateInfo ext = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = host_handle};
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .pNext = &ext,
                              .size = bytes,
                              .usage = import_usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buf = VK_NULL_HANDLE;
    VkDeviceMemory mem = VK_NULL_HANDLE;
    vkg_status st = VKG_OK;
    VKG_VK_GOTO(st, vkCreateBuffer(dev->device, &bci, NULL, &buf), fail);
    uint32_t type = 0;
    VKG_TRY_GOTO(st, import_type(dev, ptr, buf, bytes, role, &type), fail);
    VkImportMemoryHostPointerInfoEXT imp = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = host_handle,
        .pHostPointer = ptr};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .pNext = &imp,
                                .allocationSize = bytes,
                                .memoryTypeIndex = type};
    VKG_VK_GOTO(st, vkAllocateMemory(dev->device, &mai, NULL, &mem), fail);
    VKG_VK_GOTO(st, vkBindBufferMemory(dev->device, buf, mem, 0), fail);
    return vkg__arena_adopt(dev, buf, mem, ptr, bytes, role, out);
fail:
    if (mem)
        vkFreeMemory(dev->device, mem, NULL);
    if (buf)
        vkDestroyBuffer(dev->device, buf, NULL);
    return vkg__error_wrap(st, "importing %s (%zu bytes of host memory) on %s", role, bytes,
                           dev->info.name);
}
