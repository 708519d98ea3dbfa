#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// sumsq_final: stage 2 of the deterministic sum of squares, run as ONE workgroup. Invocation t adds
// partials t, t + W, t + 2W, ... (compensated), a shared-memory tree adds the W sums in a fixed
// order, and out[0] = (accumulate ? out[0] : 0) + total.
layout(push_constant) uniform Push {
    Floats partials; // (count)
    Floats out_;     // (1)
    uint count;
    uint accumulate;
} p;

shared float red[gl_WorkGroupSize.x];

void main()
{
    const uint W = gl_WorkGroupSize.x; // a power of two (checked by the C side)
    uint tid = gl_LocalInvocationID.x;
    precise float sum = 0.0, comp = 0.0;
    for (uint i = tid; i < p.count; i += W) {
        precise float yv = p.partials.v[i] - comp;
        precise float tv = sum + yv;
        comp = (tv - sum) - yv;
        sum = tv;
    }
    red[tid] = sum - comp;
    barrier();
    for (uint h = W / 2; h > 0; h >>= 1) {
        if (tid < h)
            red[tid] += red[tid + h];
        barrier();
    }
    if (tid == 0)
        p.out_.v[0] = p.accumulate != 0 ? p.out_.v[0] + red[0] : red[0];
}
