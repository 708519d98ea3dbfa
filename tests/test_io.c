/* Tests of src/io: round trips of the four llm.c formats, bf16 conversion, refusal of truncated,
 * foreign and inconsistent files (with the file named in the message), refusal of FIFOs, devices
 * and folders without blocking or reading them, and the crash-safe writer leaving the old file
 * intact when a write fails. Each test works in its own temporary folder. */
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
#include "testutil.h"
#include "vkgpt/data.h"
#include "vkgpt/io.h"

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct tmpdir {
    char dir[64];
    char path[256];
} tmpdir;

static int make_tmpdir(void **state)
{
    tmpdir *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    snprintf(t->dir, sizeof t->dir, "/tmp/vkg_test_io_XXXXXX");
    if (vkg_os_mkdtemp(t->dir) != 0) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static int remove_tmpdir(void **state)
{
    tmpdir *t = *state;
    DIR *d = opendir(t->dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", t->dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(t->dir);
    free(t);
    return 0;
}

static const char *tpath(void **state, const char *name)
{
    tmpdir *t = *state;
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
    return t->path;
}

/* The recorded error message must contain every given fragment. */
static void assert_msg_has(const char *a, const char *b)
{
    const char *msg = vkg_error_message();
    if (!strstr(msg, a) || (b && !strstr(msg, b))) {
        fprintf(stderr, "error message \"%s\" lacks \"%s\"%s%s%s\n", msg, a, b ? " or \"" : "",
                b ? b : "", b ? "\"" : "");
        fail();
    }
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void patch_i32(const char *path, long offset, int32_t v)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    assert_int_equal(fwrite(&v, 4, 1, f), 1);
    fclose(f);
}

static void chop(const char *path, long nbytes)
{
    assert_int_equal(truncate(path, file_size(path) - nbytes), 0);
}

static void append_bytes(const char *path, int n)
{
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fputc(0, f);
    fclose(f);
}

static void write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static vkg_model_config small_cfg(void)
{
    vkg_model_config c = {.max_seq_len = 8,
                          .vocab_size = 50,
                          .padded_vocab_size = 64,
                          .num_layers = 2,
                          .num_heads = 2,
                          .channels = 8};
    return c;
}

static float *random_params(size_t n, uint64_t seed)
{
    vkg_test_rng r;
    vkg_test_rng_seed(&r, seed);
    float *p = vkg_test_alloc(n);
    vkg_test_fill_uniform(&r, p, n, -2.0f, 2.0f);
    return p;
}

/* ---- model file ----------------------------------------------------------------------------- */

static void test_model_roundtrip(void **state)
{
    const char *path = tpath(state, "model.bin");
    vkg_model_config cfg = small_cfg(), got;
    size_t n = vkg_model_num_params(&cfg);
    float *p = random_params(n, 1), *q = NULL;
    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    assert_int_equal(file_size(path), 1024 + 4 * (long)n);
    int version = 0;
    assert_int_equal(vkg_modelfile_read_header(path, &got, &version), VKG_OK);
    assert_int_equal(version, 3);
    assert_memory_equal(&got, &cfg, sizeof cfg);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_OK);
    assert_memory_equal(q, p, n * sizeof *p);
    /* header fields at llm.c's positions */
    FILE *f = fopen(path, "rb");
    int32_t hdr[8];
    assert_int_equal(fread(hdr, 4, 8, f), 8);
    fclose(f);
    int32_t want[8] = {20240326, 3, 8, 50, 2, 2, 8, 64};
    assert_memory_equal(hdr, want, sizeof want);
    /* a buffer one float too small is refused */
    assert_int_equal(vkg_modelfile_read_into(path, &got, q, n - 1), VKG_ERR_INVALID_ARG);
    free(p);
    free(q);
}

static void test_bf16_conversion(void **state)
{
    (void)state;
    assert_int_equal(vkg_f32_to_bf16(1.0f), 0x3F80);
    assert_true(vkg_bf16_to_f32(0x3F80) == 1.0f);
    assert_true(vkg_bf16_to_f32(0xC040) == -3.0f);
    float f;
    uint32_t u = 0x3F808000u; /* exactly halfway between 0x3F80 and 0x3F81: ties to even */
    memcpy(&f, &u, 4);
    assert_int_equal(vkg_f32_to_bf16(f), 0x3F80);
    u = 0x3F818000u; /* halfway between 0x3F81 and 0x3F82: even is 0x3F82 */
    memcpy(&f, &u, 4);
    assert_int_equal(vkg_f32_to_bf16(f), 0x3F82);
    u = 0x3F808001u; /* just above halfway rounds up */
    memcpy(&f, &u, 4);
    assert_int_equal(vkg_f32_to_bf16(f), 0x3F81);
    u = 0x7FC00001u; /* NaN stays NaN */
    memcpy(&f, &u, 4);
    float back = vkg_bf16_to_f32(vkg_f32_to_bf16(f));
    assert_true(back != back);
}

/* A version-5 file built byte by byte here (not by the library) loads as the widened values. */
static void test_model_bf16_load(void **state)
{
    const char *path = tpath(state, "model_bf16.bin");
    vkg_model_config cfg = small_cfg(), got;
    size_t n = vkg_model_num_params(&cfg);
    float *p = random_params(n, 2), *q = NULL;
    size_t bytes = 1024 + 2 * n;
    unsigned char *raw = calloc(1, bytes);
    int32_t hdr[8] = {20240326, 5, 8, 50, 2, 2, 8, 64};
    memcpy(raw, hdr, sizeof hdr);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        uint16_t h = (uint16_t)(u >> 16); /* truncation: exact widening expected below */
        raw[1024 + 2 * i] = (unsigned char)(h & 0xff);
        raw[1024 + 2 * i + 1] = (unsigned char)(h >> 8);
        u &= 0xffff0000u;
        memcpy(&p[i], &u, 4);
    }
    write_raw(path, raw, bytes);
    int version = 0;
    assert_int_equal(vkg_modelfile_read_header(path, &got, &version), VKG_OK);
    assert_int_equal(version, 5);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_OK);
    assert_memory_equal(q, p, n * sizeof *p);
    free(q);
    /* two stray bytes after the bf16 parameters are a size mismatch */
    append_bytes(path, 2);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_null(q);
    assert_msg_has("model_bf16.bin", "2 bytes more");
    free(raw);
    free(p);
}

