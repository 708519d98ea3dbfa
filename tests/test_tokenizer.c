/* Tests of the tokenizers: byte-level round trip, GPT-2 pre-tokenization pieces, BPE merge order
 * on a tiny synthetic vocabulary, every case of tests/data/gpt2_encode_cases.json exactly (with
 * the vocabulary shipped in data/gpt2; missing data is a failure, not a skip), llm.c tokenizer
 * files, the JSON reader, refusal of malformed vocabulary files with their bytes escaped in the
 * message, and cancelled encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/file.h"
#include "base/json.h"
#include "data/tokenizer_internal.h"
#include "data/unicode.h"
#include "testutil.h"
#include "vkgpt/tokenizer.h"

#if !defined(VKG_MODEL_DIR) || !defined(VKG_TEST_DATA)
#error "VKG_MODEL_DIR must name data/gpt2 and VKG_TEST_DATA tests/data of the source tree"
#endif

static const char *gpt2_dir = VKG_MODEL_DIR;

static void assert_msg_has(const char *a, const char *b)
{
    const char *msg = vkg_error_message();
    if (!strstr(msg, a) || (b && !strstr(msg, b))) {
        fprintf(stderr, "error message \"%s\" lacks \"%s\" / \"%s\"\n", msg, a, b ? b : "");
        fail();
    }
}

static char *slurp(const char *path, size_t *n)
{
    char *buf = vkg_test_read_file(path, n);
    if (!buf)
        fail_msg("missing test data %s: the GPT-2 vocabulary is in data/gpt2 and the encode "
                 "cases in tests/data of the source tree",
                 path);
    return buf;
}

/* ---- byte-level ----------------------------------------------------------------------------- */

static void test_byte_roundtrip(void **state)
{
    (void)state;
    vkg_tokenizer_t *t = NULL;
    vkg_tokens ids = {0};
    char text[300];
    for (int i = 0; i < 256; i++)
        text[i] = (char)(255 - i);
    memcpy(text + 256, "h\xc3\xa9llo \xff\xfe", 10);
    assert_int_equal(vkg_tokenizer_create_byte(&t), VKG_OK);
    assert_int_equal(vkg_tokenizer_kind_of(t), VKG_TOKENIZER_BYTE);
    assert_int_equal(vkg_tokenizer_vocab_size(t), 257);
    assert_int_equal(vkg_tokenizer_eot(t), 256);
    assert_int_equal(vkg_tokenizer_encode(t, text, 266, &ids), VKG_OK);
    assert_int_equal(ids.n, 266);
    for (size_t i = 0; i < 266; i++)
        assert_int_equal(ids.ids[i], (unsigned char)text[i]);
    assert_int_equal(vkg_tokens_push(&ids, 256), VKG_OK);
    char *back = NULL;
    size_t len = 0;
    assert_int_equal(vkg_tokenizer_decode(t, ids.ids, ids.n, &back, &len), VKG_OK);
    assert_int_equal(len, 266 + 13);
    assert_memory_equal(back, text, 266);
    assert_string_equal(back + 266, "<|endoftext|>");
    free(back);
    int32_t bad[2] = {5, 257};
    assert_int_equal(vkg_tokenizer_decode(t, bad, 2, &back, &len), VKG_ERR_INVALID_ARG);
    assert_msg_has("token 257 at position 1", NULL);
    vkg_tokens_deinit(&ids);
    vkg_tokenizer_destroy(&t);
    assert_null(t);
    vkg_tokenizer_destroy(&t); /* NULL-safe */
}

