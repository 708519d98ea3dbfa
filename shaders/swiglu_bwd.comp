#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// swiglu_bwd: for out = silu(gate) * up (swiglu_fwd.comp's layout, h (N, 2F) = [gate | up] per
// row), with s = sigmoid(gate) = 1 / (1 + exp(-gate)):
//   dh[n, f]     += dout[n, f] * up * s * (1 + gate * (1 - s))   (silu'(gate) * up)
//   dh[n, F + f] += dout[n, f] * gate * s                         (silu(gate))
// One invocation per element of dout (grid-stride over N * F), the only writer of its two
// elements of dh.
// H_BF16 = 1 (mixed precision): h is bf16, widened; the arithmetic and dh stay fp32. (Constant
// 3 would say dh is bf16: gradients never are.)
layout(constant_id = 4) const uint H_BF16 = 0;
#define H_AT(i) (H_BF16 == 1 ? bf16_load(Uints(uvec2(p.h)), i) : p.h.v[i])

layout(push_constant) uniform Push {
    Floats dh;   // (N, 2F), accumulated
    Floats h;    // (N, 2F)
    Floats dout; // (N, F)
    uint N, F;
} p;

void main()
{
    uint n = p.N * p.F;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += grid_stride_x()) {
        uint row = i / p.F, f = i - row * p.F, at = 2 * row * p.F + f;
        float g = H_AT(at), u = H_AT(at + p.F), d = p.dout.v[i];
        float s = 1.0 / (1.0 + exp(-g));
        p.dh.v[at] += d * u * s * (1.0 + g * (1.0 - s));
        p.dh.v[at + p.F] += d * g * s;
    }
}
