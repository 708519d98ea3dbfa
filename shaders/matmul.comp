#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
#include "gelu.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
// Register-tiled matrix product, the one kernel behind every matmul pass:
//   R(m, n) = sum_k A(m, k) * B(k, n)
//   A(m, k) = a[m * lda + k] when A_KCONTIG = 1, else a[k * lda + m];   B(k, n) = b[k * ldb + n]
//   stored at out[m * ldo + n] (OUT_T = 0) or out[n * ldo + m] (OUT_T = 1),
//   added to what is there when ACCUMULATE = 1, else plus bias[m] (OUT_T = 1) / bias[n] (OUT_T = 0)
//   when has_bias != 0. GELU = 1 (forward products only, ACCUMULATE = 0): also act[same index] =
//   gelu_tanh(stored value) (gelu.glsl), the bias-added pre-activation staying in out: the MLP's
//   fc product and its GELU in one dispatch, with the bits of the two kernels (the same rounded
//   float goes through the same function).
// Each invocation computes a TM x TN block: its TM rows are shared by the whole workgroup (the loads
// of A are uniform across it and broadcast) and its TN columns are interleaved across the LX lanes
// (neighbouring lanes load neighbouring elements of B). The k loop accumulates in a fixed order,
// so results are deterministic. Tile sizes and layouts are specialization constants: each device
// gets its own variant.
layout(constant_id = 3) const uint TM = 4;         // rows per invocation (and per workgroup)
layout(constant_id = 4) const uint TN = 4;         // columns per invocation
layout(constant_id = 5) const uint A_KCONTIG = 1;  // layout of A, see above
layout(constant_id = 6) const uint OUT_T = 0;      // store transposed
layout(constant_id = 7) const uint ACCUMULATE = 0; // out += R instead of out = R (+ bias)
// A_SHUFFLE = 1 (for devices whose loads are all gathers, such as lavapipe): the workgroup is one
// subgroup with TM == its size; lane l loads A(row0 + l, k) and subgroupBroadcast hands row i's
// value to every lane, so A costs one load per k instead of TM.
layout(constant_id = 8) const uint A_SHUFFLE = 0;
// WIDE = 1 (products whose tensors hold more elements than one dispatch may index, see
// src/ops/matmul.c): the address of every row (of A, of B, of out) is formed with 64-bit
// arithmetic (addr64.glsl) and indexed only within the row. The loads, the order of the sums and
// the results are those of WIDE = 0.
layout(constant_id = 9) const uint WIDE = 0;
layout(constant_id = 10) const uint GELU = 0;
// A_BF16 / B_BF16 = 1 (mixed precision: an operand is the weights' bf16 copy): a or b is read as
// packed bf16 (common.glsl) and widened; the products and sums stay fp32. Not with WIDE = 1.
layout(constant_id = 11) const uint A_BF16 = 0;
layout(constant_id = 12) const uint B_BF16 = 0;
// STORE_BF16 (mixed precision, not WIDE), bits: 1 (with GELU = 1): act is bf16; 2 (not with
// ACCUMULATE): out is bf16, the bias-added sum rounded once, and GELU reads the rounded value, as
// gelu_fwd.comp does when it reads the bf16 pre-activation back. Each element is stored into its
// half of the word by bf16_store_bits (the two elements of a word belong to different
// invocations).
layout(constant_id = 13) const uint STORE_BF16 = 0;
const uint ACT_BF16 = STORE_BF16 & 1u, OUT_BF16 = STORE_BF16 >> 1;
#define A_AT(i) (A_BF16 == 1 ? bf16_load(Uints(uvec2(p.a)), i) : p.a.v[i])
#define B_AT(i) (B_BF16 == 1 ? bf16_load(Uints(uvec2(p.b)), i) : p.b.v[i])

layout(push_constant) uniform Push {
    Floats out_;
    Floats a;
    Floats b;
    Floats bias; // read only when has_bias != 0
    uint M, N, K;
    uint lda, ldb, ldo;
    uint has_bias;
    uint kchunk_; // matmul_tiled.comp's; unused here
    Floats act;   // written only when GELU = 1
} p;