static void test_byte_file(void **state)
{
    (void)state;
    char path[] = "/tmp/vkg_test_tok_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    vkg_tokenizer_t *t = NULL, *u = NULL;
    vkg_tokens ids = {0};
    assert_int_equal(vkg_tokenizer_create_byte(&t), VKG_OK);
    assert_int_equal(vkg_tokenizer_save(t, path), VKG_OK);
    assert_int_equal(vkg_tokenizer_load(path, &u), VKG_OK);
    assert_int_equal(vkg_tokenizer_kind_of(u), VKG_TOKENIZER_BYTE); /* recognised: can encode */
    assert_int_equal(vkg_tokenizer_encode(u, "hi", 2, &ids), VKG_OK);
    assert_int_equal(ids.n, 2);
    assert_int_equal(ids.ids[1], 'i');
    vkg_tokens_deinit(&ids);
    vkg_tokenizer_destroy(&t);
    vkg_tokenizer_destroy(&u);
    unlink(path);
}

/* ---- GPT-2 pre-tokenization ----------------------------------------------------------------- */

typedef struct pieces {
    char buf[512];
    size_t len;
} pieces;

/* Joins the pieces with '|' so a whole split is compared as one string. */
static vkg_status collect(const char *piece, size_t len, void *ctx)
{
    pieces *p = ctx;
    if (p->len)
        p->buf[p->len++] = '|';
    memcpy(p->buf + p->len, piece, len);
    p->len += len;
    p->buf[p->len] = '\0';
    return VKG_OK;
}

static void check_split(const char *text, const char *want)
{
    pieces p = {{0}, 0};
    assert_int_equal(vkg__gpt2_pretokenize(text, strlen(text), collect, &p), VKG_OK);
    if (strcmp(p.buf, want) != 0) {
        fprintf(stderr, "split of \"%s\": got \"%s\", want \"%s\"\n", text, p.buf, want);
        fail();
    }
}

static void test_pretokenize(void **state)
{
    (void)state;
    check_split("Hello world", "Hello| world");
    check_split("   leading", "  | leading");
    check_split("a\n\nb", "a|\n|\n|b");
    check_split("x  ", "x|  ");
    check_split("I'm don't they'll we've", "I|'m| don|'t| they|'ll| we|'ve");
    check_split("'s 'S ''s", "'s| '|S| ''|s");
    check_split("3.14159, -42", "3|.|14159|,| -|42");
    check_split("caf\xc3\xa9 \xc3\xb1", "caf\xc3\xa9| \xc3\xb1");
    check_split("\xe2\x80\x94 x", "\xe2\x80\x94| x");    /* em dash is punctuation */
    check_split("a\xff!b", "a|\xff!|b");                 /* invalid byte: punctuation */
    check_split("\xc2\xb2\xc2\xbd", "\xc2\xb2\xc2\xbd"); /* superscript two, one half: \p{N} */
    check_split("a\xc2\xa0"
                "b",
                "a|\xc2\xa0|b"); /* no-break space is \s */
    check_split("", "");
}

/* ---- BPE mechanics on a synthetic vocabulary ------------------------------------------------ */

/* Write a JSON string of raw token bytes in GPT-2's unicode spelling. */
static void put_key(FILE *f, const char *bytes, size_t n)
{
    uint32_t map[256];
    vkg__gpt2_byte_to_cp(map);
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = map[(unsigned char)bytes[i]];
        char u[4];
        if (cp == '"' || cp == '\\')
            fputc('\\', f);
        fwrite(u, 1, vkg__utf8_encode(cp, u), f);
    }
    fputc('"', f);
}

/* A vocabulary of the 256 bytes (id = byte) plus "aa" 256, "aaa" 257, eot 258, with merges
 * "a a" then "aa a"; extra_merge is appended to vocab.bpe when not NULL. */
static void write_tiny_vocab(const char *dir, int skip_id, const char *extra_merge)
{
    char path[256];
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    FILE *f = fopen(path, "wb");
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (b == skip_id)
            continue;
        put_key(f, &c, 1);
        fprintf(f, ": %d, ", b);
    }
    put_key(f, "aa", 2);
    fprintf(f, ": 256, ");
    put_key(f, "aaa", 3);
    fprintf(f, ": 257, \"<|endoftext|>\": 258}");
    fclose(f);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    f = fopen(path, "wb");
    fprintf(f, "#version: 0.2\na a\naa a\n%s", extra_merge ? extra_merge : "");
    fclose(f);
}

