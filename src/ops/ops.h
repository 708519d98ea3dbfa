/* vkgpt ops: one C function per shader. Each checks shapes and tensor sizes, fills the push
 * constants and records the dispatch(es) into a command list; nothing runs until the list is
 * submitted. Semantics match the CPU reference (src/ref/ref.h) op for op: forward functions
 * overwrite their outputs, backward functions ACCUMULATE into gradient outputs.
 * Tensors are float32 unless stated (token ids: int32). Shapes in comments.
 * Errors: VKG_ERR_INVALID_ARG naming the op and the tensor that is too small or the bad shape.
 * Sizes: no shader index reaches 2^31 (src/ops/op_util.h, the shader index limit): an op larger
 * than the limit records several dispatches over blocks of whole rows, or its kernel's variant
 * with 64-bit row addresses, with bitwise the same results; only a single row (the unit named in
 * the op's file) longer than the limit is refused, naming the op and the sizes. Every op also
 * fails with VKG_ERR_INVALID_ARG when VKG_MAX_DISPATCH_ELEMS is set to something other than an
 * integer from 1 to 2^31 - 1.
 */
#ifndef VKG_OPS_H
#define VKG_OPS_H

#include <stddef.h>

#include "ops/tuning.h"
#include "vk/vk.h"

/* x[i] = value, i < n */
vkg_status vkg_op_fill(vkg_cmd *c, vkg_tensor x, size_t n, float value);
/* x[i] *= factor, i < n */
vkg_status vkg_op_scale(vkg_cmd *c, vkg_tensor x, size_t n, float factor);
/* out (n, bf16) = in (n, fp32) rounded to nearest even, NaN kept (mixed precision: the bf16
 * copy of the weights). out must be a VKG_BF16 tensor, in VKG_F32. */
vkg_status vkg_op_cast_bf16(vkg_cmd *c, vkg_tensor out, vkg_tensor in, size_t n);

/* Where dev's tuning has the cooperative-matrix kernel on (vkgpt --coopmat auto|on|emulate),
 * run one forward product with bf16 operands on it (70 x 41 x 64, values k / 4 whose sums fp32
 * holds exactly in any order) and compare every output bit for bit with the exact sums. On a
 * difference, turn the kernel off in dev's tuning and write what differed into why (cap bytes);
 * else why = "". Does nothing where the kernel is off. corrupt (tests; 0 otherwise) is added to
 * the first expected value, to show that the comparison bites. Errors: what running the product
 * met (memory, the device). */
vkg_status vkg_op_coopmat_selfcheck(vkg_device_t *dev, float corrupt, char *why, size_t cap);

/* Where dev's tuning has the cooperative-matrix kernel on, time one bf16 forward product of
 * M x 768 by 3072 x 768 into bf16 (GPT-2's fc product) on it and on the kernel the device runs
 * with it off (the median of 3 wall-clock runs each, after one untimed): ms[0] the former's,
 * ms[1] the latter's. The kernel stays on only when it was at least 10 % faster (ms[0] < 0.9
 * ms[1]); else it is turned off in dev's
 * tuning and why (cap bytes) says both times. why = "" and ms = {0, 0} where it is off. Errors:
 * memory, the device (the tuning is then left as it was). */
vkg_status vkg_op_coopmat_race(vkg_device_t *dev, uint32_t M, char *why, size_t cap, double ms[2]);

/* ---- matmul (src/ops/matmul.c) ---- */

/* Register tile of the GEMM kernel: tm rows x tn columns per invocation, lx lanes per
 * workgroup. Zeros mean the device's tuning (vkg_device_tuning_get: matmul_tm, _tn, _lx). */
typedef struct vkg_matmul_tiles {
    uint32_t tm, tn, lx;
} vkg_matmul_tiles;

