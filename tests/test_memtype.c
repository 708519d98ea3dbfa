/* Tests for src/vk/memtype.c: the memory type each use gets, on the memory tables real drivers
 * report. Each table below is copied from a published vulkaninfo report (its source is named
 * above it): heap sizes and flags, and each type's flags and heap, in the driver's order. For each
 * table and use the test asserts the type index; then it narrows memoryTypeBits to check that a
 * type outside them is never chosen and what the choice falls back to (uncached memory for
 * readback, nothing at all rather than a type vkgpt cannot use). No GPU is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "vk/memtype.h"

#define DL VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
#define HV VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
#define HC VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
#define CACHED VK_MEMORY_PROPERTY_HOST_CACHED_BIT
#define LAZY VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT
#define AMD_COHERENT                                                                               \
    (VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD | VK_MEMORY_PROPERTY_DEVICE_UNCACHED_BIT_AMD)
#define HEAP_DL VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
#define HEAP_MULTI VK_MEMORY_HEAP_MULTI_INSTANCE_BIT

#define ALL_TYPES 0xffffffffu

/* The choice of each use on table p with these memoryTypeBits, asserted at the caller's line. */
#define EXPECT_CHOICES(p, bits, unified, pool, readback, upload)                                   \
    do {                                                                                           \
        assert_int_equal(vkg__memtype_choose(p, bits, VKG_MEM_POOL, unified), pool);               \
        assert_int_equal(vkg__memtype_choose(p, bits, VKG_MEM_READBACK, unified), readback);       \
        assert_int_equal(vkg__memtype_choose(p, bits, VKG_MEM_UPLOAD, unified), upload);           \
    } while (0)

static int cached(const VkPhysicalDeviceMemoryProperties *p, int type)
{
    return type >= 0 && (p->memoryTypes[type].propertyFlags & CACHED) != 0;
}

/* NVIDIA GeForce RTX 3060 Ti, Linux driver 510.73.05, no resizable BAR (the 246 MiB window).
 * Source: github.com/CGIProgrammer/DSGE, file `vulkaninfo`, commit d952837b (2022-10-02). */
static const VkPhysicalDeviceMemoryProperties nv_3060ti = {
    .memoryTypeCount = 11,
    .memoryTypes = {{0, 1},
                    {0, 1},
                    {0, 1},
                    {0, 1},
                    {0, 1},
                    {0, 1},
                    {0, 1},
                    {DL, 0},
                    {HV | HC, 1},
                    {HV | HC | CACHED, 1},
                    {DL | HV | HC, 2}},
    .memoryHeapCount = 3,
    .memoryHeaps = {{8589934592, HEAP_DL}, {17264824320, 0}, {257949696, HEAP_DL}},
};

/* NVIDIA GeForce RTX 5080, Linux, resizable BAR on (the host-visible type is on the 16 GiB heap).
 * Source: github.com/maxious/Aule-Attention, vulkaninfo.txt, commit 75fa4a27. */
static const VkPhysicalDeviceMemoryProperties nv_5080 = {
    .memoryTypeCount = 5,
    .memoryTypes = {{0, 1}, {DL, 0}, {HV | HC, 1}, {HV | HC | CACHED, 1}, {DL | HV | HC, 0}},
    .memoryHeapCount = 2,
    .memoryHeaps = {{17094934528, HEAP_DL}, {72203271168, 0}},
};

/* NVIDIA GeForce RTX 4060, Linux driver 550.144.03, resizable BAR on.
 * Source: github.com/bushman77/bushbot, vulkaninfo.log, commit 438e419c (2025-03-18). */
static const VkPhysicalDeviceMemoryProperties nv_4060 = {
    .memoryTypeCount = 5,
    .memoryTypes = {{0, 1}, {DL, 0}, {HV | HC, 1}, {HV | HC | CACHED, 1}, {DL | HV | HC, 0}},
    .memoryHeapCount = 2,
    .memoryHeaps = {{8585740288, HEAP_DL}, {25013726208, 0}},
};

