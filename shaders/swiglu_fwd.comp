#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// swiglu_fwd: h (N, 2F) holds per row the gate and up halves of the fused product
// (gate = h[n, 0..F), up = h[n, F..2F)); out (N, F) = silu(gate) * up with
// silu(g) = g / (1 + exp(-g)) (for g -> -inf, exp overflows to inf and silu is -0: no NaN).
// One invocation per element of out (grid-stride over N * F).
// OUT_BF16 = 1 (mixed precision): out is bf16 (common.glsl), each invocation writing whole words
// (two consecutive elements of out, which may lie in two rows), rounded to nearest even, the half
// after an odd N * F's last element 0.
layout(constant_id = 3) const uint OUT_BF16 = 0;
// H_BF16 = 1: h is bf16 (the product stored bf16), widened.
layout(constant_id = 4) const uint H_BF16 = 0;
#define H_AT(i) (H_BF16 == 1 ? bf16_load(Uints(uvec2(p.h)), i) : p.h.v[i])

layout(push_constant) uniform Push {
    Floats out_; // (N, F)
    Floats h;    // (N, 2F)
    uint N, F;
} p;

// Element i of out.
float swiglu_at(uint i)
{
    uint row = i / p.F, f = i - row * p.F, at = 2 * row * p.F + f;
    float g = H_AT(at);
    return g / (1.0 + exp(-g)) * H_AT(at + p.F);
}

void main()
{
    uint n = p.N * p.F;
    if (OUT_BF16 == 1) {
        for (uint w = gl_GlobalInvocationID.x; w < (n + 1) / 2; w += grid_stride_x()) {
            uint i = 2 * w;
            float hi = i + 1 < n ? swiglu_at(i + 1) : 0.0;
            Uints(uvec2(p.out_)).v[w] = bf16_pack2(swiglu_at(i), hi);
        }
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < n; i += grid_stride_x())
        p.out_.v[i] = swiglu_at(i);
}