/* One GEMM: R(m,n) = sum_k A(m,k) B(k,n) with A(m,k) = a[m*lda+k] (a_kcontig) or a[k*lda+m],
 * B(k,n) = b[n*ldb+k] (b_kcontig) or b[k*ldb+n]; stored at out[m*ldo+n] or, with out_t,
 * out[n*ldo+m]; added to out with accumulate, else plus bias (indexed by the stored column:
 * bias[m] with out_t, bias[n] without; NULL = none). Products stored transposed, with explicit
 * register tiles or beyond the index limit run on the register kernel even where the tuning
 * picks the tiled one; the register kernel cannot read B k-contiguous (VKG_ERR_UNSUPPORTED). */
typedef struct vkg_gemm {
    vkg_tensor out, a, b;
    const vkg_tensor *bias;
    uint32_t M, N, K, lda, ldb, ldo;
    int a_kcontig, b_kcontig, out_t, accumulate;
    vkg_matmul_tiles tiles;
    /* Split-K scratch (NULL: none): where the tiled kernel runs an accumulating product whose
     * grid is too small to fill the device, it may split K into chunks whose partial products
     * it writes here (S * M * N floats, S chosen to fit) and then adds, in chunk order, to out:
     * deterministic, but not the bits of the unsplit sum. Overwritten. */
    const vkg_tensor *splitk_scratch;
    /* GELU epilogue (NULL: none; not with accumulate): also store gelu(stored value) (the tanh
     * approximation of vkg_op_gelu_fwd, same bits) at the same index of *act; a VKG_BF16 act
     * gets vkg_op_gelu_fwd's bf16 bits (not beyond the index limit). With a VKG_BF16 out the
     * GELU reads the rounded stored value. */
    const vkg_tensor *act;
    const char *label; /* static string for errors and profiles */
} vkg_gemm;
vkg_status vkg_op_gemm(vkg_cmd *c, const vkg_gemm *g);

/* out (cols, rows) = in (rows, cols)^T */
vkg_status vkg_op_transpose(vkg_cmd *c, vkg_tensor out, vkg_tensor in, int rows, int cols);

/* Mixed precision: `weight` and `inp` (and a vkg_gemm's a or b) may be VKG_BF16 tensors
 * (vkg_op_cast_bf16), read and widened to fp32 by the kernels; products and sums stay fp32. The
 * forward passes' out (and a vkg_gemm's out when it does not accumulate) may be VKG_BF16: the
 * bias-added fp32 sum rounded once to nearest even. Gradients are fp32. Not for products beyond
 * the index limit (VKG_ERR_UNSUPPORTED).
 * out (N,OC) = inp (N,C) x weight (OC,C)^T + bias (OC) (bias NULL = none).
 * scratch: at least N*C floats, overwritten (holds inp^T). */
vkg_status vkg_op_matmul_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor weight,
                             const vkg_tensor *bias, int N, int C, int OC, vkg_tensor scratch);
/* vkg_op_matmul_fwd into out (the pre-activation, kept for GELU's backward) and, in the same
 * dispatch, act (N,OC) = gelu(out) (vkg_op_gelu_fwd's function and bits, fp32 or bf16 as act's
 * dtype): the MLP's fc product. */
vkg_status vkg_op_matmul_fwd_gelu(vkg_cmd *c, vkg_tensor out, vkg_tensor act, vkg_tensor inp,
                                  vkg_tensor weight, const vkg_tensor *bias, int N, int C, int OC,
                                  vkg_tensor scratch);
/* dinp (N,C) += dout (N,OC) x weight; dweight (OC,C) += dout^T x inp; dbias (OC) += column sums
 * of dout (dbias NULL = none). Deterministic. scratch (NULL = none; the forward pass's scratch
 * fits): where the tiled kernel runs dweight and its grid is too small for the device, it splits
 * K = N into chunks whose partial products go to the scratch (as many chunks as fit) before their
 * ordered sum is added to dweight (vkg_gemm.splitk_scratch). */
vkg_status vkg_op_matmul_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dweight,
                             const vkg_tensor *dbias, vkg_tensor dout, vkg_tensor inp,
                             vkg_tensor weight, int N, int C, int OC, const vkg_tensor *scratch);