/* AMD Radeon RX 470 (RADV POLARIS10), Mesa 23.2.1, no resizable BAR (a 256 MiB window). Types 1,
 * 4 and 6 are RADV's 32-bit-address copies of 0, 3 and 5, which it leaves out of every ordinary
 * buffer's memoryTypeBits (0x2d here).
 * Source: github.com/Soepgroente/scop, vulkaninfo.txt, commit 40ffefc9 (2025-11-27). */
static const VkPhysicalDeviceMemoryProperties radv_rx470 = {
    .memoryTypeCount = 7,
    .memoryTypes = {{DL, 0},
                    {DL, 0},
                    {HV | HC, 1},
                    {DL | HV | HC, 2},
                    {DL | HV | HC, 2},
                    {HV | HC | CACHED, 1},
                    {HV | HC | CACHED, 1}},
    .memoryHeapCount = 3,
    .memoryHeaps = {{4026531840, HEAP_DL}, {4294967296, 0}, {268435456, HEAP_DL}},
};
#define RADV_RX470_BUFFER_BITS 0x2du

/* AMD Radeon RX 6600, AMD's own driver 23.3.1 (Windows; the same memory model as AMDVLK, whose
 * own table was not found published), no resizable BAR. Types 4-7 are AMD device-coherent.
 * Source: github.com/heroseh/hcc-amd-vulkan-driver-crash, vulkaninfo.txt, commit c9dafe72
 * (2023-03-26). */
static const VkPhysicalDeviceMemoryProperties amd_rx6600 = {
    .memoryTypeCount = 8,
    .memoryTypes = {{DL, 0},
                    {HV | HC, 1},
                    {DL | HV | HC, 2},
                    {HV | HC | CACHED, 1},
                    {DL | AMD_COHERENT, 0},
                    {HV | HC | AMD_COHERENT, 1},
                    {DL | HV | HC | AMD_COHERENT, 2},
                    {HV | HC | CACHED | AMD_COHERENT, 1}},
    .memoryHeapCount = 3,
    .memoryHeaps = {{8304721920, HEAP_DL | HEAP_MULTI},
                    {16852713472, 0},
                    {268435456, HEAP_DL | HEAP_MULTI}},
};

/* Intel Arc Pro B60 (ANV, Battlemage, discrete), Mesa 25.2.3, resizable BAR. The driver lists
 * three types twice (4-6 repeat 0, 2, 3).
 * Source: github.com/maxious/Aule-Attention, vulkaninfo.txt, commit 75fa4a27. */
static const VkPhysicalDeviceMemoryProperties anv_b60 = {
    .memoryTypeCount = 7,
    .memoryTypes = {{DL, 0},
                    {DL, 0},
                    {HV | HC | CACHED, 1},
                    {DL | HV | HC, 0},
                    {DL, 0},
                    {HV | HC | CACHED, 1},
                    {DL | HV | HC, 0}},
    .memoryHeapCount = 2,
    .memoryHeaps = {{25669140480, HEAP_DL}, {72203271168, 0}},
};

/* Intel Xe Graphics (TGL GT2, ANV, integrated), Mesa 20.2.6: one type for everything.
 * Source: github.com/strumpystrudel/touchscreen-issue-popos, vulkaninfo.txt, commit b8a5e6be
 * (2021-01-09). */
static const VkPhysicalDeviceMemoryProperties anv_tgl = {
    .memoryTypeCount = 1,
    .memoryTypes = {{DL | HV | HC | CACHED, 0}},
    .memoryHeapCount = 1,
    .memoryHeaps = {{6099397632, HEAP_DL}},
};

/* AMD Ryzen 7 9800X3D graphics (RADV RAPHAEL_MENDOCINO, integrated), Mesa 25.2: a device-local
 * carve-out heap and system memory, write-combined and cached types on each, 32-bit copies (1, 4,
 * 6, outside buffers' memoryTypeBits) and AMD device-coherent types (7-10).
 * Source: github.com/maxious/Aule-Attention, vulkaninfo.txt, commit 75fa4a27. */
