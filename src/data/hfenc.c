/* Encoding with a Hugging Face tokenizer (hftok.h), in `tokenizers`' order: the post-processor's
 * prefix; added tokens found in the raw text (leftmost, longest first; lstrip/rstrip swallow the
 * whitespace beside them); each stretch between them normalized, searched for the added tokens
 * marked "normalized" (their content normalized alike), pre-tokenized step by step (Split and
 * ByteLevel's regexes run by PCRE2), spelled in the model's alphabet (GPT-2's byte -> code point
 * map for byte-level models) and BPE-merged by rank (byte fallback or unk for characters outside
 * the vocabulary; ignore_merges takes a pre-token that is itself a token whole); the
 * post-processor's suffix. Text that is not valid UTF-8 (which `tokenizers` cannot receive) is
 * still encoded: PCRE2 matches no invalid byte, so each one falls in a gap of its own, and NFC
 * leaves such text as it is. */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include "base/error.h"
#include "data/hftok.h"
#include "data/tokenizer_internal.h"
#include "data/unicode.h"

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

typedef struct piece {
    size_t off, len;
    int first; /* begins the text (Metaspace's prepend_scheme "first") */
} piece;

typedef struct plist {
    piece *v;
    size_t n, cap;
} plist;

typedef struct enc {
    const vkg__hftok *h;
    vkg_tokens *out;
    const vkg_cancel *cancel;
    size_t since_check;
    pcre2_match_data *md;
    buf norm, text[2], model;
    buf pat; /* each added token as matched: its content, normalized when it says so */
    size_t *poff, *plen;
    plist list[2];
    vkg__merger merger;
} enc;

/* Append n bytes of s (s NULL: just make room for them) to b. */
static vkg_status put(buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        VKG_CHECK(p, VKG_ERR_NOMEM, "out of memory encoding text");
        b->p = p;
        b->cap = cap;
    }
    if (s)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    return VKG_OK;
}

static vkg_status add_piece(plist *l, size_t off, size_t len, int first)
{
    if (len == 0)
        return VKG_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        piece *v = realloc(l->v, cap * sizeof *v);
        VKG_CHECK(v, VKG_ERR_NOMEM, "out of memory encoding text");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (piece){off, len, first};
    return VKG_OK;
}

/* ---- BPE ------------------------------------------------------------------------------------ */

static int32_t find_token(const vkg__hftok *h, const char *s, size_t n)
{
    return vkg__strtab_find(&h->by_str, h->mstr, h->moff, s, n);
}

/* BPE one pre-token s (n bytes as the pre-tokenizer left them) and append its ids. */
static vkg_status bpe(enc *e, const char *s, size_t n)
{
    const vkg__hftok *h = e->h;
    if (h->byte_level) {
        e->model.n = 0;
        for (size_t i = 0; i < n; i++) {
            char u[4];
            VKG_TRY(put(&e->model, u, vkg__utf8_encode(h->byte_cp[(unsigned char)s[i]], u)));
        }
        s = e->model.p;
        n = e->model.n;
    }
    int32_t whole;
    if (h->ignore_merges && (whole = find_token(h, s, n)) >= 0)
        return vkg_tokens_push(e->out, whole);
    VKG_TRY(vkg__merger_reserve(&e->merger, n)); /* a symbol per byte at most */
    int32_t *sym = e->merger.id, k = 0, prev_unk = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t cl = vkg__utf8_decode((const unsigned char *)s + i, n - i, &cp);
        int32_t id = find_token(h, s + i, cl);
        int fell = 0;
        if (id < 0 && h->byte_fallback) {
            fell = 1;
            for (size_t b = 0; b < cl; b++)
                fell &= h->byte_tok[(unsigned char)s[i + b]] >= 0;
            for (size_t b = 0; fell && b < cl; b++)
                sym[k++] = h->byte_tok[(unsigned char)s[i + b]];
        }
        if (id >= 0) {
            sym[k++] = id, prev_unk = 0;
        } else if (!fell && h->unk >= 0) {
            if (!(h->fuse_unk && prev_unk))
                sym[k++] = h->unk;
            prev_unk = 1;
        } else if (fell) {
            prev_unk = 0;
        }
        i += cl;
    }
    return vkg__merger_run(&e->merger, k, &h->merges, e->out);
}

