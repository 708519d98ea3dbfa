/* Writing Hugging Face's safetensors files: the arguments are checked first (nothing is created
 * for a bad call), the JSON header is built in memory, and the file is written crash-safely
 * through vkg_io_write_atomic: header size, header padded with spaces to a multiple of 8, then
 * each tensor's data in the order given, little-endian, converted from fp32 where asked. Does not
 * reorder tensors (the library sorts by alignment; any order is valid) and does not write
 * sub-byte dtypes. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "io/io_internal.h"

#define CHUNK 4096 /* elements converted per write */

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static vkg_status put(text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t nc = t->cap ? t->cap : 256;
        while (nc < t->len + n + 1)
            nc *= 2;
        char *np = realloc(t->p, nc);
        VKG_CHECK(np, VKG_ERR_NOMEM, "out of memory building a safetensors header");
        t->p = np;
        t->cap = nc;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return VKG_OK;
}

static vkg_status puts_(text *t, const char *s)
{
    return put(t, s, strlen(s));
}

/* s as a JSON string: quotes, backslashes and control characters escaped, UTF-8 as it is. */
static vkg_status put_string(text *t, const char *s)
{
    VKG_TRY(put(t, "\"", 1));
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        else {
            VKG_TRY(put(t, p, 1));
            continue;
        }
        VKG_TRY(puts_(t, esc));
    }
    return put(t, "\"", 1);
}

/* ---- checking the call ---------------------------------------------------------------------- */

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fail naming the first string of the n at names that appears twice (what: "tensor", "key"). */
static vkg_status check_unique(const char *path, const char **names, int n, const char *what)
{
    char shown[80];
    qsort(names, (size_t)n, sizeof *names, by_str);
    for (int i = 1; i < n; i++)
        VKG_CHECK(strcmp(names[i - 1], names[i]), VKG_ERR_INVALID_ARG, "%s: %s '%s' given twice",
                  path, what, vkg__escape(shown, sizeof shown, names[i], strlen(names[i])));
    return VKG_OK;
}

/* Check one tensor and compute its size in bytes. */
static vkg_status check_tensor(const char *path, const vkg_st_tensor *t, int i, uint64_t *nbytes)
{
    char nm[80];
    VKG_CHECK(t->name, VKG_ERR_INVALID_ARG, "%s: tensor %d has no name", path, i);
    vkg__escape(nm, sizeof nm, t->name, strlen(t->name));
    VKG_CHECK(vkg__utf8_valid(t->name, strlen(t->name)), VKG_ERR_INVALID_ARG,
              "%s: tensor name '%s' is not valid UTF-8", path, nm);
    VKG_CHECK(strcmp(t->name, "__metadata__"), VKG_ERR_INVALID_ARG,
              "%s: '__metadata__' is reserved, not a tensor name", path);
    size_t es = vkg_st_dtype_size(t->dtype);
    VKG_CHECK(es, VKG_ERR_INVALID_ARG, "%s: tensor '%s': unknown dtype %d", path, nm,
              (int)t->dtype);
    VKG_CHECK(t->rank >= 0 && t->rank <= VKG_ST_MAX_RANK, VKG_ERR_INVALID_ARG,
              "%s: tensor '%s': rank %d is outside 0..%d", path, nm, t->rank, VKG_ST_MAX_RANK);
    VKG_CHECK(!t->data != !t->f32, VKG_ERR_INVALID_ARG,
              "%s: tensor '%s': exactly one of data and f32 must be set", path, nm);
    VKG_CHECK(!t->f32 || t->dtype == VKG_ST_F32 || t->dtype == VKG_ST_BF16 ||
                  t->dtype == VKG_ST_F16,
              VKG_ERR_INVALID_ARG, "%s: tensor '%s': fp32 values do not convert to %s", path, nm,
              vkg_st_dtype_name(t->dtype));
    uint64_t numel = 1;
    for (int d = 0; d < t->rank; d++) {
        VKG_CHECK(t->shape[d] >= 0, VKG_ERR_INVALID_ARG,
                  "%s: tensor '%s': dimension %d is negative (%lld)", path, nm, d,
                  (long long)t->shape[d]);
        uint64_t n = (uint64_t)t->shape[d];
        VKG_CHECK(n == 0 || numel <= (uint64_t)INT64_MAX / es / n, VKG_ERR_INVALID_ARG,
                  "%s: tensor '%s': its size overflows", path, nm);
        numel *= n;
    }
    *nbytes = numel * es;
    return VKG_OK;
}

