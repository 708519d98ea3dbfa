/* Tests of the data loader: batches follow llm.c's formula within a shard, skip a shard's tail,
 * move on across shard boundaries and wrap at the end; tokens >= vocab are refused with the file
 * and position; shuffling is a seeded permutation and a restored position continues exactly;
 * rank slices are disjoint and cover the global batch; text files are tokenized with an
 * end-of-text separator; `vkgpt prepare` (linked in) splits documents and shards as it says;
 * FIFOs, devices and folders are refused without reading, binary data given as text is refused
 * by the loader and by prepare with the same message, and loading stops when cancelled.
 * Shard tokens encode their own position so every batch is checked
 * against a formula computed here, independently of the loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/file.h"
#include "cli/cli.h"
#include "vkgpt/data.h"
#include "vkgpt/io.h"

#define VOCAB 60000

typedef struct fixture {
    char dir[64];
    char path[256];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/vkg_test_data_XXXXXX");
    if (vkg_os_mkdtemp(f->dir) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    DIR *d = opendir(f->dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(f->dir);
    free(f);
    return 0;
}

static const char *fpath(void **state, const char *name)
{
    fixture *f = *state;
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    return f->path;
}

/* Token j of shard s: distinct across shards and positions, below VOCAB. */
static uint16_t tok(int s, uint64_t j)
{
    return (uint16_t)((uint64_t)s * 10007u + j * 3u) % VOCAB;
}

static void write_shard(void **state, const char *name, int s, size_t ntok)
{
    uint16_t *t = malloc((ntok ? ntok : 1) * sizeof *t);
    for (size_t j = 0; j < ntok; j++)
        t[j] = tok(s, j);
    assert_int_equal(vkg_shard_write(fpath(state, name), t, ntok), VKG_OK);
    free(t);
}

static vkg_data_config cfg_for(void **state, const char *pattern, int B, int T)
{
    vkg_data_config c = vkg_data_config_default();
    c.path = fpath(state, pattern);
    c.batch_size = B;
    c.seq_len = T;
    c.vocab_size = VOCAB;
    return c;
}

/* The batch must be llm.c's tokens [start, start + BT + 1) of shard s. */
static void expect_batch(const int32_t *in, const int32_t *tg, int bt, int s, uint64_t start)
{
    for (int i = 0; i < bt; i++) {
        if (in[i] != tok(s, start + (uint64_t)i) || tg[i] != tok(s, start + (uint64_t)i + 1)) {
            fprintf(stderr, "batch element %d: got (%d, %d), want shard %d tokens %llu, %llu\n", i,
                    in[i], tg[i], s, (unsigned long long)(start + (uint64_t)i),
                    (unsigned long long)(start + (uint64_t)i + 1));
            fail();
        }
    }
}

static void assert_msg_has(const char *a, const char *b)
{
    const char *msg = vkg_error_message();
    if (!strstr(msg, a) || (b && !strstr(msg, b))) {
        fprintf(stderr, "error message \"%s\" lacks \"%s\" / \"%s\"\n", msg, a, b ? b : "");
        fail();
    }
}

static void test_sequential_one_shard(void **state)
{
    int32_t in[16], tg[16];
    vkg_data_t *d = NULL;
    vkg_data_pos pos;
    write_shard(state, "a.bin", 0, 5 * 16 + 1); /* exactly 5 batches of B*T = 16, +1 target */
    vkg_data_config c = cfg_for(state, "a.bin", 2, 8);
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_int_equal(vkg_data_num_batches(d), 5);
    assert_int_equal(vkg_data_num_tokens(d), 81);
    for (int i = 0; i < 5; i++) { /* batch i = tokens [i*B*T, i*B*T + B*T + 1) */
        assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
        expect_batch(in, tg, 16, 0, (uint64_t)i * 16);
    }
    vkg_data_position(d, &pos);
    assert_int_equal(pos.epoch, 0);
    assert_int_equal(pos.batch, 5);
    assert_int_equal(vkg_data_next(d, in, tg), VKG_OK); /* wraps to batch 0 */
    expect_batch(in, tg, 16, 0, 0);
    vkg_data_position(d, &pos);
    assert_int_equal(pos.epoch, 1);
    assert_int_equal(pos.batch, 1);
    vkg_data_destroy(&d);
    assert_null(d);

    write_shard(state, "a.bin", 0, 5 * 16); /* one token short of 5: only 4 batches */
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_int_equal(vkg_data_num_batches(d), 4);
    vkg_data_destroy(&d);
}

