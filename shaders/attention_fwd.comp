#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
// attention_fwd: causal self-attention, flash form (nothing of size T x T is stored):
//   out[b,t,h] = sum_{t2 <= t} softmax_t2(s[t,t2]) v[b,t2,h],   s[t,t2] = scale q[b,t,h] . k[b,t2,h]
//   lse[b,h,t] = log sum_{t2 <= t} exp(s[t,t2])   (the backward pass recomputes the softmax from it)
// Grouped-query: NH query heads, NKV = NH / G key/value heads; query head h reads kv head h / G.
// qkv (B,T,LD) with LD = (NH + 2 NKV) HS = [q (NH heads) | k (NKV) | v (NKV)], k at channel
// KOFF = NH HS of a row and v at VOFF = KOFF + NKV HS (GPT-2: G = 1, LD = 3C, KOFF = C,
// VOFF = 2C); out (B,T,OC) with OC = NH HS; lse (B,NH,T). Workgroup (x: block of query rows, y: head, z: batch). The keys pass in tiles
// of BK, only those some row of the block can see (tiles wholly above the diagonal are skipped),
// with the online softmax: per row a running maximum m and sum l of exp(s - m), and the output
// rescaled by exp(m_old - m_new) whenever the maximum grows; at the end out = o / l and
// lse = m + log(l). Every sum runs in a fixed order (no atomics): deterministic. Loops over keys
// are not unrolled (an unrolled tile makes lavapipe's compiler take minutes); those over a row's
// channels index register arrays and are, explicitly ([[unroll]]: left to the compiler, an
// array indexed by a loop counter it did not unroll goes to slow memory).
//
// FORM 0 (GPUs): one invocation per query row (the workgroup's WG rows), its q and its output row
// in registers; each tile of keys and values is staged in shared memory, read by all
// invocations at the same address (a broadcast). Nothing is exchanged between invocations; the
// softmax runs key by key.
// FORM 1 (CPU devices such as lavapipe, where every load is a gather and barriers are dear): the
// workgroup is one subgroup of S lanes and owns S query rows, uniform across it; lane x holds
// the scores of keys x + S*j of each tile (j < BK/S) and channels x + S*c of the output
// (c < ceil(HS/S)). Rows of q, and the probabilities for the product with v, pass between lanes
// by subgroup broadcasts: one load per channel serves S rows. No shared memory, no barrier.
layout(constant_id = 3) const uint FORM = 0; // see above
layout(constant_id = 4) const uint HS = 64;  // head size (= p.hs)
layout(constant_id = 5) const uint BK = 32;  // keys per tile (FORM 1: a multiple of S)
// ACT_BF16 = 1 (mixed precision): qkv and out are bf16 (common.glsl), HS even; qkv is widened
// on load, every sum stays fp32 and out is rounded once when stored (FORM 0: pairs of channels
// as whole words; FORM 1: each lane its own channels, by bf16_store_half).
layout(constant_id = 6) const uint ACT_BF16 = 0;
#define QKV(i) (ACT_BF16 == 1 ? bf16_load(Uints(uvec2(p.qkv)), i) : p.qkv.v[i])

layout(push_constant) uniform Push {
    Floats out_; // (B,T,OC) out
    Floats lse;  // (B,NH,T) out
    Floats qkv;  // (B,T,LD) in
    uint T, NH, hs, G; // G: query heads per key/value head
    uint LD, KOFF, VOFF, OC;
    float scale;
} p;

const uint WG = gl_WorkGroupSize.x;
const uint KV_TILE = FORM == 0 ? BK * HS : 1;
shared float ks[KV_TILE];
shared float vs[KV_TILE];

const float NEG_BIG = -1.0e30; // "no score yet": finite, so exp(NEG_BIG - m) is 0, never NaN

void fwd_rows()
{
    const uint tid = gl_LocalInvocationID.x, T = p.T, C3 = p.LD;
    const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * WG;
    const uint t = q0 + tid;
    const uint base = b * T * C3 + h * HS;                  // q of (b, 0, h)
    const uint kvb = b * T * C3 + (h / p.G) * HS;           // its kv head's channel 0, row 0
    const uint kbase = kvb + p.KOFF, vbase = kvb + p.VOFF; // k and v of (b, 0, h / G)
    float q[HS], o[HS];
    const uint qrow = base + min(t, T - 1) * C3;
    [[unroll]] for (uint c = 0; c < HS; c++) {
        q[c] = QKV(qrow + c);
        o[c] = 0.0;
    }
    float m = NEG_BIG, l = 0.0;
    const uint kend = min(T, q0 + WG); // keys any row of the block can see
    for (uint k0 = 0; k0 < kend; k0 += BK) {
        barrier(); // the previous tile's readers are done
        [[dont_unroll]] for (uint i = tid; i < BK * HS; i += WG) {
            uint row = min(k0 + i / HS, T - 1) * C3 + i % HS;
            ks[i] = QKV(kbase + row);
            vs[i] = QKV(vbase + row);
        }
        barrier();
        // key by key: the running maximum grows (and the sums are rescaled) only when a score
        // exceeds it
        [[dont_unroll]] for (uint j = 0; j < BK; j++) {
            if (k0 + j > t)
                break;
            float a = 0.0;
            [[unroll]] for (uint c = 0; c < HS; c++)
                a = fma(q[c], ks[j * HS + c], a);
            a *= p.scale;
            if (a > m) {
                float alpha = exp(m - a);
                l *= alpha;
                [[unroll]] for (uint c = 0; c < HS; c++)
                    o[c] *= alpha;
                m = a;
            }
            float pj = exp(a - m);
            l += pj;
            [[unroll]] for (uint c = 0; c < HS; c++)
                o[c] = fma(pj, vs[j * HS + c], o[c]);
        }
    }
    if (t >= T)
        return;
    const float inv = 1.0 / l; // l >= 1: the row's maximum contributes exp(0)
    const uint orow = (b * T + t) * p.OC + h * HS;
    for (uint c = 0; ACT_BF16 == 1 && c < HS; c += 2)
        Uints(uvec2(p.out_)).v[(orow + c) / 2] = bf16_pack2(o[c] * inv, o[c + 1] * inv);
    for (uint c = 0; ACT_BF16 == 0 && c < HS; c++)
        p.out_.v[orow + c] = o[c] * inv;
    p.lse.v[(b * p.NH + h) * T + t] = m + log(l);
}

