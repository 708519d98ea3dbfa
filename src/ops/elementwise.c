/* Elementwise ops on flat tensors: fill and scale. */
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
    VKG_TRY(vkg__op_fits_u32(op, "n", n));
    VKG_TRY(vkg__op_need(op, "x", x, n));
    if (n == 0)
        return VKG_OK;
    push_x_n_f p = {.x = x.addr, .n = (uint32_t)n, .value = value};
    uint32_t spec[3] = {ELEMENTWISE_WG, 1, 1};
    return vkg_cmd_dispatch(c, k, spec, 3, &p, sizeof p, vkg__op_groups_capped(n, ELEMENTWISE_WG),
                            1, 1, op);
}

vkg_status vkg_op_fill(vkg_cmd *c, vkg_tensor x, size_t n, float value)
{
    return flat_op(c, VKG_KERNEL_fill, "fill", x, n, value);
}

vkg_status vkg_op_scale(vkg_cmd *c, vkg_tensor x, size_t n, float factor)
{
    return flat_op(c, VKG_KERNEL_scale, "scale", x, n, factor);
}
