/* Finite-difference gradient checking (see fd_check.h). */
#include "ref/fd_check.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

vkg_ref_fd_result_t vkg_ref_fd_check(double *x, const double *grad, size_t n, size_t count,
                                     double h, uint64_t seed, vkg_ref_objective_fn f, void *ctx)
{
    vkg_ref_fd_result_t res = {0};
    double gmax = 0.0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(grad[i]));
    double floor_ = fmax(1e-3 * gmax, 1e-300);
    uint64_t s = seed;
    size_t m = count < n ? count : n;
    for (size_t k = 0; k < m; k++) {
        size_t j = count >= n ? k : (size_t)(splitmix64(&s) % n);
        double save = x[j], xp = save + h, xm = save - h;
        x[j] = xp;
        double fp = f(ctx);
        x[j] = xm;
        double fm = f(ctx);
        x[j] = save;
        double num = (fp - fm) / (xp - xm);
        double err = fabs(grad[j] - num) / fmax(fmax(fabs(grad[j]), fabs(num)), floor_);
        if (err > res.max_err || k == 0) {
            res.max_err = err;
            res.worst = j;
            res.analytic = grad[j];
            res.numeric = num;
        }
    }
    res.checked = m;
    return res;
}

double vkg_ref_dot_compensated(const double *a, const double *b, size_t n)
{
    double s = 0.0, comp = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = a[i] * b[i], t = s + x;
        comp += fabs(s) >= fabs(x) ? (s - t) + x : (x - t) + s;
        s = t;
    }
    return s + comp;
}