const uint S = WG;                      // FORM 1: lanes = rows per workgroup
const uint RK = FORM == 1 ? BK / S : 1; // keys per lane and tile
const uint DC = (HS + S - 1) / S;       // output channels per lane

void fwd_subgroup()
{
    const uint lane = gl_SubgroupInvocationID, T = p.T, C3 = p.LD;
    const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * S;
    const uint base = b * T * C3 + h * HS;
    const uint kvb = b * T * C3 + (h / p.G) * HS;
    const uint kbase = kvb + p.KOFF, vbase = kvb + p.VOFF;
    const uint myq = base + min(q0 + lane, T - 1) * C3; // lane's row of q (row q0 + lane)
    uint ch[DC];                                        // lane's output channels, clamped
    for (uint c = 0; c < DC; c++)
        ch[c] = min(lane + S * c, HS - 1);
    float o[S][DC], m[S], l[S]; // l: the sum over this lane's keys only
    for (uint i = 0; i < S; i++) {
        m[i] = NEG_BIG;
        l[i] = 0.0;
        for (uint c = 0; c < DC; c++)
            o[i][c] = 0.0;
    }
    const uint kend = min(T, q0 + S);
    for (uint k0 = 0; k0 < kend; k0 += BK) {
        float s[S][RK];
        uint krow[RK];
        for (uint j = 0; j < RK; j++)
            krow[j] = kbase + min(k0 + lane + S * j, T - 1) * C3;
        for (uint i = 0; i < S; i++)
            for (uint j = 0; j < RK; j++)
                s[i][j] = 0.0;
        for (uint c = 0; c < p.hs; c++) {
            float mine = QKV(myq + c), kv[RK];
            for (uint j = 0; j < RK; j++)
                kv[j] = QKV(krow[j] + c);
            for (uint i = 0; i < S; i++) {
                float qi = subgroupBroadcast(mine, i);
                for (uint j = 0; j < RK; j++)
                    s[i][j] = fma(qi, kv[j], s[i][j]);
            }
        }
        // per row: the tile's maximum over all lanes, the rescaling, the probabilities
        for (uint i = 0; i < S; i++) {
            const uint t = q0 + i;
            float mx = NEG_BIG;
            for (uint j = 0; j < RK; j++) {
                s[i][j] = k0 + lane + S * j <= t ? s[i][j] * p.scale : NEG_BIG;
                mx = max(mx, s[i][j]);
            }
            float mt = m[i];
            for (uint x = 0; x < S; x++)
                mt = max(mt, subgroupBroadcast(mx, x));
            float alpha = exp(m[i] - mt);
            m[i] = mt;
            float sum = l[i] * alpha;
            for (uint c = 0; c < DC; c++)
                o[i][c] *= alpha;
            for (uint j = 0; j < RK; j++) {
                float pj = k0 + lane + S * j <= t ? exp(s[i][j] - mt) : 0.0;
                s[i][j] = pj;
                sum += pj;
            }
            l[i] = sum;
        }
        // o += P v, key by key in a fixed order (k0 + x + S*j, j inner); the probabilities of key
        // k0 + x + S*j are lane x's. The loop over x is not unrolled, the one over j is, so
        // the register arrays keep constant indices.
        [[dont_unroll]] for (uint x = 0; x < S; x++)
            for (uint j = 0; j < RK; j++) {
                const uint vrow = vbase + min(k0 + x + S * j, T - 1) * C3;
                float vv[DC];
                for (uint c = 0; c < DC; c++)
                    vv[c] = QKV(vrow + ch[c]);
                for (uint i = 0; i < S; i++) {
                    float pi = subgroupBroadcast(s[i][j], x);
                    for (uint c = 0; c < DC; c++)
                        o[i][c] = fma(pi, vv[c], o[i][c]);
                }
            }
    }
    for (uint i = 0; i < S; i++) {
        const uint t = q0 + i;
        if (t >= T)
            break;
        float sum = 0.0; // the lanes' partial sums, in lane order
        for (uint x = 0; x < S; x++)
            sum += subgroupBroadcast(l[i], x);
        const float inv = 1.0 / sum;
        const uint orow = (b * T + t) * p.OC + h * HS;
        for (uint c = 0; c < DC; c++)
            if (lane + S * c < HS && ACT_BF16 == 1)
                bf16_store_half(Uints(uvec2(p.out_)), orow + lane + S * c, o[i][c] * inv);
            else if (lane + S * c < HS)
                p.out_.v[orow + lane + S * c] = o[i][c] * inv;
        if (lane == 0)
            p.lse.v[(b * p.NH + h) * T + t] = m[i] + log(sum);
    }
}

void main()
{
    if (FORM == 0)
        fwd_rows();
    else
        fwd_subgroup();
}
