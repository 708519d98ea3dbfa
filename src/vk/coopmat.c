/* Cooperative matrices on the device side (vk/coopmat.h): the configurations a device lists
 * under VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix, the one the matmul kernel takes,
 * and what device creation enables for it. Only when asked for (vkg_device_opts.coopmat): a
 * device opened without it has neither extension nor feature enabled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/coopmat.h"
#include "vk/instance.h"

static const char *component_name(uint32_t t)
{
    switch (t) {
    case VK_COMPONENT_TYPE_FLOAT16_KHR:
        return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_KHR:
        return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_KHR:
        return "f64";
    case VK_COMPONENT_TYPE_SINT8_KHR:
        return "s8";
    case VK_COMPONENT_TYPE_SINT16_KHR:
        return "s16";
    case VK_COMPONENT_TYPE_SINT32_KHR:
        return "s32";
    case VK_COMPONENT_TYPE_SINT64_KHR:
        return "s64";
    case VK_COMPONENT_TYPE_UINT8_KHR:
        return "u8";
    case VK_COMPONENT_TYPE_UINT16_KHR:
        return "u16";
    case VK_COMPONENT_TYPE_UINT32_KHR:
        return "u32";
    case VK_COMPONENT_TYPE_UINT64_KHR:
        return "u64";
    case VKG_COMPONENT_TYPE_BFLOAT16:
        return "bf16";
    default:
        return "?";
    }
}

static const char *scope_name(uint32_t s)
{
    switch (s) {
    case VK_SCOPE_DEVICE_KHR:
        return "device";
    case VK_SCOPE_WORKGROUP_KHR:
        return "workgroup";
    case VK_SCOPE_SUBGROUP_KHR:
        return "subgroup";
    case VK_SCOPE_QUEUE_FAMILY_KHR:
        return "queue family";
    default:
        return "?";
    }
}

static void add_config(vkg_device_info *info, int khr, uint32_t m, uint32_t n, uint32_t k,
                       const uint32_t types[4], int saturating, uint32_t scope)
{
    if (info->coopmat_count >= VKG_COOPMAT_MAX)
        return;
    vkg_coopmat_config *c = &info->coopmat[info->coopmat_count++];
    c->m = m, c->n = n, c->k = k;
    snprintf(c->a, sizeof c->a, "%s", component_name(types[0]));
    snprintf(c->b, sizeof c->b, "%s", component_name(types[1]));
    snprintf(c->c, sizeof c->c, "%s", component_name(types[2]));
    snprintf(c->result, sizeof c->result, "%s", component_name(types[3]));
    snprintf(c->scope, sizeof c->scope, "%s", scope_name(scope));
    c->khr = khr;
    c->saturating = saturating;
}

static void list_khr(VkInstance instance, VkPhysicalDevice phys, vkg_device_info *info)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (!get || get(phys, &n, NULL) != VK_SUCCESS || n == 0)
        return;
    VkCooperativeMatrixPropertiesKHR *p = calloc(n, sizeof *p);
    if (!p)
        return;
    for (uint32_t i = 0; i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    VkResult r = get(phys, &n, p);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        uint32_t t[4] = {p[i].AType, p[i].BType, p[i].CType, p[i].ResultType};
        add_config(info, 1, p[i].MSize, p[i].NSize, p[i].KSize, t, p[i].saturatingAccumulation,
                   p[i].scope);
    }
    free(p);
}

static void list_nv(VkInstance instance, VkPhysicalDevice phys, vkg_device_info *info)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!get || get(phys, &n, NULL) != VK_SUCCESS || n == 0)
        return;
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    if (!p)
        return;
    for (uint32_t i = 0; i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    VkResult r = get(phys, &n, p);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        uint32_t t[4] = {p[i].AType, p[i].BType, p[i].CType, p[i].DType};
        add_config(info, 0, p[i].MSize, p[i].NSize, p[i].KSize, t, 0, p[i].scope);
    }
    free(p);
}

void vkg__coopmat_describe(VkInstance instance, VkPhysicalDevice phys, vkg_device_info *info)
{
    info->coopmat_khr = vkg__device_has_extension(phys, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    info->coopmat_nv = vkg__device_has_extension(phys, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    info->coopmat_count = 0;
    if (info->coopmat_nv)
        list_nv(instance, phys, info);
    if (info->coopmat_khr)
        list_khr(instance, phys, info);
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = &f12};
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(phys, &props);
    if (props.apiVersion >= VK_API_VERSION_1_2) {
        vkGetPhysicalDeviceFeatures2(phys, &feats);
        info->vulkan_memory_model = f12.vulkanMemoryModel;
        info->vulkan_memory_model_device_scope = f12.vulkanMemoryModelDeviceScope;
    }
}

/* Whether c is a configuration the kernel runs on (vk/coopmat.h, vkg__coopmat_pick). */
static int usable(const vkg_coopmat_config *c)
{
    return !strcmp(c->a, "f16") && !strcmp(c->b, "f16") && !strcmp(c->c, "f32") &&
           !strcmp(c->result, "f32") && !strcmp(c->scope, "subgroup") &&
           (c->m == 8 || c->m == 16) && (c->n == 8 || c->n == 16) &&
           (c->k == 8 || c->k == 16 || c->k == 32);
}

