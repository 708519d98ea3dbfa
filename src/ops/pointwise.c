/* Pointwise ops of the transformer block: GELU (tanh approximation), squared ReLU and the
 * residual add, forward and backward. Mixed precision: gelu_fwd's and relu2_fwd's out and inp,
 * gelu_bwd's and relu2_bwd's inp and every tensor of residual_fwd may be bf16 (stored activations,
 * the residual stream among them), read widened, computed in fp32, rounded once when stored. One
 * invocation per element, grid-stride over n. Forward passes overwrite, backward passes accumulate.
 * Above the shader index limit the tensors are cut into chunks, one dispatch each with every base
 * address advanced alike (no element depends on another, so the results are the same). */
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
VKG_PUSH_CHECK(push3, relu2_bwd);

typedef struct push2 {
    uint64_t x, y;
    uint32_t n;
    uint32_t pad_;
} push2;
VKG_PUSH_CHECK(push2, gelu_fwd);
VKG_PUSH_CHECK(push2, relu2_fwd);

/* Record the op over n elements: one dispatch when n is within the limit, else one per chunk, with
 * every address in addr[0..nt) advanced by the chunk's offset and *count set to its length
 * (addr and count point into the push constants). bf16: bit i set when addr[i] is a bf16 tensor,
 * given to the kernel as its spec constant 3 + i (chunks then stay whole words); an op with no
 * bf16 tensor names no such constant (its pipeline is the one of before bf16). */
static vkg_status dispatch(vkg_cmd *c, vkg_kernel_id k, const char *op, size_t limit,
                           const void *push, size_t bytes, uint64_t *const *addr, int nt,
                           uint32_t *count, size_t n, uint32_t bf16)
{
    uint64_t base[3];
    uint32_t spec[6] = {POINTWISE_WG, 1, 1, 0, 0, 0};
    int nspec = 3;
    for (int i = 0; i < nt; i++) {
        base[i] = *addr[i];
        spec[3 + i] = bf16 >> i & 1u;
        nspec = bf16 >> i ? 4 + i : nspec;
    }
    size_t chunk = n <= limit ? n : vkg__op_flat_chunk(limit) & (bf16 ? ~(size_t)1 : ~(size_t)0);
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        for (int i = 0; i < nt; i++)
            *addr[i] = base[i] + (bf16 >> i & 1u ? 2 : 4) * off;
        *count = (uint32_t)m;
        VKG_TRY(vkg_cmd_dispatch(c, k, spec, nspec, push, bytes,
                                 vkg__op_groups_capped(m, POINTWISE_WG), 1, 1, op));
    }
    return VKG_OK;
}

static vkg_status dispatch2(vkg_cmd *c, vkg_kernel_id k, const char *op, size_t limit, push2 *p,
                            size_t n, uint32_t bf16)
{
    uint64_t *const addr[2] = {&p->x, &p->y};
    return dispatch(c, k, op, limit, p, sizeof *p, addr, 2, &p->n, n, bf16);
}

static vkg_status dispatch3(vkg_cmd *c, vkg_kernel_id k, const char *op, size_t limit, push3 *p,
                            size_t n, uint32_t bf16)
{
    uint64_t *const addr[3] = {&p->x, &p->y, &p->z};
    return dispatch(c, k, op, limit, p, sizeof *p, addr, 3, &p->n, n, bf16);
}

/* Bit i of the pointwise bf16 mask when tensor t is bf16. */
static uint32_t bf16_bit(vkg_tensor t, int i)
{
    return t.dtype == VKG_BF16 ? 1u << i : 0u;
}

vkg_status vkg_op_gelu_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, size_t n)
{
    const char *op = "gelu_fwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need_any(op, "out", out, n));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, n));
    push2 p = {.x = out.addr, .y = inp.addr};
    return dispatch2(c, VKG_KERNEL_gelu_fwd, op, limit, &p, n, bf16_bit(out, 0) | bf16_bit(inp, 1));
}

vkg_status vkg_op_gelu_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor inp, vkg_tensor dout, size_t n)
{
    const char *op = "gelu_bwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need(op, "dinp", dinp, n));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, n));
    VKG_TRY(vkg__op_need(op, "dout", dout, n));
    push3 p = {.x = dinp.addr, .y = inp.addr, .z = dout.addr};
    return dispatch3(c, VKG_KERNEL_gelu_bwd, op, limit, &p, n, bf16_bit(inp, 1));
}

vkg_status vkg_op_relu2_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, size_t n)
{
    const char *op = "relu2_fwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need_any(op, "out", out, n));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, n));
    push2 p = {.x = out.addr, .y = inp.addr};
    return dispatch2(c, VKG_KERNEL_relu2_fwd, op, limit, &p, n,
                     bf16_bit(out, 0) | bf16_bit(inp, 1));
}

vkg_status vkg_op_relu2_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor inp, vkg_tensor dout, size_t n)
{
    const char *op = "relu2_bwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need(op, "dinp", dinp, n));
    VKG_TRY(vkg__op_need_any(op, "inp", inp, n));
    VKG_TRY(vkg__op_need(op, "dout", dout, n));
    push3 p = {.x = dinp.addr, .y = inp.addr, .z = dout.addr};
    return dispatch3(c, VKG_KERNEL_relu2_bwd, op, limit, &p, n, bf16_bit(inp, 1));
}

vkg_status vkg_op_residual_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor a, vkg_tensor b, size_t n)
{
    const char *op = "residual_fwd";
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_need_any(op, "out", out, n));
    VKG_TRY(vkg__op_need_any(op, "a", a, n));
    VKG_TRY(vkg__op_need_any(op, "b", b, n));
    push3 p = {.x = out.addr, .y = a.addr, .z = b.addr};
    return dispatch3(c, VKG_KERNEL_residual_fwd, op, limit, &p, n,
                     bf16_bit(out, 0) | bf16_bit(a, 1) | bf16_bit(b, 2));
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
    return dispatch3(c, VKG_KERNEL_residual_bwd, op, limit, &p, n, 0);
}
