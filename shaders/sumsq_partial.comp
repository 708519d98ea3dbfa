#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// sumsq_partial: stage 1 of the deterministic sum of squares. Workgroup g owns the contiguous
// elements [g * chunk, min((g + 1) * chunk, n)) of x; its invocations stride through them by the
// workgroup size (neighbouring lanes read neighbouring elements), each with a compensated (Kahan)
// running sum, then a shared-memory tree adds the W sums in a fixed order and partials[g] gets
// the result. The C side picks chunk from n alone, never from the device or its workgroup size,
// so the same n always gives the same partials on every device.
// WIDE = 1 (n beyond what one dispatch may index): each invocation walks the addresses of its
// elements with 64-bit arithmetic (addr64.glsl) instead of indexing x; the same elements are
// added in the same order, so the partials are the same.
layout(constant_id = 3) const uint WIDE = 0;
layout(push_constant) uniform Push {
    Floats x;        // (n)
    Floats partials; // (number of workgroups)
    uint n;
    uint chunk; // elements per workgroup (a multiple of 64)
} p;

shared float red[gl_WorkGroupSize.x];

void main()
{
    const uint W = gl_WorkGroupSize.x; // a power of two (checked by the C side)
    uint tid = gl_LocalInvocationID.x;
    uint start = gl_WorkGroupID.x * p.chunk;
    uint end = min(start + p.chunk, p.n);
    precise float sum = 0.0, comp = 0.0;
    uvec2 at = a64_elem(uvec2(p.x), start + tid);
    const uvec2 step = a64_step(W);
    for (uint i = start + tid; i < end; i += W) {
        float xv;
        if (WIDE == 1) {
            xv = Floats(at).v[0];
            at = a64_add(at, step);
        } else {
            xv = p.x.v[i];
        }
        precise float yv = xv * xv - comp;
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
        p.partials.v[gl_WorkGroupID.x] = red[0];
}
