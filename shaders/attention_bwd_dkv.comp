#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
// attention_bwd_dkv: the key and value gradients of the flash backward, one block of keys at a
// time over the tiles of queries that see it, recomputing the probabilities from lse:
//   P[t,t2]  = exp(scale q[t] . k[t2] - lse[t])              (t >= t2; 0 otherwise)
//   dS[t,t2] = P[t,t2] (dout[t] . v[t2] - delta[t])
//   dv[t2]  += sum_{t >= t2} P[t,t2] dout[t]      dk[t2] += scale sum_{t >= t2} dS[t,t2] q[t]
// (both in ascending t). Grouped-query layout as attention_fwd's: qkv and dqkv (B,T,LD) = [q (NH
// heads) | k (NKV) | v (NKV)]; dout (B,T,OC); lse and delta (B,NH,T) in; dqkv: its k and v parts
// accumulated. Workgroup (x: block of keys, y: key/value head g, z: batch); the G query heads of
// the group (g G .. g G + G - 1) pass in ascending order, each over its query tiles, all summed
// into the same registers: dk and dv of a kv head are the sum over its group in a fixed order
// (G = 1: the plain multi-head sum). The query tiles start at the block's first key (queries
// before it see none of its keys). Every sum runs in a
// fixed order and no two workgroups write the same element: deterministic, no atomics. FORM 0's
// loops over a row's channels index register arrays and are unrolled ([[unroll]]).
//
// FORM 0 (GPUs): one invocation per key (the workgroup's WG keys), its dk and dv rows in
// registers and its k and v rows in shared memory; each tile of BQ queries (q, dout, lse, delta)
// is staged in shared memory and read as broadcasts. FORM 1 (CPU devices): one subgroup of S
// lanes owning S keys (uniform); lane x holds queries x + S*i of each tile of BQ for P and dS,
// and channels x + S*c of dk and dv; keys and P, dS pass between lanes by subgroup broadcasts.
layout(constant_id = 3) const uint FORM = 0;
layout(constant_id = 4) const uint HS = 64; // head size (= p.hs)
layout(constant_id = 5) const uint BQ = 16; // queries per tile (FORM 1: a multiple of S)
// QKV_BF16 = 1 (mixed precision): qkv is bf16 (common.glsl), widened on load; the sums and
// dqkv stay fp32.
layout(constant_id = 6) const uint QKV_BF16 = 0;
#define QKV(i) (QKV_BF16 == 1 ? bf16_load(Uints(uvec2(p.qkv)), i) : p.qkv.v[i])

layout(push_constant) uniform Push {
    Floats dqkv;  // (B,T,LD) accumulated (k and v parts)
    Floats dout;  // (B,T,OC) in
    Floats qkv;   // (B,T,LD) in
    Floats lse;   // (B,NH,T) in
    Floats delta; // (B,NH,T) in
    uint T, NH, hs, G; // G: query heads per key/value head
    uint LD, KOFF, VOFF, OC;
    float scale;
} p;

const uint WG = gl_WorkGroupSize.x;
const uint HSP = HS + 1; // own rows padded so that neighbouring invocations use other banks
const uint OWN = FORM == 0 ? WG * HSP : 1;
const uint TILE = FORM == 0 ? BQ * HS : 1;
const uint STATS = FORM == 0 ? BQ : 1;
shared float kown[OWN];
shared float vown[OWN];
shared float qs[TILE];
shared float ds[TILE];
shared float lses[STATS];
shared float deltas[STATS];

void dkv_rows()
{
    const uint tid = gl_LocalInvocationID.x, T = p.T, C3 = p.LD;
    const uint g = gl_WorkGroupID.y, b = gl_WorkGroupID.z, k0 = gl_WorkGroupID.x * WG;
    const uint key = k0 + tid;
    const uint kvb = b * T * C3 + g * HS;
    const uint kbase = kvb + p.KOFF, vbase = kvb + p.VOFF;
    [[dont_unroll]] for (uint i = tid; i < WG * HS; i += WG) {
        uint row = min(k0 + i / HS, T - 1) * C3 + i % HS;
        kown[i / HS * HSP + i % HS] = QKV(kbase + row);
        vown[i / HS * HSP + i % HS] = QKV(vbase + row);
    }
    float dk[HS], dv[HS];
    [[unroll]] for (uint c = 0; c < HS; c++) {
        dk[c] = 0.0;
        dv[c] = 0.0;
    }
    const uint mine = tid * HSP;
    for (uint h = g * p.G; h < (g + 1) * p.G; h++) {
        const uint base = b * T * C3 + h * HS;
        const uint dbase = b * T * p.OC + h * HS, sbase = (b * p.NH + h) * T;
        for (uint t0 = k0; t0 < T; t0 += BQ) {
            barrier(); // the previous tile's readers are done (the first time: kown, vown written)
            [[dont_unroll]] for (uint i = tid; i < BQ * HS; i += WG) {
                uint t = min(t0 + i / HS, T - 1), c = i % HS;
                qs[i] = QKV(base + t * C3 + c);
                ds[i] = p.dout.v[dbase + t * p.OC + c];
            }
            for (uint i = tid; i < BQ; i += WG) {
                uint t = min(t0 + i, T - 1);
                lses[i] = p.lse.v[sbase + t];
                deltas[i] = p.delta.v[sbase + t];
            }
            barrier();
            [[dont_unroll]] for (uint i = 0; i < BQ; i++) {
                uint t = t0 + i;
                if (t >= T)
                    break;
                if (t < key)
                    continue;
                float s = 0.0, dp = 0.0;
                [[unroll]] for (uint c = 0; c < HS; c++) {
                    s = fma(kown[mine + c], qs[i * HS + c], s);
                    dp = fma(vown[mine + c], ds[i * HS + c], dp);
                }
                float pr = exp(s * p.scale - lses[i]);
                float dsc = pr * (dp - deltas[i]);
                [[unroll]] for (uint c = 0; c < HS; c++) {
                    dv[c] = fma(pr, ds[i * HS + c], dv[c]);
                    dk[c] = fma(dsc, qs[i * HS + c], dk[c]);
                }
            }
        }
    }
    if (key >= T)
        return;
    const uint orow = key * C3;
    [[unroll]] for (uint c = 0; c < HS; c++) {
        p.dqkv.v[kbase + orow + c] += p.scale * dk[c];
        p.dqkv.v[vbase + orow + c] += dv[c];
    }
}

