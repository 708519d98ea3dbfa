/* Pipeline statistics (VK_KHR_pipeline_executable_properties): what the driver says about the
 * code it compiled for each pipeline (registers, spills, shared memory, ... as the driver names
 * them), for `vkgpt bench ops`. Asked for with vkg_device_opts.pipeline_stats; enabled at device
 * creation where the device has the extension and its pipelineExecutableInfo feature; pipelines
 * are then built with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR. This module does not
 * interpret the statistics: every one the driver gives is passed on, named as the driver names
 * it. */
#ifndef VKG_VK_PIPESTATS_H
#define VKG_VK_PIPESTATS_H

#include "vk/vk.h"

#define VKG_PIPESTAT_MAX 32  /* statistics kept per executable */
#define VKG_PIPESTAT_EXECS 4 /* executables kept per pipeline */

/* One statistic: the driver's name for it and its value as text ("40", "true", "0.5"). */
typedef struct vkg_pipestat {
    char name[64];
    char value[32];
} vkg_pipestat;

/* One executable (a compiled stage) of a pipeline: its name and subgroup size as the driver
 * gives them, and its statistics. */
typedef struct vkg_pipestat_exec {
    char name[64];
    uint32_t subgroup;
    int nstats;
    vkg_pipestat stats[VKG_PIPESTAT_MAX];
} vkg_pipestat_exec;

/* One pipeline: the kernel, its specialization constants and required subgroup size (0: none),
 * and its executables. */
typedef struct vkg_pipestats {
    vkg_kernel_id kernel;
    uint32_t spec[VKG_MAX_SPEC];
    int nspec;
    uint32_t subgroup;
    int nexec;
    vkg_pipestat_exec exec[VKG_PIPESTAT_EXECS];
} vkg_pipestats;

/* What vkCreateDevice is given for the statistics: kept alive by the caller until then. */
typedef struct vkg_pipestats_enable {
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR feat;
} vkg_pipestats_enable;

/* For dev->opts.pipeline_stats: when the device lists VK_KHR_pipeline_executable_properties and
 * its pipelineExecutableInfo feature, append the extension to ext_names (room for one more at
 * *n) and chain the feature into f12; records in dev why there are no statistics otherwise.
 * Without opts.pipeline_stats: nothing. Never fails: a device without the extension still
 * opens. */
void vkg__pipestats_prepare(vkg_device_t *dev, vkg_pipestats_enable *e, const char **ext_names,
                            uint32_t *n, VkPhysicalDeviceVulkan12Features *f12);
/* After vkCreateDevice: load the extension's entry points (statistics off when they are
 * missing). */
void vkg__pipestats_load(vkg_device_t *dev);

/* 1 when the device's pipelines capture statistics (asked for, and the driver has them). */
int vkg_pipestats_enabled(const vkg_device_t *dev);
/* Why the device gives no statistics, as a sentence fragment for the user ("the driver gives no
 * pipeline statistics (VK_KHR_pipeline_executable_properties absent)"); NULL when it gives them.
 * The string is static. */
const char *vkg_pipestats_absence(const vkg_device_t *dev);
/* Start a new window of use: vkg_pipestats_collect reports the pipelines that ops recorded
 * (built or reused) after this call. */
void vkg_pipestats_mark(vkg_device_t *dev);
/* The statistics of every pipeline used since the last vkg_pipestats_mark, in kernel-table
 * order: *out (malloc'd, free() it; NULL when *count is 0) and *count. Errors:
 * VKG_ERR_UNSUPPORTED when the device gives no statistics (the message says why, as
 * vkg_pipestats_absence), VKG_ERR_NOMEM, VKG_ERR_VULKAN from the driver's queries (naming the
 * kernel). */
vkg_status vkg_pipestats_collect(vkg_device_t *dev, vkg_pipestats **out, int *count);

#endif