static void remove_vocab(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    unlink(path);
    rmdir(dir);
}

static void expect_ids(vkg_tokenizer_t *t, const char *text, const int32_t *want, size_t n)
{
    vkg_tokens ids = {0};
    assert_int_equal(vkg_tokenizer_encode(t, text, strlen(text), &ids), VKG_OK);
    assert_int_equal(ids.n, n);
    assert_memory_equal(ids.ids, want, n * sizeof *want);
    vkg_tokens_deinit(&ids);
}

static void test_bpe_merge_order(void **state)
{
    (void)state;
    char dir[] = "/tmp/vkg_test_bpe_XXXXXX";
    assert_int_equal(vkg_os_mkdtemp(dir), 0);
    write_tiny_vocab(dir, -1, NULL);
    vkg_tokenizer_t *t = NULL;
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_OK);
    assert_int_equal(vkg_tokenizer_vocab_size(t), 259);
    assert_int_equal(vkg_tokenizer_eot(t), 258);
    expect_ids(t, "a", (const int32_t[]){'a'}, 1);
    expect_ids(t, "aaa", (const int32_t[]){257}, 1);        /* (a a) then (aa a) */
    expect_ids(t, "aaaa", (const int32_t[]){256, 256}, 2);  /* both (a a) before any (aa a) */
    expect_ids(t, "aaaaa", (const int32_t[]){256, 257}, 2); /* leftmost first */
    expect_ids(t, "baaab", (const int32_t[]){'b', 257, 'b'}, 3);
    expect_ids(t, " aaa\"", (const int32_t[]){' ', 257, '"'}, 3);
    remove_vocab(dir);
    vkg_tokenizer_destroy(&t);

    /* malformed vocabularies are refused with the file named */
    assert_int_equal(vkg_os_mkdtemp(strcpy(dir, "/tmp/vkg_test_bpe_XXXXXX")), 0);
    write_tiny_vocab(dir, 'q', NULL); /* a gap in the ids */
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_null(t);
    assert_msg_has("encoder.json", "without gaps");
    write_tiny_vocab(dir, -1, "a b c\n");
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("vocab.bpe: line 4", "two tokens");
    write_tiny_vocab(dir, -1, "aaa aaa\n");
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("vocab.bpe: line 4", "makes a token that is not in encoder.json");
    char path[256];
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    assert_int_equal(truncate(path, 300), 0);
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("encoder.json", "file ends");
    remove_vocab(dir);
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_IO);
    assert_msg_has("encoder.json", "cannot open");
}

/* The message quotes the file's bytes, escaped: no control character, and ESC shown as \x1b. */
static void assert_msg_escaped(const char *file)
{
    const char *msg = vkg_error_message();
    assert_msg_has(file, "\\x1b");
    for (const char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            fail_msg("byte 0x%02x at %d of the message \"%s\"", (unsigned char)*p, (int)(p - msg),
                     msg);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A crafted vocabulary cannot send terminal escapes through an error message. */
static void test_untrusted_bytes_escaped(void **state)
{
    (void)state;
    char dir[] = "/tmp/vkg_test_bpe_XXXXXX";
    vkg_tokenizer_t *t = NULL;
    assert_int_equal(vkg_os_mkdtemp(dir), 0);
    write_tiny_vocab(dir, -1, "a\x1b[2Jb\n"); /* a merge line without its space */
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("two tokens", "a\\x1b[2Jb");
    assert_msg_escaped("vocab.bpe");
    write_tiny_vocab(dir, -1, "\x1b[31m a\n"); /* a part outside GPT-2's byte alphabet */
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("U+001B", "\"\\x1b[31m\"");
    assert_msg_escaped("vocab.bpe");
    write_file(dir, "encoder.json", "{\"\\u001b]0;title\\u0007\": 0}"); /* a key with escapes */
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("U+001B", "\\x1b]0;title\\x07");
    assert_msg_escaped("encoder.json");
    write_file(dir, "encoder.json", "{\"a\"\x1b[2J: 0}"); /* a raw ESC where ':' belongs */
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &t), VKG_ERR_FORMAT);
    assert_msg_has("expected ':', found '\\x1b'", NULL);
    assert_msg_escaped("encoder.json");
    assert_null(t);
    remove_vocab(dir);
}

