/* Elementwise ops on flat tensors: fill, scale and the cast to bf16. Above the shader index limit
 * the tensor is cut into chunks, one dispatch each with its base address advanced (the chunks are
 * disjoint; no element depends on another, so the results are the same). */
#include "ops/op_util.h"
#include "ops/ops.h"

#define ELEMENTWISE_WG 256u

typedef struct push_x_n_f {
    uint64_t x;
    uint32_t n;
    float value;
} push_x_n_f;
VKG_PUSH_CHECK(push_x_n_f, fill);
VKG_PUSH_CHECK(push_x_n_f, scale);

static vkg_status flat_op(vkg_cmd *c, vkg_kernel_id k, const char *op, vkg_tensor x, size_t n,
                          float value)
{
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need(op, "x", x, n));
    size_t chunk = n <= limit ? n : vkg__op_flat_chunk(limit);
    uint32_t spec[3] = {ELEMENTWISE_WG, 1, 1};
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        push_x_n_f p = {.x = x.addr + 4 * off, .n = (uint32_t)m, .value = value};
        VKG_TRY(vkg_cmd_dispatch(c, k, spec, 3, &p, sizeof p,
                                 vkg__op_groups_capped(m, ELEMENTWISE_WG), 1, 1, op));
    }
    return VKG_OK;
}

vkg_status vkg_op_fill(vkg_cmd *c, vkg_tensor x, size_t n, float value)
{
    return flat_op(c, VKG_KERNEL_fill, "fill", x, n, value);
}

vkg_status vkg_op_scale(vkg_cmd *c, vkg_tensor x, size_t n, float factor)
{
    return flat_op(c, VKG_KERNEL_scale, "scale", x, n, factor);
}

typedef struct push_cast {
    uint64_t out, in;
    uint32_t n;
} push_cast;
VKG_PUSH_CHECK(push_cast, cast_bf16);

vkg_status vkg_op_cast_bf16(vkg_cmd *c, vkg_tensor out, vkg_tensor in, size_t n)
{
    const char *op = "cast_bf16";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_CHECK(out.dtype == VKG_BF16, VKG_ERR_INVALID_ARG, "%s: out must be a bf16 tensor", op);
    VKG_TRY(vkg__op_need_any(op, "out", out, n));
    VKG_TRY(vkg__op_need(op, "in", in, n));
    /* Chunks of an even number of elements, so that each starts on a whole word of out. */
    size_t chunk = n <= limit ? n : vkg__op_flat_chunk(limit) & ~(size_t)1;
    uint32_t spec[3] = {ELEMENTWISE_WG, 1, 1};
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        push_cast p = {.out = out.addr + 2 * off, .in = in.addr + 4 * off, .n = (uint32_t)m};
        VKG_TRY(vkg_cmd_dispatch(c, VKG_KERNEL_cast_bf16, spec, 3, &p, sizeof p,
                                 vkg__op_groups_capped((m + 1) / 2, ELEMENTWISE_WG), 1, 1, op));
    }
    return VKG_OK;
}
