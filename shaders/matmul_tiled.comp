#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gelu.glsl"
#extension GL_EXT_buffer_reference_uvec2 : require
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
// VEC4 = 1 loads both operands 4 floats at a time (16-byte loads): only when the host found that
// each operand's contiguous extent (K, or M / N), leading dimension and address are multiples of
// 4 floats (16 bytes) and BK, BM, BN are multiples of 4, so that a vec4 is wholly inside or
// wholly outside the operand; the scalar path serves every other shape. Both paths stage the same
// values, so they give the same bits. An invocation's rows and columns are interleaved (row
// ty + i * BM / TM, column tx + j * BN / TN), so that its stores, like its neighbours', fall on
// consecutive addresses (coalesced). Out-of-range elements load as 0 and are never stored, so any
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

// +1 column: the k-major tiles are written with a stride that would otherwise hit one bank.
// Rows [0, BK) hold one step's tiles, [BK, 2 BK) the other buffer's when DBUF = 1.
shared float As[(DBUF + 1) * BK][BM + 1];
shared float Bs[(DBUF + 1) * BK][BN + 1];

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

// Load the tiles of the step at k0 into registers: element e of A's tile is (mm, kk) along the
// operand's contiguous dimension, so that neighbouring invocations read neighbouring addresses.
void load_tiles(uint tid, uint m0, uint n0, uint k0)
{
    for (uint i = 0; i < A_PER; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        uint m = m0 + mm, k = k0 + kk;
        float v = 0.0;
        if (e < BM * BK && m < p.M && k < kend)
            v = A_KCONTIG == 1 ? A_AT(m * p.lda + k) : A_AT(k * p.lda + m);
        ra[i] = v;
    }
    for (uint i = 0; i < B_PER; i++) {
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
    InVec4s a4 = InVec4s(uvec2(p.a)), b4 = InVec4s(uvec2(p.b));
    for (uint i = 0; i < A_PER4; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / (BK / 4) : (e % (BM / 4)) * 4;
        uint kk = A_KCONTIG == 1 ? (e % (BK / 4)) * 4 : e / (BM / 4);
        uint m = m0 + mm, k = k0 + kk;
        vec4 v = vec4(0.0);
        if (e < BM * BK / 4 && m < p.M && k < kend)
            v = A_KCONTIG == 1 ? a4.v[(m * p.lda + k) / 4] : a4.v[(k * p.lda + m) / 4];
        ra4[i] = v;
    }
    for (uint i = 0; i < B_PER4; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / (BK / 4) : (e % (BN / 4)) * 4;
        uint kk = B_KCONTIG == 1 ? (e % (BK / 4)) * 4 : e / (BN / 4);
        uint n = n0 + nn, k = k0 + kk;
        vec4 v = vec4(0.0);
        if (e < BN * BK / 4 && n < p.N && k < kend)
            v = B_KCONTIG == 1 ? b4.v[(n * p.ldb + k) / 4] : b4.v[(k * p.ldb + n) / 4];
        rb4[i] = v;
    }
}

// Store the registers' tiles into rows [row0, row0 + BK) of As and Bs.
void store_tiles4(uint tid, uint row0)
{
    for (uint i = 0; i < A_PER4; i++) {
        uint e = tid + i * THREADS;
        if (e >= BM * BK / 4)
            continue;
        for (uint c = 0; c < 4; c++)
            if (A_KCONTIG == 1)
                As[row0 + (e % (BK / 4)) * 4 + c][e / (BK / 4)] = ra4[i][c];
            else
                As[row0 + e / (BM / 4)][(e % (BM / 4)) * 4 + c] = ra4[i][c];
    }
    for (uint i = 0; i < B_PER4; i++) {
        uint e = tid + i * THREADS;
        if (e >= BN * BK / 4)
            continue;
        for (uint c = 0; c < 4; c++)
            if (B_KCONTIG == 1)
                Bs[row0 + (e % (BK / 4)) * 4 + c][e / (BK / 4)] = rb4[i][c];
            else
                Bs[row0 + e / (BN / 4)][(e % (BN / 4)) * 4 + c] = rb4[i][c];
    }
}

void store_tiles(uint tid, uint row0)
{
    for (uint i = 0; i < A_PER; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        if (e < BM * BK)
            As[row0 + kk][mm] = ra[i];
    }
    for (uint i = 0; i < B_PER; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / BK : e % BN, kk = B_KCONTIG == 1 ? e % BK : e / BN;
        if (e < BN * BK)
            Bs[row0 + kk][nn] = rb[i];
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

void main()
{
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * NX + tx;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    const uint kbeg = gl_WorkGroupID.z * p.kchunk;
    kend = min(p.K, kbeg + p.kchunk);
    const uint obase = gl_WorkGroupID.z * p.M * p.ldo; // this chunk's slice (0 when not split)
    float acc[TM][TN];
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++)
            acc[i][j] = 0.0;
    load_step(tid, m0, n0, kbeg);
    store_step(tid, 0);
    barrier();
    uint cur = 0; // first row of this step's tiles in As and Bs: 0, or BK when DBUF = 1
    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
        bool more = k0 + BK < kend;
        if (more) // the global loads of the next step are in flight during this one's FMAs
            load_step(tid, m0, n0, k0 + BK);
        uint kn = min(BK, kend - k0);
        for (uint kk = 0; kk < kn; kk++) {
            float av[TM], bv[TN];
            for (uint i = 0; i < TM; i++)
                av[i] = As[cur + kk][ty + i * NY];
            for (uint j = 0; j < TN; j++)
                bv[j] = Bs[cur + kk][tx + j * NX];
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++)
                    acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
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
    for (uint i = 0; i < TM; i++) {
        uint m = m0 + ty + i * NY;
        if (m >= p.M)
            continue;
        for (uint j = 0; j < TN; j++) {
            uint n = n0 + tx + j * NX;
            if (n >= p.N)
                continue;
            float r = acc[i][j];
            if (ACCUMULATE == 1)
                r += p.out_.v[obase + m * p.ldo + n];
            else if (p.has_bias != 0)
                r += p.bias.v[n];
            if (OUT_BF16 == 1) {
                uint h = bf16_round(r);
                bf16_store_bits(Uints(uvec2(p.out_)), obase + m * p.ldo + n, h);
                r = bf16_widen(h);
            } else {
                p.out_.v[obase + m * p.ldo + n] = r;
            }
            if (GELU == 1 && ACT_BF16 == 1)
                bf16_store_half(Uints(uvec2(p.act)), m * p.ldo + n, gelu_tanh(r));
            else if (GELU == 1)
                p.act.v[m * p.ldo + n] = gelu_tanh(r);
        }
    }
}
