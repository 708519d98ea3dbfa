/* DiLoCo's outer optimizer (see outer.h): the exchange of the pseudo-gradient in fp32, bf16 or
 * int8 over the transport's collectives and the Nesterov step, on host memory. The parameters
 * reach the host once per round (H inner steps), so the step's n multiply-adds and the exchange's
 * packing cost little against the round's compute; the exchange runs on host buffers anyway.
 * Nothing here prints. */
#include "parallel/outer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "parallel/grad_bf16.h"

struct vkg_outer {
    size_t n;
    float lr, mu;
    vkg_outer_dtype dt;
    float *g, *m; /* (n) the global parameters, the outer momentum */
};

const char *vkg_outer_dtype_name(vkg_outer_dtype dt)
{
    return dt == VKG_OUTER_F32    ? "fp32"
           : dt == VKG_OUTER_BF16 ? "bf16"
           : dt == VKG_OUTER_INT8 ? "int8"
           : dt == VKG_OUTER_INT4 ? "int4"
                                  : NULL;
}

vkg_status vkg_outer_create(size_t n, float lr, float momentum, vkg_outer_dtype dt, vkg_outer **out)
{
    VKG_CHECK(isfinite(lr) && lr > 0.0f, VKG_ERR_INVALID_ARG,
              "--outer-lr must be finite and > 0, got %g", (double)lr);
    VKG_CHECK(momentum >= 0.0f && momentum < 1.0f, VKG_ERR_INVALID_ARG,
              "--outer-momentum must be in [0, 1), got %g", (double)momentum);
    VKG_CHECK(vkg_outer_dtype_name(dt), VKG_ERR_INVALID_ARG,
              "--outer-dtype: dtype %d is none of fp32, bf16, int8, int4", (int)dt);
    vkg_outer *o = calloc(1, sizeof *o);
    VKG_CHECK(o, VKG_ERR_NOMEM, "no memory for the outer optimizer");
    o->n = n, o->lr = lr, o->mu = momentum, o->dt = dt;
    size_t k = n ? n : 1;
    o->g = calloc(k, sizeof *o->g), o->m = calloc(k, sizeof *o->m);
    if (!o->g || !o->m) {
        vkg_outer_destroy(&o);
        return VKG_FAIL(VKG_ERR_NOMEM, "no memory for the outer optimizer of %zu parameters", n);
    }
    *out = o;
    return VKG_OK;
}

void vkg_outer_destroy(vkg_outer **po)
{
    vkg_outer *o = po ? *po : NULL;
    if (!o)
        return;
    free(o->g), free(o->m);
    free(o);
    *po = NULL;
}

float *vkg_outer_global(vkg_outer *o)
{
    return o->g;
}

float *vkg_outer_momentum(vkg_outer *o)
{
    return o->m;
}

size_t vkg_outer_count(const vkg_outer *o)
{
    return o->n;
}

size_t vkg_outer_int8_chunks(size_t n)
{
    return (n + VKG_OUTER_INT8_CHUNK - 1) / VKG_OUTER_INT8_CHUNK;
}

uint64_t vkg_outer_payload_bytes(size_t n, vkg_outer_dtype dt)
{
    switch (dt) {
    case VKG_OUTER_BF16:
        return 2 * (uint64_t)n;
    case VKG_OUTER_INT8:
        return (uint64_t)n + 4 * (uint64_t)vkg_outer_int8_chunks(n);
    case VKG_OUTER_INT4:
        return ((uint64_t)n + 1) / 2 + 4 * (uint64_t)vkg_outer_int8_chunks(n);
    default:
        return 4 * (uint64_t)n;
    }
}

