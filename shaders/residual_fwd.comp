#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// residual_fwd: out[i] = a[i] + b[i] (out may alias a or b).
// B_BF16 = 1 (mixed precision): b is bf16 (common.glsl), widened; the sum and out stay fp32.
// (Constants 3 and 4 would say out and a are bf16: they never are.)
layout(constant_id = 5) const uint B_BF16 = 0;
layout(push_constant) uniform Push {
    Floats out_;
    Floats a;
    Floats b;
    uint n;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.out_.v[i] = p.a.v[i] + (B_BF16 == 1 ? bf16_load(Uints(uvec2(p.b)), i) : p.b.v[i]);
}
