/* The tiled matmul's per-vendor table: for each GPU vendor (PCI vendor ID) and kind (discrete or
 * not), the tiles of small, medium and large products, the subgroup size to require, and how many
 * workgroups keep such a device busy; the parser of --tiles; the subgroup size a pipeline may
 * require on a device. It does not measure anything and does not pick the size for a product
 * (src/ops/matmul.c does, from mmt_fill).
 *
 * NONE OF THESE VALUES WAS MEASURED ON A GPU YET (the project had only lavapipe when they were
 * written); they are starting points taken from public tuning, to be replaced by `vkgpt bench
 * ops --tiles` sweeps on each kind of device. Sources:
 *  - large 128 x 128 x 16 blocks, 8 x 8 per invocation, 256 invocations: the classic FP32 SGEMM
 *    blocking (the CUDA "how to optimize a SGEMM" series' fastest kernels use 128 x 128 with
 *    8 x 8 thread tiles; CUTLASS's SIMT SGEMM default threadblock is 128 x 128 x 8), and the
 *    block of llama.cpp's ggml-vulkan mul_mm large pipeline (l_warptile: BM = BN = 128, BK = 16).
 *  - medium 64 x 64 and small 32 x 32 blocks: ggml-vulkan's m_warptile and s_warptile blocks (its
 *    BK is 16 for float operands too); ggml picks s when M or N <= 32, m when <= 64, else l. Our
 *    choice is by the grid instead (src/ops/matmul.c): the largest tile whose grid still has
 *    mmt_fill workgroups, so that every compute unit gets work.
 *  - NVIDIA: warp size fixed at 32, nothing to require. fill 128: about one workgroup per SM on
 *    current parts (H100 SXM 132 SMs, RTX 4090 128); 8 x 8 per invocation fits Ampere/Hopper's
 *    255 registers per thread.
 *  - AMD: ggml-vulkan's guess_matmul_pipeline_amd never takes its large tile (s when M or N <=
 *    32, else m) and its RDNA configuration requires subgroups of 32 (wave32) for most
 *    pipelines: so 128 x 64 at most, and subgroup 32 (dropped on GCN, whose only size is 64).
 *    fill 96 (RDNA3 7900 XTX: 96 CUs; 60-84 on smaller parts). Integrated RDNA: fill 12.
 *  - Intel: ggml-vulkan's guess_matmul_pipeline_intel always takes its small tile; Xe's FP32
 *    SIMD width for compute is 16 (EUs of 8 lanes issue SIMD16 in two halves), so subgroup 16
 *    and no block over 64 x 64. fill 32 (Arc A770: 32 Xe cores), 8 for integrated Xe.
 *  - Apple (MoltenVK): ggml-vulkan takes its medium tile on Apple; SIMD groups are 32 and
 *    MoltenVK exposes no size control: 64 x 64 at most. fill 16 (M-series: 8 to 40 GPU cores).
 *  - other (ARM Mali, Qualcomm Adreno, Imagination, lavapipe when forced to the GPU kernel...):
 *    discrete as the common SGEMM blocking, integrated one step smaller, nothing required.
 * Double buffering (two shared tiles per operand, one barrier per step instead of two, the
 * standard form of the CUDA SGEMM series' and CUTLASS's multistage kernels): on for NVIDIA's and
 * discrete AMD's medium and large tiles, whose doubled tiles (128 x 128 x 16: 33 KB, 128 x 64 x
 * 16: 24 KB) fit the 48 KiB (NVIDIA) and 64 KiB (AMD) those devices give a workgroup; the small
 * tiles keep one buffer (their products are short, and a second buffer halves how many
 * workgroups share a compute unit's memory). Off elsewhere: Intel, Apple and the integrated and
 * unknown GPUs have either little shared memory to spare or shared memory in cache, where the
 * barrier saved costs little. Where a device has less shared memory than an entry's doubled
 * tiles, vkg__mmt_fit drops the second buffer (vkg_device_tuning.mmt_dbuf_dropped). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/tuning.h"

typedef struct mmt_row {
    const char *name;
    const char *entry[VKG_MMT_SIZES]; /* "<name>-small", -medium, -large */
    uint32_t vendor_id;               /* 0: any vendor without a row of its own */
    int discrete;                     /* 1: discrete GPUs; 0: the other kinds; -1: any */
    uint32_t fill;
    vkg_matmul_tiling tile[VKG_MMT_SIZES]; /* small, medium, large */
} mmt_row;

/* bm, bn, bk, tm, tn, subgroup; D: the same, double buffered */
#define T(bm, bn, bk, tm, tn, sg)                                                                  \
    {                                                                                              \
        bm, bn, bk, tm, tn, sg, 0                                                                  \
    }