/* The two halves of vkg_op_matmul_bwd, with the same results, for a caller that needs dweight
 * final before dinp is computed (the classifier's wte gradient, reduced early). */
vkg_status vkg_op_matmul_bwd_dinp(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dout, vkg_tensor weight,
                                  int N, int C, int OC);
vkg_status vkg_op_matmul_bwd_dweight(vkg_cmd *c, vkg_tensor dweight, const vkg_tensor *dbias,
                                     vkg_tensor dout, vkg_tensor inp, int N, int C, int OC,
                                     const vkg_tensor *scratch);

/* Causal multi-head self-attention (src/ops/attention.c), as vkg_ref_attention_fwd/_bwd, in the
 * flash form: no (T, T) matrix is stored, the backward pass recomputes the probabilities.
 * qkv (B,T,3C) = [q | k | v], head h uses channels h*hs..(h+1)*hs of each part, hs = C/NH,
 * scale 1/sqrt(hs). Forward: out (B,T,C) = softmax(scale q k^T, causal) v and lse (B,NH,T) =
 * the logsumexp of each row of scaled scores, both OVERWRITTEN. Backward: dqkv (B,T,3C) += the
 * gradient given dout (B,T,C) and the out and lse of the forward pass on the same qkv (ACCUMULATES;
 * the q, k and v parts each have one writer per element). delta: scratch of at least B*NH*T floats
 * (the row sums of dout * out), overwritten; the caller allocates it and may reuse it once the
 * backward pass has run. Deterministic: same device, inputs and form, bitwise the same results.
 * Mixed precision: qkv and out may be VKG_BF16 (the forward's both or neither; hs even), read
 * widened, out rounded once when stored; lse, delta and dqkv stay fp32.
 * Errors: VKG_ERR_INVALID_ARG for non-positive sizes, C not divisible by NH, one batch beyond the
 * shader index limit (T*3C), grids over 65535 workgroups, or a tensor too small (named);
 * VKG_ERR_UNSUPPORTED when a head of hs channels needs more shared memory than the device has. */
vkg_status vkg_op_attention_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor lse, vkg_tensor qkv, int B,
                                int T, int C, int NH);
vkg_status vkg_op_attention_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout, vkg_tensor qkv,
                                vkg_tensor out, vkg_tensor lse, int B, int T, int C, int NH,
                                vkg_tensor delta);

/* Grouped-query attention (Llama-family models), as vkg_ref_attention_gqa_fwd/_bwd: NH query
 * heads and NKV key/value heads of D channels each (NH a multiple of NKV; query head h reads
 * key/value head h / (NH/NKV)), scale 1/sqrt(D), D given (not C/NH). qkv (B,T,(NH + 2 NKV) D) =
 * [q (NH D) | k (NKV D) | v (NKV D)] per row (a fused q/k/v product's output); out and dout
 * (B,T,NH D); lse and delta (B,NH,T); dqkv as qkv. The dk and dv of a key/value head ACCUMULATE
 * the sum over the query heads of its group, in a fixed order in one workgroup (no atomics):
 * deterministic. Otherwise as vkg_op_attention_fwd/_bwd (dtypes, bf16 with D even, splitting
 * above the index limit, the kernel forms); NKV = NH with D = C/NH is GPT-2's op, bit for bit.
 * Errors: VKG_ERR_INVALID_ARG for non-positive sizes, NH not a multiple of NKV, D above
 * VKG_ATTENTION_MAX_D, one batch beyond the index limit (T (NH + 2 NKV) D), a tensor too small
 * (named); VKG_ERR_UNSUPPORTED when D needs more shared memory than the device has. */
#define VKG_ATTENTION_MAX_D 256
vkg_status vkg_op_attention_gqa_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor lse, vkg_tensor qkv,
                                    int B, int T, int NH, int NKV, int D);
vkg_status vkg_op_attention_gqa_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dout, vkg_tensor qkv,
                                    vkg_tensor out, vkg_tensor lse, int B, int T, int NH, int NKV,
                                    int D, vkg_tensor delta);

