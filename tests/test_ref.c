/* Tests of the CPU reference ops (src/ref/ref.h).
 *
 * Every backward is checked against central finite differences in double: for a fixed random g,
 * L = sum(out * g), and the analytic gradient of L is compared with (L(x+h) - L(x-h)) / 2h per
 * coordinate, h = 5e-6 (about eps^(1/3), where truncation and rounding errors balance). Error
 * per coordinate: |a - n| / max(|a|, |n|, 1e-3 * max|a| of the tensor) (vkg_ref_fd_check);
 * bound FD_BOUND = 1e-6 (measured: 5e-7 at worst, mostly 1e-8 and below). Gradients are
 * pre-filled with 0.25 and the 0.25 subtracted afterwards, so each check also proves the backward
 * accumulates.
 * Then forward facts with known answers, AdamW against a hand computation, float against
 * double, and one deliberately wrong gradient to show the checker bites.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/fd_check.h"
#include "ref/ref.h"
#include "testutil.h"

#define FD_H 5e-6
#define FD_BOUND 1e-6
#define PRE 0.25 /* gradient pre-fill */

static double *dnew(vkg_test_rng *r, size_t n, double lo, double hi)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    if (r)
        vkg_test_fill_uniform_f64(r, x, n, lo, hi);
    return x;
}

static void dadd(double *x, size_t n, double v)
{
    for (size_t i = 0; i < n; i++)
        x[i] += v;
}

#define dot_sum vkg_ref_dot_compensated

/* vkg_ref_fd_check with a printed summary line; returns the largest error */
static double fd_check(const char *what, double *x, const double *grad, size_t n, size_t count,
                       vkg_ref_objective_fn f, void *ctx)
{
    vkg_ref_fd_result_t r = vkg_ref_fd_check(x, grad, n, count, FD_H, n * 31 + count, f, ctx);
    printf("fd %-28s %5zu of %5zu coords  max rel err %.2e (at %zu: %.9g vs %.9g)\n", what,
           r.checked, n, r.max_err, r.worst, r.analytic, r.numeric);
    return r.max_err;
}

/* ------------------------------------------------- finite-difference cases */

enum op { ENC, LN, MM, ATT, GELU, RES, XENT };

/* One op under finite differences: inputs x[k] (perturbed in place), analytic gradients d[k],
 * output out, fixed upstream gradient g. */
typedef struct fd_case {
    enum op op;
    int B, T, C, OC, NH, N, V, Vp;
    int32_t *ids;
    int keep; /* run_case leaves the arrays allocated */
    size_t nx[3], nout;
    double *x[3], *d[3], *out, *aux, *aux2, *g;
} fd_case;

static double objective(void *p)
{
    fd_case *c = p;
    switch (c->op) {
    case ENC:
        vkg_ref_encoder_fwd_f64(c->out, c->ids, c->x[0], c->x[1], c->B, c->T, c->C);
        break;
    case LN:
        vkg_ref_layernorm_fwd_f64(c->out, c->aux, c->aux2, c->x[0], c->x[1], c->x[2], c->N, c->C);
        break;
    case MM:
        vkg_ref_matmul_fwd_f64(c->out, c->x[0], c->x[1], c->x[2], c->N, c->C, c->OC);
        break;
    case ATT:
        vkg_ref_attention_fwd_f64(c->out, c->aux, NULL, c->x[0], c->B, c->T, c->C, c->NH);
        break;
    case GELU:
        vkg_ref_gelu_fwd_f64(c->out, c->x[0], c->nout);
        break;
    case RES:
        vkg_ref_residual_fwd_f64(c->out, c->x[0], c->x[1], c->nout);
        break;
    case XENT: /* L = g[0] * sum(losses) */
        vkg_ref_xent_fwd_bwd_f64(c->out, NULL, c->x[0], c->ids, c->N, c->V, c->Vp, 0.0);
        return c->g[0] * dot_sum(c->out, c->aux, c->nout);
    }
    return dot_sum(c->out, c->g, c->nout);
}

