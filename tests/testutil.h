/* Helpers shared by the tests: a seeded random generator, random fills, and the comparison of an
 * output with its reference (relative L2 error, max abs/rel error, first bad index, finiteness). */
#ifndef VKG_TESTUTIL_H
#define VKG_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* The bound every shader output must meet against the CPU reference: ||gpu - ref|| / ||ref||. */
#define VKG_TEST_REL_BOUND 1e-5

typedef struct vkg_test_rng {
    uint64_t state;
} vkg_test_rng;

void vkg_test_rng_seed(vkg_test_rng *r, uint64_t seed);
/* CRC-32 (IEEE/zlib) of n bytes, bit by bit: independent of the library's table-driven one. */
uint32_t vkg_test_crc32(const unsigned char *p, size_t n);
uint64_t vkg_test_rng_u64(vkg_test_rng *r);
/* uniform in [lo, hi) */
float vkg_test_rng_uniform(vkg_test_rng *r, float lo, float hi);
void vkg_test_fill_uniform(vkg_test_rng *r, float *x, size_t n, float lo, float hi);
void vkg_test_fill_uniform_f64(vkg_test_rng *r, double *x, size_t n, double lo, double hi);
/* A new array of n floats uniform in [lo, hi) (free with free()). */
float *vkg_test_random(vkg_test_rng *r, size_t n, float lo, float hi);
/* integers in [0, bound) */
void vkg_test_fill_int(vkg_test_rng *r, int32_t *x, size_t n, int32_t bound);

typedef struct vkg_test_cmp {
    double rel_l2;  /* ||got - ref|| / ||ref|| (or ||got|| when ||ref|| = 0) */
    double max_abs; /* max |got - ref| */
    double max_rel; /* max |got - ref| / max(|ref|, 1e-6) */
    size_t
        first_bad; /* first index with a non-finite value or |got-ref| > tol*(|ref|+norm/sqrt(n)) */
    size_t nonfinite; /* count of non-finite elements in got */
    int ok;           /* rel_l2 <= bound and nonfinite == 0 */
} vkg_test_cmp;

/* Compare got with ref over n elements against a relative-L2 bound. Fills *out and returns out->ok.
 * When the comparison fails it prints one line naming `what`, the errors and the first bad index
 * with both values, so a failing test says where it went wrong. */
int vkg_test_compare(const char *what, const float *got, const float *ref, size_t n, double bound,
                     vkg_test_cmp *out);

/* Allocate n floats (or fail the test via abort with a message); free with free(). */
float *vkg_test_alloc(size_t n);

/* The whole file at path (read in chunks: pipes and files still growing too), NUL-terminated,
 * malloc'd (the caller frees); its length in *n when n is not NULL. NULL when it cannot be
 * opened. vkg_test_must_read: the same, but a file that cannot be opened fails the test (abort
 * with a message naming the path). Out of memory aborts too. */
void *vkg_test_read_file(const char *path, size_t *n);
void *vkg_test_must_read(const char *path, size_t *n);

/* Make a new folder "$TMPDIR/<prefix>_XXXXXX" (on Windows also $TEMP or $TMP; /tmp without them)
 * with vkg_os_mkdtemp and write its path to root (cap bytes). Returns 0, or -1 when the path does
 * not fit or the folder cannot be made. */
int vkg_test_tmp_make(char *root, size_t cap, const char *prefix);

/* Set the environment variable name to value, or remove it when value is NULL (setenv and
 * unsetenv; _putenv_s on Windows). 0, or -1 on an error. */
int vkg_test_setenv(const char *name, const char *value);

/* bytes of memory aligned to align (a power of two; bytes a multiple of it), or NULL; free it with
 * vkg_test_aligned_free (Windows' C library frees aligned blocks with its own call). */
void *vkg_test_aligned_alloc(size_t align, size_t bytes);
void vkg_test_aligned_free(void *p);

/* 1 when the program runs under Wine (its ntdll exports wine_get_version), else 0: for the few
 * checks that Wine's Vulkan layer cannot pass, skipped there with the reason. */
int vkg_test_under_wine(void);

/* Remove root and everything under it (without following links). Returns 0, or -1 on an error. */
int vkg_test_tmp_remove(const char *root);

/* Copy the file or folder tree from to the path to (which must not exist; files and folders
 * only). Returns 0, or -1 on an error. */
int vkg_test_tree_copy(const char *from, const char *to);

#endif
