/* Which memory type each use of memory gets, chosen from the types and heaps a driver reports:
 * device-local pools for the arenas, host-cached memory for what the CPU reads back,
 * write-combined (or resizable-BAR) memory for what the CPU only writes.
 *
 * A pure function of the driver's tables: it makes no Vulkan calls and allocates nothing, so
 * tests/test_memtype.c feeds it the tables real drivers publish. Creating the buffers and
 * finding their memoryTypeBits is the caller's business (src/vk/device.c). This header is
 * internal to vkgpt.
 */
#ifndef VKG_VK_MEMTYPE_H
#define VKG_VK_MEMTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "vk/vkapi.h"

typedef enum vkg_mem_use {
    VKG_MEM_POOL,     /* device arenas: the GPU reads and writes them on every step */
    VKG_MEM_READBACK, /* host arenas and the staging buffer: the CPU reads them (and writes) */
    VKG_MEM_UPLOAD,   /* buffers the CPU only writes and the GPU then reads */
} vkg_mem_use;

/* A DEVICE_LOCAL|HOST_VISIBLE type whose heap is larger than this is resizable BAR (the whole of
 * video memory mapped for the CPU); one on a heap of this size or less is the fixed PCI window of
 * 256 MiB (drivers report 256 MiB, or 246 or 214 MiB after their own reservations), shared with
 * the driver and every other process: uploads do not go there. */
#define VKG_MEM_SMALL_BAR_BYTES ((VkDeviceSize)256 << 20)

/* The index of the memory type for `use`, among the types of `props` whose bit is set in
 * `type_bits` (VkMemoryRequirements.memoryTypeBits of the buffers it will hold), or -1 when none
 * fits. `unified`: the device's memory is the host's (a CPU or integrated GPU whose arenas are
 * mapped directly, vkg_device_info.unified_memory).
 *
 * Only types whose flags are DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT and HOST_CACHED are
 * candidates: lazily allocated and protected memory cannot hold buffers the CPU or a copy reads,
 * and AMD's device-coherent types need a feature vkgpt does not enable and bypass the GPU caches.
 * Every host-visible choice is HOST_COHERENT: vkgpt never calls vkFlushMappedMemoryRanges or
 * vkInvalidateMappedMemoryRanges, so a cached type that is not coherent (MoltenVK's managed
 * memory, some mobile drivers) is never chosen, and READBACK falls back to coherent uncached
 * memory instead.
 *
 * Discrete (unified = 0):
 *   POOL      DEVICE_LOCAL; preferring types that are not HOST_VISIBLE, then the largest heap
 *             (so never the 256 MiB BAR window while video memory proper exists).
 *   READBACK  HOST_VISIBLE|HOST_COHERENT; preferring HOST_CACHED, then not DEVICE_LOCAL (system
 *             memory, not a BAR the CPU would read across the bus). Without a cached type this
 *             returns coherent uncached memory: the caller can tell from the flags that reads
 *             will be slow.
 *   UPLOAD    HOST_VISIBLE|HOST_COHERENT; preferring DEVICE_LOCAL on a heap larger than
 *             VKG_MEM_SMALL_BAR_BYTES (resizable BAR: the CPU writes straight into video memory),
 *             then uncached (write-combined) memory, then not DEVICE_LOCAL.
 * Unified (unified = 1):
 *   POOL      DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (arenas are mapped), on the largest heap.
 *   READBACK  HOST_VISIBLE|HOST_COHERENT; preferring HOST_CACHED, then DEVICE_LOCAL.
 *   UPLOAD    HOST_VISIBLE|HOST_COHERENT; preferring uncached (write-combined), then DEVICE_LOCAL.
 * Remaining ties go to the lowest index: drivers list the type they find fastest first. */
int vkg__memtype_choose(const VkPhysicalDeviceMemoryProperties *props, uint32_t type_bits,
                        vkg_mem_use use, int unified);

/* Write the memory property flags vkgpt looks at as words ("device-local host-visible
 * host-coherent host-cached", "none" when there are none) into buf (cap bytes, cut to fit). */
void vkg__memtype_flags_str(VkMemoryPropertyFlags flags, char *buf, size_t cap);

#endif
