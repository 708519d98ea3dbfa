/* The pipeline parts of tokenizer.json (see hftok_read.h): normalizers, pre-tokenizers (Split
 * and ByteLevel patterns compiled by PCRE2 with UTF and UCP, JIT when it can; \\s and \\S given
 * as Unicode White_Space, Oniguruma's meaning), the post-processor's single template, the
 * decoder, and the decode table it implies. What vkgpt does not apply exactly is refused by
 * name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"
#include "base/escape.h"
#include "data/hftok_read.h"
#include "data/unicode.h"

vkg_status vkg__hf_read_normalizer(vkg__hf_reader *r, long node, int depth)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    const char *type = vkg__hf_type_of(r, node);
    if (!strcmp(type, "Sequence") && depth == 0) {
        long arr = vkg__jt_get(&r->t, node, "normalizers");
        VKG_CHECK(arr >= 0 && r->t.n[arr].type == VKG_JT_ARR, VKG_ERR_FORMAT,
                  "%s: normalizer.normalizers: expected an array", r->name);
        for (long c = r->t.n[arr].first; c >= 0; c = r->t.n[c].next)
            VKG_TRY(vkg__hf_read_normalizer(r, c, 1));
        return VKG_OK;
    }
    VKG_CHECK(h->nnorm < VKG_HF_MAX_STEPS, VKG_ERR_UNSUPPORTED, "%s: more than %d normalizers",
              r->name, VKG_HF_MAX_STEPS);
    vkg__hf_norm *nm = &h->norm[h->nnorm++]; /* counted now: freed with h on any error */
    const char *s;
    size_t n;
    if (!strcmp(type, "NFC")) {
        nm->kind = VKG_HF_NFC;
    } else if (!strcmp(type, "Prepend")) {
        nm->kind = VKG_HF_PREPEND;
        VKG_TRY(vkg__hf_need_str(r, node, "prepend", "normalizer", &s, &n));
        VKG_TRY(vkg__hf_dup(s, n, &nm->a));
        nm->alen = n;
    } else if (!strcmp(type, "Replace")) {
        nm->kind = VKG_HF_REPLACE;
        long pat = vkg__jt_get(&r->t, node, "pattern");
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, pat, "String"), &n);
        VKG_CHECK(s && n > 0, VKG_ERR_UNSUPPORTED,
                  "%s: normalizer Replace: only a non-empty String pattern is supported", r->name);
        VKG_TRY(vkg__hf_dup(s, n, &nm->a));
        nm->alen = n;
        VKG_TRY(vkg__hf_need_str(r, node, "content", "normalizer", &s, &n));
        VKG_TRY(vkg__hf_dup(s, n, &nm->b));
        nm->blen = n;
    } else {
        return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                        "%s: normalizer \"%s\" is not supported (vkgpt applies NFC, Prepend, "
                        "Replace and Sequence)",
                        r->name, type);
    }
    return VKG_OK;
}

/* GPT-2's pattern, which ByteLevel's use_regex applies. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Unicode White_Space, what \s means to Oniguruma (tokenizers' regex engine) and to Rust. PCRE2's
 * \s with UCP also takes U+180E (through \h), so patterns are given this set instead. */
#define WHITE_SPACE                                                                                \
    "\\t\\n\\x{0b}\\f\\r "                                                                         \
    "\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

/* pat with \s and \S spelled as WHITE_SPACE classes (inside a class: its members), into out
 * (room for 64 n + 1 bytes); VKG_ERR_UNSUPPORTED for \S inside a class. */
static vkg_status onig_spaces(vkg__hf_reader *r, const char *pat, size_t n, char *out, size_t *len)
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
                const char *cls = in_class   ? WHITE_SPACE
                                  : e == 's' ? "[" WHITE_SPACE "]"
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

static vkg_status compile(vkg__hf_reader *r, const char *pat, size_t n, int literal, void **out)
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

