/* Template of the CPU reference ops declared in ref.h, instantiated once per precision.
 *
 * The includer (ref_f32.c, ref_f64.c) includes the system headers and ref/ref.h, then defines
 *   real     the element type (float or double)
 *   REF_SFX  the name suffix (empty or _f64)
 * and includes this file once. Every reduction (dot products, row and column sums, mean and
 * variance, softmax sums, sums over repeated tokens, sum of squares) accumulates in double
 * whatever `real` is; elementwise math is done in double and rounded once on store. Long
 * reductions over columns use CHUNK doubles on the stack, so nothing is allocated. There is no
 * include guard on purpose; this is not a public header.
 */
#if !defined(real) || !defined(REF_SFX)
#error "define real and REF_SFX before including ref_impl.h"
#endif

#define REF_CAT_(a, b) a##b
#define REF_CAT(a, b) REF_CAT_(a, b)
#define REF_FN(name) REF_CAT(name, REF_SFX)

/* Columns accumulated at once in a stack array of doubles. */
#define CHUNK 64
/* Query positions whose softmax-gradient terms attention_bwd keeps on the stack at once; for
 * T <= TBLOCK the key and value gradients are a single double sum over all queries. */
#define TBLOCK 256

static double dot(const real *a, const real *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* ---------------------------------------------------------------- encoder */

void REF_FN(vkg_ref_encoder_fwd)(real *out, const int32_t *inp, const real *wte, const real *wpe,
                                 int B, int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real *o = out + ((size_t)b * T + t) * C;                  /* (C) */
            const real *e = wte + (size_t)inp[(size_t)b * T + t] * C; /* (C) */
            const real *p = wpe + (size_t)t * C;                      /* (C) */
            for (int c = 0; c < C; c++)
                o[c] = (real)((double)e[c] + (double)p[c]);
        }
    }
}

/* Every distinct token's gradient row is the double sum of dout over all its positions, added
 * to dwte once; every position's row of dwpe is the double sum over the batch. */
void REF_FN(vkg_ref_encoder_bwd)(real *dwte, real *dwpe, const real *dout, const int32_t *inp,
                                 int B, int T, int C)
{
    size_t BT = (size_t)B * T;
    double acc[CHUNK];
    for (size_t i = 0; i < BT; i++) {
        int32_t tok = inp[i];
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = inp[j] == tok;
        if (seen)
            continue;
        for (int c0 = 0; c0 < C; c0 += CHUNK) {
            int nc = min_int(CHUNK, C - c0);
            for (int j = 0; j < nc; j++)
                acc[j] = 0.0;
            for (size_t k = i; k < BT; k++) {
                if (inp[k] != tok)
                    continue;
                const real *d = dout + k * C + c0;
                for (int j = 0; j < nc; j++)
                    acc[j] += (double)d[j];
            }
            real *g = dwte + (size_t)tok * C + c0;
            for (int j = 0; j < nc; j++)
                g[j] = (real)((double)g[j] + acc[j]);
        }
    }
    for (int t = 0; t < T; t++) {
        for (int c0 = 0; c0 < C; c0 += CHUNK) {
            int nc = min_int(CHUNK, C - c0);
            for (int j = 0; j < nc; j++)
                acc[j] = 0.0;
            for (int b = 0; b < B; b++) {
                const real *d = dout + ((size_t)b * T + t) * C + c0;
                for (int j = 0; j < nc; j++)
                    acc[j] += (double)d[j];
            }
            real *g = dwpe + (size_t)t * C + c0;
            for (int j = 0; j < nc; j++)
                g[j] = (real)((double)g[j] + acc[j]);
        }
    }
}

/* -------------------------------------------------------------- layernorm */

void REF_FN(vkg_ref_layernorm_fwd)(real *out, real *mean, real *rstd, const real *inp,
                                   const real *weight, const real *bias, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C; /* (C) */
        real *o = out + (size_t)n * C;       /* (C) */
        double m = 0.0, var = 0.0;
        for (int c = 0; c < C; c++)
            m += (double)x[c];
        m /= C;
        for (int c = 0; c < C; c++) {
            double d = (double)x[c] - m;
            var += d * d;
        }
        var /= C;
        double s = 1.0 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++)
            o[c] = (real)(((double)x[c] - m) * s * (double)weight[c] + (double)bias[c]);
        mean[n] = (real)m;
        rstd[n] = (real)s;
    }
}

