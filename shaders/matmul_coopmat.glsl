// Matrix product on cooperative matrices (tensor cores): the same product, operands and epilogue
// as matmul_tiled.comp,
//   R(m, n) = sum_k A(m, k) * B(k, n)
//   A(m, k) = a[m * lda + k] when A_KCONTIG = 1, else a[k * lda + m]
//   B(k, n) = b[n * ldb + k] when B_KCONTIG = 1, else b[k * ldb + n]
//   stored at out[m * ldo + n], added to what is there when ACCUMULATE = 1, else plus bias[n]
//   when has_bias != 0; GELU = 1: also act[m * ldo + n] = gelu_tanh(stored value);
//   workgroup z sums k in [z * kchunk, min(K, (z + 1) * kchunk)) into out + z * M * ldo,
// with A and B rounded to f16 and the products summed in f32.
//
// Included by matmul_coopmat.comp (COOPMAT_EMULATE 0: GL_NV_cooperative_matrix, rewritten to
// SPV_KHR_cooperative_matrix at pipeline creation on devices that only have that,
// src/vk/spv_coopmat.c) and by matmul_coopmat_emu.comp (COOPMAT_EMULATE 1: the fragment
// operations replaced by plain arithmetic on the same shared tiles, so that every other part of
// the kernel (staging, the rounding to f16, indexing, edges, the epilogue) runs and is tested on
// devices without cooperative matrices, lavapipe included).
//
// A workgroup computes a BM x BN block of R as SGM x SGN warp tiles, each FM x FN fragments of
// CM_M x CM_N (the device's cooperative-matrix shape M x N x K, specialization constants). Per
// step of BK = KSTEPS CM_K along k, all invocations stage A's BM x BK tile (row-major, m by k)
// and B's BK x BN tile (row-major, k by n) in shared memory as f16, reading each operand along
// its contiguous dimension; out-of-range elements stage as 0. Each subgroup then loads its
// fragments from the tiles and multiplies-adds them into f32 accumulator fragments. At the end the
// accumulators are stored to a BM x BN f32 tile in shared memory, and every invocation applies
// the epilogue to elements of it, skipping those outside M x N. The workgroup is any number of
// invocations (specialization constant 0) whose subgroups number at least NWARP / R: a subgroup
// takes warp tiles gl_SubgroupID, gl_SubgroupID + gl_NumSubgroups, ... (at most R of them).
//
// Range of f16 (largest 65504, smallest normal 6.1e-5, subnormals to 6e-8): an operand beyond
// 65504 becomes infinite, one under about 6e-8 becomes 0 (and under 6.1e-5 loses precision; some
// hardware flushes those to 0). bf16 operands lose nothing in between (f16 has the more mantissa
// bits). The ops send only forward products here (src/ops/matmul_coopmat.c): their operands are
// layernorm outputs, attention outputs, GELU outputs and the weights, all of order 1e-3 to 1e2
// in GPT-2, where f16 is exact for bf16 values. Gradients (dinp and dweight read dout, of order
// 1e-6 and below without a loss scale) would underflow: they stay on the other kernels.
// Accumulation is f32, so sums of many products do not overflow where fp32 would not.

layout(constant_id = 3) const uint CM_M = 16;
layout(constant_id = 4) const uint CM_N = 8;
layout(constant_id = 5) const uint CM_K = 16;
layout(constant_id = 6) const uint A_KCONTIG = 1;
layout(constant_id = 7) const uint B_KCONTIG = 0;
layout(constant_id = 8) const uint ACCUMULATE = 0;
layout(constant_id = 9) const uint GELU = 0;
// A_BF16 / B_BF16 = 1: a or b is packed bf16 (common.glsl). STORE_BF16, bits (as in
// matmul_tiled.comp): 1 (with GELU = 1): act is bf16; 2 (not with ACCUMULATE): out is bf16, the
// bias-added sum rounded once, and GELU reads the rounded value.
layout(constant_id = 10) const uint A_BF16 = 0;
layout(constant_id = 11) const uint B_BF16 = 0;
layout(constant_id = 12) const uint STORE_BF16 = 0;
const uint ACT_BF16 = STORE_BF16 & 1u, OUT_BF16 = STORE_BF16 >> 1;
// k-fragments per staged step (1 or 2: the host takes 2 where the tiles fit shared memory).
layout(constant_id = 13) const uint KSTEPS = 2;

