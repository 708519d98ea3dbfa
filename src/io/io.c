/* Crash-safe file replacement (temporary file + fsync + rename + directory fsync) and the
 * little-endian read/write helpers every llm.c format uses. Knows no file format itself beyond
 * the shared 256-int32 header; never prints. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"
#include "os/file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

#define SWAP_CHUNK 4096

/* ---- folders -------------------------------------------------------------------------------- */

/* mkdir one folder; an existing folder (not a file) is fine. */
static vkg_status make_dir(const char *dir)
{
    int err = vkg_os_mkdir(dir);
    VKG_CHECK(err == 0, VKG_ERR_IO, "cannot create folder %s: %s", dir,
              err == EEXIST ? "a file of that name is in the way" : strerror(err));
    return VKG_OK;
}

vkg_status vkg_io_make_dirs(const char *path)
{
    char dir[4096];
    size_t n = strlen(path);
    VKG_CHECK(n > 0 && n < sizeof dir, VKG_ERR_INVALID_ARG,
              "a folder name must have 1 to %zu bytes, got %zu", sizeof dir - 1, n);
    memcpy(dir, path, n + 1);
    for (size_t i = 1; i < n; i++) /* each parent, left to right */
        if (dir[i] == '/' && dir[i - 1] != '/') {
            dir[i] = '\0';
            VKG_TRY(make_dir(dir));
            dir[i] = '/';
        }
    return make_dir(dir);
}

/* ---- atomic replacement --------------------------------------------------------------------- */

/* Create a fresh temporary file next to path ("<dir>/.<base>.tmp-<pid>-<n>"), opened for writing
 * only if it did not exist (C11's "x" mode). */
static vkg_status create_temp(const char *path, char **tmp_out, FILE **f_out)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    VKG_CHECK(base[0] != '\0', VKG_ERR_INVALID_ARG, "'%s' names a directory, not a file", path);
    size_t cap = strlen(path) + 64;
    char *tmp = malloc(cap);
    VKG_CHECK(tmp, VKG_ERR_NOMEM, "out of memory writing '%s'", path);
    uintptr_t salt = (uintptr_t)&cap ^ (uintptr_t)(vkg_os_now_ms() * 1e3);
    FILE *f = NULL;
    int err = 0;
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, cap, "%.*s.%s.tmp-%ld-%lx", (int)dirlen, path, base, vkg_os_pid(),
                 (unsigned long)(salt + attempt * 7919u));
        errno = 0;
        f = fopen(tmp, "wbx");
        err = errno;
        if (f || err != EEXIST)
            break;
    }
    if (!f) {
        vkg_status st = VKG_FAIL(VKG_ERR_IO, "%s: cannot create temporary file '%s': %s", path, tmp,
                                 strerror(err ? err : EIO));
        free(tmp);
        return st;
    }
    *tmp_out = tmp;
    *f_out = f;
    return VKG_OK;
}

/* Sync the directory holding path, so the rename itself survives a crash. */
static vkg_status sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int err = vkg_os_sync_dir(dir);
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: sync of directory '%s' failed: %s", path, dir,
              strerror(err));
    return VKG_OK;
}

vkg_status vkg_io_write_atomic(const char *path, vkg_io_write_fn write_fn, void *ctx)
{
    char *tmp = NULL;
    FILE *f = NULL;
    vkg_status st = VKG_OK;
    VKG_CHECK(path && write_fn, VKG_ERR_INVALID_ARG, "vkg_io_write_atomic: NULL path or callback");
    VKG_TRY(create_temp(path, &tmp, &f));
    st = write_fn(f, ctx);
    if (st < 0) {
        vkg__error_wrap(st, "writing '%s'", path);
        goto fail;
    }
    VKG_CHECK_GOTO(st, !ferror(f), VKG_ERR_IO, fail, "%s: write failed: %s", path, strerror(errno));
    int err = vkg_os_flush_to_disk(f);
    VKG_CHECK_GOTO(st, err == 0, VKG_ERR_IO, fail, "%s: write or fsync failed: %s", path,
                   strerror(err));
    int rc = fclose(f);
    f = NULL;
    VKG_CHECK_GOTO(st, rc == 0, VKG_ERR_IO, fail, "%s: close failed: %s", path, strerror(errno));
    err = vkg_os_replace(tmp, path);
    VKG_CHECK_GOTO(st, err == 0, VKG_ERR_IO, fail, "%s: cannot rename '%s' over it: %s", path, tmp,
                   strerror(err));
    free(tmp);
    return sync_dir(path);
fail:
    if (f)
        fclose(f);
    remove(tmp);
    free(tmp);
    return st;
}

/* ---- little-endian writers ------------------------------------------------------------------ */

vkg_status vkg_io_write_bytes(FILE *f, const void *data, size_t n)
{
    if (n == 0)
        return VKG_OK;
    errno = 0;
    VKG_CHECK(fwrite(data, 1, n, f) == n, VKG_ERR_IO, "short write of %zu bytes: %s", n,
              errno ? strerror(errno) : "unknown error");
    return VKG_OK;
}

