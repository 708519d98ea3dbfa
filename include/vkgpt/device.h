/* Vulkan devices as vkgpt sees them: listing, selection and the device handle that every tensor,
 * kernel and command list belongs to.
 *
 * No Vulkan types appear here. A vkg_device_t owns a Vulkan instance, one logical device with a
 * compute queue, a timeline semaphore and the compiled pipelines; it is used from one thread at a
 * time. Several devices may live in one process.
 */
#ifndef VKGPT_DEVICE_H
#define VKGPT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkg_device vkg_device_t;

/* The memory type an open device uses for one purpose (see vkg_device_info). */
typedef struct vkg_memory_choice {
    int type;            /* index among the device's memory types */
    char flags[80];      /* its properties: "device-local host-visible host-coherent host-cached" */
    int heap;            /* the heap it allocates from */
    uint64_t heap_bytes; /* that heap's size */
} vkg_memory_choice;

/* One cooperative-matrix configuration a device offers (VK_KHR_cooperative_matrix or
 * VK_NV_cooperative_matrix): Result (m x n) = A (m x k) x B (k x n) + C, with the component types
 * of A, B, C and the result ("f16", "f32", "bf16", "s8", ...; "?" for one vkgpt does not name)
 * and the scope of the matrices ("subgroup", "workgroup", ...). */
typedef struct vkg_coopmat_config {
    uint32_t m, n, k;
    char a[8], b[8], c[8], result[8];
    char scope[16];
    int khr;        /* 1: listed by VK_KHR_cooperative_matrix, 0: by VK_NV_cooperative_matrix */
    int saturating; /* saturating accumulation (integer types) */
} vkg_coopmat_config;

#define VKG_COOPMAT_MAX 32

typedef struct vkg_device_info {
    int index;       /* position in vkg_device_list's order */
    char name[256];  /* "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char vendor[32]; /* "NVIDIA", "AMD", "Intel", "Apple", "Mesa (CPU)", ... */
    char type[24];   /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t vendor_id, device_id;
    uint32_t api_version;        /* VK_MAKE_API_VERSION encoded */
    char driver[128];            /* driver name and info string */
    uint64_t device_local_bytes; /* sum of device-local heaps */
    /* The largest single allocation vkgpt makes: the smaller of maxMemoryAllocationSize and
     * maxBufferSize (VK_KHR_maintenance4, where the driver has it), or of the limit the opts or
     * VKG_MAX_ALLOCATION impose. Memory pools are split into allocations no larger. */
    uint64_t max_allocation_bytes;
    uint64_t driver_max_allocation; /* maxMemoryAllocationSize as the driver reports it */
    uint64_t driver_max_buffer;     /* maxBufferSize, or 0 where the driver does not report it */
    int unified_memory;             /* 1: device memory is host-mappable, no staging needed */
    uint32_t subgroup_size;
    /* VK_EXT_subgroup_size_control for compute shaders: 1 when a pipeline may require a subgroup
     * size from subgroup_size_min to subgroup_size_max (powers of two), for workgroups of at most
     * max_workgroup_subgroups subgroups of that size; 0 (and the sizes 0) otherwise. */
    int subgroup_size_control;
    uint32_t subgroup_size_min, subgroup_size_max, max_workgroup_subgroups;
    uint32_t max_shared_memory; /* bytes per workgroup */
    uint32_t max_workgroup_invocations;
    uint32_t max_push_constants; /* bytes */
    int buffer_device_address;   /* required */
    int timeline_semaphore;      /* required */
    int timestamps;              /* compute-queue timestamps (profiling) */
    int shader_float64, shader_int64, shader_float16, storage_16bit;
    int suitable;      /* every required feature present */
    char missing[128]; /* names of the required features that are absent, or "" */
    /* Memory types by use, set by vkg_device_create (vkg_device_list leaves them zero, with
     * flags ""): */
    vkg_memory_choice mem_pool;     /* the arenas the GPU computes in */
    vkg_memory_choice mem_readback; /* host arenas and staging, which the CPU reads back */
    vkg_memory_choice mem_upload;   /* buffers the CPU only writes */
    int readback_uncached;          /* 1: no usable host-cached type, so CPU reads of gradients and
                                       checkpoints go through uncached memory and are slow */
    /* VK_EXT_external_memory_host: host memory the caller allocated can be imported as a
     * device buffer (enabled at creation where present and the driver says host allocations
     * import as transfer buffers; gradient buckets then travel straight
     * between the device and the collectives' buffer), and the alignment an imported pointer and
     * size need (minImportedHostPointerAlignment; 0 without the extension). */
    int external_memory_host;
    uint64_t host_import_alignment;
    /* Cooperative matrices (tensor cores): whether the device has VK_KHR_cooperative_matrix and
     * VK_NV_cooperative_matrix, the configurations they list (the first VKG_COOPMAT_MAX), and
     * the Vulkan memory model (the cooperative-matrix kernel's SPIR-V uses it). */
    int coopmat_khr, coopmat_nv;
    int coopmat_count;
    vkg_coopmat_config coopmat[VKG_COOPMAT_MAX];
    int vulkan_memory_model;
    int vulkan_memory_model_device_scope; /* vulkanMemoryModelDeviceScope */
} vkg_device_info;

