/* `vkgpt prepare --val-frac` (linked in): the validation split is the fraction, in tokens, of
 * every input file, taken from each file's end. Three byte-level files of 1001, 301 and 51 tokens
 * (end-of-text included) at --val-frac 0.1 give their last 100, 30 and 5 tokens to val_*.bin and
 * the rest, in file order, to train_*.bin, token for token; the printed summary says what went
 * where, per file and in all; --val-frac 0 writes no validation shard. --tokenizer DIR (a Hugging
 * Face tokenizer.json with a begin-of-sequence template) starts each document with its bos and no
 * end-of-text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "testutil.h"
#include "vkgpt/io.h"
#include "vkgpt/status.h"

#define NFILES 3
#define EOT 256

static char root[256];
static const size_t bytes[NFILES] = {1000, 300, 50};

int vkg_cli_report(const char *cmd, vkg_status status)
{
    fprintf(stderr, "vkgpt %s: %s: %s\n", cmd, vkg_status_name(status), vkg_error_message());
    return 1;
}

/* Byte i of file f: printable, different from file to file. */
static char text_byte(int f, size_t i)
{
    return (char)('a' + (int)((i * 7 + (size_t)f * 5) % 26));
}

static int group_setup(void **state)
{
    (void)state;
    return vkg_test_tmp_make(root, sizeof root, "vkg_test_prepare");
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(root);
}