static void test_shard_boundaries(void **state)
{
    int32_t in[16], tg[16];
    vkg_data_t *d = NULL;
    /* glob order is by name: s0, s1, s2 */
    write_shard(state, "s1.bin", 1, 40); /* 39/16 = 2 batches */
    write_shard(state, "s0.bin", 0, 50); /* 49/16 = 3 batches, tokens 49.. never read */
    write_shard(state, "s2.bin", 2, 33); /* 32/16 = 2 batches, the last ends on its last token */
    vkg_data_config c = cfg_for(state, "s*.bin", 1, 16);
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_int_equal(vkg_data_num_files(d), 3);
    assert_int_equal(vkg_data_num_batches(d), 7);
    static const int want_shard[] = {0, 0, 0, 1, 1, 2, 2, 0, 0};
    static const int want_k[] = {0, 1, 2, 0, 1, 0, 1, 0, 1};
    for (int i = 0; i < 9; i++) {
        assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
        expect_batch(in, tg, 16, want_shard[i], (uint64_t)want_k[i] * 16);
    }
    /* random access agrees with the sequential order */
    assert_int_equal(vkg_data_read_batch(d, 4, in, tg), VKG_OK);
    expect_batch(in, tg, 16, 1, 16);
    assert_int_equal(vkg_data_read_batch(d, 7, in, tg), VKG_ERR_INVALID_ARG);
    vkg_data_destroy(&d);
}

static void test_token_out_of_range(void **state)
{
    uint16_t t[100];
    int32_t in[16], tg[16];
    vkg_data_t *d = NULL;
    vkg_data_pos pos;
    for (int j = 0; j < 100; j++)
        t[j] = (uint16_t)j;
    t[37] = VOCAB; /* first token that is not below the vocabulary */
    t[90] = VOCAB + 5;
    assert_int_equal(vkg_shard_write(fpath(state, "bad.bin"), t, 100), VKG_OK);
    vkg_data_config c = cfg_for(state, "bad.bin", 1, 16);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_null(d);
    assert_msg_has("bad.bin: token 60000 at position 37", "vocabulary size 60000");

    c.scan_tokens = 0; /* found when the batch holding it is read, position unchanged */
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
    assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
    assert_int_equal(vkg_data_next(d, in, tg), VKG_ERR_FORMAT); /* tokens 32..48 */
    assert_msg_has("bad.bin: token 60000 at position 37", NULL);
    vkg_data_position(d, &pos);
    assert_int_equal(pos.batch, 2);
    vkg_data_destroy(&d);
}

static void test_bad_inputs(void **state)
{
    vkg_data_t *d = NULL;
    vkg_data_config c = cfg_for(state, "none*.bin", 1, 16);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_NOT_FOUND);
    assert_msg_has("none*.bin", NULL);
    c = cfg_for(state, "missing.bin", 1, 16);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_NOT_FOUND);
    assert_msg_has("missing.bin: no such file", NULL);

    write_shard(state, "short.bin", 0, 16); /* needs 17 */
    c = cfg_for(state, "short.bin", 1, 16);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_msg_has("short.bin: holds 16 tokens", "B*T*W + 1 = 17");

    write_shard(state, "trunc.bin", 0, 100);
    assert_int_equal(truncate(fpath(state, "trunc.bin"), 1024 + 150), 0);
    c = cfg_for(state, "trunc.bin", 1, 16);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_msg_has("trunc.bin: header says ntok=100", "50 bytes fewer");

    FILE *f = fopen(fpath(state, "foreign.bin"), "wb");
    int32_t hdr[256] = {1234, 1, 10};
    fwrite(hdr, 4, 256, f);
    fwrite(hdr, 2, 10, f);
    fclose(f);
    c = cfg_for(state, "foreign.bin", 1, 4);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_msg_has("foreign.bin", "bad magic 1234, expected 20240520");

    write_shard(state, "ok.bin", 0, 100);
    c = cfg_for(state, "ok.bin", 1, 16);
    c.rank = 2;
    c.world_size = 2;
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_INVALID_ARG);
    c.rank = 0;
    c.world_size = 1;
    c.path = fpath(state, "text.txt");
    f = fopen(c.path, "wb");
    fputs("some text that is long enough to fill a batch or two of tokens", f);
    fclose(f);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_INVALID_ARG); /* text, no tokenizer */
    assert_msg_has("text.txt", "no tokenizer");
}

