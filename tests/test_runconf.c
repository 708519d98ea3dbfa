/* Tests of run.json (src/cli/runconf.c) without a binary: a flag table's values written and read
 * back bit for bit (floats, strings with quotes and control bytes, choices, booleans), values
 * outside a flag's range (markers of "not given") and skipped flags left out, the shortest text
 * of a number, and a damaged file refused naming the file and the field, one table row each, its
 * bytes escaped; what is not a regular file or is too large refused unread; a resumed run's notes
 * showing run.json's values escaped. */
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

#include "cli/runconf.h"
#include "cli/train_resume.h"
#include "testutil.h"

typedef struct values {
    int i, b, choice, skipped;
    long long ll;
    uint64_t u;
    float f;
    double d;
    const char *s;
} values;

static const char *const colours[] = {"red", "green", NULL};

#define NFLAGS 9
static const unsigned char skip[NFLAGS] = {0, 0, 0, 0, 0, 0, 0, 0, 1};

static void make_flags(values *v, vkg_flag *fl)
{
    const vkg_flag t[NFLAGS] = {
        {"--int", VKG_FLAG_INT, &v->i, "", 0, 0, 100},
        {"--ll", VKG_FLAG_LL, &v->ll, "", 0, 1, 2147483647},
        {"--u64", VKG_FLAG_U64, &v->u, "", 0, 0, 0},
        {"--float", VKG_FLAG_FLOAT, &v->f, "", 0, 0, 10},
        {"--double", VKG_FLAG_DOUBLE, &v->d, "", 0, 0, 0},
        {"--str", VKG_FLAG_STR, &v->s, "", 0, 0, 0},
        {"--colour", VKG_FLAG_CHOICE, &v->choice, "", colours, 0, 0},
        {"--bool", VKG_FLAG_BOOL, &v->b, "", 0, 0, 0},
        {"--skipped", VKG_FLAG_INT, &v->skipped, "", 0, 0, 0},
    };
    memcpy(fl, t, sizeof t);
}

static void defaults(values *v)
{
    *v = (values){.i = 5, .ll = -1, .u = 9, .f = 6e-4f, .d = 0.5, .choice = 0, .skipped = 3};
}

