/* Template of the CPU reference ops of the Llama-family layers declared in ref.h (RMSNorm,
 * SwiGLU, ReLU^2, rotary position embedding, grouped-query attention), instantiated once per
 * precision after ref_impl.h, with the same contract: the includer defines `real` and REF_SFX;
 * every reduction accumulates in double and elementwise math is done in double, rounded once on
 * store. Written from the published definitions (RMSNorm: Zhang & Sennrich 2019; SwiGLU: Shazeer
 * 2020; ReLU^2: So et al. 2021; RoPE: Su et al. 2021 in Hugging Face transformers' rotate_half
 * form), not from the shaders. No include guard on purpose; this is not a public header.
 */
#if !defined(real) || !defined(REF_SFX)
#error "define real and REF_SFX before including ref_llama_impl.h"
#endif

#define RL_CAT_(a, b) a##b
#define RL_CAT(a, b) RL_CAT_(a, b)
#define RL_FN(name) RL_CAT(name, REF_SFX)

/* Columns of dweight accumulated at once in a stack array of doubles. */
#define RL_CHUNK 64

/* ---------------------------------------------------------------- RMSNorm */

void RL_FN(vkg_ref_rmsnorm_fwd)(real *out, real *rstd, const real *inp, const real *weight, int N,
                                int C, double eps)
{
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C; /* (C) */
        real *o = out + (size_t)n * C;       /* (C) */
        double ss = 0.0;
        for (int c = 0; c < C; c++)
            ss += (double)x[c] * (double)x[c];
        double s = 1.0 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++)
            o[c] = (real)((double)x[c] * s * (double)weight[c]);
        rstd[n] = (real)s;
    }
}

void RL_FN(vkg_ref_rmsnorm_bwd)(real *dinp, real *dweight, const real *dout, const real *inp,
                                const real *weight, const real *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        real *di = dinp + (size_t)n * C;
        double s = rstd[n], dnorm_norm_mean = 0.0;
        for (int c = 0; c < C; c++)
            dnorm_norm_mean += (double)weight[c] * (double)d[c] * (double)x[c] * s;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            double norm = (double)x[c] * s, dnorm = (double)weight[c] * (double)d[c];
            di[c] = (real)((double)di[c] + (dnorm - norm * dnorm_norm_mean) * s);
        }
    }
    double acc[RL_CHUNK];
    for (int c0 = 0; c0 < C; c0 += RL_CHUNK) {
        int nc = C - c0 < RL_CHUNK ? C - c0 : RL_CHUNK;
        for (int j = 0; j < nc; j++)
            acc[j] = 0.0;
        for (int n = 0; n < N; n++) {
            const real *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
            double s = rstd[n];
            for (int j = 0; j < nc; j++)
                acc[j] += (double)x[j] * s * (double)d[j];
        }
        for (int j = 0; j < nc; j++)
            dweight[c0 + j] = (real)((double)dweight[c0 + j] + acc[j]);
    }
}

/* ----------------------------------------------------------------- SwiGLU */

void RL_FN(vkg_ref_swiglu_fwd)(real *out, const real *h, int N, int F)
{
    for (int n = 0; n < N; n++) {
        const real *gate = h + (size_t)n * 2 * F, *up = gate + F; /* (F), (F) */
        for (int f = 0; f < F; f++) {
            double g = gate[f];
            out[(size_t)n * F + f] = (real)(g / (1.0 + exp(-g)) * (double)up[f]);
        }
    }
}

void RL_FN(vkg_ref_swiglu_bwd)(real *dh, const real *h, const real *dout, int N, int F)
{
    for (int n = 0; n < N; n++) {
        const real *gate = h + (size_t)n * 2 * F, *up = gate + F;
        real *dgate = dh + (size_t)n * 2 * F, *dup = dgate + F;
        for (int f = 0; f < F; f++) {
            double g = gate[f], d = dout[(size_t)n * F + f];
            double s = 1.0 / (1.0 + exp(-g));
            dgate[f] = (real)((double)dgate[f] + d * (double)up[f] * s * (1.0 + g * (1.0 - s)));
            dup[f] = (real)((double)dup[f] + d * g * s);
        }
    }
}

/* ----------------------------------------------------------------- ReLU^2 */

void RL_FN(vkg_ref_relu2_fwd)(real *out, const real *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double r = inp[i] > 0 ? (double)inp[i] : 0.0;
        out[i] = (real)(r * r);
    }
}

