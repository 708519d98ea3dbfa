/* CPU reference for every vkgpt op: plain C loops, libc only, used by the tests to check the
 * shaders and by the finite-difference tests to check itself.
 *
 * Semantics follow llm.c's train_gpt2.c. Layouts are row-major; weights are (out, in).
 * Every function exists in two precisions: vkg_ref_<op> on float (with double accumulation in
 * reductions) and vkg_ref_<op>_f64 on double (for finite-difference checks).
 * Backward functions ACCUMULATE (+=) into their gradient outputs, as llm.c does; the caller
 * zeroes gradients first. Forward functions overwrite their outputs.
 * This module allocates nothing that outlives a call and never prints.
 */
#ifndef VKG_REF_H
#define VKG_REF_H

#include <stddef.h>
#include <stdint.h>

#define VKG_REF_DECLARE(real, sfx)                                                                 \
    /* out (B,T,C) = wte[inp[b,t]] + wpe[t]; inp (B,T), wte (V,C), wpe (maxT,C) */                 \
    void vkg_ref_encoder_fwd##sfx(real *out, const int32_t *inp, const real *wte, const real *wpe, \
                                  int B, int T, int C);                                            \
    /* dwte[inp[b,t]] += dout[b,t]; dwpe[t] += dout[b,t] */                                        \
    void vkg_ref_encoder_bwd##sfx(real *dwte, real *dwpe, const real *dout, const int32_t *inp,    \
                                  int B, int T, int C);                                            \
    /* per row of N: out (N,C), mean (N), rstd (N); eps = 1e-5, biased variance */                 \
    void vkg_ref_layernorm_fwd##sfx(real *out, real *mean, real *rstd, const real *inp,            \
                                    const real *weight, const real *bias, int N, int C);           \
    void vkg_ref_layernorm_bwd##sfx(real *dinp, real *dweight, real *dbias, const real *dout,      \
                                    const real *inp, const real *weight, const real *mean,         \
                                    const real *rstd, int N, int C);                               \
    /* out (N,OC) = inp (N,C) x weight(OC,C)^T + bias (OC); bias may be NULL */                    \
    void vkg_ref_matmul_fwd##sfx(real *out, const real *inp, const real *weight, const real *bias, \
                                 int N, int C, int OC);                                            \
    /* dinp (N,C) += dout W; dweight (OC,C) += dout^T inp; dbias (OC) += colsum(dout) (NULL ok) */ \
    void vkg_ref_matmul_bwd##sfx(real *dinp, real *dweight, real *dbias, const real *dout,         \
                                 const real *inp, const real *weight, int N, int C, int OC);       \
    /* causal self-attention. qkv (B,T,3C) = [q | k | v], head h uses channels h*hs..(h+1)*hs;     \
     * scale 1/sqrt(hs); out (B,T,C); lse (B,NH,T) = log sum_{t2 <= t} exp(scale q[t] . k[t2]);    \
     * att (B,NH,T,T) the softmax probabilities (entries t2 > t written as 0), or NULL. */         \
    void vkg_ref_attention_fwd##sfx(real *out, real *lse, real *att, const real *qkv, int B,       \
                                    int T, int C, int NH);                                         \
    /* dqkv (B,T,3C) += gradient through attention given the lse of the forward pass: the          \
     * probabilities are recomputed as exp(scale q[t] . k[t2] - lse[t]) */                         \
    void vkg_ref_attention_bwd##sfx(real *dqkv, const real *dout, const real *qkv,                 \
                                    const real *lse, int B, int T, int C, int NH);                 \
    /* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */                \
    void vkg_ref_gelu_fwd##sfx(real *out, const real *inp, size_t n);                              \
    void vkg_ref_gelu_bwd##sfx(real *dinp, const real *inp, const real *dout, size_t n);           \
    /* out = a + b; backward: da += dout, db += dout */                                            \
    void vkg_ref_residual_fwd##sfx(real *out, const real *a, const real *b, size_t n);             \
    void vkg_ref_residual_bwd##sfx(real *da, real *db, const real *dout, size_t n);                \
    /* Fused softmax + cross-entropy over a padded vocabulary. logits (N,Vp): only the first V     \
     * columns are real. losses (N) = -log softmax(logits[i, :V])[targets[i]] (NULL: skipped).     \
     * If dlogits (N,Vp) is not NULL it is OVERWRITTEN with dloss * (probs - onehot(target)) for   \
     * columns < V and 0 for padding columns (dlogits may alias logits).                           \
     * targets[i] must be in [0, V). */                                                            \
    void vkg_ref_xent_fwd_bwd##sfx(real *losses, real *dlogits, const real *logits,                \
                                   const int32_t *targets, int N, int V, int Vp, real dloss);      \
    /* AdamW step t (1-based) on n elements, llm.c's formula with decoupled weight decay:          \
     *   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;                        \
     *   mhat = m / (1 - b1^t); vhat = v / (1 - b2^t);                                             \
     *   param -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * param)                          \
     * grad_scale carries gradient clipping: min(1, clip / norm), or 1. */                         \
    void vkg_ref_adamw##sfx(real *param, const real *grad, real *m, real *v, size_t n, real lr,    \
                            real beta1, real beta2, real eps, real weight_decay, int t,            \
                            real grad_scale);                                                      \
    /* sum of squares of x (accumulated in double) */                                              \
    double vkg_ref_sumsq##sfx(const real *x, size_t n);                                            \
    void vkg_ref_fill##sfx(real *x, real value, size_t n);                                         \
    void vkg_ref_scale##sfx(real *x, real factor, size_t n);                                       \
    /* ---- Llama-family layers (ref_llama_impl.h) ----                                            \
     * RMSNorm per row of N: rstd (N) = 1 / sqrt(mean_c(x^2) + eps), out (N,C) = x * rstd *        \
     * weight (no bias, no mean subtracted). Backward, with norm = x * rstd and dnorm = weight *   \
     * dout: dinp += rstd * (dnorm - norm * mean_c(dnorm * norm)); dweight += sum_n norm * dout.   \
     */                                                                                            \
    void vkg_ref_rmsnorm_fwd##sfx(real *out, real *rstd, const real *inp, const real *weight,      \
                                  int N, int C, double eps);                                       \
    void vkg_ref_rmsnorm_bwd##sfx(real *dinp, real *dweight, const real *dout, const real *inp,    \
                                  const real *weight, const real *rstd, int N, int C);             \
    /* SwiGLU: h (N,2F) holds [gate | up] per row (gate = h[n, :F], up = h[n, F:]);                \
     * out (N,F) = silu(gate) * up, silu(g) = g / (1 + exp(-g)). Backward: dh (N,2F) +=            \
     * [dout * up * silu'(gate) | dout * silu(gate)], silu'(g) = s (1 + g (1 - s)), s = sigmoid.   \
     */                                                                                            \
    void vkg_ref_swiglu_fwd##sfx(real *out, const real *h, int N, int F);                          \
    void vkg_ref_swiglu_bwd##sfx(real *dh, const real *h, const real *dout, int N, int F);         \
    /* ReLU^2: out = max(x, 0)^2; dinp += 2 max(x, 0) dout */                                      \
    void vkg_ref_relu2_fwd##sfx(real *out, const real *inp, size_t n);                             \
    void vkg_ref_relu2_bwd##sfx(real *dinp, const real *inp, const real *dout, size_t n);          \
    /* Rotary position embedding (Hugging Face Llama, rotate_half), IN PLACE on the q and k heads  \
     * of qkv (B,T,(NH + 2 NKV) D) = [q (NH heads) | k (NKV) | v (NKV)], v untouched: for each     \
     * head, position t and i < D/2, a = t * inv_freq[i] (cos, sin in double):                     \
     *   x'[i] = x[i] cos a - x[i + D/2] sin a;  x'[i + D/2] = x[i + D/2] cos a + x[i] sin a.      \
     * rope_bwd rotates the gradient dqkv (same layout) by -a in place (the transpose). */         \
    void vkg_ref_rope_fwd##sfx(real *qkv, const real *inv_freq, int B, int T, int NH, int NKV,     \
                               int D);                                                             \
    void vkg_ref_rope_bwd##sfx(real *dqkv, const real *inv_freq, int B, int T, int NH, int NKV,    \
                               int D);                                                             \
    /* Grouped-query causal attention: qkv (B,T,(NH + 2 NKV) D) = [q (NH heads) | k (NKV) |        \
     * v (NKV)], query head h reads kv head h / (NH/NKV) (NH a multiple of NKV), scale 1/sqrt(D);  \
     * out (B,T,NH D) and lse (B,NH,T) as vkg_ref_attention_fwd's. Backward: dqkv (same layout as  \
     * qkv) += the gradient given dout (B,T,NH D) and the forward's lse; dk and dv of a kv head    \
     * sum the query heads of its group. NKV = NH, D = C/NH is vkg_ref_attention_*. */             \
    void vkg_ref_attention_gqa_fwd##sfx(real *out, real *lse, const real *qkv, int B, int T,       \
                                        int NH, int NKV, int D);                                   \
    void vkg_ref_attention_gqa_bwd##sfx(real *dqkv, const real *dout, const real *qkv,             \
                                        const real *lse, int B, int T, int NH, int NKV, int D);

VKG_REF_DECLARE(float, )
VKG_REF_DECLARE(double, _f64)

#undef VKG_REF_DECLARE

/* bf16 (src/ref/bf16.c), as shaders/common.glsl stores it: the 16 bits of x rounded to nearest,
 * ties to even, a NaN kept a quiet NaN; the float of those bits; x rounded (both at once) for
 * each of n values in place. */
uint16_t vkg_ref_bf16_bits(float x);
float vkg_ref_bf16_widen(uint16_t h);
void vkg_ref_bf16_round(float *x, size_t n);

#endif