static void backward(fd_case *c)
{
    double **d = c->d;
    switch (c->op) {
    case ENC:
        vkg_ref_encoder_bwd_f64(d[0], d[1], c->g, c->ids, c->B, c->T, c->C);
        break;
    case LN:
        vkg_ref_layernorm_bwd_f64(d[0], d[1], d[2], c->g, c->x[0], c->x[1], c->aux, c->aux2, c->N,
                                  c->C);
        break;
    case MM:
        vkg_ref_matmul_bwd_f64(d[0], d[1], d[2], c->g, c->x[0], c->x[1], c->N, c->C, c->OC);
        break;
    case ATT:
        vkg_ref_attention_bwd_f64(d[0], c->g, c->x[0], c->aux, c->B, c->T, c->C, c->NH);
        break;
    case GELU:
        vkg_ref_gelu_bwd_f64(d[0], c->x[0], c->g, c->nout);
        break;
    case RES:
        vkg_ref_residual_bwd_f64(d[0], d[1], c->g, c->nout);
        break;
    case XENT:
        vkg_ref_xent_fwd_bwd_f64(c->out, d[0], c->x[0], c->ids, c->N, c->V, c->Vp, c->g[0]);
        break;
    }
}

static void free_case(fd_case *c)
{
    for (int k = 0; k < 3; k++)
        free(c->x[k]), free(c->d[k]);
    free(c->out), free(c->aux), free(c->aux2), free(c->g);
}

/* Allocate inputs of the given sizes (uniform in [lo, hi)), their gradients, output and g; run
 * the forward and the backward on gradients pre-filled with PRE; check `count` coordinates of
 * every input with a nonzero size against finite differences. Frees the case unless c->keep. */
static void run_case(fd_case *c, const char *name, const size_t nx[3], double lo, double hi,
                     size_t naux, size_t count)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, c->op * 1000 + nx[0]);
    for (int k = 0; k < 3; k++) {
        c->nx[k] = nx[k];
        c->x[k] = nx[k] ? dnew(&r, nx[k], lo, hi) : NULL;
        c->d[k] = nx[k] ? dnew(NULL, nx[k], 0, 0) : NULL;
        dadd(c->d[k], nx[k], PRE);
    }
    c->out = dnew(NULL, c->nout, 0, 0);
    c->aux = dnew(NULL, naux, 0, 0);
    c->aux2 = dnew(NULL, naux, 0, 0);
    c->g = dnew(&r, c->nout, -1, 1);
    if (c->op == XENT) {
        dadd(c->aux, c->nout, 1.0), c->g[0] = 0.37; /* dloss */
        for (int i = 0; i < c->N; i++)
            for (int v = c->V; v < c->Vp; v++)
                c->x[0][(size_t)i * c->Vp + v] = 1e3; /* would dominate if not masked */
    }
    objective(c);
    backward(c);
    for (int k = 0; k < 3 && nx[k]; k++) {
        char what[64];
        if (c->op != XENT)
            dadd(c->d[k], nx[k], -PRE);
        snprintf(what, sizeof what, "%s d%d", name, k);
        assert_true(fd_check(what, c->x[k], c->d[k], nx[k], count, objective, c) < FD_BOUND);
    }
    if (!c->keep)
        free_case(c);
}

static void test_fd_encoder(void **state)
{
    (void)state;
    int32_t ids[14];
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 1);
    vkg_test_fill_int(&r, ids, 14, 5); /* 14 positions over V = 5 tokens: repeats */
    /* C = 67 crosses the 64-column chunk; wpe has maxT = 8 > T rows (those get no gradient) */
    fd_case c = {.op = ENC, .B = 2, .T = 7, .C = 67, .ids = ids, .nout = 2 * 7 * 67};
    run_case(&c, "encoder 2x7x67 dwte,dwpe", (size_t[3]){5 * 67, 8 * 67, 0}, -1, 1, 0, 1000);
}

static void test_fd_layernorm(void **state)
{
    (void)state;
    int shapes[][2] = {{5, 67}, {3, 7}, {1, 3}, {2, 1}}; /* C = 1: out = bias, dinp = 0 */
    for (int i = 0; i < 4; i++) {
        int N = shapes[i][0], C = shapes[i][1];
        fd_case c = {.op = LN, .N = N, .C = C, .nout = (size_t)N * C};
        char name[48];
        snprintf(name, sizeof name, "layernorm %dx%d", N, C);
        run_case(&c, name, (size_t[3]){(size_t)N * C, (size_t)C, (size_t)C}, -2, 3, (size_t)N, 400);
    }
}

