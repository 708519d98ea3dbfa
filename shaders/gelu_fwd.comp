#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// gelu_fwd, tanh approximation: out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x * sigmoid(2u) = x / (1 + exp(-2u)), which is the same function and stays accurate
// for large |x| (u is clamped to +-40, where the sigmoid is 0 or 1 in float).
// OUT_BF16 = 1 (mixed precision): out is bf16 (common.glsl), each invocation writing whole words
// (two elements), rounded to nearest even; the GELU itself is computed in fp32 as above.
layout(constant_id = 3) const uint OUT_BF16 = 0;

layout(push_constant) uniform Push {
    Floats out_;
    Floats inp;
    uint n;
} p;

const float GELU_K = 0.7978845608028654; // sqrt(2 / pi)
const float GELU_A = 0.044715;

float gelu(float x)
{
    float u = clamp(GELU_K * (x + GELU_A * x * x * x), -40.0, 40.0);
    return x / (1.0 + exp(-2.0 * u));
}

void main()
{
    if (OUT_BF16 == 1) {
        for (uint w = gl_GlobalInvocationID.x; w < (p.n + 1) / 2; w += grid_stride_x()) {
            uint i = 2 * w;
            float hi = i + 1 < p.n ? gelu(p.inp.v[i + 1]) : 0.0;
            Uints(uvec2(p.out_)).v[w] = bf16_pack2(gelu(p.inp.v[i]), hi);
        }
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.out_.v[i] = gelu(p.inp.v[i]);
}
