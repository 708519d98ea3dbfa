#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// xent_fwd_bwd: fused softmax + cross-entropy over a padded vocabulary, one workgroup per row.
//   losses[r] = logsumexp(logits[r, 0..V)) - logits[r, targets[r]]
//   WITH_GRAD: dlogits[r, c] = dloss * (softmax(logits[r, 0..V))[c] - (c == target)) for c < V,
//              0 for V <= c < Vp. dlogits may be logits itself (in place).
//   SCALED = 1: dloss is multiplied by dscale[0], a device value the trainer rewrites between
//              submissions (the dynamic loss scale), so a recorded step replays unchanged.
// Row r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x (a 2-D grid covers N > 65535).
//
// Pass 1 reads the row once with an online softmax: each invocation keeps a running maximum m and
// sum s = sum exp(x - m) over its columns (c = tid mod W), taken in chunks of K columns per
// invocation so the rescaling exp is paid once per chunk, not per element. The W (m, s) pairs are
// combined by a shared-memory tree in a fixed order (deterministic, no atomics). Pass 2 (gradient)
// reads the row again and writes every column of dlogits. Each invocation writes only the columns
// it read itself, and the target logit is read before the first barrier, so in place is safe.
// A target outside [0, V) gives a NaN loss (and no one-hot term) rather than a stray read.
layout(constant_id = 3) const uint WITH_GRAD = 1; // 0: losses only (evaluation)
layout(constant_id = 4) const uint K = 4;         // columns per invocation per chunk of pass 1
layout(constant_id = 5) const uint SCALED = 0;    // 1: dloss x dscale[0]

layout(push_constant) uniform Push {
    Floats logits;  // (N, Vp), columns < V read
    Floats losses;  // (N)
    Floats dlogits; // (N, Vp), written when WITH_GRAD = 1; may equal logits
    Ints targets;   // (N)
    Floats dscale;  // (1) read when SCALED = 1
    uint N, V, Vp;
    float dloss;
} p;

shared float red_m[gl_WorkGroupSize.x];
shared float red_s[gl_WorkGroupSize.x];

void main()
{
    const uint W = gl_WorkGroupSize.x; // a power of two (checked by the C side)
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.N)
        return; // uniform across the workgroup
    uint tid = gl_LocalInvocationID.x;
    uint base = row * p.Vp;
    int y = p.targets.v[row];
    bool y_ok = y >= 0 && uint(y) < p.V;
    float xy = 0.0;
    if (tid == 0 && y_ok)
        xy = p.logits.v[base + uint(y)];

    // Pass 1: running max and sum of exp over this invocation's columns. s == 0 means "no column".
    float m = uintBitsToFloat(0xff800000u); // -inf
    float s = 0.0;
    for (uint c0 = 0; c0 < p.V; c0 += K * W) {
        float xs[K];
        float cm = m;
        for (uint k = 0; k < K; k++) {
            uint c = c0 + k * W + tid;
            xs[k] = c < p.V ? p.logits.v[base + c] : 0.0;
            if (c < p.V)
                cm = max(cm, xs[k]);
        }
        if (cm > m) {
            if (s > 0.0)
                s *= exp(m - cm);
            m = cm;
        }
        for (uint k = 0; k < K; k++)
            if (c0 + k * W + tid < p.V)
                s += exp(xs[k] - m);
    }

    // Combine the W pairs: a tree in shared memory, the same order on every run.
    red_m[tid] = m;
    red_s[tid] = s;
    barrier();
    for (uint h = W / 2; h > 0; h >>= 1) {
        if (tid < h) {
            float ma = red_m[tid], sa = red_s[tid];
            float mb = red_m[tid + h], sb = red_s[tid + h];
            if (sb > 0.0) {
                if (sa > 0.0) {
                    float mm = max(ma, mb);
                    red_s[tid] = sa * exp(ma - mm) + sb * exp(mb - mm);
                    red_m[tid] = mm;
                } else {
                    red_s[tid] = sb;
                    red_m[tid] = mb;
                }
            }
        }
        barrier();
    }
    m = red_m[0];
    s = red_s[0];

    if (tid == 0)
        p.losses.v[row] = y_ok ? (m - xy) + log(s) : uintBitsToFloat(0x7fc00000u);

    if (WITH_GRAD == 0)
        return;
    // Pass 2: dlogits = dloss * exp(x - m) / s - dloss * onehot; padding columns 0.
    float dloss = SCALED == 1 ? p.dloss * p.dscale.v[0] : p.dloss;
    float scale = dloss / s;
    for (uint c = tid; c < p.Vp; c += W) {
        float d = 0.0;
        if (c < p.V) {
            d = exp(p.logits.v[base + c] - m) * scale;
            if (int(c) == y)
                d -= dloss;
        }
        p.dlogits.v[base + c] = d;
    }
}
