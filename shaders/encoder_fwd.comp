#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// encoder_fwd: out[b, t, c] = wte[inp[b, t], c] + wpe[t, c]. Workgroups: y = positions
// (grid-stride), x = channels (grid-stride), so the token id is read once per position and
// neighbouring invocations touch neighbouring channels. A token id outside [0, V) writes NaN for
// its row, so bad input shows up in the loss instead of reading out of bounds.
// WIDE = 1 (wte holds more elements than one dispatch may index): the address of the token's row
// of wte is formed with 64-bit arithmetic (addr64.glsl) and indexed by the channel only.
layout(constant_id = 3) const uint WIDE = 0;
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
        Floats wte_row = p.wte;
        if (WIDE == 1 && valid)
            wte_row = Floats(a64_row(uvec2(p.wte), uint(tok), p.C));
        for (uint c = gl_GlobalInvocationID.x; c < p.C; c += grid_stride_x()) {
            float e = uintBitsToFloat(0x7fc00000u);
            if (valid && WIDE == 1)
                e = wte_row.v[c];
            else if (valid)
                e = p.wte.v[uint(tok) * p.C + c];
            p.out_.v[bt * p.C + c] = e + p.wpe.v[t * p.C + c];
        }
    }
}
