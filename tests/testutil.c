/* Shared test helpers: RNG, fills, the reference comparison and temporary folders. */
#include "testutil.h"

#ifndef _WIN32
#include <ftw.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "os/glob.h"

#ifdef _WIN32
#include <windows.h>
#endif

void vkg_test_rng_seed(vkg_test_rng *r, uint64_t seed)
{
    r->state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

uint64_t vkg_test_rng_u64(vkg_test_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float vkg_test_rng_uniform(vkg_test_rng *r, float lo, float hi)
{
    double u = (double)(vkg_test_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

void vkg_test_fill_uniform(vkg_test_rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = vkg_test_rng_uniform(r, lo, hi);
}

void vkg_test_fill_uniform_f64(vkg_test_rng *r, double *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(vkg_test_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = lo + (hi - lo) * u;
    }
}

void vkg_test_fill_int(vkg_test_rng *r, int32_t *x, size_t n, int32_t bound)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)(vkg_test_rng_u64(r) % (uint64_t)bound);
}

int vkg_test_compare(const char *what, const float *got, const float *ref, size_t n, double bound,
                     vkg_test_cmp *out)
{
    double diff2 = 0.0, ref2 = 0.0, got2 = 0.0;
    vkg_test_cmp c = {0};
    c.first_bad = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], e = ref[i], d = fabs(g - e);
        if (!isfinite(g)) {
            c.nonfinite++;
            continue;
        }
        diff2 += d * d;
        ref2 += e * e;
        got2 += g * g;
        if (d > c.max_abs)
            c.max_abs = d;
        double rel = d / (fabs(e) > 1e-6 ? fabs(e) : 1e-6);
        if (rel > c.max_rel)
            c.max_rel = rel;
    }
    c.rel_l2 = ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(got2);
    double elem_tol = bound * (sqrt(ref2 / (n ? (double)n : 1.0)));
    for (size_t i = 0; i < n; i++) {
        double g = got[i], e = ref[i];
        if (!isfinite(g) || fabs(g - e) > bound * fabs(e) + 10.0 * elem_tol + 1e-30) {
            c.first_bad = i;
            break;
        }
    }
    c.ok = c.nonfinite == 0 && c.rel_l2 <= bound;
    if (!c.ok) {
        fprintf(stderr,
                "MISMATCH %s: n=%zu rel_l2=%.3g (bound %.3g) max_abs=%.3g max_rel=%.3g "
                "nonfinite=%zu",
                what, n, c.rel_l2, bound, c.max_abs, c.max_rel, c.nonfinite);
        if (c.first_bad != (size_t)-1)
            fprintf(stderr, " first_bad=%zu got=%.9g ref=%.9g", c.first_bad,
                    (double)got[c.first_bad], (double)ref[c.first_bad]);
        fprintf(stderr, "\n");
    }
    if (out)
        *out = c;
    return c.ok;
}

float *vkg_test_alloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "test: out of memory allocating %zu floats\n", n);
        abort();
    }
    return p;
}

void *vkg_test_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            char *more = realloc(buf, 2 * cap + 1);
            if (!more)
                free(buf);
            buf = more, cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "test: out of memory reading %s\n", path);
        abort();
    }
    buf[len] = '\0';
    if (n)
        *n = len;
    return buf;
}

void *vkg_test_must_read(const char *path, size_t *n)
{
    void *buf = vkg_test_read_file(path, n);
    if (!buf) {
        fprintf(stderr, "test: cannot open %s\n", path);
        abort();
    }
    return buf;
}

float *vkg_test_random(vkg_test_rng *r, size_t n, float lo, float hi)
{
    float *x = vkg_test_alloc(n);
    vkg_test_fill_uniform(r, x, n, lo, hi);
    return x;
}

/* The folder for temporary files: TMPDIR, on Windows also TEMP or TMP, else /tmp. */
static const char *tmp_base(void)
{
    const char *names[] = {"TMPDIR", "TEMP", "TMP"};
#ifdef _WIN32
    size_t n_names = 3;
#else
    size_t n_names = 1;
#endif
    for (size_t i = 0; i < n_names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return "/tmp";
}

int vkg_test_tmp_make(char *root, size_t cap, const char *prefix)
{
    int n = snprintf(root, cap, "%s/%s_XXXXXX", tmp_base(), prefix);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    return vkg_os_mkdtemp(root) == 0 ? 0 : -1;
}

int vkg_test_setenv(const char *name, const char *value)
{
#ifdef _WIN32
    return _putenv_s(name, value ? value : "") == 0 ? 0 : -1;
#else
    return (value ? setenv(name, value, 1) : unsetenv(name)) == 0 ? 0 : -1;
#endif
}

int vkg_test_under_wine(void)
{
#ifdef _WIN32
    HMODULE ntdll = GetModuleHandleA("ntdll.dll");
    return ntdll && GetProcAddress(ntdll, "wine_get_version") ? 1 : 0;
#else
    return 0;
#endif
}

void *vkg_test_aligned_alloc(size_t align, size_t bytes)
{
#ifdef _WIN32
    return _aligned_malloc(bytes, align);
#else
    return aligned_alloc(align, bytes);
#endif
}

void vkg_test_aligned_free(void *p)
{
#ifdef _WIN32
    _aligned_free(p);
#else
    free(p);
#endif
}

#ifdef _WIN32
/* Windows: no nftw; the folder's names through the platform layer, depth first (a folder is
 * never followed through a link there: CreateSymbolicLink needs privileges tests lack). */
int vkg_test_tmp_remove(const char *root)
{
    if (!vkg_os_is_dir(root))
        return remove(root);
    vkg_os_paths names = {0};
    if (vkg_os_list_dir(root, &names) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        size_t len = strlen(root) + strlen(names.v[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            rc = -1;
            break;
        }
        snprintf(path, len, "%s/%s", root, names.v[i]);
        rc = vkg_test_tmp_remove(path);
        free(path);
    }
    vkg_os_paths_free(&names);
    return rc == 0 && vkg_os_rmdir(root) == 0 ? 0 : -1;
}
#else
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int vkg_test_tmp_remove(const char *root)
{
    return nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
#endif

/* from's bytes into the new file to. */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[1 << 16];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in && ferror(in))
        rc = -1;
    if (out && fclose(out) != 0)
        rc = -1;
    if (in)
        fclose(in);
    return rc;
}

int vkg_test_tree_copy(const char *from, const char *to)
{
    if (!vkg_os_is_dir(from))
        return copy_file(from, to);
    vkg_os_paths names = {0};
    if (vkg_os_mkdir(to) != 0 || vkg_os_list_dir(from, &names) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        size_t lf = strlen(from) + strlen(names.v[i]) + 2, lt = strlen(to) + strlen(names.v[i]) + 2;
        char *a = malloc(lf), *b = malloc(lt);
        if (a && b) {
            snprintf(a, lf, "%s/%s", from, names.v[i]);
            snprintf(b, lt, "%s/%s", to, names.v[i]);
            rc = vkg_test_tree_copy(a, b);
        } else {
            rc = -1;
        }
        free(a);
        free(b);
    }
    vkg_os_paths_free(&names);
    return rc;
}

uint32_t vkg_test_crc32(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}