static void test_fd_matmul(void **state)
{
    (void)state;
    int shapes[][3] = {{5, 70, 67}, {1, 3, 1}, {4, 9, 5}}; /* C and OC cross the chunk */
    for (int i = 0; i < 3; i++) {
        int N = shapes[i][0], C = shapes[i][1], OC = shapes[i][2];
        fd_case c = {.op = MM, .N = N, .C = C, .OC = OC, .nout = (size_t)N * OC};
        char name[48];
        snprintf(name, sizeof name, "matmul %dx%dx%d", N, C, OC);
        run_case(&c, name, (size_t[3]){(size_t)N * C, (size_t)OC * C, (size_t)OC}, -1, 1, 0, 300);
    }
    /* bias NULL: the forward adds none and the backward writes no dbias */
    double in[6] = {1, 2, 3, 4, 5, 6}, w[3] = {1, -1, 2}, out[2], di[6] = {0}, dw[3] = {0};
    vkg_ref_matmul_fwd_f64(out, in, w, NULL, 2, 3, 1);
    assert_true(out[0] == 5.0 && out[1] == 11.0);
    vkg_ref_matmul_bwd_f64(di, dw, NULL, out, in, w, 2, 3, 1);
    assert_true(dw[0] == 49.0 && di[5] == 22.0);
}

static void test_fd_attention(void **state)
{
    (void)state;
    int shapes[][5] = {
        {2, 5, 12, 3, 1000}, /* every coordinate */
        {1, 1, 8, 2, 1000},  /* T = 1: dq = dk = 0, dv = dout */
        {2, 3, 10, 2, 1000}, /* odd head size 5 */
        {1, 3, 134, 2, 400}, /* head size 67 crosses the 64-column chunk */
        {1, 259, 6, 2, 120}, /* T crosses the 256-query block */
    };
    for (int i = 0; i < 5; i++) {
        int B = shapes[i][0], T = shapes[i][1], C = shapes[i][2], NH = shapes[i][3];
        fd_case c = {.op = ATT, .B = B, .T = T, .C = C, .NH = NH, .nout = (size_t)B * T * C};
        char name[48];
        snprintf(name, sizeof name, "attention %dx%dx%d/%d", B, T, C, NH);
        run_case(&c, name, (size_t[3]){(size_t)B * T * 3 * C, 0, 0}, -1.5, 1.5, (size_t)B * NH * T,
                 (size_t)shapes[i][4]);
    }
}

static void test_fd_gelu_residual(void **state)
{
    (void)state;
    fd_case c = {.op = GELU, .nout = 101}, c2 = {.op = RES, .nout = 37};
    run_case(&c, "gelu", (size_t[3]){101, 0, 0}, -4, 4, 0, 101);
    run_case(&c2, "residual", (size_t[3]){37, 37, 0}, -4, 4, 0, 37);
}

static void test_fd_xent(void **state)
{
    (void)state;
    enum { N = 6, V = 11, Vp = 16 };
    int32_t y[N];
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 6);
    vkg_test_fill_int(&r, y, N, V);
    fd_case c = {.op = XENT, .N = N, .V = V, .Vp = Vp, .ids = y, .nout = N, .keep = 1};
    run_case(&c, "xent dlogits", (size_t[3]){N * Vp, 0, 0}, -3, 3, N * Vp, N * Vp);
    for (int i = 0; i < N; i++) {
        assert_true(c.out[i] > 0.0 && c.out[i] < 20.0);
        for (int v = V; v < Vp; v++)
            assert_true(c.d[0][i * Vp + v] == 0.0); /* padding columns */
    }
    /* in place: dlogits aliasing logits gives the same bits */
    double alias[N * Vp];
    memcpy(alias, c.x[0], sizeof alias);
    vkg_ref_xent_fwd_bwd_f64(c.out, alias, alias, y, N, V, Vp, c.g[0]);
    assert_memory_equal(alias, c.d[0], sizeof alias);
    free_case(&c);
    /* all-equal logits, garbage padding (float version): loss ln V, dlogits 2 (1/V - onehot) */
    float lf[N * Vp], df[N * Vp], lossf[N];
    for (int i = 0; i < N * Vp; i++)
        lf[i] = (i % Vp) < V ? 1.5f : 1e3f;
    vkg_ref_xent_fwd_bwd(lossf, df, lf, y, N, V, Vp, 2.0f);
    for (int i = 0; i < N; i++) {
        assert_true(fabs(lossf[i] - log((double)V)) < 1e-6);
        for (int v = 0; v < Vp; v++)
            assert_true(v >= V ? df[i * Vp + v] == 0.0f
                               : fabs(df[i * Vp + v] - 2.0 * (1.0 / V - (v == y[i]))) < 1e-6);
    }
}

