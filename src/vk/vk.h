/* The Vulkan compute runtime used by every op: the device internals, memory arenas with tensor
 * views, the kernel table and command lists.
 *
 * Design (see DESIGN.md section 2): tensors are device addresses handed to shaders through push
 * constants (no descriptor sets); memory comes from a few large arenas; a command list is recorded
 * once and submitted many times; consecutive dispatches are separated by a memory barrier unless
 * they are recorded inside a group of independent dispatches. This header is internal to vkgpt.
 */
#ifndef VKG_VK_H
#define VKG_VK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "vk/vkapi.h"

#include "base/error.h"
#include "vk/memtype.h"
#include "vk/push_sizes.h"
#include "vk/shaders.h"
#include "vkgpt/device.h"

/* ---- errors ---------------------------------------------------------------------------- */

const char *vkg__vk_result_str(VkResult r);
/* VKG_ERR_NOMEM for out-of-memory results, VKG_ERR_VULKAN otherwise. */
vkg_status vkg__vk_status(VkResult r);

#define VKG_VK(call)                                                                               \
    do {                                                                                           \
        VkResult vkg_vr_ = (call);                                                                 \
        if (vkg_vr_ != VK_SUCCESS)                                                                 \
            return VKG_FAIL(vkg__vk_status(vkg_vr_), "%s: %s", #call,                              \
                            vkg__vk_result_str(vkg_vr_));                                          \
    } while (0)

