#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// attention_fwd: causal attention probabilities, one head at a time.
//   att[b,h,t,t2] = softmax_t2(scale * q[b,t,h] . k[b,t2,h]) for t2 <= t, 0 for t2 > t
// qkv (B,T,3C) = [q | k | v], head h using channels h*hs..(h+1)*hs of each part; att (B,NH,T,T).
// The product with v is attention_fwd_pv.
//
// Workgroup (x: block of BQ query rows, y: head, z: batch); tiles of BK keys pass one after the
// other. Each invocation owns RQ rows (ly + i*LY) x RK keys (lx + j*LX) of every tile, writes
// their scaled scores to att and keeps a running (max, sum of exp) per row; the LX partial pairs
// of a row are merged through shared memory in a fixed order, then each invocation rewrites the
// entries it wrote itself (so no memory visibility between invocations is needed) as
// probabilities, and writes the zeros above the diagonal. No atomics: deterministic.
// HC > 0 (GPUs): the block's queries and each key tile go through shared memory, HC channels at a
// time (the queries stay resident when hs <= HC). HC = 0 (CPU drivers such as lavapipe, where
// barriers are dear): q and k are read straight from memory, with LY = 1 the q loads are uniform.
layout(constant_id = 3) const uint RQ = 4;  // query rows per invocation
layout(constant_id = 4) const uint RK = 4;  // keys per invocation and tile
layout(constant_id = 5) const uint HC = 64; // channels per shared-memory chunk, 0 = none

layout(push_constant) uniform Push {
    Floats att; // (B,NH,T,T) out
    Floats qkv; // (B,T,3C) in
    uint T, C, NH, hs;
    float scale;
} p;

const uint LX = gl_WorkGroupSize.x;
const uint LY = gl_WorkGroupSize.y;
const uint WG = LX * LY;
const uint BQ = LY * RQ;
const uint BK = LX * RK;
const uint HCS = HC > 0 ? HC : 1;
const uint KSTRIDE = BK + 1; // ks[c * KSTRIDE + key]: padded so the transposing stores spread

shared float qs[BQ * HCS];
shared float ks[HCS * KSTRIDE];
shared float red_m[BQ * LX];
shared float red_l[BQ * LX];

const float NEG_BIG = -1.0e30; // "no score yet": finite, so exp(NEG_BIG - m) is 0, never NaN

float acc[RQ][RK];

// acc = q[rows] . k[keys of the tile at k0], read straight from memory
void dots_direct(uint qrow, uint krow, uint q0, uint k0)
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint qo[RQ], ko[RK];
    for (uint i = 0; i < RQ; i++) // clamped: in bounds, results not used
        qo[i] = qrow + min(q0 + ly + i * LY, p.T - 1) * 3 * p.C;
    for (uint j = 0; j < RK; j++)
        ko[j] = krow + min(k0 + lx + j * LX, p.T - 1) * 3 * p.C;
    for (uint c = 0; c < p.hs; c++) {
        float qv[RQ], kv[RK];
        for (uint i = 0; i < RQ; i++)
            qv[i] = p.qkv.v[qo[i] + c];
        for (uint j = 0; j < RK; j++)
            kv[j] = p.qkv.v[ko[j] + c];
        for (uint i = 0; i < RQ; i++)
            for (uint j = 0; j < RK; j++)
                acc[i][j] = fma(qv[i], kv[j], acc[i][j]);
    }
}

// the block's queries, channels c0..c0+HC, into qs (HCS = HC here)
void load_q(uint qrow, uint q0, uint c0)
{
    for (uint idx = gl_LocalInvocationIndex; idx < BQ * HCS; idx += WG) {
        uint r = idx / HCS, c = idx % HCS;
        uint t = q0 + r, ch = c0 + c;
        qs[idx] = (t < p.T && ch < p.hs) ? p.qkv.v[qrow + t * 3 * p.C + ch] : 0.0;
    }
}