static void test_model_refusals(void **state)
{
    const char *path = tpath(state, "model.bin");
    vkg_model_config cfg = small_cfg(), got;
    size_t n = vkg_model_num_params(&cfg);
    float *p = random_params(n, 3), *q = NULL;

    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    chop(path, 12);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_null(q);
    assert_msg_has("model.bin: header says", "C=8");
    assert_msg_has("12 bytes fewer than expected", NULL);

    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    append_bytes(path, 4);
    assert_int_equal(vkg_modelfile_read_header(path, &got, NULL), VKG_ERR_FORMAT);
    assert_msg_has("model.bin", "4 bytes more");

    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    patch_i32(path, 0, 1234);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_msg_has("model.bin", "bad magic 1234, expected 20240326");

    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    patch_i32(path, 4, 4);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_msg_has("model.bin", "version 4");

    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    patch_i32(path, 5 * 4, 3); /* NH = 3 does not divide C = 8 */
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_msg_has("model.bin", "divisible by num_heads");

    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    patch_i32(path, 6 * 4, 1 << 30); /* huge C: refused, not allocated */
    patch_i32(path, 5 * 4, 1);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_msg_has("model.bin", NULL);

    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(vkg_modelfile_read(path, &got, &q), VKG_ERR_FORMAT);
    assert_msg_has("model.bin", "too short");

    assert_int_equal(vkg_modelfile_read(tpath(state, "missing.bin"), &got, &q), VKG_ERR_IO);
    assert_msg_has("missing.bin", "cannot open");

    cfg.num_heads = 3;
    assert_int_equal(vkg_modelfile_write(tpath(state, "bad.bin"), &cfg, p), VKG_ERR_INVALID_ARG);
    assert_int_equal(file_size(tpath(state, "bad.bin")), -1);
    free(p);
}

/* ---- debug state ---------------------------------------------------------------------------- */