/* Index of the global batch whose inputs are `in`, found by reading every batch. */
static int64_t which_batch(vkg_data_t *d, const int32_t *in, int bt)
{
    int32_t a[64], b[64];
    for (uint64_t g = 0; g < vkg_data_num_batches(d); g++) {
        assert_int_equal(vkg_data_read_batch(d, g, a, b), VKG_OK);
        if (!memcmp(a, in, (size_t)bt * sizeof *in))
            return (int64_t)g;
    }
    return -1;
}

static void test_shuffle_and_resume(void **state)
{
    int32_t in[16], tg[16];
    vkg_data_t *d = NULL, *e = NULL;
    vkg_data_pos pos;
    write_shard(state, "s0.bin", 0, 50);
    write_shard(state, "s1.bin", 1, 40);
    write_shard(state, "s2.bin", 2, 33);
    vkg_data_config c = cfg_for(state, "s*.bin", 1, 16);
    c.shuffle = 1;
    c.seed = 5;
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    int64_t order[3][7];
    for (int ep = 0; ep < 3; ep++) {
        int seen[7] = {0};
        for (int i = 0; i < 7; i++) {
            assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
            order[ep][i] = which_batch(d, in, 16);
            assert_true(order[ep][i] >= 0 && order[ep][i] < 7);
            seen[order[ep][i]]++;
        }
        for (int g = 0; g < 7; g++) /* each epoch is a permutation of the 7 batches */
            assert_int_equal(seen[g], 1);
    }
    assert_true(memcmp(order[0], order[1], sizeof order[0]) != 0 ||
                memcmp(order[1], order[2], sizeof order[0]) != 0); /* reshuffled per epoch */
    int64_t identity[7] = {0, 1, 2, 3, 4, 5, 6};
    assert_true(memcmp(order[0], identity, sizeof identity) != 0 ||
                memcmp(order[1], identity, sizeof identity) != 0);

    /* resume mid-epoch-1: a fresh loader seeked to the position continues identically */
    vkg_data_reset(d);
    for (int i = 0; i < 10; i++)
        assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
    vkg_data_position(d, &pos);
    assert_int_equal(pos.epoch, 1);
    assert_int_equal(pos.batch, 3);
    int32_t want[12][16];
    for (int i = 0; i < 12; i++) {
        assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
        memcpy(want[i], in, sizeof in);
    }
    assert_int_equal(vkg_data_create(&c, &e), VKG_OK);
    assert_int_equal(vkg_data_seek(e, &pos), VKG_OK);
    for (int i = 0; i < 12; i++) {
        assert_int_equal(vkg_data_next(e, in, tg), VKG_OK);
        assert_memory_equal(in, want[i], sizeof in);
    }
    vkg_data_destroy(&e);

    /* a position from another configuration is refused */
    c.seed = 6;
    assert_int_equal(vkg_data_create(&c, &e), VKG_OK);
    assert_int_equal(vkg_data_seek(e, &pos), VKG_ERR_MISMATCH);
    assert_msg_has("seed 5", NULL);
    vkg_data_destroy(&e);
    c.shuffle = 0;
    c.batch_size = 2;
    assert_int_equal(vkg_data_create(&c, &e), VKG_OK);
    pos.shuffle = 0;
    pos.seed = 0;
    assert_int_equal(vkg_data_seek(e, &pos), VKG_ERR_MISMATCH);
    assert_msg_has("batches per epoch", NULL);
    vkg_data_destroy(&e);
    vkg_data_destroy(&d);
}