/* Write n elements of `size` bytes, byte-swapped on big-endian hosts. */
static vkg_status write_le(FILE *f, const void *x, size_t n, size_t size)
{
    if (!HOST_BIG_ENDIAN)
        return vkg_io_write_bytes(f, x, n * size);
    unsigned char buf[SWAP_CHUNK * 4];
    const unsigned char *src = x;
    while (n > 0) {
        size_t m = n < SWAP_CHUNK ? n : SWAP_CHUNK;
        for (size_t i = 0; i < m; i++)
            for (size_t b = 0; b < size; b++)
                buf[i * size + b] = src[i * size + size - 1 - b];
        VKG_TRY(vkg_io_write_bytes(f, buf, m * size));
        src += m * size;
        n -= m;
    }
    return VKG_OK;
}

vkg_status vkg_io_write_i32(FILE *f, const int32_t *x, size_t n)
{
    return write_le(f, x, n, 4);
}

vkg_status vkg_io_write_f32(FILE *f, const float *x, size_t n)
{
    return write_le(f, x, n, 4);
}

vkg_status vkg_io_write_u16(FILE *f, const uint16_t *x, size_t n)
{
    return write_le(f, x, n, 2);
}

/* ---- little-endian readers ------------------------------------------------------------------ */

vkg_status vkg_io_read_bytes(FILE *f, const char *path, void *data, size_t n)
{
    if (n == 0)
        return VKG_OK;
    size_t got = fread(data, 1, n, f);
    if (got == n)
        return VKG_OK;
    if (ferror(f))
        return VKG_FAIL(VKG_ERR_IO, "%s: read error: %s", path, strerror(errno));
    return VKG_FAIL(VKG_ERR_FORMAT, "%s: file ends early: wanted %zu more bytes, got %zu", path, n,
                    got);
}

static void swap_in_place(void *x, size_t n, size_t size)
{
    unsigned char *p = x;
    for (size_t i = 0; i < n; i++, p += size)
        for (size_t b = 0; b < size / 2; b++) {
            unsigned char t = p[b];
            p[b] = p[size - 1 - b];
            p[size - 1 - b] = t;
        }
}

static vkg_status read_le(FILE *f, const char *path, void *x, size_t n, size_t size)
{
    VKG_TRY(vkg_io_read_bytes(f, path, x, n * size));
    if (HOST_BIG_ENDIAN)
        swap_in_place(x, n, size);
    return VKG_OK;
}

vkg_status vkg_io_read_i32(FILE *f, const char *path, int32_t *x, size_t n)
{
    return read_le(f, path, x, n, 4);
}

vkg_status vkg_io_read_f32(FILE *f, const char *path, float *x, size_t n)
{
    return read_le(f, path, x, n, 4);
}

vkg_status vkg_io_read_u16(FILE *f, const char *path, uint16_t *x, size_t n)
{
    return read_le(f, path, x, n, 2);
}

/* ---- shared header handling ----------------------------------------------------------------- */

vkg_status vkg__io_open_fd(const char *path, int *fd, uint64_t *size)
{
    unsigned long long n = 0;
    const char *kind = NULL;
    int err = vkg_os_open_read(path, fd, &n, &kind);
    VKG_CHECK(!kind, VKG_ERR_IO,
              "%s: is %s, not a regular file: only regular files are read (a pipe or device "
              "may never end)",
              path, kind);
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot open: %s", path, strerror(err));
    *size = (uint64_t)n;
    return VKG_OK;
}

vkg_status vkg__io_open(const char *path, FILE **f, uint64_t *size)
{
    int fd = -1;
    *f = NULL;
    VKG_TRY(vkg__io_open_fd(path, &fd, size));
    FILE *fp = vkg_os_fdopen_read(fd);
    if (!fp) {
        int err = errno;
        vkg_os_close(fd);
        return VKG_FAIL(VKG_ERR_IO, "%s: fdopen failed: %s", path, strerror(err));
    }
    *f = fp;
    return VKG_OK;
}

vkg_status vkg__io_read_header(FILE *f, const char *path, uint64_t size, int32_t magic,
                               const char *kind, int32_t hdr[VKG_FILE_HEADER_INTS])
{
    VKG_CHECK(size >= VKG_FILE_HEADER_BYTES, VKG_ERR_FORMAT,
              "%s: file is %llu bytes, too short for the %d-byte header of a %s file", path,
              (unsigned long long)size, VKG_FILE_HEADER_BYTES, kind);
    VKG_TRY(vkg_io_read_i32(f, path, hdr, VKG_FILE_HEADER_INTS));
    VKG_CHECK(hdr[0] == magic, VKG_ERR_FORMAT, "%s: bad magic %ld, expected %ld (not a %s file)",
              path, (long)hdr[0], (long)magic, kind);
    return VKG_OK;
}

vkg_status vkg__io_check_size(const char *path, uint64_t size, uint64_t expected, const char *what)
{
    if (size < expected)
        return VKG_FAIL(VKG_ERR_FORMAT,
                        "%s: header says %s but the file holds %llu bytes fewer than expected "
                        "(%llu of %llu: truncated?)",
                        path, what, (unsigned long long)(expected - size), (unsigned long long)size,
                        (unsigned long long)expected);
    VKG_CHECK(size == expected, VKG_ERR_FORMAT,
              "%s: header says %s but the file holds %llu bytes more than expected (%llu, "
              "expected %llu)",
              path, what, (unsigned long long)(size - expected), (unsigned long long)size,
              (unsigned long long)expected);
    return VKG_OK;
}
