/* What src/ops/matmul.c and src/ops/matmul_tiled.c share: the GEMM kernels' push constants and
 * the tiled kernel's dispatch. Internal to the ops. */
#ifndef VKG_MATMUL_INTERNAL_H
#define VKG_MATMUL_INTERNAL_H

#include "ops/ops.h"

/* The push constants of shaders/matmul.comp and shaders/matmul_tiled.comp. */
typedef struct push_gemm {
    uint64_t out, a, b, bias;
    uint32_t M, N, K;
    uint32_t lda, ldb, ldo;
    uint32_t has_bias;
    uint32_t kchunk; /* matmul_tiled: k per workgroup z (K unless split); matmul: unused */
    uint64_t act;    /* GELU epilogue's output (vkg_gemm.act; else out, unused) */
} push_gemm;

/* g's push constants; split: the tiled kernel writes partial products (no bias, no epilogue)
 * into g->splitk_scratch, rows of N, kchunk k each. */
static inline push_gemm vkg__gemm_push(const vkg_gemm *g, int split, uint32_t kchunk)
{
    return (push_gemm){.out = split ? g->splitk_scratch->addr : g->out.addr,
                       .a = g->a.addr,
                       .b = g->b.addr,
                       .bias = g->bias ? g->bias->addr : g->out.addr,
                       .M = g->M,
                       .N = g->N,
                       .K = g->K,
                       .lda = g->lda,
                       .ldb = g->ldb,
                       .ldo = split ? g->N : g->ldo,
                       .has_bias = g->bias != NULL && !split,
                       .kchunk = kchunk,
                       .act = g->act && !split ? g->act->addr : g->out.addr};
}

/* Record a checked product g on the tiled kernel under tuning tu: its tiles by the grid, vec4
 * loads where the operands allow, and, for an accumulating product with g->splitk_scratch whose
 * grid is under tu->mmt_fill, split-K (the partial products, a barrier, their ordered sum).
 * limit: the shader index limit (the scratch slices stay below it). */
vkg_status vkg__matmul_tiled_dispatch(vkg_cmd *c, const vkg_gemm *g, const char *op,
                                      const vkg_device_tuning *tu, size_t limit);

/* Whether the cooperative-matrix kernel takes product g under tuning tu (src/ops/matmul_coopmat.c:
 * the device opened with it, g neither stored transposed nor wide nor given register tiles, and
 * a forward product with a bf16 operand, or with tu->coopmat_grads an accumulating (gradient)
 * product, unless tu->coopmat_all); and, for the forward pass
 * before its products are built, whether it takes them for these operand types. */
int vkg__coopmat_takes(const vkg_device_tuning *tu, const vkg_gemm *g, int wide);
int vkg__coopmat_takes_fwd(const vkg_device_tuning *tu, vkg_dtype inp, vkg_dtype weight);
/* Record a checked product g on the cooperative-matrix kernel (or its emulation, tu->coopmat ==
 * 2) in one dispatch. Errors: VKG_ERR_UNSUPPORTED when the device's workgroup or shared memory is
 * too small for its tiles. */
vkg_status vkg__matmul_coopmat_dispatch(vkg_cmd *c, const vkg_gemm *g, const char *op,
                                        const vkg_device_tuning *tu);

#endif
