/* Vulkan instances and device listing: creates the instance (portability enumeration when present,
 * the validation layer and a message counter on request), lists physical devices and describes
 * them in vkg_device_info. Logical-device creation lives in device.c. */
#include "vk/instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/coopmat.h"
#include "vk/vk.h"

const char *vkg__vk_result_str(VkResult r)
{
    switch (r) {
#define CASE_(x)                                                                                   \
    case x:                                                                                        \
        return #x;
        CASE_(VK_SUCCESS)
        CASE_(VK_NOT_READY)
        CASE_(VK_TIMEOUT)
        CASE_(VK_INCOMPLETE)
        CASE_(VK_ERROR_OUT_OF_HOST_MEMORY)
        CASE_(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        CASE_(VK_ERROR_INITIALIZATION_FAILED)
        CASE_(VK_ERROR_DEVICE_LOST)
        CASE_(VK_ERROR_MEMORY_MAP_FAILED)
        CASE_(VK_ERROR_LAYER_NOT_PRESENT)
        CASE_(VK_ERROR_EXTENSION_NOT_PRESENT)
        CASE_(VK_ERROR_FEATURE_NOT_PRESENT)
        CASE_(VK_ERROR_INCOMPATIBLE_DRIVER)
        CASE_(VK_ERROR_TOO_MANY_OBJECTS)
        CASE_(VK_ERROR_FORMAT_NOT_SUPPORTED)
        CASE_(VK_ERROR_UNKNOWN)
        CASE_(VK_ERROR_OUT_OF_POOL_MEMORY)
        CASE_(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        CASE_(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef CASE_
    default:
        return "VkResult(unknown)";
    }
}

vkg_status vkg__vk_status(VkResult r)
{
    return (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
               ? VKG_ERR_NOMEM
               : VKG_ERR_VULKAN;
}

static int has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(exts[i].extensionName, name))
            return 1;
    return 0;
}

static int has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkLayerProperties *layers = calloc(n, sizeof *layers);
    int found = 0;
    if (layers && vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(layers[i].layerName, name);
    free(layers);
    return found;
}

/* 0 when the first physical device answers VK_EXT_tooling_info's query (the validation layer
 * answers it) without a validation tool, that is when no validation layer is in the call chain;
 * 1 otherwise (no device to ask fails later, where a device is chosen). */
static int validation_tool_active(VkInstance instance)
{
    PFN_vkGetPhysicalDeviceToolPropertiesEXT tools =
        (PFN_vkGetPhysicalDeviceToolPropertiesEXT)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceToolPropertiesEXT");
    uint32_t n_dev = 1, n = 8;
    VkPhysicalDevice pd;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n_dev, &pd);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n_dev == 0)
        return 1;
    if (!tools)
        return 0;
    VkPhysicalDeviceToolPropertiesEXT props[8];
    for (uint32_t i = 0; i < n; i++)
        props[i] = (VkPhysicalDeviceToolPropertiesEXT){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TOOL_PROPERTIES_EXT};
    r = tools(pd, &n, props);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (props[i].purposes & VK_TOOL_PURPOSE_VALIDATION_BIT_EXT)
            return 1;
    return 0;
}

