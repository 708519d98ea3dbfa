#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// encoder_fwd: out[b, t, c] = wte[inp[b, t], c] + wpe[t, c] (wpe: WPE below). Workgroups: y = positions
// (grid-stride), x = channels (grid-stride), so the token id is read once per position and
// neighbouring invocations touch neighbouring channels. A token id outside [0, V) writes NaN for
// its row, so bad input shows up in the loss instead of reading out of bounds.
// WIDE = 1 (wte holds more elements than one dispatch may index): the address of the token's row
// of wte is formed with 64-bit arithmetic (addr64.glsl) and indexed by the channel only.
layout(constant_id = 3) const uint WIDE = 0;
// OUT_BF16 = 1 (mixed precision): out is bf16 (the residual stream stored bf16), each invocation
// writing whole words (two channels, C even), the fp32 sum rounded to nearest even.
layout(constant_id = 4) const uint OUT_BF16 = 0;
// WPE = 0 (rotary models: the positions enter in attention): out is the token's row of wte alone;
// wpe is not read.
layout(constant_id = 5) const uint WPE = 1;
layout(push_constant) uniform Push {
    Floats out_; // (B, T, C)
    Ints inp;    // (B, T)
    Floats wte;  // (V, C)
    Floats wpe;  // (>= T, C)
    uint BT, T, C, V;
} p;

// Channel c of the position's embedding: its token's row of wte (NaN for an invalid token) plus
// wpe's row t.
float embed(bool valid, Floats wte_row, int tok, uint t, uint c)
{
    float e = uintBitsToFloat(0x7fc00000u);
    if (valid && WIDE == 1)
        e = wte_row.v[c];
    else if (valid)
        e = p.wte.v[uint(tok) * p.C + c];
    return WPE == 1 ? e + p.wpe.v[t * p.C + c] : e;
}

void main()
{
    for (uint bt = gl_WorkGroupID.y; bt < p.BT; bt += gl_NumWorkGroups.y) {
        uint t = bt % p.T;
        int tok = p.inp.v[bt];
        bool valid = tok >= 0 && uint(tok) < p.V;
        Floats wte_row = p.wte;
        if (WIDE == 1 && valid)
            wte_row = Floats(a64_row(uvec2(p.wte), uint(tok), p.C));
        const uint stride = grid_stride_x();
        for (uint c = 2 * gl_GlobalInvocationID.x; OUT_BF16 == 1 && c < p.C; c += 2 * stride)
            Uints(uvec2(p.out_)).v[(bt * p.C + c) / 2] =
                bf16_pack2(embed(valid, wte_row, tok, t, c), embed(valid, wte_row, tok, t, c + 1));
        for (uint c = gl_GlobalInvocationID.x; OUT_BF16 == 0 && c < p.C; c += stride)
            p.out_.v[bt * p.C + c] = embed(valid, wte_row, tok, t, c);
    }
}
