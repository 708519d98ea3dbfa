/* The C side of tests/hf/hftok_check.py: vkgpt's Hugging Face tokenizers (src/data/hftok.c,
 * hfenc.c) on files `tokenizers` wrote.
 *   hftok_tool info DIR              print V, end-of-text, begin-of-sequence, kind and whether a
 *                                    chat template was read
 *   hftok_tool encode DIR TEXT OUT   encode each NUL-separated document of TEXT on its own and
 *                                    write, per document, its count and its ids to OUT (int32)
 *   hftok_tool decode DIR IDS OUT    decode the ids in IDS (int32), write the bytes to OUT
 * Exit 0 on success; a message and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkgpt/tokenizer.h"

static int fail(const char *what, vkg_status st)
{
    fprintf(stderr, "hftok_tool: %s: %s: %s\n", what, vkg_status_name(st), vkg_error_message());
    return 1;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)size + 1);
    *n = p ? fread(p, 1, (size_t)size, f) : 0;
    fclose(f);
    return p;
}

static int spill(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f)
        ok &= fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "hftok_tool: cannot write %s\n", path);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "info") && argc < 5)) {
        fprintf(stderr, "usage: hftok_tool info DIR | encode DIR TEXT OUT | decode DIR IDS OUT\n");
        return 2;
    }
    vkg_tokenizer_t *t = NULL;
    vkg_status st = vkg_tokenizer_load(argv[2], &t);
    if (st != VKG_OK)
        return fail(argv[2], st);
    int rc = 0;
    if (!strcmp(argv[1], "info")) {
        printf("V=%d eot=%d bos=%d kind=%s chat_template=%d\n", vkg_tokenizer_vocab_size(t),
               vkg_tokenizer_eot(t), vkg_tokenizer_bos(t),
               vkg_tokenizer_kind_name(vkg_tokenizer_kind_of(t)),
               vkg_tokenizer_chat_template(t) != NULL);
    } else {
        size_t n = 0;
        char *in = slurp(argv[3], &n);
        if (!in) {
            fprintf(stderr, "hftok_tool: cannot read %s\n", argv[3]);
            rc = 1;
        } else if (!strcmp(argv[1], "encode")) {
            vkg_tokens ids = {0};
            for (size_t a = 0, b; st == VKG_OK && a <= n; a = b + 1) {
                for (b = a; b < n && in[b]; b++)
                    ;
                size_t at = ids.n;
                st = vkg_tokens_push(&ids, 0);
                if (st == VKG_OK)
                    st = vkg_tokenizer_encode(t, in + a, b - a, &ids);
                if (st == VKG_OK)
                    ids.ids[at] = (int32_t)(ids.n - at - 1);
            }
            rc = st != VKG_OK ? fail("encode", st)
                              : spill(argv[4], ids.ids, ids.n * sizeof *ids.ids);
            vkg_tokens_deinit(&ids);
        } else {
            char *text = NULL;
            size_t len = 0;
            st = vkg_tokenizer_decode(t, (const int32_t *)in, n / sizeof(int32_t), &text, &len);
            rc = st != VKG_OK ? fail("decode", st) : spill(argv[4], text, len);
            free(text);
        }
        free(in);
    }
    vkg_tokenizer_destroy(&t);
    return rc;
}
