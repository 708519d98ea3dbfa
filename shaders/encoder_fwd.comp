#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// encoder_fwd: out[b, t, c] = wte[inp[b, t], c] + wpe[t, c]. Workgroups: y = positions
// (grid-stride), x = channels (grid-stride), so the token id is read once per position and
// neighbouring invocations touch neighbouring channels. A token id outside [0, V) writes NaN for
// its row, so bad input shows up in the loss instead of reading out of bounds.
layout(push_constant) uniform Push {
    Floats out_; // (B, T, C)
    Ints inp;    // (B, T)
    Floats wte;  // (V, C)
    Floats wpe;  // (>= T, C)
    uint BT, T, C, V;
} p;

void main()
{
    for (uint bt = gl_WorkGroupID.y; bt < p.BT; bt += gl_NumWorkGroups.y) {
        uint t = bt % p.T;
        int tok = p.inp.v[bt];
        bool valid = tok >= 0 && uint(tok) < p.V;
        for (uint c = gl_GlobalInvocationID.x; c < p.C; c += grid_stride_x()) {
            float e = uintBitsToFloat(0x7fc00000u);
            if (valid)
                e = p.wte.v[uint(tok) * p.C + c];
            p.out_.v[bt * p.C + c] = e + p.wpe.v[t * p.C + c];
        }
    }
}