/* ------------------------------------------------------------------ AdamW */

static void test_adamw_hand(void **state)
{
    (void)state;
    enum { n = 4 };
    double p0[n] = {0.5, -1.25, 2.0, 0.0}, g[n] = {0.1, -0.3, 0.0, 2.5};
    double p[n], m[n] = {0}, v[n] = {0}, hp[n], hm[n] = {0}, hv[n] = {0};
    float pf[n], gf[n], mf[n] = {0}, vf[n] = {0};
    for (int i = 0; i < n; i++)
        hp[i] = p[i] = p0[i], pf[i] = (float)p0[i], gf[i] = (float)g[i];
    double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
    for (int t = 1; t <= 3; t++) {
        vkg_ref_adamw_f64(p, g, m, v, n, lr, b1, b2, eps, wd, t, gs);
        vkg_ref_adamw(pf, gf, mf, vf, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t,
                      (float)gs);
        for (int i = 0; i < n; i++) { /* by hand */
            double gg = g[i] * gs;
            hm[i] = 0.9 * hm[i] + 0.1 * gg;
            hv[i] = 0.95 * hv[i] + 0.05 * gg * gg;
            double mhat = hm[i] / (1.0 - pow(0.9, t)), vhat = hv[i] / (1.0 - pow(0.95, t));
            hp[i] -= 0.01 * (mhat / (sqrt(vhat) + 1e-8) + 0.1 * hp[i]);
        }
        for (int i = 0; i < n; i++) {
            assert_true(fabs(p[i] - hp[i]) <= 1e-14 * (1.0 + fabs(hp[i])));
            assert_true(fabs(m[i] - hm[i]) <= 1e-14 * fabs(hm[i]));
            assert_true(fabs(v[i] - hv[i]) <= 1e-14 * fabs(hv[i]));
            assert_true(fabs(pf[i] - hp[i]) <= 1e-6 * (1.0 + fabs(hp[i])));
        }
    }
    /* g = 0 only decays: 2 -> 2 (1 - 0.01 * 0.1)^3 */
    assert_true(fabs(p[2] - 2.0 * pow(0.999, 3)) < 1e-15);
}

/* --------------------------------------------------------- forward facts */

/* hand values: matmul's (out, in) layout and bias, the encoder, attention's 1/sqrt(hs) scale,
 * causal mask and head layout, the residual, GELU (and GELU(0) = 0 exactly) */
