/* Opening a device: selection by index or name, the required-feature check, the logical device
 * with one compute queue, the command pool, the timeline semaphore and the shared pipeline layout.
 * Also the memory type of each use (chosen by memtype.c) and submit/wait on the timeline. Memory
 * lives in arena.c, pipelines in kernel.c; the ops choose their kernels from what it publishes
 * (src/ops/tuning.c). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "vk/instance.h"
#include "vk/coopmat.h"
#include "vk/pipestats.h"
#include "vk/vk.h"

vkg_device_opts vkg_device_opts_default(void)
{
    vkg_device_opts o = {.select = NULL, .validation = 0, .profiling = 0, .force_staging = 0};
    return o;
}

const char *vkg_device_coopmat_note(const vkg_device_t *dev)
{
    return dev->coopmat_note;
}

static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return n == 0;
}

static int is_number(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

static int type_rank(const char *type)
{
    if (!strcmp(type, "discrete"))
        return 0;
    if (!strcmp(type, "integrated"))
        return 1;
    if (!strcmp(type, "virtual"))
        return 2;
    return 3;
}

static void list_devices(const vkg_device_info *infos, uint32_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s[%u] %s", i ? ", " : "", i, infos[i].name);
    if (n == 0)
        snprintf(buf, cap, "none");
}

/* Pick a physical device index according to opts->select. */
static vkg_status choose(const vkg_device_info *infos, uint32_t n, const char *select,
                         uint32_t *out)
{
    char names[768];
    list_devices(infos, n, names, sizeof names);
    VKG_CHECK(n > 0, VKG_ERR_NOT_FOUND,
              "no Vulkan device found (Debian: apt-get install "
              "mesa-vulkan-drivers for the CPU device lavapipe)");
    if (select && *select) {
        if (is_number(select)) {
            unsigned long idx = strtoul(select, NULL, 10);
            VKG_CHECK(idx < n, VKG_ERR_NOT_FOUND, "device %s does not exist; devices: %s", select,
                      names);
            *out = (uint32_t)idx;
        } else {
            uint32_t i = 0;
            while (i < n && !contains_nocase(infos[i].name, select))
                i++;
            VKG_CHECK(i < n, VKG_ERR_NOT_FOUND, "no device name contains \"%s\"; devices: %s",
                      select, names);
            *out = i;
        }
        VKG_CHECK(infos[*out].suitable, VKG_ERR_UNSUPPORTED, "device [%u] %s lacks %s", *out,
                  infos[*out].name, infos[*out].missing);
        return VKG_OK;
    }
    int best = -1;
    for (uint32_t i = 0; i < n; i++)
        if (infos[i].suitable &&
            (best < 0 || type_rank(infos[i].type) < type_rank(infos[best].type)))
            best = (int)i;
    VKG_CHECK(best >= 0, VKG_ERR_UNSUPPORTED, "no device has every required feature (%s lacks %s)",
              infos[0].name, infos[0].missing);
    *out = (uint32_t)best;
    return VKG_OK;
}

/* The usages arena.c gives its buffers: device arenas are storage buffers with device
 * addresses; host arenas and the staging buffer are copy sources and destinations only. */
static const VkBufferUsageFlags pool_usage =
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
static const VkBufferUsageFlags host_usage =
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

/* The memoryTypeBits of buffers of this usage. Vulkan makes them the same for every buffer with
 * the same usage and create flags, so a small probe buffer speaks for arenas of any size. */
static vkg_status buffer_type_bits(vkg_device_t *dev, VkBufferUsageFlags usage, uint32_t *bits)
{
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = 256,
                              .usage = usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer probe = VK_NULL_HANDLE;
    VKG_VK(vkCreateBuffer(dev->device, &bci, NULL, &probe));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev->device, probe, &req);
    vkDestroyBuffer(dev->device, probe, NULL);
    *bits = req.memoryTypeBits;
    return VKG_OK;
}

static void describe_choice(const VkPhysicalDeviceMemoryProperties *mem, uint32_t t,
                            vkg_memory_choice *out)
{
    out->type = (int)t;
    vkg__memtype_flags_str(mem->memoryTypes[t].propertyFlags, out->flags, sizeof out->flags);
    out->heap = (int)mem->memoryTypes[t].heapIndex;
    out->heap_bytes = mem->memoryHeaps[mem->memoryTypes[t].heapIndex].size;
}

/* Choose the memory type of each use (vk/memtype.h) for the buffers arena.c creates and record
 * them in dev and dev->info. Unified memory is used unless force_staging is set or no
 * device-local type can be mapped, in which case the device is treated as discrete. */