static int cancel_calls, cancel_at;

/* Stops on its cancel_at-th call. */
static int cancel_on_call(void *ctx)
{
    (void)ctx;
    return ++cancel_calls == cancel_at;
}

/* Encoding asks its cancellation every VKG_ENCODE_CANCEL_BYTES bytes and stops when told, for
 * the byte-level and the BPE encoder. */
static void test_encode_cancelled(void **state)
{
    (void)state;
    char dir[] = "/tmp/vkg_test_bpe_XXXXXX";
    assert_int_equal(vkg_os_mkdtemp(dir), 0);
    write_tiny_vocab(dir, -1, NULL);
    vkg_tokenizer_t *tk[2] = {NULL, NULL};
    assert_int_equal(vkg_tokenizer_create_byte(&tk[0]), VKG_OK);
    assert_int_equal(vkg_tokenizer_create_gpt2(dir, &tk[1]), VKG_OK);
    remove_vocab(dir);
    size_t n = 3 * VKG_ENCODE_CANCEL_BYTES + 10;
    char *text = malloc(n);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        text[i] = i % 4 == 3 ? ' ' : 'a'; /* pre-tokens "aaa", " aaa", ... */
    vkg_cancel cancel = {cancel_on_call, NULL};
    for (int k = 0; k < 2; k++) {
        vkg_tokens ids = {0};
        cancel_calls = 0, cancel_at = 2;
        assert_int_equal(vkg__tokenizer_encode(tk[k], text, n, &cancel, &ids), VKG_ERR_ABORTED);
        assert_msg_has("interrupted", NULL);
        assert_int_equal(cancel_calls, 2);
        assert_true(ids.n > 0 && ids.n < (k ? n / 2 : n));
        vkg_tokens_deinit(&ids);
        cancel_calls = 0, cancel_at = -1; /* never: the whole text, asked about 3 times */
        assert_int_equal(vkg__tokenizer_encode(tk[k], text, n, &cancel, &ids), VKG_OK);
        assert_true(cancel_calls >= 3 && cancel_calls <= 4);
        assert_int_equal(ids.n, k ? n / 4 * 2 + 1 : n); /* "aaa" then " " "aaa" per 4 bytes */
        vkg_tokens_deinit(&ids);
        vkg_tokenizer_destroy(&tk[k]);
    }
    free(text);
}

/* ---- GPT-2: the reference cases ------------------------------------------------------------- */

/* Decode a hex string in place (two digits a byte); returns 0 on a malformed one. */
static int unhex(char *s, size_t *len)
{
    if (*len % 2)
        return 0;
    for (size_t i = 0; i < *len / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return 0;
        s[i] = (char)v;
    }
    *len /= 2;
    return 1;
}

/* One case of gpt2_encode_cases.json: {"name": ..., "text" or "hex": ..., "tokens": [...]}.
 * Fills name, text (the raw bytes) and want. */
