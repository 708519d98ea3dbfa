/* Tests of src/io's safetensors files: bitwise round trips of F32, BF16 and F16 tensors of ranks
 * 0-4 (and raw integer tensors), fp32 -> bf16/f16 rounding to nearest even (f16 exhaustively),
 * the refusal of every malformed header with a message naming the file and the tensor or field,
 * the writer's refusals (leaving no file), and the sharded index. Portable C: the files are
 * written with stdio in a folder of vkg_test_tmp_make.
 *
 * With arguments it is the C side of tests/hf/safetensors_check.py, which checks vkgpt against
 * the safetensors library itself:
 *   test_safetensors write FILE   write the fixed set of tensors the script expects
 *   test_safetensors dump FILE    print what vkgpt reads from FILE (exit 1 with the message when
 *                                 it refuses it): "M <key hex> <value hex>" per metadata entry,
 *                                 then "T <name hex> <dtype> <shape,...|-> <raw hex|-> <fp32
 * hex|->" per tensor in data order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "vkgpt/io.h"

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct tmpdir {
    char dir[512];
    char path[640];
} tmpdir;

static int make_tmpdir(void **state)
{
    tmpdir *t = calloc(1, sizeof *t);
    if (!t || vkg_test_tmp_make(t->dir, sizeof t->dir, "vkg_test_st") != 0) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static int remove_tmpdir(void **state)
{
    tmpdir *t = *state;
    vkg_test_tmp_remove(t->dir);
    free(t);
    return 0;
}

static const char *tpath(void **state, const char *name)
{
    tmpdir *t = *state;
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
    return t->path;
}

/* The recorded error message must contain a (and b when given). */
static void assert_msg_has(const char *a, const char *b)
{
    const char *msg = vkg_error_message();
    if (!strstr(msg, a) || (b && !strstr(msg, b))) {
        fprintf(stderr, "error message \"%s\" lacks \"%s\"%s%s%s\n", msg, a, b ? " or \"" : "",
                b ? b : "", b ? "\"" : "");
        fail();
    }
}

/* Write a safetensors file by hand: the header size (header_size, or strlen(header) when it is
 * UINT64_MAX), the header text, then ndata bytes of data (value i & 0xff). */
static void write_raw(const char *path, uint64_t header_size, const char *header, size_t ndata)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t n = header_size == UINT64_MAX ? strlen(header) : header_size;
    unsigned char le[8];
    for (int b = 0; b < 8; b++)
        le[b] = (unsigned char)(n >> (8 * b));
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fwrite(header, 1, strlen(header), f), strlen(header));
    for (size_t i = 0; i < ndata; i++)
        assert_int_equal(fputc((int)(i & 0xff), f), (int)(i & 0xff));
    assert_int_equal(fclose(f), 0);
}

static int file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- round trips ---------------------------------------------------------------------------- */

/* Tensors of ranks 0-4 in each float dtype, given as raw bits, read back bitwise (raw) and
 * converted to fp32 exactly; offsets, header padding and metadata as written. */
