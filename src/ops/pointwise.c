/* Pointwise ops of the transformer block: GELU (tanh approximation) and the residual add,
 * forward and backward. One invocation per element, grid-stride over n. Forward passes
 * overwrite, backward passes accumulate. */
#include "ops/op_util.h"
#include "ops/ops.h"

#define POINTWISE_WG 256u

typedef struct push3 {
    uint64_t x, y, z;
    uint32_t n;
    uint32_t pad_;
} push3;
VKG_PUSH_CHECK(push3, gelu_bwd);
VKG_PUSH_CHECK(push3, residual_fwd);
VKG_PUSH_CHECK(push3, residual_bwd);

typedef struct push2 {
    uint64_t x, y;
    uint32_t n;
    uint32_t pad_;
} push2;
VKG_PUSH_CHECK(push2, gelu_fwd);

static vkg_status check_n(const char *op, size_t n)
{
    VKG_CHECK(n <= 0xFFFFFFFFu - 65535u * POINTWISE_WG, VKG_ERR_INVALID_ARG,
              "%s: n = %zu is too large for 32-bit shader indices", op, n);
    return VKG_OK;
}

static vkg_status dispatch(vkg_cmd *c, vkg_kernel_id k, const char *op, const void *push,
                           size_t bytes, size_t n)
{
    if (n == 0)
        return VKG_OK;
    uint32_t spec[3] = {POINTWISE_WG, 1, 1};
    return vkg_cmd_dispatch(c, k, spec, 3, push, bytes, vkg__op_groups_capped(n, POINTWISE_WG), 1,
                            1, op);
}

vkg_status vkg_op_gelu_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, size_t n)
{
    const char *op = "gelu_fwd";
    VKG_TRY(check_n(op, n));
    VKG_TRY(vkg__op_need(op, "out", out, n));
    VKG_TRY(vkg__op_need(op, "inp", inp, n));
    push2 p = {.x = out.addr, .y = inp.addr, .n = (uint32_t)n};
    return dispatch(c, VKG_KERNEL_gelu_fwd, op, &p, sizeof p, n);
}

vkg_status vkg_op_gelu_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor inp, vkg_tensor dout, size_t n)
{
    const char *op = "gelu_bwd";
    VKG_TRY(check_n(op, n));
    VKG_TRY(vkg__op_need(op, "dinp", dinp, n));
    VKG_TRY(vkg__op_need(op, "inp", inp, n));
    VKG_TRY(vkg__op_need(op, "dout", dout, n));
    push3 p = {.x = dinp.addr, .y = inp.addr, .z = dout.addr, .n = (uint32_t)n};
    return dispatch(c, VKG_KERNEL_gelu_bwd, op, &p, sizeof p, n);
}

vkg_status vkg_op_residual_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor a, vkg_tensor b, size_t n)
{
    const char *op = "residual_fwd";
    VKG_TRY(check_n(op, n));
    VKG_TRY(vkg__op_need(op, "out", out, n));
    VKG_TRY(vkg__op_need(op, "a", a, n));
    VKG_TRY(vkg__op_need(op, "b", b, n));
    push3 p = {.x = out.addr, .y = a.addr, .z = b.addr, .n = (uint32_t)n};
    return dispatch(c, VKG_KERNEL_residual_fwd, op, &p, sizeof p, n);
}

vkg_status vkg_op_residual_bwd(vkg_cmd *c, vkg_tensor da, vkg_tensor db, vkg_tensor dout, size_t n)
{
    const char *op = "residual_bwd";
    VKG_TRY(check_n(op, n));
    VKG_TRY(vkg__op_need(op, "da", da, n));
    VKG_TRY(vkg__op_need(op, "db", db, n));
    VKG_TRY(vkg__op_need(op, "dout", dout, n));
    push3 p = {.x = da.addr, .y = db.addr, .z = dout.addr, .n = (uint32_t)n};
    return dispatch(c, VKG_KERNEL_residual_bwd, op, &p, sizeof p, n);
}