static void read_case(vkg__json *j, char **name, char **text, size_t *tlen, vkg_tokens *want)
{
    char *key = NULL;
    size_t klen = 0, kcap = 0, nlen = 0, ncap = 0, tcap = 0;
    int more_fields, more_ids, have_text = 0;
    assert_int_equal(vkg__json_open(j, '{', &more_fields), VKG_OK);
    while (more_fields) {
        assert_int_equal(vkg__json_string(j, &key, &klen, &kcap), VKG_OK);
        assert_int_equal(vkg__json_expect(j, ':'), VKG_OK);
        if (!strcmp(key, "name")) {
            assert_int_equal(vkg__json_string(j, name, &nlen, &ncap), VKG_OK);
        } else if (!strcmp(key, "text") || !strcmp(key, "hex")) {
            assert_int_equal(vkg__json_string(j, text, tlen, &tcap), VKG_OK);
            if (!strcmp(key, "hex"))
                assert_true(unhex(*text, tlen));
            have_text = 1;
        } else {
            assert_string_equal(key, "tokens");
            assert_int_equal(vkg__json_open(j, '[', &more_ids), VKG_OK);
            while (more_ids) {
                long long id;
                assert_int_equal(vkg__json_int(j, &id), VKG_OK);
                assert_int_equal(vkg_tokens_push(want, (int32_t)id), VKG_OK);
                assert_int_equal(vkg__json_next(j, ']', &more_ids), VKG_OK);
            }
        }
        assert_int_equal(vkg__json_next(j, '}', &more_fields), VKG_OK);
    }
    assert_true(have_text && *name);
    free(key);
}

/* Every case's encoding must equal the ids of the reference encoder (scripts/gen_encode_cases.py,
 * written independently of this one from the published algorithm), and decode back to the text. */
static void test_gpt2_encode_cases(void **state)
{
    (void)state;
    char path[512];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/gpt2_encode_cases.json", VKG_TEST_DATA);
    char *doc = slurp(path, &n);
    vkg_tokenizer_t *t = NULL;
    if (vkg_tokenizer_create_gpt2(gpt2_dir, &t) != VKG_OK)
        fail_msg("cannot load the GPT-2 vocabulary from %s: %s", gpt2_dir, vkg_error_message());
    vkg__json j;
    vkg__json_init(&j, doc, n, path);
    int more_cases, cases = 0, invalid = 0;
    assert_int_equal(vkg__json_open(&j, '[', &more_cases), VKG_OK);
    while (more_cases) {
        vkg_tokens want = {0}, got = {0};
        char *name = NULL, *text = NULL;
        size_t tlen = 0;
        read_case(&j, &name, &text, &tlen, &want);
        assert_int_equal(vkg_tokenizer_encode(t, text, tlen, &got), VKG_OK);
        size_t first_bad = 0;
        while (first_bad < got.n && first_bad < want.n && got.ids[first_bad] == want.ids[first_bad])
            first_bad++;
        if (got.n != want.n || first_bad < want.n) {
            fprintf(stderr, "case %d (%s): %zu tokens, want %zu; first difference at %zu\n", cases,
                    name, got.n, want.n, first_bad);
            fail();
        }
        char *back = NULL; /* GPT-2 BPE is lossless, invalid UTF-8 included */
        size_t blen = 0;
        assert_int_equal(vkg_tokenizer_decode(t, want.ids, want.n, &back, &blen), VKG_OK);
        assert_int_equal(blen, tlen);
        assert_memory_equal(back, text, tlen);
        for (size_t i = 0; i < tlen;) {
            int32_t cp;
            i += vkg__utf8_decode((const unsigned char *)text + i, tlen - i, &cp);
            invalid += cp < 0;
        }
        free(back);
        free(name);
        free(text);
        vkg_tokens_deinit(&want);
        vkg_tokens_deinit(&got);
        cases++;
        assert_int_equal(vkg__json_next(&j, ']', &more_cases), VKG_OK);
    }
    assert_int_equal(vkg__json_end(&j), VKG_OK);
    assert_true(cases >= 30);
    assert_true(invalid > 0); /* the cases cover invalid UTF-8 */
    free(doc);
    vkg_tokenizer_destroy(&t);
}