static vkg_status read_step(vkg__hf_reader *r, long node, vkg__hf_step *s)
{
    const char *type = vkg__hf_type_of(r, node), *str;
    size_t n;
    if (!strcmp(type, "Split")) {
        s->kind = VKG_HF_SPLIT;
        const char *beh = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "behavior"), NULL);
        long pat = vkg__jt_get(&r->t, node, "pattern");
        VKG_CHECK(beh && (!strcmp(beh, "Isolated") || !strcmp(beh, "Removed")), VKG_ERR_UNSUPPORTED,
                  "%s: pre_tokenizer Split: behavior \"%s\" is not supported (Isolated, Removed)",
                  r->name, beh ? beh : "");
        VKG_CHECK(!vkg__hf_flag(r, node, "invert", 0), VKG_ERR_UNSUPPORTED,
                  "%s: pre_tokenizer Split: invert is not supported", r->name);
        s->removed = !strcmp(beh, "Removed");
        if ((str = vkg__jt_str(&r->t, vkg__jt_get(&r->t, pat, "Regex"), &n)))
            return compile(r, str, n, 0, &s->re);
        str = vkg__jt_str(&r->t, vkg__jt_get(&r->t, pat, "String"), &n);
        VKG_CHECK(
            str && n > 0, VKG_ERR_FORMAT,
            "%s: pre_tokenizer Split: pattern: expected {\"Regex\": ...} or {\"String\": ...}",
            r->name);
        return compile(r, str, n, 1, &s->re);
    }
    if (!strcmp(type, "ByteLevel")) {
        s->kind = VKG_HF_BYTELEVEL;
        s->prefix_space = vkg__hf_flag(r, node, "add_prefix_space", 1);
        r->h->byte_level = 1;
        if (vkg__hf_flag(r, node, "use_regex", 1))
            return compile(r, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, &s->re);
        return VKG_OK;
    }
    if (!strcmp(type, "Metaspace")) {
        s->kind = VKG_HF_METASPACE;
        VKG_TRY(vkg__hf_need_str(r, node, "replacement", "pre_tokenizer", &str, &n));
        VKG_CHECK(n > 0 && n < sizeof s->repl, VKG_ERR_FORMAT,
                  "%s: pre_tokenizer Metaspace: replacement must be one character", r->name);
        memcpy(s->repl, str, n);
        const char *scheme = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "prepend_scheme"), NULL);
        if (scheme)
            s->prepend = !strcmp(scheme, "never") ? 0 : !strcmp(scheme, "first") ? 1 : 2;
        else
            s->prepend = vkg__hf_flag(r, node, "add_prefix_space", 1) ? 2 : 0;
        s->split = vkg__hf_flag(r, node, "split", 1);
        return VKG_OK;
    }
    return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                    "%s: pre_tokenizer \"%s\" is not supported (vkgpt applies Split, ByteLevel, "
                    "Metaspace and Sequence)",
                    r->name, type);
}