static void test_sequential_resume(void **state)
{
    int32_t in[8], tg[8], in2[8], tg2[8];
    vkg_data_t *d = NULL, *e = NULL;
    vkg_data_pos pos;
    write_shard(state, "a.bin", 0, 300);
    vkg_data_config c = cfg_for(state, "a.bin", 2, 4);
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_int_equal(vkg_data_create(&c, &e), VKG_OK);
    for (int i = 0; i < 40; i++) /* past the end of the 37 batches */
        assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
    vkg_data_position(d, &pos);
    assert_int_equal(vkg_data_seek(e, &pos), VKG_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
        assert_int_equal(vkg_data_next(e, in2, tg2), VKG_OK);
        assert_memory_equal(in, in2, sizeof in);
        assert_memory_equal(tg, tg2, sizeof tg);
        expect_batch(in, tg, 8, 0, (uint64_t)(40 - 37 + i) * 8);
    }
    vkg_data_destroy(&d);
    vkg_data_destroy(&e);
}

static void test_rank_split(void **state)
{
    enum { W = 3, B = 2, T = 4, BT = B * T };
    int32_t in[W][BT], tg[W][BT], gin[W * BT], gtg[W * BT];
    vkg_data_t *r[W], *global = NULL;
    write_shard(state, "a.bin", 0, 200); /* 199 / 24 = 8 global batches */
    write_shard(state, "b.bin", 1, 60);  /* 59 / 24 = 2 */
    vkg_data_config c = cfg_for(state, "*.bin", B, T);
    c.world_size = W;
    for (int k = 0; k < W; k++) {
        c.rank = k;
        assert_int_equal(vkg_data_create(&c, &r[k]), VKG_OK);
        assert_int_equal(vkg_data_num_batches(r[k]), 10);
    }
    c = cfg_for(state, "*.bin", W * B, T); /* one rank reading the whole global batch */
    assert_int_equal(vkg_data_create(&c, &global), VKG_OK);
    assert_int_equal(vkg_data_num_batches(global), 10);
    for (int g = 0; g < 11; g++) {
        assert_int_equal(vkg_data_next(global, gin, gtg), VKG_OK);
        for (int k = 0; k < W; k++) {
            assert_int_equal(vkg_data_next(r[k], in[k], tg[k]), VKG_OK);
            /* rank k's slice is the k-th B*T block of the global batch */
            assert_memory_equal(in[k], gin + k * BT, sizeof in[k]);
            assert_memory_equal(tg[k], gtg + k * BT, sizeof tg[k]);
        }
        int shard = g % 10 < 8 ? 0 : 1, kk = g % 10 < 8 ? g % 10 : g % 10 - 8;
        expect_batch(gin, gtg, W * BT, shard, (uint64_t)kk * W * BT);
    }
    for (int k = 0; k < W; k++)
        vkg_data_destroy(&r[k]);
    vkg_data_destroy(&global);
}

/* The checksum depends on the tokens and their order only: not on B, T, rank or world size; one
 * changed token, or the same shards in another order, change it. */
static void test_checksum(void **state)
{
    write_shard(state, "a.bin", 0, 200);
    write_shard(state, "b.bin", 1, 60);
    vkg_data_t *d = NULL;
    vkg_data_config c = cfg_for(state, "*.bin", 2, 4);
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    uint64_t base = vkg_data_checksum(d);
    vkg_data_destroy(&d);
    c = cfg_for(state, "*.bin", 3, 5);
    c.world_size = 2, c.rank = 1;
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_true(vkg_data_checksum(d) == base);
    vkg_data_destroy(&d);

    uint16_t t[200];
    for (int j = 0; j < 200; j++)
        t[j] = tok(0, (uint64_t)j);
    t[137] = (uint16_t)((t[137] + 1) % VOCAB);
    assert_int_equal(vkg_shard_write(fpath(state, "a.bin"), t, 200), VKG_OK);
    c = cfg_for(state, "*.bin", 2, 4);
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_true(vkg_data_checksum(d) != base);
    vkg_data_destroy(&d);

    write_shard(state, "a.bin", 1, 60); /* the two shards swapped */
    write_shard(state, "b.bin", 0, 200);
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    assert_true(vkg_data_checksum(d) != base);
    vkg_data_destroy(&d);
}