static void test_forward_values(void **state)
{
    (void)state;
    double in[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, -1, 2, 1, 0.5}, b[2] = {0.5, -1}, mm[4];
    vkg_ref_matmul_fwd_f64(mm, in, w, b, 2, 3, 2);
    assert_memory_equal(mm, ((double[4]){-1.5, 4.5, -1.5, 15.0}), sizeof mm);
    int32_t ids[2] = {2, 0};
    double wte[6] = {0, 1, 10, 11, 20, 21}, wpe[4] = {100, 200, 300, 400}, enc[4];
    vkg_ref_encoder_fwd_f64(enc, ids, wte, wpe, 1, 2, 2);
    assert_memory_equal(enc, ((double[4]){120, 221, 300, 401}), sizeof enc);
    double ra[3] = {1, 2, 3}, rb[3] = {0.5, -2, 4}, ro[3];
    vkg_ref_residual_fwd_f64(ro, ra, rb, 3);
    assert_memory_equal(ro, ((double[3]){1.5, 0.0, 7.0}), sizeof ro);
    /* T = 2, two heads of size 2; qkv row t = [q (4) | k (4) | v (4)], head h at 2h */
    double qkv[24], ao[8], att[8], lse[4];
    for (int i = 0; i < 24; i++)
        qkv[i] = 0.3 * ((i * 7) % 11) - 1.4;
    vkg_ref_attention_fwd_f64(ao, lse, att, qkv, 1, 2, 4, 2);
    for (int h = 0; h < 2; h++) {
        const double *q1 = qkv + 12 + 2 * h, *k0 = qkv + 4 + 2 * h, *k1 = qkv + 16 + 2 * h;
        const double *v0 = qkv + 8 + 2 * h, *v1 = qkv + 20 + 2 * h;
        double s0 = (q1[0] * k0[0] + q1[1] * k0[1]) / sqrt(2.0);
        double s1 = (q1[0] * k1[0] + q1[1] * k1[1]) / sqrt(2.0);
        double a0 = exp(s0) / (exp(s0) + exp(s1)); /* att (B,NH,T,T) */
        const double *q0 = qkv + 2 * h;
        /* lse (B,NH,T): row 0 sees key 0 only, row 1 both keys */
        assert_true(fabs(lse[h * 2] - (q0[0] * k0[0] + q0[1] * k0[1]) / sqrt(2.0)) < 1e-15);
        assert_true(fabs(lse[h * 2 + 1] - log(exp(s0) + exp(s1))) < 1e-14);
        assert_true(att[h * 4] == 1.0 && att[h * 4 + 1] == 0.0);
        assert_true(fabs(att[h * 4 + 2] - a0) < 1e-15 && fabs(att[h * 4 + 3] - (1 - a0)) < 1e-15);
        for (int i = 0; i < 2; i++) {
            assert_true(ao[2 * h + i] == v0[i]);
            assert_true(fabs(ao[4 + 2 * h + i] - (a0 * v0[i] + (1 - a0) * v1[i])) < 1e-15);
        }
    }
    /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated separately in Python */
    double x[] = {0.0, 1.0, -1.0, 2.0, -3.0, 0.5, 5.0};
    double want[] = {0.0,
                     0.8411919906082768,
                     -0.15880800939172324,
                     1.954597694087775,
                     -0.0036373920817729943,
                     0.34571400982514394,
                     4.999999770820381};
    double y[7];
    float xf[7] = {0.0f, 1.0f, -1.0f, 2.0f, -3.0f, 0.5f, 5.0f}, yf[7];
    vkg_ref_gelu_fwd_f64(y, x, 7);
    vkg_ref_gelu_fwd(yf, xf, 7);
    assert_true(y[0] == 0.0 && yf[0] == 0.0f);
    for (int i = 0; i < 7; i++) {
        assert_true(fabs(y[i] - want[i]) < 1e-15);
        assert_true(fabs(yf[i] - want[i]) < 1e-6);
        assert_true(fabs(y[i] - 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)))) < 1e-3); /* exact */
    }
}

static void test_layernorm_stats(void **state)
{
    (void)state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 7);
    enum { N = 4, C = 45 };
    double x[N * C], out[N * C], mean[N], rstd[N], w[C] = {0}, b[C] = {0};
    vkg_test_fill_uniform_f64(&r, x, N * C, -3, 5);
    dadd(w, C, 1.0);
    vkg_ref_layernorm_fwd_f64(out, mean, rstd, x, w, b, N, C);
    for (int n = 0; n < N; n++) {
        double mx = 0, vx = 0, mo = 0, vo = 0;
        for (int c = 0; c < C; c++)
            mx += x[n * C + c] / C, mo += out[n * C + c] / C;
        for (int c = 0; c < C; c++) {
            vx += (x[n * C + c] - mx) * (x[n * C + c] - mx) / C;
            vo += (out[n * C + c] - mo) * (out[n * C + c] - mo) / C;
        }
        assert_true(fabs(mo) < 1e-14);
        assert_true(fabs(vo - vx / (vx + 1e-5)) < 1e-13); /* biased variance, eps 1e-5 */
        assert_true(fabs(vo - 1.0) < 1e-4);
        assert_true(fabs(mean[n] - mx) < 1e-14 && fabs(rstd[n] - 1.0 / sqrt(vx + 1e-5)) < 1e-13);
    }
}