// Fragments per warp tile along m and along n (the host takes the largest of 4 x 4, 2 x 4, 4 x 2,
// 2 x 2 whose tiles fit shared memory: more fragments a warp tile, fewer staged elements per
// tensor-core product).
layout(constant_id = 14) const uint FM = 2;
layout(constant_id = 15) const uint FN = 2;
#define SGM 2 // warp tiles per block along m
#define SGN 2 // and along n
#define NWARP (SGM * SGN)
// Most warp tiles one subgroup takes: 1 where the device's subgroups can only be of the size the
// host made the workgroup for (4 subgroups), 2 where a driver may make them twice as wide (the
// fragment registers of the second tile are held for nothing where it never does).
layout(constant_id = 16) const uint R = 2;
const uint BM = SGM * FM * CM_M, BN = SGN * FN * CM_N, BK = KSTEPS * CM_K;
// Row strides of the shared tiles in elements: fragment loads and stores need 16-byte aligned
// rows (CM_N and CM_K are multiples of 8), the padding spreads rows over banks.
const uint ASTR = BK + 8, BSTR = BN + 8, CSTR = BN + 4;

#define A_AT(i) (A_BF16 == 1 ? bf16_load(Uints(uvec2(p.a)), i) : p.a.v[i])
#define B_AT(i) (B_BF16 == 1 ? bf16_load(Uints(uvec2(p.b)), i) : p.b.v[i])

layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer InFloats
{
    float v[];
};