void REF_FN(vkg_ref_layernorm_bwd)(real *dinp, real *dweight, real *dbias, const real *dout,
                                   const real *inp, const real *weight, const real *mean,
                                   const real *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        real *di = dinp + (size_t)n * C;
        double m = mean[n], s = rstd[n];
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int c = 0; c < C; c++) {
            double dnorm = (double)weight[c] * (double)d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * ((double)x[c] - m) * s;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            double norm = ((double)x[c] - m) * s;
            double dnorm = (double)weight[c] * (double)d[c];
            double dval = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
            di[c] = (real)((double)di[c] + dval);
        }
    }
    double accw[CHUNK], accb[CHUNK];
    for (int c0 = 0; c0 < C; c0 += CHUNK) {
        int nc = min_int(CHUNK, C - c0);
        for (int j = 0; j < nc; j++)
            accw[j] = accb[j] = 0.0;
        for (int n = 0; n < N; n++) {
            const real *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
            double m = mean[n], s = rstd[n];
            for (int j = 0; j < nc; j++) {
                accw[j] += ((double)x[j] - m) * s * (double)d[j];
                accb[j] += (double)d[j];
            }
        }
        for (int j = 0; j < nc; j++) {
            dweight[c0 + j] = (real)((double)dweight[c0 + j] + accw[j]);
            dbias[c0 + j] = (real)((double)dbias[c0 + j] + accb[j]);
        }
    }
}

/* ----------------------------------------------------------------- matmul */

void REF_FN(vkg_ref_matmul_fwd)(real *out, const real *inp, const real *weight, const real *bias,
                                int N, int C, int OC)
{
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        real *o = out + (size_t)n * OC;
        for (int oc = 0; oc < OC; oc++) {
            double s = dot(x, weight + (size_t)oc * C, C);
            if (bias)
                s += (double)bias[oc];
            o[oc] = (real)s;
        }
    }
}

void REF_FN(vkg_ref_matmul_bwd)(real *dinp, real *dweight, real *dbias, const real *dout,
                                const real *inp, const real *weight, int N, int C, int OC)
{
    double acc[CHUNK];
    /* dinp[n, c] += sum_oc dout[n, oc] weight[oc, c] */
    for (int n = 0; n < N; n++) {
        const real *d = dout + (size_t)n * OC;
        for (int c0 = 0; c0 < C; c0 += CHUNK) {
            int nc = min_int(CHUNK, C - c0);
            for (int j = 0; j < nc; j++)
                acc[j] = 0.0;
            for (int oc = 0; oc < OC; oc++) {
                double g = d[oc];
                const real *w = weight + (size_t)oc * C + c0;
                for (int j = 0; j < nc; j++)
                    acc[j] += g * (double)w[j];
            }
            real *di = dinp + (size_t)n * C + c0;
            for (int j = 0; j < nc; j++)
                di[j] = (real)((double)di[j] + acc[j]);
        }
    }
    /* dweight[oc, c] += sum_n dout[n, oc] inp[n, c]; dbias[oc] += sum_n dout[n, oc] */
    for (int oc = 0; oc < OC; oc++) {
        for (int c0 = 0; c0 < C; c0 += CHUNK) {
            int nc = min_int(CHUNK, C - c0);
            for (int j = 0; j < nc; j++)
                acc[j] = 0.0;
            for (int n = 0; n < N; n++) {
                double g = dout[(size_t)n * OC + oc];
                const real *x = inp + (size_t)n * C + c0;
                for (int j = 0; j < nc; j++)
                    acc[j] += g * (double)x[j];
            }
            real *dw = dweight + (size_t)oc * C + c0;
            for (int j = 0; j < nc; j++)
                dw[j] = (real)((double)dw[j] + acc[j]);
        }
        if (dbias) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                s += (double)dout[(size_t)n * OC + oc];
            dbias[oc] = (real)((double)dbias[oc] + s);
        }
    }
}

/* -------------------------------------------------------------- attention */

/* Scaled score of query row t against key row t2 of one head, in double. */
static double score(const real *q, const real *k, int hs, double scale)
{
    return dot(q, k, hs) * scale;
}

/* Per (batch, row, head): the maximum of the scaled scores, then the sum of exp(s - max) and,
 * per chunk of channels, the sum of exp(s - max) v, all in double; scores are recomputed for
 * each pass rather than stored (the function allocates nothing). */
