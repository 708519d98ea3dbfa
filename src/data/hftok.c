/* Reading Hugging Face's tokenizer.json (and tokenizer_config.json) into a vkg__hftok (see
 * hftok.h): the model (type "BPE": vocab, merges as "a b" strings or [a, b] pairs, unk_token,
 * fuse_unk, byte_fallback, ignore_merges), added_tokens, and from the config bos_token,
 * eos_token and chat_template; the normalizer, pre-tokenizer, post-processor and decoder are
 * hftok_pipeline.c's. Anything else that changes ids or text is refused by name; truncation
 * and padding must be null (they reshape the output). The JSON is read into a tree
 * (jsontree.c), since the keys come in any order. */
#include "data/hftok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "data/hftok_read.h"
#include "data/unicode.h"
#include "os/file.h"

/* Id of the vocabulary token the model spells s, or -1. */
static int32_t find_str(const vkg__hftok *h, const char *s, size_t n)
{
    return vkg__strtab_find(&h->by_str, h->mstr, h->moff, s, n);
}

/* The node's type string ("type" member), or "" when it has none. */
const char *vkg__hf_type_of(const vkg__hf_reader *r, long node)
{
    const char *s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, node, "type"), NULL);
    return s ? s : "";
}

/* Node i as an id: a whole number in [0, 2^24), else -1 (never a float-to-integer overflow). */
long vkg__hf_id_of(const vkg__jt *t, long i)
{
    if (i < 0 || t->n[i].type != VKG_JT_NUM)
        return -1;
    double v = t->n[i].num;
    if (!(v >= 0 && v < (double)(1 << 24)) || v != (double)(long)v)
        return -1;
    return (long)v;
}

int vkg__hf_flag(const vkg__hf_reader *r, long obj, const char *key, int dflt)
{
    long i = vkg__jt_get(&r->t, obj, key);
    return i >= 0 && r->t.n[i].type == VKG_JT_BOOL ? r->t.n[i].b : dflt;
}

vkg_status vkg__hf_need_str(const vkg__hf_reader *r, long obj, const char *key, const char *where,
                            const char **s, size_t *len)
{
    *s = vkg__jt_str(&r->t, vkg__jt_get(&r->t, obj, key), len);
    VKG_CHECK(*s, VKG_ERR_FORMAT, "%s: %s.%s: expected a string", r->name, where, key);
    return VKG_OK;
}

vkg_status vkg__hf_dup(const char *s, size_t n, char **out)
{
    *out = malloc(n + 1);
    VKG_CHECK(*out, VKG_ERR_NOMEM, "out of memory");
    memcpy(*out, s, n);
    (*out)[n] = '\0';
    return VKG_OK;
}

/* ---- model ---------------------------------------------------------------------------------- */

static vkg_status read_vocab(vkg__hf_reader *r, long vocab, int V)
{
    vkg__hftok *h = r->h;
    size_t total = 0;
    for (long c = r->t.n[vocab].first; c >= 0; c = r->t.n[c].next)
        total += r->t.n[c].klen;
    h->moff = calloc((size_t)V + 1, sizeof *h->moff);
    h->mstr = malloc(total + 1);
    size_t *len = calloc((size_t)V, sizeof *len);
    const char **src = calloc((size_t)V, sizeof *src);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, h->moff && h->mstr && len && src, VKG_ERR_NOMEM, done, "%s: out of memory",
                   r->name);
    VKG_TRY_GOTO(st, vkg__strtab_init(&h->by_str, (size_t)V, r->name), done);
    for (long c = r->t.n[vocab].first; c >= 0; c = r->t.n[c].next) {
        size_t kl;
        const char *k = vkg__jt_key(&r->t, c, &kl);
        char shown[96];
        long id = vkg__hf_id_of(&r->t, c);
        VKG_CHECK_GOTO(st, id >= 0 && id < V && !src[id], VKG_ERR_FORMAT, done,
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
        vkg__strtab_put(&h->by_str, src[id], len[id], id);
    }
    h->moff[V] = pos;
done:
    free(len);
    free(src);
    return st;
}

static vkg_status add_merge(vkg__hf_reader *r, long at, const char *a, size_t al, const char *b,
                            size_t bl, int32_t rank)
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
    vkg__mergetab_put(&h->merges, L, R, rank, M, 0); /* a repeated pair keeps its first rank */
    return VKG_OK;
}