static void test_debugstate(void **state)
{
    const char *path = tpath(state, "state.bin");
    vkg_model_config cfg = small_cfg();
    vkg_debug_state st = {0}, got = {0};
    vkg_test_rng r;
    vkg_test_rng_seed(&r, 4);
    st.batch_size = 2;
    st.seq_len = 3;
    st.vocab_size = cfg.vocab_size;
    st.num_params = vkg_model_num_params(&cfg);
    st.x = calloc(6, 4);
    st.y = calloc(6, 4);
    vkg_test_fill_int(&r, st.x, 6, 50);
    vkg_test_fill_int(&r, st.y, 6, 50);
    st.logits = random_params(6 * 50, 5);
    st.grads = random_params(st.num_params, 6);
    st.loss = 3.9f;
    assert_int_equal(vkg_debugstate_write(path, &cfg, &st), VKG_OK);
    /* V (not Vp) logit columns, as llm.c writes them */
    assert_int_equal(file_size(path), 1024 + 4 * (2 * 6 + 6 * 50 + 1 + (long)st.num_params));
    assert_int_equal(vkg_debugstate_read(path, &cfg, &got), VKG_OK);
    assert_int_equal(got.batch_size, 2);
    assert_int_equal(got.seq_len, 3);
    assert_memory_equal(got.x, st.x, 6 * 4);
    assert_memory_equal(got.y, st.y, 6 * 4);
    assert_memory_equal(got.logits, st.logits, 6 * 50 * 4);
    assert_memory_equal(got.grads, st.grads, st.num_params * 4);
    assert_true(got.loss == 3.9f);
    vkg_debugstate_deinit(&got);
    assert_null(got.x);

    chop(path, 4);
    assert_int_equal(vkg_debugstate_read(path, &cfg, &got), VKG_ERR_FORMAT);
    assert_msg_has("state.bin: header says B=2 T=3", "4 bytes fewer");
    assert_null(got.grads);

    assert_int_equal(vkg_debugstate_write(path, &cfg, &st), VKG_OK);
    patch_i32(path, 4, 1);
    assert_int_equal(vkg_debugstate_read(path, &cfg, &got), VKG_ERR_FORMAT);
    assert_msg_has("state.bin", "version 1");

    /* a model file is not a debug state */
    float *p = random_params(st.num_params, 7);
    assert_int_equal(vkg_modelfile_write(path, &cfg, p), VKG_OK);
    assert_int_equal(vkg_debugstate_read(path, &cfg, &got), VKG_ERR_FORMAT);
    assert_msg_has("state.bin", "bad magic 20240326, expected 20240327");

    st.vocab_size = 64; /* Vp instead of V: refused */
    assert_int_equal(vkg_debugstate_write(path, &cfg, &st), VKG_ERR_INVALID_ARG);
    st.vocab_size = 50;
    free(p);
    vkg_debugstate_deinit(&st);
}

/* ---- tokenizer file ------------------------------------------------------------------------- */

