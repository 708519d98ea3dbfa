/* The CPU reference of DiLoCo's outer step (see outer_ref.h). */
#include "outer_ref.h"

#include <math.h>
#include <stdlib.h>

#include "vkgpt/io.h"

/* x (n) quantized to int8 (qmax 127) or int4 (qmax 7) and back: per 256 elements the absmax
 * over qmax, codes the nearest integer (ties to even; brk: toward zero) of x / scale in
 * [-qmax, qmax]. */
static void int_round_trip(const float *x, size_t n, float qmax, float *deq, int brk)
{
    for (size_t a = 0; a < n; a += VKG_OUTER_INT8_CHUNK) {
        size_t b = a + VKG_OUTER_INT8_CHUNK < n ? a + VKG_OUTER_INT8_CHUNK : n;
        float amax = 0.0f;
        for (size_t i = a; i < b; i++)
            if (fabsf(x[i]) > amax)
                amax = fabsf(x[i]);
        float s = amax / qmax;
        for (size_t i = a; i < b; i++) {
            float q = s > 0.0f
                          ? (brk == VKG_TEST_OUTER_TRUNCATE ? truncf(x[i] / s) : rintf(x[i] / s))
                          : 0.0f;
            q = q > qmax ? qmax : q < -qmax ? -qmax : q;
            deq[i] = q * s;
        }
    }
}

void vkg_test_outer_ref(int N, size_t n, float *const *P, float *g, float *m, vkg_outer_dtype dt,
                        float lr, float mu, int brk)
{
    float *mean = malloc(n * sizeof *mean), *d = calloc(n, sizeof *d), *x = malloc(n * sizeof *x),
          *y = malloc(n * sizeof *y);
    if (!mean || !d || !x || !y)
        abort(); /* a test's reference: nothing to recover */
    if (dt == VKG_OUTER_F32) {
        for (size_t i = 0; i < n; i++) {
            float s = P[0][i];
            for (int r = 1; r < N; r++)
                s = s + P[r][i];
            mean[i] = s / (float)N;
            d[i] = g[i] - mean[i];
        }
    } else {
        for (int r = 0; r < N; r++) {
            for (size_t i = 0; i < n; i++)
                x[i] = g[i] - P[r][i];
            if (dt == VKG_OUTER_INT8 || dt == VKG_OUTER_INT4)
                int_round_trip(x, n, dt == VKG_OUTER_INT8 ? 127.0f : 7.0f, y, brk);
            else
                for (size_t i = 0; i < n; i++)
                    y[i] = vkg_bf16_to_f32(vkg_f32_to_bf16(x[i]));
            for (size_t i = 0; i < n; i++)
                d[i] = r == 0 ? y[i] : d[i] + y[i];
        }
        for (size_t i = 0; i < n; i++) {
            d[i] = d[i] / (float)N;
            mean[i] = g[i] - d[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        float mm = mu * m[i] + d[i];
        /* g - lr (d + mu m') = mean + (1 - lr) d - lr mu m'; heavy ball: no mu m' look-ahead */
        float u =
            (1.0f - lr) * d[i] - (brk == VKG_TEST_OUTER_HEAVY_BALL ? lr * m[i] * mu : lr * mu * mm);
        m[i] = mm;
        g[i] = u == 0.0f ? mean[i] : mean[i] + u;
    }
    free(mean), free(d), free(x), free(y);
}
