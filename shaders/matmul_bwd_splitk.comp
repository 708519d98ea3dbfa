#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// matmul_bwd_splitk: the second half of a split-K product (matmul_tiled.comp with kchunk < K):
//   out[m * ldo + n] += part[0][m, n] + part[1][m, n] + ... + part[S - 1][m, n]
// where part[s] (M x N, rows of N floats) is chunk s's partial product, at part + s * M * N.
// Each element is summed by one invocation in chunk order, then added to what out holds: the
// same bits on every run, no atomics. One invocation per element, grid-stride over M * N.

layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer InFloats
{
    float v[];
};

layout(push_constant) uniform Push {
    Floats out_;
    InFloats part;
    uint M, N, ldo, S;
} p;

void main()
{
    const uint mn = p.M * p.N;
    for (uint i = gl_GlobalInvocationID.x; i < mn; i += grid_stride_x()) {
        float sum = p.part.v[i];
        for (uint s = 1; s < p.S; s++)
            sum += p.part.v[s * mn + i];
        uint m = i / p.N, n = i % p.N;
        p.out_.v[m * p.ldo + n] += sum;
    }
}
