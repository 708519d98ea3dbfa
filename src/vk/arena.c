/* Memory arenas: device memory per role with a bump allocator handing out tensor views by
 * device address, and host transfers (direct mapping on unified memory, staging otherwise).
 * Arenas never free individual tensors: the model's memory plan is static.
 *
 * An arena is one or more blocks, each one VkBuffer bound to one allocation no larger than the
 * device's largest allocation (vkg_device_info.max_allocation_bytes). Tensors are placed in
 * order and never straddle two blocks: a tensor that does not fit in the rest of the current
 * block opens the next. An arena made from its list of tensors sizes each block to the tensors
 * that will fill it (nothing is wasted); one made from a byte count sizes it to what the arena
 * still has to hold, at most the limit. vkg_arena_place is that rule without a device, so plans
 * compute exactly what is allocated. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/vk.h"

#define ARENA_ALIGN 256
#define STAGING_CHUNK ((size_t)64 << 20)
#define MAX_BLOCKS 4096

typedef struct arena_block {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t base_addr;
    void *map; /* non-NULL on unified-memory devices and for host arenas */
} arena_block;

struct vkg_arena {
    vkg_device_t *dev;
    arena_block *blocks;
    vkg_arena_cursor cur;
    size_t *list; /* the tensors' bytes, for arenas made from their list */
    int host;
    char role[32];
};

