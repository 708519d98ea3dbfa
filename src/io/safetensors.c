/* Reading Hugging Face's safetensors files (docs/FORMATS.md): the whole header is parsed and
 * validated when the file is opened, as strictly as the safetensors library does (and a little
 * more, as the format's README asks: duplicate names and a header not beginning with '{' are
 * refused, and so are names holding a NUL byte, which C strings cannot carry), and tensors are
 * then read one at a time by name, converted to fp32 or as raw bytes. Only the header is kept in
 * memory, never the data. Does not map the file, does not know the sub-byte dtypes (F4, F6),
 * and converts only F32, BF16 and F16 to fp32. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "base/json.h"
#include "io/io_internal.h"
#include "os/file.h"

#define CHUNK 4096 /* elements converted per read */

typedef struct meta_pair {
    char *key, *value;
} meta_pair;

struct vkg_safetensors {
    char *path;               /* for messages */
    int fd;                   /* the open file, or -1 when reading memory */
    const unsigned char *mem; /* the bytes of a memory file (vkg__safetensors_open_mem) */
    uint64_t size;            /* of the whole file */
    uint64_t data_start;      /* 8 + header size */
    int count, cap;
    vkg_st_info *infos;          /* (count) in data order once open */
    const vkg_st_info **by_name; /* (count) into infos, sorted by name */
    int nmeta, meta_cap, has_meta;
    meta_pair *meta; /* (meta_cap) nmeta pairs, sorted by key once open */
};

/* ---- reading bytes -------------------------------------------------------------------------- */