static const VkPhysicalDeviceMemoryProperties radv_raphael = {
    .memoryTypeCount = 11,
    .memoryTypes = {{DL, 1},
                    {DL, 1},
                    {HV | HC, 0},
                    {DL | HV | HC, 1},
                    {DL | HV | HC, 1},
                    {HV | HC | CACHED, 0},
                    {HV | HC | CACHED, 0},
                    {DL | AMD_COHERENT, 1},
                    {HV | HC | AMD_COHERENT, 0},
                    {DL | HV | HC | AMD_COHERENT, 1},
                    {HV | HC | CACHED | AMD_COHERENT, 0}},
    .memoryHeapCount = 2,
    .memoryHeaps = {{16760995840, 0}, {33521999872, HEAP_DL}},
};
#define RADV_RAPHAEL_BUFFER_BITS 0x7adu

/* Apple M1, MoltenVK: private, shared (coherent and cached), managed (cached, not coherent) and
 * memoryless memory. Source: github.com/KhronosGroup/MoltenVK/issues/2292 (vulkaninfo there). */
static const VkPhysicalDeviceMemoryProperties mvk_m1 = {
    .memoryTypeCount = 4,
    .memoryTypes = {{DL, 0}, {DL | HV | HC | CACHED, 0}, {DL | HV | CACHED, 0}, {DL | LAZY, 0}},
    .memoryHeapCount = 1,
    .memoryHeaps = {{17179869184, HEAP_DL}},
};

/* Apple M3 Max, MoltenVK 1.2.11.
 * Source: github.com/coghex/synarchy, vulkaninfo.txt, commit a7abb731 (2026-01-25). */
static const VkPhysicalDeviceMemoryProperties mvk_m3max = {
    .memoryTypeCount = 3,
    .memoryTypes = {{DL, 0}, {DL | HV | HC | CACHED, 0}, {DL | LAZY, 0}},
    .memoryHeapCount = 1,
    .memoryHeaps = {{68719476736, HEAP_DL}},
};

/* llvmpipe (LLVM 20.1.8, 256 bits), lavapipe: the CPU device the tests run on.
 * Source: github.com/maxious/Aule-Attention, vulkaninfo.txt, commit 75fa4a27. */
static const VkPhysicalDeviceMemoryProperties lavapipe = {
    .memoryTypeCount = 1,
    .memoryTypes = {{DL | HV | HC | CACHED, 0}},
    .memoryHeapCount = 1,
    .memoryHeaps = {{96271028224, HEAP_DL}},
};

/* Without resizable BAR: arenas in video memory proper (type 7, not the 246 MiB window 10),
 * readback in cached system memory, uploads in write-combined system memory (the window is too
 * small to hold them). */
static void test_nvidia_without_rebar(void **state)
{
    (void)state;
    const VkPhysicalDeviceMemoryProperties *p = &nv_3060ti;
    EXPECT_CHOICES(p, ALL_TYPES, 0, 7, 9, 8);
    assert_true(cached(p, 9));
    /* No cached type allowed: readback falls back to uncached system memory, not the window. */
    int rb = vkg__memtype_choose(p, ALL_TYPES & ~(1u << 9), VKG_MEM_READBACK, 0);
    assert_int_equal(rb, 8);
    assert_false(cached(p, rb));
    /* Video memory proper not allowed: the window is the only device-local type left. */
    assert_int_equal(vkg__memtype_choose(p, ALL_TYPES & ~(1u << 7), VKG_MEM_POOL, 0), 10);
    /* Only the seven flagless types: nothing fits any use. */
    EXPECT_CHOICES(p, 0x7fu, 0, -1, -1, -1);
}

/* With resizable BAR the host-visible device-local type covers all of video memory: uploads go
 * there; arenas still use the type the CPU cannot map. */
