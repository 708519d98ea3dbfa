/* The CPU reference of bf16 storage (shaders/common.glsl's bf16_round and bf16_widen), bit for
 * bit: what the mixed-precision tests round their references with. */
#include <string.h>

#include "ref/ref.h"

uint16_t vkg_ref_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it, quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float vkg_ref_bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

void vkg_ref_bf16_round(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = vkg_ref_bf16_widen(vkg_ref_bf16_bits(x[i]));
}