static vkg_status read_merges(vkg__hf_reader *r, long merges)
{
    vkg__hftok *h = r->h;
    VKG_CHECK(merges >= 0 && r->t.n[merges].type == VKG_JT_ARR, VKG_ERR_FORMAT,
              "%s: model.merges: expected an array", r->name);
    VKG_TRY(vkg__mergetab_init(&h->merges, (size_t)r->t.n[merges].count, r->name));
    long at = 0;
    for (long c = r->t.n[merges].first; c >= 0; c = r->t.n[c].next, at++) {
        size_t n, al, bl;
        const char *s = vkg__jt_str(&r->t, c, &n), *a, *b;
        if (s) {
            const char *sp = memchr(s, ' ', n);
            VKG_CHECK(sp && !memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1), VKG_ERR_FORMAT,
                      "%s: model.merges[%ld]: expected two tokens separated by one space", r->name,
                      at);
            a = s, al = (size_t)(sp - s), b = sp + 1, bl = n - al - 1;
        } else {
            long p = r->t.n[c].type == VKG_JT_ARR && r->t.n[c].count == 2 ? r->t.n[c].first : -1;
            a = p >= 0 ? vkg__jt_str(&r->t, p, &al) : NULL;
            b = p >= 0 ? vkg__jt_str(&r->t, r->t.n[p].next, &bl) : NULL;
            VKG_CHECK(a && b, VKG_ERR_FORMAT,
                      "%s: model.merges[%ld]: expected \"a b\" or a pair [\"a\", \"b\"]", r->name,
                      at);
        }
        VKG_TRY(add_merge(r, at, a, al, b, bl, (int32_t)at));
    }
    return VKG_OK;
}

