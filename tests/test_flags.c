/* Tests of the CLI's flag parser (src/cli/flags.c) without a binary: every numeric type at and
 * past the ends of its range, strict forms (no trailing bytes, no exponent for whole numbers, no
 * infinity or NaN), suffixes that overflow, flags without values or with values they do not take,
 * positional arguments, and the record of which flags were given. Each case is one table row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/flags.h"

typedef struct values {
    int i, b, choice;
    long long ll;
    uint64_t u;
    float f;
    double d;
    const char *s;
} values;

static const char *const colours[] = {"red", "green", NULL};

#define NFLAGS 9
static void make_flags(values *v, vkg_flag *fl)
{
    const vkg_flag t[NFLAGS] = {
        {"--int", VKG_FLAG_INT, &v->i, "", 0, 0, 0},
        {"--small", VKG_FLAG_INT, &v->i, "", 0, -3, 7},
        {"--ll", VKG_FLAG_LL, &v->ll, "", 0, 1, 2147483647},
        {"--u64", VKG_FLAG_U64, &v->u, "", 0, 0, 0},
        {"--float", VKG_FLAG_FLOAT, &v->f, "", 0, 0, 0},
        {"--double", VKG_FLAG_DOUBLE, &v->d, "", 0, 0, 1},
        {"--str", VKG_FLAG_STR, &v->s, "", 0, 0, 0},
        {"--colour", VKG_FLAG_CHOICE, &v->choice, "", colours, 0, 0},
        {"--bool", VKG_FLAG_BOOL, &v->b, "", 0, 0, 0},
    };
    memcpy(fl, t, sizeof t);
}

typedef struct row {
    const char *args[4]; /* after argv[0]; NULL-terminated */
    int status;          /* vkg_flags_status */
    const char *want;    /* in the error message, or the value printed as "%lld"/"%llu"/"%.9g" */
} row;

/* The value the row's flag stored, printed as the row states it. */
static void stored(const values *v, const char *flag, char *buf, size_t cap)
{
    if (!strcmp(flag, "--int") || !strcmp(flag, "--small"))
        snprintf(buf, cap, "%d", v->i);
    else if (!strcmp(flag, "--ll"))
        snprintf(buf, cap, "%lld", v->ll);
    else if (!strcmp(flag, "--u64"))
        snprintf(buf, cap, "%llu", (unsigned long long)v->u);
    else if (!strcmp(flag, "--float"))
        snprintf(buf, cap, "%.9g", (double)v->f);
    else if (!strcmp(flag, "--double"))
        snprintf(buf, cap, "%.17g", v->d);
    else if (!strcmp(flag, "--str"))
        snprintf(buf, cap, "%s", v->s);
    else if (!strcmp(flag, "--colour"))
        snprintf(buf, cap, "%d", v->choice);
    else
        snprintf(buf, cap, "%d", v->b);
}

