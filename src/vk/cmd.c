/* Command lists: record dispatches once, submit them many times. Consecutive dispatches are
 * separated by one compute/transfer memory barrier unless recorded inside a group of independent
 * dispatches; with profiling on, each dispatch is bracketed by timestamp queries. */
#include <stdlib.h>
#include <string.h>

#include "vk/vk.h"

#define TIMING_CAP 4096 /* dispatches timed per command list */

struct vkg_cmd {
    vkg_device_t *dev;
    VkCommandBuffer cb;
    VkQueryPool queries;
    int recording, in_group, pending; /* pending: dispatches since the last barrier */
    int ndispatch, ntimed;
    int nbarrier; /* pipeline barriers recorded, the leading and trailing ones included */
    vkg_cmd_timing *timings; /* TIMING_CAP entries when profiling */
    int have_timings;
    vkg_cmd_logged log[VKG_CMD_LOG]; /* the last dispatches, dispatch i at i % VKG_CMD_LOG */
    int nkernel[VKG_KERNEL_COUNT];   /* dispatches of each kernel since begin */
};

vkg_status vkg_cmd_create(vkg_device_t *dev, vkg_cmd **out)
{
    vkg_status st = VKG_OK;
    vkg_cmd *c = calloc(1, sizeof *c);
    VKG_CHECK(c, VKG_ERR_NOMEM, "no memory for a command list");
    c->dev = dev;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = dev->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VKG_VK_GOTO(st, vkAllocateCommandBuffers(dev->device, &ai, &c->cb), fail);
    if (dev->opts.profiling && dev->info.timestamps) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = 2 * TIMING_CAP};
        VKG_VK_GOTO(st, vkCreateQueryPool(dev->device, &qci, NULL, &c->queries), fail);
        c->timings = calloc(TIMING_CAP, sizeof *c->timings);
        VKG_CHECK_GOTO(st, c->timings, VKG_ERR_NOMEM, fail, "no memory for timings");
    }
    *out = c;
    return VKG_OK;
fail:
    vkg_cmd_destroy(&c);
    return st;
}

void vkg_cmd_destroy(vkg_cmd **pc)
{
    vkg_cmd *c = pc ? *pc : NULL;
    if (!c)
        return;
    if (c->queries)
        vkDestroyQueryPool(c->dev->device, c->queries, NULL);
    if (c->cb)
        vkFreeCommandBuffers(c->dev->device, c->dev->pool, 1, &c->cb);
    free(c->timings);
    free(c);
    *pc = NULL;
}