static vkg_status no_validation_layer(const char *layer)
{
    return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                    "validation requested but %s is neither listed by the Vulkan loader nor "
                    "active (Debian: apt-get install vulkan-validationlayers; under Wine, whose "
                    "vulkan-1.dll lists no layer, VK_INSTANCE_LAYERS=%s in the environment makes "
                    "the host's loader add it)",
                    layer, layer);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    vkg_device_t *dev = user;
    if (!(severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    if (atomic_fetch_add(&dev->validation_count, 1) == 0)
        snprintf(dev->validation_first, sizeof dev->validation_first, "%s",
                 data->pMessage ? data->pMessage : "(no text)");
    return VK_FALSE;
}

vkg_status vkg__instance_create(int validation, vkg_device_t *dev, VkInstance *out,
                                VkDebugUtilsMessengerEXT *messenger)
{
    VKG_TRY(vkg__vk_load());
    uint32_t next = 0;
    VKG_VK(vkEnumerateInstanceExtensionProperties(NULL, &next, NULL));
    VkExtensionProperties *exts = calloc(next ? next : 1, sizeof *exts);
    VKG_CHECK(exts, VKG_ERR_NOMEM, "no memory for %u extension names", next);
    VkResult vr = vkEnumerateInstanceExtensionProperties(NULL, &next, exts);
    int portability =
        vr == VK_SUCCESS && has_extension(exts, next, "VK_KHR_portability_enumeration");
    free(exts);

    const char *ext_names[2];
    uint32_t n_ext = 0;
    if (portability)
        ext_names[n_ext++] = "VK_KHR_portability_enumeration";
    /* The layer is named in the create info when the loader lists it. Wine's vulkan-1.dll lists
     * none and refuses any named one, but the host's loader behind it adds the layers of its
     * environment (VK_INSTANCE_LAYERS, which Wine keeps from Windows programs): an instance is
     * then made without naming it, and the layer checked to be active. */
    const char *layer = "VK_LAYER_KHRONOS_validation";
    int name_layer = 0;
    if (validation) {
        name_layer = has_layer(layer);
        ext_names[n_ext++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkgpt",
        .pEngineName = "vkgpt",
        .apiVersion = VK_API_VERSION_1_2,
    };
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation_message,
        .pUserData = dev,
    };
    /* Synchronization validation catches missing barriers between dependent dispatches. */
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .pNext = &mci,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = enables,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validation && dev ? (const void *)&features : NULL,
        .flags = portability ? VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR : 0,
        .pApplicationInfo = &app,
        .enabledLayerCount = name_layer ? 1u : 0u,
        .ppEnabledLayerNames = &layer,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = ext_names,
    };
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (validation && !name_layer && r == VK_ERROR_EXTENSION_NOT_PRESENT)
        return no_validation_layer(layer);
    VKG_CHECK(r == VK_SUCCESS, vkg__vk_status(r),
              "cannot create a Vulkan instance (%s): is a Vulkan driver installed? (Debian: "
              "apt-get install mesa-vulkan-drivers libvulkan1)",
              vkg__vk_result_str(r));
    vkg__vk_load_instance(*out);
    *messenger = VK_NULL_HANDLE;
    if (validation && dev) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                *out, "vkCreateDebugUtilsMessengerEXT");
        VkResult mr = create ? create(*out, &mci, NULL, messenger) : VK_ERROR_EXTENSION_NOT_PRESENT;
        if (mr != VK_SUCCESS) {
            vkDestroyInstance(*out, NULL);
            *out = VK_NULL_HANDLE;
            return VKG_FAIL(VKG_ERR_VULKAN, "cannot install the validation message handler: %s",
                            vkg__vk_result_str(mr));
        }
    }
    if (validation && !name_layer && !validation_tool_active(*out)) {
        vkg__instance_destroy(*out, *messenger);
        *out = VK_NULL_HANDLE;
        *messenger = VK_NULL_HANDLE;
        return no_validation_layer(layer);
    }
    return VKG_OK;
}

void vkg__instance_destroy(VkInstance instance, VkDebugUtilsMessengerEXT messenger)
{
    if (messenger != VK_NULL_HANDLE) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy)
            destroy(instance, messenger, NULL);
    }
    if (instance != VK_NULL_HANDLE)
        vkDestroyInstance(instance, NULL);
}

static const char *vendor_name(uint32_t id, VkPhysicalDeviceType type)
{
    switch (id) {
    case 0x10DE:
        return "NVIDIA";
    case 0x1002:
        return "AMD";
    case 0x8086:
        return "Intel";
    case 0x106B:
        return "Apple";
    case 0x13B5:
        return "ARM";
    case 0x5143:
        return "Qualcomm";
    case 0x10005:
        return type == VK_PHYSICAL_DEVICE_TYPE_CPU ? "Mesa (CPU)" : "Mesa";
    default:
        return "unknown";
    }
}

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "cpu";
    default:
        return "other";
    }
}

static void append_missing(vkg_device_info *info, const char *what)
{
    size_t len = strlen(info->missing);
    snprintf(info->missing + len, sizeof info->missing - len, "%s%s", len ? ", " : "", what);
}

