/* Memory type choice per use (memtype.h): filter the types a buffer may use, rank each candidate
 * by the preferences of its use, keep the best. No Vulkan calls, no allocation. */
#include <stdio.h>

#include "vk/memtype.h"

#define DL VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
#define HV VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
#define HC VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
#define CACHED VK_MEMORY_PROPERTY_HOST_CACHED_BIT

/* The only flags a candidate may carry (memtype.h says why the others are left out). */
static const VkMemoryPropertyFlags known_flags = DL | HV | HC | CACHED;

static VkMemoryPropertyFlags required(vkg_mem_use use, int unified)
{
    if (use == VKG_MEM_POOL)
        return unified ? DL | HV | HC : DL;
    return HV | HC;
}

/* How well a type of these flags on a heap of heap_bytes suits the use: preferences as bits, the
 * most important highest, so a larger value is better. The heap size breaks what this leaves
 * equal (see choose below). */
static unsigned preference(VkMemoryPropertyFlags f, VkDeviceSize heap_bytes, vkg_mem_use use,
                           int unified)
{
    unsigned dl = (f & DL) != 0, hv = (f & HV) != 0, cached = (f & CACHED) != 0;
    switch (use) {
    case VKG_MEM_POOL:
        return unified ? 0u : !hv;
    case VKG_MEM_READBACK:
        return (cached << 1) | (unified ? dl : !dl);
    case VKG_MEM_UPLOAD:
        if (unified)
            return (!cached << 1) | dl;
        return ((unsigned)(dl && hv && heap_bytes > VKG_MEM_SMALL_BAR_BYTES) << 2) |
               (!cached << 1) | !dl;
    }
    return 0;
}

int vkg__memtype_choose(const VkPhysicalDeviceMemoryProperties *props, uint32_t type_bits,
                        vkg_mem_use use, int unified)
{
    const VkMemoryPropertyFlags need = required(use, unified);
    int best = -1;
    unsigned best_pref = 0;
    VkDeviceSize best_heap = 0;
    uint32_t count =
        props->memoryTypeCount < VK_MAX_MEMORY_TYPES ? props->memoryTypeCount : VK_MAX_MEMORY_TYPES;
    for (uint32_t t = 0; t < count; t++) {
        const VkMemoryType *type = &props->memoryTypes[t];
        VkMemoryPropertyFlags f = type->propertyFlags;
        if (!(type_bits & (1u << t)) || (f & need) != need || (f & ~known_flags) ||
            type->heapIndex >= props->memoryHeapCount || type->heapIndex >= VK_MAX_MEMORY_HEAPS)
            continue;
        VkDeviceSize heap = props->memoryHeaps[type->heapIndex].size;
        unsigned pref = preference(f, heap, use, unified);
        /* Strictly better only: on a tie the lower index, seen first, stays. */
        if (best < 0 || pref > best_pref || (pref == best_pref && heap > best_heap)) {
            best = (int)t;
            best_pref = pref;
            best_heap = heap;
        }
    }
    return best;
}

void vkg__memtype_flags_str(VkMemoryPropertyFlags flags, char *buf, size_t cap)
{
    static const struct {
        VkMemoryPropertyFlags bit;
        const char *name;
    } names[] = {{DL, "device-local"},
                 {HV, "host-visible"},
                 {HC, "host-coherent"},
                 {CACHED, "host-cached"},
                 {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "lazily-allocated"},
                 {VK_MEMORY_PROPERTY_PROTECTED_BIT, "protected"}};
    if (!cap)
        return;
    buf[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(flags & names[i].bit) || len >= cap)
            continue;
        int n = snprintf(buf + len, cap - len, "%s%s", len ? " " : "", names[i].name);
        len = n < 0 ? cap : len + (size_t)n;
    }
    if (buf[0] == '\0')
        snprintf(buf, cap, "%s", (flags & ~known_flags) ? "other" : "none");
}