vkg_status vkg__hf_read_pretok(vkg__hf_reader *r, long node)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    long list = node, c = node;
    if (!strcmp(vkg__hf_type_of(r, node), "Sequence")) {
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

static vkg_status read_template(vkg__hf_reader *r, long node)
{
    vkg__hftok *h = r->h;
    long single = vkg__jt_get(&r->t, node, "single");
    VKG_CHECK(single >= 0 && r->t.n[single].type == VKG_JT_ARR, VKG_ERR_FORMAT,
              "%s: post_processor.single: expected an array", r->name);
    int seen_a = 0;
    for (long c = r->t.n[single].first; c >= 0; c = r->t.n[c].next) {
        long sp = vkg__jt_get(&r->t, c, "SpecialToken");
        if (vkg__jt_get(&r->t, c, "Sequence") >= 0) {
            VKG_CHECK(!seen_a, VKG_ERR_UNSUPPORTED, "%s: post_processor.single has two sequences",
                      r->name);
            seen_a = 1;
            continue;
        }
        const char *name;
        size_t n;
        VKG_TRY(vkg__hf_need_str(r, sp, "id", "post_processor.single[].SpecialToken", &name, &n));
        long ids = vkg__jt_get(
            &r->t, vkg__jt_get(&r->t, vkg__jt_get(&r->t, node, "special_tokens"), name), "ids");
        VKG_CHECK(ids >= 0 && r->t.n[ids].type == VKG_JT_ARR && r->t.n[ids].count == 1 &&
                      vkg__hf_id_of(&r->t, r->t.n[ids].first) >= 0,
                  VKG_ERR_FORMAT, "%s: post_processor.special_tokens.%s.ids: expected one id",
                  r->name, name);
        int32_t id = (int32_t)vkg__hf_id_of(&r->t, r->t.n[ids].first);
        int32_t *to = seen_a ? h->suffix : h->prefix;
        int *cnt = seen_a ? &h->nsuffix : &h->nprefix;
        VKG_CHECK(*cnt < 4, VKG_ERR_UNSUPPORTED, "%s: post_processor: too many special tokens",
                  r->name);
        to[(*cnt)++] = id;
    }
    return VKG_OK;
}

vkg_status vkg__hf_read_post(vkg__hf_reader *r, long node, int depth)
{
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    const char *type = vkg__hf_type_of(r, node);
    if (!strcmp(type, "Sequence") && depth == 0) {
        long arr = vkg__jt_get(&r->t, node, "processors");
        VKG_CHECK(arr >= 0, VKG_ERR_FORMAT, "%s: post_processor.processors: missing", r->name);
        for (long c = r->t.n[arr].first; c >= 0; c = r->t.n[c].next)
            VKG_TRY(vkg__hf_read_post(r, c, 1));
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

vkg_status vkg__hf_read_decoder(vkg__hf_reader *r, long node, int depth, int *kind, int *fallback)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, node))
        return VKG_OK;
    const char *type = vkg__hf_type_of(r, node), *s, *c;
    size_t n, cn;
    if (!strcmp(type, "Sequence") && depth == 0) {
        long arr = vkg__jt_get(&r->t, node, "decoders");
        VKG_CHECK(arr >= 0, VKG_ERR_FORMAT, "%s: decoder.decoders: missing", r->name);
        for (long i = r->t.n[arr].first; i >= 0; i = r->t.n[i].next)
            VKG_TRY(vkg__hf_read_decoder(r, i, 1, kind, fallback));
        return VKG_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        *kind = VKG_HF_DEC_BYTELEVEL;
    } else if (!strcmp(type, "ByteFallback")) {
        *fallback = 1;
    } else if (!strcmp(type, "Fuse")) {
        /* joins the pieces: decoding concatenates anyway */
    } else if (!strcmp(type, "Replace")) {
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, vkg__jt_get(&r->t, node, "pattern"), "String"),
                        &n);
        c = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "content"), &cn);
        VKG_CHECK(s && c && !strcmp(s, VKG_HF_SPM) && !strcmp(c, " "), VKG_ERR_UNSUPPORTED,
                  "%s: decoder Replace: only \"" VKG_HF_SPM "\" -> \" \" is supported", r->name);
        *kind = VKG_HF_DEC_SPACE;
    } else if (!strcmp(type, "Strip")) {
        long st = vkg__jt_get(&r->t, node, "start"), sp = vkg__jt_get(&r->t, node, "stop");
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "content"), &n);
        VKG_CHECK(s && !strcmp(s, " ") && vkg__hf_id_of(&r->t, st) >= 0 &&
                      vkg__hf_id_of(&r->t, st) <= 1 && vkg__hf_id_of(&r->t, sp) == 0,
                  VKG_ERR_UNSUPPORTED,
                  "%s: decoder Strip: only content \" \", start 0 or 1, stop 0 is supported",
                  r->name);
        h->strip_start = (int)vkg__hf_id_of(&r->t, st);
    } else if (!strcmp(type, "Metaspace")) {
        s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "replacement"), &n);
        VKG_CHECK(s && !strcmp(s, VKG_HF_SPM), VKG_ERR_UNSUPPORTED,
                  "%s: decoder Metaspace: only the replacement \"" VKG_HF_SPM "\" is supported",
                  r->name);
        const char *scheme = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "prepend_scheme"), NULL);
        h->strip_start =
            scheme ? strcmp(scheme, "never") != 0 : vkg__hf_flag(r, node, "add_prefix_space", 1);
        *kind = VKG_HF_DEC_SPACE;
    } else {
        return VKG_FAIL(VKG_ERR_UNSUPPORTED,
                        "%s: decoder \"%s\" is not supported (ByteLevel, Replace, ByteFallback, "
                        "Fuse, Strip, Metaspace, Sequence)",
                        r->name, type);
    }
    return VKG_OK;
}

/* The decode table: each token's text as the decoder renders it on its own. */
vkg_status vkg__hf_decode_table(vkg__hftok *h, int V, int kind, int fallback)
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
        if (kind == VKG_HF_DEC_BYTELEVEL) {
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
        } else if (kind == VKG_HF_DEC_SPACE && fallback && n == 6 &&
                   sscanf((const char *)s, "<0x%2X>", &b) == 1 && s[5] == '>') {
            o[k++] = (char)b;
        } else if (kind == VKG_HF_DEC_SPACE) {
            for (size_t i = 0; i < n; i++) {
                if (i + 3 <= n && !memcmp(s + i, VKG_HF_SPM, 3))
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

void vkg__hf_free_pipeline(vkg__hftok *h)
{
    for (int i = 0; i < h->nnorm; i++) {
        free(h->norm[i].a);
        free(h->norm[i].b);
    }
    for (int i = 0; i < h->nstep; i++)
        pcre2_code_free(h->step[i].re);
}
