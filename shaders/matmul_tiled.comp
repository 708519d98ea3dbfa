#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gelu.glsl"
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
// Block-tiled matrix product for GPUs, with both operands read in their stored layouts:
//   R(m, n) = sum_k A(m, k) * B(k, n)
//   A(m, k) = a[m * lda + k] when A_KCONTIG = 1, else a[k * lda + m]
//   B(k, n) = b[n * ldb + k] when B_KCONTIG = 1, else b[k * ldb + n]
//   stored at out[m * ldo + n], added to what is there when ACCUMULATE = 1, else plus bias[n]
//   when has_bias != 0. GELU = 1 (forward products, not split, ACCUMULATE = 0): also
//   act[m * ldo + n] = gelu_tanh(stored value) (gelu.glsl): bias and GELU in the epilogue, the
//   pre-activation kept in out for GELU's backward.
// Split-K: workgroup z sums only k in [z * kchunk, min(K, (z + 1) * kchunk)) and stores at
// out + z * M * ldo (the host sets kchunk = K and one z for a whole product; for a split one,
// ACCUMULATE = 0 and no bias: each chunk's partial product goes to its own slice of a scratch
// buffer, and matmul_bwd_splitk.comp adds the slices in chunk order).
// A workgroup computes a BM x BN block of R. Per step of BK along k it stages A's BM x BK and B's
// BK x BN tiles in shared memory (each loaded by all invocations together, neighbouring
// invocations reading neighbouring addresses of the operand's contiguous dimension), then every
// invocation accumulates its TM x TN sub-block from shared memory in registers: a value loaded
// from global memory is used BN (A) or BM (B) times. The next step's tiles are loaded into
// registers before this step's products, so their latency hides behind the arithmetic.
// VEC4 = 1 loads both operands 4 elements at a time (16-byte loads of floats, 8-byte loads of
// bf16 operands, widened): only when the host found that each operand's contiguous extent (K, or
// M / N), leading dimension and address are multiples of 4 elements (16 bytes for floats, 8 for
// bf16) and BK, BM, BN are multiples of 4, so that 4 elements are wholly inside or wholly outside
// the operand; the scalar path serves every other shape. Both paths stage the same values, so
// they give the same bits. An invocation's rows and columns are interleaved (row
// ty + i * BM / TM, column tx + j * BN / TN), so that its stores, like its neighbours', fall on
// consecutive addresses (coalesced); where a bf16 output is stored (PAIR), its columns go in
// adjacent pairs instead (2 tx + j % 2 + (j / 2) 2 BN / TN), so that it owns both halves of
// each 32-bit word it stores and writes the word whole, with no atomics (the atomic per-half
// store, bf16_store_bits, remains only for a word the invocation shares: an odd leading
// dimension, or the last column of an odd N). Every loop that indexes an invocation's register
// arrays is unrolled ([[unroll]]): an accumulator array indexed by a loop counter the compiler
// did not unroll would be placed in slow memory. The loop along k is not (it indexes shared
// memory only). Out-of-range elements load as 0 and are never stored, so any
// M, N, K works. Every R(m, n) adds its products in the order k = 0, 1, ...: results are
// deterministic. The workgroup is (BN / TN) x (BM / TM) invocations (ids 0, 1).
// DBUF = 1 (double buffering): two shared tiles per operand. Step s computes from one while the
// next step's tiles, loaded into registers before the products, are stored into the other after
// them: one barrier per step (the next step may read the stored tiles, and the step after may
// overwrite the ones just read) instead of two (everyone has read this step's tiles before they
// are overwritten, and the new ones are stored before they are read). Twice the shared memory;
// the same values staged and the same order of additions, so the same bits as DBUF = 0.
layout(constant_id = 3) const uint BM = 64;
layout(constant_id = 4) const uint BN = 64;
layout(constant_id = 5) const uint BK = 16;
layout(constant_id = 6) const uint TM = 4;
layout(constant_id = 7) const uint TN = 4;
layout(constant_id = 8) const uint A_KCONTIG = 1;
layout(constant_id = 9) const uint B_KCONTIG = 0;
layout(constant_id = 10) const uint ACCUMULATE = 0;
layout(constant_id = 11) const uint VEC4 = 0;
layout(constant_id = 12) const uint GELU = 0;
// A_BF16 / B_BF16 = 1 (mixed precision: an operand is the weights' bf16 copy): a or b is read as
// packed bf16 (common.glsl) and widened on the scalar path (VEC4 = 0); products and sums stay fp32.
layout(constant_id = 13) const uint A_BF16 = 0;
layout(constant_id = 14) const uint B_BF16 = 0;
// STORE_BF16 (mixed precision), bits: 1 (with GELU = 1): act is bf16; 2 (not with ACCUMULATE):
// out is bf16, the bias-added sum rounded once, and GELU reads the rounded value, as gelu_fwd.comp
// does when it reads the bf16 pre-activation back. Each element is stored into its half of the
// word by bf16_store_bits (the two elements of a word belong to different invocations).
layout(constant_id = 15) const uint STORE_BF16 = 0;
const uint ACT_BF16 = STORE_BF16 & 1u, OUT_BF16 = STORE_BF16 >> 1;
layout(constant_id = 16) const uint DBUF = 0;
// columns in adjacent pairs: 1 when STORE_BF16 != 0 and TN is even (integer operations only, as
// specialization-constant expressions need)
const uint PAIR = (STORE_BF16 | (STORE_BF16 >> 1)) & 1u & ~TN;
#define A_AT(i) (A_BF16 == 1 ? bf16_load(Uints(uvec2(p.a)), i) : p.a.v[i])
#define B_AT(i) (B_BF16 == 1 ? bf16_load(Uints(uvec2(p.b)), i) : p.b.v[i])

layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer InFloats
{
    float v[];
};

// The output aliases neither operand (nor the bias): restrict lets the compiler keep loads of
// A and B apart from the stores.
layout(buffer_reference, std430, buffer_reference_align = 4) restrict buffer OutFloats
{
    float v[];
};

layout(buffer_reference, std430, buffer_reference_align = 16) readonly restrict buffer InVec4s
{
    vec4 v[];
};

layout(buffer_reference, std430, buffer_reference_align = 8) readonly restrict buffer InUvec2s
{
    uvec2 v[];
};

layout(push_constant) uniform Push {
    OutFloats out_;
    InFloats a;
    InFloats b;
    InFloats bias; // read only when has_bias != 0
    uint M, N, K;
    uint lda, ldb, ldo;
    uint has_bias;
    uint kchunk; // k per workgroup z (K when not split)
    OutFloats act; // written only when GELU = 1
} p;

// One shared array: A's tiles (AS), then B's (BS). +1 column: the k-major tiles are written with
// a stride that would otherwise hit one bank. Rows [0, BK) hold one step's tiles, [BK, 2 BK) the
// other buffer's when DBUF = 1. After the k loop it stages the accumulators (STAGED below).
const uint A_LD = BM + 1, B_LD = BN + 1;
const uint A_SIZE = (DBUF + 1) * BK * A_LD, S_SIZE = A_SIZE + (DBUF + 1) * BK * B_LD;
shared float S[S_SIZE];
#define AS(r, c) S[(r) * A_LD + (c)]
#define BS(r, c) S[A_SIZE + (r) * B_LD + (c)]

const uint NX = BN / TN, NY = BM / TM, THREADS = NX * NY;
const uint A_PER = (BM * BK + THREADS - 1) / THREADS; // A elements each invocation stages
const uint B_PER = (BN * BK + THREADS - 1) / THREADS;
// vec4s of each tile per invocation on the VEC4 path (1 on the scalar path, unused there)
const uint A_PER4 = VEC4 == 1 ? (BM * BK / 4 + THREADS - 1) / THREADS : 1;
const uint B_PER4 = VEC4 == 1 ? (BN * BK / 4 + THREADS - 1) / THREADS : 1;
const uint A_PERS = VEC4 == 1 ? 1 : A_PER, B_PERS = VEC4 == 1 ? 1 : B_PER;
float ra[A_PERS], rb[B_PERS]; // the next step's tiles, loaded while this step computes
vec4 ra4[A_PER4], rb4[B_PER4];
uint kend; // end of this workgroup's k range

// Four bf16 values (two packed words, the even element in each word's low half), widened.
vec4 bf16_widen4(uvec2 w)
{
    return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xFFFF0000u),
                uintBitsToFloat(w.y << 16), uintBitsToFloat(w.y & 0xFFFF0000u));
}