static void test_text_files(void **state)
{
    vkg_tokenizer_t *tok = NULL;
    vkg_data_t *d = NULL;
    int32_t in[8], tg[8];
    assert_int_equal(vkg_tokenizer_create_byte(&tok), VKG_OK);
    FILE *f = fopen(fpath(state, "1.txt"), "wb");
    fputs("abcdefghij", f);
    fclose(f);
    f = fopen(fpath(state, "2.txt"), "wb");
    fputs("KLMNOPQ", f);
    fclose(f);
    vkg_data_config c = cfg_for(state, "*.txt", 1, 8);
    c.vocab_size = 257;
    c.tokenizer = tok;
    assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
    /* one source: <eot> abcdefghij <eot> KLMNOPQ = 19 tokens, (19-1)/8 = 2 batches */
    assert_int_equal(vkg_data_num_tokens(d), 19);
    assert_int_equal(vkg_data_num_batches(d), 2);
    assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
    const int32_t want_in0[8] = {256, 'a', 'b', 'c', 'd', 'e', 'f', 'g'};
    assert_memory_equal(in, want_in0, sizeof want_in0);
    assert_int_equal(tg[7], 'h');
    assert_int_equal(vkg_data_next(d, in, tg), VKG_OK);
    const int32_t want_in1[8] = {'h', 'i', 'j', 256, 'K', 'L', 'M', 'N'};
    assert_memory_equal(in, want_in1, sizeof want_in1);
    assert_int_equal(tg[7], 'O');
    vkg_data_destroy(&d);

    c.vocab_size = 128; /* the end-of-text token 256 itself is out of range */
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_msg_has("1.txt: token 256 at position 0", NULL);
    vkg_tokenizer_destroy(&tok);
}

#ifndef _WIN32 /* Windows has no FIFOs and no /dev/zero */
/* Text input that is a FIFO, a device or a folder is refused at once, naming it; so is a shard
 * that is not a regular file. alarm() turns a hang (a FIFO without a writer) into a failure. */
static void test_non_regular_inputs(void **state)
{
    vkg_tokenizer_t *tok = NULL;
    vkg_data_t *d = NULL;
    char fifo[256], fifo_bin[256], dir[256];
    assert_int_equal(vkg_tokenizer_create_byte(&tok), VKG_OK);
    snprintf(fifo, sizeof fifo, "%s", fpath(state, "pipe.txt"));
    snprintf(fifo_bin, sizeof fifo_bin, "%s", fpath(state, "pipe.bin"));
    snprintf(dir, sizeof dir, "%s", fpath(state, "folder.txt"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkfifo(fifo_bin, 0600), 0);
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *paths[] = {fifo, "/dev/zero", dir, fifo_bin};
    const char *kinds[] = {"is a FIFO", "is a character device", "is a directory", "is a FIFO"};
    alarm(20);
    for (int i = 0; i < 4; i++) {
        vkg_data_config c = cfg_for(state, "x", 1, 4);
        c.path = paths[i];
        c.vocab_size = 257;
        c.tokenizer = tok;
        assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_IO);
        assert_null(d);
        assert_msg_has(paths[i], kinds[i]);
    }
    alarm(0);
    rmdir(dir);
    vkg_tokenizer_destroy(&tok);
}
#endif

static int cancel_calls, cancel_at;

/* Stops on its cancel_at-th call; never when cancel_at is 0. */
static int cancel_on_call(void *ctx)
{
    (void)ctx;
    return ++cancel_calls == cancel_at;
}

/* The loader asks its cancellation between files and between the chunks it reads, scans and
 * tokenizes: stopping at any of those points ends vkg_data_create with the file named. */
