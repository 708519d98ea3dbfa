/* Device tuning: the kernel variants, tiles and workgroup sizes the ops use on one device. The
 * runtime (src/vk) publishes what a device can do (vkg_device_info, the cooperative-matrix
 * configuration it opened, the type and vendor to tune for); the ops choose from that here, once
 * per device, when the first op asks (vkg_device_tuning_get), and keep the choice in the device.
 * Benchmarks and tests may replace it (vkg_device_tuning_set); tools read it through the public
 * vkgpt/tuning.h. Internal to the library. */
#ifndef VKG_OPS_TUNING_H
#define VKG_OPS_TUNING_H

#include "vk/vk.h"
#include "vkgpt/tuning.h"

/* The two forms of the flash attention kernels (attention_fwd, attention_bwd_dq, _dkv). */
typedef enum vkg_attention_variant {
    VKG_ATTENTION_SHARED, /* one invocation per query row (or key), 64 (32) per workgroup, the
                             tiles of keys and values (queries) staged in shared memory */
    VKG_ATTENTION_DIRECT, /* one subgroup of 4 to 16 lanes per workgroup (where the device's
                             subgroups are that wide; else as SHARED), register tiles and subgroup
                             broadcasts reading straight from memory: no shared memory and no
                             barriers (devices where a barrier is costly) */
} vkg_attention_variant;

/* Sizes of product the tiled matmul has tiles for. */
typedef enum vkg_mmt_size {
    VKG_MMT_SMALL,
    VKG_MMT_MEDIUM,
    VKG_MMT_LARGE,
    VKG_MMT_SIZES
} vkg_mmt_size;

/* Columns per workgroup of the chunked bias and layernorm-parameter gradients
 * (vkg_device_tuning.grad_reduce_chunks). */
#define VKG_GRAD_REDUCE_CX 16u

/* The kernel variants, tiles and workgroup sizes the ops use on one device. Ops read these and
 * the capabilities in vkg_device_info; they never look at the device's type or name. Every field
 * is used as it stands (no "0 = default"). */
typedef struct vkg_device_tuning {
    uint32_t matmul_tm, matmul_tn; /* matmul.comp register tile: rows x columns per invocation */
    uint32_t matmul_lx;            /* matmul.comp invocations per workgroup */
    /* An accumulating, not transposed product whose B operand exceeds this many bytes is split
     * along K into chunks of about this size, added in order (0: never split). */
    uint32_t matmul_ksplit_bytes;
    /* 1: products run matmul_tiled.comp (shared-memory block tiles, both operands read in their
     * stored layouts, so the forward pass needs no transpose); 0: matmul.comp. */
    uint32_t matmul_tiled;
    /* matmul_tiled.comp tiles for small, medium and large products (the device's row of the
     * per-vendor table, src/ops/mmt.c, unless --tiles forced one for all three): a product takes
     * the largest whose grid has at least mmt_fill workgroups, else the small one. */
    vkg_matmul_tiling mmt[VKG_MMT_SIZES];
    uint32_t mmt_fill;   /* workgroups that keep the device busy (about 1 per compute unit) */
    uint32_t mmt_splitk; /* 1: a weight gradient with a grid under mmt_fill is split along K */
    uint32_t mmt_vec4;   /* 1: vec4 loads of operands whose shape and alignment allow them */
    const char *mmt_row; /* name of the table row ("nvidia", "forced" after --tiles) */
    /* Bit s set: the table's size-s tile asked for double buffering, dropped by vkg__mmt_fit
     * because the device's shared memory holds only one buffer (the CLI says so). */
    uint32_t mmt_dbuf_dropped;
    vkg_attention_variant attention;
    uint32_t layernorm_wg;   /* invocations per row, layernorm_fwd and _bwd_dinp (power of 2) */
    uint32_t xent_wg_max;    /* most invocations per row of xent_fwd_bwd (power of 2) */
    uint32_t encoder_wte_wg; /* invocations per workgroup of encoder_bwd_wte */
    uint32_t sumsq_wg;       /* invocations per workgroup of sumsq_partial/_final (power of 2) */
    /* The bias and layernorm-parameter gradients (column sums over the B*T rows): 0 keeps the
     * serial forms (matmul_bwd_bias: one invocation per column over every row; layernorm
     * dparams: 16 row lanes, strided); n > 0 cuts the rows into n contiguous chunks summed by
     * n row lanes of a workgroup of 16 columns, the chunk sums then added in order (a fixed
     * two-level order: deterministic, other bits than 0's). At most the device's invocations /
     * 16. */
    uint32_t grad_reduce_chunks;
    /* Cooperative matrices (src/ops/matmul_coopmat.c): 0 off; 1 the forward products with a
     * bf16 operand run shaders/matmul_coopmat.comp on fragments of coopmat_m x coopmat_n x
     * coopmat_k (a configuration of the device); 2 the same products run its emulation,
     * matmul_coopmat_emu.comp. coopmat_grads = 1: the gradient products (dinp, dweight: the
     * accumulating ones) too, whatever their operands; only safe with a loss scale that keeps
     * dout within f16's range (the trainer's --loss-scale sets it). coopmat_all = 1 (tests):
     * every product that the tiled kernel could run goes there instead, fp32 ones too. */
    uint32_t coopmat, coopmat_all, coopmat_grads;
    uint32_t coopmat_m, coopmat_n, coopmat_k;
} vkg_device_tuning;