static const row rows[] = {
    {{"--int", "2147483647"}, VKG_FLAGS_OK, "2147483647"},
    {{"--int", "-2147483648"}, VKG_FLAGS_OK, "-2147483648"},
    {{"--int", "2147483648"},
     VKG_FLAGS_USAGE,
     "--int must be a whole number from -2147483648 to "
     "2147483647, got '2147483648'"},
    {{"--int", "1e3"}, VKG_FLAGS_USAGE, "got '1e3'"},
    {{"--int", "12abc"}, VKG_FLAGS_USAGE, "got '12abc'"},
    {{"--int", ""}, VKG_FLAGS_USAGE, "got ''"},
    {{"--int", " 5"}, VKG_FLAGS_USAGE, "got ' 5'"},
    {{"--int", "0x10"}, VKG_FLAGS_USAGE, "got '0x10'"},
    {{"--int", "2K"}, VKG_FLAGS_OK, "2048"},
    {{"--int", "2G"}, VKG_FLAGS_USAGE, "got '2G'"},
    {{"--int=+7"}, VKG_FLAGS_OK, "7"},
    {{"--small", "7"}, VKG_FLAGS_OK, "7"},
    {{"--small", "-3"}, VKG_FLAGS_OK, "-3"},
    {{"--small", "8"}, VKG_FLAGS_USAGE, "--small must be a whole number from -3 to 7, got '8'"},
    {{"--ll", "-128"}, VKG_FLAGS_USAGE, "--ll must be a whole number from 1 to 2147483647"},
    {{"--ll", "0"}, VKG_FLAGS_USAGE, "got '0'"},
    {{"--ll", "1e30"}, VKG_FLAGS_USAGE, "got '1e30'"},
    {{"--ll", "99999999999999999999999"}, VKG_FLAGS_USAGE, "got '99999999999999999999999'"},
    {{"--ll", "16K"}, VKG_FLAGS_OK, "16384"},
    {{"--u64", "18446744073709551615"}, VKG_FLAGS_OK, "18446744073709551615"},
    {{"--u64", "18446744073709551616"},
     VKG_FLAGS_USAGE,
     "--u64 must be a whole number from 0 to 18446744073709551615"},
    {{"--u64", "-1"}, VKG_FLAGS_USAGE, "got '-1'"},
    {{"--u64", "-0"}, VKG_FLAGS_OK, "0"},
    {{"--u64", "1e30"}, VKG_FLAGS_USAGE, "got '1e30'"},
    {{"--u64", "17179869184G"}, VKG_FLAGS_USAGE, "got '17179869184G'"}, /* 2^64 */
    {{"--u64", "17179869183G"}, VKG_FLAGS_OK, "18446744072635809792"},
    {{"--float", "1e30"}, VKG_FLAGS_OK, "1.00000002e+30"},
    {{"--float", "1e39"}, VKG_FLAGS_USAGE, "--float must be a number from -3.40282e+38 to"},
    {{"--float", "nan"}, VKG_FLAGS_USAGE, "got 'nan'"},
    {{"--float", "inf"}, VKG_FLAGS_USAGE, "got 'inf'"},
    {{"--float", "1e-400"}, VKG_FLAGS_USAGE, "got '1e-400'"},
    {{"--float", "1.5x"}, VKG_FLAGS_USAGE, "got '1.5x'"},
    {{"--double", "0.25"}, VKG_FLAGS_OK, "0.25"},
    {{"--double", "1.0000001"}, VKG_FLAGS_USAGE, "--double must be a number from 0 to 1"},
    {{"--str", "--int"}, VKG_FLAGS_OK, "--int"},
    {{"--str="}, VKG_FLAGS_OK, ""},
    {{"--colour", "green"}, VKG_FLAGS_OK, "1"},
    {{"--colour", "blue"}, VKG_FLAGS_USAGE, "--colour: 'blue' is not one of red, green"},
    {{"--bool"}, VKG_FLAGS_OK, "1"},
    {{"--bool=0"}, VKG_FLAGS_USAGE, "--bool takes no value, got '--bool=0'"},
    {{"--int"}, VKG_FLAGS_USAGE, "--int needs a value"},
    {{"--nope", "1"}, VKG_FLAGS_USAGE, "unknown option '--nope'"},
    {{"stray"}, VKG_FLAGS_USAGE, "unexpected argument 'stray'"},
    {{"--int", "5", "--help"}, VKG_FLAGS_HELP, "5"},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const row *w = &rows[k];
        values v = {0};
        vkg_flag fl[NFLAGS];
        vkg_flags_result r;
        char *argv[5] = {"cmd"}, got[64];
        int argc = 1;
        for (; argc < 5 && w->args[argc - 1]; argc++)
            argv[argc] = (char *)w->args[argc - 1];
        make_flags(&v, fl);
        int st = vkg_flags_parse_args(fl, NFLAGS, argc, argv, NULL, &r);
        char flag[32];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(w->args[0], "="), w->args[0]);
        stored(&v, flag, got, sizeof got);
        printf("%-10s %-24s -> %d %s\n", w->args[0], w->args[1] ? w->args[1] : "", st,
               st == VKG_FLAGS_USAGE ? r.error : got);
        if (st != w->status)
            fail_msg("row %zu: status %d, expected %d (%s)", k, st, w->status, r.error);
        if (st == VKG_FLAGS_USAGE ? !strstr(r.error, w->want) : strcmp(got, w->want) != 0)
            fail_msg("row %zu: '%s' where '%s' was expected", k,
                     st == VKG_FLAGS_USAGE ? r.error : got, w->want);
    }
}