// Elements [4 q, 4 q + 4) of operand a or b on the VEC4 path.
vec4 a_at4(uint q)
{
    return A_BF16 == 1 ? bf16_widen4(InUvec2s(uvec2(p.a)).v[q]) : InVec4s(uvec2(p.a)).v[q];
}

vec4 b_at4(uint q)
{
    return B_BF16 == 1 ? bf16_widen4(InUvec2s(uvec2(p.b)).v[q]) : InVec4s(uvec2(p.b)).v[q];
}

// Load the tiles of the step at k0 into registers: element e of A's tile is (mm, kk) along the
// operand's contiguous dimension, so that neighbouring invocations read neighbouring addresses.
void load_tiles(uint tid, uint m0, uint n0, uint k0)
{
    [[unroll]] for (uint i = 0; i < A_PER; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        uint m = m0 + mm, k = k0 + kk;
        float v = 0.0;
        if (e < BM * BK && m < p.M && k < kend)
            v = A_KCONTIG == 1 ? A_AT(m * p.lda + k) : A_AT(k * p.lda + m);
        ra[i] = v;
    }
    [[unroll]] for (uint i = 0; i < B_PER; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / BK : e % BN, kk = B_KCONTIG == 1 ? e % BK : e / BN;
        uint n = n0 + nn, k = k0 + kk;
        float v = 0.0;
        if (e < BN * BK && n < p.N && k < kend)
            v = B_KCONTIG == 1 ? B_AT(n * p.ldb + k) : B_AT(k * p.ldb + n);
        rb[i] = v;
    }
}

// The VEC4 form of load_tiles: element e of A's tile is 4 consecutive floats of the contiguous
// dimension (C = BK or BM of them per line of the tile).
void load_tiles4(uint tid, uint m0, uint n0, uint k0)
{
    [[unroll]] for (uint i = 0; i < A_PER4; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / (BK / 4) : (e % (BM / 4)) * 4;
        uint kk = A_KCONTIG == 1 ? (e % (BK / 4)) * 4 : e / (BM / 4);
        uint m = m0 + mm, k = k0 + kk;
        vec4 v = vec4(0.0);
        if (e < BM * BK / 4 && m < p.M && k < kend)
            v = A_KCONTIG == 1 ? a_at4((m * p.lda + k) / 4) : a_at4((k * p.lda + m) / 4);
        ra4[i] = v;
    }
    [[unroll]] for (uint i = 0; i < B_PER4; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / (BK / 4) : (e % (BN / 4)) * 4;
        uint kk = B_KCONTIG == 1 ? (e % (BK / 4)) * 4 : e / (BN / 4);
        uint n = n0 + nn, k = k0 + kk;
        vec4 v = vec4(0.0);
        if (e < BN * BK / 4 && n < p.N && k < kend)
            v = B_KCONTIG == 1 ? b_at4((n * p.ldb + k) / 4) : b_at4((k * p.ldb + n) / 4);
        rb4[i] = v;
    }
}

// Store the registers' tiles into rows [row0, row0 + BK) of AS and BS.
void store_tiles4(uint tid, uint row0)
{
    [[unroll]] for (uint i = 0; i < A_PER4; i++) {
        uint e = tid + i * THREADS;
        if (e >= BM * BK / 4)
            continue;
        [[unroll]] for (uint c = 0; c < 4; c++)
            if (A_KCONTIG == 1)
                AS(row0 + (e % (BK / 4)) * 4 + c, e / (BK / 4)) = ra4[i][c];
            else
                AS(row0 + e / (BM / 4), (e % (BM / 4)) * 4 + c) = ra4[i][c];
    }
    [[unroll]] for (uint i = 0; i < B_PER4; i++) {
        uint e = tid + i * THREADS;
        if (e >= BN * BK / 4)
            continue;
        [[unroll]] for (uint c = 0; c < 4; c++)
            if (B_KCONTIG == 1)
                BS(row0 + (e % (BK / 4)) * 4 + c, e / (BK / 4)) = rb4[i][c];
            else
                BS(row0 + e / (BN / 4), (e % (BN / 4)) * 4 + c) = rb4[i][c];
    }
}

