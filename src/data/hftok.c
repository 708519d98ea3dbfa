/* Reading Hugging Face's tokenizer.json (and tokenizer_config.json) into a vkg__hftok (see
 * hftok.h). What is read: model (type "BPE": vocab, merges as "a b" strings or [a, b] pairs,
 * unk_token, fuse_unk, byte_fallback, ignore_merges), added_tokens, normalizer (NFC, Prepend,
 * Replace with a String pattern, Sequence), pre_tokenizer (Split, ByteLevel, Metaspace,
 * Sequence), post_processor (TemplateProcessing's single template, ByteLevel, Sequence),
 * decoder (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence), and from the
 * config bos_token, eos_token and chat_template. Anything else that changes ids or text is
 * refused by name; truncation and padding must be null (they reshape the output). Regexes are
 * compiled with PCRE2 (UTF, UCP). */
#include "data/hftok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "data/jsontree.h"
#include "data/unicode.h"
#include "os/file.h"

#define SPM "\xe2\x96\x81" /* U+2581, SentencePiece's space */

typedef struct reader {
    vkg__hftok *h;
    vkg__jt t;
    const char *name;
} reader;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t x = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        x = (x ^ (unsigned char)s[i]) * 1099511628211ull;
    return x ^ (x >> 29);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

/* Id of the vocabulary token the model spells s, or -1. */
static int32_t find_str(const vkg__hftok *h, const char *s, size_t n)
{
    for (size_t i = hash_bytes(s, n) & h->by_str_mask;; i = (i + 1) & h->by_str_mask) {
        int32_t id = h->by_str[i];
        if (id < 0)
            return -1;
        if (h->moff[id + 1] - h->moff[id] == n && !memcmp(h->mstr + h->moff[id], s, n))
            return id;
    }
}

/* The node's type string ("type" member), or "" when it has none. */
static const char *type_of(const reader *r, long node)
{
    const char *s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "type"), NULL);
    return s ? s : "";
}

/* Node i as an id: a whole number in [0, 2^24), else -1 (never a float-to-integer overflow). */
static long id_of(const vkg__jt *t, long i)
{
    if (i < 0 || t->n[i].type != VKG_JT_NUM)
        return -1;
    double v = t->n[i].num;
    if (!(v >= 0 && v < (double)(1 << 24)) || v != (double)(long)v)
        return -1;
    return (long)v;
}

static int flag(const reader *r, long obj, const char *key, int dflt)
{
    long i = vkg__jt_get(&r->t, obj, key);
    return i >= 0 && r->t.n[i].type == VKG_JT_BOOL ? r->t.n[i].b : dflt;
}

static vkg_status need_str(const reader *r, long obj, const char *key, const char *where,
                           const char **s, size_t *len)
{
    *s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, obj, key), len);
    VKG_CHECK(*s, VKG_ERR_FORMAT, "%s: %s.%s: expected a string", r->name, where, key);
    return VKG_OK;
}

static vkg_status dup(const char *s, size_t n, char **out)
{
    *out = malloc(n + 1);
    VKG_CHECK(*out, VKG_ERR_NOMEM, "out of memory");
    memcpy(*out, s, n);
    (*out)[n] = '\0';
    return VKG_OK;
}

/* ---- model ---------------------------------------------------------------------------------- */

static vkg_status read_vocab(reader *r, long vocab, int V)
{
    vkg__hftok *h = r->h;
    size_t total = 0;
    for (long c = r->t.n[vocab].first; c >= 0; c = r->t.n[c].next)
        total += r->t.n[c].klen;
    h->moff = calloc((size_t)V + 1, sizeof *h->moff);
    h->mstr = malloc(total + 1);
    size_t *len = calloc((size_t)V, sizeof *len);
    const char **src = calloc((size_t)V, sizeof *src);
    h->by_str_mask = pow2_at_least(2 * (size_t)V) - 1;
    h->by_str = malloc((h->by_str_mask + 1) * sizeof *h->by_str);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, h->moff && h->mstr && len && src && h->by_str, VKG_ERR_NOMEM, done,
                   "%s: out of memory", r->name);
    memset(h->by_str, 0xff, (h->by_str_mask + 1) * sizeof *h->by_str);
    for (long c = r->t.n[vocab].first; c >= 0; c = r->t.n[c].next) {
        size_t kl;
        const char *k = vkg__jt_key(&r->t, c, &kl);
        char shown[96];
        long id = id_of(&r->t, c);
        VKG_CHECK_GOTO(st, id >= 0 && id < V && !src[id],
                       VKG_ERR_FORMAT, done,
                       "%s: model.vocab: token \"%s\" has no id of its own in [0, %d)", r->name,
                       vkg__escape(shown, sizeof shown, k, kl), V);
        src[id] = k;
        len[id] = kl;
    }
    size_t pos = 0;
    for (int id = 0; id < V; id++) {
        h->moff[id] = pos;
        if (!src[id])
            continue;
        char shown[96];
        VKG_CHECK_GOTO(st, find_str(h, src[id], len[id]) < 0, VKG_ERR_FORMAT, done,
                       "%s: model.vocab: \"%s\" is there twice", r->name,
                       vkg__escape(shown, sizeof shown, src[id], len[id]));
        memcpy(h->mstr + pos, src[id], len[id]);
        pos += len[id];
        h->moff[id + 1] = pos;
        size_t i = hash_bytes(src[id], len[id]) & h->by_str_mask;
        while (h->by_str[i] >= 0)
            i = (i + 1) & h->by_str_mask;
        h->by_str[i] = id;
    }
    h->moff[V] = pos;
