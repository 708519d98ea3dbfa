/* The ops' choices for a device (src/ops/tuning.c): which matmul kernel and tiles its products
 * run, chosen from the capabilities the device publishes (vkgpt/device.h) when its first op is
 * recorded. What a tool may read of them and the one thing it may force (--tiles); benchmarks
 * that sweep the rest use the ops' internal header (src/ops/tuning.h).
 */
#ifndef VKGPT_TUNING_H
#define VKGPT_TUNING_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/device.h"
#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tiles of the GPU matmul kernel (matmul_tiled.comp): a workgroup computes a bm x bn block
 * of the product, bk along k per step, each invocation tm x tn of it, so the workgroup has
 * (bm / tm) * (bn / tn) invocations; subgroup > 0 asks the driver for that subgroup size
 * (honoured only where the device's subgroup size control allows it for compute). dbuf = 1:
 * two shared-memory tiles per operand, one barrier per step instead of two, twice the shared
 * memory, the same bits. bm == 0: none given. */
typedef struct vkg_matmul_tiling {
    uint32_t bm, bn, bk, tm, tn, subgroup, dbuf;
} vkg_matmul_tiling;

/* Parse a --tiles value into *out: either an entry of the per-vendor table by name
 * ("nvidia-large"; vkg_matmul_tiling_entry lists them) or "BMxBNxBK:TMxTN" with an optional
 * "/SG" subgroup size ("128x128x16:8x8", "64x64x16:4x4/32"), either followed by "+db" (double
 * buffered) or "+sb" (single buffered); without one an entry keeps the table's choice and the
 * explicit form is single buffered. Checks the form and the ranges (bm, bn 1..256; bk 1..64;
 * tm, tn 1..16 dividing bm and bn; at most 1024 invocations; sg a power of two up to 128); the
 * device's own limits (invocations, shared memory) are checked when the tiling is applied.
 * Errors: VKG_ERR_INVALID_ARG with a message that quotes the value and says what was expected. */
vkg_status vkg_matmul_tiling_parse(const char *s, vkg_matmul_tiling *out);
/* Entry i (0 <= i < vkg_matmul_tiling_count()) of the per-vendor table: its name, and its tiles
 * in *out (may be NULL). NULL for i out of range. */
const char *vkg_matmul_tiling_entry(int i, vkg_matmul_tiling *out);
int vkg_matmul_tiling_count(void);
/* Bytes of shared memory matmul_tiled.comp declares for tiles t (both buffers when t->dbuf). */
size_t vkg_matmul_tiling_smem(const vkg_matmul_tiling *t);

/* Every product on dev runs the tiled matmul kernel with these tiles from now on, whatever the
 * device's table entry and the product's shape (vkgpt --tiles). Errors: VKG_ERR_INVALID_ARG
 * naming the limit of dev that the tiles exceed (invocations, shared memory); nothing changes. */
vkg_status vkg_device_force_tiles(vkg_device_t *dev, const vkg_matmul_tiling *tiles);

/* How dev's products run now (vkgpt devices, bench and train print it). */
typedef struct vkg_matmul_choice {
    int tiled;       /* 1: the tiled kernel (matmul_tiled.comp); 0: the register kernel */
    const char *row; /* the per-vendor table's row ("nvidia", "forced" after --tiles) */
    uint32_t fill;   /* workgroups that keep the device busy: a product takes the largest tile
                        whose grid has at least this many */
    vkg_matmul_tiling tiles[3]; /* small, medium and large products' */
    uint32_t subgroup[3];       /* the subgroup size each requires on dev (0: the driver's) */
    int dbuf_dropped[3];        /* 1: the table asked for double buffering, which dev's shared
                                   memory cannot hold (the tiles run single buffered) */
    int coopmat;                /* bf16 forward products: 0 the tiled kernel, 1 cooperative
                                   matrices, 2 their emulation */
    uint32_t coopmat_m, coopmat_n, coopmat_k; /* the fragments, where coopmat != 0 */
    int coopmat_rewritten; /* 1: the kernel's SPIR-V is rewritten to the KHR extension */
} vkg_matmul_choice;
void vkg_device_matmul_choice(const vkg_device_t *dev, vkg_matmul_choice *out);

#ifdef __cplusplus
}
#endif

#endif