static void test_tokfile(void **state)
{
    const char *path = tpath(state, "tok.bin");
    static const char *words[] = {"a", "bc", "<|endoftext|>", "\xe2\x80\x94", " the"};
    vkg_tokfile tf = {0}, got = {0};
    tf.vocab_size = 5;
    tf.eot_token = 2;
    tf.offsets = calloc(6, sizeof *tf.offsets);
    tf.bytes = calloc(64, 1);
    for (int i = 0; i < 5; i++) {
        size_t len = strlen(words[i]);
        memcpy(tf.bytes + tf.offsets[i], words[i], len);
        tf.offsets[i + 1] = tf.offsets[i] + len;
    }
    assert_int_equal(vkg_tokfile_write(path, &tf), VKG_OK);
    assert_int_equal(file_size(path), 1024 + 5 + (long)tf.offsets[5]);
    assert_int_equal(vkg_tokfile_read(path, &got), VKG_OK);
    assert_int_equal(got.vocab_size, 5);
    assert_int_equal(got.eot_token, 2);
    assert_memory_equal(got.offsets, tf.offsets, 6 * sizeof *tf.offsets);
    assert_memory_equal(got.bytes, tf.bytes, tf.offsets[5]);
    vkg_tokfile_deinit(&got);

    chop(path, 2); /* cuts into the last token */
    assert_int_equal(vkg_tokfile_read(path, &got), VKG_ERR_FORMAT);
    assert_msg_has("tok.bin", "token 4 declares 4 bytes but only 2 remain");
    chop(path, 3); /* the last token's length byte is gone too */
    assert_int_equal(vkg_tokfile_read(path, &got), VKG_ERR_FORMAT);
    assert_msg_has("tok.bin", "after 4 of the 5 tokens");

    assert_int_equal(vkg_tokfile_write(path, &tf), VKG_OK);
    append_bytes(path, 3);
    assert_int_equal(vkg_tokfile_read(path, &got), VKG_ERR_FORMAT);
    assert_msg_has("tok.bin", "3 unexpected bytes");

    assert_int_equal(vkg_tokfile_write(path, &tf), VKG_OK);
    patch_i32(path, 12, 5); /* eot = V */
    assert_int_equal(vkg_tokfile_read(path, &got), VKG_ERR_FORMAT);
    assert_msg_has("tok.bin", "end-of-text token 5");
    /* a vocabulary the body cannot hold is refused before any allocation for it (a 1 KB file
     * declaring 2^24 tokens made the reader allocate 128 MiB of offsets first) */
    patch_i32(path, 12, 2);
    patch_i32(path, 8, 1 << 24);
    assert_int_equal(vkg_tokfile_read(path, &got), VKG_ERR_FORMAT);
    assert_msg_has("tok.bin", "declares 16777216 tokens but only 28 bytes follow it");

    tf.offsets[1] = 0; /* zero-length token 0 cannot be written */
    assert_int_equal(vkg_tokfile_write(path, &tf), VKG_ERR_INVALID_ARG);
    assert_msg_has("token 0", NULL);
    vkg_tokfile_deinit(&tf);
}

/* ---- token shards --------------------------------------------------------------------------- */

static void test_shard(void **state)
{
    const char *path = tpath(state, "shard.bin");
    uint16_t tok[1000], *got = NULL;
    for (int i = 0; i < 1000; i++)
        tok[i] = (uint16_t)(i * 65 + 7);
    size_t n = 0;
    assert_int_equal(vkg_shard_write(path, tok, 1000), VKG_OK);
    assert_int_equal(file_size(path), 1024 + 2000);
    assert_int_equal(vkg_shard_read_header(path, &n), VKG_OK);
    assert_int_equal(n, 1000);
    assert_int_equal(vkg_shard_read(path, &got, &n), VKG_OK);
    assert_memory_equal(got, tok, sizeof tok);
    free(got);

    chop(path, 2);
    assert_int_equal(vkg_shard_read(path, &got, &n), VKG_ERR_FORMAT);
    assert_null(got);
    assert_msg_has("shard.bin: header says ntok=1000", "2 bytes fewer");

    assert_int_equal(vkg_shard_write(path, tok, 1000), VKG_OK);
    patch_i32(path, 0, 1234);
    assert_int_equal(vkg_shard_read_header(path, &n), VKG_ERR_FORMAT);
    assert_msg_has("shard.bin", "bad magic 1234, expected 20240520");

    assert_int_equal(vkg_shard_write(path, tok, 1000), VKG_OK);
    patch_i32(path, 4, 2);
    assert_int_equal(vkg_shard_read_header(path, &n), VKG_ERR_FORMAT);
    assert_msg_has("shard.bin", "version 2");

    assert_int_equal(vkg_shard_write(path, tok, 0), VKG_OK); /* an empty shard is well-formed */
    assert_int_equal(vkg_shard_read(path, &got, &n), VKG_OK);
    assert_int_equal(n, 0);
    free(got);
}

/* ---- crash-safe writer ---------------------------------------------------------------------- */

typedef struct fail_ctx {
    int calls;
} fail_ctx;

/* Writes part of a payload, then fails as a full disk would. */
static vkg_status failing_payload(FILE *f, void *ctx)
{
    ((fail_ctx *)ctx)->calls++;
    fputs("NEW PARTIAL CONTENT", f);
    return VKG_ERR_IO;
}