/* Encoder, layernorm, GELU and residual (src/ops/encoder.c, layernorm.c, pointwise.c), as
 * vkg_ref_encoder_fwd/_bwd, vkg_ref_layernorm_fwd/_bwd, vkg_ref_gelu_*, vkg_ref_residual_*.
 * Sizes must be positive (n may be 0: nothing is recorded).
 * Every backward pass is deterministic (fixed summation order, no float atomics).
 * Encoder: out (B,T,C) = wte[inp[b,t]] + wpe[t]; inp (B,T) int32. V (the rows of wte / dwte) is
 * taken from the tensor's size; a token id outside [0, V) gives a NaN row in the forward pass and
 * no gradient in the backward pass. Backward: dwte (V,C) += per distinct token the sum of its
 * positions' dout rows; dwpe (T,C) += the sum of dout over the batch. out may be bf16 (the
 * residual stream of mixed precision: the fp32 sum rounded once; C even). */
vkg_status vkg_op_encoder_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor wte,
                              vkg_tensor wpe, int B, int T, int C);
vkg_status vkg_op_encoder_bwd(vkg_cmd *c, vkg_tensor dwte, vkg_tensor dwpe, vkg_tensor dout,
                              vkg_tensor inp, int B, int T, int C);
/* The token embedding alone (rotary models, whose positions enter in attention): out (B,T,C) =
 * wte[inp[b,t]], as vkg_op_encoder_fwd with a zero wpe (same dtypes, splitting and NaN rows). */
vkg_status vkg_op_embed_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor inp, vkg_tensor wte, int B,
                            int T, int C);
/* wte's half of vkg_op_encoder_bwd alone, with its bits: dwte (V,C) += per distinct token the
 * sum of its positions' dout rows. */
vkg_status vkg_op_encoder_bwd_wte(vkg_cmd *c, vkg_tensor dwte, vkg_tensor dout, vkg_tensor inp,
                                  int B, int T, int C);
/* wpe's half of vkg_op_encoder_bwd alone: dwpe (maxT,C) += dout summed over the batch. */
vkg_status vkg_op_encoder_bwd_wpe(vkg_cmd *c, vkg_tensor dwpe, vkg_tensor dout, int B, int T,
                                  int C);
/* Layernorm over rows of C (eps 1e-5, biased variance): out (N,C), mean (N), rstd (N)
 * overwritten. Backward: dinp (N,C), dweight (C), dbias (C) accumulated. Mixed precision: out
 * may be bf16 (rounded once) and inp bf16 (the residual stream, read widened), in both passes;
 * a bf16 tensor needs C even. */
vkg_status vkg_op_layernorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor mean, vkg_tensor rstd,
                                vkg_tensor inp, vkg_tensor weight, vkg_tensor bias, int N, int C);
/* The residual add and the layernorm after it in one dispatch: res (N,C) = a + b (as
 * vkg_op_residual_fwd), then vkg_op_layernorm_fwd of res, with the bits of the two ops (out fp32
 * or bf16, as there; b fp32 or bf16, widened; res and a both fp32 or both bf16, the residual
 * stream's type, res then rounded once and normalized as rounded; C even for any bf16 tensor).
 * res aliases neither a nor b. */
vkg_status vkg_op_residual_layernorm_fwd(vkg_cmd *c, vkg_tensor res, vkg_tensor out,
                                         vkg_tensor mean, vkg_tensor rstd, vkg_tensor a,
                                         vkg_tensor b, vkg_tensor weight, vkg_tensor bias, int N,
                                         int C);
vkg_status vkg_op_layernorm_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dweight, vkg_tensor dbias,
                                vkg_tensor dout, vkg_tensor inp, vkg_tensor weight, vkg_tensor mean,
                                vkg_tensor rstd, int N, int C);