/* List every Vulkan device. *out is a malloc'd array of *count entries (free() it).
 * Returns VKG_ERR_VULKAN with a message when no Vulkan loader/driver is usable. */
vkg_status vkg_device_list(vkg_device_info **out, int *count);

/* Whether forward products with a bf16 operand run on cooperative matrices (vkgpt --coopmat).
 * ON: the device's f16 x f16 + f32 configuration through shaders/matmul_coopmat.comp;
 * vkg_device_create fails with VKG_ERR_UNSUPPORTED, naming what is missing, on a device without
 * one. EMULATE: the same kernel with its fragment operations done as plain arithmetic (any
 * device; for checking the kernel where there are no cooperative matrices, not for speed). AUTO
 * (vkgpt train's and bench train's default): as ON where the device has everything the kernel
 * needs, else OFF with the reason kept (vkg_device_coopmat_note); the caller then runs
 * vkg_op_coopmat_selfcheck before relying on it, which turns it off when the device's results are
 * wrong. */
typedef enum vkg_coopmat_mode {
    VKG_COOPMAT_OFF = 0,
    VKG_COOPMAT_ON = 1,
    VKG_COOPMAT_EMULATE = 2,
    VKG_COOPMAT_AUTO = 3,
} vkg_coopmat_mode;

typedef struct vkg_device_opts {
    /* Which device: NULL or "" picks the first suitable one (discrete GPUs first); a decimal
     * number picks that index of vkg_device_list; anything else is a case-insensitive substring
     * of the device name. The CLI passes --device or the VKGPT_DEVICE environment variable. */
    const char *select;
    int validation;           /* enable VK_LAYER_KHRONOS_validation and count its messages */
    int profiling;            /* allow timestamp queries (vkgpt bench) */
    int force_staging;        /* transfer through a staging buffer even on unified memory (tests the
                                 path discrete GPUs take) */
    uint64_t memory_limit;    /* > 0: act as if the device had at most this many bytes of
                                 device-local memory (plans and fit checks; tests) */
    uint64_t max_allocation;  /* > 0: act as if the driver allowed no larger allocation or buffer
                                 (tests of the split pools; the environment variable
                                 VKG_MAX_ALLOCATION, in bytes with an optional K, M or G suffix,
                                 does the same for every device a process opens) */
    vkg_coopmat_mode coopmat; /* VKG_COOPMAT_OFF unless asked for (vkgpt's default is AUTO) */
    /* 1: capture the driver's statistics of every pipeline (registers, spills, shared memory:
     * VK_KHR_pipeline_executable_properties, enabled where the device has it; vkgpt bench ops).
     * A device without the extension opens all the same, without statistics. */
    int pipeline_stats;
} vkg_device_opts;

vkg_device_opts vkg_device_opts_default(void);

/* Under VKG_COOPMAT_AUTO, why the cooperative-matrix kernel is off on dev (what the device lacks,
 * or the self-check's finding): "" when it is on, or when another mode was asked for. The string
 * lives as long as dev. */
const char *vkg_device_coopmat_note(const vkg_device_t *dev);

/* Open a device. Errors: VKG_ERR_NOT_FOUND (no device matches `select`; the message lists the
 * devices), VKG_ERR_UNSUPPORTED (a required feature is missing; the message names it),
 * VKG_ERR_VULKAN. On success *out must be released with vkg_device_destroy. */
vkg_status vkg_device_create(const vkg_device_opts *opts, vkg_device_t **out);

/* Wait for the device to go idle, release everything. NULL-safe; sets *pdev to NULL. Tensors,
 * arenas and command lists of the device must have been destroyed first. */
void vkg_device_destroy(vkg_device_t **pdev);
/* vkg_device_destroy that also returns the validation layer's messages over the device's whole
 * life, including those it reports while the device is destroyed (objects left undestroyed),
 * and copies the first one to first (cap bytes, may be NULL/0). 0 when validation is off. */
int vkg_device_destroy_report(vkg_device_t **pdev, char *first, size_t cap);

/* The description of an open device. */
const vkg_device_info *vkg_device_get_info(const vkg_device_t *dev);

/* Number of warning or error messages the validation layer reported so far, and the first one
 * ("" when none). Always 0 when validation is off. */
int vkg_device_validation_messages(const vkg_device_t *dev, const char **first);

#ifdef __cplusplus
}
#endif
#endif