static vkg_status read_model(vkg__hf_reader *r, long model, int V)
{
    vkg__hftok *h = r->h;
    const char *type = vkg__hf_type_of(r, model);
    VKG_CHECK(model >= 0, VKG_ERR_FORMAT, "%s: no \"model\"", r->name);
    VKG_CHECK(!strcmp(type, "BPE") || (!*type && vkg__jt_get(&r->t, model, "merges") >= 0),
              VKG_ERR_UNSUPPORTED,
              "%s: model.type \"%s\" is not supported (vkgpt applies BPE models only)", r->name,
              type);
    static const char *const off[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 3; i++) {
        long f = vkg__jt_get(&r->t, model, off[i]);
        size_t n = 0;
        VKG_CHECK(!vkg__jt_present(&r->t, f) || (vkg__jt_str(&r->t, f, &n) && n == 0),
                  VKG_ERR_UNSUPPORTED, "%s: model.%s is set; vkgpt supports it only null", r->name,
                  off[i]);
    }
    h->fuse_unk = vkg__hf_flag(r, model, "fuse_unk", 0);
    h->byte_fallback = vkg__hf_flag(r, model, "byte_fallback", 0);
    h->ignore_merges = vkg__hf_flag(r, model, "ignore_merges", 0);
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

static vkg_status read_added(vkg__hf_reader *r, long arr)
{
    vkg__hftok *h = r->h;
    if (!vkg__jt_present(&r->t, arr))
        return VKG_OK;
    VKG_CHECK(r->t.n[arr].type == VKG_JT_ARR, VKG_ERR_FORMAT, "%s: added_tokens: expected an array",
              r->name);
    h->added = calloc((size_t)r->t.n[arr].count + 1, sizeof *h->added);
    VKG_CHECK(h->added, VKG_ERR_NOMEM, "out of memory");
    for (long c = r->t.n[arr].first; c >= 0; c = r->t.n[c].next) {
        vkg__hf_added *a = &h->added[h->nadded];
        long id = vkg__jt_get(&r->t, c, "id");
        const char *s;
        size_t n;
        char where[40];
        snprintf(where, sizeof where, "added_tokens[%d]", h->nadded);
        VKG_TRY(vkg__hf_need_str(r, c, "content", where, &s, &n));
        VKG_CHECK(vkg__hf_id_of(&r->t, id) >= 0 && n > 0, VKG_ERR_FORMAT,
                  "%s: %s: expected a non-empty content and an id in [0, 2^24)", r->name, where);
        VKG_CHECK(!vkg__hf_flag(r, c, "single_word", 0), VKG_ERR_UNSUPPORTED,
                  "%s: %s.single_word is true; vkgpt does not support it", r->name, where);
        a->id = (int32_t)vkg__hf_id_of(&r->t, id);
        a->lstrip = vkg__hf_flag(r, c, "lstrip", 0);
        a->rstrip = vkg__hf_flag(r, c, "rstrip", 0);
        a->normalized = vkg__hf_flag(r, c, "normalized", !vkg__hf_flag(r, c, "special", 0));
        a->len = n;
        h->nadded++;
        VKG_TRY(vkg__hf_dup(s, n, &a->content));
    }
    return VKG_OK;
}

/* The id of a special token named in tokenizer_config.json (a string or {"content": ...}). */
static int32_t config_token(const vkg__hf_reader *r, const vkg__jt *cfg, const char *key)
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

static vkg_status read_config(vkg__hf_reader *r, const char *name, const char *cfg, size_t n)
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
        VKG_CHECK_GOTO(st, eos != -1, VKG_ERR_FORMAT, done, "%s: eos_token is not a token of %s",
                       name, r->name);
        int32_t bos = config_token(r, &t, "bos_token");
        VKG_CHECK_GOTO(st, bos != -1, VKG_ERR_FORMAT, done, "%s: bos_token is not a token of %s",
                       name, r->name);
        long ct = vkg__jt_get(&t, 0, "chat_template");
        size_t cl;
        const char *s = vkg__jt_str(&t, ct, &cl);
        if (!s && ct >= 0 && t.n[ct].type == VKG_JT_ARR) /* [{name, template}]: the first */
            s = vkg__jt_str(&t, vkg__jt_get(&t, t.n[ct].first, "template"), &cl);
        if (s)
            VKG_TRY_GOTO(st, vkg__hf_dup(s, cl, &h->chat_template), done);
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
    vkg__hf_reader r = {.name = name};
    vkg_status st;
    int kind = VKG_HF_DEC_RAW, fallback = 0;
    *out = NULL;
    r.h = calloc(1, sizeof *r.h);
    VKG_CHECK(r.h, VKG_ERR_NOMEM, "out of memory");
    vkg__gpt2_byte_to_cp(r.h->byte_cp);
    r.h->bos = -1;
    VKG_TRY_GOTO(st, vkg__jt_parse(&r.t, json, n, name), fail);
    VKG_CHECK_GOTO(st, r.t.n[0].type == VKG_JT_OBJ, VKG_ERR_FORMAT, fail, "%s: expected an object",
                   name);
    static const char *const shaping[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++)
        VKG_CHECK_GOTO(st, !vkg__jt_present(&r.t, vkg__jt_get(&r.t, 0, shaping[i])),
                       VKG_ERR_UNSUPPORTED, fail,
                       "%s: %s is set; vkgpt reads tokenizers with it null", name, shaping[i]);
    long model = vkg__jt_get(&r.t, 0, "model"), vocab = vkg__jt_get(&r.t, model, "vocab");
    VKG_TRY_GOTO(st, read_added(&r, vkg__jt_get(&r.t, 0, "added_tokens")), fail);
    long V = 0;
    for (long c = vocab >= 0 ? r.t.n[vocab].first : -1; c >= 0; c = r.t.n[c].next)
        if (vkg__hf_id_of(&r.t, c) + 1 > V)
            V = vkg__hf_id_of(&r.t, c) + 1;
    for (int i = 0; i < r.h->nadded; i++)
        V = r.h->added[i].id + 1 > V ? r.h->added[i].id + 1 : V;
    VKG_TRY_GOTO(st, read_model(&r, model, (int)V), fail);
    VKG_TRY_GOTO(st, vkg__hf_read_normalizer(&r, vkg__jt_get(&r.t, 0, "normalizer"), 0), fail);
    VKG_TRY_GOTO(st, vkg__hf_read_pretok(&r, vkg__jt_get(&r.t, 0, "pre_tokenizer")), fail);
    VKG_TRY_GOTO(st, vkg__hf_read_post(&r, vkg__jt_get(&r.t, 0, "post_processor"), 0), fail);
    VKG_TRY_GOTO(st, vkg__hf_read_decoder(&r, vkg__jt_get(&r.t, 0, "decoder"), 0, &kind, &fallback),
                 fail);
    for (int i = 0; i < r.h->nprefix + r.h->nsuffix; i++) {
        int32_t id = i < r.h->nprefix ? r.h->prefix[i] : r.h->suffix[i - r.h->nprefix];
        VKG_CHECK_GOTO(st, id >= 0 && id < V, VKG_ERR_FORMAT, fail,
                       "%s: post_processor: special token id %ld is outside [0, %ld)", name,
                       (long)id, V);
    }
    r.h->bos = r.h->nprefix > 0 ? r.h->prefix[0] : -1;
    VKG_TRY_GOTO(st, vkg__hf_decode_table(r.h, (int)V, kind, fallback), fail);
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
    vkg__strtab_free(&h->by_str);
    vkg__mergetab_free(&h->merges);
    vkg__hf_free_pipeline(h);
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