static void test_round_trip(void **state)
{
    const char *path = tpath(state, "rt.safetensors");
    static const int64_t shapes[5][4] = {{0}, {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
    const vkg_st_dtype types[3] = {VKG_ST_F32, VKG_ST_BF16, VKG_ST_F16};
    vkg_st_tensor t[20];
    char names[20][32];
    void *bufs[20];
    vkg_test_rng rng;
    vkg_test_rng_seed(&rng, 38);
    int n = 0;
    for (int d = 0; d < 3; d++)
        for (int r = 0; r <= 4; r++, n++) {
            memset(&t[n], 0, sizeof t[n]);
            snprintf(names[n], sizeof names[n], "layer.%d.%s", r, vkg_st_dtype_name(types[d]));
            t[n].name = names[n];
            t[n].dtype = types[d];
            t[n].rank = r;
            size_t numel = 1;
            for (int k = 0; k < r; k++) {
                t[n].shape[k] = shapes[r][k];
                numel *= (size_t)shapes[r][k];
            }
            size_t es = vkg_st_dtype_size(types[d]);
            unsigned char *b = malloc(numel * es);
            assert_non_null(b);
            for (size_t i = 0; i < numel; i++) {
                uint64_t x = vkg_test_rng_u64(&rng);
                if (es == 4) {
                    uint32_t u = (uint32_t)x;
                    memcpy(b + 4 * i, &u, 4);
                } else {
                    uint16_t h = (uint16_t)x;
                    memcpy(b + 2 * i, &h, 2);
                }
            }
            bufs[n] = b;
            t[n].data = b;
        }
    /* an empty tensor in the middle, and an integer one */
    memset(&t[n], 0, sizeof t[n]);
    t[n] = (vkg_st_tensor){.name = "empty", .dtype = VKG_ST_F32, .rank = 2, .shape = {0, 4}};
    static const float none[1] = {0};
    t[n].f32 = none;
    bufs[n++] = NULL;
    static const int64_t ints[3] = {1, -2, INT64_MAX};
    t[n] = (vkg_st_tensor){.name = "ids", .dtype = VKG_ST_I64, .rank = 1, .shape = {3}};
    t[n].data = ints;
    bufs[n++] = NULL;
    const char *meta[4] = {"format", "pt", "note", "a \"quoted\" \xc3\xbc"};
    assert_int_equal(vkg_safetensors_write(path, t, n, meta, 2), VKG_OK);

    vkg_safetensors *s = NULL;
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_OK);
    assert_int_equal(vkg_safetensors_count(s), n);
    assert_string_equal(vkg_safetensors_metadata(s, "format"), "pt");
    assert_string_equal(vkg_safetensors_metadata(s, "note"), meta[3]);
    assert_null(vkg_safetensors_metadata(s, "absent"));
    assert_int_equal(vkg_safetensors_metadata_count(s), 2);
    uint64_t first = vkg_safetensors_info(s, 0)->offset;
    assert_int_equal(first % 8, 0); /* the header is padded to a multiple of 8 */
    uint64_t at = first;
    for (int i = 0; i < n; i++) {
        const vkg_st_info *in = vkg_safetensors_info(s, i); /* data order = the order given */
        assert_string_equal(in->name, t[i].name);
        assert_ptr_equal(vkg_safetensors_find(s, t[i].name), in);
        assert_int_equal(in->dtype, t[i].dtype);
        assert_int_equal(in->rank, t[i].rank);
        for (int k = 0; k < in->rank; k++)
            assert_int_equal(in->shape[k], t[i].shape[k]);
        assert_int_equal(in->offset, at);
        at += in->nbytes;
        unsigned char *raw = malloc(in->nbytes + 1);
        float *f = malloc((in->numel + 1) * sizeof *f);
        assert_non_null(raw);
        assert_non_null(f);
        assert_int_equal(vkg_safetensors_read_raw(s, in->name, raw, in->nbytes), VKG_OK);
        if (t[i].data)
            assert_memory_equal(raw, t[i].data, in->nbytes);
        if (in->dtype <= VKG_ST_F16) {
            assert_int_equal(vkg_safetensors_read_f32(s, in->name, f, in->numel), VKG_OK);
            for (uint64_t e = 0; e < in->numel; e++) {
                uint32_t want;
                if (in->dtype == VKG_ST_F32)
                    memcpy(&want, raw + 4 * e, 4);
                else {
                    uint16_t h;
                    memcpy(&h, raw + 2 * e, 2);
                    want =
                        f32_bits(in->dtype == VKG_ST_BF16 ? vkg_bf16_to_f32(h) : vkg_f16_to_f32(h));
                }
                assert_int_equal(f32_bits(f[e]), want);
            }
        }
        free(raw);
        free(f);
    }
    vkg_safetensors_close(&s);
    assert_null(s);
    vkg_safetensors_close(&s); /* NULL-safe */
    for (int i = 0; i < n; i++)
        free(bufs[i]);
}

/* fp32 given to the writer is rounded to nearest even: bf16 and f16 ties, and f16 exhaustively
 * (every finite f16 round-trips, and every midpoint between neighbours goes to the even one). */
static void test_rounding(void **state)
{
    /* bf16: 1 + 2^-8 is a tie between 1 (even) and 1 + 2^-7; 1 + 3*2^-8 goes up to even. */
    assert_int_equal(vkg_f32_to_bf16(bits_f32(0x3f808000u)), 0x3f80);
    assert_int_equal(vkg_f32_to_bf16(bits_f32(0x3f818000u)), 0x3f82);
    assert_int_equal(vkg_f32_to_bf16(bits_f32(0x3f808001u)), 0x3f81);
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = vkg_f16_to_f32((uint16_t)h);
        if (f != f) { /* NaN stays NaN */
            uint16_t back = vkg_f32_to_f16(f);
            assert_true((back & 0x7c00u) == 0x7c00u && (back & 0x3ffu));
            continue;
        }
        assert_int_equal(vkg_f32_to_f16(f), h);
        if ((h & 0x7fffu) >= 0x7c00u) /* infinity: no neighbour above */
            continue;
        float g = vkg_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)f + (double)g) / 2); /* exact in fp32 */
        if ((h & 0x7fffu) == 0x7bffu) /* 65504 and 65520: ties to "even" infinity */
            assert_int_equal(vkg_f32_to_f16(mid), h + 1);
        else
            assert_int_equal(vkg_f32_to_f16(mid), (h & 1u) ? h + 1 : h);
    }
    assert_int_equal(vkg_f32_to_f16(1e9f), 0x7c00);
    assert_int_equal(vkg_f32_to_f16(bits_f32(0x33000000u)), 0x0000); /* 2^-25: tie to 0 */
    assert_int_equal(vkg_f32_to_f16(bits_f32(0x33000001u)), 0x0001);

    /* and through the writer */
    const char *path = tpath(state, "round.safetensors");
    const float x[3] = {bits_f32(0x3f808000u), bits_f32(0x3f818000u), 65519.0f};
    vkg_st_tensor t[2] = {{.name = "b", .dtype = VKG_ST_BF16, .rank = 1, .shape = {3}, .f32 = x},
                          {.name = "h", .dtype = VKG_ST_F16, .rank = 1, .shape = {3}, .f32 = x}};
    assert_int_equal(vkg_safetensors_write(path, t, 2, NULL, 0), VKG_OK);
    vkg_safetensors *s = NULL;
    uint16_t raw[3];
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_OK);
    assert_int_equal(vkg_safetensors_read_raw(s, "b", raw, sizeof raw), VKG_OK);
    assert_int_equal(raw[0], 0x3f80);
    assert_int_equal(raw[1], 0x3f82);
    assert_int_equal(vkg_safetensors_read_raw(s, "h", raw, sizeof raw), VKG_OK);
    assert_int_equal(raw[0], 0x3c04); /* 1 + 2^-8 is exact in f16 */
    assert_int_equal(raw[2], 0x7bff);
    vkg_safetensors_close(&s);
}