done:
    free(len);
    free(src);
    return st;
}

static vkg_status add_merge(reader *r, long at, const char *a, size_t al, const char *b, size_t bl,
                            int32_t rank)
{
    vkg__hftok *h = r->h;
    char *both = malloc(al + bl + 1), shown[96];
    VKG_CHECK(both, VKG_ERR_NOMEM, "out of memory");
    memcpy(both, a, al);
    memcpy(both + al, b, bl);
    int32_t L = find_str(h, a, al), R = find_str(h, b, bl), M = find_str(h, both, al + bl);
    vkg__escape(shown, sizeof shown, both, al + bl);
    free(both);
    VKG_CHECK(L >= 0 && R >= 0 && M >= 0, VKG_ERR_FORMAT,
              "%s: model.merges[%ld]: merge \"%s\" has a part or a result not in model.vocab",
              r->name, at, shown);
    uint64_t key = ((uint64_t)(uint32_t)L << 32) | (uint32_t)R;
    size_t i = (key * 0x9E3779B97F4A7C15ull >> 17) & h->merges_mask;
    while (h->merges[i].key != UINT64_MAX && h->merges[i].key != key)
        i = (i + 1) & h->merges_mask;
    if (h->merges[i].key == UINT64_MAX) /* a repeated pair keeps its first rank, as tokenizers */
        h->merges[i] = (vkg__hf_merge){key, rank, M};
    return VKG_OK;
}

static vkg_status read_merges(reader *r, long merges)
{
    vkg__hftok *h = r->h;
    VKG_CHECK(merges >= 0 && r->t.n[merges].type == VKG_JT_ARR, VKG_ERR_FORMAT,
              "%s: model.merges: expected an array", r->name);
    h->merges_mask = pow2_at_least(2 * (size_t)r->t.n[merges].count + 2) - 1;
    h->merges = malloc((h->merges_mask + 1) * sizeof *h->merges);
    VKG_CHECK(h->merges, VKG_ERR_NOMEM, "%s: out of memory", r->name);
    for (size_t i = 0; i <= h->merges_mask; i++)
        h->merges[i].key = UINT64_MAX;
    long at = 0;
    for (long c = r->t.n[merges].first; c >= 0; c = r->t.n[c].next, at++) {
        size_t n, al, bl;
        const char *s = vkg__jt_str(&r->t, c, &n), *a, *b;
        if (s) {
            const char *sp = memchr(s, ' ', n);
            VKG_CHECK(sp && !memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1), VKG_ERR_FORMAT,
                      "%s: model.merges[%ld]: expected two tokens separated by one space",
                      r->name, at);
            a = s, al = (size_t)(sp - s), b = sp + 1, bl = n - al - 1;
        } else {
            long p = r->t.n[c].type == VKG_JT_ARR && r->t.n[c].count == 2 ? r->t.n[c].first : -1;
            a = p >= 0 ? vkg__jt_str(&r->t, p, &al) : NULL;
            b = p >= 0 ? vkg__jt_str(&r->t, r->t.n[p].next, &bl) : NULL;
            VKG_CHECK(a && b, VKG_ERR_FORMAT,
                      "%s: model.merges[%ld]: expected \"a b\" or a pair [\"a\", \"b\"]",
                      r->name, at);
        }
        VKG_TRY(add_merge(r, at, a, al, b, bl, (int32_t)at));
    }
    return VKG_OK;
}

