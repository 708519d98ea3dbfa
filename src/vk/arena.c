/* Memory arenas: one device buffer per role with a bump allocator handing out tensor views by
 * device address, and host transfers (direct mapping on unified memory, staging otherwise).
 * Arenas never free individual tensors: the model's memory plan is static. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/vk.h"

#define ARENA_ALIGN 256
#define STAGING_CHUNK ((size_t)64 << 20)

struct vkg_arena {
    vkg_device_t *dev;
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t base_addr;
    void *map; /* non-NULL on unified-memory devices and for host arenas */
    size_t size, used;
    char role[32];
};

static vkg_status make_buffer(vkg_device_t *dev, size_t bytes, VkBufferUsageFlags usage,
                              uint32_t mem_type, int device_address, VkBuffer *buf,
                              VkDeviceMemory *mem)
{
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = bytes,
                              .usage = usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VKG_VK(vkCreateBuffer(dev->device, &bci, NULL, buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev->device, *buf, &req);
    if (!(req.memoryTypeBits & (1u << mem_type))) {
        vkDestroyBuffer(dev->device, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        return VKG_FAIL(VKG_ERR_UNSUPPORTED, "memory type %u cannot hold this buffer", mem_type);
    }
    VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                       .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .pNext = device_address ? &flags : NULL,
                                .allocationSize = req.size,
                                .memoryTypeIndex = mem_type};
    VkResult r = vkAllocateMemory(dev->device, &mai, NULL, mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(dev->device, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        return VKG_FAIL(vkg__vk_status(r), "cannot allocate %.1f MiB on %s: %s",
                        (double)bytes / 1048576.0, dev->info.name, vkg__vk_result_str(r));
    }
    r = vkBindBufferMemory(dev->device, *buf, *mem, 0);
    if (r != VK_SUCCESS) {
        vkFreeMemory(dev->device, *mem, NULL);
        vkDestroyBuffer(dev->device, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        *mem = VK_NULL_HANDLE;
        return VKG_FAIL(VKG_ERR_VULKAN, "vkBindBufferMemory: %s", vkg__vk_result_str(r));
    }
    return VKG_OK;
}

static vkg_status arena_create(vkg_device_t *dev, size_t bytes, const char *role, int host,
                               vkg_arena **out)
{
    vkg_status st = VKG_OK;
    vkg_arena *a = calloc(1, sizeof *a);
    VKG_CHECK(a, VKG_ERR_NOMEM, "no memory for arena %s", role);
    a->dev = dev;
    a->size = bytes ? bytes : ARENA_ALIGN;
    snprintf(a->role, sizeof a->role, "%s", role ? role : "?");
    VkBufferUsageFlags usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (!host)
        usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    st = make_buffer(dev, a->size, usage, host ? dev->mem_type_host : dev->mem_type_device, !host,
                     &a->buffer, &a->memory);
    if (st != VKG_OK) {
        vkg__error_wrap(st, "arena %s", a->role);
        goto fail;
    }
    if (!host) {
        VkBufferDeviceAddressInfo bai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                         .buffer = a->buffer};
        a->base_addr = vkGetBufferDeviceAddress(dev->device, &bai);
    }
    if (host || dev->info.unified_memory)
        VKG_VK_GOTO(st, vkMapMemory(dev->device, a->memory, 0, VK_WHOLE_SIZE, 0, &a->map), fail);
    *out = a;
    return VKG_OK;
fail:
    vkg_arena_destroy(&a);
    return st;
}

vkg_status vkg_arena_create(vkg_device_t *dev, size_t bytes, const char *role, vkg_arena **out)
{
    return arena_create(dev, bytes, role, 0, out);
}

vkg_status vkg_arena_create_host(vkg_device_t *dev, size_t bytes, const char *role, vkg_arena **out)
{
    return arena_create(dev, bytes, role, 1, out);
}

void *vkg_arena_host_ptr(const vkg_arena *a)
{
    return a->map;
}

void vkg_arena_destroy(vkg_arena **pa)
{
    vkg_arena *a = pa ? *pa : NULL;
    if (!a)
        return;
    if (a->buffer)
        vkDestroyBuffer(a->dev->device, a->buffer, NULL);
    if (a->memory)
        vkFreeMemory(a->dev->device, a->memory, NULL); /* unmaps implicitly */
    free(a);
    *pa = NULL;
}

vkg_status vkg_arena_alloc(vkg_arena *a, size_t bytes, vkg_tensor *out)
{
    size_t start = (a->used + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    VKG_CHECK(start <= a->size && bytes <= a->size - start, VKG_ERR_NOMEM,
              "arena %s: %zu bytes requested, %zu of %zu used", a->role, bytes, start, a->size);
    out->addr = a->base_addr + start;
    out->offset = start;
    out->bytes = bytes;
    out->arena = a;
    a->used = start + bytes;
    return VKG_OK;
}

size_t vkg_arena_used(const vkg_arena *a)
{
    return a->used;
}

size_t vkg_arena_size(const vkg_arena *a)
{
    return a->size;
}

vkg_tensor vkg_tensor_view(vkg_tensor t, size_t offset, size_t bytes)
{
    assert(offset <= t.bytes && bytes <= t.bytes - offset);
    t.addr += offset;
    t.offset += offset;
    t.bytes = bytes;
    return t;
}

VkBuffer vkg__arena_buffer(const vkg_arena *a)
{
    return a->buffer;
}

static vkg_status ensure_staging(vkg_device_t *dev, size_t bytes)
{
    if (dev->staging_bytes >= bytes)
        return VKG_OK;
    if (dev->staging) {
        vkDestroyBuffer(dev->device, dev->staging, NULL);
        vkFreeMemory(dev->device, dev->staging_mem, NULL);
        dev->staging = VK_NULL_HANDLE;
        dev->staging_mem = VK_NULL_HANDLE;
        dev->staging_bytes = 0;
    }
    VKG_TRY(make_buffer(dev, bytes,
                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                        dev->mem_type_host, 0, &dev->staging, &dev->staging_mem));
    VKG_VK(vkMapMemory(dev->device, dev->staging_mem, 0, VK_WHOLE_SIZE, 0, &dev->staging_map));
    dev->staging_bytes = bytes;
    if (!dev->transfer_cmd) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = dev->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        VKG_VK(vkAllocateCommandBuffers(dev->device, &ai, &dev->transfer_cmd));
    }
    return VKG_OK;
}

/* Copy one chunk between the staging buffer and the arena, waiting for completion. */
static vkg_status staged_copy(vkg_device_t *dev, VkBuffer arena_buf, size_t arena_off, size_t bytes,
                              int to_device)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VKG_VK(vkBeginCommandBuffer(dev->transfer_cmd, &bi));
    VkMemoryBarrier before = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask =
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(dev->transfer_cmd,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                             VK_PIPELINE_STAGE_HOST_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    VkBufferCopy region = {.srcOffset = to_device ? 0 : arena_off,
                           .dstOffset = to_device ? arena_off : 0,
                           .size = bytes};
    vkCmdCopyBuffer(dev->transfer_cmd, to_device ? dev->staging : arena_buf,
                    to_device ? arena_buf : dev->staging, 1, &region);
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                                              VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(dev->transfer_cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                         &after, 0, NULL, 0, NULL);
    VKG_VK(vkEndCommandBuffer(dev->transfer_cmd));
    uint64_t value;
    VKG_TRY(vkg__device_submit(dev, dev->transfer_cmd, &value));
    return vkg__device_wait(dev, value, 600ull * 1000000000ull);
}

static vkg_status transfer(vkg_device_t *dev, vkg_tensor t, size_t offset, void *host, size_t bytes,
                           int to_device)
{
    VKG_CHECK(offset <= t.bytes && bytes <= t.bytes - offset, VKG_ERR_INVALID_ARG,
              "transfer of %zu bytes at offset %zu exceeds a %zu-byte tensor of arena %s", bytes,
              offset, t.bytes, t.arena ? t.arena->role : "?");
    if (bytes == 0)
        return VKG_OK;
    vkg_arena *a = t.arena;
    size_t off = t.offset + offset;
    if (a->map) {
        if (to_device)
            memcpy((char *)a->map + off, host, bytes);
        else
            memcpy(host, (char *)a->map + off, bytes);
        return VKG_OK;
    }
    size_t chunk = bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK;
    VKG_TRY(ensure_staging(dev, chunk));
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t n = bytes - done < chunk ? bytes - done : chunk;
        if (to_device)
            memcpy(dev->staging_map, (char *)host + done, n);
        VKG_TRY(staged_copy(dev, a->buffer, off + done, n, to_device));
        if (!to_device)
            memcpy((char *)host + done, dev->staging_map, n);
    }
    return VKG_OK;
}

vkg_status vkg_tensor_write(vkg_device_t *dev, vkg_tensor t, size_t offset, const void *src,
                            size_t bytes)
{
    return transfer(dev, t, offset, (void *)src, bytes, 1);
}

vkg_status vkg_tensor_read(vkg_device_t *dev, vkg_tensor t, size_t offset, void *dst, size_t bytes)
{
    return transfer(dev, t, offset, dst, bytes, 0);
}