static vkg_status read_at(const vkg_safetensors *s, void *buf, size_t n, uint64_t off)
{
    VKG_CHECK(off <= s->size && n <= s->size - off, VKG_ERR_FORMAT,
              "%s: file ends early: %zu bytes wanted at byte %llu of %llu", s->path, n,
              (unsigned long long)off, (unsigned long long)s->size);
    if (s->fd < 0) {
        if (n)
            memcpy(buf, s->mem + off, n);
        return VKG_OK;
    }
    for (size_t done = 0; done < n;) {
        long long got = vkg_os_pread(s->fd, (char *)buf + done, n - done, off + done);
        VKG_CHECK(got >= 0, VKG_ERR_IO, "%s: read error: %s", s->path, strerror(errno));
        VKG_CHECK(got > 0, VKG_ERR_FORMAT,
                  "%s: file ends early at byte %llu (it shrank since it was opened?)", s->path,
                  (unsigned long long)(off + done));
        done += (size_t)got;
    }
    return VKG_OK;
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* ---- the header ----------------------------------------------------------------------------- */

#define SHOWN 80

/* A name from the file rendered for a message (control bytes escaped). */
static const char *shown(char out[SHOWN], const char *name)
{
    return vkg__escape(out, SHOWN, name, strlen(name));
}

static vkg_status parse_dtype(const vkg_safetensors *s, const char *tensor, const char *text,
                              vkg_st_dtype *out)
{
    for (int d = 0; d < VKG_ST_DTYPE_COUNT; d++)
        if (!strcmp(text, vkg_st_dtype_name((vkg_st_dtype)d))) {
            *out = (vkg_st_dtype)d;
            return VKG_OK;
        }
    char d[SHOWN];
    return VKG_FAIL(VKG_ERR_FORMAT, "%s: tensor '%s': unknown or unsupported dtype \"%s\"", s->path,
                    tensor, shown(d, text));
}

/* Read a JSON array of at most max non-negative integers into v; sets *n. */
static vkg_status parse_ints(vkg__json *j, const vkg_safetensors *s, const char *tensor,
                             const char *field, int64_t *v, int max, int *n)
{
    int more = 0;
    *n = 0;
    VKG_TRY(vkg__json_open(j, '[', &more));
    while (more) {
        long long x = 0;
        /* JSON (and the library) spell no "-0" and no leading zeros; vkg__json_int allows both */
        int c = vkg__json_peek(j);
        VKG_CHECK(c != '-', VKG_ERR_FORMAT, "%s: tensor '%s': %s holds a negative value", s->path,
                  tensor, field);
        VKG_CHECK(c != '0' || j->end - j->p < 2 || j->p[1] < '0' || j->p[1] > '9', VKG_ERR_FORMAT,
                  "%s: tensor '%s': %s holds a number with a leading zero", s->path, tensor, field);
        VKG_TRY(vkg__json_int(j, &x));
        VKG_CHECK(*n < max, VKG_ERR_FORMAT, "%s: tensor '%s': %s has more than %d entries", s->path,
                  tensor, field, max);
        v[(*n)++] = x;
        VKG_TRY(vkg__json_next(j, ']', &more));
    }
    return VKG_OK;
}

/* Parse one tensor's object ({"dtype", "shape", "data_offsets"}, other fields skipped) into t,
 * checking that its byte range matches its shape and dtype; t->offset is relative to the data
 * until the header is done. */
static vkg_status parse_tensor(vkg__json *j, const vkg_safetensors *s, vkg_st_info *t, char **buf,
                               size_t *cap)
{
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    char name[SHOWN];
    shown(name, t->name);
    int more = 0, seen[3] = {0, 0, 0}, nofs = 0;
    int64_t ofs[2] = {0, 0};
    size_t len = 0;
    VKG_CHECK(vkg__json_peek(j) == '{', VKG_ERR_FORMAT, "%s: tensor '%s': not a JSON object",
              s->path, name);
    VKG_TRY(vkg__json_open(j, '{', &more));
    while (more) {
        VKG_TRY(vkg__json_string(j, buf, &len, cap));
        VKG_TRY(vkg__json_expect(j, ':'));
        int f = 2;
        while (f >= 0 && strcmp(*buf, fields[f]))
            f--;
        if (f < 0) {
            VKG_TRY(vkg__json_skip(j));
        } else {
            VKG_CHECK(!seen[f], VKG_ERR_FORMAT, "%s: tensor '%s': field \"%s\" appears twice",
                      s->path, name, fields[f]);
            seen[f] = 1;
            VKG_CHECK(vkg__json_peek(j) == (f ? '[' : '"'), VKG_ERR_FORMAT,
                      "%s: tensor '%s': \"%s\" is not %s", s->path, name, fields[f],
                      f ? "an array of integers" : "a string");
            if (f == 0) {
                VKG_TRY(vkg__json_string(j, buf, &len, cap));
                VKG_TRY(parse_dtype(s, name, *buf, &t->dtype));
            } else if (f == 1) {
                VKG_TRY(parse_ints(j, s, name, "shape", t->shape, VKG_ST_MAX_RANK, &t->rank));
            } else {
                VKG_TRY(parse_ints(j, s, name, "data_offsets", ofs, 2, &nofs));
            }
        }
        VKG_TRY(vkg__json_next(j, '}', &more));
    }
    for (int f = 0; f < 3; f++)
        VKG_CHECK(seen[f], VKG_ERR_FORMAT, "%s: tensor '%s': no \"%s\" field", s->path, name,
                  fields[f]);
    VKG_CHECK(nofs == 2, VKG_ERR_FORMAT,
              "%s: tensor '%s': data_offsets must be [begin, end], got %d numbers", s->path, name,
              nofs);
    VKG_CHECK(ofs[0] <= ofs[1], VKG_ERR_FORMAT,
              "%s: tensor '%s': data_offsets [%lld, %lld] end before they begin", s->path, name,
              (long long)ofs[0], (long long)ofs[1]);
    uint64_t numel = 1;
    for (int i = 0; i < t->rank; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        VKG_CHECK(d == 0 || numel <= UINT64_MAX / d, VKG_ERR_FORMAT,
                  "%s: tensor '%s': the product of its shape overflows", s->path, name);
        numel *= d;
    }
    size_t es = vkg_st_dtype_size(t->dtype);
    VKG_CHECK(numel <= UINT64_MAX / es, VKG_ERR_FORMAT,
              "%s: tensor '%s': its size in bytes overflows", s->path, name);
    t->numel = numel;
    t->nbytes = numel * es;
    t->offset = (uint64_t)ofs[0];
    VKG_CHECK((uint64_t)(ofs[1] - ofs[0]) == t->nbytes, VKG_ERR_FORMAT,
              "%s: tensor '%s': data_offsets [%lld, %lld] hold %llu bytes but %llu elements of "
              "%s need %llu",
              s->path, name, (long long)ofs[0], (long long)ofs[1],
              (unsigned long long)(ofs[1] - ofs[0]), (unsigned long long)numel,
              vkg_st_dtype_name(t->dtype), (unsigned long long)t->nbytes);
    return VKG_OK;
}

/* Parse "__metadata__": null, or an object of string values. */
static vkg_status parse_metadata(vkg__json *j, vkg_safetensors *s, char **buf, size_t *cap)
{
    int more = 0;
    size_t len = 0;
    char key[SHOWN];
    VKG_CHECK(!s->has_meta, VKG_ERR_FORMAT, "%s: \"__metadata__\" appears twice", s->path);
    s->has_meta = 1;
    if (vkg__json_peek(j) == 'n') /* null: no metadata, as the library reads it */
        return vkg__json_skip(j); /* the only value starting with 'n' it accepts is null */
    VKG_CHECK(vkg__json_peek(j) == '{', VKG_ERR_FORMAT,
              "%s: \"__metadata__\" is neither an object nor null", s->path);
    VKG_TRY(vkg__json_open(j, '{', &more));
    while (more) {
        if (s->nmeta == s->meta_cap) {
            int nc = s->meta_cap ? 2 * s->meta_cap : 8;
            meta_pair *m = realloc(s->meta, (size_t)nc * sizeof *m);
            VKG_CHECK(m, VKG_ERR_NOMEM, "%s: out of memory", s->path);
            memset(m + s->meta_cap, 0, (size_t)(nc - s->meta_cap) * sizeof *m);
            s->meta = m;
            s->meta_cap = nc;
        }
        meta_pair *p = &s->meta[s->nmeta]; /* freed by close, complete or not */
        for (int k = 0; k < 2; k++) {
            if (k) {
                VKG_TRY(vkg__json_expect(j, ':'));
                VKG_CHECK(vkg__json_peek(j) == '"', VKG_ERR_FORMAT,
                          "%s: __metadata__ \"%s\": value is not a string", s->path,
                          shown(key, p->key));
            }
            VKG_TRY(vkg__json_string(j, buf, &len, cap));
            char *copy = malloc(len + 1);
            VKG_CHECK(copy, VKG_ERR_NOMEM, "%s: out of memory", s->path);
            memcpy(copy, *buf, len + 1);
            *(k ? &p->value : &p->key) = copy;
        }
        s->nmeta++;
        VKG_TRY(vkg__json_next(j, '}', &more));
    }
    return VKG_OK;
}

/* Append an entry named by the n bytes of buf. */
static vkg_status add_tensor(vkg_safetensors *s, const char *buf, size_t n, vkg_st_info **t)
{
    char nm[SHOWN];
    VKG_CHECK(strlen(buf) == n, VKG_ERR_FORMAT, "%s: tensor name '%s' holds a NUL character",
              s->path, vkg__escape(nm, sizeof nm, buf, n));
    if (s->count == s->cap) {
        int nc = s->cap ? 2 * s->cap : 16;
        vkg_st_info *ni = realloc(s->infos, (size_t)nc * sizeof *ni);
        VKG_CHECK(ni, VKG_ERR_NOMEM, "%s: out of memory", s->path);
        s->infos = ni;
        s->cap = nc;
    }
    char *name = malloc(n + 1);
    VKG_CHECK(name, VKG_ERR_NOMEM, "%s: out of memory", s->path);
    memcpy(name, buf, n + 1);
    *t = &s->infos[s->count++];
    memset(*t, 0, sizeof **t);
    (*t)->name = name;
    return VKG_OK;
}

static int by_offset(const void *a, const void *b)
{
    const vkg_st_info *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name); /* empty tensors sharing an offset: a fixed order */
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const meta_pair *)a)->key, ((const meta_pair *)b)->key);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const vkg_st_info *const *)a)->name, (*(const vkg_st_info *const *)b)->name);
}