#define D(bm, bn, bk, tm, tn, sg)                                                                  \
    {                                                                                              \
        bm, bn, bk, tm, tn, sg, 1                                                                  \
    }
#define NAMES(row)                                                                                 \
    {                                                                                              \
        row "-small", row "-medium", row "-large"                                                  \
    }
static const mmt_row rows[] = {
    {"nvidia",
     NAMES("nvidia"),
     0x10DE,
     -1,
     128,
     {T(32, 32, 16, 4, 4, 0), D(64, 64, 16, 4, 4, 0), D(128, 128, 16, 8, 8, 0)}},
    {"amd",
     NAMES("amd"),
     0x1002,
     1,
     96,
     {T(32, 32, 16, 4, 4, 32), D(64, 64, 16, 4, 4, 32), D(128, 64, 16, 8, 4, 32)}},
    {"amd-igpu",
     NAMES("amd-igpu"),
     0x1002,
     0,
     12,
     {T(32, 32, 16, 4, 4, 32), T(64, 32, 16, 4, 4, 32), T(64, 64, 16, 4, 4, 32)}},
    {"intel",
     NAMES("intel"),
     0x8086,
     1,
     32,
     {T(32, 32, 16, 4, 4, 16), T(32, 64, 16, 4, 4, 16), T(64, 64, 16, 4, 4, 16)}},
    {"intel-igpu",
     NAMES("intel-igpu"),
     0x8086,
     0,
     8,
     {T(32, 32, 16, 4, 4, 16), T(32, 64, 16, 4, 4, 16), T(64, 64, 16, 4, 4, 16)}},
    {"apple",
     NAMES("apple"),
     0x106B,
     -1,
     16,
     {T(32, 32, 16, 4, 4, 0), T(64, 32, 16, 4, 4, 0), T(64, 64, 16, 4, 4, 0)}},
    {"other",
     NAMES("other"),
     0,
     1,
     64,
     {T(32, 32, 16, 4, 4, 0), T(64, 64, 16, 4, 4, 0), T(128, 128, 16, 8, 8, 0)}},
    {"other-igpu",
     NAMES("other-igpu"),
     0,
     0,
     8,
     {T(16, 16, 16, 2, 2, 0), T(32, 32, 16, 2, 2, 0), T(64, 64, 16, 4, 4, 0)}},
};
#undef T
#undef D
#undef NAMES
#define NROWS (int)(sizeof rows / sizeof rows[0])

static int has_row(uint32_t vendor_id)
{
    for (int i = 0; i < NROWS; i++)
        if (rows[i].vendor_id == vendor_id)
            return 1;
    return 0;
}

/* The row for a device: its vendor's (of its kind where the vendor has two), else other's. */
static const mmt_row *row_for(uint32_t vendor_id, VkPhysicalDeviceType type)
{
    int discrete = type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    uint32_t v = has_row(vendor_id) ? vendor_id : 0;
    for (int i = 0; i < NROWS; i++)
        if (rows[i].vendor_id == v && (rows[i].discrete < 0 || rows[i].discrete == discrete))
            return &rows[i];
    return &rows[NROWS - 1];
}

void vkg__mmt_defaults(uint32_t vendor_id, VkPhysicalDeviceType type, vkg_device_tuning *t)
{
    const mmt_row *r = row_for(vendor_id, type);
    memcpy(t->mmt, r->tile, sizeof t->mmt);
    t->mmt_fill = r->fill;
    t->mmt_splitk = 1;
    t->mmt_vec4 = 1;
    t->mmt_row = r->name;
    t->mmt_dbuf_dropped = 0;
}

void vkg__mmt_force(vkg_device_tuning *t, const vkg_matmul_tiling *tiles)
{
    t->matmul_tiled = 1;
    for (int s = 0; s < VKG_MMT_SIZES; s++)
        t->mmt[s] = *tiles;
    t->mmt_row = "forced";
    t->mmt_dbuf_dropped = 0;
}

uint32_t vkg__mmt_subgroup(const vkg_device_t *dev, const vkg_matmul_tiling *t)
{
    const vkg_device_info *in = &dev->info;
    uint32_t sg = t->subgroup, threads = (t->bm / t->tm) * (t->bn / t->tn);
    if (sg == 0 || !in->subgroup_size_control || sg < in->subgroup_size_min ||
        sg > in->subgroup_size_max)
        return 0;
    return threads <= (uint64_t)sg * in->max_workgroup_subgroups ? sg : 0;
}

int vkg_matmul_tiling_count(void)
{
    return NROWS * VKG_MMT_SIZES;
}

const char *vkg_matmul_tiling_entry(int i, vkg_matmul_tiling *out)
{
    if (i < 0 || i >= vkg_matmul_tiling_count())
        return NULL;
    const mmt_row *r = &rows[i / VKG_MMT_SIZES];
    if (out)
        *out = r->tile[i % VKG_MMT_SIZES];
    return r->entry[i % VKG_MMT_SIZES];
}