static void test_load_cancelled(void **state)
{
    vkg_tokenizer_t *tok = NULL;
    vkg_data_t *d = NULL;
    assert_int_equal(vkg_tokenizer_create_byte(&tok), VKG_OK);
    size_t n = 3 * ((size_t)1 << 20) + 10;
    char *text = malloc(n);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        text[i] = (char)('a' + i % 26);
    FILE *f = fopen(fpath(state, "big.txt"), "wb");
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
    free(text);
    write_shard(state, "big.bin", 0, 200000); /* four scan chunks */
    const char *names[] = {"big.txt", "big.bin"};
    for (int k = 0; k < 2; k++) {
        vkg_data_config c = cfg_for(state, names[k], 4, 64);
        c.vocab_size = k ? VOCAB : 257;
        c.tokenizer = tok;
        c.cancel = (vkg_cancel){cancel_on_call, NULL};
        cancel_calls = 0, cancel_at = 0;
        assert_int_equal(vkg_data_create(&c, &d), VKG_OK);
        vkg_data_destroy(&d);
        int total = cancel_calls;
        assert_true(total >= (k ? 5 : 8)); /* not only once per file */
        for (cancel_at = 1; cancel_at <= total; cancel_at++) {
            cancel_calls = 0;
            assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_ABORTED);
            assert_null(d);
            assert_int_equal(cancel_calls, cancel_at);
            assert_msg_has("interrupted while loading", names[k]);
        }
    }
    vkg_tokenizer_destroy(&tok);
}

/* cmd_prepare.c is linked into this test; main.c's reporter is replaced by this one. */
int vkg_cli_report(const char *cmd, vkg_status status)
{
    fprintf(stderr, "vkgpt %s: %s: %s\n", cmd, vkg_status_name(status), vkg_error_message());
    return 1;
}

static int run_prepare(int argc, const char **argv)
{
    return vkg_cli_prepare(argc, (char **)argv);
}

/* Binary data given as text is refused by the loader and by `vkgpt prepare`, with one message;
 * a large file of zeros is refused from its first chunk. */
static void test_binary_text(void **state)
{
    fixture *fx = *state;
    vkg_tokenizer_t *tok = NULL;
    vkg_data_t *d = NULL;
    char path[256], out[256], loader_msg[1024];
    assert_int_equal(vkg_tokenizer_create_byte(&tok), VKG_OK);
    snprintf(path, sizeof path, "%s/garbage.dat", fx->dir);
    snprintf(out, sizeof out, "%s/out", fx->dir);
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 4096; i++)
        fputc(i == 1000 ? 0 : 1 + (i * 7919) % 255, f);
    fclose(f);
    vkg_data_config c = cfg_for(state, "garbage.dat", 1, 4);
    c.vocab_size = 257;
    c.tokenizer = tok;
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_msg_has("garbage.dat looks binary (a NUL byte at offset 1000)", NULL);
    snprintf(loader_msg, sizeof loader_msg, "%s", vkg_error_message());
    const char *argv[] = {"prepare", "--out", out, path};
    assert_int_equal(run_prepare(4, argv), 1);
    assert_string_equal(vkg_error_message(), loader_msg);
    assert_int_equal(access(out, F_OK), -1); /* nothing written */

    assert_int_equal(truncate(path, 0), 0); /* sparse: 64 MiB of zeros, read no further than 1 */
    assert_int_equal(truncate(path, 64 << 20), 0);
    assert_int_equal(vkg_data_create(&c, &d), VKG_ERR_FORMAT);
    assert_msg_has("garbage.dat looks binary (a NUL byte at offset 0)", NULL);
    assert_int_equal(run_prepare(4, argv), 1);
    assert_msg_has("garbage.dat looks binary (a NUL byte at offset 0)", NULL);
    unlink(path);
    vkg_tokenizer_destroy(&tok);
}