/* Run prepare with args, its stdout captured into *out (malloc'ed). Returns its exit code. */
static int run_prepare(int argc, const char **argv, char **out)
{
    char path[300];
    snprintf(path, sizeof path, "%s/stdout.txt", root);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    int rc = vkg_cli_prepare(argc, (char **)argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    *out = vkg_test_must_read(path, NULL);
#ifdef _WIN32 /* stdout is in text mode there: its line ends are "\r\n" */
    char *w = *out;
    for (const char *r = *out; *r; r++)
        if (*r != '\r')
            *w++ = *r;
    *w = '\0';
#endif
    printf("%s", *out);
    return rc;
}

static void expect_shard(const char *path, const int32_t *want, size_t n)
{
    uint16_t *t = NULL;
    size_t nt = 0;
    assert_int_equal(vkg_shard_read(path, &t, &nt), VKG_OK);
    assert_int_equal(nt, n);
    for (size_t i = 0; i < n; i++)
        if (t[i] != want[i])
            fail_msg("%s: token %zu is %d, expected %d", path, i, t[i], want[i]);
    free(t);
}

static void test_val_from_every_file(void **state)
{
    (void)state;
    char files[NFILES][300], out_dir[300], path[400];
    int32_t *train = malloc(2000 * sizeof *train), *val = malloc(2000 * sizeof *val);
    assert_true(train && val);
    size_t ntrain = 0, nval = 0;
    const size_t keep_val[NFILES] = {100, 30, 5}; /* round(0.1 x 1001, 301, 51) */
    for (int f = 0; f < NFILES; f++) {
        snprintf(files[f], sizeof files[f], "%s/part%d.txt", root, f);
        FILE *fp = fopen(files[f], "wb");
        assert_non_null(fp);
        for (size_t i = 0; i < bytes[f]; i++)
            fputc(text_byte(f, i), fp);
        fclose(fp);
        size_t n = bytes[f] + 1; /* end-of-text, then the bytes */
        for (size_t i = 0; i < n; i++) {
            int32_t tok = i == 0 ? EOT : (unsigned char)text_byte(f, i - 1);
            if (i < n - keep_val[f])
                train[ntrain++] = tok;
            else
                val[nval++] = tok;
        }
    }
    snprintf(out_dir, sizeof out_dir, "%s/out", root);
    const char *argv[] = {"prepare", "--out",  out_dir,  "--val-frac",
                          "0.1",     files[0], files[1], files[2]};
    char *out = NULL;
    assert_int_equal(run_prepare(8, argv, &out), 0);
    snprintf(path, sizeof path, "%s/train_000000.bin", out_dir);
    expect_shard(path, train, ntrain);
    snprintf(path, sizeof path, "%s/val_000000.bin", out_dir);
    expect_shard(path, val, nval);
    char line[400];
    snprintf(line, sizeof line, "%s: 1001 tokens -> train 901, val 100 (its last 10.0%%)\n",
             files[0]);
    assert_non_null(strstr(out, line));
    snprintf(line, sizeof line, "%s: 301 tokens -> train 271, val 30 (its last 10.0%%)\n",
             files[1]);
    assert_non_null(strstr(out, line));
    snprintf(line, sizeof line, "%s: 51 tokens -> train 46, val 5 (its last 9.8%%)\n", files[2]);
    assert_non_null(strstr(out, line));
    assert_non_null(strstr(out, "split: 1218 train, 135 val tokens (9.98% val)\n"));
    free(out);

    /* --val-frac 0: everything trains, no validation shard (a rerun into a fresh folder whose
     * parents are created too). */
    snprintf(out_dir, sizeof out_dir, "%s/new/deeper/all", root);
    const char *none[] = {"prepare", "--out",  out_dir,  "--val-frac",
                          "0",       files[0], files[1], files[2]};
    assert_int_equal(run_prepare(8, none, &out), 0);
    assert_non_null(strstr(out, "split: 1353 train, 0 val tokens (0.00% val)\n"));
    snprintf(path, sizeof path, "%s/val_000000.bin", out_dir);
    assert_int_equal(access(path, F_OK), -1);
    free(out);
    free(train);
    free(val);
}

/* A SentencePiece-style tokenizer.json: a b ab <unk> ▁ ▁ab, <s> (5) as the template's bos. */
static const char HF_JSON[] =
    "{\"added_tokens\": [{\"id\": 5, \"content\": \"<s>\", \"special\": true}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\","
    " \"prepend\": \"\xe2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"},"
    " \"content\": \"\xe2\x96\x81\"}]}, \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\":"
    " {\"id\": \"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\":"
    " {\"ids\": [5]}}}, \"decoder\": null,"
    " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": {\"a\": 0, \"b\": 1,"
    " \"ab\": 2, \"<unk>\": 3, \"</s>\": 4, \"\xe2\x96\x81\": 6, \"\xe2\x96\x81"
    "ab\": 7},"
    " \"merges\": [\"a b\", \"\xe2\x96\x81 ab\"]}}";

static void test_hf_tokenizer_folder(void **state)
{
    (void)state;
    char dir[300], path[400], out_dir[300], a[300], b[300];
    snprintf(dir, sizeof dir, "%s/hf", root);
    snprintf(path, sizeof path, "%s/hf/tokenizer.json", root);
    assert_int_equal(vkg_io_make_dirs(dir), VKG_OK);
    const char *const files[][2] = {{path, HF_JSON},
                                    {NULL, "{\"eos_token\": \"</s>\", \"bos_token\": \"<s>\"}"},
                                    {a, "ab"},
                                    {b, "ba"}};
    char cfg[400];
    snprintf(cfg, sizeof cfg, "%s/hf/tokenizer_config.json", root);
    snprintf(a, sizeof a, "%s/a.txt", root);
    snprintf(b, sizeof b, "%s/b.txt", root);
    for (int i = 0; i < 4; i++) {
        FILE *fp = fopen(files[i][0] ? files[i][0] : cfg, "wb");
        assert_non_null(fp);
        fputs(files[i][1], fp);
        fclose(fp);
    }
    snprintf(out_dir, sizeof out_dir, "%s/hfout", root);
    const char *argv[] = {"prepare", "--out", out_dir, "--val-frac", "0", "--tokenizer", dir, a, b};
    char *out = NULL;
    assert_int_equal(run_prepare(9, argv, &out), 0);
    assert_non_null(strstr(out, "(V=8, end-of-text 4, begin-of-sequence 5)"));
    free(out);
    /* "ab" -> <s> ▁ab; "ba" -> <s> ▁ b a (no merge of ▁ b) */
    snprintf(path, sizeof path, "%s/train_000000.bin", out_dir);
    expect_shard(path, (const int32_t[]){5, 7, 5, 6, 1, 0}, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_val_from_every_file),
        cmocka_unit_test(test_hf_tokenizer_folder),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