/* ---- the header ----------------------------------------------------------------------------- */

static vkg_status put_u64(text *t, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    return puts_(t, num);
}

/* The JSON header, padded with spaces to a multiple of 8 bytes. */
static vkg_status build_header(text *h, const vkg_st_tensor *tensors, int n, const uint64_t *nbytes,
                               const char *const *kv, int n_meta)
{
    uint64_t at = 0;
    VKG_TRY(puts_(h, "{"));
    if (n_meta > 0) {
        VKG_TRY(puts_(h, "\"__metadata__\":{"));
        for (int i = 0; i < n_meta; i++) {
            VKG_TRY(puts_(h, i ? "," : ""));
            VKG_TRY(put_string(h, kv[2 * i]));
            VKG_TRY(puts_(h, ":"));
            VKG_TRY(put_string(h, kv[2 * i + 1]));
        }
        VKG_TRY(puts_(h, n ? "}," : "}"));
    }
    for (int i = 0; i < n; i++) {
        const vkg_st_tensor *t = &tensors[i];
        VKG_TRY(puts_(h, i ? "," : ""));
        VKG_TRY(put_string(h, t->name));
        VKG_TRY(puts_(h, ":{\"dtype\":\""));
        VKG_TRY(puts_(h, vkg_st_dtype_name(t->dtype)));
        VKG_TRY(puts_(h, "\",\"shape\":["));
        for (int d = 0; d < t->rank; d++) {
            VKG_TRY(puts_(h, d ? "," : ""));
            VKG_TRY(put_u64(h, (uint64_t)t->shape[d]));
        }
        VKG_TRY(puts_(h, "],\"data_offsets\":["));
        VKG_TRY(put_u64(h, at));
        VKG_TRY(puts_(h, ","));
        at += nbytes[i];
        VKG_TRY(put_u64(h, at));
        VKG_TRY(puts_(h, "]}"));
    }
    VKG_TRY(puts_(h, "}"));
    while (h->len % 8)
        VKG_TRY(puts_(h, " "));
    return VKG_OK;
}

/* ---- the data ------------------------------------------------------------------------------- */

typedef struct write_ctx {
    const text *header;
    const vkg_st_tensor *tensors;
    const uint64_t *nbytes;
    int n;
} write_ctx;

static int host_is_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Write numel elements of es bytes from src (host order) little-endian. */
static vkg_status write_elems(FILE *f, const unsigned char *src, uint64_t numel, size_t es)
{
    unsigned char buf[CHUNK * 8];
    if (host_is_le() || es == 1)
        return vkg_io_write_bytes(f, src, (size_t)(numel * es));
    for (uint64_t done = 0; done < numel;) {
        size_t m = numel - done < CHUNK ? (size_t)(numel - done) : CHUNK;
        for (size_t i = 0; i < m; i++)
            for (size_t b = 0; b < es; b++)
                buf[i * es + b] = src[(done + i) * es + es - 1 - b];
        VKG_TRY(vkg_io_write_bytes(f, buf, m * es));
        done += m;
    }
    return VKG_OK;
}