static vkg_status read_model(reader *r, long model, int V)
{
    vkg__hftok *h = r->h;
    const char *type = type_of(r, model);
    VKG_CHECK(model >= 0, VKG_ERR_FORMAT, "%s: no \"model\"", r->name);
    VKG_CHECK(!strcmp(type, "BPE") || (!*type && vkg__jt_get(&r->t, model, "merges") >= 0),
              VKG_ERR_UNSUPPORTED,
              "%s: model.type \"%s\" is not supported (vkgpt applies BPE models only)", r->name,
              type);
    static const char *const off[] = {"dropout", "continuing_subword_prefix",
                                      "end_of_word_suffix"};
    for (int i = 0; i < 3; i++) {
        long f = vkg__jt_get(&r->t, model, off[i]);
        size_t n = 0;
        VKG_CHECK(!vkg__jt_present(&r->t, f) || (vkg__jt_str(&r->t, f, &n) && n == 0),
                  VKG_ERR_UNSUPPORTED, "%s: model.%s is set; vkgpt supports it only null",
                  r->name, off[i]);
    }
    h->fuse_unk = flag(r, model, "fuse_unk", 0);
    h->byte_fallback = flag(r, model, "byte_fallback", 0);
    h->ignore_merges = flag(r, model, "ignore_merges", 0);
    long vocab = vkg__jt_get(&r->t, model, "vocab");
    VKG_CHECK(vocab >= 0 && r->t.n[vocab].type == VKG_JT_OBJ, VKG_ERR_FORMAT,
              "%s: model.vocab: expected an object of token: id", r->name);
    VKG_TRY(read_vocab(r, vocab, V));
    VKG_TRY(read_merges(r, vkg__jt_get(&r->t, model, "merges")));
    h->unk = -1;
    size_t ul;
    const char *unk = vkg__jt_str(&r->t, vkg__jt_get(&r->t, model, "unk_token"), &ul);
    if (unk) {
        h->unk = find_str(h, unk, ul);
        VKG_CHECK(h->unk >= 0, VKG_ERR_FORMAT, "%s: model.unk_token is not in model.vocab",
                  r->name);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        h->byte_tok[b] = find_str(h, name, 6);
    }
    return VKG_OK;
}

/* ---- added tokens, normalizer, pre-tokenizer ------------------------------------------------ */

static vkg_status read_added(reader *r, long arr)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, arr))
        return VKG_OK;
    VKG_CHECK(r->t.n[arr].type == VKG_JT_ARR, VKG_ERR_FORMAT,
              "%s: added_tokens: expected an array", r->name);
    h->added = calloc((size_t)r->t.n[arr].count + 1, sizeof *h->added);
    VKG_CHECK(h->added, VKG_ERR_NOMEM, "out of memory");
    for (long c = r->t.n[arr].first; c >= 0; c = r->t.n[c].next) {
        vkg__hf_added *a = &h->added[h->nadded];
        long id = vkg__jt_get(&r->t, c, "id");
        const char *s;
        size_t n;
        char where[40];
        snprintf(where, sizeof where, "added_tokens[%d]", h->nadded);
        VKG_TRY(need_str(r, c, "content", where, &s, &n));
        VKG_CHECK(id_of(&r->t, id) >= 0 && n > 0, VKG_ERR_FORMAT,
                  "%s: %s: expected a non-empty content and an id in [0, 2^24)", r->name, where);
        VKG_CHECK(!flag(r, c, "single_word", 0), VKG_ERR_UNSUPPORTED,
                  "%s: %s.single_word is true; vkgpt does not support it", r->name, where);
        a->id = (int32_t)id_of(&r->t, id);
        a->lstrip = flag(r, c, "lstrip", 0);
        a->rstrip = flag(r, c, "rstrip", 0);
        a->normalized = flag(r, c, "normalized", !flag(r, c, "special", 0));
        a->len = n;
        h->nadded++;
        VKG_TRY(dup(s, n, &a->content));
    }
    return VKG_OK;
}

static vkg_status read_normalizer(reader *r, long node, int depth)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    const char *type = type_of(r, node);
    if (!strcmp(type, "Sequence") && depth == 0) {
        long arr = vkg__jt_get(&r->t, node, "normalizers");
        VKG_CHECK(arr >= 0 && r->t.n[arr].type == VKG_JT_ARR, VKG_ERR_FORMAT,
                  "%s: normalizer.normalizers: expected an array", r->name);
        for (long c = r->t.n[arr].first; c >= 0; c = r->t.n[c].next)
            VKG_TRY(read_normalizer(r, c, 1));
        return VKG_OK;
    }
    VKG_CHECK(h->nnorm < VKG_HF_MAX_STEPS, VKG_ERR_UNSUPPORTED, "%s: more than %d normalizers",
              r->name, VKG_HF_MAX_STEPS);
    vkg__hf_norm *nm = &h->norm[h->nnorm];
    const char *s;
    size_t n;
    if (!strcmp(type, "NFC")) {
        nm->kind = VKG_HF_NFC;
    } else if (!strcmp(type, "Prepend")) {
        nm->kind = VKG_HF_PREPEND;
        VKG_TRY(need_str(r, node, "prepend", "normalizer", &s, &n));
        VKG_TRY(dup(s, n, &nm->a));
        nm->alen = n;
    } else if (!strcmp(type, "Replace")) {
        nm->kind = VKG_HF_REPLACE;
        long pat = vkg__jt_get(&r->t, node, "pattern");
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, pat, "String"), &n);
        VKG_CHECK(s && n > 0, VKG_ERR_UNSUPPORTED,
                  "%s: normalizer Replace: only a non-empty String pattern is supported",
                  r->name);
        VKG_TRY(dup(s, n, &nm->a));
        nm->alen = n;
        VKG_TRY(need_str(r, node, "content", "normalizer", &s, &n));
        VKG_TRY(dup(s, n, &nm->b));
        nm->blen = n;
    } else {
        return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                        "%s: normalizer \"%s\" is not supported (vkgpt applies NFC, Prepend, "
                        "Replace and Sequence)",
                        r->name, type);
    }
    h->nnorm++;
    return VKG_OK;
}

