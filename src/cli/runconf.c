/* run.json, the settings of a run kept beside its checkpoints (see runconf.h): formatting a flag's
 * value as text, the file's JSON, and reading it back through the flag table. Knows no
 * subcommand and writes no file. */
#include "cli/runconf.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/json.h"

/* The shortest %g text of v that reads back as the same float (is_float) or double. */
static void real_text(double v, int is_float, char *buf, size_t cap)
{
    if (!buf || !cap) /* never, but GCC's -fsanitize=undefined build of the fuzz target asks */
        return;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v)
            return;
    }
}

static int in_range(const vkg_flag *f, double v)
{
    return !(f->min < f->max) || (v >= f->min && v <= f->max);
}

int vkg_cli_flag_text(const vkg_flag *f, char *buf, size_t cap)
{
    buf[0] = '\0';
    switch (f->type) {
    case VKG_FLAG_INT:
        if (!in_range(f, *(const int *)f->dst))
            return 0;
        snprintf(buf, cap, "%d", *(const int *)f->dst);
        return 1;
    case VKG_FLAG_LL:
        if (!in_range(f, (double)*(const long long *)f->dst))
            return 0;
        snprintf(buf, cap, "%lld", *(const long long *)f->dst);
        return 1;
    case VKG_FLAG_U64:
        if (!in_range(f, (double)*(const uint64_t *)f->dst))
            return 0;
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)f->dst);
        return 1;
    case VKG_FLAG_FLOAT:
        if (!in_range(f, *(const float *)f->dst))
            return 0;
        real_text(*(const float *)f->dst, 1, buf, cap);
        return 1;
    case VKG_FLAG_DOUBLE:
        if (!in_range(f, *(const double *)f->dst))
            return 0;
        real_text(*(const double *)f->dst, 0, buf, cap);
        return 1;
    case VKG_FLAG_STR: {
        const char *s = *(const char *const *)f->dst;
        if (!s)
            return 0;
        snprintf(buf, cap, "%s", s);
        return 1;
    }
    case VKG_FLAG_CHOICE: {
        int k = *(const int *)f->dst, n = 0;
        while (f->choices[n])
            n++;
        if (k < 0 || k >= n)
            return 0;
        snprintf(buf, cap, "%s", f->choices[k]);
        return 1;
    }
    case VKG_FLAG_BOOL:
        if (!*(const int *)f->dst)
            return 0;
        snprintf(buf, cap, "true");
        return 1;
    }
    return 0;
}

