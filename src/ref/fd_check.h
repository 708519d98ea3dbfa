/* Finite-difference gradient checking in double, for the tests of the reference and of anything
 * else with an analytic gradient: central differences of a scalar objective, coordinate by
 * coordinate, against the analytic gradient. Libc only; never prints, allocates nothing.
 */
#ifndef VKG_REF_FD_CHECK_H
#define VKG_REF_FD_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* The scalar objective, evaluated from whatever state ctx points at (which includes x). */
typedef double (*vkg_ref_objective_fn)(void *ctx);

typedef struct vkg_ref_fd_result_t {
    double max_err;  /* largest per-coordinate error, see vkg_ref_fd_check */
    size_t worst;    /* coordinate where it occurred */
    double analytic; /* grad[worst] */
    double numeric;  /* the central difference at worst */
    size_t checked;  /* coordinates evaluated */
} vkg_ref_fd_result_t;

/* For coordinates j of x[0..n) (all of them when count >= n, else count chosen by a generator
 * seeded with seed, possibly repeating), set x[j] to x[j] +- h, evaluate f, restore x[j]
 * exactly, and compare numeric = (f(x+) - f(x-)) / (x+ - x-) with grad[j]:
 *   err_j = |grad[j] - numeric| / max(|grad[j]|, |numeric|, 1e-3 * max_i |grad[i]|, 1e-300)
 * i.e. relative error, except that coordinates whose gradient is 1000 times below the largest
 * are judged against 1/1000 of the largest. Calls f 2 * min(count, n) times. */
vkg_ref_fd_result_t vkg_ref_fd_check(double *x, const double *grad, size_t n, size_t count,
                                     double h, uint64_t seed, vkg_ref_objective_fn f, void *ctx);

/* sum_i a[i] b[i] with Neumaier's compensated summation, so an objective built from it is
 * accurate to about one ulp of the result whatever n is (this keeps the noise of central
 * differences at the level of the function's own rounding). */
double vkg_ref_dot_compensated(const double *a, const double *b, size_t n);

#endif