/* GPT-2's pattern, which ByteLevel's use_regex applies. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Unicode White_Space, what \s means to Oniguruma (tokenizers' regex engine) and to Rust. PCRE2's
 * \s with UCP also takes U+180E (through \h), so patterns are given this set instead. */
#define WHITE_SPACE "\\t\\n\\x{0b}\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

/* pat with \s and \S spelled as WHITE_SPACE classes (inside a class: its members), into out
 * (room for 64 n + 1 bytes); VKG_ERR_UNSUPPORTED for \S inside a class. */
static vkg_status onig_spaces(reader *r, const char *pat, size_t n, char *out, size_t *len)
{
    size_t k = 0;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char e = pat[++i];
            if (e == 's' || e == 'S') {
                VKG_CHECK(!(in_class && e == 'S'), VKG_ERR_UNSUPPORTED,
                          "%s: pre_tokenizer pattern: \\S inside a class is not supported",
                          r->name);
                const char *cls = in_class ? WHITE_SPACE : e == 's' ? "[" WHITE_SPACE "]"
                                                                    : "[^" WHITE_SPACE "]";
                memcpy(out + k, cls, strlen(cls));
                k += strlen(cls);
            } else {
                out[k++] = c;
                out[k++] = e;
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            out[k++] = c;
            if (i + 1 < n && pat[i + 1] == '^')
                out[k++] = pat[++i];
            if (i + 1 < n && pat[i + 1] == ']') /* a leading ] is a member */
                out[k++] = pat[++i];
            continue;
        }
        if (c == ']' && in_class)
            in_class = 0;
        out[k++] = c;
    }
    out[k] = '\0';
    *len = k;
    return VKG_OK;
}

static vkg_status compile(reader *r, const char *pat, size_t n, int literal, void **out)
{
    int err;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0);
    char *onig = malloc(64 * n + 1);
    size_t on = n;
    VKG_CHECK(onig, VKG_ERR_NOMEM, "out of memory");
    vkg_status st = literal ? VKG_OK : onig_spaces(r, pat, n, onig, &on);
    if (st != VKG_OK) {
        free(onig);
        return st;
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(literal ? pat : onig), on, opts, &err, &at, NULL);
    free(onig);
    if (!re) {
        PCRE2_UCHAR msg[160];
        char shown[96];
        pcre2_get_error_message(err, msg, sizeof msg);
        return VKG_FAIL(VKG_ERR_FORMAT, "%s: pre_tokenizer pattern \"%s\": %s at offset %zu",
                        r->name, vkg__escape(shown, sizeof shown, pat, n), (const char *)msg,
                        (size_t)at);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* a failure leaves the interpreter, same results */
    *out = re;
    return VKG_OK;
}

