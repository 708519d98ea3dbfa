/* Which products run on cooperative matrices, and their dispatch (shaders/matmul_coopmat.glsl:
 * matmul_coopmat.comp on the device's fragments, matmul_coopmat_emu.comp as plain arithmetic).
 * Off unless the device was opened with vkg_device_opts.coopmat (vkgpt --coopmat on|emulate).
 * The operands are rounded to f16 (range 6e-8 .. 65504; see the shader), so only forward
 * products with a bf16 operand are sent (mixed precision: the bf16 weights copy times
 * activations; bf16 values in f16's normal range convert exactly); gradient products, whose
 * operands underflow f16 without a loss scale, and fp32 products stay on the other kernels,
 * unless the tuning's coopmat_grads sends the gradient products (dinp and dweight accumulate)
 * too: the trainer sets it only with dynamic loss scaling on. The tuning's coopmat_all (tests)
 * sends every product the tiled kernel could run. The shape checks
 * and the index limit are src/ops/matmul.c's, done before. */
#include "ops/matmul_internal.h"
#include "ops/op_util.h"

VKG_PUSH_CHECK(push_gemm, matmul_coopmat);
VKG_PUSH_CHECK(push_gemm, matmul_coopmat_emu);

#define WARPS 4 /* subgroups per workgroup: SGM x SGN of the shader */
#define EMU_THREADS 128u

/* Shared memory of the kernel's tiles (matmul_coopmat.glsl: As, Bs of f16, or f32 in the
 * emulation, padded by 8 elements a row; Cs of f32, padded by 4). */
static size_t tile_bytes(uint32_t bm, uint32_t bn, uint32_t bk, int emu)
{
    size_t h = emu ? 4 : 2;
    return (size_t)bm * (bk + 8) * h + (size_t)bk * (bn + 8) * h + (size_t)bm * (bn + 4) * 4;
}

int vkg__coopmat_takes_fwd(const vkg_device_tuning *tu, vkg_dtype inp, vkg_dtype weight)
{
    return tu->coopmat && (tu->coopmat_all || inp == VKG_BF16 || weight == VKG_BF16);
}

int vkg__coopmat_takes(const vkg_device_tuning *tu, const vkg_gemm *g, int wide)
{
    if (!tu->coopmat || g->out_t || wide || g->tiles.tm || g->tiles.tn || g->tiles.lx)
        return 0;
    if (tu->coopmat_all)
        return 1;
    if (g->accumulate) /* the gradient products */
        return tu->coopmat_grads != 0;
    return g->a.dtype == VKG_BF16 || g->b.dtype == VKG_BF16;
}

vkg_status vkg__matmul_coopmat_dispatch(vkg_cmd *c, const vkg_gemm *g, const char *op,
                                        const vkg_device_tuning *tu)
{
    const vkg_device_info *info = vkg_device_get_info(vkg_cmd_device(c));
    int emu = tu->coopmat == 2;
    /* The real kernel: WARPS subgroups of the device's size (a subgroup may take two warp
     * tiles when the driver makes them wider). */
    uint32_t threads = emu ? EMU_THREADS : WARPS * info->subgroup_size;
    VKG_CHECK(threads <= info->max_workgroup_invocations, VKG_ERR_UNSUPPORTED,
              "%s: the cooperative-matrix kernel needs %u invocations per workgroup, more than "
              "%s's %u",
              op, threads, info->name, info->max_workgroup_invocations);
    /* The largest warp tile (FM x FN fragments; 2 x 2 warp tiles a block) whose tiles fit shared
     * memory, two k-fragments a step where they fit, else one; the emulation also keeps to its
     * 64 block elements an invocation. */
    static const uint32_t warp[][2] = {{4, 4}, {2, 4}, {4, 2}, {2, 2}};
    uint32_t fm = 0, fn = 0, ksteps = 0;
    size_t smem = 0;
    for (size_t w = 0; w < sizeof warp / sizeof warp[0] && !ksteps; w++) {
        uint32_t bm = 2 * warp[w][0] * tu->coopmat_m, bn = 2 * warp[w][1] * tu->coopmat_n;
        if (emu && (size_t)bm * bn > 64 * (size_t)EMU_THREADS)
            continue;
        for (uint32_t ks = 2; ks >= 1 && !ksteps; ks--) {
            smem = tile_bytes(bm, bn, ks * tu->coopmat_k, emu);
            if (smem <= info->max_shared_memory)
                fm = warp[w][0], fn = warp[w][1], ksteps = ks;
        }
    }
    VKG_CHECK(ksteps, VKG_ERR_UNSUPPORTED,
              "%s: the cooperative-matrix kernel's smallest tiles need %zu bytes of shared "
              "memory, more than %s's %u",
              op, smem, info->name, info->max_shared_memory);
    uint32_t bm = 2 * fm * tu->coopmat_m, bn = 2 * fn * tu->coopmat_n;
    /* one warp tile a subgroup where subgroups are always of the reported size */
    int fixed = info->subgroup_size_control && info->subgroup_size_min == info->subgroup_size &&
                info->subgroup_size_max == info->subgroup_size;
    push_gemm p = vkg__gemm_push(g, 0, g->K);
    /* PAIRS: a bf16, k-contiguous operand with even K and leading dimension is staged two
     * elements (one 32-bit word) a load */
    uint32_t pairs = (g->a.dtype == VKG_BF16 && g->a_kcontig && g->K % 2 == 0 && g->lda % 2 == 0) |
                     (g->b.dtype == VKG_BF16 && g->b_kcontig && g->K % 2 == 0 && g->ldb % 2 == 0)
                         << 1;
    /* STORE_BF16: bit 0 act, bit 1 out */
    uint32_t store = (g->act && g->act->dtype == VKG_BF16) | (g->out.dtype == VKG_BF16) << 1;
    uint32_t spec[18] = {threads,
                         1,
                         1,
                         tu->coopmat_m,
                         tu->coopmat_n,
                         tu->coopmat_k,
                         g->a_kcontig ? 1u : 0u,
                         g->b_kcontig ? 1u : 0u,
                         g->accumulate ? 1u : 0u,
                         g->act ? 1u : 0u,
                         g->a.dtype == VKG_BF16,
                         g->b.dtype == VKG_BF16,
                         store,
                         ksteps,
                         fm,
                         fn,
                         fixed ? 1u : 2u,
                         pairs};
    return vkg_cmd_dispatch(c, emu ? VKG_KERNEL_matmul_coopmat_emu : VKG_KERNEL_matmul_coopmat,
                            spec, 18, &p, sizeof p, vkg__ceil_div(g->N, bn),
                            vkg__ceil_div(g->M, bm), 1, op);
}