/* After the header is parsed: names and metadata keys unique, byte ranges contiguous from 0 and
 * covering the data to the end of the file; offsets become absolute. */
static vkg_status check_layout(vkg_safetensors *s)
{
    char a[SHOWN], b[SHOWN];
    if (s->count) /* qsort must not be given NULL, even for no elements */
        qsort(s->infos, (size_t)s->count, sizeof *s->infos, by_offset);
    s->by_name = malloc((size_t)(s->count ? s->count : 1) * sizeof *s->by_name);
    VKG_CHECK(s->by_name, VKG_ERR_NOMEM, "%s: out of memory", s->path);
    for (int i = 0; i < s->count; i++)
        s->by_name[i] = &s->infos[i];
    if (s->count)
        qsort(s->by_name, (size_t)s->count, sizeof *s->by_name, by_name);
    for (int i = 1; i < s->count; i++)
        VKG_CHECK(strcmp(s->by_name[i - 1]->name, s->by_name[i]->name), VKG_ERR_FORMAT,
                  "%s: tensor '%s' appears twice in the header", s->path,
                  shown(a, s->by_name[i]->name));
    if (s->nmeta)
        qsort(s->meta, (size_t)s->nmeta, sizeof *s->meta, by_key);
    for (int i = 1; i < s->nmeta; i++)
        VKG_CHECK(strcmp(s->meta[i - 1].key, s->meta[i].key), VKG_ERR_FORMAT,
                  "%s: __metadata__ \"%s\" appears twice", s->path, shown(a, s->meta[i].key));
    uint64_t at = 0, data = s->size - s->data_start;
    for (int i = 0; i < s->count; i++) {
        const vkg_st_info *t = &s->infos[i];
        VKG_CHECK(t->offset <= at, VKG_ERR_FORMAT,
                  "%s: tensor '%s': data_offsets begin at %llu, leaving a gap after %s%s%s (which "
                  "ends at %llu)",
                  s->path, shown(a, t->name), (unsigned long long)t->offset,
                  i ? "tensor '" : "the start of the data", i ? shown(b, t[-1].name) : "",
                  i ? "'" : "", (unsigned long long)at);
        VKG_CHECK(t->offset == at, VKG_ERR_FORMAT,
                  "%s: tensor '%s': data_offsets begin at %llu, overlapping tensor '%s' (which "
                  "ends at %llu)",
                  s->path, shown(a, t->name), (unsigned long long)t->offset, shown(b, t[-1].name),
                  (unsigned long long)at);
        VKG_CHECK(t->nbytes <= data - at, VKG_ERR_FORMAT,
                  "%s: tensor '%s': data_offsets end at %llu, past the %llu bytes of data in the "
                  "file (truncated?)",
                  s->path, shown(a, t->name), (unsigned long long)(at + t->nbytes),
                  (unsigned long long)data);
        at += t->nbytes;
    }
    VKG_CHECK(at == data, VKG_ERR_FORMAT,
              "%s: the tensors' data ends at byte %llu of the data but the file holds %llu bytes "
              "of data (%llu bytes no tensor covers)",
              s->path, (unsigned long long)at, (unsigned long long)data,
              (unsigned long long)(data - at));
    for (int i = 0; i < s->count; i++)
        s->infos[i].offset += s->data_start;
    return VKG_OK;
}