/* The tuning a device of this type and subgroup size starts from: the one place
 * where a device's kind chooses kernel variants. CPU devices (lavapipe: a workgroup runs on one
 * core, every barrier switches through its subgroups, every load is a gather) get narrow
 * workgroups, the subgroup-broadcast matmul tile and the barrier-free attention; every other
 * device the wide GPU forms. */
vkg_device_tuning vkg__device_tuning_defaults(VkPhysicalDeviceType type, uint32_t subgroup_size);
/* Fill t's tiled-matmul fields (mmt, mmt_fill, mmt_splitk, mmt_vec4, mmt_row) from the row of the
 * per-vendor table (src/ops/mmt.c) for this PCI vendor and device type; mmt_dbuf_dropped to 0. */
void vkg__mmt_defaults(uint32_t vendor_id, VkPhysicalDeviceType type, vkg_device_tuning *t);
/* Replace each of t's tiled-matmul tiles that dev cannot run (invocations, shared memory) by the
 * next smaller size's that it can, or by 16x16x16:2x2 (which every Vulkan device can run): the
 * table's rows assume the limits of their vendors' current parts. A double-buffered tile whose
 * single-buffered form fits first loses its second buffer (marked in t->mmt_dbuf_dropped). */
void vkg__mmt_fit(const vkg_device_t *dev, vkg_device_tuning *t);
/* Force one tiling for products of every size (vkgpt --tiles): t's tiled kernel on, its three
 * sizes the given tiles (split-K stays as it was: a split product runs these tiles too). */
void vkg__mmt_force(vkg_device_tuning *t, const vkg_matmul_tiling *tiles);
/* The subgroup size a pipeline of tiles t may require on dev: t->subgroup where the device's
 * subgroup size control covers it for a workgroup of this many invocations, else 0. */
uint32_t vkg__mmt_subgroup(const vkg_device_t *dev, const vkg_matmul_tiling *t);
/* The tuning the device's ops use now (its defaults unless vkg_device_tuning_set changed it). */
vkg_device_tuning vkg_device_tuning_get(const vkg_device_t *dev);
/* Replace the device's tuning; ops recorded afterwards use it (lists recorded before keep what
 * they recorded).
 * Errors: VKG_ERR_INVALID_ARG naming the first field out of range (tiles from 1 to 16,
 * workgroups from 1 to the device's invocation limit, powers of two where marked, a known
 * attention variant); the tuning is then left unchanged. */
vkg_status vkg_device_tuning_set(vkg_device_t *dev, const vkg_device_tuning *t);

#endif
