#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// gelu_fwd, tanh approximation: out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x * sigmoid(2u) = x / (1 + exp(-2u)), which is the same function and stays accurate
// for large |x| (u is clamped to +-40, where the sigmoid is 0 or 1 in float).
layout(push_constant) uniform Push {
    Floats out_;
    Floats inp;
    uint n;
} p;

const float GELU_K = 0.7978845608028654; // sqrt(2 / pi)
const float GELU_A = 0.044715;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x()) {
        float x = p.inp.v[i];
        float u = clamp(GELU_K * (x + GELU_A * x * x * x), -40.0, 40.0);
        p.out_.v[i] = x / (1.0 + exp(-2.0 * u));
    }
}