/* RMSNorm over rows of C (src/ops/rmsnorm.c), as vkg_ref_rmsnorm_fwd/_bwd: rstd (N) = 1 /
 * sqrt(mean_c(inp^2) + eps), out (N,C) = inp * rstd * weight (no bias, no mean subtracted), both
 * OVERWRITTEN; eps > 0 and finite (Llama: 1e-5 or 1e-6). Backward, with norm = inp * rstd and
 * dnorm = weight * dout: dinp (N,C) += rstd * (dnorm - norm * mean_c(dnorm * norm)) and dweight
 * (C) += sum over rows of norm * dout, both ACCUMULATED, deterministic (fixed order, no atomics).
 * Mixed precision as the layernorm's: out may be bf16 (rounded once) and inp bf16 (the residual
 * stream, read widened), in both passes; a bf16 tensor needs C even. */
vkg_status vkg_op_rmsnorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor rstd, vkg_tensor inp,
                              vkg_tensor weight, int N, int C, float eps);
/* The residual add and the RMSNorm after it in one dispatch: res (N,C) = a + b (as
 * vkg_op_residual_fwd), then vkg_op_rmsnorm_fwd of res (out fp32 or bf16; b fp32 or bf16,
 * widened; res and a both fp32 or both bf16, the residual stream's type, res then rounded once
 * and normalized as rounded; C even for any bf16 tensor). res aliases neither a nor b. */
vkg_status vkg_op_residual_rmsnorm_fwd(vkg_cmd *c, vkg_tensor res, vkg_tensor out, vkg_tensor rstd,
                                       vkg_tensor a, vkg_tensor b, vkg_tensor weight, int N, int C,
                                       float eps);
vkg_status vkg_op_rmsnorm_bwd(vkg_cmd *c, vkg_tensor dinp, vkg_tensor dweight, vkg_tensor dout,
                              vkg_tensor inp, vkg_tensor weight, vkg_tensor rstd, int N, int C);

/* SwiGLU (src/ops/swiglu.c), as vkg_ref_swiglu_fwd/_bwd: h (N,2F) is the fused gate-and-up
 * product, per row gate = h[n, 0..F) then up = h[n, F..2F); out (N,F) = silu(gate) * up,
 * silu(g) = g / (1 + exp(-g)), OVERWRITTEN. Backward: dh (N,2F) += [dout * up * silu'(gate) |
 * dout * silu(gate)] given dout (N,F), ACCUMULATED, deterministic (one writer per element).
 * Mixed precision as GELU's: the forward's out and h may be bf16 (h widened, out rounded once),
 * the backward's h bf16; dh and dout are fp32. */
vkg_status vkg_op_swiglu_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor h, int N, int F);
vkg_status vkg_op_swiglu_bwd(vkg_cmd *c, vkg_tensor dh, vkg_tensor h, vkg_tensor dout, int N,
                             int F);

/* Rotary position embedding (src/ops/rope.c), as vkg_ref_rope_fwd/_bwd, IN PLACE on the q and k
 * heads of qkv (B,T,(NH + 2 NKV) D) = per position [q (NH heads) | k (NKV heads) | v (NKV
 * heads)], head dimension D (even), v untouched; positions t = 0..T-1. Hugging Face's Llama
 * (rotate_half): for i < D/2 and a = t * inv_freq[i],
 *   x'[i] = x[i] cos a - x[i + D/2] sin a,   x'[i + D/2] = x[i + D/2] cos a + x[i] sin a,
 * the angle formed exactly and reduced to [-pi, pi] on the device, accurate to about 1e-6 rad
 * while t * inv_freq < 2^15 * 2 pi (t < 131072 with inv_freq <= 1; shaders/rope.glsl).
 * inv_freq (D/2, fp32) is the caller's (theta^(-2i/D), or Llama 3's scaled frequencies).
 * rope_bwd turns the gradient of the rotated qkv (dqkv, same layout, fp32) into the gradient of
 * the unrotated one, in place (rotation by -a; the v part is left as it is). Each element has one
 * writer: deterministic. Mixed precision: the forward's qkv may be bf16 (D a multiple of 4),
 * read widened and rounded once. */
vkg_status vkg_op_rope_fwd(vkg_cmd *c, vkg_tensor qkv, vkg_tensor inv_freq, int B, int T, int NH,
                           int NKV, int D);