const uint S = WG;
const uint RQ = FORM == 1 ? BQ / S : 1; // queries per lane and tile
const uint DC = (HS + S - 1) / S;

void dkv_subgroup()
{
    const uint lane = gl_SubgroupInvocationID, T = p.T, C3 = p.LD;
    const uint g = gl_WorkGroupID.y, b = gl_WorkGroupID.z, k0 = gl_WorkGroupID.x * S;
    const uint kvb = b * T * C3 + g * HS;
    const uint kbase = kvb + p.KOFF, k2v = p.VOFF - p.KOFF; // a key's value: k2v further
    const uint myk = kbase + min(k0 + lane, T - 1) * C3;     // lane's key row (key k0 + lane)
    uint ch[DC];
    for (uint c = 0; c < DC; c++)
        ch[c] = min(lane + S * c, HS - 1);
    float dk[S][DC], dv[S][DC];
    for (uint j = 0; j < S; j++)
        for (uint c = 0; c < DC; c++) {
            dk[j][c] = 0.0;
            dv[j][c] = 0.0;
        }
    for (uint h = g * p.G; h < (g + 1) * p.G; h++) {
        const uint base = b * T * C3 + h * HS;
        const uint dbase = b * T * p.OC + h * HS, sbase = (b * p.NH + h) * T;
        for (uint t0 = k0; t0 < T; t0 += BQ) {
            float s[S][RQ], dp[S][RQ], lse[RQ], delta[RQ];
            uint qrow[RQ], drow[RQ];
            for (uint i = 0; i < RQ; i++) {
                uint t = min(t0 + lane + S * i, T - 1);
                qrow[i] = base + t * C3;
                drow[i] = dbase + t * p.OC;
                lse[i] = p.lse.v[sbase + t];
                delta[i] = p.delta.v[sbase + t];
            }
            for (uint j = 0; j < S; j++)
                for (uint i = 0; i < RQ; i++) {
                    s[j][i] = 0.0;
                    dp[j][i] = 0.0;
                }
            for (uint c = 0; c < p.hs; c++) {
                float km = QKV(myk + c), vm = QKV(myk + k2v + c), qv[RQ], dv_[RQ];
                for (uint i = 0; i < RQ; i++) {
                    qv[i] = QKV(qrow[i] + c);
                    dv_[i] = p.dout.v[drow[i] + c];
                }
                for (uint j = 0; j < S; j++) {
                    float kj = subgroupBroadcast(km, j), vj = subgroupBroadcast(vm, j);
                    for (uint i = 0; i < RQ; i++) {
                        s[j][i] = fma(kj, qv[i], s[j][i]);
                        dp[j][i] = fma(vj, dv_[i], dp[j][i]);
                    }
                }
            }
            // P into s, dS into dp; queries past T or before the key get 0
            for (uint j = 0; j < S; j++)
                for (uint i = 0; i < RQ; i++) {
                    uint t = t0 + lane + S * i;
                    bool seen = t < T && t >= k0 + j;
                    float pr = seen ? exp(s[j][i] * p.scale - lse[i]) : 0.0;
                    s[j][i] = pr;
                    dp[j][i] = seen ? pr * (dp[j][i] - delta[i]) : 0.0;
                }
            // dv += P^T dout, dk += dS^T q, query by query in a fixed order (t0 + x + S*i, i inner;
            // query t0 + x + S*i is lane x's)
            [[dont_unroll]] for (uint x = 0; x < S; x++)
                for (uint i = 0; i < RQ; i++) {
                    const uint t = min(t0 + x + S * i, T - 1);
                    float dov[DC], qv[DC];
                    for (uint c = 0; c < DC; c++) {
                        dov[c] = p.dout.v[dbase + t * p.OC + ch[c]];
                        qv[c] = QKV(base + t * C3 + ch[c]);
                    }
                    for (uint j = 0; j < S; j++) {
                        float pj = subgroupBroadcast(s[j][i], x);
                        float dsj = subgroupBroadcast(dp[j][i], x);
                        for (uint c = 0; c < DC; c++) {
                            dv[j][c] = fma(pj, dov[c], dv[j][c]);
                            dk[j][c] = fma(dsj, qv[c], dk[j][c]);
                        }
                    }
                }
        }
    }
    for (uint j = 0; j < S; j++) {
        const uint key = k0 + j;
        if (key >= T)
            break;
        const uint orow = kbase + key * C3;
        for (uint c = 0; c < DC; c++)
            if (lane + S * c < HS) {
                p.dqkv.v[orow + lane + S * c] += p.scale * dk[j][c];
                p.dqkv.v[orow + k2v + lane + S * c] += dv[j][c];
            }
    }
}

void main()
{
    if (FORM == 0)
        dkv_rows();
    else
        dkv_subgroup();
}
