/* The tiled matmul's plan for one product (shaders/matmul_tiled.comp, GPUs): which of the
 * device's small, medium and large tiles (src/ops/mmt.c) it takes, whether its operands can be
 * read as vec4s, and whether a weight gradient splits K into chunks summed in order by
 * shaders/matmul_bwd_splitk.comp. It records the dispatches; the checks of sizes, tensors and the
 * index limit are src/ops/matmul.c's, done before. */
#include "ops/matmul_internal.h"
#include "ops/op_util.h"

VKG_PUSH_CHECK(push_gemm, matmul_tiled);

typedef struct push_splitk {
    uint64_t out, part;
    uint32_t M, N, ldo, S;
} push_splitk;
VKG_PUSH_CHECK(push_splitk, matmul_bwd_splitk);

/* How the tiled kernel runs a product: tiles, vec4 loads, and the split along K (s chunks of
 * kchunk; s = 1: not split). */
typedef struct tiled_plan {
    const vkg_matmul_tiling *tile;
    uint32_t vec4, s, kchunk;
} tiled_plan;

#define SPLITK_MAX 8u     /* chunks: more costs more scratch traffic than it wins (ggml's cap) */
#define SPLITK_ALIGN 256u /* k per chunk is a multiple of this (and at least this) */

static uint32_t grid_of(const vkg_matmul_tiling *t, uint32_t M, uint32_t N)
{
    return vkg__ceil_div(M, t->bm) * vkg__ceil_div(N, t->bn);
}

/* 1 when an operand of `extent` elements of `esize` bytes along its contiguous dimension, rows
 * `ld` elements apart, at address addr, can be read 4 elements at a time. */
static int vec4_ok(uint32_t extent, uint32_t ld, uint64_t addr, uint32_t esize)
{
    return extent % 4 == 0 && ld % 4 == 0 && addr % (4 * esize) == 0;
}

/* Whether both of g's operands (and tile t) allow vec4 loads (4 floats, or 4 bf16 widened). */
static uint32_t use_vec4(const vkg_device_tuning *tu, const vkg_matmul_tiling *t, const vkg_gemm *g)
{
    if (!tu->mmt_vec4 || t->bk % 4 || t->bm % 4 || t->bn % 4)
        return 0;
    uint32_t ea = g->a.dtype == VKG_BF16 ? 2 : 4, eb = g->b.dtype == VKG_BF16 ? 2 : 4;
    return vec4_ok(g->a_kcontig ? g->K : g->M, g->lda, g->a.addr, ea) &&
           vec4_ok(g->b_kcontig ? g->K : g->N, g->ldb, g->b.addr, eb);
}

/* Split-K chunks of K for g on tile t: only accumulating products given a scratch
 * (g->splitk_scratch, holding S * M * N floats), where the grid has fewer than mmt_fill
 * workgroups; at most SPLITK_MAX chunks of a multiple of SPLITK_ALIGN rows each, none empty. */
static void plan_splitk(const vkg_device_tuning *tu, const vkg_gemm *g, size_t limit,
                        tiled_plan *pl)
{
    pl->s = 1, pl->kchunk = g->K;
    uint32_t groups = grid_of(pl->tile, g->M, g->N);
    if (!tu->mmt_splitk || !g->splitk_scratch || !g->accumulate || g->out_t ||
        groups >= tu->mmt_fill || g->K < 2 * SPLITK_ALIGN)
        return;
    size_t mn = (size_t)g->M * g->N, room = g->splitk_scratch->bytes / 4;
    room = room < limit ? room : limit;
    uint32_t s = vkg__ceil_div(tu->mmt_fill, groups);
    s = s < SPLITK_MAX ? s : SPLITK_MAX;
    s = s < g->K / SPLITK_ALIGN ? s : g->K / SPLITK_ALIGN;
    s = (size_t)s <= room / mn ? s : (uint32_t)(room / mn);
    if (s < 2)
        return;
    uint32_t kc = vkg__ceil_div(vkg__ceil_div(g->K, s), SPLITK_ALIGN) * SPLITK_ALIGN;
    pl->kchunk = kc;
    pl->s = vkg__ceil_div(g->K, kc);
}

