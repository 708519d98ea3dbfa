/* `vkgpt prepare`: text files -> llm.c token shards (train and validation) plus the llm.c
 * tokenizer file that decodes them. Every document is preceded by the end-of-text token, as
 * llm.c's data scripts do; a document is a whole input file, or with --split-on the text between
 * separator lines. The validation part is the requested fraction of every input file's tokens,
 * taken from that file's end (so every file, not only the last ones, is represented in it, and
 * the fraction holds in tokens whatever the tokenizer); what went where is printed per file.
 * Holds the whole encoded corpus in memory; does not download anything. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "vkgpt/data.h"
#include "vkgpt/io.h"
#include "vkgpt/tokenizer.h"

#define CMD "prepare"

typedef struct prepare_opts {
    const char *out_dir;
    const char *tokenizer; /* "byte", "gpt2", or a Hugging Face tokenizer's folder or .json */
    const char *vocab_dir;
    const char *split_on;
    double val_frac;
    uint64_t shard_tokens;
    char **inputs;
    int ninputs;
} prepare_opts;

typedef struct corpus {
    vkg_tokens tokens;
    size_t ndocs;
    uint64_t bytes;
    uint64_t *file_end; /* (ninputs) token index where each input file's tokens end */
} corpus;

#define SPLIT_LINES 20 /* files listed one per line in the split's summary; the rest summed */

/* Entropy in nats of the token frequencies of ids[0..n): the cross-entropy a model reaches by
 * predicting every token with its frequency, the baseline a trained model must beat. */
static double unigram_entropy(const int32_t *ids, uint64_t n, int V)
{
    uint64_t *count = calloc((size_t)V, sizeof *count);
    if (!count || n == 0) {
        free(count);
        return 0.0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < V)
            count[ids[i]]++;
    double h = 0.0;
    for (int v = 0; v < V; v++)
        if (count[v]) {
            double p = (double)count[v] / (double)n;
            h -= p * log(p);
        }
    free(count);
    return h;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int
usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vkgpt " CMD ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see vkgpt prepare --help)\n");
    va_end(ap);
    return 2;
}

/* Parse argv into *o. Returns -1 to go on, else the exit code (0 after --help, 2 on errors). */
static int parse(int argc, char **argv, prepare_opts *o)
{
    o->tokenizer = "byte";
    o->out_dir = "data";
    o->val_frac = 0.1;
    o->shard_tokens = 100000000;
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (!o->inputs)
        return 1;
    const vkg_flag flags[] = {
        {"--out", VKG_FLAG_STR, &o->out_dir,
         "output folder (default: data) for train_*.bin, val_*.bin, tokenizer.bin", 0, 0, 0},
        {"--tokenizer", VKG_FLAG_STR, &o->tokenizer,
         "byte (V=257; the default), gpt2, or a Hugging Face tokenizer: a folder with "
         "tokenizer.json (and tokenizer_config.json), or the tokenizer.json file",
         0, 0, 0},
        {"--vocab-dir", VKG_FLAG_STR, &o->vocab_dir,
         "folder with encoder.json and vocab.bpe (needed for gpt2)", 0, 0, 0},
        {"--val-frac", VKG_FLAG_DOUBLE, &o->val_frac,
         "fraction of tokens for validation, 0 <= F < 1, taken from the end of every input "
         "file (default: 0.1)",
         0, 0, 1},
        {"--split-on", VKG_FLAG_STR, &o->split_on,
         "a line equal to this separates documents (e.g. %); default: one per file", 0, 0, 0},
        {"--shard-tokens", VKG_FLAG_U64, &o->shard_tokens,
         "at most N tokens per shard file (default: 100000000)", 0, 1, INT32_MAX},
    };
    vkg_flags_result r;
    int rc = vkg_flags_parse(
        CMD,
        "[options] TEXT_FILE...\n  Tokenizes text files into llm.c token "
        "shards for `vkgpt train --data`, and writes the\n  llm.c tokenizer "
        "file that decodes them. Each document starts with end-of-text (with a\n  Hugging Face "
        "tokenizer whose post-processor inserts a begin-of-sequence: with that).",
        flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, o->inputs, &r);
    if (rc)
        return rc == VKG_FLAGS_HELP ? 0 : 2;
    o->ninputs = r.npos;
    int named = strcmp(o->tokenizer, "byte") && strcmp(o->tokenizer, "gpt2");
    if (named && vkg_os_exists(o->tokenizer) != 1)
        return usage_error("--tokenizer: '%s' is not one of byte, gpt2, nor a folder holding "
                           "tokenizer.json or a tokenizer.json file",
                           o->tokenizer);
    if (o->val_frac >= 1.0)
        return usage_error("--val-frac must be a number from 0 to 1 (1 excluded), got '%g'",
                           o->val_frac);
    if (o->ninputs == 0)
        return usage_error("no input text files given");
    if (!strcmp(o->tokenizer, "gpt2") && !o->vocab_dir)
        return usage_error("--tokenizer gpt2 needs --vocab-dir DIR (the folder holding "
                           "encoder.json and vocab.bpe)");
    if (strcmp(o->tokenizer, "gpt2") && o->vocab_dir)
        return usage_error("--vocab-dir only applies to --tokenizer gpt2");
    for (int i = 0; i < o->ninputs; i++)
        if (vkg_cli_need_path(CMD, "input", o->inputs[i], 0))
            return 2;
    return vkg_cli_need_path(CMD, "--vocab-dir", o->vocab_dir, 0) ? 2 : -1;
}