static void test_attention_probs(void **state)
{
    (void)state;
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 8);
    enum { B = 2, T = 6, C = 12, NH = 3, HS = C / NH };
    float qkv[B * T * 3 * C], out[B * T * C], att[B * NH * T * T], lse[B * NH * T];
    vkg_test_fill_uniform(&r, qkv, B * T * 3 * C, -2, 2);
    for (int i = 0; i < B * NH * T * T; i++)
        att[i] = NAN; /* poison: every entry must be written */
    for (int i = 0; i < B * NH * T; i++)
        lse[i] = NAN;
    vkg_ref_attention_fwd(out, lse, att, qkv, B, T, C, NH);
    for (int row = 0; row < B * NH * T; row++) {
        int t = row % T, h = row / T % NH, b = row / T / NH;
        double s = 0.0;
        for (int t2 = 0; t2 < T; t2++) {
            float a = att[row * T + t2];
            if (t2 > t) {
                assert_true(a == 0.0f);
                continue;
            }
            assert_true(a > 0.0f && a <= 1.0f);
            s += a;
            /* the probability is exp(score - lse): what the backward pass recomputes */
            const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
            const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * HS;
            double sc = 0.0;
            for (int c = 0; c < HS; c++)
                sc += (double)q[c] * k[c];
            assert_true(fabs(exp(sc / sqrt((double)HS) - lse[row]) - a) < 1e-6);
        }
        assert_true(fabs(s - 1.0) < 1e-6);
    }
    /* T = 1: attention to the only position, out = v exactly, lse = the one score */
    float q1[3 * C], o1[C], a1[NH], l1[NH];
    vkg_test_fill_uniform(&r, q1, 3 * C, -2, 2);
    vkg_ref_attention_fwd(o1, l1, a1, q1, 1, 1, C, NH);
    for (int h = 0; h < NH; h++) {
        double sc = 0.0;
        for (int c = 0; c < HS; c++)
            sc += (double)q1[h * HS + c] * q1[C + h * HS + c];
        assert_true(a1[h] == 1.0f);
        assert_true(fabs(l1[h] - sc / sqrt((double)HS)) < 1e-6);
    }
    assert_memory_equal(o1, q1 + 2 * C, sizeof o1);
}

/* ------------------------------------------------------- float vs double */

static void widen(double *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
}

/* float result vs the double result of the same op on the same (float) inputs */
static int agree(const char *what, const float *f, const double *d, size_t n)
{
    float *dn = vkg_test_alloc(n);
    for (size_t i = 0; i < n; i++)
        dn[i] = (float)d[i];
    vkg_test_cmp cmp;
    int ok = vkg_test_compare(what, f, dn, n, 1e-6, &cmp);
    printf("f32 vs f64 %-14s rel_l2 %.2e max_rel %.2e\n", what, cmp.rel_l2, cmp.max_rel);
    free(dn);
    return ok;
}

