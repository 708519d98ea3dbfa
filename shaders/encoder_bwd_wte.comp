#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// encoder_bwd_wte: for every distinct token id tok in inp,
//   dwte[tok, c] += sum of dout[k, c] over the positions k with inp[k] == tok, in increasing k.
// Deterministic without float atomics: the workgroup of position i does the work only when i is
// the first occurrence of its token (no earlier position holds it), so each row of dwte has one
// writer and a fixed summation order. Workgroups: x = positions (grid-stride), y = blocks of
// WG * CPT channels; each invocation accumulates CPT channels in registers.
// The positions from i on are scanned in chunks of WG: each invocation tests one position and
// sets its bit in a shared mask (integer atomicOr); after one barrier every invocation walks the
// set bits in increasing order and adds those rows of dout. Three mask buffers rotate so that a
// buffer is cleared two chunks after it was read and one barrier per chunk suffices.
// Cost: every position scans the positions before it for an earlier occurrence, (B*T)^2 / 2
// integer compares in all (33M at B*T = 8192), and a token's first position reads the rows of all
// its occurrences, so a batch made mostly of one token serializes on one workgroup.
// Token ids outside [0, V) are skipped.
layout(constant_id = 3) const uint CPT = 4; // channels per invocation
// WIDE = 1 (dout or dwte holds more elements than one dispatch may index): the addresses of the
// rows of dout and dwte are formed with 64-bit arithmetic (addr64.glsl) and indexed by the
// channel only; the sums are the same, in the same order.
layout(constant_id = 4) const uint WIDE = 0;

layout(push_constant) uniform Push {
    Floats dwte; // (V, C), accumulated
    Floats dout; // (B*T, C)
    Ints inp;    // (B*T)
    uint BT, C, V;
} p;

const uint NW = (gl_WorkGroupSize.x + 31) / 32; // mask words per chunk
shared uint s_mask[3 * NW];
shared uint s_dup;

void main()
{
    const uint WG = gl_WorkGroupSize.x;
    uint lid = gl_LocalInvocationID.x;
    uint c0 = gl_WorkGroupID.y * WG * CPT + lid;
    for (uint i = gl_WorkGroupID.x; i < p.BT; i += gl_NumWorkGroups.x) {
        int tok = p.inp.v[i];
        if (tok < 0 || uint(tok) >= p.V)
            continue; // uniform across the workgroup
        if (lid == 0)
            s_dup = 0;
        for (uint w = lid; w < 3 * NW; w += WG)
            s_mask[w] = 0;
        barrier();
        bool dup = false;
        for (uint k = lid; k < i; k += WG)
            dup = dup || p.inp.v[k] == tok;
        if (dup)
            atomicOr(s_dup, 1u);
        barrier();
        if (s_dup != 0) {
            barrier(); // everyone has read s_dup before the next position resets it
            continue;
        }
        float acc[CPT];
        for (uint j = 0; j < CPT; j++)
            acc[j] = 0.0;
        uint buf = 0;
        for (uint s = i; s < p.BT; s += WG) {
            uint k = s + lid;
            if (k < p.BT && p.inp.v[k] == tok)
                atomicOr(s_mask[buf * NW + (lid >> 5)], 1u << (lid & 31));
            barrier();
            for (uint w = 0; w < NW; w++) {
                uint bits = s_mask[buf * NW + w];
                while (bits != 0) {
                    uint kk = s + w * 32 + uint(findLSB(bits));
                    bits &= bits - 1;
                    Floats d_row = p.dout;
                    if (WIDE == 1)
                        d_row = Floats(a64_row(uvec2(p.dout), kk, p.C));
                    for (uint j = 0; j < CPT; j++) {
                        uint c = c0 + j * WG;
                        if (c < p.C && WIDE == 1)
                            acc[j] += d_row.v[c];
                        else if (c < p.C)
                            acc[j] += p.dout.v[kk * p.C + c];
                    }
                }
            }
            uint clear = (buf + 2) % 3; // read in the previous chunk, written again in two
            for (uint w = lid; w < NW; w += WG)
                s_mask[clear * NW + w] = 0;
            buf = (buf + 1) % 3;
        }
        Floats w_row = p.dwte;
        if (WIDE == 1)
            w_row = Floats(a64_row(uvec2(p.dwte), uint(tok), p.C));
        for (uint j = 0; j < CPT; j++) {
            uint c = c0 + j * WG;
            if (c < p.C && WIDE == 1)
                w_row.v[c] += acc[j];
            else if (c < p.C)
                p.dwte.v[uint(tok) * p.C + c] += acc[j];
        }
        barrier(); // the masks and s_dup are reset for the next position
    }
}
