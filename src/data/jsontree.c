/* The JSON tree of jsontree.h: a recursive descent over vkg__json's pull reader, appending nodes
 * to one array and decoded strings to one arena. Lookups are linear in an object's members. */
#include "data/jsontree.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"

#define MAX_DEPTH 64

typedef struct parser {
    vkg__jt *t;
    vkg__json j;
    char *buf;
    size_t blen, bcap;
} parser;

static vkg_status new_node(vkg__jt *t, vkg__jt_type type, size_t off, long *out)
{
    if (t->nn == t->ncap) {
        size_t cap = t->ncap ? 2 * t->ncap : 1024;
        vkg__jt_node *n = realloc(t->n, cap * sizeof *n);
        VKG_CHECK(n, VKG_ERR_NOMEM, "%s: out of memory", t->name);
        t->n = n;
        t->ncap = cap;
    }
    t->n[t->nn] = (vkg__jt_node){.type = type, .off = off, .first = -1, .next = -1};
    *out = (long)t->nn++;
    return VKG_OK;
}

/* Copy the string just read into the arena; its offset in *at. */
static vkg_status keep(parser *p, size_t *at)
{
    vkg__jt *t = p->t;
    if (t->alen + p->blen + 1 > t->acap) {
        size_t cap = t->acap ? t->acap : 4096;
        while (cap < t->alen + p->blen + 1)
            cap *= 2;
        char *a = realloc(t->arena, cap);
        VKG_CHECK(a, VKG_ERR_NOMEM, "%s: out of memory", t->name);
        t->arena = a;
        t->acap = cap;
    }
    memcpy(t->arena + t->alen, p->buf, p->blen);
    t->arena[t->alen + p->blen] = '\0';
    *at = t->alen;
    t->alen += p->blen + 1;
    return VKG_OK;
}

static vkg_status word(parser *p, const char *w)
{
    size_t n = strlen(w);
    VKG_CHECK((size_t)(p->j.end - p->j.p) >= n && !memcmp(p->j.p, w, n), VKG_ERR_FORMAT,
              "%s: byte %ld: expected a JSON value", p->t->name, (long)(p->j.p - p->j.start));
    p->j.p += n;
    return VKG_OK;
}

static vkg_status value(parser *p, int depth, long *out)
{
    vkg__jt *t = p->t;
    int c = vkg__json_peek(&p->j), more;
    size_t off = (size_t)(p->j.p - p->j.start);
    VKG_CHECK(c >= 0, VKG_ERR_FORMAT, "%s: the file ends where a value was expected (truncated?)",
              t->name);
    VKG_CHECK(depth < MAX_DEPTH, VKG_ERR_FORMAT, "%s: byte %zu: nested deeper than %d levels",
              t->name, off, MAX_DEPTH);
    long self = -1, prev = -1;
    if (c == '"') {
        VKG_TRY(vkg__json_string(&p->j, &p->buf, &p->blen, &p->bcap));
        VKG_TRY(new_node(t, VKG_JT_STR, off, &self));
        VKG_TRY(keep(p, &t->n[self].str));
        t->n[self].len = p->blen;
    } else if (c == '[' || c == '{') {
        VKG_TRY(new_node(t, c == '[' ? VKG_JT_ARR : VKG_JT_OBJ, off, &self));
        VKG_TRY(vkg__json_open(&p->j, (char)c, &more));
        while (more) {
            size_t key = 0, klen = 0;
            long child = -1;
            if (c == '{') {
                VKG_TRY(vkg__json_string(&p->j, &p->buf, &p->blen, &p->bcap));
                VKG_TRY(keep(p, &key));
                klen = p->blen;
                VKG_TRY(vkg__json_expect(&p->j, ':'));
            }
            VKG_TRY(value(p, depth + 1, &child));
            t->n[child].key = key;
            t->n[child].klen = klen;
            if (prev < 0)
                t->n[self].first = child;
            else
                t->n[prev].next = child;
            prev = child;
            t->n[self].count++;
            VKG_TRY(vkg__json_next(&p->j, c == '[' ? ']' : '}', &more));
        }
    } else if (c == 't' || c == 'f') {
        VKG_TRY(word(p, c == 't' ? "true" : "false"));
        VKG_TRY(new_node(t, VKG_JT_BOOL, off, &self));
        t->n[self].b = c == 't';
    } else if (c == 'n') {
        VKG_TRY(word(p, "null"));
        VKG_TRY(new_node(t, VKG_JT_NULL, off, &self));
    } else {
        double v;
        VKG_TRY(vkg__json_number(&p->j, &v));
        VKG_TRY(new_node(t, VKG_JT_NUM, off, &self));
        t->n[self].num = v;
    }
    *out = self;
    return VKG_OK;
}

vkg_status vkg__jt_parse(vkg__jt *t, const char *text, size_t n, const char *name)
{
    parser p = {.t = t};
    long root;
    t->name = name;
    vkg__json_init(&p.j, text, n, name);
    vkg_status st = value(&p, 0, &root);
    if (st == VKG_OK)
        st = vkg__json_end(&p.j);
    free(p.buf);
    return st;
}

void vkg__jt_free(vkg__jt *t)
{
    free(t->n);
    free(t->arena);
    memset(t, 0, sizeof *t);
}

long vkg__jt_get(const vkg__jt *t, long obj, const char *key)
{
    if (obj < 0 || t->n[obj].type != VKG_JT_OBJ)
        return -1;
    size_t kl = strlen(key);
    for (long c = t->n[obj].first; c >= 0; c = t->n[c].next)
        if (t->n[c].klen == kl && !memcmp(t->arena + t->n[c].key, key, kl))
            return c;
    return -1;
}

const char *vkg__jt_str(const vkg__jt *t, long i, size_t *len)
{
    if (i < 0 || t->n[i].type != VKG_JT_STR)
        return NULL;
    if (len)
        *len = t->n[i].len;
    return t->arena + t->n[i].str;
}

const char *vkg__jt_key(const vkg__jt *t, long i, size_t *len)
{
    if (len)
        *len = t->n[i].klen;
    return t->arena + t->n[i].key;
}

int vkg__jt_present(const vkg__jt *t, long i)
{
    return i >= 0 && t->n[i].type != VKG_JT_NULL;
}