void REF_FN(vkg_ref_attention_fwd)(real *out, real *lse, real *att, const real *qkv, int B, int T,
                                   int C, int NH)
{
    size_t C3 = 3 * (size_t)C;
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double acc[CHUNK];
    for (int b = 0; b < B; b++) {
        const real *qkv_b = qkv + (size_t)b * T * C3; /* (T, 3C) */
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const real *q = qkv_b + t * C3 + (size_t)h * hs;
                const real *k = qkv_b + C + (size_t)h * hs;     /* row t2 at t2*C3 */
                const real *v = qkv_b + 2 * C + (size_t)h * hs; /* row t2 at t2*C3 */
                size_t row = ((size_t)b * NH + h) * T + t;
                double maxv = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    double s = score(q, k + t2 * C3, hs, scale);
                    maxv = s > maxv ? s : maxv;
                }
                for (int t2 = 0; t2 <= t; t2++)
                    sum += exp(score(q, k + t2 * C3, hs, scale) - maxv);
                lse[row] = (real)(maxv + log(sum));
                if (att) {
                    real *a = att + row * T; /* (T) */
                    for (int t2 = 0; t2 < T; t2++)
                        a[t2] = t2 <= t ? (real)(exp(score(q, k + t2 * C3, hs, scale) - maxv) / sum)
                                        : 0;
                }
                /* out[t, head h] = sum_t2 softmax(s)[t2] v[t2] */
                real *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int c0 = 0; c0 < hs; c0 += CHUNK) {
                    int nc = min_int(CHUNK, hs - c0);
                    for (int j = 0; j < nc; j++)
                        acc[j] = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double a = exp(score(q, k + t2 * C3, hs, scale) - maxv);
                        for (int j = 0; j < nc; j++)
                            acc[j] += a * (double)v[t2 * C3 + c0 + j];
                    }
                    for (int j = 0; j < nc; j++)
                        o[c0 + j] = (real)(acc[j] / sum);
                }
            }
        }
    }
}

/* With att[t,t2] = exp(scale q[t] . k[t2] - lse[t]) recomputed, datt[t,t2] = dout[t] . v[t2] and
 * s[t] = sum_t2 att[t,t2] datt[t,t2], the gradient of the pre-softmax score is
 * dpre[t,t2] = att[t,t2] (datt[t,t2] - s[t]); then
 *   dq[t] += scale sum_t2 dpre[t,t2] k[t2]     dk[t2] += scale sum_t dpre[t,t2] q[t]
 *   dv[t2] += sum_t att[t,t2] dout[t].
 * Each of the three is gathered as one double sum per output element (att and datt are
 * recomputed rather than stored); for T > TBLOCK the key and value sums are split into
 * TBLOCK-query partial sums. */
void REF_FN(vkg_ref_attention_bwd)(real *dqkv, const real *dout, const real *qkv, const real *lse,
                                   int B, int T, int C, int NH)
{
    size_t C3 = 3 * (size_t)C;
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double s[TBLOCK], acc1[CHUNK], acc2[CHUNK];
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)h * hs, ko = C + qo, vo = 2 * (size_t)C + qo;
            const real *qkv_b = qkv + (size_t)b * T * C3;        /* (T, 3C) */
            real *dqkv_b = dqkv + (size_t)b * T * C3;            /* (T, 3C) */
            const real *do_b = dout + (size_t)b * T * C + qo;    /* row t at t*C */
            const real *lse_bh = lse + ((size_t)b * NH + h) * T; /* (T) */
#define ATT(t, t2)                                                                                 \
    exp(score(qkv_b + (size_t)(t)*C3 + qo, qkv_b + (size_t)(t2)*C3 + ko, hs, scale) -              \
        (double)lse_bh[t])
            for (int t0 = 0; t0 < T; t0 += TBLOCK) {
                int t1 = min_int(T, t0 + TBLOCK);
                for (int t = t0; t < t1; t++) {
                    double acc = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        acc += ATT(t, t2) * dot(do_b + (size_t)t * C, qkv_b + t2 * C3 + vo, hs);
                    s[t - t0] = acc;
                }
                for (int t = t0; t < t1; t++) {
                    const real *d = do_b + (size_t)t * C;
                    for (int c0 = 0; c0 < hs; c0 += CHUNK) {
                        int nc = min_int(CHUNK, hs - c0);
                        for (int j = 0; j < nc; j++)
                            acc1[j] = 0.0;
                        for (int t2 = 0; t2 <= t; t2++) {
                            const real *k = qkv_b + t2 * C3 + ko;
                            double dpre =
                                ATT(t, t2) * (dot(d, qkv_b + t2 * C3 + vo, hs) - s[t - t0]);
                            for (int j = 0; j < nc; j++)
                                acc1[j] += dpre * (double)k[c0 + j];
                        }
                        real *dq = dqkv_b + t * C3 + qo + c0;
                        for (int j = 0; j < nc; j++)
                            dq[j] = (real)((double)dq[j] + scale * acc1[j]);
                    }
                }
                for (int t2 = 0; t2 < t1; t2++) {
                    const real *v = qkv_b + t2 * C3 + vo;
                    for (int c0 = 0; c0 < hs; c0 += CHUNK) {
                        int nc = min_int(CHUNK, hs - c0);
                        for (int j = 0; j < nc; j++)
                            acc1[j] = acc2[j] = 0.0;
                        for (int t = t2 > t0 ? t2 : t0; t < t1; t++) {
                            const real *d = do_b + (size_t)t * C;
                            const real *q = qkv_b + t * C3 + qo;
                            double a = ATT(t, t2);
                            double dpre = a * (dot(d, v, hs) - s[t - t0]);
                            for (int j = 0; j < nc; j++) {
                                acc1[j] += dpre * (double)q[c0 + j];
                                acc2[j] += a * (double)d[c0 + j];
                            }
                        }
                        real *dk = dqkv_b + t2 * C3 + ko + c0, *dv = dqkv_b + t2 * C3 + vo + c0;
                        for (int j = 0; j < nc; j++) {
                            dk[j] = (real)((double)dk[j] + scale * acc1[j]);
                            dv[j] = (real)((double)dv[j] + acc2[j]);
                        }
                    }
                }
            }