/* The tiles for g: a product that may be split along K takes the large tile (split-K refills
 * the device); any other the largest whose grid has mmt_fill workgroups, else the small one. */
static tiled_plan plan_tiled(const vkg_device_tuning *tu, const vkg_gemm *g, size_t limit)
{
    tiled_plan pl = {.tile = &tu->mmt[VKG_MMT_SMALL]};
    for (int sz = VKG_MMT_LARGE; sz > VKG_MMT_SMALL; sz--)
        if (grid_of(&tu->mmt[sz], g->M, g->N) >= tu->mmt_fill) {
            pl.tile = &tu->mmt[sz];
            break;
        }
    tiled_plan big = {.tile = &tu->mmt[VKG_MMT_LARGE]};
    plan_splitk(tu, g, limit, &big);
    if (big.s > 1)
        pl = big;
    else
        plan_splitk(tu, g, limit, &pl);
    pl.vec4 = use_vec4(tu, pl.tile, g);
    return pl;
}

/* Into g's output, or, split, the s partial products into the scratch (one slice of M x N
 * each) and their ordered sum into g's output (after a barrier). */
vkg_status vkg__matmul_tiled_dispatch(vkg_cmd *c, const vkg_gemm *g, const char *op,
                                      const vkg_device_tuning *tu, size_t limit)
{
    tiled_plan pl = plan_tiled(tu, g, limit);
    const vkg_matmul_tiling *t = pl.tile;
    int split = pl.s > 1;
    push_gemm p = vkg__gemm_push(g, split, pl.kchunk);
    uint32_t abf = g->a.dtype == VKG_BF16, bbf = g->b.dtype == VKG_BF16;
    /* STORE_BF16: bit 0 act, bit 1 out (a bf16 out is never split: split products accumulate) */
    uint32_t store = (g->act && !split && g->act->dtype == VKG_BF16);
    store |= (g->out.dtype == VKG_BF16) << 1;
    uint32_t spec[17] = {t->bn / t->tn,
                         t->bm / t->tm,
                         1,
                         t->bm,
                         t->bn,
                         t->bk,
                         t->tm,
                         t->tn,
                         g->a_kcontig ? 1u : 0u,
                         g->b_kcontig ? 1u : 0u,
                         g->accumulate && !split ? 1u : 0u,
                         pl.vec4,
                         g->act && !split ? 1u : 0u,
                         abf,
                         bbf,
                         store,
                         t->dbuf};
    /* Single-buffered fp32 products name no bf16 constants (their pipelines are those of before
     * bf16 and double buffering). */
    int nspec = t->dbuf ? 17 : store ? 16 : abf || bbf ? 15 : 13;
    VKG_TRY(vkg_cmd_dispatch_sg(c, VKG_KERNEL_matmul_tiled, spec, nspec,
                                vkg__mmt_subgroup(vkg_cmd_device(c), t), &p, sizeof p,
                                vkg__ceil_div(g->N, t->bn), vkg__ceil_div(g->M, t->bm), pl.s, op));
    if (!split)
        return VKG_OK;
    vkg_cmd_barrier(c); /* the partial products are complete before they are summed */
    push_splitk q = {.out = g->out.addr,
                     .part = g->splitk_scratch->addr,
                     .M = g->M,
                     .N = g->N,
                     .ldo = g->ldo,
                     .S = pl.s};
    size_t mn = (size_t)g->M * g->N;
    uint32_t groups = vkg__ceil_div(mn, 256);
    uint32_t rspec[3] = {256, 1, 1};
    return vkg_cmd_dispatch(c, VKG_KERNEL_matmul_bwd_splitk, rspec, 3, &q, sizeof q,
                            groups < 65535 ? groups : 65535, 1, 1, op);
}