void store_tiles(uint tid, uint row0)
{
    [[unroll]] for (uint i = 0; i < A_PER; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        if (e < BM * BK)
            AS(row0 + kk, mm) = ra[i];
    }
    [[unroll]] for (uint i = 0; i < B_PER; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / BK : e % BN, kk = B_KCONTIG == 1 ? e % BK : e / BN;
        if (e < BN * BK)
            BS(row0 + kk, nn) = rb[i];
    }
}

void load_step(uint tid, uint m0, uint n0, uint k0)
{
    if (VEC4 == 1)
        load_tiles4(tid, m0, n0, k0);
    else
        load_tiles(tid, m0, n0, k0);
}

void store_step(uint tid, uint row0)
{
    if (VEC4 == 1)
        store_tiles4(tid, row0);
    else
        store_tiles(tid, row0);
}

// Column j of an invocation's TN columns within the block (see PAIR above).
uint col(uint tx, uint j)
{
    return PAIR == 1 ? 2 * tx + (j & 1u) + (j >> 1) * 2 * NX : tx + j * NX;
}

// One k of the step: every accumulator of the invocation gains the product of its row's A and
// its column's B, from the shared tiles' row r.
void step_products(inout float acc[TM][TN], uint r, uint tx, uint ty)
{
    float av[TM], bv[TN];
    [[unroll]] for (uint i = 0; i < TM; i++)
        av[i] = AS(r, ty + i * NY);
    [[unroll]] for (uint j = 0; j < TN; j++)
        bv[j] = BS(r, col(tx, j));
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++)
            acc[i][j] = fma(av[i], bv[j], acc[i][j]);
}

// The value stored at (m, n) for the sum r: plus what out holds there (ACCUMULATE) or the bias.
float finish(float r, uint o, uint n)
{
    if (ACCUMULATE == 1)
        return r + p.out_.v[o];
    return p.has_bias != 0 ? r + p.bias.v[n] : r;
}

// Store the invocation's values of (m, n) and, when two, (m, n + 1): r0 and r1 are finished sums
// (bias added). out gets them (rounded to bf16 when OUT_BF16) at out index o, o + 1; with GELU, act
// gets gelu_tanh of what out holds, at act index o - obase. bf16 pairs whose first element is
// even fill a word of their own and are stored whole; any other bf16 element by its half.
void store_pair(uint o, uint obase, bool two, float r0, float r1)
{
    Uints ow = Uints(uvec2(p.out_)), aw = Uints(uvec2(p.act));
    if (OUT_BF16 == 1) {
        uint h0 = bf16_round(r0), h1 = bf16_round(r1);
        if (two && (o & 1u) == 0) {
            ow.v[o >> 1] = h0 | (h1 << 16);
        } else {
            bf16_store_bits(ow, o, h0);
            if (two)
                bf16_store_bits(ow, o + 1, h1);
        }
        r0 = bf16_widen(h0), r1 = bf16_widen(h1);
    } else {
        p.out_.v[o] = r0;
        if (two)
            p.out_.v[o + 1] = r1;
    }
    if (GELU == 0)
        return;
    uint a = o - obase;
    float g0 = gelu_tanh(r0), g1 = two ? gelu_tanh(r1) : 0.0;
    if (ACT_BF16 == 1 && two && (a & 1u) == 0) {
        aw.v[a >> 1] = bf16_pack2(g0, g1);
    } else if (ACT_BF16 == 1) {
        bf16_store_half(aw, a, g0);
        if (two)
            bf16_store_half(aw, a + 1, g1);
    } else {
        p.act.v[a] = g0;
        if (two)
            p.act.v[a + 1] = g1;
    }
}

// The staged epilogue (STAGED = 1, where GELU or a bf16 store makes the epilogue long): after the
// k loop the accumulators go to shared memory in P passes of BM / P rows each (one pass when the
// whole BM x BN block fits in S), and the workgroup then finishes and stores the staged rows
// element by element (pairs of columns where a bf16 output is stored), neighbouring invocations
// on neighbouring addresses. The loops over register arrays are then only the tiny staging
// copies, which compilers unroll; an epilogue whose long body a compiler declined to unroll
// would index the accumulators by a loop counter and place all of them in slow memory (measured
// on NVIDIA's compiler for the 128x128 tile: the fused GELU product 13x slower than the plain
// one). The same finish and store_pair as the direct epilogue: the same bits. P = 0 (the block
// does not fit in 4 passes): the direct epilogue.
const uint EW = STORE_BF16 != 0 ? 2 : 1; // columns an invocation stores at a time
// (nested selections only: glslang turns && and || of specialization constants into branches)
const uint P = BM * BN <= S_SIZE ? 1
             : TM % 2 != 0 ? 0 : BM * BN / 2 <= S_SIZE ? 2
             : TM % 4 != 0 ? 0 : BM * BN / 4 <= S_SIZE ? 4 : 0;