/* ---- pre-tokenizers ------------------------------------------------------------------------- */

/* Split [off, off + len) of src by re into dst: matches (unless removed) and the gaps between. */
static vkg_status split_re(enc *e, const vkg__hf_step *st, const buf *src, const piece *p, buf *dst,
                           plist *out)
{
    const char *s = src->p + p->off;
    size_t pos = 0, gap = 0, base = dst->n;
    VKG_TRY(put(dst, s, p->len));
    while (pos <= p->len) {
        int rc = pcre2_match(st->re, (PCRE2_SPTR)s, p->len, pos, 0, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return VKG_FAIL(VKG_ERR_FORMAT, "pre-tokenizer pattern on a %zu-byte piece: %s", p->len,
                            (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t a = ov[0], b = ov[1];
        if (b == a) { /* an empty match splits nothing: step over one character */
            pos = a + 1;
            while (pos < p->len && ((unsigned char)s[pos] & 0xC0) == 0x80)
                pos++;
            continue;
        }
        VKG_TRY(add_piece(out, base + gap, a - gap, p->first && gap == 0));
        if (!st->removed)
            VKG_TRY(add_piece(out, base + a, b - a, p->first && a == 0));
        gap = pos = b;
    }
    return add_piece(out, base + gap, p->len - gap, p->first && gap == 0);
}

/* Metaspace: spaces become the replacement, which is prepended as the scheme says (not when the
 * piece already starts with it) and, with split, begins each piece. */
static vkg_status metaspace(const vkg__hf_step *st, const buf *src, const piece *p, buf *dst,
                            plist *out)
{
    const char *s = src->p + p->off;
    size_t rl = strlen(st->repl), base = dst->n, last = 0;
    int starts = s[0] == ' ' || (p->len >= rl && !memcmp(s, st->repl, rl));
    if (!starts && (st->prepend == 2 || (st->prepend == 1 && p->first)))
        VKG_TRY(put(dst, st->repl, rl));
    for (size_t i = 0; i < p->len; i++)
        VKG_TRY(s[i] == ' ' ? put(dst, st->repl, rl) : put(dst, s + i, 1));
    size_t n = dst->n - base;
    if (!st->split)
        return add_piece(out, base, n, p->first);
    for (size_t i = 1; i + rl <= n; i++)
        if (!memcmp(dst->p + base + i, st->repl, rl)) {
            VKG_TRY(add_piece(out, base + last, i - last, p->first && last == 0));
            last = i;
        }
    return add_piece(out, base + last, n - last, p->first && last == 0);
}

/* Run the pre-tokenizers over s (n bytes) and BPE each pre-token. */
static vkg_status pretokenize(enc *e, const char *s, size_t n, int first)
{
    const vkg__hftok *h = e->h;
    int cur = 0;
    e->text[0].n = 0;
    e->list[0].n = 0;
    VKG_TRY(put(&e->text[0], s, n));
    VKG_TRY(add_piece(&e->list[0], 0, n, first));
    for (int k = 0; k < h->nstep; k++) {
        const vkg__hf_step *st = &h->step[k];
        buf *src = &e->text[cur], *dst = &e->text[!cur];
        plist *in = &e->list[cur], *out = &e->list[!cur];
        dst->n = 0;
        out->n = 0;
        for (size_t i = 0; i < in->n; i++) {
            piece p = in->v[i];
            if (st->kind == VKG_HF_METASPACE) {
                VKG_TRY(metaspace(st, src, &p, dst, out));
                continue;
            }
            if (st->kind == VKG_HF_BYTELEVEL && st->prefix_space && src->p[p.off] != ' ') {
                /* a copy with the space in front, split from there */
                size_t at = src->n;
                VKG_TRY(put(src, " ", 1));
                VKG_TRY(put(src, NULL, p.len)); /* room first: put may move src->p */
                memcpy(src->p + at + 1, src->p + p.off, p.len);
                p.off = at;
                p.len++;
            }
            if (st->re)
                VKG_TRY(split_re(e, st, src, &p, dst, out));
            else {
                size_t at = dst->n;
                VKG_TRY(put(dst, src->p + p.off, p.len));
                VKG_TRY(add_piece(out, at, p.len, p.first));
            }
        }
        cur = !cur;
    }
    for (size_t i = 0; i < e->list[cur].n; i++)
        VKG_TRY(bpe(e, e->text[cur].p + e->list[cur].v[i].off, e->list[cur].v[i].len));
    return VKG_OK;
}

/* ---- normalizers and added tokens ----------------------------------------------------------- */

static vkg_status normalize(enc *e, const char *s, size_t n)
{
    const vkg__hftok *h = e->h;
    buf *b = &e->norm;
    b->n = 0;
    VKG_TRY(put(b, s, n));
    for (int k = 0; k < h->nnorm; k++) {
        const vkg__hf_norm *nm = &h->norm[k];
        buf tmp = {0};
        if (nm->kind == VKG_HF_NFC) {
            utf8proc_uint8_t *d = NULL;
            utf8proc_ssize_t dn =
                utf8proc_map((const utf8proc_uint8_t *)b->p, (utf8proc_ssize_t)b->n, &d,
                             UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            vkg_status st = VKG_OK;
            if (dn >= 0) { /* invalid UTF-8 stays as it is */
                b->n = 0;
                st = put(b, d, (size_t)dn);
            }
            free(d);
            VKG_TRY(st);
            continue;
        }
        if (b->n == 0)
            continue;
        vkg_status st = VKG_OK;
        if (nm->kind == VKG_HF_PREPEND) {
            st = put(&tmp, nm->a, nm->alen);
            if (st == VKG_OK)
                st = put(&tmp, b->p, b->n);
        } else {
            for (size_t i = 0; i < b->n && st == VKG_OK;) {
                if (i + nm->alen <= b->n && !memcmp(b->p + i, nm->a, nm->alen)) {
                    st = put(&tmp, nm->b, nm->blen);
                    i += nm->alen;
                } else {
                    st = put(&tmp, b->p + i++, 1);
                }
            }
        }
        if (st != VKG_OK) {
            free(tmp.p);
            return st;
        }
        free(b->p);
        *b = tmp;
    }
    return VKG_OK;
}

/* Rust's char::is_whitespace (Unicode White_Space) for the character at s. */
static size_t space_at(const char *s, size_t n)
{
    int32_t cp;
    size_t l = vkg__utf8_decode((const unsigned char *)s, n, &cp);
    int ws = (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
             (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
             cp == 0x205F || cp == 0x3000;
    return ws ? l : 0;
}

/* The longest added token of the given normalized-ness at s[i..n), or -1. */
static int match_added(const enc *e, const char *s, size_t i, size_t n, int normalized)
{
    int best = -1;
    for (int k = 0; k < e->h->nadded; k++) {
        size_t len = e->plen[k];
        const char *p = e->pat.p + e->poff[k];
        if (e->h->added[k].normalized == normalized && len > 0 && len <= n - i && p[0] == s[i] &&
            !memcmp(s + i, p, len) && (best < 0 || len > e->plen[best]))
            best = k;
    }
    return best;
}

/* The added tokens as matched: tokens marked normalized are found in normalized text, so their
 * content is normalized too, as tokenizers does. */
static vkg_status added_patterns(enc *e)
{
    const vkg__hftok *h = e->h;
    e->poff = malloc(((size_t)h->nadded + 1) * sizeof *e->poff);
    e->plen = malloc(((size_t)h->nadded + 1) * sizeof *e->plen);
    VKG_CHECK(e->poff && e->plen, VKG_ERR_NOMEM, "out of memory");
    for (int k = 0; k < h->nadded; k++) {
        const vkg__hf_added *a = &h->added[k];
        const char *p = a->content;
        size_t n = a->len;
        if (a->normalized) {
            VKG_TRY(normalize(e, a->content, a->len));
            p = e->norm.p;
            n = e->norm.n;
        }
        e->poff[k] = e->pat.n;
        e->plen[k] = n;
        VKG_TRY(put(&e->pat, p, n));
    }
    return VKG_OK;
}

typedef vkg_status (*gap_fn)(enc *e, const char *s, size_t n, int first);

/* Split s at the added tokens of one kind; gaps go to fn, tokens to the output. */
static vkg_status split_added(enc *e, const char *s, size_t n, int first, int normalized, gap_fn fn)
{
    const vkg__hftok *h = e->h;
    unsigned char lead[256] = {0};
    for (int k = 0; k < h->nadded; k++)
        if (h->added[k].normalized == normalized && e->plen[k] > 0)
            lead[(unsigned char)e->pat.p[e->poff[k]]] = 1;
    size_t gap = 0;
    for (size_t i = 0; i < n;) {
        int k = lead[(unsigned char)s[i]] ? match_added(e, s, i, n, normalized) : -1;
        if (k < 0) {
            i++;
            continue;
        }
        const vkg__hf_added *a = &h->added[k];
        size_t start = i, end = i + e->plen[k], l;
        if (a->lstrip) /* swallow the whitespace before it, back to the previous cut */
            for (size_t j = start; j > gap;) {
                size_t back = j - 1;
                while (back > gap && ((unsigned char)s[back] & 0xC0) == 0x80)
                    back--;
                if (!space_at(s + back, n - back))
                    break;
                j = start = back;
            }
        if (a->rstrip)
            while (end < n && (l = space_at(s + end, n - end)) > 0)
                end += l;
        if (start > gap)
            VKG_TRY(fn(e, s + gap, start - gap, first && gap == 0));
        VKG_TRY(vkg_tokens_push(e->out, a->id));
        gap = i = end;
    }
    return n > gap ? fn(e, s + gap, n - gap, first && gap == 0) : VKG_OK;
}

static vkg_status normalized_gap(enc *e, const char *s, size_t n, int first)
{
    e->since_check += n;
    if (e->since_check >= VKG_ENCODE_CANCEL_BYTES) {
        e->since_check = 0;
        VKG_CHECK(!e->cancel || !e->cancel->fn || !e->cancel->fn(e->cancel->ctx), VKG_ERR_ABORTED,
                  "interrupted");
    }
    VKG_TRY(normalize(e, s, n));
    return split_added(e, e->norm.p, e->norm.n, first, 1, pretokenize);
}

vkg_status vkg__hftok_encode(const vkg__hftok *h, const char *text, size_t n,
                             const vkg_cancel *cancel, vkg_tokens *out)
{
    enc e = {.h = h, .out = out, .cancel = cancel};
    vkg_status st = VKG_OK;
    e.md = pcre2_match_data_create(4, NULL);
    VKG_CHECK(e.md, VKG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < h->nprefix && st == VKG_OK; i++)
        st = vkg_tokens_push(out, h->prefix[i]);
    if (st == VKG_OK)
        st = added_patterns(&e);
    if (st == VKG_OK)
        st = split_added(&e, text, n, 1, 0, normalized_gap);
    for (int i = 0; i < h->nsuffix && st == VKG_OK; i++)
        st = vkg_tokens_push(out, h->suffix[i]);
    pcre2_match_data_free(e.md);
    free(e.norm.p);
    free(e.model.p);
    free(e.pat.p);
    free(e.poff);
    free(e.plen);
    for (int i = 0; i < 2; i++) {
        free(e.text[i].p);
        free(e.list[i].v);
    }
    vkg__merger_free(&e.merger);
    return st;
}