/* Append one document: end-of-text, then its encoding (a tokenizer that inserts its own
 * begin-of-sequence gets no end-of-text in front). Empty documents are skipped. */
static vkg_status add_doc(corpus *c, const vkg_tokenizer_t *tok, const char *text, size_t n)
{
    if (n == 0)
        return VKG_OK;
    c->ndocs++;
    vkg_status st =
        vkg_tokenizer_bos(tok) >= 0 ? VKG_OK : vkg_tokens_push(&c->tokens, vkg_tokenizer_eot(tok));
    if (st == VKG_OK)
        st = vkg_tokenizer_encode(tok, text, n, &c->tokens);
    c->bytes += n;
    return st;
}

/* Split text at lines equal to sep (a trailing \r is ignored) and add each document. */
static vkg_status add_split(corpus *c, const vkg_tokenizer_t *tok, const char *text, size_t n,
                            const char *sep)
{
    size_t seplen = strlen(sep), doc = 0, line = 0;
    while (line < n) {
        const char *nl = memchr(text + line, '\n', n - line);
        size_t stop = nl ? (size_t)(nl - text) : n, next = nl ? stop + 1 : n;
        size_t len = stop - line;
        if (len > 0 && text[stop - 1] == '\r')
            len--;
        if (len == seplen && !memcmp(text + line, sep, seplen)) {
            vkg_status st = add_doc(c, tok, text + doc, line - doc);
            if (st != VKG_OK)
                return st;
            doc = next;
        }
        line = next;
    }
    return add_doc(c, tok, text + doc, n - doc);
}

/* Validation tokens of a file of n tokens: round(val_frac * n), the whole file never. */
static uint64_t file_val_tokens(uint64_t n, double val_frac)
{
    uint64_t k = (uint64_t)(val_frac * (double)n + 0.5);
    return k < n ? k : (n ? n - 1 : 0);
}

/* Split c's tokens in place: each file's first tokens stay (moved together at the front, in file
 * order: the train split, *ntrain tokens), its last file_val_tokens go to *val (malloc'ed, in
 * file order, *nval tokens). Prints what went where, per file. VKG_ERR_NOMEM. */
