#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// relu2_bwd: dinp[i] += 2 max(inp[i], 0) dout[i] (the derivative of max(x, 0)^2).
// IN_BF16 = 1 (mixed precision): inp is bf16 (common.glsl), widened; the arithmetic and dinp
// stay fp32. (Constant 3 would say dinp is bf16: gradients never are.)
layout(constant_id = 4) const uint IN_BF16 = 0;

layout(push_constant) uniform Push {
    Floats dinp; // accumulated
    Floats inp;
    Floats dout;
    uint n;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x()) {
        float x = IN_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), i) : p.inp.v[i];
        p.dinp.v[i] += 2.0 * max(x, 0.0) * p.dout.v[i];
    }
}