// the same through shared memory, HC channels at a time; the queries are already there when
// q_resident
void dots_tiled(uint qrow, uint krow, uint q0, uint k0, bool q_resident)
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    for (uint c0 = 0; c0 < p.hs; c0 += HCS) {
        barrier(); // previous readers of ks (and qs) are done
        if (!q_resident)
            load_q(qrow, q0, c0);
        for (uint idx = gl_LocalInvocationIndex; idx < BK * HCS; idx += WG) {
            uint r = idx / HCS, c = idx % HCS;
            uint t = k0 + r, ch = c0 + c;
            ks[c * KSTRIDE + r] = (t < p.T && ch < p.hs) ? p.qkv.v[krow + t * 3 * p.C + ch] : 0.0;
        }
        barrier();
        for (uint c = 0; c < HCS; c++) {
            float qv[RQ], kv[RK];
            for (uint i = 0; i < RQ; i++)
                qv[i] = qs[(ly + i * LY) * HCS + c];
            for (uint j = 0; j < RK; j++)
                kv[j] = ks[c * KSTRIDE + lx + j * LX];
            for (uint i = 0; i < RQ; i++)
                for (uint j = 0; j < RK; j++)
                    acc[i][j] = fma(qv[i], kv[j], acc[i][j]);
        }
    }
}

void main()
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    const uint T = p.T, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint q0 = gl_WorkGroupID.x * BQ;
    const uint qrow = b * T * 3 * p.C + h * p.hs; // q of (b, t=0, head h)
    const uint krow = qrow + p.C;
    const uint arow = (b * p.NH + h) * T; // att row of (b, h, t=0)
    const uint kend = min(T, q0 + BQ);    // keys any row of the block can see
    const bool q_resident = HC > 0 && p.hs <= HC;

    float m[RQ], l[RQ];
    for (uint i = 0; i < RQ; i++) {
        m[i] = NEG_BIG;
        l[i] = 0.0;
    }
    if (q_resident)
        load_q(qrow, q0, 0);

    for (uint k0 = 0; k0 < kend; k0 += BK) {
        for (uint i = 0; i < RQ; i++)
            for (uint j = 0; j < RK; j++)
                acc[i][j] = 0.0;
        if (HC == 0)
            dots_direct(qrow, krow, q0, k0);
        else
            dots_tiled(qrow, krow, q0, k0, q_resident);
        // scores of this tile: store them and fold them into the running (max, sum)
        for (uint i = 0; i < RQ; i++) {
            uint t = q0 + ly + i * LY;
            if (t >= T)
                continue;
            float tmax = m[i];
            for (uint j = 0; j < RK; j++) {
                uint t2 = k0 + lx + j * LX;
                acc[i][j] *= p.scale;
                if (t2 <= t)
                    tmax = max(tmax, acc[i][j]);
            }
            float sum = l[i] * exp(m[i] - tmax);
            for (uint j = 0; j < RK; j++) {
                uint t2 = k0 + lx + j * LX;
                if (t2 <= t) {
                    sum += exp(acc[i][j] - tmax);
                    p.att.v[(arow + t) * T + t2] = acc[i][j];
                }
            }
            m[i] = tmax;
            l[i] = sum;
        }
    }

    // merge the LX partial (max, sum) pairs of each row, in lane order
    for (uint i = 0; i < RQ; i++) {
        red_m[(ly + i * LY) * LX + lx] = m[i];
        red_l[(ly + i * LY) * LX + lx] = l[i];
    }
    barrier();
    float rinv[RQ];
    for (uint i = 0; i < RQ; i++) {
        uint r = ly + i * LY;
        float mm = NEG_BIG;
        for (uint x = 0; x < LX; x++)
            mm = max(mm, red_m[r * LX + x]);
        float ll = 0.0;
        for (uint x = 0; x < LX; x++)
            ll += red_l[r * LX + x] * exp(red_m[r * LX + x] - mm);
        m[i] = mm;
        rinv[i] = 1.0 / ll; // ll >= 1 for every row < T (its maximum contributes exp(0))
    }

    // probabilities over the visible keys, zeros above the diagonal
    for (uint i = 0; i < RQ; i++) {
        uint t = q0 + ly + i * LY;
        if (t >= T)
            continue;
        for (uint t2 = lx; t2 < T; t2 += LX) {
            uint o = (arow + t) * T + t2;
            p.att.v[o] = t2 <= t ? exp(p.att.v[o] - m[i]) * rinv[i] : 0.0;
        }
    }
}
