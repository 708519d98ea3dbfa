/* Pipeline statistics through VK_KHR_pipeline_executable_properties: enabling the extension at
 * device creation when asked for and present, and reading back, for the pipelines ops used in a
 * window, every statistic of every executable as the driver names it. It does not build
 * pipelines (src/vk/kernel.c adds the capture flag) and does not print. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/pipestats.h"

#define EXT_NAME VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME

static const char *const not_asked = "pipeline statistics were not asked for";
static const char *const no_ext = "the driver gives no pipeline statistics (" EXT_NAME " absent)";
static const char *const no_feature =
    "the driver gives no pipeline statistics (" EXT_NAME " lists no pipelineExecutableInfo)";
static const char *const no_entry =
    "the driver gives no pipeline statistics (" EXT_NAME " has no entry points)";

void vkg__pipestats_prepare(vkg_device_t *dev, vkg_pipestats_enable *e, const char **ext_names,
                            uint32_t *n, VkPhysicalDeviceVulkan12Features *f12)
{
    memset(e, 0, sizeof *e);
    dev->pipestats_absent = not_asked;
    if (!dev->opts.pipeline_stats)
        return;
    dev->pipestats_absent = no_ext;
    uint32_t count = 0;
    if (vkEnumerateDeviceExtensionProperties(dev->phys, NULL, &count, NULL) != VK_SUCCESS)
        return;
    VkExtensionProperties *exts = calloc(count ? count : 1, sizeof *exts);
    int have = 0;
    if (exts && vkEnumerateDeviceExtensionProperties(dev->phys, NULL, &count, exts) == VK_SUCCESS)
        for (uint32_t i = 0; i < count && !have; i++)
            have = !strcmp(exts[i].extensionName, EXT_NAME);
    free(exts);
    if (!have)
        return;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR query = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = &query};
    vkGetPhysicalDeviceFeatures2(dev->phys, &feats);
    if (!query.pipelineExecutableInfo) {
        dev->pipestats_absent = no_feature;
        return;
    }
    e->feat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
    e->feat.pipelineExecutableInfo = VK_TRUE;
    e->feat.pNext = f12->pNext;
    f12->pNext = &e->feat;
    ext_names[(*n)++] = EXT_NAME;
    dev->pipestats_absent = NULL;
}

void vkg__pipestats_load(vkg_device_t *dev)
{
    if (dev->pipestats_absent)
        return;
    dev->get_exec_props = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
        dev->device, "vkGetPipelineExecutablePropertiesKHR");
    dev->get_exec_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
        dev->device, "vkGetPipelineExecutableStatisticsKHR");
    if (!dev->get_exec_props || !dev->get_exec_stats) {
        dev->get_exec_props = NULL;
        dev->get_exec_stats = NULL;
        dev->pipestats_absent = no_entry;
    }
}

int vkg_pipestats_enabled(const vkg_device_t *dev)
{
    return dev->pipestats_absent == NULL;
}

const char *vkg_pipestats_absence(const vkg_device_t *dev)
{
    return dev->pipestats_absent;
}

void vkg_pipestats_mark(vkg_device_t *dev)
{
    dev->pipestats_epoch++;
}

/* A statistic's value as text, in its format. */
static void format_value(const VkPipelineExecutableStatisticKHR *s, char *out, size_t size)
{
    switch (s->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        snprintf(out, size, "%s", s->value.b32 ? "true" : "false");
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        snprintf(out, size, "%" PRId64, s->value.i64);
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        snprintf(out, size, "%" PRIu64, s->value.u64);
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
        snprintf(out, size, "%g", s->value.f64);
        break;
    default:
        snprintf(out, size, "?");
    }
}

/* The executables of one pipeline and their statistics into *p. */
static vkg_status query_pipeline(vkg_device_t *dev, const vkg_kernel_variant *v, vkg_kernel_id k,
                                 vkg_pipestats *p)
{
    memset(p, 0, sizeof *p);
    p->kernel = k;
    memcpy(p->spec, v->spec, sizeof p->spec);
    p->nspec = v->nspec;
    p->subgroup = v->subgroup;
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = v->pipeline};
    VkPipelineExecutablePropertiesKHR props[VKG_PIPESTAT_EXECS];
    for (int i = 0; i < VKG_PIPESTAT_EXECS; i++)
        props[i] = (VkPipelineExecutablePropertiesKHR){
            .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
    uint32_t nexec = VKG_PIPESTAT_EXECS;
    VkResult r = dev->get_exec_props(dev->device, &pi, &nexec, props);
    VKG_CHECK(r == VK_SUCCESS || r == VK_INCOMPLETE, vkg__vk_status(r),
              "cannot list the executables of kernel %s's pipeline: %s", vkg__kernel_name(k),
              vkg__vk_result_str(r));
    VkPipelineExecutableStatisticKHR stats[VKG_PIPESTAT_MAX];
    for (uint32_t e = 0; e < nexec; e++) {
        vkg_pipestat_exec *x = &p->exec[e];
        snprintf(x->name, sizeof x->name, "%.*s", (int)sizeof x->name - 1, props[e].name);
        x->subgroup = props[e].subgroupSize;
        for (int i = 0; i < VKG_PIPESTAT_MAX; i++)
            stats[i] = (VkPipelineExecutableStatisticKHR){
                .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
        VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                          .pipeline = v->pipeline,
                                          .executableIndex = e};
        uint32_t nstats = VKG_PIPESTAT_MAX;
        r = dev->get_exec_stats(dev->device, &ei, &nstats, stats);
        VKG_CHECK(r == VK_SUCCESS || r == VK_INCOMPLETE, vkg__vk_status(r),
                  "cannot read the statistics of kernel %s's pipeline: %s", vkg__kernel_name(k),
                  vkg__vk_result_str(r));
        for (uint32_t i = 0; i < nstats; i++) {
            snprintf(x->stats[i].name, sizeof x->stats[i].name, "%.*s",
                     (int)sizeof x->stats[i].name - 1, stats[i].name);
            format_value(&stats[i], x->stats[i].value, sizeof x->stats[i].value);
        }
        x->nstats = (int)nstats;
    }
    p->nexec = (int)nexec;
    return VKG_OK;
}

vkg_status vkg_pipestats_collect(vkg_device_t *dev, vkg_pipestats **out, int *count)
{
    *out = NULL;
    *count = 0;
    VKG_CHECK(!dev->pipestats_absent, VKG_ERR_UNSUPPORTED, "%s: %s", dev->info.name,
              dev->pipestats_absent);
    int n = 0;
    for (int k = 0; k < VKG_KERNEL_COUNT; k++)
        for (int i = 0; i < dev->kernels[k].count; i++)
            n += dev->kernels[k].variants[i].used == dev->pipestats_epoch;
    if (n == 0)
        return VKG_OK;
    vkg_pipestats *p = calloc((size_t)n, sizeof *p);
    VKG_CHECK(p, VKG_ERR_NOMEM, "no memory for the statistics of %d pipelines", n);
    int j = 0;
    for (int k = 0; k < VKG_KERNEL_COUNT; k++)
        for (int i = 0; i < dev->kernels[k].count; i++) {
            const vkg_kernel_variant *v = &dev->kernels[k].variants[i];
            if (v->used != dev->pipestats_epoch)
                continue;
            vkg_status st = query_pipeline(dev, v, (vkg_kernel_id)k, &p[j++]);
            if (st != VKG_OK) {
                free(p);
                return st;
            }
        }
    *out = p;
    *count = n;
    return VKG_OK;
}