static void test_f32_matches_f64(void **state)
{
    (void)state;
    enum { B = 2, T = 37, C = 48, NH = 4, N = B * T, OC = 700, V = 50, Vp = 64 };
    /* static: zero-initialized gradients, and too large for the stack */
    static float qkv[N * 3 * C], out[N * C], lse[B * NH * T], dq[N * 3 * C], w[OC * C];
    static float mo[N * OC], dw[OC * C], di[N * C], lo[N * Vp], st[2 * N];
    static double qkv_d[N * 3 * C], out_d[N * C], lse_d[B * NH * T], dq_d[N * 3 * C];
    static double w_d[OC * C], mo_d[N * OC], dw_d[OC * C], di_d[N * C], lo_d[N * Vp], st_d[2 * N];
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 9);
    vkg_test_fill_uniform(&r, qkv, N * 3 * C, -1, 1);
    vkg_test_fill_uniform(&r, w, OC * C, -1, 1);
    widen(qkv_d, qkv, N * 3 * C), widen(w_d, w, OC * C);
    /* attention: its output is the matmul input; the matmul output is the upstream gradient */
    vkg_ref_attention_fwd(out, lse, NULL, qkv, B, T, C, NH);
    vkg_ref_attention_fwd_f64(out_d, lse_d, NULL, qkv_d, B, T, C, NH);
    assert_true(agree("attention out", out, out_d, N * C));
    assert_true(agree("attention lse", lse, lse_d, B * NH * T));
    vkg_ref_matmul_fwd(mo, out, w, NULL, N, C, OC);
    vkg_ref_matmul_fwd_f64(mo_d, out_d, w_d, NULL, N, C, OC);
    assert_true(agree("matmul out", mo, mo_d, N * OC));
    vkg_ref_matmul_bwd(di, dw, NULL, mo, out, w, N, C, OC);
    vkg_ref_matmul_bwd_f64(di_d, dw_d, NULL, mo_d, out_d, w_d, N, C, OC);
    assert_true(agree("matmul dinp", di, di_d, N * C));
    assert_true(agree("matmul dweight", dw, dw_d, OC * C));
    vkg_ref_attention_bwd(dq, di, qkv, lse, B, T, C, NH);
    vkg_ref_attention_bwd_f64(dq_d, di_d, qkv_d, lse_d, B, T, C, NH);
    assert_true(agree("attention dqkv", dq, dq_d, N * 3 * C));
    /* layernorm, gelu and xent (in place) on the matmul output read as (N, Vp) */
    vkg_ref_layernorm_fwd(lo, st, st + N, mo, w, w + Vp, N, Vp);
    vkg_ref_layernorm_fwd_f64(lo_d, st_d, st_d + N, mo_d, w_d, w_d + Vp, N, Vp);
    assert_true(agree("layernorm out", lo, lo_d, N * Vp));
    vkg_ref_gelu_fwd(lo, lo, N * Vp);
    vkg_ref_gelu_fwd_f64(lo_d, lo_d, N * Vp);
    assert_true(agree("gelu out", lo, lo_d, N * Vp));
    int32_t y[N];
    vkg_test_fill_int(&r, y, N, V);
    vkg_ref_xent_fwd_bwd(st, lo, lo, y, N, V, Vp, 0.5f);
    vkg_ref_xent_fwd_bwd_f64(st_d, lo_d, lo_d, y, N, V, Vp, 0.5);
    assert_true(agree("xent losses", st, st_d, N));
    assert_true(agree("xent dlogits", lo, lo_d, N * Vp));
    assert_true(fabs(vkg_ref_sumsq(lo, N * Vp) / vkg_ref_sumsq_f64(lo_d, N * Vp) - 1.0) < 1e-6);
}

/* ------------------------------------------------------ the checker bites */

static void test_fd_checker_bites(void **state)
{
    (void)state;
    fd_case c = {.op = GELU, .nout = 20, .keep = 1};
    run_case(&c, "gelu (correct)", (size_t[3]){20, 0, 0}, -2, 2, 0, 20);
    c.d[0][7] *= 1.0 + 1e-4; /* a 1e-4 relative error in one coordinate must be caught */
    assert_true(fd_check("gelu (broken on purpose)", c.x[0], c.d[0], 20, 20, objective, &c) > 1e-5);
    free_case(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_encoder),       cmocka_unit_test(test_fd_layernorm),
        cmocka_unit_test(test_fd_matmul),        cmocka_unit_test(test_fd_attention),
        cmocka_unit_test(test_fd_gelu_residual), cmocka_unit_test(test_fd_xent),
        cmocka_unit_test(test_adamw_hand),       cmocka_unit_test(test_forward_values),
        cmocka_unit_test(test_layernorm_stats),  cmocka_unit_test(test_attention_probs),
        cmocka_unit_test(test_f32_matches_f64),  cmocka_unit_test(test_fd_checker_bites),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