/* Positional arguments go to pos; seen records the flags given, by table index. */
static void test_positional_and_seen(void **state)
{
    (void)state;
    values v = {0};
    vkg_flag fl[NFLAGS];
    vkg_flags_result r;
    char *argv[] = {"cmd", "a.txt", "--int", "3", "b.txt", "--bool", "--int=4"};
    char *pos[7];
    make_flags(&v, fl);
    assert_int_equal(vkg_flags_parse_args(fl, NFLAGS, 7, argv, pos, &r), VKG_FLAGS_OK);
    assert_int_equal(r.npos, 2);
    assert_string_equal(pos[0], "a.txt");
    assert_string_equal(pos[1], "b.txt");
    assert_int_equal(v.i, 4); /* the last one wins */
    assert_true(vkg_flags_seen(fl, NFLAGS, &r, "--int"));
    assert_true(vkg_flags_seen(fl, NFLAGS, &r, "--bool"));
    assert_false(vkg_flags_seen(fl, NFLAGS, &r, "--ll"));
    assert_string_equal(r.error, "");
}

/* Comma-separated lists of whole numbers (--rank-batch 4,2,2): strict, bounded, within capacity. */
static void test_int_list(void **state)
{
    (void)state;
    int v[3];
    assert_int_equal(vkg_flags_int_list("4,2,2", 1, 8, v, 3), 3);
    assert_int_equal(v[0], 4);
    assert_int_equal(v[2], 2);
    assert_int_equal(vkg_flags_int_list("8", 1, 8, v, 3), 1);
    static const char *const bad[] = {
        "",   ",", "4,", ",4",      "4,,2", "4, 2", " 4",  "+4",
        "-4", "0", "9",  "4,2,2,2", "4x",   "4.0",  "1e1", "99999999999999999999999",
        "4;2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (vkg_flags_int_list(bad[i], 1, 8, v, 3) != -1)
            fail_msg("'%s' was taken as a list", bad[i]);
}

/* --help's defaults: the value each flag holds, in the form it is given; none for a BOOL flag, a
 * NULL string or a help text that states its own; and those of before parsing, even when flags
 * given before --help have changed the values. */
static void test_defaults(void **state)
{
    (void)state;
    values v = {
        .i = -3, .ll = 77, .u = 18446744073709551615ull, .f = 6e-4f, .d = 0.25, .choice = 1};
    vkg_flag fl[NFLAGS];
    make_flags(&v, fl);
    char buf[64];
    static const char *const want[NFLAGS] = {
        "-3", "-3", "77", "18446744073709551615", "0.0006", "0.25", "", "green", ""};
    for (int i = 0; i < NFLAGS; i++)
        assert_string_equal(vkg_flags_default(&fl[i], buf, sizeof buf), want[i]);
    v.s = "x.bin";
    assert_string_equal(vkg_flags_default(&fl[6], buf, sizeof buf), "x.bin");
    fl[0].help = "a count (default: all)";
    assert_string_equal(vkg_flags_default(&fl[0], buf, sizeof buf), "");
    v.choice = 5; /* not one of the choices */
    assert_string_equal(vkg_flags_default(&fl[7], buf, sizeof buf), "");

    v.choice = 1;
    char path[] = "/tmp/vkg_test_flags_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    assert_non_null(f);
    FILE *saved = stdout;
    stdout = f;
    char *argv[] = {"cmd", "--ll", "5", "--colour", "red", "--help"};
    int rc = vkg_flags_parse("cmd", "[options]", fl, NFLAGS, 6, argv, NULL, NULL);
    stdout = saved;
    assert_int_equal(rc, VKG_FLAGS_HELP);
    char text[4096] = {0};
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    unlink(path);
    text[n] = '\0';
    assert_non_null(strstr(text, "--ll "));
    assert_non_null(strstr(text, "(default: 77)"));    /* not 5 */
    assert_non_null(strstr(text, "(default: green)")); /* not red */
    assert_null(strstr(text, "(default: 5)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_positional_and_seen),
        cmocka_unit_test(test_int_list),
        cmocka_unit_test(test_defaults),
    };
    return cmocka_run_group_tests_name("flags", tests, NULL, NULL);
}