vkg_status vkg_cmd_begin(vkg_cmd *c)
{
    VKG_VK(vkResetCommandBuffer(c->cb, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VKG_VK(vkBeginCommandBuffer(c->cb, &bi));
    if (c->queries)
        vkCmdResetQueryPool(c->cb, c->queries, 0, 2 * TIMING_CAP);
    c->recording = 1;
    c->in_group = 0;
    c->ndispatch = 0;
    c->nbarrier = 0;
    memset(c->nkernel, 0, sizeof c->nkernel);
    c->ntimed = 0;
    c->have_timings = 0;
    /* Work from earlier submissions (uploads, previous steps) is complete before this list runs
     * only if it was waited for; the leading barrier also orders it when it was not. */
    c->pending = 1;
    return VKG_OK;
}

void vkg_cmd_barrier(vkg_cmd *c)
{
    if (!c->recording)
        return; /* the next dispatch or vkg_cmd_end reports the state error */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(c->cb, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
    c->pending = 0;
    c->nbarrier++;
}

void vkg_cmd_group_begin(vkg_cmd *c)
{
    if (c->pending)
        vkg_cmd_barrier(c);
    c->in_group = 1;
}

void vkg_cmd_group_end(vkg_cmd *c)
{
    c->in_group = 0;
}

vkg_status vkg_cmd_dispatch(vkg_cmd *c, vkg_kernel_id k, const uint32_t *spec, int nspec,
                            const void *push, size_t push_bytes, uint32_t gx, uint32_t gy,
                            uint32_t gz, const char *label)
{
    return vkg_cmd_dispatch_sg(c, k, spec, nspec, 0, push, push_bytes, gx, gy, gz, label);
}

static void log_dispatch(vkg_cmd *c, vkg_kernel_id k, const uint32_t *spec, int nspec,
                         uint32_t subgroup, uint32_t gx, uint32_t gy, uint32_t gz)
{
    vkg_cmd_logged *l = &c->log[c->ndispatch % VKG_CMD_LOG];
    memset(l, 0, sizeof *l);
    l->kernel = k;
    if (nspec > 0)
        memcpy(l->spec, spec, (size_t)nspec * sizeof *spec);
    l->nspec = nspec;
    l->subgroup = subgroup;
    l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
}

int vkg_cmd_kernel_count(const vkg_cmd *c, vkg_kernel_id k)
{
    return k >= 0 && k < VKG_KERNEL_COUNT ? c->nkernel[k] : 0;
}

int vkg_cmd_logged_dispatch(const vkg_cmd *c, int back, vkg_cmd_logged *out)
{
    if (back < 0 || back >= VKG_CMD_LOG || back >= c->ndispatch)
        return -1;
    *out = c->log[(c->ndispatch - 1 - back) % VKG_CMD_LOG];
    return 0;
}

vkg_status vkg_cmd_dispatch_sg(vkg_cmd *c, vkg_kernel_id k, const uint32_t *spec, int nspec,
                               uint32_t subgroup, const void *push, size_t push_bytes, uint32_t gx,
                               uint32_t gy, uint32_t gz, const char *label)
{
    VKG_CHECK(c->recording, VKG_ERR_STATE, "dispatch of %s outside vkg_cmd_begin/end",
              vkg__kernel_name(k));
    VKG_CHECK(push_bytes <= VKG_PUSH_MAX && push_bytes % 4 == 0, VKG_ERR_INVALID_ARG,
              "kernel %s: push constants of %zu bytes (at most %d, multiple of 4)",
              vkg__kernel_name(k), push_bytes, VKG_PUSH_MAX);
    size_t block = vkg__kernel_push_bytes(k);
    VKG_CHECK(push_bytes >= block && push_bytes <= (block + 7) / 8 * 8, VKG_ERR_INVALID_ARG,
              "kernel %s: push constants of %zu bytes, its shader's block has %zu",
              vkg__kernel_name(k), push_bytes, block);
    if (gx == 0 || gy == 0 || gz == 0)
        return VKG_OK;
    VKG_CHECK(gx <= 65535 && gy <= 65535 && gz <= 65535, VKG_ERR_INVALID_ARG,
              "kernel %s: grid %ux%ux%u exceeds 65535 workgroups per dimension",
              vkg__kernel_name(k), gx, gy, gz);
    VkPipeline pipeline;
    VKG_TRY(vkg__kernel_pipeline(c->dev, k, spec, nspec, subgroup, &pipeline));
    if (c->pending && !c->in_group)
        vkg_cmd_barrier(c);
    int timed = c->queries && c->ntimed < TIMING_CAP;
    if (timed)
        vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries,
                            (uint32_t)(2 * c->ntimed));
    vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (push_bytes)
        vkCmdPushConstants(c->cb, c->dev->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           (uint32_t)push_bytes, push);
    vkCmdDispatch(c->cb, gx, gy, gz);
    if (timed) {
        vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries,
                            (uint32_t)(2 * c->ntimed + 1));
        c->timings[c->ntimed].label = label ? label : vkg__kernel_name(k);
        c->timings[c->ntimed].kernel = k;
        c->ntimed++;
    }
    log_dispatch(c, k, spec, nspec, subgroup, gx, gy, gz);
    c->pending++;
    c->ndispatch++;
    c->nkernel[k]++;
    return VKG_OK;
}

vkg_status vkg_cmd_copy(vkg_cmd *c, vkg_tensor dst, vkg_tensor src, size_t bytes)
{
    VKG_CHECK(bytes <= dst.bytes && bytes <= src.bytes, VKG_ERR_INVALID_ARG,
              "copy of %zu bytes between tensors of %zu and %zu bytes", bytes, dst.bytes,
              src.bytes);
    if (bytes == 0)
        return VKG_OK;
    if (c->pending)
        vkg_cmd_barrier(c);
    VkBufferCopy region = {.srcOffset = src.offset, .dstOffset = dst.offset, .size = bytes};
    vkCmdCopyBuffer(c->cb, vkg__tensor_buffer(src), vkg__tensor_buffer(dst), 1, &region);
    c->pending = 1;
    return VKG_OK;
}

vkg_status vkg_cmd_end(vkg_cmd *c)
{
    VKG_CHECK(c->recording, VKG_ERR_STATE, "vkg_cmd_end without vkg_cmd_begin");
    /* Make every write visible to the host (reads of mapped memory after the wait). */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                         VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT};
    c->nbarrier++;
    vkCmdPipelineBarrier(c->cb,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                             VK_PIPELINE_STAGE_TRANSFER_BIT,
                         0, 1, &mb, 0, NULL, 0, NULL);
    VKG_VK(vkEndCommandBuffer(c->cb));
    c->recording = 0;
    return VKG_OK;
}