static size_t align_up(size_t n)
{
    return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

vkg_arena_cursor vkg_arena_cursor_start(size_t bytes, uint64_t max_allocation)
{
    vkg_arena_cursor c = {.declared = bytes ? bytes : ARENA_ALIGN};
    /* Whole 64 KiB units, so that the driver's size alignment cannot take a block over. */
    uint64_t m = max_allocation >= (1u << 16) ? max_allocation & ~(uint64_t)0xFFFF : max_allocation;
    c.max_block = !m || m > SIZE_MAX ? SIZE_MAX : (size_t)m;
    return c;
}

vkg_status vkg_arena_place(vkg_arena_cursor *c, size_t bytes, const char *role, size_t *offset,
                           size_t *open)
{
    size_t need = align_up(bytes ? bytes : 1);
    *open = 0;
    if (c->list) {
        VKG_CHECK(c->index < c->nlist && c->list[c->index] == bytes, VKG_ERR_STATE,
                  "arena %s: tensor %d of %zu bytes is not the %zu bytes of its plan", role,
                  c->index, bytes, c->index < c->nlist ? c->list[c->index] : 0);
    }
    VKG_CHECK(need <= c->max_block, VKG_ERR_NOMEM,
              "arena %s: a tensor of %zu bytes is larger than the device's largest allocation "
              "(%zu bytes)",
              role, bytes, c->max_block);
    VKG_CHECK(c->placed <= c->declared && bytes <= c->declared - c->placed, VKG_ERR_NOMEM,
              "arena %s: %zu bytes requested, %zu of %zu used", role, bytes, c->placed,
              c->declared);
    size_t start = align_up(c->block_used);
    if (c->blocks == 0 || start > c->block_size || bytes > c->block_size - start) {
        size_t rest = c->declared - c->placed;
        size_t size = rest < c->max_block ? rest : c->max_block;
        if (c->list) { /* exactly the tensors from here that fit in one allocation */
            size = 0;
            for (int j = c->index; j < c->nlist; j++) {
                size_t a = align_up(c->list[j] ? c->list[j] : 1);
                if (j > c->index && a > c->max_block - size)
                    break;
                size += a;
            }
        }
        VKG_CHECK(c->blocks < MAX_BLOCKS, VKG_ERR_NOMEM,
                  "arena %s: more than %d allocations of at most %zu bytes", role, MAX_BLOCKS,
                  c->max_block);
        c->blocks++;
        c->block_size = size;
        c->allocated += size;
        start = 0;
        *open = size;
    }
    *offset = start;
    c->block_used = start + bytes;
    c->placed += need;
    c->index++;
    return VKG_OK;
}

static size_t list_bytes(const size_t *bytes, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += align_up(bytes[i] ? bytes[i] : 1);
    return total;
}

vkg_status vkg_arena_plan(const size_t *bytes, int n, uint64_t max_allocation, const char *role,
                          size_t *allocated, int *blocks)
{
    vkg_arena_cursor c = vkg_arena_cursor_start(list_bytes(bytes, n), max_allocation);
    c.list = bytes, c.nlist = n;
    for (int i = 0; i < n; i++) {
        size_t off = 0, open = 0;
        VKG_TRY(vkg_arena_place(&c, bytes[i], role, &off, &open));
    }
    if (allocated)
        *allocated = c.allocated;
    if (blocks)
        *blocks = c.blocks;
    return VKG_OK;
}

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

/* Allocate block number a->cur.blocks - 1 of `bytes`; on failure nothing of it remains. */
static vkg_status open_block(vkg_arena *a, size_t bytes)
{
    vkg_device_t *dev = a->dev;
    int i = a->cur.blocks - 1;
    arena_block *nb = realloc(a->blocks, (size_t)a->cur.blocks * sizeof *nb);
    VKG_CHECK(nb, VKG_ERR_NOMEM, "no memory for the blocks of arena %s", a->role);
    a->blocks = nb;
    arena_block *b = &a->blocks[i];
    memset(b, 0, sizeof *b);
    VkBufferUsageFlags usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (!a->host)
        usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    vkg_status st =
        make_buffer(dev, bytes, usage, a->host ? dev->mem_type_host : dev->mem_type_device,
                    !a->host, &b->buffer, &b->memory);
    if (st != VKG_OK)
        return vkg__error_wrap(st, "arena %s, allocation %d", a->role, i + 1);
    if (!a->host) {
        VkBufferDeviceAddressInfo bai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                         .buffer = b->buffer};
        b->base_addr = vkGetBufferDeviceAddress(dev->device, &bai);
    }
    if (a->host || dev->info.unified_memory) {
        VkResult r = vkMapMemory(dev->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (r != VK_SUCCESS) {
            vkDestroyBuffer(dev->device, b->buffer, NULL);
            vkFreeMemory(dev->device, b->memory, NULL);
            memset(b, 0, sizeof *b);
            return VKG_FAIL(vkg__vk_status(r), "arena %s: vkMapMemory: %s", a->role,
                            vkg__vk_result_str(r));
        }
    }
    return VKG_OK;
}

static vkg_status arena_create(vkg_device_t *dev, size_t bytes, const size_t *list, int n,
                               const char *role, int host, vkg_arena **out)
{
    vkg_arena *a = calloc(1, sizeof *a);
    VKG_CHECK(a, VKG_ERR_NOMEM, "no memory for arena %s", role);
    a->dev = dev;
    a->host = host;
    a->cur =
        vkg_arena_cursor_start(list ? list_bytes(list, n) : bytes, dev->info.max_allocation_bytes);
    snprintf(a->role, sizeof a->role, "%s", role ? role : "?");
    if (list) {
        a->list = malloc((size_t)(n ? n : 1) * sizeof *a->list);
        if (!a->list) {
            free(a);
            return VKG_FAIL(VKG_ERR_NOMEM, "no memory for arena %s", role);
        }
        memcpy(a->list, list, (size_t)n * sizeof *list);
        a->cur.list = a->list, a->cur.nlist = n;
    }
    *out = a;
    return VKG_OK;
}

vkg_status vkg_arena_create_list(vkg_device_t *dev, const size_t *bytes, int n, const char *role,
                                 vkg_arena **out)
{
    return arena_create(dev, 0, bytes, n, role, 0, out);
}

vkg_status vkg_arena_create(vkg_device_t *dev, size_t bytes, const char *role, vkg_arena **out)
{
    return arena_create(dev, bytes, NULL, 0, role, 0, out);
}

vkg_status vkg_arena_create_host(vkg_device_t *dev, size_t bytes, const char *role, vkg_arena **out)
{
    return arena_create(dev, bytes, NULL, 0, role, 1, out);
}

vkg_status vkg__arena_adopt(vkg_device_t *dev, VkBuffer buffer, VkDeviceMemory memory, void *map,
                            size_t bytes, const char *role, vkg_arena **out)
{
    vkg_arena *a = NULL;
    vkg_status st = arena_create(dev, bytes, NULL, 0, role, 1, &a);
    arena_block *b = st == VKG_OK ? malloc(sizeof *b) : NULL;
    if (!b) {
        vkDestroyBuffer(dev->device, buffer, NULL);
        vkFreeMemory(dev->device, memory, NULL);
        free(a);
        return st != VKG_OK ? st : VKG_FAIL(VKG_ERR_NOMEM, "no memory for arena %s", role);
    }
    *b = (arena_block){.buffer = buffer, .memory = memory, .map = map};
    a->blocks = b;
    a->cur.max_block = bytes; /* the one block: nothing is ever opened after it */
    a->cur.blocks = 1, a->cur.block_size = bytes, a->cur.allocated = bytes;
    *out = a;
    return VKG_OK;
}

void *vkg_tensor_host_ptr(vkg_tensor t)
{
    if (!t.arena || t.block >= (uint32_t)t.arena->cur.blocks || !t.arena->blocks[t.block].map)
        return NULL;
    return (char *)t.arena->blocks[t.block].map + t.offset;
}

void vkg_arena_destroy(vkg_arena **pa)
{
    vkg_arena *a = pa ? *pa : NULL;
    if (!a)
        return;
    for (int i = 0; a->blocks && i < a->cur.blocks; i++) {
        if (a->blocks[i].buffer)
            vkDestroyBuffer(a->dev->device, a->blocks[i].buffer, NULL);
        if (a->blocks[i].memory)
            vkFreeMemory(a->dev->device, a->blocks[i].memory, NULL); /* unmaps implicitly */
    }
    free(a->blocks);
    free(a->list);
    free(a);
    *pa = NULL;
}

vkg_status vkg_arena_alloc(vkg_arena *a, size_t bytes, vkg_tensor *out)
{
    vkg_arena_cursor before = a->cur;
    size_t start = 0, open = 0;
    VKG_TRY(vkg_arena_place(&a->cur, bytes, a->role, &start, &open));
    if (open) {
        vkg_status st = open_block(a, open);
        if (st != VKG_OK) {
            a->cur = before; /* the failed block left nothing behind */
            return st;
        }
    }
    int b = a->cur.blocks - 1;
    out->addr = a->blocks[b].base_addr + start;
    out->offset = start;
    out->bytes = bytes;
    out->arena = a;
    out->block = (uint32_t)b;
    out->dtype = VKG_F32;
    return VKG_OK;
}

size_t vkg_arena_used(const vkg_arena *a)
{
    return a->cur.placed;
}

size_t vkg_arena_size(const vkg_arena *a)
{
    return a->cur.allocated;
}

int vkg_arena_blocks(const vkg_arena *a)
{
    return a->cur.blocks;
}

vkg_tensor vkg_tensor_view(vkg_tensor t, size_t offset, size_t bytes)
{
    assert(offset <= t.bytes && bytes <= t.bytes - offset);
    t.addr += offset;
    t.offset += offset;
    t.bytes = bytes;
    return t;
}

VkBuffer vkg__tensor_buffer(vkg_tensor t)
{
    return t.arena->blocks[t.block].buffer;
}

/* The staging buffer of direction `up` (1: uploads, in the upload memory type; 0: reads back, in
 * the cached one), at least `bytes` long. */
static vkg_status ensure_staging(vkg_device_t *dev, size_t bytes, int up)
{
    if (dev->staging_bytes[up] >= bytes)
        return VKG_OK;
    if (dev->staging[up]) {
        vkDestroyBuffer(dev->device, dev->staging[up], NULL);
        vkFreeMemory(dev->device, dev->staging_mem[up], NULL);
        dev->staging[up] = VK_NULL_HANDLE;
        dev->staging_mem[up] = VK_NULL_HANDLE;
        dev->staging_bytes[up] = 0;
    }
    VKG_TRY(make_buffer(dev, bytes,
                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                        up ? dev->mem_type_upload : dev->mem_type_host, 0, &dev->staging[up],
                        &dev->staging_mem[up]));
    VKG_VK(
        vkMapMemory(dev->device, dev->staging_mem[up], 0, VK_WHOLE_SIZE, 0, &dev->staging_map[up]));
    dev->staging_bytes[up] = bytes;
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
    vkCmdCopyBuffer(dev->transfer_cmd, to_device ? dev->staging[1] : arena_buf,
                    to_device ? arena_buf : dev->staging[0], 1, &region);
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
    VKG_CHECK(t.arena, VKG_ERR_INVALID_ARG, "transfer to or from a tensor that is not allocated");
    if (bytes == 0)
        return VKG_OK;
    size_t off = t.offset + offset;
    char *map = vkg_tensor_host_ptr(t);
    if (map) {
        if (to_device)
            memcpy(map + offset, host, bytes);
        else
            memcpy(host, map + offset, bytes);
        return VKG_OK;
    }
    size_t chunk = bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK;
    VKG_TRY(ensure_staging(dev, chunk, to_device));
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t n = bytes - done < chunk ? bytes - done : chunk;
        if (to_device)
            memcpy(dev->staging_map[1], (char *)host + done, n);
        VKG_TRY(staged_copy(dev, vkg__tensor_buffer(t), off + done, n, to_device));
        if (!to_device)
            memcpy((char *)host + done, dev->staging_map[0], n);
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