/* ---- refusals ------------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *header;
    size_t ndata;
    const char *says;  /* a fragment of the message */
    const char *names; /* the tensor or field it must name */
} bad_case;

/* Every malformed file is refused with VKG_ERR_FORMAT naming the file and what is wrong. */
static void test_refusals(void **state)
{
    static const bad_case cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],", 8, "ends", NULL},
        {"[1]", 0, "'{'", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "unexpected",
         NULL},
        {"{\"a\":{\"dtype\":\"F128\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "negative",
         "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
         "overflows", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8,
         "overflows", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "need 8", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "end before",
         "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "[begin, end]",
         "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "overlapping", "'b'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "no tensor covers",
         NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 6, "truncated", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "twice", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "\"shape\"", "'a'"},
        {"{\"a\":[1]}", 0, "not a JSON object", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "not an array",
         "\"shape\""},
        {"{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "not a string", "'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         "twice", "dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "more than 8", "shape"},
        {"{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4]}}",
         4, "not a string", "\"k\""},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "twice", "\"k\""},
        {"{\"__metadata__\":[]}", 0, "neither an object nor null", NULL},
        {"{\"__metadata__\":nil}", 0, "byte", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, "negative",
         "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "leading zero",
         "shape"},
        {"{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, "dtype", "'a'"},
        {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "NUL",
         NULL},
        {"{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "UTF-8", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":[1.5,{\"y\":nul}]}}",
         4, "byte", NULL},
    };
    const char *path = tpath(state, "bad.safetensors");
    vkg_safetensors *s = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, UINT64_MAX, cases[i].header, cases[i].ndata);
        vkg_status st = vkg_safetensors_open(path, &s);
        if (st != VKG_ERR_FORMAT)
            fprintf(stderr, "case %zu (%s) gave %d: %s\n", i, cases[i].header, (int)st,
                    vkg_error_message());
        assert_int_equal(st, VKG_ERR_FORMAT);
        assert_null(s);
        assert_msg_has(path, cases[i].says);
        if (cases[i].names)
            assert_msg_has(cases[i].names, NULL);
    }
    /* sizes: too short for the size, a header larger than the cap or than the file (a lying
     * header must be refused before anything of its size is allocated) */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("\x02\0\0", 1, 3, f), 3);
    fclose(f);
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_ERR_FORMAT);
    assert_msg_has(path, "too short");
    write_raw(path, 100000001, "{}", 0);
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_ERR_FORMAT);
    assert_msg_has(path, "limit");
    write_raw(path, UINT64_MAX - 1, "{}", 0);
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_ERR_FORMAT);
    assert_msg_has(path, "limit");
    write_raw(path, 99999999, "{}", 0);
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_ERR_FORMAT);
    assert_msg_has(path, "only 2 bytes follow");
    assert_int_equal(vkg_safetensors_open(tpath(state, "absent"), &s), VKG_ERR_IO);

    /* accepted: unknown fields skipped, trailing spaces, an empty file of tensors */
    path = tpath(state, "ok.safetensors");
    write_raw(path, UINT64_MAX,
              "{\"a\":{\"x\":[1.5e3,{\"y\":null,\"z\":true}],\"dtype\":\"BF16\",\"shape\":[2],"
              "\"data_offsets\":[0,4]},\"__metadata__\":null}   ",
              4);
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_OK);
    float v[2];
    assert_int_equal(vkg_safetensors_read_f32(s, "a", v, 2), VKG_OK);
    assert_int_equal(f32_bits(v[0]), 0x01000000u);
    assert_int_equal(vkg_safetensors_read_f32(s, "b", v, 2), VKG_ERR_NOT_FOUND);
    assert_msg_has(path, "'b'");
    assert_int_equal(vkg_safetensors_read_f32(s, "a", v, 1), VKG_ERR_INVALID_ARG);
    assert_msg_has(path, "room for 1");
    vkg_safetensors_close(&s);
    write_raw(path, UINT64_MAX, "{\"i\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}",
              4);
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_OK);
    assert_int_equal(vkg_safetensors_read_f32(s, "i", v, 2), VKG_ERR_UNSUPPORTED);
    assert_msg_has(path, "I32");
    vkg_safetensors_close(&s);
}