static vkg_status choose_memory(vkg_device_t *dev)
{
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(dev->phys, &mem);
    uint32_t pool_bits = 0, host_bits = 0;
    VKG_TRY(buffer_type_bits(dev, pool_usage, &pool_bits));
    VKG_TRY(buffer_type_bits(dev, host_usage, &host_bits));
    int unified = dev->info.unified_memory && !dev->opts.force_staging;
    int pool = vkg__memtype_choose(&mem, pool_bits, VKG_MEM_POOL, unified);
    if (pool < 0 && unified) {
        unified = 0;
        pool = vkg__memtype_choose(&mem, pool_bits, VKG_MEM_POOL, 0);
    }
    VKG_CHECK(pool >= 0, VKG_ERR_UNSUPPORTED,
              "%s has no device-local memory type for storage buffers (memoryTypeBits 0x%x)",
              dev->info.name, pool_bits);
    int readback = vkg__memtype_choose(&mem, host_bits, VKG_MEM_READBACK, unified);
    int upload = vkg__memtype_choose(&mem, host_bits, VKG_MEM_UPLOAD, unified);
    VKG_CHECK(readback >= 0 && upload >= 0, VKG_ERR_UNSUPPORTED,
              "%s has no host-visible coherent memory type for transfer buffers "
              "(memoryTypeBits 0x%x)",
              dev->info.name, host_bits);
    dev->info.unified_memory = unified;
    dev->mem_type_device = (uint32_t)pool;
    dev->mem_type_host = (uint32_t)readback;
    dev->mem_type_upload = (uint32_t)upload;
    describe_choice(&mem, dev->mem_type_device, &dev->info.mem_pool);
    describe_choice(&mem, dev->mem_type_host, &dev->info.mem_readback);
    describe_choice(&mem, dev->mem_type_upload, &dev->info.mem_upload);
    dev->info.readback_uncached =
        !(mem.memoryTypes[readback].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    return VKG_OK;
}

/* VKG_TUNING_AS=nvidia|amd|intel|discrete (tests): the device presented to the ops' tuning as a
 * discrete GPU of that vendor (discrete: one without a row of its own in src/ops/mmt.c), with a
 * discrete GPU's shared memory (48 KiB, the least of NVIDIA's, AMD's and Intel's) where the device
 * has more, so that the GPU kernels' forms and limits run on lavapipe before a GPU meets them.
 * Unset: the device's own type and vendor. */
static vkg_status tuning_as(vkg_device_t *dev, VkPhysicalDeviceType *type, uint32_t *vendor)
{
    static const struct {
        const char *name;
        uint32_t vendor;
    } as[] = {{"nvidia", 0x10DE}, {"amd", 0x1002}, {"intel", 0x8086}, {"discrete", 0}};
    const char *env = getenv("VKG_TUNING_AS");
    if (!env || !*env)
        return VKG_OK;
    for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
        if (!strcmp(env, as[i].name)) {
            *type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, *vendor = as[i].vendor;
            if (dev->info.max_shared_memory > 48u * 1024u)
                dev->info.max_shared_memory = 48u * 1024u;
            return VKG_OK;
        }
    return VKG_FAIL(VKG_ERR_INVALID_ARG,
                    "VKG_TUNING_AS='%s' is not nvidia, amd, intel or discrete (unset it for the "
                    "device's own tuning)",
                    env);
}

static vkg_status open_logical(vkg_device_t *dev)
{
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(dev->phys, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    nq = nq > 16 ? 16 : nq;
    vkGetPhysicalDeviceQueueFamilyProperties(dev->phys, &nq, qf);
    /* Prefer a compute family without graphics (dedicated compute queues on discrete GPUs). */
    int family = -1;
    for (uint32_t q = 0; q < nq; q++)
        if ((qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
            (family < 0 || !(qf[q].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            family = (int)q;
    VKG_CHECK(family >= 0, VKG_ERR_UNSUPPORTED, "%s has no compute queue", dev->info.name);
    dev->queue_family = (uint32_t)family;
    dev->info.timestamps = qf[family].timestampValidBits > 0;

    uint32_t next = 0;
    VKG_VK(vkEnumerateDeviceExtensionProperties(dev->phys, NULL, &next, NULL));
    VkExtensionProperties *exts = calloc(next ? next : 1, sizeof *exts);
    VKG_CHECK(exts, VKG_ERR_NOMEM, "no memory for device extensions");
    /* Optional extensions, enabled where present. */
    const char *optional[2] = {"VK_KHR_portability_subset", "VK_EXT_external_memory_host"};
    const char *ext_names[6];
    uint32_t enabled = 0;
    int host_import = 0;
    if (vkEnumerateDeviceExtensionProperties(dev->phys, NULL, &next, exts) == VK_SUCCESS)
        for (uint32_t o = 0; o < 2; o++)
            for (uint32_t i = 0; i < next; i++)
                if (!strcmp(exts[i].extensionName, optional[o])) {
                    ext_names[enabled++] = optional[o];
                    host_import |= o == 1;
                    break;
                }
    free(exts);
    /* Subgroup size control where the device has it for compute (describe checked both): the
     * tiled matmul's table may require a subgroup size. */
    if (dev->info.subgroup_size_control)
        ext_names[enabled++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sgcf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT,
        .subgroupSizeControl = VK_TRUE};

    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = dev->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = dev->info.subgroup_size_control ? &sgcf : NULL,
        .bufferDeviceAddress = VK_TRUE,
        .timelineSemaphore = VK_TRUE,
    };
    vkg_coopmat_enable coopmat; /* only with opts.coopmat on: its extension and features */
    VKG_TRY(vkg__coopmat_prepare(dev, &coopmat, ext_names, &enabled, &f12));
    vkg_pipestats_enable pipestats; /* only with opts.pipeline_stats, where the device has it */
    vkg__pipestats_prepare(dev, &pipestats, ext_names, &enabled, &f12);
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = &f12};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &feats,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = enabled,
                              .ppEnabledExtensionNames = ext_names};
    VKG_VK(vkCreateDevice(dev->phys, &dci, NULL, &dev->device));
    vkg__pipestats_load(dev);
    if (host_import)
        dev->get_host_pointer_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(
            dev->device, "vkGetMemoryHostPointerPropertiesEXT");
    dev->info.external_memory_host =
        dev->get_host_pointer_props != NULL && vkg__host_importable(dev->phys);
    if (!dev->info.external_memory_host)
        dev->info.host_import_alignment = 0;
    vkGetDeviceQueue(dev->device, dev->queue_family, 0, &dev->queue);

    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = dev->queue_family};
    VKG_VK(vkCreateCommandPool(dev->device, &pci, NULL, &dev->pool));

    VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                     .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
    VKG_VK(vkCreateSemaphore(dev->device, &sci, NULL, &dev->timeline));

    VkPushConstantRange range = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = VKG_PUSH_MAX};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &range};
    VKG_VK(vkCreatePipelineLayout(dev->device, &lci, NULL, &dev->layout));

    VKG_TRY(choose_memory(dev));
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(dev->phys, &props);
    dev->timestamp_period = props.limits.timestampPeriod;
    dev->tune_type = props.deviceType;
    dev->tune_vendor = props.vendorID;
    dev->coopmat_config = coopmat.config;
    return tuning_as(dev, &dev->tune_type, &dev->tune_vendor);
}