static vkg_status read_step(reader *r, long node, vkg__hf_step *s)
{
    const char *type = type_of(r, node), *str;
    size_t n;
    if (!strcmp(type, "Split")) {
        s->kind = VKG_HF_SPLIT;
        const char *beh = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "behavior"), NULL);
        long pat = vkg__jt_get(&r->t, node, "pattern");
        VKG_CHECK(beh && (!strcmp(beh, "Isolated") || !strcmp(beh, "Removed")),
                  VKG_ERR_UNSUPPORTED,
                  "%s: pre_tokenizer Split: behavior \"%s\" is not supported (Isolated, Removed)",
                  r->name, beh ? beh : "");
        VKG_CHECK(!flag(r, node, "invert", 0), VKG_ERR_UNSUPPORTED,
                  "%s: pre_tokenizer Split: invert is not supported", r->name);
        s->removed = !strcmp(beh, "Removed");
        if ((str = vkg__jt_str(&r->t, vkg__jt_get(&r->t, pat, "Regex"), &n)))
            return compile(r, str, n, 0, &s->re);
        str = vkg__jt_str(&r->t, vkg__jt_get(&r->t, pat, "String"), &n);
        VKG_CHECK(str && n > 0, VKG_ERR_FORMAT,
                  "%s: pre_tokenizer Split: pattern: expected {\"Regex\": ...} or {\"String\": ...}",
                  r->name);
        return compile(r, str, n, 1, &s->re);
    }
    if (!strcmp(type, "ByteLevel")) {
        s->kind = VKG_HF_BYTELEVEL;
        s->prefix_space = flag(r, node, "add_prefix_space", 1);
        r->h->byte_level = 1;
        if (flag(r, node, "use_regex", 1))
            return compile(r, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, &s->re);
        return VKG_OK;
    }
    if (!strcmp(type, "Metaspace")) {
        s->kind = VKG_HF_METASPACE;
        VKG_TRY(need_str(r, node, "replacement", "pre_tokenizer", &str, &n));
        VKG_CHECK(n > 0 && n < sizeof s->repl, VKG_ERR_FORMAT,
                  "%s: pre_tokenizer Metaspace: replacement must be one character", r->name);
        memcpy(s->repl, str, n);
        const char *scheme = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "prepend_scheme"), NULL);
        if (scheme)
            s->prepend = !strcmp(scheme, "never") ? 0 : !strcmp(scheme, "first") ? 1 : 2;
        else
            s->prepend = flag(r, node, "add_prefix_space", 1) ? 2 : 0;
        s->split = flag(r, node, "split", 1);
        return VKG_OK;
    }
    return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                    "%s: pre_tokenizer \"%s\" is not supported (vkgpt applies Split, ByteLevel, "
                    "Metaspace and Sequence)",
                    r->name, type);
}

static vkg_status read_pretok(reader *r, long node)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    long list = node, c = node;
    if (!strcmp(type_of(r, node), "Sequence")) {
        list = vkg__jt_get(&r->t, node, "pretokenizers");
        VKG_CHECK(list >= 0 && r->t.n[list].type == VKG_JT_ARR, VKG_ERR_FORMAT,
                  "%s: pre_tokenizer.pretokenizers: expected an array", r->name);
        c = r->t.n[list].first;
    }
    for (; c >= 0; c = list == node ? -1 : r->t.n[c].next) {
        VKG_CHECK(h->nstep < VKG_HF_MAX_STEPS, VKG_ERR_UNSUPPORTED,
                  "%s: more than %d pre-tokenizers", r->name, VKG_HF_MAX_STEPS);
        VKG_TRY(read_step(r, c, &h->step[h->nstep++]));
    }
    return VKG_OK;
}

/* ---- post-processor, decoder, config -------------------------------------------------------- */

static vkg_status read_template(reader *r, long node)
{
    vkg__hftok *h = r->h;
    long single = vkg__jt_get(&r->t, node, "single");
    VKG_CHECK(single >= 0 && r->t.n[single].type == VKG_JT_ARR, VKG_ERR_FORMAT,
              "%s: post_processor.single: expected an array", r->name);
    int seen_a = 0;
    for (long c = r->t.n[single].first; c >= 0; c = r->t.n[c].next) {
        long sp = vkg__jt_get(&r->t, c, "SpecialToken");
        if (vkg__jt_get(&r->t, c, "Sequence") >= 0) {
            VKG_CHECK(!seen_a, VKG_ERR_UNSUPPORTED,
                      "%s: post_processor.single has two sequences", r->name);
            seen_a = 1;
            continue;
        }
        const char *name;
        size_t n;
        VKG_TRY(need_str(r, sp, "id", "post_processor.single[].SpecialToken", &name, &n));
        long ids = vkg__jt_get(&r->t, vkg__jt_get(&r->t, vkg__jt_get(&r->t, node,
                                                                     "special_tokens"),
                                                  name),
                               "ids");
        VKG_CHECK(ids >= 0 && r->t.n[ids].type == VKG_JT_ARR && r->t.n[ids].count == 1 &&
                      id_of(&r->t, r->t.n[ids].first) >= 0,
                  VKG_ERR_FORMAT,
                  "%s: post_processor.special_tokens.%s.ids: expected one id", r->name, name);
        int32_t id = (int32_t)id_of(&r->t, r->t.n[ids].first);
        int32_t *to = seen_a ? h->suffix : h->prefix;
        int *cnt = seen_a ? &h->nsuffix : &h->nprefix;
        VKG_CHECK(*cnt < 4, VKG_ERR_UNSUPPORTED, "%s: post_processor: too many special tokens",
                  r->name);
        to[(*cnt)++] = id;
    }
    return VKG_OK;
}