static vkg_status split_files(corpus *c, const prepare_opts *o, int32_t **val, uint64_t *ntrain,
                              uint64_t *nval)
{
    uint64_t total = 0, at = 0, w = 0, v = 0;
    for (int i = 0; i < o->ninputs; i++) {
        total += file_val_tokens(c->file_end[i] - at, o->val_frac);
        at = c->file_end[i];
    }
    *val = malloc((total ? total : 1) * sizeof **val);
    if (!*val)
        return VKG_ERR_NOMEM;
    at = 0;
    for (int i = 0; i < o->ninputs; i++) {
        uint64_t n = c->file_end[i] - at, k = file_val_tokens(n, o->val_frac);
        int32_t *ids = c->tokens.ids;
        memcpy(*val + v, ids + at + n - k, k * sizeof *ids);
        memmove(ids + w, ids + at, (n - k) * sizeof *ids);
        if (i < SPLIT_LINES || i == o->ninputs - 1)
            printf("  %s: %llu tokens -> train %llu, val %llu (its last %.1f%%)\n", o->inputs[i],
                   (unsigned long long)n, (unsigned long long)(n - k), (unsigned long long)k,
                   n ? 100.0 * (double)k / (double)n : 0.0);
        else if (i == SPLIT_LINES)
            printf("  ... %d more file(s), each split the same way\n",
                   o->ninputs - SPLIT_LINES - 1);
        w += n - k, v += k, at = c->file_end[i];
    }
    *ntrain = w, *nval = v;
    return VKG_OK;
}

/* Write ids[lo, hi) as DIR/<kind>_NNNNNN.bin shards; sets *nshards. */
static vkg_status write_shards(const prepare_opts *o, const int32_t *ids, const char *kind,
                               uint64_t lo, uint64_t hi, int *nshards)
{
    size_t cap = (size_t)(hi - lo < o->shard_tokens ? hi - lo : o->shard_tokens);
    uint16_t *buf = malloc((cap ? cap : 1) * sizeof *buf);
    if (!buf)
        return VKG_ERR_NOMEM;
    vkg_status st = VKG_OK;
    char path[4096];
    *nshards = 0;
    for (uint64_t at = lo; at < hi && st == VKG_OK; at += o->shard_tokens) {
        size_t m = (size_t)(hi - at < o->shard_tokens ? hi - at : o->shard_tokens);
        for (size_t i = 0; i < m; i++)
            buf[i] = (uint16_t)ids[at + i];
        snprintf(path, sizeof path, "%s/%s_%06d.bin", o->out_dir, kind, *nshards);
        st = vkg_shard_write(path, buf, m);
        if (st == VKG_OK) {
            printf("wrote %s (%zu tokens)\n", path, m);
            (*nshards)++;
        }
    }
    free(buf);
    return st;
}

/* Refuse to leave shards of an earlier, larger run that a glob would pick up with ours. */
static int check_stale(const prepare_opts *o, const char *kind, int nshards)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%06d.bin", o->out_dir, kind, nshards);
    if (vkg_os_exists(path) == 1) {
        fprintf(stderr,
                "vkgpt " CMD ": %s is left from an earlier run and would be read together with "
                "the new shards; remove it or choose another --out\n",
                path);
        return 1;
    }
    return 0;
}