static void test_prepare(void **state)
{
    fixture *fx = *state;
    char text_path[256], out[256], path[300];
    snprintf(text_path, sizeof text_path, "%s/fortunes", fx->dir);
    snprintf(out, sizeof out, "%s/out", fx->dir);
    FILE *f = fopen(text_path, "wb");
    fputs("first\n%\nsecond one\r\n%\r\n\n%\nthird, the last\n", f);
    fclose(f);
    const char *argv[] = {"prepare", "--out",          out,  "--split-on", "%", "--val-frac",
                          "0.3",     "--shard-tokens", "20", text_path};
    assert_int_equal(run_prepare(10, argv), 0);
    /* documents "first\n", "second one\r\n", "\n", "third, the last\n", each after <eot> */
    static const char *docs[] = {"first\n", "second one\r\n", "\n", "third, the last\n"};
    int32_t want[64];
    size_t n = 0;
    for (int d = 0; d < 4; d++) {
        want[n++] = 256;
        for (const char *c = docs[d]; *c; c++)
            want[n++] = (unsigned char)*c;
    }
    assert_int_equal(n, 39);
    /* 30% of the file's 39 tokens, 11.7, rounds to its last 12 (the cut falls inside the last
     * document: the fraction is kept in tokens, not moved to a document boundary) */
    uint16_t *t = NULL;
    size_t nt = 0, got = 0;
    const char *names[] = {"train_000000.bin", "train_000001.bin", "val_000000.bin"};
    const size_t sizes[] = {20, 7, 12};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", out, names[k]);
        assert_int_equal(vkg_shard_read(path, &t, &nt), VKG_OK);
        assert_int_equal(nt, sizes[k]);
        for (size_t i = 0; i < nt; i++)
            assert_int_equal(t[i], want[got + i]);
        got += nt;
        free(t);
    }
    snprintf(path, sizeof path, "%s/train_000002.bin", out);
    assert_int_equal(access(path, F_OK), -1);
    vkg_tokenizer_t *tok = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.bin", out);
    assert_int_equal(vkg_tokenizer_load(path, &tok), VKG_OK);
    assert_int_equal(vkg_tokenizer_kind_of(tok), VKG_TOKENIZER_BYTE);
    vkg_tokenizer_destroy(&tok);

    /* a smaller rerun into the same folder would leave train_000001.bin behind: refused */
    const char *rerun[] = {"prepare", "--out", out, "--shard-tokens", "100", text_path};
    assert_int_equal(run_prepare(6, rerun), 1);
    /* usage errors exit 2 */
    const char *bad1[] = {"prepare", "--tokenizer", "bpe", text_path};
    assert_int_equal(run_prepare(4, bad1), 2);
    const char *bad2[] = {"prepare", "--val-frac", "1", text_path};
    assert_int_equal(run_prepare(4, bad2), 2);
    const char *bad3[] = {"prepare", "--tokenizer", "gpt2", text_path};
    assert_int_equal(run_prepare(4, bad3), 2);
    const char *bad4[] = {"prepare", "--out", out};
    assert_int_equal(run_prepare(3, bad4), 2);
    /* so is an input that does not exist; one that exists but is binary fails while running */
    const char *missing[] = {"prepare", "--out", out, "no_such_file.txt"};
    assert_int_equal(run_prepare(4, missing), 2);
    snprintf(path, sizeof path, "%s/binary.dat", fx->dir);
    f = fopen(path, "wb");
    fwrite("ab\0cd", 1, 5, f);
    fclose(f);
    const char *binary[] = {"prepare", "--out", out, path};
    assert_int_equal(run_prepare(4, binary), 1);
    unlink(path);
    for (int k = 0; k < 3; k++) { /* leave the folder empty for teardown */
        snprintf(path, sizeof path, "%s/%s", out, names[k]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/tokenizer.bin", out);
    unlink(path);
    rmdir(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sequential_one_shard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shard_boundaries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_out_of_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shuffle_and_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sequential_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rank_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checksum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prepare, setup, teardown),
#ifndef _WIN32
        cmocka_unit_test_setup_teardown(test_non_regular_inputs, setup, teardown),
#endif
        cmocka_unit_test_setup_teardown(test_load_cancelled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_text, setup, teardown),
    };
    return cmocka_run_group_tests_name("data", tests, NULL, NULL);
}