vkg_status vkg_op_rope_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor inv_freq, int B, int T, int NH,
                           int NKV, int D);

/* QK-norm (src/ops/qknorm.c): RMSNorm without bias over each head's D values of the q and k heads
 * of qkv (B,T,(NH + 2 NKV) D) = per position [q (NH heads) | k (NKV heads) | v (NKV heads)], with
 * q_weight (D) shared by the query heads and k_weight (D) by the key heads:
 *   out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps) (eps > 0, finite), saved in rstd
 *   (B,T,NH + NKV) at head h of each position; out (qkv's layout, the v heads copied) and rstd
 *   OVERWRITTEN; out does not alias qkv.
 * Backward: dqkv += the RMSNorm input gradient of each q and k head (vkg_op_rmsnorm_bwd's
 * formula) and dout on the v heads; dq_weight, dk_weight (D) += sum over their head rows of
 * norm * dout; all ACCUMULATED, deterministic (fixed order, no atomics). fp32 only, and qkv
 * within the shader index limit (else VKG_ERR_INVALID_ARG naming the op). */
vkg_status vkg_op_qknorm_fwd(vkg_cmd *c, vkg_tensor out, vkg_tensor rstd, vkg_tensor qkv,
                             vkg_tensor q_weight, vkg_tensor k_weight, int B, int T, int NH,
                             int NKV, int D, float eps);
vkg_status vkg_op_qknorm_bwd(vkg_cmd *c, vkg_tensor dqkv, vkg_tensor dq_weight,
                             vkg_tensor dk_weight, vkg_tensor dout, vkg_tensor qkv,
                             vkg_tensor q_weight, vkg_tensor k_weight, vkg_tensor rstd, int B,
                             int T, int NH, int NKV, int D);

/* ---- flat ops: the VKG_FLAT2 / VKG_FLAT3 rows of src/ops/op_table.def ---- */

/* vkg_op_<name>(c, t0, t1[, t2], n): one element-wise op over flat float tensors of n elements
 * (GELU, squared ReLU and the residual add, src/ops/pointwise.c), declared here from its table row,
 * where what it computes is stated. n may be 0 (nothing is recorded); each tensor must hold n
 * elements. */
#define VKG_FLAT2(name, t0, t1, flops, tag, N, C)                                                  \
    vkg_status vkg_op_##name(vkg_cmd *c, vkg_tensor t0, vkg_tensor t1, size_t n);
#define VKG_FLAT3(name, t0, t1, t2, flops, tag, N, C)                                              \
    vkg_status vkg_op_##name(vkg_cmd *c, vkg_tensor t0, vkg_tensor t1, vkg_tensor t2, size_t n);
#include "ops/op_table.def"

/* ---- loss, gradient norm, optimizer (src/ops/xent.c, norm.c, adamw.c) ---- */

/* Fused softmax + cross-entropy over a padded vocabulary, one workgroup per row:
 * losses (N) = logsumexp(logits[i, :V]) - logits[i, targets[i]] (not averaged). When dlogits
 * (N,Vp) is not NULL it is OVERWRITTEN with dloss * (softmax(logits[i, :V]) - onehot(targets[i]))
 * on columns < V and exactly 0 on padding columns; it may be logits itself (in place), but not a
 * partly overlapping range. dlogits NULL = evaluation: losses only, logits untouched.
 * logits (N,Vp) with only columns < V read, targets (N) int32 in [0, V) (a target outside gives a
 * NaN loss). Needs V <= Vp, and Vp within the shader index limit. Deterministic. */
vkg_status vkg_op_xent_fwd_bwd(vkg_cmd *c, vkg_tensor losses, const vkg_tensor *dlogits,
                               vkg_tensor logits, vkg_tensor targets, int N, int V, int Vp,
                               float dloss);
/* The same, with dloss multiplied on the device by dscale[0] (one float, read when the list runs:
 * the dynamic loss scale, rewritten between submissions without re-recording); dscale NULL is
 * vkg_op_xent_fwd_bwd. A power-of-two scale multiplies every dlogit exactly. */