/* Write numel fp32 values converted to dtype (F32, BF16 or F16), little-endian. */
static vkg_status write_converted(FILE *f, const float *x, uint64_t numel, vkg_st_dtype dtype)
{
    unsigned char buf[CHUNK * 4];
    size_t es = vkg_st_dtype_size(dtype);
    for (uint64_t done = 0; done < numel;) {
        size_t m = numel - done < CHUNK ? (size_t)(numel - done) : CHUNK;
        for (size_t i = 0; i < m; i++) {
            uint32_t u;
            float v = x[done + i];
            if (dtype == VKG_ST_F32)
                memcpy(&u, &v, 4);
            else
                u = dtype == VKG_ST_BF16 ? vkg_f32_to_bf16(v) : vkg_f32_to_f16(v);
            for (size_t b = 0; b < es; b++)
                buf[i * es + b] = (unsigned char)(u >> (8 * b));
        }
        VKG_TRY(vkg_io_write_bytes(f, buf, m * es));
        done += m;
    }
    return VKG_OK;
}

static vkg_status write_file(FILE *f, void *ctx)
{
    const write_ctx *c = ctx;
    unsigned char le[8];
    for (int b = 0; b < 8; b++)
        le[b] = (unsigned char)((uint64_t)c->header->len >> (8 * b));
    VKG_TRY(vkg_io_write_bytes(f, le, 8));
    VKG_TRY(vkg_io_write_bytes(f, c->header->p, c->header->len));
    for (int i = 0; i < c->n; i++) {
        const vkg_st_tensor *t = &c->tensors[i];
        size_t es = vkg_st_dtype_size(t->dtype);
        if (t->f32)
            VKG_TRY(write_converted(f, t->f32, c->nbytes[i] / es, t->dtype));
        else
            VKG_TRY(write_elems(f, t->data, c->nbytes[i] / es, es));
    }
    return VKG_OK;
}

vkg_status vkg_safetensors_write(const char *path, const vkg_st_tensor *tensors, int n,
                                 const char *const *metadata_kv, int n_meta)
{
    vkg_status st = VKG_OK;
    text h = {NULL, 0, 0};
    uint64_t *nbytes = NULL;
    const char **names = NULL;
    VKG_CHECK(path && n >= 0 && (tensors || n == 0) && n_meta >= 0 && (metadata_kv || n_meta == 0),
              VKG_ERR_INVALID_ARG,
              "vkg_safetensors_write: NULL path, or bad tensor or metadata "
              "count");
    int nn = n > n_meta ? n : n_meta;
    nbytes = malloc((size_t)(n ? n : 1) * sizeof *nbytes);
    names = malloc((size_t)(nn ? nn : 1) * sizeof *names);
    VKG_CHECK_GOTO(st, nbytes && names, VKG_ERR_NOMEM, done, "%s: out of memory", path);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        VKG_TRY_GOTO(st, check_tensor(path, &tensors[i], i, &nbytes[i]), done);
        VKG_CHECK_GOTO(st, nbytes[i] <= (uint64_t)INT64_MAX - total, VKG_ERR_INVALID_ARG, done,
                       "%s: the tensors' total size overflows", path);
        total += nbytes[i];
        names[i] = tensors[i].name;
    }
    VKG_TRY_GOTO(st, check_unique(path, names, n, "tensor"), done);
    for (int i = 0; i < 2 * n_meta; i++) {
        const char *m = metadata_kv[i];
        VKG_CHECK_GOTO(st, m && vkg__utf8_valid(m, strlen(m)), VKG_ERR_INVALID_ARG, done,
                       "%s: metadata %s %d is NULL or not valid UTF-8", path,
                       i % 2 ? "value" : "key", i / 2);
        if (i % 2 == 0)
            names[i / 2] = m;
    }
    VKG_TRY_GOTO(st, check_unique(path, names, n_meta, "metadata key"), done);
    VKG_TRY_GOTO(st, build_header(&h, tensors, n, nbytes, metadata_kv, n_meta), done);
    VKG_CHECK_GOTO(st, h.len <= VKG_ST_MAX_HEADER, VKG_ERR_INVALID_ARG, done,
                   "%s: the header would be %zu bytes, over the %d-byte limit readers accept", path,
                   h.len, VKG_ST_MAX_HEADER);
    write_ctx ctx = {&h, tensors, nbytes, n};
    st = vkg_io_write_atomic(path, write_file, &ctx);
done:
    free(h.p);
    free(names);
    free(nbytes);
    return st;
}
