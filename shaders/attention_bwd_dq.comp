#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
// attention_bwd_dq: the query gradient of the flash backward, one block of query rows at a time
// over the key tiles it sees, recomputing the probabilities from the forward pass's lse:
//   P[t,t2]  = exp(scale q[t] . k[t2] - lse[t])              (t2 <= t; 0 above the diagonal)
//   dS[t,t2] = P[t,t2] (dout[t] . v[t2] - delta[t])
//   dq[t]   += scale sum_{t2 <= t} dS[t,t2] k[t2]            (in ascending t2)
// Grouped-query layout as attention_fwd's: qkv and dqkv (B,T,LD) = [q (NH heads) | k (NKV) |
// v (NKV)], query head h reads kv head h / G; dout (B,T,OC); lse and delta (B,NH,T) in; dqkv: its
// q part accumulated. Workgroup (x: block of query rows, y: query head, z: batch); tiles of BK keys, those wholly above the
// diagonal skipped. Every row's sums run in a fixed order and no two workgroups write the same
// element: deterministic. The key and value gradients are attention_bwd_dkv's.
//
// FORM 0 (GPUs): one invocation per query row, its q, dout and dq rows in registers, each tile of
// keys and values staged in shared memory (read as broadcasts); its loops over a row's channels
// index those registers and are unrolled ([[unroll]]). FORM 1 (CPU devices): one
// subgroup of S lanes owning S rows (uniform); lane x holds keys x + S*j of each tile for the
// scores and channels x + S*c of dq; rows and dS pass between lanes by subgroup broadcasts, as in
// attention_fwd.
layout(constant_id = 3) const uint FORM = 0;
layout(constant_id = 4) const uint HS = 64; // head size (= p.hs)
layout(constant_id = 5) const uint BK = 32; // keys per tile (FORM 1: a multiple of S)
// QKV_BF16 = 1 (mixed precision): qkv is bf16 (common.glsl), widened on load; the sums and
// dqkv stay fp32.
layout(constant_id = 6) const uint QKV_BF16 = 0;
#define QKV(i) (QKV_BF16 == 1 ? bf16_load(Uints(uvec2(p.qkv)), i) : p.qkv.v[i])

layout(push_constant) uniform Push {
    Floats dqkv;  // (B,T,LD) accumulated (q part)
    Floats dout;  // (B,T,OC) in
    Floats qkv;   // (B,T,LD) in
    Floats lse;   // (B,NH,T) in
    Floats delta; // (B,NH,T) in
    uint T, NH, hs, G; // G: query heads per key/value head
    uint LD, KOFF, VOFF, OC;
    float scale;
} p;

const uint WG = gl_WorkGroupSize.x;
const uint KV_TILE = FORM == 0 ? BK * HS : 1;
shared float ks[KV_TILE];
shared float vs[KV_TILE];

void dq_rows()
{
    const uint tid = gl_LocalInvocationID.x, T = p.T, C3 = p.LD;
    const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * WG;
    const uint t = q0 + tid, tc = min(t, T - 1);
    const uint base = b * T * C3 + h * HS;
    const uint kvb = b * T * C3 + (h / p.G) * HS;
    const uint kbase = kvb + p.KOFF, vbase = kvb + p.VOFF;
    const uint drow = (b * T + tc) * p.OC + h * HS;
    const uint stat = (b * p.NH + h) * T + tc;
    const float lse = p.lse.v[stat], delta = p.delta.v[stat];
    float q[HS], d[HS], dq[HS];
    [[unroll]] for (uint c = 0; c < HS; c++) {
        q[c] = QKV(base + tc * C3 + c);
        d[c] = p.dout.v[drow + c];
        dq[c] = 0.0;
    }
    const uint kend = min(T, q0 + WG);
    for (uint k0 = 0; k0 < kend; k0 += BK) {
        barrier();
        [[dont_unroll]] for (uint i = tid; i < BK * HS; i += WG) {
            uint row = min(k0 + i / HS, T - 1) * C3 + i % HS;
            ks[i] = QKV(kbase + row);
            vs[i] = QKV(vbase + row);
        }
        barrier();
        [[dont_unroll]] for (uint j = 0; j < BK; j++) {
            if (k0 + j > t)
                break;
            float s = 0.0, dp = 0.0;
            [[unroll]] for (uint c = 0; c < HS; c++) {
                s = fma(q[c], ks[j * HS + c], s);
                dp = fma(d[c], vs[j * HS + c], dp);
            }
            float ds = exp(s * p.scale - lse) * (dp - delta);
            [[unroll]] for (uint c = 0; c < HS; c++)
                dq[c] = fma(ds, ks[j * HS + c], dq[c]);
        }
    }
    if (t >= T)
        return;
    const uint orow = base + t * C3;
    [[unroll]] for (uint c = 0; c < HS; c++)
        p.dqkv.v[orow + c] += p.scale * dq[c];
}

