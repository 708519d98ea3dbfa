/* The cooperative-matrix kernel's check at start (--coopmat auto): one forward product with bf16
 * operands on it, compared bit for bit with sums that fp32 holds exactly in any order of
 * addition, so that a device or driver whose tensor-core results are wrong is found before a run
 * trains on them. It does not measure speed and does not choose the configuration (src/vk/coopmat.c
 * does, when the device is created). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* The product: M x N outputs over K. N is odd, so the epilogue's last column is a single
 * element; M and N are no multiple of any tile. */
enum { CHECK_M = 70, CHECK_N = 41, CHECK_K = 64 };

/* Operand values k / 4 with |k| <= 8: exact in f16 and bf16, products are multiples of 1/16 of at
 * most 4, and a sum of 64 of them needs 13 significant bits: fp32 holds every partial sum exactly,
 * whatever the order. */
static float value(uint32_t i, uint32_t j, uint32_t salt)
{
    return (float)((int)((i * 7u + j * 3u + salt) % 17u) - 8) / 4.0f;
}

/* bf16 bits of an exact value (its upper half). */
static uint16_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

/* Run the product on dev, the outputs into got (M * N floats). */
static vkg_status run_product(vkg_device_t *dev, float *got)
{
    size_t na = (size_t)CHECK_M * CHECK_K, nb = (size_t)CHECK_N * CHECK_K;
    size_t no = (size_t)CHECK_M * CHECK_N;
    size_t bytes = (na + nb) * 2 + 8 + no * 4 + na * 4 + 1024;
    vkg_arena *arena = NULL;
    vkg_cmd *cmd = NULL;
    uint16_t *h = malloc((na + nb) * 2);
    VKG_CHECK(h, VKG_ERR_NOMEM, "no memory for the coopmat self-check");
    vkg_status st = VKG_OK;
    vkg_tensor a, b, out, scratch;
    VKG_TRY_GOTO(st, vkg_arena_create(dev, bytes, "coopmat check", &arena), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(arena, na * 2, &a), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(arena, nb * 2, &b), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(arena, no * 4, &out), fail);
    VKG_TRY_GOTO(st, vkg_arena_alloc(arena, na * 4, &scratch), fail);
    a.dtype = b.dtype = VKG_BF16;
    for (uint32_t m = 0; m < CHECK_M; m++)
        for (uint32_t k = 0; k < CHECK_K; k++)
            h[m * CHECK_K + k] = bf16_bits(value(m, k, 0));
    for (uint32_t n = 0; n < CHECK_N; n++)
        for (uint32_t k = 0; k < CHECK_K; k++)
            h[na + n * CHECK_K + k] = bf16_bits(value(n, k, 5));
    VKG_TRY_GOTO(st, vkg_tensor_write(dev, a, 0, h, na * 2), fail);
    VKG_TRY_GOTO(st, vkg_tensor_write(dev, b, 0, h + na, nb * 2), fail);
    VKG_TRY_GOTO(st, vkg_cmd_create(dev, &cmd), fail);
    VKG_TRY_GOTO(st, vkg_cmd_begin(cmd), fail);
    VKG_TRY_GOTO(st, vkg_op_matmul_fwd(cmd, out, a, b, NULL, CHECK_M, CHECK_K, CHECK_N, scratch),
                 fail);
    VKG_TRY_GOTO(st, vkg_cmd_end(cmd), fail);
    VKG_TRY_GOTO(st, vkg_cmd_run(cmd, 0), fail);
    st = vkg_tensor_read(dev, out, 0, got, no * 4);
fail:
    vkg_cmd_destroy(&cmd);
    vkg_arena_destroy(&arena);
    free(h);
    return st;
}

vkg_status vkg_op_coopmat_selfcheck(vkg_device_t *dev, float corrupt, char *why, size_t cap)
{
    if (cap)
        why[0] = '\0';
    vkg_device_tuning tu = vkg_device_tuning_get(dev);
    if (!tu.coopmat)
        return VKG_OK;
    float *got = malloc((size_t)CHECK_M * CHECK_N * sizeof *got);
    VKG_CHECK(got, VKG_ERR_NOMEM, "no memory for the coopmat self-check");
    vkg_status st = run_product(dev, got);
    for (uint32_t m = 0; m < CHECK_M && st == VKG_OK; m++)
        for (uint32_t n = 0; n < CHECK_N; n++) {
            float want = m == 0 && n == 0 ? corrupt : 0.0f;
            for (uint32_t k = 0; k < CHECK_K; k++)
                want += value(m, k, 0) * value(n, k, 5);
            if (memcmp(&want, &got[m * CHECK_N + n], 4)) {
                snprintf(why, cap,
                         "the cooperative-matrix self-check gave %.9g at row %u, column %u of a "
                         "%ux%ux%u product, where the exact sum is %.9g",
                         (double)got[m * CHECK_N + n], m, n, CHECK_M, CHECK_N, CHECK_K,
                         (double)want);
                tu.coopmat = 0;
                st = vkg_device_tuning_set(dev, &tu);
                m = CHECK_M;
                break;
            }
        }
    free(got);
    return st;
}