static void test_gpt2_tokenizer_file(void **state)
{
    (void)state;
    vkg_tokenizer_t *t = NULL, *u = NULL;
    if (vkg_tokenizer_create_gpt2(gpt2_dir, &t) != VKG_OK)
        fail_msg("cannot load the GPT-2 vocabulary from %s: %s", gpt2_dir, vkg_error_message());
    assert_int_equal(vkg_tokenizer_vocab_size(t), 50257);
    assert_int_equal(vkg_tokenizer_eot(t), 50256);
    size_t len = 0;
    const char *tok = vkg_tokenizer_token(t, 995, &len); /* " world" */
    assert_int_equal(len, 6);
    assert_memory_equal(tok, " world", 6);
    char path[] = "/tmp/vkg_test_gpt2tok_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(vkg_tokenizer_save(t, path), VKG_OK);
    assert_int_equal(vkg_tokenizer_load(path, &u), VKG_OK);
    assert_int_equal(vkg_tokenizer_kind_of(u), VKG_TOKENIZER_DECODE_ONLY);
    assert_int_equal(vkg_tokenizer_vocab_size(u), 50257);
    assert_int_equal(vkg_tokenizer_eot(u), 50256);
    for (int32_t id = 0; id < 50257; id += 1)
        if (memcmp(vkg_tokenizer_token(t, id, &len), vkg_tokenizer_token(u, id, &len), len))
            fail_msg("token %d differs after a save/load", id);
    vkg_tokens ids = {0};
    assert_int_equal(vkg_tokenizer_encode(u, "x", 1, &ids), VKG_ERR_UNSUPPORTED);
    vkg_tokens_deinit(&ids);
    vkg_tokenizer_destroy(&t);
    vkg_tokenizer_destroy(&u);
    unlink(path);
}

/* ---- JSON reader ---------------------------------------------------------------------------- */

static void test_json(void **state)
{
    (void)state;
    const char *doc = " [\"a\\\"b\\\\\\/\\n\\u00e9\\ud83d\\ude42\", -12 , {}]";
    vkg__json j;
    char *s = NULL;
    size_t len = 0, cap = 0;
    long long v = 0;
    int more;
    vkg__json_init(&j, doc, strlen(doc), "doc.json");
    assert_int_equal(vkg__json_open(&j, '[', &more), VKG_OK);
    assert_int_equal(vkg__json_string(&j, &s, &len, &cap), VKG_OK);
    assert_string_equal(s, "a\"b\\/\n\xc3\xa9\xf0\x9f\x99\x82");
    assert_int_equal(vkg__json_next(&j, ']', &more), VKG_OK);
    assert_int_equal(vkg__json_int(&j, &v), VKG_OK);
    assert_int_equal(v, -12);
    assert_int_equal(vkg__json_next(&j, ']', &more), VKG_OK);
    assert_int_equal(vkg__json_open(&j, '{', &more), VKG_OK);
    assert_int_equal(more, 0);
    assert_int_equal(vkg__json_next(&j, ']', &more), VKG_OK);
    assert_int_equal(more, 0);
    assert_int_equal(vkg__json_end(&j), VKG_OK);

    vkg__json_init(&j, "\"abc", 4, "doc.json");
    assert_int_equal(vkg__json_string(&j, &s, &len, &cap), VKG_ERR_FORMAT);
    assert_msg_has("doc.json", "ends inside a string");
    vkg__json_init(&j, "\"\\ud83d\"", 8, "doc.json");
    assert_int_equal(vkg__json_string(&j, &s, &len, &cap), VKG_ERR_FORMAT);
    assert_msg_has("doc.json", "surrogate");
    vkg__json_init(&j, "1.5", 3, "doc.json");
    assert_int_equal(vkg__json_int(&j, &v), VKG_ERR_FORMAT);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byte_roundtrip),
        cmocka_unit_test(test_byte_file),
        cmocka_unit_test(test_pretokenize),
        cmocka_unit_test(test_bpe_merge_order),
        cmocka_unit_test(test_gpt2_encode_cases),
        cmocka_unit_test(test_gpt2_tokenizer_file),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_untrusted_bytes_escaped),
        cmocka_unit_test(test_encode_cancelled),
    };
    return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