static vkg_status read_post(reader *r, long node, int depth)
{
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    const char *type = type_of(r, node);
    if (!strcmp(type, "Sequence") && depth == 0) {
        long arr = vkg__jt_get(&r->t, node, "processors");
        VKG_CHECK(arr >= 0, VKG_ERR_FORMAT, "%s: post_processor.processors: missing", r->name);
        for (long c = r->t.n[arr].first; c >= 0; c = r->t.n[c].next)
            VKG_TRY(read_post(r, c, 1));
        return VKG_OK;
    }
    if (!strcmp(type, "ByteLevel"))
        return VKG_OK; /* trims offsets only */
    if (!strcmp(type, "TemplateProcessing"))
        return read_template(r, node);
    return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                    "%s: post_processor \"%s\" is not supported (TemplateProcessing, ByteLevel, "
                    "Sequence)",
                    r->name, type);
}

/* Decoder kinds folded into what a token decodes to. */
enum { DEC_RAW, DEC_BYTELEVEL, DEC_SPACE };

static vkg_status read_decoder(reader *r, long node, int depth, int *kind, int *fallback)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    const char *type = type_of(r, node), *s, *c;
    size_t n, cn;
    if (!strcmp(type, "Sequence") && depth == 0) {
        long arr = vkg__jt_get(&r->t, node, "decoders");
        VKG_CHECK(arr >= 0, VKG_ERR_FORMAT, "%s: decoder.decoders: missing", r->name);
        for (long i = r->t.n[arr].first; i >= 0; i = r->t.n[i].next)
            VKG_TRY(read_decoder(r, i, 1, kind, fallback));
        return VKG_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        *kind = DEC_BYTELEVEL;
    } else if (!strcmp(type, "ByteFallback")) {
        *fallback = 1;
    } else if (!strcmp(type, "Fuse")) {
        /* joins the pieces: decoding concatenates anyway */
    } else if (!strcmp(type, "Replace")) {
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, vkg__jt_get(&r->t, node, "pattern"), "String"),
                        &n);
        c = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "content"), &cn);
        VKG_CHECK(s && c && !strcmp(s, SPM) && !strcmp(c, " "), VKG_ERR_UNSUPPORTED,
                  "%s: decoder Replace: only \"" SPM "\" -> \" \" is supported", r->name);
        *kind = DEC_SPACE;
    } else if (!strcmp(type, "Strip")) {
        long st = vkg__jt_get(&r->t, node, "start"), sp = vkg__jt_get(&r->t, node, "stop");
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "content"), &n);
        VKG_CHECK(s && !strcmp(s, " ") && id_of(&r->t, st) >= 0 && id_of(&r->t, st) <= 1 &&
                      id_of(&r->t, sp) == 0,
                  VKG_ERR_UNSUPPORTED,
                  "%s: decoder Strip: only content \" \", start 0 or 1, stop 0 is supported",
                  r->name);
        h->strip_start = (int)id_of(&r->t, st);
    } else if (!strcmp(type, "Metaspace")) {
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "replacement"), &n);
        VKG_CHECK(s && !strcmp(s, SPM), VKG_ERR_UNSUPPORTED,
                  "%s: decoder Metaspace: only the replacement \"" SPM "\" is supported", r->name);
        const char *scheme = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "prepend_scheme"), NULL);
        h->strip_start = scheme ? strcmp(scheme, "never") != 0
                                : flag(r, node, "add_prefix_space", 1);
        *kind = DEC_SPACE;
    } else {
        return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                        "%s: decoder \"%s\" is not supported (ByteLevel, Replace, ByteFallback, "
                        "Fuse, Strip, Metaspace, Sequence)",
                        r->name, type);
    }
    return VKG_OK;
}

/* The decode table: each token's text as the decoder renders it on its own. */
static vkg_status decode_table(vkg__hftok *h, int V, int kind, int fallback)
{
    int16_t cp_byte[512];
    memset(cp_byte, 0xff, sizeof cp_byte);
    for (int i = 0; i < 256; i++)
        cp_byte[h->byte_cp[i]] = (int16_t)i;
    const char **src = calloc((size_t)V, sizeof *src);
    size_t *len = calloc((size_t)V, sizeof *len), total = 0;
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, src && len, VKG_ERR_NOMEM, done, "out of memory");
    for (int id = 0; id < V; id++) {
        src[id] = h->mstr + h->moff[id];
        len[id] = h->moff[id + 1] - h->moff[id];
    }
    for (int i = 0; i < h->nadded; i++) {
        src[h->added[i].id] = h->added[i].content;
        len[h->added[i].id] = h->added[i].len;
    }
    for (int id = 0; id < V; id++)
        total += len[id];
    h->vocab.vocab_size = V;
    h->vocab.offsets = malloc(((size_t)V + 1) * sizeof *h->vocab.offsets);
    h->vocab.bytes = malloc(total + 1);
    VKG_CHECK_GOTO(st, h->vocab.offsets && h->vocab.bytes, VKG_ERR_NOMEM, done, "out of memory");
    size_t pos = 0;
    for (int id = 0; id < V; id++) {
        const unsigned char *s = (const unsigned char *)src[id];
        size_t n = len[id], k = 0;
        char *o = h->vocab.bytes + pos;
        unsigned b;
        int32_t cp;
        h->vocab.offsets[id] = pos;
        if (kind == DEC_BYTELEVEL) {
            int all = 1; /* every character in the byte alphabet, or the token as it is */
            for (size_t i = 0; i < n && all;) {
                i += vkg__utf8_decode(s + i, n - i, &cp);
                if (cp < 0 || cp >= 512 || cp_byte[cp] < 0)
                    all = 0;
                else
                    o[k++] = (char)cp_byte[cp];
            }
            if (!all)
                memcpy(o, s, n), k = n;
        } else if (kind == DEC_SPACE && fallback && n == 6 &&
                   sscanf((const char *)s, "<0x%2X>", &b) == 1 && s[5] == '>') {
            o[k++] = (char)b;
        } else if (kind == DEC_SPACE) {
            for (size_t i = 0; i < n; i++) {
                if (i + 3 <= n && !memcmp(s + i, SPM, 3))
                    o[k++] = ' ', i += 2;
                else
                    o[k++] = (char)s[i];
            }
        } else {
            memcpy(o, s, n), k = n;
        }
        pos += k;
    }
    h->vocab.offsets[V] = pos;