void main()
{
    const uint LX = gl_WorkGroupSize.x;
    uint row0 = gl_WorkGroupID.y * TM;
    uint col0 = gl_WorkGroupID.x * (LX * TN) + gl_LocalInvocationID.x;
    float acc[TM][TN];
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++)
            acc[i][j] = 0.0;
    // Indices are clamped so every load is in bounds; clamped rows/columns are never stored.
    uint arow[TM];
    uint bcol[TN];
    for (uint i = 0; i < TM; i++)
        arow[i] = min(row0 + i, p.M - 1);
    for (uint j = 0; j < TN; j++)
        bcol[j] = min(col0 + j * LX, p.N - 1);
    uint my_row = min(row0 + gl_SubgroupInvocationID, p.M - 1); // used when A_SHUFFLE = 1
    // WIDE: rows of A by m (A_KCONTIG = 1), row k of A (A_KCONTIG = 0) and of B, walked along k
    uvec2 a_rows[TM], my_a_row;
    uvec2 a_k = uvec2(p.a), b_k = uvec2(p.b);
    const uvec2 a_step = a64_step(p.lda), b_step = a64_step(p.ldb);
    if (WIDE == 1 && A_KCONTIG == 1) {
        for (uint i = 0; i < TM; i++)
            a_rows[i] = a64_row(uvec2(p.a), arow[i], p.lda);
        my_a_row = a64_row(uvec2(p.a), my_row, p.lda);
    }
    for (uint k = 0; k < p.K; k++) {
        float av[TM];
        float bv[TN];
        if (WIDE == 1) {
            if (A_SHUFFLE == 1) {
                float mine = A_KCONTIG == 1 ? Floats(my_a_row).v[k] : Floats(a_k).v[my_row];
                for (uint i = 0; i < TM; i++)
                    av[i] = subgroupBroadcast(mine, i);
            } else {
                for (uint i = 0; i < TM; i++)
                    av[i] = A_KCONTIG == 1 ? Floats(a_rows[i]).v[k] : Floats(a_k).v[arow[i]];
            }
            for (uint j = 0; j < TN; j++)
                bv[j] = Floats(b_k).v[bcol[j]];
            a_k = a64_add(a_k, a_step);
            b_k = a64_add(b_k, b_step);
        } else if (A_SHUFFLE == 1) {
            float mine = A_KCONTIG == 1 ? A_AT(my_row * p.lda + k) : A_AT(k * p.lda + my_row);
            for (uint i = 0; i < TM; i++)
                av[i] = subgroupBroadcast(mine, i);
        } else {
            for (uint i = 0; i < TM; i++)
                av[i] = A_KCONTIG == 1 ? A_AT(arow[i] * p.lda + k) : A_AT(k * p.lda + arow[i]);
        }
        if (WIDE == 0)
            for (uint j = 0; j < TN; j++)
                bv[j] = B_AT(k * p.ldb + bcol[j]);
        for (uint i = 0; i < TM; i++)
            for (uint j = 0; j < TN; j++)
                acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    for (uint i = 0; i < TM; i++) {
        uint r = row0 + i;
        if (r >= p.M)
            break;
        for (uint j = 0; j < TN; j++) {
            uint c = col0 + j * LX;
            if (c >= p.N)
                break;
            float v = acc[i][j];
            if (WIDE == 1) {
                Floats orow = Floats(OUT_T == 1 ? a64_row(uvec2(p.out_), c, p.ldo)
                                                : a64_row(uvec2(p.out_), r, p.ldo));
                uint o = OUT_T == 1 ? r : c;
                if (ACCUMULATE == 1)
                    v += orow.v[o];
                else if (p.has_bias != 0)
                    v += p.bias.v[OUT_T == 1 ? r : c];
                orow.v[o] = v;
                if (GELU == 1)
                    Floats(OUT_T == 1 ? a64_row(uvec2(p.act), c, p.ldo)
                                      : a64_row(uvec2(p.act), r, p.ldo))
                        .v[o] = gelu_tanh(v);
                continue;
            }
            uint o = OUT_T == 1 ? c * p.ldo + r : r * p.ldo + c;
            if (ACCUMULATE == 1)
                v += p.out_.v[o];
            else if (p.has_bias != 0)
                v += p.bias.v[OUT_T == 1 ? r : c];
            if (OUT_BF16 == 1) {
                uint h = bf16_round(v);
                bf16_store_bits(Uints(uvec2(p.out_)), o, h);
                v = bf16_widen(h);
            } else {
                p.out_.v[o] = v;
            }
            if (GELU == 1 && ACT_BF16 == 1)
                bf16_store_half(Uints(uvec2(p.act)), o, gelu_tanh(v));
            else if (GELU == 1)
                p.act.v[o] = gelu_tanh(v);
        }
    }
}
