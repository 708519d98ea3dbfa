#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Block-tiled matrix product for GPUs, with both operands read in their stored layouts:
//   R(m, n) = sum_k A(m, k) * B(k, n)
//   A(m, k) = a[m * lda + k] when A_KCONTIG = 1, else a[k * lda + m]
//   B(k, n) = b[n * ldb + k] when B_KCONTIG = 1, else b[k * ldb + n]
//   stored at out[m * ldo + n], added to what is there when ACCUMULATE = 1, else plus bias[n]
//   when has_bias != 0.
// A workgroup computes a BM x BN block of R. Per step of BK along k it stages A's BM x BK and B's
// BK x BN tiles in shared memory (each loaded by all invocations together, neighbouring
// invocations reading neighbouring addresses of the operand's contiguous dimension), then every
// invocation accumulates its TM x TN sub-block from shared memory in registers: a value loaded
// from global memory is used BN (A) or BM (B) times. The next step's tiles are loaded into
// registers before this step's products, so their latency hides behind the arithmetic. An invocation's rows and columns are
// interleaved (row ty + i * BM / TM, column tx + j * BN / TN), so that its stores, like its
// neighbours', fall on consecutive addresses. Out-of-range elements load as 0 and are never
// stored, so any M, N, K works. Every R(m, n) adds its K products in the order k = 0, 1, ...:
// results are deterministic. The workgroup is (BN / TN) x (BM / TM) invocations (ids 0, 1).
layout(constant_id = 3) const uint BM = 64;
layout(constant_id = 4) const uint BN = 64;
layout(constant_id = 5) const uint BK = 16;
layout(constant_id = 6) const uint TM = 4;
layout(constant_id = 7) const uint TN = 4;
layout(constant_id = 8) const uint A_KCONTIG = 1;
layout(constant_id = 9) const uint B_KCONTIG = 0;
layout(constant_id = 10) const uint ACCUMULATE = 0;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer InFloats
{
    float v[];
};

layout(push_constant) uniform Push {
    Floats out_;
    InFloats a;
    InFloats b;
    InFloats bias; // read only when has_bias != 0
    uint M, N, K;
    uint lda, ldb, ldo;
    uint has_bias;
} p;

// +1 column: the k-major tiles are written with a stride that would otherwise hit one bank.
shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

const uint NX = BN / TN, NY = BM / TM, THREADS = NX * NY;
const uint A_PER = (BM * BK + THREADS - 1) / THREADS; // A elements each invocation stages
const uint B_PER = (BN * BK + THREADS - 1) / THREADS;
float ra[A_PER], rb[B_PER]; // the next step's tiles, loaded while this step computes

// Load the tiles of the step at k0 into registers: element e of A's tile is (mm, kk) along the
// operand's contiguous dimension, so that neighbouring invocations read neighbouring addresses.
void load_tiles(uint tid, uint m0, uint n0, uint k0)
{
    for (uint i = 0; i < A_PER; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        uint m = m0 + mm, k = k0 + kk;
        float v = 0.0;
        if (e < BM * BK && m < p.M && k < p.K)
            v = A_KCONTIG == 1 ? p.a.v[m * p.lda + k] : p.a.v[k * p.lda + m];
        ra[i] = v;
    }
    for (uint i = 0; i < B_PER; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / BK : e % BN, kk = B_KCONTIG == 1 ? e % BK : e / BN;
        uint n = n0 + nn, k = k0 + kk;
        float v = 0.0;
        if (e < BN * BK && n < p.N && k < p.K)
            v = B_KCONTIG == 1 ? p.b.v[n * p.ldb + k] : p.b.v[k * p.ldb + n];
        rb[i] = v;
    }
}

void store_tiles(uint tid)
{
    for (uint i = 0; i < A_PER; i++) {
        uint e = tid + i * THREADS;
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        if (e < BM * BK)
            As[kk][mm] = ra[i];
    }
    for (uint i = 0; i < B_PER; i++) {
        uint e = tid + i * THREADS;
        uint nn = B_KCONTIG == 1 ? e / BK : e % BN, kk = B_KCONTIG == 1 ? e % BK : e / BN;
        if (e < BN * BK)
            Bs[kk][nn] = rb[i];
    }
}

void main()
{
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * NX + tx;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    float acc[TM][TN];
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++)
            acc[i][j] = 0.0;
    load_tiles(tid, m0, n0, 0);
    store_tiles(tid);
    barrier();
    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        bool more = k0 + BK < p.K;
        if (more) // the global loads of the next step are in flight during this one's FMAs
            load_tiles(tid, m0, n0, k0 + BK);
        uint kend = min(BK, p.K - k0);
        for (uint kk = 0; kk < kend; kk++) {
            float av[TM], bv[TN];
            for (uint i = 0; i < TM; i++)
                av[i] = As[kk][ty + i * NY];
            for (uint j = 0; j < TN; j++)
                bv[j] = Bs[kk][tx + j * NX];
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++)
                    acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier();
        if (more) {
            store_tiles(tid);
            barrier();
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
                r += p.out_.v[m * p.ldo + n];
            else if (p.has_bias != 0)
                r += p.bias.v[n];
            p.out_.v[m * p.ldo + n] = r;
        }
    }
}