/* Parse the header text (n bytes) into s. */
static vkg_status parse_header(vkg_safetensors *s, const char *text, size_t n)
{
    vkg__json j;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    int more = 0;
    vkg_status st = VKG_OK;
    VKG_CHECK(vkg__utf8_valid(text, n), VKG_ERR_FORMAT, "%s: the header is not valid UTF-8",
              s->path);
    VKG_CHECK(n > 0 && text[0] == '{', VKG_ERR_FORMAT,
              "%s: the header does not start with '{' (not a safetensors file?)", s->path);
    vkg__json_init(&j, text, n, s->path);
    VKG_TRY(vkg__json_open(&j, '{', &more));
    while (more) {
        VKG_TRY_GOTO(st, vkg__json_string(&j, &buf, &len, &cap), done);
        VKG_TRY_GOTO(st, vkg__json_expect(&j, ':'), done);
        if (!strcmp(buf, "__metadata__")) {
            VKG_TRY_GOTO(st, parse_metadata(&j, s, &buf, &cap), done);
        } else {
            vkg_st_info *t = NULL;
            VKG_TRY_GOTO(st, add_tensor(s, buf, len, &t), done);
            VKG_TRY_GOTO(st, parse_tensor(&j, s, t, &buf, &cap), done);
        }
        VKG_TRY_GOTO(st, vkg__json_next(&j, '}', &more), done);
    }
    VKG_TRY_GOTO(st, vkg__json_end(&j), done);
    st = check_layout(s);
done:
    free(buf);
    return st;
}