#define VKG_VK_GOTO(st, call, label)                                                               \
    do {                                                                                           \
        VkResult vkg_vr_ = (call);                                                                 \
        if (vkg_vr_ != VK_SUCCESS) {                                                               \
            (st) =                                                                                 \
                VKG_FAIL(vkg__vk_status(vkg_vr_), "%s: %s", #call, vkg__vk_result_str(vkg_vr_));   \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* ---- kernels --------------------------------------------------------------------------- */

/* One enum value per shader of the op table (src/ops/op_table.def), in its order:
 * VKG_KERNEL_fill, VKG_KERNEL_matmul... */
typedef enum vkg_kernel_id {
#define VKG_KERNEL_ENUM_(name) VKG_KERNEL_##name,
    VKG_SHADER_LIST(VKG_KERNEL_ENUM_)
#undef VKG_KERNEL_ENUM_
        VKG_KERNEL_COUNT
} vkg_kernel_id;

/* Specialization constants: ids 0, 1, 2 are the workgroup size (local_size_{x,y,z}_id);
 * ids 3.. are kernel-specific (tile sizes). */
#define VKG_MAX_SPEC 20
#define VKG_PUSH_MAX 128

/* Compile-time check that the push-constant struct T of an op is the push-constant block of
 * shaders/<shader>.comp as the build measured it (VKG_PUSH_BYTES_<shader>, vk/push_sizes.h):
 * sizeof(T) is the block's size rounded up to T's alignment (its tail padding). */
#define VKG_PUSH_CHECK(T, shader)                                                                  \
    _Static_assert(sizeof(T) ==                                                                    \
                       (VKG_PUSH_BYTES_##shader + _Alignof(T) - 1) / _Alignof(T) * _Alignof(T),    \
                   #T " does not match the push-constant block of shaders/" #shader ".comp")

typedef struct vkg_kernel_variant {
    uint32_t spec[VKG_MAX_SPEC];
    int nspec;
    uint32_t subgroup; /* required subgroup size, 0: the driver's choice */
    VkPipeline pipeline;
    uint64_t used; /* the device's pipestats_epoch when an op last recorded it (vk/pipestats.h) */
} vkg_kernel_variant;

typedef struct vkg_kernel_cache {
    vkg_kernel_variant *variants;
    int count, cap;
} vkg_kernel_cache;

/* Name of a kernel ("matmul"). */
const char *vkg__kernel_name(vkg_kernel_id k);
/* Bytes of the kernel's push-constant block, as the build measured it (0 for an unknown id). */
uint32_t vkg__kernel_push_bytes(vkg_kernel_id k);
/* The pipeline for kernel k with these specialization constants and required subgroup size
 * (0: none; else one vkg__mmt_subgroup allowed), created on first use. */
vkg_status vkg__kernel_pipeline(vkg_device_t *dev, vkg_kernel_id k, const uint32_t *spec, int nspec,
                                uint32_t subgroup, VkPipeline *out);
void vkg__kernels_release(vkg_device_t *dev);

/* ---- device ---------------------------------------------------------------------------- */

struct vkg_device {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool pool;
    VkSemaphore timeline;
    uint64_t timeline_value; /* last value submitted for signalling */
    VkPipelineLayout layout; /* shared by every kernel: a 128-byte push-constant range */
    /* Memory types by use (vk/memtype.h), chosen when the device is created: */
    uint32_t mem_type_device; /* VKG_MEM_POOL: arenas */
    uint32_t mem_type_host;   /* VKG_MEM_READBACK: host arenas and staging (coherent, cached
                                 where the device has such a type) */
    uint32_t mem_type_upload; /* VKG_MEM_UPLOAD: buffers the CPU only writes (coherent) */
    float timestamp_period;   /* ns per tick */
    vkg_device_info info;
    vkg_device_opts opts;
    atomic_int validation_count;
    char validation_first[1024];
    vkg_kernel_cache kernels[VKG_KERNEL_COUNT];
    /* The ops' choices for this device (src/ops/tuning.h), made when the first op asks for them
     * and freed with the device; never read here. */
    _Atomic(struct vkg_device_tuning *) tuning;
    /* What the ops tune for: the device's type and PCI vendor, or those VKG_TUNING_AS presents
     * it as (device.c); the cooperative-matrix configuration opened (index in info.coopmat, -1:
     * none). */
    VkPhysicalDeviceType tune_type;
    uint32_t tune_vendor;
    int coopmat_config;
    /* staging for transfers on devices without unified memory: [0] reads back (mem_type_host,
     * cached), [1] uploads (mem_type_upload, write-combined or resizable BAR) */
    VkBuffer staging[2];
    VkDeviceMemory staging_mem[2];
    void *staging_map[2];
    size_t staging_bytes[2];
    VkCommandBuffer transfer_cmd;
    /* VK_EXT_external_memory_host's entry point (NULL without the extension: no imports) */
    PFN_vkGetMemoryHostPointerPropertiesEXT get_host_pointer_props;
    /* 1: the cooperative-matrix kernel's SPIR-V (SPV_NV_cooperative_matrix) is rewritten to
     * SPV_KHR_cooperative_matrix when its pipelines are built (the device has only the KHR
     * extension; src/vk/spv_coopmat.c) */
    int coopmat_rewrite;
    /* Pipeline statistics (src/vk/pipestats.c): the extension's entry points where enabled
     * (NULL otherwise), why there are none (NULL: there are), and the window of use counter. */
    PFN_vkGetPipelineExecutablePropertiesKHR get_exec_props;
    PFN_vkGetPipelineExecutableStatisticsKHR get_exec_stats;
    const char *pipestats_absent;
    uint64_t pipestats_epoch;
    /* --coopmat auto on a device where the kernel cannot run: what it lacks (else "") */
    char coopmat_note[320];
};

/* Fill `info` for a physical device (used by listing and by create). */
void vkg__device_describe(VkPhysicalDevice phys, int index, vkg_device_info *info);

/* Submit one command buffer, signalling the timeline with the next value, stored in *value. */
vkg_status vkg__device_submit(vkg_device_t *dev, VkCommandBuffer cb, uint64_t *value);
/* Wait until the timeline reaches value, at most timeout_ns. */
vkg_status vkg__device_wait(vkg_device_t *dev, uint64_t value, uint64_t timeout_ns);

/* ---- memory ---------------------------------------------------------------------------- */

typedef struct vkg_arena vkg_arena;

/* Element types of tensors: fp32 (what an arena hands out) or bf16 (16-bit brain floats packed
 * two to a 32-bit word, element 2j in the low half; shaders/common.glsl). */
typedef enum vkg_dtype { VKG_F32 = 0, VKG_BF16 = 1 } vkg_dtype;

/* A view of part of an arena: what shaders receive is `addr`. A tensor lies in one of the
 * arena's allocations (blocks), never across two. */
typedef struct vkg_tensor {
    uint64_t addr; /* device address of the first byte */
    size_t offset; /* bytes from the start of its block */
    size_t bytes;
    vkg_arena *arena;
    uint32_t block;  /* which of the arena's allocations */
    vkg_dtype dtype; /* element type: VKG_F32 unless the owner marks it (views keep it) */
} vkg_tensor;

/* Bytes of one element of type d. */
static inline size_t vkg_dtype_bytes(vkg_dtype d)
{
    return d == VKG_BF16 ? 2 : 4;
}

/* Placing tensors in an arena without a device: the rule vkg_arena_alloc follows, so that
 * plans equal allocations. `declared` is what the arena will hold (tensors rounded up to 256
 * bytes, in order); a block is opened when a tensor does not fit the current one, sized to the
 * rest of the declared bytes, at most the largest allocation (rounded down to 64 KiB). */
typedef struct vkg_arena_cursor {
    const size_t *list; /* the tensors to come, when known (blocks sized to fit them) */
    int nlist, index;
    size_t declared, max_block;
    size_t placed;     /* rounded bytes handed out */
    size_t allocated;  /* sum of the blocks' sizes */
    size_t block_size; /* the current block */
    size_t block_used;
    int blocks;
} vkg_arena_cursor;
/* A cursor for an arena of `bytes` under a largest allocation (0: no limit). */
vkg_arena_cursor vkg_arena_cursor_start(size_t bytes, uint64_t max_allocation);
/* Place the next tensor: its offset in the current block, and *open > 0 (the new block's size)
 * when it starts a block. VKG_ERR_NOMEM naming the role when the tensor is larger than the
 * largest allocation or the declared bytes are used up. */
vkg_status vkg_arena_place(vkg_arena_cursor *c, size_t bytes, const char *role, size_t *offset,
                           size_t *open);
/* The bytes allocated and the number of blocks of an arena made by vkg_arena_create_list for
 * tensors of bytes[0..n) (either out may be NULL); the errors of vkg_arena_place. */
vkg_status vkg_arena_plan(const size_t *bytes, int n, uint64_t max_allocation, const char *role,
                          size_t *allocated, int *blocks);

/* Create an arena of `bytes` device memory for one role ("params", "acts", ...). The role names
 * the arena in error messages. */
vkg_status vkg_arena_create(vkg_device_t *dev, size_t bytes, const char *role, vkg_arena **out);
/* An arena for exactly the tensors bytes[0..n), allocated in that order (another size is
 * VKG_ERR_STATE): each allocation holds the tensors that fit in it, none is larger than needed. */
vkg_status vkg_arena_create_list(vkg_device_t *dev, const size_t *bytes, int n, const char *role,
                                 vkg_arena **out);
/* An arena of host-visible memory, always mapped, for copies between the device and the host
 * while the device works on other memory (its tensors have no device address: not for shaders). */
vkg_status vkg_arena_create_host(vkg_device_t *dev, size_t bytes, const char *role,
                                 vkg_arena **out);
/* The host mapping of a tensor's first byte: tensors of host arenas, and of every arena on
 * unified-memory devices; NULL otherwise. */
void *vkg_tensor_host_ptr(vkg_tensor t);
/* An arena over host memory the caller owns (VK_EXT_external_memory_host): `bytes` at `ptr`
 * imported as one host arena (its tensors have no device address: copies only; the host reads
 * and writes them in place, vkg_tensor_host_ptr(t) is ptr + the tensor's offset). ptr and bytes
 * must be multiples of vkg_device_info.host_import_alignment; the memory must stay allocated
 * until the arena is destroyed, and no command list that copies to or from it may run after.
 * The memory type is the readback rule of memtype.h among those the driver allows for the
 * pointer. Errors: VKG_ERR_UNSUPPORTED (the device lacks the extension, or the driver refuses
 * the pointer or the buffer type), VKG_ERR_INVALID_ARG (ptr or bytes misaligned, naming the
 * alignment), VKG_ERR_NOMEM / VKG_ERR_VULKAN from the import; each names `role`. */
vkg_status vkg_arena_import_host(vkg_device_t *dev, void *ptr, size_t bytes, const char *role,
                                 vkg_arena **out);
/* 1 when phys's driver says host allocations import as transfer buffers (what
 * vkg_arena_import_host makes). A driver may list VK_EXT_external_memory_host and still refuse
 * them (Wine 8.0's winevulkan does): device creation counts the extension only with this. */
int vkg__host_importable(VkPhysicalDevice phys);
/* arena.c: wrap a bound buffer of `bytes` (host-visible at map) as a one-block host arena
 * that owns buffer and memory from then on (also on failure: they are released). */
vkg_status vkg__arena_adopt(vkg_device_t *dev, VkBuffer buffer, VkDeviceMemory memory, void *map,
                            size_t bytes, const char *role, vkg_arena **out);
/* Release the arena (NULL-safe, nulls *pa). Its tensors become invalid. */
void vkg_arena_destroy(vkg_arena **pa);
/* Take the next `bytes` (rounded up to 256-byte alignment) as a tensor. VKG_ERR_NOMEM with the
 * arena's role and sizes when it does not fit. */
vkg_status vkg_arena_alloc(vkg_arena *a, size_t bytes, vkg_tensor *out);
/* Bytes handed out (rounded), bytes allocated (all blocks) and the number of blocks so far. */
size_t vkg_arena_used(const vkg_arena *a);
size_t vkg_arena_size(const vkg_arena *a);
int vkg_arena_blocks(const vkg_arena *a);

/* The VkBuffer a tensor lies in (for copies; its offset there is t.offset). */
VkBuffer vkg__tensor_buffer(vkg_tensor t);

/* A sub-view of t: [offset, offset + bytes). Asserts the range lies inside t. */
vkg_tensor vkg_tensor_view(vkg_tensor t, size_t offset, size_t bytes);

/* Copy host memory into a tensor range, or a tensor range into host memory. The device must not be
 * running work that touches the range. Uses a direct mapping on unified-memory devices and a
 * staging buffer elsewhere. */
vkg_status vkg_tensor_write(vkg_device_t *dev, vkg_tensor t, size_t offset, const void *src,
                            size_t bytes);
vkg_status vkg_tensor_read(vkg_device_t *dev, vkg_tensor t, size_t offset, void *dst, size_t bytes);

/* ---- command lists --------------------------------------------------------------------- */

typedef struct vkg_cmd vkg_cmd;

typedef struct vkg_cmd_timing {
    const char *label; /* the label given at dispatch (static storage) or the kernel name */
    vkg_kernel_id kernel;
    double ns;
} vkg_cmd_timing;

vkg_status vkg_cmd_create(vkg_device_t *dev, vkg_cmd **out);
void vkg_cmd_destroy(vkg_cmd **pc);

/* Start (re)recording; discards what was recorded before. */
vkg_status vkg_cmd_begin(vkg_cmd *c);
/* Record a dispatch of kernel k with push constants and a grid of workgroups. A barrier is
 * inserted before it when earlier dispatches were recorded since the last barrier, unless inside
 * a group. label: static string used in profiles (NULL = kernel name). Errors: push constants
 * that are not the kernel's block (from its size to its size rounded up to 8 bytes: a struct with
 * tail padding) or over 128 bytes, a too large grid (the message names the kernel). A grid with a
 * zero dimension records nothing and succeeds. */
vkg_status vkg_cmd_dispatch(vkg_cmd *c, vkg_kernel_id k, const uint32_t *spec, int nspec,
                            const void *push, size_t push_bytes, uint32_t gx, uint32_t gy,
                            uint32_t gz, const char *label);
/* vkg_cmd_dispatch of a pipeline that requires this subgroup size (0: none; else a size
 * vkg__mmt_subgroup allowed on the command list's device). */
vkg_status vkg_cmd_dispatch_sg(vkg_cmd *c, vkg_kernel_id k, const uint32_t *spec, int nspec,
                               uint32_t subgroup, const void *push, size_t push_bytes, uint32_t gx,
                               uint32_t gy, uint32_t gz, const char *label);
/* What one of the last VKG_CMD_LOG dispatches recorded was (back = 0: the last one), for tests
 * that check which variant an op chose. */
#define VKG_CMD_LOG 8
typedef struct vkg_cmd_logged {
    vkg_kernel_id kernel;
    uint32_t spec[VKG_MAX_SPEC];
    int nspec;
    uint32_t subgroup;
    uint32_t grid[3];
} vkg_cmd_logged;
/* 0 and *out filled, or -1 when fewer than back + 1 dispatches were recorded since begin. */
int vkg_cmd_logged_dispatch(const vkg_cmd *c, int back, vkg_cmd_logged *out);
/* Dispatches of kernel k recorded since begin (tests: which ops a list runs, fused or not). */
int vkg_cmd_kernel_count(const vkg_cmd *c, vkg_kernel_id k);
/* Dispatches recorded between group_begin and group_end are independent of each other (no
 * barriers between them); a barrier separates the group from what came before. */
void vkg_cmd_group_begin(vkg_cmd *c);
void vkg_cmd_group_end(vkg_cmd *c);
/* Record a memory barrier now (compute and transfer, both directions). */
void vkg_cmd_barrier(vkg_cmd *c);
/* Copy bytes between tensors (with the barriers this needs). */
vkg_status vkg_cmd_copy(vkg_cmd *c, vkg_tensor dst, vkg_tensor src, size_t bytes);
/* Finish recording. */
vkg_status vkg_cmd_end(vkg_cmd *c);
/* Submit the recorded list and wait for it (timeout_ns 0 = 10 minutes). Can be called any
 * number of times per recording. */
vkg_status vkg_cmd_run(vkg_cmd *c, uint64_t timeout_ns);
/* Submit without waiting; *value is the timeline value that signals completion. */
vkg_status vkg_cmd_submit(vkg_cmd *c, uint64_t *value);
vkg_status vkg_cmd_wait(vkg_cmd *c, uint64_t value, uint64_t timeout_ns);
/* Per-dispatch GPU times of the last completed run (device opened with profiling; else 0
 * entries). Pointer valid until the next begin/run. */
int vkg_cmd_timings(vkg_cmd *c, const vkg_cmd_timing **out);
/* The device a command list records for (ops pick variants from its tuning and info). */
vkg_device_t *vkg_cmd_device(const vkg_cmd *c);
/* Number of dispatches recorded. */
int vkg_cmd_dispatch_count(const vkg_cmd *c);
/* Pipeline barriers recorded since vkg_cmd_begin (the list's leading and trailing ones too). */
int vkg_cmd_barrier_count(const vkg_cmd *c);

#endif
