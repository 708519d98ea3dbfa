/* Tests of Hugging Face tokenizer.json (src/data/hftok.c, hfenc.c) on small files written here:
 * BPE merges, unk and fuse_unk, byte fallback, added tokens with lstrip/rstrip, the
 * post-processor's begin-of-sequence, the SentencePiece decoder's strip; loading a folder with
 * tokenizer_config.json; and every refusal naming the file and what it refused (another model
 * type, normalizer, pre-tokenizer, decoder, a BPE option, malformed JSON, a merge outside the
 * vocabulary, a bad pattern). Exactness against `tokenizers` itself is tests/hf/hftok_check.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hftok.h"
#include "testutil.h"
#include "vkgpt/tokenizer.h"

#define NAME "dir/tokenizer.json"

/* A SentencePiece-style BPE: a b ab, <unk>, two byte tokens, <s> added, TemplateProcessing. */
#define SP_JSON(normalizer, pretok, decoder, model_extra)                                          \
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,"                              \
    " \"added_tokens\": [{\"id\": 5, \"content\": \"<s>\", \"single_word\": false,"                \
    "   \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true},"          \
    "  {\"id\": 6, \"content\": \"[M]\", \"lstrip\": true, \"rstrip\": true,"                      \
    "   \"normalized\": false, \"special\": true}],"                                               \
    " \"normalizer\": " normalizer ", \"pre_tokenizer\": " pretok ","                              \
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["                        \
    "   {\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\","     \
    "   \"type_id\": 0}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [5],"          \
    "   \"tokens\": [\"<s>\"]}}},"                                                                 \
    " \"decoder\": " decoder ","                                                                   \
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\","                 \
    "   \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, " model_extra           \
    "   \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<unk>\": 3, \"<0x63>\": 4, "                  \
    "\"\xe2\x96\x81\": 7,"                                                                         \
    "     \"\xe2\x96\x81"                                                                          \
    "ab\": 8}, \"merges\": [\"a b\", [\"\xe2\x96\x81\", \"ab\"]]}}"

#define SP_NORM                                                                                    \
    "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "             \
    "\"\xe2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": "   \
    "\"\xe2\x96\x81\"}]}"
#define SP_DEC                                                                                     \
    "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "   \
    "\"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"  \
    " {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}"

static vkg_status parse(const char *json, vkg__hftok **h)
{
    return vkg__hftok_parse(NAME, json, strlen(json), "dir/tokenizer_config.json", NULL, 0, h);
}

static void expect(const vkg__hftok *h, const char *text, const int32_t *want, size_t n)
{
    vkg_tokens got = {0};
    assert_int_equal(vkg__hftok_encode(h, text, strlen(text), NULL, &got), VKG_OK);
    if (got.n != n || memcmp(got.ids, want, n * sizeof *want)) {
        fprintf(stderr, "\"%s\":", text);
        for (size_t i = 0; i < got.n; i++)
            fprintf(stderr, " %d", got.ids[i]);
        fprintf(stderr, "\n");
        fail();
    }
    vkg_tokens_deinit(&got);
}

static void test_sentencepiece_bpe(void **state)
{
    (void)state;
    vkg__hftok *h = NULL;
    assert_int_equal(parse(SP_JSON(SP_NORM, "null", SP_DEC, "\"byte_fallback\": true,"), &h),
                     VKG_OK);
    /* "▁abba" -> ▁ a b b a -> ab first (rank 0), then ▁ab (rank 1) */
    expect(h, "abba", (const int32_t[]){5, 8, 1, 0}, 4);
    /* c falls back to <0x63>; d has no byte token: unk */
    expect(h, "cd", (const int32_t[]){5, 7, 4, 3}, 4);
    /* <s> found in the text; [M] swallows the spaces beside it; each stretch gets its ▁ */
    expect(h, "a<s>b  [M]  ab", (const int32_t[]){5, 7, 0, 5, 7, 1, 6, 8}, 8);
    expect(h, "", (const int32_t[]){5}, 1);
    assert_int_equal(vkg__hftok_bos(h), 5);
    assert_int_equal(vkg__hftok_strip_start(h), 1);
    const vkg_tokfile *tf = vkg__hftok_vocab(h);
    assert_int_equal(tf->vocab_size, 9);
    assert_int_equal(tf->offsets[9] - tf->offsets[8], 3); /* "▁ab" decodes to " ab" */
    assert_memory_equal(tf->bytes + tf->offsets[8], " ab", 3);
    assert_int_equal(tf->bytes[tf->offsets[4]], 'c'); /* <0x63> */
    vkg__hftok_free(h);
    /* fuse_unk: a run of unknown characters is one unk */
    assert_int_equal(parse(SP_JSON(SP_NORM, "null", SP_DEC, "\"fuse_unk\": true,"), &h), VKG_OK);
    expect(h, "xyzab", (const int32_t[]){5, 7, 3, 2}, 4);
    vkg__hftok_free(h);
}

static void test_folder_and_config(void **state)
{
    (void)state;
    char root[512], path[600];
    assert_int_equal(vkg_test_tmp_make(root, sizeof root, "hftok"), 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(SP_JSON(SP_NORM, "null", SP_DEC, ""), f);
    fclose(f);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", root);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"[M]\","
          " \"chat_template\": \"{{ x }}\"}",
          f);
    fclose(f);
    vkg_tokenizer_t *t = NULL;
    assert_int_equal(vkg_tokenizer_load(root, &t), VKG_OK);
    assert_int_equal(vkg_tokenizer_kind_of(t), VKG_TOKENIZER_HF);
    assert_string_equal(vkg_tokenizer_kind_name(VKG_TOKENIZER_HF), "hf");
    assert_int_equal(vkg_tokenizer_eot(t), 6);
    assert_int_equal(vkg_tokenizer_bos(t), 5);
    assert_string_equal(vkg_tokenizer_chat_template(t), "{{ x }}");
    vkg_tokens ids = {0};
    assert_int_equal(vkg_tokenizer_encode(t, "ab ba", 5, &ids), VKG_OK);
    char *text = NULL;
    size_t n = 0;
    /* without the <s>: "▁ab▁ba" decodes to "ab ba", the decoder's Strip taking the first space */
    assert_int_equal(vkg_tokenizer_decode(t, ids.ids + 1, ids.n - 1, &text, &n), VKG_OK);
    assert_string_equal(text, "ab ba");
    free(text);
    vkg_tokens_deinit(&ids);
    vkg_tokenizer_destroy(&t);
    /* an eos_token that is not a token is refused, naming the config */
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\"eos_token\": \"</nope>\"}", f);
    fclose(f);
    assert_int_equal(vkg_tokenizer_load(root, &t), VKG_ERR_FORMAT);
    assert_non_null(strstr(vkg_error_message(), "tokenizer_config.json: eos_token"));
    assert_int_equal(vkg_test_tmp_remove(root), 0);
}

typedef struct refusal {
    const char *json;
    vkg_status st;
    const char *says; /* in the message, after the file's name */
} refusal;

static void test_refusals(void **state)
{
    (void)state;
    static const refusal cases[] = {
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", VKG_ERR_UNSUPPORTED,
         "model.type \"WordPiece\" is not supported"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", VKG_ERR_UNSUPPORTED,
         "model.type \"Unigram\""},
        {SP_JSON("{\"type\": \"NFKC\"}", "null", "null", ""), VKG_ERR_UNSUPPORTED,
         "normalizer \"NFKC\" is not supported"},
        {SP_JSON("null", "{\"type\": \"Whitespace\"}", "null", ""), VKG_ERR_UNSUPPORTED,
         "pre_tokenizer \"Whitespace\" is not supported"},
        {SP_JSON("null",
                 "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": "
                 "\"Isolated\", \"invert\": false}",
                 "null", ""),
         VKG_ERR_FORMAT, "pre_tokenizer pattern \"(a\""},
        {SP_JSON("null",
                 "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": "
                 "\"MergedWithNext\", \"invert\": false}",
                 "null", ""),
         VKG_ERR_UNSUPPORTED, "behavior \"MergedWithNext\""},
        {SP_JSON("null", "null", "{\"type\": \"WordPiece\"}", ""), VKG_ERR_UNSUPPORTED,
         "decoder \"WordPiece\" is not supported"},
        {"{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}, \"merges\": []}}",
         VKG_ERR_UNSUPPORTED, "model.dropout is set"},
        {"{\"model\": {\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\", \"vocab\": {},"
         " \"merges\": []}}",
         VKG_ERR_UNSUPPORTED, "model.continuing_subword_prefix is set"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}",
         VKG_ERR_FORMAT, "model.merges[0]: merge \"ab\" has a part or a result not in"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a  b\"]}}",
         VKG_ERR_FORMAT, "model.merges[0]: expected two tokens"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}", VKG_ERR_FORMAT,
         "model.vocab: expected an object"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
         VKG_ERR_FORMAT, "model.vocab: token \"b\" has no id of its own"},
        {"{\"truncation\": {\"max_length\": 5}, \"model\": {}}", VKG_ERR_UNSUPPORTED,
         "truncation is set"},
        {"{\"added_tokens\": [{\"id\": 0, \"content\": \"x\", \"single_word\": true}],"
         " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         VKG_ERR_UNSUPPORTED, "added_tokens[0].single_word is true"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [", VKG_ERR_FORMAT,
         "truncated"},
        {"[1, 2]", VKG_ERR_FORMAT, "expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkg__hftok *h = (vkg__hftok *)1;
        vkg_status st = parse(cases[i].json, &h);
        const char *msg = vkg_error_message();
        if (st != cases[i].st || h || !strstr(msg, NAME ": ") || !strstr(msg, cases[i].says)) {
            fprintf(stderr, "case %zu: status %d, message \"%s\"; wanted %d with \"%s\"\n", i,
                    (int)st, msg, (int)cases[i].st, cases[i].says);
            fail();
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sentencepiece_bpe),
        cmocka_unit_test(test_folder_and_config),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