/* ---- opening and closing -------------------------------------------------------------------- */

void vkg_safetensors_close(vkg_safetensors **ps)
{
    vkg_safetensors *s = ps ? *ps : NULL;
    if (!s)
        return;
    if (s->fd >= 0)
        vkg_os_close(s->fd);
    for (int i = 0; i < s->count; i++)
        free((char *)s->infos[i].name);
    for (int i = 0; i < s->meta_cap; i++) {
        free(s->meta[i].key);
        free(s->meta[i].value);
    }
    free(s->meta);
    free(s->infos);
    free(s->by_name);
    free(s->path);
    free(s);
    *ps = NULL;
}

/* Read and check the header of s (fd or mem and size set). */
static vkg_status load(vkg_safetensors *s)
{
    unsigned char le[8];
    VKG_CHECK(s->size >= 8, VKG_ERR_FORMAT,
              "%s: file is %llu bytes, too short for the 8-byte header size of a safetensors file",
              s->path, (unsigned long long)s->size);
    VKG_TRY(read_at(s, le, 8, 0));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | le[i];
    VKG_CHECK(n <= VKG_ST_MAX_HEADER, VKG_ERR_FORMAT,
              "%s: header size %llu is over the %d-byte limit (corrupt, or not a safetensors file)",
              s->path, (unsigned long long)n, VKG_ST_MAX_HEADER);
    VKG_CHECK(n <= s->size - 8, VKG_ERR_FORMAT,
              "%s: header size %llu but only %llu bytes follow the size (truncated?)", s->path,
              (unsigned long long)n, (unsigned long long)(s->size - 8));
    s->data_start = 8 + n;
    char *text = malloc((size_t)n + 1);
    VKG_CHECK(text, VKG_ERR_NOMEM, "%s: out of memory for a %llu-byte header", s->path,
              (unsigned long long)n);
    vkg_status st = read_at(s, text, (size_t)n, 8);
    if (st == VKG_OK)
        st = parse_header(s, text, (size_t)n);
    free(text);
    return st;
}