done:
    free(src);
    free(len);
    return st;
}

/* The id of a special token named in tokenizer_config.json (a string or {"content": ...}). */
static int32_t config_token(const reader *r, const vkg__jt *cfg, const char *key)
{
    long node = vkg__jt_get(cfg, 0, key);
    const char *s = vkg__jt_str(cfg, node, NULL);
    if (!s)
        s = vkg__jt_str(cfg, vkg__jt_get(cfg, node, "content"), NULL);
    if (!s)
        return -2;
    for (int i = 0; i < r->h->nadded; i++)
        if (!strcmp(r->h->added[i].content, s))
            return r->h->added[i].id;
    return find_str(r->h, s, strlen(s));
}

static vkg_status read_config(reader *r, const char *name, const char *cfg, size_t n)
{
    vkg__hftok *h = r->h;
    vkg__jt t = {0};
    vkg_status st = VKG_OK;
    int32_t eos = -2;
    if (cfg) {
        VKG_TRY_GOTO(st, vkg__jt_parse(&t, cfg, n, name), done);
        VKG_CHECK_GOTO(st, t.n[0].type == VKG_JT_OBJ, VKG_ERR_FORMAT, done,
                       "%s: expected an object", name);
        eos = config_token(r, &t, "eos_token");
        VKG_CHECK_GOTO(st, eos != -1, VKG_ERR_FORMAT, done,
                       "%s: eos_token is not a token of %s", name, r->name);
        int32_t bos = config_token(r, &t, "bos_token");
        VKG_CHECK_GOTO(st, bos != -1, VKG_ERR_FORMAT, done,
                       "%s: bos_token is not a token of %s", name, r->name);
        long ct = vkg__jt_get(&t, 0, "chat_template");
        size_t cl;
        const char *s = vkg__jt_str(&t, ct, &cl);
        if (!s && ct >= 0 && t.n[ct].type == VKG_JT_ARR) /* [{name, template}]: the first */
            s = vkg__jt_str(&t, vkg__jt_get(&t, t.n[ct].first, "template"), &cl);
        if (s)
            VKG_TRY_GOTO(st, dup(s, cl, &h->chat_template), done);
    }
    /* Without a config: the end-of-text tokens of the families, as added tokens. */
    static const char *const names[] = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (int k = 0; k < 3 && eos < 0; k++)
        for (int i = 0; i < h->nadded && eos < 0; i++)
            if (!strcmp(h->added[i].content, names[k]))
                eos = h->added[i].id;
    h->vocab.eot_token = eos >= 0 ? eos : -1;
done:
    vkg__jt_free(&t);
    return st;
}