/* A temporary file holding text; its path in path (cap bytes). */
static void write_tmp(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "/tmp/vkg_runconf_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_round_trip(void **state)
{
    (void)state;
    values v;
    vkg_flag fl[NFLAGS];
    make_flags(&v, fl);
    defaults(&v);
    v.i = 42, v.u = 18446744073709551615ull, v.f = 1.7e-3f, v.d = 0.1, v.choice = 1, v.b = 1;
    v.s = "say \"hi\"\\\n\tthere\x01";
    v.skipped = 77;
    char *json = vkg_cli_runconf_json(fl, NFLAGS, skip);
    assert_non_null(json);
    printf("%s", json);
    assert_null(strstr(json, "\"ll\""));  /* -1 is outside [1, 2^31-1]: not given */
    assert_null(strstr(json, "skipped")); /* skipped */
    assert_non_null(strstr(json, "\"float\": \"0.0017\"")); /* the shortest exact text */
    char path[64], err[512];
    write_tmp(path, sizeof path, json);
    free(json);
    values w;
    vkg_flag fw[NFLAGS];
    make_flags(&w, fw);
    defaults(&w);
    vkg_cli_runconf rc;
    int r = vkg_cli_runconf_load(path, fw, NFLAGS, skip, &rc, err, sizeof err);
    unlink(path);
    if (r != 0)
        fail_msg("load returned %d: %s", r, err);
    assert_int_equal(w.i, 42);
    assert_int_equal(w.ll, -1);
    assert_true(w.u == 18446744073709551615ull);
    assert_memory_equal(&w.f, &v.f, sizeof w.f);
    assert_memory_equal(&w.d, &v.d, sizeof w.d);
    assert_string_equal(w.s, v.s);
    assert_int_equal(w.choice, 1);
    assert_int_equal(w.b, 1);
    assert_int_equal(w.skipped, 3);
    assert_string_equal(rc.value[0], "42");
    assert_null(rc.value[1]);
    vkg_cli_runconf_free(&rc);
    /* No file: nothing changes. */
    assert_int_equal(
        vkg_cli_runconf_load("/nonexistent/run.json", fw, NFLAGS, skip, &rc, err, sizeof err), 1);
}

static void test_flag_text(void **state)
{
    (void)state;
    values v;
    vkg_flag fl[NFLAGS];
    char buf[64];
    make_flags(&v, fl);
    defaults(&v);
    v.f = 0.1f;
    assert_int_equal(vkg_cli_flag_text(&fl[3], buf, sizeof buf), 1);
    assert_string_equal(buf, "0.1");
    v.d = 1.0 / 3.0;
    assert_int_equal(vkg_cli_flag_text(&fl[4], buf, sizeof buf), 1);
    assert_true(strtod(buf, NULL) == v.d);
    assert_int_equal(vkg_cli_flag_text(&fl[1], buf, sizeof buf), 0); /* ll -1: out of range */
    assert_int_equal(vkg_cli_flag_text(&fl[5], buf, sizeof buf), 0); /* NULL string */
    assert_int_equal(vkg_cli_flag_text(&fl[7], buf, sizeof buf), 0); /* unset bool */
}

#define HEAD "{\"format\": \"vkgpt-run\", \"version\": 1, \"flags\": "

static void test_damaged_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {HEAD "{\"int\": \"500\"}}", "field \"flags.int\": --int must be a whole number"},
        {HEAD "{\"int\": 5}}", "field \"flags.int\": expected a string"},
        {HEAD "{\"colour\": \"blue\"}}", "field \"flags.colour\": --colour: 'blue'"},
        {HEAD "{\"bool\": \"maybe\"}}", "field \"flags.bool\": 'maybe' is not true or false"},
        {HEAD "{\"nope\": \"1\"}}", "field \"flags.nope\": not a setting"},
        {HEAD "{\"skipped\": \"1\"}}", "field \"flags.skipped\": not a setting"},
        {HEAD "{\"int\": \"1\", \"int\": \"2\"}}", "field \"flags.int\" is given twice"},
        {"{\"format\": \"other\", \"version\": 1, \"flags\": {}}", "field \"format\""},
        {"{\"format\": \"vkgpt-run\", \"version\": 2, \"flags\": {}}", "field \"version\" is 2"},
        {"{\"format\": \"vkgpt-run\", \"version\": 1}", "field \"flags\" is missing"},
        {"{\"format\": \"vkgpt-run\", \"flags\": {}}", "field \"version\" is missing"},
        {HEAD "{\"int\": \"1\"}, \"extra\": 1}", "field \"extra\""},
        {HEAD "{\"int\": \"1\"", "in field \"flags\""},
        {HEAD "{}} trailing", "vkg_runconf_"},
        /* control bytes of the file reach the message escaped */
        {HEAD "{\"\\u001b[2J\": \"1\"}}", "field \"flags.\\x1b[2J\": not a setting"},
        {HEAD "{\"\\u001b\": 5}}", "field \"flags.\\x1b\": expected a string (the value as "
                                   "it would be typed after --\\x1b)"},
        {HEAD "{\"bool\": \"\\u001b[2J\"}}", "'\\x1b[2J' is not true or false"},
        {HEAD "{\"colour\": \"\\u001b]0;x\\u0007\"}}", "'\\x1b]0;x\\x07' is not one of"},
        {"{\"format\": \"\\u009b2J\", \"version\": 1, \"flags\": {}}",
         "field \"format\" is '\\xc2\\x9b2J'"},
        {"{\"\\r\\u001b[K\": 1}", "field \"\\x0d\\x1b[K\": not a field"},
        {HEAD "{\"int\": \"1\\nresume: 2\"}}", "'1\\x0aresume: 2'"}, /* no line of its own */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        values v;
        vkg_flag fl[NFLAGS];
        make_flags(&v, fl);
        defaults(&v);
        char path[64], err[512];
        vkg_cli_runconf rc;
        write_tmp(path, sizeof path, cases[k].text);
        int r = vkg_cli_runconf_load(path, fl, NFLAGS, skip, &rc, err, sizeof err);
        unlink(path);
        printf("refused: %s\n", err);
        for (const char *c = err; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                fail_msg("case %zu: byte 0x%02x unescaped in '%s'", k, (unsigned char)*c, err);
        if (r != 2 || !strstr(err, path) || !strstr(err, cases[k].want))
            fail_msg("case %zu (%s): returned %d with '%s', wanted 2 naming %s and '%s'", k,
                     cases[k].text, r, err, path, cases[k].want);
        for (int i = 0; i < VKG_FLAGS_MAX; i++)
            assert_null(rc.value[i]); /* released on failure */
    }
}