/* The writer refuses bad calls, naming the tensor, and leaves no file behind. */
static void test_write_refusals(void **state)
{
    const char *path = tpath(state, "w.safetensors");
    const float x[2] = {1, 2};
    const int32_t ints[2] = {1, 2};
    static const struct {
        vkg_st_tensor t[2];
        int n;
        const char *says;
    } cases[] = {
        {{{.name = "a", .dtype = VKG_ST_F32, .rank = 1, .shape = {2}},
          {.name = "a", .dtype = VKG_ST_F32, .rank = 1, .shape = {2}}},
         2,
         "'a' given twice"},
        {{{.name = "__metadata__", .dtype = VKG_ST_F32, .rank = 1, .shape = {2}}}, 1, "reserved"},
        {{{.name = "a", .dtype = VKG_ST_F32, .rank = 1, .shape = {-2}}}, 1, "negative"},
        {{{.name = "a", .dtype = VKG_ST_F32, .rank = 9, .shape = {2}}}, 1, "rank 9"},
        {{{.name = "a", .dtype = VKG_ST_I32, .rank = 1, .shape = {2}}}, 1, "convert"},
        {{{.name = "a", .dtype = (vkg_st_dtype)99, .rank = 1, .shape = {2}}}, 1, "dtype"},
        {{{.name = "\xc3", .dtype = VKG_ST_F32, .rank = 1, .shape = {2}}}, 1, "UTF-8"},
        {{{.name = "a", .dtype = VKG_ST_F32, .rank = 2, .shape = {INT64_MAX, 2}}}, 1, "overflow"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkg_st_tensor t[2];
        memcpy(t, cases[i].t, sizeof t);
        for (int k = 0; k < cases[i].n; k++)
            t[k].f32 = x;
        assert_int_equal(vkg_safetensors_write(path, t, cases[i].n, NULL, 0), VKG_ERR_INVALID_ARG);
        assert_msg_has(path, cases[i].says);
        assert_false(file_exists(path));
    }
    vkg_st_tensor both = {.name = "a", .dtype = VKG_ST_I32, .rank = 1, .shape = {2}};
    both.data = ints;
    both.f32 = x;
    assert_int_equal(vkg_safetensors_write(path, &both, 1, NULL, 0), VKG_ERR_INVALID_ARG);
    assert_msg_has("exactly one", NULL);
    both.f32 = NULL;
    const char *meta[4] = {"k", "v", "k", "w"};
    assert_int_equal(vkg_safetensors_write(path, &both, 1, meta, 2), VKG_ERR_INVALID_ARG);
    assert_msg_has("'k' given twice", NULL);
    assert_false(file_exists(path));
    assert_int_equal(vkg_safetensors_write(path, &both, 1, meta, 1), VKG_OK);
    assert_true(file_exists(path));
    /* a refused write leaves the existing file as it was */
    assert_int_equal(vkg_safetensors_write(path, &both, 1, meta, 2), VKG_ERR_INVALID_ARG);
    vkg_safetensors *s = NULL;
    int32_t back[2] = {0, 0};
    assert_int_equal(vkg_safetensors_open(path, &s), VKG_OK);
    assert_string_equal(vkg_safetensors_metadata(s, "k"), "v");
    assert_int_equal(vkg_safetensors_read_raw(s, "a", back, sizeof back), VKG_OK);
    assert_memory_equal(back, ints, sizeof back);
    vkg_safetensors_close(&s);
}

/* ---- the sharded index ---------------------------------------------------------------------- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void test_index(void **state)
{
    const char *path = tpath(state, "model.safetensors.index.json");
    write_text(path, "{\"metadata\": {\"total_size\": 123, \"x\": [1.5, null, {\"a\": true}]},\n"
                     " \"weight_map\": {\"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
                     "  \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\"}}\n");
    vkg_st_index idx;
    assert_int_equal(vkg_safetensors_index_read(path, &idx), VKG_OK);
    assert_int_equal(idx.count, 2);
    assert_string_equal(vkg_safetensors_index_lookup(&idx, "lm_head.weight"),
                        "model-00002-of-00002.safetensors");
    assert_string_equal(vkg_safetensors_index_lookup(&idx, "model.embed_tokens.weight"),
                        "model-00001-of-00002.safetensors");
    assert_null(vkg_safetensors_index_lookup(&idx, "absent"));
    vkg_safetensors_index_deinit(&idx);
    assert_int_equal(idx.count, 0);
    vkg_safetensors_index_deinit(NULL);

    static const struct {
        const char *text, *says;
    } bad[] = {
        {"{\"weight_map\": {\"a\": \"../a.safetensors\"}}", "'a'"},
        {"{\"weight_map\": {\"a\": \"sub/a.safetensors\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": \"sub\\\\a.safetensors\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": \"C:a.safetensors\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": \"\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}", "twice"},
        {"{\"weight_map\": {\"a\": 3}}", "not a file name"},
        {"{\"metadata\": {}}", "no \"weight_map\""},
        {"{\"weight_map\": {\"a\": \"x\"}", "truncated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i].text);
        assert_int_equal(vkg_safetensors_index_read(path, &idx), VKG_ERR_FORMAT);
        assert_msg_has(path, bad[i].says);
        assert_int_equal(idx.count, 0);
        assert_null(idx.entries);
    }
}

/* ---- the C side of tests/hf/safetensors_check.py ------------------------------------------- */

/* The script's inputs: fp32 values from bit patterns of a 64-bit LCG, after fixed specials. */
static uint32_t lcg_next(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 32);
}

