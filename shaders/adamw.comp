#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// adamw: one AdamW step on n elements, llm.c's formula with decoupled weight decay:
//   g = grad * scale; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
//   param -= lr * ((m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * param)
// The learning rate, the 1-based step t and the clipping threshold are read from a device buffer
// (struct vkg_step_params in src/ops/ops.h) that the trainer rewrites between submissions, so a
// recorded step replays without re-recording. scale = unscale x clip / sqrt(sumsq[0]) when
// clip > 0, a sum of squares is given and its root exceeds clip, else unscale (the inverse of the
// loss scale the gradients carry, 1 without one; sumsq is of the unscaled gradients). 1 - b^t is computed as
// -expm1(t ln b) from ln b (computed in double on the host) so it keeps full precision when t ln b
// is small (b2 = 0.999 at t = 1).
// A sum of squares that is not finite (a NaN or infinite gradient, or one whose square overflows)
// skips the step: parameters and moments are left exactly as they were. The test looks at the
// exponent bits, so no compiler's assumptions about NaN can remove it.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer StepParams {
    float lr;
    uint t;
    float grad_clip;
    float unscale;
};

layout(push_constant) uniform Push {
    Floats param;    // (n) updated
    Floats grad;     // (n)
    Floats m;        // (n) updated
    Floats v;        // (n) updated
    StepParams step; // lr, t, grad_clip of this step
    Floats sumsq;    // (1) global sum of squares of the gradients; read when has_sumsq != 0
    uint n;
    uint has_sumsq;
    float beta1, beta2, eps, weight_decay;
    float ln_beta1, ln_beta2; // natural logarithms of beta1, beta2
} p;

// 1 - exp(x) for x <= 0, accurate for small |x| as well.
float one_minus_exp(float x)
{
    if (x > -0.125) // -expm1(x) by its Taylor series, relative error below 1e-9 here
        return -x * (1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 *
                                                                       (1.0 + x / 6.0)))));
    return 1.0 - exp(x);
}

void main()
{
    if (p.has_sumsq != 0 && (floatBitsToUint(p.sumsq.v[0]) & 0x7f800000u) == 0x7f800000u)
        return;
    float lr = p.step.lr;
    float t = float(p.step.t);
    float clip = p.step.grad_clip;
    float scale = p.step.unscale;
    if (p.has_sumsq != 0 && clip > 0.0) {
        float norm = sqrt(p.sumsq.v[0]);
        if (norm > clip)
            scale *= clip / norm;
    }
    float b1c = one_minus_exp(t * p.ln_beta1);
    float b2c = one_minus_exp(t * p.ln_beta2);
    float b1 = p.beta1, b2 = p.beta2;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x()) {
        float g = p.grad.v[i] * scale;
        float mi = b1 * p.m.v[i] + (1.0 - b1) * g;
        float vi = b2 * p.v.v[i] + (1.0 - b2) * (g * g);
        p.m.v[i] = mi;
        p.v.v[i] = vi;
        float w = p.param.v[i];
        p.param.v[i] = w - lr * ((mi / b1c) / (sqrt(vi / b2c) + p.eps) + p.weight_decay * w);
    }
}