int vkg__coopmat_pick(const vkg_device_info *info, int prefer_khr)
{
    int best = -1, best_rank = 0;
    for (int i = 0; i < info->coopmat_count; i++) {
        const vkg_coopmat_config *c = &info->coopmat[i];
        if (!usable(c))
            continue;
        int rank = (c->khr != prefer_khr ? 4 : 0) +
                   (c->m == 16 && c->n == 8 && c->k == 16 ? 0 : 2) +
                   (c->m == 16 && c->n == 16 ? 0 : 1);
        if (best < 0 || rank < best_rank)
            best = i, best_rank = rank;
    }
    return best;
}

/* "16x8x16 f16*f16+f32->f32 subgroup (KHR), ..." for the error that no configuration fits. */
static void list_configs(const vkg_device_info *info, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < info->coopmat_count && used + 1 < cap; i++) {
        const vkg_coopmat_config *c = &info->coopmat[i];
        int w =
            snprintf(buf + used, cap - used, "%s%ux%ux%u %s*%s+%s->%s %s (%s)", i ? ", " : "", c->m,
                     c->n, c->k, c->a, c->b, c->c, c->result, c->scope, c->khr ? "KHR" : "NV");
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (!info->coopmat_count)
        snprintf(buf, cap, "none");
}

static vkg_status prepare_on(vkg_device_t *dev, vkg_coopmat_enable *e, const char **ext_names,
                             uint32_t *n, VkPhysicalDeviceVulkan12Features *f12);

vkg_status vkg__coopmat_prepare(vkg_device_t *dev, vkg_coopmat_enable *e, const char **ext_names,
                                uint32_t *n, VkPhysicalDeviceVulkan12Features *f12)
{
    memset(e, 0, sizeof *e);
    e->config = -1;
    dev->coopmat_note[0] = '\0';
    if (dev->opts.coopmat == VKG_COOPMAT_AUTO) { /* on where it can be, else off, saying why */
        if (prepare_on(dev, e, ext_names, n, f12) == VKG_OK)
            return VKG_OK;
        const char *why = vkg_error_message(), *on = strstr(why, "--coopmat on: ");
        snprintf(dev->coopmat_note, sizeof dev->coopmat_note, "%s", on ? on + 14 : why);
        char *hint = strstr(dev->coopmat_note, " (use --coopmat off)"); /* off already */
        if (hint)
            *hint = '\0';
        memset(e, 0, sizeof *e);
        e->config = -1;
        dev->coopmat_rewrite = 0;
        return VKG_OK;
    }
    return dev->opts.coopmat == VKG_COOPMAT_ON ? prepare_on(dev, e, ext_names, n, f12) : VKG_OK;
}

/* vkg__coopmat_prepare for --coopmat on: the configuration, extension and features, or an error
 * naming what the device lacks; nothing is appended or chained before every check has passed. */
static vkg_status prepare_on(vkg_device_t *dev, vkg_coopmat_enable *e, const char **ext_names,
                             uint32_t *n, VkPhysicalDeviceVulkan12Features *f12)
{
    const vkg_device_info *info = &dev->info;
    VKG_CHECK(info->coopmat_khr || info->coopmat_nv, VKG_ERR_UNSUPPORTED,
              "--coopmat on: %s has neither VK_KHR_cooperative_matrix nor "
              "VK_NV_cooperative_matrix (use --coopmat off)",
              info->name);
    /* VKG_COOPMAT_KHR=1: the KHR configuration (and the SPIR-V rewrite) even where the device
     * also has NV's, to check the rewrite on such a device (scripts/device-check.sh). */
    const char *env = getenv("VKG_COOPMAT_KHR");
    e->config = vkg__coopmat_pick(info, env && !strcmp(env, "1"));
    if (e->config < 0) {
        char listed[1024];
        list_configs(info, listed, sizeof listed);
        return VKG_FAIL(
            VKG_ERR_UNSUPPORTED,
            "--coopmat on: %s has no cooperative-matrix configuration with f16 A and B, "
            "f32 C and result, subgroup scope, M and N 8 or 16, K 8, 16 or 32 (it "
            "lists: %s)",
            info->name, listed);
    }
    VKG_CHECK(info->shader_float16, VKG_ERR_UNSUPPORTED,
              "--coopmat on: %s lacks shaderFloat16, which the cooperative-matrix kernel needs",
              info->name);
    VKG_CHECK(info->vulkan_memory_model, VKG_ERR_UNSUPPORTED,
              "--coopmat on: %s lacks the Vulkan memory model, which the cooperative-matrix "
              "kernel's SPIR-V uses",
              info->name);
    /* The epilogue's per-half bf16 stores (common.glsl's bf16_store_bits) are atomics whose scope
     * is Device under the memory model: that scope needs vulkanMemoryModelDeviceScope. */
    VKG_CHECK(info->vulkan_memory_model_device_scope, VKG_ERR_UNSUPPORTED,
              "--coopmat on: %s lacks vulkanMemoryModelDeviceScope, which the cooperative-matrix "
              "kernel's atomics (Device scope) need",
              info->name);
    if (info->coopmat[e->config].khr) {
        e->khr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
        e->khr.cooperativeMatrix = VK_TRUE;
        e->khr.pNext = f12->pNext;
        f12->pNext = &e->khr;
        ext_names[(*n)++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
        dev->coopmat_rewrite = 1;
    } else {
        e->nv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
        e->nv.cooperativeMatrix = VK_TRUE;
        e->nv.pNext = f12->pNext;
        f12->pNext = &e->nv;
        ext_names[(*n)++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    }
    f12->shaderFloat16 = VK_TRUE;
    f12->vulkanMemoryModel = VK_TRUE;
    f12->vulkanMemoryModelDeviceScope = VK_TRUE;
    return VKG_OK;
}
