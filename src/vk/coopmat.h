/* Cooperative matrices on the device side: the VK_KHR_cooperative_matrix declarations that the
 * Vulkan headers vkgpt builds with (1.3.239) lack, the listing of a device's configurations, the
 * choice of the one the matmul uses and the extension and features enabled for it when the
 * device is created. It does not record anything: src/ops/matmul_coopmat.c does. Internal. */
#ifndef VKG_VK_COOPMAT_H
#define VKG_VK_COOPMAT_H

#include "vk/vk.h"

#ifndef VK_KHR_cooperative_matrix
/* The values of the Vulkan registry (vk.xml, VK_KHR_cooperative_matrix, extension 507). */
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR                          \
    ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef enum VkComponentTypeKHR {
    VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
    VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
    VK_COMPONENT_TYPE_FLOAT64_KHR = 2,
    VK_COMPONENT_TYPE_SINT8_KHR = 3,
    VK_COMPONENT_TYPE_SINT16_KHR = 4,
    VK_COMPONENT_TYPE_SINT32_KHR = 5,
    VK_COMPONENT_TYPE_SINT64_KHR = 6,
    VK_COMPONENT_TYPE_UINT8_KHR = 7,
    VK_COMPONENT_TYPE_UINT16_KHR = 8,
    VK_COMPONENT_TYPE_UINT32_KHR = 9,
    VK_COMPONENT_TYPE_UINT64_KHR = 10,
    VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
    VK_SCOPE_DEVICE_KHR = 1,
    VK_SCOPE_WORKGROUP_KHR = 2,
    VK_SCOPE_SUBGROUP_KHR = 3,
    VK_SCOPE_QUEUE_FAMILY_KHR = 5,
    VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize;
    uint32_t NSize;
    uint32_t KSize;
    VkComponentTypeKHR AType;
    VkComponentTypeKHR BType;
    VkComponentTypeKHR CType;
    VkComponentTypeKHR ResultType;
    VkBool32 saturatingAccumulation;
    VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t *pPropertyCount,
    VkCooperativeMatrixPropertiesKHR *pProperties);
#endif
/* bf16 component type (VK_KHR_shader_bfloat16), named in listings only. */
#define VKG_COMPONENT_TYPE_BFLOAT16 1000141000

/* Fill info's cooperative-matrix fields (the extensions, their configurations, the memory model
 * feature) for phys, a device of instance. */
void vkg__coopmat_describe(VkInstance instance, VkPhysicalDevice phys, vkg_device_info *info);

/* The index in info->coopmat of the configuration the matmul kernel runs on: f16 A and B, f32 C
 * and result, subgroup scope, m and n 8 or 16, k 8, 16 or 32; NV's before KHR's (no rewrite)
 * unless prefer_khr, 16 x 8 x 16 first. -1 when there is none. */
int vkg__coopmat_pick(const vkg_device_info *info, int prefer_khr);

/* What vkCreateDevice is given for the cooperative-matrix kernel: kept alive by the caller until
 * then. */
typedef struct vkg_coopmat_enable {
    VkPhysicalDeviceCooperativeMatrixFeaturesNV nv;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR khr;
    int config; /* index in info->coopmat, -1: none */
} vkg_coopmat_enable;

/* For dev->opts.coopmat == VKG_COOPMAT_ON: pick the configuration (KHR's first when the
 * environment variable VKG_COOPMAT_KHR is 1), append its extension to
 * ext_names (room for one more at *n), chain its feature struct into f12 and turn on f12's
 * shaderFloat16 and vulkanMemoryModel; sets dev->coopmat_rewrite when the device has only the KHR
 * extension. Other modes: nothing (e->config = -1). Errors: VKG_ERR_UNSUPPORTED naming the device
 * and what it lacks (no usable configuration, with what it lists; no shaderFloat16; no Vulkan
 * memory model). */
vkg_status vkg__coopmat_prepare(vkg_device_t *dev, vkg_coopmat_enable *e, const char **ext_names,
                                uint32_t *n, VkPhysicalDeviceVulkan12Features *f12);

/* The cooperative-matrix kernel's SPIR-V rewritten from SPV_NV_cooperative_matrix to
 * SPV_KHR_cooperative_matrix (src/vk/spv_coopmat.c): *out (malloc'd, *out_words words) on
 * success. Errors: VKG_ERR_INVALID_ARG naming what the module has that cannot be rewritten (a
 * cooperative matrix type not used as exactly one of A, B and accumulator; a column-major flag
 * that is not a constant; a malformed module), VKG_ERR_NOMEM. */
vkg_status vkg__spv_coopmat_nv_to_khr(const uint32_t *in, size_t words, uint32_t **out,
                                      size_t *out_words);

#endif