/* A whole number from lo to hi at *p, followed by `sep` (or the end when sep is 0). */
static int parse_part(const char **p, char sep, uint32_t lo, uint32_t hi, uint32_t *v)
{
    if (**p < '0' || **p > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long x = strtoul(*p, &end, 10);
    if (errno || x < lo || x > hi || *end != sep)
        return 0;
    *v = (uint32_t)x;
    *p = end + (sep != 0);
    return 1;
}

/* s is the whole --tiles value (quoted in errors), body the part before any +db or +sb. */
static vkg_status parse_explicit(const char *s, const char *body, vkg_matmul_tiling *t)
{
    const char *p = body;
    const char *sg = strchr(body, '/');
    int ok = parse_part(&p, 'x', 1, 256, &t->bm) && parse_part(&p, 'x', 1, 256, &t->bn) &&
             parse_part(&p, ':', 1, 64, &t->bk) && parse_part(&p, 'x', 1, 16, &t->tm) &&
             parse_part(&p, sg ? '/' : 0, 1, 16, &t->tn) &&
             (!sg || parse_part(&p, 0, 1, 128, &t->subgroup));
    VKG_CHECK(ok, VKG_ERR_INVALID_ARG,
              "--tiles '%s': expected BMxBNxBK:TMxTN[/SG][+db|+sb] (BM, BN 1..256, BK 1..64, TM, "
              "TN 1..16, SG 1..128; +db double buffered, +sb single, the default; e.g. "
              "128x128x16:8x8+db) or a table entry such as nvidia-large[+db|+sb]",
              s);
    VKG_CHECK(t->bm % t->tm == 0 && t->bn % t->tn == 0, VKG_ERR_INVALID_ARG,
              "--tiles '%s': the block %ux%u is not a whole number of %ux%u tiles", s, t->bm, t->bn,
              t->tm, t->tn);
    uint32_t threads = (t->bm / t->tm) * (t->bn / t->tn);
    VKG_CHECK(threads <= 1024, VKG_ERR_INVALID_ARG,
              "--tiles '%s': %u invocations per workgroup, more than any device allows (1024)", s,
              threads);
    VKG_CHECK((t->subgroup & (t->subgroup - 1)) == 0, VKG_ERR_INVALID_ARG,
              "--tiles '%s': subgroup size %u is not a power of two", s, t->subgroup);
    return VKG_OK;
}

/* The buffering suffix of s: *dbuf = 1 for "+db", 0 for "+sb", -1 for none; the rest (at most
 * cap - 1 characters) into body. */
static vkg_status split_suffix(const char *s, char *body, size_t cap, int *dbuf)
{
    const char *plus = strrchr(s, '+');
    size_t n = plus ? (size_t)(plus - s) : strlen(s);
    *dbuf = -1;
    if (plus) {
        VKG_CHECK(!strcmp(plus, "+db") || !strcmp(plus, "+sb"), VKG_ERR_INVALID_ARG,
                  "--tiles '%s': unknown suffix '%s' (+db: double-buffered shared tiles, +sb: "
                  "single)",
                  s, plus);
        *dbuf = plus[1] == 'd';
    }
    VKG_CHECK(n > 0 && n < cap, VKG_ERR_INVALID_ARG,
              "--tiles '%s': expected BMxBNxBK:TMxTN[/SG] or a table entry before '%s'", s,
              plus ? plus : "");
    memcpy(body, s, n);
    body[n] = '\0';
    return VKG_OK;
}

vkg_status vkg_matmul_tiling_parse(const char *s, vkg_matmul_tiling *out)
{
    VKG_CHECK(s && *s, VKG_ERR_INVALID_ARG, "--tiles: empty value");
    vkg_matmul_tiling t = {0};
    char body[64];
    int dbuf;
    VKG_TRY(split_suffix(s, body, sizeof body, &dbuf));
    int found = 0;
    if (*body >= '0' && *body <= '9') {
        VKG_TRY(parse_explicit(s, body, &t));
        found = 1;
    }
    for (int i = 0; i < vkg_matmul_tiling_count() && !found; i++)
        found = !strcmp(body, vkg_matmul_tiling_entry(i, &t));
    VKG_CHECK(found, VKG_ERR_INVALID_ARG,
              "--tiles '%s': no such table entry (entries are <row>-small, -medium or -large for "
              "the rows nvidia, amd, amd-igpu, intel, intel-igpu, apple, other, other-igpu, "
              "optionally +db or +sb for double or single buffering; or give "
              "BMxBNxBK:TMxTN[/SG][+db|+sb])",
              s);
    if (dbuf >= 0)
        t.dbuf = (uint32_t)dbuf;
    *out = t;
    return VKG_OK;
}