/* The allocation limit the opts or VKG_MAX_ALLOCATION impose, where smaller than the driver's. */
static vkg_status apply_allocation_cap(vkg_device_t *dev)
{
    uint64_t cap = dev->opts.max_allocation;
    const char *env = getenv("VKG_MAX_ALLOCATION");
    if (env && *env) {
        uint64_t v = 0;
        int neg = 0;
        VKG_CHECK(vkg_parse_whole(env, &neg, &v) && !neg && v >= 4096, VKG_ERR_INVALID_ARG,
                  "VKG_MAX_ALLOCATION='%s' is not a size of at least 4096 bytes (e.g. 33554432, "
                  "32M or 2G)",
                  env);
        cap = cap && cap < v ? cap : v;
    }
    if (cap && (cap < dev->info.max_allocation_bytes || !dev->info.max_allocation_bytes))
        dev->info.max_allocation_bytes = cap;
    return VKG_OK;
}

vkg_status vkg_device_create(const vkg_device_opts *opts, vkg_device_t **out)
{
    vkg_status st = VKG_OK;
    vkg_device_opts defaults = vkg_device_opts_default();
    vkg_device_t *dev = calloc(1, sizeof *dev);
    VKG_CHECK(dev, VKG_ERR_NOMEM, "no memory for a device");
    dev->opts = opts ? *opts : defaults;
    dev->opts.select = NULL; /* not kept beyond this call */
    atomic_init(&dev->tuning, NULL);
    dev->coopmat_config = -1;
    VkPhysicalDevice *phys = NULL;
    vkg_device_info *infos = NULL;
    uint32_t n = 0, chosen = 0;

    VKG_TRY_GOTO(
        st, vkg__instance_create(dev->opts.validation, dev, &dev->instance, &dev->messenger), fail);
    VKG_TRY_GOTO(st, vkg__physical_devices(dev->instance, &phys, &n), fail);
    infos = calloc(n ? n : 1, sizeof *infos);
    VKG_CHECK_GOTO(st, infos, VKG_ERR_NOMEM, fail, "no memory for device descriptions");
    for (uint32_t i = 0; i < n; i++) {
        vkg__device_describe(phys[i], (int)i, &infos[i]);
        vkg__coopmat_describe(dev->instance, phys[i], &infos[i]);
    }
    VKG_TRY_GOTO(st, choose(infos, n, opts ? opts->select : NULL, &chosen), fail);
    dev->phys = phys[chosen];
    dev->info = infos[chosen];
    if (dev->opts.memory_limit && dev->opts.memory_limit < dev->info.device_local_bytes)
        dev->info.device_local_bytes = dev->opts.memory_limit;
    VKG_TRY_GOTO(st, apply_allocation_cap(dev), fail);
    VKG_TRY_GOTO(st, open_logical(dev), fail);
    free(phys);
    free(infos);
    *out = dev;
    return VKG_OK;
fail:
    free(phys);
    free(infos);
    vkg_device_destroy(&dev);
    return st;
}