void RL_FN(vkg_ref_relu2_bwd)(real *dinp, const real *inp, const real *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double r = inp[i] > 0 ? (double)inp[i] : 0.0;
        dinp[i] = (real)((double)dinp[i] + 2.0 * r * (double)dout[i]);
    }
}

/* ------------------------------------------------------------------- RoPE */

/* Rotate the q and k heads of x (B,T,(NH + 2 NKV) D) in place by sign * t * inv_freq[i]. */
static void RL_FN(rope_rotate)(real *x, const real *inv_freq, int B, int T, int NH, int NKV, int D,
                               double sign)
{
    int half = D / 2;
    size_t W = (size_t)(NH + 2 * NKV) * D; /* one position's row */
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real *row = x + ((size_t)b * T + t) * W;
            for (int h = 0; h < NH + NKV; h++) { /* q heads, then k heads */
                real *v = row + (size_t)h * D;   /* (D) */
                for (int i = 0; i < half; i++) {
                    double a = sign * (double)t * (double)inv_freq[i];
                    double cs = cos(a), sn = sin(a), x1 = v[i], x2 = v[i + half];
                    v[i] = (real)(x1 * cs - x2 * sn);
                    v[i + half] = (real)(x2 * cs + x1 * sn);
                }
            }
        }
    }
}

void RL_FN(vkg_ref_rope_fwd)(real *qkv, const real *inv_freq, int B, int T, int NH, int NKV, int D)
{
    RL_FN(rope_rotate)(qkv, inv_freq, B, T, NH, NKV, D, 1.0);
}

void RL_FN(vkg_ref_rope_bwd)(real *dqkv, const real *inv_freq, int B, int T, int NH, int NKV, int D)
{
    RL_FN(rope_rotate)(dqkv, inv_freq, B, T, NH, NKV, D, -1.0);
}

/* ------------------------------------------------- grouped-query attention */

/* Query rows whose softmax-gradient row sums the backward keeps on the stack at once. */
#define RL_TBLOCK 256

static double RL_FN(gqa_dot)(const real *a, const real *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

/* Straight from the definition: per (batch, query row t, query head h) with kv head
 * g = h / (NH/NKV), scores s[t2] = q[t,h] . k[t2,g] / sqrt(D) for t2 <= t, the maximum, then
 * lse = max + log sum exp(s - max) and out = sum softmax(s)[t2] v[t2,g], all in double (scores
 * recomputed in each pass: nothing is allocated). */
void RL_FN(vkg_ref_attention_gqa_fwd)(real *out, real *lse, const real *qkv, int B, int T, int NH,
                                      int NKV, int D)
{
    size_t OC = (size_t)NH * D, LD = OC + 2 * (size_t)NKV * D;
    int G = NH / NKV;
    double scale = 1.0 / sqrt((double)D), acc[RL_CHUNK];
    for (int b = 0; b < B; b++) {
        const real *x = qkv + (size_t)b * T * LD; /* (T, LD) */
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const real *q = x + (size_t)t * LD + (size_t)h * D;
                const real *k = x + OC + (size_t)(h / G) * D; /* row t2 at t2*LD */
                const real *v = k + (size_t)NKV * D;          /* row t2 at t2*LD */
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    double sc = RL_FN(gqa_dot)(q, k + t2 * LD, D) * scale;
                    mx = sc > mx ? sc : mx;
                }
                for (int t2 = 0; t2 <= t; t2++)
                    sum += exp(RL_FN(gqa_dot)(q, k + t2 * LD, D) * scale - mx);
                lse[((size_t)b * NH + h) * T + t] = (real)(mx + log(sum));
                real *o = out + ((size_t)b * T + t) * OC + (size_t)h * D;
                for (int c0 = 0; c0 < D; c0 += RL_CHUNK) {
                    int nc = D - c0 < RL_CHUNK ? D - c0 : RL_CHUNK;
                    for (int j = 0; j < nc; j++)
                        acc[j] = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double a = exp(RL_FN(gqa_dot)(q, k + t2 * LD, D) * scale - mx);
                        for (int j = 0; j < nc; j++)
                            acc[j] += a * (double)v[t2 * LD + c0 + j];
                    }
                    for (int j = 0; j < nc; j++)
                        o[c0 + j] = (real)(acc[j] / sum);
                }
            }
        }
    }
}