vkg_status vkg_op_xent_fwd_bwd_scaled(vkg_cmd *c, vkg_tensor losses, const vkg_tensor *dlogits,
                                      vkg_tensor logits, vkg_tensor targets, int N, int V, int Vp,
                                      float dloss, const vkg_tensor *dscale);

/* out[0] = (accumulate ? out[0] : 0) + sum over k < count, i < ns[k] of xs[k][i]^2, as float.
 * Deterministic (same inputs and device: bitwise the same result; no atomics), accurate to about
 * 1e-7 relative (compensated partial sums). Any sizes (a tensor may be the whole gradient arena;
 * each is cut into segments of 2^30 elements). scratch: at least vkg_op_sumsq_scratch_elems floats,
 * overwritten, apart from xs and out. Records its own barriers (a group of independent partial
 * dispatches, then one final dispatch): do not record it inside a group. */
vkg_status vkg_op_sumsq(vkg_cmd *c, vkg_tensor out, const vkg_tensor *xs, const size_t *ns,
                        int count, vkg_tensor scratch, int accumulate);
/* Floats of scratch vkg_op_sumsq needs for tensors of these sizes (at least 1). */
size_t vkg_op_sumsq_scratch_elems(const size_t *ns, int count);
/* The partial sums vkg_op_sumsq adds for one tensor of n elements: their number P, and (bounds
 * not NULL) their element ranges: partial p covers [bounds[p], bounds[p + 1]) (P + 1 entries).
 * A function of n alone, the same on every device and tuning (a sharded norm cuts its shards
 * there). */
size_t vkg_op_sumsq_partition(size_t n, size_t *bounds);
/* Stage 1 of vkg_op_sumsq for one tensor x of n elements, partials [first, first + count) only:
 * partials[0, count) receive bitwise the values vkg_op_sumsq computes for them. Records one
 * group; a barrier must follow before they are read. */
vkg_status vkg_op_sumsq_partials(vkg_cmd *c, vkg_tensor partials, vkg_tensor x, size_t n,
                                 size_t first, size_t count);
/* Stage 2 of vkg_op_sumsq: out[0] = (accumulate ? out[0] : 0) + the count partials added in
 * vkg_op_sumsq's order (given its partials, bitwise its result). */
vkg_status vkg_op_sumsq_final(vkg_cmd *c, vkg_tensor out, vkg_tensor partials, size_t count,
                              int accumulate);

/* The values that change every step, kept in a small device tensor (16-byte aligned) that the
 * trainer rewrites before each submission of a recorded step (shaders read it; nothing is
 * re-recorded). Layout shared with shaders/adamw.comp. */
typedef struct vkg_step_params {
    float lr;        /* learning rate of this step */
    uint32_t t;      /* AdamW step, 1-based (bias correction 1 - beta^t) */
    float grad_clip; /* clip the global gradient norm to this; <= 0: no clipping */
    float unscale;   /* the gradients' factor before anything else: 1 / loss scale (1: none) */
} vkg_step_params;

/* One AdamW step on n elements (llm.c's formula, decoupled weight decay; see vkg_ref_adamw):
 * param, m, v (n) updated in place from grad (n). lr, t, grad_clip and unscale are read on the
 * device from step (one vkg_step_params). The gradient is multiplied by unscale, and by
 * grad_clip / sqrt(sumsq[0]) when sumsq is not NULL, grad_clip > 0 and that norm exceeds
 * grad_clip (sumsq: the global sum of squares of the unscaled gradients). Needs beta1, beta2 in
 * [0, 1), eps > 0, weight_decay >= 0 (0 for tensors that do not decay). */
vkg_status vkg_op_adamw(vkg_cmd *c, vkg_tensor param, vkg_tensor grad, vkg_tensor m, vkg_tensor v,
                        size_t n, float beta1, float beta2, float eps, float weight_decay,
                        vkg_tensor step, const vkg_tensor *sumsq);

#endif