vkg_status vkg__hftok_parse(const char *name, const char *json, size_t n, const char *cfg_name,
                            const char *cfg, size_t ncfg, vkg__hftok **out)
{
    reader r = {.name = name};
    vkg_status st;
    int kind = DEC_RAW, fallback = 0;
    *out = NULL;
    r.h = calloc(1, sizeof *r.h);
    VKG_CHECK(r.h, VKG_ERR_NOMEM, "out of memory");
    vkg__gpt2_byte_to_cp(r.h->byte_cp);
    r.h->bos = -1;
    VKG_TRY_GOTO(st, vkg__jt_parse(&r.t, json, n, name), fail);
    VKG_CHECK_GOTO(st, r.t.n[0].type == VKG_JT_OBJ, VKG_ERR_FORMAT, fail,
                   "%s: expected an object", name);
    static const char *const shaping[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++)
        VKG_CHECK_GOTO(st, !vkg__jt_present(&r.t, vkg__jt_get(&r.t, 0, shaping[i])),
                       VKG_ERR_UNSUPPORTED, fail,
                       "%s: %s is set; vkgpt reads tokenizers with it null", name, shaping[i]);
    long model = vkg__jt_get(&r.t, 0, "model"), vocab = vkg__jt_get(&r.t, model, "vocab");
    VKG_TRY_GOTO(st, read_added(&r, vkg__jt_get(&r.t, 0, "added_tokens")), fail);
    long V = 0;
    for (long c = vocab >= 0 ? r.t.n[vocab].first : -1; c >= 0; c = r.t.n[c].next)
        if (id_of(&r.t, c) + 1 > V)
            V = id_of(&r.t, c) + 1;
    for (int i = 0; i < r.h->nadded; i++)
        V = r.h->added[i].id + 1 > V ? r.h->added[i].id + 1 : V;
    VKG_TRY_GOTO(st, read_model(&r, model, (int)V), fail);
    VKG_TRY_GOTO(st, read_normalizer(&r, vkg__jt_get(&r.t, 0, "normalizer"), 0), fail);
    VKG_TRY_GOTO(st, read_pretok(&r, vkg__jt_get(&r.t, 0, "pre_tokenizer")), fail);
    VKG_TRY_GOTO(st, read_post(&r, vkg__jt_get(&r.t, 0, "post_processor"), 0), fail);
    VKG_TRY_GOTO(st, read_decoder(&r, vkg__jt_get(&r.t, 0, "decoder"), 0, &kind, &fallback), fail);
    for (int i = 0; i < r.h->nprefix + r.h->nsuffix; i++) {
        int32_t id = i < r.h->nprefix ? r.h->prefix[i] : r.h->suffix[i - r.h->nprefix];
        VKG_CHECK_GOTO(st, id >= 0 && id < V, VKG_ERR_FORMAT, fail,
                       "%s: post_processor: special token id %ld is outside [0, %ld)", name,
                       (long)id, V);
    }
    r.h->bos = r.h->nprefix > 0 ? r.h->prefix[0] : -1;
    VKG_TRY_GOTO(st, decode_table(r.h, (int)V, kind, fallback), fail);
    VKG_TRY_GOTO(st, read_config(&r, cfg_name, cfg, ncfg), fail);
    vkg__jt_free(&r.t);
    *out = r.h;
    return VKG_OK;
fail:
    vkg__jt_free(&r.t);
    vkg__hftok_free(r.h);
    return st;
}

vkg_status vkg__hftok_load(const char *path, vkg__hftok **out)
{
    char json_path[4096], cfg_path[4096];
    char *json = NULL, *cfg = NULL;
    size_t n = 0, ncfg = 0;
    vkg_status st;
    *out = NULL;
    if (vkg_os_is_dir(path) == 1) {
        snprintf(json_path, sizeof json_path, "%s/tokenizer.json", path);
        snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", path);
    } else {
        const char *slash = strrchr(path, '/');
        snprintf(json_path, sizeof json_path, "%s", path);
        snprintf(cfg_path, sizeof cfg_path, "%.*stokenizer_config.json",
                 slash ? (int)(slash - path + 1) : 0, path);
    }
    VKG_TRY_GOTO(st, vkg_text_read(json_path, NULL, &json, &n), done);
    if (vkg_os_exists(cfg_path) == 1)
        VKG_TRY_GOTO(st, vkg_text_read(cfg_path, NULL, &cfg, &ncfg), done);
    st = vkg__hftok_parse(json_path, json, n, cfg_path, cfg, ncfg, out);
done:
    free(json);
    free(cfg);
    return st;
}

void vkg__hftok_free(vkg__hftok *h)
{
    if (!h)
        return;
    vkg_tokfile_deinit(&h->vocab);
    free(h->mstr);
    free(h->moff);
    free(h->by_str);
    free(h->merges);
    for (int i = 0; i < h->nnorm; i++) {
        free(h->norm[i].a);
        free(h->norm[i].b);
    }
    for (int i = 0; i < h->nstep; i++)
        pcre2_code_free(h->step[i].re);
    for (int i = 0; i < h->nadded; i++)
        free(h->added[i].content);
    free(h->added);
    free(h->chat_template);
    free(h);
}

const vkg_tokfile *vkg__hftok_vocab(const vkg__hftok *h)
{
    return &h->vocab;
}

int vkg__hftok_bos(const vkg__hftok *h)
{
    return h->bos;
}

int vkg__hftok_strip_start(const vkg__hftok *h)
{
    return h->strip_start;
}

const char *vkg__hftok_chat_template(const vkg__hftok *h)
{
    return h->chat_template;
}