void vkg_device_destroy(vkg_device_t **pdev)
{
    vkg_device_destroy_report(pdev, NULL, 0);
}

int vkg_device_destroy_report(vkg_device_t **pdev, char *first, size_t cap)
{
    vkg_device_t *dev = pdev ? *pdev : NULL;
    if (first && cap)
        first[0] = '\0';
    if (!dev)
        return 0;
    if (dev->device) {
        vkDeviceWaitIdle(dev->device);
        vkg__kernels_release(dev);
        for (int i = 0; i < 2; i++) {
            if (dev->staging[i])
                vkDestroyBuffer(dev->device, dev->staging[i], NULL);
            if (dev->staging_mem[i])
                vkFreeMemory(dev->device, dev->staging_mem[i], NULL);
        }
        if (dev->layout)
            vkDestroyPipelineLayout(dev->device, dev->layout, NULL);
        if (dev->timeline)
            vkDestroySemaphore(dev->device, dev->timeline, NULL);
        if (dev->pool)
            vkDestroyCommandPool(dev->device, dev->pool, NULL);
        vkDestroyDevice(dev->device, NULL); /* the layer reports leaked objects here */
    }
    int n = atomic_load(&dev->validation_count);
    if (n && first && cap)
        snprintf(first, cap, "%s", dev->validation_first);
    vkg__instance_destroy(dev->instance, dev->messenger);
    free(atomic_load(&dev->tuning)); /* the ops' (src/ops/tuning.c): plain memory */
    free(dev);
    *pdev = NULL;
    return n;
}

const vkg_device_info *vkg_device_get_info(const vkg_device_t *dev)
{
    return &dev->info;
}

int vkg_device_validation_messages(const vkg_device_t *dev, const char **first)
{
    int n = atomic_load(&((vkg_device_t *)dev)->validation_count);
    if (first)
        *first = n ? dev->validation_first : "";
    return n;
}

vkg_status vkg__device_submit(vkg_device_t *dev, VkCommandBuffer cb, uint64_t *value)
{
    uint64_t signal = dev->timeline_value + 1;
    VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                         .signalSemaphoreValueCount = 1,
                                         .pSignalSemaphoreValues = &signal};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = &tsi,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cb,
                       .signalSemaphoreCount = 1,
                       .pSignalSemaphores = &dev->timeline};
    VKG_VK(vkQueueSubmit(dev->queue, 1, &si, VK_NULL_HANDLE));
    dev->timeline_value = signal;
    if (value)
        *value = signal;
    return VKG_OK;
}

vkg_status vkg__device_wait(vkg_device_t *dev, uint64_t value, uint64_t timeout_ns)
{
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &dev->timeline,
                              .pValues = &value};
    VkResult r = vkWaitSemaphores(dev->device, &wi, timeout_ns);
    VKG_CHECK(r != VK_TIMEOUT, VKG_ERR_TIMEOUT, "GPU work on %s did not finish within %.1f s",
              dev->info.name, (double)timeout_ns / 1e9);
    VKG_CHECK(r == VK_SUCCESS, vkg__vk_status(r), "vkWaitSemaphores: %s", vkg__vk_result_str(r));
    return VKG_OK;
}
