/* splitmix64 random generator and its uniform, bounded and normal draws (see rng.h). */
#include "base/rng.h"

#include <assert.h>
#include <math.h>

static const double TWO_PI = 6.28318530717958647692;

void vkg_rng_seed(vkg_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t vkg_rng_u64(vkg_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double vkg_rng_uniform(vkg_rng *r)
{
    return (double)(vkg_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t vkg_rng_below(vkg_rng *r, uint64_t n)
{
    assert(n >= 1);
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* accept x < limit: a whole number of n's */
    uint64_t x;
    do
        x = vkg_rng_u64(r);
    while (x >= limit);
    return x % n;
}

double vkg_rng_normal(vkg_rng *r)
{
    double u1 = 1.0 - vkg_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = vkg_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
}

void vkg_rng_fill_normal(vkg_rng *r, float *x, size_t n, float mean, float std)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)mean + (double)std * vkg_rng_normal(r));
}