/* Per chunk: scale = absmax / qmax, q = nearest(x / scale) in [-qmax, qmax]. */
static void quantize(const float *x, size_t n, float qmax, int8_t *q, float *scale)
{
    for (size_t c = 0, a = 0; a < n; c++, a += VKG_OUTER_INT8_CHUNK) {
        size_t b = n - a < VKG_OUTER_INT8_CHUNK ? n : a + VKG_OUTER_INT8_CHUNK;
        float amax = 0.0f;
        for (size_t i = a; i < b; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        float s = amax / qmax;
        scale[c] = s;
        for (size_t i = a; i < b; i++) {
            float r = s > 0.0f ? nearbyintf(x[i] / s) : 0.0f;
            r = r > qmax ? qmax : r < -qmax ? -qmax : r;
            q[i] = (int8_t)(int)r;
        }
    }
}

void vkg_outer_int8_quantize(const float *x, size_t n, int8_t *q, float *scale)
{
    quantize(x, n, 127.0f, q, scale);
}

/* The exchange's codec (vkg_comm_codec): the global parameters where the exchanged range starts
 * and the dtype. */
typedef struct codec_ctx {
    const float *g;
    vkg_outer_dtype dt;
} codec_ctx;

static size_t codec_bytes(size_t n, void *ctx)
{
    return (size_t)vkg_outer_payload_bytes(n, ((const codec_ctx *)ctx)->dt);
}

/* This rank's pseudo-gradient g - params over n elements packed into the block (bf16 values, or
 * int8 scales then codes), a chunk at a time. */
static void pack(const float *params, size_t n, void *out, void *ctx)
{
    const codec_ctx *o = ctx;
    unsigned char *block = out;
    size_t chunks = vkg_outer_int8_chunks(n);
    const float *g = o->g;
    float d[VKG_OUTER_INT8_CHUNK];
    for (size_t c = 0, a = 0; a < n; c++, a += VKG_OUTER_INT8_CHUNK) {
        size_t len = n - a < VKG_OUTER_INT8_CHUNK ? n - a : VKG_OUTER_INT8_CHUNK;
        for (size_t k = 0; k < len; k++)
            d[k] = g[a + k] - params[a + k];
        if (o->dt == VKG_OUTER_BF16) {
            vkg_grad_bf16_narrow(d, (uint16_t *)(void *)block + a, len);
        } else if (o->dt == VKG_OUTER_INT8) {
            vkg_outer_int8_quantize(d, len, (int8_t *)(block + 4 * chunks) + a,
                                    (float *)(void *)block + c);
        } else { /* int4: a chunk starts at an even element, so its codes at a whole byte */
            int8_t q[VKG_OUTER_INT8_CHUNK];
            unsigned char *codes = block + 4 * chunks + a / 2;
            quantize(d, len, 7.0f, q, (float *)(void *)block + c);
            for (size_t k = 0; k < len; k++)
                codes[k / 2] = k % 2 ? (unsigned char)(codes[k / 2] | (q[k] & 0xF) << 4)
                                     : (unsigned char)(q[k] & 0xF);
        }
    }
}

/* sum[i] (+)= a rank's dequantized pseudo-gradient of n elements from its block (first: =). */
static void unpack_add(const void *in, size_t n, int first, float *sum, void *ctx)
{
    const codec_ctx *o = ctx;
    const unsigned char *block = in;
    if (o->dt == VKG_OUTER_BF16) {
        const uint16_t *h = (const uint16_t *)(const void *)block;
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            float y;
            memcpy(&y, &u, sizeof y);
            sum[i] = first ? y : sum[i] + y;
        }
        return;
    }
    const float *scale = (const float *)(const void *)block;
    const unsigned char *codes = block + 4 * vkg_outer_int8_chunks(n);
    int int4 = o->dt == VKG_OUTER_INT4;
    for (size_t i = 0; i < n; i++) {
        int q = int4 ? (codes[i / 2] >> (4 * (i % 2))) & 0xF : ((const int8_t *)codes)[i];
        q = int4 && q > 7 ? q - 16 : q; /* the nibble's sign */
        float y = (float)q * scale[i / VKG_OUTER_INT8_CHUNK];
        sum[i] = first ? y : sum[i] + y;
    }
}

vkg_status vkg_outer_exchange(vkg_outer *o, vkg_group_t *g, float *params, size_t first,
                              size_t count)
{
    VKG_CHECK(first <= o->n && count <= o->n - first, VKG_ERR_INVALID_ARG,
              "outer exchange of [%zu, +%zu) outside its %zu parameters", first, count, o->n);
    if (!count || !g)
        return VKG_OK;
    float *at = params + first;
    if (o->dt == VKG_OUTER_F32)
        return vkg_group_allreduce(g, at, count, VKG_COMM_F32);
    codec_ctx ctx = {.g = o->g + first, .dt = o->dt};
    vkg_comm_codec codec = {
        .bytes = codec_bytes, .pack = pack, .unpack_add = unpack_add, .ctx = &ctx};
    return vkg_group_allreduce_codec(g, at, count, &codec);
}

vkg_status vkg_outer_step(vkg_outer *o, vkg_group_t *g, float *params, uint64_t *payload)
{
    VKG_TRY(vkg_outer_exchange(o, g, params, 0, o->n));
    vkg_outer_update(o, g ? vkg_group_size(g) : 1, params);
    if (payload)
        *payload = vkg_outer_payload_bytes(o->n, o->dt);
    return VKG_OK;
}

void vkg_outer_update(vkg_outer *o, int N, float *params)
{
    float fN = (float)N, a = 1.0f - o->lr, b = o->lr * o->mu;
    int f32 = o->dt == VKG_OUTER_F32;
    for (size_t i = 0; i < o->n; i++) {
        /* fp32: params holds the replicas' sum; else the pseudo-gradients' */
        float mean = f32 ? params[i] / fN : 0.0f;
        float d = f32 ? o->g[i] - mean : params[i] / fN;
        mean = f32 ? mean : o->g[i] - d;
        float m = o->mu * o->m[i] + d;
        float u = a * d - b * m;
        o->m[i] = m;
        o->g[i] = u == 0.0f ? mean : mean + u;
        params[i] = o->g[i];
    }
}
