#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// gelu_bwd: dinp += gelu'(x) * dout with the tanh approximation's derivative
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2),
// written with s = sigmoid(2u) = 0.5 (1 + tanh u), so 1 - tanh^2 u = 4 s (1 - s):
//   gelu'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// IN_BF16 = 1 (mixed precision): inp is bf16 (common.glsl), widened; the arithmetic and dinp
// stay fp32. (Constant 3 would say dinp is bf16: gradients never are.)
layout(constant_id = 4) const uint IN_BF16 = 0;

layout(push_constant) uniform Push {
    Floats dinp; // accumulated
    Floats inp;
    Floats dout;
    uint n;
} p;

const float GELU_K = 0.7978845608028654; // sqrt(2 / pi)
const float GELU_A = 0.044715;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x()) {
        float x = IN_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), i) : p.inp.v[i];
        float u = clamp(GELU_K * (x + GELU_A * x * x * x), -40.0, 40.0);
        float s = 1.0 / (1.0 + exp(-2.0 * u));
        float local = s + 2.0 * x * s * (1.0 - s) * GELU_K * (1.0 + 3.0 * GELU_A * x * x);
        p.dinp.v[i] += local * p.dout.v[i];
    }
}