static vkg_status good_payload(FILE *f, void *ctx)
{
    (void)ctx;
    return vkg_io_write_bytes(f, "new", 3);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void test_atomic_write(void **state)
{
    tmpdir *t = *state;
    const char *path = tpath(state, "target.txt");
    char buf[16] = {0};
    write_raw(path, "old", 3);
    fail_ctx fc = {0};
    assert_int_equal(vkg_io_write_atomic(path, failing_payload, &fc), VKG_ERR_IO);
    assert_int_equal(fc.calls, 1);
    assert_msg_has("target.txt", NULL);
    /* the old file is intact and no temporary file is left behind */
    FILE *f = fopen(path, "rb");
    assert_int_equal(fread(buf, 1, sizeof buf, f), 3);
    fclose(f);
    assert_string_equal(buf, "old");
    assert_int_equal(count_entries(t->dir), 1);

    /* a full device: the payload write itself fails, the old file survives */
    if (access("/dev/full", W_OK) == 0) {
        FILE *full = fopen("/dev/full", "wb");
        char big[8192];
        memset(big, 'x', sizeof big);
        setvbuf(full, NULL, _IONBF, 0);
        assert_int_equal(vkg_io_write_bytes(full, big, sizeof big), VKG_ERR_IO);
        assert_msg_has("short write", NULL);
        fclose(full);
    }

    mode_t old = umask(022);
    assert_int_equal(vkg_io_write_atomic(path, good_payload, NULL), VKG_OK);
    umask(old);
    memset(buf, 0, sizeof buf);
    f = fopen(path, "rb");
    assert_int_equal(fread(buf, 1, sizeof buf, f), 3);
    fclose(f);
    assert_string_equal(buf, "new");
#ifndef _WIN32 /* Windows has no permission bits of this kind */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
#endif
    assert_int_equal(count_entries(t->dir), 1);

    assert_int_equal(vkg_io_write_atomic(tpath(state, "nodir/x.bin"), good_payload, NULL),
                     VKG_ERR_IO);
    assert_msg_has("nodir/x.bin", "temporary file");
}

#ifndef _WIN32 /* Windows has no FIFOs and no /dev/zero */
/* Every reader refuses what is not a regular file, naming it and what it is, at once: a FIFO
 * without a writer would block an open for reading forever, /dev/zero never ends. alarm() turns
 * a hang into a failure. */
static void test_non_regular_files(void **state)
{
    char fifo[256], dir[256];
    snprintf(fifo, sizeof fifo, "%s", tpath(state, "fifo"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(dir, sizeof dir, "%s", tpath(state, "dir.bin"));
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *paths[] = {fifo, "/dev/zero", dir};
    const char *kinds[] = {"is a FIFO", "is a character device", "is a directory"};
    alarm(20);
    for (int i = 0; i < 3; i++) {
        vkg_model_config cfg;
        vkg_tokfile tf;
        size_t ntok;
        char *text = NULL;
        size_t n = 0;
        int version;
        assert_int_equal(vkg_modelfile_read_header(paths[i], &cfg, &version), VKG_ERR_IO);
        assert_msg_has(paths[i], kinds[i]);
        assert_int_equal(vkg_tokfile_read(paths[i], &tf), VKG_ERR_IO);
        assert_msg_has(paths[i], kinds[i]);
        assert_int_equal(vkg_shard_read_header(paths[i], &ntok), VKG_ERR_IO);
        assert_msg_has(paths[i], kinds[i]);
        assert_int_equal(vkg_text_read(paths[i], NULL, &text, &n), VKG_ERR_IO);
        assert_msg_has(paths[i], kinds[i]);
        assert_null(text);
    }
    alarm(0);
    rmdir(dir);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_model_roundtrip, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_bf16_conversion, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_model_bf16_load, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_model_refusals, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_debugstate, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_tokfile, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_shard, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_atomic_write, make_tmpdir, remove_tmpdir),
#ifndef _WIN32
        cmocka_unit_test_setup_teardown(test_non_regular_files, make_tmpdir, remove_tmpdir),
#endif
    };
    return cmocka_run_group_tests_name("io", tests, NULL, NULL);
}
