/* Elementwise ops on flat tensors: fill and scale. Above the shader index limit the tensor is cut
 * into chunks, one dispatch each with its base address advanced (the chunks are disjoint; no
 * element depends on another, so the results are the same). */
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
