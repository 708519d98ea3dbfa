/* Tests for src/base: status names, messages, the error macros and the escaping of untrusted
 * bytes, for messages and as text for a terminal (controls escaped, UTF-8 text kept). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"

static vkg_status fails_when_negative(int x)
{
    VKG_CHECK(x >= 0, VKG_ERR_INVALID_ARG, "x must be >= 0, got %d", x);
    return VKG_OK;
}

static vkg_status propagates(int x)
{
    VKG_TRY(fails_when_negative(x));
    return VKG_OK;
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(vkg_status_name(VKG_OK), "VKG_OK");
    assert_string_equal(vkg_status_name(VKG_ERR_IO), "VKG_ERR_IO");
    assert_string_equal(vkg_status_str(VKG_ERR_TIMEOUT), "deadline exceeded");
    assert_string_equal(vkg_status_name((vkg_status)-999), "VKG_UNKNOWN_STATUS");
}

static void test_check_records_message(void **state)
{
    (void)state;
    vkg_error_clear();
    assert_int_equal(propagates(3), VKG_OK);
    assert_string_equal(vkg_error_message(), "");
    assert_int_equal(propagates(-4), VKG_ERR_INVALID_ARG);
    const char *m = vkg_error_message();
    assert_non_null(strstr(m, "test_base.c:"));
    assert_non_null(strstr(m, "x must be >= 0, got -4"));
    vkg__error_wrap(VKG_ERR_INVALID_ARG, "loading %s", "model.bin");
    assert_non_null(strstr(vkg_error_message(), "loading model.bin: test_base.c:"));
}

/* The text a user reads: every code location gone, at the start, after a wrap's prefix and in a
 * peer's message passed on; names that only look alike (no line, a path, mid-sentence) kept. */
static void test_error_text_drops_locations(void **state)
{
    (void)state;
    vkg_error_clear();
    assert_string_equal(vkg_error_text(), "");
    assert_int_equal(propagates(-4), VKG_ERR_INVALID_ARG);
    assert_string_equal(vkg_error_text(), "x must be >= 0, got -4");
    vkg__error_wrap(VKG_ERR_INVALID_ARG, "loading %s", "model.bin");
    assert_string_equal(vkg_error_text(), "loading model.bin: x must be >= 0, got -4");
    assert_non_null(strstr(vkg_error_message(), "test_base.c:")); /* the full message keeps it */
    VKG_FAIL(VKG_ERR_PEER, "rank 1 failed: trainer.c:178: cannot create runs/x: No such file");
    assert_string_equal(vkg_error_text(), "rank 1 failed: cannot create runs/x: No such file");
    VKG_FAIL(VKG_ERR_IO, "data/a.c: not a shard; x.c:12 is text; at b.c:7: here");
    assert_string_equal(vkg_error_text(), "data/a.c: not a shard; x.c:12 is text; at b.c:7: here");
}

static void test_escape(void **state)
{
    (void)state;
    char out[64];
    const char raw[] = "ok \x1b[31mred\\\x00\x7f\xc4\xa0!";
    assert_string_equal(vkg__escape(out, sizeof out, raw, sizeof raw - 1),
                        "ok \\x1b[31mred\\\\\\x00\\x7f\\xc4\\xa0!");
    for (const char *p = out; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
    /* Cut at a whole byte, with "..." and within cap, for every cap. */
    for (size_t cap = 1; cap <= sizeof out; cap++) {
        memset(out, 'Z', sizeof out);
        vkg__escape(out, cap, raw, sizeof raw - 1);
        size_t len = strlen(out);
        assert_true(len < cap);
        if (len < 33 && cap >= 4)
            assert_string_equal(out + len - 3, "...");
        if (cap < sizeof out)
            assert_true(out[cap] == 'Z');
    }
    vkg__escape(out, 8, "\x1b\x1b\x1b", 3);
    assert_string_equal(out, "\\x1b..."); /* never half an escape */
    assert_string_equal(vkg__escape(out, sizeof out, "", 0), "");
}

static void expect_text(const char *raw, size_t n, const char *want)
{
    char out[256];
    assert_true(4 * n + 1 <= sizeof out);
    memset(out, 'Z', sizeof out);
    size_t len = vkg__escape_text(out, raw, n);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
}

static void test_escape_text(void **state)
{
    (void)state;
    /* Text, tabs, newlines and UTF-8 pass: "café ñ €𝄞" */
    const char *text = "caf\xc3\xa9\t\xc3\xb1\n\xe2\x82\xac\xf0\x9d\x84\x9e back\\slash";
    expect_text(text, strlen(text), text);
    /* C0 controls (ESC, BEL, CR, backspace), DEL and NUL are escaped. */
    const char ctl[] = "a\x1b]0;title\x07\x1b[2Jb\rc\x08\x7f\x00"
                       "d";
    expect_text(ctl, sizeof ctl - 1, "a\\x1b]0;title\\x07\\x1b[2Jb\\x0dc\\x08\\x7f\\x00d");
    /* C1 controls, raw (0x9b: CSI) and as UTF-8 (U+009B), escaped byte by byte. */
    expect_text("\x9b"
                "2J",
                3, "\\x9b2J");
    expect_text("\xc2\x9b"
                "2J",
                4, "\\xc2\\x9b2J");
    expect_text("\xc2\xa0", 2, "\xc2\xa0"); /* U+00A0 is text */
    /* Malformed UTF-8: overlong, surrogate, beyond U+10FFFF, truncated, stray continuation. */
    expect_text("\xc0\x9b", 2, "\\xc0\\x9b");
    expect_text("\xe0\x80\x9b", 3, "\\xe0\\x80\\x9b");
    expect_text("\xed\xa0\x80", 3, "\\xed\\xa0\\x80");
    expect_text("\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80");
    expect_text("\xe2\x82", 2, "\\xe2\\x82");
    expect_text("\x80x", 2, "\\x80x");
    expect_text("", 0, "");
    /* Every byte alone: the output never holds a control byte. */
    for (int b = 0; b < 256; b++) {
        char in = (char)b, out[8];
        vkg__escape_text(out, &in, 1);
        for (const char *p = out; *p; p++)
            assert_true(*p == '\n' || *p == '\t' ||
                        ((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_check_records_message),
        cmocka_unit_test(test_error_text_drops_locations),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_escape_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