static const uint32_t specials[] = {
    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f801000u, 0x3f803000u, 0x477fefffu, 0x477ff000u,
    0x33000000u, 0x33000001u, 0x33c00000u, 0x387fc000u, 0x80000000u, 0x7f800000u, 0xff800000u,
    0x7fc00000u, 0x00000001u, 0x7f7fffffu, 0x3eaaaaabu, 0xc0490fdbu, 0x00000000u,
};
#define N_SPECIAL (sizeof specials / sizeof specials[0])

static int cmd_write(const char *path)
{
    float sp[N_SPECIAL], r2[15], r3[24], r4[12], sc[1];
    for (size_t i = 0; i < N_SPECIAL; i++)
        sp[i] = bits_f32(specials[i]);
    uint64_t lcg = 38;
    float *all[4] = {sc, r2, r3, r4};
    size_t lens[4] = {1, 15, 24, 12};
    for (int a = 0; a < 4; a++)
        for (size_t i = 0; i < lens[a]; i++)
            all[a][i] = bits_f32(lcg_next(&lcg));
    static const int64_t ids[3] = {1, -2, INT64_MAX};
    static const uint16_t bf[2] = {0x3f80, 0xc000};
    vkg_st_tensor t[] = {
        {.name = "scalar", .dtype = VKG_ST_F32, .rank = 0, .f32 = sc},
        {.name = "specials.f32", .dtype = VKG_ST_F32, .rank = 1, .shape = {N_SPECIAL}, .f32 = sp},
        {.name = "specials.bf16", .dtype = VKG_ST_BF16, .rank = 1, .shape = {N_SPECIAL}, .f32 = sp},
        {.name = "specials.f16", .dtype = VKG_ST_F16, .rank = 1, .shape = {N_SPECIAL}, .f32 = sp},
        {.name = "r2", .dtype = VKG_ST_F32, .rank = 2, .shape = {3, 5}, .f32 = r2},
        {.name = "r3", .dtype = VKG_ST_BF16, .rank = 3, .shape = {2, 3, 4}, .f32 = r3},
        {.name = "r4", .dtype = VKG_ST_F16, .rank = 4, .shape = {2, 1, 3, 2}, .f32 = r4},
        {.name = "empty", .dtype = VKG_ST_F16, .rank = 2, .shape = {0, 4}, .f32 = sc},
        {.name = "ids", .dtype = VKG_ST_I64, .rank = 1, .shape = {3}, .data = ids},
        {.name = "raw.bf16", .dtype = VKG_ST_BF16, .rank = 1, .shape = {2}, .data = bf},
        {.name = "n\xc3\xa4me \"q\"\\/", .dtype = VKG_ST_F32, .rank = 1, .shape = {1}, .f32 = sc},
    };
    const char *meta[4] = {"format", "pt", "note", "a \"quoted\" \xc3\xbc\n"};
    vkg_status st = vkg_safetensors_write(path, t, (int)(sizeof t / sizeof t[0]), meta, 2);
    if (st < 0)
        fprintf(stderr, "%s\n", vkg_error_message());
    return st < 0;
}

