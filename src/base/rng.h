/* A small seeded random generator with a serializable state (splitmix64) and its uniform,
 * bounded and normal draws: parameter initialisation, data shuffling and token sampling all draw
 * from it.
 *
 * The generator's whole state is one uint64 (vkg_rng.state): copy it out to save, copy it back to
 * restore; the sequence continues exactly. It is not cryptographic and not thread-safe (one
 * generator per user). Nothing here allocates, prints or keeps global state.
 */
#ifndef VKG_BASE_RNG_H
#define VKG_BASE_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct vkg_rng {
    uint64_t state; /* any value is valid */
} vkg_rng;

/* Start the sequence for seed (every seed, 0 included, gives a distinct sequence). */
void vkg_rng_seed(vkg_rng *r, uint64_t seed);

/* The next 64 random bits (splitmix64: state += 0x9e3779b97f4a7c15, then a 64-bit mix). */
uint64_t vkg_rng_u64(vkg_rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double vkg_rng_uniform(vkg_rng *r);

/* Uniform integer in [0, n), unbiased (rejection); n must be >= 1. For shuffling. */
uint64_t vkg_rng_below(vkg_rng *r, uint64_t n);

/* A standard normal draw, N(0, 1), by Box-Muller from two uniforms (the second normal of the pair
 * is discarded, so the state stays one uint64). */
double vkg_rng_normal(vkg_rng *r);

/* Fill x[0..n) with mean + std * normal draws, in index order (for parameter initialisation). */
void vkg_rng_fill_normal(vkg_rng *r, float *x, size_t n, float mean, float std);

#endif
