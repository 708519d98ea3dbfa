/* Reduction kernels and 16-bit float conversions for the collectives. Plain C loops the compiler
 * vectorises; no threads, no allocation. Received payloads may sit at any byte offset inside a
 * zmq receive buffer, so every kernel that reads a payload accepts unaligned input and copies it
 * through an aligned block when needed. */
#include "comm_internal.h"

#include <stdint.h>
#include <string.h>

#define BLOCK 1024

float vkg__bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t vkg__f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float vkg__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = 113;
            while (!(man & 0x400u)) {
                man <<= 1;
                e--;
            }
            u = sign | ((uint32_t)e << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t vkg__f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (u > 0x7f800000u ? 0x200u : 0u));
    if (u >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (u >= 0x38800000u) { /* normal half */
        uint32_t v = u - (112u << 23);
        v += 0xfffu + ((v >> 13) & 1u);
        return (uint16_t)(sign | (v >> 13));
    }
    /* subnormal half (or zero): value = man * 2^(exp - 150), unit 2^-24 */
    uint32_t exp = u >> 23;
    if (exp < 102) /* below 2^-25: rounds to zero */
        return sign;
    uint32_t man = (u & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;
    uint32_t r = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

static float widen(uint16_t x, vkg_comm_dtype dt)
{
    return dt == VKG_COMM_BF16 ? vkg__bf16_to_f32(x) : vkg__f16_to_f32(x);
}

static uint16_t narrow(float x, vkg_comm_dtype dt)
{
    return dt == VKG_COMM_BF16 ? vkg__f32_to_bf16(x) : vkg__f32_to_f16(x);
}

static void add_aligned(float *dst, const float *a, const float *b, size_t n, int avg_n)
{
    if (avg_n > 0) {
        float d = (float)avg_n;
        for (size_t i = 0; i < n; i++)
            dst[i] = (a[i] + b[i]) / d;
    } else {
        for (size_t i = 0; i < n; i++)
            dst[i] = a[i] + b[i];
    }
}

void vkg__add_f32(float *dst, const float *a, const float *b, size_t n, int avg_n)
{
    if (((uintptr_t)a & 3u) == 0) {
        add_aligned(dst, a, b, n, avg_n);
        return;
    }
    float tmp[BLOCK];
    const unsigned char *pa = (const unsigned char *)a;
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        memcpy(tmp, pa + i0 * 4, m * 4);
        add_aligned(dst + i0, tmp, b + i0, m, avg_n);
    }
}

void vkg__acc_16(float *acc, const uint16_t *x, size_t n, vkg_comm_dtype dt)
{
    for (size_t i = 0; i < n; i++)
        acc[i] += widen(x[i], dt);
}

void vkg__widen_16(float *dst, const uint16_t *x, size_t n, vkg_comm_dtype dt)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = widen(x[i], dt);
}

/* Load m elements of src (any alignment) as floats. */
static void load_block(float *out, const void *src, size_t i0, size_t m, vkg_comm_dtype dt)
{
    if (dt == VKG_COMM_F32) {
        memcpy(out, (const unsigned char *)src + i0 * 4, m * 4);
        return;
    }
    uint16_t h[BLOCK];
    memcpy(h, (const unsigned char *)src + i0 * 2, m * 2);
    for (size_t i = 0; i < m; i++)
        out[i] = widen(h[i], dt);
}

void vkg__sum_16(float *dst, const void *a, const uint16_t *b, size_t n, vkg_comm_dtype dt)
{
    for (size_t i0 = 0; i0 < n; i0 += BLOCK)
        load_block(dst + i0, a, i0, n - i0 < BLOCK ? n - i0 : BLOCK, dt);
    vkg__acc_16(dst, b, n, dt);
}

void vkg__final_16(uint16_t *dst, const void *a, size_t a_es, const uint16_t *b, size_t n,
                   vkg_comm_dtype dt, int avg_n)
{
    float tmp[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        load_block(tmp, a, i0, m, a_es == 4 ? VKG_COMM_F32 : dt);
        for (size_t i = 0; i < m; i++) {
            float s = tmp[i] + widen(b[i0 + i], dt);
            if (avg_n > 0)
                s /= (float)avg_n;
            dst[i0 + i] = narrow(s, dt);
        }
    }
}

/* The fp32 case with every source aligned: no staging copies, one pass per source and block. */
static void reduce_f32_aligned(float *dst, const void *const *srcs, int nsrc, size_t n, int avg)
{
    float acc[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        const float *s0 = (const float *)srcs[0] + i0;
        for (size_t i = 0; i < m; i++)
            acc[i] = s0[i];
        for (int q = 1; q < nsrc; q++) {
            const float *sq = (const float *)srcs[q] + i0;
            for (size_t i = 0; i < m; i++)
                acc[i] += sq[i];
        }
        if (avg) {
            float d = (float)nsrc;
            for (size_t i = 0; i < m; i++)
                acc[i] /= d;
        }
        memcpy(dst + i0, acc, m * 4);
    }
}

void vkg__reduce_ordered(void *dst, const void *const *srcs, int nsrc, size_t n, vkg_comm_dtype dt,
                         int avg)
{
    int aligned = ((uintptr_t)dst & 3u) == 0;
    for (int q = 0; q < nsrc && aligned; q++)
        aligned = ((uintptr_t)srcs[q] & 3u) == 0;
    if (dt == VKG_COMM_F32 && aligned) {
        reduce_f32_aligned(dst, srcs, nsrc, n, avg);
        return;
    }
    float acc[BLOCK], tmp[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        load_block(acc, srcs[0], i0, m, dt);
        for (int q = 1; q < nsrc; q++) {
            load_block(tmp, srcs[q], i0, m, dt);
            for (size_t i = 0; i < m; i++)
                acc[i] += tmp[i];
        }
        if (avg) {
            float d = (float)nsrc;
            for (size_t i = 0; i < m; i++)
                acc[i] /= d;
        }
        if (dt == VKG_COMM_F32) {
            memcpy((unsigned char *)dst + i0 * 4, acc, m * 4);
        } else {
            uint16_t *o = (uint16_t *)dst + i0;
            for (size_t i = 0; i < m; i++)
                o[i] = narrow(acc[i], dt);
        }
    }
}