vkg_status vkg_cmd_submit(vkg_cmd *c, uint64_t *value)
{
    VKG_CHECK(!c->recording, VKG_ERR_STATE, "submit of a command list still being recorded");
    c->have_timings = 0;
    return vkg__device_submit(c->dev, c->cb, value);
}

static vkg_status collect_timings(vkg_cmd *c)
{
    if (!c->queries || c->ntimed == 0)
        return VKG_OK;
    uint64_t *ticks = malloc((size_t)c->ntimed * 2 * sizeof *ticks);
    VKG_CHECK(ticks, VKG_ERR_NOMEM, "no memory for timestamps");
    VkResult r = vkGetQueryPoolResults(c->dev->device, c->queries, 0, (uint32_t)(2 * c->ntimed),
                                       (size_t)c->ntimed * 2 * sizeof *ticks, ticks, sizeof *ticks,
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS) {
        free(ticks);
        return VKG_FAIL(VKG_ERR_VULKAN, "vkGetQueryPoolResults: %s", vkg__vk_result_str(r));
    }
    for (int i = 0; i < c->ntimed; i++)
        c->timings[i].ns = (double)(ticks[2 * i + 1] - ticks[2 * i]) * c->dev->timestamp_period;
    free(ticks);
    c->have_timings = 1;
    return VKG_OK;
}

vkg_status vkg_cmd_wait(vkg_cmd *c, uint64_t value, uint64_t timeout_ns)
{
    VKG_TRY(vkg__device_wait(c->dev, value, timeout_ns ? timeout_ns : 600ull * 1000000000ull));
    return collect_timings(c);
}

vkg_status vkg_cmd_run(vkg_cmd *c, uint64_t timeout_ns)
{
    uint64_t value;
    VKG_TRY(vkg_cmd_submit(c, &value));
    return vkg_cmd_wait(c, value, timeout_ns);
}

int vkg_cmd_timings(vkg_cmd *c, const vkg_cmd_timing **out)
{
    *out = c->timings;
    return c->have_timings ? c->ntimed : 0;
}

int vkg_cmd_dispatch_count(const vkg_cmd *c)
{
    return c->ndispatch;
}

int vkg_cmd_barrier_count(const vkg_cmd *c)
{
    return c->nbarrier;
}

vkg_device_t *vkg_cmd_device(const vkg_cmd *c)
{
    return c->dev;
}