const uint STAGED = P == 0 ? 0 : BN % EW != 0 ? 0 : (GELU | STORE_BF16) != 0 ? 1 : 0;
const uint RP = P == 0 ? BM : BM / P, IP = P == 0 ? TM : TM / P; // rows, and i, per pass

// Finish and store the staged rows [h RP, (h + 1) RP) of the block, from S.
void store_staged(uint tid, uint m0, uint n0, uint obase, uint h)
{
    for (uint e = tid * EW; e < RP * BN; e += THREADS * EW) {
        uint m = m0 + h * RP + e / BN, n = n0 + e % BN;
        if (m >= p.M || n >= p.N)
            continue;
        bool two = EW == 2 && n + 1 < p.N;
        uint o = obase + m * p.ldo + n;
        float r0 = finish(S[e], o, n);
        float r1 = two ? finish(S[e + 1], o + 1, n + 1) : 0.0;
        store_pair(o, obase, two, r0, r1);
    }
}

// Pass h of the staged epilogue: a barrier (S's tiles may still be read), the accumulators of
// rows i in [h IP, (h + 1) IP) into S, a barrier, their stores. h is a literal at every use, so
// that every index into acc is a constant once the loops are unrolled.
#define STAGE_PASS(h) \
    barrier(); \
    [[unroll]] for (uint i = 0; i < IP; i++) \
        [[unroll]] for (uint j = 0; j < TN; j++) \
            S[(ty + i * NY) * BN + col(tx, j)] = acc[min((h) * IP + i, TM - 1)][j]; \
    barrier(); \
    store_staged(tid, m0, n0, obase, h)

void main()
{
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * NX + tx;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    const uint kbeg = gl_WorkGroupID.z * p.kchunk;
    kend = min(p.K, kbeg + p.kchunk);
    const uint obase = gl_WorkGroupID.z * p.M * p.ldo; // this chunk's slice (0 when not split)
    float acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++)
            acc[i][j] = 0.0;
    load_step(tid, m0, n0, kbeg);
    store_step(tid, 0);
    barrier();
    uint cur = 0; // first row of this step's tiles in AS and BS: 0, or BK when DBUF = 1
    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
        bool more = k0 + BK < kend;
        if (more) // the global loads of the next step are in flight during this one's FMAs
            load_step(tid, m0, n0, k0 + BK);
        uint kn = min(BK, kend - k0);
        for (uint kk = 0; kk < kn; kk++)
            step_products(acc, cur + kk, tx, ty);
        if (DBUF == 1) { // the other buffer was last read in the step before, behind a barrier
            if (more) {
                store_step(tid, BK - cur);
                barrier();
            }
            cur = BK - cur;
        } else {
            barrier();
            if (more) {
                store_step(tid, 0);
                barrier();
            }
        }
    }
    if (STAGED == 1) {
        STAGE_PASS(0);
        if (P > 1) {
            STAGE_PASS(1);
        }
        if (P > 2) {
            STAGE_PASS(2);
            STAGE_PASS(3);
        }
        return;
    }
    [[unroll]] for (uint i = 0; i < TM; i++) {
        uint m = m0 + ty + i * NY;
        if (m >= p.M)
            continue;
        [[unroll]] for (uint j = 0; j < TN; j += PAIR + 1) {
            uint n = n0 + col(tx, j);
            if (n >= p.N)
                continue;
            bool two = PAIR == 1 && n + 1 < p.N;
            uint o = obase + m * p.ldo + n;
            float r0 = finish(acc[i][j], o, n);
            float r1 = two ? finish(acc[i][j + PAIR], o + 1, n + 1) : 0.0;
            store_pair(o, obase, two, r0, r1);
        }
    }
}