#ifndef _WIN32 /* Windows has no FIFOs, no /dev/zero, no mkdtemp (test_io's case alike) */
/* What is not a regular file (a FIFO would block the read, /dev/zero never ends) or is larger
 * than any run's settings is refused, naming the path and why, before anything is read. */
static void test_not_regular_or_large_refused(void **state)
{
    (void)state;
    values v;
    vkg_flag fl[NFLAGS];
    make_flags(&v, fl);
    defaults(&v);
    vkg_cli_runconf rc;
    char dir[64] = "/tmp/vkg_runconf_dir_XXXXXX", path[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/run.json", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(vkg_cli_runconf_load(path, fl, NFLAGS, skip, &rc, err, sizeof err), 2);
    printf("refused: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "FIFO"));
    unlink(path);
    assert_int_equal(symlink("/dev/zero", path), 0);
    assert_int_equal(vkg_cli_runconf_load(path, fl, NFLAGS, skip, &rc, err, sizeof err), 2);
    printf("refused: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "not a regular file"));
    unlink(path);
    FILE *f = fopen(path, "w"); /* valid JSON, a byte too large */
    assert_non_null(f);
    const char *doc = HEAD "{}}";
    fputs(doc, f);
    for (size_t i = strlen(doc); i <= VKG_RUNCONF_MAX_BYTES; i++)
        fputc(' ', f);
    fclose(f);
    assert_int_equal(vkg_cli_runconf_load(path, fl, NFLAGS, skip, &rc, err, sizeof err), 2);
    printf("refused: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "more than 1048576 bytes"));
    assert_int_equal(truncate(path, VKG_RUNCONF_MAX_BYTES), 0); /* at the limit: read */
    assert_int_equal(vkg_cli_runconf_load(path, fl, NFLAGS, skip, &rc, err, sizeof err), 0);
    vkg_cli_runconf_free(&rc);
    unlink(path);
    rmdir(dir);
}
#endif

static void reset_values(void *ctx)
{
    defaults(ctx);
}

/* A flag given again on --resume is noted with run.json's value escaped for the terminal. */
static void test_resume_notes_escaped(void **state)
{
    (void)state;
    values v;
    vkg_flag fl[NFLAGS];
    make_flags(&v, fl);
    char dir[512], path[600];
    assert_int_equal(vkg_test_tmp_make(dir, sizeof dir, "vkg_runconf"), 0);
    snprintf(path, sizeof path, "%s/run.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(HEAD "{\"str\": \"old\\u001b[2J\\u0007\\nresume: --x\"}}", f);
    fclose(f);
    char *argv[] = {"train", "--str", "new", NULL};
    vkg_flags_result r;
    vkg_cli_resume res;
    assert_int_equal(
        vkg_cli_train_resume_settings(dir, fl, NFLAGS, 3, argv, reset_values, &v, &r, &res), 0);
    printf("%s", res.notes);
    assert_non_null(
        strstr(res.notes, "resume: --str new (the run had old\\x1b[2J\\x07\\x0aresume: --x)\n"));
    assert_null(strchr(res.notes, '\x1b'));
    assert_int_equal(strchr(res.notes, '\n') - res.notes, strlen(res.notes) - 1); /* one line */
    vkg_cli_runconf_free(&res.saved);
    free(res.json);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_flag_text),
        cmocka_unit_test(test_damaged_refused),
#ifndef _WIN32
        cmocka_unit_test(test_not_regular_or_large_refused),
#endif
        cmocka_unit_test(test_resume_notes_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