static int run(const prepare_opts *o)
{
    vkg_tokenizer_t *tok = NULL;
    corpus c = {{0}, 0, 0, NULL};
    int32_t *val = NULL;
    uint64_t cut = 0, nv = 0;
    int rc = 1, ntrain = 0, nval = 0;
    vkg_status st = !strcmp(o->tokenizer, "gpt2")   ? vkg_tokenizer_create_gpt2(o->vocab_dir, &tok)
                    : !strcmp(o->tokenizer, "byte") ? vkg_tokenizer_create_byte(&tok)
                                                    : vkg_tokenizer_load(o->tokenizer, &tok);
    if (st != VKG_OK)
        return vkg_cli_report(CMD, st);
    printf("tokenizer: %s (V=%d, end-of-text %d", o->tokenizer, vkg_tokenizer_vocab_size(tok),
           vkg_tokenizer_eot(tok));
    if (vkg_tokenizer_bos(tok) >= 0)
        printf(", begin-of-sequence %d", vkg_tokenizer_bos(tok));
    printf(")\n");
    c.file_end = calloc((size_t)o->ninputs, sizeof *c.file_end);
    if (!c.file_end) {
        fprintf(stderr, "vkgpt " CMD ": no memory for %d input files\n", o->ninputs);
        goto done;
    }
    for (int i = 0; i < o->ninputs; i++) {
        char *text = NULL;
        size_t n = 0;
        if ((st = vkg_text_read(o->inputs[i], NULL, &text, &n)) != VKG_OK) {
            vkg_cli_report(CMD, st);
            goto done;
        }
        st = o->split_on ? add_split(&c, tok, text, n, o->split_on) : add_doc(&c, tok, text, n);
        c.file_end[i] = c.tokens.n;
        free(text);
        if (st != VKG_OK) {
            vkg_cli_report(CMD, st);
            goto done;
        }
    }
    if (c.tokens.n == 0) {
        fprintf(stderr, "vkgpt " CMD ": the input files hold no text\n");
        goto done;
    }
    if (vkg_io_make_dirs(o->out_dir) != VKG_OK) { /* its missing parents too */
        fprintf(stderr, "vkgpt " CMD ": --out: %s\n", vkg_error_text());
        goto done;
    }
    printf("read %d file(s), %zu document(s), %llu bytes -> %zu tokens; validation: the last "
           "%g%% of each file's tokens\n",
           o->ninputs, c.ndocs, (unsigned long long)c.bytes, c.tokens.n, 100.0 * o->val_frac);
    if (split_files(&c, o, &val, &cut, &nv) != VKG_OK) {
        fprintf(stderr, "vkgpt " CMD ": no memory for the validation split\n");
        goto done;
    }
    printf("split: %llu train, %llu val tokens (%.2f%% val)\n", (unsigned long long)cut,
           (unsigned long long)nv, 100.0 * (double)nv / (double)c.tokens.n);
    printf("unigram entropy of the train split: %.4f nats/token (%.4f bits): the loss of a model "
           "that knows only token frequencies\n",
           unigram_entropy(c.tokens.ids, cut, vkg_tokenizer_vocab_size(tok)),
           unigram_entropy(c.tokens.ids, cut, vkg_tokenizer_vocab_size(tok)) / log(2.0));
    uint64_t train_shards = (cut + o->shard_tokens - 1) / o->shard_tokens;
    uint64_t val_shards = (nv + o->shard_tokens - 1) / o->shard_tokens;
    if (check_stale(o, "train", (int)train_shards) || check_stale(o, "val", (int)val_shards))
        goto done;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.bin", o->out_dir);
    if ((st = write_shards(o, c.tokens.ids, "train", 0, cut, &ntrain)) != VKG_OK ||
        (st = write_shards(o, val, "val", 0, nv, &nval)) != VKG_OK) {
        vkg_cli_report(CMD, st);
        goto done;
    }
    st = vkg_tokenizer_save(tok, path);
    if (st != VKG_OK && vkg_tokenizer_kind_of(tok) == VKG_TOKENIZER_HF) {
        /* llm.c's file holds tokens of 1 to 255 bytes: some vocabularies have others */
        printf("note: %s not written (%s): give train and sample --tokenizer %s\n", path,
               vkg_error_message(), o->tokenizer);
    } else if (st != VKG_OK) {
        vkg_cli_report(CMD, st);
        goto done;
    } else {
        printf("wrote %s\n", path);
    }
    rc = 0;
done:
    vkg_tokens_deinit(&c.tokens);
    free(c.file_end);
    free(val);
    vkg_tokenizer_destroy(&tok);
    return rc;
}

int vkg_cli_prepare(int argc, char **argv)
{
    prepare_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc < 0)
        rc = run(&o);
    free(o.inputs);
    return rc;
}
