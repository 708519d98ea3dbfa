#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gelu.glsl"
// gelu_fwd: out[i] = gelu_tanh(inp[i]) (gelu.glsl). The matmul kernels can apply the same
// function in their epilogue (the MLP's fc product); this kernel serves the recomputation of the
// activation in the backward pass and every other use.
layout(push_constant) uniform Push {
    Floats out_;
    Floats inp;
    uint n;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.out_.v[i] = gelu_tanh(p.inp.v[i]);
}