#undef ATT
        }
    }
}

/* ------------------------------------------------------------ elementwise */

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_A 0.044715

void REF_FN(vkg_ref_gelu_fwd)(real *out, const real *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = (real)(0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_A * x * x * x))));
    }
}

void REF_FN(vkg_ref_gelu_bwd)(real *dinp, const real *inp, const real *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        double th = tanh(GELU_K * (x + GELU_A * x * x * x));
        double sech2 = 1.0 - th * th;
        double local = 0.5 * (1.0 + th) + 0.5 * x * sech2 * GELU_K * (1.0 + 3.0 * GELU_A * x * x);
        dinp[i] = (real)((double)dinp[i] + local * (double)dout[i]);
    }
}

void REF_FN(vkg_ref_residual_fwd)(real *out, const real *a, const real *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (real)((double)a[i] + (double)b[i]);
}

void REF_FN(vkg_ref_residual_bwd)(real *da, real *db, const real *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        da[i] = (real)((double)da[i] + (double)dout[i]);
        db[i] = (real)((double)db[i] + (double)dout[i]);
    }
}

/* ------------------------------------------------------------ cross-entropy */

void REF_FN(vkg_ref_xent_fwd_bwd)(real *losses, real *dlogits, const real *logits,
                                  const int32_t *targets, int N, int V, int Vp, real dloss)
{
    for (int i = 0; i < N; i++) {
        const real *x = logits + (size_t)i * Vp; /* (Vp), only [0, V) read */
        int32_t y = targets[i];
        assert(y >= 0 && y < V);
        double maxv = x[0];
        for (int c = 1; c < V; c++)
            if ((double)x[c] > maxv)
                maxv = x[c];
        double sum = 0.0;
        for (int c = 0; c < V; c++)
            sum += exp((double)x[c] - maxv);
        double lse = maxv + log(sum);
        if (losses)
            losses[i] = (real)(lse - (double)x[y]);
        if (!dlogits)
            continue;
        /* x[c] is read before d[c] is written, so d may alias x */
        real *d = dlogits + (size_t)i * Vp;
        for (int c = 0; c < V; c++) {
            double p = exp((double)x[c] - lse);
            d[c] = (real)((double)dloss * (p - (c == y ? 1.0 : 0.0)));
        }
        for (int c = V; c < Vp; c++)
            d[c] = 0;
    }
}

/* ------------------------------------------------------------------ AdamW */

void REF_FN(vkg_ref_adamw)(real *param, const real *grad, real *m, real *v, size_t n, real lr,
                           real beta1, real beta2, real eps, real weight_decay, int t,
                           real grad_scale)
{
    double b1 = beta1, b2 = beta2;
    double b1c = 1.0 - pow(b1, t), b2c = 1.0 - pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grad[i] * (double)grad_scale;
        double mi = b1 * (double)m[i] + (1.0 - b1) * g;
        double vi = b2 * (double)v[i] + (1.0 - b2) * g * g;
        m[i] = (real)mi;
        v[i] = (real)vi;
        double mhat = mi / b1c, vhat = vi / b2c, p = param[i];
        param[i] =
            (real)(p - (double)lr * (mhat / (sqrt(vhat) + (double)eps) + (double)weight_decay * p));
    }
}

/* ------------------------------------------------------------------ misc */

double REF_FN(vkg_ref_sumsq)(const real *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return s;
}

void REF_FN(vkg_ref_fill)(real *x, real value, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

void REF_FN(vkg_ref_scale)(real *x, real factor, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (real)((double)x[i] * (double)factor);
}

#undef GELU_K
#undef GELU_A
#undef CHUNK
#undef TBLOCK
#undef REF_FN
#undef REF_CAT
#undef REF_CAT_