/* With P[t,t2] = exp(q[t] . k[t2] / sqrt(D) - lse[t]) (query head h, kv head g = h / (NH/NKV)),
 * dP[t,t2] = dout[t] . v[t2], r[t] = sum_t2 P dP and dS = P (dP - r):
 *   dq[t,h] += sum_t2 dS k[t2,g] / sqrt(D)
 *   dk[t2,g] += sum_{h in g} sum_t dS q[t,h] / sqrt(D)     dv[t2,g] += sum_{h in g} sum_t P
 * dout[t,h] Per query head, in blocks of RL_TBLOCK query rows: each block's sums for one output
 * element are one double sum, added to the gradient (so the group's heads add one after another).
 */
void RL_FN(vkg_ref_attention_gqa_bwd)(real *dqkv, const real *dout, const real *qkv,
                                      const real *lse, int B, int T, int NH, int NKV, int D)
{
    size_t OC = (size_t)NH * D, LD = OC + 2 * (size_t)NKV * D;
    int G = NH / NKV;
    double scale = 1.0 / sqrt((double)D);
    double r[RL_TBLOCK], acc1[RL_CHUNK], acc2[RL_CHUNK];
    for (int b = 0; b < B; b++) {
        const real *x = qkv + (size_t)b * T * LD;
        real *dx = dqkv + (size_t)b * T * LD;
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)h * D, ko = OC + (size_t)(h / G) * D, vo = ko + (size_t)NKV * D;
            const real *dy = dout + (size_t)b * T * OC + qo; /* row t at t*OC */
            const real *ls = lse + ((size_t)b * NH + h) * T;
#define RL_P(t, t2)                                                                                \
    exp(RL_FN(gqa_dot)(x + (size_t)(t)*LD + qo, x + (size_t)(t2)*LD + ko, D) * scale -             \
        (double)ls[t])
#define RL_DP(t, t2) RL_FN(gqa_dot)(dy + (size_t)(t)*OC, x + (size_t)(t2)*LD + vo, D)
            for (int t0 = 0; t0 < T; t0 += RL_TBLOCK) {
                int t1 = T - t0 < RL_TBLOCK ? T : t0 + RL_TBLOCK;
                for (int t = t0; t < t1; t++) {
                    double a = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        a += RL_P(t, t2) * RL_DP(t, t2);
                    r[t - t0] = a;
                }
                for (int t = t0; t < t1; t++)
                    for (int c0 = 0; c0 < D; c0 += RL_CHUNK) {
                        int nc = D - c0 < RL_CHUNK ? D - c0 : RL_CHUNK;
                        for (int j = 0; j < nc; j++)
                            acc1[j] = 0.0;
                        for (int t2 = 0; t2 <= t; t2++) {
                            double ds = RL_P(t, t2) * (RL_DP(t, t2) - r[t - t0]);
                            for (int j = 0; j < nc; j++)
                                acc1[j] += ds * (double)x[(size_t)t2 * LD + ko + c0 + j];
                        }
                        real *dq = dx + (size_t)t * LD + qo + c0;
                        for (int j = 0; j < nc; j++)
                            dq[j] = (real)((double)dq[j] + scale * acc1[j]);
                    }
                for (int t2 = 0; t2 < t1; t2++)
                    for (int c0 = 0; c0 < D; c0 += RL_CHUNK) {
                        int nc = D - c0 < RL_CHUNK ? D - c0 : RL_CHUNK;
                        for (int j = 0; j < nc; j++)
                            acc1[j] = acc2[j] = 0.0;
                        for (int t = t2 > t0 ? t2 : t0; t < t1; t++) {
                            double p = RL_P(t, t2), ds = p * (RL_DP(t, t2) - r[t - t0]);
                            const real *q = x + (size_t)t * LD + qo, *d = dy + (size_t)t * OC;
                            for (int j = 0; j < nc; j++) {
                                acc1[j] += ds * (double)q[c0 + j];
                                acc2[j] += p * (double)d[c0 + j];
                            }
                        }
                        real *dk = dx + (size_t)t2 * LD + ko + c0;
                        real *dv = dx + (size_t)t2 * LD + vo + c0;
                        for (int j = 0; j < nc; j++) {
                            dk[j] = (real)((double)dk[j] + scale * acc1[j]);
                            dv[j] = (real)((double)dv[j] + acc2[j]);
                        }
                    }
#undef RL_P
#undef RL_DP
            }
        }
    }
}

#undef RL_TBLOCK
#undef RL_CHUNK
#undef RL_FN
#undef RL_CAT
#undef RL_CAT_
