/* SipHash-2-4 with a 128-bit output: the keyed hash that proves, in the shared-memory handover
 * (shm.c), that both ends hold the job's 16-byte secret without sending it. Written from the
 * SipHash paper's description; no allocation, no state. */
#include "comm_internal.h"
#include "comm_testing.h"

#include <string.h>

static uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

void vkg__siphash128(const uint8_t key[16], const void *msg, size_t n, uint8_t out[16])
{
    const uint8_t *m = msg;
    uint64_t k0 = load64(key), k1 = load64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
    uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
    v1 ^= 0xee;
    size_t full = n & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t w = load64(m + i);
        v3 ^= w;
        SIPROUND;
        SIPROUND;
        v0 ^= w;
    }
    uint8_t last[8] = {0};
    memcpy(last, m + full, n - full);
    uint64_t b = load64(last) | (uint64_t)(n & 0xff) << 56;
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xee;
    for (int i = 0; i < 4; i++)
        SIPROUND;
    uint64_t h0 = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    for (int i = 0; i < 4; i++)
        SIPROUND;
    uint64_t h1 = v0 ^ v1 ^ v2 ^ v3;
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(h0 >> (8 * i));
        out[8 + i] = (uint8_t)(h1 >> (8 * i));
    }
}