/* A growing text buffer; failed stays set once an allocation fails. */
typedef struct text {
    char *s;
    size_t len, cap;
    int failed;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *ns = realloc(t->s, cap);
        if (!ns) {
            t->failed = 1;
            return;
        }
        t->s = ns, t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void put_str(text *t, const char *s)
{
    put(t, s, strlen(s));
}

/* s as a JSON string: quotes, backslashes and control bytes escaped; other bytes as they are. */
static void put_json_string(text *t, const char *s)
{
    put(t, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\', esc[1] = (char)ch;
            put(t, esc, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            put_str(t, esc);
        } else {
            put(t, s, 1);
        }
    }
    put(t, "\"", 1);
}

/* dir "/" rel as one JSON string. */
static void put_json_string_pair(text *t, const char *dir, const char *rel)
{
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *joined = malloc(n);
    if (!joined) {
        t->failed = 1;
        return;
    }
    snprintf(joined, n, "%s/%s", dir, rel);
    put_json_string(t, joined);
    free(joined);
}

char *vkg_cli_runconf_json(const vkg_flag *flags, int nflags, const unsigned char *skip)
{
    text t = {0};
    char num[32], *value = malloc(65536);
    if (!value)
        return NULL;
    snprintf(num, sizeof num, "%d", VKG_RUNCONF_VERSION);
    put_str(&t, "{\n  \"format\": \"vkgpt-run\",\n  \"version\": ");
    put_str(&t, num);
    put_str(&t, ",\n  \"flags\": {");
    int first = 1;
    for (int i = 0; i < nflags; i++) {
        if ((skip && skip[i] == VKG_RUNCONF_SKIP) || !vkg_cli_flag_text(&flags[i], value, 65536))
            continue;
        put_str(&t, first ? "\n    " : ",\n    ");
        put_json_string(&t, flags[i].name + 2);
        put_str(&t, ": ");
        char cwd[4096];
        if (skip && skip[i] == VKG_RUNCONF_PATH && value[0] != '/' &&
            vkg_os_getcwd(cwd, sizeof cwd) == 0) {
            put_json_string_pair(&t, cwd, value); /* "<cwd>/<value>" */
        } else {
            put_json_string(&t, value);
        }
        first = 0;
    }
    put_str(&t, "\n  }\n}\n");
    free(value);
    if (t.failed) {
        free(t.s);
        return NULL;
    }
    return t.s;
}

void vkg_cli_runconf_free(vkg_cli_runconf *rc)
{
    for (int i = 0; i < VKG_FLAGS_MAX; i++)
        free(rc->value[i]);
    memset(rc, 0, sizeof *rc);
}

/* The whole file at path, NUL-terminated, in *out (malloc'ed); 1 when there is none, 2 with err
 * set when it cannot be read, is not a regular file (a FIFO may never end, /dev/zero never does)
 * or holds more than VKG_RUNCONF_MAX_BYTES. */
static int read_whole(const char *path, char **out, size_t *len, char *err, size_t cap)
{
    int fd = -1;
    unsigned long long size = 0;
    const char *kind = NULL;
    int e = vkg_os_open_read(path, &fd, &size, &kind);
    if (e == ENOENT)
        return 1;
    if (kind || e) {
        if (kind)
            snprintf(err, cap, "%s: is %s, not a regular file: only regular files are read", path,
                     kind);
        else
            snprintf(err, cap, "%s: cannot open it: %s", path, strerror(e));
        return 2;
    }
    char *buf = size <= VKG_RUNCONF_MAX_BYTES ? malloc(VKG_RUNCONF_MAX_BYTES + 2) : NULL;
    long long got = 0, n = 0;
    while (buf && n <= VKG_RUNCONF_MAX_BYTES &&
           (got = vkg_os_read(fd, buf + n, (size_t)(VKG_RUNCONF_MAX_BYTES + 1 - n))) > 0)
        n += got;
    if (size > VKG_RUNCONF_MAX_BYTES || n > VKG_RUNCONF_MAX_BYTES)
        snprintf(err, cap, "%s: holds more than %d bytes: too large for a run's settings", path,
                 VKG_RUNCONF_MAX_BYTES);
    else if (!buf)
        snprintf(err, cap, "%s: out of memory reading it", path);
    else if (got < 0)
        snprintf(err, cap, "%s: cannot read it: %s", path, strerror(errno));
    vkg_os_close(fd);
    if (err[0]) {
        free(buf);
        return 2;
    }
    buf[n] = '\0';
    *out = buf, *len = (size_t)n;
    return 0;
}

/* Apply the text of flags[k], read from field `field` of path, through the flag table. */
static int apply(const char *path, const vkg_flag *flags, int nflags, int k, const char *value,
                 char *err, size_t cap)
{
    char *argv[3] = {"train", (char *)flags[k].name, (char *)value};
    int argc = 3;
    if (flags[k].type == VKG_FLAG_BOOL) {
        if (strcmp(value, "true") && strcmp(value, "false")) {
            char shown[256];
            snprintf(err, cap, "%s: field \"flags.%s\": '%s' is not true or false", path,
                     flags[k].name + 2, vkg__escape(shown, sizeof shown, value, strlen(value)));
            return 2;
        }
        if (!strcmp(value, "false"))
            return 0;
        argc = 2;
    }
    vkg_flags_result r;
    if (vkg_flags_parse_args(flags, nflags, argc, argv, NULL, &r) != VKG_FLAGS_OK) {
        char shown[4 * sizeof r.error + 1]; /* the flag's message quotes the file's value */
        vkg__escape(shown, sizeof shown, r.error, strlen(r.error));
        snprintf(err, cap, "%s: field \"flags.%s\": %s", path, flags[k].name + 2, shown);
        return 2;
    }
    return 0;
}

/* The "flags" object of a run.json: each field applied to its flag. */
static int read_flags(vkg__json *j, const char *path, const vkg_flag *flags, int nflags,
                      const unsigned char *skip, vkg_cli_runconf *rc, char *err, size_t cap)
{
    char *key = NULL, *val = NULL, k_shown[160];
    size_t klen, kcap = 0, vlen, vcap = 0;
    int more = 0, rcode = 2;
    if (vkg__json_open(j, '{', &more) != VKG_OK)
        goto fail_json;
    while (more) {
        if (vkg__json_string(j, &key, &klen, &kcap) != VKG_OK || vkg__json_expect(j, ':') != VKG_OK)
            goto fail_json;
        vkg__escape(k_shown, sizeof k_shown, key, klen); /* the key as a message shows it */
        if (vkg__json_peek(j) != '"') {
            snprintf(err, cap,
                     "%s: field \"flags.%s\": expected a string (the value as it would be typed "
                     "after --%s)",
                     path, k_shown, k_shown);
            goto done;
        }
        if (vkg__json_string(j, &val, &vlen, &vcap) != VKG_OK)
            goto fail_json;
        int k = -1;
        for (int i = 0; i < nflags && k < 0; i++)
            if (!strcmp(flags[i].name + 2, key) && !(skip && skip[i] == VKG_RUNCONF_SKIP))
                k = i;
        if (k < 0) {
            snprintf(err, cap, "%s: field \"flags.%s\": not a setting a run keeps", path, k_shown);
            goto done;
        }
        if (rc->value[k]) {
            snprintf(err, cap, "%s: field \"flags.%s\" is given twice", path, k_shown);
            goto done;
        }
        if (strlen(val) != vlen) {
            snprintf(err, cap, "%s: field \"flags.%s\": the value holds a NUL byte", path, k_shown);
            goto done;
        }
        if (!(rc->value[k] = strdup(val))) {
            snprintf(err, cap, "%s: out of memory", path);
            goto done;
        }
        if (apply(path, flags, nflags, k, rc->value[k], err, cap))
            goto done;
        if (vkg__json_next(j, '}', &more) != VKG_OK)
            goto fail_json;
    }
    rcode = 0;
    goto done;
fail_json:
    snprintf(err, cap, "%s (in field \"flags\")", vkg_error_message());
done:
    free(key);
    free(val);
    return rcode;
}

int vkg_cli_runconf_load(const char *path, const vkg_flag *flags, int nflags,
                         const unsigned char *skip, vkg_cli_runconf *rc, char *err, size_t cap)
{
    char *doc = NULL;
    size_t len = 0;
    memset(rc, 0, sizeof *rc);
    err[0] = '\0';
    int rcode = read_whole(path, &doc, &len, err, cap);
    if (rcode == 0)
        rcode = vkg_cli_runconf_parse(path, doc, len, flags, nflags, skip, rc, err, cap);
    free(doc);
    return rcode;
}

int vkg_cli_runconf_parse(const char *path, const char *doc, size_t len, const vkg_flag *flags,
                          int nflags, const unsigned char *skip, vkg_cli_runconf *rc, char *err,
                          size_t cap)
{
    char *key = NULL, *val = NULL, shown[160];
    size_t klen, kcap = 0, vlen, vcap = 0;
    int more = 0, seen_format = 0, seen_flags = 0, rcode = 2;
    long long version = -1;
    memset(rc, 0, sizeof *rc);
    err[0] = '\0';
    vkg__json j;
    vkg__json_init(&j, doc, len, path);
    if (vkg__json_open(&j, '{', &more) != VKG_OK)
        goto fail_json;
    while (more) {
        if (vkg__json_string(&j, &key, &klen, &kcap) != VKG_OK ||
            vkg__json_expect(&j, ':') != VKG_OK)
            goto fail_json;
        if (!strcmp(key, "format")) {
            if (vkg__json_string(&j, &val, &vlen, &vcap) != VKG_OK)
                goto fail_json;
            if (strcmp(val, "vkgpt-run")) {
                snprintf(err, cap, "%s: field \"format\" is '%s', not 'vkgpt-run'", path,
                         vkg__escape(shown, sizeof shown, val, vlen));
                goto done;
            }
            seen_format = 1;
        } else if (!strcmp(key, "version")) {
            if (vkg__json_int(&j, &version) != VKG_OK)
                goto fail_json;
            if (version != VKG_RUNCONF_VERSION) {
                snprintf(err, cap, "%s: field \"version\" is %lld; this vkgpt reads version %d",
                         path, version, VKG_RUNCONF_VERSION);
                goto done;
            }
        } else if (!strcmp(key, "flags") && !seen_flags) {
            if (read_flags(&j, path, flags, nflags, skip, rc, err, cap))
                goto done;
            seen_flags = 1;
        } else {
            snprintf(err, cap, "%s: field \"%s\": not a field of a run's settings%s", path,
                     vkg__escape(shown, sizeof shown, key, klen),
                     strcmp(key, "flags") ? "" : " twice");
            goto done;
        }
        if (vkg__json_next(&j, '}', &more) != VKG_OK)
            goto fail_json;
    }
    if (vkg__json_end(&j) != VKG_OK)
        goto fail_json;
    if (!seen_format || version < 0 || !seen_flags) {
        snprintf(err, cap, "%s: field \"%s\" is missing", path,
                 !seen_format  ? "format"
                 : version < 0 ? "version"
                               : "flags");
        goto done;
    }
    rcode = 0;
    goto done;
fail_json:
    snprintf(err, cap, "%s", vkg_error_message());
done:
    if (rcode)
        vkg_cli_runconf_free(rc);
    free(key);
    free(val);
    return rcode;
}
