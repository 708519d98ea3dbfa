/* Template of the CPU reference ops of the Llama-family layers declared in ref.h (RMSNorm,
 * SwiGLU, ReLU^2, rotary position embedding), instantiated once per precision after ref_impl.h,
 * with the same contract: the includer defines `real` and REF_SFX; every reduction accumulates in
 * double and elementwise math is done in double, rounded once on store. Written from the
 * published definitions (RMSNorm: Zhang & Sennrich 2019; SwiGLU: Shazeer 2020; ReLU^2: So et al.
 * 2021; RoPE: Su et al. 2021 in Hugging Face transformers' rotate_half form), not from the
 * shaders. No include guard on purpose; this is not a public header.
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

#undef RL_CHUNK
#undef RL_FN
#undef RL_CAT
#undef RL_CAT_
