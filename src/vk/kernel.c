/* The kernel table: one row per embedded shader (name, SPIR-V, push-constant bytes; the shaders
 * are the rows of src/ops/op_table.def, made into VKG_SHADER_LIST by the build), and the compute
 * pipelines built from it, one per distinct set of specialization constants, created on first use
 * and kept until the device is destroyed. */
#include <stdlib.h>
#include <string.h>

#include "vk/coopmat.h"
#include "vk/pipestats.h"
#include "vk/vk.h"

typedef struct kernel_row {
    const char *name;
    const uint32_t *spv;
    const size_t *words;
    uint32_t push_bytes;
} kernel_row;

static const kernel_row kernel_table[VKG_KERNEL_COUNT] = {
#define VKG_KERNEL_ROW_(name)                                                                      \
    {#name, vkg_spv_##name, &vkg_spv_##name##_words, VKG_PUSH_BYTES_##name},
    VKG_SHADER_LIST(VKG_KERNEL_ROW_)
#undef VKG_KERNEL_ROW_
};

const char *vkg__kernel_name(vkg_kernel_id k)
{
    return (unsigned)k < VKG_KERNEL_COUNT ? kernel_table[k].name : "?";
}

uint32_t vkg__kernel_push_bytes(vkg_kernel_id k)
{
    return (unsigned)k < VKG_KERNEL_COUNT ? kernel_table[k].push_bytes : 0;
}

static vkg_status build_pipeline(vkg_device_t *dev, vkg_kernel_id k, const uint32_t *spec,
                                 int nspec, uint32_t subgroup, VkPipeline *out)
{
    const kernel_row *row = &kernel_table[k];
    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = *row->words * sizeof(uint32_t),
                                     .pCode = row->spv};
    uint32_t *khr = NULL; /* the cooperative-matrix kernel for a device with only the KHR form */
    if (k == VKG_KERNEL_matmul_coopmat && dev->coopmat_rewrite) {
        size_t words = 0;
        VKG_TRY(vkg__spv_coopmat_nv_to_khr(row->spv, *row->words, &khr, &words));
        smci.codeSize = words * sizeof(uint32_t), smci.pCode = khr;
    }
    VkShaderModule module;
    VkResult mr = vkCreateShaderModule(dev->device, &smci, NULL, &module);
    free(khr);
    VKG_CHECK(mr == VK_SUCCESS, vkg__vk_status(mr),
              "cannot create the shader module of kernel %s: %s", row->name,
              vkg__vk_result_str(mr));
    VkSpecializationMapEntry entries[VKG_MAX_SPEC];
    for (int i = 0; i < nspec; i++) {
        entries[i].constantID = (uint32_t)i;
        entries[i].offset = (uint32_t)(i * sizeof(uint32_t));
        entries[i].size = sizeof(uint32_t);
    }
    VkSpecializationInfo si = {.mapEntryCount = (uint32_t)nspec,
                               .pMapEntries = entries,
                               .dataSize = (size_t)nspec * sizeof(uint32_t),
                               .pData = spec};
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rss = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT,
        .requiredSubgroupSize = subgroup};
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = vkg_pipestats_enabled(dev) ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .pNext = subgroup ? &rss : NULL,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main",
                  .pSpecializationInfo = nspec ? &si : NULL},
        .layout = dev->layout,
    };
    VkResult r = vkCreateComputePipelines(dev->device, VK_NULL_HANDLE, 1, &cpci, NULL, out);
    vkDestroyShaderModule(dev->device, module, NULL);
    VKG_CHECK(r == VK_SUCCESS, vkg__vk_status(r), "cannot build the pipeline of kernel %s: %s",
              row->name, vkg__vk_result_str(r));
    return VKG_OK;
}

vkg_status vkg__kernel_pipeline(vkg_device_t *dev, vkg_kernel_id k, const uint32_t *spec, int nspec,
                                uint32_t subgroup, VkPipeline *out)
{
    VKG_CHECK((unsigned)k < VKG_KERNEL_COUNT, VKG_ERR_INVALID_ARG, "no kernel with id %d", (int)k);
    VKG_CHECK(nspec >= 0 && nspec <= VKG_MAX_SPEC, VKG_ERR_INVALID_ARG,
              "kernel %s: %d specialization constants (at most %d)", kernel_table[k].name, nspec,
              VKG_MAX_SPEC);
    vkg_kernel_cache *cache = &dev->kernels[k];
    for (int i = 0; i < cache->count; i++) {
        vkg_kernel_variant *v = &cache->variants[i];
        if (v->nspec == nspec && v->subgroup == subgroup &&
            !memcmp(v->spec, spec, (size_t)nspec * sizeof *spec)) {
            v->used = dev->pipestats_epoch;
            *out = v->pipeline;
            return VKG_OK;
        }
    }
    if (cache->count == cache->cap) {
        int cap = cache->cap ? cache->cap * 2 : 4;
        vkg_kernel_variant *grown = realloc(cache->variants, (size_t)cap * sizeof *grown);
        VKG_CHECK(grown, VKG_ERR_NOMEM, "no memory for pipeline variants");
        cache->variants = grown;
        cache->cap = cap;
    }
    vkg_kernel_variant *v = &cache->variants[cache->count];
    memset(v, 0, sizeof *v);
    if (nspec)
        memcpy(v->spec, spec, (size_t)nspec * sizeof *spec);
    v->nspec = nspec;
    v->subgroup = subgroup;
    VKG_TRY(build_pipeline(dev, k, spec, nspec, subgroup, &v->pipeline));
    v->used = dev->pipestats_epoch;
    cache->count++;
    *out = v->pipeline;
    return VKG_OK;
}

void vkg__kernels_release(vkg_device_t *dev)
{
    for (int k = 0; k < VKG_KERNEL_COUNT; k++) {
        vkg_kernel_cache *cache = &dev->kernels[k];
        for (int i = 0; i < cache->count; i++)
            vkDestroyPipeline(dev->device, cache->variants[i].pipeline, NULL);
        free(cache->variants);
        memset(cache, 0, sizeof *cache);
    }
}