static vkg_status create(const char *path, vkg_safetensors **out)
{
    vkg_safetensors *s = calloc(1, sizeof *s);
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!s || !p) {
        free(s);
        free(p);
        return VKG_FAIL(VKG_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(p, path, n + 1);
    s->path = p;
    s->fd = -1;
    *out = s;
    return VKG_OK;
}

vkg_status vkg_safetensors_open(const char *path, vkg_safetensors **out)
{
    vkg_safetensors *s = NULL;
    *out = NULL;
    VKG_TRY(create(path, &s));
    vkg_status st = vkg__io_open_fd(path, &s->fd, &s->size);
    if (st == VKG_OK)
        st = load(s);
    if (st < 0) {
        vkg_safetensors_close(&s);
        return st;
    }
    *out = s;
    return VKG_OK;
}

vkg_status vkg__safetensors_open_mem(const void *data, size_t size, const char *name,
                                     vkg_safetensors **out)
{
    vkg_safetensors *s = NULL;
    *out = NULL;
    VKG_TRY(create(name, &s));
    s->mem = data;
    s->size = size;
    vkg_status st = load(s);
    if (st < 0) {
        vkg_safetensors_close(&s);
        return st;
    }
    *out = s;
    return VKG_OK;
}

/* ---- what the file holds -------------------------------------------------------------------- */

int vkg_safetensors_count(const vkg_safetensors *s)
{
    return s->count;
}

const vkg_st_info *vkg_safetensors_info(const vkg_safetensors *s, int i)
{
    return i >= 0 && i < s->count ? &s->infos[i] : NULL;
}

const vkg_st_info *vkg_safetensors_find(const vkg_safetensors *s, const char *name)
{
    vkg_st_info key;
    const vkg_st_info *kp = &key;
    key.name = name;
    const vkg_st_info *const *hit =
        s->count ? bsearch(&kp, s->by_name, (size_t)s->count, sizeof *s->by_name, by_name) : NULL;
    return hit ? *hit : NULL;
}

int vkg_safetensors_metadata_count(const vkg_safetensors *s)
{
    return s->nmeta;
}

void vkg_safetensors_metadata_at(const vkg_safetensors *s, int i, const char **key,
                                 const char **value)
{
    int ok = i >= 0 && i < s->nmeta;
    *key = ok ? s->meta[i].key : NULL;
    *value = ok ? s->meta[i].value : NULL;
}

const char *vkg_safetensors_metadata(const vkg_safetensors *s, const char *key)
{
    meta_pair k = {(char *)key, NULL};
    const meta_pair *hit =
        s->nmeta ? bsearch(&k, s->meta, (size_t)s->nmeta, sizeof k, by_key) : NULL;
    return hit ? hit->value : NULL;
}

/* ---- reading tensors ------------------------------------------------------------------------ */

/* The tensor called name, with room for it in capacity units of unit bytes. */
static vkg_status lookup(const vkg_safetensors *s, const char *name, size_t capacity, int bytes,
                         const vkg_st_info **out)
{
    char nm[SHOWN];
    const vkg_st_info *t = vkg_safetensors_find(s, name);
    VKG_CHECK(t, VKG_ERR_NOT_FOUND, "%s: no tensor '%s' in the file", s->path, shown(nm, name));
    uint64_t need = bytes ? t->nbytes : t->numel;
    VKG_CHECK(need <= capacity, VKG_ERR_INVALID_ARG,
              "%s: tensor '%s' holds %llu %s but the buffer has room for %zu", s->path,
              shown(nm, name), (unsigned long long)need, bytes ? "bytes" : "values", capacity);
    *out = t;
    return VKG_OK;
}

vkg_status vkg_safetensors_read_raw(vkg_safetensors *s, const char *name, void *out,
                                    size_t capacity)
{
    const vkg_st_info *t = NULL;
    VKG_TRY(lookup(s, name, capacity, 1, &t));
    VKG_TRY(read_at(s, out, (size_t)t->nbytes, t->offset));
    size_t es = vkg_st_dtype_size(t->dtype);
    if (!host_is_le() && es > 1) {
        unsigned char *p = out;
        for (uint64_t i = 0; i < t->numel; i++, p += es)
            for (size_t b = 0; b < es / 2; b++) {
                unsigned char c = p[b];
                p[b] = p[es - 1 - b];
                p[es - 1 - b] = c;
            }
    }
    return VKG_OK;
}

vkg_status vkg_safetensors_read_f32(vkg_safetensors *s, const char *name, float *out,
                                    size_t capacity)
{
    const vkg_st_info *t = NULL;
    char nm[SHOWN];
    VKG_TRY(lookup(s, name, capacity, 0, &t));
    VKG_CHECK(t->dtype == VKG_ST_F32 || t->dtype == VKG_ST_BF16 || t->dtype == VKG_ST_F16,
              VKG_ERR_UNSUPPORTED, "%s: tensor '%s' is %s, which does not convert to fp32", s->path,
              shown(nm, name), vkg_st_dtype_name(t->dtype));
    size_t es = vkg_st_dtype_size(t->dtype);
    unsigned char buf[CHUNK * 4];
    for (uint64_t done = 0; done < t->numel;) {
        size_t m = t->numel - done < CHUNK ? (size_t)(t->numel - done) : CHUNK;
        VKG_TRY(read_at(s, buf, m * es, t->offset + done * es));
        for (size_t i = 0; i < m; i++) {
            const unsigned char *b = buf + i * es;
            if (es == 4) {
                uint32_t u =
                    b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
                memcpy(&out[done + i], &u, 4);
            } else {
                uint16_t h = (uint16_t)(b[0] | b[1] << 8);
                out[done + i] = t->dtype == VKG_ST_BF16 ? vkg_bf16_to_f32(h) : vkg_f16_to_f32(h);
            }
        }
        done += m;
    }
    return VKG_OK;
}