static void test_nvidia_with_rebar(void **state)
{
    (void)state;
    EXPECT_CHOICES(&nv_5080, ALL_TYPES, 0, 1, 3, 4);
    EXPECT_CHOICES(&nv_4060, ALL_TYPES, 0, 1, 3, 4);
    /* The BAR type not allowed: uploads fall back to write-combined system memory. */
    assert_int_equal(vkg__memtype_choose(&nv_5080, ALL_TYPES & ~(1u << 4), VKG_MEM_UPLOAD, 0), 2);
    /* Nothing host-cached allowed: readback takes uncached system memory before the BAR. */
    int rb = vkg__memtype_choose(&nv_5080, ALL_TYPES & ~(1u << 3), VKG_MEM_READBACK, 0);
    assert_int_equal(rb, 2);
    assert_false(cached(&nv_5080, rb));
}

/* RADV without resizable BAR: a window of exactly 256 MiB is not large, so uploads stay in
 * system memory; the 32-bit copies outside the buffer's bits change nothing. */
static void test_radv_discrete(void **state)
{
    (void)state;
    const VkPhysicalDeviceMemoryProperties *p = &radv_rx470;
    EXPECT_CHOICES(p, ALL_TYPES, 0, 0, 5, 2);
    EXPECT_CHOICES(p, RADV_RX470_BUFFER_BITS, 0, 0, 5, 2);
    /* Cached type 5 not allowed: its 32-bit copy 6 is next; neither: uncached 2, not window 3. */
    assert_int_equal(vkg__memtype_choose(p, ALL_TYPES & ~(1u << 5), VKG_MEM_READBACK, 0), 6);
    int rb = vkg__memtype_choose(p, RADV_RX470_BUFFER_BITS & ~(1u << 5), VKG_MEM_READBACK, 0);
    assert_int_equal(rb, 2);
    assert_false(cached(p, rb));
    /* Video memory not allowed: the arenas go to the window rather than nowhere. */
    assert_int_equal(vkg__memtype_choose(p, RADV_RX470_BUFFER_BITS & ~1u, VKG_MEM_POOL, 0), 3);
}

/* AMD's own driver: device-coherent types (4-7) are never chosen, not even the cached one (7)
 * when the ordinary cached type is not allowed. */
static void test_amd_proprietary(void **state)
{
    (void)state;
    const VkPhysicalDeviceMemoryProperties *p = &amd_rx6600;
    EXPECT_CHOICES(p, ALL_TYPES, 0, 0, 3, 1);
    int rb = vkg__memtype_choose(p, ALL_TYPES & ~(1u << 3), VKG_MEM_READBACK, 0);
    assert_int_equal(rb, 1);
    assert_false(cached(p, rb));
    EXPECT_CHOICES(p, 0xf0u, 0, -1, -1, -1);
}

/* ANV discrete: duplicated types resolve to the lowest index; restricted to the repeats, the
 * repeats are chosen. There is no uncached system-memory type, so uploads use the BAR. */
static void test_anv_discrete(void **state)
{
    (void)state;
    EXPECT_CHOICES(&anv_b60, ALL_TYPES, 0, 0, 2, 3);
    EXPECT_CHOICES(&anv_b60, 0x70u, 0, 4, 5, 6);
}

/* Integrated and CPU devices with one type: it serves every use, unified or staged. */
static void test_single_type_devices(void **state)
{
    (void)state;
    EXPECT_CHOICES(&anv_tgl, ALL_TYPES, 1, 0, 0, 0);
    EXPECT_CHOICES(&anv_tgl, ALL_TYPES, 0, 0, 0, 0);
    EXPECT_CHOICES(&lavapipe, ALL_TYPES, 1, 0, 0, 0);
    EXPECT_CHOICES(&lavapipe, ALL_TYPES, 0, 0, 0, 0); /* force_staging */
    assert_true(cached(&lavapipe, 0));
    EXPECT_CHOICES(&lavapipe, 0u, 1, -1, -1, -1);
}

/* RADV integrated: arenas in the mapped carve-out (3), readback in cached system memory (5),
 * uploads write-combined into the carve-out (3); AMD device-coherent types never. */