static void print_hex(const void *p, size_t n)
{
    const unsigned char *b = p;
    if (!n)
        fputc('-', stdout);
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
}

static int cmd_dump(const char *path)
{
    vkg_safetensors *s = NULL;
    if (vkg_safetensors_open(path, &s) < 0) {
        printf("refused %s\n", vkg_error_message());
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < vkg_safetensors_metadata_count(s); i++) {
        const char *k, *v;
        vkg_safetensors_metadata_at(s, i, &k, &v);
        printf("M ");
        print_hex(k, strlen(k));
        printf(" ");
        print_hex(v, strlen(v));
        printf("\n");
    }
    for (int i = 0; i < vkg_safetensors_count(s) && !rc; i++) {
        const vkg_st_info *t = vkg_safetensors_info(s, i);
        unsigned char *raw = malloc(t->nbytes + 1);
        float *f = malloc((t->numel + 1) * sizeof *f);
        rc = !raw || !f || vkg_safetensors_read_raw(s, t->name, raw, t->nbytes) < 0;
        /* the raw bytes as stored: little-endian (the host order of every supported build) */
        printf("T ");
        print_hex(t->name, strlen(t->name));
        printf(" %s ", vkg_st_dtype_name(t->dtype));
        if (!t->rank)
            printf("-");
        for (int k = 0; k < t->rank; k++)
            printf("%s%lld", k ? "," : "", (long long)t->shape[k]);
        printf(" ");
        print_hex(raw, rc ? 0 : (size_t)t->nbytes);
        printf(" ");
        if (!rc && t->dtype <= VKG_ST_F16) {
            rc = vkg_safetensors_read_f32(s, t->name, f, t->numel) < 0;
            print_hex(f, rc ? 0 : (size_t)t->numel * 4);
        } else
            printf("-");
        printf("\n");
        free(raw);
        free(f);
    }
    if (rc)
        printf("error %s\n", vkg_error_message());
    vkg_safetensors_close(&s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "write"))
        return cmd_write(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "dump"))
        return cmd_dump(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_rounding, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_refusals, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_write_refusals, make_tmpdir, remove_tmpdir),
        cmocka_unit_test_setup_teardown(test_index, make_tmpdir, remove_tmpdir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