layout(buffer_reference, std430, buffer_reference_align = 4) restrict buffer OutFloats
{
    float v[];
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

// x rounded to the nearest f16 value (ties to even), as a float: the unit in the last place is
// 2^(e - 11) for |x| in [2^(e-1), 2^e) (11 significant bits), at least 2^-24 (subnormals);
// beyond 65504 infinite. Done here, exactly (ldexp and roundEven), so that the conversion to f16
// that follows is exact and the result does not depend on the device's rounding mode.
float f16_round(float x)
{
    int e;
    frexp(x, e);
    int q = max(e - 11, -24);
    float r = ldexp(roundEven(ldexp(x, -q)), q);
    return abs(r) > 65504.0 ? r * uintBitsToFloat(0x7F800000u) : r;
}

// x rounded to f16 as f16_round does, where narrow says that x came from a bf16 operand: a bf16
// value (8 significant bits) that is 0 or in f16's normal range [2^-14, 65504] is an f16 value
// already, so it is returned as it is, and only the rare others (f16's subnormals, beyond its
// range, NaN) take f16_round's arithmetic, which otherwise dominated the staging of the tiles.
float f16_exact(float x, bool narrow)
{
    float a = abs(x);
    if (narrow && (a == 0.0 || (a >= 6.103515625e-05 && a <= 65504.0)))
        return x;
    return f16_round(x);
}

#if COOPMAT_EMULATE
// The f16 tiles hold f16 values widened to f32: the same numbers, no 16-bit arithmetic needed.
#define HALF float
HALF to_half(float x, bool narrow)
{
    return f16_exact(x, narrow);
}
#else
#define HALF float16_t
HALF to_half(float x, bool narrow)
{
    return float16_t(f16_exact(x, narrow)); // exact: x is an f16 value
}
#endif

shared HALF As[BM * ASTR];
shared HALF Bs[BK * BSTR];
shared float Cs[BM * CSTR];

// A(r, k) (is_a) or B(k, r) as stored, 0 outside the product (r >= M or N, k >= kend).
float operand(bool is_a, uint r, uint k, uint kend)
{
    if (k >= kend || r >= (is_a ? p.M : p.N))
        return 0.0;
    uint ld = is_a ? p.lda : p.ldb, kc = is_a ? A_KCONTIG : B_KCONTIG;
    uint i = kc == 1 ? r * ld + k : k * ld + r;
    return is_a ? A_AT(i) : B_AT(i);
}

// PAIRS, bits: 1 (A), 2 (B): the operand is bf16, k-contiguous, with an even K and leading
// dimension (the host checks), so that elements k, k + 1 of a row (k even) share one 32-bit word
// and are staged from one load.
layout(constant_id = 17) const uint PAIRS = 0;

// Stage A's tile of the step at k0 (k < kend), neighbouring invocations reading neighbouring
// addresses of the operand's contiguous dimension.
void stage_a(uint tid, uint nthreads, uint m0, uint k0, uint kend)
{
    if ((PAIRS & 1u) != 0) { // (m, k), (m, k + 1), k even: one word
        Uints w = Uints(uvec2(p.a));
        for (uint e = tid; e < BM * BK / 2; e += nthreads) {
            uint mm = e / (BK / 2), kk = 2 * (e % (BK / 2)), m = m0 + mm, k = k0 + kk;
            uint v = m < p.M && k < kend ? w.v[(m * p.lda + k) >> 1] : 0u;
            As[mm * ASTR + kk] = to_half(uintBitsToFloat(v << 16), true);
            As[mm * ASTR + kk + 1] = to_half(uintBitsToFloat(v & 0xFFFF0000u), true);
        }
        return;
    }
    for (uint e = tid; e < BM * BK; e += nthreads) {
        uint mm = A_KCONTIG == 1 ? e / BK : e % BM, kk = A_KCONTIG == 1 ? e % BK : e / BM;
        As[mm * ASTR + kk] = to_half(operand(true, m0 + mm, k0 + kk, kend), A_BF16 == 1);
    }
}

// Stage B's tile of the step at k0, as stage_a.
void stage_b(uint tid, uint nthreads, uint n0, uint k0, uint kend)
{
    if ((PAIRS & 2u) != 0) { // (k, n), (k + 1, n), k even: one word
        Uints w = Uints(uvec2(p.b));
        for (uint e = tid; e < BN * BK / 2; e += nthreads) {
            uint nn = e / (BK / 2), kk = 2 * (e % (BK / 2)), n = n0 + nn, k = k0 + kk;
            uint v = n < p.N && k < kend ? w.v[(n * p.ldb + k) >> 1] : 0u;
            Bs[kk * BSTR + nn] = to_half(uintBitsToFloat(v << 16), true);
            Bs[(kk + 1) * BSTR + nn] = to_half(uintBitsToFloat(v & 0xFFFF0000u), true);
        }
        return;
    }
    for (uint e = tid; e < BN * BK; e += nthreads) {
        uint nn = B_KCONTIG == 1 ? e / BK : e % BN, kk = B_KCONTIG == 1 ? e % BK : e / BN;
        Bs[kk * BSTR + nn] = to_half(operand(false, n0 + nn, k0 + kk, kend), B_BF16 == 1);
    }
}

// Stage the tiles of the step at k0.
void stage(uint tid, uint nthreads, uint m0, uint n0, uint k0, uint kend)
{
    stage_a(tid, nthreads, m0, k0, kend);
    stage_b(tid, nthreads, n0, k0, kend);
}

#if COOPMAT_EMULATE
#define EPT 64 // most block elements per invocation (BM * BN / invocations; the host keeps to it)
#else
#define ACC fcoopmatNV<32, gl_ScopeSubgroup, CM_M, CM_N>
#define FRAG_A fcoopmatNV<16, gl_ScopeSubgroup, CM_M, CM_K>
#define FRAG_B fcoopmatNV<16, gl_ScopeSubgroup, CM_K, CM_N>

// This subgroup's warp tile r (r < R): false when it has no r-th tile, else true with the tile's
// first row wm and column wn in the block.
bool warp_tile(uint r, out uint wm, out uint wn)
{
    uint w = gl_SubgroupID + r * gl_NumSubgroups;
    wm = (w / SGN) * FM * CM_M;
    wn = (w % SGN) * FN * CM_N;
    return w < NWARP;
}
#endif

void main()
{
    const uint tid = gl_LocalInvocationID.x, nthreads = gl_WorkGroupSize.x;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    const uint kbeg = gl_WorkGroupID.z * p.kchunk, kend = min(p.K, kbeg + p.kchunk);
    const uint obase = gl_WorkGroupID.z * p.M * p.ldo; // this chunk's slice (0 when not split)
#if COOPMAT_EMULATE
    float acc[EPT];
    for (uint e = 0; e < EPT; e++)
        acc[e] = 0.0;
#else
    // Every loop over the fragment arrays is unrolled and has no break, so that each fragment is
    // named by constants: indexed by a loop counter, the array went to local memory on NVIDIA's
    // compiler (128 bytes a lane, the H200's pipeline statistics).
    ACC acc[R][FM][FN];
    [[unroll]] for (uint r = 0; r < R; r++)
        [[unroll]] for (uint i = 0; i < FM; i++)
            [[unroll]] for (uint j = 0; j < FN; j++)
                acc[r][i][j] = ACC(0.0);
#endif
    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
        stage(tid, nthreads, m0, n0, k0, kend);
        barrier();
#if COOPMAT_EMULATE
        for (uint e = 0; e < EPT; e++) {
            uint idx = tid + e * nthreads, mm = idx / BN, nn = idx % BN;
            if (idx >= BM * BN)
                break;
            float s = acc[e];
            for (uint kk = 0; kk < BK; kk++)
                s = fma(As[mm * ASTR + kk], Bs[kk * BSTR + nn], s);
            acc[e] = s;
        }
#else
        [[unroll]] for (uint r = 0; r < R; r++) {
            uint wm, wn;
            if (!warp_tile(r, wm, wn))
                continue;
            [[unroll]] for (uint kf = 0; kf < BK; kf += CM_K) {
                FRAG_A fa[FM];
                FRAG_B fb[FN];
                [[unroll]] for (uint i = 0; i < FM; i++)
                    coopMatLoadNV(fa[i], As, (wm + i * CM_M) * ASTR + kf, ASTR, false);
                [[unroll]] for (uint j = 0; j < FN; j++)
                    coopMatLoadNV(fb[j], Bs, kf * BSTR + wn + j * CM_N, BSTR, false);
                [[unroll]] for (uint i = 0; i < FM; i++)
                    [[unroll]] for (uint j = 0; j < FN; j++)
                        acc[r][i][j] = coopMatMulAddNV(fa[i], fb[j], acc[r][i][j]);
            }
        }
#endif
        barrier();
    }
#if COOPMAT_EMULATE
    for (uint e = 0; e < EPT; e++) {
        uint idx = tid + e * nthreads;
        if (idx >= BM * BN)
            break;
        Cs[(idx / BN) * CSTR + idx % BN] = acc[e];
    }
#else
    [[unroll]] for (uint r = 0; r < R; r++) {
        uint wm, wn;
        if (!warp_tile(r, wm, wn))
            continue;
        [[unroll]] for (uint i = 0; i < FM; i++)
            [[unroll]] for (uint j = 0; j < FN; j++)
                coopMatStoreNV(acc[r][i][j], Cs, (wm + i * CM_M) * CSTR + wn + j * CM_N, CSTR,
                               false);
    }
#endif
    barrier();
    // Each invocation finishes two adjacent columns of a row at a time, so that a bf16 output's
    // 32-bit word (elements 2w, 2w + 1) is written whole by one invocation with no atomics; a
    // word shared with another row (an odd leading dimension) or the last column of an odd N
    // goes through bf16_store_bits as before. BN is even (SGN FN CM_N, CM_N 8 or 16).
    for (uint idx = tid; idx < BM * BN / 2; idx += nthreads) {
        uint m = m0 + idx / (BN / 2), c = (idx % (BN / 2)) * 2, n = n0 + c;
        if (m >= p.M || n >= p.N)
            continue;
        bool two = n + 1 < p.N;
        uint o = obase + m * p.ldo + n;
        float r0 = Cs[(idx / (BN / 2)) * CSTR + c], r1 = Cs[(idx / (BN / 2)) * CSTR + c + 1];
        if (ACCUMULATE == 1) {
            r0 += p.out_.v[o];
            r1 += two ? p.out_.v[o + 1] : 0.0;
        } else if (p.has_bias != 0) {
            r0 += p.bias.v[n];
            r1 += two ? p.bias.v[n + 1] : 0.0;
        }
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
            continue;
        uint a = m * p.ldo + n;
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
}