int vkg__device_has_extension(VkPhysicalDevice phys, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    int found = 0;
    if (e && vkEnumerateDeviceExtensionProperties(phys, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

void vkg__device_describe(VkPhysicalDevice phys, int index, vkg_device_info *info)
{
    memset(info, 0, sizeof *info);
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_import = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    info->external_memory_host = vkg__device_has_extension(phys, "VK_EXT_external_memory_host") &&
                                 vkg__host_importable(phys);
    VkPhysicalDeviceMaintenance4PropertiesKHR maint4 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES_KHR};
    VkPhysicalDeviceMaintenance3Properties maint3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
        .pNext = vkg__device_has_extension(phys, "VK_KHR_maintenance4") ? &maint4 : NULL};
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &maint3};
    int has_sgc = vkg__device_has_extension(phys, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT,
        .pNext = &driver};
    VkPhysicalDeviceSubgroupProperties subgroup = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
        .pNext = has_sgc ? (void *)&sgc : (void *)&driver};
    host_import.pNext = &subgroup;
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = info->external_memory_host ? (void *)&host_import
                                                                             : (void *)&subgroup};
    vkGetPhysicalDeviceProperties2(phys, &props);
    VkPhysicalDeviceProperties *p = &props.properties;
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sgcf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = has_sgc ? &sgcf : NULL};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = p->apiVersion >= VK_API_VERSION_1_2 ? &f11 : NULL};
    vkGetPhysicalDeviceFeatures2(phys, &feats);

    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", p->deviceName);
    snprintf(info->vendor, sizeof info->vendor, "%s", vendor_name(p->vendorID, p->deviceType));
    snprintf(info->type, sizeof info->type, "%s", type_name(p->deviceType));
    if (snprintf(info->driver, sizeof info->driver, "%s %s", driver.driverName, driver.driverInfo) <
        0)
        info->driver[0] = '\0'; /* a cut driver string is fine; it is informational */
    info->vendor_id = p->vendorID;
    info->device_id = p->deviceID;
    info->api_version = p->apiVersion;
    info->subgroup_size = subgroup.subgroupSize;
    if (has_sgc && sgcf.subgroupSizeControl &&
        (sgc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
        info->subgroup_size_control = 1;
        info->subgroup_size_min = sgc.minSubgroupSize;
        info->subgroup_size_max = sgc.maxSubgroupSize;
        info->max_workgroup_subgroups = sgc.maxComputeWorkgroupSubgroups;
    }
    info->max_shared_memory = p->limits.maxComputeSharedMemorySize;
    info->max_workgroup_invocations = p->limits.maxComputeWorkGroupInvocations;
    info->max_push_constants = p->limits.maxPushConstantsSize;
    info->driver_max_allocation = maint3.maxMemoryAllocationSize;
    info->driver_max_buffer = maint4.maxBufferSize;
    info->max_allocation_bytes = maint3.maxMemoryAllocationSize;
    info->host_import_alignment =
        info->external_memory_host ? host_import.minImportedHostPointerAlignment : 0;
    if (maint4.maxBufferSize && maint4.maxBufferSize < info->max_allocation_bytes)
        info->max_allocation_bytes = maint4.maxBufferSize;
    info->buffer_device_address = f12.bufferDeviceAddress;
    info->timeline_semaphore = f12.timelineSemaphore;
    info->shader_float64 = feats.features.shaderFloat64;
    info->shader_int64 = feats.features.shaderInt64;
    info->shader_float16 = f12.shaderFloat16;
    info->storage_16bit = f11.storageBuffer16BitAccess;

    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(phys, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info->device_local_bytes += mem.memoryHeaps[h].size;
    int cpu_like = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                   p->deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t t = 0; t < mem.memoryTypeCount && cpu_like; t++)
        if ((mem.memoryTypes[t].propertyFlags & want) == want)
            info->unified_memory = 1;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    int compute = 0;
    if (qf) {
        vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf);
        for (uint32_t q = 0; q < nq; q++)
            if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
                compute = 1;
                info->timestamps = qf[q].timestampValidBits > 0;
                break;
            }
        free(qf);
    }

    if (p->apiVersion < VK_API_VERSION_1_2)
        append_missing(info, "Vulkan 1.2");
    if (!info->buffer_device_address)
        append_missing(info, "bufferDeviceAddress");
    if (!info->timeline_semaphore)
        append_missing(info, "timelineSemaphore");
    if (!compute)
        append_missing(info, "a compute queue");
    if (info->max_push_constants < VKG_PUSH_MAX)
        append_missing(info, "128-byte push constants");
    info->suitable = info->missing[0] == '\0';
}

vkg_status vkg__physical_devices(VkInstance instance, VkPhysicalDevice **out, uint32_t *count)
{
    uint32_t n = 0;
    VKG_VK(vkEnumeratePhysicalDevices(instance, &n, NULL));
    VkPhysicalDevice *list = calloc(n ? n : 1, sizeof *list);
    VKG_CHECK(list, VKG_ERR_NOMEM, "no memory for %u devices", n);
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, list);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(list);
        return VKG_FAIL(VKG_ERR_VULKAN, "vkEnumeratePhysicalDevices: %s", vkg__vk_result_str(r));
    }
    *out = list;
    *count = n;
    return VKG_OK;
}

vkg_status vkg_device_list(vkg_device_info **out, int *count)
{
    return vkg__device_list(0, out, count, NULL);
}

vkg_status vkg__device_list(int validation, vkg_device_info **out, int *count, int *messages)
{
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    vkg_device_t *counter = validation ? calloc(1, sizeof *counter) : NULL;
    VKG_CHECK(!validation || counter, VKG_ERR_NOMEM, "no memory for a message counter");
    vkg_status cs = vkg__instance_create(validation, counter, &instance, &messenger);
    if (cs != VKG_OK) {
        free(counter);
        return cs;
    }
    VkPhysicalDevice *phys = NULL;
    uint32_t n = 0;
    vkg_status st = vkg__physical_devices(instance, &phys, &n);
    vkg_device_info *infos = NULL;
    if (st == VKG_OK) {
        infos = calloc(n ? n : 1, sizeof *infos);
        if (!infos)
            st = VKG_FAIL(VKG_ERR_NOMEM, "no memory for %u device descriptions", n);
        for (uint32_t i = 0; infos && i < n; i++) {
            vkg__device_describe(phys[i], (int)i, &infos[i]);
            vkg__coopmat_describe(instance, phys[i], &infos[i]);
        }
    }
    free(phys);
    vkg__instance_destroy(instance, messenger);
    if (messages)
        *messages = counter ? atomic_load(&counter->validation_count) : 0;
    free(counter);
    if (st == VKG_OK) {
        *out = infos;
        *count = (int)n;
    }
    return st;
}