static void test_radv_integrated(void **state)
{
    (void)state;
    const VkPhysicalDeviceMemoryProperties *p = &radv_raphael;
    EXPECT_CHOICES(p, ALL_TYPES, 1, 3, 5, 3);
    EXPECT_CHOICES(p, RADV_RAPHAEL_BUFFER_BITS, 1, 3, 5, 3);
    assert_true(cached(p, 5));
    /* Staged (force_staging): arenas in the unmapped carve-out type. */
    EXPECT_CHOICES(p, RADV_RAPHAEL_BUFFER_BITS, 0, 0, 5, 3);
    /* Only the device-coherent types: nothing. */
    EXPECT_CHOICES(p, 0x780u, 1, -1, -1, -1);
    EXPECT_CHOICES(p, 0x780u, 0, -1, -1, -1);
}

/* MoltenVK: shared memory (1) for everything; the managed type (2) is cached but not coherent
 * and the memoryless one (3) cannot hold buffers, so without type 1 no host-visible use fits. */
static void test_moltenvk(void **state)
{
    (void)state;
    EXPECT_CHOICES(&mvk_m1, ALL_TYPES, 1, 1, 1, 1);
    EXPECT_CHOICES(&mvk_m3max, ALL_TYPES, 1, 1, 1, 1);
    assert_int_equal(vkg__memtype_choose(&mvk_m1, ALL_TYPES, VKG_MEM_POOL, 0), 0);
    EXPECT_CHOICES(&mvk_m1, ALL_TYPES & ~(1u << 1), 1, -1, -1, -1);
    assert_int_equal(vkg__memtype_choose(&mvk_m1, 1u << 3, VKG_MEM_POOL, 0), -1);
}

/* The heap rule, which no published table above needs: on a made-up table whose first
 * device-local type sits on a small heap, the type on the larger heap wins over the lower index,
 * for arenas and, among equals, for uploads. */
static void test_larger_heap_wins(void **state)
{
    (void)state;
    const VkPhysicalDeviceMemoryProperties p = {
        .memoryTypeCount = 4,
        .memoryTypes = {{DL, 0}, {DL, 1}, {HV | HC, 2}, {HV | HC, 3}},
        .memoryHeapCount = 4,
        .memoryHeaps = {{(VkDeviceSize)1 << 30, HEAP_DL},
                        {(VkDeviceSize)16 << 30, HEAP_DL},
                        {(VkDeviceSize)1 << 30, 0},
                        {(VkDeviceSize)32 << 30, 0}},
    };
    EXPECT_CHOICES(&p, ALL_TYPES, 0, 1, 3, 3);
    EXPECT_CHOICES(&p, 0x5u, 0, 0, 2, 2);
}

/* Types the table does not have (bits past memoryTypeCount) are never chosen. */
static void test_bits_past_the_table(void **state)
{
    (void)state;
    EXPECT_CHOICES(&nv_5080, 0xffffffe0u, 0, -1, -1, -1);
    EXPECT_CHOICES(&lavapipe, 0xfffffffeu, 1, -1, -1, -1);
}

static void test_flag_names(void **state)
{
    (void)state;
    char buf[80];
    vkg__memtype_flags_str(DL | HV | HC | CACHED, buf, sizeof buf);
    assert_string_equal(buf, "device-local host-visible host-coherent host-cached");
    vkg__memtype_flags_str(HV | HC, buf, sizeof buf);
    assert_string_equal(buf, "host-visible host-coherent");
    vkg__memtype_flags_str(0, buf, sizeof buf);
    assert_string_equal(buf, "none");
    vkg__memtype_flags_str(DL, buf, 6);
    assert_string_equal(buf, "devic");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvidia_without_rebar), cmocka_unit_test(test_nvidia_with_rebar),
        cmocka_unit_test(test_radv_discrete),        cmocka_unit_test(test_amd_proprietary),
        cmocka_unit_test(test_anv_discrete),         cmocka_unit_test(test_single_type_devices),
        cmocka_unit_test(test_radv_integrated),      cmocka_unit_test(test_moltenvk),
        cmocka_unit_test(test_larger_heap_wins),     cmocka_unit_test(test_bits_past_the_table),
        cmocka_unit_test(test_flag_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
