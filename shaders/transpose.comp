#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// transpose: out (cols, rows) = in (rows, cols)^T. One element per invocation; x runs over the
// output's contiguous dimension so the writes are coalesced.
// WIDE = 1 (more elements than one dispatch may index): the addresses of the row of in and of out
// are formed with 64-bit arithmetic (addr64.glsl) and indexed within the row.
layout(constant_id = 3) const uint WIDE = 0;
// IN_BF16 = 1 (mixed precision): in is bf16 (common.glsl), widened into the fp32 out. Not with
// WIDE = 1.
layout(constant_id = 4) const uint IN_BF16 = 0;

layout(push_constant) uniform Push {
    Floats out_;
    Floats in_;
    uint rows, cols;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x; // output column = input row
    uint c = gl_GlobalInvocationID.y; // output row = input column
    if (r >= p.rows || c >= p.cols)
        return;
    if (WIDE == 1)
        Floats(a64_row(uvec2(p.out_), c, p.rows)).v[r] =
            Floats(a64_row(uvec2(p.in_), r, p.cols)).v[c];
    else
        p.out_.v[c * p.rows + r] = IN_BF16 == 1 ? bf16_load(Uints(uvec2(p.in_)), r * p.cols + c)
                                                : p.in_.v[r * p.cols + c];
}
