/* bf16 gradients for the exchange between ranks (see grad_bf16.h): the rounding and the widening.
 * The rounding is the model files' (vkg_f32_to_bf16), bit for bit (tests/test_grad_bf16.c checks
 * both against a reference). */
#include "parallel/grad_bf16.h"

#include <string.h>

/* vkg_f32_to_bf16's rounding written without a branch or a call, so that the compiler
 * vectorises the loop over a whole gradient (tens of millions of elements each step). */
void vkg_grad_bf16_narrow(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        uint32_t nearest = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* ties to even */
        uint32_t quiet_nan = (u >> 16) | 0x40u;
        dst[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : nearest);
    }
}

void vkg_grad_bf16_widen(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

const char *vkg_grad_dtype_name(vkg_comm_dtype dt)
{
    return dt == VKG_COMM_F32 ? "fp32" : dt == VKG_COMM_BF16 ? "bf16" : NULL;
}
