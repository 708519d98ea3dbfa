/* Pointwise ops of the transformer block: GELU (tanh approximation) and the residual add,
 * forward and backward. One invocation per element, grid-stride over n. Forward passes
 * overwrite, backward passes accumulate. Above the shader index limit the tensors are cut into
 * chunks, one dispatch each with every base address advanced alike (no element depends on
 * another, so the results are the same). */
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

/* Record the op over n elements: one dispatch when n is within the limit, else one per chunk, with
 * every address in addr[0..nt) advanced by the chunk's offset and *count set to its length
 * (addr and count point into the push constants). out_bf16: addr[0] is a bf16 output (the
 * kernel's spec constant 3; chunks stay whole words). */
static vkg_status dispatch(vkg_cmd *c, vkg_kernel_id k, const char *op, size_t limit,
                           const void *push, size_t bytes, uint64_t *const *addr, int nt,
                           uint32_t *count, size_t n, uint32_t out_bf16)
{
    uint64_t base[3];
    for (int i = 0; i < nt; i++)
        base[i] = *addr[i];
    size_t chunk = n <= limit ? n : vkg__op_flat_chunk(limit) & ~(size_t)out_bf16;
    uint32_t spec[4] = {POINTWISE_WG, 1, 1, out_bf16};
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        for (int i = 0; i < nt; i++)
            *addr[i] = base[i] + (i == 0 && out_bf16 ? 2 : 4) * off;
        *count = (uint32_t)m;
        VKG_TRY(vkg_cmd_dispatch(c, k, spec, out_bf16 ? 4 : 3, push, bytes,
                                 vkg__op_groups_capped(m, POINTWISE_WG), 1, 1, op));
    }
    return VKG_OK;
}

static vkg_status dispatch2(vkg_cmd *c, vkg_kernel_id k, const char *op, size_t limit, push2 *p,
                            size_t n, uint32_t out_bf16)
{
    uint64_t *const addr[2] = {&p->x, &p->y};
    return dispatch(c, k, op, limit, p, sizeof *p, addr, 2, &p->n, n, out_bf16);
}

static vkg_status dispatch3(vkg_cmd *c, vkg_kernel_id k, const char *op, size_t limit, push3 *p,
                            size_t n)
{
    uint64_t *const addr[3] = {&p->x, &p->y, &p->z};
    return dispatch(c, k, op, limit, p, sizeof *p, addr, 3, &p->n, n, 0);
}

vkg_status vkg_op_gelu_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, size_t n)
{
    const char *op = "gelu_fwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need_any(op, "out", out, n));
    VKG_TRY(vkg__op_need(op, "inp", inp, n));
    push2 p = {.x = out.addr, .y = inp.addr};
    return dispatch2(c, VKG_KERNEL_gelu_fwd, op, limit, &p, n, out.dtype == VKG_BF16);
}

vkg_status vkg_op_gelu_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor inp, vkg_tensor dout, size_t n)
{
    const char *op = "gelu_bwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need(op, "dinp", dinp, n));
    VKG_TRY(vkg__op_need(op, "inp", inp, n));
    VKG_TRY(vkg__op_need(op, "dout", dout, n));
    push3 p = {.x = dinp.addr, .y = inp.addr, .z = dout.addr};
    return dispatch3(c, VKG_KERNEL_gelu_bwd, op, limit, &p, n);
}

vkg_status vkg_op_residual_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor a, vkg_tensor b, size_t n)
{
    const char *op = "residual_fwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need(op, "out", out, n));
    VKG_TRY(vkg__op_need(op, "a", a, n));
    VKG_TRY(vkg__op_need(op, "b", b, n));
    push3 p = {.x = out.addr, .y = a.addr, .z = b.addr};
    return dispatch3(c, VKG_KERNEL_residual_fwd, op, limit, &p, n);
}

vkg_status vkg_op_residual_bwd(vkg_cmd *c, vkg_tensor da, vkg_tensor db, vkg_tensor dout, size_t n)
{
    const char *op = "residual_bwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need(op, "da", da, n));
    VKG_TRY(vkg__op_need(op, "db", db, n));
    VKG_TRY(vkg__op_need(op, "dout", dout, n));
    push3 p = {.x = da.addr, .y = db.addr, .z = dout.addr};
    return dispatch3(c, VKG_KERNEL_residual_bwd, op, limit, &p, n);
}