const uint S = WG;
const uint RK = FORM == 1 ? BK / S : 1;
const uint DC = (HS + S - 1) / S;

void dq_subgroup()
{
    const uint lane = gl_SubgroupInvocationID, T = p.T, C3 = p.LD;
    const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, q0 = gl_WorkGroupID.x * S;
    const uint base = b * T * C3 + h * HS;
    const uint kvb = b * T * C3 + (h / p.G) * HS;
    const uint kbase = kvb + p.KOFF, k2v = p.VOFF - p.KOFF; // a key's value: k2v further
    const uint mine = min(q0 + lane, T - 1);
    const uint myq = base + mine * C3, myd = (b * T + mine) * p.OC + h * HS;
    const uint stat = (b * p.NH + h) * T + mine;
    const float my_lse = p.lse.v[stat], my_delta = p.delta.v[stat];
    float lse[S], delta[S]; // of rows q0 + i
    for (uint i = 0; i < S; i++) {
        lse[i] = subgroupBroadcast(my_lse, i);
        delta[i] = subgroupBroadcast(my_delta, i);
    }
    uint ch[DC];
    for (uint c = 0; c < DC; c++)
        ch[c] = min(lane + S * c, HS - 1);
    float dq[S][DC];
    for (uint i = 0; i < S; i++)
        for (uint c = 0; c < DC; c++)
            dq[i][c] = 0.0;
    const uint kend = min(T, q0 + S);
    for (uint k0 = 0; k0 < kend; k0 += BK) {
        float s[S][RK], dp[S][RK];
        uint krow[RK];
        for (uint j = 0; j < RK; j++)
            krow[j] = kbase + min(k0 + lane + S * j, T - 1) * C3;
        for (uint i = 0; i < S; i++)
            for (uint j = 0; j < RK; j++) {
                s[i][j] = 0.0;
                dp[i][j] = 0.0;
            }
        for (uint c = 0; c < p.hs; c++) {
            float qm = QKV(myq + c), dm = p.dout.v[myd + c], kv[RK], vv[RK];
            for (uint j = 0; j < RK; j++) {
                kv[j] = QKV(krow[j] + c);
                vv[j] = QKV(krow[j] + k2v + c);
            }
            for (uint i = 0; i < S; i++) {
                float qi = subgroupBroadcast(qm, i), di = subgroupBroadcast(dm, i);
                for (uint j = 0; j < RK; j++) {
                    s[i][j] = fma(qi, kv[j], s[i][j]);
                    dp[i][j] = fma(di, vv[j], dp[i][j]);
                }
            }
        }
        for (uint i = 0; i < S; i++)
            for (uint j = 0; j < RK; j++)
                s[i][j] = k0 + lane + S * j <= q0 + i
                              ? exp(s[i][j] * p.scale - lse[i]) * (dp[i][j] - delta[i])
                              : 0.0;
        // dq += dS k, key by key in a fixed order (k0 + x + S*j, j inner); key k0 + x + S*j's dS
        // values are lane x's
        [[dont_unroll]] for (uint x = 0; x < S; x++)
            for (uint j = 0; j < RK; j++) {
                const uint krow2 = kbase + min(k0 + x + S * j, T - 1) * C3;
                float kv[DC];
                for (uint c = 0; c < DC; c++)
                    kv[c] = QKV(krow2 + ch[c]);
                for (uint i = 0; i < S; i++) {
                    float ds = subgroupBroadcast(s[i][j], x);
                    for (uint c = 0; c < DC; c++)
                        dq[i][c] = fma(ds, kv[c], dq[i][c]);
                }
            }
    }
    for (uint i = 0; i < S; i++) {
        const uint t = q0 + i;
        if (t >= T)
            break;
        const uint orow = base + t * C3;
        for (uint c = 0; c < DC; c++)
            if (lane + S * c < HS)
                p.dqkv.v[orow + lane + S * c] += p.scale * dq[i][c];
    }
}

void main()
{
    if (FORM == 0)
        dq_rows();
    else
        dq_subgroup();
}
